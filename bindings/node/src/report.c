/* Reports of saved profiles: the core's report library (pyroscope_report.h)
 * for JS, as the flame graph page and the text tables.
 *
 *   report(paths, opts) -> {profiles, text}            (synchronous)
 *   reportAsync(paths, opts) -> Promise<{profiles, text}> (reads off the
 *     main thread, on libuv's pool)
 *   opts: {output: html path | null, title, view (the page's URL-fragment
 *     syntax), top: n (0: no table), filter: [[k, v], ...], groupBy: key |
 *     null, diffA / diffB: [[k, v], ...] | null}
 *   runOutput() -> {dir, app} of the running agent's folder output, or null
 *
 * Threads: the request is read from JS and the result built on the main JS
 * thread; report_run() touches only the request (its own copies of every
 * string), so the async variant runs it on a pool thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"
#include "pyroscope_report.h"

typedef struct {
    /* in: owned copies */
    char **paths;
    size_t npaths;
    char *output, *title, *view, *group_by;
    pn_label *filters, *diff_a, *diff_b;
    size_t nfilters, ndiff_a, ndiff_b;
    int has_diff;
    uint32_t top;
    /* out */
    size_t profiles;
    char *text;
    size_t text_len;
    pn_error err;
    int rc;
    /* async only */
    napi_deferred deferred;
    napi_async_work work;
} request;

static void free_pairs(pn_label *l, size_t n)
{
    for (size_t i = 0; l && i < n; i++) {
        free((char *)l[i].key);
        free((char *)l[i].value);
    }
    free(l);
}

static void request_free(request *q)
{
    if (!q)
        return;
    for (size_t i = 0; q->paths && i < q->npaths; i++)
        free(q->paths[i]);
    free(q->paths);
    free(q->output);
    free(q->title);
    free(q->view);
    free(q->group_by);
    free_pairs(q->filters, q->nfilters);
    free_pairs(q->diff_a, q->ndiff_a);
    free_pairs(q->diff_b, q->ndiff_b);
    free(q->text);
    free(q);
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
static int opt_string(napi_env env, napi_value opts, const char *name, char **out)
{
    napi_value v = prop(env, opts, name);
    *out = NULL;
    if (is_nullish(env, v))
        return 0;
    char what[120];
    snprintf(what, sizeof what, "report: %s must be a string", name);
    *out = js_string(env, v, what);
    return *out ? 0 : -1;
}

/* [[key, value], ...] -> labels (NULL, 0 when absent). */
static int opt_pairs(napi_env env, napi_value opts, const char *name, pn_label **out,
                     size_t *n, int *given)
{
    napi_value arr = prop(env, opts, name);
    *out = NULL;
    *n = 0;
    if (given)
        *given = 0;
    if (is_nullish(env, arr))
        return 0;
    bool is;
    uint32_t len = 0;
    if (napi_is_array(env, arr, &is) != napi_ok || !is ||
        napi_get_array_length(env, arr, &len) != napi_ok) {
        throw_msg(env, "ERR_INVALID_ARG_TYPE", "report: %s must be an array of [key, value]",
                  name);
        return -1;
    }
    if (given)
        *given = 1;
    *out = calloc((size_t)len + 1, sizeof **out);
    if (!*out) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return -1;
    }
    char what[160];
    snprintf(what, sizeof what, "report: %s: each label key and value must be a string", name);
    for (uint32_t i = 0; i < len; i++) {
        napi_value kv, k, v;
        uint32_t kvlen = 0;
        if (napi_get_element(env, arr, i, &kv) != napi_ok ||
            napi_is_array(env, kv, &is) != napi_ok || !is ||
            napi_get_array_length(env, kv, &kvlen) != napi_ok || kvlen != 2) {
            throw_msg(env, "ERR_INVALID_ARG_TYPE", "report: %s[%u] must be a [key, value] pair",
                      name, i);
            return -1;
        }
        napi_get_element(env, kv, 0, &k);
        napi_get_element(env, kv, 1, &v);
        (*out)[i].key = js_string(env, k, what);
        if (!(*out)[i].key)
            return -1;
        *n = (size_t)i + 1; /* from here on the entry is freed with the rest */
        (*out)[i].value = js_string(env, v, what);
        if (!(*out)[i].value)
            return -1;
    }
    *n = len;
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
    bool is;
    uint32_t n = 0;
    if (napi_is_array(env, paths, &is) != napi_ok || !is ||
        napi_get_array_length(env, paths, &n) != napi_ok || n == 0) {
        throw_msg(env, "ERR_INVALID_ARG_TYPE",
                  "report: paths must be a non-empty array of profile files or folders");
        goto fail;
    }
    if (!(q->paths = calloc(n, sizeof *q->paths))) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        napi_value p;
        napi_get_element(env, paths, i, &p);
        if (!(q->paths[i] = js_string(env, p, "report: each path must be a string")))
            goto fail;
        q->npaths = (size_t)i + 1;
    }
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
    q->top = (uint32_t)d;
    if (opt_string(env, opts, "output", &q->output) != 0 ||
        opt_string(env, opts, "title", &q->title) != 0 ||
        opt_string(env, opts, "view", &q->view) != 0 ||
        opt_string(env, opts, "groupBy", &q->group_by) != 0 ||
        opt_pairs(env, opts, "filter", &q->filters, &q->nfilters, NULL) != 0 ||
        opt_pairs(env, opts, "diffA", &q->diff_a, &q->ndiff_a, &q->has_diff) != 0 ||
        opt_pairs(env, opts, "diffB", &q->diff_b, &q->ndiff_b, NULL) != 0)
        goto fail;
    if (q->has_diff != (q->diff_b != NULL)) {
        throw_msg(env, "ERR_INVALID_ARG_VALUE", "report: diffA and diffB go together");
        goto fail;
    }
    return q;
fail:
    request_free(q);
    return NULL;
}

/* The core's one-call report. Any thread: touches only q. */
static void report_run(request *q)
{
    pn_report_request r = {
        .paths = (const char *const *)q->paths, .npaths = q->npaths,
        .html = q->output, .title = q->title, .view = q->view,
        .filters = q->filters, .nfilters = q->nfilters, .group_by = q->group_by,
        .diff = q->has_diff, .diff_a = q->diff_a, .ndiff_a = q->ndiff_a,
        .diff_b = q->diff_b, .ndiff_b = q->ndiff_b, .top = q->top,
    };
    q->rc = pn_report_run(&r, &q->profiles, &q->text, &q->text_len, &q->err);
}

static napi_value request_result(napi_env env, const request *q)
{
    napi_value o, s;
    napi_create_object(env, &o);
    set_num(env, o, "profiles", (double)q->profiles);
    napi_create_string_utf8(env, q->text ? q->text : "", q->text ? q->text_len : 0, &s);
    napi_set_named_property(env, o, "text", s);
    return o;
}

/* An Error like throw_pn's, as a value (to reject with). */
static napi_value request_error(napi_env env, const request *q)
{
    napi_value code, msg, err;
    napi_create_string_utf8(env, q->err.code == PN_EINVAL ? "ERR_PYROSCOPE_REPORT" : "ERR_PYROSCOPE",
                            NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, q->err.msg[0] ? q->err.msg : "report failed", NAPI_AUTO_LENGTH,
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
    report_run(q);
    napi_value out = NULL;
    if (q->rc != 0)
        napi_throw(env, request_error(env, q));
    else
        out = request_result(env, q);
    request_free(q);
    return out;
}

static void async_execute(napi_env env, void *data)
{
    (void)env;
    report_run(data);
}

static void async_complete(napi_env env, napi_status status, void *data)
{
    request *q = data;
    if (status != napi_ok && q->rc == 0)
        q->rc = pn_fail(&q->err, PN_ESTATE, "report: cancelled");
    if (q->rc != 0)
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

void report_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "report", m_report);
    set_fn(env, exports, "reportAsync", m_report_async);
    set_fn(env, exports, "runOutput", m_run_output);
}
