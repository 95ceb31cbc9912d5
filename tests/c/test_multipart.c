/* The multipart/form-data body: its exact bytes, and a boundary that never
 * occurs in the data (a fixed random sequence forces collisions). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "export/multipart.h"

/* Hands out seq[0], seq[1], ... then repeats the last one. */
typedef struct {
    const uint64_t *seq;
    size_t n, next;
} fixed_random;

static uint64_t next_fixed(void *ud)
{
    fixed_random *f = ud;
    uint64_t v = f->seq[f->next < f->n ? f->next : f->n - 1];
    f->next++;
    return v;
}

static void test_body_bytes(void)
{
    static const uint8_t data[] = "\x01\x02profile bytes\r\n--not-a-boundary\r\n";
    pn_multipart m;
    pn_error e;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_multipart_init(&m, "profile", "profile.pprof", "application/octet-stream", data,
                                   sizeof data - 1, NULL, NULL, &e), 0);
    CHECK_STR(e.msg, "");
    size_t bl = strlen(m.boundary);
    CHECK_EQ_INT(bl, 40);
    CHECK(strncmp(m.boundary, "pyroscope-", 10) == 0);
    for (size_t i = 10; i < bl; i++) {
        char c = m.boundary[i];
        CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
    }
    char want[512];
    snprintf(want, sizeof want, "multipart/form-data; boundary=%s", m.boundary);
    CHECK_STR(m.content_type, want);
    snprintf(want, sizeof want,
             "--%s\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n",
             m.boundary);
    CHECK_EQ_INT(m.head_len, strlen(want));
    CHECK(m.head_len == strlen(want) && memcmp(m.head, want, m.head_len) == 0);
    snprintf(want, sizeof want, "\r\n--%s--\r\n", m.boundary);
    CHECK_EQ_INT(m.tail_len, strlen(want));
    CHECK(m.tail_len == strlen(want) && memcmp(m.tail, want, m.tail_len) == 0);

    /* Two bodies get different boundaries. */
    pn_multipart m2;
    CHECK_EQ_INT(pn_multipart_init(&m2, "profile", "p", "t/t", data, sizeof data - 1, NULL, NULL, &e), 0);
    CHECK(strcmp(m.boundary, m2.boundary) != 0);
}

static void test_boundary_avoids_data(void)
{
    /* The first candidate is planted in the data: the second is used. */
    static const uint64_t seq[] = {1, 2, 3, 4, 5, 6};
    fixed_random r = {seq, 6, 0};
    pn_multipart first;
    pn_error e;
    CHECK_EQ_INT(pn_multipart_init(&first, "profile", "f", "t/t", (const uint8_t *)"", 0, next_fixed, &r, &e), 0);
    CHECK_EQ_INT(r.next, 3);

    uint8_t data[200];
    memset(data, 'x', sizeof data);
    memcpy(data + 50, first.boundary, strlen(first.boundary));
    r.next = 0;
    pn_multipart m;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_multipart_init(&m, "profile", "f", "t/t", data, sizeof data, next_fixed, &r, &e), 0);
    CHECK_EQ_INT(r.next, 6);
    CHECK(strcmp(m.boundary, first.boundary) != 0);
    CHECK(memmem(data, sizeof data, m.boundary, strlen(m.boundary)) == NULL);

    /* A source stuck on one value: a clear error, not a body that breaks. */
    static const uint64_t stuck[] = {7};
    fixed_random s = {stuck, 1, 0};
    pn_multipart probe;
    CHECK_EQ_INT(pn_multipart_init(&probe, "profile", "f", "t/t", data, 0, next_fixed, &s, &e), 0);
    memcpy(data + 100, probe.boundary, strlen(probe.boundary));
    s.next = 0;
    pn_error_clear(&e);
    CHECK_EQ_INT(pn_multipart_init(&m, "profile", "f", "t/t", data, sizeof data, next_fixed, &s, &e), -1);
    CHECK_EQ_INT(e.code, PN_ELIMIT);
    CHECK(strstr(e.msg, "boundar") != NULL);
}

static void test_bad_names(void)
{
    pn_multipart m;
    pn_error e;
    const uint8_t d[1] = {0};
    CHECK_EQ_INT(pn_multipart_init(&m, "pro\"file", "f", "t/t", d, 1, NULL, NULL, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_EQ_INT(pn_multipart_init(&m, "profile", "a\r\nb", "t/t", d, 1, NULL, NULL, &e), -1);
    CHECK_EQ_INT(pn_multipart_init(&m, "profile", "f", "", d, 1, NULL, NULL, &e), -1);
    CHECK_EQ_INT(pn_multipart_init(&m, "profile", "f", "t/t", NULL, 1, NULL, NULL, &e), -1);
}

TEST_MAIN(T(test_body_bytes), T(test_boundary_avoids_data), T(test_bad_names))
