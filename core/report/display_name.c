/* How a function is named in the outputs: its name, and where another
 * function has the same name, the shortest trailing part of its file path
 * that tells them apart ("work (moda.py)", "<module> (app/db.py)"). */
#include <stdlib.h>
#include <string.h>

#include "report_tree.h"

typedef struct {
    uint32_t name, func;
} by_name;

static int cmp_by_name(const void *a, const void *b)
{
    const by_name *x = a, *y = b;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    return (x->func > y->func) - (x->func < y->func);
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
    by_name *g = malloc(((size_t)r->nfuncs + 1) * sizeof *g);
    char **names = calloc((size_t)r->nfuncs + 1, sizeof *names);
    if (!g || !names) {
        free(g);
        free(names);
        return pn_fail(e, PN_ENOMEM, "report: cannot name %u functions", r->nfuncs);
    }
    /* Only functions on some stack compete for a name (hidden launcher
     * frames do not make `<module>` ambiguous). Others sort last, apart. */
    for (uint32_t i = 0; i < r->nfuncs; i++)
        g[i] = (by_name){PN_REPORT_NONE, i};
    for (uint32_t i = 0; i < r->nnodes; i++)
        g[r->nodes[i].func].name = r->funcs[r->nodes[i].func].name;
    qsort(g, r->nfuncs, sizeof *g, cmp_by_name);
    for (size_t i = 0; i < r->nfuncs;) {
        size_t j = i + 1;
        while (j < r->nfuncs && g[i].name != PN_REPORT_NONE && g[j].name == g[i].name)
            j++;
        for (size_t k = i; k < j; k++) {
            uint32_t f = g[k].func;
            const char *name = r->names[r->funcs[f].name];
            int parts = j - i > 1 ? parts_needed(r, g + i, j - i, f) : 0;
            const char *tail = parts ? path_tail(r->names[r->funcs[f].file], parts) : NULL;
            size_t len = strlen(name) + (tail ? strlen(tail) + 3 : 0) + 1;
            if (!(names[f] = malloc(len))) {
                free(g);
                pn_report_display_free(r, names);
                return pn_fail(e, PN_ENOMEM, "report: cannot name %u functions",
                               r->nfuncs);
            }
            if (tail)
                snprintf(names[f], len, "%s (%s)", name, tail);
            else
                memcpy(names[f], name, len);
        }
        i = j;
    }
    free(g);
    *out = names;
    return 0;
}
