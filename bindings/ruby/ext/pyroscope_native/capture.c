/* The SIGPROF handler: capture the running thread's Ruby stack into its
 * slot, on that thread, when the core's sampler asked for it.
 *
 * Guards, in order (each learned from a profiler that crashed without it):
 * the VM has exited; the thread is not a Ruby thread; we run on the
 * alternate signal stack (the GC compaction read barrier's SEGV handler
 * was interrupted); a GC step or mark phase is under way or starts while
 * we capture (gc_guard.c). A capture that fails a guard is abandoned (the
 * core counts it as discarded). Only atomics, thread-locals and
 * rb_profile_frames run here; the job that records is registered with
 * rb_postponed_job_register_one (3.1/3.2, legal from a Ruby thread's
 * handler) or rb_postponed_job_trigger (3.3+).
 *
 * In oncpu mode each joined thread's own CPU timer sends the signal
 * (thread_timers): the siginfo goes to pn_capture_begin_timer, which
 * tells a timer's signal from the sampler's.
 *
 * Fallback (YJIT before 3.3, M:N threads): the handler only registers the
 * job, and the job captures on the thread that runs it (the GVL holder),
 * as stackprof does there: safepoint-biased, but safe. */
#include "native.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <ruby/debug.h>

/* Written under the GVL, read by the handler. */
static atomic_int vm_alive = 1;
static atomic_int in_job_mode;
/* Counters: added to by handlers, read by anyone. */
static _Atomic uint64_t torn, altstack, in_gc;

uint64_t capture_gc(void) { return atomic_load(&in_gc); }
/* CPU spent capturing in handlers and recording in jobs (the thread's CPU
 * clock: a wall clock would count the time the thread was preempted): the
 * per-sample cost the application thread pays. Reading a thread's CPU
 * clock is a system call (0.5-0.7 us here, more than a capture), so only
 * one handler and one job in MEASURE_EVERY is timed, and the totals are
 * estimated from those: timed ns x all / timed. */
#define MEASURE_EVERY 16
static _Atomic uint64_t handler_timed_ns, handler_timed, handler_all;
static _Atomic uint64_t job_timed_ns, job_timed, job_all;
/* Per thread: handlers and jobs seen, to pick the ones timed. */
static __thread unsigned tl_handlers __attribute__((tls_model("initial-exec")));
static __thread unsigned tl_jobs __attribute__((tls_model("initial-exec")));

static uint64_t estimate(_Atomic uint64_t *ns, _Atomic uint64_t *timed, _Atomic uint64_t *all)
{
    uint64_t t = atomic_load(timed);
    return t ? (uint64_t)((double)atomic_load(ns) * (double)atomic_load(all) / (double)t) : 0;
}

uint64_t capture_handler_ns(void) { return estimate(&handler_timed_ns, &handler_timed, &handler_all); }
uint64_t capture_job_ns(void) { return estimate(&job_timed_ns, &job_timed, &job_all); }

/* The handler's one system call that could fail, so errno is kept here
 * rather than around every handler run (errno's address is a call into
 * libc: one more page to touch per sample). */
HANDLER_PATH static int64_t cpu_ns(void)
{
    int saved = errno;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    errno = saved;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Add one timed span (t0 >= 0) to a total, and count the span either way. */
HANDLER_PATH static void account(int64_t t0, _Atomic uint64_t *ns, _Atomic uint64_t *timed, _Atomic uint64_t *all)
{
    if (t0 >= 0) {
        atomic_fetch_add_explicit(ns, (uint64_t)(cpu_ns() - t0), memory_order_relaxed);
        atomic_fetch_add_explicit(timed, 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(all, 1, memory_order_relaxed);
}

uint64_t capture_torn(void) { return atomic_load(&torn); }
uint64_t capture_altstack(void) { return atomic_load(&altstack); }
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
static rb_postponed_job_handle_t job_handle = POSTPONED_JOB_HANDLE_INVALID;
#endif

/* Fallback mode: the request the handler claimed, for the job that runs
 * on this thread to fill (3.1/3.2 run it on the thread that registered
 * it), and the start it belongs to (a claim from an earlier start is
 * stale: its driver is gone). */
static __thread pn_capture *tl_claimed __attribute__((tls_model("initial-exec")));
static __thread unsigned tl_claimed_epoch __attribute__((tls_model("initial-exec")));
static atomic_uint epoch;       /* bumped by every start (GVL) */

void capture_vm_exited(void) { atomic_store(&vm_alive, 0); }
void capture_set_in_job(int on)
{
    atomic_fetch_add(&epoch, 1);
    atomic_store(&in_job_mode, on);
}
int capture_in_job(void) { return atomic_load(&in_job_mode); }

size_t capture_bytes_for(int max_depth)
{
    return sizeof(capture_header) + (size_t)max_depth * (sizeof(VALUE) + sizeof(int));
}

HANDLER_PATH static void schedule_job(void)
{
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    rb_postponed_job_trigger(job_handle);
#else
    rb_postponed_job_register_one(0, capture_job, NULL);
#endif
}

/* Whether this handler runs on the thread's alternate signal stack: it
 * interrupted a handler that runs there (the GC compaction read barrier's
 * SEGV handler), where the VM is mid-change. */
HANDLER_PATH static int on_alt_stack(const rthread *r)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    return sp >= r->altstack_lo && sp < r->altstack_hi;
}

/* Capture into c's buffer for the thread's registry entry r. Returns 1
 * when the capture is sound (and pinned), 0 when it must be abandoned. */
HANDLER_PATH static int fill(pn_capture *c, rthread *r)
{
    size_t size;
    uint8_t *buf = pn_capture_buffer(c, &size);
    capture_header *h = (capture_header *)buf;
    VALUE *frames = (VALUE *)(buf + sizeof *h);
    int max = (int)((size - sizeof *h) / (sizeof(VALUE) + sizeof(int)));
    if (max > g_max_depth + 1)
        max = g_max_depth + 1;
    int *lines = (int *)(frames + max);
    uint64_t g0 = gc_guard_cycle();
    h->owner = r;
    h->truncated = 0;
    if (g0 & 1) {
        /* The thread is running a GC step: the stack is not safe to read,
         * but the CPU is the GC's. Charge it to a GC frame (as stackprof
         * does) rather than lose it. */
        h->depth = 0;
        h->lines_at = 0;
        h->in_gc = 1;
        atomic_fetch_add_explicit(&in_gc, 1, memory_order_relaxed);
        return 1;
    }
    h->in_gc = 0;
    int n = rb_profile_frames(0, max, frames, lines);
    if (n <= 0)
        return 0;
    h->truncated = n > g_max_depth;
    h->depth = n > g_max_depth ? g_max_depth : n;
    /* The lines stay where rb_profile_frames wrote them (the consumer
     * reads lines_at): moving them next to the frames cost a call into
     * libc, one more page to touch per sample. */
    h->lines_at = max;
    atomic_store(&r->pin_frames, frames);
    atomic_store(&r->pin_depth, h->depth);
    h->gc_cycle = g0;
    if (gc_guard_cycle() != g0) {
        atomic_fetch_add_explicit(&torn, 1, memory_order_relaxed);
        atomic_store(&r->pin_depth, 0);
        atomic_store(&r->pin_frames, NULL);
        return 0;
    }
    return 1;
}

HANDLER_PATH static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    /* errno: nothing below sets it (no call here fails: cpu_ns keeps it
     * around its clock read, and a thread adopting its registry entry
     * makes only calls that cannot fail), so it is not saved here. */
    handler_enter();
    pn_driver *d = atomic_load(&g_driver);
    if (!d || !atomic_load(&vm_alive) || !ruby_native_thread_p())
        goto out;
    /* The memory window timer's request (memory_timer.c), before the CPU
     * timers' (also SI_TIMER, with no value). */
    if (si && si->si_code == SI_TIMER && si->si_value.sival_ptr == MEMORY_TIMER_MARK) {
        memory_arm_from_handler();
        goto out;
    }
    rthread *r = threads_current();
    if (!r)
        goto out;
    if (atomic_load(&in_job_mode)) {
        /* Claim the request now (the sampler stops waiting for it); the
         * job fills it at the next safepoint. */
        if (!tl_claimed || tl_claimed_epoch != atomic_load(&epoch)) {
            tl_claimed = pn_capture_begin_timer(d, si);
            tl_claimed_epoch = atomic_load(&epoch);
        }
        if (tl_claimed)
            schedule_job();
        goto out;
    }
    pn_capture *c = pn_capture_begin_timer(d, si);
    if (!c)
        goto out;
    int64_t t0 = tl_handlers++ % MEASURE_EVERY == 0 ? cpu_ns() : -1;
    if (on_alt_stack(r)) {
        atomic_fetch_add_explicit(&altstack, 1, memory_order_relaxed);
        pn_capture_abandon(c);
        goto out;
    }
    if (!fill(c, r)) {
        pn_capture_abandon(c);
        goto out;
    }
    /* The job first: committing may wake the sampler, which may take this
     * CPU from us. */
    schedule_job();
    pn_capture_commit(c, capture_bytes_for(g_max_depth), labels_for_handler());
    account(t0, &handler_timed_ns, &handler_timed, &handler_all);
out:
    handler_exit();
}

/* The job (GVL): in fallback mode capture here first, then record. */
void capture_job(void *unused)
{
    (void)unused;
    pn_driver *d = atomic_load(&g_driver);
    if (!d || !atomic_load(&vm_alive))
        return;
    rthread *r = threads_current();
    if (atomic_load(&in_job_mode) && r && tl_claimed &&
        tl_claimed_epoch == atomic_load(&epoch)) {
        pn_capture *c = tl_claimed;
        tl_claimed = NULL;
        if (fill(c, r))
            pn_capture_commit(c, capture_bytes_for(g_max_depth), labels_for_handler());
        else
            pn_capture_abandon(c);
    }
    if (memory_timer_overdue())
        memory_arm_overdue();
    if (g_thread_names)
        threads_refresh_name();
    int64_t t0 = tl_jobs++ % MEASURE_EVERY == 0 ? cpu_ns() : -1;
    symbolize_drain(d);
    account(t0, &job_timed_ns, &job_timed, &job_all);
    log_drain();
}

/* Someone replaced our SIGPROF handler after start (trap("PROF") or a C
 * library): our handler no longer runs, so nothing is captured, and the
 * driver stops sending SIGPROF (the app's handler, or SIG_DFL once the
 * app is done, would get it). Noticed by the sampler thread's
 * housekeeping (at most once a second), logged once per start, counted
 * each time ours is found replaced. Putting ours back over the app's
 * would break the app's: we do not. Written by the sampler thread (and
 * reset by capture_install under the GVL), read by stats. */
static atomic_uint_fast64_t replaced_count;
static atomic_int replaced_now, replaced_logged;
static _Atomic int64_t next_check_ns;

int capture_check_handler(void *unused)
{
    (void)unused;
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    if (now < atomic_load(&next_check_ns))
        return atomic_load(&replaced_now);
    atomic_store(&next_check_ns, now + 1000000000LL);
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) != 0)
        return atomic_load(&replaced_now);
    int ours = (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_signal;
    if (ours) {
        atomic_store(&replaced_now, 0);
        return 0;
    }
    /* The driver stops signalling: the app's handler gets no more of
     * ours, and an app that resets SIGPROF to its default is not killed
     * by our timers. */
    if (atomic_exchange(&replaced_now, 1))
        return 1;
    atomic_fetch_add(&replaced_count, 1);
    if (!atomic_exchange(&replaced_logged, 1))
        pn_log(PN_LOG_ERROR, "the SIGPROF handler was replaced after Pyroscope started "
               "(trap(\"PROF\") or a C library): no stacks are captured and no SIGPROF is "
               "sent any more; Pyroscope.stop, or do not take SIGPROF while profiling");
    return 1;
}

uint64_t capture_handler_replaced(void) { return atomic_load(&replaced_count); }
int capture_handler_replaced_now(void) { return atomic_load(&replaced_now); }

int capture_install(pn_error *e)
{
    atomic_store(&replaced_now, 0);
    atomic_store(&replaced_logged, 0);
    atomic_store(&replaced_count, 0);
    atomic_store(&next_check_ns, 0);
    struct sigaction old;
    if (sigaction(SIGPROF, NULL, &old) != 0)
        return pn_fail(e, PN_EIO, "cannot read the SIGPROF handler: %s", strerror(errno));
    int ours = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_signal;
    if (!ours && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
        return pn_fail(e, PN_ESTATE,
                       "another SIGPROF handler is installed (another profiler, such as "
                       "stackprof, is running): stop it before starting pyroscope");
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    if (job_handle == POSTPONED_JOB_HANDLE_INVALID)
        job_handle = rb_postponed_job_preregister(0, capture_job, NULL);
#endif
    if (ours)
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0)
        return pn_fail(e, PN_EIO, "cannot install the SIGPROF handler: %s", strerror(errno));
    return 0;
}

/* Before exec: no SIGPROF may stay pending for the new program (it would
 * die of "Profiling timer expired"). Ignoring a signal discards pending
 * ones; then the default comes back, for the program exec runs. */
void capture_before_exec(void)
{
    struct sigaction cur;
    /* Another profiler's handler is not ours to reset (if exec fails, its
     * timer would then kill the process). */
    if (sigaction(SIGPROF, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
        cur.sa_sigaction != on_signal)
        return;
    struct sigaction ign, dfl;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    dfl = ign;
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPROF, &ign, NULL);
    sigaction(SIGPROF, &dfl, NULL);
}
