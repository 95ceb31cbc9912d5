/* The memory profile's allocation hooks: the VM's internal object events
 * (RUBY_INTERNAL_EVENT_NEWOBJ / _FREEOBJ, the events stackprof's object
 * mode and Datadog's profiler use through TracePoints; here as raw-argument
 * event hooks, a little cheaper per object), feeding the core's memory
 * driver.
 *
 * NEWOBJ runs inside the allocation, before the object is initialised: no
 * Ruby object may be allocated there, nothing may raise, and the object's
 * own size is not known yet (rb_obj_memsize_of would read it half-made).
 * So every object counts as the heap's base slot (slot_bytes: RVALUE size,
 * 40 bytes on 64-bit; see the README), the core draws the sampling gap, and
 * for a sampled object the hook only claims a slot of the driver's table,
 * copies the raw frames into it (rb_profile_frames: no allocation) and
 * queues it with the Fiber's labels. A postponed job, at the thread's next
 * safepoint, names the frames (frame_names.c, under the GVL: may allocate
 * and GC) and commits the slot; the core's thread then records it. The GC
 * marks (pins) the frames of queued slots, so none is freed or moved
 * before it is named. FREEOBJ hands every freed address to the core, whose
 * filter passes nearly all by.
 *
 * Label sets: the Fiber's set is alive when NEWOBJ reads it (the thread's
 * mirror holds it); the driver's grace hold, at the generation of the
 * oldest queued slot, keeps it from being freed until the job has made
 * its own copy to commit (it may have been retired in between).
 *
 * Threads: the hooks are added in the main Ractor (event hooks are per
 * Ractor: other Ractors' allocations are not seen, and a sampled object
 * found in another is not queued) and run with its GVL, as do the job,
 * start/stop and the GC's mark: everything here is owned by "the GVL". */
#include "native.h"

#include <string.h>

#include <ruby/debug.h>
#include <ruby/ractor.h>

#define QUEUE_MAX 256

typedef struct {
    pn_mem_slot *slot;
    uint8_t *buf;
    const pn_labelset *labels; /* borrowed: alive under the grace hold */
    uint64_t gen;
} queued;

static pn_driver *mem_driver;   /* GVL: NULL when memory profiling is off */
static size_t slot_bytes = 40;
static int hooked;              /* our event hooks are added */
static queued queue[QUEUE_MAX];
static unsigned qhead, qlen;
static int in_job;              /* the job's own allocations are not sampled */
static uint64_t queue_full, torn;
/* Set in the main Ractor only: the hooks' test of where they run (main
 * Ractor: a cached read). */
static rb_ractor_local_key_t main_key;
static int main_mark;

static int in_main_ractor(void) { return rb_ractor_local_storage_ptr(main_key) == &main_mark; }
static pn_frame_id *ids;        /* the job's scratch: max_depth + 1 ids */
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
static rb_postponed_job_handle_t job_handle = POSTPONED_JOB_HANDLE_INVALID;
#endif

uint64_t memory_queue_full(void) { return queue_full; }
uint64_t memory_torn(void) { return torn; }
pn_driver *memory_driver(void) { return mem_driver; }

size_t memory_capture_bytes(int max_depth)
{
    size_t n = sizeof(mem_capture_header) + ((size_t)max_depth + 1) * (sizeof(VALUE) + sizeof(int));
    return (n + 7) & ~(size_t)7;
}

/* Raw-argument event hooks (rb_add_event_hook2): the VM hands the trace
 * argument over directly, without a TracePoint object to check and unwrap
 * at every allocation and every free. */
static void on_free(VALUE unused, const rb_trace_arg_t *arg)
{
    (void)unused;
    pn_driver *d = mem_driver;
    /* Any Ractor's GC: the core's free is lock-free and thread-safe. */
    if (d)
        pn_mem_free(d, (const void *)rb_tracearg_object((rb_trace_arg_t *)arg));
}

static void memory_job(void *unused);

static void sample(pn_driver *d, VALUE obj)
{
    void *buf;
    size_t cap;
    pn_mem_slot *s = pn_mem_alloc_begin(d, (const void *)obj, slot_bytes, &buf, &cap);
    if (!s)
        return;
    if (qlen == QUEUE_MAX) {
        queue_full++;
        pn_mem_alloc_abandon(s); /* its weight is kept, without a stack */
        return;
    }
    mem_capture_header *h = buf;
    VALUE *frames = (VALUE *)(h + 1);
    int max = (int)((cap - sizeof *h) / (sizeof(VALUE) + sizeof(int)));
    if (max > g_max_depth + 1)
        max = g_max_depth + 1;
    int n = rb_profile_frames(0, max, frames, (int *)(frames + max));
    h->depth = n < 0 ? 0 : n > g_max_depth ? g_max_depth : n;
    h->truncated = n > g_max_depth;
    h->lines_at = max;
    uint64_t gen = pn_grace_generation();
    if (qlen == 0)
        pn_driver_hold(d, gen);
    queue[(qhead + qlen++) % QUEUE_MAX] = (queued){s, buf, labels_for_handler(), gen};
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    rb_postponed_job_trigger(job_handle);
#else
    rb_postponed_job_register_one(0, memory_job, NULL);
#endif
}

static void on_new(VALUE unused, const rb_trace_arg_t *arg)
{
    (void)unused;
    pn_driver *d = mem_driver;
    /* The gap is per OS thread, so any Ractor may count down; only the
     * main Ractor's sampled objects are queued (its GVL guards the queue). */
    if (!d || in_job || !pn_mem_sampled(d, slot_bytes) || !in_main_ractor())
        return;
    sample(d, rb_tracearg_object((rb_trace_arg_t *)arg));
}

/* A copy of the queued set that stays alive until released (the queued
 * one may be retired already; the hold keeps its memory readable). */
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

/* Name the frames of the oldest queued slot and commit it (GVL). It stays
 * queued (its frames marked) until named: naming allocates, and may GC. */
static void finish_oldest(void)
{
    queued *q = &queue[qhead];
    mem_capture_header *h = (mem_capture_header *)q->buf;
    VALUE *frames = (VALUE *)(h + 1);
    int *lines = (int *)(frames + h->lines_at);
    int depth = h->depth;
    for (int i = 0; i < depth; i++) {
        if (!symbolize_frame_ok(frames[i])) {
            torn++;
            depth = 0;
            break;
        }
        ids[i] = frame_names_id(frames[i]);
    }
    /* In place: each frame's VALUE becomes its (id, line), same size. */
    mem_frame *out = (mem_frame *)(h + 1);
    for (int i = 0; i < depth; i++) {
        uint32_t line = lines[i] > 0 ? (uint32_t)lines[i] : 0;
        out[i] = (mem_frame){ids[i], line};
    }
    h->depth = depth;
    const pn_labelset *own = own_labels(q->labels);
    pn_mem_alloc_commit(q->slot, sizeof *h + (size_t)depth * sizeof *out, NULL, own);
    pn_labelset_unref(own);
    qhead = (qhead + 1) % QUEUE_MAX;
    qlen--;
}

/* Every queued slot named and committed (GVL): the job, stop, flush. */
void memory_drain(void)
{
    if (in_job || !mem_driver)
        return;
    in_job = 1;
    while (qlen)
        finish_oldest();
    pn_driver_hold(mem_driver, 0);
    in_job = 0;
}

static void memory_job(void *unused)
{
    (void)unused;
    memory_drain();
}

void memory_mark(void)
{
    for (unsigned k = 0; k < qlen; k++) {
        const mem_capture_header *h = (const mem_capture_header *)queue[(qhead + k) % QUEUE_MAX].buf;
        const VALUE *frames = (const VALUE *)(h + 1);
        for (int i = 0; i < h->depth; i++)
            rb_gc_mark_maybe(frames[i]);
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

int memory_start(pn_driver *d, int max_depth, pn_error *e)
{
    if (frame_names_prepare() != 0 || !(ids = realloc(ids, ((size_t)max_depth + 1) * sizeof *ids)))
        return pn_fail(e, PN_ENOMEM, "memory: out of memory");
#ifdef HAVE_RB_POSTPONED_JOB_TRIGGER
    if (job_handle == POSTPONED_JOB_HANDLE_INVALID)
        job_handle = rb_postponed_job_preregister(0, memory_job, NULL);
    if (job_handle == POSTPONED_JOB_HANDLE_INVALID)
        return pn_fail(e, PN_ESTATE, "memory: no postponed job handle left");
#endif
    slot_bytes = base_slot_bytes();
    frame_names_reset_cache();
    qhead = qlen = 0;
    mem_driver = d;
    if (!hooked) {
        rb_event_hook_flag_t raw = RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG;
        rb_add_event_hook2((rb_event_hook_func_t)(void (*)(void))on_free,
                           RUBY_INTERNAL_EVENT_FREEOBJ, Qnil, raw);
        rb_add_event_hook2((rb_event_hook_func_t)(void (*)(void))on_new,
                           RUBY_INTERNAL_EVENT_NEWOBJ, Qnil, raw);
        hooked = 1;
    }
    return 0;
}

static void unhook(void)
{
    if (!hooked)
        return;
    rb_remove_event_hook((rb_event_hook_func_t)(void (*)(void))on_new);
    rb_remove_event_hook((rb_event_hook_func_t)(void (*)(void))on_free);
    hooked = 0;
    memory_drain();
}

/* Hooks off, the queue committed: the driver may be stopped after (GVL). */
void memory_stop(void)
{
    if (!mem_driver)
        return;
    unhook();
    mem_driver = NULL;
}

/* Ruby < 3.3, before Ractor.new (lib/pyroscope/ractor_guard.rb): a NEWOBJ
 * hook crashes a starting Ractor (Ruby bug #18464). The hooks go; the
 * driver stays until stop, so its last period and counters are kept. */
void memory_off_for_ractor(void)
{
    if (!hooked)
        return;
    unhook();
    pn_log(PN_LOG_WARN, "memory profile stopped: a Ractor starts, and on Ruby before 3.3 the "
           "VM's object hooks crash a starting Ractor (Ruby bug #18464); CPU profiling goes on");
}

/* In a forked child (the fork path's child hook, only this thread runs):
 * the core emptied the driver's table, so the queued slots are gone. The
 * hooks stay enabled: the child profiles its own allocations. */
void memory_after_fork_child(void)
{
    qhead = qlen = 0;
    in_job = 0;
    if (mem_driver)
        pn_driver_hold(mem_driver, 0);
}

void memory_init(void)
{
    main_key = rb_ractor_local_storage_ptr_newkey(NULL);
    rb_ractor_local_storage_ptr_set(main_key, &main_mark);
}
