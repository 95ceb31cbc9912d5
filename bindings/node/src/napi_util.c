/* Small Node-API helpers shared by the addon's files (see addon.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

napi_value throw_msg(napi_env env, const char *code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    napi_throw_error(env, code, msg);
    return NULL;
}

napi_value throw_pn(napi_env env, const pn_error *e)
{
    if (e->code == PN_ETYPE) {
        napi_throw_type_error(env, "ERR_PYROSCOPE_CONFIG", e->msg);
        return NULL;
    }
    return throw_msg(env, e->code == PN_EINVAL ? "ERR_PYROSCOPE_CONFIG" : "ERR_PYROSCOPE", "%s",
                     e->msg[0] ? e->msg : "pyroscope: unknown error");
}

napi_value js_undefined(napi_env env)
{
    napi_value u;
    napi_get_undefined(env, &u);
    return u;
}

char *js_utf8(napi_env env, napi_value v, size_t *len)
{
    if (napi_get_value_string_utf8(env, v, NULL, 0, len) != napi_ok)
        return NULL;
    char *s = malloc(*len + 1);
    if (!s)
        napi_throw_error(env, NULL, "pyroscope: out of memory");
    else if (napi_get_value_string_utf8(env, v, s, *len + 1, len) != napi_ok) {
        free(s);
        return NULL;
    }
    return s;
}

char *js_string(napi_env env, napi_value v, const char *what)
{
    napi_valuetype t;
    if (napi_typeof(env, v, &t) != napi_ok)
        return NULL;
    napi_value s = v;
    if (t == napi_number || t == napi_boolean) {
        if (napi_coerce_to_string(env, v, &s) != napi_ok)
            return NULL;
    } else if (t != napi_string) {
        napi_throw_type_error(env, "ERR_PYROSCOPE_CONFIG", what);
        return NULL;
    }
    size_t len;
    char *buf = js_utf8(env, s, &len);
    if (!buf)
        return NULL;
    if (len != strlen(buf)) { /* an embedded NUL would cut the value silently */
        free(buf);
        char m[300];
        snprintf(m, sizeof m, "%s contains a NUL character", what);
        napi_throw_type_error(env, "ERR_PYROSCOPE_CONFIG", m);
        return NULL;
    }
    return buf;
}

int js_double(napi_env env, napi_value v, double *out)
{
    return napi_get_value_double(env, v, out) == napi_ok ? 0 : -1;
}

void *js_typed(napi_env env, napi_value v, napi_typedarray_type want, size_t *len,
               const char *what)
{
    bool is;
    napi_typedarray_type t;
    void *data = NULL;
    if (napi_is_typedarray(env, v, &is) != napi_ok || !is ||
        napi_get_typedarray_info(env, v, &t, len, &data, NULL, NULL) != napi_ok || t != want) {
        throw_msg(env, "ERR_INVALID_ARG_TYPE", "%s: wrong typed array", what);
        return NULL;
    }
    static char empty[8];
    return data ? data : empty;
}

void set_num(napi_env env, napi_value obj, const char *key, double v)
{
    napi_value n;
    napi_create_double(env, v, &n);
    napi_set_named_property(env, obj, key, n);
}

void set_fn(napi_env env, napi_value obj, const char *name, napi_callback cb)
{
    napi_value f;
    napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &f);
    napi_set_named_property(env, obj, name, f);
}

size_t js_args(napi_env env, napi_callback_info info, napi_value *argv, size_t n)
{
    size_t argc = n;
    napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
    for (size_t i = argc; i < n; i++)
        napi_get_undefined(env, &argv[i]);
    return argc;
}

napi_value js_resolved(napi_env env, napi_value v)
{
    napi_value promise;
    napi_deferred d;
    napi_create_promise(env, &d, &promise);
    napi_resolve_deferred(env, d, v);
    return promise;
}

int js_keys(napi_env env, napi_value obj, const char *what, napi_value *keys, uint32_t *n)
{
    napi_valuetype t;
    *n = 0;
    napi_typeof(env, obj, &t);
    if (t == napi_undefined || t == napi_null)
        return 1;
    if (t != napi_object) {
        char m[200];
        snprintf(m, sizeof m, "%s must be an object", what);
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", m);
        return -1;
    }
    if (napi_get_property_names(env, obj, keys) != napi_ok ||
        napi_get_array_length(env, *keys, n) != napi_ok)
        return -1;
    return 0;
}

int js_fn_arg(napi_env env, napi_callback_info info, napi_value *fn, const char *what)
{
    napi_value argv[1];
    size_t argc = js_args(env, info, argv, 1);
    napi_valuetype t = napi_undefined;
    if (argc >= 1)
        napi_typeof(env, argv[0], &t);
    if (t != napi_function && t != napi_null && t != napi_undefined) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", what);
        return -1;
    }
    *fn = argv[0];
    return t == napi_function;
}
