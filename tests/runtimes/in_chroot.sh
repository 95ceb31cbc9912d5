#!/usr/bin/env bash
# Runs a command inside a chroot (the one sid_chroot.sh builds) with a host
# directory bind-mounted at the same absolute path, so build paths, logs and
# outputs are the same inside and out.
#   in_chroot.sh CHROOT DIR CMD [ARG...]
# The mounts (DIR, /proc, /dev, /sys, a private /tmp) are made in a mount
# namespace of their own (unshare): they vanish with the command however it
# ends (failure, signal, kill -9), never show on the host (so `rm -rf` of a
# chroot under build/ cannot reach through into the checkout), and runs in
# the same chroot at the same time do not see each other's mounts.
# The command starts in the caller's directory when that is under DIR, else
# in DIR, with a clean environment: PATH, HOME, LANG, TERM, the caller's
# PN_*, PYROSCOPE_* and PIP_* variables and proxy settings (the chroot's pip
# reaches the registries as the host's does); pass others with
# `env NAME=VALUE CMD`.
# IN_CHROOT_BIND="DIR2 DIR3" bind-mounts more host directories the same way.
# Needs root.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 CHROOT DIR CMD [ARG...]" >&2; exit 2; }
root=$(realpath -e "$1")
dir=$(realpath -e "$2")
shift 2
[ -x "$root/usr/bin/env" ] || { echo "in_chroot.sh: $root is not a chroot (no /usr/bin/env)" >&2; exit 2; }

case $PWD/ in "$dir"/*) wd=$PWD ;; *) wd=$dir ;; esac
binds="$dir"
for d in ${IN_CHROOT_BIND:-}; do binds="$binds $(realpath -e "$d")"; done

# The environment the command gets (NAME=VALUE words for env -i).
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
  LANG=C.UTF-8 TERM="${TERM:-dumb}")
while IFS= read -r name; do envs+=("$name=${!name}"); done < <(compgen -e | grep -E '^(PN_|PYROSCOPE_|PIP_|(http|https|no|HTTP|HTTPS|NO)_proxy$)' || true)

# The mount points are made on the host side once (empty directories, kept).
for d in $binds; do mkdir -p "$root$d"; done
mkdir -p "$root/proc" "$root/dev" "$root/sys" "$root/tmp"

exec unshare --mount --propagation private -- /bin/bash -euc '
  root=$1 wd=$2 binds=$3; shift 3
  for d in $binds; do mount --bind "$d" "$root$d"; done
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
  exec chroot "$root" /usr/bin/env -i "$@"
' in_chroot "$root" "$wd" "$binds" "${envs[@]}" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$wd" "$@"
