/* UTF-8 as the server and the OTLP wire take it: no overlong forms, no
 * surrogates, nothing beyond U+10FFFF. Pure functions: any thread, signal
 * handlers included. */
#ifndef PN_SUPPORT_UTF8_H
#define PN_SUPPORT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 character at s (at most `left` bytes, left >
 * 0), its code point in *cp when cp is not NULL; 0 when the bytes there
 * are not one (stray continuation, overlong form, surrogate, beyond
 * U+10FFFF, cut short). */
size_t pn_utf8_char(const unsigned char *s, size_t left, uint32_t *cp);

/* Offset of the first byte of s[0..n) that starts no valid character, or
 * n when all of it is UTF-8 text. */
size_t pn_utf8_valid_prefix(const char *s, size_t n);

#endif
