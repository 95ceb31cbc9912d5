/* Reading pprof profiles back and merging them into one call tree, the input
 * of the flame graph and the "top functions" report. Files come from our own
 * folder exporter or from anywhere else, so every index is checked and every
 * size is bounded before it is trusted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/hash.h"
#include "profile.pb-c.h"
#include "pyroscope_native.h"
#include "encoding/pprof.h"
#include "pyroscope_report.h"
#include "report_tree.h"

typedef Perftools__Profiles__Profile pprof_profile;

#define NAME_TRUNCATED "[truncated]"
#define NAME_UNKNOWN "[unknown]"
#define NAME_LAUNCHER "[launcher]"

/* ------------------------------------------------------------ the tables */

/* The tables below are open-addressing indexes over arrays; each table says
 * how to hash the key of one of its ids. */
typedef uint32_t (*key_hash)(const pn_report *r, uint32_t id);

static int slots_build(pn_report_slots *t, uint32_t nslots, const pn_report *r,
                       uint32_t first, uint32_t n, key_hash hash, pn_error *e)
{
    uint32_t *slots = malloc((size_t)nslots * sizeof *slots);
    if (!slots)
        return pn_fail(e, PN_ENOMEM, "report: cannot allocate %u index slots", nslots);
    memset(slots, 0xff, (size_t)nslots * sizeof *slots);
    uint32_t mask = nslots - 1;
    for (uint32_t i = first; i < n; i++) {
        uint32_t h = hash(r, i);
        while (slots[h & mask] != PN_REPORT_NONE)
            h++;
        slots[h & mask] = i;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* Keeps the table at most half full (so probes stay short) before id n goes
 * in, then puts it at hash h. */
static int slots_put(pn_report_slots *t, const pn_report *r, uint32_t first, uint32_t n,
                     key_hash hash, uint32_t h, pn_error *e)
{
    if ((uint64_t)(n + 1) * 2 > (uint64_t)t->mask + 1 &&
        slots_build(t, (t->mask + 1) * 2, r, first, n, hash, e) != 0)
        return -1;
    while (t->slots[h & t->mask] != PN_REPORT_NONE)
        h++;
    t->slots[h & t->mask] = n;
    return 0;
}

/* Room for one more element of size `elem` in *arr (n used of *cap). */
static int grow(void *arr, size_t *cap, size_t n, size_t elem, const char *what,
                pn_error *e)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *na = realloc(*(void **)arr, ncap * elem);
    if (!na)
        return pn_fail(e, PN_ENOMEM, "report: cannot grow the %s table to %zu", what, ncap);
    *(void **)arr = na;
    *cap = ncap;
    return 0;
}

static uint32_t hash_str(const char *s) { return pn_hash_bytes(s, strlen(s), PN_HASH_SEED); }
static uint32_t hash_pair(uint32_t a, uint32_t b)
{
    return pn_hash_u32(pn_hash_u32(PN_HASH_SEED, a), b);
}
static uint32_t name_hash(const pn_report *r, uint32_t id) { return hash_str(r->names[id]); }
static uint32_t func_hash(const pn_report *r, uint32_t id)
{
    return hash_pair(r->funcs[id].name, r->funcs[id].file);
}
static uint32_t node_hash(const pn_report *r, uint32_t id)
{
    return hash_pair(r->nodes[id].parent, r->nodes[id].func);
}
static uint32_t lset_hash(const pn_report *r, uint32_t id)
{
    return pn_hash_words(r->lab + r->lset_off[id], r->lset_off[id + 1] - r->lset_off[id],
                         PN_HASH_SEED);
}
static uint32_t rec_key_hash(uint32_t node, uint32_t lset, uint32_t prof)
{
    return pn_hash_u32(hash_pair(node, lset), prof);
}
static uint32_t rec_hash(const pn_report *r, uint32_t id)
{
    return rec_key_hash(r->recs[id].node, r->recs[id].lset, r->recs[id].prof);
}

uint32_t pn_report_name_find(const pn_report *r, const char *s)
{
    for (uint32_t i = hash_str(s);; i++) {
        uint32_t at = r->name_ix.slots[i & r->name_ix.mask];
        if (at == PN_REPORT_NONE || strcmp(r->names[at], s) == 0)
            return at;
    }
}

/* The index of string s (valid UTF-8), added when new; NONE on failure. */
static uint32_t name_intern_valid(pn_report *r, const char *s, pn_error *e)
{
    uint32_t at = pn_report_name_find(r, s);
    if (at != PN_REPORT_NONE)
        return at;
    if (r->nnames >= r->max_names) {
        pn_fail(e, PN_ELIMIT, "report: more than %u distinct names and labels",
                r->max_names);
        return PN_REPORT_NONE;
    }
    size_t len = strlen(s);
    char *copy = malloc(len + 1);
    if (!copy || grow(&r->names, &r->names_cap, r->nnames, sizeof *r->names, "name", e)) {
        free(copy);
        pn_fail(e, PN_ENOMEM, "report: cannot copy a %zu-byte name", len);
        return PN_REPORT_NONE;
    }
    memcpy(copy, s, len + 1);
    r->names[r->nnames] = copy;
    if (slots_put(&r->name_ix, r, 0, r->nnames, name_hash, hash_str(s), e) != 0) {
        free(copy);
        return PN_REPORT_NONE;
    }
    return r->nnames++;
}

/* The index of string s; bytes that are not UTF-8 become U+FFFD (counted),
 * so one bad name costs a glyph, not the file, and every output is text. */
static uint32_t name_intern(pn_report *r, const char *s, pn_error *e)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), bad = 0;
    uint32_t cp;
    for (size_t i = 0, k; i < n; i += k ? k : 1)
        bad += (k = pn_utf8_seq(p + i, n - i, &cp)) == 0;
    if (bad == 0)
        return name_intern_valid(r, s, e);
    char *clean = malloc(n + 2 * bad + 1);
    if (!clean) {
        pn_fail(e, PN_ENOMEM, "report: cannot copy a %zu-byte name", n);
        return PN_REPORT_NONE;
    }
    size_t j = 0;
    for (size_t i = 0, k; i < n; i += k ? k : 1) {
        if ((k = pn_utf8_seq(p + i, n - i, &cp)) == 0) {
            memcpy(clean + j, "\xef\xbf\xbd", 3);
            j += 3;
        } else {
            memcpy(clean + j, p + i, k);
            j += k;
        }
    }
    clean[j] = '\0';
    r->invalid_utf8++;
    uint32_t id = name_intern_valid(r, clean, e);
    free(clean);
    return id;
}

/* Whether frames in `file` are a launcher's (pn_report_hide_root_files). */
static uint32_t file_hidden(const pn_report *r, const char *file)
{
    size_t n = strlen(file);
    for (uint32_t i = 0; i < r->nhidden; i++) {
        size_t m = strlen(r->hidden[i]);
        if (n == m ? strcmp(file, r->hidden[i]) == 0
                   : n > m && file[n - m - 1] == '/' && strcmp(file + n - m, r->hidden[i]) == 0)
            return 1;
    }
    return 0;
}

/* The function `name` in `file` (name ids), added when new; line (0 when
 * unknown) lowers its line. NONE on failure. */
static uint32_t func_intern(pn_report *r, uint32_t name, uint32_t file, uint32_t line,
                            pn_error *e)
{
    uint32_t h = hash_pair(name, file), at;
    for (uint32_t i = h;; i++) {
        at = r->func_ix.slots[i & r->func_ix.mask];
        if (at == PN_REPORT_NONE)
            break;
        if (r->funcs[at].name == name && r->funcs[at].file == file)
            goto found;
    }
    if (grow(&r->funcs, &r->funcs_cap, r->nfuncs, sizeof *r->funcs, "function", e) != 0)
        return PN_REPORT_NONE;
    r->funcs[r->nfuncs] = (pn_report_func){name, file, 0, file_hidden(r, r->names[file])};
    if (slots_put(&r->func_ix, r, 0, r->nfuncs, func_hash, h, e) != 0)
        return PN_REPORT_NONE;
    at = r->nfuncs++;
found:
    if (line && (r->funcs[at].line == 0 || line < r->funcs[at].line))
        r->funcs[at].line = line;
    return at;
}

/* The child of `parent` for function `func`, created when new; NONE on
 * failure. */
static uint32_t node_child(pn_report *r, uint32_t parent, uint32_t func, pn_error *e)
{
    uint32_t h = hash_pair(parent, func);
    for (uint32_t i = h;; i++) {
        uint32_t at = r->node_ix.slots[i & r->node_ix.mask];
        if (at == PN_REPORT_NONE)
            break;
        if (r->nodes[at].parent == parent && r->nodes[at].func == func)
            return at;
    }
    if (r->nnodes >= r->max_nodes) {
        pn_fail(e, PN_ELIMIT, "report: the merged call tree exceeds %u nodes",
                r->max_nodes);
        return PN_REPORT_NONE;
    }
    if (grow(&r->nodes, &r->nodes_cap, r->nnodes, sizeof *r->nodes, "call tree", e) != 0)
        return PN_REPORT_NONE;
    uint32_t id = r->nnodes;
    r->nodes[id] = (pn_report_node){.func = func, .parent = parent,
                                    .first_child = PN_REPORT_NONE,
                                    .next_sibling = r->nodes[parent].first_child,
                                    .depth = r->nodes[parent].depth + 1};
    /* The root is never looked up, so the index starts at node 1. */
    if (slots_put(&r->node_ix, r, 1, id, node_hash, h, e) != 0)
        return PN_REPORT_NONE;
    r->nodes[parent].first_child = id;
    return r->nnodes++;
}

/* The label set of n sorted (key, value) pairs, added when new. */
static uint32_t lset_intern(pn_report *r, const uint32_t *pairs, uint32_t n, pn_error *e)
{
    if (n == 0)
        return 0;
    uint32_t h = pn_hash_words(pairs, n, PN_HASH_SEED);
    for (uint32_t i = h;; i++) {
        uint32_t at = r->lset_ix.slots[i & r->lset_ix.mask];
        if (at == PN_REPORT_NONE)
            break;
        if (r->lset_off[at + 1] - r->lset_off[at] == n &&
            memcmp(r->lab + r->lset_off[at], pairs, n * sizeof *pairs) == 0)
            return at;
    }
    while (r->nlab + n > r->lab_cap) {
        if (grow(&r->lab, &r->lab_cap, r->lab_cap, sizeof *r->lab, "label", e) != 0)
            return PN_REPORT_NONE;
    }
    if (r->nlab + n > UINT32_MAX ||
        grow(&r->lset_off, &r->lsets_cap, r->nlsets + 1, sizeof *r->lset_off, "label set",
             e) != 0) {
        pn_fail(e, PN_ELIMIT, "report: too many labels");
        return PN_REPORT_NONE;
    }
    memcpy(r->lab + r->nlab, pairs, n * sizeof *pairs);
    r->nlab += n;
    r->lset_off[r->nlsets + 1] = (uint32_t)r->nlab;
    if (slots_put(&r->lset_ix, r, 1, r->nlsets, lset_hash, h, e) != 0)
        return PN_REPORT_NONE;
    return r->nlsets++;
}

/* Adds value and count to the record of (leaf node, label set) in the
 * profile being merged. */
static int rec_add(pn_report *r, uint32_t node, uint32_t lset, int64_t value, int64_t count,
                   pn_error *e)
{
    uint32_t prof = (uint32_t)r->profiles;
    uint32_t h = rec_key_hash(node, lset, prof), at;
    for (uint32_t i = h;; i++) {
        at = r->rec_ix.slots[i & r->rec_ix.mask];
        if (at == PN_REPORT_NONE)
            break;
        if (r->recs[at].node == node && r->recs[at].lset == lset && r->recs[at].prof == prof)
            goto found;
    }
    if (r->nrecs == UINT32_MAX - 1)
        return pn_fail(e, PN_ELIMIT, "report: too many distinct (stack, labels) pairs");
    if (grow(&r->recs, &r->recs_cap, r->nrecs, sizeof *r->recs, "sample", e) != 0)
        return -1;
    r->recs[r->nrecs] = (pn_report_rec){node, lset, 0, 0, prof};
    if (slots_put(&r->rec_ix, r, 0, r->nrecs, rec_hash, h, e) != 0)
        return -1;
    at = r->nrecs++;
found:
    r->recs[at].value += value;
    r->recs[at].count += count;
    return 0;
}

pn_report *pn_report_new(void)
{
    pn_report *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->max_profile_bytes = PN_REPORT_MAX_PROFILE_BYTES;
    r->max_depth = PN_REPORT_MAX_DEPTH;
    r->max_nodes = PN_REPORT_MAX_NODES;
    r->max_names = PN_REPORT_MAX_NAMES;
    r->max_page_recs = PN_HTML_MAX_RECS;
    r->cwd = getcwd(NULL, 0); /* NULL (no relative paths) if it cannot be read */
    if (slots_build(&r->name_ix, 128, r, 0, 0, name_hash, NULL) != 0 ||
        slots_build(&r->func_ix, 128, r, 0, 0, func_hash, NULL) != 0 ||
        slots_build(&r->node_ix, 128, r, 1, 1, node_hash, NULL) != 0 ||
        slots_build(&r->lset_ix, 128, r, 0, 0, lset_hash, NULL) != 0 ||
        slots_build(&r->rec_ix, 128, r, 0, 0, rec_hash, NULL) != 0 ||
        name_intern(r, "", NULL) != 0 || func_intern(r, 0, 0, 0, NULL) != 0 ||
        grow(&r->nodes, &r->nodes_cap, 0, sizeof *r->nodes, "call tree", NULL) != 0 ||
        grow(&r->lset_off, &r->lsets_cap, 1, sizeof *r->lset_off, "label set", NULL) != 0) {
        pn_report_free(r);
        return NULL;
    }
    r->nodes[0] = (pn_report_node){.func = 0, .parent = PN_REPORT_NONE,
                                   .first_child = PN_REPORT_NONE,
                                   .next_sibling = PN_REPORT_NONE};
    r->nnodes = 1;
    r->lset_off[0] = r->lset_off[1] = 0;
    r->nlsets = 1; /* the empty set, never looked up by hash */
    return r;
}

void pn_report_free(pn_report *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->names);
    free(r->name_ix.slots);
    free(r->funcs);
    free(r->func_ix.slots);
    free(r->nodes);
    free(r->node_ix.slots);
    free(r->lab);
    free(r->lset_off);
    free(r->lset_ix.slots);
    free(r->recs);
    free(r->rec_ix.slots);
    free(r->lset_sel);
    free(r->prof_time);
    for (uint32_t i = 0; i < r->nhidden; i++)
        free(r->hidden[i]);
    free(r->sample_type);
    free(r->sample_unit);
    free(r->want_type);
    free(r->cwd);
    free(r);
}

size_t pn_report_profiles(const pn_report *r) { return r ? r->profiles : 0; }

size_t pn_report_skipped(const pn_report *r) { return r ? (size_t)r->skipped_profiles : 0; }

int pn_report_set_type(pn_report *r, const char *type, pn_error *e)
{
    if (!r || r->profiles)
        return pn_fail(e, PN_ESTATE, "report: the type is chosen before any profile is read");
    char *t = type && *type ? strdup(type) : NULL;
    if (type && *type && !t)
        return pn_fail(e, PN_ENOMEM, "report: out of memory");
    free(r->want_type);
    r->want_type = t;
    return 0;
}

int pn_report_hide_root_files(pn_report *r, const char *const *files, size_t n,
                              pn_error *e)
{
    if (!r || (n && !files))
        return pn_fail(e, PN_EINVAL, "pn_report_hide_root_files: a report is required");
    if (n > PN_REPORT_MAX_HIDDEN)
        return pn_fail(e, PN_EINVAL, "pn_report_hide_root_files: %zu files, at most %u",
                       n, PN_REPORT_MAX_HIDDEN);
    if (r->nfuncs > 1)
        return pn_fail(e, PN_ESTATE, "pn_report_hide_root_files: call it before adding "
                       "profiles");
    for (uint32_t i = 0; i < r->nhidden; i++)
        free(r->hidden[i]);
    r->nhidden = 0;
    for (size_t i = 0; i < n; i++) {
        if (!files[i] || !*files[i])
            return pn_fail(e, PN_EINVAL, "pn_report_hide_root_files: file %zu is empty", i);
        if (!(r->hidden[r->nhidden] = strdup(files[i])))
            return pn_fail(e, PN_ENOMEM, "pn_report_hide_root_files: out of memory");
        r->nhidden++;
    }
    return 0;
}

typedef struct {
    const char *name, *file;
    uint32_t id;
} func_key;

typedef struct {
    uint32_t rank;
    uint32_t node;
} child_key;

static int cmp_func_key(const void *a, const void *b)
{
    const func_key *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->file, y->file);
}

static int cmp_child_key(const void *a, const void *b)
{
    uint32_t x = ((const child_key *)a)->rank, y = ((const child_key *)b)->rank;
    return (x > y) - (x < y);
}

int pn_report_preorder(const pn_report *r, uint32_t **out, pn_error *e)
{
    *out = NULL;
    uint32_t n = r->nnodes;
    func_key *keys = malloc((size_t)r->nfuncs * sizeof *keys);
    uint32_t *rank = malloc((size_t)r->nfuncs * sizeof *rank);
    uint32_t *order = malloc((size_t)n * sizeof *order);
    uint32_t *stack = malloc((size_t)n * sizeof *stack);
    size_t kids_cap = 64;
    child_key *kids = malloc(kids_cap * sizeof *kids);
    int rc = -1;
    if (!keys || !rank || !order || !stack || !kids) {
        pn_fail(e, PN_ENOMEM, "report: cannot allocate the ordering of %u nodes", n);
        goto done;
    }
    /* Sorting functions once turns every sibling comparison into an
     * integer one. */
    for (uint32_t i = 0; i < r->nfuncs; i++)
        keys[i] = (func_key){r->names[r->funcs[i].name], r->names[r->funcs[i].file], i};
    qsort(keys, r->nfuncs, sizeof *keys, cmp_func_key);
    for (uint32_t i = 0; i < r->nfuncs; i++)
        rank[keys[i].id] = i;

    /* Every node is pushed exactly once, so n entries of stack suffice. */
    uint32_t sp = 0, k = 0;
    stack[sp++] = PN_REPORT_ROOT;
    while (sp > 0) {
        uint32_t u = stack[--sp];
        order[k++] = u;
        size_t nk = 0;
        for (uint32_t c = r->nodes[u].first_child; c != PN_REPORT_NONE;
             c = r->nodes[c].next_sibling) {
            if (grow(&kids, &kids_cap, nk, sizeof *kids, "ordering", e) != 0)
                goto done;
            kids[nk++] = (child_key){rank[r->nodes[c].func], c};
        }
        qsort(kids, nk, sizeof *kids, cmp_child_key);
        /* Pushed last-first so the first name comes off the stack first. */
        while (nk > 0)
            stack[sp++] = kids[--nk].node;
    }
    *out = order;
    order = NULL;
    rc = 0;
done:
    free(keys);
    free(rank);
    free(order);
    free(stack);
    free(kids);
    return rc;
}

/* ------------------------------------------------------- pprof decoding */

/* protobuf-c allocates every repeated message separately, so a small input
 * can expand many times over in memory. All decoding allocations go through
 * this budget so a hostile file fails instead of exhausting memory. */
typedef struct {
    size_t used, budget;
    int exceeded;
} decode_budget;

typedef union {
    max_align_t align;
    size_t size;
} block_head;

static void *budget_alloc(void *ud, size_t n)
{
    decode_budget *b = ud;
    if (n > b->budget - b->used) {
        b->exceeded = 1;
        return NULL;
    }
    block_head *h = malloc(sizeof *h + n);
    if (!h)
        return NULL;
    h->size = n;
    b->used += n;
    return h + 1;
}

static void budget_free(void *ud, void *p)
{
    if (!p)
        return;
    decode_budget *b = ud;
    block_head *h = (block_head *)p - 1;
    b->used -= h->size;
    free(h);
}

/* Bytes of protobuf-c structs per encoded byte. Measured profiles need 6-8x
 * and a profile of nothing but one-line locations about 17x; tiny empty
 * messages could reach ~50x, which only a hostile file has. */
#define DECODE_EXPANSION 32
#define DECODE_SLACK ((size_t)16 << 20)
#define DECODE_MAX ((size_t)1 << 30)

static size_t decode_budget_for(size_t raw_len)
{
    if (raw_len > (DECODE_MAX - DECODE_SLACK) / DECODE_EXPANSION)
        return DECODE_MAX;
    return raw_len * DECODE_EXPANSION + DECODE_SLACK;
}

/* Function and location ids are usually 1..n in order; otherwise a sorted
 * copy answers lookups. */
typedef struct {
    uint64_t id;
    uint32_t pos;
} id_entry;

typedef struct {
    size_t n;
    int dense;
    id_entry *sorted;
} id_index;

static int cmp_id_entry(const void *a, const void *b)
{
    uint64_t x = ((const id_entry *)a)->id, y = ((const id_entry *)b)->id;
    return (x > y) - (x < y);
}

/* Takes ownership of ents (n entries, pos = position in the profile). */
static int id_index_init(id_index *ix, id_entry *ents, size_t n, const char *what,
                         const char *kind, pn_error *e)
{
    ix->n = n;
    ix->sorted = ents;
    ix->dense = 1;
    for (size_t i = 0; i < n && ix->dense; i++)
        ix->dense = ents[i].id == (uint64_t)i + 1;
    if (ix->dense)
        return 0;
    qsort(ents, n, sizeof *ents, cmp_id_entry);
    for (size_t i = 0; i < n; i++) {
        if (ents[i].id == 0)
            return pn_fail(e, PN_EPROTO, "%s: a %s has id 0 (ids start at 1)", what,
                           kind);
        if (i > 0 && ents[i].id == ents[i - 1].id)
            return pn_fail(e, PN_EPROTO, "%s: %s id %" PRIu64 " is used twice", what,
                           kind, ents[i].id);
    }
    return 0;
}

static uint32_t id_index_find(const id_index *ix, uint64_t id)
{
    if (ix->dense)
        return id >= 1 && id <= ix->n ? (uint32_t)(id - 1) : PN_REPORT_NONE;
    id_entry key = {id, 0};
    const id_entry *hit = bsearch(&key, ix->sorted, ix->n, sizeof key, cmp_id_entry);
    return hit ? hit->pos : PN_REPORT_NONE;
}

/* One profile being merged: its tables translated into report ids. */
typedef struct {
    pn_report *r;
    const pprof_profile *p;
    const char *what;       /* the file name (or "profile buffer") for messages */
    uint32_t source;        /* name id of the path given, for the source label */
    id_index funcs, locs;
    uint32_t *func_id;      /* report function of each function */
    uint32_t *loc_off;      /* n_location + 1 offsets into loc_funcs */
    uint32_t *loc_funcs;    /* per location, its lines' functions, leaf-most first */
    uint32_t *loc_lines;    /* and their line numbers */
    uint32_t *path;         /* one sample's functions, root first */
    uint32_t *path_lines;
    uint32_t *pairs;        /* one sample's labels as (key, value) ids */
    size_t pairs_cap;
    int count_index;        /* of the "samples" sample type, -1 if none */
    int value_index;        /* of the sample type reported */
    uint32_t truncated_func, launcher_func;
} profile_reader;

static void reader_free(profile_reader *pr)
{
    free(pr->funcs.sorted);
    free(pr->locs.sorted);
    free(pr->func_id);
    free(pr->loc_off);
    free(pr->loc_funcs);
    free(pr->loc_lines);
    free(pr->path);
    free(pr->path_lines);
    free(pr->pairs);
}

static const char *pstr(const pprof_profile *p, int64_t idx)
{
    if (idx < 0 || (uint64_t)idx >= p->n_string_table)
        return NULL;
    return p->string_table[idx];
}

/* Checks a string index the report relies on; names the field on failure. */
static int check_str(const profile_reader *pr, int64_t idx, const char *field,
                     pn_error *e)
{
    if (pstr(pr->p, idx))
        return 0;
    return pn_fail(e, PN_EPROTO,
                   "%s: %s refers to string %" PRId64 ", but the string table has "
                   "%zu entries",
                   pr->what, field, idx, pr->p->n_string_table);
}

static uint32_t line_of(int64_t line)
{
    return line > 0 && line <= UINT32_MAX ? (uint32_t)line : 0;
}

/* A function without a name or file of its own ("[unknown]", addresses). */
static uint32_t func_named(pn_report *r, const char *name, pn_error *e)
{
    uint32_t n = name_intern(r, name, e);
    return n == PN_REPORT_NONE ? n : func_intern(r, n, 0, 0, e);
}

static int read_functions(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    size_t n = p->n_function;
    id_entry *ents = malloc((n ? n : 1) * sizeof *ents);
    pr->func_id = malloc((n ? n : 1) * sizeof *pr->func_id);
    if (!ents || !pr->func_id) {
        free(ents);
        return pn_fail(e, PN_ENOMEM, "%s: cannot index %zu functions", pr->what, n);
    }
    for (size_t i = 0; i < n; i++)
        ents[i] = (id_entry){p->function[i]->id, (uint32_t)i};
    if (id_index_init(&pr->funcs, ents, n, pr->what, "function", e) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        if (check_str(pr, f->name, "a function name", e) != 0 ||
            check_str(pr, f->system_name, "a function system name", e) != 0 ||
            check_str(pr, f->filename, "a function file name", e) != 0)
            return -1;
        /* Name first; the system (mangled) name when a symbolizer left only
         * that. */
        const char *name = pstr(p, f->name);
        if (!*name)
            name = pstr(p, f->system_name);
        if (!*name)
            name = NAME_UNKNOWN;
        uint32_t nid = name_intern(pr->r, name, e);
        uint32_t fid = nid == PN_REPORT_NONE ? nid
                       : name_intern(pr->r, pstr(p, f->filename), e);
        if (fid == PN_REPORT_NONE)
            return -1;
        pr->func_id[i] = func_intern(pr->r, nid, fid, line_of(f->start_line), e);
        if (pr->func_id[i] == PN_REPORT_NONE)
            return -1;
    }
    return 0;
}

static int read_locations(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    size_t n = p->n_location, nlines = 0;
    for (size_t i = 0; i < n; i++)
        nlines += p->location[i]->n_line ? p->location[i]->n_line : 1;
    if (nlines > UINT32_MAX)
        return pn_fail(e, PN_ELIMIT, "%s: more than %u location lines", pr->what,
                       UINT32_MAX);
    id_entry *ents = malloc((n ? n : 1) * sizeof *ents);
    pr->loc_off = malloc((n + 1) * sizeof *pr->loc_off);
    pr->loc_funcs = malloc((nlines ? nlines : 1) * sizeof *pr->loc_funcs);
    pr->loc_lines = malloc((nlines ? nlines : 1) * sizeof *pr->loc_lines);
    if (!ents || !pr->loc_off || !pr->loc_funcs || !pr->loc_lines) {
        free(ents);
        return pn_fail(e, PN_ENOMEM, "%s: cannot index %zu locations", pr->what, n);
    }
    for (size_t i = 0; i < n; i++)
        ents[i] = (id_entry){p->location[i]->id, (uint32_t)i};
    if (id_index_init(&pr->locs, ents, n, pr->what, "location", e) != 0)
        return -1;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const Perftools__Profiles__Location *loc = p->location[i];
        pr->loc_off[i] = k;
        if (loc->n_line == 0) {
            /* Not symbolized: the address is all there is to show. */
            char buf[32];
            const char *name = NAME_UNKNOWN;
            if (loc->address) {
                snprintf(buf, sizeof buf, "0x%" PRIx64, loc->address);
                name = buf;
            }
            pr->loc_lines[k] = 0;
            pr->loc_funcs[k] = func_named(pr->r, name, e);
            if (pr->loc_funcs[k++] == PN_REPORT_NONE)
                return -1;
            continue;
        }
        /* pprof order: line[0] is the innermost inlined function and the
         * last line the real caller, i.e. leaf-most first like the stack. */
        for (size_t j = 0; j < loc->n_line; j++) {
            uint64_t fid = loc->line[j]->function_id;
            uint32_t func, line = line_of(loc->line[j]->line);
            if (fid == 0) {
                func = func_named(pr->r, NAME_UNKNOWN, e);
                if (func == PN_REPORT_NONE)
                    return -1;
            } else {
                uint32_t f = id_index_find(&pr->funcs, fid);
                if (f == PN_REPORT_NONE)
                    return pn_fail(e, PN_EPROTO,
                                   "%s: location %" PRIu64 " refers to function %" PRIu64
                                   ", which the profile does not define",
                                   pr->what, loc->id, fid);
                func = pr->func_id[f];
                if (line && (pr->r->funcs[func].line == 0 || line < pr->r->funcs[func].line))
                    pr->r->funcs[func].line = line;
            }
            pr->loc_funcs[k] = func;
            pr->loc_lines[k++] = line;
        }
    }
    pr->loc_off[n] = k;
    return 0;
}

/* Everything is checked before the first sample is merged, so a malformed
 * file leaves the report as it was. */
static int check_samples(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    if (p->n_sample > 0 && p->n_sample_type == 0)
        return pn_fail(e, PN_EPROTO, "%s: has %zu samples but no sample types",
                       pr->what, p->n_sample);
    int64_t sum = pr->r->nodes[PN_REPORT_ROOT].total;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_value != p->n_sample_type)
            return pn_fail(e, PN_EPROTO,
                           "%s: sample %zu has %zu values but the profile has %zu "
                           "sample types",
                           pr->what, i, s->n_value, p->n_sample_type);
        for (size_t j = 0; j < s->n_value; j++) {
            if (s->value[j] < 0)
                return pn_fail(e, PN_EPROTO,
                               "%s: sample %zu has the negative value %" PRId64
                               " (difference profiles are not supported)",
                               pr->what, i, s->value[j]);
        }
        if (__builtin_add_overflow(sum, s->value[0], &sum))
            return pn_fail(e, PN_ELIMIT,
                           "%s: the merged total of the first sample type "
                           "overflows 64 bits",
                           pr->what);
        for (size_t j = 0; j < s->n_location_id; j++) {
            if (id_index_find(&pr->locs, s->location_id[j]) == PN_REPORT_NONE)
                return pn_fail(e, PN_EPROTO,
                               "%s: sample %zu refers to location %" PRIu64
                               ", which the profile does not define",
                               pr->what, i, s->location_id[j]);
        }
        for (size_t j = 0; j < s->n_label; j++) {
            if (check_str(pr, s->label[j]->key, "a label key", e) != 0 ||
                check_str(pr, s->label[j]->str, "a label value", e) != 0 ||
                check_str(pr, s->label[j]->num_unit, "a label unit", e) != 0)
                return -1;
        }
    }
    return 0;
}

/* 0: read it (value_index set); 1: skip it, it has not the type the report
 * shows (a folder of CPU and memory profiles); -1: malformed. */
static int check_sample_type(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    const pn_report *r = pr->r;
    pr->count_index = -1;
    pr->value_index = 0;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        if (check_str(pr, p->sample_type[i]->type, "a sample type", e) != 0 ||
            check_str(pr, p->sample_type[i]->unit, "a sample unit", e) != 0)
            return -1;
        if (pr->count_index < 0 && strcmp(pstr(p, p->sample_type[i]->type), "samples") == 0)
            pr->count_index = (int)i;
    }
    if (p->n_sample_type == 0)
        return 0;
    /* The type asked for, else the one the report holds, else this
     * profile's first. */
    const char *want = r->want_type ? r->want_type : r->sample_type;
    if (!want)
        return 0;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        if (strcmp(pstr(p, p->sample_type[i]->type), want) != 0 ||
            (r->sample_unit && strcmp(pstr(p, p->sample_type[i]->unit), r->sample_unit) != 0))
            continue;
        pr->value_index = (int)i;
        /* Counted samples only where the values are CPU or wall time. */
        if (pr->count_index >= 0 && i != 0)
            pr->count_index = -1;
        return 0;
    }
    if (r->want_type || r->in_folder)
        return 1;
    return pn_fail(e, PN_EINVAL,
                   "%s: its first sample type is %s/%s but the report already "
                   "holds %s/%s; report different types separately (or choose one)",
                   pr->what, pstr(p, p->sample_type[0]->type),
                   pstr(p, p->sample_type[0]->unit), r->sample_type, r->sample_unit);
}

/* Root-first functions (and lines) of sample s into pr->path (at most
 * max_depth of them: a deeper stack keeps its root end and ends in
 * "[truncated]"), hidden root frames left out. */
static int sample_path(profile_reader *pr, const Perftools__Profiles__Sample *s,
                       uint32_t *len, pn_error *e)
{
    pn_report *r = pr->r;
    uint64_t count = 0;
    for (size_t j = 0; j < s->n_location_id; j++) {
        uint32_t l = id_index_find(&pr->locs, s->location_id[j]);
        count += pr->loc_off[l + 1] - pr->loc_off[l];
    }
    uint32_t keep = (uint32_t)(count <= r->max_depth ? count : r->max_depth - 1);
    uint32_t n = 0;
    /* Walks from the root end and stops once `keep` names are in, so a
     * hostile stack costs no more than max_depth steps per location. */
    for (size_t j = s->n_location_id; j-- > 0 && n < keep;) {
        uint32_t l = id_index_find(&pr->locs, s->location_id[j]);
        for (uint32_t k = pr->loc_off[l + 1]; k-- > pr->loc_off[l] && n < keep; n++) {
            pr->path[n] = pr->loc_funcs[k];
            pr->path_lines[n] = pr->loc_lines[k];
        }
    }
    if (count > keep) {
        if (pr->truncated_func == PN_REPORT_NONE) {
            pr->truncated_func = func_named(r, NAME_TRUNCATED, e);
            if (pr->truncated_func == PN_REPORT_NONE)
                return -1;
        }
        pr->path_lines[n] = 0;
        pr->path[n++] = pr->truncated_func;
        r->truncated_stacks++;
    }
    uint32_t skip = 0;
    while (skip < n && r->funcs[pr->path[skip]].hidden)
        skip++;
    if (skip > 0 && skip == n) {
        /* The launcher's own time (start-up, exit): one frame says so. */
        if (pr->launcher_func == PN_REPORT_NONE) {
            pr->launcher_func = func_named(r, NAME_LAUNCHER, e);
            if (pr->launcher_func == PN_REPORT_NONE)
                return -1;
        }
        pr->path[0] = pr->launcher_func;
        pr->path_lines[0] = 0;
        n = 1;
    } else if (skip > 0) {
        memmove(pr->path, pr->path + skip, (n - skip) * sizeof *pr->path);
        memmove(pr->path_lines, pr->path_lines + skip, (n - skip) * sizeof *pr->path_lines);
        n -= skip;
    }
    *len = n;
    return 0;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* The label set of sample s, plus source=<path>. */
static uint32_t sample_lset(profile_reader *pr, const Perftools__Profiles__Sample *s,
                            pn_error *e)
{
    pn_report *r = pr->r;
    size_t need = 2 * (s->n_label + 1);
    if (need > pr->pairs_cap) {
        uint32_t *np = realloc(pr->pairs, need * sizeof *np);
        if (!np) {
            pn_fail(e, PN_ENOMEM, "%s: cannot hold %zu labels", pr->what, s->n_label);
            return PN_REPORT_NONE;
        }
        pr->pairs = np;
        pr->pairs_cap = need;
    }
    uint32_t n = 0;
    for (size_t j = 0; j < s->n_label; j++) {
        const Perftools__Profiles__Label *l = s->label[j];
        const char *key = pstr(pr->p, l->key), *unit = pstr(pr->p, l->num_unit);
        if (!*key)
            continue;
        char num[64];
        const char *value = pstr(pr->p, l->str);
        if (!*value && l->num) {
            snprintf(num, sizeof num, "%" PRId64 "%s%s", l->num, *unit ? " " : "", unit);
            value = num;
        }
        uint32_t k = name_intern(r, key, e);
        uint32_t v = k == PN_REPORT_NONE ? k : name_intern(r, value, e);
        if (v == PN_REPORT_NONE)
            return PN_REPORT_NONE;
        pr->pairs[2 * n] = k;
        pr->pairs[2 * n++ + 1] = v;
    }
    if (pr->source != PN_REPORT_NONE) {
        uint32_t k = name_intern(r, "source", e);
        if (k == PN_REPORT_NONE)
            return k;
        pr->pairs[2 * n] = k;
        pr->pairs[2 * n++ + 1] = pr->source;
    }
    qsort(pr->pairs, n, 2 * sizeof *pr->pairs, cmp_pair);
    return lset_intern(r, pr->pairs, 2 * n, e);
}

static int merge_samples(profile_reader *pr, pn_error *e)
{
    pn_report *r = pr->r;
    const pprof_profile *p = pr->p;
    uint64_t truncated_before = r->truncated_stacks;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        int64_t v = s->value[pr->value_index];
        /* No counts: a sample with a value counts once (a memory profile's
         * in-use samples are zero in its alloc columns, and the reverse). */
        int64_t c = pr->count_index >= 0 ? s->value[pr->count_index] : v != 0;
        r->samples += (uint64_t)c;
        if (v == 0 && c == 0)
            continue; /* adds nothing anywhere */
        uint32_t len, lset = sample_lset(pr, s, e);
        if (lset == PN_REPORT_NONE || sample_path(pr, s, &len, e) != 0)
            return -1;
        uint32_t node = PN_REPORT_ROOT;
        r->nodes[node].total += v;
        r->nodes[node].total_n += c;
        for (uint32_t k = 0; k < len; k++) {
            node = node_child(r, node, pr->path[k], e);
            if (node == PN_REPORT_NONE)
                return -1;
            pn_report_node *nd = &r->nodes[node];
            nd->total += v;
            nd->total_n += c;
            if (pr->path_lines[k] && (nd->line == 0 || pr->path_lines[k] < nd->line))
                nd->line = pr->path_lines[k];
        }
        r->nodes[node].self += v;
        r->nodes[node].self_n += c;
        if (rec_add(r, node, lset, v, c, e) != 0)
            return -1;
    }
    if (r->truncated_stacks > truncated_before)
        pn_log(PN_LOG_WARN, "report: %s: %" PRIu64 " stack(s) deeper than %u frames "
               "cut at the leaf end and marked " NAME_TRUNCATED,
               pr->what, r->truncated_stacks - truncated_before, r->max_depth);
    return 0;
}

static int merge_profile(pn_report *r, const pprof_profile *p, const char *what,
                         const char *source, pn_error *e)
{
    profile_reader pr = {.r = r, .p = p, .what = what, .source = PN_REPORT_NONE,
                         .truncated_func = PN_REPORT_NONE, .launcher_func = PN_REPORT_NONE};
    uint64_t bad_before = r->invalid_utf8;
    int rc = -1;
    if (p->n_string_table == 0 || p->string_table[0][0] != '\0') {
        pn_fail(e, PN_EPROTO, "%s: the string table must start with \"\"", what);
        goto done;
    }
    if (p->n_function > UINT32_MAX || p->n_location > UINT32_MAX) {
        pn_fail(e, PN_ELIMIT, "%s: more than %u functions or locations", what,
                UINT32_MAX);
        goto done;
    }
    pr.path = malloc(((size_t)r->max_depth + 1) * sizeof *pr.path);
    pr.path_lines = malloc(((size_t)r->max_depth + 1) * sizeof *pr.path_lines);
    if (!pr.path || !pr.path_lines) {
        pn_fail(e, PN_ENOMEM, "%s: cannot allocate a stack of %u frames", what,
                r->max_depth);
        goto done;
    }
    if (source && *source && (pr.source = name_intern(r, source, e)) == PN_REPORT_NONE)
        goto done;
    int st = check_sample_type(&pr, e);
    if (st > 0) {
        r->skipped_profiles++;
        rc = 0;
        goto done;
    }
    if (st != 0 || read_functions(&pr, e) != 0 || read_locations(&pr, e) != 0 ||
        check_samples(&pr, e) != 0)
        goto done;
    if (p->n_sample_type > 0 && !r->sample_type) {
        r->sample_type = strdup(pstr(p, p->sample_type[pr.value_index]->type));
        r->sample_unit = strdup(pstr(p, p->sample_type[pr.value_index]->unit));
        if (!r->sample_type || !r->sample_unit) {
            free(r->sample_type);
            free(r->sample_unit);
            r->sample_type = r->sample_unit = NULL;
            pn_fail(e, PN_ENOMEM, "%s: cannot copy the sample type", what);
            goto done;
        }
    }
    /* Its time span first: records name the profile by its index. */
    if (grow(&r->prof_time, &r->prof_cap, 2 * r->profiles + 1, sizeof *r->prof_time,
             "profile", e) != 0)
        goto done;
    r->prof_time[2 * r->profiles] = p->time_nanos;
    r->prof_time[2 * r->profiles + 1] = p->duration_nanos;
    if (merge_samples(&pr, e) != 0)
        goto done;
    r->profiles++;
    rc = 0;
done:
    if (r->invalid_utf8 > bad_before)
        pn_log(PN_LOG_WARN, "report: %s: %" PRIu64 " name(s) or label(s) were not valid "
               "UTF-8; their bad bytes are shown as U+FFFD",
               what, r->invalid_utf8 - bad_before);
    reader_free(&pr);
    return rc;
}

/* Decodes (gzip'ed or raw) pprof bytes named `what` and merges them. */
static int add_data(pn_report *r, const uint8_t *data, size_t len, const char *what,
                    const char *source, pn_error *e)
{
    /* Merging adds to every node as for the whole report. */
    if (r->selected && pn_report_select(r, NULL, 0, e) != 0)
        return -1;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    pn_error ge;
    pn_error_clear(&ge);
    if (pn_gunzip(data, len, r->max_profile_bytes, &raw, &raw_len, &ge) != 0)
        return pn_fail(e, ge.code, "%s: %s", what, ge.msg);
    if (raw_len == 0) {
        free(raw);
        return pn_fail(e, PN_EPROTO, "%s: the profile is empty", what);
    }
    decode_budget budget = {0, decode_budget_for(raw_len), 0};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &budget};
    pprof_profile *p = perftools__profiles__profile__unpack(&alloc, raw_len, raw);
    free(raw);
    if (!p) {
        if (budget.exceeded)
            return pn_fail(e, PN_ELIMIT,
                           "%s: decoding the %zu-byte profile needs more than %zu "
                           "MiB of memory",
                           what, raw_len, budget.budget >> 20);
        return pn_fail(e, PN_EPROTO,
                       "%s: not a pprof profile (protobuf decoding failed on %zu bytes)",
                       what, raw_len);
    }
    int rc = merge_profile(r, p, what, source, e);
    perftools__profiles__profile__free_unpacked(p, &alloc);
    return rc;
}

int pn_report_add_buffer(pn_report *r, const uint8_t *data, size_t len, pn_error *e)
{
    if (!r || (!data && len > 0))
        return pn_fail(e, PN_EINVAL, "pn_report_add_buffer: report and data are required");
    return add_data(r, data, len, "profile buffer", NULL, e);
}

static int add_file(pn_report *r, const char *path, const char *source, pn_error *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pn_fail(e, PN_EIO, "cannot open profile '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return pn_fail(e, PN_EIO, "cannot stat profile '%s': %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return pn_fail(e, PN_EINVAL, "'%s' is neither a profile file nor a folder", path);
    }
    /* Compressed data is smaller than what it inflates to, so the decoded
     * bound applies to the file too. */
    if ((uint64_t)st.st_size > r->max_profile_bytes) {
        close(fd);
        return pn_fail(e, PN_ELIMIT, "profile '%s' has %lld bytes, more than the "
                       "limit of %zu", path, (long long)st.st_size,
                       r->max_profile_bytes);
    }
    size_t cap = (size_t)st.st_size, len = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) {
        close(fd);
        return pn_fail(e, PN_ENOMEM, "cannot allocate %zu bytes for '%s'", cap, path);
    }
    /* Reads what fstat promised; a file that grows meanwhile is read to
     * that size, one that shrinks is read to its end. */
    while (len < cap) {
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int err = errno;
            close(fd);
            free(buf);
            return pn_fail(e, PN_EIO, "cannot read profile '%s': %s", path,
                           strerror(err));
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    int rc = add_data(r, buf, len, path, source, e);
    free(buf);
    return rc;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* Every regular *.pb / *.pb.gz file of `dir`, in name order. */
static int add_folder(pn_report *r, const char *dir, const char *source, pn_error *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return pn_fail(e, PN_EIO, "cannot open folder '%s': %s", dir, strerror(errno));
    char **files = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                pn_fail(e, PN_EIO, "cannot list folder '%s': %s", dir, strerror(errno));
                goto done;
            }
            break;
        }
        if (!has_suffix(de->d_name, ".pb") && !has_suffix(de->d_name, ".pb.gz"))
            continue;
        size_t plen = strlen(dir) + 1 + strlen(de->d_name) + 1;
        char *full = malloc(plen);
        if (!full) {
            pn_fail(e, PN_ENOMEM, "cannot allocate a path in '%s'", dir);
            goto done;
        }
        snprintf(full, plen, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
            pn_log(PN_LOG_WARN, "report: skipping '%s': not a regular file", full);
            free(full);
            continue;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **nf = realloc(files, ncap * sizeof *nf);
            if (!nf) {
                free(full);
                pn_fail(e, PN_ENOMEM, "cannot list %zu files of '%s'", ncap, dir);
                goto done;
            }
            files = nf;
            cap = ncap;
        }
        files[n++] = full;
    }
    if (n == 0) {
        pn_fail(e, PN_EINVAL, "folder '%s' holds no profiles (*.pb or *.pb.gz files)",
                dir);
        goto done;
    }
    qsort(files, n, sizeof *files, cmp_str_ptr);
    for (size_t i = 0; i < n; i++) {
        if (add_file(r, files[i], source, e) != 0)
            goto done;
    }
    rc = 0;
done:
    closedir(d);
    free_list(files, n);
    return rc;
}

int pn_report_add_path(pn_report *r, const char *path, pn_error *e)
{
    if (!r || !path || !*path)
        return pn_fail(e, PN_EINVAL, "pn_report_add_path: a report and a path are required");
    struct stat st;
    if (stat(path, &st) != 0)
        return pn_fail(e, PN_EIO, "cannot open profile path '%s': %s", path,
                       strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        /* A folder holds one file per profile type (CPU and memory, say):
         * those without the type shown are left out, not refused. */
        r->in_folder++;
        int rc = add_folder(r, path, path, e);
        r->in_folder--;
        return rc;
    }
    return add_file(r, path, path, e);
}

int pn_report_add_folder_file(pn_report *r, const char *path, const char *folder, pn_error *e)
{
    if (!r || !path || !*path || !folder)
        return pn_fail(e, PN_EINVAL, "pn_report_add_folder_file: a report, a path and a "
                       "folder are required");
    r->in_folder++;
    int rc = add_file(r, path, folder, e);
    r->in_folder--;
    return rc;
}
