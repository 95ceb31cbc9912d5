/* Aggregation of samples by (stack, label set, thread) into two periods.
 *
 * One writer at a time (a driver's recording thread) adds to a period with
 * no locks and no allocation. A sample goes to the period its timestamp
 * belongs to: the active one, or the one cut last while it still waits for
 * late samples (closing); older samples are counted as late, never lost
 * silently. Label sets are copied into the period (their pairs as string
 * ids, once per set and period), so a period holds no pointer into the
 * label-set table and sets can be freed as soon as no writer holds them.
 * Every table is reserved at creation for the maximum of
 * pn_store_limits (pages.h: address space, no RAM until written), and the
 * hash indexes grow in place within their reservations (index.h). So the
 * resident memory of a period follows what it holds, and recycling a period
 * hands its pages back. The flusher cuts, seals and reads a period, then
 * recycles it. Overflow never loses a sample: every table is reserved at creation for the maximum of
 * pn_store_limits (pages.h: address space, no RAM until written), and  a
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
#include "support/index.h"
#include "support/pages.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "aggregation/grace.h"

typedef struct {
    uint32_t off;       /* first frame in the frame arena */
    uint32_t depth;
    uint32_t hash;
} stack_ent;

typedef struct {
    uint32_t stack;
    uint32_t thread_name;
    uint64_t tid;
    uint32_t labels;    /* period-local label set (lset_ent index) */
    uint32_t hash;
    int64_t values[PN_MAX_VALUES];
} sample_ent;

/* A label set as this period knows it: its pairs as string ids. A merged
 * set (a thread's slot under an execution context's set) is keyed by both
 * ids, so it is merged once per period, not once per sample. */
typedef struct {
    uint64_t set_id;    /* pn_labelset_id: unique for the process's life */
    uint64_t base_id;   /* merged under set_id; 0: set_id alone */
    uint32_t off;       /* first pair in the pair arena */
    uint32_t n;
    uint32_t hash;
} lset_ent;

/* Written by the store's writer while active; by the exporter once swapped
 * out (read, then recycled); never by both at once. */
struct pn_period {
    uint64_t seq;
    int64_t start_ns, end_ns;           /* CLOCK_REALTIME */
    int64_t start_mono, end_mono;       /* CLOCK_MONOTONIC; end 0 while open */
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

    lset_ent *lsets;            /* 0 is the empty set */
    uint32_t nlsets, max_lsets;
    pn_index lset_index;        /* lset index + 1 */
    uint32_t *pairs;            /* key sid, value sid, ... */
    uint32_t npairs, max_pairs; /* in uint32_t units */

    pn_period_stats stats;

    /* Writer-owned: cutting deep stacks (shared by both periods; there is
     * one writer at a time). */
    pn_frame_id *scratch;
    uint32_t max_depth;
};

struct pn_store {
    pn_store_limits lim;
    pn_period periods[2];
    /* Written by the flusher (cut, seal), read by the writer. */
    _Atomic(pn_period *) active;
    _Atomic(pn_period *) closing;   /* cut, still taking late samples */
    pn_frame_id *scratch;
    /* This store's writer announces here which pointers it may hold. */
    pn_grace_reader *reader;
    /* Written by the writer, read by anyone. */
    _Atomic uint64_t late;
    /* Flusher-owned. */
    uint64_t next_seq;
    pn_period *drained;         /* cut and not yet recycled */
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

static uint32_t sample_hash(uint32_t stack, uint32_t lset, uint64_t tid, uint32_t tname)
{
    uint32_t k[5] = {stack, tname, lset, (uint32_t)tid, (uint32_t)(tid >> 32)};
    return pn_hash_words(k, 5, PN_HASH_SEED);
}

/* The period-local entry keyed (id, base_id), or the free index slot for
 * it in *slot (returns UINT32_MAX then). */
static uint32_t find_lset(const pn_period *p, uint64_t id, uint64_t base_id, uint32_t *hash,
                          uint32_t *slot)
{
    uint32_t k[4] = {(uint32_t)id, (uint32_t)(id >> 32), (uint32_t)base_id,
                     (uint32_t)(base_id >> 32)};
    *hash = pn_hash_words(k, base_id ? 4 : 2, PN_HASH_SEED);
    *slot = *hash & p->lset_index.mask;
    for (;;) {
        uint32_t v = p->lset_index.slots[*slot];
        if (v == 0)
            return UINT32_MAX;
        if (p->lsets[v - 1].set_id == id && p->lsets[v - 1].base_id == base_id)
            return v - 1;
        *slot = (*slot + 1) & p->lset_index.mask;
    }
}

/* Append one pair as string ids; 0 when the strings are full. */
static int put_pair(pn_period *p, uint32_t *out, pn_label l)
{
    out[0] = pn_symbols_string(p->sym, l.key, strlen(l.key));
    out[1] = pn_symbols_string(p->sym, l.value, strlen(l.value));
    /* Keys and values are never empty: "" means the strings are full. */
    return out[0] != PN_STR_EMPTY && out[1] != PN_STR_EMPTY;
}

/* The period-local index of base ∪ ls (ls wins on equal keys; base NULL or
 * empty: ls alone), copying the pairs on first use; 0 (no labels) when
 * both are empty or the tables are full (counted). Both sets are sorted by
 * key, so the merge is one pass and keeps the order. */
static uint32_t intern_lset(pn_period *p, const pn_labelset *base, const pn_labelset *ls)
{
    uint64_t base_id = pn_labelset_id(base);
    if (pn_labelset_id(ls) == 0) {
        ls = base;
        base_id = 0;
    }
    uint64_t id = pn_labelset_id(ls);
    if (id == 0)
        return 0;
    uint32_t h, slot;
    uint32_t found = find_lset(p, id, base_id, &h, &slot);
    if (found != UINT32_MAX)
        return found;
    size_t nb = base_id ? pn_labelset_count(base) : 0, no = pn_labelset_count(ls);
    if (p->nlsets >= p->max_lsets || p->npairs + 2 * (nb + no) > p->max_pairs) {
        p->stats.labels_dropped++;
        return 0;
    }
    uint32_t *out = p->pairs + p->npairs;
    size_t n = 0, i = 0, j = 0;
    while (i < nb || j < no) {
        int c = i == nb ? 1 : j == no ? -1
                : strcmp(pn_labelset_at(base, i).key, pn_labelset_at(ls, j).key);
        pn_label l = c < 0 ? pn_labelset_at(base, i) : pn_labelset_at(ls, j);
        if (c <= 0)
            i++;
        if (c >= 0)
            j++;
        if (!put_pair(p, out + 2 * n++, l)) {
            p->stats.labels_dropped++;
            return 0;
        }
    }
    if (n > PN_MAX_LABELS) {
        /* The receiver keeps 100 labels per sample: the context's own set
         * is the one that says what ran. */
        p->stats.labels_dropped++;
        return intern_lset(p, NULL, ls);
    }
    if (pn_index_need_room(&p->lset_index, p->nlsets) &&
        pn_index_grow(&p->lset_index, p->nlsets, p->lsets, sizeof *p->lsets,
                      offsetof(lset_ent, hash)))
        slot = pn_index_free_slot(&p->lset_index, h);
    lset_ent *e = &p->lsets[p->nlsets];
    e->set_id = id;
    e->base_id = base_id;
    e->off = p->npairs;
    e->n = (uint32_t)n;
    e->hash = h;
    p->npairs += 2 * (uint32_t)n;
    p->lset_index.slots[slot] = ++p->nlsets;
    return p->nlsets - 1;
}

/* Returns the sample index; 0 (the overflow sample) when the table is full. */
static uint32_t intern_sample(pn_period *p, uint32_t stack, uint32_t lset, uint64_t tid,
                              uint32_t tname)
{
    uint32_t h = sample_hash(stack, lset, tid, tname);
    uint32_t slot = h & p->sample_index.mask;
    for (;;) {
        uint32_t v = p->sample_index.slots[slot];
        if (v == 0)
            break;
        const sample_ent *s = &p->samples[v - 1];
        if (s->hash == h && s->stack == stack && s->tid == tid && s->thread_name == tname &&
            s->labels == lset)
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
    s->labels = lset;
    s->hash = h;
    memset(s->values, 0, sizeof s->values);
    p->sample_index.slots[slot] = ++p->nsamples;
    return p->nsamples - 1;
}

/* Empty p and hand its pages back: the periods take turns, and a recycled
 * period sits empty until the next swap makes it active. */
static void period_clear(pn_period *p, int64_t start_ns, int64_t start_mono)
{
    pn_pages_clear(p->frames, p->nframes * sizeof *p->frames);
    pn_pages_clear(p->stacks, (size_t)p->nstacks * sizeof *p->stacks);
    pn_pages_clear(p->samples, (size_t)p->nsamples * sizeof *p->samples);
    pn_pages_clear(p->lsets, (size_t)p->nlsets * sizeof *p->lsets);
    pn_pages_clear(p->pairs, (size_t)p->npairs * sizeof *p->pairs);
    pn_index_clear(&p->stack_index, p->nstacks);
    pn_index_clear(&p->sample_index, p->nsamples);
    pn_index_clear(&p->lset_index, p->nlsets);
    p->nstacks = 0;
    p->nsamples = 0;
    p->nframes = 0;
    p->npairs = 0;
    p->nlsets = 1; /* the empty set, index 0 */
    memset(&p->stats, 0, sizeof p->stats);
    p->start_ns = start_ns;
    p->end_ns = 0;
    p->start_mono = start_mono;
    p->end_mono = 0;
    pn_symbols_reset(p->sym);
    pn_frame_id overflow = PN_FRAME_OVERFLOW;
    intern_stack(p, &overflow, 1);
    intern_sample(p, STACK_OVERFLOW, 0, 0, PN_STR_EMPTY);
}

static void period_free(pn_period *p)
{
    pn_symbols_free(p->sym);
    pn_pages_free(p->frames, p->max_frames * sizeof *p->frames);
    pn_pages_free(p->stacks, (size_t)p->max_stacks * sizeof *p->stacks);
    pn_pages_free(p->samples, (size_t)p->max_samples * sizeof *p->samples);
    pn_pages_free(p->lsets, (size_t)p->max_lsets * sizeof *p->lsets);
    pn_pages_free(p->pairs, (size_t)p->max_pairs * sizeof *p->pairs);
    pn_index_free(&p->stack_index);
    pn_index_free(&p->sample_index);
    pn_index_free(&p->lset_index);
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
    /* Label sets: at most one per sample, pairs for ~8 labels each on
     * average (only what is used costs RAM). */
    p->max_lsets = p->max_samples + 1;
    p->max_pairs = p->max_lsets * 16 + 2 * PN_MAX_LABELS;
    p->lsets = pn_pages_new((size_t)p->max_lsets * sizeof *p->lsets);
    p->pairs = pn_pages_new((size_t)p->max_pairs * sizeof *p->pairs);
    int idx_failed = pn_index_init(&p->stack_index, p->max_stacks) != 0;
    idx_failed |= pn_index_init(&p->sample_index, p->max_samples) != 0;
    idx_failed |= pn_index_init(&p->lset_index, p->max_lsets) != 0;
    if (!p->sym || !p->frames || !p->stacks || !p->samples || !p->lsets || !p->pairs ||
        idx_failed)
        return -1;
    period_clear(p, pn_clock_ns(CLOCK_REALTIME), pn_clock_ns(CLOCK_MONOTONIC));
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
    if (!(s->reader = pn_grace_reader_new(e))) {
        free(s->scratch);
        free(s);
        return NULL;
    }
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
    pn_grace_reader_free(s->reader);
    free(s->scratch);
    free(s);
}

const pn_store_limits *pn_store_get_limits(const pn_store *s) { return &s->lim; }

void pn_store_write_begin(pn_store *s) { pn_grace_enter(s->reader); }

void pn_store_write_end(pn_store *s) { pn_grace_exit(s->reader); }

pn_grace_reader *pn_store_reader(pn_store *s) { return s->reader; }

pn_period *pn_store_route(pn_store *s, int64_t time_mono)
{
    pn_period *p = atomic_load(&s->active);
    if (time_mono == 0 || time_mono >= p->start_mono)
        return p;
    pn_period *c = atomic_load(&s->closing);
    if (c && time_mono >= c->start_mono)
        return c;
    atomic_fetch_add_explicit(&s->late, 1, memory_order_relaxed);
    return NULL;
}

pn_period *pn_store_active(pn_store *s) { return atomic_load(&s->active); }

uint64_t pn_store_late(const pn_store *s) { return atomic_load(&((pn_store *)s)->late); }

pn_period *pn_store_cut(pn_store *s, int64_t now_real, int64_t now_mono)
{
    if (s->drained)
        pn_store_recycle(s, s->drained);
    pn_period *old = atomic_load(&s->active);
    pn_period *fresh = old == &s->periods[0] ? &s->periods[1] : &s->periods[0];
    fresh->seq = ++s->next_seq;
    fresh->start_ns = now_real;
    fresh->start_mono = now_mono;
    old->end_ns = now_real;
    old->end_mono = now_mono;
    /* Closing first: a writer that finds the new active period too new for
     * its sample must find the old one. */
    atomic_store(&s->closing, old);
    atomic_store(&s->active, fresh);
    s->drained = old;
    return old;
}

void pn_store_seal(pn_store *s, pn_period *p)
{
    if (atomic_load(&s->closing) == p)
        atomic_store(&s->closing, NULL);
    /* A writer that loaded p before the stores above may still be adding
     * to it; wait for it to leave (recording sections are short). */
    pn_grace_reader_wait(s->reader, pn_grace_tag());
    p->stats.symbols_dropped = pn_symbols_dropped(p->sym);
}

pn_period *pn_store_swap(pn_store *s, int64_t now_ns)
{
    pn_period *old = pn_store_cut(s, now_ns, pn_clock_ns(CLOCK_MONOTONIC));
    pn_store_seal(s, old);
    return old;
}

void pn_store_recycle(pn_store *s, pn_period *p)
{
    if (p != s->drained)
        return;
    if (atomic_load(&s->closing) == p)
        pn_store_seal(s, p);
    period_clear(p, 0, INT64_MAX);
    s->drained = NULL;
}

void pn_store_reset(pn_store *s, int64_t now_ns)
{
    int64_t mono = pn_clock_ns(CLOCK_MONOTONIC);
    period_clear(&s->periods[0], now_ns, mono);
    period_clear(&s->periods[1], 0, INT64_MAX);
    s->periods[0].seq = ++s->next_seq;
    s->drained = NULL;
    atomic_store(&s->late, 0);
    atomic_store(&s->closing, NULL);
    atomic_store(&s->active, &s->periods[0]);
}

pn_symbols *pn_period_symbols(pn_period *p) { return p->sym; }

const pn_symbols *pn_period_symbols_const(const pn_period *p) { return p->sym; }

void pn_period_add(pn_period *p, const pn_frame_id *frames, size_t depth,
                   const pn_labelset *labels, uint64_t tid, uint32_t thread_name,
                   const int64_t *values)
{
    pn_period_add_merged(p, frames, depth, NULL, labels, tid, thread_name, values);
}

void pn_period_add_merged(pn_period *p, const pn_frame_id *frames, size_t depth,
                          const pn_labelset *base, const pn_labelset *labels, uint64_t tid,
                          uint32_t thread_name, const int64_t *values)
{
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
    uint32_t idx = intern_sample(p, stack, intern_lset(p, base, labels), tid, thread_name);
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
    out->stack = s->stack;
    out->label_set = s->labels;
    out->label_pairs = p->pairs + p->lsets[s->labels].off;
    out->nlabels = p->lsets[s->labels].n;
    out->tid = s->tid;
    out->thread_name = s->thread_name;
    out->values = s->values;
}

int pn_period_nvalues(const pn_period *p) { return p->nvalues; }

uint32_t pn_period_stack_count(const pn_period *p) { return p->nstacks; }

const pn_frame_id *pn_period_stack(const pn_period *p, uint32_t i, uint32_t *depth)
{
    *depth = p->stacks[i].depth;
    return p->frames + p->stacks[i].off;
}

uint32_t pn_period_label_set_count(const pn_period *p) { return p->nlsets; }

const uint32_t *pn_period_label_set(const pn_period *p, uint32_t i, uint32_t *npairs)
{
    *npairs = p->lsets[i].n;
    return p->pairs + p->lsets[i].off;
}

int64_t pn_period_start_ns(const pn_period *p) { return p->start_ns; }

int64_t pn_period_end_ns(const pn_period *p) { return p->end_ns; }

int64_t pn_period_start_mono(const pn_period *p) { return p->start_mono; }

int64_t pn_period_end_mono(const pn_period *p) { return p->end_mono; }

uint64_t pn_period_seq(const pn_period *p) { return p->seq; }

void pn_period_add_tick(pn_period *p, uint64_t slots, uint64_t throttled)
{
    p->stats.ticks++;
    p->stats.tick_slots += slots;
    p->stats.throttled_slots += throttled;
}

void pn_period_add_pooled(pn_period *p, int64_t cpu_ns, int64_t value_ns)
{
    p->stats.pooled_cpu_ns += cpu_ns;
    p->stats.pooled_value_ns += value_ns;
}

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
           pn_pages_resident(p->lsets, (size_t)p->max_lsets * sizeof *p->lsets) +
           pn_pages_resident(p->pairs, (size_t)p->max_pairs * sizeof *p->pairs) +
           pn_index_resident(&p->stack_index) + pn_index_resident(&p->sample_index) +
           pn_index_resident(&p->lset_index);
}

size_t pn_store_resident_bytes(const pn_store *s)
{
    return period_resident(&s->periods[0]) + period_resident(&s->periods[1]);
}
