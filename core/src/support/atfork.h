/* The one fork path's registration, for every layer that takes a lock a
 * forked child needs (label slots, thread names, the agent). */
#ifndef PN_ATFORK_H
#define PN_ATFORK_H

/* Register the fork path with pthread_atfork, once per process. Any
 * thread. Defined by the fork path itself (pipeline/fork.c), which knows
 * every layer's lock; declared here so lower layers need not include the
 * pipeline's headers: the one call that goes up the layers. */
void pn_fork_register(void);

#endif
