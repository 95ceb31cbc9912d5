/* Module init: the addon's exports, gathered from each file. The addon is
 * process-wide (one agent, one SIGPROF chain), so native.js loads it on
 * the main thread only. */
#include "addon.h"

static napi_value init(napi_env env, napi_value exports)
{
    agent_exports(env, exports);
    log_exports(env, exports);
    labels_exports(env, exports);
    signal_exports(env, exports);
    join_exports(env, exports);
    heap_exports(env, exports);
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
