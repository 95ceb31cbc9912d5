/* The HTTP exporter with a binding's sender (pn_http_set_sender): libcurl
 * is not loaded while the sender sends; the sender gets the ingest upload
 * as the raw gzip'ed pprof body with format=pprof in the query (libcurl's
 * URL otherwise), libcurl's header lines, credentials and timeouts; its
 * answers map to the same results as libcurl's; when it declines, libcurl
 * sends the multipart request (no format=pprof) to the test server on
 * 127.0.0.1. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "http_server.h"
#include "queue_helper.h"
#include "pyroscope_native.h"
#include "export/exporter.h"
#include "aggregation/profile.h"

static char app_cpu[] = "app", type_cpu[] = "cpu";

/* What the recording sender saw last, and how it answers. Test thread
 * only (the exporter's send runs on the caller's thread here). */
static struct {
    int calls;
    char url[1024];
    char headers[2048];         /* "Name: value\n" lines */
    char user[64], password[64], ca[256];
    uint8_t *body;
    size_t body_len;
    double timeout_s, connect_timeout_s;
    const volatile int *abort;
    int rc;                     /* PN_SENDER_* to return */
    long status;
    const char *text;           /* reply (ANSWERED) or error (FAILED) */
} rec;

static int recording_sender(void *ud, const pn_http_request *r, int64_t deadline_ns,
                            const volatile int *abort, pn_http_response *out)
{
    (void)ud, (void)deadline_ns;
    rec.calls++;
    snprintf(rec.url, sizeof rec.url, "%s", r->url);
    rec.headers[0] = '\0';
    for (size_t i = 0; i < r->nheaders; i++) {
        size_t n = strlen(rec.headers);
        snprintf(rec.headers + n, sizeof rec.headers - n, "%s: %s\n", r->headers[i].key,
                 r->headers[i].value);
    }
    snprintf(rec.user, sizeof rec.user, "%s", r->basic_auth_user ? r->basic_auth_user : "");
    snprintf(rec.password, sizeof rec.password, "%s", r->basic_auth_password ? r->basic_auth_password : "");
    snprintf(rec.ca, sizeof rec.ca, "%s", r->ca_file ? r->ca_file : "");
    free(rec.body);
    rec.body = malloc(r->body_len ? r->body_len : 1);
    memcpy(rec.body, r->body, r->body_len);
    rec.body_len = r->body_len;
    rec.timeout_s = r->timeout_s;
    rec.connect_timeout_s = r->connect_timeout_s;
    rec.abort = abort;
    out->status = rec.status > 0 ? rec.status : 0;
    out->permanent = rec.status < 0;   /* tests' shorthand */
    if (rec.rc == PN_SENDER_ANSWERED)
        snprintf(out->reply, sizeof out->reply, "%s", rec.text ? rec.text : "");
    else if (rec.rc == PN_SENDER_FAILED || rec.rc == PN_SENDER_UNCONFIRMED)
        snprintf(out->error, sizeof out->error, "%s", rec.text ? rec.text : "");
    return rec.rc;
}

static void answer(int rc, long status, const char *text)
{
    rec.rc = rc;
    rec.status = status;
    rec.text = text;
}

static int curl_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libcurl"))
            found = 1;
    if (f)
        fclose(f);
    return found;
}

static pn_upload upload_of(uint8_t *data, size_t len)
{
    pn_upload u = {.app_name = app_cpu, .profile_type = type_cpu, .from_s = 1700000000,
                   .until_s = 1700000010, .sample_rate = 100, .data = data, .len = len};
    return u;
}

/* An HTTP exporter that sends through recording_sender (NULL, with the
 * reason printed, when it cannot be made). */
static pn_exporter *sender_exporter(const pn_http_opts *o)
{
    pn_http_set_sender(recording_sender, NULL);
    pn_error e;
    pn_error_clear(&e);
    pn_exporter *x = pn_http_exporter_new(o, &e);
    CHECK(x != NULL);
    if (!x)
        fprintf(stderr, "  %s\n", e.msg);
    return x;
}

/* The first one: nothing has loaded libcurl in this process yet. */
static void test_same_request_without_libcurl(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    CHECK(!curl_mapped());
    pn_label tags[] = {{"env", "prod"}};
    pn_label headers[] = {{"X-Extra", "v 1"}};
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app", .tags = tags,
                      .ntags = 1, .spy_name = "nodespy", .basic_auth_user = "u",
                      .basic_auth_password = "pw", .tenant_id = "t1", .headers = headers,
                      .nheaders = 1, .timeout_s = 7};
    pn_error e;
    pn_error_clear(&e);
    pn_exporter *x = sender_exporter(&o);
    if (!x) {
        test_server_stop(srv);
        return;
    }
    CHECK(!curl_mapped());
    uint8_t data[64];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 37 + 1);
    memcpy(data + 8, "\r\n--\r\n", 6);
    pn_upload u = upload_of(data, sizeof data);
    answer(PN_SENDER_ANSWERED, 200, "ok");
    volatile int abort_flag = 0;
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), &abort_flag, &e), PN_SEND_OK);
    CHECK_EQ_INT(rec.calls, 1);
    CHECK(rec.abort == &abort_flag);
    CHECK(!curl_mapped());
    /* The sender's shape: the profile is the body, format=pprof says so. */
    char want[512];
    snprintf(want, sizeof want,
             "%s/ingest?name=app%%7Benv%%3Dprod%%7D&from=1700000000&until=1700000010&sampleRate=100"
             "&spyName=nodespy", test_server_url(srv));
    char want_sender[600];
    snprintf(want_sender, sizeof want_sender, "%s&format=pprof", want);
    CHECK_STR(rec.url, want_sender);
    CHECK(strstr(rec.headers, "Content-Type: application/octet-stream\n") != NULL);
    CHECK(strstr(rec.headers, "multipart") == NULL);
    CHECK(strstr(rec.headers, "User-Agent: pyroscope-native\n") != NULL);
    CHECK(strstr(rec.headers, "X-Scope-OrgID: t1\n") != NULL);
    CHECK(strstr(rec.headers, "X-Extra: v 1\n") != NULL);
    CHECK(strstr(rec.headers, "Content-Encoding") == NULL);
    CHECK_STR(rec.user, "u");
    CHECK_STR(rec.password, "pw");
    CHECK(rec.timeout_s == 7 && rec.connect_timeout_s == 5);
    CHECK(rec.body_len == sizeof data && memcmp(rec.body, data, sizeof data) == 0);

    /* Declined: libcurl sends it as before: multipart, no format=pprof. */
    answer(PN_SENDER_DECLINED, 0, NULL);
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
    CHECK_EQ_INT(rec.calls, 2);
    CHECK(curl_mapped());
    const test_request *r = test_server_request(srv, 0);
    CHECK(r != NULL);
    if (r) {
        const char *path = strstr(want, "/ingest?");
        CHECK_STR(r->target, path ? path : "");
        CHECK(strstr(r->target, "format=") == NULL);
        CHECK_STR(test_request_header(r, "User-Agent"), "pyroscope-native");
        CHECK_STR(test_request_header(r, "X-Extra"), "v 1");
        CHECK_STR(test_request_header(r, "X-Scope-OrgID"), "t1");
        const char *ct = test_request_header(r, "Content-Type");
        CHECK(ct && strncmp(ct, "multipart/form-data; boundary=", 30) == 0);
        CHECK(memmem(r->body, r->body_len, "name=\"profile\"; filename=\"profile.pprof\"", 40) != NULL);
        CHECK(memmem(r->body, r->body_len, data, sizeof data) != NULL);
        CHECK(r->body_len > sizeof data + 100);
    }
    x->destroy(x);
    test_server_stop(srv);
    pn_http_set_sender(NULL, NULL);
}

/* The sender's answers, mapped as libcurl's are. */
static void test_answers(void)
{
    pn_http_opts o = {.server_address = "http://127.0.0.1:9/", .app_name = "app"};
    pn_exporter *x = sender_exporter(&o);
    if (!x)
        return;
    pn_error e;
    uint8_t data[4] = {1, 2, 3, 4};
    pn_upload u = upload_of(data, sizeof data);
    int calls = rec.calls;

    static const struct {
        int rc;
        long status;
        const char *text;
        pn_send_result want;
        const char *msg;        /* in the error message */
    } cases[] = {
        {PN_SENDER_ANSWERED, 500, "oops\n  <b>down</b>", PN_SEND_RETRY, "HTTP 500: oops <b>down</b>"},
        {PN_SENDER_ANSWERED, 429, "", PN_SEND_RETRY, "HTTP 429: (empty body)"},
        {PN_SENDER_ANSWERED, 400, "bad", PN_SEND_FAIL, "HTTP 400: bad"},
        {PN_SENDER_ANSWERED, 302, "moved", PN_SEND_FAIL, "redirects are not followed"},
        {PN_SENDER_FAILED, 0, "connect ECONNREFUSED 127.0.0.1:9", PN_SEND_RETRY,
         "upload to http://127.0.0.1:9 failed: connect ECONNREFUSED"},
        {PN_SENDER_ANSWERED, 204, "", PN_SEND_OK, ""},
        /* permanent: a refused certificate */
        {PN_SENDER_FAILED, -1, "self-signed certificate", PN_SEND_FAIL, "failed: self-signed certificate"},
        /* sent whole, the process exits before the answer: not resent */
        {PN_SENDER_UNCONFIRMED, 0, "sent; the process exits", PN_SEND_UNCONFIRMED,
         "upload to http://127.0.0.1:9: sent; the process exits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        answer(cases[i].rc, cases[i].status, cases[i].text);
        pn_error_clear(&e);
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), cases[i].want);
        CHECK(strstr(e.msg, cases[i].msg) != NULL);
    }
    CHECK_EQ_INT(rec.calls, calls + 8);
    /* Aborted or past its deadline: the sender is not asked. */
    volatile int stop = 1;
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), &stop, &e), PN_SEND_RETRY);
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(-1), NULL, &e), PN_SEND_RETRY);
    CHECK_EQ_INT(rec.calls, calls + 8);
    x->destroy(x);
    pn_http_set_sender(NULL, NULL);
}

/* Sent whole, its answer never read (the process exits): the queue does
 * not send it again and counts it apart, neither ok nor failed. */
static void test_unconfirmed_counted_not_resent(void)
{
    pn_http_opts o = {.server_address = "http://127.0.0.1:9/", .app_name = "app"};
    pn_exporter *x = sender_exporter(&o);
    if (!x)
        return;
    pn_error e;
    pn_error_clear(&e);
    pn_queue_opts qo = {.backoff_initial_s = 0.01, .backoff_max_s = 0.05};
    pn_queue *q = pn_queue_new(&qo, &x, 1, &e);
    CHECK(q != NULL);
    if (!q) {
        x->destroy(x);
        pn_http_set_sender(NULL, NULL);
        return;
    }
    answer(PN_SENDER_UNCONFIRMED, 0, "sent; the process exits before the answer");
    int calls = rec.calls;
    pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 2));
    CHECK_EQ_INT(pn_queue_flush(q, 10), 0);
    pn_queue_stats st;
    pn_queue_get_stats(q, &st);
    CHECK_EQ_INT(rec.calls, calls + 1);
    CHECK_EQ_INT(st.uploads_unconfirmed, 1);
    CHECK_EQ_INT(st.uploads_ok, 0);
    CHECK_EQ_INT(st.uploads_failed, 0);
    CHECK_EQ_INT(st.uploads_dropped, 0);
    CHECK_EQ_INT(st.retries, 0);
    CHECK_EQ_INT(st.exporters[0].sent, 0);
    CHECK_EQ_INT(st.exporters[0].failed, 0);
    pn_queue_stop(q, 1);
    pn_http_set_sender(NULL, NULL);
}

/* The OTLP exporter's transport: the payload is the body, as given. */
static void test_raw_body(void)
{
    pn_http_opts o = {.server_address = "https://otlp.example:4318/v1development/profiles",
                      .app_name = "app", .raw_content_type = "application/x-protobuf",
                      .ca_file = "/tmp/ca.pem"};
    pn_exporter *x = sender_exporter(&o);
    if (!x)
        return;
    pn_error e;
    pn_error_clear(&e);
    uint8_t data[5] = {0x1f, 0x8b, 0, 9, 7};
    pn_upload u = upload_of(data, sizeof data);
    answer(PN_SENDER_ANSWERED, 200, "");
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
    CHECK_STR(rec.url, "https://otlp.example:4318/v1development/profiles"); /* no format=pprof */
    CHECK(strstr(rec.headers, "Content-Type: application/x-protobuf\n") != NULL);
    CHECK(strstr(rec.headers, "Content-Encoding: gzip\n") != NULL);
    CHECK_STR(rec.ca, "/tmp/ca.pem");
    CHECK(rec.body_len == sizeof data && memcmp(rec.body, data, sizeof data) == 0);
    x->destroy(x);
    pn_http_set_sender(NULL, NULL);
}

/* Bad addresses are still refused when the exporter is made. */
static void test_bad_address(void)
{
    pn_http_set_sender(recording_sender, NULL);
    const char *bad[] = {"ftp://h", "http://", "http://h/x?y=1", "http://h x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pn_http_opts o = {.server_address = bad[i], .app_name = "app"};
        pn_error e;
        pn_error_clear(&e);
        pn_exporter *x = pn_http_exporter_new(&o, &e);
        CHECK(x == NULL);
        CHECK(strstr(e.msg, "server_address") != NULL);
        if (x)
            x->destroy(x);
    }
    pn_http_set_sender(NULL, NULL);
}

static void test_cleanup(void)
{
    free(rec.body);
    rec.body = NULL;
}

TEST_MAIN(T(test_same_request_without_libcurl), T(test_answers),
          T(test_unconfirmed_counted_not_resent), T(test_raw_body),
          T(test_bad_address), T(test_cleanup))
