/*
 * Context labels (see context_labels.h).
 *
 * Why a non-NULL set the sampler reads is safe to use until its tick ends:
 * an entry holds one reference to its set from construction until dealloc
 * (or retire, which swaps in another set it holds a reference to). Both
 * clear or replace the published pointer *before* releasing the old set,
 * and releasing takes the grace tag after that (labels.c). The sampler
 * reads the pointer inside its tick's grace section, so if it saw the old
 * pointer it read it before the release tagged the set, and the set is not
 * freed before the tick leaves its section. Memory the sampler reaches
 * through a stale HAMT node may be a freed entry: dealloc leaves set NULL
 * there, and a reused block is either another live entry (a live set) or
 * has another type (rejected). A pointer read while it changes could be
 * torn, so each write also stores check = set ^ CHECK_SALT and a set
 * counts only when its check matches it in the same copy.
 *
 * Without a GIL (free-threaded CPython), an entry shared by several
 * contexts may be retired on one thread while another reads its set: both
 * happen in the entry's critical section, and readers take a reference to
 * the set they use (entry_set_ref).
 */
#define Py_BUILD_CORE 1
#include "cpython_layout.h"

#include "context_labels.h"
#include "log_bridge.h"
#include "pairs.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

/* Before 3.13 there are no critical sections: the GIL is enough. */
#ifndef Py_BEGIN_CRITICAL_SECTION
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif

#define CHECK_SALT ((uintptr_t)0x5bd1e9955bd1e995ull)
#define COLLISION_MAX 64        /* pairs of one collision node we scan */

typedef struct {
    PyObject_HEAD
    /* Written with the GIL; the sampler copies both (see the file note). */
    _Atomic(const pn_labelset *) set;
    _Atomic uintptr_t check;
    /* GIL only. parent: the live entry this one was merged onto (NULL: the
     * context had none); owner: who opened it (a tag_wrapper instance, or
     * NULL for an entry its creator exits by identity). */
    PyObject *parent;
    PyObject *owner;
    _Atomic int retired; /* written in the entry's critical section */
    int applied;   /* 0: its tags hit a limit; it labels as its parent */
} ctx_entry;

static PyTypeObject ctx_entry_type;

/* Set by ctx_labels_init with the GIL before any sampler starts, read-only
 * afterwards (the sampler thread reads them). */
static PyObject *var;                 /* our ContextVar */
static int enabled;
#if PNW_CONTEXT_SUPPORTED
static int32_t var_hash;              /* hamt_hash(var) */
static const PyTypeObject *hamt_type, *bitmap_type, *array_type, *collision_type;
#endif

/* Sampler thread (lookups) and application threads (exits, drops). */
static _Atomic uint64_t n_lookups, n_labelled, n_read_errors, n_exit_unmatched, n_drops,
    n_switched;

static void bump(_Atomic uint64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

/* ---------------------------------------------------------- entries */

/* The set of entry o (empty for NULL) with a reference for the caller: a
 * retire on another thread may replace and release it meanwhile. */
static const pn_labelset *entry_set_ref(PyObject *o)
{
    const pn_labelset *ls = pn_labelset_empty();
    if (o) {
        Py_BEGIN_CRITICAL_SECTION(o);
        ls = atomic_load(&((ctx_entry *)o)->set);
        pn_labelset_ref(ls);
        Py_END_CRITICAL_SECTION();
    }
    return ls;
}

/* A dict of o's labels. */
static PyObject *entry_dict(PyObject *o)
{
    const pn_labelset *ls = entry_set_ref(o);
    PyObject *d = py_labels_dict(ls);
    pn_labelset_unref(ls);
    return d;
}

/* Publish ls (one reference moves in); returns the previous set, whose
 * reference moves out to the caller. */
static const pn_labelset *entry_publish(ctx_entry *e, const pn_labelset *ls)
{
    const pn_labelset *old = atomic_load(&e->set);
    atomic_store(&e->set, NULL);
    atomic_store(&e->check, (uintptr_t)ls ^ CHECK_SALT);
    atomic_store(&e->set, ls);
    return old;
}

/* The entry o stands for when labelling goes on: o itself, or its first
 * ancestor that was not retired. Borrowed; NULL: none. */
static PyObject *live_entry(PyObject *o)
{
    while (o && Py_IS_TYPE(o, &ctx_entry_type) && ((ctx_entry *)o)->retired)
        o = ((ctx_entry *)o)->parent;
    return o && Py_IS_TYPE(o, &ctx_entry_type) ? o : NULL;
}

static void entry_dealloc(PyObject *o)
{
    ctx_entry *e = (ctx_entry *)o;
    pn_labelset_unref(entry_publish(e, NULL));
    PyObject *parent = e->parent;
    e->parent = NULL;
    Py_CLEAR(e->owner);
    Py_TYPE(o)->tp_free(o);
    /* Free a chain of blocks left open (entered, never exited) one by one:
     * releasing parents recursively could run off the C stack. */
    while (parent && Py_IS_TYPE(parent, &ctx_entry_type) && Py_REFCNT(parent) == 1) {
        PyObject *next = ((ctx_entry *)parent)->parent;
        ((ctx_entry *)parent)->parent = NULL;
        Py_DECREF(parent);
        parent = next;
    }
    Py_XDECREF(parent);
}

static PyObject *entry_labels(PyObject *o, PyObject *unused)
{
    (void)unused;
    return entry_dict(o);
}

/* The block ended outside the context that runs it (a span ended in
 * another task, or a child task outlives the span it inherited): from now
 * on the entry labels as its parent did, everywhere it is still current. */
static PyObject *entry_retire(PyObject *o, PyObject *unused)
{
    (void)unused;
    ctx_entry *e = (ctx_entry *)o;
    Py_BEGIN_CRITICAL_SECTION(o);
    if (!e->retired) {
        pn_labelset_unref(entry_publish(e, entry_set_ref(live_entry(e->parent))));
        e->retired = 1;
    }
    Py_END_CRITICAL_SECTION();
    Py_RETURN_NONE;
}

static PyMethodDef entry_methods[] = {
    {"labels", entry_labels, METH_NOARGS, "this entry's labels as a dict"},
    {"retire", entry_retire, METH_NOARGS, "label as the parent entry from now on"},
    {NULL, NULL, 0, NULL},
};

static PyObject *entry_applied(PyObject *o, void *unused)
{
    (void)unused;
    return PyBool_FromLong(((ctx_entry *)o)->applied);
}

static PyGetSetDef entry_getset[] = {
    {"applied", entry_applied, NULL, "False when the tags were left out (a limit)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ctx_entry_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyroscope._native.ContextLabels",
    .tp_basicsize = sizeof(ctx_entry),
    .tp_dealloc = entry_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The labels of one open block in one context (made by context_enter).",
    .tp_methods = entry_methods,
    .tp_getset = entry_getset,
};

/* A new entry holding ls (its reference moves in) merged onto parent. */
static PyObject *entry_new(const pn_labelset *ls, PyObject *parent, PyObject *owner)
{
    ctx_entry *e = PyObject_New(ctx_entry, &ctx_entry_type);
    if (!e) {
        pn_labelset_unref(ls);
        return NULL;
    }
    atomic_init(&e->set, NULL);
    atomic_init(&e->check, 0);
    Py_XINCREF(parent);
    e->parent = parent;
    e->owner = owner == Py_None ? NULL : owner;
    Py_XINCREF(e->owner);
    e->retired = 0;
    e->applied = 1;
    entry_publish(e, ls);
    return (PyObject *)e;
}

/* The current value of our ContextVar as a new reference (NULL: none). */
static int current(PyObject **out)
{
    *out = NULL;
    if (PyContextVar_Get(var, NULL, out) != 0)
        return -1;
    if (*out && !Py_IS_TYPE(*out, &ctx_entry_type))
        Py_CLEAR(*out); /* someone stored something else in our var */
    return 0;
}

const pn_labelset *ctx_labels_current(void)
{
    PyObject *v = NULL;
    /* No error to clear: it fails only for a var that is no ContextVar,
     * and an exception the application has pending must stay as it is. */
    if (!var || PyContextVar_Get(var, NULL, &v) != 0 || !v)
        return NULL;
    const pn_labelset *ls = NULL;
    if (Py_IS_TYPE(v, &ctx_entry_type))
        ls = atomic_load(&((ctx_entry *)v)->set);
    Py_DECREF(v); /* the context still holds it: never the last reference */
    return ls;
}

static int set_current(PyObject *entry)
{
    PyObject *token = PyContextVar_Set(var, entry ? entry : Py_None);
    if (!token)
        return -1;
    Py_DECREF(token);
    return 0;
}

/* context_enter(tags, owner) -> entry: the current context's labels become
 * current ∪ tags until context_exit. Bad tags raise (they name the label);
 * a limit (too many labels after merging, memory) is logged and counted,
 * and the block runs with the labels it had. */
static PyObject *m_context_enter(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tags, *owner;
    if (!PyArg_ParseTuple(args, "OO", &tags, &owner))
        return NULL;
    pn_label *kv;
    size_t n;
    if (py_dict_pairs(tags, "tags", &kv, &n) != 0)
        return NULL;
    PyObject *cur;
    if (current(&cur) != 0) {
        py_pairs_free(kv);
        return NULL;
    }
    PyObject *base = live_entry(cur);
    pn_error e = {0};
    const pn_labelset *base_set = entry_set_ref(base);
    const pn_labelset *ls = pn_labelset_merge(base_set, kv, n, &e);
    /* Not applied: the tags were left out (past the label limit; strict
     * labels off), so the block labels as its parent (the span processor
     * then sets no profile id). Only the first key is looked at: a limit
     * leaves out every new key of the block, and a key the core renamed is
     * never the span processor's. */
    int left_out = ls && n && pn_label_check_name(kv[0].key, NULL) == 0 && kv[0].value &&
                   kv[0].value[0] && !pn_labelset_get(ls, kv[0].key);
    py_pairs_free(kv);
    if (!ls && e.code == PN_EINVAL) {
        pn_labelset_unref(base_set);
        Py_XDECREF(cur);
        PyErr_SetString(PyExc_ValueError, e.msg);
        return NULL;
    }
    int applied = ls != NULL && !left_out;
    if (!ls) {
        bump(&n_drops);
        pn_log(PN_LOG_WARN, "pyroscope: labels of a block were not applied: %s", e.msg);
        log_bridge_drain(); /* to the logger now, while the caller is known */
        ls = base_set;
    } else {
        pn_labelset_unref(base_set);
    }
    PyObject *entry = entry_new(ls, base, owner);
    if (entry)
        ((ctx_entry *)entry)->applied = applied;
    Py_XDECREF(cur);
    if (entry && set_current(entry) != 0)
        Py_CLEAR(entry);
    return entry;
}

/* context_exit(owner, unwind) -> 1: the owner's newest entry in this
 * context was closed (with unwind, entries still open above it go too);
 * 2: entries opened after it are still open, so it was retired in place
 * instead (its labels end now, theirs stay); 0: no entry of the owner here
 * (counted when unwinding: a tag_wrapper leaving a block it did not enter
 * in this context; a span may end anywhere). owner may also be the entry. */
static PyObject *m_context_exit(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *owner;
    int unwind = 1;
    if (!PyArg_ParseTuple(args, "O|p", &owner, &unwind))
        return NULL;
    PyObject *cur;
    if (current(&cur) != 0)
        return NULL;
    PyObject *found = NULL;
    int above = 0; /* live entries above found */
    for (PyObject *o = cur; o && Py_IS_TYPE(o, &ctx_entry_type); o = ((ctx_entry *)o)->parent) {
        ctx_entry *e = (ctx_entry *)o;
        if (o == owner || (e->owner && e->owner == owner)) {
            found = o;
            break;
        }
        above += !e->retired;
    }
    long rc = 0;
    if (!found) {
        if (unwind)
            bump(&n_exit_unmatched);
    } else if (above == 0 || unwind) {
        rc = set_current(live_entry(((ctx_entry *)found)->parent)) == 0 ? 1 : -1;
    } else {
        Py_DECREF(entry_retire(found, NULL));
        rc = 2;
    }
    Py_XDECREF(cur);
    return rc < 0 ? NULL : PyLong_FromLong(rc);
}

static PyObject *m_context_labels(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *cur;
    if (current(&cur) != 0)
        return NULL;
    PyObject *d = entry_dict(live_entry(cur));
    Py_XDECREF(cur);
    return d;
}

static PyMethodDef functions[] = {
    {"context_enter", m_context_enter, METH_VARARGS,
     "context_enter(tags, owner) -> entry: this context's labels become current ∪ tags"},
    {"context_exit", m_context_exit, METH_VARARGS,
     "context_exit(owner, unwind=True) -> 1 closed, 2 retired in place, 0 not found"},
    {"context_labels", m_context_labels, METH_NOARGS, "this context's labels as a dict"},
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------- sampler */

#if PNW_CONTEXT_SUPPORTED

/* The value of key `var` in the HAMT rooted at node, or NULL (absent).
 * -1 in *err when a read fails or what was read is inconsistent. */
static const void *hamt_find(const void *node, int *err)
{
    uint32_t h = (uint32_t)var_hash;
    for (uint32_t level = 0; level <= PNW_HAMT_MAX_DEPTH; level++) {
        uint32_t shift = level * PNW_HAMT_BITS, idx = shift < 32 ? (h >> shift) & 31 : 0;
        PyVarObject head;
        if (node == NULL || pn_safe_read(&head, node, sizeof head) != 0)
            break;
        const PyTypeObject *type = ((PyObject *)&head)->ob_type;
        Py_ssize_t size = head.ob_size;
        if (type == bitmap_type && shift < 32) {
            uint32_t bitmap;
            if (pn_safe_read(&bitmap, (const char *)node + offsetof(pnw_hamt_bitmap, b_bitmap),
                             sizeof bitmap) != 0)
                break;
            uint32_t bit = 1u << idx;
            if (!(bitmap & bit))
                return NULL;
            Py_ssize_t at = 2 * (Py_ssize_t)__builtin_popcount(bitmap & (bit - 1));
            const void *kv[2];
            if (at + 1 >= size ||
                pn_safe_read(kv, (const char *)node + offsetof(pnw_hamt_bitmap, b_array) +
                                     (size_t)at * sizeof(void *), sizeof kv) != 0)
                break;
            if (kv[0] == NULL) {
                node = kv[1]; /* a sub-node for the next 5 bits */
                continue;
            }
            return kv[0] == (const void *)var ? kv[1] : NULL;
        }
        if (type == array_type && shift < 32) {
            const void *sub;
            if (pn_safe_read(&sub, (const char *)node + offsetof(pnw_hamt_array, a_array) +
                                       idx * sizeof(void *), sizeof sub) != 0)
                break;
            if (sub == NULL)
                return NULL;
            node = sub;
            continue;
        }
        if (type == collision_type && collision_type) {
            if (size < 0 || size % 2 || size > 2 * COLLISION_MAX)
                break;
            const void *kv[2 * COLLISION_MAX];
            if (pn_safe_read(kv, (const char *)node + offsetof(pnw_hamt_collision, c_array),
                             (size_t)size * sizeof(void *)) != 0)
                break;
            for (Py_ssize_t i = 0; i < size; i += 2) {
                if (kv[i] == (const void *)var)
                    return kv[i + 1];
            }
            return NULL;
        }
        break; /* a type we do not know here, or deeper than a hash reaches */
    }
    *err = 1;
    return NULL;
}

static const pn_labelset *lookup(const void *context, int *err)
{
    PyContext c;
    if (pn_safe_read(&c, context, sizeof c) != 0 ||
        ((PyObject *)&c)->ob_type != &PyContext_Type) {
        *err = 1;
        return NULL;
    }
    PyHamtObject h;
    if (c.ctx_vars == NULL)
        return NULL; /* a context being torn down */
    if (pn_safe_read(&h, c.ctx_vars, sizeof h) != 0 ||
        ((PyObject *)&h)->ob_type != hamt_type) {
        *err = 1;
        return NULL;
    }
    const void *value = hamt_find(h.h_root, err);
    if (value == NULL)
        return NULL;
    ctx_entry e;
    if (pn_safe_read(&e, value, sizeof e) != 0) {
        *err = 1;
        return NULL;
    }
    if (((PyObject *)&e)->ob_type != &ctx_entry_type)
        return NULL; /* None: no block open in this context */
    const pn_labelset *ls = atomic_load(&e.set);
    if (ls && atomic_load(&e.check) != ((uintptr_t)ls ^ CHECK_SALT)) {
        *err = 1; /* read while it changed */
        return NULL;
    }
    return ls;
}

const pn_labelset *ctx_labels_of(const void *context)
{
    if (!enabled || context == NULL)
        return NULL;
    bump(&n_lookups);
    int err = 0;
    const pn_labelset *ls = lookup(context, &err);
    if (err)
        bump(&n_read_errors);
    else if (pn_labelset_count(ls) > 0)
        bump(&n_labelled);
    return ls;
}

/* Learn the HAMT's node types from live tries (the type objects are not
 * exported from 3.11 on) and check the layouts by finding an entry the way
 * the sampler will. GIL held. Returns 1 when context labels can be read. */
static int learn_layout(void)
{
    Py_hash_t full = PyObject_Hash(var);
    if (full == -1)
        return -1;
    var_hash = pnw_hamt_hash(full);
    /* 3.10 still exports the collision node type; later versions do not,
     * and a collision on our key's 32-bit hash is then counted as an error. */
    collision_type = dlsym(RTLD_DEFAULT, "_PyHamt_CollisionNode_Type");
    PyObject *ctx = PyContext_New(), *vars = PyList_New(0);
    pn_label kv = {"pyroscope_layout_check", "1"};
    const pn_labelset *probe = pn_labelset_merge(NULL, &kv, 1, NULL);
    PyObject *entry = probe ? entry_new(probe, NULL, NULL) : NULL;
    int ok = 0;
    if (!ctx || !vars || !entry || PyContext_Enter(ctx) != 0)
        goto out;
    PyContext *c = (PyContext *)ctx;
    if (set_current(entry) != 0)
        goto exit;
    hamt_type = Py_TYPE(c->ctx_vars);
    bitmap_type = Py_TYPE(c->ctx_vars->h_root); /* one key: a bitmap root */
    int err = 0;
    int small = lookup(ctx, &err) == probe && !err;
    /* More keys than a bitmap node keeps (16) turn the root into an array
     * node; then look again, through it. A var's hash mixes its address
     * with its name's: with one name, allocators that place the vars at
     * a fixed stride (mimalloc, on free-threaded builds) leave a few low
     * hash bits to tell them apart, and the root would stay a bitmap of
     * sub-nodes. Names of their own spread the hashes. */
    for (int i = 0; i < 64; i++) {
        char name[48];
        snprintf(name, sizeof name, "pyroscope_layout_check_%d", i);
        PyObject *v = PyContextVar_New(name, NULL);
        PyObject *t = v ? PyContextVar_Set(v, Py_None) : NULL;
        Py_XDECREF(t);
        if (!t || PyList_Append(vars, v) != 0) {
            Py_XDECREF(v);
            goto exit;
        }
        Py_DECREF(v);
    }
    if (Py_TYPE(c->ctx_vars->h_root) != bitmap_type)
        array_type = Py_TYPE(c->ctx_vars->h_root);
    ok = small && array_type && lookup(ctx, &err) == probe && !err;
exit:
    if (PyContext_Exit(ctx) != 0)
        ok = -1;
out:
    Py_XDECREF(entry);
    Py_XDECREF(vars);
    Py_XDECREF(ctx);
    if (ok < 0 || PyErr_Occurred())
        return -1;
    return ok;
}

#else

const pn_labelset *ctx_labels_of(const void *context)
{
    (void)context;
    return NULL;
}

static int learn_layout(void) { return 0; }

#endif /* PNW_CONTEXT_SUPPORTED */

/* ----------------------------------------------------- stack <-> context */

/* context and context_ver are neighbours in every PyThreadState (3.10+). */
_Static_assert(offsetof(PyThreadState, context_ver) ==
                   offsetof(PyThreadState, context) + sizeof(PyObject *),
               "PyThreadState: context_ver does not follow context");

int ctx_stamp_read(const void *ts, ctx_stamp *out)
{
    struct {
        const void *context;
        uint64_t ver;
    } raw;
    if (pn_safe_read(&raw, (const char *)ts + offsetof(PyThreadState, context), sizeof raw) != 0)
        return -1;
    out->context = raw.context;
    out->ver = raw.ver;
    return 0;
}

int ctx_labels_if_unchanged(const void *ts, const ctx_stamp *stamp, int last,
                            const pn_labelset **out)
{
    /* Looked up first, so the lookup is inside the checked span too. */
    const pn_labelset *ls = ctx_labels_of(stamp->context);
    ctx_stamp now;
    if (ctx_stamp_read(ts, &now) != 0 || now.context != stamp->context ||
        now.ver != stamp->ver) {
        if (last)
            bump(&n_switched);
        *out = NULL;
        return 1;
    }
    *out = ls;
    return 0;
}

/* ------------------------------------------------------------ module */

/* PyModule_AddObjectRef is 3.10+; the file still compiles for older
 * versions so that their build fails with the walker's clear message. */
static int add_object(PyObject *module, const char *name, PyObject *o)
{
    Py_INCREF(o);
    if (PyModule_AddObject(module, name, o) != 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}

int ctx_labels_init(PyObject *module)
{
    if (PyType_Ready(&ctx_entry_type) != 0 ||
        add_object(module, "ContextLabels", (PyObject *)&ctx_entry_type) != 0 ||
        PyModule_AddFunctions(module, functions) != 0)
        return -1;
    if (!var && !(var = PyContextVar_New("pyroscope_labels", NULL)))
        return -1;
    if (add_object(module, "context_var", var) != 0)
        return -1;
    int ok = learn_layout();
    if (ok < 0)
        return -1;
    enabled = ok;
    return 0;
}

void ctx_labels_get_stats(ctx_labels_stats *out)
{
    out->enabled = (uint64_t)enabled;
    out->lookups = atomic_load_explicit(&n_lookups, memory_order_relaxed);
    out->labelled = atomic_load_explicit(&n_labelled, memory_order_relaxed);
    out->read_errors = atomic_load_explicit(&n_read_errors, memory_order_relaxed);
    out->exit_unmatched = atomic_load_explicit(&n_exit_unmatched, memory_order_relaxed);
    out->label_drops = atomic_load_explicit(&n_drops, memory_order_relaxed);
    out->switched = atomic_load_explicit(&n_switched, memory_order_relaxed);
}
