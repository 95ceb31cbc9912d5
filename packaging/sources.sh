#!/usr/bin/env bash
# Fetches (once) the C sources the prebuilt artifacts link statically:
# protobuf-c and zlib, from Debian's source packages of the machine's own
# mirror (read from apt's sources, never written here). apt checks each file
# against the suite's signed Sources index, so what is compiled is Debian's
# upstream tarball as published.
#   sources.sh DEST    ->  DEST/protobuf-c/, DEST/zlib/
set -euo pipefail
dest=$(realpath -m "$1")
suite=bookworm
pkgs="protobuf-c=1.4.1-1 zlib=1:1.2.13.dfsg-1"
stamp="$dest/.stamp"
want=$(printf '%s\n' 1 $suite $pkgs | sha256sum | cut -c1-16)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0

mirror=$("$(dirname "$0")"/../tests/runtimes/debian_mirror.sh)

rm -rf "$dest"
apt="$dest/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
  "$mirror" "$suite" >"$apt/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
  -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root)
apt-get -qq "${opts[@]}" update
(cd "$dest" && apt-get -qq "${opts[@]}" source --download-only $pkgs >/dev/null)
for name in protobuf-c zlib; do
  mkdir -p "$dest/$name"
  tar -xf "$dest"/"$name"_*.orig.tar.* -C "$dest/$name" --strip-components=1
done
rm -rf "$apt"
echo "$want" >"$stamp"
