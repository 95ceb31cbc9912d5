/* Label-set handles and the published slot.
 *
 * A handle is a JS object owning one reference to an interned label set and
 * a small id; the id indexes `table`, from which the SIGPROF handler reads
 * the set with one atomic load. JS publishes the ids of the running async
 * context (and of the active span) into its thread's two int32 cells, in
 * an ArrayBuffer that JS writes through an Int32Array (no call into C per
 * publication).
 *
 * Threads: handles are made and finalized on the JS thread (main or
 * worker) whose objects they are; the table and its free list are shared
 * by those threads under the addon lock, and the table is read by the
 * handler with atomic loads. Each thread's cells are published in
 * `cells[entry]`, read by the handler interrupting that thread only, and
 * cleared on that thread when its environment ends (before its isolate
 * frees the ArrayBuffer). A finalizer clears the table entry
 * before it drops its reference, and the core frees a set only after the
 * grace period of every driver reader (signal.c holds the generation a
 * bracket read), so a pointer the handler loaded stays valid until it is
 * recorded. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

#define MAX_HANDLES (1u << 20) /* 8 MiB reserved, touched as used */

typedef struct {
    const pn_labelset *ls;
    uint32_t id; /* 0: the table was full; the set still works in JS */
} handle;

static const pn_labelset *_Atomic *table;
static uint32_t *free_next;     /* addon lock: free-list links */
static uint32_t free_head;      /* addon lock: 0 = empty */
static uint32_t next_unused = 1; /* addon lock; id 0 means "none" */
static uint64_t handles_live, handles_full; /* addon lock */
/* Per JS thread: its cells (NULL: none) and the reference keeping them. */
static volatile int32_t *_Atomic cells[THREADS_MAX];
static napi_ref cells_ref[THREADS_MAX];

volatile int32_t *labels_cells(int idx)
{
    return atomic_load_explicit(&cells[idx], memory_order_acquire);
}

void labels_release(int idx)
{
    atomic_store(&cells[idx], NULL);
    cells_ref[idx] = NULL; /* the environment ends: Node frees the reference */
}

const pn_labelset *labels_of_handle(uint32_t id)
{
    if (id == 0 || id >= MAX_HANDLES || !table)
        return NULL;
    return atomic_load_explicit(&table[id], memory_order_acquire);
}

/* Addon lock held. */
static uint32_t id_take(const pn_labelset *ls)
{
    uint32_t id = 0;
    if (free_head) {
        id = free_head;
        free_head = free_next[id];
    } else if (next_unused < MAX_HANDLES) {
        id = next_unused++;
    } else {
        handles_full++;
        return 0;
    }
    atomic_store_explicit(&table[id], ls, memory_order_release);
    return id;
}

/* Addon lock held. */
static void id_give(uint32_t id)
{
    atomic_store_explicit(&table[id], NULL, memory_order_release);
    free_next[id] = free_head;
    free_head = id;
}

static void handle_finalize(napi_env env, void *data, void *hint)
{
    (void)env;
    (void)hint;
    handle *h = data;
    addon_lock();
    if (h->id)
        id_give(h->id);
    handles_live--;
    addon_unlock();
    pn_labelset_unref(h->ls);
    free(h);
}

static handle *unwrap(napi_env env, napi_value v)
{
    napi_valuetype t;
    if (napi_typeof(env, v, &t) != napi_ok || t != napi_object)
        return NULL;
    void *p = NULL;
    if (napi_unwrap(env, v, &p) != napi_ok)
        return NULL;
    return p;
}

/* labelsSlot() -> Int32Array(2) over this thread's cells, which the
 * handler reads when it interrupts this thread. */
static napi_value m_slot(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value ab, arr;
    int t = env_thread(env);
    if (t < 0 || !cells_ref[t]) {
        void *data;
        if (napi_create_arraybuffer(env, 2 * sizeof(int32_t), &data, &ab) != napi_ok)
            return NULL;
        memset(data, 0, 2 * sizeof(int32_t));
        if (t < 0) {
            /* no entry: cells nobody reads (the thread is not profiled) */
            napi_create_typedarray(env, napi_int32_array, 2, ab, 0, &arr);
            return arr;
        }
        napi_create_reference(env, ab, 1, &cells_ref[t]);
        atomic_store_explicit(&cells[t], data, memory_order_release);
    }
    napi_get_reference_value(env, cells_ref[t], &ab);
    napi_create_typedarray(env, napi_int32_array, 2, ab, 0, &arr);
    return arr;
}

/* A label name or value: as js_string, but an embedded NUL becomes U+FFFD
 * (the core then sees the rest of the string, not a silent cut). */
static char *js_label_string(napi_env env, napi_value v, const char *what, int *nul)
{
    napi_valuetype t;
    if (napi_typeof(env, v, &t) != napi_ok)
        return NULL;
    if (t != napi_string)
        return js_string(env, v, what);
    size_t len;
    if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok)
        return NULL;
    char *raw = malloc(len + 1), *buf = NULL;
    if (raw) {
        napi_get_value_string_utf8(env, v, raw, len + 1, &len);
        if (len == strlen(raw))
            return raw;
        *nul = 1;
        size_t extra = 0;
        for (size_t i = 0; i < len; i++)
            extra += raw[i] == 0 ? 2 : 0;
        if ((buf = malloc(len + extra + 1))) {
            size_t o = 0;
            for (size_t i = 0; i < len; i++) {
                if (raw[i]) {
                    buf[o++] = raw[i];
                } else {
                    memcpy(buf + o, "\xef\xbf\xbd", 3);
                    o += 3;
                }
            }
            buf[o] = '\0';
        }
        free(raw);
    }
    if (!buf)
        napi_throw_error(env, NULL, "pyroscope: out of memory");
    return buf;
}

/* labelsHandle(base handle | null, keys[], values[]) -> a handle {id} of
 * base ∪ pairs (pairs win). Names and values the server cannot take are
 * fixed or dropped by the core (counted), unless strict labels are on: then
 * it throws, naming the key. */
static napi_value m_handle(napi_env env, napi_callback_info info)
{
    napi_value argv[3];
    size_t argc = js_args(env, info, argv, 3);
    if (argc < 3)
        return throw_msg(env, "ERR_INVALID_ARG_TYPE", "labelsHandle(base, keys, values)");
    addon_lock();
    if (!table) {
        free_next = pn_pages_new(MAX_HANDLES * sizeof *free_next);
        table = free_next ? pn_pages_new(MAX_HANDLES * sizeof *table) : NULL;
    }
    addon_unlock();
    if (!table)
        return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: cannot reserve the label table");
    handle *base = unwrap(env, argv[0]);
    uint32_t n, nv;
    napi_get_array_length(env, argv[1], &n);
    napi_get_array_length(env, argv[2], &nv);
    if (n != nv)
        return throw_msg(env, "ERR_INVALID_ARG_TYPE", "labelsHandle: keys and values differ in "
                         "length");
    /* More than PN_MAX_LABELS: the core drops the rest (or fails, strict). */
    pn_label *kv = malloc((n ? n : 1) * sizeof *kv);
    char **owned = malloc((2 * n + 1) * sizeof *owned);
    uint32_t nown = 0, nuls = 0;
    napi_value result = NULL;
    if (!kv || !owned) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        napi_value k, v;
        napi_get_element(env, argv[1], i, &k);
        napi_get_element(env, argv[2], i, &v);
        int nul = 0;
        char *ks = js_label_string(env, k, "labels: names must be strings", &nul);
        if (!ks)
            goto out;
        owned[nown++] = ks;
        /* null: no value (lib/context.js passes it for null, undefined and
         * objects); the core drops the pair, or fails it when strict. */
        napi_valuetype vt;
        napi_typeof(env, v, &vt);
        char *vs = NULL;
        if (vt != napi_null) {
            char what[200];
            snprintf(what, sizeof what, "labels: the value of \"%.100s\" must be a string or "
                     "number", ks);
            if (!(vs = js_label_string(env, v, what, &nul)))
                goto out;
            owned[nown++] = vs;
        }
        kv[i] = (pn_label){ks, vs};
        if (nul) {
            nuls++;
            pn_labels_note_fix(0, ks, "NUL character made U+FFFD");
        }
    }
    pn_error e = {0};
    uint64_t c0, d0, c1, d1;
    pn_labels_fix_counts(&c0, &d0);
    const pn_labelset *ls =
        pn_labelset_merge(base ? base->ls : pn_labelset_empty(), kv, n, &e);
    if (!ls) {
        throw_msg(env, "ERR_PYROSCOPE_LABELS", "%s", e.msg);
        goto out;
    }
    handle *h = malloc(sizeof *h);
    if (!h) {
        pn_labelset_unref(ls);
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        goto out;
    }
    h->ls = ls;
    addon_lock();
    h->id = pn_labelset_count(ls) ? id_take(ls) : 0;
    handles_live++;
    addon_unlock();
    napi_value obj;
    napi_create_object(env, &obj);
    if (napi_wrap(env, obj, h, handle_finalize, NULL, NULL) != napi_ok) {
        addon_lock();
        if (h->id)
            id_give(h->id);
        handles_live--;
        addon_unlock();
        pn_labelset_unref(ls);
        free(h);
        goto out;
    }
    set_num(env, obj, "id", h->id);
    /* fixed: some pair was changed or dropped (lib/context.js does not cache
     * such a set, so each use is counted, and strict labels see it again). */
    pn_labels_fix_counts(&c1, &d1);
    if (c1 != c0 || d1 != d0 || nuls) {
        napi_value t;
        napi_get_boolean(env, true, &t);
        napi_set_named_property(env, obj, "fixed", t);
    }
    result = obj;
out:
    for (uint32_t i = 0; i < nown; i++)
        free(owned[i]);
    free(owned);
    free(kv);
    return result;
}

/* labelsPairs(handle) -> [[k, v], ...] in key order. */
static napi_value m_pairs(napi_env env, napi_callback_info info)
{
    napi_value argv[1], arr;
    js_args(env, info, argv, 1);
    napi_create_array(env, &arr);
    handle *h = unwrap(env, argv[0]);
    if (!h)
        return arr;
    size_t n = pn_labelset_count(h->ls);
    for (size_t i = 0; i < n; i++) {
        pn_label l = pn_labelset_at(h->ls, i);
        napi_value pair, k, v;
        napi_create_array_with_length(env, 2, &pair);
        napi_create_string_utf8(env, l.key, NAPI_AUTO_LENGTH, &k);
        napi_create_string_utf8(env, l.value, NAPI_AUTO_LENGTH, &v);
        napi_set_element(env, pair, 0, k);
        napi_set_element(env, pair, 1, v);
        napi_set_element(env, arr, (uint32_t)i, pair);
    }
    return arr;
}

static napi_value m_counts(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value o;
    napi_create_object(env, &o);
    set_num(env, o, "handlesLive", (double)handles_live);
    set_num(env, o, "handlesTableFull", (double)handles_full);
    set_num(env, o, "labelSetsLive", (double)pn_labelset_live());
    uint64_t coerced, dropped;
    pn_labels_fix_counts(&coerced, &dropped);
    set_num(env, o, "coerced", (double)coerced);
    set_num(env, o, "dropped", (double)dropped);
    return o;
}

/* labelsStrict() -> the strict_labels setting of the running agent. */
static napi_value m_strict(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value b;
    napi_get_boolean(env, pn_labels_strict() != 0, &b);
    return b;
}

/* labelsNoteDropped(key, why): a fix made in JS, counted and logged. */
static napi_value m_note_dropped(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    if (js_args(env, info, argv, 2) < 2)
        return NULL;
    char *k = js_string(env, argv[0], "labelsNoteDropped(key, why)");
    char *w = k ? js_string(env, argv[1], "labelsNoteDropped(key, why)") : NULL;
    if (k && w)
        pn_labels_note_fix(1, k, w);
    free(k);
    free(w);
    return NULL;
}

void labels_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "labelsStrict", m_strict);
    set_fn(env, exports, "labelsNoteDropped", m_note_dropped);
    set_fn(env, exports, "labelsSlot", m_slot);
    set_fn(env, exports, "labelsHandle", m_handle);
    set_fn(env, exports, "labelsPairs", m_pairs);
    set_fn(env, exports, "labelsCounts", m_counts);
}
