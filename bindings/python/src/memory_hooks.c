/* The memory profile's allocator hooks (see memory_hooks.h).
 *
 * State: written with the GIL held by start/stop, read by the hooks, which
 * run with the GIL held too, so no hook runs while it changes. A hook
 * calls the wrapped allocator, then the core (atomics only: no lock, no
 * allocation) and, for the one allocation in ~512 KiB that is sampled,
 * copies the thread's frames and reads its labels (plain reads of its own
 * thread state, the ContextVar's value): no Python code, no allocation,
 * the application's pending exception untouched. */
#define Py_BUILD_CORE 1
#include "cpython_layout.h"

#include "memory_hooks.h"
#include "context_labels.h"

#include <string.h>

static pn_driver *driver;
static py_walker *mem_walker;

#ifndef Py_GIL_DISABLED /* the hooks: see py_mem_start */

/* Both domains' previous allocators, as each hook's ctx. */
static PyMemAllocatorEx prev_obj, prev_mem;
static int installed;     /* our hooks are in the chain (maybe under another's) */

static PyThreadState *this_thread(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    return _PyThreadState_UncheckedGet();
#endif
}

static void sample(void *ptr, size_t size)
{
    void *buf;
    size_t cap;
    pn_mem_slot *s = pn_mem_alloc_begin(driver, ptr, size, &buf, &cap);
    if (!s)
        return;
    PyThreadState *ts = this_thread();
    size_t used = ts ? py_walker_capture(mem_walker, ts, buf, cap) : 0;
    const pn_labelset *context = ts ? ctx_labels_current() : NULL;
    pn_mem_alloc_commit(s, used, pn_labels_current(), context);
}

static inline void allocated(void *ptr, size_t size)
{
    if (ptr && pn_mem_sampled(driver, size))
        sample(ptr, size);
}

static void *hook_malloc(void *ctx, size_t size)
{
    PyMemAllocatorEx *a = ctx;
    void *p = a->malloc(a->ctx, size);
    allocated(p, size);
    return p;
}

static void *hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    PyMemAllocatorEx *a = ctx;
    void *p = a->calloc(a->ctx, nelem, elsize);
    allocated(p, nelem * elsize);
    return p;
}

static void *hook_realloc(void *ctx, void *ptr, size_t size)
{
    PyMemAllocatorEx *a = ctx;
    /* Told before the block can go (and its address be reused): a moved or
     * resized block is a new allocation of the new size. */
    if (ptr)
        pn_mem_free(driver, ptr);
    void *p = a->realloc(a->ctx, ptr, size);
    allocated(p, size);
    return p;
}

static void hook_free(void *ctx, void *ptr)
{
    PyMemAllocatorEx *a = ctx;
    if (ptr)
        pn_mem_free(driver, ptr);
    a->free(a->ctx, ptr);
}

#endif

int py_mem_start(pn_agent *a, py_walker **walker_out, pn_error *e)
{
#ifdef Py_GIL_DISABLED
    (void)a;
    (void)walker_out;
    return pn_fail(e, PN_EINVAL, "memory: memory profiling is not supported on a free-threaded "
                   "CPython yet (its allocator hooks run without a GIL)");
#else
    if (driver)
        return pn_fail(e, PN_ESTATE, "memory: the allocator hooks are in use already");
    py_walker *w = py_walker_new(PyInterpreterState_Get(), 0, e);
    if (!w)
        return -1;
    const pn_config *c = pn_agent_config(a);
    size_t depth = c->max_depth ? c->max_depth : 128;
    pn_driver_opts o = {.kind = PN_DRIVER_MEMORY, .symbolize = py_walker_symbolize, .ctx = w,
                        .capture_bytes = py_walker_capture_bytes(depth),
                        .after_fork_child = py_walker_after_fork};
    pn_driver *d = pn_agent_add_driver(a, &o, e);
    if (!d) {
        py_walker_free(w);
        return -1;
    }
    mem_walker = w;
    driver = d;
    *walker_out = w;
    if (installed)
        return 0; /* still in the chain since the last stop (see py_mem_stop) */
    PyMemAllocatorEx hook = {NULL, hook_malloc, hook_calloc, hook_realloc, hook_free};
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &prev_obj);
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &prev_mem);
    hook.ctx = &prev_obj;
    PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &hook);
    hook.ctx = &prev_mem;
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &hook);
    installed = 1;
    return 0;
#endif
}

void py_mem_stop(void)
{
    driver = NULL; /* from now on the hooks only pass calls on */
    mem_walker = NULL;
#ifndef Py_GIL_DISABLED
    if (!installed)
        return;
    /* Taken out only when still on top: a hook installed after ours
     * (tracemalloc) calls ours, which stays as a pass-through. */
    PyMemAllocatorEx obj, mem;
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &obj);
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &mem);
    if (obj.malloc != hook_malloc || obj.ctx != &prev_obj || mem.malloc != hook_malloc ||
        mem.ctx != &prev_mem)
        return;
    PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &prev_obj);
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &prev_mem);
    installed = 0;
#endif
}

pn_driver *py_mem_driver(void) { return driver; }
