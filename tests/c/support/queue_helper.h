/* Profiles and encodings for tests of the upload queue and the exporters:
 * real profiles built through a store (pn_store -> pn_period ->
 * pn_profile_from_period), and an `encode` callback for fake exporters that
 * returns payloads the test chose. */
#ifndef PN_QUEUE_HELPER_H
#define PN_QUEUE_HELPER_H

#include <stddef.h>
#include <stdint.h>

#include "pyroscope_native.h"
#include "export/exporter.h"

/* A cpu-like profile (values cpu/nanoseconds and samples/count, 100 Hz)
 * named app/type, whose period is [from_s, until_s] (unix seconds; they
 * come back unchanged as the uploads' from_s/until_s), with `nsamples`
 * distinct one-frame stacks "qh_fn_<i>" (values 10 ms * (i + 1), i + 1).
 * Built through a real store; NULL after printing why. */
pn_profile *qh_profile(const char *app, const char *type, int64_t from_s, int64_t until_s,
                       uint32_t nsamples);

/* A profile (cpu, no samples) carrying one payload per NULL-terminated
 * entry of `payloads`, as extra labels "qh.payload". qh_payload_encode
 * turns it into exactly those parts. */
pn_profile *qh_payload_profile(const char *app, int64_t from_s, int64_t until_s,
                               const char *const *payloads);
/* qh_payload_profile with one payload of `len` bytes 'z'. */
pn_profile *qh_sized_profile(const char *app, int64_t from_s, size_t len);

/* Append an extra label to p (before it is pushed). A "qh.encode_fail"
 * label makes qh_payload_encode fail with its value as the message. */
int qh_profile_add_label(pn_profile *p, const char *key, const char *value);

/* An exporter's encode: one part per "qh.payload" extra label of p, in
 * order (part = index), with app_name, profile_type, from/until and
 * sample_rate taken from p the way the default encoding does. Fails with
 * PN_EINVAL and the label's value as the message when p has a
 * "qh.encode_fail" label. Counts its calls in qh_payload_encodes. */
int qh_payload_encode(pn_exporter *self, const pn_profile *p, pn_upload ***parts,
                      size_t *nparts, pn_error *e);
extern volatile int qh_payload_encodes; /* atomic (__atomic builtins) */

/* One malloc'ed part with p's metadata and a copy of data[0..len). */
pn_upload *qh_upload_of(const pn_profile *p, const void *data, size_t len, uint32_t part);
void qh_free_parts(pn_upload **parts, size_t n);

/* Total bytes of the default (gzip'ed pprof) parts of p, and their count
 * in *nparts (may be NULL); (size_t)-1 when encoding fails. */
size_t qh_pprof_bytes(const pn_profile *p, size_t *nparts);

#endif
