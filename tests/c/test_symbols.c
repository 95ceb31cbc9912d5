/* Strings and frames interning: ids, dedup, bounds, reset, long names,
 * index growth, resident memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"

static void test_intern_dedup(void)
{
    pn_symbols *s = pn_symbols_new(1 << 16, 1024);
    CHECK(s != NULL);
    uint32_t a = pn_symbols_string(s, "main", 4);
    uint32_t b = pn_symbols_string(s, "main", 4);
    uint32_t c = pn_symbols_string(s, "mainx", 4); /* same 4 bytes */
    uint32_t d = pn_symbols_string(s, "other", 5);
    CHECK_EQ_INT(a, b);
    CHECK_EQ_INT(a, c);
    CHECK(a != d);
    CHECK_STR(pn_symbols_str(s, a, NULL), "main");
    CHECK_EQ_INT(pn_symbols_string(s, "", 0), PN_STR_EMPTY);

    pn_frame_id f1 = pn_symbols_frame3(s, "f", 1, "a.py", 4, 10);
    pn_frame_id f2 = pn_symbols_frame3(s, "f", 1, "a.py", 4, 11);
    pn_frame_id f3 = pn_symbols_frame3(s, "f", 1, "a.py", 4, 10);
    CHECK(f1 >= PN_FRAME_FIRST_USER);
    CHECK(f1 != f2);
    CHECK_EQ_INT(f1, f3);
    uint32_t n, fl, line;
    CHECK_EQ_INT(pn_symbols_frame_get(s, f2, &n, &fl, &line), 0);
    CHECK_STR(pn_symbols_str(s, n, NULL), "f");
    CHECK_STR(pn_symbols_str(s, fl, NULL), "a.py");
    CHECK_EQ_INT(line, 11);
    CHECK_EQ_INT(pn_symbols_frame_get(s, 99999, &n, &fl, &line), -1);
    pn_symbols_free(s);
}

static void test_synthetic_frames(void)
{
    pn_symbols *s = pn_symbols_new(1 << 16, 1024);
    uint32_t n, fl, line;
    CHECK_EQ_INT(pn_symbols_frame_get(s, PN_FRAME_TRUNCATED, &n, &fl, &line), 0);
    CHECK_STR(pn_symbols_str(s, n, NULL), "[truncated]");
    CHECK_EQ_INT(pn_symbols_frame_get(s, PN_FRAME_UNKNOWN, &n, &fl, &line), 0);
    CHECK_STR(pn_symbols_str(s, n, NULL), "[unknown]");
    CHECK_EQ_INT(pn_symbols_frame_get(s, PN_FRAME_OVERFLOW, &n, &fl, &line), 0);
    CHECK_STR(pn_symbols_str(s, n, NULL), "[overflow]");
    pn_symbols_free(s);
}

static void test_bounded(void)
{
    pn_symbols *s = pn_symbols_new(4096, 64);
    char name[32];
    int unknown = 0;
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof name, "function_%d", i);
        if (pn_symbols_frame3(s, name, strlen(name), "x.py", 4, 1) == PN_FRAME_UNKNOWN)
            unknown++;
    }
    CHECK(unknown > 0);
    CHECK(pn_symbols_frame_count(s) <= 64);
    CHECK(pn_symbols_dropped(s) > 0);
    pn_symbols_free(s);
}

static void test_reset_generation(void)
{
    pn_symbols *s = pn_symbols_new(1 << 16, 1024);
    uint64_t g = pn_symbols_generation(s);
    pn_frame_id f = pn_symbols_frame3(s, "zzz", 3, "q.py", 4, 5);
    CHECK(pn_symbols_frame_count(s) > PN_FRAME_FIRST_USER);
    pn_symbols_reset(s);
    CHECK(pn_symbols_generation(s) != g);
    CHECK_EQ_INT(pn_symbols_frame_count(s), PN_FRAME_FIRST_USER);
    /* Everything is interned afresh and lookups find the new entries. */
    for (int round = 0; round < 3; round++) {
        pn_frame_id f2 = pn_symbols_frame3(s, "zzz", 3, "q.py", 4, 5);
        CHECK_EQ_INT(f2, f);
        CHECK_EQ_INT(pn_symbols_frame3(s, "zzz", 3, "q.py", 4, 5), f2);
        pn_symbols_reset(s);
    }
    /* Two tables never share a generation. */
    pn_symbols *other = pn_symbols_new(1 << 16, 1024);
    CHECK(pn_symbols_generation(other) != pn_symbols_generation(s));
    pn_symbols_free(other);
    pn_symbols_free(s);
}

static void test_long_name_clipped(void)
{
    pn_symbols *s = pn_symbols_new(1 << 16, 1024);
    size_t n = 5000;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i += 2) {
        big[i] = (char)0xC3; /* "é" repeated: a cut must not split it */
        big[i + 1] = (char)0xA9;
    }
    size_t len;
    uint32_t id = pn_symbols_string(s, big, n);
    const char *got = pn_symbols_str(s, id, &len);
    CHECK(len <= PN_MAX_STRING);
    CHECK(memcmp(got + len - 3, "...", 3) == 0);
    CHECK(((len - 3) % 2) == 0);
    CHECK_EQ_INT(pn_symbols_string(s, big, n), id);
    free(big);
    pn_symbols_free(s);
}

/* Far more entries than the index's first size: every id must still be
 * found after each in-place doubling, and again after a reset, which keeps
 * the size the table needed. */
static void test_index_growth(void)
{
    enum { N = 50000 };
    pn_symbols *s = pn_symbols_new(4u << 20, N + 100);
    static uint32_t sid[N];
    static pn_frame_id fid[N];
    char name[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            int n = snprintf(name, sizeof name, "fn_%d", i);
            sid[i] = pn_symbols_string(s, name, (size_t)n);
            fid[i] = pn_symbols_frame(s, sid[i], PN_STR_EMPTY, (uint32_t)i);
        }
        CHECK_EQ_INT(pn_symbols_dropped(s), 0);
        CHECK_EQ_INT(pn_symbols_frame_count(s), N + PN_FRAME_FIRST_USER);
        int wrong = 0;
        for (int i = 0; i < N; i++) {
            int n = snprintf(name, sizeof name, "fn_%d", i);
            uint32_t nm, fl, line;
            if (pn_symbols_string(s, name, (size_t)n) != sid[i] ||
                strcmp(pn_symbols_str(s, sid[i], NULL), name) != 0 ||
                pn_symbols_frame(s, sid[i], PN_STR_EMPTY, (uint32_t)i) != fid[i] ||
                pn_symbols_frame_get(s, fid[i], &nm, &fl, &line) != 0 || nm != sid[i] ||
                line != (uint32_t)i)
                wrong++;
        }
        CHECK_EQ_INT(wrong, 0);
        CHECK_EQ_INT(pn_symbols_frame_count(s), N + PN_FRAME_FIRST_USER);
        pn_symbols_reset(s);
        CHECK_EQ_INT(pn_symbols_frame_count(s), PN_FRAME_FIRST_USER);
    }
    pn_symbols_free(s);
}

/* A table reserved for a million frames costs RAM for what it holds, not
 * for its capacity, and a reset gives that back. With indexes sized for the
 * maximum, 2000 entries hashed over 16 MiB of slots would touch ~8 MiB. */
static void test_resident_follows_use(void)
{
    pn_symbols *s = pn_symbols_new(64u << 20, 1u << 20);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK(pn_symbols_resident_bytes(s) <= 64 * 1024);
    char name[48];
    for (int i = 0; i < 2000; i++) {
        int n = snprintf(name, sizeof name, "module.Class.method_%d", i);
        pn_symbols_frame3(s, name, (size_t)n, "/srv/app/module.py", 18, (uint32_t)i);
    }
    size_t used = pn_symbols_resident_bytes(s);
    CHECK(used >= 2000 * 16); /* the entries themselves are resident */
    CHECK(used <= 512 * 1024);
    pn_symbols_reset(s);
    CHECK(pn_symbols_resident_bytes(s) <= 64 * 1024);
    /* Still works after the pages were handed back. */
    pn_frame_id f = pn_symbols_frame3(s, "again", 5, "a.py", 4, 1);
    uint32_t nm, fl, line;
    CHECK_EQ_INT(pn_symbols_frame_get(s, f, &nm, &fl, &line), 0);
    CHECK_STR(pn_symbols_str(s, nm, NULL), "again");
    pn_symbols_free(s);
}

TEST_MAIN(T(test_intern_dedup), T(test_synthetic_frames), T(test_bounded),
          T(test_reset_generation), T(test_long_name_clipped), T(test_index_growth),
          T(test_resident_follows_use))
