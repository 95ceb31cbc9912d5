/* Reading memory that may vanish underneath us, without faulting. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "sampling/sampler.h"

/* Our pid, so a read costs one syscall rather than two (glibc no longer
 * caches getpid). Written at load time and by the fork path in a child
 * before it restarts any sampler, read by any thread. */
static _Atomic pid_t self_pid;

void pn_safe_read_after_fork(void)
{
    atomic_store(&self_pid, getpid());
    pn_fault_guard_after_fork();
}

__attribute__((constructor)) static void safe_read_init(void) { pn_safe_read_after_fork(); }

/* Set once process_vm_readv turned out missing: qemu-user answers ENOSYS,
 * a seccomp filter ENOSYS or EPERM (on our own pid nothing else refuses).
 * Any thread. */
static atomic_int no_vm_readv;

/* What process_vm_readv does, by write(): the kernel copies from addr into
 * a pipe and answers EFAULT (or a short count) for unmapped pages, with no
 * signal. A pipe per read, so no two threads share one; a page at a time,
 * below the pipe's capacity. Two more syscalls and two closes a read: only
 * where process_vm_readv is missing. */
static int pipe_read(void *dst, const void *addr, size_t n)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0)
        return -1;
    int rc = 0;
    for (size_t done = 0; done < n && rc == 0;) {
        size_t k = n - done < 4096 ? n - done : 4096;
        if (write(fd[1], (const char *)addr + done, k) != (ssize_t)k ||
            read(fd[0], (char *)dst + done, k) != (ssize_t)k)
            rc = -1;
        done += k;
    }
    close(fd[0]);
    close(fd[1]);
    return rc;
}

/* On a thread that armed the fault guard (the sampler), a guarded plain
 * copy, unless the guard declines it. Elsewhere, process_vm_readv on our
 * own pid: it returns EFAULT for unmapped source pages instead of raising
 * SIGSEGV, which is exactly the contract walkers need, at the price of a
 * syscall per read; where it is missing, a pipe does the same. errno is
 * left as it was: the caller may be an application thread. */
int pn_safe_read(void *dst, const void *addr, size_t n)
{
    if (n == 0)
        return 0;
    if (addr == NULL)
        return -1;
    if (pn_fault_guard_armed()) {
        int rc = pn_fault_guard_copy(dst, addr, n);
        if (rc <= 0)
            return rc;
    }
    int saved = errno, rc;
    if (atomic_load_explicit(&no_vm_readv, memory_order_relaxed)) {
        rc = pipe_read(dst, addr, n);
    } else {
        pid_t pid = atomic_load_explicit(&self_pid, memory_order_relaxed);
        if (pid == 0)
            pid = getpid(); /* called before constructors ran */
        struct iovec local = {dst, n};
        struct iovec remote = {(void *)addr, n};
        ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        rc = got == (ssize_t)n ? 0 : -1;
        if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
            atomic_store_explicit(&no_vm_readv, 1, memory_order_relaxed);
            rc = pipe_read(dst, addr, n);
        }
    }
    errno = saved;
    return rc;
}
