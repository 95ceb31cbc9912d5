/* The breakdown: the selection's total per value of one label, the text
 * twin of the page's breakdown panel. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_report.h"
#include "report_tree.h"


typedef struct {
    int64_t value, count;
    const char *label;      /* the label's value, or PN_REPORT_NO_VALUE */
    const char *span;       /* by span_id: the span's name, else NULL */
} group_row;

/* By span_id, each row names its span: the span_name of a label set that
 * holds both (the page shows it the same way). */
static const char *span_name_of(const pn_report *r, uint32_t key, uint32_t value)
{
    uint32_t sn = pn_report_name_find(r, "span_name");
    if (sn == PN_REPORT_NONE || value == PN_REPORT_NONE ||
        strcmp(r->names[key], "span_id") != 0)
        return NULL;
    for (uint32_t i = 0; i < r->nlsets; i++) {
        if (pn_report_lset_value(r, i, key) != value)
            continue;
        uint32_t v = pn_report_lset_value(r, i, sn);
        if (v != PN_REPORT_NONE)
            return r->names[v];
    }
    return NULL;
}

static int cmp_group(const void *a, const void *b)
{
    const group_row *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? 1 : -1;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->label, y->label);
}

int pn_report_write_breakdown(const pn_report *r, FILE *out, const char *key, pn_error *e)
{
    if (!r || !out || !key || !*key)
        return pn_fail(e, PN_EINVAL, "pn_report_write_breakdown: a report, a stream and a "
                       "label key are required");
    uint32_t kid = pn_report_name_find(r, key);
    /* Slot nnames collects the samples without the label. */
    group_row *g = calloc((size_t)r->nnames + 1, sizeof *g);
    if (!g)
        return pn_fail(e, PN_ENOMEM, "breakdown: cannot allocate for %u values", r->nnames);
    for (uint32_t i = 0; i < r->nrecs; i++) {
        const pn_report_rec *rc = &r->recs[i];
        if (r->lset_sel && !r->lset_sel[rc->lset])
            continue;
        uint32_t v = kid == PN_REPORT_NONE ? PN_REPORT_NONE
                     : pn_report_lset_value(r, rc->lset, kid);
        group_row *row = &g[v == PN_REPORT_NONE ? r->nnames : v];
        row->value += rc->value;
        row->count += rc->count;
    }
    size_t n = 0;
    for (uint32_t i = 0; i <= r->nnames; i++) {
        if (g[i].value || g[i].count)
            g[n++] = (group_row){g[i].value, g[i].count,
                                 i == r->nnames ? PN_REPORT_NO_VALUE : r->names[i],
                                 i == r->nnames ? NULL : span_name_of(r, kid, i)};
    }
    qsort(g, n, sizeof *g, cmp_group);

    const char *type = r->sample_type && *r->sample_type ? r->sample_type : "value";
    const char *unit = r->sample_unit && *r->sample_unit ? r->sample_unit : "count";
    const pn_report_node *root = &r->nodes[PN_REPORT_ROOT];
    char buf[48];
    pn_report_format_value(buf, sizeof buf, root->total, unit);
    int bad = fprintf(out, "%s %s by %s: %zu value%s, total %s, %" PRId64 " samples%s\n",
                      type, pn_report_unit_word(unit), key, n, n == 1 ? "" : "s", buf,
                      root->total_n, r->selected ? " selected" : "") < 0;
    int w = (int)strlen(type);
    for (size_t i = 0; i < n; i++) {
        pn_report_format_value(buf, sizeof buf, g[i].value, unit);
        if ((int)strlen(buf) > w)
            w = (int)strlen(buf);
    }
    bad |= fprintf(out, "\n%*s  %7s  %9s  %s\n", w, type, "share", "samples", key) < 0;
    for (size_t i = 0; i < n && !bad; i++) {
        pn_report_format_value(buf, sizeof buf, g[i].value, unit);
        bad |= fprintf(out, "%*s  %6.2f%%  %9" PRId64 "  ", w, buf,
                       root->total > 0 ? 100.0 * g[i].value / root->total : 0.0,
                       g[i].count) < 0;
        bad |= pn_report_put_text(out, g[i].label) != 0;
        if (g[i].span) {
            bad |= putc(' ', out) == EOF;
            bad |= pn_report_put_text(out, g[i].span) != 0;
        }
        bad |= putc('\n', out) == EOF;
    }
    free(g);
    if (bad || fflush(out) != 0)
        return pn_fail(e, PN_EIO, "breakdown: writing the table failed");
    return 0;
}
