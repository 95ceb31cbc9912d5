/*
 * _walker_test: a test-only extension that runs the real walker on the real
 * core sampler and store, and hands the aggregated samples back to Python.
 * It includes walker.c so the tests can also reach its line-table parser
 * and string decoder directly.
 *
 * All module state below is owned by whichever thread holds the GIL; the
 * sampler thread only sees the walker and the store.
 */
#define PY_SSIZE_T_CLEAN
#include "../../src/walker.c"
#include "aggregation/store.h"
#include "sampling/sampler.h"

#include <time.h>

#if PNW_SUPPORTED

typedef struct {
    pn_store *store;
    pn_sampler *sampler;
    py_walker *walker;
} session;

static session cur; /* GIL-protected; one session at a time */

static void session_free(session *s)
{
    if (s->sampler) {
        Py_BEGIN_ALLOW_THREADS
        pn_sampler_stop(s->sampler);
        Py_END_ALLOW_THREADS
        pn_sampler_free(s->sampler);
    }
    py_walker_free(s->walker);
    pn_store_free(s->store);
    memset(s, 0, sizeof *s);
}

static PyObject *fail(const pn_error *e)
{
    PyErr_SetString(PyExc_RuntimeError, e->msg);
    return NULL;
}

static PyObject *t_start(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *names[] = {"hz", "oncpu", "gil_only", "max_depth", "fault_guard", NULL};
    double hz = 100;
    int oncpu = 1, gil_only = 0, fault_guard = 1;
    unsigned int max_depth = 128;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|dppIp", names, &hz, &oncpu, &gil_only,
                                     &max_depth, &fault_guard))
        return NULL;
    if (cur.store) {
        PyErr_SetString(PyExc_RuntimeError, "a sampling session is already running");
        return NULL;
    }
    pn_error e = {0};
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.max_depth = max_depth;
    pn_sampler_opts o = {.hz = hz, .oncpu = oncpu, .report_thread_id = 1,
                         .fault_guard = fault_guard};
    if (!(cur.store = pn_store_new(&l, &e)) ||
        !(cur.walker = py_walker_new(PyInterpreterState_Get(), gil_only, &e)) ||
        !(cur.sampler = pn_sampler_new(cur.store, &o, py_walker_walk, cur.walker, &e)) ||
        pn_sampler_start(cur.sampler, &e) != 0) {
        session_free(&cur);
        return fail(&e);
    }
    Py_RETURN_NONE;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static PyObject *frame_tuple(const pn_symbols *sym, pn_frame_id f)
{
    uint32_t ns, fs, line;
    if (pn_symbols_frame_get(sym, f, &ns, &fs, &line) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "sample refers to an unknown frame id");
        return NULL;
    }
    size_t nl, fl;
    const char *name = pn_symbols_str(sym, ns, &nl);
    const char *file = pn_symbols_str(sym, fs, &fl);
    /* Strict decoding: the walker must have produced valid UTF-8. */
    return Py_BuildValue("(s#s#I)", name, (Py_ssize_t)nl, file, (Py_ssize_t)fl, line);
}

static PyObject *stats_dict(void)
{
    py_walker_stats ws;
    pn_sampler_stats ss;
    py_walker_get_stats(cur.walker, &ws);
    pn_sampler_get_stats(cur.sampler, &ss);
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsK}", "threads_seen", (unsigned long long)ws.threads_seen,
        "stacks_walked", (unsigned long long)ws.stacks_walked, "frames",
        (unsigned long long)ws.frames, "walk_errors", (unsigned long long)ws.walk_errors,
        "cache_hits", (unsigned long long)ws.cache_hits, "cache_misses",
        (unsigned long long)ws.cache_misses, "ticks", (unsigned long long)ss.ticks, "samples",
        (unsigned long long)ss.samples, "idle_skipped", (unsigned long long)ss.idle_skipped,
        "missed_ticks", (unsigned long long)ss.missed_ticks);
}

/* Stop sampling; returns {"samples": [(frames, value_ns, count, tid)],
 * "stats": {...}, "truncated_stacks": n}. frames are (name, file, line),
 * leaf first. */
static PyObject *t_stop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!cur.store) {
        PyErr_SetString(PyExc_RuntimeError, "no sampling session is running");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    pn_sampler_stop(cur.sampler);
    Py_END_ALLOW_THREADS
    pn_period *p = pn_store_swap(cur.store, realtime_ns());
    const pn_symbols *sym = pn_period_symbols_const(p);
    PyObject *samples = PyList_New(0), *res = NULL;
    for (size_t i = 0; samples && i < pn_period_sample_count(p); i++) {
        pn_sample_view v;
        pn_period_sample(p, i, &v);
        PyObject *frames = PyList_New(0);
        for (uint32_t d = 0; frames && d < v.depth; d++) {
            PyObject *ft = frame_tuple(sym, v.frames[d]);
            if (!ft || PyList_Append(frames, ft) != 0)
                Py_CLEAR(frames);
            Py_XDECREF(ft);
        }
        PyObject *st = frames ? Py_BuildValue("(OLLK)", frames, (long long)v.values[0],
                                              (long long)v.values[1],
                                              (unsigned long long)v.tid)
                              : NULL;
        Py_XDECREF(frames);
        if (!st || PyList_Append(samples, st) != 0)
            Py_CLEAR(samples);
        Py_XDECREF(st);
    }
    pn_period_stats ps;
    pn_period_get_stats(p, &ps);
    PyObject *stats = samples ? stats_dict() : NULL;
    if (stats)
        res = Py_BuildValue("{sOsOsK}", "samples", samples, "stats", stats, "truncated_stacks",
                            (unsigned long long)ps.truncated_stacks);
    Py_XDECREF(samples);
    Py_XDECREF(stats);
    pn_store_recycle(cur.store, p);
    session_free(&cur);
    return res;
}

/* The running session's stats, for tests that wait on them. */
static PyObject *t_stats(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!cur.store) {
        PyErr_SetString(PyExc_RuntimeError, "no sampling session is running");
        return NULL;
    }
    return stats_dict();
}

static PyObject *t_sample_for(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"seconds", "hz", "oncpu", "gil_only", "max_depth", NULL};
    double seconds, hz = 100;
    int oncpu = 1, gil_only = 0;
    unsigned int max_depth = 128;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "d|dppI", names, &seconds, &hz, &oncpu,
                                     &gil_only, &max_depth))
        return NULL;
    PyObject *a = Py_BuildValue("(dii)", hz, oncpu, gil_only);
    PyObject *k = Py_BuildValue("{sI}", "max_depth", max_depth);
    PyObject *r = a && k ? t_start(self, a, k) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(k);
    if (!r)
        return NULL;
    Py_DECREF(r);
    /* Sleep without the GIL so the application threads run. */
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    Py_BEGIN_ALLOW_THREADS
    while (nanosleep(&ts, &ts) != 0)
        ;
    Py_END_ALLOW_THREADS
    return t_stop(self, NULL);
}

/* The walker's line for byte offset `addr` of a code object. */
static PyObject *t_line_of(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *code;
    int addr;
    if (!PyArg_ParseTuple(args, "O!i", &PyCode_Type, &code, &addr))
        return NULL;
    pn_error e = {0};
    py_walker *w = py_walker_new(PyInterpreterState_Get(), 0, &e);
    if (!w)
        return fail(&e);
    _Alignas(8) uint8_t co[PNW_SPAN_MAX];
    int64_t line = -1;
    if (pn_safe_read(co, code, w->L.co_span) == 0)
        line = lt_line(w, pnw_ptr(co, w->L.co_linetable), pnw_i32(co, w->L.co_firstlineno),
                       addr);
    py_walker_free(w);
    return PyLong_FromLongLong(line);
}

/* Where a new walker's layout comes from ("debug_offsets" or "headers"). */
static PyObject *t_layout_source(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pn_error e = {0};
    py_walker *w = py_walker_new(PyInterpreterState_Get(), 0, &e);
    if (!w)
        return fail(&e);
    PyObject *r = PyUnicode_FromString(py_walker_layout_source(w));
    py_walker_free(w);
    return r;
}

#if PNW_HAS_DEBUG_OFFSETS
/* pnw_layout_debug_offsets on a copy of this interpreter's debug offsets,
 * spoiled as `how` says ("", "cookie", "version", "free_threaded" (flipped),
 * "range"): None when accepted (and the offsets then equal the headers'),
 * else the error message. */
static PyObject *t_debug_offsets(PyObject *self, PyObject *args)
{
    (void)self;
    const char *how;
    if (!PyArg_ParseTuple(args, "s", &how))
        return NULL;
    _Py_DebugOffsets d = _PyRuntime.debug_offsets;
    if (strcmp(how, "cookie") == 0)
        d.cookie[0] = 'y';
    else if (strcmp(how, "version") == 0)
        d.version += 0x00010000;
    else if (strcmp(how, "free_threaded") == 0)
        d.free_threaded = !d.free_threaded; /* the other build flavour */
    else if (strcmp(how, "range") == 0)
        d.code_object.qualname = 1u << 20;
    pnw_layout h, L;
    pnw_layout_headers(&h, PyInterpreterState_Get());
    pnw_layout_spans(&h);
    L = h;
    pn_error e = {0};
    if (pnw_layout_debug_offsets(&L, &d, PyInterpreterState_Get(), &e) != 0)
        return PyUnicode_FromString(e.msg);
    L.source = h.source;
    if (memcmp(&L, &h, sizeof L) != 0) {
        PyErr_SetString(PyExc_AssertionError, "debug offsets differ from the headers' layout");
        return NULL;
    }
    Py_RETURN_NONE;
}
#endif

/* The walker's UTF-8 copy of a str (exact=False also accepts subclasses,
 * whose instances use the non-compact layout). None when it failed. */
static PyObject *t_decode(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *s;
    int exact = 1;
    if (!PyArg_ParseTuple(args, "U|p", &s, &exact))
        return NULL;
    pn_error e = {0};
    py_walker *w = py_walker_new(PyInterpreterState_Get(), 0, &e);
    if (!w)
        return fail(&e);
    long n = read_unicode(w, s, exact);
    PyObject *r = n < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(w->str_utf8, n);
    py_walker_free(w);
    return r;
}

#else

static PyObject *t_unsupported(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    (void)args;
    (void)kw;
    pn_error e = {0};
    py_walker_new(NULL, 0, &e);
    PyErr_SetString(PyExc_RuntimeError, e.msg);
    return NULL;
}
#define t_start t_unsupported
#define t_sample_for t_unsupported
#define t_stop t_unsupported
#define t_stats t_unsupported
#define t_line_of t_unsupported
#define t_decode t_unsupported
#define t_layout_source t_unsupported

#endif

static PyMethodDef methods[] = {
    {"start", (PyCFunction)(void (*)(void))t_start, METH_VARARGS | METH_KEYWORDS,
     "start(hz=100, oncpu=True, gil_only=False, max_depth=128)"},
    {"stop", (PyCFunction)(void (*)(void))t_stop, METH_NOARGS, "stop() -> results"},
    {"stats", (PyCFunction)(void (*)(void))t_stats, METH_NOARGS,
     "stats() -> the running session's stats"},
    {"sample_for", (PyCFunction)(void (*)(void))t_sample_for, METH_VARARGS | METH_KEYWORDS,
     "sample_for(seconds, hz=100, oncpu=True, gil_only=False, max_depth=128) -> results"},
    {"line_of", (PyCFunction)(void (*)(void))t_line_of, METH_VARARGS,
     "line_of(code, byte_offset) -> line"},
    {"decode", (PyCFunction)(void (*)(void))t_decode, METH_VARARGS,
     "decode(str, exact=True) -> bytes or None"},
    {"layout_source", (PyCFunction)(void (*)(void))t_layout_source, METH_NOARGS,
     "layout_source() -> 'debug_offsets' or 'headers'"},
#if PNW_SUPPORTED && PNW_HAS_DEBUG_OFFSETS
    {"debug_offsets", (PyCFunction)(void (*)(void))t_debug_offsets, METH_VARARGS,
     "debug_offsets(how) -> None or the error"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_walker_test", "Test harness for the CPython walker.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walker_test(void);
PyMODINIT_FUNC PyInit__walker_test(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (m && PyModule_AddIntConstant(m, "MAX_FRAMES", PY_WALKER_MAX_FRAMES) != 0)
        Py_CLEAR(m);
#ifdef Py_GIL_DISABLED
    /* The tests drive it from one thread; the walker needs no GIL. Without
     * this, importing it would turn the GIL back on for the whole run. */
    if (m && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) != 0)
        Py_CLEAR(m);
#endif
    return m;
}
