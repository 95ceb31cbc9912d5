/* Reports of saved profiles: the core's report library (pyroscope_report.h)
 * for JS. The core resolves the options (pn_report_job_prepare) and writes
 * the run's pages (pn_run_report_write); this file maps JS values to them.
 *
 *   report(paths, opts) -> {profiles, text, output, type, otherTypes}
 *   reportAsync(paths, opts) -> Promise of the same (reads on libuv's pool)
 *   opts: {output: path | null (none) | undefined (default), title, type,
 *     groupBy, top, filter, diffA, diffB}; a selection is a "k=v,..."
 *     string or an array of such strings and [key, value] pairs.
 *   reportCommand(prog, argv) -> {status, stdout, stderr}: the core's
 *     `report` command line (bin/pyroscope-native.js)
 *   runBegin() -> whether the running agent writes to a folder (its
 *     listing is then remembered: the run report begins)
 *   runEnd() / runEndAsync() -> undefined / Promise: the run's pages
 *     written and logged (never throws or rejects)
 *
 * Threads: options are read and the job prepared on the main JS thread;
 * pn_report_job_run touches only the job, so the async variant runs it on
 * a pool thread. run_app belongs to the main thread. */
#include <stdlib.h>
#include <string.h>

#include "addon.h"
#include "pyroscope_report.h"

typedef struct {
    pn_report_job job;
    /* async only */
    napi_deferred deferred;
    napi_async_work work;
} request;

static int is_nullish(napi_env env, napi_value v)
{
    napi_valuetype t;
    napi_typeof(env, v, &t);
    return t == napi_undefined || t == napi_null;
}

static int is_type(napi_env env, napi_value v, napi_valuetype want)
{
    napi_valuetype t;
    return napi_typeof(env, v, &t) == napi_ok && t == want;
}

static napi_value prop(napi_env env, napi_value obj, const char *name)
{
    napi_value v;
    if (napi_get_named_property(env, obj, name, &v) != napi_ok)
        napi_get_undefined(env, &v);
    return v;
}

static uint32_t length_of(napi_env env, napi_value v)
{
    bool is = false;
    uint32_t n = 0;
    if (napi_is_array(env, v, &is) == napi_ok && is)
        napi_get_array_length(env, v, &n);
    return n;
}

/* A JS string (numbers too), kept by the scratch job; "" for another type,
 * which the core names as a bad value of its option. NULL: out of memory. */
static const char *str_of(napi_env env, pn_report_job *tmp, napi_value v)
{
    char *s = NULL;
    if (is_type(env, v, napi_string) || is_type(env, v, napi_number)) {
        s = js_string(env, v, "report: a string");
    } else {
        s = strdup("");
    }
    return pn_report_job_keep(tmp, s);
}

static const char *opt_str(napi_env env, pn_report_job *tmp, napi_value opts, const char *name)
{
    napi_value v = prop(env, opts, name);
    return is_nullish(env, v) ? NULL : str_of(env, tmp, v);
}

/* A selection: a string, or an array of strings and [key, value] pairs. */
static const pn_label *opt_pairs(napi_env env, pn_report_job *tmp, napi_value opts,
                                 const char *name, size_t *n)
{
    napi_value sel = prop(env, opts, name);
    *n = 0;
    if (is_nullish(env, sel))
        return NULL;
    int one = is_type(env, sel, napi_string);
    uint32_t len = one ? 1 : length_of(env, sel);
    pn_label *l = pn_report_job_keep(tmp, calloc(len + 1, sizeof *l));
    for (uint32_t i = 0; l && i < len; i++) {
        napi_value item = sel, k, v;
        if (!one)
            napi_get_element(env, sel, i, &item);
        if (length_of(env, item) == 2) {
            napi_get_element(env, item, 0, &k);
            napi_get_element(env, item, 1, &v);
            l[i].key = str_of(env, tmp, k);
            l[i].value = str_of(env, tmp, v);
        } else {
            l[i].value = str_of(env, tmp, item);
        }
    }
    *n = len;
    return l;
}

/* The JS arguments as a prepared job (NULL, thrown, otherwise). */
static request *request_read(napi_env env, napi_value paths, napi_value opts)
{
    request *q = calloc(1, sizeof *q);
    pn_report_job tmp = {0}; /* owns what the options point to */
    pn_report_options o = {.caller = "writeReport"};
    if (!q) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return NULL;
    }
    if (is_nullish(env, opts))
        napi_create_object(env, &opts);
    o.npaths = length_of(env, paths);
    const char **list = pn_report_job_keep(&tmp, calloc(o.npaths + 1, sizeof *list));
    for (uint32_t i = 0; list && i < o.npaths; i++) {
        napi_value p;
        napi_get_element(env, paths, i, &p);
        list[i] = str_of(env, &tmp, p);
    }
    o.paths = list;
    napi_value output = prop(env, opts, "output"), top = prop(env, opts, "top"), title;
    o.no_output = is_type(env, output, napi_null);
    o.output = is_type(env, output, napi_undefined) ? NULL : str_of(env, &tmp, output);
    if (!is_nullish(env, prop(env, opts, "title")) &&
        napi_coerce_to_string(env, prop(env, opts, "title"), &title) == napi_ok)
        o.title = str_of(env, &tmp, title);
    o.type = opt_str(env, &tmp, opts, "type");
    o.group_by = opt_str(env, &tmp, opts, "groupBy");
    o.filter = opt_pairs(env, &tmp, opts, "filter", &o.nfilter);
    o.diff_a = opt_pairs(env, &tmp, opts, "diffA", &o.ndiff_a);
    o.diff_b = opt_pairs(env, &tmp, opts, "diffB", &o.ndiff_b);
    o.diff = o.diff_a || o.diff_b;
    double d = 0;
    o.has_top = !is_nullish(env, top);
    /* a top that is no whole number is refused by the core as a negative one */
    o.top = o.has_top && js_double(env, top, &d) == 0 && d >= 0 && d <= 1e6 &&
                    d == (double)(long long)d
                ? (long long)d : -1;
    pn_error e = {0};
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    int rc = pending ? -1 : pn_report_job_prepare(&q->job, &o, &e);
    pn_report_job_clear(&tmp);
    if (rc == 0)
        return q;
    if (!pending)
        throw_msg(env, e.code == PN_EINVAL ? "ERR_PYROSCOPE_REPORT" : "ERR_PYROSCOPE", "%s",
                  e.msg);
    free(q);
    return NULL;
}

static void request_free(request *q)
{
    pn_report_job_clear(&q->job);
    free(q);
}

static napi_value str_or_null(napi_env env, const char *s)
{
    napi_value v;
    if (s)
        napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
    else
        napi_get_null(env, &v);
    return v;
}

static napi_value request_result(napi_env env, const request *q)
{
    const pn_report_job *j = &q->job;
    napi_value o, s, others;
    napi_create_object(env, &o);
    set_num(env, o, "profiles", (double)j->profiles);
    napi_create_string_utf8(env, j->text ? j->text : "", j->text ? j->text_len : 0, &s);
    napi_set_named_property(env, o, "text", s);
    napi_set_named_property(env, o, "output", str_or_null(env, j->r.html));
    napi_set_named_property(env, o, "type", str_or_null(env, j->type));
    napi_create_array_with_length(env, j->nother_types, &others);
    for (size_t i = 0; i < j->nother_types; i++)
        napi_set_element(env, others, (uint32_t)i, str_or_null(env, j->other_types[i]));
    napi_set_named_property(env, o, "otherTypes", others);
    return o;
}

/* An Error like throw_msg's, as a value (to reject with). */
static napi_value request_error(napi_env env, const request *q)
{
    napi_value code, msg, err;
    napi_create_string_utf8(env, q->job.err.code == PN_EINVAL ? "ERR_PYROSCOPE_REPORT" : "ERR_PYROSCOPE",
                            NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, q->job.err.msg[0] ? q->job.err.msg : "report failed", NAPI_AUTO_LENGTH,
                            &msg);
    napi_create_error(env, code, msg, &err);
    return err;
}

static napi_value m_report(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    js_args(env, info, argv, 2);
    request *q = request_read(env, argv[0], argv[1]);
    if (!q)
        return NULL;
    pn_report_job_run(&q->job);
    napi_value out = NULL;
    if (q->job.rc != 0)
        napi_throw(env, request_error(env, q));
    else
        out = request_result(env, q);
    request_free(q);
    return out;
}

static void async_execute(napi_env env, void *data)
{
    (void)env;
    pn_report_job_run(&((request *)data)->job);
}

static void async_complete(napi_env env, napi_status status, void *data)
{
    request *q = data;
    if (status != napi_ok && q->job.rc == 0)
        q->job.rc = pn_fail(&q->job.err, PN_ESTATE, "report: cancelled");
    if (q->job.rc != 0)
        napi_reject_deferred(env, q->deferred, request_error(env, q));
    else
        napi_resolve_deferred(env, q->deferred, request_result(env, q));
    napi_delete_async_work(env, q->work);
    request_free(q);
}

/* execute on the pool, then complete on the main thread; *promise is made
 * even when the work cannot be queued (-1). */
static int queue_work(napi_env env, const char *name, napi_async_execute_callback execute,
                      napi_async_complete_callback complete, void *data, napi_deferred *deferred,
                      napi_async_work *work, napi_value *promise)
{
    napi_value id;
    napi_create_promise(env, deferred, promise);
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &id);
    return napi_create_async_work(env, NULL, id, execute, complete, data, work) == napi_ok &&
                   napi_queue_async_work(env, *work) == napi_ok
               ? 0 : -1;
}

static napi_value m_report_async(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    js_args(env, info, argv, 2);
    request *q = request_read(env, argv[0], argv[1]);
    if (!q)
        return NULL;
    napi_value promise;
    if (queue_work(env, "pyroscope-report", async_execute, async_complete, q, &q->deferred,
                   &q->work, &promise) != 0) {
        request_free(q); /* the deferred is left pending; the throw is what the caller sees */
        return throw_msg(env, "ERR_PYROSCOPE", "report: cannot queue the work");
    }
    return promise;
}

/* reportCommand(prog, argv) -> {status, stdout, stderr}: the core's
 * `report` program (argv: "report" and its words, or -h), on this thread
 * (a CLI's); the bin prints what it returns. */
static napi_value m_report_command(napi_env env, napi_callback_info info)
{
    napi_value argv[2], o, s;
    js_args(env, info, argv, 2);
    pn_report_job tmp = {0}; /* owns the copied strings */
    uint32_t n = length_of(env, argv[1]);
    const char **words = pn_report_job_keep(&tmp, calloc(n + 1, sizeof *words));
    int ok = words != NULL;
    for (uint32_t i = 0; ok && i < n; i++) {
        napi_value w;
        napi_get_element(env, argv[1], i, &w);
        ok = (words[i] = str_of(env, &tmp, w)) != NULL;
    }
    pn_report_command c = {.prog = str_of(env, &tmp, argv[0]), .with_command = 1,
                           .words = words, .nwords = n};
    pn_report_command_result r = {.status = 1};
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending || !ok) {
        pn_report_job_clear(&tmp);
        return pending ? NULL : throw_msg(env, "ERR_PYROSCOPE", "pyroscope: out of memory");
    }
    pn_report_command_run(&c, &r);
    pn_report_job_clear(&tmp);
    napi_create_object(env, &o);
    set_num(env, o, "status", r.status);
    napi_create_string_utf8(env, r.out ? r.out : "", NAPI_AUTO_LENGTH, &s);
    napi_set_named_property(env, o, "stdout", s);
    napi_create_string_utf8(env, r.err ? r.err : "", NAPI_AUTO_LENGTH, &s);
    napi_set_named_property(env, o, "stderr", s);
    pn_report_command_result_free(&r);
    return o;
}

/* ------------------------------------------------------------ the run */

static char *run_app; /* main thread: the app of the run begun */

/* runBegin(): the run report begins when the running agent writes to a
 * folder (any earlier run is forgotten otherwise). */
static napi_value m_run_begin(napi_env env, napi_callback_info info)
{
    (void)info;
    pn_agent *a = agent_current();
    const pn_config *c = a ? pn_agent_config(a) : NULL;
    pn_error e = {0};
    napi_value out;
    free(run_app);
    run_app = NULL;
    if (!c || !c->output_dir || !*c->output_dir) {
        pn_folder_pages none;
        if (pn_folder_run_end(&none, &e) == 0)
            pn_folder_pages_free(&none);
        napi_get_boolean(env, false, &out);
        return out;
    }
    run_app = strdup(c->application_name ? c->application_name : "");
    if (pn_folder_run_begin(c->output_dir, &e) != 0)
        return throw_pn(env, &e);
    napi_get_boolean(env, true, &out);
    return out;
}

typedef struct {
    pn_run_report q;
    char *app; /* the run's (run_app, taken) */
    napi_deferred deferred;
    napi_async_work work;
} run_end;

static run_end *run_end_take(napi_env env)
{
    run_end *r = calloc(1, sizeof *r);
    if (!r) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return NULL;
    }
    r->q.app = r->app = run_app;
    run_app = NULL;
    return r;
}

static void run_end_execute(napi_env env, void *data)
{
    (void)env;
    run_end *r = data;
    pn_run_report_result res;
    pn_run_report_write(&r->q, &res);
    pn_run_report_result_free(&res);
}

static void run_end_free(run_end *r)
{
    free(r->app);
    free(r);
}

static napi_value m_run_end(napi_env env, napi_callback_info info)
{
    (void)info;
    run_end *r = run_end_take(env);
    if (!r)
        return NULL;
    run_end_execute(env, r);
    run_end_free(r);
    return js_undefined(env);
}

static void run_end_complete(napi_env env, napi_status status, void *data)
{
    (void)status;
    run_end *r = data;
    napi_resolve_deferred(env, r->deferred, js_undefined(env));
    napi_delete_async_work(env, r->work);
    run_end_free(r);
}

/* runEndAsync(): the run's pages written on the pool (here when the work
 * cannot be queued); resolves when done. */
static napi_value m_run_end_async(napi_env env, napi_callback_info info)
{
    (void)info;
    run_end *r = run_end_take(env);
    napi_value promise;
    if (!r)
        return NULL;
    if (queue_work(env, "pyroscope-run-report", run_end_execute, run_end_complete, r,
                   &r->deferred, &r->work, &promise) != 0) {
        run_end_execute(env, r);
        napi_resolve_deferred(env, r->deferred, js_undefined(env));
        run_end_free(r);
    }
    return promise;
}

void report_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "report", m_report);
    set_fn(env, exports, "reportAsync", m_report_async);
    set_fn(env, exports, "reportCommand", m_report_command);
    set_fn(env, exports, "runBegin", m_run_begin);
    set_fn(env, exports, "runEnd", m_run_end);
    set_fn(env, exports, "runEndAsync", m_run_end_async);
}
