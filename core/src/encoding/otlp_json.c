/* OTLP/JSON: any protobuf-c message written as the OTLP specification's
 * JSON (the proto3 JSON mapping with its OTLP exceptions), walked through
 * the message's descriptor, so it follows the generated code of
 * proto/opentelemetry without a second copy of the schema.
 *
 * The rules applied (opentelemetry-proto docs/specification.md, "JSON
 * Protobuf Encoding"): keys are lowerCamelCase field names; fields at
 * their default (0, "", empty, unset message, absent oneof) are left out;
 * enums are integers; 64-bit integers are decimal strings; bytes are
 * base64, except trace_id, span_id and profile_id, which are lowercase
 * hex. Exporter thread; everything is owned by the single call. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "encoding/otlp.h"

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} jbuf;

static void put(jbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(jbuf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(jbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void put_string(jbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    puts_(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            put(b, e, 2);
        } else if (*p < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            put(b, e, 6);
        } else {
            put(b, (const char *)p, 1);
        }
    }
    puts_(b, "\"");
}

static void put_bytes(jbuf *b, const ProtobufCBinaryData *d, bool as_hex)
{
    static const char hex[] = "0123456789abcdef";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    puts_(b, "\"");
    if (as_hex) {
        for (size_t i = 0; i < d->len; i++) {
            char e[2] = {hex[d->data[i] >> 4], hex[d->data[i] & 15]};
            put(b, e, 2);
        }
    } else {
        for (size_t i = 0; i < d->len; i += 3) {
            uint32_t v = (uint32_t)d->data[i] << 16;
            size_t k = d->len - i;
            if (k > 1)
                v |= (uint32_t)d->data[i + 1] << 8;
            if (k > 2)
                v |= d->data[i + 2];
            char e[4] = {b64[v >> 18 & 63], b64[v >> 12 & 63], k > 1 ? b64[v >> 6 & 63] : '=',
                         k > 2 ? b64[v & 63] : '='};
            put(b, e, 4);
        }
    }
    puts_(b, "\"");
}

/* lowerCamelCase of a snake_case field name. */
static void put_key(jbuf *b, const char *name)
{
    puts_(b, "\"");
    for (const char *p = name; *p; p++) {
        if (*p == '_' && p[1]) {
            char c = p[1];
            if (c >= 'a' && c <= 'z')
                c = (char)(c - 'a' + 'A');
            put(b, &c, 1);
            p++;
        } else {
            put(b, p, 1);
        }
    }
    puts_(b, "\":");
}

static bool hex_bytes(const char *name)
{
    return strcmp(name, "trace_id") == 0 || strcmp(name, "span_id") == 0 ||
           strcmp(name, "profile_id") == 0;
}

static void put_message(jbuf *b, const ProtobufCMessage *m);

/* One value of field f at v (an element of a repeated field, or the
 * field itself). */
static void put_value(jbuf *b, const ProtobufCFieldDescriptor *f, const void *v)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        putf(b, "%d", *(const int32_t *)v);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        putf(b, "%u", *(const uint32_t *)v);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        putf(b, "\"%lld\"", (long long)*(const int64_t *)v);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        putf(b, "\"%llu\"", (unsigned long long)*(const uint64_t *)v);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double d = f->type == PROTOBUF_C_TYPE_FLOAT ? *(const float *)v : *(const double *)v;
        if (isnan(d))
            puts_(b, "\"NaN\"");
        else if (isinf(d))
            puts_(b, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        else
            putf(b, "%.17g", d);
        break;
    }
    case PROTOBUF_C_TYPE_BOOL:
        puts_(b, *(const protobuf_c_boolean *)v ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_STRING:
        put_string(b, *(char *const *)v);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        put_bytes(b, (const ProtobufCBinaryData *)v, hex_bytes(f->name));
        break;
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)v;
        if (sub)
            put_message(b, sub);
        else
            puts_(b, "{}");
        break;
    }
    }
}

static size_t value_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

/* Whether a singular field without presence holds its default. */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *v)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)v;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)v == NULL;
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)v)->len == 0;
    default: {
        static const uint8_t zero[8];
        return memcmp(v, zero, value_size(f)) == 0;
    }
    }
}

static void put_message(jbuf *b, const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    bool first = true;
    puts_(b, "{");
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *v = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            if (n == 0)
                continue;
            puts_(b, first ? "" : ",");
            first = false;
            put_key(b, f->name);
            puts_(b, "[");
            const char *arr = *(const char *const *)v;
            for (size_t k = 0; k < n; k++) {
                puts_(b, k ? "," : "");
                put_value(b, f, arr + k * value_size(f));
            }
            puts_(b, "]");
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
                   f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING) {
            if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset))
                continue;
        } else if (is_default(f, v)) {
            continue;
        }
        puts_(b, first ? "" : ",");
        first = false;
        put_key(b, f->name);
        put_value(b, f, v);
    }
    puts_(b, "}");
}

int pn_otlp_json(const ProtobufCMessage *m, char **out, size_t *len, pn_error *e)
{
    jbuf b = {0};
    put_message(&b, m);
    if (b.oom) {
        free(b.p);
        return pn_fail(e, PN_ENOMEM, "OTLP/JSON encoding: out of memory");
    }
    *out = b.p;
    *len = b.n;
    return 0;
}
