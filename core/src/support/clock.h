/* Internal: clock readings as int64 nanoseconds, and back to timespec for
 * the absolute-time waits (condvars on CLOCK_MONOTONIC, clock_nanosleep). */
#ifndef PN_CLOCK_H
#define PN_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t pn_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline struct timespec pn_timespec(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

#endif
