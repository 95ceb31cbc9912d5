#!/usr/bin/env bash
# Run `make test` N times (default 5) beside two CPU hogs, as on a busy
# 2-core machine, and say which runs failed.
#
#   tests/load/run_under_load.sh [N]
#
# One line per run: its number, ok/FAIL, its duration, and its log (kept in
# $LOAD_LOGS, default build/load-logs). The hogs are busy loops in
# background shells, killed when the script exits however it exits. Exits 1
# when any run failed. HOGS (default 2) and TARGET (default test) change
# the number of hogs and the make target(s): TARGET="test-c test-python-3.13"
# runs those lanes in turn.
set -u
N=${1:-5}
HOGS=${HOGS:-2}
TARGET=${TARGET:-test}
case $N in '' | *[!0-9]*) echo "usage: $0 [N]" >&2; exit 2 ;; esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
LOGS=${LOAD_LOGS:-$ROOT/build/load-logs}
mkdir -p "$LOGS" || exit 2

hog_pids=()
stop_hogs() {
    local p
    for p in "${hog_pids[@]}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${hog_pids[@]}"; do
        wait "$p" 2>/dev/null
    done
    hog_pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$HOGS"); do
    (trap - INT TERM EXIT; while :; do :; done) &
    hog_pids+=($!)
done
echo "$HOGS CPU hogs running (pids ${hog_pids[*]}); $N run(s) of 'make $TARGET', logs in $LOGS"

failed=0
for i in $(seq "$N"); do
    log=$LOGS/run-$i.log
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # TARGET is a list of make targets
    if make --no-print-directory $TARGET > "$log" 2>&1; then
        result=ok
    else
        result=FAIL
        failed=$((failed + 1))
    fi
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    line="run $i/$N: $result in ${secs} s ($log)"
    if [ $result = FAIL ]; then
        # The first failing check or test, so the line says what broke.
        first=$(grep -m1 -E 'CHECK failed|== .* failed|^FAILED |valgrind FAIL|Error [0-9]+$' "$log")
        [ -n "$first" ] && line="$line: ${first# }"
    fi
    echo "$line"
done
echo "$((N - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
