/* Growable open-addressing index (see index.h). */
#include <string.h>

#include "support/hash.h"
#include "support/index.h"
#include "support/pages.h"

/* One page of slots to start with: a smaller index saves nothing. */
#define FIRST_SLOTS 1024u

static uint32_t first_slots(const pn_index *x)
{
    return x->max_slots < FIRST_SLOTS ? x->max_slots : FIRST_SLOTS;
}

int pn_index_init(pn_index *x, uint32_t max_entries)
{
    x->max_slots = pn_pow2_at_least((uint64_t)(max_entries ? max_entries : 1) * 2);
    x->slots = pn_pages_new((size_t)x->max_slots * sizeof *x->slots);
    x->mask = first_slots(x) - 1;
    return x->slots ? 0 : -1;
}

void pn_index_free(pn_index *x)
{
    pn_pages_free(x->slots, (size_t)x->max_slots * sizeof *x->slots);
    x->slots = NULL;
}

/* Slots for n entries at most half full, within [first, max]. */
static uint32_t slots_for(const pn_index *x, uint32_t n)
{
    uint64_t want = pn_pow2_at_least(((uint64_t)n + 1) * 2);
    if (want < first_slots(x))
        want = first_slots(x);
    return want > x->max_slots ? x->max_slots : (uint32_t)want;
}

void pn_index_clear(pn_index *x, uint32_t expect)
{
    /* Only the slots in use were ever written (the index never shrinks
     * between clears). */
    pn_pages_clear(x->slots, ((size_t)x->mask + 1) * sizeof *x->slots);
    x->mask = slots_for(x, expect) - 1;
}

size_t pn_index_resident(const pn_index *x)
{
    return pn_pages_resident(x->slots, (size_t)x->max_slots * sizeof *x->slots);
}

int pn_index_grow(pn_index *x, uint32_t n, const void *ents, size_t stride, size_t hash_off)
{
    uint32_t slots = x->mask + 1, want = slots_for(x, n);
    if (want <= slots)
        return 0;
    /* In place: the larger index starts where the smaller one was, and the
     * rest of it has never been written (so it is zero). */
    memset(x->slots, 0, (size_t)slots * sizeof *x->slots);
    x->mask = want - 1;
    const char *e = ents;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h;
        memcpy(&h, e + (size_t)i * stride + hash_off, sizeof h);
        x->slots[pn_index_free_slot(x, h)] = i + 1;
    }
    return 1;
}
