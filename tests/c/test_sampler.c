/* Sampler: rate accuracy, on-CPU vs wall, real CPU values, labels reach
 * samples, stop is prompt, and fork gives the child a running sampler. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "sampling/sampler.h"

/* Threads the test walker knows about, each with a one-frame "stack". */
typedef struct {
    _Atomic pid_t tid;
    const char *fn;
    /* Non-NULL: the thread "runs an execution context" with these labels
     * (recorded with pn_tick_sample_context). */
    const pn_labelset *ctx;
} known_thread;

static known_thread known[8];
static atomic_int nknown;
static atomic_int walks;

/* What the walker saw (sampler thread; read after pn_sampler_stop joined
 * it): its clock and the tick's wall value at each call, and known[0]'s
 * CPU clock just after pn_tick_begin_thread in the first call and just
 * before it in the last one. The core reads that clock in between, so the
 * CPU it charges known[0] (the sum of its deltas telescopes) is at least
 * cpu_last_before - cpu_first_after, however the ticks were spread. */
#define REC_MAX 4096
static double rec_t[REC_MAX];
static int64_t rec_wall[REC_MAX];
static atomic_int nrec;
static int64_t cpu_first_after, cpu_last_before;

static void walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    int r = atomic_load(&nrec);
    if (r < REC_MAX) {
        rec_t[r] = pn_test_now_s();
        rec_wall[r] = pn_tick_wall_ns(t);
        atomic_store(&nrec, r + 1);
    }
    atomic_fetch_add(&walks, 1);
    for (int i = 0; i < atomic_load(&nknown); i++) {
        pid_t tid = atomic_load(&known[i].tid);
        int64_t v;
        if (tid == 0)
            continue;
        int64_t before = i == 0 ? pn_thread_cpu_ns(tid) : 0;
        int ok = pn_tick_begin_thread(t, tid, &v);
        if (i == 0) {
            int64_t after = pn_thread_cpu_ns(tid);
            if (cpu_first_after < 0)
                cpu_first_after = after;
            cpu_last_before = before;
        }
        if (!ok)
            continue;
        pn_frame_id f[2] = {
            pn_symbols_frame3(pn_tick_symbols(t), known[i].fn, strlen(known[i].fn), "t.c", 3, 1),
            pn_symbols_frame3(pn_tick_symbols(t), "root", 4, "t.c", 3, 0)};
        if (known[i].ctx)
            pn_tick_sample_context(t, tid, f, 2, v, known[i].fn, known[i].ctx);
        else
            pn_tick_sample(t, tid, f, 2, v, known[i].fn);
    }
}

static atomic_int stop_threads;

static void *spinner(void *arg)
{
    known_thread *k = arg;
    pn_label kv = {"kind", "spin"};
    pn_labels_push(&kv, 1, NULL);
    atomic_store(&k->tid, pn_gettid());
    volatile double x = 0;
    while (!atomic_load(&stop_threads))
        x += 1;
    pn_labels_pop(NULL);
    return NULL;
}

static atomic_int sleeper_wakes;

static void *sleeper(void *arg)
{
    known_thread *k = arg;
    atomic_store(&k->tid, pn_gettid());
    while (!atomic_load(&stop_threads)) {
        struct timespec ts = {0, 300 * 1000000};
        nanosleep(&ts, NULL);
        atomic_fetch_add(&sleeper_wakes, 1);
    }
    return NULL;
}

static void reset_known(void)
{
    atomic_store(&nknown, 0);
    memset(known, 0, sizeof known);
    atomic_store(&stop_threads, 0);
    atomic_store(&nrec, 0);
    cpu_first_after = cpu_last_before = -1;
}

/* Sleep in 10 ms steps until the sampler's stats satisfy `done`, at most
 * 60 s (a loaded machine only makes this slower); returns the last stats
 * and whether `done` held. */
static int wait_stats(pn_sampler *s, int (*done)(const pn_sampler_stats *, uint64_t), uint64_t arg,
                      pn_sampler_stats *out)
{
    double give_up = pn_test_now_s() + 60;
    for (;;) {
        pn_sampler_get_stats(s, out);
        if (done(out, arg))
            return 1;
        if (pn_test_now_s() > give_up) {
            fprintf(stderr, "  gave up after 60 s: ticks %llu, missed %llu, samples %llu\n",
                    (unsigned long long)out->ticks, (unsigned long long)out->missed_ticks,
                    (unsigned long long)out->samples);
            return 0;
        }
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

static int deadlines_at_least(const pn_sampler_stats *st, uint64_t n)
{
    return st->ticks + st->missed_ticks >= n;
}

static int ticks_at_least(const pn_sampler_stats *st, uint64_t n) { return st->ticks >= n; }

static pn_store *new_store(void)
{
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.max_stacks = 256;
    return pn_store_new(&l, NULL);
}

/* The sample carries a label named `key` (its pairs are string ids of the
 * period's symbols). */
static int has_label_key(const pn_period *p, const pn_sample_view *v, const char *key)
{
    for (uint32_t i = 0; i < v->nlabels; i++) {
        const char *k = pn_symbols_str(pn_period_symbols_const(p), v->label_pairs[2 * i], NULL);
        if (k && strcmp(k, key) == 0)
            return 1;
    }
    return 0;
}

static int64_t total_for(const pn_period *p, const char *leaf, int value, const char *label)
{
    int64_t sum = 0;
    for (size_t i = 0; i < pn_period_sample_count(p); i++) {
        pn_sample_view v;
        pn_period_sample(p, i, &v);
        uint32_t n, f, line;
        pn_symbols_frame_get(pn_period_symbols_const(p), v.frames[0], &n, &f, &line);
        if (strcmp(pn_symbols_str(pn_period_symbols_const(p), n, NULL), leaf) != 0)
            continue;
        if (label && !has_label_key(p, &v, label))
            continue;
        sum += v.values[value];
    }
    return sum;
}

static void test_rate_accuracy(void)
{
    reset_known();
    pn_store *st = new_store();
    pn_sampler_opts o = {.hz = 200, .oncpu = 1};
    const int64_t interval = 5000000; /* 1 s / 200 */
    pn_sampler *s = pn_sampler_new(st, &o, walker, NULL, NULL);
    atomic_store(&walks, 0);
    double t0 = pn_test_now_s();
    CHECK_EQ_INT(pn_sampler_start(s, NULL), 0);
    /* 400 deadlines: 2 s on an idle machine, longer on a busy one. How
     * many of them ran as ticks depends on the scheduler, not on us. */
    pn_sampler_stats stats;
    CHECK(wait_stats(s, deadlines_at_least, 400, &stats));
    pn_sampler_stop(s);
    pn_sampler_get_stats(s, &stats);
    uint64_t n = stats.ticks + stats.missed_ticks;
    printf("  ticks %llu + missed %llu over %.3f s\n", (unsigned long long)stats.ticks,
           (unsigned long long)stats.missed_ticks, pn_test_now_s() - t0);
    CHECK_EQ_INT(atomic_load(&walks), (long long)stats.ticks);
    int nr = atomic_load(&nrec);
    CHECK_EQ_INT(nr, (long long)stats.ticks);
    if (nr > REC_MAX)
        nr = REC_MAX;
    /* Deadlines slept through are folded into the next tick's wall value:
     * none lost, none counted twice. */
    int64_t wall = 0;
    for (int i = 0; i < nr; i++)
        wall += rec_wall[i];
    CHECK_EQ_INT(wall, (long long)n * interval);
    /* The schedule is absolute. After a tick at time t the deadlines passed
     * so far, c, satisfy S + c*I <= t < S + (c+1)*I (plus the microseconds
     * between the sampler's clock read and the walker's), S being when the
     * sampler thread started: t0 <= S <= first tick - I. So off = t - c*I
     * is never before t0 (no tick ahead of its deadline, no deadline
     * counted twice), and some tick near the end has off within 1 ms of
     * S + I <= first tick. A schedule re-armed from "now" after each tick,
     * or one that drops missed deadlines, pushes off later by every delay,
     * 20 ms or more over 400 ticks even on an idle machine. */
    double min_off = 1e30, min_off_late = 1e30;
    int64_t c = 0;
    for (int i = 0; i < nr; i++) {
        c += rec_wall[i];
        double off = rec_t[i] - c / 1e9;
        if (off < min_off)
            min_off = off;
        if (i >= nr - 100 && off < min_off_late)
            min_off_late = off;
    }
    if (nr > 0) {
        printf("  schedule offsets: earliest %+.6f s from start, late ticks %+.6f s from the "
               "first tick\n", min_off - t0, min_off_late - rec_t[0]);
        CHECK(min_off >= t0 - 1e-6);
        CHECK(min_off_late < rec_t[0] + 0.001);
    }
    pn_sampler_free(s);
    pn_store_free(st);
}

static void test_oncpu_vs_wall(void)
{
    for (int oncpu = 1; oncpu >= 0; oncpu--) {
        reset_known();
        known[0].fn = "spin";
        known[1].fn = "sleep";
        atomic_store(&nknown, 2);
        pthread_t a, b;
        pthread_create(&a, NULL, spinner, &known[0]);
        pthread_create(&b, NULL, sleeper, &known[1]);
        while (!atomic_load(&known[0].tid) || !atomic_load(&known[1].tid))
            sched_yield();
        pn_store *st = new_store();
        pn_sampler_opts o = {.hz = 100, .oncpu = oncpu, .report_thread_name = 1};
        const int64_t interval = 10000000; /* 1 s / 100 */
        pn_sampler *s = pn_sampler_new(st, &o, walker, NULL, NULL);
        int64_t cpu0 = pn_thread_cpu_ns(known[0].tid);
        int wakes0 = atomic_load(&sleeper_wakes);
        pn_sampler_start(s, NULL);
        /* 100 ticks: 1 s on an idle machine. */
        pn_sampler_stats stats;
        CHECK(wait_stats(s, ticks_at_least, 100, &stats));
        pn_sampler_stop(s);
        pn_sampler_get_stats(s, &stats);
        int64_t cpu_used = pn_thread_cpu_ns(known[0].tid) - cpu0;
        int wakes = atomic_load(&sleeper_wakes) - wakes0;
        pn_period *p = pn_store_swap(st, 1);
        int64_t spin_ns = total_for(p, "spin", 0, "kind");
        int64_t sleep_count = total_for(p, "sleep", 1, NULL);
        printf("  oncpu=%d spin %.3f s (thread used %.3f s, %.3f s between first and last "
               "tick), sleep samples %lld (%d wakeups), ticks %llu + missed %llu\n",
               oncpu, spin_ns / 1e9, cpu_used / 1e9, (cpu_last_before - cpu_first_after) / 1e9,
               (long long)sleep_count, wakes, (unsigned long long)stats.ticks,
               (unsigned long long)stats.missed_ticks);
        CHECK(spin_ns > 0);
        if (oncpu) {
            /* Real CPU nanoseconds, matching the thread's own clock: all of
             * what it used from the first tick to the last (the walker read
             * its clock there), and nothing from before start or after stop
             * (one interval of slack, should the first tick charge some). */
            CHECK(spin_ns >= cpu_last_before - cpu_first_after);
            CHECK(spin_ns <= cpu_used + interval);
            /* The idle thread is skipped: it shows up only after it ran, at
             * most in the two ticks around each wakeup. Sampling it every
             * tick would give ~100. */
            CHECK(sleep_count <= 2 * (wakes + 1));
        } else {
            /* Every tick samples both threads, each charged the tick's wall
             * value, missed deadlines included. */
            CHECK_EQ_INT(sleep_count, (long long)stats.ticks);
            CHECK_EQ_INT(total_for(p, "spin", 1, NULL), (long long)stats.ticks);
            CHECK_EQ_INT(total_for(p, "sleep", 0, NULL),
                         (long long)(stats.ticks + stats.missed_ticks) * interval);
        }
        /* The label pushed by the spinner is on its samples. */
        CHECK(total_for(p, "spin", 1, "kind") == total_for(p, "spin", 1, NULL));
        atomic_store(&stop_threads, 1);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        pn_sampler_free(s);
        pn_store_free(st);
        pn_labels_reclaim();
    }
}

/* The value of label `key` on a sample, NULL: none. */
static const char *label_value(const pn_period *p, const pn_sample_view *v, const char *key)
{
    for (uint32_t i = 0; i < v->nlabels; i++) {
        const char *k = pn_symbols_str(pn_period_symbols_const(p), v->label_pairs[2 * i], NULL);
        if (k && strcmp(k, key) == 0)
            return pn_symbols_str(pn_period_symbols_const(p), v->label_pairs[2 * i + 1], NULL);
    }
    return NULL;
}

/* A sample recorded with a context's set carries the thread slot's labels
 * under the context's (whose value wins for a key in both). */
static void test_context_labels_merge_with_thread_slot(void)
{
    reset_known();
    pn_label ckv[2] = {{"kind", "ctx"}, {"route", "/x"}};
    const pn_labelset *ctx = pn_labelset_merge(NULL, ckv, 2, NULL);
    CHECK(ctx != NULL);
    known[0].fn = "spin";
    known[0].ctx = ctx;
    atomic_store(&nknown, 1);
    pthread_t a;
    pthread_create(&a, NULL, spinner, &known[0]); /* its slot: kind=spin */
    while (!atomic_load(&known[0].tid))
        sched_yield();
    pn_store *st = new_store();
    pn_sampler_opts o = {.hz = 100, .oncpu = 0};
    pn_sampler *s = pn_sampler_new(st, &o, walker, NULL, NULL);
    pn_sampler_start(s, NULL);
    pn_sampler_stats stats;
    CHECK(wait_stats(s, ticks_at_least, 5, &stats));
    pn_sampler_stop(s);
    pn_period *p = pn_store_swap(st, 1);
    int64_t seen = 0;
    for (size_t i = 0; i < pn_period_sample_count(p); i++) {
        pn_sample_view v;
        pn_period_sample(p, i, &v);
        if (v.values[1] == 0)
            continue; /* the overflow bucket */
        seen += v.values[1];
        const char *kind = label_value(p, &v, "kind"), *route = label_value(p, &v, "route");
        CHECK_STR(kind, "ctx");
        CHECK_STR(route, "/x");
        CHECK_EQ_INT(v.nlabels, 2);
    }
    CHECK(seen >= 5);
    atomic_store(&stop_threads, 1);
    pthread_join(a, NULL);
    pn_sampler_free(s);
    pn_store_free(st);
    pn_labelset_unref(ctx);
    pn_labels_reclaim();
}

static void test_stop_is_prompt_at_low_rate(void)
{
    reset_known();
    pn_store *st = new_store();
    pn_sampler_opts o = {.hz = 0.5, .oncpu = 1};
    pn_sampler *s = pn_sampler_new(st, &o, walker, NULL, NULL);
    pn_sampler_start(s, NULL);
    /* A fork request wakes the sleeping sampler too: prepare waits for it
     * to park (giving up after 1 s), which a sampler asleep until its first
     * tick, 2 s away, would not do in time. (The pause lets the sampler
     * reach its sleep first.) */
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    double t0 = pn_test_now_s();
    pn_sampler_fork_prepare(s);
    CHECK(pn_test_now_s() - t0 < 1.0);
    pn_sampler_fork_parent(s);
    t0 = pn_test_now_s();
    pn_sampler_stop(s);
    pn_sampler_stop(s); /* idempotent */
    /* The first tick is 2 s away: a stop that waited for it would take 2 s,
     * one that wakes the sampler takes milliseconds. */
    CHECK(pn_test_now_s() - t0 < 1.0);
    pn_sampler_free(s);
    pn_store_free(st);

    pn_error e;
    o.hz = 0;
    o.hz = 50000;
    CHECK(pn_sampler_new(st, &o, walker, NULL, &e) == NULL);
    CHECK(strstr(e.msg, "sample_rate") != NULL);
}

static void test_fork_child_samples(void)
{
    reset_known();
    known[0].fn = "spin";
    atomic_store(&nknown, 1);
    pthread_t a;
    pthread_create(&a, NULL, spinner, &known[0]);
    while (!atomic_load(&known[0].tid))
        sched_yield();
    pn_store *st = new_store();
    pn_sampler_opts o = {.hz = 100, .oncpu = 0};
    pn_sampler *s = pn_sampler_new(st, &o, walker, NULL, NULL);
    pn_sampler_start(s, NULL);
    struct timespec d = {0, 200 * 1000000};
    nanosleep(&d, NULL);

    pn_sampler_fork_prepare(s);
    pid_t pid = fork();
    if (pid == 0) {
        pn_sampler_fork_child(s);
        /* In the child only this thread exists: the walker's known thread
         * is gone, so register ourselves and spin. */
        known[0].fn = "child";
        atomic_store(&known[0].tid, pn_gettid());
        int need = 30;
        double t0 = pn_test_now_s();
        volatile double x = 0;
        pn_sampler_stats cs;
        do {
            for (int k = 0; k < 100000; k++)
                x += 1;
            pn_sampler_get_stats(s, &cs);
        } while (pn_test_now_s() - t0 < 0.5 || (cs.samples < (uint64_t)need && pn_test_now_s() - t0 < 60));
        pn_sampler_stop(s);
        pn_period *p = pn_store_swap(st, 1);
        int64_t child = total_for(p, "child", 1, NULL);
        int64_t parent_spin = total_for(p, "spin", 1, NULL);
        /* Fresh store: nothing of the parent's period; and it sampled. */
        if (!(cs.ticks >= (uint64_t)need && child >= need && parent_spin == 0))
            fprintf(stderr, "  child: ticks %llu, child samples %lld, parent's %lld\n",
                    (unsigned long long)cs.ticks, (long long)child, (long long)parent_spin);
        int ok = cs.ticks >= (uint64_t)need && child >= need && parent_spin == 0;
        pn_sampler_free(s);
        pn_store_free(st);
        pn_labels_reclaim();
        _exit(ok ? 0 : 1);
    }
    pn_sampler_fork_parent(s);
    CHECK(pid > 0);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent kept sampling throughout (it stopping would time out the
     * wait), and every tick sampled the spinner (wall mode). */
    pn_sampler_stats before, after;
    pn_sampler_get_stats(s, &before);
    CHECK(wait_stats(s, ticks_at_least, before.ticks + 11 > 31 ? before.ticks + 11 : 31, &after));
    pn_sampler_stop(s);
    pn_sampler_get_stats(s, &after);
    pn_period *p = pn_store_swap(st, 1);
    CHECK_EQ_INT(total_for(p, "spin", 1, NULL), (long long)after.ticks);
    atomic_store(&stop_threads, 1);
    pthread_join(a, NULL);
    pn_sampler_free(s);
    pn_store_free(st);
    pn_labels_reclaim();
}

/* A walker that samples known[0] on behalf of every known thread (as
 * CPython's gil_only samples the GIL holder), recording each thread's CPU
 * clock around the core's first and last reading of it. */
static int64_t pool_first_after[8], pool_last_before[8];

static void pooled_walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    atomic_fetch_add(&walks, 1);
    int r = atomic_load(&nrec);
    if (r < REC_MAX) {
        rec_wall[r] = pn_tick_wall_ns(t);
        atomic_store(&nrec, r + 1);
    }
    int64_t v = 0;
    int take = 0;
    /* The sampled thread comes second: what the others used after it
     * waits for the next tick's sample. */
    for (int i = atomic_load(&nknown) - 1; i >= 0; i--) {
        pid_t tid = atomic_load(&known[i].tid);
        int64_t before = pn_thread_cpu_ns(tid);
        if (i == 0)
            take = pn_tick_begin_pooled(t, tid, &v);
        else
            pn_tick_pool_thread(t, tid);
        if (pool_first_after[i] < 0)
            pool_first_after[i] = pn_thread_cpu_ns(tid);
        pool_last_before[i] = before;
    }
    if (take) {
        pn_frame_id f = pn_symbols_frame3(pn_tick_symbols(t), "holder", 6, "t.c", 3, 1);
        pn_tick_sample(t, atomic_load(&known[0].tid), &f, 1, v, NULL);
    }
}

static void test_pooled_sample_carries_every_thread(void)
{
    for (int oncpu = 1; oncpu >= 0; oncpu--) {
        reset_known();
        for (int i = 0; i < 8; i++)
            pool_first_after[i] = pool_last_before[i] = -1;
        known[0].fn = known[1].fn = "spin";
        known[2].fn = "sleep";
        atomic_store(&nknown, 3);
        pthread_t th[3];
        pthread_create(&th[0], NULL, spinner, &known[0]);
        pthread_create(&th[1], NULL, spinner, &known[1]);
        pthread_create(&th[2], NULL, sleeper, &known[2]);
        for (int i = 0; i < 3; i++)
            while (!atomic_load(&known[i].tid))
                sched_yield();
        pn_store *st = new_store();
        pn_sampler_opts o = {.hz = 100, .oncpu = oncpu};
        pn_sampler *s = pn_sampler_new(st, &o, pooled_walker, NULL, NULL);
        int64_t cpu0[3];
        for (int i = 0; i < 3; i++)
            cpu0[i] = pn_thread_cpu_ns(known[i].tid);
        pn_sampler_start(s, NULL);
        pn_sampler_stats stats;
        CHECK(wait_stats(s, ticks_at_least, 60, &stats));
        pn_sampler_stop(s);
        pn_sampler_get_stats(s, &stats);
        int64_t used = 0, bracket = 0;
        for (int i = 0; i < 3; i++) {
            used += pn_thread_cpu_ns(known[i].tid) - cpu0[i];
            bracket += pool_last_before[i] - pool_first_after[i];
        }
        pn_period *p = pn_store_swap(st, 1);
        int64_t total = total_for(p, "holder", 0, NULL);
        int64_t count = total_for(p, "holder", 1, NULL);
        pn_period_stats ps;
        pn_period_get_stats(p, &ps);
        printf("  oncpu=%d holder: %.3f s recorded, pooled CPU %.3f s; the three threads used "
               "%.3f s (%.3f s between first and last reading), %lld samples over %llu "
               "ticks\n", oncpu, total / 1e9, ps.pooled_cpu_ns / 1e9, used / 1e9,
               bracket / 1e9, (long long)count, (unsigned long long)stats.ticks);
        if (oncpu) {
            /* The period knows all three threads' CPU from the first reading
             * to the last, and nothing from outside the run (not the
             * sampled thread's alone, about a half); the samples carry the
             * ticks' wall time, which the export scales to that CPU. */
            CHECK(ps.pooled_cpu_ns >= bracket);
            CHECK(ps.pooled_cpu_ns <= used);
            CHECK_EQ_INT(ps.pooled_value_ns, total);
            CHECK(count >= 1 && count <= (long long)stats.ticks);
        } else {
            /* Wall mode: the tick's wall time, once per tick. */
            CHECK_EQ_INT(count, (long long)stats.ticks);
            CHECK_EQ_INT(total, (long long)(stats.ticks + stats.missed_ticks) * 10000000);
        }
        atomic_store(&stop_threads, 1);
        for (int i = 0; i < 3; i++)
            pthread_join(th[i], NULL);
        pn_sampler_free(s);
        pn_store_free(st);
        pn_labels_reclaim();
    }
}

/* Burns `burn_ns` of the sampler thread's own CPU per tick. */
static int64_t burn_ns;

static void burning_walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    int r = atomic_load(&nrec);
    if (r < REC_MAX) {
        rec_wall[r] = pn_tick_wall_ns(t);
        atomic_store(&nrec, r + 1);
    }
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    int64_t end = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + burn_ns;
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    while ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec < end);
}

static void test_budget_spaces_ticks_and_keeps_totals(void)
{
    reset_known();
    pn_store *st = new_store();
    /* 1000 Hz, 5 % of a core: a tick may cost 50 us; it costs 500 us, so
     * ticks go at least 10 intervals apart. */
    burn_ns = 500000;
    const int64_t interval = 1000000;
    pn_sampler_opts o = {.hz = 1000, .oncpu = 0, .cpu_budget = 5};
    pn_sampler *s = pn_sampler_new(st, &o, burning_walker, NULL, NULL);
    CHECK_EQ_INT(pn_sampler_start(s, NULL), 0);
    pn_sampler_stats stats;
    CHECK(wait_stats(s, ticks_at_least, 40, &stats));
    pn_sampler_stop(s);
    pn_sampler_get_stats(s, &stats);
    uint32_t stride = (uint32_t)(1000 / stats.effective_rate_hz + 0.5);
    printf("  ticks %llu, missed %llu, throttled %llu, effective %.1f Hz, sampler CPU %.3f s\n",
           (unsigned long long)stats.ticks, (unsigned long long)stats.missed_ticks,
           (unsigned long long)stats.budget_throttled_ticks, stats.effective_rate_hz,
           stats.sampler_cpu_ns / 1e9);
    CHECK(stride >= 10);
    CHECK(stats.effective_rate_hz <= 100.0);
    CHECK(stats.budget_throttled_ticks >= 9 * (stats.ticks - 1));
    /* Every deadline is in some tick's wall value once: the ticks taken,
     * those missed and those the budget skipped, but the skips planned
     * after the last tick. */
    int nr = atomic_load(&nrec);
    CHECK_EQ_INT(nr, (long long)stats.ticks);
    int64_t wall = 0;
    for (int i = 0; i < nr && i < REC_MAX; i++)
        wall += rec_wall[i];
    CHECK_EQ_INT(wall, (long long)(stats.ticks + stats.missed_ticks +
                                   stats.budget_throttled_ticks - (stride - 1)) * interval);
    /* The sampler's CPU over the deadlines it covered: within the budget,
     * give or take the first tick (before it was measured) and overheads
     * the smoothing averages out. Without a budget this is 50 %. */
    CHECK(stats.sampler_cpu_ns < 0.10 * (double)wall);
    pn_sampler_free(s);

    /* 0: no limit, every deadline is a tick. */
    reset_known();
    o.cpu_budget = 0;
    burn_ns = 100000;
    s = pn_sampler_new(st, &o, burning_walker, NULL, NULL);
    pn_sampler_start(s, NULL);
    CHECK(wait_stats(s, ticks_at_least, 20, &stats));
    pn_sampler_stop(s);
    pn_sampler_get_stats(s, &stats);
    CHECK_EQ_INT(stats.budget_throttled_ticks, 0);
    CHECK(stats.effective_rate_hz == 1000.0);
    pn_sampler_free(s);

    pn_error e;
    o.cpu_budget = -1;
    CHECK(pn_sampler_new(st, &o, burning_walker, NULL, &e) == NULL);
    CHECK(strstr(e.msg, "sampler_cpu_budget") != NULL);
    o.cpu_budget = 101;
    CHECK(pn_sampler_new(st, &o, burning_walker, NULL, &e) == NULL);
    pn_store_free(st);
}

TEST_MAIN(T(test_rate_accuracy), T(test_oncpu_vs_wall), T(test_stop_is_prompt_at_low_rate),
          T(test_fork_child_samples), T(test_context_labels_merge_with_thread_slot),
          T(test_pooled_sample_carries_every_thread),
          T(test_budget_spaces_ticks_and_keeps_totals))
