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

/* ------------------------------------------------------------ the tree */

static int names_rehash(pn_report *r, uint32_t nslots, pn_error *e)
{
    uint32_t *slots = malloc((size_t)nslots * sizeof *slots);
    if (!slots)
        return pn_fail(e, PN_ENOMEM, "report: cannot allocate %u name slots", nslots);
    memset(slots, 0xff, (size_t)nslots * sizeof *slots);
    uint32_t mask = nslots - 1;
    for (uint32_t i = 0; i < r->nnames; i++) {
        uint32_t h = pn_hash_bytes(r->names[i], strlen(r->names[i]), PN_HASH_SEED);
        while (slots[h & mask] != PN_REPORT_NONE)
            h++;
        slots[h & mask] = i;
    }
    free(r->name_slots);
    r->name_slots = slots;
    r->name_mask = mask;
    return 0;
}

/* The index of name s (NUL-terminated), added when new; NONE on failure. */
static uint32_t name_intern(pn_report *r, const char *s, pn_error *e)
{
    size_t len = strlen(s);
    uint32_t h = pn_hash_bytes(s, len, PN_HASH_SEED);
    for (uint32_t i = h;; i++) {
        uint32_t at = r->name_slots[i & r->name_mask];
        if (at == PN_REPORT_NONE)
            break;
        if (strcmp(r->names[at], s) == 0)
            return at;
    }
    if (r->nnames >= r->max_names) {
        pn_fail(e, PN_ELIMIT, "report: more than %u distinct function names",
                r->max_names);
        return PN_REPORT_NONE;
    }
    if (r->nnames == r->names_cap) {
        uint32_t ncap = r->names_cap * 2;
        char **nn = realloc(r->names, (size_t)ncap * sizeof *nn);
        if (!nn) {
            pn_fail(e, PN_ENOMEM, "report: cannot grow the name table to %u", ncap);
            return PN_REPORT_NONE;
        }
        r->names = nn;
        r->names_cap = ncap;
    }
    /* Keep the table at most half full so probes stay short. */
    if ((uint64_t)(r->nnames + 1) * 2 > (uint64_t)r->name_mask + 1 &&
        names_rehash(r, (r->name_mask + 1) * 2, e) != 0)
        return PN_REPORT_NONE;
    char *copy = malloc(len + 1);
    if (!copy) {
        pn_fail(e, PN_ENOMEM, "report: cannot copy a %zu-byte function name", len);
        return PN_REPORT_NONE;
    }
    memcpy(copy, s, len + 1);
    uint32_t id = r->nnames++;
    r->names[id] = copy;
    for (uint32_t i = h;; i++) {
        if (r->name_slots[i & r->name_mask] == PN_REPORT_NONE) {
            r->name_slots[i & r->name_mask] = id;
            break;
        }
    }
    return id;
}

static uint32_t node_hash(uint32_t parent, uint32_t name)
{
    return pn_hash_u32(pn_hash_u32(PN_HASH_SEED, parent), name);
}

static int nodes_rehash(pn_report *r, uint32_t nslots, pn_error *e)
{
    uint32_t *slots = malloc((size_t)nslots * sizeof *slots);
    if (!slots)
        return pn_fail(e, PN_ENOMEM, "report: cannot allocate %u node slots", nslots);
    memset(slots, 0xff, (size_t)nslots * sizeof *slots);
    uint32_t mask = nslots - 1;
    /* The root has no parent and is never looked up. */
    for (uint32_t i = 1; i < r->nnodes; i++) {
        uint32_t h = node_hash(r->nodes[i].parent, r->nodes[i].name);
        while (slots[h & mask] != PN_REPORT_NONE)
            h++;
        slots[h & mask] = i;
    }
    free(r->node_slots);
    r->node_slots = slots;
    r->node_mask = mask;
    return 0;
}

/* The child of `parent` called `name`, created when new; NONE on failure. */
static uint32_t node_child(pn_report *r, uint32_t parent, uint32_t name, pn_error *e)
{
    uint32_t h = node_hash(parent, name);
    for (uint32_t i = h;; i++) {
        uint32_t at = r->node_slots[i & r->node_mask];
        if (at == PN_REPORT_NONE)
            break;
        if (r->nodes[at].parent == parent && r->nodes[at].name == name)
            return at;
    }
    if (r->nnodes >= r->max_nodes) {
        pn_fail(e, PN_ELIMIT, "report: the merged call tree exceeds %u nodes",
                r->max_nodes);
        return PN_REPORT_NONE;
    }
    if (r->nnodes == r->nodes_cap) {
        uint32_t ncap = r->nodes_cap * 2;
        pn_report_node *nn = realloc(r->nodes, (size_t)ncap * sizeof *nn);
        if (!nn) {
            pn_fail(e, PN_ENOMEM, "report: cannot grow the call tree to %u nodes", ncap);
            return PN_REPORT_NONE;
        }
        r->nodes = nn;
        r->nodes_cap = ncap;
    }
    if ((uint64_t)r->nnodes * 2 > (uint64_t)r->node_mask + 1 &&
        nodes_rehash(r, (r->node_mask + 1) * 2, e) != 0)
        return PN_REPORT_NONE;
    uint32_t id = r->nnodes++;
    pn_report_node *n = &r->nodes[id];
    n->name = name;
    n->parent = parent;
    n->first_child = PN_REPORT_NONE;
    n->next_sibling = r->nodes[parent].first_child;
    n->depth = r->nodes[parent].depth + 1;
    n->total = 0;
    n->self = 0;
    r->nodes[parent].first_child = id;
    for (uint32_t i = h;; i++) {
        if (r->node_slots[i & r->node_mask] == PN_REPORT_NONE) {
            r->node_slots[i & r->node_mask] = id;
            break;
        }
    }
    return id;
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
    r->names_cap = 64;
    r->nodes_cap = 64;
    r->names = malloc(r->names_cap * sizeof *r->names);
    r->nodes = malloc(r->nodes_cap * sizeof *r->nodes);
    if (!r->names || !r->nodes || names_rehash(r, 128, NULL) != 0 ||
        nodes_rehash(r, 128, NULL) != 0 || name_intern(r, "", NULL) != 0) {
        pn_report_free(r);
        return NULL;
    }
    r->nodes[0] = (pn_report_node){.name = 0, .parent = PN_REPORT_NONE,
                                   .first_child = PN_REPORT_NONE,
                                   .next_sibling = PN_REPORT_NONE};
    r->nnodes = 1;
    return r;
}

void pn_report_free(pn_report *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->names);
    free(r->name_slots);
    free(r->nodes);
    free(r->node_slots);
    free(r->sample_type);
    free(r->sample_unit);
    free(r);
}

size_t pn_report_profiles(const pn_report *r) { return r ? r->profiles : 0; }

typedef struct {
    const char *name;
    uint32_t id;
} name_key;

typedef struct {
    uint32_t rank;
    uint32_t node;
} child_key;

static int cmp_name_key(const void *a, const void *b)
{
    return strcmp(((const name_key *)a)->name, ((const name_key *)b)->name);
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
    name_key *keys = malloc((size_t)r->nnames * sizeof *keys);
    uint32_t *rank = malloc((size_t)r->nnames * sizeof *rank);
    uint32_t *order = malloc((size_t)n * sizeof *order);
    uint32_t *stack = malloc((size_t)n * sizeof *stack);
    size_t kids_cap = 64;
    child_key *kids = malloc(kids_cap * sizeof *kids);
    int rc = -1;
    if (!keys || !rank || !order || !stack || !kids) {
        pn_fail(e, PN_ENOMEM, "report: cannot allocate the ordering of %u nodes", n);
        goto done;
    }
    /* Sorting names once turns every sibling comparison into an integer one. */
    for (uint32_t i = 0; i < r->nnames; i++)
        keys[i] = (name_key){r->names[i], i};
    qsort(keys, r->nnames, sizeof *keys, cmp_name_key);
    for (uint32_t i = 0; i < r->nnames; i++)
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
            if (nk == kids_cap) {
                child_key *nkids = realloc(kids, kids_cap * 2 * sizeof *kids);
                if (!nkids) {
                    pn_fail(e, PN_ENOMEM, "report: cannot sort %zu children", nk);
                    goto done;
                }
                kids = nkids;
                kids_cap *= 2;
            }
            kids[nk++] = (child_key){rank[r->nodes[c].name], c};
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

/* One profile being merged: its tables translated into report names. */
typedef struct {
    pn_report *r;
    const pprof_profile *p;
    const char *what;       /* the file name (or "profile buffer") for messages */
    id_index funcs, locs;
    uint32_t *func_name;    /* report name of each function */
    uint32_t *loc_off;      /* n_location + 1 offsets into loc_names */
    uint32_t *loc_names;    /* per location, its lines' names, leaf-most first */
    uint32_t *path;         /* one sample's names, root first */
    uint32_t truncated_name;
} profile_reader;

static void reader_free(profile_reader *pr)
{
    free(pr->funcs.sorted);
    free(pr->locs.sorted);
    free(pr->func_name);
    free(pr->loc_off);
    free(pr->loc_names);
    free(pr->path);
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

static int read_functions(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    size_t n = p->n_function;
    id_entry *ents = malloc((n ? n : 1) * sizeof *ents);
    pr->func_name = malloc((n ? n : 1) * sizeof *pr->func_name);
    if (!ents || !pr->func_name) {
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
        pr->func_name[i] = name_intern(pr->r, name, e);
        if (pr->func_name[i] == PN_REPORT_NONE)
            return -1;
    }
    return 0;
}

static int read_locations(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    size_t n = p->n_location, nnames = 0;
    for (size_t i = 0; i < n; i++)
        nnames += p->location[i]->n_line ? p->location[i]->n_line : 1;
    if (nnames > UINT32_MAX)
        return pn_fail(e, PN_ELIMIT, "%s: more than %u location lines", pr->what,
                       UINT32_MAX);
    id_entry *ents = malloc((n ? n : 1) * sizeof *ents);
    pr->loc_off = malloc((n + 1) * sizeof *pr->loc_off);
    pr->loc_names = malloc((nnames ? nnames : 1) * sizeof *pr->loc_names);
    if (!ents || !pr->loc_off || !pr->loc_names) {
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
            pr->loc_names[k] = name_intern(pr->r, name, e);
            if (pr->loc_names[k++] == PN_REPORT_NONE)
                return -1;
            continue;
        }
        /* pprof order: line[0] is the innermost inlined function and the
         * last line the real caller, i.e. leaf-most first like the stack. */
        for (size_t j = 0; j < loc->n_line; j++) {
            uint64_t fid = loc->line[j]->function_id;
            uint32_t name;
            if (fid == 0) {
                name = name_intern(pr->r, NAME_UNKNOWN, e);
                if (name == PN_REPORT_NONE)
                    return -1;
            } else {
                uint32_t f = id_index_find(&pr->funcs, fid);
                if (f == PN_REPORT_NONE)
                    return pn_fail(e, PN_EPROTO,
                                   "%s: location %" PRIu64 " refers to function %" PRIu64
                                   ", which the profile does not define",
                                   pr->what, loc->id, fid);
                name = pr->func_name[f];
            }
            pr->loc_names[k++] = name;
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
        if (s->value[0] < 0)
            return pn_fail(e, PN_EPROTO,
                           "%s: sample %zu has the negative value %" PRId64
                           " (difference profiles are not supported)",
                           pr->what, i, s->value[0]);
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
    }
    return 0;
}

static int check_sample_type(profile_reader *pr, pn_error *e)
{
    const pprof_profile *p = pr->p;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        if (check_str(pr, p->sample_type[i]->type, "a sample type", e) != 0 ||
            check_str(pr, p->sample_type[i]->unit, "a sample unit", e) != 0)
            return -1;
    }
    if (p->n_sample_type == 0 || !pr->r->sample_type)
        return 0;
    const char *type = pstr(p, p->sample_type[0]->type);
    const char *unit = pstr(p, p->sample_type[0]->unit);
    if (strcmp(type, pr->r->sample_type) != 0 || strcmp(unit, pr->r->sample_unit) != 0)
        return pn_fail(e, PN_EINVAL,
                       "%s: its first sample type is %s/%s but the report already "
                       "holds %s/%s; report different types separately",
                       pr->what, type, unit, pr->r->sample_type, pr->r->sample_unit);
    return 0;
}

/* Root-first names of sample s into pr->path (at most max_depth of them: a
 * deeper stack keeps its root end and ends in "[truncated]"). */
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
        for (uint32_t k = pr->loc_off[l + 1]; k-- > pr->loc_off[l] && n < keep;)
            pr->path[n++] = pr->loc_names[k];
    }
    if (count > keep) {
        if (pr->truncated_name == PN_REPORT_NONE) {
            pr->truncated_name = name_intern(r, NAME_TRUNCATED, e);
            if (pr->truncated_name == PN_REPORT_NONE)
                return -1;
        }
        pr->path[n++] = pr->truncated_name;
        r->truncated_stacks++;
    }
    *len = n;
    return 0;
}

static int merge_samples(profile_reader *pr, pn_error *e)
{
    pn_report *r = pr->r;
    const pprof_profile *p = pr->p;
    uint64_t truncated_before = r->truncated_stacks;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        int64_t v = s->value[0];
        r->samples++;
        if (v == 0)
            continue; /* adds nothing anywhere */
        uint32_t len;
        if (sample_path(pr, s, &len, e) != 0)
            return -1;
        uint32_t node = PN_REPORT_ROOT;
        r->nodes[node].total += v;
        for (uint32_t k = 0; k < len; k++) {
            node = node_child(r, node, pr->path[k], e);
            if (node == PN_REPORT_NONE)
                return -1;
            r->nodes[node].total += v;
        }
        r->nodes[node].self += v;
    }
    if (r->truncated_stacks > truncated_before)
        pn_log(PN_LOG_WARN, "report: %s: %" PRIu64 " stack(s) deeper than %u frames "
               "cut at the leaf end and marked " NAME_TRUNCATED,
               pr->what, r->truncated_stacks - truncated_before, r->max_depth);
    return 0;
}

static int merge_profile(pn_report *r, const pprof_profile *p, const char *what,
                         pn_error *e)
{
    profile_reader pr = {.r = r, .p = p, .what = what,
                         .truncated_name = PN_REPORT_NONE};
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
    if (!pr.path) {
        pn_fail(e, PN_ENOMEM, "%s: cannot allocate a stack of %u frames", what,
                r->max_depth);
        goto done;
    }
    if (check_sample_type(&pr, e) != 0 || read_functions(&pr, e) != 0 ||
        read_locations(&pr, e) != 0 || check_samples(&pr, e) != 0)
        goto done;
    if (p->n_sample_type > 0 && !r->sample_type) {
        r->sample_type = strdup(pstr(p, p->sample_type[0]->type));
        r->sample_unit = strdup(pstr(p, p->sample_type[0]->unit));
        if (!r->sample_type || !r->sample_unit) {
            free(r->sample_type);
            free(r->sample_unit);
            r->sample_type = r->sample_unit = NULL;
            pn_fail(e, PN_ENOMEM, "%s: cannot copy the sample type", what);
            goto done;
        }
    }
    if (merge_samples(&pr, e) != 0)
        goto done;
    r->profiles++;
    rc = 0;
done:
    reader_free(&pr);
    return rc;
}

/* Decodes (gzip'ed or raw) pprof bytes named `what` and merges them. */
static int add_data(pn_report *r, const uint8_t *data, size_t len, const char *what,
                    pn_error *e)
{
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
    int rc = merge_profile(r, p, what, e);
    perftools__profiles__profile__free_unpacked(p, &alloc);
    return rc;
}

int pn_report_add_buffer(pn_report *r, const uint8_t *data, size_t len, pn_error *e)
{
    if (!r || (!data && len > 0))
        return pn_fail(e, PN_EINVAL, "pn_report_add_buffer: report and data are required");
    return add_data(r, data, len, "profile buffer", e);
}

static int add_file(pn_report *r, const char *path, pn_error *e)
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
    int rc = add_data(r, buf, len, path, e);
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
static int add_folder(pn_report *r, const char *dir, pn_error *e)
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
        if (add_file(r, files[i], e) != 0)
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
    if (S_ISDIR(st.st_mode))
        return add_folder(r, path, e);
    return add_file(r, path, e);
}
