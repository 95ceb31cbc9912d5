/* The protobuf wire format, as far as the pprof encoder needs it: sizes
 * and writers for varints, proto3 scalar fields and length-delimited
 * fields. Each size function pairs with the writer below it, so a message
 * can be sized exactly first and then written into a buffer of that size.
 *
 * Every field number pprof uses is below 16: a tag is one byte. */
#ifndef PN_WIRE_H
#define PN_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PN_WIRE_VARINT 0
#define PN_WIRE_LEN 2

static inline size_t pn_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *pn_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A proto3 scalar (int64 or uint64): absent when zero; a negative int64
 * takes ten bytes. */
static inline size_t pn_field_u64_size(uint64_t v) { return v ? 1 + pn_varint_size(v) : 0; }

static inline uint8_t *pn_put_field_u64(uint8_t *p, unsigned field, uint64_t v)
{
    if (!v)
        return p;
    *p++ = (uint8_t)(field << 3 | PN_WIRE_VARINT);
    return pn_put_varint(p, v);
}

/* A length-delimited field (message, string, packed list) whose body is
 * len bytes: always present. */
static inline size_t pn_field_len_size(size_t len) { return 1 + pn_varint_size(len) + len; }

/* Writes the tag and the length; the caller writes the body. */
static inline uint8_t *pn_put_field_len(uint8_t *p, unsigned field, size_t len)
{
    *p++ = (uint8_t)(field << 3 | PN_WIRE_LEN);
    return pn_put_varint(p, len);
}

static inline uint8_t *pn_put_field_bytes(uint8_t *p, unsigned field, const void *b, size_t len)
{
    p = pn_put_field_len(p, field, len);
    memcpy(p, b, len);
    return p + len;
}

#endif
