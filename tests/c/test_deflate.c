/* The DEFLATE compressor (deflate.c, huffman.c) and the gzip member around
 * it (gzip.c): Huffman code rules checked directly, and compressed output
 * read back by zlib's inflate, an independent decoder. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "check.h"
#include "encoding/deflate.h"
#include "encoding/huffman.h"
#include "pyroscope_native.h"
#include "encoding/pprof.h"

/* ------------------------------------------------------------ helpers */

/* xorshift64*: deterministic inputs. */
static uint64_t rng_state;

static uint32_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

static double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Returns 1 when the lengths are at most limit and fill the code space
 * exactly (Kraft sum 1), as a decoder requires. */
static int code_complete(const uint8_t *len, unsigned n, unsigned limit)
{
    uint64_t sum = 0;
    for (unsigned s = 0; s < n; s++) {
        if (len[s] > limit)
            return 0;
        if (len[s])
            sum += (uint64_t)1 << (limit - len[s]);
    }
    return sum == (uint64_t)1 << limit;
}

static uint64_t code_cost(const uint32_t *freq, const uint8_t *len, unsigned n)
{
    uint64_t c = 0;
    for (unsigned s = 0; s < n; s++)
        c += (uint64_t)freq[s] * len[s];
    return c;
}

/* Compress with pn_deflate into a buffer of exactly the bound (so ASan and
 * valgrind see any write past it); NULL on failure. */
static uint8_t *deflate_buf(const uint8_t *in, size_t n, size_t *out_len)
{
    size_t bound = pn_deflate_bound(n);
    CHECK(bound > n);
    uint8_t *out = malloc(bound);
    CHECK(out != NULL);
    if (!out)
        return NULL;
    pn_error e;
    pn_error_clear(&e);
    if (pn_deflate(in, n, out, out_len, &e) < 0) {
        fprintf(stderr, "  pn_deflate: %s\n", e.msg);
        free(out);
        return NULL;
    }
    CHECK(*out_len > 0 && *out_len <= bound);
    return out;
}

/* Inflate raw deflate data with zlib; 1 when it gives back exactly want. */
static int inflates_to(const uint8_t *z, size_t zlen, const uint8_t *want, size_t n)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -15) != Z_OK)
        return 0;
    uint8_t *back = malloc(n + 1);
    int ok = 0;
    if (back) {
        zs.next_in = (Bytef *)(uintptr_t)z;
        zs.avail_in = (uInt)zlen;
        zs.next_out = back;
        zs.avail_out = (uInt)n + 1; /* one spare byte catches extra output */
        int rc = inflate(&zs, Z_FINISH);
        ok = rc == Z_STREAM_END && zs.total_out == n && zs.avail_in == 0 &&
             memcmp(back, want, n) == 0;
        if (!ok)
            fprintf(stderr, "  inflate: rc %d, %lu of %zu bytes out, %u input left (%s)\n", rc,
                    zs.total_out, n, zs.avail_in, zs.msg ? zs.msg : "no message");
    }
    inflateEnd(&zs);
    free(back);
    return ok;
}

/* Compress, check zlib reads it back; returns the compressed size (0 on
 * failure). */
static size_t round_trip(const uint8_t *in, size_t n)
{
    size_t zlen = 0;
    uint8_t *z = deflate_buf(in, n, &zlen);
    if (!z)
        return 0;
    int ok = inflates_to(z, zlen, in, n);
    CHECK(ok);
    free(z);
    return ok ? zlen : 0;
}

/* Text shaped like a profile's strings and samples: function and file
 * names from a pool, picked with a skew, with numbers between them. */
static uint8_t *profile_like(size_t n)
{
    uint8_t *buf = malloc(n);
    if (!buf)
        return NULL;
    static const char *const pkg[] = {"billing", "users", "search", "render", "storage", "auth"};
    size_t i = 0;
    char line[160];
    while (i < n) {
        uint32_t a = rnd() % 1000, f = (a * a) / 1000; /* skewed towards 0 */
        int len = snprintf(line, sizeof line,
                           "app.%s.module_%u.handler_%u\x12/srv/app/%s/module_%u.py%c",
                           pkg[f % 6], f / 16, f, pkg[f % 6], f / 16, (char)(rnd() & 0xff));
        for (int k = 0; k < len && i < n; k++)
            buf[i++] = (uint8_t)line[k];
    }
    return buf;
}

/* ------------------------------------------------------------ Huffman */

static void test_huffman_lengths(void)
{
    uint32_t freq[PN_HUFFMAN_MAX_SYMS];
    uint8_t len[PN_HUFFMAN_MAX_SYMS];

    /* Textbook case (CLRS): optimal lengths 4 4 3 3 3 1, cost 224. */
    const uint32_t clrs[6] = {5, 9, 12, 13, 16, 45};
    pn_huffman_lengths(clrs, 6, 15, len);
    CHECK(code_complete(len, 6, 15));
    CHECK_EQ_INT(code_cost(clrs, len, 6), 224);
    CHECK_EQ_INT(len[5], 1);
    CHECK_EQ_INT(len[0], 4);

    /* Fibonacci frequencies make the optimal code as deep as the alphabet
     * is long (29 for 30 symbols): the 15-bit limit must cut it and still
     * leave a complete code, frequent symbols never longer than rare ones. */
    freq[0] = freq[1] = 1;
    for (unsigned s = 2; s < 30; s++)
        freq[s] = freq[s - 1] + freq[s - 2];
    pn_huffman_lengths(freq, 30, 15, len);
    CHECK(code_complete(len, 30, 15));
    CHECK_EQ_INT(len[0], 15);
    for (unsigned s = 1; s < 30; s++)
        CHECK(len[s] <= len[s - 1]);
    /* The code-length alphabet: 19 symbols, 7 bits. */
    pn_huffman_lengths(freq, 19, 7, len);
    CHECK(code_complete(len, 19, 7));
    for (unsigned s = 1; s < 19; s++)
        CHECK(len[s] <= len[s - 1]);

    /* Equal frequencies: a flat code. */
    for (unsigned s = 0; s < 256; s++)
        freq[s] = 7;
    pn_huffman_lengths(freq, 256, 15, len);
    int flat = 1;
    for (unsigned s = 0; s < 256; s++)
        flat &= len[s] == 8;
    CHECK(flat);

    /* No symbol used, or one: still two codes of one bit each. */
    memset(freq, 0, sizeof freq);
    pn_huffman_lengths(freq, 30, 15, len);
    CHECK(code_complete(len, 30, 15));
    CHECK_EQ_INT(len[0] + len[1], 2);
    freq[9] = 1000;
    pn_huffman_lengths(freq, 30, 15, len);
    CHECK(code_complete(len, 30, 15));
    CHECK_EQ_INT(len[9], 1);
    CHECK_EQ_INT(len[0], 1);
    CHECK_EQ_INT(len[1], 0);

    /* Random frequencies over the full literal/length alphabet. */
    rng_state = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 50; round++) {
        for (unsigned s = 0; s < 286; s++)
            freq[s] = rnd() % 4 == 0 ? 0 : rnd() % (1u << (rnd() % 17));
        pn_huffman_lengths(freq, 286, 15, len);
        CHECK(code_complete(len, 286, 15));
        for (unsigned s = 0; s < 286; s++)
            CHECK(freq[s] == 0 || len[s] > 0);
    }
}

static void test_huffman_codes(void)
{
    /* RFC 1951 3.2.2's example: A..H with lengths (3,3,3,3,3,2,4,4) get
     * 010 011 100 101 110 00 1110 1111 (here bit-reversed). */
    const uint8_t len[8] = {3, 3, 3, 3, 3, 2, 4, 4};
    const uint16_t want[8] = {2, 3, 4, 5, 6, 0, 14, 15};
    uint16_t code[8];
    pn_huffman_codes(len, 8, code);
    for (int s = 0; s < 8; s++) {
        unsigned r = 0;
        for (unsigned b = 0; b < len[s]; b++)
            r |= ((code[s] >> b) & 1u) << (len[s] - 1 - b);
        CHECK_EQ_INT(r, want[s]);
    }
}

/* ------------------------------------------------------------ deflate */

static void test_deflate_round_trips(void)
{
    rng_state = 12345;
    size_t max = 1 << 20;
    uint8_t *in = calloc(max, 1);
    CHECK(in != NULL);
    if (!in)
        return;

    /* Every short length, where matching stops near the end. */
    for (size_t n = 0; n < 80; n++) {
        for (size_t i = 0; i < n; i++)
            in[i] = n % 2 ? (uint8_t)rnd() : (uint8_t)"abcab"[i % 5];
        CHECK(round_trip(in, n) > 0);
    }

    /* Random bytes: stored blocks, several of 64 KiB. */
    for (size_t i = 0; i < 300000; i++)
        in[i] = (uint8_t)rnd();
    size_t z = round_trip(in, 300000);
    CHECK(z > 0 && z < 300000 + 64); /* grows by a few bytes only */

    /* Zeros: the longest matches (258), distance 1. */
    memset(in, 0, max);
    z = round_trip(in, max);
    CHECK(z > 0 && z < max / 200);

    /* Repeats exactly at the window's edge (32768) and just past it. */
    for (size_t period = 32767; period <= 32769; period++) {
        for (size_t i = 0; i < period; i++)
            in[i] = (uint8_t)rnd();
        for (size_t i = period; i < 200000; i++)
            in[i] = in[i - period];
        z = round_trip(in, 200000);
        CHECK(z > 0);
        /* Repeats within the window are found; one byte further, none. */
        CHECK(period <= 32768 ? z < 80000 : z > 199000);
    }

    /* A skewed alphabet, a two-letter one, and profile-like text: many
     * dynamic blocks with different codes. */
    for (size_t i = 0; i < max; i++) {
        uint32_t r = rnd() % 1000;
        in[i] = (uint8_t)(r < 500 ? 97u : r < 750 ? 98u : r < 990 ? 99u + r % 20 : r);
    }
    CHECK(round_trip(in, max) > 0);
    for (size_t i = 0; i < 100000; i++)
        in[i] = (uint8_t)(rnd() & 1);
    CHECK(round_trip(in, 100000) > 0);
    uint8_t *text = profile_like(max);
    CHECK(text != NULL);
    if (text) {
        CHECK(round_trip(text, max) > 0);
        free(text);
    }

    /* Lengths 3..258 and distances 1..32768 of every code. */
    size_t n = 0;
    for (size_t i = 0; i < 40000; i++)
        in[n++] = (uint8_t)rnd();
    for (unsigned d = 1; d <= 32768 && n + 300 < max; d = d * 3 / 2 + 1)
        for (unsigned l = 4; l <= 258 && n + l < max; l += 37) {
            for (unsigned k = 0; k < l; k++, n++)
                in[n] = in[n - d]; /* byte by byte: d < l repeats a pattern */
            in[n++] = (uint8_t)rnd();
        }
    CHECK(round_trip(in, n) > 0);
    free(in);
}

/* Against zlib on profile-like text: no larger than zlib's fastest level
 * and faster than it; zlib's default level is printed for scale. */
/* Inputs built from random pieces: literal noise, byte runs, and copies
 * from random distances (1 byte up to past the 32 KiB window) and lengths
 * (up to past the 258-byte match limit), so matches start, overlap and end
 * everywhere. Every one must come back exactly through zlib. */
static void test_deflate_random_structures(void)
{
    rng_state = 0x5eed5eedull;
    for (int t = 0; t < 300; t++) {
        size_t n = t < 40 ? (size_t)t * 7 : rnd() % (t < 250 ? 20000 : 200000);
        uint8_t *in = malloc(n ? n : 1);
        size_t i = 0;
        while (i < n) {
            size_t len = 1 + rnd() % (rnd() % 4 == 0 ? 600 : 40);
            if (len > n - i)
                len = n - i;
            unsigned kind = rnd() % 3;
            if (kind == 0 || i == 0) {
                for (size_t k = 0; k < len; k++)
                    in[i + k] = (uint8_t)(rnd() % (t % 2 ? 256 : 4));
            } else if (kind == 1) {
                memset(in + i, (int)(rnd() & 255), len);
            } else {
                size_t dist = 1 + rnd() % (i < 34000 ? i : 34000);
                for (size_t k = 0; k < len; k++) /* overlapping copies are legal */
                    in[i + k] = in[i + k - dist];
            }
            i += len;
        }
        size_t zlen = round_trip(in, n);
        CHECK(zlen > 0 || n == 0);
        free(in);
    }
}

static void test_deflate_ratio_and_speed(void)
{
    rng_state = 777;
    size_t n = 1 << 20;
    uint8_t *in = profile_like(n);
    uLongf zcap = compressBound(n);
    uint8_t *zout = malloc(zcap);
    CHECK(in && zout);
    if (!in || !zout) {
        free(in);
        free(zout);
        return;
    }
    double ms[3] = {1e9, 1e9, 1e9}; /* ours, zlib 1, zlib 6: best of 3 */
    size_t bytes[3] = {0, 0, 0};
    for (int round = 0; round < 3; round++) {
        double t0 = monotonic_ms();
        uint8_t *z = deflate_buf(in, n, &bytes[0]);
        double t = monotonic_ms() - t0;
        free(z);
        if (t < ms[0])
            ms[0] = t;
        for (int k = 1; k <= 2; k++) {
            uLongf zlen = zcap;
            t0 = monotonic_ms();
            CHECK_EQ_INT(compress2(zout, &zlen, in, n, k == 1 ? 1 : 6), Z_OK);
            t = monotonic_ms() - t0;
            bytes[k] = zlen;
            if (t < ms[k])
                ms[k] = t;
        }
    }
    printf("  1 MiB profile-like text: pn_deflate %zu bytes %.2f ms, zlib level 1 %zu bytes "
           "%.2f ms, level 6 %zu bytes %.2f ms\n", bytes[0], ms[0], bytes[1], ms[1], bytes[2],
           ms[2]);
    CHECK(bytes[0] > 0 && bytes[0] <= bytes[1]);
    if (pn_test_timing_strict())
        CHECK(ms[0] < ms[1]);
    free(in);
    free(zout);
}

/* ---------------------------------------------------------------- gzip */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_gzip_member(void)
{
    rng_state = 99;
    size_t n = 200000;
    uint8_t *in = profile_like(n);
    CHECK(in != NULL);
    if (!in)
        return;
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    pn_error e;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_gzip(in, n, &gz, &gz_len, &e), 0);
    CHECK(gz && gz_len > 18 && gz_len < n / 2);
    if (gz && gz_len > 18) {
        /* RFC 1952: magic, deflate, no flags; CRC-32 and size at the end. */
        CHECK(gz[0] == 0x1f && gz[1] == 0x8b && gz[2] == 8 && gz[3] == 0);
        CHECK_EQ_INT(le32(gz + gz_len - 8), crc32(0, in, (uInt)n));
        CHECK_EQ_INT(le32(gz + gz_len - 4), n);
        /* The body is the raw deflate stream. */
        CHECK(inflates_to(gz + 10, gz_len - 18, in, n));
        /* zlib's own gzip reader (it checks CRC and size). */
        uint8_t *back = NULL;
        size_t back_len = 0;
        CHECK_EQ_INT(pn_gunzip(gz, gz_len, n, &back, &back_len, &e), 0);
        CHECK(back_len == n && back && memcmp(back, in, n) == 0);
        free(back);
        /* A flipped bit in the body fails the CRC, or the stream. */
        gz[gz_len / 2] ^= 0x10;
        back = NULL;
        CHECK_EQ_INT(pn_gunzip(gz, gz_len, n, &back, &back_len, &e), -1);
        CHECK(back == NULL);
    }
    free(gz);
    free(in);
}

TEST_MAIN(T(test_huffman_lengths), T(test_huffman_codes), T(test_deflate_round_trips),
          T(test_deflate_random_structures), T(test_deflate_ratio_and_speed),
          T(test_gzip_member))
