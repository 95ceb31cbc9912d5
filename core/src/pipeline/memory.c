/* The memory driver: sampled allocations and the sampled live heap.
 *
 * Application threads (the binding's allocator hooks) and one consumer
 * share two tables. Records (memory_max_live of them, a lock-free stack of
 * free ones): a sampled allocation's raw stack, labels and scaled weight.
 * An address index (nslots keys, twice as many, a power of two): open
 * addressing, linear probing within MAX_PROBE of the home slot, each key 0
 * (never used), an address (with the record it names), or TOMB (freed;
 * lookups probe past it, a claim reuses it at once). Keys never return to
 * 0, so no probe chain is broken; an address freed and sampled again many
 * times before the consumer's next pass reuses its own TOMB slot, each
 * time with a new record.
 *
 * A record's state: EMPTY -> WRITING (the allocating thread took it) ->
 * READY (committed) -> LIVE (the consumer recorded the allocation and made
 * its stack and labels its own) -> EMPTY (the consumer, once the free hook
 * marked it freed, pushes it back). The hook's side is atomic operations
 * only; it tells the consumer with a bit in `pending` (one per record).
 * Frees of objects never sampled (nearly all) stop at a filter: a count
 * of the sampled objects alive per 256 bytes of address space, raised by
 * a claim and lowered by the free that finds its key, so it is 0 again as
 * soon as a sampled object is freed. (A bit filter rebuilt by the consumer
 * ten times a second left a freed sample's bit set until then: in a JSON
 * loop, which reuses the same few kilobytes, 43 % of frees probed the key
 * table.) A count that reaches 255 sticks there: only too many probes.
 *
 * The consumer (this driver's thread, 10 passes a second, and the flusher
 * just before each cut) holds `mu`, which no application thread takes. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/driver.h"
#include "pipeline/memory.h"
#include "pyroscope_native.h"

#define TOMB ((uintptr_t)1)
/* Frees probe only past the filter. */
#define MAX_PROBE 64
/* A filter count stands for 256 bytes of address space, not a hash of
 * the pointer: consecutive frees (an allocator's pool, a list of objects)
 * read the same or the next byte, which stays in cache. A hashed bit cost
 * a cache miss on nearly every free: 13 % of an allocation-heavy loop. */
#define FILTER_SIZE PN_MEM_FILTER_SIZE /* bytes */
#define FILTER_SHIFT PN_MEM_FILTER_SHIFT
#define PASS_NS 100000000LL    /* consumer passes: 10 a second */
#define PERSIST_FRAMES 65536u
#define PERSIST_BYTES (4u << 20)

enum { REC_EMPTY = 0, REC_WRITING, REC_READY, REC_LIVE };

typedef struct {
    _Atomic int state;
    _Atomic int freed;
    /* The table, for commit or abandon on another thread than begin's
     * (Ruby: a postponed job names the frames later). */
    struct pn_mem *m;
    /* Written by the hook before READY. */
    uint32_t len;               /* raw stack bytes; LIVE: frames in persist */
    int64_t objects, bytes;     /* what the sample stands for */
    uint64_t tid;
    int64_t time_ns;
    const pn_labelset *base, *context;
    /* Consumer-owned from READY on: a reference of its own. */
    const pn_labelset *owned;
} mem_rec;

struct pn_mem {
    pn_driver *d;
    double interval;
    uint32_t max_live, nslots, mask;
    size_t cap;
    pn_mem_symbolize_fn symbolize;
    void *ctx;
    uint32_t max_depth;

    /* Shared with the hooks (pages: resident where written). */
    _Atomic uintptr_t *keys;    /* nslots */
    _Atomic uint32_t *key_rec;  /* nslots: the record of the address in keys */
    mem_rec *recs;              /* max_live */
    uint8_t *bufs;              /* max_live * cap */
    _Atomic uint32_t *free_next; /* max_live: the free stack's links */
    _Atomic uint64_t free_head; /* (tag << 32) | (record + 1); 0 low: empty */
    _Atomic uint64_t *pending;  /* a bit per record */
    uint32_t npending;          /* words */
    _Atomic uint8_t *filter;    /* FILTER_SIZE counts */
    _Atomic uint32_t used;      /* slots claimed and not given back */
    _Atomic uint64_t sampled, full, freed, symbols_full, probes;
    _Atomic int64_t lost_objects, lost_bytes; /* full table: weight for [overflow] */

    /* Consumer-owned (under mu). */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running;
    _Atomic int stop;
    pn_grace_reader *labels_reader;
    pn_symbols *persist;        /* frames of LIVE records, across periods */
    pn_frame_id *map;           /* persist frame -> period frame + 1 */
    uint64_t map_gen;           /* the period symbols' generation it maps to */
    pn_frame_id *scratch;
};

/* A slot handle is its record's address. */
static mem_rec *rec_of(pn_mem_slot *s) { return (mem_rec *)(void *)s; }

/* ------------------------------------------------------------ sampling */

/* Per thread (initial-exec: the hook never allocates to reach them): the
 * bytes left before the next sample, and a xorshift state. */
static __thread int64_t tl_left __attribute__((tls_model("initial-exec")));
static __thread uint64_t tl_rng __attribute__((tls_model("initial-exec")));
/* The interval tl_left was drawn for: a driver with another one (a new
 * agent) draws afresh. */
static __thread double tl_interval __attribute__((tls_model("initial-exec")));

static uint64_t rng_next(void)
{
    if (!tl_rng) {
        tl_rng = (uint64_t)pn_gettid() * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)pn_clock_ns(CLOCK_MONOTONIC) ^ (uintptr_t)&tl_rng;
        if (!tl_rng)
            tl_rng = 1;
    }
    uint64_t x = tl_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return tl_rng = x;
}

/* Uniform in (0, 1]. */
static double uniform(void) { return ((rng_next() >> 11) + 1) * (1.0 / 9007199254740992.0); }

static int64_t next_gap(double interval)
{
    double g = -log(uniform()) * interval;
    return g < 1 ? 1 : g > 4e18 ? (int64_t)4e18 : (int64_t)g;
}

/* A thread's first allocation (or first under another interval), and the
 * one in ~interval bytes that ends a gap: out of line, so the common path
 * below saves no registers. */
__attribute__((noinline)) static int gap_ended(pn_mem *m, size_t size, int first)
{
    if (first) {
        tl_interval = m->interval;
        tl_left = next_gap(m->interval) - (int64_t)size;
        if (tl_left > 0)
            return 0;
    }
    /* Memoryless: the next gap starts after this allocation, whatever it
     * overshot, so an allocation of s bytes is sampled with probability
     * 1 - exp(-s / interval). */
    tl_left = next_gap(m->interval);
    return 1;
}

int64_t pn_mem_next_gap(pn_driver *d)
{
    pn_mem *m = d ? d->mem : NULL;
    return m ? next_gap(m->interval) : INT64_MAX;
}

/* Read by hooks while no driver runs: all 0 (.bss, not in the file). */
static uint8_t no_filter[FILTER_SIZE];

const uint8_t *pn_mem_free_filter(pn_driver *d)
{
    pn_mem *m = d ? d->mem : NULL;
    return m ? (const uint8_t *)m->filter : no_filter;
}

int pn_mem_sampled(pn_driver *d, size_t size)
{
    pn_mem *m = d ? d->mem : NULL;
    if (!m)
        return 0;
    /* tl_left is 0 only before a thread's first gap: a gap ends at <= 0
     * and the next one is drawn at once (a gap is >= 1). */
    if (__builtin_expect(tl_interval != m->interval || tl_left == 0, 0))
        return gap_ended(m, size, 1);
    if (__builtin_expect((tl_left -= (int64_t)size) > 0, 1))
        return 0;
    return gap_ended(m, size, 0);
}

void pn_mem_scale(double interval, size_t size, int64_t *objects, int64_t *bytes)
{
    double p = -expm1(-(double)size / interval);
    double w = p > 0 ? 1.0 / p : interval;
    *objects = (int64_t)(w + 0.5);
    *bytes = (int64_t)(w * (double)size + 0.5);
}

/* Objects of one sample: 1/p rounded at random (floor(w + u)), so even a
 * weight of 1.5 is right on average. */
static int64_t scaled_objects(double w) { return (int64_t)floor(w + uniform() - 1e-12); }

static inline uint64_t hash_ptr(uintptr_t p)
{
    uint64_t h = (uint64_t)(p >> 4) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

/* One more (d 1) or one fewer (d -1) sampled object alive at p. */
static void filter_count(pn_mem *m, uintptr_t p, int d)
{
    _Atomic uint8_t *c = &m->filter[(p >> FILTER_SHIFT) & (FILTER_SIZE - 1)];
    uint8_t v = atomic_load(c);
    while (v != 255 && (d > 0 || v > 0) &&
           !atomic_compare_exchange_weak(c, &v, (uint8_t)(v + d)))
        ;
}

static inline void mark_pending(pn_mem *m, uint32_t i)
{
    atomic_fetch_or(&m->pending[i >> 6], 1ull << (i & 63));
}

/* The free records: a Treiber stack whose head carries a tag against ABA.
 * Any thread pushes and pops. */
static int pop_record(pn_mem *m, uint32_t *out)
{
    uint64_t head = atomic_load(&m->free_head);
    for (;;) {
        uint32_t top = (uint32_t)head;
        if (top == 0)
            return 0;
        uint64_t next = ((head >> 32) + 1) << 32 | atomic_load(&m->free_next[top - 1]);
        if (atomic_compare_exchange_weak(&m->free_head, &head, next)) {
            *out = top - 1;
            return 1;
        }
    }
}

static void push_record(pn_mem *m, uint32_t r)
{
    uint64_t head = atomic_load(&m->free_head);
    for (;;) {
        atomic_store(&m->free_next[r], (uint32_t)head);
        uint64_t next = ((head >> 32) + 1) << 32 | (r + 1);
        if (atomic_compare_exchange_weak(&m->free_head, &head, next))
            return;
    }
}

pn_mem_slot *pn_mem_alloc_begin(pn_driver *d, const void *ptr, size_t size, void **buf,
                                size_t *cap)
{
    pn_mem *m = d ? d->mem : NULL;
    if (!m || !ptr)
        return NULL;
    double p = -expm1(-(double)size / m->interval);
    double w = p > 0 ? 1.0 / p : m->interval;
    return pn_mem_alloc_begin_weighted(d, ptr, scaled_objects(w),
                                       (int64_t)(w * (double)size + 0.5), buf, cap);
}

pn_mem_slot *pn_mem_alloc_begin_weighted(pn_driver *d, const void *ptr, int64_t objects,
                                         int64_t bytes, void **buf, size_t *cap)
{
    pn_mem *m = d ? d->mem : NULL;
    if (!m || !ptr)
        return NULL;
    atomic_fetch_add_explicit(&m->sampled, 1, memory_order_relaxed);
    uint64_t h = hash_ptr((uintptr_t)ptr);
    uint32_t ri;
    if (pop_record(m, &ri)) {
        atomic_fetch_add(&m->used, 1);
        for (uint32_t k = 0; k < MAX_PROBE; k++) {
            uint32_t i = (uint32_t)(h + k) & m->mask;
            uintptr_t key = atomic_load(&m->keys[i]);
            if ((key == 0 || key == TOMB) &&
                atomic_compare_exchange_strong(&m->keys[i], &key, (uintptr_t)ptr)) {
                /* Read only by the free of ptr, which comes after we return. */
                atomic_store(&m->key_rec[i], ri);
                mem_rec *r = &m->recs[ri];
                atomic_store(&r->freed, 0);
                atomic_store(&r->state, REC_WRITING);
                r->objects = objects;
                r->bytes = bytes;
                r->tid = (uint64_t)pn_gettid();
                r->time_ns = pn_clock_ns(CLOCK_MONOTONIC);
                r->len = 0;
                r->base = r->context = NULL;
                r->m = m;
                /* Before ptr's free can come: it reads the count. */
                filter_count(m, (uintptr_t)ptr, 1);
                *buf = m->bufs + (size_t)ri * m->cap;
                *cap = m->cap;
                return (pn_mem_slot *)(void *)r;
            }
        }
        atomic_fetch_sub(&m->used, 1);
        push_record(m, ri);
    }
    atomic_fetch_add_explicit(&m->full, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->lost_objects, objects, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->lost_bytes, bytes, memory_order_relaxed);
    return NULL;
}

static uint32_t rec_index(pn_mem *m, mem_rec *r) { return (uint32_t)(r - m->recs); }

void pn_mem_alloc_commit(pn_mem_slot *s, size_t used, const pn_labelset *base,
                         const pn_labelset *context)
{
    mem_rec *r = rec_of(s);
    pn_mem *m = r ? r->m : NULL;
    if (!m)
        return;
    r->len = (uint32_t)(used > m->cap ? m->cap : used);
    r->base = base;
    r->context = context;
    atomic_store(&r->state, REC_READY);
    mark_pending(m, rec_index(m, r));
}

void pn_mem_alloc_abandon(pn_mem_slot *s)
{
    mem_rec *r = rec_of(s);
    pn_mem *m = r ? r->m : NULL;
    if (!m)
        return;
    /* Kept as a sample with no stack: its weight is real. */
    r->len = 0;
    atomic_store(&r->state, REC_READY);
    mark_pending(m, rec_index(m, r));
}

void pn_mem_free(pn_driver *d, const void *ptr)
{
    pn_mem *m = d ? d->mem : NULL;
    if (!m || !ptr || !pn_mem_filter_hit((const uint8_t *)m->filter, ptr))
        return;
    atomic_fetch_add_explicit(&m->probes, 1, memory_order_relaxed);
    uint64_t h = hash_ptr((uintptr_t)ptr);
    for (uint32_t k = 0; k < MAX_PROBE; k++) {
        uint32_t i = (uint32_t)(h + k) & m->mask;
        uintptr_t key = atomic_load(&m->keys[i]);
        if (key == 0)
            return;
        if (key == (uintptr_t)ptr) {
            /* Set by the claim of ptr, which came before its free. */
            uint32_t ri = atomic_load(&m->key_rec[i]);
            if (!atomic_compare_exchange_strong(&m->keys[i], &key, TOMB))
                return;
            filter_count(m, (uintptr_t)ptr, -1);
            atomic_store(&m->recs[ri].freed, 1);
            atomic_fetch_add_explicit(&m->freed, 1, memory_order_relaxed);
            mark_pending(m, ri);
            return;
        }
    }
}

void pn_mem_get_stats(pn_driver *d, pn_mem_stats *out)
{
    memset(out, 0, sizeof *out);
    pn_mem *m = d ? d->mem : NULL;
    if (!m)
        return;
    out->sampled = atomic_load(&m->sampled);
    out->table_full = atomic_load(&m->full);
    out->freed = atomic_load(&m->freed);
    out->live = atomic_load(&m->used);
    out->symbols_full = atomic_load(&m->symbols_full);
    out->free_probes = atomic_load(&m->probes);
}

/* ------------------------------------------------------------ consumer */

/* Frames of persist as frames of the period's symbols (cached per period). */
static size_t to_period(pn_mem *m, pn_period *p, const pn_frame_id *in, size_t n,
                        pn_frame_id *out)
{
    pn_symbols *ps = pn_period_symbols(p);
    if (m->map_gen != pn_symbols_generation(ps)) {
        memset(m->map, 0, PERSIST_FRAMES * sizeof *m->map);
        m->map_gen = pn_symbols_generation(ps);
    }
    for (size_t i = 0; i < n; i++) {
        pn_frame_id f = in[i];
        if (f < PN_FRAME_FIRST_USER || f >= PERSIST_FRAMES) {
            out[i] = f < PN_FRAME_FIRST_USER ? f : PN_FRAME_UNKNOWN;
            continue;
        }
        if (!m->map[f]) {
            uint32_t ns, fs, line;
            size_t nl = 0, fl = 0;
            pn_symbols_frame_get(m->persist, f, &ns, &fs, &line);
            const char *name = pn_symbols_str(m->persist, ns, &nl);
            const char *file = pn_symbols_str(m->persist, fs, &fl);
            m->map[f] = pn_symbols_frame3(ps, name, nl, file, fl, line) + 1;
        }
        out[i] = m->map[f] - 1;
    }
    return n;
}

/* A copy of base ∪ context that the record owns (strings read under the
 * labels reader's grace). */
static const pn_labelset *own_labels(const pn_labelset *base, const pn_labelset *context)
{
    pn_label kv[PN_MAX_LABELS];
    const pn_labelset *sets[2] = {base, context}, *acc = pn_labelset_empty();
    for (int s = 0; s < 2; s++) {
        if (!sets[s] || pn_labelset_count(sets[s]) == 0)
            continue;
        size_t n = pn_labelset_count(sets[s]);
        for (size_t i = 0; i < n; i++)
            kv[i] = pn_labelset_at(sets[s], i);
        const pn_labelset *next = pn_labelset_merge(acc, kv, n, NULL);
        if (next) {
            pn_labelset_unref(acc);
            acc = next;
        }
    }
    return acc;
}

static void record_values(pn_mem *m, pn_period *p, const pn_frame_id *persist_frames,
                          size_t depth, const pn_labelset *labels, uint64_t tid,
                          const int64_t values[4])
{
    pn_frame_id *frames = m->scratch + m->max_depth;
    to_period(m, p, persist_frames, depth, frames);
    pn_sample s = {frames, depth, labels, tid, NULL, values, 0};
    pn_record(m->d, p, &s);
}

/* A committed record: its stack into persist, its labels owned, its
 * allocation recorded. */
static void consume(pn_mem *m, pn_period *p, uint32_t i)
{
    mem_rec *r = &m->recs[i];
    uint8_t *buf = m->bufs + (size_t)i * m->cap;
    size_t depth = 0;
    if (r->len && m->symbolize)
        depth = m->symbolize(m->ctx, buf, r->len, m->persist, m->scratch,
                             m->cap / sizeof(pn_frame_id) < m->max_depth
                                 ? m->cap / sizeof(pn_frame_id)
                                 : m->max_depth);
    for (size_t k = 0; k < depth; k++)
        if (m->scratch[k] == PN_FRAME_UNKNOWN)
            atomic_fetch_add_explicit(&m->symbols_full, 1, memory_order_relaxed);
    if (depth == 0) {
        m->scratch[0] = PN_FRAME_UNKNOWN;
        depth = 1;
    }
    memcpy(buf, m->scratch, depth * sizeof(pn_frame_id));
    r->len = (uint32_t)depth;
    r->owned = own_labels(r->base, r->context);
    r->base = r->context = NULL;
    int64_t v[4] = {r->objects, r->bytes, 0, 0};
    record_values(m, p, (const pn_frame_id *)buf, depth, r->owned, r->tid, v);
    atomic_store(&r->state, REC_LIVE);
}

static void give_back(pn_mem *m, uint32_t i)
{
    mem_rec *r = &m->recs[i];
    pn_labelset_unref(r->owned);
    r->owned = NULL;
    atomic_store(&r->state, REC_EMPTY);
    atomic_fetch_sub(&m->used, 1);
    push_record(m, i);
}

/* One pass: every committed record recorded, every freed one given back.
 * Under mu, inside a recording section of the store. */
static void drain(pn_mem *m, pn_period *p)
{
    uint64_t gen = pn_grace_now();
    for (uint32_t w = 0; w < m->npending; w++) {
        uint64_t bits = atomic_exchange(&m->pending[w], 0);
        while (bits) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            mem_rec *r = &m->recs[i];
            int st = atomic_load(&r->state);
            if (st == REC_WRITING) { /* still in its hook: next pass */
                mark_pending(m, i);
                continue;
            }
            if (st == REC_READY)
                consume(m, p, i);
            if (atomic_load(&r->state) == REC_LIVE && atomic_load(&r->freed))
                give_back(m, i);
        }
    }
    int64_t lo = atomic_exchange(&m->lost_objects, 0), lb = atomic_exchange(&m->lost_bytes, 0);
    if (lo || lb) {
        static const char full[] = "[memory table full]";
        pn_frame_id f = pn_symbols_frame3(pn_period_symbols(p), full, sizeof full - 1, "", 0, 0);
        int64_t v[4] = {lo, lb, 0, 0};
        pn_sample s = {&f, 1, NULL, 0, NULL, v, 0};
        pn_record(m->d, p, &s);
    }
    /* Every record committed before gen was read is consumed now, and a
     * record committed later holds label sets retired after it: hold no
     * more than gen. */
    pn_grace_hold(m->labels_reader, gen);
}

static void pass(pn_mem *m, int snapshot)
{
    pthread_mutex_lock(&m->mu);
    pn_store *st = m->d->store;
    pn_store_write_begin(st);
    pn_period *p = pn_store_active(st);
    drain(m, p);
    if (snapshot) {
        /* The in-use snapshot: every sampled object still alive. */
        for (uint32_t i = 0; i < m->max_live; i++) {
            mem_rec *r = &m->recs[i];
            if (atomic_load_explicit(&r->state, memory_order_relaxed) != REC_LIVE ||
                atomic_load(&r->freed))
                continue;
            int64_t v[4] = {0, 0, r->objects, r->bytes};
            record_values(m, p, (const pn_frame_id *)(m->bufs + (size_t)i * m->cap), r->len,
                          r->owned, r->tid, v);
        }
    }
    pn_store_write_end(st);
    pthread_mutex_unlock(&m->mu);
}

void pn_mem_before_cut(pn_mem *m)
{
    if (m)
        pass(m, 1);
}

static void *consumer_main(void *arg)
{
    pn_mem *m = arg;
    while (!atomic_load(&m->stop)) {
        pass(m, 0);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + PASS_NS;
        ts.tv_sec = t / 1000000000LL;
        ts.tv_nsec = t % 1000000000LL;
        pthread_mutex_lock(&m->mu);
        if (!atomic_load(&m->stop))
            pthread_cond_timedwait(&m->cv, &m->mu, &ts);
        pthread_mutex_unlock(&m->mu);
    }
    return NULL;
}

int pn_mem_start(pn_mem *m, pn_error *e)
{
    atomic_store(&m->stop, 0);
    pn_grace_enter(m->labels_reader);
    if (pn_thread_spawn(&m->thread, consumer_main, m, "pyroscope-mem") != 0)
        return pn_fail(e, PN_ENOMEM, "memory driver: cannot start its thread");
    m->running = 1;
    return 0;
}

void pn_mem_stop(pn_mem *m)
{
    if (!m || !m->running)
        return;
    pthread_mutex_lock(&m->mu);
    atomic_store(&m->stop, 1);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    m->running = 0;
}

void pn_mem_free_all(pn_mem *m)
{
    if (!m)
        return;
    pn_mem_stop(m);
    for (uint32_t i = 0; m->recs && i < m->max_live; i++)
        pn_labelset_unref(m->recs[i].owned);
    pn_pages_free((void *)m->keys, (size_t)m->nslots * sizeof *m->keys);
    pn_pages_free((void *)m->key_rec, (size_t)m->nslots * sizeof *m->key_rec);
    pn_pages_free(m->recs, (size_t)m->max_live * sizeof *m->recs);
    pn_pages_free(m->bufs, (size_t)m->max_live * m->cap);
    free((void *)m->free_next);
    pn_pages_free((void *)m->pending, (size_t)m->npending * 8);
    pn_pages_free((void *)m->filter, FILTER_SIZE);
    pn_symbols_free(m->persist);
    free(m->map);
    free(m->scratch);
    pn_grace_reader_free(m->labels_reader);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

pn_mem *pn_mem_new(pn_driver *d, const pn_driver_opts *o, const pn_config *c, pn_error *e)
{
    pn_mem *m = calloc(1, sizeof *m);
    if (!m)
        return pn_fail(e, PN_ENOMEM, "memory driver: out of memory"), NULL;
    m->d = d;
    m->interval = c->memory_interval ? c->memory_interval : 512 * 1024;
    m->max_live = c->memory_max_live ? c->memory_max_live : 65536;
    m->nslots = 64;
    while (m->nslots < 2 * m->max_live)
        m->nslots <<= 1;
    m->mask = m->nslots - 1;
    m->cap = o->capture_bytes ? o->capture_bytes : 2048;
    m->cap = (m->cap + 7) & ~(size_t)7;
    if (m->cap < 64 || m->cap > 65536) {
        free(m);
        return pn_fail(e, PN_EINVAL, "memory driver: capture_bytes must be 64..65536"), NULL;
    }
    m->symbolize = o->symbolize;
    m->ctx = o->ctx;
    m->max_depth = c->max_depth ? c->max_depth : 128;
    m->npending = (m->max_live + 63) / 64;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->keys = pn_pages_new((size_t)m->nslots * sizeof *m->keys);
    m->key_rec = pn_pages_new((size_t)m->nslots * sizeof *m->key_rec);
    m->recs = pn_pages_new((size_t)m->max_live * sizeof *m->recs);
    m->bufs = pn_pages_new((size_t)m->max_live * m->cap);
    m->free_next = calloc(m->max_live, sizeof *m->free_next);
    m->pending = pn_pages_new((size_t)m->npending * 8);
    m->filter = pn_pages_new(FILTER_SIZE);
    m->persist = pn_symbols_new(PERSIST_BYTES, PERSIST_FRAMES);
    m->map = calloc(PERSIST_FRAMES, sizeof *m->map);
    m->scratch = calloc(2 * (size_t)m->max_depth + 2, sizeof *m->scratch);
    if (!m->keys || !m->key_rec || !m->free_next || !m->recs || !m->bufs || !m->pending ||
        !m->filter || !m->persist || !m->map || !m->scratch) {
        pn_mem_free_all(m);
        return pn_fail(e, PN_ENOMEM, "memory driver: out of memory for %u slots", m->nslots),
               NULL;
    }
    /* Record 0 on top: the first ones used share their pages. */
    for (uint32_t i = m->max_live; i-- > 0;)
        push_record(m, i);
    if (!(m->labels_reader = pn_grace_reader_new(e))) {
        pn_mem_free_all(m);
        return NULL;
    }
    return m;
}

void pn_mem_fork_prepare(pn_mem *m)
{
    if (m)
        pthread_mutex_lock(&m->mu);
}

void pn_mem_fork_parent(pn_mem *m)
{
    if (m)
        pthread_mutex_unlock(&m->mu);
}

/* The child follows none of the parent's sampled objects: a READY record
 * points at label sets only the parent's grace readers kept alive (the
 * child's labels may free them), some were being written when fork() came,
 * and LIVE ones would be in the child's in-use profile without having been
 * allocated there. The table starts empty; the parent's references are
 * dropped, not released (only this thread runs). */
static void forget_all(pn_mem *m)
{
    memset((void *)m->keys, 0, (size_t)m->nslots * sizeof *m->keys);
    memset((void *)m->key_rec, 0, (size_t)m->nslots * sizeof *m->key_rec);
    memset((void *)m->recs, 0, (size_t)m->max_live * sizeof *m->recs);
    memset((void *)m->pending, 0, (size_t)m->npending * 8);
    memset((void *)m->filter, 0, FILTER_SIZE);
    atomic_store(&m->used, 0);
    atomic_store(&m->free_head, 0);
    for (uint32_t i = m->max_live; i-- > 0;)
        push_record(m, i);
}

void pn_mem_fork_child(pn_mem *m)
{
    if (!m)
        return;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    int was = m->running;
    m->running = 0;
    forget_all(m);
    if (was && pn_mem_start(m, NULL) != 0)
        pn_log(PN_LOG_ERROR, "after fork: the memory driver's thread did not restart");
}
