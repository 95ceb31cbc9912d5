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
    int64_t self, total;
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

/* A value in the report's unit, scaled for reading (1.50 s, 12.00 ms). */
static void format_value(char *buf, size_t len, int64_t v, const char *unit)
{
    double d = (double)v;
    if (strcmp(unit, "nanoseconds") == 0) {
        if (v >= 1000000000)
            snprintf(buf, len, "%.2f s", d / 1e9);
        else if (v >= 1000000)
            snprintf(buf, len, "%.2f ms", d / 1e6);
        else if (v >= 1000)
            snprintf(buf, len, "%.2f us", d / 1e3);
        else
            snprintf(buf, len, "%" PRId64 " ns", v);
    } else if (strcmp(unit, "bytes") == 0) {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        size_t k = 0;
        while (d >= 1024 && k < 4)
            d /= 1024, k++;
        if (k == 0)
            snprintf(buf, len, "%" PRId64 " B", v);
        else
            snprintf(buf, len, "%.2f %s", d, units[k]);
    } else {
        snprintf(buf, len, "%" PRId64, v);
    }
}

static double percent(int64_t v, int64_t of) { return of > 0 ? 100.0 * v / of : 0.0; }

/* Function names go to a terminal: control characters would garble it. */
static int put_name(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (putc(*p < 0x20 || *p == 0x7f ? '?' : *p, out) == EOF)
            return -1;
    }
    return putc('\n', out) == EOF ? -1 : 0;
}

/* Self and total per function name (indexed by name id). */
static int tally(const pn_report *r, int64_t *self, int64_t *total, pn_error *e)
{
    uint32_t *order, *path = NULL, *active = NULL;
    if (pn_report_preorder(r, &order, e) != 0)
        return -1;
    path = malloc((size_t)r->nnodes * sizeof *path);
    active = calloc(r->nnames, sizeof *active);
    if (!path || !active) {
        free(order);
        free(path);
        free(active);
        return pn_fail(e, PN_ENOMEM, "top report: cannot allocate for %u nodes",
                       r->nnodes);
    }
    /* path holds the nodes from the root to the current one; active[name]
     * says how often a name is on it. A node adds to its function's total
     * only when no caller of it is the same function. */
    uint32_t depth = 0;
    for (uint32_t k = 0; k < r->nnodes; k++) {
        const pn_report_node *n = &r->nodes[order[k]];
        while (depth > n->depth)
            active[r->nodes[path[--depth]].name]--;
        path[depth++] = order[k];
        if (order[k] == PN_REPORT_ROOT)
            continue;
        if (active[n->name]++ == 0)
            total[n->name] += n->total;
        self[n->name] += n->self;
    }
    free(order);
    free(path);
    free(active);
    return 0;
}

int pn_report_write_top(const pn_report *r, FILE *out, size_t n, pn_error *e)
{
    if (!r || !out)
        return pn_fail(e, PN_EINVAL, "pn_report_write_top: a report and a stream are required");
    int64_t *self = calloc(r->nnames, sizeof *self);
    int64_t *total = calloc(r->nnames, sizeof *total);
    top_row *rows = malloc((size_t)r->nnames * sizeof *rows);
    int rc = -1;
    if (!self || !total || !rows) {
        pn_fail(e, PN_ENOMEM, "top report: cannot allocate for %u functions", r->nnames);
        goto done;
    }
    if (tally(r, self, total, e) != 0)
        goto done;

    size_t nrows = 0;
    for (uint32_t i = 1; i < r->nnames; i++) {
        if (total[i] > 0)
            rows[nrows++] = (top_row){self[i], total[i], r->names[i]};
    }
    qsort(rows, nrows, sizeof *rows, cmp_row);
    size_t shown = n == 0 || n > nrows ? nrows : n;

    const char *type = r->sample_type && *r->sample_type ? r->sample_type : "value";
    const char *unit = r->sample_unit && *r->sample_unit ? r->sample_unit : "count";
    int64_t all = r->nodes[PN_REPORT_ROOT].total;
    char all_s[48];
    format_value(all_s, sizeof all_s, all, unit);

    /* Columns are as wide as their widest value, so numbers line up. */
    char vbuf[48];
    int wself = (int)strlen("self"), wtotal = (int)strlen("total");
    for (size_t i = 0; i < shown; i++) {
        format_value(vbuf, sizeof vbuf, rows[i].self, unit);
        if ((int)strlen(vbuf) > wself)
            wself = (int)strlen(vbuf);
        format_value(vbuf, sizeof vbuf, rows[i].total, unit);
        if ((int)strlen(vbuf) > wtotal)
            wtotal = (int)strlen(vbuf);
    }

    int bad = fprintf(out, "Top %zu of %zu functions by self %s (unit: %s)\n", shown,
                      nrows, type, unit) < 0;
    bad |= fprintf(out, "Total %s in %zu profile%s, %" PRIu64 " samples\n", all_s,
                   r->profiles, r->profiles == 1 ? "" : "s", r->samples) < 0;
    if (r->truncated_stacks)
        bad |= fprintf(out, "%" PRIu64 " %s cut at %u frames ([truncated])\n",
                       r->truncated_stacks,
                       r->truncated_stacks == 1 ? "stack was" : "stacks were",
                       r->max_depth) < 0;
    if (nrows == 0) {
        bad |= fputs("(no samples)\n", out) == EOF;
    } else {
        bad |= fprintf(out, "\n%*s  %7s  %*s  %7s  %s\n", wself, "self", "self%", wtotal,
                       "total", "total%", "function") < 0;
        for (size_t i = 0; i < shown && !bad; i++) {
            char sbuf[48], tbuf[48];
            format_value(sbuf, sizeof sbuf, rows[i].self, unit);
            format_value(tbuf, sizeof tbuf, rows[i].total, unit);
            bad |= fprintf(out, "%*s  %6.2f%%  %*s  %6.2f%%  ", wself, sbuf,
                           percent(rows[i].self, all), wtotal, tbuf,
                           percent(rows[i].total, all)) < 0;
            bad |= put_name(out, rows[i].name) != 0;
        }
    }
    if (bad || fflush(out) != 0) {
        pn_fail(e, PN_EIO, "top report: writing the table failed");
        goto done;
    }
    rc = 0;
done:
    free(self);
    free(total);
    free(rows);
    return rc;
}
