/* The upload queue: one exporter thread draining a bounded FIFO of
 * profiles (sealed periods in their neutral form) into the exporters, each
 * of which encodes what its receiver takes, so no application thread ever
 * waits on encoding or the network.
 *
 * How uploads are counted: per profile, not per (profile, exporter) pair
 * nor per part. Every pushed profile ends in exactly one of
 *   uploads_ok      every exporter accepted it,
 *   uploads_failed  at least one exporter rejected it or ran out of attempts,
 *   uploads_dropped the queue was full (oldest dropped), or stop came first
 *                   (still queued, or aborted while being sent),
 *   uploads_unconfirmed  none of those, but an exporter sent it whole and
 *                   will never read the answer (a binding's sender at
 *                   process exit): not sent again, as the server most
 *                   likely has it,
 * so once the queue is stopped ok + failed + dropped + unconfirmed ==
 * uploads pushed.
 * `retries` counts repeated attempts of any exporter, and `bytes_sent` adds
 * the upload's size once for every exporter that accepted it. Each
 * exporter also has its own counts (stats.exporters[i], per payload): one
 * that is down retries and gives up without holding back another's
 * accepted uploads from its counters.
 *
 * Uploads still queued in a forked child belong to the parent: the child
 * frees them without counting and starts its stats from zero.
 *
 * Lock rule: pn_log is never called with the queue mutex held, because a
 * binding's log handler may need a lock (e.g. the GIL) that a thread blocked
 * on our mutex holds.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "export/exporter.h"
#include "encoding/pprof.h"

#define DEFAULT_CAPACITY 16
#define DEFAULT_ATTEMPTS 4
#define DEFAULT_BACKOFF_S 0.5
#define DEFAULT_BACKOFF_MAX_S 8.0
#define MAX_CAPACITY 65536
#define MAX_ATTEMPTS 100
#define MAX_BACKOFF_S 3600.0
/* Exporters have their own, shorter timeouts; this only bounds one that has
 * none. Stop does not rely on it: it sets the abort flag. */
#define SEND_BUDGET_NS (60LL * 1000000000LL)

typedef struct {
    pn_profile *p;
    uint64_t seq;               /* push order, for flush */
} slot;

typedef enum { OUT_OK, OUT_FAILED, OUT_DROPPED, OUT_UNCONFIRMED } outcome;

struct pn_queue {
    /* Set by pn_queue_new, read-only afterwards (any thread). */
    pn_queue_opts opts;
    pn_exporter **exporters;
    size_t nexporters;

    pthread_mutex_t mu;
    pthread_cond_t wake;        /* exporter thread: work, stop, flush kick */
    pthread_cond_t idle;        /* flushers: an upload left the queue */

    /* Guarded by mu (any thread). */
    slot *ring;                 /* opts.queue_capacity entries */
    size_t head, count;
    uint64_t next_seq;          /* seq of the next pushed upload */
    pn_profile *inflight;       /* the exporter thread's profile; owned by that
                                 * thread, recorded here for flush and so a
                                 * forked child can free it */
    uint64_t inflight_seq;
    /* Its encoded parts while they are sent (owned by the exporter thread,
     * recorded here so a forked child can free them too). */
    pn_upload **inflight_parts[2];
    size_t inflight_nparts[2];
    uint64_t flush_gen;         /* bumped by each flush to end a backoff sleep */
    uint64_t aborted_seq;       /* seq + 1 of the newest upload a stop aborted */
    int flushers;               /* threads inside pn_queue_flush; stop waits
                                 * for them to leave before freeing */
    int stopping;
    /* Set by pn_queue_drain (the last flush before stop): a failed attempt
     * is not retried, so a dead server cannot hold the exit up; only a
     * transfer under way is waited for, within the drain's timeout. */
    int draining;
    double drain_timeout_s;     /* the timeout drain was given, for the log */
    int thread_running;
    pn_queue_stats stats;

    /* Set once by stop (atomic store, any thread); read by the exporters'
     * send() on the exporter thread through the pointer they are given. */
    volatile int abort_flag;

    /* Exporter thread only (re-seeded by the child after fork). */
    uint64_t rng;

    /* Written by new and fork_child before the thread runs; read by stop. */
    pthread_t thread;
};

/* Absolute CLOCK_MONOTONIC time `s` seconds from now (the condvars use it,
 * so a wall-clock jump cannot stretch a wait). */
static struct timespec mono_after(double s)
{
    if (!(s > 0))
        s = 0;
    if (s > 1e9)
        s = 1e9;
    return pn_timespec(pn_clock_ns(CLOCK_MONOTONIC) + (int64_t)(s * 1e9));
}

static int aborted(pn_queue *q) { return __atomic_load_n(&q->abort_flag, __ATOMIC_ACQUIRE); }

void pn_upload_free(pn_upload *u)
{
    if (!u)
        return;
    free(u->app_name);
    free(u->profile_type);
    free(u->data);
    free(u);
}

/* Rounded to seconds, so back-to-back periods of a second or more do not
 * overlap. */
static void period_seconds(const pn_profile *p, int64_t *from_s, int64_t *until_s)
{
    *from_s = (p->start_ns + 500000000) / 1000000000;
    *until_s = (p->end_ns + 500000000) / 1000000000;
    if (*until_s <= *from_s)
        *until_s = *from_s + 1;
}

/* "cpu profile of 'app' [from..until]", for log lines. */
static void describe(const pn_profile *p, char *buf, size_t n)
{
    int64_t from, until;
    period_seconds(p, &from, &until);
    snprintf(buf, n, "%s profile of '%s' [%lld..%lld]", p->profile_type, p->app_name,
             (long long)from, (long long)until);
}

typedef struct {
    const pn_profile *p;
    pn_upload **parts;
    size_t n, cap;
} parts_sink;

static int collect_part(void *ud, const uint8_t *gz, size_t len, size_t nsamples)
{
    (void)nsamples;
    parts_sink *ps = ud;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 4;
        pn_upload **np = realloc(ps->parts, cap * sizeof *np);
        if (!np)
            return -1;
        ps->parts = np;
        ps->cap = cap;
    }
    pn_upload *u = calloc(1, sizeof *u);
    if (!u)
        return -1;
    u->app_name = strdup(ps->p->app_name);
    u->profile_type = strdup(ps->p->profile_type);
    u->data = malloc(len ? len : 1);
    if (!u->app_name || !u->profile_type || !u->data) {
        pn_upload_free(u);
        return -1;
    }
    memcpy(u->data, gz, len);
    u->len = len;
    period_seconds(ps->p, &u->from_s, &u->until_s);
    u->sample_rate = ps->p->sample_rate;
    u->part = (uint32_t)ps->n;
    ps->parts[ps->n++] = u;
    return 0;
}

static void free_parts(pn_upload **parts, size_t n)
{
    for (size_t i = 0; parts && i < n; i++)
        pn_upload_free(parts[i]);
    free(parts);
}

int pn_pprof_uploads(const pn_profile *p, pn_upload ***parts, size_t *nparts, pn_error *e)
{
    pn_encode_opts o;
    pn_encode_opts_from_profile(&o, p);
    parts_sink ps = {p, NULL, 0, 0};
    if (pn_pprof_encode(p, &o, collect_part, &ps, e) < 0) {
        free_parts(ps.parts, ps.n);
        return -1;
    }
    *parts = ps.parts;
    *nparts = ps.n;
    return 0;
}

static int init_sync(pn_queue *q)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca))
        return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&q->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&q->wake, &ca)) != 0)
        pthread_mutex_destroy(&q->mu);
    if (rc == 0 && (rc = pthread_cond_init(&q->idle, &ca)) != 0) {
        pthread_cond_destroy(&q->wake);
        pthread_mutex_destroy(&q->mu);
    }
    pthread_condattr_destroy(&ca);
    return rc ? -1 : 0;
}

static void destroy_sync(pn_queue *q)
{
    pthread_cond_destroy(&q->idle);
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->mu);
}

static void seed_rng(pn_queue *q)
{
    q->rng = (uint64_t)pn_clock_ns(CLOCK_MONOTONIC) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)q;
    if (q->rng == 0)
        q->rng = 0x9e3779b97f4a7c15ULL;
}

/* xorshift64*: a uniform double in [0, 1). */
static double next_unit(pn_queue *q)
{
    q->rng ^= q->rng >> 12;
    q->rng ^= q->rng << 25;
    q->rng ^= q->rng >> 27;
    return (double)((q->rng * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0;
}

/* Wait before attempt `failed + 1`: initial * 2^(failed-1), capped, then
 * +-25% jitter so many processes restarted together do not retry in step. */
static double backoff_s(pn_queue *q, int failed)
{
    double b = q->opts.backoff_initial_s;
    for (int i = 1; i < failed && b < q->opts.backoff_max_s; i++)
        b *= 2;
    if (b > q->opts.backoff_max_s)
        b = q->opts.backoff_max_s;
    return b * (0.75 + 0.5 * next_unit(q));
}

/* Sleep on the condvar so stop and a flush (one started since flush_gen was
 * `gen`) can cut it short. Called with mu held; returns 0 when the queue is
 * stopping. */
static int sleep_backoff(pn_queue *q, double s, uint64_t gen)
{
    struct timespec until = mono_after(s);
    while (!q->stopping && q->flush_gen == gen) {
        if (pthread_cond_timedwait(&q->wake, &q->mu, &until) == ETIMEDOUT)
            break;
    }
    return !q->stopping;
}

/* Send one part to exporter xi, retrying RETRY answers. Exporter thread,
 * mu not held. */
static outcome send_part(pn_queue *q, size_t xi, const pn_upload *u, const char *what)
{
    pn_exporter *x = q->exporters[xi];
    pn_exporter_stats *xs = &q->stats.exporters[xi];
    const char *name = x->name ? x->name : "exporter";
    for (int attempt = 1;; attempt++) {
        if (aborted(q))
            return OUT_DROPPED;
        /* A flush that starts while this attempt runs also cuts the
         * backoff after it short. */
        pthread_mutex_lock(&q->mu);
        if (attempt > 1) {
            q->stats.retries++;
            xs->retries++;
        }
        uint64_t gen = q->flush_gen;
        pthread_mutex_unlock(&q->mu);
        pn_error err;
        pn_error_clear(&err);
        pn_send_result r = x->send(x, u, pn_clock_ns(CLOCK_MONOTONIC) + SEND_BUDGET_NS, &q->abort_flag, &err);
        const char *msg = err.msg[0] ? err.msg : "(no message)";
        if (r == PN_SEND_OK) {
            pthread_mutex_lock(&q->mu);
            q->stats.bytes_sent += u->len;
            xs->sent++;
            xs->bytes_sent += u->len;
            pthread_mutex_unlock(&q->mu);
            return OUT_OK;
        }
        if (r == PN_SEND_UNCONFIRMED) {
            pn_log(PN_LOG_WARN, "upload of %s part %u to %s not confirmed, not sent again: %s",
                   what, u->part, name, msg);
            return OUT_UNCONFIRMED;
        }
        /* An abort makes send() fail; that is shutdown, not the server. */
        if (aborted(q))
            return OUT_DROPPED;
        pthread_mutex_lock(&q->mu);
        int draining = q->draining;
        if (r != PN_SEND_RETRY || attempt >= q->opts.max_attempts || draining)
            xs->failed++;
        pthread_mutex_unlock(&q->mu);
        if (r != PN_SEND_RETRY) {
            pn_log(PN_LOG_ERROR, "upload of %s part %u to %s failed: %s", what, u->part, name,
                   msg);
            return OUT_FAILED;
        }
        if (draining) {
            pn_log(PN_LOG_ERROR, "upload of %s part %u to %s failed, not retried as the profiler is stopping: %s",
                   what, u->part, name, msg);
            return OUT_FAILED;
        }
        if (attempt >= q->opts.max_attempts) {
            pn_log(PN_LOG_ERROR, "upload of %s part %u to %s failed, gave up after %d attempts: %s",
                   what, u->part, name, attempt, msg);
            return OUT_FAILED;
        }
        double wait = backoff_s(q, attempt);
        pn_log(PN_LOG_INFO, "upload of %s part %u to %s: attempt %d of %d failed (%s); retrying in %.2f s",
               what, u->part, name, attempt, q->opts.max_attempts, msg, wait);
        pthread_mutex_lock(&q->mu);
        int go_on = sleep_backoff(q, wait, gen);
        pthread_mutex_unlock(&q->mu);
        if (!go_on)
            return OUT_DROPPED;
    }
}

/* Encode p for every exporter (pprof once for all that take it) and send
 * each part. Exporter thread, mu not held. */
static outcome deliver(pn_queue *q, const pn_profile *p, const char *what)
{
    int failed = 0, unconfirmed = 0;
    pn_upload **pprof = NULL;
    size_t npprof = 0;
    int pprof_state = 0; /* 0 not yet, 1 encoded, -1 failed */
    outcome oc = OUT_OK;
    for (size_t i = 0; i < q->nexporters && oc != OUT_DROPPED; i++) {
        pn_exporter *x = q->exporters[i];
        pn_upload **parts = NULL, **own = NULL;
        size_t nparts = 0;
        pn_error err;
        pn_error_clear(&err);
        if (x->encode) {
            if (x->encode(x, p, &own, &nparts, &err) < 0) {
                pn_log(PN_LOG_ERROR, "encoding %s for %s failed, not sent there: %s", what,
                       x->name ? x->name : "exporter", err.msg);
                pthread_mutex_lock(&q->mu);
                q->stats.exporters[i].failed++;
                pthread_mutex_unlock(&q->mu);
                failed = 1;
                continue;
            }
            parts = own;
            pthread_mutex_lock(&q->mu);
            q->inflight_parts[1] = own;
            q->inflight_nparts[1] = nparts;
            pthread_mutex_unlock(&q->mu);
        } else {
            if (pprof_state == 0) {
                pprof_state = pn_pprof_uploads(p, &pprof, &npprof, &err) < 0 ? -1 : 1;
                pthread_mutex_lock(&q->mu);
                q->inflight_parts[0] = pprof;
                q->inflight_nparts[0] = npprof;
                pthread_mutex_unlock(&q->mu);
                if (pprof_state < 0)
                    pn_log(PN_LOG_ERROR, "encoding %s as pprof failed, not sent: %s", what,
                           err.msg);
            }
            if (pprof_state < 0) {
                pthread_mutex_lock(&q->mu);
                q->stats.exporters[i].failed++;
                pthread_mutex_unlock(&q->mu);
                failed = 1;
                continue;
            }
            parts = pprof;
            nparts = npprof;
        }
        for (size_t k = 0; k < nparts && oc != OUT_DROPPED; k++) {
            outcome r = send_part(q, i, parts[k], what);
            if (r == OUT_DROPPED)
                oc = OUT_DROPPED;
            else if (r == OUT_FAILED)
                failed = 1;
            else if (r == OUT_UNCONFIRMED)
                unconfirmed = 1;
        }
        if (own) {
            pthread_mutex_lock(&q->mu);
            q->inflight_parts[1] = NULL;
            q->inflight_nparts[1] = 0;
            pthread_mutex_unlock(&q->mu);
            free_parts(own, nparts);
        }
    }
    pthread_mutex_lock(&q->mu);
    q->inflight_parts[0] = NULL;
    q->inflight_nparts[0] = 0;
    pthread_mutex_unlock(&q->mu);
    free_parts(pprof, npprof);
    if (oc == OUT_DROPPED)
        return oc;
    return failed ? OUT_FAILED : unconfirmed ? OUT_UNCONFIRMED : OUT_OK;
}

static void *run(void *arg)
{
    pn_queue *q = arg;
    pthread_setname_np(pthread_self(), "pyroscope-exp");
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stopping && q->count == 0)
            pthread_cond_wait(&q->wake, &q->mu);
        if (q->stopping)
            break;
        slot s = q->ring[q->head];
        q->head = (q->head + 1) % q->opts.queue_capacity;
        q->count--;
        q->inflight = s.p;
        q->inflight_seq = s.seq;
        pthread_mutex_unlock(&q->mu);

        char what[200];
        describe(s.p, what, sizeof what);
        outcome oc = deliver(q, s.p, what);

        pthread_mutex_lock(&q->mu);
        if (oc == OUT_OK)
            q->stats.uploads_ok++;
        else if (oc == OUT_FAILED)
            q->stats.uploads_failed++;
        else if (oc == OUT_UNCONFIRMED)
            q->stats.uploads_unconfirmed++;
        else
            q->stats.uploads_dropped++;
        q->inflight = NULL;
        if (oc == OUT_DROPPED && s.seq + 1 > q->aborted_seq)
            q->aborted_seq = s.seq + 1;
        pn_profile_free(s.p);
        pthread_cond_broadcast(&q->idle);
        if (oc == OUT_DROPPED) {
            pthread_mutex_unlock(&q->mu);
            pn_log(PN_LOG_WARN, "upload of %s dropped: the queue stopped while it was being sent",
                   what);
            pthread_mutex_lock(&q->mu);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* The exporter thread runs inside someone else's process: block every
 * signal in it so the application's handlers only run on its own threads. */
static int start_thread(pn_queue *q)
{
    return pn_thread_spawn(&q->thread, run, q, "pyroscope-xport");
}

static int check_opts(const pn_queue_opts *in, pn_queue_opts *o, pn_error *e)
{
    if (in)
        *o = *in;
    else
        memset(o, 0, sizeof *o);
    if (o->queue_capacity == 0)
        o->queue_capacity = DEFAULT_CAPACITY;
    if (o->queue_capacity > MAX_CAPACITY)
        return pn_fail(e, PN_EINVAL, "queue_capacity %zu: must be at most %d",
                       o->queue_capacity, MAX_CAPACITY);
    if (o->max_attempts == 0)
        o->max_attempts = DEFAULT_ATTEMPTS;
    if (o->max_attempts < 0 || o->max_attempts > MAX_ATTEMPTS)
        return pn_fail(e, PN_EINVAL, "max_attempts %d: must be between 1 and %d",
                       o->max_attempts, MAX_ATTEMPTS);
    if (!(o->backoff_initial_s >= 0 && o->backoff_initial_s <= MAX_BACKOFF_S))
        return pn_fail(e, PN_EINVAL, "backoff_initial_s %g: must be between 0 and %g seconds",
                       o->backoff_initial_s, MAX_BACKOFF_S);
    if (!(o->backoff_max_s >= 0 && o->backoff_max_s <= MAX_BACKOFF_S))
        return pn_fail(e, PN_EINVAL, "backoff_max_s %g: must be between 0 and %g seconds",
                       o->backoff_max_s, MAX_BACKOFF_S);
    if (o->backoff_initial_s == 0)
        o->backoff_initial_s = DEFAULT_BACKOFF_S;
    if (o->backoff_max_s == 0)
        o->backoff_max_s = DEFAULT_BACKOFF_MAX_S;
    if (o->backoff_max_s < o->backoff_initial_s)
        return pn_fail(e, PN_EINVAL, "backoff_max_s %g: must not be below backoff_initial_s %g",
                       o->backoff_max_s, o->backoff_initial_s);
    return 0;
}

/* The per-exporter counters' names (after every reset of the stats). */
static void name_exporters(pn_queue *q)
{
    q->stats.nexporters = q->nexporters;
    for (size_t i = 0; i < q->nexporters; i++)
        q->stats.exporters[i].name = q->exporters[i]->name ? q->exporters[i]->name : "exporter";
}

/* On success the queue owns the exporters (stop destroys them); on failure
 * the caller still does. */
pn_queue *pn_queue_new(const pn_queue_opts *o, pn_exporter **exporters, size_t n, pn_error *e)
{
    pn_queue_opts opts;
    if (check_opts(o, &opts, e))
        return NULL;
    if (!exporters || n == 0 || n > PN_MAX_EXPORTERS) {
        pn_fail(e, PN_EINVAL, "upload queue: %zu exporters (1 to %d)", n, PN_MAX_EXPORTERS);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!exporters[i] || !exporters[i]->send || !exporters[i]->destroy) {
            pn_fail(e, PN_EINVAL, "upload queue: exporter %zu is NULL or lacks send/destroy", i);
            return NULL;
        }
    }
    pn_queue *q = calloc(1, sizeof *q);
    if (!q) {
        pn_fail(e, PN_ENOMEM, "upload queue: out of memory");
        return NULL;
    }
    q->opts = opts;
    q->nexporters = n;
    q->exporters = calloc(n, sizeof *q->exporters);
    q->ring = calloc(opts.queue_capacity, sizeof *q->ring);
    if (!q->exporters || !q->ring) {
        pn_fail(e, PN_ENOMEM, "upload queue: out of memory for %zu entries", opts.queue_capacity);
        goto fail;
    }
    if (init_sync(q)) {
        pn_fail(e, PN_ENOMEM, "upload queue: cannot create its mutex/condition variables");
        goto fail;
    }
    memcpy(q->exporters, exporters, n * sizeof *exporters);
    name_exporters(q);
    seed_rng(q);
    int rc = start_thread(q);
    if (rc) {
        pn_fail(e, PN_EIO, "upload queue: cannot start the exporter thread: %s", strerror(rc));
        destroy_sync(q);
        goto fail;
    }
    q->thread_running = 1;
    return q;
fail:
    free(q->exporters);
    free(q->ring);
    free(q);
    return NULL;
}

void pn_queue_push(pn_queue *q, pn_profile *u)
{
    if (!u)
        return;
    if (!q) {
        pn_profile_free(u);
        return;
    }
    pn_profile *oldest = NULL, *refused = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->stopping || !q->thread_running) {
        refused = u;
        q->stats.uploads_dropped++;
    } else {
        if (q->count == q->opts.queue_capacity) {
            oldest = q->ring[q->head].p;
            q->head = (q->head + 1) % q->opts.queue_capacity;
            q->count--;
            q->stats.uploads_dropped++;
            pthread_cond_broadcast(&q->idle);
        }
        slot *s = &q->ring[(q->head + q->count) % q->opts.queue_capacity];
        s->p = u;
        s->seq = q->next_seq++;
        q->count++;
        pthread_cond_signal(&q->wake);
    }
    pthread_mutex_unlock(&q->mu);

    char what[200];
    if (oldest) {
        describe(oldest, what, sizeof what);
        pn_log(PN_LOG_WARN, "upload queue full (%zu entries): dropped the oldest upload, %s",
               q->opts.queue_capacity, what);
        pn_profile_free(oldest);
    }
    if (refused) {
        describe(refused, what, sizeof what);
        pn_log(PN_LOG_WARN, "upload queue is not running: dropped %s", what);
        pn_profile_free(refused);
    }
}

static int flush(pn_queue *q, double timeout_s, int drain);

/* True while an upload pushed before seq `target` is queued or in flight.
 * The ring is in push order, so its head is the oldest queued. mu held. */
static int pending_before(const pn_queue *q, uint64_t target)
{
    if (q->inflight && q->inflight_seq < target)
        return 1;
    return q->count > 0 && q->ring[q->head].seq < target;
}

int pn_queue_flush(pn_queue *q, double timeout_s) { return flush(q, timeout_s, 0); }

int pn_queue_drain(pn_queue *q, double timeout_s) { return flush(q, timeout_s, 1); }

static int flush(pn_queue *q, double timeout_s, int drain)
{
    if (!q)
        return 0;
    struct timespec until = mono_after(timeout_s);
    pthread_mutex_lock(&q->mu);
    if (drain) {
        q->draining = 1;
        if (timeout_s > q->drain_timeout_s)
            q->drain_timeout_s = timeout_s;
    }
    uint64_t target = q->next_seq, aborted_before = q->aborted_seq;
    /* Somebody is waiting with a bounded timeout (often shutdown): an upload
     * sleeping in backoff gets its next attempt now instead. */
    q->flush_gen++;
    q->flushers++;
    pthread_cond_broadcast(&q->wake);
    int rc = 0;
    while (pending_before(q, target)) {
        if (!q->thread_running || q->stopping) {
            rc = -1;
            break;
        }
        if (pthread_cond_timedwait(&q->idle, &q->mu, &until) == ETIMEDOUT) {
            rc = pending_before(q, target) ? -1 : 0;
            break;
        }
    }
    /* Nothing is pending, but a stop that came while we waited may have
     * aborted one of ours rather than let it be sent. */
    if (rc == 0 && q->aborted_seq != aborted_before && q->aborted_seq <= target)
        rc = -1;
    if (--q->flushers == 0 && q->stopping)
        pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void pn_queue_close(pn_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    __atomic_store_n(&q->abort_flag, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&q->wake);
    pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
}

void pn_queue_stop(pn_queue *q, double timeout_s) { pn_queue_stop_stats(q, timeout_s, NULL); }

void pn_queue_stop_stats(pn_queue *q, double timeout_s, pn_queue_stats *final)
{
    if (!q)
        return;
    (void)pn_queue_drain(q, timeout_s);
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    __atomic_store_n(&q->abort_flag, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&q->wake);
    pthread_cond_broadcast(&q->idle);
    /* A flush running on another thread returns now; let it leave first. */
    while (q->flushers > 0)
        pthread_cond_wait(&q->idle, &q->mu);
    int running = q->thread_running;
    pthread_mutex_unlock(&q->mu);
    if (running)
        pthread_join(q->thread, NULL);

    /* The exporter thread is gone: this thread owns everything now. */
    size_t left = q->count;
    for (size_t i = 0; i < left; i++)
        pn_profile_free(q->ring[(q->head + i) % q->opts.queue_capacity].p);
    q->stats.uploads_dropped += left;
    /* The caller may have drained first and stop with 0 now: the wait
     * that ran out was the drain's. */
    double waited = q->drain_timeout_s > timeout_s ? q->drain_timeout_s : timeout_s;
    if (left)
        pn_log(PN_LOG_WARN, "upload queue stopped: %zu queued uploads dropped (not sent within the %.2f s stop timeout)",
               left, waited > 0 ? waited : 0.0);
    if (final)
        *final = q->stats;
    for (size_t i = 0; i < q->nexporters; i++)
        q->exporters[i]->destroy(q->exporters[i]);
    destroy_sync(q);
    free(q->exporters);
    free(q->ring);
    free(q);
}

void pn_queue_get_stats(pn_queue *q, pn_queue_stats *out)
{
    if (!out)
        return;
    if (!q) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&q->mu);
    *out = q->stats;
    pthread_mutex_unlock(&q->mu);
}

/* Held across fork() so the child never inherits the mutex mid-update. */
void pn_queue_fork_prepare(pn_queue *q)
{
    if (q)
        pthread_mutex_lock(&q->mu);
}

void pn_queue_fork_parent(pn_queue *q)
{
    if (q)
        pthread_mutex_unlock(&q->mu);
}

/* Only the forking thread exists in the child: the exporter thread and any
 * flusher are gone, and the condvars may still list them as waiters. */
void pn_queue_fork_child(pn_queue *q)
{
    if (!q)
        return;
    if (init_sync(q)) {
        /* glibc's init functions do not fail; should they, stay without a
         * thread, so every push is counted as dropped. */
        q->thread_running = 0;
        pn_log(PN_LOG_ERROR, "upload queue: cannot re-create its locks after fork; uploads in this process will be dropped");
        return;
    }
    /* The parent still owns and sends these; here they are only copies. */
    for (size_t i = 0; i < q->count; i++)
        pn_profile_free(q->ring[(q->head + i) % q->opts.queue_capacity].p);
    pn_profile_free(q->inflight);
    q->inflight = NULL;
    for (int i = 0; i < 2; i++) {
        free_parts(q->inflight_parts[i], q->inflight_nparts[i]);
        q->inflight_parts[i] = NULL;
        q->inflight_nparts[i] = 0;
    }
    q->head = q->count = 0;
    q->flush_gen = 0;
    q->aborted_seq = 0;
    q->flushers = 0;
    q->draining = 0;
    q->drain_timeout_s = 0;
    memset(&q->stats, 0, sizeof q->stats);
    name_exporters(q);
    __atomic_store_n(&q->abort_flag, 0, __ATOMIC_RELEASE);
    seed_rng(q);
    q->thread_running = 0;
    if (q->stopping)
        return;
    int rc = start_thread(q);
    if (rc) {
        pn_log(PN_LOG_ERROR, "upload queue: cannot start the exporter thread after fork: %s; uploads in this process will be dropped",
               strerror(rc));
        return;
    }
    q->thread_running = 1;
}
