/* Labels per Fiber.
 *
 * Each Fiber's current label set lives in a fiber-local (Thread#[] is
 * fiber-local) as a small object holding a reference to an interned
 * pn_labelset. The handler cannot look at Ruby objects, so the running
 * Fiber's set is mirrored into a thread-local: on every change through
 * this API and, once labels were used, on every fiber switch (a
 * RUBY_EVENT_FIBER_SWITCH hook, which runs in the Fiber switched to). Two
 * Fibers on one thread are therefore never charged to each other's labels.
 *
 * Restoring hands back the previous set object (the token), not a popped
 * stack entry, so interleaved Fibers and out-of-order ends stay right.
 *
 * A Fiber created inside tag_wrapper inherits its creator's set (as a
 * Python task its context): Fiber.new wraps the block to install the
 * creator's token first (lib/pyroscope/fiber_inherit.rb); an Enumerator's
 * Fiber is made in C by next/peek, so those set a per-thread pending token
 * for their call, and the switch hook gives it to a Fiber that has no set
 * of its own yet.
 *
 * Threads: the fiber-local and the mirror are written by their own thread
 * under the GVL; the mirror is read by that thread's signal handler. Label
 * sets are freed through the core's grace periods, so a set the handler
 * loaded stays valid until its sample is recorded. */
#include "native.h"

#include <ruby/debug.h>

/* The running Fiber's set, with a reference of its own (NULL: empty). */
static __thread const pn_labelset *tl_mirror __attribute__((tls_model("initial-exec")));
static ID id_key;               /* the fiber-local's key */
static int switch_hook_on;      /* GVL */
/* The token of the Fiber inside Enumerator#next & co. (or Qnil); its own
 * thread, under the GVL. The same object is that Fiber's fiber-local and a
 * local of the Ruby method that set it, so the GC keeps it. */
static __thread VALUE tl_pending = Qnil;
static VALUE cLabelSet;

static void set_free(void *p)
{
    if (p)
        pn_labelset_unref(p);
}

static size_t set_size(const void *p)
{
    (void)p;
    return sizeof(void *);
}

static const rb_data_type_t set_type = {
    .wrap_struct_name = "pyroscope_native_labelset",
    .function = {.dfree = set_free, .dsize = set_size},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY};

HANDLER_PATH const pn_labelset *labels_for_handler(void) { return tl_mirror; }

static const pn_labelset *set_of(VALUE obj)
{
    if (NIL_P(obj) || !rb_typeddata_is_kind_of(obj, &set_type))
        return NULL;
    return DATA_PTR(obj);
}

static void mirror(const pn_labelset *ls)
{
    if (ls && pn_labelset_count(ls) == 0)
        ls = NULL;
    if (ls == tl_mirror)
        return;
    if (ls)
        pn_labelset_ref(ls);
    const pn_labelset *old = tl_mirror;
    tl_mirror = ls; /* one store: the handler sees the old set or the new */
    if (old)
        pn_labelset_unref(old);
}

static VALUE fiber_value(void) { return rb_thread_local_aref(rb_thread_current(), id_key); }

static void on_fiber_switch(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    (void)ev, (void)data, (void)self, (void)mid, (void)klass;
    VALUE obj = fiber_value();
    if (NIL_P(obj) && !NIL_P(tl_pending)) {
        obj = tl_pending;
        rb_thread_local_aset(rb_thread_current(), id_key, obj);
    }
    mirror(set_of(obj));
}

/* Make obj (a set object or nil) the current Fiber's set. */
static void install(VALUE obj)
{
    if (!switch_hook_on) {
        rb_add_event_hook(on_fiber_switch, RUBY_EVENT_FIBER_SWITCH, Qnil);
        switch_hook_on = 1;
    }
    rb_thread_local_aset(rb_thread_current(), id_key, obj);
    mirror(set_of(obj));
}

static VALUE wrap(const pn_labelset *ls)
{
    return TypedData_Wrap_Struct(cLabelSet, &set_type, (void *)ls);
}

/* Pairs of a Hash of String => String (or nil: no value), for the core
 * (pointers into the Ruby strings, valid while the Hash is). Past
 * PN_MAX_LABELS pairs: dropped and counted, or an error with strict labels. */
typedef struct {
    pn_label kv[PN_MAX_LABELS + 1];
    size_t n;
    int too_many;
} pairs;

static int add_pair(VALUE k, VALUE v, VALUE arg)
{
    pairs *p = (pairs *)arg;
    if (!RB_TYPE_P(k, T_STRING) || !(RB_TYPE_P(v, T_STRING) || NIL_P(v)))
        rb_raise(g_eConfigError, "label %s: keys and values must be Strings",
                 RSTRING_PTR(rb_inspect(k)));
    if (p->n >= PN_MAX_LABELS) {
        if (pn_labels_strict()) {
            p->too_many = 1;
            return ST_STOP;
        }
        pn_labels_note_fix(1, StringValueCStr(k), "more than 100 labels per sample: dropped");
        return ST_CONTINUE;
    }
    p->kv[p->n].key = StringValueCStr(k);
    p->kv[p->n].value = NIL_P(v) ? NULL : StringValueCStr(v);
    p->n++;
    return ST_CONTINUE;
}

static void hash_pairs(VALUE hash, pairs *p)
{
    Check_Type(hash, T_HASH);
    p->n = 0;
    p->too_many = 0;
    rb_hash_foreach(hash, add_pair, (VALUE)p);
    if (p->too_many)
        rb_raise(g_eConfigError, "labels: more than %d labels", PN_MAX_LABELS);
}

static VALUE m_labels_current(VALUE self)
{
    (void)self;
    const pn_labelset *ls = set_of(fiber_value());
    VALUE out = rb_hash_new();
    for (size_t i = 0; ls && i < pn_labelset_count(ls); i++) {
        pn_label l = pn_labelset_at(ls, i);
        rb_hash_aset(out, rb_utf8_str_new_cstr(l.key), rb_utf8_str_new_cstr(l.value));
    }
    return out;
}

static VALUE m_labels_push(VALUE self, VALUE hash)
{
    (void)self;
    pairs p;
    hash_pairs(hash, &p);
    VALUE token = fiber_value();
    const pn_labelset *base = set_of(token);
    pn_error e = {0};
    const pn_labelset *next =
        pn_labelset_merge(base ? base : pn_labelset_empty(), p.kv, p.n, &e);
    if (!next)
        raise_pn_error(&e);
    VALUE obj = wrap(next);
    install(obj);
    RB_GC_GUARD(hash);
    return token;
}

static VALUE m_labels_restore(VALUE self, VALUE token)
{
    (void)self;
    if (!NIL_P(token) && !rb_typeddata_is_kind_of(token, &set_type))
        rb_raise(rb_eTypeError, "labels_restore: not a token of labels_push");
    install(token);
    return Qnil;
}

static VALUE m_labels_remove(VALUE self, VALUE hash)
{
    (void)self;
    pairs p;
    hash_pairs(hash, &p);
    const pn_labelset *cur = set_of(fiber_value());
    if (!cur)
        return Qnil;
    pn_labelset_ref(cur);
    for (size_t i = 0; i < p.n; i++) {
        if (!p.kv[i].value)
            continue;
        const pn_labelset *next = pn_labelset_without(cur, p.kv[i].key, p.kv[i].value);
        pn_labelset_unref(cur);
        cur = next;
    }
    install(pn_labelset_count(cur) ? wrap(cur) : Qnil);
    if (!pn_labelset_count(cur))
        pn_labelset_unref(cur);
    RB_GC_GUARD(hash);
    return Qnil;
}

/* labels_token -> the current Fiber's set object (nil: none), for
 * labels_restore in a Fiber it creates. */
static VALUE m_labels_token(VALUE self)
{
    (void)self;
    return fiber_value();
}

/* labels_pending(token) -> the previous one: while set, a Fiber switched to
 * with no set of its own takes this one (Enumerator#next's Fiber). */
static VALUE m_labels_pending(VALUE self, VALUE token)
{
    (void)self;
    if (!NIL_P(token) && !rb_typeddata_is_kind_of(token, &set_type))
        rb_raise(rb_eTypeError, "labels_pending: not a token of labels_token");
    VALUE prev = tl_pending;
    tl_pending = token;
    return prev;
}

/* labels_note_fix(dropped, key, what): a fix made in Ruby (lib/pyroscope.rb). */
static VALUE m_labels_note_fix(VALUE self, VALUE dropped, VALUE key, VALUE what)
{
    (void)self;
    pn_labels_note_fix(RTEST(dropped), StringValueCStr(key), StringValueCStr(what));
    return Qnil;
}

static VALUE m_labels_strict(VALUE self)
{
    (void)self;
    return pn_labels_strict() ? Qtrue : Qfalse;
}

void labels_init(VALUE mNative)
{
    rb_define_module_function(mNative, "labels_note_fix", m_labels_note_fix, 3);
    rb_define_module_function(mNative, "labels_strict?", m_labels_strict, 0);
    id_key = rb_intern("__pyroscope_native_labels");
    cLabelSet = rb_define_class_under(mNative, "LabelSet", rb_cObject);
    rb_undef_alloc_func(cLabelSet);
    rb_define_module_function(mNative, "labels_current", m_labels_current, 0);
    rb_define_module_function(mNative, "labels_push", m_labels_push, 1);
    rb_define_module_function(mNative, "labels_restore", m_labels_restore, 1);
    rb_define_module_function(mNative, "labels_remove", m_labels_remove, 1);
    rb_define_module_function(mNative, "labels_token", m_labels_token, 0);
    rb_define_module_function(mNative, "labels_pending", m_labels_pending, 1);
}
