/* V8 CPU profiles joined to SIGPROF brackets and recorded through the cpu
 * and wall batch drivers.
 *
 * sampler.js hands over each finished V8 profile as flat arrays (frames,
 * node -> frame, node -> parent, sample -> node, sample -> time in µs of
 * CLOCK_MONOTONIC). A sample belongs to the bracket whose [before, after]
 * holds its timestamp (±2 µs: V8 stamps inside its handler, in µs). The
 * bracket gives the labels that ran and the thread CPU since the previous
 * signal: a cpu sample's value is that CPU time, a wall sample's the
 * interval. A sample no bracket holds was not taken by a tick and is
 * dropped (counted as unjoined). Profiles overlap by design (the next
 * starts before the last ends); samples at or before the last recorded
 * time are duplicates.
 *
 * Threads: main thread only (between signals; the handler only appends).
 * Holds: while profiling, each driver holds the grace generation of the
 * oldest bracket not recorded yet, so its label sets stay alive. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addon.h"

#define JOIN_SLACK_NS 2000
#define WATERMARK_LAG_NS (50 * 1000000LL)

enum { D_CPU, D_WALL, ND };

static pn_driver *drv[ND];
static int collect_cpu;
static int64_t interval_ns = 10000000;
static int64_t last_ns;        /* newest sample time recorded */
static int64_t since_ns[ND];   /* per driver: samples from this time on */
/* Times of the newest samples recorded: a sample of the overlap of two
 * profiles comes in both; V8 may also hand a sample to the next profile
 * only (processed after the end), with a time before the last one's. */
#define RECENT 512
static int64_t recent[RECENT];
static unsigned recent_n;
/* Counters since start (main thread). */
static uint64_t joined, unjoined, duplicates, idle_skipped, profiles, late, start_samples;
/* Samples whose span labels could not be merged in (no memory, or over the
 * label limit): they keep their context's labels alone. */
static uint64_t merge_drops;
static int warned_unbracketed; /* the warning below is given once a process */
/* CLOCK_MONOTONIC when the agent started: the core's flusher cuts periods on
 * a grid of upload intervals from (just before) then, and sampler.js
 * restarts the V8 profile just after each cut (joinNextCutMs). */
static int64_t agent_start_ns;

void join_reset(int counters)
{
    memset(drv, 0, sizeof drv);
    if (counters)
        agent_start_ns = pn_clock_ns(CLOCK_MONOTONIC);
    last_ns = 0;
    recent_n = 0;
    if (counters)
        joined = unjoined = duplicates = idle_skipped = profiles = late = start_samples =
            merge_drops = 0;
}

void join_counts(napi_env env, napi_value o)
{
    uint64_t rec, drop, foreign;
    signal_counts(&rec, &drop, &foreign);
    napi_value j;
    napi_create_object(env, &j);
    set_num(env, j, "profiles", (double)profiles);
    set_num(env, j, "joined", (double)joined);
    set_num(env, j, "unjoined", (double)unjoined);
    set_num(env, j, "duplicates", (double)duplicates);
    set_num(env, j, "idleSkipped", (double)idle_skipped);
    set_num(env, j, "late", (double)late);
    set_num(env, j, "startSamples", (double)start_samples);
    set_num(env, j, "spanMergeDrops", (double)merge_drops);
    set_num(env, j, "brackets", (double)rec);
    set_num(env, j, "bracketsDropped", (double)drop);
    set_num(env, j, "signalsOtherThreads", (double)foreign);
    napi_set_named_property(env, o, "join", j);
}

static void hold_all(uint64_t gen)
{
    for (int k = 0; k < ND; k++)
        if (drv[k])
            pn_driver_hold(drv[k], gen);
}

/* joinStart({cpu, wall, collectCpuTime, intervalMicros}): make the drivers
 * and hold label sets from now on. Call before signalArm. */
static napi_value m_start(napi_env env, napi_callback_info info)
{
    napi_value argv[4];
    size_t argc = js_args(env, info, argv, 4);
    bool cpu = false, wall = false, cc = false;
    double us = 0;
    if (argc < 4 || napi_get_value_bool(env, argv[0], &cpu) != napi_ok ||
        napi_get_value_bool(env, argv[1], &wall) != napi_ok ||
        napi_get_value_bool(env, argv[2], &cc) != napi_ok || js_double(env, argv[3], &us) != 0 ||
        !(us >= 1))
        return throw_msg(env, "ERR_INVALID_ARG_TYPE",
                         "joinStart(cpu, wall, collectCpuTime, intervalMicros)");
    interval_ns = (int64_t)(us * 1000);
    int64_t period = (int64_t)(1e9 / agent_sample_rate() + 0.5);
    if (llabs(period - interval_ns) > period / 100)
        period = interval_ns; /* the driver's period is the interval used */
    else
        period = 0;
    collect_cpu = cc;
    uint64_t gen = pn_grace_generation();
    pn_driver *was[ND] = {drv[D_CPU], drv[D_WALL]};
    pn_driver *now[ND] = {NULL, NULL};
    if (cpu && !(now[D_CPU] = agent_driver(env, "cpu", 0, period)))
        return NULL;
    if (wall && !(now[D_WALL] = agent_driver(env, "wall", cc, period)))
        return NULL;
    for (int k = 0; k < ND; k++) {
        if (was[k] && !now[k]) {
            /* no more samples for this driver: it may seal at once */
            pn_driver_watermark(was[k], INT64_MAX);
            pn_driver_hold(was[k], 0);
        } else if (now[k] && !was[k]) {
            /* (again) fed from now on: the profile running began a little
             * earlier, and its older samples are not this driver's (its
             * store may be newer than them: they would count as late) */
            since_ns[k] = pn_clock_ns(CLOCK_MONOTONIC);
            pn_driver_watermark(now[k], since_ns[k]);
        }
        drv[k] = now[k];
    }
    hold_all(gen);
    return js_undefined(env);
}

typedef struct {
    const pn_labelset *ctx, *span, *merged;
} merge_ent;

/* The (context, span) pairs one join has merged. It holds one entry per
 * sample at most (sized by the caller), so it never runs full: every
 * request of the profile keeps its span, however many there were. The
 * newest entries are searched first, since neighbouring samples mostly
 * share their pair. */
static const pn_labelset *labels_for(const bracket *b, merge_ent *cache, int *n, int cap)
{
    if (!b || !b->span)
        return b ? b->ctx : NULL;
    if (!b->ctx)
        return b->span;
    for (int i = *n - 1; i >= 0; i--)
        if (cache[i].ctx == b->ctx && cache[i].span == b->span)
            return cache[i].merged;
    if (*n >= cap) {
        merge_drops++;
        return b->ctx; /* only when the cache could not be allocated */
    }
    pn_label kv[PN_MAX_LABELS];
    size_t ns = pn_labelset_count(b->span);
    for (size_t i = 0; i < ns && i < PN_MAX_LABELS; i++)
        kv[i] = pn_labelset_at(b->span, i);
    pn_error e;
    const pn_labelset *m = pn_labelset_merge(b->ctx, kv, ns, &e);
    if (!m) {
        merge_drops++;
        return b->ctx;
    }
    cache[*n] = (merge_ent){b->ctx, b->span, m};
    (*n)++;
    return m;
}

static int seen(int64_t t)
{
    unsigned n = recent_n < RECENT ? recent_n : RECENT;
    for (unsigned i = 0; i < n; i++)
        if (recent[i] == t)
            return 1;
    return 0;
}

/* The bracket holding time t among [*cur, head) (sorted by time); *cur
 * moves past brackets that end before t. A sample older than *cur (V8
 * handed it over late) is searched from the ring's tail. */
static const bracket *find_bracket(int64_t t, uint64_t *cur, uint64_t head)
{
    uint64_t i = *cur;
    if (i > signal_tail() && signal_at(i - 1)->after_ns + JOIN_SLACK_NS >= t)
        i = signal_tail();
    while (i < head && signal_at(i)->after_ns + JOIN_SLACK_NS < t)
        i++;
    if (i >= *cur)
        *cur = i;
    if (i < head && signal_at(i)->before_ns - JOIN_SLACK_NS <= t) {
        if (i == *cur)
            (*cur)++;
        return signal_at(i);
    }
    return NULL;
}

/* joinProfile(names[], files[], lines Int32Array, nodeFrame Int32Array,
 *             nodeParent Int32Array, sampleNode Int32Array,
 *             sampleTime Float64Array (µs), endTimeMicros, idleFrame)
 *   -> samples recorded. idleFrame: the frame of V8's "(idle)" (-1: none);
 *   the slot still holds the last callback's labels while the event loop
 *   waits (context.js has no after hook), so idle samples get none. */
static napi_value m_profile(napi_env env, napi_callback_info info)
{
    napi_value argv[9];
    size_t argc = js_args(env, info, argv, 9);
    double idle = -1;
    if (argc < 9 || js_double(env, argv[8], &idle) != 0)
        return throw_msg(env, "ERR_INVALID_ARG_TYPE", "joinProfile: 9 arguments");
    frames_ctx fc;
    if (frames_open(env, &fc, argv) != 0)
        return NULL;
    size_t nsamp, ntimes;
    const int32_t *snode = js_typed(env, argv[5], napi_int32_array, &nsamp, "sampleNode");
    const double *stime = snode ? js_typed(env, argv[6], napi_float64_array, &ntimes,
                                           "sampleTime") : NULL;
    double end_us = 0;
    if (!snode || !stime || js_double(env, argv[7], &end_us) != 0)
        return NULL;
    if (ntimes != nsamp)
        return throw_msg(env, "ERR_INVALID_ARG_VALUE", "joinProfile: array lengths differ");
    int any = 0;
    for (int k = 0; k < ND; k++) {
        if (!drv[k])
            continue;
        if (frames_cache(env, &fc, k) != 0) {
            frames_close(&fc);
            return NULL;
        }
        pn_record_begin(drv[k]);
        any = 1;
    }
    profiles++;
    /* V8 samples the main thread, the process's first (report_thread_id) */
    uint64_t main_tid = (uint64_t)getpid();
    /* one merge per distinct pair at most: no more pairs than samples */
    int cache_cap = nsamp < (size_t)INT32_MAX ? (int)nsamp : INT32_MAX;
    merge_ent *cache = calloc(cache_cap > 0 ? (size_t)cache_cap : 1, sizeof *cache);
    if (!cache)
        cache_cap = 0;
    int ncache = 0;
    uint64_t cur = signal_tail(), head = signal_head();
    pn_frame_id stack[FRAMES_MAX_STACK];
    int32_t fidx[FRAMES_MAX_STACK];
    uint32_t recorded = 0;
    uint64_t joined_profile = 0, unjoined_profile = 0;
    for (size_t s = 0; any && s < nsamp; s++) {
        int64_t t = (int64_t)(stime[s] * 1000.0);
        if (t <= last_ns && seen(t)) {
            duplicates++;
            continue;
        }
        const bracket *b = find_bracket(t, &cur, head);
        if (!b && s == 0) {
            /* V8's sample taken by the start itself (our rotate), not by
             * a signal: profiler overhead, not the application */
            start_samples++;
            continue;
        }
        if (!b) {
            /* Not a tick of the sampling timer: none of our signals
             * brackets it. V8 12+ also adds samples of its own between
             * ticks (Node 24: hundreds a second in a loop calling
             * performance.now()); with a tick's weight and no labels they
             * would inflate the profile and unlabel it. */
            unjoined++;
            unjoined_profile++;
            continue;
        }
        joined++;
        joined_profile++;
        if (t > last_ns)
            last_ns = t;
        recent[recent_n++ % RECENT] = t;
        size_t depth = frames_stack(&fc, snode[s], fidx, 0);
        if (depth == 0)
            continue;
        const pn_labelset *ls = fidx[0] == (int32_t)idle ? NULL : labels_for(b, cache, &ncache, cache_cap);
        for (int k = 0; k < ND; k++) {
            if (!drv[k] || t < since_ns[k])
                continue;
            int64_t v[3] = {interval_ns, 1, 0};
            if (k == D_CPU) {
                if (b) {
                    /* a thread that barely ran since the last signal was
                     * idle: a CPU profile has no sample for it */
                    if (b->cpu_ns < interval_ns / 50) {
                        idle_skipped++;
                        continue;
                    }
                    v[0] = b->cpu_ns;
                }
            } else if (collect_cpu) {
                v[2] = b ? b->cpu_ns : 0;
            }
            pn_period *p = pn_record_period(drv[k], t);
            if (!p) {
                late++;
                continue;
            }
            pn_symbols *sym = pn_period_symbols(p);
            for (size_t i = 0; i < depth; i++)
                stack[i] = frames_intern(env, &fc, k, sym, fidx[i]);
            pn_sample smp = {.frames = stack, .depth = depth, .labels = ls, .values = v,
                             .tid = main_tid, .time_ns = t};
            pn_record(drv[k], p, &smp);
            recorded++;
        }
    }
    if (unjoined_profile >= 10 && joined_profile == 0 && !warned_unbracketed) {
        warned_unbracketed = 1;
        pn_log(PN_LOG_WARN, "none of the %llu samples of a V8 profile came with our SIGPROF "
               "bracket: another SIGPROF handler may sit in front of ours; those samples are "
               "dropped (stats().join.unjoined counts them)",
               (unsigned long long)unjoined_profile);
    }
    /* Every sample up to the profile's end is in now, but for those V8
     * had not processed yet (they come with the next profile): the drivers
     * may seal up to a little before the end (sampler.js's syncSoon comes
     * after this lag). */
    int64_t end_ns = (int64_t)(end_us * 1000.0) - WATERMARK_LAG_NS;
    for (int k = 0; k < ND; k++) {
        if (!drv[k])
            continue;
        pn_record_end(drv[k]);
        pn_driver_watermark(drv[k], end_ns);
    }
    frames_close(&fc);
    for (int i = 0; i < ncache; i++)
        pn_labelset_unref(cache[i].merged);
    free(cache);
    /* Brackets before the watermark can match nothing later. */
    uint64_t keep = signal_tail();
    head = signal_head();
    while (keep < head && signal_at(keep)->after_ns + JOIN_SLACK_NS < end_ns)
        keep++;
    uint64_t g = signal_consume(keep);
    hold_all(g ? g : pn_grace_generation());
    napi_value r;
    napi_create_uint32(env, recorded, &r);
    return r;
}

/* joinStop(): no more profiles; the drivers may seal everything. */
static napi_value m_stop(napi_env env, napi_callback_info info)
{
    (void)info;
    for (int k = 0; k < ND; k++)
        if (drv[k]) {
            pn_driver_watermark(drv[k], INT64_MAX);
            pn_driver_hold(drv[k], 0);
        }
    signal_consume(signal_head());
    memset(drv, 0, sizeof drv);
    return js_undefined(env);
}

/* joinNextCutMs(intervalMs, lagMs): milliseconds from now to the next
 * point `lagMs` after a period cut of the grid of `intervalMs` from the
 * agent's start (> 0; at most intervalMs). */
static napi_value m_next_cut(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    size_t argc = js_args(env, info, argv, 2);
    double interval_ms = 0, lag_ms = 0;
    if (argc < 2 || js_double(env, argv[0], &interval_ms) != 0 ||
        js_double(env, argv[1], &lag_ms) != 0 || !(interval_ms >= 1) || !(lag_ms >= 0))
        return throw_msg(env, "ERR_INVALID_ARG_TYPE", "joinNextCutMs(intervalMs >= 1, lagMs >= 0)");
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    int64_t step = (int64_t)(interval_ms * 1e6);
    int64_t since = now - agent_start_ns - (int64_t)(lag_ms * 1e6);
    int64_t to = step - (since % step + step) % step; /* in (0, step] */
    napi_value r;
    napi_create_double(env, (double)to / 1e6, &r);
    return r;
}

void join_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "joinNextCutMs", m_next_cut);
    set_fn(env, exports, "joinStart", m_start);
    set_fn(env, exports, "joinProfile", m_profile);
    set_fn(env, exports, "joinStop", m_stop);
}
