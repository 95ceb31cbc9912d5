/* The sampler: a native thread that ticks at N Hz on an absolute monotonic
 * schedule and asks the binding's walker for stacks.
 *
 * The tick path takes no lock and allocates nothing: the per-thread CPU
 * table is preallocated and owned by the sampler thread, the store is
 * lock-free for its single writer, and labels are read with atomic loads.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "sampling/budget.h"
#include "sampling/sampler.h"

#define CPU_SLOTS 8192 /* power of two; threads tracked per tick */

typedef struct {
    pid_t tid;          /* 0: free */
    int64_t cpu_ns;
} cpu_ent;

/* CPU clock readings of the previous tick and of the current one; swapped
 * every tick so threads that vanished are forgotten without a sweep. */
typedef struct {
    cpu_ent ent[CPU_SLOTS];
    uint32_t used[CPU_SLOTS];   /* slots to clear */
    uint32_t nused;
} cpu_table;

struct pn_tick {
    pn_sampler *s;
    pn_period *period;
    int64_t wall_ns;
    /* The labels of the thread begun last, read before its stack is: a
     * thread that changes labels while we walk it keeps the labels its
     * leaf frames ran under, not the next phase's. */
    pid_t labels_tid;
    const pn_labelset *labels;
};

struct pn_sampler {
    /* Set at creation, read-only afterwards. */
    pn_store *store;
    pn_sampler_opts o;
    pn_walker_fn walker;
    void *ctx;
    int64_t interval_ns;

    /* Owned by the thread that calls start/stop/fork hooks. */
    pthread_t thread;
    int running;

    /* Requests from control threads, polled by the sampler thread. */
    atomic_int stop;
    atomic_int park;
    atomic_int parked;
    /* Set (and its futex woken) after stop or park is, so the sampler's
     * sleep ends at once; cleared by the sampler thread. */
    atomic_int wake;

    /* Sampler-thread-owned (set by start before the thread exists). */
    int baseline; /* 1 until the first tick after a start took its readings */
    cpu_table *prev, *cur;
    cpu_table tables[2];
    /* CPU the threads a pooled sample stands for used since the last one
     * (pn_tick_pool_thread): none means an idle tick. */
    int64_t pool_ns;
    pn_budget budget;
    uint32_t skipped; /* intervals the budget skipped before the next tick */

    /* Written by the sampler thread, read by anyone. */
    _Atomic uint64_t ticks, missed, samples, idle_skipped, syscall_ticks, throttled;
    _Atomic int64_t cpu_ns;
    _Atomic uint32_t stride; /* the budget's, for effective_rate_hz */
};

static void sleep_until(int64_t deadline)
{
    struct timespec ts = pn_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The sampler's sleep until its next tick: ends at deadline, or at once
 * when a stop or park request sets s->wake. One wake-up per tick however
 * long the interval (sleeping in slices to see requests cost a slow tick
 * two or more wake-ups, each 15-30 us of CPU on a VM). Should the futex
 * be refused (a sandbox), it sleeps in 50 ms slices instead. */
static void sleep_until_woken(pn_sampler *s, int64_t deadline)
{
    struct timespec ts = pn_timespec(deadline);
    /* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline. */
    if (syscall(SYS_futex, (int *)&s->wake, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts, NULL,
                FUTEX_BITSET_MATCH_ANY) == 0 ||
        errno == ETIMEDOUT || errno == EAGAIN || errno == EINTR)
        return;
    int64_t slice = pn_clock_ns(CLOCK_MONOTONIC) + 50 * 1000000;
    sleep_until(deadline < slice ? deadline : slice);
}

/* A control thread, after setting stop or park. */
static void wake_sampler(pn_sampler *s)
{
    atomic_store(&s->wake, 1);
    syscall(SYS_futex, (int *)&s->wake, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

pn_sampler *pn_sampler_new(pn_store *store, const pn_sampler_opts *o, pn_walker_fn walker,
                           void *ctx, pn_error *e)
{
    if (!store || !walker)
        return pn_fail(e, PN_EINVAL, "sampler needs a store and a walker"), NULL;
    double hz = o && o->hz > 0 ? o->hz : 100;
    if (!(hz >= 0.1 && hz <= 10000))
        return pn_fail(e, PN_EINVAL, "sample_rate must be between 0.1 and 10000 Hz, got %g",
                       hz), NULL;
    double budget = o ? o->cpu_budget : 0;
    if (!(budget >= 0 && budget <= 100))
        return pn_fail(e, PN_EINVAL, "sampler_cpu_budget must be between 0 (no limit) and 100 "
                       "%% of one core, got %g", budget), NULL;
    pn_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return pn_fail(e, PN_ENOMEM, "out of memory creating the sampler"), NULL;
    s->store = store;
    if (o)
        s->o = *o;
    s->o.hz = hz;
    s->walker = walker;
    s->ctx = ctx;
    s->interval_ns = (int64_t)(1e9 / hz);
    atomic_store(&s->stride, 1); /* the budget itself starts with the sampler */
    s->prev = &s->tables[0];
    s->cur = &s->tables[1];
    return s;
}

static uint32_t cpu_home(pid_t tid) { return ((uint32_t)tid * 2654435761u) & (CPU_SLOTS - 1); }

static cpu_ent *cpu_find(cpu_table *t, pid_t tid, int insert)
{
    uint32_t slot = cpu_home(tid);
    for (uint32_t d = 0; d < CPU_SLOTS; d++, slot = (slot + 1) & (CPU_SLOTS - 1)) {
        cpu_ent *c = &t->ent[slot];
        if (c->tid == tid)
            return c;
        if (c->tid == 0) {
            if (!insert)
                return NULL;
            c->tid = tid;
            t->used[t->nused++] = slot;
            return c;
        }
    }
    return NULL;
}

static void cpu_clear(cpu_table *t)
{
    for (uint32_t i = 0; i < t->nused; i++)
        t->ent[t->used[i]].tid = 0;
    t->nused = 0;
}

pn_symbols *pn_tick_symbols(pn_tick *t) { return pn_period_symbols(t->period); }

const pn_sampler_opts *pn_tick_opts(const pn_tick *t) { return &t->s->o; }

int64_t pn_tick_wall_ns(const pn_tick *t) { return t->wall_ns; }

int64_t pn_sampler_interval_ns(const pn_sampler *s) { return s->interval_ns; }

int64_t pn_tick_cpu_delta(pn_tick *t, pid_t tid)
{
    int64_t now = pn_thread_cpu_ns(tid);
    if (now < 0)
        return -1;
    pn_sampler *s = t->s;
    cpu_ent *was = cpu_find(s->prev, tid, 0);
    cpu_ent *is = cpu_find(s->cur, tid, 1);
    if (is)
        is->cpu_ns = now;
    /* New thread (or a reused tid whose clock restarted): charge what it
     * used, but never more than the interval this tick stands for. On the
     * first tick every thread is new, and what they used before profiling
     * started belongs to no period: that tick only takes readings. */
    if (!was || now < was->cpu_ns) {
        if (s->baseline)
            return 0;
        return now < t->wall_ns ? now : t->wall_ns;
    }
    return now - was->cpu_ns;
}

int pn_tick_begin_thread(pn_tick *t, pid_t tid, int64_t *value_ns)
{
    /* Wall mode needs no CPU clock: reading another thread's clock is a
     * syscall (about a microsecond, a tenth of a stack), and the value is
     * the tick's wall time anyway. A walker that finds a stack unreadable
     * can still ask pn_tick_cpu_delta whether the thread exited. */
    if (t->s->o.oncpu) {
        int64_t d = pn_tick_cpu_delta(t, tid);
        if (d < 0)
            return 0; /* the thread is gone */
        if (d == 0) {
            atomic_fetch_add_explicit(&t->s->idle_skipped, 1, memory_order_relaxed);
            return 0;
        }
        *value_ns = d;
    } else {
        *value_ns = t->wall_ns;
    }
    t->labels_tid = tid;
    t->labels = pn_labels_of_thread(tid);
    return 1;
}

/* A pooled sample is recorded with the tick's wall interval, and the
 * period learns the CPU its threads used; the flusher scales the period's
 * values by CPU / wall (profile.c, scale_pooled). So the CPU total is what
 * the threads used, and the split between stacks follows the ticks, each
 * of equal weight: charging each tick the CPU used since the previous one
 * would also be right on average, but under contention those amounts swing
 * from nothing to several intervals and the split gets noisier (measured:
 * docs/benchmarks.md). */
void pn_tick_pool_thread(pn_tick *t, pid_t tid)
{
    if (!t->s->o.oncpu)
        return;
    int64_t d = pn_tick_cpu_delta(t, tid);
    if (d > 0) {
        t->s->pool_ns += d;
        pn_period_add_pooled(t->period, d, 0);
    }
}

int pn_tick_begin_pooled(pn_tick *t, pid_t tid, int64_t *value_ns)
{
    pn_sampler *s = t->s;
    if (!s->o.oncpu)
        return pn_tick_begin_thread(t, tid, value_ns);
    /* The sampled thread's own CPU joins the pool. Its clock not advancing
     * does not matter: it stands for the others too. Nobody used CPU since
     * the last pooled sample: an idle tick. */
    pn_tick_pool_thread(t, tid);
    if (s->pool_ns <= 0) {
        atomic_fetch_add_explicit(&s->idle_skipped, 1, memory_order_relaxed);
        return 0;
    }
    s->pool_ns = 0;
    *value_ns = t->wall_ns;
    pn_period_add_pooled(t->period, 0, t->wall_ns);
    t->labels_tid = tid;
    t->labels = pn_labels_of_thread(tid);
    return 1;
}

/* Record with labels base ∪ labels (labels win on equal keys). */
static void sample_merged(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                          int64_t value_ns, const char *thread_name, const pn_labelset *base,
                          const pn_labelset *labels)
{
    pn_sampler *s = t->s;
    uint32_t tname = PN_STR_EMPTY;
    if (s->o.report_thread_name && thread_name && thread_name[0])
        tname = pn_symbols_string(pn_period_symbols(t->period), thread_name,
                                  strlen(thread_name));
    int64_t values[PN_MAX_VALUES] = {value_ns, 1, 0, 0};
    pn_period_add_merged(t->period, frames, depth, base, labels,
                         s->o.report_thread_id ? (uint64_t)tid : 0, tname, values);
    atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
}

static const pn_labelset *thread_labels(const pn_tick *t, pid_t tid)
{
    return t->labels_tid == tid ? t->labels : pn_labels_of_thread(tid);
}

void pn_tick_sample_labels(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                           int64_t value_ns, const char *thread_name,
                           const pn_labelset *labels)
{
    sample_merged(t, tid, frames, depth, value_ns, thread_name, NULL, labels);
}

void pn_tick_sample(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                    int64_t value_ns, const char *thread_name)
{
    sample_merged(t, tid, frames, depth, value_ns, thread_name, NULL, thread_labels(t, tid));
}

void pn_tick_sample_context(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                            int64_t value_ns, const char *thread_name,
                            const pn_labelset *context)
{
    sample_merged(t, tid, frames, depth, value_ns, thread_name, thread_labels(t, tid),
                  context);
}

static void tick(pn_sampler *s, int64_t wall_ns)
{
    pn_store_write_begin(s->store);
    pn_tick t = {s, pn_store_active(s->store), wall_ns, 0, NULL};
    /* The period this tick writes to learns the rate it was taken at. */
    pn_period_add_tick(t.period, (uint64_t)(wall_ns / s->interval_ns), s->skipped);
    /* Every tick: the application may have replaced our fault handler. */
    if (!pn_fault_guard_arm(s->o.fault_guard))
        atomic_fetch_add_explicit(&s->syscall_ticks, 1, memory_order_relaxed);
    s->walker(s->ctx, &t);
    pn_store_write_end(s->store);
    s->baseline = 0;
    cpu_table *old = s->prev;
    s->prev = s->cur;
    s->cur = old;
    cpu_clear(s->cur);
}

static void *sampler_main(void *arg)
{
    pn_sampler *s = arg;
    /* due: the deadline the previous tick ran for (at first: the start);
     * a tick's wall value is the time from that deadline to its own. */
    int64_t due = pn_clock_ns(CLOCK_MONOTONIC);
    int64_t next = due + s->interval_ns;
    int64_t cpu_was = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    while (!atomic_load(&s->stop)) {
        /* Cleared before the requests are read: one made after this
         * read finds wake set again, and the sleep below returns at once. */
        atomic_store(&s->wake, 0);
        if (atomic_load(&s->park)) {
            atomic_store(&s->parked, 1);
            while (atomic_load(&s->park) && !atomic_load(&s->stop))
                sleep_until(pn_clock_ns(CLOCK_MONOTONIC) + 1000000);
            atomic_store(&s->parked, 0);
            due = pn_clock_ns(CLOCK_MONOTONIC);
            next = due + s->interval_ns;
            s->skipped = 0; /* the next tick covers one interval from here */
            continue;
        }
        int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
        if (now < next) {
            sleep_until_woken(s, next);
            continue;
        }
        /* Absolute schedule: deadlines advance by whole intervals, not
         * from "now", so the rate does not drift. Deadlines we slept
         * through are counted and folded into this tick's wall time, as
         * are those the budget skipped. */
        int64_t late = (now - next) / s->interval_ns;
        if (late > 0)
            atomic_fetch_add_explicit(&s->missed, (uint64_t)late, memory_order_relaxed);
        int64_t at = next + s->interval_ns * late;
        tick(s, at - due);
        due = at;
        atomic_fetch_add_explicit(&s->ticks, 1, memory_order_relaxed);
        /* The budget sees everything the thread used since the previous
         * tick (sleep wake-ups included) and spaces the next deadline. */
        int64_t cpu = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        uint32_t stride = pn_budget_after_tick(&s->budget, cpu - cpu_was);
        cpu_was = cpu;
        s->skipped = stride - 1;
        if (stride > 1)
            atomic_fetch_add_explicit(&s->throttled, stride - 1, memory_order_relaxed);
        atomic_store_explicit(&s->stride, stride, memory_order_relaxed);
        next = at + s->interval_ns * stride;
        atomic_store_explicit(&s->cpu_ns, cpu, memory_order_relaxed);
    }
    return NULL;
}

int pn_sampler_start(pn_sampler *s, pn_error *e)
{
    if (s->running)
        return pn_fail(e, PN_ESTATE, "sampler already running");
    atomic_store(&s->stop, 0);
    atomic_store(&s->park, 0);
    atomic_store(&s->parked, 0);
    atomic_store(&s->wake, 0);
    cpu_clear(s->prev);
    cpu_clear(s->cur);
    s->baseline = 1;
    s->pool_ns = 0;
    s->skipped = 0;
    pn_budget_init(&s->budget, s->interval_ns, s->o.cpu_budget);
    atomic_store(&s->stride, 1);
    pn_error ge = {0};
    if (s->o.fault_guard && pn_fault_guard_install(&ge) != 0)
        pn_log(PN_LOG_WARN, "%s; stacks are read with process_vm_readv (slower)", ge.msg);
    int rc = pn_thread_spawn(&s->thread, sampler_main, s, "pyroscope-smpl");
    if (rc != 0)
        return pn_fail(e, PN_ENOMEM, "cannot start the sampler thread: %s", strerror(rc));
    s->running = 1;
    return 0;
}

void pn_sampler_stop(pn_sampler *s)
{
    if (!s || !s->running)
        return;
    atomic_store(&s->stop, 1);
    wake_sampler(s);
    pthread_join(s->thread, NULL);
    s->running = 0;
}

void pn_sampler_free(pn_sampler *s)
{
    if (!s)
        return;
    pn_sampler_stop(s);
    free(s);
}

void pn_sampler_get_stats(const pn_sampler *s, pn_sampler_stats *out)
{
    pn_sampler *m = (pn_sampler *)s;
    out->ticks = atomic_load(&m->ticks);
    out->missed_ticks = atomic_load(&m->missed);
    out->samples = atomic_load(&m->samples);
    out->idle_skipped = atomic_load(&m->idle_skipped);
    out->syscall_ticks = atomic_load(&m->syscall_ticks);
    out->sampler_cpu_ns = atomic_load(&m->cpu_ns);
    out->budget_throttled_ticks = atomic_load(&m->throttled);
    out->effective_rate_hz = m->o.hz / atomic_load(&m->stride);
}

void pn_sampler_fork_prepare(pn_sampler *s)
{
    if (!s || !s->running)
        return;
    /* Park the thread between ticks so the child never inherits a store
     * period half-written. A walker never blocks, so this is short; the
     * bound only guards against a wedged walker. */
    atomic_store(&s->park, 1);
    wake_sampler(s);
    int64_t give_up = pn_clock_ns(CLOCK_MONOTONIC) + 1000000000;
    while (!atomic_load(&s->parked) && pn_clock_ns(CLOCK_MONOTONIC) < give_up)
        sleep_until(pn_clock_ns(CLOCK_MONOTONIC) + 100000);
}

void pn_sampler_fork_parent(pn_sampler *s)
{
    if (s)
        atomic_store(&s->park, 0);
}

void pn_sampler_fork_child(pn_sampler *s)
{
    if (!s || !s->running)
        return;
    /* The sampler thread did not survive fork(): forget it, start over (the
     * fork path cleared the grace announcements of threads that are gone). */
    s->running = 0;
    atomic_store(&s->ticks, 0);
    atomic_store(&s->missed, 0);
    atomic_store(&s->samples, 0);
    atomic_store(&s->idle_skipped, 0);
    atomic_store(&s->syscall_ticks, 0);
    atomic_store(&s->cpu_ns, 0);
    atomic_store(&s->throttled, 0);
    pn_store_reset(s->store, pn_clock_ns(CLOCK_REALTIME));
    pn_sampler_start(s, NULL);
}
