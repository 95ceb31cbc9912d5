/* The agent end to end: a walker over real threads, periods encoded and
 * written to a folder and uploaded to a local HTTP server, bounded stop with
 * a hanging server, one agent per process, and profiling in a forked child. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "export/series_tags.h"
#include "check.h"
#include "files.h"
#include "http_server.h"
#include "pprof_decode.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "encoding/pprof.h"
#include "pyroscope_report.h"

/* One worker thread the walker knows: its tid and a two-frame stack. */
static _Atomic pid_t worker_tid;
static const char *_Atomic worker_fn = "busy_work";
static atomic_int worker_stop;

/* The worker's CPU clock just after pn_tick_begin_thread in the first walk
 * and just before it in the last (sampler thread; read after the agent
 * stopped). The core reads the clock in between, so the CPU it charges the
 * worker in all (its deltas telescope) is at least last - first. */
static int64_t walk_cpu_first = -1, walk_cpu_last = -1;

static void walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    pid_t tid = atomic_load(&worker_tid);
    int64_t v;
    if (tid == 0)
        return;
    int64_t before = pn_thread_cpu_ns(tid);
    int ok = pn_tick_begin_thread(t, tid, &v);
    if (walk_cpu_first < 0)
        walk_cpu_first = pn_thread_cpu_ns(tid);
    walk_cpu_last = before;
    if (!ok)
        return;
    const char *fn = atomic_load(&worker_fn);
    pn_frame_id f[2] = {pn_symbols_frame3(pn_tick_symbols(t), fn, strlen(fn), "work.c", 6, 42),
                        pn_symbols_frame3(pn_tick_symbols(t), "main", 4, "work.c", 6, 7)};
    pn_tick_sample(t, tid, f, 2, v, "worker");
}

static void *worker(void *arg)
{
    (void)arg;
    pn_label kv = {"endpoint", "/api/x"};
    pn_labels_push(&kv, 1, NULL);
    atomic_store(&worker_tid, pn_gettid());
    volatile double x = 0;
    while (!atomic_load(&worker_stop))
        x += 1;
    pn_labels_pop(NULL);
    return NULL;
}

static pthread_t start_worker(void)
{
    atomic_store(&worker_stop, 0);
    atomic_store(&worker_tid, 0);
    walk_cpu_first = walk_cpu_last = -1;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    while (!atomic_load(&worker_tid))
        sched_yield();
    return t;
}

static void stop_worker(pthread_t t)
{
    atomic_store(&worker_stop, 1);
    pthread_join(t, NULL);
    atomic_store(&worker_tid, 0);
}

typedef struct {
    int files;
    int64_t busy_ns;            /* cpu value of samples whose leaf is busy_work */
    int64_t busy_count;         /* their sample count */
    int64_t labelled_ns;        /* of those, with endpoint=/api/x */
    int thread_named;
    char pid_seen[32];
    const char *leaf;
} folder_summary;

static void summarize_folder(const char *dir, folder_summary *out)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char path[512];
    const char *leaf = atomic_load(&worker_fn);
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 6, ".pb.gz") != 0)
            continue;
        out->files++;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t len;
        uint8_t *data = pn_test_read_file(path, &len);
        pn_pb_profile *p = data ? pn_pprof_decode(data, len, NULL) : NULL;
        free(data);
        if (!p)
            continue;
        CHECK_EQ_INT(pn_pprof_check(p, 1), 0);
        CHECK_STR(pn_pprof_str(p, p->sample_type[0]->type), "cpu");
        for (size_t i = 0; i < p->n_sample; i++) {
            const pn_pb_sample *s = p->sample[i];
            const char *name = pn_pprof_frame_name(p, s, 0);
            if (!name || strcmp(name, leaf) != 0)
                continue;
            out->busy_ns += s->value[0];
            out->busy_count += s->n_value > 1 ? s->value[1] : 0;
            const char *ep = pn_pprof_label(p, s, "endpoint");
            if (ep && strcmp(ep, "/api/x") == 0)
                out->labelled_ns += s->value[0];
            const char *tn = pn_pprof_label(p, s, "thread_name");
            if (tn && strcmp(tn, "worker") == 0)
                out->thread_named = 1;
            const char *pid = pn_pprof_label(p, s, "pid");
            if (pid)
                snprintf(out->pid_seen, sizeof out->pid_seen, "%s", pid);
        }
        pn_pprof_free(p);
    }
    closedir(d);
}

static void base_config(pn_config *c, const char *dir)
{
    pn_config_init(c);
    pn_config_set(c, "application_name", "agent.test", NULL);
    if (dir)
        pn_config_set(c, "output_dir", dir, NULL);
    pn_config_set(c, "upload_interval", "0.3", NULL);
    pn_config_set(c, "report_thread_name", "true", NULL);
    pn_config_set(c, "report_pid", "true", NULL);
    /* Under valgrind a tick costs more than 1 % of 10 ms: these tests are
     * about the configured rate (test_http_upload_throttled is not). */
    pn_config_set(c, "sampler_cpu_budget", "0", NULL);
}

/* Start an agent and give it one walker driver (the old one-call start).
 * NULL (and e filled) when either step fails; a started agent whose
 * driver could not be added is stopped again. */
static pn_agent *start_agent_fork(const pn_config *c, pn_walker_fn fn, void *ctx,
                                  void (*after_fork_child)(void *), pn_error *e)
{
    pn_agent *a = pn_agent_start(c, e);
    if (!a)
        return NULL;
    pn_driver_opts o = {.kind = PN_DRIVER_WALKER, .walker = fn, .ctx = ctx,
                        .after_fork_child = after_fork_child};
    if (!pn_agent_add_driver(a, &o, e)) {
        pn_error keep;
        if (e)
            keep = *e;
        pn_agent_stop(a);
        if (e)
            *e = keep;
        return NULL;
    }
    return a;
}

static pn_agent *start_agent(const pn_config *c, pn_walker_fn fn, void *ctx, pn_error *e)
{
    return start_agent_fork(c, fn, ctx, NULL, e);
}

static void test_folder_end_to_end(void)
{
    char dir[64];
    pn_test_tmpdir("agent", dir, sizeof dir);
    pn_config c;
    base_config(&c, dir);
    pn_error e;
    pthread_t t = start_worker();
    int64_t cpu0 = pn_thread_cpu_ns(atomic_load(&worker_tid)); /* before any tick */
    pn_agent *a = start_agent(&c, walker, NULL, &e);
    CHECK(a != NULL);
    if (!a) {
        fprintf(stderr, "  start: %s\n", e.msg);
        stop_worker(t);
        pn_config_free(&c);
        return;
    }
    /* Until the 0.3 s schedule ran on its own twice and 50 samples were
     * taken: 0.6 s on an idle machine, longer on a busy one. */
    pn_agent_stats st;
    double give_up = pn_test_now_s() + 60;
    do {
        struct timespec d = {0, 10 * 1000000};
        nanosleep(&d, NULL);
        pn_agent_get_stats(a, &st);
    } while ((st.periods < 2 || st.sampler.samples < 50) && pn_test_now_s() < give_up);
    CHECK(st.periods >= 2);
    CHECK(st.sampler.samples >= 50);
    CHECK_EQ_INT(pn_agent_flush(a, 60, &e), 0);
    pn_agent_get_stats(a, &st);
    CHECK(st.queue.uploads_ok >= 1);
    CHECK_EQ_INT(st.queue.uploads_failed, 0);
    pn_agent_stats final;
    pn_agent_stop_stats(a, &final);
    int64_t cpu_used = pn_thread_cpu_ns(atomic_load(&worker_tid)) - cpu0;
    stop_worker(t);

    folder_summary fs;
    summarize_folder(dir, &fs);
    printf("  %d files, busy_work %.3f s in %lld samples (labelled %.3f s); the worker used "
           "%.3f s, %.3f s of it between the first and the last tick\n",
           fs.files, fs.busy_ns / 1e9, (long long)fs.busy_count, fs.labelled_ns / 1e9,
           cpu_used / 1e9, (walk_cpu_last - walk_cpu_first) / 1e9);
    CHECK(fs.files >= 2);
    /* Every sample taken reached a file (the walker samples only the
     * worker, so all have its leaf), the final partial period included. */
    CHECK_EQ_INT(fs.busy_count, (long long)final.sampler.samples);
    /* Values are the worker's CPU nanoseconds: all it used from the first
     * tick to the last, nothing from before start or after stop (one 10 ms
     * interval of slack, should the first tick charge some). */
    CHECK(fs.busy_ns > 0);
    CHECK(fs.busy_ns >= walk_cpu_last - walk_cpu_first);
    CHECK(fs.busy_ns <= cpu_used + 10000000);
    CHECK_EQ_INT(fs.labelled_ns, fs.busy_ns);
    CHECK(fs.thread_named);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    CHECK_STR(fs.pid_seen, pid);

    /* The report reads what the folder exporter wrote. */
    pn_report *r = pn_report_new();
    CHECK_EQ_INT(pn_report_add_path(r, dir, &e), 0);
    CHECK((int)pn_report_profiles(r) == fs.files);
    char html[128];
    snprintf(html, sizeof html, "%s/flamegraph.html", dir);
    CHECK_EQ_INT(pn_report_write_html(r, "agent test", html, &e), 0);
    struct stat sb;
    CHECK(stat(html, &sb) == 0 && sb.st_size > 1000);
    pn_report_free(r);
    pn_test_rm_dir(dir);
    pn_config_free(&c);
    pn_labels_reclaim();
}

static void test_http_upload(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_config c;
    base_config(&c, NULL);
    pn_config_set(&c, "server_address", test_server_url(srv), NULL);
    pn_config_set(&c, "tags", "env=test,region=eu", NULL);
    pn_config_set(&c, "spy_name", "testspy", NULL);
    pn_config_set(&c, "runtime_name", "ruby", NULL);
    pn_config_set(&c, "runtime_version", "3.4.1", NULL);
    pn_config_set(&c, "tenant_id", "tenant-7", NULL);
    pthread_t t = start_worker();
    pn_error e;
    pn_agent *a = start_agent(&c, walker, NULL, &e);
    CHECK(a != NULL);
    if (a) {
        struct timespec d = {0, 500 * 1000000};
        nanosleep(&d, NULL);
        CHECK_EQ_INT(pn_agent_flush(a, pn_test_timing_strict() ? 5 : 60, &e), 0);
        pn_agent_stop(a);
    }
    stop_worker(t);
    CHECK(test_server_count(srv) >= 1);
    const test_request *r = test_server_request(srv, 0);
    if (r) {
        CHECK_STR(r->method, "POST");
        /* The user's tags and the Grafana SDKs' series tags, sorted. */
        static const char want[] =
            "/ingest?name=agent.test%7Benv%3Dtest%2Cotel.scope.name%3Dpyroscope-native%2Fruby"
            "%2Cotel.scope.version%3D" PN_SDK_VERSION "%2Cprocess.runtime.name%3Druby"
            "%2Cprocess.runtime.version%3D3.4.1%2Cregion%3Deu%7D&";
        CHECK(strncmp(r->target, want, sizeof want - 1) == 0);
        CHECK(strstr(r->target, "&spyName=testspy") != NULL);
        CHECK(strstr(r->target, "&sampleRate=100") != NULL);
        CHECK(strstr(r->target, "&from=") != NULL && strstr(r->target, "&until=") != NULL);
        CHECK_STR(test_request_header(r, "X-Scope-OrgID"), "tenant-7");
        CHECK(strstr(test_request_header(r, "Content-Type"), "multipart/form-data") != NULL);
    }
    test_server_stop(srv);
    pn_config_free(&c);
    pn_labels_reclaim();
}

/* The walker above, burning 1 ms of the sampler's CPU per tick. */
static void burning_walker(void *ctx, pn_tick *t)
{
    int64_t end = pn_thread_cpu_ns(pn_gettid()) + 1000000;
    while (pn_thread_cpu_ns(pn_gettid()) < end)
        ;
    walker(ctx, t);
}

/* At 100 Hz with 1 % of a core a tick may cost 100 us; it costs 1 ms, so
 * ticks go at least 10 intervals apart, and the upload says so. */
static void test_http_upload_throttled(void)
{
    test_server *srv = test_server_start();
    CHECK(srv != NULL);
    if (!srv)
        return;
    pn_config c;
    base_config(&c, NULL);
    pn_config_set(&c, "server_address", test_server_url(srv), NULL);
    pn_config_set(&c, "sampler_cpu_budget", "1", NULL);
    pthread_t t = start_worker();
    pn_error e;
    pn_agent *a = start_agent(&c, burning_walker, NULL, &e);
    CHECK(a != NULL);
    pn_agent_stats st = {0};
    if (a) {
        /* At least 5 ticks, however slow the machine. */
        for (int i = 0; i < 6000 && st.sampler.ticks < 5; i++) {
            struct timespec d = {0, 10 * 1000000};
            nanosleep(&d, NULL);
            pn_agent_get_stats(a, &st);
        }
        CHECK_EQ_INT(pn_agent_flush(a, pn_test_timing_strict() ? 5 : 60, &e), 0);
        pn_agent_stop_stats(a, &st);
    }
    stop_worker(t);
    printf("  ticks %llu, throttled %llu, effective %.1f Hz\n",
           (unsigned long long)st.sampler.ticks,
           (unsigned long long)st.sampler.budget_throttled_ticks, st.sampler.effective_rate_hz);
    CHECK(st.sampler.budget_throttled_ticks >= 9 * st.sampler.ticks);
    CHECK(st.sampler.effective_rate_hz <= 10);
    CHECK(test_server_count(srv) >= 1);
    long slowest = 100;
    for (size_t i = 0; i < test_server_count(srv); i++) {
        const test_request *r = test_server_request(srv, i);
        const char *rate = r ? strstr(r->target, "&sampleRate=") : NULL;
        CHECK(rate != NULL);
        if (!rate)
            continue;
        /* Ticks per interval covered, x 100 Hz: the first tick of a run is
         * not throttled yet, so a period holding it is a little faster. */
        long hz = strtol(rate + 12, NULL, 10);
        printf("  upload %zu: sampleRate=%ld\n", i, hz);
        CHECK(hz >= 1 && hz < 100);
        if (hz < slowest)
            slowest = hz;
    }
    CHECK(slowest <= 10);
    test_server_stop(srv);
    pn_config_free(&c);
    pn_labels_reclaim();
}

/* Threads flushing in a loop while another thread stops the agent: stop
 * waits for them (they hold the agent) and frees nothing under them; their
 * flushes fail once the stop has begun. ASan and valgrind see any use of
 * freed memory. */
typedef struct {
    pn_agent *a;
    atomic_int ok;
    int refused, other;
} flush_loop;

static void *flush_loop_main(void *arg)
{
    flush_loop *f = arg;
    for (;;) {
        pn_error e;
        if (pn_agent_flush(f->a, 30, &e) == 0) {
            atomic_fetch_add(&f->ok, 1);
        } else if (e.code == PN_ESTATE) {
            f->refused++;
            break;
        } else {
            f->other++;
        }
    }
    pn_agent_release(f->a);
    return NULL;
}

static void test_flush_while_stopping(void)
{
    char dir[64];
    pn_test_tmpdir("agent", dir, sizeof dir);
    pn_config c;
    base_config(&c, dir);
    pn_error e;
    pthread_t t = start_worker();
    pn_agent *a = start_agent(&c, walker, NULL, &e);
    CHECK(a != NULL);
    if (a) {
        flush_loop f[2] = {{.a = a}, {.a = a}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) {
            pn_agent_hold(a); /* released by the thread when it is done */
            CHECK_EQ_INT(pthread_create(&th[i], NULL, flush_loop_main, &f[i]), 0);
        }
        /* Until both threads have flushed at least once. */
        double give_up = pn_test_now_s() + 60;
        while ((atomic_load(&f[0].ok) == 0 || atomic_load(&f[1].ok) == 0) &&
               pn_test_now_s() < give_up)
            usleep(1000);
        pn_agent_stop(a);
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            CHECK(atomic_load(&f[i].ok) > 0);
            CHECK_EQ_INT(f[i].refused, 1);
            CHECK_EQ_INT(f[i].other, 0);
        }
    }
    stop_worker(t);
    pn_test_rm_dir(dir);
    pn_config_free(&c);
    pn_labels_reclaim();
}

static void test_stop_bounded_with_hanging_server(void)
{
    test_server *srv = test_server_start();
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    pn_config c;
    base_config(&c, NULL);
    pn_config_set(&c, "server_address", test_server_url(srv), NULL);
    pn_config_set(&c, "stop_timeout", "1", NULL);
    pn_config_set(&c, "log_level", "off", NULL);
    pthread_t t = start_worker();
    pn_agent *a = start_agent(&c, walker, NULL, NULL);
    CHECK(a != NULL);
    struct timespec d = {0, 700 * 1000000};
    nanosleep(&d, NULL);
    double t0 = pn_test_now_s();
    pn_agent_stop(a);
    double took = pn_test_now_s() - t0;
    printf("  stop took %.2f s with a server that never answers\n", took);
    CHECK(took < 2.5);
    stop_worker(t);
    test_server_stop(srv);
    pn_config_free(&c);
    pn_log_set_level(PN_LOG_WARN);
    pn_labels_reclaim();
}

typedef struct {
    pn_agent *a;
    pn_agent_stats final;
    atomic_int done;
} stopper;

static void *stopper_main(void *arg)
{
    stopper *st = arg;
    pn_agent_stop_stats(st->a, &st->final);
    atomic_store(&st->done, 1);
    return NULL;
}

/* A stopping agent no longer blocks a new start: the old one finishes its
 * bounded final export (here: an upload that never gets an answer, dropped
 * and counted at its stop_timeout) while the new one already runs. */
static void test_start_while_previous_stops(void)
{
    test_server *srv = test_server_start();
    if (!srv)
        return;
    test_server_default_reply(srv, TEST_SERVER_HANG, NULL, 0);
    char dir[64];
    pn_test_tmpdir("agent", dir, sizeof dir);
    pn_config c, c2;
    base_config(&c, NULL);
    pn_config_set(&c, "server_address", test_server_url(srv), NULL);
    pn_config_set(&c, "stop_timeout", "3", NULL);
    pn_config_set(&c, "log_level", "off", NULL);
    base_config(&c2, dir);
    pn_config_set(&c2, "log_level", "off", NULL);
    pn_error e;
    pthread_t t = start_worker();
    stopper st = {.a = start_agent(&c, walker, NULL, &e)};
    CHECK(st.a != NULL);
    if (st.a) {
        CHECK(test_server_wait(srv, 1, 60) >= 1); /* an upload hangs now */
        pthread_t th;
        CHECK_EQ_INT(pthread_create(&th, NULL, stopper_main, &st), 0);
        pn_agent *b = NULL;
        int stop_done_first = 0;
        while (!b && !(stop_done_first = atomic_load(&st.done))) {
            b = start_agent(&c2, walker, NULL, &e);
            if (!b) {
                CHECK_EQ_INT(e.code, PN_ESTATE);
                usleep(1000);
            }
        }
        CHECK(b != NULL);
        CHECK(!stop_done_first);
        pthread_join(th, NULL);
        CHECK(st.final.queue.uploads_dropped + st.final.queue.uploads_failed >= 1);
        if (b)
            pn_agent_stop(b);
    }
    stop_worker(t);
    test_server_stop(srv);
    pn_config_free(&c);
    pn_config_free(&c2);
    pn_test_rm_dir(dir);
    pn_log_set_level(PN_LOG_WARN);
    pn_labels_reclaim();
}

static void test_one_agent_and_bad_config(void)
{
    char dir[64];
    pn_test_tmpdir("agent", dir, sizeof dir);
    pn_config c;
    base_config(&c, dir);
    pn_error e;
    pn_agent *a = start_agent(&c, walker, NULL, &e);
    CHECK(a != NULL);
    CHECK(start_agent(&c, walker, NULL, &e) == NULL);
    CHECK_EQ_INT(e.code, PN_ESTATE);
    pn_agent_stop(a);
    /* After stop a new agent may start. */
    a = start_agent(&c, walker, NULL, &e);
    CHECK(a != NULL);
    pn_agent_stop(a);

    pn_config bad;
    pn_config_init(&bad);
    CHECK(pn_agent_start(&bad, &e) == NULL);
    CHECK(strstr(e.msg, "application_name") != NULL);
    pn_config_set(&bad, "application_name", "x", NULL);
    CHECK(pn_agent_start(&bad, &e) == NULL);
    CHECK(strstr(e.msg, "output_dir") != NULL);
    /* A walker driver needs a walker; the failed add leaves the agent
     * running and usable. */
    a = pn_agent_start(&c, &e);
    CHECK(a != NULL);
    if (a) {
        CHECK(pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_WALKER}, &e) == NULL);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        CHECK(pn_agent_add_driver(a, &(pn_driver_opts){.kind = 0, .walker = walker}, &e) ==
              NULL);
        CHECK(pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_WALKER,
                                                       .walker = walker}, &e) != NULL);
        pn_agent_stop(a);
    }
    pn_config_free(&bad);
    pn_config_free(&c);
    pn_test_rm_dir(dir);
}

/* Timeouts whose nanoseconds do not fit an int64_t (or are not numbers)
 * are bounded, not converted as they are (undefined behaviour). */
static void test_flush_timeout_out_of_range(void)
{
    char dir[64];
    pn_test_tmpdir("agent", dir, sizeof dir);
    pn_config c;
    base_config(&c, dir);
    pn_error e;
    pn_agent *a = start_agent(&c, walker, NULL, &e);
    CHECK(a != NULL);
    if (a) {
        CHECK_EQ_INT(pn_agent_flush(a, 1e10, &e), 0);
        CHECK_EQ_INT(pn_agent_flush(a, INFINITY, &e), 0);
        /* Zero time to wait: done or a clean "not within" failure. */
        int rc = pn_agent_flush(a, NAN, &e);
        CHECK(rc == 0 || (rc == -1 && e.code == PN_ELIMIT));
        rc = pn_agent_flush(a, -1, &e);
        CHECK(rc == 0 || (rc == -1 && e.code == PN_ELIMIT));
        pn_agent_stop(a);
    }
    pn_config_free(&c);
    pn_test_rm_dir(dir);
}

static atomic_int child_hook_ran;
static void after_fork(void *ctx)
{
    (void)ctx;
    atomic_store(&child_hook_ran, 1);
}

static void test_fork_child_profiles_itself(void)
{
    char dir[64];
    pn_test_tmpdir("agent", dir, sizeof dir);
    pn_config c;
    base_config(&c, dir);
    pn_error e;
    pn_agent *a = start_agent_fork(&c, walker, NULL, after_fork, &e);
    CHECK(a != NULL);
    if (!a) {
        pn_config_free(&c);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* The child: our own thread is the worker now. */
        atomic_store(&worker_fn, "child_work");
        atomic_store(&worker_tid, pn_gettid());
        /* Spin until the child's own sampler (its stats start from zero)
         * took 30 samples of us: 0.3 s on an idle machine. */
        double t0 = pn_test_now_s();
        volatile double x = 0;
        pn_agent_stats st;
        do {
            for (int k = 0; k < 100000; k++)
                x += 1;
            pn_agent_get_stats(a, &st);
        } while (st.sampler.samples < 30 && pn_test_now_s() - t0 < 60);
        pn_agent_stop(a);
        pn_config_free(&c);
        _exit(atomic_load(&child_hook_ran) && st.sampler.samples >= 30 ? 0 : 3);
    }
    CHECK(pid > 0);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent kept going: its ticks advance (at most 60 s to see it). */
    pn_agent_stats st, st2;
    pn_agent_get_stats(a, &st);
    double give_up = pn_test_now_s() + 60;
    do {
        struct timespec d = {0, 10 * 1000000};
        nanosleep(&d, NULL);
        pn_agent_get_stats(a, &st2);
    } while (st2.sampler.ticks <= st.sampler.ticks && pn_test_now_s() < give_up);
    CHECK(st2.sampler.ticks > st.sampler.ticks);
    CHECK_EQ_INT(atomic_load(&child_hook_ran), 0); /* the hook ran only in the child */
    pn_agent_stop(a);

    /* The child's profiles carry its own pid and its own function. */
    atomic_store(&worker_fn, "child_work");
    folder_summary fs;
    summarize_folder(dir, &fs);
    char child_pid[32];
    snprintf(child_pid, sizeof child_pid, "%d", (int)pid);
    printf("  child_work %.3f s in %lld samples, pid label %s (child %s)\n", fs.busy_ns / 1e9,
           (long long)fs.busy_count, fs.pid_seen, child_pid);
    /* The 30 or more samples the child took all reached its files. */
    CHECK(fs.busy_count >= 30);
    CHECK(fs.busy_ns > 0);
    CHECK_STR(fs.pid_seen, child_pid);
    atomic_store(&worker_fn, "busy_work");
    pn_test_rm_dir(dir);
    pn_config_free(&c);
}

TEST_MAIN(T(test_folder_end_to_end), T(test_http_upload), T(test_http_upload_throttled), T(test_stop_bounded_with_hanging_server),
          T(test_one_agent_and_bad_config), T(test_fork_child_profiles_itself),
          T(test_flush_while_stopping), T(test_flush_timeout_out_of_range),
          T(test_start_while_previous_stops))
