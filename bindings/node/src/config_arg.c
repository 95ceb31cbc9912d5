/* A JS value for a setting, as the core's pn_arg: the core decides which
 * types the setting's kind takes and words the error (pn_config_set_arg);
 * here only JS types -> pn_arg, Node's words, and how Node shows a value.
 * Runs on the JS thread that called resolveSettings/checkSettings/start. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

static const char *const type_names[] = {
    [napi_undefined] = "undefined", [napi_null] = "null",     [napi_boolean] = "boolean",
    [napi_number] = "number",       [napi_string] = "string", [napi_symbol] = "symbol",
    [napi_object] = "object",       [napi_function] = "function",
    [napi_external] = "external",   [napi_bigint] = "bigint",
};

/* s as a JSON string, cut short ("...) to fit size, never inside a character. */
static void quoted(const char *s, size_t len, char *buf, size_t size)
{
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8] = {(char)ch};
        size_t n = 1;
        if (ch == '"' || ch == '\\')
            n = (size_t)snprintf(esc, sizeof esc, "\\%c", ch);
        else if (ch == '\n')
            n = (size_t)snprintf(esc, sizeof esc, "\\n");
        else if (ch < 0x20)
            n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", ch);
        if (o + n + 5 > size) { /* room for ..." and the NUL */
            for (; i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80; i--)
                o--; /* drop the start of a character cut here */
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, esc, n);
        o += n;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

/* How Node's errors show a value: "number 5", "\"100\"", "null", "an
 * array", "object [object Object]" (its String(), when that does not throw);
 * of a secret setting's value (a password, headers) its type alone. */
static void shown_of(napi_env env, napi_value v, int secret, char *buf, size_t size)
{
    napi_valuetype t = napi_undefined;
    bool is_array = false;
    napi_typeof(env, v, &t);
    napi_is_array(env, v, &is_array);
    const char *type = (size_t)t < sizeof type_names / sizeof *type_names ? type_names[t] : "value";
    size_t len = 0;
    char *s = NULL;
    napi_value str;
    if (secret) {
        /* nothing of the value */
    } else if (t == napi_string) {
        s = js_utf8(env, v, &len);
    } else if (t != napi_null && t != napi_undefined && t != napi_symbol && !is_array) {
        if (napi_coerce_to_string(env, v, &str) == napi_ok)
            s = js_utf8(env, str, &len);
        else { /* a toString that throws: the type alone */
            napi_value ignored;
            napi_get_and_clear_last_exception(env, &ignored);
        }
    }
    if (is_array)
        snprintf(buf, size, "an array");
    else if (t == napi_string && s)
        quoted(s, len, buf, size);
    else if (s)
        snprintf(buf, size, "%s %s", type, s);
    else
        snprintf(buf, size, "%s", type);
    free(s);
}

/* A plain object -> pairs of strings (owned[] frees them); a value that is
 * no string makes the whole object the wrong type, shown by that value. */
static int pairs_of(napi_env env, napi_value obj, napi_value keys, uint32_t n, pn_arg *arg,
                    char **owned, char *shown, size_t size, const char *name, int secret)
{
    pn_label *kv = calloc(n ? n : 1, sizeof *kv);
    *owned = (char *)kv;
    if (!kv) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return -1;
    }
    arg->type = PN_ARG_PAIRS;
    arg->pairs = kv;
    for (uint32_t i = 0; i < n; i++) {
        napi_value k, v;
        napi_valuetype t;
        if (napi_get_element(env, keys, i, &k) != napi_ok ||
            napi_get_property(env, obj, k, &v) != napi_ok || napi_typeof(env, v, &t) != napi_ok)
            return -1; /* a getter threw: its error goes on */
        size_t klen = 0, vlen = 0;
        char *key = owned[1 + 2 * i] = js_utf8(env, k, &klen);
        char *value = owned[2 + 2 * i] = t == napi_string && key ? js_utf8(env, v, &vlen) : NULL;
        if (!key || (t == napi_string && !value))
            return -1;
        if (!value) {
            char one[100];
            shown_of(env, v, secret, one, sizeof one);
            snprintf(shown, size, "an object whose \"%.100s\" is %s", key, one);
            arg->type = PN_ARG_OTHER;
            return 0;
        }
        if (strlen(key) != klen || strlen(value) != vlen) {
            throw_msg(env, "ERR_PYROSCOPE_CONFIG", "%s must not contain a NUL byte", name);
            return -1;
        }
        kv[i] = (pn_label){key, value};
        arg->npairs = i + 1;
    }
    return 0;
}

int config_set_js(napi_env env, pn_config *c, const char *name, napi_value v)
{
    const pn_setting_info *row = pn_config_setting_find(name);
    char level[200], shown[240] = "";
    snprintf(level, sizeof level, "a level name (%s) or a number",
             row && row->spellings ? row->spellings : "");
    const pn_arg_words words = {"a string", "a boolean", "a finite number", "a whole number",
                                level, "an object of string values", .text_parsed = 0,
                                .int_bool = 0};
    napi_valuetype t = napi_undefined;
    bool is_array = false, b = false;
    napi_typeof(env, v, &t);
    napi_is_array(env, v, &is_array);
    pn_arg arg = {PN_ARG_OTHER, .shown = shown};
    /* the text, or pairs_of's labels, at [0], then each key and value (the
     * keys read once: a getter adding keys cannot outgrow owned) */
    uint32_t nkeys = 0;
    napi_value keys;
    int pairs = t == napi_object && !is_array && row && row->kind == PN_KIND_PAIRS;
    if (pairs && (napi_get_all_property_names(env, v, napi_key_own_only,
                                              napi_key_enumerable | napi_key_skip_symbols,
                                              napi_key_numbers_to_strings, &keys) != napi_ok ||
                  napi_get_array_length(env, keys, &nkeys) != napi_ok))
        return -1; /* a Proxy's ownKeys threw: its error goes on */
    int secret = row && (row->flags & PN_SETTING_SECRET);
    if (!pairs) /* pairs_of shows a bad pair, and calls no toString of the object */
        shown_of(env, v, secret, shown, sizeof shown);
    char **owned = calloc(1 + 2 * (size_t)nkeys, sizeof *owned);
    int rc = -1;
    if (!owned) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return -1;
    }
    if (t == napi_string) {
        size_t len = 0;
        if (!(owned[0] = js_utf8(env, v, &len)))
            goto out;
        arg = (pn_arg){PN_ARG_TEXT, owned[0], len, .shown = shown};
    } else if (t == napi_boolean) {
        napi_get_value_bool(env, v, &b);
        arg = (pn_arg){PN_ARG_BOOL, .boolean = b, .shown = shown};
    } else if (t == napi_number) {
        double d = 0;
        napi_get_value_double(env, v, &d);
        /* a whole number as Number.isInteger says (1e18 too), when it fits;
         * a larger one for a whole-number setting as its nearest bound (as
         * Python's and Ruby's big ints: out of range, not of the wrong type) */
        int fits = fabs(d) < 9223372036854775808.0;
        int whole_kind = row && (row->kind == PN_KIND_INTEGER || row->kind == PN_KIND_LEVEL);
        if (isfinite(d) && d == trunc(d) && (fits || whole_kind))
            arg = (pn_arg){PN_ARG_INT, .shown = shown,
                           .integer = fits ? (long long)d : d > 0 ? LLONG_MAX : LLONG_MIN};
        else
            arg = (pn_arg){PN_ARG_FLOAT, .number = d, .shown = shown};
    } else if (pairs) {
        if (pairs_of(env, v, keys, nkeys, &arg, owned, shown, sizeof shown, name, secret) != 0)
            goto out;
    }
    pn_error e = {0};
    rc = pn_config_set_arg(c, name, &arg, &words, &e);
    if (rc != 0)
        throw_pn(env, &e);
out:
    for (size_t i = 0; i < 1 + 2 * (size_t)nkeys; i++)
        free(owned[i]);
    free(owned);
    return rc;
}
