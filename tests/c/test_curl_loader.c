/* libcurl loaded on first use: a missing or wrong library fails the uploads
 * that need it with a clear message (counted as failed, never a crash),
 * http:// uploads go on without it, and a later load still works.
 * Its own executable: the loader's state is per process. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "export/curl_loader.h"
#include "http_server.h"
#include "queue_helper.h"
#include "pyroscope_native.h"
#include "export/exporter.h"

static pn_upload *new_upload(void)
{
    pn_upload *u = calloc(1, sizeof *u);
    u->app_name = strdup("app");
    u->profile_type = strdup("cpu");
    u->data = malloc(3);
    memcpy(u->data, "abc", 3);
    u->len = 3;
    u->sample_rate = 100;
    u->from_s = 1700000000;
    u->until_s = 1700000010;
    return u;
}

static void test_missing_libcurl(void)
{
    pn_curl_loader_set_name_for_tests("libpn-no-such-curl.so.4");
    pn_error e;
    pn_error_clear(&e);
    CHECK(pn_curl_load(&e) == NULL);
    CHECK(strstr(e.msg, "cannot load libcurl") != NULL);
    CHECK(strstr(e.msg, "libpn-no-such-curl.so.4") != NULL);

    /* An https:// upload fails for good, naming libcurl and the server. */
    int port = test_free_port();
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", port);
    pn_http_opts o = {.server_address = url, .app_name = "app"};
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (x) {
        pn_upload *u = new_upload();
        pn_error_clear(&e);
        CHECK_EQ_INT(x->send(x, u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_FAIL);
        CHECK(strstr(e.msg, "libcurl") != NULL);
        CHECK(strstr(e.msg, url) != NULL);
        pn_upload_free(u);

        /* Through the queue it is one failed upload, not retried. */
        pn_queue_opts qo = {.max_attempts = 3, .backoff_initial_s = 0.01};
        pn_queue *q = pn_queue_new(&qo, &x, 1, &e);
        CHECK(q != NULL);
        if (q) {
            pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
            CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
            pn_queue_stats st;
            pn_queue_stop_stats(q, 1, &st);
            CHECK_EQ_INT(st.uploads_failed, 1);
            CHECK_EQ_INT(st.uploads_ok, 0);
            CHECK_EQ_INT(st.retries, 0);
        } else {
            x->destroy(x);
        }
    }

    /* http:// needs no libcurl: the built-in client sends it. */
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (srv) {
        pn_http_opts ho = {.server_address = test_server_url(srv), .app_name = "app"};
        x = pn_http_exporter_new(&ho, &e);
        CHECK(x != NULL);
        if (x) {
            pn_upload *u = new_upload();
            CHECK_EQ_INT(x->send(x, u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_OK);
            CHECK_EQ_INT(test_server_count(srv), 1);
            /* ... unless it must go through libcurl. */
            pn_http_force_libcurl(1);
            CHECK_EQ_INT(x->send(x, u, pn_test_deadline_ns(5), NULL, &e), PN_SEND_FAIL);
            CHECK(strstr(e.msg, "libcurl") != NULL);
            pn_http_force_libcurl(0);
            CHECK_EQ_INT(test_server_count(srv), 1);
            pn_upload_free(u);
            x->destroy(x);
        }
        test_server_stop(srv);
    }
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

/* Failures are not remembered: the real libcurl loads afterwards, once. */
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
    CHECK(pn_curl_load(&e) == a);
    /* Once loaded, the test name no longer matters. */
    pn_curl_loader_set_name_for_tests("libpn-no-such-curl.so.4");
    CHECK(pn_curl_load(&e) == a);
    pn_curl_loader_set_name_for_tests(NULL);
}

TEST_MAIN(T(test_missing_libcurl), T(test_wrong_library), T(test_loads_after_failure))
