/* The memory profile's allocator hooks (see memory_hooks.h).
 *
 * State: written with the GIL held by start/stop, read by the hooks, which
 * run with the GIL held too, so no hook runs while it changes. The common
 * path of a hook is a byte countdown or a filter bit, then a tail call to
 * the wrapped allocator: no call into the core, no atomic read-modify-write
 * (it was ~70 instructions a malloc/free pair, as many as pymalloc's own).
 * At the one allocation in ~512 KiB that ends a gap, the hook copies the
 * thread's frames and reads its labels (plain reads of its own thread
 * state, the ContextVar's value): no Python code, no allocation, the
 * application's pending exception untouched. */
#define Py_BUILD_CORE 1
#include "cpython_layout.h"

#include "memory_hooks.h"
#include "context_labels.h"

#include <stdatomic.h>
#include <string.h>

static pn_driver *driver;
static py_walker *mem_walker;

#ifndef Py_GIL_DISABLED /* the hooks: see py_mem_start */

/* Bytes left before the next sample: one countdown for the process, as the
 * GIL serialises every allocation through these two domains (sampling the
 * interleaved stream of all threads' bytes is as unbiased as sampling each
 * thread's). Relaxed loads and stores, never a read-modify-write: threads
 * of subinterpreters with their own GIL may race on it, and then lose at
 * most a decrement. INT64_MAX while stopped. */
static _Atomic int64_t left = INT64_MAX;
/* The core's filter of sampled addresses (an empty one while stopped). */
static const uint8_t *free_filter;

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

/* 1 when an allocation of size bytes ends the gap: it is sampled (the
 * next gap starts after it, whatever it overshot: memoryless, so an
 * allocation of s bytes is sampled with probability 1 - e^(-s/interval)). */
static inline int ends_gap(size_t size)
{
    int64_t l = atomic_load_explicit(&left, memory_order_relaxed) - (int64_t)size;
    atomic_store_explicit(&left, l, memory_order_relaxed);
    return __builtin_expect(l <= 0, 0);
}

/* The sampled allocation's path, out of line so the common one keeps no
 * frame and tail-calls the wrapped allocator. */
static __attribute__((noinline)) void sampled(void *p, size_t size)
{
    atomic_store_explicit(&left, pn_mem_next_gap(driver), memory_order_relaxed);
    if (p && driver)
        sample(p, size);
}

static __attribute__((noinline)) void *sampled_malloc(PyMemAllocatorEx *a, size_t size)
{
    void *p = a->malloc(a->ctx, size);
    sampled(p, size);
    return p;
}

static __attribute__((noinline)) void *sampled_calloc(PyMemAllocatorEx *a, size_t nelem,
                                                      size_t elsize)
{
    void *p = a->calloc(a->ctx, nelem, elsize);
    sampled(p, nelem * elsize);
    return p;
}

static __attribute__((noinline)) void *sampled_realloc(PyMemAllocatorEx *a, void *ptr,
                                                       size_t size)
{
    void *p = a->realloc(a->ctx, ptr, size);
    sampled(p, size);
    return p;
}

static void *hook_malloc(void *ctx, size_t size)
{
    PyMemAllocatorEx *a = ctx;
    if (ends_gap(size))
        return sampled_malloc(a, size);
    return a->malloc(a->ctx, size);
}

static void *hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    PyMemAllocatorEx *a = ctx;
    if (ends_gap(nelem * elsize))
        return sampled_calloc(a, nelem, elsize);
    return a->calloc(a->ctx, nelem, elsize);
}

static void *hook_realloc(void *ctx, void *ptr, size_t size)
{
    PyMemAllocatorEx *a = ctx;
    /* Told before the block can go (and its address be reused): a moved or
     * resized block is a new allocation of the new size. */
    if (pn_mem_filter_hit(free_filter, ptr))
        pn_mem_free(driver, ptr);
    if (ends_gap(size))
        return sampled_realloc(a, ptr, size);
    return a->realloc(a->ctx, ptr, size);
}

/* A free the filter lets through (a sampled object, or one near it). */
static __attribute__((noinline)) void sampled_free(PyMemAllocatorEx *a, void *ptr)
{
    pn_mem_free(driver, ptr);
    a->free(a->ctx, ptr);
}

static void hook_free(void *ctx, void *ptr)
{
    PyMemAllocatorEx *a = ctx;
    if (pn_mem_filter_hit(free_filter, ptr)) {
        sampled_free(a, ptr);
        return;
    }
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
    free_filter = pn_mem_free_filter(d);
    atomic_store_explicit(&left, pn_mem_next_gap(d), memory_order_relaxed);
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
    free_filter = pn_mem_free_filter(NULL);
    atomic_store_explicit(&left, INT64_MAX, memory_order_relaxed);
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
