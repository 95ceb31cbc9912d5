#!/usr/bin/env bash
# One lane of `make test` (a suite on one runtime), timed and recorded, so
# that every lane reports even when another fails and the run ends with a
# table of them all.
#   lane.sh DIR NAME CMD [ARG...]   run CMD; write "STATUS SECONDS" to DIR/NAME;
#                                    exit with CMD's status
#   lane.sh --summary DIR NAME...   print each lane's status and time (a lane
#                                    with no record did not run: its
#                                    prerequisite failed); exit 1 unless all passed
set -uo pipefail

if [ "${1:-}" = --summary ]; then
  dir=$2
  shift 2
  failed=0
  echo "== lanes"
  for name in "$@"; do
    if [ -f "$dir/$name" ]; then
      read -r status secs <"$dir/$name"
    else
      status="not run" secs=
    fi
    [ "$status" = ok ] || failed=$((failed + 1))
    printf '  %-22s %-8s %s\n' "$name" "$status" "${secs:+$secs s}"
  done
  echo "== $(($# - failed)) of $# lanes passed"
  [ "$failed" -eq 0 ]
  exit
fi

[ $# -ge 3 ] || { echo "usage: $0 DIR NAME CMD [ARG...] | --summary DIR NAME..." >&2; exit 2; }
dir=$1 name=$2
shift 2
mkdir -p "$dir"
rm -f "$dir/$name"
start=$(date +%s)
echo "== lane $name: $*"
"$@"
rc=$?
secs=$(($(date +%s) - start))
if [ $rc -eq 0 ]; then status=ok; else status=FAIL; fi
echo "$status $secs" >"$dir/$name"
echo "== lane $name: $status in $secs s"
exit $rc
