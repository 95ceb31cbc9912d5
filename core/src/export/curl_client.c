/* One HTTP request through libcurl (see http_client.h): the transport for
 * https:// URLs and for requests that go through a proxy. libcurl is
 * loaded on first use (curl_loader.c) and applies the proxy environment
 * variables itself.
 *
 * curl calls the progress callback only about once a second on an idle
 * connection, so we drive the transfer ourselves in short poll steps to see
 * the stop callback and the deadline promptly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/clock.h"
#include "export/curl_loader.h"
#include "export/http_client.h"

#define POLL_STEP_MS 50

/* The body pieces, read front to back (rewound when curl asks). */
typedef struct {
    const struct iovec *body;
    size_t nbody, total;
    size_t piece, off;
} body_reader;

static size_t on_read(char *dst, size_t size, size_t n, void *ud)
{
    body_reader *b = ud;
    size_t room = size * n, done = 0;
    while (done < room && b->piece < b->nbody) {
        const struct iovec *v = &b->body[b->piece];
        size_t take = v->iov_len - b->off;
        if (take > room - done)
            take = room - done;
        memcpy(dst + done, (const char *)v->iov_base + b->off, take);
        done += take;
        b->off += take;
        if (b->off == v->iov_len) {
            b->piece++;
            b->off = 0;
        }
    }
    return done;
}

static int on_seek(void *ud, curl_off_t offset, int origin)
{
    body_reader *b = ud;
    if (origin != SEEK_SET || offset < 0 || (unsigned long long)offset > b->total)
        return CURL_SEEKFUNC_CANTSEEK;
    size_t left = (size_t)offset;
    b->piece = 0;
    while (b->piece < b->nbody && left >= b->body[b->piece].iov_len) {
        left -= b->body[b->piece].iov_len;
        b->piece++;
    }
    b->off = left;
    return CURL_SEEKFUNC_OK;
}

/* Keeps the first PN_HTTP_REPLY_KEEP bytes of the reply body. */
static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    pn_http_reply *rp = ud;
    size_t total = size * n, room = PN_HTTP_REPLY_KEEP - rp->body_len;
    size_t take = total < room ? total : room;
    memcpy(rp->body + rp->body_len, data, take);
    rp->body_len += take;
    rp->body[rp->body_len] = '\0';
    return total;
}

typedef struct {
    const pn_http_request *rq;
    int64_t deadline;
} stop_check;

static int should_stop(const stop_check *s)
{
    return (s->rq->stop && s->rq->stop(s->rq->stop_ud)) || pn_clock_ns(CLOCK_MONOTONIC) >= s->deadline;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return should_stop(ud);
}

static long ms_until(int64_t deadline, int64_t now)
{
    int64_t ms = (deadline - now + 999999) / 1000000;
    return ms < 1 ? 1 : (long)ms;
}

#define FAIL(kind, code, ...) (rp->failure = (kind), pn_fail(e, (code), __VA_ARGS__))

int pn_curl_post(const pn_http_request *rq, pn_http_reply *rp, pn_error *e)
{
    if (!rp)
        return pn_fail(e, PN_EINVAL, "HTTP request: no reply to fill");
    memset(rp, 0, sizeof *rp);
    if (!rq || !rq->url || (rq->nheaders && !rq->headers) || (rq->nbody && !rq->body))
        return FAIL(PN_HTTP_FAIL_PERMANENT, PN_EINVAL, "HTTP request: URL, headers or body missing");
    for (size_t i = 0; i < rq->nheaders; i++)
        if (pn_http_header_check(rq->headers[i].key, rq->headers[i].value, e)) {
            rp->failure = PN_HTTP_FAIL_PERMANENT;
            return -1;
        }
    body_reader br = {.body = rq->body, .nbody = rq->nbody};
    for (size_t i = 0; i < rq->nbody; i++)
        br.total += rq->body[i].iov_len;

    const pn_curl_api *cu = pn_curl_load(e);
    if (!cu) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e ? e->msg : "");
        return FAIL(PN_HTTP_FAIL_PERMANENT, PN_EIO, "%s (libcurl is needed for https:// addresses and proxies)",
                    why);
    }

    int64_t start = pn_clock_ns(CLOCK_MONOTONIC);
    int64_t deadline = rq->deadline_ns;
    int64_t conn_deadline = rq->connect_deadline_ns < deadline ? rq->connect_deadline_ns : deadline;
    if (start >= deadline)
        return FAIL(PN_HTTP_FAIL_TIMEOUT, PN_EIO, "no time left for the request");
    stop_check stop = {rq, deadline};

    int rc = -1;
    char curl_err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    char *line = NULL;
    CURLM *m = cu->multi_init();
    CURL *c = cu->easy_init();
    int added = 0;
    if (!m || !c)
        goto oom;

    /* An empty Expect: stops curl from waiting for "100 Continue" (up to a
     * second) before it sends the body. */
    struct curl_slist *t = cu->slist_append(NULL, "Expect:");
    if (!t)
        goto oom;
    hdrs = t;
    for (size_t i = 0; i < rq->nheaders; i++) {
        const char *k = rq->headers[i].key, *v = rq->headers[i].value;
        size_t n = strlen(k) + strlen(v) + 3;
        char *l = realloc(line, n);
        if (!l)
            goto oom;
        line = l;
        /* "Name:" alone would make curl drop the header; "Name;" sends it
         * with an empty value. */
        if (*v)
            snprintf(line, n, "%s: %s", k, v);
        else
            snprintf(line, n, "%s;", k);
        if (!(t = cu->slist_append(hdrs, line)))
            goto oom;
        hdrs = t;
    }

    int ok = cu->easy_setopt(c, CURLOPT_URL, rq->url) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_POST, 1L) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)br.total) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_READFUNCTION, on_read) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_READDATA, &br) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_SEEKDATA, &br) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
             /* We live in other people's processes: no SIGALRM games. */
             cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms_until(conn_deadline, start)) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_TIMEOUT_MS, ms_until(deadline, start)) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_WRITEDATA, rp) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_XFERINFODATA, &stop) == CURLE_OK &&
             cu->easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err) == CURLE_OK;
    if (!ok || cu->multi_add_handle(m, c) != CURLM_OK)
        goto oom;
    added = 1;

    int running = 1, stopped = 0;
    CURLMcode mc = CURLM_OK;
    for (;;) {
        mc = cu->multi_perform(m, &running);
        if (mc != CURLM_OK || !running)
            break;
        if (should_stop(&stop)) {
            stopped = 1;
            break;
        }
        mc = cu->multi_poll(m, NULL, 0, POLL_STEP_MS, NULL);
        if (mc != CURLM_OK)
            break;
    }

    CURLcode cc = CURLE_OK;
    if (!stopped && mc == CURLM_OK) {
        int nmsg;
        CURLMsg *msg;
        cc = CURLE_RECV_ERROR;
        while ((msg = cu->multi_info_read(m, &nmsg)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c)
                cc = msg->data.result;
        if (cc == CURLE_ABORTED_BY_CALLBACK)
            stopped = 1;
    }

    if (stopped) {
        /* The stop callback, or our deadline before curl's own timer. */
        if (rq->stop && rq->stop(rq->stop_ud))
            FAIL(PN_HTTP_FAIL_STOPPED, PN_EIO, "stopped");
        else
            FAIL(PN_HTTP_FAIL_TIMEOUT, PN_EIO, "no complete reply within %.2f s",
                 (double)(deadline - start) / 1e9);
    } else if (mc != CURLM_OK) {
        FAIL(PN_HTTP_FAIL_NET, PN_EIO, "%s", cu->multi_strerror(mc));
    } else if (cc != CURLE_OK) {
        pn_http_failure kind = PN_HTTP_FAIL_NET;
        if (cc == CURLE_OPERATION_TIMEDOUT)
            kind = PN_HTTP_FAIL_TIMEOUT;
        else if (cc == CURLE_OUT_OF_MEMORY)
            kind = PN_HTTP_FAIL_NOMEM;
        /* A URL curl cannot use will not work on a later attempt either. */
        else if (cc == CURLE_URL_MALFORMAT || cc == CURLE_UNSUPPORTED_PROTOCOL)
            kind = PN_HTTP_FAIL_PERMANENT;
        FAIL(kind, kind == PN_HTTP_FAIL_NOMEM ? PN_ENOMEM : PN_EIO, "%s%s%s", cu->easy_strerror(cc),
             curl_err[0] ? ": " : "", curl_err);
    } else {
        long status = 0;
        cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        rp->status = (int)status;
        rc = 0;
    }
    goto out;

oom:
    FAIL(PN_HTTP_FAIL_NOMEM, PN_ENOMEM, "out of memory preparing the libcurl request");
out:
    if (added)
        cu->multi_remove_handle(m, c);
    if (c)
        cu->easy_cleanup(c);
    if (m)
        cu->multi_cleanup(m);
    cu->slist_free_all(hdrs);
    free(line);
    return rc;
}
