/* Frame names for the memory profile: a process-wide table of (name,
 * file) pairs that Ruby threads fill under the GVL and the core's memory
 * thread reads without it.
 *
 * The memory driver names a sample's frames on its own thread, where no
 * Ruby API may be called. So the postponed job that finishes a sampled
 * allocation (memory_hooks.c) turns each frame VALUE into the id of an
 * entry here (rb_profile_frame_full_label/path, under the GVL), and the
 * driver's symbolize callback turns ids into frames of its symbol table.
 * Entries are immutable once published and never freed (bounded:
 * NAMES_MAX entries, NAMES_BYTES of text; past it frames are [unknown]),
 * so the reader needs no lock, and a forked child keeps them. A small
 * cache maps a frame VALUE to its id; the GC marks (pins) the frames in it
 * so an address there cannot be reused by another frame.
 *
 * Threads: frame_names_id, _mark: GVL. frame_names_symbolize: any thread. */
#include "native.h"

#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>

#define NAMES_MAX 65536u          /* entries; id 0 is [unknown] */
#define NAMES_BYTES (16u << 20)
#define INDEX_SIZE (2 * NAMES_MAX) /* open addressing over the entries */
#define CACHE_SIZE 4096            /* power of two */

typedef struct {
    uint32_t name_len, file_len;
    char text[];                /* name, then file */
} name_entry;

/* Published with a release store after the entry is written (GVL);
 * read by any thread. */
static _Atomic(name_entry *) *entries;
/* GVL only. */
static uint32_t nentries = 1, *index_ids; /* index: entry id, 0 = empty */
static size_t text_bytes;
static uint64_t full;           /* frames that fell to [unknown] */
static struct {
    VALUE frame;
    uint32_t id;
} cache[CACHE_SIZE];

uint64_t frame_names_full(void) { return full; }

int frame_names_prepare(void)
{
    if (entries)
        return 0;
    entries = calloc(NAMES_MAX, sizeof *entries);
    index_ids = calloc(INDEX_SIZE, sizeof *index_ids);
    if (entries && index_ids)
        return 0;
    free((void *)entries);
    free(index_ids);
    entries = NULL;
    index_ids = NULL;
    return -1;
}

static uint64_t hash_bytes(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

/* The id of (name, file), added when new; 0 when the table is full. */
static uint32_t intern(const char *name, size_t nl, const char *file, size_t fl)
{
    uint64_t h = hash_bytes(hash_bytes(0xcbf29ce484222325ull, name, nl) * 31, file, fl);
    for (uint32_t k = 0; k < INDEX_SIZE; k++) {
        uint32_t *slot = &index_ids[(h + k) & (INDEX_SIZE - 1)];
        if (*slot) {
            name_entry *e = atomic_load_explicit(&entries[*slot], memory_order_relaxed);
            if (e->name_len == nl && e->file_len == fl && memcmp(e->text, name, nl) == 0 &&
                memcmp(e->text + nl, file, fl) == 0)
                return *slot;
            continue;
        }
        if (nentries >= NAMES_MAX || text_bytes + nl + fl > NAMES_BYTES)
            return 0;
        name_entry *e = malloc(sizeof *e + nl + fl);
        if (!e)
            return 0;
        e->name_len = (uint32_t)nl;
        e->file_len = (uint32_t)fl;
        memcpy(e->text, name, nl);
        memcpy(e->text + nl, file, fl);
        text_bytes += nl + fl;
        atomic_store_explicit(&entries[nentries], e, memory_order_release);
        return *slot = nentries++;
    }
    return 0;
}

uint32_t frame_names_id(VALUE frame)
{
    if (!entries || !symbolize_frame_ok(frame))
        return 0;
    size_t at = ((uintptr_t)frame >> 3) & (CACHE_SIZE - 1);
    if (cache[at].frame == frame)
        return cache[at].id;
    VALUE name = rb_profile_frame_full_label(frame), path = rb_profile_frame_path(frame);
    const char *np = "", *fp = "";
    size_t nl = 0, fl = 0;
    if (RB_TYPE_P(name, T_STRING)) {
        np = RSTRING_PTR(name);
        nl = (size_t)RSTRING_LEN(name);
    }
    if (RB_TYPE_P(path, T_STRING))
        fp = source_path_short(RSTRING_PTR(path), (size_t)RSTRING_LEN(path), &fl);
    uint32_t id = intern(np, nl, fp, fl);
    RB_GC_GUARD(name);
    RB_GC_GUARD(path);
    if (!id) {
        full++;
        return 0;
    }
    cache[at].frame = frame;
    cache[at].id = id;
    return id;
}

void frame_names_mark(void)
{
    for (size_t i = 0; i < CACHE_SIZE; i++)
        if (cache[i].frame)
            rb_gc_mark(cache[i].frame);
}

/* In a forked child the VALUEs are the parent's (the same objects, so the
 * cache stays right); nothing to do. After the VM's frames could have
 * changed meaning (a new start), drop the cache. GVL. */
void frame_names_reset_cache(void) { memset(cache, 0, sizeof cache); }

size_t frame_names_symbolize(void *ctx, const void *raw, size_t len, pn_symbols *sym,
                             pn_frame_id *out, size_t max)
{
    (void)ctx;
    const mem_capture_header *h = raw;
    if (len < sizeof *h)
        return 0;
    const mem_frame *f = (const mem_frame *)(h + 1);
    size_t n = 0, depth = (size_t)h->depth;
    if (depth > (len - sizeof *h) / sizeof *f)
        depth = (len - sizeof *h) / sizeof *f;
    for (size_t i = 0; i < depth && n < max; i++) {
        name_entry *e = f[i].id && f[i].id < NAMES_MAX
                            ? atomic_load_explicit(&entries[f[i].id], memory_order_acquire)
                            : NULL;
        out[n++] = e ? pn_symbols_frame3(sym, e->text, e->name_len, e->text + e->name_len,
                                         e->file_len, f[i].line)
                     : PN_FRAME_UNKNOWN;
    }
    if (h->truncated && n < max)
        out[n++] = PN_FRAME_TRUNCATED;
    return n;
}
