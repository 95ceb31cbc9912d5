/*
 * Where the walker finds things in CPython's memory, for 3.10 to 3.15.
 *
 * Every version difference lives in this file, as data: pnw_layout_init
 * fills one pnw_layout (field offsets, how a frame names its instruction,
 * which line-table format) and walker.c reads copied bytes at those
 * offsets, never a version's struct. 3.13+ publish most of the offsets
 * themselves in _PyRuntime.debug_offsets ("xdebugpy"); they are taken from
 * there, validated, so a later release with the same debug-offsets
 * version needs the fewest changes here. 3.13 publishes the thread and
 * interpreter states, frames, code objects and the GIL; 3.14 adds str and
 * bytes (taken too), generators and, in _asyncio's own section, tasks (not
 * needed: a running generator's or task's frames are on its thread's chain,
 * and a suspended one runs no code). What no version publishes still comes
 * from the internal headers this file is compiled with:
 *   - _co_firsttraceable (a frame still in its prologue is skipped),
 *   - the frame-owner values (generator; shims: C stack, 3.14's interpreter),
 *   - the tag bits of 3.14's _PyStackRef f_executable (Py_TAG_BITS),
 *   - tstate->context and the PyContext / HAMT layouts (context labels),
 *   - the str state bit-field's meaning (kind, compact, ascii) and where a
 *     non-compact str keeps its data (data.any); 3.14's compact size,
 *   - the GIL's address before 3.13 (from 3.13 it is read through the
 *     published interp->ceval.gil offset).
 * Everything for 3.10-3.12 comes from the headers.
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
#include <frameobject.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pyroscope_native.h"

/* Versions after the newest tested one are refused at import, naming both:
 * their layouts may differ in ways no check here sees (overridable so that
 * a test can play a newer interpreter). */
#define PNW_VERSIONS "3.10, 3.11, 3.12, 3.13, 3.14, 3.15"
#ifndef PNW_NEWEST_TESTED
#define PNW_NEWEST_TESTED "3.15"
#define PNW_TOO_NEW_HEX 0x03100000  /* 3.16 */
#endif

/* The free-threaded build (Py_GIL_DISABLED, "3.13t") has no GIL, another
 * object header (ob_tid, ob_ref_local/shared: ob_type at 24, not 8) and a
 * larger thread state; the headers it was compiled with and its debug
 * offsets (which say free_threaded) give all of that, so it is walked as
 * the regular build of its version. Only 3.13t has been tested; other
 * free-threaded versions are refused at import. */
#ifdef Py_GIL_DISABLED
#define PNW_FREE_THREADED 1
#define PNW_FREE_THREADED_OK (PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000)
#else
#define PNW_FREE_THREADED 0
#define PNW_FREE_THREADED_OK 1
#endif

#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < PNW_TOO_NEW_HEX && PNW_FREE_THREADED_OK
#define PNW_SUPPORTED 1
#else
#define PNW_SUPPORTED 0
#endif

#if PNW_SUPPORTED

#include "internal/pycore_code.h"
#include "internal/pycore_gil.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030E0000
/* Py_TAG_BITS. Its inline functions leave parameters unused in a GIL
 * build: CPython's warnings, not ours. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "internal/pycore_stackref.h"
#pragma GCC diagnostic pop
#endif

/* Bytes of a struct the walker copies at most: every offset it uses must
 * fit (checked at start), so the copies live in fixed buffers. */
#define PNW_SPAN_MAX 512

enum {
    PNW_INSTR_POINTER = 0,  /* 3.11+: pointer to a code unit of co_code_adaptive */
    PNW_INSTR_INDEX = 1,    /* 3.10: int f_lasti, in code units (-1: not started) */
};
enum { PNW_LINETABLE_310 = 0, PNW_LINETABLE_311 = 1 };

/* 3.10/3.11 strings may be "not ready" (legacy wstr only); later ones
 * always are. The str layouts themselves come from the headers. */
#if PY_VERSION_HEX < 0x030C0000
#define PNW_STR_READY(a) ((a)->state.ready)
#else
#define PNW_STR_READY(a) 1
#endif

#define PNW_NONE SIZE_MAX   /* "this version has no such field" */

typedef struct {
    const char *source;     /* "debug_offsets" or "headers", for logs and tests */
    size_t interp_threads;  /* first thread state */
    /* Thread state; ts_span bytes are copied. */
    size_t ts_span, ts_next, ts_frame;
    size_t cframe_frame;    /* 3.11/12: ts_frame is a _PyCFrame *, this its current_frame */
    size_t ts_native_tid;   /* 3.11+ */
    size_t ts_pthread;      /* 3.10: thread_id (a pthread_t), see pthread_tid.h */
    size_t ts_context;      /* the PyContext running (contextvars), see context_labels.h */
    /* Frame; fr_span bytes are copied. */
    size_t fr_span, fr_type, fr_back, fr_code, fr_instr, fr_owner;
    /* Owners: -1 = none. owner_cstack and every value above it are shims
     * with no Python code of their own (3.12/3.13: FRAME_OWNED_BY_CSTACK,
     * the largest value; 3.14+: FRAME_OWNED_BY_INTERPRETER and up). */
    int instr_kind, owner_generator, owner_cstack;
    uintptr_t fr_code_tag;  /* 3.14+: tag bits of the _PyStackRef f_executable */
    /* Code object; co_span bytes are copied. */
    size_t co_span, co_type, co_units, co_name, co_filename, co_linetable, co_firstlineno,
        co_firsttraceable, co_code;
    int linetable_format;
    /* str: the state bit-field, length, and where the characters start
     * (compact ASCII, other compact; non-compact: the data.any pointer). */
    size_t str_state, str_length, str_ascii_size, str_compact_size, str_data;
    /* bytes (line tables): ob_size and the first byte. */
    size_t bytes_size, bytes_sval;
    /* The GIL's state: the struct and its fields. */
    const void *gil;
    size_t gil_span, gil_locked, gil_holder;
} pnw_layout;

/* Bytes of sizeof(T) at offset off of a copied buffer. */
static inline const void *pnw_ptr(const uint8_t *b, size_t off)
{
    const void *p;
    memcpy(&p, b + off, sizeof p);
    return p;
}

static inline int32_t pnw_i32(const uint8_t *b, size_t off)
{
    int32_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static inline int64_t pnw_i64(const uint8_t *b, size_t off)
{
    int64_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

/* The interpreter's major.minor as 0xMMmm0000, from the library we run in. */
static inline unsigned long pnw_runtime_version(void)
{
#if PY_VERSION_HEX >= 0x030B0000
    return Py_Version & 0xFFFF0000ul;
#else
    unsigned major = 0, minor = 0;
    if (sscanf(Py_GetVersion(), "%u.%u", &major, &minor) != 2)
        return 0;
    return ((unsigned long)major << 24) | ((unsigned long)minor << 16);
#endif
}

/* The largest (offset + 8) among those in use, or 0 when one is past
 * PNW_SPAN_MAX. */
static inline size_t pnw_span(const size_t *offs, size_t n)
{
    size_t span = 0;
    for (size_t i = 0; i < n; i++) {
        if (offs[i] == PNW_NONE)
            continue;
        if (offs[i] > PNW_SPAN_MAX - 8)
            return 0;
        if (offs[i] + 8 > span)
            span = offs[i] + 8;
    }
    return span;
}

/* Computes the spans; -1 when an offset does not fit the copy buffers. */
static inline int pnw_layout_spans(pnw_layout *L)
{
    size_t ts[] = {L->ts_next, L->ts_frame, L->ts_native_tid, L->ts_pthread, L->ts_context};
    size_t fr[] = {L->fr_type, L->fr_back, L->fr_code, L->fr_instr, L->fr_owner};
    size_t co[] = {L->co_type, L->co_units, L->co_name, L->co_filename, L->co_linetable,
                   L->co_firstlineno, L->co_firsttraceable};
    size_t gil[] = {L->gil_locked, L->gil_holder};
    L->ts_span = pnw_span(ts, sizeof ts / sizeof *ts);
    L->fr_span = pnw_span(fr, sizeof fr / sizeof *fr);
    L->co_span = pnw_span(co, sizeof co / sizeof *co);
    L->gil_span = pnw_span(gil, sizeof gil / sizeof *gil);
    /* Headers of str and bytes are read whole: they must fit too. */
    size_t obj[] = {L->str_state, L->str_length, L->str_ascii_size, L->str_compact_size,
                    L->str_data, L->bytes_size, L->bytes_sval};
    int objs_fit = pnw_span(obj, sizeof obj / sizeof *obj) != 0 &&
                   L->str_state < L->str_ascii_size && L->str_length < L->str_ascii_size &&
                   L->str_ascii_size <= L->str_compact_size;
    return L->ts_span && L->fr_span && L->co_span && L->gil_span && objs_fit ? 0 : -1;
}

/* The layout of the headers we were compiled with. Version sections:
 * 3.10 frames are PyFrameObjects linked by f_back from tstate->frame, and
 * f_lasti counts code units; 3.11/3.12 _PyInterpreterFrames hang off the
 * thread's current _PyCFrame, 3.13's off the thread state itself. */
static inline void pnw_layout_headers(pnw_layout *L, PyInterpreterState *interp)
{
    memset(L, 0xFF, sizeof *L); /* every offset PNW_NONE */
    L->source = "headers";
    L->co_type = L->fr_type = offsetof(PyObject, ob_type);
    L->ts_next = offsetof(PyThreadState, next);
    /* Not among 3.13's debug offsets: always from the headers. */
    L->ts_context = offsetof(PyThreadState, context);
    L->co_filename = offsetof(PyCodeObject, co_filename);
    L->co_linetable = offsetof(PyCodeObject, co_linetable);
    L->co_firstlineno = offsetof(PyCodeObject, co_firstlineno);
    L->owner_generator = L->owner_cstack = -1;
    L->fr_code_tag = 0;
    L->str_state = offsetof(PyASCIIObject, state);
    L->str_length = offsetof(PyASCIIObject, length);
    L->str_ascii_size = sizeof(PyASCIIObject);
    L->str_compact_size = sizeof(PyCompactUnicodeObject);
    L->str_data = offsetof(PyUnicodeObject, data.any);
    L->bytes_size = offsetof(PyVarObject, ob_size);
    L->bytes_sval = offsetof(PyBytesObject, ob_sval);
#if PY_VERSION_HEX < 0x030B0000
    L->interp_threads = offsetof(PyInterpreterState, tstate_head);
    L->ts_frame = offsetof(PyThreadState, frame);
    L->ts_pthread = offsetof(PyThreadState, thread_id);
    L->fr_back = offsetof(PyFrameObject, f_back);
    L->fr_code = offsetof(PyFrameObject, f_code);
    L->fr_instr = offsetof(PyFrameObject, f_lasti);
    L->instr_kind = PNW_INSTR_INDEX;
    L->co_name = offsetof(PyCodeObject, co_name); /* 3.10 code has no qualname */
    L->linetable_format = PNW_LINETABLE_310;
#else
    L->fr_type = PNW_NONE; /* an interpreter frame is no object */
    L->interp_threads = offsetof(PyInterpreterState, threads.head);
    L->ts_native_tid = offsetof(PyThreadState, native_thread_id);
    L->fr_back = offsetof(_PyInterpreterFrame, previous);
    L->fr_owner = offsetof(_PyInterpreterFrame, owner);
    L->owner_generator = FRAME_OWNED_BY_GENERATOR;
    L->instr_kind = PNW_INSTR_POINTER;
    L->co_units = offsetof(PyVarObject, ob_size);
    L->co_name = offsetof(PyCodeObject, co_qualname);
    L->co_firsttraceable = offsetof(PyCodeObject, _co_firsttraceable);
    L->co_code = offsetof(PyCodeObject, co_code_adaptive);
    L->linetable_format = PNW_LINETABLE_311;
#if PY_VERSION_HEX >= 0x030E0000
    /* 3.14 entry frames are FRAME_OWNED_BY_INTERPRETER (3.15 has no
     * FRAME_OWNED_BY_CSTACK left), and f_executable is a _PyStackRef. */
    L->owner_cstack = FRAME_OWNED_BY_INTERPRETER;
    L->fr_code_tag = Py_TAG_BITS;
#elif PY_VERSION_HEX >= 0x030C0000
    L->owner_cstack = FRAME_OWNED_BY_CSTACK;
#endif
#if PY_VERSION_HEX >= 0x030D0000
    L->ts_frame = offsetof(PyThreadState, current_frame);
    L->fr_code = offsetof(_PyInterpreterFrame, f_executable);
    L->fr_instr = offsetof(_PyInterpreterFrame, instr_ptr);
#else
    L->ts_frame = offsetof(PyThreadState, cframe);
    L->cframe_frame = offsetof(_PyCFrame, current_frame);
    L->fr_code = offsetof(_PyInterpreterFrame, f_code);
    /* prev_instr: the code unit before the next instruction, which is
     * what CPython itself uses for line numbers. */
    L->fr_instr = offsetof(_PyInterpreterFrame, prev_instr);
#endif
#endif
    /* The GIL's state: in the runtime up to 3.11, the interpreter's own
     * from 3.12. The address does not change while the interpreter runs. */
#if PY_VERSION_HEX >= 0x030C0000
    L->gil = interp->ceval.gil;
#else
    (void)interp;
    L->gil = &_PyRuntime.ceval.gil;
#endif
#if PY_VERSION_HEX >= 0x030D0000
    L->gil_locked = offsetof(struct _gil_runtime_state, locked);
    L->gil_holder = offsetof(struct _gil_runtime_state, last_holder);
#else
    L->gil_locked = offsetof(struct _gil_runtime_state, locked._value);
    L->gil_holder = offsetof(struct _gil_runtime_state, last_holder._value);
#endif
}

#if PY_VERSION_HEX >= 0x030D0000
#define PNW_HAS_DEBUG_OFFSETS 1
#define PNW_DEBUG_OFFSETS_COOKIE "xdebugpy"

/* Replaces the fields the interpreter publishes in d (a copy of
 * _PyRuntime.debug_offsets) with its values; interp (GIL held) is where the
 * GIL's address is read at the published offset. -1 with a message when d
 * is not what we can use: a wrong cookie, another version, the other build
 * flavour (GIL / free-threaded), or offsets outside the copy buffers; L is
 * unchanged then. */
static inline int pnw_layout_debug_offsets(pnw_layout *L, const _Py_DebugOffsets *d,
                                           PyInterpreterState *interp, pn_error *e)
{
    if (memcmp(d->cookie, PNW_DEBUG_OFFSETS_COOKIE, sizeof d->cookie) != 0)
        return pn_fail(e, PN_EINVAL, "_PyRuntime.debug_offsets has no \"xdebugpy\" cookie");
    if ((d->version & 0xFFFF0000u) != (PY_VERSION_HEX & 0xFFFF0000u))
        return pn_fail(e, PN_EINVAL,
                       "_PyRuntime.debug_offsets is for version 0x%llx, not %d.%d",
                       (unsigned long long)d->version, PY_MAJOR_VERSION, PY_MINOR_VERSION);
    if ((d->free_threaded != 0) != PNW_FREE_THREADED)
        return pn_fail(e, PN_EINVAL, "_PyRuntime.debug_offsets is for a %s build, this "
                       "extension for a %s one", d->free_threaded ? "free-threaded" : "GIL",
                       PNW_FREE_THREADED ? "free-threaded" : "GIL");
    pnw_layout n = *L;
    n.source = "debug_offsets";
    n.interp_threads = d->interpreter_state.threads_head;
    n.ts_next = d->thread_state.next;
    n.ts_frame = d->thread_state.current_frame;
    n.ts_native_tid = d->thread_state.native_thread_id;
    n.fr_back = d->interpreter_frame.previous;
    n.fr_code = d->interpreter_frame.executable;
    n.fr_instr = d->interpreter_frame.instr_ptr;
    n.fr_owner = d->interpreter_frame.owner;
    n.co_type = d->pyobject.ob_type;
    n.co_name = d->code_object.qualname;
    n.co_filename = d->code_object.filename;
    n.co_linetable = d->code_object.linetable;
    n.co_firstlineno = d->code_object.firstlineno;
    n.co_code = d->code_object.co_code_adaptive;
    /* The GIL fields are given inside the interpreter's own _gil; the GIL
     * we read is the one interp->ceval.gil points to (the same struct, or
     * the main interpreter's when shared), so take them relative to it. */
    uint64_t gil = d->interpreter_state.gil_runtime_state;
    n.gil_locked = d->interpreter_state.gil_runtime_state_locked - gil;
    n.gil_holder = d->interpreter_state.gil_runtime_state_holder - gil;
#if PY_VERSION_HEX >= 0x030E0000
    n.str_state = d->unicode_object.state;
    n.str_length = d->unicode_object.length;
    n.str_ascii_size = d->unicode_object.asciiobject_size;
#if PY_VERSION_HEX >= 0x030F0000
    n.str_compact_size = d->unicode_object.compactunicodeobject_size;
#endif
    n.bytes_size = d->bytes_object.ob_size;
    n.bytes_sval = d->bytes_object.ob_sval;
#endif
    uint64_t ceval_gil = d->interpreter_state.ceval_gil;
    if (d->interpreter_state.gil_runtime_state_locked < gil ||
        d->interpreter_state.gil_runtime_state_holder < gil || pnw_layout_spans(&n) != 0 ||
        n.co_code > (1u << 16) || n.interp_threads > d->interpreter_state.size ||
        ceval_gil + sizeof(void *) > d->interpreter_state.size)
        return pn_fail(e, PN_EINVAL, "_PyRuntime.debug_offsets has offsets out of range");
    /* Our own interpreter, with the GIL: a plain read. */
    memcpy(&n.gil, (const char *)interp + ceval_gil, sizeof n.gil);
    *L = n;
    return 0;
}
#else
#define PNW_HAS_DEBUG_OFFSETS 0
#endif

/* Fills L for the running interpreter (GIL held). 3.13-3.15: from the
 * interpreter's debug offsets, falling back to the headers with a logged
 * warning when they cannot be used. -1 only when neither fits. */
static inline int pnw_layout_init(pnw_layout *L, PyInterpreterState *interp, pn_error *e)
{
    pnw_layout_headers(L, interp);
    if (pnw_layout_spans(L) != 0)
        return pn_fail(e, PN_EINVAL, "pyroscope: CPython %s: a field the walker reads lies past "
                       "%d bytes", PY_VERSION, PNW_SPAN_MAX);
#if PNW_HAS_DEBUG_OFFSETS
    pn_error de = {0};
    if (pnw_layout_debug_offsets(L, &_PyRuntime.debug_offsets, interp, &de) != 0)
        pn_log(PN_LOG_WARN, "pyroscope: %s; using the layout of the CPython %s headers instead",
               de.msg, PY_VERSION);
#endif
    return 0;
}

#endif /* PNW_SUPPORTED */

/* ------------------------------------------------------------- contexts
 *
 * The execution context a thread runs (contextvars): tstate->context is the
 * PyContext entered last (an asyncio task's step, a greenlet, ctx.run; NULL
 * until a thread first uses contextvars), its ctx_vars an immutable HAMT.
 * These layouts are the same from 3.10 to 3.15 (3.13t: with its own
 * object header, which PyObject_HEAD gives). The node structs are
 * private to Python/hamt.c, so they are repeated here; context_labels.c
 * checks them against live objects at start (with the GIL) and switches
 * itself off when they do not match. */
#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x03100000 && PNW_FREE_THREADED_OK
#define PNW_CONTEXT_SUPPORTED 1
#include "internal/pycore_context.h"
#include "internal/pycore_hamt.h"

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
