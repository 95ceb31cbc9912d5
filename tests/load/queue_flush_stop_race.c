/* Reproduces a race in core/src/export/queue.c (not part of `make test`):
 * a pn_queue_flush waiting on one thread while pn_queue_stop runs on
 * another should return -1 (its upload was aborted, not sent), but returns
 * 0 whenever the exporter thread drops the aborted upload and clears
 * `inflight` before the flushing thread gets the mutex back: the flush
 * loop only looks at `stopping` while something is still pending.
 * test_queue's test_stop_while_another_thread_flushes hits it now and then
 * on a loaded machine; here the flushing thread runs SCHED_IDLE on a CPU a
 * busy thread keeps taken, so it nearly always wakes last.
 *
 *   make build && gcc -std=c11 -D_GNU_SOURCE -O1 -pthread -Icore/include -Icore/src \
 *       tests/load/queue_flush_stop_race.c build/libpyroscope_core.a \
 *       -lcurl -lz -ldl -lm -o build/queue_flush_stop_race && build/queue_flush_stop_race
 *
 * Prints how many of 20 rounds saw 0 and -1, exits 1 when any saw 0.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    flush_rc = pn_queue_flush(q, 10);
    return NULL;
}

static void *hog(void *arg)
{
    (void)arg;
    while (!atomic_load(&hog_stop))
        ;
    return NULL;
}

int main(void)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one); /* threads created below inherit it */
    pn_log_set_level(PN_LOG_OFF);
    int zero = 0, minus_one = 0;
    for (int round = 0; round < 20; round++) {
        if (pipe(gate) != 0)
            return 2;
        pn_exporter x = {.name = "gated", .send = gated_send, .destroy = no_destroy};
        pn_exporter *xs[] = {&x};
        q = pn_queue_new(NULL, xs, 1, NULL);
        pn_upload *u = calloc(1, sizeof *u);
        u->app_name = strdup("A");
        u->profile_type = strdup("cpu");
        u->data = malloc(1);
        u->len = 1;
        pn_queue_push(q, u);
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
        if (flush_rc == 0)
            zero++;
        else
            minus_one++;
        close(gate[0]);
        close(gate[1]);
    }
    printf("flush during stop returned 0 in %d of 20 rounds, -1 in %d\n", zero, minus_one);
    return zero ? 1 : 0;
}
