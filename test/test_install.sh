#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_install.sh: `cmake --install` of a finished build into a temporary prefix, checked file by file, then used by programs built with pkg-config and with find_package.
#
# Usage: test_install.sh NAME=VALUE...   (test/CMakeLists.txt passes them all)
#   build, src          the build tree (already built) and the source tree
#   cmake, cc, pkgconf  the cmake, C compiler and pkg-config of the build
#   generator, make     CMake generator and make program, for the consumer project
#   version             the project version (MAJOR.MINOR.PATCH)
#   mandate             the release date of the man pages (MCR_MAN_DATE)
#   bindir, libdir, includedir, mandir, datadir
#                       the GNUInstallDirs destinations (relative to the prefix)
#   sanitize            compiler flags of the sanitizer the build uses, or empty
#   libmemcached, ketama  1 when libmcroute_libmemcached / libketama were built
#   parts               what the build made beside libmcroute and libketama,
#                       comma-separated, among pool, twemproxy, fleet,
#                       migrate, libmemcached and cli (the mcroute command)
#                       (cmake/options.cmake; default: all of them)
#   readme              the README whose CMake consumer block is built
#                       (default: SRC/README.md)
#
# Steps:
#   1. install into TMP/inst, then move the tree to TMP/moved/inst: every
#      consumer below uses the moved tree, so an absolute path written at
#      install time (in a .pc file, a CMake file, an RPATH) fails the test;
#   2. check the installed files: libmcroute.so.MAJOR as the SONAME of the
#      shared library, libmcroute.a, every public header and the generated
#      mcroute_version.h, every man page in its section (with the version
#      and date in .TH), the mcroute command
#      (--help, --version), libketama, libmcroute_libmemcached, the pkg-config
#      and CMake package files, bash completion when the sources have one, and
#      no path of the build or source tree in any installed text file; of a
#      library the build did not make (parts), none of its files: library,
#      header, .pc file, targets, man pages (nor mcroute(1) and the
#      completion without the command);
#   3. build test/install_consumer/consumer.c (and version_only.c, which
#      includes <mcroute_version.h> alone) with `pkg-config mcroute`, against
#      the shared library and, with --static, against libmcroute.a, with
#      pkg-config seeing only the installed .pc files (PKG_CONFIG_LIBDIR), not
#      those of libmcroute's dependencies: a program using the shared library
#      needs nothing but mcroute installed, and its cflags name no system
#      include directory; the same with find_package(mcroute COMPONENTS shared)
#      and no dependency visible to CMake's pkg-config; build the
#      CMake project test/install_consumer with find_package(mcroute CONFIG)
#      (mcroute::mcroute, mcroute::mcroute_static, mcroute_libmemcached);
#      build the libketama and libmemcached consumers with their .pc files;
#   4. run them: each prints the header's and the library's versions and the
#      server of each key, which must be what the installed `mcroute locate`
#      prints (and one fixed vector, from mcroute(7)); in a build without the
#      command, the fixed tables below (want_s, want_t, want_l), which the
#      command, when built, must print too;
#   5. the version file: find_package(mcroute X.Y) finds this MAJOR.MINOR for
#      every X.Y of the same major version up to it (0.1 finds 0.4), and
#      refuses the next minor and the next major;
#   6. README's first program and its CMake consumer: the ```c block
#      between <!-- first-program begin --> and <!-- first-program end -->
#      as example.c, built with pkg-config as the README says, and with the
#      ```cmake block between <!-- consumer-cmake begin --> and
#      <!-- consumer-cmake end --> as it is as its CMakeLists.txt; each run
#      as the README's "$ ./example ARGS" line, printing what the README
#      shows; no such block is a failure;
#   7. placement only: the sources configured with every MCR_WITH_* OFF and
#      -DMCR_BUILD_TESTS=OFF -DMCR_BUILD_BENCH=OFF, pkg-config seeing no
#      module but liburcu-bp and libxxhash (no libevent, jansson, libyaml, libmemcached,
#      Check, libcrypto), built, installed: libmcroute, libketama, their
#      headers, .pc files and CMake package, nothing of the other libraries;
#      consumer.c built against it with pkg-config (shared, --static) and
#      with find_package(mcroute CONFIG) (mcroute::mcroute,
#      mcroute::mcroute_static), and run; COMPONENTS pool refused.
#
# Sanitizer builds: the installed libraries are instrumented, so the
# consumers are compiled and linked with the same -fsanitize flags
# (`sanitize`), which is what a program linking them needs; the test runs in
# full under ASan and TSan too.
set -euo pipefail
# (With pipefail, `producer | grep -q` can fail on a match: grep exits at the
# first one and the producer dies of SIGPIPE. Pipelines below end in
# `grep ... >/dev/null`, which reads everything.)

for arg in "$@"; do
    case $arg in
    build=* | src=* | cmake=* | cc=* | pkgconf=* | generator=* | make=* | version=* | mandate=* | \
        bindir=* | libdir=* | includedir=* | mandir=* | datadir=* | sanitize=* | \
        libmemcached=* | ketama=* | parts=* | readme=*)
        declare "${arg%%=*}=${arg#*=}" ;;
    *) echo "test_install: unknown argument: $arg" >&2; exit 2 ;;
    esac
done
for v in build src cmake cc pkgconf generator version mandate bindir libdir includedir mandir datadir; do
    [ -n "${!v:-}" ] || { echo "test_install: missing argument $v=" >&2; exit 2; }
done
make=${make:-}
sanitize=${sanitize:-}
libmemcached=${libmemcached:-0}
ketama=${ketama:-0}
parts=${parts-pool,twemproxy,fleet,migrate,libmemcached,cli}
readme=${readme:-$src/README.md}
# has PART: did the build make it?
has() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
for x in ${parts//,/ }; do
    case $x in
    pool | twemproxy | fleet | migrate | libmemcached | cli) ;;
    *) echo "test_install: parts=$parts: unknown part $x" >&2; exit 2 ;;
    esac
done
for d in bindir libdir includedir mandir datadir; do
    case ${!d} in
    /*) echo "test_install: $d=${!d} is absolute: such an install cannot move" >&2; exit 1 ;;
    esac
done
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
# The SONAME's version (CMakeLists.txt, MCR_SOVERSION): the major one from
# 1.0 on; 0.MINOR before, since a 0.x minor release may change the ABI. (The
# CMake package's versions are checked in (5) below.)
if [ "$major" = 0 ]; then
    sover=0.$minor
else
    sover=$major
fi
# shellcheck disable=SC2206 # the flags are words
san=($sanitize)

problems=0
fail() {
    echo "test_install: FAIL: $*" >&2
    problems=$((problems + 1))
}
ok() { echo "test_install: ok: $*"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------ 1. install, move
if ! "$cmake" --install "$build" --prefix "$tmp/inst" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log" >&2
    echo "test_install: FAIL: cmake --install $build" >&2
    exit 1
fi
mkdir "$tmp/moved"
mv "$tmp/inst" "$tmp/moved/inst"
p=$tmp/moved/inst
ok "installed $(grep -c '^-- Installing' "$tmp/install.log") files, tree moved to $p"

# ------------------------------------------------------------ 2. files
exists() { # path...
    local f
    for f in "$@"; do
        [ -e "$p/$f" ] || fail "not installed: $f"
    done
}
absent() { # why path...: none is installed, the build not having WHY
    local why=$1 f
    shift
    for f in "$@"; do
        [ -e "$p/$f" ] && fail "installed without $why: $f"
    done
    return 0
}
soname() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# The libraries, split by dependency: libmcroute needs neither
# libevent nor libyaml nor jansson, the pool, the YAML reader and the fleet
# their own. Those the build made, and nothing of the others.
# check_libs PREFIX PART...: the libraries, .pc files and targets of the
# install at PREFIX (p), those of the PARTs built present, the others absent.
check_libs() {
    local p=$1 l part
    shift
    for l in libmcroute "$@"; do
        exists "$libdir/$l.so" "$libdir/$l.so.$sover" "$libdir/$l.so.$version" "$libdir/$l.a"
        if [ -e "$p/$libdir/$l.so" ]; then
            s=$(soname "$p/$libdir/$l.so")
            [ "$s" = "$l.so.$sover" ] || fail "$l.so has SONAME '$s', not $l.so.$sover"
            [ "$(readlink "$p/$libdir/$l.so")" = "$l.so.$sover" ] ||
                fail "$l.so does not link to $l.so.$sover"
        fi
    done
    for part in pool twemproxy fleet migrate; do
        if [[ " $* " == *" libmcroute_$part "* ]]; then
            exists "$libdir/pkgconfig/mcroute-$part.pc"
        else
            absent "libmcroute_$part" "$libdir/libmcroute_$part.so" "$libdir/libmcroute_$part.so.$sover" \
                "$libdir/libmcroute_$part.a" "$libdir/pkgconfig/mcroute-$part.pc"
            grep -l "mcroute::mcroute_$part\b" "$p/$libdir"/cmake/mcroute/*targets*.cmake >"$tmp/t" 2>/dev/null &&
                fail "installed without libmcroute_$part, yet named in $(sed "s|^$p/||" "$tmp/t" | tr '\n' ' ')"
        fi
    done
    return 0
}
built_libs=()
for part in pool twemproxy fleet migrate; do
    has $part && built_libs+=("libmcroute_$part")
done
check_libs "$p" "${built_libs[@]}"
if has cli; then
    exists "$bindir/mcroute"
else
    absent "the mcroute command" "$bindir/mcroute"
fi
# needs_only LIB WANTED...: LIB's NEEDED entries that are not libc, libm,
# the loader, libpthread, a sanitizer's runtime (in an ASan, UBSan or TSan
# build), or one of WANTED (prefixes) are a failure.
needs_only() {
    local lib=$1 n w ok; shift
    [ -e "$p/$libdir/$lib" ] || return 0
    for n in $(needed "$p/$libdir/$lib"); do
        ok=0
        for w in libc.so libm.so ld-linux libpthread.so libasan.so libubsan.so libtsan.so "$@"; do
            case $n in "$w"*) ok=1 ;; esac
        done
        [ $ok = 1 ] || fail "$lib needs $n (only $* expected beside libc)"
    done
}
needs_only libmcroute.so liburcu-bp.so liburcu-common.so libxxhash.so
# (A library not built is not there: needs_only returns at once.)
needs_only libmcroute_pool.so "libmcroute.so.$sover" libevent_core
needs_only libmcroute_twemproxy.so "libmcroute.so.$sover" libyaml
needs_only libmcroute_fleet.so "libmcroute.so.$sover" libevent_extra libevent_core libjansson
needs_only libmcroute_migrate.so "libmcroute.so.$sover" "libmcroute_pool.so.$sover" libevent_core

# header_part HEADER: the part whose header it is (cmake/install.cmake),
# empty for libmcroute's; built_header HEADER: is it installed here?
header_part() {
    case $1 in
    mcroute_pool.h) echo pool ;;
    mcroute_twemproxy.h) echo twemproxy ;;
    mcroute_fleet.h) echo fleet ;;
    mcroute_migrate.h) echo migrate ;;
    mcroute_memcached_st.h | mcroute_memcached_attach.h) echo libmemcached ;;
    esac
}
built_header() {
    local part
    part=$(header_part "$1")
    [ -z "$part" ] || has "$part"
}
# Every public header of the sources (of a library built), and the
# generated one with this version.
hdrs=0
for h in "$src"/include/*.h; do
    if built_header "$(basename "$h")"; then
        exists "$includedir/$(basename "$h")"
        hdrs=$((hdrs + 1))
    else
        absent "libmcroute_$(header_part "$(basename "$h")")" "$includedir/$(basename "$h")"
    fi
done
vh=$p/$includedir/mcroute_version.h
exists "$includedir/mcroute_version.h"
if [ -e "$vh" ]; then
    grep -q "^#define MCR_VERSION_STRING \"$version\"$" "$vh" ||
        fail "$includedir/mcroute_version.h does not define MCR_VERSION_STRING \"$version\""
    grep -q '@' "$vh" && fail "$includedir/mcroute_version.h has an unreplaced @VARIABLE@"
fi

# Every man page in its section; a full page (not a ".so" alias) as the
# build made it: its .TH has the release date and this version
# ("mcroute $version"), and no @PLACEHOLDER@ is left (cmake/man.cmake).
# Not mcroute(1) without the command, nor a page of section 3 whose
# SYNOPSIS includes (.B #include <...>) the header of a library not built.
# built_page PAGE: is the man page (a source path) installed by this build?
built_page() {
    local h
    case $(basename "$1") in
    mcroute.1) has cli; return ;;
    *.3) ;;
    *) return 0 ;;
    esac
    while read -r h; do
        built_header "$h" || return 1
    done < <(sed -n 's/^\.B #include <\([^>]*\)>.*/\1/p' "$1")
    return 0
}
pages=0
for m in "$src"/man/*.[0-9]; do
    n=$(basename "$m")
    i=$p/$mandir/man${n##*.}/$n
    if ! built_page "$m"; then
        absent "what man/$n documents" "$mandir/man${n##*.}/$n"
        continue
    fi
    exists "$mandir/man${n##*.}/$n"
    pages=$((pages + 1))
    [ -e "$i" ] || continue
    grep -q '^\.so ' "$i" && continue
    grep -E "^\.TH [^ ]+ [0-9] \"$mandate\" \"mcroute $version\"" "$i" >/dev/null ||
        fail "$mandir/man${n##*.}/$n: .TH does not say \"$mandate\" \"mcroute $version\": $(grep '^\.TH' "$i" || echo 'no .TH')"
    if grep -n '@[A-Z_]*@' "$i" >"$tmp/at"; then
        fail "$mandir/man${n##*.}/$n: unreplaced placeholder: $(head -1 "$tmp/at")"
    fi
done

# The command: linked statically with libmcroute, it runs without it.
if [ -x "$p/$bindir/mcroute" ]; then
    "$p/$bindir/mcroute" --help >"$tmp/help" 2>&1 || fail "$bindir/mcroute --help failed: $(head -3 "$tmp/help")"
    grep -q '^Usage: mcroute' "$tmp/help" || fail "$bindir/mcroute --help prints no usage"
    v=$("$p/$bindir/mcroute" --version 2>&1) || true
    [ "$v" = "mcroute $version" ] || fail "$bindir/mcroute --version prints '$v', not 'mcroute $version'"
    needed "$p/$bindir/mcroute" | grep '^libmcroute' >/dev/null && fail "$bindir/mcroute needs libmcroute.so at run time"
fi

if [ "$ketama" = 1 ]; then
    exists "$libdir/libketama.so" "$libdir/libketama.so.2" "$libdir/libketama.a" \
        "$includedir/mcroute-ketama/ketama.h" "$libdir/pkgconfig/mcroute-ketama.pc"
    [ -e "$p/$libdir/libketama.so" ] && [ "$(soname "$p/$libdir/libketama.so")" != libketama.so.2 ] &&
        fail "libketama.so has SONAME '$(soname "$p/$libdir/libketama.so")', not libketama.so.2"
fi
if [ "$libmemcached" = 1 ]; then
    exists "$libdir/libmcroute_libmemcached.so" "$libdir/libmcroute_libmemcached.so.$sover" \
        "$libdir/pkgconfig/mcroute-libmemcached.pc" "$libdir/cmake/mcroute/mcroute-libmemcached-targets.cmake"
else
    absent "libmcroute_libmemcached" "$libdir/libmcroute_libmemcached.so" \
        "$libdir/pkgconfig/mcroute-libmemcached.pc" "$libdir/cmake/mcroute/mcroute-libmemcached-targets.cmake"
fi
exists "$libdir/pkgconfig/mcroute.pc" "$libdir/cmake/mcroute/mcroute-config.cmake" \
    "$libdir/cmake/mcroute/mcroute-config-version.cmake"

if has cli; then
    exists "$datadir/bash-completion/completions/mcroute"
else
    absent "the mcroute command" "$datadir/bash-completion/completions/mcroute"
fi

# No installed text file names the build or source tree, and no ELF file
# has a run path into them.
grep -rIlF -e "$build" -e "$src" -e "$tmp/inst" "$p" >"$tmp/paths" || true
while read -r f; do fail "${f#"$p"/} names the build or source tree"; done <"$tmp/paths"
while IFS= read -r -d '' f; do
    if readelf -d "$f" 2>/dev/null | grep -E '\((RPATH|RUNPATH)\)' | grep -F -e "$build" -e "$src" >/dev/null; then
        fail "${f#"$p"/} has a run path into the build tree"
    fi
done < <(for d in "$p/$libdir" "$p/$bindir"; do [ ! -d "$d" ] || find "$d" -type f -print0; done)
[ "$problems" -eq 0 ] && ok "files: libmcroute.so.$version (SONAME libmcroute.so.$sover), libmcroute.a," \
    "$hdrs headers + mcroute_version.h, $pages man pages, $(has cli && echo "mcroute --help/--version" ||
        echo "no mcroute command"), .pc and CMake files," \
    "no build path"

# ------------------------------------------------------------ 3-4. consumers
cs=$src/test/install_consumer
export PKG_CONFIG_PATH=$p/$libdir/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR CMAKE_PREFIX_PATH
cflags=(-std=c11 -Wall -Wextra -Werror -O1 "${san[@]}")

servers=10.0.0.1,10.0.0.2,10.0.0.3:11212
keys=(user:42 foo bar hello "key with spaces" 0123456789)
printf 'alpha:\n  listen: 127.0.0.1:22121\n  hash: fnv1a_64\n  distribution: ketama\n  servers:\n   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:1\n   - 10.0.0.3:11212:2\n' \
    >"$tmp/alpha.yml"
lmc_opts='--SERVER=10.0.0.1 --SERVER=10.0.0.2 --SERVER=10.0.0.3:11212 --DISTRIBUTION=consistent'
# Where the keys go: with -s "$servers" (want_s), in the first pool of
# alpha.yml (want_t) and with the libmemcached options lmc_opts (want_l).
# What the installed mcroute says, which must be these tables; in a build
# without the command, the tables.
want_s=$'user:42\t10.0.0.1:11211\nfoo\t10.0.0.2:11211\nbar\t10.0.0.1:11211\nhello\t10.0.0.1:11211\nkey with spaces\t10.0.0.1:11211\n0123456789\t10.0.0.2:11211'
want_t=$'user:42\t10.0.0.1:11211\nfoo\t10.0.0.3:11212\nbar\t10.0.0.3:11212\nhello\t10.0.0.3:11212\nkey with spaces\t10.0.0.3:11212\n0123456789\t10.0.0.3:11212'
want_l=$'user:42\t10.0.0.2:11211\nfoo\t10.0.0.2:11211\nbar\t10.0.0.1:11211\nhello\t10.0.0.2:11211\nkey with spaces\t10.0.0.3:11212\n0123456789\t10.0.0.2:11211'
# reference FILE TABLE OPTION ARG: into FILE, where `mcroute locate OPTION
# ARG KEY...` puts the keys, which must be TABLE; TABLE without the command.
reference() {
    local file=$1 table=$2 opt=$3 arg=$4
    if ! has cli; then
        printf '%s\n' "$table" >"$file"
    elif ! "$p/$bindir/mcroute" locate "$opt" "$arg" "${keys[@]}" >"$file" 2>"$tmp/err"; then
        fail "mcroute locate $opt failed: $(cat "$tmp/err")"
    elif ! diff -u <(printf '%s\n' "$table") "$file" >"$tmp/diff"; then
        fail "mcroute locate $opt $arg: not the table of test_install.sh (placement changed? then the table too):"
        cat "$tmp/diff" >&2
    fi
}
# by: what the consumers' outputs are compared with, for messages.
by="mcroute locate"
has cli || by="test_install.sh's table for mcroute locate (no command built)"
reference "$tmp/want.keys" "$want_s" -s "$servers"
# One fixed vector, mcroute(7)'s example.
grep -qx "$(printf 'user:42\t10.0.0.1:11211')" "$tmp/want.keys" ||
    fail "mcroute locate puts user:42 elsewhere than 10.0.0.1:11211 (mcroute(7))"
{
    echo "header $version"
    echo "library $version"
    cat "$tmp/want.keys"
} >"$tmp/want"
# parts_consumer.c: the pool's refusal, then the keys in alpha.yml.
reference "$tmp/want.twem" "$want_t" -t "$tmp/alpha.yml"
{
    echo "pool: invalid"
    cat "$tmp/want.twem"
} >"$tmp/want.parts"

# run_against WANT WHAT NAME BINARY ARGS...: runs BINARY ARGS (the installed
# lib dir on the library path, nothing of the build tree) and compares its
# output with the file WANT; WHAT says where WANT came from, for messages.
run_against() {
    local want=$1 what=$2 name=$3 bin=$4
    shift 4
    if ! LD_LIBRARY_PATH=$p/$libdir "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then
        fail "$name: exited with an error: $(cat "$tmp/err")"
    elif ! diff -u "$want" "$tmp/out" >"$tmp/diff"; then
        fail "$name: output differs from '$what':"
        cat "$tmp/diff" >&2
    else
        ok "$name: ${#keys[@]} keys as $what places them"
    fi
}
# run_consumer NAME BINARY: consumer.c's versions and placements.
run_consumer() {
    run_against "$tmp/want" "$by" "$1" "$2" "$servers" "${keys[@]}"
}
# uses_lib BINARY SONAME: is the library among its NEEDED, loaded from the install?
uses_installed() {
    local bin=$1 lib=$2
    LD_LIBRARY_PATH=$p/$libdir ldd "$bin" 2>/dev/null | grep -F "$lib => $p/$libdir/$lib" >/dev/null
}

mkdir "$tmp/pc"
# pkg-config that sees only the install's .pc files: none of the
# dependencies' (yaml-0.1, liburcu-bp, libxxhash, libevent_core), as on a machine where
# only mcroute is installed.
only_mcroute() { PKG_CONFIG_LIBDIR=$p/$libdir/pkgconfig PKG_CONFIG_PATH= "$@"; }
for dep in yaml-0.1 liburcu-bp libxxhash libevent_core; do
    only_mcroute "$pkgconf" --exists "$dep" &&
        fail "pkg-config with PKG_CONFIG_LIBDIR=$p/$libdir/pkgconfig still finds $dep: the checks below prove nothing"
done
# (a) pkg-config, shared: mcroute.pc alone is enough, and its cflags are the
# install's include directory, nothing else (no -I/usr/include/... of a
# dependency's .pc file).
if ! pc_shared=$(only_mcroute "$pkgconf" --cflags --libs mcroute 2>"$tmp/err"); then
    fail "pkg-config --cflags --libs mcroute needs more than mcroute installed: $(cat "$tmp/err")"
fi
pc_cflags=$(only_mcroute "$pkgconf" --cflags mcroute 2>/dev/null) || true
# shellcheck disable=SC2086 # the flags are words
for f in $pc_cflags; do
    case $f in
    -I/usr/include* | -I/usr/local/include*) fail "pkg-config --cflags mcroute: a system include directory: $f" ;;
    -I*) [ "$(realpath -m "${f#-I}")" = "$(realpath -m "$p/$includedir")" ] ||
        fail "pkg-config --cflags mcroute: $f (only the install's $includedir expected)" ;;
    *) fail "pkg-config --cflags mcroute: $f (only -I of the install's $includedir expected)" ;;
    esac
done
# shellcheck disable=SC2046,SC2086 # pkg-config prints words
if "$cc" "${cflags[@]}" -o "$tmp/pc/consumer_shared" "$cs/consumer.c" "$cs/version_only.c" \
    $pc_shared 2>"$tmp/err"; then
    uses_installed "$tmp/pc/consumer_shared" "libmcroute.so.$sover" ||
        fail "pkg-config shared consumer does not load $p/$libdir/libmcroute.so.$sover"
    # A program that includes only mcroute.h loads no libevent, no libyaml.
    LD_LIBRARY_PATH=$p/$libdir ldd "$tmp/pc/consumer_shared" 2>/dev/null |
        grep -E 'libevent|libyaml' >&2 &&
        fail "pkg-config mcroute (shared) consumer loads libevent or libyaml"
    run_consumer "pkg-config mcroute (shared)" "$tmp/pc/consumer_shared"
else
    fail "cannot build with pkg-config --cflags --libs mcroute: $(cat "$tmp/err")"
fi

# (a') pkg-config --static: libmcroute.a and what Libs.private /
# Requires.private add. -lmcroute would take the .so beside the .a, so it
# is replaced by the archive itself.
# It too needs only mcroute.pc (the dependencies are -l flags in Libs.private).
read -ra static_libs <<<"$(only_mcroute "$pkgconf" --static --libs mcroute)"
for i in "${!static_libs[@]}"; do
    [ "${static_libs[$i]}" = -lmcroute ] && static_libs[i]=$p/$libdir/libmcroute.a
done
# shellcheck disable=SC2046
if "$cc" "${cflags[@]}" -o "$tmp/pc/consumer_static" "$cs/consumer.c" "$cs/version_only.c" \
    $(only_mcroute "$pkgconf" --static --cflags mcroute) "${static_libs[@]}" 2>"$tmp/err"; then
    needed "$tmp/pc/consumer_static" | grep '^libmcroute' >/dev/null &&
        fail "pkg-config --static consumer needs libmcroute.so"
    run_consumer "pkg-config --static mcroute (libmcroute.a)" "$tmp/pc/consumer_static"
else
    fail "cannot link libmcroute.a with pkg-config --static --libs mcroute: $(cat "$tmp/err")"
fi

# (a'') The pool and the YAML reader, through mcroute-pool.pc and
# mcroute-twemproxy.pc only: shared (each loads its library from the
# install), then --static (their .a files; libevent_core and libyaml come
# from Libs.private as -l flags); when both libraries are built.
run_parts() { # NAME BINARY: parts_consumer.c's pool refusal and placements
    run_against "$tmp/want.parts" "$by -t" "$1" "$2" "$tmp/alpha.yml" "${keys[@]}"
}
if has pool && has twemproxy; then
    # shellcheck disable=SC2046
    if "$cc" "${cflags[@]}" -o "$tmp/pc/parts_shared" "$cs/parts_consumer.c" \
        $(only_mcroute "$pkgconf" --cflags --libs mcroute-pool mcroute-twemproxy) 2>"$tmp/err"; then
        for l in libmcroute_pool libmcroute_twemproxy libmcroute; do
            uses_installed "$tmp/pc/parts_shared" "$l.so.$sover" ||
                fail "pkg-config mcroute-pool mcroute-twemproxy consumer does not load $p/$libdir/$l.so.$sover"
        done
        run_parts "pkg-config mcroute-pool mcroute-twemproxy (shared)" "$tmp/pc/parts_shared"
    else
        fail "cannot build with pkg-config --cflags --libs mcroute-pool mcroute-twemproxy: $(cat "$tmp/err")"
    fi
    read -ra static_libs <<<"$(only_mcroute "$pkgconf" --static --libs mcroute-pool mcroute-twemproxy)"
    for i in "${!static_libs[@]}"; do
        case ${static_libs[$i]} in
        -lmcroute | -lmcroute_pool | -lmcroute_twemproxy) static_libs[i]=$p/$libdir/lib${static_libs[$i]#-l}.a ;;
        esac
    done
    # shellcheck disable=SC2046
    if "$cc" "${cflags[@]}" -o "$tmp/pc/parts_static" "$cs/parts_consumer.c" \
        $(only_mcroute "$pkgconf" --static --cflags mcroute-pool mcroute-twemproxy) "${static_libs[@]}" 2>"$tmp/err"; then
        needed "$tmp/pc/parts_static" | grep '^libmcroute' >/dev/null &&
            fail "pkg-config --static pool and YAML consumer needs a libmcroute*.so"
        run_parts "pkg-config --static mcroute-pool mcroute-twemproxy (.a files)" "$tmp/pc/parts_static"
    else
        fail "cannot link the .a files with pkg-config --static --libs mcroute-pool mcroute-twemproxy: $(cat "$tmp/err")"
    fi
fi

# (a''') libmcroute_migrate through mcroute-migrate.pc only: a program using
# <mcroute_migrate.h> builds and links against the shared library (which
# brings libmcroute_pool) and, with --static, against the .a files; when
# libmcroute_migrate is built.
if has migrate; then
    cat >"$tmp/migrate_consumer.c" <<'CEOF'
#include <mcroute_migrate.h>
int main(void)
{
    mcr_migrate_options o;
    mcr_migrate_report r;
    mcr_migrate_options_init(&o);
    if (mcr_migrate_run(NULL, NULL, &o, &r, NULL) != MCR_ERR_INVALID)
        return 1;
    return o.concurrency == MCR_MIGRATE_CONCURRENCY ? 0 : 1;
}
CEOF
    # shellcheck disable=SC2046
    if "$cc" "${cflags[@]}" -o "$tmp/pc/migrate_shared" "$tmp/migrate_consumer.c" \
        $(only_mcroute "$pkgconf" --cflags --libs mcroute-migrate) 2>"$tmp/err"; then
        uses_installed "$tmp/pc/migrate_shared" "libmcroute_migrate.so.$sover" ||
            fail "pkg-config mcroute-migrate consumer does not load $p/$libdir/libmcroute_migrate.so.$sover"
        if LD_LIBRARY_PATH=$p/$libdir "$tmp/pc/migrate_shared" 2>"$tmp/err"; then
            ok "pkg-config mcroute-migrate (shared)"
        else
            fail "pkg-config mcroute-migrate (shared) consumer failed: $(cat "$tmp/err")"
        fi
    else
        fail "cannot build with pkg-config --cflags --libs mcroute-migrate: $(cat "$tmp/err")"
    fi
    read -ra static_libs <<<"$(only_mcroute "$pkgconf" --static --libs mcroute-migrate)"
    for i in "${!static_libs[@]}"; do
        case ${static_libs[$i]} in
        -lmcroute | -lmcroute_pool | -lmcroute_migrate) static_libs[i]=$p/$libdir/lib${static_libs[$i]#-l}.a ;;
        esac
    done
    # shellcheck disable=SC2046
    if "$cc" "${cflags[@]}" -o "$tmp/pc/migrate_static" "$tmp/migrate_consumer.c" \
        $(only_mcroute "$pkgconf" --static --cflags mcroute-migrate) "${static_libs[@]}" 2>"$tmp/err"; then
        needed "$tmp/pc/migrate_static" | grep '^libmcroute' >/dev/null &&
            fail "pkg-config --static mcroute-migrate consumer needs a libmcroute*.so"
        if "$tmp/pc/migrate_static" 2>"$tmp/err"; then
            ok "pkg-config --static mcroute-migrate (.a files)"
        else
            fail "pkg-config --static mcroute-migrate consumer failed: $(cat "$tmp/err")"
        fi
    else
        fail "cannot link with pkg-config --static --libs mcroute-migrate: $(cat "$tmp/err")"
    fi
fi

# (b) CMake: find_package(mcroute CONFIG) from the moved prefix, asking for
# the components of the libraries built (MCR_PARTS).
cmake_args=(-S "$cs" -B "$tmp/cmake" -G "$generator" -DCMAKE_PREFIX_PATH="$p"
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$sanitize"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DMCR_EXPECTED_VERSION="${version%.*}"
    -DMCR_WITH_LIBMEMCACHED="$libmemcached" -DMCR_PARTS="${parts//,/;}")
[ -n "$make" ] && cmake_args+=(-DCMAKE_MAKE_PROGRAM="$make")
if ! "$cmake" "${cmake_args[@]}" >"$tmp/cmake.log" 2>&1; then
    fail "find_package(mcroute CONFIG) project does not configure:"
    sed 's/^/    /' "$tmp/cmake.log" >&2
elif ! grep -qF "mcroute $version from $p/$libdir/cmake/mcroute" "$tmp/cmake.log"; then
    fail "find_package(mcroute) did not find $version in $p/$libdir/cmake/mcroute:"
    grep 'mcroute' "$tmp/cmake.log" >&2 || true
elif ! "$cmake" --build "$tmp/cmake" >"$tmp/build.log" 2>&1; then
    fail "find_package(mcroute CONFIG) project does not build:"
    sed 's/^/    /' "$tmp/build.log" >&2
else
    uses_installed "$tmp/cmake/consumer_shared" "libmcroute.so.$sover" ||
        fail "CMake consumer_shared does not load $p/$libdir/libmcroute.so.$sover"
    needed "$tmp/cmake/consumer_static" | grep '^libmcroute' >/dev/null &&
        fail "CMake consumer_static (mcroute::mcroute_static) needs libmcroute.so"
    run_consumer "CMake mcroute::mcroute" "$tmp/cmake/consumer_shared"
    run_consumer "CMake mcroute::mcroute_static" "$tmp/cmake/consumer_static"
    if has pool && has twemproxy; then
        needed "$tmp/cmake/parts_static" | grep '^libmcroute' >/dev/null &&
            fail "CMake parts_static (mcroute::mcroute_pool_static, _twemproxy_static) needs a libmcroute*.so"
        run_parts "CMake mcroute::mcroute_pool, mcroute::mcroute_twemproxy" "$tmp/cmake/parts_shared"
        run_parts "CMake mcroute::mcroute_pool_static, mcroute::mcroute_twemproxy_static" "$tmp/cmake/parts_static"
    fi
fi

# (b') CMake, shared only: find_package(mcroute COMPONENTS shared) with no
# dependency visible to pkg-config (CMake's pkg-config sees the prefix only).
cmake_args=(-S "$cs" -B "$tmp/cmake-shared" -G "$generator" -DCMAKE_PREFIX_PATH="$p"
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$sanitize"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DMCR_EXPECTED_VERSION="${version%.*}" -DMCR_SHARED_ONLY=ON
    -DMCR_PARTS="${parts//,/;}")
[ -n "$make" ] && cmake_args+=(-DCMAKE_MAKE_PROGRAM="$make")
if ! only_mcroute "$cmake" "${cmake_args[@]}" >"$tmp/cmake-shared.log" 2>&1; then
    fail "find_package(mcroute CONFIG COMPONENTS shared) does not configure with only mcroute installed:"
    sed 's/^/    /' "$tmp/cmake-shared.log" >&2
elif ! only_mcroute "$cmake" --build "$tmp/cmake-shared" -- VERBOSE=1 >"$tmp/build-shared.log" 2>&1; then
    fail "find_package(mcroute CONFIG COMPONENTS shared) project does not build:"
    sed 's/^/    /' "$tmp/build-shared.log" >&2
else
    grep -E -- '-I ?/usr/(local/)?include|-isystem ?/usr/(local/)?include' "$tmp/build-shared.log" >&2 &&
        fail "CMake mcroute::mcroute: a system include directory on the compile line"
    run_consumer "CMake mcroute::mcroute (only mcroute installed)" "$tmp/cmake-shared/consumer_shared"
    if has pool && has twemproxy; then
        run_parts "CMake mcroute::mcroute_pool, _twemproxy (only mcroute installed)" "$tmp/cmake-shared/parts_shared"
    fi
fi

# (5) The version file (SameMajorVersion, CMakeLists.txt): a request for
# MAJOR.Y finds this version for every Y up to MINOR (find_package(mcroute
# 0.1) finds 0.4, as README.md says), never the next minor nor the next
# major. One project, each request in turn, mcroute_DIR forgotten between.
if [ "$major" = 0 ]; then
    accept=(0.1 "0.$minor" "$version")
    [ "$minor" -gt 2 ] && accept+=("0.$((minor - 1))")
else
    accept=("$major.0" "$major.$minor" "$version")
fi
refuse=("$major.$((minor + 1))" "$((major + 1)).0")
mkdir "$tmp/versions"
cat >"$tmp/versions/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(version_check NONE)
foreach(v IN LISTS ACCEPT)
  unset(mcroute_DIR CACHE)
  find_package(mcroute ${v} CONFIG QUIET COMPONENTS shared)
  if(NOT mcroute_FOUND OR NOT mcroute_VERSION STREQUAL VERSION)
    message(SEND_ERROR "find_package(mcroute ${v} CONFIG) does not find the installed ${VERSION}")
  else()
    message(STATUS "find_package(mcroute ${v} CONFIG): ${mcroute_VERSION}")
  endif()
endforeach()
foreach(v IN LISTS REFUSE)
  unset(mcroute_DIR CACHE)
  find_package(mcroute ${v} CONFIG QUIET COMPONENTS shared)
  if(mcroute_FOUND)
    message(SEND_ERROR "find_package(mcroute ${v} CONFIG) accepts the installed ${VERSION}")
  else()
    message(STATUS "find_package(mcroute ${v} CONFIG): refused")
  endif()
endforeach()
EOF
if "$cmake" -S "$tmp/versions" -B "$tmp/versions/b" -DCMAKE_PREFIX_PATH="$p" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DVERSION="$version" \
    -DACCEPT="$(IFS=';'; echo "${accept[*]}")" -DREFUSE="$(IFS=';'; echo "${refuse[*]}")" \
    >"$tmp/versions.log" 2>&1; then
    ok "mcroute-config-version.cmake: $version found for ${accept[*]}, refused for ${refuse[*]}"
else
    fail "mcroute-config-version.cmake:"
    grep -A2 'Error' "$tmp/versions.log" >&2
fi

# libketama's C API through mcroute-ketama.pc, shared and static; the vector
# is libketama's own sample file (as examples/CMakeLists.txt checks).
if [ "$ketama" = 1 ]; then
    printf '# address\tmemory\n10.0.1.1:11211\t600\n10.0.1.2:11211\t300\n10.0.1.3:11211\t200\n' \
        >"$tmp/ketama.servers"
    printf '%s\n' 'foo -> 10.0.1.2:11211 (3677104571)' 'bar -> 10.0.1.1:11211 (447304801)' \
        'hello -> 10.0.1.3:11211 (736160602)' >"$tmp/ketama.want"
    read -ra kstatic <<<"$("$pkgconf" --static --libs mcroute-ketama)"
    for i in "${!kstatic[@]}"; do
        case ${kstatic[$i]} in
        -lketama) kstatic[i]=$p/$libdir/libketama.a ;;
        -lmcroute) kstatic[i]=$p/$libdir/libmcroute.a ;;
        esac
    done
    for how in shared static; do
        if [ $how = shared ]; then
            # libketama.so needs libmcroute.so.$sover, which the linker looks
            # for in its default places, not in -L directories: a prefix
            # outside them needs -rpath-link (or LD_LIBRARY_PATH) at link time.
            read -ra klibs <<<"$("$pkgconf" --libs mcroute-ketama)"
            klibs+=("-Wl,-rpath-link,$p/$libdir")
        else
            klibs=("${kstatic[@]}")
        fi
        # shellcheck disable=SC2046
        if ! "$cc" "${cflags[@]}" -o "$tmp/pc/ketama_$how" "$cs/ketama_consumer.c" \
            $("$pkgconf" --cflags mcroute-ketama) "${klibs[@]}" 2>"$tmp/err"; then
            fail "cannot build with pkg-config mcroute-ketama ($how): $(cat "$tmp/err")"
        elif ! LD_LIBRARY_PATH=$p/$libdir "$tmp/pc/ketama_$how" "$tmp/ketama.servers" foo bar hello \
            >"$tmp/out" 2>"$tmp/err"; then
            fail "ketama consumer ($how) failed: $(cat "$tmp/err")"
        elif ! diff -u "$tmp/ketama.want" "$tmp/out" >&2; then
            fail "ketama consumer ($how): wrong servers"
        else
            ok "pkg-config mcroute-ketama ($how): libketama's sample vectors"
        fi
    done
fi

# libmcroute_libmemcached through mcroute-libmemcached.pc and through
# mcroute::mcroute_libmemcached: the same servers as `mcroute locate -l`.
if [ "$libmemcached" = 1 ]; then
    opts=$lmc_opts
    reference "$tmp/lmc.want" "$want_l" -l "$opts"
    # shellcheck disable=SC2046
    if ! "$cc" "${cflags[@]}" -o "$tmp/pc/lmc_consumer" "$cs/lmc_consumer.c" \
        $("$pkgconf" --cflags --libs mcroute-libmemcached) 2>"$tmp/err"; then
        fail "cannot build with pkg-config mcroute-libmemcached: $(cat "$tmp/err")"
    fi
    for bin in "$tmp/pc/lmc_consumer" "$tmp/cmake/lmc_consumer"; do
        [ -x "$bin" ] || continue
        if ! LD_LIBRARY_PATH=$p/$libdir "$bin" "$opts" "${keys[@]}" >"$tmp/out" 2>"$tmp/err"; then
            fail "${bin#"$tmp"/} failed: $(cat "$tmp/err")"
        elif ! diff -u "$tmp/lmc.want" "$tmp/out" >&2; then
            fail "${bin#"$tmp"/}: output differs from '$by -l'"
        else
            ok "${bin#"$tmp"/}: ${#keys[@]} keys as $by -l places them"
        fi
    done
fi

# (6) README.md's first program and its CMake consumer: the ```c block
# between <!-- first-program begin --> and <!-- first-program end -->, as
# example.c, built with the README's pkg-config line and, with the ```cmake
# block between <!-- consumer-cmake begin --> and <!-- consumer-cmake end -->
# as it is as its CMakeLists.txt, configured and built against the install;
# each program run as the README's "$ ./example ARGS" line runs it, its
# output the lines the README shows after it. No block, or not exactly one
# fenced block between the markers, is a failure: the README's
# instructions would go unchecked.
# readme_block FILE: the block's lines; exit status 3 no markers, 4 not one
# begin and one end, 5 no ```cmake fence between them, 6 more than one, 7
# a fence not closed, 8 an empty block.
readme_block() { # FILE [MARKER LANG]: consumer-cmake cmake by default
    awk -v mk="${2:-consumer-cmake}" -v lang="${3:-cmake}" '
        $0 ~ "<!-- " mk " begin -->" { nb++; inb = 1; next }
        $0 ~ "<!-- " mk " end -->" { ne++; inb = 0; next }
        inb && !fence && $0 ~ "^[ \t]*```" lang "[ \t]*$" { fence = 1; nf++; next }
        inb && fence && /^[ \t]*```[ \t]*$/ { fence = 0; closed++; next }
        inb && fence { print; n++ }
        END {
            if (nb == 0 && ne == 0) exit 3
            if (nb != 1 || ne != 1) exit 4
            if (nf == 0) exit 5
            if (nf > 1) exit 6
            if (fence || closed != 1) exit 7
            if (n == 0) exit 8
        }' "$1"
}
mkdir "$tmp/readme"
rst=0
if [ ! -f "$readme" ]; then
    rst=2
else
    readme_block "$readme" >"$tmp/readme/CMakeLists.txt" || rst=$?
fi
# readme_run FILE: the arguments of the README's "$ ./example ARGS" line
# into $tmp/readme/args (one a line) and the lines it prints after it into
# $tmp/readme/want; status 1 when there is no such line.
readme_run() {
    awk -v args="$tmp/readme/args" -v want="$tmp/readme/want" '
        inrun && (/^```/ || /^\$ /) { inrun = 0 }
        inrun { print > want; next }
        /^\$ \.\/example( |$)/ && !done {
            n = split($0, w, " ")
            for (i = 3; i <= n; i++) print w[i] > args
            inrun = 1; done = 1; printf "" > want
        }
        END { exit done ? 0 : 1 }' "$1"
}
# readme_check NAME BINARY: the program run as the README runs it.
readme_check() {
    local -a a=()
    mapfile -t a <"$tmp/readme/args"
    if ! LD_LIBRARY_PATH=$p/$libdir "$2" "${a[@]}" >"$tmp/out" 2>"$tmp/err"; then
        fail "$1: exited with an error: $(cat "$tmp/err")"
    elif ! diff -u "$tmp/readme/want" "$tmp/out" >"$tmp/diff"; then
        fail "$1: output differs from what README.md shows:"
        cat "$tmp/diff" >&2
    else
        ok "$1: prints what README.md shows (${#a[@]} keys)"
    fi
}
cst=0
[ "$rst" -ne 0 ] || readme_block "$readme" first-program c >"$tmp/readme/example.c" || cst=$?
[ "$rst" -ne 0 ] || [ "$cst" -ne 0 ] || readme_run "$readme" ||
    { fail "$readme: no \"\$ ./example ARGS\" line with the output of the first program"; cst=9; }
case $cst in
0) ;;
3 | 4 | 5 | 6 | 7 | 8) fail "$readme: the first program (a \`\`\`c fence between <!-- first-program" \
        "begin --> and <!-- first-program end -->) cannot be read (awk status $cst)"; rst=10 ;;
esac
case $rst in
0)
    # the README's own line: cc example.c $(pkg-config --cflags --libs mcroute)
    # shellcheck disable=SC2046 # pkg-config prints words
    if "$cc" "${cflags[@]}" "$tmp/readme/example.c" $(only_mcroute "$pkgconf" --cflags --libs mcroute) \
        -Wl,-rpath,"$p/$libdir" -o "$tmp/readme/example_pc" 2>"$tmp/err"; then
        readme_check "README.md's first program (pkg-config)" "$tmp/readme/example_pc"
    else
        fail "README.md's first program does not build with pkg-config: $(cat "$tmp/err")"
    fi
    cmake_args=(-S "$tmp/readme" -B "$tmp/readme/b" -G "$generator" -DCMAKE_PREFIX_PATH="$p"
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
    [ -n "$make" ] && cmake_args+=(-DCMAKE_MAKE_PROGRAM="$make")
    if ! "$cmake" "${cmake_args[@]}" >"$tmp/readme.log" 2>&1; then
        fail "README.md's consumer-cmake block does not configure against the install:"
        sed 's/^/    /' "$tmp/readme/CMakeLists.txt" "$tmp/readme.log" >&2
    elif ! "$cmake" --build "$tmp/readme/b" >"$tmp/readme-build.log" 2>&1; then
        fail "README.md's consumer-cmake block does not build example.c:"
        sed 's/^/    /' "$tmp/readme/CMakeLists.txt" "$tmp/readme-build.log" >&2
    elif [ ! -x "$tmp/readme/b/example" ]; then
        fail "README.md's consumer-cmake block builds no program example" \
            "(add_executable(example example.c))"
    else
        readme_check "README.md's first program (find_package)" "$tmp/readme/b/example"
    fi
    ;;
10) ;;
2) fail "$readme: no such file, so no consumer-cmake block to build" ;;
3) fail "$readme has no CMake consumer block: the lines <!-- consumer-cmake begin --> and" \
        "<!-- consumer-cmake end --> around a \`\`\`cmake fence (find_package(mcroute ... CONFIG" \
        "REQUIRED), add_executable(example example.c), target_link_libraries(example ... mcroute::...))" ;;
4) fail "$readme: not exactly one <!-- consumer-cmake begin --> and one <!-- consumer-cmake end --> line" ;;
5) fail "$readme: no \`\`\`cmake fence between <!-- consumer-cmake begin --> and <!-- consumer-cmake end -->" ;;
6) fail "$readme: more than one \`\`\`cmake fence between the consumer-cmake markers" ;;
7) fail "$readme: the \`\`\`cmake fence between the consumer-cmake markers is not closed" ;;
8) fail "$readme: the \`\`\`cmake block between the consumer-cmake markers is empty" ;;
*) fail "$readme: reading the consumer-cmake block failed (awk status $rst)" ;;
esac

# (7) Placement only: the sources configured with every MCR_WITH_* OFF and
# neither tests nor benchmarks, pkg-config seeing liburcu-bp and libxxhash
# alone (the dependencies of libmcroute: no libevent, jansson, libyaml, libmemcached,
# Check or libcrypto to find), built, installed, moved, and used.
m=$tmp/min
mkdir "$m" "$m/pc"
only_urcu() { PKG_CONFIG_LIBDIR=$m/pc PKG_CONFIG_PATH='' "$@"; }
placement_only() {
    local p=$m/moved/inst t0=$SECONDS h n
    local urcu
    urcu=$("$pkgconf" --variable=pcfiledir liburcu-bp 2>/dev/null)/liburcu-bp.pc
    if [ ! -f "$urcu" ]; then
        fail "placement-only build: liburcu-bp.pc not found by $pkgconf"
        return
    fi
    ln -s "$urcu" "$m/pc/"
    local xxh
    xxh=$("$pkgconf" --variable=pcfiledir libxxhash 2>/dev/null)/libxxhash.pc
    if [ ! -f "$xxh" ]; then
        fail "placement-only build: libxxhash.pc not found by $pkgconf"
        return
    fi
    ln -s "$xxh" "$m/pc/"
    only_urcu "$pkgconf" --exists libevent_core yaml-0.1 jansson libmemcached check libcrypto 2>/dev/null &&
        fail "placement-only build: pkg-config with PKG_CONFIG_LIBDIR=$m/pc still finds other modules"
    local args=(-S "$src" -B "$m/build" -G "$generator" -DCMAKE_C_COMPILER="$cc"
        -DCMAKE_BUILD_TYPE=Debug -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
        -DMCR_WITH_POOL=OFF -DMCR_WITH_TWEMPROXY=OFF -DMCR_WITH_FLEET=OFF -DMCR_WITH_MIGRATE=OFF
        -DMCR_WITH_LIBMEMCACHED=OFF -DMCR_BUILD_TESTS=OFF -DMCR_BUILD_BENCH=OFF
        -DCMAKE_INSTALL_BINDIR="$bindir" -DCMAKE_INSTALL_LIBDIR="$libdir"
        -DCMAKE_INSTALL_INCLUDEDIR="$includedir" -DCMAKE_INSTALL_MANDIR="$mandir"
        -DCMAKE_INSTALL_DATADIR="$datadir")
    [ -n "$make" ] && args+=(-DCMAKE_MAKE_PROGRAM="$make")
    if ! only_urcu "$cmake" "${args[@]}" >"$m/cmake.log" 2>&1; then
        fail "placement-only build (every MCR_WITH_* OFF, pkg-config seeing liburcu-bp alone) does not configure:"
        sed 's/^/    /' "$m/cmake.log" >&2
        return
    fi
    n=$(grep '^-- Checking for module' "$m/cmake.log" | grep -v "'liburcu-bp'\$" | grep -v "'libxxhash'\$" | tr '\n' ' ' || true)
    [ -z "$n" ] || fail "placement-only configure looks for modules beside liburcu-bp and libxxhash: $n"
    grep -A1 '^mcroute: not built:' "$m/cmake.log" >/dev/null ||
        fail "placement-only configure does not say what it does not build"
    if ! "$cmake" --build "$m/build" --parallel 2 >"$m/build.log" 2>&1; then
        fail "placement-only build does not build:"
        tail -40 "$m/build.log" | sed 's/^/    /' >&2
        return
    fi
    if ! "$cmake" --install "$m/build" --prefix "$m/inst" >"$m/install.log" 2>&1; then
        fail "placement-only build does not install:"
        sed 's/^/    /' "$m/install.log" >&2
        return
    fi
    mkdir "$m/moved"
    mv "$m/inst" "$p"
    ok "placement-only build: configured with liburcu-bp alone, built and installed" \
        "($(grep -c '^-- Installing' "$m/install.log") files) in $((SECONDS - t0)) s"

    # libmcroute and libketama, their headers, .pc files and CMake package;
    # nothing of the other libraries, nor the command.
    check_libs "$p"
    exists "$libdir/libketama.so.2" "$libdir/libketama.a" "$includedir/mcroute-ketama/ketama.h" \
        "$includedir/mcroute_version.h" "$libdir/pkgconfig/mcroute.pc" "$libdir/pkgconfig/mcroute-ketama.pc" \
        "$libdir/cmake/mcroute/mcroute-config.cmake" "$libdir/cmake/mcroute/mcroute-config-version.cmake" \
        "$libdir/cmake/mcroute/mcroute-shared-targets.cmake" "$libdir/cmake/mcroute/mcroute-static-targets.cmake" \
        "$mandir/man3/mcr_ring_new.3" "$mandir/man7/mcroute.7"
    for h in "$src"/include/*.h; do
        n=$(basename "$h")
        if [ -n "$(header_part "$n")" ]; then
            absent "libmcroute_$(header_part "$n")" "$includedir/$n"
        else
            exists "$includedir/$n"
        fi
    done
    absent "the mcroute command" "$bindir/mcroute" "$mandir/man1/mcroute.1" \
        "$datadir/bash-completion/completions/mcroute"
    absent "libmcroute_libmemcached" "$libdir/libmcroute_libmemcached.so" \
        "$libdir/pkgconfig/mcroute-libmemcached.pc" "$libdir/cmake/mcroute/mcroute-libmemcached-targets.cmake"
    absent "libmcroute_pool" "$mandir/man3/mcr_pool_new.3"
    needs_only libmcroute.so liburcu-bp.so liburcu-common.so libxxhash.so

    # consumer.c with pkg-config, shared and --static, seeing only the
    # install's .pc files.
    local only=(env PKG_CONFIG_LIBDIR="$p/$libdir/pkgconfig" PKG_CONFIG_PATH=)
    local libs
    # shellcheck disable=SC2046 # pkg-config prints words
    if "$cc" -std=c11 -Wall -Wextra -Werror -O1 -o "$m/consumer_shared" "$cs/consumer.c" \
        "$cs/version_only.c" $("${only[@]}" "$pkgconf" --cflags --libs mcroute) 2>"$tmp/err"; then
        uses_installed "$m/consumer_shared" "libmcroute.so.$sover" ||
            fail "placement-only pkg-config consumer does not load $p/$libdir/libmcroute.so.$sover"
        run_consumer "placement only: pkg-config mcroute (shared)" "$m/consumer_shared"
    else
        fail "placement only: cannot build with pkg-config --cflags --libs mcroute: $(cat "$tmp/err")"
    fi
    read -ra libs <<<"$("${only[@]}" "$pkgconf" --static --libs mcroute)"
    for n in "${!libs[@]}"; do
        [ "${libs[$n]}" = -lmcroute ] && libs[n]=$p/$libdir/libmcroute.a
    done
    # shellcheck disable=SC2046
    if "$cc" -std=c11 -Wall -Wextra -Werror -O1 -o "$m/consumer_static" "$cs/consumer.c" \
        "$cs/version_only.c" $("${only[@]}" "$pkgconf" --static --cflags mcroute) "${libs[@]}" 2>"$tmp/err"; then
        run_consumer "placement only: pkg-config --static mcroute (libmcroute.a)" "$m/consumer_static"
    else
        fail "placement only: cannot link libmcroute.a with pkg-config --static: $(cat "$tmp/err")"
    fi

    # find_package(mcroute MAJOR.MINOR CONFIG REQUIRED COMPONENTS shared
    # static): mcroute::mcroute and mcroute::mcroute_static, CMake's
    # pkg-config seeing liburcu-bp alone (the static library's dependency).
    args=(-S "$cs" -B "$m/cmake" -G "$generator" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_C_COMPILER="$cc"
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
        -DMCR_EXPECTED_VERSION="${version%.*}" -DMCR_WITH_LIBMEMCACHED=0 -DMCR_PARTS=)
    [ -n "$make" ] && args+=(-DCMAKE_MAKE_PROGRAM="$make")
    if ! only_urcu "$cmake" "${args[@]}" >"$m/consumer.log" 2>&1; then
        fail "placement only: find_package(mcroute CONFIG) project does not configure:"
        sed 's/^/    /' "$m/consumer.log" >&2
    elif ! only_urcu "$cmake" --build "$m/cmake" >"$m/consumer-build.log" 2>&1; then
        fail "placement only: find_package(mcroute CONFIG) project does not build:"
        sed 's/^/    /' "$m/consumer-build.log" >&2
    else
        run_consumer "placement only: CMake mcroute::mcroute" "$m/cmake/consumer_shared"
        run_consumer "placement only: CMake mcroute::mcroute_static" "$m/cmake/consumer_static"
    fi
    # COMPONENTS pool: refused, saying why.
    mkdir "$m/nopool"
    printf '%s\n' 'cmake_minimum_required(VERSION 3.18)' 'project(nopool NONE)' \
        "find_package(mcroute ${version%.*} CONFIG REQUIRED COMPONENTS pool)" >"$m/nopool/CMakeLists.txt"
    if only_urcu "$cmake" -S "$m/nopool" -B "$m/nopool/b" -DCMAKE_PREFIX_PATH="$p" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$m/nopool.log" 2>&1; then
        fail "placement only: find_package(mcroute CONFIG REQUIRED COMPONENTS pool) succeeds"
    elif ! grep -q 'built without libmcroute_pool' "$m/nopool.log"; then
        fail "placement only: find_package(... COMPONENTS pool) fails without saying why:"
        sed 's/^/    /' "$m/nopool.log" >&2
    else
        ok "placement only: find_package(mcroute COMPONENTS pool) refused (built without libmcroute_pool)"
    fi
    # README.md's CMake block too, when it links only libmcroute.
    local others=x
    if [ "$rst" = 0 ]; then
        others=$(grep -o 'mcroute::[A-Za-z0-9_]*' "$tmp/readme/CMakeLists.txt" |
            grep -vx -e 'mcroute::mcroute' -e 'mcroute::mcroute_static' || true)
    fi
    if [ -z "$others" ]; then
        args=(-S "$tmp/readme" -B "$m/readme" -G "$generator" -DCMAKE_PREFIX_PATH="$p"
            -DCMAKE_C_COMPILER="$cc" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
        [ -n "$make" ] && args+=(-DCMAKE_MAKE_PROGRAM="$make")
        if ! only_urcu "$cmake" "${args[@]}" >"$m/readme.log" 2>&1 ||
            ! only_urcu "$cmake" --build "$m/readme" >>"$m/readme.log" 2>&1; then
            fail "placement only: README.md's consumer-cmake block does not build against it:"
            sed 's/^/    /' "$m/readme.log" >&2
        else
            readme_check "placement only: README.md's first program (find_package)" \
                "$m/readme/example"
        fi
    elif [ "$rst" = 0 ]; then
        ok "placement only: README.md's consumer-cmake block links ${others//$'\n'/ } (not libmcroute alone): not built here"
    fi
}
placement_only

if [ "$problems" -gt 0 ]; then
    echo "test_install: FAILED: $problems problem(s)" >&2
    exit 1
fi
if [ -n "$sanitize" ]; then
    echo "test_install: OK (consumers built with $sanitize, as the installed libraries are)"
else
    echo "test_install: OK"
fi
