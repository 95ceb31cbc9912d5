/* The standard OpenTelemetry environment variables, read into the config
 * (see pn_config_apply_env). Core and tests only. */
#ifndef PN_OTEL_ENV_H
#define PN_OTEL_ENV_H

#include "pyroscope_native.h"
#include "support/otel_pairs.h"

/* OTEL_* variables of envp into c, for settings no keyword gave;
 * PYROSCOPE_* ones are applied after. */
int pn_config_apply_otel_env(pn_config *c, char *const *envp, pn_error *e);

/* Whether a binding gave the setting (c->given). */
int pn_config_is_given(const pn_config *c, const char *name);

#endif
