/* Internal: starting the core's own threads. */
#ifndef PN_THREADS_H
#define PN_THREADS_H

#include <pthread.h>

/* pthread_create with all signals blocked in the new thread, then named
 * (names are cut to 15 bytes by the kernel). Returns pthread_create's code. */
int pn_thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);

#endif
