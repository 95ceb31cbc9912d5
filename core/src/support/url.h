/* URLs in messages: a server address may carry "user:password@", which
 * must never reach an error or a log line. */
#ifndef PN_SUPPORT_URL_H
#define PN_SUPPORT_URL_H

#include <stddef.h>

/* Copy url into out (cut to size - 1 bytes) with the password of its
 * userinfo replaced by "***": "http://u:secret@h/" -> "http://u:***@h/".
 * Works on malformed addresses too (no scheme, bad port). Any thread. */
void pn_url_redact(const char *url, char *out, size_t size);

#endif
