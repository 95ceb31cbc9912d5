/* The memory profile's sampling windows: the VM's internal NEWOBJ event
 * hook (the event stackprof's object mode and Datadog's profiler use), on
 * only for one allocation at a time, feeding the core's memory driver.
 *
 * Why windows: while any NEWOBJ hook is added, every allocation of the
 * process takes the VM's slow path and calls the hook (measured: 1.69x
 * the CPU of a small-object loop with hooks always on, 1.34x on JSON).
 * So the hook is added only when a sample is due, and taken off by the
 * job that finishes that sample:
 *
 *   timer (memory_timer.c: a POSIX timer's SIGPROF) -> arm job (GVL):
 *      add the hook, armed
 *   -> the next allocation of the main Ractor: the hook captures it
 *   -> finish job (GVL, the thread's next safepoint): hook off, frames
 *      named, the sample committed, the next window scheduled.
 *
 * Weight: a window's sample stands for the objects allocated since the
 * previous arm (rb_gc_stat total_allocated_objects), each one heap base
 * slot (slot_bytes: 40 bytes on 64-bit; see the README), so totals are
 * right on average whatever the windows' spacing. The spacing is drawn so
 * samples come one per memory_interval bytes on average (exponential
 * gaps, as Go's and tcmalloc's heap profilers), at the allocation rate
 * measured between windows, bounded to 100 us .. 1 s: at most 10 000
 * windows a second; an idle process has one a second.
 *
 * NEWOBJ runs inside the allocation, before the object is initialised: no
 * Ruby object may be allocated there, nothing may raise. The hook only
 * copies the raw frames (rb_profile_frames: no allocation), the Fiber's
 * labels and the object. Until the finish job the GC marks (pins) the
 * frames and the object, so none is freed or moved; the job names the
 * frames (frame_names.c, may allocate and GC), follows the object by its
 * id (memory_liveness.c: in-use without a FREEOBJ hook) and commits.
 *
 * Label sets: the Fiber's set is alive when NEWOBJ reads it (the thread's
 * mirror holds it); the driver's grace hold, at the generation read then,
 * keeps it from being freed until the job has made its own copy.
 *
 * Threads: the hook is added in the main Ractor (event hooks are per
 * Ractor: other Ractors' allocations are never sampled, though they count
 * in the weight) and runs with its GVL, as do the jobs, start/stop and the
 * GC's mark: everything here is owned by "the GVL". */
#include "native.h"

#include <math.h>
#include <string.h>

#include <ruby/debug.h>
#include <ruby/ractor.h>

#define MIN_DELAY_NS 100000LL
/* At least 50 windows a second while the program allocates: a window's
 * sample carries every object allocated since the last one, so a burst
 * shorter than the gap (100 000 objects in a few ms after an idle second)
 * would be charged to whatever allocates next. With 1 s the real-server
 * test's burst after idle was never seen; 20 ms bounds what is charged
 * elsewhere to a burst's last 20 ms. */
#define MAX_DELAY_NS 20000000LL

static pn_driver *mem_driver;   /* GVL: NULL when memory profiling is off */
static size_t slot_bytes = 40;
static double interval = 512 * 1024;
static int hooked;              /* the NEWOBJ hook is added: a window is open */
static int armed;               /* the next allocation is sampled */
static int ractor_off;          /* < 3.3, a Ractor started: no more windows */
static int in_job;              /* our jobs' own allocations are not sampled */
static VALUE sym_total;         /* :total_allocated_objects */
static size_t armed_total;      /* total_allocated_objects at the last arm */
static int64_t owed;            /* objects since the last sample, not weighed yet */
static uint64_t windows, torn, job_errors;
/* The allocation rate between finished windows (objects per ns). */
static double rate;
static size_t rate_total;
static int64_t rate_ns;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* The sample between the hook and its finish job. */
static struct {
    int set;
    VALUE obj;
    int64_t objects;
    const pn_labelset *labels;  /* borrowed: alive under the grace hold */
    int depth, truncated;
    VALUE *frames;              /* max_depth + 1 */
    int *lines;
} pend;
static pn_frame_id *ids;        /* the job's scratch: max_depth + 1 ids */

/* Set in the main Ractor only: the hook's test of where it runs (main
 * Ractor: a cached read). */
static rb_ractor_local_key_t main_key;
static int main_mark;

static int in_main_ractor(void) { return rb_ractor_local_storage_ptr(main_key) == &main_mark; }
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
static rb_postponed_job_handle_t finish_handle = POSTPONED_JOB_HANDLE_INVALID;
static rb_postponed_job_handle_t arm_handle = POSTPONED_JOB_HANDLE_INVALID;
#endif

uint64_t memory_windows(void) { return windows; }
uint64_t memory_torn(void) { return torn; }
uint64_t memory_job_errors(void) { return job_errors; }
pn_driver *memory_driver(void) { return mem_driver; }

size_t memory_capture_bytes(int max_depth)
{
    size_t n = sizeof(mem_capture_header) + ((size_t)max_depth + 1) * sizeof(mem_frame);
    return (n + 7) & ~(size_t)7;
}

static size_t total_allocated(void) { return rb_gc_stat(sym_total); }

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static void finish_job(void *unused);

static void on_new(VALUE unused, const rb_trace_arg_t *arg)
{
    (void)unused;
    pn_driver *d = mem_driver;
    if (!armed || !d || in_job || !in_main_ractor())
        return;
    armed = 0;
    pend.obj = rb_tracearg_object((rb_trace_arg_t *)arg);
    int n = rb_profile_frames(0, g_max_depth + 1, pend.frames, pend.lines);
    pend.depth = n < 0 ? 0 : n > g_max_depth ? g_max_depth : n;
    pend.truncated = n > g_max_depth;
    pend.objects = owed;
    owed = 0;
    pend.labels = labels_for_handler();
    pn_driver_hold(d, pn_grace_generation());
    pend.set = 1;
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    rb_postponed_job_trigger(finish_handle);
#else
    rb_postponed_job_register_one(0, finish_job, NULL);
#endif
}

static void hook_on(void)
{
    if (hooked)
        return;
    rb_event_hook_flag_t raw = RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG;
    rb_add_event_hook2((rb_event_hook_func_t)(void (*)(void))on_new, RUBY_INTERNAL_EVENT_NEWOBJ,
                       Qnil, raw);
    hooked = 1;
}

static void hook_off(void)
{
    if (!hooked)
        return;
    rb_remove_event_hook((rb_event_hook_func_t)(void (*)(void))on_new);
    hooked = 0;
}

/* Weigh the objects allocated since the last arm into the next sample. */
static void weigh(void)
{
    size_t total = total_allocated();
    owed += (int64_t)(total - armed_total);
    armed_total = total;
}

/* The next window, an exponential gap of interval bytes away at the
 * measured allocation rate. */
static void schedule(void)
{
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    size_t total = total_allocated();
    if (now > rate_ns) {
        double r = (double)(total - rate_total) / (double)(now - rate_ns);
        rate = rate > 0 ? 0.5 * rate + 0.5 * r : r;
        rate_ns = now;
        rate_total = total;
    }
    double bytes_per_ns = rate * (double)slot_bytes;
    double delay = bytes_per_ns > 0 ? -log(uniform()) * interval / bytes_per_ns : MAX_DELAY_NS;
    if (delay < MIN_DELAY_NS)
        delay = MIN_DELAY_NS;
    if (delay > MAX_DELAY_NS)
        delay = MAX_DELAY_NS;
    memory_timer_set(now + (int64_t)delay);
}

/* A copy of the set that stays alive until released (the captured one may
 * be retired already; the hold keeps its memory readable). */
static const pn_labelset *own_labels(const pn_labelset *ls)
{
    size_t n = ls ? pn_labelset_count(ls) : 0;
    if (n == 0)
        return NULL;
    pn_label kv[PN_MAX_LABELS];
    for (size_t i = 0; i < n && i < PN_MAX_LABELS; i++)
        kv[i] = pn_labelset_at(ls, i);
    return pn_labelset_merge(pn_labelset_empty(), kv, n < PN_MAX_LABELS ? n : PN_MAX_LABELS,
                             NULL);
}

/* Name the pending sample's frames and commit it (GVL). Naming allocates
 * and may GC: the frames and the object stay pinned until it is done. */
static void commit_pending(pn_driver *d)
{
    int depth = pend.depth;
    for (int i = 0; i < depth; i++) {
        if (!symbolize_frame_ok(pend.frames[i])) {
            torn++;
            depth = 0;
            break;
        }
        ids[i] = frame_names_id(pend.frames[i]);
    }
    uintptr_t key;
    int followed = liveness_follow(pend.obj, &key);
    void *buf;
    size_t cap;
    int64_t objects = pend.objects > 0 ? pend.objects : 1;
    pn_mem_slot *s = pn_mem_alloc_begin_weighted(d, (const void *)key, objects,
                                                 objects * (int64_t)slot_bytes, &buf, &cap);
    if (s) {
        mem_capture_header *h = buf;
        mem_frame *out = (mem_frame *)(h + 1);
        size_t room = (cap - sizeof *h) / sizeof *out;
        if ((size_t)depth > room)
            depth = (int)room;
        for (int i = 0; i < depth; i++)
            out[i] = (mem_frame){ids[i], pend.lines[i] > 0 ? (uint32_t)pend.lines[i] : 0};
        h->depth = depth;
        h->truncated = pend.truncated;
        h->lines_at = 0;
        const pn_labelset *own = own_labels(pend.labels);
        pn_mem_alloc_commit(s, sizeof *h + (size_t)depth * sizeof *out, NULL, own);
        pn_labelset_unref(own);
    } else if (followed) {
        liveness_drop_last(); /* the table is full: counted, not followed */
    }
    /* Not followed: counted as allocated, not as in use. */
    if (!followed)
        pn_mem_free(d, (const void *)key);
    pend.set = 0;
    pend.obj = Qnil;
    pn_driver_hold(d, 0);
}

static VALUE finish_body(VALUE reschedule)
{
    pn_driver *d = mem_driver;
    if (!armed)
        hook_off();
    if (pend.set)
        commit_pending(d);
    liveness_sweep(d, 0);
    if (RTEST(reschedule) && !armed && !ractor_off)
        schedule();
    return Qnil;
}

static VALUE sweep_all(VALUE unused)
{
    (void)unused;
    liveness_sweep(mem_driver, 1);
    return Qnil;
}

/* Our jobs run inside whatever Ruby code the VM interrupted: naming frames
 * and object_id allocate and may raise (NoMemoryError, an interrupt). The
 * exception is the application's to never see: it is dropped here, with
 * the pending sample, counted (memory_job_errors) and logged once, and the
 * next window is scheduled as usual. */
static void run_job(VALUE (*body)(VALUE), VALUE arg)
{
    int state = 0;
    in_job = 1;
    rb_protect(body, arg, &state);
    in_job = 0;
    if (!state)
        return;
    rb_set_errinfo(Qnil);
    if (pend.set) {
        pend.set = 0;
        pend.obj = Qnil;
        pn_driver_hold(mem_driver, 0);
    }
    if (job_errors++ == 0)
        pn_log(PN_LOG_WARN, "memory profile: an exception inside the profiler's job was "
               "dropped (stats memory_job_errors); sampling goes on");
    if (!armed && !ractor_off)
        schedule();
}

/* The window closes: hook off, the sample committed, the next window
 * scheduled (GVL). Also from flush and stop. */
static void finish(int reschedule)
{
    if (in_job || !mem_driver)
        return;
    run_job(finish_body, reschedule ? Qtrue : Qfalse);
}

static void finish_job(void *unused)
{
    (void)unused;
    finish(1);
}

/* The timer's request (GVL): weigh what was allocated since the last arm,
 * and open a window unless one is open. */
static void arm_job(void *unused)
{
    (void)unused;
    if (!mem_driver || in_job || ractor_off)
        return;
    weigh();
    memory_timer_set(INT64_MAX);
    if (pend.set || armed)
        return; /* the finish job schedules the next one */
    windows++;
    armed = 1;
    hook_on();
}

/* Our SIGPROF handler, for the timer's signal: 3.3+ any thread may
 * trigger; before, the job goes on this (Ruby) thread. */
void memory_arm_from_handler(void)
{
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    if (arm_handle != POSTPONED_JOB_HANDLE_INVALID)
        rb_postponed_job_trigger(arm_handle);
#else
    rb_postponed_job_register_one(0, arm_job, NULL);
#endif
}

void memory_arm_overdue(void) { arm_job(NULL); }

/* Every pending sample committed and the followed objects swept (GVL):
 * flush, stop. */
void memory_drain(void)
{
    pn_driver *d = mem_driver;
    if (in_job || !d)
        return;
    finish(armed ? 0 : 1);
    run_job(sweep_all, Qnil);
}

void memory_mark(void)
{
    if (pend.set) {
        rb_gc_mark(pend.obj);
        for (int i = 0; i < pend.depth; i++)
            rb_gc_mark_maybe(pend.frames[i]);
    }
    frame_names_mark();
}

/* GC::INTERNAL_CONSTANTS' base slot: what one object takes in the heap. */
static size_t base_slot_bytes(void)
{
    VALUE gc = rb_const_get(rb_cObject, rb_intern("GC"));
    if (!rb_const_defined(gc, rb_intern("INTERNAL_CONSTANTS")))
        return 40;
    VALUE h = rb_const_get(gc, rb_intern("INTERNAL_CONSTANTS"));
    const char *keys[] = {"BASE_SLOT_SIZE", "RVALUE_SIZE"};
    for (size_t i = 0; RB_TYPE_P(h, T_HASH) && i < 2; i++) {
        VALUE v = rb_hash_aref(h, ID2SYM(rb_intern(keys[i])));
        if (RB_INTEGER_TYPE_P(v) && NUM2LONG(v) > 0)
            return (size_t)NUM2LONG(v);
    }
    return 40;
}

static int grow(void **p, size_t n)
{
    void *q = realloc(*p, n);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

int memory_start(pn_driver *d, int max_depth, uint32_t interval_bytes, uint32_t max_live,
                 pn_error *e)
{
    size_t n = (size_t)max_depth + 1;
    if (frame_names_prepare() != 0 || grow((void **)&ids, n * sizeof *ids) ||
        grow((void **)&pend.frames, n * sizeof(VALUE)) || grow((void **)&pend.lines, n * sizeof(int)) ||
        liveness_prepare(max_live ? max_live : 65536) != 0)
        return pn_fail(e, PN_ENOMEM, "memory: out of memory");
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    if (finish_handle == POSTPONED_JOB_HANDLE_INVALID)
        finish_handle = rb_postponed_job_preregister(0, finish_job, NULL);
    if (arm_handle == POSTPONED_JOB_HANDLE_INVALID)
        arm_handle = rb_postponed_job_preregister(0, arm_job, NULL);
    if (finish_handle == POSTPONED_JOB_HANDLE_INVALID || arm_handle == POSTPONED_JOB_HANDLE_INVALID)
        return pn_fail(e, PN_ESTATE, "memory: no postponed job handle left");
#endif
    slot_bytes = base_slot_bytes();
    interval = interval_bytes ? interval_bytes : 512 * 1024;
    sym_total = ID2SYM(rb_intern("total_allocated_objects"));
    frame_names_reset_cache();
    pend.set = 0;
    pend.obj = Qnil;
    armed = ractor_off = 0;
    owed = 0;
    armed_total = rate_total = total_allocated();
    rate = 0;
    rate_ns = pn_clock_ns(CLOCK_MONOTONIC);
    mem_driver = d;
    memory_timer_set(pn_clock_ns(CLOCK_MONOTONIC));
    return 0;
}

/* No more windows, the last sample committed: the driver may be stopped
 * after (GVL). */
void memory_stop(void)
{
    if (!mem_driver)
        return;
    armed = 0;
    memory_drain();
    hook_off();
    mem_driver = NULL;
    memory_timer_stop();
}

/* Ruby < 3.3, before Ractor.new (lib/pyroscope/ractor_guard.rb): a NEWOBJ
 * hook crashes a starting Ractor (Ruby bug #18464). No more windows; the
 * driver stays until stop, so its last period and counters are kept. */
void memory_off_for_ractor(void)
{
    if (!mem_driver || ractor_off)
        return;
    ractor_off = 1;
    armed = 0;
    memory_drain();
    hook_off();
    memory_timer_stop();
    pn_log(PN_LOG_WARN, "memory profile stopped: a Ractor starts, and on Ruby before 3.3 the "
           "VM's object hooks crash a starting Ractor (Ruby bug #18464); CPU profiling goes on");
}

/* In a forked child (the fork path's child hook, only this thread runs):
 * the core emptied the driver's table, so the pending sample and the
 * followed objects are gone. A window open at fork stays open (the
 * child's VM has the hook) and is closed by the next finish job; the
 * timer restarts: the child profiles its own allocations. */
void memory_after_fork_child(void)
{
    in_job = 0;
    if (!mem_driver)
        return;
    pend.set = 0;
    armed = 0;
    liveness_forget();
    pn_driver_hold(mem_driver, 0);
    memory_timer_after_fork_child();
}

void memory_init(void)
{
    main_key = rb_ractor_local_storage_ptr_newkey(NULL);
    rb_ractor_local_storage_ptr_set(main_key, &main_mark);
}
