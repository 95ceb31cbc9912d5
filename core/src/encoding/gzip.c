/* gzip framing for profiles: receivers accept gzip'ed pprof, and profiles
 * read back from disk or the network may be gzip'ed or raw. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pyroscope_native.h"
#include "encoding/pprof.h"

/* 15 bits of window; +32 asks zlib to detect the gzip wrapper. */
#define WBITS_DETECT (15 + 32)
/* 15 bits of window; +16 asks zlib to write the gzip wrapper. */
#define WBITS_GZIP (15 + 16)
/* Chosen by measurement (docs/benchmarks.md, bench_core part (f)). */
#define GZIP_LEVEL 3
/* zlib counts in uInt; feed big buffers in pieces no larger than this. */
#define ZCHUNK ((size_t)1 << 30)

static uInt zchunk(size_t n) { return (uInt)(n < ZCHUNK ? n : ZCHUNK); }

int pn_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len,
            pn_error *e)
{
    *out = NULL;
    *out_len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int rc = deflateInit2(&zs, GZIP_LEVEL, Z_DEFLATED, WBITS_GZIP, 8, Z_DEFAULT_STRATEGY);
    if (rc != Z_OK)
        return pn_fail(e, rc == Z_MEM_ERROR ? PN_ENOMEM : PN_EINVAL,
                       "gzip: deflateInit2 failed (zlib code %d)", rc);
    /* Room for the worst case, so deflate never runs out of output. */
    size_t cap = deflateBound(&zs, len);
    if (cap < len) {
        deflateEnd(&zs);
        return pn_fail(e, PN_ELIMIT, "gzip: input of %zu bytes is too large", len);
    }
    uint8_t *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&zs);
        return pn_fail(e, PN_ENOMEM, "gzip: cannot allocate %zu bytes", cap);
    }
    size_t in_left = len, used = 0;
    zs.next_in = (Bytef *)(uintptr_t)in; /* zlib does not write its input */
    zs.next_out = buf;
    do {
        uInt ain = zchunk(in_left), aout = zchunk(cap - used);
        zs.avail_in = ain;
        zs.avail_out = aout;
        rc = deflate(&zs, ain == in_left ? Z_FINISH : Z_NO_FLUSH);
        in_left -= ain - zs.avail_in;
        used += aout - zs.avail_out;
    } while (rc == Z_OK);
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(buf);
        return pn_fail(e, PN_EIO, "gzip: deflate failed (zlib code %d)", rc);
    }
    /* The bound is above the input's size; give back what compression saved. */
    uint8_t *fit = realloc(buf, used ? used : 1);
    *out = fit ? fit : buf;
    *out_len = used;
    return 0;
}

static int is_gzip(const uint8_t *in, size_t len)
{
    return len >= 2 && in[0] == 0x1f && in[1] == 0x8b;
}

/* Copy through data that is not gzip (a raw .pb profile), under the same
 * bound as inflated data. */
static int passthrough(const uint8_t *in, size_t len, size_t max_out,
                       uint8_t **out, size_t *out_len, pn_error *e)
{
    if (len > max_out)
        return pn_fail(e, PN_ELIMIT,
                       "gunzip: input of %zu bytes exceeds the limit of %zu bytes",
                       len, max_out);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return pn_fail(e, PN_ENOMEM, "gunzip: cannot allocate %zu bytes", len);
    if (len)
        memcpy(buf, in, len);
    *out = buf;
    *out_len = len;
    return 0;
}

int pn_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out,
              size_t *out_len, pn_error *e)
{
    *out = NULL;
    *out_len = 0;
    if (!is_gzip(in, len))
        return passthrough(in, len, max_out, out, out_len, e);

    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int rc = inflateInit2(&zs, WBITS_DETECT);
    if (rc != Z_OK)
        return pn_fail(e, rc == Z_MEM_ERROR ? PN_ENOMEM : PN_EINVAL,
                       "gunzip: inflateInit2 failed (zlib code %d)", rc);

    /* One byte of room beyond max_out tells "exactly max_out" apart from
     * "more than max_out". */
    size_t hard_cap = max_out < SIZE_MAX ? max_out + 1 : SIZE_MAX;
    size_t cap = len < SIZE_MAX / 4 ? len * 4 : SIZE_MAX;
    if (cap < 4096)
        cap = 4096;
    if (cap > hard_cap)
        cap = hard_cap;
    uint8_t *buf = malloc(cap);
    size_t used = 0, in_left = len;
    const char *why = NULL;
    pn_code code = PN_EPROTO;
    if (!buf) {
        code = PN_ENOMEM;
        why = "cannot allocate the output buffer";
        goto fail;
    }

    zs.next_in = (Bytef *)(uintptr_t)in; /* zlib does not write its input */
    for (;;) {
        if (used == cap) {
            if (cap == hard_cap) {
                code = PN_ELIMIT;
                why = "inflated data exceeds the limit";
                goto fail;
            }
            size_t ncap = cap <= hard_cap / 2 ? cap * 2 : hard_cap;
            uint8_t *nbuf = realloc(buf, ncap);
            if (!nbuf) {
                code = PN_ENOMEM;
                why = "cannot grow the output buffer";
                goto fail;
            }
            buf = nbuf;
            cap = ncap;
        }
        zs.avail_in = zchunk(in_left);
        zs.next_out = buf + used;
        zs.avail_out = zchunk(cap - used);
        uInt in_before = zs.avail_in, out_before = zs.avail_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        in_left -= in_before - zs.avail_in;
        used += out_before - zs.avail_out;
        if (rc == Z_STREAM_END) {
            /* A gzip file may hold several members back to back. */
            if (in_left == 0)
                break;
            if (!is_gzip(zs.next_in, in_left)) {
                why = "trailing bytes after the gzip stream";
                goto fail;
            }
            if (inflateReset(&zs) != Z_OK) {
                why = "inflateReset failed";
                goto fail;
            }
            continue;
        }
        if (rc == Z_MEM_ERROR) {
            code = PN_ENOMEM;
            why = "zlib ran out of memory";
            goto fail;
        }
        if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_STREAM_ERROR) {
            why = "corrupt gzip data";
            goto fail;
        }
        /* Z_OK or Z_BUF_ERROR: progress stalls only when input ran out
         * while output room remains, i.e. the stream is cut short. */
        if (in_left == 0 && zs.avail_in == 0 && used < cap) {
            why = "truncated gzip data";
            goto fail;
        }
    }
    inflateEnd(&zs);
    if (used > max_out) {
        free(buf);
        return pn_fail(e, PN_ELIMIT,
                       "gunzip: inflated data exceeds the limit of %zu bytes",
                       max_out);
    }
    *out = buf;
    *out_len = used;
    return 0;

fail:
    inflateEnd(&zs);
    free(buf);
    if (code == PN_ELIMIT)
        return pn_fail(e, code, "gunzip: %s of %zu bytes", why, max_out);
    return pn_fail(e, code, "gunzip: %s (%zu compressed bytes, zlib code %d)", why,
                   len, rc);
}
