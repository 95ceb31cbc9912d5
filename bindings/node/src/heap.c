/* Heap profiles, recorded through the heap batch driver, in one of two modes.
 * In-use: a snapshot of V8's sampling heap profiler (sampled allocations
 * still live, per stack), at most once per store period (a second snapshot
 * in one period would count the live memory twice). Allocations (Node 26's
 * v8.startHeapProfile, restarted for each window): every sample of a window
 * (V8's scaled object count and bytes, live or collected since), recorded
 * into the current period at each call. The agent owner's thread (the one
 * that started it, or was handed it, agent.c). */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "addon.h"

static pn_driver *heap_drv;
static int alloc_mode;     /* records allocations, every call counts */
static uint64_t last_gen; /* symbols generation of the period last recorded */
static uint64_t snapshots, skipped;
static size_t stack_depth; /* heap.stackDepth: frames kept nearest the leaf */

/* heapStart(samplingIntervalBytes, stackDepth, allocations) */
static napi_value m_start(napi_env env, napi_callback_info info)
{
    napi_value argv[3];
    size_t argc = js_args(env, info, argv, 3);
    double bytes = 524288, depth = 64;
    bool alloc = false;
    if (argc >= 1)
        js_double(env, argv[0], &bytes);
    if (argc >= 2)
        js_double(env, argv[1], &depth);
    if (argc >= 3)
        napi_get_value_bool(env, argv[2], &alloc);
    stack_depth = depth >= 1 ? (size_t)depth : 64;
    addon_lock();
    heap_drv = agent_driver(env, "heap", alloc, (int64_t)bytes);
    addon_unlock();
    if (!heap_drv)
        return NULL;
    alloc_mode = alloc;
    last_gen = 0;
    return js_undefined(env);
}

/* heapWanted() -> true when the current period has no snapshot yet (allocations: always). */
static napi_value m_wanted(napi_env env, napi_callback_info info)
{
    (void)info;
    bool want = false;
    if (heap_drv && agent_current() && alloc_mode) {
        want = true;
    } else if (heap_drv && agent_current()) {
        pn_record_begin(heap_drv);
        pn_period *p = pn_record_period(heap_drv, 0);
        want = p && pn_symbols_generation(pn_period_symbols(p)) != last_gen;
        pn_record_end(heap_drv);
    }
    napi_value r;
    napi_get_boolean(env, want, &r);
    return r;
}

/* heapRecord(names[], files[], lines, nodeFrame, nodeParent,
 *            nodeObjects Float64Array, nodeBytes Float64Array) -> recorded */
static napi_value m_record(napi_env env, napi_callback_info info)
{
    napi_value argv[7];
    size_t argc = js_args(env, info, argv, 7);
    if (argc < 7)
        return throw_msg(env, "ERR_INVALID_ARG_TYPE", "heapRecord: 7 arguments");
    if (!heap_drv || !agent_current())
        return throw_msg(env, "ERR_PYROSCOPE_STATE", "heap profiler not started");
    frames_ctx fc;
    if (frames_open(env, &fc, argv) != 0)
        return NULL;
    size_t nobj, nbytes;
    const double *objs = js_typed(env, argv[5], napi_float64_array, &nobj, "nodeObjects");
    const double *bytes = objs ? js_typed(env, argv[6], napi_float64_array, &nbytes, "nodeBytes")
                               : NULL;
    if (!bytes)
        return NULL;
    if (nobj != fc.nnodes || nbytes != fc.nnodes)
        return throw_msg(env, "ERR_INVALID_ARG_VALUE", "heapRecord: array lengths differ");
    if (frames_cache(env, &fc, 0) != 0)
        return NULL;
    uint32_t recorded = 0;
    pn_record_begin(heap_drv);
    pn_period *p = pn_record_period(heap_drv, 0);
    if (p && (alloc_mode || pn_symbols_generation(pn_period_symbols(p)) != last_gen)) {
        pn_symbols *sym = pn_period_symbols(p);
        last_gen = pn_symbols_generation(sym);
        snapshots++;
        int32_t fidx[FRAMES_MAX_STACK];
        pn_frame_id stack[FRAMES_MAX_STACK];
        for (size_t n = 0; n < fc.nnodes; n++) {
            if (!(bytes[n] > 0))
                continue;
            size_t depth = frames_stack(&fc, (int32_t)n, fidx, stack_depth);
            if (!depth)
                continue;
            for (size_t i = 0; i < depth; i++)
                stack[i] = frames_intern(env, &fc, 0, sym, fidx[i]);
            int64_t v[2] = {(int64_t)(objs[n] + 0.5), (int64_t)bytes[n]};
            if (v[0] < 1)
                v[0] = 1;
            pn_sample s = {.frames = stack, .depth = depth, .values = v};
            pn_record(heap_drv, p, &s);
            recorded++;
        }
    } else {
        skipped++;
    }
    pn_record_end(heap_drv);
    frames_close(&fc);
    /* A snapshot is recorded at once: nothing older can come. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pn_driver_watermark(heap_drv, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    napi_value r;
    napi_create_uint32(env, recorded, &r);
    return r;
}

static napi_value m_stop(napi_env env, napi_callback_info info)
{
    (void)info;
    if (heap_drv && agent_current())
        pn_driver_watermark(heap_drv, INT64_MAX);
    heap_drv = NULL;
    return js_undefined(env);
}

/* The agent leaves (addon lock, the driver still alive): as heapStop. */
void heap_reset(void)
{
    if (heap_drv)
        pn_driver_watermark(heap_drv, INT64_MAX);
    heap_drv = NULL;
}

/* heapNotOwnedWarn(): a thread that joined another's agent asked for a heap
 * profile; it is told once a process (any thread) that the heap profile is
 * the owner's. */
static napi_value m_not_owned_warn(napi_env env, napi_callback_info info)
{
    (void)info;
    static atomic_int warned;
    if (!atomic_exchange(&warned, 1))
        pn_log(PN_LOG_WARN, "the heap profile covers the thread that started the profiler, "
               "not the threads that joined it (stats().thread.heapNotProfiled counts them)");
    return js_undefined(env);
}

void heap_counts(napi_env env, napi_value o)
{
    napi_value h;
    napi_create_object(env, &h);
    set_num(env, h, "snapshots", (double)snapshots);
    set_num(env, h, "skipped", (double)skipped);
    napi_set_named_property(env, o, "heap", h);
}

void heap_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "heapStart", m_start);
    set_fn(env, exports, "heapWanted", m_wanted);
    set_fn(env, exports, "heapRecord", m_record);
    set_fn(env, exports, "heapStop", m_stop);
    set_fn(env, exports, "heapNotOwnedWarn", m_not_owned_warn);
}
