/* Per-period intern tables for strings and frames.
 *
 * Everything is allocated up front (calloc: pages stay untouched until used)
 * so the sampler can intern without allocating. A table belongs to one store
 * period: the store's writer fills it, the exporter reads it after the swap,
 * and reset clears only the slots that were used. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "pyroscope_native.h"

typedef struct {
    uint32_t off;   /* into arena */
    uint32_t len;
    uint32_t hash;
    uint32_t slot;  /* where the index points at us: reset clears just that */
} str_ent;

typedef struct {
    uint32_t name, file, line;
    uint32_t hash;
    uint32_t slot;
} frame_ent;

struct pn_symbols {
    char *arena;
    size_t arena_cap, arena_used;

    str_ent *strs;
    uint32_t nstrs, max_strs;
    uint32_t *str_index;        /* 0 = free, else string id + 1 */
    uint32_t str_mask;

    frame_ent *frames;
    uint32_t nframes, max_frames;
    uint32_t *frame_index;      /* 0 = free, else frame id + 1 */
    uint32_t frame_mask;

    uint64_t generation;
    uint64_t dropped;
};

/* Source of generations: unique across every table of the process, so a
 * walker cache keyed by generation alone can never confuse two periods'
 * tables. Any thread. */
static _Atomic uint64_t generations;

static const char *const synthetic[PN_FRAME_FIRST_USER] = {
    [PN_FRAME_UNKNOWN] = "[unknown]",
    [PN_FRAME_TRUNCATED] = "[truncated]",
    [PN_FRAME_OVERFLOW] = "[overflow]",
};

static void add_synthetic(pn_symbols *s)
{
    uint32_t empty = pn_symbols_string(s, "", 0);
    (void)empty; /* always PN_STR_EMPTY: the first string */
    for (uint32_t i = 0; i < PN_FRAME_FIRST_USER; i++) {
        uint32_t name = pn_symbols_string(s, synthetic[i], strlen(synthetic[i]));
        pn_symbols_frame(s, name, PN_STR_EMPTY, 0);
    }
}

pn_symbols *pn_symbols_new(size_t max_string_bytes, uint32_t max_frames)
{
    if (max_string_bytes < 4096)
        max_string_bytes = 4096;
    if (max_frames < 64)
        max_frames = 64;
    pn_symbols *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->arena_cap = max_string_bytes;
    s->max_strs = max_frames + 1024;
    s->max_frames = max_frames;
    uint32_t str_slots = pn_pow2_at_least((uint64_t)s->max_strs * 2);
    uint32_t frame_slots = pn_pow2_at_least((uint64_t)max_frames * 2);
    s->str_mask = str_slots - 1;
    s->frame_mask = frame_slots - 1;
    s->arena = calloc(1, s->arena_cap);
    s->strs = calloc(s->max_strs, sizeof *s->strs);
    s->str_index = calloc(str_slots, sizeof *s->str_index);
    s->frames = calloc(max_frames, sizeof *s->frames);
    s->frame_index = calloc(frame_slots, sizeof *s->frame_index);
    if (!s->arena || !s->strs || !s->str_index || !s->frames || !s->frame_index) {
        pn_symbols_free(s);
        return NULL;
    }
    s->generation = atomic_fetch_add(&generations, 1) + 1;
    add_synthetic(s);
    return s;
}

void pn_symbols_free(pn_symbols *s)
{
    if (!s)
        return;
    free(s->arena);
    free(s->strs);
    free(s->str_index);
    free(s->frames);
    free(s->frame_index);
    free(s);
}

void pn_symbols_reset(pn_symbols *s)
{
    /* Clear only what was used: touching the whole index would make every
     * period's reset cost (and resident memory) proportional to capacity. */
    for (uint32_t i = 0; i < s->nstrs; i++)
        s->str_index[s->strs[i].slot] = 0;
    for (uint32_t i = 0; i < s->nframes; i++)
        s->frame_index[s->frames[i].slot] = 0;
    s->nstrs = 0;
    s->nframes = 0;
    s->arena_used = 0;
    s->dropped = 0;
    s->generation = atomic_fetch_add(&generations, 1) + 1;
    add_synthetic(s);
}

uint64_t pn_symbols_generation(const pn_symbols *s) { return s->generation; }

/* Cut over-long names at a UTF-8 character boundary and mark the cut. */
static size_t clipped_len(const char *str, size_t len, int *clipped)
{
    *clipped = 0;
    if (len <= PN_MAX_STRING)
        return len;
    size_t n = PN_MAX_STRING - 3;
    while (n > 0 && ((unsigned char)str[n] & 0xC0) == 0x80)
        n--;
    *clipped = 1;
    return n;
}

uint32_t pn_symbols_string(pn_symbols *s, const char *str, size_t len)
{
    int clipped;
    size_t n = clipped_len(str, len, &clipped);
    size_t stored = n + (clipped ? 3 : 0);
    uint32_t h = pn_hash_bytes(str, n, PN_HASH_SEED);
    if (clipped)
        h = pn_hash_bytes("...", 3, h);
    uint32_t slot = h & s->str_mask;
    for (;;) {
        uint32_t v = s->str_index[slot];
        if (v == 0)
            break;
        const str_ent *e = &s->strs[v - 1];
        if (e->hash == h && e->len == stored && memcmp(s->arena + e->off, str, n) == 0 &&
            (!clipped || memcmp(s->arena + e->off + n, "...", 3) == 0))
            return v - 1;
        slot = (slot + 1) & s->str_mask;
    }
    if (s->nstrs >= s->max_strs || s->arena_used + stored + 1 > s->arena_cap) {
        s->dropped++;
        return PN_STR_EMPTY;
    }
    str_ent *e = &s->strs[s->nstrs];
    e->off = (uint32_t)s->arena_used;
    e->len = (uint32_t)stored;
    e->hash = h;
    e->slot = slot;
    memcpy(s->arena + e->off, str, n);
    if (clipped)
        memcpy(s->arena + e->off + n, "...", 3);
    s->arena[e->off + stored] = '\0';
    s->arena_used += stored + 1;
    s->str_index[slot] = ++s->nstrs;
    return s->nstrs - 1;
}

pn_frame_id pn_symbols_frame(pn_symbols *s, uint32_t name_sid, uint32_t file_sid,
                             uint32_t line)
{
    uint32_t h = pn_hash_u32(pn_hash_u32(pn_hash_u32(PN_HASH_SEED, name_sid), file_sid),
                             line);
    uint32_t slot = h & s->frame_mask;
    for (;;) {
        uint32_t v = s->frame_index[slot];
        if (v == 0)
            break;
        const frame_ent *f = &s->frames[v - 1];
        if (f->hash == h && f->name == name_sid && f->file == file_sid && f->line == line)
            return v - 1;
        slot = (slot + 1) & s->frame_mask;
    }
    if (s->nframes >= s->max_frames) {
        s->dropped++;
        return PN_FRAME_UNKNOWN;
    }
    frame_ent *f = &s->frames[s->nframes];
    f->name = name_sid;
    f->file = file_sid;
    f->line = line;
    f->hash = h;
    f->slot = slot;
    s->frame_index[slot] = ++s->nframes;
    return s->nframes - 1;
}

pn_frame_id pn_symbols_frame3(pn_symbols *s, const char *name, size_t nlen,
                              const char *file, size_t flen, uint32_t line)
{
    uint32_t n = pn_symbols_string(s, name, nlen);
    uint32_t f = pn_symbols_string(s, file, flen);
    if (n == PN_STR_EMPTY && nlen > 0)
        return PN_FRAME_UNKNOWN;
    return pn_symbols_frame(s, n, f, line);
}

const char *pn_symbols_str(const pn_symbols *s, uint32_t sid, size_t *len)
{
    if (sid >= s->nstrs) {
        if (len)
            *len = 0;
        return "";
    }
    if (len)
        *len = s->strs[sid].len;
    return s->arena + s->strs[sid].off;
}

int pn_symbols_frame_get(const pn_symbols *s, pn_frame_id f, uint32_t *name_sid,
                         uint32_t *file_sid, uint32_t *line)
{
    if (f >= s->nframes)
        return -1;
    *name_sid = s->frames[f].name;
    *file_sid = s->frames[f].file;
    *line = s->frames[f].line;
    return 0;
}

uint32_t pn_symbols_frame_count(const pn_symbols *s) { return s->nframes; }

uint32_t pn_symbols_string_count(const pn_symbols *s) { return s->nstrs; }

uint64_t pn_symbols_dropped(const pn_symbols *s) { return s->dropped; }
