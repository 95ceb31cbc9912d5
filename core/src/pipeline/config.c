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
#include "support/utf8.h"
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
    for (size_t i = 0; i < sizeof c->external / sizeof c->external[0]; i++)
        free(c->external[i]);
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
    memset(tmp.external, 0, sizeof tmp.external);
    *dst = tmp;
    for (size_t i = 0; i < sizeof dst->external / sizeof dst->external[0]; i++) {
        if (dup_str(&dst->external[i], src->external[i], e) != 0) {
            pn_config_free(dst);
            return -1;
        }
    }
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

/* Messages already given, by the hash of a key: a warning about an input is
 * given once per process, however often a binding starts. Any thread, under
 * the lock. */
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t warned[64];
static size_t nwarned;

static int first_time(const char *key, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    int seen = 0;
    pthread_mutex_lock(&warned_lock);
    for (size_t i = 0; i < nwarned && !seen; i++)
        seen = warned[i] == h;
    if (!seen && nwarned < sizeof warned / sizeof warned[0])
        warned[nwarned++] = h;
    pthread_mutex_unlock(&warned_lock);
    return !seen;
}

/* ----------------------------------------------------------------- parsers */

int pn_config_parse_bool(const char *name, const char *v, int *out, pn_error *e)
{
    static const char *const yes[] = {PN_BOOL_TRUE_WORDS};
    static const char *const no[] = {PN_BOOL_FALSE_WORDS};
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    for (size_t i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && strncasecmp(v, yes[i], n) == 0)
            return *out = 1, 0;
        if (strlen(no[i]) == n && strncasecmp(v, no[i], n) == 0)
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

/* A number out of [lo, hi] is taken as the nearest bound, with one warning
 * per setting and value: the anchors took any number unchecked, and an app
 * that started with them starts with us (a value that is no number at all
 * still fails). %.15g: "10000001", not "1e+07", so a rule and a value never
 * print alike. */
static double clamp_range(const char *name, double d, double lo, double hi, const char *unit)
{
    if (d >= lo && d <= hi)
        return d;
    double to = d < lo ? lo : hi;
    const char *sp = unit[0] ? " " : "";
    char key[160];
    int n = snprintf(key, sizeof key, "range:%s=%.17g", name, d);
    if (first_time(key, n > 0 && (size_t)n < sizeof key ? (size_t)n : sizeof key - 1))
        pn_log(PN_LOG_WARN, "%s: %.15g%s%s is out of range (%.15g to %.15g%s%s); using %.15g%s%s",
               name, d, sp, unit, lo, hi, sp, unit, to, sp, unit);
    return to;
}

static int parse_number(const char *name, const char *v, double lo, double hi, const char *unit,
                        int whole, int clamp, double *out, pn_error *e)
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
    if (!clamp && (d < lo || d > hi))
        return pn_fail(e, PN_EINVAL, "%s: %.15g is out of range; it must be between %.15g and "
                       "%.15g%s%s", name, d, lo, hi, sp, unit);
    *out = clamp_range(name, d, lo, hi, unit);
    return 0;
}

/* Seconds, optionally with a unit: "10", "2.5s", "500ms", "1m". */
static int parse_seconds(const char *name, const char *v, double lo, double hi, int clamp,
                         double *out, pn_error *e)
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
    if (!clamp && (d < lo || d > hi))
        return pn_fail(e, PN_EINVAL, "%s: %.15g s is out of range; it must be between %.15g and "
                       "%.15g seconds", name, d, lo, hi);
    *out = clamp_range(name, d, lo, hi, "s");
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
    K_OTLP_HEADERS, K_PERCENT, K_PROTOCOL, K_EXTERNAL, K_ALIAS
} kind;

typedef struct {
    pn_setting_info i;
    kind k;
    size_t off;
    /* A number out of range is the nearest bound (with a warning), not an
     * error: the anchors' numbers, which they took unchecked (issue 28). */
    int clamp;
} setting;

#define OFF(f) .off = offsetof(pn_config, f), .clamp = 0
#define OFF_CLAMPED(f) .off = offsetof(pn_config, f), .clamp = 1
#define NAMED(n, N) .name = n, .env = "PYROSCOPE_" N
#define STRING .kind = PN_KIND_STRING, .kind_name = "string"
#define BOOL .kind = PN_KIND_BOOL, .kind_name = "bool", .spellings = "true,false,1,0,yes,no,on,off"
#define NUMBER .kind = PN_KIND_NUMBER, .kind_name = "number"
#define INTEGER .kind = PN_KIND_INTEGER, .kind_name = "integer"
#define DURATION .kind = PN_KIND_DURATION, .kind_name = "duration", .unit = "s"
#define PAIRS .kind = PN_KIND_PAIRS, .kind_name = "pairs"
#define CHOICE .kind = PN_KIND_CHOICE, .kind_name = "choice"
#define KW(py, js, rb) .python = py, .node = js, .ruby = rb

/* Adding a setting: one row here (and its pn_config field); each binding
 * takes it by the keyword its column names. At most 64 rows (c->given). */
static const setting settings[] = {
    {{NAMED("application_name", "APPLICATION_NAME"), STRING, .otel_env = "OTEL_SERVICE_NAME",
      KW("application_name|app_name", "appName|applicationName", "application_name|app_name"),
      .meaning = "the application's name (its series' __name__)"}, K_STR, OFF(application_name)},
    {{NAMED("server_address", "SERVER_ADDRESS"), STRING, .default_value = "http://localhost:4040",
      .env_aliases = "PYROSCOPE_ADHOC_SERVER_ADDRESS",
      KW("server_address", "serverAddress", "server_address"),
      .meaning = "a Pyroscope server; the default only when no destination is set"},
     K_STR, OFF(server_address)},
    {{NAMED("sample_rate", "SAMPLE_RATE"), NUMBER, .default_value = "100", .lo = 0.1,
      .hi = 10000, .unit = "Hz", KW("sample_rate", "sampleRate", "sample_rate"),
      .meaning = "samples per second"}, K_RATE, OFF_CLAMPED(sample_rate)},
    {{NAMED("upload_interval", "UPLOAD_INTERVAL"), DURATION, .default_value = "10", .lo = 0.05,
      .hi = 3600, KW("upload_interval", "uploadInterval", "upload_interval"),
      .meaning = "the profile period"}, K_SECONDS, OFF_CLAMPED(upload_interval)},
    {{NAMED("oncpu", "ONCPU"), BOOL, .default_value = "true", KW("oncpu", "oncpu", "oncpu"),
      .meaning = "on-CPU time (else wall clock)"}, K_BOOL, OFF(oncpu)},
    {{NAMED("tags", "TAGS"), PAIRS, KW("tags", "tags", "tags"),
      .meaning = "labels of every sample"}, K_TAGS, OFF(tags)},
    {{NAMED("basic_auth_username", "BASIC_AUTH_USERNAME"), STRING,
      .env_aliases = "PYROSCOPE_BASIC_AUTH_USER",
      KW("basic_auth_username", "basicAuthUser|basicAuthUsername", "basic_auth_username"),
      .meaning = "HTTP Basic auth user"}, K_STR, OFF(basic_auth_username)},
    {{NAMED("basic_auth_password", "BASIC_AUTH_PASSWORD"), STRING, .flags = PN_SETTING_SECRET,
      KW("basic_auth_password", "basicAuthPassword", "basic_auth_password"),
      .meaning = "HTTP Basic auth password"}, K_STR, OFF(basic_auth_password)},
    {{NAMED("tenant_id", "TENANT_ID"), STRING, KW("tenant_id", "tenantID|tenantId", "tenant_id"),
      .meaning = "X-Scope-OrgID"}, K_STR, OFF(tenant_id)},
    {{NAMED("http_headers", "HTTP_HEADERS"), PAIRS, .flags = PN_SETTING_SECRET,
      KW("http_headers", "httpHeaders", "http_headers"),
      .meaning = "headers of each upload"}, K_HEADERS, OFF(http_headers)},
    {{NAMED("output_dir", "OUTPUT_DIR"), STRING, KW("output_dir", "outputDir", "output_dir"),
      .meaning = "a folder the profiles are written to"}, K_STR, OFF(output_dir)},
    {{NAMED("report_pid", "REPORT_PID"), BOOL, .default_value = "false",
      KW("report_pid", "reportPid", "report_pid"), .meaning = "a pid label"},
     K_BOOL, OFF(report_pid)},
    {{NAMED("report_thread_id", "REPORT_THREAD_ID"), BOOL, .default_value = "false",
      KW("report_thread_id", "reportThreadId", "report_thread_id"),
      .meaning = "a thread_id label"}, K_BOOL, OFF(report_thread_id)},
    /* Node sets it on by default (main / each worker thread). */
    {{NAMED("report_thread_name", "REPORT_THREAD_NAME"), BOOL, .default_value = "false",
      KW("report_thread_name", "reportThreadName", "report_thread_name"),
      .meaning = "a thread_name label"}, K_BOOL, OFF(report_thread_name)},
    {{NAMED("log_level", "LOG_LEVEL"), .kind = PN_KIND_LEVEL, .kind_name = "level",
      .default_value = "warning", .spellings = "debug,info,warning,warn,error,off,none,trace,fatal,critical",
      KW("log_level", "logLevel", "log_level"),
      .meaning = "the least severe message logged"}, K_LEVEL, OFF(log_level)},
    {{NAMED("max_stacks", "MAX_STACKS"), INTEGER, .default_value = "16384", .lo = 16,
      .hi = 10000000, .unit = "", KW("max_stacks", "maxStacks", "max_stacks"),
      .meaning = "distinct stacks per period"}, K_U32, OFF_CLAMPED(max_stacks)},
    {{NAMED("max_depth", "MAX_DEPTH"), INTEGER, .default_value = "128", .lo = 2, .hi = 1000,
      .unit = "", KW("max_depth", "maxDepth", "max_depth"),
      .meaning = "frames per stack"}, K_U32, OFF_CLAMPED(max_depth)},
    {{NAMED("stop_timeout", "STOP_TIMEOUT"), DURATION, .default_value = "5", .lo = 0, .hi = 60,
      KW("stop_timeout", "stopTimeout", "stop_timeout"),
      .meaning = "how long stop may take"}, K_SECONDS, OFF_CLAMPED(stop_timeout)},
    {{NAMED("spy_name", "SPY_NAME"), STRING, .flags = PN_SETTING_BINDING,
      .meaning = "the server's name of the profiler (pyspy, nodespy, rbspy)"},
     K_STR, OFF(spy_name)},
    /* Python and Ruby read memory with it; Node's samples come from V8. */
    {{NAMED("fault_guard", "FAULT_GUARD"), BOOL, .default_value = "true",
      KW("fault_guard", NULL, NULL),
      .meaning = "read runtime memory under a fault handler (else by syscall)"},
     K_BOOL, OFF(fault_guard)},
    {{NAMED("otlp_endpoint", "OTLP_ENDPOINT"), STRING,
      .otel_env = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT,OTEL_EXPORTER_OTLP_ENDPOINT",
      KW("otlp_endpoint", "otlpEndpoint", "otlp_endpoint"),
      .meaning = "an OTLP profiles receiver"}, K_STR, OFF(otlp_endpoint)},
    {{NAMED("otlp_headers", "OTLP_HEADERS"), PAIRS, .flags = PN_SETTING_SECRET,
      .otel_env = "OTEL_EXPORTER_OTLP_PROFILES_HEADERS,OTEL_EXPORTER_OTLP_HEADERS",
      KW("otlp_headers", "otlpHeaders", "otlp_headers"),
      .meaning = "headers of each OTLP request"}, K_OTLP_HEADERS, OFF(otlp_headers)},
    {{NAMED("otlp_protocol", "OTLP_PROTOCOL"), CHOICE, .default_value = "http/protobuf",
      .spellings = "http/protobuf,http/json,grpc",
      .otel_env = "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL,OTEL_EXPORTER_OTLP_PROTOCOL",
      KW("otlp_protocol", "otlpProtocol", "otlp_protocol"),
      .meaning = "the OTLP transport"}, K_PROTOCOL, OFF(otlp_protocol)},
    {{NAMED("resource_attributes", "RESOURCE_ATTRIBUTES"), STRING,
      .otel_env = "OTEL_RESOURCE_ATTRIBUTES",
      KW("resource_attributes", "resourceAttributes", "resource_attributes"),
      .meaning = "OTLP resource attributes, k=v,..."}, K_STR, OFF(resource_attributes)},
    {{NAMED("runtime_name", "RUNTIME_NAME"), STRING, .flags = PN_SETTING_BINDING,
      .meaning = "process.runtime.name"}, K_STR, OFF(runtime_name)},
    {{NAMED("runtime_version", "RUNTIME_VERSION"), STRING, .flags = PN_SETTING_BINDING,
      .meaning = "process.runtime.version"}, K_STR, OFF(runtime_version)},
    /* Node's sampling is V8's: no budget there. */
    {{NAMED("sampler_cpu_budget", "SAMPLER_CPU_BUDGET"), NUMBER, .default_value = "1", .lo = 0,
      .hi = 100, .unit = "% of one core (0: no limit)",
      KW("sampler_cpu_budget", NULL, "sampler_cpu_budget"),
      .meaning = "the sampler's CPU share"}, K_PERCENT, OFF(sampler_cpu_budget)},
    {{NAMED("strict_labels", "STRICT_LABELS"), BOOL, .default_value = "false",
      KW("strict_labels", "strictLabels", "strict_labels"),
      .meaning = "bad request-time labels are errors (else coerced or dropped)"},
     K_BOOL, OFF(strict_labels)},
    {{NAMED("memory", "MEMORY"), BOOL, .default_value = "false",
      KW("memory|mem_enabled", "memory", "memory"),
      .meaning = "memory profiles: sampled allocations and the live heap"}, K_BOOL, OFF(memory)},
    {{NAMED("memory_interval", "MEMORY_INTERVAL"), INTEGER, .default_value = "524288", .lo = 1,
      .hi = 1u << 28, .unit = "bytes",
      KW("memory_interval|mem_heap_sample_size", "memoryInterval", "memory_interval"),
      .meaning = "mean bytes allocated between memory samples"}, K_U32, OFF(memory_interval)},
    {{NAMED("memory_max_live", "MEMORY_MAX_LIVE"), INTEGER, .default_value = "65536", .lo = 16,
      .hi = 1u << 22, .unit = "", KW("memory_max_live", NULL, "memory_max_live"),
      .meaning = "sampled live objects tracked"}, K_U32, OFF(memory_max_live)},

    /* Settings a binding acts on itself (the anchors'): checked and
     * resolved here (c->external), so each binding only reads the result. */
    {{NAMED("auth_token", "AUTH_TOKEN"), STRING, .flags = PN_SETTING_EXTERNAL | PN_SETTING_SECRET,
      KW(NULL, "authToken", "auth_token"),
      .meaning = "sent as Authorization: Bearer (the anchors' token)"}, K_EXTERNAL, 0, 0},
    {{NAMED("gil_only", "GIL_ONLY"), BOOL, .flags = PN_SETTING_EXTERNAL, .default_value = "true",
      KW("gil_only", NULL, NULL), .meaning = "only threads holding the GIL"}, K_EXTERNAL, 0, 0},
    {{NAMED("enable_logging", "ENABLE_LOGGING"), BOOL, .flags = PN_SETTING_EXTERNAL,
      .default_value = "false", KW("enable_logging", NULL, NULL),
      .meaning = "log at the pyroscope logger's level"}, K_EXTERNAL, 0, 0},
    {{NAMED("line_no", "LINE_NO"), CHOICE, .flags = PN_SETTING_EXTERNAL,
      .spellings = "LastInstruction,First,NoLine,0,1,2", KW("line_no", NULL, NULL),
      .meaning = "which line a frame reports"}, K_EXTERNAL, 0, 0},
    /* The anchors' other spellings (@pyroscope/nodejs 0.6.4 utils/get-env.js
     * and its options), each in its own unit; their variables were read with
     * Number() and never refused (PN_SETTING_LENIENT_ENV). */
    {{NAMED("flush_interval_ms", "FLUSH_INTERVAL_MS"), INTEGER, .lo = 1, .hi = 1e12, .unit = "ms",
      .flags = PN_SETTING_LENIENT_ENV | PN_SETTING_LENIENT, .alias_of = "upload_interval",
      .alias_ratio = 1000, KW(NULL, "flushIntervalMs", NULL),
      .meaning = "upload_interval in ms (@pyroscope/nodejs)"}, K_ALIAS, OFF(upload_interval)},
    {{NAMED("wall_sampling_interval_micros", "WALL_SAMPLING_INTERVAL_MICROS"), INTEGER,
      .lo = 100, .hi = 10000000, .unit = "us",
      .flags = PN_SETTING_LENIENT_ENV | PN_SETTING_PERIOD, .alias_of = "sample_rate",
      .alias_ratio = 1e6, KW(NULL, "wall.samplingIntervalMicros", NULL),
      .meaning = "sample_rate as a period in microseconds (@pyroscope/nodejs)"},
     K_ALIAS, OFF_CLAMPED(sample_rate)},
    {{NAMED("heap_sampling_interval_bytes", "HEAP_SAMPLING_INTERVAL_BYTES"), INTEGER, .lo = 1,
      .hi = 1u << 28, .unit = "bytes", .flags = PN_SETTING_LENIENT_ENV,
      .alias_of = "memory_interval", .alias_ratio = 1, KW(NULL, "heap.samplingIntervalBytes", NULL),
      .meaning = "memory_interval (@pyroscope/nodejs)"}, K_ALIAS, OFF_CLAMPED(memory_interval)},
    /* setTimeout's limit: 2^31 - 1 ms */
    {{NAMED("wall_sampling_duration_ms", "WALL_SAMPLING_DURATION_MS"), INTEGER,
      .flags = PN_SETTING_EXTERNAL | PN_SETTING_LENIENT_ENV, .default_value = "60000", .lo = 1,
      .hi = 2147483647, .unit = "ms", KW(NULL, "wall.samplingDurationMs", NULL),
      .meaning = "pull mode: a profile's length"}, K_EXTERNAL, 0, 0},
    {{NAMED("wall_collect_cpu_time", "WALL_COLLECT_CPU_TIME"), BOOL,
      .flags = PN_SETTING_EXTERNAL | PN_SETTING_LENIENT_ENV, .default_value = "false",
      KW(NULL, "wall.collectCpuTime", NULL), .meaning = "wall profiles with CPU time"},
     K_EXTERNAL, 0, 0},
    {{NAMED("heap_allocations", "HEAP_ALLOCATIONS"), BOOL, .flags = PN_SETTING_EXTERNAL,
      .default_value = "false", KW(NULL, "heap.allocations", NULL),
      .meaning = "heap profile of allocations instead of in-use memory (Node 26+)"},
     K_EXTERNAL, 0, 0},
    {{NAMED("heap_stack_depth", "HEAP_STACK_DEPTH"), INTEGER,
      .flags = PN_SETTING_EXTERNAL | PN_SETTING_LENIENT_ENV, .default_value = "64", .lo = 1,
      .hi = 2147483647, .unit = "", KW(NULL, "heap.stackDepth", NULL),
      .meaning = "frames per heap sample"}, K_EXTERNAL, 0, 0},
    {{NAMED("strip_filenames", "STRIP_FILENAMES"), CHOICE,
      .flags = PN_SETTING_EXTERNAL | PN_SETTING_LENIENT_ENV, .spellings = "all,dependencies", KW(NULL, "stripFilenames", NULL),
      .meaning = "shorten file names"}, K_EXTERNAL, 0, 0},
    {{NAMED("shorten_paths", "SHORTEN_PATHS"), BOOL,
      .flags = PN_SETTING_EXTERNAL | PN_SETTING_LENIENT_ENV,
      .default_value = "false", KW(NULL, "shortenPaths", NULL),
      .meaning = "relative file names"}, K_EXTERNAL, 0, 0},
    {{NAMED("autoinstrument_rails", "AUTOINSTRUMENT_RAILS"), BOOL, .flags = PN_SETTING_EXTERNAL,
      .default_value = "true", KW(NULL, NULL, "autoinstrument_rails"),
      .meaning = "controller/action labels in Rails"}, K_EXTERNAL, 0, 0},
    {{NAMED("compression", "COMPRESSION"), STRING, .flags = PN_SETTING_EXTERNAL,
      .default_value = "gzip", KW(NULL, NULL, "compression"),
      .meaning = "accepted, always gzip"}, K_EXTERNAL, 0, 0},
    {{NAMED("report_encoding", "REPORT_ENCODING"), STRING, .flags = PN_SETTING_EXTERNAL,
      .default_value = "pprof", KW(NULL, NULL, "report_encoding"),
      .meaning = "accepted, always pprof"}, K_EXTERNAL, 0, 0},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])
_Static_assert(NSETTINGS <= 64, "pn_config.given has 64 bits");

/* Filled once (pthread_once), then only read, by any thread. */
static const char *setting_names[NSETTINGS + 1];
static pthread_once_t setting_names_once = PTHREAD_ONCE_INIT;

static void fill_setting_names(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NSETTINGS; i++) {
        if (!(settings[i].i.flags & PN_SETTING_EXTERNAL) && !settings[i].i.alias_of)
            setting_names[n++] = settings[i].i.name;
    }
}

const char *const *pn_config_names(void)
{
    pthread_once(&setting_names_once, fill_setting_names);
    return setting_names;
}

const pn_setting_info *pn_config_setting(size_t i)
{
    return i < NSETTINGS ? &settings[i].i : NULL;
}

static const setting *find(const char *name)
{
    for (size_t i = 0; name && i < NSETTINGS; i++) {
        if (strcmp(settings[i].i.name, name) == 0)
            return &settings[i];
    }
    return NULL;
}

const pn_setting_info *pn_config_setting_find(const char *name)
{
    const setting *s = find(name);
    return s ? &s->i : NULL;
}

static uint64_t bit_of(const setting *s)
{
    return (uint64_t)1 << (s - settings);
}

int pn_config_is_given(const pn_config *c, const char *name)
{
    const setting *s = find(name);
    return s && (c->given & bit_of(s));
}

/* Rules for string settings, checked as they are set. */
static int check_string(const char *name, const char *v, pn_error *e)
{
    if (strcmp(name, "application_name") == 0) /* empty: the default, at resolve */
        return v[0] ? pn_label_check_app_name(v, e) : 0;
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

static int set_value(pn_config *c, const setting *s, const char *value, pn_error *e);

/* The setting a row is a spelling of: its alias_of, or itself. */
static const setting *canonical(const setting *s)
{
    return s->i.alias_of ? find(s->i.alias_of) : s;
}

/* A lenient row's value of no meaning: one warning, and the setting keeps
 * its default. `from`: "" or "environment variable NAME: ". */
static void ignored(const char *from, const char *why)
{
    char key[300];
    int n = snprintf(key, sizeof key, "ignored:%s%s", from, why);
    if (first_time(key, n > 0 && (size_t)n < sizeof key ? (size_t)n : sizeof key - 1))
        pn_log(PN_LOG_WARN, "%s%s; it is ignored (the default is used)", from, why);
}

/* One setting given twice with different values (by two spellings). */
static int twice(pn_error *e, const char *first, const char *second, const setting *t,
                 const char *before, const char *after)
{
    const char *unit = t->i.unit && t->i.unit[0] ? t->i.unit : "";
    return pn_fail(e, PN_EINVAL, "%s and %s are the same setting, given as %s and %s%s%s; give "
                   "only one", first, second, before, after, unit[0] ? " " : "", unit);
}

int pn_config_set(pn_config *c, const char *name, const char *value, pn_error *e)
{
    if (!name)
        return pn_fail(e, PN_EINVAL, "setting name missing");
    const setting *s = find(name);
    if (!s)
        return pn_fail(e, PN_EINVAL, "unknown setting \"%.100s\"", name);
    if (!value)
        return pn_fail(e, PN_EINVAL, "%s: a value is required", name);
    double d;
    pn_error why;
    if ((s->i.flags & PN_SETTING_LENIENT) && parse_decimal(value, &d) == 0 &&
        parse_number(name, value, s->i.lo, s->i.hi, s->i.unit, 0, 0, &d, &why) != 0) {
        ignored("", why.msg);
        return 0;
    }
    const setting *t = canonical(s), *other = NULL;
    for (size_t i = 0; i < NSETTINGS && !other; i++) {
        if (&settings[i] != s && canonical(&settings[i]) == t && (c->given & bit_of(&settings[i])))
            other = &settings[i];
    }
    char before[64] = "", after[64] = "";
    if (other)
        pn_config_get(c, t->i.name, before, sizeof before);
    if (set_value(c, s, value, e) != 0)
        return -1;
    c->given |= bit_of(s) | bit_of(t);
    if (other && pn_config_get(c, t->i.name, after, sizeof after) == 0 && strcmp(before, after))
        return twice(e, other->i.name, s->i.name, t, before, after);
    return 0;
}

int pn_config_set_default(pn_config *c, const char *name, const char *value, pn_error *e)
{
    const setting *s = find(name);
    uint64_t before = c->given;
    if (s && (before & bit_of(s)))
        return 0; /* a keyword gave it */
    if (pn_config_set(c, name, value, e) != 0)
        return -1;
    c->given = (c->given & ~bit_of(s)) | (before & bit_of(s));
    return 0;
}

/* A server_address without a scheme ("pyroscope:4040"): the anchors took it
 * at start-up (and failed at each upload); here it means http://, said once
 * per address. One that is no address even so stays an error naming the
 * setting. (otlp_endpoint is not the anchors': the OTel rule, a scheme, holds.)
 * Returns the new address (the caller frees it), or NULL and e. */
static char *add_scheme(const char *name, const char *v, pn_error *e)
{
    size_t len = strlen(v) + sizeof "http://";
    char *fixed = malloc(len);
    if (!fixed)
        return pn_fail(e, PN_ENOMEM, "out of memory reading %s", name), NULL;
    snprintf(fixed, len, "http://%s", v);
    pn_error why;
    if (check_string(name, fixed, &why) != 0) {
        free(fixed);
        pn_fail(e, why.code, "%s (the address has no scheme, so it was read with http:// in "
                "front)", why.msg);
        return NULL;
    }
    char shown[256]; /* never the password */
    pn_url_redact(fixed, shown, sizeof shown);
    char key[300];
    int n = snprintf(key, sizeof key, "%s=%s", name, v);
    if (first_time(key, n > 0 && (size_t)n < sizeof key ? (size_t)n : sizeof key - 1))
        pn_log(PN_LOG_WARN, "%s has no scheme (http:// or https://); using %s", name, shown);
    return fixed;
}

/* A binding's own setting, by its public kind, in its string form. */
static int set_external(pn_config *c, const setting *s, const char *value, pn_error *e)
{
    char buf[40], *text = buf;
    const char *name = s->i.name;
    int b;
    double d;
    switch (s->i.kind) {
    case PN_KIND_BOOL:
        if (pn_config_parse_bool(name, value, &b, e) != 0)
            return -1;
        snprintf(buf, sizeof buf, "%s", b ? "true" : "false");
        break;
    case PN_KIND_INTEGER:
        if (parse_number(name, value, s->i.lo, s->i.hi, s->i.unit, 1, s->clamp, &d, e) != 0)
            return -1;
        snprintf(buf, sizeof buf, "%.15g", d);
        break;
    case PN_KIND_CHOICE: { /* any case: the table's spelling */
        size_t n = strlen(value);
        text = NULL;
        for (const char *w = s->i.spellings; w && *w && !text;) {
            size_t len = strcspn(w, ",");
            if (len == n && len < sizeof buf && strncasecmp(w, value, n) == 0) {
                memcpy(buf, w, len);
                buf[len] = '\0';
                text = buf;
            }
            w += len + (w[len] == ',');
        }
        if (!text)
            return pn_fail(e, PN_EINVAL, "%s: \"%.40s\" is not one of %s", name, value,
                           s->i.spellings);
        break;
    }
    default:
        if (check_string(name, value, e) != 0)
            return -1;
        text = (char *)value;
    }
    return dup_str(&c->external[s - settings], text, e);
}

static int set_value(pn_config *c, const setting *s, const char *value, pn_error *e)
{
    /* Zero or less, where only a positive number means anything (a rate, a
     * period, a size): the anchors took it and then sampled or uploaded
     * without end or not at all. It is the default, said once; the nearest
     * bound (0.1 Hz, 50 ms) would look like a working setting. */
    const setting *t = canonical(s);
    double d0;
    if (s->clamp && s->i.lo > 0 && t->i.default_value && parse_decimal(value, &d0) == 0 &&
        d0 <= 0) {
        char key[128];
        int n = snprintf(key, sizeof key, "nonpositive:%s=%.17g", s->i.name, d0);
        if (first_time(key, n > 0 && (size_t)n < sizeof key ? (size_t)n : sizeof key - 1))
            pn_log(PN_LOG_WARN, "%s: %.15g is not positive; using the default, %s%s%s",
                   s->i.name, d0, t->i.default_value, t->i.unit && t->i.unit[0] ? " " : "",
                   t->i.unit ? t->i.unit : "");
        s = t;
        value = t->i.default_value;
    }
    const char *name = s->i.name;
    char *field = (char *)c + s->off;
    switch (s->k) {
    case K_STR: {
        char *with_scheme = NULL;
        if (strcmp(name, "server_address") == 0 && value[0] && !strstr(value, "://") &&
            strncasecmp(value, "http:", 5) != 0 && strncasecmp(value, "https:", 6) != 0) {
            if (!(with_scheme = add_scheme(name, value, e)))
                return -1;
            value = with_scheme;
        }
        int rc = check_string(name, value, e) != 0 ? -1
                 : dup_str((char **)field, value[0] ? value : NULL, e);
        free(with_scheme);
        return rc;
    }
    case K_BOOL:
        return pn_config_parse_bool(name, value, (int *)field, e);
    case K_RATE:
        return parse_number(name, value, s->i.lo, s->i.hi, "Hz", 0, s->clamp, (double *)field,
                            e);
    case K_PERCENT:
        return parse_number(name, value, s->i.lo, s->i.hi, "% of one core (0: no limit)", 0,
                            s->clamp, (double *)field, e);
    case K_SECONDS:
        return parse_seconds(name, value, s->i.lo, s->i.hi, s->clamp, (double *)field, e);
    case K_U32: {
        double d;
        if (parse_number(name, value, s->i.lo, s->i.hi, "", 1, s->clamp, &d, e) != 0)
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
    case K_EXTERNAL:
        return set_external(c, s, value, e);
    case K_ALIAS: {
        double d;
        if (parse_number(name, value, s->i.lo, s->i.hi, s->i.unit, 1, s->clamp, &d, e) != 0)
            return -1;
        char buf[40];
        snprintf(buf, sizeof buf, "%.17g", s->i.flags & PN_SETTING_PERIOD ? s->i.alias_ratio / d
                                                                         : d / s->i.alias_ratio);
        return set_value(c, find(s->i.alias_of), buf, e);
    }
    case K_LEVEL: {
        int level;
        double d;
        if (pn_log_level_parse(value, &level) == 0) {
            c->log_level = level;
            return 0;
        }
        if (parse_number(name, value, 0, PN_LOG_OFF, "", 1, 0, &d, NULL) == 0) {
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
    c->given |= bit_of(find(name));
    if (otlp)
        return dup_pairs(&c->otlp_headers, &c->notlp_headers, kv, n, e);
    return tags ? dup_pairs(&c->tags, &c->ntags, kv, n, e)
                : dup_pairs(&c->http_headers, &c->nheaders, kv, n, e);
}

int pn_config_get(const pn_config *c, const char *name, char *buf, size_t size)
{
    const setting *s = find(name);
    if (!s || s->k == K_ALIAS || size == 0)
        return -1;
    const char *field = (const char *)c + s->off;
    const pn_label *kv = NULL;
    size_t n = 0;
    int len = 0;
    buf[0] = '\0';
    switch (s->k) {
    case K_STR: {
        const char *v = *(char *const *)field;
        len = snprintf(buf, size, "%s", v ? v : "");
        break;
    }
    case K_BOOL:
        len = snprintf(buf, size, "%s", *(const int *)field ? "true" : "false");
        break;
    case K_RATE:
    case K_SECONDS:
    case K_PERCENT:
        len = snprintf(buf, size, "%.15g", *(const double *)field);
        break;
    case K_U32:
        len = snprintf(buf, size, "%u", *(const uint32_t *)field);
        break;
    case K_LEVEL: {
        static const char *const names[] = {"debug", "info", "warning", "error"};
        int l = c->log_level;
        len = l == PN_LOG_OFF                       ? snprintf(buf, size, "off")
              : l % 10 == 0 && l >= 10 && l <= 40 ? snprintf(buf, size, "%s", names[l / 10 - 1])
                                                  : snprintf(buf, size, "%d", l);
        break;
    }
    case K_PROTOCOL: {
        static const char *const names[] = {"http/protobuf", "http/json", "grpc"};
        int p = c->otlp_protocol;
        len = snprintf(buf, size, "%s", p >= 0 && p <= 2 ? names[p] : "?");
        break;
    }
    case K_TAGS:
        kv = c->tags, n = c->ntags;
        break;
    case K_HEADERS:
        kv = c->http_headers, n = c->nheaders;
        break;
    case K_OTLP_HEADERS:
        kv = c->otlp_headers, n = c->notlp_headers;
        break;
    case K_EXTERNAL: {
        const char *v = c->external[s - settings];
        v = v ? v : s->i.default_value;
        len = snprintf(buf, size, "%s", v ? v : "");
        break;
    }
    case K_ALIAS:
        return -1;
    }
    for (size_t i = 0; i < n && len >= 0 && (size_t)len < size; i++)
        len += snprintf(buf + len, size - (size_t)len, "%s%s=%s", i ? "," : "", kv[i].key,
                        kv[i].value);
    return len >= 0 && (size_t)len < size ? 0 : -1;
}

static const char *env_of(char *const *envp, const char *name, size_t n)
{
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    }
    return NULL;
}

/* A variable's value, NULL when unset or blank (set but blank: unset). */
static const char *env_value(char *const *envp, const char *name, size_t n)
{
    const char *v = env_of(envp, name, n);
    return v && v[strspn(v, " \t")] ? v : NULL;
}

/* auth_token (a keyword or PYROSCOPE_AUTH_TOKEN: the pyroscope gem < 1.0,
 * @pyroscope/nodejs) is sent as "Authorization: Bearer <token>". An
 * Authorization header wins over it (both by keywords: an error); basic
 * auth yields to it, said once, as @pyroscope/nodejs's exporter did (the
 * token, else basic auth). */
static int apply_auth_token(pn_config *c, pn_error *e)
{
    const setting *s = find("auth_token");
    const char *token = c->external[s - settings];
    if (!token || !token[0])
        return 0;
    for (size_t i = 0; i < c->nheaders; i++) {
        if (strcasecmp(c->http_headers[i].key, "Authorization") == 0)
            return (c->given & bit_of(s)) && (c->given & bit_of(find("http_headers")))
                       ? pn_fail(e, PN_EINVAL, "auth_token and an Authorization header in "
                                 "http_headers are both set; give only one")
                       : 0;
    }
    if (c->nheaders >= PN_MAX_LABELS)
        return 0;
    if ((c->basic_auth_username && c->basic_auth_username[0]) ||
        (c->basic_auth_password && c->basic_auth_password[0])) {
        /* once per process for a keyword's token, once for a variable's */
        if (first_time(c->given & bit_of(s) ? "auth_token+basic" : "PYROSCOPE_AUTH_TOKEN+basic",
                       c->given & bit_of(s) ? 16 : 26))
            pn_log(PN_LOG_WARN, "auth_token and basic auth (basic_auth_username, "
                   "basic_auth_password) are both set; the token is sent and basic auth is not "
                   "(as @pyroscope/nodejs did)");
        dup_str(&c->basic_auth_username, NULL, NULL);
        dup_str(&c->basic_auth_password, NULL, NULL);
    }
    size_t len = strlen(token) + sizeof "Bearer ";
    char *bearer = malloc(len);
    pn_label *kv = malloc((c->nheaders + 1) * sizeof *kv);
    int rc = -1;
    if (bearer && kv) {
        snprintf(bearer, len, "Bearer %s", token);
        if (c->nheaders)
            memcpy(kv, c->http_headers, c->nheaders * sizeof *kv);
        kv[c->nheaders] = (pn_label){"Authorization", bearer};
        uint64_t given = c->given;
        rc = pn_config_set_pairs(c, "http_headers", kv, c->nheaders + 1, e);
        c->given = given;
    } else {
        pn_fail(e, PN_ENOMEM, "out of memory reading auth_token");
    }
    free(bearer);
    free(kv);
    return rc;
}

static void warn_unknown_once(const char *kv, size_t n)
{
    size_t ok = pn_utf8_valid_prefix(kv, n);
    if (first_time(kv, n))
        pn_log(PN_LOG_WARN, "ignoring unknown environment variable %.*s%s", (int)ok, kv,
               ok < n ? " (the rest of its name is not UTF-8)" : "");
}

/* The row whose variable (or alias) is the name of kv ("NAME=value"); the
 * part after PYROSCOPE_ in any case. */
static const setting *row_of_var(const char *kv, size_t n)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *env = settings[i].i.env;
        if (strlen(env) == n && strncasecmp(env, kv, n) == 0)
            return &settings[i];
        for (const char *a = settings[i].i.env_aliases; a && *a;) {
            size_t len = strcspn(a, ",");
            if (len == n && strncasecmp(a, kv, n) == 0)
                return &settings[i];
            a += len + (a[len] == ',');
        }
    }
    return NULL;
}

int pn_config_apply_env(pn_config *c, char *const *envp, pn_error *e)
{
    if (!envp)
        envp = environ;
    /* Keyword > PYROSCOPE_* > its aliases > OTEL_* > default: OTEL_* first,
     * then each variable of a setting no keyword gave; the variables of
     * other spellings (alias_of rows) last, checked against the setting's. */
    uint64_t given = c->given, from_env = 0;
    if (pn_config_apply_otel_env(c, envp, e) != 0)
        return -1;
    static const char prefix[] = "PYROSCOPE_";
    for (int spellings = 0; spellings < 2; spellings++) {
        for (char *const *p = envp; *p; p++) {
            const char *kv = *p;
            const char *eq = strchr(kv, '=');
            if (strncmp(kv, prefix, sizeof prefix - 1) != 0 || !eq)
                continue;
            size_t n = (size_t)(eq - kv);
            const setting *s = row_of_var(kv, n);
            if (!s) {
                if (!spellings)
                    warn_unknown_once(kv, n);
                continue;
            }
            const setting *t = canonical(s);
            if ((s != t) != spellings || (given & (bit_of(s) | bit_of(t))) ||
                eq[1 + strspn(eq + 1, " \t")] == '\0')
                continue; /* blank: unset */
            /* An alias is read only when the setting's own variable is unset. */
            if ((strlen(s->i.env) != n || strncasecmp(s->i.env, kv, n) != 0) &&
                env_value(envp, s->i.env, strlen(s->i.env)))
                continue;
            char before[64] = "", after[64] = "", from[160];
            snprintf(from, sizeof from, "environment variable %.*s: ", (int)n, kv);
            if (from_env & bit_of(t))
                pn_config_get(c, t->i.name, before, sizeof before);
            pn_error why; /* e may be NULL */
            if (pn_env_text(kv, n, eq + 1, e) != 0)
                return -1;
            if (set_value(c, s, eq + 1, &why) != 0) {
                if (!(s->i.flags & PN_SETTING_LENIENT_ENV) || why.code == PN_ENOMEM)
                    return pn_fail(e, why.code, "%s%s", from, why.msg);
                ignored(from, why.msg);
                continue;
            }
            if ((from_env & bit_of(t)) && pn_config_get(c, t->i.name, after, sizeof after) == 0 &&
                strcmp(before, after) != 0) {
                snprintf(from, sizeof from, "environment variables %s", t->i.env);
                return twice(e, from, s->i.env, t, before, after);
            }
            from_env |= bit_of(t);
        }
    }
    c->given = given;
    return apply_auth_token(c, e);
}

int pn_config_resolve(pn_config *c, char *const *envp, pn_error *e)
{
    if (pn_config_apply_env(c, envp, e) != 0)
        return -1;
    /* No name (the anchors sent "" and the server named the series
     * unknown_service): that name, said once. */
    static const char unnamed[] = "unknown_service";
    if (!(c->application_name && c->application_name[0])) {
        if (first_time("application_name=", 17))
            pn_log(PN_LOG_WARN, "application_name is not set (appName in Node.js, "
                   "PYROSCOPE_APPLICATION_NAME in the environment); the profiles are sent as "
                   "\"%s\", the name the Pyroscope server gives a series without one", unnamed);
        if (dup_str(&c->application_name, unnamed, e) != 0)
            return -1;
    }
    /* No destination at all: the anchors' default server. */
    if (!(c->server_address && c->server_address[0]) && !(c->output_dir && c->output_dir[0]) &&
        !(c->otlp_endpoint && c->otlp_endpoint[0]) &&
        pn_config_set_default(c, "server_address", find("server_address")->i.default_value, e))
        return -1;
    return pn_config_validate(c, e);
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
            if (v && v[0] && check_string(s->i.name, v, e) != 0)
                return -1;
            break;
        }
        case K_RATE:
        case K_SECONDS:
        case K_PERCENT: {
            double d = *(const double *)field;
            if (!(d >= s->i.lo && d <= s->i.hi))
                return pn_fail(e, PN_EINVAL, "%s: %.15g is out of range; it must be between "
                               "%.15g and %.15g %s", s->i.name, d, s->i.lo, s->i.hi,
                               s->k == K_RATE      ? "Hz"
                               : s->k == K_SECONDS ? "seconds"
                                                   : "% of one core (0: no limit)");
            break;
        }
        case K_U32: {
            uint32_t u = *(const uint32_t *)field;
            if (u < s->i.lo || u > s->i.hi)
                return pn_fail(e, PN_EINVAL, "%s: %u is out of range; it must be between %.15g "
                               "and %.15g", s->i.name, u, s->i.lo, s->i.hi);
            break;
        }
        case K_TAGS:
            if (check_pair_array(s->i.name, c->tags, c->ntags, e) != 0)
                return -1;
            for (size_t j = 0; j < c->ntags; j++) {
                if (check_tag(s->i.name, c->tags[j].key, c->tags[j].value, e) != 0)
                    return -1;
            }
            if (check_unique(s->i.name, c->tags, c->ntags, e) != 0)
                return -1;
            break;
        case K_HEADERS:
        case K_OTLP_HEADERS: {
            const pn_label *h = s->k == K_HEADERS ? c->http_headers : c->otlp_headers;
            size_t nh = s->k == K_HEADERS ? c->nheaders : c->notlp_headers;
            if (check_pair_array(s->i.name, h, nh, e) != 0)
                return -1;
            for (size_t j = 0; j < nh; j++) {
                if (check_header(s->i.name, h[j].key, h[j].value, e))
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
        case K_EXTERNAL:
        case K_ALIAS:
            break;
        }
    }
    if ((c->basic_auth_password && c->basic_auth_password[0]) &&
        !(c->basic_auth_username && c->basic_auth_username[0]))
        return pn_fail(e, PN_EINVAL, "basic_auth_password is set but basic_auth_username is not");
    return 0;
}
