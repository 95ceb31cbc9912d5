/* Internal: the binding's sender (pn_http_set_sender). */
#ifndef PN_HTTP_SENDER_H
#define PN_HTTP_SENDER_H

#include "pyroscope_native.h"

/* The sender set now (NULL: none). Any thread. */
void pn_http_sender_get(pn_http_sender_fn *fn, void **ud);

#endif
