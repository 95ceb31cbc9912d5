/* The growable hash index: starts at one page, doubles in place keeping
 * every entry findable, stops at its reservation, restarts at the size a
 * clear was told to expect. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "support/hash.h"
#include "support/index.h"

typedef struct {
    uint32_t key;
    uint32_t hash;
} ent;

static uint32_t hash_of(uint32_t key) { return pn_hash_u32(PN_HASH_SEED, key); }

/* Entry id of key, or -1: the lookup the intern tables do. */
static long find(const pn_index *x, const ent *e, uint32_t key)
{
    uint32_t h = hash_of(key);
    for (uint32_t s = h & x->mask;; s = (s + 1) & x->mask) {
        uint32_t v = x->slots[s];
        if (v == 0)
            return -1;
        if (e[v - 1].hash == h && e[v - 1].key == key)
            return (long)v - 1;
    }
}

/* Insert key as entry n (known absent), growing first when needed. */
static void add(pn_index *x, ent *e, uint32_t n, uint32_t key)
{
    uint32_t h = hash_of(key);
    e[n] = (ent){key, h};
    if (pn_index_need_room(x, n))
        pn_index_grow(x, n, e, sizeof *e, offsetof(ent, hash));
    x->slots[pn_index_free_slot(x, h)] = n + 1;
}

static void test_grows_in_place(void)
{
    enum { N = 100000 };
    static ent e[N];
    pn_index x;
    CHECK_EQ_INT(pn_index_init(&x, N), 0);
    CHECK_EQ_INT(x.mask + 1, 1024);
    CHECK_EQ_INT(x.max_slots, 262144);
    long over_half = 0;
    for (uint32_t i = 0; i < N; i++) {
        add(&x, e, i, i * 7919u + 13);
        over_half += (uint64_t)(i + 1) * 2 > (uint64_t)x.mask + 1;
    }
    CHECK_EQ_INT(over_half, 0);
    CHECK_EQ_INT(x.mask + 1, 262144);
    long missing = 0;
    for (uint32_t i = 0; i < N; i++)
        missing += find(&x, e, i * 7919u + 13) != (long)i;
    CHECK_EQ_INT(missing, 0);
    CHECK_EQ_INT(find(&x, e, 2), -1);

    /* A clear that expects 3000 entries restarts at 8192 slots, all empty. */
    CHECK(pn_index_resident(&x) >= 262144 / 2 * sizeof(uint32_t));
    pn_index_clear(&x, 3000);
    CHECK_EQ_INT(pn_index_resident(&x), 0);
    CHECK_EQ_INT(x.mask + 1, 8192);
    size_t used = 0;
    for (uint32_t s = 0; s <= x.mask; s++)
        used += x.slots[s] != 0;
    CHECK_EQ_INT(used, 0);
    for (uint32_t i = 0; i < 3000; i++)
        add(&x, e, i, i + 1);
    CHECK_EQ_INT(x.mask + 1, 8192); /* no rebuild for the expected load */
    CHECK_EQ_INT(find(&x, e, 2999), 2998);
    pn_index_clear(&x, 0);
    CHECK_EQ_INT(x.mask + 1, 1024);
    pn_index_free(&x);
}

static void test_small_reservation(void)
{
    /* Fewer slots reserved than one page holds: starts (and stays) there. */
    static ent e[10];
    pn_index x;
    CHECK_EQ_INT(pn_index_init(&x, 10), 0);
    CHECK_EQ_INT(x.max_slots, 32);
    CHECK_EQ_INT(x.mask + 1, 32);
    for (uint32_t i = 0; i < 10; i++)
        add(&x, e, i, 100 + i);
    CHECK_EQ_INT(x.mask + 1, 32);
    CHECK(!pn_index_need_room(&x, 10));
    CHECK_EQ_INT(pn_index_grow(&x, 10, e, sizeof *e, offsetof(ent, hash)), 0);
    for (uint32_t i = 0; i < 10; i++)
        CHECK_EQ_INT(find(&x, e, 100 + i), i);
    pn_index_clear(&x, 1000); /* expecting more than it may hold: its maximum */
    CHECK_EQ_INT(x.mask + 1, 32);
    pn_index_free(&x);
}

TEST_MAIN(T(test_grows_in_place), T(test_small_reservation))
