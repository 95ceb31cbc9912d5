/* The sampler's CPU budget (budget.c). Core and tests only. */
#ifndef PN_BUDGET_H
#define PN_BUDGET_H

#include <stdint.h>

/* Ticks are never further apart than this, whatever the budget: a period
 * with no tick at all would say nothing about the program. */
#define PN_BUDGET_MAX_INTERVAL_NS 10000000000LL

/* How many configured intervals apart the sampler's ticks go so that its
 * own thread's CPU stays under a share of one core. Plain arithmetic on the
 * costs it is told, so tests drive it with made-up numbers. Owned by the
 * sampler thread (or a test). */
typedef struct {
    int64_t interval_ns;        /* the configured tick interval */
    double share;               /* budget as a fraction of one core; 0: none */
    uint32_t max_stride;        /* PN_BUDGET_MAX_INTERVAL_NS / interval, at least 1 */
    double cost_ns;             /* smoothed CPU per tick; < 0 before the first */
    uint32_t stride;            /* intervals from one tick to the next */
} pn_budget;

/* percent: of one core, 0 for no limit. */
void pn_budget_init(pn_budget *b, int64_t interval_ns, double percent);
/* A tick (and the sleeping since the previous one) cost cost_ns of the
 * sampler thread's CPU; returns the stride to the next tick (also in
 * b->stride): the fewest intervals that keep the smoothed cost per tick
 * within the budget of the time between ticks. */
uint32_t pn_budget_after_tick(pn_budget *b, int64_t cost_ns);

#endif
