/* Period -> profile for encoder tests (profile_helper.h). */
#include <stdio.h>

#include "profile_helper.h"
#include "aggregation/store.h"

pn_profile *pn_test_profile(const pn_period *p, const pn_encode_opts *o, pn_error *e)
{
    pn_encode_opts defaults;
    if (!o) {
        pn_encode_opts_default(&defaults);
        o = &defaults;
    }
    pn_profile_meta m = {
        .app_name = "test",
        .profile_type = "cpu",
        .sample_rate = 100,
        .nvalues = pn_period_nvalues(p),
        .sample_types = o->sample_types,
        .period_type = o->period_type,
        .period = o->period,
        .extra_labels = NULL,
        .n_extra = 0,
    };
    pn_profile *prof = pn_profile_from_period(p, &m, e);
    if (!prof)
        fprintf(stderr, "  pn_profile_from_period failed\n");
    return prof;
}

int pn_test_encode(const pn_period *p, const pn_encode_opts *o, pn_profile_sink sink,
                   void *ud, pn_error *e)
{
    if (!p)
        return pn_pprof_encode(NULL, o, sink, ud, e);
    pn_profile *prof = pn_test_profile(p, o, e);
    if (!prof)
        return -1;
    int rc = pn_pprof_encode(prof, o, sink, ud, e);
    pn_profile_free(prof);
    return rc;
}
