/* The bindings' report in the core (issue 27): their options made into a
 * job (selections, folders by type, default page, title and view) and the
 * run report written at stop, with what it says. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "files.h"
#include "pyroscope_report.h"

static void test_selections(void)
{
    const pn_label items[] = {{NULL, "a=1, b = 2=3"}, {"c", "x,y"}, {NULL, "d="}};
    pn_label *l = NULL;
    size_t n = 0;
    pn_error e = {0};
    CHECK_EQ_INT(pn_report_pairs_parse(items, 3, "filter", &l, &n, &e), 0);
    CHECK_EQ_INT(n, 4);
    if (n == 4) {
        CHECK_STR(l[0].key, "a");
        CHECK_STR(l[0].value, "1");
        CHECK_STR(l[1].key, "b"); /* keys trimmed, split at the first '=' */
        CHECK_STR(l[1].value, " 2=3");
        CHECK_STR(l[2].key, "c"); /* a pair is taken as is */
        CHECK_STR(l[2].value, "x,y");
        CHECK_STR(l[3].value, "");
    }
    pn_report_pairs_free(l, n);
    const pn_label bad[] = {{NULL, "a=1,phase"}};
    CHECK_EQ_INT(pn_report_pairs_parse(bad, 1, "filter", &l, &n, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_STR(e.msg, "filter: expected KEY=VALUE, got \"phase\"");
    const pn_label no_key[] = {{NULL, " =v"}};
    CHECK_EQ_INT(pn_report_pairs_parse(no_key, 1, "diff", &l, &n, &e), -1);
    CHECK_STR(e.msg, "diff: expected KEY=VALUE, got \" =v\"");
    const pn_label empty_key[] = {{"", "v"}};
    CHECK_EQ_INT(pn_report_pairs_parse(empty_key, 1, "filter", &l, &n, &e), -1);
    CHECK_STR(e.msg, "filter: expected KEY=VALUE, got \"=v\"");
}

/* A folder with two cpu profiles and one wall profile. */
static void make_folder(char *dir, size_t cap)
{
    pn_test_tmpdir("report-options", dir, cap);
    pn_test_write_profile(dir, "app-cpu-10-20.pb", "cpu", "cpu_one");
    pn_test_write_profile(dir, "app-cpu-20-30.pb", "cpu", "cpu_two");
    pn_test_write_profile(dir, "app-wall-10-20.pb", "wall", "wall_fn");
}

static void test_folder_by_type(void)
{
    char dir[128], want[300];
    make_folder(dir, sizeof dir);
    const char *paths[] = {dir};
    const pn_label filter[] = {{"route", "/a b"}};
    const pn_label a[] = {{NULL, "k=1"}}, b[] = {{NULL, "k=2,j=3"}};
    pn_report_options o = {.caller = "writeReport", .paths = paths, .npaths = 1,
                           .filter = filter, .nfilter = 1, .group_by = "route", .diff = 1,
                           .diff_a = a, .ndiff_a = 1, .diff_b = b, .ndiff_b = 1};
    pn_report_job j;
    pn_error e = {0};
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), 0);
    CHECK_STR(j.type, "cpu"); /* the time profile first */
    CHECK_EQ_INT(j.nother_types, 1);
    if (j.nother_types == 1)
        CHECK_STR(j.other_types[0], "wall");
    CHECK_EQ_INT(j.r.npaths, 2);
    snprintf(want, sizeof want, "%s/flamegraph.html", dir);
    CHECK_STR(j.r.html, want);
    CHECK_STR(j.r.title, strrchr(dir, '/') + 1);
    CHECK_EQ_INT(j.r.top, PN_REPORT_DEFAULT_TOP);
    CHECK_STR(j.r.view, "filter=route%3D%2Fa+b&group=route&diff=&a=k%3D1&b=k%3D2%2Cj%3D3");
    o.diff = 0;
    o.group_by = NULL;
    o.filter = NULL;
    o.nfilter = 0;
    pn_report_job_clear(&j);

    /* the folder's source label is the folder (diff two folders by it) */
    const pn_label by_source[] = {{"source", dir}};
    o.filter = by_source;
    o.nfilter = 1;
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), 0);
    pn_report_job_run(&j);
    CHECK_EQ_INT(j.rc, 0);
    CHECK_EQ_INT(j.profiles, 2);
    CHECK(j.text && strstr(j.text, "cpu_one") && strstr(j.text, "cpu_two"));
    CHECK(access(want, F_OK) == 0);
    pn_report_job_clear(&j);
    o.filter = NULL;
    o.nfilter = 0;

    o.type = "wall";
    o.has_top = 1;
    o.top = 0;
    o.no_output = 1;
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), 0);
    CHECK_STR(j.type, "wall");
    CHECK(j.r.html == NULL);
    CHECK_EQ_INT(j.r.top, 0);
    CHECK_EQ_INT(j.nother_types, 1);
    if (j.nother_types == 1)
        CHECK_STR(j.other_types[0], "cpu");
    pn_report_job_run(&j);
    CHECK_EQ_INT(j.rc, 0);
    CHECK_EQ_INT(j.profiles, 1);
    pn_report_job_clear(&j);

    /* a type no page has is a sample type: none here */
    o.type = "alloc_space";
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), 0);
    pn_report_job_run(&j);
    CHECK_EQ_INT(j.rc, -1);
    CHECK_EQ_INT(j.err.code, PN_EINVAL);
    snprintf(want, sizeof want, "type: no alloc_space profiles in %s (there are: cpu, wall)", dir);
    CHECK_STR(j.err.msg, want);
    pn_report_job_clear(&j);
    pn_test_rm_dir(dir);
}

static void test_files_and_errors(void)
{
    char dir[128], file[200], missing[200], want[300];
    make_folder(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/app-cpu-10-20.pb", dir);
    snprintf(missing, sizeof missing, "%s/nothing", dir);
    const char *paths[] = {file};
    pn_report_options o = {.caller = "write_report", .paths = paths, .npaths = 1,
                           .title = "T"};
    pn_report_job j;
    pn_error e = {0};
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), 0);
    snprintf(want, sizeof want, "%s/flamegraph.html", dir); /* beside the file */
    CHECK_STR(j.r.html, want);
    CHECK_STR(j.r.title, "T");
    CHECK(j.type == NULL);
    CHECK_STR(j.r.view, "");
    pn_report_job_clear(&j);

    paths[0] = missing;
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), -1);
    snprintf(want, sizeof want, "write_report: %s: no such file or folder", missing);
    CHECK_STR(e.msg, want);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    paths[0] = file;
    o.has_top = 1;
    o.top = -1;
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), -1);
    CHECK_STR(e.msg, "top: a whole number >= 0");
    o.has_top = 0;
    const pn_label bad[] = {{NULL, "phase"}};
    o.filter = bad;
    o.nfilter = 1;
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), -1);
    CHECK_STR(e.msg, "filter: expected KEY=VALUE, got \"phase\"");
    o.filter = NULL;
    o.nfilter = 0;

    char empty[128];
    pn_test_tmpdir("report-empty", empty, sizeof empty);
    paths[0] = empty;
    o.caller = NULL;
    CHECK_EQ_INT(pn_report_job_prepare(&j, &o, &e), -1);
    snprintf(want, sizeof want, "no profiles (.pb or .pb.gz files) in %s", empty);
    CHECK_STR(e.msg, want);
    rmdir(empty);
    pn_test_rm_dir(dir);
}

/* ------------------------------------------------------------ run report */

static char logged[8192];

static void capture(void *ud, int level, const char *msg)
{
    (void)ud;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%d %s\n", level, msg);
}

static void test_run_report(void)
{
    char dir[128], want[400];
    pn_test_tmpdir("run-report", dir, sizeof dir);
    pn_test_write_profile(dir, "app-cpu-1-2.pb", "cpu", "earlier_run"); /* left out */
    pn_error e = {0};
    pn_run_report q = {.app = "shop", .top = 5};
    pn_run_report_result r;
    pn_log_set_handler(capture, NULL);
    pn_log_set_level(PN_LOG_DEBUG);

    CHECK_EQ_INT(pn_folder_run_begin(dir, &e), 0);
    char name[64];
    for (int i = 0; i < PN_RUN_MAX_FILES + 1; i++) {
        snprintf(name, sizeof name, "app-cpu-%d-%d.pb", 100 + i, 101 + i);
        pn_test_write_profile(dir, name, "cpu", "this_run");
    }
    pn_test_write_profile(dir, "app-heap-100-110.pb", "inuse_space", "heap_fn");
    FILE *bad = fopen(strcat(strcpy(want, dir), "/app-alloc-100-110.pb"), "w");
    fputs("not a profile", bad);
    fclose(bad);
    logged[0] = 0;
    pn_run_report_write(&q, &r);
    CHECK_EQ_INT(r.ran, 1);
    CHECK_EQ_INT(r.pages, 3);
    CHECK_EQ_INT(r.written, 2); /* the unreadable page leaves the others */
    CHECK_EQ_INT(r.profiles, PN_RUN_MAX_FILES + 1);
    CHECK(r.text && strstr(r.text, "this_run") && !strstr(r.text, "earlier_run"));
    snprintf(want, sizeof want, "20 the cpu flame graph covers the last %d of the %d profiles "
             "this run wrote\n20 %d profiles in %s, flame graph: %s/flamegraph.html\n",
             PN_RUN_MAX_FILES, PN_RUN_MAX_FILES + 1, PN_RUN_MAX_FILES, dir, dir);
    CHECK(strstr(logged, want) != NULL);
    snprintf(want, sizeof want, "20 1 profile in %s, flame graph: %s/flamegraph-heap.html\n",
             dir, dir);
    CHECK(strstr(logged, want) != NULL);
    CHECK(strstr(logged, "40 cannot write the flame graph: ") != NULL);
    CHECK(r.said && strstr(r.said, "cannot write the flame graph") != NULL);
    size_t len = 0;
    snprintf(want, sizeof want, "%s/flamegraph.html", dir);
    char *page = (char *)pn_test_read_file(want, &len);
    CHECK(page && memmem(page, len, "shop (cpu)", 10) != NULL);
    free(page);
    pn_run_report_result_free(&r);

    /* ended: a second stop says nothing */
    logged[0] = 0;
    pn_run_report_write(&q, &r);
    CHECK_EQ_INT(r.ran, 0);
    CHECK_STR(logged, "");
    pn_run_report_result_free(&r);

    /* a run that wrote nothing; quiet: said only */
    CHECK_EQ_INT(pn_folder_run_begin(dir, &e), 0);
    q.failed = 2;
    q.quiet = 1;
    pn_run_report_write(&q, &r);
    snprintf(want, sizeof want, "no profiles were written to %s: writing failed 2 times (the "
             "errors are above), so there is no flame graph\n", dir);
    CHECK_STR(r.said, want);
    CHECK_STR(logged, "");
    pn_run_report_result_free(&r);
    CHECK_EQ_INT(pn_folder_run_begin(dir, &e), 0);
    q.failed = 0;
    q.quiet = 0;
    pn_run_report_write(&q, &r);
    CHECK(strstr(logged, "in this run (it ran too briefly") != NULL);
    pn_run_report_result_free(&r);
    pn_log_set_handler(NULL, NULL);
    pn_test_rm_dir(dir);
}

TEST_MAIN(T(test_selections), T(test_folder_by_type), T(test_files_and_errors),
          T(test_run_report))
