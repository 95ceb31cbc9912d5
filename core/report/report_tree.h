/* The merged call tree behind pn_report, shared by the reader (report.c)
 * and its two writers (flamegraph.c, top.c). Internal to the core. */
#ifndef PN_REPORT_TREE_H
#define PN_REPORT_TREE_H

#include <stdint.h>

#include "pyroscope_native.h"

#define PN_REPORT_ROOT 0u          /* node index of the root ("all") */
#define PN_REPORT_NONE UINT32_MAX  /* no node / no name */

/* Defaults of the bounds a hostile or huge input runs into. */
#define PN_REPORT_MAX_PROFILE_BYTES ((size_t)64 << 20) /* one decoded profile */
#define PN_REPORT_MAX_DEPTH 4096u      /* deeper stacks keep their root end */
#define PN_REPORT_MAX_NODES (1u << 22) /* call-tree nodes over all profiles */
#define PN_REPORT_MAX_NAMES (1u << 22) /* distinct function names */

/* The flame graph folds the smallest frames into their callers beyond this
 * many nodes, so the page stays a few MiB and quick to draw. */
#define PN_HTML_MAX_NODES 200000u

/* One call path from the root. total counts every sample passing through the
 * node, self those that end in it, so total = self + children's totals. */
typedef struct {
    uint32_t name;          /* index into pn_report.names */
    uint32_t parent;        /* PN_REPORT_NONE for the root */
    uint32_t first_child;   /* children in insertion order, linked */
    uint32_t next_sibling;
    uint32_t depth;         /* the root is 0 */
    int64_t total;
    int64_t self;
} pn_report_node;

/* A report is used by one thread at a time (the caller's); nothing in it is
 * shared. */
struct pn_report {
    /* Interned function names; names[0] is "" (the root's name). */
    char **names;
    uint32_t nnames, names_cap;
    uint32_t *name_slots;   /* open addressing: name index or NONE */
    uint32_t name_mask;

    pn_report_node *nodes;  /* nodes[0] is the root */
    uint32_t nnodes, nodes_cap;
    uint32_t *node_slots;   /* open addressing on (parent, name): node index */
    uint32_t node_mask;

    char *sample_type;      /* of sample_type[0], from the first profile */
    char *sample_unit;      /* that has one; NULL until then */
    size_t profiles;        /* profiles merged */
    uint64_t samples;       /* samples read (including zero-valued ones) */
    uint64_t truncated_stacks;

    /* Bounds, set to the defaults above by pn_report_new; tests lower them. */
    size_t max_profile_bytes;
    uint32_t max_depth;
    uint32_t max_nodes;
    uint32_t max_names;
};

/* Node indices in depth-first order, root first, each node's children in
 * name order. *out is malloc'ed and holds r->nnodes entries. */
int pn_report_preorder(const pn_report *r, uint32_t **out, pn_error *e);

/* pn_report_write_html with an explicit node budget (tests use small ones). */
int pn_report_write_html_max(const pn_report *r, const char *title,
                             const char *out_path, uint32_t max_nodes, pn_error *e);

#endif
