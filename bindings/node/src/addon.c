/* Module init: the addon's exports, gathered from each file. The addon is
 * process-wide (one agent, one SIGPROF chain), so native.js loads it on
 * the main thread only. */
#include <sys/syscall.h>
#include <unistd.h>

#include "addon.h"

/* report.c: reports of saved profiles (the core's report library). */
void report_exports(napi_env env, napi_value exports);

static napi_value init(napi_env env, napi_value exports)
{
    /* Node runs the main JS thread on the process's first thread: any
     * other is a worker (its own isolate; one SIGPROF chain and one agent
     * serve the main one only). */
    if ((pid_t)syscall(SYS_gettid) != getpid()) {
        napi_throw_error(env, "ERR_PYROSCOPE_WORKER",
                         "pyroscope-native profiles the main thread of a process and cannot be "
                         "loaded in a worker thread: require it (and start it) from the main "
                         "thread");
        return NULL;
    }
    agent_exports(env, exports);
    log_exports(env, exports);
    sender_exports(env, exports);
    labels_exports(env, exports);
    signal_exports(env, exports);
    join_exports(env, exports);
    heap_exports(env, exports);
    report_exports(env, exports);
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
