/* Micro-benchmarks of the core's hot paths: store inserts (the sampler's
 * tick), symbol lookups (the walker), pprof encoding + gzip (the exporter),
 * label push/pop (the application's tag_wrapper), label churn, and gzip
 * alone at each zlib level (how pn_gzip's level was chosen).
 *
 * Prints one table per part with the median of several repetitions; there
 * is no pass/fail. Inputs come from a fixed-seed generator so runs compare.
 * `--quick` shrinks every size (for valgrind/ASan runs, not for numbers);
 * `--profile FILE` names the real profile of part (f) (default
 * bench/core/data/shop-cpu.pb.gz, relative to the working directory).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "aggregation/profile.h"
#include "encoding/otlp.h"
#include "encoding/pprof.h"

#define REPS 7          /* repetitions per measurement; the median is shown */
#define ENCODE_REPS 5
#define POOL_FRAMES 4096 /* distinct functions of the synthetic application */

/* Set once from argv before any benchmark runs; read-only afterwards. */
static int quick;
static const char *profile_path = "bench/core/data/shop-cpu.pb.gz";

/* The raw (uncompressed) pprof of part (c)'s 10k-stack period, kept for
 * part (f). Main thread only. */
static uint8_t *raw_10k;
static size_t raw_10k_len;

/* ------------------------------------------------------------ helpers */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* xorshift64*: deterministic, fast, good enough to pick frames. */
typedef struct {
    uint64_t s;
} rng;

static uint32_t rng_below(rng *r, uint32_t n)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)(((r->s * 2685821657736338717ull) >> 32) % n);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "bench_core: out of memory (%zu x %zu bytes)\n", n, size);
        exit(1);
    }
    return p;
}

static void die(const char *what, const pn_error *e)
{
    fprintf(stderr, "bench_core: %s: %s\n", what, e ? e->msg : "failed");
    exit(1);
}

/* The synthetic application's functions: names and files shaped like a
 * Python service's ("app.billing.invoice.render_line_42"), so string
 * lengths and hashing costs are realistic. */
typedef struct {
    char name[POOL_FRAMES][64];
    char file[POOL_FRAMES][64];
    size_t nlen[POOL_FRAMES], flen[POOL_FRAMES];
    uint32_t line[POOL_FRAMES];
} frame_pool;

static const char *const packages[] = {"billing", "users", "search", "render", "storage",
                                       "auth", "http", "json"};

static frame_pool *pool_new(void)
{
    frame_pool *fp = xcalloc(1, sizeof *fp);
    for (uint32_t i = 0; i < POOL_FRAMES; i++) {
        const char *pkg = packages[i % 8];
        int n = snprintf(fp->name[i], sizeof fp->name[i], "app.%s.module_%u.handler_%u", pkg,
                         i / 16, i);
        int f = snprintf(fp->file[i], sizeof fp->file[i], "/srv/app/%s/module_%u.py", pkg,
                         i / 16);
        fp->nlen[i] = (size_t)n;
        fp->flen[i] = (size_t)f;
        fp->line[i] = 10 + i % 400;
    }
    return fp;
}

/* Intern the whole pool into s; ids[i] is pool entry i's frame. The ids
 * only depend on the order of interning, so a fresh period gets the same. */
static void pool_intern(const frame_pool *fp, pn_symbols *s, pn_frame_id *ids)
{
    for (uint32_t i = 0; i < POOL_FRAMES; i++) {
        ids[i] = pn_symbols_frame3(s, fp->name[i], fp->nlen[i], fp->file[i], fp->flen[i],
                                   fp->line[i]);
        if (ids[i] == PN_FRAME_UNKNOWN) {
            fprintf(stderr, "bench_core: symbol table full at pool entry %u\n", i);
            exit(1);
        }
    }
}

/* --------------------------------------------------- (a) store inserts */

/* One sampler-like workload: most samples repeat a hot stack (a skewed
 * pick among `hot`), one in ten is a stack never seen before. */
static void bench_store(const frame_pool *fp, uint32_t depth, double *ns_out,
                        uint32_t *distinct_out, uint64_t *overflow_out)
{
    const uint32_t nops = quick ? 2000 : 20000;
    const uint32_t hot = 256;
    const uint32_t nnew = nops / 10;
    const uint32_t nstacks = hot + nnew;

    pn_store_limits lim;
    pn_store_limits_default(&lim);
    lim.max_stacks = 16384;
    lim.max_depth = 256; /* depth 200 must not be cut */
    pn_error e = {0};
    pn_store *st = pn_store_new(&lim, &e);
    if (!st)
        die("pn_store_new", &e);

    /* Stacks as pool indexes; translated to frame ids once interned. */
    uint32_t *stack_idx = xcalloc((size_t)nstacks * depth, sizeof *stack_idx);
    rng r = {0x9e3779b97f4a7c15ull ^ depth};
    for (size_t i = 0; i < (size_t)nstacks * depth; i++)
        stack_idx[i] = rng_below(&r, POOL_FRAMES);
    uint32_t *ops = xcalloc(nops, sizeof *ops);
    uint32_t next_new = hot;
    for (uint32_t i = 0; i < nops; i++) {
        if (i % 10 == 9 && next_new < nstacks) {
            ops[i] = next_new++;
        } else {
            uint32_t u = rng_below(&r, 1024);
            ops[i] = (uint32_t)((uint64_t)u * u * hot / (1024u * 1024u)); /* skewed */
        }
    }

    pn_frame_id ids[POOL_FRAMES], first_ids[POOL_FRAMES];
    pn_frame_id *frames = xcalloc((size_t)nstacks * depth, sizeof *frames);
    double per_op[REPS];
    *overflow_out = 0;
    *distinct_out = 0;
    /* Two untimed warm-up rounds first: they fault in both periods' pages. */
    for (int rep = -2; rep < REPS; rep++) {
        pn_store_write_begin(st);
        pn_period *p = pn_store_active(st);
        pool_intern(fp, pn_period_symbols(p), ids);
        if (rep == -2) {
            memcpy(first_ids, ids, sizeof ids);
            for (size_t i = 0; i < (size_t)nstacks * depth; i++)
                frames[i] = ids[stack_idx[i]];
        } else if (memcmp(first_ids, ids, sizeof ids) != 0) {
            fprintf(stderr, "bench_core: frame ids differ between periods\n");
            exit(1);
        }
        const int64_t values[PN_MAX_VALUES] = {10000000, 1, 0, 0};
        int64_t t0 = mono_ns();
        for (uint32_t i = 0; i < nops; i++)
            pn_period_add(p, frames + (size_t)ops[i] * depth, depth, NULL, 1000 + i % 4, 0,
                          values);
        int64_t t1 = mono_ns();
        pn_store_write_end(st);
        if (rep >= 0)
            per_op[rep] = (double)(t1 - t0) / nops;

        pn_period *old = pn_store_swap(st, realtime_ns());
        pn_period_stats stats;
        pn_period_get_stats(old, &stats);
        if (stats.samples_added != nops) {
            fprintf(stderr, "bench_core: store kept %" PRIu64 " of %u samples\n",
                    stats.samples_added, nops);
            exit(1);
        }
        *overflow_out += stats.overflow_samples + stats.truncated_stacks;
        *distinct_out = (uint32_t)pn_period_sample_count(old) - 1; /* minus [overflow] */
        pn_store_recycle(st, old);
    }
    *ns_out = median(per_op, REPS);
    free(frames);
    free(ops);
    free(stack_idx);
    pn_store_free(st);
}

static void run_store(const frame_pool *fp)
{
    static const uint32_t depths[] = {10, 50, 200};
    printf("(a) store: pn_period_add, %u adds per period (90%% repeat a hot stack, "
           "10%% new), median of %d\n",
           quick ? 2000 : 20000, REPS);
    printf("    %-8s %12s %12s %16s %12s\n", "depth", "ns/add", "vs depth 10",
           "distinct samples", "overflowed");
    double base = 0;
    for (size_t i = 0; i < sizeof depths / sizeof *depths; i++) {
        double ns;
        uint32_t distinct;
        uint64_t overflow;
        bench_store(fp, depths[i], &ns, &distinct, &overflow);
        if (i == 0)
            base = ns;
        printf("    %-8u %12.1f %11.2fx %16u %12" PRIu64 "\n", depths[i], ns,
               base > 0 ? ns / base : 0, distinct, overflow);
    }
    printf("\n");
}

/* ------------------------------------------------ (b) symbol lookups */

static void run_symbols(const frame_pool *fp)
{
    const uint32_t nops = quick ? 20000 : 400000;
    pn_symbols *s = pn_symbols_new(2u << 20, 65536);
    if (!s)
        die("pn_symbols_new", NULL);
    pn_frame_id ids[POOL_FRAMES];
    pool_intern(fp, s, ids);

    uint32_t *order = xcalloc(nops, sizeof *order);
    rng r = {0x2545f4914f6cdd1dull};
    uint64_t expect = 0;
    for (uint32_t i = 0; i < nops; i++) {
        order[i] = rng_below(&r, POOL_FRAMES);
        expect += ids[order[i]];
    }
    double per_op[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        uint64_t sum = 0;
        int64_t t0 = mono_ns();
        for (uint32_t i = 0; i < nops; i++) {
            uint32_t k = order[i];
            sum += pn_symbols_frame3(s, fp->name[k], fp->nlen[k], fp->file[k], fp->flen[k],
                                     fp->line[k]);
        }
        int64_t t1 = mono_ns();
        /* Every lookup must have hit: same ids, nothing new interned. */
        if (sum != expect || pn_symbols_frame_count(s) != POOL_FRAMES + PN_FRAME_FIRST_USER) {
            fprintf(stderr, "bench_core: symbol lookups did not all hit\n");
            exit(1);
        }
        per_op[rep] = (double)(t1 - t0) / nops;
    }
    printf("(b) symbols: pn_symbols_frame3 hit (name ~30 B, file ~30 B), %u frames "
           "interned, %u lookups, median of %d\n",
           POOL_FRAMES, nops, REPS);
    printf("    %12s\n", "ns/lookup");
    printf("    %12.1f\n\n", median(per_op, REPS));
    free(order);
    pn_symbols_free(s);
}

/* ------------------------------------------- (c) pprof encode + gzip */

typedef struct {
    size_t profiles, gz_bytes, raw_bytes, samples;
    int measure_raw;            /* gunzip each profile to count raw bytes */
    int keep_raw;               /* and keep the first one in raw_10k */
    pn_error e;
} encode_sink;

static int count_profile(void *ud, const uint8_t *gz, size_t len, size_t nsamples)
{
    encode_sink *k = ud;
    k->profiles++;
    k->gz_bytes += len;
    k->samples += nsamples;
    if (k->measure_raw) {
        uint8_t *raw;
        size_t raw_len;
        if (pn_gunzip(gz, len, (size_t)64 << 20, &raw, &raw_len, &k->e) != 0)
            return 1;
        k->raw_bytes += raw_len;
        if (k->keep_raw && !raw_10k) {
            raw_10k = raw;
            raw_10k_len = raw_len;
        } else {
            free(raw);
        }
    }
    return 0;
}

/* The same profiles as OTLP (encode + gzip: what the OTLP exporter does
 * per period), side by side with pprof in the same run. */
typedef struct {
    uint32_t unique;
    size_t raw_bytes, gz_bytes;
    double ms, pprof_ms;
} otlp_row;
static otlp_row otlp_rows[4];
static size_t n_otlp_rows;

/* pprof and OTLP alternate, rep by rep, so load on the machine hits both
 * alike and the ratio holds. */
static void bench_otlp(const pn_profile *prof, const pn_encode_opts *o, uint32_t unique)
{
    static const pn_label res[] = {{"service.name", "bench"}};
    pn_otlp_opts oo = {.resource = res, .nresource = 1, .pid = 1, .scope_name = "bench"};
    double ms[ENCODE_REPS], pms[ENCODE_REPS];
    size_t raw_len = 0, gz_len = 0;
    pn_error e = {0};
    for (int rep = 0; rep < ENCODE_REPS; rep++) {
        uint8_t *raw = NULL, *gz = NULL;
        encode_sink k = {0};
        int64_t p0 = mono_ns();
        if (pn_pprof_encode(prof, o, count_profile, &k, &e) < 0)
            die("pn_pprof_encode", &e);
        pms[rep] = (double)(mono_ns() - p0) / 1e6;
        int64_t t0 = mono_ns();
        if (pn_otlp_encode(prof, &oo, &raw, &raw_len, &e) < 0)
            die("pn_otlp_encode", &e);
        if (pn_gzip(raw, raw_len, &gz, &gz_len, &e) < 0)
            die("pn_gzip", &e);
        int64_t t1 = mono_ns();
        free(raw);
        free(gz);
        ms[rep] = (double)(t1 - t0) / 1e6;
    }
    if (n_otlp_rows < sizeof otlp_rows / sizeof otlp_rows[0])
        otlp_rows[n_otlp_rows++] = (otlp_row){unique, raw_len, gz_len, median(ms, ENCODE_REPS),
                                              median(pms, ENCODE_REPS)};
}

static void bench_encode(const frame_pool *fp, uint32_t unique, uint32_t depth)
{
    pn_store_limits lim;
    pn_store_limits_default(&lim);
    lim.max_stacks = 50000;
    lim.max_depth = 64;
    pn_error e = {0};
    pn_store *st = pn_store_new(&lim, &e);
    if (!st)
        die("pn_store_new", &e);

    /* A few label sets, as requests on different endpoints would have. */
    static const char *const endpoints[] = {"/api/users", "/api/render", "/api/search",
                                            "/api/login"};
    const pn_labelset *sets[4];
    for (int i = 0; i < 4; i++) {
        pn_label kv[2] = {{"endpoint", endpoints[i]}, {"region", "eu-west"}};
        sets[i] = pn_labelset_merge(pn_labelset_empty(), kv, 2, &e);
        if (!sets[i])
            die("pn_labelset_merge", &e);
    }

    pn_store_write_begin(st);
    pn_period *p = pn_store_active(st);
    pn_frame_id ids[POOL_FRAMES];
    pool_intern(fp, pn_period_symbols(p), ids);
    rng r = {0xd1b54a32d192ed03ull ^ unique};
    pn_frame_id *stack = xcalloc(depth, sizeof *stack);
    for (uint32_t i = 0; i < unique; i++) {
        for (uint32_t d = 0; d < depth; d++)
            stack[d] = ids[rng_below(&r, POOL_FRAMES)];
        const int64_t values[PN_MAX_VALUES] = {10000000 + i % 1000, 1, 0, 0};
        pn_period_add(p, stack, depth, sets[i % 4], 2000 + i % 8, 0, values);
    }
    pn_store_write_end(st);
    pn_period *old = pn_store_swap(st, realtime_ns());
    pn_period_stats stats;
    pn_period_get_stats(old, &stats);
    /* 30 random frames from 4096 never repeat, so every stack is new. */
    if (stats.samples_added != unique || stats.overflow_samples != 0 ||
        pn_period_sample_count(old) != (size_t)unique + 1) {
        fprintf(stderr, "bench_core: period holds %zu samples (%" PRIu64 " overflowed), "
                "wanted %u unique\n", pn_period_sample_count(old) - 1,
                stats.overflow_samples, unique);
        exit(1);
    }

    /* The flusher copies the sealed period into a profile (what the queue
     * carries); the exporter thread encodes that. Both timed, apart. */
    static const pn_value_type types[2] = {{"cpu", "nanoseconds"}, {"samples", "count"}};
    pn_profile_meta meta = {.app_name = "bench", .profile_type = "cpu", .sample_rate = 100,
                            .nvalues = 2, .sample_types = types,
                            .period_type = {"cpu", "nanoseconds"}, .period = 10000000};
    double copy_ms[ENCODE_REPS];
    pn_profile *prof = NULL;
    for (int rep = 0; rep < ENCODE_REPS; rep++) {
        pn_profile_free(prof);
        int64_t t0 = mono_ns();
        prof = pn_profile_from_period(old, &meta, &e);
        int64_t t1 = mono_ns();
        if (!prof)
            die("pn_profile_from_period", &e);
        copy_ms[rep] = (double)(t1 - t0) / 1e6;
    }
    /* The period can be recycled as soon as it is copied. */
    pn_store_recycle(st, old);
    if (prof->nsamples != unique + 1) {
        fprintf(stderr, "bench_core: profile holds %u samples, wanted %u + [overflow]\n",
                prof->nsamples, unique);
        exit(1);
    }

    pn_encode_opts o;
    pn_encode_opts_from_profile(&o, prof);
    double ms[ENCODE_REPS];
    encode_sink k = {0};
    for (int rep = 0; rep < ENCODE_REPS; rep++) {
        memset(&k, 0, sizeof k);
        int64_t t0 = mono_ns();
        int n = pn_pprof_encode(prof, &o, count_profile, &k, &e);
        int64_t t1 = mono_ns();
        if (n < 0)
            die("pn_pprof_encode", &e);
        if ((size_t)n != k.profiles || k.samples != unique) {
            fprintf(stderr, "bench_core: encoder reported %d profiles / %zu samples, "
                    "sink saw %zu / wanted %u\n", n, k.samples, k.profiles, unique);
            exit(1);
        }
        ms[rep] = (double)(t1 - t0) / 1e6;
    }
    size_t gz_bytes = k.gz_bytes, profiles = k.profiles;
    /* Raw size from one more, untimed, pass. */
    memset(&k, 0, sizeof k);
    k.measure_raw = 1;
    k.keep_raw = unique == 10000;
    if (pn_pprof_encode(prof, &o, count_profile, &k, &e) < 0)
        die("pn_pprof_encode (gunzip pass)", k.e.code ? &k.e : &e);
    double med = median(ms, ENCODE_REPS), copy_med = median(copy_ms, ENCODE_REPS);
    printf("    %-8u %9zu %12zu %12zu %6.1fx %10.2f %12.0f %10.2f\n", unique, profiles,
           k.raw_bytes, gz_bytes, gz_bytes ? (double)k.raw_bytes / (double)gz_bytes : 0, med,
           med * 1e6 / unique, copy_med);
    bench_otlp(prof, &o, unique);

    pn_profile_free(prof);
    free(stack);
    for (int i = 0; i < 4; i++)
        pn_labelset_unref(sets[i]);
    pn_store_free(st);
}

static void run_encode(const frame_pool *fp)
{
    static const uint32_t sizes[] = {1000, 10000, 50000};
    static const uint32_t quick_sizes[] = {500, 5000};
    const uint32_t *sz = quick ? quick_sizes : sizes;
    size_t n = quick ? 2 : 3;
    printf("(c) pprof: pn_pprof_encode (encode + gzip, split at 16000 samples / 4 MiB) of "
           "one period's profile, unique stacks of depth 30, 4 label sets, median of %d;\n"
           "    copy ms: pn_profile_from_period of that period (the flusher's copy; not part of ms)\n",
           ENCODE_REPS);
    printf("    %-8s %9s %12s %12s %7s %10s %12s %10s\n", "stacks", "profiles", "raw bytes",
           "gzip bytes", "ratio", "ms", "ns/sample", "copy ms");
    n_otlp_rows = 0;
    for (size_t i = 0; i < n; i++)
        bench_encode(fp, sz[i], 30);
    printf("\n");
    printf("(c2) OTLP: pn_otlp_encode + gzip of the same profiles (one request, both sample "
           "types, no split), median of %d;\n    pprof ms: pn_pprof_encode of the same, "
           "alternating with it rep by rep\n", ENCODE_REPS);
    printf("    %-8s %12s %12s %10s %10s %12s\n", "stacks", "raw bytes", "gzip bytes", "ms",
           "pprof ms", "otlp/pprof");
    for (size_t i = 0; i < n_otlp_rows; i++) {
        const otlp_row *r = &otlp_rows[i];
        printf("    %-8u %12zu %12zu %10.2f %10.2f %11.2fx\n", r->unique, r->raw_bytes,
               r->gz_bytes, r->ms, r->pprof_ms, r->pprof_ms > 0 ? r->ms / r->pprof_ms : 0);
    }
    printf("\n");
}

/* ------------------------------------------------- (d) labels push/pop */

typedef struct {
    double ns[3];
    int failed;
    pn_error e;
} labels_result;

/* Median ns per push+pop pair of `kv` (cycling through `nvariants` values
 * of the first label when > 1), on the calling thread. */
static int time_push_pop(const pn_label *kv, size_t n, const char *const *variants,
                         size_t nvariants, uint32_t nops, double *out, pn_error *e)
{
    pn_label local[4];
    memcpy(local, kv, n * sizeof *kv);
    double per_op[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        int64_t t0 = mono_ns();
        for (uint32_t i = 0; i < nops; i++) {
            if (nvariants > 1)
                local[0].value = variants[i % nvariants];
            if (pn_labels_push(local, n, e) != 0 || pn_labels_pop(e) != 0)
                return -1;
        }
        int64_t t1 = mono_ns();
        per_op[rep] = (double)(t1 - t0) / nops;
    }
    *out = median(per_op, REPS);
    return 0;
}

/* Runs on its own thread so that the thread's label slot and stack are
 * released at thread exit, as for any application thread. */
static void *labels_thread(void *arg)
{
    labels_result *res = arg;
    const uint32_t nops = quick ? 5000 : 200000;
    char names[64][32];
    const char *variants[64];
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof names[i], "/api/v1/resource_%d", i);
        variants[i] = names[i];
    }
    pn_label one = {"endpoint", "/api/users"};
    pn_label two[2] = {{"endpoint", "/api/users"}, {"span_name", "GET /api/users"}};
    if (time_push_pop(&one, 1, NULL, 0, nops, &res->ns[0], &res->e) != 0 ||
        time_push_pop(&one, 1, variants, 64, nops, &res->ns[1], &res->e) != 0 ||
        pn_labels_thread_add("region", "eu-west", &res->e) != 0 ||
        pn_labels_thread_add("service", "checkout", &res->e) != 0 ||
        pn_labels_thread_add("version", "1.4.2", &res->e) != 0 ||
        time_push_pop(two, 2, NULL, 0, nops, &res->ns[2], &res->e) != 0)
        res->failed = 1;
    return NULL;
}

static void run_labels(void)
{
    labels_result res = {0};
    pthread_t th;
    if (pthread_create(&th, NULL, labels_thread, &res) != 0) {
        fprintf(stderr, "bench_core: cannot start the labels thread\n");
        exit(1);
    }
    pthread_join(th, NULL);
    if (res.failed)
        die("labels", &res.e);
    printf("(d) labels: pn_labels_push + pn_labels_pop pair, %u pairs, median of %d\n",
           quick ? 5000 : 200000, REPS);
    printf("    %-46s %12s\n", "case", "ns/pair");
    printf("    %-46s %12.1f\n", "1 label on an empty set, same value", res.ns[0]);
    printf("    %-46s %12.1f\n", "1 label on an empty set, 64 values in turn", res.ns[1]);
    printf("    %-46s %12.1f\n", "2 labels on a 3-label thread set", res.ns[2]);
    printf("\n");
}

/* ------------------------------------------------------- (e) label churn */

/* A unique label set per "request" (request ids, span ids) is the normal
 * case. Two threads push and pop one at a paced total rate while a real
 * agent samples them at 100 Hz (wall mode, so every tick reads their
 * slots) and exports every second into a folder: what each push+pop pair
 * costs at worst, and what the churn adds to RSS. */
#define CHURN_THREADS 2

typedef struct {
    pid_t tid;
    _Atomic int ready;
    uint64_t pairs, over_1ms;
    int64_t max_ns;
    double rate;        /* pairs per second for this thread */
    double seconds;
    int failed;
    pn_error e;
} churn_thread;

static churn_thread churners[CHURN_THREADS];

static void churn_walker(void *ctx, pn_tick *t)
{
    (void)ctx;
    pn_symbols *sym = pn_tick_symbols(t);
    pn_frame_id f[2] = {pn_symbols_frame3(sym, "handle_request", 14, "app.py", 6, 10),
                        pn_symbols_frame3(sym, "main", 4, "app.py", 6, 1)};
    for (int i = 0; i < CHURN_THREADS; i++) {
        int64_t v;
        if (atomic_load(&churners[i].ready) && pn_tick_begin_thread(t, churners[i].tid, &v))
            pn_tick_sample(t, churners[i].tid, f, 2, v, NULL);
    }
}

static void *churn_main(void *arg)
{
    churn_thread *c = arg;
    c->tid = pn_gettid();
    atomic_store(&c->ready, 1);
    char id[40];
    pn_label kv = {"request_id", id};
    int64_t start = mono_ns(), end = start + (int64_t)(c->seconds * 1e9);
    for (uint64_t i = 0;; i++) {
        if ((i & 255) == 0) {
            int64_t now = mono_ns();
            if (now >= end)
                break;
            /* Pace: sleep until pair i is due. */
            int64_t due = start + (int64_t)((double)i / c->rate * 1e9);
            if (due > now) {
                struct timespec ts = {(due - now) / 1000000000, (due - now) % 1000000000};
                nanosleep(&ts, NULL);
            }
        }
        snprintf(id, sizeof id, "%016llx%04x", (unsigned long long)i, (unsigned)c->tid & 0xffff);
        int64_t t0 = mono_ns();
        if (pn_labels_push(&kv, 1, &c->e) != 0 || pn_labels_pop(&c->e) != 0) {
            c->failed = 1;
            break;
        }
        int64_t d = mono_ns() - t0;
        if (d > c->max_ns)
            c->max_ns = d;
        c->over_1ms += d > 1000000;
        c->pairs++;
    }
    return NULL;
}

/* kB of a field of /proc/self/status or smaps_rollup ("VmRSS:", "Pss:"). */
static long proc_kib(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) {
            v = strtol(line + kl, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

typedef struct {
    double rate, max_ms, rss_mib, pss_mib;
    uint64_t over_1ms, samples;
    size_t retired_peak;
} churn_result;

/* One churn run, with an agent sampling the churning threads or without
 * one (the baseline: what the machine's scheduling alone costs). */
static void churn_once(int with_agent, double seconds, double total_rate, churn_result *out)
{
    char dir[] = "/tmp/bench_core_churn.XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_core: mkdtemp failed\n");
        exit(1);
    }
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    if (pn_config_set(&c, "application_name", "bench.churn", &e) ||
        pn_config_set(&c, "output_dir", dir, &e) || pn_config_set(&c, "oncpu", "false", &e) ||
        pn_config_set(&c, "upload_interval", "1", &e))
        die("churn config", &e);
    long rss0 = proc_kib("/proc/self/status", "VmRSS:");
    long pss0 = proc_kib("/proc/self/smaps_rollup", "Pss:");
    pn_agent *a = NULL;
    pn_driver_opts d = {.kind = PN_DRIVER_WALKER, .walker = churn_walker};
    if (with_agent && (!(a = pn_agent_start(&c, &e)) || !pn_agent_add_driver(a, &d, &e)))
        die("churn agent", &e);
    pthread_t th[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++) {
        churners[i] = (churn_thread){.rate = total_rate / CHURN_THREADS, .seconds = seconds};
        if (pthread_create(&th[i], NULL, churn_main, &churners[i]) != 0) {
            fprintf(stderr, "bench_core: cannot start a churn thread\n");
            exit(1);
        }
    }
    long rss_peak = rss0, pss_peak = pss0;
    size_t retired_peak = 0;
    int64_t end = mono_ns() + (int64_t)(seconds * 1e9) + 200000000;
    while (mono_ns() < end) {
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
        long r = proc_kib("/proc/self/status", "VmRSS:");
        long p = proc_kib("/proc/self/smaps_rollup", "Pss:");
        size_t ret = pn_labelset_retired();
        rss_peak = r > rss_peak ? r : rss_peak;
        pss_peak = p > pss_peak ? p : pss_peak;
        retired_peak = ret > retired_peak ? ret : retired_peak;
    }
    uint64_t pairs = 0, over = 0;
    int64_t max_ns = 0;
    for (int i = 0; i < CHURN_THREADS; i++) {
        pthread_join(th[i], NULL);
        if (churners[i].failed)
            die("churn push/pop", &churners[i].e);
        pairs += churners[i].pairs;
        over += churners[i].over_1ms;
        max_ns = churners[i].max_ns > max_ns ? churners[i].max_ns : max_ns;
    }
    pn_agent_stats st = {0};
    if (a)
        pn_agent_stop_stats(a, &st);
    pn_config_free(&c);
    char cmd[sizeof dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_core: could not remove %s\n", dir);
    *out = (churn_result){pairs / seconds, max_ns / 1e6, (rss_peak - rss0) / 1024.0,
                          (pss_peak - pss0) / 1024.0, over, st.sampler.samples, retired_peak};
}

static void run_churn(void)
{
    const double seconds = quick ? 1.5 : 12, total_rate = 150000;
    churn_result none, agent;
    churn_once(0, seconds, total_rate, &none);
    churn_once(1, seconds, total_rate, &agent);
    printf("(e) label churn: %d threads push+pop a unique label set each time, paced to "
           "%.0f/s in all, %.1f s; without a profiler, then with an agent sampling them at "
           "100 Hz (wall) and exporting every 1 s\n", CHURN_THREADS, total_rate, seconds);
    printf("    %-46s %12s %12s\n", "", "no agent", "agent");
    printf("    %-46s %12.0f %12.0f\n", "unique label sets per second", none.rate, agent.rate);
    printf("    %-46s %12.3f %12.3f\n", "slowest push+pop pair (ms)", none.max_ms, agent.max_ms);
    printf("    %-46s %12llu %12llu\n", "pairs slower than 1 ms",
           (unsigned long long)none.over_1ms, (unsigned long long)agent.over_1ms);
    printf("    %-46s %12.1f %12.1f\n", "peak RSS added (MiB)", none.rss_mib, agent.rss_mib);
    printf("    %-46s %12.1f %12.1f\n", "peak PSS added (MiB)", none.pss_mib, agent.pss_mib);
    printf("    %-46s %12zu %12zu\n", "most retired sets waiting to be freed",
           none.retired_peak, agent.retired_peak);
    printf("    %-46s %12llu %12llu\n", "samples taken", (unsigned long long)none.samples,
           (unsigned long long)agent.samples);
    printf("\n");
}

/* ------------------------------------------------ (f) gzip levels */

/* One gzip member of in[0, len) by zlib at `level` (windowBits 31: the
 * gzip wrapper), output buffer allocated per call as pn_gzip does. */
static size_t zlib_gzip(const uint8_t *in, size_t len, int level)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, level, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        fprintf(stderr, "bench_core: deflateInit2 failed\n");
        exit(1);
    }
    uLong cap = deflateBound(&zs, (uLong)len);
    uint8_t *out = xcalloc(cap, 1);
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END) {
        fprintf(stderr, "bench_core: deflate did not finish\n");
        exit(1);
    }
    size_t n = zs.total_out;
    deflateEnd(&zs);
    free(out);
    return n;
}

/* level 0: pn_gzip as built. Median ms over reps; *bytes: output size. */
static double time_gzip(const uint8_t *in, size_t len, int level, int reps, size_t *bytes)
{
    double ms[51];
    for (int rep = 0; rep < reps; rep++) {
        int64_t t0 = mono_ns();
        if (level == 0) {
            uint8_t *gz;
            pn_error e;
            if (pn_gzip(in, len, &gz, bytes, &e) != 0)
                die("pn_gzip", &e);
            free(gz);
        } else {
            *bytes = zlib_gzip(in, len, level);
        }
        ms[rep] = (double)(mono_ns() - t0) / 1e6;
    }
    return median(ms, (size_t)reps);
}

static void gzip_rows(const char *what, const uint8_t *in, size_t len, int reps)
{
    for (int level = 0; level <= 9; level++) {
        size_t bytes = 0;
        double ms = time_gzip(in, len, level, reps, &bytes);
        char method[32];
        if (level == 0)
            snprintf(method, sizeof method, "pn_gzip");
        else
            snprintf(method, sizeof method, "zlib %d", level);
        printf("    %-22s %10zu %-10s %10zu %6.2fx %9.3f\n", level ? "" : what, len, method, bytes,
               bytes ? (double)len / (double)bytes : 0, ms);
    }
}

static void run_gzip_levels(void)
{
    printf("(f) gzip alone: pn_gzip as built, then zlib deflate at levels 1-9 (gzip wrapper), "
           "median of 15 (10k period) / 51 (real profile)\n");
    printf("    %-22s %10s %-10s %10s %7s %9s\n", "input", "raw bytes", "method", "gzip bytes",
           "ratio", "ms");
    if (raw_10k)
        gzip_rows("10k-stack period", raw_10k, raw_10k_len, quick ? 3 : 15);
    uint8_t *gz = NULL, *raw = NULL;
    size_t gz_len = 0, raw_len = 0;
    FILE *f = fopen(profile_path, "rb");
    if (f) {
        gz = xcalloc(1 << 24, 1);
        gz_len = fread(gz, 1, 1 << 24, f);
        fclose(f);
    }
    pn_error e;
    if (gz && pn_gunzip(gz, gz_len, (size_t)64 << 20, &raw, &raw_len, &e) == 0)
        gzip_rows("real profile (CPython)", raw, raw_len, quick ? 3 : 51);
    else
        printf("    (no real profile: cannot read %s)\n", profile_path);
    free(gz);
    free(raw);
    printf("\n");
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            profile_path = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--quick] [--profile FILE.pb.gz]\n", argv[0]);
            return 2;
        }
    }
    pn_log_set_level(PN_LOG_WARN);
    int64_t start = mono_ns();
#ifndef __OPTIMIZE__
    printf("note: built without optimisation; numbers are not representative\n");
#endif
    if (quick)
        printf("note: --quick: small sizes, for checking the benchmark, not for numbers\n");
    printf("bench_core: medians, CLOCK_MONOTONIC, single thread\n\n");

    frame_pool *fp = pool_new();
    run_store(fp);
    run_symbols(fp);
    run_encode(fp);
    run_labels();
    run_churn();
    run_gzip_levels();
    free(raw_10k);
    free(fp);

    /* Everything this run created is unreferenced now: free it, and say
     * so if anything is still alive (that would be a leak in the core). */
    pn_labels_reclaim();
    size_t live = pn_labelset_live();
    if (live != 0)
        printf("warning: %zu label sets still alive after the run\n", live);
    printf("total %.1f s\n", (double)(mono_ns() - start) / 1e9);
    return live == 0 ? 0 : 1;
}
