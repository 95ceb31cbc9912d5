/* The agent: wires config, store, sampler, encoder and exporters together
 * and owns the flusher thread, which turns each period into uploads.
 *
 * Threads: the caller of start/flush/stop (an application thread), the
 * sampler thread, the flusher thread (swap + encode, every upload
 * interval), and the exporter thread inside pn_queue (network and disk).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "sampling/sampler.h"
#include "encoding/pprof.h"
#include "export/exporter.h"
#include "support/clock.h"
#include "support/threads.h"

struct pn_agent {
    /* Set at start, read-only afterwards (pid_value: rewritten in a forked
     * child before any thread that reads it exists). */
    pn_config cfg;
    pn_agent_hooks hooks;
    pn_store *store;
    pn_sampler *sampler;
    pn_queue *queue;
    pn_encode_opts enc;
    pn_label pid_label;
    char pid_value[24];
    const char *profile_type;

    /* The flusher thread and its requests, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t flusher;
    int flusher_running;
    int stopping;
    uint64_t flush_req, flush_done;

    /* Written by whichever thread flushes a period (the flusher, or the
     * stopping thread once the flusher has been joined). */
    _Atomic uint64_t periods, profiles, dropped, encode_errors;
};

/* The running agent, for the fork handlers. Set by start, cleared by stop. */
static _Atomic(pn_agent *) current;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

typedef struct {
    pn_agent *a;
    int64_t from_s, until_s;
    uint32_t part;
} period_sink;

static int queue_profile(void *ud, const uint8_t *gz, size_t len, size_t nsamples)
{
    (void)nsamples;
    period_sink *ps = ud;
    pn_upload *u = calloc(1, sizeof *u);
    if (!u)
        return -1;
    u->app_name = strdup(ps->a->cfg.application_name);
    u->profile_type = strdup(ps->a->profile_type);
    u->data = malloc(len ? len : 1);
    if (!u->app_name || !u->profile_type || !u->data) {
        pn_upload_free(u);
        return -1;
    }
    memcpy(u->data, gz, len);
    u->len = len;
    u->from_s = ps->from_s;
    u->until_s = ps->until_s;
    u->sample_rate = (uint32_t)lround(ps->a->cfg.sample_rate);
    u->part = ps->part++;
    pn_queue_push(ps->a->queue, u);
    atomic_fetch_add(&ps->a->profiles, 1);
    return 0;
}

/* Swap the active period out, encode it, queue the profiles. */
static void flush_period(pn_agent *a)
{
    pn_period *p = pn_store_swap(a->store, pn_clock_ns(CLOCK_REALTIME));
    pn_period_stats st;
    pn_period_get_stats(p, &st);
    uint64_t lost = st.overflow_samples + st.symbols_dropped;
    if (lost) {
        atomic_fetch_add(&a->dropped, lost);
        pn_log(PN_LOG_WARN, "period held more distinct stacks or symbols than the limits "
               "(max_stacks %u): %llu samples were folded into [overflow]/[unknown]",
               a->cfg.max_stacks, (unsigned long long)lost);
    }
    /* Rounded, so back-to-back periods of a second or more do not overlap. */
    period_sink ps = {a, (pn_period_start_ns(p) + 500000000) / 1000000000, 0, 0};
    ps.until_s = (pn_period_end_ns(p) + 500000000) / 1000000000;
    if (ps.until_s <= ps.from_s)
        ps.until_s = ps.from_s + 1;
    pn_error e;
    if (pn_pprof_encode(p, &a->enc, queue_profile, &ps, &e) < 0) {
        atomic_fetch_add(&a->encode_errors, 1);
        pn_log(PN_LOG_ERROR, "encoding a profile failed, period dropped: %s", e.msg);
    }
    uint64_t live = pn_period_seq(p) + 1;
    pn_store_recycle(a->store, p);
    pn_labels_collect(live);
    atomic_fetch_add(&a->periods, 1);
}

static void *flusher_main(void *arg)
{
    pn_agent *a = arg;
    int64_t interval = (int64_t)(a->cfg.upload_interval * 1e9);
    int64_t next = pn_clock_ns(CLOCK_MONOTONIC) + interval;
    pthread_mutex_lock(&a->mu);
    while (!a->stopping) {
        uint64_t req = a->flush_req;
        if (req == a->flush_done && pn_clock_ns(CLOCK_MONOTONIC) < next) {
            struct timespec ts = pn_timespec(next);
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        flush_period(a);
        pthread_mutex_lock(&a->mu);
        a->flush_done = req;
        pthread_cond_broadcast(&a->cv);
        /* Keep the schedule on its grid, skipping slots we overran. */
        int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
        while (next <= now)
            next += interval;
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static int init_sync(pn_agent *a)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&a->mu, NULL) || pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc ? -1 : 0;
}

static int start_flusher(pn_agent *a, pn_error *e)
{
    int rc = pn_thread_spawn(&a->flusher, flusher_main, a, "pyroscope-flush");
    if (rc != 0)
        return pn_fail(e, PN_ENOMEM, "cannot start the flusher thread: %s", strerror(rc));
    a->flusher_running = 1;
    return 0;
}

/* -------------------------------------------------------------- fork */

static void fork_prepare(void)
{
    pn_agent *a = atomic_load(&current);
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    pn_queue_fork_prepare(a->queue);
    pn_sampler_fork_prepare(a->sampler);
}

static void fork_parent(void)
{
    pn_agent *a = atomic_load(&current);
    if (!a)
        return;
    pn_sampler_fork_parent(a->sampler);
    pn_queue_fork_parent(a->queue);
    pthread_mutex_unlock(&a->mu);
}

static void fork_child(void)
{
    pn_agent *a = atomic_load(&current);
    if (!a)
        return;
    /* Only this thread survived. Our mutex is held by us; make it and the
     * condvar fresh rather than trust their inherited state. */
    init_sync(a);
    a->stopping = 0;
    a->flush_req = a->flush_done = 0;
    a->flusher_running = 0;
    snprintf(a->pid_value, sizeof a->pid_value, "%d", (int)getpid());
    /* A child's series must not merge with its parent's: label it with its
     * pid even when report_pid is off. */
    a->enc.extra_labels = &a->pid_label;
    a->enc.n_extra = 1;
    atomic_store(&a->periods, 0);
    atomic_store(&a->profiles, 0);
    if (a->hooks.after_fork_child)
        a->hooks.after_fork_child(a->hooks.walker_ctx);
    pn_queue_fork_child(a->queue);
    pn_sampler_fork_child(a->sampler); /* fresh store, new thread */
    if (start_flusher(a, NULL) != 0)
        pn_log(PN_LOG_ERROR, "after fork: cannot restart the flusher; profiles of this "
               "process will not be exported");
}

static void register_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* ------------------------------------------------------------- public */

static void agent_free(pn_agent *a)
{
    if (!a)
        return;
    pn_sampler_free(a->sampler);
    if (a->queue)
        pn_queue_stop(a->queue, 0);
    pn_store_free(a->store);
    pn_config_free(&a->cfg);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

static int make_exporters(pn_agent *a, pn_exporter **ex, size_t *n, pn_error *e)
{
    const pn_config *c = &a->cfg;
    *n = 0;
    if (c->server_address && c->server_address[0]) {
        pn_http_opts ho;
        memset(&ho, 0, sizeof ho);
        ho.server_address = c->server_address;
        ho.app_name = c->application_name;
        ho.tags = c->tags;
        ho.ntags = c->ntags;
        ho.spy_name = c->spy_name && c->spy_name[0] ? c->spy_name : "pyroscope-native";
        ho.basic_auth_user = c->basic_auth_username;
        ho.basic_auth_password = c->basic_auth_password;
        ho.tenant_id = c->tenant_id;
        ho.headers = c->http_headers;
        ho.nheaders = c->nheaders;
        if (!(ex[(*n)++] = pn_http_exporter_new(&ho, e)))
            return (*n)--, -1;
    }
    if (c->output_dir && c->output_dir[0]) {
        if (!(ex[(*n)++] = pn_folder_exporter_new(c->output_dir, e)))
            return (*n)--, -1;
    }
    return 0;
}

pn_agent *pn_agent_start(const pn_config *c, const pn_agent_hooks *h, pn_error *e)
{
    if (!h || !h->walker)
        return pn_fail(e, PN_EINVAL, "agent needs a walker"), NULL;
    if (pn_config_validate(c, e) != 0)
        return NULL;
    pn_agent *expected = NULL;
    pn_agent *a = calloc(1, sizeof *a);
    if (!a)
        return pn_fail(e, PN_ENOMEM, "out of memory starting the agent"), NULL;
    if (!atomic_compare_exchange_strong(&current, &expected, a)) {
        free(a);
        return pn_fail(e, PN_ESTATE, "a profiler is already running in this process; stop it "
                       "first"), NULL;
    }
    if (init_sync(a) != 0 || pn_config_copy(&a->cfg, c, e) != 0) {
        atomic_store(&current, NULL);
        free(a);
        return pn_fail(e, PN_ENOMEM, "out of memory starting the agent"), NULL;
    }
    a->hooks = *h;
    pn_log_set_level(c->log_level);

    pn_store_limits lim;
    pn_store_limits_default(&lim);
    lim.max_stacks = c->max_stacks;
    lim.max_depth = c->max_depth;
    lim.nvalues = 2;
    pn_sampler_opts so = {c->sample_rate, c->oncpu, c->report_thread_id, c->report_thread_name,
                          c->fault_guard};

    pn_encode_opts_default(&a->enc);
    a->profile_type = c->oncpu ? "cpu" : "wall";
    a->enc.sample_types[0] = (pn_value_type){a->profile_type, "nanoseconds"};
    a->enc.sample_types[1] = (pn_value_type){"samples", "count"};
    a->enc.period_type = a->enc.sample_types[0];
    a->enc.period = (int64_t)llround(1e9 / c->sample_rate);
    snprintf(a->pid_value, sizeof a->pid_value, "%d", (int)getpid());
    a->pid_label = (pn_label){"pid", a->pid_value};
    a->enc.extra_labels = c->report_pid ? &a->pid_label : NULL;
    a->enc.n_extra = c->report_pid ? 1 : 0;

    pn_exporter *ex[2];
    size_t nex = 0;
    pn_queue_opts qo;
    memset(&qo, 0, sizeof qo);
    if (!(a->store = pn_store_new(&lim, e)) ||
        !(a->sampler = pn_sampler_new(a->store, &so, h->walker, h->walker_ctx, e)) ||
        make_exporters(a, ex, &nex, e) != 0 ||
        !(a->queue = pn_queue_new(&qo, ex, nex, e))) {
        for (size_t i = 0; a->queue == NULL && i < nex; i++)
            ex[i]->destroy(ex[i]);
        agent_free(a);
        atomic_store(&current, NULL);
        return NULL;
    }
    pthread_once(&atfork_once, register_atfork);
    if (pn_sampler_start(a->sampler, e) != 0 || start_flusher(a, e) != 0) {
        agent_free(a);
        atomic_store(&current, NULL);
        return NULL;
    }
    pn_log(PN_LOG_INFO, "profiling \"%s\" at %g Hz (%s), exporting every %g s to %s%s%s",
           c->application_name, c->sample_rate, a->profile_type, c->upload_interval,
           c->server_address ? c->server_address : "",
           c->server_address && c->output_dir ? " and " : "", c->output_dir ? c->output_dir : "");
    return a;
}

int pn_agent_flush(pn_agent *a, double timeout_s, pn_error *e)
{
    int64_t deadline = pn_clock_ns(CLOCK_MONOTONIC) + (int64_t)(timeout_s * 1e9);
    pthread_mutex_lock(&a->mu);
    uint64_t want = ++a->flush_req;
    pthread_cond_broadcast(&a->cv);
    int timed_out = 0;
    while (a->flush_done < want && a->flusher_running && !timed_out) {
        struct timespec ts = pn_timespec(deadline);
        timed_out = pthread_cond_timedwait(&a->cv, &a->mu, &ts) != 0 &&
                    pn_clock_ns(CLOCK_MONOTONIC) >= deadline;
    }
    pthread_mutex_unlock(&a->mu);
    if (timed_out)
        return pn_fail(e, PN_ELIMIT, "flush: the period was not encoded within %g s", timeout_s);
    double left = (deadline - pn_clock_ns(CLOCK_MONOTONIC)) / 1e9;
    if (pn_queue_flush(a->queue, left > 0 ? left : 0) != 0)
        return pn_fail(e, PN_ELIMIT, "flush: uploads still pending after %g s", timeout_s);
    return 0;
}

void pn_agent_stop(pn_agent *a) { pn_agent_stop_stats(a, NULL); }

void pn_agent_stop_stats(pn_agent *a, pn_agent_stats *final)
{
    if (!a)
        return;
    int64_t deadline = pn_clock_ns(CLOCK_MONOTONIC) + (int64_t)(a->cfg.stop_timeout * 1e9);
    pn_sampler_stop(a->sampler);
    pthread_mutex_lock(&a->mu);
    a->stopping = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->flusher_running)
        pthread_join(a->flusher, NULL);
    a->flusher_running = 0;
    flush_period(a); /* the final, partial period */
    double left = (deadline - pn_clock_ns(CLOCK_MONOTONIC)) / 1e9;
    pn_queue_stats qs;
    pn_queue_stop_stats(a->queue, left > 0 ? left : 0, &qs);
    a->queue = NULL;
    if (final) {
        pn_agent_get_stats(a, final);
        final->queue = qs;
    }
    atomic_store(&current, NULL);
    agent_free(a);
}

void pn_agent_get_stats(pn_agent *a, pn_agent_stats *out)
{
    memset(out, 0, sizeof *out);
    pn_sampler_get_stats(a->sampler, &out->sampler);
    if (a->queue)
        pn_queue_get_stats(a->queue, &out->queue);
    out->periods = atomic_load(&a->periods);
    out->profiles_encoded = atomic_load(&a->profiles);
    out->samples_dropped = atomic_load(&a->dropped);
    out->encode_errors = atomic_load(&a->encode_errors);
}

const pn_config *pn_agent_config(const pn_agent *a) { return &a->cfg; }
