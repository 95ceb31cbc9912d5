/* Settings: one table of names, parsers and rules, shared by keyword
 * arguments (through the bindings) and PYROSCOPE_* environment variables. */
#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pyroscope_native.h"
#include "support/url.h"
#include "pipeline/otel_env.h"

extern char **environ;

void pn_config_init(pn_config *c)
{
    memset(c, 0, sizeof *c);
    c->sample_rate = 100;
    c->upload_interval = 10;
    c->oncpu = 1;
    c->fault_guard = 1;
    c->log_level = PN_LOG_WARN;
    c->max_stacks = 16384;
    c->max_depth = 128;
    c->stop_timeout = 5;
    c->sampler_cpu_budget = 1;
    c->memory_interval = 512 * 1024;
    c->memory_max_live = 65536;
}

static void free_pairs(pn_label *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)kv[i].key);
        free((char *)kv[i].value);
    }
    free(kv);
}

void pn_config_free(pn_config *c)
{
    free(c->application_name);
    free(c->server_address);
    free_pairs(c->tags, c->ntags);
    free(c->basic_auth_username);
    free(c->basic_auth_password);
    free(c->tenant_id);
    free_pairs(c->http_headers, c->nheaders);
    free(c->output_dir);
    free(c->spy_name);
    free(c->otlp_endpoint);
    free_pairs(c->otlp_headers, c->notlp_headers);
    free(c->resource_attributes);
    free(c->runtime_name);
    free(c->runtime_version);
    memset(c, 0, sizeof *c);
}

static int dup_str(char **dst, const char *src, pn_error *e)
{
    char *s = NULL;
    if (src && !(s = strdup(src)))
        return pn_fail(e, PN_ENOMEM, "out of memory copying a setting");
    free(*dst);
    *dst = s;
    return 0;
}

static int dup_pairs(pn_label **dst, size_t *ndst, const pn_label *src, size_t n, pn_error *e)
{
    pn_label *kv = n ? calloc(n, sizeof *kv) : NULL;
    if (n && !kv)
        return pn_fail(e, PN_ENOMEM, "out of memory copying a setting");
    for (size_t i = 0; i < n; i++) {
        kv[i].key = strdup(src[i].key);
        kv[i].value = strdup(src[i].value);
        if (!kv[i].key || !kv[i].value) {
            free_pairs(kv, i + 1);
            return pn_fail(e, PN_ENOMEM, "out of memory copying a setting");
        }
    }
    free_pairs(*dst, *ndst);
    *dst = kv;
    *ndst = n;
    return 0;
}

int pn_config_copy(pn_config *dst, const pn_config *src, pn_error *e)
{
    pn_config_init(dst);
    pn_config tmp = *src;
    tmp.application_name = tmp.server_address = tmp.basic_auth_username = NULL;
    tmp.basic_auth_password = tmp.tenant_id = tmp.output_dir = tmp.spy_name = NULL;
    tmp.tags = tmp.http_headers = NULL;
    tmp.ntags = tmp.nheaders = 0;
    tmp.otlp_endpoint = tmp.resource_attributes = tmp.runtime_name = tmp.runtime_version = NULL;
    tmp.otlp_headers = NULL;
    tmp.notlp_headers = 0;
    *dst = tmp;
    if (dup_str(&dst->application_name, src->application_name, e) ||
        dup_str(&dst->server_address, src->server_address, e) ||
        dup_str(&dst->basic_auth_username, src->basic_auth_username, e) ||
        dup_str(&dst->basic_auth_password, src->basic_auth_password, e) ||
        dup_str(&dst->tenant_id, src->tenant_id, e) ||
        dup_str(&dst->output_dir, src->output_dir, e) ||
        dup_str(&dst->spy_name, src->spy_name, e) ||
        dup_pairs(&dst->tags, &dst->ntags, src->tags, src->ntags, e) ||
        dup_pairs(&dst->http_headers, &dst->nheaders, src->http_headers, src->nheaders, e) ||
        dup_str(&dst->otlp_endpoint, src->otlp_endpoint, e) ||
        dup_pairs(&dst->otlp_headers, &dst->notlp_headers, src->otlp_headers,
                  src->notlp_headers, e) ||
        dup_str(&dst->resource_attributes, src->resource_attributes, e) ||
        dup_str(&dst->runtime_name, src->runtime_name, e) ||
        dup_str(&dst->runtime_version, src->runtime_version, e)) {
        pn_config_free(dst);
        return -1;
    }
    return 0;
}

/* ----------------------------------------------------------------- parsers */

static int parse_bool(const char *name, const char *v, int *out, pn_error *e)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return pn_fail(e, PN_EINVAL, "%s: \"%.100s\" is not a boolean (use true/false, 1/0, yes/no, "
                   "on/off)", name, v);
}

/* A decimal number, surrounded by optional spaces. Parsed in the C locale:
 * the host program may have set one where strtod reads "0.5" as 0 (a ','
 * decimal separator), and hex, inf and nan are not meant as settings.
 * Returns 0, -1 (not a decimal number) or -2 (out of memory). */
static int parse_decimal(const char *v, double *out)
{
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    if (n == 0 || strspn(v, "0123456789+-.eE") != n)
        return -1;
    locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0)
        return -2;
    locale_t previous = uselocale(c_locale);
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    int err = errno;
    uselocale(previous);
    freelocale(c_locale);
    if (end != v + n || err != 0 || !isfinite(d))
        return -1;
    *out = d;
    return 0;
}

/* %.15g: "10000001", not "1e+07", so a rule and a value never print alike. */
static int parse_number(const char *name, const char *v, double lo, double hi, const char *unit,
                        int whole, double *out, pn_error *e)
{
    const char *sp = unit[0] ? " " : "";
    const char *kind = whole ? "a whole number" : "a decimal number";
    double d;
    int rc = parse_decimal(v, &d);
    if (rc == -2)
        return pn_fail(e, PN_ENOMEM, "%s: out of memory parsing a number", name);
    if (rc != 0)
        return pn_fail(e, PN_EINVAL, "%s: \"%.100s\" is not %s; it must be %s between %.15g and "
                       "%.15g%s%s", name, v, kind, kind, lo, hi, sp, unit);
    if (whole && d != floor(d))
        return pn_fail(e, PN_EINVAL, "%s: %.15g is not a whole number; it must be a whole number "
                       "between %.15g and %.15g%s%s", name, d, lo, hi, sp, unit);
    if (d < lo || d > hi)
        return pn_fail(e, PN_EINVAL, "%s: %.15g is out of range; it must be between %.15g and "
                       "%.15g%s%s", name, d, lo, hi, sp, unit);
    *out = d;
    return 0;
}

/* Seconds, optionally with a unit: "10", "2.5s", "500ms", "1m". */
static int parse_seconds(const char *name, const char *v, double lo, double hi, double *out,
                         pn_error *e)
{
    char buf[64];
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    double scale = 1, d;
    int rc = -1;
    if (n < sizeof buf) {
        memcpy(buf, v, n);
        buf[n] = '\0';
        if (n > 2 && strcmp(buf + n - 2, "ms") == 0) {
            scale = 1e-3;
            buf[n - 2] = '\0';
        } else if (n > 1 && buf[n - 1] == 's') {
            buf[n - 1] = '\0';
        } else if (n > 1 && buf[n - 1] == 'm') {
            scale = 60;
            buf[n - 1] = '\0';
        }
        rc = parse_decimal(buf, &d);
    }
    if (rc == -2)
        return pn_fail(e, PN_ENOMEM, "%s: out of memory parsing a duration", name);
    if (rc != 0)
        return pn_fail(e, PN_EINVAL, "%s: \"%.*s\" is not a duration; use seconds (\"10\", "
                       "\"2.5s\"), \"500ms\" or \"1m\", between %.15g and %.15g seconds", name,
                       (int)(n < 100 ? n : 100), v, lo, hi);
    d *= scale;
    if (d < lo || d > hi)
        return pn_fail(e, PN_EINVAL, "%s: %.15g s is out of range; it must be between %.15g and "
                       "%.15g seconds", name, d, lo, hi);
    *out = d;
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

typedef int (*pair_check)(const char *setting, const char *k, const char *v, pn_error *e);

static int check_tag(const char *setting, const char *k, const char *v, pn_error *e)
{
    pn_error why; /* e may be NULL: the label rule's words go through here */
    if (pn_label_check_name(k, &why) != 0 || pn_label_check_value(k, v, &why) != 0)
        return pn_fail(e, PN_EINVAL, "%s: %s", setting, why.msg);
    return 0;
}

/* Bytes below 0x20 and DEL: the HTTP exporter refuses them in header values,
 * so they are refused here, when the setting is made. */
static int has_control(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    }
    return 0;
}

static int check_header(const char *setting, const char *k, const char *v, pn_error *e)
{
    if (!k[0])
        return pn_fail(e, PN_EINVAL, "%s: a header name is empty", setting);
    for (const char *p = k; *p; p++) {
        if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
            return pn_fail(e, PN_EINVAL, "%s: header name \"%.100s\" has '%c'; allowed: "
                           "letters, digits and !#$%%&'*+-.^_`|~", setting, k, *p);
    }
    if (has_control(v))
        return pn_fail(e, PN_EINVAL, "%s: header \"%.100s\" value contains a control character "
                       "(line break, tab, ...)", setting, k);
    return 0;
}

/* A key given twice would make two tags with one name in the ingest name. */
static int check_unique(const char *setting, const pn_label *kv, size_t n, pn_error *e)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (strcmp(kv[i].key, kv[j].key) == 0)
                return pn_fail(e, PN_EINVAL, "%s: \"%.100s\" is given twice; each key may "
                               "appear once", setting, kv[i].key);
        }
    }
    return 0;
}

/* "k=v,k2=v2" (spaces around items ignored; empty string: none). */
static int parse_pairs(const char *setting, const char *v, pair_check check, int unique,
                       pn_label **out, size_t *nout, pn_error *e)
{
    char *copy = strdup(v);
    if (!copy)
        return pn_fail(e, PN_ENOMEM, "out of memory parsing %s", setting);
    pn_label kv[PN_MAX_LABELS];
    size_t n = 0;
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        item = trim(item);
        if (!item[0])
            continue;
        char *eq = strchr(item, '=');
        if (!eq) {
            rc = pn_fail(e, PN_EINVAL, "%s: \"%.100s\" is not key=value (expected "
                         "\"k=v,k2=v2\")", setting, item);
            break;
        }
        *eq = '\0';
        if (n == PN_MAX_LABELS) {
            rc = pn_fail(e, PN_ELIMIT, "%s: more than %d entries", setting, PN_MAX_LABELS);
            break;
        }
        kv[n].key = trim(item);
        kv[n].value = trim(eq + 1);
        if ((rc = check(setting, kv[n].key, kv[n].value, e)) != 0)
            break;
        n++;
    }
    if (rc == 0 && unique)
        rc = check_unique(setting, kv, n, e);
    if (rc == 0)
        rc = dup_pairs(out, nout, kv, n, e);
    free(copy);
    return rc;
}

/* ------------------------------------------------------------------ table */

typedef enum {
    K_STR, K_BOOL, K_RATE, K_SECONDS, K_TAGS, K_HEADERS, K_LEVEL, K_U32,
    K_OTLP_HEADERS, K_PERCENT, K_PROTOCOL
} kind;

typedef struct {
    const char *name;
    kind k;
    size_t off;
    double lo, hi; /* numbers */
} setting;

#define OFF(f) offsetof(pn_config, f)

static const setting settings[] = {
    {"application_name", K_STR, OFF(application_name), 0, 0},
    {"server_address", K_STR, OFF(server_address), 0, 0},
    {"sample_rate", K_RATE, OFF(sample_rate), 0.1, 10000},
    {"upload_interval", K_SECONDS, OFF(upload_interval), 0.05, 3600},
    {"oncpu", K_BOOL, OFF(oncpu), 0, 0},
    {"tags", K_TAGS, OFF(tags), 0, 0},
    {"basic_auth_username", K_STR, OFF(basic_auth_username), 0, 0},
    {"basic_auth_password", K_STR, OFF(basic_auth_password), 0, 0},
    {"tenant_id", K_STR, OFF(tenant_id), 0, 0},
    {"http_headers", K_HEADERS, OFF(http_headers), 0, 0},
    {"output_dir", K_STR, OFF(output_dir), 0, 0},
    {"report_pid", K_BOOL, OFF(report_pid), 0, 0},
    {"report_thread_id", K_BOOL, OFF(report_thread_id), 0, 0},
    {"report_thread_name", K_BOOL, OFF(report_thread_name), 0, 0},
    {"log_level", K_LEVEL, OFF(log_level), 0, 0},
    {"max_stacks", K_U32, OFF(max_stacks), 16, 10000000},
    {"max_depth", K_U32, OFF(max_depth), 2, 1000},
    {"stop_timeout", K_SECONDS, OFF(stop_timeout), 0, 60},
    {"spy_name", K_STR, OFF(spy_name), 0, 0},
    {"fault_guard", K_BOOL, OFF(fault_guard), 0, 0},
    {"otlp_endpoint", K_STR, OFF(otlp_endpoint), 0, 0},
    {"otlp_headers", K_OTLP_HEADERS, OFF(otlp_headers), 0, 0},
    {"otlp_protocol", K_PROTOCOL, OFF(otlp_protocol), 0, 0},
    {"resource_attributes", K_STR, OFF(resource_attributes), 0, 0},
    {"runtime_name", K_STR, OFF(runtime_name), 0, 0},
    {"runtime_version", K_STR, OFF(runtime_version), 0, 0},
    {"sampler_cpu_budget", K_PERCENT, OFF(sampler_cpu_budget), 0, 100},
    {"strict_labels", K_BOOL, OFF(strict_labels), 0, 0},
    {"memory", K_BOOL, OFF(memory), 0, 0},
    {"memory_interval", K_U32, OFF(memory_interval), 1, 1u << 30},
    {"memory_max_live", K_U32, OFF(memory_max_live), 16, 1u << 22},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

/* Filled once (pthread_once), then only read, by any thread. */
static const char *setting_names[NSETTINGS + 1];
static pthread_once_t setting_names_once = PTHREAD_ONCE_INIT;

static void fill_setting_names(void)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        setting_names[i] = settings[i].name;
}

const char *const *pn_config_names(void)
{
    pthread_once(&setting_names_once, fill_setting_names);
    return setting_names;
}

/* Rules for string settings, checked as they are set. */
static int check_string(const char *name, const char *v, pn_error *e)
{
    if (strcmp(name, "application_name") == 0)
        return pn_label_check_app_name(v, e);
    if (strcmp(name, "resource_attributes") == 0)
        return pn_resource_attributes_parse(v, NULL, NULL, e);
    if (strcmp(name, "server_address") == 0 || strcmp(name, "otlp_endpoint") == 0) {
        /* The rules the HTTP exporter applies at start, so a bad address
         * fails here, where the setting is named. */
        if (!v[0])
            return 0;
        char shown[256]; /* what messages show: never the password */
        pn_url_redact(v, shown, sizeof shown);
        size_t skip = strncasecmp(v, "http://", 7) == 0    ? 7
                      : strncasecmp(v, "https://", 8) == 0 ? 8
                                                           : 0;
        if (!skip)
            return pn_fail(e, PN_EINVAL, "%s: \"%.200s\" must start with http:// "
                           "or https://", name, shown);
        if (v[skip] == '\0' || v[skip] == '/')
            return pn_fail(e, PN_EINVAL, "%s: \"%.200s\" has no host after the "
                           "scheme", name, shown);
        if (strpbrk(v, " ?#") || has_control(v))
            return pn_fail(e, PN_EINVAL, "%s: \"%.200s\" must not contain white "
                           "space, control characters, a query (?) or a fragment (#)", name, shown);
        return 0;
    }
    if (strcmp(name, "tenant_id") == 0 && has_control(v))
        return pn_fail(e, PN_EINVAL, "tenant_id must not contain control characters (it is "
                       "sent as the X-Scope-OrgID header)");
    if (strcmp(name, "basic_auth_username") == 0 && strchr(v, ':'))
        return pn_fail(e, PN_EINVAL, "basic_auth_username must not contain ':' (HTTP Basic "
                       "auth separates user and password with it)");
    if (strcmp(name, "spy_name") == 0) {
        for (const char *p = v; *p; p++) {
            if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
                return pn_fail(e, PN_EINVAL, "spy_name: \"%.100s\" may use letters, digits, "
                               "'_', '-' and '.'", v);
        }
    }
    if (strpbrk(v, "\r\n"))
        return pn_fail(e, PN_EINVAL, "%s must not contain a line break", name);
    return 0;
}

int pn_config_set(pn_config *c, const char *name, const char *value, pn_error *e)
{
    if (!name)
        return pn_fail(e, PN_EINVAL, "setting name missing");
    const setting *s = NULL;
    for (size_t i = 0; i < NSETTINGS && !s; i++) {
        if (strcmp(settings[i].name, name) == 0)
            s = &settings[i];
    }
    if (!s)
        return pn_fail(e, PN_EINVAL, "unknown setting \"%.100s\"", name);
    if (!value)
        return pn_fail(e, PN_EINVAL, "%s: a value is required", name);
    char *field = (char *)c + s->off;
    switch (s->k) {
    case K_STR: {
        if (check_string(name, value, e) != 0)
            return -1;
        return dup_str((char **)field, value[0] ? value : NULL, e);
    }
    case K_BOOL:
        return parse_bool(name, value, (int *)field, e);
    case K_RATE:
        return parse_number(name, value, s->lo, s->hi, "Hz", 0, (double *)field, e);
    case K_PERCENT:
        return parse_number(name, value, s->lo, s->hi, "% of one core (0: no limit)", 0,
                            (double *)field, e);
    case K_SECONDS:
        return parse_seconds(name, value, s->lo, s->hi, (double *)field, e);
    case K_U32: {
        double d;
        if (parse_number(name, value, s->lo, s->hi, "", 1, &d, e) != 0)
            return -1;
        *(uint32_t *)field = (uint32_t)d;
        return 0;
    }
    case K_TAGS:
        return parse_pairs(name, value, check_tag, 1, &c->tags, &c->ntags, e);
    case K_HEADERS:
        return parse_pairs(name, value, check_header, 0, &c->http_headers, &c->nheaders, e);
    case K_OTLP_HEADERS:
        return parse_pairs(name, value, check_header, 0, &c->otlp_headers, &c->notlp_headers, e);
    case K_PROTOCOL: {
        /* The values OTEL_EXPORTER_OTLP_PROTOCOL may take (the spec's). */
        static const char *const names[] = {"http/protobuf", "http/json", "grpc"};
        for (int i = 0; i < 3; i++)
            if (strcmp(value, names[i]) == 0)
                return *(int *)field = i, 0;
        return pn_fail(e, PN_EINVAL, "%s: \"%.40s\" is not one of grpc, http/protobuf, "
                       "http/json", name, value);
    }
    case K_LEVEL: {
        int level;
        double d;
        if (pn_log_level_parse(value, &level) == 0) {
            c->log_level = level;
            return 0;
        }
        if (parse_number(name, value, 0, PN_LOG_OFF, "", 1, &d, NULL) == 0) {
            c->log_level = (int)d;
            return 0;
        }
        return pn_fail(e, PN_EINVAL, "log_level: \"%.40s\" is not one of debug, info, warning, "
                       "error, off (or a whole number from 0 to 100)", value);
    }
    }
    return pn_fail(e, PN_EINVAL, "%s: unsupported setting kind", name);
}

int pn_config_set_pairs(pn_config *c, const char *name, const pn_label *kv, size_t n,
                        pn_error *e)
{
    int tags = name && strcmp(name, "tags") == 0;
    int otlp = name && strcmp(name, "otlp_headers") == 0;
    if (!tags && !otlp && !(name && strcmp(name, "http_headers") == 0))
        return pn_fail(e, PN_EINVAL, "%.100s: not a setting made of key/value pairs (only "
                       "tags, http_headers and otlp_headers are)", name ? name : "(null)");
    if (n > PN_MAX_LABELS)
        return pn_fail(e, PN_ELIMIT, "%s: more than %d entries", name, PN_MAX_LABELS);
    for (size_t i = 0; i < n; i++) {
        if (!kv[i].key || !kv[i].value)
            return pn_fail(e, PN_EINVAL, "%s: entry %zu has no key or no value", name, i);
        if ((tags ? check_tag : check_header)(name, kv[i].key, kv[i].value, e) != 0)
            return -1;
    }
    if (tags && check_unique(name, kv, n, e) != 0)
        return -1;
    if (otlp)
        return dup_pairs(&c->otlp_headers, &c->notlp_headers, kv, n, e);
    return tags ? dup_pairs(&c->tags, &c->ntags, kv, n, e)
                : dup_pairs(&c->http_headers, &c->nheaders, kv, n, e);
}

/* Variables the anchors' users set (Grafana's examples): PYROSCOPE_BASIC_AUTH_USER
 * is basic_auth_username unless PYROSCOPE_BASIC_AUTH_USERNAME is set too;
 * PYROSCOPE_AUTH_TOKEN (the pyroscope gem < 1.0, @pyroscope/nodejs) is sent
 * as "Authorization: Bearer <token>" unless an Authorization header is set. */
static const char *env_of(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    }
    return NULL;
}

static int apply_anchor_env(pn_config *c, char *const *envp, pn_error *e)
{
    const char *user = env_of(envp, "PYROSCOPE_BASIC_AUTH_USER");
    const char *full = env_of(envp, "PYROSCOPE_BASIC_AUTH_USERNAME");
    pn_error why;
    if (user && user[0] && !(full && full[0]) &&
        pn_config_set(c, "basic_auth_username", user, &why) != 0)
        return pn_fail(e, why.code, "environment variable PYROSCOPE_BASIC_AUTH_USER: %s",
                       why.msg);
    const char *token = env_of(envp, "PYROSCOPE_AUTH_TOKEN");
    if (!token || !token[0])
        return 0;
    for (size_t i = 0; i < c->nheaders; i++) {
        if (strcasecmp(c->http_headers[i].key, "Authorization") == 0)
            return 0;
    }
    if (c->nheaders >= PN_MAX_LABELS)
        return 0;
    size_t len = strlen(token) + sizeof "Bearer ";
    char *bearer = malloc(len);
    pn_label *kv = malloc((c->nheaders + 1) * sizeof *kv);
    int rc = -1;
    if (bearer && kv) {
        snprintf(bearer, len, "Bearer %s", token);
        if (c->nheaders)
            memcpy(kv, c->http_headers, c->nheaders * sizeof *kv);
        kv[c->nheaders] = (pn_label){"Authorization", bearer};
        rc = pn_config_set_pairs(c, "http_headers", kv, c->nheaders + 1, &why);
        if (rc != 0)
            pn_fail(e, why.code, "environment variable PYROSCOPE_AUTH_TOKEN: %s", why.msg);
    } else {
        pn_fail(e, PN_ENOMEM, "out of memory reading PYROSCOPE_AUTH_TOKEN");
    }
    free(bearer);
    free(kv);
    return rc;
}

static int is_anchor_env(const char *name)
{
    return strcmp(name, "basic_auth_user") == 0 || strcmp(name, "auth_token") == 0;
}

int pn_config_apply_env(pn_config *c, char *const *envp, pn_error *e)
{
    if (!envp)
        envp = environ;
    if (pn_config_apply_otel_env(c, envp, e) != 0)
        return -1;
    static const char prefix[] = "PYROSCOPE_";
    char *const *all = envp;
    for (; envp && *envp; envp++) {
        const char *kv = *envp;
        if (strncmp(kv, prefix, sizeof prefix - 1) != 0)
            continue;
        const char *eq = strchr(kv, '=');
        if (!eq)
            continue;
        char name[64];
        size_t n = (size_t)(eq - kv) - (sizeof prefix - 1);
        if (n == 0 || n >= sizeof name) {
            pn_log(PN_LOG_WARN, "ignoring unknown environment variable %.*s", (int)(eq - kv), kv);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            name[i] = (char)tolower((unsigned char)kv[sizeof prefix - 1 + i]);
        name[n] = '\0';
        int known = 0;
        for (size_t i = 0; i < NSETTINGS; i++)
            known |= strcmp(settings[i].name, name) == 0;
        if (!known) {
            if (!is_anchor_env(name))
                pn_log(PN_LOG_WARN, "ignoring unknown environment variable %.*s",
                       (int)(eq - kv), kv);
            continue;
        }
        if (eq[1] == '\0')
            continue; /* set but empty: treated as unset */
        pn_error why; /* e may be NULL */
        if (pn_config_set(c, name, eq + 1, &why) != 0)
            return pn_fail(e, why.code, "environment variable %.*s: %s", (int)(eq - kv), kv,
                           why.msg);
    }
    return apply_anchor_env(c, all, e);
}

/* A pair list a binding filled by hand: an array for every count, and a key
 * and a value in every entry. */
static int check_pair_array(const char *what, const pn_label *kv, size_t n, pn_error *e)
{
    if (n > PN_MAX_LABELS)
        return pn_fail(e, PN_ELIMIT, "%s: %zu entries; the limit is %d", what, n,
                       PN_MAX_LABELS);
    if (n && !kv)
        return pn_fail(e, PN_EINVAL, "%s: %zu entries but no array", what, n);
    for (size_t i = 0; i < n; i++) {
        if (!kv[i].key || !kv[i].value)
            return pn_fail(e, PN_EINVAL, "%s: entry %zu has no key or no value", what, i);
    }
    return 0;
}

int pn_config_validate(const pn_config *c, pn_error *e)
{
    if (pn_label_check_app_name(c->application_name, e) != 0)
        return -1;
    int has_server = c->server_address && c->server_address[0];
    int has_dir = c->output_dir && c->output_dir[0];
    int has_otlp = c->otlp_endpoint && c->otlp_endpoint[0];
    if (!has_server && !has_dir && !has_otlp)
        return pn_fail(e, PN_EINVAL, "no destination: set server_address (a Pyroscope server), "
                       "otlp_endpoint (an OTLP profiles receiver) or output_dir (a local "
                       "folder)");
    /* Bindings may also fill fields directly: the same rules as
     * pn_config_set, from the same table. */
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        const char *field = (const char *)c + s->off;
        switch (s->k) {
        case K_STR: {
            const char *v = *(char *const *)field;
            if (v && v[0] && check_string(s->name, v, e) != 0)
                return -1;
            break;
        }
        case K_RATE:
        case K_SECONDS:
        case K_PERCENT: {
            double d = *(const double *)field;
            if (!(d >= s->lo && d <= s->hi))
                return pn_fail(e, PN_EINVAL, "%s: %.15g is out of range; it must be between "
                               "%.15g and %.15g %s", s->name, d, s->lo, s->hi,
                               s->k == K_RATE      ? "Hz"
                               : s->k == K_SECONDS ? "seconds"
                                                   : "% of one core (0: no limit)");
            break;
        }
        case K_U32: {
            uint32_t u = *(const uint32_t *)field;
            if (u < s->lo || u > s->hi)
                return pn_fail(e, PN_EINVAL, "%s: %u is out of range; it must be between %.15g "
                               "and %.15g", s->name, u, s->lo, s->hi);
            break;
        }
        case K_TAGS:
            if (check_pair_array(s->name, c->tags, c->ntags, e) != 0)
                return -1;
            for (size_t j = 0; j < c->ntags; j++) {
                if (check_tag(s->name, c->tags[j].key, c->tags[j].value, e) != 0)
                    return -1;
            }
            if (check_unique(s->name, c->tags, c->ntags, e) != 0)
                return -1;
            break;
        case K_HEADERS:
        case K_OTLP_HEADERS: {
            const pn_label *h = s->k == K_HEADERS ? c->http_headers : c->otlp_headers;
            size_t nh = s->k == K_HEADERS ? c->nheaders : c->notlp_headers;
            if (check_pair_array(s->name, h, nh, e) != 0)
                return -1;
            for (size_t j = 0; j < nh; j++) {
                if (check_header(s->name, h[j].key, h[j].value, e))
                    return -1;
            }
            break;
        }
        case K_PROTOCOL:
            if (c->otlp_protocol < PN_OTLP_HTTP_PROTOBUF || c->otlp_protocol > PN_OTLP_GRPC)
                return pn_fail(e, PN_EINVAL, "otlp_protocol: %d is not one of PN_OTLP_*",
                               c->otlp_protocol);
            break;
        case K_BOOL:
        case K_LEVEL:
            break;
        }
    }
    if ((c->basic_auth_password && c->basic_auth_password[0]) &&
        !(c->basic_auth_username && c->basic_auth_username[0]))
        return pn_fail(e, PN_EINVAL, "basic_auth_password is set but basic_auth_username is not");
    return 0;
}
