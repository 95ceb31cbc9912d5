/* Settings: defaults, string parsing and its rules, PYROSCOPE_* environment
 * variables, whole-config validation and deep copies. */
#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pyroscope_native.h"

extern char **environ;

/* True when hay contains needle; says what was missing when it does not, so
 * a failed CHECK shows the actual message. */
static int has(const char *hay, const char *needle)
{
    if (hay && strstr(hay, needle))
        return 1;
    fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", hay ? hay : "(null)", needle);
    return 0;
}

/* Sets name=value expecting a rejection whose message holds every needle
 * (a NULL-terminated list). */
static void reject(pn_config *c, const char *name, const char *value, const char *const *needles)
{
    pn_error e;
    pn_error_clear(&e);
    int rc = pn_config_set(c, name, value, &e);
    if (rc != -1)
        fprintf(stderr, "  %s=\"%s\" was accepted\n", name, value);
    CHECK_EQ_INT(rc, -1);
    CHECK(e.code != PN_OK);
    for (size_t i = 0; needles && needles[i]; i++)
        CHECK(has(e.msg, needles[i]));
}

static void accept(pn_config *c, const char *name, const char *value)
{
    pn_error e;
    pn_error_clear(&e);
    int rc = pn_config_set(c, name, value, &e);
    if (rc != 0)
        fprintf(stderr, "  %s=\"%s\" rejected: %s\n", name, value, e.msg);
    CHECK_EQ_INT(rc, 0);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ------------------------------------------------------------ log capture */

/* Messages logged while a test captures them. Owned by the test's (only)
 * thread: config logs from the caller's thread. */
static struct {
    int n;
    int level;
    char text[1024];
} captured;

static void capture(void *ud, int level, const char *msg)
{
    (void)ud;
    captured.n++;
    captured.level = level;
    size_t len = strlen(captured.text);
    snprintf(captured.text + len, sizeof captured.text - len, "%s\n", msg);
}

static int saved_level;

static void capture_start(void)
{
    memset(&captured, 0, sizeof captured);
    saved_level = pn_log_level();
    pn_log_set_level(PN_LOG_DEBUG);
    pn_log_set_handler(capture, NULL);
}

static void capture_stop(void)
{
    pn_log_set_handler(NULL, NULL);
    pn_log_set_level(saved_level);
}

/* --------------------------------------------------------------- defaults */

static void test_defaults(void)
{
    pn_config c;
    memset(&c, 0x5a, sizeof c); /* init must not rely on zeroed memory */
    pn_config_init(&c);
    CHECK(c.sample_rate == 100);
    CHECK(c.upload_interval == 10);
    CHECK_EQ_INT(c.oncpu, 1);
    CHECK_EQ_INT(c.fault_guard, 1);
    CHECK_EQ_INT(c.log_level, PN_LOG_WARN);
    CHECK_EQ_INT(c.max_depth, 128);
    CHECK_EQ_INT(c.max_stacks, 16384);
    CHECK(c.stop_timeout == 5);
    CHECK(c.sampler_cpu_budget == 1);
    CHECK(c.application_name == NULL);
    CHECK(c.server_address == NULL);
    CHECK(c.output_dir == NULL);
    CHECK(c.tags == NULL);
    CHECK_EQ_INT(c.ntags, 0);
    CHECK(c.http_headers == NULL);
    CHECK_EQ_INT(c.nheaders, 0);
    CHECK_EQ_INT(c.report_pid, 0);
    CHECK_EQ_INT(c.report_thread_id, 0);
    CHECK_EQ_INT(c.report_thread_name, 0);
    pn_config_free(&c);
    /* free leaves an empty config that can be freed again */
    CHECK(c.application_name == NULL);
    pn_config_free(&c);
}

/* ------------------------------------------------------------------ names */

/* A valid string form for every setting; a new setting without an entry
 * here fails test_every_name_settable. */
static const struct {
    const char *name;
    const char *value;
} valid_values[] = {
    {"application_name", "svc.cpu"},
    {"server_address", "http://127.0.0.1:4040"},
    {"sample_rate", "97"},
    {"upload_interval", "15"},
    {"oncpu", "false"},
    {"tags", "region=eu,zone=b"},
    {"basic_auth_username", "alice"},
    {"basic_auth_password", "s3cr:et"},
    {"tenant_id", "team-a"},
    {"http_headers", "X-Extra=1"},
    {"output_dir", "/tmp/profiles"},
    {"report_pid", "yes"},
    {"report_thread_id", "on"},
    {"report_thread_name", "1"},
    {"log_level", "debug"},
    {"max_stacks", "2048"},
    {"max_depth", "64"},
    {"stop_timeout", "2.5"},
    {"spy_name", "pyspy"},
    {"fault_guard", "off"},
    {"otlp_endpoint", "http://127.0.0.1:4318"},
    {"otlp_headers", "Authorization=Bearer x"},
    {"otlp_protocol", "http/json"},
    {"resource_attributes", "deployment.environment=prod"},
    {"runtime_name", "cpython"},
    {"runtime_version", "3.11.7"},
    {"sampler_cpu_budget", "2.5"},
    {"strict_labels", "true"},
    {"memory", "true"},
    {"memory_interval", "65536"},
    {"memory_max_live", "1024"},
};

static void test_every_name_settable(void)
{
    const char *const *names = pn_config_names();
    CHECK(names != NULL);
    size_t n = 0;
    pn_config c;
    pn_config_init(&c);
    for (; names && names[n]; n++) {
        const char *value = NULL;
        for (size_t j = 0; j < sizeof valid_values / sizeof valid_values[0]; j++) {
            if (strcmp(valid_values[j].name, names[n]) == 0)
                value = valid_values[j].value;
        }
        if (!value)
            fprintf(stderr, "  setting \"%s\" has no test value\n", names[n]);
        CHECK(value != NULL);
        if (value)
            accept(&c, names[n], value);
        for (size_t k = 0; k < n; k++)
            CHECK(strcmp(names[k], names[n]) != 0); /* no duplicates */
    }
    CHECK_EQ_INT(n, sizeof valid_values / sizeof valid_values[0]);
    /* the list is stable: a second call gives the same names */
    CHECK(pn_config_names() == names);

    /* and each setting landed in its own field */
    CHECK_STR(c.application_name, "svc.cpu");
    CHECK_STR(c.server_address, "http://127.0.0.1:4040");
    CHECK(c.sample_rate == 97);
    CHECK(c.upload_interval == 15);
    CHECK_EQ_INT(c.oncpu, 0);
    CHECK_EQ_INT(c.ntags, 2);
    CHECK_STR(c.basic_auth_username, "alice");
    CHECK_STR(c.basic_auth_password, "s3cr:et");
    CHECK_STR(c.tenant_id, "team-a");
    CHECK_EQ_INT(c.nheaders, 1);
    CHECK_STR(c.output_dir, "/tmp/profiles");
    CHECK_EQ_INT(c.report_pid, 1);
    CHECK_EQ_INT(c.report_thread_id, 1);
    CHECK_EQ_INT(c.report_thread_name, 1);
    CHECK_EQ_INT(c.log_level, PN_LOG_DEBUG);
    CHECK_EQ_INT(c.max_stacks, 2048);
    CHECK_EQ_INT(c.max_depth, 64);
    CHECK(c.stop_timeout == 2.5);
    CHECK_STR(c.spy_name, "pyspy");
    CHECK_EQ_INT(c.fault_guard, 0);
    CHECK(c.sampler_cpu_budget == 2.5);
    CHECK(c.strict_labels == 1);
    pn_error e;
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0);
    pn_config_free(&c);
}

static void test_unknown_name(void)
{
    pn_config c;
    pn_config_init(&c);
    reject(&c, "sample_rat", "100", NEEDLES("sample_rat", "unknown"));
    reject(&c, "SAMPLE_RATE", "100", NEEDLES("SAMPLE_RATE")); /* names are exact */
    reject(&c, "", "1", NEEDLES("unknown"));
    pn_error e;
    CHECK_EQ_INT(pn_config_set(&c, NULL, "1", &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    reject(&c, "sample_rate", NULL, NEEDLES("sample_rate"));
    CHECK(c.sample_rate == 100);
    /* a NULL error pointer is allowed */
    CHECK_EQ_INT(pn_config_set(&c, "nope", "1", NULL), -1);
    pn_config_free(&c);
}

/* --------------------------------------------------------------- booleans */

static void test_booleans(void)
{
    static const struct {
        const char *s;
        int v;
    } forms[] = {
        {"true", 1}, {"false", 0}, {"1", 1},   {"0", 0},     {"yes", 1},  {"no", 0},
        {"on", 1},   {"off", 0},   {"TRUE", 1}, {"False", 0}, {"YeS", 1}, {"NO", 0},
        {"On", 1},   {"OFF", 0},
    };
    static const char *const bools[] = {"oncpu", "report_pid", "report_thread_id",
                                        "report_thread_name"};
    pn_config c;
    pn_config_init(&c);
    for (size_t b = 0; b < sizeof bools / sizeof bools[0]; b++) {
        for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
            /* start from the opposite value so a no-op cannot pass */
            accept(&c, bools[b], forms[i].v ? "0" : "1");
            accept(&c, bools[b], forms[i].s);
            int got = bools[b][0] == 'o'              ? c.oncpu
                      : strcmp(bools[b], "report_pid") == 0 ? c.report_pid
                      : strcmp(bools[b], "report_thread_id") == 0 ? c.report_thread_id
                                                                  : c.report_thread_name;
            if (got != forms[i].v)
                fprintf(stderr, "  %s=%s gave %d\n", bools[b], forms[i].s, got);
            CHECK_EQ_INT(got, forms[i].v);
        }
    }
    accept(&c, "oncpu", "true");
    reject(&c, "oncpu", "maybe", NEEDLES("oncpu", "maybe", "true/false"));
    reject(&c, "report_pid", "2", NEEDLES("report_pid"));
    reject(&c, "oncpu", "", NEEDLES("oncpu"));
    reject(&c, "oncpu", "truee", NEEDLES("oncpu"));
    CHECK_EQ_INT(c.oncpu, 1); /* unchanged by the rejections */
    pn_config_free(&c);
}

/* ---------------------------------------------------------------- numbers */

static void test_sampler_cpu_budget(void)
{
    pn_config c;
    pn_config_init(&c);
    accept(&c, "sampler_cpu_budget", "0"); /* no limit */
    CHECK(c.sampler_cpu_budget == 0);
    accept(&c, "sampler_cpu_budget", "0.25");
    CHECK(c.sampler_cpu_budget == 0.25);
    accept(&c, "sampler_cpu_budget", "100");
    CHECK(c.sampler_cpu_budget == 100);
    const char *bad[] = {"-1", "100.5", "1%", "abc", "nan", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        reject(&c, "sampler_cpu_budget", bad[i], NEEDLES("sampler_cpu_budget", "one core"));
    CHECK(c.sampler_cpu_budget == 100); /* every rejection left the value alone */
    pn_config_free(&c);
}

static void test_sample_rate(void)
{
    pn_config c;
    pn_config_init(&c);
    accept(&c, "sample_rate", "100");
    CHECK(c.sample_rate == 100);
    accept(&c, "sample_rate", "0.5");
    CHECK(c.sample_rate == 0.5);
    accept(&c, "sample_rate", " 250 ");
    CHECK(c.sample_rate == 250);
    accept(&c, "sample_rate", "1e3");
    CHECK(c.sample_rate == 1000);
    accept(&c, "sample_rate", "0.1"); /* both bounds are inclusive */
    CHECK(c.sample_rate == 0.1);
    accept(&c, "sample_rate", "10000");
    CHECK(c.sample_rate == 10000);
    accept(&c, "sample_rate", "99");

    static const char *const bad[] = {"abc", "nan", "", "inf", "0x10", "12abc", "1,5", "1e-400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        reject(&c, "sample_rate", bad[i], NEEDLES("sample_rate", "0.1", "10000"));
    CHECK(c.sample_rate == 99); /* every rejection left the value alone */
    /* a number out of range: the nearest bound (the anchors took any); zero
     * or less is no rate at all: the default */
    static const struct {
        const char *s;
        double v;
    } clamped[] = {{"0", 100}, {"-5", 100}, {"0.09", 0.1}, {"10001", 10000}, {"1e9", 10000}};
    for (size_t i = 0; i < sizeof clamped / sizeof clamped[0]; i++) {
        accept(&c, "sample_rate", clamped[i].s);
        CHECK(c.sample_rate == clamped[i].v);
    }
    pn_config_free(&c);
}

static void test_durations(void)
{
    pn_config c;
    pn_config_init(&c);
    static const struct {
        const char *s;
        double v;
    } good[] = {
        {"10", 10}, {"2.5s", 2.5}, {"500ms", 0.5}, {"1m", 60}, {"0.05", 0.05},
        {"3600", 3600}, {"60m", 3600}, {" 7s ", 7}, {"50ms", 0.05},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        accept(&c, "upload_interval", good[i].s);
        if (fabs(c.upload_interval - good[i].v) > 1e-12)
            fprintf(stderr, "  upload_interval=%s gave %g\n", good[i].s, c.upload_interval);
        CHECK(fabs(c.upload_interval - good[i].v) <= 1e-12);
    }
    accept(&c, "upload_interval", "12");
    static const char *const bad[] = {"2h", "x", "", "s", "ms", "nan", "infs", "10 seconds"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        reject(&c, "upload_interval", bad[i], NEEDLES("upload_interval", "3600"));
    CHECK(c.upload_interval == 12);
    static const struct {
        const char *s;
        double v;
    } clamped[] = {{"0", 10}, {"-1", 10}, {"49ms", 0.05}, {"10ms", 0.05}, {"61m", 3600},
                   {"1e9", 3600}};
    for (size_t i = 0; i < sizeof clamped / sizeof clamped[0]; i++) {
        accept(&c, "upload_interval", clamped[i].s);
        CHECK(fabs(c.upload_interval - clamped[i].v) <= 1e-12);
    }

    accept(&c, "stop_timeout", "0"); /* zero: stop without waiting */
    CHECK(c.stop_timeout == 0);
    accept(&c, "stop_timeout", "250ms");
    CHECK(c.stop_timeout == 0.25);
    accept(&c, "stop_timeout", "1m");
    CHECK(c.stop_timeout == 60);
    reject(&c, "stop_timeout", "soon", NEEDLES("stop_timeout", "60"));
    CHECK(c.stop_timeout == 60);
    accept(&c, "stop_timeout", "61"); /* out of range: the nearest bound */
    CHECK(c.stop_timeout == 60);
    accept(&c, "stop_timeout", "-1s");
    CHECK(c.stop_timeout == 0);
    pn_config_free(&c);
}

static void test_whole_numbers(void)
{
    pn_config c;
    pn_config_init(&c);
    /* taken as given, or out of range: the nearest bound; zero or less: the
     * default */
    static const struct {
        const char *name, *s;
        uint32_t v;
    } good[] = {
        {"max_depth", "1000", 1000}, {"max_depth", "2", 2}, {"max_depth", "1e2", 100},
        {"max_depth", "1001", 1000}, {"max_depth", "1", 2}, {"max_depth", "-3", 128},
        {"max_stacks", "16", 16}, {"max_stacks", "15", 16}, {"max_stacks", "10000001", 10000000},
        {"max_stacks", "5000000000", 10000000}, /* > UINT32_MAX */
        {"max_stacks", "10000000", 10000000}, {"max_depth", "100", 100},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        accept(&c, good[i].name, good[i].s);
        CHECK_EQ_INT(strcmp(good[i].name, "max_depth") == 0 ? c.max_depth : c.max_stacks,
                     good[i].v);
    }
    reject(&c, "max_depth", "ten", NEEDLES("max_depth"));
    reject(&c, "max_depth", "50.5", NEEDLES("max_depth", "whole"));
    CHECK_EQ_INT(c.max_depth, 100);
    reject(&c, "max_stacks", "1.5", NEEDLES("max_stacks", "whole"));
    reject(&c, "max_stacks", "100.5", NEEDLES("max_stacks", "whole"));
    CHECK_EQ_INT(c.max_stacks, 10000000);
    pn_config_free(&c);
}

/* Numbers are parsed the same way whatever locale the host program set
 * (e.g. Python's locale.setlocale(LC_ALL, "de_DE.UTF-8") makes ',' the
 * decimal separator of strtod). */
static void test_numbers_ignore_locale(void)
{
    static const char *const comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
                                                "fr_FR.utf8", "de_DE", "fr_FR"};
    const char *old = setlocale(LC_NUMERIC, NULL);
    char saved[64];
    snprintf(saved, sizeof saved, "%s", old ? old : "C");
    const char *used = NULL;
    for (size_t i = 0; i < sizeof comma_locales / sizeof comma_locales[0] && !used; i++) {
        if (setlocale(LC_NUMERIC, comma_locales[i]) &&
            strcmp(localeconv()->decimal_point, ",") == 0)
            used = comma_locales[i];
    }
    pn_config c;
    pn_config_init(&c);
    /* also checked without such a locale: the C locale result is the same */
    accept(&c, "sample_rate", "0.5");
    CHECK(c.sample_rate == 0.5);
    accept(&c, "upload_interval", "2.5s");
    CHECK(c.upload_interval == 2.5);
    reject(&c, "sample_rate", "1,5", NEEDLES("sample_rate"));
    pn_config_free(&c);
    setlocale(LC_NUMERIC, saved);
    if (!used)
        fprintf(stderr, "  (no locale with a ',' decimal point installed; checked in C only)\n");
}

/* ------------------------------------------------------------------ pairs */

static void test_tags(void)
{
    pn_config c;
    pn_config_init(&c);
    accept(&c, "tags", "k=v,k2=v2");
    CHECK_EQ_INT(c.ntags, 2);
    if (c.ntags == 2) {
        CHECK_STR(c.tags[0].key, "k");
        CHECK_STR(c.tags[0].value, "v");
        CHECK_STR(c.tags[1].key, "k2");
        CHECK_STR(c.tags[1].value, "v2");
    }
    accept(&c, "tags", "  region = eu-west ,  host=a b , ");
    CHECK_EQ_INT(c.ntags, 2);
    if (c.ntags == 2) {
        CHECK_STR(c.tags[0].key, "region");
        CHECK_STR(c.tags[0].value, "eu-west");
        CHECK_STR(c.tags[1].key, "host");
        CHECK_STR(c.tags[1].value, "a b"); /* inner spaces are part of the value */
    }
    accept(&c, "tags", "");
    CHECK_EQ_INT(c.ntags, 0);
    CHECK(c.tags == NULL);
    accept(&c, "tags", " , ,");
    CHECK_EQ_INT(c.ntags, 0);

    accept(&c, "tags", "keep=me");
    static const char *const bad[] = {"novalue", "__x=1", "a-b=1", "k=a{b", "k=",
                                      "=v", "k=a=b", "1k=v", "ok=1,bad", "k=1,k=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        reject(&c, "tags", bad[i], NEEDLES("tags"));
    /* a rejected value leaves the previous tags */
    CHECK_EQ_INT(c.ntags, 1);
    if (c.ntags == 1)
        CHECK_STR(c.tags[0].value, "me");

    /* at most PN_MAX_LABELS */
    char many[PN_MAX_LABELS * 12 + 16];
    size_t len = 0;
    for (int i = 0; i < PN_MAX_LABELS; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, "%sk%d=v", i ? "," : "", i);
    accept(&c, "tags", many);
    CHECK_EQ_INT(c.ntags, PN_MAX_LABELS);
    snprintf(many + len, sizeof many - len, ",extra=1");
    pn_error e;
    CHECK_EQ_INT(pn_config_set(&c, "tags", many, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    CHECK(has(e.msg, "tags"));
    CHECK_EQ_INT(c.ntags, PN_MAX_LABELS);
    /* a bad tag with no error pointer fails without touching it */
    CHECK_EQ_INT(pn_config_set(&c, "tags", "k=a{b", NULL), -1);
    pn_config_free(&c);
}

static void test_headers(void)
{
    pn_config c;
    pn_config_init(&c);
    accept(&c, "http_headers", "X-A=1,Y=2");
    CHECK_EQ_INT(c.nheaders, 2);
    if (c.nheaders == 2) {
        CHECK_STR(c.http_headers[0].key, "X-A");
        CHECK_STR(c.http_headers[0].value, "1");
        CHECK_STR(c.http_headers[1].key, "Y");
        CHECK_STR(c.http_headers[1].value, "2");
    }
    accept(&c, "http_headers", "Authorization=Bearer abc.def");
    CHECK_EQ_INT(c.nheaders, 1);
    if (c.nheaders == 1)
        CHECK_STR(c.http_headers[0].value, "Bearer abc.def");
    reject(&c, "http_headers", "bad header=1", NEEDLES("http_headers", "bad header"));
    reject(&c, "http_headers", "X:A=1", NEEDLES("http_headers"));
    reject(&c, "http_headers", "=1", NEEDLES("http_headers"));
    reject(&c, "http_headers", "X-A", NEEDLES("http_headers"));
    reject(&c, "http_headers", "X-A=a\r\nEvil: 1", NEEDLES("http_headers"));
    reject(&c, "http_headers", "X-A=a\tb\x01", NEEDLES("http_headers"));
    CHECK_EQ_INT(c.nheaders, 1);
    accept(&c, "http_headers", "");
    CHECK_EQ_INT(c.nheaders, 0);
    pn_config_free(&c);
}

/* Pairs given as pairs: values may carry ',' and '=' that the string form
 * cannot; the same rules apply. */
static void test_pairs(void)
{
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    pn_label h[] = {{"Authorization", "Bearer a=b,c=="}, {"X-B", ""}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "http_headers", h, 2, &e), 0);
    CHECK_EQ_INT(c.nheaders, 2);
    if (c.nheaders == 2)
        CHECK_STR(c.http_headers[0].value, "Bearer a=b,c==");
    pn_label badh[] = {{"X A", "1"}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "http_headers", badh, 1, &e), -1);
    CHECK(has(e.msg, "http_headers"));
    CHECK_EQ_INT(c.nheaders, 2); /* a rejection keeps the old value */
    pn_label t[] = {{"region", "eu"}, {"host", "a"}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "tags", t, 2, &e), 0);
    CHECK_EQ_INT(c.ntags, 2);
    pn_label badt[] = {{"__name__", "x"}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "tags", badt, 1, &e), -1);
    CHECK(has(e.msg, "tags"));
    pn_label badv[] = {{"k", "a,b"}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "tags", badv, 1, &e), -1);
    CHECK(has(e.msg, "tags"));
    pn_label dup[] = {{"k", "1"}, {"k", "2"}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "tags", dup, 2, &e), -1);
    CHECK(has(e.msg, "twice"));
    CHECK_EQ_INT(pn_config_set_pairs(&c, "sample_rate", t, 1, &e), -1);
    CHECK(has(e.msg, "sample_rate"));
    CHECK_EQ_INT(pn_config_set_pairs(&c, "tags", NULL, 0, &e), 0);
    CHECK_EQ_INT(c.ntags, 0);
    pn_config_free(&c);
}

/* A malformed address with credentials: every message names the setting
 * and shows the user, never the password (config rules, environment, and
 * libcurl's parser in the HTTP exporter at start). */
static void test_address_errors_hide_password(void)
{
    static const char *const bad[] = {
        "ftp://bob:hunter2@x", "http://bob:hunter2@h/?q=1", "http://bob:hunter2@h b",
        "bob:hunter2@h b", "http://bob:hunter2@:x@h#f"};
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        reject(&c, "server_address", bad[i], NEEDLES("server_address", "bob:***@"));
        pn_config_set(&c, "server_address", bad[i], &e);
        CHECK(!has(e.msg, "hunter2"));
        char line[128];
        snprintf(line, sizeof line, "PYROSCOPE_SERVER_ADDRESS=%s", bad[i]);
        char *env[] = {line, NULL};
        CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), -1);
        CHECK(has(e.msg, "PYROSCOPE_SERVER_ADDRESS") && has(e.msg, "bob:***@"));
        CHECK(!has(e.msg, "hunter2"));
    }
    /* Passes the config rules; libcurl refuses the port when the agent starts. */
    accept(&c, "application_name", "app");
    accept(&c, "server_address", "http://bob:hunter2@127.0.0.1:99999");
    pn_agent *a = pn_agent_start(&c, &e);
    CHECK(a == NULL);
    if (a)
        pn_agent_stop(a);
    else
        CHECK(has(e.msg, "server_address") && has(e.msg, "bob:***@") && !has(e.msg, "hunter2"));
    pn_config_free(&c);
}

/* ---------------------------------------------------------------- strings */

static void test_strings(void)
{
    pn_config c;
    pn_config_init(&c);
    accept(&c, "application_name", "my-app/x.y");
    CHECK_STR(c.application_name, "my-app/x.y");
    accept(&c, "application_name", "svc_2.cpu");
    CHECK_STR(c.application_name, "svc_2.cpu");
    reject(&c, "application_name", "my app", NEEDLES("application_name"));
    reject(&c, "application_name", "a{b}", NEEDLES("application_name"));
    CHECK_STR(c.application_name, "svc_2.cpu");

    accept(&c, "server_address", "http://127.0.0.1:4040");
    CHECK_STR(c.server_address, "http://127.0.0.1:4040");
    accept(&c, "server_address", "https://profiles.example.com/base/");
    CHECK_STR(c.server_address, "https://profiles.example.com/base/");
    accept(&c, "server_address", "HTTP://127.0.0.1:4040"); /* schemes are case-insensitive */
    static const char *const bad_servers[] = {
        "ftp://x", "127.0.0.1 :4040", "/x", "http://", "https:///path",
        "http://a b", "http://h/?q=1", "http://h/#f", "http://h\x7f", "http:/h"};
    for (size_t i = 0; i < sizeof bad_servers / sizeof bad_servers[0]; i++)
        reject(&c, "server_address", bad_servers[i], NEEDLES("server_address"));
    CHECK_STR(c.server_address, "HTTP://127.0.0.1:4040");
    accept(&c, "server_address", ""); /* empty: no HTTP upload */
    CHECK(c.server_address == NULL);

    accept(&c, "basic_auth_username", "alice");
    reject(&c, "basic_auth_username", "al:ice", NEEDLES("basic_auth_username", "':'"));
    CHECK_STR(c.basic_auth_username, "alice");
    accept(&c, "basic_auth_password", "p:a@ss w"); /* anything but line breaks */
    CHECK_STR(c.basic_auth_password, "p:a@ss w");
    reject(&c, "basic_auth_password", "a\nb", NEEDLES("basic_auth_password"));

    accept(&c, "tenant_id", "tenant-1");
    reject(&c, "tenant_id", "t\r\nX-Evil: 1", NEEDLES("tenant_id"));
    reject(&c, "tenant_id", "t\tx", NEEDLES("tenant_id"));
    CHECK_STR(c.tenant_id, "tenant-1");

    accept(&c, "output_dir", "/var/tmp/my profiles");
    CHECK_STR(c.output_dir, "/var/tmp/my profiles");
    accept(&c, "output_dir", "");
    CHECK(c.output_dir == NULL);

    accept(&c, "spy_name", "rbspy");
    reject(&c, "spy_name", "py spy", NEEDLES("spy_name"));
    CHECK_STR(c.spy_name, "rbspy");
    pn_config_free(&c);
}

static void test_log_level(void)
{
    static const struct {
        const char *s;
        int v;
    } good[] = {
        {"debug", PN_LOG_DEBUG}, {"INFO", PN_LOG_INFO},   {"warning", PN_LOG_WARN},
        {"Warn", PN_LOG_WARN},   {"error", PN_LOG_ERROR}, {"off", PN_LOG_OFF},
        {"none", PN_LOG_OFF},    {"10", 10},              {"25", 25},
        {"0", 0},                {"100", 100},
    };
    pn_config c;
    pn_config_init(&c);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        accept(&c, "log_level", "33"); /* distinct from every expected value */
        accept(&c, "log_level", good[i].s);
        CHECK_EQ_INT(c.log_level, good[i].v);
    }
    accept(&c, "log_level", "error");
    static const char *const bad[] = {"loud", "", "-1", "101", "2.5", "nan", "debug2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        reject(&c, "log_level", bad[i], NEEDLES("log_level"));
    CHECK_EQ_INT(c.log_level, PN_LOG_ERROR);
    pn_config_free(&c);
}

/* ------------------------------------------------------------ environment */

static void test_env_applied(void)
{
    char *env[] = {
        "HOME=/root",
        "PYROSCOPE_APPLICATION_NAME=env.app",
        "PYROSCOPE_SERVER_ADDRESS=http://127.0.0.1:4040",
        "PYROSCOPE_SAMPLE_RATE=250",
        "PYROSCOPE_TAGS=env=prod, region=eu",
        "PYROSCOPE_OUTPUT_DIR=/tmp/pn-out",
        "PYROSCOPE_ONCPU=false",
        "PYROSCOPE_UPLOAD_INTERVAL=500ms",
        "PYROSCOPE_BASIC_AUTH_USERNAME=bob",
        "PYROSCOPE_BASIC_AUTH_PASSWORD=pw",
        "PYROSCOPE_TENANT_ID=t1",
        "PYROSCOPE_HTTP_HEADERS=X-A=1",
        "PYROSCOPE_REPORT_PID=true",
        "PYROSCOPE_REPORT_THREAD_ID=1",
        "PYROSCOPE_REPORT_THREAD_NAME=on",
        "PYROSCOPE_LOG_LEVEL=info",
        "PYROSCOPE_MAX_STACKS=4096",
        "PYROSCOPE_MAX_DEPTH=256",
        "PYROSCOPE_STOP_TIMEOUT=3",
        NULL,
    };
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    pn_error_clear(&e);
    capture_start();
    int rc = pn_config_apply_env(&c, env, &e);
    capture_stop();
    if (rc != 0)
        fprintf(stderr, "  apply_env: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(captured.n, 0); /* all known: nothing to warn about */
    CHECK_STR(c.application_name, "env.app");
    CHECK_STR(c.server_address, "http://127.0.0.1:4040");
    CHECK(c.sample_rate == 250);
    CHECK_EQ_INT(c.ntags, 2);
    if (c.ntags == 2) {
        CHECK_STR(c.tags[0].key, "env");
        CHECK_STR(c.tags[0].value, "prod");
        CHECK_STR(c.tags[1].key, "region");
        CHECK_STR(c.tags[1].value, "eu");
    }
    CHECK_STR(c.output_dir, "/tmp/pn-out");
    CHECK_EQ_INT(c.oncpu, 0);
    CHECK(c.upload_interval == 0.5);
    CHECK_STR(c.basic_auth_username, "bob");
    CHECK_STR(c.basic_auth_password, "pw");
    CHECK_STR(c.tenant_id, "t1");
    CHECK_EQ_INT(c.nheaders, 1);
    if (c.nheaders == 1) {
        CHECK_STR(c.http_headers[0].key, "X-A");
        CHECK_STR(c.http_headers[0].value, "1");
    }
    CHECK_EQ_INT(c.report_pid, 1);
    CHECK_EQ_INT(c.report_thread_id, 1);
    CHECK_EQ_INT(c.report_thread_name, 1);
    CHECK_EQ_INT(c.log_level, PN_LOG_INFO);
    CHECK_EQ_INT(c.max_stacks, 4096);
    CHECK_EQ_INT(c.max_depth, 256);
    CHECK(c.stop_timeout == 3);
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0);
    pn_config_free(&c);
}

static void test_env_bad_value(void)
{
    static const struct {
        const char *var;
        const char *needles[3];
    } cases[] = {
        {"PYROSCOPE_SAMPLE_RATE=abc", {"PYROSCOPE_SAMPLE_RATE", "sample_rate", "10000"}},
        {"PYROSCOPE_ONCPU=maybe", {"PYROSCOPE_ONCPU", "maybe", NULL}},
        {"PYROSCOPE_TAGS=a-b=1", {"PYROSCOPE_TAGS", "tags", NULL}},
        {"PYROSCOPE_SERVER_ADDRESS=local host:4040", {"PYROSCOPE_SERVER_ADDRESS", "http://", NULL}},
        {"PYROSCOPE_UPLOAD_INTERVAL=2h", {"PYROSCOPE_UPLOAD_INTERVAL", "upload_interval", NULL}},
        {"PYROSCOPE_APPLICATION_NAME=my app", {"PYROSCOPE_APPLICATION_NAME", NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *env[] = {"PYROSCOPE_MAX_DEPTH=64", (char *)cases[i].var, NULL};
        pn_config c;
        pn_config_init(&c);
        pn_error e;
        pn_error_clear(&e);
        CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), -1);
        CHECK_EQ_INT(e.code, PN_EINVAL);
        for (size_t k = 0; k < 3 && cases[i].needles[k]; k++)
            CHECK(has(e.msg, cases[i].needles[k]));
        /* the value itself is not the variable name: only the name is quoted */
        CHECK(strstr(e.msg, cases[i].var) == NULL);
        /* and a NULL error pointer is fine */
        CHECK_EQ_INT(pn_config_apply_env(&c, env, NULL), -1);
        pn_config_free(&c);
    }
}

static void test_env_unknown_and_foreign(void)
{
    char *env[] = {
        "PYROSCOPE_FOO=1",
        "PATH=/usr/bin",
        "PYROSCOPEX_SAMPLE_RATE=5",     /* a different prefix */
        "pyroscope_sample_rate=5",      /* prefix is upper case */
        "PYROSCOPE_SAMPLE_RATE_X=9",
        "PYROSCOPE_=1",
        "PYROSCOPE_NOEQUALS",
        "PYROSCOPE_Sample_Rate=42",     /* the setting part is case-insensitive */
        NULL,
    };
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    pn_error_clear(&e);
    capture_start();
    int rc = pn_config_apply_env(&c, env, &e);
    capture_stop();
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(captured.n, 3);
    CHECK_EQ_INT(captured.level, PN_LOG_WARN);
    CHECK(has(captured.text, "PYROSCOPE_FOO"));
    CHECK(has(captured.text, "PYROSCOPE_SAMPLE_RATE_X"));
    CHECK(strstr(captured.text, "PYROSCOPEX") == NULL);
    CHECK(strstr(captured.text, "PATH") == NULL);
    CHECK(c.sample_rate == 42);
    pn_config_free(&c);

    /* at the default WARN level the warning is delivered too */
    pn_config_init(&c);
    char *only_foo[] = {"PYROSCOPE_FOO_AT_WARN=bar", NULL};
    memset(&captured, 0, sizeof captured);
    int before = pn_log_level();
    pn_log_set_level(PN_LOG_WARN);
    pn_log_set_handler(capture, NULL);
    CHECK_EQ_INT(pn_config_apply_env(&c, only_foo, &e), 0);
    pn_log_set_handler(NULL, NULL);
    pn_log_set_level(before);
    CHECK_EQ_INT(captured.n, 1);
    CHECK(has(captured.text, "PYROSCOPE_FOO_AT_WARN"));
    pn_config_free(&c);

    /* Once per process: a second start does not repeat it (issue 27). */
    pn_config_init(&c);
    capture_start();
    CHECK_EQ_INT(pn_config_apply_env(&c, only_foo, &e), 0);
    capture_stop();
    CHECK_EQ_INT(captured.n, 0);
    pn_config_free(&c);
}

static void test_env_empty_is_unset(void)
{
    pn_config c;
    pn_config_init(&c);
    accept(&c, "application_name", "kw.app");
    accept(&c, "tags", "a=1");
    char *env[] = {"PYROSCOPE_SAMPLE_RATE=", "PYROSCOPE_APPLICATION_NAME=", "PYROSCOPE_TAGS=",
                   "PYROSCOPE_ONCPU=", NULL};
    pn_error e;
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    CHECK(c.sample_rate == 100);
    CHECK_STR(c.application_name, "kw.app");
    CHECK_EQ_INT(c.ntags, 1);
    CHECK_EQ_INT(c.oncpu, 1);
    pn_config_free(&c);
}

/* Bindings apply the environment first and their keywords after it. */
static void test_keyword_wins(void)
{
    char *env[] = {"PYROSCOPE_SAMPLE_RATE=50", "PYROSCOPE_APPLICATION_NAME=env.app",
                   "PYROSCOPE_TAGS=from=env", "PYROSCOPE_SERVER_ADDRESS=http://127.0.0.1:1",
                   NULL};
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    accept(&c, "sample_rate", "200");
    accept(&c, "tags", "from=kw");
    CHECK(c.sample_rate == 200);
    CHECK_STR(c.application_name, "env.app"); /* not given by keyword: env stays */
    CHECK_EQ_INT(c.ntags, 1);
    if (c.ntags == 1)
        CHECK_STR(c.tags[0].value, "kw");
    CHECK_STR(c.server_address, "http://127.0.0.1:1");
    pn_config_free(&c);
}

static void test_env_null_reads_environ(void)
{
    /* swap in a known environment so the runner's variables cannot interfere */
    char *fake[] = {"PYROSCOPE_TENANT_ID=from-environ", "PYROSCOPE_MAX_DEPTH=77", NULL};
    char **saved = environ;
    environ = fake;
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    int rc = pn_config_apply_env(&c, NULL, &e);
    environ = saved;
    CHECK_EQ_INT(rc, 0);
    CHECK_STR(c.tenant_id, "from-environ");
    CHECK_EQ_INT(c.max_depth, 77);
    pn_config_free(&c);
}

/* ------------------------------------------------------------- validation */

static void expect_invalid(const pn_config *c, const char *n1, const char *n2)
{
    pn_error e;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_config_validate(c, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK(has(e.msg, n1));
    if (n2)
        CHECK(has(e.msg, n2));
    CHECK_EQ_INT(pn_config_validate(c, NULL), -1);
}

static void test_validate(void)
{
    pn_config c;
    pn_error e;
    pn_config_init(&c);
    expect_invalid(&c, "application_name", NULL);
    accept(&c, "application_name", "svc");
    expect_invalid(&c, "server_address", "output_dir");

    accept(&c, "server_address", "http://127.0.0.1:4040");
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0);
    accept(&c, "output_dir", "/tmp/x");
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0); /* both destinations */
    accept(&c, "server_address", "");
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0); /* folder only */

    accept(&c, "basic_auth_password", "pw");
    expect_invalid(&c, "basic_auth_password", "basic_auth_username");
    accept(&c, "basic_auth_username", "u");
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0);
    accept(&c, "basic_auth_password", "");
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0); /* user without password is fine */
    pn_config_free(&c);

    /* Fields a binding wrote directly are held to the same rules. */
    static const struct {
        const char *field;
        const char *needle;
    } direct[] = {
        {"sample_rate", "sample_rate"},   {"sample_rate_nan", "sample_rate"},
        {"upload_interval", "upload_interval"}, {"max_depth", "max_depth"},
        {"max_stacks", "max_stacks"},     {"stop_timeout", "stop_timeout"},
        {"budget", "sampler_cpu_budget"}, {"budget_nan", "sampler_cpu_budget"},
        {"app", "application_name"},      {"server", "server_address"},
        {"tag", "tags"},                  {"header", "http_headers"},
        {"user", "basic_auth_username"},  {"tenant", "tenant_id"},
        {"dup_tag", "tags"},              {"tag_no_array", "tags"},
        {"tag_null_value", "tags"},       {"header_null_key", "http_headers"},
    };
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++) {
        pn_config_init(&c);
        accept(&c, "application_name", "svc");
        accept(&c, "output_dir", "/tmp/x");
        accept(&c, "tags", "ok=1");
        accept(&c, "http_headers", "X-Ok=1");
        CHECK_EQ_INT(pn_config_validate(&c, &e), 0);
        const char *f = direct[i].field;
        if (strcmp(f, "sample_rate") == 0)
            c.sample_rate = 0;
        else if (strcmp(f, "sample_rate_nan") == 0)
            c.sample_rate = NAN;
        else if (strcmp(f, "upload_interval") == 0)
            c.upload_interval = -1;
        else if (strcmp(f, "max_depth") == 0)
            c.max_depth = 5000;
        else if (strcmp(f, "max_stacks") == 0)
            c.max_stacks = 1;
        else if (strcmp(f, "stop_timeout") == 0)
            c.stop_timeout = 120;
        else if (strcmp(f, "budget") == 0)
            c.sampler_cpu_budget = -0.5;
        else if (strcmp(f, "budget_nan") == 0)
            c.sampler_cpu_budget = NAN;
        else if (strcmp(f, "app") == 0)
            c.application_name[0] = ' ';
        else if (strcmp(f, "server") == 0) {
            c.server_address = strdup("ftp://h");
        } else if (strcmp(f, "tag") == 0)
            ((char *)c.tags[0].key)[0] = '-';
        else if (strcmp(f, "header") == 0)
            ((char *)c.http_headers[0].key)[0] = ' ';
        else if (strcmp(f, "user") == 0)
            c.basic_auth_username = strdup("a:b");
        else if (strcmp(f, "tenant") == 0)
            c.tenant_id = strdup("t\n");
        else if (strcmp(f, "dup_tag") == 0) {
            accept(&c, "tags", "k=1,j=2");
            if (c.ntags == 2)
                ((char *)c.tags[1].key)[0] = 'k'; /* now "k" twice */
        } else if (strcmp(f, "tag_no_array") == 0) {
            accept(&c, "tags", "");
            c.ntags = 3;
        } else if (strcmp(f, "tag_null_value") == 0) {
            free((char *)c.tags[0].value);
            c.tags[0].value = NULL;
        } else if (strcmp(f, "header_null_key") == 0) {
            free((char *)c.http_headers[0].key);
            c.http_headers[0].key = NULL;
        }
        expect_invalid(&c, direct[i].needle, NULL);
        if (c.tags == NULL)
            c.ntags = 0;
        pn_config_free(&c);
    }
}

/* ------------------------------------------------------------------- copy */

static void test_copy(void)
{
    pn_config src;
    pn_config_init(&src);
    for (size_t j = 0; j < sizeof valid_values / sizeof valid_values[0]; j++)
        accept(&src, valid_values[j].name, valid_values[j].value);
    accept(&src, "sample_rate", "33.5");

    pn_config dst;
    memset(&dst, 0x5a, sizeof dst); /* copy must not read dst */
    pn_error e;
    CHECK_EQ_INT(pn_config_copy(&dst, &src, &e), 0);

    /* distinct storage */
    CHECK(dst.application_name != src.application_name);
    CHECK(dst.tags != src.tags);
    CHECK(dst.http_headers != src.http_headers);
    CHECK(dst.ntags == 0 || dst.tags[0].key != src.tags[0].key);
    pn_config_free(&src); /* the copy must survive this */

    CHECK_STR(dst.application_name, "svc.cpu");
    CHECK_STR(dst.server_address, "http://127.0.0.1:4040");
    CHECK(dst.sample_rate == 33.5);
    CHECK(dst.upload_interval == 15);
    CHECK_EQ_INT(dst.oncpu, 0);
    CHECK_EQ_INT(dst.ntags, 2);
    if (dst.ntags == 2) {
        CHECK_STR(dst.tags[0].key, "region");
        CHECK_STR(dst.tags[0].value, "eu");
        CHECK_STR(dst.tags[1].key, "zone");
        CHECK_STR(dst.tags[1].value, "b");
    }
    CHECK_STR(dst.basic_auth_username, "alice");
    CHECK_STR(dst.basic_auth_password, "s3cr:et");
    CHECK_STR(dst.tenant_id, "team-a");
    CHECK_EQ_INT(dst.nheaders, 1);
    if (dst.nheaders == 1) {
        CHECK_STR(dst.http_headers[0].key, "X-Extra");
        CHECK_STR(dst.http_headers[0].value, "1");
    }
    CHECK_STR(dst.output_dir, "/tmp/profiles");
    CHECK_EQ_INT(dst.report_pid, 1);
    CHECK_EQ_INT(dst.report_thread_id, 1);
    CHECK_EQ_INT(dst.report_thread_name, 1);
    CHECK_EQ_INT(dst.log_level, PN_LOG_DEBUG);
    CHECK_EQ_INT(dst.max_stacks, 2048);
    CHECK_EQ_INT(dst.max_depth, 64);
    CHECK(dst.stop_timeout == 2.5);
    CHECK_STR(dst.spy_name, "pyspy");
    CHECK_EQ_INT(pn_config_validate(&dst, &e), 0);

    /* a copy of a copy, then the copy is changed: the second one keeps its values */
    pn_config again;
    CHECK_EQ_INT(pn_config_copy(&again, &dst, &e), 0);
    accept(&dst, "tags", "");
    accept(&dst, "application_name", "other");
    CHECK_EQ_INT(again.ntags, 2);
    CHECK_STR(again.application_name, "svc.cpu");
    pn_config_free(&dst);
    pn_config_free(&again);

    /* an empty config copies to an empty config */
    pn_config empty, empty2;
    pn_config_init(&empty);
    CHECK_EQ_INT(pn_config_copy(&empty2, &empty, &e), 0);
    CHECK(empty2.application_name == NULL);
    CHECK(empty2.tags == NULL);
    CHECK_EQ_INT(empty2.ntags, 0);
    CHECK(empty2.sample_rate == 100);
    pn_config_free(&empty);
    pn_config_free(&empty2);
}

/* Issue 28: the variables Grafana's examples use. */
static void test_env_anchor_variables(void)
{
    pn_config c;
    pn_error e;
    pn_config_init(&c);
    char *env[] = {"PYROSCOPE_APPLICATION_NAME=a", "PYROSCOPE_SERVER_ADDRESS=http://h:1",
                   "PYROSCOPE_BASIC_AUTH_USER=alice", "PYROSCOPE_BASIC_AUTH_PASSWORD=pw",
                   "PYROSCOPE_AUTH_TOKEN=tok", NULL};
    capture_start();
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    capture_stop();
    /* the token is sent, basic auth is not (@pyroscope/nodejs's exporter) */
    CHECK(c.basic_auth_username == NULL && c.basic_auth_password == NULL);
    CHECK(captured.n == 0 || has(captured.text, "the token is sent and basic auth is not"));
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0);
    CHECK_EQ_INT((int)c.nheaders, 1);
    CHECK_STR(c.http_headers[0].key, "Authorization");
    CHECK_STR(c.http_headers[0].value, "Bearer tok");
    pn_config_free(&c);
    /* by keyword: the same; beside an Authorization header by keyword, an error */
    pn_config_init(&c);
    accept(&c, "auth_token", "kw");
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    CHECK_STR(c.http_headers[0].value, "Bearer kw");
    pn_config_free(&c);
    pn_config_init(&c);
    accept(&c, "auth_token", "kw");
    accept(&c, "http_headers", "Authorization=Basic x");
    CHECK_EQ_INT(pn_config_apply_env(&c, env + 5, &e), -1);
    CHECK(has(e.msg, "auth_token and an Authorization header in http_headers"));
    pn_config_free(&c);
    /* The full name wins; an Authorization header given wins over the token. */
    pn_config_init(&c);
    char *env2[] = {"PYROSCOPE_BASIC_AUTH_USER=alice", "PYROSCOPE_BASIC_AUTH_USERNAME=bob",
                    "PYROSCOPE_HTTP_HEADERS=authorization=Basic x", "PYROSCOPE_AUTH_TOKEN=tok",
                    NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, env2, &e), 0);
    CHECK_STR(c.basic_auth_username, "bob");
    CHECK_EQ_INT((int)c.nheaders, 1);
    CHECK_STR(c.http_headers[0].value, "Basic x");
    pn_config_free(&c);
}

/* ------------------------------------------------ the table (issue 27) */

/* Every row is consistent: its variable is PYROSCOPE_<NAME>, its default
 * parses and is what pn_config_init sets, a core setting no binding sets
 * itself has a keyword somewhere. */
static void test_table(void)
{
    size_t n = 0;
    for (const pn_setting_info *s; (s = pn_config_setting(n)); n++) {
        char env[80];
        snprintf(env, sizeof env, "PYROSCOPE_%s", s->name);
        for (char *p = env; *p; p++)
            *p = (char)toupper((unsigned char)*p);
        CHECK_STR(s->env, env);
        CHECK(pn_config_setting_find(s->name) == s);
        CHECK(s->kind_name && s->meaning);
        if (s->alias_of) { /* another spelling: of a setting that is none */
            const pn_setting_info *t = pn_config_setting_find(s->alias_of);
            CHECK(t && !t->alias_of && !(t->flags & PN_SETTING_EXTERNAL));
            CHECK(s->alias_ratio > 0 && !s->default_value && (s->python || s->node || s->ruby));
            continue;
        }
        if (s->flags & PN_SETTING_EXTERNAL) {
            CHECK(s->python || s->node || s->ruby);
            continue;
        }
        if (!(s->flags & PN_SETTING_BINDING))
            CHECK(s->python || s->node || s->ruby);
        if (s->default_value && strcmp(s->name, "server_address") != 0) {
            char buf[64];
            pn_config a, b;
            pn_config_init(&a);
            pn_config_init(&b);
            accept(&b, s->name, s->default_value);
            b.given = 0;
            if (memcmp(&a, &b, sizeof a) != 0)
                fprintf(stderr, "  %s: default \"%s\" is not pn_config_init's\n", s->name,
                        s->default_value);
            CHECK(memcmp(&a, &b, sizeof a) == 0);
            CHECK_EQ_INT(pn_config_get(&a, s->name, buf, sizeof buf), 0);
            CHECK_STR(buf, s->default_value); /* the string form round-trips */
            pn_config_free(&a);
            pn_config_free(&b);
        }
    }
    CHECK(n > 20 && n <= 64);
    CHECK(pn_config_setting(n) == NULL);
    CHECK(pn_config_setting_find("no_such") == NULL);
    int v = -1;
    pn_error e;
    CHECK_EQ_INT(pn_config_parse_bool("x", " On ", &v, &e), 0);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(pn_config_parse_bool("x", "maybe", &v, &e), -1);
    CHECK(has(e.msg, "x: \"maybe\" is not a boolean"));
}

/* Keyword > PYROSCOPE_* > its alias > OTEL_* > default, for every setting a
 * variable feeds; a bad variable beside a keyword is not even parsed. */
static void test_precedence(void)
{
    pn_config c;
    pn_error e;
    char *env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:4318",
                   "PYROSCOPE_OTLP_ENDPOINT=http://pyro:4318",
                   "OTEL_SERVICE_NAME=otel.app", "PYROSCOPE_SAMPLE_RATE=not-a-number",
                   "PYROSCOPE_ADHOC_SERVER_ADDRESS=http://adhoc:1", NULL};
    pn_config_init(&c);
    accept(&c, "otlp_endpoint", "http://kw:4318");
    accept(&c, "sample_rate", "7");
    CHECK_EQ_INT(pn_config_resolve(&c, env, &e), 0);
    CHECK_STR(c.otlp_endpoint, "http://kw:4318");
    CHECK(c.sample_rate == 7);
    CHECK_STR(c.application_name, "otel.app");
    CHECK_STR(c.server_address, "http://adhoc:1");
    pn_config_free(&c);

    pn_config_init(&c);
    accept(&c, "server_address", "http://kw:1");
    CHECK_EQ_INT(pn_config_apply_env(&c, env + 1, &e), -1);
    CHECK(has(e.msg, "environment variable PYROSCOPE_SAMPLE_RATE: sample_rate:"));
    pn_config_free(&c);

    char *env2[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:4318",
                    "PYROSCOPE_OTLP_ENDPOINT=http://pyro:4318",
                    "PYROSCOPE_SERVER_ADDRESS=http://pyro:1",
                    "PYROSCOPE_ADHOC_SERVER_ADDRESS=http://adhoc:1",
                    "PYROSCOPE_APPLICATION_NAME=a", NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_resolve(&c, env2, &e), 0);
    CHECK_STR(c.otlp_endpoint, "http://pyro:4318");
    CHECK_STR(c.server_address, "http://pyro:1"); /* the own variable beats the alias */
    pn_config_free(&c);

    /* A binding's default (spy_name) yields to the variable. */
    char *env3[] = {"PYROSCOPE_SPY_NAME=custom", NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_set_default(&c, "spy_name", "nodespy", &e), 0);
    CHECK_EQ_INT(pn_config_apply_env(&c, env3, &e), 0);
    CHECK_STR(c.spy_name, "custom");
    pn_config_free(&c);
}

/* No destination: the default server; an OTLP endpoint alone (by either
 * OTEL_ variable) or a folder alone is the only destination. */
static void test_resolve_destination(void)
{
    pn_config c;
    pn_error e;
    char *none[] = {"PYROSCOPE_APPLICATION_NAME=a", NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_resolve(&c, none, &e), 0);
    CHECK_STR(c.server_address, "http://localhost:4040");
    pn_config_free(&c);
    char *otel[] = {"PYROSCOPE_APPLICATION_NAME=a", "OTEL_EXPORTER_OTLP_ENDPOINT=http://o:4318",
                    NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_resolve(&c, otel, &e), 0);
    CHECK(c.server_address == NULL);
    pn_config_free(&c);
    pn_config_init(&c);
    accept(&c, "output_dir", "/tmp/x");
    CHECK_EQ_INT(pn_config_resolve(&c, none, &e), 0);
    CHECK(c.server_address == NULL);
    pn_config_free(&c);
    /* Variables the bindings read themselves are known: no warning. */
    char *ext[] = {"PYROSCOPE_APPLICATION_NAME=a", "PYROSCOPE_GIL_ONLY=false",
                   "PYROSCOPE_FLUSH_INTERVAL_MS=100", "PYROSCOPE_COMPRESSION=gzip", NULL};
    pn_config_init(&c);
    capture_start();
    CHECK_EQ_INT(pn_config_resolve(&c, ext, &e), 0);
    capture_stop();
    CHECK_EQ_INT(captured.n, 0);
    pn_config_free(&c);
}

/* Issue 28 §2: inputs the anchors took at start-up start here too, with the
 * anchors' meaning (and one warning naming the setting); an input that
 * cannot work at all stays an error naming it. One row per input. */
static const struct {
    const char *name, *value; /* pn_config_set; value NULL: not set at all */
    const char *want;         /* pn_config_get after resolve; NULL: refused */
    const char *warning;      /* in the one warning; NULL: none */
} anchor_inputs[] = {
    /* @pyroscope/nodejs 0.6.4 check-pyroscope-config.js takes appName
     * undefined or '' (profiler: appName ?? ''); the server names such a
     * series unknown_service (pyroscope distributor, AttrServiceNameFallback).
     * The pyroscope gem 1.1 Config defaults application_name to "". */
    {"application_name", NULL, "unknown_service", "application_name is not set"},
    {"application_name", "", "unknown_service", "application_name is not set"},
    /* Node's serverAddress, the gem's server_address: any string (Node:
     * check-pyroscope-config.js hasValidServerAddress; gem: Config Struct). */
    {"server_address", "pyroscope:4040", "http://pyroscope:4040", "has no scheme"},
    {"server_address", "localhost", "http://localhost", "has no scheme"},
    {"otlp_endpoint", "collector:4318", NULL, NULL}, /* not the anchors': OTel's rule */
    {"server_address", "https://h:1", "https://h:1", NULL},
    {"server_address", "py roscope:4040", NULL, NULL}, /* no address even with http:// */
    {"server_address", "ftp://h", NULL, NULL},
    /* The gem's log_level (its README: "debug", "info", "warn", "error",
     * "fatal" from Ruby's Logger) and Python logging's CRITICAL. */
    {"log_level", "fatal", "error", NULL},
    {"log_level", "CRITICAL", "error", NULL},
    /* Numbers the anchors took unchecked (Node: flushIntervalMs 10 is
     * upload_interval "10ms", check-pyroscope-config.js hasValidFlushInterval;
     * Python/Ruby: sample_rate any integer): the nearest bound, one warning. */
    {"upload_interval", "10ms", "0.05", "out of range"},
    {"upload_interval", "2h", NULL, NULL}, /* no duration at all */
    {"sample_rate", "0", "100", "not positive"}, /* 0.1 Hz would look like a rate */
    {"sample_rate", "0.01", "0.1", "out of range"},
    {"upload_interval", "0", "10", "not positive"},
    {"max_stacks", "-1", "16384", "not positive"},
    {"sample_rate", "1000000", "10000", "out of range"},
    {"sample_rate", "fast", NULL, NULL},
    {"max_depth", "5000", "1000", "out of range"},
    {"stop_timeout", "-1", "0", "out of range"},
    /* ours, where a bound would change the meaning or the cost: still errors */
    {"sampler_cpu_budget", "-1", NULL, NULL}, /* -1 is no typo for 0 (no limit) */
    {"memory_interval", "0", NULL, NULL},     /* 1 B: a sample per allocation */
};

static void test_anchor_inputs(void)
{
    for (size_t i = 0; i < sizeof anchor_inputs / sizeof anchor_inputs[0]; i++) {
        const char *name = anchor_inputs[i].name, *want = anchor_inputs[i].want;
        pn_config c;
        pn_config_init(&c);
        pn_error e;
        pn_error_clear(&e);
        char *env[] = {NULL};
        if (strcmp(name, "application_name") != 0)
            accept(&c, "application_name", "app");
        capture_start();
        int rc = anchor_inputs[i].value ? pn_config_set(&c, name, anchor_inputs[i].value, &e) : 0;
        if (rc == 0)
            rc = pn_config_resolve(&c, env, &e);
        capture_stop();
        if (!want) {
            CHECK_EQ_INT(rc, -1);
            CHECK(has(e.msg, name));
            pn_config_free(&c);
            continue;
        }
        if (rc != 0)
            fprintf(stderr, "  %s=\"%s\" refused: %s\n", name, anchor_inputs[i].value, e.msg);
        CHECK_EQ_INT(rc, 0);
        char got[256];
        CHECK_EQ_INT(pn_config_get(&c, name, got, sizeof got), 0);
        CHECK_STR(got, want);
        if (anchor_inputs[i].warning) {
            /* once per process: a row repeating an earlier warning sees none */
            CHECK(captured.n <= 1);
            CHECK(captured.n == 0 || (has(captured.text, anchor_inputs[i].warning) &&
                                      has(captured.text, name)));
        }
        pn_config_free(&c);
    }
    /* The first of each warning is given: a fresh address warns. */
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    char *env[] = {NULL};
    accept(&c, "application_name", "app");
    capture_start();
    accept(&c, "server_address", "fresh-host:4040");
    CHECK_EQ_INT(pn_config_resolve(&c, env, &e), 0);
    accept(&c, "server_address", "fresh-host:4040");
    capture_stop();
    CHECK_EQ_INT(captured.n, 1);
    CHECK(has(captured.text, "server_address") && has(captured.text, "http://fresh-host:4040"));
    pn_config_free(&c);
}

/* ------------------------------------- other spellings (issue 27: aliases) */

/* The anchors' other spellings are rows of their own (alias_of, in their
 * own unit): set by keyword or variable, converted, precedence as the
 * setting's; the setting given twice with different values is an error
 * naming both; a lenient row's meaningless value is a warning. */
static void test_aliases(void)
{
    pn_config c;
    pn_error e;
    char buf[64];
    /* units: ms -> s, a period in us -> Hz, bytes */
    pn_config_init(&c);
    accept(&c, "flush_interval_ms", "2500");
    accept(&c, "wall_sampling_interval_micros", "5000");
    accept(&c, "heap_sampling_interval_bytes", "1024");
    CHECK(c.upload_interval == 2.5);
    CHECK(c.sample_rate == 200);
    CHECK_EQ_INT((int)c.memory_interval, 1024);
    char *vars[] = {"PYROSCOPE_UPLOAD_INTERVAL=9", "PYROSCOPE_SAMPLE_RATE=9", NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, vars, &e), 0); /* given: not read */
    CHECK(c.upload_interval == 2.5 && c.sample_rate == 200);
    CHECK_EQ_INT(pn_config_get(&c, "flush_interval_ms", buf, sizeof buf), -1);
    /* the same value by both spellings: one setting, accepted */
    accept(&c, "sample_rate", "200");
    accept(&c, "memory_interval", "1024");
    /* different values: refused, naming both */
    reject(&c, "upload_interval", "1", NEEDLES("flush_interval_ms and upload_interval are the "
                                               "same setting, given as 2.5 and 1 s"));
    pn_config_free(&c);
    pn_config_init(&c);
    accept(&c, "sample_rate", "99");
    reject(&c, "wall_sampling_interval_micros", "10000",
           NEEDLES("sample_rate and wall_sampling_interval_micros are the same setting, given as "
                   "99 and 100 Hz"));
    pn_config_free(&c);

    /* the period is clamped (the anchor took any), with one warning */
    pn_config_init(&c);
    capture_start();
    accept(&c, "wall_sampling_interval_micros", "37");
    capture_stop();
    CHECK(c.sample_rate == 10000);
    CHECK(has(captured.text, "wall_sampling_interval_micros: 37 us is out of range"));
    /* a keyword of a lenient row out of range: ignored, with a warning; a
     * value that is no whole number stays an error */
    capture_start();
    accept(&c, "flush_interval_ms", "-7");
    capture_stop();
    CHECK(c.upload_interval == 10);
    CHECK(has(captured.text, "flush_interval_ms: -7 is out of range") &&
          has(captured.text, "it is ignored (the default is used)"));
    reject(&c, "flush_interval_ms", "1.5", NEEDLES("flush_interval_ms", "not a whole number"));
    /* Node's heap.samplingIntervalBytes: any number (the anchor passed it
     * to V8): out of range, the nearest bound; zero or less, the default */
    capture_start();
    accept(&c, "heap_sampling_interval_bytes", "-1");
    CHECK(c.memory_interval == 512 * 1024);
    pn_config_free(&c);
    pn_config_init(&c);
    accept(&c, "heap_sampling_interval_bytes", "536870912");
    CHECK(c.memory_interval == 268435456);
    capture_stop();
    CHECK(has(captured.text, "heap_sampling_interval_bytes: -1 is not positive; using the default"));
    CHECK(has(captured.text, "out of range"));
    pn_config_free(&c);

    /* variables: the setting's own beside another spelling's, the keyword
     * beats both, either spelling's keyword beats the other's variable */
    char *same[] = {"PYROSCOPE_UPLOAD_INTERVAL=2", "PYROSCOPE_FLUSH_INTERVAL_MS=2000", NULL};
    char *differ[] = {"PYROSCOPE_FLUSH_INTERVAL_MS=1000", "PYROSCOPE_UPLOAD_INTERVAL=3", NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_apply_env(&c, same, &e), 0);
    CHECK(c.upload_interval == 2);
    pn_config_free(&c);
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_apply_env(&c, differ, &e), -1);
    CHECK(has(e.msg, "environment variables PYROSCOPE_UPLOAD_INTERVAL and "
                     "PYROSCOPE_FLUSH_INTERVAL_MS are the same setting, given as 3 and 1 s"));
    pn_config_free(&c);
    pn_config_init(&c);
    accept(&c, "flush_interval_ms", "4000");
    CHECK_EQ_INT(pn_config_apply_env(&c, differ, &e), 0);
    CHECK(c.upload_interval == 4);
    pn_config_free(&c);
    pn_config_init(&c);
    accept(&c, "upload_interval", "5");
    CHECK_EQ_INT(pn_config_apply_env(&c, differ, &e), 0);
    CHECK(c.upload_interval == 5);
    pn_config_free(&c);

    /* a lenient variable, malformed or out of range: a warning, the default */
    char *soon[] = {"PYROSCOPE_FLUSH_INTERVAL_MS=soon", "PYROSCOPE_HEAP_SAMPLING_INTERVAL_BYTES=0",
                    "PYROSCOPE_WALL_COLLECT_CPU_TIME=maybe", "PYROSCOPE_HEAP_STACK_DEPTH=1.5",
                    "PYROSCOPE_STRIP_FILENAMES=none", NULL};
    pn_config_init(&c);
    capture_start();
    CHECK_EQ_INT(pn_config_apply_env(&c, soon, &e), 0);
    capture_stop();
    CHECK(c.upload_interval == 10 && c.memory_interval == 512 * 1024);
    CHECK_EQ_INT(captured.n, 5);
    CHECK(has(captured.text, "environment variable PYROSCOPE_FLUSH_INTERVAL_MS: "
                             "flush_interval_ms: \"soon\" is not a whole number"));
    CHECK(has(captured.text, "PYROSCOPE_STRIP_FILENAMES: strip_filenames: \"none\" is not one "
                             "of all,dependencies; it is ignored"));
    CHECK_EQ_INT(pn_config_get(&c, "heap_stack_depth", buf, sizeof buf), 0);
    CHECK_STR(buf, "64");
    pn_config_free(&c);
    /* a strict one (not the anchor's) still fails */
    char *strict[] = {"PYROSCOPE_HEAP_ALLOCATIONS=maybe", NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_apply_env(&c, strict, &e), -1);
    CHECK(has(e.msg, "environment variable PYROSCOPE_HEAP_ALLOCATIONS: heap_allocations:"));
    pn_config_free(&c);
}

/* A binding's own settings are resolved here too (c->external): keyword >
 * variable > default, checked by kind, and copied with the config. */
static void test_external_resolved(void)
{
    pn_config c, d;
    pn_error e;
    char buf[64];
    char *env[] = {"PYROSCOPE_WALL_SAMPLING_DURATION_MS=30000", "PYROSCOPE_SHORTEN_PATHS=on",
                   "PYROSCOPE_STRIP_FILENAMES=ALL", "PYROSCOPE_HEAP_STACK_DEPTH=8", NULL};
    pn_config_init(&c);
    accept(&c, "heap_stack_depth", "16");
    reject(&c, "wall_collect_cpu_time", "maybe", NEEDLES("wall_collect_cpu_time", "not a boolean"));
    reject(&c, "heap_stack_depth", "0", NEEDLES("heap_stack_depth", "out of range"));
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    CHECK_EQ_INT(pn_config_copy(&d, &c, &e), 0);
    pn_config_free(&c);
    const char *want[][2] = {{"wall_sampling_duration_ms", "30000"}, {"shorten_paths", "true"},
                             {"strip_filenames", "all"}, {"heap_stack_depth", "16"},
                             {"wall_collect_cpu_time", "false"}, {"gil_only", "true"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK_EQ_INT(pn_config_get(&d, want[i][0], buf, sizeof buf), 0);
        CHECK_STR(buf, want[i][1]);
    }
    pn_config_free(&d);
}

/* The full variable wins over its alias whatever their order in envp (a
 * prefix of it was taken for the full name: PYROSCOPE_BASIC_AUTH_USER). */
static void test_env_alias_order(void)
{
    pn_config c;
    pn_error e;
    char *env[] = {"PYROSCOPE_BASIC_AUTH_USERNAME=bob", "PYROSCOPE_BASIC_AUTH_USER=alice", NULL};
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    CHECK_STR(c.basic_auth_username, "bob");
    pn_config_free(&c);
}

/* A variable read must be UTF-8 text (every setting is): the error names
 * it and the byte, never the value; a given setting's variable is not read. */
static void test_env_not_utf8(void)
{
    const char *vars[] = {"PYROSCOPE_BASIC_AUTH_PASSWORD=s3cr\xff" "et",
                          "OTEL_EXPORTER_OTLP_ENDPOINT=http://h\xc3(",
                          "OTEL_SERVICE_NAME=\xed\xa0\x80"}; /* a surrogate */
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        pn_config c;
        pn_error e = {0};
        char *env[] = {(char *)vars[i], NULL};
        pn_config_init(&c);
        CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), -1);
        CHECK(strstr(e.msg, "not valid UTF-8") && !strstr(e.msg, "s3cr"));
        CHECK(strncmp(e.msg + strlen("environment variable "), vars[i], strcspn(vars[i], "=")) == 0);
        pn_config_free(&c);
    }
    pn_config c;
    pn_error e = {0};
    char *env[] = {"PYROSCOPE_TAGS=k=\xff", "OTEL_EXPORTER_OTLP_ENDPOINT=\xff", "PYROSCOPE_\xff=1",
                   NULL};
    pn_config_init(&c);
    /* The signal's own endpoint wins: the general one is not read. */
    char *both[] = {"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT=http://p:4318",
                    "OTEL_EXPORTER_OTLP_ENDPOINT=\xff", NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, both, &e), 0);
    CHECK_STR(c.otlp_endpoint, "http://p:4318");
    pn_label kv[] = {{"k", "v"}};
    CHECK_EQ_INT(pn_config_set_pairs(&c, "tags", kv, 1, &e), 0);
    CHECK_EQ_INT(pn_config_set(&c, "otlp_endpoint", "http://h:4318", &e), 0);
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0); /* the unknown one: a warning */
    pn_config_free(&c);
}

TEST_MAIN(T(test_aliases), T(test_external_resolved), T(test_env_alias_order), T(test_env_not_utf8),
          T(test_anchor_inputs), T(test_table), T(test_precedence), T(test_resolve_destination),
          T(test_env_anchor_variables), T(test_defaults), T(test_every_name_settable), T(test_unknown_name), T(test_booleans),
          T(test_sample_rate), T(test_sampler_cpu_budget), T(test_durations), T(test_whole_numbers),
          T(test_numbers_ignore_locale), T(test_tags), T(test_headers), T(test_pairs), T(test_strings),
          T(test_address_errors_hide_password),
          T(test_log_level), T(test_env_applied), T(test_env_bad_value),
          T(test_env_unknown_and_foreign), T(test_env_empty_is_unset), T(test_keyword_wins),
          T(test_env_null_reads_environ), T(test_validate), T(test_copy))
