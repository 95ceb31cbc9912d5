/* The neutral form of one sealed period: what the queue carries and every
 * exporter encodes in its receiver's format (pprof, OTLP).
 *
 * A compact, immutable copy made by the flusher right after the seal, so
 * the store's period can be recycled at once and a queue backed up by a
 * slow server holds only what the periods contained. Owned by the queue
 * once pushed; read by the exporter thread. */
#ifndef PN_PROFILE_H
#define PN_PROFILE_H

#include "pyroscope_native.h"

typedef struct {
    uint32_t stack;             /* index into stacks */
    uint32_t labels;            /* index into lsets (0: none) */
    uint64_t tid;               /* 0: not reported */
    uint32_t thread_name;       /* string id, 0 ("") when not reported */
    int64_t values[PN_MAX_VALUES];
} pn_profile_sample;

typedef struct {
    uint32_t off, n;            /* frames[off..off+n) / pairs[2*..] */
} pn_profile_span;

typedef struct pn_profile {
    /* What it is and where it goes (strings owned, NUL-terminated). */
    char *app_name;
    char *profile_type;         /* "cpu", "wall", ...: file names, logs */
    int64_t start_ns, end_ns;   /* CLOCK_REALTIME */
    uint32_t sample_rate;       /* Hz */
    int nvalues;
    pn_value_type sample_types[PN_MAX_VALUES];
    pn_value_type period_type;
    int64_t period;
    pn_label *extra_labels;     /* added to every sample (pid, static tags) */
    size_t n_extra;

    /* Tables; ids as in the period they were copied from. */
    char *text;                 /* every string, each NUL-terminated */
    uint32_t *str_off;          /* string id -> offset in text; nstr + 1 */
    uint32_t nstr;
    uint32_t *frames;           /* frame id -> name sid, file sid, line */
    uint32_t nframes;
    pn_frame_id *stack_frames;
    pn_profile_span *stacks;
    uint32_t nstacks;
    uint32_t *pairs;            /* key sid, value sid, ... */
    pn_profile_span *lsets;     /* n counts pairs */
    uint32_t nlsets;
    pn_profile_sample *samples;
    uint32_t nsamples;
} pn_profile;

/* Metadata the flusher gives a profile (copied). */
typedef struct {
    const char *app_name;
    const char *profile_type;
    uint32_t sample_rate;
    int nvalues;
    const pn_value_type *sample_types;
    pn_value_type period_type;
    int64_t period;
    const pn_label *extra_labels;
    size_t n_extra;
} pn_profile_meta;

/* Copy a sealed period (store.c, which knows its tables). NULL with e
 * filled when out of memory. Flusher thread. */
struct pn_period;
pn_profile *pn_profile_from_period(const struct pn_period *p, const pn_profile_meta *m,
                                   pn_error *e);
void pn_profile_free(pn_profile *p);

static inline const char *pn_profile_str(const pn_profile *p, uint32_t sid, size_t *len)
{
    if (sid >= p->nstr) {
        *len = 0;
        return "";
    }
    *len = p->str_off[sid + 1] - p->str_off[sid] - 1;
    return p->text + p->str_off[sid];
}

#endif
