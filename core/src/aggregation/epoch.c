/* The sampler's tick counter, used as a grace period for memory that the
 * sampler may have loaded a pointer to (label sets, store periods). */
#include <stdatomic.h>
#include <time.h>

#include "pyroscope_native.h"
#include "aggregation/store.h"

/* Incremented by the sampling thread on tick entry and exit: odd while a tick
 * runs. Read by any thread. Sequentially consistent, so "publish a new
 * pointer, then read the counter" orders against "enter, then load". */
static _Atomic uint64_t tick_seq;

void pn_epoch_enter(void) { atomic_fetch_add(&tick_seq, 1); }

void pn_epoch_exit(void) { atomic_fetch_add(&tick_seq, 1); }

uint64_t pn_epoch_now(void) { return atomic_load(&tick_seq); }

int pn_epoch_passed(uint64_t seen)
{
    return (seen & 1) == 0 || atomic_load(&tick_seq) != seen;
}

void pn_epoch_wait(uint64_t seen)
{
    struct timespec ts = {0, 100 * 1000};
    while (!pn_epoch_passed(seen))
        nanosleep(&ts, NULL);
}
