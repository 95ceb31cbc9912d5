/* libcurl, loaded when the first HTTP exporter is made: a missing or wrong
 * library fails that (so configure fails) with a message naming the
 * library and the package to install; the folder exporter needs none; a
 * later load still works; a binding's fallback sender sends only while
 * libcurl is missing. Its own executable: the loader's state is per
 * process. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "export/curl_loader.h"
#include "http_server.h"
#include "pyroscope_native.h"
#include "export/exporter.h"

static void test_missing_libcurl(void)
{
    pn_curl_loader_set_name_for_tests("libpn-no-such-curl.so.4");
    pn_error e;
    pn_error_clear(&e);
    CHECK(pn_curl_load(&e) == NULL);
    CHECK(strstr(e.msg, "cannot load libcurl (libcurl.so.4)") != NULL);
    CHECK(strstr(e.msg, "libpn-no-such-curl.so.4") != NULL);
    CHECK(strstr(e.msg, "libcurl4 package") != NULL);

    /* The exporter is not made, for http:// and https:// alike. */
    static const char *const addresses[] = {"http://127.0.0.1:4040", "https://127.0.0.1:4040"};
    for (size_t i = 0; i < 2; i++) {
        pn_http_opts o = {.server_address = addresses[i], .app_name = "app"};
        pn_error_clear(&e);
        CHECK(pn_http_exporter_new(&o, &e) == NULL);
        CHECK_EQ_INT(e.code, PN_EIO);
        CHECK(strstr(e.msg, "libcurl.so.4") != NULL);
        CHECK(strstr(e.msg, "libcurl4") != NULL);
    }

    /* Writing profiles to a folder needs no libcurl. */
    char dir[] = "/tmp/pn-curl-loader-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pn_exporter *f = pn_folder_exporter_new(dir, &e);
    CHECK(f != NULL);
    if (f)
        f->destroy(f);
    rmdir(dir);
}

/* The fallback sender: used, for every request, only while libcurl cannot
 * be loaded (the exporter is then made); test_loads_after_failure checks it
 * is left alone once libcurl loads. */
static int fallback_calls;

static int fallback_sender(void *ud, const pn_http_request *r, int64_t deadline_ns,
                           const volatile int *abort, pn_http_response *out)
{
    (void)ud, (void)deadline_ns, (void)abort;
    fallback_calls++;
    CHECK(strstr(r->url, "format=pprof") != NULL);
    out->status = 200;
    return PN_SENDER_ANSWERED;
}

static void test_fallback_sender(void)
{
    pn_curl_loader_set_name_for_tests("libpn-no-such-curl.so.4");
    CHECK(!pn_http_libcurl_available());
    pn_http_set_fallback_sender(fallback_sender, NULL);
    pn_error e;
    pn_error_clear(&e);
    pn_http_opts o = {.server_address = "http://127.0.0.1:9", .app_name = "app"};
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x) {
        fprintf(stderr, "  %s\n", e.msg);
        return;
    }
    uint8_t data[3] = {1, 2, 3};
    pn_upload u = {.app_name = "app", .profile_type = "cpu", .from_s = 1, .until_s = 2,
                   .sample_rate = 100, .data = data, .len = sizeof data};
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
    CHECK_EQ_INT(fallback_calls, 1);
    x->destroy(x);
}

/* The relay (a runtime's own thread sends): with no thread attached a
 * request fails at once; an attached thread gets a copy of the request
 * (raw pprof, format=pprof) and its answer is the exporter's result. */
static void *relay_worker(void *arg)
{
    (void)arg;
    pn_http_relayed *r = pn_http_relay_next(10);
    CHECK(r != NULL);
    if (r) {
        CHECK(strstr(r->req.url, "format=pprof") != NULL);
        CHECK_EQ_INT((int)r->req.body_len, 3);
        pn_http_relay_done(r->id, 200, "ok", 2, NULL, 0);
        pn_http_relay_free(r);
    }
    return NULL;
}

static void test_relay(void)
{
    pn_curl_loader_set_name_for_tests("libpn-no-such-curl.so.4");
    pn_http_relay_install();
    pn_error e;
    pn_error_clear(&e);
    pn_http_opts o = {.server_address = "http://127.0.0.1:9", .app_name = "app"};
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x)
        return;
    uint8_t data[3] = {1, 2, 3};
    pn_upload u = {.app_name = "app", .profile_type = "cpu", .from_s = 1, .until_s = 2,
                   .sample_rate = 100, .data = data, .len = sizeof data};
    CHECK(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e) != PN_SEND_OK);
    CHECK(strstr(e.msg, "sender thread is not running") != NULL);
    pn_http_relay_attach(1);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, relay_worker, NULL) == 0);
    pn_error_clear(&e);
    CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
    pthread_join(t, NULL);
    pn_http_relay_attach(0);
    x->destroy(x);
    pn_http_set_fallback_sender(fallback_sender, NULL);
}

/* A library that is not libcurl is named, with the function it lacks. */
static void test_wrong_library(void)
{
    pn_curl_loader_set_name_for_tests("libz.so.1");
    pn_error e;
    pn_error_clear(&e);
    CHECK(pn_curl_load(&e) == NULL);
    CHECK(strstr(e.msg, "libz.so.1 lacks curl_global_init") != NULL);
}

/* Failures are not remembered: the real libcurl loads afterwards, once,
 * and uploads work. */
static void test_loads_after_failure(void)
{
    pn_curl_loader_set_name_for_tests(NULL);
    pn_error e;
    pn_error_clear(&e);
    const pn_curl_api *a = pn_curl_load(&e);
    CHECK(a != NULL);
    CHECK_STR(e.msg, "");
    if (!a)
        return;
    CHECK(a->easy_init && a->easy_setopt && a->easy_getinfo && a->easy_cleanup && a->easy_strerror);
    CHECK(a->multi_init && a->multi_add_handle && a->multi_remove_handle && a->multi_perform);
    CHECK(a->multi_poll && a->multi_info_read && a->multi_cleanup && a->multi_strerror);
    CHECK(a->slist_append && a->slist_free_all);
    CHECK(a->mime_init && a->mime_addpart && a->mime_name && a->mime_filename && a->mime_type);
    CHECK(a->mime_data_cb && a->mime_free && a->url && a->url_set && a->url_cleanup);
    CHECK(pn_curl_load(&e) == a);
    /* Once loaded, the test name no longer matters. */
    pn_curl_loader_set_name_for_tests("libpn-no-such-curl.so.4");
    CHECK(pn_curl_load(&e) == a);
    pn_curl_loader_set_name_for_tests(NULL);

    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        uint8_t data[3] = {1, 2, 3};
        pn_upload u = {.app_name = "app", .profile_type = "cpu", .from_s = 1, .until_s = 2,
                       .sample_rate = 100, .data = data, .len = sizeof data};
        CHECK_EQ_INT(x->send(x, &u, pn_test_deadline_ns(10), NULL, &e), PN_SEND_OK);
        CHECK_EQ_INT(test_server_count(srv), 1);
        CHECK_EQ_INT(fallback_calls, 1);   /* libcurl sent it, not the fallback */
        CHECK(pn_http_libcurl_available());
        x->destroy(x);
    }
    test_server_stop(srv);
}

TEST_MAIN(T(test_missing_libcurl), T(test_fallback_sender), T(test_relay), T(test_wrong_library), T(test_loads_after_failure))
