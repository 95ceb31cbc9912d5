/*
 * Reports of saved profiles: the core's report library (pyroscope_report.h)
 * for Ruby. The core resolves the options (pn_report_job_prepare) and writes
 * the run's pages (pn_run_report_write); this file maps Ruby values to them.
 *
 *   report(paths, opts) -> [profiles, text, output, type, other_types]
 *   opts: {output: (absent: the default; nil: none), title:, type:,
 *   group_by:, top: (absent: the default), filter:, diff_a:, diff_b:}; a
 *   selection is a "k=v,..." String or an Array of such Strings and
 *   [key, value] pairs. Raises Pyroscope::ReportError for bad options,
 *   Pyroscope::Native::Error when a profile cannot be read or the page
 *   cannot be written.
 *   run_report(app): the run's pages written (the core logs them); never
 *   raises.
 *   report_command(prog, argv) -> [status, stdout text, stderr text]: the
 *   core's `report` command line (the gem's CLI).
 *
 * (Not report.c: mkmf builds every source into one folder, beside the
 * core's report/report.c.)
 *
 * Threads: the options are copied under the GVL into jobs owned by a Ruby
 * object (freed by the GC, so a raise never leaks them); the reading and
 * writing run without the GVL and touch only the job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h" /* ruby.h, which ruby/thread.h needs first from 3.3 on */
#include "pyroscope_report.h"
#include <ruby/thread.h>

typedef struct {
    pn_report_job job;
    pn_report_job tmp; /* owns what the options point to */
} request;

static void request_free(void *p)
{
    request *q = p;
    pn_report_job_clear(&q->job);
    pn_report_job_clear(&q->tmp);
    free(q);
}

static const rb_data_type_t request_type = {
    .wrap_struct_name = "pyroscope_native_report",
    .function = {.dfree = request_free},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY};

static void *keep_or_raise(request *q, void *block)
{
    void *kept = pn_report_job_keep(&q->tmp, block);
    if (!kept)
        rb_raise(rb_eNoMemError, "report: out of memory");
    return kept;
}

/* A String (Symbol, number) copied; "" for another type, which the core
 * names as a bad value of its option. */
static const char *str_of(request *q, VALUE v)
{
    if (RB_TYPE_P(v, T_SYMBOL) || RB_INTEGER_TYPE_P(v) || RB_FLOAT_TYPE_P(v))
        v = rb_obj_as_string(v);
    return keep_or_raise(q, strdup(RB_TYPE_P(v, T_STRING) ? StringValueCStr(v) : ""));
}

static VALUE opt(VALUE opts, const char *name)
{
    return rb_hash_lookup2(opts, ID2SYM(rb_intern(name)), Qundef);
}

static const char *opt_str(request *q, VALUE opts, const char *name)
{
    VALUE v = opt(opts, name);
    return v == Qundef || NIL_P(v) ? NULL : str_of(q, v);
}

/* A selection: a String, or an Array of Strings and [key, value] pairs. */
static const pn_label *opt_pairs(request *q, VALUE opts, const char *name, size_t *n)
{
    VALUE sel = opt(opts, name);
    *n = 0;
    if (sel == Qundef || NIL_P(sel))
        return NULL;
    sel = RB_TYPE_P(sel, T_ARRAY) ? sel : rb_ary_new_from_args(1, sel);
    long len = RARRAY_LEN(sel);
    pn_label *l = keep_or_raise(q, calloc((size_t)len + 1, sizeof *l));
    for (long i = 0; i < len; i++) {
        VALUE item = rb_ary_entry(sel, i);
        if (RB_TYPE_P(item, T_ARRAY) && RARRAY_LEN(item) == 2) {
            l[i].key = str_of(q, rb_obj_as_string(rb_ary_entry(item, 0)));
            l[i].value = str_of(q, rb_obj_as_string(rb_ary_entry(item, 1)));
        } else {
            l[i].value = str_of(q, RB_TYPE_P(item, T_STRING) ? item : rb_inspect(item));
        }
    }
    *n = (size_t)len;
    return l;
}

static void *job_run(void *p)
{
    pn_report_job_run(p);
    return NULL;
}

static VALUE str_or_nil(const char *s)
{
    return s ? rb_str_new_cstr(s) : Qnil;
}

static void raise_report(const pn_error *e)
{
    if (e->code == PN_EINVAL)
        rb_raise(rb_path2class("Pyroscope::ReportError"), "%s", e->msg);
    rb_raise(g_eError, "%s", e->msg[0] ? e->msg : "report failed");
}

static VALUE m_report(VALUE self, VALUE paths, VALUE opts)
{
    (void)self;
    request *q;
    VALUE holder = TypedData_Make_Struct(rb_cObject, request, &request_type, q);
    Check_Type(opts, T_HASH);
    pn_report_options o = {.caller = "write_report"};
    o.npaths = RB_TYPE_P(paths, T_ARRAY) ? (size_t)RARRAY_LEN(paths) : 0;
    const char **list = keep_or_raise(q, calloc(o.npaths + 1, sizeof *list));
    for (size_t i = 0; i < o.npaths; i++)
        list[i] = str_of(q, rb_ary_entry(paths, (long)i));
    o.paths = list;
    VALUE output = opt(opts, "output"), top = opt(opts, "top");
    o.no_output = NIL_P(output);
    o.output = output == Qundef || NIL_P(output) ? NULL : str_of(q, output);
    o.title = opt_str(q, opts, "title");
    o.type = opt_str(q, opts, "type");
    o.group_by = opt_str(q, opts, "group_by");
    o.filter = opt_pairs(q, opts, "filter", &o.nfilter);
    o.diff_a = opt_pairs(q, opts, "diff_a", &o.ndiff_a);
    o.diff_b = opt_pairs(q, opts, "diff_b", &o.ndiff_b);
    o.diff = o.diff_a || o.diff_b;
    o.has_top = top != Qundef;
    /* a top that is no Integer is refused by the core as a negative one */
    o.top = o.has_top && RB_INTEGER_TYPE_P(top) ? NUM2LL(top) : -1;
    pn_error e = {0};
    if (pn_report_job_prepare(&q->job, &o, &e) != 0)
        raise_report(&e);
    rb_thread_call_without_gvl(job_run, &q->job, RUBY_UBF_IO, NULL);
    const pn_report_job *j = &q->job;
    if (j->rc != 0)
        raise_report(&j->err);
    VALUE others = rb_ary_new_capa((long)j->nother_types);
    for (size_t i = 0; i < j->nother_types; i++)
        rb_ary_push(others, rb_str_new_cstr(j->other_types[i]));
    VALUE text = rb_utf8_str_new(j->text ? j->text : "", j->text ? (long)j->text_len : 0);
    VALUE out = rb_ary_new_from_args(5, SIZET2NUM(j->profiles), text, str_or_nil(j->r.html),
                                     str_or_nil(j->type), others);
    RB_GC_GUARD(holder);
    return out;
}

typedef struct {
    pn_report_command c;
    pn_report_command_result r;
} command;

static void *command_run(void *p)
{
    command *m = p;
    pn_report_command_run(&m->c, &m->r);
    return NULL;
}

/* report_command(prog, argv) -> [status, stdout text, stderr text]: the
 * core's `report` program (argv: "report" and its words, or -h); the CLI
 * prints what it returns. */
static VALUE m_report_command(VALUE self, VALUE prog, VALUE argv)
{
    (void)self;
    request *q;
    VALUE holder = TypedData_Make_Struct(rb_cObject, request, &request_type, q);
    Check_Type(argv, T_ARRAY);
    size_t n = (size_t)RARRAY_LEN(argv);
    const char **words = keep_or_raise(q, calloc(n + 1, sizeof *words));
    for (size_t i = 0; i < n; i++)
        words[i] = str_of(q, rb_ary_entry(argv, (long)i));
    command m = {.c = {.prog = str_of(q, prog), .with_command = 1, .words = words, .nwords = n}};
    rb_thread_call_without_gvl(command_run, &m, RUBY_UBF_IO, NULL);
    /* the texts go to the holder, freed by the GC even if a raise follows */
    const char *out = pn_report_job_keep(&q->tmp, m.r.out);
    const char *err = pn_report_job_keep(&q->tmp, m.r.err);
    VALUE result = rb_ary_new_from_args(3, INT2NUM(m.r.status), rb_utf8_str_new_cstr(out ? out : ""),
                                        rb_utf8_str_new_cstr(err ? err : ""));
    RB_GC_GUARD(holder);
    return result;
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

static void *run_report(void *p)
{
    pn_run_report_result r;
    pn_run_report_write(p, &r);
    pn_run_report_result_free(&r);
    return NULL;
}

/* run_report(app): the pages of the files written since run_begin, written
 * and logged by the core. */
static VALUE m_run_report(VALUE self, VALUE app)
{
    (void)self;
    char *copy = strdup(StringValueCStr(app));
    pn_run_report q = {.app = copy};
    rb_thread_call_without_gvl(run_report, &q, RUBY_UBF_IO, NULL);
    free(copy);
    return Qnil;
}

void report_init(VALUE mNative)
{
    rb_define_module_function(mNative, "report", m_report, 2);
    rb_define_module_function(mNative, "report_command", m_report_command, 2);
    rb_define_module_function(mNative, "run_begin", m_run_begin, 1);
    rb_define_module_function(mNative, "run_report", m_run_report, 1);
}
