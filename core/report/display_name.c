/* How a function is named in the outputs: its name, and where another
 * function has the same name, the shortest trailing part of its file path
 * that tells them apart ("work (moda.py)", "<module> (app/db.py)"). */
#include <stdlib.h>
#include <string.h>

#include "report_tree.h"

typedef struct {
    const char *name;       /* the plain name (plain_name), NULL: not on a stack */
    uint32_t func;
} by_name;

static int cmp_by_name(const void *a, const void *b)
{
    const by_name *x = a, *y = b;
    if (!x->name || !y->name) {
        if (x->name != y->name)
            return x->name ? -1 : 1;
    } else {
        int c = strcmp(x->name, y->name);
        if (c)
            return c;
    }
    return (x->func > y->func) - (x->func < y->func);
}

/* Whether p (a "./" prefix dropped) is file or a trailing part of it that
 * starts at a '/'. */
static int names_file(const char *p, size_t n, const char *file)
{
    if (n >= 2 && p[0] == '.' && p[1] == '/')
        p += 2, n -= 2;
    size_t fl = strlen(file);
    return n > 0 && n <= fl && memcmp(file + fl - n, p, n) == 0 &&
           (n == fl || file[fl - n - 1] == '/');
}

/* One naming in every runtime: the function's name, its place in the
 * file:line column. Node's frames carry both in the name, as
 * @pyroscope/nodejs names them ("./src/app.js:handler:12"): the name is
 * cut out when the prefix names the frame's own file. V8's
 * "(garbage collector)" is the "(garbage collection)" of Ruby's frames.
 * Returns a malloc'ed string. */
static char *plain_name(const char *name, const char *file)
{
    if (strcmp(name, "(garbage collector)") == 0)
        return strdup("(garbage collection)");
    size_t n = strlen(name), end = n;
    while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9')
        end--;
    if (*file && end > 0 && end < n && name[end - 1] == ':') {
        for (const char *c = strchr(name, ':'); c && (size_t)(c - name) < end - 1;
             c = strchr(c + 1, ':')) {
            if (names_file(name, (size_t)(c - name), file) && c + 1 < name + end - 1) {
                size_t len = (size_t)(name + end - 1 - (c + 1));
                char *out = malloc(len + 1);
                if (out) {
                    memcpy(out, c + 1, len);
                    out[len] = '\0';
                }
                return out;
            }
        }
    }
    return strdup(name);
}

const char *pn_report_shown_file(const pn_report *r, const char *path)
{
    size_t n = r->cwd ? strlen(r->cwd) : 0;
    if (n > 1 && strncmp(path, r->cwd, n) == 0 && path[n] == '/' && path[n + 1])
        return path + n + 1;
    return path;
}

/* The last `parts` components of path (all of it when it has fewer). */
static const char *path_tail(const char *path, int parts)
{
    const char *p = path + strlen(path);
    while (p > path) {
        if (p[-1] == '/' && --parts == 0)
            break;
        p--;
    }
    return p;
}

/* How many trailing components of f's file tell it apart from the others
 * of its name group (0: its file is no help, e.g. the same file). */
static int parts_needed(const pn_report *r, const by_name *g, size_t n, uint32_t f)
{
    const char *file = r->names[r->funcs[f].file];
    if (!*file)
        return 0;
    for (int parts = 1; parts < 64; parts++) {
        const char *tail = path_tail(file, parts);
        int unique = 1;
        for (size_t i = 0; i < n && unique; i++) {
            const char *other = r->names[r->funcs[g[i].func].file];
            unique = g[i].func == f || strcmp(path_tail(other, parts), tail) != 0;
        }
        if (unique || tail == file)
            return tail == file && !unique ? 0 : parts;
    }
    return 0;
}

void pn_report_display_free(const pn_report *r, char **names)
{
    if (!names)
        return;
    for (uint32_t i = 0; i < r->nfuncs; i++)
        free(names[i]);
    free(names);
}

int pn_report_display_names(const pn_report *r, char ***out, pn_error *e)
{
    *out = NULL;
    by_name *g = calloc((size_t)r->nfuncs + 1, sizeof *g);
    char **names = calloc((size_t)r->nfuncs + 1, sizeof *names);
    char **plain = calloc((size_t)r->nfuncs + 1, sizeof *plain);
    int rc = 0;
    if (!g || !names || !plain) {
        rc = pn_fail(e, PN_ENOMEM, "report: cannot name %u functions", r->nfuncs);
        goto done;
    }
    for (uint32_t i = 0; i < r->nfuncs; i++) {
        plain[i] = plain_name(r->names[r->funcs[i].name], r->names[r->funcs[i].file]);
        if (!plain[i]) {
            rc = pn_fail(e, PN_ENOMEM, "report: cannot name %u functions", r->nfuncs);
            goto done;
        }
    }
    /* Only functions on some stack compete for a name (hidden launcher
     * frames do not make `<module>` ambiguous). Others sort last, apart. */
    for (uint32_t i = 0; i < r->nfuncs; i++)
        g[i] = (by_name){NULL, i};
    for (uint32_t i = 0; i < r->nnodes; i++)
        g[r->nodes[i].func].name = plain[r->nodes[i].func];
    qsort(g, r->nfuncs, sizeof *g, cmp_by_name);
    for (size_t i = 0; i < r->nfuncs;) {
        size_t j = i + 1;
        while (j < r->nfuncs && g[i].name && g[j].name && strcmp(g[j].name, g[i].name) == 0)
            j++;
        for (size_t k = i; k < j; k++) {
            uint32_t f = g[k].func;
            const char *name = plain[f];
            int parts = j - i > 1 ? parts_needed(r, g + i, j - i, f) : 0;
            const char *tail = parts ? path_tail(r->names[r->funcs[f].file], parts) : NULL;
            size_t len = strlen(name) + (tail ? strlen(tail) + 3 : 0) + 1;
            if (!(names[f] = malloc(len))) {
                rc = pn_fail(e, PN_ENOMEM, "report: cannot name %u functions", r->nfuncs);
                goto done;
            }
            if (tail)
                snprintf(names[f], len, "%s (%s)", name, tail);
            else
                memcpy(names[f], name, len);
        }
        i = j;
    }
done:
    if (plain)
        for (uint32_t i = 0; i < r->nfuncs; i++)
            free(plain[i]);
    free(plain);
    free(g);
    if (rc == 0)
        *out = names;
    else
        pn_report_display_free(r, names);
    return rc;
}
