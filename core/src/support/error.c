/* Error values every fallible core function hands back to its caller. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pyroscope_native.h"

/* A message cut short ends with whole characters: a binding decodes it as
 * UTF-8 (Python's strictly), and a long path or value in it may not be
 * ASCII. Drops a character whose first bytes are the last of msg[0..n). */
static void cut_whole_char(char *msg, size_t n)
{
    size_t i = n, cont = 0;
    while (i > 0 && cont < 3 && ((unsigned char)msg[i - 1] & 0xC0) == 0x80) {
        i--;
        cont++;
    }
    unsigned char lead = i > 0 ? (unsigned char)msg[i - 1] : 0;
    size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : cont;
    if (lead >= 0xC0 && need > cont)
        msg[i - 1] = '\0';
}

int pn_fail(pn_error *e, pn_code code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        e->code = code;
        int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof e->msg)
            cut_whole_char(e->msg, sizeof e->msg - 1);
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
