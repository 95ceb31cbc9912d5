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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h" /* ruby.h, which ruby/thread.h needs first from 3.3 on */
#include "pyroscope_report.h"
#include <ruby/thread.h>

/* The job owns the request's strings and lists (pn_report_job_keep). */
typedef pn_report_job request;

static void request_free(void *p)
{
    pn_report_job_clear(p);
    free(p);
}

static const rb_data_type_t request_type = {
    .wrap_struct_name = "pyroscope_native_report",
    .function = {.dfree = request_free},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY};

/* A zeroed block kept by the job (NoMemError when there is none). */
static void *keep_or_raise(request *q, void *block)
{
    void *kept = pn_report_job_keep(q, block);
    if (!kept)
        rb_raise(rb_eNoMemError, "report: out of memory");
    return kept;
}

/* A copy of a String, kept by the job (TypeError naming what for
 * another type; a NUL inside raises ArgumentError). */
static const char *own_str(request *q, VALUE v, const char *what)
{
    if (!RB_TYPE_P(v, T_STRING))
        rb_raise(rb_eTypeError, "report: %s must be a String", what);
    const char *s = StringValueCStr(v);
    return keep_or_raise(q, strdup(s));
}

static const char *own_opt_str(request *q, VALUE v, const char *what)
{
    return NIL_P(v) ? NULL : own_str(q, v, what);
}

/* [[key, value], ...] -> labels, owned by the request as soon as made. */
static void own_pairs(request *q, VALUE arr, const char *what, const pn_label **out, size_t *n)
{
    if (!RB_TYPE_P(arr, T_ARRAY))
        rb_raise(rb_eTypeError, "report: %s must be an Array of [key, value]", what);
    long len = RARRAY_LEN(arr);
    pn_label *l = keep_or_raise(q, calloc((size_t)len + 1, sizeof *l));
    *out = l;
    for (long i = 0; i < len; i++) {
        VALUE kv = rb_ary_entry(arr, i);
        if (!RB_TYPE_P(kv, T_ARRAY) || RARRAY_LEN(kv) != 2)
            rb_raise(rb_eTypeError, "report: %s[%ld] must be a [key, value] pair", what, i);
        l[i].key = own_str(q, rb_ary_entry(kv, 0), what);
        l[i].value = own_str(q, rb_ary_entry(kv, 1), what);
    }
    *n = (size_t)len;
}

/* The core's one-call report. No GVL: touches only the request. */
static void *report_run(void *p)
{
    request *q = p;
    pn_report_job_run(q);
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
    const char **list = keep_or_raise(q, calloc((size_t)n, sizeof *list));
    q->r.paths = list;
    for (long i = 0; i < n; i++)
        list[i] = own_str(q, rb_ary_entry(paths, i), "each path");
    q->r.npaths = (size_t)n;
    long t = NUM2LONG(top);
    if (t < 0)
        rb_raise(rb_eArgError, "report: top must be >= 0");
    q->r.top = (size_t)t;
    q->r.html = own_opt_str(q, html, "html");
    q->r.title = own_str(q, title, "title");
    q->r.view = own_str(q, view, "view");
    q->r.group_by = own_opt_str(q, group_by, "group_by");
    own_pairs(q, filter, "filter", &q->r.filters, &q->r.nfilters);
    if (NIL_P(diff_a) != NIL_P(diff_b))
        rb_raise(rb_eArgError, "report: diff_a and diff_b go together");
    if (!NIL_P(diff_a)) {
        q->r.diff = 1;
        own_pairs(q, diff_a, "diff_a", &q->r.diff_a, &q->r.ndiff_a);
        own_pairs(q, diff_b, "diff_b", &q->r.diff_b, &q->r.ndiff_b);
    }
    rb_thread_call_without_gvl(report_run, q, RUBY_UBF_IO, NULL);
    if (q->rc != 0)
        rb_raise(g_eError, "%s", q->err.msg[0] ? q->err.msg : "report failed");
    VALUE text = rb_utf8_str_new(q->text ? q->text : "", q->text ? (long)q->text_len : 0);
    VALUE out = rb_ary_new_from_args(2, SIZET2NUM(q->profiles), text);
    RB_GC_GUARD(holder);
    return out;
}

/* pages -> [{"type", "page", "paths", "total"}, ...] (freed). */
static VALUE pages_value(pn_folder_pages *p)
{
    VALUE out = rb_ary_new_capa((long)p->n);
    for (size_t i = 0; i < p->n; i++) {
        const pn_folder_page *g = &p->pages[i];
        VALUE h = rb_hash_new(), paths = rb_ary_new_capa((long)g->npaths);
        for (size_t j = 0; j < g->npaths; j++)
            rb_ary_push(paths, rb_str_new_cstr(g->paths[j]));
        rb_hash_aset(h, rb_str_new_cstr("type"), rb_str_new_cstr(g->type));
        rb_hash_aset(h, rb_str_new_cstr("page"), rb_str_new_cstr(g->page));
        rb_hash_aset(h, rb_str_new_cstr("paths"), paths);
        rb_hash_aset(h, rb_str_new_cstr("total"), SIZET2NUM(g->total));
        rb_ary_push(out, h);
    }
    pn_folder_pages_free(p);
    return out;
}

/* folder_pages(dir): the folder's profiles by type (the core's pages). */
static VALUE m_folder_pages(VALUE self, VALUE dir)
{
    (void)self;
    pn_folder_pages p;
    pn_error e = {0};
    if (pn_folder_pages_read(StringValueCStr(dir), 0, &p, &e) != 0)
        raise_pn_error(&e);
    return pages_value(&p);
}

/* run_begin(dir): the run report begins (dir's listing remembered). */
static VALUE m_run_begin(VALUE self, VALUE dir)
{
    (void)self;
    pn_error e = {0};
    if (pn_folder_run_begin(StringValueCStr(dir), &e) != 0)
        raise_pn_error(&e);
    return Qnil;
}

/* run_end: the pages of the files written since run_begin ([] when none). */
static VALUE m_run_end(VALUE self)
{
    (void)self;
    pn_folder_pages p;
    pn_error e = {0};
    if (pn_folder_run_end(&p, &e) != 0)
        raise_pn_error(&e);
    return pages_value(&p);
}

void report_init(VALUE mNative)
{
    rb_define_module_function(mNative, "report", m_report, 9);
    rb_define_module_function(mNative, "folder_pages", m_folder_pages, 1);
    rb_define_module_function(mNative, "run_begin", m_run_begin, 1);
    rb_define_module_function(mNative, "run_end", m_run_end, 0);
}
