/* A small forward HTTP proxy for tests, on 127.0.0.1 with an ephemeral
 * port: absolute-form requests ("POST http://127.0.0.1:4040/x HTTP/1.1")
 * are passed on to the origin, CONNECT opens a tunnel (for https://).
 * Only loopback destinations are served (403 otherwise). It records the
 * request line of every connection. */
#ifndef PN_TEST_HTTP_PROXY_H
#define PN_TEST_HTTP_PROXY_H

#include <stddef.h>

typedef struct test_proxy test_proxy;

/* NULL (with a message on stderr) when it cannot start. */
test_proxy *test_proxy_start(void);
/* Closes every connection, joins every thread, frees everything. */
void test_proxy_stop(test_proxy *p);
/* "http://127.0.0.1:<port>" */
const char *test_proxy_url(const test_proxy *p);
/* Connections that sent a request line. */
size_t test_proxy_count(test_proxy *p);
/* The i-th request line (without CRLF), valid until stop; NULL when there
 * are not that many. */
const char *test_proxy_request_line(test_proxy *p, size_t i);

#endif
