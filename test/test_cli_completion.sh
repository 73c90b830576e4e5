#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_cli_completion.sh: the bash completion of mcroute, called as bash calls it (COMP_WORDS, COMP_CWORD), and checked against what the mcroute binary accepts.
#
# Usage: test_cli_completion.sh SOURCE_DIR MCROUTE_BINARY
set -uo pipefail

[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR MCROUTE_BINARY" >&2; exit 2; }
src=$1
bin=$2
file=$src/tools/mcroute.bash-completion
[ -f "$file" ] || { echo "test_cli_completion: $file: no such file" >&2; exit 2; }
# shellcheck source=tools/mcroute.bash-completion
source "$file"

problems=0
fail() {
    echo "test_cli_completion: $*" >&2
    problems=$((problems + 1))
}

complete -p mcroute 2>/dev/null | grep -q -- '-F _mcroute' || fail "'complete -F _mcroute mcroute' not registered"

# comp WORD...: the completions of the last word, sorted, one per line.
comp() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _mcroute mcroute "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" 2>/dev/null
    ((${#COMPREPLY[@]})) && printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort
}

# expect "WANT (space-separated)" WORD...: exactly these completions.
expect() {
    local want got
    # shellcheck disable=SC2086 # the words of $1
    want=$(printf '%s\n' $1 | LC_ALL=C sort)
    shift
    got=$(comp "$@")
    [ "$got" = "$want" ] || fail "completing '$*': got [${got//$'\n'/ }], want [${want//$'\n'/ }]"
}

# has WORD-EXPECTED WORD...: this completion among others.
has() {
    local w=$1
    shift
    comp "$@" | grep -qxF -- "$w" || fail "completing '$*': '$w' missing (got: $(comp "$@" | tr '\n' ' '))"
}

# lacks WORD WORD...: not this one.
lacks() {
    local w=$1
    shift
    comp "$@" | grep -qxF -- "$w" && fail "completing '$*': '$w' offered"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/keys.txt" "$tmp/keyring.snap" "$tmp/servers"
printf 'alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - 127.0.0.1:11211:1\nbeta:\n  servers:\n   - 127.0.0.2:11211:1\n' >"$tmp/nc.yml"

# ------------------------------------------------------------ commands
expect "locate dump hash stats snapshot diff compare clients set get delete probe simulate members watch agent migrate help" mcroute ''
expect "compare clients" mcroute c
expect "publish add remove set-weight set-state show status" mcroute members ''
expect "set-weight set-state show status" mcroute members s
expect "draining down" mcroute members set-state --etcd u --pool p cache1 d
expect "" mcroute members set-state --etcd u --pool p c
expect "set simulate snapshot stats" mcroute s
expect "-h --help -V --version" mcroute -
expect "dump delete diff" mcroute help d
expect "" mcroute help stats ''
expect "pymemcache python-memcached pylibmc pylibmc-ketama" mcroute locate -s h --client py
expect "memjs,dalli" mcroute compare -s h --clients memjs,d

# ------------------------------------------------------------ options per command
expect "--keys --ketama-file" mcroute stats --k
has --json mcroute stats --
has --keys mcroute stats --
has --top mcroute stats --
expect "--top" mcroute stats --to
lacks --top mcroute locate --
expect "--json --help" mcroute clients --
expect "" mcroute clients ''
lacks --ttl mcroute stats --
lacks --replicas mcroute stats --
has --ttl mcroute set --
lacks --json mcroute set --
expect "--hash --help" mcroute hash --
has --json mcroute probe --
has --failure-policy mcroute probe --
expect "--replicas" mcroute locate --rep
has -o mcroute snapshot -
expect "" mcroute locate -- --
expect "--etcd --etcd-prefix --etcd-timeout" mcroute locate --etc
has --etcd mcroute diff --
has --client-id mcroute watch --
lacks -s mcroute watch -
has --snapshot mcroute members publish --
lacks --snapshot mcroute members add --
has --json mcroute members status --
lacks --json mcroute members show --
expect "" mcroute watch --etcd ''

# ------------------------------------------------------------ values
expect "fnv1a_32 fnv1a_64" mcroute locate -s a --hash fnv1a
expect "ketama" mcroute locate -s a -m ke
expect "--mode=ketama" mcroute locate -s a --mode=ke
expect "ketama" mcroute locate -s a --mode = ke
expect "eject" mcroute get -s a --failure-policy e
expect "--failure-policy=fail-fast --failure-policy=failover" mcroute get -s a --failure-policy=f
expect "DISTRIBUTION=" mcroute locate -l x -b DIST
expect "DISTRIBUTION=consistent" mcroute locate -l x -b DISTRIBUTION=con
expect "consistent" mcroute locate -l x -b DISTRIBUTION = con
expect "alpha beta" mcroute locate -t "$tmp/nc.yml" -p ''
expect "beta" mcroute get --twemproxy="$tmp/nc.yml" --pool b
expect "" mcroute set -s a --ttl ''
expect "" mcroute stats -s a --top ''

# ------------------------------------------------------------ file names
expect "$tmp/keys.txt $tmp/keyring.snap" mcroute stats -s a --keys "$tmp/key"
expect "--keys=$tmp/keys.txt" mcroute diff a b --keys="$tmp/keys"
for opt in -f --server-file -t --twemproxy -k --ketama-file --snapshot -o --output; do
    expect "$tmp/servers" mcroute locate "$opt" "$tmp/serv"
done
expect "$tmp/nc.yml" mcroute diff "$tmp/n"
expect "" mcroute locate -s a "$tmp/k" # keys, not files
# simulate: its own options; --keys is a number there, --workload and --svg files
has --workload mcroute simulate --w
has --fail-zone mcroute simulate --fail
expect "" mcroute simulate -n 3 --keys "$tmp/k"
expect "$tmp/keys.txt $tmp/keyring.snap" mcroute simulate -n 3 --workload "$tmp/key"
expect "maglev" mcroute simulate --modes mag
expect "--rate" mcroute migrate a b --ra
expect "--dry-run" mcroute migrate --dr
expect "$tmp/nc.yml" mcroute migrate a "$tmp/n"

# ------------------------------------------------------------ against the binary
# Every option offered for a command is accepted by it, and every other
# option of mcroute is refused by it as not valid there.
all_opts=$(for c in locate dump hash stats snapshot diff clients set get delete probe watch agent migrate; do
    _mcroute_options "$c"
done | tr ' ' '\n' | sort -u)
for c in locate dump hash stats snapshot diff clients set get delete probe watch agent migrate \
    "members publish" "members add" "members remove" "members set-weight" \
    "members set-state" "members show" "members status"; do
    # shellcheck disable=SC2086 # "members SUB": two words
    offered=" $(_mcroute_options $c) "
    read -r -a cw <<<"$c"
    for o in $all_opts; do
        case $o in
        --json | --help) args=("${cw[@]}" "$o" --help) ;;
        *) args=("${cw[@]}" "$o" 1 --help) ;;
        esac
        "$bin" "${args[@]}" >/dev/null 2>"$tmp/err"
        st=$?
        if [[ $offered == *" $o "* ]]; then
            [ $st -eq 0 ] || fail "'mcroute ${args[*]}': status $st, but the completion offers $o: $(cat "$tmp/err")"
        else
            if [ $st -ne 2 ] || ! grep -q 'not valid here' "$tmp/err"; then
                fail "'mcroute ${args[*]}': status $st, but the completion does not offer $o"
            fi
        fi
    done
done
# Every command of the completion is one of the binary's, and back.
for c in ${_mcroute_commands% help}; do
    "$bin" help "$c" >/dev/null 2>&1 || fail "'mcroute help $c' fails"
done
listed=$("$bin" --help | awk '/^Commands:/ { on = 1; next } on && /^[[:space:]]*$/ { on = 0 } on { print $1 }')
for c in $listed; do
    [[ " $_mcroute_commands " == *" $c "* ]] || fail "command '$c' of mcroute --help is not completed"
done

if [ "$problems" -gt 0 ]; then
    echo "test_cli_completion: FAILED: $problems problem(s)" >&2
    exit 1
fi
echo "test_cli_completion: OK"
