/* The Pyroscope HTTP exporter against the test server on 127.0.0.1: the
 * ingest URL, the multipart body, auth and headers, status mapping,
 * deadlines and aborts. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "pyroscope_native.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t mono_ns_after(double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + (int64_t)(s * 1e9);
}

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
}

static void test_bad_options_rejected(void)
{
    uint8_t d[1] = {0};
    pn_upload u = upload_of(d, 1);
    pn_label bad_tag[] = {{"env", "a,b"}};
    pn_label bad_header[] = {{"X-Evil", "a\r\nInjected: 1"}};
    pn_label bad_header_name[] = {{"X Bad", "v"}};
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
    CHECK_EQ_INT(x->send(x, &u, mono_ns_after(5), &abort_flag, &e), PN_SEND_OK);
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
        CHECK_STR(test_request_header(r, "X-Scope-OrgID"), "tenant-1");
        CHECK_STR(test_request_header(r, "X-Extra"), "v1");
        CHECK_STR(test_request_header(r, "X-Other"), "two words");
        check_multipart(r, data, sizeof data);
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
        CHECK_EQ_INT(x->send(x, &u, mono_ns_after(5), NULL, &e), PN_SEND_OK);
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
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[4] = {1, 2, 3, 4};
        pn_upload u = upload_of(data, sizeof data);
        for (size_t i = 0; i < n; i++) {
            pn_error_clear(&e);
            pn_send_result r = x->send(x, &u, mono_ns_after(5), NULL, &e);
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
        CHECK_EQ_INT(x->send(x, &u, mono_ns_after(5), NULL, &e), PN_SEND_FAIL);
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
        double t0 = now_s();
        CHECK_EQ_INT(x->send(x, &u, mono_ns_after(0.3), &abort_flag, &e), PN_SEND_RETRY);
        double took = now_s() - t0;
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
            t0 = now_s();
            CHECK_EQ_INT(x->send(x, &u, mono_ns_after(30), &abort_flag, &e), PN_SEND_RETRY);
            took = now_s() - t0;
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
        CHECK_EQ_INT(x->send(x, &u, mono_ns_after(-1), NULL, &e), PN_SEND_RETRY);
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
    double t0 = now_s();
    CHECK_EQ_INT(x->send(x, &u, mono_ns_after(5), NULL, &e), PN_SEND_RETRY);
    CHECK(now_s() - t0 < 2.0);
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
        double t0 = now_s();
        CHECK_EQ_INT(x->send(x, &u, mono_ns_after(10), &flag, &e), PN_SEND_RETRY);
        double took = now_s() - t0;
        pthread_join(t, NULL);
        CHECK(took >= 0.15);
        CHECK(took < 1.0);
        CHECK(strstr(e.msg, "aborted") != NULL);
        x->destroy(x);
    }
    test_server_stop(srv);
}

TEST_MAIN(T(test_url_format), T(test_bad_options_rejected), T(test_request_shape),
          T(test_no_auth_no_tenant), T(test_status_mapping), T(test_error_body_sanitized),
          T(test_no_answer_until_deadline), T(test_deadline_already_passed), T(test_closed_port),
          T(test_abort_from_other_thread))
