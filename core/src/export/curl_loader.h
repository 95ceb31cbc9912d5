/* Internal: libcurl, loaded on first use with dlopen() instead of linked.
 *
 * Linking libcurl maps it and its dependencies (OpenSSL, GnuTLS, Kerberos,
 * LDAP, ssh2, ...) into every process that imports us, about 5.6 MiB of
 * RSS, plus about 2 MiB more at curl_global_init(). Only https:// uploads
 * and uploads through a proxy need it, so only they pay for it. curl's
 * headers are still used at build time for its types and constants.
 */
#ifndef PN_CURL_LOADER_H
#define PN_CURL_LOADER_H

#include <curl/curl.h>

#include "pyroscope_native.h"

/* Exactly the libcurl functions curl_client.c uses. */
typedef struct {
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *c);
    const char *(*easy_strerror)(CURLcode code);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *c);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *c);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned n, int timeout_ms, int *numfds);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    CURLMcode (*multi_cleanup)(CURLM *m);
    const char *(*multi_strerror)(CURLMcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
} pn_curl_api;

/* The loaded functions, after curl_global_init(); NULL with e naming the
 * library and what went wrong when libcurl (>= 7.66, for curl_multi_poll)
 * cannot be loaded. It tries libcurl.so.4, then libcurl-gnutls.so.4 (the
 * same ABI; Debian's other flavour). Once loaded it stays loaded (never
 * dlclose'd: the application may use libcurl too); a failure is not
 * remembered, so installing libcurl later helps. Any thread. */
const pn_curl_api *pn_curl_load(pn_error *e);

/* For tests: dlopen `soname` instead of the usual names (NULL restores
 * them). Has no effect once libcurl is loaded. */
void pn_curl_loader_set_name_for_tests(const char *soname);

#endif
