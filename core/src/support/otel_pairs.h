/* OTel "key=value,..." lists (see otel_pairs.c). */
#ifndef PN_OTEL_PAIRS_H
#define PN_OTEL_PAIRS_H

#include "pyroscope_native.h"

/* Parses the W3C-baggage-like list of OTEL_RESOURCE_ATTRIBUTES and
 * OTEL_EXPORTER_OTLP_HEADERS: "key=value,key2=value2", blanks around
 * entries trimmed, values percent-decoded. Fails naming `what` on a
 * missing '=', an empty key, a bad escape or a control character. When
 * out is not NULL, *out (n pairs, keys and values malloc'ed) is filled;
 * free with pn_pairs_free. */
int pn_otel_pairs_parse(const char *what, const char *v, pn_label **out, size_t *n,
                        pn_error *e);
/* The same for the resource_attributes setting. */
int pn_resource_attributes_parse(const char *v, pn_label **out, size_t *n, pn_error *e);
void pn_pairs_free(pn_label *kv, size_t n);
#endif
