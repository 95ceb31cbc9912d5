/* Internal: a multipart/form-data body with one file part, as the Pyroscope
 * ingest endpoint wants it. The content is not copied: the body is sent as
 * three pieces, head + data + tail, so a large profile never exists twice.
 *
 * The boundary is random and checked to be absent from the data, so the
 * data cannot end the part early whatever bytes it holds.
 */
#ifndef PN_MULTIPART_H
#define PN_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#include "pyroscope_native.h"

#define PN_MULTIPART_BOUNDARY_MAX 70   /* RFC 2046's limit */

typedef struct {
    char boundary[PN_MULTIPART_BOUNDARY_MAX + 1];
    char content_type[128];     /* "multipart/form-data; boundary=..." */
    char head[512];             /* delimiter, part headers, blank line */
    size_t head_len;
    char tail[PN_MULTIPART_BOUNDARY_MAX + 16];  /* CRLF, closing delimiter, CRLF */
    size_t tail_len;
} pn_multipart;

/* A source of random 64-bit values for the boundary; NULL in
 * pn_multipart_init means getrandom() (tests pass a fixed sequence). */
typedef uint64_t (*pn_random64_fn)(void *ud);

/* Fills m for one part named `name` with `filename` and `part_type`
 * (e.g. "application/octet-stream") holding data[0..len). Fails when a name
 * holds a quote or control character, or when no boundary absent from data
 * was found in a few tries (only a broken random source does that). */
int pn_multipart_init(pn_multipart *m, const char *name, const char *filename,
                      const char *part_type, const uint8_t *data, size_t len,
                      pn_random64_fn rnd, void *ud, pn_error *e);

#endif
