/* A sealed period copied into the neutral form the queue carries
 * (profile.h). Flusher thread; exporters read the copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregation/profile.h"
#include "aggregation/store.h"

void pn_profile_free(pn_profile *p)
{
    if (!p)
        return;
    free(p->app_name);
    free(p->profile_type);
    for (int i = 0; i < p->nvalues; i++) {
        free((char *)p->sample_types[i].type);
        free((char *)p->sample_types[i].unit);
    }
    free((char *)p->period_type.type);
    free((char *)p->period_type.unit);
    for (size_t i = 0; i < p->n_extra; i++) {
        free((char *)p->extra_labels[i].key);
        free((char *)p->extra_labels[i].value);
    }
    free(p->extra_labels);
    free(p->text);
    free(p->str_off);
    free(p->frames);
    free(p->stack_frames);
    free(p->stacks);
    free(p->pairs);
    free(p->lsets);
    free(p->samples);
    free(p);
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static int copy_meta(pn_profile *p, const pn_profile_meta *m)
{
    p->app_name = dup_or_empty(m->app_name);
    p->profile_type = dup_or_empty(m->profile_type);
    p->sample_rate = m->sample_rate;
    p->nvalues = m->nvalues;
    p->period = m->period;
    int bad = !p->app_name || !p->profile_type;
    for (int i = 0; i < m->nvalues; i++) {
        p->sample_types[i].type = dup_or_empty(m->sample_types[i].type);
        p->sample_types[i].unit = dup_or_empty(m->sample_types[i].unit);
        bad |= !p->sample_types[i].type || !p->sample_types[i].unit;
    }
    p->period_type.type = dup_or_empty(m->period_type.type);
    p->period_type.unit = dup_or_empty(m->period_type.unit);
    bad |= !p->period_type.type || !p->period_type.unit;
    if (m->n_extra) {
        if (!(p->extra_labels = calloc(m->n_extra, sizeof *p->extra_labels)))
            return -1;
        p->n_extra = m->n_extra;
        for (size_t i = 0; i < m->n_extra; i++) {
            p->extra_labels[i].key = dup_or_empty(m->extra_labels[i].key);
            p->extra_labels[i].value = dup_or_empty(m->extra_labels[i].value);
            bad |= !p->extra_labels[i].key || !p->extra_labels[i].value;
        }
    }
    return bad ? -1 : 0;
}

static int copy_symbols(pn_profile *p, const pn_symbols *sym)
{
    uint32_t ns = pn_symbols_string_count(sym), nf = pn_symbols_frame_count(sym);
    size_t bytes = 0;
    for (uint32_t i = 0; i < ns; i++) {
        size_t len;
        pn_symbols_str(sym, i, &len);
        bytes += len + 1;
    }
    p->text = malloc(bytes ? bytes : 1);
    p->str_off = malloc(((size_t)ns + 1) * sizeof *p->str_off);
    p->frames = malloc(((size_t)nf * 3 + 1) * sizeof *p->frames);
    if (!p->text || !p->str_off || !p->frames)
        return -1;
    size_t at = 0;
    for (uint32_t i = 0; i < ns; i++) {
        size_t len;
        const char *s = pn_symbols_str(sym, i, &len);
        p->str_off[i] = (uint32_t)at;
        memcpy(p->text + at, s, len);
        p->text[at + len] = '\0';
        at += len + 1;
    }
    p->str_off[ns] = (uint32_t)at;
    p->nstr = ns;
    for (uint32_t f = 0; f < nf; f++) {
        uint32_t *out = p->frames + 3 * f;
        if (pn_symbols_frame_get(sym, f, &out[0], &out[1], &out[2]) < 0)
            out[0] = out[1] = out[2] = 0;
    }
    p->nframes = nf;
    return 0;
}

static int copy_tables(pn_profile *p, const pn_period *per)
{
    uint32_t nst = pn_period_stack_count(per), nls = pn_period_label_set_count(per);
    size_t nfr = 0, npr = 0;
    for (uint32_t i = 0; i < nst; i++) {
        uint32_t d;
        pn_period_stack(per, i, &d);
        nfr += d;
    }
    for (uint32_t i = 0; i < nls; i++) {
        uint32_t n;
        pn_period_label_set(per, i, &n);
        npr += 2 * (size_t)n;
    }
    size_t nsm = pn_period_sample_count(per);
    p->stacks = malloc((nst + 1) * sizeof *p->stacks);
    p->stack_frames = malloc((nfr + 1) * sizeof *p->stack_frames);
    p->lsets = malloc((nls + 1) * sizeof *p->lsets);
    p->pairs = malloc((npr + 1) * sizeof *p->pairs);
    p->samples = malloc((nsm + 1) * sizeof *p->samples);
    if (!p->stacks || !p->stack_frames || !p->lsets || !p->pairs || !p->samples)
        return -1;
    uint32_t at = 0;
    for (uint32_t i = 0; i < nst; i++) {
        uint32_t d;
        const pn_frame_id *f = pn_period_stack(per, i, &d);
        memcpy(p->stack_frames + at, f, d * sizeof *f);
        p->stacks[i] = (pn_profile_span){at, d};
        at += d;
    }
    p->nstacks = nst;
    at = 0;
    for (uint32_t i = 0; i < nls; i++) {
        uint32_t n;
        const uint32_t *kv = pn_period_label_set(per, i, &n);
        memcpy(p->pairs + at, kv, 2 * n * sizeof *kv);
        p->lsets[i] = (pn_profile_span){at, n};
        at += 2 * n;
    }
    p->nlsets = nls;
    for (size_t i = 0; i < nsm; i++) {
        pn_sample_view v;
        pn_period_sample(per, i, &v);
        pn_profile_sample *o = &p->samples[i];
        memset(o, 0, sizeof *o);
        o->stack = v.stack;
        o->labels = v.label_set;
        o->tid = v.tid;
        o->thread_name = v.thread_name;
        memcpy(o->values, v.values, (size_t)pn_period_nvalues(per) * sizeof *o->values);
    }
    p->nsamples = (uint32_t)nsm;
    return 0;
}

/* Pooled samples were recorded with wall values: scale them so the
 * period's total is the CPU their threads used (sampler.c says why). The
 * rounding may move a total by a nanosecond per sample. */
static void scale_pooled(pn_profile *p, const pn_period *per)
{
    pn_period_stats st;
    pn_period_get_stats(per, &st);
    if (st.pooled_value_ns <= 0)
        return;
    double f = (double)st.pooled_cpu_ns / (double)st.pooled_value_ns;
    for (uint32_t i = 0; i < p->nsamples; i++)
        p->samples[i].values[0] = llround((double)p->samples[i].values[0] * f);
}

pn_profile *pn_profile_from_period(const pn_period *per, const pn_profile_meta *m, pn_error *e)
{
    if (m->nvalues != pn_period_nvalues(per) || (m->n_extra && !m->extra_labels))
        return pn_fail(e, PN_EINVAL, "profile: %d sample types for a period of %d values",
                       m->nvalues, pn_period_nvalues(per)), NULL;
    pn_profile *p = calloc(1, sizeof *p);
    if (!p || copy_meta(p, m) != 0 || copy_symbols(p, pn_period_symbols_const(per)) != 0 ||
        copy_tables(p, per) != 0) {
        pn_profile_free(p);
        return pn_fail(e, PN_ENOMEM, "out of memory copying a period for export"), NULL;
    }
    scale_pooled(p, per);
    p->start_ns = pn_period_start_ns(per);
    p->end_ns = pn_period_end_ns(per);
    return p;
}
