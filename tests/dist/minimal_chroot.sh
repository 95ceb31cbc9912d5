#!/usr/bin/env bash
# Builds (once) the machine the artifacts are proven on: a Debian chroot
# made with `debootstrap --variant=minbase`, with the runtimes only and no
# compiler, no -dev package and no libcurl; the script fails if any of them
# got in. npm is not Debian's (that one depends on node-gyp, libnode-dev and
# g++): the proof brings npm's own tarball.
#   minimal_chroot.sh DEST [ARCH]
# ARCH amd64 (default): trixie, Python 3.13 with venv, Node.js 20, Ruby 3.3
#   (trixie, not bookworm: bookworm's Node.js is 18).
# ARCH amd64-sid (the x86_64 smoke test of the wheels trixie has no CPython
#   for, tests/dist/smoke.py --arch x86_64): sid, CPython 3.14 and 3.15.
# ARCH arm64 (the aarch64 smoke test, tests/dist/smoke.py; run under
#   qemu-user-static, tests/dist/qemu_binfmt.sh): sid, whose arm64 CPython
#   3.13, 3.14 and 3.15 (with venv) are the three Debian builds the aarch64
#   wheels have headers from besides bookworm's 3.11, and Node.js 24.
# The mirror is the machine's own (tests/runtimes/debian_mirror.sh). A stamp
# records the package list. Runs under DEST.lock (flock): trees sharing one
# chroot build it one at a time. Needs root (debootstrap, chroot).
set -euo pipefail
dest=$(realpath -m "$1")
arch=${2:-amd64}
case $arch in
  amd64) suite=trixie packages="python3 python3-venv nodejs ruby" ;;
  amd64-sid) suite=sid arch=amd64 packages="python3.14-venv python3.15-venv" ;;
  arm64) suite=sid packages="python3.13-venv python3.14-venv python3.15-venv nodejs"
    "$(dirname "$0")"/qemu_binfmt.sh arm64 ;;
  *) echo "minimal_chroot.sh: unknown arch $arch" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
stamp="$dest/.pn-stamp"
want=$(printf '%s\n' 1 $suite $arch $packages | sha256sum | cut -c1-16)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0

mirror=$("$(dirname "$0")"/../runtimes/debian_mirror.sh)
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
# A finished debootstrap is kept (marker), so only the checks below rerun.
if [ "$(cat "$dest/.pn-debootstrapped" 2>/dev/null)" != "$want" ]; then
  rm -rf "$dest"
  echo "minimal_chroot.sh: debootstrap $suite ($arch) into $dest (a few minutes, once$([ $arch = amd64 ] || echo '; emulated: ten or more'))"
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
