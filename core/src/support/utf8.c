/* UTF-8 checks (see utf8.h). */
#include "support/utf8.h"

size_t pn_utf8_char(const unsigned char *s, size_t left, uint32_t *cp)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
             : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || n > left)
        return 0;
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    if (cp)
        *cp = c;
    return n;
}

size_t pn_utf8_valid_prefix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, len;
    while (i < n && (len = pn_utf8_char(p + i, n - i, NULL)) > 0)
        i += len;
    return i;
}
