/* The test forward proxy (see http_proxy.h). */
#include "http_proxy.h"

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
#include <unistd.h>

#include "net.h"

#define MAX_HEAD (64 * 1024)

struct test_proxy {
    /* Set by start, read-only afterwards. */
    int listen_fd;
    int stop_pipe[2];           /* readable once stop begins */
    char url[64];
    pthread_t acceptor;

    pthread_mutex_t mu;
    /* Guarded by mu. */
    char **lines;
    size_t nlines, lines_cap;
    pthread_t *conns;           /* only the acceptor adds */
    size_t nconns, conns_cap;
};

typedef struct {
    test_proxy *p;
    int fd;
} conn_arg;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "test proxy: out of memory\n");
        abort();
    }
    return q;
}

/* 1: some fd of fds[1..n) is ready (revents set), -1: stopping. */
static int wait_any(test_proxy *p, struct pollfd *fds, nfds_t n)
{
    fds[0] = (struct pollfd){.fd = p->stop_pipe[0], .events = POLLIN};
    for (;;) {
        int r = poll(fds, n, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || fds[0].revents)
            return -1;
        return 1;
    }
}

/* Connects to a loopback host:port; -1 for anything else. */
static int connect_loopback(const char *host, const char *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (strcmp(host, "127.0.0.1") != 0 && strcasecmp(host, "localhost") != 0)
        return -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long pn = strtol(port, NULL, 10);
    if (pn <= 0 || pn > 65535)
        return -1;
    a.sin_port = htons((uint16_t)pn);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Copies both ways until both sides have closed (or one fails). */
static void relay(test_proxy *p, int a, int b)
{
    int open_a = 1, open_b = 1;
    char buf[16384];
    while (open_a || open_b) {
        struct pollfd f[3];
        f[1] = (struct pollfd){.fd = a, .events = open_a ? POLLIN : 0};
        f[2] = (struct pollfd){.fd = b, .events = open_b ? POLLIN : 0};
        if (wait_any(p, f, 3) < 0)
            return;
        for (int i = 1; i <= 2; i++) {
            if (!f[i].revents)
                continue;
            int from = i == 1 ? a : b, to = i == 1 ? b : a;
            ssize_t n = recv(from, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                shutdown(to, SHUT_WR);
                if (i == 1)
                    open_a = 0;
                else
                    open_b = 0;
                if (n < 0)
                    return;
                continue;
            }
            if (test_send_all(to, buf, (size_t)n))
                return;
        }
    }
}

static void record(test_proxy *p, const char *line, size_t n)
{
    char *copy = xrealloc(NULL, n + 1);
    memcpy(copy, line, n);
    copy[n] = '\0';
    pthread_mutex_lock(&p->mu);
    if (p->nlines == p->lines_cap) {
        p->lines_cap = p->lines_cap ? 2 * p->lines_cap : 16;
        p->lines = xrealloc(p->lines, p->lines_cap * sizeof *p->lines);
    }
    p->lines[p->nlines++] = copy;
    pthread_mutex_unlock(&p->mu);
}

static void refuse(int fd, const char *status)
{
    char b[128];
    int n = snprintf(b, sizeof b, "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);
    test_send_all(fd, b, (size_t)n);
}

/* host:port of "host:port" or of an http://host:port/... URL; -1 if bad. */
static int split_host(const char *s, size_t n, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon = memchr(s, ':', n);
    if (!colon || (size_t)(colon - s) >= hcap || n - (size_t)(colon - s) - 1 >= pcap)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memcpy(port, colon + 1, n - (size_t)(colon - s) - 1);
    port[n - (size_t)(colon - s) - 1] = '\0';
    return 0;
}

static void serve(test_proxy *p, int fd)
{
    char *buf = xrealloc(NULL, MAX_HEAD);
    size_t len = 0, end = 0;
    for (;;) {
        char *hit = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
        if (hit) {
            end = (size_t)(hit - buf) + 4;
            break;
        }
        struct pollfd f[2];
        f[1] = (struct pollfd){.fd = fd, .events = POLLIN};
        if (len >= MAX_HEAD || wait_any(p, f, 2) < 0)
            goto out;
        ssize_t n = recv(fd, buf + len, MAX_HEAD - len, 0);
        if (n <= 0)
            goto out;
        len += (size_t)n;
    }
    size_t line_len = (size_t)((char *)memmem(buf, end, "\r\n", 2) - buf);
    record(p, buf, line_len);
    /* METHOD SP TARGET SP VERSION */
    const char *sp1 = memchr(buf, ' ', line_len);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', line_len - (size_t)(sp1 + 1 - buf)) : NULL;
    if (!sp2) {
        refuse(fd, "400 Bad Request");
        goto out;
    }
    const char *target = sp1 + 1;
    size_t tlen = (size_t)(sp2 - target);
    char host[256], port[8];
    int up = -1;
    if ((size_t)(sp1 - buf) == 7 && memcmp(buf, "CONNECT", 7) == 0) {
        if (split_host(target, tlen, host, sizeof host, port, sizeof port) == 0)
            up = connect_loopback(host, port);
        if (up < 0) {
            refuse(fd, "403 Forbidden");
            goto out;
        }
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (test_send_all(fd, ok, sizeof ok - 1) || (len > end && test_send_all(up, buf + end, len - end)))
            goto out_up;
    } else if (tlen > 7 && strncasecmp(target, "http://", 7) == 0) {
        const char *auth = target + 7;
        const char *path = memchr(auth, '/', tlen - 7);
        size_t alen = path ? (size_t)(path - auth) : tlen - 7;
        if (split_host(auth, alen, host, sizeof host, port, sizeof port) == 0)
            up = connect_loopback(host, port);
        if (up < 0) {
            refuse(fd, "403 Forbidden");
            goto out;
        }
        /* The origin gets the origin form: "POST /path HTTP/1.1". */
        size_t plen = path ? (size_t)(sp2 - path) : 0;
        if (test_send_all(up, buf, (size_t)(sp1 + 1 - buf)) || test_send_all(up, path ? path : "/", path ? plen : 1) ||
            test_send_all(up, sp2, len - (size_t)(sp2 - buf)))
            goto out_up;
    } else {
        refuse(fd, "400 Bad Request");
        goto out;
    }
    relay(p, fd, up);
out_up:
    close(up);
out:
    free(buf);
}

static void *conn_main(void *arg)
{
    conn_arg a = *(conn_arg *)arg;
    free(arg);
    serve(a.p, a.fd);
    close(a.fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    test_proxy *p = arg;
    for (;;) {
        struct pollfd f[2];
        f[1] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        if (wait_any(p, f, 2) < 0)
            return NULL;
        int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        conn_arg *a = xrealloc(NULL, sizeof *a);
        *a = (conn_arg){p, fd};
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, a) != 0) {
            free(a);
            close(fd);
            continue;
        }
        pthread_mutex_lock(&p->mu);
        if (p->nconns == p->conns_cap) {
            p->conns_cap = p->conns_cap ? 2 * p->conns_cap : 16;
            p->conns = xrealloc(p->conns, p->conns_cap * sizeof *p->conns);
        }
        p->conns[p->nconns++] = t;
        pthread_mutex_unlock(&p->mu);
    }
}

test_proxy *test_proxy_start(void)
{
    test_proxy *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    p->stop_pipe[0] = p->stop_pipe[1] = -1;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->listen_fd, 64) != 0 || getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
        pipe2(p->stop_pipe, O_CLOEXEC) != 0) {
        fprintf(stderr, "test proxy: cannot listen: %s\n", strerror(errno));
        if (p->listen_fd >= 0)
            close(p->listen_fd);
        free(p);
        return NULL;
    }
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->acceptor, NULL, accept_main, p) != 0) {
        fprintf(stderr, "test proxy: cannot start the accept thread\n");
        close(p->listen_fd);
        close(p->stop_pipe[0]);
        close(p->stop_pipe[1]);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void test_proxy_stop(test_proxy *p)
{
    if (!p)
        return;
    if (write(p->stop_pipe[1], "x", 1) != 1)
        fprintf(stderr, "test proxy: cannot signal stop\n");
    pthread_join(p->acceptor, NULL);
    for (size_t i = 0; i < p->nconns; i++)
        pthread_join(p->conns[i], NULL);
    close(p->listen_fd);
    close(p->stop_pipe[0]);
    close(p->stop_pipe[1]);
    for (size_t i = 0; i < p->nlines; i++)
        free(p->lines[i]);
    free(p->lines);
    free(p->conns);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

const char *test_proxy_url(const test_proxy *p) { return p->url; }

size_t test_proxy_count(test_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->nlines;
    pthread_mutex_unlock(&p->mu);
    return n;
}

const char *test_proxy_request_line(test_proxy *p, size_t i)
{
    pthread_mutex_lock(&p->mu);
    const char *l = i < p->nlines ? p->lines[i] : NULL;
    pthread_mutex_unlock(&p->mu);
    return l;
}
