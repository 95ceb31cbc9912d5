/*
 * Reports of saved profiles: the core's report library (pyroscope_report.h)
 * for Ruby, as Pyroscope::Native.report.
 *
 *   report(paths, html, title, top, filter, group_by, diff_a, diff_b, view)
 *     -> [profiles read, text]
 *   paths: Array of String (profile files or folders); html: String or nil
 *   (no page); top: Integer >= 0 (0: no top table); filter, diff_a, diff_b:
 *   Array of [key, value] (diff_a/diff_b nil: no diff); group_by: String or
 *   nil; view: the page's initial view in its URL-fragment syntax.
 *   Raises ArgumentError / TypeError for bad arguments, Pyroscope::Native::
 *   Error when a profile cannot be read or the page cannot be written.
 *
 * (Not report.c: mkmf builds every source into one folder, beside the
 * core's report/report.c.)
 *
 * Threads: the arguments are copied under the GVL into a request owned by
 * a Ruby object (freed by the GC, so a raise never leaks it); the reading
 * and writing run without the GVL and touch only the request.
 */
#include <ruby/thread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"
#include "pyroscope_report.h"

typedef struct {
    char **paths;
    long npaths;
    char *html, *title, *view, *group_by;
    pn_label *filters, *diff_a, *diff_b;
    long nfilters, ndiff_a, ndiff_b;
    int has_diff;
    long top;
    /* out */
    size_t profiles;
    char *text;
    size_t text_len;
    pn_error err;
    int rc;
} request;

static void free_pairs(pn_label *l, long n)
{
    for (long i = 0; l && i < n; i++) {
        free((char *)l[i].key);
        free((char *)l[i].value);
    }
    free(l);
}

static void request_free(void *p)
{
    request *q = p;
    for (long i = 0; q->paths && i < q->npaths; i++)
        free(q->paths[i]);
    free(q->paths);
    free(q->html);
    free(q->title);
    free(q->view);
    free(q->group_by);
    free_pairs(q->filters, q->nfilters);
    free_pairs(q->diff_a, q->ndiff_a);
    free_pairs(q->diff_b, q->ndiff_b);
    free(q->text);
    free(q);
}

static const rb_data_type_t request_type = {
    .wrap_struct_name = "pyroscope_native_report",
    .function = {.dfree = request_free},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY};

/* A malloc'ed copy of a String (TypeError naming what otherwise; a NUL
 * inside raises ArgumentError). */
static char *copy_str(VALUE v, const char *what)
{
    if (!RB_TYPE_P(v, T_STRING))
        rb_raise(rb_eTypeError, "report: %s must be a String", what);
    const char *s = StringValueCStr(v);
    char *c = strdup(s);
    if (!c)
        rb_raise(rb_eNoMemError, "report: out of memory");
    return c;
}

static char *copy_opt_str(VALUE v, const char *what)
{
    return NIL_P(v) ? NULL : copy_str(v, what);
}

/* [[key, value], ...] into *out (allocated with room for every pair; *n
 * counts the filled ones, so a raise part way frees what was copied). */
static void copy_pairs(VALUE arr, const char *what, pn_label **out, long *n)
{
    if (!RB_TYPE_P(arr, T_ARRAY))
        rb_raise(rb_eTypeError, "report: %s must be an Array of [key, value]", what);
    long len = RARRAY_LEN(arr);
    *out = calloc((size_t)len + 1, sizeof **out);
    if (!*out)
        rb_raise(rb_eNoMemError, "report: out of memory");
    for (long i = 0; i < len; i++) {
        VALUE kv = rb_ary_entry(arr, i);
        if (!RB_TYPE_P(kv, T_ARRAY) || RARRAY_LEN(kv) != 2)
            rb_raise(rb_eTypeError, "report: %s[%ld] must be a [key, value] pair", what, i);
        (*out)[i].key = copy_str(rb_ary_entry(kv, 0), what);
        *n = i + 1;
        (*out)[i].value = copy_str(rb_ary_entry(kv, 1), what);
    }
    *n = len;
}

/* The core's one-call report. No GVL: touches only the request. */
static void *report_run(void *p)
{
    request *q = p;
    pn_report_request r = {
        .paths = (const char *const *)q->paths, .npaths = (size_t)q->npaths,
        .html = q->html, .title = q->title, .view = q->view,
        .filters = q->filters, .nfilters = (size_t)q->nfilters, .group_by = q->group_by,
        .diff = q->has_diff, .diff_a = q->diff_a, .ndiff_a = (size_t)q->ndiff_a,
        .diff_b = q->diff_b, .ndiff_b = (size_t)q->ndiff_b, .top = (size_t)q->top,
    };
    q->rc = pn_report_run(&r, &q->profiles, &q->text, &q->text_len, &q->err);
    return NULL;
}

static VALUE m_report(VALUE self, VALUE paths, VALUE html, VALUE title, VALUE top, VALUE filter,
                      VALUE group_by, VALUE diff_a, VALUE diff_b, VALUE view)
{
    (void)self;
    request *q;
    VALUE holder = TypedData_Make_Struct(rb_cObject, request, &request_type, q);
    if (!RB_TYPE_P(paths, T_ARRAY) || RARRAY_LEN(paths) == 0)
        rb_raise(rb_eArgError, "report: paths must be a non-empty Array of profile files or "
                               "folders");
    long n = RARRAY_LEN(paths);
    if (!(q->paths = calloc((size_t)n, sizeof *q->paths)))
        rb_raise(rb_eNoMemError, "report: out of memory");
    for (long i = 0; i < n; i++) {
        q->paths[i] = copy_str(rb_ary_entry(paths, i), "each path");
        q->npaths = i + 1;
    }
    q->top = NUM2LONG(top);
    if (q->top < 0)
        rb_raise(rb_eArgError, "report: top must be >= 0");
    q->html = copy_opt_str(html, "html");
    q->title = copy_str(title, "title");
    q->view = copy_str(view, "view");
    q->group_by = copy_opt_str(group_by, "group_by");
    copy_pairs(filter, "filter", &q->filters, &q->nfilters);
    if (NIL_P(diff_a) != NIL_P(diff_b))
        rb_raise(rb_eArgError, "report: diff_a and diff_b go together");
    if (!NIL_P(diff_a)) {
        q->has_diff = 1;
        copy_pairs(diff_a, "diff_a", &q->diff_a, &q->ndiff_a);
        copy_pairs(diff_b, "diff_b", &q->diff_b, &q->ndiff_b);
    }
    rb_thread_call_without_gvl(report_run, q, RUBY_UBF_IO, NULL);
    if (q->rc != 0)
        rb_raise(g_eError, "%s", q->err.msg[0] ? q->err.msg : "report failed");
    VALUE text = rb_utf8_str_new(q->text ? q->text : "", q->text ? (long)q->text_len : 0);
    VALUE out = rb_ary_new_from_args(2, SIZET2NUM(q->profiles), text);
    RB_GC_GUARD(holder);
    return out;
}

void report_init(VALUE mNative)
{
    rb_define_module_function(mNative, "report", m_report, 9);
}
