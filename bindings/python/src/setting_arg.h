/* A configure keyword's value as the core's pn_arg: the core decides which
 * Python types each setting takes (core/src/pipeline/config_arg.c). */
#ifndef PYROSCOPE_PY_SETTING_ARG_H
#define PYROSCOPE_PY_SETTING_ARG_H

#include <Python.h>

#include "pyroscope_native.h"

/* What a pn_arg points into, until py_setting_arg_done. */
typedef struct {
    pn_label *pairs;
    PyObject *path; /* os.fspath() of a path-like value */
} py_setting_hold;

/* Python's words in the core's errors (TypeError: PN_ETYPE). */
extern const pn_arg_words py_setting_words;

/* v as a pn_arg for setting `name`; -1 with ValueError naming the setting
 * for text that is not UTF-8 (a lone surrogate), or another Python error.
 * GIL held; v must stay alive while the arg is used. */
int py_setting_arg(PyObject *v, const char *name, pn_arg *a, py_setting_hold *hold);
void py_setting_arg_done(py_setting_hold *hold);

#endif
