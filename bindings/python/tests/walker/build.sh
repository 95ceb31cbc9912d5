#!/bin/sh
# Build the test-only extension _walker_test for one interpreter:
#   build.sh PYTHON [OUTDIR]
# OUTDIR defaults to build/<cache tag><abiflags> next to this script. Extra compiler
# flags (e.g. -fsanitize=address) can be passed in WALKER_TEST_CFLAGS.
# The core's sources are core/sources.txt's src/ and gen/ lines.
set -eu
PY=${1:?usage: build.sh PYTHON [OUTDIR]}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
TAG=$("$PY" -c 'import sys; print(sys.implementation.cache_tag + sys.abiflags)')
OUT=${2:-$HERE/build/$TAG}
mkdir -p "$OUT"
CC=${CC:-gcc}
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fPIC -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla ${WALKER_TEST_CFLAGS:-}"
$CC $CFLAGS -shared \
    -I"$INC" -I"$ROOT/core/include" -I"$ROOT/core/src" -I"$ROOT/core/gen" \
    -I"$ROOT/bindings/python/src" \
    "$HERE/_walker_test.c" $(sed -En "s#^((src|gen)/.*\.c)\$#$ROOT/core/\1#p" "$ROOT/core/sources.txt") \
    "$ROOT/bindings/python/src/pthread_tid.c" \
    "$ROOT/bindings/python/src/context_labels.c" "$ROOT/bindings/python/src/pairs.c" \
    "$ROOT/bindings/python/src/log_bridge.c" "$ROOT/bindings/python/src/module_lock.c" \
    -lprotobuf-c -lcurl -lz -lpthread -lm \
    -o "$OUT/_walker_test$SUFFIX"
echo "$OUT/_walker_test$SUFFIX"
