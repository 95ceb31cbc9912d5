/* See log_bridge.h. */
#include "log_bridge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "pyroscope_native.h"

#define RING 256
#define MSG_MAX 512

typedef struct {
    int level;
    char msg[MSG_MAX];
} entry;

/* The ring: written by any thread under ring_lock (which guards nothing
 * else and is never held while calling out), drained by a GIL holder. */
static entry ring[RING];
static size_t ring_head, ring_len;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t dropped, dropped_reported;
/* 1 while a pending call is queued, so a burst schedules one drain. */
static atomic_int drain_scheduled;
/* 0 once the interpreter is going away: no more pending calls. */
static atomic_int accepting;
/* GIL-protected: the Python callable, a strong reference. */
static PyObject *sink;

static void fork_prepare(void) { pthread_mutex_lock(&ring_lock); }
static void fork_release(void) { pthread_mutex_unlock(&ring_lock); }

static int drain_pending(void *unused)
{
    (void)unused;
    atomic_store(&drain_scheduled, 0);
    log_bridge_drain();
    return 0;
}

/* Core handler: any thread, GIL or not. */
static void on_log(void *ud, int level, const char *msg)
{
    (void)ud;
    pthread_mutex_lock(&ring_lock);
    if (ring_len == RING) {
        ring_head = (ring_head + 1) % RING; /* drop the oldest */
        ring_len--;
        atomic_fetch_add(&dropped, 1);
    }
    entry *en = &ring[(ring_head + ring_len) % RING];
    en->level = level;
    snprintf(en->msg, sizeof en->msg, "%s", msg);
    ring_len++;
    pthread_mutex_unlock(&ring_lock);
    if (atomic_load(&accepting) && !atomic_exchange(&drain_scheduled, 1)) {
        if (Py_AddPendingCall(drain_pending, NULL) != 0)
            atomic_store(&drain_scheduled, 0); /* queue full: the next API call drains */
    }
}

int log_bridge_set_sink(PyObject *s)
{
    static int once;
    if (!once) {
        /* Outermost in the core's one fork path. */
        pn_fork_hook(fork_prepare, fork_release, fork_release);
        once = 1;
    }
    Py_XINCREF(s == Py_None ? NULL : s);
    Py_XSETREF(sink, s == Py_None ? NULL : s);
    atomic_store(&accepting, 1);
    pn_log_set_handler(on_log, NULL);
    return 0;
}

static void emit(int level, const char *msg)
{
    if (!sink) {
        fprintf(stderr, "pyroscope: %s\n", msg);
        return;
    }
    PyObject *r = PyObject_CallFunction(sink, "is", level, msg);
    if (r)
        Py_DECREF(r);
    else
        PyErr_WriteUnraisable(sink);
}

void log_bridge_drain(void)
{
    /* Keep an exception the caller is raising intact. */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
#endif
    for (;;) {
        entry en;
        pthread_mutex_lock(&ring_lock);
        int have = ring_len > 0;
        if (have) {
            en = ring[ring_head];
            ring_head = (ring_head + 1) % RING;
            ring_len--;
        }
        pthread_mutex_unlock(&ring_lock);
        if (!have)
            break;
        emit(en.level, en.msg);
    }
    uint64_t d = atomic_load(&dropped), r = atomic_load(&dropped_reported);
    if (d != r) {
        char msg[128];
        snprintf(msg, sizeof msg, "%llu log messages were dropped (more than %d waiting)",
                 (unsigned long long)(d - r), RING);
        atomic_store(&dropped_reported, d);
        emit(PN_LOG_WARN, msg);
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(et, ev, tb);
#endif
}

void log_bridge_close(void)
{
    atomic_store(&accepting, 0);
    log_bridge_drain();
    pn_log_set_handler(NULL, NULL);
    Py_CLEAR(sink);
}

uint64_t log_bridge_dropped(void) { return atomic_load(&dropped); }
