/*
 * The lock that stands in for the GIL where there is none.
 *
 * State this binding calls "GIL-protected" (the agent and walker, the last
 * stats, the stop threads, the log sink) is, on a free-threaded CPython, kept
 * by a critical section on one object instead. Like the GIL it is held while
 * the thread runs and let go whenever the thread detaches (a blocking call
 * inside Py_BEGIN_ALLOW_THREADS, or a wait for a busy lock or critical
 * section), so code written for the GIL keeps its meaning, including
 * "whatever calls Python may let another thread in". Nested uses on one
 * thread are counted, not locked twice. On GIL builds both calls do nothing.
 *
 *     module_lock l;
 *     module_lock_begin(&l);
 *     ...
 *     module_lock_end(&l);
 */
#ifndef PYROSCOPE_MODULE_LOCK_H
#define PYROSCOPE_MODULE_LOCK_H

#include <Python.h>

typedef struct {
#ifdef Py_GIL_DISABLED
    PyCriticalSection cs;
#endif
    int outer; /* this use took the lock */
} module_lock;

/* Module init (once, attached thread): 0, or -1 with a Python error. */
int module_lock_init(void);
/* Attached thread (the GIL held on GIL builds). */
void module_lock_begin(module_lock *l);
void module_lock_end(module_lock *l);

#endif
