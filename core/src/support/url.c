/* See url.h. */
#include "support/url.h"

#include <stdio.h>
#include <string.h>

void pn_url_redact(const char *url, char *out, size_t size)
{
    if (size == 0)
        return;
    const char *scheme_end = strstr(url, "://");
    const char *start = scheme_end ? scheme_end + 3 : url;
    size_t authority = strcspn(start, "/?#");
    const char *at = NULL;
    for (const char *p = start; p < start + authority; p++) {
        if (*p == '@')
            at = p; /* the last one: a password may hold '@' too */
    }
    const char *colon = at ? memchr(start, ':', (size_t)(at - start)) : NULL;
    if (!colon) {
        snprintf(out, size, "%s", url);
        return;
    }
    snprintf(out, size, "%.*s***%s", (int)(colon + 1 - url), url, at);
}
