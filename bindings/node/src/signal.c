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
 * Threads: the ring has one producer, the handler on the main thread (a
 * SIGPROF on any other thread, e.g. a worker's own V8 profiler, is only
 * chained), and one consumer, the main thread between signals (join.c).
 * The handler we chain to lives in one of two slots: install writes the
 * slot not in use (SIGPROF blocked on the main thread), then publishes its
 * index, so a handler running on another thread (a worker's own V8
 * profiler) never reads a half-written one. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addon.h"

static bracket *ring;
static uint64_t ring_cap; /* a power of two; 0: no ring */
static _Atomic uint64_t head; /* producer */
static _Atomic uint64_t tail; /* consumer */
static _Atomic int armed;
/* The main thread, compared with pthread_self() in the handler: glibc reads
 * it from the thread register, where gettid() was a system call per signal
 * (one of the two a sample paid; perf showed ~1-5 us each on this VM). Set
 * on the main thread before the handler is armed. */
static pthread_t main_thread;
static int64_t last_cpu; /* handler-owned */
static struct sigaction prev_slots[2];
static _Atomic int prev_index;
static int installed;
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
    if (!atomic_load_explicit(&armed, memory_order_acquire) ||
        !pthread_equal(pthread_self(), main_thread)) {
        if (atomic_load_explicit(&armed, memory_order_relaxed))
            atomic_fetch_add_explicit(&n_foreign, 1, memory_order_relaxed);
        chain(sig, info, uc);
        errno = saved;
        return;
    }
    bracket b;
    b.gen = pn_grace_generation();
    volatile int32_t *slot = labels_slot;
    b.ctx = slot ? labels_of_handle((uint32_t)slot[0]) : NULL;
    b.span = slot ? labels_of_handle((uint32_t)slot[1]) : NULL;
    b.before_ns = clock_ns(CLOCK_MONOTONIC);
    chain(sig, info, uc);
    b.after_ns = clock_ns(CLOCK_MONOTONIC);
    int64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    b.cpu_ns = cpu - last_cpu;
    last_cpu = cpu;
    uint64_t h = atomic_load_explicit(&head, memory_order_relaxed);
    if (h - atomic_load_explicit(&tail, memory_order_acquire) >= ring_cap) {
        atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
    } else {
        ring[h & (ring_cap - 1)] = b;
        atomic_store_explicit(&head, h + 1, memory_order_release);
        atomic_fetch_add_explicit(&n_recorded, 1, memory_order_relaxed);
    }
    errno = saved;
}

uint64_t signal_head(void) { return atomic_load_explicit(&head, memory_order_acquire); }
uint64_t signal_tail(void) { return atomic_load_explicit(&tail, memory_order_relaxed); }
const bracket *signal_at(uint64_t i) { return &ring[i & (ring_cap - 1)]; }

uint64_t signal_consume(uint64_t i)
{
    if (!ring_cap)
        return 0;
    atomic_store_explicit(&tail, i, memory_order_release);
    uint64_t h = signal_head(), oldest = 0;
    for (uint64_t k = i; k < h; k++) {
        uint64_t g = signal_at(k)->gen;
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
 * was already in front, -1 on error. Main thread. */
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

/* Hand SIGPROF back to the handler we found, if ours is still in front. */
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

/* signalArm(capacity) -> 1 (installed now) | 0 (already in front): after
 * V8's profiler started (it installs its handler then). */
static napi_value m_arm(napi_env env, napi_callback_info info)
{
    napi_value argv[1], r;
    double want = 4096;
    if (js_args(env, info, argv, 1) >= 1)
        js_double(env, argv[0], &want);
    if (!ring) {
        uint64_t cap = 1024;
        while (cap < (uint64_t)want && cap < (1u << 18))
            cap <<= 1;
        ring = pn_pages_new(cap * sizeof *ring);
        if (!ring)
            return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: cannot reserve the sample ring");
        ring_cap = cap;
        main_thread = pthread_self();
    }
    if (!atomic_load(&armed)) {
        last_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        atomic_store(&armed, 1);
    }
    int rc = install();
    if (rc < 0)
        return throw_msg(env, "ERR_PYROSCOPE", "pyroscope: sigaction(SIGPROF): %s",
                         strerror(errno));
    napi_create_int32(env, rc, &r);
    return r;
}

/* signalDisarm(): before V8's profiler stops; brackets stay for the join. */
static napi_value m_disarm(napi_env env, napi_callback_info info)
{
    (void)info;
    atomic_store(&armed, 0);
    uninstall();
    return js_undefined(env);
}

void signal_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "signalArm", m_arm);
    set_fn(env, exports, "signalDisarm", m_disarm);
}
