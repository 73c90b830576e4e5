#!/usr/bin/env bash
# check_docs.sh: every public function has a man page, every page renders without groff warnings, and mcroute(1) covers every option of mcroute --help.
#
# Usage: check_docs.sh SOURCE_DIR MCROUTE_BINARY
#
# Checks, each failure reported by name (the script exits 1 after listing all):
#   1. every function declared with MCR_EXTERN in SOURCE_DIR/include/*.h (and
#      the templates of generated headers, include/*.h.in) has
#      SOURCE_DIR/man/<name>.3 (a full page, or a ".so man3/<page>.3" alias);
#   2. every page in SOURCE_DIR/man renders with `groff -man -ww` without a
#      warning, and every ".so" alias points at an existing page;
#   3. every cross-reference to an mcroute page (mcr_*(3), mcroute(1), ...)
#      names a page that exists;
#   4. every option (long and short) and every command printed by
#      `mcroute --help` and `mcroute help COMMAND` appears in mcroute(1).
set -euo pipefail

usage() {
    echo "usage: $0 SOURCE_DIR MCROUTE_BINARY" >&2
    exit 2
}
[ $# -eq 2 ] || usage
src=$1
bin=$2
man="$src/man"

[ -d "$src/include" ] || { echo "check_docs: $src/include: not a directory" >&2; exit 2; }
[ -d "$man" ] || { echo "check_docs: $man: not a directory" >&2; exit 2; }
[ -x "$bin" ] || { echo "check_docs: $bin: not an executable" >&2; exit 2; }
for tool in groff perl; do
    command -v "$tool" >/dev/null ||
        { echo "check_docs: $tool not found (Debian: groff-base, perl-base)" >&2; exit 2; }
done

problems=0
fail() {
    echo "check_docs: $*" >&2
    problems=$((problems + 1))
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------ 1. functions
# Strip comments and preprocessor lines, then take the identifier before the
# first '(' of every declaration that starts with MCR_EXTERN.
shopt -s nullglob
headers=("$src"/include/*.h "$src"/include/*.h.in)
shopt -u nullglob
perl -0777 -ne '
    s{/\*.*?\*/}{ }gs;
    s{//[^\n]*}{}g;
    s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}mg;
    while (/\bMCR_EXTERN\b[^;{()]*?\b([A-Za-z_]\w*)\s*\(/g) { print "$1\n" }
' "${headers[@]}" </dev/null | sort -u >"$tmp/functions"

nfunc=$(wc -l <"$tmp/functions")
if [ "$nfunc" -eq 0 ]; then
    fail "no MCR_EXTERN function found in $src/include/*.h (is the extraction broken?)"
fi
while read -r fn; do
    [ -f "$man/$fn.3" ] || fail "missing man page: man/$fn.3 (for $fn(), declared MCR_EXTERN)"
done <"$tmp/functions"

# ------------------------------------------------------------ 2. rendering
# Installed pages live in man1/, man3/, man7/ and aliases say ".so man3/x.3";
# in the tree they sit side by side, so render from a directory whose manN
# entries all point at man/.
shopt -s nullglob
pages=("$man"/*.[0-9])
shopt -u nullglob
[ ${#pages[@]} -gt 0 ] || fail "no man page in $man"
mkdir "$tmp/root"
for sec in 1 2 3 4 5 6 7 8; do
    ln -s "$(cd "$man" && pwd)" "$tmp/root/man$sec"
done

for page in "${pages[@]}"; do
    name=$(basename "$page")
    # An alias is a page whose only request is ".so manN/target.N".
    so=$(grep -v '^\.\\"' "$page" | grep -v '^[[:space:]]*$' || true)
    if [[ $so == .so\ * ]]; then
        target=${so#.so }
        if [ "$(printf '%s\n' "$so" | wc -l)" -ne 1 ] ||
            ! [[ $target =~ ^man([0-9])/[^/]+\.([0-9])$ ]] ||
            [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]; then
            fail "man/$name: an alias must be the single line '.so manN/page.N', got: $so"
            continue
        fi
        if [ ! -f "$man/$(basename "$target")" ]; then
            fail "man/$name: alias of missing page man/$(basename "$target")"
            continue
        fi
    fi
    if ! (cd "$tmp/root" && groff -k -man -Tutf8 -ww -z "$(cd "$man" && pwd)/$name") \
        >"$tmp/out" 2>"$tmp/warn"; then
        fail "man/$name: groff failed: $(head -5 "$tmp/warn")"
    elif [ -s "$tmp/warn" ]; then
        fail "man/$name: groff warnings:"
        sed 's/^/    /' "$tmp/warn" >&2
    fi
done

# ------------------------------------------------------------ 3. references
for page in "${pages[@]}"; do
    name=$(basename "$page")
    # ".BR mcr_x (3)" and "\fBmcr_x\fP(3)": pages of this project only.
    perl -ne '
        while (/(?:^\.BR?\s+|\\fB)((?:mcr_|mcroute|libmcroute)[\w.-]*)(?:\\f[PR])?\s*\(([0-9])\)/g) {
            print "$1 $2\n";
        }
    ' "$page" | sort -u | while read -r ref sec; do
        [ -f "$man/$ref.$sec" ] || echo "man/$name refers to $ref($sec), which has no page man/$ref.$sec"
    done >"$tmp/refs"
    while read -r line; do fail "$line"; done <"$tmp/refs"
done

# ------------------------------------------------------------ 4. CLI options
# The text of mcroute(1) as a reader sees it: no hyphenation, lines long
# enough that no option is broken, no overstriking.
if [ -f "$man/mcroute.1" ]; then
    groff -k -man -Tascii -rLL=2000n -rHY=0 "$man/mcroute.1" 2>/dev/null |
        perl -pe 's/.\x08//g; s/\e\[[0-9;]*m//g' >"$tmp/mcroute.1.txt"
else
    fail "missing man page: man/mcroute.1"
    : >"$tmp/mcroute.1.txt"
fi

if ! "$bin" --help >"$tmp/help" 2>"$tmp/help.err"; then
    fail "'$bin --help' failed: $(head -3 "$tmp/help.err")"
fi
# Commands: the lines of the "Commands:" block of the main help.
commands=$(awk '/^Commands:/ { on = 1; next } on && /^[[:space:]]*$/ { on = 0 }
                on { print $1 }' "$tmp/help")
[ -n "$commands" ] || fail "no 'Commands:' block in '$bin --help' (cannot check commands)"
cp "$tmp/help" "$tmp/allhelp"
for cmd in $commands; do
    grep -Eq "(^|[[:space:]])mcroute $cmd([[:space:]]|\$)" "$tmp/mcroute.1.txt" ||
        fail "command '$cmd' of '$bin --help' is not described in man/mcroute.1"
    [ "$cmd" = help ] && continue
    if ! "$bin" help "$cmd" >>"$tmp/allhelp" 2>"$tmp/help.err"; then
        fail "'$bin help $cmd' failed: $(head -3 "$tmp/help.err")"
    fi
done

# Long options start with a lower-case letter (upper-case ones such as
# --SERVER belong to libmemcached's option strings); short options are a
# single letter with no word character or dash around them.
perl -ne '
    while (/(?<![\w-])(--[a-z][a-z0-9-]*|-[A-Za-z])(?![\w])/g) { print "$1\n" }
' "$tmp/allhelp" | sort -u >"$tmp/options"
nopt=$(wc -l <"$tmp/options")
[ "$nopt" -gt 0 ] || fail "no option found in '$bin --help'"
while read -r opt; do
    grep -Eq -- "(^|[^[:alnum:]_-])$opt([^[:alnum:]_-]|\$)" "$tmp/mcroute.1.txt" ||
        fail "option '$opt' of '$bin --help' does not appear in man/mcroute.1"
done <"$tmp/options"

if [ "$problems" -gt 0 ]; then
    echo "check_docs: FAILED: $problems problem(s)" >&2
    exit 1
fi
echo "check_docs: OK: $nfunc functions documented, ${#pages[@]} pages render cleanly," \
    "$nopt options and $(echo $commands | wc -w) commands of mcroute --help in mcroute(1)"
