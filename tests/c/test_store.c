/* Store: aggregation, label keys, overflow, deep-stack cut, swap. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"

static pn_store *small_store(uint32_t max_stacks, uint32_t max_depth)
{
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.max_stacks = max_stacks;
    l.max_depth = max_depth;
    l.nvalues = 2;
    pn_error e;
    pn_store *s = pn_store_new(&l, &e);
    if (!s)
        fprintf(stderr, "store: %s\n", e.msg);
    return s;
}

/* Sum of value[0] over the samples of p whose leaf frame is named `name`. */
static int64_t leaf_total(const pn_period *p, const char *name)
{
    int64_t sum = 0;
    for (size_t i = 0; i < pn_period_sample_count(p); i++) {
        pn_sample_view v;
        pn_period_sample(p, i, &v);
        uint32_t n, f, line;
        if (pn_symbols_frame_get(pn_period_symbols_const(p), v.frames[0], &n, &f, &line) == 0 &&
            strcmp(pn_symbols_str(pn_period_symbols_const(p), n, NULL), name) == 0)
            sum += v.values[0];
    }
    return sum;
}

/* String sid of p's symbols (label keys and values are copied there), as
 * a NUL-terminated copy valid until the next call. */
static const char *pair_str(const pn_period *p, uint32_t sid)
{
    static char buf[256];
    size_t len = 0;
    const char *str = pn_symbols_str(pn_period_symbols_const(p), sid, &len);
    if (!str)
        return "(null)";
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, str, len);
    buf[len] = '\0';
    return buf;
}

static void test_aggregate(void)
{
    pn_store *s = small_store(100, 16);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_symbols *sym = pn_period_symbols(p);
    pn_frame_id st[3] = {pn_symbols_frame3(sym, "leaf", 4, "a.c", 3, 3),
                         pn_symbols_frame3(sym, "mid", 3, "a.c", 3, 2),
                         pn_symbols_frame3(sym, "main", 4, "a.c", 3, 1)};
    int64_t v[2] = {10, 1};
    for (int i = 0; i < 5; i++)
        pn_period_add(p, st, 3, NULL, 0, PN_STR_EMPTY, v);
    pn_label kv = {"k", "v"};
    const pn_labelset *ls = pn_labelset_merge(NULL, &kv, 1, NULL);
    pn_period_add(p, st, 3, ls, 0, PN_STR_EMPTY, v);
    pn_period_add(p, st, 3, NULL, 42, PN_STR_EMPTY, v); /* thread id splits too */
    pn_store_write_end(s);

    pn_period *old = pn_store_swap(s, 12345);
    CHECK(old == p);
    CHECK_EQ_INT(pn_period_end_ns(old), 12345);
    /* overflow sample (all zero) + 3 real ones */
    CHECK_EQ_INT(pn_period_sample_count(old), 4);
    int found_plain = 0, found_label = 0, found_tid = 0;
    for (size_t i = 0; i < pn_period_sample_count(old); i++) {
        pn_sample_view sv;
        pn_period_sample(old, i, &sv);
        if (sv.depth == 3 && sv.label_set == 0 && sv.tid == 0) {
            CHECK_EQ_INT(sv.nlabels, 0);
            found_plain = 1;
            CHECK_EQ_INT(sv.values[0], 50);
            CHECK_EQ_INT(sv.values[1], 5);
            CHECK(memcmp(sv.frames, st, sizeof st) == 0);
        } else if (sv.label_set != 0) {
            found_label = 1;
            CHECK_EQ_INT(sv.nlabels, 1);
            CHECK_STR(pair_str(old, sv.label_pairs[0]), "k");
            CHECK_STR(pair_str(old, sv.label_pairs[1]), "v");
            CHECK_EQ_INT(sv.tid, 0);
            CHECK_EQ_INT(sv.values[1], 1);
        } else if (sv.tid == 42) {
            found_tid = 1;
        }
    }
    CHECK(found_plain && found_label && found_tid);
    pn_period_stats stats;
    pn_period_get_stats(old, &stats);
    CHECK_EQ_INT(stats.samples_added, 7);
    CHECK_EQ_INT(stats.overflow_samples, 0);
    pn_store_recycle(s, old);
    pn_labelset_unref(ls);

    /* The new active period is empty and has a later sequence number. */
    pn_store_write_begin(s);
    pn_period *p2 = pn_store_active(s);
    CHECK(p2 != old);
    CHECK(pn_period_seq(p2) > pn_period_seq(old));
    CHECK_EQ_INT(pn_period_start_ns(p2), 12345);
    pn_store_write_end(s);
    pn_period *old2 = pn_store_swap(s, 2);
    CHECK_EQ_INT(pn_period_sample_count(old2), 1); /* just the overflow bucket */
    pn_store_free(s);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
    CHECK_EQ_INT(pn_labelset_retired(), 0);
}

static void test_overflow_counted(void)
{
    pn_store *s = small_store(10, 16);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_symbols *sym = pn_period_symbols(p);
    int64_t v[2] = {1, 1};
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "f%d", i);
        pn_frame_id f = pn_symbols_frame3(sym, name, strlen(name), "x", 1, 1);
        pn_period_add(p, &f, 1, NULL, 0, PN_STR_EMPTY, v);
    }
    pn_store_write_end(s);
    pn_period *old = pn_store_swap(s, 1);
    pn_period_stats st;
    pn_period_get_stats(old, &st);
    CHECK_EQ_INT(st.samples_added, 100);
    CHECK_EQ_INT(st.overflow_samples, 90);
    CHECK_EQ_INT(leaf_total(old, "[overflow]"), 90);
    /* Nothing lost: the values add up to every sample added. */
    int64_t total = 0;
    for (size_t i = 0; i < pn_period_sample_count(old); i++) {
        pn_sample_view sv;
        pn_period_sample(old, i, &sv);
        total += sv.values[1];
    }
    CHECK_EQ_INT(total, 100);
    pn_store_free(s);
}

static void test_sample_table_overflow(void)
{
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.max_stacks = 100;
    l.max_samples = 5;
    pn_store *s = pn_store_new(&l, NULL);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_frame_id f = pn_symbols_frame3(pn_period_symbols(p), "f", 1, "x", 1, 1);
    int64_t v[2] = {1, 1};
    for (uint64_t tid = 1; tid <= 20; tid++)
        pn_period_add(p, &f, 1, NULL, tid, PN_STR_EMPTY, v);
    pn_store_write_end(s);
    pn_period *old = pn_store_swap(s, 1);
    pn_period_stats st;
    pn_period_get_stats(old, &st);
    CHECK_EQ_INT(st.overflow_samples, 15);
    CHECK_EQ_INT(leaf_total(old, "[overflow]"), 15);
    CHECK_EQ_INT(leaf_total(old, "f"), 5);
    pn_store_free(s);
}

static void test_deep_stack_cut(void)
{
    pn_store *s = small_store(100, 8);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_symbols *sym = pn_period_symbols(p);
    pn_frame_id deep[50];
    char name[16];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "d%d", i);
        deep[i] = pn_symbols_frame3(sym, name, strlen(name), "x", 1, (uint32_t)i);
    }
    int64_t v[2] = {1, 1};
    pn_period_add(p, deep, 50, NULL, 0, PN_STR_EMPTY, v);
    pn_period_add(p, deep, 8, NULL, 0, PN_STR_EMPTY, v); /* exactly at the cap: kept whole */
    pn_store_write_end(s);
    pn_period *old = pn_store_swap(s, 1);
    int saw_cut = 0, saw_whole = 0;
    for (size_t i = 0; i < pn_period_sample_count(old); i++) {
        pn_sample_view sv;
        pn_period_sample(old, i, &sv);
        if (sv.depth != 8)
            continue;
        if (sv.frames[7] == PN_FRAME_TRUNCATED) {
            saw_cut = 1;
            CHECK(memcmp(sv.frames, deep, 7 * sizeof deep[0]) == 0); /* leaf side kept */
        } else {
            saw_whole = 1;
            CHECK(memcmp(sv.frames, deep, 8 * sizeof deep[0]) == 0);
        }
    }
    CHECK(saw_cut && saw_whole);
    pn_period_stats st;
    pn_period_get_stats(old, &st);
    CHECK_EQ_INT(st.truncated_stacks, 1);
    pn_store_free(s);
}

static void test_empty_stack_and_bad_limits(void)
{
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.nvalues = 9;
    pn_error e;
    CHECK(pn_store_new(&l, &e) == NULL);
    CHECK(strstr(e.msg, "nvalues") != NULL);
    pn_store_limits_default(&l);
    l.max_depth = 1;
    CHECK(pn_store_new(&l, &e) == NULL);
    CHECK(strstr(e.msg, "max_depth") != NULL);

    pn_store *s = small_store(10, 8);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    int64_t v[2] = {3, 1};
    pn_period_add(p, NULL, 0, NULL, 0, PN_STR_EMPTY, v);
    pn_store_write_end(s);
    pn_period *old = pn_store_swap(s, 1);
    CHECK_EQ_INT(leaf_total(old, "[unknown]"), 3);
    pn_store_free(s);
}

static void test_many_periods_reuse(void)
{
    /* Swapping repeatedly recycles both buffers and keeps contents apart. */
    pn_store *s = small_store(1000, 16);
    for (int round = 0; round < 50; round++) {
        pn_store_write_begin(s);
        pn_period *p = pn_store_active(s);
        pn_symbols *sym = pn_period_symbols(p);
        char name[16];
        snprintf(name, sizeof name, "r%d", round);
        int64_t v[2] = {round + 1, 1};
        for (int k = 0; k < 100; k++) {
            pn_frame_id f[2] = {pn_symbols_frame3(sym, name, strlen(name), "x", 1, (uint32_t)k),
                                pn_symbols_frame3(sym, "main", 4, "x", 1, 1)};
            pn_period_add(p, f, 2, NULL, 0, PN_STR_EMPTY, v);
        }
        pn_store_write_end(s);
        pn_period *old = pn_store_swap(s, round);
        CHECK_EQ_INT(pn_period_sample_count(old), 101);
        CHECK_EQ_INT(leaf_total(old, name), 100 * (round + 1));
        pn_store_recycle(s, old);
    }
    pn_store_free(s);
}

/* Many more distinct stacks and samples than the indexes' first size: the
 * in-place doublings keep every aggregate whole, in both periods, and a
 * period that needed large indexes is still right after it was recycled. */
static void test_growth_keeps_aggregates(void)
{
    enum { STACKS = 6000 };
    pn_store *s = small_store(STACKS, 16);
    for (int round = 0; round < 4; round++) {
        pn_store_write_begin(s);
        pn_period *p = pn_store_active(s);
        pn_symbols *sym = pn_period_symbols(p);
        pn_frame_id main_f = pn_symbols_frame3(sym, "main", 4, "m.py", 4, 1);
        char name[24];
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 0; i < STACKS; i++) {
                snprintf(name, sizeof name, "s%d_%d", round, i);
                pn_frame_id f[2] = {pn_symbols_frame3(sym, name, strlen(name), "m.py", 4, 2),
                                    main_f};
                int64_t v[2] = {i + 1, 1};
                /* Odd stacks run on a second thread after the first pass. */
                uint64_t tid = (i & 1) && rep > 0 ? 2 : 1;
                pn_period_add(p, f, 2, NULL, tid, PN_STR_EMPTY, v);
            }
        }
        pn_store_write_end(s);
        pn_period *old = pn_store_swap(s, round + 1);
        pn_period_stats st;
        pn_period_get_stats(old, &st);
        CHECK_EQ_INT(st.overflow_samples, 0);
        CHECK_EQ_INT(st.symbols_dropped, 0);
        /* Even stacks: one sample (tid 1) x3; odd: tid 1 once, tid 2 twice. */
        CHECK_EQ_INT(pn_period_sample_count(old), 1 + STACKS / 2 + 2 * (STACKS / 2));
        int64_t total = 0;
        int wrong = 0;
        for (size_t i = 0; i < pn_period_sample_count(old); i++) {
            pn_sample_view sv;
            pn_period_sample(old, i, &sv);
            total += sv.values[1];
            if (sv.depth != 2)
                continue;
            uint32_t n, fl, line;
            pn_symbols_frame_get(pn_period_symbols_const(old), sv.frames[0], &n, &fl, &line);
            int r, k;
            if (sscanf(pn_symbols_str(pn_period_symbols_const(old), n, NULL), "s%d_%d", &r,
                       &k) != 2 || r != round)
                wrong++;
            else if (sv.values[0] != (int64_t)(k + 1) * sv.values[1])
                wrong++;
            else if (sv.values[1] != ((k & 1) ? (sv.tid == 1 ? 1 : 2) : 3))
                wrong++;
        }
        CHECK_EQ_INT(wrong, 0);
        CHECK_EQ_INT(total, 3 * STACKS);
        pn_store_recycle(s, old);
    }
    pn_store_free(s);
}

/* A store sized for 256k stacks costs RAM for the stacks it holds: with
 * indexes preallocated for the maximum, 2000 stacks hashed over 2 + 4 MiB of
 * slots touched ~5.5 MiB. A recycled period gives its pages back. */
static void test_resident_follows_use(void)
{
    pn_store *s = small_store(1u << 18, 64);
    CHECK(s != NULL);
    if (!s)
        return;
    size_t empty = pn_store_resident_bytes(s);
    CHECK(empty <= 256 * 1024);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_symbols *sym = pn_period_symbols(p);
    pn_frame_id f[20];
    char name[24];
    for (int i = 0; i < 2000; i++) {
        /* A leaf of its own on callers from a pool of 100. */
        for (int d = 0; d < 20; d++) {
            if (d == 0)
                snprintf(name, sizeof name, "leaf%d", i);
            else
                snprintf(name, sizeof name, "f%d", (i + d * 7) % 100);
            f[d] = pn_symbols_frame3(sym, name, strlen(name), "x.py", 4, (uint32_t)d);
        }
        int64_t v[2] = {1, 1};
        pn_period_add(p, f, 20, NULL, 7, PN_STR_EMPTY, v);
    }
    pn_store_write_end(s);
    size_t full = pn_store_resident_bytes(s);
    CHECK(full >= 2000 * 20 * sizeof(pn_frame_id)); /* the stacks' frames */
    CHECK(full <= empty + 1536 * 1024);
    pn_period *old = pn_store_swap(s, 1);
    CHECK_EQ_INT(pn_period_sample_count(old), 2001);
    pn_store_recycle(s, old);
    CHECK(pn_store_resident_bytes(s) <= empty + 64 * 1024);
    pn_store_free(s);
}

/* Samples go to the period their CLOCK_MONOTONIC timestamp belongs to: a
 * cut period keeps taking samples older than the cut until it is sealed;
 * after the seal they are counted as late, never added anywhere. */
static void test_route_by_timestamp(void)
{
    pn_store *s = small_store(100, 16);
    CHECK(s != NULL);
    if (!s)
        return;
    int64_t v[2] = {1, 1};
    pn_store_write_begin(s);
    pn_period *a = pn_store_active(s);
    int64_t t0 = pn_period_start_mono(a);
    CHECK(t0 > 0);
    CHECK(pn_store_route(s, 0) == a);
    CHECK(pn_store_route(s, t0 + 10) == a);
    pn_frame_id fb = pn_symbols_frame3(pn_period_symbols(a), "before", 6, "x", 1, 1);
    pn_period_add(a, &fb, 1, NULL, 0, PN_STR_EMPTY, v);
    pn_store_write_end(s);

    /* Cut at T: a fresh period starts there; a still takes older samples. */
    int64_t T = t0 + 1000000;
    pn_period *old = pn_store_cut(s, pn_period_start_ns(a) + 1000000, T);
    CHECK(old == a);
    pn_period *fresh = pn_store_active(s);
    CHECK(fresh != a);
    CHECK_EQ_INT(pn_period_start_mono(fresh), T);
    CHECK_EQ_INT(pn_period_end_mono(old), T);
    CHECK(pn_period_seq(fresh) > pn_period_seq(old));

    pn_store_write_begin(s);
    pn_period *late_dst = pn_store_route(s, T - 1);
    CHECK(late_dst == old);
    if (late_dst) {
        pn_frame_id f = pn_symbols_frame3(pn_period_symbols(late_dst), "late", 4, "x", 1, 1);
        pn_period_add(late_dst, &f, 1, NULL, 0, PN_STR_EMPTY, v);
    }
    pn_period *new_dst = pn_store_route(s, T);
    CHECK(new_dst == fresh);
    if (new_dst) {
        pn_frame_id f = pn_symbols_frame3(pn_period_symbols(new_dst), "new", 3, "x", 1, 1);
        pn_period_add(new_dst, &f, 1, NULL, 0, PN_STR_EMPTY, v);
    }
    CHECK(pn_store_route(s, 0) == fresh);
    pn_store_write_end(s);
    CHECK_EQ_INT(pn_store_late(s), 0);

    pn_store_seal(s, old);
    CHECK_EQ_INT(leaf_total(old, "before"), 1);
    CHECK_EQ_INT(leaf_total(old, "late"), 1);
    CHECK_EQ_INT(leaf_total(old, "new"), 0);
    CHECK_EQ_INT(leaf_total(fresh, "new"), 1);
    CHECK_EQ_INT(leaf_total(fresh, "late"), 0);

    /* Sealed: a sample older than T has nowhere to go. */
    pn_store_write_begin(s);
    CHECK(pn_store_route(s, T - 1) == NULL);
    CHECK_EQ_INT(pn_store_late(s), 1);
    CHECK(pn_store_route(s, T) == fresh);
    CHECK_EQ_INT(pn_store_late(s), 1);
    pn_store_write_end(s);
    pn_period_stats st;
    pn_period_get_stats(old, &st);
    CHECK_EQ_INT(st.samples_added, 2);
    pn_store_recycle(s, old);

    /* The next cut routes the same way from the new boundary. */
    int64_t T2 = T + 1000000;
    pn_period *old2 = pn_store_cut(s, pn_period_start_ns(fresh) + 1000000, T2);
    CHECK(old2 == fresh);
    pn_store_write_begin(s);
    CHECK(pn_store_route(s, T2 - 1) == fresh);
    CHECK(pn_store_route(s, T2) == pn_store_active(s));
    CHECK(pn_store_route(s, T - 1) == NULL); /* older than both */
    CHECK_EQ_INT(pn_store_late(s), 2);
    pn_store_write_end(s);
    pn_store_seal(s, old2);
    pn_store_free(s);
}

/* A period copies a label set's pairs: after the set's last reference is
 * gone and it has been freed, the period still reports its labels. */
static void test_label_pairs_survive_reclaim(void)
{
    pn_store *s = small_store(100, 16);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_error e;
    pn_label kv[2] = {{"span_id", "00f067aa0ba902b7"}, {"endpoint", "/checkout"}};
    const pn_labelset *ls = pn_labelset_merge(NULL, kv, 2, &e);
    CHECK(ls != NULL);
    if (!ls) {
        pn_store_free(s);
        return;
    }
    size_t live = pn_labelset_live();
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_frame_id f = pn_symbols_frame3(pn_period_symbols(p), "f", 1, "x", 1, 1);
    int64_t v[2] = {5, 1};
    pn_period_add(p, &f, 1, ls, 7, PN_STR_EMPTY, v);
    pn_period_add(p, &f, 1, ls, 7, PN_STR_EMPTY, v);
    pn_store_write_end(s);

    pn_labelset_unref(ls); /* the last reference: out of the table */
    CHECK_EQ_INT(pn_labelset_live(), live - 1);
    pn_labels_reclaim(); /* no reader holds it: freed */
    CHECK_EQ_INT(pn_labelset_retired(), 0);
    /* Same-sized set, likely in the freed block: must not show up. */
    pn_label other[2] = {{"span_id", "ffffffffffffffff"}, {"endpoint", "/xxxxxxxx"}};
    const pn_labelset *ls2 = pn_labelset_merge(NULL, other, 2, &e);
    CHECK(ls2 != NULL);

    pn_period *old = pn_store_swap(s, 1);
    int found = 0;
    for (size_t i = 0; i < pn_period_sample_count(old); i++) {
        pn_sample_view sv;
        pn_period_sample(old, i, &sv);
        if (sv.tid != 7)
            continue;
        found++;
        CHECK(sv.label_set != 0);
        CHECK_EQ_INT(sv.values[1], 2);
        CHECK_EQ_INT(sv.nlabels, 2);
        if (sv.nlabels != 2)
            continue;
        /* Sorted by key. */
        CHECK_STR(pair_str(old, sv.label_pairs[0]), "endpoint");
        CHECK_STR(pair_str(old, sv.label_pairs[1]), "/checkout");
        CHECK_STR(pair_str(old, sv.label_pairs[2]), "span_id");
        CHECK_STR(pair_str(old, sv.label_pairs[3]), "00f067aa0ba902b7");
        uint32_t n = 0;
        const uint32_t *pairs = pn_period_label_set(old, sv.label_set, &n);
        CHECK_EQ_INT(n, 2);
        CHECK(pairs == sv.label_pairs);
    }
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(pn_period_label_set_count(old), 2); /* the empty set + ours */
    pn_labelset_unref(ls2);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 0);
    pn_store_free(s);
}

/* A thread's set under a context's set: merged once per pair and period,
 * the context's value winning on an equal key; either side alone keeps the
 * single set's entry; a merge over PN_MAX_LABELS keeps the context's set. */
static void test_merged_label_sets(void)
{
    pn_store *s = small_store(100, 16);
    CHECK(s != NULL);
    if (!s)
        return;
    pn_label tkv[2] = {{"host", "a"}, {"route", "thread"}};
    pn_label ckv[2] = {{"route", "/ctx"}, {"span_id", "00f067aa0ba902b7"}};
    const pn_labelset *thr = pn_labelset_merge(NULL, tkv, 2, NULL);
    const pn_labelset *ctx = pn_labelset_merge(NULL, ckv, 2, NULL);
    /* 60 + 60 distinct keys: more than a sample may carry. */
    pn_label big_a[60], big_b[60];
    char names[120][8];
    for (int i = 0; i < 120; i++) {
        snprintf(names[i], sizeof names[i], "k%03d", i);
        (i < 60 ? big_a : big_b)[i % 60] = (pn_label){names[i], "v"};
    }
    const pn_labelset *ba = pn_labelset_merge(NULL, big_a, 60, NULL);
    const pn_labelset *bb = pn_labelset_merge(NULL, big_b, 60, NULL);
    CHECK(thr && ctx && ba && bb);
    pn_store_write_begin(s);
    pn_period *p = pn_store_active(s);
    pn_frame_id f = pn_symbols_frame3(pn_period_symbols(p), "f", 1, "x", 1, 1);
    int64_t v[2] = {5, 1};
    for (int i = 0; i < 3; i++)
        pn_period_add_merged(p, &f, 1, thr, ctx, 1, PN_STR_EMPTY, v);
    pn_period_add_merged(p, &f, 1, thr, NULL, 2, PN_STR_EMPTY, v);
    pn_period_add(p, &f, 1, thr, 3, PN_STR_EMPTY, v);
    pn_period_add_merged(p, &f, 1, pn_labelset_empty(), ctx, 4, PN_STR_EMPTY, v);
    pn_period_add_merged(p, &f, 1, ba, bb, 5, PN_STR_EMPTY, v);
    pn_store_write_end(s);

    pn_period *old = pn_store_swap(s, 1);
    uint32_t set_of[6] = {0};
    for (size_t i = 0; i < pn_period_sample_count(old); i++) {
        pn_sample_view sv;
        pn_period_sample(old, i, &sv);
        if (sv.tid < 1 || sv.tid > 5)
            continue;
        set_of[sv.tid] = sv.label_set;
        if (sv.tid == 1) {
            CHECK_EQ_INT(sv.values[1], 3);
            CHECK_EQ_INT(sv.nlabels, 3);
            if (sv.nlabels != 3)
                continue;
            CHECK_STR(pair_str(old, sv.label_pairs[0]), "host");
            CHECK_STR(pair_str(old, sv.label_pairs[1]), "a");
            CHECK_STR(pair_str(old, sv.label_pairs[2]), "route");
            CHECK_STR(pair_str(old, sv.label_pairs[3]), "/ctx");
            CHECK_STR(pair_str(old, sv.label_pairs[4]), "span_id");
        } else if (sv.tid == 5) {
            CHECK_EQ_INT(sv.nlabels, 60);
            CHECK_STR(pair_str(old, sv.label_pairs[0]), "k060");
        }
    }
    CHECK(set_of[1] != 0 && set_of[2] != 0 && set_of[4] != 0);
    CHECK_EQ_INT(set_of[2], set_of[3]); /* the thread's set alone, one entry */
    CHECK(set_of[1] != set_of[2] && set_of[1] != set_of[4] && set_of[2] != set_of[4]);
    CHECK_EQ_INT(set_of[5] != 0, 1);
    pn_period_stats st;
    pn_period_get_stats(old, &st);
    CHECK_EQ_INT(st.labels_dropped, 1);
    pn_store_recycle(s, old);
    pn_labelset_unref(thr);
    pn_labelset_unref(ctx);
    pn_labelset_unref(ba);
    pn_labelset_unref(bb);
    pn_store_free(s);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
}

TEST_MAIN(T(test_aggregate), T(test_overflow_counted), T(test_sample_table_overflow),
          T(test_deep_stack_cut), T(test_empty_stack_and_bad_limits), T(test_many_periods_reuse),
          T(test_growth_keeps_aggregates), T(test_resident_follows_use),
          T(test_route_by_timestamp), T(test_label_pairs_survive_reclaim),
          T(test_merged_label_sets))
