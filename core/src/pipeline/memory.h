/* The memory driver's state (memory.c): the sampled-allocation table and
 * its consumer thread. Core and tests only. */
#ifndef PN_MEMORY_H
#define PN_MEMORY_H

#include "pyroscope_native.h"

typedef struct pn_mem pn_mem;

pn_mem *pn_mem_new(pn_driver *d, const pn_driver_opts *o, const pn_config *c, pn_error *e);
int pn_mem_start(pn_mem *m, pn_error *e);
/* Stop the consumer thread (idempotent); the flusher's pn_mem_before_cut
 * still works after it. */
void pn_mem_stop(pn_mem *m);
void pn_mem_free_all(pn_mem *m);
/* Flusher, just before the store is cut: record every committed
 * allocation, then the snapshot of the sampled objects alive now. */
void pn_mem_before_cut(pn_mem *m);
/* Fork path: prepare holds the consumer out of a pass (its lock), parent
 * releases it, child re-makes the lock and restarts the thread. */
void pn_mem_fork_prepare(pn_mem *m);
void pn_mem_fork_parent(pn_mem *m);
void pn_mem_fork_child(pn_mem *m);
/* The probability-weighted estimate for one sampled allocation of `size`
 * bytes at mean interval `interval`: objects and bytes it stands for. */
void pn_mem_scale(double interval, size_t size, int64_t *objects, int64_t *bytes);

#endif
