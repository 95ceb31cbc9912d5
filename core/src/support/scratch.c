/* Scratch buffers (see scratch.h). */
#include <stdlib.h>
#include <sys/mman.h>

#include "support/scratch.h"

/* Below this, malloc's own free lists serve the request without faults. */
#define SCRATCH_MMAP_MIN ((size_t)128 << 10)

void *pn_scratch_alloc(size_t n)
{
    if (n < SCRATCH_MMAP_MIN)
        return calloc(1, n ? n : 1);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pn_scratch_free(void *p, size_t n)
{
    if (!p)
        return;
    if (n < SCRATCH_MMAP_MIN)
        free(p);
    else
        munmap(p, n);
}
