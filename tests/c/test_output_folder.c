/* The output folder in core/report (issue 27): file names read back, the
 * listing, the pages per profile type and the run report. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pyroscope_report.h"

static void touch(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static void test_name_type(void)
{
    static const char *const cases[][2] = {
        {"app-cpu-1700000000-1700000010.pb.gz", "cpu"},
        {"my-app.one-wall-1-2.3.pb.gz", "wall"},
        {"a-heap-10-20-2.pb", "heap"},
        {"a-b-c-heap_live-10-20.1-4.pb.gz", "heap_live"},
        {"random.pb.gz", "profile"},
        {"app-cpu-1-x.pb.gz", "profile"},
        {"app-cpu-1-2.pb.gz.tmp", "profile"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pn_folder_name_type(cases[i][0], buf, sizeof buf);
        CHECK_STR(buf, cases[i][1]);
    }
}

static void test_pages_and_run(void)
{
    char dir[] = "/tmp/pn-folder-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    touch(dir, "a-wall-1-2.pb.gz");
    touch(dir, "a-heap-1-2.pb.gz");
    touch(dir, ".a-cpu-1-2.pb.gz.tmp");
    touch(dir, "notes.txt");
    pn_error e;
    pn_folder_pages p;
    CHECK_EQ_INT(pn_folder_pages_read(dir, 0, &p, &e), 0);
    CHECK_EQ_INT(p.n, 2);
    if (p.n == 2) {
        CHECK_STR(p.pages[0].type, "wall");
        CHECK_STR(p.pages[0].page, "flamegraph.html");
        CHECK_STR(p.pages[1].page, "flamegraph-heap.html");
        CHECK_EQ_INT(p.pages[1].npaths, 1);
    }
    pn_folder_pages_free(&p);

    /* The run: only what was written since begin, the newest PN_RUN_MAX_FILES. */
    CHECK_EQ_INT(pn_folder_run_begin(dir, &e), 0);
    char name[64];
    for (int i = 0; i < PN_RUN_MAX_FILES + 5; i++) {
        snprintf(name, sizeof name, "a-cpu-%d-%d.pb.gz", 1000 + i, 1010 + i);
        touch(dir, name);
    }
    CHECK_EQ_INT(pn_folder_run_end(&p, &e), 0);
    CHECK_EQ_INT(p.n, 1);
    if (p.n == 1) {
        CHECK_STR(p.pages[0].page, "flamegraph.html");
        CHECK_EQ_INT(p.pages[0].total, PN_RUN_MAX_FILES + 5);
        CHECK_EQ_INT(p.pages[0].npaths, PN_RUN_MAX_FILES);
        CHECK(strstr(p.pages[0].paths[0], "a-cpu-1005-1015") != NULL);
    }
    pn_folder_pages_free(&p);
    CHECK_EQ_INT(pn_folder_run_end(&p, &e), 0); /* ended: nothing */
    CHECK_EQ_INT(p.n, 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

TEST_MAIN(T(test_name_type), T(test_pages_and_run))
