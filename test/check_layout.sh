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
for group in "$@"; do
    name=${group%%=*}
    list=${group#*=}
    [ "$name" != "$group" ] && [ -n "$list" ] ||
        { echo "check_layout: '$group': not NAME=OBJ,OBJ..." >&2; exit 2; }
    IFS=, read -r -a objs <<<"$list"
    declare -A def=()
    declare -A edge=()
    for o in "${objs[@]}"; do
        [ -f "$o" ] || { echo "check_layout: $name: $o: no such object" >&2; exit 2; }
        nobjs=$((nobjs + 1))
        while read -r sym; do
            def[$sym]=$o
        done < <(nm -g --defined-only "$o" | awk 'NF == 3 { print $3 }')
    done
    for o in "${objs[@]}"; do
        while read -r sym; do
            t=${def[$sym]:-}
            if [ -n "$t" ] && [ "$t" != "$o" ]; then
                edge["$o>$t"]+="${edge["$o>$t"]:+ }$sym"
            fi
        done < <(nm -u "$o" | awk '{ print $NF }')
    done
    for k in "${!edge[@]}"; do
        a=${k%%>*} b=${k##*>}
        npairs=$((npairs + 1))
        if [ -n "${edge["$b>$a"]:-}" ] && [[ $a < $b ]]; then
            fail "$name: $(srcname "$a") and $(srcname "$b") call into each other:" \
                "$(srcname "$a") uses ${edge[$k]}; $(srcname "$b") uses ${edge["$b>$a"]}"
        fi
    done
    unset def edge
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
