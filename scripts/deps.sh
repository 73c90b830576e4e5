#!/usr/bin/env bash
# deps.sh: install the Debian 12 packages mcroute needs, only those that are missing.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libssl-dev libevent-dev check
      libmemcached-dev libhashkit-dev memcached valgrind groff-base man-db
      libyaml-dev nutcracker liburcu-dev)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run this script as root, or install sudo, to install them" >&2
    exit 1
  fi
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
