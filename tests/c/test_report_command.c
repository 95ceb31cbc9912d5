/* The `report` command line in the core (issue 27): its words parsed once
 * for the three bindings' CLIs (errors name the flag), and the command run,
 * returning its exit status and what it says on stdout and stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "files.h"
#include "pyroscope_report.h"

#define N(a) (sizeof(a) / sizeof *(a))

/* The words parsed; the error message ("" when they parse). */
static int parse(pn_report_args *a, const char *const *w, size_t n, char *msg, size_t cap)
{
    pn_error e = {0};
    int rc = pn_report_args_parse(a, w, n, &e);
    snprintf(msg, cap, "%s", rc ? e.msg : "");
    return rc;
}

static void test_options(void)
{
    const char *w[] = {"a", "--top", "5", "--filter", "k=v,w=x", "--filter=j=1=2", "b",
                       "-oout.html", "--title", "T", "--type=cpu", "--group-by", "g", "--",
                       "--top"};
    pn_report_args a;
    char msg[600];
    CHECK_EQ_INT(parse(&a, w, N(w), msg, sizeof msg), 0);
    CHECK_STR(msg, "");
    CHECK_EQ_INT(a.o.npaths, 3);
    if (a.o.npaths == 3) {
        CHECK_STR(a.o.paths[0], "a");
        CHECK_STR(a.o.paths[1], "b");
        CHECK_STR(a.o.paths[2], "--top"); /* after "--": a path */
    }
    CHECK(a.o.has_top && a.o.top == 5);
    CHECK_EQ_INT(a.o.nfilter, 2);
    if (a.o.nfilter == 2) {
        /* one label a flag, split at the first '=' */
        CHECK_STR(a.o.filter[0].key, "k");
        CHECK_STR(a.o.filter[0].value, "v,w=x");
        CHECK_STR(a.o.filter[1].key, "j");
        CHECK_STR(a.o.filter[1].value, "1=2");
    }
    CHECK_STR(a.o.output, "out.html");
    CHECK_STR(a.o.title, "T");
    CHECK_STR(a.o.type, "cpu");
    CHECK_STR(a.o.group_by, "g");
    CHECK(!a.o.diff && !a.help && !a.o.caller);
    pn_report_args_free(&a);

    /* nothing but a path: the core's defaults */
    const char *one[] = {"dir"};
    CHECK_EQ_INT(parse(&a, one, 1, msg, sizeof msg), 0);
    CHECK(!a.o.has_top && !a.o.output && !a.o.type && a.o.nfilter == 0 && a.o.npaths == 1);
    pn_report_args_free(&a);
}

static void test_diff_forms(void)
{
    pn_report_args a;
    char msg[600];
    /* two selections, then the paths (Node's and Ruby's form) */
    const char *two[] = {"--diff", "phase=hot", "phase=cold,x=1", "f1", "f2", "f3"};
    CHECK_EQ_INT(parse(&a, two, N(two), msg, sizeof msg), 0);
    CHECK(a.o.diff && a.o.npaths == 3 && a.o.ndiff_a == 1 && a.o.ndiff_b == 1);
    if (a.o.diff && a.o.diff_a && a.o.diff_b) {
        CHECK(a.o.diff_a[0].key == NULL); /* split by the core: "k=v[,k=v]" */
        CHECK_STR(a.o.diff_a[0].value, "phase=hot");
        CHECK_STR(a.o.diff_b[0].value, "phase=cold,x=1");
    }
    pn_report_args_free(&a);
    /* after the paths, before an option */
    const char *after[] = {"f1", "--diff", "a=1", "b=2", "--top", "3"};
    CHECK_EQ_INT(parse(&a, after, N(after), msg, sizeof msg), 0);
    CHECK(a.o.diff && a.o.npaths == 1 && a.o.top == 3);
    pn_report_args_free(&a);
    /* none, with two paths: the first path against the second, by source */
    const char *none[] = {"old", "new", "--diff", "--top", "3"};
    CHECK_EQ_INT(parse(&a, none, N(none), msg, sizeof msg), 0);
    CHECK(a.o.diff && a.o.npaths == 2 && a.o.diff_a && a.o.diff_b);
    if (a.o.diff_a && a.o.diff_b) {
        CHECK_STR(a.o.diff_a[0].key, "source");
        CHECK_STR(a.o.diff_a[0].value, "old");
        CHECK_STR(a.o.diff_b[0].key, "source");
        CHECK_STR(a.o.diff_b[0].value, "new");
    }
    pn_report_args_free(&a);

    static const char want[] = "--diff: takes two selections (--diff KEY=VALUE[,...] "
                               "KEY=VALUE[,...]), or none with exactly two paths";
    const char *one_sel[] = {"out", "--diff", "route"};
    const char *one_path[] = {"out", "--diff"};
    const char *three[] = {"a", "b", "c", "--diff"};
    const char *eq[] = {"a", "b", "--diff=x=1"};
    const char *const *bad[] = {one_sel, one_path, three, eq};
    size_t nbad[] = {N(one_sel), N(one_path), N(three), N(eq)};
    for (size_t i = 0; i < N(bad); i++) {
        CHECK_EQ_INT(parse(&a, bad[i], nbad[i], msg, sizeof msg), -1);
        CHECK_STR(msg, want);
    }
    /* paths after --diff are taken as its selections: the message says so */
    const char *late[] = {"--diff", "old.pb", "new.pb"};
    CHECK_EQ_INT(parse(&a, late, N(late), msg, sizeof msg), -1);
    CHECK_STR(msg, "PATH: a profile file or folder is required (--diff took \"old.pb\" and "
                   "\"new.pb\" as its selections: give the paths before --diff)");
    const char *twice[] = {"p", "--diff", "a=1", "b=2", "--diff", "a=1", "b=2"};
    CHECK_EQ_INT(parse(&a, twice, N(twice), msg, sizeof msg), -1);
    CHECK_STR(msg, "--diff: given twice");
}

static void test_errors_name_the_flag(void)
{
    static const struct {
        const char *w[3];
        size_t n;
        const char *msg;
    } cases[] = {
        {{"p", "--top", "-1"}, 3, "--top: \"-1\" is not a whole number >= 0"},
        {{"p", "--top=x"}, 2, "--top: \"x\" is not a whole number >= 0"},
        {{"p", "--top", "1.5"}, 3, "--top: \"1.5\" is not a whole number >= 0"},
        /* a whole number, too large: said so (it was "not a whole number") */
        {{"p", "--top", "99999999999"}, 3, "--top: \"99999999999\" is more than 1000000000"},
        {{"p", "--top", "1000000001"}, 3, "--top: \"1000000001\" is more than 1000000000"},
        {{"p", "--top"}, 2, "--top: expected a value"},
        {{"p", "-o"}, 2, "-o: expected a value"},
        {{"p", "--filter", "phase"}, 3, "--filter: expected KEY=VALUE, got \"phase\""},
        {{"p", "--filter", "=x"}, 3, "--filter: expected KEY=VALUE, got \"=x\""},
        {{"p", "--bogus"}, 2, "--bogus: unknown option"},
        {{"p", "-x"}, 2, "-x: unknown option"},
        {{"--top", "1"}, 2, "PATH: a profile file or folder is required"},
        {{"--"}, 1, "PATH: a profile file or folder is required"},
    };
    for (size_t i = 0; i < N(cases); i++) {
        pn_report_args a;
        char msg[600];
        CHECK_EQ_INT(parse(&a, cases[i].w, cases[i].n, msg, sizeof msg), -1);
        CHECK_STR(msg, cases[i].msg);
    }
    /* no words at all */
    pn_report_args a;
    char msg[600];
    CHECK_EQ_INT(parse(&a, NULL, 0, msg, sizeof msg), -1);
    CHECK_STR(msg, "PATH: a profile file or folder is required");
}

/* An error cut short at pn_error's size ends with a whole character: the
 * Python CLI decodes it strictly (a long non-ASCII path or value). */
static void test_long_message_whole_chars(void)
{
    char top[700];
    size_t o = 0;
    while (o + 2 < sizeof top) {
        top[o++] = (char)0xc3; /* "é" */
        top[o++] = (char)0xa9;
    }
    top[o] = '\0';
    const char *w[] = {"p", "--top", top};
    pn_report_args a;
    char msg[600];
    CHECK_EQ_INT(parse(&a, w, N(w), msg, sizeof msg), -1);
    size_t prefix = strlen("--top: \""), len = strlen(msg);
    CHECK(strncmp(msg, "--top: \"\xc3\xa9", prefix + 2) == 0);
    CHECK(len > 500 && (len - prefix) % 2 == 0); /* no lone 0xc3 at the end */
}

static void test_help(void)
{
    const char *h[] = {"--help"}, *h2[] = {"--top", "1", "-h", "--bogus"};
    pn_report_args a;
    char msg[600];
    CHECK_EQ_INT(parse(&a, h, 1, msg, sizeof msg), 0); /* no PATH needed */
    CHECK(a.help);
    pn_report_args_free(&a);
    CHECK_EQ_INT(parse(&a, h2, N(h2), msg, sizeof msg), 0); /* help as it comes */
    CHECK(a.help);
    pn_report_args_free(&a);

    pn_report_command_result r;
    pn_report_command c = {.prog = "python -m pyroscope", .words = h, .nwords = 1};
    pn_report_command_run(&c, &r);
    CHECK_EQ_INT(r.status, 0);
    CHECK(r.out && strncmp(r.out, "usage: python -m pyroscope report PATH...", 41) == 0);
    CHECK(r.out && strstr(r.out, "--diff A B") && strstr(r.out, "--group-by KEY"));
    CHECK_STR(r.err, "");
    pn_report_command_result_free(&r);
}

static void test_whole_program(void)
{
    const char *help[] = {"help"}, *bogus[] = {"bogus"};
    pn_report_command c = {.with_command = 1, .words = help, .nwords = 1};
    pn_report_command_result r;
    pn_report_command_run(&c, &r);
    CHECK_EQ_INT(r.status, 0);
    CHECK(r.out && strncmp(r.out, "usage: pyroscope-native report ", 31) == 0);
    pn_report_command_result_free(&r);
    c.words = bogus;
    pn_report_command_run(&c, &r);
    CHECK_EQ_INT(r.status, 2);
    CHECK(r.err && strncmp(r.err, "pyroscope-native: unknown command \"bogus\"\nusage: ", 49) == 0);
    CHECK_STR(r.out, "");
    pn_report_command_result_free(&r);
    c.nwords = 0;
    pn_report_command_run(&c, &r);
    CHECK_EQ_INT(r.status, 2);
    CHECK(r.err && strncmp(r.err, "pyroscope-native: a command is required\n", 40) == 0);
    pn_report_command_result_free(&r);
}

/* `report WORDS` with prog p: status, and out and err copied to o and e. */
static int run(const char *p, const char *const *w, size_t n, char *o, char *e, size_t cap)
{
    pn_report_command c = {.prog = p, .words = w, .nwords = n};
    pn_report_command_result r;
    pn_report_command_run(&c, &r);
    snprintf(o, cap, "%s", r.out ? r.out : "(null)");
    snprintf(e, cap, "%s", r.err ? r.err : "(null)");
    pn_report_command_result_free(&r);
    return r.status;
}

static void test_run(void)
{
    char dir[128], path[300], page[300], want[600], out[8192], err[8192];
    pn_test_tmpdir("report-command", dir, sizeof dir);
    pn_test_write_profile(dir, "app-cpu-10-20.pb", "cpu", "cpu_one");
    pn_test_write_profile(dir, "app-cpu-20-30.pb", "cpu", "cpu_two");
    pn_test_write_profile(dir, "app-wall-10-20.pb", "wall", "wall_fn");
    snprintf(page, sizeof page, "%s/page.html", dir);

    const char *ok[] = {dir, "--top", "5", "-o", page};
    CHECK_EQ_INT(run("python -m pyroscope", ok, N(ok), out, err, sizeof out), 0);
    CHECK(strstr(out, "cpu_one") && strstr(out, "cpu_two") && !strstr(out, "wall_fn"));
    snprintf(want, sizeof want, "\n2 profiles read, flame graph: %s (also here: wall; see "
             "--type)\n", page);
    CHECK(strlen(out) > strlen(want) && strcmp(out + strlen(out) - strlen(want), want) == 0);
    CHECK_STR(err, "");

    /* --diff alone with two files: the first against the second */
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/app-cpu-10-20.pb", dir);
    snprintf(b, sizeof b, "%s/app-cpu-20-30.pb", dir);
    const char *diff[] = {a, b, "--diff", "-o", page};
    CHECK_EQ_INT(run(NULL, diff, N(diff), out, err, sizeof out), 0);
    snprintf(want, sizeof want, "A: source=%s (total", a);
    CHECK(strstr(out, "Diff of self cpu time") && strstr(out, want));
    CHECK(strstr(out, "2 profiles read, flame graph: "));

    /* the core's own errors, with the flag's name */
    const char *type[] = {dir, "--type", "inuse_space", "-o", page};
    CHECK_EQ_INT(run(NULL, type, N(type), out, err, sizeof out), 2);
    snprintf(want, sizeof want, "pyroscope-native: --type: no inuse_space profiles in %s "
             "(there are: cpu, wall)\nusage: pyroscope-native report PATH...", dir);
    CHECK(strncmp(err, want, strlen(want)) == 0);
    CHECK_STR(out, "");
    const char *group[] = {dir, "--group-by", ""};
    CHECK_EQ_INT(run(NULL, group, N(group), out, err, sizeof out), 2);
    CHECK(strncmp(err, "pyroscope-native: --group-by: a label key\n", 42) == 0);

    /* a path that is not there: a usage error; messages begin with the
     * program's last word */
    snprintf(path, sizeof path, "%s/nowhere", dir);
    const char *missing[] = {path};
    CHECK_EQ_INT(run("python -m pyroscope", missing, 1, out, err, sizeof out), 2);
    snprintf(want, sizeof want, "pyroscope: %s: no such file or folder\nusage: python -m "
             "pyroscope report PATH...", path);
    CHECK(strncmp(err, want, strlen(want)) == 0);
    const char *bad[] = {dir, "--top", "-1"};
    CHECK_EQ_INT(run(NULL, bad, N(bad), out, err, sizeof out), 2);
    CHECK(strncmp(err, "pyroscope-native: --top: \"-1\" is not a whole number >= 0\nusage: ",
                  64) == 0);

    /* a profile that cannot be read: 1, without the usage */
    snprintf(path, sizeof path, "%s/junk.pb.gz", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("\x1f\x8b not gzip", f);
        fclose(f);
    }
    const char *junk[] = {path, "-o", page};
    CHECK_EQ_INT(run(NULL, junk, N(junk), out, err, sizeof out), 1);
    CHECK(strncmp(err, "pyroscope-native: ", 18) == 0 && strstr(err, "junk.pb.gz"));
    CHECK(!strstr(err, "usage:"));
    CHECK_STR(out, "");
    pn_test_rm_dir(dir);
}

TEST_MAIN(T(test_options), T(test_diff_forms), T(test_errors_name_the_flag),
          T(test_long_message_whole_chars), T(test_help),
          T(test_whole_program), T(test_run))
