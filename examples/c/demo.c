/* demo: a small multi-threaded C "application" that profiles itself.
 *
 *     demo [--seconds N] [--output-dir DIR]
 *
 * Three worker threads do CPU work with a recognisable call tree:
 *
 *     api_worker      -> handle_request -> parse_json      -> tokenize      ~50 %
 *     render_worker   -> handle_request -> render_template -> escape_html   ~30 %
 *     compress_worker -> compress       -> deflate_block                    ~20 %
 *
 * C has no interpreter whose frames a profiler could read, so each worker
 * keeps a *shadow stack*: instrumented functions push their name on entry
 * and pop it on exit. The walker runs on the profiler's sampler thread and
 * turns every worker's shadow stack into a sample, which is exactly what a
 * language binding's walker does with its runtime's frames.
 *
 * Requests run under an `endpoint` label (pn_labels_push/pop, the C side
 * of pyroscope.tag_wrapper), and the compress thread carries a thread-wide
 * `job` label. Profiles go to DIR every second; at the end the demo reads
 * back the ones this run wrote, prints the top functions and writes
 * DIR/flamegraph.html.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pyroscope_native.h"
#include "pyroscope_report.h"

#define APP_NAME "demo.c.app"
#define DEFAULT_OUTPUT_DIR "./pyroscope-profiles"
#define DEMO_FILE "examples/c/demo.c"
#define NS_PER_S 1000000000LL
#define SHADOW_MAX 32 /* deeper calls are cut; the demo nests 4 deep */
#define NWORKERS 3

/* ----------------------------------------------------------- shadow stack */

typedef struct {
    _Atomic(const char *) name; /* always __func__ of a demo function: never freed */
    _Atomic uint32_t line;
} shadow_frame;

typedef struct demo_app demo_app;
typedef struct worker worker;

/* One worker thread. The worker is the only writer of its shadow stack; the
 * walker reads it at any moment, without locks, from the sampler thread. */
struct worker {
    /* Set by main before the thread starts; read-only afterwards. */
    const char *name;
    void *(*thread_main)(void *);
    int64_t slice_begin_ns, slice_end_ns; /* its slice of every second */
    demo_app *app;

    /* Written by the worker, read by the walker. */
    _Atomic pid_t tid;                  /* kernel thread id; 0 when not running */
    atomic_uint depth;                  /* frames pushed (may exceed SHADOW_MAX) */
    shadow_frame frames[SHADOW_MAX];    /* [0] is the outermost frame */

    /* Worker-owned while it runs; main reads them after joining it. */
    pthread_t thread;
    char input[8192];                   /* what the work chews on */
    size_t input_len;
    char scratch[6 * 8192];             /* output buffer of escape_html */
    uint64_t checksum;                  /* keeps the work from being optimised away */
    int failed;
    pn_error error;
};

struct demo_app {
    int64_t start_ns;                   /* CLOCK_MONOTONIC; set before threads start */
    atomic_int stop;                    /* set by main (under mu), polled by the workers */
    pthread_mutex_t mu;                 /* with wake: lets a stop cut a worker's nap short */
    pthread_cond_t wake;
    worker workers[NWORKERS];
};

static void shadow_push(worker *w, const char *name, uint32_t line)
{
    unsigned d = atomic_load_explicit(&w->depth, memory_order_relaxed);
    if (d < SHADOW_MAX) {
        atomic_store_explicit(&w->frames[d].name, name, memory_order_relaxed);
        atomic_store_explicit(&w->frames[d].line, line, memory_order_relaxed);
    }
    /* Release: a walker that sees the new depth also sees the new frame. */
    atomic_store_explicit(&w->depth, d + 1, memory_order_release);
}

static void shadow_pop(worker *w)
{
    unsigned d = atomic_load_explicit(&w->depth, memory_order_relaxed);
    atomic_store_explicit(&w->depth, d - 1, memory_order_release);
}

/* Every instrumented function starts with ENTER(w) and leaves via LEAVE(w). */
#define ENTER(w) shadow_push((w), __func__, __LINE__)
#define LEAVE(w) shadow_pop(w)

/* ----------------------------------------------------------------- walker */

/* Called by the sampler thread once per tick (100 times a second). Like any
 * walker it must not allocate or take locks an application thread holds. */
static void walk(void *ctx, pn_tick *tick)
{
    demo_app *app = ctx;
    pn_symbols *symbols = pn_tick_symbols(tick);
    for (size_t i = 0; i < NWORKERS; i++) {
        worker *w = &app->workers[i];
        pid_t tid = atomic_load(&w->tid);
        int64_t value_ns;
        /* Not running yet, or (on-CPU mode) used no CPU since the last tick. */
        if (tid == 0 || !pn_tick_begin_thread(tick, tid, &value_ns))
            continue;

        /* Copy first, then check. The worker keeps running while we read,
         * so the copy may mix two moments of its stack: never trust the
         * depth beyond the array, nor a frame we have not checked. */
        unsigned depth = atomic_load_explicit(&w->depth, memory_order_acquire);
        int cut = depth > SHADOW_MAX;
        if (cut)
            depth = SHADOW_MAX;
        const char *names[SHADOW_MAX];
        uint32_t lines[SHADOW_MAX];
        for (unsigned d = 0; d < depth; d++) {
            names[d] = atomic_load_explicit(&w->frames[d].name, memory_order_relaxed);
            lines[d] = atomic_load_explicit(&w->frames[d].line, memory_order_relaxed);
        }

        /* The core wants the leaf first. */
        pn_frame_id frames[SHADOW_MAX + 1];
        size_t n = 0;
        if (cut)
            frames[n++] = PN_FRAME_TRUNCATED;
        for (unsigned d = depth; d-- > 0;) {
            frames[n++] = names[d] ? pn_symbols_frame3(symbols, names[d], strlen(names[d]),
                                                       DEMO_FILE, strlen(DEMO_FILE), lines[d])
                                   : PN_FRAME_UNKNOWN;
        }
        pn_tick_sample(tick, tid, frames, n, value_ns, w->name);
    }
}

/* ------------------------------------------------------------ the workload */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Count the tokens of a JSON text. */
static size_t tokenize(worker *w, const char *json, size_t len)
{
    ENTER(w);
    size_t tokens = 0;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (c == '"') {
            for (i++; i < len && json[i] != '"'; i++)
                if (json[i] == '\\')
                    i++;
            tokens++;
        } else if (is_digit(c)) {
            while (i + 1 < len && is_digit(json[i + 1]))
                i++;
            tokens++;
        } else if (c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',') {
            tokens++;
        }
    }
    LEAVE(w);
    return tokens;
}

static void parse_json(worker *w)
{
    ENTER(w);
    for (int round = 0; round < 8; round++)
        w->checksum += tokenize(w, w->input, w->input_len);
    LEAVE(w);
}

/* HTML-escape text into out (which has room for 6 bytes per input byte). */
static size_t escape_html(worker *w, const char *text, size_t len, char *out)
{
    ENTER(w);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep = NULL;
        switch (text[i]) {
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '&': rep = "&amp;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: out[o++] = text[i]; continue;
        }
        size_t n = strlen(rep);
        memcpy(out + o, rep, n);
        o += n;
    }
    LEAVE(w);
    return o;
}

static void render_template(worker *w)
{
    ENTER(w);
    for (int row = 0; row < 8; row++)
        w->checksum += escape_html(w, w->input, w->input_len, w->scratch);
    LEAVE(w);
}

/* The match-finding half of LZ77 on one block: for every position, how
 * long a match the previous occurrence of its 4-byte prefix gives. */
static uint64_t deflate_block(worker *w, const unsigned char *block, size_t len)
{
    ENTER(w);
    uint16_t last_seen[4096] = {0}; /* position + 1 of each prefix hash; 0: none */
    uint64_t matched = 0;
    for (size_t i = 0; i + 4 <= len && i < UINT16_MAX; i++) {
        uint32_t key = (uint32_t)block[i] | (uint32_t)block[i + 1] << 8 |
                       (uint32_t)block[i + 2] << 16 | (uint32_t)block[i + 3] << 24;
        uint32_t h = (key * 2654435761u) >> 20;
        size_t seen = last_seen[h];
        last_seen[h] = (uint16_t)(i + 1);
        if (seen > 0) {
            size_t prev = seen - 1, m = 0;
            while (i + m < len && m < 258 && block[prev + m] == block[i + m])
                m++;
            matched += m;
        }
    }
    LEAVE(w);
    return matched;
}

static void compress(worker *w)
{
    ENTER(w);
    for (int round = 0; round < 4; round++)
        w->checksum += deflate_block(w, (const unsigned char *)w->input, w->input_len);
    LEAVE(w);
}

/* One request, tagged with its endpoint for as long as it runs. */
static int handle_request(worker *w, const char *endpoint)
{
    ENTER(w);
    pn_label tag = {"endpoint", endpoint};
    int rc = pn_labels_push(&tag, 1, &w->error);
    if (rc == 0) {
        if (strcmp(endpoint, "/api/render") == 0)
            render_template(w);
        else
            parse_json(w);
        rc = pn_labels_pop(&w->error);
    }
    LEAVE(w);
    return rc;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};
    return ts;
}

/* Sleep until `deadline` (CLOCK_MONOTONIC) or until main asks to stop. An
 * idle worker must not wake up in between: each wake-up costs a little CPU,
 * and in on-CPU mode that would turn into samples of the idle stack. */
static void nap_until(demo_app *app, int64_t deadline)
{
    struct timespec ts = to_timespec(deadline);
    pthread_mutex_lock(&app->mu);
    while (!atomic_load(&app->stop) && mono_ns() < deadline)
        pthread_cond_timedwait(&app->wake, &app->mu, &ts);
    pthread_mutex_unlock(&app->mu);
}

/* Run `unit` over and over, but only inside the worker's slice of every
 * second: the three slices do not overlap, so the workers never compete for
 * a CPU and the profile shows the designed 50/30/20 split on any machine
 * with one free core. */
static void run_in_slice(worker *w, int (*unit)(worker *))
{
    atomic_store(&w->tid, pn_gettid());
    while (!atomic_load(&w->app->stop) && !w->failed) {
        int64_t now = mono_ns();
        int64_t in_second = (now - w->app->start_ns) % NS_PER_S;
        if (in_second >= w->slice_begin_ns && in_second < w->slice_end_ns) {
            if (unit(w) != 0)
                w->failed = 1;
        } else {
            int64_t wait = (w->slice_begin_ns - in_second + NS_PER_S) % NS_PER_S;
            nap_until(w->app, now + wait);
        }
    }
    atomic_store(&w->tid, 0);
}

static int serve_users(worker *w) { return handle_request(w, "/api/users"); }

static int serve_render(worker *w) { return handle_request(w, "/api/render"); }

static int compress_logs(worker *w)
{
    compress(w);
    return 0;
}

static void *api_worker(void *arg)
{
    worker *w = arg;
    ENTER(w);
    run_in_slice(w, serve_users);
    LEAVE(w);
    return NULL;
}

static void *render_worker(void *arg)
{
    worker *w = arg;
    ENTER(w);
    run_in_slice(w, serve_render);
    LEAVE(w);
    return NULL;
}

static void *compress_worker(void *arg)
{
    worker *w = arg;
    ENTER(w);
    /* A label for everything this thread does (pyroscope.add_thread_tag). */
    if (pn_labels_thread_add("job", "log-compaction", &w->error) != 0)
        w->failed = 1;
    else
        run_in_slice(w, compress_logs);
    LEAVE(w);
    return NULL;
}

/* Some JSON-ish text with markup characters, the input of every worker. */
static void fill_input(worker *w)
{
    static const char record[] =
        "{\"id\": 1042, \"name\": \"Ada <admin>\", \"tags\": [\"a&b\", \"it's\"], "
        "\"score\": 98.5, \"bio\": \"Writes \\\"notes\\\" & <b>code</b>\"},\n";
    size_t n = 0;
    while (n + sizeof record - 1 < sizeof w->input) {
        memcpy(w->input + n, record, sizeof record - 1);
        n += sizeof record - 1;
    }
    w->input_len = n;
}

/* ----------------------------------------------------------------- report */

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Add the profiles this run wrote to `dir`. Adding the whole folder would
 * also merge earlier runs (and other demos sharing the default folder), so
 * take only this app's files written since `since`. */
static int add_this_runs_profiles(pn_report *r, const char *dir, const struct timespec *since,
                                  pn_error *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return pn_fail(e, PN_EIO, "cannot open output folder '%s': %s", dir, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, APP_NAME "-", strlen(APP_NAME "-")) != 0 ||
            !has_suffix(de->d_name, ".pb.gz"))
            continue;
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (len < 0 || (size_t)len >= sizeof path || stat(path, &st) != 0)
            continue;
        if (st.st_mtim.tv_sec < since->tv_sec ||
            (st.st_mtim.tv_sec == since->tv_sec && st.st_mtim.tv_nsec < since->tv_nsec))
            continue;
        rc = pn_report_add_path(r, path, e);
    }
    closedir(d);
    return rc;
}

static int write_reports(const char *dir, const struct timespec *since)
{
    pn_error e = {0};
    char html[4096];
    if (snprintf(html, sizeof html, "%s/flamegraph.html", dir) >= (int)sizeof html) {
        fprintf(stderr, "demo: output folder name is too long: %s\n", dir);
        return -1;
    }
    pn_report *r = pn_report_new();
    if (!r) {
        fprintf(stderr, "demo: out of memory creating the report\n");
        return -1;
    }
    int rc = -1;
    if (add_this_runs_profiles(r, dir, since, &e) != 0) {
        fprintf(stderr, "demo: reading the profiles failed: %s\n", e.msg);
    } else if (pn_report_profiles(r) == 0) {
        fprintf(stderr, "demo: no profiles of this run were found in %s "
                "(see the warnings above)\n", dir);
    } else if (pn_report_write_html(r, APP_NAME " CPU profile", html, &e) != 0) {
        fprintf(stderr, "demo: writing the flame graph failed: %s\n", e.msg);
    } else {
        printf("\nRead %zu profiles from %s. Top functions by CPU time:\n\n",
               pn_report_profiles(r), dir);
        fflush(stdout);
        if (pn_report_write_top(r, stdout, 15, &e) != 0) {
            fprintf(stderr, "demo: writing the top table failed: %s\n", e.msg);
        } else {
            printf("\nFlame graph: %s (open it in a browser)\n", html);
            rc = 0;
        }
    }
    pn_report_free(r);
    return rc;
}

/* ---------------------------------------------------------------- threads */

/* Who does what, and in which slice of every second. */
static const struct {
    const char *name;
    void *(*thread_main)(void *);
    double slice_begin, slice_end; /* fractions of a second */
} plan[NWORKERS] = {
    {"api", api_worker, 0.0, 0.5},
    {"render", render_worker, 0.5, 0.8},
    {"compress", compress_worker, 0.8, 1.0},
};

static int setup_app(demo_app *app)
{
    for (int i = 0; i < NWORKERS; i++) {
        worker *w = &app->workers[i];
        w->name = plan[i].name;
        w->thread_main = plan[i].thread_main;
        w->slice_begin_ns = (int64_t)(plan[i].slice_begin * NS_PER_S);
        w->slice_end_ns = (int64_t)(plan[i].slice_end * NS_PER_S);
        w->app = app;
        fill_input(w);
    }
    /* Naps are timed on CLOCK_MONOTONIC, like everything else here. */
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
             pthread_mutex_init(&app->mu, NULL) || pthread_cond_init(&app->wake, &attr);
    pthread_condattr_destroy(&attr);
    return rc ? -1 : 0;
}

/* Start the workers, let them run for `seconds`, stop and join them. */
static int run_workload(demo_app *app, long seconds)
{
    int failed = 0, started = 0;
    app->start_ns = mono_ns();
    for (; started < NWORKERS; started++) {
        worker *w = &app->workers[started];
        int err = pthread_create(&w->thread, NULL, w->thread_main, w);
        if (err != 0) {
            fprintf(stderr, "demo: cannot start the %s thread: %s\n", w->name, strerror(err));
            failed = 1;
            break;
        }
    }
    if (!failed)
        nap_until(app, app->start_ns + seconds * NS_PER_S);

    pthread_mutex_lock(&app->mu);
    atomic_store(&app->stop, 1);
    pthread_cond_broadcast(&app->wake);
    pthread_mutex_unlock(&app->mu);
    for (int i = 0; i < started; i++) {
        worker *w = &app->workers[i];
        pthread_join(w->thread, NULL);
        if (w->failed) {
            fprintf(stderr, "demo: the %s thread failed: %s\n", w->name, w->error.msg);
            failed = 1;
        }
    }
    return failed ? -1 : 0;
}

/* ------------------------------------------------------------------- main */

static void usage(FILE *out, const char *argv0)
{
    fprintf(out,
            "usage: %s [--seconds N] [--output-dir DIR]\n"
            "  --seconds N       how long to run the workload (1..3600, default 5)\n"
            "  --output-dir DIR  where profiles and flamegraph.html go\n"
            "                    (default: $PYROSCOPE_OUTPUT_DIR, else %s)\n"
            "Other PYROSCOPE_* variables (e.g. PYROSCOPE_SERVER_ADDRESS) apply too.\n",
            argv0, DEFAULT_OUTPUT_DIR);
}

/* Settings: the environment first, then the demo's own choices, so that (as
 * in every binding) an explicit setting wins over a PYROSCOPE_* variable.
 * The output folder is the exception: the demo's default applies only when
 * neither --output-dir nor PYROSCOPE_OUTPUT_DIR names one. */
static int configure(pn_config *c, const char *output_dir, pn_error *e)
{
    if (pn_config_apply_env(c, NULL, e) != 0 ||
        pn_config_set(c, "application_name", APP_NAME, e) != 0 ||
        pn_config_set(c, "sample_rate", "100", e) != 0 ||
        pn_config_set(c, "upload_interval", "1", e) != 0)
        return -1;
    if (output_dir)
        return pn_config_set(c, "output_dir", output_dir, e);
    if (!c->output_dir)
        return pn_config_set(c, "output_dir", DEFAULT_OUTPUT_DIR, e);
    return 0;
}

int main(int argc, char **argv)
{
    long seconds = 5;
    const char *output_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            char *end;
            seconds = strtol(argv[++i], &end, 10);
            if (*end != '\0' || end == argv[i] || seconds < 1 || seconds > 3600) {
                fprintf(stderr, "demo: --seconds must be a whole number from 1 to 3600, "
                        "got '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--output-dir") == 0 && i + 1 < argc) {
            output_dir = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else {
            usage(stderr, argv[0]);
            return 2;
        }
    }

    pn_config cfg;
    pn_error e = {0};
    pn_config_init(&cfg);
    if (configure(&cfg, output_dir, &e) != 0) {
        fprintf(stderr, "demo: bad setting: %s\n", e.msg);
        pn_config_free(&cfg);
        return 1;
    }

    /* Static because of its size (the workers' buffers); its fields say
     * which thread writes them. */
    static demo_app app;
    if (setup_app(&app) != 0) {
        fprintf(stderr, "demo: cannot create the workers' condition variable\n");
        pn_config_free(&cfg);
        return 1;
    }

    /* Profiles written from here on belong to this run. */
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);

    pn_agent *agent = pn_agent_start(&cfg, &e);
    if (!agent) {
        fprintf(stderr, "demo: cannot start the profiler: %s\n", e.msg);
        pn_config_free(&cfg);
        return 1;
    }
    /* The walker driver: the core's sampler thread calls walk() each tick. */
    if (!pn_agent_add_driver(agent, &(pn_driver_opts){.kind = PN_DRIVER_WALKER, .walker = walk,
                                                      .ctx = &app}, &e)) {
        fprintf(stderr, "demo: cannot start the sampler: %s\n", e.msg);
        pn_agent_stop(agent);
        pn_config_free(&cfg);
        return 1;
    }
    printf("Profiling %s for %ld s at 100 Hz; profiles go to %s every second.\n", APP_NAME,
           seconds, cfg.output_dir);
    fflush(stdout);

    int failed = run_workload(&app, seconds) != 0;

    pn_agent_stats stats;
    pn_agent_get_stats(agent, &stats);
    pn_agent_stop(agent); /* writes the last, partial period */
    printf("Sampler: %llu ticks, %llu samples, %llu missed ticks, %.1f ms of its own CPU.\n",
           (unsigned long long)stats.sampler.ticks, (unsigned long long)stats.sampler.samples,
           (unsigned long long)stats.sampler.missed_ticks,
           (double)stats.sampler.sampler_cpu_ns / 1e6);

    if (!failed && write_reports(cfg.output_dir, &started) != 0)
        failed = 1;
    pn_config_free(&cfg);
    pthread_cond_destroy(&app.wake);
    pthread_mutex_destroy(&app.mu);
    return failed ? 1 : 0;
}
