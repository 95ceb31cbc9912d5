/* The run report: at stop (or exit), the pages of the profiles one run
 * wrote to its output folder (pn_folder_run_end), written and said once
 * for the three bindings. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_report.h"

/* A message: into said (one a line), and to pn_log unless quiet. */
static void say(const pn_run_report *q, pn_run_report_result *out, int level, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
static void say(const pn_run_report *q, pn_run_report_result *out, int level, const char *fmt,
                ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!q->quiet)
        pn_log(level, "%s", msg);
    size_t have = out->said ? strlen(out->said) : 0, n = strlen(msg);
    char *more = realloc(out->said, have + n + 2);
    if (!more)
        return; /* logged all the same */
    memcpy(more + have, msg, n);
    memcpy(more + have + n, "\n", 2);
    out->said = more;
}

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

/* One page: dir/<page>, its top table into out->text when asked. */
static void write_page(const pn_run_report *q, const pn_folder_pages *p, size_t i,
                       pn_run_report_result *out)
{
    const pn_folder_page *g = &p->pages[i];
    if (g->npaths < g->total) /* the newest only: a long run's stop must not read for minutes */
        say(q, out, PN_LOG_INFO, "the %s flame graph covers the last %zu of the %zu profiles "
            "this run wrote", g->type, g->npaths, g->total);
    size_t len = strlen(p->dir) + strlen(g->page) + 2;
    const char *app = q->app && *q->app ? q->app : "pyroscope-native";
    size_t tlen = strlen(app) + strlen(g->type) + 4;
    char *html = malloc(len), *title = malloc(tlen);
    pn_error e = {0};
    int rc = html && title ? 0 : pn_fail(&e, PN_ENOMEM, "out of memory");
    if (rc == 0) {
        snprintf(html, len, "%s/%s", p->dir, g->page);
        snprintf(title, tlen, "%s (%s)", app, g->type);
        pn_report_request r = {.paths = (const char *const *)g->paths, .npaths = g->npaths,
                               .hide_files = q->hide_files, .nhide = q->nhide, .html = html,
                               .title = title, .view = "", .top = i == 0 ? q->top : 0};
        size_t profiles = 0;
        char *text = NULL;
        size_t text_len = 0;
        rc = pn_report_run(&r, &profiles, &text, &text_len, &e);
        if (rc == 0) {
            out->written++;
            out->profiles += profiles;
            if (i == 0) {
                out->text = text;
                out->text_len = text_len;
                text = NULL;
            }
            say(q, out, PN_LOG_INFO, "%zu profile%s in %s, flame graph: %s", profiles,
                plural(profiles), p->dir, html);
        }
        free(text);
    }
    if (rc != 0)
        say(q, out, PN_LOG_ERROR, "cannot write the flame graph: %s", e.msg);
    free(html);
    free(title);
}

void pn_run_report_write(const pn_run_report *q, pn_run_report_result *out)
{
    *out = (pn_run_report_result){0};
    pn_folder_pages p;
    pn_error e = {0};
    if (pn_folder_run_end(&p, &e) != 0) {
        out->ran = 1;
        say(q, out, PN_LOG_ERROR, "cannot write the flame graph: %s", e.msg);
        return;
    }
    out->ran = p.dir != NULL;
    out->pages = p.n;
    if (p.dir && p.n == 0 && q->failed)
        say(q, out, PN_LOG_INFO, "no profiles were written to %s: writing failed %llu time%s "
            "(the errors are above), so there is no flame graph", p.dir, q->failed,
            q->failed == 1 ? "" : "s");
    else if (p.dir && p.n == 0)
        say(q, out, PN_LOG_INFO, "no profiles were written to %s in this run (it ran too "
            "briefly, or never on the CPU), so there is no flame graph", p.dir);
    for (size_t i = 0; i < p.n; i++)
        write_page(q, &p, i, out);
    pn_folder_pages_free(&p);
}

void pn_run_report_result_free(pn_run_report_result *r)
{
    free(r->text);
    free(r->said);
    *r = (pn_run_report_result){0};
}
