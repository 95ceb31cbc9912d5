/* The memory profile's window timer: a thread of ours that sleeps until
 * the next sampling window is due, then asks a Ruby thread to open it
 * (memory_hooks.c's arm job, at that thread's next safepoint).
 *
 * Ruby 3.3+: rb_postponed_job_trigger, which any thread may call. Before
 * 3.3 a postponed job can only be registered on a Ruby thread, so the
 * timer sends SIGPROF, marked as ours (SI_QUEUE with MEMORY_ARM_SIGVAL), to
 * the Ruby thread last seen running (a memory job's, or one the CPU
 * sampler caught on CPU), and our handler registers the job there. Never
 * while our SIGPROF handler is replaced (the signal would reach the app's,
 * or kill the process). A request no job answered goes again after
 * RESEND_NS, to whichever thread runs then.
 *
 * Threads: due and quit are under mu (the GVL side sets them, the timer
 * thread reads); the last running thread is an atomic. */
#include "native.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RESEND_NS 20000000LL
#define IDLE_NS 1000000000LL

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int64_t due = INT64_MAX;
static int quit, running;
static pthread_t thread;
static void (*fire)(void);
static atomic_int running_tid; /* < 3.3: the thread the signal goes to */

void memory_timer_note_thread(pid_t tid) { atomic_store_explicit(&running_tid, tid, memory_order_relaxed); }

#ifndef HAVE_RB_POSTPONED_JOB_TRIGGER
/* SIGPROF, marked, to the Ruby thread last seen running (a thread that
 * has exited: ESRCH; a tid reused by a non-Ruby thread: our handler
 * ignores it there). */
static void signal_running_thread(void)
{
    pid_t tid = atomic_load(&running_tid);
    if (!tid || capture_handler_replaced_now())
        return;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGPROF;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = MEMORY_ARM_SIGVAL;
    int saved = errno;
    (void)syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGPROF, &si);
    errno = saved;
}
#endif

static void *timer_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&mu);
    while (!quit) {
        int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
        if (due <= now) {
            due = now + RESEND_NS;
            pthread_mutex_unlock(&mu);
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
            fire();
#else
            (void)fire;
            signal_running_thread();
#endif
            pthread_mutex_lock(&mu);
            continue;
        }
        int64_t until = due - now > IDLE_NS ? now + IDLE_NS : due;
        struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* GVL: the next window at CLOCK_MONOTONIC at_ns (INT64_MAX: none until
 * told; a job answered the last request). */
void memory_timer_set(int64_t at_ns)
{
    pthread_mutex_lock(&mu);
    due = at_ns;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static int init_sync(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&cv, &a);
    pthread_condattr_destroy(&a);
    pthread_mutex_init(&mu, NULL);
    return rc;
}

/* GVL: fn runs on the timer thread (3.3+: it must be callable from any
 * thread); the first window is due now. */
int memory_timer_start(void (*fn)(void))
{
    if (running)
        return 0;
    if (init_sync() != 0)
        return -1;
    fire = fn;
    quit = 0;
    due = pn_clock_ns(CLOCK_MONOTONIC);
    if (pn_thread_spawn(&thread, timer_main, NULL, "pyroscope-memwin") != 0)
        return -1;
    running = 1;
    return 0;
}

void memory_timer_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&mu);
    quit = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    running = 0;
}

/* Fork child (only this thread runs): the timer thread is gone, its lock
 * may have been held; a new one starts, the first window due now. */
void memory_timer_after_fork_child(void)
{
    if (!running)
        return;
    running = 0;
    atomic_store(&running_tid, pn_gettid());
    if (memory_timer_start(fire) != 0)
        pn_log(PN_LOG_ERROR, "after fork: the memory profile's window timer did not restart");
}
