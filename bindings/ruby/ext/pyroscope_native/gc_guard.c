/* GC guard: whether a GC may have freed or moved objects while a capture
 * was taken. rb_profile_frames hands out frame VALUEs (iseqs, method
 * entries) that a later mark phase may not see (the frame was popped, an
 * eval'd method became garbage) and compaction may move. A capture is only
 * kept when no GC step ran on this thread (rb_during_gc) and no GC cycle
 * began (rb_gc_count) while it was taken; from then on thread_registry.c
 * pins its frames until they are symbolized (a registered, write-barrier
 * unprotected object marks them, so a mark phase under way re-marks them
 * when it finishes). symbolize.c checks each frame's type again before use,
 * for a GC step another thread ran while a thread without the GVL was
 * captured.
 *
 * No GC event hooks on purpose: any RUBY_INTERNAL_EVENT_GC_* hook sends
 * every object allocation of the process down the VM's slow path (measured:
 * +10-15% CPU on allocation-heavy code). Both reads below are plain loads
 * of the VM's counters: safe in a signal handler while the VM is alive. */
#include "native.h"

HANDLER_PATH uint64_t gc_guard_cycle(void)
{
    uint64_t g = (uint64_t)rb_gc_count() << 1;
    if (rb_during_gc())
        g |= 1;
    return g;
}
