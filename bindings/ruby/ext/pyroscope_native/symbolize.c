/* The consumer of captures: under the GVL (a postponed job, or an API
 * call), turn each committed capture's frame VALUEs into interned frames
 * of the period it belongs to, record it, and unpin its frames.
 *
 * Names come from rb_profile_frame_full_label/path, which allocate; a GC
 * they trigger cannot free or move the frames still waiting (thread_registry.c
 * pins them). A small cache maps a frame VALUE to its interned name and
 * file, and with the line it was last seen at to its frame id, for one
 * period's symbols (a loop's frames come back at the same lines, so most
 * frames of a capture cost one lookup here, none in the period's tables);
 * the GC marks (and so pins) every frame in it, so an address in the cache
 * cannot be freed and reused by another object while it is there (at most
 * CACHE_SIZE frames are kept alive).
 *
 * Threads: GVL only (one consumer at a time, as the core requires). */
#include "native.h"

#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>

#define CACHE_SIZE 4096 /* power of two */

typedef struct {
    VALUE frame;
    uint32_t name_sid, file_sid;
    uint32_t line;              /* LINE_NONE: id not computed yet */
    pn_frame_id id;             /* of (name, file, line) */
} cache_entry;
#define LINE_NONE UINT32_MAX

static cache_entry cache[CACHE_SIZE];
static uint64_t cache_symgen;   /* pn_symbols generation it is valid for */
static uint64_t jobs, torn;

uint64_t symbolize_torn(void) { return torn; }

/* A frame rb_profile_frames can hand out: an iseq or a method entry (both
 * imemo objects; the imemo kind sits in the flags above the user-flag
 * shift, 6 = method entry and 7 = iseq in Ruby 3.1-3.4). Anything else is
 * a slot a concurrent GC step freed or moved: never pass it on. */
int symbolize_frame_ok(VALUE f)
{
    if (RB_SPECIAL_CONST_P(f) || RB_BUILTIN_TYPE(f) != T_IMEMO)
        return 0;
    unsigned kind = (unsigned)((RBASIC(f)->flags >> RUBY_FL_USHIFT) & 0x0f);
    return kind == 6 || kind == 7;
}
/* Frame ids of the capture being recorded: max_depth + 1 (GVL). */
static pn_frame_id *ids;
static size_t ids_cap;

int symbolize_prepare(int max_depth)
{
    size_t want = (size_t)max_depth + 1;
    if (want > ids_cap) {
        pn_frame_id *n = realloc(ids, want * sizeof *n);
        if (!n)
            return -1;
        ids = n;
        ids_cap = want;
    }
    return 0;
}

uint64_t symbolize_jobs(void) { return jobs; }

void symbolize_reset(void)
{
    memset(cache, 0, sizeof cache);
    cache_symgen = 0;
    source_path_refresh();
}

static uint32_t intern_value(pn_symbols *s, VALUE str)
{
    if (!RB_TYPE_P(str, T_STRING) || RSTRING_LEN(str) == 0)
        return PN_STR_EMPTY;
    return pn_symbols_string(s, RSTRING_PTR(str), (size_t)RSTRING_LEN(str));
}

/* A frame's file, shortened as the pyroscope gem did (source_path.c). */
static uint32_t intern_path(pn_symbols *s, VALUE str)
{
    if (!RB_TYPE_P(str, T_STRING) || RSTRING_LEN(str) == 0)
        return PN_STR_EMPTY;
    size_t n;
    const char *p = source_path_short(RSTRING_PTR(str), (size_t)RSTRING_LEN(str), &n);
    return pn_symbols_string(s, p, n);
}

/* The cache is for one symbol table: a new period's starts it empty (and
 * reads the working directory again, as the gem did at each report). */
static void cache_check(pn_symbols *s)
{
    uint64_t gen = pn_symbols_generation(s);
    if (gen != cache_symgen) {
        memset(cache, 0, sizeof cache);
        cache_symgen = gen;
        source_path_refresh();
    }
}

static pn_frame_id frame_id(pn_symbols *s, VALUE frame, int line)
{
    cache_entry *c = &cache[((uintptr_t)frame >> 3) & (CACHE_SIZE - 1)];
    if (c->frame != frame) {
        uint32_t name = intern_value(s, rb_profile_frame_full_label(frame));
        uint32_t file = intern_path(s, rb_profile_frame_path(frame));
        /* frame itself is pinned by its capture until it is in here. */
        c->frame = frame;
        c->name_sid = name;
        c->file_sid = file;
        c->line = LINE_NONE;
    }
    uint32_t l = line > 0 ? (uint32_t)line : 0;
    if (c->line != l) {
        c->id = pn_symbols_frame(s, c->name_sid, c->file_sid, l);
        c->line = l;
    }
    return c->id;
}

static void unpin(rthread *r, const VALUE *frames)
{
    if (r && atomic_load(&r->pin_frames) == frames) {
        atomic_store(&r->pin_depth, 0);
        atomic_store(&r->pin_frames, NULL);
    }
}

static void on_capture(void *ud, pn_driver *d, const pn_capture_view *v)
{
    (void)ud;
    const capture_header *h = v->data;
    const VALUE *frames = (const VALUE *)((const uint8_t *)v->data + sizeof *h);
    const int *lines = (const int *)(frames + h->lines_at);
    for (int i = 0; i < h->depth; i++) {
        if (!symbolize_frame_ok(frames[i])) {
            torn++;
            unpin(h->owner, frames);
            return;
        }
    }
    pn_period *p = h->depth > 0 || h->in_gc ? pn_record_period(d, v->time_ns) : NULL;
    if (p) {
        pn_symbols *s = pn_period_symbols(p);
        cache_check(s);
        size_t n = 0;
        if (h->in_gc) {
            static const char gc[] = "(garbage collection)";
            ids[n++] = pn_symbols_frame3(s, gc, sizeof gc - 1, "", 0, 0);
        }
        for (int i = 0; i < h->depth && (size_t)i + 1 < ids_cap; i++)
            ids[n++] = frame_id(s, frames[i], lines[i]);
        if (h->truncated)
            ids[n++] = PN_FRAME_TRUNCATED;
        int64_t values[2] = {v->value_ns, 1};
        char name[PN_THREAD_NAME_MAX];
        const char *tname =
            g_thread_names && pn_thread_name_get((pid_t)v->tid, name, sizeof name) ? name : NULL;
        pn_sample smp = {ids, n, v->labels, v->tid, tname, values, v->time_ns};
        pn_record(d, p, &smp);
    }
    unpin(h->owner, frames);
}

void symbolize_mark(void)
{
    for (size_t i = 0; i < CACHE_SIZE; i++)
        if (cache[i].frame)
            rb_gc_mark(cache[i].frame);
}

void symbolize_drain(pn_driver *d)
{
    jobs++;
    pn_rendezvous_drain(d, on_capture, NULL);
}
