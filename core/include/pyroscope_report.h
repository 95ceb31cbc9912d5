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

/* A merged view of one or more pprof files: stacks (root first, function
 * names only) with their first sample value summed. */
typedef struct pn_report pn_report;

pn_report *pn_report_new(void);
void pn_report_free(pn_report *r);
/* Add a .pb/.pb.gz profile, or every such file in a folder. */
int pn_report_add_path(pn_report *r, const char *path, pn_error *e);
int pn_report_add_buffer(pn_report *r, const uint8_t *data, size_t len, pn_error *e);
size_t pn_report_profiles(const pn_report *r);
/* Write a self-contained interactive flame graph (no network). */
int pn_report_write_html(const pn_report *r, const char *title, const char *out_path,
                         pn_error *e);
/* Print the top n functions by self and total value. */
int pn_report_write_top(const pn_report *r, FILE *out, size_t n, pn_error *e);

#ifdef __cplusplus
}
#endif
#endif
