/* OTLP profiles: the encoder checked field by field through protobuf-c's
 * decoder of the same .proto, the OTEL_* settings, and the exporter end to
 * end through the agent to loopback receivers (beside a Pyroscope one). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "pyroscope_native.h"
#include "aggregation/profile.h"
#include "aggregation/store.h"
#include "encoding/otlp.h"
#include "encoding/pprof.h"
#include "export/exporter.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define SPAN "00f067aa0ba902b7"

static Request *unpack(const uint8_t *b, size_t n)
{
    return opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
        NULL, n, b);
}

static void unpack_free(Request *r)
{
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
        r, NULL);
}

static int in_range(int32_t i, size_t n) { return i >= 0 && (size_t)i < n; }

/* Every rule of the dictionary: zero values first, every index in range,
 * ids of the right length, one value per sample, keys unique per sample.
 * Returns the failures it found (also counted by CHECK). */
static int check_dictionary(const Request *r)
{
    int before = pn_check_failures;
    const Dict *d = r->dictionary;
    CHECK(d != NULL);
    if (!d)
        return 1;
    CHECK(d->n_string_table >= 1 && strcmp(d->string_table[0], "") == 0);
    CHECK(d->n_mapping_table == 1 && d->mapping_table[0]->filename_strindex == 0 &&
          d->mapping_table[0]->memory_start == 0);
    CHECK(d->n_location_table >= 1 && d->location_table[0]->n_lines == 0 &&
          d->location_table[0]->mapping_index == 0);
    CHECK(d->n_function_table >= 1 && d->function_table[0]->name_strindex == 0 &&
          d->function_table[0]->filename_strindex == 0);
    CHECK(d->n_link_table >= 1 && d->link_table[0]->trace_id.len == 0 &&
          d->link_table[0]->span_id.len == 0);
    CHECK(d->n_attribute_table >= 1 && d->attribute_table[0]->key_strindex == 0 &&
          d->attribute_table[0]->value == NULL);
    CHECK(d->n_stack_table >= 1 && d->stack_table[0]->n_location_indices == 0);
    for (size_t i = 1; i < d->n_location_table; i++) {
        const Opentelemetry__Proto__Profiles__V1development__Location *l = d->location_table[i];
        CHECK(l->n_lines == 1 && in_range(l->lines[0]->function_index, d->n_function_table));
        CHECK(in_range(l->mapping_index, d->n_mapping_table));
    }
    for (size_t i = 0; i < d->n_function_table; i++) {
        CHECK(in_range(d->function_table[i]->name_strindex, d->n_string_table));
        CHECK(in_range(d->function_table[i]->filename_strindex, d->n_string_table));
    }
    for (size_t i = 1; i < d->n_link_table; i++)
        CHECK(d->link_table[i]->trace_id.len == 16 && d->link_table[i]->span_id.len == 8);
    for (size_t i = 1; i < d->n_attribute_table; i++) {
        CHECK(in_range(d->attribute_table[i]->key_strindex, d->n_string_table));
        CHECK(d->attribute_table[i]->value != NULL &&
              d->attribute_table[i]->value->value_case ==
                  OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
    }
    for (size_t i = 0; i < d->n_stack_table; i++)
        for (size_t j = 0; j < d->stack_table[i]->n_location_indices; j++)
            CHECK(in_range(d->stack_table[i]->location_indices[j], d->n_location_table) &&
                  d->stack_table[i]->location_indices[j] > 0);
    CHECK(r->n_resource_profiles == 1 && r->resource_profiles[0]->n_scope_profiles == 1);
    if (r->n_resource_profiles != 1 || r->resource_profiles[0]->n_scope_profiles != 1)
        return pn_check_failures - before;
    const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
        r->resource_profiles[0]->scope_profiles[0];
    for (size_t k = 0; k < sp->n_profiles; k++) {
        const Profile *p = sp->profiles[k];
        CHECK(p->sample_type && in_range(p->sample_type->type_strindex, d->n_string_table));
        CHECK(p->profile_id.len == 16);
        for (size_t s = 0; s < p->n_samples; s++) {
            const Sample *sm = p->samples[s];
            CHECK(in_range(sm->stack_index, d->n_stack_table) && sm->stack_index > 0);
            CHECK(in_range(sm->link_index, d->n_link_table));
            CHECK(sm->n_values == 1 && sm->values[0] != 0);
            for (size_t a = 0; a < sm->n_attribute_indices; a++) {
                CHECK(in_range(sm->attribute_indices[a], d->n_attribute_table) &&
                      sm->attribute_indices[a] > 0);
                for (size_t b = 0; b < a && in_range(sm->attribute_indices[a], d->n_attribute_table); b++)
                    CHECK(d->attribute_table[sm->attribute_indices[a]]->key_strindex !=
                          d->attribute_table[sm->attribute_indices[b]]->key_strindex);
            }
        }
    }
    return pn_check_failures - before;
}

static const Profile *profile_of(const Request *r, const char *type)
{
    const Dict *d = r->dictionary;
    const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
        r->resource_profiles[0]->scope_profiles[0];
    for (size_t k = 0; k < sp->n_profiles; k++)
        if (strcmp(d->string_table[sp->profiles[k]->sample_type->type_strindex], type) == 0)
            return sp->profiles[k];
    return NULL;
}

/* The value of attribute `key` on sample s, NULL when absent. */
static const char *attr(const Request *r, const Sample *s, const char *key)
{
    const Dict *d = r->dictionary;
    for (size_t a = 0; a < s->n_attribute_indices; a++) {
        const Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit *kv =
            d->attribute_table[s->attribute_indices[a]];
        if (strcmp(d->string_table[kv->key_strindex], key) == 0)
            return kv->value->string_value;
    }
    return NULL;
}

/* Leaf function name of sample s. */
static const char *leaf(const Request *r, const Sample *s)
{
    const Dict *d = r->dictionary;
    const Opentelemetry__Proto__Profiles__V1development__Stack *st = d->stack_table[s->stack_index];
    if (!st->n_location_indices)
        return "";
    const Opentelemetry__Proto__Profiles__V1development__Location *l =
        d->location_table[st->location_indices[0]];
    return d->string_table[d->function_table[l->lines[0]->function_index]->name_strindex];
}

static void hex(const ProtobufCBinaryData *b, char *out)
{
    for (size_t i = 0; i < b->len; i++)
        sprintf(out + 2 * i, "%02x", b->data[i]);
    out[2 * b->len] = '\0';
}

static const char *resource_attr(const Request *r, const char *key, int64_t *ival)
{
    const Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_profiles[0]->resource;
    for (size_t i = 0; res && i < res->n_attributes; i++)
        if (strcmp(res->attributes[i]->key, key) == 0) {
            if (ival)
                *ival = res->attributes[i]->value->int_value;
            return res->attributes[i]->value->value_case ==
                           OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
                       ? res->attributes[i]->value->string_value
                       : "";
        }
    return NULL;
}

/* ------------------------------------------------------ a made profile */

/* Strings of the hand-made profile, by id. */
enum {
    S_EMPTY, S_LEAF_A, S_LEAF_B, S_ROOT, S_FILE, S_SPAN_ID, S_TRACE_ID, S_SPAN, S_TRACE,
    S_ENDPOINT, S_A, S_B, S_BAD, S_ZERO_SPAN, S_WORKER, S_REGION, S_US, NSTR
};
static const char *const strs[NSTR] = {
    "", "leaf_a", "leaf_b", "root", "app.py", "span_id", "trace_id", SPAN, TRACE,
    "endpoint", "/a", "/b", "bad", "0000000000000000", "worker", "region", "us",
};

typedef struct {
    pn_profile p;
    char text[512];
    uint32_t off[NSTR + 1];
    uint32_t frames[9];
    pn_frame_id stack_frames[4];
    pn_profile_span stacks[2];
    uint32_t pairs[32];
    pn_profile_span lsets[5];
    pn_profile_sample samples[6];
    pn_label extra[2];
} made;

static void make_profile(made *m)
{
    memset(m, 0, sizeof *m);
    uint32_t o = 0;
    for (int i = 0; i < NSTR; i++) {
        m->off[i] = o;
        strcpy(m->text + o, strs[i]);
        o += (uint32_t)strlen(strs[i]) + 1;
    }
    m->off[NSTR] = o;
    uint32_t fr[9] = {S_LEAF_A, S_FILE, 10, S_LEAF_B, S_FILE, 20, S_ROOT, S_FILE, 1};
    memcpy(m->frames, fr, sizeof fr);
    /* stack 0: leaf_a <- root; stack 1: leaf_b <- root */
    pn_frame_id sf[4] = {0, 2, 1, 2};
    memcpy(m->stack_frames, sf, sizeof sf);
    m->stacks[0] = (pn_profile_span){0, 2};
    m->stacks[1] = (pn_profile_span){2, 2};
    uint32_t pairs[] = {
        /* 1: a span */ S_ENDPOINT, S_A, S_SPAN_ID, S_SPAN, S_TRACE_ID, S_TRACE,
        /* 2: a malformed span id */ S_ENDPOINT, S_B, S_SPAN_ID, S_BAD,
        /* 3: an all-zero span id */ S_SPAN_ID, S_ZERO_SPAN, S_TRACE_ID, S_TRACE,
        /* 4: overrides the extra label region */ S_REGION, S_US,
    };
    memcpy(m->pairs, pairs, sizeof pairs);
    m->lsets[0] = (pn_profile_span){0, 0};
    m->lsets[1] = (pn_profile_span){0, 3};
    m->lsets[2] = (pn_profile_span){6, 2};
    m->lsets[3] = (pn_profile_span){10, 2};
    m->lsets[4] = (pn_profile_span){14, 1};
    pn_profile_sample s[6] = {
        {.stack = 0, .labels = 0, .tid = 7, .thread_name = S_WORKER, .values = {10, 1}},
        {.stack = 1, .labels = 1, .values = {20, 2}},
        {.stack = 0, .labels = 1, .values = {0, 3}}, /* no CPU: only in samples/count */
        {.stack = 1, .labels = 2, .values = {5, 1}},
        {.stack = 0, .labels = 3, .values = {7, 1}},
        {.stack = 1, .labels = 4, .values = {1, 1}},
    };
    memcpy(m->samples, s, sizeof s);
    m->extra[0] = (pn_label){"pid", "42"};
    m->extra[1] = (pn_label){"region", "eu"};
    pn_profile *p = &m->p;
    p->app_name = "otlp.test";
    p->profile_type = "cpu";
    p->start_ns = 1700000000LL * 1000000000LL;
    p->end_ns = p->start_ns + 10LL * 1000000000LL;
    p->sample_rate = 100;
    p->nvalues = 2;
    p->sample_types[0] = (pn_value_type){"cpu", "nanoseconds"};
    p->sample_types[1] = (pn_value_type){"samples", "count"};
    p->period_type = (pn_value_type){"cpu", "nanoseconds"};
    p->period = 10000000;
    p->extra_labels = m->extra;
    p->n_extra = 2;
    p->text = m->text;
    p->str_off = m->off;
    p->nstr = NSTR;
    p->frames = m->frames;
    p->nframes = 3;
    p->stack_frames = m->stack_frames;
    p->stacks = m->stacks;
    p->nstacks = 2;
    p->pairs = m->pairs;
    p->lsets = m->lsets;
    p->nlsets = 5;
    p->samples = m->samples;
    p->nsamples = 6;
}

static const pn_label resource[] = {
    {"service.name", "otlp.test"}, {"deployment.environment", "prod"},
    {"service.name", "ignored: the first value of a key wins"},
};

static Request *encode_made(made *m)
{
    pn_otlp_opts o = {.resource = resource, .nresource = 3, .pid = 4242,
                      .scope_name = "pyroscope-native", .scope_version = "0.1.0"};
    uint8_t *buf = NULL;
    size_t len = 0;
    pn_error e;
    int rc = pn_otlp_encode(&m->p, &o, &buf, &len, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "  %s\n", e.msg);
        return NULL;
    }
    Request *r = unpack(buf, len);
    CHECK(r != NULL);
    free(buf);
    return r;
}

static void test_encode_fields(void)
{
    made m;
    make_profile(&m);
    /* A wall period: every column is a Profile (an on-CPU one is one
     * Profile, test_encode_cpu_as_count). */
    m.p.sample_types[0] = (pn_value_type){"wall", "nanoseconds"};
    m.p.period_type = (pn_value_type){"wall", "nanoseconds"};
    Request *r = encode_made(&m);
    if (!r)
        return;
    CHECK_EQ_INT(check_dictionary(r), 0);
    const Dict *d = r->dictionary;

    /* One profile per sample type, the period's metadata on each. */
    const Profile *cpu = profile_of(r, "wall"), *cnt = profile_of(r, "samples");
    CHECK(cpu && cnt);
    if (!cpu || !cnt) {
        unpack_free(r);
        return;
    }
    CHECK_STR(d->string_table[cpu->sample_type->unit_strindex], "nanoseconds");
    CHECK_STR(d->string_table[cnt->sample_type->unit_strindex], "count");
    CHECK_STR(d->string_table[cpu->period_type->type_strindex], "wall");
    CHECK_EQ_INT(cpu->period, 10000000);
    CHECK_EQ_INT(cpu->time_unix_nano, m.p.start_ns);
    CHECK_EQ_INT(cpu->duration_nano, 10LL * 1000000000LL);
    CHECK(memcmp(cpu->profile_id.data, cnt->profile_id.data, 16) != 0);

    /* Values sum to the period's; zero values are left out. */
    int64_t sum_cpu = 0, sum_cnt = 0;
    for (size_t s = 0; s < cpu->n_samples; s++)
        sum_cpu += cpu->samples[s]->values[0];
    for (size_t s = 0; s < cnt->n_samples; s++)
        sum_cnt += cnt->samples[s]->values[0];
    CHECK_EQ_INT(sum_cpu, 10 + 20 + 5 + 7 + 1);
    CHECK_EQ_INT(sum_cnt, 1 + 2 + 3 + 1 + 1 + 1);
    CHECK_EQ_INT(cpu->n_samples, 5);
    CHECK_EQ_INT(cnt->n_samples, 6);

    /* Sample by sample (the order of the period is kept). */
    int linked = 0;
    for (size_t s = 0; s < cnt->n_samples; s++) {
        const Sample *sm = cnt->samples[s];
        const char *ep = attr(r, sm, "endpoint");
        CHECK_STR(attr(r, sm, "pid"), "42");
        if (sm->values[0] == 1 && attr(r, sm, "thread_id")) {
            /* sample 0: thread id and name, no link */
            CHECK_STR(attr(r, sm, "thread_id"), "7");
            CHECK_STR(attr(r, sm, "thread_name"), "worker");
            CHECK_STR(leaf(r, sm), "leaf_a");
            CHECK_EQ_INT(sm->link_index, 0);
            CHECK_STR(attr(r, sm, "region"), "eu");
        } else if (ep && strcmp(ep, "/a") == 0) {
            /* a span: the link, and no span_id / trace_id attributes */
            CHECK(sm->link_index > 0);
            if (sm->link_index > 0) {
                char t[40], sp[20];
                hex(&d->link_table[sm->link_index]->trace_id, t);
                hex(&d->link_table[sm->link_index]->span_id, sp);
                CHECK_STR(t, TRACE);
                CHECK_STR(sp, SPAN);
            }
            CHECK(attr(r, sm, "span_id") == NULL);
            CHECK(attr(r, sm, "trace_id") == NULL);
            linked++;
        } else if (ep && strcmp(ep, "/b") == 0) {
            /* malformed: kept as an attribute, no link */
            CHECK_EQ_INT(sm->link_index, 0);
            CHECK_STR(attr(r, sm, "span_id"), "bad");
            CHECK_STR(leaf(r, sm), "leaf_b");
        } else if (attr(r, sm, "region") && strcmp(attr(r, sm, "region"), "us") == 0) {
            /* the sample's own label wins over the extra one */
            CHECK_EQ_INT(sm->link_index, 0);
        } else {
            /* all-zero span id: not a link */
            CHECK_EQ_INT(sm->link_index, 0);
            CHECK_STR(attr(r, sm, "span_id"), "0000000000000000");
            CHECK_STR(attr(r, sm, "trace_id"), TRACE);
        }
    }
    CHECK_EQ_INT(linked, 2);
    CHECK_EQ_INT(d->n_link_table, 2);   /* the zero link and one span, shared */
    CHECK_EQ_INT(d->n_function_table, 4);
    CHECK_EQ_INT(d->n_stack_table, 3);

    /* Stacks are leaf first, lines kept. */
    const Opentelemetry__Proto__Profiles__V1development__Stack *st = d->stack_table[2];
    CHECK_EQ_INT(st->n_location_indices, 2);
    if (st->n_location_indices == 2) {
        const Opentelemetry__Proto__Profiles__V1development__Line *l0 =
            d->location_table[st->location_indices[0]]->lines[0];
        const Opentelemetry__Proto__Profiles__V1development__Line *l1 =
            d->location_table[st->location_indices[1]]->lines[0];
        CHECK_STR(d->string_table[d->function_table[l0->function_index]->name_strindex], "leaf_b");
        CHECK_STR(d->string_table[d->function_table[l0->function_index]->filename_strindex],
                  "app.py");
        CHECK_EQ_INT(l0->line, 20);
        CHECK_STR(d->string_table[d->function_table[l1->function_index]->name_strindex], "root");
    }

    /* Resource and scope. */
    int64_t pid = 0;
    CHECK_STR(resource_attr(r, "service.name", NULL), "otlp.test");
    CHECK_STR(resource_attr(r, "deployment.environment", NULL), "prod");
    CHECK(resource_attr(r, "process.pid", &pid) != NULL);
    CHECK_EQ_INT(pid, 4242);
    CHECK_EQ_INT(r->resource_profiles[0]->resource->n_attributes, 3);
    CHECK_STR(r->resource_profiles[0]->scope_profiles[0]->scope->name, "pyroscope-native");
    unpack_free(r);
}

/* An on-CPU period is one Profile that Pyroscope shows as process_cpu
 * (samples/count x period, period type cpu/nanoseconds): the measured CPU
 * with period 1, not the tick count x the tick period. Static tags are
 * attributes of every sample, under its own labels and the extra ones. */
static void test_encode_cpu_as_count(void)
{
    made m;
    make_profile(&m);
    static const pn_label tags[] = {{"env", "staging"}, {"region", "tag-loses"}, {"pid", "no"}};
    pn_otlp_opts o = {.resource = resource, .nresource = 3, .tags = tags, .ntags = 3,
                      .file_in_name = 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    pn_error e;
    CHECK_EQ_INT(pn_otlp_encode(&m.p, &o, &buf, &len, &e), 0);
    Request *r = buf ? unpack(buf, len) : NULL;
    free(buf);
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK_EQ_INT(check_dictionary(r), 0);
    const Dict *d = r->dictionary;
    const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
        r->resource_profiles[0]->scope_profiles[0];
    CHECK_EQ_INT(sp->n_profiles, 1);
    const Profile *pr = sp->profiles[0];
    CHECK_STR(d->string_table[pr->sample_type->type_strindex], "samples");
    CHECK_STR(d->string_table[pr->sample_type->unit_strindex], "count");
    CHECK_STR(d->string_table[pr->period_type->type_strindex], "cpu");
    CHECK_STR(d->string_table[pr->period_type->unit_strindex], "nanoseconds");
    CHECK_EQ_INT(pr->period, 1);
    int64_t sum = 0;
    for (size_t s = 0; s < pr->n_samples; s++) {
        const Sample *sm = pr->samples[s];
        sum += sm->values[0];
        CHECK_STR(attr(r, sm, "env"), "staging");
        CHECK_STR(attr(r, sm, "pid"), "42");             /* the profile's extra label */
        const char *region = attr(r, sm, "region");     /* extra, or the sample's own */
        CHECK(region && (strcmp(region, "eu") == 0 || strcmp(region, "us") == 0));
    }
    CHECK_EQ_INT(sum, 10 + 20 + 5 + 7 + 1);  /* the cpu column: samples with no CPU left out */
    /* file_in_name (spy rbspy): "<file> <name>", as Pyroscope names Ruby's pprof frames. */
    int named = 0;
    for (size_t i = 1; i < d->n_function_table; i++)
        named += strcmp(d->string_table[d->function_table[i]->name_strindex], "app.py leaf_b") == 0;
    CHECK_EQ_INT(named, 1);
    CHECK_EQ_INT(pr->n_samples, 5);
    unpack_free(r);
}

static void test_encode_empty_and_bad(void)
{
    made m;
    make_profile(&m);
    m.p.nsamples = 0;
    Request *r = encode_made(&m);
    if (r) {
        CHECK_EQ_INT(check_dictionary(r), 0);
        CHECK_EQ_INT(profile_of(r, "samples")->n_samples, 0);
        unpack_free(r);
    }
    make_profile(&m);
    m.samples[3].stack = 9;     /* out of range: refused, not read */
    pn_otlp_opts o = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    pn_error e;
    CHECK_EQ_INT(pn_otlp_encode(&m.p, &o, &buf, &len, &e), -1);
    CHECK(strstr(e.msg, "stack 9") != NULL);
    CHECK(buf == NULL);
}

static void test_parse_id_and_url(void)
{
    uint8_t id[16];
    CHECK_EQ_INT(pn_otlp_parse_id(SPAN, 16, id), 0);
    CHECK_EQ_INT(id[0], 0x00);
    CHECK_EQ_INT(id[1], 0xf0);
    CHECK_EQ_INT(pn_otlp_parse_id("00F067AA0BA902B7", 16, id), 0);
    CHECK_EQ_INT(pn_otlp_parse_id("00f067aa0ba902b", 16, id), -1);
    CHECK_EQ_INT(pn_otlp_parse_id("00f067aa0ba902bz", 16, id), -1);
    CHECK_EQ_INT(pn_otlp_parse_id("0000000000000000", 16, id), -1);
    CHECK_EQ_INT(pn_otlp_parse_id(TRACE, 32, id), 0);
    CHECK_EQ_INT(pn_otlp_parse_id(SPAN, 32, id), -1);

    char *u = NULL;
    pn_error e;
    CHECK_EQ_INT(pn_otlp_url("http://h:4040", &u, &e), 0);
    CHECK_STR(u, "http://h:4040/v1development/profiles");
    free(u);
    CHECK_EQ_INT(pn_otlp_url("http://h:4318/otlp/", &u, &e), 0);
    CHECK_STR(u, "http://h:4318/otlp/v1development/profiles");
    free(u);
    CHECK_EQ_INT(pn_otlp_url("http://h/v1development/profiles", &u, &e), 0);
    CHECK_STR(u, "http://h/v1development/profiles");
    free(u);
    CHECK_EQ_INT(pn_otlp_url("", &u, &e), -1);
}

/* ---------------------------------------------------------- settings */

static void test_otel_env(void)
{
    pn_config c;
    pn_error e;
    pn_config_init(&c);
    char *env[] = {
        "OTEL_SERVICE_NAME=checkout",
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318",
        "OTEL_EXPORTER_OTLP_HEADERS=Authorization=Basic%20dXNlcjpwdw==, X-Scope-OrgID = team-a",
        "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod,k8s.pod.name=p%2C1",
        NULL,
    };
    CHECK_EQ_INT(pn_config_apply_env(&c, env, &e), 0);
    CHECK_STR(c.application_name, "checkout");
    CHECK_STR(c.otlp_endpoint, "http://collector:4318");
    CHECK_EQ_INT(c.notlp_headers, 2);
    if (c.notlp_headers == 2) {
        CHECK_STR(c.otlp_headers[0].key, "Authorization");
        CHECK_STR(c.otlp_headers[0].value, "Basic dXNlcjpwdw==");
        CHECK_STR(c.otlp_headers[1].key, "X-Scope-OrgID");
        CHECK_STR(c.otlp_headers[1].value, "team-a");
    }
    CHECK_STR(c.resource_attributes, "deployment.environment=prod,k8s.pod.name=p%2C1");
    CHECK_EQ_INT(pn_config_validate(&c, &e), 0);   /* OTLP alone is a destination */
    pn_config_free(&c);

    /* The signal's own endpoint wins over the general one, and
     * PYROSCOPE_* over both. */
    pn_config_init(&c);
    char *env2[] = {
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://general:4318",
        "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT=http://profiles:4318/v1development/profiles",
        "OTEL_SERVICE_NAME=has spaces",   /* not an application name: ignored */
        "PYROSCOPE_APPLICATION_NAME=app",
        NULL,
    };
    pn_log_set_level(PN_LOG_OFF);
    CHECK_EQ_INT(pn_config_apply_env(&c, env2, &e), 0);
    pn_log_set_level(PN_LOG_WARN);
    CHECK_STR(c.otlp_endpoint, "http://profiles:4318/v1development/profiles");
    CHECK_STR(c.application_name, "app");
    char *env3[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://general:4318",
                    "PYROSCOPE_OTLP_ENDPOINT=http://mine:4040", NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, env3, &e), 0);
    CHECK_STR(c.otlp_endpoint, "http://mine:4040");
    pn_config_free(&c);

    /* The protocol: the signal's variable wins, PYROSCOPE_* over both. */
    pn_config_init(&c);
    CHECK_EQ_INT(c.otlp_protocol, PN_OTLP_HTTP_PROTOBUF);
    char *env4[] = {"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
                    "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL=http/json", NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, env4, &e), 0);
    CHECK_EQ_INT(c.otlp_protocol, PN_OTLP_HTTP_JSON);
    char *env5[] = {"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, env5, &e), 0);
    CHECK_EQ_INT(c.otlp_protocol, PN_OTLP_GRPC);
    char *env6[] = {"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "PYROSCOPE_OTLP_PROTOCOL=http/protobuf",
                    NULL};
    CHECK_EQ_INT(pn_config_apply_env(&c, env6, &e), 0);
    CHECK_EQ_INT(c.otlp_protocol, PN_OTLP_HTTP_PROTOBUF);
    pn_config_free(&c);
    char *u = NULL;
    CHECK_EQ_INT(pn_otlp_grpc_url("http://collector:4317/ignored/path", &u, &e), 0);
    CHECK_STR(u, "http://collector:4317/opentelemetry.proto.collector.profiles.v1development."
                 "ProfilesService/Export");
    free(u);

    /* Bad values name the variable or the setting. */
    struct {
        const char *var, *needle;
    } bad[] = {
        {"OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318", "OTEL_EXPORTER_OTLP_ENDPOINT"},
        {"OTEL_EXPORTER_OTLP_HEADERS=Authorization", "OTEL_EXPORTER_OTLP_HEADERS"},
        {"OTEL_EXPORTER_OTLP_PROFILES_HEADERS=a=%zz", "OTEL_EXPORTER_OTLP_PROFILES_HEADERS"},
        {"OTEL_RESOURCE_ATTRIBUTES==v", "OTEL_RESOURCE_ATTRIBUTES"},
        {"PYROSCOPE_OTLP_ENDPOINT=ftp://x", "otlp_endpoint"},
        {"PYROSCOPE_OTLP_HEADERS=Bad Name=1", "otlp_headers"},
        {"OTEL_EXPORTER_OTLP_PROTOCOL=http", "OTEL_EXPORTER_OTLP_PROTOCOL"},
        {"OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL=GRPC", "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pn_config_init(&c);
        char *one[] = {(char *)bad[i].var, NULL};
        CHECK_EQ_INT(pn_config_apply_env(&c, one, &e), -1);
        if (!strstr(e.msg, bad[i].needle))
            fprintf(stderr, "  %s: message \"%s\" does not name %s\n", bad[i].var, e.msg,
                    bad[i].needle);
        CHECK(strstr(e.msg, bad[i].needle) != NULL);
        pn_config_free(&c);
    }
    pn_config_init(&c);
    CHECK_EQ_INT(pn_config_set(&c, "resource_attributes", "a=1,b", &e), -1);
    CHECK(strstr(e.msg, "resource_attributes") != NULL);
    CHECK_EQ_INT(pn_config_set(&c, "application_name", "a", &e), 0);
    CHECK_EQ_INT(pn_config_validate(&c, &e), -1);
    CHECK(strstr(e.msg, "otlp_endpoint") != NULL);
    pn_config_free(&c);
}

/* ---------------------------------------------------- through the agent */

static int64_t mono_now(void) { return pn_clock_ns(CLOCK_MONOTONIC); }

static void record(pn_driver *d, const char *leaf_name, const pn_labelset *ls, int64_t value)
{
    pn_record_begin(d);
    int64_t t = mono_now();
    pn_period *p = pn_record_period(d, t);
    CHECK(p != NULL);
    if (p) {
        pn_symbols *sym = pn_period_symbols(p);
        pn_frame_id f[2] = {pn_symbols_frame3(sym, leaf_name, strlen(leaf_name), "svc.py", 6, 3),
                            pn_symbols_frame3(sym, "main", 4, "svc.py", 6, 1)};
        int64_t v[2] = {value, 1};
        pn_sample s = {.frames = f, .depth = 2, .labels = ls, .tid = 1, .values = v, .time_ns = t};
        pn_record(d, p, &s);
    }
    pn_record_end(d);
}

typedef struct {
    pn_agent *a;
    pn_driver *d;
    const pn_labelset *span;
} run;

/* An agent exporting to Pyroscope at `pyro` (NULL: none) and OTLP at
 * `otlp`, a batch driver with samples in and out of a span. */
static int start_run(run *r, test_server *pyro, test_server *otlp, pn_config *c,
                     const char *stop_timeout)
{
    pn_error e;
    memset(r, 0, sizeof *r);
    pn_config_init(c);
    pn_config_set(c, "application_name", "otlp.e2e", NULL);
    pn_config_set(c, "upload_interval", "3600", NULL);
    pn_config_set(c, "log_level", "off", NULL);
    pn_config_set(c, "report_pid", "true", NULL);
    pn_config_set(c, "tags", "env=e2e", NULL);
    pn_config_set(c, "runtime_name", "cpython", NULL);
    pn_config_set(c, "runtime_version", "3.11.7", NULL);
    pn_config_set(c, "resource_attributes", "deployment.environment=test", NULL);
    if (stop_timeout)
        pn_config_set(c, "stop_timeout", stop_timeout, NULL);
    if (pyro)
        pn_config_set(c, "server_address", test_server_url(pyro), NULL);
    CHECK_EQ_INT(pn_config_set(c, "otlp_endpoint", test_server_url(otlp), &e), 0);
    CHECK_EQ_INT(pn_config_set(c, "otlp_headers", "Authorization=Bearer t0ken", &e), 0);
    r->a = pn_agent_start(c, &e);
    CHECK(r->a != NULL);
    if (!r->a) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    r->d = pn_agent_add_driver(r->a, &(pn_driver_opts){.kind = PN_DRIVER_BATCH,
                                                       .max_delay_ns = 20 * 1000000LL}, &e);
    CHECK(r->d != NULL);
    pn_label kv[3] = {{"span_id", SPAN}, {"trace_id", TRACE}, {"span_name", "GET /cart"}};
    r->span = pn_labelset_merge(pn_labelset_empty(), kv, 3, &e);
    CHECK(r->span != NULL);
    if (!r->d || !r->span)
        return -1;
    record(r->d, "in_span", r->span, 3000000);
    record(r->d, "in_span", r->span, 4000000);
    record(r->d, "outside", NULL, 5000000);
    pn_driver_watermark(r->d, mono_now());
    return 0;
}

static void end_run(run *r, pn_config *c, pn_agent_stats *fin)
{
    if (r->a)
        pn_agent_stop_stats(r->a, fin);
    if (r->span)
        pn_labelset_unref(r->span);
    pn_config_free(c);
    pn_labels_reclaim();
    pn_log_set_level(PN_LOG_WARN);
}

/* The OTLP request a receiver got, checked as a whole. */
static void check_otlp_request(const test_request *q)
{
    CHECK_STR(q->method, "POST");
    CHECK_STR(q->target, "/v1development/profiles");
    CHECK_STR(test_request_header(q, "Content-Type"), "application/x-protobuf");
    CHECK_STR(test_request_header(q, "Content-Encoding"), "gzip");
    CHECK_STR(test_request_header(q, "Authorization"), "Bearer t0ken");
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    pn_error e;
    CHECK(q->body_len > 2 && q->body[0] == 0x1f && q->body[1] == 0x8b);
    CHECK_EQ_INT(pn_gunzip(q->body, q->body_len, 64 << 20, &raw, &raw_len, &e), 0);
    Request *r = raw ? unpack(raw, raw_len) : NULL;
    free(raw);
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK_EQ_INT(check_dictionary(r), 0);
    /* On-CPU: one samples/count Profile whose values are the CPU (period 1). */
    const Profile *cpu = profile_of(r, "samples");
    CHECK(cpu != NULL);
    CHECK(!cpu || cpu->period == 1);
    int64_t in_span = 0, outside = 0;
    for (size_t s = 0; cpu && s < cpu->n_samples; s++) {
        const Sample *sm = cpu->samples[s];
        const char *name = leaf(r, sm);
        if (strcmp(name, "in_span") == 0) {
            in_span += sm->values[0];
            CHECK(sm->link_index > 0);
            if (sm->link_index > 0) {
                char t[40], sp[20];
                hex(&r->dictionary->link_table[sm->link_index]->trace_id, t);
                hex(&r->dictionary->link_table[sm->link_index]->span_id, sp);
                CHECK_STR(t, TRACE);
                CHECK_STR(sp, SPAN);
            }
            CHECK_STR(attr(r, sm, "span_name"), "GET /cart");
        } else {
            CHECK_STR(name, "outside");
            outside += sm->values[0];
            CHECK_EQ_INT(sm->link_index, 0);
        }
        CHECK(attr(r, sm, "pid") != NULL);
        CHECK_STR(attr(r, sm, "env"), "e2e");    /* a static tag, on every sample */
    }
    CHECK_EQ_INT(in_span, 7000000);
    CHECK_EQ_INT(outside, 5000000);
    int64_t pid = 0;
    CHECK_STR(resource_attr(r, "service.name", NULL), "otlp.e2e");
    CHECK_STR(resource_attr(r, "process.runtime.name", NULL), "cpython");
    CHECK_STR(resource_attr(r, "process.runtime.version", NULL), "3.11.7");
    CHECK_STR(resource_attr(r, "telemetry.sdk.language", NULL), "python");
    CHECK_STR(resource_attr(r, "telemetry.sdk.name", NULL), "pyroscope-native");
    CHECK_STR(resource_attr(r, "deployment.environment", NULL), "test");
    CHECK(resource_attr(r, "process.pid", &pid) != NULL);
    CHECK_EQ_INT(pid, getpid());
    unpack_free(r);
}

static const pn_exporter_stats *exporter(const pn_agent_stats *s, const char *name)
{
    for (size_t i = 0; i < s->queue.nexporters; i++)
        if (strcmp(s->queue.exporters[i].name, name) == 0)
            return &s->queue.exporters[i];
    return NULL;
}

static void test_export_beside_pyroscope(void)
{
    test_server *pyro = test_server_start(), *otlp = test_server_start();
    if (!pyro || !otlp) {
        CHECK(0);
        return;
    }
    run r;
    pn_config c;
    pn_error e;
    if (start_run(&r, pyro, otlp, &c, NULL) == 0)
        CHECK_EQ_INT(pn_agent_flush(r.a, 60, &e), 0);
    pn_agent_stats fin;
    memset(&fin, 0, sizeof fin);
    end_run(&r, &c, &fin);
    CHECK_EQ_INT(test_server_count(otlp), 1);
    CHECK_EQ_INT(test_server_count(pyro), 1);
    if (test_server_count(otlp) >= 1)
        check_otlp_request(test_server_request(otlp, 0));
    const test_request *pq = test_server_request(pyro, 0);
    CHECK(pq && strncmp(pq->target, "/ingest?", 8) == 0);
    CHECK(pq && test_request_header(pq, "Authorization") == NULL);
    const pn_exporter_stats *h = exporter(&fin, "http"), *o = exporter(&fin, "otlp");
    CHECK(h && o);
    if (h && o) {
        CHECK_EQ_INT(h->sent, 1);
        CHECK_EQ_INT(o->sent, 1);
        CHECK_EQ_INT(o->failed + h->failed, 0);
        CHECK(o->bytes_sent > 0);
    }
    CHECK_EQ_INT(fin.queue.uploads_ok, 1);
    test_server_stop(pyro);
    test_server_stop(otlp);
}

/* One receiver down or refusing: the other still gets its upload, and each
 * exporter's counters say which. */
static void test_exporters_fail_apart(void)
{
    test_server *pyro = test_server_start(), *otlp = test_server_start();
    if (!pyro || !otlp) {
        CHECK(0);
        return;
    }
    test_server_default_reply(pyro, 503, "down", 0);
    run r;
    pn_config c;
    pn_error e;
    if (start_run(&r, pyro, otlp, &c, NULL) == 0)
        (void)pn_agent_flush(r.a, 60, &e);
    pn_agent_stats fin;
    memset(&fin, 0, sizeof fin);
    end_run(&r, &c, &fin);
    const pn_exporter_stats *h = exporter(&fin, "http"), *o = exporter(&fin, "otlp");
    CHECK(h && o);
    if (h && o) {
        CHECK_EQ_INT(h->failed, 1);
        CHECK_EQ_INT(h->retries, 3);    /* the default 4 attempts */
        CHECK_EQ_INT(h->sent, 0);
        CHECK_EQ_INT(o->sent, 1);
        CHECK_EQ_INT(o->retries, 0);
    }
    CHECK_EQ_INT(test_server_count(pyro), 4);
    CHECK_EQ_INT(test_server_count(otlp), 1);
    if (test_server_count(otlp) >= 1)
        check_otlp_request(test_server_request(otlp, 0));
    CHECK_EQ_INT(fin.queue.uploads_failed, 1);
    test_server_stop(pyro);
    test_server_stop(otlp);

    /* The other way round: a 400 from the OTLP receiver is not retried. */
    pyro = test_server_start();
    otlp = test_server_start();
    if (!pyro || !otlp) {
        CHECK(0);
        return;
    }
    test_server_default_reply(otlp, 400, "bad profile", 0);
    if (start_run(&r, pyro, otlp, &c, NULL) == 0)
        (void)pn_agent_flush(r.a, 60, &e);
    memset(&fin, 0, sizeof fin);
    end_run(&r, &c, &fin);
    h = exporter(&fin, "http");
    o = exporter(&fin, "otlp");
    CHECK(h && o);
    if (h && o) {
        CHECK_EQ_INT(h->sent, 1);
        CHECK_EQ_INT(o->failed, 1);
        CHECK_EQ_INT(o->retries, 0);
    }
    CHECK_EQ_INT(test_server_count(otlp), 1);
    test_server_stop(pyro);
    test_server_stop(otlp);
}

/* Both receivers hang: stop still returns (bounded by stop_timeout; the
 * ctest timeout would catch a hang) and the upload is counted dropped. */
static void test_stop_with_both_hanging(void)
{
    test_server *pyro = test_server_start(), *otlp = test_server_start();
    if (!pyro || !otlp) {
        CHECK(0);
        return;
    }
    test_server_default_reply(pyro, TEST_SERVER_HANG, NULL, 0);
    test_server_default_reply(otlp, TEST_SERVER_HANG, NULL, 0);
    run r;
    pn_config c;
    if (start_run(&r, pyro, otlp, &c, "0.5") == 0)
        CHECK(r.a != NULL);
    pn_agent_stats fin;
    memset(&fin, 0, sizeof fin);
    end_run(&r, &c, &fin);
    CHECK_EQ_INT(fin.queue.uploads_dropped, 1);
    CHECK_EQ_INT(fin.queue.uploads_ok + fin.queue.uploads_failed, 0);
    test_server_stop(pyro);
    test_server_stop(otlp);
}

/* OTLP alone, no Pyroscope server. */
static void test_export_alone(void)
{
    test_server *otlp = test_server_start();
    if (!otlp) {
        CHECK(0);
        return;
    }
    run r;
    pn_config c;
    pn_error e;
    if (start_run(&r, NULL, otlp, &c, NULL) == 0)
        CHECK_EQ_INT(pn_agent_flush(r.a, 60, &e), 0);
    pn_agent_stats fin;
    memset(&fin, 0, sizeof fin);
    end_run(&r, &c, &fin);
    CHECK_EQ_INT(fin.queue.nexporters, 1);
    CHECK_EQ_INT(test_server_count(otlp), 1);
    if (test_server_count(otlp) >= 1)
        check_otlp_request(test_server_request(otlp, 0));
    test_server_stop(otlp);
}

/* ------------------------------------------- the Collector's own decoder */

/* The go binary: $PN_GO, else /usr/local/go/bin/go, else go on PATH. */
static const char *find_go(void)
{
    const char *g = getenv("PN_GO");
    if (g && *g)
        return access(g, X_OK) == 0 ? g : NULL;
    if (access("/usr/local/go/bin/go", X_OK) == 0)
        return "/usr/local/go/bin/go";
    return system("command -v go >/dev/null 2>&1") == 0 ? "go" : NULL;
}

static int contains_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

/* The made profile, decoded by go.opentelemetry.io/collector/pdata/pprofile
 * (the version built on the same opentelemetry-proto v1.10.0) through
 * tests/otlp_go, built here from the Go module proxy. */
static void test_go_pdata_decodes(void)
{
    const char *go = find_go();
    if (!go) {
        printf("  skipped: no go toolchain (set PN_GO or install Go to run this check)\n");
        return;
    }
    const char *src = getenv("PN_SOURCE_DIR");
    CHECK(src != NULL);
    if (!src)
        return;
    const char *bd = getenv("PN_BUILD_DIR");
    char build[1024], dir[] = "/tmp/pn-otlp-go-XXXXXX", cmd[4096];
    snprintf(build, sizeof build, "%s", bd && *bd ? bd : "");
    if (!build[0])
        snprintf(build, sizeof build, "%s/build", src);
    CHECK(mkdtemp(dir) != NULL);

    made m;
    make_profile(&m);
    static const pn_label tags[] = {{"env", "staging"}};
    pn_otlp_opts o = {.resource = resource, .nresource = 3, .pid = 4242, .tags = tags, .ntags = 1};
    uint8_t *buf = NULL, *gz = NULL;
    size_t len = 0, gz_len = 0;
    pn_error e;
    CHECK_EQ_INT(pn_otlp_encode(&m.p, &o, &buf, &len, &e), 0);
    CHECK_EQ_INT(pn_gzip(buf, len, &gz, &gz_len, &e), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/request.pb.gz", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(fwrite(gz, 1, gz_len, f), gz_len);
        fclose(f);
    }
    free(buf);
    free(gz);

    /* Module and build caches under the build folder (-modcacherw: make
     * clean can delete them). */
    snprintf(cmd, sizeof cmd,
             "cd '%s/tests/otlp_go' && GOFLAGS='-mod=mod -modcacherw' GOTOOLCHAIN=local "
             "GOMODCACHE='%s/go/mod' GOCACHE='%s/go/cache' GOPATH='%s/go/path' '%s' build "
             "-o '%s/otlp_check' . && '%s/otlp_check' '%s' > '%s/out.txt'",
             src, build, build, build, go, dir, dir, path, dir);
    int rc = system(cmd);
    CHECK_EQ_INT(rc, 0);
    char out_path[256];
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    char out[16384] = "";
    f = fopen(out_path, "r");
    if (f) {
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    static const char *const want[] = {
        "service.name otlp.test",
        "process.pid 4242",
        /* on-CPU: one Profile, the CPU as samples/count (period 1) */
        "profile samples count samples 5 sum 43",
        "sample samples leaf_b 20 link " TRACE " " SPAN,
        "sample samples leaf_a 10 link - -",
        "attr samples leaf_a thread_name=worker",
        "attr samples leaf_a env=staging",
        "attr samples leaf_b endpoint=/a",
        "attr samples leaf_b span_id=bad",
        "attr samples leaf_b region=us",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!contains_line(out, want[i]))
            fprintf(stderr, "  pdata output lacks \"%s\"\n", want[i]);
        CHECK(contains_line(out, want[i]));
    }
    /* A linked sample carries no span_id / trace_id attributes. */
    CHECK(!contains_line(out, "attr samples leaf_b span_id=" SPAN));

    /* The same request as OTLP/JSON (http/json), read by the Collector's
     * JSON reader, says the same, line for line. */
    o.json = 1;
    CHECK_EQ_INT(pn_otlp_encode(&m.p, &o, &buf, &len, &e), 0);
    snprintf(path, sizeof path, "%s/request.json", dir);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(fwrite(buf, 1, len, f), len);
        fclose(f);
    }
    CHECK(len > 0 && memmem(buf, len, "\"traceId\":\"" TRACE "\"", strlen(TRACE) + 11) != NULL);
    free(buf);
    snprintf(cmd, sizeof cmd, "'%s/otlp_check' '%s' > '%s/out_json.txt'", dir, path, dir);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(out_path, sizeof out_path, "%s/out_json.txt", dir);
    char out_json[16384] = "";
    f = fopen(out_path, "r");
    if (f) {
        size_t n = fread(out_json, 1, sizeof out_json - 1, f);
        out_json[n] = '\0';
        fclose(f);
    }
    CHECK(out[0] != '\0');
    CHECK_STR(out_json, out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

TEST_MAIN(T(test_encode_fields), T(test_encode_cpu_as_count), T(test_encode_empty_and_bad), T(test_parse_id_and_url),
          T(test_otel_env), T(test_export_beside_pyroscope), T(test_exporters_fail_apart),
          T(test_stop_with_both_hanging), T(test_export_alone), T(test_go_pdata_decodes))
