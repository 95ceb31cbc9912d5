/* The registry of Ruby threads the sampler may signal, and the pins that
 * keep frames of captures not yet symbolized alive and in place.
 *
 * A thread joins the core's rendezvous driver itself (its slot is
 * thread-local), so: the thread calling start joins at once; threads made
 * later join from the THREAD_BEGIN hook, which runs on the new thread; the
 * threads that already exist are asked with a SIGPROF of their own, whose
 * handler registers a postponed job that runs on that thread (3.1/3.2:
 * rb_postponed_job_register_one flags the calling thread) and joins it.
 * A thread that never runs Ruby code again never joins, and needs not:
 * it uses no CPU we could charge to a Ruby stack. THREAD_END leaves (Ruby
 * reuses native threads, so pthread exit is not enough).
 *
 * Ownership: entries are claimed and cleared under the GVL; an entry's pin
 * is set by its thread's handler and cleared under the GVL once the
 * capture was recorded; the GC mark function reads pins under the GVL. */
#include "native.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ruby/debug.h>

#define MAX_THREADS 1024
#define MAX_WANTED 1024

static rthread table[MAX_THREADS];
static _Atomic uint64_t joined_total;
/* The calling thread's entry and the tid it joined with: initial-exec so
 * the handler reads them without allocating. Stale after a stop (the
 * entry's tid no longer matches). */
static __thread rthread *tl_rt __attribute__((tls_model("initial-exec")));
static __thread pid_t tl_tid __attribute__((tls_model("initial-exec")));
/* Tids asked to join at start (GVL writes, handler reads). */
static _Atomic pid_t wanted[MAX_WANTED];
static int hook_on;             /* GVL */
static VALUE pin_root = Qnil;   /* GVL; its mark function marks the pins */

rthread *threads_current(void)
{
    rthread *r = tl_rt;
    return r && tl_tid != 0 && atomic_load(&r->tid) == tl_tid ? r : NULL;
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
}

static const rb_data_type_t pins_type = {.wrap_struct_name = "pyroscope_native_pins",
                                          .function = {.dmark = pins_mark}};

int threads_join_current(pn_error *e)
{
    pn_driver *d = atomic_load(&g_driver);
    if (!d || threads_current())
        return 0;
    if (pn_rendezvous_join(d, e) != 0)
        return -1;
    pid_t tid = pn_gettid();
    for (int i = 0; i < MAX_THREADS; i++) {
        pid_t none = 0;
        if (atomic_compare_exchange_strong(&table[i].tid, &none, tid)) {
            atomic_store(&table[i].pin_depth, 0);
            atomic_store(&table[i].pin_frames, NULL);
            tl_tid = tid;
            tl_rt = &table[i];
            atomic_fetch_add(&joined_total, 1);
            return 0;
        }
    }
    pn_rendezvous_leave(d);
    return pn_fail(e, PN_ELIMIT, "more than %d Ruby threads to profile at once", MAX_THREADS);
}

static void clear_entry(rthread *r)
{
    atomic_store(&r->pin_depth, 0);
    atomic_store(&r->pin_frames, NULL);
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

int threads_join_wanted(pid_t tid)
{
    for (int i = 0; i < MAX_WANTED; i++)
        if (atomic_load(&wanted[i]) == tid)
            return 1;
    return 0;
}

void threads_join_job(void *unused)
{
    (void)unused;
    pid_t tid = pn_gettid();
    for (int i = 0; i < MAX_WANTED; i++) {
        pid_t want = tid;
        atomic_compare_exchange_strong(&wanted[i], &want, 0);
    }
    pn_error e = {0};
    if (threads_join_current(&e) != 0)
        pn_log(PN_LOG_WARN, "thread %d is not profiled: %s", (int)tid, e.msg);
}

void threads_start(void)
{
    if (!hook_on) {
        rb_add_event_hook(thread_event, RUBY_EVENT_THREAD_BEGIN | RUBY_EVENT_THREAD_END, Qnil);
        hook_on = 1;
    }
    VALUE me = rb_thread_current();
    VALUE list = rb_funcall(rb_cThread, rb_intern("list"), 0);
    int n = 0;
    pid_t pid = getpid();
    for (long i = 0; i < RARRAY_LEN(list) && n < MAX_WANTED; i++) {
        VALUE th = rb_ary_entry(list, i);
        if (th == me)
            continue;
        VALUE ntid = rb_funcall(th, rb_intern("native_thread_id"), 0);
        if (!RB_INTEGER_TYPE_P(ntid))
            continue; /* not started yet, or dead: THREAD_BEGIN covers it */
        pid_t tid = (pid_t)NUM2INT(ntid);
        atomic_store(&wanted[n++], tid);
        /* Our handler is installed: it sees the tid wanted and registers
         * the join job on that thread. ESRCH: it just exited. */
        syscall(SYS_tgkill, pid, tid, SIGPROF);
    }
}

void threads_stop(pn_driver *d)
{
    if (hook_on) {
        rb_remove_event_hook(thread_event);
        hook_on = 0;
    }
    for (int i = 0; i < MAX_WANTED; i++)
        atomic_store(&wanted[i], 0);
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
    rthread *mine = threads_current();
    for (int i = 0; i < MAX_WANTED; i++)
        atomic_store(&wanted[i], 0);
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
