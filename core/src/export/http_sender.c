/* The binding's sender (pn_http_set_sender): where it is kept. */
#include "export/http_sender.h"

#include <pthread.h>

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
