/* A deadline for SIGTERM where our Python handler replaced the default
 * action (multiprocessing children: _fork_exit.py exports the last period,
 * then lets SIGTERM kill the process).
 *
 * A Python handler runs only when the main thread next runs bytecode. A
 * SIGTERM that lands just before the main thread blocks (Pool.terminate()
 * keeps the task queue's lock, and its workers block on it) is noted by
 * Python's C handler and never acted on: the worker, which the default
 * action would have killed, lives on and its parent waits for it forever
 * (seen under load). So each SIGTERM also posts a semaphore a thread of
 * ours waits on. While the Python handler has not run (our wrapper is
 * still the disposition), that thread re-sends SIGTERM to the main thread
 * every 100 ms: delivered there, it interrupts the blocking call, and
 * Python runs the handler (which exports the last period). If the process
 * still lives `grace` seconds after the first SIGTERM, the thread restores
 * the default action and sends SIGTERM again, and the process dies of it
 * as it would have without us.
 *
 * State: written by the main thread when arming (before the thread
 * starts), then read by the signal handler and the watch thread. A forked
 * child has no watch thread: it arms again (armed_pid differs). */
#include "term_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"

static struct sigaction python_act; /* Python's own SIGTERM handler */
static sem_t fired;
static double grace;
static pid_t armed_pid;
static pthread_t main_thread;

static void on_term(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (python_act.sa_flags & SA_SIGINFO)
        python_act.sa_sigaction(sig, si, uc);
    else if (python_act.sa_handler != SIG_DFL && python_act.sa_handler != SIG_IGN)
        python_act.sa_handler(sig);
    sem_post(&fired); /* async-signal-safe */
    errno = saved;
}

static void *watch_main(void *unused)
{
    (void)unused;
    while (sem_wait(&fired) != 0)
        ;
    for (double waited = 0; waited < grace; waited += 0.1) {
        struct sigaction cur;
        if (sigaction(SIGTERM, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
            cur.sa_sigaction == on_term)
            pthread_kill(main_thread, SIGTERM);
        struct timespec tick = {0, 100 * 1000 * 1000};
        while (nanosleep(&tick, &tick) != 0)
            ;
    }
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
    /* This thread blocks SIGTERM: it goes to a thread that does not, and
     * the default action ends the process. */
    kill(getpid(), SIGTERM);
    return NULL;
}

int py_term_deadline_arm(double grace_s)
{
    if (armed_pid == getpid())
        return 0;
    struct sigaction cur;
    if (sigaction(SIGTERM, NULL, &cur) != 0)
        return -1;
    if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN))
        return 0; /* nobody handles it: nothing to bound */
    if (sem_init(&fired, 0, 0) != 0)
        return -1;
    python_act = cur;
    grace = grace_s;
    main_thread = pthread_self();
    pthread_t t;
    int rc = pn_thread_spawn(&t, watch_main, NULL, "pyroscope-term");
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    pthread_detach(t);
    struct sigaction ours = cur;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_sigaction = on_term;
    if (sigaction(SIGTERM, &ours, NULL) != 0)
        return -1;
    armed_pid = getpid();
    return 0;
}
