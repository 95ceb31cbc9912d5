/* The Pyroscope HTTP exporter: POST {server}/ingest with the gzip'ed pprof
 * as the `profile` file part of a multipart/form-data body (libcurl).
 *
 * The ingest name is opts->app_name plus the global tags, sorted by key, in
 * braces: "app{env=prod,region=eu}". No `format=pprof` parameter: with it the
 * server would read the raw body, not the multipart part, as the profile.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "pyroscope_native.h"
#include "clock.h"

#define DEFAULT_CONNECT_TIMEOUT_S 5.0
#define DEFAULT_TIMEOUT_S 10.0
#define MAX_TIMEOUT_S 3600.0
#define REPLY_QUOTE 300         /* bytes of the server's answer quoted in errors */
/* curl calls the progress callback only about once a second on an idle
 * connection, so we drive the transfer ourselves in short poll steps to see
 * an abort or the deadline promptly. */
#define POLL_STEP_MS 50

typedef struct {
    pn_exporter base;           /* first: the queue sees a pn_exporter */
    /* Deep copy of the options; immutable after new (exporter thread reads). */
    pn_http_opts o;
    char *display;              /* server address without credentials, for messages */
} http_exporter;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
/* Written once inside curl_once, read-only afterwards. libcurl is never
 * cleaned up: the host application may be using it too. */
static CURLcode curl_init_rc;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

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

/* Percent-encode s (curl keeps only unreserved characters). */
static void sb_escaped(sbuf *b, const char *s, size_t n)
{
    /* Since libcurl 7.82 the handle argument is ignored. */
    char *esc = curl_easy_escape(NULL, s, (int)n);
    if (!esc) {
        b->oom = 1;
        return;
    }
    sb_str(b, esc);
    curl_free(esc);
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

/* --------------------------------------------------------------- send */

/* Keeps the first REPLY_QUOTE bytes of the response body, drops the rest. */
typedef struct {
    char buf[REPLY_QUOTE + 1];
    size_t len;
} reply_buf;

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    reply_buf *r = ud;
    size_t total = size * n, room = REPLY_QUOTE - r->len;
    size_t take = total < room ? total : room;
    memcpy(r->buf + r->len, data, take);
    r->len += take;
    return total;
}

/* Printable ASCII only, whitespace runs folded, so a server's HTML or binary
 * answer cannot garble the log. */
static void reply_text(const reply_buf *r, char *out, size_t n)
{
    size_t j = 0;
    int space = 1;
    for (size_t i = 0; i < r->len && j + 1 < n; i++) {
        unsigned char c = (unsigned char)r->buf[i];
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

static int should_stop(const stop_check *s)
{
    return (s->abort && __atomic_load_n(s->abort, __ATOMIC_ACQUIRE)) || pn_clock_ns(CLOCK_MONOTONIC) >= s->deadline_ns;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return should_stop(ud);
}

static long ms_of(double s) { return (long)(s * 1000.0 + 0.5); }

static pn_send_result http_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                const volatile int *abort, pn_error *e)
{
    http_exporter *h = (http_exporter *)self;
    if (!u || (!u->data && u->len)) {
        pn_fail(e, PN_EINVAL, "upload to %s: no profile data", h->display);
        return PN_SEND_FAIL;
    }
    stop_check stop = {abort, deadline_ns};
    int64_t left_ms = (deadline_ns - pn_clock_ns(CLOCK_MONOTONIC)) / 1000000;
    if (left_ms <= 0) {
        pn_fail(e, PN_EIO, "upload to %s: the send deadline passed before the request started",
                h->display);
        return PN_SEND_RETRY;
    }
    char *url = NULL;
    if (build_url(&h->o, u, &url, e))
        return PN_SEND_RETRY;

    pn_send_result res = PN_SEND_RETRY;
    reply_buf reply = {.len = 0};
    char curl_err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    curl_mime *mime = NULL;
    CURLM *m = curl_multi_init();
    CURL *c = curl_easy_init();
    int added = 0;
    if (!m || !c)
        goto oom;

    mime = curl_mime_init(c);
    curl_mimepart *part = mime ? curl_mime_addpart(mime) : NULL;
    if (!part || curl_mime_name(part, "profile") != CURLE_OK ||
        curl_mime_filename(part, "profile.pprof") != CURLE_OK ||
        curl_mime_type(part, "application/octet-stream") != CURLE_OK ||
        curl_mime_data(part, (const char *)u->data, u->len) != CURLE_OK)
        goto oom;

    /* An empty Expect: stops curl from waiting for "100 Continue" (up to a
     * second) before it sends the body. */
    struct curl_slist *t = curl_slist_append(NULL, "Expect:");
    if (!t)
        goto oom;
    hdrs = t;
    sbuf line = {0};
    if (h->o.tenant_id && *h->o.tenant_id) {
        sb_str(&line, "X-Scope-OrgID: ");
        sb_str(&line, h->o.tenant_id);
        if (line.oom || !(t = curl_slist_append(hdrs, line.p))) {
            free(line.p);
            goto oom;
        }
        hdrs = t;
    }
    for (size_t i = 0; i < h->o.nheaders; i++) {
        line.len = 0;
        sb_str(&line, h->o.headers[i].key);
        sb_str(&line, ": ");
        sb_str(&line, h->o.headers[i].value);
        if (line.oom || !(t = curl_slist_append(hdrs, line.p))) {
            free(line.p);
            goto oom;
        }
        hdrs = t;
    }
    free(line.p);

    double total_s = h->o.timeout_s > 0 ? h->o.timeout_s : DEFAULT_TIMEOUT_S;
    double conn_s = h->o.connect_timeout_s > 0 ? h->o.connect_timeout_s : DEFAULT_CONNECT_TIMEOUT_S;
    long total_ms = ms_of(total_s), conn_ms = ms_of(conn_s);
    if (total_ms > left_ms)
        total_ms = (long)left_ms;
    if (conn_ms > total_ms)
        conn_ms = total_ms;

    int ok = curl_easy_setopt(c, CURLOPT_URL, url) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_MIMEPOST, mime) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
             /* We live in other people's processes: no SIGALRM games. */
             curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, conn_ms) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, total_ms) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_XFERINFODATA, &stop) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_USERAGENT, "pyroscope-native") == CURLE_OK;
    if (ok && ((h->o.basic_auth_user && *h->o.basic_auth_user) ||
               (h->o.basic_auth_password && *h->o.basic_auth_password)))
        ok = curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC) == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_USERNAME,
                              h->o.basic_auth_user ? h->o.basic_auth_user : "") == CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_PASSWORD,
                              h->o.basic_auth_password ? h->o.basic_auth_password : "") == CURLE_OK;
    if (!ok || curl_multi_add_handle(m, c) != CURLM_OK)
        goto oom;
    added = 1;

    int running = 1, stopped = 0;
    CURLMcode mc = CURLM_OK;
    for (;;) {
        mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK || !running)
            break;
        if (should_stop(&stop)) {
            stopped = 1;
            break;
        }
        mc = curl_multi_poll(m, NULL, 0, POLL_STEP_MS, NULL);
        if (mc != CURLM_OK)
            break;
    }

    CURLcode cc = CURLE_OK;
    if (!stopped && mc == CURLM_OK) {
        int nmsg;
        CURLMsg *msg;
        cc = CURLE_RECV_ERROR;
        while ((msg = curl_multi_info_read(m, &nmsg)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c)
                cc = msg->data.result;
        if (cc == CURLE_ABORTED_BY_CALLBACK)
            stopped = 1;
    }

    if (stopped) {
        if (abort && __atomic_load_n(abort, __ATOMIC_ACQUIRE))
            pn_fail(e, PN_EIO, "upload to %s aborted: the exporter is stopping", h->display);
        else
            pn_fail(e, PN_EIO, "upload to %s: no answer before the send deadline", h->display);
    } else if (mc != CURLM_OK) {
        pn_fail(e, PN_EIO, "upload to %s failed: %s", h->display, curl_multi_strerror(mc));
    } else if (cc != CURLE_OK) {
        pn_fail(e, PN_EIO, "upload to %s failed: %s%s%s", h->display, curl_easy_strerror(cc),
                curl_err[0] ? ": " : "", curl_err);
        /* A URL curl cannot use will not work on a later attempt either. */
        if (cc == CURLE_URL_MALFORMAT || cc == CURLE_UNSUPPORTED_PROTOCOL)
            res = PN_SEND_FAIL;
    } else {
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            res = PN_SEND_OK;
        } else {
            char text[REPLY_QUOTE + 16];
            reply_text(&reply, text, sizeof text);
            pn_fail(e, PN_EHTTP, "upload to %s: HTTP %ld: %s", h->display, status, text);
            res = (status == 429 || (status >= 500 && status < 600)) ? PN_SEND_RETRY : PN_SEND_FAIL;
        }
    }
    goto out;

oom:
    pn_fail(e, PN_ENOMEM, "upload to %s: out of memory preparing the request", h->display);
out:
    if (added)
        curl_multi_remove_handle(m, c);
    if (c)
        curl_easy_cleanup(c);
    if (m)
        curl_multi_cleanup(m);
    curl_mime_free(mime);
    curl_slist_free_all(hdrs);
    free(url);
    return res;
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

pn_exporter *pn_http_exporter_new(const pn_http_opts *o, pn_error *e)
{
    if (check_opts(o, e))
        return NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        pn_fail(e, PN_EIO, "http exporter: libcurl initialisation failed: %s",
                curl_easy_strerror(curl_init_rc));
        return NULL;
    }
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
