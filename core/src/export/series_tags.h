/* The series tags every Pyroscope upload carries besides the user's: the
 * ones the Grafana SDKs add (otel.scope.name/version,
 * process.runtime.name/version), so dashboards and queries written on
 * their series find ours. */
#ifndef PN_EXPORT_SERIES_TAGS_H
#define PN_EXPORT_SERIES_TAGS_H

#include <stddef.h>

#include "pyroscope_native.h"

/* Our version: otel.scope.version here, telemetry.sdk.version in OTLP. */
#define PN_SDK_VERSION "0.1.0"

/* *out: a new array (free() it; the strings are borrowed from tags, the
 * runtime strings and static storage) of the user's tags followed by each
 * SDK tag the user did not set (a user's tag of the same name wins), and
 * none whose value is empty, unknown or could not go into `name=` (`{ } , =`).
 * The scope name follows the runtime name: cpython/pypy ->
 * pyroscope-native/python, nodejs -> .../nodejs, ruby -> .../ruby (the
 * anchors say com.grafana.pyroscope/...: the names are theirs, the
 * identity ours). 0, or -1 when out of memory. */
int pn_series_tags(const pn_label *tags, size_t ntags, const char *runtime_name,
                   const char *runtime_version, pn_label **out, size_t *nout);

#endif
