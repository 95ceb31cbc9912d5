/* The sampler thread object and the fault guard behind pn_safe_read.
 * Core and tests only. */
#ifndef PN_SAMPLER_H
#define PN_SAMPLER_H

#include "pyroscope_native.h"
#include "support/atfork.h"
#include "aggregation/store.h"

/* ------------------------------------------------------------- fault guard */

/* The fast path of pn_safe_read (fault_guard.c): plain loads, with a
 * SIGSEGV/SIGBUS handler that turns a fault inside a guarded copy into a
 * failed read and passes every other fault on to the handler it replaced.
 * install: control threads; installs the handler once per process (it is
 * never removed; later calls do nothing). arm: per calling thread, 1 to
 * use the fast path from now on if our handler is still the installed one
 * (returns whether it is; the sampler re-arms every tick), 0 for syscall
 * reads. copy: an armed thread; -1 when a byte of [src, src+n) is
 * unreadable, 1 when the guard cannot be used for this read (a handler is
 * being changed, or was and is no longer ours: the thread is disarmed);
 * read another way. change_begin/_end (pyroscope_native.h) bracket a
 * handler change. after_fork: in a forked child. */
int pn_fault_guard_install(pn_error *e);
int pn_fault_guard_arm(int on);
int pn_fault_guard_armed(void);
int pn_fault_guard_copy(void *dst, const void *src, size_t n);
void pn_fault_guard_after_fork(void);
/* Fork path: thread names' lock (held across fork), and in the child the
 * cached pid safe reads use. */
void pn_thread_names_fork_prepare(void);
void pn_thread_names_fork_release(void);
void pn_safe_read_after_fork(void);

/* --------------------------------------------------------------- sampler */

typedef struct pn_sampler pn_sampler;

pn_sampler *pn_sampler_new(pn_store *store, const pn_sampler_opts *o,
                           pn_walker_fn walker, void *ctx, pn_error *e);
int pn_sampler_start(pn_sampler *s, pn_error *e);
/* Stops and joins the thread (bounded by one tick). Idempotent. */
void pn_sampler_stop(pn_sampler *s);
void pn_sampler_free(pn_sampler *s);
void pn_sampler_get_stats(const pn_sampler *s, pn_sampler_stats *out);
int64_t pn_sampler_interval_ns(const pn_sampler *s);
/* Fork support (called from the fork path, pipeline/fork.c; exposed for
 * tests). prepare parks the thread between ticks; parent resumes it; child
 * forgets the dead thread, resets its state and starts a new one. */
void pn_sampler_fork_prepare(pn_sampler *s);
void pn_sampler_fork_parent(pn_sampler *s);
void pn_sampler_fork_child(pn_sampler *s);

#endif
