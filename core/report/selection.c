/* The selection: which samples the writers count, by their labels. Keys are
 * ANDed and the values given for one key ORed, as in the page's filter. */
#include <stdlib.h>
#include <string.h>

#include "pyroscope_report.h"
#include "report_tree.h"

uint32_t pn_report_lset_value(const pn_report *r, uint32_t lset, uint32_t key)
{
    for (uint32_t i = r->lset_off[lset]; i < r->lset_off[lset + 1]; i += 2)
        if (r->lab[i] == key)
            return r->lab[i + 1];
    return PN_REPORT_NONE;
}

/* Whether the set has key=value, by strings (filters may name labels the
 * report never saw: they match nothing). key=(none) matches a set without
 * the key, as the breakdown's "(none)" row counts it. */
static int lset_has(const pn_report *r, uint32_t lset, const pn_label *l)
{
    int seen = 0;
    for (uint32_t i = r->lset_off[lset]; i < r->lset_off[lset + 1]; i += 2) {
        if (strcmp(r->names[r->lab[i]], l->key) != 0)
            continue;
        if (strcmp(r->names[r->lab[i + 1]], l->value) == 0)
            return 1;
        seen = 1;
    }
    return !seen && strcmp(l->value, PN_REPORT_NO_VALUE) == 0;
}

int pn_report_lset_matches(const pn_report *r, uint32_t lset, const pn_label *filters,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* A key's first filter checks all of that key's values at once. */
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(filters[j].key, filters[i].key) != 0;
        if (!first)
            continue;
        int any = 0;
        for (size_t j = i; j < n && !any; j++)
            any = strcmp(filters[j].key, filters[i].key) == 0 &&
                  lset_has(r, lset, &filters[j]);
        if (!any)
            return 0;
    }
    return 1;
}

int pn_report_select(pn_report *r, const pn_label *filters, size_t n, pn_error *e)
{
    if (!r || (n && !filters))
        return pn_fail(e, PN_EINVAL, "pn_report_select: a report is required");
    for (size_t i = 0; i < n; i++) {
        if (!filters[i].key || !*filters[i].key || !filters[i].value)
            return pn_fail(e, PN_EINVAL, "report filter %zu: a label key and a value "
                           "are required", i + 1);
    }
    uint8_t *match = calloc(r->nlsets, 1);
    if (!match)
        return pn_fail(e, PN_ENOMEM, "report: cannot select among %u label sets",
                       r->nlsets);
    for (uint32_t i = 0; i < r->nlsets; i++)
        match[i] = (uint8_t)pn_report_lset_matches(r, i, filters, n);
    for (uint32_t i = 0; i < r->nnodes; i++) {
        pn_report_node *nd = &r->nodes[i];
        nd->total = nd->self = nd->total_n = nd->self_n = 0;
    }
    for (uint32_t i = 0; i < r->nrecs; i++) {
        const pn_report_rec *rc = &r->recs[i];
        if (!match[rc->lset])
            continue;
        r->nodes[rc->node].self += rc->value;
        r->nodes[rc->node].self_n += rc->count;
    }
    /* Parents precede their children, so one backward pass sums subtrees. */
    for (uint32_t i = r->nnodes; i-- > 0;) {
        pn_report_node *nd = &r->nodes[i];
        nd->total += nd->self;
        nd->total_n += nd->self_n;
        if (i != PN_REPORT_ROOT) {
            r->nodes[nd->parent].total += nd->total;
            r->nodes[nd->parent].total_n += nd->total_n;
        }
    }
    free(r->lset_sel);
    r->lset_sel = n > 0 ? match : NULL;
    if (n == 0)
        free(match);
    r->selected = n > 0;
    return 0;
}
