/* Drivers end to end: each kind (batch, rendezvous, walker) feeding a real
 * agent that writes to a folder, two drivers side by side, and label churn
 * under a fast walker. A fake runtime stands in for the binding: samples
 * made up by the test, a SIGPROF handler that captures a small payload.
 *
 * Timing: nothing here asserts a speed. Waits are "until the condition or
 * 30 s", so the suite passes on a loaded machine and under valgrind. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "files.h"
#include "pprof_decode.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "pipeline/driver.h"

#define WAIT_S 30.0

static int64_t mono_now(void) { return pn_clock_ns(CLOCK_MONOTONIC); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------- folder */

/* Calls fn for every profile written to dir (decoded and checked); returns
 * the number of profiles. */
typedef void (*profile_fn)(void *ud, const pn_pb_profile *p);

static int each_profile(const char *dir, profile_fn fn, void *ud)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    char path[512];
    int n = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 6, ".pb.gz") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t dlen;
        uint8_t *data = pn_test_read_file(path, &dlen);
        pn_pb_profile *p = data ? pn_pprof_decode(data, dlen, NULL) : NULL;
        free(data);
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECK_EQ_INT(pn_pprof_check(p, 1), 0);
        n++;
        fn(ud, p);
        pn_pprof_free(p);
    }
    closedir(d);
    return n;
}

static const char *sample_type0(const pn_pb_profile *p)
{
    return p->n_sample_type ? pn_pprof_str(p, p->sample_type[0]->type) : NULL;
}

/* A config writing to dir, flushing only when asked. */
static void folder_config(pn_config *c, const char *dir)
{
    pn_config_init(c);
    pn_config_set(c, "application_name", "driver.test", NULL);
    pn_config_set(c, "output_dir", dir, NULL);
    pn_config_set(c, "upload_interval", "3600", NULL);
}

/* --------------------------------------------------------------- batch */

typedef struct {
    pn_agent *a;
    int rc;
    pn_error e;
} flush_job;

static void *flush_main(void *arg)
{
    flush_job *j = arg;
    j->rc = pn_agent_flush(j->a, 60, &j->e);
    return NULL;
}

/* Record one sample with a two-frame stack (leaf, "batch_root") taken at
 * time_ns; returns 0, or -1 when it was too late for any open period. */
static int batch_record(pn_driver *d, int64_t time_ns, const char *leaf,
                        const pn_labelset *labels, int64_t value)
{
    pn_record_begin(d);
    pn_period *p = pn_record_period(d, time_ns);
    if (p) {
        pn_symbols *sym = pn_period_symbols(p);
        pn_frame_id f[2] = {pn_symbols_frame3(sym, leaf, strlen(leaf), "batch.js", 8, 10),
                            pn_symbols_frame3(sym, "batch_root", 10, "batch.js", 8, 1)};
        int64_t v[2] = {value, 1};
        pn_sample s = {.frames = f, .depth = 2, .labels = labels, .tid = 1, .values = v,
                       .time_ns = time_ns};
        pn_record(d, p, &s);
    }
    pn_record_end(d);
    return p ? 0 : -1;
}

typedef struct {
    int profiles;
    /* Per profile: which leaves it holds (bit i: leaves[i]). */
    unsigned masks[16];
    int64_t count[6];
    int labelled_ok, labelled_bad, plain_bad;
} batch_seen;

static const char *batch_leaves[] = {"before_cut", "late_but_in_time", "after_cut", "labelled",
                                     "plain", "too_late"};

static void batch_profile(void *ud, const pn_pb_profile *p)
{
    batch_seen *b = ud;
    CHECK_STR(sample_type0(p), "batch");
    unsigned mask = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pn_pb_sample *s = p->sample[i];
        const char *leaf = pn_pprof_frame_name(p, s, 0);
        for (int k = 0; leaf && k < 6; k++) {
            if (strcmp(leaf, batch_leaves[k]) != 0)
                continue;
            mask |= 1u << k;
            b->count[k] += s->value[1];
        }
        const char *req = pn_pprof_label(p, s, "req");
        if (leaf && strcmp(leaf, "labelled") == 0) {
            if (req && strcmp(req, "a") == 0)
                b->labelled_ok += (int)s->value[1];
            else
                b->labelled_bad++;
        } else if (req) {
            b->plain_bad++;
        }
    }
    if (b->profiles < 16)
        b->masks[b->profiles] = mask;
    b->profiles++;
}

static void test_batch(void)
{
    char dir[64];
    pn_test_tmpdir("driver", dir, sizeof dir);
    pn_config c;
    folder_config(&c, dir);
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    CHECK(a != NULL);
    if (!a) {
        fprintf(stderr, "  start: %s\n", e.msg);
        pn_config_free(&c);
        pn_test_rm_dir(dir);
        return;
    }
    pn_driver *d = pn_agent_add_driver(
        a, &(pn_driver_opts){.kind = PN_DRIVER_BATCH, .profile_type = "batch",
                             .max_delay_ns = 200 * 1000000LL}, &e);
    CHECK(d != NULL);
    if (!d) {
        pn_agent_stop(a);
        pn_config_free(&c);
        pn_test_rm_dir(dir);
        return;
    }
    pn_label kv = {"req", "a"};
    const pn_labelset *ls = pn_labelset_merge(pn_labelset_empty(), &kv, 1, &e);
    CHECK(ls != NULL);

    /* Period 1: samples taken now, some with labels. */
    int64_t t_before = mono_now();
    CHECK_EQ_INT(batch_record(d, t_before, "before_cut", NULL, 1000), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(batch_record(d, mono_now(), "labelled", ls, 1000), 0);
        CHECK_EQ_INT(batch_record(d, mono_now(), "plain", NULL, 1000), 0);
    }
    int64_t t_late = mono_now(); /* taken before the cut, delivered after it */

    /* Flush from another thread; once the store was cut, deliver the
     * sample taken before the cut and one taken after it. */
    pn_period *active = pn_store_active(d->store);
    flush_job j = {a, -1, {0}};
    pthread_t ft;
    pthread_create(&ft, NULL, flush_main, &j);
    double t0 = pn_test_now_s();
    while (pn_store_active(d->store) == active && pn_test_now_s() - t0 < WAIT_S)
        sleep_ms(1);
    CHECK(pn_store_active(d->store) != active);
    CHECK_EQ_INT(batch_record(d, t_late, "late_but_in_time", NULL, 1000), 0);
    CHECK_EQ_INT(batch_record(d, mono_now(), "after_cut", NULL, 1000), 0);
    /* Everything taken before now was delivered: the flusher seals. */
    pn_driver_watermark(d, mono_now());
    pthread_join(ft, NULL);
    CHECK_EQ_INT(j.rc, 0);

    /* Period 1 is sealed now: a sample of its time has no open period. */
    pn_driver_stats ds;
    pn_driver_get_stats(d, &ds);
    CHECK_EQ_INT(ds.late, 0);
    CHECK_EQ_INT(batch_record(d, t_before, "too_late", NULL, 1000), -1);
    pn_driver_get_stats(d, &ds);
    CHECK_EQ_INT(ds.late, 1);
    CHECK_EQ_INT(ds.kind, PN_DRIVER_BATCH);
    CHECK_STR(ds.profile_type, "batch");
    CHECK_EQ_INT(ds.recorded, 9);

    /* The next flush exports period 2 (waiting max_delay for a watermark
     * that does not come) and counts the late sample. */
    CHECK_EQ_INT(pn_agent_flush(a, 60, &e), 0);
    pn_agent_stats st;
    pn_agent_get_stats(a, &st);
    CHECK_EQ_INT(st.late_samples, 1);
    pn_agent_stats fin;
    pn_agent_stop_stats(a, &fin);
    CHECK_EQ_INT(fin.late_samples, 1);
    CHECK_EQ_INT(fin.encode_errors, 0);
    pn_labelset_unref(ls);

    batch_seen b;
    memset(&b, 0, sizeof b);
    int n = each_profile(dir, batch_profile, &b);
    printf("  %d profiles\n", n);
    CHECK_EQ_INT(n, 2);
    unsigned p1 = (1u << 0) | (1u << 1) | (1u << 3) | (1u << 4), p2 = 1u << 2;
    CHECK((b.masks[0] == p1 && b.masks[1] == p2) || (b.masks[0] == p2 && b.masks[1] == p1));
    CHECK_EQ_INT(b.count[0], 1);
    CHECK_EQ_INT(b.count[1], 1);
    CHECK_EQ_INT(b.count[2], 1);
    CHECK_EQ_INT(b.count[3], 3);
    CHECK_EQ_INT(b.count[4], 3);
    CHECK_EQ_INT(b.count[5], 0);
    CHECK_EQ_INT(b.labelled_ok, 3);
    CHECK_EQ_INT(b.labelled_bad, 0);
    CHECK_EQ_INT(b.plain_bad, 0);
    pn_config_free(&c);
    pn_test_rm_dir(dir);
    pn_labels_reclaim();
}

/* ---------------------------------------------------------- rendezvous */

enum { W_SPIN0, W_SPIN1, W_BLOCK, W_SLEEP, W_EXIT, W_ABANDON, W_LATE, NW };
static const char *w_names[NW] = {"w0", "w1", "blocker", "sleeper", "exiter", "abandoner",
                                  "latecomer"};

static pn_driver *_Atomic g_rdv;
static const pn_labelset *_Atomic w_labels[NW];
static atomic_int w_tid[NW];
static atomic_long w_signals[NW];    /* handler ran with a capture */
static atomic_long w_abandoned;
static atomic_long w_consumed[NW];
static _Atomic int64_t w_value_ns[NW]; /* CPU its recorded captures carry */
static atomic_long label_mismatch;
static atomic_int w_stop[NW];
static atomic_int w_joined[NW];
static __thread int tl_widx = -1;

typedef struct {
    int32_t idx;
    uint32_t counter;
} payload;

static void on_sigprof(int sig)
{
    (void)sig;
    int saved = errno;
    pn_driver *d = atomic_load(&g_rdv);
    int idx = tl_widx;
    if (!d || idx < 0) {
        errno = saved;
        return;
    }
    pn_capture *c = pn_capture_begin(d);
    if (c) {
        long n = atomic_fetch_add(&w_signals[idx], 1);
        if (idx == W_ABANDON) {
            atomic_fetch_add(&w_abandoned, 1);
            pn_capture_abandon(c);
        } else {
            size_t size;
            payload *pl = pn_capture_buffer(c, &size);
            size_t used = 0;
            if (size >= sizeof *pl) {
                pl->idx = idx;
                pl->counter = (uint32_t)n;
                used = sizeof *pl;
            }
            pn_capture_commit(c, used, atomic_load(&w_labels[idx]));
        }
    }
    errno = saved;
}

/* The test's handler in place of whatever SIGPROF did (saved in old). */
static void install_on_sigprof(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigprof;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, old);
}

static void consume(void *ud, pn_driver *d, const pn_capture_view *v)
{
    (void)ud;
    if (v->len < sizeof(payload))
        return;
    payload pl;
    memcpy(&pl, v->data, sizeof pl);
    if (pl.idx < 0 || pl.idx >= NW)
        return;
    const char *want = w_names[pl.idx];
    const char *got = v->labels ? pn_labelset_get(v->labels, "worker") : NULL;
    if (!got || strcmp(got, want) != 0 || v->tid != (uint64_t)atomic_load(&w_tid[pl.idx]))
        atomic_fetch_add(&label_mismatch, 1);
    pn_period *p = pn_record_period(d, v->time_ns);
    if (!p)
        return;
    char leaf[32];
    snprintf(leaf, sizeof leaf, "work_%s", want);
    pn_symbols *sym = pn_period_symbols(p);
    pn_frame_id f[2] = {pn_symbols_frame3(sym, leaf, strlen(leaf), "rb.rb", 5, pl.counter % 7),
                        pn_symbols_frame3(sym, "thread_main", 11, "rb.rb", 5, 1)};
    int64_t vals[2] = {v->value_ns, 1};
    pn_sample s = {.frames = f, .depth = 2, .labels = v->labels, .tid = v->tid,
                   .values = vals, .time_ns = v->time_ns};
    pn_record(d, p, &s);
    atomic_fetch_add(&w_value_ns[pl.idx], v->value_ns);
    atomic_fetch_add(&w_consumed[pl.idx], 1);
}

static atomic_int consumer_stop;

static void *consumer_main(void *arg)
{
    pn_driver *d = arg;
    while (!atomic_load(&consumer_stop)) {
        pn_rendezvous_drain(d, consume, NULL);
        sleep_ms(1);
    }
    pn_rendezvous_drain(d, consume, NULL);
    return NULL;
}

static pthread_mutex_t sleep_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cv = PTHREAD_COND_INITIALIZER;

static void *rdv_worker(void *arg)
{
    int idx = (int)(intptr_t)arg;
    pn_driver *d = atomic_load(&g_rdv);
    pn_label kv = {"worker", w_names[idx]};
    const pn_labelset *ls = pn_labelset_merge(pn_labelset_empty(), &kv, 1, NULL);
    atomic_store(&w_labels[idx], ls);
    atomic_store(&w_tid[idx], pn_gettid());
    if (idx == W_BLOCK) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGPROF);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
    tl_widx = idx;
    pn_error e;
    int rc = pn_rendezvous_join(d, &e);
    if (rc != 0)
        fprintf(stderr, "  %s: join: %s\n", w_names[idx], e.msg);
    atomic_store(&w_joined[idx], rc == 0 ? 1 : -1);
    if (idx == W_SLEEP) {
        /* Idle: blocked without using CPU until told to stop. */
        pthread_mutex_lock(&sleep_mu);
        while (!atomic_load(&w_stop[idx]))
            pthread_cond_wait(&sleep_cv, &sleep_mu);
        pthread_mutex_unlock(&sleep_mu);
    } else {
        volatile double x = 0;
        while (!atomic_load(&w_stop[idx]))
            for (int k = 0; k < 10000; k++)
                x += 1;
    }
    /* The exiter leaves by exiting (the thread's destructor); the others
     * leave explicitly. */
    if (idx != W_EXIT)
        pn_rendezvous_leave(d);
    /* A signal still on its way must find nothing: no labels to read. */
    tl_widx = -1;
    return NULL;
}

static void release_worker_labels(void)
{
    for (int i = 0; i < NW; i++) {
        const pn_labelset *ls = atomic_exchange(&w_labels[i], NULL);
        if (ls)
            pn_labelset_unref(ls);
    }
}

typedef struct {
    int profiles;
    int64_t leaf_count[NW];
    int bad_label;
} rdv_seen;

static void rdv_profile(void *ud, const pn_pb_profile *p)
{
    rdv_seen *r = ud;
    CHECK_STR(sample_type0(p), "rdv");
    r->profiles++;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pn_pb_sample *s = p->sample[i];
        const char *leaf = pn_pprof_frame_name(p, s, 0);
        const char *w = pn_pprof_label(p, s, "worker");
        for (int k = 0; leaf && k < NW; k++) {
            if (strncmp(leaf, "work_", 5) != 0 || strcmp(leaf + 5, w_names[k]) != 0)
                continue;
            r->leaf_count[k] += s->value[1];
            if (!w || strcmp(w, w_names[k]) != 0)
                r->bad_label++;
        }
    }
}

static void test_rendezvous(void)
{
    for (int i = 0; i < NW; i++) {
        atomic_store(&w_signals[i], 0);
        atomic_store(&w_consumed[i], 0);
        atomic_store(&w_stop[i], 0);
        atomic_store(&w_joined[i], 0);
        atomic_store(&w_tid[i], 0);
    }
    atomic_store(&w_abandoned, 0);
    atomic_store(&label_mismatch, 0);
    atomic_store(&consumer_stop, 0);

    struct sigaction old;
    install_on_sigprof(&old);

    char dir[64];
    pn_test_tmpdir("driver", dir, sizeof dir);
    pn_config c;
    folder_config(&c, dir);
    pn_config_set(&c, "oncpu", "true", NULL);
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    CHECK(a != NULL);
    /* Six slots: the latecomer joins only if the exiter's slot was freed. */
    pn_driver *d = a ? pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_RENDEZVOUS,
                                                                .profile_type = "rdv",
                                                                .max_threads = NW - 1,
                                                                .capture_bytes = 256}, &e)
                     : NULL;
    CHECK(d != NULL);
    if (!d) {
        fprintf(stderr, "  %s\n", e.msg);
        pn_agent_stop(a);
        pn_config_free(&c);
        sigaction(SIGPROF, &old, NULL);
        pn_test_rm_dir(dir);
        return;
    }
    atomic_store(&g_rdv, d);
    pthread_t cons, th[NW];
    pthread_create(&cons, NULL, consumer_main, d);
    for (int i = 0; i < W_LATE; i++) {
        pthread_create(&th[i], NULL, rdv_worker, (void *)(intptr_t)i);
        double t0 = pn_test_now_s();
        while (!atomic_load(&w_joined[i]) && pn_test_now_s() - t0 < WAIT_S)
            sleep_ms(1);
        CHECK_EQ_INT(atomic_load(&w_joined[i]), 1);
    }

    /* Until the spinners were sampled, the blocker timed out and the
     * abandoner abandoned. */
    pn_driver_stats ds;
    double t0 = pn_test_now_s();
    for (;;) {
        pn_driver_get_stats(d, &ds);
        int done = atomic_load(&w_consumed[W_SPIN0]) >= 5 &&
                   atomic_load(&w_consumed[W_SPIN1]) >= 5 &&
                   atomic_load(&w_consumed[W_EXIT]) >= 1 && atomic_load(&w_abandoned) >= 2 &&
                   ds.timeouts >= 2;
        if (done || pn_test_now_s() - t0 > WAIT_S)
            break;
        sleep_ms(10);
    }
    CHECK(atomic_load(&w_consumed[W_SPIN0]) >= 5);
    CHECK(atomic_load(&w_consumed[W_SPIN1]) >= 5);
    CHECK(atomic_load(&w_consumed[W_EXIT]) >= 1);
    CHECK(atomic_load(&w_abandoned) >= 2);
    CHECK(ds.timeouts >= 2);

    /* The exiter ends; its slot is freed, so the latecomer can join (the
     * driver has one slot less than threads), and it is sampled; nothing
     * signals the dead thread. */
    atomic_store(&w_stop[W_EXIT], 1);
    pthread_join(th[W_EXIT], NULL);
    long exit_signals = atomic_load(&w_signals[W_EXIT]);
    pthread_create(&th[W_LATE], NULL, rdv_worker, (void *)(intptr_t)W_LATE);
    t0 = pn_test_now_s();
    while (!atomic_load(&w_joined[W_LATE]) && pn_test_now_s() - t0 < WAIT_S)
        sleep_ms(1);
    CHECK_EQ_INT(atomic_load(&w_joined[W_LATE]), 1);
    t0 = pn_test_now_s();
    while (atomic_load(&w_consumed[W_LATE]) < 3 && pn_test_now_s() - t0 < WAIT_S)
        sleep_ms(10);
    CHECK(atomic_load(&w_consumed[W_LATE]) >= 3);
    CHECK_EQ_INT(atomic_load(&w_signals[W_EXIT]), exit_signals);

    for (int i = 0; i < NW; i++) {
        if (i == W_EXIT)
            continue;
        pthread_mutex_lock(&sleep_mu);
        atomic_store(&w_stop[i], 1);
        pthread_cond_broadcast(&sleep_cv);
        pthread_mutex_unlock(&sleep_mu);
        pthread_join(th[i], NULL);
    }
    atomic_store(&consumer_stop, 1);
    pthread_join(cons, NULL);
    pn_driver_get_stats(d, &ds);
    atomic_store(&g_rdv, NULL);
    printf("  requested %llu captured %llu timeouts %llu discarded %llu busy %llu exited %llu "
           "below_min %llu; abandoned %ld\n",
           (unsigned long long)ds.requested, (unsigned long long)ds.captured,
           (unsigned long long)ds.timeouts, (unsigned long long)ds.discarded,
           (unsigned long long)ds.busy, (unsigned long long)ds.exited,
           (unsigned long long)ds.below_min_cpu, atomic_load(&w_abandoned));
    CHECK_EQ_INT(ds.kind, PN_DRIVER_RENDEZVOUS);
    CHECK(ds.discarded >= (uint64_t)atomic_load(&w_abandoned));
    CHECK(ds.captured >= 13);
    CHECK(ds.requested >= ds.captured + ds.timeouts);
    /* The blocker never answered, the idle thread was never signalled. */
    CHECK_EQ_INT(atomic_load(&w_signals[W_BLOCK]), 0);
    CHECK_EQ_INT(atomic_load(&w_signals[W_SLEEP]), 0);
    CHECK_EQ_INT(atomic_load(&w_consumed[W_BLOCK]), 0);
    CHECK_EQ_INT(atomic_load(&w_consumed[W_SLEEP]), 0);
    CHECK_EQ_INT(atomic_load(&w_consumed[W_ABANDON]), 0);
    CHECK_EQ_INT(atomic_load(&label_mismatch), 0);

    CHECK_EQ_INT(pn_agent_flush(a, 60, &e), 0);
    pn_agent_stop(a);
    sigaction(SIGPROF, &old, NULL);

    rdv_seen r;
    memset(&r, 0, sizeof r);
    each_profile(dir, rdv_profile, &r);
    printf("  %d profiles: w0 %lld w1 %lld exiter %lld latecomer %lld samples\n", r.profiles,
           (long long)r.leaf_count[W_SPIN0], (long long)r.leaf_count[W_SPIN1],
           (long long)r.leaf_count[W_EXIT], (long long)r.leaf_count[W_LATE]);
    CHECK(r.profiles >= 1);
    for (int i = 0; i < NW; i++)
        CHECK_EQ_INT(r.leaf_count[i], atomic_load(&w_consumed[i]));
    CHECK_EQ_INT(r.bad_label, 0);
    release_worker_labels();
    pn_config_free(&c);
    pn_test_rm_dir(dir);
    pn_labels_reclaim();
}

/* -------------------------------------------------------------- walker */

static atomic_int spin_tid;
static atomic_int spin_stop;
static const pn_labelset *walker_ls[2];
static atomic_long walker_ticks;

static void *spinner(void *arg)
{
    (void)arg;
    pn_label kv = {"slot", "yes"};
    pn_labels_push(&kv, 1, NULL);
    atomic_store(&spin_tid, pn_gettid());
    volatile double x = 0;
    while (!atomic_load(&spin_stop))
        x += 1;
    pn_labels_pop(NULL);
    return NULL;
}

/* Three "execution contexts" take turns on the spinner: two with labels
 * the walker read itself, one without any. */
static void ctx_walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    long n = atomic_fetch_add(&walker_ticks, 1);
    pid_t tid = atomic_load(&spin_tid);
    int64_t v;
    if (tid == 0 || !pn_tick_begin_thread(t, tid, &v))
        return;
    static const char *leaves[3] = {"ctx_a", "ctx_b", "ctx_none"};
    int k = (int)(n % 3);
    pn_symbols *sym = pn_tick_symbols(t);
    pn_frame_id f[2] = {pn_symbols_frame3(sym, leaves[k], 5 + (k == 2 ? 3 : 0), "w.py", 4, 1),
                        pn_symbols_frame3(sym, "main", 4, "w.py", 4, 0)};
    pn_tick_sample_labels(t, tid, f, 2, v, NULL, k < 2 ? walker_ls[k] : NULL);
}

typedef struct {
    int64_t n[3];
    int bad;
    int64_t other_types;
} walker_seen;

static void walker_profile(void *ud, const pn_pb_profile *p)
{
    walker_seen *w = ud;
    if (strcmp(sample_type0(p), "cpu") != 0) {
        w->other_types++;
        return;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        const pn_pb_sample *s = p->sample[i];
        const char *leaf = pn_pprof_frame_name(p, s, 0);
        const char *ctx = pn_pprof_label(p, s, "ctx");
        const char *slot = pn_pprof_label(p, s, "slot");
        if (!leaf)
            continue;
        if (strcmp(leaf, "ctx_a") == 0) {
            w->n[0] += s->value[1];
            w->bad += !ctx || strcmp(ctx, "a") != 0 || slot != NULL;
        } else if (strcmp(leaf, "ctx_b") == 0) {
            w->n[1] += s->value[1];
            w->bad += !ctx || strcmp(ctx, "b") != 0 || slot != NULL;
        } else if (strcmp(leaf, "ctx_none") == 0) {
            w->n[2] += s->value[1];
            w->bad += ctx != NULL || slot != NULL;
        }
    }
}

static void test_walker_labels(void)
{
    pn_label a_kv = {"ctx", "a"}, b_kv = {"ctx", "b"};
    walker_ls[0] = pn_labelset_merge(pn_labelset_empty(), &a_kv, 1, NULL);
    walker_ls[1] = pn_labelset_merge(pn_labelset_empty(), &b_kv, 1, NULL);
    atomic_store(&spin_stop, 0);
    atomic_store(&spin_tid, 0);
    atomic_store(&walker_ticks, 0);
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    while (!atomic_load(&spin_tid))
        sleep_ms(1);

    char dir[64];
    pn_test_tmpdir("driver", dir, sizeof dir);
    pn_config c;
    folder_config(&c, dir);
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    CHECK(a != NULL);
    pn_driver *d = a ? pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_WALKER,
                                                                .walker = ctx_walker}, &e)
                     : NULL;
    CHECK(d != NULL);
    pn_driver_stats ds;
    double t0 = pn_test_now_s();
    do {
        sleep_ms(20);
        if (d)
            pn_driver_get_stats(d, &ds);
    } while (d && ds.recorded < 30 && pn_test_now_s() - t0 < WAIT_S);
    if (a) {
        CHECK_EQ_INT(pn_agent_flush(a, 60, &e), 0);
        pn_agent_stop(a);
    }
    atomic_store(&spin_stop, 1);
    pthread_join(t, NULL);

    walker_seen w;
    memset(&w, 0, sizeof w);
    each_profile(dir, walker_profile, &w);
    printf("  ctx_a %lld ctx_b %lld none %lld samples\n", (long long)w.n[0], (long long)w.n[1],
           (long long)w.n[2]);
    CHECK(w.n[0] > 0 && w.n[1] > 0 && w.n[2] > 0);
    CHECK(w.n[0] + w.n[1] + w.n[2] >= 30);
    CHECK_EQ_INT(w.bad, 0);
    CHECK_EQ_INT(w.other_types, 0);
    pn_labelset_unref(walker_ls[0]);
    pn_labelset_unref(walker_ls[1]);
    pn_config_free(&c);
    pn_test_rm_dir(dir);
    pn_labels_reclaim();
}

/* --------------------------------------------------- two drivers at once */

typedef struct {
    int cpu_profiles, alloc_profiles;
    int64_t cpu_walker, cpu_other, alloc_batch, alloc_bytes, alloc_other;
} two_seen;

static void two_profile(void *ud, const pn_pb_profile *p)
{
    two_seen *t = ud;
    const char *type = sample_type0(p);
    int cpu = strcmp(type, "cpu") == 0, alloc = strcmp(type, "alloc_objects") == 0;
    CHECK(cpu || alloc);
    if (alloc) {
        CHECK_EQ_INT(p->n_sample_type, 2);
        if (p->n_sample_type == 2)
            CHECK_STR(pn_pprof_str(p, p->sample_type[1]->type), "alloc_space");
    }
    t->cpu_profiles += cpu;
    t->alloc_profiles += alloc;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pn_pb_sample *s = p->sample[i];
        const char *leaf = pn_pprof_frame_name(p, s, 0);
        int is_batch = leaf && strcmp(leaf, "malloc_site") == 0;
        int is_walker = leaf && strncmp(leaf, "ctx_", 4) == 0;
        if (cpu) {
            t->cpu_walker += is_walker;
            t->cpu_other += !is_walker;
        } else if (alloc) {
            t->alloc_batch += is_batch ? s->value[0] : 0;
            t->alloc_bytes += is_batch && s->n_value > 1 ? s->value[1] : 0;
            t->alloc_other += !is_batch;
        }
    }
}

static void test_two_drivers(void)
{
    pn_label a_kv = {"ctx", "a"}, b_kv = {"ctx", "b"};
    walker_ls[0] = pn_labelset_merge(pn_labelset_empty(), &a_kv, 1, NULL);
    walker_ls[1] = pn_labelset_merge(pn_labelset_empty(), &b_kv, 1, NULL);
    atomic_store(&spin_stop, 0);
    atomic_store(&spin_tid, 0);
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    while (!atomic_load(&spin_tid))
        sleep_ms(1);

    char dir[64];
    pn_test_tmpdir("driver", dir, sizeof dir);
    pn_config c;
    folder_config(&c, dir);
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    CHECK(a != NULL);
    if (!a) {
        atomic_store(&spin_stop, 1);
        pthread_join(t, NULL);
        pn_config_free(&c);
        pn_test_rm_dir(dir);
        return;
    }
    pn_driver *w = pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_WALKER,
                                                            .walker = ctx_walker}, &e);
    CHECK(w != NULL);
    pn_driver_opts bo = {.kind = PN_DRIVER_BATCH, .profile_type = "alloc", .nvalues = 2,
                         .sample_types = {{"alloc_objects", "count"}, {"alloc_space", "bytes"}},
                         .period = 512 * 1024, .max_delay_ns = 200 * 1000000LL};
    pn_driver *b = pn_agent_add_driver(a, &bo, &e);
    CHECK(b != NULL);
    int recorded = 0;
    pn_driver_stats ws;
    double t0 = pn_test_now_s();
    do {
        if (b) {
            pn_record_begin(b);
            pn_period *p = pn_record_period(b, mono_now());
            if (p) {
                pn_frame_id f[1] = {pn_symbols_frame3(pn_period_symbols(p), "malloc_site", 11,
                                                      "alloc.c", 7, 3)};
                int64_t v[2] = {1, 64};
                pn_sample s = {.frames = f, .depth = 1, .values = v};
                pn_record(b, p, &s);
                recorded++;
            }
            pn_record_end(b);
        }
        sleep_ms(5);
        if (w)
            pn_driver_get_stats(w, &ws);
    } while (w && (ws.recorded < 10 || recorded < 10) && pn_test_now_s() - t0 < WAIT_S);
    if (b)
        pn_driver_watermark(b, INT64_MAX); /* no more samples */
    CHECK_EQ_INT(pn_agent_flush(a, 60, &e), 0);
    pn_agent_stop(a);
    atomic_store(&spin_stop, 1);
    pthread_join(t, NULL);

    two_seen s;
    memset(&s, 0, sizeof s);
    each_profile(dir, two_profile, &s);
    printf("  cpu: %d profiles, %lld walker samples; alloc: %d profiles, %lld objects\n",
           s.cpu_profiles, (long long)s.cpu_walker, s.alloc_profiles, (long long)s.alloc_batch);
    CHECK(s.cpu_profiles >= 1);
    CHECK(s.alloc_profiles >= 1);
    CHECK(s.cpu_walker >= 1);
    CHECK_EQ_INT(s.cpu_other, 0);
    CHECK_EQ_INT(s.alloc_other, 0);
    CHECK_EQ_INT(s.alloc_batch, recorded);
    CHECK_EQ_INT(s.alloc_bytes, 64LL * recorded);
    /* Files are named by profile type. */
    int alloc_files = 0;
    DIR *dd = opendir(dir);
    struct dirent *de;
    while (dd && (de = readdir(dd)))
        alloc_files += strstr(de->d_name, "-alloc-") != NULL;
    if (dd)
        closedir(dd);
    CHECK_EQ_INT(alloc_files, s.alloc_profiles);
    pn_labelset_unref(walker_ls[0]);
    pn_labelset_unref(walker_ls[1]);
    pn_config_free(&c);
    pn_test_rm_dir(dir);
    pn_labels_reclaim();
}

/* ------------------------------------------------------------ churn */

static atomic_int churn_tid;
static atomic_long churn_sampled;

static void churn_walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    pid_t tid = atomic_load(&churn_tid);
    int64_t v;
    if (tid == 0 || !pn_tick_begin_thread(t, tid, &v))
        return;
    const pn_labelset *ls = pn_labels_of_thread(tid);
    /* Touch the set: it must be alive while the tick runs. */
    if (pn_labelset_count(ls) > 0 && pn_labelset_get(ls, "u"))
        atomic_fetch_add(&churn_sampled, 1);
    pn_frame_id f[1] = {pn_symbols_frame3(pn_tick_symbols(t), "churn", 5, "c.c", 3, 1)};
    pn_tick_sample_labels(t, tid, f, 1, v, NULL, ls);
}

typedef struct {
    long n, done;
    size_t max_retired, end_retired;
    int failures;
} churn_job;

static void *churner(void *arg)
{
    churn_job *j = arg;
    atomic_store(&churn_tid, pn_gettid());
    char val[32];
    /* At least n sets, and on until the walker read some of them while
     * they were current (or 30 s): the churn must overlap the ticks. */
    double t0 = pn_test_now_s();
    for (long i = 0; i < j->n || (atomic_load(&churn_sampled) < 5 &&
                                  pn_test_now_s() - t0 < WAIT_S); i++) {
        snprintf(val, sizeof val, "v%ld", i);
        pn_label kv = {"u", val};
        if (pn_labels_push(&kv, 1, NULL) != 0)
            j->failures++;
        /* Now and then the set stays current across a yield, so that a tick
         * can land on it even where threads take turns (valgrind). */
        if (i % 256 == 0)
            sched_yield();
        if (pn_labels_pop(NULL) != 0)
            j->failures++;
        if (i % 512 == 0) {
            size_t r = pn_labelset_retired();
            if (r > j->max_retired)
                j->max_retired = r;
        }
        j->done = i + 1;
    }
    /* Sets retired while a tick ran (a reader section) wait for it to end,
     * so the backlog's peak grows with how long the sampler thread was
     * descheduled inside a tick: a matter of load, not asserted. What must
     * hold is that releases drain it (each frees up to four): more churn
     * brings it back under the bound, unless a reader is stuck. */
    double t1 = pn_test_now_s();
    for (long i = 0;; i++) {
        if (i % 512 == 0) {
            j->end_retired = pn_labelset_retired();
            if (j->end_retired < 1000 || pn_test_now_s() - t1 > WAIT_S)
                break;
        }
        snprintf(val, sizeof val, "drain%ld", i);
        pn_label kv = {"u", val};
        if (pn_labels_push(&kv, 1, NULL) != 0 || pn_labels_pop(NULL) != 0)
            j->failures++;
    }
    atomic_store(&churn_tid, 0);
    return NULL;
}

static void test_label_churn(void)
{
    pn_labels_reclaim();
    size_t live0 = pn_labelset_live();
    char dir[64];
    pn_test_tmpdir("driver", dir, sizeof dir);
    pn_config c;
    folder_config(&c, dir);
    pn_config_set(&c, "sample_rate", "1000", NULL);
    /* Ticks as often as configured: under valgrind a tick is over 1 % of 1 ms. */
    pn_config_set(&c, "sampler_cpu_budget", "0", NULL);
    pn_config_set(&c, "log_level", "error", NULL); /* label tables fill up: warnings */
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    CHECK(a != NULL);
    pn_driver *d = a ? pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_WALKER,
                                                                .walker = churn_walker}, &e)
                     : NULL;
    CHECK(d != NULL);
    atomic_store(&churn_sampled, 0);
    churn_job j = {200000, 0, 0, 0, 0};
    pthread_t t;
    double t0 = pn_test_now_s();
    pthread_create(&t, NULL, churner, &j);
    pthread_join(t, NULL);
    double took = pn_test_now_s() - t0;
    pn_agent_stats st;
    if (a) {
        pn_agent_get_stats(a, &st);
        pn_agent_stop(a);
    }
    pn_labels_reclaim();
    size_t live = pn_labelset_live(), retired = pn_labelset_retired();
    printf("  %ld sets in %.2f s, %llu ticks, %ld samples saw a set; retired max %zu, "
           "at the end %zu; after stop: live %zu (before %zu), retired %zu\n",
           j.done, took, (unsigned long long)(a ? st.sampler.ticks : 0),
           atomic_load(&churn_sampled), j.max_retired, j.end_retired, live, live0, retired);
    CHECK_EQ_INT(j.failures, 0);
    CHECK(j.done >= j.n);
    CHECK(atomic_load(&churn_sampled) >= 5);
    /* Reclaimed during the churn, not only at the end. */
    CHECK(j.max_retired < (size_t)j.done / 10);
    CHECK(j.end_retired < 1000);
    CHECK(live <= live0 + 2);
    CHECK(retired < 64);
    pn_config_free(&c);
    pn_log_set_level(PN_LOG_WARN);
    pn_test_rm_dir(dir);
}

/* A thread that stays joined to a driver its agent freed (stale slot),
 * then is joined by tid to the next agent's driver by another thread: its
 * handler adopts the new slot and its captures are recorded again. */
static void *adopt_worker(void *arg)
{
    (void)arg;
    pn_label kv = {"worker", w_names[W_SPIN0]};
    atomic_store(&w_labels[W_SPIN0], pn_labelset_merge(pn_labelset_empty(), &kv, 1, NULL));
    atomic_store(&w_tid[W_SPIN0], pn_gettid());
    tl_widx = W_SPIN0;
    pn_error e;
    atomic_store(&w_joined[W_SPIN0], pn_rendezvous_join(atomic_load(&g_rdv), &e) == 0 ? 1 : -1);
    volatile double x = 0;
    while (!atomic_load(&w_stop[W_SPIN0]))
        for (int k = 0; k < 10000; k++)
            x += 1;
    tl_widx = -1;
    pn_rendezvous_leave(atomic_load(&g_rdv));
    return NULL;
}

static pn_agent *adopt_agent(const char *dir, pn_driver **d)
{
    pn_config c;
    folder_config(&c, dir);
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    pn_config_free(&c);
    *d = a ? pn_agent_add_driver(a, &(pn_driver_opts){.kind = PN_DRIVER_RENDEZVOUS,
                                                      .profile_type = "rdv",
                                                      .capture_bytes = 256}, &e)
           : NULL;
    if (!*d)
        fprintf(stderr, "  %s\n", e.msg);
    return a;
}

static int wait_consumed(long n)
{
    int64_t deadline = mono_now() + 20 * 1000000000LL;
    while (atomic_load(&w_consumed[W_SPIN0]) < n && mono_now() < deadline)
        sleep_ms(5);
    return atomic_load(&w_consumed[W_SPIN0]) >= n;
}

static void test_rendezvous_adopt(void)
{
    atomic_store(&w_consumed[W_SPIN0], 0);
    atomic_store(&w_stop[W_SPIN0], 0);
    atomic_store(&w_joined[W_SPIN0], 0);
    atomic_store(&label_mismatch, 0);
    struct sigaction old;
    install_on_sigprof(&old);
    char dir[64];
    pn_test_tmpdir("adopt", dir, sizeof dir);

    pn_driver *d1, *d2;
    pn_agent *a1 = adopt_agent(dir, &d1);
    CHECK(d1 != NULL);
    atomic_store(&g_rdv, d1);
    pthread_t worker, cons;
    atomic_store(&consumer_stop, 0);
    pthread_create(&cons, NULL, consumer_main, d1);
    pthread_create(&worker, NULL, adopt_worker, NULL);
    CHECK(wait_consumed(3));
    CHECK_EQ_INT(atomic_load(&w_joined[W_SPIN0]), 1);
    atomic_store(&consumer_stop, 1);
    pthread_join(cons, NULL);
    /* The worker stays joined to d1 while its agent stops and frees it. */
    atomic_store(&g_rdv, NULL);
    sleep_ms(50);
    pn_agent_stop(a1);

    pn_agent *a2 = adopt_agent(dir, &d2);
    CHECK(d2 != NULL);
    long before = atomic_load(&w_consumed[W_SPIN0]);
    atomic_store(&g_rdv, d2);
    pn_error e;
    CHECK_EQ_INT(pn_rendezvous_join_tid(d2, atomic_load(&w_tid[W_SPIN0]), &e), 0);
    CHECK_EQ_INT(pn_rendezvous_join_tid(d2, atomic_load(&w_tid[W_SPIN0]), &e), 0); /* once */
    atomic_store(&consumer_stop, 0);
    pthread_create(&cons, NULL, consumer_main, d2);
    CHECK(wait_consumed(before + 3));
    atomic_store(&w_stop[W_SPIN0], 1);
    pthread_join(worker, NULL);
    atomic_store(&consumer_stop, 1);
    pthread_join(cons, NULL);
    printf("  consumed %ld before the restart, %ld after\n", before,
           atomic_load(&w_consumed[W_SPIN0]) - before);
    CHECK_EQ_INT(atomic_load(&label_mismatch), 0);
    atomic_store(&g_rdv, NULL);
    pn_agent_stop(a2);
    sigaction(SIGPROF, &old, NULL);
    release_worker_labels();
    pn_test_rm_dir(dir);
}

/* CPU in bursts between idle stretches: the ticks in which no thread but
 * the sampler used CPU read no thread's clock, and nothing is lost by it
 * (a thread's clock is cumulative: the next tick that reads it charges
 * all of it). min_cpu_ns 5 ms (the timer wake-ups of the consumer and the
 * worker stay below it), bursts of 8 ms and of 0.3 ms (below it: charged
 * once enough of them added up), each followed by an idle stretch. */
/* Worker idx's start, on its own thread: its labels and tid, then it
 * joins the current driver. */
static pn_driver *worker_join(int idx)
{
    pn_label kv = {"worker", w_names[idx]};
    atomic_store(&w_labels[idx], pn_labelset_merge(pn_labelset_empty(), &kv, 1, NULL));
    atomic_store(&w_tid[idx], pn_gettid());
    tl_widx = idx;
    pn_driver *d = atomic_load(&g_rdv);
    pn_error e;
    atomic_store(&w_joined[idx], pn_rendezvous_join(d, &e) == 0 ? 1 : -1);
    return d;
}

static pn_driver *spin0_join(void) { return worker_join(W_SPIN0); }

/* A W_SPIN0 test's start: counters cleared, the test's SIGPROF handler in
 * place (the old one in *old), an agent writing to a new folder (dir) with
 * the settings given as name/value pairs, and a rendezvous driver made
 * from o. *d is NULL if that failed. */
static pn_agent *spin0_start(const char *name, char *dir, size_t dir_size,
                             const char *const *settings, pn_driver_opts o,
                             struct sigaction *old, pn_driver **d)
{
    atomic_store(&w_consumed[W_SPIN0], 0);
    atomic_store(&w_value_ns[W_SPIN0], 0);
    atomic_store(&w_joined[W_SPIN0], 0);
    atomic_store(&label_mismatch, 0);
    install_on_sigprof(old);
    pn_test_tmpdir(name, dir, dir_size);
    pn_config c;
    folder_config(&c, dir);
    for (int i = 0; settings && settings[i]; i += 2)
        pn_config_set(&c, settings[i], settings[i + 1], NULL);
    pn_error e;
    pn_agent *a = pn_agent_start(&c, &e);
    pn_config_free(&c);
    o.kind = PN_DRIVER_RENDEZVOUS;
    o.profile_type = "rdv";
    o.capture_bytes = 256;
    *d = a ? pn_agent_add_driver(a, &o, &e) : NULL;
    if (!*d)
        fprintf(stderr, "  %s\n", e.msg);
    return a;
}

static int64_t idle_gate_used_ns;

static void burn_thread_ns(int64_t ns)
{
    int64_t end = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    volatile double x = 0;
    while (pn_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int k = 0; k < 1000; k++)
            x += 1;
}

static void *idle_gate_worker(void *arg)
{
    (void)arg;
    pn_driver *d = spin0_join();
    sleep_ms(50); /* the first tick's reading comes first */
    int64_t t0 = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < 5; i++) {
        burn_thread_ns(8000000);
        sleep_ms(40);
    }
    /* Most of the CPU: lost if small amounts were not added up. */
    for (int i = 0; i < 200; i++) {
        burn_thread_ns(300000);
        sleep_ms(4);
    }
    idle_gate_used_ns = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    sleep_ms(50); /* the last bursts' captures are answered */
    tl_widx = -1;
    pn_rendezvous_leave(d);
    return NULL;
}

static void test_rendezvous_idle_gate(void)
{
    struct sigaction old;
    char dir[64];
    pn_driver *d;
    pn_agent *a = spin0_start("idlegate", dir, sizeof dir, NULL,
                              (pn_driver_opts){.min_cpu_ns = 5000000}, &old, &d);
    CHECK(d != NULL);
    if (d) {
        atomic_store(&g_rdv, d);
        pthread_t worker, cons;
        atomic_store(&consumer_stop, 0);
        pthread_create(&cons, NULL, consumer_main, d);
        pthread_create(&worker, NULL, idle_gate_worker, NULL);
        pthread_join(worker, NULL);
        atomic_store(&consumer_stop, 1);
        pthread_join(cons, NULL);
        atomic_store(&g_rdv, NULL);
        CHECK_EQ_INT(atomic_load(&w_joined[W_SPIN0]), 1);
        int64_t charged = atomic_load(&w_value_ns[W_SPIN0]);
        printf("  used %.1f ms in bursts, charged %.1f ms in %ld captures\n",
               idle_gate_used_ns / 1e6, charged / 1e6, atomic_load(&w_consumed[W_SPIN0]));
        /* Wide margins: a loaded machine delays answers (a request
         * nobody answered is charged to the next), never loses them. */
        CHECK(atomic_load(&w_consumed[W_SPIN0]) >= 5);
        CHECK(charged >= idle_gate_used_ns / 2);
        CHECK(charged <= idle_gate_used_ns * 3 / 2);
        CHECK_EQ_INT(atomic_load(&label_mismatch), 0);
    }
    pn_agent_stop(a);
    sigaction(SIGPROF, &old, NULL);
    release_worker_labels();
    pn_test_rm_dir(dir);
}

/* Wall mode, a thread blocked for the whole run, and no consumer but the
 * one the stale callback wakes (as the Ruby binding's drain thread on
 * 3.3+, where a blocked thread runs its job only when it wakes): the tick
 * that finds the capture not consumed yet passes its wall time on to the
 * next capture, so the blocked thread's samples still add up to the time
 * it was blocked (they were half of it when those ticks were dropped). */
static sem_t stale_sem;
static atomic_long stale_calls;

static void on_stale(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&stale_calls, 1);
    sem_post(&stale_sem);
}

static void *stale_consumer(void *arg)
{
    pn_driver *d = arg;
    while (!atomic_load(&consumer_stop)) {
        sem_wait(&stale_sem);
        /* Late, as a drain thread waiting for the GVL is: the tick that
         * woke it finds the capture still there. */
        sleep_ms(3);
        pn_rendezvous_drain(d, consume, NULL);
    }
    return NULL;
}

static atomic_int blocked_go;

static void *blocked_worker(void *arg)
{
    (void)arg;
    pn_driver *d = spin0_join();
    while (!atomic_load(&blocked_go))
        sleep_ms(1);
    /* Blocked for 600 ms: a signal interrupts the sleep, which goes on
     * to the same deadline. */
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 600000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
    tl_widx = -1;
    pn_rendezvous_leave(d);
    return NULL;
}

static void test_rendezvous_wall_carry(void)
{
    atomic_store(&blocked_go, 0);
    atomic_store(&stale_calls, 0);
    sem_init(&stale_sem, 0, 0);
    struct sigaction old;
    char dir[64];
    pn_driver *d;
    static const char *const wall[] = {"oncpu", "false", "sampler_cpu_budget", "0", NULL};
    pn_agent *a = spin0_start("wallcarry", dir, sizeof dir, wall,
                              (pn_driver_opts){.stale = on_stale}, &old, &d);
    CHECK(d != NULL);
    if (d) {
        atomic_store(&g_rdv, d);
        pthread_t worker, cons;
        atomic_store(&consumer_stop, 0);
        pthread_create(&cons, NULL, stale_consumer, d);
        pthread_create(&worker, NULL, blocked_worker, NULL);
        while (!atomic_load(&w_joined[W_SPIN0]))
            sleep_ms(1);
        sleep_ms(30); /* the first tick's reading comes first */
        int64_t t0 = mono_now();
        atomic_store(&blocked_go, 1);
        pthread_join(worker, NULL);
        int64_t blocked_ns = mono_now() - t0;
        atomic_store(&consumer_stop, 1);
        sem_post(&stale_sem);
        pthread_join(cons, NULL);
        pn_rendezvous_drain(d, consume, NULL);
        atomic_store(&g_rdv, NULL);
        int64_t charged = atomic_load(&w_value_ns[W_SPIN0]);
        long n = atomic_load(&w_consumed[W_SPIN0]);
        printf("  blocked %.0f ms, charged %.0f ms in %ld captures, %ld stale calls\n",
               blocked_ns / 1e6, charged / 1e6, n, atomic_load(&stale_calls));
        CHECK(atomic_load(&stale_calls) >= 3);
        CHECK(n >= 5);
        /* Dropping the busy ticks gives at most half (plus a tick). */
        CHECK(charged >= blocked_ns * 65 / 100);
        CHECK(charged <= blocked_ns * 13 / 10 + 20000000);
        CHECK_EQ_INT(atomic_load(&label_mismatch), 0);
    }
    pn_agent_stop(a);
    sigaction(SIGPROF, &old, NULL);
    release_worker_labels();
    sem_destroy(&stale_sem);
    pn_test_rm_dir(dir);
}

/* Thread timers (oncpu): each joined thread's own CPU timer signals it,
 * the sampler signals nobody. A burner runs 250 ms of CPU with no
 * consumer (its first capture waits, the signals after it find the slot
 * busy and carry their CPU on), then 250 ms with one (the carry arrives
 * with the next capture), then leaves and burns on (its timer is gone: no
 * signal). An idle thread joined all along is never signalled. */
static atomic_long tt_timer_sigs[NW]; /* SI_TIMER signals, per worker */
static atomic_long tt_other_sigs;     /* any other SIGPROF (tgkill) */
static atomic_long tt_after_leave;    /* signals after the burner left */
static atomic_int tt_phase;           /* 1: burnt without consumer; 2: consumer on */
static int64_t tt_burnt_ns;
static __thread int tl_left;

static void on_timer_sig(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    int saved = errno;
    int idx = tl_widx;
    if (tl_left)
        atomic_fetch_add(&tt_after_leave, 1);
    if (si->si_code != SI_TIMER)
        atomic_fetch_add(&tt_other_sigs, 1);
    else if (idx >= 0)
        atomic_fetch_add(&tt_timer_sigs[idx], 1);
    pn_driver *d = atomic_load(&g_rdv);
    pn_capture *c = d && idx >= 0 ? pn_capture_begin_timer(d, si) : NULL;
    if (c) {
        size_t size;
        payload *pl = pn_capture_buffer(c, &size);
        pl->idx = idx;
        pl->counter = (uint32_t)atomic_fetch_add(&w_signals[idx], 1);
        pn_capture_commit(c, sizeof *pl, atomic_load(&w_labels[idx]));
    }
    errno = saved;
}

static void *tt_idle(void *arg)
{
    (void)arg;
    pn_driver *d = worker_join(W_SLEEP);
    pthread_mutex_lock(&sleep_mu);
    while (!atomic_load(&w_stop[W_SLEEP]))
        pthread_cond_wait(&sleep_cv, &sleep_mu);
    pthread_mutex_unlock(&sleep_mu);
    pn_rendezvous_leave(d);
    tl_widx = -1;
    return NULL;
}

static void *tt_burner(void *arg)
{
    (void)arg;
    pn_driver *d = spin0_join();
    int64_t t0 = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    burn_thread_ns(250000000);
    atomic_store(&tt_phase, 1);
    while (atomic_load(&tt_phase) != 2)
        sleep_ms(1);
    burn_thread_ns(250000000);
    tt_burnt_ns = pn_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    /* The last capture is consumed (a deadline, not a timed assertion). */
    int64_t end = mono_now() + 10000000000LL;
    while (atomic_load(&w_signals[W_SPIN0]) > atomic_load(&w_consumed[W_SPIN0]) &&
           mono_now() < end)
        sleep_ms(1);
    pn_rendezvous_leave(d);
    tl_left = 1;
    burn_thread_ns(100000000);
    tl_widx = -1;
    return NULL;
}

static void test_rendezvous_thread_timers(void)
{
    struct sigaction old;
    char dir[64];
    pn_driver *d;
    static const char *const settings[] = {"sample_rate", "100", NULL};
    pn_agent *a = spin0_start("timers", dir, sizeof dir, settings,
                              (pn_driver_opts){.thread_timers = 1}, &old, &d);
    int64_t started = mono_now();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_timer_sig;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    CHECK(d != NULL);
    if (d) {
        atomic_store(&g_rdv, d);
        atomic_store(&w_stop[W_SLEEP], 0);
        atomic_store(&w_signals[W_SPIN0], 0);
        pthread_t idle, burner, cons;
        pthread_create(&idle, NULL, tt_idle, NULL);
        pthread_create(&burner, NULL, tt_burner, NULL);
        while (atomic_load(&tt_phase) != 1)
            sleep_ms(1);
        pn_driver_stats ds;
        pn_driver_get_stats(d, &ds);
        /* (signals while the capture waited add to it: busy_added) */
        uint64_t busy1 = ds.busy + ds.busy_added;
        atomic_store(&consumer_stop, 0);
        pthread_create(&cons, NULL, consumer_main, d);
        atomic_store(&tt_phase, 2);
        pthread_join(burner, NULL);
        pthread_mutex_lock(&sleep_mu);
        atomic_store(&w_stop[W_SLEEP], 1);
        pthread_cond_broadcast(&sleep_cv);
        pthread_mutex_unlock(&sleep_mu);
        pthread_join(idle, NULL);
        atomic_store(&consumer_stop, 1);
        pthread_join(cons, NULL);
        atomic_store(&g_rdv, NULL);
        pn_driver_get_stats(d, &ds);
        int64_t charged = atomic_load(&w_value_ns[W_SPIN0]);
        printf("  burnt %.0f ms, charged %.0f ms in %ld captures; %ld timer signals, "
               "busy %llu (%llu before the consumer), idle thread's signals %ld\n",
               tt_burnt_ns / 1e6, charged / 1e6, atomic_load(&w_consumed[W_SPIN0]),
               atomic_load(&tt_timer_sigs[W_SPIN0]), (unsigned long long)ds.busy,
               (unsigned long long)busy1, atomic_load(&tt_timer_sigs[W_SLEEP]));
        CHECK_EQ_INT(atomic_load(&w_joined[W_SPIN0]), 1);
        CHECK_EQ_INT(atomic_load(&w_joined[W_SLEEP]), 1);
        CHECK(atomic_load(&w_consumed[W_SPIN0]) >= 5);
        CHECK(busy1 >= 3); /* phase 1: the slot stayed taken */
        /* Phase 1's CPU is lost unless it reached the waiting capture (or
         * the busy carry, phase 2). */
        CHECK(charged >= tt_burnt_ns * 6 / 10);
        CHECK(charged <= tt_burnt_ns * 14 / 10);
        CHECK_EQ_INT(atomic_load(&tt_timer_sigs[W_SLEEP]), 0);
        CHECK_EQ_INT(atomic_load(&tt_other_sigs), 0);   /* the sampler signalled nobody */
        CHECK_EQ_INT(atomic_load(&tt_after_leave), 0);  /* leave deleted the timer */
        CHECK_EQ_INT(atomic_load(&label_mismatch), 0);
        /* The sampler thread only keeps house, at 1 Hz (each wake-up costs
         * more than the rest of its tick): never more ticks than whole
         * seconds run, plus one (a late tick only comes later). */
        pn_agent_stats st;
        pn_agent_get_stats(a, &st);
        int64_t ran = mono_now() - started;
        printf("  %llu sampler ticks in %.0f ms\n", (unsigned long long)st.sampler.ticks,
               ran / 1e6);
        CHECK(st.sampler.ticks <= (uint64_t)(ran / 1000000000) + 1);
    }
    pn_agent_stop(a);
    sigaction(SIGPROF, &old, NULL);
    release_worker_labels();
    pn_test_rm_dir(dir);
    /* Above the kernel tick's rate the sampler thread signals as before
     * (a timer would give fewer samples than asked for). */
    static const char *const fast[] = {"sample_rate", "1000", NULL};
    a = spin0_start("timers_fast", dir, sizeof dir, fast, (pn_driver_opts){.thread_timers = 1},
                    &old, &d);
    sigaction(SIGPROF, &sa, NULL);
    atomic_store(&tt_other_sigs, 0);
    atomic_store(&tt_timer_sigs[W_SPIN0], 0);
    CHECK(d != NULL);
    if (d) {
        atomic_store(&g_rdv, d);
        atomic_store(&consumer_stop, 0);
        pthread_t cons;
        pthread_create(&cons, NULL, consumer_main, d);
        pn_driver *joined = spin0_join();
        int64_t end = mono_now() + 10000000000LL;
        while (atomic_load(&w_consumed[W_SPIN0]) < 5 && mono_now() < end)
            burn_thread_ns(1000000);
        pn_rendezvous_leave(joined);
        tl_widx = -1;
        atomic_store(&consumer_stop, 1);
        pthread_join(cons, NULL);
        atomic_store(&g_rdv, NULL);
        CHECK(atomic_load(&w_consumed[W_SPIN0]) >= 5);
        CHECK(atomic_load(&tt_other_sigs) >= 5);
        CHECK_EQ_INT(atomic_load(&tt_timer_sigs[W_SPIN0]), 0);
    }
    pn_agent_stop(a);
    sigaction(SIGPROF, &old, NULL);
    release_worker_labels();
    pn_test_rm_dir(dir);
}

/* Thread timers: a thread joined on its behalf (by tid) that ends without
 * leaving is found gone by the sampler's housekeeping tick, now at 1 Hz,
 * and its slot is freed. */
static atomic_int gone_tid, gone_go;

static void *gone_worker(void *arg)
{
    (void)arg;
    atomic_store(&gone_tid, pn_gettid());
    while (!atomic_load(&gone_go))
        sleep_ms(1);
    return NULL;
}

static void test_rendezvous_timers_gone(void)
{
    struct sigaction old;
    char dir[64];
    pn_driver *d;
    static const char *const settings[] = {"sample_rate", "100", NULL};
    pn_agent *a = spin0_start("timers_gone", dir, sizeof dir, settings,
                              (pn_driver_opts){.thread_timers = 1}, &old, &d);
    CHECK(d != NULL);
    if (d) {
        atomic_store(&gone_tid, 0);
        atomic_store(&gone_go, 0);
        pthread_t t;
        pthread_create(&t, NULL, gone_worker, NULL);
        while (!atomic_load(&gone_tid))
            sleep_ms(1);
        pn_error e;
        CHECK_EQ_INT(pn_rendezvous_join_tid(d, atomic_load(&gone_tid), &e), 0);
        atomic_store(&gone_go, 1);
        pthread_join(t, NULL);
        pn_driver_stats ds;
        int64_t end = mono_now() + 10000000000LL;
        do {
            sleep_ms(20);
            pn_driver_get_stats(d, &ds);
        } while (ds.exited == 0 && mono_now() < end);
        CHECK_EQ_INT((int)ds.exited, 1);
    }
    pn_agent_stop(a);
    sigaction(SIGPROF, &old, NULL);
    pn_test_rm_dir(dir);
}

TEST_MAIN(T(test_batch), T(test_rendezvous), T(test_rendezvous_adopt), T(test_rendezvous_idle_gate), T(test_rendezvous_wall_carry), T(test_rendezvous_thread_timers), T(test_rendezvous_timers_gone), T(test_label_churn), T(test_two_drivers),
          T(test_walker_labels))
