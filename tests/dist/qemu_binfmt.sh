#!/usr/bin/env bash
# Makes this machine run another CPU's Linux binaries (for the arm64 proof
# chroot): Debian's qemu-user-static, and its binfmt_misc entry registered
# with the F flag (the kernel opens the emulator once, so a chroot needs no
# copy of it). Idempotent; the registration does not survive a reboot,
# hence every user of the chroot calls this first. Needs root.
#   qemu_binfmt.sh ARCH      (ARCH: Debian's name, e.g. arm64)
set -euo pipefail
qarch=$(case $1 in arm64) echo aarch64 ;; *) echo "qemu_binfmt.sh: unknown arch $1" >&2; exit 2 ;; esac)
conf=/usr/lib/binfmt.d/qemu-$qarch.conf
[ -f "$conf" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null
b=/proc/sys/fs/binfmt_misc
[ -f $b/register ] || mount -t binfmt_misc binfmt_misc $b
if [ ! -f "$b/qemu-$qarch" ]; then
  cat "$conf" >$b/register 2>/dev/null || [ -f "$b/qemu-$qarch" ] # a racing caller registered it
fi
grep -q '^enabled' "$b/qemu-$qarch" && grep -q '^flags:.*F' "$b/qemu-$qarch" ||
  { echo "qemu_binfmt.sh: $b/qemu-$qarch is not enabled with the F flag" >&2; exit 1; }
