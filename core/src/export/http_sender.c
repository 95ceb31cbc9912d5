/* The binding's sender: where it is kept, and the multipart body it is
 * given (libcurl's curl_mime builds that body on the libcurl path). */
#include "export/http_sender.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Set by the binding's thread, read when an HTTP exporter is made. */
static pthread_mutex_t sender_mu = PTHREAD_MUTEX_INITIALIZER;
static pn_http_sender_fn sender_fn;
static void *sender_ud;

void pn_http_set_sender(pn_http_sender_fn fn, void *ud)
{
    pthread_mutex_lock(&sender_mu);
    sender_fn = fn;
    sender_ud = ud;
    pthread_mutex_unlock(&sender_mu);
}

void pn_http_sender_get(pn_http_sender_fn *fn, void **ud)
{
    pthread_mutex_lock(&sender_mu);
    *fn = sender_fn;
    *ud = sender_ud;
    pthread_mutex_unlock(&sender_mu);
}

/* Random hex digits (16, as libcurl): a boundary that the gzip'ed profile is as unlikely
 * to contain as libcurl's own (it also uses random ones). */
static void random_hex(char *out, size_t ndigits)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^
                     (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < sizeof r; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            r[i] = (unsigned char)(x >> 56);
    }
    for (size_t i = 0; i < ndigits; i++)
        out[i] = hex[(r[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[ndigits] = '\0';
}

int pn_http_multipart(const uint8_t *data, size_t len, const char *name, const char *filename,
                      uint8_t **body, size_t *body_len, char *content_type, size_t ct_size)
{
    char boundary[64];
    memcpy(boundary, "------------------------", 24);
    random_hex(boundary + 24, 16);
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                      "Content-Type: application/octet-stream\r\n\r\n",
                      boundary, name, filename);
    char tail[96];
    int tn = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    if (hn < 0 || (size_t)hn >= sizeof head || tn < 0 || (size_t)tn >= sizeof tail)
        return -1;
    size_t n = (size_t)hn + len + (size_t)tn;
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return -1;
    memcpy(b, head, (size_t)hn);
    if (len)
        memcpy(b + hn, data, len);
    memcpy(b + hn + len, tail, (size_t)tn);
    *body = b;
    *body_len = n;
    snprintf(content_type, ct_size, "multipart/form-data; boundary=%s", boundary);
    return 0;
}
