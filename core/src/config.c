/* Settings: one table of names, parsers and rules, shared by keyword
 * arguments (through the bindings) and PYROSCOPE_* environment variables. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pyroscope_native.h"

extern char **environ;

void pn_config_init(pn_config *c)
{
    memset(c, 0, sizeof *c);
    c->sample_rate = 100;
    c->upload_interval = 10;
    c->oncpu = 1;
    c->log_level = PN_LOG_WARN;
    c->max_stacks = 16384;
    c->max_depth = 128;
    c->stop_timeout = 5;
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
    *dst = tmp;
    if (dup_str(&dst->application_name, src->application_name, e) ||
        dup_str(&dst->server_address, src->server_address, e) ||
        dup_str(&dst->basic_auth_username, src->basic_auth_username, e) ||
        dup_str(&dst->basic_auth_password, src->basic_auth_password, e) ||
        dup_str(&dst->tenant_id, src->tenant_id, e) ||
        dup_str(&dst->output_dir, src->output_dir, e) ||
        dup_str(&dst->spy_name, src->spy_name, e) ||
        dup_pairs(&dst->tags, &dst->ntags, src->tags, src->ntags, e) ||
        dup_pairs(&dst->http_headers, &dst->nheaders, src->http_headers, src->nheaders, e)) {
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
    return pn_fail(e, PN_EINVAL, "%s: \"%s\" is not a boolean (use true/false, 1/0, yes/no, "
                   "on/off)", name, v);
}

static int parse_number(const char *name, const char *v, double lo, double hi, const char *unit,
                        double *out, pn_error *e)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    while (*end && isspace((unsigned char)*end))
        end++;
    if (end == v || *end != '\0' || errno != 0 || !isfinite(d))
        return pn_fail(e, PN_EINVAL, "%s: \"%s\" is not a number", name, v);
    if (d < lo || d > hi)
        return pn_fail(e, PN_EINVAL, "%s: %g is out of range; it must be between %g and %g%s%s",
                       name, d, lo, hi, unit[0] ? " " : "", unit);
    *out = d;
    return 0;
}

/* Seconds, optionally with a unit: "10", "2.5s", "500ms", "1m". */
static int parse_seconds(const char *name, const char *v, double lo, double hi, double *out,
                         pn_error *e)
{
    char buf[64];
    size_t n = strlen(v);
    double scale = 1;
    if (n >= sizeof buf)
        return pn_fail(e, PN_EINVAL, "%s: \"%.40s...\" is not a duration", name, v);
    memcpy(buf, v, n + 1);
    if (n > 2 && strcmp(buf + n - 2, "ms") == 0) {
        scale = 1e-3;
        buf[n - 2] = 0;
    } else if (n > 1 && buf[n - 1] == 's') {
        buf[n - 1] = 0;
    } else if (n > 1 && buf[n - 1] == 'm') {
        scale = 60;
        buf[n - 1] = 0;
    }
    double d;
    if (parse_number(name, buf, -INFINITY, INFINITY, "", &d, e) != 0)
        return pn_fail(e, PN_EINVAL, "%s: \"%s\" is not a duration (seconds, or with s/ms/m)",
                       name, v);
    d *= scale;
    if (d < lo || d > hi)
        return pn_fail(e, PN_EINVAL, "%s: %g s is out of range; it must be between %g and %g "
                       "seconds", name, d, lo, hi);
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
    if (pn_label_check_name(k, e) != 0 || pn_label_check_value(k, v, e) != 0) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        return pn_fail(e, PN_EINVAL, "%s: %s", setting, msg);
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
    for (const char *p = v; *p; p++) {
        if (*p == '\r' || *p == '\n')
            return pn_fail(e, PN_EINVAL, "%s: header \"%.100s\" value contains a line break",
                           setting, k);
    }
    return 0;
}

/* "k=v,k2=v2" (spaces around items ignored; empty string: none). */
static int parse_pairs(const char *setting, const char *v, pair_check check, pn_label **out,
                       size_t *nout, pn_error *e)
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
    if (rc == 0)
        rc = dup_pairs(out, nout, kv, n, e);
    free(copy);
    return rc;
}

/* ------------------------------------------------------------------ table */

typedef enum {
    K_STR, K_BOOL, K_RATE, K_SECONDS, K_TAGS, K_HEADERS, K_LEVEL, K_U32
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
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

const char *const *pn_config_names(void)
{
    static const char *names[NSETTINGS + 1];
    if (!names[0]) {
        for (size_t i = 0; i < NSETTINGS; i++)
            names[i] = settings[i].name;
    }
    return names;
}

/* Rules for string settings, checked as they are set. */
static int check_string(const char *name, const char *v, pn_error *e)
{
    if (strcmp(name, "application_name") == 0)
        return pn_label_check_app_name(v, e);
    if (strcmp(name, "server_address") == 0) {
        if (v[0] && strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
            return pn_fail(e, PN_EINVAL, "server_address: \"%.200s\" must start with http:// "
                           "or https://", v);
        if (strpbrk(v, " \t\r\n"))
            return pn_fail(e, PN_EINVAL, "server_address: \"%.200s\" contains white space", v);
        return 0;
    }
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
        return parse_number(name, value, s->lo, s->hi, "Hz", (double *)field, e);
    case K_SECONDS:
        return parse_seconds(name, value, s->lo, s->hi, (double *)field, e);
    case K_U32: {
        double d;
        if (parse_number(name, value, s->lo, s->hi, "", &d, e) != 0)
            return -1;
        if (d != floor(d))
            return pn_fail(e, PN_EINVAL, "%s: %g is not a whole number", name, d);
        *(uint32_t *)field = (uint32_t)d;
        return 0;
    }
    case K_TAGS:
        return parse_pairs(name, value, check_tag, &c->tags, &c->ntags, e);
    case K_HEADERS:
        return parse_pairs(name, value, check_header, &c->http_headers, &c->nheaders, e);
    case K_LEVEL: {
        int level;
        double d;
        if (pn_log_level_parse(value, &level) == 0) {
            c->log_level = level;
            return 0;
        }
        if (parse_number(name, value, 0, 100, "", &d, NULL) == 0) {
            c->log_level = (int)d;
            return 0;
        }
        return pn_fail(e, PN_EINVAL, "log_level: \"%.40s\" is not one of debug, info, warning, "
                       "error, off (or a number)", value);
    }
    }
    return pn_fail(e, PN_EINVAL, "%s: unsupported setting kind", name);
}

int pn_config_apply_env(pn_config *c, char *const *envp, pn_error *e)
{
    if (!envp)
        envp = environ;
    static const char prefix[] = "PYROSCOPE_";
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
            pn_log(PN_LOG_WARN, "ignoring unknown environment variable %.*s", (int)(eq - kv), kv);
            continue;
        }
        if (eq[1] == '\0')
            continue; /* set but empty: treated as unset */
        if (pn_config_set(c, name, eq + 1, e) != 0) {
            char msg[sizeof e->msg];
            memcpy(msg, e->msg, sizeof msg);
            return pn_fail(e, PN_EINVAL, "environment variable %.*s: %s", (int)(eq - kv), kv,
                           msg);
        }
    }
    return 0;
}

int pn_config_validate(const pn_config *c, pn_error *e)
{
    if (pn_label_check_app_name(c->application_name, e) != 0)
        return -1;
    int has_server = c->server_address && c->server_address[0];
    int has_dir = c->output_dir && c->output_dir[0];
    if (!has_server && !has_dir)
        return pn_fail(e, PN_EINVAL, "no destination: set server_address (a Pyroscope server) "
                       "or output_dir (a local folder), or both");
    if (has_server && check_string("server_address", c->server_address, e) != 0)
        return -1;
    if (!(c->sample_rate >= 0.1 && c->sample_rate <= 10000))
        return pn_fail(e, PN_EINVAL, "sample_rate: %g is out of range; it must be between 0.1 "
                       "and 10000 Hz", c->sample_rate);
    if (!(c->upload_interval >= 0.05 && c->upload_interval <= 3600))
        return pn_fail(e, PN_EINVAL, "upload_interval: %g s is out of range; it must be between "
                       "0.05 and 3600 seconds", c->upload_interval);
    if (c->max_depth < 2 || c->max_depth > 1000)
        return pn_fail(e, PN_EINVAL, "max_depth: %u is out of range; it must be between 2 and "
                       "1000", c->max_depth);
    if (c->max_stacks < 16 || c->max_stacks > 10000000)
        return pn_fail(e, PN_EINVAL, "max_stacks: %u is out of range; it must be between 16 and "
                       "10000000", c->max_stacks);
    if (!(c->stop_timeout >= 0 && c->stop_timeout <= 60))
        return pn_fail(e, PN_EINVAL, "stop_timeout: %g s is out of range (0..60)",
                       c->stop_timeout);
    if ((c->basic_auth_password && c->basic_auth_password[0]) &&
        !(c->basic_auth_username && c->basic_auth_username[0]))
        return pn_fail(e, PN_EINVAL, "basic_auth_password is set but basic_auth_username is not");
    for (size_t i = 0; i < c->ntags; i++) {
        if (check_tag("tags", c->tags[i].key, c->tags[i].value, e) != 0)
            return -1;
    }
    for (size_t i = 0; i < c->nheaders; i++) {
        if (check_header("http_headers", c->http_headers[i].key, c->http_headers[i].value, e))
            return -1;
    }
    return 0;
}
