/*
 * The CPython stack walker: reads every thread of one interpreter from the
 * core's sampler thread, without the GIL and without calling the
 * interpreter, and records one sample per thread into the tick.
 *
 * Version differences (3.10 to 3.15) are data in one layout
 * (cpython_layout.h): offsets from the interpreter's internal headers, or
 * from 3.13 on from the debug offsets it publishes; the free-threaded
 * 3.13t is walked as 3.13 (its own headers and debug offsets), every
 * thread, with gil_only treated as False. A build for any other version,
 * or another free-threaded one, compiles but py_walker_new fails with a
 * message naming the version (and, for a newer one, the newest tested).
 */
#ifndef PYROSCOPE_PY_WALKER_H
#define PYROSCOPE_PY_WALKER_H

#include <Python.h>

#include "pyroscope_native.h"

/* Frames walked per stack at most; deeper stacks keep the 1024 leaf-most
 * frames (the store then cuts to its own max_depth and marks the cut). */
#define PY_WALKER_MAX_FRAMES 1024

typedef struct py_walker py_walker;

/* 0 when this build can walk the running interpreter, else -1 with a
 * message naming the version (unsupported or free-threaded CPython, or an
 * extension built for another minor version). Any thread. */
int py_walker_supported(pn_error *e);

/* Call with the GIL held, from a Python thread. gil_only: sample only the
 * thread holding the GIL (none when nobody holds it; no meaning on a
 * free-threaded build: treated as False, logged once). Allocates everything
 * the sampler thread will need. */
py_walker *py_walker_new(PyInterpreterState *interp, int gil_only, pn_error *e);
/* Which line a frame reports (pyroscope-io's LineNo): the line running now
 * (default), the function's first line, or none (0). Call before the
 * sampler starts. */
enum { PY_WALKER_LINE_CURRENT = 0, PY_WALKER_LINE_FIRST = 1, PY_WALKER_LINE_NONE = 2 };
void py_walker_set_line_mode(py_walker *w, int mode);
/* Where the layout came from: "debug_offsets" (3.13+) or "headers". */
const char *py_walker_layout_source(const py_walker *w);
/* After the sampler using w was stopped. NULL is fine. */
void py_walker_free(py_walker *w);
/* A pn_walker_fn: runs on the core's sampler thread. */
void py_walker_walk(void *w, pn_tick *t);
/* In a forked child, on the sampler thread before its first tick (or with
 * no sampler running): drop the per-process caches. */
void py_walker_after_fork(void *w);

/* The memory profile's two halves. capture: in the allocator hook, the GIL
 * held, the calling thread's thread state ts: its raw frames (code object
 * and instruction of each, leaf first) into buf; returns the bytes used.
 * symbolize: a pn_mem_symbolize_fn, on the memory driver's thread, with a
 * walker of its own (its cache and buffers are that thread's). */
size_t py_walker_capture(py_walker *w, const void *ts, void *buf, size_t cap);
size_t py_walker_symbolize(void *w, const void *raw, size_t len, pn_symbols *sym,
                           pn_frame_id *out, size_t max);
/* The bytes capture needs for `frames` frames. */
size_t py_walker_capture_bytes(size_t frames);

typedef struct {
    uint64_t threads_seen;  /* thread states that were candidates for a sample */
    uint64_t stacks_walked; /* samples recorded */
    uint64_t frames;        /* frames recorded in those samples */
    uint64_t walk_errors;   /* stacks (or thread lists) ended by a failed or torn read */
    uint64_t cache_hits;    /* frames whose code object was found in the cache */
    uint64_t cache_misses;  /* frames whose names had to be read and interned */
} py_walker_stats;

/* Any thread; the counters are each consistent, not with each other. */
void py_walker_get_stats(const py_walker *w, py_walker_stats *out);

#endif
