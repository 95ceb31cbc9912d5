/* The `report` command line, once for the three bindings' CLIs: its words
 * parsed into pn_report_options (one usage text, one set of messages, each
 * naming the flag), the report run as a job, and what the command says
 * returned to the binding (stdout, stderr, exit status), which prints it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyroscope_report.h"

#define DIFF_USAGE "takes two selections (--diff KEY=VALUE[,...] KEY=VALUE[,...]), or none " \
                   "with exactly two paths"

static const char SYNOPSIS[] =
    "usage: %s report PATH... [--output HTML] [--top N] [--title TITLE]\n"
    "         [--type TYPE] [--filter KEY=VALUE]... [--group-by KEY] [--diff [A B]]\n";

static const char HELP[] =
    "\n"
    "Reads profiles (.pb or .pb.gz files, or folders of them such as an output\n"
    "folder), prints the top functions and writes a self-contained flame graph page.\n"
    "Labels: the profiles' tags, span_name, span_id, thread_name, pid, and source\n"
    "(the path each profile came from).\n"
    "\n"
    "  PATH                a profile (.pb or .pb.gz) or a folder of them\n"
    "  -o, --output HTML   where to write the flame graph page (default: flamegraph.html\n"
    "                      in the first folder, or next to the first file)\n"
    "  --top N             functions listed (default 20; 0: none)\n"
    "  --title TITLE       title of the page (default: the paths' names)\n"
    "  --type TYPE         which profiles: a folder's type (cpu, wall, memory, ...), or a\n"
    "                      sample type (alloc_space, inuse_space, ...) read from every\n"
    "                      profile (default: the first folder's, cpu, else wall)\n"
    "  --filter KEY=VALUE  only samples with this label (repeatable: different keys must\n"
    "                      all match, values of one key are alternatives; KEY=(none):\n"
    "                      samples without the label)\n"
    "  --group-by KEY      print the total per value of this label\n"
    "  --diff A B          compare two selections, each KEY=VALUE[,KEY=VALUE...]\n"
    "                      (e.g. --diff route=/a route=/b); --diff alone, with two\n"
    "                      paths: the first against the second\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit status: 0 done, 1 a profile could not be read or the page written, 2 usage.\n";

/* ---------------------------------------------------------------- parsing */

void pn_report_args_free(pn_report_args *a)
{
    for (size_t i = 0; a->filter && i < a->o.nfilter; i++)
        free((char *)a->filter[i].key);
    free(a->filter);
    free(a->paths);
    *a = (pn_report_args){0};
}

/* The value of option `flag` (words[*i]): after its '=', or the next word
 * whatever it looks like (so "--top -1" is refused as a number). */
static const char *value_of(const char *const *words, size_t n, size_t *i, const char *flag,
                            const char *eq, pn_error *e)
{
    if (eq)
        return eq + 1;
    if (*i + 1 >= n) {
        pn_fail(e, PN_EINVAL, "%s: expected a value", flag);
        return NULL;
    }
    return words[++*i];
}

#define TOP_MAX 1000000000

/* 0, or -1 when s is no whole number >= 0, -2 when it is more than TOP_MAX. */
static int whole(const char *s, long long *out)
{
    long long v = 0;
    if (!*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    for (; *s; s++)
        if ((v = v * 10 + (*s - '0')) > TOP_MAX)
            return -2;
    *out = v;
    return 0;
}

/* --diff's selections: the next words up to two, before any option. */
static int take_diff(pn_report_args *a, const char *const *words, size_t n, size_t *i,
                     int *diff_words, pn_error *e)
{
    if (a->o.diff)
        return pn_fail(e, PN_EINVAL, "--diff: given twice");
    a->o.diff = 1;
    *diff_words = 0;
    while (*diff_words < 2 && *i + 1 < n && words[*i + 1][0] != '-')
        a->diff[(*diff_words)++] = (pn_label){NULL, words[++*i]};
    if (*diff_words == 1)
        return pn_fail(e, PN_EINVAL, "--diff: %s", DIFF_USAGE);
    return 0;
}

static int option(pn_report_args *a, const char *const *words, size_t n, size_t *i,
                  int *diff_words, pn_error *e)
{
    const char *w = words[*i], *eq = strchr(w, '=');
    char flag[64];
    /* "-oFILE" is "-o FILE", as getopt takes it */
    if (w[1] != '-' && w[1] && w[2]) {
        snprintf(flag, sizeof flag, "-%c", w[1]);
        eq = w + 1;
    } else {
        snprintf(flag, sizeof flag, "%.*s", (int)(eq && w[1] == '-' ? eq - w : 63), w);
        if (w[1] != '-')
            eq = NULL;
    }
    if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
        a->help = 1;
        return 0;
    }
    if (strcmp(flag, "--diff") == 0) {
        if (eq)
            return pn_fail(e, PN_EINVAL, "--diff: %s", DIFF_USAGE);
        return take_diff(a, words, n, i, diff_words, e);
    }
    static const char *const with_value[] = {"-o", "--output", "--top", "--title", "--type",
                                             "--filter", "--group-by"};
    size_t k = 0;
    while (k < sizeof with_value / sizeof *with_value && strcmp(flag, with_value[k]) != 0)
        k++;
    if (k == sizeof with_value / sizeof *with_value)
        return pn_fail(e, PN_EINVAL, "%s: unknown option", flag);
    const char *v = value_of(words, n, i, flag, eq, e);
    if (!v)
        return -1;
    switch (k) {
    case 0:
    case 1:
        a->o.output = v;
        return 0;
    case 2: {
        a->o.has_top = 1;
        int rc = whole(v, &a->o.top);
        if (rc == -2)
            return pn_fail(e, PN_EINVAL, "--top: \"%s\" is more than %d", v, TOP_MAX);
        return rc == 0 ? 0 : pn_fail(e, PN_EINVAL, "--top: \"%s\" is not a whole number >= 0", v);
    }
    case 3:
        a->o.title = v;
        return 0;
    case 4:
        a->o.type = v;
        return 0;
    case 5: {
        /* one label a flag, split at the first '=': a value may hold ',' and '=' */
        const char *sep = strchr(v, '=');
        if (!sep || sep == v)
            return pn_fail(e, PN_EINVAL, "--filter: expected KEY=VALUE, got \"%s\"", v);
        char *key = strndup(v, (size_t)(sep - v));
        if (!key)
            return pn_fail(e, PN_ENOMEM, "out of memory");
        a->filter[a->o.nfilter++] = (pn_label){key, sep + 1};
        return 0;
    }
    default:
        a->o.group_by = v;
        return 0;
    }
}

int pn_report_args_parse(pn_report_args *a, const char *const *words, size_t n, pn_error *e)
{
    *a = (pn_report_args){0};
    a->paths = calloc(n + 1, sizeof *a->paths);
    a->filter = calloc(n + 1, sizeof *a->filter);
    if (!a->paths || !a->filter) {
        pn_report_args_free(a);
        return pn_fail(e, PN_ENOMEM, "out of memory");
    }
    a->o.paths = a->paths;
    a->o.filter = a->filter;
    int diff_words = 0, rc = 0, options = 1;
    for (size_t i = 0; rc == 0 && !a->help && i < n; i++) {
        const char *w = words[i];
        if (options && strcmp(w, "--") == 0)
            options = 0;
        else if (options && w[0] == '-' && w[1])
            rc = option(a, words, n, &i, &diff_words, e);
        else
            a->paths[a->o.npaths++] = w;
    }
    if (rc == 0 && !a->help && a->o.npaths == 0 && diff_words == 2 &&
        !strchr(a->diff[0].value, '=') && !strchr(a->diff[1].value, '='))
        rc = pn_fail(e, PN_EINVAL, "PATH: a profile file or folder is required (--diff took "
                     "\"%s\" and \"%s\" as its selections: give the paths before --diff)",
                     a->diff[0].value, a->diff[1].value);
    else if (rc == 0 && !a->help && a->o.npaths == 0)
        rc = pn_fail(e, PN_EINVAL, "PATH: a profile file or folder is required");
    if (rc == 0 && !a->help && a->o.diff && diff_words == 0) {
        /* --diff alone: the first path against the second, by their source label */
        if (a->o.npaths != 2)
            rc = pn_fail(e, PN_EINVAL, "--diff: %s", DIFF_USAGE);
        else {
            a->diff[0] = (pn_label){"source", a->paths[0]};
            a->diff[1] = (pn_label){"source", a->paths[1]};
        }
    }
    if (a->o.diff) {
        a->o.diff_a = &a->diff[0];
        a->o.diff_b = &a->diff[1];
        a->o.ndiff_a = a->o.ndiff_b = 1;
    }
    if (rc != 0)
        pn_report_args_free(a);
    return rc;
}

/* ------------------------------------------------------------ the command */

static void addf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (f)
        vfprintf(f, fmt, ap);
    va_end(ap);
}

/* The core names options as the APIs spell them ("group_by: ..."); the
 * command says the flag. */
static void add_message(FILE *err, const char *name, const char *msg)
{
    static const char *const opts[][2] = {{"filter", "--filter"}, {"diff", "--diff"},
                                          {"type", "--type"},     {"top", "--top"},
                                          {"output", "--output"}, {"group_by", "--group-by"},
                                          {"title", "--title"}};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        size_t len = strlen(opts[i][0]);
        if (strncmp(msg, opts[i][0], len) == 0 && msg[len] == ':') {
            addf(err, "%s: %s%s\n", name, opts[i][1], msg + len);
            return;
        }
    }
    addf(err, "%s: %s\n", name, msg);
}

static int run(const pn_report_command *c, const char *prog, const char *name, FILE *out,
               FILE *err)
{
    const char *const *words = c->words;
    size_t n = c->nwords;
    if (c->with_command) {
        const char *cmd = n ? words[0] : NULL;
        if (cmd && (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help"))) {
            addf(out, SYNOPSIS, prog);
            addf(out, "%s", HELP);
            return 0;
        }
        if (!cmd || strcmp(cmd, "report") != 0) {
            addf(err, cmd ? "%s: unknown command \"%s\"\n" : "%s: a command is required\n", name,
                 cmd);
            addf(err, SYNOPSIS, prog);
            return 2;
        }
        words++;
        n--;
    }
    pn_report_args a;
    pn_report_job j = {0};
    pn_error e = {0};
    int rc = pn_report_args_parse(&a, words, n, &e);
    if (rc == 0 && a.help) {
        addf(out, SYNOPSIS, prog);
        addf(out, "%s", HELP);
        pn_report_args_free(&a);
        return 0;
    }
    if (rc == 0) {
        a.o.hide_files = c->hide_files;
        a.o.nhide = c->nhide;
        rc = pn_report_job_prepare(&j, &a.o, &e);
    }
    if (rc == 0) {
        pn_report_job_run(&j);
        rc = j.rc;
        e = j.err;
    }
    /* a usage error (a type no profile has too) is 2; an unreadable profile 1 */
    int status = rc == 0 ? 0 : e.code == PN_EINVAL ? 2 : 1;
    if (rc != 0) {
        add_message(err, name, e.msg);
        if (status == 2)
            addf(err, SYNOPSIS, prog);
    } else {
        if (j.text_len)
            fwrite(j.text, 1, j.text_len, out);
        addf(out, "%zu profile%s read, flame graph: %s", j.profiles, j.profiles == 1 ? "" : "s",
             j.r.html);
        for (size_t i = 0; i < j.nother_types; i++)
            addf(out, "%s%s", i ? ", " : " (also here: ", j.other_types[i]);
        addf(out, "%s\n", j.nother_types ? "; see --type)" : "");
    }
    pn_report_job_clear(&j);
    pn_report_args_free(&a);
    return status;
}

void pn_report_command_run(const pn_report_command *c, pn_report_command_result *r)
{
    *r = (pn_report_command_result){0};
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&r->out, &out_len), *err = open_memstream(&r->err, &err_len);
    const char *prog = c->prog && *c->prog ? c->prog : "pyroscope-native";
    /* messages begin with the program's last word: "pyroscope-native: ...",
     * "pyroscope: ..." for "python -m pyroscope" */
    const char *name = strrchr(prog, ' ') ? strrchr(prog, ' ') + 1 : prog;
    r->status = out && err ? run(c, prog, name, out, err) : 1;
    if (out)
        fclose(out);
    if (err)
        fclose(err);
    if (!r->out || !r->err) {
        pn_report_command_result_free(r);
        r->status = 1;
        r->err = strdup("pyroscope-native: out of memory\n");
    }
}

void pn_report_command_result_free(pn_report_command_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}
