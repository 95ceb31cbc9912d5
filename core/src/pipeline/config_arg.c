/* A runtime's value for a setting (pn_arg), checked against the row's
 * kind once for every binding: which runtime types a kind takes, the
 * finite and whole-number rules, and the wording of the error, in the
 * runtime's own words (pn_arg_words). The value then goes through
 * pn_config_set / pn_config_set_pairs like a variable's text. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pyroscope_native.h"

static int wrong_type(pn_error *e, const char *name, const char *want, const pn_arg *v)
{
    return pn_fail(e, PN_ETYPE, "%s must be %s, not %s", name, want,
                   v->shown ? v->shown : "that");
}

/* A number's text for the core's parser (decimal or exponent form). */
static int number_text(pn_error *e, const char *name, const pn_arg *v, int whole,
                       const pn_arg_words *w, char *buf, size_t size)
{
    if (v->type != PN_ARG_INT && v->type != PN_ARG_FLOAT)
        return wrong_type(e, name, whole ? w->integer : w->number, v);
    if (v->type == PN_ARG_INT) {
        snprintf(buf, size, "%lld", v->integer);
        return 0;
    }
    if (!isfinite(v->number))
        return pn_fail(e, PN_EINVAL, "%s must be a finite number, not %s", name,
                       v->shown ? v->shown : "that");
    if (whole)
        return wrong_type(e, name, w->integer, v);
    snprintf(buf, size, "%.17g", v->number);
    return 0;
}

int pn_config_set_arg(pn_config *c, const char *name, const pn_arg *v,
                        const pn_arg_words *w, pn_error *e)
{
    const pn_setting_info *row = pn_config_setting_find(name);
    if (!row)
        return pn_fail(e, PN_EINVAL, "unknown setting %s", name);
    if (v->type == PN_ARG_TEXT && v->text && memchr(v->text, '\0', v->len))
        return pn_fail(e, PN_EINVAL, "%s must not contain a NUL byte", name);
    /* Text read like a variable's: a string setting always, the others when
     * the runtime's users set them from its environment (w->text_parsed). */
    int text_ok = row->kind == PN_KIND_STRING || row->kind == PN_KIND_CHOICE ||
                  row->kind == PN_KIND_DURATION || row->kind == PN_KIND_LEVEL ||
                  (w->text_parsed && row->kind != PN_KIND_PAIRS);
    if (v->type == PN_ARG_TEXT && text_ok)
        return pn_config_set(c, name, v->text, e);

    char buf[64];
    switch (row->kind) {
    case PN_KIND_BOOL:
        if (v->type == PN_ARG_BOOL)
            return pn_config_set(c, name, v->boolean ? "true" : "false", e);
        if (w->int_bool && v->type == PN_ARG_INT && (v->integer == 0 || v->integer == 1))
            return pn_config_set(c, name, v->integer ? "true" : "false", e);
        return wrong_type(e, name, w->boolean, v);
    case PN_KIND_NUMBER:
    case PN_KIND_INTEGER:
    case PN_KIND_DURATION:
        if (number_text(e, name, v, row->kind == PN_KIND_INTEGER, w, buf, sizeof buf) != 0)
            return -1;
        return pn_config_set(c, name, buf, e);
    case PN_KIND_LEVEL:
        if (v->type != PN_ARG_INT)
            return wrong_type(e, name, w->level, v);
        snprintf(buf, sizeof buf, "%lld", v->integer);
        return pn_config_set(c, name, buf, e);
    case PN_KIND_PAIRS:
        if (v->type != PN_ARG_PAIRS)
            return wrong_type(e, name, w->pairs, v);
        return pn_config_set_pairs(c, name, v->pairs, v->npairs, e);
    case PN_KIND_STRING:
    case PN_KIND_CHOICE:
        break;
    }
    return wrong_type(e, name, w->text, v);
}
