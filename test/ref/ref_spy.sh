#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ref_spy.sh: where spymemcached puts keys, asked of its own locators (RefSpy.java).
#
# Usage: ref_spy.sh CLIENT < configs
# CLIENT: spymemcached | spymemcached-libmemcached | spymemcached-arraymod.
# Protocol: test/ref/README.md. Compiles RefSpy.java with javac into a cache directory
# under ${TMPDIR:-/tmp} when the class is missing or older than the source (or the jar),
# then runs it with Debian's jar (libspymemcached-java) on the class path.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$here/RefSpy.java
jar=${SPYMEMCACHED_JAR:-/usr/share/java/spymemcached.jar}
if [ $# -ne 1 ]; then
    echo "usage: ref_spy.sh spymemcached|spymemcached-libmemcached|spymemcached-arraymod" >&2
    exit 2
fi
if [ ! -r "$jar" ]; then
    echo "ref_spy.sh: $jar not found (apt-get install libspymemcached-java)" >&2
    exit 2
fi
for tool in javac java; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "ref_spy.sh: $tool not found (apt-get install default-jdk-headless)" >&2
        exit 2
    }
done
cache=${TMPDIR:-/tmp}/mcr-ref-jvm-$(id -u)
mkdir -p "$cache"
class=$cache/RefSpy.class
if [ ! -f "$class" ] || [ "$src" -nt "$class" ] || [ "$jar" -nt "$class" ]; then
    # Compile into a private directory, then rename: concurrent runs never see half a class.
    build=$(mktemp -d "$cache/build.XXXXXX")
    if ! javac -nowarn -encoding UTF-8 -cp "$jar" -d "$build" "$src" >&2; then
        rm -rf "$build"
        echo "ref_spy.sh: javac failed on $src" >&2
        exit 2
    fi
    # RefSpy has a nested class (RefSpy$Malformed): move it first, the main class last.
    for f in "$build"/*.class; do
        [ "$f" = "$build/RefSpy.class" ] || mv -f "$f" "$cache/"
    done
    mv -f "$build/RefSpy.class" "$class"
    rm -rf "$build"
fi
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -cp "$jar:$cache" RefSpy "$1"
