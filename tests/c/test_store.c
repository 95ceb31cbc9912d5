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

static void test_aggregate(void)
{
    pn_store *s = small_store(100, 16);
    pn_period *p = pn_store_write_begin(s);
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
        if (sv.depth == 3 && sv.labels == pn_labelset_empty() && sv.tid == 0) {
            found_plain = 1;
            CHECK_EQ_INT(sv.values[0], 50);
            CHECK_EQ_INT(sv.values[1], 5);
            CHECK(memcmp(sv.frames, st, sizeof st) == 0);
        } else if (sv.labels == ls) {
            found_label = 1;
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
    pn_period *p2 = pn_store_write_begin(s);
    CHECK(p2 != old);
    CHECK(pn_period_seq(p2) > pn_period_seq(old));
    CHECK_EQ_INT(pn_period_start_ns(p2), 12345);
    pn_store_write_end(s);
    pn_period *old2 = pn_store_swap(s, 2);
    CHECK_EQ_INT(pn_period_sample_count(old2), 1); /* just the overflow bucket */
    pn_store_free(s);
    pn_labels_collect(UINT64_MAX);
}

static void test_overflow_counted(void)
{
    pn_store *s = small_store(10, 16);
    pn_period *p = pn_store_write_begin(s);
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
    pn_period *p = pn_store_write_begin(s);
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
    pn_period *p = pn_store_write_begin(s);
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
    pn_period *p = pn_store_write_begin(s);
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
        pn_period *p = pn_store_write_begin(s);
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
        pn_period *p = pn_store_write_begin(s);
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
    pn_period *p = pn_store_write_begin(s);
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

TEST_MAIN(T(test_aggregate), T(test_overflow_counted), T(test_sample_table_overflow),
          T(test_deep_stack_cut), T(test_empty_stack_and_bad_limits), T(test_many_periods_reuse),
          T(test_growth_keeps_aggregates), T(test_resident_follows_use))
