/* The log bridge: core messages (from any thread) to the JS handler that
 * setLogHandler installed, through one thread-safe function.
 *
 * The tsfn is made once and never released by us (a core thread may be
 * calling it at any moment; Node releases it when the environment ends,
 * after the exit handler stopped the agent). It is unref'd so it never
 * keeps the process alive. Without a handler the core writes to stderr. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

typedef struct {
    int level;
    char msg[];
} log_entry;

/* Written on the main thread (setLogHandler, env cleanup; workers' calls
 * are ignored), read by any thread in on_log. */
static _Atomic(napi_threadsafe_function) tsfn;
/* Main thread: the JS handler (strong reference) or NULL. */
static napi_ref handler_ref;

/* Main thread, called by Node for each queued entry. */
static void call_js(napi_env env, napi_value js_cb, void *context, void *data)
{
    (void)js_cb;
    (void)context;
    log_entry *en = data;
    if (env && handler_ref) {
        napi_value fn, args[2], global, ret;
        if (napi_get_reference_value(env, handler_ref, &fn) == napi_ok && fn) {
            napi_create_int32(env, en->level, &args[0]);
            napi_create_string_utf8(env, en->msg, NAPI_AUTO_LENGTH, &args[1]);
            napi_get_global(env, &global);
            if (napi_call_function(env, global, fn, 2, args, &ret) != napi_ok) {
                /* A throwing log handler must not take the process down:
                 * drop its exception. */
                napi_value exc;
                napi_get_and_clear_last_exception(env, &exc);
            }
        }
    }
    free(en);
}

/* Core side: any thread. */
static void on_log(void *ud, int level, const char *msg)
{
    (void)ud;
    napi_threadsafe_function f = atomic_load(&tsfn);
    size_t n = strlen(msg);
    log_entry *en = f ? malloc(sizeof *en + n + 1) : NULL;
    if (en) {
        en->level = level;
        memcpy(en->msg, msg, n + 1);
        if (napi_call_threadsafe_function(f, en, napi_tsfn_nonblocking) == napi_ok)
            return;
        free(en);
    }
    fprintf(stderr, "pyroscope: %s\n", msg);
}

static void cleanup(void *arg)
{
    (void)arg;
    pn_log_set_handler(NULL, NULL);
    atomic_store(&tsfn, NULL);
}

/* setLogHandler(fn | null) */
static napi_value m_set_log_handler(napi_env env, napi_callback_info info)
{
    napi_value argv[1];
    int is_fn = js_fn_arg(env, info, &argv[0], "setLogHandler: expects a function(level, message) or null");
    if (is_fn < 0)
        return NULL;
    /* The handler is the process's: the main thread's (a worker's would be
     * called on the main thread, with a reference of another isolate). */
    if (!on_main_thread())
        return js_undefined(env);
    if (handler_ref) {
        napi_delete_reference(env, handler_ref);
        handler_ref = NULL;
    }
    if (!is_fn) {
        pn_log_set_handler(NULL, NULL);
        return js_undefined(env);
    }
    napi_create_reference(env, argv[0], 1, &handler_ref);
    if (!atomic_load(&tsfn)) {
        napi_value name;
        napi_create_string_utf8(env, "pyroscope-log", NAPI_AUTO_LENGTH, &name);
        napi_threadsafe_function f;
        if (napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, NULL,
                                            call_js, &f) != napi_ok)
            return NULL;
        napi_unref_threadsafe_function(env, f);
        atomic_store(&tsfn, f);
        napi_add_env_cleanup_hook(env, cleanup, NULL);
    }
    pn_log_set_handler(on_log, NULL);
    return js_undefined(env);
}

/* log(level, message): a binding message through the core's logger, so it
 * obeys log_level and reaches the same handler. */
static napi_value m_log(napi_env env, napi_callback_info info)
{
    napi_value argv[2];
    size_t argc = js_args(env, info, argv, 2);
    double level = PN_LOG_WARN;
    if (argc < 2 || js_double(env, argv[0], &level) != 0)
        return js_undefined(env);
    char *msg = js_string(env, argv[1], "log: message must be a string");
    if (!msg)
        return NULL;
    pn_log((int)level, "%s", msg);
    free(msg);
    return js_undefined(env);
}

void log_exports(napi_env env, napi_value exports)
{
    set_fn(env, exports, "setLogHandler", m_set_log_handler);
    set_fn(env, exports, "log", m_log);
}
