/* Internal: sending one HTTP request and reading its reply.
 *
 * Two transports share these types: the built-in client (http_client.c:
 * plain TCP, http:// only, no proxy) and libcurl (curl_client.c: https://
 * and proxies, loaded on first use). The caller gives the whole request
 * (URL, headers, body pieces, deadlines, a stop callback) and gets back the
 * status and the first bytes of the reply body, or a failure kind that
 * says whether trying again can help.
 */
#ifndef PN_HTTP_CLIENT_H
#define PN_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "pyroscope_native.h"

/* Bytes of the reply body kept (for error messages); the rest is read and
 * dropped. */
#define PN_HTTP_REPLY_KEEP 300

/* The parts of an http(s) URL a transport needs. Pointers point into the
 * parsed string. */
typedef struct {
    int https;
    char host[256];             /* name or address, IPv6 without brackets */
    char authority[272];        /* for Host: host[:port], port only when not the default */
    char port[6];               /* decimal, the scheme's default when absent */
    const char *userinfo;       /* "user:password" (still %-encoded); NULL if none */
    size_t userinfo_len;
    const char *target;         /* path and query; "" stands for "/" */
} pn_http_url;

/* Splits "http(s)://[userinfo@]host[:port][/path][?query]". Fails (naming
 * the URL and the rule) on another scheme, an empty or too long host, a bad
 * port, an unclosed IPv6 bracket, spaces, control characters or '#'. */
int pn_http_url_parse(const char *url, pn_http_url *out, pn_error *e);

/* A header the transports refuse: an empty name or one with ':', spaces,
 * control or non-ASCII characters, or a value with CR, LF or another
 * control character other than tab (it would let the value inject headers
 * or end the request head). The message names the header. */
int pn_http_header_check(const char *name, const char *value, pn_error *e);

typedef enum {
    PN_HTTP_FAIL_NONE = 0,
    PN_HTTP_FAIL_NET,           /* resolve/connect/send/receive failed or the reply
                                 * was malformed: a later attempt may work */
    PN_HTTP_FAIL_TIMEOUT,       /* no complete reply before a deadline */
    PN_HTTP_FAIL_STOPPED,       /* the stop callback asked to give up */
    PN_HTTP_FAIL_PERMANENT,     /* cannot work as given (bad URL or header, libcurl
                                 * missing): trying again will not help */
    PN_HTTP_FAIL_NOMEM,
} pn_http_failure;

typedef struct {
    const char *url;            /* absolute http:// (or https:// for libcurl) URL */
    /* Sent in order after the request line. The transport adds Host and
     * "Connection: close" (each unless given here) and Content-Length;
     * Content-Length and Transfer-Encoding here are refused. */
    const pn_label *headers;
    size_t nheaders;
    const struct iovec *body;   /* POST body, sent as these pieces back to back */
    size_t nbody;
    int64_t connect_deadline_ns;    /* CLOCK_MONOTONIC; TCP connect done by then */
    int64_t deadline_ns;            /* the whole exchange done by then */
    /* Asked at least every 50 ms while waiting; non-zero: give up at once
     * (PN_HTTP_FAIL_STOPPED). May be NULL. */
    int (*stop)(void *ud);
    void *stop_ud;
} pn_http_request;

typedef struct {
    int status;                 /* the final (non-1xx) status */
    char body[PN_HTTP_REPLY_KEEP + 1];  /* first bytes of the body, NUL-terminated */
    size_t body_len;            /* bytes in body[] */
    pn_http_failure failure;    /* why the send failed, when it did */
} pn_http_reply;

/* POST with the built-in client (http:// only). Returns 0 once a complete
 * reply was read, whatever its status; -1 with rp->failure and e set
 * otherwise. Blocks the calling thread, bounded by the deadlines and the
 * stop callback (name resolution included). */
int pn_http_post(const pn_http_request *rq, pn_http_reply *rp, pn_error *e);

/* The same through libcurl (curl_client.c), which is loaded on first use;
 * for https:// URLs and proxies. A libcurl that cannot be loaded is a
 * PN_HTTP_FAIL_PERMANENT failure whose message names it. */
int pn_curl_post(const pn_http_request *rq, pn_http_reply *rp, pn_error *e);

#endif
