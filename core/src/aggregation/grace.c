/* Grace periods for memory a recording thread may still read (grace.h). */
#include <stdatomic.h>
#include <time.h>

#include "aggregation/grace.h"

struct pn_grace_reader {
    /* The oldest generation this reader may hold pointers of; 0: none.
     * Written by the reader's thread, read by anyone. */
    _Atomic uint64_t held;
    /* Claimed by a control thread with a CAS; 0: free. */
    atomic_int used;
};

/* Generations start at 1 so that 0 can mean "holds nothing". */
static _Atomic uint64_t generation = 1;
static pn_grace_reader readers[PN_GRACE_READERS];
/* One past the highest slot ever claimed, so scans stay short. */
static atomic_int nreaders;

pn_grace_reader *pn_grace_reader_new(pn_error *e)
{
    for (int i = 0; i < PN_GRACE_READERS; i++) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&readers[i].used, &free_, 1)) {
            atomic_store(&readers[i].held, 0);
            int n = atomic_load(&nreaders);
            while (n < i + 1 && !atomic_compare_exchange_weak(&nreaders, &n, i + 1))
                ;
            return &readers[i];
        }
    }
    return pn_fail(e, PN_ELIMIT, "more than %d recording drivers at once", PN_GRACE_READERS),
           NULL;
}

void pn_grace_reader_free(pn_grace_reader *r)
{
    if (!r)
        return;
    atomic_store(&r->held, 0);
    atomic_store(&r->used, 0);
}

uint64_t pn_grace_now(void) { return atomic_load(&generation); }

void pn_grace_enter(pn_grace_reader *r) { atomic_store(&r->held, atomic_load(&generation)); }

void pn_grace_exit(pn_grace_reader *r) { atomic_store(&r->held, 0); }

void pn_grace_hold(pn_grace_reader *r, uint64_t gen) { atomic_store(&r->held, gen); }

uint64_t pn_grace_tag(void) { return atomic_fetch_add(&generation, 1); }

int pn_grace_reader_passed(const pn_grace_reader *r, uint64_t tag)
{
    uint64_t h = atomic_load(&((pn_grace_reader *)r)->held);
    return h == 0 || h > tag;
}

int pn_grace_passed(uint64_t tag)
{
    int n = atomic_load(&nreaders);
    for (int i = 0; i < n; i++) {
        if (!pn_grace_reader_passed(&readers[i], tag))
            return 0;
    }
    return 1;
}

void pn_grace_reader_wait(const pn_grace_reader *r, uint64_t tag)
{
    struct timespec ts = {0, 50 * 1000};
    while (!pn_grace_reader_passed(r, tag))
        nanosleep(&ts, NULL);
}

void pn_grace_after_fork(void)
{
    int n = atomic_load(&nreaders);
    for (int i = 0; i < n; i++)
        atomic_store(&readers[i].held, 0);
}
