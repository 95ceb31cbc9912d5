/* Uploads through Python's own http.client when libcurl cannot be loaded
 * (an image without libcurl.so.4): the core's relay (pn_http_relay_*) hands
 * each request to a Python daemon thread (pyroscope/_sender.py, started by
 * configure only then), which waits here with the GIL released, sends it
 * and returns the answer. The core's exporter thread never calls into
 * Python. These run on that Python thread. */
#include "sender.h"

#include <string.h>

#include "pyroscope_native.h"

/* A str of s (NULL: None). */
static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* (id, url, [(name, value)], body, user, password, timeout_s,
 *  connect_timeout_s, ca_file, ca_dir) of a relayed request. */
static PyObject *request_tuple(const pn_http_relayed *c)
{
    const pn_http_request *r = &c->req;
    PyObject *headers = PyList_New((Py_ssize_t)r->nheaders);
    for (size_t i = 0; headers && i < r->nheaders; i++) {
        PyObject *kv = Py_BuildValue("(NN)", str_or_none(r->headers[i].key),
                                     str_or_none(r->headers[i].value));
        if (!kv) {
            Py_CLEAR(headers);
            break;
        }
        PyList_SET_ITEM(headers, (Py_ssize_t)i, kv);
    }
    if (!headers)
        return NULL;
    return Py_BuildValue("(kNNy#NNddNN)", c->id, str_or_none(r->url), headers,
                         (const char *)r->body, (Py_ssize_t)r->body_len,
                         str_or_none(r->basic_auth_user), str_or_none(r->basic_auth_password),
                         r->timeout_s, r->connect_timeout_s, str_or_none(r->ca_file),
                         str_or_none(r->ca_dir));
}

void py_sender_install(void) { pn_http_relay_install(); }

PyObject *py_sender_attach(PyObject *self, PyObject *on)
{
    (void)self;
    int attach = PyObject_IsTrue(on);
    if (attach < 0)
        return NULL;
    pn_http_relay_attach(attach);
    Py_RETURN_NONE;
}

PyObject *py_sender_next(PyObject *self, PyObject *arg)
{
    (void)self;
    double wait_s = PyFloat_AsDouble(arg);
    if (wait_s == -1.0 && PyErr_Occurred())
        return NULL;
    pn_http_relayed *c;
    Py_BEGIN_ALLOW_THREADS
    c = pn_http_relay_next(wait_s);
    Py_END_ALLOW_THREADS
    if (!c)
        Py_RETURN_NONE;
    PyObject *t = request_tuple(c);
    if (!t)
        pn_http_relay_done(c->id, 0, NULL, 0, "out of memory copying the request", 0);
    pn_http_relay_free(c);
    return t;
}

PyObject *py_sender_done(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long id;
    long status;
    const char *reply, *error;
    Py_ssize_t reply_len;
    int permanent;
    if (!PyArg_ParseTuple(args, "kly#zp", &id, &status, &reply, &reply_len, &error, &permanent))
        return NULL;
    pn_http_relay_done(id, status, reply, (size_t)reply_len, error, permanent);
    Py_RETURN_NONE;
}
