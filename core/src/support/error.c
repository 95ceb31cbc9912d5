/* Error values every fallible core function hands back to its caller. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pyroscope_native.h"

int pn_fail(pn_error *e, pn_code code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void pn_error_clear(pn_error *e)
{
    if (e) {
        e->code = PN_OK;
        e->msg[0] = '\0';
    }
}
