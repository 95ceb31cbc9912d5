/* OTLP profiles encoding (opentelemetry.proto.profiles.v1development, as in
 * opentelemetry-proto v1.10.0). Core and tests only. */
#ifndef PN_OTLP_H
#define PN_OTLP_H

#include "pyroscope_native.h"
#include "aggregation/profile.h"

/* Label names that become a sample's Link instead of attributes. */
#define PN_OTLP_SPAN_ID "span_id"
#define PN_OTLP_TRACE_ID "trace_id"

typedef struct {
    /* Resource attributes with string values, in order (service.name,
     * process.runtime.*, telemetry.sdk.*, OTEL_RESOURCE_ATTRIBUTES...);
     * a key given twice keeps its first value. */
    const pn_label *resource;
    size_t nresource;
    int64_t pid;                /* process.pid (an int attribute); 0: none */
    const char *scope_name;     /* InstrumentationScope */
    const char *scope_version;
    /* Static tags: sample attributes on every sample (Pyroscope turns
     * sample attributes into labels and reads only service.name of the
     * resource), after the profile's extra labels and never over a
     * sample's own label of the same key. */
    const pn_label *tags;
    size_t ntags;
    int json;                   /* 1: *out is OTLP/JSON text, not protobuf */
    /* 1: function names are "<file> <name>", as Pyroscope names the
     * functions of a pprof upload whose spyName is rbspy, so Ruby frames
     * look the same in Pyroscope by either path. */
    int file_in_name;
} pn_otlp_opts;

/* One ExportProfilesServiceRequest for p: one ResourceProfiles, one
 * ScopeProfiles, and one Profile per sample type of p (OTLP profiles have
 * a single sample type each), all sharing one ProfilesDictionary; except an
 * on-CPU period (period type cpu/nanoseconds with a cpu/nanoseconds
 * column): one Profile, samples/count with period 1 (ns of cpu), values the
 * measured CPU ns, which Pyroscope shows as process_cpu (see otlp.c). Samples
 * whose value is zero are left out of that type's Profile. A sample whose
 * labels hold a well-formed trace_id (32 hex digits) and span_id (16 hex
 * digits), neither all zero, points to the Link (trace_id, span_id) and
 * those two labels are not repeated as attributes; otherwise they stay
 * attributes. The other labels, the profile's extra labels (pid, static
 * tags) and thread_id / thread_name when reported become string
 * attributes named as in pprof. *out (uncompressed protobuf) is
 * malloc'ed. Exporter thread. */
int pn_otlp_encode(const pn_profile *p, const pn_otlp_opts *o, uint8_t **out, size_t *len,
                   pn_error *e);

/* m as OTLP/JSON (otlp_json.c): *out malloc'ed, not NUL-counted in *len. */
struct ProtobufCMessage;
int pn_otlp_json(const struct ProtobufCMessage *m, char **out, size_t *len, pn_error *e);

/* Parses n hex digits (either case) into n/2 bytes; 0, or -1 when
 * malformed or all zero (an invalid trace or span id). */
int pn_otlp_parse_id(const char *hex, size_t n, uint8_t *out);

#endif
