/* The series tags of the Pyroscope upload: the Grafana SDKs' otel.scope.*
 * and process.runtime.* added to the user's tags, a user's tag of the same
 * name winning (issue 28, section 3). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "export/series_tags.h"

static const char *value_of(const pn_label *t, size_t n, const char *key)
{
    const char *v = NULL;
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].key, key) == 0)
            v = t[i].value, seen++;
    CHECK(seen <= 1); /* never twice */
    return v;
}

/* The tags for these inputs into *t (free() it); their number. */
static size_t series(const pn_label *user, size_t nuser, const char *rt, const char *rv,
                     pn_label **t)
{
    size_t n = 0;
    *t = NULL;
    CHECK_EQ_INT(pn_series_tags(user, nuser, rt, rv, t, &n), 0);
    return n;
}

static void test_added(void)
{
    pn_label user[] = {{"env", "prod"}};
    pn_label *t;
    size_t n = series(user, 1, "nodejs", "20.11.1", &t);
    CHECK_EQ_INT(n, 5);
    CHECK_STR(value_of(t, n, "env"), "prod");
    CHECK_STR(value_of(t, n, "otel.scope.name"), "pyroscope-native/nodejs");
    CHECK_STR(value_of(t, n, "otel.scope.version"), PN_SDK_VERSION);
    CHECK_STR(value_of(t, n, "process.runtime.name"), "nodejs");
    CHECK_STR(value_of(t, n, "process.runtime.version"), "20.11.1");
    free(t);

    n = series(NULL, 0, "cpython", "3.12.1", &t);
    CHECK_STR(value_of(t, n, "otel.scope.name"), "pyroscope-native/python");
    free(t);
    n = series(NULL, 0, "ruby", "3.1.2", &t);
    CHECK_STR(value_of(t, n, "otel.scope.name"), "pyroscope-native/ruby");
    free(t);
}

static void test_user_wins_and_unsendable_skipped(void)
{
    pn_label user[] = {{"process.runtime.version", "pinned"}, {"otel.scope.name", "mine"}};
    pn_label *t;
    size_t n = series(user, 2, "ruby", "3.4.0", &t);
    CHECK_EQ_INT(n, 4);
    CHECK_STR(value_of(t, n, "process.runtime.version"), "pinned");
    CHECK_STR(value_of(t, n, "otel.scope.name"), "mine");
    CHECK_STR(value_of(t, n, "process.runtime.name"), "ruby");
    free(t);

    /* Unknown runtime: no scope name; no version or one `name=` cannot
     * carry: not sent (the upload must not fail for it). */
    n = series(NULL, 0, "lua", "5,4", &t);
    CHECK(value_of(t, n, "otel.scope.name") == NULL);
    CHECK(value_of(t, n, "process.runtime.version") == NULL);
    CHECK_STR(value_of(t, n, "process.runtime.name"), "lua");
    free(t);
    CHECK_EQ_INT(series(NULL, 0, NULL, NULL, &t), 1); /* our scope version only */
    free(t);
}

TEST_MAIN(T(test_added), T(test_user_wins_and_unsendable_skipped))
