/* The memory profile's window timer: a POSIX timer (CLOCK_MONOTONIC) that
 * sends our SIGPROF, marked (SI_TIMER with MEMORY_TIMER_MARK), to the Ruby
 * thread that scheduled it, when the next sampling window is due; our
 * handler then asks for memory_hooks.c's arm job (rb_postponed_job_trigger
 * on 3.3+, which runs it on whichever thread holds the GVL;
 * rb_postponed_job_register_one before, on the signalled thread). No
 * thread of ours and no lock: a first design woke a timer thread through a
 * condition variable twice per window, and the context switches cost
 * ~30 us of CPU per window on a loaded machine.
 *
 * One shot: a request no job answered (before 3.3 a job registered on a
 * thread that is blocked waits for it to wake; a signal may be lost) is
 * answered by the CPU sampler's job (running threads, 100 Hz), which runs
 * an arm overdue by RESEND_NS (memory_timer_overdue). Never armed while
 * our SIGPROF handler is replaced (the signal would reach the app's).
 *
 * Threads: GVL (set, start, stop, fork child); due is read by any. */
#include "native.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define RESEND_NS 20000000LL

static timer_t timer;
static int have_timer;          /* GVL */
static pid_t target;            /* the thread it signals */
static _Atomic int64_t due = INT64_MAX;

static struct timespec ts_of(int64_t ns)
{
    return (struct timespec){(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
}

static void drop(void)
{
    if (have_timer)
        timer_delete(timer);
    have_timer = 0;
}

/* A timer that signals the calling thread. */
static int aim_here(void)
{
    pid_t tid = pn_gettid();
    if (have_timer && target == tid)
        return 0;
    drop();
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGPROF;
    ev.sigev_value.sival_ptr = MEMORY_TIMER_MARK;
    ev.sigev_notify_thread_id = tid;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
        return -1;
    have_timer = 1;
    target = tid;
    return 0;
}

/* GVL: the next window at CLOCK_MONOTONIC at_ns, signalled to this
 * thread; INT64_MAX: none (a job answered, the window is open). */
void memory_timer_set(int64_t at_ns)
{
    atomic_store(&due, at_ns);
    if (at_ns == INT64_MAX)
        return; /* one shot: it fired already (a stray one opens a window early) */
    if (capture_handler_replaced_now() || aim_here() != 0)
        return; /* memory_timer_overdue still opens windows */
    struct itimerspec its = {{0, 0}, ts_of(at_ns > 0 ? at_ns : 1)};
    timer_settime(timer, TIMER_ABSTIME, &its, NULL);
}

/* The CPU sampler's job (GVL): 1 when a window is overdue by RESEND_NS
 * (its signal went to a thread that is blocked). */
int memory_timer_overdue(void)
{
    int64_t d = atomic_load_explicit(&due, memory_order_relaxed);
    return d != INT64_MAX && pn_clock_ns(CLOCK_MONOTONIC) - d > RESEND_NS;
}

void memory_timer_stop(void)
{
    atomic_store(&due, INT64_MAX);
    drop();
}

/* Fork child: the parent's timers are not inherited; the first window is
 * due now. */
void memory_timer_after_fork_child(void)
{
    have_timer = 0;
    memory_timer_set(pn_clock_ns(CLOCK_MONOTONIC));
}
