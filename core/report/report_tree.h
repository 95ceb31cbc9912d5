/* The merged call tree behind pn_report, shared by the reader (report.c),
 * the selection (selection.c) and the writers (flamegraph.c, top.c,
 * breakdown.c, diff.c). Internal to the core. */
#ifndef PN_REPORT_TREE_H
#define PN_REPORT_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyroscope_native.h"
#include "pyroscope_report.h"

#define PN_REPORT_ROOT 0u          /* node index of the root ("all") */
#define PN_REPORT_NONE UINT32_MAX  /* no node / no name */
/* The value a selection names to mean "samples without this label", as the
 * breakdown shows them (`--filter span_id=(none)`, the page's "(none)" row). */
#define PN_REPORT_NO_VALUE "(none)"

/* Defaults of the bounds a hostile or huge input runs into. */
#define PN_REPORT_MAX_PROFILE_BYTES ((size_t)64 << 20) /* one decoded profile */
#define PN_REPORT_MAX_DEPTH 4096u      /* deeper stacks keep their root end */
#define PN_REPORT_MAX_NODES (1u << 22) /* call-tree nodes over all profiles */
#define PN_REPORT_MAX_NAMES (1u << 22) /* distinct strings (names, files, labels) */
#define PN_REPORT_MAX_HIDDEN 16u       /* files pn_report_hide_root_files takes */

/* The flame graph folds the smallest frames into their callers beyond this
 * many nodes, so the page stays a few MiB and quick to draw. */
#define PN_HTML_MAX_NODES 200000u

/* A function is a name in a file: two `work`s in two modules stay apart. */
typedef struct {
    uint32_t name;          /* index into pn_report.names */
    uint32_t file;          /* index into pn_report.names; 0 ("") unknown */
    uint32_t line;          /* its start line, else the smallest line seen */
    uint32_t hidden;        /* its file is one of pn_report_hide_root_files' */
} pn_report_func;

/* One call path from the root. total counts every sample passing through the
 * node, self those that end in it, so total = self + children's totals.
 * total/self (and the _n sample counts) hold the current selection
 * (pn_report_select); every sample until one is made. */
typedef struct {
    uint32_t func;          /* index into pn_report.funcs */
    uint32_t parent;        /* PN_REPORT_NONE for the root */
    uint32_t first_child;   /* children in insertion order, linked */
    uint32_t next_sibling;
    uint32_t depth;         /* the root is 0 */
    uint32_t line;          /* smallest line seen in this frame, 0 unknown */
    int64_t total, self;    /* first sample type */
    int64_t total_n, self_n; /* samples */
} pn_report_node;

/* The samples of one stack (its leaf node) under one label set in one
 * profile, summed: the page's timeline selects records by profile. */
typedef struct {
    uint32_t node;
    uint32_t lset;          /* index into pn_report.lset_off */
    int64_t value;          /* first sample type */
    int64_t count;          /* the "samples" sample type, else one per sample */
    uint32_t prof;          /* index into pn_report.prof_time (merge order) */
} pn_report_rec;

/* Open addressing: ids into one of the tables below, or PN_REPORT_NONE. */
typedef struct {
    uint32_t *slots;
    uint32_t mask;
} pn_report_slots;

/* A report is used by one thread at a time (the caller's); nothing in it is
 * shared. */
struct pn_report {
    /* The sample type to report (pn_report_set_type); NULL: the first
     * profile's first. Profiles without it are skipped and counted. */
    char *want_type;
    uint64_t skipped_profiles;
    int in_folder;          /* reading a folder: other types skipped, not refused */
    /* Interned strings; names[0] is "" (the root's name). */
    char **names;
    uint32_t nnames;
    size_t names_cap;
    pn_report_slots name_ix;

    pn_report_func *funcs;  /* funcs[0] is the root's */
    uint32_t nfuncs;
    size_t funcs_cap;
    pn_report_slots func_ix;

    pn_report_node *nodes;  /* nodes[0] is the root; parents precede children */
    uint32_t nnodes;
    size_t nodes_cap;
    pn_report_slots node_ix;

    /* Label sets: set i is the (key, value) name pairs lab[lset_off[i] ..
     * lset_off[i + 1]), sorted; set 0 is empty. */
    uint32_t *lab;
    size_t nlab, lab_cap;
    uint32_t *lset_off;
    uint32_t nlsets;
    size_t lsets_cap;
    pn_report_slots lset_ix;

    pn_report_rec *recs;
    uint32_t nrecs;
    size_t recs_cap;
    pn_report_slots rec_ix;

    char *hidden[PN_REPORT_MAX_HIDDEN]; /* files whose root frames are hidden */
    uint32_t nhidden;

    int selected;           /* node values hold a selection, not everything */
    uint8_t *lset_sel;      /* per label set, 1 if selected; NULL: all */

    char *cwd;              /* at pn_report_new: paths under it are shown relative */
    char *sample_type;      /* of sample_type[0], from the first profile */
    char *sample_unit;      /* that has one; NULL until then */
    size_t profiles;        /* profiles merged */
    int64_t *prof_time;     /* per profile: time_nanos, duration_nanos */
    size_t prof_cap;
    uint64_t samples;       /* samples read (the "samples" values) */
    uint64_t truncated_stacks;
    uint64_t invalid_utf8;  /* strings whose bad bytes became U+FFFD */

    /* Bounds, set to the defaults above by pn_report_new; tests lower them. */
    size_t max_profile_bytes;
    uint32_t max_depth;
    uint32_t max_nodes;
    uint32_t max_names;
    size_t max_page_recs;   /* the page's records (PN_HTML_MAX_RECS) */
};

/* Node indices in depth-first order, root first, each node's children in
 * display-name order. *out is malloc'ed and holds r->nnodes entries. */
int pn_report_preorder(const pn_report *r, uint32_t **out, pn_error *e);

/* Each function's name as shown: qualified with its file where two
 * functions share a name. *out holds r->nfuncs malloc'ed strings; free with
 * pn_report_display_free. */
int pn_report_display_names(const pn_report *r, char ***out, pn_error *e);
void pn_report_display_free(const pn_report *r, char **names);
/* A file path as shown: relative to the working directory when under it. */
const char *pn_report_shown_file(const pn_report *r, const char *path);

/* The name id of s if the report holds it, else PN_REPORT_NONE. */
uint32_t pn_report_name_find(const pn_report *r, const char *s);
/* Whether label set `lset` passes filters (keys ANDed, a key's values ORed). */
int pn_report_lset_matches(const pn_report *r, uint32_t lset, const pn_label *filters,
                           size_t n);
/* The value of key (a name id) in label set lset, or PN_REPORT_NONE. */
uint32_t pn_report_lset_value(const pn_report *r, uint32_t lset, uint32_t key);

/* Length of the well-formed UTF-8 sequence at s (n > 0 bytes left) with its
 * code point in *cp, or 0 when s does not start one. */
size_t pn_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);

/* A value in the report's unit, scaled for reading (1.50 s, 12.00 ms); the
 * page's fmt() formats the same way. */
void pn_report_format_value(char *buf, size_t len, int64_t v, const char *unit);
/* What a column of values holds: "cpu time", "alloc bytes", "samples". */
const char *pn_report_unit_word(const char *unit);

/* Per function (indexed by function id): self and total over the current
 * selection, the total counting a recursive function once per stack. */
typedef struct {
    int64_t self, total, total_n;
} pn_report_tally_row;
int pn_report_tally(const pn_report *r, pn_report_tally_row *t, pn_error *e);
/* "file:line" of a function, or "" when its file is unknown. */
void pn_report_where(const pn_report *r, uint32_t func, char *buf, size_t len);
/* s with control characters as '?', for a terminal. */
int pn_report_put_text(FILE *out, const char *s);

/* The page's records per time bucket (timeline.c): a bucket is one or more
 * consecutive profiles, so that at most max_recs records are written when
 * that allows two buckets or more. page_node maps report nodes to the
 * page's. */
#define PN_HTML_MAX_RECS 400000u
typedef struct {
    uint32_t node, lset, bucket;
    int64_t value, count;
} pn_page_rec;
typedef struct {
    int64_t start, end;     /* nanoseconds, as the profiles' time_nanos */
    uint32_t profiles;
} pn_page_bucket;
typedef struct {
    pn_page_rec *recs;
    size_t nrecs;
    pn_page_bucket *buckets;
    size_t nbuckets;
} pn_page_timeline;
int pn_report_timeline(const pn_report *r, const uint32_t *page_node, size_t max_recs,
                       pn_page_timeline *out, pn_error *e);
void pn_report_timeline_free(pn_page_timeline *t);

/* pn_report_write_html with an explicit node budget (tests use small ones). */
int pn_report_write_html_max(const pn_report *r, const char *title, const char *view,
                             const char *out_path, uint32_t max_nodes, pn_error *e);

#endif
