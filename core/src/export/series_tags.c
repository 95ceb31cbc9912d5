/* Series tags of the Pyroscope upload: the user's tags, then the Grafana
 * SDKs' own (see series_tags.h). Checked against the anchors' sources:
 * @pyroscope/nodejs 0.6.4 buildApplicationName (scope
 * com.grafana.pyroscope/nodejs, runtime "nodejs", process.versions.node,
 * the user's tag of the same name winning) and pyroscope-io 1.4
 * labels_for_profile (com.grafana.pyroscope/python, sys.implementation.name,
 * push_label_if_absent). The tag names are theirs; the scope's value is
 * ours (pyroscope-native/<language>), as in our OTLP scope: the server
 * counts profiles per SDK by it, and we are not Grafana's SDK.
 * Pure function, any thread. */
#include <stdlib.h>
#include <string.h>

#include "export/series_tags.h"

#define SCOPE_NAME "otel.scope.name"
#define SCOPE_VERSION "otel.scope.version"
#define RUNTIME_NAME "process.runtime.name"
#define RUNTIME_VERSION "process.runtime.version"

static const char *scope_of(const char *runtime)
{
    static const char *const map[][2] = {
        {"cpython", "pyroscope-native/python"},
        {"pypy", "pyroscope-native/python"},
        {"python", "pyroscope-native/python"},
        {"nodejs", "pyroscope-native/nodejs"},
        {"node", "pyroscope-native/nodejs"},
        {"ruby", "pyroscope-native/ruby"},
    };
    for (size_t i = 0; runtime && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(runtime, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

static int has_key(const pn_label *tags, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(tags[i].key, key) == 0)
            return 1;
    return 0;
}

/* A value `name=` can carry (the ingest rejects these characters). */
static int sendable(const char *v)
{
    return v && *v && !strpbrk(v, "{},=");
}

int pn_series_tags(const pn_label *tags, size_t ntags, const char *runtime_name,
                   const char *runtime_version, pn_label **out, size_t *nout)
{
    const pn_label sdk[] = {
        {SCOPE_NAME, scope_of(runtime_name)},
        {SCOPE_VERSION, PN_SDK_VERSION},
        {RUNTIME_NAME, runtime_name},
        {RUNTIME_VERSION, runtime_version},
    };
    size_t nsdk = sizeof sdk / sizeof sdk[0];
    pn_label *all = malloc((ntags + nsdk) * sizeof *all);
    if (!all)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < ntags; i++)
        all[n++] = tags[i];
    for (size_t i = 0; i < nsdk; i++)
        if (sendable(sdk[i].value) && !has_key(tags, ntags, sdk[i].key))
            all[n++] = sdk[i];
    *out = all;
    *nout = n;
    return 0;
}
