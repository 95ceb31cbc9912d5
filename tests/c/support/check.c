#include "check.h"

#include <stdlib.h>
#include <time.h>

int pn_check_failures;

int pn_test_timing_strict(void)
{
    const char *v = getenv("PN_TEST_SLOW");
    return !(v && v[0] && v[0] != '0');
}

int pn_test_run(const char *suite, const pn_test_case *cases, size_t n)
{
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pn_check_failures = 0;
        cases[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        if (pn_check_failures) {
            failed++;
            printf("FAIL %s (%.0f ms)\n", cases[i].name, ms);
        } else {
            passed++;
            printf("ok   %s (%.0f ms)\n", cases[i].name, ms);
        }
        fflush(stdout);
    }
    printf("%s: %d passed, %d failed\n", suite, passed, failed);
    return failed ? 1 : 0;
}

double pn_test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int64_t pn_test_deadline_ns(double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + (int64_t)(s * 1e9);
}
