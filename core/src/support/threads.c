/* The threads of this process: kernel ids, per-thread CPU clocks, and how
 * the core starts its own threads. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pyroscope_native.h"

pid_t pn_gettid(void) { return (pid_t)syscall(SYS_gettid); }

void pn_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* The kernel's clock id for "CPU time of thread tid" (what glibc's
 * pthread_getcpuclockid builds): usable for any thread of ours, including
 * ones we hold no pthread_t for, such as an interpreter's threads. */
clockid_t pn_thread_cpu_clock(pid_t tid)
{
    enum { CPUCLOCK_SCHED = 2, CPUCLOCK_PERTHREAD = 4 };
    return (clockid_t)(((unsigned)~tid << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED);
}

int64_t pn_thread_cpu_ns(pid_t tid)
{
    struct timespec ts;
    if (tid <= 0 || clock_gettime(pn_thread_cpu_clock(tid), &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int pn_thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg, const char *name)
{
    /* Block every signal in our threads so the application's handlers run
     * only on the application's own threads; all but the synchronous
     * faults. Those go to the faulting thread whatever its mask, and a
     * blocked one kills the process without running any handler: neither
     * the fault guard (the sampler's reads) nor a crash reporter. */
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0 && name)
        pthread_setname_np(*t, name);
    return rc;
}
