/* A binding's report options (pn_report_options) made into a job, once for
 * the three bindings: folders expanded to the profiles of one type, the
 * default page and title, selections parsed, the page's initial view. The
 * bindings only map their option spelling and types to these options. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyroscope_report.h"

#define PAGE_NAME "flamegraph.html"

/* ------------------------------------------------------------ selections */

void pn_report_pairs_free(pn_label *pairs, size_t n)
{
    for (size_t i = 0; pairs && i < n; i++) {
        free((char *)pairs[i].key);
        free((char *)pairs[i].value);
    }
    free(pairs);
}

typedef struct {
    pn_label *v;
    size_t n, cap;
} pairs;

static int pair_push(pairs *p, const char *k, size_t klen, const char *v, size_t vlen,
                     pn_error *e)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        pn_label *more = realloc(p->v, cap * sizeof *more);
        if (!more)
            return pn_fail(e, PN_ENOMEM, "out of memory reading a selection");
        p->v = more;
        p->cap = cap;
    }
    char *key = strndup(k, klen), *value = strndup(v, vlen);
    if (!key || !value) {
        free(key);
        free(value);
        return pn_fail(e, PN_ENOMEM, "out of memory reading a selection");
    }
    p->v[p->n++] = (pn_label){key, value};
    return 0;
}

/* "k=v" of len bytes at s: split at the first '=', the key trimmed. */
static int pair_text(pairs *p, const char *what, const char *s, size_t len, pn_error *e)
{
    const char *eq = memchr(s, '=', len), *k = s, *kend = eq;
    while (eq && k < kend && isspace((unsigned char)*k))
        k++;
    while (eq && kend > k && isspace((unsigned char)kend[-1]))
        kend--;
    if (!eq || kend == k)
        return pn_fail(e, PN_EINVAL, "%s: expected KEY=VALUE, got \"%.*s\"", what, (int)len, s);
    return pair_push(p, k, (size_t)(kend - k), eq + 1, len - (size_t)(eq + 1 - s), e);
}

int pn_report_pairs_parse(const pn_label *items, size_t n, const char *what, pn_label **out,
                          size_t *nout, pn_error *e)
{
    pairs p = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *k = items[i].key, *v = items[i].value ? items[i].value : "";
        if (k && *k)
            rc = pair_push(&p, k, strlen(k), v, strlen(v), e);
        else if (k)
            rc = pn_fail(e, PN_EINVAL, "%s: expected KEY=VALUE, got \"=%s\"", what, v);
        for (const char *s = v; !k && rc == 0; s = strchr(s, ',') + 1) {
            const char *end = strchr(s, ',');
            rc = pair_text(&p, what, s, end ? (size_t)(end - s) : strlen(s), e);
            if (!end)
                break;
        }
    }
    if (rc != 0) {
        pn_report_pairs_free(p.v, p.n);
        return rc;
    }
    *out = p.v;
    *nout = p.n;
    return 0;
}

/* --------------------------------------------------------------- strings */

/* A growing string; a failed append marks it failed (s NULL). */
typedef struct {
    char *s;
    size_t len;
    int failed;
} text;

static void text_addf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_addf(text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? realloc(t->s, t->len + (size_t)n + 1) : NULL;
    if (!s) {
        free(t->s);
        *t = (text){.failed = 1};
        return;
    }
    va_start(ap, fmt);
    vsnprintf(s + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->s = s;
    t->len += (size_t)n;
}

/* The text, kept by the job (NULL when out of memory). */
static char *text_keep(pn_report_job *j, text *t)
{
    if (!t->s && !t->failed)
        text_addf(t, "%s", "");
    return t->failed ? NULL : pn_report_job_keep(j, t->s);
}

/* s with the characters of a form field escaped (as URLSearchParams does). */
static void text_add_escaped(text *t, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("*-._", c))
            text_addf(t, "%c", c);
        else if (c == ' ')
            text_addf(t, "+");
        else
            text_addf(t, "%%%02X", c);
    }
}

static void text_add_field(text *t, const char *name, const pn_label *l, size_t n)
{
    text_addf(t, "%s%s=", t->len ? "&" : "", name);
    for (size_t i = 0; i < n; i++) {
        text_add_escaped(t, l[i].key);
        text_add_escaped(t, "=");
        text_add_escaped(t, l[i].value);
        if (i + 1 < n)
            text_add_escaped(t, ",");
    }
}

/* ----------------------------------------------------------------- paths */

typedef struct {
    const char **v;
    size_t n, cap;
} list;

static int list_push(list *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        const char **more = realloc(l->v, cap * sizeof *more);
        if (!more)
            return -1;
        l->v = more;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

/* A folder page's profiles, merged over the folders given. */
typedef struct {
    const char *type, *page;
    list paths, sources;
} group;

typedef struct {
    group *g;
    size_t n;
    list files;     /* the files given */
    list folders;   /* the folders given */
} expansion;

static void expansion_free(expansion *x)
{
    for (size_t i = 0; i < x->n; i++) {
        free(x->g[i].paths.v);
        free(x->g[i].sources.v);
    }
    free(x->g);
    free(x->files.v);
    free(x->folders.v);
}

static group *group_of(pn_report_job *j, expansion *x, const pn_folder_page *p)
{
    for (size_t i = 0; i < x->n; i++)
        if (strcmp(x->g[i].type, p->type) == 0)
            return &x->g[i];
    group *more = realloc(x->g, (x->n + 1) * sizeof *more);
    if (!more)
        return NULL;
    x->g = more;
    group *g = memset(&x->g[x->n++], 0, sizeof *g);
    g->type = pn_report_job_keep(j, strdup(p->type));
    g->page = pn_report_job_keep(j, strdup(p->page));
    return g->type && g->page ? g : NULL;
}

/* The folder's pages into x, every string kept by j. */
static int expand_folder(pn_report_job *j, expansion *x, const char *dir, pn_error *e)
{
    pn_folder_pages p;
    if (pn_folder_pages_read(dir, 0, &p, e) != 0)
        return -1;
    /* a folder without profiles adds none (the files given may) */
    int rc = p.n ? list_push(&x->folders, dir) : 0;
    for (size_t i = 0; rc == 0 && i < p.n; i++) {
        group *g = group_of(j, x, &p.pages[i]);
        rc = g ? 0 : -1;
        for (size_t k = 0; rc == 0 && k < p.pages[i].npaths; k++) {
            const char *path = pn_report_job_keep(j, strdup(p.pages[i].paths[k]));
            rc = path && list_push(&g->paths, path) == 0 && list_push(&g->sources, dir) == 0
                     ? 0 : -1;
        }
    }
    pn_folder_pages_free(&p);
    return rc == 0 ? 0 : pn_fail(e, PN_ENOMEM, "out of memory listing '%s'", dir);
}

/* The last name of path, as the path made absolute would end ("." and
 * ".." followed, symbolic links not). */
static void add_base_name(text *t, const char *path)
{
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t n = end - start;
    if (n && strncmp(path + start, ".", n) != 0 && strncmp(path + start, "..", n) != 0) {
        text_addf(t, "%.*s", (int)n, path + start);
        return;
    }
    char *abs = realpath(path, NULL);
    const char *slash = abs ? strrchr(abs, '/') : NULL;
    text_addf(t, "%s", slash && slash[1] ? slash + 1 : abs ? abs : path);
    free(abs);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ------------------------------------------------------------ the options */

static int keep_pairs(pn_report_job *j, const pn_label *items, size_t n, const char *what,
                      const pn_label **out, size_t *nout, pn_error *e)
{
    pn_label *l = NULL;
    if (pn_report_pairs_parse(items, n, what, &l, nout, e) != 0)
        return -1;
    /* The keys and values, then the array, go to the job (keep frees a
     * block it cannot keep; the rest is freed here). */
    int ok = 1;
    for (size_t i = 0; i < *nout; i++) {
        if (ok)
            ok = pn_report_job_keep(j, (char *)l[i].key) != NULL;
        else
            free((char *)l[i].key);
        if (ok)
            ok = pn_report_job_keep(j, (char *)l[i].value) != NULL;
        else
            free((char *)l[i].value);
    }
    if (!ok)
        free(l);
    *out = ok && l ? pn_report_job_keep(j, l) : NULL;
    if (!ok || (l && !*out))
        return pn_fail(e, PN_ENOMEM, "out of memory reading a selection");
    return 0;
}

static const char *const *keep_list(pn_report_job *j, list *l)
{
    const char **v = l->n ? malloc(l->n * sizeof *v) : NULL;
    if (v)
        memcpy(v, l->v, l->n * sizeof *v);
    return l->n ? pn_report_job_keep(j, v) : NULL;
}

static int check_options(const pn_report_options *o, const char *pre, pn_error *e)
{
    if (!o->paths || o->npaths == 0)
        return pn_fail(e, PN_EINVAL, "%spaths must be a profile file or folder, or a non-empty "
                       "list of them", pre);
    for (size_t i = 0; i < o->npaths; i++) {
        struct stat st;
        if (!o->paths[i] || !*o->paths[i])
            return pn_fail(e, PN_EINVAL, "%spaths must be a profile file or folder, or a "
                           "non-empty list of them", pre);
        if (stat(o->paths[i], &st) != 0)
            return pn_fail(e, PN_EINVAL, "%s%s: no such file or folder", pre, o->paths[i]);
    }
    if (o->has_top && o->top < 0)
        return pn_fail(e, PN_EINVAL, "top: a whole number >= 0");
    if (o->type && !*o->type)
        return pn_fail(e, PN_EINVAL, "type: a profile type (cpu, wall, heap, ...)");
    if (o->group_by && !*o->group_by)
        return pn_fail(e, PN_EINVAL, "group_by: a label key");
    if (o->output && !*o->output && !o->no_output)
        return pn_fail(e, PN_EINVAL, "output: a file path for the flame graph page");
    return 0;
}

/* The folders' profiles of one type, or every profile read for a sample
 * type (see pn_report_options), into j; *page: the page's name. -1 when
 * out of memory. */
static int choose_paths(pn_report_job *j, const pn_report_options *o, expansion *x,
                        const char *joined, const char *types, const char **page)
{
    pn_report_request *q = &j->r;
    group *g = x->n && !o->type ? &x->g[0] : NULL;
    for (size_t i = 0; o->type && i < x->n && !g; i++)
        g = strcmp(x->g[i].type, o->type) == 0 ? &x->g[i] : NULL;
    list paths = {0}, sources = {0}, others = {0};
    int rc = 0;
    if (g) {
        /* the page's profiles, then the files (their own sources) */
        for (size_t i = 0; rc == 0 && i < g->paths.n; i++)
            rc = list_push(&paths, g->paths.v[i]) | list_push(&sources, g->sources.v[i]);
        for (size_t i = 0; rc == 0 && i < x->files.n; i++)
            rc = list_push(&paths, x->files.v[i]) | list_push(&sources, NULL);
        for (size_t i = 0; rc == 0 && i < x->n; i++)
            rc = &x->g[i] == g ? 0 : list_push(&others, x->g[i].type);
        j->type = g->type;
        *page = g->page;
    } else {
        /* no folder, or a type no page has: a sample type, from every profile */
        for (size_t i = 0; rc == 0 && i < x->folders.n; i++)
            rc = list_push(&paths, x->folders.v[i]);
        for (size_t i = 0; rc == 0 && i < x->files.n; i++)
            rc = list_push(&paths, x->files.v[i]);
        *page = PAGE_NAME;
        if (o->type) {
            text none = {0}, name = {0};
            text_addf(&none, "type: no %s profiles in %s", o->type, joined);
            if (x->n)
                text_addf(&none, " (there are: %s)", types);
            text_addf(&name, "flamegraph-%s.html", o->type);
            j->type = q->type = pn_report_job_keep(j, strdup(o->type));
            q->none_error = text_keep(j, &none);
            const char *named = text_keep(j, &name);
            if (x->n)
                *page = named;
            rc = q->type && q->none_error && named ? rc : -1;
        }
    }
    q->npaths = paths.n;
    j->nother_types = others.n;
    if (rc == 0 && (!(q->paths = keep_list(j, &paths)) ||
                    (sources.n && !(q->sources = keep_list(j, &sources))) ||
                    (others.n && !(j->other_types = keep_list(j, &others)))))
        rc = -1;
    free(paths.v);
    free(sources.v);
    free(others.v);
    return rc;
}

static int choose(pn_report_job *j, const pn_report_options *o, expansion *x, const char **page,
                  pn_error *e)
{
    text joined = {0}, types = {0};
    for (size_t i = 0; i < o->npaths; i++)
        text_addf(&joined, "%s%s", i ? ", " : "", o->paths[i]);
    for (size_t i = 0; i < x->n; i++)
        text_addf(&types, "%s%s", i ? ", " : "", x->g[i].type);
    text_addf(&types, "%s", "");
    int rc;
    if (joined.failed || types.failed)
        rc = pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
    else if (x->n == 0 && x->files.n == 0)
        rc = pn_fail(e, PN_EINVAL, "%s%sno profiles (.pb or .pb.gz files) in %s",
                     o->caller ? o->caller : "", o->caller ? ": " : "", joined.s);
    else if (choose_paths(j, o, x, joined.s, types.s, page) != 0)
        rc = pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
    else
        rc = 0;
    free(joined.s);
    free(types.s);
    return rc;
}

/* The default page: in the first folder, or beside the first file. */
static const char *default_output(pn_report_job *j, const char *first, const char *page)
{
    text t = {0};
    if (is_dir(first)) {
        size_t n = strlen(first);
        text_addf(&t, "%s%s%s", first, n && first[n - 1] == '/' ? "" : "/", page);
    } else {
        const char *slash = strrchr(first, '/');
        if (slash)
            text_addf(&t, "%.*s/%s", (int)(slash - first), first, page);
        else
            text_addf(&t, "%s", page);
    }
    return text_keep(j, &t);
}

static int prepare(pn_report_job *j, const pn_report_options *o, pn_error *e)
{
    pn_report_request *q = &j->r;
    char pre[128] = "";
    if (o->caller)
        snprintf(pre, sizeof pre, "%s: ", o->caller);
    if (check_options(o, pre, e) != 0)
        return -1;
    q->top = o->has_top ? (size_t)o->top : PN_REPORT_DEFAULT_TOP;
    q->diff = o->diff;
    if (keep_pairs(j, o->filter, o->nfilter, "filter", &q->filters, &q->nfilters, e) != 0 ||
        (o->diff && (keep_pairs(j, o->diff_a, o->ndiff_a, "diff", &q->diff_a, &q->ndiff_a, e) != 0 ||
                     keep_pairs(j, o->diff_b, o->ndiff_b, "diff", &q->diff_b, &q->ndiff_b, e) != 0)))
        return -1;
    if (o->group_by && !(q->group_by = pn_report_job_keep(j, strdup(o->group_by))))
        return pn_fail(e, PN_ENOMEM, "out of memory preparing a report");

    expansion x = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < o->npaths; i++) {
        const char *p = pn_report_job_keep(j, strdup(o->paths[i]));
        if (!p)
            rc = pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
        else if (is_dir(p))
            rc = expand_folder(j, &x, p, e);
        else if (list_push(&x.files, p) != 0)
            rc = pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
    }
    const char *page = PAGE_NAME;
    if (rc == 0)
        rc = choose(j, o, &x, &page, e);
    expansion_free(&x);
    if (rc != 0)
        return -1;

    if (!o->no_output)
        q->html = o->output ? pn_report_job_keep(j, strdup(o->output))
                            : default_output(j, o->paths[0], page);
    text title = {0}, view = {0};
    if (o->title)
        text_addf(&title, "%s", o->title);
    for (size_t i = 0; !o->title && i < o->npaths; i++) {
        text_addf(&title, "%s", i ? ", " : "");
        add_base_name(&title, o->paths[i]);
    }
    /* The page opens on the same view, in its URL-fragment syntax. */
    if (q->nfilters)
        text_add_field(&view, "filter", q->filters, q->nfilters);
    if (q->group_by) {
        text_addf(&view, "%sgroup=", view.len ? "&" : "");
        text_add_escaped(&view, q->group_by);
    }
    if (q->diff) {
        text_addf(&view, "%sdiff=", view.len ? "&" : "");
        text_add_field(&view, "a", q->diff_a, q->ndiff_a);
        text_add_field(&view, "b", q->diff_b, q->ndiff_b);
    }
    q->title = text_keep(j, &title);
    q->view = text_keep(j, &view);
    if (!q->title || !q->view || (!o->no_output && !q->html))
        return pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
    if (o->nhide) {
        const char **hide = pn_report_job_keep(j, calloc(o->nhide, sizeof *hide));
        if (!hide)
            return pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
        for (size_t i = 0; i < o->nhide; i++)
            if (!(hide[i] = pn_report_job_keep(j, strdup(o->hide_files[i]))))
                return pn_fail(e, PN_ENOMEM, "out of memory preparing a report");
        q->hide_files = hide;
        q->nhide = o->nhide;
    }
    return 0;
}

int pn_report_job_prepare(pn_report_job *j, const pn_report_options *o, pn_error *e)
{
    *j = (pn_report_job){0};
    if (!o)
        return pn_fail(e, PN_EINVAL, "pn_report_job_prepare: options are required");
    if (prepare(j, o, e) != 0) {
        pn_report_job_clear(j);
        return -1;
    }
    return 0;
}
