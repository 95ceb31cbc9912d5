/* The relay (pn_http_relay_*): the fallback sender of a binding whose
 * runtime sends uploads on a thread of its own when libcurl cannot be
 * loaded (Python's http.client, Ruby's Net::HTTP). The exporter thread never
 * calls into the runtime: it puts its request in one slot and waits; the
 * runtime's thread waits in pn_http_relay_next (its lock released), takes
 * a copy, sends it, and hands the answer back (pn_http_relay_done).
 *
 * The slot holds one request at a time (a retiring agent's exporter and the
 * new one's take turns). The exporter leaves when the answer came, at its
 * deadline, or when told to abort; the request is copied while it waits,
 * and an answer that comes after it left is dropped (its id no longer
 * matches).
 *
 * Threads: relay_send on the core's exporter thread(s); next/done/attach on
 * the runtime's sender thread; the fork hooks on the forking thread.
 * Everything below is guarded by mu, a leaf lock (nothing else is taken
 * while it is held). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_native.h"
#include "export/http_sender.h"

enum { IDLE, QUEUED, PICKED, ANSWERED };

typedef struct {
    int state;
    const pn_http_request *req; /* the exporter's, read while QUEUED */
    unsigned long id;
    pn_http_response *out;      /* the exporter's; written by done */
} slot_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;       /* CLOCK_MONOTONIC: any change of the slot */
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static slot_t slot;
static unsigned long next_id = 1;
static int workers;             /* runtime threads attached */
#define WAIT_STEP_NS 50000000LL /* how often the abort flag is looked at */

static void init_cv(void) { pn_cond_init_monotonic(&cv); }

/* mu held: wait until `until` (CLOCK_MONOTONIC ns) or a signal. */
static void wait_until(int64_t until)
{
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000LL),
                          .tv_nsec = (long)(until % 1000000000LL)};
    pthread_cond_timedwait(&cv, &mu, &ts);
}

static int64_t now_ns(void) { return pn_clock_ns(CLOCK_MONOTONIC); }

static int relay_send(void *ud, const pn_http_request *req, int64_t deadline_ns,
                      const volatile int *abort, pn_http_response *out)
{
    (void)ud;
    static const volatile int never = 0;
    if (!abort)
        abort = &never;
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&mu);
    while (slot.state != IDLE && !*abort && now_ns() < deadline_ns && workers)
        wait_until(now_ns() + WAIT_STEP_NS);
    if (!workers || slot.state != IDLE || *abort || now_ns() >= deadline_ns) {
        snprintf(out->error, sizeof out->error, "%s",
                 !workers ? "libcurl cannot be loaded and the runtime's sender thread is not running"
                          : "the runtime's sender thread did not take the request in time");
        pthread_mutex_unlock(&mu);
        return PN_SENDER_FAILED;
    }
    unsigned long id = next_id++;
    slot = (slot_t){.state = QUEUED, .req = req, .id = id, .out = out};
    pthread_cond_broadcast(&cv);
    while (slot.id == id && slot.state != ANSWERED && !*abort && now_ns() < deadline_ns)
        wait_until(now_ns() + WAIT_STEP_NS);
    int answered = slot.id == id && slot.state == ANSWERED;
    int picked = slot.id == id && slot.state == PICKED;
    if (slot.id == id) {
        slot = (slot_t){.state = IDLE};
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (answered)
        return out->error[0] ? PN_SENDER_FAILED : PN_SENDER_ANSWERED;
    snprintf(out->error, sizeof out->error, "%s",
             picked ? "no answer before the send deadline (the runtime's HTTP client)"
                    : "the runtime's sender thread did not take the request in time");
    return PN_SENDER_FAILED;
}

void pn_http_relay_install(void)
{
    pthread_once(&cv_once, init_cv);
    pn_http_set_fallback_sender(relay_send, NULL);
}

void pn_http_relay_attach(int on)
{
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&mu);
    if (on)
        workers++;
    else if (workers > 0)
        workers--;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static char *dup_str(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

/* mu held: a copy of r owned by the caller (NULL: out of memory). */
static pn_http_relayed *copy_request(const pn_http_request *r, unsigned long id)
{
    pn_http_relayed *c = calloc(1, sizeof *c);
    pn_label *h = calloc(r->nheaders ? r->nheaders : 1, sizeof *h);
    uint8_t *body = malloc(r->body_len ? r->body_len : 1);
    int oom = !c || !h || !body;
    if (!oom) {
        c->id = id;
        c->req = *r;
        memcpy(body, r->body, r->body_len);
        c->req.body = body;
        c->req.headers = h;
        for (size_t i = 0; i < r->nheaders; i++) {
            h[i].key = dup_str(r->headers[i].key, &oom);
            h[i].value = dup_str(r->headers[i].value, &oom);
        }
        c->req.url = dup_str(r->url, &oom);
        c->req.basic_auth_user = dup_str(r->basic_auth_user, &oom);
        c->req.basic_auth_password = dup_str(r->basic_auth_password, &oom);
        c->req.ca_file = dup_str(r->ca_file, &oom);
        c->req.ca_dir = dup_str(r->ca_dir, &oom);
    }
    if (oom) {
        if (c) {
            c->req.headers = h;
            c->req.body = body;
            pn_http_relay_free(c);
        } else {
            free(h);
            free(body);
        }
        return NULL;
    }
    return c;
}

pn_http_relayed *pn_http_relay_next(double wait_s)
{
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&mu);
    int64_t until = now_ns() + (int64_t)(wait_s > 0 ? wait_s * 1e9 : 0);
    while (slot.state != QUEUED && now_ns() < until)
        wait_until(until);
    pn_http_relayed *c = NULL;
    if (slot.state == QUEUED && (c = copy_request(slot.req, slot.id)))
        slot.state = PICKED;
    pthread_mutex_unlock(&mu);
    return c;
}

void pn_http_relay_done(unsigned long id, long status, const char *reply, size_t reply_len,
                        const char *error, int permanent)
{
    pthread_mutex_lock(&mu);
    if (slot.id == id && slot.state == PICKED) {
        pn_http_response *o = slot.out;
        o->status = status;
        o->permanent = permanent;
        size_t n = reply_len < PN_HTTP_REPLY_KEEP ? reply_len : PN_HTTP_REPLY_KEEP;
        if (reply)
            memcpy(o->reply, reply, n);
        o->reply[reply ? n : 0] = '\0';
        if (error)
            snprintf(o->error, sizeof o->error, "%s", *error ? error : "the HTTP client failed");
        slot.state = ANSWERED;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
}

void pn_http_relay_free(pn_http_relayed *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->req.headers && i < c->req.nheaders; i++) {
        free((char *)c->req.headers[i].key);
        free((char *)c->req.headers[i].value);
    }
    free((pn_label *)c->req.headers);
    free((uint8_t *)c->req.body);
    free((char *)c->req.url);
    free((char *)c->req.basic_auth_user);
    free((char *)c->req.basic_auth_password);
    free((char *)c->req.ca_file);
    free((char *)c->req.ca_dir);
    free(c);
}

/* The fork path (fork.c): mu is held across fork(), so the child's copy is
 * consistent; there only the forking thread exists (no sender thread, no
 * exporter waiting). */
void pn_http_relay_fork_prepare(void) { pthread_mutex_lock(&mu); }

void pn_http_relay_fork_parent(void) { pthread_mutex_unlock(&mu); }

void pn_http_relay_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    mu = fresh;
    init_cv();
    slot = (slot_t){.state = IDLE};
    workers = 0;
}
