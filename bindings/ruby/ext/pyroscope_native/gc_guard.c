/* GC guard: whether a GC may have freed or moved objects since a capture
 * began. rb_profile_frames hands out frame VALUEs (iseqs, method entries)
 * that a later mark phase may not see (the frame was popped, an eval'd
 * method became garbage) and compaction may move; a capture is only kept
 * when no GC step ran and no mark phase was under way while it was taken,
 * and from then on thread_registry.c pins its frames until they are symbolized.
 *
 * Written by GC internal event hooks (GVL holder, inside GC), read by the
 * handler on any thread: plain atomics only. */
#include "native.h"

#include <ruby/debug.h>

/* Bumped at every gc_enter and gc_exit: odd while a GC step runs. */
static _Atomic uint64_t step_gen;
/* 1 from GC_START (marking begins) to GC_END_MARK: between incremental
 * marking steps the roots were already marked without our pins. */
static atomic_int marking;
static VALUE tracepoint = Qnil;  /* GVL; registered with the GC */

static void on_gc_event(VALUE tpval, void *unused)
{
    (void)unused;
    rb_event_flag_t ev = rb_tracearg_event_flag(rb_tracearg_from_tracepoint(tpval));
    switch (ev) {
    case RUBY_INTERNAL_EVENT_GC_ENTER:
    case RUBY_INTERNAL_EVENT_GC_EXIT:
        atomic_fetch_add(&step_gen, 1);
        break;
    case RUBY_INTERNAL_EVENT_GC_START:
        atomic_store(&marking, 1);
        atomic_fetch_add(&step_gen, 2); /* a new cycle, even if ENTER was missed */
        break;
    case RUBY_INTERNAL_EVENT_GC_END_MARK:
        atomic_store(&marking, 0);
        break;
    default:
        break;
    }
}

void gc_guard_init(void)
{
    tracepoint = rb_tracepoint_new(0,
                                   RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT |
                                       RUBY_INTERNAL_EVENT_GC_START |
                                       RUBY_INTERNAL_EVENT_GC_END_MARK,
                                   on_gc_event, NULL);
    rb_gc_register_mark_object(tracepoint);
}

void gc_guard_enable(int on)
{
    if (on) {
        /* Enabled between GC steps (we hold the GVL): an incremental mark
         * phase may be under way, whose GC_START we did not see. */
        VALUE state = rb_gc_latest_gc_info(ID2SYM(rb_intern("state")));
        atomic_store(&marking, state == ID2SYM(rb_intern("marking")));
        rb_tracepoint_enable(tracepoint);
    } else {
        rb_tracepoint_disable(tracepoint);
    }
}

uint64_t gc_guard_cycle(void)
{
    uint64_t g = atomic_load(&step_gen);
    if (atomic_load(&marking) || rb_during_gc())
        g |= 1;
    return g;
}
