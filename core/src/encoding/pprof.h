/* pprof encoding and gzip. Core and tests only. */
#ifndef PN_PPROF_H
#define PN_PPROF_H

#include "pyroscope_native.h"
#include "aggregation/profile.h"

/* ----------------------------------------------------------------- pprof */

typedef struct {
    pn_value_type sample_types[PN_MAX_VALUES];  /* one per period value */
    pn_value_type period_type;
    int64_t period;             /* e.g. 1e9/hz for cpu */
    const pn_label *extra_labels; /* added to every sample (e.g. pid) */
    size_t n_extra;
    size_t max_samples;         /* per profile, default 16000 */
    size_t max_bytes;           /* uncompressed per profile, default 4 MiB */
} pn_encode_opts;

void pn_encode_opts_default(pn_encode_opts *o);
/* Defaults, with the sample types, period and extra labels of p. */
void pn_encode_opts_from_profile(pn_encode_opts *o, const pn_profile *p);

/* Receives each encoded profile (gzip) in turn; return 0 to continue. */
typedef int (*pn_profile_sink)(void *ud, const uint8_t *gz, size_t len,
                               size_t nsamples);

/* Encode a profile (a sealed period) into one or more gzip'ed pprof profiles,
 * splitting so each respects max_samples and max_bytes. Samples whose values
 * are all zero are skipped. Exporter thread. Returns the number of profiles
 * emitted, or -1. */
int pn_pprof_encode(const pn_profile *p, const pn_encode_opts *o,
                    pn_profile_sink sink, void *ud, pn_error *e);

/* gzip a buffer (zlib; level in gzip.c). *out is malloc'ed. */
int pn_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len,
            pn_error *e);
/* gunzip (or pass through data that is not gzip); *out is malloc'ed. */
int pn_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out,
              size_t *out_len, pn_error *e);

#endif
