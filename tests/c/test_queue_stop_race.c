/* A flush waiting on one thread while pn_queue_stop aborts its upload on
 * another must report the upload as not sent (-1). It used to return 0
 * whenever the exporter thread dropped the aborted upload before the
 * flushing thread got the mutex back. Here the flushing thread runs
 * SCHED_IDLE on the one CPU a busy thread keeps taken, so it wakes last in
 * nearly every round: the old code failed about every round, on any load.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "queue_helper.h"
#include "pyroscope_native.h"
#include "export/exporter.h"

static int gate[2];
static pn_queue *q;
static int flush_rc;
static atomic_int calling, hog_stop;

/* Blocks until the queue aborts (the gate is never opened). */
static pn_send_result gated_send(pn_exporter *self, const pn_upload *u, int64_t deadline_ns,
                                 const volatile int *abort, pn_error *e)
{
    (void)self, (void)u, (void)deadline_ns;
    struct pollfd p = {.fd = gate[0], .events = POLLIN};
    while (poll(&p, 1, 1) == 0) {
        if (__atomic_load_n(abort, __ATOMIC_ACQUIRE)) {
            pn_fail(e, PN_EIO, "aborted");
            return PN_SEND_RETRY;
        }
    }
    return PN_SEND_OK;
}

static void no_destroy(pn_exporter *self) { (void)self; }

static void *flusher(void *arg)
{
    (void)arg;
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    atomic_store(&calling, 1);
    flush_rc = pn_queue_flush(q, 60);
    return NULL;
}

static void *hog(void *arg)
{
    (void)arg;
    while (!atomic_load(&hog_stop))
        ;
    return NULL;
}

static void test_flush_during_stop_reports_the_abort(void)
{
    cpu_set_t one, all;
    sched_getaffinity(0, sizeof all, &all);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    sched_setaffinity(0, sizeof one, &one); /* threads created below inherit it */
    pn_log_set_level(PN_LOG_OFF);
    int zero = 0;
    const int rounds = 10;
    for (int round = 0; round < rounds; round++) {
        CHECK_EQ_INT(pipe(gate), 0);
        pn_exporter x = {.name = "gated", .encode = qh_payload_encode, .send = gated_send,
                         .destroy = no_destroy};
        pn_exporter *xs[] = {&x};
        q = pn_queue_new(NULL, xs, 1, NULL);
        CHECK(q != NULL);
        pn_queue_push(q, qh_sized_profile("A", 1, 10));
        atomic_store(&calling, 0);
        atomic_store(&hog_stop, 0);
        pthread_t f, h;
        pthread_create(&f, NULL, flusher, NULL);
        while (!atomic_load(&calling))
            usleep(1000);
        usleep(50000); /* the flusher is waiting inside pn_queue_flush */
        pthread_create(&h, NULL, hog, NULL);
        pn_queue_stop(q, 0.05);
        atomic_store(&hog_stop, 1);
        pthread_join(h, NULL);
        pthread_join(f, NULL);
        zero += flush_rc == 0;
        close(gate[0]);
        close(gate[1]);
    }
    sched_setaffinity(0, sizeof all, &all);
    pn_log_set_level(PN_LOG_WARN);
    printf("  flush during stop returned 0 in %d of %d rounds\n", zero, rounds);
    CHECK_EQ_INT(zero, 0);
}

TEST_MAIN(T(test_flush_during_stop_reports_the_abort))
