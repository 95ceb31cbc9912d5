/* OTEL_* environment variables: where OpenTelemetry users already say
 * where telemetry goes, who the service is, and how to authenticate. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/otel_env.h"

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

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return (*envp)[n + 1] ? *envp + n + 1 : NULL;
    return NULL;
}

/* The first of two variables that is set (the signal's own wins). */
static const char *env_first(char *const *envp, const char *a, const char *b, const char **which)
{
    const char *v = env_get(envp, a);
    *which = a;
    if (!v) {
        v = env_get(envp, b);
        *which = b;
    }
    return v;
}

int pn_config_apply_otel_env(pn_config *c, char *const *envp, pn_error *e)
{
    pn_error why;
    const char *v, *var;
    if (!pn_config_is_given(c, "application_name") && (v = env_get(envp, "OTEL_SERVICE_NAME"))) {
        /* An OTel service name may hold characters Pyroscope's application
         * names may not: then it is only a resource attribute's business. */
        if (pn_config_set(c, "application_name", v, &why) != 0)
            pn_log(PN_LOG_WARN, "OTEL_SERVICE_NAME ignored as the application name: %s", why.msg);
    }
    if (!pn_config_is_given(c, "otlp_endpoint") &&
        (v = env_first(envp, "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                       &var)) &&
        pn_config_set(c, "otlp_endpoint", v, &why) != 0)
        return pn_fail(e, why.code, "environment variable %s: %s", var, why.msg);
    if (!pn_config_is_given(c, "otlp_headers") &&
        (v = env_first(envp, "OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS",
                       &var))) {
        pn_label *kv = NULL;
        size_t n = 0;
        if (pn_otel_pairs_parse(var, v, &kv, &n, e) != 0)
            return -1;
        int rc = pn_config_set_pairs(c, "otlp_headers", kv, n, &why);
        pn_pairs_free(kv, n);
        if (rc != 0)
            return pn_fail(e, why.code, "environment variable %s: %s", var, why.msg);
    }
    if (!pn_config_is_given(c, "otlp_protocol") &&
        (v = env_first(envp, "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL",
                       &var)) &&
        pn_config_set(c, "otlp_protocol", v, &why) != 0)
        return pn_fail(e, why.code, "environment variable %s: %s", var, why.msg);
    if (!pn_config_is_given(c, "resource_attributes") &&
        (v = env_get(envp, "OTEL_RESOURCE_ATTRIBUTES")) &&
        pn_config_set(c, "resource_attributes", v, &why) != 0)
        return pn_fail(e, why.code, "environment variable OTEL_RESOURCE_ATTRIBUTES: %s", why.msg);
    return 0;
}
