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
/* A file of folder: source=<folder>, and skipped (not refused) without
 * the report's type, as pn_report_add_path does in a folder. */
int pn_report_add_folder_file(pn_report *r, const char *path, const char *folder, pn_error *e);
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
    /* Optional, parallel to paths: paths[i] is a file of folder sources[i]
     * (its source label; a profile without the report's type is skipped, as
     * in a folder). NULL: each path is its own source. */
    const char *const *sources;
    /* Optional: the error (PN_EINVAL) when no profile was read. */
    const char *none_error;
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
    /* Set by pn_report_job_prepare: the folders' page type shown (or the
     * sample type asked for; NULL: files only), and their other types. */
    const char *type;
    const char *const *other_types;
    size_t nother_types;
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

/* ------------------------------------------- a binding's report options */

/* A selection as the bindings take it: items {key, value}, or {NULL,
 * "k=v[,k2=v2...]"} (split at each ',' and then at the first '='; keys
 * trimmed). */
#define PN_REPORT_DEFAULT_TOP 20
/* What writeReport / write_report / `report` are asked, in the core's
 * names; each binding maps its own spelling and types to it, and
 * pn_report_job_prepare does the rest once:
 * - paths: profile files or folders; a folder gives its profiles of one
 *   type (pn_folder_pages): type when a page has that type, else the first
 *   page's (cpu, else wall); a type no page has is a sample type
 *   (pn_report_set_type) read from every profile. Files are read as given.
 * - output: the page (NULL: the first folder, or the first file's folder,
 *   plus the page's name; no_output: none); title (NULL: the paths' base
 *   names, ", "-joined); view from filter, group_by and diff.
 * - top: has_top ? top (>= 0) : PN_REPORT_DEFAULT_TOP.
 * Errors (PN_EINVAL, naming the option as the core names it: "filter:
 * expected KEY=VALUE, got \"x\"", "type: no wall profiles in DIR (there
 * are: cpu)", "top: a whole number >= 0"; path errors begin with caller). */
typedef struct {
    const char *caller;          /* e.g. "writeReport"; NULL: none */
    const char *const *paths;
    size_t npaths;
    const char *type;
    const char *output;
    int no_output;
    const char *title;
    const pn_label *filter;
    size_t nfilter;
    const char *group_by;
    int diff;                    /* compare diff_a with diff_b */
    const pn_label *diff_a, *diff_b;
    size_t ndiff_a, ndiff_b;
    int has_top;
    long long top;
    const char *const *hide_files;
    size_t nhide;
} pn_report_options;

/* Fills j (zeroed) from o: its request, type and other types, everything
 * copied into j. Lists folders (the calling thread); pn_report_job_run
 * then reads the profiles on any thread. On failure j is cleared. */
int pn_report_job_prepare(pn_report_job *j, const pn_report_options *o, pn_error *e);

/* The pairs of a selection (items as above) into *out (malloc'ed, each
 * key and value too; free with pn_report_pairs_free). what names the
 * option in errors. */
int pn_report_pairs_parse(const pn_label *items, size_t n, const char *what, pn_label **out,
                          size_t *nout, pn_error *e);
void pn_report_pairs_free(pn_label *pairs, size_t n);

/* ------------------------------------------------- the report command */

/* The words of `PROG report ...` (after "report"): PATH... [-o|--output HTML]
 * [--top N] [--title TITLE] [--type TYPE] [--filter KEY=VALUE]...
 * [--group-by KEY] [--diff [A B]] [-h|--help] ("--flag=value" too; "--"
 * ends the options). --diff takes the next words up to two before an
 * option: two selections, or none with exactly two paths (each path's
 * source label). o points into words and the arrays below. Errors
 * (PN_EINVAL) name the flag: "--top: \"-1\" is not a whole number >= 0". */
typedef struct {
    pn_report_options o;
    int help;                    /* -h or --help: nothing else is checked */
    const char **paths;          /* o.paths */
    pn_label *filter;            /* o.filter; the keys malloc'ed */
    pn_label diff[2];            /* o.diff_a, o.diff_b */
} pn_report_args;
int pn_report_args_parse(pn_report_args *a, const char *const *words, size_t n, pn_error *e);
void pn_report_args_free(pn_report_args *a);

/* The command: parsed, run as a job (pn_report_job_prepare, then run on
 * the calling thread), and what it says returned for the binding to print.
 * Touches nothing but c's data: any thread may run it. */
typedef struct {
    const char *prog;            /* in the usage ("python -m pyroscope"); its last word
                                    begins messages; NULL: "pyroscope-native" */
    int with_command;            /* words begin with the command: "report", or -h,
                                    --help, help (the usage); a program of one command */
    const char *const *words;
    size_t nwords;
    const char *const *hide_files; /* as pn_report_options (a launcher's frames) */
    size_t nhide;
} pn_report_command;
typedef struct {
    int status;                  /* 0 done; 1 a profile unreadable, the page unwritten;
                                    2 a usage error (the message, then the usage) */
    char *out, *err;             /* for stdout (the top table, "N profiles read, flame
                                    graph: PATH"), for stderr; malloc'ed, may be NULL */
} pn_report_command_result;
void pn_report_command_run(const pn_report_command *c, pn_report_command_result *r);
void pn_report_command_result_free(pn_report_command_result *r);

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
    char *dir; /* the folder read (a run's; NULL: no run) */
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

/* The run report written (at stop or exit): ends the run
 * (pn_folder_run_end) and writes each of its pages to <dir>/<page>,
 * titled "<app> (<type>)", saying how it went: "no profiles were written
 * to DIR ...", "the TYPE flame graph covers the last N of the M profiles
 * this run wrote", "N profiles in DIR, flame graph: OUT" (info) and
 * "cannot write the flame graph: ..." (error). Never fails: a page that
 * cannot be written leaves the others. Any thread (reads files). */
typedef struct {
    const char *app;                 /* NULL or "": "pyroscope-native" */
    const char *const *hide_files;   /* as pn_report_hide_root_files */
    size_t nhide;
    size_t top;                      /* the first page's top table (0: none) */
    unsigned long long failed;       /* the folder's failed writes, named when no profile was */
    int quiet;                       /* only into said, not pn_log */
} pn_run_report;
typedef struct {
    int ran;                         /* a run had begun */
    size_t pages, written, profiles;
    char *text;                      /* the first page's top table, or NULL */
    size_t text_len;
    char *said;                      /* what was logged, one message a line */
} pn_run_report_result;
void pn_run_report_write(const pn_run_report *q, pn_run_report_result *out);
void pn_run_report_result_free(pn_run_report_result *r);

#ifdef __cplusplus
}
#endif
#endif
