/* Uploads through Python's http.client when libcurl cannot be loaded
 * (sender.c; the Python half is pyroscope/_sender.py). */
#ifndef PYROSCOPE_PY_SENDER_H
#define PYROSCOPE_PY_SENDER_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

/* Makes the core's relay the fallback sender (module init). */
void py_sender_install(void);
/* sender_attach(bool): a Python sender thread starts (True) or ends. */
PyObject *py_sender_attach(PyObject *self, PyObject *on);
/* sender_next(wait_s) -> request tuple, or None after wait_s. */
PyObject *py_sender_next(PyObject *self, PyObject *arg);
/* sender_done(gen, status, reply, error or None, permanent). */
PyObject *py_sender_done(PyObject *self, PyObject *args);

#endif
