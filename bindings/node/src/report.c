/* Reports of saved profiles: the core's report library (pyroscope_report.h)
 * for JS, as the flame graph page and the text tables.
 *
 *   report(paths, opts) -> {profiles, text}            (synchronous)
 *   reportAsync(paths, opts) -> Promise<{profiles, text}> (reads off the
 *     main thread, on libuv's pool)
 *   opts: {output: html path | null, title, view (the page's URL-fragment
 *     syntax), top: n (0: no table), filter: [[k, v], ...], groupBy: key |
 *     null, diffA / diffB: [[k, v], ...] | null}
 *   folderPages(dir) -> [{type, page, paths, total}]: the folder's profiles by type
 *   runOutput() -> {dir, app} of the running agent's folder output, or null
 *   runBegin(dir): its listing remembered; runEnd() -> the pages of the files
 *     written since (the core's run report)
 *
 * Threads: the request is read from JS and the result built on the main JS
 * thread; pn_report_job_run touches only the job (its own copies of every
 * string), so the async variant runs it on a pool thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"
#include "pyroscope_report.h"

/* The job owns the request's strings and lists (pn_report_job_keep). */
typedef struct {
    pn_report_job job;
    /* async only */
    napi_deferred deferred;
    napi_async_work work;
} request;

static void request_free(request *q)
{
    if (!q)
        return;
    pn_report_job_clear(&q->job);
    free(q);
}

static void *keep_or_throw(napi_env env, request *q, void *block)
{
    void *kept = pn_report_job_keep(&q->job, block);
    if (!kept)
        napi_throw_error(env, NULL, "pyroscope: out of memory");
    return kept;
}

/* A JS string copied and kept by the job (NULL, thrown, otherwise). */
static const char *own_string(napi_env env, request *q, napi_value v, const char *what)
{
    char *s = js_string(env, v, what);
    return s ? keep_or_throw(env, q, s) : NULL;
}

static int is_nullish(napi_env env, napi_value v)
{
    napi_valuetype t;
    napi_typeof(env, v, &t);
    return t == napi_undefined || t == napi_null;
}

static napi_value prop(napi_env env, napi_value obj, const char *name)
{
    napi_value v;
    if (napi_get_named_property(env, obj, name, &v) != napi_ok)
        napi_get_undefined(env, &v);
    return v;
}

/* An optional string option (NULL when absent; -1 thrown when not a string). */
static int opt_string(napi_env env, request *q, napi_value opts, const char *name,
                      const char **out)
{
    napi_value v = prop(env, opts, name);
    *out = NULL;
    if (is_nullish(env, v))
        return 0;
    char what[120];
    snprintf(what, sizeof what, "report: %s must be a string", name);
    *out = own_string(env, q, v, what);
    return *out ? 0 : -1;
}

/* A JS array's length (-1, thrown, when v is not an array). */
static int64_t array_length(napi_env env, napi_value v, const char *what)
{
    bool is;
    uint32_t len = 0;
    if (napi_is_array(env, v, &is) != napi_ok || !is ||
        napi_get_array_length(env, v, &len) != napi_ok) {
        throw_msg(env, "ERR_INVALID_ARG_TYPE", "report: %s", what);
        return -1;
    }
    return len;
}

/* [[key, value], ...] -> labels (NULL, 0 when absent). */
static int opt_pairs(napi_env env, request *q, napi_value opts, const char *name,
                     const pn_label **out, size_t *n)
{
    napi_value arr = prop(env, opts, name);
    *out = NULL;
    *n = 0;
    if (is_nullish(env, arr))
        return 0;
    char what[160];
    snprintf(what, sizeof what, "%s must be an array of [key, value] pairs", name);
    int64_t len = array_length(env, arr, what);
    if (len < 0)
        return -1;
    pn_label *l = keep_or_throw(env, q, calloc((size_t)len + 1, sizeof *l));
    if (!l)
        return -1;
    *out = l;
    snprintf(what, sizeof what, "report: %s: each label key and value must be a string", name);
    for (int64_t i = 0; i < len; i++) {
        napi_value kv, k, v;
        char pos[120];
        snprintf(pos, sizeof pos, "%s[%" PRId64 "] must be a [key, value] pair", name, i);
        if (napi_get_element(env, arr, (uint32_t)i, &kv) != napi_ok ||
            array_length(env, kv, pos) != 2) {
            bool pending = false;
            napi_is_exception_pending(env, &pending);
            if (!pending)
                throw_msg(env, "ERR_INVALID_ARG_TYPE", "report: %s", pos);
            return -1;
        }
        napi_get_element(env, kv, 0, &k);
        napi_get_element(env, kv, 1, &v);
        if (!(l[i].key = own_string(env, q, k, what)) || !(l[i].value = own_string(env, q, v, what)))
            return -1;
    }
    *n = (size_t)len;
    return 0;
}

/* The JS arguments as a request (NULL, thrown, on bad input). */
static request *request_read(napi_env env, napi_value paths, napi_value opts)
{
    request *q = calloc(1, sizeof *q);
    if (!q) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return NULL;
    }
    int64_t n = array_length(env, paths, "paths must be a non-empty array of profile files "
                                         "or folders");
    if (n < 0)
        goto fail;
    if (n == 0) {
        throw_msg(env, "ERR_INVALID_ARG_TYPE",
                  "report: paths must be a non-empty array of profile files or folders");
        goto fail;
    }
    const char **list = keep_or_throw(env, q, calloc((size_t)n, sizeof *list));
    if (!list)
        goto fail;
    q->job.r.paths = list;
    for (int64_t i = 0; i < n; i++) {
        napi_value p;
        napi_get_element(env, paths, (uint32_t)i, &p);
        if (!(list[i] = own_string(env, q, p, "report: each path must be a string")))
            goto fail;
    }
    q->job.r.npaths = (size_t)n;
    if (is_nullish(env, opts)) {
        napi_create_object(env, &opts);
    } else {
        napi_valuetype t;
        napi_typeof(env, opts, &t);
        if (t != napi_object) {
            throw_msg(env, "ERR_INVALID_ARG_TYPE", "report: options must be an object");
            goto fail;
        }
    }
    napi_value top = prop(env, opts, "top");
    double d = 0;
    if (!is_nullish(env, top) &&
        (js_double(env, top, &d) != 0 || !(d >= 0 && d <= 1e6) || d != (double)(uint32_t)d)) {
        throw_msg(env, "ERR_INVALID_ARG_VALUE", "report: top must be a whole number >= 0");
        goto fail;
    }
    q->job.r.top = (size_t)d;
    if (opt_string(env, q, opts, "output", &q->job.r.html) != 0 ||
        opt_string(env, q, opts, "title", &q->job.r.title) != 0 ||
        opt_string(env, q, opts, "view", &q->job.r.view) != 0 ||
        opt_string(env, q, opts, "groupBy", &q->job.r.group_by) != 0 ||
        opt_pairs(env, q, opts, "filter", &q->job.r.filters, &q->job.r.nfilters) != 0 ||
        opt_pairs(env, q, opts, "diffA", &q->job.r.diff_a, &q->job.r.ndiff_a) != 0 ||
        opt_pairs(env, q, opts, "diffB", &q->job.r.diff_b, &q->job.r.ndiff_b) != 0)
        goto fail;
    if ((q->job.r.diff_a != NULL) != (q->job.r.diff_b != NULL)) {
        throw_msg(env, "ERR_INVALID_ARG_VALUE", "report: diffA and diffB go together");
        goto fail;
    }
    q->job.r.diff = q->job.r.diff_a != NULL;
    return q;
fail:
    request_free(q);
    return NULL;
}

static napi_value request_result(napi_env env, const request *q)
{
    napi_value o, s;
    napi_create_object(env, &o);
    set_num(env, o, "profiles", (double)q->job.profiles);
    napi_create_string_utf8(env, q->job.text ? q->job.text : "", q->job.text ? q->job.text_len : 0, &s);
    napi_set_named_property(env, o, "text", s);
    return o;
}

/* An Error like throw_pn's, as a value (to reject with). */
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

static napi_value m_report_async(napi_env env, napi_callback_info info)
{
    napi_value argv[2], promise, name;
    js_args(env, info, argv, 2);
    request *q = request_read(env, argv[0], argv[1]);
    if (!q)
        return NULL;
    napi_create_promise(env, &q->deferred, &promise);
    napi_create_string_utf8(env, "pyroscope-report", NAPI_AUTO_LENGTH, &name);
    if (napi_create_async_work(env, NULL, name, async_execute, async_complete, q, &q->work) !=
            napi_ok ||
        napi_queue_async_work(env, q->work) != napi_ok) {
        request_free(q); /* the deferred is left pending; the throw is what the caller sees */
        return throw_msg(env, "ERR_PYROSCOPE", "report: cannot queue the work");
    }
    return promise;
}

/* pages -> [{type, page, paths, total}] (freed). */
static napi_value pages_value(napi_env env, pn_folder_pages *p)
{
    napi_value arr, o, v;
    napi_create_array(env, &arr);
    for (size_t i = 0; i < p->n; i++) {
        const pn_folder_page *g = &p->pages[i];
        napi_create_object(env, &o);
        napi_create_string_utf8(env, g->type, NAPI_AUTO_LENGTH, &v);
        napi_set_named_property(env, o, "type", v);
        napi_create_string_utf8(env, g->page, NAPI_AUTO_LENGTH, &v);
        napi_set_named_property(env, o, "page", v);
        napi_create_double(env, (double)g->total, &v);
        napi_set_named_property(env, o, "total", v);
        napi_value paths;
        napi_create_array_with_length(env, g->npaths, &paths);
        for (size_t j = 0; j < g->npaths; j++) {
            napi_create_string_utf8(env, g->paths[j], NAPI_AUTO_LENGTH, &v);
            napi_set_element(env, paths, (uint32_t)j, v);
        }
        napi_set_named_property(env, o, "paths", paths);
        napi_set_element(env, arr, (uint32_t)i, o);
    }
    pn_folder_pages_free(p);
    return arr;
}

/* The one argument, a folder (malloc'ed; NULL: thrown). */
static char *dir_arg(napi_env env, napi_callback_info info, const char *what)
{
    napi_value argv[1];
    js_args(env, info, argv, 1);
    return js_string(env, argv[0], what);
}

/* folderPages(dir) -> the folder's profiles by type (pn_folder_pages_read). */
static napi_value m_folder_pages(napi_env env, napi_callback_info info)
{
    char *dir = dir_arg(env, info, "folderPages: dir must be a string");
    if (!dir)
        return NULL;
    pn_folder_pages p;
    pn_error e = {0};
    int rc = pn_folder_pages_read(dir, 0, &p, &e);
    free(dir);
    return rc == 0 ? pages_value(env, &p) : throw_pn(env, &e);
}

/* runBegin(dir): the run report begins, dir's listing remembered. */
static napi_value m_run_begin(napi_env env, napi_callback_info info)
{
    char *dir = dir_arg(env, info, "runBegin: dir must be a string");
    if (!dir)
        return NULL;
    pn_error e = {0};
    int rc = pn_folder_run_begin(dir, &e);
    free(dir);
    return rc == 0 ? js_undefined(env) : throw_pn(env, &e);
}

/* runOutput() -> {dir, app} of the running agent when it writes to a
 * folder, else null. */
static napi_value m_run_output(napi_env env, napi_callback_info info)
{
    (void)info;
    pn_agent *a = agent_current();
    const pn_config *c = a ? pn_agent_config(a) : NULL;
    napi_value o, s;
    if (!c || !c->output_dir || !*c->output_dir) {
        napi_get_null(env, &o);
        return o;
    }
    napi_create_object(env, &o);
    napi_create_string_utf8(env, c->output_dir, NAPI_AUTO_LENGTH, &s);
    napi_set_named_property(env, o, "dir", s);
    napi_create_string_utf8(env, c->application_name ? c->application_name : "",
                            NAPI_AUTO_LENGTH, &s);
    napi_set_named_property(env, o, "app", s);
    return o;
}

/* runEnd() -> the pages of the files written since runBegin ([] when none). */
static napi_value m_run_end(napi_env env, napi_callback_info info)
{
    (void)info;
    pn_folder_pages p;
    pn_error e = {0};
    return pn_folder_run_end(&p, &e) == 0 ? pages_value(env, &p) : throw_pn(env, &e);
}

void report_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "report", m_report);
    set_fn(env, exports, "reportAsync", m_report_async);
    set_fn(env, exports, "folderPages", m_folder_pages);
    set_fn(env, exports, "runOutput", m_run_output);
    set_fn(env, exports, "runBegin", m_run_begin);
    set_fn(env, exports, "runEnd", m_run_end);
}
