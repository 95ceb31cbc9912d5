/* Aggregation internals: grace periods, the two-period store, label-set
 * reclamation. Core and tests only; bindings use pyroscope_native.h. */
#ifndef PN_STORE_H
#define PN_STORE_H

#include "pyroscope_native.h"
#include "aggregation/grace.h"

/* Bytes of s's tables resident in
 * RAM now (they are reserved for their maximum but cost RAM only where
 * written). For stats and tests; any thread that may read s. */
size_t pn_symbols_resident_bytes(const pn_symbols *s);

/* Free every retired set that no reader can hold any more (releases do a
 * few each; the flusher calls this once per period). Any thread. */
void pn_labels_reclaim(void);
/* Retired sets not yet freed: for tests and stats. */
size_t pn_labelset_retired(void);
/* Fork path (pipeline/fork.c): prepare takes the label locks, parent and
 * child release them; child also forgets the threads that did not survive. */
void pn_labels_fork_prepare(void);
void pn_labels_fork_parent(void);
void pn_labels_fork_child(void);

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

/* A read-only view of one aggregated sample of a swapped-out period. */
typedef struct {
    const pn_frame_id *frames;  /* leaf first */
    uint32_t depth;
    uint32_t stack;             /* the period's stack id */
    uint32_t label_set;         /* the period's label-set index (0: none) */
    const uint32_t *label_pairs; /* key sid, value sid, ... (nlabels pairs) */
    uint32_t nlabels;
    uint64_t tid;               /* 0 when not reported */
    uint32_t thread_name;       /* string id, PN_STR_EMPTY when not reported */
    const int64_t *values;      /* nvalues entries */
} pn_sample_view;

typedef struct {
    uint64_t samples_added;     /* pn_period_add calls that landed */
    uint64_t overflow_samples;  /* of those, folded into [overflow] */
    uint64_t truncated_stacks;  /* cut at max_depth */
    uint64_t symbols_dropped;
    uint64_t labels_dropped;    /* samples kept without labels: label tables full */
    /* Sampler ticks that wrote here, the configured intervals they
     * covered, and how many of those the CPU budget skipped. */
    uint64_t ticks, tick_slots, throttled_slots;
    /* Pooled samples (pn_tick_begin_pooled): the CPU of the threads they
     * stand for, and the wall values they were recorded with. */
    int64_t pooled_cpu_ns, pooled_value_ns;
} pn_period_stats;

pn_store *pn_store_new(const pn_store_limits *l, pn_error *e);
void pn_store_free(pn_store *s);
const pn_store_limits *pn_store_get_limits(const pn_store *s);

/* Writer: one thread at a time per store (a driver's recording thread).
 * begin/end bracket a recording section (grace.h: pointers loaded inside
 * it stay valid until end); route returns the period a sample taken at
 * CLOCK_MONOTONIC `time_mono` (0: now) belongs to, or NULL when that
 * period was sealed already (the sample is counted as late). Lock-free, no
 * allocation. */
void pn_store_write_begin(pn_store *s);
void pn_store_write_end(pn_store *s);
pn_period *pn_store_route(pn_store *s, int64_t time_mono);
pn_period *pn_store_active(pn_store *s);
pn_grace_reader *pn_store_reader(pn_store *s);
uint64_t pn_store_late(const pn_store *s);

/* Flusher: cut makes a fresh period active from (now_real, now_mono) and
 * returns the old one, which keeps taking samples older than the cut
 * (late batches) until seal; seal waits until no writer can still add to
 * it. Read it, then give it back with pn_store_recycle before the next
 * cut. swap is cut + seal at once (for a driver whose samples are never
 * late). */
pn_period *pn_store_cut(pn_store *s, int64_t now_real, int64_t now_mono);
void pn_store_seal(pn_store *s, pn_period *p);
pn_period *pn_store_swap(pn_store *s, int64_t now_ns);
void pn_store_recycle(pn_store *s, pn_period *p);
/* After fork in the child: empty both periods (no writer exists). */
void pn_store_reset(pn_store *s, int64_t now_ns);

const pn_symbols *pn_period_symbols_const(const pn_period *p);
/* Add one sample. frames are leaf first; stacks deeper than max_depth keep
 * the max_depth-1 leaf-most frames plus [truncated] at the root end.
 * labels may be NULL (empty); its pairs are copied. values has nvalues
 * entries. */
void pn_period_add(pn_period *p, const pn_frame_id *frames, size_t depth,
                   const pn_labelset *labels, uint64_t tid, uint32_t thread_name,
                   const int64_t *values);
/* The same with the labels base ∪ labels (labels win on equal keys; either
 * may be NULL), merged once per pair of sets and period. A merge of more
 * than PN_MAX_LABELS keeps `labels` alone and counts labels_dropped. */
void pn_period_add_merged(pn_period *p, const pn_frame_id *frames, size_t depth,
                          const pn_labelset *base, const pn_labelset *labels, uint64_t tid,
                          uint32_t thread_name, const int64_t *values);
size_t pn_period_sample_count(const pn_period *p);
void pn_period_sample(const pn_period *p, size_t i, pn_sample_view *out);
int pn_period_nvalues(const pn_period *p);
uint32_t pn_period_stack_count(const pn_period *p);
const pn_frame_id *pn_period_stack(const pn_period *p, uint32_t i, uint32_t *depth);
uint32_t pn_period_label_set_count(const pn_period *p);
const uint32_t *pn_period_label_set(const pn_period *p, uint32_t i, uint32_t *npairs);
int64_t pn_period_start_ns(const pn_period *p);
int64_t pn_period_end_ns(const pn_period *p);
int64_t pn_period_start_mono(const pn_period *p);
int64_t pn_period_end_mono(const pn_period *p);
uint64_t pn_period_seq(const pn_period *p);
void pn_period_get_stats(const pn_period *p, pn_period_stats *out);
/* The writer: one sampler tick covering `slots` intervals, `throttled` of
 * them skipped by the CPU budget, recorded into p. */
void pn_period_add_tick(pn_period *p, uint64_t slots, uint64_t throttled);
void pn_period_add_pooled(pn_period *p, int64_t cpu_ns, int64_t value_ns);
/* Bytes of both periods' tables
 * (symbols included) resident in RAM now. Any thread (a page-table query;
 * it reads no table contents). */
size_t pn_store_resident_bytes(const pn_store *s);

#endif
