/* Scratch: big buffers that live for one encode on the exporting thread.
 *
 * Large mallocs come from mmap and go back to the kernel when freed, so
 * each encode would touch its megabytes of fresh pages one fault at a
 * time (about 2 us each on a VM: over a millisecond per 10k-stack period).
 * Scratch maps them with MAP_POPULATE, so the kernel supplies every page in
 * the one mmap call, and still gives them back at free: nothing stays
 * resident between periods. Small requests are plain calloc. Any thread. */
#ifndef PN_SCRATCH_H
#define PN_SCRATCH_H

#include <stddef.h>

/* n zeroed bytes, or NULL. */
void *pn_scratch_alloc(size_t n);
/* p as returned for the same n; p may be NULL. */
void pn_scratch_free(void *p, size_t n);

#endif
