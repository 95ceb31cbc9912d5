/*
 * The CPython struct layouts the walker reads, taken from the interpreter's
 * own internal headers at compile time. Every difference between 3.11, 3.12
 * and 3.13 lives in this file; walker.c only uses the PNW_ names below.
 *
 * Include this before anything else in a translation unit: the internal
 * headers need Py_BUILD_CORE, which changes what Python.h declares.
 */
#ifndef PYROSCOPE_CPYTHON_LAYOUT_H
#define PYROSCOPE_CPYTHON_LAYOUT_H

#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

#include "pyroscope_native.h"

/* A free-threaded build has no GIL and different object headers; versions
 * before 3.11 have no _PyInterpreterFrame; later ones are not checked yet. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
#define PNW_SUPPORTED 1
#else
#define PNW_SUPPORTED 0
#endif

#if PNW_SUPPORTED

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_gil.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"

/* How many bytes of a frame to copy: the fixed part before the locals. */
#define PNW_FRAME_SIZE offsetof(_PyInterpreterFrame, localsplus)
/* How many bytes of a code object to copy: everything before the bytecode. */
#define PNW_CODE_SIZE offsetof(PyCodeObject, co_code_adaptive)

#if PY_VERSION_HEX >= 0x030D0000
/* 3.13: f_executable is a code object or None; instr_ptr is the instruction
 * currently executing (or about to). */
#define PNW_FRAME_CODE(f) ((const void *)(f)->f_executable)
#define PNW_FRAME_INSTR(f) ((const void *)(f)->instr_ptr)
#define PNW_CODE_IS_NONE(p) ((p) == (const void *)Py_None)
#else
/* 3.11/3.12: f_code; prev_instr is the code unit before the next
 * instruction, which is what CPython itself uses for line numbers. */
#define PNW_FRAME_CODE(f) ((const void *)(f)->f_code)
#define PNW_FRAME_INSTR(f) ((const void *)(f)->prev_instr)
#define PNW_CODE_IS_NONE(p) 0
#endif

/* C-stack shim frames exist from 3.12; 3.11 has none. */
#if PY_VERSION_HEX >= 0x030C0000
#define PNW_OWNER_CSTACK FRAME_OWNED_BY_CSTACK
#else
#define PNW_OWNER_CSTACK (-1)
#endif
#define PNW_OWNER_GENERATOR FRAME_OWNED_BY_GENERATOR

/* 3.11 strings may be "not ready" (legacy wstr only); later ones always are. */
#if PY_VERSION_HEX < 0x030C0000
#define PNW_STR_READY(a) ((a)->state.ready)
#else
#define PNW_STR_READY(a) 1
#endif

/* The innermost frame of a thread, from a copy of its thread state.
 * 3.11/3.12 keep it in the _PyCFrame the thread is currently running in
 * (on that thread's C stack or inside the thread state), so it takes one
 * more safe read. Returns -1 when that read fails. */
static inline int pnw_current_frame(const PyThreadState *ts, const void **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    *out = ts->current_frame;
    return 0;
#else
    _PyCFrame cf;
    if (ts->cframe == NULL) {
        *out = NULL;
        return 0;
    }
    if (pn_safe_read(&cf, ts->cframe, sizeof cf) != 0)
        return -1;
    *out = cf.current_frame;
    return 0;
#endif
}

typedef struct _gil_runtime_state pnw_gil;

/* Where the interpreter's GIL state lives. Called with the GIL held (from
 * py_walker_new); the address does not change while the interpreter runs. */
static inline const pnw_gil *pnw_gil_address(PyInterpreterState *interp)
{
#if PY_VERSION_HEX >= 0x030C0000
    return interp->ceval.gil;
#else
    (void)interp;
    return &_PyRuntime.ceval.gil;
#endif
}

/* From a copy of the GIL state: the thread state holding it, or NULL when
 * nobody does. take_gil() sets last_holder together with locked=1 and
 * drop_gil() clears locked, so last_holder only counts while locked. */
static inline const void *pnw_gil_holder(const pnw_gil *g)
{
#if PY_VERSION_HEX >= 0x030D0000
    return g->locked ? (const void *)g->last_holder : NULL;
#else
    return g->locked._value ? (const void *)g->last_holder._value : NULL;
#endif
}

#endif /* PNW_SUPPORTED */

/* ------------------------------------------------------------- contexts
 *
 * The execution context a thread runs (contextvars): tstate->context is the
 * PyContext entered last (an asyncio task's step, a greenlet, ctx.run; NULL
 * until a thread first uses contextvars), its ctx_vars an immutable HAMT.
 * These layouts are the same from 3.10 to 3.13. The node structs are
 * private to Python/hamt.c, so they are repeated here; context_labels.c
 * checks them against live objects at start (with the GIL) and switches
 * itself off when they do not match. */
#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
#define PNW_CONTEXT_SUPPORTED 1
#include "internal/pycore_context.h"
#include "internal/pycore_hamt.h"

#define PNW_TSTATE_CONTEXT(ts) ((const void *)(ts)->context)

/* Bits of the 32-bit key hash per HAMT level, and the most levels a 32-bit
 * hash can fill. */
#define PNW_HAMT_BITS 5
#define PNW_HAMT_MAX_DEPTH 7

typedef struct {
    PyObject_VAR_HEAD
    uint32_t b_bitmap;
    PyObject *b_array[1];       /* key, value (key NULL: value is a sub-node) */
} pnw_hamt_bitmap;

typedef struct {
    PyObject_HEAD
    PyObject *a_array[32];      /* sub-nodes by 5 hash bits, NULL: none */
    Py_ssize_t a_count;
} pnw_hamt_array;

typedef struct {
    PyObject_VAR_HEAD
    int32_t c_hash;
    PyObject *c_array[1];       /* key, value pairs; ob_size counts both */
} pnw_hamt_collision;

/* hamt_hash(): Python's 64-bit hash folded to the 32 bits the trie uses. */
static inline int32_t pnw_hamt_hash(Py_hash_t h)
{
    int32_t x = (int32_t)((uint64_t)h & 0xffffffffu) ^ (int32_t)((uint64_t)h >> 32);
    return x == -1 ? -2 : x;
}
#else
#define PNW_CONTEXT_SUPPORTED 0
#endif

#endif
