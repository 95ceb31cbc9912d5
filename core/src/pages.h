/* Page-backed tables: large zero-filled arrays taken from the kernel with
 * mmap instead of malloc, so they cost RAM only where they are written.
 *
 * The intern tables are reserved for the configured maximum and usually
 * hold a small part of it. Untouched anonymous pages are not resident, and
 * clearing gives the pages back, so a table's resident memory follows what
 * it holds now, not the most it ever held. malloc promises neither: calloc
 * clears recycled heap memory (making all of it resident) and free keeps
 * pages that are not at the top of a heap.
 *
 * Each table ends just below a PROT_NONE guard page: running off its end
 * faults at once in every build (the sanitizers do not watch mmap'ed
 * memory). No locks; the functions are safe on any thread, and none of them
 * is called on the sampler thread. */
#ifndef PN_PAGES_H
#define PN_PAGES_H

#include <stddef.h>

/* A zeroed table of `bytes` (64-byte aligned); NULL when the address space
 * cannot be reserved. */
void *pn_pages_new(size_t bytes);
/* p and bytes as given to / returned by pn_pages_new; p may be NULL. */
void pn_pages_free(void *p, size_t bytes);
/* Zero the first `used` bytes of table p (every byte written since the
 * table was new or last cleared must lie in them) and hand their pages back
 * to the kernel. */
void pn_pages_clear(void *p, size_t used);
/* Bytes of the pages of [p, p + bytes) that are resident now. */
size_t pn_pages_resident(const void *p, size_t bytes);

#endif
