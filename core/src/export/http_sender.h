/* Internal: the binding's senders (pn_http_set_sender, _set_fallback_sender). */
#ifndef PN_HTTP_SENDER_H
#define PN_HTTP_SENDER_H

#include "pyroscope_native.h"

/* The sender set now (NULL: none). Any thread. */
void pn_http_sender_get(pn_http_sender_fn *fn, void **ud);
/* The fallback for a missing libcurl (NULL: none). Any thread. */
void pn_http_fallback_sender_get(pn_http_sender_fn *fn, void **ud);

#endif
