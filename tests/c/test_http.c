/* The Pyroscope HTTP exporter against the test server on 127.0.0.1: the
 * ingest URL, the multipart body, auth and headers, status mapping,
 * deadlines and aborts, the proxy rule. The upload tests run twice: with
 * the built-in client and with libcurl (pn_http_force_libcurl). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "queue_helper.h"
#include "pyroscope_native.h"
#include "export/exporter.h"

static char app_cpu[] = "app", type_cpu[] = "cpu";

/* The transport the running test forces (test thread only). */
static int via_curl;

static void use_transport(int curl)
{
    via_curl = curl;
    pn_http_force_libcurl(curl);
}

/* Which transport sent r: libcurl adds "Accept: * / *" on its own, the
 * built-in client sends no Accept. */
static void check_transport(const test_request *r)
{
    const char *accept = test_request_header(r, "Accept");
    if (via_curl)
        CHECK(accept && strcmp(accept, "*/*") == 0);
    else
        CHECK(accept == NULL);
}

/* test_x_builtin and test_x_curl run test_x with each transport. */
#define BOTH(fn)                                                                                   \
    static void fn##_builtin(void)                                                                 \
    {                                                                                              \
        use_transport(0);                                                                          \
        fn();                                                                                      \
    }                                                                                              \
    static void fn##_curl(void)                                                                    \
    {                                                                                              \
        use_transport(1);                                                                          \
        fn();                                                                                      \
        use_transport(0);                                                                          \
    }
#define T2(fn) T(fn##_builtin), T(fn##_curl)

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
        {{.server_address = "http://h:99999", .app_name = "a"}, "port '99999'"},
        {{.server_address = "http://[::1/x", .app_name = "a"}, "']'"},
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

static void test_request_shape(void)
{
    test_server *srv = test_server_start();
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
                      .headers = headers, .nheaders = 2};
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
        check_transport(r);
        const char *ct = test_request_header(r, "Content-Type");
        if (!via_curl && ct) {
            /* The built-in client's request head, byte for byte. */
            char want[1024];
            snprintf(want, sizeof want,
                     "POST /pfx/ingest?name=app%%7Benv%%3Dprod%%7D&from=1700000000&until=1700000010"
                     "&sampleRate=100&spyName=pyspy HTTP/1.1\r\n"
                     "Host: 127.0.0.1:%d\r\nUser-Agent: pyroscope-native\r\n"
                     "Authorization: Basic dXNlcjpwYSBzcw==\r\nX-Scope-OrgID: tenant-1\r\n"
                     "X-Extra: v1\r\nX-Other: two words\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     test_server_port(srv), ct, r->body_len);
            CHECK_STR(r->head, want);
        }
    }
    x->destroy(x);
    test_server_stop(srv);
}

static void test_no_auth_no_tenant(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "a-b/c"};
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
            check_transport(r);
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
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
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
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
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
        CHECK(took < 2.0);
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
            CHECK(took < 2.0);
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
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
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
    pn_http_opts o = {.server_address = url, .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x)
        return;
    uint8_t data[4] = {1, 2, 3, 4};
    pn_upload u = upload_of(data, sizeof data);
    pn_error_clear(&e);
    double t0 = pn_test_now_s();
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_RETRY);
    CHECK(pn_test_now_s() - t0 < 2.0);
    CHECK_EQ_INT(e.code, PN_EIO);
    CHECK(strstr(e.msg, url) != NULL);
    x->destroy(x);
}

typedef struct {
    volatile int *flag;
    int after_ms;
} aborter;

static void *abort_later(void *arg)
{
    aborter *a = arg;
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
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        volatile int flag = 0;
        aborter a = {&flag, 200};
        pthread_t t;
        CHECK_EQ_INT(pthread_create(&t, NULL, abort_later, &a), 0);
        double t0 = pn_test_now_s();
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), &flag, &e), PN_SEND_RETRY);
        double took = pn_test_now_s() - t0;
        pthread_join(t, NULL);
        CHECK(took >= 0.15);
        CHECK(took < 1.0);
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
                      .headers = headers, .nheaders = 4};
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
            check_transport(r);
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
    pn_http_opts o = {.server_address = addr, .app_name = "app"};
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
            check_transport(r);
        }
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_FAIL);
        CHECK(strstr(e.msg, test_server_url(srv)) != NULL);
        CHECK(strstr(e.msg, "p%3Aw") == NULL && strstr(e.msg, "us%40er") == NULL);
        x->destroy(x);
    }
    test_server_stop(srv);
}

/* A profile of several MiB with multipart-looking bytes arrives intact. */
static void test_large_profile(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);
    CHECK(data != NULL);
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
    pn_error e;
    pn_exporter *x = data ? pn_http_exporter_new(&o, &e) : NULL;
    CHECK(x != NULL);
    if (x) {
        fill_payload(data, n);
        pn_upload u = upload_of(data, n);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(30), NULL, &e), PN_SEND_OK);
        const test_request *r = test_server_request(srv, 0);
        CHECK(r != NULL);
        if (r)
            check_multipart(r, data, n);
        x->destroy(x);
    }
    free(data);
    test_server_stop(srv);
}

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
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
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
    CHECK_EQ_INT(test_server_wait(srv, 5, pn_test_timing_strict() ? 10 : 60), 5);
    double t0 = pn_test_now_s();
    pn_queue_stats st;
    pn_queue_stop_stats(q, 0.2, &st);
    double took = pn_test_now_s() - t0;
    if (pn_test_timing_strict())
        CHECK(took < 1.5);
    CHECK_EQ_INT(st.uploads_ok, 1);
    CHECK_EQ_INT(st.uploads_failed, 1);
    CHECK_EQ_INT(st.uploads_dropped, 1);
    CHECK_EQ_INT(st.retries, 2);
    const test_request *r = test_server_request(srv, 4);
    if (r)
        check_transport(r);
    test_server_stop(srv);
}

static void test_https_goes_to_libcurl(void)
{
    int port = test_free_port();
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", port);
    pn_http_opts o = {.server_address = url, .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x)
        return;
    uint8_t data[4] = {1, 2, 3, 4};
    pn_upload u = upload_of(data, sizeof data);
    /* The built-in client would call https a permanent failure; libcurl
     * tries to connect and is refused, which is worth a retry. */
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_RETRY);
    CHECK_EQ_INT(e.code, PN_EIO);
    CHECK(strstr(e.msg, url) != NULL);
    CHECK(strstr(e.msg, "onnect") != NULL);
    x->destroy(x);
}

/* The proxy variables, saved and restored around test_proxy_rule. */
static const char *const PROXY_VARS[] = {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY",
                                         "no_proxy",   "NO_PROXY",   "https_proxy", "HTTPS_PROXY"};
#define NPROXY_VARS (sizeof PROXY_VARS / sizeof PROXY_VARS[0])

static void set_env(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* Sends one upload to `address`; returns the target the proxy (1) or the
 * direct server (0) saw, or -1 when the upload failed or went elsewhere. */
static int route_of(const char *address, test_server *proxy, test_server *direct, int *curl_used)
{
    size_t np = test_server_count(proxy), nd = test_server_count(direct);
    pn_http_opts o = {.server_address = address, .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    if (!x)
        return -1;
    uint8_t data[2] = {1, 2};
    pn_upload u = upload_of(data, sizeof data);
    pn_send_result r = x->send(x, &u, pn_test_deadline_ns(5), NULL, &e);
    x->destroy(x);
    if (r != PN_SEND_OK) {
        fprintf(stderr, "  upload to %s: %s\n", address, e.msg);
        return -1;
    }
    int via = -1;
    const test_request *req = NULL;
    if (test_server_count(proxy) == np + 1 && test_server_count(direct) == nd) {
        via = 1;
        req = test_server_request(proxy, np);
        /* A proxy gets the absolute URL as the request target. */
        CHECK(req && strncmp(req->target, "http://", 7) == 0);
    } else if (test_server_count(direct) == nd + 1 && test_server_count(proxy) == np) {
        via = 0;
        req = test_server_request(direct, nd);
        CHECK(req && req->target[0] == '/');
    }
    *curl_used = req && test_request_header(req, "Accept") != NULL;
    return via;
}

static void test_proxy_rule(void)
{
    use_transport(0);
    test_server *proxy = test_server_start(), *direct = test_server_start();
    CHECK(proxy && direct);
    char *saved[NPROXY_VARS];
    for (size_t i = 0; i < NPROXY_VARS; i++) {
        const char *v = getenv(PROXY_VARS[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(PROXY_VARS[i]);
    }
    if (proxy && direct) {
        char by_ip[64], by_name[64];
        snprintf(by_ip, sizeof by_ip, "http://127.0.0.1:%d", test_server_port(direct));
        snprintf(by_name, sizeof by_name, "http://localhost:%d", test_server_port(direct));
        static const struct {
            const char *var, *value;    /* the proxy variable set */
            const char *no_proxy, *NO_PROXY;
            int by_name;
            int want_proxy, want_curl;
        } cases[] = {
            {NULL, NULL, NULL, NULL, 0, 0, 0},                       /* no proxy: built-in */
            {"http_proxy", "P", NULL, NULL, 0, 1, 1},
            {"all_proxy", "P", NULL, NULL, 0, 1, 1},
            {"ALL_PROXY", "P", NULL, NULL, 0, 1, 1},
            {"http_proxy", "P", "example.com, 127.0.0.1", NULL, 0, 0, 0},
            {"http_proxy", "P", "*", NULL, 0, 0, 0},
            {"http_proxy", "P", "127.0.0.2,0.0.1", NULL, 0, 1, 1}, /* addresses match whole */
            {"http_proxy", "P", NULL, "127.0.0.1", 0, 0, 0},       /* NO_PROXY when no_proxy unset */
            {"http_proxy", "P", "", "127.0.0.1", 0, 0, 0},         /* empty no_proxy: as unset */
            {"http_proxy", "", NULL, NULL, 0, 0, 0},                /* empty proxy: as unset */
            {"http_proxy", "P", "LOCALHOST", NULL, 1, 0, 0},
            {"http_proxy", "P", ".localhost", NULL, 1, 0, 0},
            {"http_proxy", "P", "calhost", NULL, 1, 1, 1},         /* not a domain boundary */
            {"http_proxy", "P", "[::1],127.0.0.1", NULL, 0, 0, 0},
            /* Upper-case HTTP_PROXY sends the request to libcurl, which
             * (by design, "httpoxy") ignores it and connects directly. */
            {"HTTP_PROXY", "P", NULL, NULL, 0, 0, 1},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            for (size_t j = 0; j < NPROXY_VARS; j++)
                unsetenv(PROXY_VARS[j]);
            if (cases[i].var)
                setenv(cases[i].var, *cases[i].value ? test_server_url(proxy) : "", 1);
            set_env("no_proxy", cases[i].no_proxy);
            set_env("NO_PROXY", cases[i].NO_PROXY);
            int curl_used = -1;
            int via = route_of(cases[i].by_name ? by_name : by_ip, proxy, direct, &curl_used);
            if (via != cases[i].want_proxy || curl_used != cases[i].want_curl)
                fprintf(stderr, "  case %zu: via %s, %s\n", i, via == 1 ? "proxy" : via == 0 ? "direct" : "?",
                        curl_used ? "libcurl" : "built-in");
            CHECK_EQ_INT(via, cases[i].want_proxy);
            CHECK_EQ_INT(curl_used, cases[i].want_curl);
        }
    }
    for (size_t i = 0; i < NPROXY_VARS; i++) {
        set_env(PROXY_VARS[i], saved[i]);
        free(saved[i]);
    }
    test_server_stop(proxy);
    test_server_stop(direct);
}

BOTH(test_request_shape)
BOTH(test_no_auth_no_tenant)
BOTH(test_status_mapping)
BOTH(test_error_body_sanitized)
BOTH(test_no_answer_until_deadline)
BOTH(test_deadline_already_passed)
BOTH(test_closed_port)
BOTH(test_abort_from_other_thread)
BOTH(test_header_override)
BOTH(test_address_credentials)
BOTH(test_large_profile)
BOTH(test_queue_retry_and_stop)

TEST_MAIN(T(test_url_format), T(test_bad_options_rejected), T2(test_request_shape),
          T2(test_no_auth_no_tenant), T2(test_status_mapping), T2(test_error_body_sanitized),
          T2(test_no_answer_until_deadline), T2(test_deadline_already_passed), T2(test_closed_port),
          T2(test_abort_from_other_thread), T2(test_header_override), T2(test_address_credentials),
          T2(test_large_profile), T2(test_queue_retry_and_stop), T(test_https_goes_to_libcurl),
          T(test_proxy_rule))
