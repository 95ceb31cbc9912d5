/* Text shared by the report's writers: UTF-8 checking and how values are
 * shown. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report_tree.h"

size_t pn_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1fu, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0fu, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

void pn_report_format_value(char *buf, size_t len, int64_t v, const char *unit)
{
    double d = (double)v;
    if (strcmp(unit, "nanoseconds") == 0) {
        if (v >= 1000000000)
            snprintf(buf, len, "%.2f s", d / 1e9);
        else if (v >= 1000000)
            snprintf(buf, len, "%.2f ms", d / 1e6);
        else if (v >= 1000)
            snprintf(buf, len, "%.2f us", d / 1e3);
        else
            snprintf(buf, len, "%" PRId64 " ns", v);
    } else if (strcmp(unit, "bytes") == 0) {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        size_t k = 0;
        while (d >= 1024 && k < 4)
            d /= 1024, k++;
        if (k == 0)
            snprintf(buf, len, "%" PRId64 " B", v);
        else
            snprintf(buf, len, "%.2f %s", d, units[k]);
    } else {
        snprintf(buf, len, "%" PRId64, v);
    }
}

const char *pn_report_unit_word(const char *unit)
{
    if (!unit || !*unit || strcmp(unit, "count") == 0)
        return "count";
    if (strcmp(unit, "nanoseconds") == 0)
        return "time";
    return unit;
}
