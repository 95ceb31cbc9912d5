#!/usr/bin/env bash
# Prints the machine's Debian mirror (the first non-security source in apt's
# sources, deb822 or one-line), so that no script names a host itself.
set -euo pipefail
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
  awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }')
[ -n "$mirror" ] || mirror=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
  awk '$2 !~ /security/ { print $2; exit }')
[ -n "$mirror" ] || { echo "debian_mirror.sh: no Debian mirror in /etc/apt/sources*" >&2; exit 1; }
echo "${mirror%/}"
