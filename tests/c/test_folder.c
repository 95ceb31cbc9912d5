/* The folder exporter: file names, atomic creation, directory creation,
 * name collisions and write errors. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pyroscope_native.h"
#include "export/exporter.h"
#include "pprof_decode.h"
#include "queue_helper.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    chmod(path, 0700);
    return remove(path);
}

static void rm_rf(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* Entry names of dir (without . and ..), sorted, joined by '|'. */
static void list_dir(const char *dir, char *out, size_t n)
{
    char names[32][256];
    size_t count = 0;
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(out, n, "(cannot open: %s)", strerror(errno));
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) && count < 32) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            snprintf(names[count++], sizeof names[0], "%s", de->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof names[0], cmp_name);
    for (size_t i = 0; i < count; i++) {
        if (i)
            strncat(out, "|", n - strlen(out) - 1);
        strncat(out, names[i], n - strlen(out) - 1);
    }
}

/* 1 when dir/name holds exactly data[0..len). */
static int file_is(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char buf[8192];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return got == len && memcmp(buf, data, len) == 0;
}

static char app_name[64], type_name[16];

static pn_upload upload(const char *app, const char *data, uint32_t part)
{
    snprintf(app_name, sizeof app_name, "%s", app);
    snprintf(type_name, sizeof type_name, "cpu");
    pn_upload u = {.app_name = app_name, .profile_type = type_name, .from_s = 100, .until_s = 110,
                   .sample_rate = 100, .data = (uint8_t *)data, .len = strlen(data), .part = part};
    return u;
}

static void test_names_content_and_dir_creation(void)
{
    char root[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char dir[256];
    snprintf(dir, sizeof dir, "%s/a/b", root); /* does not exist yet */
    pn_error e;
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    CHECK(x != NULL);
    if (x) {
        pn_upload u = upload("my/app x", "first profile", 0);
        pn_error_clear(&e);
        CHECK_EQ_INT(x->send(x, &u, 0, NULL, &e), PN_SEND_OK);
        CHECK_STR(e.msg, "");
        u = upload("my/app x", "second part", 2);
        CHECK_EQ_INT(x->send(x, &u, 0, NULL, &e), PN_SEND_OK);
        char names[1024];
        list_dir(dir, names, sizeof names);
        CHECK_STR(names, "my_app_x-cpu-100-110.2.pb.gz|my_app_x-cpu-100-110.pb.gz");
        CHECK(file_is(dir, "my_app_x-cpu-100-110.pb.gz", "first profile", 13));
        CHECK(file_is(dir, "my_app_x-cpu-100-110.2.pb.gz", "second part", 11));
        x->destroy(x);
    }
    rm_rf(root);
}

static void test_collision_suffixes(void)
{
    char dir[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pn_error e;
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    CHECK(x != NULL);
    if (x) {
        const char *data[] = {"one", "two", "three"};
        for (int i = 0; i < 3; i++) {
            pn_upload u = upload("app", data[i], 0);
            CHECK_EQ_INT(x->send(x, &u, 0, NULL, &e), PN_SEND_OK);
        }
        pn_upload u = upload("app", "part one", 1);
        CHECK_EQ_INT(x->send(x, &u, 0, NULL, &e), PN_SEND_OK);
        u = upload("app", "part one again", 1);
        CHECK_EQ_INT(x->send(x, &u, 0, NULL, &e), PN_SEND_OK);
        char names[1024];
        list_dir(dir, names, sizeof names);
        CHECK_STR(names, "app-cpu-100-110-1.pb.gz|app-cpu-100-110-2.pb.gz|app-cpu-100-110.1-1.pb.gz|"
                         "app-cpu-100-110.1.pb.gz|app-cpu-100-110.pb.gz");
        CHECK(file_is(dir, "app-cpu-100-110.pb.gz", "one", 3));
        CHECK(file_is(dir, "app-cpu-100-110-1.pb.gz", "two", 3));
        CHECK(file_is(dir, "app-cpu-100-110-2.pb.gz", "three", 5));
        CHECK(file_is(dir, "app-cpu-100-110.1.pb.gz", "part one", 8));
        CHECK(file_is(dir, "app-cpu-100-110.1-1.pb.gz", "part one again", 14));
        x->destroy(x);
    }
    rm_rf(dir);
}

static void test_directory_under_a_file(void)
{
    char root[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char file[256], dir[300];
    snprintf(file, sizeof file, "%s/plain", root);
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    snprintf(dir, sizeof dir, "%s/sub", file);
    pn_error e;
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    CHECK(x != NULL);
    if (x) {
        pn_upload u = upload("app", "data", 0);
        pn_error_clear(&e);
        CHECK_EQ_INT(x->send(x, &u, 0, NULL, &e), PN_SEND_FAIL);
        CHECK_EQ_INT(e.code, PN_EIO);
        CHECK(strstr(e.msg, dir) != NULL);
        CHECK(strstr(e.msg, strerror(ENOTDIR)) != NULL);
        x->destroy(x);
    }
    char names[256];
    list_dir(root, names, sizeof names);
    CHECK_STR(names, "plain");
    rm_rf(root);
}

/* Runs in a child so that, when the tests run as root (which ignores
 * directory permissions), it can drop to an unprivileged user first. */
static int read_only_child(const char *dir)
{
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return 1;
    pn_error e;
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    if (!x)
        return 2;
    pn_upload u = upload("app", "data", 0);
    int bad = 0;
    if (x->send(x, &u, 0, NULL, &e) != PN_SEND_FAIL)
        bad |= 4;
    if (!strstr(e.msg, dir) || !strstr(e.msg, strerror(EACCES)))
        bad |= 8;
    x->destroy(x);
    return bad;
}

static void test_read_only_directory(void)
{
    char dir[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ_INT(chmod(dir, 0555), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(read_only_child(dir));
    CHECK(pid > 0);
    int status = -1;
    CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    char names[256];
    list_dir(dir, names, sizeof names);
    CHECK_STR(names, "");
    rm_rf(dir);
}

/* A write that fails half-way (file size limit) leaves no temporary file. */
static void test_write_error_leaves_nothing(void)
{
    char dir[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pn_error e;
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    CHECK(x != NULL);
    struct rlimit old, small;
    CHECK_EQ_INT(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    small = old;
    small.rlim_cur = 16;
    if (x && setrlimit(RLIMIT_FSIZE, &small) == 0) {
        char big[4096];
        memset(big, 'p', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        pn_upload u = upload("app", big, 0);
        pn_error_clear(&e);
        pn_send_result r = x->send(x, &u, 0, NULL, &e);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK_EQ_INT(r, PN_SEND_FAIL);
        CHECK_EQ_INT(e.code, PN_EIO);
        CHECK(strstr(e.msg, strerror(EFBIG)) != NULL);
        char names[256];
        list_dir(dir, names, sizeof names);
        CHECK_STR(names, "");
    } else {
        CHECK(!"could not lower RLIMIT_FSIZE");
    }
    signal(SIGXFSZ, old_handler);
    if (x)
        x->destroy(x);
    rm_rf(dir);
}

static void test_abort_and_bad_arguments(void)
{
    pn_error e;
    pn_error_clear(&e);
    CHECK(pn_folder_exporter_new("", &e) == NULL);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK(strstr(e.msg, "output_dir") != NULL);
    CHECK(pn_folder_exporter_new(NULL, &e) == NULL);

    char dir[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    CHECK(x != NULL);
    if (x) {
        volatile int abort_flag = 1;
        pn_upload u = upload("app", "data", 0);
        CHECK_EQ_INT(x->send(x, &u, 0, &abort_flag, &e), PN_SEND_RETRY);
        char names[256];
        list_dir(dir, names, sizeof names);
        CHECK_STR(names, "");
        x->destroy(x);
    }
    rm_rf(dir);
}

/* Samples in the gzip'ed pprof file dir/name; -1 when unreadable. */
static long pprof_file_samples(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static uint8_t buf[4 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    pn_pb_profile *pb = pn_pprof_decode(buf, len, NULL);
    if (!pb)
        return -1;
    long n = pn_pprof_check(pb, 1) == 0 ? (long)pb->n_sample : -2;
    pn_pprof_free(pb);
    return n;
}

/* Through the queue: the folder exporter has no encode of its own, so it
 * writes the default gzip'ed pprof, one file per part when the profile is
 * split (16 000 samples per part). */
static void test_queue_writes_pprof_parts(void)
{
    char dir[] = "/tmp/pn_folder_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pn_error e;
    pn_exporter *x = pn_folder_exporter_new(dir, &e);
    CHECK(x != NULL);
    if (!x) {
        rm_rf(dir);
        return;
    }
    CHECK(x->encode == NULL);
    pn_queue *q = pn_queue_new(NULL, &x, 1, &e);
    CHECK(q != NULL);
    if (!q) {
        x->destroy(x);
        rm_rf(dir);
        return;
    }
    pn_queue_push(q, qh_profile("my app", "wall", 100, 110, 3));
    pn_queue_push(q, qh_profile("big", "cpu", 200, 210, 16001));
    CHECK_EQ_INT(pn_queue_flush(q, 30), 0);
    pn_queue_stats st;
    pn_queue_stop_stats(q, 1, &st);
    CHECK_EQ_INT(st.uploads_ok, 2);
    CHECK_EQ_INT(st.uploads_failed, 0);
    char names[1024];
    list_dir(dir, names, sizeof names);
    CHECK_STR(names, "big-cpu-200-210.1.pb.gz|big-cpu-200-210.pb.gz|my_app-wall-100-110.pb.gz");
    CHECK_EQ_INT(pprof_file_samples(dir, "my_app-wall-100-110.pb.gz"), 3);
    long a = pprof_file_samples(dir, "big-cpu-200-210.pb.gz");
    long b = pprof_file_samples(dir, "big-cpu-200-210.1.pb.gz");
    CHECK(a > 0 && a <= 16000);
    CHECK(b > 0 && b <= 16000);
    CHECK_EQ_INT(a + b, 16001);
    rm_rf(dir);
}

TEST_MAIN(T(test_names_content_and_dir_creation), T(test_collision_suffixes),
          T(test_directory_under_a_file), T(test_read_only_directory),
          T(test_write_error_leaves_nothing), T(test_abort_and_bad_arguments),
          T(test_queue_writes_pprof_parts))
