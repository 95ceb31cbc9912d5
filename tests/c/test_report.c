/* Reports: reading pprof files back, merging them, and the two outputs
 * (flame graph page and "top functions" table). Profiles are built in memory
 * with protobuf-c, so each test states exactly what the file holds. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "profile.pb-c.h"
#include "pyroscope_native.h"
#include "encoding/pprof.h"
#include "pyroscope_report.h"
#include "report_tree.h"

/* ------------------------------------------------------ profile builder */

/* Owns every message it hands to the Profile, freed by pb_free. Functions
 * get ids 1..n; a plain location has the id of its function. */
typedef struct {
    Perftools__Profiles__Profile p;
    Perftools__Profiles__ValueType *vt;
} pb;

#define GROW(arr, n) (arr) = realloc((arr), ((n) + 1) * sizeof *(arr))

static size_t pb_str(pb *b, const char *s)
{
    for (size_t i = 0; i < b->p.n_string_table; i++)
        if (strcmp(b->p.string_table[i], s) == 0)
            return i;
    GROW(b->p.string_table, b->p.n_string_table);
    b->p.string_table[b->p.n_string_table] = strdup(s);
    return b->p.n_string_table++;
}

static pb *pb_new(const char *type, const char *unit)
{
    pb *b = calloc(1, sizeof *b);
    perftools__profiles__profile__init(&b->p);
    pb_str(b, "");
    b->vt = malloc(sizeof *b->vt);
    perftools__profiles__value_type__init(b->vt);
    b->vt->type = (int64_t)pb_str(b, type);
    b->vt->unit = (int64_t)pb_str(b, unit);
    b->p.sample_type = malloc(sizeof *b->p.sample_type);
    b->p.sample_type[0] = b->vt;
    b->p.n_sample_type = 1;
    return b;
}

/* The function called `name` (created on first use); returns its id. */
static uint64_t pb_func(pb *b, const char *name)
{
    int64_t sid = (int64_t)pb_str(b, name);
    for (size_t i = 0; i < b->p.n_function; i++)
        if (b->p.function[i]->name == sid)
            return b->p.function[i]->id;
    Perftools__Profiles__Function *f = malloc(sizeof *f);
    perftools__profiles__function__init(f);
    f->id = b->p.n_function + 1;
    f->name = sid;
    GROW(b->p.function, b->p.n_function);
    b->p.function[b->p.n_function++] = f;
    return f->id;
}

/* A location with one line per name (pprof order: innermost first). */
static uint64_t pb_loc_lines(pb *b, uint64_t id, const char *const *names, size_t n)
{
    Perftools__Profiles__Location *l = malloc(sizeof *l);
    perftools__profiles__location__init(l);
    l->id = id;
    l->n_line = n;
    l->line = malloc((n ? n : 1) * sizeof *l->line);
    for (size_t i = 0; i < n; i++) {
        l->line[i] = malloc(sizeof *l->line[i]);
        perftools__profiles__line__init(l->line[i]);
        l->line[i]->function_id = pb_func(b, names[i]);
        l->line[i]->line = (int64_t)i + 1;
    }
    GROW(b->p.location, b->p.n_location);
    b->p.location[b->p.n_location++] = l;
    return id;
}

static uint64_t pb_loc(pb *b, const char *name)
{
    uint64_t fid = pb_func(b, name);
    for (size_t i = 0; i < b->p.n_location; i++)
        if (b->p.location[i]->id == fid)
            return fid;
    return pb_loc_lines(b, fid, &name, 1);
}

/* pb_loc for a name the builder has not seen yet, without the lookups
 * (deep stacks would make them quadratic). */
static uint64_t pb_loc_fresh(pb *b, const char *name)
{
    GROW(b->p.string_table, b->p.n_string_table);
    b->p.string_table[b->p.n_string_table] = strdup(name);
    Perftools__Profiles__Function *f = malloc(sizeof *f);
    perftools__profiles__function__init(f);
    f->id = b->p.n_function + 1;
    f->name = (int64_t)b->p.n_string_table++;
    GROW(b->p.function, b->p.n_function);
    b->p.function[b->p.n_function++] = f;
    Perftools__Profiles__Location *l = malloc(sizeof *l);
    perftools__profiles__location__init(l);
    l->id = f->id;
    l->n_line = 1;
    l->line = malloc(sizeof *l->line);
    l->line[0] = malloc(sizeof *l->line[0]);
    perftools__profiles__line__init(l->line[0]);
    l->line[0]->function_id = f->id;
    GROW(b->p.location, b->p.n_location);
    b->p.location[b->p.n_location++] = l;
    return l->id;
}

static Perftools__Profiles__Sample *pb_sample_ids(pb *b, int64_t value,
                                                  const uint64_t *ids, size_t n)
{
    Perftools__Profiles__Sample *s = malloc(sizeof *s);
    perftools__profiles__sample__init(s);
    s->n_location_id = n;
    s->location_id = malloc((n ? n : 1) * sizeof *s->location_id);
    if (n)
        memcpy(s->location_id, ids, n * sizeof *ids);
    s->n_value = 1;
    s->value = malloc(2 * sizeof *s->value);
    s->value[0] = value;
    s->value[1] = 0;
    GROW(b->p.sample, b->p.n_sample);
    b->p.sample[b->p.n_sample++] = s;
    return s;
}

/* A sample whose stack is given ROOT FIRST (easier to read in tests);
 * the list ends with NULL. */
static Perftools__Profiles__Sample *pb_sample(pb *b, int64_t value, ...)
{
    const char *names[64];
    size_t n = 0;
    va_list ap;
    va_start(ap, value);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL && n < 64;)
        names[n++] = s;
    va_end(ap);
    uint64_t ids[64];
    for (size_t i = 0; i < n; i++)
        ids[n - 1 - i] = pb_loc(b, names[i]); /* pprof wants leaf first */
    return pb_sample_ids(b, value, ids, n);
}

/* A function `name` in `file` at `line` with a location of its own. */
static uint64_t pb_loc_in(pb *b, const char *name, const char *file, int64_t line)
{
    Perftools__Profiles__Function *f = malloc(sizeof *f);
    perftools__profiles__function__init(f);
    f->id = b->p.n_function + 1;
    f->name = (int64_t)pb_str(b, name);
    f->filename = (int64_t)pb_str(b, file);
    GROW(b->p.function, b->p.n_function);
    b->p.function[b->p.n_function++] = f;
    Perftools__Profiles__Location *l = malloc(sizeof *l);
    perftools__profiles__location__init(l);
    l->id = 1000 + f->id;
    l->n_line = 1;
    l->line = malloc(sizeof *l->line);
    l->line[0] = malloc(sizeof *l->line[0]);
    perftools__profiles__line__init(l->line[0]);
    l->line[0]->function_id = f->id;
    l->line[0]->line = line;
    GROW(b->p.location, b->p.n_location);
    b->p.location[b->p.n_location++] = l;
    return l->id;
}

/* Adds the string label key=value to sample s. */
static void pb_label(pb *b, Perftools__Profiles__Sample *s, const char *key,
                     const char *value)
{
    Perftools__Profiles__Label *l = malloc(sizeof *l);
    perftools__profiles__label__init(l);
    l->key = (int64_t)pb_str(b, key);
    l->str = (int64_t)pb_str(b, value);
    GROW(s->label, s->n_label);
    s->label[s->n_label++] = l;
}

static uint8_t *pb_pack(pb *b, size_t *len)
{
    *len = perftools__profiles__profile__get_packed_size(&b->p);
    uint8_t *buf = malloc(*len ? *len : 1);
    perftools__profiles__profile__pack(&b->p, buf);
    return buf;
}

static void pb_free(pb *b)
{
    for (size_t i = 0; i < b->p.n_string_table; i++)
        free(b->p.string_table[i]);
    free(b->p.string_table);
    for (size_t i = 0; i < b->p.n_function; i++)
        free(b->p.function[i]);
    free(b->p.function);
    for (size_t i = 0; i < b->p.n_location; i++) {
        for (size_t j = 0; j < b->p.location[i]->n_line; j++)
            free(b->p.location[i]->line[j]);
        free(b->p.location[i]->line);
        free(b->p.location[i]);
    }
    free(b->p.location);
    for (size_t i = 0; i < b->p.n_sample; i++) {
        for (size_t j = 0; j < b->p.sample[i]->n_label; j++)
            free(b->p.sample[i]->label[j]);
        free(b->p.sample[i]->label);
        free(b->p.sample[i]->location_id);
        free(b->p.sample[i]->value);
        free(b->p.sample[i]);
    }
    free(b->p.sample);
    free(b->p.sample_type);
    free(b->vt);
    free(b);
}

/* ------------------------------------------------------- file helpers */

static char *make_dir(void)
{
    char *d = strdup("/tmp/pn-test-report-XXXXXX");
    if (!mkdtemp(d)) {
        perror("mkdtemp");
        exit(2);
    }
    return d;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_dir(char *d)
{
    nftw(d, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(d);
}

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *dir, const char *name, const uint8_t *data,
                        size_t len)
{
    char *p = path_in(dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(fwrite(data, 1, len, f), len);
        fclose(f);
    }
    free(p);
}

/* Packs b (gzip'ed when gz) into dir/name. */
static void write_profile(const char *dir, const char *name, pb *b, int gz)
{
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    if (gz) {
        uint8_t *z;
        size_t zlen;
        pn_error e;
        CHECK_EQ_INT(pn_gzip(raw, len, &z, &zlen, &e), 0);
        write_bytes(dir, name, z, zlen);
        free(z);
    } else {
        write_bytes(dir, name, raw, len);
    }
    free(raw);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static size_t count_ci(const char *hay, const char *needle)
{
    size_t n = 0, len = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (strncasecmp(p, needle, len) == 0)
            n++;
    return n;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* ------------------------------------------------------- tree helpers */

/* The node at the end of a root-first path of names (NULL-terminated). */
static const pn_report_node *node_at(const pn_report *r, ...)
{
    uint32_t node = PN_REPORT_ROOT;
    va_list ap;
    va_start(ap, r);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        uint32_t c = r->nodes[node].first_child;
        while (c != PN_REPORT_NONE && strcmp(r->names[r->funcs[r->nodes[c].func].name], s) != 0)
            c = r->nodes[c].next_sibling;
        if (c == PN_REPORT_NONE) {
            va_end(ap);
            return NULL;
        }
        node = c;
    }
    va_end(ap);
    return &r->nodes[node];
}

static int64_t total_at(const pn_report_node *n) { return n ? n->total : -1; }
static int64_t self_at(const pn_report_node *n) { return n ? n->self : -1; }

/* The top table as a string (n rows). */
static char *top_text(const pn_report *r, size_t n)
{
    /* The stream's buffer pointer lives on the heap: GCC's -O3
     * dangling-pointer check mistakes a local one for the text itself. */
    struct { char *buf; size_t len; } *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    FILE *f = open_memstream(&m->buf, &m->len);
    pn_error e;
    CHECK_EQ_INT(pn_report_write_top(r, f, n, &e), 0);
    fclose(f);
    char *text = m->buf;
    free(m);
    return text;
}

/* Where needle starts in text, -1 if absent. */
static long offset_in(const char *text, const char *needle)
{
    const char *p = strstr(text, needle);
    return p ? (long)(p - text) : -1;
}

static mode_t test_umask(void)
{
    mode_t m = umask(022);
    umask(m);
    return m;
}

/* Parses the top row for `fn` (with plain-number units). */
static int top_row(const char *text, const char *fn, long long *self, double *selfp,
                   long long *total, double *totalp)
{
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char name[128];
        long long samples;
        if (sscanf(line, "%lld %lf%% %lld %lf%% %lld %127s", self, selfp, total, totalp,
                   &samples, name) == 6 &&
            strcmp(name, fn) == 0 && len >= strlen(fn) &&
            strncmp(line + len - strlen(fn), fn, strlen(fn)) == 0)
            return 1;
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* Collects warnings so tests can check what was logged. */
typedef struct {
    int warnings;
    char last[512];
} log_capture;

static void capture_log(void *ud, int level, const char *msg)
{
    log_capture *c = ud;
    if (level >= PN_LOG_WARN) {
        c->warnings++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

/* --------------------------------------------------------------- tests */

static void test_merge_folder_sums_values(void)
{
    char *dir = make_dir();
    pb *a = pb_new("cpu", "nanoseconds");
    pb_sample(a, 10, "main", "work", NULL);
    pb_sample(a, 5, "main", "idle", NULL);
    write_profile(dir, "a.pb.gz", a, 1);
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 7, "main", "work", NULL);
    pb_sample(b, 3, "main", NULL);
    write_profile(dir, "b.pb", b, 0);
    /* Not profiles: another extension, and a folder named like one. */
    write_bytes(dir, "notes.txt", (const uint8_t *)"hello", 5);
    char *sub = path_in(dir, "sub.pb");
    CHECK_EQ_INT(mkdir(sub, 0755), 0);

    pn_report *r = pn_report_new();
    pn_error e;
    pn_error_clear(&e);
    log_capture cap = {0, ""};
    pn_log_set_handler(capture_log, &cap);
    CHECK_EQ_INT(pn_report_add_path(r, dir, &e), 0);
    pn_log_set_handler(NULL, NULL);
    CHECK_STR(e.msg, "");
    /* The skipped folder is mentioned, not silently passed over. */
    CHECK_EQ_INT(cap.warnings, 1);
    CHECK(strstr(cap.last, "sub.pb") != NULL);
    CHECK_EQ_INT(pn_report_profiles(r), 2);
    CHECK_EQ_INT(r->samples, 4);
    CHECK_STR(r->sample_type, "cpu");
    CHECK_STR(r->sample_unit, "nanoseconds");
    CHECK_EQ_INT(total_at(node_at(r, NULL)), 25);
    CHECK_EQ_INT(total_at(node_at(r, "main", NULL)), 25);
    CHECK_EQ_INT(self_at(node_at(r, "main", NULL)), 3);
    CHECK_EQ_INT(total_at(node_at(r, "main", "work", NULL)), 17);
    CHECK_EQ_INT(self_at(node_at(r, "main", "work", NULL)), 17);
    CHECK_EQ_INT(total_at(node_at(r, "main", "idle", NULL)), 5);
    CHECK(node_at(r, "work", NULL) == NULL);

    /* A single file adds to what is there. */
    char *one = path_in(dir, "b.pb");
    CHECK_EQ_INT(pn_report_add_path(r, one, &e), 0);
    CHECK_EQ_INT(pn_report_profiles(r), 3);
    CHECK_EQ_INT(total_at(node_at(r, "main", "work", NULL)), 24);

    pn_report_free(r);
    pb_free(a);
    pb_free(b);
    free(one);
    free(sub);
    remove_dir(dir);
}

static void test_buffers_raw_and_gzip(void)
{
    pb *a = pb_new("wall", "nanoseconds");
    pb_sample(a, 4, "main", "sleep", NULL);
    size_t len, zlen;
    uint8_t *raw = pb_pack(a, &len), *z;
    pn_error e;
    CHECK_EQ_INT(pn_gzip(raw, len, &z, &zlen, &e), 0);
    pn_report *r = pn_report_new();
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(pn_report_add_buffer(r, z, zlen, &e), 0);
    CHECK_EQ_INT(pn_report_profiles(r), 2);
    CHECK_EQ_INT(total_at(node_at(r, "main", "sleep", NULL)), 8);
    CHECK_STR(r->sample_type, "wall");
    pn_report_free(r);
    free(raw);
    free(z);
    pb_free(a);
}

static void test_inlined_lines_and_symbol_fallbacks(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    /* Location 50: `inner` inlined into `outer`; pprof lists the inlined
     * function first. */
    const char *inl[] = {"inner", "outer"};
    uint64_t l_inl = pb_loc_lines(b, 50, inl, 2);
    uint64_t l_main = pb_loc(b, "main");
    /* Location 60: not symbolized, only an address. */
    uint64_t l_addr = pb_loc_lines(b, 60, NULL, 0);
    b->p.location[b->p.n_location - 1]->address = 0x1234;
    /* Function with only a system (mangled) name. */
    uint64_t fid = pb_func(b, "");
    b->p.function[fid - 1]->system_name = (int64_t)pb_str(b, "_Z3fooi");
    const char *mangled_name = "";
    uint64_t l_mangled = pb_loc_lines(b, 70, &mangled_name, 1);
    b->p.location[b->p.n_location - 1]->line[0]->function_id = fid;

    uint64_t s1[] = {l_inl, l_main};
    pb_sample_ids(b, 9, s1, 2);
    uint64_t s2[] = {l_addr, l_mangled, l_main};
    pb_sample_ids(b, 2, s2, 3);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(total_at(node_at(r, "main", "outer", "inner", NULL)), 9);
    CHECK_EQ_INT(self_at(node_at(r, "main", "outer", "inner", NULL)), 9);
    CHECK_EQ_INT(self_at(node_at(r, "main", "outer", NULL)), 0);
    CHECK_EQ_INT(total_at(node_at(r, "main", "_Z3fooi", "0x1234", NULL)), 2);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_sparse_ids(void)
{
    /* Ids that are not 1..n in order take the sorted-lookup path. */
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 6, "main", "a", "b", NULL);
    for (size_t i = 0; i < b->p.n_location; i++)
        b->p.location[i]->id = 1000 - 7 * i;
    b->p.sample[0]->location_id[0] = 1000 - 7 * 2; /* b, leaf */
    b->p.sample[0]->location_id[1] = 1000 - 7 * 1; /* a */
    b->p.sample[0]->location_id[2] = 1000;         /* main */
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(self_at(node_at(r, "main", "a", "b", NULL)), 6);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_top_counts_recursion_once(void)
{
    pb *b = pb_new("samples", "count");
    pb_sample(b, 10, "a", "b", "a", NULL);
    pb_sample(b, 5, "a", "b", NULL);
    pb_sample(b, 1, "c", NULL);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);

    char *text = top_text(r, 0);
    CHECK(strstr(text, "Top 3 of 3 functions by self samples\n") != NULL);
    /* "samples" counts the samples value, not the 3 rows. */
    CHECK(strstr(text, "Total samples count (16) in 1 profile, 16 samples") != NULL);
    CHECK(strstr(text, "self%") && strstr(text, "total%") && strstr(text, "function"));
    long long self, total;
    double sp, tp;
    CHECK(top_row(text, "a", &self, &sp, &total, &tp));
    CHECK_EQ_INT(self, 10);
    CHECK_EQ_INT(total, 15); /* not 25: the inner `a` is the same stack */
    CHECK(sp > 62.49 && sp < 62.51);
    CHECK(tp > 93.74 && tp < 93.76);
    CHECK(top_row(text, "b", &self, &sp, &total, &tp));
    CHECK_EQ_INT(self, 5);
    CHECK_EQ_INT(total, 15);
    CHECK(top_row(text, "c", &self, &sp, &total, &tp));
    CHECK_EQ_INT(self, 1);
    CHECK_EQ_INT(total, 1);
    /* Ranked by self: a, then b, then c. */
    long ia = offset_in(text, "  a\n"), ib = offset_in(text, "  b\n"),
         ic = offset_in(text, "  c\n");
    CHECK(ia >= 0 && ib > ia && ic > ib);
    free(text);

    text = top_text(r, 2);
    CHECK(strstr(text, "Top 2 of 3 functions") != NULL);
    CHECK(strstr(text, "  c\n") == NULL);
    free(text);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_top_formats_units_and_names(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 1500000000, "main", "hot", NULL);
    pb_sample(b, 2500000, "main", "bad\nname", NULL);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    char *text = top_text(r, 10);
    CHECK(strstr(text, "Total cpu time (1.50 s) in 1 profile, 2 samples") != NULL);
    CHECK(strstr(text, "1.50 s") != NULL);
    CHECK(strstr(text, "2.50 ms") != NULL);
    CHECK(strstr(text, "bad?name\n") != NULL); /* no raw newline in a row */
    free(text);

    /* A stream that cannot be written is an error, not silence. */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        pn_error_clear(&e);
        CHECK_EQ_INT(pn_report_write_top(r, full, 10, &e), -1);
        CHECK_EQ_INT(e.code, PN_EIO);
        fclose(full);
    }
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_empty_report_outputs(void)
{
    pn_report *r = pn_report_new();
    char *text = top_text(r, 5);
    CHECK(strstr(text, "(no samples)") != NULL);
    free(text);
    char *dir = make_dir();
    char *out = path_in(dir, "empty.html");
    pn_error e;
    CHECK_EQ_INT(pn_report_write_html(r, "empty", out, &e), 0);
    char *page = read_text(out);
    CHECK(page && strstr(page, "\"nodes\":[0,0,0]") != NULL);
    free(page);
    free(out);
    remove_dir(dir);
    pn_report_free(r);
}

static void test_html_is_self_contained_and_escaped(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 40, "main", "say \"hi\" \\path", NULL);
    pb_sample(b, 30, "main", "</script><script>alert(1)</script>", NULL);
    pb_sample(b, 20, "main", "caf\xc3\xa9 \xce\xbb", NULL);
    pb_sample(b, 10, "main", "\xff\xfe bad", NULL);
    pb_sample(b, 5, "main", "a&b<!--c", NULL);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);

    char *dir = make_dir();
    char *out = path_in(dir, "fg.html");
    const char *title = "Prod <b>&\"quoted\"'";
    CHECK_EQ_INT(pn_report_write_html(r, "old", out, &e), 0);
    CHECK_EQ_INT(pn_report_write_html(r, title, out, &e), 0); /* replaces it */
    char *page = read_text(out);
    CHECK(page != NULL);
    if (page) {
        CHECK(strstr(page, "<title>Prod &lt;b&gt;&amp;&quot;quoted&quot;&#39;</title>"));
        CHECK(strstr(page, "<h1>Prod &lt;b&gt;&amp;&quot;quoted&quot;&#39;</h1>"));
        /* Created through the umask like the profiles, not a fixed mode. */
        struct stat st;
        CHECK(stat(out, &st) == 0 && (st.st_mode & 0777) == (0644 & ~test_umask()));
        CHECK(strstr(page, "<b>&") == NULL);
        CHECK(strstr(page, "\"say \\\"hi\\\" \\\\path\"") != NULL);
        CHECK(strstr(page, "\"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"
                           "\\u003c/script\\u003e\"") != NULL);
        CHECK(strstr(page, "\"caf\xc3\xa9 \xce\xbb\"") != NULL);
        /* Bad bytes were replaced when read (and counted), not refused. */
        CHECK(strstr(page, "\"\xef\xbf\xbd\xef\xbf\xbd bad\"") != NULL);
        CHECK(strstr(page, "\"invalid\":1,") != NULL);
        CHECK(strstr(page, "\"a\\u0026b\\u003c!--c\"") != NULL);
        CHECK(strstr(page, "\"unit\":\"nanoseconds\"") != NULL);
        /* Exactly our two script elements, and nothing in the data block
         * that could open or close markup. */
        CHECK_EQ_INT(count_ci(page, "<script"), 2);
        CHECK_EQ_INT(count_ci(page, "</script"), 2);
        const char *open = "<script id=\"pn-data\" type=\"application/json\">";
        const char *data = strstr(page, open);
        CHECK(data != NULL);
        if (data) {
            data += strlen(open);
            const char *close = strstr(data, "</script>");
            CHECK(close != NULL);
            CHECK(memchr(data, '<', (size_t)(close - data)) == NULL);
        }
        /* Self-contained: nothing fetched from anywhere. */
        CHECK_EQ_INT(count_ci(page, "http://"), 0);
        CHECK_EQ_INT(count_ci(page, "https://"), 0);
        CHECK_EQ_INT(count_ci(page, "src="), 0);
        CHECK_EQ_INT(count_ci(page, "href="), 0);
        CHECK_EQ_INT(count_ci(page, "url("), 0);
        CHECK_EQ_INT(count_ci(page, "@import"), 0);
        CHECK(strstr(page, "<canvas") != NULL);
        CHECK(strstr(page, "</html>\n") != NULL);
    }
    free(page);

    /* The temporary file was renamed away: the page is the only entry. */
    struct stat st;
    CHECK_EQ_INT(stat(out, &st), 0);
    CHECK_EQ_INT(st.st_mode & 0777, 0644);
    CHECK_EQ_INT(count_entries(dir), 1);

    /* A folder that does not exist: the error names the path. */
    pn_error_clear(&e);
    const char *bad = "/nonexistent-pn-dir/fg.html";
    CHECK_EQ_INT(pn_report_write_html(r, "x", bad, &e), -1);
    CHECK_EQ_INT(e.code, PN_EIO);
    CHECK(strstr(e.msg, bad) != NULL);

    free(out);
    remove_dir(dir);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_html_folds_beyond_node_budget(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    char name[16];
    for (int i = 1; i <= 50; i++) {
        snprintf(name, sizeof name, "f%d", i);
        pb_sample(b, i, "main", name, NULL);
    }
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    char *dir = make_dir();
    char *out = path_in(dir, "fold.html");
    /* Root + 10 nodes: main and f50..f42 are kept, f41..f1 folded. */
    CHECK_EQ_INT(pn_report_write_html_max(r, "fold", NULL, out, 11, &e), 0);
    char *page = read_text(out);
    CHECK(page != NULL);
    if (page) {
        CHECK(strstr(page, "\"folded\":41,\"foldedBelow\":41") != NULL);
        /* Root, main, f50..f42 as (function, depth, line) triples: 11 nodes. */
        const char *nodes = strstr(page, "\"nodes\":[");
        const char *close = nodes ? strchr(nodes, ']') : NULL;
        int commas = 0;
        for (const char *c = nodes; c && c < close; c++)
            commas += *c == ',';
        CHECK_EQ_INT(commas, 3 * 11 - 1);
    }
    free(page);
    /* Within budget nothing is folded. */
    CHECK_EQ_INT(pn_report_write_html(r, "all", out, &e), 0);
    page = read_text(out);
    CHECK(page && strstr(page, "\"folded\":0,") != NULL && strstr(page, "\"f1\""));
    free(page);
    free(out);
    remove_dir(dir);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

/* The timeline: a bucket per profile, fewer and wider buckets when the
 * page's records would pass their budget. */
static void test_html_timeline_buckets_within_budget(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 1, "main", "a", NULL);
    pb_sample(b, 2, "main", "b", NULL);
    pb_sample(b, 3, "main", "c", NULL);
    pn_report *r = pn_report_new();
    pn_error e;
    for (int i = 9; i >= 0; i--) { /* merged out of time order */
        b->p.time_nanos = (int64_t)i * 1000000000;
        b->p.duration_nanos = 1000000000;
        size_t len;
        uint8_t *raw = pb_pack(b, &len);
        CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
        free(raw);
    }
    char *dir = make_dir();
    char *out = path_in(dir, "tl.html");
    CHECK_EQ_INT(pn_report_write_html(r, "tl", out, &e), 0);
    char *page = read_text(out);
    CHECK(page && strstr(page, "\"pcount\":[1,1,1,1,1,1,1,1,1,1]"));
    CHECK(page && strstr(page, "\"profs\":[0,1000,1000,1000,2000,1000,"));
    free(page);
    /* 3 stacks x 10 profiles > 12 records: 4 buckets of 3, 2, 3, 2 profiles. */
    r->max_page_recs = 12;
    CHECK_EQ_INT(pn_report_write_html(r, "tl", out, &e), 0);
    page = read_text(out);
    CHECK(page && strstr(page, "\"pcount\":[3,2,3,2]"));
    CHECK(page && strstr(page, "\"profs\":[0,3000,3000,2000,5000,3000,8000,2000]"));
    const char *recs = page ? strstr(page, "\"recs\":[") : NULL;
    const char *close = recs ? strchr(recs, ']') : NULL;
    int commas = 0;
    for (const char *c = recs; c && c < close; c++)
        commas += *c == ',';
    CHECK_EQ_INT(commas, 5 * 12 - 1);
    free(page);
    free(out);
    remove_dir(dir);
    pn_report_free(r);
    pb_free(b);
}

/* Every malformed input fails with PN_EPROTO and leaves the report as it
 * was. */
static void expect_proto_error(pn_report *r, const uint8_t *data, size_t len,
                               const char *needle)
{
    pn_error e;
    pn_error_clear(&e);
    size_t before = pn_report_profiles(r);
    CHECK_EQ_INT(pn_report_add_buffer(r, data, len, &e), -1);
    CHECK_EQ_INT(e.code, PN_EPROTO);
    CHECK(strstr(e.msg, "profile buffer") != NULL);
    if (needle && !strstr(e.msg, needle)) {
        fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", e.msg, needle);
        CHECK(0);
    }
    CHECK_EQ_INT(pn_report_profiles(r), before);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 0);
    CHECK_EQ_INT(r->nnodes, 1);
}

/* Packs b after `mutate` changed it, and expects the report to reject it. */
static void expect_rejected(pn_report *r, pb *b, const char *needle)
{
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    expect_proto_error(r, raw, len, needle);
    free(raw);
}

static pb *small_profile(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 10, "main", "work", NULL);
    return b;
}

static void test_malformed_input_is_rejected(void)
{
    pn_report *r = pn_report_new();
    pn_error e;

    /* Random bytes (fixed seed), raw and gzip'ed. */
    uint8_t junk[512];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof junk; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        junk[i] = (uint8_t)x;
    }
    expect_proto_error(r, junk, sizeof junk, NULL);
    uint8_t *z;
    size_t zlen;
    CHECK_EQ_INT(pn_gzip(junk, sizeof junk, &z, &zlen, &e), 0);
    expect_proto_error(r, z, zlen, NULL);
    /* A gzip header followed by garbage. */
    memcpy(junk, "\x1f\x8b\x08\x00", 4);
    expect_proto_error(r, junk, 64, NULL);
    free(z);
    expect_proto_error(r, (const uint8_t *)"", 0, "empty");

    /* Every proper prefix of a valid profile is rejected. */
    pb *b = small_profile();
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    for (size_t cut = 1; cut < len; cut++)
        expect_proto_error(r, raw, cut, NULL);
    free(raw);

    b->p.sample[0]->location_id[0] = 99;
    expect_rejected(r, b, "location 99");
    pb_free(b);

    b = small_profile();
    b->p.function[0]->name = 1000;
    expect_rejected(r, b, "string 1000");
    pb_free(b);

    b = small_profile();
    b->vt->unit = -1;
    expect_rejected(r, b, "string -1");
    pb_free(b);

    b = small_profile();
    b->p.location[0]->line[0]->function_id = 77;
    expect_rejected(r, b, "function 77");
    pb_free(b);

    b = small_profile();
    b->p.sample[0]->n_value = 2;
    expect_rejected(r, b, "2 values");
    pb_free(b);

    b = small_profile();
    b->p.sample[0]->value[0] = -5;
    expect_rejected(r, b, "negative");
    pb_free(b);

    b = small_profile();
    b->p.location[1]->id = b->p.location[0]->id;
    expect_rejected(r, b, "used twice");
    pb_free(b);

    b = small_profile();
    b->p.n_sample_type = 0;
    expect_rejected(r, b, "no sample types");
    pb_free(b);

    b = small_profile();
    free(b->p.string_table[0]);
    b->p.string_table[0] = strdup("x");
    expect_rejected(r, b, "string table");
    pb_free(b);

    /* A malformed file is named in the message. */
    char *dir = make_dir();
    write_bytes(dir, "junk.pb.gz", junk + 4, 100);
    char *path = path_in(dir, "junk.pb.gz");
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, path, &e), -1);
    CHECK_EQ_INT(e.code, PN_EPROTO);
    CHECK(strstr(e.msg, path) != NULL);
    /* ... also when it is found in a folder. */
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, dir, &e), -1);
    CHECK_EQ_INT(e.code, PN_EPROTO);
    CHECK(strstr(e.msg, path) != NULL);
    free(path);
    remove_dir(dir);

    /* After all that, a good profile still merges normally. */
    b = small_profile();
    raw = pb_pack(b, &len);
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(total_at(node_at(r, "main", "work", NULL)), 10);
    free(raw);
    pb_free(b);
    pn_report_free(r);
}

static void test_empty_folder_and_missing_path(void)
{
    char *dir = make_dir();
    pn_report *r = pn_report_new();
    pn_error e;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, dir, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK(strstr(e.msg, dir) != NULL);
    CHECK(strstr(e.msg, "no profiles") != NULL);
    /* Files that are not profiles do not count. */
    write_bytes(dir, "readme.txt", (const uint8_t *)"x", 1);
    write_bytes(dir, "x.pb.gz.tmp", (const uint8_t *)"x", 1);
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, dir, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);

    char *missing = path_in(dir, "nope/profile.pb.gz");
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, missing, &e), -1);
    CHECK_EQ_INT(e.code, PN_EIO);
    CHECK(strstr(e.msg, missing) != NULL);
    CHECK_EQ_INT(pn_report_profiles(r), 0);

    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, "", &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    free(missing);
    remove_dir(dir);
    pn_report_free(r);
}

static void test_mixed_sample_types_are_refused(void)
{
    pb *cpu = small_profile();
    pb *wall = pb_new("wall", "nanoseconds");
    pb_sample(wall, 3, "main", NULL);
    size_t l1, l2;
    uint8_t *r1 = pb_pack(cpu, &l1), *r2 = pb_pack(wall, &l2);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, r1, l1, &e), 0);
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_buffer(r, r2, l2, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK(strstr(e.msg, "wall/nanoseconds") && strstr(e.msg, "cpu/nanoseconds"));
    CHECK_EQ_INT(pn_report_profiles(r), 1);
    CHECK_EQ_INT(total_at(node_at(r, NULL)), 10);
    pn_report_free(r);
    free(r1);
    free(r2);
    pb_free(cpu);
    pb_free(wall);
}

static void test_deep_stacks_are_cut_at_the_leaf_end(void)
{
    int level = pn_log_level();
    pn_log_set_level(PN_LOG_ERROR); /* the cut is logged as a warning */
    enum { DEPTH = 5000 };
    pb *b = pb_new("cpu", "nanoseconds");
    uint64_t *ids = malloc(DEPTH * sizeof *ids);
    char name[16];
    for (int i = 0; i < DEPTH; i++) { /* f0 is the leaf */
        snprintf(name, sizeof name, "f%d", i);
        ids[i] = pb_loc_fresh(b, name);
    }
    pb_sample_ids(b, 3, ids, DEPTH);
    /* One location with three inlined lines, repeated: 3 x 3000 frames. */
    const char *inl[] = {"x", "y", "z"};
    uint64_t l = pb_loc_lines(b, 100000, inl, 3);
    for (int i = 0; i < 3000; i++)
        ids[i] = l;
    pb_sample_ids(b, 4, ids, 3000);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(r->truncated_stacks, 2);
    /* Walk the first stack: f4999 at depth 1 down to the cut. */
    uint32_t node = PN_REPORT_ROOT;
    int ok = 1;
    for (int d = 1; d < (int)PN_REPORT_MAX_DEPTH && ok; d++) {
        snprintf(name, sizeof name, "f%d", DEPTH - d);
        uint32_t c = r->nodes[node].first_child;
        while (c != PN_REPORT_NONE && strcmp(r->names[r->funcs[r->nodes[c].func].name], name) != 0)
            c = r->nodes[c].next_sibling;
        ok = c != PN_REPORT_NONE && r->nodes[c].total == 3;
        node = c;
    }
    CHECK(ok);
    if (ok) {
        uint32_t c = r->nodes[node].first_child;
        CHECK(c != PN_REPORT_NONE);
        if (c != PN_REPORT_NONE) {
            CHECK_STR(r->names[r->funcs[r->nodes[c].func].name], "[truncated]");
            CHECK_EQ_INT(r->nodes[c].depth, PN_REPORT_MAX_DEPTH);
            CHECK_EQ_INT(r->nodes[c].self, 3);
            CHECK_EQ_INT(r->nodes[c].first_child, PN_REPORT_NONE);
        }
    }
    /* The inlined stack starts at its outermost frame: z, y, x, z, ... */
    CHECK_EQ_INT(total_at(node_at(r, "z", "y", "x", "z", NULL)), 4);
    char *text = top_text(r, 3);
    CHECK(strstr(text, "2 stacks were cut at 4096 frames") != NULL);
    free(text);
    pn_report_free(r);
    free(raw);
    free(ids);
    pb_free(b);
    pn_log_set_level(level);
}

static void test_limits(void)
{
    pb *b = small_profile();
    for (int i = 0; i < 20; i++)
        pb_sample(b, 1, "main", "work", "more", NULL);
    size_t len, zlen;
    uint8_t *raw = pb_pack(b, &len), *z;
    pn_error e;
    CHECK_EQ_INT(pn_gzip(raw, len, &z, &zlen, &e), 0);
    CHECK(len > 64);

    /* Decoded size: raw buffer, gzip'ed buffer, and a file. */
    pn_report *r = pn_report_new();
    r->max_profile_bytes = 64;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_buffer(r, z, zlen, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    char *dir = make_dir();
    write_bytes(dir, "big.pb", raw, len);
    char *path = path_in(dir, "big.pb");
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_path(r, path, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    CHECK(strstr(e.msg, path) != NULL);
    pn_report_free(r);

    /* Decoding memory: empty Sample messages cost 2 bytes each on the wire
     * but ~100 bytes decoded, far beyond what real profiles need. */
    size_t nbomb = (size_t)3 << 19;
    uint8_t *bomb = malloc(nbomb);
    for (size_t i = 0; i < nbomb; i += 2)
        bomb[i] = 0x12, bomb[i + 1] = 0x00; /* field 2 (sample), length 0 */
    r = pn_report_new();
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_buffer(r, bomb, nbomb, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    CHECK(strstr(e.msg, "memory") != NULL);
    pn_report_free(r);
    free(bomb);

    /* Call-tree size. */
    r = pn_report_new();
    r->max_nodes = 3;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    pn_report_free(r);

    /* Totals that would overflow 64 bits. */
    pb *huge = pb_new("cpu", "nanoseconds");
    pb_sample(huge, INT64_MAX, "a", NULL);
    pb_sample(huge, 1, "b", NULL);
    uint8_t *hraw = pb_pack(huge, &len);
    r = pn_report_new();
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_report_add_buffer(r, hraw, len, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 0);
    pn_report_free(r);

    free(hraw);
    pb_free(huge);
    free(path);
    remove_dir(dir);
    free(raw);
    free(z);
    pb_free(b);
}

static void test_bad_arguments(void)
{
    pn_error e;
    pn_report *r = pn_report_new();
    CHECK_EQ_INT(pn_report_add_buffer(NULL, (const uint8_t *)"", 0, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_EQ_INT(pn_report_add_path(r, NULL, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_EQ_INT(pn_report_write_html(r, "t", NULL, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_EQ_INT(pn_report_write_top(r, NULL, 3, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_EQ_INT(pn_report_profiles(NULL), 0);
    pn_report_free(NULL);
    pn_report_free(r);
}


/* The text of a writer run on r into a memory stream. */
typedef int (*text_writer)(pn_report *r, FILE *f, void *arg, pn_error *e);

static char *write_text(pn_report *r, text_writer w, void *arg)
{
    struct { char *buf; size_t len; } *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    FILE *f = open_memstream(&m->buf, &m->len);
    pn_error e;
    CHECK_EQ_INT(w(r, f, arg, &e), 0);
    fclose(f);
    char *text = m->buf;
    free(m);
    return text;
}

static int breakdown_by(pn_report *r, FILE *f, void *key, pn_error *e)
{
    return pn_report_write_breakdown(r, f, key, e);
}

static int diff_routes(pn_report *r, FILE *f, void *arg, pn_error *e)
{
    (void)arg;
    pn_label a = {"route", "/a"}, b = {"route", "/b"};
    return pn_report_write_diff(r, f, 10, &a, 1, &b, 1, e);
}

static void test_labels_select_breakdown_and_diff(void)
{
    pb *b = pb_new("samples", "count");
    pb_label(b, pb_sample(b, 10, "main", "a", NULL), "route", "/a");
    pb_label(b, pb_sample(b, 30, "main", "b", NULL), "route", "/b");
    Perftools__Profiles__Sample *s = pb_sample(b, 5, "main", "a", NULL);
    pb_label(b, s, "route", "/b");
    pb_label(b, s, "span_name", "POST /b");
    pb_sample(b, 7, "main", "c", NULL);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(r->samples, 52); /* the samples values, not 4 rows */

    pn_label f[3] = {{"route", "/b"}, {"route", "/a"}, {"span_name", "POST /b"}};
    CHECK_EQ_INT(pn_report_select(r, f, 1, &e), 0);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 35);
    CHECK_EQ_INT(self_at(node_at(r, "main", "a", NULL)), 5);
    CHECK_EQ_INT(pn_report_select(r, f, 2, &e), 0); /* one key: either value */
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 45);
    CHECK_EQ_INT(pn_report_select(r, f + 1, 2, &e), 0); /* two keys: both */
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 0);
    pn_label missing = {"nosuchkey", "x"};
    CHECK_EQ_INT(pn_report_select(r, &missing, 1, &e), 0);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total_n, 0);
    /* (none): the samples without the label, as the breakdown's row. */
    pn_label none[2] = {{"route", "(none)"}, {"span_name", "(none)"}};
    CHECK_EQ_INT(pn_report_select(r, none, 1, &e), 0);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 7);
    CHECK_EQ_INT(self_at(node_at(r, "main", "c", NULL)), 7);
    CHECK_EQ_INT(pn_report_select(r, none + 1, 1, &e), 0);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 47);
    pn_label bad = {"", "x"};
    CHECK_EQ_INT(pn_report_select(r, &bad, 1, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);

    CHECK_EQ_INT(pn_report_select(r, NULL, 0, &e), 0);
    CHECK_EQ_INT(r->nodes[PN_REPORT_ROOT].total, 52);
    char *text = write_text(r, breakdown_by, "route");
    CHECK(strstr(text, "samples count by route: 3 values, total 52, 52 samples\n"));
    long ib = offset_in(text, "35   67.31%         35  /b\n");
    long ia = offset_in(text, "10   19.23%         10  /a\n");
    long in = offset_in(text, " 7   13.46%          7  (none)\n");
    CHECK(ib >= 0 && ia > ib && in > ia);
    free(text);

    text = write_text(r, diff_routes, NULL);
    CHECK(strstr(text, "A: route=/a (total 10, 10 samples)\nB: route=/b (total 35, 35 samples)"));
    /* a: 100% of A, 5/35 of B; b: none of A, 30/35 of B. */
    CHECK(strstr(text, "100.00%             5   14.29%   -85.71%  a\n"));
    CHECK(strstr(text, "0.00%            30   85.71%   +85.71%  b\n"));
    free(text);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_functions_keyed_by_name_and_file(void)
{
    pb *b = pb_new("cpu", "nanoseconds");
    uint64_t main_loc = pb_loc_in(b, "main", "app.py", 12);
    uint64_t ids[2] = {pb_loc_in(b, "work", "/src/moda.py", 3), main_loc};
    pb_sample_ids(b, 2000, ids, 2);
    ids[0] = pb_loc_in(b, "work", "/src/modb.py", 7);
    pb_sample_ids(b, 1000, ids, 2);
    ids[0] = pb_loc_in(b, "load", "/x/util.py", 1);
    pb_sample_ids(b, 500, ids, 2);
    ids[0] = pb_loc_in(b, "load", "/y/util.py", 1);
    pb_sample_ids(b, 400, ids, 2);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    char *text = top_text(r, 0);
    CHECK(strstr(text, "2.00 us   51.28%  ") != NULL);
    CHECK(strstr(text, "work (moda.py)  /src/moda.py:3\n") != NULL);
    CHECK(strstr(text, "work (modb.py)  /src/modb.py:7\n") != NULL);
    CHECK(strstr(text, "load (x/util.py)  /x/util.py:1\n") != NULL);
    CHECK(strstr(text, "load (y/util.py)  /y/util.py:1\n") != NULL);
    CHECK(strstr(text, "  main  app.py:12\n") != NULL); /* unambiguous: bare */
    free(text);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

/* One naming in every runtime: Node's "./file.js:name:line" frames and
 * V8's "(garbage collector)" read as Python's and Ruby's do, and files under
 * the working directory are shown relative to it. */
static void test_one_naming_across_runtimes(void)
{
    char cwd[4096], shop[4200];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(shop, sizeof shop, "%s/examples/node/shop.js", cwd);
    pb *b = pb_new("cpu", "nanoseconds");
    uint64_t main_loc = pb_loc_in(b, "./examples/node/shop.js:main:3", shop, 3);
    uint64_t ids[2] = {pb_loc_in(b, "./examples/node/shop.js:parseOrder:58", shop, 58), main_loc};
    pb_sample_ids(b, 4000, ids, 2);
    ids[0] = pb_loc_in(b, "express/lib/router.js:handle:12",
                       "/srv/node_modules/express/lib/router.js", 12);
    pb_sample_ids(b, 3000, ids, 2);
    ids[0] = pb_loc_in(b, "a:b:3", "/elsewhere/c.js", 3); /* not its file: kept */
    pb_sample_ids(b, 2000, ids, 2);
    ids[0] = pb_loc_in(b, "(garbage collector)", "", 0);
    pb_sample_ids(b, 1000, ids, 1);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    char *text = top_text(r, 0);
    CHECK(strstr(text, "  parseOrder  examples/node/shop.js:58\n") != NULL);
    CHECK(strstr(text, "  main  examples/node/shop.js:3\n") != NULL);
    CHECK(strstr(text, "  handle  /srv/node_modules/express/lib/router.js:12\n") != NULL);
    CHECK(strstr(text, "  a:b:3  /elsewhere/c.js:3\n") != NULL);
    CHECK(strstr(text, "  (garbage collection)\n") != NULL);
    CHECK(strstr(text, "shop.js:parseOrder") == NULL && strstr(text, "collector") == NULL);
    free(text);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

/* By span_id, the breakdown names each span beside its id. */
static void test_breakdown_by_span_id_names_spans(void)
{
    pb *b = pb_new("samples", "count");
    Perftools__Profiles__Sample *s = pb_sample(b, 3, "main", "a", NULL);
    pb_label(b, s, "span_id", "00000000000000aa");
    pb_label(b, s, "span_name", "GET /cart");
    pb_label(b, pb_sample(b, 2, "main", "b", NULL), "span_id", "00000000000000bb");
    pb_sample(b, 1, "main", "c", NULL);
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    char *text = write_text(r, breakdown_by, "span_id");
    CHECK(strstr(text, "  00000000000000aa GET /cart\n") != NULL);
    CHECK(strstr(text, "  00000000000000bb\n") != NULL); /* no name known */
    CHECK(strstr(text, "  (none)\n") != NULL);
    free(text);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

static void test_hidden_root_files(void)
{
    pb *b = pb_new("samples", "count");
    uint64_t ids[4] = {pb_loc_in(b, "leaf", "/app/app.py", 9),
                       pb_loc_in(b, "run_path", "/usr/lib/python3.11/runpy.py", 291),
                       pb_loc_in(b, "_run", "/venv/site-packages/pyroscope/cli.py", 386),
                       pb_loc_in(b, "<module>", "/notpyroscope/cli.py", 1)};
    pb_sample_ids(b, 3, ids, 3);     /* leaf <- run_path <- _run */
    pb_sample_ids(b, 2, ids + 1, 2); /* the launcher alone */
    pb_sample_ids(b, 1, ids + 3, 1); /* a cli.py of someone else */
    size_t len;
    uint8_t *raw = pb_pack(b, &len);
    pn_report *r = pn_report_new();
    pn_error e;
    const char *hide[] = {"pyroscope/cli.py", "runpy.py"};
    CHECK_EQ_INT(pn_report_hide_root_files(r, hide, 2, &e), 0);
    CHECK_EQ_INT(pn_report_add_buffer(r, raw, len, &e), 0);
    CHECK_EQ_INT(total_at(node_at(r, "leaf", NULL)), 3);
    CHECK_EQ_INT(total_at(node_at(r, "[launcher]", NULL)), 2);
    CHECK_EQ_INT(total_at(node_at(r, "<module>", NULL)), 1);
    CHECK(node_at(r, "_run", NULL) == NULL);
    CHECK_EQ_INT(pn_report_hide_root_files(r, hide, 2, &e), -1); /* too late */
    CHECK_EQ_INT(e.code, PN_ESTATE);
    pn_report_free(r);
    free(raw);
    pb_free(b);
}

/* pn_report_run: the bindings' one call (page, selection, breakdown, diff
 * or top table), and its errors. */
static void test_run_request(void)
{
    char *dir = make_dir();
    pb *b = pb_new("cpu", "nanoseconds");
    pb_label(b, pb_sample(b, 10, "main", "slow", NULL), "route", "/a");
    pb_label(b, pb_sample(b, 30, "main", "fast", NULL), "route", "/b");
    write_profile(dir, "p-cpu-1-2.pb.gz", b, 1);
    char *page = path_in(dir, "page.html");
    const char *paths[] = {dir};
    pn_label only_a[] = {{"route", "/a"}}, only_b[] = {{"route", "/b"}};
    size_t profiles = 0, len = 0;
    char *text = NULL;
    pn_error e;
    pn_error_clear(&e);

    /* No text asked: the page only. */
    pn_report_request q = {.paths = paths, .npaths = 1, .html = page, .title = "t"};
    CHECK_EQ_INT(pn_report_run(&q, &profiles, &text, &len, &e), 0);
    CHECK_EQ_INT(profiles, 1);
    CHECK(text == NULL);
    char *html = read_text(page);
    CHECK(html && strstr(html, "slow") && strstr(html, "fast"));
    free(html);

    /* Filter, breakdown then top table. */
    q = (pn_report_request){.paths = paths, .npaths = 1, .filters = only_a, .nfilters = 1,
                            .group_by = "route", .top = 5};
    CHECK_EQ_INT(pn_report_run(&q, &profiles, &text, &len, &e), 0);
    CHECK(text && strlen(text) == len);
    CHECK(text && strstr(text, "/a") && strstr(text, "slow") && !strstr(text, "fast"));
    CHECK(text && strstr(text, "route") < strstr(text, "slow"));
    free(text);

    /* Diff: both selections named, the changed functions listed. */
    q = (pn_report_request){.paths = paths, .npaths = 1, .diff = 1, .diff_a = only_a,
                            .ndiff_a = 1, .diff_b = only_b, .ndiff_b = 1};
    CHECK_EQ_INT(pn_report_run(&q, &profiles, &text, &len, &e), 0);
    CHECK(text && strstr(text, "route=/a") && strstr(text, "route=/b") && strstr(text, "fast"));
    free(text);

    /* A bad filter or path fails with the core's message and no text. */
    pn_label bad[] = {{"", "x"}};
    q = (pn_report_request){.paths = paths, .npaths = 1, .filters = bad, .nfilters = 1, .top = 5};
    CHECK(pn_report_run(&q, &profiles, &text, &len, &e) != 0);
    CHECK(text == NULL && len == 0);
    CHECK(strstr(e.msg, "filter") != NULL);
    char *missing = path_in(dir, "missing.pb");
    const char *nowhere[] = {missing};
    q = (pn_report_request){.paths = nowhere, .npaths = 1, .top = 5};
    pn_error_clear(&e);
    CHECK(pn_report_run(&q, &profiles, &text, &len, &e) != 0);
    CHECK(strstr(e.msg, "missing.pb") != NULL);
    CHECK(text == NULL);

    free(missing);
    free(page);
    pb_free(b);
    remove_dir(dir);
}

/* A job owns its strings and lists: the caller's copies can go at once,
 * and clear frees everything it kept (valgrind checks), run or not. */
static void test_job_owns_what_it_keeps(void)
{
    char *dir = make_dir();
    pb *b = pb_new("cpu", "nanoseconds");
    pb_sample(b, 10, "main", "slow", NULL);
    write_profile(dir, "p-cpu-1-2.pb.gz", b, 1);

    pn_report_job j = {0};
    const char **paths = pn_report_job_keep(&j, calloc(1, sizeof *paths));
    CHECK(paths != NULL);
    char *copy = strdup(dir);
    paths[0] = pn_report_job_keep(&j, copy);
    CHECK(paths[0] == copy);
    j.r.paths = paths;
    j.r.npaths = 1;
    j.r.top = 3;
    for (int i = 0; i < 40; i++) /* past the first growth of its list */
        CHECK(pn_report_job_keep(&j, strdup("kept")) != NULL);
    CHECK(pn_report_job_keep(&j, NULL) == NULL);
    pn_report_job_run(&j);
    CHECK_EQ_INT(j.rc, 0);
    CHECK_EQ_INT(j.profiles, 1);
    CHECK(j.text && strstr(j.text, "slow"));
    pn_report_job_clear(&j);
    CHECK(j.nkept == 0 && j.text == NULL && j.kept == NULL);

    /* A failed run keeps the core's message; clear after it frees all. */
    j.r.paths = pn_report_job_keep(&j, calloc(1, sizeof(char *)));
    ((const char **)j.r.paths)[0] = pn_report_job_keep(&j, strdup("/nonexistent/p.pb"));
    j.r.npaths = 1;
    j.r.top = 3;
    pn_report_job_run(&j);
    CHECK(j.rc != 0 && j.text == NULL);
    CHECK(strstr(j.err.msg, "/nonexistent/p.pb") != NULL);
    pn_report_job_clear(&j);

    pb_free(b);
    remove_dir(dir);
}

TEST_MAIN(T(test_merge_folder_sums_values), T(test_buffers_raw_and_gzip),
          T(test_inlined_lines_and_symbol_fallbacks), T(test_sparse_ids),
          T(test_top_counts_recursion_once), T(test_top_formats_units_and_names),
          T(test_empty_report_outputs), T(test_html_is_self_contained_and_escaped),
          T(test_html_folds_beyond_node_budget), T(test_html_timeline_buckets_within_budget),
          T(test_malformed_input_is_rejected),
          T(test_empty_folder_and_missing_path), T(test_mixed_sample_types_are_refused),
          T(test_deep_stacks_are_cut_at_the_leaf_end), T(test_limits),
          T(test_bad_arguments), T(test_labels_select_breakdown_and_diff),
          T(test_functions_keyed_by_name_and_file), T(test_one_naming_across_runtimes),
          T(test_breakdown_by_span_id_names_spans),
          T(test_hidden_root_files),
          T(test_run_request), T(test_job_owns_what_it_keeps))
