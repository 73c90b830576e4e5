#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ref_gomemcache.sh: build ref_gomemcache.go against Debian's gomemcache (GOPATH /usr/share/gocode) once, into a cache under ${TMPDIR:-/tmp}, and run it.
#
# Usage: ref_gomemcache.sh gomemcache < configs   (protocol: test/ref/README.md)
# Host names: built with cgo and run with GODEBUG=netdns=cgo, Go resolves
# through libc's getaddrinfo, which netns.sh's resolver shim answers from the
# test's hosts file. Go's own resolver reads /etc/hosts (a fixed path) and
# would find none of the test's names: a build without cgo is refused here.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$here/ref_gomemcache.go
lib=/usr/share/gocode/src/github.com/bradfitz/gomemcache/memcache/selector.go
command -v go >/dev/null 2>&1 || { echo "ref_gomemcache.sh: go not found (apt-get install golang-go)" >&2; exit 2; }
[ -r "$lib" ] || { echo "ref_gomemcache.sh: $lib not found (apt-get install golang-github-bradfitz-gomemcache-dev)" >&2; exit 2; }
cache=${TMPDIR:-/tmp}/mcr-ref-go-$(id -u)
mkdir -p "$cache"
bin=$cache/ref_gomemcache
if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ "$lib" -nt "$bin" ] || [ "$0" -nt "$bin" ]; then
    tmp=$(mktemp "$cache/build.XXXXXX")
    # Debian's Go packages are a GOPATH tree; no module, no network
    if ! CGO_ENABLED=1 GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$cache/gocache GOFLAGS= \
        go build -o "$tmp" "$src" >&2; then
        rm -f "$tmp"
        echo "ref_gomemcache.sh: go build failed on $src" >&2
        exit 2
    fi
    mv -f "$tmp" "$bin" # atomic: a concurrent run never sees half a binary
fi
# the cgo resolver is there only in a cgo build (go version -m: its settings)
if ! go version -m "$bin" | grep -q 'CGO_ENABLED=1'; then
    echo "ref_gomemcache.sh: $bin was built without cgo (Go's own resolver reads" \
        "/etc/hosts, not the test's names)" >&2
    exit 2
fi
GODEBUG=${GODEBUG:+$GODEBUG,}netdns=cgo exec "$bin" "$@"
