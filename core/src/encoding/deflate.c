/* DEFLATE compressor (see deflate.h for why it exists).
 *
 * Matching: for each position, the last two positions seen with the same
 * hash of 4 bytes are the candidates (zlib keeps whole chains), and a short
 * match may give way to a longer one a byte later. Blocks: the symbols of
 * up to BLOCK_SYMS matches and literals are buffered, then written in the
 * smallest of three forms: dynamic Huffman codes, the fixed codes, or
 * stored (raw) bytes, so incompressible input grows by a few bytes per
 * 64 KiB only.
 *
 * All state lives in one call's stack frame and heap tables. */
#include "support/scratch.h"
#include "encoding/deflate.h"
#include "encoding/huffman.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 32768u
#define MIN_MATCH 4 /* deflate allows 3; 4 bytes are one load and compare */
#define MAX_MATCH 258
/* 2^12 buckets of two positions (32 KiB) stay in L1: on profiles, larger
 * tables cost far more time than they save bytes. */
#define HASH_BITS 12
/* Matches shorter than this are checked against one a byte later. */
#define LAZY_BELOW 16
#define BLOCK_SYMS ((size_t)1 << 16)
#define STORED_MAX 65535u /* bytes in one stored block */
/* Matching reads 8 bytes at a time; closer to the end, only literals. */
#define TAIL 8

#define NLITLEN 286 /* 0-255 literals, 256 end of block, 257-285 lengths */
#define NDIST 30
/* The fixed code defines two more of each; canonical codes depend on them. */
#define NLITLEN_FIXED 288
#define NDIST_FIXED 32
#define NCLEN 19 /* code-length alphabet */
#define END_OF_BLOCK 256
#define MAX_BITS PN_HUFFMAN_MAX_BITS
#define MAX_CLEN_BITS 7

/* A buffered symbol: a literal byte, or MATCH | (distance - 1) << 8 |
 * (length - 3). */
#define MATCH 0x80000000u

/* Worst case per stored block: 3 header bits, 7 padding bits, LEN + NLEN. */
#define STORED_OVERHEAD_BITS (3 + 7 + 32)

/* ------------------------------------------------------------- memory */

static uint32_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void store64le(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, sizeof v); /* one store; gcc does not merge the loop */
#else
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

/* Number of equal leading bytes of a and b, at most max. */
static size_t match_len(const uint8_t *a, const uint8_t *b, size_t max)
{
    size_t n = 0;
    while (n + 8 <= max) {
        uint64_t x = load64(a + n) ^ load64(b + n);
        if (x) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return n + (size_t)(__builtin_ctzll(x) >> 3);
#else
            return n + (size_t)(__builtin_clzll(x) >> 3);
#endif
        }
        n += 8;
    }
    while (n < max && a[n] == b[n])
        n++;
    return n;
}

static uint32_t hash4(uint32_t v) { return (v * 2654435761u) >> (32 - HASH_BITS); }

/* ------------------------------------------------ length and distance */

/* Length code (symbol - 257) of a match of length x + 3; its extra bits
 * and their value. */
static unsigned len_code(unsigned x, unsigned *nbits, unsigned *extra)
{
    if (x < 8 || x == MAX_MATCH - 3) {
        *nbits = 0;
        *extra = 0;
        return x < 8 ? x : 28;
    }
    unsigned b = 31 - (unsigned)__builtin_clz(x); /* 3..7 */
    unsigned hi = (x >> (b - 2)) & 3;
    *nbits = b - 2;
    *extra = x - ((4 + hi) << (b - 2));
    return 4 * (b - 1) + hi;
}

/* Distance code of a distance x + 1; its extra bits and their value. */
static unsigned dist_code(unsigned x, unsigned *nbits, unsigned *extra)
{
    if (x < 4) {
        *nbits = 0;
        *extra = 0;
        return x;
    }
    unsigned b = 31 - (unsigned)__builtin_clz(x); /* 2..14 */
    unsigned hi = (x >> (b - 1)) & 1;
    *nbits = b - 1;
    *extra = x - ((2 + hi) << (b - 1));
    return 2 * b + hi;
}

static unsigned len_extra_bits(unsigned code) { return code < 8 || code == 28 ? 0 : code / 4 - 1; }

static unsigned dist_extra_bits(unsigned code) { return code < 4 ? 0 : code / 2 - 1; }

/* ------------------------------------------------------- Huffman codes */

typedef struct {
    uint16_t code[NLITLEN_FIXED]; /* bit-reversed: deflate sends codes MSB first */
    uint8_t len[NLITLEN_FIXED];
} huffman;

/* ------------------------------------------------------- bit writer */

/* Bits go out LSB first. Callers queue at most 56 bits between flushes;
 * a flush stores a whole word, hence the slack in pn_deflate_bound. */
typedef struct {
    uint8_t *out;
    size_t pos;
    uint64_t bits;
    unsigned nbits;
} bitwriter;

static inline void put(bitwriter *w, uint64_t v, unsigned n)
{
    w->bits |= v << w->nbits;
    w->nbits += n;
}

static inline void flush(bitwriter *w)
{
    store64le(w->out + w->pos, w->bits);
    w->pos += w->nbits >> 3;
    w->bits >>= w->nbits & ~7u;
    w->nbits &= 7;
}

/* Pad to a byte boundary with zero bits. */
static void align(bitwriter *w)
{
    store64le(w->out + w->pos, w->bits);
    w->pos += (w->nbits + 7) >> 3;
    w->bits = 0;
    w->nbits = 0;
}

/* ------------------------------------------------------------ blocks */

typedef struct {
    const uint8_t *in;
    uint32_t *syms; /* this block's symbols */
    size_t nsyms;
    uint32_t lfreq[NLITLEN], dfreq[NDIST];
    bitwriter w;
} deflater;

/* The code-length sequence of a dynamic block header, run-length coded
 * (symbols 16-18 repeat), with each item's extra bits. */
typedef struct {
    uint8_t sym[NLITLEN + NDIST], extra[NLITLEN + NDIST];
    unsigned n;
    uint32_t freq[NCLEN];
} clen_seq;

static void clen_add(clen_seq *q, unsigned sym, unsigned extra)
{
    q->sym[q->n] = (uint8_t)sym;
    q->extra[q->n++] = (uint8_t)extra;
    q->freq[sym]++;
}

static void clen_encode(clen_seq *q, const uint8_t *lens, unsigned n)
{
    memset(q, 0, sizeof *q);
    for (unsigned i = 0; i < n;) {
        unsigned v = lens[i], run = 1;
        while (i + run < n && lens[i + run] == v)
            run++;
        i += run;
        if (v == 0) {
            for (; run >= 11; run -= run < 138 ? run : 138)
                clen_add(q, 18, (run < 138 ? run : 138) - 11);
            if (run >= 3) {
                clen_add(q, 17, run - 3);
                run = 0;
            }
        } else {
            clen_add(q, v, 0);
            run--;
            for (; run >= 3; run -= run < 6 ? run : 6)
                clen_add(q, 16, (run < 6 ? run : 6) - 3);
        }
        for (; run > 0; run--)
            clen_add(q, v, 0);
    }
}

/* Order in which the code-length code's lengths are sent. */
static const uint8_t clen_order[NCLEN] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5,
                                          11, 4, 12, 3, 13, 2, 14, 1, 15};
static const uint8_t clen_extra_bits[NCLEN] = {[16] = 2, [17] = 3, [18] = 7};

/* Bits of the block's symbols (and end of block) under the lengths. */
static uint64_t data_bits(const deflater *d, const uint8_t *llen, const uint8_t *dlen)
{
    uint64_t bits = 0;
    for (unsigned s = 0; s < NLITLEN; s++)
        bits += (uint64_t)d->lfreq[s] * (llen[s] + (s > 256 ? len_extra_bits(s - 257) : 0));
    for (unsigned s = 0; s < NDIST; s++)
        bits += (uint64_t)d->dfreq[s] * (dlen[s] + dist_extra_bits(s));
    return bits;
}

static void write_symbols(deflater *d, const huffman *ll, const huffman *dd)
{
    bitwriter w = d->w; /* locals stay in registers */
    const uint32_t *syms = d->syms;
    size_t n = d->nsyms;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = syms[i];
        if (!(s & MATCH)) {
            put(&w, ll->code[s], ll->len[s]);
            /* Up to three literals (45 bits) between flushes. */
            if (i + 2 < n && !((syms[i + 1] | syms[i + 2]) & MATCH)) {
                put(&w, ll->code[syms[i + 1]], ll->len[syms[i + 1]]);
                put(&w, ll->code[syms[i + 2]], ll->len[syms[i + 2]]);
                i += 2;
            }
        } else {
            unsigned nb, extra;
            unsigned c = len_code(s & 0xff, &nb, &extra);
            put(&w, ll->code[257 + c], ll->len[257 + c]);
            put(&w, extra, nb);
            c = dist_code((s >> 8) & 0x7fff, &nb, &extra);
            put(&w, dd->code[c], dd->len[c]);
            put(&w, extra, nb);
        }
        flush(&w);
    }
    put(&w, ll->code[END_OF_BLOCK], ll->len[END_OF_BLOCK]);
    flush(&w);
    d->w = w;
}

static void write_stored(deflater *d, const uint8_t *p, size_t n, bool final)
{
    bitwriter *w = &d->w;
    do {
        unsigned part = n < STORED_MAX ? (unsigned)n : STORED_MAX;
        n -= part;
        put(w, final && n == 0, 1);
        put(w, 0, 2);
        align(w);
        uint8_t *o = w->out + w->pos;
        o[0] = (uint8_t)part;
        o[1] = (uint8_t)(part >> 8);
        o[2] = (uint8_t)~part;
        o[3] = (uint8_t)(~part >> 8);
        memcpy(o + 4, p, part);
        w->pos += 4 + part;
        p += part;
    } while (n > 0);
}

/* The fixed code of RFC 1951 3.2.6. */
static void fixed_lengths(uint8_t *llen, uint8_t *dlen)
{
    for (unsigned s = 0; s < NLITLEN_FIXED; s++)
        llen[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    memset(dlen, 5, NDIST_FIXED);
}

/* Write the buffered symbols, which stand for in[start, end), as one block
 * in the smallest of the three forms. */
static void write_block(deflater *d, size_t start, size_t end, bool final)
{
    d->lfreq[END_OF_BLOCK] = 1;
    huffman ll, dd;
    pn_huffman_lengths(d->lfreq, NLITLEN, MAX_BITS, ll.len);
    pn_huffman_lengths(d->dfreq, NDIST, MAX_BITS, dd.len);

    /* The dynamic header: literal/length and distance lengths without
     * trailing zeros, run-length coded, under a code of their own. */
    unsigned hlit = NLITLEN, hdist = NDIST;
    while (hlit > 257 && !ll.len[hlit - 1])
        hlit--;
    while (hdist > 1 && !dd.len[hdist - 1])
        hdist--;
    uint8_t lens[NLITLEN + NDIST];
    memcpy(lens, ll.len, hlit);
    memcpy(lens + hlit, dd.len, hdist);
    clen_seq q;
    clen_encode(&q, lens, hlit + hdist);
    huffman cl;
    pn_huffman_lengths(q.freq, NCLEN, MAX_CLEN_BITS, cl.len);
    unsigned hclen = NCLEN;
    while (hclen > 4 && !cl.len[clen_order[hclen - 1]])
        hclen--;

    uint64_t dynamic = 3 + 5 + 5 + 4 + 3 * (uint64_t)hclen + data_bits(d, ll.len, dd.len);
    for (unsigned s = 0; s < NCLEN; s++)
        dynamic += (uint64_t)q.freq[s] * (cl.len[s] + clen_extra_bits[s]);
    huffman fl, fd;
    fixed_lengths(fl.len, fd.len);
    uint64_t fixed = 3 + data_bits(d, fl.len, fd.len);
    size_t n = end - start;
    uint64_t stored = ((uint64_t)n / STORED_MAX + 1) * STORED_OVERHEAD_BITS + 8 * (uint64_t)n;

    if (stored <= dynamic && stored <= fixed) {
        write_stored(d, d->in + start, n, final);
    } else if (fixed <= dynamic) {
        pn_huffman_codes(fl.len, NLITLEN_FIXED, fl.code);
        pn_huffman_codes(fd.len, NDIST_FIXED, fd.code);
        put(&d->w, final, 1);
        put(&d->w, 1, 2);
        flush(&d->w);
        write_symbols(d, &fl, &fd);
    } else {
        pn_huffman_codes(ll.len, NLITLEN, ll.code);
        pn_huffman_codes(dd.len, NDIST, dd.code);
        pn_huffman_codes(cl.len, NCLEN, cl.code);
        bitwriter *w = &d->w;
        put(w, final, 1);
        put(w, 2, 2);
        put(w, hlit - 257, 5);
        put(w, hdist - 1, 5);
        put(w, hclen - 4, 4);
        flush(w);
        for (unsigned i = 0; i < hclen; i++) {
            put(w, cl.len[clen_order[i]], 3);
            flush(w);
        }
        for (unsigned i = 0; i < q.n; i++) {
            put(w, cl.code[q.sym[i]], cl.len[q.sym[i]]);
            put(w, q.extra[i], clen_extra_bits[q.sym[i]]);
            flush(w);
        }
        write_symbols(d, &ll, &dd);
    }
    d->nsyms = 0;
    memset(d->lfreq, 0, sizeof d->lfreq);
    memset(d->dfreq, 0, sizeof d->dfreq);
}

/* ------------------------------------------------------------- driver */

size_t pn_deflate_bound(size_t len)
{
    /* Each block is at most its stored form; blocks end every BLOCK_SYMS
     * symbols (each at least one byte) and stored ones every STORED_MAX
     * bytes. Plus a final empty block, padding and the writer's slack. */
    if (len > SIZE_MAX / 2)
        return 0;
    size_t blocks = len / BLOCK_SYMS + len / STORED_MAX + 2;
    return len + blocks * (STORED_OVERHEAD_BITS / 8 + 1) + 16;
}

/* The longer match for position i of the two candidates its hash bucket
 * remembers (0 if neither matches); i then becomes the bucket's newest.
 * Positions are kept mod 2^32: a stale one only costs a failed compare,
 * since every candidate is checked. */
static inline size_t find_match(const uint8_t *in, size_t i, size_t len, uint32_t *head,
                                uint32_t *dist_out)
{
    uint32_t cur = load32(in + i);
    uint32_t *bucket = &head[2 * hash4(cur)];
    size_t max = len - i < MAX_MATCH ? len - i : MAX_MATCH, best = 0;
    uint32_t dist = (uint32_t)i - bucket[0];
    if (dist - 1 < WINDOW && load32(in + i - dist) == cur) {
        best = MIN_MATCH + match_len(in + i - dist + MIN_MATCH, in + i + MIN_MATCH,
                                     max - MIN_MATCH);
        *dist_out = dist;
    }
    dist = (uint32_t)i - bucket[1];
    if (best < max && dist - 1 < WINDOW && load32(in + i - dist) == cur) {
        size_t n = MIN_MATCH + match_len(in + i - dist + MIN_MATCH, in + i + MIN_MATCH,
                                         max - MIN_MATCH);
        if (n > best) {
            best = n;
            *dist_out = dist;
        }
    }
    bucket[1] = bucket[0];
    bucket[0] = (uint32_t)i;
    return best;
}

/* Parse d->in[0, len) into literals and matches, written block by block.
 * A short match is checked against one starting a byte later (one step of
 * zlib's lazy matching), which pays on text such as the string table. */
static void compress(deflater *d, uint32_t *head, size_t len)
{
    /* Locals, not d->: stores through syms could alias them otherwise. */
    const uint8_t *in = d->in;
    uint32_t *syms = d->syms, *lfreq = d->lfreq, *dfreq = d->dfreq;
    size_t nsyms = 0, i = 0, start = 0;
    while (i < len) {
        size_t n = 0;
        uint32_t dist = 0;
        if (len - i >= TAIL)
            n = find_match(in, i, len, head, &dist);
        if (n && n < LAZY_BELOW && len - i - 1 >= TAIL) {
            uint32_t dist2 = 0;
            size_t n2 = find_match(in, i + 1, len, head, &dist2);
            if (n2 > n) {
                lfreq[in[i]]++;
                syms[nsyms++] = in[i++];
                n = n2;
                dist = dist2;
            }
        }
        if (n) {
            unsigned nb, extra;
            syms[nsyms++] = MATCH | (dist - 1) << 8 | (uint32_t)(n - 3);
            lfreq[257 + len_code((unsigned)n - 3, &nb, &extra)]++;
            dfreq[dist_code(dist - 1, &nb, &extra)]++;
            i += n;
        } else {
            lfreq[in[i]]++;
            syms[nsyms++] = in[i++];
        }
        /* A step adds up to two symbols: syms has one spare slot. */
        if (nsyms >= BLOCK_SYMS) {
            d->nsyms = nsyms;
            write_block(d, start, i, false);
            nsyms = 0;
            start = i;
        }
    }
    d->nsyms = nsyms;
    write_block(d, start, len, true);
    align(&d->w);
}

int pn_deflate(const uint8_t *in, size_t len, uint8_t *out, size_t *out_len, pn_error *e)
{
    deflater *d = calloc(1, sizeof *d);
    size_t head_bytes = ((size_t)2 << HASH_BITS) * sizeof(uint32_t);
    size_t syms_bytes = (BLOCK_SYMS + 1) * sizeof(uint32_t);
    uint32_t *head = pn_scratch_alloc(head_bytes);
    uint32_t *syms = pn_scratch_alloc(syms_bytes);
    if (!d || !head || !syms) {
        free(d);
        pn_scratch_free(head, head_bytes);
        pn_scratch_free(syms, syms_bytes);
        return pn_fail(e, PN_ENOMEM, "deflate: cannot allocate the work tables (%zu bytes)",
                       sizeof *d + head_bytes + syms_bytes);
    }
    d->in = in;
    d->syms = syms;
    d->w.out = out;
    compress(d, head, len);
    *out_len = d->w.pos;
    pn_scratch_free(syms, syms_bytes);
    pn_scratch_free(head, head_bytes);
    free(d);
    return 0;
}
