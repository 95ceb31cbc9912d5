/* The sampler's CPU budget, driven with made-up tick costs: the stride it
 * picks keeps the smoothed cost within the budget, comes back down when
 * ticks get cheap, stays 1 with no budget, and is bounded. */
#include "check.h"
#include "sampling/budget.h"

#define MS 1000000LL

/* Feed n ticks of the same cost; returns the CPU share of one core they
 * used over the time the strides put between them. */
static double run_ticks(pn_budget *b, int n, int64_t cost)
{
    double cpu = 0, wall = 0;
    for (int i = 0; i < n; i++) {
        uint32_t k = pn_budget_after_tick(b, cost);
        cpu += (double)cost;
        wall += (double)k * (double)b->interval_ns;
    }
    return cpu / wall;
}

static void test_no_budget_never_throttles(void)
{
    pn_budget b;
    pn_budget_init(&b, 1 * MS, 0);
    CHECK(run_ticks(&b, 100, 50 * MS) == 50.0); /* 50 ms per 1 ms tick: 50 cores */
    CHECK_EQ_INT(b.stride, 1);
}

static void test_cheap_ticks_keep_the_rate(void)
{
    pn_budget b;
    pn_budget_init(&b, 10 * MS, 1); /* 100 Hz, 1 %: 100 us per tick is free */
    run_ticks(&b, 50, 90000);
    CHECK_EQ_INT(b.stride, 1);
    pn_budget_init(&b, 10 * MS, 1);
    run_ticks(&b, 50, 100000); /* exactly the budget */
    CHECK_EQ_INT(b.stride, 1);
}

static void test_expensive_ticks_are_spaced_to_the_budget(void)
{
    /* 1000 idle threads in wall mode at 1000 Hz: ~0.9 ms per tick. At 1 %
     * of a core a tick may cost 1 % of the time between ticks, so they
     * go 90 intervals apart. */
    pn_budget b;
    pn_budget_init(&b, 1 * MS, 1);
    run_ticks(&b, 20, 900000);
    CHECK_EQ_INT(b.stride, 90);
    /* Over a long run the share stays within the budget (the first ticks,
     * before the smoothing caught up, are diluted). */
    double share = run_ticks(&b, 2000, 900000);
    CHECK(share <= 0.0101);
    CHECK(share >= 0.009);
    /* A larger budget, a smaller stride: 5 % -> 18. */
    pn_budget_init(&b, 1 * MS, 5);
    run_ticks(&b, 20, 900000);
    CHECK_EQ_INT(b.stride, 18);
}

static void test_rate_recovers_when_ticks_get_cheap(void)
{
    pn_budget b;
    pn_budget_init(&b, 1 * MS, 1);
    run_ticks(&b, 20, 500000);
    CHECK_EQ_INT(b.stride, 50);
    /* One cheap tick does not bring the full rate back at once... */
    pn_budget_after_tick(&b, 1000);
    CHECK(b.stride > 40);
    /* ...a run of them does. */
    run_ticks(&b, 200, 1000);
    CHECK_EQ_INT(b.stride, 1);
    /* A burst is throttled within a few ticks (the cost rises fast). */
    int n = 0;
    while (b.stride < 25 && n < 100) {
        pn_budget_after_tick(&b, 500000);
        n++;
    }
    CHECK(n <= 3);
}

static void test_stride_is_bounded(void)
{
    pn_budget b;
    /* 0.01 % of a core with 1 s ticks costing 10 ms would need 10 000 s
     * between ticks: the cap is 10 s. */
    pn_budget_init(&b, 1000 * MS, 0.01);
    run_ticks(&b, 10, 10 * MS);
    CHECK_EQ_INT(b.stride, 10);
    CHECK_EQ_INT(b.max_stride, 10);
    /* An interval longer than the cap: never throttled. */
    pn_budget_init(&b, 20000 * MS, 1);
    run_ticks(&b, 10, 1000 * MS);
    CHECK_EQ_INT(b.stride, 1);
    /* A clock that went backwards (or a zero cost) is no cost. */
    pn_budget_init(&b, 1 * MS, 1);
    run_ticks(&b, 10, -5 * MS);
    CHECK_EQ_INT(b.stride, 1);
}

TEST_MAIN(T(test_no_budget_never_throttles), T(test_cheap_ticks_keep_the_rate),
          T(test_expensive_ticks_are_spaced_to_the_budget),
          T(test_rate_recovers_when_ticks_get_cheap), T(test_stride_is_bounded))
