/* The Pyroscope HTTP exporter: POST {server}/ingest with the gzip'ed pprof
 * as the `profile` file part (with a filename) of a multipart/form-data
 * body. With raw_content_type set it is the OTLP exporter's transport
 * instead: the payload is the whole body, POSTed to the address as given.
 *
 * The ingest name is opts->app_name plus the global tags, sorted by key, in
 * braces: "app{env=prod,region=eu}". No `format=pprof` parameter on
 * libcurl's multipart requests: with it the server would read the raw
 * body, not the multipart part, as the profile.
 *
 * Transport: libcurl, for http:// and https:// alike (loaded by
 * curl_loader.c when the exporter is made). Proxies, no_proxy, TLS, the
 * multipart body (curl_mime) and basic auth are libcurl's. Each exporter
 * keeps one easy handle in one multi handle, so the connection is reused
 * from one upload to the next. We drive the transfer in steps of at most
 * POLL_STEP_MS: while it waits on a silent server, libcurl runs the
 * progress callback only about once a second, and pn_queue_stop must not
 * wait that long for the abort flag to be seen.
 *
 * When the binding set a sender (pn_http_set_sender) before the exporter
 * was made, each request is built here and handed to the sender (the
 * profile as the raw body with format=pprof, see binding_send); libcurl is
 * loaded only if the sender declines one, and then sends it as above.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "export/curl_loader.h"
#include "export/exporter.h"
#include "export/http_sender.h"
#include "support/url.h"

#define DEFAULT_CONNECT_TIMEOUT_S 5.0
#define DEFAULT_TIMEOUT_S 10.0
#define MAX_TIMEOUT_S 3600.0
#define USER_AGENT "pyroscope-native"
/* Header lines request_headers adds besides the user's, at most. */
#define MAX_OWN_HEADERS 5
#define POLL_STEP_MS 50
/* Reply body bytes kept for error messages. */
#define REPLY_KEEP 300
/* Reply body bytes read at most: past that the status line has decided
 * and the rest is not worth waiting for (a hostile or broken server). */
#define REPLY_MAX (64 * 1024)

typedef struct {
    pn_exporter base;           /* first: the queue sees a pn_exporter */
    /* Fixed after new (deep copies; read by the exporter thread): */
    pn_http_opts o;
    char *display;              /* server address without credentials, for messages */
    pn_http_sender_fn sender;   /* the binding's sender; NULL: libcurl only */
    void *sender_ud;
    /* libcurl and the header lines for it: set by new without a sender,
     * else by the exporter thread when the sender first declines. */
    const pn_curl_api *cu;
    struct curl_slist *headers; /* every request's extra header lines */
    char *ca_file, *ca_dir;     /* trusted certificates; NULL: libcurl's default */

    /* Exporter thread only. The handles are made by the first send in
     * each process (see take_handles). */
    CURLM *multi;
    CURL *easy;
    pid_t owner;                /* the process the handles belong to */
    int in_flight;              /* easy is in multi: an upload is under way */
    int *socks;                 /* sockets libcurl opened and has not closed */
    size_t nsocks, socks_cap;
    char curl_err[CURL_ERROR_SIZE];
} http_exporter;

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

/* ------------------------------------------------------------ options */

static int has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

static int bad_timeout(double t) { return !(t >= 0 && t <= MAX_TIMEOUT_S); }

/* Headers that frame the request: the exporter and libcurl set them. */
static int framing_header(const char *name)
{
    return strcasecmp(name, "Content-Type") == 0 || strcasecmp(name, "Content-Length") == 0 ||
           strcasecmp(name, "Transfer-Encoding") == 0 || strcasecmp(name, "Content-Encoding") == 0;
}

static const char *address_setting(const pn_http_opts *o)
{
    return o->address_setting ? o->address_setting : "server_address";
}

/* libcurl sends header lines as it is given them: a CR or LF in a value
 * would end the line and let the rest inject headers (or a body). */
static int check_header(const char *what, size_t i, const char *name, const char *value, pn_error *e)
{
    if (!name || !*name)
        return pn_fail(e, PN_EINVAL, "%s: header %zu has an empty name", what, i);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c <= ' ' || *c >= 0x7f || *c == ':')
            return pn_fail(e, PN_EINVAL,
                           "%s: header %zu name '%s' must not contain ':', spaces, control or "
                           "non-ASCII characters", what, i, name);
    if (!value)
        return pn_fail(e, PN_EINVAL, "%s: '%s' has no value", what, name);
    for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
        if (*c == '\r' || *c == '\n')
            return pn_fail(e, PN_EINVAL,
                           "%s: the value of '%s' contains CR or LF, which would inject headers "
                           "into the request", what, name);
        if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
            return pn_fail(e, PN_EINVAL, "%s: the value of '%s' contains a control character",
                           what, name);
    }
    if (framing_header(name))
        return pn_fail(e, PN_EINVAL,
                       "%s: '%s' cannot be set: the exporter sets it for its body", what, name);
    return 0;
}

/* libcurl's URL parser has the last word on the address (port range, IPv6
 * brackets, host syntax), so what passes here is what it will send to. */
static int check_address(const pn_curl_api *cu, const char *what, const char *url, pn_error *e)
{
    char s[256]; /* messages show the address without its password */
    pn_url_redact(url, s, sizeof s);
    size_t skip = strncasecmp(url, "http://", 7) == 0 ? 7 : strncasecmp(url, "https://", 8) == 0 ? 8 : 0;
    if (!skip)
        return pn_fail(e, PN_EINVAL, "%s '%s': must start with http:// or https://", what, s);
    if (url[skip] == '\0' || url[skip] == '/')
        return pn_fail(e, PN_EINVAL, "%s '%s': has no host", what, s);
    if (strpbrk(url, "?# ") || has_ctl(url))
        return pn_fail(e, PN_EINVAL,
                       "%s '%s': must not contain a query, fragment, space or control character", what,
                       s);
    if (!cu)
        return 0;   /* a binding's sender: its own client parses the rest */
    CURLU *u = cu->url();
    if (!u)
        return pn_fail(e, PN_ENOMEM, "%s: out of memory", what);
    CURLUcode rc = cu->url_set(u, CURLUPART_URL, url, 0);
    cu->url_cleanup(u);
    if (rc == CURLUE_OUT_OF_MEMORY)
        return pn_fail(e, PN_ENOMEM, "%s: out of memory", what);
    if (rc != CURLUE_OK) {
        if (cu->url_strerror)
            return pn_fail(e, PN_EINVAL, "%s '%s': %s", what, s, cu->url_strerror(rc));
        return pn_fail(e, PN_EINVAL, "%s '%s': libcurl cannot parse it (CURLUcode %d)", what, s,
                           (int)rc);
    }
    return 0;
}

/* Loads libcurl when it is not yet (unless use_curl is 0: a binding's
 * sender sends): the address is checked by it. */
static int check_opts(const pn_http_opts *o, int use_curl, pn_error *e)
{
    if (!o)
        return pn_fail(e, PN_EINVAL, "http exporter: options are NULL");
    if (!o->server_address || !*o->server_address)
        return pn_fail(e, PN_EINVAL, "%s is empty", address_setting(o));
    const pn_curl_api *cu = use_curl ? pn_curl_load(e) : NULL;
    if (use_curl && !cu)
        return -1;
    if (check_address(cu, address_setting(o), o->server_address, e))
        return -1;
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
    for (size_t i = 0; i < o->nheaders; i++)
        if (check_header(o->headers_setting ? o->headers_setting : "http_headers", i,
                         o->headers[i].key, o->headers[i].value, e))
            return -1;
    if (o->tenant_id && has_ctl(o->tenant_id))
        return pn_fail(e, PN_EINVAL, "tenant_id must not contain control characters");
    if (bad_timeout(o->connect_timeout_s))
        return pn_fail(e, PN_EINVAL, "connect_timeout_s %g: must be between 0 (default) and %g",
                       o->connect_timeout_s, MAX_TIMEOUT_S);
    if (bad_timeout(o->timeout_s))
        return pn_fail(e, PN_EINVAL, "timeout_s %g: must be between 0 (default) and %g", o->timeout_s,
                       MAX_TIMEOUT_S);
    if (o->ca_file && !*o->ca_file)
        return pn_fail(e, PN_EINVAL, "ca_file is empty");
    return 0;
}

/* ---------------------------------------------------------------- URL */

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
    if (check_opts(o, 1, e))
        return -1;
    if (!u)
        return pn_fail(e, PN_EINVAL, "ingest URL: no upload");
    return build_url(o, u, url, e);
}

/* ------------------------------------------------------------ sockets */

/* libcurl's sockets are tracked so that a forked child can take its
 * copies of them away from libcurl (see drop_inherited_handles). */
static int sock_opened(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    (void)purpose;
    http_exporter *h = ud;
    if (h->nsocks == h->socks_cap) {
        size_t cap = h->socks_cap ? 2 * h->socks_cap : 4;
        int *p = realloc(h->socks, cap * sizeof *p);
        if (!p)
            return CURL_SOCKOPT_ERROR;  /* libcurl closes it and fails the request */
        h->socks = p;
        h->socks_cap = cap;
    }
    h->socks[h->nsocks++] = fd;
    return CURL_SOCKOPT_OK;
}

static int sock_closed(void *ud, curl_socket_t fd)
{
    http_exporter *h = ud;
    for (size_t i = 0; i < h->nsocks; i++)
        if (h->socks[i] == fd) {
            h->socks[i] = h->socks[--h->nsocks];
            break;
        }
    return close(fd);
}

/* ----------------------------------------------------------- transfer */

/* One upload's state, for libcurl's callbacks. */
typedef struct {
    const volatile int *abort;
    int64_t deadline_ns;
    const uint8_t *data;        /* the profile, read by the mime part */
    size_t len, off;
    char reply[REPLY_KEEP + 1]; /* first bytes of the reply body */
    size_t reply_len, reply_total;
    int cut;                    /* stopped reading a body longer than REPLY_MAX */
    int grpc_status;            /* from the headers or trailers; -1: none */
    char grpc_message[REPLY_KEEP + 1];
} transfer;

static int aborted(const transfer *t) { return t->abort && __atomic_load_n(t->abort, __ATOMIC_ACQUIRE); }

static int should_stop(const transfer *t)
{
    return aborted(t) || pn_clock_ns(CLOCK_MONOTONIC) >= t->deadline_ns;
}

static size_t read_profile(char *dst, size_t size, size_t n, void *ud)
{
    transfer *t = ud;
    size_t take = t->len - t->off;
    if (take > size * n)
        take = size * n;
    memcpy(dst, t->data + t->off, take);
    t->off += take;
    return take;
}

/* libcurl rewinds the body when it must send it again (a reused
 * connection that the server had closed). */
static int seek_profile(void *ud, curl_off_t offset, int origin)
{
    transfer *t = ud;
    if (origin != SEEK_SET || offset < 0 || (unsigned long long)offset > t->len)
        return CURL_SEEKFUNC_CANTSEEK;
    t->off = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static size_t on_reply(char *data, size_t size, size_t n, void *ud)
{
    transfer *t = ud;
    size_t total = size * n, take = REPLY_KEEP - t->reply_len;
    if (take > total)
        take = total;
    memcpy(t->reply + t->reply_len, data, take);
    t->reply_len += take;
    t->reply[t->reply_len] = '\0';
    t->reply_total += total;
    if (t->reply_total > REPLY_MAX) {
        t->cut = 1;
        return 0;               /* ends the transfer: CURLE_WRITE_ERROR */
    }
    return total;
}

/* gRPC's answer is in grpc-status / grpc-message, a header line of a
 * Trailers-Only reply or a trailer (libcurl passes both here). */
static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    transfer *t = ud;
    size_t len = size * n;
    static const char st[] = "grpc-status:", msg[] = "grpc-message:";
    if (len > sizeof st - 1 && strncasecmp(data, st, sizeof st - 1) == 0) {
        char num[16];
        size_t k = len - (sizeof st - 1) < sizeof num - 1 ? len - (sizeof st - 1) : sizeof num - 1;
        memcpy(num, data + sizeof st - 1, k);
        num[k] = '\0';
        t->grpc_status = atoi(num);
    } else if (len > sizeof msg - 1 && strncasecmp(data, msg, sizeof msg - 1) == 0) {
        size_t k = len - (sizeof msg - 1);
        if (k > REPLY_KEEP)
            k = REPLY_KEEP;
        memcpy(t->grpc_message, data + sizeof msg - 1, k);
        t->grpc_message[k] = '\0';
        /* percent-encoded by the spec; shown as sent, without the line end */
        for (char *p = t->grpc_message; *p; p++)
            if (*p == '\r' || *p == '\n')
                *p = '\0';
    }
    return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return should_stop(ud);
}

/* The options every request shares. */
static int set_fixed_options(http_exporter *h, CURL *c)
{
    const pn_curl_api *cu = h->cu;
    int ok = cu->easy_setopt(c, CURLOPT_HTTPHEADER, h->headers) == CURLE_OK &&
             /* We live in other people's processes: no SIGALRM games. */
             cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             /* A redirect would send the profile (and the credentials)
              * elsewhere; a 3xx answer fails the upload instead. */
             cu->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_reply) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_ERRORBUFFER, h->curl_err) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, sock_opened) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_SOCKOPTDATA, h) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, sock_closed) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_CLOSESOCKETDATA, h) == CURLE_OK;
    if (ok && h->o.basic_auth_user && *h->o.basic_auth_user)
        ok = cu->easy_setopt(c, CURLOPT_USERNAME, h->o.basic_auth_user) == CURLE_OK;
    if (ok && h->o.basic_auth_password && *h->o.basic_auth_password)
        ok = cu->easy_setopt(c, CURLOPT_PASSWORD, h->o.basic_auth_password) == CURLE_OK;
    if (ok && h->ca_file)
        ok = cu->easy_setopt(c, CURLOPT_CAINFO, h->ca_file) == CURLE_OK;
    /* gRPC: a new connection per upload. libcurl 7.88 (Debian 12) sends
     * nothing on a reused h2c (prior knowledge) connection and the upload
     * ends in "Error in the HTTP2 framing layer" (seen with the Collector
     * and Pyroscope; `curl --http2-prior-knowledge ... --next ...` alike).
     * One connection per period costs one handshake. */
    if (ok && h->o.grpc)
        ok = cu->easy_setopt(c, CURLOPT_FORBID_REUSE, 1L) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_HTTP_VERSION,
                             strncasecmp(h->o.server_address, "https://", 8) == 0
                                 ? (long)CURL_HTTP_VERSION_2TLS
                                 : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK;
    if (ok && h->ca_dir)
        ok = cu->easy_setopt(c, CURLOPT_CAPATH, h->ca_dir) == CURLE_OK;
    return ok ? 0 : -1;
}

static void free_handles(http_exporter *h)
{
    if (h->easy)
        h->cu->easy_cleanup(h->easy);
    /* Closing the cached connections calls sock_closed: h is still whole. */
    if (h->multi)
        h->cu->multi_cleanup(h->multi);
    h->easy = NULL;
    h->multi = NULL;
}

/* In a forked child, the handles came from the parent with its open
 * connections. When the fork came between two uploads, the child's copies
 * of those sockets are swapped for /dev/null and libcurl frees the
 * handles: whatever it does on the way out (a TLS close) never reaches the
 * parent's connection. When it came during an upload, libcurl may be
 * waiting for a thread (its resolver) that the child does not have, and
 * freeing would wait forever: the copies are closed and the handles left
 * as they are (some KiB, once per such fork). */
static void drop_inherited_handles(http_exporter *h)
{
    int null = h->in_flight ? -1 : open("/dev/null", O_RDWR | O_CLOEXEC);
    for (size_t i = 0; i < h->nsocks; i++)
        if (null < 0 || dup3(null, h->socks[i], O_CLOEXEC) < 0)
            close(h->socks[i]);
    if (null < 0) {
        h->nsocks = 0;
        h->easy = NULL;
        h->multi = NULL;
        h->in_flight = 0;
        return;
    }
    close(null);
    free_handles(h);
}

/* The handles of this process, made on first use. */
static int take_handles(http_exporter *h, pn_error *e)
{
    if (h->easy && h->owner != getpid())
        drop_inherited_handles(h);
    if (h->easy)
        return 0;
    const pn_curl_api *cu = h->cu;
    CURLM *m = cu->multi_init();
    CURL *c = cu->easy_init();
    if (!m || !c || set_fixed_options(h, c)) {
        if (c)
            cu->easy_cleanup(c);
        if (m)
            cu->multi_cleanup(m);
        return pn_fail(e, PN_ENOMEM, "upload to %s: cannot set up a libcurl handle", h->display);
    }
    h->multi = m;
    h->easy = c;
    h->owner = getpid();
    return 0;
}

static long ms_until(int64_t deadline, int64_t now)
{
    int64_t ms = (deadline - now + 999999) / 1000000;
    return ms < 1 ? 1 : (long)ms;
}

static int64_t ns_of(double s) { return (int64_t)(s * 1e9 + 0.5); }

/* The multipart body: one part, name "profile", with a filename (the
 * server ignores the part without one), read from t without a copy. */
static curl_mime *profile_body(const pn_curl_api *cu, CURL *c, transfer *t)
{
    curl_mime *m = cu->mime_init(c);
    curl_mimepart *p = m ? cu->mime_addpart(m) : NULL;
    if (!p || cu->mime_name(p, "profile") != CURLE_OK || cu->mime_filename(p, "profile.pprof") != CURLE_OK ||
        cu->mime_type(p, "application/octet-stream") != CURLE_OK ||
        cu->mime_data_cb(p, (curl_off_t)t->len, read_profile, seek_profile, NULL, t) != CURLE_OK) {
        if (m)
            cu->mime_free(m);
        return NULL;
    }
    return m;
}

typedef enum { RUN_DONE, RUN_STOPPED, RUN_MULTI_ERROR } run_end;

/* Drives the transfer until it ends, the deadline passes or the abort
 * flag is set; *cc: libcurl's result when RUN_DONE. */
static run_end run(const pn_curl_api *cu, CURLM *m, CURL *c, const transfer *t, CURLcode *cc,
                   CURLMcode *mc)
{
    int running = 1;
    for (;;) {
        *mc = cu->multi_perform(m, &running);
        if (*mc != CURLM_OK)
            return RUN_MULTI_ERROR;
        if (!running)
            break;
        if (should_stop(t))
            return RUN_STOPPED;
        *mc = cu->multi_poll(m, NULL, 0, POLL_STEP_MS, NULL);
        if (*mc != CURLM_OK)
            return RUN_MULTI_ERROR;
    }
    *cc = CURLE_RECV_ERROR;
    int left;
    CURLMsg *msg;
    while ((msg = cu->multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == c)
            *cc = msg->data.result;
    return RUN_DONE;
}

/* Printable ASCII only, whitespace runs folded, so a server's HTML or binary
 * answer cannot garble the log. */
static void reply_text(const char *reply, size_t len, char *out, size_t n)
{
    size_t j = 0;
    int space = 1;
    for (size_t i = 0; i < len && j + 1 < n; i++) {
        unsigned char ch = (unsigned char)reply[i];
        if (ch <= ' ' || ch >= 0x7f) {
            if (!space)
                out[j++] = ' ';
            space = 1;
        } else {
            out[j++] = (char)ch;
            space = 0;
        }
    }
    while (j > 0 && out[j - 1] == ' ')
        j--;
    out[j] = '\0';
    if (j == 0)
        snprintf(out, n, "(empty body)");
}

static pn_send_result status_result(http_exporter *h, long status, const char *reply,
                                    size_t reply_len, pn_error *e)
{
    if (status >= 200 && status < 300)
        return PN_SEND_OK;
    char text[REPLY_KEEP + 16];
    reply_text(reply, reply_len, text, sizeof text);
    pn_fail(e, PN_EHTTP, "upload to %s: HTTP %ld: %s%s", h->display, status, text,
            status >= 300 && status < 400 ? " (redirects are not followed: give the final address)" : "");
    return (status == 429 || (status >= 500 && status < 600)) ? PN_SEND_RETRY : PN_SEND_FAIL;
}

/* A gRPC reply that came back with HTTP 200: its status decides; the
 * codes worth another attempt are the ones the OTLP spec lists as
 * retryable. */
static pn_send_result grpc_result(http_exporter *h, const transfer *t, pn_error *e)
{
    if (t->grpc_status == 0)
        return PN_SEND_OK;
    if (t->grpc_status < 0) {
        pn_fail(e, PN_EHTTP, "upload to %s: the reply has no grpc-status (not a gRPC server? "
                "otlp_protocol is grpc)", h->display);
        return PN_SEND_FAIL;
    }
    static const int retry[] = {1, 4, 8, 10, 11, 14, 15};
    pn_send_result r = PN_SEND_FAIL;
    for (size_t i = 0; i < sizeof retry / sizeof retry[0]; i++)
        if (t->grpc_status == retry[i])
            r = PN_SEND_RETRY;
    pn_fail(e, PN_EHTTP, "upload to %s: gRPC status %d: %s", h->display, t->grpc_status,
            t->grpc_message[0] ? t->grpc_message : "(no message)");
    return r;
}

static pn_send_result curl_result(http_exporter *h, CURLcode cc, pn_error *e)
{
    const char *what = h->cu->easy_strerror(cc);
    const char *detail = h->curl_err;
    switch (cc) {
    case CURLE_OUT_OF_MEMORY:
        /* libcurl's answer to a reply header line over its 100 KiB limit too. */
        pn_fail(e, PN_ENOMEM, "upload to %s failed: %s%s%s (or a reply header line longer than libcurl accepts)",
                h->display, what, *detail ? ": " : "", detail);
        return PN_SEND_RETRY;
    /* Trying again will not help until the settings change. */
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        pn_fail(e, PN_EIO, "upload to %s failed: %s%s%s", h->display, what, *detail ? ": " : "", detail);
        return PN_SEND_FAIL;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        pn_fail(e, PN_EIO,
                "upload to %s failed: %s%s%s (the certificates trusted come from SSL_CERT_FILE / "
                "SSL_CERT_DIR when set, else the system's bundle)",
                h->display, what, *detail ? ": " : "", detail);
        return PN_SEND_FAIL;
    default:
        pn_fail(e, PN_EIO, "upload to %s failed: %s%s%s", h->display, what, *detail ? ": " : "", detail);
        return PN_SEND_RETRY;
    }
}

static int build_headers(http_exporter *h);
static size_t request_headers(const http_exporter *h, int raw_pprof, pn_label *out);

/* libcurl for an exporter made with a sender, once the sender declined. */
static int ensure_curl(http_exporter *h, pn_error *e)
{
    if (h->cu)
        return 0;
    const pn_curl_api *cu = pn_curl_load(e);
    if (!cu)
        return -1;
    h->cu = cu;
    if (build_headers(h)) {
        cu->slist_free_all(h->headers);
        h->headers = NULL;
        h->cu = NULL;
        return pn_fail(e, PN_ENOMEM, "upload to %s: out of memory", h->display);
    }
    pn_log(PN_LOG_DEBUG, "upload to %s: the binding's sender declined it; libcurl sends it",
           h->display);
    return 0;
}

/* The request through the binding's sender: libcurl's URL, header lines
 * (its User-Agent among them), credentials and timeouts, but an ingest
 * upload goes as the raw gzip'ed pprof body with `format=pprof` in the
 * query: grafana/pyroscope's ingest handler then takes the body itself as
 * the profile (pkg/ingester/pyroscope/ingest_handler.go,
 * readInputRawDataFromRequest: format "pprof" -> pprof.RawProfile), as
 * @pyroscope/nodejs sends it; no multipart body is built here. OTLP
 * payloads go as they are. *declined: the sender cannot send now (the
 * caller falls back to libcurl, whose request is multipart as before). */
static pn_send_result binding_send(http_exporter *h, const pn_upload *u, const char *url,
                                   int64_t deadline_ns, const volatile int *abort, pn_error *e,
                                   int *declined)
{
    *declined = 0;
    int otlp = h->o.raw_content_type != NULL;
    static const char pprof_query[] = "&format=pprof";
    size_t ulen = strlen(url);
    char *sender_url = malloc(ulen + sizeof pprof_query);
    pn_label *hdr = calloc(h->o.nheaders + MAX_OWN_HEADERS, sizeof *hdr);
    if (!hdr || !sender_url) {
        free(hdr);
        free(sender_url);
        pn_fail(e, PN_ENOMEM, "upload to %s: out of memory preparing the request", h->display);
        return PN_SEND_RETRY;
    }
    memcpy(sender_url, url, ulen + 1);
    if (!otlp)
        memcpy(sender_url + ulen, pprof_query, sizeof pprof_query);
    size_t n = request_headers(h, !otlp, hdr);
    pn_http_request rq = {
        .url = sender_url, .headers = hdr, .nheaders = n,
        .basic_auth_user = h->o.basic_auth_user && *h->o.basic_auth_user ? h->o.basic_auth_user : NULL,
        .basic_auth_password = h->o.basic_auth_password && *h->o.basic_auth_password
                                   ? h->o.basic_auth_password : NULL,
        .body = u->data, .body_len = u->len,
        .timeout_s = h->o.timeout_s > 0 ? h->o.timeout_s : DEFAULT_TIMEOUT_S,
        .connect_timeout_s = h->o.connect_timeout_s > 0 ? h->o.connect_timeout_s
                                                        : DEFAULT_CONNECT_TIMEOUT_S,
        .ca_file = h->ca_file,
        .ca_dir = h->ca_dir,
    };
    pn_http_response out;
    memset(&out, 0, sizeof out);
    int rc = h->sender(h->sender_ud, &rq, deadline_ns, abort, &out);
    free(hdr);
    free(sender_url);
    out.error[sizeof out.error - 1] = '\0';
    out.reply[sizeof out.reply - 1] = '\0';
    if (rc == PN_SENDER_ANSWERED)
        return status_result(h, out.status, out.reply, strlen(out.reply), e);
    if (rc == PN_SENDER_DECLINED) {
        *declined = 1;
        return PN_SEND_RETRY;
    }
    if (rc == PN_SENDER_UNCONFIRMED) {
        pn_fail(e, PN_EIO, "upload to %s: %s", h->display,
                out.error[0] ? out.error : "the process exits before the answer");
        return PN_SEND_UNCONFIRMED;
    }
    pn_fail(e, PN_EIO, "upload to %s failed: %s", h->display,
            out.error[0] ? out.error : "the binding's sender gave no reason");
    return out.permanent ? PN_SEND_FAIL : PN_SEND_RETRY;
}

static pn_send_result http_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                const volatile int *abort, pn_error *e)
{
    http_exporter *h = (http_exporter *)self;
    if (!u || (!u->data && u->len)) {
        pn_fail(e, PN_EINVAL, "upload to %s: no profile data", h->display);
        return PN_SEND_FAIL;
    }
    transfer t = {.abort = abort, .deadline_ns = deadline_ns, .data = u->data, .len = u->len,
                  .grpc_status = -1};
    if (aborted(&t)) {
        pn_fail(e, PN_EIO, "upload to %s aborted: the exporter is stopping", h->display);
        return PN_SEND_RETRY;
    }
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    if ((deadline_ns - now) / 1000000 <= 0) {
        pn_fail(e, PN_EIO, "upload to %s: the send deadline passed before the request started",
                h->display);
        return PN_SEND_RETRY;
    }
    char *url = NULL;
    if (h->o.raw_content_type) {
        if (!(url = strdup(h->o.server_address))) {
            pn_fail(e, PN_ENOMEM, "upload to %s: out of memory", h->display);
            return PN_SEND_RETRY;
        }
    } else if (build_url(&h->o, u, &url, e)) {
        return PN_SEND_RETRY;
    }
    if (h->sender) {
        int declined;
        pn_send_result sr = binding_send(h, u, url, deadline_ns, abort, e, &declined);
        if (!declined) {
            free(url);
            return sr;
        }
        now = pn_clock_ns(CLOCK_MONOTONIC);
        if ((deadline_ns - now) / 1000000 <= 0 || aborted(&t)) {
            free(url);
            pn_fail(e, PN_EIO, "upload to %s: the send deadline passed before the request started",
                    h->display);
            return PN_SEND_RETRY;
        }
    }
    if (ensure_curl(h, e)) {
        free(url);
        return PN_SEND_RETRY;
    }
    const pn_curl_api *cu = h->cu;
    if (take_handles(h, e)) {
        free(url);
        return PN_SEND_RETRY;
    }
    CURL *c = h->easy;
    int raw = h->o.raw_content_type != NULL;
    curl_mime *body = raw ? NULL : profile_body(cu, c, &t);
    if (!raw && !body) {
        free(url);
        pn_fail(e, PN_ENOMEM, "upload to %s: out of memory preparing the request", h->display);
        return PN_SEND_RETRY;
    }

    double total_s = h->o.timeout_s > 0 ? h->o.timeout_s : DEFAULT_TIMEOUT_S;
    double conn_s = h->o.connect_timeout_s > 0 ? h->o.connect_timeout_s : DEFAULT_CONNECT_TIMEOUT_S;
    int64_t until = now + ns_of(total_s);
    int deadline_first = until >= deadline_ns;  /* libcurl's timeout is the deadline */
    if (deadline_first)
        until = deadline_ns;
    int64_t conn_until = now + ns_of(conn_s);
    if (conn_until > until)
        conn_until = until;
    h->curl_err[0] = '\0';
    int ok = cu->easy_setopt(c, CURLOPT_URL, url) == CURLE_OK &&
             (raw ? cu->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t.len) == CURLE_OK &&
                        cu->easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)t.data) == CURLE_OK
                  : cu->easy_setopt(c, CURLOPT_MIMEPOST, body) == CURLE_OK) &&
             cu->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms_until(conn_until, now)) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_TIMEOUT_MS, ms_until(until, now)) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_WRITEDATA, &t) == CURLE_OK &&
             /* only with on_header set: else libcurl would write to it */
             (!h->o.grpc || cu->easy_setopt(c, CURLOPT_HEADERDATA, &t) == CURLE_OK) &&
             cu->easy_setopt(c, CURLOPT_XFERINFODATA, &t) == CURLE_OK;
    free(url);  /* libcurl keeps its own copy */
    h->in_flight = 1;
    int added = ok && cu->multi_add_handle(h->multi, c) == CURLM_OK;

    pn_send_result r;
    CURLcode cc = CURLE_OK;
    CURLMcode mc = CURLM_OK;
    run_end end = added ? run(cu, h->multi, c, &t, &cc, &mc) : RUN_MULTI_ERROR;
    if (!added) {
        pn_fail(e, PN_ENOMEM, "upload to %s: cannot start the libcurl request", h->display);
        r = PN_SEND_RETRY;
    } else if (end == RUN_DONE && (cc == CURLE_OK || (cc == CURLE_WRITE_ERROR && t.cut))) {
        long status = 0;
        cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        r = status_result(h, status, t.reply, t.reply_len, e);
        if (r == PN_SEND_OK && h->o.grpc)
            r = grpc_result(h, &t, e);
    } else if (end == RUN_STOPPED || cc == CURLE_ABORTED_BY_CALLBACK ||
               (cc == CURLE_OPERATION_TIMEDOUT && deadline_first)) {
        if (aborted(&t))
            pn_fail(e, PN_EIO, "upload to %s aborted: the exporter is stopping", h->display);
        else
            pn_fail(e, PN_EIO, "upload to %s: no answer before the send deadline", h->display);
        r = PN_SEND_RETRY;
    } else if (end == RUN_MULTI_ERROR) {
        pn_fail(e, PN_EIO, "upload to %s failed: %s", h->display, cu->multi_strerror(mc));
        r = PN_SEND_RETRY;
    } else {
        r = curl_result(h, cc, e);
    }
    /* The connection stays in the multi handle's cache for the next
     * upload, unless this one was cut short (then libcurl closes it). */
    if (added)
        cu->multi_remove_handle(h->multi, c);
    h->in_flight = 0;
    if (raw) {
        cu->easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
    } else {
        cu->easy_setopt(c, CURLOPT_MIMEPOST, NULL);
        cu->mime_free(body);
    }
    return r;
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
    if (h->easy && h->owner != getpid())
        drop_inherited_handles(h);
    else
        free_handles(h);
    if (h->cu)
        h->cu->slist_free_all(h->headers);
    free(h->socks);
    free((char *)h->o.server_address);
    free((char *)h->o.app_name);
    free((char *)h->o.spy_name);
    free((char *)h->o.basic_auth_user);
    free((char *)h->o.basic_auth_password);
    free((char *)h->o.tenant_id);
    free_labels((pn_label *)h->o.tags, h->o.ntags);
    free_labels((pn_label *)h->o.headers, h->o.nheaders);
    free((char *)h->o.raw_content_type);
    free((char *)h->o.address_setting);
    free((char *)h->o.headers_setting);
    free(h->ca_file);
    free(h->ca_dir);
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

/* Appends the header line "name: value" ("name;" for an empty value, which
 * libcurl sends as "name:"; "name:" alone would remove the header). */
static int add_header(http_exporter *h, const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = malloc(n);
    if (!line)
        return -1;
    if (*value)
        snprintf(line, n, "%s: %s", name, value);
    else
        snprintf(line, n, "%s;", name);
    struct curl_slist *l = h->cu->slist_append(h->headers, line);
    free(line);
    if (!l)
        return -1;
    h->headers = l;
    return 0;
}

static int user_has_header(const pn_http_opts *o, const char *name)
{
    for (size_t i = 0; i < o->nheaders; i++)
        if (strcasecmp(o->headers[i].key, name) == 0)
            return 1;
    return 0;
}

/* The header lines of a request, ours then the user's, for libcurl and
 * for a binding's sender alike: an OTLP payload's type and encoding, or
 * (raw_pprof: the sender's raw body) the octet-stream type; the
 * User-Agent and the tenant unless the user sets their own (theirs come
 * later and would be sent twice). out holds nheaders + MAX_OWN_HEADERS. */
static size_t request_headers(const http_exporter *h, int raw_pprof, pn_label *out)
{
    size_t n = 0;
    if (h->o.raw_content_type && h->o.grpc) {
        out[n++] = (pn_label){"Content-Type", h->o.raw_content_type};
        out[n++] = (pn_label){"TE", "trailers"};
        out[n++] = (pn_label){"grpc-encoding", "gzip"};
    } else if (h->o.raw_content_type) {
        out[n++] = (pn_label){"Content-Type", h->o.raw_content_type};
        out[n++] = (pn_label){"Content-Encoding", "gzip"};
    } else if (raw_pprof) {
        out[n++] = (pn_label){"Content-Type", "application/octet-stream"};
    }
    if (!user_has_header(&h->o, "User-Agent"))
        out[n++] = (pn_label){"User-Agent", USER_AGENT};
    if (h->o.tenant_id && *h->o.tenant_id && !user_has_header(&h->o, "X-Scope-OrgID"))
        out[n++] = (pn_label){"X-Scope-OrgID", h->o.tenant_id};
    for (size_t i = 0; i < h->o.nheaders; i++)
        out[n++] = h->o.headers[i];
    return n;
}

/* libcurl's list: request_headers' lines, after an empty Expect: (which
 * stops libcurl from waiting for "100 Continue", up to a second, before
 * it sends a large body). A multipart body's Content-Type is libcurl's. */
static int build_headers(http_exporter *h)
{
    pn_label *hdr = calloc(h->o.nheaders + MAX_OWN_HEADERS, sizeof *hdr);
    struct curl_slist *l = hdr ? h->cu->slist_append(NULL, "Expect:") : NULL;
    if (!l) {
        free(hdr);
        return -1;
    }
    h->headers = l;
    size_t n = request_headers(h, 0, hdr);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = add_header(h, hdr[i].key, hdr[i].value);
    free(hdr);
    return rc;
}

pn_exporter *pn_http_exporter_new(const pn_http_opts *o, pn_error *e)
{
    pn_http_sender_fn sender;
    void *sender_ud;
    pn_http_sender_get(&sender, &sender_ud);
    if (o && o->grpc) {
        sender = NULL, sender_ud = NULL;   /* a binding's sender speaks HTTP/1.1 */
    } else if (!sender) {
        /* No libcurl on this machine: the binding's runtime sends. */
        pn_http_sender_fn fb;
        void *fb_ud;
        pn_http_fallback_sender_get(&fb, &fb_ud);
        if (fb && !pn_curl_load(NULL)) {
            sender = fb;
            sender_ud = fb_ud;
            pn_log(PN_LOG_INFO, "libcurl (libcurl.so.4) cannot be loaded: uploads go through "
                   "the runtime's own HTTP client");
        }
    }
    if (check_opts(o, sender == NULL, e))
        return NULL;
    if (o->grpc) {
        const pn_curl_api *cu = pn_curl_load(e);   /* loaded by check_opts */
        curl_version_info_data *vi = cu ? cu->version_info(CURLVERSION_NOW) : NULL;
        if (!vi || !(vi->features & CURL_VERSION_HTTP2)) {
            pn_fail(e, PN_EINVAL, "%s grpc: the libcurl loaded (%s) has no HTTP/2 (nghttp2), "
                    "which gRPC needs; use http/protobuf (OTLP/HTTP, port 4318) instead",
                    o->protocol_setting ? o->protocol_setting : "otlp_protocol",
                    vi && vi->version ? vi->version : "?");
            return NULL;
        }
    }
    http_exporter *h = calloc(1, sizeof *h);
    if (!h) {
        pn_fail(e, PN_ENOMEM, "http exporter: out of memory");
        return NULL;
    }
    int oom = 0;
    h->sender = sender;
    h->sender_ud = sender_ud;
    h->cu = sender ? NULL : pn_curl_load(NULL);   /* loaded by check_opts */
    h->o = *o;
    h->o.server_address = dup_or_null(o->server_address, &oom);
    h->o.app_name = dup_or_null(o->app_name, &oom);
    h->o.spy_name = dup_or_null(o->spy_name, &oom);
    h->o.basic_auth_user = dup_or_null(o->basic_auth_user, &oom);
    h->o.basic_auth_password = dup_or_null(o->basic_auth_password, &oom);
    h->o.tenant_id = dup_or_null(o->tenant_id, &oom);
    h->o.tags = dup_labels(o->tags, o->ntags, &oom);
    h->o.headers = dup_labels(o->headers, o->nheaders, &oom);
    h->o.ca_file = NULL;
    h->o.raw_content_type = dup_or_null(o->raw_content_type, &oom);
    h->o.address_setting = dup_or_null(o->address_setting, &oom);
    h->o.headers_setting = dup_or_null(o->headers_setting, &oom);
    h->o.protocol_setting = NULL;
    if (!h->o.tags)
        h->o.ntags = 0;
    if (!h->o.headers)
        h->o.nheaders = 0;
    /* libcurl itself reads neither variable (only the curl tool does);
     * OpenSSL's users expect them to work. */
    const char *env_file = getenv("SSL_CERT_FILE"), *env_dir = getenv("SSL_CERT_DIR");
    if (o->ca_file)
        h->ca_file = (char *)dup_or_null(o->ca_file, &oom);
    else if (env_file && *env_file)
        h->ca_file = (char *)dup_or_null(env_file, &oom);
    if (!o->ca_file && env_dir && *env_dir)
        h->ca_dir = (char *)dup_or_null(env_dir, &oom);
    h->display = display_address(o->server_address);
    if (oom || !h->display || (h->cu && build_headers(h))) {
        http_destroy(&h->base);
        pn_fail(e, PN_ENOMEM, "http exporter: out of memory copying the options");
        return NULL;
    }
    h->base.name = "http";
    h->base.send = http_send;
    h->base.destroy = http_destroy;
    return &h->base;
}
