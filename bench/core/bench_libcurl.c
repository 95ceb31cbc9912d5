/* What libcurl costs a process: memory from /proc/self/smaps_rollup (RSS,
 * PSS, private bytes) and start-up time, for a process that links libcurl
 * and for one that loads it with dlopen() on first use.
 *
 * Built twice (CMakeLists.txt): bench_libcurl, not linked with libcurl,
 * and bench_libcurl_linked, linked with -lcurl. Run bench_libcurl: it
 * starts both, in alternation, as its children and prints medians.
 *   build/bench_libcurl [--rounds N]
 * Neither is linked with the core, so only libcurl makes the difference.
 */
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The libcurl functions a probe calls; filled at start-up (linked) or
 * after dlopen. Main thread only. */
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *c);
    void (*easy_cleanup)(CURL *c);
} cu;

typedef struct {
    double rss, pss, priv_dirty, priv_clean; /* KiB */
} mem;

static double field(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    return p ? strtod(p + strlen(name), NULL) : -1;
}

static mem read_mem(void)
{
    mem m = {-1, -1, -1, -1};
    char buf[4096];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return m;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    m.rss = field(buf, "\nRss:");
    m.pss = field(buf, "\nPss:");
    m.priv_dirty = field(buf, "\nPrivate_Dirty:");
    m.priv_clean = field(buf, "\nPrivate_Clean:");
    return m;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define SYM(field, name)                                                       \
    do {                                                                       \
        void *p_ = dlsym(h, name);                                             \
        if (!p_)                                                               \
            return -1;                                                         \
        memcpy(&cu.field, &p_, sizeof p_);                                     \
    } while (0)

static int load_curl(void)
{
#ifdef PN_BENCH_LINKED
    cu.global_init = curl_global_init;
    cu.easy_init = curl_easy_init;
    cu.easy_setopt = curl_easy_setopt;
    cu.easy_perform = curl_easy_perform;
    cu.easy_cleanup = curl_easy_cleanup;
    return 0;
#else
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    SYM(global_init, "curl_global_init");
    SYM(easy_init, "curl_easy_init");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_perform, "curl_easy_perform");
    SYM(easy_cleanup, "curl_easy_cleanup");
    return 0;
#endif
}

/* One POST to a port nothing listens on: the handle, the connection
 * machinery and the resolver run once. */
static void one_request(void)
{
    CURL *c = cu.easy_init();
    if (!c)
        return;
    cu.easy_setopt(c, CURLOPT_URL, "http://127.0.0.1:9/ingest");
    cu.easy_setopt(c, CURLOPT_POSTFIELDS, "x");
    cu.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu.easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    (void)cu.easy_perform(c);
    cu.easy_cleanup(c);
}

/* Child: print the memory at each stage ("start", "init": libcurl loaded
 * and curl_global_init done, "request": after one request) on one line,
 * with the time load + init took. */
static int probe(void)
{
    mem a = read_mem();
    double t0 = mono_s();
    if (load_curl() != 0 || cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "bench_libcurl: cannot load or initialise libcurl\n");
        return 1;
    }
    double t1 = mono_s();
    mem b = read_mem();
    one_request();
    mem c = read_mem();
    printf("%.0f %.0f %.0f %.0f  %.0f %.0f %.0f %.0f  %.0f %.0f %.0f %.0f  %.6f\n", a.rss, a.pss,
           a.priv_dirty, a.priv_clean, b.rss, b.pss, b.priv_dirty, b.priv_clean, c.rss, c.pss,
           c.priv_dirty, c.priv_clean, t1 - t0);
    return 0;
}

/* Runs `path arg` and waits; returns the wall time from fork to reaped
 * exit, or -1. With out != NULL the child's stdout is read into it. */
static double run(const char *path, const char *arg, char *out, size_t cap)
{
    int fd[2] = {-1, -1};
    if (out && pipe(fd) != 0)
        return -1;
    double t0 = mono_s();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (out) {
            dup2(fd[1], 1);
            close(fd[0]);
            close(fd[1]);
        }
        execl(path, path, arg, (char *)NULL);
        _exit(127);
    }
    size_t len = 0;
    if (out) {
        close(fd[1]);
        ssize_t r;
        while (len + 1 < cap && (r = read(fd[0], out + len, cap - 1 - len)) > 0)
            len += (size_t)r;
        out[len] = '\0';
        close(fd[0]);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    double t = mono_s() - t0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define NCOL 13
#define MAX_ROUNDS 401

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--exit") == 0)
        return 0;
    if (argc == 2 && strcmp(argv[1], "--probe") == 0)
        return probe();
    int rounds = 41;
    if (argc == 3 && strcmp(argv[1], "--rounds") == 0)
        rounds = atoi(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
        return 2;
    }
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 41;

    char self[PATH_MAX], linked[PATH_MAX + 8];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    snprintf(linked, sizeof linked, "%s_linked", self);
    const char *bin[2] = {self, linked};

    static double start_s[2][MAX_ROUNDS], col[2][NCOL][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < 2; v++) {
            /* Alternate which variant goes first: neither always gets the
             * warmer page cache. */
            int w = (r % 2) ? 1 - v : v;
            start_s[w][r] = run(bin[w], "--exit", NULL, 0);
            char out[512];
            if (run(bin[w], "--probe", out, sizeof out) < 0 || start_s[w][r] < 0) {
                fprintf(stderr, "bench_libcurl: %s failed\n", bin[w]);
                return 1;
            }
            char *p = out;
            for (int c = 0; c < NCOL; c++)
                col[w][c][r] = strtod(p, &p);
        }
    }
    static const char *const name[2] = {"dlopen on first use", "linked (-lcurl)"};
    printf("bench_libcurl: medians of %d rounds; memory in KiB from /proc/self/smaps_rollup\n\n",
           rounds);
    printf("start-up (fork + exec + exit of an empty main):\n");
    double su[2];
    for (int v = 0; v < 2; v++) {
        su[v] = median(start_s[v], rounds) * 1e3;
        printf("    %-22s %8.2f ms\n", name[v], su[v]);
    }
    printf("    %-22s %8.2f ms\n\n", "linking adds", su[1] - su[0]);

    static const char *const stage[3] = {"at main()", "after load + curl_global_init",
                                         "after one request"};
    printf("    %-22s %-32s %8s %8s %13s %13s\n", "variant", "stage", "RSS", "PSS",
           "Private_Dirty", "Private_Clean");
    for (int v = 0; v < 2; v++)
        for (int s = 0; s < 3; s++) {
            double m[4];
            for (int k = 0; k < 4; k++)
                m[k] = median(col[v][s * 4 + k], rounds);
            printf("    %-22s %-32s %8.0f %8.0f %13.0f %13.0f\n", s ? "" : name[v], stage[s], m[0],
                   m[1], m[2], m[3]);
        }
    printf("\nload + curl_global_init inside the process:\n");
    for (int v = 0; v < 2; v++)
        printf("    %-22s %8.2f ms\n", name[v], median(col[v][12], rounds) * 1e3);
    return 0;
}
