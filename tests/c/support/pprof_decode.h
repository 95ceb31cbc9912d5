/* Test helpers for reading encoded pprof profiles back: gunzip + unpack,
 * string and id lookups, and a structural check of a profile's tables. */
#ifndef PN_PPROF_DECODE_H
#define PN_PPROF_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pn_pb_profile;
typedef Perftools__Profiles__Sample pn_pb_sample;
typedef Perftools__Profiles__Location pn_pb_location;
typedef Perftools__Profiles__Function pn_pb_function;

/* Gunzip (or take as is) and unpack; NULL after printing why. Free with
 * pn_pprof_free. *raw_len (if not NULL) gets the uncompressed size. */
pn_pb_profile *pn_pprof_decode(const uint8_t *data, size_t len, size_t *raw_len);
void pn_pprof_free(pn_pb_profile *p);

/* string_table[idx], or NULL when idx is out of range. */
const char *pn_pprof_str(const pn_pb_profile *p, int64_t idx);
/* By id (ids need not be positions); NULL when absent. */
const pn_pb_location *pn_pprof_location(const pn_pb_profile *p, uint64_t id);
const pn_pb_function *pn_pprof_function(const pn_pb_profile *p, uint64_t id);
/* Value of the string label `key` of sample s, or NULL. */
const char *pn_pprof_label(const pn_pb_profile *p, const pn_pb_sample *s, const char *key);
/* Name of the function at s's depth d (0 = leaf), or NULL. */
const char *pn_pprof_frame_name(const pn_pb_profile *p, const pn_pb_sample *s, size_t d);
/* "leaf;...;root" of function names into buf; returns buf. */
char *pn_pprof_stack(const pn_pb_profile *p, const pn_pb_sample *s, char *buf, size_t cap);

/* Structural rules: string 0 is "", strings unique; function and location
 * ids unique and non-zero; every reference (sample -> location -> function
 * -> string, label -> string) resolves; and, when `minimal`, every string,
 * function and location is used by something. Returns the number of
 * violations, each printed. */
int pn_pprof_check(const pn_pb_profile *p, int minimal);

#endif
