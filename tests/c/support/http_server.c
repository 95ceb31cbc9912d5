/* The test HTTP server (see http_server.h). */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tls.h"

#define MAX_HEAD (64 * 1024)
#define MAX_BODY (64 * 1024 * 1024)

typedef enum { REPLY_NORMAL, REPLY_RAW, REPLY_STREAM, REPLY_DRIP } reply_kind;

typedef struct {
    int status;
    char *body;                 /* RAW, STREAM (head), DRIP: these bytes as they are */
    int delay_ms;               /* DRIP: between bytes */
    size_t raw_len;             /* bytes in body, for all but NORMAL */
    reply_kind kind;
    char *chunk;                /* STREAM: repeated after body */
    size_t chunk_len;
} reply;

struct test_server {
    /* Set by start, read-only afterwards. */
    int listen_fd;
    int stop_pipe[2];           /* readable once stop begins; wakes every poll */
    int port;
    char url[64];
    pthread_t acceptor;
    test_tls *tls;              /* NULL: plain HTTP */

    pthread_mutex_t mu;
    pthread_cond_t arrived;     /* a request was recorded */
    /* Guarded by mu. */
    test_request **reqs;
    size_t nreqs, reqs_cap;
    reply *script;
    size_t nscript, script_next, script_cap;
    reply def;
    int keep_alive;
    pthread_t *conns;           /* connection threads, joined by stop */
    size_t nconns, conns_cap;   /* only the acceptor adds */
};

typedef struct {
    test_server *s;
    int fd;
    size_t conn;
} conn_arg;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "test server: out of memory\n");
        abort();
    }
    return q;
}

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d) {
        fprintf(stderr, "test server: out of memory\n");
        abort();
    }
    return d;
}

/* 1: fd readable, 0: timed out, -1: the server is stopping. */
static int wait_readable(test_server *s, int fd, int timeout_ms)
{
    struct pollfd p[2] = {{.fd = s->stop_pipe[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    for (;;) {
        int n = poll(p, fd >= 0 ? 2 : 1, timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || p[0].revents)
            return -1;
        return n == 0 ? 0 : 1;
    }
}

/* Sends all of p unless the client goes away or the server stops: -1. */
static int send_all_s(test_server *s, int fd, const char *p, size_t n)
{
    while (n > 0) {
        struct pollfd pf[2] = {{.fd = s->stop_pipe[0], .events = POLLIN}, {.fd = fd, .events = POLLOUT}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (pf[0].revents)
            return -1;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void send_all(test_server *s, int fd, const char *p, size_t n) { (void)send_all_s(s, fd, p, n); }

/* Waits ms, reading and dropping what the client sends: -1 once it has
 * closed its side or the server stops. */
static int pause_ms(test_server *s, int fd, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long end = until.tv_sec * 1000LL + until.tv_nsec / 1000000 + ms;
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long left = end - (now.tv_sec * 1000LL + now.tv_nsec / 1000000);
        if (left <= 0)
            return 0;
        int r = wait_readable(s, fd, (int)left);
        if (r < 0)
            return -1;
        char sink[4096];
        if (r == 1 && recv(fd, sink, sizeof sink, 0) <= 0)
            return -1;
    }
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

static void free_request(test_request *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->names[i]);
        free(r->values[i]);
    }
    free(r->names);
    free(r->values);
    free(r->target);
    free(r->head);
    free(r->body);
    free(r);
}

/* Parse the request line and headers of head[0..n) (ends with CRLF CRLF). */
static test_request *parse_head(char *head, size_t n, size_t *content_length, int *expect100)
{
    test_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    head[n] = '\0';
    char *save = NULL;
    char *line = strtok_r(head, "\r\n", &save);
    char target[8192];
    if (!line || sscanf(line, "%15s %8191s", r->method, target) != 2) {
        free_request(r);
        return NULL;
    }
    r->target = xstrdup(target);
    *content_length = 0;
    *expect100 = 0;
    while ((line = strtok_r(NULL, "\r\n", &save))) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t vl = strlen(v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            v[--vl] = '\0';
        r->names = xrealloc(r->names, (r->nheaders + 1) * sizeof *r->names);
        r->values = xrealloc(r->values, (r->nheaders + 1) * sizeof *r->values);
        r->names[r->nheaders] = xstrdup(line);
        r->values[r->nheaders] = xstrdup(v);
        r->nheaders++;
        if (strcasecmp(line, "Content-Length") == 0)
            *content_length = strtoull(v, NULL, 10);
        if (strcasecmp(line, "Expect") == 0 && strcasecmp(v, "100-continue") == 0)
            *expect100 = 1;
    }
    return r;
}

static void free_reply(reply *r)
{
    free(r->body);
    free(r->chunk);
}

static reply copy_reply(const reply *r)
{
    reply c = *r;
    size_t n = r->kind == REPLY_NORMAL ? strlen(r->body ? r->body : "") : r->raw_len;
    c.body = xrealloc(NULL, n + 1);
    memcpy(c.body, r->body ? r->body : "", n);
    c.body[n] = '\0';
    c.raw_len = n;
    c.chunk = NULL;
    if (r->chunk) {
        c.chunk = xrealloc(NULL, r->chunk_len);
        memcpy(c.chunk, r->chunk, r->chunk_len);
    }
    return c;
}

/* Sends rp on fd. 1: the connection may carry another request. */
static int send_reply(test_server *s, int fd, reply *rp, int keep_alive)
{
    int status = rp->status;
    if (rp->delay_ms > 0 && rp->kind != REPLY_DRIP && wait_readable(s, -1, rp->delay_ms) < 0)
        status = TEST_SERVER_HANG; /* stopping: just close */
    switch (rp->kind) {
    case REPLY_RAW:
        send_all(s, fd, rp->body, rp->raw_len);
        shutdown(fd, SHUT_WR);
        return 0;
    case REPLY_STREAM:
        if (send_all_s(s, fd, rp->body, rp->raw_len) == 0)
            while (send_all_s(s, fd, rp->chunk, rp->chunk_len) == 0)
                ;
        return 0;
    case REPLY_DRIP:
        for (size_t i = 0; i < rp->raw_len; i++)
            if (send_all_s(s, fd, rp->body + i, 1) != 0 || pause_ms(s, fd, rp->delay_ms) != 0)
                break;
        return 0;
    case REPLY_NORMAL:
        break;
    }
    if (status == TEST_SERVER_HANG) {
        /* Hold the connection until the client closes it or we stop. */
        char sink[4096];
        while (wait_readable(s, fd, -1) == 1 && recv(fd, sink, sizeof sink, 0) > 0)
            ;
        return 0;
    }
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s\r\n",
                     status, reason(status), strlen(rp->body), keep_alive ? "" : "Connection: close\r\n");
    send_all(s, fd, hdr, (size_t)n);
    send_all(s, fd, rp->body, strlen(rp->body));
    if (!keep_alive)
        shutdown(fd, SHUT_WR);
    return keep_alive;
}

/* Serves the requests that come on fd, one after another. */
static void serve(test_server *s, int fd, size_t conn)
{
    char *buf = xrealloc(NULL, MAX_HEAD + 1);
    size_t len = 0;
    test_request *r = NULL;
    for (;;) {
        size_t end;
        for (;;) {
            char *hit = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
            if (hit) {
                end = (size_t)(hit - buf) + 4;
                break;
            }
            if (len >= MAX_HEAD || wait_readable(s, fd, -1) != 1)
                goto out;
            ssize_t n = recv(fd, buf + len, MAX_HEAD - len, 0);
            if (n <= 0)
                goto out;
            len += (size_t)n;
        }
        size_t clen;
        int expect100;
        char *head = malloc(end + 1);
        if (!head)
            goto out;
        memcpy(head, buf, end);
        r = parse_head(head, end, &clen, &expect100);
        if (r) {
            memcpy(head, buf, end);
            head[end] = '\0';
            r->head = head;
            r->conn = conn;
        } else {
            free(head);
        }
        if (!r || clen > MAX_BODY)
            goto out;
        if (expect100)
            send_all(s, fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        r->body = xrealloc(NULL, clen + 1);
        size_t have = len - end < clen ? len - end : clen;
        memcpy(r->body, buf + end, have);
        /* What follows this request in buf belongs to the next one. */
        memmove(buf, buf + end + have, len - end - have);
        len -= end + have;
        while (have < clen) {
            if (wait_readable(s, fd, -1) != 1)
                goto out;
            ssize_t n = recv(fd, r->body + have, clen - have, 0);
            if (n <= 0)
                goto out;
            have += (size_t)n;
        }
        r->body[clen] = '\0';
        r->body_len = clen;

        pthread_mutex_lock(&s->mu);
        reply rp = copy_reply(s->script_next < s->nscript ? &s->script[s->script_next++] : &s->def);
        int keep_alive = s->keep_alive;
        if (s->nreqs == s->reqs_cap) {
            s->reqs_cap = s->reqs_cap ? 2 * s->reqs_cap : 16;
            s->reqs = xrealloc(s->reqs, s->reqs_cap * sizeof *s->reqs);
        }
        s->reqs[s->nreqs++] = r;
        r = NULL;
        pthread_cond_broadcast(&s->arrived);
        pthread_mutex_unlock(&s->mu);

        int again = send_reply(s, fd, &rp, keep_alive);
        free_reply(&rp);
        if (!again)
            break;
    }
out:
    free_request(r);
    free(buf);
}

static void *conn_main(void *arg)
{
    conn_arg a = *(conn_arg *)arg;
    free(arg);
    serve(a.s, a.fd, a.conn);
    close(a.fd);
    return NULL;
}

typedef struct {
    test_server *s;
    int tcp, plain;
} tls_arg;

static void *tls_main(void *arg)
{
    tls_arg a = *(tls_arg *)arg;
    free(arg);
    test_tls_pump(a.s->tls, a.tcp, a.plain, a.s->stop_pipe[0]);
    close(a.tcp);
    close(a.plain);
    return NULL;
}

static void add_thread(test_server *s, pthread_t t)
{
    pthread_mutex_lock(&s->mu);
    if (s->nconns == s->conns_cap) {
        s->conns_cap = s->conns_cap ? 2 * s->conns_cap : 16;
        s->conns = xrealloc(s->conns, s->conns_cap * sizeof *s->conns);
    }
    s->conns[s->nconns++] = t;
    pthread_mutex_unlock(&s->mu);
}

/* A TLS connection: a pump thread between the TLS socket and one end of
 * a socket pair, and the usual HTTP handling on the other end. */
static int start_tls_conn(test_server *s, int fd, size_t conn)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
        return -1;
    tls_arg *ta = xrealloc(NULL, sizeof *ta);
    *ta = (tls_arg){s, fd, sp[0]};
    conn_arg *ca = xrealloc(NULL, sizeof *ca);
    *ca = (conn_arg){s, sp[1], conn};
    pthread_t t1, t2;
    if (pthread_create(&t1, NULL, tls_main, ta) != 0) {
        free(ta);
        free(ca);
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    add_thread(s, t1);
    if (pthread_create(&t2, NULL, conn_main, ca) != 0) {
        free(ca);
        shutdown(sp[1], SHUT_RDWR);
        close(sp[1]);
        return 0; /* the pump sees the pair closed and ends */
    }
    add_thread(s, t2);
    return 0;
}

static void *accept_main(void *arg)
{
    test_server *s = arg;
    size_t conn = 0;
    while (wait_readable(s, s->listen_fd, -1) == 1) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (s->tls) {
            if (start_tls_conn(s, fd, conn++) != 0) {
                fprintf(stderr, "test server: cannot start a TLS connection\n");
                close(fd);
            }
            continue;
        }
        conn_arg *a = xrealloc(NULL, sizeof *a);
        *a = (conn_arg){s, fd, conn++};
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, a) != 0) {
            fprintf(stderr, "test server: cannot start a connection thread\n");
            free(a);
            close(fd);
            continue;
        }
        add_thread(s, t);
    }
    return NULL;
}

static test_server *start_at(const char *ip, int quiet, test_tls *tls);

test_server *test_server_start(void) { return start_at("127.0.0.1", 0, NULL); }

test_server *test_server_start_at(const char *ip) { return start_at(ip, 1, NULL); }

test_server *test_server_start_tls(void)
{
    test_tls *tls = test_tls_new();
    if (!tls) {
        fprintf(stderr, "test server: cannot set up TLS\n");
        return NULL;
    }
    test_server *s = start_at("127.0.0.1", 0, tls);
    if (!s)
        test_tls_free(tls);
    return s;
}

const char *test_server_ca_file(const test_server *s) { return s->tls ? test_tls_ca_file(s->tls) : NULL; }

static test_server *start_at(const char *ip, int quiet, test_tls *tls)
{
    /* A proxy from the environment must not swallow loopback requests. */
    setenv("no_proxy", "127.0.0.1,localhost", 1);
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);

    test_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->def.status = 200;
    s->def.body = xstrdup("ok");
    struct sockaddr_storage a;
    memset(&a, 0, sizeof a);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
    int v6 = strchr(ip, ':') != NULL;
    socklen_t alen = v6 ? sizeof *a6 : sizeof *a4;
    int ok = v6 ? inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1 : inet_pton(AF_INET, ip, &a4->sin_addr) == 1;
    a.ss_family = v6 ? AF_INET6 : AF_INET;
    s->listen_fd = ok ? socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&a, alen) != 0 ||
        listen(s->listen_fd, 64) != 0 || getsockname(s->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
        pipe2(s->stop_pipe, O_CLOEXEC) != 0) {
        if (!quiet)
            fprintf(stderr, "test server: cannot listen on %s: %s\n", ip, strerror(errno));
        if (s->listen_fd >= 0)
            close(s->listen_fd);
        free(s->def.body);
        free(s);
        return NULL;
    }
    s->port = ntohs(v6 ? a6->sin6_port : a4->sin_port);
    s->tls = tls;
    const char *scheme = tls ? "https" : "http";
    if (v6)
        snprintf(s->url, sizeof s->url, "%s://[%s]:%d", scheme, ip, s->port);
    else
        snprintf(s->url, sizeof s->url, "%s://%s:%d", scheme, ip, s->port);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->arrived, NULL);
    if (pthread_create(&s->acceptor, NULL, accept_main, s) != 0) {
        fprintf(stderr, "test server: cannot start the accept thread\n");
        close(s->listen_fd);
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
        free(s->def.body);
        free(s);
        return NULL;
    }
    return s;
}

void test_server_stop(test_server *s)
{
    if (!s)
        return;
    if (write(s->stop_pipe[1], "x", 1) != 1)
        fprintf(stderr, "test server: cannot signal stop\n");
    pthread_join(s->acceptor, NULL);
    /* The acceptor is gone, so the list no longer grows. */
    for (size_t i = 0; i < s->nconns; i++)
        pthread_join(s->conns[i], NULL);
    close(s->listen_fd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    for (size_t i = 0; i < s->nreqs; i++)
        free_request(s->reqs[i]);
    for (size_t i = 0; i < s->nscript; i++)
        free_reply(&s->script[i]);
    free(s->script);
    free_reply(&s->def);
    free(s->reqs);
    test_tls_free(s->tls);
    free(s->conns);
    pthread_cond_destroy(&s->arrived);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int test_server_port(const test_server *s) { return s->port; }

const char *test_server_url(const test_server *s) { return s->url; }

static void queue_reply(test_server *s, reply r)
{
    pthread_mutex_lock(&s->mu);
    if (s->nscript == s->script_cap) {
        s->script_cap = s->script_cap ? 2 * s->script_cap : 8;
        s->script = xrealloc(s->script, s->script_cap * sizeof *s->script);
    }
    s->script[s->nscript++] = r;
    pthread_mutex_unlock(&s->mu);
}

static char *xmemdup(const char *p, size_t n)
{
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

void test_server_reply(test_server *s, int status, const char *body, int delay_ms)
{
    queue_reply(s, (reply){.status = status, .body = xstrdup(body), .delay_ms = delay_ms});
}

void test_server_reply_raw(test_server *s, const char *bytes, size_t len)
{
    queue_reply(s, (reply){.status = 200, .body = xmemdup(bytes, len), .raw_len = len, .kind = REPLY_RAW});
}

void test_server_reply_stream(test_server *s, const char *head, size_t head_len, const char *chunk,
                              size_t chunk_len)
{
    queue_reply(s, (reply){.status = 200, .body = xmemdup(head, head_len), .raw_len = head_len,
                           .kind = REPLY_STREAM, .chunk = xmemdup(chunk, chunk_len), .chunk_len = chunk_len});
}

void test_server_reply_drip(test_server *s, const char *bytes, size_t len, int interval_ms)
{
    queue_reply(s, (reply){.status = 200, .body = xmemdup(bytes, len), .raw_len = len, .kind = REPLY_DRIP,
                           .delay_ms = interval_ms});
}

void test_server_keep_alive(test_server *s, int on)
{
    pthread_mutex_lock(&s->mu);
    s->keep_alive = on;
    pthread_mutex_unlock(&s->mu);
}

void test_server_default_reply(test_server *s, int status, const char *body, int delay_ms)
{
    pthread_mutex_lock(&s->mu);
    free_reply(&s->def);
    s->def = (reply){.status = status, .body = xstrdup(body), .delay_ms = delay_ms};
    pthread_mutex_unlock(&s->mu);
}

size_t test_server_count(test_server *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t test_server_wait(test_server *s, size_t n, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(timeout_s * 1e9);
    until.tv_sec += ns / 1000000000LL;
    until.tv_nsec = ns % 1000000000LL;
    pthread_mutex_lock(&s->mu);
    while (s->nreqs < n)
        if (pthread_cond_timedwait(&s->arrived, &s->mu, &until) == ETIMEDOUT)
            break;
    size_t got = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return got;
}

const test_request *test_server_request(test_server *s, size_t i)
{
    pthread_mutex_lock(&s->mu);
    const test_request *r = i < s->nreqs ? s->reqs[i] : NULL;
    pthread_mutex_unlock(&s->mu);
    return r;
}

const char *test_request_header(const test_request *r, const char *name)
{
    for (size_t i = 0; r && i < r->nheaders; i++)
        if (strcasecmp(r->names[i], name) == 0)
            return r->values[i];
    return NULL;
}

int test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}
