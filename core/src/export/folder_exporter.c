/* The folder exporter: each upload becomes one file,
 * <dir>/<app>-<type>-<from>-<until>[.<part>].pb.gz, for offline reports.
 *
 * Files appear atomically: the bytes go to a hidden temporary file in the
 * same directory, which is then hard-linked to the final name. link() never
 * replaces an existing file, so a parent and a forked child writing the same
 * second both keep their profile (the later one gets a -1, -2 ... suffix).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "export/exporter.h"

#define MAX_NAME_PART 100       /* bytes of app name kept in a file name */
#define MAX_SUFFIX 1000         /* -1 .. -999 tried when a name is taken */
#define MAX_TEMP_TRIES 100

typedef struct {
    pn_exporter base;           /* first: the queue sees a pn_exporter */
    char *dir;                  /* immutable after new */
    unsigned temp_counter;      /* exporter thread only */
} folder_exporter;

/* malloc'ed printf; NULL when out of memory. */
static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Keep [A-Za-z0-9._-]; anything else ('/' first of all) becomes '_'. */
static void safe_name(const char *in, const char *fallback, char *out, size_t n)
{
    if (!in || !*in)
        in = fallback;
    size_t j = 0;
    for (; *in && j + 1 < n; in++) {
        char c = *in;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        out[j++] = ok ? c : '_';
    }
    out[j] = '\0';
}

/* mkdir -p. */
static int make_dirs(const char *dir, pn_error *e)
{
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    char *p = strdup(dir);
    if (!p)
        return pn_fail(e, PN_ENOMEM, "output_dir '%s': out of memory", dir);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            rc = pn_fail(e, PN_EIO, "cannot create directory '%s': %s", p, strerror(errno));
            break;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* mkstemp would create the file 0600 whatever the umask; these files are
 * meant to be read by report tools, so open it ourselves with 0644 through
 * the umask, with the same O_EXCL guarantee. */
static int open_temp(folder_exporter *f, char **path, pn_error *e)
{
    for (int i = 0; i < MAX_TEMP_TRIES; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *path = strf("%s/.pn-%ld-%u-%lx.tmp", f->dir, (long)getpid(), f->temp_counter++,
                     (unsigned long)ts.tv_nsec);
        if (!*path)
            return pn_fail(e, PN_ENOMEM, "output_dir '%s': out of memory", f->dir);
        int fd = open(*path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0)
            return fd;
        int err = errno;
        if (err != EEXIST) {
            pn_fail(e, PN_EIO, "cannot create '%s': %s", *path, strerror(err));
            free(*path);
            *path = NULL;
            return -1;
        }
        free(*path);
        *path = NULL;
    }
    return pn_fail(e, PN_EIO, "output_dir '%s': no free temporary file name", f->dir);
}

static pn_send_result folder_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                  const volatile int *abort, pn_error *e)
{
    folder_exporter *f = (folder_exporter *)self;
    (void)deadline_ns; /* a local write is short; abort is checked before it */
    if (abort && __atomic_load_n(abort, __ATOMIC_ACQUIRE)) {
        pn_fail(e, PN_EIO, "write to '%s' aborted: the exporter is stopping", f->dir);
        return PN_SEND_RETRY;
    }
    if (!u || (!u->data && u->len)) {
        pn_fail(e, PN_EINVAL, "write to '%s': no profile data", f->dir);
        return PN_SEND_FAIL;
    }
    if (make_dirs(f->dir, e))
        return PN_SEND_FAIL;

    char app[MAX_NAME_PART + 1], type[33];
    safe_name(u->app_name, "app", app, sizeof app);
    safe_name(u->profile_type, "profile", type, sizeof type);
    char part[16] = "";
    if (u->part > 0)
        snprintf(part, sizeof part, ".%u", u->part);

    char *stem = strf("%s/%s-%s-%lld-%lld%s", f->dir, app, type, (long long)u->from_s,
                      (long long)u->until_s, part);
    if (!stem) {
        pn_fail(e, PN_ENOMEM, "output_dir '%s': out of memory", f->dir);
        return PN_SEND_FAIL;
    }
    char *tmp = NULL, *final = NULL;
    pn_send_result res = PN_SEND_FAIL;
    int fd = open_temp(f, &tmp, e);
    if (fd < 0) {
        free(stem);
        return PN_SEND_FAIL;
    }
    if (write_all(fd, u->data, u->len) != 0) {
        pn_fail(e, PN_EIO, "cannot write '%s': %s", tmp, strerror(errno));
        close(fd);
        goto out;
    }
    if (close(fd) != 0) {
        pn_fail(e, PN_EIO, "cannot write '%s': %s", tmp, strerror(errno));
        goto out;
    }
    for (int k = 0; k < MAX_SUFFIX; k++) {
        char suffix[16] = "";
        if (k)
            snprintf(suffix, sizeof suffix, "-%d", k);
        free(final);
        final = strf("%s%s.pb.gz", stem, suffix);
        if (!final) {
            pn_fail(e, PN_ENOMEM, "output_dir '%s': out of memory", f->dir);
            goto out;
        }
        if (link(tmp, final) == 0) {
            res = PN_SEND_OK;
            goto out;
        }
        if (errno != EEXIST) {
            pn_fail(e, PN_EIO, "cannot create '%s': %s", final, strerror(errno));
            goto out;
        }
    }
    pn_fail(e, PN_EIO, "cannot create '%s.pb.gz': it and its -1..-%d variants all exist", stem,
            MAX_SUFFIX - 1);
out:
    unlink(tmp);
    free(tmp);
    free(stem);
    free(final);
    return res;
}

static void folder_destroy(pn_exporter *self)
{
    folder_exporter *f = (folder_exporter *)self;
    if (!f)
        return;
    free(f->dir);
    free(f);
}

/* The directory is created on the first write, not here, so a folder that
 * appears later (a mount) still works; errors show up on each send. */
pn_exporter *pn_folder_exporter_new(const char *dir, pn_error *e)
{
    if (!dir || !*dir) {
        pn_fail(e, PN_EINVAL, "output_dir is empty");
        return NULL;
    }
    folder_exporter *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = strdup(dir))) {
        free(f);
        pn_fail(e, PN_ENOMEM, "output_dir '%s': out of memory", dir);
        return NULL;
    }
    f->base.name = "folder";
    f->base.send = folder_send;
    f->base.destroy = folder_destroy;
    return &f->base;
}
