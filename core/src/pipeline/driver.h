/* Drivers as the agent owns them (driver.c). Core and tests only. */
#ifndef PN_DRIVER_H
#define PN_DRIVER_H

#include <stdatomic.h>

#include "pyroscope_native.h"
#include "aggregation/grace.h"
#include "aggregation/store.h"
#include "sampling/sampler.h"

struct pn_driver {
    /* Set at creation, read-only afterwards. */
    pn_driver_opts o;
    char profile_type[32];
    int nvalues;
    pn_value_type types[PN_MAX_VALUES];
    pn_value_type period_type;
    int64_t period;
    double sample_rate;         /* the configured rate (Hz) */
    int report_thread_id, report_thread_name;
    int64_t max_delay_ns;
    pn_store *store;
    pn_sampler *sampler;        /* walker and rendezvous drivers */
    struct pn_mem *mem;         /* memory drivers (memory.c) */
    /* Rendezvous: label sets held by captures not yet consumed. */
    pn_grace_reader *capture_reader;
    struct pn_capture *slots;
    uint32_t nslots;
    /* Slots [0, slots_used) were ever claimed (only grows): the scans of
     * the tick and the drain stop there, not at nslots (1 024 by default,
     * most never used). Raised by claim(), read by everyone. */
    _Atomic uint32_t slots_used;
    size_t capture_bytes, buffers_bytes;
    uint8_t *buffers;
    int signo;
    int64_t min_cpu_ns, wait_ns;
    /* Thread timers (opts.thread_timers in oncpu mode): their interval. */
    int timers;
    int64_t timer_interval;
    /* 1 while housekeeping says the signal is not ours: nothing is sent,
     * timers are disarmed (new ones start disarmed). Written by the
     * sampler thread, read by threads that join. */
    atomic_int held;
    /* Rendezvous, sampler-thread-owned: the process's CPU clock, and the
     * sampler thread's own as its stats had it, at the last tick that read
     * the joined threads' clocks (-1: none since the start or a fork);
     * whether the last tick signalled a thread (then the next one reads
     * the threads' clocks without asking the process's first). */
    int64_t scan_proc_cpu, scan_own_cpu;
    int last_asked;
    /* Unique per rendezvous driver, never reused: a thread's slot pointer
     * from a driver already freed (the agent stopped while the thread
     * stayed joined) is recognised without reading freed memory. */
    uint64_t serial;

    /* Batch: written by the binding, read by the flusher. */
    _Atomic int64_t watermark;

    /* Counters: written by the recording side, read by anyone. */
    _Atomic uint64_t recorded, requested, captured, timeouts, discarded, busy, exited,
        below_min_cpu, busy_added;
};

pn_driver *pn_driver_new(const pn_driver_opts *o, const pn_config *c, pn_error *e);
int pn_driver_start(pn_driver *d, pn_error *e);
/* Stop its sampler thread, if any. Idempotent. */
void pn_driver_stop(pn_driver *d);
void pn_driver_free(pn_driver *d);
/* In a forked child, from the fork path: forget threads that are gone,
 * empty the store, restart the sampler thread. */
void pn_driver_fork_child(pn_driver *d);
/* The sampleRate and pprof period of a sealed period: the configured ones,
 * or what its ticks really were when the CPU budget throttled them.
 * Flusher. */
void pn_driver_period_rate(pn_driver *d, const pn_period *p, uint32_t *sample_rate,
                           int64_t *period);

#endif
