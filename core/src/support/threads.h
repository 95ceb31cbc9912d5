/* Internal: starting the core's own threads. */
#ifndef PN_THREADS_H
#define PN_THREADS_H

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

/* pthread_create with all signals blocked in the new thread, then named
 * (names are cut to 15 bytes by the kernel). Returns pthread_create's code. */
int pn_thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);

/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines. */
void pn_cond_init_monotonic(pthread_cond_t *cv);

/* The kernel's CPU clock of thread tid of this process. */
clockid_t pn_thread_cpu_clock(pid_t tid);

#endif
