/* A minimal test harness: CHECK* macros record failures with file:line and
 * keep going; TEST_MAIN runs the listed tests and prints the standard closing
 * line "N passed, N failed", exiting non-zero on any failure. */
#ifndef PN_CHECK_H
#define PN_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern int pn_check_failures;   /* failures in the running test */

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                   \
            pn_check_failures++;                                              \
        }                                                                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                    \
    do {                                                                      \
        long long _a = (long long)(a), _b = (long long)(b);                   \
        if (_a != _b) {                                                       \
            fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n",       \
                    __FILE__, __LINE__, #a, #b, _a, _b);                      \
            pn_check_failures++;                                              \
        }                                                                     \
    } while (0)

#define CHECK_STR(a, b)                                                       \
    do {                                                                      \
        const char *_a = (a), *_b = (b);                                      \
        if (!_a || !_b || strcmp(_a, _b) != 0) {                              \
            fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n",   \
                    __FILE__, __LINE__, #a, #b, _a ? _a : "(null)",           \
                    _b ? _b : "(null)");                                      \
            pn_check_failures++;                                              \
        }                                                                     \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} pn_test_case;

/* False under valgrind and sanitizers (PN_TEST_SLOW=1 in the environment):
 * threads are serialised there, so timing-based checks keep only their
 * functional half. */
int pn_test_timing_strict(void);

/* CLOCK_MONOTONIC now, in seconds; and as nanoseconds s seconds from now
 * (the deadlines the exporters take). */
double pn_test_now_s(void);
int64_t pn_test_deadline_ns(double s);

int pn_test_run(const char *suite, const pn_test_case *cases, size_t n);

#define TEST_MAIN(...)                                                        \
    int main(void) {                                                          \
        static const pn_test_case cases[] = {__VA_ARGS__};                    \
        return pn_test_run(__FILE__, cases, sizeof cases / sizeof cases[0]);  \
    }
#define T(fn) {#fn, fn}

#endif
