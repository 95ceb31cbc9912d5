/* The built-in HTTP/1.1 client against the test server on loopback: the
 * request bytes, reply framings (length, chunked, until close), replies cut
 * short, refused and silent servers, the stop callback, header injection,
 * IPv6 and host names, and URL parsing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "export/http_client.h"
#include "http_server.h"

/* POST `body` to url with the given headers, `timeout_s` for everything. */
static int post(const char *url, const pn_label *h, size_t nh, const char *body, double timeout_s,
                int (*stop)(void *), void *ud, pn_http_reply *rp, pn_error *e)
{
    struct iovec iov = {(void *)body, body ? strlen(body) : 0};
    pn_http_request rq = {.url = url, .headers = h, .nheaders = nh, .body = &iov, .nbody = body ? 1 : 0,
                          .connect_deadline_ns = pn_test_deadline_ns(timeout_s),
                          .deadline_ns = pn_test_deadline_ns(timeout_s), .stop = stop, .stop_ud = ud};
    pn_error_clear(e);
    return pn_http_post(&rq, rp, e);
}

static char *url_of(const test_server *s, const char *path)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s%s", test_server_url(s), path);
    return buf;
}

static void test_request_bytes(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_label h[] = {{"User-Agent", "pyroscope-native"}, {"X-Empty", ""}, {"X-Tab", "a\tb"}};
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(post(url_of(srv, "/a/b?x=1&y=%20"), h, 3, "hello", 5, NULL, NULL, &rp, &e), 0);
    CHECK_STR(e.msg, "");
    CHECK_EQ_INT(rp.status, 200);
    CHECK_STR(rp.body, "ok");
    CHECK_EQ_INT(rp.body_len, 2);
    const test_request *r = test_server_request(srv, 0);
    CHECK(r != NULL);
    if (r) {
        char want[512];
        snprintf(want, sizeof want,
                 "POST /a/b?x=1&y=%%20 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: pyroscope-native\r\n"
                 "X-Empty: \r\nX-Tab: a\tb\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
                 test_server_port(srv));
        CHECK_STR(r->head, want);
        CHECK_EQ_INT(r->body_len, 5);
        CHECK(memcmp(r->body, "hello", 5) == 0);
    }

    /* No path: "/"; bytes above ASCII in the path are escaped; a Host and
     * a Connection given by the caller replace the client's. */
    pn_label h2[] = {{"Host", "example.com"}, {"Connection", "keep-alive"}};
    char url[256];
    snprintf(url, sizeof url, "%s/caf\xc3\xa9", test_server_url(srv));
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(post(url, h2, 2, NULL, 5, NULL, NULL, &rp, &e), 0);
    r = test_server_request(srv, 1);
    CHECK(r && strncmp(r->head, "POST / HTTP/1.1\r\n", 17) == 0);
    CHECK(r && strstr(r->head, "\r\nContent-Length: 0\r\n") != NULL);
    r = test_server_request(srv, 2);
    CHECK(r != NULL);
    if (r) {
        CHECK_STR(r->head, "POST /caf%C3%A9 HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive\r\n"
                           "Content-Length: 0\r\n\r\n");
    }
    test_server_stop(srv);
}

static void test_chunked_reply(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    static const char raw[] = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n"
                              "5\r\nhello\r\n6;ext=1\r\n world\r\nb\r\n 0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
    test_server_reply_raw(srv, raw, sizeof raw - 1);
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 500);
    CHECK_STR(rp.body, "hello world 0123456789");
    test_server_stop(srv);
}

static void test_reply_until_close(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    static const char raw[] = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nno length: read to the end";
    test_server_reply_raw(srv, raw, sizeof raw - 1);
    /* Interim 1xx answers are skipped; 204 has no body whatever follows. */
    static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
    test_server_reply_raw(srv, interim, sizeof interim - 1);
    static const char nobody[] = "HTTP/1.1 204 No Content\r\n\r\n";
    test_server_reply_raw(srv, nobody, sizeof nobody - 1);
    /* Bare LF line ends are accepted too. */
    static const char lf[] = "HTTP/1.1 202 Accepted\nContent-Length: 3\n\nabc";
    test_server_reply_raw(srv, lf, sizeof lf - 1);
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 400);
    CHECK_STR(rp.body, "no length: read to the end");
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 201);
    CHECK_STR(rp.body, "ok");
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 204);
    CHECK_EQ_INT(rp.body_len, 0);
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 202);
    CHECK_STR(rp.body, "abc");
    test_server_stop(srv);
}

/* A long body is read to its end but only its start is kept. */
static void test_reply_body_capped(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    char body[5000];
    for (size_t i = 0; i < sizeof body - 1; i++)
        body[i] = (char)('a' + i % 26);
    body[sizeof body - 1] = '\0';
    test_server_reply(srv, 413, body, 0);
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 413);
    CHECK_EQ_INT(rp.body_len, PN_HTTP_REPLY_KEEP);
    CHECK(memcmp(rp.body, body, PN_HTTP_REPLY_KEEP) == 0);
    CHECK_EQ_INT(strlen(rp.body), PN_HTTP_REPLY_KEEP);
    test_server_stop(srv);
}

static void test_reply_cut_short(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    static const struct {
        const char *raw;
        const char *needle;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", "93 bytes of the body"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort", "bytes of the body"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "chunked body"},
        {"HTTP/1.1 200 OK\r\nContent-Le", "mid-line"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "middle of the headers"},
        {"", "without replying"},
        {"SSH-2.0-OpenSSH_9.2\r\n\r\n", "malformed reply status line 'SSH-2.0-OpenSSH_9.2'"},
        {"HTTP/1.1 2000 OK\r\n\r\n", "malformed"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "conflicting"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size line 'zz'"},
        {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"},
    };
    size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++)
        test_server_reply_raw(srv, cases[i].raw, strlen(cases[i].raw));
    for (size_t i = 0; i < n; i++) {
        pn_http_reply rp;
        pn_error e;
        CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), -1);
        CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_NET);
        CHECK_EQ_INT(e.code, PN_EIO);
        if (!strstr(e.msg, cases[i].needle))
            fprintf(stderr, "  case %zu: '%s' lacks '%s'\n", i, e.msg, cases[i].needle);
        CHECK(strstr(e.msg, cases[i].needle) != NULL);
    }
    CHECK_EQ_INT(test_server_count(srv), n);
    test_server_stop(srv);
}

static void test_connection_refused(void)
{
    int port = test_free_port();
    CHECK(port > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ingest", port);
    pn_http_reply rp;
    pn_error e;
    double t0 = pn_test_now_s();
    CHECK_EQ_INT(post(url, NULL, 0, "x", 5, NULL, NULL, &rp, &e), -1);
    CHECK(pn_test_now_s() - t0 < 2.0);
    CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_NET);
    char want[128];
    snprintf(want, sizeof want, "connecting to 127.0.0.1 port %d: Connection refused", port);
    if (!strstr(e.msg, want))
        fprintf(stderr, "  '%s' lacks '%s'\n", e.msg, want);
    CHECK(strstr(e.msg, want) != NULL);
}

static void test_never_answers(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_http_reply rp;
    pn_error e;
    double t0 = pn_test_now_s();
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 0.3, NULL, NULL, &rp, &e), -1);
    double took = pn_test_now_s() - t0;
    CHECK(took >= 0.25);
    if (pn_test_timing_strict())
        CHECK(took < 1.0);
    CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_TIMEOUT);
    CHECK(strstr(e.msg, "waiting for the reply: no complete reply within 0.30 s") != NULL);
    CHECK_EQ_INT(test_server_count(srv), 1);
    test_server_stop(srv);
}

typedef struct {
    int flag;
    int after_ms;
} stopper;

static int stop_flag(void *ud) { return __atomic_load_n(&((stopper *)ud)->flag, __ATOMIC_ACQUIRE); }

static void *stop_later(void *arg)
{
    stopper *s = arg;
    usleep((useconds_t)s->after_ms * 1000);
    __atomic_store_n(&s->flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_stop_callback(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    stopper s = {0, 200};
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, stop_later, &s), 0);
    pn_http_reply rp;
    pn_error e;
    double t0 = pn_test_now_s();
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 10, stop_flag, &s, &rp, &e), -1);
    double took = pn_test_now_s() - t0;
    pthread_join(t, NULL);
    CHECK(took >= 0.15);
    if (pn_test_timing_strict())
        CHECK(took < 1.0);
    CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_STOPPED);
    CHECK(strstr(e.msg, "stopped") != NULL);

    /* Already stopped: nothing is sent. */
    size_t before = test_server_count(srv);
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 10, stop_flag, &s, &rp, &e), -1);
    CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_STOPPED);
    CHECK_EQ_INT(test_server_count(srv), before);
    test_server_stop(srv);
}

static void test_header_injection_rejected(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    static const struct {
        pn_label h;
        const char *needle;
    } cases[] = {
        {{"X-Evil", "a\r\nInjected: 1"}, "header 'X-Evil': the value contains CR or LF"},
        {{"X-Lf", "a\nb"}, "header 'X-Lf': the value contains CR or LF"},
        {{"X-Cr", "a\rb"}, "header 'X-Cr': the value contains CR or LF"},
        {{"X-Nul", "a\x01"}, "header 'X-Nul': the value contains a control character"},
        {{"X Bad", "v"}, "header 'X Bad': the name"},
        {{"X-Bad\r\nY", "v"}, "header 'X-Bad??Y': the name"},
        {{"", "v"}, "empty name"},
        {{"Content-Length", "3"}, "header 'Content-Length': is set by the HTTP client"},
        {{"transfer-encoding", "chunked"}, "header 'transfer-encoding': is set by the HTTP client"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pn_label h[2] = {{"X-Ok", "1"}, cases[i].h};
        pn_http_reply rp;
        pn_error e;
        CHECK_EQ_INT(post(test_server_url(srv), h, 2, "x", 5, NULL, NULL, &rp, &e), -1);
        CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_PERMANENT);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        if (!strstr(e.msg, cases[i].needle))
            fprintf(stderr, "  case %zu: '%s' lacks '%s'\n", i, e.msg, cases[i].needle);
        CHECK(strstr(e.msg, cases[i].needle) != NULL);
    }
    /* Nothing reached the server. */
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(post(test_server_url(srv), NULL, 0, "x", 5, NULL, NULL, &rp, &e), 0);
    CHECK_EQ_INT(test_server_count(srv), 1);
    /* https is not ours. */
    CHECK_EQ_INT(post("https://127.0.0.1:1/", NULL, 0, "x", 5, NULL, NULL, &rp, &e), -1);
    CHECK_EQ_INT(rp.failure, PN_HTTP_FAIL_PERMANENT);
    CHECK(strstr(e.msg, "http://") != NULL);
    test_server_stop(srv);
}

static void test_ipv6_loopback(void)
{
    test_server *srv = test_server_start_at("::1");
    if (!srv) {
        printf("  skipped: cannot listen on [::1]\n");
        return;
    }
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(post(url_of(srv, "/v6"), NULL, 0, "six", 5, NULL, NULL, &rp, &e), 0);
    CHECK_STR(e.msg, "");
    CHECK_EQ_INT(rp.status, 200);
    const test_request *r = test_server_request(srv, 0);
    CHECK(r != NULL);
    if (r) {
        char host[64];
        snprintf(host, sizeof host, "[::1]:%d", test_server_port(srv));
        CHECK_STR(test_request_header(r, "Host"), host);
        CHECK_STR(r->target, "/v6");
        CHECK_STR((const char *)r->body, "six");
    }
    test_server_stop(srv);
}

/* A name goes through the resolver thread. */
static void test_host_name(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    char url[128];
    snprintf(url, sizeof url, "http://localhost:%d/by-name", test_server_port(srv));
    pn_http_reply rp;
    pn_error e;
    int rc = post(url, NULL, 0, "x", 5, NULL, NULL, &rp, &e);
    if (rc != 0)
        fprintf(stderr, "  %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(rp.status, 200);
    const test_request *r = test_server_request(srv, 0);
    char host[64];
    snprintf(host, sizeof host, "localhost:%d", test_server_port(srv));
    CHECK(r && strcmp(test_request_header(r, "Host"), host) == 0);
    test_server_stop(srv);
}

/* Several MiB in several pieces: partial writes, all bytes in order. */
static void test_large_body(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    size_t n = 6u << 20;
    uint8_t *big = malloc(n);
    CHECK(big != NULL);
    if (!big) {
        test_server_stop(srv);
        return;
    }
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(i * 131 + (i >> 13));
    struct iovec iov[4] = {{(void *)"head-", 5}, {big, n / 2}, {NULL, 0}, {big + n / 2, n - n / 2}};
    pn_http_request rq = {.url = test_server_url(srv), .body = iov, .nbody = 4,
                          .connect_deadline_ns = pn_test_deadline_ns(5), .deadline_ns = pn_test_deadline_ns(30)};
    pn_http_reply rp;
    pn_error e;
    CHECK_EQ_INT(pn_http_post(&rq, &rp, &e), 0);
    CHECK_EQ_INT(rp.status, 200);
    const test_request *r = test_server_request(srv, 0);
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ_INT(r->body_len, n + 5);
        CHECK(r->body_len == n + 5 && memcmp(r->body, "head-", 5) == 0 && memcmp(r->body + 5, big, n) == 0);
    }
    free(big);
    test_server_stop(srv);
}

static void test_url_parse(void)
{
    static const struct {
        const char *url;
        int https;
        const char *host, *port, *authority, *target, *userinfo;
    } ok[] = {
        {"http://h", 0, "h", "80", "h", "", NULL},
        {"http://h:80/x", 0, "h", "80", "h", "/x", NULL},
        {"HTTPS://h:443", 1, "h", "443", "h", "", NULL},
        {"https://h:8443/p?q=1", 1, "h", "8443", "h:8443", "/p?q=1", NULL},
        {"http://u:p%40w@h.example:4040/pfx/", 0, "h.example", "4040", "h.example:4040", "/pfx/", "u:p%40w"},
        {"http://[::1]:4040/i", 0, "::1", "4040", "[::1]:4040", "/i", NULL},
        {"http://[::1]", 0, "::1", "80", "[::1]", "", NULL},
        {"http://h:/x", 0, "h", "80", "h", "/x", NULL},
        {"http://a@b@h/x", 0, "h", "80", "h", "/x", "a@b"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pn_http_url u;
        pn_error e;
        pn_error_clear(&e);
        CHECK_EQ_INT(pn_http_url_parse(ok[i].url, &u, &e), 0);
        if (e.msg[0])
            fprintf(stderr, "  %s: %s\n", ok[i].url, e.msg);
        CHECK_EQ_INT(u.https, ok[i].https);
        CHECK_STR(u.host, ok[i].host);
        CHECK_STR(u.port, ok[i].port);
        CHECK_STR(u.authority, ok[i].authority);
        CHECK_STR(u.target, ok[i].target);
        if (ok[i].userinfo) {
            CHECK_EQ_INT(u.userinfo_len, strlen(ok[i].userinfo));
            CHECK(u.userinfo && strncmp(u.userinfo, ok[i].userinfo, u.userinfo_len) == 0);
        } else {
            CHECK(u.userinfo == NULL);
        }
    }
    static const struct {
        const char *url, *needle;
    } bad[] = {
        {"ftp://h/", "http://"},      {"http://", "no host"},          {"http://:80/", "no host"},
        {"http://h:0/", "port '0'"},  {"http://h:65536/", "port"},     {"http://h:8x/", "port '8x'"},
        {"http://[::1/", "']'"},      {"http://[::1]x/", "':port'"},   {"http://h/a b", "spaces"},
        {"http://h/#f", "'#'"},       {"http://u:p@/x", "no host"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pn_http_url u;
        pn_error e;
        pn_error_clear(&e);
        CHECK_EQ_INT(pn_http_url_parse(bad[i].url, &u, &e), -1);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        if (!strstr(e.msg, bad[i].needle))
            fprintf(stderr, "  %s: '%s' lacks '%s'\n", bad[i].url, e.msg, bad[i].needle);
        CHECK(strstr(e.msg, bad[i].needle) != NULL);
    }
}

TEST_MAIN(T(test_request_bytes), T(test_chunked_reply), T(test_reply_until_close), T(test_reply_body_capped),
          T(test_reply_cut_short), T(test_connection_refused), T(test_never_answers), T(test_stop_callback),
          T(test_header_injection_rejected), T(test_ipv6_loopback), T(test_host_name), T(test_large_body),
          T(test_url_parse))
