/* Per-period intern tables for strings and frames.
 *
 * Every table is reserved up front for its maximum (pages.h: address space,
 * no RAM until written) so the sampler interns without allocating, and the
 * hash indexes grow in place within their reservations (index.h). A table
 * belongs to one store period: the store's writer fills it, the exporter
 * reads it after the swap, and reset hands its pages back, so resident
 * memory follows what the period holds. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "support/hash.h"
#include "support/index.h"
#include "support/pages.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"

typedef struct {
    uint32_t off;   /* into arena */
    uint32_t len;
    uint32_t hash;
} str_ent;

typedef struct {
    uint32_t name, file, line;
    uint32_t hash;
} frame_ent;

/* Written by the owning period's writer only; read by the exporter once the
 * period is swapped out (see pn_symbols in the header). */
struct pn_symbols {
    char *arena;
    size_t arena_cap, arena_used;

    str_ent *strs;
    uint32_t nstrs, max_strs;
    pn_index str_index;

    frame_ent *frames;
    uint32_t nframes, max_frames;
    pn_index frame_index;

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
    if (max_string_bytes > UINT32_MAX)
        max_string_bytes = UINT32_MAX; /* string offsets are 32-bit */
    if (max_frames > (1u << 30) - 1024)
        max_frames = (1u << 30) - 1024; /* index slots stay below 2^32 */
    pn_symbols *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->arena_cap = max_string_bytes;
    s->max_strs = max_frames + 1024;
    s->max_frames = max_frames;
    s->arena = pn_pages_new(s->arena_cap);
    s->strs = pn_pages_new((size_t)s->max_strs * sizeof *s->strs);
    s->frames = pn_pages_new((size_t)max_frames * sizeof *s->frames);
    int idx_failed = pn_index_init(&s->str_index, s->max_strs) != 0;
    idx_failed |= pn_index_init(&s->frame_index, max_frames) != 0;
    if (!s->arena || !s->strs || !s->frames || idx_failed) {
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
    pn_pages_free(s->arena, s->arena_cap);
    pn_pages_free(s->strs, (size_t)s->max_strs * sizeof *s->strs);
    pn_pages_free(s->frames, (size_t)s->max_frames * sizeof *s->frames);
    pn_index_free(&s->str_index);
    pn_index_free(&s->frame_index);
    free(s);
}

void pn_symbols_reset(pn_symbols *s)
{
    /* Hand back what was used rather than keep it for the next period: the
     * periods take turns, so kept pages would stay resident while the table
     * sits empty between its periods. */
    pn_pages_clear(s->arena, s->arena_used);
    pn_pages_clear(s->strs, (size_t)s->nstrs * sizeof *s->strs);
    pn_pages_clear(s->frames, (size_t)s->nframes * sizeof *s->frames);
    pn_index_clear(&s->str_index, s->nstrs);
    pn_index_clear(&s->frame_index, s->nframes);
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
    uint32_t slot = h & s->str_index.mask;
    for (;;) {
        uint32_t v = s->str_index.slots[slot];
        if (v == 0)
            break;
        const str_ent *e = &s->strs[v - 1];
        if (e->hash == h && e->len == stored && memcmp(s->arena + e->off, str, n) == 0 &&
            (!clipped || memcmp(s->arena + e->off + n, "...", 3) == 0))
            return v - 1;
        slot = (slot + 1) & s->str_index.mask;
    }
    if (s->nstrs >= s->max_strs || s->arena_used + stored + 1 > s->arena_cap) {
        s->dropped++;
        return PN_STR_EMPTY;
    }
    if (pn_index_need_room(&s->str_index, s->nstrs) &&
        pn_index_grow(&s->str_index, s->nstrs, s->strs, sizeof *s->strs,
                      offsetof(str_ent, hash)))
        slot = pn_index_free_slot(&s->str_index, h);
    str_ent *e = &s->strs[s->nstrs];
    e->off = (uint32_t)s->arena_used;
    e->len = (uint32_t)stored;
    e->hash = h;
    memcpy(s->arena + e->off, str, n);
    if (clipped)
        memcpy(s->arena + e->off + n, "...", 3);
    s->arena[e->off + stored] = '\0';
    s->arena_used += stored + 1;
    s->str_index.slots[slot] = ++s->nstrs;
    return s->nstrs - 1;
}

pn_frame_id pn_symbols_frame(pn_symbols *s, uint32_t name_sid, uint32_t file_sid,
                             uint32_t line)
{
    uint32_t h = pn_hash_u32(pn_hash_u32(pn_hash_u32(PN_HASH_SEED, name_sid), file_sid),
                             line);
    uint32_t slot = h & s->frame_index.mask;
    for (;;) {
        uint32_t v = s->frame_index.slots[slot];
        if (v == 0)
            break;
        const frame_ent *f = &s->frames[v - 1];
        if (f->hash == h && f->name == name_sid && f->file == file_sid && f->line == line)
            return v - 1;
        slot = (slot + 1) & s->frame_index.mask;
    }
    if (s->nframes >= s->max_frames) {
        s->dropped++;
        return PN_FRAME_UNKNOWN;
    }
    if (pn_index_need_room(&s->frame_index, s->nframes) &&
        pn_index_grow(&s->frame_index, s->nframes, s->frames, sizeof *s->frames,
                      offsetof(frame_ent, hash)))
        slot = pn_index_free_slot(&s->frame_index, h);
    frame_ent *f = &s->frames[s->nframes];
    f->name = name_sid;
    f->file = file_sid;
    f->line = line;
    f->hash = h;
    s->frame_index.slots[slot] = ++s->nframes;
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

size_t pn_symbols_resident_bytes(const pn_symbols *s)
{
    return pn_pages_resident(s->arena, s->arena_cap) +
           pn_pages_resident(s->strs, (size_t)s->max_strs * sizeof *s->strs) +
           pn_pages_resident(s->frames, (size_t)s->max_frames * sizeof *s->frames) +
           pn_index_resident(&s->str_index) + pn_index_resident(&s->frame_index);
}
