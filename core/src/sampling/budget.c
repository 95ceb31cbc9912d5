/* The sampler's CPU budget: ticks go `stride` configured intervals apart,
 * with stride the smallest whole number for which the cost of a tick fits
 * in budget × stride × interval. A whole number keeps the deadlines on the
 * configured grid, so the absolute schedule and the folding of missed
 * deadlines into the next tick's value work as without a budget.
 *
 * The cost is smoothed: it rises fast (half the step at once, so a sudden
 * burst of threads is throttled within a few ticks) and falls slowly (an
 * eighth, so a cheap tick or two do not bring the full rate back for the
 * next expensive one). */
#include <math.h>

#include "sampling/budget.h"

void pn_budget_init(pn_budget *b, int64_t interval_ns, double percent)
{
    b->interval_ns = interval_ns > 0 ? interval_ns : 1;
    b->share = percent > 0 ? percent / 100 : 0;
    int64_t max = PN_BUDGET_MAX_INTERVAL_NS / b->interval_ns;
    b->max_stride = max < 1 ? 1 : max > UINT32_MAX ? UINT32_MAX : (uint32_t)max;
    b->cost_ns = -1;
    b->stride = 1;
}

uint32_t pn_budget_after_tick(pn_budget *b, int64_t cost_ns)
{
    if (b->share <= 0)
        return b->stride = 1;
    double c = cost_ns > 0 ? (double)cost_ns : 0;
    if (b->cost_ns < 0)
        b->cost_ns = c;
    else
        b->cost_ns += (c - b->cost_ns) / (c > b->cost_ns ? 2 : 8);
    double need = ceil(b->cost_ns / (b->share * (double)b->interval_ns));
    b->stride = need <= 1 ? 1 : need >= b->max_stride ? b->max_stride : (uint32_t)need;
    return b->stride;
}
