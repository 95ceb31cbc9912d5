/* See module_lock.h. */
#include "module_lock.h"

#ifdef Py_GIL_DISABLED

/* Made once at module init, never freed: the object whose critical
 * section is the lock. */
static PyObject *lock_object;
/* Uses of the lock the thread is inside (it holds the lock while > 0 and
 * attached). */
static _Thread_local int depth;

int module_lock_init(void)
{
    if (!lock_object)
        lock_object = PyList_New(0);
    return lock_object ? 0 : -1;
}

void module_lock_begin(module_lock *l)
{
    l->outer = depth++ == 0;
    if (l->outer)
        PyCriticalSection_Begin(&l->cs, lock_object);
}

void module_lock_end(module_lock *l)
{
    depth--;
    if (l->outer)
        PyCriticalSection_End(&l->cs);
}

#else

int module_lock_init(void) { return 0; }

void module_lock_begin(module_lock *l) { l->outer = 0; }

void module_lock_end(module_lock *l) { (void)l; }

#endif
