/* Internal: the binding's sender (pn_http_set_sender) and the request body
 * the HTTP exporter hands it. */
#ifndef PN_HTTP_SENDER_H
#define PN_HTTP_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "pyroscope_native.h"

/* The sender set now (NULL: none). Any thread. */
void pn_http_sender_get(pn_http_sender_fn *fn, void **ud);

/* A multipart/form-data body of one file part (field `name`, `filename`,
 * application/octet-stream) holding data, as libcurl's curl_mime sends it,
 * with a random boundary. *body is malloc'ed; content_type gets
 * "multipart/form-data; boundary=...". -1: out of memory. Any thread. */
int pn_http_multipart(const uint8_t *data, size_t len, const char *name, const char *filename,
                      uint8_t **body, size_t *body_len, char *content_type, size_t ct_size);

#endif
