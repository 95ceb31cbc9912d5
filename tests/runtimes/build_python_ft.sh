#!/usr/bin/env bash
# Builds (once) a free-threaded CPython (--disable-gil, no PGO) from the source
# tarball Debian serves for its python3.X package, into DEST, for the
# free-threaded lane of `make test`. The tarball's SHA-256 must be the one
# Debian's Sources index lists for it; the mirror is read from apt's sources.
# A stamp in DEST records version, checksum and flags: a change rebuilds.
#   build_python_ft.sh VERSION DEBIAN_SOURCE_PACKAGE SHA256 DEST
# About 5 minutes on two cores (JOBS).
set -euo pipefail
version=$1 package=$2 sha=$3
dest=$(realpath -m "$4") # the build runs elsewhere
flags="--disable-gil"
stamp="$dest/.pn-stamp"
want="$version $sha $flags"
built() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dest/bin/python3" ]; }
built && exit 0
# One build at a time into DEST (lanes or checkouts sharing it wait).
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
built && exit 0
mirror=$("$(dirname "$0")/debian_mirror.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball="${package}_${version}.orig.tar.xz"
echo "build_python_ft.sh: CPython $version (free-threaded) into $dest, about 5 minutes"
curl -fsS --retry 3 -o "$work/$tarball" "$mirror/pool/main/${package:0:1}/$package/$tarball"
echo "$sha  $work/$tarball" | sha256sum -c --quiet
tar xJf "$work/$tarball" -C "$work"
cd "$work"/*/
rm -rf "$dest"
./configure --prefix="$dest" $flags >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log"; exit 1; }
make -j"${JOBS:-2}" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }
make install >"$work/install.log" 2>&1 || { tail -30 "$work/install.log"; exit 1; }
"$dest/bin/python3" -c "
import sys, sysconfig
assert sys.version.split()[0] == '$version', sys.version
assert sysconfig.get_config_var('Py_GIL_DISABLED') == 1
import ssl, zlib, ctypes, _testcapi
"
echo "$want" >"$stamp"
