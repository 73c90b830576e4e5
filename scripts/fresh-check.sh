#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fresh-check.sh: run the README's two commands in a clean clone on a fresh Debian 12 minbase root (debootstrap, chroot), then unmount and delete the root safely.
#
# Usage: scripts/fresh-check.sh [options]
#   --ref REF        the commit or branch to clone (default: HEAD of this checkout);
#                    a commit no branch holds (git commit-tree) is fetched by its id
#   --run LIST       which README commands, in order: demo, test or demo,test (default);
#                    none: only make the root, mount, clone and clean up
#   --cache DIR      where the pristine root is cached as a tarball, and the roots
#                    are made (default: /var/tmp/mcroute-fresh)
#   --no-cache       debootstrap a new root even when the cached tarball exists
#   --keep           keep this run's root (unmounted) in DIR/root-PID afterwards
#   --mirror URL     the Debian mirror (default: the one this machine's apt uses)
#   --log FILE       also write everything the commands print to FILE
#
# Needs root (debootstrap, mount, chroot) and Debian's packages (debootstrap is
# installed with apt when missing). Each run starts from the pristine minbase
# root: nothing that a previous run installed is there. The root's apt uses
# the mirror for bookworm, bookworm-updates and bookworm-security, as a
# Debian 12 installation does. The commands run as root in the chroot (as CI
# runs them), with a clean environment, in a `git clone` of REF in /root/mcroute.
#
# Cleanup (a trap, on any exit): processes left inside the root are killed by
# pid, the mounts made here are unmounted in reverse order, and the root is
# deleted only when findmnt shows nothing mounted at or below it; otherwise
# it is left in place and the script says what is still mounted.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
ref=HEAD
run_list=demo,test
cache=/var/tmp/mcroute-fresh
use_cache=1
keep=0
mirror=
log=
while [ $# -gt 0 ]; do
  case $1 in
  --ref) ref=$2; shift 2 ;;
  --run) run_list=$2; shift 2 ;;
  --cache) cache=$2; shift 2 ;;
  --no-cache) use_cache=0; shift ;;
  --keep) keep=1; shift ;;
  --mirror) mirror=$2; shift 2 ;;
  --log) log=$2; shift 2 ;;
  -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "fresh-check: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
IFS=, read -ra commands <<<"$run_list"
[ "$run_list" = none ] && commands=()
for c in "${commands[@]}"; do
  case $c in
  demo | test) ;;
  *) echo "fresh-check: --run: '$c' is not demo, test or none" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: needs root (debootstrap, mount, chroot)" >&2; exit 2; }
case $cache in
/*) ;;
*) echo "fresh-check: --cache must be an absolute path" >&2; exit 2 ;;
esac

say() { echo "fresh-check: $*" >&2; }
started=$(date +%s)
elapsed() { local s=$(($(date +%s) - started)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

commit=$(git -C "$here" rev-parse --verify "$ref^{commit}") ||
  { echo "fresh-check: $ref is not a commit of $here" >&2; exit 2; }

# The mirror this machine's apt uses for Debian (deb822 or one-line sources).
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }')
fi
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }')
fi
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}
security=${mirror%/debian}/debian-security

if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap..."
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q debootstrap >&2
fi

mkdir -p "$cache"
tarball=$cache/bookworm-minbase.tar
root=$cache/root-$$

# ---------------------------------------------------------------- cleanup
made_root=0 # 1 once this run has made $root: cleanup touches nothing else
mounts=()   # in the order they were made
# shellcheck disable=SC2317 # called by cleanup
under_root() { # the mount points at or below $root, deepest first
  findmnt -rn -o TARGET | awk -v r="$root" '$0 == r || index($0, r "/") == 1' | sort -r
}
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local st=$? m d pid left
  trap - EXIT INT TERM HUP
  [ "$made_root" = 1 ] || exit "$st" # not ours: never touched
  # Processes still running inside the root (a server a command left
  # behind): they would keep the mounts busy.
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$(readlink "$d/root" 2>/dev/null)" = "$root" ] || continue
    say "killing process $pid left in the root ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60))"
    kill -KILL "$pid" 2>/dev/null || true
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m=${mounts[$i]}
    if mountpoint -q "$m"; then
      umount "$m" 2>/dev/null || { sleep 1; umount "$m"; } || say "cannot unmount $m"
    fi
  done
  left=$(under_root)
  if [ -n "$left" ]; then
    say "still mounted under $root, NOT deleting it:"
    printf '%s\n' "$left" | sed 's/^/  /' >&2
    exit "$(( st == 0 ? 1 : st ))"
  fi
  if [ "$keep" = 1 ]; then
    say "kept the root (nothing mounted): $root"
  else
    case $root in
    "$cache"/root-*) rm -rf --one-file-system "$root" ;;
    *) say "refusing to delete $root: not $cache/root-*"; exit 1 ;;
    esac
    say "root deleted: $root"
  fi
  say "total $(elapsed)"
  exit "$st"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mount_in_root() { # type-or-bind source target-inside-root [options]
  local how=$1 src=$2 dst=$root$3
  shift 3
  mkdir -p "$dst"
  if [ "$how" = bind ]; then
    mount --bind "$src" "$dst"
  else
    mount -t "$how" "$@" "$src" "$dst"
  fi
  mounts+=("$dst")
}

# ---------------------------------------------------------------- 1. the root
if [ "$use_cache" = 1 ] && [ -s "$tarball" ]; then
  say "pristine minbase root from the cache: $tarball"
  mkdir "$root" && made_root=1
  tar -C "$root" -xpf "$tarball"
else
  say "debootstrap --variant=minbase bookworm from $mirror (a few minutes)..."
  mkdir "$root" && made_root=1
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
    tail -n 20 "$cache/debootstrap.log" >&2
    say "debootstrap failed (log: $cache/debootstrap.log)"
    exit 1
  }
  # What a Debian 12 installation's apt uses.
  cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
  rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"* 2>/dev/null || true
  say "caching the pristine root: $tarball"
  tar -C "$root" -cpf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
fi
say "root ready in $(elapsed): $root ($(chroot "$root" dpkg-query -W | wc -l) packages)"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The machine's way out as well: where the npm registry is reached through a
# proxy that only this host's CA bundle trusts, npm in the root adds that
# bundle (NODE_EXTRA_CA_CERTS adds to the root's own CAs; it replaces none).
extra_ca=()
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/mcroute-fresh-host-ca.crt"
  extra_ca=(NODE_EXTRA_CA_CERTS=/etc/mcroute-fresh-host-ca.crt)
fi

# ---------------------------------------------------------------- 2. mounts
mount_in_root proc proc /proc
mount_in_root sysfs sysfs /sys
mount_in_root bind /dev /dev
mount_in_root bind /dev/pts /dev/pts
mount_in_root tmpfs tmpfs /dev/shm -o mode=1777
mount_in_root tmpfs tmpfs /tmp -o mode=1777
say "mounted: ${mounts[*]#"$root"}"

# ---------------------------------------------------------------- 3. the clone
# A clean clone of the commit, as a user would have it: no build trees, no
# untracked files. The root has no git: the clone is made from here, into it.
say "cloning $(git -C "$here" rev-parse --short "$commit") ($ref)"
git clone -q --no-local "$here" "$root/root/mcroute"
# A commit that no branch or tag holds (one made with git commit-tree, to
# check changes not committed yet) does not come with the clone: fetched by
# its id.
if ! git -C "$root/root/mcroute" cat-file -e "$commit^{commit}" 2>/dev/null; then
  git -C "$root/root/mcroute" -c uploadpack.allowAnySHA1InWant=true fetch -q "$here" "$commit"
fi
git -C "$root/root/mcroute" checkout -q --detach "$commit"
echo "$commit" >"$root/root/mcroute.commit"

# ---------------------------------------------------------------- 4. the commands
results=("nothing run (--run none)")
status=0
[ ${#commands[@]} -gt 0 ] && results=()
for c in "${commands[@]}"; do
  say "running ./scripts/$c.sh in the root ($(elapsed) so far)..."
  t0=$(date +%s)
  set +e
  if [ -n "$log" ]; then
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      TERM="${TERM:-dumb}" LANG=C.UTF-8 "${extra_ca[@]}" /bin/bash -c "cd /root/mcroute && ./scripts/$c.sh" </dev/null 2>&1 |
      tee -a "$log"
    st=${PIPESTATUS[0]}
  else
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      TERM="${TERM:-dumb}" LANG=C.UTF-8 "${extra_ca[@]}" /bin/bash -c "cd /root/mcroute && ./scripts/$c.sh" </dev/null
    st=$?
  fi
  set -e
  t=$(($(date +%s) - t0))
  if [ "$st" -eq 0 ]; then
    results+=("./scripts/$c.sh: PASSED in $((t / 60))m$((t % 60))s")
  else
    results+=("./scripts/$c.sh: FAILED (exit $st) after $((t / 60))m$((t % 60))s")
    status=1
  fi
  say "${results[-1]}"
done
say "commit $commit on a fresh Debian 12 minbase root:"
printf 'fresh-check:   %s\n' "${results[@]}" >&2
exit "$status"
