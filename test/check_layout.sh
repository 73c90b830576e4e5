#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_layout.sh: the layout rules of the source tree: no two files call into each other, and no source file is past the length limit.
#
# Usage: check_layout.sh [--max-lines N] SOURCE_DIR GROUP...
#
# A GROUP is NAME=OBJ,OBJ,... : the object files of one library or program
# (CMake's $<TARGET_OBJECTS:...>, joined with commas). Within a group, file A
# calls into file B when an undefined symbol of A.o is defined by B.o (nm);
# the check fails on every pair that calls both ways, naming the symbols of
# each direction. Files of different groups are not compared (a library's
# users call into it; it does not call back).
#
# Every *.c and *.h under SOURCE_DIR/lib, SOURCE_DIR/compat and
# SOURCE_DIR/tools must be at most N lines (default 1300: "about 1,200").
#
# Exits 1 after listing every problem, 2 on bad usage or a missing tool.
set -euo pipefail

max=1300
if [ "${1:-}" = --max-lines ]; then
    [[ ${2:-} =~ ^[1-9][0-9]*$ ]] ||
        { echo "check_layout: --max-lines: a positive number, not '${2:-}'" >&2; exit 2; }
    max=$2
    shift 2
fi
[ $# -ge 2 ] || { echo "usage: $0 [--max-lines N] SOURCE_DIR NAME=OBJ,OBJ..." >&2; exit 2; }
src=$1
shift
[ -d "$src/lib" ] || { echo "check_layout: $src/lib: not a directory" >&2; exit 2; }
command -v nm >/dev/null || { echo "check_layout: nm not found (Debian: binutils)" >&2; exit 2; }

problems=0
fail() {
    echo "check_layout: $*" >&2
    problems=$((problems + 1))
}

# The source file an object was built from: CMake names it DIR/x.c.o.
srcname() {
    local o=${1%.o}
    o=${o#*.dir/}
    echo "$o"
}

npairs=0 nobjs=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for group in "$@"; do
    name=${group%%=*}
    list=${group#*=}
    [ "$name" != "$group" ] && [ -n "$list" ] ||
        { echo "check_layout: '$group': not NAME=OBJ,OBJ..." >&2; exit 2; }
    IFS=, read -r -a objs <<<"$list"
    for o in "${objs[@]}"; do
        [ -f "$o" ] || { echo "check_layout: $name: $o: no such object" >&2; exit 2; }
    done
    nobjs=$((nobjs + ${#objs[@]}))
    # "D obj sym" for every global definition, "U obj sym" for every
    # undefined symbol; then the edges a -> b with their symbols, and the
    # pairs that go both ways.
    {
        for o in "${objs[@]}"; do
            nm -g --defined-only "$o" | awk -v o="$o" 'NF == 3 { print "D", o, $3 }'
            nm -u "$o" | awk -v o="$o" '{ print "U", o, $NF }'
        done
    } | awk '
        $1 == "D" { def[$3] = $2; next }
        { use[++n] = $2 SUBSEP $3 }
        END {
            for (i = 1; i <= n; i++) {
                split(use[i], u, SUBSEP)
                t = def[u[2]]
                if (t == "" || t == u[1]) continue
                k = u[1] SUBSEP t
                edge[k] = edge[k] (edge[k] == "" ? "" : " ") u[2]
            }
            for (k in edge) {
                split(k, ab, SUBSEP)
                npairs++
                r = ab[2] SUBSEP ab[1]
                if ((r in edge) && ab[1] < ab[2])
                    print "MUTUAL", ab[1], ab[2], edge[k] "|" edge[r]
            }
            print "PAIRS", npairs + 0
        }' >"$tmp"
    while read -r kind a b syms; do
        if [ "$kind" = PAIRS ]; then
            npairs=$((npairs + a))
            continue
        fi
        fail "$name: $(srcname "$a") and $(srcname "$b") call into each other:" \
            "$(srcname "$a") uses ${syms%%|*}; $(srcname "$b") uses ${syms#*|}"
    done <"$tmp"
done

nfiles=0
while IFS= read -r f; do
    nfiles=$((nfiles + 1))
    n=$(wc -l <"$f")
    [ "$n" -le "$max" ] || fail "${f#"$src"/}: $n lines, past the limit of $max: split it along its seams"
done < <(find "$src/lib" "$src/compat" "$src/tools" -name '*.[ch]' | sort)

if [ "$problems" -gt 0 ]; then
    echo "check_layout: FAILED: $problems problem(s)" >&2
    exit 1
fi
echo "check_layout: OK: $nobjs objects in $# groups, $npairs calling pairs, none both ways;" \
    "$nfiles source files, none past $max lines"
