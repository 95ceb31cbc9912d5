/* The registry of Ruby threads the sampler may signal, and the pins that
 * keep frames of captures not yet symbolized alive and in place.
 *
 * The thread calling start joins at once; threads made later join from the
 * THREAD_BEGIN hook, which runs on the new thread; the threads that
 * already exist (Thread.list) are joined on their behalf by tid, and adopt
 * their entry and their core slot in the handler of their first signal
 * (a postponed job cannot be aimed at a thread: whichever thread flushes
 * first runs every job). THREAD_END leaves (Ruby reuses native threads, so
 * pthread exit is not enough).
 *
 * Ownership: entries are claimed and cleared under the GVL; an entry's pin
 * is set by its thread's handler and cleared under the GVL once the
 * capture was recorded; the GC mark function reads pins under the GVL. */
#include "native.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <ruby/debug.h>

#define MAX_THREADS 1024

static rthread table[MAX_THREADS];
static _Atomic uint64_t joined_total;
/* The calling thread's entry and the tid it joined with: initial-exec so
 * the handler reads them without allocating. Stale after a stop (the
 * entry's tid no longer matches). */
static __thread rthread *tl_rt __attribute__((tls_model("initial-exec")));
static __thread pid_t tl_tid __attribute__((tls_model("initial-exec")));
static int hook_on;             /* GVL */
static VALUE pin_root = Qnil;   /* GVL; its mark function marks the pins */

static void read_altstack(rthread *r)
{
    stack_t ss;
    r->altstack_lo = r->altstack_hi = 0;
    if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
        r->altstack_lo = (uintptr_t)ss.ss_sp;
        r->altstack_hi = (uintptr_t)ss.ss_sp + ss.ss_size;
    }
}

/* The calling thread's entry; one made for it by tid (at start) is adopted
 * here. Handler-safe: loads, one CAS, thread-local stores, sigaltstack. */
HANDLER_PATH rthread *threads_current(void)
{
    rthread *r = tl_rt;
    if (r && tl_tid != 0 && atomic_load(&r->tid) == tl_tid)
        return r;
    pid_t tid = pn_gettid();
    for (int i = 0; i < MAX_THREADS; i++) {
        int no = 0;
        if (atomic_load_explicit(&table[i].tid, memory_order_relaxed) == tid &&
            atomic_compare_exchange_strong(&table[i].adopted, &no, 1)) {
            read_altstack(&table[i]);
            tl_tid = tid;
            tl_rt = &table[i];
            return tl_rt;
        }
    }
    return NULL;
}

uint64_t threads_joined_count(void) { return atomic_load(&joined_total); }

static void pins_mark(void *unused)
{
    (void)unused;
    for (int i = 0; i < MAX_THREADS; i++) {
        rthread *r = &table[i];
        VALUE *frames = atomic_load(&r->pin_frames);
        int n = atomic_load(&r->pin_depth);
        /* mark_maybe: a frame that is garbage already is skipped, and
         * what it marks is pinned (compaction leaves it in place). */
        for (int j = 0; frames && j < n; j++)
            rb_gc_mark_maybe(frames[j]);
    }
    symbolize_mark();
    memory_mark();
}

static const rb_data_type_t pins_type = {.wrap_struct_name = "pyroscope_native_pins",
                                          .function = {.dmark = pins_mark}};

/* A free entry for thread tid (GVL); adopted: claimed by tid itself. */
static rthread *claim_entry(pid_t tid, int adopted)
{
    for (int i = 0; i < MAX_THREADS; i++) {
        pid_t none = 0;
        if (atomic_load(&table[i].tid) == 0) {
            atomic_store(&table[i].pin_depth, 0);
            atomic_store(&table[i].pin_frames, NULL);
            atomic_store(&table[i].adopted, adopted);
            table[i].altstack_lo = table[i].altstack_hi = 0;
            table[i].name[0] = 0;
            if (atomic_compare_exchange_strong(&table[i].tid, &none, tid)) {
                atomic_fetch_add(&joined_total, 1);
                return &table[i];
            }
        }
    }
    return NULL;
}

int threads_join_current(pn_error *e)
{
    pn_driver *d = atomic_load(&g_driver);
    if (!d || threads_current())
        return 0;
    if (pn_rendezvous_join(d, e) != 0)
        return -1;
    pid_t tid = pn_gettid();
    rthread *r = claim_entry(tid, 1);
    if (!r) {
        pn_rendezvous_leave(d);
        return pn_fail(e, PN_ELIMIT, "more than %d Ruby threads to profile at once",
                       MAX_THREADS);
    }
    read_altstack(r);
    tl_tid = tid;
    tl_rt = r;
    threads_refresh_name();
    return 0;
}

/* Copy Thread#name into the core's table when it changed (threads are
 * usually named after they started, so the capture job asks again). */
void threads_refresh_name(void)
{
    rthread *r = threads_current();
    if (!r || !g_thread_names)
        return;
    VALUE name = rb_funcall(rb_thread_current(), rb_intern("name"), 0);
    const char *s = RB_TYPE_P(name, T_STRING) ? StringValueCStr(name) : "";
    if (strncmp(s, r->name, sizeof r->name - 1) == 0)
        return;
    snprintf(r->name, sizeof r->name, "%s", s);
    pn_thread_name_set(tl_tid, s, NULL);
}

static void clear_entry(rthread *r)
{
    atomic_store(&r->pin_depth, 0);
    atomic_store(&r->pin_frames, NULL);
    atomic_store(&r->adopted, 0);
    atomic_store(&r->tid, 0);
}

void threads_leave_current(void)
{
    rthread *r = threads_current();
    if (!r)
        return;
    pn_driver *d = atomic_load(&g_driver);
    if (d)
        pn_rendezvous_leave(d);
    if (r->name[0])
        pn_thread_name_set(tl_tid, NULL, NULL);
    clear_entry(r);
    tl_rt = NULL;
}

static void thread_event(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    (void)data, (void)self, (void)mid, (void)klass;
    if (ev == RUBY_EVENT_THREAD_END) {
        threads_leave_current();
        return;
    }
    pn_error e = {0};
    if (threads_join_current(&e) != 0)
        pn_log(PN_LOG_WARN, "a new thread is not profiled: %s", e.msg);
}

void threads_start(void)
{
    if (!hook_on) {
        rb_add_event_hook(thread_event, RUBY_EVENT_THREAD_BEGIN | RUBY_EVENT_THREAD_END, Qnil);
        hook_on = 1;
    }
    pn_driver *d = atomic_load(&g_driver);
    VALUE me = rb_thread_current();
    VALUE list = rb_funcall(rb_cThread, rb_intern("list"), 0);
    for (long i = 0; d && i < RARRAY_LEN(list); i++) {
        VALUE th = rb_ary_entry(list, i);
        if (th == me)
            continue;
        VALUE ntid = rb_funcall(th, rb_intern("native_thread_id"), 0);
        if (!RB_INTEGER_TYPE_P(ntid))
            continue; /* not started yet, or dead: THREAD_BEGIN covers it */
        pid_t tid = (pid_t)NUM2INT(ntid);
        pn_error e = {0};
        int known = 0;
        for (int j = 0; j < MAX_THREADS; j++)
            known |= atomic_load(&table[j].tid) == tid;
        if (known)
            continue;
        if (pn_rendezvous_join_tid(d, tid, &e) != 0 || !claim_entry(tid, 0))
            pn_log(PN_LOG_WARN, "thread %d is not profiled: %s", (int)tid,
                   e.msg[0] ? e.msg : "too many threads");
    }
}

void threads_stop(pn_driver *d)
{
    if (hook_on) {
        rb_remove_event_hook(thread_event);
        hook_on = 0;
    }
    /* The calling thread leaves the driver properly; the others' slots go
     * with the driver (the core knows them as stale from then on). */
    if (threads_current())
        pn_rendezvous_leave(d);
    tl_rt = NULL;
    for (int i = 0; i < MAX_THREADS; i++)
        clear_entry(&table[i]);
}

void threads_after_fork_child(void)
{
    /* Only the forking thread exists here, with a new tid. */
    rthread *mine = tl_rt;
    for (int i = 0; i < MAX_THREADS; i++)
        if (&table[i] != mine)
            clear_entry(&table[i]);
    if (mine) {
        tl_tid = pn_gettid();
        atomic_store(&mine->tid, tl_tid);
    }
}

void threads_init(VALUE mNative)
{
    (void)mNative;
    pin_root = TypedData_Wrap_Struct(0, &pins_type, NULL);
    rb_gc_register_mark_object(pin_root);
}
