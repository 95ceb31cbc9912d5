/* The one fork path: every lock of the core is taken before fork() and
 * released (parent) or re-created (child) after it, in one fixed order, so
 * a child never inherits a lock held by a thread that does not exist in
 * it, and no handler depends on which part of the core was used first.
 *
 * Order (outermost first): the agent (its mutex, the queue's, the sampler
 * threads parked between ticks), thread names, labels (registry, intern),
 * the HTTP relay's slot.
 * Application threads take at most one of these at a time, and core
 * threads never take a later one while holding an earlier one, so taking
 * them in this order cannot deadlock.
 *
 * Bindings call pn_fork_* from their runtime's own hooks; pthread_atfork
 * runs them too for code that forks from C. Whichever comes first does the
 * work: `in_fork` makes the second call a no-op. Only the forking thread
 * runs these.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "pyroscope_native.h"
#include "aggregation/grace.h"
#include "aggregation/store.h"
#include "pipeline/fork.h"
#include "sampling/sampler.h"

/* 1 between prepare and parent/child. Written by the forking thread (and
 * inherited by the child, where that thread is the only one). */
static atomic_int in_fork;
static pthread_once_t registered = PTHREAD_ONCE_INIT;

/* Bindings' hooks: appended by pn_fork_hook (a slot is claimed with a CAS
 * and published by `nhooks`), read by the forking thread. */
#define MAX_HOOKS 4
typedef struct {
    void (*prepare)(void), (*parent)(void), (*child)(void);
} hook;
static hook hooks[MAX_HOOKS];
static atomic_int nclaimed, nhooks;

void pn_fork_hook(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    pn_fork_register();
    int i = atomic_fetch_add(&nclaimed, 1);
    if (i >= MAX_HOOKS) {
        pn_log(PN_LOG_ERROR, "more than %d fork hooks; this one is ignored", MAX_HOOKS);
        return;
    }
    hooks[i] = (hook){prepare, parent, child};
    int want = i;
    while (!atomic_compare_exchange_weak(&nhooks, &want, i + 1))
        want = i;
}

void pn_fork_prepare(void)
{
    if (atomic_exchange(&in_fork, 1))
        return;
    int n = atomic_load(&nhooks);
    for (int i = 0; i < n; i++)
        if (hooks[i].prepare)
            hooks[i].prepare();
    pn_agent_fork_prepare();
    pn_thread_names_fork_prepare();
    pn_labels_fork_prepare();
    pn_http_relay_fork_prepare();
}

void pn_fork_parent(void)
{
    if (!atomic_exchange(&in_fork, 0))
        return;
    pn_http_relay_fork_parent();
    pn_labels_fork_parent();
    pn_thread_names_fork_release();
    pn_agent_fork_parent();
    for (int i = atomic_load(&nhooks) - 1; i >= 0; i--)
        if (hooks[i].parent)
            hooks[i].parent();
}

void pn_fork_child(void)
{
    if (!atomic_exchange(&in_fork, 0))
        return;
    pn_safe_read_after_fork();
    /* Readers on threads that did not survive hold nothing now. */
    pn_grace_after_fork();
    pn_labels_fork_child();
    pn_thread_names_fork_release();
    pn_http_relay_fork_child();
    for (int i = atomic_load(&nhooks) - 1; i >= 0; i--)
        if (hooks[i].child)
            hooks[i].child();
    pn_agent_fork_child();
}

static void register_once(void) { pthread_atfork(pn_fork_prepare, pn_fork_parent, pn_fork_child); }

void pn_fork_register(void) { pthread_once(&registered, register_once); }
