/* The thread-name table: set, replace, forget, cutting, bounds, and a
 * reader that never sees half of a name while a writer renames. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "pyroscope_native.h"

static void test_set_get_forget(void)
{
    char buf[PN_THREAD_NAME_MAX];
    pn_error e;
    CHECK_EQ_INT(pn_thread_name_get(4242, buf, sizeof buf), 0);
    CHECK_EQ_INT(pn_thread_name_set(4242, "worker-1", &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(4242, buf, sizeof buf), 1);
    CHECK_STR(buf, "worker-1");
    CHECK_EQ_INT(pn_thread_name_set(4242, "renamed", &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(4242, buf, sizeof buf), 1);
    CHECK_STR(buf, "renamed");
    /* Same home slot (tids that collide) stay apart. */
    CHECK_EQ_INT(pn_thread_name_set(4242 + 8192, "other", &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(4242 + 8192, buf, sizeof buf), 1);
    CHECK_STR(buf, "other");
    CHECK_EQ_INT(pn_thread_name_set(4242, NULL, &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(4242, buf, sizeof buf), 0);
    /* The colliding entry is still found past the freed slot. */
    CHECK_EQ_INT(pn_thread_name_get(4242 + 8192, buf, sizeof buf), 1);
    CHECK_EQ_INT(pn_thread_name_set(4242 + 8192, "", &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(4242 + 8192, buf, sizeof buf), 0);
    CHECK_EQ_INT(pn_thread_name_set(0, "x", &e), -1);
    CHECK(strstr(e.msg, "thread") != NULL);
    CHECK_EQ_INT(pn_thread_name_set(-5, "x", &e), -1);
}

static void test_cut_and_small_buffer(void)
{
    char longname[400], buf[PN_THREAD_NAME_MAX];
    pn_error e;
    /* 'é' is two bytes: a cut must not split one. */
    size_t n = 0;
    while (n + 2 < sizeof longname - 1) {
        longname[n++] = (char)0xC3;
        longname[n++] = (char)0xA9;
    }
    longname[n] = '\0';
    CHECK_EQ_INT(pn_thread_name_set(77, longname, &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(77, buf, sizeof buf), 1);
    CHECK(strlen(buf) <= PN_THREAD_NAME_MAX - 1);
    CHECK_EQ_INT(strlen(buf) % 2, 0);
    /* Three bytes hold one 'é' and half of the next: only the whole one. */
    char small[4];
    CHECK_EQ_INT(pn_thread_name_get(77, small, sizeof small), 1);
    CHECK_STR(small, "\xC3\xA9");
    pn_thread_names_clear();
    CHECK_EQ_INT(pn_thread_name_get(77, buf, sizeof buf), 0);
}

/* Names become label values: they must pass the label value rule. */
static void test_names_follow_label_rules(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a{b},c=d", "a_b__c_d"},
        {"line\nbreak\ttab\x7f", "line_break_tab_"},
        {"c1 \xC2\x85 end", "c1 _ end"},           /* U+0085, a C1 control */
        {"bad \xFF\xC3( utf8", "bad ?" "?( utf8"}, /* stray byte, cut sequence */
        {"overlong \xC0\xAF", "overlong ??"},
        {"surrogate \xED\xA0\x80", "surrogate ???"},
        {"ok \xC5\xBB \xF0\x9F\x98\x80", "ok \xC5\xBB \xF0\x9F\x98\x80"}, /* kept */
    };
    char buf[PN_THREAD_NAME_MAX];
    pn_error e;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(pn_thread_name_set(500, cases[i].in, &e), 0);
        CHECK_EQ_INT(pn_thread_name_get(500, buf, sizeof buf), 1);
        CHECK_STR(buf, cases[i].out);
        CHECK_EQ_INT(pn_label_check_value("thread_name", buf, &e), 0);
    }
    /* A long name of separators and 4-byte characters stays within the
     * bound, whole characters only, and still passes the rule. */
    char longname[600];
    size_t n = 0;
    while (n + 5 < sizeof longname) {
        memcpy(longname + n, "=\xF0\x9F\x98\x80", 5);
        n += 5;
    }
    longname[n] = '\0';
    CHECK_EQ_INT(pn_thread_name_set(501, longname, &e), 0);
    CHECK_EQ_INT(pn_thread_name_get(501, buf, sizeof buf), 1);
    CHECK(strlen(buf) <= PN_THREAD_NAME_MAX - 1);
    CHECK_EQ_INT(pn_label_check_value("thread_name", buf, &e), 0);
    pn_thread_names_clear();
}

static void test_bounded(void)
{
    pn_error e;
    int failed = 0;
    for (pid_t t = 1; t <= 8193; t++) {
        if (pn_thread_name_set(t, "n", &e) != 0)
            failed++;
    }
    CHECK_EQ_INT(failed, 1);
    CHECK(strstr(e.msg, "8192") != NULL);
    pn_thread_names_clear();
    CHECK_EQ_INT(pn_thread_name_set(9, "again", &e), 0);
    pn_thread_names_clear();
}

static atomic_int stop_flag;

static void *renamer(void *arg)
{
    (void)arg;
    pn_error e;
    for (unsigned i = 0; !atomic_load(&stop_flag); i++)
        pn_thread_name_set(99, (i & 1) ? "aaaaaaaaaaaaaaaaaaaaaaaa" : "bbbbbbbbbbbb", &e);
    return NULL;
}

static void test_no_torn_reads(void)
{
    pthread_t t;
    pn_error e;
    CHECK_EQ_INT(pn_thread_name_set(99, "bbbbbbbbbbbb", &e), 0);
    atomic_store(&stop_flag, 0);
    pthread_create(&t, NULL, renamer, NULL);
    int torn = 0, seen = 0;
    char buf[PN_THREAD_NAME_MAX];
    /* A writer preempted mid-write keeps the slot busy for a whole time
     * slice, so read until enough reads succeeded (bounded by 10 s). */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 200000 || seen < 1000; i++) {
        if ((i & 1023) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - t0.tv_sec > 10)
                break;
        }
        if (!pn_thread_name_get(99, buf, sizeof buf))
            continue;
        seen++;
        if (strcmp(buf, "aaaaaaaaaaaaaaaaaaaaaaaa") != 0 && strcmp(buf, "bbbbbbbbbbbb") != 0)
            torn++;
    }
    atomic_store(&stop_flag, 1);
    pthread_join(t, NULL);
    CHECK_EQ_INT(torn, 0);
    CHECK(seen > 0);
    pn_thread_names_clear();
}

TEST_MAIN(T(test_set_get_forget), T(test_cut_and_small_buffer),
          T(test_names_follow_label_rules), T(test_bounded),
          T(test_no_torn_reads))
