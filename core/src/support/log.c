/* Logging: a handler the binding routes into its language's logging. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pyroscope_native.h"

/* Written at configure time by the binding's thread, read by any core
 * thread. The handler and its data are published together through one
 * pointer so a reader never pairs a new function with old data. */
typedef struct {
    pn_log_fn fn;
    void *ud;
} log_sink;

static log_sink sinks[2];
static _Atomic(const log_sink *) current_sink;
static atomic_int sink_next;
static atomic_int min_level = PN_LOG_WARN;

void pn_log_set_handler(pn_log_fn fn, void *ud)
{
    /* Two alternating cells: a reader that loaded the older one still sees a
     * consistent pair; handlers change only at configure time. */
    int i = atomic_fetch_add(&sink_next, 1) & 1;
    sinks[i].fn = fn;
    sinks[i].ud = ud;
    atomic_store(&current_sink, fn ? &sinks[i] : NULL);
}

void pn_log_set_level(int level) { atomic_store(&min_level, level); }

int pn_log_level(void) { return atomic_load(&min_level); }

static const char *level_name(int level)
{
    if (level >= PN_LOG_ERROR)
        return "ERROR";
    if (level >= PN_LOG_WARN)
        return "WARNING";
    if (level >= PN_LOG_INFO)
        return "INFO";
    return "DEBUG";
}

void pn_log(int level, const char *fmt, ...)
{
    if (level < atomic_load(&min_level))
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const log_sink *s = atomic_load(&current_sink);
    if (s)
        s->fn(s->ud, level, buf);
    else
        fprintf(stderr, "pyroscope %s: %s\n", level_name(level), buf);
}

int pn_log_level_parse(const char *s, int *out)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {
        {"debug", PN_LOG_DEBUG}, {"info", PN_LOG_INFO},   {"warn", PN_LOG_WARN},
        {"warning", PN_LOG_WARN}, {"error", PN_LOG_ERROR}, {"off", PN_LOG_OFF},
        {"none", PN_LOG_OFF},  {"trace", PN_LOG_DEBUG}, /* the pyroscope gem's */
        /* Ruby Logger's and Python logging's most severe: errors are ours. */
        {"fatal", PN_LOG_ERROR}, {"critical", PN_LOG_ERROR},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return -1;
}
