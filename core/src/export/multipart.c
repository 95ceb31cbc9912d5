/* The multipart/form-data body of one file part (see multipart.h). */
#include "export/multipart.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "support/clock.h"

#define BOUNDARY_PREFIX "pyroscope-"
#define RANDOM_WORDS 3          /* 3 x 10 base-62 digits, about 178 bits */
#define MAX_TRIES 16

static const char DIGITS[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* splitmix64 over the clock: only if getrandom() is unavailable. The
 * boundary need not be secret, only unlikely in the data, and that is
 * checked anyway. */
static uint64_t fallback_random(void)
{
    /* Any thread; a lost update only repeats a value, which the absence
     * check then rejects. */
    static uint64_t counter;
    uint64_t z = (uint64_t)pn_clock_ns(CLOCK_MONOTONIC) +
                 __atomic_add_fetch(&counter, 0x9e3779b97f4a7c15ULL, __ATOMIC_RELAXED);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t system_random(void *ud)
{
    (void)ud;
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    return fallback_random();
}

static int bad_token(const char *s)
{
    if (!s || !*s)
        return 1;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '"' || *s == '\\')
            return 1;
    return 0;
}

static void make_boundary(char *out, pn_random64_fn rnd, void *ud)
{
    size_t j = strlen(BOUNDARY_PREFIX);
    memcpy(out, BOUNDARY_PREFIX, j);
    for (int w = 0; w < RANDOM_WORDS; w++) {
        uint64_t v = rnd(ud);
        for (int d = 0; d < 10; d++) {
            out[j++] = DIGITS[v % 62];
            v /= 62;
        }
    }
    out[j] = '\0';
}

int pn_multipart_init(pn_multipart *m, const char *name, const char *filename,
                      const char *part_type, const uint8_t *data, size_t len,
                      pn_random64_fn rnd, void *ud, pn_error *e)
{
    if (!m || (!data && len))
        return pn_fail(e, PN_EINVAL, "multipart body: no output or no data");
    if (bad_token(name) || bad_token(filename) || bad_token(part_type))
        return pn_fail(e, PN_EINVAL,
                       "multipart body: part name, filename and type must be non-empty, without quotes, "
                       "backslashes or control characters");
    if (!rnd)
        rnd = system_random;
    int found = 0;
    for (int i = 0; i < MAX_TRIES && !found; i++) {
        make_boundary(m->boundary, rnd, ud);
        found = len == 0 || !memmem(data, len, m->boundary, strlen(m->boundary));
    }
    if (!found)
        return pn_fail(e, PN_ELIMIT,
                       "multipart body: every one of %d random boundaries occurs in the %zu-byte profile "
                       "(is the random source broken?)",
                       MAX_TRIES, len);
    int n = snprintf(m->content_type, sizeof m->content_type, "multipart/form-data; boundary=%s",
                     m->boundary);
    int h = snprintf(m->head, sizeof m->head,
                     "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                     "Content-Type: %s\r\n\r\n",
                     m->boundary, name, filename, part_type);
    int t = snprintf(m->tail, sizeof m->tail, "\r\n--%s--\r\n", m->boundary);
    if (n < 0 || (size_t)n >= sizeof m->content_type || h < 0 || (size_t)h >= sizeof m->head || t < 0 ||
        (size_t)t >= sizeof m->tail)
        return pn_fail(e, PN_EINVAL, "multipart body: the part's name, filename and type are too long");
    m->head_len = (size_t)h;
    m->tail_len = (size_t)t;
    return 0;
}
