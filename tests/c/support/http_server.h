/* A small HTTP/1.1 server for tests, on 127.0.0.1 with an ephemeral port,
 * plain or TLS (a self-signed certificate made at start-up).
 *
 * It records every request (method, target, headers, body) and answers each
 * one from a script: replies queued with test_server_reply() are used in
 * arrival order, then the default reply (200 "ok" unless changed). A reply
 * can be delayed, never sent at all (the connection is held open until
 * the client gives up or the server stops), given as raw bytes (chunked,
 * without a length, cut short), or be hostile: bytes that never end, or
 * that come one at a time. One thread per connection; one request per
 * connection ("Connection: close") unless keep-alive is switched on.
 */
#ifndef PN_TEST_HTTP_SERVER_H
#define PN_TEST_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define TEST_SERVER_HANG 0      /* status meaning: never answer */

typedef struct test_server test_server;

typedef struct {
    size_t conn;                /* the connection it came on, numbered from 0 */
    char *head;                 /* the request line and headers, byte for byte */
    char method[16];
    char *target;               /* path and query, as sent */
    size_t nheaders;
    char **names, **values;     /* as sent, value without surrounding spaces */
    uint8_t *body;              /* NUL-terminated for convenience */
    size_t body_len;
} test_request;

/* NULL (with a message on stderr) when the server cannot start. */
test_server *test_server_start(void);
/* The same on another loopback address, e.g. "::1" (URL
 * "http://[::1]:<port>"); NULL, quietly, when it cannot be bound there. */
test_server *test_server_start_at(const char *ip);
/* The same with TLS: URL "https://127.0.0.1:<port>", certificate for
 * 127.0.0.1 and localhost, self-signed; test_server_ca_file() names the
 * PEM file a client must trust. NULL (with a message) when it cannot start. */
test_server *test_server_start_tls(void);
const char *test_server_ca_file(const test_server *s);
/* Closes every connection, joins every thread, frees all requests (and
 * removes the certificate file). */
void test_server_stop(test_server *s);
int test_server_port(const test_server *s);
/* "http://127.0.0.1:<port>" (or "http://[::1]:<port>") */
const char *test_server_url(const test_server *s);

/* Queue the reply to the next unanswered request (status TEST_SERVER_HANG:
 * never answer). body may be NULL. */
void test_server_reply(test_server *s, int status, const char *body, int delay_ms);
/* Queue a reply sent byte for byte, after which the server closes the
 * connection: chunked bodies, bodies without a length, cut-off replies. */
void test_server_reply_raw(test_server *s, const char *bytes, size_t len);
/* Queue a reply that never ends: `head`, then `chunk` again and again as
 * fast as the client reads, until it goes away or the server stops. */
void test_server_reply_stream(test_server *s, const char *head, size_t head_len, const char *chunk,
                              size_t chunk_len);
/* Queue a reply sent one byte every interval_ms. */
void test_server_reply_drip(test_server *s, const char *bytes, size_t len, int interval_ms);
/* Keep connections open after a normal reply, for the client's next
 * request (off: every reply says "Connection: close"). */
void test_server_keep_alive(test_server *s, int on);
/* The reply used once the queued ones are used up. */
void test_server_default_reply(test_server *s, int status, const char *body, int delay_ms);

size_t test_server_count(test_server *s);
/* Wait until at least n requests were received, at most timeout_s; returns
 * the count seen. */
size_t test_server_wait(test_server *s, size_t n, double timeout_s);
/* The i-th request (arrival order), valid until test_server_stop; NULL when
 * there are not that many. */
const test_request *test_server_request(test_server *s, size_t i);
/* Case-insensitive header lookup; NULL when absent. */
const char *test_request_header(const test_request *r, const char *name);

/* A port on 127.0.0.1 that nothing listens on (bound, then closed). */
int test_free_port(void);

#endif
