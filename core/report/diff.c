/* The diff: how each function's share of self time changes from selection
 * A to selection B (two routes, before and after), the text twin of the
 * page's diff view. Shares, not raw values, so selections of different
 * sizes compare. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_report.h"
#include "report_tree.h"

typedef struct {
    int64_t a, b;
    double change;          /* B share - A share, in percentage points */
    uint32_t func;
    const char *name;
} diff_row;

static int cmp_diff(const void *x, const void *y)
{
    const diff_row *p = x, *q = y;
    double dp = p->change < 0 ? -p->change : p->change;
    double dq = q->change < 0 ? -q->change : q->change;
    if (dp != dq)
        return dp < dq ? 1 : -1;
    return strcmp(p->name, q->name);
}

static double share(int64_t v, int64_t of) { return of > 0 ? 100.0 * v / of : 0.0; }

/* "key=value,key=value" of a selection, or "all". */
static int put_selection(FILE *out, const pn_label *f, size_t n)
{
    int bad = n == 0 && fputs("all", out) == EOF;
    for (size_t i = 0; i < n; i++) {
        bad |= i > 0 && putc(',', out) == EOF;
        bad |= pn_report_put_text(out, f[i].key) != 0 || putc('=', out) == EOF ||
               pn_report_put_text(out, f[i].value) != 0;
    }
    return bad ? -1 : 0;
}

int pn_report_write_diff(pn_report *r, FILE *out, size_t n, const pn_label *a, size_t na,
                         const pn_label *b, size_t nb, pn_error *e)
{
    if (!r || !out)
        return pn_fail(e, PN_EINVAL, "pn_report_write_diff: a report and a stream are "
                       "required");
    pn_report_tally_row *ta = malloc((size_t)r->nfuncs * sizeof *ta);
    pn_report_tally_row *tb = malloc((size_t)r->nfuncs * sizeof *tb);
    diff_row *rows = malloc((size_t)r->nfuncs * sizeof *rows);
    char **names = NULL;
    int rc = -1;
    if (!ta || !tb || !rows) {
        pn_fail(e, PN_ENOMEM, "diff: cannot allocate for %u functions", r->nfuncs);
        goto done;
    }
    if (pn_report_select(r, a, na, e) != 0 || pn_report_tally(r, ta, e) != 0)
        goto done;
    int64_t all_a = r->nodes[PN_REPORT_ROOT].total, n_a = r->nodes[PN_REPORT_ROOT].total_n;
    if (pn_report_select(r, b, nb, e) != 0 || pn_report_tally(r, tb, e) != 0 ||
        pn_report_display_names(r, &names, e) != 0)
        goto done;
    int64_t all_b = r->nodes[PN_REPORT_ROOT].total, n_b = r->nodes[PN_REPORT_ROOT].total_n;

    size_t nrows = 0;
    for (uint32_t i = 1; i < r->nfuncs; i++) {
        if (ta[i].self == 0 && tb[i].self == 0)
            continue;
        rows[nrows++] = (diff_row){ta[i].self, tb[i].self,
                                   share(tb[i].self, all_b) - share(ta[i].self, all_a), i,
                                   names[i]};
    }
    qsort(rows, nrows, sizeof *rows, cmp_diff);
    size_t shown = n == 0 || n > nrows ? nrows : n;

    const char *type = r->sample_type && *r->sample_type ? r->sample_type : "value";
    const char *unit = r->sample_unit && *r->sample_unit ? r->sample_unit : "count";
    char va[48], vb[48], where[4200];
    pn_report_format_value(va, sizeof va, all_a, unit);
    pn_report_format_value(vb, sizeof vb, all_b, unit);
    int bad = fprintf(out, "Diff of self %s %s, top %zu of %zu functions by change of "
                      "share\nA: ", type, pn_report_unit_word(unit), shown, nrows) < 0;
    bad |= put_selection(out, a, na) != 0;
    bad |= fprintf(out, " (total %s, %" PRId64 " samples)\nB: ", va, n_a) < 0;
    bad |= put_selection(out, b, nb) != 0;
    bad |= fprintf(out, " (total %s, %" PRId64 " samples)\n", vb, n_b) < 0;
    if (nrows == 0) {
        bad |= fputs("(no samples)\n", out) == EOF;
    } else {
        bad |= fprintf(out, "\n%12s  %7s  %12s  %7s  %8s  %s\n", "A self", "A%", "B self",
                       "B%", "change", "function (file:line)") < 0;
    }
    for (size_t i = 0; i < shown && !bad; i++) {
        pn_report_format_value(va, sizeof va, rows[i].a, unit);
        pn_report_format_value(vb, sizeof vb, rows[i].b, unit);
        pn_report_where(r, rows[i].func, where, sizeof where);
        bad |= fprintf(out, "%12s  %6.2f%%  %12s  %6.2f%%  %+7.2f%%  ", va,
                       share(rows[i].a, all_a), vb, share(rows[i].b, all_b),
                       rows[i].change) < 0;
        bad |= pn_report_put_text(out, rows[i].name) != 0;
        if (*where)
            bad |= fputs("  ", out) == EOF || pn_report_put_text(out, where) != 0;
        bad |= putc('\n', out) == EOF;
    }
    if (bad || fflush(out) != 0) {
        pn_fail(e, PN_EIO, "diff: writing the table failed");
        goto done;
    }
    rc = 0;
done:
    pn_report_display_free(r, names);
    free(ta);
    free(tb);
    free(rows);
    return rc;
}
