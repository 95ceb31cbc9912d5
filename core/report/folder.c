/* The output folder the folder exporter writes: its listing, its file
 * names (<app>-<type>-<from>-<until>[.<part>][-<n>].pb[.gz]) read back, the
 * pages a report of it makes (one per profile type) and the run report
 * (the pages of the files one run wrote). Every binding's report uses
 * these; none lists or parses the folder itself. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pyroscope_report.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Digits from *p (at least one), *p moved past them. */
static int digits(const char **p)
{
    const char *s = *p;
    while (isdigit((unsigned char)**p))
        (*p)++;
    return *p > s;
}

void pn_folder_name_type(const char *name, char *buf, size_t size)
{
    size_t n = strlen(name);
    size_t stem = ends_with(name, ".pb.gz") ? n - 6 : ends_with(name, ".pb") ? n - 3 : 0;
    /* From each '-' that could start "-<type>-<from>-<until>...", check the rest. */
    for (const char *dash = strchr(name, '-'); stem && dash; dash = strchr(dash + 1, '-')) {
        const char *t = dash + 1, *p = t;
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        size_t tlen = (size_t)(p - t);
        if (tlen == 0 || *p++ != '-' || !digits(&p) || *p++ != '-' || !digits(&p))
            continue;
        if (*p == '.' && isdigit((unsigned char)p[1])) {
            p++;
            digits(&p);
        }
        if (*p == '-' && isdigit((unsigned char)p[1])) {
            p++;
            digits(&p);
        }
        if ((size_t)(p - name) == stem && tlen < size) {
            memcpy(buf, t, tlen);
            buf[tlen] = '\0';
            return;
        }
    }
    snprintf(buf, size, "profile");
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void pn_folder_names_free(pn_folder_names *l)
{
    for (size_t i = 0; l && i < l->n; i++)
        free(l->names[i]);
    if (l) {
        free(l->names);
        memset(l, 0, sizeof *l);
    }
}

/* Hidden names (the exporter's temporary files) and other files are left
 * out; a folder that cannot be read is empty. */
int pn_folder_names_read(const char *dir, pn_folder_names *out, pn_error *e)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        const char *n = de->d_name;
        if (n[0] == '.' || !(ends_with(n, ".pb") || ends_with(n, ".pb.gz")))
            continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 64;
            char **more = realloc(out->names, cap * sizeof *more);
            if (!more)
                goto oom;
            out->names = more;
        }
        if (!(out->names[out->n] = strdup(n)))
            goto oom;
        out->n++;
    }
    closedir(d);
    if (out->n)
        qsort(out->names, out->n, sizeof *out->names, cmp_name);
    return 0;
oom:
    closedir(d);
    pn_folder_names_free(out);
    return pn_fail(e, PN_ENOMEM, "out of memory listing '%s'", dir);
}

static int listed(const pn_folder_names *l, const char *name)
{
    return l && bsearch(&name, l->names, l->n, sizeof *l->names, cmp_name) != NULL;
}

/* cpu, then wall, then the others by name. */
static int rank(const char *type)
{
    return strcmp(type, "cpu") == 0 ? 0 : strcmp(type, "wall") == 0 ? 1 : 2;
}

static int cmp_page(const void *a, const void *b)
{
    const pn_folder_page *x = a, *y = b;
    int d = rank(x->type) - rank(y->type);
    return d ? d : strcmp(x->type, y->type);
}

void pn_folder_pages_free(pn_folder_pages *p)
{
    for (size_t i = 0; p && i < p->n; i++) {
        pn_folder_page *g = &p->pages[i];
        for (size_t j = 0; j < g->npaths; j++)
            free(g->paths[j]);
        free(g->paths);
        free(g->type);
        free(g->page);
    }
    if (p) {
        free(p->pages);
        free(p->dir);
        memset(p, 0, sizeof *p);
    }
}

static char *path_join(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s/%s", dir, name);
    return s;
}

/* The page (type) of each name, in name order; each page's newest max_files. */
static int group(const char *dir, const pn_folder_names *all, const pn_folder_names *skip,
                 size_t max_files, pn_folder_pages *out, pn_error *e)
{
    memset(out, 0, sizeof *out);
    char type[64];
    for (size_t i = 0; i < all->n; i++) {
        if (listed(skip, all->names[i]))
            continue;
        pn_folder_name_type(all->names[i], type, sizeof type);
        pn_folder_page *g = NULL;
        for (size_t j = 0; j < out->n && !g; j++)
            g = strcmp(out->pages[j].type, type) == 0 ? &out->pages[j] : NULL;
        if (!g) {
            pn_folder_page *more = realloc(out->pages, (out->n + 1) * sizeof *more);
            if (!more)
                goto oom;
            out->pages = more;
            g = memset(&out->pages[out->n++], 0, sizeof *g);
            if (!(g->type = strdup(type)))
                goto oom;
        }
        char **paths = realloc(g->paths, (g->npaths + 1) * sizeof *paths);
        if (!paths)
            goto oom;
        g->paths = paths;
        if (!(g->paths[g->npaths] = path_join(dir, all->names[i])))
            goto oom;
        g->npaths++;
        g->total++;
    }
    if (out->n)
        qsort(out->pages, out->n, sizeof *out->pages, cmp_page);
    for (size_t i = 0; i < out->n; i++) {
        pn_folder_page *g = &out->pages[i];
        size_t drop = max_files && g->npaths > max_files ? g->npaths - max_files : 0;
        for (size_t j = 0; j < drop; j++)
            free(g->paths[j]);
        memmove(g->paths, g->paths + drop, (g->npaths - drop) * sizeof *g->paths);
        g->npaths -= drop;
        int time = i == 0 && rank(g->type) < 2;
        size_t len = strlen(g->type) + sizeof "flamegraph-.html";
        if (!(g->page = malloc(len)))
            goto oom;
        snprintf(g->page, len, time ? "flamegraph.html" : "flamegraph-%s.html", g->type);
    }
    return 0;
oom:
    pn_folder_pages_free(out);
    return pn_fail(e, PN_ENOMEM, "out of memory grouping the profiles of '%s'", dir);
}

int pn_folder_pages_read(const char *dir, size_t max_files, pn_folder_pages *out, pn_error *e)
{
    pn_folder_names all;
    if (pn_folder_names_read(dir, &all, e) != 0)
        return -1;
    int rc = group(dir, &all, NULL, max_files, out, e);
    pn_folder_names_free(&all);
    if (rc == 0 && !(out->dir = strdup(dir))) {
        pn_folder_pages_free(out);
        rc = pn_fail(e, PN_ENOMEM, "out of memory");
    }
    return rc;
}

/* The run: the folder and its listing when it began. Process-wide; the
 * bindings call begin and end from their configure/stop, which they
 * serialise; the lock covers a caller that does not. */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static char *run_dir;
static pn_folder_names run_before;

int pn_folder_run_begin(const char *dir, pn_error *e)
{
    pn_folder_names before;
    char *copy = strdup(dir);
    if (!copy || pn_folder_names_read(dir, &before, e) != 0) {
        free(copy);
        return copy ? -1 : pn_fail(e, PN_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&run_lock);
    free(run_dir);
    pn_folder_names_free(&run_before);
    run_dir = copy;
    run_before = before;
    pthread_mutex_unlock(&run_lock);
    return 0;
}

int pn_folder_run_end(pn_folder_pages *out, pn_error *e)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&run_lock);
    char *dir = run_dir;
    pn_folder_names before = run_before;
    run_dir = NULL;
    memset(&run_before, 0, sizeof run_before);
    pthread_mutex_unlock(&run_lock);
    if (!dir)
        return 0;
    pn_folder_names now;
    int rc = pn_folder_names_read(dir, &now, e);
    if (rc == 0)
        rc = group(dir, &now, &before, PN_RUN_MAX_FILES, out, e);
    pn_folder_names_free(&now);
    pn_folder_names_free(&before);
    if (rc == 0)
        out->dir = dir; /* says a run had begun */
    else
        free(dir);
    return rc;
}

