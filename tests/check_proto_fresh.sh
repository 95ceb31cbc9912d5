#!/usr/bin/env bash
# Fails when core/gen/ no longer matches what protoc-c makes from proto/:
# someone edited the schema (or the generated code) without regenerating.
# Usage: tests/check_proto_fresh.sh <source_dir>
set -euo pipefail

src="${1:-}"
if [[ -z "$src" || ! -f "$src/proto/profile.proto" ]]; then
    echo "usage: $0 <source_dir>  (the directory that holds proto/profile.proto)" >&2
    exit 2
fi

if ! command -v protoc-c >/dev/null 2>&1; then
    echo "proto_fresh: protoc-c not found; install it (Debian/Ubuntu: apt-get install protobuf-c-compiler)" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Every .proto under proto/, by its path there (the OTLP files import each
# other by such paths), generated as `make proto` does.
status=0
mapfile -t protos < <(cd "$src/proto" && find . -name '*.proto' | sed 's|^\./||' | sort)
(cd "$src/proto" && protoc-c --c_out="$tmp" --proto_path=. "${protos[@]}")
for rel in "${protos[@]}"; do
    name="${rel%.proto}"
    for ext in pb-c.c pb-c.h; do
        gen="$src/core/gen/$name.$ext"
        if [[ ! -f "$gen" ]]; then
            echo "proto_fresh: $gen is missing; run 'make proto'" >&2
            status=1
        elif ! diff -u "$gen" "$tmp/$name.$ext" >"$tmp/diff.txt"; then
            echo "proto_fresh: $gen is stale relative to proto/$rel; run 'make proto'" >&2
            head -n 40 "$tmp/diff.txt" >&2
            status=1
        fi
    done
done

if [[ $status -eq 0 ]]; then
    echo "proto_fresh: core/gen matches proto/"
fi
exit $status
