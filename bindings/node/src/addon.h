/* The Node addon's internal interface: what each file of bindings/node/src
 * offers the others. Node-API only (no V8 C++ API), so one build loads on
 * every Node >= 20.
 *
 * Threads: everything here runs on the main JS thread unless a comment
 * says otherwise (the log bridge's core side runs on core threads; the
 * SIGPROF handler interrupts the main thread). native.js refuses to load
 * the addon on a worker thread, so there is one JS thread. */
#ifndef PN_NODE_ADDON_H
#define PN_NODE_ADDON_H

#include <node_api.h>
#include <stdint.h>

#include "pyroscope_native.h"

/* ---- napi helpers (napi_util.c) */

/* Throw an Error (code ERR_PYROSCOPE_CONFIG for PN_EINVAL, else
 * ERR_PYROSCOPE) with the core's message; returns NULL for `return`. */
napi_value throw_pn(napi_env env, const pn_error *e);
napi_value throw_msg(napi_env env, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A JS value as a malloc'ed UTF-8 string (numbers and booleans through
 * String()); NULL with a TypeError naming `what` thrown otherwise. */
char *js_string(napi_env env, napi_value v, const char *what);
int js_double(napi_env env, napi_value v, double *out);
napi_value js_undefined(napi_env env);
/* The call's first n arguments into argv (missing ones undefined); returns
 * how many were passed. */
size_t js_args(napi_env env, napi_callback_info info, napi_value *argv, size_t n);
/* An object's own enumerable keys: 0, or 1 (no keys) for undefined/null,
 * or -1 with a TypeError naming `what` thrown for anything else. */
int js_keys(napi_env env, napi_value obj, const char *what, napi_value *keys, uint32_t *n);
/* The call's first argument when it is a function: 1, *fn set; 0 for
 * null/undefined; -1 with a TypeError saying `what` thrown otherwise. */
int js_fn_arg(napi_env env, napi_callback_info info, napi_value *fn, const char *what);
/* A promise already resolved with v. */
napi_value js_resolved(napi_env env, napi_value v);
/* Typed-array data pointer and length in elements (NULL: wrong type, thrown). */
void *js_typed(napi_env env, napi_value v, napi_typedarray_type want, size_t *len,
               const char *what);
void set_num(napi_env env, napi_value obj, const char *key, double v);
void set_fn(napi_env env, napi_value obj, const char *name, napi_callback cb);

/* ---- the agent (agent.c) */

pn_agent *agent_current(void);
/* The batch driver of kind "cpu", "wall" or "heap", made at its first use
 * while the agent runs (NULL, thrown: not started). variant: the wall
 * driver also has a cpu value; the heap driver records allocations
 * (alloc_objects, alloc_space) instead of in-use memory; period: the sampling interval (ns for
 * cpu/wall, bytes for heap; 0: default). */
pn_driver *agent_driver(napi_env env, const char *kind, int variant, int64_t period);
double agent_sample_rate(void);
void agent_exports(napi_env env, napi_value exports);

/* ---- uploads through Node's http (sender.c) */

/* on: the JS thread is about to block (the exit handler) and can no longer
 * send; requests go to libcurl. off: a new start. Main thread. */
void sender_block(int on);
void sender_exports(napi_env env, napi_value exports);

/* ---- logging (log.c) */

void log_exports(napi_env env, napi_value exports);

/* ---- labels (labels.c) */

/* The label set of handle `id` (NULL: none). Async-signal-safe: one atomic
 * load from a preallocated table. */
const pn_labelset *labels_of_handle(uint32_t id);
/* The published slot: [0] the context handle id, [1] the span handle id. */
extern volatile int32_t *labels_slot;
void labels_exports(napi_env env, napi_value exports);

/* ---- SIGPROF brackets (signal.c) */

/* One V8 sample as our handler saw it around V8's own handler. */
typedef struct {
    int64_t before_ns, after_ns; /* CLOCK_MONOTONIC around V8's handler */
    int64_t cpu_ns;              /* thread CPU since the previous bracket */
    const pn_labelset *ctx;      /* context labels (NULL: none) */
    const pn_labelset *span;     /* span labels (NULL: none) */
    uint64_t gen;                /* grace generation read before the loads */
} bracket;

/* The main thread's consumer view of the ring: brackets [*tail, head). */
uint64_t signal_head(void);
uint64_t signal_tail(void);
const bracket *signal_at(uint64_t i);
/* Drop brackets before index i (consumed); returns the oldest generation
 * still held by a bracket not consumed (0: none). */
uint64_t signal_consume(uint64_t i);
void signal_counts(uint64_t *recorded, uint64_t *dropped, uint64_t *foreign);
void signal_exports(napi_env env, napi_value exports);

/* ---- a V8 profile's frames as flat arrays (frames.c)
 *
 * JS hands a profile over as: names[], files[] (strings), lines Int32Array
 * (per frame), nodeFrame Int32Array (per node; -1: synthetic, skipped) and
 * nodeParent Int32Array (per node; -1: root). Frame ids are interned in a
 * period's symbols once per frame and period, per cache slot (driver). */
#define FRAMES_MAX_STACK 1024
#define FRAMES_SLOTS 2
typedef struct {
    napi_value names, files;
    const int32_t *lines, *node_frame, *node_parent;
    size_t nframes, nnodes;
    uint32_t *fid[FRAMES_SLOTS]; /* per slot: id per frame, UINT32_MAX: not yet */
    uint64_t gen[FRAMES_SLOTS];  /* symbols generation fid is valid for */
} frames_ctx;

/* Reads argv[0..4] (thrown on bad input: -1). */
int frames_open(napi_env env, frames_ctx *fc, const napi_value *argv);
int frames_cache(napi_env env, frames_ctx *fc, int slot);
void frames_close(frames_ctx *fc);
/* node's stack, leaf first, as frame indexes into out: at most max frames
 * (0: FRAMES_MAX_STACK), the ones nearest the leaf. */
size_t frames_stack(const frames_ctx *fc, int32_t node, int32_t *out, size_t max);
pn_frame_id frames_intern(napi_env env, frames_ctx *fc, int slot, pn_symbols *sym, int32_t f);

/* ---- joining V8 profiles to brackets (join.c), heap (heap.c) */

void join_exports(napi_env env, napi_value exports);
void join_counts(napi_env env, napi_value obj);
/* Forget the drivers (the agent stopped); counters too when asked. */
void join_reset(int counters);
void heap_exports(napi_env env, napi_value exports);
void heap_reset(void);
void heap_counts(napi_env env, napi_value obj);

#endif
