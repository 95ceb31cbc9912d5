/* The W3C-baggage-like lists of the OpenTelemetry variables
 * (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS): parsed here, in
 * support, for the config (pipeline) and the OTLP exporter (export) alike. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "support/otel_pairs.h"

void pn_pairs_free(pn_label *kv, size_t n)
{
    for (size_t i = 0; kv && i < n; i++) {
        free((char *)kv[i].key);
        free((char *)kv[i].value);
    }
    free(kv);
}

static int hexdigit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..n) trimmed of blanks, percent-decoded into a new string. */
static int decode(const char *what, const char *s, size_t n, char **out, pn_error *e)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *d = malloc(n + 1), *q = d;
    if (!d)
        return pn_fail(e, PN_ENOMEM, "%s: out of memory", what);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexdigit(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexdigit(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(d);
                return pn_fail(e, PN_EINVAL, "%s: \"%.*s\" has a '%%' that is not followed by two "
                               "hex digits", what, (int)(n > 100 ? 100 : n), s);
            }
            c = (char)(hi << 4 | lo);
            i += 2;
        }
        if ((unsigned char)c < 0x20 || c == 0x7f) {
            free(d);
            return pn_fail(e, PN_EINVAL, "%s: \"%.*s\" contains a control character", what,
                           (int)(n > 100 ? 100 : n), s);
        }
        *q++ = c;
    }
    *q = '\0';
    *out = d;
    return 0;
}

int pn_otel_pairs_parse(const char *what, const char *v, pn_label **out, size_t *n,
                        pn_error *e)
{
    pn_label *kv = NULL;
    size_t cnt = 0, cap = 0;
    const char *p = v;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t blank = 0;
        while (blank < len && isspace((unsigned char)p[blank]))
            blank++;
        if (blank == len) {     /* an empty entry (",,", trailing ',') */
            p = end ? end + 1 : p + len;
            continue;
        }
        if (!eq) {
            pn_pairs_free(kv, cnt);
            return pn_fail(e, PN_EINVAL, "%s: \"%.*s\" is not key=value", what,
                           (int)(len > 100 ? 100 : len), p);
        }
        char *k = NULL, *val = NULL;
        if (decode(what, p, (size_t)(eq - p), &k, e) ||
            decode(what, eq + 1, len - (size_t)(eq - p) - 1, &val, e)) {
            free(k);
            pn_pairs_free(kv, cnt);
            return -1;
        }
        if (!k[0]) {
            free(k);
            free(val);
            pn_pairs_free(kv, cnt);
            return pn_fail(e, PN_EINVAL, "%s: an entry has an empty key", what);
        }
        if (out && cnt == cap) {
            size_t nc = cap ? 2 * cap : 8;
            pn_label *nk = realloc(kv, nc * sizeof *nk);
            if (!nk) {
                free(k);
                free(val);
                pn_pairs_free(kv, cnt);
                return pn_fail(e, PN_ENOMEM, "%s: out of memory", what);
            }
            kv = nk;
            cap = nc;
        }
        if (out) {
            kv[cnt++] = (pn_label){k, val};
        } else {
            free(k);
            free(val);
        }
        p = end ? end + 1 : p + len;
    }
    if (out) {
        *out = kv;
        *n = cnt;
    }
    return 0;
}

int pn_resource_attributes_parse(const char *v, pn_label **out, size_t *n, pn_error *e)
{
    return pn_otel_pairs_parse("resource_attributes", v, out, n, e);
}
