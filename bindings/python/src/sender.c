/* Uploads through Python's own http.client when libcurl cannot be loaded
 * (an image without libcurl.so.4): the core's fallback sender
 * (pn_http_set_fallback_sender). The core's exporter thread never calls
 * into Python: it puts the request in one slot and waits; a Python daemon
 * thread (pyroscope/_sender.py, started by configure only when libcurl is
 * missing) waits in sender_next with the GIL released, copies the request
 * into Python objects, sends it, and hands the answer back (sender_done).
 *
 * The slot holds at most one request (a retiring agent's exporter and the
 * new one's take turns). The exporter leaves when the answer came, at its
 * deadline, or when told to abort; the request's fields are read only
 * while it waits (under mu), and an answer that comes after it left is
 * dropped (its generation no longer matches).
 *
 * Threads: sender_send runs on the core's exporter thread(s); sender_next,
 * sender_done on Python threads with the GIL; the fork hooks in fork(). Everything
 * below is guarded by mu. */
#include "sender.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pyroscope_native.h"

enum { IDLE, QUEUED, PICKED, ANSWERED };

typedef struct {
    int state;
    const pn_http_request *req; /* the exporter's, read while QUEUED/PICKED */
    unsigned long gen;
    pn_http_response *out;      /* the exporter's; written by sender_done */
} slot_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;       /* CLOCK_MONOTONIC: any change of the slot */
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static slot_t slot;
static unsigned long next_gen = 1;
static int workers;             /* Python sender threads attached */
#define WAIT_STEP_NS 50000000LL /* how often the abort flag is looked at */

static void init_cv(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &a);
    pthread_condattr_destroy(&a);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* mu held: wait until `until` (CLOCK_MONOTONIC ns) or a signal. */
static void wait_until(int64_t until)
{
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000LL),
                          .tv_nsec = (long)(until % 1000000000LL)};
    pthread_cond_timedwait(&cv, &mu, &ts);
}

/* The core's exporter thread: one request, until answered, the deadline or
 * abort. */
static int sender_send(void *ud, const pn_http_request *req, int64_t deadline_ns,
                       const volatile int *abort, pn_http_response *out)
{
    (void)ud;
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&mu);
    /* The slot may be another exporter's for now. */
    while (slot.state != IDLE && !*abort && now_ns() < deadline_ns && workers)
        wait_until(now_ns() + WAIT_STEP_NS);
    if (!workers || slot.state != IDLE || *abort || now_ns() >= deadline_ns) {
        snprintf(out->error, sizeof out->error, "%s",
                 !workers ? "libcurl cannot be loaded and Python's sender thread is not running"
                          : "Python's sender thread did not take the request in time");
        pthread_mutex_unlock(&mu);
        return PN_SENDER_FAILED;
    }
    unsigned long gen = next_gen++;
    slot = (slot_t){.state = QUEUED, .req = req, .gen = gen, .out = out};
    pthread_cond_broadcast(&cv);
    while (slot.gen == gen && slot.state != ANSWERED && !*abort && now_ns() < deadline_ns)
        wait_until(now_ns() + WAIT_STEP_NS);
    int answered = slot.gen == gen && slot.state == ANSWERED;
    int picked = slot.gen == gen && slot.state == PICKED;
    if (slot.gen == gen) {
        slot = (slot_t){.state = IDLE};
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (answered)
        return out->error[0] ? PN_SENDER_FAILED : PN_SENDER_ANSWERED;
    snprintf(out->error, sizeof out->error, "%s",
             picked ? "no answer before the send deadline (Python's http.client)"
                    : "Python's sender thread did not take the request in time");
    return PN_SENDER_FAILED;
}

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

void py_sender_install(void)
{
    pthread_once(&cv_once, init_cv);
    pn_fork_hook(fork_prepare, fork_parent, fork_child);
    pn_http_set_fallback_sender(sender_send, NULL);
}

/* A str of s (NULL: None). */
static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* mu held, GIL held: the QUEUED request as
 * (gen, url, [(name, value)], body, user, password, timeout_s,
 *  connect_timeout_s, ca_file, ca_dir). */
static PyObject *request_tuple(const pn_http_request *r, unsigned long gen)
{
    PyObject *headers = PyList_New((Py_ssize_t)r->nheaders);
    for (size_t i = 0; headers && i < r->nheaders; i++) {
        PyObject *kv = Py_BuildValue("(NN)", str_or_none(r->headers[i].key),
                                     str_or_none(r->headers[i].value));
        if (!kv) {
            Py_CLEAR(headers);
            break;
        }
        PyList_SET_ITEM(headers, (Py_ssize_t)i, kv);
    }
    if (!headers)
        return NULL;
    return Py_BuildValue("(kNNy#NNddNN)", gen, str_or_none(r->url), headers,
                         (const char *)r->body, (Py_ssize_t)r->body_len,
                         str_or_none(r->basic_auth_user), str_or_none(r->basic_auth_password),
                         r->timeout_s, r->connect_timeout_s, str_or_none(r->ca_file),
                         str_or_none(r->ca_dir));
}

PyObject *py_sender_next(PyObject *self, PyObject *arg)
{
    (void)self;
    double wait_s = PyFloat_AsDouble(arg);
    if (wait_s == -1.0 && PyErr_Occurred())
        return NULL;
    pthread_once(&cv_once, init_cv);
    PyObject *result = NULL;
    int got = 0;
    const pn_http_request *req = NULL;
    unsigned long gen = 0;
    /* Wait without the GIL; take the request with mu held, so the exporter
     * cannot leave while it is copied (the copy needs the GIL: mu is let go
     * first, then re-taken with the GIL held; the exporter never waits for
     * the GIL, so the order cannot deadlock). */
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&mu);
    int64_t until = now_ns() + (int64_t)(wait_s * 1e9);
    while (slot.state != QUEUED && now_ns() < until)
        wait_until(until);
    got = slot.state == QUEUED;
    if (got)
        gen = slot.gen;
    pthread_mutex_unlock(&mu);
    Py_END_ALLOW_THREADS
    if (!got)
        Py_RETURN_NONE;
    pthread_mutex_lock(&mu);
    if (slot.state == QUEUED && slot.gen == gen) {
        req = slot.req;
        result = request_tuple(req, gen);
        if (result)
            slot.state = PICKED;
    }
    pthread_mutex_unlock(&mu);
    if (!result && !PyErr_Occurred())
        Py_RETURN_NONE;   /* the exporter gave up meanwhile */
    return result;
}

PyObject *py_sender_done(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long gen;
    long status;
    const char *reply, *error;
    Py_ssize_t reply_len;
    int permanent;
    if (!PyArg_ParseTuple(args, "kly#zp", &gen, &status, &reply, &reply_len, &error, &permanent))
        return NULL;
    pthread_mutex_lock(&mu);
    if (slot.gen == gen && slot.state == PICKED) {
        pn_http_response *o = slot.out;
        o->status = status;
        o->permanent = permanent;
        size_t n = (size_t)reply_len < PN_HTTP_REPLY_KEEP ? (size_t)reply_len : PN_HTTP_REPLY_KEEP;
        memcpy(o->reply, reply, n);
        o->reply[n] = '\0';
        if (error)
            snprintf(o->error, sizeof o->error, "%s", *error ? error : "http.client failed");
        slot.state = ANSWERED;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    Py_RETURN_NONE;
}

PyObject *py_sender_attach(PyObject *self, PyObject *on)
{
    (void)self;
    int attach = PyObject_IsTrue(on);
    if (attach < 0)
        return NULL;
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&mu);
    if (attach)
        workers++;
    else if (workers > 0)
        workers--;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    Py_RETURN_NONE;
}

/* The core's fork path (pn_fork_hook), inside fork(): mu is held across
 * it, so the child's copy is consistent; there only the forking thread
 * exists (no sender thread, no exporter waiting). */
static void fork_prepare(void) { pthread_mutex_lock(&mu); }

static void fork_parent(void) { pthread_mutex_unlock(&mu); }

static void fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    mu = fresh;
    init_cv();
    slot = (slot_t){.state = IDLE};
    workers = 0;
}
