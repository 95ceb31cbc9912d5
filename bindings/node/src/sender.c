/* The upload sender: the core's HTTP exporter hands each request (URL,
 * headers, body, timeouts: pn_http_request) to the JS thread through one
 * thread-safe function, and lib/sender.js sends it with Node's own
 * http/https, so libcurl and its ~26 libraries are not mapped into the
 * process. The exporter thread waits for the answer.
 *
 * It declines (the core then loads libcurl and sends the request itself)
 * when the JS thread cannot answer: it is blocked in the exit handler
 * (stopSync, waitStops: sender_block), Node is tearing the environment
 * down, or the request was not even picked up in the first half of the
 * time left before the send deadline, nor within the pickup time (the
 * request's timeout unless setSender was given one: a blocked event loop).
 *
 * At process exit, before the JS thread blocks, sender.js settles each
 * request it still has: one whose body did not go out whole is declined
 * (libcurl sends it; the server cannot have ingested a cut request), one
 * that went out whole is UNCONFIRMED: not sent again, so the server never
 * gets a profile twice, and counted as uploads_unconfirmed.
 *
 * Threads: send_upload runs on the core's exporter thread; call_js, the
 * done callback and its finalizer on the main JS thread. A job is shared
 * by both and guarded by `mu`; each side holds one reference. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addon.h"

enum { QUEUED, PICKED, ANSWERED, DECLINED, UNCONFIRMED, CANCELLED };

typedef struct {
    int refs;                   /* exporter thread + JS side */
    int state;
    const pn_http_request *req; /* the exporter's, valid while QUEUED */
    long status;                /* ANSWERED: > 0 a status, 0 a transport error */
    int permanent;              /* that error will not go away by retrying */
    char error[256];
    char reply[PN_HTTP_REPLY_KEEP + 1];
} job;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;       /* CLOCK_MONOTONIC; state changes, blocking */
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
/* Written on the main thread (setSender, env cleanup), read by the
 * exporter thread. */
static _Atomic(napi_threadsafe_function) tsfn;
/* setSender was given a function (main thread). */
static int node_wanted;
/* The JS thread cannot run callbacks (exit handler); guarded by mu. */
static int blocked;
/* How long a request may wait for the JS thread to take it (ns; 0: the
 * request's timeout). Set by setSender on the main thread, read by the
 * exporter thread. */
static _Atomic int64_t pickup_ns;
/* Requests node's http ended (an answer or an error), and those handed
 * back to libcurl. Exporter thread writes, any thread reads. */
static _Atomic uint64_t n_sent, n_declined;
#define WAIT_STEP_NS 50000000LL /* how often the abort flag is looked at */
/* Past the request's timeout: the JS timer should have ended it by then. */
#define WAIT_GRACE_NS 1000000000LL

static void init_cv(void) { pn_cond_init_monotonic(&cv); }

/* mu held. Frees j when the other side is done with it. */
static int unref_locked(job *j) { return --j->refs == 0; }

static void unref(job *j)
{
    pthread_mutex_lock(&mu);
    int last = unref_locked(j);
    pthread_mutex_unlock(&mu);
    if (last)
        free(j);
}

/* JS side's verdict; ignored once the exporter thread left. */
static void settle(job *j, int state, long status, const char *error, const char *reply,
                   int permanent)
{
    pthread_mutex_lock(&mu);
    if (j->state == QUEUED || j->state == PICKED) {
        j->state = state;
        j->status = status;
        j->permanent = permanent;
        snprintf(j->error, sizeof j->error, "%s", error ? error : "");
        snprintf(j->reply, sizeof j->reply, "%s", reply ? reply : "");
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
}

void sender_block(int on)
{
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&mu);
    blocked = on;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------------ exporter thread */

/* The JS thread cannot take it: libcurl sends it. */
static int decline(void)
{
    atomic_fetch_add(&n_declined, 1);
    return PN_SENDER_DECLINED;
}

static int send_upload(void *ud, const pn_http_request *req, int64_t deadline_ns,
                       const volatile int *abort, pn_http_response *out)
{
    (void)ud;
    napi_threadsafe_function f = atomic_load(&tsfn);
    pthread_mutex_lock(&mu);
    int is_blocked = blocked;
    pthread_mutex_unlock(&mu);
    if (!f || is_blocked)
        return decline();
    job *j = calloc(1, sizeof *j);
    if (!j)
        return decline();
    j->refs = 2;
    j->state = QUEUED;
    j->req = req;
    if (napi_call_threadsafe_function(f, j, napi_tsfn_nonblocking) != napi_ok) {
        free(j);
        return decline();
    }
    /* Not picked up within the request's timeout (and half the time
     * left): the event loop is blocked; libcurl gets the rest. */
    int64_t start = pn_clock_ns(CLOCK_MONOTONIC);
    int64_t pickup_by = start + (deadline_ns - start) / 2;
    int64_t timeout_ns = (int64_t)(req->timeout_s * 1e9);
    int64_t pickup = atomic_load(&pickup_ns);
    if (pickup <= 0)
        pickup = timeout_ns;
    if (pickup > 0 && start + pickup < pickup_by)
        pickup_by = start + pickup;
    int64_t picked_at = 0;
    int rc;
    pthread_mutex_lock(&mu);
    for (;;) {
        if (j->state == ANSWERED) {
            out->status = j->status;
            memcpy(out->error, j->error, sizeof out->error);
            memcpy(out->reply, j->reply, sizeof out->reply);
            out->permanent = j->permanent;
            rc = j->status > 0 ? PN_SENDER_ANSWERED : PN_SENDER_FAILED;
            break;
        }
        if (j->state == UNCONFIRMED) {
            memcpy(out->error, j->error, sizeof out->error);
            rc = PN_SENDER_UNCONFIRMED;
            break;
        }
        /* Blocked: the JS thread will not run the request (or read its
         * answer) any more. sender.js settled the ones it began (above)
         * before blocking; any other did not go out: libcurl sends it. */
        if (j->state == DECLINED || blocked) {
            rc = PN_SENDER_DECLINED;
            break;
        }
        if (abort && __atomic_load_n(abort, __ATOMIC_ACQUIRE)) {
            snprintf(out->error, sizeof out->error, "aborted: the exporter is stopping");
            rc = PN_SENDER_FAILED;
            break;
        }
        int64_t t = pn_clock_ns(CLOCK_MONOTONIC);
        if (j->state == QUEUED && t >= pickup_by) {
            rc = PN_SENDER_DECLINED;
            break;
        }
        /* Taken, but the loop blocked before its own timer could end it. */
        if (j->state == PICKED && !picked_at)
            picked_at = t;
        if (picked_at && timeout_ns > 0 && t >= picked_at + timeout_ns + WAIT_GRACE_NS) {
            snprintf(out->error, sizeof out->error, "no answer within %g s", req->timeout_s);
            rc = PN_SENDER_FAILED;
            break;
        }
        if (t >= deadline_ns) {
            snprintf(out->error, sizeof out->error, "no answer before the send deadline");
            rc = PN_SENDER_FAILED;
            break;
        }
        struct timespec ts = pn_timespec(t + WAIT_STEP_NS);
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    int was_queued = j->state == QUEUED;
    if (j->state != ANSWERED)
        j->state = CANCELLED;
    j->req = NULL;
    int last = unref_locked(j);
    pthread_mutex_unlock(&mu);
    if (last)
        free(j);
    if (rc != PN_SENDER_DECLINED) {
        atomic_fetch_add(&n_sent, 1);
        return rc;
    }
    pn_log(PN_LOG_DEBUG, "upload: the JS thread %s; libcurl sends it",
           was_queued ? "did not take the request in time" : "cannot finish the request");
    return decline();
}

/* ------------------------------------------------------------ JS thread */

static void set_str(napi_env env, napi_value o, const char *key, const char *s)
{
    napi_value v;
    if (s)
        napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
    else
        napi_get_null(env, &v);
    napi_set_named_property(env, o, key, v);
}

/* done(status, error, reply, permanent): status > 0 the server's answer, 0
 * a transport error (error says why; permanent: not worth retrying), -1
 * declined (libcurl sends it), -2 sent whole but the answer will not be
 * read (the process exits; error says so): not sent again. */
static napi_value m_done(napi_env env, napi_callback_info info)
{
    napi_value argv[4];
    void *data = NULL;
    size_t argc = 4;
    napi_get_cb_info(env, info, &argc, argv, NULL, &data);
    double status = 0;
    if (argc < 1 || js_double(env, argv[0], &status) != 0)
        status = 0;
    char err[256] = "", reply[PN_HTTP_REPLY_KEEP + 1] = "";
    size_t n;
    if (argc >= 2)
        napi_get_value_string_utf8(env, argv[1], err, sizeof err, &n);
    if (argc >= 3)
        napi_get_value_string_utf8(env, argv[2], reply, sizeof reply, &n);
    bool permanent = false;
    if (argc >= 4)
        napi_get_value_bool(env, argv[3], &permanent);
    if (status == -2)
        settle(data, UNCONFIRMED, 0, err, NULL, 0);
    else if (status < 0)
        settle(data, DECLINED, 0, NULL, NULL, 0);
    else
        settle(data, ANSWERED, (long)status, err[0] || status > 0 ? err : "the request failed",
               reply, permanent);
    return js_undefined(env);
}

/* The JS side's reference ends when the done function is collected. */
static void done_finalize(napi_env env, void *data, void *hint)
{
    (void)env, (void)hint;
    unref(data);
}

/* The request as JS sees it; mu held, j QUEUED (its req valid). */
static napi_value request_object(napi_env env, const pn_http_request *r)
{
    napi_value o, headers, body, v;
    napi_create_object(env, &o);
    set_str(env, o, "url", r->url);
    napi_create_object(env, &headers);
    for (size_t i = 0; i < r->nheaders; i++)
        set_str(env, headers, r->headers[i].key, r->headers[i].value);
    napi_set_named_property(env, o, "headers", headers);
    set_str(env, o, "user", r->basic_auth_user);
    set_str(env, o, "password", r->basic_auth_password);
    set_str(env, o, "caFile", r->ca_file);
    set_str(env, o, "caDir", r->ca_dir);
    void *dst;
    if (napi_create_buffer_copy(env, r->body_len, r->body, &dst, &body) != napi_ok)
        return NULL;
    napi_set_named_property(env, o, "body", body);
    napi_create_double(env, r->timeout_s * 1000, &v);
    napi_set_named_property(env, o, "timeoutMs", v);
    napi_create_double(env, r->connect_timeout_s * 1000, &v);
    napi_set_named_property(env, o, "connectTimeoutMs", v);
    return o;
}

static void call_js(napi_env env, napi_value js_cb, void *context, void *data)
{
    (void)context;
    job *j = data;
    if (!env || !js_cb) {   /* Node is tearing down: no JS any more */
        settle(j, DECLINED, 0, NULL, NULL, 0);
        unref(j);
        return;
    }
    pthread_mutex_lock(&mu);
    napi_value req = NULL, done = NULL;
    if (j->state == QUEUED) {
        req = request_object(env, j->req);
        if (req && napi_create_function(env, "done", NAPI_AUTO_LENGTH, m_done, j, &done) == napi_ok &&
            napi_add_finalizer(env, done, j, done_finalize, NULL, NULL) == napi_ok)
            j->state = PICKED;
        else
            done = NULL;
    }
    pthread_mutex_unlock(&mu);
    if (!done) {            /* taken back by the exporter, or no memory */
        settle(j, DECLINED, 0, NULL, NULL, 0);
        unref(j);
        return;
    }
    /* From here the finalizer owns the JS side's reference. */
    napi_value global, args[2] = {req, done}, ret;
    napi_get_global(env, &global);
    if (napi_call_function(env, global, js_cb, 2, args, &ret) != napi_ok) {
        napi_value exc;
        napi_get_and_clear_last_exception(env, &exc);
        settle(j, ANSWERED, 0, "the JS sender threw", NULL, 0);
    }
}

static void cleanup(void *arg)
{
    (void)arg;
    pn_http_set_sender(NULL, NULL);
    atomic_store(&tsfn, NULL);
    sender_block(1);
}

/* setSender(fn(request, done) | null, pickupMs?): uploads go through fn
 * from the main thread's next start() on (sender_apply); null: through
 * libcurl. pickupMs: how long a
 * request waits for the JS thread before libcurl sends it (default: the
 * request's timeout; tests shorten it). */
static napi_value m_set_sender(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    int is_fn = js_fn_arg(env, info, &argv[0], "setSender: expects a function(request, done) or null");
    if (is_fn < 0)
        return NULL;
    double pickup_ms = 0;
    if (js_args(env, info, argv, 2) >= 2 && js_double(env, argv[1], &pickup_ms) != 0)
        pickup_ms = 0;
    pthread_once(&cv_once, init_cv);
    /* A worker's call changes nothing: its start() uploads through libcurl
     * (sender_apply), and the process's sender is the main thread's. */
    if (!on_main_thread())
        return js_undefined(env);
    atomic_store(&pickup_ns, pickup_ms > 0 ? (int64_t)(pickup_ms * 1e6) : 0);
    node_wanted = is_fn;
    if (is_fn && !atomic_load(&tsfn)) {
        napi_value name;
        napi_create_string_utf8(env, "pyroscope-upload", NAPI_AUTO_LENGTH, &name);
        napi_threadsafe_function f;
        if (napi_create_threadsafe_function(env, argv[0], NULL, name, 0, 1, NULL, NULL, NULL,
                                            call_js, &f) != napi_ok)
            return NULL;
        /* Never keeps the process alive: a request in flight does (its
         * socket), and stop()'s async work does while it waits. */
        napi_unref_threadsafe_function(env, f);
        atomic_store(&tsfn, f);
        napi_add_env_cleanup_hook(env, cleanup, NULL);
    }
    return js_undefined(env);
}

void sender_apply(void)
{
    /* A worker's agent uploads through libcurl: Node's http here runs on
     * the main thread's loop, which may not profile, or not even load us. */
    if (on_main_thread() && node_wanted && atomic_load(&tsfn)) {
        sender_block(0);
        pn_http_set_sender(send_upload, NULL);
    } else {
        pn_http_set_sender(NULL, NULL);
    }
}

/* senderStats() -> {sent, declined}: requests node's http ended, and those
 * libcurl sent instead. */
static napi_value m_sender_stats(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value o;
    napi_create_object(env, &o);
    set_num(env, o, "sent", (double)atomic_load(&n_sent));
    set_num(env, o, "declined", (double)atomic_load(&n_declined));
    return o;
}

void sender_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "setSender", m_set_sender);
    set_fn(env, exports, "senderStats", m_sender_stats);
}
