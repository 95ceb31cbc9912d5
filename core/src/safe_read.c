/* Reading memory that may vanish underneath us, without faulting. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pyroscope_native.h"

/* process_vm_readv on our own pid returns EFAULT for unmapped source pages
 * instead of raising SIGSEGV, which is exactly the contract walkers need.
 * It costs one syscall, so walkers copy whole structs per call. */
int pn_safe_read(void *dst, const void *addr, size_t n)
{
    if (n == 0)
        return 0;
    if (addr == NULL)
        return -1;
    struct iovec local = {dst, n};
    struct iovec remote = {(void *)addr, n};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    return got == (ssize_t)n ? 0 : -1;
}
