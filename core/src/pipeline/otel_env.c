/* OTEL_* environment variables: where OpenTelemetry users already say
 * where telemetry goes, who the service is, and how to authenticate. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/otel_env.h"
#include "support/utf8.h"

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return (*envp)[n + 1] ? *envp + n + 1 : NULL;
    return NULL;
}

int pn_env_text(const char *name, size_t n, const char *v, pn_error *e)
{
    size_t len = strlen(v), ok = pn_utf8_valid_prefix(v, len);
    if (ok == len)
        return 0;
    return pn_fail(e, PN_EINVAL, "environment variable %.*s: its value is not valid UTF-8 "
                   "(byte 0x%02x at offset %zu); settings must be UTF-8 text", (int)n, name,
                   (unsigned char)v[ok], ok);
}

/* The first of two variables (b may be NULL) that is set: the signal's own wins. */
static const char *env_first(char *const *envp, const char *a, const char *b, const char **which)
{
    const char *v = env_get(envp, a);
    *which = a;
    if (!v && b) {
        v = env_get(envp, b);
        *which = b;
    }
    return v;
}

/* The variables read for each setting no keyword gave. */
static const struct {
    const char *setting, *vars[2];
} read_for[] = {
    {"application_name", {"OTEL_SERVICE_NAME"}},
    {"otlp_endpoint", {"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}},
    {"otlp_headers", {"OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"}},
    {"otlp_protocol", {"OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"}},
    {"resource_attributes", {"OTEL_RESOURCE_ATTRIBUTES"}},
};

int pn_config_apply_otel_env(pn_config *c, char *const *envp, pn_error *e)
{
    pn_error why;
    const char *v, *var;
    for (size_t i = 0; i < sizeof read_for / sizeof read_for[0]; i++) {
        if (pn_config_is_given(c, read_for[i].setting))
            continue;
        if ((v = env_first(envp, read_for[i].vars[0], read_for[i].vars[1], &var)) &&
            pn_env_text(var, strlen(var), v, e) != 0)
            return -1; /* only the variable that is read: the signal's own wins */
    }
    if (!pn_config_is_given(c, "application_name") && (v = env_get(envp, "OTEL_SERVICE_NAME"))) {
        /* An OTel service name may hold characters Pyroscope's application
         * names may not: then it is only a resource attribute's business. */
        if (pn_config_set(c, "application_name", v, &why) != 0)
            pn_log(PN_LOG_WARN, "OTEL_SERVICE_NAME ignored as the application name: %s", why.msg);
    }
    if (!pn_config_is_given(c, "otlp_endpoint") &&
        (v = env_first(envp, "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                       &var)) &&
        pn_config_set(c, "otlp_endpoint", v, &why) != 0)
        return pn_fail(e, why.code, "environment variable %s: %s", var, why.msg);
    if (!pn_config_is_given(c, "otlp_headers") &&
        (v = env_first(envp, "OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS",
                       &var))) {
        pn_label *kv = NULL;
        size_t n = 0;
        if (pn_otel_pairs_parse(var, v, &kv, &n, e) != 0)
            return -1;
        int rc = pn_config_set_pairs(c, "otlp_headers", kv, n, &why);
        pn_pairs_free(kv, n);
        if (rc != 0)
            return pn_fail(e, why.code, "environment variable %s: %s", var, why.msg);
    }
    if (!pn_config_is_given(c, "otlp_protocol") &&
        (v = env_first(envp, "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL",
                       &var)) &&
        pn_config_set(c, "otlp_protocol", v, &why) != 0)
        return pn_fail(e, why.code, "environment variable %s: %s", var, why.msg);
    if (!pn_config_is_given(c, "resource_attributes") &&
        (v = env_get(envp, "OTEL_RESOURCE_ATTRIBUTES")) &&
        pn_config_set(c, "resource_attributes", v, &why) != 0)
        return pn_fail(e, why.code, "environment variable OTEL_RESOURCE_ATTRIBUTES: %s", why.msg);
    return 0;
}
