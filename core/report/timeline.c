/* The page's timeline: the records the page gets, one per (stack, label
 * set, time bucket), and the buckets, consecutive profiles grouped by start
 * time. There are as many buckets as profiles unless that would take the
 * records past a budget: then fewer, wider ones, so a folder of an hour's
 * profiles does not make the page hundreds of times larger. */
#include <stdlib.h>

#include "report_tree.h"

static int cmp_rec(const void *a, const void *b)
{
    const pn_page_rec *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    if (x->lset != y->lset)
        return x->lset < y->lset ? -1 : 1;
    return (x->bucket > y->bucket) - (x->bucket < y->bucket);
}

/* A profile by start time, then merge order. */
typedef struct {
    int64_t start;
    uint32_t prof;
} by_start;

static int cmp_start(const void *a, const void *b)
{
    const by_start *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->prof > y->prof) - (x->prof < y->prof);
}

int pn_report_timeline(const pn_report *r, const uint32_t *page_node, size_t max_recs,
                       pn_page_timeline *out, pn_error *e)
{
    *out = (pn_page_timeline){0};
    size_t np = r->profiles ? r->profiles : 1, n = r->nrecs;
    pn_page_rec *recs = malloc((n ? n : 1) * sizeof *recs);
    by_start *order = malloc(np * sizeof *order);
    uint32_t *bucket_of = malloc(np * sizeof *bucket_of);
    pn_page_bucket *b = calloc(np, sizeof *b);
    if (!recs || !order || !bucket_of || !b) {
        free(recs), free(order), free(bucket_of), free(b);
        return pn_fail(e, PN_ENOMEM, "flame graph: cannot lay out %zu records in time", n);
    }
    size_t pairs = 0;
    for (size_t i = 0; i < n; i++) {
        const pn_report_rec *rc = &r->recs[i];
        recs[i] = (pn_page_rec){page_node[rc->node], rc->lset, rc->prof, rc->value, rc->count};
    }
    qsort(recs, n, sizeof *recs, cmp_rec);
    for (size_t i = 0; i < n; i++)
        pairs += i == 0 || recs[i].node != recs[i - 1].node || recs[i].lset != recs[i - 1].lset;
    size_t nb = r->profiles ? r->profiles : 1;
    if (pairs > 0 && pairs * nb > max_recs)
        nb = max_recs / pairs > 1 ? max_recs / pairs : 1;

    for (uint32_t i = 0; i < np; i++)
        order[i] = (by_start){r->profiles ? r->prof_time[2 * i] : 0, i};
    qsort(order, np, sizeof *order, cmp_start);
    for (size_t k = 0; k < np; k++) {
        uint32_t p = order[k].prof;
        size_t bi = k * nb / np;
        int64_t start = r->profiles ? r->prof_time[2 * p] : 0;
        int64_t end = r->profiles ? start + r->prof_time[2 * p + 1] : 0;
        bucket_of[p] = (uint32_t)bi;
        if (b[bi].profiles == 0 || start < b[bi].start)
            b[bi].start = start;
        if (b[bi].profiles == 0 || end > b[bi].end)
            b[bi].end = end;
        b[bi].profiles += r->profiles ? 1 : 0;
    }
    /* Into buckets, then equal keys merged (folded nodes share their
     * ancestor's, so they merge too). */
    for (size_t i = 0; i < n; i++)
        recs[i].bucket = bucket_of[recs[i].bucket];
    qsort(recs, n, sizeof *recs, cmp_rec);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && cmp_rec(&recs[m - 1], &recs[i]) == 0) {
            recs[m - 1].value += recs[i].value;
            recs[m - 1].count += recs[i].count;
        } else {
            recs[m++] = recs[i];
        }
    }
    free(order);
    free(bucket_of);
    *out = (pn_page_timeline){recs, m, b, nb};
    return 0;
}

void pn_report_timeline_free(pn_page_timeline *t)
{
    free(t->recs);
    free(t->buckets);
    *t = (pn_page_timeline){0};
}
