/* The Node addon's internal interface: what each file of bindings/node/src
 * offers the others. Node-API only (no V8 C++ API), so one build loads on
 * every Node >= 20.
 *
 * Threads: the addon loads in the main thread and in each worker thread
 * (one Node environment each, threads.c). Process-wide state (the agent,
 * its drivers, the join's shared part, the label table) is shared by those
 * JS threads under addon_lock(); per-thread state (the SIGPROF ring, the
 * join's cursor, the label cells) is indexed by the thread's entry and
 * touched by that thread only (and read by the handler interrupting it).
 * The log bridge's core side runs on core threads. */
#ifndef PN_NODE_ADDON_H
#define PN_NODE_ADDON_H

#include <node_api.h>
#include <stdint.h>

#include "pyroscope_native.h"

/* ---- JS threads (threads.c) */

#define THREADS_MAX 128
/* This thread's entry (-1: the table is full); its name labels samples. */
int threads_register(const char *name);
void threads_release(int idx);
/* The entry of the calling thread, -1 for none. Async-signal-safe. */
int threads_self(void);
int threads_high(void);
uint64_t threads_tid(int idx);
const char *threads_name(int idx);
void threads_counts(napi_env env, napi_value o);
void threads_exports(napi_env env, napi_value exports);
/* The entry of the environment making the call (addon.c). */
int env_thread(napi_env env);
/* Whether the caller runs on the main JS thread (the process's first). */
int on_main_thread(void);
/* Process-wide state shared by the JS threads (recursive; never taken by
 * the SIGPROF handler or a core thread). */
void addon_lock(void);
void addon_unlock(void);

/* ---- napi helpers (napi_util.c) */

/* Throw an Error (code ERR_PYROSCOPE_CONFIG for PN_EINVAL, a TypeError
 * with that code for PN_ETYPE, else ERR_PYROSCOPE) with the core's
 * message; returns NULL for `return`. */
napi_value throw_pn(napi_env env, const pn_error *e);
napi_value throw_msg(napi_env env, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A JS value as a malloc'ed UTF-8 string (numbers and booleans through
 * String()); NULL with a TypeError naming `what` thrown otherwise. */
/* A JS string as malloc'ed UTF-8 of *len bytes (NULs kept); NULL on
 * failure (out of memory thrown). */
char *js_utf8(napi_env env, napi_value v, size_t *len);
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

/* ---- a setting's JS value (config_arg.c) */

/* Sets setting `name` of c to the JS value v through pn_config_set_arg
 * (the core checks its type in Node's words): 0, or -1 with an error thrown. */
int config_set_js(napi_env env, pn_config *c, const char *name, napi_value v);

/* ---- the agent (agent.c) */

pn_agent *agent_current(void);
/* Counts agent starts: a thread's join belongs to one (addon lock). */
uint64_t agent_epoch(void);
/* Thread t's environment ends: if it started the running agent, hand it to
 * a thread still profiling into it (a worker's), else stop it now (the last
 * period goes out through libcurl, within stop_timeout). */
void agent_thread_gone(int t);
/* The batch driver of kind "cpu", "wall" or "heap", made at its first use
 * while the agent runs (NULL, thrown: not started). variant: the wall
 * driver also has a cpu value; the heap driver records allocations
 * (alloc_objects, alloc_space) instead of in-use memory; period: the sampling interval (ns for
 * cpu/wall, bytes for heap; 0: default). Addon lock held. */
pn_driver *agent_driver(napi_env env, const char *kind, int variant, int64_t period);
double agent_sample_rate(void);
void agent_exports(napi_env env, napi_value exports);

/* ---- uploads through Node's http (sender.c) */

/* on: the JS thread is about to block (the exit handler) and can no longer
 * send; requests go to libcurl. off: a new start. Main thread. */
void sender_block(int on);
/* The sender the exporter of the agent starting now takes (agent.c's start,
 * on the starting thread): Node's http when the main thread starts it after
 * setSender(fn); libcurl otherwise (a worker's start). */
void sender_apply(void);
void sender_exports(napi_env env, napi_value exports);

/* ---- logging (log.c) */

void log_exports(napi_env env, napi_value exports);

/* ---- labels (labels.c) */

/* The label set of handle `id` (NULL: none). Async-signal-safe: one atomic
 * load from a preallocated table. */
const pn_labelset *labels_of_handle(uint32_t id);
/* Thread idx's published cells: [0] the context handle id, [1] the span
 * handle id (NULL: none). Async-signal-safe on that thread. */
volatile int32_t *labels_cells(int idx);
/* Thread idx's environment ends (on that thread). */
void labels_release(int idx);
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

/* Thread t's consumer view of its ring: brackets [tail, head). Thread t. */
uint64_t signal_head(int t);
uint64_t signal_tail(int t);
const bracket *signal_at(int t, uint64_t i);
/* Drop brackets before index i (consumed); returns the oldest generation
 * still held by a bracket not consumed (0: none). */
uint64_t signal_consume(int t, uint64_t i);
void signal_counts(uint64_t *recorded, uint64_t *dropped, uint64_t *foreign);
/* Thread t's environment ends (on that thread): disarm, empty its ring. */
void signal_release(int t);
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
/* Forget the drivers (the agent stopped); counters too when asked. Addon
 * lock held. */
void join_reset(int counters);
/* Thread t's environment ends (on that thread): it feeds no driver. */
void join_release(int t);
/* A thread other than `except` whose profile feeds the running agent
 * (-1: none). Addon lock held. */
int join_feeder(int except);
void heap_exports(napi_env env, napi_value exports);
void heap_reset(void);
void heap_counts(napi_env env, napi_value obj);

#endif
