/* The built-in HTTP/1.1 client: one POST over a plain TCP socket, one reply
 * read back (see http_client.h). It exists so that http:// uploads need no
 * libcurl: loading libcurl and its dependencies costs every process
 * several MiB of RSS.
 *
 * One connection per request ("Connection: close"). Every wait is a poll()
 * of at most STEP_NS, so the stop callback and the deadlines are seen
 * promptly; host names are resolved on a short-lived helper thread for the
 * same reason (getaddrinfo cannot be interrupted).
 */
#include "export/http_client.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/clock.h"
#include "support/threads.h"

#define STEP_NS (50 * 1000000LL)    /* longest wait between stop checks */
#define MAX_LINE 8192               /* status or header line */
#define MAX_HEAD (64 * 1024)        /* all reply header lines together */
#define MAX_CHUNK_LINE 1024
#define BUF_SIZE 16384              /* must exceed MAX_LINE */

typedef struct {
    int fd;
    const pn_http_request *rq;
    pn_http_reply *rp;
    pn_error *e;
    int64_t start_ns;
    int64_t connect_deadline, deadline;     /* CLOCK_MONOTONIC ns; connect <= whole */
    const char *what;           /* what we are doing, for messages */
    char what_buf[320];
    char buf[BUF_SIZE];         /* received bytes; unread ones are [pos, len) */
    size_t pos, len;
} conn;

/* Records why the request failed; returns -1. */
#define FAIL(c, kind, code, ...) ((c)->rp->failure = (kind), pn_fail((c)->e, (code), __VA_ARGS__))

/* Copy of s for a message: control and non-ASCII bytes become '?'. */
static const char *printable(const char *s, char *out, size_t n)
{
    size_t j = 0;
    for (; s && *s && j + 1 < n; s++)
        out[j++] = ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) ? '?' : *s;
    out[j] = '\0';
    return out;
}

/* ---------------------------------------------------------------- URL */

int pn_http_url_parse(const char *url, pn_http_url *out, pn_error *e)
{
    if (!url || !out)
        return pn_fail(e, PN_EINVAL, "no URL given");
    memset(out, 0, sizeof *out);
    const char *p;
    if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        p = url + 8;
        out->https = 1;
    } else {
        return pn_fail(e, PN_EINVAL, "must start with http:// or https://");
    }
    for (const char *s = url; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f || *s == '#')
            return pn_fail(e, PN_EINVAL, "must not contain spaces, control characters or '#'");

    size_t alen = strcspn(p, "/?");
    const char *auth = p, *aend = p + alen;
    out->target = aend;
    const char *at = memrchr(auth, '@', alen);
    if (at) {
        out->userinfo = auth;
        out->userinfo_len = (size_t)(at - auth);
        auth = at + 1;
    }
    const char *hb, *he, *port = NULL, *shown_end;
    if (*auth == '[') {
        const char *close = memchr(auth, ']', (size_t)(aend - auth));
        if (!close)
            return pn_fail(e, PN_EINVAL, "the IPv6 address after '[' has no closing ']'");
        hb = auth + 1;
        he = close;
        shown_end = close + 1;
        if (close + 1 < aend) {
            if (close[1] != ':')
                return pn_fail(e, PN_EINVAL, "only ':port' may follow the ']' of an IPv6 address");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(auth, ':', (size_t)(aend - auth));
        hb = auth;
        he = colon ? colon : aend;
        shown_end = he;
        if (colon)
            port = colon + 1;
    }
    if (he == hb)
        return pn_fail(e, PN_EINVAL, "has no host");
    if ((size_t)(he - hb) >= sizeof out->host)
        return pn_fail(e, PN_EINVAL, "the host is longer than %zu bytes", sizeof out->host - 1);
    memcpy(out->host, hb, (size_t)(he - hb));

    long def = out->https ? 443 : 80, num = def;
    if (port && port < aend) {
        size_t n = (size_t)(aend - port);
        num = 0;
        for (size_t i = 0; i < n && num <= 65535; i++) {
            if (port[i] < '0' || port[i] > '9') {
                num = -1;
                break;
            }
            num = num * 10 + (port[i] - '0');
        }
        if (num < 1 || num > 65535)
            return pn_fail(e, PN_EINVAL, "port '%.*s' must be a number from 1 to 65535",
                           (int)(n > 12 ? 12 : n), port);
    }
    snprintf(out->port, sizeof out->port, "%ld", num);
    int w = num == def ? snprintf(out->authority, sizeof out->authority, "%.*s", (int)(shown_end - auth), auth)
                       : snprintf(out->authority, sizeof out->authority, "%.*s:%ld",
                                  (int)(shown_end - auth), auth, num);
    if (w < 0 || (size_t)w >= sizeof out->authority)
        return pn_fail(e, PN_EINVAL, "the host is too long");
    return 0;
}

int pn_http_header_check(const char *name, const char *value, pn_error *e)
{
    char shown[80];
    if (!name || !*name)
        return pn_fail(e, PN_EINVAL, "header with an empty name");
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        if (*s <= ' ' || *s >= 0x7f || *s == ':')
            return pn_fail(e, PN_EINVAL,
                           "header '%s': the name must not contain ':', spaces, control or non-ASCII characters",
                           printable(name, shown, sizeof shown));
    if (!value)
        return pn_fail(e, PN_EINVAL, "header '%s': has no value", name);
    for (const unsigned char *s = (const unsigned char *)value; *s; s++) {
        if (*s == '\r' || *s == '\n')
            return pn_fail(e, PN_EINVAL,
                           "header '%s': the value contains CR or LF, which would inject headers into the request",
                           name);
        if ((*s < 0x20 && *s != '\t') || *s == 0x7f)
            return pn_fail(e, PN_EINVAL, "header '%s': the value contains a control character", name);
    }
    return 0;
}

/* ------------------------------------------------------------ waiting */

static int stop_asked(const conn *c) { return c->rq->stop && c->rq->stop(c->rq->stop_ud); }

static int fail_timeout(conn *c, int64_t deadline)
{
    double s = (double)(deadline - c->start_ns) / 1e9;
    if (deadline == c->connect_deadline && deadline < c->deadline)
        return FAIL(c, PN_HTTP_FAIL_TIMEOUT, PN_EIO, "%s: not done within the %.2f s connect timeout",
                    c->what, s);
    return FAIL(c, PN_HTTP_FAIL_TIMEOUT, PN_EIO, "%s: no complete reply within %.2f s", c->what, s);
}

/* Stop asked or deadline passed: records it and returns -1; else 0. */
static int check_time(conn *c, int64_t deadline)
{
    if (stop_asked(c))
        return FAIL(c, PN_HTTP_FAIL_STOPPED, PN_EIO, "%s: stopped", c->what);
    if (pn_clock_ns(CLOCK_MONOTONIC) >= deadline)
        return fail_timeout(c, deadline);
    return 0;
}

/* Waits for `events` on fd until `deadline`, asking the stop callback every
 * STEP_NS. 1: ready (*got = revents); 0: the deadline came (nothing
 * recorded: the caller knows what it means); -1: stopped or poll failed
 * (recorded). */
static int wait_fd(conn *c, int fd, short events, int64_t deadline, short *got)
{
    for (;;) {
        if (stop_asked(c))
            return FAIL(c, PN_HTTP_FAIL_STOPPED, PN_EIO, "%s: stopped", c->what);
        int64_t left = deadline - pn_clock_ns(CLOCK_MONOTONIC);
        if (left <= 0)
            return 0;
        if (left > STEP_NS)
            left = STEP_NS;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (n < 0 && errno != EINTR)
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: poll failed: %s", c->what, strerror(errno));
        if (n > 0) {
            *got = p.revents;
            return 1;
        }
    }
}

/* ------------------------------------------------------------ resolve */

/* One getaddrinfo() on a helper thread. Shared by the waiting caller and
 * the helper, guarded by mu; whichever lets go last frees it (the caller
 * may give up first, on stop or timeout). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int done, rc, err;
    struct addrinfo *res;
    char host[256], port[6];
} resolve_job;

static void job_release(resolve_job *j)
{
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    if (j->res)
        freeaddrinfo(j->res);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *resolve_main(void *arg)
{
    resolve_job *j = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(j->host, j->port, &hints, &res);
    int err = errno;
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->err = err;
    j->res = rc == 0 ? res : NULL;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    return NULL;
}

static int resolve_failed(conn *c, const pn_http_url *u, int rc, int err)
{
    char shown[80];
    printable(u->host, shown, sizeof shown);
    if (rc == EAI_SYSTEM)
        return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "cannot resolve host '%s': %s", shown, strerror(err));
    return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "cannot resolve host '%s': %s", shown, gai_strerror(rc));
}

static int resolve(conn *c, const pn_http_url *u, struct addrinfo **out)
{
    /* An address needs no lookup and cannot block. */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    int rc = getaddrinfo(u->host, u->port, &hints, out);
    if (rc == 0)
        return 0;
    if (rc != EAI_NONAME)
        return resolve_failed(c, u, rc, errno);

    resolve_job *j = calloc(1, sizeof *j);
    if (!j)
        return FAIL(c, PN_HTTP_FAIL_NOMEM, PN_ENOMEM, "out of memory resolving a host name");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->refs = 2;
    snprintf(j->host, sizeof j->host, "%s", u->host);
    snprintf(j->port, sizeof j->port, "%s", u->port);
    pthread_t t;
    int trc = pn_thread_spawn(&t, resolve_main, j, "pyroscope-dns");
    if (trc) {
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
        free(j);
        return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "cannot start a thread to resolve '%s': %s", u->host,
                    strerror(trc));
    }
    pthread_detach(t);

    snprintf(c->what_buf, sizeof c->what_buf, "resolving '%s'", u->host);
    c->what = c->what_buf;
    int64_t deadline = c->connect_deadline;
    int outcome = 0;            /* 1 done, -1 stopped, -2 timed out */
    pthread_mutex_lock(&j->mu);
    while (!outcome) {
        if (j->done) {
            outcome = 1;
            break;
        }
        if (stop_asked(c)) {
            outcome = -1;
            break;
        }
        int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
        if (now >= deadline) {
            outcome = -2;
            break;
        }
        struct timespec ts = pn_timespec(now + STEP_NS < deadline ? now + STEP_NS : deadline);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    rc = j->rc;
    int err = j->err;
    *out = j->res;
    j->res = NULL;              /* ours now */
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    if (outcome == -1)
        return FAIL(c, PN_HTTP_FAIL_STOPPED, PN_EIO, "%s: stopped", c->what);
    if (outcome == -2)
        return fail_timeout(c, deadline);
    if (rc != 0)
        return resolve_failed(c, u, rc, err);
    if (!*out)
        return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "cannot resolve host '%s': no addresses", u->host);
    return 0;
}

/* ------------------------------------------------------------ connect */

/* Tries each address in turn. Several addresses share the connect budget
 * (each gets an equal part of what is left, the last all of it), so one
 * that never answers cannot use it all. */
static int connect_any(conn *c, const pn_http_url *u, const struct addrinfo *list)
{
    int count = 0;
    for (const struct addrinfo *ai = list; ai; ai = ai->ai_next)
        count++;
    int64_t deadline = c->connect_deadline;
    char last[200] = "no address to try";
    int left = count;
    for (const struct addrinfo *ai = list; ai; ai = ai->ai_next, left--) {
        char addr[80];
        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof addr, NULL, 0, NI_NUMERICHOST) != 0)
            snprintf(addr, sizeof addr, "an address of '%.40s'", u->host);
        snprintf(c->what_buf, sizeof c->what_buf, "connecting to %s port %s", addr, u->port);
        c->what = c->what_buf;
        if (check_time(c, deadline))
            return -1;
        int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
        int64_t until = left > 1 ? now + (deadline - now) / left : deadline;

        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            snprintf(last, sizeof last, "%s: %s", c->what, strerror(errno));
            continue;
        }
        int err = 0;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
            err = errno;
        if (err == EINPROGRESS || err == EINTR) {
            short got = 0;
            int r = wait_fd(c, fd, POLLOUT, until, &got);
            if (r < 0) {
                close(fd);
                return -1;
            }
            if (r == 0) {
                close(fd);
                if (until >= deadline)
                    return fail_timeout(c, deadline);
                snprintf(last, sizeof last, "%s: timed out", c->what);
                continue;
            }
            socklen_t len = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno;
        }
        if (err == 0) {
            int one = 1;
            /* The head and the body go out in separate segments: no Nagle
             * delay between them. */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            c->fd = fd;
            return 0;
        }
        snprintf(last, sizeof last, "%s: %s", c->what, strerror(err));
        close(fd);
    }
    if (count > 1)
        return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s (the last of %d addresses of '%s')", last, count,
                    u->host);
    return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s", last);
}

/* ------------------------------------------------------------ request */

static const char HEX[] = "0123456789ABCDEF";

/* The request head; NULL when out of memory. */
static char *build_head(const pn_http_request *rq, const pn_http_url *u, size_t body_len, size_t *out_len)
{
    int has_host = 0, has_connection = 0;
    size_t cap = 128 + 3 * strlen(u->target) + strlen(u->authority);
    for (size_t i = 0; i < rq->nheaders; i++) {
        cap += strlen(rq->headers[i].key) + strlen(rq->headers[i].value) + 4;
        if (strcasecmp(rq->headers[i].key, "Host") == 0)
            has_host = 1;
        if (strcasecmp(rq->headers[i].key, "Connection") == 0)
            has_connection = 1;
    }
    char *h = malloc(cap);
    if (!h)
        return NULL;
    size_t n = 0;
    memcpy(h, "POST ", 5);
    n = 5;
    if (u->target[0] != '/')
        h[n++] = '/';
    /* The URL was checked for spaces and control characters; bytes above
     * ASCII are escaped as a browser would. */
    for (const unsigned char *s = (const unsigned char *)u->target; *s; s++) {
        if (*s >= 0x80) {
            h[n++] = '%';
            h[n++] = HEX[*s >> 4];
            h[n++] = HEX[*s & 15];
        } else {
            h[n++] = (char)*s;
        }
    }
    n += (size_t)sprintf(h + n, " HTTP/1.1\r\n");
    if (!has_host)
        n += (size_t)sprintf(h + n, "Host: %s\r\n", u->authority);
    for (size_t i = 0; i < rq->nheaders; i++)
        n += (size_t)sprintf(h + n, "%s: %s\r\n", rq->headers[i].key, rq->headers[i].value);
    n += (size_t)sprintf(h + n, "Content-Length: %zu\r\n", body_len);
    /* Either way we read one reply and close. */
    n += (size_t)sprintf(h + n, "%s\r\n", has_connection ? "" : "Connection: close\r\n");
    *out_len = n;
    return h;
}

/* 0: all sent; 1: the server answered (or closed) before taking it all;
 * -2: send failed with *err; -1: stopped or timed out (recorded). */
static int send_all(conn *c, struct iovec *iov, size_t n, int *err)
{
    c->what = "sending the request";
    size_t i = 0;
    while (i < n) {
        if (iov[i].iov_len == 0) {
            i++;
            continue;
        }
        if (check_time(c, c->deadline))
            return -1;
        struct msghdr m = {.msg_iov = iov + i, .msg_iovlen = n - i};
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            short got = 0;
            int r = wait_fd(c, c->fd, POLLOUT | POLLIN, c->deadline, &got);
            if (r < 0)
                return -1;
            if (r == 0)
                return fail_timeout(c, c->deadline);
            if (got & POLLIN)
                return 1;
            continue;
        }
        if (w < 0) {
            *err = errno;
            return -2;
        }
        size_t done = (size_t)w;
        while (i < n && done >= iov[i].iov_len) {
            done -= iov[i].iov_len;
            i++;
        }
        if (i < n) {
            iov[i].iov_base = (char *)iov[i].iov_base + done;
            iov[i].iov_len -= done;
        }
    }
    return 0;
}

/* -------------------------------------------------------------- reply */

/* Reads more bytes after the unread ones. 1: got some; 0: the server
 * closed; -1: failed (recorded). */
static int fill(conn *c)
{
    if (c->pos > 0) {
        memmove(c->buf, c->buf + c->pos, c->len - c->pos);
        c->len -= c->pos;
        c->pos = 0;
    }
    if (c->len == sizeof c->buf)
        return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: a line of the reply is too long", c->what);
    for (;;) {
        if (check_time(c, c->deadline))
            return -1;
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n > 0) {
            c->len += (size_t)n;
            return 1;
        }
        if (n == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: %s", c->what, strerror(errno));
        short got = 0;
        int r = wait_fd(c, c->fd, POLLIN, c->deadline, &got);
        if (r < 0)
            return -1;
        if (r == 0)
            return fail_timeout(c, c->deadline);
    }
}

/* The next line, CR LF cut off, NUL-terminated in place (valid until the
 * next read). 1: *out set; 0: the server closed before the line began;
 * -1: failed (recorded). */
static int read_line(conn *c, char **out, size_t max)
{
    size_t scanned = 0;
    for (;;) {
        char *start = c->buf + c->pos;
        char *nl = memchr(start + scanned, '\n', c->len - c->pos - scanned);
        if (nl) {
            size_t n = (size_t)(nl - start);
            c->pos += n + 1;
            if (n > 0 && start[n - 1] == '\r')
                n--;
            start[n] = '\0';
            *out = start;
            return 1;
        }
        scanned = c->len - c->pos;
        if (scanned > max)
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: a line is longer than %zu bytes", c->what, max);
        int r = fill(c);
        if (r <= 0) {
            if (r == 0 && c->len == c->pos)
                return 0;
            if (r == 0)
                return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: the server closed the connection mid-line",
                            c->what);
            return -1;
        }
    }
}

static void keep(conn *c, const char *p, size_t n)
{
    pn_http_reply *rp = c->rp;
    size_t room = PN_HTTP_REPLY_KEEP - rp->body_len;
    if (n > room)
        n = room;
    memcpy(rp->body + rp->body_len, p, n);
    rp->body_len += n;
    rp->body[rp->body_len] = '\0';
}

static int read_exact(conn *c, uint64_t n)
{
    while (n > 0) {
        if (c->pos == c->len) {
            int r = fill(c);
            if (r < 0)
                return -1;
            if (r == 0)
                return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO,
                            "%s: the server closed the connection with %llu bytes of the body still to come",
                            c->what, (unsigned long long)n);
        }
        size_t take = c->len - c->pos;
        if (take > n)
            take = (size_t)n;
        keep(c, c->buf + c->pos, take);
        c->pos += take;
        n -= take;
    }
    return 0;
}

static int read_to_eof(conn *c)
{
    for (;;) {
        keep(c, c->buf + c->pos, c->len - c->pos);
        c->pos = c->len;
        int r = fill(c);
        if (r <= 0)
            return r;
    }
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int read_chunked(conn *c)
{
    char shown[48];
    for (;;) {
        char *line;
        int r = read_line(c, &line, MAX_CHUNK_LINE);
        if (r == 0)
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO,
                        "%s: the server closed the connection in the middle of the chunked body", c->what);
        if (r < 0)
            return -1;
        uint64_t size = 0;
        int digits = 0;
        const char *p = line;
        for (int v; (v = hexval(*p)) >= 0; p++, digits++) {
            if (size >> 60)
                return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: chunk size '%s' is too large", c->what,
                            printable(line, shown, sizeof shown));
            size = size * 16 + (uint64_t)v;
        }
        if (!digits || (*p && *p != ';' && *p != ' ' && *p != '\t'))
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: malformed chunk size line '%s'", c->what,
                        printable(line, shown, sizeof shown));
        if (size == 0) {
            /* Trailer fields up to an empty line. A server that closes
             * right after the last chunk has still sent the whole body. */
            while ((r = read_line(c, &line, MAX_LINE)) == 1 && *line)
                ;
            return r < 0 ? -1 : 0;
        }
        if (read_exact(c, size))
            return -1;
        r = read_line(c, &line, MAX_CHUNK_LINE);
        if (r < 0)
            return -1;
        if (r == 0 || *line)
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: a chunk is not followed by CR LF", c->what);
    }
}

/* "chunked" is the last transfer coding listed. */
static int chunked_last(const char *v)
{
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n < 7 || strncasecmp(v + n - 7, "chunked", 7) != 0)
        return 0;
    return n == 7 || v[n - 8] == ' ' || v[n - 8] == ',' || v[n - 8] == '\t';
}

static int read_reply(conn *c)
{
    char shown[80];
    int64_t content_length;
    int chunked, status;
    c->what = "waiting for the reply";
    for (;;) {
        char *line;
        int r = read_line(c, &line, MAX_LINE);
        if (r == 0)
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "the server closed the connection without replying");
        if (r < 0)
            return -1;
        c->what = "reading the reply headers";
        /* "HTTP/1.1 200 OK": version, a 3-digit status, an optional reason. */
        const char *sp = strchr(line, ' ');
        if (strncmp(line, "HTTP/", 5) != 0 || !sp || !(sp[1] >= '1' && sp[1] <= '5') || !is_digit(sp[2]) ||
            !is_digit(sp[3]) || (sp[4] && sp[4] != ' '))
            return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "malformed reply status line '%s'",
                        printable(line, shown, sizeof shown));
        status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');

        content_length = -1;
        chunked = 0;
        size_t head = 0;
        for (;;) {
            r = read_line(c, &line, MAX_LINE);
            if (r == 0)
                return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO,
                            "%s: the server closed the connection in the middle of the headers", c->what);
            if (r < 0)
                return -1;
            if (!*line)
                break;
            head += strlen(line) + 2;
            if (head > MAX_HEAD)
                return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: more than %d bytes of headers", c->what,
                            MAX_HEAD);
            char *colon = strchr(line, ':');
            if (!colon)
                continue;       /* not a field; nothing we need */
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (strcasecmp(line, "Content-Length") == 0) {
                int64_t n = 0;
                const char *d = v;
                for (; *d >= '0' && *d <= '9' && n < (INT64_MAX - 9) / 10; d++)
                    n = n * 10 + (*d - '0');
                while (*d == ' ' || *d == '\t')
                    d++;
                if (d == v || *d || (content_length >= 0 && content_length != n))
                    return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "%s: bad or conflicting Content-Length '%s'",
                                c->what, printable(v, shown, sizeof shown));
                content_length = n;
            } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
                chunked = chunked_last(v);
            }
        }
        /* 1xx answers are interim ("100 Continue"); the real one follows.
         * 101 would switch protocols, which we never asked for. */
        if (status >= 200 || status == 101)
            break;
        c->what = "waiting for the reply";
    }
    if (status == 101)
        return FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "the server answered 101 Switching Protocols to a POST");
    c->rp->status = status;
    c->what = "reading the reply body";
    if (status == 204 || status == 304)
        return 0;
    if (chunked)
        return read_chunked(c);
    if (content_length >= 0)
        return read_exact(c, (uint64_t)content_length);
    return read_to_eof(c);
}

/* --------------------------------------------------------------- post */

int pn_http_post(const pn_http_request *rq, pn_http_reply *rp, pn_error *e)
{
    if (!rp)
        return pn_fail(e, PN_EINVAL, "HTTP request: no reply to fill");
    memset(rp, 0, sizeof *rp);
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        rp->failure = PN_HTTP_FAIL_NOMEM;
        return pn_fail(e, PN_ENOMEM, "HTTP request: out of memory");
    }
    c->fd = -1;
    c->rq = rq;
    c->rp = rp;
    c->e = e;
    c->start_ns = pn_clock_ns(CLOCK_MONOTONIC);
    c->what = "preparing the request";

    int rc = -1;
    char *head = NULL;
    struct iovec *iov = NULL;
    struct addrinfo *addrs = NULL;
    pn_http_url u;
    if (!rq || !rq->url || (rq->nheaders && !rq->headers) || (rq->nbody && !rq->body)) {
        FAIL(c, PN_HTTP_FAIL_PERMANENT, PN_EINVAL, "HTTP request: URL, headers or body missing");
        goto out;
    }
    c->deadline = rq->deadline_ns;
    c->connect_deadline = rq->connect_deadline_ns < rq->deadline_ns ? rq->connect_deadline_ns : rq->deadline_ns;
    if (pn_http_url_parse(rq->url, &u, e)) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e ? e->msg : "");
        FAIL(c, PN_HTTP_FAIL_PERMANENT, PN_EINVAL, "URL: %s", why);
        goto out;
    }
    if (u.https) {
        FAIL(c, PN_HTTP_FAIL_PERMANENT, PN_EINVAL, "the built-in HTTP client speaks plain http:// only");
        goto out;
    }
    for (size_t i = 0; i < rq->nheaders; i++) {
        if (pn_http_header_check(rq->headers[i].key, rq->headers[i].value, e)) {
            rp->failure = PN_HTTP_FAIL_PERMANENT;
            goto out;
        }
        if (strcasecmp(rq->headers[i].key, "Content-Length") == 0 ||
            strcasecmp(rq->headers[i].key, "Transfer-Encoding") == 0) {
            FAIL(c, PN_HTTP_FAIL_PERMANENT, PN_EINVAL, "header '%s': is set by the HTTP client itself",
                 rq->headers[i].key);
            goto out;
        }
    }
    size_t body_len = 0;
    for (size_t i = 0; i < rq->nbody; i++) {
        if ((!rq->body[i].iov_base && rq->body[i].iov_len) || body_len + rq->body[i].iov_len < body_len) {
            FAIL(c, PN_HTTP_FAIL_PERMANENT, PN_EINVAL, "HTTP request: body piece %zu is invalid", i);
            goto out;
        }
        body_len += rq->body[i].iov_len;
    }
    size_t head_len = 0;
    head = build_head(rq, &u, body_len, &head_len);
    iov = malloc((rq->nbody + 1) * sizeof *iov);
    if (!head || !iov) {
        FAIL(c, PN_HTTP_FAIL_NOMEM, PN_ENOMEM, "HTTP request: out of memory for the request head");
        goto out;
    }
    iov[0] = (struct iovec){head, head_len};
    if (rq->nbody)
        memcpy(iov + 1, rq->body, rq->nbody * sizeof *iov);

    if (resolve(c, &u, &addrs) || connect_any(c, &u, addrs))
        goto out;
    int send_err = 0;
    int sent = send_all(c, iov, rq->nbody + 1, &send_err);
    if (sent == -1)
        goto out;
    if (sent == -2) {
        /* The server may have answered (e.g. 413) and closed before taking
         * the whole body: its answer says more than "broken pipe". */
        pn_error ignored;
        c->e = &ignored;
        if (read_reply(c) == 0) {
            rp->failure = PN_HTTP_FAIL_NONE;
            rc = 0;
        } else {
            c->e = e;
            FAIL(c, PN_HTTP_FAIL_NET, PN_EIO, "sending the request failed: %s", strerror(send_err));
        }
        goto out;
    }
    rc = read_reply(c);

out:
    if (c->fd >= 0)
        close(c->fd);
    if (addrs)
        freeaddrinfo(addrs);
    free(iov);
    free(head);
    free(c);
    return rc;
}
