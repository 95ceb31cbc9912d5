/* Pyroscope::Native: module init and the start/stop glue between the Ruby
 * API (lib/pyroscope.rb) and the core's agent with one rendezvous driver.
 *
 * State: g_agent and the saved start arguments are written under the GVL
 * by start/stop; g_driver is published to the handler with an atomic store
 * and retired before the agent stops (handlers in flight are waited for,
 * so none touches a freed slot). */
#include "native.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ruby/thread.h>
#include <ruby/version.h>
#include <ruby/vm.h>

_Atomic(pn_driver *) g_driver;
int g_max_depth = 128;
int g_thread_names;
VALUE g_mNative, g_eConfigError, g_eError;

static pn_agent *g_agent;       /* GVL */
static VALUE last_start = Qnil; /* GVL: [settings, env] of the last start */
static VALUE last_stats = Qnil; /* GVL: stats at the last stop */
/* Signal handlers between their check of g_driver and their return. */
static atomic_int handlers_active;

HANDLER_PATH void handler_enter(void) { atomic_fetch_add(&handlers_active, 1); }
HANDLER_PATH void handler_exit(void) { atomic_fetch_sub(&handlers_active, 1); }

void raise_pn_error(const pn_error *e)
{
    /* a wrong type too: the gem's users rescue ArgumentError */
    rb_raise(e->code == PN_EINVAL || e->code == PN_ETYPE ? g_eConfigError : g_eError, "%s",
             e->msg);
}

/* ------------------------------------------------------------- settings */

/* Ruby's words in the core's errors ("sample_rate must be a number, not
 * Symbol"). Text is read like a variable's: the pyroscope gem's users set
 * numbers and switches from ENV (`c.sample_rate = ENV["RATE"]`). */
static const pn_arg_words ruby_words = {
    .text = "a String", .boolean = "true or false", .number = "a number",
    .integer = "an Integer", .level = "a String (trace, debug, info, warn, error) or an Integer",
    .pairs = "a Hash", .text_parsed = 1};

/* A Hash's entries as the gem sent them: to_s of each key and value, a nil
 * value left out (lib/pyroscope/config.rb warns), at most n (the keys read
 * once: a to_s that adds keys cannot outgrow kv). Every text is made first
 * (allocations: the GC may run, and compaction move a String), then their
 * bytes are taken, with nothing allocated until the core has copied them.
 * texts holds the texts. */
static void hash_pairs(const char *name, VALUE hash, VALUE keys, long n, pn_label *kv,
                       pn_arg *a, VALUE texts)
{
    for (long i = 0; i < n; i++) {
        VALUE k = rb_ary_entry(keys, i), v = rb_hash_aref(hash, k);
        if (NIL_P(v))
            continue;
        k = rb_obj_as_string(k);
        v = rb_obj_as_string(v);
        if (memchr(RSTRING_PTR(k), '\0', RSTRING_LEN(k)) || memchr(RSTRING_PTR(v), '\0', RSTRING_LEN(v)))
            rb_raise(g_eConfigError, "%s: %s must not contain a NUL byte", name,
                     RSTRING_PTR(rb_inspect(k)));
        StringValueCStr(k); /* terminated (it may make the String its own) */
        StringValueCStr(v);
        rb_ary_push(texts, k);
        rb_ary_push(texts, v);
    }
    a->type = PN_ARG_PAIRS;
    a->pairs = kv;
    for (long i = 0; i + 1 < RARRAY_LEN(texts); i += 2)
        kv[a->npairs++] = (pn_label){RSTRING_PTR(RARRAY_AREF(texts, i)),
                                     RSTRING_PTR(RARRAY_AREF(texts, i + 1))};
}

/* An Integer as a long long; a larger one as the nearest (the core takes
 * the nearest bound of a setting's range). */
static long long clamped_integer(VALUE v)
{
    if (FIXNUM_P(v))
        return FIX2LONG(v);
    if (FIX2INT(rb_big_cmp(v, LL2NUM(LLONG_MAX))) > 0)
        return LLONG_MAX;
    if (FIX2INT(rb_big_cmp(v, LL2NUM(LLONG_MIN))) < 0)
        return LLONG_MIN;
    return NUM2LL(v);
}

/* A setting's Ruby value, as the core's pn_arg; the core judges its type. */
static int apply_setting(VALUE k, VALUE v, VALUE arg)
{
    pn_config *c = (pn_config *)arg;
    if (RB_TYPE_P(k, T_SYMBOL))
        k = rb_sym2str(k);
    if (!RB_TYPE_P(k, T_STRING))
        rb_raise(g_eConfigError, "setting names must be Strings, not %s",
                 rb_obj_classname(k));
    const char *name = StringValueCStr(k);
    if (NIL_P(v))
        return ST_CONTINUE;
    /* The Strings the arg points into stay referenced from this stack to the
     * end (the GC pins what a stack refers to: compaction moves none of them);
     * an anonymous class's name is a new String, not the class's. */
    VALUE shown = rb_class_name(rb_obj_class(v)), keys = Qnil, texts = Qnil;
    pn_arg a = {PN_ARG_OTHER, .shown = StringValueCStr(shown)};
    if (RB_TYPE_P(v, T_STRING)) {
        a.type = PN_ARG_TEXT;
        a.len = (size_t)RSTRING_LEN(v);
        /* a NUL inside is the core's to refuse, with its message */
        a.text = memchr(RSTRING_PTR(v), '\0', a.len) ? RSTRING_PTR(v) : StringValueCStr(v);
    } else if (v == Qtrue || v == Qfalse) {
        a.type = PN_ARG_BOOL;
        a.boolean = v == Qtrue;
    } else if (RB_INTEGER_TYPE_P(v)) {
        a.type = PN_ARG_INT;
        a.integer = clamped_integer(v);
    } else if (RB_FLOAT_TYPE_P(v)) {
        a.type = PN_ARG_FLOAT;
        a.number = RFLOAT_VALUE(v);
        if (!isfinite(a.number)) { /* shown as the value: "not NaN" */
            shown = rb_obj_as_string(v);
            a.shown = StringValueCStr(shown);
        }
    } else if (RB_TYPE_P(v, T_HASH)) {
        keys = rb_funcall(v, rb_intern("keys"), 0);
        Check_Type(keys, T_ARRAY);
        long n = RARRAY_LEN(keys);
        if (n > 4096)
            rb_raise(g_eConfigError, "%s: more than 4096 entries", name);
        texts = rb_ary_new_capa(2 * n);
        hash_pairs(name, v, keys, n, ALLOCA_N(pn_label, n + 1), &a, texts);
    }
    pn_error e = {0};
    int rc = pn_config_set_arg(c, name, &a, &ruby_words, &e);
    RB_GC_GUARD(k);
    RB_GC_GUARD(v);
    RB_GC_GUARD(shown);
    RB_GC_GUARD(keys);
    RB_GC_GUARD(texts);
    if (rc != 0)
        raise_pn_error(&e);
    return ST_CONTINUE;
}

typedef struct {
    pn_config *c;
    VALUE settings, env;
} config_args;

/* Keywords (settings), this binding's defaults, then the core's contract
 * (variables under its precedence rule, the default destination,
 * validation); raises ConfigError. */
static VALUE build_config(VALUE arg)
{
    config_args *a = (config_args *)arg;
    rb_hash_foreach(a->settings, apply_setting, (VALUE)a->c);
    pn_error e = {0};
    if (pn_config_set_default(a->c, "spy_name", "rbspy", &e) != 0 ||
        pn_config_set_default(a->c, "runtime_name", "ruby", &e) != 0 ||
        pn_config_set_default(a->c, "runtime_version", ruby_version, &e) != 0)
        raise_pn_error(&e);
    long n = RHASH_SIZE(a->env);
    if (n > 4096)
        rb_raise(g_eConfigError, "environment: more than 4096 variables");
    VALUE keys = rb_funcall(a->env, rb_intern("keys"), 0);
    VALUE strs = rb_ary_new_capa(n);
    char **envp = ALLOCA_N(char *, n + 1);
    for (long i = 0; i < n; i++) {
        VALUE k = rb_ary_entry(keys, i), v = rb_hash_aref(a->env, k);
        if (!RB_TYPE_P(k, T_STRING) || !RB_TYPE_P(v, T_STRING))
            rb_raise(g_eConfigError, "environment: names and values must be Strings");
        VALUE s = rb_str_plus(rb_str_plus(k, rb_str_new_cstr("=")), v);
        rb_ary_push(strs, s);
        envp[i] = StringValueCStr(s);
    }
    envp[n] = NULL;
    if (pn_config_resolve(a->c, envp, &e) != 0)
        raise_pn_error(&e);
    RB_GC_GUARD(strs);
    RB_GC_GUARD(keys);
    return Qnil;
}

/* c from settings and env (c freed and the error raised on failure). */
static void config_from(pn_config *c, VALUE settings, VALUE env)
{
    Check_Type(settings, T_HASH);
    Check_Type(env, T_HASH);
    pn_config_init(c);
    config_args args = {c, settings, env};
    int state = 0;
    rb_protect(build_config, (VALUE)&args, &state);
    if (state) {
        pn_config_free(c);
        rb_jump_tag(state);
    }
}

/* Native.resolve(settings, env): {name => String} of the config start
 * would use, without starting (Sender, Report, tests). */
static VALUE m_resolve(VALUE self, VALUE settings, VALUE env)
{
    (void)self;
    pn_config c;
    config_from(&c, settings, env);
    VALUE out = rb_hash_new();
    char buf[4096];
    const pn_setting_info *s;
    for (size_t i = 0; (s = pn_config_setting(i)); i++) {
        if (pn_config_get(&c, s->name, buf, sizeof buf) == 0)
            rb_hash_aset(out, rb_str_new_cstr(s->name), rb_str_new_cstr(buf));
    }
    pn_config_free(&c);
    return out;
}

/* ---------------------------------------------------------- start/stop */

/* Fallback to capturing in the job: YJIT before 3.3 (it breaks handler
 * captures, stackprof #157-style crashes), M:N threads (no tid per Ruby
 * thread, NULL ec in handlers). */
static int need_job_mode(const char **why)
{
    int ver = RUBY_API_VERSION_MAJOR * 100 + RUBY_API_VERSION_MINOR;
    VALUE vm = rb_const_get(rb_cObject, rb_intern("RubyVM"));
    if (ver < 303 && rb_const_defined(vm, rb_intern("YJIT"))) {
        VALUE yjit = rb_const_get(vm, rb_intern("YJIT"));
        if (RTEST(rb_funcall(yjit, rb_intern("enabled?"), 0))) {
            *why = "YJIT before Ruby 3.3";
            return 1;
        }
    }
    const char *mn = getenv("RUBY_MN_THREADS");
    if (ver >= 303 && mn && strcmp(mn, "1") == 0) {
        *why = "RUBY_MN_THREADS=1";
        return 1;
    }
    return 0;
}

static VALUE m_start(VALUE self, VALUE settings, VALUE env)
{
    (void)self;
    if (g_agent)
        rb_raise(g_eError, "pyroscope is already running: stop it before starting again");
    log_drain();
    pn_config c;
    config_from(&c, settings, env);
    pn_error e = {0};
    const char *why = NULL;
    int job_mode = need_job_mode(&why);
    if (capture_install(&e) != 0 || symbolize_prepare((int)c.max_depth) != 0) {
        pn_config_free(&c);
        if (!e.msg[0])
            pn_fail(&e, PN_ENOMEM, "out of memory");
        raise_pn_error(&e);
    }
    pn_agent *a = pn_agent_start(&c, &e);
    if (!a) {
        pn_config_free(&c);
        raise_pn_error(&e);
    }
    g_max_depth = (int)c.max_depth;
    g_thread_names = c.report_thread_name;
    pn_driver_opts o;
    memset(&o, 0, sizeof o);
    o.kind = PN_DRIVER_RENDEZVOUS;
    o.capture_bytes = capture_bytes_for(g_max_depth + 1);
    o.max_threads = 1024;
    /* oncpu: the kernel signals each thread as it uses CPU (the core
     * ignores this in wall mode). */
    o.thread_timers = 1;
    o.stale = drain_wake;
    o.housekeeping = capture_check_handler;
    int memory = c.memory;
    uint32_t memory_interval = c.memory_interval, memory_max_live = c.memory_max_live;
    pn_config_free(&c);
    pn_driver *d = pn_agent_add_driver(a, &o, &e);
    pn_driver *md = NULL;
    if (d && memory) {
        /* The memory profile: its own driver, fed by the object hooks. */
        pn_driver_opts mo;
        memset(&mo, 0, sizeof mo);
        mo.kind = PN_DRIVER_MEMORY;
        mo.symbolize = frame_names_symbolize;
        mo.capture_bytes = memory_capture_bytes(g_max_depth);
        md = pn_agent_add_driver(a, &mo, &e);
    }
    if (!d || (memory && !md)) {
        pn_agent_stop(a);
        raise_pn_error(&e);
    }
    if (job_mode)
        pn_log(PN_LOG_WARN, "%s: stacks are captured at the next safepoint, not in the signal "
               "handler (time in long C calls is charged to the Ruby code after them)", why);
    capture_set_in_job(job_mode);
    symbolize_reset();
    g_agent = a;
    atomic_store(&g_driver, d);
    if (threads_join_current(&e) != 0)
        pn_log(PN_LOG_WARN, "the starting thread is not profiled: %s", e.msg);
    threads_start();
    drain_thread_start(0);
    if (md && memory_start(md, g_max_depth, memory_interval, memory_max_live, &e) != 0)
        pn_log(PN_LOG_ERROR, "no memory profile: %s", e.msg);
    last_start = rb_ary_new_from_args(2, rb_obj_dup(settings), rb_obj_dup(env));
    log_drain();
    return Qtrue;
}

static VALUE stats_hash(const pn_agent_stats *as, const pn_driver_stats *ds, const pn_mem_stats *ms)
{
    VALUE h = rb_hash_new();
#define PUT(name, v) rb_hash_aset(h, rb_str_new_cstr(name), ULL2NUM((unsigned long long)(v)))
    /* The core's counters (its table), then the driver's and this binding's. */
    const pn_stat_info *row;
    for (size_t i = 0; (row = pn_stat_row(i)); i++) {
        double v = pn_stat_value(as, i);
        rb_hash_aset(h, rb_str_new_cstr(row->name), row->real ? DBL2NUM(v) : ULL2NUM((unsigned long long)v));
    }
    for (size_t i = 0; i < as->queue.nexporters && i < PN_MAX_EXPORTERS; i++) {
        const pn_exporter_stats *x = &as->queue.exporters[i];
        for (size_t j = 0; (row = pn_stat_exporter_row(j)); j++) {
            VALUE key = rb_sprintf("%s_%s", x->name ? x->name : "exporter", row->name);
            rb_hash_aset(h, key, ULL2NUM((unsigned long long)pn_stat_exporter_value(x, j)));
        }
    }
    for (size_t i = 0; ds && (row = pn_stat_driver_row(i)); i++)
        PUT(row->name, pn_stat_driver_value(ds, i));
    for (size_t i = 0; ms && (row = pn_stat_memory_row(i)); i++)
        PUT(row->name, pn_stat_memory_value(ms, i));
    if (ms) {
        PUT("memory_windows", memory_windows());
        PUT("memory_not_followed", liveness_not_followed());
        PUT("memory_torn", memory_torn());
        PUT("memory_job_errors", memory_job_errors());
        PUT("memory_names_full", frame_names_full());
    }
    PUT("torn", capture_torn());
    PUT("gc_samples", capture_gc());
    PUT("torn_late", symbolize_torn());
    PUT("altstack", capture_altstack());
    PUT("sigprof_replaced", capture_handler_replaced());
    PUT("handler_ns", capture_handler_ns());
    PUT("job_ns", capture_job_ns());
    PUT("threads_joined", threads_joined_count());
    PUT("jobs", symbolize_jobs());
    PUT("log_dropped", log_dropped());
#undef PUT
    rb_hash_aset(h, rb_str_new_cstr("capture_mode"),
                 rb_str_new_cstr(capture_in_job() ? "job" : "handler"));
    return h;
}

typedef struct {
    pn_agent *a;
    pn_agent_stats final;
} stop_ctx;

static void *stop_nogvl(void *arg)
{
    stop_ctx *s = arg;
    pn_agent_stop_stats(s->a, &s->final);
    return NULL;
}

/* Retire the driver: record what was captured, stop the handlers from
 * using it, wait for those in flight. GVL. Returns its final stats. */
static pn_driver *retire_driver(pn_driver_stats *ds)
{
    pn_driver *d = atomic_load(&g_driver);
    if (!d)
        return NULL;
    symbolize_drain(d);
    threads_stop(d);
    atomic_store(&g_driver, NULL);
    struct timespec step = {0, 100 * 1000};
    while (atomic_load(&handlers_active) > 0)
        nanosleep(&step, NULL);
    pn_driver_get_stats(d, ds);
    return d;
}

static VALUE m_stop(VALUE self)
{
    (void)self;
    if (!g_agent)
        return Qnil;
    pn_driver_stats ds;
    memset(&ds, 0, sizeof ds);
    pn_mem_stats ms;
    pn_driver *md = memory_driver();
    memory_stop();
    pn_mem_get_stats(md, &ms);
    drain_thread_stop();
    pn_driver *d = retire_driver(&ds);
    stop_ctx s;
    memset(&s, 0, sizeof s);
    s.a = g_agent;
    g_agent = NULL;
    /* Without the GVL: the final flush may take stop_timeout, and other
     * Ruby threads go on meanwhile. */
    rb_thread_call_without_gvl(stop_nogvl, &s, RUBY_UBF_IO, NULL);
    last_stats = stats_hash(&s.final, d ? &ds : NULL, md ? &ms : NULL);
    log_drain();
    return last_stats;
}

typedef struct {
    pn_agent *a;
    double timeout;
    int rc;
    pn_error e;
} flush_ctx;

static void *flush_nogvl(void *arg)
{
    flush_ctx *f = arg;
    f->rc = pn_agent_flush(f->a, f->timeout, &f->e);
    return NULL;
}

static VALUE m_flush(VALUE self, VALUE timeout)
{
    (void)self;
    if (!g_agent)
        return Qfalse;
    pn_driver *d = atomic_load(&g_driver);
    if (d)
        symbolize_drain(d);
    memory_drain();
    flush_ctx f;
    memset(&f, 0, sizeof f);
    f.a = g_agent;
    f.timeout = NUM2DBL(timeout);
    pn_agent_hold(f.a);
    rb_thread_call_without_gvl(flush_nogvl, &f, RUBY_UBF_IO, NULL);
    pn_agent_release(f.a);
    log_drain();
    if (f.rc != 0)
        pn_log(PN_LOG_DEBUG, "flush: %s", f.e.msg);
    return f.rc == 0 ? Qtrue : Qfalse;
}

static VALUE m_running(VALUE self)
{
    (void)self;
    return g_agent ? Qtrue : Qfalse;
}

static VALUE m_stats(VALUE self)
{
    (void)self;
    log_drain();
    VALUE h;
    if (!g_agent) {
        h = NIL_P(last_stats) ? rb_hash_new() : rb_hash_dup(last_stats);
    } else {
        pn_agent_stats as;
        pn_agent_get_stats(g_agent, &as);
        pn_driver *d = atomic_load(&g_driver);
        pn_driver_stats ds;
        if (d)
            pn_driver_get_stats(d, &ds);
        pn_mem_stats ms;
        pn_mem_get_stats(memory_driver(), &ms);
        h = stats_hash(&as, d ? &ds : NULL, memory_driver() ? &ms : NULL);
    }
    /* Request-time label fixes: process-wide, profiler running or not. */
    uint64_t coerced, dropped;
    pn_labels_fix_counts(&coerced, &dropped);
    rb_hash_aset(h, rb_str_new_cstr("labels_coerced"), ULL2NUM(coerced));
    rb_hash_aset(h, rb_str_new_cstr("labels_dropped"), ULL2NUM(dropped));
    return h;
}

static VALUE str_or_nil(const char *s)
{
    return s ? rb_str_new_cstr(s) : Qnil;
}

/* The core's settings table: one Hash per row (pn_setting_info). */
static VALUE m_setting_table(VALUE self)
{
    (void)self;
    VALUE out = rb_ary_new();
    const pn_setting_info *s;
    for (size_t i = 0; (s = pn_config_setting(i)); i++) {
        VALUE h = rb_hash_new();
        const char *strs[][2] = {
            {"name", s->name}, {"kind", s->kind_name}, {"default", s->default_value},
            {"unit", s->unit}, {"spellings", s->spellings}, {"env", s->env},
            {"env_aliases", s->env_aliases}, {"otel_env", s->otel_env}, {"python", s->python},
            {"node", s->node}, {"ruby", s->ruby}, {"meaning", s->meaning},
        };
        for (size_t j = 0; j < sizeof strs / sizeof strs[0]; j++)
            rb_hash_aset(h, rb_str_new_cstr(strs[j][0]), str_or_nil(strs[j][1]));
        rb_hash_aset(h, rb_str_new_cstr("lo"), DBL2NUM(s->lo));
        rb_hash_aset(h, rb_str_new_cstr("hi"), DBL2NUM(s->hi));
        rb_hash_aset(h, rb_str_new_cstr("secret"), (s->flags & PN_SETTING_SECRET) ? Qtrue : Qfalse);
        rb_hash_aset(h, rb_str_new_cstr("binding"), (s->flags & PN_SETTING_BINDING) ? Qtrue : Qfalse);
        rb_hash_aset(h, rb_str_new_cstr("external"),
                     (s->flags & PN_SETTING_EXTERNAL) ? Qtrue : Qfalse);
        rb_ary_push(out, rb_obj_freeze(h));
    }
    return out;
}

/* Native.stats_table: the core's counters, [[name, meaning], ...]. */
static VALUE m_stats_table(VALUE self)
{
    (void)self;
    VALUE out = rb_ary_new();
    const pn_stat_info *row;
    for (size_t i = 0; (row = pn_stat_row(i)); i++)
        rb_ary_push(out, rb_ary_new_from_args(2, rb_str_new_cstr(row->name),
                                              rb_str_new_cstr(row->meaning)));
    return out;
}

/* Native.parse_bool(what, text): the core's boolean words (ConfigError). */
static VALUE m_parse_bool(VALUE self, VALUE what, VALUE text)
{
    (void)self;
    pn_error e = {0};
    int v;
    if (pn_config_parse_bool(StringValueCStr(what), StringValueCStr(text), &v, &e) != 0)
        raise_pn_error(&e);
    return v ? Qtrue : Qfalse;
}

static VALUE m_thread_id(VALUE self)
{
    (void)self;
    return INT2NUM((int)pn_gettid());
}

/* fork.rb: Process._fork returned 0. The core's fork path already ran in
 * fork() (pthread_atfork); this only finishes what needs the GVL. */
static VALUE m_after_fork_child(VALUE self)
{
    (void)self;
    pn_fork_child(); /* no-op when pthread_atfork ran it */
    symbolize_reset();
    if (g_agent)
        drain_thread_start(1); /* the parent's is not here */
    log_drain();
    return Qnil;
}

/* fork.rb, before Kernel#exec: stop (with the final flush: the process
 * ends here) and make sure no SIGPROF stays pending. Returns whether the
 * agent was running (to restart it if exec fails). */
static VALUE m_before_exec(VALUE self)
{
    VALUE was = m_running(self);
    m_stop(self);
    capture_before_exec();
    return was;
}

/* ractor_guard.rb, before Ractor.new on Ruby < 3.3. */
static VALUE m_memory_off_for_ractor(VALUE self)
{
    (void)self;
    memory_off_for_ractor();
    log_drain();
    return Qnil;
}

static VALUE m_restart(VALUE self)
{
    if (g_agent || NIL_P(last_start))
        return Qfalse;
    return m_start(self, rb_ary_entry(last_start, 0), rb_ary_entry(last_start, 1));
}

static void at_vm_exit(ruby_vm_t *vm)
{
    (void)vm;
    capture_vm_exited();
}

static void fork_prepare(void) { log_fork_prepare(); }
static void fork_parent(void) { log_fork_parent(); }
static void fork_child(void)
{
    log_fork_child();
    threads_after_fork_child();
    memory_after_fork_child();
}

__attribute__((visibility("default"))) void Init_pyroscope_native(void)
{
    VALUE mPyroscope = rb_define_module("Pyroscope");
    g_mNative = rb_define_module_under(mPyroscope, "Native");
    if (rb_const_defined_at(mPyroscope, rb_intern("ConfigError")))
        g_eConfigError = rb_const_get_at(mPyroscope, rb_intern("ConfigError"));
    else
        g_eConfigError = rb_define_class_under(mPyroscope, "ConfigError", rb_eArgError);
    g_eError = rb_define_class_under(g_mNative, "Error", rb_eStandardError);
    rb_gc_register_address(&last_start);
    rb_gc_register_address(&last_stats);

    rb_define_module_function(g_mNative, "start", m_start, 2);
    rb_define_module_function(g_mNative, "stop", m_stop, 0);
    rb_define_module_function(g_mNative, "flush", m_flush, 1);
    rb_define_module_function(g_mNative, "running?", m_running, 0);
    rb_define_module_function(g_mNative, "stats", m_stats, 0);
    rb_define_module_function(g_mNative, "setting_table", m_setting_table, 0);
    rb_define_module_function(g_mNative, "resolve", m_resolve, 2);
    rb_define_module_function(g_mNative, "parse_bool", m_parse_bool, 2);
    rb_define_module_function(g_mNative, "stats_table", m_stats_table, 0);
    rb_define_module_function(g_mNative, "thread_id", m_thread_id, 0);
    rb_define_module_function(g_mNative, "_after_fork_child", m_after_fork_child, 0);
    rb_define_module_function(g_mNative, "_before_exec", m_before_exec, 0);
    rb_define_module_function(g_mNative, "_restart", m_restart, 0);
    rb_define_module_function(g_mNative, "_memory_off_for_ractor", m_memory_off_for_ractor, 0);

    threads_init(g_mNative);
    memory_init();
    drain_thread_init();
    labels_init(g_mNative);
    source_path_init(g_mNative);
    log_init(g_mNative);
    report_init(g_mNative);
    sender_init(g_mNative);
    pn_fork_hook(fork_prepare, fork_parent, fork_child);
    ruby_vm_at_exit(at_vm_exit);
}
