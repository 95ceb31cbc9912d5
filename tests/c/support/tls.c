/* TLS for the test server (see tls.h). */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

struct test_tls {
    SSL_CTX *ctx;
    char ca_file[64];
};

static int add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* What `openssl req -x509` makes: a self-signed CA certificate, here
 * also naming the loopback addresses. */
static X509 *make_cert(EVP_PKEY *key)
{
    X509 *x = X509_new();
    if (!x)
        return NULL;
    X509_NAME *name = X509_get_subject_name(x);
    int ok = X509_set_version(x, 2) && ASN1_INTEGER_set(X509_get_serialNumber(x), 1) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600) && X509_set_pubkey(x, key) &&
             X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                                        -1, 0) &&
             X509_set_issuer_name(x, name) && add_ext(x, NID_basic_constraints, "critical,CA:TRUE") == 0 &&
             add_ext(x, NID_subject_key_identifier, "hash") == 0 &&
             add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") == 0 &&
             X509_sign(x, key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

test_tls *test_tls_new(void)
{
    test_tls *t = calloc(1, sizeof *t);
    EVP_PKEY *key = t ? EVP_EC_gen("P-256") : NULL;
    X509 *x = key ? make_cert(key) : NULL;
    int fd = -1;
    FILE *f = NULL;
    if (x) {
        snprintf(t->ca_file, sizeof t->ca_file, "/tmp/pn-test-ca-XXXXXX");
        fd = mkstemp(t->ca_file);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
    }
    int ok = f && PEM_write_X509(f, x) == 1;
    if (f)
        ok = fclose(f) == 0 && ok;
    else if (fd >= 0)
        close(fd);
    if (ok) {
        t->ctx = SSL_CTX_new(TLS_server_method());
        ok = t->ctx && SSL_CTX_use_certificate(t->ctx, x) == 1 && SSL_CTX_use_PrivateKey(t->ctx, key) == 1;
    }
    X509_free(x);
    EVP_PKEY_free(key);
    if (!ok) {
        fprintf(stderr, "test TLS: cannot make a certificate: %s\n", ERR_error_string(ERR_get_error(), NULL));
        test_tls_free(t);
        return NULL;
    }
    return t;
}

const char *test_tls_ca_file(const test_tls *t) { return t->ca_file; }

void test_tls_free(test_tls *t)
{
    if (!t)
        return;
    if (t->ca_file[0])
        unlink(t->ca_file);
    SSL_CTX_free(t->ctx);
    free(t);
}

/* Waits until fd can do `events` or stop_fd is readable: 0 ready, -1 stop. */
static int wait_fd(int fd, short events, int stop_fd)
{
    struct pollfd p[2] = {{.fd = stop_fd, .events = POLLIN}, {.fd = fd, .events = events}};
    while (poll(p, 2, -1) < 0)
        if (errno != EINTR)
            return -1;
    return p[0].revents ? -1 : 0;
}

/* Waits as SSL asks after a WANT_READ / WANT_WRITE: 0 go on, -1 give up. */
static int wait_ssl(SSL *ssl, int rc, int tcp, int stop_fd)
{
    int err = SSL_get_error(ssl, rc);
    if (err == SSL_ERROR_WANT_READ)
        return wait_fd(tcp, POLLIN, stop_fd);
    if (err == SSL_ERROR_WANT_WRITE)
        return wait_fd(tcp, POLLOUT, stop_fd);
    return -1;
}

static int ssl_write_all(SSL *ssl, const char *p, int n, int tcp, int stop_fd)
{
    for (;;) {
        int w = SSL_write(ssl, p, n);
        if (w > 0)
            return 0;
        if (wait_ssl(ssl, w, tcp, stop_fd))
            return -1;
    }
}

void test_tls_pump(test_tls *t, int tcp, int plain, int stop_fd)
{
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl)
        return;
    fcntl(tcp, F_SETFL, fcntl(tcp, F_GETFL) | O_NONBLOCK);
    SSL_set_fd(ssl, tcp);
    for (;;) {
        int rc = SSL_accept(ssl);
        if (rc == 1)
            break;
        if (wait_ssl(ssl, rc, tcp, stop_fd))
            goto out;   /* e.g. the client did not trust the certificate */
    }
    char buf[16384];
    int client_open = 1;
    for (;;) {
        /* Everything OpenSSL can decrypt now, before waiting again. */
        while (client_open) {
            int n = SSL_read(ssl, buf, sizeof buf);
            if (n > 0) {
                if (test_send_all(plain, buf, (size_t)n))
                    goto out;
                continue;
            }
            int err = SSL_get_error(ssl, n);
            if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
                break;
            /* The client is done sending: the HTTP side reads EOF. */
            client_open = 0;
            shutdown(plain, SHUT_WR);
        }
        struct pollfd p[3] = {{.fd = stop_fd, .events = POLLIN},
                              {.fd = plain, .events = POLLIN},
                              {.fd = tcp, .events = client_open ? POLLIN : 0}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            goto out;
        }
        if (p[0].revents)
            goto out;
        if (p[1].revents) {
            ssize_t n = read(plain, buf, sizeof buf);
            if (n <= 0) {
                (void)SSL_shutdown(ssl);    /* close_notify; the client may be gone */
                goto out;
            }
            if (ssl_write_all(ssl, buf, (int)n, tcp, stop_fd))
                goto out;
        }
    }
out:
    SSL_free(ssl);
}
