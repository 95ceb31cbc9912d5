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

#include "pyroscope_native.h" /* declares pn_pages_*: walkers use them too */

#endif
