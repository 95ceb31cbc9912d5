/* Label sets and the per-thread current-set slots.
 *
 * A label set is immutable, sorted by key, interned (equal contents, same
 * object) and reference counted. Application threads create and release sets
 * under `intern_lock`; recording threads never take it. A recording thread
 * loads a set pointer with one atomic load and may use it until it leaves
 * its grace section (grace.h), so a set whose count drops to zero leaves the
 * intern table at once (a new set with the same pairs gets a new id) and
 * waits on the retired FIFO, tagged, until no reader can still hold it.
 * Stores copy a set's pairs into their period on first use (they keep no
 * pointer), so a set never outlives its last holder by more than the
 * longest recording section. Reclaiming is incremental: every release frees
 * a few passed sets, so neither memory nor lock hold times grow with churn.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/hash.h"
#include "pyroscope_native.h"
#include "aggregation/grace.h"
#include "aggregation/store.h"
#include "support/atfork.h"
#include "support/utf8.h"

struct pn_labelset {
    uint64_t id;
    uint32_t hash;
    uint32_t n;
    /* Holders: slots, push stacks, bindings. Under intern_lock. */
    long refs;
    /* pn_grace_tag() taken when refs reached zero. Under intern_lock. */
    uint64_t retired_tag;
    struct pn_labelset *next;          /* intern bucket chain, then retired FIFO */
    pn_label kv[];                     /* then the key/value bytes */
};

static pn_labelset empty_set; /* id 0, never freed, never counted */

/* Intern table and retired list: owned by whoever holds intern_lock
 * (application threads creating/releasing sets, the exporter collecting). */
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static pn_labelset **buckets;
static size_t nbuckets, nsets;
static uint64_t next_id = 1;
static pn_labelset *retired_head, *retired_tail; /* oldest first */
static size_t nretired;

/* Sets freed per release at most; more than one, so the FIFO drains faster
 * than releases fill it, and more while a backlog built up behind a
 * recording section that was descheduled. */
#define RECLAIM_STEP 4
#define RECLAIM_STEP_BACKLOG 32

/* ------------------------------------------------------------ validation */

static int is_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_name_char(unsigned char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '.';
}

int pn_label_check_name(const char *key, pn_error *e)
{
    if (key == NULL)
        return pn_fail(e, PN_EINVAL, "label name must be a string, got none");
    size_t n = strlen(key);
    if (n == 0)
        return pn_fail(e, PN_EINVAL, "label name must not be empty");
    if (n > PN_MAX_LABEL_NAME)
        return pn_fail(e, PN_EINVAL, "label name \"%.40s...\" is %zu bytes; the limit is %d",
                       key, n, PN_MAX_LABEL_NAME);
    if (key[0] == '_' && key[1] == '_')
        return pn_fail(e, PN_EINVAL,
                       "label name \"%.100s\": names starting with \"__\" are reserved", key);
    if (!is_name_start((unsigned char)key[0]))
        return pn_fail(e, PN_EINVAL,
                       "label name \"%.100s\" must start with a letter or '_' "
                       "(rule: [a-zA-Z_][a-zA-Z0-9_.]*)", key);
    for (size_t i = 1; i < n; i++) {
        if (!is_name_char((unsigned char)key[i]))
            return pn_fail(e, PN_EINVAL,
                           "label name \"%.100s\" has '%c' at %zu; allowed: letters, digits, "
                           "'_' and '.' (rule: [a-zA-Z_][a-zA-Z0-9_.]*)",
                           key, key[i] >= 32 && key[i] < 127 ? key[i] : '?', i);
    }
    return 0;
}

static int check_value(const char *key, const char *value, int series, pn_error *e)
{
    if (!key)
        key = "?";
    if (value == NULL)
        return pn_fail(e, PN_EINVAL, "label \"%.100s\": value must be a string, got none", key);
    size_t n = strlen(value);
    if (n == 0)
        return pn_fail(e, PN_EINVAL, "label \"%.100s\": value must not be empty", key);
    if (n > PN_MAX_LABEL_VALUE)
        return pn_fail(e, PN_EINVAL, "label \"%.100s\": value is %zu bytes; the limit is %d",
                       key, n, PN_MAX_LABEL_VALUE);
    const unsigned char *p = (const unsigned char *)value;
    for (size_t i = 0; i < n;) {
        if (series && strchr("{},=", p[i]) && p[i] != 0)
            return pn_fail(e, PN_EINVAL,
                           "label \"%.100s\": value \"%.100s\" contains '%c'; the characters "
                           "{ } , = are not allowed in label values", key, value, p[i]);
        size_t len = pn_utf8_char(p + i, n - i, NULL);
        if (len == 0)
            return pn_fail(e, PN_EINVAL,
                           "label \"%.100s\": value is not valid UTF-8 (byte %zu)", key, i);
        i += len;
    }
    return 0;
}

int pn_label_check_value(const char *key, const char *value, pn_error *e)
{
    return check_value(key, value, 1, e);
}

int pn_label_check_sample_value(const char *key, const char *value, pn_error *e)
{
    return check_value(key, value, 0, e);
}

int pn_label_check_app_name(const char *name, pn_error *e)
{
    if (name == NULL || name[0] == '\0')
        return pn_fail(e, PN_EINVAL, "application_name must be set (a non-empty string)");
    size_t n = strlen(name);
    if (n > PN_MAX_LABEL_VALUE)
        return pn_fail(e, PN_EINVAL, "application_name is %zu bytes; the limit is %d", n,
                       PN_MAX_LABEL_VALUE);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!is_name_char(c) && c != '-' && c != '/')
            return pn_fail(e, PN_EINVAL,
                           "application_name \"%.100s\" has '%c' at %zu; allowed: letters, "
                           "digits, '_', '.', '-' and '/'",
                           name, c >= 32 && c < 127 ? c : '?', i);
    }
    return 0;
}

/* ------------------------------------------------- request-time labels */

/* Written at configure time (pn_labels_set_strict), read by any thread. */
static atomic_int strict_labels;
/* Counters and the warning's clock: any thread creating sets. */
static _Atomic uint64_t fixed_coerced, fixed_dropped;
static _Atomic uint64_t unwarned;       /* fixes since the last warning */
static _Atomic int64_t last_warn_ns = -1;
#define FIX_WARN_EVERY_NS 60000000000LL

void pn_labels_set_strict(int on) { atomic_store(&strict_labels, on ? 1 : 0); }

int pn_labels_strict(void) { return atomic_load(&strict_labels); }

void pn_labels_fix_counts(uint64_t *coerced, uint64_t *dropped)
{
    if (coerced)
        *coerced = atomic_load(&fixed_coerced);
    if (dropped)
        *dropped = atomic_load(&fixed_dropped);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Counts one fix and logs it, at most one warning a minute (the first at
 * once); the others are counted in the next warning. */
static void note_fix(int dropped, const char *key, const char *what)
{
    atomic_fetch_add(dropped ? &fixed_dropped : &fixed_coerced, 1);
    uint64_t others = atomic_fetch_add(&unwarned, 1);
    int64_t now = mono_ns(), last = atomic_load(&last_warn_ns);
    if (last >= 0 && now - last < FIX_WARN_EVERY_NS)
        return;
    if (!atomic_compare_exchange_strong(&last_warn_ns, &last, now))
        return;
    atomic_fetch_sub(&unwarned, others + 1);
    pn_log(PN_LOG_WARN, "label \"%.100s\": %s%s (labels are never an error at request time; "
           "set strict_labels to make them one)", key ? key : "(none)", what,
           others ? "; and other labels since the last warning" : "");
    if (others)
        pn_log(PN_LOG_WARN, "%llu more labels were coerced or dropped in the last minute "
               "(stats: labels_coerced, labels_dropped)", (unsigned long long)others);
}

void pn_labels_note_fix(int dropped, const char *key, const char *what)
{
    note_fix(dropped, key, what);
}

/* The name as the server takes it, into buf (PN_MAX_LABEL_NAME + 1 bytes).
 * Returns 0 when key is valid as given, 1 when buf holds the fixed name, -1
 * when it is dropped; *what says why. */
static int fix_name(const char *key, char *buf, const char **what)
{
    if (pn_label_check_name(key, NULL) == 0)
        return 0;
    if (!key || !key[0])
        return *what = "no name: dropped", -1;
    const unsigned char *p = (const unsigned char *)key;
    size_t n = strlen(key), o = 0;
    while (p[0] == '_' && p[1] == '_') /* reserved "__": one '_' */
        p++, n--;
    if (!is_name_start(p[0]))
        buf[o++] = '_';
    for (size_t i = 0; i < n && o < PN_MAX_LABEL_NAME;) {
        if (is_name_char(p[i])) {
            buf[o++] = (char)p[i++];
            continue;
        }
        size_t len = pn_utf8_char(p + i, n - i, NULL);
        buf[o++] = '_';
        i += len ? len : 1;
    }
    buf[o] = '\0';
    *what = "name made valid";
    return 1;
}

/* The value as the server takes it, into buf (PN_MAX_LABEL_VALUE + 1
 * bytes): invalid UTF-8 becomes U+FFFD, cut at a character boundary. */
static int fix_value(const char *key, const char *value, char *buf, const char **what)
{
    if (pn_label_check_sample_value(key, value, NULL) == 0)
        return 0;
    if (!value)
        return *what = "no value (null/None/nil/undefined): dropped", -1;
    if (!value[0])
        return *what = "empty value: dropped", -1;
    const unsigned char *p = (const unsigned char *)value;
    size_t n = strlen(value), o = 0;
    int cut = 0;
    for (size_t i = 0; i < n;) {
        size_t len = pn_utf8_char(p + i, n - i, NULL);
        const char *src = len ? (const char *)p + i : "\xef\xbf\xbd";
        size_t w = len ? len : 3;
        if (o + w > PN_MAX_LABEL_VALUE) {
            cut = 1;
            break;
        }
        memcpy(buf + o, src, w);
        o += w;
        i += len ? len : 1;
    }
    buf[o] = '\0';
    *what = cut ? "value cut to 2048 bytes" : "value not valid UTF-8: bad bytes made U+FFFD";
    return 1;
}

/* kv made sendable into out (n pairs in, *nout out; fixed strings in
 * *store, which the caller frees). Strict: fails on the first pair that is
 * not valid as given. */
static int fix_pairs(const pn_label *kv, size_t n, pn_label *out, size_t *nout, char **store,
                     pn_error *e)
{
    *store = NULL;
    *nout = 0;
    if (atomic_load(&strict_labels)) {
        for (size_t i = 0; i < n; i++) {
            if (pn_label_check_name(kv[i].key, e) != 0 ||
                pn_label_check_sample_value(kv[i].key, kv[i].value, e) != 0)
                return -1;
        }
        if (n > PN_MAX_LABELS)
            return pn_fail(e, PN_ELIMIT, "%zu labels given; the limit is %d per sample", n,
                           PN_MAX_LABELS);
        memcpy(out, kv, n * sizeof *kv);
        *nout = n;
        return 0;
    }
    enum { STRIDE = PN_MAX_LABEL_NAME + 1 + PN_MAX_LABEL_VALUE + 1 };
    for (size_t i = 0; i < n; i++) {
        if (*nout == PN_MAX_LABELS) {
            note_fix(1, kv[i].key, "more than 100 labels per sample: dropped");
            continue;
        }
        const char *key = kv[i].key, *value = kv[i].value, *what = NULL;
        int kfix = 0, vfix = 0;
        if (pn_label_check_name(key, NULL) != 0 ||
            pn_label_check_sample_value(key, value, NULL) != 0) {
            if (!*store && !(*store = malloc(PN_MAX_LABELS * (size_t)STRIDE)))
                return pn_fail(e, PN_ENOMEM, "out of memory fixing labels");
            char *kbuf = *store + *nout * (size_t)STRIDE, *vbuf = kbuf + PN_MAX_LABEL_NAME + 1;
            kfix = fix_name(key, kbuf, &what);
            if (kfix < 0) {
                note_fix(1, key, what);
                continue;
            }
            if (kfix)
                note_fix(0, key, what);
            vfix = fix_value(key, value, vbuf, &what);
            if (vfix < 0) {
                note_fix(1, key, what);
                continue;
            }
            if (vfix)
                note_fix(0, key, what);
            if (kfix)
                key = kbuf;
            if (vfix)
                value = vbuf;
        }
        out[(*nout)++] = (pn_label){key, value};
    }
    return 0;
}

/* ------------------------------------------------------------- interning */

const pn_labelset *pn_labelset_empty(void) { return &empty_set; }

uint64_t pn_labelset_id(const pn_labelset *ls) { return ls ? ls->id : 0; }

size_t pn_labelset_count(const pn_labelset *ls) { return ls ? ls->n : 0; }

pn_label pn_labelset_at(const pn_labelset *ls, size_t i) { return ls->kv[i]; }

const char *pn_labelset_get(const pn_labelset *ls, const char *key)
{
    for (uint32_t i = 0; ls && i < ls->n; i++) {
        if (strcmp(ls->kv[i].key, key) == 0)
            return ls->kv[i].value;
    }
    return NULL;
}

static uint32_t hash_pairs(const pn_label *kv, size_t n)
{
    uint32_t h = PN_HASH_SEED;
    for (size_t i = 0; i < n; i++) {
        h = pn_hash_bytes(kv[i].key, strlen(kv[i].key) + 1, h);
        h = pn_hash_bytes(kv[i].value, strlen(kv[i].value) + 1, h);
    }
    return h;
}

static int same_pairs(const pn_labelset *ls, const pn_label *kv, size_t n)
{
    if (ls->n != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ls->kv[i].key, kv[i].key) != 0 || strcmp(ls->kv[i].value, kv[i].value) != 0)
            return 0;
    }
    return 1;
}

static int grow_buckets(void)
{
    size_t n = nbuckets ? nbuckets * 2 : 256;
    pn_labelset **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < nbuckets; i++) {
        pn_labelset *ls = buckets[i];
        while (ls) {
            pn_labelset *next = ls->next;
            ls->next = b[ls->hash & (n - 1)];
            b[ls->hash & (n - 1)] = ls;
            ls = next;
        }
    }
    free(buckets);
    buckets = b;
    nbuckets = n;
    return 0;
}

/* Returns a new reference to the set with exactly these sorted pairs. */
static const pn_labelset *intern_sorted(const pn_label *kv, size_t n, pn_error *e)
{
    if (n == 0)
        return &empty_set;
    uint32_t h = hash_pairs(kv, n);
    pthread_mutex_lock(&intern_lock);
    if (nbuckets) {
        for (pn_labelset *ls = buckets[h & (nbuckets - 1)]; ls; ls = ls->next) {
            if (ls->hash == h && same_pairs(ls, kv, n)) {
                ls->refs++;
                pthread_mutex_unlock(&intern_lock);
                return ls;
            }
        }
    }
    if (nsets + 1 > nbuckets && grow_buckets() != 0) {
        pthread_mutex_unlock(&intern_lock);
        return pn_fail(e, PN_ENOMEM, "out of memory interning a label set"), NULL;
    }
    size_t bytes = sizeof(pn_labelset) + n * sizeof(pn_label);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(kv[i].key) + strlen(kv[i].value) + 2;
    pn_labelset *ls = malloc(bytes);
    if (!ls) {
        pthread_mutex_unlock(&intern_lock);
        return pn_fail(e, PN_ENOMEM, "out of memory interning a label set"), NULL;
    }
    memset(ls, 0, sizeof *ls);
    char *text = (char *)&ls->kv[n];
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(kv[i].key) + 1, vl = strlen(kv[i].value) + 1;
        memcpy(text, kv[i].key, kl);
        ls->kv[i].key = text;
        text += kl;
        memcpy(text, kv[i].value, vl);
        ls->kv[i].value = text;
        text += vl;
    }
    ls->n = (uint32_t)n;
    ls->hash = h;
    ls->refs = 1;
    ls->id = next_id++;
    ls->next = buckets[h & (nbuckets - 1)];
    buckets[h & (nbuckets - 1)] = ls;
    nsets++;
    pthread_mutex_unlock(&intern_lock);
    return ls;
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const pn_label *)a)->key, ((const pn_label *)b)->key);
}

/* base ∪ kv, kv already valid (fix_pairs). */
static const pn_labelset *merge_valid(const pn_labelset *base, const pn_label *kv, size_t n,
                                      pn_error *e)
{
    pn_label merged[2 * PN_MAX_LABELS];
    size_t m = 0;
    /* New pairs first (later duplicates win), then base pairs not overridden. */
    for (size_t i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < m && strcmp(merged[j].key, kv[i].key) != 0; j++)
            ;
        merged[j] = kv[i];
        if (j == m)
            m++;
    }
    size_t fresh = m;
    for (uint32_t i = 0; i < base->n; i++) {
        size_t j;
        for (j = 0; j < fresh && strcmp(merged[j].key, base->kv[i].key) != 0; j++)
            ;
        if (j == fresh)
            merged[m++] = base->kv[i];
    }
    if (m > PN_MAX_LABELS && atomic_load(&strict_labels))
        return pn_fail(e, PN_ELIMIT, "a label set would hold %zu labels; the limit is %d", m,
                       PN_MAX_LABELS), NULL;
    if (m > PN_MAX_LABELS) {
        /* The block's new names do not fit beside the outer ones: it runs
         * with the outer labels (its overrides of them kept), as a block
         * whose labels are all or nothing (a span's span_id + trace_id). */
        size_t kept = 0;
        for (size_t i = 0; i < fresh; i++) {
            if (pn_labelset_get(base, merged[i].key))
                merged[kept++] = merged[i];
            else
                note_fix(1, merged[i].key, "more than 100 labels per sample: dropped");
        }
        memmove(merged + kept, merged + fresh, (m - fresh) * sizeof merged[0]);
        m = kept + (m - fresh);
    }
    qsort(merged, m, sizeof merged[0], cmp_label);
    return intern_sorted(merged, m, e);
}

const pn_labelset *pn_labelset_merge(const pn_labelset *base, const pn_label *given, size_t ngiven,
                                     pn_error *e)
{
    if (!base)
        base = &empty_set;
    pn_label kv[PN_MAX_LABELS];
    size_t n;
    char *store;
    if (fix_pairs(given, ngiven, kv, &n, &store, e) != 0)
        return NULL;
    const pn_labelset *ls = merge_valid(base, kv, n, e);
    free(store);
    return ls;
}

static const pn_labelset *without_valid(const pn_labelset *base, const char *key,
                                       const char *value);

const pn_labelset *pn_labelset_without(const pn_labelset *base, const char *key,
                                       const char *value)
{
    if (!base)
        base = &empty_set;
    if (pn_label_check_name(key, NULL) == 0 &&
        (!value || pn_label_check_sample_value(key, value, NULL) == 0))
        return without_valid(base, key, value);
    /* What merge made of the same pair (fixed the same way, not counted
     * again); a pair merge drops was never there. */
    char *buf = malloc(PN_MAX_LABEL_NAME + 1 + PN_MAX_LABEL_VALUE + 1);
    char *vbuf = buf ? buf + PN_MAX_LABEL_NAME + 1 : NULL;
    const char *what;
    int kfix = buf ? fix_name(key, buf, &what) : -1;
    int vfix = kfix >= 0 && value ? fix_value(key, value, vbuf, &what) : 0;
    const pn_labelset *ls;
    if (kfix < 0 || vfix < 0) {
        pn_labelset_ref(base);
        ls = base;
    } else {
        ls = without_valid(base, kfix ? buf : key, vfix ? vbuf : value);
    }
    free(buf);
    return ls;
}

static const pn_labelset *without_valid(const pn_labelset *base, const char *key,
                                       const char *value)
{
    const char *have = pn_labelset_get(base, key);
    if (!have || (value && strcmp(have, value) != 0)) {
        pn_labelset_ref(base);
        return base;
    }
    pn_label rest[PN_MAX_LABELS];
    size_t m = 0;
    for (uint32_t i = 0; i < base->n; i++) {
        if (strcmp(base->kv[i].key, key) != 0)
            rest[m++] = base->kv[i];
    }
    /* Interning compares contents before it can free anything, and base is
     * still referenced by our caller, so its strings stay valid here. */
    return intern_sorted(rest, m, NULL);
}

void pn_labelset_ref(const pn_labelset *cls)
{
    if (!cls || cls == &empty_set)
        return;
    pthread_mutex_lock(&intern_lock);
    ((pn_labelset *)cls)->refs++;
    pthread_mutex_unlock(&intern_lock);
}

static void unlink_set(pn_labelset *ls)
{
    pn_labelset **pp = &buckets[ls->hash & (nbuckets - 1)];
    while (*pp != ls)
        pp = &(*pp)->next;
    *pp = ls->next;
    nsets--;
}

/* Pop up to `max` retired sets that no reader can hold any more, oldest
 * first (tags grow along the FIFO). intern_lock held; returns the chain to
 * free after unlocking. */
static pn_labelset *take_passed(size_t max)
{
    pn_labelset *out = NULL, **tail = &out;
    for (size_t i = 0; i < max && retired_head && pn_grace_passed(retired_head->retired_tag); i++) {
        pn_labelset *ls = retired_head;
        retired_head = ls->next;
        if (!retired_head)
            retired_tail = NULL;
        nretired--;
        ls->next = NULL;
        *tail = ls;
        tail = &ls->next;
    }
    return out;
}

static void free_chain(pn_labelset *ls)
{
    while (ls) {
        pn_labelset *next = ls->next;
        free(ls);
        ls = next;
    }
}

void pn_labelset_unref(const pn_labelset *cls)
{
    if (!cls || cls == &empty_set)
        return;
    pn_labelset *ls = (pn_labelset *)cls;
    pthread_mutex_lock(&intern_lock);
    if (--ls->refs == 0) {
        unlink_set(ls);
        ls->next = NULL;
        ls->retired_tag = pn_grace_tag();
        if (retired_tail)
            retired_tail->next = ls;
        else
            retired_head = ls;
        retired_tail = ls;
        nretired++;
    }
    pn_labelset *done = take_passed(nretired > 1024 ? RECLAIM_STEP_BACKLOG : RECLAIM_STEP);
    pthread_mutex_unlock(&intern_lock);
    free_chain(done);
}

void pn_labels_reclaim(void)
{
    /* In steps, so an application thread never waits long for the lock. */
    for (;;) {
        pthread_mutex_lock(&intern_lock);
        pn_labelset *done = take_passed(64);
        pthread_mutex_unlock(&intern_lock);
        if (!done)
            return;
        free_chain(done);
    }
}

size_t pn_labelset_retired(void)
{
    pthread_mutex_lock(&intern_lock);
    size_t n = nretired;
    pthread_mutex_unlock(&intern_lock);
    return n;
}

size_t pn_labelset_live(void)
{
    pthread_mutex_lock(&intern_lock);
    size_t n = nsets;
    pthread_mutex_unlock(&intern_lock);
    return n;
}

/* ------------------------------------------------------- per-thread slots */

#define SLOTS 8192 /* threads holding labels at once */

typedef struct thread_labels thread_labels;

typedef struct {
    _Atomic pid_t tid;                  /* 0: free */
    _Atomic(const pn_labelset *) set;   /* written by the owning thread only */
    thread_labels *owner;               /* its thread-local state (for fork) */
} slot;

/* Slot table: a slot's tid is claimed and released under registry_lock by
 * its owning thread; the sampler scans it without locks. */
static slot slots[SLOTS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t max_probe; /* longest probe distance ever used */

/* Owned by the thread itself. */
struct thread_labels {
    slot *s;
    const pn_labelset **stack; /* previous sets saved by push, one reference each */
    size_t depth, cap;
};

static _Thread_local thread_labels tl;
static pthread_key_t exit_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t tid_home(pid_t tid) { return ((uint32_t)tid * 2654435761u) & (SLOTS - 1); }

static void on_thread_exit(void *arg);

static void init_once(void)
{
    pthread_key_create(&exit_key, on_thread_exit);
    pn_fork_register();
}

static slot *claim_slot(pn_error *e)
{
    if (tl.s)
        return tl.s;
    pthread_once(&once, init_once);
    pid_t tid = pn_gettid();
    pthread_mutex_lock(&registry_lock);
    uint32_t home = tid_home(tid);
    for (uint32_t d = 0; d < SLOTS; d++) {
        slot *s = &slots[(home + d) & (SLOTS - 1)];
        if (atomic_load(&s->tid) == 0) {
            atomic_store(&s->set, &empty_set);
            s->owner = &tl;
            atomic_store(&s->tid, tid);
            if (d > atomic_load(&max_probe))
                atomic_store(&max_probe, d);
            pthread_mutex_unlock(&registry_lock);
            tl.s = s;
            pthread_setspecific(exit_key, &tl);
            return s;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return pn_fail(e, PN_ELIMIT, "more than %d threads hold labels at once", SLOTS), NULL;
}

/* Publish ls as the thread's set (ownership of one reference moves in) and
 * return the previous set (its reference moves out to the caller). */
static const pn_labelset *slot_exchange(slot *s, const pn_labelset *ls)
{
    return atomic_exchange(&s->set, ls);
}

static void on_thread_exit(void *arg)
{
    thread_labels *t = arg;
    if (!t->s)
        return;
    const pn_labelset *cur = slot_exchange(t->s, &empty_set);
    pthread_mutex_lock(&registry_lock);
    atomic_store(&t->s->tid, 0);
    pthread_mutex_unlock(&registry_lock);
    pn_labelset_unref(cur);
    for (size_t i = 0; i < t->depth; i++)
        pn_labelset_unref(t->stack[i]);
    free(t->stack);
    memset(t, 0, sizeof *t);
}

const pn_labelset *pn_labels_current(void)
{
    return tl.s ? atomic_load(&tl.s->set) : &empty_set;
}

void pn_labels_set_current(const pn_labelset *ls)
{
    if (!ls)
        ls = &empty_set;
    slot *s = claim_slot(NULL);
    if (!s)
        return;
    pn_labelset_ref(ls);
    pn_labelset_unref(slot_exchange(s, ls));
}

int pn_labels_push(const pn_label *kv, size_t n, pn_error *e)
{
    slot *s = claim_slot(e);
    if (!s)
        return -1;
    if (tl.depth == tl.cap) {
        size_t cap = tl.cap ? tl.cap * 2 : 8;
        if (cap > 4096)
            return pn_fail(e, PN_ELIMIT, "labels nested more than 4096 deep on one thread");
        const pn_labelset **st = realloc(tl.stack, cap * sizeof *st);
        if (!st)
            return pn_fail(e, PN_ENOMEM, "out of memory saving the thread's labels");
        tl.stack = st;
        tl.cap = cap;
    }
    const pn_labelset *next = pn_labelset_merge(atomic_load(&s->set), kv, n, e);
    if (!next)
        return -1;
    tl.stack[tl.depth++] = slot_exchange(s, next);
    return 0;
}

int pn_labels_pop(pn_error *e)
{
    if (tl.depth == 0)
        return pn_fail(e, PN_ESTATE, "labels popped more often than pushed on this thread");
    const pn_labelset *prev = tl.stack[--tl.depth];
    pn_labelset_unref(slot_exchange(tl.s, prev));
    return 0;
}

size_t pn_labels_depth(void) { return tl.depth; }

int pn_labels_thread_add(const char *key, const char *value, pn_error *e)
{
    slot *s = claim_slot(e);
    if (!s)
        return -1;
    pn_label kv = {key, value};
    const pn_labelset *next = pn_labelset_merge(atomic_load(&s->set), &kv, 1, e);
    if (!next)
        return -1;
    pn_labelset_unref(slot_exchange(s, next));
    return 0;
}

int pn_labels_thread_remove(const char *key, const char *value, pn_error *e)
{
    if (atomic_load(&strict_labels) && pn_label_check_name(key, e) != 0)
        return -1;
    if (!tl.s)
        return 0;
    const pn_labelset *next = pn_labelset_without(atomic_load(&tl.s->set), key, value);
    pn_labelset_unref(slot_exchange(tl.s, next));
    return 0;
}

const pn_labelset *pn_labels_of_thread(pid_t tid)
{
    uint32_t home = tid_home(tid);
    uint32_t probes = atomic_load(&max_probe);
    for (uint32_t d = 0; d <= probes; d++) {
        slot *s = &slots[(home + d) & (SLOTS - 1)];
        if (atomic_load_explicit(&s->tid, memory_order_acquire) == tid)
            return atomic_load(&s->set);
    }
    return &empty_set;
}

/* --------------------------------------------------------------- fork */

/* Both locks are held across fork() (pipeline/fork.c calls these in its
 * fixed order) so the child never inherits them held by a thread that does
 * not exist there. */
void pn_labels_fork_prepare(void)
{
    pthread_mutex_lock(&registry_lock);
    pthread_mutex_lock(&intern_lock);
}

void pn_labels_fork_parent(void)
{
    pthread_mutex_unlock(&intern_lock);
    pthread_mutex_unlock(&registry_lock);
}

void pn_labels_fork_child(void)
{
    pthread_mutex_unlock(&intern_lock);
    pthread_mutex_unlock(&registry_lock);
    /* Only the forking thread exists now. Release what the other threads
     * held (their thread-local blocks are still mapped, just orphaned) and
     * rekey our own slot to our new tid. */
    for (size_t i = 0; i < SLOTS; i++) {
        slot *s = &slots[i];
        if (atomic_load(&s->tid) == 0)
            continue; /* never written: leave its page untouched */
        if (s != tl.s && s->owner)
            on_thread_exit(s->owner);
        atomic_store(&s->tid, 0);
    }
    atomic_store(&max_probe, 0);
    if (tl.s) {
        const pn_labelset *cur = atomic_load(&tl.s->set);
        tl.s = NULL;
        slot *s = claim_slot(NULL);
        if (s)
            atomic_store(&s->set, cur);
    }
}
