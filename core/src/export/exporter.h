/* Exporters and the upload queue. Core and tests only. */
#ifndef PN_EXPORTER_H
#define PN_EXPORTER_H

#include "pyroscope_native.h"
#include "aggregation/profile.h"

/* ------------------------------------------------------------- exporters */

/* One encoded payload on its way out (a profile in one receiver's format,
 * or one part of it when it was split). Owned by the exporter queue. */
typedef struct {
    char *app_name;             /* application name (no tags) */
    char *profile_type;         /* "cpu" or "wall": file names, logs */
    int64_t from_s, until_s;    /* unix seconds */
    uint32_t sample_rate;       /* Hz */
    uint8_t *data;              /* gzip'ed pprof */
    size_t len;
    uint32_t part;              /* index when a period was split */
} pn_upload;

/* UNCONFIRMED: the whole payload went out but its answer will never be
 * read (a binding's sender at process exit): not retried, counted apart. */
typedef enum { PN_SEND_OK = 0, PN_SEND_RETRY, PN_SEND_FAIL, PN_SEND_UNCONFIRMED } pn_send_result;

/* One destination; it owns its encoding. encode turns a profile into the
 * payloads its receiver takes; NULL means gzip'ed pprof split to
 * Pyroscope's limits (encoded once per profile for all exporters that take
 * it). *parts and each part are malloc'ed and freed by the queue. send()
 * sends one payload; it must give up by `deadline_ns` (CLOCK_MONOTONIC) and
 * when *abort becomes non-zero. All three run on the exporter thread only. */
typedef struct pn_exporter {
    const char *name;
    int (*encode)(struct pn_exporter *self, const pn_profile *p, pn_upload ***parts,
                  size_t *nparts, pn_error *e);
    pn_send_result (*send)(struct pn_exporter *self, const pn_upload *u,
                           int64_t deadline_ns, const volatile int *abort,
                           pn_error *e);
    void (*destroy)(struct pn_exporter *self);
} pn_exporter;

typedef struct {
    const char *server_address; /* http(s)://[user:password@]host[:port][/prefix] */
    const char *app_name;
    const pn_label *tags;       /* global tags, go into name={...} */
    size_t ntags;
    const char *spy_name;
    const char *basic_auth_user;
    const char *basic_auth_password;
    const char *tenant_id;
    const pn_label *headers;    /* extra HTTP headers (key = header name) */
    size_t nheaders;
    double connect_timeout_s;   /* default 5 */
    double timeout_s;           /* whole request, default 10 */
    /* PEM file of the certificates that https:// servers are checked
     * against; NULL: $SSL_CERT_FILE (and $SSL_CERT_DIR) when set, else
     * libcurl's default bundle. */
    const char *ca_file;
    /* Non-NULL: POST the payload itself (no multipart, no ingest query) to
     * server_address as given, with this Content-Type and
     * Content-Encoding: gzip (the OTLP exporter). */
    const char *raw_content_type;
    /* With raw_content_type: the payload is one gRPC message frame sent
     * over HTTP/2 (prior knowledge on http://, ALPN on https://) with
     * grpc-encoding gzip instead of Content-Encoding, and the reply's
     * grpc-status decides. Always libcurl (a binding's sender is not
     * used); new fails, naming protocol_setting, when libcurl has no
     * HTTP/2. */
    int grpc;
    const char *protocol_setting;
    const char *address_setting; /* named in messages; NULL: "server_address" */
    const char *headers_setting; /* named in messages; NULL: "http_headers" */
} pn_http_opts;

/* Every upload goes through libcurl, which is loaded (dlopen) here, on the
 * first call: when it cannot be loaded this fails, naming the library and
 * the package that provides it. When a binding set a sender
 * (pn_http_set_sender) before, the uploads go to it instead and libcurl is
 * loaded only when the sender first declines one. Proxies come from libcurl's own reading of
 * http_proxy, https_proxy, all_proxy and no_proxy. Redirects are not
 * followed (a 3xx answer fails the upload). The connection is kept open
 * between uploads. */
pn_exporter *pn_http_exporter_new(const pn_http_opts *o, pn_error *e);
/* Builds the ingest URL for u (exposed for tests). *url is malloc'ed. */
int pn_http_ingest_url(const pn_http_opts *o, const pn_upload *u, char **url,
                       pn_error *e);

pn_exporter *pn_folder_exporter_new(const char *dir, pn_error *e);

/* The OTLP profiles exporter (otlp_exporter.c): encodes each profile as an
 * ExportProfilesServiceRequest (encoding/otlp.h), gzip'ed, and POSTs it as
 * application/x-protobuf to otlp_url(endpoint) over the HTTP exporter's
 * transport (libcurl, retries by the queue, bounded stop). */
typedef struct {
    const char *endpoint;       /* otlp_endpoint: base URL or the full one */
    const pn_label *headers;    /* otlp_headers (auth goes here) */
    size_t nheaders;
    const char *app_name;       /* service.name */
    const char *runtime_name, *runtime_version; /* NULL: not sent */
    /* Extra resource attributes (OTEL_RESOURCE_ATTRIBUTES, already parsed);
     * service.name among them is overridden by app_name. */
    const pn_label *resource;
    size_t nresource;
    const pn_label *tags;       /* static tags: attributes of every sample */
    size_t ntags;
    int protocol;               /* PN_OTLP_HTTP_PROTOBUF, _HTTP_JSON, _GRPC */
    /* The pprof upload's spyName: "rbspy" makes function names "<file>
     * <name>", as Pyroscope shows that upload's (pn_otlp_opts). */
    const char *spy_name;
    double timeout_s;           /* 0: the HTTP exporter's default */
} pn_otlp_exporter_opts;

pn_exporter *pn_otlp_exporter_new(const pn_otlp_exporter_opts *o, pn_error *e);
/* The same from the config's otlp_* settings, application name, runtime
 * and resource_attributes. */
pn_exporter *pn_otlp_exporter_from_config(const pn_config *c, pn_error *e);
/* endpoint + "/v1development/profiles" unless it already ends so; *url
 * malloc'ed. */
int pn_otlp_url(const char *endpoint, char **url, pn_error *e);
/* gRPC: scheme://host[:port] of endpoint (a path is dropped, as the OTLP
 * spec says for gRPC) + the Export method's path; *url malloc'ed. */
int pn_otlp_grpc_url(const char *endpoint, char **url, pn_error *e);

typedef struct {
    size_t queue_capacity;      /* uploads held; default 16 */
    int max_attempts;           /* per upload and exporter; default 4 */
    double backoff_initial_s;   /* default 0.5, doubles, +-25% jitter */
    double backoff_max_s;       /* default 8 */
} pn_queue_opts;

/* The exporter thread: a bounded queue in front of one or more exporters. */
typedef struct pn_queue pn_queue;
pn_queue *pn_queue_new(const pn_queue_opts *o, pn_exporter **exporters, size_t n,
                       pn_error *e);
/* Takes ownership of p. Never blocks on the network: a full queue drops
 * its oldest entry, counted. Any thread. */
void pn_queue_push(pn_queue *q, pn_profile *p);
/* Wait until everything queued so far was sent or given up, at most
 * timeout_s. Returns 0 when drained, -1 on timeout. */
int pn_queue_flush(pn_queue *q, double timeout_s);
/* The last flush before stop: the same, and from now on an attempt that
 * fails is not retried (a refused or unresolvable server fails the upload
 * at once); only a transfer under way is waited for. Any thread. */
int pn_queue_drain(pn_queue *q, double timeout_s);
/* Drain for at most timeout_s, abort whatever is in flight, join, free.
 * The exporters are destroyed too. */
void pn_queue_stop(pn_queue *q, double timeout_s);
/* Start stopping without freeing: in-flight sends are aborted and every
 * flush returns at once; new pushes are dropped. Any thread. */
void pn_queue_close(pn_queue *q);
/* The same, also returning the counters as they were at the end. */
void pn_queue_stop_stats(pn_queue *q, double timeout_s, pn_queue_stats *final);
void pn_queue_get_stats(pn_queue *q, pn_queue_stats *out);
void pn_queue_fork_prepare(pn_queue *q);
void pn_queue_fork_parent(pn_queue *q);
void pn_queue_fork_child(pn_queue *q);
void pn_upload_free(pn_upload *u);
/* The default encoding: gzip'ed pprof parts of p within the server's
 * default limits (16 000 samples, 4 MiB). Exporter thread. */
int pn_pprof_uploads(const pn_profile *p, pn_upload ***parts, size_t *nparts, pn_error *e);

#endif
