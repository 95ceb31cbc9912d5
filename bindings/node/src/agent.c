/* The agent: settings -> pn_config, start, flush, stop, stats, and the
 * batch drivers the V8 profiles are recorded through.
 *
 * The thread that started it (the main thread, or a worker when none other
 * did) owns `agent`: only it stops it; a worker that owns it and stops or
 * ends while other threads profile into it hands it to one of them
 * (hand_over). Workers' joins make and read `drivers` and read `agent`, so
 * both, and `owner`, change under the addon lock. Flush
 * and stop run the blocking
 * core call on a libuv pool thread (napi async work), holding the agent
 * with pn_agent_hold so a concurrent stop cannot free it under a flush. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addon.h"

enum { DRV_CPU, DRV_WALL, DRV_HEAP, NDRV };
static const char *const drv_names[NDRV] = {"cpu", "wall", "heap"};

static pn_agent *agent;
static pn_driver *drivers[NDRV];
static double sample_rate = 100;
static uint64_t epoch;  /* agent starts (addon lock) */
static int owner = -1;  /* the thread entry that started `agent` (addon lock) */

pn_agent *agent_current(void) { return agent; }
uint64_t agent_epoch(void) { return epoch; }

/* ------------------------------------------------------------ settings */

static int apply_env(napi_env env, pn_config *c, napi_value envobj)
{
    napi_value keys;
    uint32_t n;
    int has = js_keys(env, envobj, "env", &keys, &n);
    if (has < 0)
        return -1;
    char **envp = calloc((size_t)n + 1, sizeof *envp);
    int rc = -1;
    if (!envp) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return -1;
    }
    uint32_t m = 0;
    for (uint32_t i = 0; has == 0 && i < n; i++) {
        napi_value k, v;
        napi_get_element(env, keys, i, &k);
        napi_get_property(env, envobj, k, &v);
        char *ks = js_string(env, k, "env: names must be strings");
        if (!ks)
            goto out;
        napi_valuetype vt;
        napi_typeof(env, v, &vt);
        if (vt == napi_undefined) {
            free(ks);
            continue;
        }
        char what[300];
        snprintf(what, sizeof what, "env %.200s: the value must be a string", ks);
        char *vs = js_string(env, v, what);
        if (!vs) {
            free(ks);
            goto out;
        }
        size_t len = strlen(ks) + strlen(vs) + 2;
        envp[m] = malloc(len);
        if (envp[m])
            snprintf(envp[m++], len, "%s=%s", ks, vs);
        free(ks);
        free(vs);
    }
    pn_error e = {0};
    if (pn_config_resolve(c, envp, &e) != 0) {
        throw_pn(env, &e);
        goto out;
    }
    rc = 0;
out:
    for (uint32_t i = 0; i < m; i++)
        free(envp[i]);
    free(envp);
    return rc;
}

/* settings object (keywords) + env object -> a validated config (thrown
 * otherwise): keywords, this binding's defaults, then the core's contract
 * (variables under its precedence rule, the default destination). */
static int build_config(napi_env env, pn_config *c, napi_value settings, napi_value envobj)
{
    pn_error e = {0};
    pn_config_init(c);
    napi_value keys;
    uint32_t n;
    if (js_keys(env, settings, "settings", &keys, &n) < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        napi_value k, v;
        napi_get_element(env, keys, i, &k);
        napi_get_property(env, settings, k, &v);
        char *name = js_string(env, k, "settings: names must be strings");
        if (!name)
            return -1;
        napi_valuetype vt;
        napi_typeof(env, v, &vt);
        /* undefined: not given (the anchor's reading) */
        int rc = vt == napi_undefined ? 0 : config_set_js(env, c, name, v);
        free(name);
        if (rc != 0)
            return -1;
    }
    const napi_node_version *nv = NULL;
    char version[48] = "";
    if (napi_get_node_version(env, &nv) == napi_ok && nv)
        snprintf(version, sizeof version, "%u.%u.%u", nv->major, nv->minor, nv->patch);
    /* thread_name tells the main thread's samples ("main") from each
     * worker's (README: Worker threads) */
    if (pn_config_set_default(c, "spy_name", "nodespy", &e) != 0 ||
        pn_config_set_default(c, "report_thread_name", "true", &e) != 0 ||
        /* the heap profile runs unless memory is false (@pyroscope/nodejs's start()) */
        pn_config_set_default(c, "memory", "true", &e) != 0 ||
        pn_config_set_default(c, "runtime_name", "nodejs", &e) != 0 ||
        (version[0] && pn_config_set_default(c, "runtime_version", version, &e) != 0)) {
        throw_pn(env, &e);
        return -1;
    }
    return apply_env(env, c, envobj);
}

/* resolveSettings(settings, env): {name: string form} of the config start()
 * would use, without starting (tests, diagnostics). */
static napi_value m_resolve_settings(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    js_args(env, info, argv, 2);
    pn_config c;
    napi_value out = NULL;
    if (build_config(env, &c, argv[0], argv[1]) == 0) {
        napi_create_object(env, &out);
        char buf[4096];
        const pn_setting_info *s;
        for (size_t i = 0; (s = pn_config_setting(i)); i++) {
            napi_value v;
            if (pn_config_get(&c, s->name, buf, sizeof buf) != 0)
                continue;
            napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &v);
            napi_set_named_property(env, out, s->name, v);
        }
    }
    pn_config_free(&c);
    return out;
}

/* statsTable() -> [[name, meaning], ...]: the core's counters (snake_case). */
static napi_value m_stats_table(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value arr, pair, v;
    napi_create_array(env, &arr);
    const pn_stat_info *row;
    for (uint32_t i = 0; (row = pn_stat_row(i)); i++) {
        napi_create_array_with_length(env, 2, &pair);
        napi_create_string_utf8(env, row->name, NAPI_AUTO_LENGTH, &v);
        napi_set_element(env, pair, 0, v);
        napi_create_string_utf8(env, row->meaning, NAPI_AUTO_LENGTH, &v);
        napi_set_element(env, pair, 1, v);
        napi_set_element(env, arr, i, pair);
    }
    return arr;
}

/* The core's settings table: one object per row (pn_setting_info). */
static napi_value m_setting_table(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value arr;
    napi_create_array(env, &arr);
    const pn_setting_info *s;
    for (uint32_t i = 0; (s = pn_config_setting(i)); i++) {
        napi_value row, v;
        napi_create_object(env, &row);
        const char *strs[][2] = {
            {"name", s->name}, {"kind", s->kind_name}, {"default", s->default_value},
            {"unit", s->unit}, {"spellings", s->spellings}, {"env", s->env},
            {"envAliases", s->env_aliases}, {"otelEnv", s->otel_env}, {"python", s->python},
            {"node", s->node}, {"ruby", s->ruby}, {"meaning", s->meaning},
            {"aliasOf", s->alias_of},
        };
        for (size_t j = 0; j < sizeof strs / sizeof strs[0]; j++) {
            if (strs[j][1])
                napi_create_string_utf8(env, strs[j][1], NAPI_AUTO_LENGTH, &v);
            else
                napi_get_null(env, &v);
            napi_set_named_property(env, row, strs[j][0], v);
        }
        napi_create_double(env, s->lo, &v);
        napi_set_named_property(env, row, "lo", v);
        napi_create_double(env, s->hi, &v);
        napi_set_named_property(env, row, "hi", v);
        const struct {
            const char *key;
            unsigned flag;
        } flags[] = {{"secret", PN_SETTING_SECRET}, {"binding", PN_SETTING_BINDING},
                     {"external", PN_SETTING_EXTERNAL}};
        for (size_t j = 0; j < 3; j++) {
            napi_get_boolean(env, (s->flags & flags[j].flag) != 0, &v);
            napi_set_named_property(env, row, flags[j].key, v);
        }
        napi_set_element(env, arr, i, row);
    }
    return arr;
}

static napi_value m_check_settings(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    js_args(env, info, argv, 2);
    pn_config c;
    int rc = build_config(env, &c, argv[0], argv[1]);
    pn_config_free(&c);
    return rc == 0 ? js_undefined(env) : NULL;
}

/* start() calls run one at a time: finding no agent and starting one is one
 * step, so two threads starting at once never both start (the second joins). */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

static napi_value start_locked(napi_env env, napi_value settings, napi_value envobj)
{
    napi_value role;
    addon_lock();
    int running = agent != NULL;
    addon_unlock();
    if (running) {
        napi_create_string_utf8(env, "joined", NAPI_AUTO_LENGTH, &role);
        return role;
    }
    pn_config c;
    if (build_config(env, &c, settings, envobj) != 0) {
        pn_config_free(&c);
        return NULL;
    }
    pn_log_set_level(c.log_level);
    sender_apply();
    pn_error e = {0};
    pn_agent *a = pn_agent_start(&c, &e);
    pn_config_free(&c);
    if (!a)
        return throw_pn(env, &e);
    addon_lock();
    agent = a;
    owner = env_thread(env);
    sample_rate = pn_agent_config(a)->sample_rate;
    epoch++;
    memset(drivers, 0, sizeof drivers);
    join_reset(1);
    addon_unlock();
    napi_create_string_utf8(env, "owner", NAPI_AUTO_LENGTH, &role);
    return role;
}

/* start(settings, env) -> "owner": this thread started the agent; "joined":
 * one runs already (another thread's, or this one's): nothing started. */
static napi_value m_start(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    js_args(env, info, argv, 2);
    pthread_mutex_lock(&start_mu);
    napi_value r = start_locked(env, argv[0], argv[1]);
    pthread_mutex_unlock(&start_mu);
    return r;
}

/* variant: wall: with a cpu value per sample; heap: allocations (Node 26's
 * v8.startHeapProfile windows) instead of the in-use snapshot. */
pn_driver *agent_driver(napi_env env, const char *kind, int variant, int64_t period)
{
    if (!agent) {
        throw_msg(env, "ERR_PYROSCOPE_STATE", "pyroscope: not started");
        return NULL;
    }
    int k;
    for (k = 0; k < NDRV && strcmp(drv_names[k], kind) != 0; k++)
        ;
    if (k == NDRV) {
        throw_msg(env, "ERR_INVALID_ARG_VALUE", "profiler kind \"%.50s\" is not cpu, wall or heap",
                  kind);
        return NULL;
    }
    if (drivers[k])
        return drivers[k];
    /* The V8 profile restarts once per period, shortly after the core's
     * cut, and at most 10 s apart in longer periods (sampler.js), from a
     * JS timer: its samples reach the store then, or later when the
     * application blocks the event loop. A cut period waits up to 15 s
     * for them before it is sealed without them (stop does not wait: it
     * says no more samples will come). */
    pn_driver_opts o = {.kind = PN_DRIVER_BATCH, .profile_type = drv_names[k],
                        .max_delay_ns = 15000000000LL, .period = period > 0 ? period : 0};
    if (k == DRV_WALL && variant) {
        o.nvalues = 3;
        o.sample_types[0] = (pn_value_type){"wall", "nanoseconds"};
        o.sample_types[1] = (pn_value_type){"samples", "count"};
        o.sample_types[2] = (pn_value_type){"cpu", "nanoseconds"};
    } else if (k == DRV_HEAP) {
        /* In-use memory as Node's heap profilers report it (sampled live
         * allocations), or the allocations sampled in the period: objects
         * and bytes, period = the sampling interval. Go's names: Pyroscope
         * shows them under memory. */
        o.nvalues = 2;
        o.sample_types[0] = (pn_value_type){variant ? "alloc_objects" : "inuse_objects", "count"};
        o.sample_types[1] = (pn_value_type){variant ? "alloc_space" : "inuse_space", "bytes"};
        o.period_type = (pn_value_type){"space", "bytes"};
        o.period = period > 0 ? period : 512 * 1024;
    }
    pn_error e = {0};
    drivers[k] = pn_agent_add_driver(agent, &o, &e);
    if (!drivers[k])
        throw_pn(env, &e);
    return drivers[k];
}

double agent_sample_rate(void) { return sample_rate; }

/* ------------------------------------------------- flush / stop (async) */

typedef struct {
    napi_async_work work;
    napi_deferred deferred;
    pn_agent *a;
    int stop;
    double timeout;
    int rc;
    uint64_t lost_before; /* uploads failed or dropped when the flush began */
    pn_agent_stats st;
} job;

/* Stops running on pool threads (stop()), for waitStops at exit. */
static pthread_mutex_t stops_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stops_cv = PTHREAD_COND_INITIALIZER;
static int stops_running;

static void job_execute(napi_env env, void *data)
{
    (void)env;
    job *j = data;
    if (j->stop) {
        pn_agent_stop_stats(j->a, &j->st);
        j->rc = 0;
        pthread_mutex_lock(&stops_mu);
        stops_running--;
        pthread_cond_broadcast(&stops_cv);
        pthread_mutex_unlock(&stops_mu);
    } else {
        pn_error e = {0};
        j->rc = pn_agent_flush(j->a, j->timeout, &e);
        pn_agent_get_stats(j->a, &j->st);
        pn_agent_release(j->a);
    }
}

/* The core's counters (its table), named in camelCase. */
static napi_value stats_object(napi_env env, const pn_agent_stats *st)
{
    napi_value o;
    napi_create_object(env, &o);
    const pn_stat_info *row;
    char key[64];
    for (size_t i = 0; (row = pn_stat_row(i)); i++) {
        size_t k = 0;
        for (const char *p = row->name; *p && k + 1 < sizeof key; p++)
            key[k++] = (p[0] == '_' && p[1]) ? (char)toupper((unsigned char)*++p) : *p;
        key[k] = '\0';
        set_num(env, o, key, pn_stat_value(st, i));
    }
    return o;
}

/* The counters of the last stop, which stats() reads once no agent runs
 * (as Python's and Ruby's do): uploadsOk right after stop() says whether
 * the last period went out. Main thread. */
static pn_agent_stats last_stats;

static void job_complete(napi_env env, napi_status status, void *data)
{
    (void)status;
    job *j = data;
    napi_value v;
    if (j->stop) {
        last_stats = j->st;
        v = stats_object(env, &j->st);
        join_counts(env, v);
    } else {
        uint64_t lost = j->st.queue.uploads_failed + j->st.queue.uploads_dropped;
        napi_get_boolean(env, j->rc == 0 && lost == j->lost_before, &v);
    }
    napi_resolve_deferred(env, j->deferred, v);
    napi_delete_async_work(env, j->work);
    free(j);
}

static napi_value queue_job(napi_env env, pn_agent *a, int stop, double timeout,
                            uint64_t lost_before)
{
    napi_value promise, name;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return NULL;
    }
    j->a = a;
    j->stop = stop;
    j->timeout = timeout;
    j->lost_before = lost_before;
    if (stop) {
        pthread_mutex_lock(&stops_mu);
        stops_running++;
        pthread_mutex_unlock(&stops_mu);
    }
    napi_create_promise(env, &j->deferred, &promise);
    napi_create_string_utf8(env, stop ? "pyroscope-stop" : "pyroscope-flush", NAPI_AUTO_LENGTH,
                            &name);
    napi_create_async_work(env, NULL, name, job_execute, job_complete, j, &j->work);
    napi_queue_async_work(env, j->work);
    return promise;
}

/* flush(timeoutSeconds) -> Promise<boolean> */
static napi_value m_flush(napi_env env, napi_callback_info info)
{
    napi_value argv[1];
    size_t argc = js_args(env, info, argv, 1);
    double timeout = 5;
    if (argc >= 1) {
        napi_valuetype t;
        napi_typeof(env, argv[0], &t);
        if (t != napi_undefined && (js_double(env, argv[0], &timeout) != 0 || !isfinite(timeout) ||
                                    timeout < 0))
            return throw_msg(env, "ERR_INVALID_ARG_VALUE",
                             "flush: timeout must be a finite number of seconds >= 0");
    }
    if (!agent) {
        napi_value f;
        napi_get_boolean(env, false, &f);
        return js_resolved(env, f);
    }
    addon_lock();
    pn_agent *a = agent;
    pn_agent_stats before;
    if (a) {
        pn_agent_get_stats(a, &before);
        pn_agent_hold(a);
    }
    addon_unlock();
    if (!a) {
        napi_value f;
        napi_get_boolean(env, false, &f);
        return js_resolved(env, f);
    }
    return queue_job(env, a, 0, timeout,
                     before.queue.uploads_failed + before.queue.uploads_dropped);
}

/* The agent leaves the addon's state (its drivers with it); the caller
 * stops it. */
static pn_agent *detach_agent(void)
{
    addon_lock();
    pn_agent *a = agent;
    agent = NULL;
    memset(drivers, 0, sizeof drivers);
    join_reset(0);
    heap_reset();
    addon_unlock();
    return a;
}

/* stop() -> Promise<stats>: the stop begins now (a new start may follow at
 * once); the final flush and the threads' end run off the main thread. */
static napi_value m_stop(napi_env env, napi_callback_info info)
{
    (void)info;
    if (!agent) {
        napi_value o;
        napi_get_null(env, &o);
        return js_resolved(env, o);
    }
    pn_agent *a = detach_agent();
    pn_agent_stop_begin(a);
    return queue_job(env, a, 1, 0, 0);
}

/* stopSync(): for process 'exit', where nothing asynchronous runs any more. */
static napi_value m_stop_sync(napi_env env, napi_callback_info info)
{
    (void)info;
    if (!agent)
        return js_undefined(env);
    pn_agent *a = detach_agent();
    sender_block(1);    /* this thread waits here: uploads go through libcurl */
    pn_agent_stats st;
    pn_agent_stop_stats(a, &st);
    last_stats = st;
    napi_value o = stats_object(env, &st);
    join_counts(env, o);
    return o;
}

/* config() -> the running agent's effective timing settings, or null. */
static napi_value m_config(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value o;
    if (!agent) {
        napi_get_null(env, &o);
        return o;
    }
    addon_lock();
    if (!agent) {
        addon_unlock();
        napi_get_null(env, &o);
        return o;
    }
    pn_config c = *pn_agent_config(agent);
    addon_unlock();
    napi_create_object(env, &o);
    set_num(env, o, "sampleRate", c.sample_rate);
    set_num(env, o, "uploadInterval", c.upload_interval);
    set_num(env, o, "stopTimeout", c.stop_timeout);
    set_num(env, o, "maxDepth", c.max_depth);
    return o;
}

/* Thread `from` owns the agent and ends its profiling (its stop(), its
 * exit, its environment's end): when another thread still profiles into
 * the agent, that one owns it from now on and nothing stops (1). The main
 * thread's never passes on: its stop() and its exit end the process's
 * profiling. Called on thread `from`; addon lock held. */
static int hand_over(int from)
{
    static int logged;
    if (!agent || owner != from || on_main_thread())
        return 0;
    int to = join_feeder(from);
    if (to < 0)
        return 0;
    owner = to;
    heap_reset(); /* the heap profile was the old owner's */
    if (!logged) {
        logged = 1;
        pn_log(PN_LOG_WARN, "the worker that started the profiler stopped or ended; the "
               "profiler goes on for the threads still profiling, started and stopped now by "
               "thread %s (its heap profile, if asked for, from its next period)",
               threads_name(to)[0] ? threads_name(to) : "(unnamed)");
    }
    return 1;
}

void agent_thread_gone(int t)
{
    addon_lock();
    int mine = agent && owner == t && !hand_over(t);
    pn_agent *a = mine ? detach_agent() : NULL;
    addon_unlock();
    if (!a)
        return;
    sender_block(1);
    pn_agent_stats st;
    pn_agent_stop_stats(a, &st);
    addon_lock();
    last_stats = st;
    addon_unlock();
}

/* handOver() -> true when this thread owned the agent and another thread
 * still profiling into it owns it now: the caller's stop ends only its own
 * profiling (its profilers stopped first). */
static napi_value m_hand_over(napi_env env, napi_callback_info info)
{
    (void)info;
    addon_lock();
    int done = hand_over(env_thread(env));
    addon_unlock();
    napi_value b;
    napi_get_boolean(env, done, &b);
    return b;
}

/* agentOwned() -> whether this thread started the running agent (it stops
 * it; others only stop their own profiling). */
static napi_value m_owned(napi_env env, napi_callback_info info)
{
    (void)info;
    addon_lock();
    int mine = agent && owner == env_thread(env);
    addon_unlock();
    napi_value b;
    napi_get_boolean(env, mine, &b);
    return b;
}

static napi_value m_running(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value b;
    napi_get_boolean(env, agent != NULL, &b);
    return b;
}

static void driver_stats(napi_env env, napi_value o, int k)
{
    if (!drivers[k])
        return;
    pn_driver_stats ds;
    pn_driver_get_stats(drivers[k], &ds);
    napi_value d;
    napi_create_object(env, &d);
    set_num(env, d, "recorded", (double)ds.recorded);
    set_num(env, d, "late", (double)ds.late);
    napi_set_named_property(env, o, drv_names[k], d);
}

/* waitStops(seconds): block until every stop begun by stop() is done (at
 * most `seconds`): process 'exit' cannot wait for a promise, and a stop cut
 * short there would lose the last period. -> true when none is left. */
static napi_value m_wait_stops(napi_env env, napi_callback_info info)
{
    napi_value argv[1], r;
    js_args(env, info, argv, 1);
    double secs = 5;
    js_double(env, argv[0], &secs);
    if (!(secs >= 0))
        secs = 0;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)secs;
    until.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    sender_block(1);    /* this thread waits here: uploads go through libcurl */
    pthread_mutex_lock(&stops_mu);
    while (stops_running > 0 && pthread_cond_timedwait(&stops_cv, &stops_mu, &until) == 0)
        ;
    int left = stops_running;
    pthread_mutex_unlock(&stops_mu);
    napi_get_boolean(env, left == 0, &r);
    return r;
}

static napi_value m_stats(napi_env env, napi_callback_info info)
{
    (void)info;
    addon_lock();
    pn_agent_stats st = last_stats;
    if (agent)
        pn_agent_get_stats(agent, &st);
    napi_value o = stats_object(env, &st);
    napi_value drv;
    napi_create_object(env, &drv);
    for (int k = 0; k < NDRV; k++)
        driver_stats(env, drv, k);
    napi_set_named_property(env, o, "drivers", drv);
    join_counts(env, o);
    addon_unlock();
    heap_counts(env, o);
    return o;
}

void agent_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "settingTable", m_setting_table);
    set_fn(env, exports, "resolveSettings", m_resolve_settings);
    set_fn(env, exports, "statsTable", m_stats_table);
    set_fn(env, exports, "checkSettings", m_check_settings);
    set_fn(env, exports, "start", m_start);
    set_fn(env, exports, "flush", m_flush);
    set_fn(env, exports, "stop", m_stop);
    set_fn(env, exports, "stopSync", m_stop_sync);
    set_fn(env, exports, "running", m_running);
    set_fn(env, exports, "agentOwned", m_owned);
    set_fn(env, exports, "handOver", m_hand_over);
    set_fn(env, exports, "config", m_config);
    set_fn(env, exports, "stats", m_stats);
    set_fn(env, exports, "waitStops", m_wait_stops);
}
