/* libcurl, loaded when the first HTTP exporter is made (see curl_loader.h). */
#include "export/curl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char *const DEFAULT_NAMES[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};

/* Guards the load; any thread may call pn_curl_load. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
/* Filled once under load_mu, read-only afterwards. */
static pn_curl_api api;
/* &api once loaded (release store after api is complete), else NULL; read
 * with an acquire load by any thread. */
static const pn_curl_api *loaded;
/* Tests' replacement for DEFAULT_NAMES (pn_curl_loader_set_name_for_tests),
 * guarded by load_mu. */
static char test_name[256];

void pn_curl_loader_set_name_for_tests(const char *soname)
{
    pthread_mutex_lock(&load_mu);
    snprintf(test_name, sizeof test_name, "%s", soname ? soname : "");
    pthread_mutex_unlock(&load_mu);
}

/* dlsym into a function pointer (ISO C has no object-to-function cast;
 * POSIX guarantees the representation). */
#define SYM(field, name)                                                        \
    do {                                                                        \
        void *p_ = dlsym(h, name);                                              \
        if (!p_) {                                                              \
            missing = name;                                                     \
            goto fail;                                                          \
        }                                                                       \
        memcpy(&a.field, &p_, sizeof p_);                                       \
    } while (0)

/* Resolves every function from h into api and initialises libcurl.
 * load_mu held. -1: a function is missing (nothing of h has run yet, it
 * may be closed); -2: curl_global_init failed. */
static int fill_api(void *h, const char *soname, pn_error *e)
{
    pn_curl_api a;
    const char *missing = NULL;
    CURLcode (*global_init)(long) = NULL;
    void *gi = dlsym(h, "curl_global_init");
    if (!gi) {
        missing = "curl_global_init";
        goto fail;
    }
    memcpy(&global_init, &gi, sizeof gi);
    SYM(easy_init, "curl_easy_init");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_getinfo, "curl_easy_getinfo");
    SYM(easy_cleanup, "curl_easy_cleanup");
    SYM(easy_strerror, "curl_easy_strerror");
    SYM(multi_init, "curl_multi_init");
    SYM(multi_add_handle, "curl_multi_add_handle");
    SYM(multi_remove_handle, "curl_multi_remove_handle");
    SYM(multi_perform, "curl_multi_perform");
    SYM(multi_poll, "curl_multi_poll");
    SYM(multi_info_read, "curl_multi_info_read");
    SYM(multi_cleanup, "curl_multi_cleanup");
    SYM(multi_strerror, "curl_multi_strerror");
    SYM(slist_append, "curl_slist_append");
    SYM(slist_free_all, "curl_slist_free_all");
    SYM(mime_init, "curl_mime_init");
    SYM(mime_addpart, "curl_mime_addpart");
    SYM(mime_name, "curl_mime_name");
    SYM(mime_filename, "curl_mime_filename");
    SYM(mime_type, "curl_mime_type");
    SYM(mime_data_cb, "curl_mime_data_cb");
    SYM(mime_free, "curl_mime_free");
    SYM(url, "curl_url");
    SYM(url_set, "curl_url_set");
    SYM(url_cleanup, "curl_url_cleanup");
    SYM(version_info, "curl_version_info");
    void *us = dlsym(h, "curl_url_strerror");
    memcpy(&a.url_strerror, &us, sizeof us);

    /* Thread-safe from libcurl 7.84 on; a repeated call (the application
     * initialised libcurl itself) only counts up. It is never balanced by
     * curl_global_cleanup: the application may be using libcurl too. */
    CURLcode rc = global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        pn_fail(e, PN_EIO, "%s: curl_global_init failed: %s", soname, a.easy_strerror(rc));
        return -2;
    }
    api = a;
    return 0;
fail:
    pn_fail(e, PN_EIO, "%s lacks %s (libcurl 7.66 or newer is needed)", soname, missing);
    return -1;
}

/* Appends "; msg" (or msg) to why[0..*len). */
static void add_reason(char *why, size_t cap, size_t *len, const char *msg)
{
    int w = snprintf(why + *len, cap - *len, "%s%s", *len ? "; " : "", msg);
    if (w > 0)
        *len = (size_t)w < cap - *len ? *len + (size_t)w : cap - 1;
}

const pn_curl_api *pn_curl_load(pn_error *e)
{
    const pn_curl_api *l = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
    if (l)
        return l;
    pthread_mutex_lock(&load_mu);
    const char *one[1] = {test_name};
    const char *const *names = test_name[0] ? one : DEFAULT_NAMES;
    size_t n = test_name[0] ? 1 : sizeof DEFAULT_NAMES / sizeof DEFAULT_NAMES[0];
    char why[400] = "";
    size_t wl = 0;
    for (size_t i = 0; i < n && !loaded; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *d = dlerror();
            add_reason(why, sizeof why, &wl, d ? d : names[i]);
            continue;
        }
        pn_error le;
        pn_error_clear(&le);
        int r = fill_api(h, names[i], &le);
        if (r == 0) {
            __atomic_store_n(&loaded, &api, __ATOMIC_RELEASE);
            pn_log(PN_LOG_DEBUG, "loaded %s for HTTP uploads", names[i]);
            break;
        }
        /* After a failed curl_global_init some of its code has run and may
         * have left state behind: keep that library mapped. */
        if (r == -1)
            dlclose(h);
        add_reason(why, sizeof why, &wl, le.msg);
    }
    l = loaded;
    pthread_mutex_unlock(&load_mu);
    if (!l)
        pn_fail(e, PN_EIO,
                "cannot load libcurl (libcurl.so.4), which HTTP uploads need: %s; install the libcurl4 "
                "package (Debian, Ubuntu; libcurl elsewhere)", why);
    return l;
}
