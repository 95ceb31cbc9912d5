/* Aggregation of samples by (stack, label set, thread) into two periods.
 *
 * One writer (the sampler) adds to the active period with no locks and no
 * allocation: every table is reserved at creation for the maximum of
 * pn_store_limits (pages.h: address space, no RAM until written), and the
 * hash indexes grow in place within their reservations (index.h). So the
 * resident memory of a period follows what it holds, and recycling a period
 * hands its pages back. The exporter swaps periods (pn_store_swap), reads
 * the old one at leisure and recycles it. Overflow never loses a sample: a
 * full stack table maps the sample to the [overflow] stack, a full sample
 * table adds it to the first sample (the [overflow] stack, no labels), and
 * both are counted.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/hash.h"
#include "support/clock.h"
#include "support/index.h"
#include "support/pages.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"

typedef struct {
    uint32_t off;       /* first frame in the frame arena */
    uint32_t depth;
    uint32_t hash;
} stack_ent;

typedef struct {
    uint32_t stack;
    uint32_t thread_name;
    uint64_t tid;
    const pn_labelset *labels;
    uint32_t hash;
    int64_t values[PN_MAX_VALUES];
} sample_ent;

/* Written by the store's writer while active; by the exporter once swapped
 * out (read, then recycled); never by both at once. */
struct pn_period {
    uint64_t seq;
    int64_t start_ns, end_ns;
    int nvalues;
    pn_symbols *sym;

    pn_frame_id *frames;
    size_t nframes, max_frames;

    stack_ent *stacks;
    uint32_t nstacks, max_stacks;
    pn_index stack_index;       /* stack id + 1 */

    sample_ent *samples;
    uint32_t nsamples, max_samples;
    pn_index sample_index;      /* sample index + 1 */

    pn_period_stats stats;

    /* Writer-owned: cutting deep stacks (shared by both periods; there is
     * one writer at a time). */
    pn_frame_id *scratch;
    uint32_t max_depth;
};

struct pn_store {
    pn_store_limits lim;
    pn_period periods[2];
    /* Written by the exporter (swap), read by the writer at write_begin. */
    _Atomic(pn_period *) active;
    pn_frame_id *scratch;
    /* Exporter-owned. */
    uint64_t next_seq;
    pn_period *drained;         /* swapped out and not yet recycled */
};

#define STACK_OVERFLOW 0u /* stack id of the one-frame [overflow] stack */

void pn_store_limits_default(pn_store_limits *l)
{
    l->max_stacks = 16384;
    l->max_samples = 0;
    l->max_depth = 128;
    l->symbol_bytes = 2u << 20;
    l->max_frames = 65536;
    l->nvalues = 2;
}

static uint32_t hash_frames(const pn_frame_id *f, size_t n)
{
    return pn_hash_words(f, n, PN_HASH_SEED);
}

/* Returns the stack id, or STACK_OVERFLOW when the tables are full. */
static uint32_t intern_stack(pn_period *p, const pn_frame_id *f, size_t n)
{
    uint32_t h = hash_frames(f, n);
    uint32_t slot = h & p->stack_index.mask;
    for (;;) {
        uint32_t v = p->stack_index.slots[slot];
        if (v == 0)
            break;
        const stack_ent *s = &p->stacks[v - 1];
        if (s->hash == h && s->depth == n &&
            memcmp(p->frames + s->off, f, n * sizeof *f) == 0)
            return v - 1;
        slot = (slot + 1) & p->stack_index.mask;
    }
    if (p->nstacks >= p->max_stacks || p->nframes + n > p->max_frames)
        return STACK_OVERFLOW;
    if (pn_index_need_room(&p->stack_index, p->nstacks) &&
        pn_index_grow(&p->stack_index, p->nstacks, p->stacks, sizeof *p->stacks,
                      offsetof(stack_ent, hash)))
        slot = pn_index_free_slot(&p->stack_index, h);
    stack_ent *s = &p->stacks[p->nstacks];
    s->off = (uint32_t)p->nframes;
    s->depth = (uint32_t)n;
    s->hash = h;
    memcpy(p->frames + p->nframes, f, n * sizeof *f);
    p->nframes += n;
    p->stack_index.slots[slot] = ++p->nstacks;
    return p->nstacks - 1;
}

static uint32_t sample_hash(uint32_t stack, uint64_t ls_id, uint64_t tid, uint32_t tname)
{
    uint32_t k[6] = {stack, tname, (uint32_t)ls_id, (uint32_t)(ls_id >> 32), (uint32_t)tid,
                     (uint32_t)(tid >> 32)};
    return pn_hash_words(k, 6, PN_HASH_SEED);
}

/* Returns the sample index; 0 (the overflow sample) when the table is full. */
static uint32_t intern_sample(pn_period *p, uint32_t stack, const pn_labelset *ls,
                              uint64_t tid, uint32_t tname)
{
    uint64_t id = pn_labelset_id(ls);
    uint32_t h = sample_hash(stack, id, tid, tname);
    uint32_t slot = h & p->sample_index.mask;
    for (;;) {
        uint32_t v = p->sample_index.slots[slot];
        if (v == 0)
            break;
        const sample_ent *s = &p->samples[v - 1];
        if (s->hash == h && s->stack == stack && s->tid == tid && s->thread_name == tname &&
            pn_labelset_id(s->labels) == id)
            return v - 1;
        slot = (slot + 1) & p->sample_index.mask;
    }
    if (p->nsamples >= p->max_samples)
        return 0;
    if (pn_index_need_room(&p->sample_index, p->nsamples) &&
        pn_index_grow(&p->sample_index, p->nsamples, p->samples, sizeof *p->samples,
                      offsetof(sample_ent, hash)))
        slot = pn_index_free_slot(&p->sample_index, h);
    sample_ent *s = &p->samples[p->nsamples];
    s->stack = stack;
    s->thread_name = tname;
    s->tid = tid;
    s->labels = ls;
    s->hash = h;
    memset(s->values, 0, sizeof s->values);
    pn_labelset_mark_used(ls, p->seq);
    p->sample_index.slots[slot] = ++p->nsamples;
    return p->nsamples - 1;
}

/* Empty p and hand its pages back: the periods take turns, and a recycled
 * period sits empty until the next swap makes it active. */
static void period_clear(pn_period *p, int64_t start_ns)
{
    pn_pages_clear(p->frames, p->nframes * sizeof *p->frames);
    pn_pages_clear(p->stacks, (size_t)p->nstacks * sizeof *p->stacks);
    pn_pages_clear(p->samples, (size_t)p->nsamples * sizeof *p->samples);
    pn_index_clear(&p->stack_index, p->nstacks);
    pn_index_clear(&p->sample_index, p->nsamples);
    p->nstacks = 0;
    p->nsamples = 0;
    p->nframes = 0;
    memset(&p->stats, 0, sizeof p->stats);
    p->start_ns = start_ns;
    p->end_ns = 0;
    pn_symbols_reset(p->sym);
    pn_frame_id overflow = PN_FRAME_OVERFLOW;
    intern_stack(p, &overflow, 1);
    intern_sample(p, STACK_OVERFLOW, pn_labelset_empty(), 0, PN_STR_EMPTY);
}

static void period_free(pn_period *p)
{
    pn_symbols_free(p->sym);
    pn_pages_free(p->frames, p->max_frames * sizeof *p->frames);
    pn_pages_free(p->stacks, (size_t)p->max_stacks * sizeof *p->stacks);
    pn_pages_free(p->samples, (size_t)p->max_samples * sizeof *p->samples);
    pn_index_free(&p->stack_index);
    pn_index_free(&p->sample_index);
}

static int period_init(pn_period *p, const pn_store_limits *l, pn_frame_id *scratch)
{
    memset(p, 0, sizeof *p);
    p->nvalues = l->nvalues;
    p->scratch = scratch;
    p->max_depth = l->max_depth;
    p->max_stacks = l->max_stacks + 1;
    p->max_samples = l->max_samples + 1;
    /* Frames: room for every stack at a typical depth; a period of only
     * very deep stacks overflows into [overflow] instead of growing. */
    p->max_frames = (size_t)p->max_stacks * (l->max_depth < 48 ? l->max_depth : 48) + l->max_depth;
    p->sym = pn_symbols_new(l->symbol_bytes, l->max_frames);
    p->frames = pn_pages_new(p->max_frames * sizeof *p->frames);
    p->stacks = pn_pages_new((size_t)p->max_stacks * sizeof *p->stacks);
    p->samples = pn_pages_new((size_t)p->max_samples * sizeof *p->samples);
    int idx_failed = pn_index_init(&p->stack_index, p->max_stacks) != 0;
    idx_failed |= pn_index_init(&p->sample_index, p->max_samples) != 0;
    if (!p->sym || !p->frames || !p->stacks || !p->samples || idx_failed)
        return -1;
    period_clear(p, pn_clock_ns(CLOCK_REALTIME));
    return 0;
}

pn_store *pn_store_new(const pn_store_limits *lim, pn_error *e)
{
    pn_store_limits l;
    pn_store_limits_default(&l);
    if (lim) {
        if (lim->max_stacks)
            l.max_stacks = lim->max_stacks;
        l.max_samples = lim->max_samples;
        if (lim->max_depth)
            l.max_depth = lim->max_depth;
        if (lim->symbol_bytes)
            l.symbol_bytes = lim->symbol_bytes;
        if (lim->max_frames)
            l.max_frames = lim->max_frames;
        if (lim->nvalues)
            l.nvalues = lim->nvalues;
    }
    if (l.max_samples == 0)
        l.max_samples = l.max_stacks * 2;
    if (l.nvalues < 1 || l.nvalues > PN_MAX_VALUES)
        return pn_fail(e, PN_EINVAL, "store: nvalues must be 1..%d, got %d", PN_MAX_VALUES,
                       l.nvalues), NULL;
    if (l.max_depth < 2 || l.max_depth > 100000)
        return pn_fail(e, PN_EINVAL, "max_depth must be 2..100000, got %u", l.max_depth), NULL;
    if (l.max_stacks > 50000000 || l.max_samples > 100000000)
        return pn_fail(e, PN_EINVAL, "max_stacks must be at most 50000000, got %u",
                       l.max_stacks), NULL;
    pn_store *s = calloc(1, sizeof *s);
    if (!s)
        return pn_fail(e, PN_ENOMEM, "out of memory creating the store"), NULL;
    s->lim = l;
    s->scratch = calloc(l.max_depth, sizeof *s->scratch);
    if (!s->scratch || period_init(&s->periods[0], &l, s->scratch) != 0 ||
        period_init(&s->periods[1], &l, s->scratch) != 0) {
        pn_store_free(s);
        return pn_fail(e, PN_ENOMEM, "out of memory creating the store (max_stacks %u)",
                       l.max_stacks), NULL;
    }
    s->periods[0].seq = s->next_seq = 1;
    atomic_store(&s->active, &s->periods[0]);
    return s;
}

void pn_store_free(pn_store *s)
{
    if (!s)
        return;
    period_free(&s->periods[0]);
    period_free(&s->periods[1]);
    free(s->scratch);
    free(s);
}

const pn_store_limits *pn_store_get_limits(const pn_store *s) { return &s->lim; }

pn_period *pn_store_write_begin(pn_store *s)
{
    pn_epoch_enter();
    return atomic_load(&s->active);
}

void pn_store_write_end(pn_store *s)
{
    (void)s;
    pn_epoch_exit();
}

pn_period *pn_store_swap(pn_store *s, int64_t now_ns)
{
    if (s->drained)
        pn_store_recycle(s, s->drained);
    pn_period *old = atomic_load(&s->active);
    pn_period *fresh = old == &s->periods[0] ? &s->periods[1] : &s->periods[0];
    fresh->seq = ++s->next_seq;
    fresh->start_ns = now_ns;
    atomic_store(&s->active, fresh);
    /* A tick that loaded `old` before the store above may still be adding
     * to it; wait for that tick to end (ticks take microseconds). */
    pn_epoch_wait(pn_epoch_now());
    old->end_ns = now_ns;
    old->stats.symbols_dropped = pn_symbols_dropped(old->sym);
    s->drained = old;
    return old;
}

void pn_store_recycle(pn_store *s, pn_period *p)
{
    if (p != s->drained)
        return;
    period_clear(p, 0);
    s->drained = NULL;
}

void pn_store_reset(pn_store *s, int64_t now_ns)
{
    period_clear(&s->periods[0], now_ns);
    period_clear(&s->periods[1], 0);
    s->periods[0].seq = ++s->next_seq;
    s->drained = NULL;
    atomic_store(&s->active, &s->periods[0]);
}

pn_symbols *pn_period_symbols(pn_period *p) { return p->sym; }

const pn_symbols *pn_period_symbols_const(const pn_period *p) { return p->sym; }

void pn_period_add(pn_period *p, const pn_frame_id *frames, size_t depth,
                   const pn_labelset *labels, uint64_t tid, uint32_t thread_name,
                   const int64_t *values)
{
    if (!labels)
        labels = pn_labelset_empty();
    pn_frame_id unknown = PN_FRAME_UNKNOWN;
    if (depth == 0) {
        frames = &unknown;
        depth = 1;
    } else if (depth > p->max_depth) {
        /* Keep the leaf-most frames; the root end says where we cut. */
        memcpy(p->scratch, frames, (p->max_depth - 1) * sizeof *frames);
        p->scratch[p->max_depth - 1] = PN_FRAME_TRUNCATED;
        frames = p->scratch;
        depth = p->max_depth;
        p->stats.truncated_stacks++;
    }
    uint32_t stack = intern_stack(p, frames, depth);
    uint32_t idx = intern_sample(p, stack, labels, tid, thread_name);
    if (stack == STACK_OVERFLOW || idx == 0)
        p->stats.overflow_samples++;
    sample_ent *s = &p->samples[idx];
    for (int i = 0; i < p->nvalues; i++)
        s->values[i] += values[i];
    p->stats.samples_added++;
}

size_t pn_period_sample_count(const pn_period *p) { return p->nsamples; }

void pn_period_sample(const pn_period *p, size_t i, pn_sample_view *out)
{
    const sample_ent *s = &p->samples[i];
    const stack_ent *st = &p->stacks[s->stack];
    out->frames = p->frames + st->off;
    out->depth = st->depth;
    out->labels = s->labels;
    out->tid = s->tid;
    out->thread_name = s->thread_name;
    out->values = s->values;
}

int pn_period_nvalues(const pn_period *p) { return p->nvalues; }

int64_t pn_period_start_ns(const pn_period *p) { return p->start_ns; }

int64_t pn_period_end_ns(const pn_period *p) { return p->end_ns; }

uint64_t pn_period_seq(const pn_period *p) { return p->seq; }

void pn_period_get_stats(const pn_period *p, pn_period_stats *out)
{
    *out = p->stats;
    out->symbols_dropped = pn_symbols_dropped(p->sym);
}

static size_t period_resident(const pn_period *p)
{
    return pn_symbols_resident_bytes(p->sym) +
           pn_pages_resident(p->frames, p->max_frames * sizeof *p->frames) +
           pn_pages_resident(p->stacks, (size_t)p->max_stacks * sizeof *p->stacks) +
           pn_pages_resident(p->samples, (size_t)p->max_samples * sizeof *p->samples) +
           pn_index_resident(&p->stack_index) + pn_index_resident(&p->sample_index);
}

size_t pn_store_resident_bytes(const pn_store *s)
{
    return period_resident(&s->periods[0]) + period_resident(&s->periods[1]);
}
