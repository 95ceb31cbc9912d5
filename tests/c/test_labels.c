/* Label validation, interning, per-thread slots, push/pop, reclamation. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"

static void test_name_rules(void)
{
    static const struct {
        const char *name;
        int ok;
    } cases[] = {
        {"region", 1},    {"_x", 1},        {"a.b_c9", 1},    {"A", 1},
        {"", 0},          {"9abc", 0},      {"a-b", 0},       {"a b", 0},
        {"__name__", 0},  {"__x", 0},       {"x{", 0},        {"x=y", 0},
        {"x,y", 0},       {".x", 0},        {"é", 0},         {"span_id", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pn_error e;
        int rc = pn_label_check_name(cases[i].name, &e);
        if ((rc == 0) != cases[i].ok)
            fprintf(stderr, "  name \"%s\": rc %d (%s)\n", cases[i].name, rc, e.msg);
        CHECK((rc == 0) == cases[i].ok);
        if (rc != 0) {
            CHECK_EQ_INT(e.code, PN_EINVAL);
            CHECK(strstr(e.msg, "label name") != NULL);
        }
    }
    pn_error e;
    CHECK_EQ_INT(pn_label_check_name("__reserved", &e), -1);
    CHECK(strstr(e.msg, "reserved") != NULL);
    CHECK_EQ_INT(pn_label_check_name(NULL, &e), -1);

    char *longname = malloc(PN_MAX_LABEL_NAME + 2);
    memset(longname, 'a', PN_MAX_LABEL_NAME + 1);
    longname[PN_MAX_LABEL_NAME + 1] = 0;
    CHECK_EQ_INT(pn_label_check_name(longname, &e), -1);
    CHECK(strstr(e.msg, "limit") != NULL);
    longname[PN_MAX_LABEL_NAME] = 0;
    CHECK_EQ_INT(pn_label_check_name(longname, &e), 0);
    free(longname);
}

static void test_value_rules(void)
{
    pn_error e;
    CHECK_EQ_INT(pn_label_check_value("k", "eu-west-1", &e), 0);
    CHECK_EQ_INT(pn_label_check_value("k", "héllo wörld", &e), 0);
    CHECK_EQ_INT(pn_label_check_value("k", "with space/and:colon", &e), 0);
    CHECK_EQ_INT(pn_label_check_value("k", "", &e), -1);
    CHECK_EQ_INT(pn_label_check_value("k", NULL, &e), -1);
    CHECK(strstr(e.msg, "string") != NULL);
    const char *bad[] = {"a{b", "a}b", "a,b", "a=b"};
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ_INT(pn_label_check_value("k", bad[i], &e), -1);
        CHECK(strstr(e.msg, "not allowed") != NULL);
        CHECK(strstr(e.msg, "\"k\"") != NULL);
    }
    CHECK_EQ_INT(pn_label_check_value("k", "\xff\xfe", &e), -1);
    CHECK(strstr(e.msg, "UTF-8") != NULL);
    CHECK_EQ_INT(pn_label_check_value("k", "\xed\xa0\x80", &e), -1); /* surrogate */
    char *longv = malloc(PN_MAX_LABEL_VALUE + 2);
    memset(longv, 'v', PN_MAX_LABEL_VALUE + 1);
    longv[PN_MAX_LABEL_VALUE + 1] = 0;
    CHECK_EQ_INT(pn_label_check_value("k", longv, &e), -1);
    longv[PN_MAX_LABEL_VALUE] = 0;
    CHECK_EQ_INT(pn_label_check_value("k", longv, &e), 0);
    free(longv);

    CHECK_EQ_INT(pn_label_check_app_name("my-app/svc.v2", &e), 0);
    CHECK_EQ_INT(pn_label_check_app_name("", &e), -1);
    CHECK_EQ_INT(pn_label_check_app_name("my app", &e), -1);
    CHECK(strstr(e.msg, "application_name") != NULL);
    CHECK_EQ_INT(pn_label_check_app_name("a{b}", &e), -1);
}

static void test_interning(void)
{
    pn_error e;
    pn_label ab[] = {{"b", "2"}, {"a", "1"}};
    pn_label ba[] = {{"a", "1"}, {"b", "2"}};
    const pn_labelset *x = pn_labelset_merge(NULL, ab, 2, &e);
    const pn_labelset *y = pn_labelset_merge(pn_labelset_empty(), ba, 2, &e);
    CHECK(x != NULL && x == y);
    CHECK(pn_labelset_id(x) != 0);
    CHECK_EQ_INT(pn_labelset_count(x), 2);
    CHECK_STR(pn_labelset_at(x, 0).key, "a"); /* sorted */
    CHECK_STR(pn_labelset_get(x, "b"), "2");
    CHECK(pn_labelset_get(x, "c") == NULL);

    pn_label over = {"a", "9"};
    const pn_labelset *z = pn_labelset_merge(x, &over, 1, &e);
    CHECK_STR(pn_labelset_get(z, "a"), "9");
    CHECK_STR(pn_labelset_get(z, "b"), "2");
    CHECK(pn_labelset_id(z) != pn_labelset_id(x));

    const pn_labelset *w = pn_labelset_without(z, "a", "1"); /* value differs: no-op */
    CHECK(w == z);
    pn_labelset_unref(w);
    w = pn_labelset_without(z, "a", "9");
    CHECK_EQ_INT(pn_labelset_count(w), 1);

    pn_label badkv = {"__x", "1"};
    pn_labels_set_strict(1);
    CHECK(pn_labelset_merge(x, &badkv, 1, &e) == NULL);
    CHECK(strstr(e.msg, "reserved") != NULL);
    pn_labels_set_strict(0);

    pn_labelset_unref(w);
    pn_labelset_unref(z);
    pn_labelset_unref(y);
    pn_labelset_unref(x);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
    CHECK_EQ_INT(pn_labelset_retired(), 0);
}

static void test_label_count_limit(void)
{
    pn_label kv[PN_MAX_LABELS + 1];
    char names[PN_MAX_LABELS + 1][16];
    for (int i = 0; i <= PN_MAX_LABELS; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        kv[i].key = names[i];
        kv[i].value = "v";
    }
    pn_error e;
    pn_labels_set_strict(1);
    CHECK(pn_labelset_merge(NULL, kv, PN_MAX_LABELS + 1, &e) == NULL);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    const pn_labelset *ok = pn_labelset_merge(NULL, kv, PN_MAX_LABELS, &e);
    CHECK(ok != NULL);
    pn_label one_more = {"extra", "v"};
    CHECK(pn_labelset_merge(ok, &one_more, 1, &e) == NULL);
    /* Not strict (the default): the pairs past the limit are dropped and
     * counted, the outer ones stay. */
    pn_labels_set_strict(0);
    uint64_t d0, d1;
    pn_labels_fix_counts(NULL, &d0);
    const pn_labelset *cut = pn_labelset_merge(NULL, kv, PN_MAX_LABELS + 1, &e);
    CHECK(cut != NULL);
    CHECK_EQ_INT(pn_labelset_count(cut), PN_MAX_LABELS);
    const pn_labelset *kept = pn_labelset_merge(ok, &one_more, 1, &e);
    CHECK(kept == ok);
    pn_labels_fix_counts(NULL, &d1);
    CHECK_EQ_INT(d1 - d0, 2);
    pn_labelset_unref(kept);
    pn_labelset_unref(cut);
    pn_labelset_unref(ok);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 0);
}

static void test_push_pop_nesting(void)
{
    pn_error e;
    pid_t me = pn_gettid();
    CHECK_EQ_INT(pn_labelset_count(pn_labels_current()), 0);
    pn_label outer = {"region", "eu"};
    CHECK_EQ_INT(pn_labels_push(&outer, 1, &e), 0);
    CHECK_STR(pn_labelset_get(pn_labels_of_thread(me), "region"), "eu");
    pn_label inner[] = {{"region", "us"}, {"endpoint", "/x"}};
    CHECK_EQ_INT(pn_labels_push(inner, 2, &e), 0);
    CHECK_STR(pn_labelset_get(pn_labels_current(), "region"), "us");
    CHECK_STR(pn_labelset_get(pn_labels_of_thread(me), "endpoint"), "/x");
    CHECK_EQ_INT(pn_labels_depth(), 2);
    /* A failed push (strict labels) leaves everything as it was. */
    pn_label bad = {"bad-key", "x"};
    pn_labels_set_strict(1);
    CHECK_EQ_INT(pn_labels_push(&bad, 1, &e), -1);
    pn_labels_set_strict(0);
    CHECK_EQ_INT(pn_labels_depth(), 2);
    CHECK_EQ_INT(pn_labels_pop(&e), 0);
    CHECK_STR(pn_labelset_get(pn_labels_current(), "region"), "eu");
    CHECK(pn_labelset_get(pn_labels_current(), "endpoint") == NULL);
    CHECK_EQ_INT(pn_labels_pop(&e), 0);
    CHECK_EQ_INT(pn_labelset_count(pn_labels_of_thread(me)), 0);
    CHECK_EQ_INT(pn_labels_pop(&e), -1);
    CHECK_EQ_INT(e.code, PN_ESTATE);

    CHECK_EQ_INT(pn_labels_thread_add("user", "alice", &e), 0);
    CHECK_STR(pn_labelset_get(pn_labels_current(), "user"), "alice");
    pn_labels_set_strict(1);
    CHECK_EQ_INT(pn_labels_thread_add("bad-key", "x", &e), -1);
    pn_labels_set_strict(0);
    CHECK_EQ_INT(pn_labels_thread_remove("user", "bob", &e), 0); /* value differs */
    CHECK_STR(pn_labelset_get(pn_labels_current(), "user"), "alice");
    CHECK_EQ_INT(pn_labels_thread_remove("user", "alice", &e), 0);
    CHECK_EQ_INT(pn_labelset_count(pn_labels_current()), 0);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
    CHECK_EQ_INT(pn_labelset_retired(), 0);
}

typedef struct {
    const char *value;
    pid_t tid;
    pthread_barrier_t *bar;
    int seen_own;
} thread_arg;

static void *labelled_thread(void *p)
{
    thread_arg *a = p;
    a->tid = pn_gettid();
    pn_label kv = {"who", a->value};
    pn_labels_push(&kv, 1, NULL);
    pthread_barrier_wait(a->bar); /* both threads labelled */
    pthread_barrier_wait(a->bar); /* main checked */
    const char *v = pn_labelset_get(pn_labels_current(), "who");
    a->seen_own = v && strcmp(v, a->value) == 0;
    /* Exit without popping: the thread-exit hook must release the set. */
    return NULL;
}

static void test_thread_isolation(void)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    thread_arg a = {"one", 0, &bar, 0}, b = {"two", 0, &bar, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, labelled_thread, &a);
    pthread_create(&tb, NULL, labelled_thread, &b);
    pthread_barrier_wait(&bar);
    CHECK_STR(pn_labelset_get(pn_labels_of_thread(a.tid), "who"), "one");
    CHECK_STR(pn_labelset_get(pn_labels_of_thread(b.tid), "who"), "two");
    CHECK(pn_labelset_get(pn_labels_current(), "who") == NULL);
    pthread_barrier_wait(&bar);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.seen_own && b.seen_own);
    CHECK_EQ_INT(pn_labelset_count(pn_labels_of_thread(a.tid)), 0);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
    CHECK_EQ_INT(pn_labelset_retired(), 0);
    pthread_barrier_destroy(&bar);
}

/* A recording thread loads a set inside its grace section; the set may be
 * released meanwhile (it leaves the intern table at once) but is freed
 * only after the reader has left. */
static void test_reclaim_waits_for_reader(void)
{
    pn_error e;
    pn_grace_reader *r = pn_grace_reader_new(&e);
    CHECK(r != NULL);
    if (!r)
        return;
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 0);
    pn_label kv = {"span_id", "00000000000000ab"};
    CHECK_EQ_INT(pn_labels_push(&kv, 1, &e), 0);
    CHECK_EQ_INT(pn_labelset_live(), 1);

    /* A tick: enter, load the thread's set as a sampler would. */
    pn_grace_enter(r);
    const pn_labelset *ls = pn_labels_of_thread(pn_gettid());
    CHECK(ls == pn_labels_current());
    uint64_t id = pn_labelset_id(ls);
    /* The application drops its last reference meanwhile. */
    CHECK_EQ_INT(pn_labels_pop(&e), 0);
    CHECK_EQ_INT(pn_labelset_live(), 0);    /* out of the intern table */
    CHECK_EQ_INT(pn_labelset_retired(), 1); /* but not freed */
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 1);
    /* Still readable (valgrind would report a read of freed memory). */
    CHECK_STR(pn_labelset_get(ls, "span_id"), "00000000000000ab");
    /* The same contents again: a new set, the retired one is not revived. */
    CHECK_EQ_INT(pn_labels_push(&kv, 1, &e), 0);
    CHECK(pn_labels_current() != ls);
    CHECK(pn_labelset_id(pn_labels_current()) != id);
    CHECK_EQ_INT(pn_labelset_live(), 1);
    CHECK_EQ_INT(pn_labels_pop(&e), 0); /* retired under the reader too */
    CHECK_EQ_INT(pn_labelset_retired(), 2);
    CHECK_STR(pn_labelset_get(ls, "span_id"), "00000000000000ab");
    pn_grace_exit(r);

    /* Freed incrementally: the next release frees passed sets on its way. */
    pn_label other = {"k", "v"};
    CHECK_EQ_INT(pn_labels_push(&other, 1, &e), 0);
    CHECK_EQ_INT(pn_labels_pop(&e), 0);
    CHECK_EQ_INT(pn_labelset_retired(), 0);
    CHECK_EQ_INT(pn_labelset_live(), 0);

    /* A deferred capture: hold an older generation read when it loaded
     * its pointers; sets retired after that stay until it lets go. */
    uint64_t gen = pn_grace_now();
    CHECK_EQ_INT(pn_labels_push(&kv, 1, &e), 0);
    const pn_labelset *held = pn_labels_current();
    pn_grace_hold(r, gen);
    CHECK_EQ_INT(pn_labels_pop(&e), 0);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 1);
    CHECK_STR(pn_labelset_get(held, "span_id"), "00000000000000ab");
    /* A reader entering now does not cover it: only the hold does. */
    pn_grace_exit(r);
    pn_grace_enter(r);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_retired(), 0);
    pn_grace_exit(r);
    pn_grace_reader_free(r);
}

/* Many threads churning labels while a reader samples their slots. */
static volatile int churn_stop;
static _Atomic pid_t churn_tids[4];
static void *churner(void *p)
{
    churn_tids[(long)p] = pn_gettid();
    char v[32];
    for (int i = 0; !churn_stop && i < 5000000; i++) {
        snprintf(v, sizeof v, "%d", i % 50);
        pn_label kv = {"n", v};
        pn_labels_push(&kv, 1, NULL);
        pn_labels_pop(NULL);
    }
    return NULL;
}

static void test_concurrent_churn(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churner, (void *)(long)i);
    for (int k = 0; k < 4; k++)
        while (churn_tids[k] == 0)
            sched_yield();
    long seen = 0;
    pn_grace_reader *r = pn_grace_reader_new(NULL);
    CHECK(r != NULL);
    if (!r)
        churn_stop = 1;
    for (int round = 0; r && (round < 2000 || (seen == 0 && round < 2000000)); round++) {
        pn_grace_enter(r);
        /* Read the churners' slots as the sampler would: every set seen
         * must be whole (one "n" label with a value we wrote). */
        for (int k = 0; k < 4; k++) {
            const pn_labelset *ls = pn_labels_of_thread(churn_tids[k]);
            for (size_t i = 0; i < pn_labelset_count(ls); i++) {
                CHECK(strcmp(pn_labelset_at(ls, i).key, "n") == 0);
                CHECK(atoi(pn_labelset_at(ls, i).value) < 50);
                seen++;
            }
        }
        pn_grace_exit(r);
        pn_labels_reclaim();
        if (seen == 0)
            sched_yield();
    }
    churn_stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(seen > 0);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
    CHECK_EQ_INT(pn_labelset_retired(), 0);
}

/* Request-time labels never fail (strict off, the default): what the server
 * cannot take as given is made valid or dropped, counted. Per-sample values
 * keep { } , = (the server reads them from the pprof string table). */
static void test_request_time_fixes(void)
{
    pn_error e;
    char longv[PN_MAX_LABEL_VALUE + 10];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    longv[PN_MAX_LABEL_VALUE - 1] = '\xc3'; /* a 2-byte character across the cut */
    longv[PN_MAX_LABEL_VALUE] = '\xa9';
    pn_label kv[] = {
        {"user-id", "7"},     {"__name__", "n"}, {"9lives", "cat"}, {"url", "/a?b=c,d{e}"},
        {"empty", ""},        {"none", NULL},    {"", "x"},         {NULL, "x"},
        {"bytes", "a\xff" "b"}, {"long", longv}, {"caf\xc3\xa9", "ok"},
    };
    uint64_t c0, d0, c1, d1;
    pn_labels_fix_counts(&c0, &d0);
    const pn_labelset *ls = pn_labelset_merge(NULL, kv, sizeof kv / sizeof kv[0], &e);
    CHECK(ls != NULL);
    pn_labels_fix_counts(&c1, &d1);
    CHECK_STR(pn_labelset_get(ls, "user_id"), "7");
    CHECK_STR(pn_labelset_get(ls, "_name__"), "n");
    CHECK_STR(pn_labelset_get(ls, "_9lives"), "cat");
    CHECK_STR(pn_labelset_get(ls, "url"), "/a?b=c,d{e}");
    CHECK(pn_labelset_get(ls, "empty") == NULL);
    CHECK(pn_labelset_get(ls, "none") == NULL);
    CHECK_STR(pn_labelset_get(ls, "bytes"), "a\xef\xbf\xbd" "b");
    const char *cut = pn_labelset_get(ls, "long");
    CHECK(cut != NULL && strlen(cut) == PN_MAX_LABEL_VALUE - 1);
    CHECK_STR(pn_labelset_get(ls, "caf_"), "ok");
    CHECK_EQ_INT(pn_labelset_count(ls), 7);
    CHECK_EQ_INT(c1 - c0, 6); /* 4 names, 2 values */
    CHECK_EQ_INT(d1 - d0, 4);
    for (size_t i = 0; i < pn_labelset_count(ls); i++) {
        pn_label l = pn_labelset_at(ls, i);
        CHECK_EQ_INT(pn_label_check_name(l.key, &e), 0);
        CHECK_EQ_INT(pn_label_check_sample_value(l.key, l.value, &e), 0);
    }
    /* Thread tags: added and removed under the same fixed name. */
    CHECK_EQ_INT(pn_labels_thread_add("tenant-id", "acme", &e), 0);
    CHECK_STR(pn_labelset_get(pn_labels_current(), "tenant_id"), "acme");
    CHECK_EQ_INT(pn_labels_thread_add("gone", NULL, &e), 0);
    CHECK_EQ_INT(pn_labels_thread_remove("tenant-id", "acme", &e), 0);
    CHECK_EQ_INT(pn_labelset_count(pn_labels_current()), 0);
    /* Strict: the same inputs fail, naming the label; { } , = still pass. */
    pn_labels_set_strict(1);
    CHECK(pn_labelset_merge(NULL, &kv[0], 1, &e) == NULL);
    CHECK(strstr(e.msg, "user-id") != NULL);
    CHECK(pn_labelset_merge(NULL, &kv[5], 1, &e) == NULL);
    CHECK(strstr(e.msg, "none") != NULL);
    const pn_labelset *url = pn_labelset_merge(NULL, &kv[3], 1, &e);
    CHECK(url != NULL);
    pn_labelset_unref(url);
    pn_labels_set_strict(0);
    pn_labelset_unref(ls);
    pn_labels_reclaim();
    CHECK_EQ_INT(pn_labelset_live(), 0);
}

TEST_MAIN(T(test_name_rules), T(test_value_rules), T(test_interning), T(test_request_time_fixes),
          T(test_label_count_limit), T(test_push_pop_nesting), T(test_thread_isolation),
          T(test_reclaim_waits_for_reader), T(test_concurrent_churn))
