#!/usr/bin/env bash
# Fetches (once) CPython's headers as Debian builds them for another CPU:
# pyconfig.h differs per architecture (sizes, alignments, feature macros),
# so a cross-compiled wheel must see the target's. From each arm64
# libpython3.X-dev package of the machine's own mirror (read from apt's
# sources, never written here); apt checks each .deb against the suite's
# signed index.
#   python_headers.sh DEST ARCH   ->  DEST/usr/include/{python3.X,<triplet>/python3.X}/
# Which Debian suite has which CPython for arm64 (none has 3.10 or 3.12, so
# those get no aarch64 wheel): bookworm 3.11; sid 3.13, 3.14, 3.15.
set -euo pipefail
dest=$(realpath -m "$1")
arch=$2
sets="bookworm:libpython3.11-dev sid:libpython3.13-dev sid:libpython3.14-dev sid:libpython3.15-dev"
stamp="$dest/.stamp"
want=$(printf '%s\n' 1 "$arch" $sets | sha256sum | cut -c1-16)
[ -f "$stamp" ] && [ "$(cut -d' ' -f1 "$stamp")" = "$want" ] && exit 0

mirror=$("$(dirname "$0")"/../tests/runtimes/debian_mirror.sh)
rm -rf "$dest"
apt="$dest/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dest/debs"
for s in $(printf '%s\n' $sets | cut -d: -f1 | sort -u); do
  printf 'deb [arch=%s signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
    "$arch" "$mirror" "$s"
done >"$apt/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::status=/dev/null
  -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
  -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root)
apt-get -qq "${opts[@]}" update
got=""
for e in $sets; do
  suite=${e%%:*} pkg=${e#*:}
  # The suite's own version, not a newer one from another suite.
  ver=$(apt-cache "${opts[@]}" madison "$pkg" | awk -v s="$suite" '$0 ~ " " s "/" { print $3; exit }')
  [ -n "$ver" ] || { echo "python_headers.sh: no $pkg ($arch) in $suite" >&2; exit 1; }
  (cd "$dest/debs" && apt-get -qq "${opts[@]}" download "$pkg=$ver")
  got="$got $pkg=$ver"
done
for deb in "$dest"/debs/*.deb; do
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest" ./usr/include
done
rm -rf "$apt" "$dest/debs"
echo "$want$got" >"$stamp"
