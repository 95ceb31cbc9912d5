/* A u64 -> u32 map for the encoders (ids of strings, functions, label
 * pairs), owned by one call on the exporter thread. */
#ifndef PN_U64MAP_H
#define PN_U64MAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define PN_U64MAP_NONE UINT32_MAX

/* Open addressing, linear probing, load <= 1/2. vals hold value + 1 so a
 * zero marks a free slot. */
typedef struct {
    uint64_t *keys;
    uint32_t *vals;
    size_t mask; /* slots - 1; 0 before the first insert */
    size_t n;
} pn_u64map;

static inline size_t pn_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

static inline void pn_u64map_free(pn_u64map *m)
{
    free(m->keys);
    free(m->vals);
}

static inline uint32_t pn_u64map_get(const pn_u64map *m, uint64_t key)
{
    if (!m->vals)
        return PN_U64MAP_NONE;
    for (size_t i = pn_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->vals[i] == 0)
            return PN_U64MAP_NONE;
        if (m->keys[i] == key)
            return m->vals[i] - 1;
    }
}

static inline int pn_u64map_rehash(pn_u64map *m, size_t slots)
{
    uint64_t *keys = malloc(slots * sizeof *keys);
    uint32_t *vals = calloc(slots, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    size_t mask = slots - 1;
    for (size_t j = 0; m->vals && j <= m->mask; j++) {
        if (!m->vals[j])
            continue;
        size_t i = pn_mix64(m->keys[j]) & mask;
        while (vals[i])
            i = (i + 1) & mask;
        keys[i] = m->keys[j];
        vals[i] = m->vals[j];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->mask = mask;
    return 0;
}

/* Insert a key known to be absent. */
static inline int pn_u64map_put(pn_u64map *m, uint64_t key, uint32_t val)
{
    if (!m->vals || (m->n + 1) * 2 > m->mask + 1) {
        size_t slots = m->vals ? (m->mask + 1) * 2 : 64;
        if (pn_u64map_rehash(m, slots) < 0)
            return -1;
    }
    size_t i = pn_mix64(key) & m->mask;
    while (m->vals[i])
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = val + 1;
    m->n++;
    return 0;
}

#endif
