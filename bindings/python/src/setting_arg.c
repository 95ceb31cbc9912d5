/* A configure keyword's value as the core's pn_arg (see setting_arg.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "setting_arg.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "pairs.h"

const pn_arg_words py_setting_words = {
    .text = "a str",
    .boolean = "a bool",
    .number = "a number",
    .integer = "an int",
    .level = "a level name or an int",
    .pairs = "a dict of str to str",
    .int_bool = 1, /* pyroscope-io took 0 and 1 for its switches */
};

/* 0 when s (a str) is UTF-8 text; else ValueError naming the setting and
 * where the lone surrogate is (the value is not shown: it may be a
 * password). */
static int utf8_text(PyObject *s, const char *name, const char *what, PyObject *key)
{
    if (PyUnicode_AsUTF8AndSize(s, NULL))
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Py_ssize_t at = 0;
    if (value)
        PyUnicodeEncodeError_GetStart(value, &at);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (key)
        PyErr_Format(PyExc_ValueError,
                     "%s: the value of %A has a lone surrogate at index %zd, which is not "
                     "UTF-8 text", name, key, at);
    else
        PyErr_Format(PyExc_ValueError,
                     "%s: %shas a lone surrogate at index %zd, which is not UTF-8 text", name,
                     what, at);
    return -1;
}

static int dict_text(PyObject *d, const char *name)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (PyUnicode_Check(k) && utf8_text(k, name, "a key ", NULL) != 0)
            return -1;
        if (PyUnicode_Check(v) && PyUnicode_Check(k) && utf8_text(v, name, "", k) != 0)
            return -1;
    }
    return 0;
}

int py_setting_arg(PyObject *v, const char *name, pn_arg *a, py_setting_hold *hold)
{
    memset(a, 0, sizeof *a);
    memset(hold, 0, sizeof *hold);
    a->shown = Py_TYPE(v)->tp_name; /* the type given: "not PosixPath", not "not str" */
    if (!PyUnicode_Check(v) && PyObject_HasAttrString(v, "__fspath__")) { /* pathlib */
        hold->path = PyOS_FSPath(v);
        if (!hold->path)
            return -1;
        v = hold->path;
    }
    if (PyBool_Check(v)) {
        a->type = PN_ARG_BOOL;
        a->boolean = v == Py_True;
    } else if (PyLong_Check(v)) {
        int over;
        a->type = PN_ARG_INT;
        a->integer = PyLong_AsLongLongAndOverflow(v, &over);
        if (over) /* out of every setting's range: the core says which */
            a->integer = over > 0 ? LLONG_MAX : LLONG_MIN;
    } else if (PyFloat_Check(v)) {
        a->type = PN_ARG_FLOAT;
        a->number = PyFloat_AS_DOUBLE(v);
        if (!isfinite(a->number))
            a->shown = isnan(a->number) ? "nan" : a->number > 0 ? "inf" : "-inf";
    } else if (PyUnicode_Check(v)) {
        Py_ssize_t n;
        if (utf8_text(v, name, "", NULL) != 0)
            return -1;
        a->type = PN_ARG_TEXT;
        a->text = PyUnicode_AsUTF8AndSize(v, &n);
        a->len = (size_t)n;
    } else if (PyDict_Check(v)) {
        if (dict_text(v, name) != 0 || py_dict_pairs(v, name, &hold->pairs, &a->npairs) != 0)
            return -1;
        a->type = PN_ARG_PAIRS;
        a->pairs = hold->pairs;
    } else {
        a->type = PN_ARG_OTHER;
    }
    return 0;
}

void py_setting_arg_done(py_setting_hold *hold)
{
    py_pairs_free(hold->pairs);
    Py_CLEAR(hold->path);
}
