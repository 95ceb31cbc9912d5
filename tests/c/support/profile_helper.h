/* Test helpers for the encoder, which takes a pn_profile (the neutral form
 * of a sealed period): build one from a period and the encoder options a
 * test already has, or encode a period in one call. */
#ifndef PN_TEST_PROFILE_HELPER_H
#define PN_TEST_PROFILE_HELPER_H

#include "pyroscope_native.h"
#include "aggregation/profile.h"
#include "encoding/pprof.h"

/* A profile copied from period p, its metadata taken from o (the defaults
 * when o is NULL): sample types for the period's values, period type,
 * period. Extra labels are NOT copied (the encoder reads them from the
 * options, and a test may pass deliberately broken ones). app_name "test",
 * profile_type "cpu". NULL (message printed, e filled) on failure. Free
 * with pn_profile_free. */
pn_profile *pn_test_profile(const pn_period *p, const pn_encode_opts *o, pn_error *e);

/* pn_pprof_encode on the profile of p (see pn_test_profile), with options
 * o passed through unchanged; p NULL passes a NULL profile. */
int pn_test_encode(const pn_period *p, const pn_encode_opts *o, pn_profile_sink sink,
                   void *ud, pn_error *e);

#endif
