/* Huffman code construction (see huffman.h). Small and allocation-free:
 * it runs twice or three times per deflate block. */
#include "encoding/huffman.h"

#include <string.h>

/* Sort keys ascending: stable counting passes of 9 bits, as many as the
 * largest key needs. It runs for every code of every block, on at most
 * 288 keys, where qsort's calls per compare cost several times more. */
static void sort_keys(uint32_t *key, unsigned m)
{
    uint32_t tmp[PN_HUFFMAN_MAX_SYMS], *src = key, *dst = tmp, max = 0;
    for (unsigned i = 0; i < m; i++)
        max |= key[i];
    for (unsigned shift = 0; shift < 32 && max >> shift; shift += 9) {
        unsigned start[513] = {0};
        for (unsigned i = 0; i < m; i++)
            start[((src[i] >> shift) & 511) + 1]++;
        for (unsigned d = 0; d < 512; d++)
            start[d + 1] += start[d];
        for (unsigned i = 0; i < m; i++)
            dst[start[(src[i] >> shift) & 511]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != key)
        memcpy(key, src, m * sizeof *key);
}

/* The low len bits of v in reverse order. */
static unsigned reverse(unsigned v, unsigned len)
{
    v = ((v >> 1) & 0x5555) | ((v & 0x5555) << 1);
    v = ((v >> 2) & 0x3333) | ((v & 0x3333) << 2);
    v = ((v >> 4) & 0x0f0f) | ((v & 0x0f0f) << 4);
    v = ((v >> 8) & 0x00ff) | ((v & 0x00ff) << 8);
    return v >> (16 - len);
}

void pn_huffman_lengths(const uint32_t *freq, unsigned n, unsigned limit, uint8_t *len)
{
    /* Leaves sorted by frequency: frequency << 9 | symbol. */
    uint32_t key[PN_HUFFMAN_MAX_SYMS];
    unsigned m = 0;
    for (unsigned s = 0; s < n; s++) {
        len[s] = 0;
        if (freq[s])
            key[m++] = freq[s] << 9 | s;
    }
    for (unsigned s = 0; m < 2; s++)
        if (!freq[s])
            key[m++] = s;
    sort_keys(key, m);

    /* Huffman's construction with two queues: leaves in sorted order, and
     * internal nodes, which are made in order of weight. Nodes 0..m-1 are
     * the leaves, m..2m-2 the internal nodes; a parent's index is always
     * above its children's. */
    uint32_t weight[2 * PN_HUFFMAN_MAX_SYMS];
    uint16_t up[2 * PN_HUFFMAN_MAX_SYMS];
    for (unsigned i = 0; i < m; i++)
        weight[i] = key[i] >> 9;
    unsigned leaf = 0, inner = m, made = m;
    while (made < 2 * m - 1) {
        unsigned pick[2];
        for (int k = 0; k < 2; k++)
            pick[k] = leaf < m && (inner == made || weight[leaf] <= weight[inner]) ? leaf++
                                                                                  : inner++;
        weight[made] = weight[pick[0]] + weight[pick[1]];
        up[pick[0]] = up[pick[1]] = (uint16_t)made;
        made++;
    }
    /* Depths, root first; weight[] is reused to hold them. */
    unsigned count[PN_HUFFMAN_MAX_BITS + 1] = {0};
    weight[2 * m - 2] = 0;
    for (unsigned i = 2 * m - 2; i-- > 0;) {
        weight[i] = weight[up[i]] + 1;
        if (i < m)
            count[weight[i] < limit ? weight[i] : limit]++;
    }

    /* Leaves deeper than the limit were counted at the limit, which
     * overfills the code space (Kraft sum, in units of 2^-limit, above
     * 2^limit). Each step takes one leaf off the limit level and hangs it
     * beside a leaf of the deepest shorter level, both one level lower:
     * the sum drops by exactly one unit, until the code fits again. */
    uint32_t total = 0;
    for (unsigned b = 1; b <= limit; b++)
        total += count[b] << (limit - b);
    while (total > (1u << limit)) {
        count[limit]--;
        for (unsigned b = limit - 1; b > 0; b--) {
            if (count[b]) {
                count[b]--;
                count[b + 1] += 2;
                break;
            }
        }
        total--;
    }
    /* The longest codes go to the rarest symbols. */
    unsigned i = 0;
    for (unsigned b = limit; b > 0; b--)
        for (unsigned c = count[b]; c > 0; c--)
            len[key[i++] & 511] = (uint8_t)b;
}

void pn_huffman_codes(const uint8_t *len, unsigned n, uint16_t *code)
{
    unsigned count[PN_HUFFMAN_MAX_BITS + 1] = {0}, next[PN_HUFFMAN_MAX_BITS + 1];
    for (unsigned s = 0; s < n; s++)
        count[len[s]]++;
    count[0] = 0;
    unsigned c = 0;
    for (unsigned b = 1; b <= PN_HUFFMAN_MAX_BITS; b++) {
        c = (c + count[b - 1]) << 1;
        next[b] = c;
    }
    for (unsigned s = 0; s < n; s++) {
        if (!len[s])
            continue;
        code[s] = (uint16_t)reverse(next[len[s]]++, len[s]);
    }
}

