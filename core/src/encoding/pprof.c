/* The pprof encoder: one swapped-out store period in, one or more gzip'ed
 * perftools.profiles.Profile messages out.
 *
 * Two passes. The first resolves every kept sample against encoder-wide
 * tables: strings (copied once, deduplicated by content), functions by
 * (name, file), locations by (function, line), and label lists per label
 * set. The second cuts the samples into chunks: each chunk gives local ids
 * only to what its samples use and keeps the exact encoded size of the
 * message it would produce, so a chunk is closed before a sample would push
 * it past max_samples or max_bytes.
 *
 * The message is written in the protobuf wire format directly (wire.h),
 * into one buffer reused by every chunk: building protobuf-c structs cost
 * a dozen allocations per chunk and two more walks over every sample (size,
 * then pack). Fields go out in field-number order, as protobuf-c packs
 * them, so the bytes are the same as before.
 *
 * Everything here is owned by the single call (the exporter thread); there
 * is no shared state. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "support/hash.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "encoding/pprof.h"
#include "support/scratch.h"
#include "encoding/wire.h"
#include "support/grow.h"
#include "support/u64map.h"

#define NONE UINT32_MAX

#define DEFAULT_MAX_SAMPLES 16000
#define DEFAULT_MAX_BYTES ((size_t)4 << 20)
#define DEFAULT_PERIOD_NS 10000000 /* 1e9 / 100 Hz */

void pn_encode_opts_default(pn_encode_opts *o)
{
    memset(o, 0, sizeof *o);
    o->sample_types[0] = (pn_value_type){"cpu", "nanoseconds"};
    o->sample_types[1] = (pn_value_type){"samples", "count"};
    /* [2] and [3] stay NULL: a period with more values must name them. */
    o->period_type = (pn_value_type){"cpu", "nanoseconds"};
    o->period = DEFAULT_PERIOD_NS;
    o->max_samples = DEFAULT_MAX_SAMPLES;
    o->max_bytes = DEFAULT_MAX_BYTES;
}

/* ------------------------------------------------------- string table */

/* Encoder-wide strings, deduplicated by content. Bytes are copied into one
 * arena and addressed by offset so the arena may move while it grows. */
typedef struct {
    uint32_t off, len, hash;
} gstr;

typedef struct {
    char *arena;
    size_t arena_used, arena_cap;
    gstr *v;
    size_t n, cap;
    uint32_t *index; /* 0 = free, else string index + 1 */
    size_t mask;
} strtab;

static void strtab_free(strtab *t)
{
    free(t->arena);
    free(t->v);
    free(t->index);
}

static int strtab_rehash(strtab *t, size_t slots)
{
    uint32_t *index = calloc(slots, sizeof *index);
    if (!index)
        return -1;
    size_t mask = slots - 1;
    for (size_t j = 0; j < t->n; j++) {
        size_t i = t->v[j].hash & mask;
        while (index[i])
            i = (i + 1) & mask;
        index[i] = (uint32_t)j + 1;
    }
    free(t->index);
    t->index = index;
    t->mask = mask;
    return 0;
}

/* Index of the string, adding it if new; NONE when out of memory. A string
 * with an embedded NUL is cut there, as a C-string reader would see it
 * (and as this encoder always has). */
static uint32_t strtab_intern(strtab *t, const char *s, size_t len)
{
    len = strnlen(s, len);
    if (len >= UINT32_MAX || t->n >= UINT32_MAX - 1)
        return NONE;
    uint32_t h = pn_hash_bytes(s, len, PN_HASH_SEED);
    if (t->index) {
        for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
            uint32_t v = t->index[i];
            if (!v)
                break;
            const gstr *g = &t->v[v - 1];
            if (g->hash == h && g->len == len && memcmp(t->arena + g->off, s, len) == 0)
                return v - 1;
        }
    }
    if (!t->index || (t->n + 1) * 2 > t->mask + 1) {
        if (strtab_rehash(t, t->index ? (t->mask + 1) * 2 : 1024) < 0)
            return NONE;
    }
    gstr *nv = pn_grow_buf(t->v, &t->cap, t->n + 1, sizeof *t->v);
    if (!nv)
        return NONE;
    t->v = nv;
    if (t->arena_used + len > UINT32_MAX)
        return NONE;
    char *na = pn_grow_buf(t->arena, &t->arena_cap, t->arena_used + len, 1);
    if (!na)
        return NONE;
    t->arena = na;
    gstr *g = &t->v[t->n];
    g->off = (uint32_t)t->arena_used;
    g->len = (uint32_t)len;
    g->hash = h;
    memcpy(t->arena + g->off, s, len);
    t->arena_used += len;
    size_t i = h & t->mask;
    while (t->index[i])
        i = (i + 1) & t->mask;
    t->index[i] = (uint32_t)++t->n;
    return (uint32_t)(t->n - 1);
}

/* --------------------------------------------------------- the encoder */

typedef struct {
    uint32_t name, file; /* strings */
} gfunc;

typedef struct {
    uint32_t func, line;
} gloc;

typedef struct {
    uint32_t key, value; /* strings */
} gpair;

/* One label set's labels (its own, then the extra labels it does not
 * override), as strings. */
typedef struct {
    uint32_t first, n; /* into enc.pairs */
    bool has_tid, has_tname;
} glabels;

typedef struct {
    uint32_t index;  /* in the period */
    uint32_t labels; /* glabels entry */
    uint32_t tid;    /* string, NONE when not reported */
    uint32_t tname;  /* string, NONE when not reported */
} kept_sample;

/* The chunk being built: its local ids, and its message as far as it is
 * written. Sample types and samples (fields 1 and 2) are written as they
 * are added; the location, function and string tables and the trailing
 * scalars (fields 4, 5, 6, 9-12) when the chunk is closed, since only then
 * is it known what its samples use. bytes is the exact size of the whole
 * message once closed.
 *
 * A function's or location's local id is its list position + 1, a
 * string's is its position (string 0 is ""); 0 means "not in this chunk"
 * except for "". */
typedef struct {
    uint32_t *str_id, *fn_id, *loc_id; /* indexed by encoder-wide index */
    uint32_t *strs, *fns, *locs;       /* encoder-wide index by list position */
    size_t nstr, nfn, nloc;
    size_t first, nsamples; /* range of enc.kept */
    uint8_t *buf;           /* reused by every chunk of the call */
    size_t len, cap;        /* written, allocated */
    size_t bytes;
} chunk;

typedef struct {
    size_t nstr, nfn, nloc, nsamples, len, bytes;
} chunk_mark;

typedef struct {
    const pn_profile *p;
    const pn_encode_opts *o;
    int nvalues;
    pn_profile_sink sink;
    void *ud;
    pn_error *e;

    strtab strs;
    uint32_t empty; /* the string "" */
    uint32_t type_str[PN_MAX_VALUES], unit_str[PN_MAX_VALUES];
    uint32_t ptype_str, punit_str;
    uint32_t tid_key, tname_key;

    gfunc *fns;
    size_t nfns, fns_cap;
    pn_u64map fn_map;
    gloc *locs;
    size_t nlocs, locs_cap;
    pn_u64map loc_map;

    uint32_t *sid_str;   /* symbols string id -> string; NONE until seen */
    uint32_t nsids;
    uint32_t *frame_loc; /* frame id -> location; NONE until seen */
    uint32_t nframes;
    uint32_t unknown_loc; /* where unreadable frame ids go */
    uint64_t bad_frames;

    gpair *pairs;
    size_t npairs, pairs_cap;
    glabels *lsets;
    size_t nlsets, lsets_cap;
    pn_u64map lset_map; /* label set id -> lsets index */
    pn_u64map tid_map;  /* thread id -> string */

    kept_sample *kept;
    size_t nkept;
    size_t sum_frames, sum_labels, sum_value_bytes; /* over the kept samples */

    chunk c;
    int emitted;
    size_t oversize;
} enc;

/* One sample of the profile, resolved to its stack and label set. */
typedef struct {
    const pn_frame_id *frames;
    uint32_t depth;
    uint32_t labels;
    uint64_t tid;
    uint32_t thread_name;
    const int64_t *values;
} view;

static void view_of(const pn_profile *p, size_t i, view *v)
{
    const pn_profile_sample *s = &p->samples[i];
    const pn_profile_span *st = &p->stacks[s->stack];
    v->frames = p->stack_frames + st->off;
    v->depth = st->n;
    v->labels = s->labels;
    v->tid = s->tid;
    v->thread_name = s->thread_name;
    v->values = s->values;
}

static int oom(enc *x, const char *what)
{
    return pn_fail(x->e, PN_ENOMEM, "pprof: out of memory while building %s", what);
}

static int intern(enc *x, const char *s, size_t len, uint32_t *out)
{
    *out = strtab_intern(&x->strs, s, len);
    return *out == NONE ? oom(x, "the string table") : 0;
}

static int intern_c(enc *x, const char *s, uint32_t *out)
{
    return intern(x, s, strlen(s), out);
}

static int intern_sid(enc *x, uint32_t sid, uint32_t *out)
{
    if (sid < x->nsids && x->sid_str[sid] != NONE) {
        *out = x->sid_str[sid];
        return 0;
    }
    size_t len = 0;
    const char *s = pn_profile_str(x->p, sid, &len);
    if (intern(x, s, len, out) < 0)
        return -1;
    if (sid < x->nsids)
        x->sid_str[sid] = *out;
    return 0;
}

/* ------------------------------------------------ pass 1: resolution */

static int function_of(enc *x, uint32_t name, uint32_t file, uint32_t *out)
{
    uint64_t key = (uint64_t)name << 32 | file;
    uint32_t f = pn_u64map_get(&x->fn_map, key);
    if (f == NONE) {
        gfunc *nf = pn_grow_buf(x->fns, &x->fns_cap, x->nfns + 1, sizeof *x->fns);
        if (!nf)
            return oom(x, "the function table");
        x->fns = nf;
        f = (uint32_t)x->nfns;
        if (pn_u64map_put(&x->fn_map, key, f) < 0)
            return oom(x, "the function table");
        x->fns[x->nfns++] = (gfunc){name, file};
    }
    *out = f;
    return 0;
}

static int location_of(enc *x, uint32_t func, uint32_t line, uint32_t *out)
{
    uint64_t key = (uint64_t)func << 32 | line;
    uint32_t l = pn_u64map_get(&x->loc_map, key);
    if (l == NONE) {
        gloc *nl = pn_grow_buf(x->locs, &x->locs_cap, x->nlocs + 1, sizeof *x->locs);
        if (!nl)
            return oom(x, "the location table");
        x->locs = nl;
        l = (uint32_t)x->nlocs;
        if (pn_u64map_put(&x->loc_map, key, l) < 0)
            return oom(x, "the location table");
        x->locs[x->nlocs++] = (gloc){func, line};
    }
    *out = l;
    return 0;
}

/* Location of frame f; reads the symbols once per frame id. */
static int frame_location(enc *x, pn_frame_id f, uint32_t *out)
{
    if (f < x->nframes && x->frame_loc[f] != NONE) {
        *out = x->frame_loc[f];
        return 0;
    }
    if (f >= x->nframes) {
        /* Not a frame of this period: keep the sample, but as [unknown]. */
        x->bad_frames++;
        *out = x->unknown_loc;
        return 0;
    }
    const uint32_t *fr = x->p->frames + 3 * (size_t)f;
    uint32_t name_sid = fr[0], file_sid = fr[1], line = fr[2];
    uint32_t name, file, func;
    if (intern_sid(x, name_sid, &name) < 0 || intern_sid(x, file_sid, &file) < 0 ||
        function_of(x, name, file, &func) < 0 || location_of(x, func, line, out) < 0)
        return -1;
    x->frame_loc[f] = *out;
    return 0;
}

static int add_pair(enc *x, uint32_t key, uint32_t value)
{
    gpair *np = pn_grow_buf(x->pairs, &x->pairs_cap, x->npairs + 1, sizeof *x->pairs);
    if (!np)
        return oom(x, "the label table");
    x->pairs = np;
    x->pairs[x->npairs++] = (gpair){key, value};
    return 0;
}

/* Whether label set `ls` of the profile has key sid... by its text. */
static int lset_has_key(const enc *x, uint32_t ls, const char *key)
{
    const pn_profile_span *sp = &x->p->lsets[ls];
    for (uint32_t i = 0; i < sp->n; i++) {
        size_t len;
        const char *k = pn_profile_str(x->p, x->p->pairs[sp->off + 2 * i], &len);
        if (strcmp(k, key) == 0)
            return 1;
    }
    return 0;
}

/* The glabels entry for the profile's label set `ls`, built on first use. */
static int labels_of(enc *x, uint32_t ls, uint32_t *out)
{
    uint32_t idx = pn_u64map_get(&x->lset_map, ls);
    if (idx != NONE) {
        *out = idx;
        return 0;
    }
    glabels *ng = pn_grow_buf(x->lsets, &x->lsets_cap, x->nlsets + 1, sizeof *x->lsets);
    if (!ng)
        return oom(x, "the label table");
    x->lsets = ng;
    glabels g = {.first = (uint32_t)x->npairs};
    const pn_profile_span *sp = ls < x->p->nlsets ? &x->p->lsets[ls] : NULL;
    for (uint32_t i = 0; sp && i < sp->n; i++) {
        uint32_t k, v;
        const uint32_t *kv = x->p->pairs + sp->off + 2 * i;
        if (intern_sid(x, kv[0], &k) < 0 || intern_sid(x, kv[1], &v) < 0)
            return -1;
        /* A label the store could not keep (symbols full) is left out. */
        if (k != x->empty && v != x->empty && add_pair(x, k, v) < 0)
            return -1;
    }
    /* The sample's own labels are more specific than the extras (pid, static
     * tags): on equal keys the sample's win, so no key appears twice. */
    for (size_t i = 0; i < x->o->n_extra; i++) {
        const pn_label *l = &x->o->extra_labels[i];
        if (sp && lset_has_key(x, ls, l->key))
            continue;
        uint32_t k, v;
        if (intern_c(x, l->key, &k) < 0 || intern_c(x, l->value, &v) < 0 || add_pair(x, k, v) < 0)
            return -1;
    }
    g.n = (uint32_t)(x->npairs - g.first);
    for (size_t i = g.first; i < x->npairs; i++) {
        g.has_tid |= x->pairs[i].key == x->tid_key;
        g.has_tname |= x->pairs[i].key == x->tname_key;
    }
    idx = (uint32_t)x->nlsets;
    if (pn_u64map_put(&x->lset_map, ls, idx) < 0)
        return oom(x, "the label table");
    x->lsets[x->nlsets++] = g;
    *out = idx;
    return 0;
}

static int tid_string(enc *x, uint64_t tid, uint32_t *out)
{
    uint32_t s = pn_u64map_get(&x->tid_map, tid);
    if (s == NONE) {
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%" PRIu64, tid);
        if (intern(x, buf, (size_t)n, &s) < 0)
            return -1;
        if (pn_u64map_put(&x->tid_map, tid, s) < 0)
            return oom(x, "the thread id table");
    }
    *out = s;
    return 0;
}

static bool all_zero(const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] != 0)
            return false;
    return true;
}

static int resolve(enc *x)
{
    size_t n = x->p->nsamples;
    /* Sized once: doubling would copy (and fault in) it several times. */
    x->kept = malloc(n * sizeof *x->kept);
    if (!x->kept)
        return oom(x, "the sample list");
    for (size_t i = 0; i < n; i++) {
        view v;
        view_of(x->p, i, &v);
        if (all_zero(v.values, x->nvalues))
            continue; /* receivers drop them; they carry nothing */
        kept_sample k = {.index = (uint32_t)i, .tid = NONE, .tname = NONE};
        for (uint32_t d = 0; d < v.depth; d++) {
            pn_frame_id f = v.frames[d];
            uint32_t loc;
            /* Most frames recur: test the cache before making a call. */
            if ((f >= x->nframes || x->frame_loc[f] == NONE) &&
                frame_location(x, f, &loc) < 0)
                return -1;
        }
        if (labels_of(x, v.labels, &k.labels) < 0)
            return -1;
        const glabels *g = &x->lsets[k.labels];
        if (v.tid != 0 && !g->has_tid && tid_string(x, v.tid, &k.tid) < 0)
            return -1;
        if (v.thread_name != PN_STR_EMPTY && !g->has_tname &&
            intern_sid(x, v.thread_name, &k.tname) < 0)
            return -1;
        x->sum_frames += v.depth;
        x->sum_labels += g->n + (k.tid != NONE) + (k.tname != NONE);
        for (int j = 0; j < x->nvalues; j++)
            x->sum_value_bytes += pn_varint_size((uint64_t)v.values[j]);
        x->kept[x->nkept++] = k;
    }
    return 0;
}

/* ------------------------------------------------- pass 2: chunking */

static void chunk_mark_get(const chunk *c, chunk_mark *m)
{
    *m = (chunk_mark){c->nstr, c->nfn, c->nloc, c->nsamples, c->len, c->bytes};
}

/* Forget everything added since the mark. */
static void chunk_rollback(chunk *c, const chunk_mark *m)
{
    for (size_t i = m->nstr; i < c->nstr; i++)
        c->str_id[c->strs[i]] = 0;
    for (size_t i = m->nfn; i < c->nfn; i++)
        c->fn_id[c->fns[i]] = 0;
    for (size_t i = m->nloc; i < c->nloc; i++)
        c->loc_id[c->locs[i]] = 0;
    c->nstr = m->nstr;
    c->nfn = m->nfn;
    c->nloc = m->nloc;
    c->nsamples = m->nsamples;
    c->len = m->len;
    c->bytes = m->bytes;
}

/* Room for n more bytes in the chunk's message. */
static int chunk_reserve(enc *x, size_t n)
{
    chunk *c = &x->c;
    if (c->buf && n <= c->cap - c->len)
        return 0;
    /* The message is sized up front (message_bound), so this is rare. */
    size_t ncap = c->cap ? c->cap : 4096;
    while (ncap - c->len < n) {
        if (ncap > SIZE_MAX / 2)
            return oom(x, "a profile message");
        ncap *= 2;
    }
    uint8_t *nb = pn_scratch_alloc(ncap);
    if (!nb)
        return oom(x, "a profile message");
    if (c->len)
        memcpy(nb, c->buf, c->len);
    pn_scratch_free(c->buf, c->cap);
    c->buf = nb;
    c->cap = ncap;
    return 0;
}

/* Local index of string s in the chunk (string_table position). */
static uint32_t chunk_str(enc *x, uint32_t s)
{
    chunk *c = &x->c;
    if (s == x->empty)
        return 0;
    if (!c->str_id[s]) {
        c->strs[c->nstr++] = s;
        c->str_id[s] = (uint32_t)c->nstr - 1; /* "" holds position 0 */
        c->bytes += pn_field_len_size(x->strs.v[s].len);
    }
    return c->str_id[s];
}

static uint32_t chunk_fn(enc *x, uint32_t f)
{
    chunk *c = &x->c;
    if (!c->fn_id[f]) {
        uint32_t name = chunk_str(x, x->fns[f].name);
        uint32_t file = chunk_str(x, x->fns[f].file);
        c->fns[c->nfn++] = f;
        c->fn_id[f] = (uint32_t)c->nfn;
        c->bytes += pn_field_len_size(pn_field_u64_size(c->fn_id[f]) +
                                      pn_field_u64_size(name) + pn_field_u64_size(file));
    }
    return c->fn_id[f];
}

/* Location l's Line message: its function and line number. */
static size_t line_size(uint32_t fn, uint32_t line)
{
    return pn_field_u64_size(fn) + pn_field_u64_size(line);
}

static size_t location_size(uint32_t id, uint32_t fn, uint32_t line)
{
    return pn_field_u64_size(id) + pn_field_len_size(line_size(fn, line));
}

static uint32_t chunk_loc(enc *x, uint32_t l)
{
    chunk *c = &x->c;
    if (!c->loc_id[l]) {
        uint32_t fn = chunk_fn(x, x->locs[l].func);
        c->locs[c->nloc++] = l;
        c->loc_id[l] = (uint32_t)c->nloc;
        c->bytes += pn_field_len_size(location_size(c->loc_id[l], fn, x->locs[l].line));
    }
    return c->loc_id[l];
}

static uint32_t loc_of_frame(const enc *x, pn_frame_id f)
{
    return f < x->nframes ? x->frame_loc[f] : x->unknown_loc;
}

static size_t value_type_size(uint32_t type, uint32_t unit)
{
    return pn_field_u64_size(type) + pn_field_u64_size(unit);
}

static uint8_t *put_value_type(uint8_t *p, unsigned field, uint32_t type, uint32_t unit)
{
    p = pn_put_field_len(p, field, value_type_size(type, unit));
    p = pn_put_field_u64(p, 1, type);
    return pn_put_field_u64(p, 2, unit);
}

static size_t label_size(uint32_t key, uint32_t str)
{
    return pn_field_len_size(pn_field_u64_size(key) + pn_field_u64_size(str));
}

/* Size of a label, giving its strings local ids: the key first (argument
 * order in C is unspecified, and string order should not be). */
static size_t chunk_label(enc *x, uint32_t key, uint32_t value)
{
    uint32_t k = chunk_str(x, key);
    return label_size(k, chunk_str(x, value));
}

static uint8_t *put_label(uint8_t *p, uint32_t key, uint32_t str)
{
    p = pn_put_field_len(p, 3, pn_field_u64_size(key) + pn_field_u64_size(str));
    p = pn_put_field_u64(p, 1, key);
    return pn_put_field_u64(p, 2, str);
}

/* The trailing scalars and the period type (fields 9-12). */
static size_t tail_size(const enc *x, uint32_t ptype, uint32_t punit)
{
    int64_t dur = x->p->end_ns - x->p->start_ns;
    return pn_field_u64_size((uint64_t)x->p->start_ns) +
           pn_field_u64_size((uint64_t)(dur > 0 ? dur : 0)) +
           pn_field_len_size(value_type_size(ptype, punit)) +
           pn_field_u64_size((uint64_t)x->o->period);
}

/* Start an empty chunk at kept sample `first`: string 0 is "", then the
 * strings of the sample and period types; the sample types are written. */
static int chunk_start(enc *x, size_t first)
{
    chunk *c = &x->c;
    chunk_mark zero = {.nstr = 1};
    chunk_rollback(c, &zero);
    c->strs[0] = x->empty;
    c->first = first;
    c->bytes = pn_field_len_size(0);
    uint32_t type[PN_MAX_VALUES], unit[PN_MAX_VALUES];
    size_t head = 0;
    for (int i = 0; i < x->nvalues; i++) {
        type[i] = chunk_str(x, x->type_str[i]);
        unit[i] = chunk_str(x, x->unit_str[i]);
        head += pn_field_len_size(value_type_size(type[i], unit[i]));
    }
    uint32_t pt = chunk_str(x, x->ptype_str);
    uint32_t pu = chunk_str(x, x->punit_str);
    c->bytes += head + tail_size(x, pt, pu);
    if (chunk_reserve(x, head) < 0)
        return -1;
    uint8_t *p = c->buf;
    for (int i = 0; i < x->nvalues; i++)
        p = put_value_type(p, 1, type[i], unit[i]);
    c->len = head;
    return 0;
}

/* Add kept sample k to the chunk: ids for its locations, functions and
 * strings, then the Sample message itself, sized first. */
static int chunk_add(enc *x, const kept_sample *k)
{
    chunk *c = &x->c;
    view v;
    view_of(x->p, k->index, &v);
    size_t ids = 0;
    for (uint32_t d = 0; d < v.depth; d++)
        ids += pn_varint_size(chunk_loc(x, loc_of_frame(x, v.frames[d])));
    size_t vals = 0;
    for (int i = 0; i < x->nvalues; i++)
        vals += pn_varint_size((uint64_t)v.values[i]);
    size_t body = (v.depth ? pn_field_len_size(ids) : 0) + pn_field_len_size(vals);
    const glabels *g = &x->lsets[k->labels];
    const gpair *pairs = &x->pairs[g->first];
    for (uint32_t i = 0; i < g->n; i++)
        body += chunk_label(x, pairs[i].key, pairs[i].value);
    if (k->tid != NONE)
        body += chunk_label(x, x->tid_key, k->tid);
    if (k->tname != NONE)
        body += chunk_label(x, x->tname_key, k->tname);
    size_t size = pn_field_len_size(body);
    if (chunk_reserve(x, size) < 0)
        return -1;

    /* Every id it needs is assigned now. */
    const uint32_t *sid = c->str_id;
    uint8_t *p = pn_put_field_len(c->buf + c->len, 2, body);
    if (v.depth) {
        p = pn_put_field_len(p, 1, ids);
        for (uint32_t d = 0; d < v.depth; d++)
            p = pn_put_varint(p, c->loc_id[loc_of_frame(x, v.frames[d])]);
    }
    p = pn_put_field_len(p, 2, vals);
    for (int i = 0; i < x->nvalues; i++)
        p = pn_put_varint(p, (uint64_t)v.values[i]);
    for (uint32_t i = 0; i < g->n; i++)
        p = put_label(p, sid[pairs[i].key], sid[pairs[i].value]);
    if (k->tid != NONE)
        p = put_label(p, sid[x->tid_key], sid[k->tid]);
    if (k->tname != NONE)
        p = put_label(p, sid[x->tname_key], sid[k->tname]);
    c->len += size;
    c->bytes += size;
    c->nsamples++;
    return 0;
}

/* The sizes computed and the bytes written pair up one to one (wire.h);
 * a mismatch is a bug here, never a reason to send a broken profile. */
static int size_mismatch(enc *x)
{
    return pn_fail(x->e, PN_EPROTO, "pprof: internal error: a chunk was sized %zu bytes "
                   "but %zu were written", x->c.bytes, x->c.len);
}

/* Write what the samples use (locations, functions, strings) and the
 * trailing fields; the message is then complete. */
static int chunk_close(enc *x)
{
    chunk *c = &x->c;
    if (c->bytes < c->len)
        return size_mismatch(x);
    if (chunk_reserve(x, c->bytes - c->len) < 0)
        return -1;
    uint8_t *p = c->buf + c->len;
    for (size_t i = 0; i < c->nloc; i++) {
        const gloc *l = &x->locs[c->locs[i]];
        uint32_t id = (uint32_t)i + 1, fn = c->fn_id[l->func];
        p = pn_put_field_len(p, 4, location_size(id, fn, l->line));
        p = pn_put_field_u64(p, 1, id);
        p = pn_put_field_len(p, 4, line_size(fn, l->line));
        p = pn_put_field_u64(p, 1, fn);
        p = pn_put_field_u64(p, 2, l->line);
    }
    for (size_t i = 0; i < c->nfn; i++) {
        const gfunc *f = &x->fns[c->fns[i]];
        uint32_t id = (uint32_t)i + 1, name = c->str_id[f->name], file = c->str_id[f->file];
        p = pn_put_field_len(p, 5, pn_field_u64_size(id) + pn_field_u64_size(name) +
                                       pn_field_u64_size(file));
        p = pn_put_field_u64(p, 1, id);
        p = pn_put_field_u64(p, 2, name);
        p = pn_put_field_u64(p, 4, file);
    }
    for (size_t i = 0; i < c->nstr; i++) {
        const gstr *g = &x->strs.v[c->strs[i]];
        p = pn_put_field_bytes(p, 6, x->strs.arena + g->off, g->len);
    }
    int64_t dur = x->p->end_ns - x->p->start_ns;
    p = pn_put_field_u64(p, 9, (uint64_t)x->p->start_ns);
    p = pn_put_field_u64(p, 10, (uint64_t)(dur > 0 ? dur : 0));
    p = put_value_type(p, 11, c->str_id[x->ptype_str], c->str_id[x->punit_str]);
    p = pn_put_field_u64(p, 12, (uint64_t)x->o->period);
    c->len = (size_t)(p - c->buf);
    return c->len == c->bytes ? 0 : size_mismatch(x);
}

/* ---------------------------------------------------- emitting chunks */

/* Close, gzip and hand over the chunk now built. */
static int emit(enc *x)
{
    if (chunk_close(x) < 0)
        return -1;
    if (x->c.len > x->o->max_bytes)
        x->oversize++; /* a single sample over the limit: sent, and counted */
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    if (pn_gzip(x->c.buf, x->c.len, &gz, &gz_len, x->e) < 0)
        return -1;
    int rc = x->sink(x->ud, gz, gz_len, x->c.nsamples);
    free(gz);
    if (rc != 0)
        return pn_fail(x->e, PN_EIO,
                       "pprof: the profile sink stopped at part %d (it returned %d)",
                       x->emitted, rc);
    x->emitted++;
    return 0;
}

static int split_and_emit(enc *x)
{
    size_t max_samples = x->o->max_samples, max_bytes = x->o->max_bytes;
    size_t i = 0;
    while (i < x->nkept) {
        if (chunk_start(x, i) < 0)
            return -1;
        while (i < x->nkept) {
            chunk_mark mark;
            chunk_mark_get(&x->c, &mark);
            if (chunk_add(x, &x->kept[i]) < 0)
                return -1;
            if (x->c.nsamples > 1 &&
                (x->c.nsamples > max_samples || x->c.bytes > max_bytes)) {
                chunk_rollback(&x->c, &mark);
                break;
            }
            i++;
        }
        if (emit(x) < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ driver */

static int check_opts(const pn_encode_opts *o, int nvalues, pn_error *e)
{
    if (nvalues < 1 || nvalues > PN_MAX_VALUES)
        return pn_fail(e, PN_EINVAL, "pprof: the profile has %d values per sample; "
                       "it must have 1..%d", nvalues, PN_MAX_VALUES);
    for (int i = 0; i < nvalues; i++)
        if (!o->sample_types[i].type || !o->sample_types[i].unit)
            return pn_fail(e, PN_EINVAL, "pprof: sample_types[%d] needs a type and a unit "
                           "(the period has %d values per sample)", i, nvalues);
    if (!o->period_type.type || !o->period_type.unit)
        return pn_fail(e, PN_EINVAL, "pprof: period_type needs a type and a unit");
    if (o->max_samples < 1)
        return pn_fail(e, PN_EINVAL, "pprof: max_samples is 0; it must be at least 1");
    if (o->max_bytes < 1)
        return pn_fail(e, PN_EINVAL, "pprof: max_bytes is 0; it must be at least 1");
    if (o->n_extra && !o->extra_labels)
        return pn_fail(e, PN_EINVAL, "pprof: n_extra is %zu but extra_labels is NULL",
                       o->n_extra);
    for (size_t i = 0; i < o->n_extra; i++)
        if (!o->extra_labels[i].key || !o->extra_labels[i].value)
            return pn_fail(e, PN_EINVAL, "pprof: extra_labels[%zu] has a NULL key or value",
                           i);
    return 0;
}

static int setup(enc *x)
{
    x->nsids = x->p->nstr;
    x->nframes = x->p->nframes;
    x->sid_str = malloc(((size_t)x->nsids + 1) * sizeof *x->sid_str);
    x->frame_loc = malloc(((size_t)x->nframes + 1) * sizeof *x->frame_loc);
    if (!x->sid_str || !x->frame_loc)
        return oom(x, "the symbol maps");
    memset(x->sid_str, 0xff, (size_t)x->nsids * sizeof *x->sid_str);
    memset(x->frame_loc, 0xff, (size_t)x->nframes * sizeof *x->frame_loc);

    /* "" first: it must be string 0 of every profile. */
    if (intern(x, "", 0, &x->empty) < 0)
        return -1;
    for (int i = 0; i < x->nvalues; i++)
        if (intern_c(x, x->o->sample_types[i].type, &x->type_str[i]) < 0 ||
            intern_c(x, x->o->sample_types[i].unit, &x->unit_str[i]) < 0)
            return -1;
    if (intern_c(x, x->o->period_type.type, &x->ptype_str) < 0 ||
        intern_c(x, x->o->period_type.unit, &x->punit_str) < 0 ||
        intern_c(x, "thread_id", &x->tid_key) < 0 ||
        intern_c(x, "thread_name", &x->tname_key) < 0)
        return -1;

    /* Frame ids the symbols do not know become [unknown]: the period's own
     * [unknown] frame when it has one. */
    uint32_t name, func;
    if (PN_FRAME_UNKNOWN < x->nframes)
        return frame_location(x, PN_FRAME_UNKNOWN, &x->unknown_loc);
    if (intern_c(x, "[unknown]", &name) < 0 || function_of(x, name, x->empty, &func) < 0)
        return -1;
    return location_of(x, func, 0, &x->unknown_loc);
}

/* The size of a message holding every kept sample, or a little more:
 * local ids are below the encoder-wide counts, which bounds their varints,
 * and lengths take at most 5 bytes. The chunk buffer starts this big (or
 * at max_bytes): grown by doubling, it was copied through every size on
 * the way, each copy faulting in fresh pages. */
static size_t message_bound(const enc *x)
{
    size_t wl = pn_varint_size(x->nlocs), wf = pn_varint_size(x->nfns),
           ws = pn_varint_size(x->strs.n);
    size_t samples = x->nkept * (6 + 6 + 6) + x->sum_frames * wl + x->sum_value_bytes +
                     x->sum_labels * (2 + 2 * (1 + ws));
    size_t tables = x->strs.arena_used + 6 * x->strs.n + x->nfns * (2 + (1 + wf) + 2 * (1 + ws)) +
                    x->nlocs * (2 + (1 + wl) + 2 + (1 + wf) + 6);
    return samples + tables + 16 * (PN_MAX_VALUES + 1) + 64;
}

static int chunk_alloc(enc *x)
{
    chunk *c = &x->c;
    size_t ns = x->strs.n, nf = x->nfns, nl = x->nlocs;
    c->str_id = calloc(ns, sizeof *c->str_id);
    c->strs = malloc(ns * sizeof *c->strs);
    c->fn_id = calloc(nf ? nf : 1, sizeof *c->fn_id);
    c->fns = malloc((nf ? nf : 1) * sizeof *c->fns);
    c->loc_id = calloc(nl ? nl : 1, sizeof *c->loc_id);
    c->locs = malloc((nl ? nl : 1) * sizeof *c->locs);
    c->cap = message_bound(x);
    if (c->cap > x->o->max_bytes)
        c->cap = x->o->max_bytes;
    c->buf = pn_scratch_alloc(c->cap);
    if (!c->str_id || !c->strs || !c->fn_id || !c->fns || !c->loc_id || !c->locs || !c->buf)
        return oom(x, "the chunk tables");
    c->nstr = 1; /* "" */
    return 0;
}

static void enc_free(enc *x)
{
    strtab_free(&x->strs);
    free(x->fns);
    pn_u64map_free(&x->fn_map);
    free(x->locs);
    pn_u64map_free(&x->loc_map);
    free(x->sid_str);
    free(x->frame_loc);
    free(x->pairs);
    free(x->lsets);
    pn_u64map_free(&x->lset_map);
    pn_u64map_free(&x->tid_map);
    free(x->kept);
    free(x->c.str_id);
    free(x->c.strs);
    free(x->c.fn_id);
    free(x->c.fns);
    free(x->c.loc_id);
    free(x->c.locs);
    pn_scratch_free(x->c.buf, x->c.cap);
}

void pn_encode_opts_from_profile(pn_encode_opts *o, const pn_profile *p)
{
    pn_encode_opts_default(o);
    for (int i = 0; i < p->nvalues; i++)
        o->sample_types[i] = p->sample_types[i];
    o->period_type = p->period_type;
    o->period = p->period;
    o->extra_labels = p->extra_labels;
    o->n_extra = p->n_extra;
}

int pn_pprof_encode(const pn_profile *p, const pn_encode_opts *o, pn_profile_sink sink,
                    void *ud, pn_error *e)
{
    pn_encode_opts defaults;
    if (!o) {
        pn_encode_opts_default(&defaults);
        o = &defaults;
    }
    if (!p || !sink)
        return pn_fail(e, PN_EINVAL, "pprof: %s is NULL", p ? "the sink" : "the profile");
    int nvalues = p->nvalues;
    if (check_opts(o, nvalues, e) < 0)
        return -1;
    if (p->nsamples == 0)
        return 0;

    enc x = {.p = p, .o = o, .nvalues = nvalues,
             .sink = sink, .ud = ud, .e = e};
    int rc = -1;
    if (setup(&x) < 0 || resolve(&x) < 0)
        goto out;
    if (x.bad_frames)
        pn_log(PN_LOG_WARN, "pprof: %" PRIu64 " frame references were not in the period's "
               "symbol table; encoded as [unknown]", x.bad_frames);
    if (x.nkept == 0) {
        rc = 0;
        goto out;
    }
    if (chunk_alloc(&x) < 0 || split_and_emit(&x) < 0)
        goto out;
    if (x.oversize)
        pn_log(PN_LOG_WARN, "pprof: %zu profile(s) hold a single sample larger than "
               "max_bytes (%zu) and were sent over the limit", x.oversize, o->max_bytes);
    rc = x.emitted;
out:
    enc_free(&x);
    return rc;
}
