/* The upload queue: retries and giving up (against the test HTTP server),
 * dropping the oldest entry when full, flush, bounded stop, counting, and
 * the fork hooks. */
#include <dirent.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "pprof_decode.h"
#include "queue_helper.h"
#include "pyroscope_native.h"
#include "export/exporter.h"
#include "aggregation/profile.h"

/* ---------------------------------------------------------- log capture */

#define LOG_MAX 256
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
/* Guarded by log_mu: written by core threads through the handler. */
static struct {
    int level;
    char msg[1024];
} log_lines[LOG_MAX];
static size_t log_count;

static void capture(void *ud, int level, const char *msg)
{
    (void)ud;
    pthread_mutex_lock(&log_mu);
    if (log_count < LOG_MAX) {
        log_lines[log_count].level = level;
        snprintf(log_lines[log_count].msg, sizeof log_lines[0].msg, "%s", msg);
        log_count++;
    }
    pthread_mutex_unlock(&log_mu);
}

static void log_start(void)
{
    pthread_mutex_lock(&log_mu);
    log_count = 0;
    pthread_mutex_unlock(&log_mu);
    pn_log_set_level(PN_LOG_DEBUG);
    pn_log_set_handler(capture, NULL);
}

/* 1 when a line at `level` contains both needles (b may be NULL). */
static int logged(int level, const char *a, const char *b)
{
    int found = 0;
    pthread_mutex_lock(&log_mu);
    for (size_t i = 0; i < log_count && !found; i++)
        found = log_lines[i].level == level && strstr(log_lines[i].msg, a) &&
                (!b || strstr(log_lines[i].msg, b));
    pthread_mutex_unlock(&log_mu);
    return found;
}

static void dump_log(void)
{
    pthread_mutex_lock(&log_mu);
    for (size_t i = 0; i < log_count; i++)
        fprintf(stderr, "    log %d: %s\n", log_lines[i].level, log_lines[i].msg);
    pthread_mutex_unlock(&log_mu);
}

/* -------------------------------------------------------- fake exporter */

/* Records what it is sent. Uploads of `gate_app` (all, when NULL) wait
 * until gate_fd becomes readable or the queue aborts. It keeps no locks, so
 * the fork test cannot inherit one held. Its encode is qh_payload_encode
 * (the payloads the test put into the profile) unless the test clears it
 * to get the default pprof parts. */
typedef struct {
    pn_exporter base;
    int gate_fd;                /* -1: no gate */
    const char *gate_app;
    int delay_ms;
    pn_send_result result;      /* set by the test before pushing */
    pn_exporter *delegate;      /* forwards to it when set (owned) */
    int mark;                   /* flip the first data byte after recording */
    atomic_int in_send;
    atomic_int calls;
    /* Per call (up to 32), written before calls is bumped. */
    char seen[32][32];          /* app names */
    char payload[32][32];       /* data, as a string (cut) */
    size_t len[32];
    uint32_t part[32];
    int64_t from_s[32], until_s[32];
    const pn_upload *ptr[32];
    uint8_t *first;             /* copy of the first call's data */
    size_t first_len;
    atomic_int destroyed;
} fake;

static pn_send_result fake_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                const volatile int *abort, pn_error *e)
{
    fake *f = (fake *)self;
    atomic_fetch_add(&f->in_send, 1);
    if (f->gate_fd >= 0 && (!f->gate_app || strcmp(f->gate_app, u->app_name) == 0)) {
        struct pollfd p = {.fd = f->gate_fd, .events = POLLIN};
        while (poll(&p, 1, 10) == 0) {
            if (__atomic_load_n(abort, __ATOMIC_ACQUIRE)) {
                atomic_fetch_sub(&f->in_send, 1);
                pn_fail(e, PN_EIO, "fake: aborted");
                return PN_SEND_RETRY;
            }
        }
    }
    if (f->delay_ms)
        usleep((useconds_t)f->delay_ms * 1000);
    int n = atomic_load(&f->calls);
    if (n < 32) {
        snprintf(f->seen[n], sizeof f->seen[n], "%s", u->app_name);
        snprintf(f->payload[n], sizeof f->payload[n], "%.*s",
                 (int)(u->len < 31 ? u->len : 31), (const char *)u->data);
        f->len[n] = u->len;
        f->part[n] = u->part;
        f->from_s[n] = u->from_s;
        f->until_s[n] = u->until_s;
        f->ptr[n] = u;
    }
    if (n == 0 && (f->first = malloc(u->len ? u->len : 1)) != NULL) {
        memcpy(f->first, u->data, u->len);
        f->first_len = u->len;
    }
    /* The payload's bytes are the queue's (malloc'ed, not const): a mark
     * here shows whether the next exporter is sent this very buffer. */
    if (f->mark && u->len)
        u->data[0] ^= 0xff;
    atomic_store(&f->calls, n + 1);
    pn_send_result r = f->result;
    if (f->delegate)
        r = f->delegate->send(f->delegate, u, deadline_ns, abort, e);
    else if (r != PN_SEND_OK)
        pn_fail(e, PN_EHTTP, "fake refused %s", u->app_name);
    atomic_fetch_sub(&f->in_send, 1);
    return r;
}

static void fake_destroy(pn_exporter *self)
{
    fake *f = (fake *)self;
    if (f->delegate)
        f->delegate->destroy(f->delegate);
    free(f->first);
    f->first = NULL;
    atomic_fetch_add(&f->destroyed, 1);
}

static void fake_init(fake *f, const char *name)
{
    memset(f, 0, sizeof *f);
    f->base.name = name;
    f->base.encode = qh_payload_encode;
    f->base.send = fake_send;
    f->base.destroy = fake_destroy;
    f->gate_fd = -1;
    f->result = PN_SEND_OK;
}

static int wait_int(atomic_int *v, int want, double timeout_s)
{
    double end = pn_test_now_s() + timeout_s;
    while (atomic_load(v) != want && pn_test_now_s() < end)
        usleep(1000);
    return atomic_load(v) == want;
}

static pn_queue *http_queue(test_server *srv, const pn_queue_opts *qo)
{
    pn_http_opts o = {.server_address = test_server_url(srv), .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    if (!x)
        return NULL;
    pn_queue *q = pn_queue_new(qo, &x, 1, &e);
    CHECK(q != NULL);
    if (!q)
        x->destroy(x);
    return q;
}

/* ---------------------------------------------------------------- tests */

static void test_retry_then_success(void)
{
    log_start();
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_reply(srv, 503, "busy", 0);
    test_server_reply(srv, 503, "busy", 0);
    pn_queue_opts qo = {.backoff_initial_s = 0.01, .backoff_max_s = 0.05};
    pn_queue *q = http_queue(srv, &qo);
    if (q) {
        /* The http exporter has no encode of its own: it is sent the
         * default gzip'ed pprof parts. */
        pn_profile *p = qh_profile("app", "cpu", 1700000000, 1700000010, 3);
        CHECK(p != NULL);
        size_t nparts = 0, want_bytes = p ? qh_pprof_bytes(p, &nparts) : 0;
        CHECK_EQ_INT(nparts, 1);
        CHECK(want_bytes > 0 && want_bytes != (size_t)-1);
        pn_queue_push(q, p);
        CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
        pn_queue_stats st;
        pn_queue_get_stats(q, &st);
        CHECK_EQ_INT(st.uploads_ok, 1);
        CHECK_EQ_INT(st.retries, 2);
        CHECK_EQ_INT(st.uploads_failed, 0);
        CHECK_EQ_INT(st.uploads_dropped, 0);
        CHECK_EQ_INT(st.bytes_sent, want_bytes);
        CHECK_EQ_INT(test_server_count(srv), 3);
        CHECK(logged(PN_LOG_INFO, "attempt 1 of 4", "503"));
        pn_queue_stop(q, 1);
    }
    test_server_stop(srv);
}

static void test_give_up_on_client_error(void)
{
    log_start();
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_reply(srv, 400, "bad name", 0);
    pn_queue_opts qo = {.backoff_initial_s = 0.01, .backoff_max_s = 0.05};
    pn_queue *q = http_queue(srv, &qo);
    if (q) {
        pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
        CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
        pn_queue_stats st;
        pn_queue_get_stats(q, &st);
        CHECK_EQ_INT(st.uploads_failed, 1);
        CHECK_EQ_INT(st.uploads_ok, 0);
        CHECK_EQ_INT(st.retries, 0);
        CHECK_EQ_INT(st.bytes_sent, 0);
        CHECK_EQ_INT(test_server_count(srv), 1);
        CHECK(logged(PN_LOG_ERROR, "bad name", "HTTP 400"));
        pn_queue_stop(q, 1);
    }
    test_server_stop(srv);
}

static void test_give_up_after_max_attempts(void)
{
    log_start();
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, 503, "still down", 0);
    pn_queue_opts qo = {.max_attempts = 3, .backoff_initial_s = 0.01, .backoff_max_s = 0.02};
    pn_queue *q = http_queue(srv, &qo);
    if (q) {
        pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
        CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
        pn_queue_stats st;
        pn_queue_get_stats(q, &st);
        CHECK_EQ_INT(st.uploads_failed, 1);
        CHECK_EQ_INT(st.retries, 2);
        CHECK_EQ_INT(test_server_count(srv), 3);
        CHECK(logged(PN_LOG_ERROR, "gave up after 3 attempts", "still down"));
        pn_queue_stop(q, 1);
    }
    test_server_stop(srv);
}

static void test_full_queue_drops_oldest(void)
{
    log_start();
    int gate[2];
    CHECK_EQ_INT(pipe(gate), 0);
    fake f;
    fake_init(&f, "fake");
    f.gate_fd = gate[0];
    pn_exporter *xs[] = {&f.base};
    pn_queue_opts qo = {.queue_capacity = 2};
    pn_error e;
    pn_queue *q = pn_queue_new(&qo, xs, 1, &e);
    CHECK(q != NULL);
    if (q) {
        pn_queue_push(q, qh_sized_profile("A", 1, 10));
        CHECK(wait_int(&f.in_send, 1, 2)); /* A is in flight, the queue empty */
        pn_queue_push(q, qh_sized_profile("B", 2, 10));
        pn_queue_push(q, qh_sized_profile("C", 3, 10));
        pn_queue_push(q, qh_sized_profile("D", 4, 10));
        pn_queue_stats st;
        pn_queue_get_stats(q, &st);
        CHECK_EQ_INT(st.uploads_dropped, 1);
        CHECK(logged(PN_LOG_WARN, "dropped the oldest", "'B'"));
        CHECK_EQ_INT(write(gate[1], "x", 1), 1);
        CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
        CHECK_EQ_INT(atomic_load(&f.calls), 3);
        CHECK_STR(f.seen[0], "A");
        CHECK_STR(f.seen[1], "C");
        CHECK_STR(f.seen[2], "D");
        /* What the exporter's encode made of each profile. */
        CHECK_STR(f.payload[1], "zzzzzzzzzz");
        CHECK_EQ_INT(f.from_s[1], 3);
        CHECK_EQ_INT(f.until_s[1], 13);
        CHECK_EQ_INT(f.part[1], 0);
        pn_queue_get_stats(q, &st);
        CHECK_EQ_INT(st.uploads_ok, 3);
        CHECK_EQ_INT(st.uploads_dropped, 1);
        CHECK_EQ_INT(st.bytes_sent, 30);
        pn_queue_stop(q, 1);
        CHECK_EQ_INT(atomic_load(&f.destroyed), 1);
    }
    close(gate[0]);
    close(gate[1]);
}

static void test_flush_waits_for_completion(void)
{
    log_start();
    fake f;
    fake_init(&f, "slow");
    f.delay_ms = 100;
    pn_exporter *xs[] = {&f.base};
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, xs, 1, &e);
    CHECK(q != NULL);
    if (!q)
        return;
    CHECK_EQ_INT(pn_queue_flush(q, 0), 0); /* nothing queued */
    double t0 = pn_test_now_s();
    for (int i = 0; i < 3; i++)
        pn_queue_push(q, qh_sized_profile("app", i, 10));
    CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
    CHECK(pn_test_now_s() - t0 >= 0.25);
    /* Done means sent, including the last one in flight, and counted. */
    CHECK_EQ_INT(atomic_load(&f.calls), 3);
    pn_queue_stats st;
    pn_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.uploads_ok, 3);
    pn_queue_stop(q, 1);
}

static void test_flush_times_out(void)
{
    log_start();
    int gate[2];
    CHECK_EQ_INT(pipe(gate), 0);
    fake f;
    fake_init(&f, "gated");
    f.gate_fd = gate[0];
    pn_exporter *xs[] = {&f.base};
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, xs, 1, &e);
    CHECK(q != NULL);
    if (q) {
        pn_queue_push(q, qh_sized_profile("A", 1, 10));
        pn_queue_push(q, qh_sized_profile("B", 2, 10));
        double t0 = pn_test_now_s();
        CHECK_EQ_INT(pn_queue_flush(q, 0.2), -1);
        double took = pn_test_now_s() - t0;
        CHECK(took >= 0.15 && took < 1.5);
        CHECK_EQ_INT(write(gate[1], "x", 1), 1);
        CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
        CHECK_EQ_INT(atomic_load(&f.calls), 2);
        pn_queue_stop(q, 1);
    }
    close(gate[0]);
    close(gate[1]);
}

/* A flush does not wait out a long backoff: the retry happens at once. */
static void test_flush_cuts_backoff(void)
{
    log_start();
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_reply(srv, 503, "busy", 0);
    pn_queue_opts qo = {.backoff_initial_s = 5, .backoff_max_s = 5};
    pn_queue *q = http_queue(srv, &qo);
    if (q) {
        pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
        CHECK_EQ_INT(test_server_wait(srv, 1, 2), 1);
        double t0 = pn_test_now_s();
        CHECK_EQ_INT(pn_queue_flush(q, 3), 0);
        CHECK(pn_test_now_s() - t0 < 2.0);
        pn_queue_stats st;
        pn_queue_get_stats(q, &st);
        CHECK_EQ_INT(st.uploads_ok, 1);
        CHECK_EQ_INT(st.retries, 1);
        CHECK_EQ_INT(test_server_count(srv), 2);
        pn_queue_stop(q, 1);
    }
    test_server_stop(srv);
}

static void test_stop_bounded_when_server_hangs(void)
{
    log_start();
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_queue *q = http_queue(srv, NULL); /* default 10 s request timeout */
    if (q) {
        for (int i = 0; i < 3; i++)
            pn_queue_push(q, qh_profile("app", "cpu", 1700000000 + 10 * i, 1700000010 + 10 * i, 1));
        CHECK_EQ_INT(test_server_wait(srv, 1, 2), 1);
        double t0 = pn_test_now_s();
        pn_queue_stop(q, 0.5);
        double took = pn_test_now_s() - t0;
        CHECK(took >= 0.45);
        CHECK(took < 2.0);
        CHECK(logged(PN_LOG_WARN, "2 queued uploads dropped", NULL));
        CHECK(logged(PN_LOG_WARN, "[1700000000..1700000010]", "stopped while it was being sent"));
    }
    test_server_stop(srv);
}

/* A port nobody listens on: bound, then closed. */
static int refusing_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Stop with a server that refuses (or answers 503 at once): the last upload
 * fails at once instead of backing off 0.5 + 1 + 2 s within stop's timeout
 * (issue 28: a dead server held the exit up). A backoff already sleeping
 * when stop comes gets one more attempt, then fails. */
static void test_stop_does_not_retry_a_dead_server(void)
{
    log_start();
    int port = refusing_port();
    CHECK(port > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    pn_http_opts o = {.server_address = url, .app_name = "app"};
    pn_error e;
    pn_exporter *x = pn_http_exporter_new(&o, &e);
    CHECK(x != NULL);
    pn_queue *q = x ? pn_queue_new(NULL, &x, 1, &e) : NULL;
    CHECK(q != NULL);
    if (q) {
        pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
        double t0 = pn_test_now_s();
        pn_queue_stats st;
        pn_queue_stop_stats(q, 5, &st);
        double took = pn_test_now_s() - t0;
        CHECK(took < 1.0);
        CHECK_EQ_INT(st.uploads_failed, 1);
        CHECK(logged(PN_LOG_ERROR, "not retried as the profiler is stopping", NULL));
    }

    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    test_server_default_reply(srv, 503, "down", 0);
    /* A fresh log: the refused upload above may have logged "retrying in"
     * before its stop, which would end the wait below at once. */
    log_start();
    pn_queue_opts qo = {.backoff_initial_s = 2, .backoff_max_s = 2};
    q = http_queue(srv, &qo);
    if (q) {
        pn_queue_push(q, qh_profile("app", "cpu", 1700000000, 1700000010, 1));
        /* now sleeping 1.5-2.5 s */
        for (double end = pn_test_now_s() + 3; !logged(PN_LOG_INFO, "retrying in", NULL) &&
                                               pn_test_now_s() < end;)
            usleep(1000);
        double t0 = pn_test_now_s();
        pn_queue_stats st;
        pn_queue_stop_stats(q, 5, &st);
        CHECK(pn_test_now_s() - t0 < 1.0);
        CHECK_EQ_INT(st.uploads_failed, 1);
        CHECK_EQ_INT(test_server_count(srv), 2);
    }
    test_server_stop(srv);
}

/* The drop message names the timeout that ran out, not the 0 of the stop
 * that follows a drain (it said "within the 0.00 s stop timeout"). */
static void test_drop_message_names_the_drain_timeout(void)
{
    log_start();
    fake f;
    fake_init(&f, "gated");
    int gate[2];
    CHECK_EQ_INT(pipe(gate), 0);
    f.gate_fd = gate[0];
    pn_exporter *x = &f.base;
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, &x, 1, &e);
    CHECK(q != NULL);
    if (q) {
        pn_queue_push(q, qh_sized_profile("A", 1, 10));
        pn_queue_push(q, qh_sized_profile("B", 2, 10));
        CHECK(wait_int(&f.in_send, 1, 2));
        CHECK_EQ_INT(pn_queue_drain(q, 0.3), -1);
        pn_queue_close(q);
        pn_queue_stop(q, 0);
        CHECK(logged(PN_LOG_WARN, "1 queued uploads dropped", "within the 0.30 s stop timeout"));
    }
    close(gate[0]);
    close(gate[1]);
}

typedef struct {
    pn_queue *q;
    int rc;
    double took;
    atomic_int calling;         /* set just before pn_queue_flush */
} flush_call;

static void *flush_thread(void *arg)
{
    flush_call *c = arg;
    atomic_store(&c->calling, 1);
    double t0 = pn_test_now_s();
    c->rc = pn_queue_flush(c->q, 10);
    c->took = pn_test_now_s() - t0;
    return NULL;
}

/* A flush waiting on another thread returns (-1) when stop runs, and stop
 * still returns within its bound. */
static void test_stop_while_another_thread_flushes(void)
{
    log_start();
    int gate[2];
    CHECK_EQ_INT(pipe(gate), 0);
    fake f;
    fake_init(&f, "gated");
    f.gate_fd = gate[0];
    pn_exporter *xs[] = {&f.base};
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, xs, 1, &e);
    CHECK(q != NULL);
    if (q) {
        pn_queue_push(q, qh_sized_profile("A", 1, 10));
        CHECK(wait_int(&f.in_send, 1, 60)); /* A is in flight */
        flush_call c = {q, 0, 0, 0};
        pthread_t t;
        CHECK_EQ_INT(pthread_create(&t, NULL, flush_thread, &c), 0);
        /* The other flush must be inside pn_queue_flush before stop marks
         * the queue stopping: one that starts later races with the free.
         * A fixed sleep was not enough on a loaded machine; waiting for the
         * thread to reach the call leaves it stop's own 0.3 s flush to take
         * the queue's mutex. */
        CHECK(wait_int(&c.calling, 1, 60));
        double t0 = pn_test_now_s();
        pn_queue_stop(q, 0.3);
        CHECK(pn_test_now_s() - t0 < 2.0);
        pthread_join(t, NULL);
        CHECK_EQ_INT(c.rc, -1);
        CHECK(c.took < 2.0);
        CHECK(logged(PN_LOG_WARN, "'A'", "stopped while it was being sent"));
    }
    close(gate[0]);
    close(gate[1]);
}

/* Counting is per upload: one exporter refusing makes the upload failed,
 * while bytes_sent still counts the exporter that took it. */
static void test_counting_with_two_exporters(void)
{
    log_start();
    fake ok, refuse;
    fake_init(&ok, "ok");
    fake_init(&refuse, "refuse");
    refuse.result = PN_SEND_FAIL;
    pn_exporter *xs[] = {&ok.base, &refuse.base};
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, xs, 2, &e);
    CHECK(q != NULL);
    if (!q)
        return;
    pn_queue_push(q, qh_sized_profile("first", 1, 10));
    CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
    refuse.result = PN_SEND_OK; /* read by the exporter thread after the push */
    pn_queue_push(q, qh_sized_profile("second", 2, 20));
    CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
    pn_queue_stats st;
    pn_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.uploads_ok, 1);
    CHECK_EQ_INT(st.uploads_failed, 1);
    CHECK_EQ_INT(st.bytes_sent, 10 + 20 + 20);
    CHECK(logged(PN_LOG_ERROR, "to refuse failed", "fake refused first"));
    pn_queue_stop(q, 1);
    CHECK_EQ_INT(atomic_load(&ok.destroyed), 1);
    CHECK_EQ_INT(atomic_load(&refuse.destroyed), 1);
}

/* Exporters without an encode of their own share the default pprof parts,
 * encoded once per profile (the very same buffers reach each of them),
 * while an exporter with its own encode gets exactly its own parts. */
static void test_default_encoding_shared_own_encoding_separate(void)
{
    log_start();
    fake a, own, b;
    fake_init(&a, "pprof-a");
    fake_init(&own, "own");
    fake_init(&b, "pprof-b");
    a.base.encode = NULL;
    b.base.encode = NULL;
    a.mark = 1; /* b sees the mark only if it is sent a's buffer */
    pn_exporter *xs[] = {&a.base, &own.base, &b.base};
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, xs, 3, &e);
    CHECK(q != NULL);
    if (!q)
        return;
    pn_profile *p = qh_profile("shared", "cpu", 1700000000, 1700000010, 5);
    CHECK(p != NULL);
    if (!p) {
        pn_queue_stop(q, 1);
        return;
    }
    CHECK_EQ_INT(qh_profile_add_label(p, "qh.payload", "own-0"), 0);
    CHECK_EQ_INT(qh_profile_add_label(p, "qh.payload", "own-part-1"), 0);
    size_t npprof = 0, pprof_bytes = qh_pprof_bytes(p, &npprof);
    CHECK_EQ_INT(npprof, 1);
    int encodes_before = __atomic_load_n(&qh_payload_encodes, __ATOMIC_SEQ_CST);
    pn_queue_push(q, p);
    CHECK_EQ_INT(pn_queue_flush(q, 5), 0);

    CHECK_EQ_INT(atomic_load(&a.calls), 1);
    CHECK_EQ_INT(atomic_load(&b.calls), 1);
    /* One encoding: the same part, whose buffer a marked before b read it. */
    CHECK(a.ptr[0] == b.ptr[0]);
    CHECK_EQ_INT(a.len[0], pprof_bytes);
    CHECK_EQ_INT(b.len[0], pprof_bytes);
    CHECK(a.first && b.first && a.first_len == b.first_len && a.first_len > 1);
    if (a.first && b.first && a.first_len == b.first_len && a.first_len > 1) {
        CHECK_EQ_INT(b.first[0], a.first[0] ^ 0xff);
        CHECK(memcmp(a.first + 1, b.first + 1, a.first_len - 1) == 0);
        /* ... and it is the profile as pprof. */
        pn_pb_profile *pb = pn_pprof_decode(a.first, a.first_len, NULL);
        CHECK(pb != NULL);
        if (pb) {
            CHECK_EQ_INT(pb->n_sample, 5);
            CHECK_EQ_INT(pn_pprof_check(pb, 1), 0);
            pn_pprof_free(pb);
        }
    }
    CHECK_STR(a.seen[0], "shared");
    CHECK_EQ_INT(a.from_s[0], 1700000000);
    CHECK_EQ_INT(a.until_s[0], 1700000010);

    /* The exporter with its own encode: called once, both its parts, in
     * order, and no pprof. */
    CHECK_EQ_INT(__atomic_load_n(&qh_payload_encodes, __ATOMIC_SEQ_CST) - encodes_before, 1);
    CHECK_EQ_INT(atomic_load(&own.calls), 2);
    CHECK_STR(own.payload[0], "own-0");
    CHECK_STR(own.payload[1], "own-part-1");
    CHECK_EQ_INT(own.part[0], 0);
    CHECK_EQ_INT(own.part[1], 1);
    CHECK_STR(own.seen[1], "shared");
    CHECK_EQ_INT(own.from_s[1], 1700000000);

    pn_queue_stats st;
    pn_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.uploads_ok, 1); /* one profile, however many exporters and parts */
    CHECK_EQ_INT(st.uploads_failed, 0);
    CHECK_EQ_INT(st.bytes_sent, 2 * pprof_bytes + 5 + 10);
    pn_queue_stop(q, 1);
    CHECK_EQ_INT(atomic_load(&a.destroyed), 1);
    CHECK_EQ_INT(atomic_load(&own.destroyed), 1);
    CHECK_EQ_INT(atomic_load(&b.destroyed), 1);
}

/* An exporter whose encode fails does not get the profile, which counts as
 * failed; the other exporters still get it. */
static void test_encode_failure(void)
{
    log_start();
    fake bad, good;
    fake_init(&bad, "picky");
    fake_init(&good, "pprof");
    good.base.encode = NULL;
    pn_exporter *xs[] = {&bad.base, &good.base};
    pn_error e;
    pn_queue *q = pn_queue_new(NULL, xs, 2, &e);
    CHECK(q != NULL);
    if (!q)
        return;
    pn_profile *p = qh_profile("enc", "cpu", 1700000000, 1700000010, 2);
    CHECK(p != NULL);
    if (p)
        CHECK_EQ_INT(qh_profile_add_label(p, "qh.encode_fail", "no format for this"), 0);
    pn_queue_push(q, p);
    CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
    CHECK_EQ_INT(atomic_load(&bad.calls), 0);
    CHECK_EQ_INT(atomic_load(&good.calls), 1);
    pn_queue_stats st;
    pn_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.uploads_failed, 1);
    CHECK_EQ_INT(st.uploads_ok, 0);
    CHECK_EQ_INT(st.bytes_sent, good.len[0]);
    CHECK(logged(PN_LOG_ERROR, "for picky failed", "no format for this"));
    pn_queue_stop(q, 1);
}

static void test_bad_options(void)
{
    fake f;
    fake_init(&f, "fake");
    pn_exporter *xs[] = {&f.base};
    pn_queue_opts bad[] = {
        {.queue_capacity = 1000000},
        {.max_attempts = -1},
        {.backoff_initial_s = -1},
        {.backoff_initial_s = 2, .backoff_max_s = 1},
    };
    const char *needle[] = {"queue_capacity", "max_attempts", "backoff_initial_s", "backoff_max_s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pn_error e;
        pn_error_clear(&e);
        CHECK(pn_queue_new(&bad[i], xs, 1, &e) == NULL);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        CHECK(strstr(e.msg, needle[i]) != NULL);
    }
    pn_error e;
    CHECK(pn_queue_new(NULL, xs, 0, &e) == NULL);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    /* On failure the caller keeps its exporters. */
    CHECK_EQ_INT(atomic_load(&f.destroyed), 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int has_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Samples of the gzip'ed pprof file dir/name; -1 when unreadable. */
static long file_samples(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    static uint8_t buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    pn_pb_profile *pb = pn_pprof_decode(buf, len, NULL);
    if (!pb)
        return -1;
    long n = (long)pb->n_sample;
    pn_pprof_free(pb);
    return n;
}

/* The child of a fork gets its own exporter thread, drops what the parent
 * had queued (the parent sends those), and can push and flush. */
static void test_fork_child(void)
{
    log_start();
    char dir[] = "/tmp/pn_qfork_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    int gate[2];
    CHECK_EQ_INT(pipe(gate), 0);
    pn_error e;
    fake f;
    fake_init(&f, "folder");
    f.base.encode = NULL; /* the default pprof parts, written by the folder exporter */
    f.gate_fd = gate[0];
    f.gate_app = "hold";
    f.delegate = pn_folder_exporter_new(dir, &e);
    CHECK(f.delegate != NULL);
    pn_exporter *xs[] = {&f.base};
    pn_queue *q = pn_queue_new(NULL, xs, 1, &e);
    CHECK(q != NULL);
    if (!q || !f.delegate)
        return;
    pn_queue_push(q, qh_profile("hold", "cpu", 100, 110, 2));
    CHECK(wait_int(&f.in_send, 1, 2));
    pn_queue_push(q, qh_profile("queued", "cpu", 100, 110, 2));

    fflush(NULL);
    pn_queue_fork_prepare(q);
    pid_t pid = fork();
    if (pid == 0) {
        pn_queue_fork_child(q);
        int bad = 0;
        pn_queue_stats st;
        pn_queue_get_stats(q, &st);
        if (st.uploads_ok || st.uploads_failed || st.uploads_dropped)
            bad |= 1;
        pn_queue_push(q, qh_profile("child", "cpu", 200, 210, 2));
        if (pn_queue_flush(q, 5) != 0)
            bad |= 2;
        pn_queue_get_stats(q, &st);
        if (st.uploads_ok != 1 || st.uploads_failed || st.uploads_dropped)
            bad |= 4;
        if (!has_file(dir, "child-cpu-200-210.pb.gz"))
            bad |= 8;
        if (has_file(dir, "queued-cpu-100-110.pb.gz") || has_file(dir, "hold-cpu-100-110.pb.gz"))
            bad |= 16;
        pn_queue_stop(q, 1);
        _exit(bad);
    }
    pn_queue_fork_parent(q);
    CHECK(pid > 0);
    int status = -1;
    CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);

    CHECK_EQ_INT(write(gate[1], "x", 1), 1);
    CHECK_EQ_INT(pn_queue_flush(q, 5), 0);
    pn_queue_stats st;
    pn_queue_get_stats(q, &st);
    CHECK_EQ_INT(st.uploads_ok, 2);
    CHECK(has_file(dir, "hold-cpu-100-110.pb.gz"));
    CHECK(has_file(dir, "queued-cpu-100-110.pb.gz"));
    CHECK(has_file(dir, "child-cpu-200-210.pb.gz"));
    CHECK_EQ_INT(file_samples(dir, "hold-cpu-100-110.pb.gz"), 2);
    pn_queue_stop(q, 1);
    CHECK_EQ_INT(atomic_load(&f.destroyed), 1);
    close(gate[0]);
    close(gate[1]);
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    if (pn_check_failures)
        dump_log();
}

TEST_MAIN(T(test_retry_then_success), T(test_give_up_on_client_error),
          T(test_give_up_after_max_attempts), T(test_full_queue_drops_oldest),
          T(test_flush_waits_for_completion), T(test_flush_times_out), T(test_flush_cuts_backoff),
          T(test_stop_bounded_when_server_hangs), T(test_stop_while_another_thread_flushes),
          T(test_stop_does_not_retry_a_dead_server), T(test_drop_message_names_the_drain_timeout),
          T(test_counting_with_two_exporters),
          T(test_default_encoding_shared_own_encoding_separate), T(test_encode_failure),
          T(test_bad_options), T(test_fork_child))
