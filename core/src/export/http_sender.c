/* The binding's senders (pn_http_set_sender, pn_http_set_fallback_sender):
 * where they are kept. */
#include "export/http_sender.h"

#include "export/curl_loader.h"

#include <pthread.h>

/* Set by the binding's thread, read when an HTTP exporter is made. */
static pthread_mutex_t sender_mu = PTHREAD_MUTEX_INITIALIZER;
static pn_http_sender_fn sender_fn;
static void *sender_ud;
static pn_http_sender_fn fallback_fn;
static void *fallback_ud;

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

void pn_http_set_fallback_sender(pn_http_sender_fn fn, void *ud)
{
    pthread_mutex_lock(&sender_mu);
    fallback_fn = fn;
    fallback_ud = ud;
    pthread_mutex_unlock(&sender_mu);
}

void pn_http_fallback_sender_get(pn_http_sender_fn *fn, void **ud)
{
    pthread_mutex_lock(&sender_mu);
    *fn = fallback_fn;
    *ud = fallback_ud;
    pthread_mutex_unlock(&sender_mu);
}

int pn_http_libcurl_available(void)
{
    return pn_curl_load(NULL) != NULL;
}
