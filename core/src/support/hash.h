/* Small hashing helpers shared by the intern tables. */
#ifndef PN_HASH_H
#define PN_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a, 32 bit: short keys (names, frame triples), good spread. */
static inline uint32_t pn_hash_bytes(const void *data, size_t len, uint32_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

#define PN_HASH_SEED 2166136261u

/* Word at a time, for ids (frames, stack keys): the sampler hashes every
 * stack it records, and a byte loop costs four rounds per frame. */
static inline uint32_t pn_hash_u32(uint32_t h, uint32_t v)
{
    h = (h ^ v) * 0x9E3779B1u;
    return h ^ (h >> 15);
}

static inline uint32_t pn_hash_words(const uint32_t *w, size_t n, uint32_t h)
{
    for (size_t i = 0; i < n; i++)
        h = pn_hash_u32(h, w[i]);
    return h;
}

/* Smallest power of two >= n (n >= 1). */
static inline uint32_t pn_pow2_at_least(uint64_t n)
{
    uint32_t c = 1;
    while (c < n)
        c <<= 1;
    return c;
}

#endif
