#!/usr/bin/env bash
# Builds (once) the machine the artifacts are proven on: a Debian trixie
# chroot made with `debootstrap --variant=minbase`, with the runtimes only
# (Python 3.13 with venv, Node.js 20, Ruby 3.3) and no compiler, no -dev
# package and no libcurl; the script fails if any of them got in. npm is not
# Debian's (that one depends on node-gyp, libnode-dev and g++): the proof
# brings npm's own tarball. trixie, not bookworm: bookworm's Node.js is 18.
#   minimal_chroot.sh DEST [ARCH]     (ARCH: amd64 (default) or arm64)
# The mirror is the machine's own (tests/runtimes/debian_mirror.sh). A stamp
# records the package list. Needs root (debootstrap, chroot).
set -euo pipefail
dest=$(realpath -m "$1")
arch=${2:-amd64}
suite=trixie
packages="python3 python3-venv nodejs ruby"
stamp="$dest/.pn-stamp"
want=$(printf '%s\n' 1 $suite $arch $packages | sha256sum | cut -c1-16)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0

mirror=$("$(dirname "$0")"/../runtimes/debian_mirror.sh)
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
# A finished debootstrap is kept (marker), so only the checks below rerun.
if [ "$(cat "$dest/.pn-debootstrapped" 2>/dev/null)" != "$want" ]; then
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  echo "minimal_chroot.sh: debootstrap $suite ($arch) into $dest (a few minutes, once)"
  debootstrap --variant=minbase --arch="$arch" --include="${packages// /,}" \
    "$suite" "$dest" "$mirror" >"$dest.debootstrap.log" 2>&1 ||
    { tail -20 "$dest.debootstrap.log"; exit 1; }
  echo "$want" >"$dest/.pn-debootstrapped"
fi
rm -f "$dest/var/cache/apt/archives/"*.deb
# The claim the proof rests on: nothing here can compile, nor load libcurl.
bad=$(chroot "$dest" dpkg-query -W -f '${Package}\n' |
  grep -E -- '-dev$|^(gcc|g\+\+|cpp|clang|make|binutils)(-[0-9.]+)?$|^binutils-|libcurl' || true)
[ -z "$bad" ] || { echo "minimal_chroot.sh: unwanted packages: $bad" >&2; exit 1; }
for t in cc gcc c++ g++ clang ld make; do
  ! chroot "$dest" sh -c "command -v $t" >/dev/null || { echo "minimal_chroot.sh: $t is there" >&2; exit 1; }
done
echo "$want" >"$stamp"
