/* Reading memory that may vanish underneath us, without faulting. */
#include <errno.h>
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

/* On a thread that armed the fault guard (the sampler), a guarded plain
 * copy, unless the guard declines it. Elsewhere, process_vm_readv on our own pid: it returns EFAULT for
 * unmapped source pages instead of raising SIGSEGV, which is exactly the
 * contract walkers need, at the price of a syscall per read. */
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
    pid_t pid = atomic_load_explicit(&self_pid, memory_order_relaxed);
    if (pid == 0)
        pid = getpid(); /* called before constructors ran */
    struct iovec local = {dst, n};
    struct iovec remote = {(void *)addr, n};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    return got == (ssize_t)n ? 0 : -1;
}
