/* TLS for the test server (OpenSSL): a self-signed certificate made at
 * start-up, and a pump between a TLS connection and a plain socket, so
 * the server's HTTP code stays the same for https://. */
#ifndef PN_TEST_TLS_H
#define PN_TEST_TLS_H

typedef struct test_tls test_tls;

/* A fresh P-256 key and certificate for 127.0.0.1, ::1 and localhost,
 * written as PEM to a temporary file. NULL (message on stderr) on failure. */
test_tls *test_tls_new(void);
/* The certificate's PEM file, for the client to trust. */
const char *test_tls_ca_file(const test_tls *t);
/* Removes the file. NULL is fine. */
void test_tls_free(test_tls *t);

/* Accepts TLS on tcp and copies bytes both ways between it and plain
 * until the client or the plain side closes, or stop_fd becomes readable. */
void test_tls_pump(test_tls *t, int tcp, int plain, int stop_fd);

#endif
