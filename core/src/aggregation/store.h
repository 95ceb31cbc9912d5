/* Aggregation internals: grace periods, the two-period store, label-set
 * reclamation. Core and tests only; bindings use pyroscope_native.h. */
#ifndef PN_STORE_H
#define PN_STORE_H

#include "pyroscope_native.h"

/* ----------------------------------------------------------------- epoch */

/* The sampling thread brackets each tick with enter/exit. Other threads use
 * the counter to know when the sampler can no longer hold a pointer it loaded
 * before some moment (label-set reclamation, store swaps). One sampling
 * thread at a time. */
void pn_epoch_enter(void);
void pn_epoch_exit(void);
uint64_t pn_epoch_now(void);
/* True once no tick that was running at `seen` (a value of pn_epoch_now())
 * can still be running. */
int pn_epoch_passed(uint64_t seen);
/* Wait (sleeping in 100 us steps) until pn_epoch_passed(seen). */
void pn_epoch_wait(uint64_t seen);

/* Bytes of s's tables resident in
 * RAM now (they are reserved for their maximum but cost RAM only where
 * written). For stats and tests; any thread that may read s. */
size_t pn_symbols_resident_bytes(const pn_symbols *s);

/* Sampler side, between pn_epoch_enter/exit: the set of kernel thread `tid`
 * (the empty set when it has none); stays valid until the store period it
 * is recorded in has been encoded. Lock-free. */
const pn_labelset *pn_labels_of_thread(pid_t tid);
/* Free sets that no thread holds and no live period uses. `live_period` is
 * the sequence number of the oldest period that may still reference sets.
 * Exporter thread. */
void pn_labels_collect(uint64_t live_period);
/* Mark ls as used by period `period_seq` (store writer). */
void pn_labelset_mark_used(const pn_labelset *ls, uint64_t period_seq);

/* ----------------------------------------------------------------- store */


typedef struct {
    uint32_t max_stacks;        /* distinct stacks per period (default 16384) */
    uint32_t max_samples;       /* distinct (stack, labels, thread) (default 2*max_stacks) */
    uint32_t max_depth;         /* frames per stack, cut marked (default 128) */
    size_t symbol_bytes;        /* string bytes per period (default 2 MiB) */
    uint32_t max_frames;        /* distinct frames per period (default 65536) */
    int nvalues;                /* values per sample, 1..PN_MAX_VALUES */
} pn_store_limits;

void pn_store_limits_default(pn_store_limits *l);

typedef struct pn_store pn_store;
typedef struct pn_period pn_period;

/* A read-only view of one aggregated sample of a swapped-out period. */
typedef struct {
    const pn_frame_id *frames;  /* leaf first */
    uint32_t depth;
    const pn_labelset *labels;
    uint64_t tid;               /* 0 when not reported */
    uint32_t thread_name;       /* string id, PN_STR_EMPTY when not reported */
    const int64_t *values;      /* nvalues entries */
} pn_sample_view;

typedef struct {
    uint64_t samples_added;     /* pn_period_add calls that landed */
    uint64_t overflow_samples;  /* of those, folded into [overflow] */
    uint64_t truncated_stacks;  /* cut at max_depth */
    uint64_t symbols_dropped;
} pn_period_stats;

pn_store *pn_store_new(const pn_store_limits *l, pn_error *e);
void pn_store_free(pn_store *s);
const pn_store_limits *pn_store_get_limits(const pn_store *s);

/* Writer (one thread at a time; the sampler): begin enters the epoch and
 * returns the active period; end leaves it. No allocation, no locks. */
pn_period *pn_store_write_begin(pn_store *s);
void pn_store_write_end(pn_store *s);

/* Exporter: make a fresh period active, wait until the writer has left the
 * old one, and return it. `now_ns` is CLOCK_REALTIME and becomes the old
 * period's end and the new one's start. Then read it and give it back with
 * pn_store_recycle before the next swap. */
pn_period *pn_store_swap(pn_store *s, int64_t now_ns);
void pn_store_recycle(pn_store *s, pn_period *p);
/* After fork in the child: empty both periods (no writer exists). */
void pn_store_reset(pn_store *s, int64_t now_ns);

pn_symbols *pn_period_symbols(pn_period *p);
const pn_symbols *pn_period_symbols_const(const pn_period *p);
/* Add one sample. frames are leaf first; stacks deeper than max_depth keep
 * the max_depth-1 leaf-most frames plus [truncated] at the root end.
 * labels may be NULL (empty). values has nvalues entries. */
void pn_period_add(pn_period *p, const pn_frame_id *frames, size_t depth,
                   const pn_labelset *labels, uint64_t tid, uint32_t thread_name,
                   const int64_t *values);
size_t pn_period_sample_count(const pn_period *p);
void pn_period_sample(const pn_period *p, size_t i, pn_sample_view *out);
int pn_period_nvalues(const pn_period *p);
int64_t pn_period_start_ns(const pn_period *p);
int64_t pn_period_end_ns(const pn_period *p);
uint64_t pn_period_seq(const pn_period *p);
void pn_period_get_stats(const pn_period *p, pn_period_stats *out);
/* Bytes of both periods' tables
 * (symbols included) resident in RAM now. Any thread (a page-table query;
 * it reads no table contents). */
size_t pn_store_resident_bytes(const pn_store *s);

#endif
