/* Internal: libcurl, loaded with dlopen() when the first HTTP exporter is
 * made instead of linked.
 *
 * Linking libcurl maps it and its 25 dependencies (OpenSSL, GnuTLS,
 * Kerberos, LDAP, ssh2, ...) into every process that imports us, whether
 * it uploads or not: 5-9 ms more start-up and 5-6 MiB more PSS, 1.1 MiB of
 * it Private_Dirty (bench_libcurl, docs/benchmarks.md). A process that
 * uploads pays the same either way; one that only writes a folder, or
 * never configures the profiler, pays nothing. curl's headers are still
 * used at build time for its types and constants.
 */
#ifndef PN_CURL_LOADER_H
#define PN_CURL_LOADER_H

#include <curl/curl.h>

#include "pyroscope_native.h"

/* Exactly the libcurl functions http_exporter.c uses. */
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
    curl_mime *(*mime_init)(CURL *c);
    curl_mimepart *(*mime_addpart)(curl_mime *m);
    CURLcode (*mime_name)(curl_mimepart *p, const char *name);
    CURLcode (*mime_filename)(curl_mimepart *p, const char *name);
    CURLcode (*mime_type)(curl_mimepart *p, const char *type);
    CURLcode (*mime_data_cb)(curl_mimepart *p, curl_off_t size, curl_read_callback rd,
                             curl_seek_callback seek, curl_free_callback fr, void *arg);
    void (*mime_free)(curl_mime *m);
    CURLU *(*url)(void);
    CURLUcode (*url_set)(CURLU *u, CURLUPart what, const char *part, unsigned flags);
    void (*url_cleanup)(CURLU *u);
    /* libcurl 7.80+; NULL in older ones (messages then give the code). */
    const char *(*url_strerror)(CURLUcode code);
    curl_version_info_data *(*version_info)(CURLversion v);
} pn_curl_api;

/* The loaded functions, after curl_global_init(); NULL with e naming the
 * library, the package to install and what went wrong when libcurl
 * (>= 7.66, for curl_multi_poll) cannot be loaded. It tries libcurl.so.4, then libcurl-gnutls.so.4 (the
 * same ABI; Debian's other flavour). Once loaded it stays loaded (never
 * dlclose'd: the application may use libcurl too); a failure is not
 * remembered, so installing libcurl later helps. Any thread. */
const pn_curl_api *pn_curl_load(pn_error *e);

/* For tests: dlopen `soname` instead of the usual names (NULL restores
 * them). Has no effect once libcurl is loaded. */
void pn_curl_loader_set_name_for_tests(const char *soname);

#endif
