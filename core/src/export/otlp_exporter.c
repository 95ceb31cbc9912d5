/* The OTLP profiles exporter: OTLP/HTTP (binary protobuf or JSON) or OTLP/gRPC.
 *
 * http/protobuf (the default): POST <endpoint>/v1development/profiles,
 * Content-Type application/x-protobuf, Content-Encoding gzip, the body one
 * ExportProfilesServiceRequest per period (encoding/otlp.c); http/json the
 * same as application/json (encoding/otlp_json.c); grpc: the message,
 * gzip'ed, in one gRPC frame to <scheme://host:port>/opentelemetry.proto.
 * collector.profiles.v1development.ProfilesService/Export over HTTP/2. The transport
 * is the HTTP exporter's (libcurl, one kept-alive connection, deadlines,
 * abort at stop) in its raw-body mode; retries, backoff, the bounded queue
 * and the bounded stop are the queue's, as for every exporter. Pyroscope
 * takes this on its HTTP port, an OpenTelemetry Collector on its OTLP/HTTP
 * receiver (4318) with the profiles feature gate on.
 *
 * State: fixed after new (owned copies), then used by the exporter thread
 * only; the process id is read at each encode, so a forked child's
 * profiles carry its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encoding/otlp.h"
#include "encoding/pprof.h"
#include "export/exporter.h"
#include "export/series_tags.h"
#include "support/otel_pairs.h"

#define OTLP_PATH "/v1development/profiles"
#define GRPC_PATH "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define SDK_NAME "pyroscope-native"
#define SDK_VERSION PN_SDK_VERSION

typedef struct {
    pn_exporter base;           /* first: the queue sees a pn_exporter */
    pn_exporter *http;          /* the transport */
    pn_label *resource;         /* owned keys and values */
    size_t nresource;
    pn_label *tags;             /* owned: static tags, sample attributes */
    size_t ntags;
    int protocol;               /* PN_OTLP_* */
    int file_in_name;           /* spy name rbspy: names as Pyroscope shows Ruby's pprof */
} otlp_exporter;

int pn_otlp_url(const char *endpoint, char **url, pn_error *e)
{
    if (!endpoint || !*endpoint)
        return pn_fail(e, PN_EINVAL, "otlp_endpoint is empty");
    size_t n = strlen(endpoint);
    while (n > 0 && endpoint[n - 1] == '/')
        n--;
    size_t pl = strlen(OTLP_PATH);
    int has_path = n >= pl && memcmp(endpoint + n - pl, OTLP_PATH, pl) == 0;
    char *u = malloc(n + pl + 1);
    if (!u)
        return pn_fail(e, PN_ENOMEM, "otlp_endpoint: out of memory");
    memcpy(u, endpoint, n);
    if (has_path)
        u[n] = '\0';
    else
        memcpy(u + n, OTLP_PATH, pl + 1);
    *url = u;
    return 0;
}

int pn_otlp_grpc_url(const char *endpoint, char **url, pn_error *e)
{
    if (!endpoint || !*endpoint)
        return pn_fail(e, PN_EINVAL, "otlp_endpoint is empty");
    const char *host = strstr(endpoint, "://");
    host = host ? host + 3 : endpoint;
    size_t n = (size_t)(host - endpoint) + strcspn(host, "/");
    size_t pl = strlen(GRPC_PATH);
    char *u = malloc(n + pl + 1);
    if (!u)
        return pn_fail(e, PN_ENOMEM, "otlp_endpoint: out of memory");
    memcpy(u, endpoint, n);
    memcpy(u + n, GRPC_PATH, pl + 1);
    *url = u;
    return 0;
}

/* The telemetry.sdk.language of a runtime (semantic conventions' values);
 * the core itself is C, which the conventions spell "cpp". */
static const char *sdk_language(const char *runtime)
{
    static const char *const map[][2] = {
        {"cpython", "python"}, {"pypy", "python"}, {"python", "python"},
        {"node", "nodejs"},    {"nodejs", "nodejs"}, {"ruby", "ruby"},
    };
    for (size_t i = 0; runtime && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(runtime, map[i][0]) == 0)
            return map[i][1];
    return "cpp";
}

static int add_pair(otlp_exporter *x, size_t cap, const char *k, const char *v)
{
    if (!k || !v || x->nresource >= cap)
        return 0;
    char *kd = strdup(k), *vd = strdup(v);
    if (!kd || !vd) {
        free(kd);
        free(vd);
        return -1;
    }
    x->resource[x->nresource++] = (pn_label){kd, vd};
    return 0;
}

/* Ours first: the encoder keeps the first value of a key, so service.name
 * is the application name and the SDK attributes are ours whatever
 * OTEL_RESOURCE_ATTRIBUTES says; its other attributes follow. */
static int build_resource(otlp_exporter *x, const pn_otlp_exporter_opts *o)
{
    size_t cap = 6 + o->nresource;
    x->resource = calloc(cap, sizeof *x->resource);
    if (!x->resource)
        return -1;
    if (add_pair(x, cap, "service.name", o->app_name) ||
        add_pair(x, cap, "process.runtime.name", o->runtime_name) ||
        add_pair(x, cap, "process.runtime.version", o->runtime_version) ||
        add_pair(x, cap, "telemetry.sdk.name", SDK_NAME) ||
        add_pair(x, cap, "telemetry.sdk.language", sdk_language(o->runtime_name)) ||
        add_pair(x, cap, "telemetry.sdk.version", SDK_VERSION))
        return -1;
    for (size_t i = 0; i < o->nresource; i++)
        if (add_pair(x, cap, o->resource[i].key, o->resource[i].value))
            return -1;
    return 0;
}

static int otlp_encode(pn_exporter *self, const pn_profile *p, pn_upload ***parts, size_t *nparts,
                       pn_error *e)
{
    otlp_exporter *x = (otlp_exporter *)self;
    pn_otlp_opts oo = {
        .resource = x->resource,
        .nresource = x->nresource,
        .pid = (int64_t)getpid(),
        .scope_name = SDK_NAME,
        .scope_version = SDK_VERSION,
        .tags = x->tags,
        .ntags = x->ntags,
        .json = x->protocol == PN_OTLP_HTTP_JSON,
        .file_in_name = x->file_in_name,
    };
    uint8_t *raw = NULL, *gz = NULL;
    size_t raw_len = 0, gz_len = 0;
    if (pn_otlp_encode(p, &oo, &raw, &raw_len, e) < 0)
        return -1;
    int rc = pn_gzip(raw, raw_len, &gz, &gz_len, e);
    free(raw);
    if (rc < 0)
        return -1;
    if (x->protocol == PN_OTLP_GRPC) {
        /* One length-prefixed message: flag 1 (compressed, grpc-encoding
         * gzip), then its length, big-endian. */
        uint8_t *framed = gz_len <= UINT32_MAX ? malloc(gz_len + 5) : NULL;
        if (!framed) {
            free(gz);
            return pn_fail(e, PN_ENOMEM, "OTLP export: out of memory");
        }
        framed[0] = 1;
        for (int i = 0; i < 4; i++)
            framed[1 + i] = (uint8_t)(gz_len >> (24 - 8 * i));
        memcpy(framed + 5, gz, gz_len);
        free(gz);
        gz = framed;
        gz_len += 5;
    }
    pn_upload **list = calloc(1, sizeof *list);
    pn_upload *u = calloc(1, sizeof *u);
    if (!list || !u || !(u->app_name = strdup(p->app_name)) ||
        !(u->profile_type = strdup(p->profile_type))) {
        free(list);
        pn_upload_free(u);
        free(gz);
        return pn_fail(e, PN_ENOMEM, "OTLP export: out of memory");
    }
    u->data = gz;
    u->len = gz_len;
    u->from_s = p->start_ns / 1000000000;
    u->until_s = p->end_ns / 1000000000;
    u->sample_rate = p->sample_rate;
    list[0] = u;
    *parts = list;
    *nparts = 1;
    return 0;
}

static pn_send_result otlp_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                const volatile int *abort, pn_error *e)
{
    otlp_exporter *x = (otlp_exporter *)self;
    return x->http->send(x->http, u, deadline_ns, abort, e);
}

static void otlp_destroy(pn_exporter *self)
{
    otlp_exporter *x = (otlp_exporter *)self;
    if (!x)
        return;
    if (x->http)
        x->http->destroy(x->http);
    pn_pairs_free(x->resource, x->nresource);
    pn_pairs_free(x->tags, x->ntags);
    free(x);
}

pn_exporter *pn_otlp_exporter_new(const pn_otlp_exporter_opts *o, pn_error *e)
{
    if (!o) {
        pn_fail(e, PN_EINVAL, "otlp exporter: options are NULL");
        return NULL;
    }
    char *url = NULL;
    if (o->protocol == PN_OTLP_GRPC ? pn_otlp_grpc_url(o->endpoint, &url, e)
                                    : pn_otlp_url(o->endpoint, &url, e))
        return NULL;
    otlp_exporter *x = calloc(1, sizeof *x);
    if (!x) {
        free(url);
        pn_fail(e, PN_ENOMEM, "otlp exporter: out of memory");
        return NULL;
    }
    pn_http_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.server_address = url;
    ho.app_name = o->app_name;
    ho.headers = o->headers;
    ho.nheaders = o->nheaders;
    ho.timeout_s = o->timeout_s;
    x->protocol = o->protocol;
    x->file_in_name = o->spy_name && strcmp(o->spy_name, "rbspy") == 0;
    ho.raw_content_type = o->protocol == PN_OTLP_GRPC        ? "application/grpc"
                          : o->protocol == PN_OTLP_HTTP_JSON ? "application/json"
                                                             : "application/x-protobuf";
    ho.grpc = o->protocol == PN_OTLP_GRPC;
    ho.protocol_setting = "otlp_protocol (OTEL_EXPORTER_OTLP_PROTOCOL)";
    ho.address_setting = "otlp_endpoint";
    ho.headers_setting = "otlp_headers";
    x->http = pn_http_exporter_new(&ho, e);
    free(url);
    if (!x->http) {
        otlp_destroy(&x->base);
        return NULL;
    }
    if (o->ntags && !(x->tags = calloc(o->ntags, sizeof *x->tags))) {
        otlp_destroy(&x->base);
        pn_fail(e, PN_ENOMEM, "otlp exporter: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < o->ntags; i++, x->ntags++)
        if (!(x->tags[i].key = strdup(o->tags[i].key)) ||
            !(x->tags[i].value = strdup(o->tags[i].value))) {
            x->ntags++;     /* free the half-made pair too */
            otlp_destroy(&x->base);
            pn_fail(e, PN_ENOMEM, "otlp exporter: out of memory");
            return NULL;
        }
    if (build_resource(x, o)) {
        otlp_destroy(&x->base);
        pn_fail(e, PN_ENOMEM, "otlp exporter: out of memory");
        return NULL;
    }
    x->base.name = "otlp";
    x->base.encode = otlp_encode;
    x->base.send = otlp_send;
    x->base.destroy = otlp_destroy;
    return &x->base;
}

pn_exporter *pn_otlp_exporter_from_config(const pn_config *c, pn_error *e)
{
    pn_label *res = NULL;
    size_t nres = 0;
    if (c->resource_attributes && pn_resource_attributes_parse(c->resource_attributes, &res, &nres, e))
        return NULL;
    pn_otlp_exporter_opts o = {
        .endpoint = c->otlp_endpoint,
        .headers = c->otlp_headers,
        .nheaders = c->notlp_headers,
        .app_name = c->application_name,
        .runtime_name = c->runtime_name,
        .runtime_version = c->runtime_version,
        .resource = res,
        .nresource = nres,
        .tags = c->tags,
        .ntags = c->ntags,
        .protocol = c->otlp_protocol,
        .spy_name = c->spy_name,
    };
    pn_exporter *x = pn_otlp_exporter_new(&o, e);
    pn_pairs_free(res, nres);
    return x;
}
