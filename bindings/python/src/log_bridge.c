/* See log_bridge.h. */
#include "log_bridge.h"
#include "module_lock.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "pyroscope_native.h"

#define RING 256
#define MSG_MAX 512

typedef struct {
    int level;
    double created; /* CLOCK_REALTIME seconds when the core logged */
    char msg[MSG_MAX];
} entry;

/* The ring: written by any thread under ring_lock (which guards nothing
 * else and is never held while calling out), drained by a GIL holder of
 * the main interpreter. ring_cv wakes the delivery thread. */
static entry ring[RING];
static size_t ring_head, ring_len;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cv = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t dropped, dropped_reported;
/* Under ring_lock: the delivery thread exists / has been asked to end. */
static int deliverer_running, deliverer_quit;
/* Written by GIL holders (start, close, fork child); joined by close. */
static pthread_t deliverer;
/* GIL-protected (module_lock.h): the Python callable, a strong reference. */
static PyObject *sink;

static void fork_prepare(void) { pthread_mutex_lock(&ring_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&ring_lock); }

/* In the child only the forking thread lives: fresh lock and condvar, no
 * delivery thread (log_bridge_after_fork starts one once the interpreter
 * has re-made its own state). */
static void fork_child(void)
{
    pthread_mutex_init(&ring_lock, NULL);
    pthread_cond_init(&ring_cv, NULL);
    deliverer_running = 0;
    deliverer_quit = 0;
}

/* Core handler: any thread, GIL or not; never waits for the GIL. */
static void on_log(void *ud, int level, const char *msg)
{
    (void)ud;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pthread_mutex_lock(&ring_lock);
    if (ring_len == RING) {
        ring_head = (ring_head + 1) % RING; /* drop the oldest, counted and reported */
        ring_len--;
        atomic_fetch_add(&dropped, 1);
    }
    entry *en = &ring[(ring_head + ring_len) % RING];
    en->level = level;
    en->created = (double)now.tv_sec + now.tv_nsec / 1e9;
    snprintf(en->msg, sizeof en->msg, "%s", msg);
    ring_len++;
    pthread_cond_signal(&ring_cv);
    pthread_mutex_unlock(&ring_lock);
}

static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* The delivery thread: waits for messages and hands them to logging under
 * the GIL, so they arrive when the core logged them even while the main
 * thread sits in join() or a C call. It never takes the GIL once the
 * interpreter is finalizing (log_bridge_close joins it before that). */
static void *deliver_main(void *unused)
{
    (void)unused; /* signals blocked (pn_thread_spawn): they are the main thread's */
    pthread_mutex_lock(&ring_lock);
    for (;;) {
        while (!deliverer_quit && ring_len == 0 &&
               atomic_load(&dropped) == atomic_load(&dropped_reported))
            pthread_cond_wait(&ring_cv, &ring_lock);
        if (deliverer_quit)
            break;
        pthread_mutex_unlock(&ring_lock);
        if (finalizing()) {
            pthread_mutex_lock(&ring_lock);
            break;
        }
        PyGILState_STATE g = PyGILState_Ensure();
        log_bridge_drain();
        PyGILState_Release(g);
        pthread_mutex_lock(&ring_lock);
    }
    pthread_mutex_unlock(&ring_lock);
    return NULL;
}

/* GIL held. Starts the delivery thread when none runs. */
static void start_deliverer(void)
{
    pthread_mutex_lock(&ring_lock);
    int start = !deliverer_running;
    deliverer_running = 1;
    deliverer_quit = 0;
    pthread_mutex_unlock(&ring_lock);
    if (!start)
        return;
    int rc = pn_thread_spawn(&deliverer, deliver_main, NULL, "pyroscope-log");
    if (rc != 0) {
        pthread_mutex_lock(&ring_lock);
        deliverer_running = 0;
        pthread_mutex_unlock(&ring_lock);
        fprintf(stderr, "pyroscope: cannot start the log thread (%s); core messages reach "
                "logging when pyroscope is next called\n", strerror(rc));
        return;
    }
}

/* GIL held. Ends the delivery thread and waits for it (without the GIL,
 * which it may be waiting for). */
static void stop_deliverer(void)
{
    pthread_mutex_lock(&ring_lock);
    int running = deliverer_running;
    deliverer_quit = 1;
    deliverer_running = 0;
    pthread_cond_signal(&ring_cv);
    pthread_mutex_unlock(&ring_lock);
    if (!running)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_join(deliverer, NULL);
    Py_END_ALLOW_THREADS
}

int log_bridge_set_sink(PyObject *s)
{
    static int once;
    if (!once) {
        /* Outermost in the core's one fork path. */
        pn_fork_hook(fork_prepare, fork_parent, fork_child);
        once = 1;
    }
    Py_XINCREF(s == Py_None ? NULL : s);
    Py_XSETREF(sink, s == Py_None ? NULL : s);
    pn_log_set_handler(on_log, NULL);
    start_deliverer();
    return 0;
}

void log_bridge_after_fork(void)
{
    if (sink)
        start_deliverer();
}

static void emit(int level, const char *msg, double created)
{
    if (!sink) {
        fprintf(stderr, "pyroscope: %s\n", msg);
        return;
    }
    /* Our own reference: the call may let another thread replace the sink. */
    PyObject *s = sink;
    Py_INCREF(s);
    /* A server's message may not be UTF-8: replace, never lose the line. */
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    PyObject *r = text ? PyObject_CallFunction(s, "iOd", level, text, created) : NULL;
    Py_XDECREF(text);
    if (r)
        Py_DECREF(r);
    else
        PyErr_WriteUnraisable(s);
    Py_DECREF(s);
}

void log_bridge_drain(void)
{
    /* The sink is an object of the main interpreter. */
    if (PyInterpreterState_Get() != PyInterpreterState_Main())
        return;
    module_lock l;
    module_lock_begin(&l);
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
        emit(en.level, en.msg, en.created);
    }
    uint64_t d = atomic_load(&dropped), r = atomic_load(&dropped_reported);
    if (d != r) {
        char msg[128];
        snprintf(msg, sizeof msg, "%llu log messages were dropped (more than %d waiting)",
                 (unsigned long long)(d - r), RING);
        atomic_store(&dropped_reported, d);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        emit(PN_LOG_WARN, msg, (double)now.tv_sec + now.tv_nsec / 1e9);
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(et, ev, tb);
#endif
    module_lock_end(&l);
}

void log_bridge_close(void)
{
    stop_deliverer();
    log_bridge_drain();
    pn_log_set_handler(NULL, NULL);
    Py_CLEAR(sink);
}

uint64_t log_bridge_dropped(void) { return atomic_load(&dropped); }
