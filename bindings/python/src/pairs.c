/* Label and header pairs from Python dicts (see pairs.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "pairs.h"

#include <stddef.h>
#include <string.h>

const char *py_utf8_c_string(PyObject *o, const char *what, PyObject *key)
{
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s && strlen(s) != (size_t)n) {
        if (key)
            PyErr_Format(PyExc_ValueError, "%s: %R must not contain a NUL character", what,
                         key);
        else
            PyErr_Format(PyExc_ValueError, "%s must not contain a NUL character", what);
        return NULL;
    }
    return s;
}

/* The pairs are allocated behind a header that keeps what their strings
 * live in. */
typedef struct {
    PyObject *keep; /* free-threaded: the dict's copy; else NULL */
    _Alignas(pn_label) char pairs[];
} pairs_block;

static pn_label *pairs_of(pairs_block *b) { return (pn_label *)b->pairs; }

static pairs_block *block_of(pn_label *kv)
{
    return (pairs_block *)((char *)kv - offsetof(pairs_block, pairs));
}

void py_pairs_free(pn_label *kv)
{
    if (!kv)
        return;
    pairs_block *b = block_of(kv);
    Py_XDECREF(b->keep);
    PyMem_Free(b);
}

/* A dict of str -> str as pairs pointing into the dict's strings. Without
 * a GIL another thread may change the dict meanwhile (and free a string
 * we point into), so a copy, taken atomically, is read and kept instead. */
int py_dict_pairs(PyObject *d, const char *what, pn_label **kv, size_t *n)
{
    *kv = NULL;
    *n = 0;
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict of str to str, not %.100s", what,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
#ifdef Py_GIL_DISABLED
    PyObject *keep = PyDict_Copy(d);
    if (!keep)
        return -1;
    d = keep;
#else
    PyObject *keep = NULL;
#endif
    Py_ssize_t size = PyDict_Size(d), pos = 0;
    if (size == 0) {
        Py_XDECREF(keep);
        return 0;
    }
    pairs_block *b = PyMem_Calloc(1, sizeof *b + (size_t)size * sizeof(pn_label));
    if (!b) {
        Py_XDECREF(keep);
        PyErr_NoMemory();
        return -1;
    }
    b->keep = keep;
    *kv = pairs_of(b);
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_Check(k)) {
            PyErr_Format(PyExc_TypeError, "%s: keys must be str, not %.100s", what,
                         Py_TYPE(k)->tp_name);
            goto fail;
        }
        if (!PyUnicode_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s: the value of \"%U\" must be a str, not %.100s",
                         what, k, Py_TYPE(v)->tp_name);
            goto fail;
        }
        const char *ks = py_utf8_c_string(k, what, k), *vs = ks ? py_utf8_c_string(v, what, k) : NULL;
        if (!ks || !vs)
            goto fail;
        (*kv)[*n].key = ks;
        (*kv)[(*n)++].value = vs;
    }
    return 0;
fail:
    py_pairs_free(*kv);
    *kv = NULL;
    *n = 0;
    return -1;
}

PyObject *py_labels_dict(const pn_labelset *ls)
{
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < pn_labelset_count(ls); i++) {
        pn_label kv = pn_labelset_at(ls, i);
        PyObject *v = PyUnicode_FromString(kv.value);
        if (!v || PyDict_SetItemString(d, kv.key, v) != 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}
