/* The OTLP profiles encoder: one sealed period (pn_profile) in, one
 * ExportProfilesServiceRequest out, packed by the protobuf-c code that
 * `make proto` generates from proto/opentelemetry (v1.10.0).
 *
 * Dictionary layout. Every table starts with its zero value, as the spec
 * requires. The string table is the profile's own strings in their order
 * (so a profile string id is its string index; id 0 is "" in both), then
 * the strings only OTLP needs (value types, extra labels, thread ids).
 * Each frame of the profile is location frame + 1 with one Line; functions
 * are deduplicated by (name, file); stack s is stack_table[s + 1];
 * attributes are deduplicated by (key, value) string indexes; links by the
 * (trace_id, span_id) label strings.
 *
 * The messages point into the profile (strings, sample values) instead of
 * copying. Everything is owned by the single call on the exporter thread. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "encoding/otlp.h"
#include "pyroscope_native.h"
#include "support/grow.h"
#include "support/u64map.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles ResourceProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles ScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Profile;
typedef Opentelemetry__Proto__Profiles__V1development__Link Link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType ValueType;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Stack Stack;
typedef Opentelemetry__Proto__Profiles__V1development__Location Location;
typedef Opentelemetry__Proto__Profiles__V1development__Line Line;
typedef Opentelemetry__Proto__Profiles__V1development__Function Function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KeyValueAndUnit;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Request;

/* A growing list of pointers (the repeated message fields). */
typedef struct {
    void **v;
    size_t n, cap;
} plist;

/* The attributes of one label set of the profile, and its link. */
typedef struct {
    uint32_t first, n;          /* into enc.attr_pool */
    int32_t link;
    bool has_tid, has_tname;
} lset_attrs;

typedef struct {
    const pn_profile *p;
    pn_error *e;
    /* The Profiles sent: value columns of p, in order (see pick_columns). */
    int cols[PN_MAX_VALUES];
    int ncols;
    int cpu_as_count;           /* cols[0] is measured CPU sent as samples/count, period 1 ns */
    int file_in_name;           /* pn_otlp_opts.file_in_name */

    plist strings;              /* char * (the profile's, then owned ones) */
    plist owned;                /* strings this call allocated */
    plist functions, attributes, links;
    pn_u64map fn_map, attr_map, link_map, str_extra, tid_map;
    int32_t tid_key, tname_key;

    Function *fns;              /* backing of plist functions */
    size_t fns_cap;
    KeyValueAndUnit *kvs;
    AnyValue *anys;             /* their values, same index */
    size_t kvs_cap, anys_cap;
    Link *lks;
    uint8_t *lk_bytes;          /* 24 per link: trace id, span id */
    size_t lks_cap, lkb_cap;

    lset_attrs *lsets;          /* per profile label set */
    int32_t *attr_pool;
    size_t attr_n, attr_cap;
} enc;

static int oom(enc *x, const char *what)
{
    return pn_fail(x->e, PN_ENOMEM, "OTLP encoding: out of memory for %s", what);
}

static int push(enc *x, plist *l, void *v, const char *what)
{
    void **nv = pn_grow_buf(l->v, &l->cap, l->n + 1, sizeof *l->v);
    if (!nv)
        return oom(x, what);
    l->v = nv;
    l->v[l->n++] = v;
    return 0;
}

/* ----------------------------------------------------------- strings */

static uint64_t fnv64(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Index of a string OTLP adds (deduplicated among those; the profile's own
 * strings are not searched: a duplicate is allowed, just not minimal). */
static int intern(enc *x, const char *s, int32_t *out)
{
    uint64_t h = fnv64(s);
    for (uint64_t k = h;; k++) {
        uint32_t i = pn_u64map_get(&x->str_extra, k);
        if (i == PN_U64MAP_NONE)
            break;
        if (strcmp(x->strings.v[i], s) == 0) {
            *out = (int32_t)i;
            return 0;
        }
    }
    char *d = strdup(s);
    if (!d || push(x, &x->owned, d, "strings")) {
        free(d);
        return oom(x, "strings");
    }
    uint32_t idx = (uint32_t)x->strings.n;
    if (push(x, &x->strings, d, "strings"))
        return -1;
    uint64_t k = h;
    while (pn_u64map_get(&x->str_extra, k) != PN_U64MAP_NONE)
        k++;
    if (pn_u64map_put(&x->str_extra, k, idx) < 0)
        return oom(x, "strings");
    *out = (int32_t)idx;
    return 0;
}

static const char *str_at(const enc *x, int32_t i) { return x->strings.v[i]; }

/* --------------------------------------------------------- functions */

static int function_of(enc *x, uint32_t name, uint32_t file, int32_t *out)
{
    uint64_t key = (uint64_t)name << 32 | file;
    uint32_t f = pn_u64map_get(&x->fn_map, key);
    if (f == PN_U64MAP_NONE) {
        /* Pointers into fns would move as it grows: they are taken once
         * every function exists (see link_pointers). */
        Function *nf = pn_grow_buf(x->fns, &x->fns_cap, x->functions.n + 1, sizeof *x->fns);
        if (!nf)
            return oom(x, "functions");
        x->fns = nf;
        f = (uint32_t)x->functions.n;
        Function fn = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
        fn.name_strindex = (int32_t)name;
        fn.filename_strindex = (int32_t)file;
        x->fns[f] = fn;
        if (push(x, &x->functions, NULL, "functions") || pn_u64map_put(&x->fn_map, key, f) < 0)
            return oom(x, "functions");
    }
    *out = (int32_t)f;
    return 0;
}

/* -------------------------------------------------------- attributes */

static int attribute_of(enc *x, int32_t key, int32_t value, int32_t *out)
{
    uint64_t k = (uint64_t)(uint32_t)key << 32 | (uint32_t)value;
    uint32_t a = pn_u64map_get(&x->attr_map, k);
    if (a == PN_U64MAP_NONE) {
        size_t n = x->attributes.n;
        KeyValueAndUnit *nk = pn_grow_buf(x->kvs, &x->kvs_cap, n + 1, sizeof *x->kvs);
        if (!nk)
            return oom(x, "attributes");
        x->kvs = nk;
        if (x->anys_cap != x->kvs_cap) {
            AnyValue *na = realloc(x->anys, x->kvs_cap * sizeof *na);
            if (!na)
                return oom(x, "attributes");
            x->anys = na;
            x->anys_cap = x->kvs_cap;
        }
        KeyValueAndUnit kv = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT;
        AnyValue av = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
        kv.key_strindex = key;
        if (n > 0) {
            /* The value inline (not string_value_strindex): every v1.10
             * reader takes it. */
            av.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            av.string_value = (char *)str_at(x, value);
        }
        x->kvs[n] = kv;
        x->anys[n] = av;
        a = (uint32_t)n;
        if (push(x, &x->attributes, NULL, "attributes") || pn_u64map_put(&x->attr_map, k, a) < 0)
            return oom(x, "attributes");
    }
    *out = (int32_t)a;
    return 0;
}

static int add_attr(enc *x, int32_t a)
{
    int32_t *np = pn_grow_buf(x->attr_pool, &x->attr_cap, x->attr_n + 1, sizeof *np);
    if (!np)
        return oom(x, "attribute lists");
    x->attr_pool = np;
    x->attr_pool[x->attr_n++] = a;
    return 0;
}

/* ------------------------------------------------------------- links */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int pn_otlp_parse_id(const char *hex, size_t n, uint8_t *out)
{
    if (!hex || strlen(hex) != n || n % 2)
        return -1;
    int nonzero = 0;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
        nonzero |= out[i];
    }
    return nonzero ? 0 : -1;
}

/* The link of (trace, span) label strings, or 0 when they do not make
 * one. */
static int link_of(enc *x, uint32_t trace, uint32_t span, int32_t *out)
{
    *out = 0;
    size_t tl, sl;
    const char *t = pn_profile_str(x->p, trace, &tl), *s = pn_profile_str(x->p, span, &sl);
    uint8_t id[24];
    if (pn_otlp_parse_id(t, 32, id) || pn_otlp_parse_id(s, 16, id + 16))
        return 0;
    uint64_t key = (uint64_t)trace << 32 | span;
    uint32_t l = pn_u64map_get(&x->link_map, key);
    if (l == PN_U64MAP_NONE) {
        size_t n = x->links.n;
        Link *nl = pn_grow_buf(x->lks, &x->lks_cap, n + 1, sizeof *x->lks);
        if (!nl)
            return oom(x, "links");
        x->lks = nl;
        if (x->lkb_cap != x->lks_cap) {
            uint8_t *nb = realloc(x->lk_bytes, x->lks_cap * 24);
            if (!nb)
                return oom(x, "links");
            x->lk_bytes = nb;
            x->lkb_cap = x->lks_cap;
        }
        memcpy(x->lk_bytes + 24 * n, id, 24);
        Link lk = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
        x->lks[n] = lk;
        l = (uint32_t)n;
        if (push(x, &x->links, NULL, "links") || pn_u64map_put(&x->link_map, key, l) < 0)
            return oom(x, "links");
    }
    *out = (int32_t)l;
    return 0;
}

/* -------------------------------------------------------- label sets */

/* Attributes and link of every label set: its own labels (trace_id and
 * span_id become the link when they make one), then the extra labels it
 * does not override. */
static int build_lsets(enc *x, size_t n_extra, const int32_t *extra_k, const int32_t *extra_v)
{
    const pn_profile *p = x->p;
    x->lsets = calloc(p->nlsets ? p->nlsets : 1, sizeof *x->lsets);
    if (!x->lsets)
        return oom(x, "label sets");
    for (uint32_t ls = 0; ls < p->nlsets; ls++) {
        const pn_profile_span *sp = &p->lsets[ls];
        const uint32_t *kv = p->pairs + sp->off;
        uint32_t trace = 0, span = 0, trace_k = 0, span_k = 0;
        for (uint32_t i = 0; i < sp->n; i++) {
            size_t len;
            const char *k = pn_profile_str(p, kv[2 * i], &len);
            if (strcmp(k, PN_OTLP_TRACE_ID) == 0)
                trace_k = kv[2 * i], trace = kv[2 * i + 1];
            else if (strcmp(k, PN_OTLP_SPAN_ID) == 0)
                span_k = kv[2 * i], span = kv[2 * i + 1];
        }
        lset_attrs *la = &x->lsets[ls];
        if (trace && span && link_of(x, trace, span, &la->link) < 0)
            return -1;
        la->first = (uint32_t)x->attr_n;
        for (uint32_t i = 0; i < sp->n; i++) {
            uint32_t k = kv[2 * i], v = kv[2 * i + 1];
            /* A label the store could not keep (symbols full) is left out. */
            if (k == PN_STR_EMPTY || v == PN_STR_EMPTY || k >= p->nstr || v >= p->nstr)
                continue;
            /* Pyroscope (and the spec) read them from the link. */
            if (la->link && (k == trace_k || k == span_k))
                continue;
            int32_t a;
            if (attribute_of(x, (int32_t)k, (int32_t)v, &a) || add_attr(x, a))
                return -1;
            la->has_tid |= strcmp(str_at(x, (int32_t)k), "thread_id") == 0;
            la->has_tname |= strcmp(str_at(x, (int32_t)k), "thread_name") == 0;
        }
        for (size_t j = 0; j < n_extra; j++) {
            int own = 0;
            for (uint32_t i = 0; i < sp->n && !own; i++)
                own = strcmp(str_at(x, (int32_t)kv[2 * i]), str_at(x, extra_k[j])) == 0;
            int32_t a;
            if (!own && (attribute_of(x, extra_k[j], extra_v[j], &a) || add_attr(x, a)))
                return -1;
        }
        la->n = (uint32_t)(x->attr_n - la->first);
    }
    return 0;
}

/* ------------------------------------------------------------ samples */

/* The attribute list of sample s (its set's, then thread id and name when
 * reported and the set has none), appended to the pool; *first, *n. */
static int sample_attrs(enc *x, const pn_profile_sample *s, uint32_t *first, uint32_t *n)
{
    const lset_attrs *la = s->labels < x->p->nlsets ? &x->lsets[s->labels] : NULL;
    *first = (uint32_t)x->attr_n;
    for (uint32_t i = 0; la && i < la->n; i++)
        if (add_attr(x, x->attr_pool[la->first + i]))
            return -1;
    if (s->tid && !(la && la->has_tid)) {
        uint32_t v = pn_u64map_get(&x->tid_map, s->tid);
        if (v == PN_U64MAP_NONE) {
            char buf[24];
            int32_t si;
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)s->tid);
            if (intern(x, buf, &si) || pn_u64map_put(&x->tid_map, s->tid, (uint32_t)si) < 0)
                return oom(x, "thread ids");
            v = (uint32_t)si;
        }
        int32_t a;
        if (attribute_of(x, x->tid_key, (int32_t)v, &a) || add_attr(x, a))
            return -1;
    }
    if (s->thread_name != PN_STR_EMPTY && s->thread_name < x->p->nstr && !(la && la->has_tname)) {
        int32_t a;
        if (attribute_of(x, x->tname_key, (int32_t)s->thread_name, &a) || add_attr(x, a))
            return -1;
    }
    *n = (uint32_t)(x->attr_n - *first);
    return 0;
}

/* ------------------------------------------------------------ profile */

/* The system call, not getrandom(3): glibc has the wrapper only from 2.25,
 * and the prebuilt artifacts run on glibc 2.17 (a kernel before 3.17 says
 * ENOSYS and the fallback below is used). */
#ifndef GRND_NONBLOCK
#define GRND_NONBLOCK 0x0001
#endif

static void random_id(uint8_t id[16])
{
    if (syscall(SYS_getrandom, id, 16, GRND_NONBLOCK) == 16)
        return;
    /* No entropy yet (early boot): unique enough for deduplication. */
    uint64_t a = (uint64_t)pn_clock_ns(CLOCK_REALTIME), b = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL;
    memcpy(id, &a, 8);
    memcpy(id + 8, &b, 8);
    id[0] |= 1;
}

static void enc_free(enc *x)
{
    for (size_t i = 0; i < x->owned.n; i++)
        free(x->owned.v[i]);
    free(x->owned.v);
    free(x->strings.v);
    free(x->functions.v);
    free(x->attributes.v);
    free(x->links.v);
    pn_u64map_free(&x->fn_map);
    pn_u64map_free(&x->attr_map);
    pn_u64map_free(&x->link_map);
    pn_u64map_free(&x->str_extra);
    pn_u64map_free(&x->tid_map);
    free(x->fns);
    free(x->kvs);
    free(x->anys);
    free(x->lks);
    free(x->lk_bytes);
    free(x->lsets);
    free(x->attr_pool);
}

/* Everything the request points to besides enc's tables. */
typedef struct {
    Location *locs;
    Location **locp;
    Line *lines;
    Line **linep;
    Stack *stacks;
    Stack **stackp;
    int32_t *stack_locs;
    Sample *samples;            /* nvalues x nsamples */
    Sample **samplep;
    int32_t *sample_attrs;      /* per sample: first, n into the pool */
    uint32_t *sa_first, *sa_n;
    Profile profiles[PN_MAX_VALUES];
    Profile *profilep[PN_MAX_VALUES];
    uint8_t ids[PN_MAX_VALUES][16];
    KeyValue *res_kv;
    AnyValue *res_av;
    KeyValue **res_kvp;
} parts;

static void parts_free(parts *m)
{
    free(m->locs);
    free(m->locp);
    free(m->lines);
    free(m->linep);
    free(m->stacks);
    free(m->stackp);
    free(m->stack_locs);
    free(m->samples);
    free(m->samplep);
    free(m->sa_first);
    free(m->sa_n);
    free(m->res_kv);
    free(m->res_av);
    free(m->res_kvp);
}

static int check_profile(const pn_profile *p, pn_error *e)
{
    if (p->nvalues < 1 || p->nvalues > PN_MAX_VALUES)
        return pn_fail(e, PN_EINVAL, "OTLP encoding: %d values per sample (1 to %d)", p->nvalues,
                       PN_MAX_VALUES);
    for (int k = 0; k < p->nvalues; k++)
        if (!p->sample_types[k].type || !p->sample_types[k].unit)
            return pn_fail(e, PN_EINVAL, "OTLP encoding: sample type %d has no name or unit", k);
    if (p->nstr == 0)
        return pn_fail(e, PN_EPROTO, "OTLP encoding: the profile has no string table");
    for (uint32_t s = 0; s < p->nsamples; s++)
        if (p->samples[s].stack >= p->nstacks)
            return pn_fail(e, PN_EPROTO, "OTLP encoding: sample %u names stack %u of %u", s,
                           p->samples[s].stack, p->nstacks);
    return 0;
}

/* Tables of the dictionary that mirror the profile's: locations (one per
 * frame, each with one line) and stacks. */
static int build_frames(enc *x, parts *m)
{
    const pn_profile *p = x->p;
    size_t nl = (size_t)p->nframes + 1, ns = (size_t)p->nstacks + 1, nsf = 0;
    for (uint32_t s = 0; s < p->nstacks; s++)
        nsf += p->stacks[s].n;
    m->locs = calloc(nl, sizeof *m->locs);
    m->locp = calloc(nl, sizeof *m->locp);
    m->lines = calloc(nl, sizeof *m->lines);
    m->linep = calloc(nl, sizeof *m->linep);
    m->stacks = calloc(ns, sizeof *m->stacks);
    m->stackp = calloc(ns, sizeof *m->stackp);
    m->stack_locs = calloc(nsf ? nsf : 1, sizeof *m->stack_locs);
    if (!m->locs || !m->locp || !m->lines || !m->linep || !m->stacks || !m->stackp ||
        !m->stack_locs)
        return oom(x, "locations and stacks");
    Location l0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    m->locs[0] = l0;
    m->locp[0] = &m->locs[0];
    for (uint32_t f = 0; f < p->nframes; f++) {
        const uint32_t *fr = p->frames + 3 * (size_t)f;
        uint32_t name = fr[0] < p->nstr ? fr[0] : 0, file = fr[1] < p->nstr ? fr[1] : 0;
        if (x->file_in_name) {
            const char *fs = str_at(x, (int32_t)file), *nm = str_at(x, (int32_t)name);
            size_t n = strlen(fs) + strlen(nm) + 2;
            char *both = malloc(n);
            int32_t si;
            if (!both)
                return oom(x, "function names");
            snprintf(both, n, "%s %s", fs, nm);
            int rc = intern(x, both, &si);
            free(both);
            if (rc)
                return -1;
            name = (uint32_t)si;
        }
        int32_t fn;
        if (function_of(x, name, file, &fn))
            return -1;
        Line ln = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
        ln.function_index = fn;
        ln.line = fr[2];
        m->lines[f + 1] = ln;
        m->linep[f + 1] = &m->lines[f + 1];
        Location loc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
        loc.n_lines = 1;
        loc.lines = &m->linep[f + 1];
        m->locs[f + 1] = loc;
        m->locp[f + 1] = &m->locs[f + 1];
    }
    Stack s0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
    m->stacks[0] = s0;
    m->stackp[0] = &m->stacks[0];
    size_t off = 0;
    for (uint32_t s = 0; s < p->nstacks; s++) {
        const pn_profile_span *sp = &p->stacks[s];
        Stack st = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
        st.n_location_indices = sp->n;
        st.location_indices = m->stack_locs + off;
        for (uint32_t i = 0; i < sp->n; i++) {
            pn_frame_id f = p->stack_frames[sp->off + i];
            /* Leaf first, as in pprof. A frame outside the table (never
             * made by the store) points to the empty location. */
            m->stack_locs[off++] = f < p->nframes ? (int32_t)f + 1 : 0;
        }
        m->stacks[s + 1] = st;
        m->stackp[s + 1] = &m->stacks[s + 1];
    }
    return 0;
}

static int is_type(pn_value_type t, const char *type, const char *unit)
{
    return t.type && t.unit && strcmp(t.type, type) == 0 && strcmp(t.unit, unit) == 0;
}

/* Which value columns become Profiles. Pyroscope (pkg/ingester/otlp/
 * convert.go) shows a Profile as its default CPU view, process_cpu
 * (cpu:nanoseconds with period type cpu:nanoseconds), only when its sample
 * type is samples/count and its period type cpu/nanoseconds, as count x
 * period; any other type becomes a profile named after its period type
 * ("cpu"), beside it. Our tick counts x the tick period are not the CPU the
 * threads used (a tick stands for a whole interval of a thread that ran
 * for part of it; under load far more), so an on-CPU period is sent as one
 * Profile: samples/count, period 1 ns of cpu, values the measured CPU in
 * ns, which every reader of that shape multiplies back to the measured
 * CPU. Other periods (wall, heap) send every column. */
static void pick_columns(enc *x)
{
    const pn_profile *p = x->p;
    x->ncols = 0;
    x->cpu_as_count = 0;
    if (is_type(p->period_type, "cpu", "nanoseconds"))
        for (int k = 0; k < p->nvalues; k++)
            if (is_type(p->sample_types[k], "cpu", "nanoseconds")) {
                x->cols[x->ncols++] = k;
                x->cpu_as_count = 1;
                return;
            }
    for (int k = 0; k < p->nvalues; k++)
        x->cols[x->ncols++] = k;
}

static int build_samples(enc *x, parts *m)
{
    const pn_profile *p = x->p;
    size_t n = p->nsamples, nv = (size_t)p->nvalues, all = n * nv + 1;
    m->sa_first = calloc(n ? n : 1, sizeof *m->sa_first);
    m->sa_n = calloc(n ? n : 1, sizeof *m->sa_n);
    m->samples = calloc(all, sizeof *m->samples);
    m->samplep = calloc(all, sizeof *m->samplep);
    if (!m->sa_first || !m->sa_n || !m->samples || !m->samplep)
        return oom(x, "samples");
    for (size_t s = 0; s < n; s++)
        if (sample_attrs(x, &p->samples[s], &m->sa_first[s], &m->sa_n[s]))
            return -1;
    for (int c = 0; c < x->ncols; c++) {
        size_t k = (size_t)x->cols[c];
        Profile pr = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILE__INIT;
        size_t kept = 0;
        for (size_t s = 0; s < n; s++) {
            const pn_profile_sample *ps = &p->samples[s];
            if (ps->values[k] == 0)
                continue;
            Sample sm = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT;
            sm.stack_index = (int32_t)ps->stack + 1;
            sm.n_attribute_indices = m->sa_n[s];
            sm.attribute_indices = x->attr_pool + m->sa_first[s];  /* the pool is final now */
            sm.link_index = ps->labels < p->nlsets ? x->lsets[ps->labels].link : 0;
            sm.n_values = 1;
            sm.values = (int64_t *)&ps->values[k];
            Sample *slot = &m->samples[(size_t)c * n + kept];
            *slot = sm;
            m->samplep[(size_t)c * n + kept] = slot;
            kept++;
        }
        pr.n_samples = kept;
        pr.samples = kept ? &m->samplep[(size_t)c * n] : NULL;
        m->profiles[c] = pr;
    }
    return 0;
}

static int value_type(enc *x, pn_value_type t, ValueType *out)
{
    ValueType v = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__VALUE_TYPE__INIT;
    if (t.type && intern(x, t.type, &v.type_strindex))
        return -1;
    if (t.unit && intern(x, t.unit, &v.unit_strindex))
        return -1;
    *out = v;
    return 0;
}

static int build_resource(enc *x, const pn_otlp_opts *o, parts *m, Resource *r)
{
    size_t n = o->nresource + 1;
    m->res_kv = calloc(n, sizeof *m->res_kv);
    m->res_av = calloc(n, sizeof *m->res_av);
    m->res_kvp = calloc(n, sizeof *m->res_kvp);
    if (!m->res_kv || !m->res_av || !m->res_kvp)
        return oom(x, "the resource");
    size_t k = 0;
    for (size_t i = 0; i < o->nresource; i++) {
        const pn_label *l = &o->resource[i];
        int dup = !l->key || !l->value || (o->pid && strcmp(l->key, "process.pid") == 0);
        for (size_t j = 0; j < k && !dup; j++)
            dup = strcmp(m->res_kv[j].key, l->key) == 0;
        if (dup)
            continue;
        KeyValue kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
        AnyValue av = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
        kv.key = (char *)l->key;
        av.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        av.string_value = (char *)l->value;
        m->res_kv[k] = kv;
        m->res_av[k] = av;
        k++;
    }
    if (o->pid) {
        KeyValue kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
        AnyValue av = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
        kv.key = "process.pid";
        av.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        av.int_value = o->pid;
        m->res_kv[k] = kv;
        m->res_av[k] = av;
        k++;
    }
    for (size_t i = 0; i < k; i++) {
        m->res_kv[i].value = &m->res_av[i];
        m->res_kvp[i] = &m->res_kv[i];
    }
    r->n_attributes = k;
    r->attributes = m->res_kvp;
    return 0;
}

int pn_otlp_encode(const pn_profile *p, const pn_otlp_opts *o, uint8_t **out, size_t *len,
                   pn_error *e)
{
    if (!p || !o || !out || !len)
        return pn_fail(e, PN_EINVAL, "OTLP encoding: NULL argument");
    *out = NULL;
    *len = 0;
    if (check_profile(p, e))
        return -1;
    if (p->n_extra && !p->extra_labels)
        return pn_fail(e, PN_EINVAL, "OTLP encoding: %zu extra labels but no array", p->n_extra);
    if (o->ntags && !o->tags)
        return pn_fail(e, PN_EINVAL, "OTLP encoding: %zu tags but no array", o->ntags);

    enc x = {.p = p, .e = e, .file_in_name = o->file_in_name};
    pick_columns(&x);
    parts m = {0};
    /* The profile's extra labels, then the static tags whose key they do
     * not have (with output_dir set the profile already carries them). */
    size_t nextra = 0;
    pn_label *extra = calloc(p->n_extra + o->ntags + 1, sizeof *extra);
    int32_t *extra_k = calloc(p->n_extra + o->ntags + 1, sizeof *extra_k);
    int32_t *extra_v = calloc(p->n_extra + o->ntags + 1, sizeof *extra_v);
    int rc = -1;
    if (!extra || !extra_k || !extra_v) {
        oom(&x, "extra labels");
        goto done;
    }
    for (size_t i = 0; i < p->n_extra; i++)
        extra[nextra++] = p->extra_labels[i];
    for (size_t i = 0; i < o->ntags; i++) {
        int dup = !o->tags[i].key;
        for (size_t j = 0; j < p->n_extra && !dup; j++)
            dup = p->extra_labels[j].key && strcmp(p->extra_labels[j].key, o->tags[i].key) == 0;
        if (!dup)
            extra[nextra++] = o->tags[i];
    }
    /* The profile's strings first, so its ids are string indexes. */
    for (uint32_t s = 0; s < p->nstr; s++) {
        size_t l;
        if (push(&x, &x.strings, (void *)pn_profile_str(p, s, &l), "strings"))
            goto done;
    }
    /* Zero values of the tables that hold pointers to enc's arrays. */
    int32_t zero;
    if (function_of(&x, 0, 0, &zero) || attribute_of(&x, 0, 0, &zero) ||
        push(&x, &x.links, NULL, "links"))
        goto done;
    {
        Link lk = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
        x.lks = pn_grow_buf(x.lks, &x.lks_cap, 1, sizeof *x.lks);
        x.lk_bytes = x.lks ? calloc(x.lks_cap, 24) : NULL;
        x.lkb_cap = x.lks_cap;
        if (!x.lks || !x.lk_bytes) {
            oom(&x, "links");
            goto done;
        }
        x.lks[0] = lk;
        /* Key 0 (no strings) is never a real pair: index 0 stays the zero
         * link. */
    }
    if (intern(&x, "thread_id", &x.tid_key) || intern(&x, "thread_name", &x.tname_key))
        goto done;
    for (size_t i = 0; i < nextra; i++)
        if (!extra[i].key || !extra[i].value || intern(&x, extra[i].key, &extra_k[i]) ||
            intern(&x, extra[i].value, &extra_v[i])) {
            if (!extra[i].key || !extra[i].value)
                pn_fail(e, PN_EINVAL, "OTLP encoding: extra label %zu has no key or value", i);
            goto done;
        }
    ValueType types[PN_MAX_VALUES], period_type;
    for (int c = 0; c < x.ncols; c++)
        if (value_type(&x, x.cpu_as_count ? (pn_value_type){"samples", "count"}
                                          : p->sample_types[x.cols[c]], &types[c]))
            goto done;
    /* Pyroscope names an OTLP profile by its period type's word (convert.go,
     * the name label); a memory profile's (space, bytes), Go's pprof name,
     * would land as "space": it is sent as memory/bytes, beside Go's and
     * our pprof memory profiles. */
    pn_value_type pt = is_type(p->period_type, "space", "bytes")
                           ? (pn_value_type){"memory", "bytes"}
                           : p->period_type;
    if (value_type(&x, pt, &period_type))
        goto done;
    if (build_lsets(&x, nextra, extra_k, extra_v) || build_frames(&x, &m) || build_samples(&x, &m))
        goto done;

    /* Every table is final: point the lists at their elements. */
    for (size_t i = 0; i < x.functions.n; i++)
        x.functions.v[i] = &x.fns[i];
    for (size_t i = 0; i < x.attributes.n; i++) {
        x.kvs[i].value = i ? &x.anys[i] : NULL;
        x.attributes.v[i] = &x.kvs[i];
    }
    for (size_t i = 0; i < x.links.n; i++) {
        if (i) {
            x.lks[i].trace_id = (ProtobufCBinaryData){16, x.lk_bytes + 24 * i};
            x.lks[i].span_id = (ProtobufCBinaryData){8, x.lk_bytes + 24 * i + 16};
        }
        x.links.v[i] = &x.lks[i];
    }

    Mapping map0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
    Mapping *mapp = &map0;
    Dict d = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    d.n_mapping_table = 1;
    d.mapping_table = &mapp;
    d.n_location_table = (size_t)p->nframes + 1;
    d.location_table = m.locp;
    d.n_function_table = x.functions.n;
    d.function_table = (Function **)x.functions.v;
    d.n_link_table = x.links.n;
    d.link_table = (Link **)x.links.v;
    d.n_string_table = x.strings.n;
    d.string_table = (char **)x.strings.v;
    d.n_attribute_table = x.attributes.n;
    d.attribute_table = (KeyValueAndUnit **)x.attributes.v;
    d.n_stack_table = (size_t)p->nstacks + 1;
    d.stack_table = m.stackp;

    int64_t dur = p->end_ns > p->start_ns ? p->end_ns - p->start_ns : 0;
    for (int k = 0; k < x.ncols; k++) {
        Profile *pr = &m.profiles[k];
        pr->sample_type = &types[k];
        pr->period_type = &period_type;
        pr->period = x.cpu_as_count ? 1 : p->period;
        pr->time_unix_nano = p->start_ns > 0 ? (uint64_t)p->start_ns : 0;
        pr->duration_nano = (uint64_t)dur;
        random_id(m.ids[k]);
        pr->profile_id = (ProtobufCBinaryData){16, m.ids[k]};
        m.profilep[k] = pr;
    }

    Scope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    scope.name = (char *)(o->scope_name ? o->scope_name : "");
    scope.version = (char *)(o->scope_version ? o->scope_version : "");
    ScopeProfiles sp = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT;
    sp.scope = &scope;
    sp.n_profiles = (size_t)x.ncols;
    sp.profiles = m.profilep;
    ScopeProfiles *spp = &sp;
    Resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    if (build_resource(&x, o, &m, &res))
        goto done;
    ResourceProfiles rp = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT;
    rp.resource = &res;
    rp.n_scope_profiles = 1;
    rp.scope_profiles = &spp;
    ResourceProfiles *rpp = &rp;
    Request req = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
    req.n_resource_profiles = 1;
    req.resource_profiles = &rpp;
    req.dictionary = &d;

    if (o->json) {
        char *text = NULL;
        if (pn_otlp_json(&req.base, &text, len, e))
            goto done;
        *out = (uint8_t *)text;
        rc = 0;
        goto done;
    }
    size_t n = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(&req);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        oom(&x, "the message");
        goto done;
    }
    *len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(&req, buf);
    *out = buf;
    rc = 0;
done:
    free(extra);
    free(extra_k);
    free(extra_v);
    parts_free(&m);
    enc_free(&x);
    return rc;
}
