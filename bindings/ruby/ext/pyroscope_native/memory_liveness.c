/* Which of the memory profile's sampled objects are still alive, without
 * a FREEOBJ hook (any object-space hook sends every allocation down the
 * VM's slow path on 3.1, and a per-free call costs on every version).
 *
 * A sampled object is followed by its object id (rb_obj_id, taken in the
 * job right after the allocation, while the object is pinned): ids are
 * never reused and follow an object that GC.compact moves. Its key in the
 * core's live table is made from the id. A sweep, under the GVL, asks
 * ObjectSpace._id2ref for each id followed since before the current GC
 * cycle (an object allocated in this cycle cannot have been freed yet:
 * that takes a new cycle's sweep), and hands the core the keys of the dead
 * ones; the core's in-use snapshot then has only the live ones. Sweeps run
 * at a flush and stop, and at most once a second after a GC cycle (from
 * the window job), so the snapshot the core takes at a period's end is
 * that fresh. Dead ids cost an exception each (rb_protect); live ones a
 * table lookup. Hidden and internal objects (no class, imemo, nodes) are
 * not followed: their sampled allocation counts, and leaves the live table
 * at once. So are all objects while another Ractor runs (_id2ref refuses
 * other Ractors' unshareable objects: they would read as dead).
 *
 * Threads: everything here under the GVL (the window job, flush, stop,
 * start, the fork child's first job). */
#include "native.h"

#include <stdlib.h>

#define SWEEP_EVERY_NS 1000000000LL

typedef struct {
    VALUE id;                   /* a Fixnum */
    size_t gc;                  /* rb_gc_count() when it was followed */
} followed;

static followed *live;
static uint32_t nlive, live_max;
static uint64_t synthetic;      /* keys of samples not followed */
static uint64_t not_followed;
static size_t swept_gc;
static int64_t swept_ns;
static VALUE object_space = Qnil, ractor = Qnil; /* registered with the GC */
static ID id_id2ref, id_count;

uint64_t liveness_not_followed(void) { return not_followed; }

int liveness_prepare(uint32_t max_live)
{
    if (NIL_P(object_space)) {
        rb_gc_register_address(&object_space);
        rb_gc_register_address(&ractor);
        object_space = rb_const_get(rb_cObject, rb_intern("ObjectSpace"));
        ractor = rb_const_get(rb_cObject, rb_intern("Ractor"));
        id_id2ref = rb_intern("_id2ref");
        id_count = rb_intern("count");
    }
    followed *n = realloc(live, (size_t)(max_live ? max_live : 1) * sizeof *n);
    if (!n)
        return -1;
    live = n;
    live_max = max_live;
    nlive = 0;
    swept_gc = rb_gc_count();
    swept_ns = pn_clock_ns(CLOCK_MONOTONIC);
    return 0;
}

/* Ractor.count > 1 (rb_multi_ractor_p is not public). */
static int other_ractors(void)
{
    VALUE n = rb_funcall(ractor, id_count, 0);
    return !RB_FIXNUM_P(n) || FIX2LONG(n) > 1;
}

static int followable(VALUE obj)
{
    if (RB_SPECIAL_CONST_P(obj) || !RBASIC_CLASS(obj))
        return 0;
    switch (RB_BUILTIN_TYPE(obj)) {
    case T_OBJECT: case T_CLASS: case T_MODULE: case T_FLOAT: case T_STRING:
    case T_REGEXP: case T_ARRAY: case T_HASH: case T_STRUCT: case T_BIGNUM:
    case T_FILE: case T_DATA: case T_MATCH: case T_COMPLEX: case T_RATIONAL:
        return 1;
    default:
        return 0;
    }
}

static uintptr_t key_of(VALUE id) { return (uintptr_t)FIX2LONG(id) << 4; }

/* The key for sampled obj (alive and pinned now): 1 when it is followed,
 * 0 when not (a key no id makes: the caller frees it after commit). */
int liveness_follow(VALUE obj, uintptr_t *key)
{
    if (nlive < live_max && followable(obj) && !other_ractors()) {
        VALUE id = rb_obj_id(obj);
        if (RB_FIXNUM_P(id) && FIX2LONG(id) > 0) {
            live[nlive++] = (followed){id, rb_gc_count()};
            *key = key_of(id);
            return 1;
        }
    }
    not_followed++;
    *key = (uintptr_t)(++synthetic << 4) | 8;
    return 0;
}

static VALUE id2ref(VALUE id) { return rb_funcall(object_space, id_id2ref, 1, id); }

static int alive(VALUE id)
{
    int state = 0;
    rb_protect(id2ref, id, &state);
    if (state)
        rb_set_errinfo(Qnil);
    return !state;
}

/* Tell the core which followed objects died. force: now (flush, stop);
 * otherwise only after a GC cycle, at most once a second. */
void liveness_sweep(pn_driver *d, int force)
{
    size_t gc = rb_gc_count();
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    if (!force && (gc == swept_gc || now - swept_ns < SWEEP_EVERY_NS))
        return;
    swept_gc = gc;
    swept_ns = now;
    /* With another Ractor running, _id2ref refuses every unshareable
     * object: no sweep then (nothing is taken for dead). */
    if (other_ractors())
        return;
    for (uint32_t i = 0; i < nlive;) {
        if (live[i].gc != gc && !alive(live[i].id)) {
            pn_mem_free(d, (const void *)key_of(live[i].id));
            live[i] = live[--nlive];
            continue;
        }
        i++;
    }
}

void liveness_drop_last(void)
{
    if (nlive)
        nlive--;
}

/* The core's table was emptied (fork child) or is new (start). */
void liveness_forget(void) { nlive = 0; }
