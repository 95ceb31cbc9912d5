#!/usr/bin/env bash
# Builds a CRuby release from Debian's copy of its source tarball (the only
# place this machine's network reaches that has one) into DEST, for
# `make test-ruby-compat`. The tarball's SHA-256 must be the one Debian's
# Sources index lists for it.
#   build_ruby.sh VERSION DEBIAN_SOURCE_PACKAGE SHA256 DEST
set -euo pipefail
version=$1 package=$2 sha=$3
dest=$(realpath -m "$4") # the build runs elsewhere
[ -x "$dest/bin/ruby" ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball="${package}_${version}.orig.tar.xz"
curl -fsS --retry 3 -o "$work/$tarball" "http://deb.debian.org/debian/pool/main/r/$package/$tarball"
echo "$sha  $work/$tarball" | sha256sum -c --quiet
tar xJf "$work/$tarball" -C "$work"
cd "$work/ruby-$version"
./configure --prefix="$dest" --disable-install-doc --enable-shared >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log"; exit 1; }
make -j"${JOBS:-2}" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }
make install HAVE_BASERUBY=no >"$work/install.log" 2>&1 || { tail -30 "$work/install.log"; exit 1; }
"$dest/bin/ruby" -e "exit(RUBY_VERSION == '$version' ? 0 : 1)"
