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
#include "pipeline/memory.h"
#include "sampling/sampler.h"
#include "encoding/pprof.h"
#include "export/exporter.h"
#include "export/series_tags.h"
#include "pipeline/driver.h"
#include "pipeline/fork.h"
#include "aggregation/profile.h"
#include "support/url.h"

#define MAX_DRIVERS 8

struct pn_agent {
    /* Set at start, read-only afterwards (pid_value: rewritten in a forked
     * child before any thread that reads it exists). */
    pn_config cfg;
    pn_label pid_label;
    char pid_value[24];
    /* pid, then the static tags when profiles go to a folder (an upload
     * carries them in its URL instead; a file has only its labels). */
    pn_label *extra;
    size_t nextra_tags;
    int child_of_fork;          /* label profiles with the pid even without report_pid */
    pn_queue *queue;

    /* Drivers: added by control threads under mu; the flusher reads the
     * array under mu too. Freed at stop, after every thread is joined. */
    pn_driver *drivers[MAX_DRIVERS];
    int ndrivers;

    /* The flusher thread and its requests, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t flusher;
    int flusher_running;
    int stopping;
    uint64_t flush_req, flush_done;
    /* Threads inside pn_agent_flush or holding the agent (pn_agent_hold):
     * stop waits for them before it frees anything they use. */
    int users;

    /* Written by whichever thread flushes a period (the flusher, or the
     * stopping thread once the flusher has been joined). */
    _Atomic uint64_t periods, profiles, dropped, encode_errors, late;
};

/* ------------------------------------------------------------ drivers */

/* A memory driver is a driver (driver.c: its store, types, counters) plus
 * the sampled-allocation table and its thread (memory.c). The agent joins
 * the two, so that each knows only the driver and not the other. */
static pn_driver *driver_new(const pn_driver_opts *o, const pn_config *c, pn_error *e)
{
    pn_driver *d = pn_driver_new(o, c, e);
    if (d && o->kind == PN_DRIVER_MEMORY && !(d->mem = pn_mem_new(d, o, c, e))) {
        pn_driver_free(d);
        return NULL;
    }
    return d;
}

static int driver_start(pn_driver *d, pn_error *e)
{
    return d->mem ? pn_mem_start(d->mem, e) : pn_driver_start(d, e);
}

static void driver_stop(pn_driver *d)
{
    pn_driver_stop(d);
    pn_mem_stop(d->mem);
}

static void driver_free(pn_driver *d)
{
    if (d)
        pn_mem_free_all(d->mem);
    pn_driver_free(d);
}

/* After the driver's store is reset: the consumer thread restarts. */
static void driver_fork_child(pn_driver *d)
{
    pn_driver_fork_child(d);
    if (d->mem)
        pn_mem_fork_child(d->mem);
}

/* The running agent, for the fork path and the one-agent rule. Set by
 * start, cleared under current_mu when its stop begins: a stopping agent
 * no longer counts, so a new one may start while the old one finishes its
 * bounded final export (a binding stops it on another thread), and a child
 * forked meanwhile forgets it. current_mu is taken by the forking thread
 * from prepare to parent/child and, briefly, by start and stop, so an
 * agent the fork path found cannot be freed under it. `forking`: the agent
 * whose locks the forking thread took (forking thread only). */
static _Atomic(pn_agent *) current;
static pthread_mutex_t current_mu = PTHREAD_MUTEX_INITIALIZER;
static pn_agent *forking;

/* The binding moves a batch driver's watermark when it hands over its
 * next batch (Node: the next V8 profile, up to a few seconds away). Polled
 * with growing steps: every 1 ms, a wait of 2 s cost the flusher 2 000
 * wake-ups a period (30 ms of CPU on this VM), now about 70. */
static void wait_for_watermark(pn_driver *d, int64_t cut_mono, int64_t give_up)
{
    int64_t step_ns = 1000000;
    int64_t until = cut_mono + d->max_delay_ns;
    if (give_up < until)
        until = give_up;
    while (atomic_load(&d->watermark) < cut_mono) {
        int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
        if (now >= until)
            break;
        int64_t nap = step_ns < until - now ? step_ns : until - now;
        struct timespec ts = {(time_t)(nap / 1000000000), (long)(nap % 1000000000)};
        nanosleep(&ts, NULL);
        if (step_ns < 32000000)
            step_ns *= 2;
    }
}

static void export_period(pn_agent *a, pn_driver *d, pn_period *p)
{
    pn_period_stats st;
    pn_period_get_stats(p, &st);
    uint64_t lost = st.overflow_samples + st.symbols_dropped;
    if (lost) {
        atomic_fetch_add(&a->dropped, lost);
        pn_log(PN_LOG_WARN, "period held more distinct stacks or symbols than the limits "
               "(max_stacks %u): %llu samples were folded into [overflow]/[unknown]",
               a->cfg.max_stacks, (unsigned long long)lost);
    }
    if (st.labels_dropped)
        pn_log(PN_LOG_WARN, "period held more distinct label sets than its tables: %llu "
               "samples were kept without labels", (unsigned long long)st.labels_dropped);
    if (pn_period_sample_count(p) <= 1) /* only the [overflow] placeholder */
        return;
    int with_pid = a->cfg.report_pid || a->child_of_fork;
    size_t nextra = (with_pid ? 1 : 0) + a->nextra_tags;
    uint32_t rate;
    int64_t period;
    pn_driver_period_rate(d, p, &rate, &period);
    pn_profile_meta m = {a->cfg.application_name, d->profile_type, rate, d->nvalues, d->types,
                         d->period_type, period,
                         nextra ? (with_pid ? a->extra : a->extra + 1) : NULL, nextra};
    pn_error e;
    pn_profile *prof = pn_profile_from_period(p, &m, &e);
    if (!prof) {
        atomic_fetch_add(&a->encode_errors, 1);
        pn_log(PN_LOG_ERROR, "exporting a period failed, period dropped: %s", e.msg);
        return;
    }
    pn_queue_push(a->queue, prof);
    atomic_fetch_add(&a->profiles, 1);
}

/* Cut every driver's period at one moment, let batch drivers' late samples
 * arrive, seal, copy into the neutral form, queue. Flusher thread (or the
 * stopping thread once the flusher is gone). */
static void flush_period(pn_agent *a, int64_t give_up)
{
    int64_t real = pn_clock_ns(CLOCK_REALTIME), mono = pn_clock_ns(CLOCK_MONOTONIC);
    pthread_mutex_lock(&a->mu);
    int n = a->ndrivers;
    pn_driver *ds[MAX_DRIVERS];
    memcpy(ds, a->drivers, sizeof ds);
    pthread_mutex_unlock(&a->mu);
    pn_period *cut[MAX_DRIVERS];
    /* Memory drivers: the period's last allocations and its in-use
     * snapshot go in just before the cut. */
    for (int i = 0; i < n; i++)
        pn_mem_before_cut(ds[i]->mem);
    for (int i = 0; i < n; i++)
        cut[i] = pn_store_cut(ds[i]->store, real, mono);
    for (int i = 0; i < n; i++) {
        if (ds[i]->o.kind == PN_DRIVER_BATCH)
            wait_for_watermark(ds[i], mono, give_up);
        pn_store_seal(ds[i]->store, cut[i]);
        export_period(a, ds[i], cut[i]);
        pn_store_recycle(ds[i]->store, cut[i]);
    }
    uint64_t late = 0;
    for (int i = 0; i < n; i++)
        late += pn_store_late(ds[i]->store);
    uint64_t was = atomic_exchange(&a->late, late);
    if (late > was)
        pn_log(PN_LOG_WARN, "%llu samples arrived after their period was exported and were "
               "dropped (raise max_delay of the batch driver)", (unsigned long long)(late - was));
    pn_labels_reclaim();
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
        flush_period(a, INT64_MAX);
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

/* Called by the fork path (fork.c) with nothing else of ours locked. */
void pn_agent_fork_prepare(void)
{
    pthread_mutex_lock(&current_mu);
    pn_agent *a = forking = atomic_load(&current);
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    pn_queue_fork_prepare(a->queue);
    for (int i = 0; i < a->ndrivers; i++) {
        pn_sampler_fork_prepare(a->drivers[i]->sampler);
        pn_mem_fork_prepare(a->drivers[i]->mem);
    }
}

void pn_agent_fork_parent(void)
{
    pn_agent *a = forking;
    forking = NULL;
    if (a) {
        for (int i = 0; i < a->ndrivers; i++) {
            pn_mem_fork_parent(a->drivers[i]->mem);
            pn_sampler_fork_parent(a->drivers[i]->sampler);
        }
        pn_queue_fork_parent(a->queue);
        pthread_mutex_unlock(&a->mu);
    }
    pthread_mutex_unlock(&current_mu);
}

void pn_agent_fork_child(void)
{
    /* Only this thread survived. Agents the parent was stopping are not
     * `current`: forgotten here (their memory stays; their threads are
     * gone), so the child may configure anew. */
    pthread_mutex_init(&current_mu, NULL);
    pn_agent *a = forking;
    forking = NULL;
    if (!a)
        return;
    /* Our mutex is held by us; make it and the condvar fresh rather than
     * trust their inherited state. */
    init_sync(a);
    a->flush_req = a->flush_done = 0;
    a->flusher_running = 0;
    snprintf(a->pid_value, sizeof a->pid_value, "%d", (int)getpid());
    /* A child's series must not merge with its parent's: label it with its
     * pid even when report_pid is off. */
    a->child_of_fork = 1;
    atomic_store(&a->periods, 0);
    atomic_store(&a->profiles, 0);
    atomic_store(&a->late, 0);
    pn_queue_fork_child(a->queue);
    for (int i = 0; i < a->ndrivers; i++)
        driver_fork_child(a->drivers[i]);
    if (start_flusher(a, NULL) != 0)
        pn_log(PN_LOG_ERROR, "after fork: cannot restart the flusher; profiles of this "
               "process will not be exported");
}

/* ------------------------------------------------------------- public */

static void agent_free(pn_agent *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->ndrivers; i++)
        driver_stop(a->drivers[i]);
    if (a->queue)
        pn_queue_stop(a->queue, 0);
    for (int i = 0; i < a->ndrivers; i++)
        driver_free(a->drivers[i]);
    pn_config_free(&a->cfg);
    free(a->extra);
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
        pn_label *series = NULL;
        if (pn_series_tags(c->tags, c->ntags, c->runtime_name, c->runtime_version, &series,
                           &ho.ntags) != 0)
            return pn_fail(e, PN_ENOMEM, "out of memory starting the agent");
        ho.tags = series;   /* the exporter keeps its own copy */
        ho.spy_name = c->spy_name && c->spy_name[0] ? c->spy_name : "pyroscope-native";
        ho.basic_auth_user = c->basic_auth_username;
        ho.basic_auth_password = c->basic_auth_password;
        ho.tenant_id = c->tenant_id;
        ho.headers = c->http_headers;
        ho.nheaders = c->nheaders;
        ex[(*n)++] = pn_http_exporter_new(&ho, e);
        free(series);
        if (!ex[*n - 1])
            return (*n)--, -1;
    }
    if (c->otlp_endpoint && c->otlp_endpoint[0]) {
        if (!(ex[(*n)++] = pn_otlp_exporter_from_config(c, e)))
            return (*n)--, -1;
    }
    if (c->output_dir && c->output_dir[0]) {
        if (!(ex[(*n)++] = pn_folder_exporter_new(c->output_dir, e)))
            return (*n)--, -1;
    }
    return 0;
}

/* Before a failed start frees a: the fork path must not find it. */
static void release_current(pn_agent *a)
{
    pthread_mutex_lock(&current_mu);
    atomic_compare_exchange_strong(&current, &a, NULL);
    pthread_mutex_unlock(&current_mu);
}

pn_agent *pn_agent_start(const pn_config *c, pn_error *e)
{
    if (pn_config_validate(c, e) != 0)
        return NULL;
    pn_fork_register();
    pn_agent *expected = NULL;
    pn_agent *a = calloc(1, sizeof *a);
    if (!a)
        return pn_fail(e, PN_ENOMEM, "out of memory starting the agent"), NULL;
    if (init_sync(a) != 0) {
        free(a);
        return pn_fail(e, PN_ENOMEM, "out of memory starting the agent"), NULL;
    }
    pthread_mutex_lock(&current_mu);
    int claimed = atomic_compare_exchange_strong(&current, &expected, a);
    pthread_mutex_unlock(&current_mu);
    if (!claimed) {
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        free(a);
        return pn_fail(e, PN_ESTATE, "a profiler is already running in this process; stop it "
                       "first"), NULL;
    }
    if (pn_config_copy(&a->cfg, c, e) != 0) {
        atomic_store(&current, NULL);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        free(a);
        return pn_fail(e, PN_ENOMEM, "out of memory starting the agent"), NULL;
    }
    pn_log_set_level(c->log_level);
    pn_labels_set_strict(c->strict_labels);
    snprintf(a->pid_value, sizeof a->pid_value, "%d", (int)getpid());
    a->pid_label = (pn_label){"pid", a->pid_value};
    size_t ntags = a->cfg.output_dir && a->cfg.output_dir[0] ? a->cfg.ntags : 0;
    if (!(a->extra = calloc(ntags + 1, sizeof *a->extra))) {
        agent_free(a);
        atomic_store(&current, NULL);
        return pn_fail(e, PN_ENOMEM, "out of memory starting the agent"), NULL;
    }
    a->extra[0] = a->pid_label;
    for (size_t i = 0; i < ntags; i++)
        a->extra[i + 1] = a->cfg.tags[i];
    a->nextra_tags = ntags;

    pn_exporter *ex[3];
    size_t nex = 0;
    pn_queue_opts qo;
    memset(&qo, 0, sizeof qo);
    if (make_exporters(a, ex, &nex, e) != 0 || !(a->queue = pn_queue_new(&qo, ex, nex, e))) {
        for (size_t i = 0; a->queue == NULL && i < nex; i++)
            ex[i]->destroy(ex[i]);
        release_current(a);
        agent_free(a);
        return NULL;
    }
    if (start_flusher(a, e) != 0) {
        release_current(a);
        agent_free(a);
        return NULL;
    }
    char shown[256]; /* the address without its password */
    pn_url_redact(c->server_address ? c->server_address : "", shown, sizeof shown);
    char shown_otlp[256];
    pn_url_redact(c->otlp_endpoint ? c->otlp_endpoint : "", shown_otlp, sizeof shown_otlp);
    pn_log(PN_LOG_INFO, "profiling \"%s\" at %g Hz (%s), exporting every %g s to %s%s%s%s%s",
           c->application_name, c->sample_rate, c->oncpu ? "cpu" : "wall", c->upload_interval,
           shown,
           c->server_address && c->output_dir ? " and " : "", c->output_dir ? c->output_dir : "",
           c->otlp_endpoint ? " and OTLP " : "", c->otlp_endpoint ? shown_otlp : "");
    return a;
}

pn_driver *pn_agent_add_driver(pn_agent *a, const pn_driver_opts *o, pn_error *e)
{
    if (!a)
        return pn_fail(e, PN_EINVAL, "add_driver: no agent"), NULL;
    pn_driver *d = driver_new(o, &a->cfg, e);
    if (!d)
        return NULL;
    pthread_mutex_lock(&a->mu);
    int full = a->ndrivers == MAX_DRIVERS, stopping = a->stopping;
    if (!full && !stopping)
        a->drivers[a->ndrivers++] = d;
    pthread_mutex_unlock(&a->mu);
    if (full || stopping) {
        driver_free(d);
        return pn_fail(e, full ? PN_ELIMIT : PN_ESTATE, full ? "at most %d drivers per agent"
                       : "the agent is stopping", MAX_DRIVERS), NULL;
    }
    /* Started once it is in the array, so the fork path always sees the
     * threads that exist. A failed start leaves an idle driver (no thread). */
    if (driver_start(d, e) != 0)
        return NULL;
    return d;
}

void pn_agent_hold(pn_agent *a)
{
    pthread_mutex_lock(&a->mu);
    a->users++;
    pthread_mutex_unlock(&a->mu);
}

void pn_agent_release(pn_agent *a)
{
    pthread_mutex_lock(&a->mu);
    if (--a->users == 0)
        pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Longest wait a flush accepts (a day): a larger or non-finite timeout is
 * cut to it, since its nanoseconds would not fit an int64_t. */
#define FLUSH_MAX_S 86400.0

int pn_agent_flush(pn_agent *a, double timeout_s, pn_error *e)
{
    if (!(timeout_s >= 0)) /* negative or NaN */
        timeout_s = 0;
    if (timeout_s > FLUSH_MAX_S)
        timeout_s = FLUSH_MAX_S;
    int64_t deadline = pn_clock_ns(CLOCK_MONOTONIC) + (int64_t)(timeout_s * 1e9);
    pthread_mutex_lock(&a->mu);
    if (a->stopping) {
        pthread_mutex_unlock(&a->mu);
        return pn_fail(e, PN_ESTATE, "flush: the profiler is stopping");
    }
    a->users++;
    uint64_t want = ++a->flush_req;
    pthread_cond_broadcast(&a->cv);
    int timed_out = 0;
    while (a->flush_done < want && a->flusher_running && !a->stopping && !timed_out) {
        struct timespec ts = pn_timespec(deadline);
        timed_out = pthread_cond_timedwait(&a->cv, &a->mu, &ts) != 0 &&
                    pn_clock_ns(CLOCK_MONOTONIC) >= deadline;
    }
    int stopped = a->flush_done < want;
    /* Stop frees the queue only once every user has left. */
    pn_queue *q = a->queue;
    pthread_mutex_unlock(&a->mu);
    int rc = 0;
    if (timed_out) {
        rc = pn_fail(e, PN_ELIMIT, "flush: the period was not encoded within %g s", timeout_s);
    } else if (stopped) {
        rc = pn_fail(e, PN_ESTATE, "flush: the profiler stopped first (stop exports the "
                     "period itself)");
    } else {
        double left = (deadline - pn_clock_ns(CLOCK_MONOTONIC)) / 1e9;
        if (pn_queue_flush(q, left > 0 ? left : 0) != 0)
            rc = pn_fail(e, PN_ELIMIT, "flush: uploads still pending after %g s", timeout_s);
    }
    pn_agent_release(a);
    return rc;
}

void pn_agent_stop(pn_agent *a) { pn_agent_stop_stats(a, NULL); }

void pn_agent_stop_begin(pn_agent *a)
{
    pthread_mutex_lock(&current_mu);
    pthread_mutex_lock(&a->mu);
    a->stopping = 1;
    pn_agent *self = a;
    /* Strict labels are this agent's setting: off again once it stops
     * being the current one (a restart sets its own). */
    if (atomic_compare_exchange_strong(&current, &self, NULL))
        pn_labels_set_strict(0);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_unlock(&current_mu);
}

void pn_agent_stop_stats(pn_agent *a, pn_agent_stats *final)
{
    if (!a)
        return;
    int64_t deadline = pn_clock_ns(CLOCK_MONOTONIC) + (int64_t)(a->cfg.stop_timeout * 1e9);
    pn_agent_stop_begin(a);
    for (int i = 0; i < a->ndrivers; i++)
        driver_stop(a->drivers[i]);
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->flusher_running)
        pthread_join(a->flusher, NULL);
    a->flusher_running = 0;
    flush_period(a, deadline); /* the final, partial period */
    double left = (deadline - pn_clock_ns(CLOCK_MONOTONIC)) / 1e9;
    /* No retries from here: a dead server does not hold the exit up. */
    pn_queue_drain(a->queue, left > 0 ? left : 0);
    /* Flushes on other threads return now; wait for them to leave before
     * anything they use is freed. */
    pn_queue_close(a->queue);
    pthread_mutex_lock(&a->mu);
    while (a->users > 0)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    pn_queue_stats qs;
    pn_queue_stop_stats(a->queue, 0, &qs);
    a->queue = NULL;
    if (final) {
        pn_agent_get_stats(a, final);
        final->queue = qs;
    }
    agent_free(a);
}

void pn_agent_get_stats(pn_agent *a, pn_agent_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->ndrivers; i++) {
        pn_driver_stats ds;
        pn_driver_get_stats(a->drivers[i], &ds);
        out->samples_recorded += ds.recorded;
        if (!a->drivers[i]->sampler)
            continue;
        pn_sampler_stats ss;
        pn_sampler_get_stats(a->drivers[i]->sampler, &ss);
        out->sampler.ticks += ss.ticks;
        out->sampler.missed_ticks += ss.missed_ticks;
        out->sampler.samples += ss.samples;
        out->sampler.idle_skipped += ss.idle_skipped;
        out->sampler.syscall_ticks += ss.syscall_ticks;
        out->sampler.sampler_cpu_ns += ss.sampler_cpu_ns;
        out->sampler.budget_throttled_ticks += ss.budget_throttled_ticks;
        /* A driver whose threads' own timers sample them: the
         * configured rate, whatever its sampler thread's. */
        if (a->drivers[i]->timers)
            ss.effective_rate_hz = a->drivers[i]->sample_rate;
        /* Several samplers: the slowest one's. */
        if (out->sampler.effective_rate_hz == 0 ||
            ss.effective_rate_hz < out->sampler.effective_rate_hz)
            out->sampler.effective_rate_hz = ss.effective_rate_hz;
    }
    pthread_mutex_unlock(&a->mu);
    out->late_samples = atomic_load(&a->late);
    if (a->queue)
        pn_queue_get_stats(a->queue, &out->queue);
    out->periods = atomic_load(&a->periods);
    out->profiles_encoded = atomic_load(&a->profiles);
    out->samples_dropped = atomic_load(&a->dropped);
    out->encode_errors = atomic_load(&a->encode_errors);
}

const pn_config *pn_agent_config(const pn_agent *a) { return &a->cfg; }
