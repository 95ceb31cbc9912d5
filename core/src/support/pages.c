/* Page-backed tables (see pages.h). */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/pages.h"

#define ALIGN 64 /* table start: a cache line, enough for any field */

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static uintptr_t page_floor(uintptr_t a, size_t page) { return a & ~(uintptr_t)(page - 1); }

/* Layout: [slack < one page][table][< ALIGN bytes][guard page]. The mapping
 * starts at the page holding the table's first byte, so the slack, the
 * table and the spans are all known from p and bytes alone. */
static size_t span_of(size_t bytes, size_t page)
{
    return (bytes + page - 1) / page * page;
}

void *pn_pages_new(size_t bytes)
{
    size_t page = page_size();
    if (bytes == 0)
        bytes = 1;
    if (bytes > SIZE_MAX / 2)
        return NULL;
    size_t span = span_of(bytes, page);
    char *base = mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    if (mprotect(base + span, page, PROT_NONE) != 0) {
        munmap(base, span + page);
        return NULL;
    }
#ifdef MADV_NOHUGEPAGE
    /* With transparent huge pages set to "always", one write would make
     * 2 MiB resident: the opposite of what these tables are for. */
    (void)madvise(base, span, MADV_NOHUGEPAGE);
#endif
    return base + ((span - bytes) & ~(size_t)(ALIGN - 1));
}

void pn_pages_free(void *p, size_t bytes)
{
    if (!p)
        return;
    size_t page = page_size();
    if (bytes == 0)
        bytes = 1;
    munmap((void *)page_floor((uintptr_t)p, page), span_of(bytes, page) + page);
}

void pn_pages_clear(void *p, size_t used)
{
    if (!p || used == 0)
        return;
    size_t page = page_size();
    uintptr_t lo = page_floor((uintptr_t)p, page);
    uintptr_t hi = page_floor((uintptr_t)p + used + page - 1, page);
    /* Whole pages: before p there is only slack, and past `used` the table
     * holds zeros by the caller's word, so dropping them changes nothing
     * but the resident size. The pages read as zeros from now on. */
    if (madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0)
        memset(p, 0, used); /* e.g. locked by mlockall: keep the contents right */
}

size_t pn_pages_resident(const void *p, size_t bytes)
{
    if (!p || bytes == 0)
        return 0;
    size_t page = page_size();
    uintptr_t lo = page_floor((uintptr_t)p, page);
    uintptr_t hi = page_floor((uintptr_t)p + bytes + page - 1, page);
    size_t resident = 0;
    unsigned char vec[256];
    for (uintptr_t a = lo; a < hi;) {
        size_t n = (hi - a) / page < sizeof vec ? (hi - a) / page : sizeof vec;
        if (mincore((void *)a, n * page, vec) != 0)
            return 0;
        for (size_t i = 0; i < n; i++)
            resident += vec[i] & 1;
        a += n * page;
    }
    return resident * page;
}
