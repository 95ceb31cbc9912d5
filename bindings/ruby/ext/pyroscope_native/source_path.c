/* The file name a Ruby frame is reported with: as the pyroscope gem 1.x
 * made it (pyroscope-rs pyroscope_ffi/ruby transform_report), so source
 * links and comparisons across deploys, which depend on the file name,
 * keep working:
 *   1. under the working directory: the part after it
 *      (/srv/app/app/models/user.rb -> app/models/user.rb);
 *   2. else, from "/gems/" on: gems/<gem>-<version>/... (installed gems);
 *   3. else, after "/ruby/<version>/": the standard library
 *      (/usr/lib/ruby/3.1.0/set.rb -> set.rb);
 *   4. else as Ruby gave it (<internal:kernel>, (eval)).
 * Unlike the gem, the working directory must be followed by "/" where it
 * is found (the gem cut /srv/application/x.rb at /srv/app), and "/" as the
 * working directory is skipped (the gem cut the first letter of every path).
 * The working directory is read again at each new period, as the gem read
 * it at each report.
 *
 * Threads: GVL only (symbolize.c's consumer). */
#include "native.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

static char cwd[PATH_MAX];
static size_t cwd_len;

void source_path_refresh(void)
{
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    cwd_len = strlen(cwd);
}

/* First occurrence of needle (nlen > 0) in p[0..n) followed by '/', or
 * with follow 0 anywhere; NULL if none. */
static const char *find(const char *p, size_t n, const char *needle, size_t nlen, int follow)
{
    for (const char *at = p; (size_t)(at - p) + nlen <= n; at++) {
        at = memmem(at, n - (size_t)(at - p), needle, nlen);
        if (!at)
            return NULL;
        size_t end = (size_t)(at - p) + nlen;
        if (!follow || (end < n && p[end] == '/'))
            return at;
    }
    return NULL;
}

const char *source_path_short(const char *p, size_t n, size_t *out_len)
{
    const char *at;
    if (cwd_len > 1 && (at = find(p, n, cwd, cwd_len, 1)) != NULL) {
        at += cwd_len + 1;
    } else if ((at = find(p, n, "/gems/", 6, 0)) != NULL) {
        at += 1;
    } else if ((at = find(p, n, "/ruby/", 6, 0)) != NULL) {
        at += 6;
        const char *slash = memchr(at, '/', n - (size_t)(at - p));
        if (slash)
            at = slash + 1;
    } else {
        at = p;
    }
    *out_len = n - (size_t)(at - p);
    if (*out_len == 0) { /* nothing after the cut: keep the whole name */
        *out_len = n;
        return p;
    }
    return at;
}

/* Native.source_path(path): the name a frame in that file is reported
 * with (for the tests and the curious). */
static VALUE m_source_path(VALUE self, VALUE path)
{
    (void)self;
    StringValue(path);
    source_path_refresh();
    size_t n;
    const char *p = source_path_short(RSTRING_PTR(path), (size_t)RSTRING_LEN(path), &n);
    return rb_str_new(p, (long)n);
}

void source_path_init(VALUE mNative)
{
    rb_define_module_function(mNative, "source_path", m_source_path, 1);
}
