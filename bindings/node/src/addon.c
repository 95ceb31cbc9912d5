/* Module init: the addon's exports, gathered from each file. It loads in
 * the main thread and in each worker thread that requires it (one Node
 * environment each): the agent, its drivers and the SIGPROF chain are the
 * process's, shared; each environment takes a thread entry (threads.c)
 * that its cleanup hook gives back on that thread, before the worker's
 * isolate goes. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "addon.h"

/* report.c: reports of saved profiles (the core's report library). */
void report_exports(napi_env env, napi_value exports);

static pthread_mutex_t addon_mu;
static pthread_once_t addon_mu_once = PTHREAD_ONCE_INIT;

static void addon_mu_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&addon_mu, &a);
    pthread_mutexattr_destroy(&a);
}

void addon_lock(void)
{
    pthread_once(&addon_mu_once, addon_mu_init);
    pthread_mutex_lock(&addon_mu);
}

void addon_unlock(void) { pthread_mutex_unlock(&addon_mu); }

/* An environment's own state (its instance data). Its thread only. */
typedef struct {
    int thread; /* threads.c entry, -1: none */
} env_state;

int on_main_thread(void) { return (pid_t)syscall(SYS_gettid) == getpid(); }

int env_thread(napi_env env)
{
    env_state *es = NULL;
    if (napi_get_instance_data(env, (void **)&es) != napi_ok || !es)
        return -1;
    return es->thread;
}

/* The environment ends (on its thread): its thread stops feeding the
 * drivers and its entry is free again. The SIGPROF handler may interrupt
 * this thread until V8's profiler of the isolate stops (later): with the
 * entry disarmed first it only chains such signals. */
static void env_cleanup(void *arg)
{
    env_state *es = arg;
    if (es->thread >= 0) {
        agent_thread_gone(es->thread);
        signal_release(es->thread);
        addon_lock();
        join_release(es->thread);
        addon_unlock();
        labels_release(es->thread);
        threads_release(es->thread);
        es->thread = -1;
    }
}

/* es lives until the cleanup hook: Node may run the instance data's
 * finalizer before or after it, and no JS call reads es after it. */
static void env_finalize(napi_env env, void *data, void *hint)
{
    (void)env;
    (void)data;
    (void)hint;
}

static void env_cleanup_free(void *arg)
{
    env_cleanup(arg);
    free(arg);
}

static napi_value init(napi_env env, napi_value exports)
{
    env_state *es = calloc(1, sizeof *es);
    if (!es) {
        napi_throw_error(env, NULL, "pyroscope: out of memory");
        return NULL;
    }
    /* Node runs the main JS thread on the process's first thread. */
    es->thread = threads_register(on_main_thread() ? "main" : NULL);
    if (es->thread < 0)
        pn_log(PN_LOG_WARN, "more than %d JS threads loaded pyroscope-native: this worker is not "
               "profiled (stats().threads.tableFull counts such threads)", THREADS_MAX);
    if (napi_set_instance_data(env, es, env_finalize, NULL) != napi_ok) {
        threads_release(es->thread);
        free(es);
        napi_throw_error(env, NULL, "pyroscope: napi_set_instance_data failed");
        return NULL;
    }
    napi_add_env_cleanup_hook(env, env_cleanup_free, es);
    agent_exports(env, exports);
    log_exports(env, exports);
    sender_exports(env, exports);
    labels_exports(env, exports);
    signal_exports(env, exports);
    join_exports(env, exports);
    heap_exports(env, exports);
    report_exports(env, exports);
    threads_exports(env, exports);
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
