/* The standard OpenTelemetry environment variables, read into the config
 * (see pn_config_apply_env). Core and tests only. */
#ifndef PN_OTEL_ENV_H
#define PN_OTEL_ENV_H

#include "pyroscope_native.h"

/* OTEL_* variables of envp into c, for settings no keyword gave;
 * PYROSCOPE_* ones are applied after. */
int pn_config_apply_otel_env(pn_config *c, char *const *envp, pn_error *e);

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
/* Whether a binding gave the setting (c->given). */
int pn_config_is_given(const pn_config *c, const char *name);

#endif
