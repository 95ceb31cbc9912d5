#!/usr/bin/env bash
# Builds (once) a Debian unstable chroot with today's runtimes: CPython 3.14
# and 3.15 with their headers, CRuby 3.3 (unstable) and 3.4 (experimental),
# Debian's Node.js, what the bindings build with, chromium (the report page
# test loads the page headless) and python3 (the Ruby upload test's ingest
# server). `make test` runs the
# Python and Ruby suites of those runtimes inside it.
#   sid_chroot.sh DEST
# The mirror is the machine's own (read from apt's sources, never written
# here); the machine's CA bundle and pip settings are copied in, since its
# registries are reached through them. A stamp records the package list, so a
# changed list rebuilds on the next run. Runs under DEST.lock (flock), so
# lanes and clones sharing one chroot build or update it one at a time.
# Needs root (debootstrap, chroot).
set -euo pipefail
dest=$(realpath -m "$1")
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
packages="python3.14-dev python3.14-venv python3.15-dev python3.15-venv ruby3.3-dev
  build-essential pkg-config libprotobuf-c-dev zlib1g-dev libcurl4-openssl-dev libssl-dev
  nodejs ruby-webrick ruby-minitest ca-certificates chromium python3"
experimental="ruby3.4 ruby3.4-dev"
stamp="$dest/.pn-stamp"
want=$(printf '%s\n' 3 $packages $experimental | sha256sum | cut -c1-16)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0

mirror=$("$(dirname "$0")"/debian_mirror.sh)
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null

if [ ! -x "$dest/usr/bin/apt-get" ]; then
  rm -rf "$dest"
  echo "sid_chroot.sh: debootstrap sid into $dest (about a minute)"
  debootstrap --variant=minbase sid "$dest" "$mirror" >"$dest.debootstrap.log" 2>&1 ||
    { tail -20 "$dest.debootstrap.log"; exit 1; }
fi
printf 'deb %s sid main\ndeb %s experimental main\n' "$mirror" "$mirror" >"$dest/etc/apt/sources.list"
# The mirror serves a snapshot whose Release files have expired.
echo 'Acquire::Check-Valid-Until "false";' >"$dest/etc/apt/apt.conf.d/99pyroscope-native"
cp /etc/resolv.conf "$dest/etc/resolv.conf"
mkdir -p "$dest/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$dest/etc/ssl/certs/ca-certificates.crt"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$dest/etc/pip.conf"
chroot "$dest" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash -ec "
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $(echo $packages) >/dev/null
  apt-get install -y -qq --no-install-recommends -t experimental $experimental >/dev/null"
# The host's CA bundle again: ca-certificates in the chroot rewrote it.
cp /etc/ssl/certs/ca-certificates.crt "$dest/etc/ssl/certs/ca-certificates.crt"
for v in python3.14 python3.15 ruby3.3 ruby3.4 node; do
  chroot "$dest" "$v" --version >/dev/null || { echo "sid_chroot.sh: $v missing in $dest" >&2; exit 1; }
done
echo "$want" >"$stamp"
