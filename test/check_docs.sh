#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_docs.sh: every public function has a man page with the required sections and an example that compiles; every page renders cleanly; mcroute(1) covers mcroute --help.
#
# Usage: check_docs.sh [--shard K/N] [--man-dir DIR] SOURCE_DIR MCROUTE_BINARY [GENERATED_INCLUDE_DIR]
#
# --shard K/N splits the work into N parts that ctest runs side by side:
# shard 1 runs the checks of the whole tree (0, 1 and 6), and shards 2..N
# the per-page checks (2 to 5), each every (N-1)th page (in name order). The default is 1/1, everything.
#
# The pages of SOURCE_DIR/man carry placeholders in .TH (@MCR_VERSION@,
# @MCR_MAN_DATE@) that the build replaces (cmake/man.cmake). The checks
# below read the pages as the build makes them: --man-dir DIR names the
# build's generated pages (ctest passes it); without it, the script makes
# its own copy, with the version of project() and the MCR_MAN_DATE of
# SOURCE_DIR/CMakeLists.txt.
#
# GENERATED_INCLUDE_DIR holds the build's <mcroute_version.h>; without it, a
# copy is generated from include/mcroute_version.h.in. The C compiler is $CC
# (default cc).
#
# Checks, each failure reported by name (the script exits 1 after listing all):
#   0. every page of SOURCE_DIR/man that is not an alias has one .TH line,
#      whose date is "@MCR_MAN_DATE@" and whose source is
#      "mcroute @MCR_VERSION@" (a page that names a version or a date itself
#      fails), and with --man-dir every page is in DIR and is its source page
#      with the placeholders replaced by the version and date of
#      CMakeLists.txt (a stale or unsubstituted generated page fails);
#   1. every function declared with MCR_EXTERN in SOURCE_DIR/include/*.h (and
#      the templates of generated headers, include/*.h.in), and every function
#      declared with KETAMA_EXTERN in compat/libketama/ketama.h, has
#      SOURCE_DIR/man/<name>.3 (a full page, or an alias of one);
#   2. every page that is not an alias in section 3 has the sections NAME,
#      SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS, THREAD SAFETY, EXAMPLE and
#      SEE ALSO, each once, none empty, in that order (other sections may come
#      between them);
#   3. every page in SOURCE_DIR/man that is not an alias (an alias shows its
#      target) renders with `groff -man -ww` without a
#      warning and with `MANWIDTH=80 man --warnings -l` without a message (and,
#      in sections 3 and 7, without a line wider than 80 columns), has no
#      control byte in its source; every alias is a relative symbolic link to
#      a page of its own section in the same directory that is not an alias
#      (`ln -s page.3 man/name.3`: readable with `man -l` in the tree and once
#      installed; a ".so man3/page.3" page is refused, since `man -l` reads
#      it from the current directory), and with --man-dir is the same link
#      there (cmake/man.cmake);
#   4. every cross-reference to an mcroute page (mcr_*(3), ketama_*(3),
#      mcroute(1), ...) names a page that exists;
#   5. the program of the EXAMPLE of every page of sections 3 and 7 (its
#      .nf/.fi blocks, as man shows them) is a complete C translation unit
#      (its own #include lines) that compiles with
#      `$CC -std=c11 -pedantic -Wall -Wextra -Werror -c` against include/ and
#      compat/libketama/ (examples that need libmemcached's headers are
#      skipped, and said so, when those are not installed);
#   6. every option (long and short) and every command printed by
#      `mcroute --help` and `mcroute help COMMAND` appears in mcroute(1).
set -euo pipefail

usage() {
    echo "usage: $0 [--shard K/N] [--man-dir DIR] SOURCE_DIR MCROUTE_BINARY [GENERATED_INCLUDE_DIR]" >&2
    exit 2
}
shard=1 nshards=1
if [ "${1:-}" = --shard ]; then
    [[ ${2:-} =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
        { echo "check_docs: --shard: K/N with 1 <= K <= N, not '${2:-}'" >&2; exit 2; }
    shard=${BASH_REMATCH[1]} nshards=${BASH_REMATCH[2]}
    shift 2
fi
genman=
if [ "${1:-}" = --man-dir ]; then
    [ -n "${2:-}" ] || usage
    genman=$2
    shift 2
fi
[ $# -eq 2 ] || [ $# -eq 3 ] || usage
src=$1
bin=$2
geninc=${3:-}
srcman="$src/man"
cc=${CC:-cc}

[ -d "$src/include" ] || { echo "check_docs: $src/include: not a directory" >&2; exit 2; }
[ -d "$srcman" ] || { echo "check_docs: $srcman: not a directory" >&2; exit 2; }
[ -z "$genman" ] || [ -d "$genman" ] || { echo "check_docs: --man-dir $genman: not a directory" >&2; exit 2; }
[ -x "$bin" ] || { echo "check_docs: $bin: not an executable" >&2; exit 2; }
[ -z "$geninc" ] || [ -f "$geninc/mcroute_version.h" ] ||
    { echo "check_docs: $geninc/mcroute_version.h: no such file" >&2; exit 2; }
for tool in groff perl man "$cc"; do
    command -v "$tool" >/dev/null ||
        { echo "check_docs: $tool not found (Debian: groff-base, perl-base, man-db, gcc)" >&2; exit 2; }
done

problems=0
fail() {
    echo "check_docs: $*" >&2
    problems=$((problems + 1))
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# An alias is a page of SOURCE_DIR/man that is a symbolic link (to the page
# that documents it). A page whose first line that is neither a comment nor
# blank starts with ".so " is an alias of the old kind, which check 3
# refuses. Both are recorded by name, from the source pages, once for every
# page (scan_pages, below: one perl for all of them, as the checks run per
# page and a few processes per page and check cost a minute on a loaded
# machine); is_alias PAGE looks the answer up for the page of that name,
# wherever PAGE is (the source, the generated pages).
declare -A alias_of=()
scan_pages() { # PAGE...: record which are aliases (1: a link, 2: a .so page)
    local flag path
    while IFS=$'\t' read -r flag path; do
        alias_of[${path##*/}]=$flag
    done < <(perl -e '
        for my $f (@ARGV) {
            my $alias = 0;
            if (-l $f) {
                $alias = 1;
            } elsif (open(my $i, "<", $f)) {
                while (<$i>) {
                    next if /^\.\\"/ || /^\s*$/;
                    $alias = /^\.so / ? 2 : 0;
                    last;
                }
            }
            print "$alias\t$f\n";
        }
    ' "$@")
}
is_alias() {
    [ "${alias_of[${1##*/}]:-0}" != 0 ]
}

# ------------------------------------------------------------ 0. placeholders
# The version and the release date, as the build takes them.
version=$(sed -nE 's/^project\(mcroute VERSION ([0-9]+\.[0-9]+\.[0-9]+)[ )].*/\1/p' "$src/CMakeLists.txt")
mandate=$(sed -nE 's/^set\(MCR_MAN_DATE "?([0-9]{4}-[0-9]{2}-[0-9]{2})"?\)$/\1/p' "$src/CMakeLists.txt")
[ "$(printf '%s\n' "$version" | wc -l)" -eq 1 ] && [ -n "$version" ] ||
    { echo "check_docs: $src/CMakeLists.txt: no 'project(mcroute VERSION X.Y.Z' line" >&2; exit 2; }
[ "$(printf '%s\n' "$mandate" | wc -l)" -eq 1 ] && [ -n "$mandate" ] ||
    { echo "check_docs: $src/CMakeLists.txt: no 'set(MCR_MAN_DATE YYYY-MM-DD)' line" >&2; exit 2; }
# The pages as the build makes them, in $tmp/man: what the checks below read
# unless --man-dir names the build's own.
mkdir "$tmp/man"
shopt -s nullglob
# One perl for every page (a process per page costs seconds on a loaded machine).
VERSION=$version MANDATE=$mandate OUT=$tmp/man perl -e '
    for my $in (@ARGV) {
        (my $name = $in) =~ s{.*/}{};
        next if -l $in && !-e $in; # an alias of a missing page: check 3 says so
        open(my $i, "<", $in) or die "check_docs: $in: $!\n";
        open(my $o, ">", "$ENV{OUT}/$name") or die "check_docs: $ENV{OUT}/$name: $!\n";
        while (<$i>) {
            s/\@MCR_VERSION\@/$ENV{VERSION}/g;
            s/\@MCR_MAN_DATE\@/$ENV{MANDATE}/g;
            print $o $_;
        }
        close($o) or die "check_docs: $ENV{OUT}/$name: $!\n";
    }
' "$srcman"/*.[0-9]
shopt -u nullglob
scan_pages "$srcman"/*.[0-9]
if [ "$shard" -eq 1 ]; then
for page in "$srcman"/*.[0-9]; do
    name=${page##*/}
    if ! is_alias "$page"; then
        th=$(grep '^\.TH' "$page" || true)
        if [ -z "$th" ]; then
            fail "man/$name: no .TH line"
        elif [ "$(printf '%s\n' "$th" | wc -l)" -ne 1 ]; then
            fail "man/$name: $(printf '%s\n' "$th" | wc -l) .TH lines"
        elif ! [[ $th =~ ^\.TH\ [^\ ]+\ [0-9]\ \"@MCR_MAN_DATE@\"\ \"mcroute\ @MCR_VERSION@\"(\ |$) ]]; then
            fail "man/$name: .TH must say \"@MCR_MAN_DATE@\" \"mcroute @MCR_VERSION@\" (the build puts in the date and version), not: $th"
        fi
    fi
    if [ -n "$genman" ]; then
        if [ ! -f "$genman/$name" ]; then
            fail "man/$name: not generated in $genman (re-run cmake)"
        elif [ -L "$page" ] && [ "$(readlink "$genman/$name")" != "$(readlink "$page")" ]; then
            fail "$genman/$name: not a link to $(readlink "$page") as man/$name is (stale? re-run cmake)"
        elif ! cmp -s "$tmp/man/$name" "$genman/$name"; then
            fail "$genman/$name: not man/$name with version $version and date $mandate (stale? re-run cmake)"
        fi
    fi
done
fi
if [ -n "$genman" ]; then
    man=$genman
else
    man=$tmp/man
fi

# ------------------------------------------------------------ 1. functions
# Strip comments and preprocessor lines, then take the identifier before the
# first '(' of every declaration that starts with the export marker.
shopt -s nullglob
headers=("$src"/include/*.h "$src"/include/*.h.in)
shopt -u nullglob
ketama_h=$src/compat/libketama/ketama.h
extract() { # MARKER FILE...
    local marker=$1
    shift
    perl -0777 -ne '
        BEGIN { $m = shift @ARGV }
        s{/\*.*?\*/}{ }gs;
        s{//[^\n]*}{}g;
        s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}mg;
        while (/\b\Q$m\E\b[^;{()]*?\b([A-Za-z_]\w*)\s*\(/g) { print "$1\n" }
    ' "$marker" "$@" </dev/null
}
nfunc=0
if [ "$shard" -eq 1 ]; then
extract MCR_EXTERN "${headers[@]}" | sort -u >"$tmp/functions"
if [ ! -s "$tmp/functions" ]; then
    fail "no MCR_EXTERN function found in $src/include/*.h (is the extraction broken?)"
fi
if [ ! -f "$ketama_h" ]; then
    fail "missing $ketama_h"
else
    extract KETAMA_EXTERN "$ketama_h" | sort -u >"$tmp/ketama_functions"
    [ -s "$tmp/ketama_functions" ] ||
        fail "no KETAMA_EXTERN function found in $ketama_h (is the extraction broken?)"
    cat "$tmp/ketama_functions" >>"$tmp/functions"
fi
nfunc=$(wc -l <"$tmp/functions")
while read -r fn; do
    [ -f "$srcman/$fn.3" ] || fail "missing man page: man/$fn.3 (for $fn(), a public function)"
done <"$tmp/functions"
fi

shopt -s nullglob
pages=()
for page in "$srcman"/*.[0-9]; do pages+=("$man/${page##*/}"); done
shopt -u nullglob
[ ${#pages[@]} -gt 0 ] || fail "no man page in $man"
# This shard's pages, for checks 3 and 5: with one shard all of them; with
# more, shard 1 has the whole-tree checks and none, and the others every
# (N-1)th page.
mine=()
for i in "${!pages[@]}"; do
    if [ "$nshards" -eq 1 ] || [ $((i % (nshards - 1) + 2)) -eq "$shard" ]; then
        mine+=("${pages[$i]}")
    fi
done

# ------------------------------------------------------------ 2. sections
# The headings of a page in order, one a line, quotes removed; then the
# required ones must appear once each, in this order, and have some text.
required=("NAME" "SYNOPSIS" "DESCRIPTION" "RETURN VALUE" "ERRORS" "THREAD SAFETY" "EXAMPLE" "SEE ALSO")
nfull=0
sec3=()
for page in "${mine[@]}"; do
    [[ $page == *.3 ]] || continue
    is_alias "$page" && continue
    nfull=$((nfull + 1))
    sec3+=("$page")
done
# One perl for all of them: each page's headings in order ("H heading",
# quotes removed) and its text lines ("T"); then each required heading must
# be there once, after the one before it, and be followed by text.
if [ ${#sec3[@]} -gt 0 ]; then
    while IFS= read -r line; do fail "$line"; done < <(REQUIRED=$(IFS=$'\t'; echo "${required[*]}") perl -e '
        my @req = split /\t/, $ENV{REQUIRED};
        for my $page (@ARGV) {
            (my $name = $page) =~ s{.*/}{};
            my @h;
            # An unreadable page has no section (check 3 says why).
            open(my $i, "<", $page) or warn "Can\x27t open $page: $!.\n";
            while ($i && defined($_ = <$i>)) {
                if (/^\.SH\s+(.*?)\s*$/) { (my $x = $1) =~ s/"//g; push @h, "H $x"; next }
                push @h, "T" if !/^\.\\"/ && !/^\.(?:PP|P|LP|sp|br|nf|fi|RS|RE|in)\b/ && /\S/;
            }
            my $last = 0;
            for my $sec (@req) {
                my @at = grep { $h[$_] eq "H $sec" } 0 .. $#h;
                if (!@at) { print "man/$name: no $sec section\n"; next }
                if (@at > 1) { printf "man/%s: %d %s sections\n", $name, scalar @at, $sec; next }
                my $at = $at[0] + 1;
                print "man/$name: $sec comes too early (order: @req)\n" if $at < $last;
                $last = $at;
                print "man/$name: empty $sec section\n" unless ($h[$at] // "") eq "T";
            }
        }
    ' "${sec3[@]}")
fi

# ------------------------------------------------------------ 3. rendering
# Installed pages live in man1/, man3/, man7/; in the tree they sit side by
# side, so render from a directory whose manN entries all point at man/ (a
# page that includes another with ".so manN/x.N" finds it there).
mkdir "$tmp/root"
for sec in 1 2 3 4 5 6 7 8; do
    ln -s "$(cd "$man" && pwd)" "$tmp/root/man$sec"
done
absman=$(cd "$man" && pwd)

for page in "${mine[@]}"; do
    name=${page##*/}
    if is_alias "$page"; then
        src_page=$srcman/$name
        if [ ! -L "$src_page" ]; then
            so=$(grep -v '^\.\\"' "$src_page" | grep -v '^[[:space:]]*$' | head -1 || true)
            target=${so#.so }
            fail "man/$name: a '.so' alias, which man -l cannot read from the tree: make it a link to its page: ln -sf ${target##*/} man/$name"
            continue
        fi
        target=$(readlink "$src_page")
        if ! [[ $target =~ ^[^/]+\.([0-9])$ ]] || [ "${BASH_REMATCH[1]}" != "${name##*.}" ]; then
            fail "man/$name: an alias must be a relative link to a page of section ${name##*.} in man/ itself (ln -sf page.${name##*.} man/$name), not to '$target'"
            continue
        fi
        if [ ! -e "$srcman/$target" ]; then
            fail "man/$name: alias of missing page man/$target"
        elif [ -L "$srcman/$target" ]; then
            fail "man/$name: alias of man/$target, itself an alias (link to the page: ln -sf $(readlink "$srcman/$target") man/$name)"
        fi
        # What it shows is its target's rendering, checked as that page.
        continue
    fi
    # A stray control byte (a "\f" typed as a form feed) renders as garbage
    # without any groff warning.
    if LC_ALL=C grep -nP '[\x00-\x08\x0b-\x1f\x7f]' "$page" >"$tmp/ctl"; then
        fail "man/$name: control bytes in the source (line:text): $(cut -c1-60 "$tmp/ctl" | head -3 | tr '\n\f' ' ^')"
    fi
    if ! (cd "$tmp/root" && groff -k -man -Tutf8 -ww -z "$absman/$name") \
        >"$tmp/out" 2>"$tmp/warn"; then
        fail "man/$name: groff failed: $(head -5 "$tmp/warn")"
    elif [ -s "$tmp/warn" ]; then
        fail "man/$name: groff warnings:"
        sed 's/^/    /' "$tmp/warn" >&2
    fi
    # What a reader gets: man's own pipeline at 80 columns. man exits 0 on
    # groff warnings, so any message on stderr is the failure.
    if ! (cd "$tmp/root" && MANWIDTH=80 MAN_KEEP_FORMATTING= man --warnings -l "$absman/$name") \
        >"$tmp/out" 2>"$tmp/warn"; then
        fail "man/$name: man -l failed: $(head -5 "$tmp/warn")"
    elif [ -s "$tmp/warn" ]; then
        fail "man/$name: man -l messages:"
        sed 's/^/    /' "$tmp/warn" >&2
    elif [ ! -s "$tmp/out" ]; then
        fail "man/$name: man -l rendered nothing"
    elif [[ $name == *.[37] ]] &&
        perl -CSD -ne 'chomp; $n++; if (!$w && length > 80) { print "line $n: $_\n"; $w = 1 } END { exit !$w }' \
            "$tmp/out" >"$tmp/wide"; then
        # Lines that no-fill text (synopses, examples) makes wider than the
        # terminal. Sections 3 and 7 only: mcroute(1) is checked by its owner.
        fail "man/$name: wider than 80 columns with man -l: $(cat "$tmp/wide")"
    fi
done

# ------------------------------------------------------------ 4. references
# ".BR mcr_x (3)" and "\fBmcr_x\fP(3)": pages of this project only. One
# perl for all pages, each page's references in sorted order.
full=()
for page in "${mine[@]}"; do
    is_alias "$page" || full+=("$page")
done
if [ ${#full[@]} -gt 0 ]; then
    while IFS= read -r line; do fail "$line"; done < <(SRCMAN=$srcman perl -e '
        for my $page (@ARGV) {
            (my $name = $page) =~ s{.*/}{};
            open(my $i, "<", $page) or next; # check 3 reports it
            my %refs;
            while (<$i>) {
                while (/(?:^\.BR?\s+|\\fB)((?:mcr_|ketama_|mcroute|libmcroute)[\w.-]*)(?:\\f[PR])?\s*\(([0-9])\)/g) {
                    $refs{"$1 $2"} = [$1, $2];
                }
            }
            for my $k (sort keys %refs) {
                my ($ref, $sec) = @{$refs{$k}};
                print "man/$name refers to $ref($sec), which has no page man/$ref.$sec\n"
                    unless -f "$ENV{SRCMAN}/$ref.$sec";
            }
        }
    ' "${full[@]}")
fi

# ------------------------------------------------------------ 5. examples
# The program of an EXAMPLE section is its no-fill blocks (.nf to .fi; prose
# around them is allowed), as man shows them, so that every roff escape is
# resolved as for a reader: they are rendered alone, and the section's
# indentation is removed.
mkdir "$tmp/inc" "$tmp/ex"
if [ -n "$geninc" ]; then
    cp "$geninc/mcroute_version.h" "$tmp/inc/"
else
    sed 's/@PROJECT_VERSION_[A-Z]*@/0/g' "$src/include/mcroute_version.h.in" >"$tmp/inc/mcroute_version.h"
fi
ccflags=(-std=c11 -pedantic -Wall -Wextra -Werror -I"$src/include" -I"$tmp/inc"
         -I"$src/compat/libketama")
have_lmc=1
printf '#include <libmemcached/memcached.h>\n' |
    "$cc" -std=c11 -fsyntax-only -x c - >/dev/null 2>&1 || have_lmc=0
nex=0
nskip=0
for page in "${mine[@]}"; do
    [[ $page == *.[37] ]] || continue
    name=${page##*/}
    is_alias "$page" && continue
    perl -ne '
        BEGIN { print ".TH EXAMPLE 3\n.SH EXAMPLE\n" }
        if (/^\.SH\s/) { $on = /^\.SH\s+"?EXAMPLES?"?\s*$/; $nf = 0; next }
        next unless $on;
        $nf = 1 if /^\.nf\b/;
        print if $nf;
        $nf = 0 if /^\.fi\b/;
        END { print ".SH END\n" }
    ' "$page" >"$tmp/ex/$name.roff"
    groff -k -man -Tascii -P-c -P-b -P-u -rLL=200n -rcR=1 "$tmp/ex/$name.roff" 2>/dev/null |
        perl -ne '
            s/.\x08//g;
            if (/^EXAMPLES?\s*$/) { $on = 1; next }
            if ($on && /^\S/) { $on = 0 }
            push @l, $_ if $on;
            END {
                pop @l while @l && $l[-1] !~ /\S/;
                shift @l while @l && $l[0] !~ /\S/;
                my $min;
                for (@l) { next unless /\S/; /^( *)/; $min = length $1 if !defined $min || length $1 < $min }
                for (@l) { s/^ {$min}// if defined $min; print }
            }
        ' >"$tmp/ex/$name.c"
    [ -s "$tmp/ex/$name.c" ] || continue # section 2 reports a missing EXAMPLE
    if ! grep -q '^#include' "$tmp/ex/$name.c"; then
        fail "man/$name: the EXAMPLE is not a complete program (no #include line)"
        continue
    fi
    if [ $have_lmc -eq 0 ] && grep -Eq '^#include <(libmemcached/|mcroute_memcached_(st|attach)\.h)' "$tmp/ex/$name.c"; then
        echo "check_docs: man/$name: EXAMPLE not compiled: libmemcached's headers are not installed" >&2
        nskip=$((nskip + 1))
        continue
    fi
    if ! "$cc" "${ccflags[@]}" -c -x c "$tmp/ex/$name.c" -o "$tmp/ex/$name.o" 2>"$tmp/ccerr"; then
        fail "man/$name: the EXAMPLE does not compile:"
        sed 's/^/    /' "$tmp/ccerr" | head -20 >&2
    else
        nex=$((nex + 1))
    fi
done

# ------------------------------------------------------------ 6. CLI options
# The text of mcroute(1) as a reader sees it: no hyphenation, lines long
# enough that no option is broken, no overstriking.
nopt=0 commands=
if [ "$shard" -eq 1 ]; then
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
fi

if [ "$problems" -gt 0 ]; then
    echo "check_docs: FAILED: $problems problem(s)" >&2
    exit 1
fi
if [ "$shard" -eq 1 ]; then
    echo "check_docs: OK (shard $shard/$nshards): $nfunc functions documented," \
        "$nopt options and $(echo $commands | wc -w) commands of mcroute --help in mcroute(1);"
fi
echo "check_docs: OK (shard $shard/$nshards): ${#mine[@]} of ${#pages[@]} pages: $nfull" \
    "section-3 pages complete, cross-references resolve, render cleanly (aliases: their" \
    "targets), $nex examples compile ($nskip skipped)"
