/*
 * pyroscope-native reports: read pprof files (ours or anyone's) and write a
 * flame graph page or a top table. A library of its own: the CLIs and the
 * demo link it; the profiler itself never does.
 */
#ifndef PYROSCOPE_REPORT_H
#define PYROSCOPE_REPORT_H

#include <stdio.h>

#include "pyroscope_native.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------------- reports */

/* A merged view of one or more pprof files: stacks (root first, functions
 * keyed by name and file) with their first sample value and sample count
 * summed, per label set, so a report can be filtered and broken down by
 * labels (tags, span_name, span_id, thread_name, pid, source). */
typedef struct pn_report pn_report;

pn_report *pn_report_new(void);
void pn_report_free(pn_report *r);
/* Frames from the root end of each stack are dropped while their function's
 * file is one of these, or ends in "/" and one of these (a launcher's own
 * frames wherever it is installed, e.g. "pyroscope/cli.py", "runpy.py"); a
 * stack made only of such frames becomes the one frame "[launcher]". Call
 * before adding data. */
int pn_report_hide_root_files(pn_report *r, const char *const *files, size_t n,
                              pn_error *e);
/* Add a .pb/.pb.gz profile, or every such file in a folder. Each sample also
 * gets the label source=<path as given>. */
int pn_report_add_path(pn_report *r, const char *path, pn_error *e);
int pn_report_add_buffer(pn_report *r, const uint8_t *data, size_t len, pn_error *e);
size_t pn_report_profiles(const pn_report *r);
/* Report the values of sample type `type` ("cpu", "wall", "alloc_space",
 * "inuse_space", "alloc_objects", "inuse_objects", ...; NULL or "": the
 * first profile's first type). Profiles without it (a folder holds CPU and
 * memory profiles) are skipped and counted in pn_report_skipped. Before
 * adding data. */
int pn_report_set_type(pn_report *r, const char *type, pn_error *e);
size_t pn_report_skipped(const pn_report *r);
/* Restrict the outputs below to samples whose labels match every key of
 * filters (several values of one key: any of them). n == 0 selects all. */
int pn_report_select(pn_report *r, const pn_label *filters, size_t n, pn_error *e);
/* Write a self-contained interactive page (flame graph, label filters and
 * breakdown, top table, sandwich, diff; no network) of every sample. view
 * (may be NULL) is the initial state in the page's URL-fragment syntax,
 * e.g. "filter=route%3D%2Fcart&group=route". */
int pn_report_write_html(const pn_report *r, const char *title, const char *out_path,
                         pn_error *e);
int pn_report_write_html_view(const pn_report *r, const char *title, const char *view,
                              const char *out_path, pn_error *e);
/* Print the top n functions of the selection by self and total value. */
int pn_report_write_top(const pn_report *r, FILE *out, size_t n, pn_error *e);
/* Print the selection's total per value of label `key`. */
int pn_report_write_breakdown(const pn_report *r, FILE *out, const char *key, pn_error *e);
/* Print the top n functions by change of self share from selection a to
 * selection b (each as in pn_report_select). Leaves the selection at b. */
int pn_report_write_diff(pn_report *r, FILE *out, size_t n, const pn_label *a, size_t na,
                         const pn_label *b, size_t nb, pn_error *e);

/* ------------------------------------------------------- one-call reports */

/* What a CLI or binding asks for in one call: read paths (hidden root
 * files first), write the page to html (NULL: no page) with title and view
 * (NULL: "pyroscope-native", ""), select filters, then the text: the
 * breakdown by group_by (NULL: none), then the diff of diff_a against
 * diff_b when diff is set (top functions; 0: 20), else the top table (top
 * functions; 0: none). */
typedef struct {
    const char *const *paths;
    size_t npaths;
    const char *const *hide_files;
    size_t nhide;
    const char *type;           /* pn_report_set_type; NULL: the first */
    const char *html, *title, *view;
    const pn_label *filters;
    size_t nfilters;
    const char *group_by;
    int diff;
    const pn_label *diff_a, *diff_b;
    size_t ndiff_a, ndiff_b;
    size_t top;
} pn_report_request;

/* Runs q. On success *text is the malloc'ed text (NULL when none was
 * asked; free it) and *profiles the number of profiles read. Touches
 * nothing but q's data: any thread may run it. */
int pn_report_run(const pn_report_request *q, size_t *profiles, char **text, size_t *text_len,
                  pn_error *e);

/* A request that owns what it points to, with room for the result: for a
 * binding that copies its runtime's arguments (strings, arrays) and runs
 * the report on another thread. Zero it to start; keep hands a malloc'ed
 * block (a string, a list) to the job, which frees it in clear: it returns
 * block, or NULL (having freed it) when out of memory. run fills profiles,
 * text, rc and err; clear frees every kept block and the text (not j). */
typedef struct {
    pn_report_request r;
    size_t profiles;
    char *text;
    size_t text_len;
    int rc;
    pn_error err;
    void **kept;
    size_t nkept, capkept;
} pn_report_job;

void *pn_report_job_keep(pn_report_job *j, void *block);
void pn_report_job_run(pn_report_job *j);
void pn_report_job_clear(pn_report_job *j);

/* ---------------------------------------------------- the output folder */

/* The type in a name the folder exporter wrote,
 * <app>-<type>-<from>-<until>[.<part>][-<n>].pb[.gz], into buf; "profile"
 * for any other name. */
void pn_folder_name_type(const char *name, char *buf, size_t size);

/* A folder's profiles (*.pb, *.pb.gz; hidden names, the exporter's
 * temporary files, left out), in name order. A folder that cannot be read
 * lists nothing. */
typedef struct {
    char **names;
    size_t n;
} pn_folder_names;
int pn_folder_names_read(const char *dir, pn_folder_names *out, pn_error *e);
void pn_folder_names_free(pn_folder_names *l);

/* The profiles of one type and the page they make: flamegraph.html for
 * the time profile (cpu, else wall) when it comes first, else
 * flamegraph-<type>.html. Pages come cpu, wall, then by type. */
typedef struct {
    char *type;
    char *page;
    char **paths;  /* dir/name in name order: the newest npaths of total */
    size_t npaths, total;
} pn_folder_page;
typedef struct {
    pn_folder_page *pages;
    size_t n;
} pn_folder_pages;
/* Every profile of dir grouped into pages (max_files: the newest per page;
 * 0: all). */
int pn_folder_pages_read(const char *dir, size_t max_files, pn_folder_pages *out,
                         pn_error *e);
void pn_folder_pages_free(pn_folder_pages *p);

/* The run report: begin remembers dir's listing (at configure, with an
 * output_dir); end gives the pages of the files written since, at most
 * PN_RUN_MAX_FILES (an hour of 10 s periods) of the newest per page, and
 * forgets the run (none: no pages). Process-wide. */
#define PN_RUN_MAX_FILES 360
int pn_folder_run_begin(const char *dir, pn_error *e);
int pn_folder_run_end(pn_folder_pages *out, pn_error *e);

#ifdef __cplusplus
}
#endif
#endif
