#!/usr/bin/env bash
# Runs a command inside a chroot (made by sid_chroot.sh) with a checkout
# bind-mounted at the same path, /proc and the host's /dev (thread clocks
# and names, /dev/shm). The mounts live in a mount namespace of this command
# only: they vanish when it ends, whether it passed, failed or was killed,
# and the host never sees them. The environment is reset, except for the
# proxy and pip settings the chroot's pip needs to reach the registries.
#   in_chroot.sh CHROOT CHECKOUT CMD [ARG...]
set -euo pipefail
root=$(realpath "$1")
dir=$(realpath "$2")
shift 2
[ -x "$root/usr/bin/env" ] || { echo "in_chroot.sh: no chroot at $root" >&2; exit 1; }
mkdir -p "$root$dir"
pass=()
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT PIP_CERT \
  http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PN_TEST_SLOW; do
  [ -n "${!v:-}" ] && pass+=("$v=${!v}")
done
exec unshare --mount --propagation private /bin/bash -ec '
  root=$1 dir=$2
  shift 2
  mount --bind "$dir" "$root$dir"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  cd "$root$dir"
  exec chroot "$root" /bin/bash -ec "cd \"\$0\"; exec \"\$@\"" "$dir" "$@"' \
  _ "$root" "$dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 "${pass[@]}" "$@"
