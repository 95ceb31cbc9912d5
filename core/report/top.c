/* The "top functions" text report: functions ranked by self value, with the
 * total of the stacks they appear in. A function's total counts each stack
 * once, so recursion (a -> b -> a) is not counted twice. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_native.h"
#include "pyroscope_report.h"
#include "report_tree.h"

typedef struct {
    int64_t self, total, samples;
    uint32_t func;
    const char *name;
} top_row;

static int cmp_row(const void *a, const void *b)
{
    const top_row *x = a, *y = b;
    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return strcmp(x->name, y->name);
}

static double percent(int64_t v, int64_t of) { return of > 0 ? 100.0 * v / of : 0.0; }

/* Names go to a terminal: control characters would garble it. */
int pn_report_put_text(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (putc(*p < 0x20 || *p == 0x7f ? '?' : *p, out) == EOF)
            return -1;
    }
    return 0;
}

int pn_report_tally(const pn_report *r, pn_report_tally_row *t, pn_error *e)
{
    uint32_t *order, *path = NULL, *active = NULL;
    if (pn_report_preorder(r, &order, e) != 0)
        return -1;
    path = malloc((size_t)r->nnodes * sizeof *path);
    active = calloc(r->nfuncs, sizeof *active);
    if (!path || !active) {
        free(order);
        free(path);
        free(active);
        return pn_fail(e, PN_ENOMEM, "top report: cannot allocate for %u nodes",
                       r->nnodes);
    }
    memset(t, 0, (size_t)r->nfuncs * sizeof *t);
    /* path holds the nodes from the root to the current one; active[func]
     * says how often a function is on it. A node adds to its function's
     * total only when no caller of it is the same function. */
    uint32_t depth = 0;
    for (uint32_t k = 0; k < r->nnodes; k++) {
        const pn_report_node *n = &r->nodes[order[k]];
        while (depth > n->depth)
            active[r->nodes[path[--depth]].func]--;
        path[depth++] = order[k];
        if (order[k] == PN_REPORT_ROOT)
            continue;
        if (active[n->func]++ == 0) {
            t[n->func].total += n->total;
            t[n->func].total_n += n->total_n;
        }
        t[n->func].self += n->self;
    }
    free(order);
    free(path);
    free(active);
    return 0;
}

/* "file:line" of a function, or "" when its file is unknown. */
void pn_report_where(const pn_report *r, uint32_t func, char *buf, size_t len)
{
    const pn_report_func *f = &r->funcs[func];
    const char *file = pn_report_shown_file(r, r->names[f->file]);
    if (!*file)
        snprintf(buf, len, "%s", "");
    else if (f->line)
        snprintf(buf, len, "%s:%u", file, f->line);
    else
        snprintf(buf, len, "%s", file);
}

int pn_report_write_top(const pn_report *r, FILE *out, size_t n, pn_error *e)
{
    if (!r || !out)
        return pn_fail(e, PN_EINVAL, "pn_report_write_top: a report and a stream are required");
    pn_report_tally_row *t = malloc((size_t)r->nfuncs * sizeof *t);
    top_row *rows = malloc((size_t)r->nfuncs * sizeof *rows);
    char **names = NULL;
    int rc = -1;
    if (!t || !rows) {
        pn_fail(e, PN_ENOMEM, "top report: cannot allocate for %u functions", r->nfuncs);
        goto done;
    }
    if (pn_report_tally(r, t, e) != 0 || pn_report_display_names(r, &names, e) != 0)
        goto done;

    size_t nrows = 0;
    for (uint32_t i = 1; i < r->nfuncs; i++) {
        if (t[i].total > 0 || t[i].total_n > 0)
            rows[nrows++] = (top_row){t[i].self, t[i].total, t[i].total_n, i, names[i]};
    }
    qsort(rows, nrows, sizeof *rows, cmp_row);
    size_t shown = n == 0 || n > nrows ? nrows : n;

    const char *type = r->sample_type && *r->sample_type ? r->sample_type : "value";
    const char *unit = r->sample_unit && *r->sample_unit ? r->sample_unit : "count";
    const pn_report_node *root = &r->nodes[PN_REPORT_ROOT];
    int64_t all = root->total;
    char all_s[48];
    pn_report_format_value(all_s, sizeof all_s, all, unit);

    /* Columns are as wide as their widest value, so numbers line up. */
    char vbuf[48];
    int wself = (int)strlen("self"), wtotal = (int)strlen("total");
    for (size_t i = 0; i < shown; i++) {
        pn_report_format_value(vbuf, sizeof vbuf, rows[i].self, unit);
        if ((int)strlen(vbuf) > wself)
            wself = (int)strlen(vbuf);
        pn_report_format_value(vbuf, sizeof vbuf, rows[i].total, unit);
        if ((int)strlen(vbuf) > wtotal)
            wtotal = (int)strlen(vbuf);
    }

    int bad = fprintf(out, "Top %zu of %zu functions by self %s\n", shown, nrows, type) < 0;
    bad |= fprintf(out, "Total %s %s (%s) in %zu profile%s, %" PRId64 " samples%s\n", type,
                   pn_report_unit_word(unit), all_s, r->profiles,
                   r->profiles == 1 ? "" : "s", root->total_n,
                   r->selected ? " selected" : "") < 0;
    if (r->truncated_stacks)
        bad |= fprintf(out, "%" PRIu64 " %s cut at %u frames ([truncated])\n",
                       r->truncated_stacks,
                       r->truncated_stacks == 1 ? "stack was" : "stacks were",
                       r->max_depth) < 0;
    if (r->invalid_utf8)
        bad |= fprintf(out, "%" PRIu64 " name(s) were not valid UTF-8 (shown with "
                       "U+FFFD)\n", r->invalid_utf8) < 0;
    if (nrows == 0) {
        bad |= fputs("(no samples)\n", out) == EOF;
    } else {
        /* Each column says what it holds: values in the sample type's unit
         * (scaled per value), percentages of the total, samples as counts. */
        bad |= fprintf(out, "\n%*s  %7s  %*s  %7s  %9s  %s\n", wself, "self", "self%",
                       wtotal, "total", "total%", "samples", "function (file:line)") < 0;
        for (size_t i = 0; i < shown && !bad; i++) {
            char sbuf[48], tbuf[48], where[4200];
            pn_report_format_value(sbuf, sizeof sbuf, rows[i].self, unit);
            pn_report_format_value(tbuf, sizeof tbuf, rows[i].total, unit);
            pn_report_where(r, rows[i].func, where, sizeof where);
            bad |= fprintf(out, "%*s  %6.2f%%  %*s  %6.2f%%  %9" PRId64 "  ", wself, sbuf,
                           percent(rows[i].self, all), wtotal, tbuf,
                           percent(rows[i].total, all), rows[i].samples) < 0;
            bad |= pn_report_put_text(out, rows[i].name) != 0;
            if (*where) {
                bad |= fputs("  ", out) == EOF;
                bad |= pn_report_put_text(out, where) != 0;
            }
            bad |= putc('\n', out) == EOF;
        }
    }
    if (bad || fflush(out) != 0) {
        pn_fail(e, PN_EIO, "top report: writing the table failed");
        goto done;
    }
    rc = 0;
done:
    pn_report_display_free(r, names);
    free(t);
    free(rows);
    return rc;
}
