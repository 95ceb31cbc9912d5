/* A fast DEFLATE (RFC 1951) compressor for whole in-memory buffers.
 *
 * Why not zlib's deflate: the exporter compresses every profile it sends,
 * and on profile data zlib's fastest level still runs at ~75 MB/s (16 ms
 * for the 1.2 MB profile of 10 000 stacks; level 6 took 26 ms). This
 * encoder checks two match candidates per position instead of following
 * hash chains: 2.5-4x faster than zlib's level 1 at about its size (7-13%
 * above level 6 on bench_core's random stacks; on repetitive stacks as
 * small as level 6). Decoding stays with zlib (gzip.c). */
#ifndef PN_DEFLATE_H
#define PN_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "pyroscope_native.h"

/* Bytes of room pn_deflate needs for len input bytes (a little more than
 * it writes: the bit writer stores whole words); 0 when that overflows. */
size_t pn_deflate_bound(size_t len);

/* Compress in[0, len) into out, which has pn_deflate_bound(len) bytes of
 * room; *out_len is the compressed length. Fails only when its work
 * tables cannot be allocated. */
int pn_deflate(const uint8_t *in, size_t len, uint8_t *out, size_t *out_len,
               pn_error *e);

#endif
