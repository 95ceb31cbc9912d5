/* See queue_helper.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue_helper.h"
#include "aggregation/profile.h"
#include "aggregation/store.h"

volatile int qh_payload_encodes;

static const pn_value_type CPU_TYPES[2] = {{"cpu", "nanoseconds"}, {"samples", "count"}};

pn_profile *qh_profile(const char *app, const char *type, int64_t from_s, int64_t until_s,
                       uint32_t nsamples)
{
    pn_error e;
    pn_error_clear(&e);
    pn_store_limits l;
    pn_store_limits_default(&l);
    l.nvalues = 2;
    pn_store *st = pn_store_new(&l, &e);
    if (!st) {
        fprintf(stderr, "  qh_profile: pn_store_new: %s\n", e.msg);
        return NULL;
    }
    pn_store_write_begin(st);
    pn_period *per = pn_store_active(st);
    pn_symbols *sym = pn_period_symbols(per);
    for (uint32_t i = 0; i < nsamples; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "qh_fn_%u", i);
        pn_frame_id f = pn_symbols_frame3(sym, name, (size_t)n, "qh.py", 5, 10 + i);
        const int64_t values[PN_MAX_VALUES] = {10000000LL * (i + 1), (int64_t)i + 1};
        pn_period_add(per, &f, 1, NULL, 1000 + i, PN_STR_EMPTY, values);
    }
    pn_store_write_end(st);
    pn_period *old = pn_store_swap(st, from_s * 1000000000LL);
    pn_profile_meta m = {
        .app_name = app,
        .profile_type = type,
        .sample_rate = 100,
        .nvalues = 2,
        .sample_types = CPU_TYPES,
        .period_type = {"cpu", "nanoseconds"},
        .period = 10000000,
    };
    pn_profile *p = pn_profile_from_period(old, &m, &e);
    pn_store_recycle(st, old);
    pn_store_free(st);
    if (!p) {
        fprintf(stderr, "  qh_profile: pn_profile_from_period: %s\n", e.msg);
        return NULL;
    }
    p->start_ns = from_s * 1000000000LL;
    p->end_ns = until_s * 1000000000LL;
    return p;
}

int qh_profile_add_label(pn_profile *p, const char *key, const char *value)
{
    pn_label *nl = realloc(p->extra_labels, (p->n_extra + 1) * sizeof *nl);
    if (!nl)
        return -1;
    p->extra_labels = nl;
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    nl[p->n_extra].key = k;
    nl[p->n_extra].value = v;
    p->n_extra++;
    return 0;
}

pn_profile *qh_payload_profile(const char *app, int64_t from_s, int64_t until_s,
                               const char *const *payloads)
{
    pn_profile *p = qh_profile(app, "cpu", from_s, until_s, 0);
    if (!p)
        return NULL;
    for (size_t i = 0; payloads && payloads[i]; i++) {
        if (qh_profile_add_label(p, "qh.payload", payloads[i]) != 0) {
            pn_profile_free(p);
            return NULL;
        }
    }
    return p;
}

pn_profile *qh_sized_profile(const char *app, int64_t from_s, size_t len)
{
    char *z = malloc(len + 1);
    if (!z)
        return NULL;
    memset(z, 'z', len);
    z[len] = '\0';
    const char *payloads[] = {z, NULL};
    pn_profile *p = qh_payload_profile(app, from_s, from_s + 10, payloads);
    free(z);
    return p;
}

pn_upload *qh_upload_of(const pn_profile *p, const void *data, size_t len, uint32_t part)
{
    pn_upload *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->app_name = strdup(p->app_name);
    u->profile_type = strdup(p->profile_type);
    u->data = malloc(len ? len : 1);
    if (!u->app_name || !u->profile_type || !u->data) {
        pn_upload_free(u);
        return NULL;
    }
    memcpy(u->data, data, len);
    u->len = len;
    /* As the default encoding does: rounded seconds, never empty. */
    u->from_s = (p->start_ns + 500000000) / 1000000000;
    u->until_s = (p->end_ns + 500000000) / 1000000000;
    if (u->until_s <= u->from_s)
        u->until_s = u->from_s + 1;
    u->sample_rate = p->sample_rate;
    u->part = part;
    return u;
}

void qh_free_parts(pn_upload **parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pn_upload_free(parts[i]);
    free(parts);
}

int qh_payload_encode(pn_exporter *self, const pn_profile *p, pn_upload ***parts,
                      size_t *nparts, pn_error *e)
{
    (void)self;
    __atomic_fetch_add(&qh_payload_encodes, 1, __ATOMIC_SEQ_CST);
    size_t n = 0;
    for (size_t i = 0; i < p->n_extra; i++) {
        if (strcmp(p->extra_labels[i].key, "qh.encode_fail") == 0)
            return pn_fail(e, PN_EINVAL, "%s", p->extra_labels[i].value);
        n += strcmp(p->extra_labels[i].key, "qh.payload") == 0;
    }
    pn_upload **out = calloc(n ? n : 1, sizeof *out);
    if (!out)
        return pn_fail(e, PN_ENOMEM, "qh_payload_encode: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < p->n_extra; i++) {
        if (strcmp(p->extra_labels[i].key, "qh.payload") != 0)
            continue;
        const char *v = p->extra_labels[i].value;
        if (!(out[k] = qh_upload_of(p, v, strlen(v), (uint32_t)k))) {
            qh_free_parts(out, k);
            return pn_fail(e, PN_ENOMEM, "qh_payload_encode: out of memory");
        }
        k++;
    }
    *parts = out;
    *nparts = n;
    return 0;
}

size_t qh_pprof_bytes(const pn_profile *p, size_t *nparts)
{
    pn_upload **parts = NULL;
    size_t n = 0, total = 0;
    pn_error e;
    pn_error_clear(&e);
    if (pn_pprof_uploads(p, &parts, &n, &e) < 0) {
        fprintf(stderr, "  qh_pprof_bytes: %s\n", e.msg);
        return (size_t)-1;
    }
    for (size_t i = 0; i < n; i++)
        total += parts[i]->len;
    qh_free_parts(parts, n);
    if (nparts)
        *nparts = n;
    return total;
}
