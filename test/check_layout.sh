#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_layout.sh: the layout rule of the source tree: folders are layers, and calls between folders go one way, down the layers.
#
# Usage: check_layout.sh SOURCE_DIR GROUP...
#
# A GROUP is NAME=OBJ,OBJ,... : the object files of one library or program
# (CMake's $<TARGET_OBJECTS:...>, joined with commas). An object's folder is
# the folder of its source file (CMake names it .../DIR/x.c.o): lib/base,
# lib/hash, ..., compat, tools. Object A calls into object B when an
# undefined symbol of A is defined by B (nm), within one group (a library's
# users call into it; it does not call back). Within a folder, files call
# each other freely. Across folders, a call must go from a folder to one of
# a lower layer in LAYERS below; one that goes up, or sideways to another
# folder of the same layer, fails, naming the files and symbols. A folder
# that is in no layer fails too: give it its place here.
#
# Source files are not held to a length (a file does one job; split a long
# one along its seams): the longest are listed for information.
#
# Exits 1 after listing every problem, 2 on bad usage or a missing tool.
set -euo pipefail

# The layers, lowest first; folders on one line are peers (neither calls
# the other). Each may call those of the lines above it.
LAYERS=(
    "lib/base"
    "lib/hash"
    "lib/placement"
    "lib/snapshot"
    "lib/state"
    "lib/router"
    "lib/pool lib/fleet"
    "lib/migrate compat"
    "tools compat/libketama"
)

[ $# -ge 2 ] || { echo "usage: $0 SOURCE_DIR NAME=OBJ,OBJ..." >&2; exit 2; }
src=$1
shift
[ -d "$src/lib" ] || { echo "check_layout: $src/lib: not a directory" >&2; exit 2; }
command -v nm >/dev/null || { echo "check_layout: nm not found (Debian: binutils)" >&2; exit 2; }

problems=0
fail() {
    echo "check_layout: $*" >&2
    problems=$((problems + 1))
}

# The layer of each folder.
declare -A rank
for i in "${!LAYERS[@]}"; do
    for d in ${LAYERS[$i]}; do
        rank[$d]=$i
    done
done
# Every folder of sources has a layer.
while IFS= read -r d; do
    d=${d#"$src"/}
    [ -n "${rank[$d]+x}" ] || fail "$d: a folder of sources in no layer (add it to LAYERS in check_layout.sh)"
done < <(find "$src/lib" "$src/compat" "$src/tools" -name '*.c' -printf '%h\n' | sort -u)

# The source of an object: CMake names it <target>.dir/DIR/x.c.o.
srcname() {
    local o=${1%.o}
    echo "${o#*.dir/}"
}
folder() {
    local s
    s=$(srcname "$1")
    echo "${s%/*}"
}

nobjs=0 nedges=0 nfolders=0
declare -A seen_edge
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
    # "a b sym": object a uses symbol sym that object b defines.
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
                if (t != "" && t != u[1])
                    print u[1], t, u[2]
            }
        }' >"$tmp"
    while read -r a b sym; do
        fa=$(folder "$a") fb=$(folder "$b")
        [ "$fa" = "$fb" ] && continue
        key="$fa>$fb"
        if [ -z "${seen_edge[$key]+x}" ]; then
            seen_edge[$key]=1
            nedges=$((nedges + 1))
        fi
        ra=${rank[$fa]:-} rb=${rank[$fb]:-}
        if [ -z "$ra" ] || [ -z "$rb" ]; then
            fail "$name: $(srcname "$a") calls $(srcname "$b") ($sym): folder in no layer"
        elif [ "$rb" -ge "$ra" ]; then
            fail "$name: $(srcname "$a") calls $sym in $(srcname "$b"): $fa may not call" \
                "$fb ($([ "$rb" -eq "$ra" ] && echo "a peer" || echo "a higher layer"))"
        fi
    done <"$tmp"
done
nfolders=${#rank[@]}

if [ "$problems" -gt 0 ]; then
    echo "check_layout: FAILED: $problems problem(s)" >&2
    exit 1
fi
echo "check_layout: OK: $nobjs objects in $# groups, $nfolders folders in ${#LAYERS[@]} layers;" \
    "$nedges calls between folders, all down the layers"
echo "check_layout: the longest source files (guidance, not a limit):"
find "$src/lib" "$src/compat" "$src/tools" -name '*.[ch]' -exec wc -l {} + | grep -v ' total$' |
    sort -rn | sed -n "1,5{s|$src/||; s/^ */  /; p}"
