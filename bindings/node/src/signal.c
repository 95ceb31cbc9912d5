/* The SIGPROF chain: our handler runs in front of V8's, records a bracket
 * {CLOCK_MONOTONIC before/after V8's handler, thread CPU delta, the label
 * sets of the published slot, the grace generation} into a preallocated
 * ring, and calls V8's handler (which takes the sample) in between.
 *
 * The handler calls no V8/Node function, allocates nothing and takes no
 * lock: clock_gettime, pthread_self, atomic loads and stores, and the
 * saved handler.
 * It never saves itself as the previous handler (install checks first).
 *
 * Threads: each JS thread (threads.c) has its own ring, with one producer,
 * the handler interrupting that thread, and one consumer, that thread
 * between signals (join.c). A SIGPROF on a thread that is not armed (a
 * worker that does not profile, a libuv thread) is only chained. Rings
 * are never freed: a worker's entry, and its ring, go to the next worker
 * (reset on the gone worker's own thread, signal_release).
 * The handler we chain to lives in one of two slots: install writes the
 * slot not in use (SIGPROF blocked on this thread, installs serialised by
 * the addon lock), then publishes its index, so a handler running on
 * another thread never reads a half-written one. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addon.h"

typedef struct {
    bracket *ring;
    uint64_t cap;               /* a power of two; 0: no ring yet */
    _Atomic uint64_t head;      /* producer: the handler on this thread */
    _Atomic uint64_t tail;      /* consumer: this thread */
    _Atomic int armed;
    int64_t last_cpu;           /* handler-owned */
} thread_ring;

static thread_ring rings[THREADS_MAX];
static _Atomic int n_armed;     /* threads armed (the handler stays while > 0) */
static struct sigaction prev_slots[2];
static _Atomic int prev_index;
static int installed;           /* addon lock */
static _Atomic uint64_t n_recorded, n_dropped, n_foreign;

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void chain(int sig, siginfo_t *info, void *uc)
{
    const struct sigaction *prev = &prev_slots[atomic_load_explicit(&prev_index,
                                                                    memory_order_acquire)];
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction)
            prev->sa_sigaction(sig, info, uc);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN && prev->sa_handler) {
        prev->sa_handler(sig);
    }
}

static void on_sigprof(int sig, siginfo_t *info, void *uc)
{
    int saved = errno;
    int t = atomic_load_explicit(&n_armed, memory_order_acquire) ? threads_self() : -1;
    thread_ring *r = t >= 0 ? &rings[t] : NULL;
    if (!r || !atomic_load_explicit(&r->armed, memory_order_acquire)) {
        if (atomic_load_explicit(&n_armed, memory_order_relaxed))
            atomic_fetch_add_explicit(&n_foreign, 1, memory_order_relaxed);
        chain(sig, info, uc);
        errno = saved;
        return;
    }
    bracket b;
    b.gen = pn_grace_generation();
    volatile int32_t *slot = labels_cells(t);
    b.ctx = slot ? labels_of_handle((uint32_t)slot[0]) : NULL;
    b.span = slot ? labels_of_handle((uint32_t)slot[1]) : NULL;
    b.before_ns = clock_ns(CLOCK_MONOTONIC);
    chain(sig, info, uc);
    b.after_ns = clock_ns(CLOCK_MONOTONIC);
    int64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    b.cpu_ns = cpu - r->last_cpu;
    r->last_cpu = cpu;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= r->cap) {
        atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
    } else {
        r->ring[h & (r->cap - 1)] = b;
        atomic_store_explicit(&r->head, h + 1, memory_order_release);
        atomic_fetch_add_explicit(&n_recorded, 1, memory_order_relaxed);
    }
    errno = saved;
}

uint64_t signal_head(int t) { return atomic_load_explicit(&rings[t].head, memory_order_acquire); }
uint64_t signal_tail(int t) { return atomic_load_explicit(&rings[t].tail, memory_order_relaxed); }
const bracket *signal_at(int t, uint64_t i) { return &rings[t].ring[i & (rings[t].cap - 1)]; }

uint64_t signal_consume(int t, uint64_t i)
{
    if (t < 0 || !rings[t].cap)
        return 0;
    atomic_store_explicit(&rings[t].tail, i, memory_order_release);
    uint64_t h = signal_head(t), oldest = 0;
    for (uint64_t k = i; k < h; k++) {
        uint64_t g = signal_at(t, k)->gen;
        if (g && (!oldest || g < oldest))
            oldest = g;
    }
    return oldest;
}

void signal_counts(uint64_t *recorded, uint64_t *dropped, uint64_t *foreign)
{
    *recorded = atomic_load(&n_recorded);
    *dropped = atomic_load(&n_dropped);
    *foreign = atomic_load(&n_foreign);
}

/* Put our handler in front of whatever SIGPROF handler is there now (V8's,
 * once its profiler runs). Returns 1 when it (re)installed, 0 when ours
 * was already in front, -1 on error. Addon lock held. */
static int install(void)
{
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) != 0)
        return -1;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigprof)
        return 0;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int next = !atomic_load(&prev_index);
    prev_slots[next] = cur; /* never ourselves: checked above */
    atomic_store_explicit(&prev_index, next, memory_order_release);
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigprof;
    ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    int rc = sigaction(SIGPROF, &ours, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    installed = 1;
    return 1;
}

/* Hand SIGPROF back to the handler we found, if ours is still in front.
 * Addon lock held. */
static void uninstall(void)
{
    if (!installed)
        return;
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_sigprof)
        sigaction(SIGPROF, &prev_slots[atomic_load(&prev_index)], NULL);
    installed = 0;
}

/* This thread stops feeding its ring; the handler goes once no thread is
 * armed. Addon lock held. */
static void disarm(int t)
{
    if (atomic_exchange(&rings[t].armed, 0) && atomic_fetch_sub(&n_armed, 1) == 1)
        uninstall();
}

/* signalArm(capacity) -> 1 (installed now) | 0 (already in front): after
 * V8's profiler started on this thread (it installs its handler then). */
static napi_value m_arm(napi_env env, napi_callback_info info)
{
    napi_value argv[1], r;
    double want = 4096;
    if (js_args(env, info, argv, 1) >= 1)
        js_double(env, argv[0], &want);
    int t = env_thread(env);
    if (t < 0)
        return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: this thread has no entry (more than "
                         "%d JS threads)", THREADS_MAX);
    thread_ring *tr = &rings[t];
    if (!tr->ring) {
        uint64_t cap = 1024;
        while (cap < (uint64_t)want && cap < (1u << 18))
            cap <<= 1;
        tr->ring = pn_pages_new(cap * sizeof *tr->ring);
        if (!tr->ring)
            return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: cannot reserve the sample ring");
        tr->cap = cap;
    }
    addon_lock();
    if (!atomic_load(&tr->armed)) {
        tr->last_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        atomic_store(&tr->armed, 1);
        atomic_fetch_add(&n_armed, 1);
    }
    int rc = install();
    addon_unlock();
    if (rc < 0)
        return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: sigaction(SIGPROF): %s",
                         strerror(errno));
    napi_create_int32(env, rc, &r);
    return r;
}

/* signalDisarm(): before V8's profiler of this thread stops; brackets stay
 * for the join. */
static napi_value m_disarm(napi_env env, napi_callback_info info)
{
    (void)info;
    int t = env_thread(env);
    if (t >= 0) {
        addon_lock();
        disarm(t);
        addon_unlock();
    }
    return js_undefined(env);
}

void signal_release(int t)
{
    addon_lock();
    disarm(t);
    addon_unlock();
    thread_ring *tr = &rings[t];
    atomic_store(&tr->tail, atomic_load(&tr->head));
}

void signal_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "signalArm", m_arm);
    set_fn(env, exports, "signalDisarm", m_disarm);
}
