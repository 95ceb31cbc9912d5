/* An open-addressing hash index over a dense array of entries, as the
 * intern tables use it: a slot holds entry id + 1 (0: free), probing is
 * linear, and every entry keeps its own 32-bit hash.
 *
 * Slots are reserved (pages.h) for the most entries the table may hold, at
 * most half full, but only the first mask + 1 are in use: the index starts
 * at one page and doubles in place as entries come, re-inserting them from
 * their stored hashes. Its resident memory so follows the entries held, and
 * growing never allocates nor locks, so the table's writer may be the
 * sampler thread. Owned by the table that embeds it: its writer grows it,
 * its readers only look up, never while it is written. */
#ifndef PN_INDEX_H
#define PN_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t *slots;
    uint32_t mask;          /* slots in use - 1 */
    uint32_t max_slots;     /* reserved, a power of two */
} pn_index;

/* Reserve for max_entries (>= 1). Returns -1 when that fails. */
int pn_index_init(pn_index *x, uint32_t max_entries);
void pn_index_free(pn_index *x);
/* Empty it and hand its pages back. It restarts at the size that holds
 * `expect` entries (at least one page), e.g. what its table just held, so a
 * steady load does not rebuild it every period and a smaller one shrinks
 * it. */
void pn_index_clear(pn_index *x, uint32_t expect);
/* Bytes of its slots resident in RAM. */
size_t pn_index_resident(const pn_index *x);

/* True when adding entry number n (ids 0..n-1 are in the index) would
 * leave it more than half full while it may still grow. */
static inline int pn_index_need_room(const pn_index *x, uint32_t n)
{
    return (uint64_t)(n + 1) * 2 > (uint64_t)x->mask + 1 && x->mask + 1 < x->max_slots;
}
/* Double the index (while the reservation allows) until entry n fits, and
 * re-insert entries 0..n-1, whose hashes are the uint32_t at
 * (const char *)ents + i * stride + hash_off. Returns 1 when it grew (slots
 * found before are stale then), 0 when it could not. */
int pn_index_grow(pn_index *x, uint32_t n, const void *ents, size_t stride, size_t hash_off);

/* The first free slot on the probe path of hash h (a key known absent). */
static inline uint32_t pn_index_free_slot(const pn_index *x, uint32_t h)
{
    uint32_t s = h & x->mask;
    while (x->slots[s] != 0)
        s = (s + 1) & x->mask;
    return s;
}

#endif
