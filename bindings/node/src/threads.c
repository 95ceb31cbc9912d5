/* The JS threads that loaded the addon: the main thread and each worker
 * thread (its own isolate and Node environment). Each environment takes an
 * entry at module init (addon.c) and gives it back from its cleanup hook,
 * which Node runs on that same thread before the isolate is disposed, so
 * nothing of a gone worker is read after it (its ring, label cells and
 * join state are reset on its own thread, see threads_release's callers).
 *
 * Threads: an entry is claimed, filled, published and released by its own
 * thread. The SIGPROF handler (any thread) finds the entry of the thread
 * it interrupts by comparing pthread_self() with the published owners:
 * atomic loads only, no lock, no allocation (thread-local storage in a
 * dlopen'ed object may allocate on first use, so it is not used). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "addon.h"

enum { FREE, CLAIMED, LIVE };

typedef struct {
    _Atomic int state;
    _Atomic(pthread_t) self;
    uint64_t tid;   /* OS thread id (the owner's; report_thread_id) */
    char name[64];  /* thread_name label; the owner writes and reads it */
} entry;

static entry ents[THREADS_MAX];
static _Atomic int high;            /* entries [0, high) were ever claimed */
static _Atomic uint64_t n_full;     /* environments that found no free entry */
static _Atomic uint64_t n_registered, n_released;

int threads_register(const char *name)
{
    for (int i = 0; i < THREADS_MAX; i++) {
        int want = FREE;
        if (!atomic_compare_exchange_strong(&ents[i].state, &want, CLAIMED))
            continue;
        ents[i].tid = (uint64_t)syscall(SYS_gettid);
        snprintf(ents[i].name, sizeof ents[i].name, "%s", name ? name : "");
        atomic_store(&ents[i].self, pthread_self());
        int h = atomic_load(&high);
        while (h < i + 1 && !atomic_compare_exchange_weak(&high, &h, i + 1))
            ;
        atomic_store_explicit(&ents[i].state, LIVE, memory_order_release);
        atomic_fetch_add(&n_registered, 1);
        return i;
    }
    atomic_fetch_add(&n_full, 1);
    return -1;
}

void threads_release(int idx)
{
    if (idx < 0 || idx >= THREADS_MAX)
        return;
    atomic_store_explicit(&ents[idx].state, CLAIMED, memory_order_release);
    atomic_store(&ents[idx].self, (pthread_t)0);
    atomic_store_explicit(&ents[idx].state, FREE, memory_order_release);
    atomic_fetch_add(&n_released, 1);
}

int threads_self(void)
{
    pthread_t me = pthread_self();
    int h = atomic_load_explicit(&high, memory_order_acquire);
    for (int i = 0; i < h; i++)
        if (atomic_load_explicit(&ents[i].state, memory_order_acquire) == LIVE &&
            pthread_equal(atomic_load_explicit(&ents[i].self, memory_order_relaxed), me))
            return i;
    return -1;
}

int threads_high(void) { return atomic_load(&high); }

uint64_t threads_tid(int idx) { return idx >= 0 ? ents[idx].tid : 0; }

const char *threads_name(int idx) { return idx >= 0 ? ents[idx].name : ""; }

void threads_counts(napi_env env, napi_value o)
{
    napi_value t;
    napi_create_object(env, &t);
    uint64_t reg = atomic_load(&n_registered), rel = atomic_load(&n_released);
    set_num(env, t, "live", (double)(reg - rel));
    set_num(env, t, "registered", (double)reg);
    set_num(env, t, "released", (double)rel);
    set_num(env, t, "tableFull", (double)atomic_load(&n_full));
    napi_set_named_property(env, o, "threads", t);
}

/* threadName(name): this thread's thread_name label (its own entry). */
static napi_value m_thread_name(napi_env env, napi_callback_info info)
{
    napi_value argv[1];
    js_args(env, info, argv, 1);
    int idx = env_thread(env);
    if (idx < 0)
        return js_undefined(env);
    size_t len = 0;
    napi_get_value_string_utf8(env, argv[0], ents[idx].name, sizeof ents[idx].name, &len);
    return js_undefined(env);
}

/* threadIndex() -> this environment's entry (-1: none; the table was full). */
static napi_value m_thread_index(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value r;
    napi_create_int32(env, env_thread(env), &r);
    return r;
}

void threads_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "threadName", m_thread_name);
    set_fn(env, exports, "threadIndex", m_thread_index);
}
