/* Finding a thread's kernel id from its pthread_t (see pthread_tid.h). */
#include "pthread_tid.h"

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Descriptor bytes searched: glibc's tid is at 720 on x86-64 and 208 on
 * aarch64, musl's within the first 64. */
#define SEARCH_BYTES 2048

/* Marks, in hit[], every int-aligned offset of this thread's descriptor
 * that holds its tid. */
static void mark_own_tid(unsigned char *hit)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    unsigned char desc[SEARCH_BYTES];
    size_t n = SEARCH_BYTES;
    /* The descriptor may sit near the end of a mapping: shrink the copy
     * until it reads. getpid() rather than pn_safe_read's cached pid: a
     * forked child may get here before the fork path refreshed it. */
    for (; n >= 256; n /= 2) {
        struct iovec local = {desc, n}, remote = {(void *)pthread_self(), n};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n)
            break;
    }
    if (n < 256)
        return;
    for (size_t o = 0; o + sizeof tid <= n; o += sizeof tid) {
        pid_t v;
        memcpy(&v, desc + o, sizeof v);
        if (v == tid)
            hit[o / sizeof tid] = 1;
    }
}

static void *helper(void *hit)
{
    mark_own_tid(hit);
    return NULL;
}

/* The offset once found, +1 (0: not yet). The C library does not change
 * under a process or its forked children. Callers hold the GIL. */
static size_t found_plus_1;

int pthread_tid_offset(size_t *off, pn_error *e)
{
    if (found_plus_1) {
        *off = found_plus_1 - 1;
        return 0;
    }
    unsigned char mine[SEARCH_BYTES / sizeof(pid_t)] = {0};
    unsigned char other[SEARCH_BYTES / sizeof(pid_t)] = {0};
    mark_own_tid(mine);
    /* A second thread with another tid rules out words that only happen
     * to equal ours (the main thread's tid is also the pid). */
    pthread_t t;
    if (pthread_create(&t, NULL, helper, other) != 0)
        return pn_fail(e, PN_EIO, "pyroscope: cannot start a thread to find thread ids");
    pthread_join(t, NULL);
    for (size_t i = 0; i < sizeof mine; i++) {
        if (mine[i] && other[i]) {
            *off = i * sizeof(pid_t);
            found_plus_1 = *off + 1;
            return 0;
        }
    }
    return pn_fail(e, PN_EINVAL, "pyroscope: cannot find the thread id in this C library's "
                                 "thread descriptor (CPython 3.10 needs it for CPU times)");
}

pid_t pthread_tid_of(unsigned long pthread, size_t off)
{
    pid_t tid;
    if (pthread == 0 || pn_safe_read(&tid, (const char *)pthread + off, sizeof tid) != 0 ||
        tid < 0)
        return 0;
    return tid;
}
