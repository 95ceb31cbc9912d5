/* A dict of str -> str as the core's pairs: tags, http_headers, labels. */
#ifndef PYROSCOPE_PY_PAIRS_H
#define PYROSCOPE_PY_PAIRS_H

#include <Python.h>

#include "pyroscope_native.h"

/* Pairs pointing into the dict's strings, valid until py_pairs_free(*kv)
 * (NULL when the dict is empty) while the dict is unchanged (on a
 * free-threaded CPython: in any case, they point into a copy). -1 with
 * TypeError naming `what` (and the key) for anything but str -> str. GIL
 * held. */
int py_dict_pairs(PyObject *d, const char *what, pn_label **kv, size_t *n);
/* NULL is fine. */
void py_pairs_free(pn_label *kv);
/* UTF-8 of a str that the core will read as a C string, or NULL with
 * ValueError naming `what` (and `key`, the tag or header it belongs to,
 * if not NULL) when it holds a NUL: the core would see only the part
 * before it ("ok\0{,=}" would become "ok"). GIL held. */
const char *py_utf8_c_string(PyObject *o, const char *what, PyObject *key);
/* A label set as a new dict (NULL with a Python error). GIL held. */
PyObject *py_labels_dict(const pn_labelset *ls);

#endif
