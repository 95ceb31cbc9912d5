/* The Pyroscope HTTP exporter: POST {server}/ingest with the gzip'ed pprof
 * as the `profile` file part of a multipart/form-data body.
 *
 * The ingest name is opts->app_name plus the global tags, sorted by key, in
 * braces: "app{env=prod,region=eu}". No `format=pprof` parameter: with it the
 * server would read the raw body, not the multipart part, as the profile.
 *
 * Transport: http:// addresses use the built-in client (http_client.c), so
 * a process that uploads over plain HTTP (or only writes folders) never maps
 * libcurl. libcurl, loaded on first use, takes https:// addresses and any
 * request a proxy variable applies to (see proxy_applies). Both get the
 * same request (URL, headers, body) and their results map to the same
 * retry decisions.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <time.h>

#include "pyroscope_native.h"
#include "export/exporter.h"
#include "support/clock.h"
#include "export/http_client.h"
#include "export/multipart.h"

#define DEFAULT_CONNECT_TIMEOUT_S 5.0
#define DEFAULT_TIMEOUT_S 10.0
#define MAX_TIMEOUT_S 3600.0
#define USER_AGENT "pyroscope-native"

typedef struct {
    pn_exporter base;           /* first: the queue sees a pn_exporter */
    /* Deep copy of the options; immutable after new (exporter thread reads). */
    pn_http_opts o;
    char *display;              /* server address without credentials, for messages */
    /* Fixed after new: */
    int https;
    char host[256];             /* for the no_proxy rule */
    pn_label *headers;          /* every header but Content-Type, owned */
    size_t nheaders;
} http_exporter;

/* Set by pn_http_force_libcurl (tests, any thread); read by sends on the
 * exporter threads. Atomic loads and stores only. */
static int force_libcurl;

void pn_http_force_libcurl(int on) { __atomic_store_n(&force_libcurl, on ? 1 : 0, __ATOMIC_RELEASE); }

/* ------------------------------------------------------------ strings */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        b->oom = 1;
    else
        sb_add(b, tmp, (size_t)n);
}

/* Percent-encode s, keeping only RFC 3986's unreserved characters (what
 * curl_easy_escape does), with upper-case hex digits. */
static void sb_escaped(sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '.' || c == '_' || c == '~') {
            sb_add(b, (const char *)&s[i], 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            sb_add(b, esc, 3);
        }
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Appends s[0..n) with %XX sequences decoded (others kept as they are). */
static void sb_unescaped(sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            char c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            sb_add(b, &c, 1);
            i += 2;
        } else {
            sb_add(b, &s[i], 1);
        }
    }
}

static void sb_base64(sbuf *b, const unsigned char *s, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        char out[4] = {tab[(v >> 18) & 63], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=',
                       i + 2 < n ? tab[v & 63] : '='};
        sb_add(b, out, 4);
    }
}

/* ------------------------------------------------------------ options */

static int has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

static int bad_timeout(double t) { return !(t >= 0 && t <= MAX_TIMEOUT_S); }

/* Headers that frame the request: the exporter and its transport set them. */
static int framing_header(const char *name)
{
    return strcasecmp(name, "Content-Type") == 0 || strcasecmp(name, "Content-Length") == 0 ||
           strcasecmp(name, "Transfer-Encoding") == 0;
}

static int check_opts(const pn_http_opts *o, pn_error *e)
{
    if (!o)
        return pn_fail(e, PN_EINVAL, "http exporter: options are NULL");
    const char *s = o->server_address;
    if (!s || !*s)
        return pn_fail(e, PN_EINVAL, "server_address is empty");
    size_t skip = strncasecmp(s, "http://", 7) == 0 ? 7 : strncasecmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip)
        return pn_fail(e, PN_EINVAL, "server_address '%s': must start with http:// or https://", s);
    if (s[skip] == '\0' || s[skip] == '/')
        return pn_fail(e, PN_EINVAL, "server_address '%s': has no host", s);
    if (strpbrk(s, "?# ") || has_ctl(s))
        return pn_fail(e, PN_EINVAL,
                       "server_address '%s': must not contain a query, fragment, space or control character", s);
    pn_http_url u;
    pn_error ue;
    if (pn_http_url_parse(s, &u, &ue))
        return pn_fail(e, PN_EINVAL, "server_address '%s': %s", s, ue.msg);
    if (!o->app_name || !*o->app_name)
        return pn_fail(e, PN_EINVAL, "application_name is empty");
    if (o->ntags && !o->tags)
        return pn_fail(e, PN_EINVAL, "tags: %zu tags but no array", o->ntags);
    for (size_t i = 0; i < o->ntags; i++) {
        const pn_label *t = &o->tags[i];
        /* These characters would change the structure of the ingest name. */
        if (!t->key || !*t->key || !t->value || !*t->value)
            return pn_fail(e, PN_EINVAL, "tags: tag %zu has an empty name or value", i);
        if (strpbrk(t->key, "{},=") || strpbrk(t->value, "{},="))
            return pn_fail(e, PN_EINVAL, "tags: '%s=%s' must not contain any of { } , =", t->key,
                           t->value);
    }
    if (o->nheaders && !o->headers)
        return pn_fail(e, PN_EINVAL, "http_headers: %zu headers but no array", o->nheaders);
    for (size_t i = 0; i < o->nheaders; i++) {
        const pn_label *h = &o->headers[i];
        if (!h->key || !*h->key || strpbrk(h->key, ": \t") || has_ctl(h->key))
            return pn_fail(e, PN_EINVAL,
                           "http_headers: header %zu name '%s' must be non-empty, without ':', spaces or control characters",
                           i, h->key ? h->key : "");
        if (!h->value || has_ctl(h->value))
            return pn_fail(e, PN_EINVAL, "http_headers: value of '%s' must not contain control characters",
                           h->key);
        pn_error he;
        if (pn_http_header_check(h->key, h->value, &he))
            return pn_fail(e, PN_EINVAL, "http_headers: %s", he.msg);
        if (framing_header(h->key))
            return pn_fail(e, PN_EINVAL,
                           "http_headers: '%s' cannot be set: the exporter sets it for its multipart body",
                           h->key);
    }
    if (o->tenant_id && has_ctl(o->tenant_id))
        return pn_fail(e, PN_EINVAL, "tenant_id must not contain control characters");
    if (bad_timeout(o->connect_timeout_s))
        return pn_fail(e, PN_EINVAL, "connect_timeout_s %g: must be between 0 (default) and %g",
                       o->connect_timeout_s, MAX_TIMEOUT_S);
    if (bad_timeout(o->timeout_s))
        return pn_fail(e, PN_EINVAL, "timeout_s %g: must be between 0 (default) and %g", o->timeout_s,
                       MAX_TIMEOUT_S);
    return 0;
}

static int label_cmp(const void *a, const void *b)
{
    const pn_label *x = *(const pn_label *const *)a, *y = *(const pn_label *const *)b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

/* Options already checked. */
static int build_url(const pn_http_opts *o, const pn_upload *u, char **url, pn_error *e)
{
    sbuf name = {0}, b = {0};
    const pn_label **sorted = NULL;
    sb_str(&name, o->app_name);
    if (o->ntags) {
        sorted = malloc(o->ntags * sizeof *sorted);
        if (!sorted)
            return pn_fail(e, PN_ENOMEM, "ingest URL: out of memory");
        for (size_t i = 0; i < o->ntags; i++)
            sorted[i] = &o->tags[i];
        qsort(sorted, o->ntags, sizeof *sorted, label_cmp);
        sb_str(&name, "{");
        for (size_t i = 0; i < o->ntags; i++) {
            if (i)
                sb_str(&name, ",");
            sb_str(&name, sorted[i]->key);
            sb_str(&name, "=");
            sb_str(&name, sorted[i]->value);
        }
        sb_str(&name, "}");
        free(sorted);
    }

    size_t base = strlen(o->server_address);
    while (base > 0 && o->server_address[base - 1] == '/')
        base--;
    sb_add(&b, o->server_address, base);
    sb_str(&b, "/ingest?name=");
    if (!name.oom)
        sb_escaped(&b, name.p, name.len);
    sb_fmt(&b, "&from=%lld&until=%lld&sampleRate=%u", (long long)u->from_s,
           (long long)u->until_s, u->sample_rate);
    if (o->spy_name && *o->spy_name) {
        sb_str(&b, "&spyName=");
        sb_escaped(&b, o->spy_name, strlen(o->spy_name));
    }
    free(name.p);
    if (name.oom || b.oom) {
        free(b.p);
        return pn_fail(e, PN_ENOMEM, "ingest URL: out of memory");
    }
    *url = b.p;
    return 0;
}

int pn_http_ingest_url(const pn_http_opts *o, const pn_upload *u, char **url, pn_error *e)
{
    if (!url)
        return pn_fail(e, PN_EINVAL, "ingest URL: no output pointer");
    *url = NULL;
    if (check_opts(o, e))
        return -1;
    if (!u)
        return pn_fail(e, PN_EINVAL, "ingest URL: no upload");
    return build_url(o, u, url, e);
}

/* -------------------------------------------------------------- proxy */

static int env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

static int is_ip_literal(const char *host)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* Whether a no_proxy list names host: "*", or an entry equal to the host,
 * or (for names) a domain the host is in ("example.com" and ".example.com"
 * both cover "a.example.com"), case-insensitively. Entries are separated
 * by commas or spaces; IPv6 entries may be bracketed. Addresses match only
 * exactly: CIDR entries are left to libcurl (see proxy_applies). */
static int no_proxy_covers(const char *list, const char *host)
{
    size_t hl = strlen(host);
    int ip = is_ip_literal(host);
    const char *p = list;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        size_t n = (size_t)(p - s);
        if (n == 1 && *s == '*')
            return 1;
        if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
            s++;
            n -= 2;
        }
        if (!ip && n > 0 && *s == '.') {
            s++;
            n--;
        }
        if (n == 0)
            continue;
        if (n == hl && strncasecmp(s, host, n) == 0)
            return 1;
        if (!ip && n < hl && host[hl - n - 1] == '.' && strncasecmp(host + hl - n, s, n) == 0)
            return 1;
    }
    return 0;
}

/* Whether an http:// request must go through libcurl for a proxy: one of
 * http_proxy, HTTP_PROXY, all_proxy, ALL_PROXY is set (non-empty) and
 * no_proxy (or, when that is unset or empty, NO_PROXY) does not cover the
 * host. Empty variables count as unset, as in libcurl.
 * libcurl then applies its own, fuller rules (e.g. CIDR entries; it ignores
 * upper-case HTTP_PROXY). Ours only ever sends to libcurl what libcurl might
 * proxy: anything ours exempts, libcurl's rules exempt too. */
static int proxy_applies(const char *host)
{
    if (!env_set("http_proxy") && !env_set("HTTP_PROXY") && !env_set("all_proxy") && !env_set("ALL_PROXY"))
        return 0;
    const char *np = getenv("no_proxy");
    if (!np || !*np)
        np = getenv("NO_PROXY");
    return !(np && no_proxy_covers(np, host));
}

/* --------------------------------------------------------------- send */

/* Printable ASCII only, whitespace runs folded, so a server's HTML or binary
 * answer cannot garble the log. */
static void reply_text(const pn_http_reply *r, char *out, size_t n)
{
    size_t j = 0;
    int space = 1;
    for (size_t i = 0; i < r->body_len && j + 1 < n; i++) {
        unsigned char c = (unsigned char)r->body[i];
        if (c <= ' ' || c >= 0x7f) {
            if (!space)
                out[j++] = ' ';
            space = 1;
        } else {
            out[j++] = (char)c;
            space = 0;
        }
    }
    while (j > 0 && out[j - 1] == ' ')
        j--;
    out[j] = '\0';
    if (j == 0)
        snprintf(out, n, "(empty body)");
}

typedef struct {
    const volatile int *abort;
    int64_t deadline_ns;
} stop_check;

static int aborted(const stop_check *s) { return s->abort && __atomic_load_n(s->abort, __ATOMIC_ACQUIRE); }

static int should_stop(void *ud)
{
    const stop_check *s = ud;
    return aborted(s) || pn_clock_ns(CLOCK_MONOTONIC) >= s->deadline_ns;
}

static int64_t ns_of(double s) { return (int64_t)(s * 1e9 + 0.5); }

static pn_send_result http_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                const volatile int *abort, pn_error *e)
{
    http_exporter *h = (http_exporter *)self;
    if (!u || (!u->data && u->len)) {
        pn_fail(e, PN_EINVAL, "upload to %s: no profile data", h->display);
        return PN_SEND_FAIL;
    }
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    if ((deadline_ns - now) / 1000000 <= 0) {
        pn_fail(e, PN_EIO, "upload to %s: the send deadline passed before the request started",
                h->display);
        return PN_SEND_RETRY;
    }
    char *url = NULL;
    if (build_url(&h->o, u, &url, e))
        return PN_SEND_RETRY;

    pn_error ce;
    pn_error_clear(&ce);
    pn_multipart mp;
    pn_label *hdrs = NULL;
    if (pn_multipart_init(&mp, "profile", "profile.pprof", "application/octet-stream", u->data, u->len, NULL,
                          NULL, &ce)) {
        pn_fail(e, ce.code, "upload to %s: %s", h->display, ce.msg);
        free(url);
        return PN_SEND_RETRY;
    }
    hdrs = malloc((h->nheaders + 1) * sizeof *hdrs);
    if (!hdrs) {
        pn_fail(e, PN_ENOMEM, "upload to %s: out of memory preparing the request", h->display);
        free(url);
        return PN_SEND_RETRY;
    }
    if (h->nheaders)
        memcpy(hdrs, h->headers, h->nheaders * sizeof *hdrs);
    hdrs[h->nheaders] = (pn_label){"Content-Type", mp.content_type};
    struct iovec body[3] = {{mp.head, mp.head_len}, {u->data, u->len}, {mp.tail, mp.tail_len}};

    double total_s = h->o.timeout_s > 0 ? h->o.timeout_s : DEFAULT_TIMEOUT_S;
    double conn_s = h->o.connect_timeout_s > 0 ? h->o.connect_timeout_s : DEFAULT_CONNECT_TIMEOUT_S;
    int64_t until = now + ns_of(total_s);
    if (until > deadline_ns)
        until = deadline_ns;
    int64_t conn_until = now + ns_of(conn_s);
    if (conn_until > until)
        conn_until = until;
    stop_check stop = {abort, deadline_ns};
    pn_http_request rq = {.url = url, .headers = hdrs, .nheaders = h->nheaders + 1, .body = body, .nbody = 3,
                          .connect_deadline_ns = conn_until, .deadline_ns = until, .stop = should_stop,
                          .stop_ud = &stop};
    pn_http_reply rp;
    int via_curl = h->https || __atomic_load_n(&force_libcurl, __ATOMIC_ACQUIRE) || proxy_applies(h->host);
    int rc = via_curl ? pn_curl_post(&rq, &rp, &ce) : pn_http_post(&rq, &rp, &ce);
    free(hdrs);
    free(url);

    if (rc == 0) {
        if (rp.status >= 200 && rp.status < 300)
            return PN_SEND_OK;
        char text[PN_HTTP_REPLY_KEEP + 16];
        reply_text(&rp, text, sizeof text);
        pn_fail(e, PN_EHTTP, "upload to %s: HTTP %d: %s", h->display, rp.status, text);
        return (rp.status == 429 || (rp.status >= 500 && rp.status < 600)) ? PN_SEND_RETRY : PN_SEND_FAIL;
    }
    int deadline_passed = pn_clock_ns(CLOCK_MONOTONIC) >= deadline_ns;
    switch (rp.failure) {
    case PN_HTTP_FAIL_STOPPED:
    case PN_HTTP_FAIL_TIMEOUT:
        if (aborted(&stop)) {
            pn_fail(e, PN_EIO, "upload to %s aborted: the exporter is stopping", h->display);
            return PN_SEND_RETRY;
        }
        if (rp.failure == PN_HTTP_FAIL_STOPPED || deadline_passed) {
            pn_fail(e, PN_EIO, "upload to %s: no answer before the send deadline", h->display);
            return PN_SEND_RETRY;
        }
        pn_fail(e, PN_EIO, "upload to %s failed: %s", h->display, ce.msg);
        return PN_SEND_RETRY;
    case PN_HTTP_FAIL_PERMANENT:
        pn_fail(e, ce.code ? ce.code : PN_EIO, "upload to %s failed: %s", h->display, ce.msg);
        return PN_SEND_FAIL;
    case PN_HTTP_FAIL_NOMEM:
        pn_fail(e, PN_ENOMEM, "upload to %s failed: %s", h->display, ce.msg);
        return PN_SEND_RETRY;
    default:
        pn_fail(e, PN_EIO, "upload to %s failed: %s", h->display, ce.msg);
        return PN_SEND_RETRY;
    }
}

/* ----------------------------------------------------------- lifetime */

static void free_labels(pn_label *l, size_t n)
{
    for (size_t i = 0; l && i < n; i++) {
        free((char *)l[i].key);
        free((char *)l[i].value);
    }
    free(l);
}

static void http_destroy(pn_exporter *self)
{
    http_exporter *h = (http_exporter *)self;
    if (!h)
        return;
    free((char *)h->o.server_address);
    free((char *)h->o.app_name);
    free((char *)h->o.spy_name);
    free((char *)h->o.basic_auth_user);
    free((char *)h->o.basic_auth_password);
    free((char *)h->o.tenant_id);
    free_labels((pn_label *)h->o.tags, h->o.ntags);
    free_labels((pn_label *)h->o.headers, h->o.nheaders);
    free_labels(h->headers, h->nheaders);
    free(h->display);
    free(h);
}

/* strdup that keeps NULL as NULL; sets *oom on failure. */
static const char *dup_or_null(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

static const pn_label *dup_labels(const pn_label *l, size_t n, int *oom)
{
    if (n == 0)
        return NULL;
    pn_label *d = calloc(n, sizeof *d);
    if (!d) {
        *oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        d[i].key = dup_or_null(l[i].key, oom);
        d[i].value = dup_or_null(l[i].value, oom);
    }
    return d;
}

/* "https://user:pw@host/x" -> "https://host/x": messages end up in logs. */
static char *display_address(const char *s)
{
    const char *host = strstr(s, "://") + 3;
    const char *at = strchr(host, '@'), *slash = strchr(host, '/');
    if (at && (!slash || at < slash))
        host = at + 1;
    size_t scheme = (size_t)(strstr(s, "://") + 3 - s);
    size_t n = scheme + strlen(host);
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, scheme);
    strcpy(d + scheme, host);
    while (n > scheme && d[n - 1] == '/')
        d[--n] = '\0';
    return d;
}

/* "Basic base64(user:password)" from the options, else from the address's
 * user info (%-decoded, as libcurl does); NULL when there are no
 * credentials or memory ran out (*oom). */
static char *basic_auth(const pn_http_opts *o, const pn_http_url *u, int *oom)
{
    sbuf plain = {0}, out = {0};
    if ((o->basic_auth_user && *o->basic_auth_user) || (o->basic_auth_password && *o->basic_auth_password)) {
        sb_str(&plain, o->basic_auth_user ? o->basic_auth_user : "");
        sb_str(&plain, ":");
        sb_str(&plain, o->basic_auth_password ? o->basic_auth_password : "");
    } else if (u->userinfo) {
        const char *colon = memchr(u->userinfo, ':', u->userinfo_len);
        size_t ul = colon ? (size_t)(colon - u->userinfo) : u->userinfo_len;
        sb_unescaped(&plain, u->userinfo, ul);
        sb_str(&plain, ":");
        if (colon)
            sb_unescaped(&plain, colon + 1, u->userinfo_len - ul - 1);
    } else {
        return NULL;
    }
    sb_str(&out, "Basic ");
    if (!plain.oom)
        sb_base64(&out, (const unsigned char *)plain.p, plain.len);
    if (plain.p)
        memset(plain.p, 0, plain.len);  /* the password in clear */
    free(plain.p);
    if (plain.oom || out.oom) {
        free(out.p);
        *oom = 1;
        return NULL;
    }
    return out.p;
}

/* Appends name: value (both copied) to the list, replacing an entry of the
 * same name when `replace`. */
static void put_header(http_exporter *h, const char *name, const char *value, int replace, int *oom)
{
    char *k = strdup(name), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        *oom = 1;
        return;
    }
    if (replace) {
        for (size_t i = 0; i < h->nheaders; i++) {
            if (strcasecmp(h->headers[i].key, name) == 0) {
                free((char *)h->headers[i].key);
                free((char *)h->headers[i].value);
                h->headers[i] = (pn_label){k, v};
                return;
            }
        }
    }
    h->headers[h->nheaders++] = (pn_label){k, v};
}

/* The headers every request carries: User-Agent, Authorization, the tenant
 * and the user's own, which replace ours of the same name (as with
 * libcurl, where a custom header replaces the internal one). */
static int build_headers(http_exporter *h, const pn_http_url *u)
{
    int oom = 0;
    h->headers = calloc(h->o.nheaders + 3, sizeof *h->headers);
    if (!h->headers)
        return -1;
    put_header(h, "User-Agent", USER_AGENT, 0, &oom);
    char *auth = basic_auth(&h->o, u, &oom);
    if (auth)
        put_header(h, "Authorization", auth, 0, &oom);
    free(auth);
    if (h->o.tenant_id && *h->o.tenant_id)
        put_header(h, "X-Scope-OrgID", h->o.tenant_id, 0, &oom);
    size_t generated = h->nheaders;
    for (size_t i = 0; i < h->o.nheaders; i++) {
        int ours = 0;
        for (size_t j = 0; j < generated; j++)
            ours |= strcasecmp(h->headers[j].key, h->o.headers[i].key) == 0;
        put_header(h, h->o.headers[i].key, h->o.headers[i].value, ours, &oom);
    }
    return oom ? -1 : 0;
}

pn_exporter *pn_http_exporter_new(const pn_http_opts *o, pn_error *e)
{
    if (check_opts(o, e))
        return NULL;
    http_exporter *h = calloc(1, sizeof *h);
    if (!h) {
        pn_fail(e, PN_ENOMEM, "http exporter: out of memory");
        return NULL;
    }
    int oom = 0;
    h->o = *o;
    h->o.server_address = dup_or_null(o->server_address, &oom);
    h->o.app_name = dup_or_null(o->app_name, &oom);
    h->o.spy_name = dup_or_null(o->spy_name, &oom);
    h->o.basic_auth_user = dup_or_null(o->basic_auth_user, &oom);
    h->o.basic_auth_password = dup_or_null(o->basic_auth_password, &oom);
    h->o.tenant_id = dup_or_null(o->tenant_id, &oom);
    h->o.tags = dup_labels(o->tags, o->ntags, &oom);
    h->o.headers = dup_labels(o->headers, o->nheaders, &oom);
    if (!h->o.tags)
        h->o.ntags = 0;
    if (!h->o.headers)
        h->o.nheaders = 0;
    h->display = display_address(o->server_address);
    pn_http_url u;
    if (!oom && h->display && pn_http_url_parse(h->o.server_address, &u, NULL) == 0) {
        h->https = u.https;
        memcpy(h->host, u.host, sizeof h->host);
        if (build_headers(h, &u))
            oom = 1;
    } else {
        oom = 1;
    }
    if (oom || !h->display) {
        http_destroy(&h->base);
        pn_fail(e, PN_ENOMEM, "http exporter: out of memory copying the options");
        return NULL;
    }
    h->base.name = "http";
    h->base.send = http_send;
    h->base.destroy = http_destroy;
    return &h->base;
}
