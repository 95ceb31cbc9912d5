/* The standard OpenTelemetry environment variables, read into the config
 * (see pn_config_apply_env). Core and tests only. */
#ifndef PN_OTEL_ENV_H
#define PN_OTEL_ENV_H

#include "pyroscope_native.h"
#include "support/otel_pairs.h"

/* OTEL_* variables of envp into c, for settings no keyword gave;
 * PYROSCOPE_* ones are applied after. */
int pn_config_apply_otel_env(pn_config *c, char *const *envp, pn_error *e);

/* 0 when the value of variable `name` (n bytes) is UTF-8 text, as every
 * setting is; else -1 naming the variable and the first bad byte, never
 * the value (it may be a password). */
int pn_env_text(const char *name, size_t n, const char *value, pn_error *e);

/* Whether a binding gave the setting (c->given). */
int pn_config_is_given(const pn_config *c, const char *name);

#endif
