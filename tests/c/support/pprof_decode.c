/* Reading profiles back in tests; see pprof_decode.h. */
#include "pprof_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_native.h"
#include "encoding/pprof.h"

#define MAX_RAW ((size_t)256 << 20)

pn_pb_profile *pn_pprof_decode(const uint8_t *data, size_t len, size_t *raw_len)
{
    uint8_t *raw = NULL;
    size_t n = 0;
    pn_error e;
    pn_error_clear(&e);
    if (pn_gunzip(data, len, MAX_RAW, &raw, &n, &e) < 0) {
        fprintf(stderr, "  pprof_decode: %s\n", e.msg);
        return NULL;
    }
    pn_pb_profile *p = perftools__profiles__profile__unpack(NULL, n, raw);
    free(raw);
    if (!p)
        fprintf(stderr, "  pprof_decode: %zu bytes are not a valid Profile message\n", n);
    else if (raw_len)
        *raw_len = n;
    return p;
}

void pn_pprof_free(pn_pb_profile *p)
{
    if (p)
        perftools__profiles__profile__free_unpacked(p, NULL);
}

const char *pn_pprof_str(const pn_pb_profile *p, int64_t idx)
{
    if (idx < 0 || (uint64_t)idx >= p->n_string_table)
        return NULL;
    return p->string_table[idx];
}

const pn_pb_location *pn_pprof_location(const pn_pb_profile *p, uint64_t id)
{
    /* The encoder numbers ids by position; fall back to a scan otherwise. */
    if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
        return p->location[id - 1];
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    return NULL;
}

const pn_pb_function *pn_pprof_function(const pn_pb_profile *p, uint64_t id)
{
    if (id >= 1 && id <= p->n_function && p->function[id - 1]->id == id)
        return p->function[id - 1];
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == id)
            return p->function[i];
    return NULL;
}

const char *pn_pprof_label(const pn_pb_profile *p, const pn_pb_sample *s, const char *key)
{
    for (size_t i = 0; i < s->n_label; i++) {
        const char *k = pn_pprof_str(p, s->label[i]->key);
        if (k && strcmp(k, key) == 0)
            return pn_pprof_str(p, s->label[i]->str);
    }
    return NULL;
}

const char *pn_pprof_frame_name(const pn_pb_profile *p, const pn_pb_sample *s, size_t d)
{
    if (d >= s->n_location_id)
        return NULL;
    const pn_pb_location *l = pn_pprof_location(p, s->location_id[d]);
    if (!l || l->n_line < 1)
        return NULL;
    const pn_pb_function *f = pn_pprof_function(p, l->line[0]->function_id);
    return f ? pn_pprof_str(p, f->name) : NULL;
}

char *pn_pprof_stack(const pn_pb_profile *p, const pn_pb_sample *s, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t d = 0; d < s->n_location_id && used < cap; d++) {
        const char *name = pn_pprof_frame_name(p, s, d);
        int n = snprintf(buf + used, cap - used, "%s%s", d ? ";" : "", name ? name : "?");
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

#define VIOLATION(...)                                                        \
    do {                                                                      \
        fprintf(stderr, "  pprof_check: " __VA_ARGS__);                      \
        fputc('\n', stderr);                                                  \
        bad++;                                                                \
    } while (0)

/* Mark string idx used; counts a violation when it does not exist. */
#define USE_STR(idx, what)                                                    \
    do {                                                                      \
        int64_t i_ = (idx);                                                   \
        if (i_ < 0 || (uint64_t)i_ >= p->n_string_table)                     \
            VIOLATION("%s refers to string %lld of %zu", what, (long long)i_, \
                      p->n_string_table);                                     \
        else                                                                  \
            str_used[i_] = 1;                                                 \
    } while (0)

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int pn_pprof_check(const pn_pb_profile *p, int minimal)
{
    int bad = 0;
    size_t ns = p->n_string_table, nl = p->n_location, nf = p->n_function;
    char *str_used = calloc(ns + 1, 1);
    char *loc_used = calloc(nl + 1, 1);
    char *fn_used = calloc(nf + 1, 1);
    char **sorted = malloc((ns + 1) * sizeof *sorted);
    if (!str_used || !loc_used || !fn_used || !sorted) {
        VIOLATION("out of memory");
        goto out;
    }
    if (ns == 0 || strcmp(p->string_table[0], "") != 0)
        VIOLATION("string_table[0] is not \"\"");
    else
        str_used[0] = 1;
    memcpy(sorted, p->string_table, ns * sizeof *sorted);
    qsort(sorted, ns, sizeof *sorted, cmp_str);
    for (size_t i = 1; i < ns; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            VIOLATION("string \"%s\" appears twice", sorted[i]);

    for (size_t i = 0; i < p->n_sample_type; i++) {
        USE_STR(p->sample_type[i]->type, "sample_type.type");
        USE_STR(p->sample_type[i]->unit, "sample_type.unit");
    }
    if (p->period_type) {
        USE_STR(p->period_type->type, "period_type.type");
        USE_STR(p->period_type->unit, "period_type.unit");
    }
    for (size_t i = 0; i < nf; i++) {
        const pn_pb_function *f = p->function[i];
        if (f->id == 0 || pn_pprof_function(p, f->id) != f)
            VIOLATION("function %zu has id %llu (zero or not unique)", i,
                      (unsigned long long)f->id);
        USE_STR(f->name, "function.name");
        USE_STR(f->system_name, "function.system_name");
        USE_STR(f->filename, "function.filename");
    }
    for (size_t i = 0; i < nl; i++) {
        const pn_pb_location *l = p->location[i];
        if (l->id == 0 || pn_pprof_location(p, l->id) != l)
            VIOLATION("location %zu has id %llu (zero or not unique)", i,
                      (unsigned long long)l->id);
        if (l->n_line == 0)
            VIOLATION("location %llu has no line", (unsigned long long)l->id);
        for (size_t j = 0; j < l->n_line; j++) {
            const pn_pb_function *f = pn_pprof_function(p, l->line[j]->function_id);
            if (!f)
                VIOLATION("location %llu refers to missing function %llu",
                          (unsigned long long)l->id,
                          (unsigned long long)l->line[j]->function_id);
            else if (f->id <= nf)
                fn_used[f->id] = 1;
        }
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        const pn_pb_sample *s = p->sample[i];
        if (s->n_value != p->n_sample_type)
            VIOLATION("sample %zu has %zu values for %zu sample types", i, s->n_value,
                      p->n_sample_type);
        for (size_t j = 0; j < s->n_location_id; j++) {
            const pn_pb_location *l = pn_pprof_location(p, s->location_id[j]);
            if (!l)
                VIOLATION("sample %zu refers to missing location %llu", i,
                          (unsigned long long)s->location_id[j]);
            else if (l->id <= nl)
                loc_used[l->id] = 1;
        }
        for (size_t j = 0; j < s->n_label; j++) {
            USE_STR(s->label[j]->key, "label.key");
            USE_STR(s->label[j]->str, "label.str");
        }
    }
    if (minimal) {
        for (size_t i = 0; i < ns; i++)
            if (!str_used[i])
                VIOLATION("string %zu (\"%s\") is not used", i, p->string_table[i]);
        for (size_t i = 0; i < nl; i++)
            if (p->location[i]->id <= nl && !loc_used[p->location[i]->id])
                VIOLATION("location %llu is not used", (unsigned long long)p->location[i]->id);
        for (size_t i = 0; i < nf; i++)
            if (p->function[i]->id <= nf && !fn_used[p->function[i]->id])
                VIOLATION("function %llu is not used", (unsigned long long)p->function[i]->id);
    }
out:
    free(str_used);
    free(loc_used);
    free(fn_used);
    free(sorted);
    return bad;
}
