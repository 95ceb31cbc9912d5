/* One-call reports (pn_report_run): the sequence every CLI and binding
 * runs, read -> page -> selection -> text, in one place. */
#include <stdio.h>
#include <stdlib.h>

#include "pyroscope_report.h"

/* The text part: breakdown, then diff or top table, into a memory stream. */
static int write_text(pn_report *r, const pn_report_request *q, char **text, size_t *text_len,
                      pn_error *e)
{
    FILE *f = open_memstream(text, text_len);
    if (!f)
        return pn_fail(e, PN_ENOMEM, "out of memory building a report");
    int rc = 0;
    if (q->group_by)
        rc = pn_report_write_breakdown(r, f, q->group_by, e);
    if (rc == 0 && q->group_by && (q->diff || q->top > 0))
        fputc('\n', f);
    if (rc == 0 && q->diff)
        rc = pn_report_write_diff(r, f, q->top ? q->top : 20, q->diff_a, q->ndiff_a, q->diff_b,
                                  q->ndiff_b, e);
    else if (rc == 0 && q->top > 0)
        rc = pn_report_write_top(r, f, q->top, e);
    if (fclose(f) != 0 && rc == 0)
        rc = pn_fail(e, PN_ENOMEM, "out of memory building a report");
    return rc;
}

int pn_report_run(const pn_report_request *q, size_t *profiles, char **text, size_t *text_len,
                  pn_error *e)
{
    *profiles = 0;
    *text = NULL;
    *text_len = 0;
    if (!q || (q->npaths && !q->paths))
        return pn_fail(e, PN_EINVAL, "pn_report_run: a request is required");
    pn_report *r = pn_report_new();
    if (!r)
        return pn_fail(e, PN_ENOMEM, "out of memory building a report");
    int rc = q->nhide ? pn_report_hide_root_files(r, q->hide_files, q->nhide, e) : 0;
    if (rc == 0 && q->type)
        rc = pn_report_set_type(r, q->type, e);
    for (size_t i = 0; rc == 0 && i < q->npaths; i++)
        rc = q->sources && q->sources[i] ? pn_report_add_folder_file(r, q->paths[i], q->sources[i], e)
                                         : pn_report_add_path(r, q->paths[i], e);
    if (rc == 0 && q->none_error && pn_report_profiles(r) == 0)
        rc = pn_fail(e, PN_EINVAL, "%s", q->none_error);
    if (rc == 0 && q->html)
        rc = pn_report_write_html_view(r, q->title ? q->title : "pyroscope-native",
                                       q->view ? q->view : "", q->html, e);
    if (rc == 0)
        rc = pn_report_select(r, q->filters, q->nfilters, e);
    if (rc == 0 && (q->top > 0 || q->group_by || q->diff))
        rc = write_text(r, q, text, text_len, e);
    *profiles = pn_report_profiles(r);
    pn_report_free(r);
    if (rc != 0) {
        free(*text);
        *text = NULL;
        *text_len = 0;
    }
    return rc;
}

void *pn_report_job_keep(pn_report_job *j, void *block)
{
    if (!block)
        return NULL;
    if (j->nkept == j->capkept) {
        size_t cap = j->capkept ? 2 * j->capkept : 16;
        void **grown = realloc(j->kept, cap * sizeof *grown);
        if (!grown) {
            free(block);
            return NULL;
        }
        j->kept = grown;
        j->capkept = cap;
    }
    j->kept[j->nkept++] = block;
    return block;
}

void pn_report_job_run(pn_report_job *j)
{
    j->rc = pn_report_run(&j->r, &j->profiles, &j->text, &j->text_len, &j->err);
}

void pn_report_job_clear(pn_report_job *j)
{
    for (size_t i = 0; i < j->nkept; i++)
        free(j->kept[i]);
    free(j->kept);
    free(j->text);
    *j = (pn_report_job){0};
}
