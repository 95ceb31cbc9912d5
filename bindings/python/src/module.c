/*
 * pyroscope._native: the Python face of the core agent. The pure-Python
 * package (bindings/python/pyroscope) checks types and keyword names; this
 * module turns settings into a pn_config, starts the agent with the CPython
 * walker, and exposes labels, thread names, flush/stop, stats and reports.
 *
 * State below is owned by whichever thread holds the GIL (on a free-threaded
 * CPython: the module lock that stands in for it, module_lock.h; every
 * function here that touches it goes through locked()). The core's threads
 * never call back into Python: logs go through log_bridge (whose own thread
 * takes the GIL to deliver them), and the walker reads the interpreter
 * without it. Calls that may wait on core threads (stop, flush, joining a
 * replaced agent's stop thread) release the GIL while they wait.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "context_labels.h"
#include "log_bridge.h"
#include "module_lock.h"
#include "pairs.h"
#include "pyroscope_native.h"
#include "pyroscope_report.h"
#include "term_deadline.h"
#include "sender.h"
#include "setting_arg.h"
#include "walker.h"
#include "memory_hooks.h"

static pn_agent *agent;   /* GIL-protected: the running agent or NULL */
static py_walker *walker; /* GIL-protected: the agent's walker */
static py_walker *mem_walker; /* GIL-protected: the memory driver's walker, or NULL */
/* GIL-protected: the counters of the last agent, as it stopped. */
static pn_agent_stats last_stats;
static py_walker_stats last_walker;

static PyObject *raise_pn(const pn_error *e)
{
    log_bridge_drain();
    PyObject *type = e->code == PN_EINVAL || e->code == PN_ELIMIT ? PyExc_ValueError
                     : e->code == PN_ETYPE                         ? PyExc_TypeError
                     : e->code == PN_ENOMEM                        ? PyExc_MemoryError
                                                                   : PyExc_RuntimeError;
    PyErr_SetString(type, e->msg[0] ? e->msg : "pyroscope: unknown error");
    return NULL;
}

/* UTF-8 of a str, or NULL with TypeError naming `what` (ValueError for a NUL). */
static const char *utf8_of(PyObject *o, const char *what)
{
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", what,
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return py_utf8_c_string(o, what, NULL);
}

/* ------------------------------------------------------------ lifecycle */

/* An agent replaced by a re-configure, stopped on a thread of its own so
 * the caller does not wait out its stop_timeout behind a hanging upload.
 * The core lets the new agent start as soon as the old one's stop began;
 * the old one still exports its last period within its own bound (what it
 * cannot send is dropped, counted and logged by the core). The list is
 * GIL-protected; an entry's a/w/final belong to its thread until `done`. */
typedef struct retiring {
    pthread_t thread;
    pn_agent *a;
    py_walker *w;
    py_walker *mw;              /* the memory driver's, or NULL */
    pn_agent_stats final;
    py_walker_stats walker_final;
    atomic_int done;
    struct retiring *next;
} retiring;

static retiring *retiring_list;

static void *retire_main(void *arg)
{
    retiring *r = arg;
    pn_agent_stop_stats(r->a, &r->final);
    py_walker_get_stats(r->w, &r->walker_final);
    py_walker_free(r->w); /* after the sampler that used it has stopped */
    py_walker_free(r->mw);
    atomic_store(&r->done, 1);
    return NULL;
}

/* GIL held. Join the stop threads that are done (wait: all of them, with
 * the GIL released, each bounded by its agent's stop_timeout). */
static void reap_retiring(int wait)
{
    for (retiring **p = &retiring_list; *p;) {
        retiring *r = *p;
        if (!wait && !atomic_load(&r->done)) {
            p = &r->next;
            continue;
        }
        Py_BEGIN_ALLOW_THREADS
        pthread_join(r->thread, NULL);
        Py_END_ALLOW_THREADS
        *p = r->next;
        PyMem_RawFree(r);
    }
}

/* GIL held: hand the running agent to a stop thread. -1 when no thread
 * could be made (the caller stops it here instead). */
static int retire_agent(void)
{
    retiring *r = PyMem_RawCalloc(1, sizeof *r);
    if (!r)
        return -1;
    py_mem_stop(); /* no hook reaches the agent from now on */
    r->a = agent;
    r->w = walker;
    r->mw = mem_walker;
    /* Begun here, so the new agent can start as soon as we return. */
    pn_agent_stop_begin(agent);
    int rc = pn_thread_spawn(&r->thread, retire_main, r, "pyroscope-stop");
    if (rc != 0) {
        pn_log(PN_LOG_WARN,
               "no thread for the replaced agent's stop (%s): configure() waits for it, "
               "up to stop_timeout", strerror(rc));
        PyMem_RawFree(r);
        return -1;
    }
    agent = NULL;
    walker = NULL;
    mem_walker = NULL;
    r->next = retiring_list;
    retiring_list = r;
    return 0;
}

static void stop_agent(void)
{
    py_mem_stop(); /* no hook reaches the agent from now on */
    pn_agent *a = agent;
    py_walker *w = walker, *mw = mem_walker;
    agent = NULL;
    walker = NULL;
    mem_walker = NULL;
    if (a) {
        pn_agent_stats final;
        Py_BEGIN_ALLOW_THREADS
        pn_agent_stop_stats(a, &final);
        Py_END_ALLOW_THREADS
        last_stats = final;
        py_walker_get_stats(w, &last_walker);
    }
    py_walker_free(w); /* after the sampler that used it has stopped */
    py_walker_free(mw);
    reap_retiring(1);
    log_bridge_drain();
}

/* One dict into c: configure's keywords by the core's names (they win over
 * variables; the core checks each Python value against its setting's
 * kind), or the binding's defaults as {name: str} (a variable beats them). */
static int set_all(pn_config *c, PyObject *settings, int defaults)
{
    pn_error e = {0};
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(settings, &pos, &k, &v)) {
        const char *name = utf8_of(k, "setting name");
        if (!name)
            return -1;
        int rc;
        if (defaults) {
            const char *s = utf8_of(v, name);
            if (!s)
                return -1;
            rc = pn_config_set_default(c, name, s, &e);
        } else {
            pn_arg a;
            py_setting_hold hold;
            if (py_setting_arg(v, name, &a, &hold) != 0)
                return -1;
            rc = pn_config_set_arg(c, name, &a, &py_setting_words, &e);
            py_setting_arg_done(&hold);
        }
        if (rc != 0) {
            raise_pn(&e);
            return -1;
        }
    }
    return 0;
}

/* Keywords, the binding's defaults, then the core's contract: variables
 * (env lines "PYROSCOPE_X=v", "OTEL_X=v") under its precedence rule, the
 * default destination, validation. */
static int build_config(pn_config *c, PyObject *env, PyObject *settings, PyObject *defaults)
{
    pn_error e = {0};
    if (!PyList_Check(env) || !PyDict_Check(settings) || !PyDict_Check(defaults)) {
        PyErr_SetString(PyExc_TypeError, "start(env: list, settings: dict, defaults: dict, ...)");
        return -1;
    }
    if (set_all(c, settings, 0) != 0 || set_all(c, defaults, 1) != 0)
        return -1;
    Py_ssize_t n = PyList_Size(env);
    char **envp = PyMem_Calloc((size_t)n + 1, sizeof *envp);
    if (!envp) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* bytes (os.environb: the core says which variable is not UTF-8) */
        PyObject *item = PyList_GET_ITEM(env, i);
        const char *line = PyBytes_Check(item) ? PyBytes_AS_STRING(item)
                                               : utf8_of(item, "environment entry");
        if (!line) {
            PyMem_Free(envp);
            return -1;
        }
        envp[i] = (char *)line;
    }
    int rc = pn_config_resolve(c, envp, &e);
    PyMem_Free(envp);
    if (rc != 0) {
        raise_pn(&e);
        return -1;
    }
    return 0;
}

/* The agent, its log sink and its exit hook belong to the process, so
 * only the main interpreter may change them: a sub-interpreter's configure
 * would replace the agent the application configured, and its exit would
 * stop it. */
static int main_interpreter_only(const char *what)
{
    if (PyInterpreterState_Get() == PyInterpreterState_Main())
        return 0;
    PyErr_Format(PyExc_RuntimeError, "pyroscope.%s: called from a sub-interpreter; the "
                 "profiler is process-wide and only the main interpreter may configure or "
                 "stop it", what);
    return -1;
}

static PyObject *m_start_locked(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    if (main_interpreter_only("configure") != 0)
        return NULL;
    static char *names[] = {"env", "settings", "defaults", "gil_only", "line_mode", NULL};
    PyObject *env, *settings, *defaults;
    int gil_only = 1, line_mode = PY_WALKER_LINE_CURRENT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|pi", names, &env, &settings, &defaults,
                                     &gil_only, &line_mode))
        return NULL;
    if (line_mode < PY_WALKER_LINE_CURRENT || line_mode > PY_WALKER_LINE_NONE) {
        PyErr_Format(PyExc_ValueError, "line_no: %d is not 0 (last instruction), 1 (first "
                     "line) or 2 (no line)", line_mode);
        return NULL;
    }
    pn_config c;
    pn_config_init(&c);
    if (build_config(&c, env, settings, defaults) != 0) {
        pn_config_free(&c);
        log_bridge_drain();
        return NULL;
    }
    /* Replace a running agent only once the new settings are known good,
     * without waiting for its stop (see retiring). */
    reap_retiring(0);
    if (agent && retire_agent() != 0)
        stop_agent();
    pn_log_set_level(c.log_level);
    pn_error e = {0};
    py_walker *w = py_walker_new(PyInterpreterState_Get(), gil_only, &e);
    if (!w) {
        pn_config_free(&c);
        return raise_pn(&e);
    }
    py_walker_set_line_mode(w, line_mode);
    pn_agent *a = pn_agent_start(&c, &e);
    pn_config_free(&c);
    pn_driver_opts d = {.kind = PN_DRIVER_WALKER, .walker = py_walker_walk, .ctx = w,
                        .after_fork_child = py_walker_after_fork};
    if (a && !pn_agent_add_driver(a, &d, &e)) {
        Py_BEGIN_ALLOW_THREADS
        pn_agent_stop(a);
        Py_END_ALLOW_THREADS
        a = NULL;
    }
    py_walker *mw = NULL;
    if (a && pn_agent_config(a)->memory && py_mem_start(a, &mw, &e) != 0) {
        Py_BEGIN_ALLOW_THREADS
        pn_agent_stop(a);
        Py_END_ALLOW_THREADS
        a = NULL;
    }
    if (!a) {
        py_walker_free(w);
        return raise_pn(&e);
    }
    agent = a;
    walker = w;
    mem_walker = mw;
    log_bridge_drain();
    Py_RETURN_NONE;
}

static PyObject *m_stop_locked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (main_interpreter_only("shutdown") != 0)
        return NULL;
    int was = agent != NULL;
    stop_agent();
    return PyBool_FromLong(was);
}

static PyObject *m_flush_locked(PyObject *self, PyObject *args)
{
    (void)self;
    double timeout = 5;
    if (!PyArg_ParseTuple(args, "|d", &timeout))
        return NULL;
    if (!isfinite(timeout) || timeout < 0) {
        PyErr_Format(PyExc_ValueError, "timeout must be a finite number of seconds >= 0, not %R",
                     PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    if (!agent)
        Py_RETURN_FALSE;
    pn_error e = {0};
    int rc;
    pn_agent *a = agent;
    /* Held while we have the GIL, so a shutdown on another thread (it
     * needs the GIL to clear `agent`) waits for this flush to return. */
    pn_agent_hold(a);
    Py_BEGIN_ALLOW_THREADS
    rc = pn_agent_flush(a, timeout, &e);
    pn_agent_release(a);
    Py_END_ALLOW_THREADS
    log_bridge_drain();
    return PyBool_FromLong(rc == 0);
}

static PyObject *m_running_locked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(agent != NULL);
}

/* d[k] = v, an int unless real. */
static int put_num(PyObject *d, const char *k, double v, int real)
{
    PyObject *o = real ? PyFloat_FromDouble(v) : PyLong_FromDouble(v);
    int rc = o ? PyDict_SetItemString(d, k, o) : -1;
    Py_XDECREF(o);
    return rc;
}

static PyObject *m_stats_locked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    /* While running: live counters; after a stop: the last agent's final ones. */
    pn_agent_stats s = last_stats;
    py_walker_stats w = last_walker;
    if (agent)
        pn_agent_get_stats(agent, &s);
    if (walker)
        py_walker_get_stats(walker, &w);
    ctx_labels_stats c;
    ctx_labels_get_stats(&c);
    pn_mem_stats ms;
    pn_mem_get_stats(py_mem_driver(), &ms);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    /* The core's counters (its table), then the walker's and the context's. */
    const pn_stat_info *row;
    for (size_t i = 0; (row = pn_stat_row(i)); i++) {
        double v = pn_stat_value(&s, i);
        if (put_num(d, row->name, v, row->real) != 0)
            goto fail;
    }
    /* Each exporter's own counts: "<name>_sent", e.g. otlp_sent, http_failed. */
    for (size_t i = 0; i < s.queue.nexporters && i < PN_MAX_EXPORTERS; i++) {
        const pn_exporter_stats *x = &s.queue.exporters[i];
        for (size_t j = 0; (row = pn_stat_exporter_row(j)); j++) {
            char key[64];
            snprintf(key, sizeof key, "%s_%s", x->name ? x->name : "exporter", row->name);
            if (put_num(d, key, pn_stat_exporter_value(x, j), 0) != 0)
                goto fail;
        }
    }
    struct {
        const char *k;
        uint64_t v;
    } rows[] = {
        {"running", agent != NULL},
        {"threads_seen", w.threads_seen},
        {"stacks_walked", w.stacks_walked},
        {"frames", w.frames},
        {"walk_errors", w.walk_errors},
        {"cache_hits", w.cache_hits},
        {"cache_misses", w.cache_misses},
        {"log_dropped", log_bridge_dropped()},
        {"context_labels_enabled", c.enabled},
        {"context_lookups", c.lookups},
        {"context_labelled", c.labelled},
        {"context_read_errors", c.read_errors},
        {"context_exit_unmatched", c.exit_unmatched},
        {"context_label_drops", c.label_drops},
        {"context_switched", c.switched},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (put_num(d, rows[i].k, (double)rows[i].v, 0) != 0)
            goto fail;
    }
    for (size_t i = 0; (row = pn_stat_memory_row(i)); i++) {
        if (put_num(d, row->name, pn_stat_memory_value(&ms, i), 0) != 0)
            goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* --------------------------------------------------------------- labels */

static PyObject *m_labels_push(PyObject *self, PyObject *tags)
{
    (void)self;
    pn_label *kv;
    size_t n;
    if (py_dict_pairs(tags, "tags", &kv, &n) != 0)
        return NULL;
    pn_error e = {0};
    int rc = pn_labels_push(kv, n, &e);
    py_pairs_free(kv);
    if (rc != 0)
        return raise_pn(&e);
    Py_RETURN_NONE;
}

static PyObject *m_labels_pop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pn_error e = {0};
    if (pn_labels_pop(&e) != 0)
        return raise_pn(&e);
    Py_RETURN_NONE;
}

static PyObject *m_labels_depth(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromSize_t(pn_labels_depth());
}

static PyObject *m_labels_current(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return py_labels_dict(pn_labels_current());
}

static PyObject *m_thread_tag(PyObject *args, int add)
{
    PyObject *k, *v;
    if (!PyArg_ParseTuple(args, "OO", &k, &v))
        return NULL;
    const char *ks = utf8_of(k, "tag name");
    if (!ks)
        return NULL;
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "tag \"%s\": the value must be a str, not %.100s", ks,
                     Py_TYPE(v)->tp_name);
        return NULL;
    }
    const char *vs = py_utf8_c_string(v, "tag", k);
    if (!vs)
        return NULL;
    pn_error e = {0};
    int rc = add ? pn_labels_thread_add(ks, vs, &e) : pn_labels_thread_remove(ks, vs, &e);
    if (rc != 0)
        return raise_pn(&e);
    Py_RETURN_NONE;
}

static PyObject *m_thread_tag_add(PyObject *self, PyObject *args)
{
    (void)self;
    return m_thread_tag(args, 1);
}

static PyObject *m_thread_tag_remove(PyObject *self, PyObject *args)
{
    (void)self;
    return m_thread_tag(args, 0);
}

/* --------------------------------------------------------- thread names */

static PyObject *m_thread_name_set(PyObject *self, PyObject *args)
{
    (void)self;
    long tid;
    PyObject *name;
    if (!PyArg_ParseTuple(args, "lO", &tid, &name))
        return NULL;
    const char *s = NULL;
    if (name != Py_None && !(s = utf8_of(name, "thread name")))
        return NULL;
    pn_error e = {0};
    if (tid <= 0 || tid > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "thread name: %ld is not a thread id", tid);
        return NULL;
    }
    if (pn_thread_name_set((pid_t)tid, s, &e) != 0)
        return raise_pn(&e);
    Py_RETURN_NONE;
}

static PyObject *m_thread_names_clear(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pn_thread_names_clear();
    Py_RETURN_NONE;
}

/* -------------------------------------------------------------- logging */

static PyObject *m_set_log_sink_locked(PyObject *self, PyObject *sink)
{
    (void)self;
    if (main_interpreter_only("configure") != 0)
        return NULL;
    if (sink != Py_None && !PyCallable_Check(sink)) {
        PyErr_SetString(PyExc_TypeError, "log sink must be callable or None");
        return NULL;
    }
    log_bridge_set_sink(sink);
    Py_RETURN_NONE;
}

static PyObject *m_set_log_level(PyObject *self, PyObject *arg)
{
    (void)self;
    long level = PyLong_AsLong(arg);
    if (level == -1 && PyErr_Occurred())
        return NULL;
    pn_log_set_level((int)level);
    Py_RETURN_NONE;
}

static PyObject *m_at_exit_locked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (PyInterpreterState_Get() != PyInterpreterState_Main())
        Py_RETURN_NONE; /* a sub-interpreter ending: the process goes on */
    stop_agent();
    log_bridge_close();
    Py_RETURN_NONE;
}

/* -------------------------------------------------------------- reports */

/* A word of a command line: bytes as they are (a file name need not be
 * UTF-8: os.fsencode), or a str's UTF-8. NULL with an exception. */
static const char *word_of(PyObject *o, const char *what)
{
    if (!PyBytes_Check(o))
        return utf8_of(o, what);
    if (strlen(PyBytes_AS_STRING(o)) != (size_t)PyBytes_GET_SIZE(o)) {
        PyErr_Format(PyExc_ValueError, "%s must not contain a NUL byte", what);
        return NULL;
    }
    return PyBytes_AS_STRING(o);
}

/* A sequence of str or bytes as an array (NULL with an exception). *held keeps the
 * strings (a tuple of the items: another thread may change the caller's
 * list while the GIL is released); release it after the array's use. */
static const char **report_strs(PyObject *list, const char *what, size_t *n, PyObject **held)
{
    PyObject *seq = *held = PySequence_Tuple(list);
    Py_ssize_t len = seq ? PyTuple_GET_SIZE(seq) : 0;
    const char **out = seq ? calloc((size_t)len + 1, sizeof *out) : NULL;
    for (Py_ssize_t i = 0; out && i < len; i++) {
        if (!(out[i] = word_of(PyTuple_GET_ITEM(seq, i), what))) {
            free(out);
            out = NULL;
        }
    }
    if (seq && !out && !PyErr_Occurred())
        PyErr_NoMemory();
    if (!out)
        Py_CLEAR(*held);
    *n = (size_t)len;
    return out;
}

/* report_command(prog, words, hide_files) -> (status, stdout text, stderr
 * text): the core's `report` command (pn_report_command_run) on the words
 * after "report"; the CLI prints what it returns. */
static PyObject *m_report_command(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *words, *hide, *held_words = NULL, *held_hide = NULL;
    pn_report_command c = {0};
    if (!PyArg_ParseTuple(args, "zOO", &c.prog, &words, &hide))
        return NULL;
    const char **w = report_strs(words, "words", &c.nwords, &held_words);
    const char **h = w ? report_strs(hide, "hide_files", &c.nhide, &held_hide) : NULL;
    PyObject *out = NULL;
    if (h) {
        c.words = w;
        c.hide_files = h;
        pn_report_command_result r;
        Py_BEGIN_ALLOW_THREADS
        pn_report_command_run(&c, &r);
        Py_END_ALLOW_THREADS
        /* what a profile or path holds need not be UTF-8, nor a message cut short */
        const char *o = r.out ? r.out : "", *er = r.err ? r.err : "";
        out = Py_BuildValue("(iNN)", r.status,
                            PyUnicode_DecodeUTF8(o, (Py_ssize_t)strlen(o), "replace"),
                            PyUnicode_DecodeUTF8(er, (Py_ssize_t)strlen(er), "replace"));
        pn_report_command_result_free(&r);
    }
    free(w);
    free(h);
    Py_XDECREF(held_words);
    Py_XDECREF(held_hide);
    return out;
}

/* run_begin(dir): the run report begins (the folder's listing remembered). */
static PyObject *m_run_begin(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *dir;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &dir))
        return NULL;
    pn_error e = {0};
    int rc = pn_folder_run_begin(PyBytes_AS_STRING(dir), &e);
    Py_DECREF(dir);
    if (rc != 0)
        return raise_pn(&e);
    Py_RETURN_NONE;
}

/* run_report(app, top, hide_files, failed) -> (text, said): the run's
 * pages written (pn_run_report_write), quietly: what it says is returned,
 * for the CLI to print. */
static PyObject *m_run_report(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *hide;
    pn_run_report q = {.quiet = 1};
    Py_ssize_t top;
    if (!PyArg_ParseTuple(args, "znOK", &q.app, &top, &hide, &q.failed))
        return NULL;
    q.top = top > 0 ? (size_t)top : 0;
    PyObject *held;
    const char **hidden = report_strs(hide, "hide_files", &q.nhide, &held);
    if (!hidden)
        return NULL;
    q.hide_files = hidden;
    pn_run_report_result r;
    Py_BEGIN_ALLOW_THREADS
    pn_run_report_write(&q, &r);
    Py_END_ALLOW_THREADS
    free(hidden);
    Py_DECREF(held);
    PyObject *out = Py_BuildValue("(s#s)", r.text ? r.text : "",
                                  (Py_ssize_t)(r.text ? r.text_len : 0), r.said ? r.said : "");
    pn_run_report_result_free(&r);
    return out;
}

/* The core's settings table (pn_setting_info), one dict per row. */
static PyObject *m_settings(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *rows = PyList_New(0);
    const pn_setting_info *s;
    for (size_t i = 0; rows && (s = pn_config_setting(i)); i++) {
        PyObject *row = Py_BuildValue(
            "{s:s,s:s,s:z,s:d,s:d,s:z,s:z,s:s,s:z,s:z,s:z,s:z,s:z,s:O,s:O,s:O,s:s}", "name",
            s->name, "kind", s->kind_name, "default", s->default_value, "lo", s->lo, "hi", s->hi,
            "unit", s->unit, "spellings", s->spellings, "env", s->env, "env_aliases",
            s->env_aliases, "otel_env", s->otel_env, "python", s->python, "node", s->node,
            "ruby", s->ruby, "secret", (s->flags & PN_SETTING_SECRET) ? Py_True : Py_False,
            "binding", (s->flags & PN_SETTING_BINDING) ? Py_True : Py_False, "external",
            (s->flags & PN_SETTING_EXTERNAL) ? Py_True : Py_False, "meaning", s->meaning);
        if (!row || PyList_Append(rows, row) != 0)
            Py_CLEAR(rows);
        Py_XDECREF(row);
    }
    return rows;
}

/* resolve(env, settings, defaults): the config start() would use, without
 * starting; {name: string form} of every core setting (tests, diagnostics). */
static PyObject *m_resolve(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *env, *settings, *defaults;
    if (!PyArg_ParseTuple(args, "OOO", &env, &settings, &defaults))
        return NULL;
    pn_config c;
    pn_config_init(&c);
    PyObject *out = NULL;
    if (build_config(&c, env, settings, defaults) == 0 && (out = PyDict_New())) {
        char buf[4096];
        const pn_setting_info *s;
        for (size_t i = 0; out && (s = pn_config_setting(i)); i++) {
            if (pn_config_get(&c, s->name, buf, sizeof buf) != 0)
                continue;
            PyObject *v = PyUnicode_FromString(buf);
            if (!v || PyDict_SetItemString(out, s->name, v) != 0)
                Py_CLEAR(out);
            Py_XDECREF(v);
        }
    }
    pn_config_free(&c);
    return out;
}

/* stats_table(): the core's counters, [(name, meaning), ...]. */
static PyObject *m_stats_table(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(0);
    const pn_stat_info *row;
    for (size_t i = 0; out && (row = pn_stat_row(i)); i++) {
        PyObject *t = Py_BuildValue("(ss)", row->name, row->meaning);
        if (!t || PyList_Append(out, t) != 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

/* parse_bool(what, text): the core's boolean words, or ValueError naming what. */
static PyObject *m_parse_bool(PyObject *self, PyObject *args)
{
    (void)self;
    const char *what, *text;
    if (!PyArg_ParseTuple(args, "ss", &what, &text))
        return NULL;
    pn_error e = {0};
    int v;
    if (pn_config_parse_bool(what, text, &v, &e) != 0)
        return raise_pn(&e);
    return PyBool_FromLong(v);
}

/* os.register_at_fork(after_in_child=...): the core's fork path entry
 * point. The path already ran inside fork() (pthread_atfork), so this is a
 * no-op then; it is the hook a child reaches in any case. */
static PyObject *m_fork_child_locked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pn_fork_child();
    /* The stop threads are not in this process, nor (for the core) their
     * agents: forget them without joining (their memory stays). */
    retiring_list = NULL;
    log_bridge_after_fork();
    Py_RETURN_NONE;
}

/* _fork_exit.py has just put its SIGTERM handler in place: bound how long
 * a SIGTERM may go unanswered to the agent's stop_timeout + 2 s. */
static PyObject *m_term_deadline_locked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!agent)
        Py_RETURN_FALSE;
    if (py_term_deadline_arm(pn_agent_config(agent)->stop_timeout + 2.0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_TRUE;
}

static PyObject *m_libcurl_available(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = pn_http_libcurl_available();
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ok);
}

/* labels_note_fix(dropped, key, what): a fix made in Python, counted and
 * logged as the core's own (pyroscope/__init__.py, _fixed_labels). */
static PyObject *m_labels_note_fix(PyObject *self, PyObject *args)
{
    (void)self;
    int dropped;
    const char *key, *what;
    if (!PyArg_ParseTuple(args, "pss", &dropped, &key, &what))
        return NULL;
    pn_labels_note_fix(dropped, key, what);
    log_bridge_drain();
    Py_RETURN_NONE;
}

static PyObject *m_labels_strict(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(pn_labels_strict());
}

/* fault_guard_change(True) before a SIGSEGV/SIGBUS handler change,
 * (False) after it (pyroscope/_fault_handlers.py). The wait for a running
 * guarded read is a few loads; the sampler never needs the GIL. */
static PyObject *m_fault_guard_change(PyObject *self, PyObject *begin)
{
    (void)self;
    int b = PyObject_IsTrue(begin);
    if (b < 0)
        return NULL;
    if (b)
        pn_fault_guard_change_begin();
    else
        pn_fault_guard_change_end();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------ the module lock */

/* The entry points that touch the module's state, each under the module
 * lock (see module_lock.h; nothing on GIL builds). */
static PyObject *locked(PyObject *(*fn)(PyObject *, PyObject *), PyObject *self,
                        PyObject *arg)
{
    module_lock l;
    module_lock_begin(&l);
    PyObject *r = fn(self, arg);
    module_lock_end(&l);
    return r;
}

static PyObject *m_start(PyObject *self, PyObject *args, PyObject *kw)
{
    module_lock l;
    module_lock_begin(&l);
    PyObject *r = m_start_locked(self, args, kw);
    module_lock_end(&l);
    return r;
}

#define LOCKED(name) \
    static PyObject *name(PyObject *self, PyObject *arg) { return locked(name##_locked, self, arg); }
LOCKED(m_stop)
LOCKED(m_flush)
LOCKED(m_running)
LOCKED(m_stats)
LOCKED(m_set_log_sink)
LOCKED(m_at_exit)
LOCKED(m_fork_child)
LOCKED(m_term_deadline)

static PyMethodDef methods[] = {
    {"labels_note_fix", m_labels_note_fix, METH_VARARGS, "count and log a label fix"},
    {"labels_strict", m_labels_strict, METH_NOARGS, "True when strict_labels is on"},
    {"fork_child", m_fork_child, METH_NOARGS, "fork path: after fork, in the child"},
    {"term_deadline", m_term_deadline, METH_NOARGS,
     "after installing a SIGTERM handler: SIGTERM kills within stop_timeout + 2 s"},
    {"fault_guard_change", m_fault_guard_change, METH_O,
     "True before, False after changing the SIGSEGV/SIGBUS handler"},
    {"start", (PyCFunction)(void (*)(void))m_start, METH_VARARGS | METH_KEYWORDS,
     "start(env, settings, defaults, gil_only=True, line_mode=0): start (or restart)"},
    {"stop", m_stop, METH_NOARGS, "flush within stop_timeout and stop; True if it ran"},
    {"flush", m_flush, METH_VARARGS, "flush(timeout=5): export now; True when drained"},
    {"running", m_running, METH_NOARGS, "True while an agent runs"},
    {"stats", m_stats, METH_NOARGS,
     "counters of the sampler, walker and exporters (the last agent's after a stop)"},
    {"labels_push", m_labels_push, METH_O, "push current ∪ tags on this thread"},
    {"labels_pop", m_labels_pop, METH_NOARGS, "restore the set before the last push"},
    {"labels_depth", m_labels_depth, METH_NOARGS, "pushes not yet popped on this thread"},
    {"labels_current", m_labels_current, METH_NOARGS, "this thread's labels as a dict"},
    {"thread_tag_add", m_thread_tag_add, METH_VARARGS, "add one label to this thread"},
    {"thread_tag_remove", m_thread_tag_remove, METH_VARARGS,
     "remove one label from this thread (if its value matches)"},
    {"thread_name_set", m_thread_name_set, METH_VARARGS,
     "thread_name_set(native_id, name or None)"},
    {"thread_names_clear", m_thread_names_clear, METH_NOARGS, "forget all thread names"},
    {"set_log_sink", m_set_log_sink, METH_O, "callable(level, message) or None"},
    {"set_log_level", m_set_log_level, METH_O, "lowest level the core reports"},
    {"at_exit", m_at_exit, METH_NOARGS, "stop and detach logging (interpreter exit)"},
    {"report_command", m_report_command, METH_VARARGS,
     "report_command(prog, words, hide_files) -> (exit status, stdout text, stderr text)"},
    {"settings", m_settings, METH_NOARGS, "the core's settings table, a list of dicts"},
    {"run_begin", m_run_begin, METH_VARARGS, "run_begin(dir): the run report begins"},
    {"run_report", m_run_report, METH_VARARGS,
     "run_report(app, top, hide_files, failed) -> (first page's top table, what was said)"},
    {"resolve", m_resolve, METH_VARARGS,
     "resolve(env, settings, defaults): {name: value} start() would use"},
    {"stats_table", m_stats_table, METH_NOARGS, "the core's counters: [(name, meaning)]"},
    {"parse_bool", m_parse_bool, METH_VARARGS, "parse_bool(what, text): the core's words"},
    {"libcurl_available", m_libcurl_available, METH_NOARGS,
     "whether libcurl loads (else uploads go through pyroscope._sender)"},
    {"sender_attach", py_sender_attach, METH_O, "a sender thread starts (True) or ends"},
    {"sender_next", py_sender_next, METH_O,
     "sender_next(wait_s): the next upload request, or None"},
    {"sender_done", py_sender_done, METH_VARARGS,
     "sender_done(gen, status, reply, error, permanent): its answer"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pyroscope._native",
    "Native half of pyroscope: the sampler, walker and exporters.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    pn_error e = {0};
    if (py_walker_supported(&e) != 0) {
        PyErr_SetString(PyExc_ImportError, e.msg);
        return NULL;
    }
    if (module_lock_init() != 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && ctx_labels_init(m) != 0)
        Py_CLEAR(m);
#ifdef Py_GIL_DISABLED
    /* Safe without the GIL (module_lock.h; the walker never needed it):
     * importing us does not turn the GIL back on. */
    if (m && (PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) != 0 ||
              PyModule_AddIntConstant(m, "free_threaded", 1) != 0))
        Py_CLEAR(m);
#else
    if (m && PyModule_AddIntConstant(m, "free_threaded", 0) != 0)
        Py_CLEAR(m);
#endif
    if (m)
        py_sender_install();
    return m;
}
