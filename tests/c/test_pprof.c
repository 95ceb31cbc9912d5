/* The pprof encoder and gzip: periods built through the store API, encoded,
 * and read back with protobuf-c and with `go tool pprof` as an independent
 * reader. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pprof_decode.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "encoding/pprof.h"
#include "profile_helper.h"

/* ------------------------------------------------------------ helpers */

/* Every profile the encoder handed to the sink, copied. */
typedef struct {
    uint8_t **bufs;
    size_t *lens;
    size_t *nsamples;
    size_t n, cap;
    size_t refuse_at; /* return non-zero on this call (1-based); 0: never */
} sink_log;

static int collect(void *ud, const uint8_t *gz, size_t len, size_t nsamples)
{
    sink_log *l = ud;
    if (l->refuse_at && l->n + 1 == l->refuse_at)
        return 7;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        uint8_t **b = realloc(l->bufs, cap * sizeof *b);
        if (b)
            l->bufs = b;
        size_t *ln = realloc(l->lens, cap * sizeof *ln);
        if (ln)
            l->lens = ln;
        size_t *ns = realloc(l->nsamples, cap * sizeof *ns);
        if (ns)
            l->nsamples = ns;
        if (!b || !ln || !ns)
            return 1;
        l->cap = cap;
    }
    uint8_t *copy = malloc(len);
    if (!copy)
        return 1;
    memcpy(copy, gz, len);
    l->bufs[l->n] = copy;
    l->lens[l->n] = len;
    l->nsamples[l->n] = nsamples;
    l->n++;
    return 0;
}

static void sink_log_free(sink_log *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->bufs[i]);
    free(l->bufs);
    free(l->lens);
    free(l->nsamples);
    memset(l, 0, sizeof *l);
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static pn_store *new_store(uint32_t max_stacks, int nvalues)
{
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.max_stacks = max_stacks;
    l.max_samples = 0;
    l.nvalues = nvalues;
    pn_error e;
    pn_store *s = pn_store_new(&l, &e);
    if (!s)
        fprintf(stderr, "  pn_store_new: %s\n", e.msg);
    return s;
}

static pn_frame_id frame(pn_symbols *sy, const char *name, const char *file, uint32_t line)
{
    return pn_symbols_frame3(sy, name, strlen(name), file, strlen(file), line);
}

static const pn_labelset *labels2(const char *k1, const char *v1, const char *k2,
                                  const char *v2)
{
    pn_label kv[2] = {{k1, v1}, {k2, v2}};
    pn_error e;
    const pn_labelset *ls = pn_labelset_merge(pn_labelset_empty(), kv, k2 ? 2 : 1, &e);
    if (!ls)
        fprintf(stderr, "  pn_labelset_merge: %s\n", e.msg);
    return ls;
}

/* Find the decoded sample whose first value is v. */
static const pn_pb_sample *sample_with_value(const pn_pb_profile *p, int64_t v)
{
    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i]->n_value > 0 && p->sample[i]->value[0] == v)
            return p->sample[i];
    return NULL;
}

/* ---------------------------------------------------- round-trip fixture */

/* A small period with known contents:
 *   A  leaf@lib.py:5 <- work@app.py:20 <- main@app.py:10  {span,/a} tid 1234 "worker-1"  30,3
 *   B  work@app.py:25 <- main@app.py:10                   {/b}                         10,1
 *   Z  leaf <- work <- main, no labels                                                   0,0
 *   C  leaf <- work <- main                               {/b} tid 1234 (no name)     20,2
 *   D  main, no labels                                                                  5,1
 * Z is all zero (skipped). extra labels: pid=42 and endpoint=/default (which
 * the sets with their own endpoint override). */
typedef struct {
    pn_store *store;
    pn_period *period;
    const pn_labelset *ls_a, *ls_b;
    pn_label extra[2];
    pn_encode_opts opts;
} fixture;

static int fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->store = new_store(1024, 2);
    f->ls_a = labels2("span_id", "00f067aa0ba902b7", "endpoint", "/a");
    f->ls_b = labels2("endpoint", "/b", NULL, NULL);
    if (!f->store || !f->ls_a || !f->ls_b)
        return -1;

    pn_store_write_begin(f->store);
    pn_period *w = pn_store_active(f->store);
    pn_symbols *sy = pn_period_symbols(w);
    pn_frame_id leaf = frame(sy, "leaf", "lib.py", 5);
    pn_frame_id work = frame(sy, "work", "app.py", 20);
    pn_frame_id work25 = frame(sy, "work", "app.py", 25);
    pn_frame_id main_ = frame(sy, "main", "app.py", 10);
    uint32_t tname = pn_symbols_string(sy, "worker-1", 8);
    pn_frame_id sa[] = {leaf, work, main_}, sb[] = {work25, main_}, sd[] = {main_};
    int64_t va[] = {30, 3}, vb[] = {10, 1}, vz[] = {0, 0}, vc[] = {20, 2}, vd[] = {5, 1};
    pn_period_add(w, sa, 3, f->ls_a, 1234, tname, va);
    pn_period_add(w, sb, 2, f->ls_b, 0, PN_STR_EMPTY, vb);
    pn_period_add(w, sa, 3, NULL, 0, PN_STR_EMPTY, vz);
    pn_period_add(w, sa, 3, f->ls_b, 1234, PN_STR_EMPTY, vc);
    pn_period_add(w, sd, 1, NULL, 0, PN_STR_EMPTY, vd);
    pn_store_write_end(f->store);
    f->period = pn_store_swap(f->store, realtime_ns());

    pn_encode_opts_default(&f->opts);
    f->extra[0] = (pn_label){"pid", "42"};
    f->extra[1] = (pn_label){"endpoint", "/default"};
    f->opts.extra_labels = f->extra;
    f->opts.n_extra = 2;
    f->opts.period = 10000000;
    return 0;
}

static void fixture_free(fixture *f)
{
    pn_store_free(f->store);
    if (f->ls_a)
        pn_labelset_unref(f->ls_a);
    if (f->ls_b)
        pn_labelset_unref(f->ls_b);
    pn_labels_reclaim();
}

/* Encode the fixture into exactly one profile and decode it. */
static pn_pb_profile *fixture_profile(fixture *f, sink_log *log)
{
    pn_error e;
    pn_error_clear(&e);
    int n = pn_test_encode(f->period, &f->opts, collect, log, &e);
    if (n < 0)
        fprintf(stderr, "  pn_pprof_encode: %s\n", e.msg);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(log->n, 1);
    if (log->n != 1)
        return NULL;
    CHECK_EQ_INT(log->nsamples[0], 4);
    CHECK(log->lens[0] > 2 && log->bufs[0][0] == 0x1f && log->bufs[0][1] == 0x8b);
    return pn_pprof_decode(log->bufs[0], log->lens[0], NULL);
}

/* --------------------------------------------------------------- tests */

static void test_round_trip(void)
{
    fixture f;
    sink_log log = {0};
    CHECK(fixture_init(&f) == 0);
    pn_pb_profile *p = f.period ? fixture_profile(&f, &log) : NULL;
    CHECK(p != NULL);
    if (!p)
        goto out;
    CHECK_EQ_INT(pn_pprof_check(p, 1), 0);

    CHECK_EQ_INT(p->n_sample_type, 2);
    if (p->n_sample_type == 2) {
        CHECK_STR(pn_pprof_str(p, p->sample_type[0]->type), "cpu");
        CHECK_STR(pn_pprof_str(p, p->sample_type[0]->unit), "nanoseconds");
        CHECK_STR(pn_pprof_str(p, p->sample_type[1]->type), "samples");
        CHECK_STR(pn_pprof_str(p, p->sample_type[1]->unit), "count");
    }
    CHECK(p->period_type != NULL);
    if (p->period_type) {
        CHECK_STR(pn_pprof_str(p, p->period_type->type), "cpu");
        CHECK_STR(pn_pprof_str(p, p->period_type->unit), "nanoseconds");
    }
    CHECK_EQ_INT(p->period, 10000000);
    CHECK_EQ_INT(p->time_nanos, pn_period_start_ns(f.period));
    CHECK_EQ_INT(p->duration_nanos, pn_period_end_ns(f.period) - pn_period_start_ns(f.period));
    CHECK(p->time_nanos > 0 && p->duration_nanos >= 0);

    /* Functions dedup by (name, file): main, work, leaf. Locations by
     * (function, line): work has two. */
    CHECK_EQ_INT(p->n_function, 3);
    CHECK_EQ_INT(p->n_location, 4);
    for (size_t i = 0; i < p->n_function; i++) {
        const pn_pb_function *fn = p->function[i];
        CHECK_EQ_INT(fn->id, i + 1);
        const char *name = pn_pprof_str(p, fn->name), *file = pn_pprof_str(p, fn->filename);
        CHECK(name && file);
        if (name && file)
            CHECK_STR(file, strcmp(name, "leaf") == 0 ? "lib.py" : "app.py");
    }
    for (size_t i = 0; i < p->n_location; i++)
        CHECK_EQ_INT(p->location[i]->id, i + 1);

    /* Z was all zero: 4 samples remain. */
    CHECK_EQ_INT(p->n_sample, 4);
    CHECK(sample_with_value(p, 0) == NULL);

    char buf[256];
    const pn_pb_sample *a = sample_with_value(p, 30), *b = sample_with_value(p, 10);
    const pn_pb_sample *c = sample_with_value(p, 20), *d = sample_with_value(p, 5);
    CHECK(a && b && c && d);
    if (!a || !b || !c || !d)
        goto out;
    CHECK_EQ_INT(a->n_value, 2);
    CHECK_EQ_INT(a->value[1], 3);
    CHECK_EQ_INT(b->value[1], 1);
    CHECK_EQ_INT(c->value[1], 2);
    CHECK_EQ_INT(d->value[1], 1);

    CHECK_STR(pn_pprof_stack(p, a, buf, sizeof buf), "leaf;work;main");
    CHECK_STR(pn_pprof_stack(p, b, buf, sizeof buf), "work;main");
    CHECK_STR(pn_pprof_stack(p, c, buf, sizeof buf), "leaf;work;main");
    CHECK_STR(pn_pprof_stack(p, d, buf, sizeof buf), "main");
    /* Same frames, same location ids; line numbers on the locations. */
    CHECK_EQ_INT(a->n_location_id, 3);
    CHECK_EQ_INT(c->n_location_id, 3);
    if (a->n_location_id == 3 && c->n_location_id == 3)
        for (int i = 0; i < 3; i++)
            CHECK_EQ_INT(a->location_id[i], c->location_id[i]);
    CHECK(b->location_id[1] == a->location_id[2]); /* main@10 shared */
    CHECK(b->location_id[0] != a->location_id[1]); /* work@25 vs work@20 */
    const pn_pb_location *l_work25 = pn_pprof_location(p, b->location_id[0]);
    const pn_pb_location *l_work20 = pn_pprof_location(p, a->location_id[1]);
    const pn_pb_location *l_leaf = pn_pprof_location(p, a->location_id[0]);
    CHECK(l_work25 && l_work20 && l_leaf);
    if (l_work25 && l_work20 && l_leaf) {
        CHECK_EQ_INT(l_work25->n_line, 1);
        CHECK_EQ_INT(l_work25->line[0]->line, 25);
        CHECK_EQ_INT(l_work20->line[0]->line, 20);
        CHECK_EQ_INT(l_leaf->line[0]->line, 5);
        CHECK_EQ_INT(l_work25->line[0]->function_id, l_work20->line[0]->function_id);
    }

    /* Labels: the set's own, the extras it does not override, the thread. */
    CHECK_EQ_INT(a->n_label, 5);
    CHECK_STR(pn_pprof_label(p, a, "span_id"), "00f067aa0ba902b7");
    CHECK_STR(pn_pprof_label(p, a, "endpoint"), "/a");
    CHECK_STR(pn_pprof_label(p, a, "pid"), "42");
    CHECK_STR(pn_pprof_label(p, a, "thread_id"), "1234");
    CHECK_STR(pn_pprof_label(p, a, "thread_name"), "worker-1");
    CHECK_EQ_INT(b->n_label, 2);
    CHECK_STR(pn_pprof_label(p, b, "endpoint"), "/b");
    CHECK_STR(pn_pprof_label(p, b, "pid"), "42");
    CHECK(pn_pprof_label(p, b, "thread_id") == NULL);
    CHECK(pn_pprof_label(p, b, "thread_name") == NULL);
    CHECK_EQ_INT(c->n_label, 3);
    CHECK_STR(pn_pprof_label(p, c, "thread_id"), "1234");
    CHECK(pn_pprof_label(p, c, "thread_name") == NULL);
    CHECK_EQ_INT(d->n_label, 2);
    CHECK_STR(pn_pprof_label(p, d, "endpoint"), "/default");
    CHECK_STR(pn_pprof_label(p, d, "pid"), "42");
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t j = 0; j < p->sample[i]->n_label; j++)
            CHECK_EQ_INT(p->sample[i]->label[j]->num, 0);
out:
    pn_pprof_free(p);
    sink_log_free(&log);
    fixture_free(&f);
}

static void test_zero_samples_skipped(void)
{
    pn_store *s = new_store(64, 1);
    CHECK(s != NULL);
    if (!s)
        return;
    sink_log log = {0};
    pn_encode_opts o;
    pn_encode_opts_default(&o);
    pn_error e;

    /* A period nothing was added to. */
    pn_period *p = pn_store_swap(s, realtime_ns());
    CHECK_EQ_INT(pn_test_encode(p, &o, collect, &log, &e), 0);
    CHECK_EQ_INT(log.n, 0);
    pn_store_recycle(s, p);

    /* A period whose samples are all zero. */
    pn_store_write_begin(s);
    pn_period *w = pn_store_active(s);
    pn_frame_id f = frame(pn_period_symbols(w), "idle", "x.py", 1);
    int64_t zero = 0;
    pn_period_add(w, &f, 1, NULL, 7, PN_STR_EMPTY, &zero);
    pn_period_add(w, &f, 1, NULL, 8, PN_STR_EMPTY, &zero);
    pn_store_write_end(s);
    p = pn_store_swap(s, realtime_ns());
    CHECK(pn_period_sample_count(p) >= 2);
    CHECK_EQ_INT(pn_test_encode(p, &o, collect, &log, &e), 0);
    CHECK_EQ_INT(log.n, 0);
    pn_store_recycle(s, p);

    /* Zero and non-zero mixed: only the non-zero one is encoded. */
    pn_store_write_begin(s);
    w = pn_store_active(s);
    pn_frame_id g = frame(pn_period_symbols(w), "busy", "x.py", 2);
    f = frame(pn_period_symbols(w), "idle", "x.py", 1);
    int64_t one = 1000;
    pn_period_add(w, &f, 1, NULL, 7, PN_STR_EMPTY, &zero);
    pn_period_add(w, &g, 1, NULL, 8, PN_STR_EMPTY, &one);
    pn_store_write_end(s);
    p = pn_store_swap(s, realtime_ns());
    CHECK_EQ_INT(pn_test_encode(p, &o, collect, &log, &e), 1);
    CHECK_EQ_INT(log.n, 1);
    if (log.n == 1) {
        CHECK_EQ_INT(log.nsamples[0], 1);
        pn_pb_profile *pf = pn_pprof_decode(log.bufs[0], log.lens[0], NULL);
        CHECK(pf != NULL);
        if (pf) {
            CHECK_EQ_INT(pn_pprof_check(pf, 1), 0);
            CHECK_EQ_INT(pf->n_sample, 1);
            CHECK_EQ_INT(pf->n_sample_type, 1);
            if (pf->n_sample == 1) {
                CHECK_STR(pn_pprof_frame_name(pf, pf->sample[0], 0), "busy");
                CHECK_EQ_INT(pf->sample[0]->value[0], 1000);
                CHECK_STR(pn_pprof_label(pf, pf->sample[0], "thread_id"), "8");
            }
            /* "idle" is not needed by any kept sample, so it is absent. */
            for (size_t i = 0; i < pf->n_string_table; i++)
                CHECK(strcmp(pf->string_table[i], "idle") != 0);
        }
        pn_pprof_free(pf);
    }
    sink_log_free(&log);
    pn_store_free(s);
}

/* A frame id the period's symbols do not know is kept as [unknown]. */
static void test_unknown_frame_kept(void)
{
    pn_store *s = new_store(16, 1);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_store_write_begin(s);
    pn_period *w = pn_store_active(s);
    pn_frame_id st[2] = {frame(pn_period_symbols(w), "f", "f.py", 1), 99999};
    int64_t v = 7;
    pn_period_add(w, st, 2, NULL, 0, PN_STR_EMPTY, &v);
    pn_store_write_end(s);
    pn_period *p = pn_store_swap(s, realtime_ns());
    sink_log log = {0};
    pn_error e;
    int old = pn_log_level();
    pn_log_set_level(PN_LOG_OFF);
    CHECK_EQ_INT(pn_test_encode(p, NULL, collect, &log, &e), 1);
    pn_log_set_level(old);
    pn_pb_profile *pf = log.n == 1 ? pn_pprof_decode(log.bufs[0], log.lens[0], NULL) : NULL;
    CHECK(pf != NULL);
    if (pf) {
        char buf[64];
        CHECK_EQ_INT(pn_pprof_check(pf, 1), 0);
        CHECK_EQ_INT(pf->n_sample, 1);
        if (pf->n_sample == 1) {
            CHECK_STR(pn_pprof_stack(pf, pf->sample[0], buf, sizeof buf), "f;[unknown]");
            CHECK_EQ_INT(pf->sample[0]->value[0], 7);
        }
    }
    pn_pprof_free(pf);
    sink_log_free(&log);
    pn_store_free(s);
}

/* 40 000 distinct stacks fa_<i%200> <- fb_<(i/200)%200> <- main with
 * values (i+1, 1), so each decoded sample names its origin. */
#define SPLIT_N 40000

static pn_store *split_store(pn_period **out)
{
    pn_store *s = new_store(SPLIT_N, 2);
    if (!s)
        return NULL;
    pn_store_write_begin(s);
    pn_period *w = pn_store_active(s);
    pn_symbols *sy = pn_period_symbols(w);
    pn_frame_id fa[200], fb[200], root = frame(sy, "main", "main.py", 1);
    char name[32];
    for (int j = 0; j < 200; j++) {
        snprintf(name, sizeof name, "fa_%d", j);
        fa[j] = frame(sy, name, "a.py", (uint32_t)j + 1);
        snprintf(name, sizeof name, "fb_%d", j);
        fb[j] = frame(sy, name, "b.py", (uint32_t)j + 1);
    }
    for (int i = 0; i < SPLIT_N; i++) {
        pn_frame_id st[3] = {fa[i % 200], fb[(i / 200) % 200], root};
        int64_t v[2] = {i + 1, 1};
        pn_period_add(w, st, 3, NULL, 0, PN_STR_EMPTY, v);
    }
    pn_store_write_end(s);
    *out = pn_store_swap(s, realtime_ns());
    return s;
}

/* Decode every part; check each is self-contained and minimal, and that
 * together they hold each original sample exactly once. Returns the
 * largest uncompressed part. */
static size_t check_parts(const sink_log *log, size_t max_samples)
{
    char *seen = calloc(SPLIT_N, 1);
    size_t total = 0, largest = 0;
    int64_t sum0 = 0, sum1 = 0;
    char want[64], got[128];
    int bad_stacks = 0;
    for (size_t k = 0; k < log->n && seen; k++) {
        size_t raw = 0;
        pn_pb_profile *p = pn_pprof_decode(log->bufs[k], log->lens[k], &raw);
        CHECK(p != NULL);
        if (!p)
            continue;
        if (raw > largest)
            largest = raw;
        CHECK_EQ_INT(pn_pprof_check(p, 1), 0);
        CHECK(p->n_sample <= max_samples);
        CHECK_EQ_INT(p->n_sample, log->nsamples[k]);
        total += p->n_sample;
        for (size_t i = 0; i < p->n_sample; i++) {
            const pn_pb_sample *s = p->sample[i];
            int64_t v = s->value[0] - 1;
            sum0 += s->value[0];
            sum1 += s->value[1];
            if (v < 0 || v >= SPLIT_N || seen[v]) {
                bad_stacks++;
                continue;
            }
            seen[v] = 1;
            snprintf(want, sizeof want, "fa_%d;fb_%d;main", (int)(v % 200),
                     (int)(v / 200 % 200));
            if (strcmp(pn_pprof_stack(p, s, got, sizeof got), want) != 0)
                bad_stacks++;
        }
        pn_pprof_free(p);
    }
    CHECK(seen != NULL);
    CHECK_EQ_INT(bad_stacks, 0);
    CHECK_EQ_INT(total, SPLIT_N);
    CHECK_EQ_INT(sum0, (int64_t)SPLIT_N * (SPLIT_N + 1) / 2);
    CHECK_EQ_INT(sum1, SPLIT_N);
    free(seen);
    return largest;
}

static void test_split_by_samples(void)
{
    pn_period *p = NULL;
    pn_store *s = split_store(&p);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_period_stats st;
    pn_period_get_stats(p, &st);
    CHECK_EQ_INT(st.overflow_samples, 0);

    sink_log log = {0};
    pn_encode_opts o;
    pn_encode_opts_default(&o);
    CHECK_EQ_INT(o.max_samples, 16000);
    pn_error e;
    pn_error_clear(&e);
    int n = pn_test_encode(p, &o, collect, &log, &e);
    if (n < 0)
        fprintf(stderr, "  %s\n", e.msg);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(log.n, 3);
    if (log.n == 3) {
        CHECK_EQ_INT(log.nsamples[0], 16000);
        CHECK_EQ_INT(log.nsamples[1], 16000);
        CHECK_EQ_INT(log.nsamples[2], 8000);
    }
    check_parts(&log, 16000);
    sink_log_free(&log);

    /* A sink that refuses stops the encoder with an error. */
    log.refuse_at = 2;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_test_encode(p, &o, collect, &log, &e), -1);
    CHECK_EQ_INT(e.code, PN_EIO);
    CHECK(strstr(e.msg, "sink") != NULL);
    CHECK_EQ_INT(log.n, 1);
    sink_log_free(&log);
    pn_store_free(s);
}

static void test_split_by_bytes(void)
{
    pn_period *p = NULL;
    pn_store *s = split_store(&p);
    CHECK(s != NULL);
    if (!s)
        return;
    sink_log log = {0};
    pn_encode_opts o;
    pn_encode_opts_default(&o);
    o.max_bytes = 50000;
    pn_error e;
    pn_error_clear(&e);
    int n = pn_test_encode(p, &o, collect, &log, &e);
    if (n < 0)
        fprintf(stderr, "  %s\n", e.msg);
    CHECK(n >= 8);
    CHECK_EQ_INT((size_t)n, log.n);
    size_t largest = check_parts(&log, o.max_samples);
    CHECK(largest <= o.max_bytes);
    /* Chunks are filled, not cut early: every part but the last is close
     * to the limit (one more sample would not have fit). */
    for (size_t k = 0; k + 1 < log.n; k++) {
        size_t raw = 0;
        pn_pb_profile *pf = pn_pprof_decode(log.bufs[k], log.lens[k], &raw);
        CHECK(raw <= o.max_bytes && raw > o.max_bytes - 200);
        pn_pprof_free(pf);
    }
    sink_log_free(&log);

    /* Both limits at once: the tighter one decides. */
    o.max_bytes = 200000;
    o.max_samples = 5000;
    n = pn_test_encode(p, &o, collect, &log, &e);
    CHECK_EQ_INT(n, 8);
    largest = check_parts(&log, 5000);
    CHECK(largest <= o.max_bytes);
    sink_log_free(&log);

    /* A limit below one sample's size: each sample goes alone, over the
     * limit (and logged), never dropped. */
    o.max_bytes = 10;
    o.max_samples = 16000;
    pn_store *s2 = new_store(16, 1);
    CHECK(s2 != NULL);
    if (s2) {
        pn_store_write_begin(s2);
        pn_period *w = pn_store_active(s2);
        pn_frame_id f = frame(pn_period_symbols(w), "f", "f.py", 1);
        pn_frame_id g = frame(pn_period_symbols(w), "g", "g.py", 1);
        int64_t v = 1;
        pn_period_add(w, &f, 1, NULL, 0, PN_STR_EMPTY, &v);
        pn_period_add(w, &g, 1, NULL, 0, PN_STR_EMPTY, &v);
        pn_store_write_end(s2);
        pn_period *p2 = pn_store_swap(s2, realtime_ns());
        int old = pn_log_level();
        pn_log_set_level(PN_LOG_OFF);
        CHECK_EQ_INT(pn_test_encode(p2, &o, collect, &log, &e), 2);
        pn_log_set_level(old);
        CHECK_EQ_INT(log.n, 2);
        for (size_t k = 0; k < log.n; k++)
            CHECK_EQ_INT(log.nsamples[k], 1);
        sink_log_free(&log);
        pn_store_free(s2);
    }
    pn_store_free(s);
}

static void test_bad_options(void)
{
    fixture f;
    CHECK(fixture_init(&f) == 0);
    sink_log log = {0};
    pn_error e;
    if (f.period) {
        pn_encode_opts o = f.opts;
        o.sample_types[1].type = NULL;
        CHECK_EQ_INT(pn_test_encode(f.period, &o, collect, &log, &e), -1);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        CHECK(strstr(e.msg, "sample_types[1]") != NULL);

        o = f.opts;
        o.max_samples = 0;
        CHECK_EQ_INT(pn_test_encode(f.period, &o, collect, &log, &e), -1);
        CHECK(strstr(e.msg, "max_samples") != NULL);

        o = f.opts;
        o.max_bytes = 0;
        CHECK_EQ_INT(pn_test_encode(f.period, &o, collect, &log, &e), -1);
        CHECK(strstr(e.msg, "max_bytes") != NULL);

        o = f.opts;
        o.extra_labels = NULL;
        CHECK_EQ_INT(pn_test_encode(f.period, &o, collect, &log, &e), -1);
        CHECK(strstr(e.msg, "extra_labels") != NULL);

        CHECK_EQ_INT(pn_test_encode(f.period, &f.opts, NULL, &log, &e), -1);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        CHECK_EQ_INT(log.n, 0);

        /* NULL options: the defaults. */
        CHECK_EQ_INT(pn_test_encode(f.period, NULL, collect, &log, &e), 1);
    }
    /* The defaults name two values; a third must be named by the caller. */
    pn_store *s3 = new_store(16, 3);
    CHECK(s3 != NULL);
    if (s3) {
        pn_store_write_begin(s3);
        pn_period *w = pn_store_active(s3);
        pn_frame_id fr = frame(pn_period_symbols(w), "f", "f.py", 1);
        int64_t v[3] = {1, 2, 3};
        pn_period_add(w, &fr, 1, NULL, 0, PN_STR_EMPTY, v);
        pn_store_write_end(s3);
        pn_period *p3 = pn_store_swap(s3, realtime_ns());
        pn_encode_opts o;
        pn_encode_opts_default(&o);
        CHECK_EQ_INT(pn_test_encode(p3, &o, collect, &log, &e), -1);
        CHECK(strstr(e.msg, "sample_types[2]") != NULL);
        o.sample_types[2] = (pn_value_type){"alloc", "bytes"};
        CHECK_EQ_INT(pn_test_encode(p3, &o, collect, &log, &e), 1);
        pn_store_free(s3);
    }
    sink_log_free(&log);
    fixture_free(&f);
}

/* The exporter's path: a profile built with its own metadata (names, period,
 * extra labels), options taken from it, and the label sets released and
 * freed before encoding (the period copied their pairs). */
static void test_profile_meta_and_freed_labels(void)
{
    fixture f;
    sink_log log = {0};
    pn_profile *prof = NULL;
    pn_pb_profile *p = NULL;
    CHECK(fixture_init(&f) == 0);
    if (!f.period)
        goto out;
    pn_labelset_unref(f.ls_a);
    pn_labelset_unref(f.ls_b);
    f.ls_a = f.ls_b = NULL;
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 0);

    pn_value_type types[2] = {{"wall", "nanoseconds"}, {"samples", "count"}};
    pn_label extra[1] = {{"pid", "7"}};
    pn_profile_meta m = {.app_name = "svc", .profile_type = "wall", .sample_rate = 200,
                         .nvalues = 2, .sample_types = types,
                         .period_type = {"wall", "nanoseconds"}, .period = 5000000,
                         .extra_labels = extra, .n_extra = 1};
    pn_error e;
    prof = pn_profile_from_period(f.period, &m, &e);
    CHECK(prof != NULL);
    if (!prof)
        goto out;
    CHECK_STR(prof->app_name, "svc");
    CHECK_EQ_INT(prof->start_ns, pn_period_start_ns(f.period));
    CHECK_EQ_INT(prof->nsamples, pn_period_sample_count(f.period));
    pn_encode_opts o;
    pn_encode_opts_from_profile(&o, prof);
    CHECK_EQ_INT(o.n_extra, 1);
    CHECK_EQ_INT(o.period, 5000000);
    CHECK_EQ_INT(pn_pprof_encode(prof, &o, collect, &log, &e), 1);
    p = log.n == 1 ? pn_pprof_decode(log.bufs[0], log.lens[0], NULL) : NULL;
    CHECK(p != NULL);
    if (!p)
        goto out;
    CHECK_EQ_INT(pn_pprof_check(p, 1), 0);
    CHECK_EQ_INT(p->n_sample, 4);
    CHECK_EQ_INT(p->period, 5000000);
    if (p->n_sample_type == 2)
        CHECK_STR(pn_pprof_str(p, p->sample_type[0]->type), "wall");
    const pn_pb_sample *a = sample_with_value(p, 30), *b = sample_with_value(p, 10),
                       *d = sample_with_value(p, 5);
    CHECK(a && b && d);
    if (!a || !b || !d)
        goto out;
    CHECK_STR(pn_pprof_label(p, a, "span_id"), "00f067aa0ba902b7");
    CHECK_STR(pn_pprof_label(p, a, "endpoint"), "/a");
    CHECK_STR(pn_pprof_label(p, a, "pid"), "7");
    CHECK_STR(pn_pprof_label(p, a, "thread_name"), "worker-1");
    CHECK_STR(pn_pprof_label(p, b, "endpoint"), "/b");
    CHECK(pn_pprof_label(p, d, "endpoint") == NULL);
    CHECK_STR(pn_pprof_label(p, d, "pid"), "7");
out:
    pn_pprof_free(p);
    pn_profile_free(prof);
    sink_log_free(&log);
    fixture_free(&f);
}

/* 1 when protobuf-c, unpacking the profile and packing it again, gives
 * back the very bytes the encoder wrote: the hand-written wire format is
 * protobuf's canonical one (field order, proto3 zero fields left out). */
static int canonical(const uint8_t *gz, size_t gz_len)
{
    uint8_t *raw = NULL, *again = NULL;
    size_t raw_len = 0;
    pn_error e;
    int ok = 0;
    pn_pb_profile *pf = NULL;
    if (pn_gunzip(gz, gz_len, (size_t)64 << 20, &raw, &raw_len, &e) == 0)
        pf = perftools__profiles__profile__unpack(NULL, raw_len, raw);
    if (pf) {
        size_t n = perftools__profiles__profile__get_packed_size(pf);
        again = malloc(n ? n : 1);
        if (again && n == raw_len) {
            perftools__profiles__profile__pack(pf, again);
            ok = memcmp(again, raw, n) == 0;
        }
        perftools__profiles__profile__free_unpacked(pf, NULL);
    }
    free(again);
    free(raw);
    return ok;
}

static void test_wire_matches_protobuf_c(void)
{
    fixture f;
    sink_log log = {0};
    CHECK(fixture_init(&f) == 0);
    pn_error e;
    CHECK_EQ_INT(pn_test_encode(f.period, &f.opts, collect, &log, &e), 1);
    CHECK(log.n == 1 && canonical(log.bufs[0], log.lens[0]));
    sink_log_free(&log);
    fixture_free(&f);

    /* Zero and negative fields: line 0, an unnamed function without a
     * file, a negative value, period 0. */
    pn_store *s = new_store(16, 2);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_store_write_begin(s);
    pn_period *w = pn_store_active(s);
    pn_frame_id fr[2] = {frame(pn_period_symbols(w), "", "", 0),
                         frame(pn_period_symbols(w), "g", "g.py", 7)};
    int64_t v1[2] = {-5, 3}, v2[2] = {0, 1};
    pn_period_add(w, fr, 2, NULL, 0, PN_STR_EMPTY, v1);
    pn_period_add(w, fr + 1, 1, NULL, 77, PN_STR_EMPTY, v2);
    pn_store_write_end(s);
    pn_period *p = pn_store_swap(s, realtime_ns());
    pn_encode_opts o;
    pn_encode_opts_default(&o);
    o.period = 0;
    CHECK_EQ_INT(pn_test_encode(p, &o, collect, &log, &e), 1);
    CHECK(log.n == 1 && canonical(log.bufs[0], log.lens[0]));
    sink_log_free(&log);
    pn_store_free(s);

    /* Full-size parts, cut by samples and by bytes. */
    s = split_store(&p);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_encode_opts_default(&o);
    CHECK_EQ_INT(pn_test_encode(p, &o, collect, &log, &e), 3);
    o.max_bytes = 50000;
    CHECK(pn_test_encode(p, &o, collect, &log, &e) > 3);
    for (size_t k = 0; k < log.n; k++)
        CHECK(canonical(log.bufs[k], log.lens[k]));
    sink_log_free(&log);
    pn_store_free(s);
}

/* 1 when `go` is on PATH (and has a build cache to use). */
static int have_go(void)
{
    if (system("go version >/dev/null 2>&1") != 0) {
        printf("  note: `go` is not on PATH; skipping the go tool pprof check\n");
        return 0;
    }
    /* go needs a build cache for its tools; CI may run without HOME. */
    if (!getenv("GOCACHE") && !getenv("HOME") && !getenv("XDG_CACHE_HOME"))
        setenv("GOCACHE", "/tmp/pn-go-cache", 0);
    return 1;
}

/* What `go tool pprof -raw` prints for the profile (Go's own gzip and
 * protobuf decoders), malloc'ed; NULL (after a failed check) when it
 * cannot run or exits non-zero. */
static char *go_pprof_raw(const uint8_t *gz, size_t gz_len)
{
    char path[] = "/tmp/pn_test_pprof_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return NULL;
    CHECK(write(fd, gz, gz_len) == (ssize_t)gz_len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "go tool pprof -raw '%s' 2>&1", path);
    FILE *pipe = popen(cmd, "r");
    CHECK(pipe != NULL);
    char *out = NULL;
    size_t len = 0, cap = 0;
    while (pipe) {
        if (len + 1 >= cap) {
            char *grown = realloc(out, cap ? cap * 2 : 1 << 16);
            CHECK(grown != NULL);
            if (!grown)
                break;
            out = grown;
            cap = cap ? cap * 2 : 1 << 16;
        }
        size_t got = fread(out + len, 1, cap - 1 - len, pipe);
        if (got == 0)
            break;
        len += got;
    }
    int status = pipe ? pclose(pipe) : -1;
    unlink(path);
    CHECK_EQ_INT(status, 0);
    if (out)
        out[len] = '\0';
    if (status != 0 && out)
        fprintf(stderr, "---- go tool pprof -raw output ----\n%s\n----\n", out);
    if (status != 0 || !out) {
        free(out);
        return NULL;
    }
    return out;
}

/* `go tool pprof -raw` parses the profile with Go's own decoder. */
static void test_go_pprof_reads_it(void)
{
    if (!have_go())
        return;
    fixture f;
    sink_log log = {0};
    CHECK(fixture_init(&f) == 0);
    pn_error e;
    CHECK_EQ_INT(pn_test_encode(f.period, &f.opts, collect, &log, &e), 1);
    char *out = log.n == 1 ? go_pprof_raw(log.bufs[0], log.lens[0]) : NULL;
    if (!out)
        goto out;

    /* The header names the sample types; each sample line has its values
     * and the location ids; the location section names the functions. */
    static const char *const want[] = {
        "cpu/nanoseconds",
        "samples/count",
        "Period: 10000000",
        "         30          3:",
        "         10          1:",
        "         20          2:",
        "          5          1:",
        "span_id:[00f067aa0ba902b7]",
        "endpoint:[/a]",
        "endpoint:[/b]",
        "endpoint:[/default]",
        "pid:[42]",
        "thread_id:[1234]",
        "thread_name:[worker-1]",
        " leaf lib.py:5",
        " work app.py:20",
        " work app.py:25",
        " main app.py:10",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(out, want[i])) {
            fprintf(stderr, "  go tool pprof -raw output lacks \"%s\"\n", want[i]);
            pn_check_failures++;
        }
    }
    if (pn_check_failures)
        fprintf(stderr, "---- go tool pprof -raw output ----\n%s\n----\n", out);
    free(out);
out:
    sink_log_free(&log);
    fixture_free(&f);
}

/* A full-size part (16 000 samples, so dynamic Huffman blocks and long
 * matches) read by Go: every sample is there. */
static void test_go_pprof_reads_large(void)
{
    if (!have_go())
        return;
    pn_period *p = NULL;
    pn_store *s = split_store(&p);
    CHECK(s != NULL);
    if (!s)
        return;
    sink_log log = {0};
    pn_error e;
    CHECK_EQ_INT(pn_test_encode(p, NULL, collect, &log, &e), 3);
    char *out = log.n == 3 ? go_pprof_raw(log.bufs[0], log.lens[0]) : NULL;
    if (out) {
        /* Sample lines: "<cpu> <samples>: <location ids>", values (i+1, 1). */
        size_t samples = 0;
        for (const char *l = out; l && *l;) {
            long long v0, v1;
            char colon;
            if (sscanf(l, " %lld %lld%c", &v0, &v1, &colon) == 3 && colon == ':' && v1 == 1 &&
                v0 >= 1 && v0 <= SPLIT_N)
                samples++;
            const char *nl = strchr(l, '\n');
            l = nl ? nl + 1 : NULL;
        }
        CHECK_EQ_INT(samples, 16000);
        CHECK(strstr(out, " fa_199 a.py:200") != NULL);
        CHECK(strstr(out, " main main.py:1") != NULL);
        free(out);
    }
    sink_log_free(&log);
    pn_store_free(s);
}

/* Informal speed check: 10k unique stacks of depth 30. */
static void test_encode_speed(void)
{
    pn_store *s = new_store(10000, 2);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_store_write_begin(s);
    pn_period *w = pn_store_active(s);
    pn_symbols *sy = pn_period_symbols(w);
    pn_frame_id pool[300];
    char name[48], file[48];
    for (int j = 0; j < 300; j++) {
        snprintf(name, sizeof name, "module_%d.Class.method_%d", j / 10, j);
        snprintf(file, sizeof file, "/app/src/module_%d.py", j / 10);
        pool[j] = frame(sy, name, file, (uint32_t)(j * 7 + 1));
    }
    for (int i = 0; i < 10000; i++) {
        pn_frame_id st[30];
        st[0] = pool[i % 100];
        st[1] = pool[100 + (i / 100) % 100];
        for (int d = 2; d < 30; d++)
            st[d] = pool[200 + (d * 3 + i % 7) % 100];
        int64_t v[2] = {10000000, 1};
        pn_period_add(w, st, 30, NULL, (uint64_t)(1000 + i % 8), PN_STR_EMPTY, v);
    }
    pn_store_write_end(s);
    pn_period *p = pn_store_swap(s, realtime_ns());
    pn_period_stats st;
    pn_period_get_stats(p, &st);
    CHECK_EQ_INT(st.overflow_samples, 0);

    pn_encode_opts o;
    pn_encode_opts_default(&o);
    sink_log log = {0};
    pn_error e;
    double best = 1e9;
    for (int round = 0; round < 3; round++) {
        double t0 = monotonic_ms();
        int n = pn_test_encode(p, &o, collect, &log, &e);
        double ms = monotonic_ms() - t0;
        CHECK_EQ_INT(n, 1);
        if (ms < best)
            best = ms;
        if (round == 2 && log.n > 0) {
            size_t raw = 0;
            pn_pb_profile *pf = pn_pprof_decode(log.bufs[0], log.lens[0], &raw);
            CHECK(pf && pf->n_sample == 10000);
            if (pf)
                printf("  encode 10k unique stacks x depth 30: %.2f ms (best of 3), "
                       "%zu bytes packed, %zu gzip'ed\n", best, raw, log.lens[0]);
            pn_pprof_free(pf);
        }
        sink_log_free(&log);
    }
    pn_store_free(s);
}

/* ---------------------------------------------------------------- gzip */

static void test_gzip(void)
{
    size_t n = 300000;
    uint8_t *in = malloc(n);
    CHECK(in != NULL);
    if (!in)
        return;
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        in[i] = (i % 3 == 0) ? (uint8_t)(x >> 24) : (uint8_t)("profile"[i % 7]);
    }
    pn_error e;
    uint8_t *gz = NULL, *back = NULL;
    size_t gz_len = 0, back_len = 0;
    CHECK_EQ_INT(pn_gzip(in, n, &gz, &gz_len, &e), 0);
    CHECK(gz && gz_len > 18 && gz_len < n && gz[0] == 0x1f && gz[1] == 0x8b);

    /* Round trip, also exactly at the bound. */
    CHECK_EQ_INT(pn_gunzip(gz, gz_len, n, &back, &back_len, &e), 0);
    CHECK_EQ_INT(back_len, n);
    CHECK(back && memcmp(back, in, n) == 0);
    free(back);
    back = NULL;

    /* One byte under the bound. */
    CHECK_EQ_INT(pn_gunzip(gz, gz_len, n - 1, &back, &back_len, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    CHECK(back == NULL);

    /* Truncated and corrupt streams. */
    CHECK_EQ_INT(pn_gunzip(gz, gz_len / 2, n, &back, &back_len, &e), -1);
    CHECK_EQ_INT(e.code, PN_EPROTO);
    uint8_t *bad = malloc(gz_len);
    if (bad) {
        memcpy(bad, gz, gz_len);
        for (size_t i = 20; i < 60 && i < gz_len; i++)
            bad[i] ^= 0x5a;
        CHECK_EQ_INT(pn_gunzip(bad, gz_len, n, &back, &back_len, &e), -1);
        CHECK_EQ_INT(e.code, PN_EPROTO);
        free(bad);
    }

    /* Two members back to back read as their concatenation. */
    uint8_t *two = malloc(2 * gz_len);
    if (two) {
        memcpy(two, gz, gz_len);
        memcpy(two + gz_len, gz, gz_len);
        CHECK_EQ_INT(pn_gunzip(two, 2 * gz_len, 2 * n, &back, &back_len, &e), 0);
        CHECK_EQ_INT(back_len, 2 * n);
        CHECK(back && memcmp(back, in, n) == 0 && memcmp(back + n, in, n) == 0);
        free(back);
        back = NULL;
        /* Trailing garbage is an error, not silently ignored. */
        memset(two + gz_len, 0x42, 8);
        CHECK_EQ_INT(pn_gunzip(two, gz_len + 8, 2 * n, &back, &back_len, &e), -1);
        CHECK_EQ_INT(e.code, PN_EPROTO);
        free(two);
    }

    /* Data that is not gzip passes through, bounded the same way. */
    const uint8_t raw[] = {0x0a, 0x04, 0x08, 0x01, 0x10, 0x02};
    CHECK_EQ_INT(pn_gunzip(raw, sizeof raw, 100, &back, &back_len, &e), 0);
    CHECK_EQ_INT(back_len, sizeof raw);
    CHECK(back && memcmp(back, raw, sizeof raw) == 0);
    free(back);
    back = NULL;
    CHECK_EQ_INT(pn_gunzip(raw, sizeof raw, 5, &back, &back_len, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);

    /* Empty input: empty gzip member, and empty passthrough. */
    uint8_t *gz0 = NULL;
    size_t gz0_len = 0;
    CHECK_EQ_INT(pn_gzip(in, 0, &gz0, &gz0_len, &e), 0);
    CHECK(gz0_len >= 20);
    CHECK_EQ_INT(pn_gunzip(gz0, gz0_len, 0, &back, &back_len, &e), 0);
    CHECK_EQ_INT(back_len, 0);
    free(back);
    back = NULL;
    CHECK_EQ_INT(pn_gunzip(in, 0, 0, &back, &back_len, &e), 0);
    CHECK_EQ_INT(back_len, 0);
    free(back);

    free(gz0);
    free(gz);
    free(in);
}

TEST_MAIN(T(test_round_trip), T(test_profile_meta_and_freed_labels), T(test_zero_samples_skipped), T(test_unknown_frame_kept),
          T(test_split_by_samples), T(test_split_by_bytes), T(test_bad_options),
          T(test_wire_matches_protobuf_c), T(test_go_pprof_reads_it),
          T(test_go_pprof_reads_large), T(test_encode_speed), T(test_gzip))
