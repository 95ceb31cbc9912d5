/* The Pyroscope HTTP exporter (libcurl) against the test server on
 * 127.0.0.1: the ingest URL, the multipart body, auth and headers, status
 * mapping, deadlines and aborts, keep-alive, https:// with a certificate
 * the test trusts, proxies (http_proxy, https_proxy, no_proxy), and
 * hostile servers.
 *
 * Time checks are bounds far from what they tell apart (a deadline of
 * 0.3 s against a default timeout of 10 s, an abort against a 60 s
 * deadline), so a loaded machine does not fail them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_proxy.h"
#include "http_server.h"
#include "queue_helper.h"
#include "pyroscope_native.h"
#include "export/exporter.h"

/* Timeouts far beyond any machine's slowness, for tests about a verdict
 * rather than a timeout: under valgrind on a loaded machine a TLS handshake
 * with the in-process server took more than the default 5 s connect timeout,
 * which turns a certificate failure into a retry. */
#define PATIENT .connect_timeout_s = 60, .timeout_s = 60

static char app_cpu[] = "app", type_cpu[] = "cpu";

static pn_upload upload_of(uint8_t *data, size_t len)
{
    pn_upload u = {.app_name = app_cpu, .profile_type = type_cpu, .from_s = 1700000000,
                   .until_s = 1700000010, .sample_rate = 100, .data = data, .len = len};
    return u;
}

/* Bytes that look like multipart syntax, NULs and high bytes: the exporter
 * must carry them through unchanged. */
static void fill_payload(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 7 + 3);
    static const char tricky[] = "\r\n--boundary\r\n\r\n\0\0";
    if (n > sizeof tricky + 10)
        memcpy(p + 10, tricky, sizeof tricky);
}

/* Exactly one part, name="profile", with a filename, holding data. */
static void check_multipart(const test_request *r, const uint8_t *data, size_t len)
{
    const char *ct = test_request_header(r, "Content-Type");
    CHECK(ct && strncmp(ct, "multipart/form-data", 19) == 0);
    const char *b = ct ? strstr(ct, "boundary=") : NULL;
    CHECK(b != NULL);
    if (!b)
        return;
    b += 9;
    char delim[256] = "--";
    size_t bl = strcspn(b, "; ");
    if (*b == '"') {
        b++;
        bl = strcspn(b, "\"");
    }
    CHECK(bl > 0 && bl < 200);
    if (bl == 0 || bl >= 200)
        return;
    memcpy(delim + 2, b, bl);
    delim[2 + bl] = '\0';
    size_t dl = strlen(delim);
    CHECK(memmem(data, len, delim + 2, bl) == NULL);

    const uint8_t *body = r->body, *end = r->body + r->body_len;
    CHECK(r->body_len > dl + 2 && memcmp(body, delim, dl) == 0 && memcmp(body + dl, "\r\n", 2) == 0);
    if (!(r->body_len > dl + 2 && memcmp(body, delim, dl) == 0))
        return;
    const uint8_t *headers = body + dl + 2;
    const uint8_t *hend = memmem(headers, (size_t)(end - headers), "\r\n\r\n", 4);
    CHECK(hend != NULL);
    if (!hend)
        return;
    char hdr[1024] = "";
    size_t hl = (size_t)(hend - headers) < sizeof hdr - 1 ? (size_t)(hend - headers) : sizeof hdr - 1;
    memcpy(hdr, headers, hl);
    hdr[hl] = '\0';
    CHECK(strstr(hdr, "Content-Disposition: form-data; name=\"profile\"") != NULL);
    CHECK(strstr(hdr, "filename=\"") != NULL);

    const uint8_t *content = hend + 4;
    char closing[260];
    snprintf(closing, sizeof closing, "\r\n%s", delim);
    const uint8_t *cend = memmem(content, (size_t)(end - content), closing, dl + 2);
    CHECK(cend != NULL);
    if (!cend)
        return;
    CHECK_EQ_INT(cend - content, len);
    CHECK((size_t)(cend - content) == len && memcmp(content, data, len) == 0);
    /* The delimiter after the only part is the closing one. */
    const uint8_t *after = cend + 2 + dl;
    CHECK(end - after >= 2 && memcmp(after, "--", 2) == 0);
}

static void test_url_format(void)
{
    pn_label tags[] = {{"region", "eu west"}, {"env", "prod"}};
    pn_http_opts o = {.server_address = "http://example.com:4040/pfx/", .app_name = "my/app",
                      .tags = tags, .ntags = 2, .spy_name = "pyspy"};
    uint8_t d[1] = {0};
    pn_upload u = upload_of(d, 1);
    pn_error e;
    char *url = NULL;
    const char *want = "http://example.com:4040/pfx/ingest?name=my%2Fapp%7Benv%3Dprod%2Cregion%3Deu%20west%7D"
                       "&from=1700000000&until=1700000010&sampleRate=100&spyName=pyspy";
    CHECK_EQ_INT(pn_http_ingest_url(&o, &u, &url, &e), 0);
    CHECK_STR(url, want);
    free(url);

    o.server_address = "http://example.com:4040/pfx";
    CHECK_EQ_INT(pn_http_ingest_url(&o, &u, &url, &e), 0);
    CHECK_STR(url, want);
    free(url);

    /* No tags: no braces; no spy name: no parameter; slashes-only path. */
    pn_http_opts bare = {.server_address = "https://h.example///", .app_name = "a"};
    u.from_s = 1;
    u.until_s = 2;
    u.sample_rate = 99;
    CHECK_EQ_INT(pn_http_ingest_url(&bare, &u, &url, &e), 0);
    CHECK_STR(url, "https://h.example/ingest?name=a&from=1&until=2&sampleRate=99");
    CHECK(url && !strstr(url, "format="));
    free(url);

    /* Only unreserved characters stay as they are (curl_easy_escape's rule). */
    pn_label odd[] = {{"k", "caf\xc3\xa9~-._!*'()+&?#%"}};
    pn_http_opts esc = {.server_address = "http://h", .app_name = "A-z_0.9~", .tags = odd, .ntags = 1,
                        .spy_name = "s p"};
    CHECK_EQ_INT(pn_http_ingest_url(&esc, &u, &url, &e), 0);
    CHECK_STR(url, "http://h/ingest?name=A-z_0.9~%7Bk%3Dcaf%C3%A9~-._%21%2A%27%28%29%2B%26%3F%23%25%7D"
                   "&from=1&until=2&sampleRate=99&spyName=s%20p");
    free(url);
}

static void test_bad_options_rejected(void)
{
    uint8_t d[1] = {0};
    pn_upload u = upload_of(d, 1);
    pn_label bad_tag[] = {{"env", "a,b"}};
    pn_label bad_header[] = {{"X-Evil", "a\r\nInjected: 1"}};
    pn_label bad_header_name[] = {{"X Bad", "v"}};
    pn_label framing[] = {{"Content-Length", "1"}, {"content-type", "text/plain"}};
    struct {
        pn_http_opts o;
        const char *needle;
    } cases[] = {
        {{.server_address = "localhost:4040", .app_name = "a"}, "server_address"},
        {{.server_address = "http://", .app_name = "a"}, "no host"},
        {{.server_address = "http://h/?x=1", .app_name = "a"}, "query"},
        {{.server_address = "http://h", .app_name = ""}, "application_name"},
        {{.server_address = "http://h", .app_name = "a", .tags = bad_tag, .ntags = 1}, "a,b"},
        {{.server_address = "http://h", .app_name = "a", .headers = bad_header, .nheaders = 1},
         "X-Evil"},
        {{.server_address = "http://h", .app_name = "a", .headers = bad_header_name, .nheaders = 1},
         "X Bad"},
        {{.server_address = "http://h", .app_name = "a", .timeout_s = -1}, "timeout_s"},
        /* libcurl's URL parser decides, and its message says why. */
        {{.server_address = "http://h:99999", .app_name = "a"}, "http://h:99999': Port number"},
        {{.server_address = "http://[::1/x", .app_name = "a"}, "http://[::1/x': "},
        {{.server_address = "http://h", .app_name = "a", .ca_file = ""}, "ca_file"},
        {{.server_address = "http://h", .app_name = "a", .headers = framing, .nheaders = 1}, "Content-Length"},
        {{.server_address = "http://h", .app_name = "a", .headers = framing + 1, .nheaders = 1}, "content-type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pn_error e;
        pn_error_clear(&e);
        CHECK(pn_http_exporter_new(&cases[i].o, &e) == NULL);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        if (!strstr(e.msg, cases[i].needle))
            fprintf(stderr, "  case %zu: '%s' lacks '%s'\n", i, e.msg, cases[i].needle);
        CHECK(strstr(e.msg, cases[i].needle) != NULL);
        char *url = NULL;
        CHECK_EQ_INT(pn_http_ingest_url(&cases[i].o, &u, &url, &e), -1);
        CHECK(url == NULL);
    }
}

/* One upload with every option set, to srv (plain or TLS). */
static void request_shape(test_server *srv)
{
    CHECK(srv != NULL);
    if (!srv)
        return;
    char base[128];
    snprintf(base, sizeof base, "%s/pfx/", test_server_url(srv));
    pn_label tags[] = {{"env", "prod"}};
    pn_label headers[] = {{"X-Extra", "v1"}, {"X-Other", "two words"}};
    pn_http_opts o = {.server_address = base, .app_name = "app", .tags = tags, .ntags = 1,
                      .spy_name = "pyspy", .basic_auth_user = "user",
                      .basic_auth_password = "pa ss", .tenant_id = "tenant-1",
                      .headers = headers, .nheaders = 2, .ca_file = test_server_ca_file(srv), PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x) {
        test_server_stop(srv);
        return;
    }
    uint8_t data[3000];
    fill_payload(data, sizeof data);
    pn_upload u = upload_of(data, sizeof data);
    volatile int abort_flag = 0;
    pn_error_clear(&e);
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), &abort_flag, &e), PN_SEND_OK);
    CHECK_STR(e.msg, "");
    CHECK_EQ_INT(test_server_count(srv), 1);
    const test_request *r = test_server_request(srv, 0);
    CHECK(r != NULL);
    if (r) {
        CHECK_STR(r->method, "POST");
        CHECK_STR(r->target, "/pfx/ingest?name=app%7Benv%3Dprod%7D&from=1700000000"
                             "&until=1700000010&sampleRate=100&spyName=pyspy");
        CHECK(!strstr(r->target, "format="));
        CHECK_STR(test_request_header(r, "Authorization"), "Basic dXNlcjpwYSBzcw==");
        CHECK(strstr(r->head, "\r\nAuthorization: Basic dXNlcjpwYSBzcw==\r\n") != NULL);
        CHECK_STR(test_request_header(r, "X-Scope-OrgID"), "tenant-1");
        CHECK_STR(test_request_header(r, "X-Extra"), "v1");
        CHECK_STR(test_request_header(r, "X-Other"), "two words");
        CHECK_STR(test_request_header(r, "User-Agent"), "pyroscope-native");
        check_multipart(r, data, sizeof data);
        /* No "Expect: 100-continue" wait before the body. */
        CHECK(test_request_header(r, "Expect") == NULL);
        char host[64];
        snprintf(host, sizeof host, "127.0.0.1:%d", test_server_port(srv));
        CHECK_STR(test_request_header(r, "Host"), host);
    }
    x->destroy(x);
    test_server_stop(srv);
}

static void test_request_shape(void) { request_shape(test_server_start()); }

static void test_https_request_shape(void) { request_shape(test_server_start_tls()); }

static void test_no_auth_no_tenant(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "a-b/c", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
        const test_request *r = test_server_request(srv, 0);
        CHECK(r != NULL);
        if (r) {
            CHECK_STR(r->target, "/ingest?name=a-b%2Fc&from=1700000000&until=1700000010&sampleRate=100");
            CHECK(test_request_header(r, "Authorization") == NULL);
            CHECK(test_request_header(r, "X-Scope-OrgID") == NULL);
            check_multipart(r, data, sizeof data);
        }
        x->destroy(x);
    }
    test_server_stop(srv);
}

static void test_status_mapping(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    static const struct {
        int status;
        const char *body;
        pn_send_result want;
    } cases[] = {
        {503, "try later", PN_SEND_RETRY}, {429, "slow down", PN_SEND_RETRY},
        {400, "bad name", PN_SEND_FAIL},   {500, "oops", PN_SEND_RETRY},
        {204, "", PN_SEND_OK},             {404, "no such path", PN_SEND_FAIL},
        {401, "who are you", PN_SEND_FAIL}, {200, "ok", PN_SEND_OK},
    };
    size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++)
        test_server_reply(srv, cases[i].status, cases[i].body, 0);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        for (size_t i = 0; i < n; i++) {
            pn_error_clear(&e);
            pn_send_result r = x->send(x, &u, pn_test_deadline_ns(5), NULL, &e);
            CHECK_EQ_INT(r, cases[i].want);
            if (cases[i].want != PN_SEND_OK) {
                char status[8];
                snprintf(status, sizeof status, "%d", cases[i].status);
                CHECK_EQ_INT(e.code, PN_EHTTP);
                CHECK(strstr(e.msg, status) != NULL);
                CHECK(strstr(e.msg, cases[i].body) != NULL);
            }
        }
        CHECK_EQ_INT(test_server_count(srv), n);
        x->destroy(x);
    }
    test_server_stop(srv);
}

/* A long, multi-line, binary-laced error page is quoted short and printable. */
static void test_error_body_sanitized(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    char body[2000];
    memset(body, 'x', sizeof body - 1);
    body[sizeof body - 1] = '\0';
    memcpy(body, "line one\nline\ttwo\x01\x7f end", 23);
    test_server_reply(srv, 400, body, 0);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_FAIL);
        CHECK(strstr(e.msg, "line one line two end") != NULL);
        int printable = 1;
        for (const char *p = e.msg; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                printable = 0;
        CHECK(printable);
        const char *xs = strstr(e.msg, "xxx");
        CHECK(xs != NULL && strlen(xs) < 300);
        x->destroy(x);
    }
    test_server_stop(srv);
}

static void test_no_answer_until_deadline(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        volatile int abort_flag = 0;
        double t0 = pn_test_now_s();
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(0.3), &abort_flag, &e), PN_SEND_RETRY);
        double took = pn_test_now_s() - t0;
        CHECK(took >= 0.25);
        CHECK(took < 5.0);  /* the deadline ended it, not the 10 s timeout */
        CHECK(strstr(e.msg, "no answer before the send deadline") != NULL);
        CHECK_EQ_INT(e.code, PN_EIO);
        CHECK_EQ_INT(test_server_count(srv), 1);

        /* The exporter's own timeout applies when the deadline is far. */
        x->destroy(x);
        o.timeout_s = 0.3;
        x = pn_http_exporter_new(&o, &e);
        CHECK(x != NULL);
        if (x) {
            t0 = pn_test_now_s();
            CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(30), &abort_flag, &e), PN_SEND_RETRY);
            took = pn_test_now_s() - t0;
            CHECK(took >= 0.25);
            CHECK(took < 15.0);
            CHECK(strstr(e.msg, "imeout") != NULL);
            x->destroy(x);
        }
    }
    test_server_stop(srv);
}

static void test_deadline_already_passed(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(-1), NULL, &e), PN_SEND_RETRY);
        CHECK(strstr(e.msg, "deadline") != NULL);
        CHECK_EQ_INT(test_server_count(srv), 0);
        x->destroy(x);
    }
    test_server_stop(srv);
}

static void test_closed_port(void)
{
    int port = test_free_port();
    CHECK(port > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    pn_http_opts o = {.server_address = url, .app_name = "app", .connect_timeout_s = 60, .timeout_s = 60};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x)
        return;
    uint8_t data[4] = {1, 2, 3, 4};
    pn_upload u = upload_of(data, sizeof data);
    pn_error_clear(&e);
    double t0 = pn_test_now_s();
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), NULL, &e), PN_SEND_RETRY);
    CHECK(pn_test_now_s() - t0 < 30.0);  /* refused at once, not timed out */
    CHECK_EQ_INT(e.code, PN_EIO);
    CHECK(strstr(e.msg, url) != NULL);
    x->destroy(x);
}

typedef struct {
    volatile int *flag;
    int after_ms;
    test_server *srv; /* abort only once it holds the request */
} aborter;

static void *abort_later(void *arg)
{
    aborter *a = arg;
    /* On a loaded machine (or under valgrind) the request may take longer
     * than after_ms to arrive: the abort must hit a send in progress. */
    if (a->srv)
        test_server_wait(a->srv, 1, 60);
    usleep((useconds_t)a->after_ms * 1000);
    __atomic_store_n(a->flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_abort_from_other_thread(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", .timeout_s = 3600};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        volatile int flag = 0;
        aborter a = {&flag, 200, srv};
        pthread_t t;
        CHECK_EQ_INT(pthread_create(&t, NULL, abort_later, &a), 0);
        double t0 = pn_test_now_s();
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), &flag, &e), PN_SEND_RETRY);
        double took = pn_test_now_s() - t0;
        pthread_join(t, NULL);
        CHECK(took >= 0.15);
        CHECK(took < 30.0);  /* the abort ended it, not the 60 s deadline */
        CHECK_EQ_INT(test_server_count(srv), 1);
        /* Already aborted: nothing more is sent. */
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), &flag, &e), PN_SEND_RETRY);
        CHECK_EQ_INT(test_server_count(srv), 1);
        CHECK(strstr(e.msg, "aborted") != NULL);
        x->destroy(x);
    }
    test_server_stop(srv);
}

static size_t header_count(const test_request *r, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nheaders; i++)
        n += strcasecmp(r->names[i], name) == 0;
    return n;
}

/* The user's headers replace ours of the same name; an empty one is sent. */
static void test_header_override(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_label headers[] = {{"user-agent", "mine/1"}, {"Authorization", "Bearer t0k"},
                          {"X-Scope-OrgID", "other"}, {"X-Empty", ""}};
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app",
                      .basic_auth_user = "u", .basic_auth_password = "p", .tenant_id = "t",
                      .headers = headers, .nheaders = 4, PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[3] = {1, 2, 3};
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
        const test_request *r = test_server_request(srv, 0);
        CHECK(r != NULL);
        if (r) {
            CHECK_EQ_INT(header_count(r, "User-Agent"), 1);
            CHECK_STR(test_request_header(r, "User-Agent"), "mine/1");
            CHECK_EQ_INT(header_count(r, "Authorization"), 1);
            CHECK_STR(test_request_header(r, "Authorization"), "Bearer t0k");
            CHECK_EQ_INT(header_count(r, "X-Scope-OrgID"), 1);
            CHECK_STR(test_request_header(r, "X-Scope-OrgID"), "other");
            CHECK_STR(test_request_header(r, "X-Empty"), "");
            check_multipart(r, data, sizeof data);
        }
        x->destroy(x);
    }
    test_server_stop(srv);
}

/* Credentials in the address are used (%-decoded) and never shown. */
static void test_address_credentials(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_reply(srv, 200, "ok", 0);
    test_server_reply(srv, 400, "nope", 0);
    char addr[128];
    snprintf(addr, sizeof addr, "http://us%%40er:p%%3Aw@127.0.0.1:%d/", test_server_port(srv));
    pn_http_opts o = {.server_address = addr, .app_name = "app", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[3] = {1, 2, 3};
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
        const test_request *r = test_server_request(srv, 0);
        CHECK(r != NULL);
        if (r) {
            CHECK_EQ_INT(header_count(r, "Authorization"), 1);
            CHECK_STR(test_request_header(r, "Authorization"), "Basic dXNAZXI6cDp3");
            CHECK(strncmp(r->target, "/ingest?", 8) == 0);
        }
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_FAIL);
        CHECK(strstr(e.msg, test_server_url(srv)) != NULL);
        CHECK(strstr(e.msg, "p%3Aw") == NULL && strstr(e.msg, "us%40er") == NULL);
        x->destroy(x);
    }
    /* The options' credentials win over the address's. */
    o.basic_auth_user = "user";
    o.basic_auth_password = "pa ss";
    x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[3] = {1, 2, 3};
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
        const test_request *r = test_server_request(srv, 2);
        CHECK(r && strcmp(test_request_header(r, "Authorization"), "Basic dXNlcjpwYSBzcw==") == 0);
        x->destroy(x);
    }
    test_server_stop(srv);
}

/* A profile of several MiB with multipart-looking bytes arrives intact at
 * srv (plain or TLS). */
static void large_profile(test_server *srv)
{
    CHECK(srv != NULL);
    if (!srv)
        return;
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);
    CHECK(data != NULL);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app",
                      .ca_file = test_server_ca_file(srv), PATIENT};
    pn_error e;
    pn_exporter *x = data ? pn_http_exporter_new(&o, &e) : NULL;
    CHECK(x != NULL);
    if (x) {
        fill_payload(data, n);
        pn_upload u = upload_of(data, n);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), NULL, &e), PN_SEND_OK);
        const test_request *r = test_server_request(srv, 0);
        CHECK(r != NULL);
        if (r)
            check_multipart(r, data, n);
        x->destroy(x);
    }
    free(data);
    test_server_stop(srv);
}

static void test_large_profile(void) { large_profile(test_server_start()); }

static void test_https_large_profile(void) { large_profile(test_server_start_tls()); }

/* Through the queue: 5xx answers are retried until one succeeds, a 4xx is
 * not, and a server that never answers does not hold up stop. */
static void test_queue_retry_and_stop(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_reply(srv, 503, "busy", 0);
    test_server_reply(srv, 502, "bad gateway", 0);
    test_server_reply(srv, 200, "ok", 0);
    test_server_reply(srv, 400, "bad name", 0);
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", .timeout_s = 3600};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x) {
        test_server_stop(srv);
        return;
    }
    pn_queue_opts qo = {.max_attempts = 5, .backoff_initial_s = 0.01, .backoff_max_s = 0.02};
    pn_queue *q = pn_queue_new(&qo, &x, 1, &e);
    CHECK(q != NULL);
    if (!q) {
        x->destroy(x);
        test_server_stop(srv);
        return;
    }
    for (int i = 0; i < 3; i++)
        pn_queue_push(q, qh_profile("app", "cpu", 1700000000 + i, 1700000010 + i, 1));
    /* 503, 502, 200 for the first; 400 for the second; the third hangs. */
    CHECK_EQ_INT(test_server_wait(srv, 5, 60), 5);
    double t0 = pn_test_now_s();
    pn_queue_stats st;
    pn_queue_stop_stats(q, 0.2, &st);
    double took = pn_test_now_s() - t0;
    CHECK(took < 30.0);  /* the abort ended the hanging upload, not its 60 s budget */
    CHECK_EQ_INT(st.uploads_ok, 1);
    CHECK_EQ_INT(st.uploads_failed, 1);
    CHECK_EQ_INT(st.uploads_dropped, 1);
    CHECK_EQ_INT(st.retries, 2);
    const test_request *r = test_server_request(srv, 4);
    if (r)
    test_server_stop(srv);
}

/* One exporter, several uploads: one connection while the server keeps it
 * open; a new one each time when it does not. */
static void test_keep_alive(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[100];
        fill_payload(data, sizeof data);
        pn_upload u = upload_of(data, sizeof data);
        test_server_keep_alive(srv, 1);
        for (int i = 0; i < 3; i++)
            CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        /* A reply that looks reusable, then the server closes: libcurl
         * finds the connection dead and sends on a new one. */
        static const char closing[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        test_server_reply_raw(srv, closing, sizeof closing - 1);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        /* When the server's close has not reached us yet (a slow machine,
         * valgrind), libcurl reuses the dead connection and the request is
         * lost on it: a retry, which the queue would make, goes out fresh. */
        pn_send_result fifth = x->send(x, &u, pn_test_deadline_ns(10), NULL, &e);
        if (fifth != PN_SEND_OK) {
            CHECK_EQ_INT(fifth, PN_SEND_RETRY);
            CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        }
        test_server_keep_alive(srv, 0);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        CHECK_EQ_INT(test_server_count(srv), 7);
        size_t conn[7];
        for (size_t i = 0; i < 7; i++) {
            const test_request *r = test_server_request(srv, i);
            conn[i] = r ? r->conn : 99;
            if (r)
                check_multipart(r, data, sizeof data);
        }
        CHECK(conn[0] == 0 && conn[1] == 0 && conn[2] == 0 && conn[3] == 0);
        CHECK_EQ_INT(conn[4], 1);
        /* conn[5] reused conn 1 (the server still keeps it); then each
         * "Connection: close" reply ends its connection. */
        CHECK_EQ_INT(conn[5], 1);
        CHECK(conn[6] == 2);
        x->destroy(x);
    }
    test_server_stop(srv);
}

/* Forks; the child sends u with x and leaves. 1 when its upload worked. */
static int send_in_child(pn_exporter *x, const pn_upload *u)
{
    fflush(NULL);
    int res[2];
    if (pipe(res) != 0)
        return 0;
    pid_t child = fork();
    if (child == 0) {
        pn_error e;
        char ok = x->send(x, u, pn_test_deadline_ns(10), NULL, &e) == PN_SEND_OK ? 'y' : 'n';
        x->destroy(x);
        if (write(res[1], &ok, 1) != 1)
            _exit(1);
        /* The parent's test server and threads are copies here that
         * cannot be freed: leave by exec, which no exit-time leak check
         * (valgrind, LSan) follows. */
        execl("/bin/true", "true", (char *)NULL);
        _exit(0);
    }
    close(res[1]);
    char ok = 'n';
    if (child < 0 || read(res[0], &ok, 1) != 1)
        ok = 'n';
    close(res[0]);
    if (child > 0 && waitpid(child, NULL, 0) != child)
        ok = 'n';
    return ok == 'y';
}

/* A forked child gets the exporter with the parent's open connection: it
 * sends on a connection of its own, and the parent's still works. Over
 * TLS, where closing a connection writes to it. */
static void test_fork(void)
{
    test_server *srv = test_server_start_tls();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_keep_alive(srv, 1);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app",
                      .ca_file = test_server_ca_file(srv), PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[100];
        fill_payload(data, sizeof data);
        pn_upload u = upload_of(data, sizeof data);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        CHECK(send_in_child(x, &u));
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        CHECK_EQ_INT(test_server_count(srv), 3);
        const test_request *r0 = test_server_request(srv, 0), *r1 = test_server_request(srv, 1),
                           *r2 = test_server_request(srv, 2);
        CHECK(r0 && r1 && r2);
        if (r0 && r1 && r2) {
            CHECK_EQ_INT(r1->conn, 1);
            CHECK_EQ_INT(r2->conn, 0);
            check_multipart(r2, data, sizeof data);
        }
        x->destroy(x);
    }
    test_server_stop(srv);
}

typedef struct {
    pn_exporter *x;
    const pn_upload *u;
    volatile int abort;
    pn_send_result r;
} bg_send;

static void *send_in_background(void *arg)
{
    bg_send *b = arg;
    pn_error e;
    b->r = b->x->send(b->x, b->u, pn_test_deadline_ns(60), &b->abort, &e);
    return NULL;
}

/* A fork while the exporter thread waits in an upload: the child cannot
 * free what libcurl was doing (a thread of it may be missing), so it
 * leaves it and still uploads on a connection of its own. */
static void test_fork_during_upload(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", .timeout_s = 3600};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[100];
        fill_payload(data, sizeof data);
        pn_upload u = upload_of(data, sizeof data);
        bg_send b = {.x = x, .u = &u};
        pthread_t t;
        CHECK_EQ_INT(pthread_create(&t, NULL, send_in_background, &b), 0);
        CHECK_EQ_INT(test_server_wait(srv, 1, 60), 1);
        CHECK(send_in_child(x, &u));
        __atomic_store_n(&b.abort, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        CHECK_EQ_INT(b.r, PN_SEND_RETRY);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        CHECK_EQ_INT(test_server_count(srv), 3);
        x->destroy(x);
    }
    test_server_stop(srv);
}

/* Environment variables unset for a test and put back after it. */
static void env_clear(const char *const *names, size_t n, char **saved)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(names[i]);
    }
}

static void env_restore(const char *const *names, size_t n, char **saved)
{
    for (size_t i = 0; i < n; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        else
            unsetenv(names[i]);
        free(saved[i]);
        saved[i] = NULL;
    }
}

static const char *const CERT_VARS[] = {"SSL_CERT_FILE", "SSL_CERT_DIR"};
#define NCERT_VARS (sizeof CERT_VARS / sizeof CERT_VARS[0])

/* A certificate nobody vouches for fails the upload for good, saying how
 * to trust it; SSL_CERT_FILE is one way, ca_file the other. */
static void test_https_trust(void)
{
    test_server *srv = test_server_start_tls();
    CHECK(srv != NULL);
    if (!srv)
        return;
    char *saved[NCERT_VARS];
    env_clear(CERT_VARS, NCERT_VARS, saved);
    uint8_t data[64];
    fill_payload(data, sizeof data);
    pn_upload u = upload_of(data, sizeof data);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        pn_error_clear(&e);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), NULL, &e), PN_SEND_FAIL);
        CHECK(strstr(e.msg, test_server_url(srv)) != NULL);
        CHECK(strstr(e.msg, "SSL_CERT_FILE") != NULL);
        x->destroy(x);
    }
    CHECK_EQ_INT(test_server_count(srv), 0);

    setenv("SSL_CERT_FILE", test_server_ca_file(srv), 1);
    x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), NULL, &e), PN_SEND_OK);
        x->destroy(x);
    }
    /* ca_file wins over the environment. */
    setenv("SSL_CERT_FILE", "/nonexistent/ca.pem", 1);
    o.ca_file = test_server_ca_file(srv);
    x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), NULL, &e), PN_SEND_OK);
        /* Kept alive over TLS as well. */
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(60), NULL, &e), PN_SEND_OK);
        x->destroy(x);
    }
    env_restore(CERT_VARS, NCERT_VARS, saved);
    CHECK_EQ_INT(test_server_count(srv), 3);
    const test_request *r = test_server_request(srv, 2);
    CHECK(r != NULL);
    if (r)
        check_multipart(r, data, sizeof data);
    test_server_stop(srv);
}

static const char *const PROXY_VARS[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                         "all_proxy",  "ALL_PROXY",  "no_proxy",    "NO_PROXY"};
#define NPROXY_VARS (sizeof PROXY_VARS / sizeof PROXY_VARS[0])

/* One upload to `address`; 1 when it went through the proxy, 0 when
 * straight to srv, -1 when it failed. The server checks the body. */
static int route_of(const char *address, test_server *srv, test_proxy *proxy)
{
    size_t np = test_proxy_count(proxy), nd = test_server_count(srv);
    pn_http_opts o = {.server_address = address, .app_name = "app", .ca_file = test_server_ca_file(srv), PATIENT};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    if (!x)
        return -1;
    uint8_t data[200];
    fill_payload(data, sizeof data);
    pn_upload u = upload_of(data, sizeof data);
    pn_send_result r = x->send(x, &u, pn_test_deadline_ns(10), NULL, &e);
    x->destroy(x);
    if (r != PN_SEND_OK) {
        fprintf(stderr, "  upload to %s: %s\n", address, e.msg);
        return -1;
    }
    const test_request *req = test_server_request(srv, nd);
    CHECK(test_server_count(srv) == nd + 1 && req != NULL);
    if (req) {
        /* The origin always sees the origin form. */
        CHECK(strncmp(req->target, "/ingest?name=app&", 17) == 0);
        check_multipart(req, data, sizeof data);
    }
    return test_proxy_count(proxy) == np + 1 ? 1 : test_proxy_count(proxy) == np ? 0 : -1;
}

/* libcurl's own proxy rules apply: http_proxy for http://, https_proxy
 * (a CONNECT tunnel) for https://, no_proxy to go around it. */
static void test_proxies(void)
{
    test_server *srv = test_server_start(), *tls = test_server_start_tls();
    test_proxy *proxy = test_proxy_start();
    char *saved[NPROXY_VARS];
    CHECK(srv && tls && proxy);
    if (srv && tls && proxy) {
        env_clear(PROXY_VARS, NPROXY_VARS, saved);
        char by_ip[64], by_name[64], tls_by_ip[64];
        snprintf(by_ip, sizeof by_ip, "http://127.0.0.1:%d", test_server_port(srv));
        snprintf(by_name, sizeof by_name, "http://localhost:%d", test_server_port(srv));
        snprintf(tls_by_ip, sizeof tls_by_ip, "https://127.0.0.1:%d", test_server_port(tls));

        CHECK_EQ_INT(route_of(by_ip, srv, proxy), 0);
        setenv("http_proxy", test_proxy_url(proxy), 1);
        CHECK_EQ_INT(route_of(by_ip, srv, proxy), 1);
        char want[128];
        snprintf(want, sizeof want, "POST %s/ingest?name=app&", by_ip);
        const char *line = test_proxy_request_line(proxy, 0);
        CHECK(line && strncmp(line, want, strlen(want)) == 0);
        CHECK_EQ_INT(route_of(by_name, srv, proxy), 1);

        static const struct {
            const char *no_proxy;
            int by_name, want;
        } cases[] = {
            {"127.0.0.1", 0, 0},     {"example.com, 127.0.0.1", 0, 0}, {"*", 0, 0},
            {"example.com", 0, 1},   {"localhost", 1, 0},              {".localhost", 1, 0},
            {"calhost", 1, 1},       {"127.0.0.2", 0, 1},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            setenv("no_proxy", cases[i].no_proxy, 1);
            int via = route_of(cases[i].by_name ? by_name : by_ip, srv, proxy);
            if (via != cases[i].want)
                fprintf(stderr, "  no_proxy '%s': via %d\n", cases[i].no_proxy, via);
            CHECK_EQ_INT(via, cases[i].want);
        }
        unsetenv("no_proxy");

        /* https:// takes https_proxy, through a CONNECT tunnel. */
        CHECK_EQ_INT(route_of(tls_by_ip, tls, proxy), 0);
        setenv("https_proxy", test_proxy_url(proxy), 1);
        size_t before = test_proxy_count(proxy);
        CHECK_EQ_INT(route_of(tls_by_ip, tls, proxy), 1);
        snprintf(want, sizeof want, "CONNECT 127.0.0.1:%d HTTP/1.1", test_server_port(tls));
        CHECK_STR(test_proxy_request_line(proxy, before), want);
        setenv("no_proxy", "127.0.0.1", 1);
        CHECK_EQ_INT(route_of(tls_by_ip, tls, proxy), 0);
        env_restore(PROXY_VARS, NPROXY_VARS, saved);
    }
    test_proxy_stop(proxy);
    test_server_stop(srv);
    test_server_stop(tls);
}

/* Servers that answer wrongly forever: each upload ends by itself (at the
 * latest at its deadline, libcurl's timeout set far beyond it) with a
 * failure, and nothing grows without bound. */
static void test_hostile_servers(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    size_t big = 10u << 20;
    char *header = malloc(big + 64);
    char *chunk = malloc(16384 + 16);
    CHECK(header && chunk);
    if (!header || !chunk) {
        free(header);
        free(chunk);
        test_server_stop(srv);
        return;
    }
    /* 1. A huge Content-Length, then bytes without end. */
    static const char huge[] = "HTTP/1.1 503 Busy\r\nContent-Length: 1000000000000\r\n\r\n";
    memset(chunk, 'x', 16384);
    test_server_reply_stream(srv, huge, sizeof huge - 1, chunk, 16384);
    /* 2. A chunked body without end. */
    static const char chunked[] = "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n";
    int cl = snprintf(chunk, 16, "4000\r\n");
    memset(chunk + cl, 'y', 16384);
    memcpy(chunk + cl + 16384, "\r\n", 2);
    test_server_reply_stream(srv, chunked, sizeof chunked - 1, chunk, (size_t)cl + 16384 + 2);
    /* 3. A 10 MB header line. */
    int hl = snprintf(header, 64, "HTTP/1.1 200 OK\r\nX-Big: ");
    memset(header + hl, 'a', big);
    memcpy(header + hl + big, "\r\n\r\n", 4);
    test_server_reply_raw(srv, header, (size_t)hl + big + 4);
    /* 4. "100 Continue" without end. */
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    test_server_reply_stream(srv, "", 0, cont, sizeof cont - 1);
    /* 5. A reply at one byte a second. */
    static const char drip[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    test_server_reply_drip(srv, drip, sizeof drip - 1, 1000);
    /* 6. A redirect to itself. */
    static const char loop[] = "HTTP/1.1 302 Found\r\nLocation: /ingest\r\nContent-Length: 0\r\n\r\n";
    for (int i = 0; i < 3; i++)
        test_server_reply_raw(srv, loop, sizeof loop - 1);
    free(header);
    free(chunk);

    static const struct {
        pn_send_result want;
        const char *needle, *or_needle;
    } cases[] = {
        {PN_SEND_RETRY, "HTTP 503", NULL},
        {PN_SEND_RETRY, "HTTP 500", NULL},
        {PN_SEND_RETRY, "header line", NULL},
        /* libcurl caps all headers of a reply together; under valgrind on a
         * loaded machine the 2 s deadline may come first: bounded either way. */
        {PN_SEND_RETRY, "eader", "deadline"},
        {PN_SEND_RETRY, "deadline", NULL},
        {PN_SEND_FAIL, "HTTP 302", NULL},
    };
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", .timeout_s = 3600};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    uint8_t data[4] = {1, 2, 3, 4};
    pn_upload u = upload_of(data, sizeof data);
    for (size_t i = 0; x && i < sizeof cases / sizeof cases[0]; i++) {
        double t0 = pn_test_now_s();
        pn_error_clear(&e);
        pn_send_result r = x->send(x, &u, pn_test_deadline_ns(2), NULL, &e);
        double took = pn_test_now_s() - t0;
        int named = strstr(e.msg, cases[i].needle) != NULL ||
                    (cases[i].or_needle && strstr(e.msg, cases[i].or_needle) != NULL);
        if (r != cases[i].want || !named)
            fprintf(stderr, "  case %zu: %d after %.2f s: %s\n", i + 1, (int)r, took, e.msg);
        CHECK_EQ_INT(r, cases[i].want);
        CHECK(named);
        CHECK(took < 30.0);
    }
    /* Not followed: one request for the redirect. */
    CHECK_EQ_INT(test_server_count(srv), 6);
    if (x)
        x->destroy(x);
    test_server_stop(srv);
}

/* Through the queue, against servers that never finish answering (or, for
 * the "100 Continue" flood, until libcurl gives up): stop aborts the
 * upload in flight and returns without waiting for its 60 s budget (the
 * exporter's own timeout set longer still). */
static void test_hostile_stop(void)
{
    for (int kind = 0; kind < 3; kind++) {
        test_server *srv = test_server_start();
        CHECK(srv != NULL);
        if (!srv)
            return;
        static const char drip[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (kind == 0)
            test_server_reply_drip(srv, drip, sizeof drip - 1, 1000);
        else if (kind == 1)
            test_server_reply_stream(srv, "", 0, cont, sizeof cont - 1);
        else
            test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
        pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", .timeout_s = 3600};
        pn_error e;
        pn_exporter *x = pn_http_exporter_new(&o, &e);
        pn_queue_opts qo = {.max_attempts = 1};
        pn_queue *q = x ? pn_queue_new(&qo, &x, 1, &e) : NULL;
        CHECK(q != NULL);
        if (q) {
            pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
            CHECK_EQ_INT(test_server_wait(srv, 1, 60), 1);
            double t0 = pn_test_now_s();
            pn_queue_stats st;
            pn_queue_stop_stats(q, 0.2, &st);
            double took = pn_test_now_s() - t0;
            if (took >= 30.0)
                fprintf(stderr, "  kind %d: stop took %.2f s\n", kind, took);
            CHECK(took < 30.0);
            CHECK_EQ_INT(st.uploads_ok, 0);
        } else if (x) {
            x->destroy(x);
        }
        test_server_stop(srv);
    }
}

TEST_MAIN(T(test_url_format), T(test_bad_options_rejected), T(test_request_shape), T(test_https_request_shape),
          T(test_no_auth_no_tenant), T(test_status_mapping), T(test_error_body_sanitized),
          T(test_no_answer_until_deadline), T(test_deadline_already_passed), T(test_closed_port),
          T(test_abort_from_other_thread), T(test_header_override), T(test_address_credentials),
          T(test_large_profile), T(test_https_large_profile),
          T(test_queue_retry_and_stop), T(test_keep_alive), T(test_fork), T(test_fork_during_upload), T(test_https_trust), T(test_proxies),
          T(test_hostile_servers), T(test_hostile_stop))
