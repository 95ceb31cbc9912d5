#!/usr/bin/env bash
# Prints the machine's Debian mirror: the first deb822 or one-line apt
# source for the "debian" archive (not -security), without a trailing slash.
# Scripts that debootstrap or fetch sources read it here, so no host name is
# written in the repository.
set -euo pipefail
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
  awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }')
[ -n "$mirror" ] || mirror=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
  awk '$2 !~ /security/ { print $2; exit }')
[ -n "$mirror" ] || { echo "debian_mirror.sh: no Debian mirror in /etc/apt/sources*" >&2; exit 1; }
echo "${mirror%/}"
