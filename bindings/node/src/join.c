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
 * Threads: each JS thread (main or worker, threads.c) joins its own V8
 * profiles to its own ring (between signals; the handler only appends),
 * into the process's drivers, under the addon lock (a driver has one
 * writer at a time). Per-thread state is `jt[entry]`; a driver's watermark
 * is the oldest of the threads feeding it, and so is its hold.
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

/* Times of the newest samples recorded: a sample of the overlap of two
 * profiles comes in both; V8 may also hand a sample to the next profile
 * only (processed after the end), with a time before the last one's. */
#define RECENT 512

/* A JS thread's join: written by that thread under the addon lock (the
 * watermark and hold are read by the others, to take the oldest). */
typedef struct {
    int feeds[ND];          /* joinStart: the kinds this thread's profile feeds */
    uint64_t epoch;         /* agent_epoch() it joined; 0: none */
    int collect_cpu;
    int64_t interval_ns;
    int64_t last_ns;        /* newest sample time recorded */
    int64_t since_ns[ND];   /* per driver: samples from this time on */
    int64_t watermark;      /* its samples before this are all in */
    uint64_t hold;          /* grace generation its brackets still hold (0: none) */
    int64_t recent[RECENT];
    unsigned recent_n;
} join_thread;

static join_thread jt[THREADS_MAX];
static pn_driver *drv[ND];
/* Counters since start (addon lock). */
static uint64_t joined, unjoined, duplicates, idle_skipped, profiles, late, start_samples,
    stale_profiles;
/* Samples whose span labels could not be merged in (no memory, or over the
 * label limit): they keep their context's labels alone. */
static uint64_t merge_drops;
static int warned_unbracketed; /* the warning below is given once a process */
/* CLOCK_MONOTONIC when the agent started: the core's flusher cuts periods on
 * a grid of upload intervals from (just before) then, and sampler.js
 * restarts the V8 profile just after each cut (joinNextCutMs). */
static int64_t agent_start_ns;

/* Driver k's watermark and hold: the oldest of the threads feeding it of
 * the running agent (none: all in, nothing held). Addon lock held. */
static void publish_marks(void)
{
    uint64_t ep = agent_epoch();
    for (int k = 0; k < ND; k++) {
        if (!drv[k])
            continue;
        int64_t wm = INT64_MAX;
        uint64_t hold = 0;
        for (int t = 0, n = threads_high(); t < n; t++) {
            if (!jt[t].feeds[k] || jt[t].epoch != ep)
                continue;
            if (jt[t].watermark < wm)
                wm = jt[t].watermark;
            if (jt[t].hold && (!hold || jt[t].hold < hold))
                hold = jt[t].hold;
        }
        pn_driver_watermark(drv[k], wm);
        pn_driver_hold(drv[k], hold);
    }
}

void join_reset(int counters)
{
    /* The drivers leave with the agent (detach_agent: it stops next): no
     * thread records into them any more, so the final cut must not wait
     * for the watermarks of threads still joined (a joined worker's would
     * hold it for the whole stop_timeout). */
    for (int k = 0; k < ND; k++)
        if (drv[k])
            pn_driver_watermark(drv[k], INT64_MAX);
    memset(drv, 0, sizeof drv);
    if (counters) {
        agent_start_ns = pn_clock_ns(CLOCK_MONOTONIC);
        joined = unjoined = duplicates = idle_skipped = profiles = late = start_samples =
            merge_drops = stale_profiles = 0;
    }
}

void join_release(int t)
{
    int fed = 0;
    for (int k = 0; k < ND; k++)
        fed |= jt[t].feeds[k];
    memset(&jt[t], 0, sizeof jt[t]);
    if (fed)
        publish_marks();
}

int join_feeder(int except)
{
    uint64_t ep = agent_epoch();
    for (int t = 0, n = threads_high(); t < n; t++)
        if (t != except && jt[t].epoch == ep && (jt[t].feeds[D_CPU] || jt[t].feeds[D_WALL]))
            return t;
    return -1;
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
    set_num(env, j, "staleProfiles", (double)stale_profiles);
    napi_set_named_property(env, o, "join", j);
    threads_counts(env, o);
}

/* joinStart(cpu, wall, collectCpuTime, intervalMicros): this thread's
 * profile feeds the cpu and/or wall drivers of the running agent from now
 * on (none: it feeds none); its label sets are held from now on. Call
 * before signalArm. */
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
    int t = env_thread(env);
    if (t < 0)
        return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: this thread has no entry (more than "
                         "%d JS threads)", THREADS_MAX);
    join_thread *j = &jt[t];
    addon_lock();
    int64_t interval = (int64_t)(us * 1000);
    int64_t period = (int64_t)(1e9 / agent_sample_rate() + 0.5);
    if (llabs(period - interval) > period / 100)
        period = interval; /* the driver's period is the interval used */
    else
        period = 0;
    uint64_t gen = pn_grace_generation();
    uint64_t ep = agent_epoch();
    int was[ND] = {j->epoch == ep && j->feeds[D_CPU], j->epoch == ep && j->feeds[D_WALL]};
    int want[ND] = {cpu, wall};
    pn_driver *now[ND] = {NULL, NULL};
    for (int k = 0; k < ND; k++) {
        if (want[k] && !(now[k] = agent_driver(env, k == D_CPU ? "cpu" : "wall",
                                               k == D_WALL && cc, period))) {
            addon_unlock();
            return NULL;
        }
    }
    j->interval_ns = interval;
    j->collect_cpu = cc;
    if (j->epoch != ep) {
        j->last_ns = 0;
        j->recent_n = 0;
    }
    j->epoch = ep;
    int64_t now_ns = pn_clock_ns(CLOCK_MONOTONIC);
    for (int k = 0; k < ND; k++) {
        if (now[k] && !was[k]) {
            /* (again) fed from now on: the profile running began a little
             * earlier, and its older samples are not this driver's (its
             * store may be newer than them: they would count as late) */
            j->since_ns[k] = now_ns;
        }
        j->feeds[k] = now[k] != NULL;
        if (now[k])
            drv[k] = now[k];
    }
    if (!was[D_CPU] && !was[D_WALL])
        j->watermark = now_ns;
    j->hold = gen;
    publish_marks();
    addon_unlock();
    return js_undefined(env);
}

/* joinCurrent() -> whether this thread feeds the running agent (false: it
 * stopped, or another start followed: joinStart again or stop). */
static napi_value m_current(napi_env env, napi_callback_info info)
{
    (void)info;
    int t = env_thread(env);
    addon_lock();
    int cur = t >= 0 && agent_current() && jt[t].epoch == agent_epoch() &&
              (jt[t].feeds[D_CPU] || jt[t].feeds[D_WALL]);
    addon_unlock();
    napi_value r;
    napi_get_boolean(env, cur, &r);
    return r;
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

static int seen(const join_thread *j, int64_t t)
{
    unsigned n = j->recent_n < RECENT ? j->recent_n : RECENT;
    for (unsigned i = 0; i < n; i++)
        if (j->recent[i] == t)
            return 1;
    return 0;
}

/* The bracket holding time t among [*cur, head) (sorted by time); *cur
 * moves past brackets that end before t. A sample older than *cur (V8
 * handed it over late) is searched from the ring's tail. */
static const bracket *find_bracket(int th, int64_t t, uint64_t *cur, uint64_t head)
{
    uint64_t i = *cur;
    if (i > signal_tail(th) && signal_at(th, i - 1)->after_ns + JOIN_SLACK_NS >= t)
        i = signal_tail(th);
    while (i < head && signal_at(th, i)->after_ns + JOIN_SLACK_NS < t)
        i++;
    if (i >= *cur)
        *cur = i;
    if (i < head && signal_at(th, i)->before_ns - JOIN_SLACK_NS <= t) {
        if (i == *cur)
            (*cur)++;
        return signal_at(th, i);
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
    int th = env_thread(env);
    napi_value r;
    if (th < 0) {
        napi_create_uint32(env, 0, &r);
        return r;
    }
    join_thread *j = &jt[th];
    addon_lock();
    pn_driver *d[ND] = {NULL, NULL};
    int any = 0;
    if (j->epoch == agent_epoch() && agent_current()) {
        for (int k = 0; k < ND; k++)
            if (j->feeds[k])
                d[k] = drv[k];
    } else if (j->feeds[D_CPU] || j->feeds[D_WALL]) {
        stale_profiles++; /* the agent it fed stopped: nothing to record into */
    }
    for (int k = 0; k < ND; k++) {
        if (!d[k])
            continue;
        if (frames_cache(env, &fc, k) != 0) {
            addon_unlock();
            frames_close(&fc);
            return NULL;
        }
        pn_record_begin(d[k]);
        any = 1;
    }
    profiles++;
    /* V8 samples this JS thread (report_thread_id / _name) */
    uint64_t tid = threads_tid(th);
    const char *tname = threads_name(th);
    /* one merge per distinct pair at most: no more pairs than samples */
    int cache_cap = nsamp < (size_t)INT32_MAX ? (int)nsamp : INT32_MAX;
    merge_ent *cache = any ? calloc(cache_cap > 0 ? (size_t)cache_cap : 1, sizeof *cache) : NULL;
    if (!cache)
        cache_cap = 0;
    int ncache = 0;
    uint64_t cur = signal_tail(th), head = signal_head(th);
    pn_frame_id stack[FRAMES_MAX_STACK];
    int32_t fidx[FRAMES_MAX_STACK];
    uint32_t recorded = 0;
    uint64_t joined_profile = 0, unjoined_profile = 0;
    int64_t interval_ns = j->interval_ns;
    for (size_t s = 0; any && s < nsamp; s++) {
        int64_t t = (int64_t)(stime[s] * 1000.0);
        if (t <= j->last_ns && seen(j, t)) {
            duplicates++;
            continue;
        }
        const bracket *b = find_bracket(th, t, &cur, head);
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
        if (t > j->last_ns)
            j->last_ns = t;
        j->recent[j->recent_n++ % RECENT] = t;
        size_t depth = frames_stack(&fc, snode[s], fidx, 0);
        if (depth == 0)
            continue;
        const pn_labelset *ls = fidx[0] == (int32_t)idle ? NULL : labels_for(b, cache, &ncache, cache_cap);
        for (int k = 0; k < ND; k++) {
            if (!d[k] || t < j->since_ns[k])
                continue;
            int64_t v[3] = {interval_ns, 1, 0};
            if (k == D_CPU) {
                /* a thread that barely ran since the last signal was
                 * idle: a CPU profile has no sample for it */
                if (b->cpu_ns < interval_ns / 50) {
                    idle_skipped++;
                    continue;
                }
                v[0] = b->cpu_ns;
            } else if (j->collect_cpu) {
                v[2] = b->cpu_ns;
            }
            pn_period *p = pn_record_period(d[k], t);
            if (!p) {
                late++;
                continue;
            }
            pn_symbols *sym = pn_period_symbols(p);
            for (size_t i = 0; i < depth; i++)
                stack[i] = frames_intern(env, &fc, k, sym, fidx[i]);
            pn_sample smp = {.frames = stack, .depth = depth, .labels = ls, .values = v,
                             .tid = tid, .thread_name = tname, .time_ns = t};
            pn_record(d[k], p, &smp);
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
     * after this lag), once every thread feeding them got that far. */
    int64_t end_ns = (int64_t)(end_us * 1000.0) - WATERMARK_LAG_NS;
    for (int k = 0; k < ND; k++)
        if (d[k])
            pn_record_end(d[k]);
    frames_close(&fc);
    for (int i = 0; i < ncache; i++)
        pn_labelset_unref(cache[i].merged);
    free(cache);
    /* Brackets before the watermark can match nothing later. */
    uint64_t keep = signal_tail(th);
    head = signal_head(th);
    while (keep < head && signal_at(th, keep)->after_ns + JOIN_SLACK_NS < end_ns)
        keep++;
    uint64_t g = signal_consume(th, keep);
    if (any) {
        if (end_ns > j->watermark)
            j->watermark = end_ns;
        j->hold = g ? g : pn_grace_generation();
        publish_marks();
    }
    addon_unlock();
    napi_create_uint32(env, recorded, &r);
    return r;
}

/* joinStop(): this thread's profile feeds no driver any more (they may
 * seal what it fed). */
static napi_value m_stop(napi_env env, napi_callback_info info)
{
    (void)info;
    int t = env_thread(env);
    if (t < 0)
        return js_undefined(env);
    addon_lock();
    signal_consume(t, signal_head(t));
    join_release(t);
    addon_unlock();
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
    set_fn(env, exports, "joinCurrent", m_current);
}
