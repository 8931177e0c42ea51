#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's command list against the programs' --help: every command of
# `shmtrace --help` is listed, every option --help gives for a command (but
# -h/--help, -V/--version) is in that command's lines, and every option the
# list names is one --help gives. And the man pages render without a
# warning from groff (a line that starts with a quote is a request), with
# shmtrace(1)'s SYNOPSIS one paragraph a form.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
# the first code block after the heading
list=$(awk '/^## The commands/ { on = 1; next } on && /^```/ { if (in_) exit; in_ = 1; next } in_' README.md)
[ -n "$list" ] || { echo "docs: no command list in README.md"; exit 1; }
bad=0
# the lines of one command: its first line and the indented ones after it
lines_of() {
	awk -v cmd="$1" '
		/^[^ ]/ { on = (index($0, cmd " ") == 1) }
		on' <<<"$list"
}
# --long options a text names, one a line
opts_of() { grep -oE -- '--[a-z][a-z-]*' | grep -v -x -E -- '--(help|version)' | sort -u; }
check() {	# check NAME "HELP TEXT"
	local lines=$1 help=$2 name=$3 o
	[ -n "$lines" ] || { echo "docs: '$name' not in README's command list"; bad=1; return; }
	# each option line of --help: its --long form, or its -x form ("-o, --output")
	while read -r short long; do
		grep -q -E -- "$long\b|$short " <<<"$lines" ||
			{ echo "docs: $name $long (in --help) not in README"; bad=1; }
	done < <(grep -E '^ +-' <<<"$help" | sed -E -n \
		-e 's/^ +(-[a-zA-Z]), (--[a-z][a-z-]*).*/\1 \2/p' -e 's/^ +(--[a-z][a-z-]*).*/--none \1/p' |
		grep -v -E -- ' --(help|version)$')
	for o in $(opts_of <<<"$lines"); do
		grep -q -- "$o\b" <<<"$help" || { echo "docs: $name $o (in README) not in --help"; bad=1; }
	done
}
check "$(lines_of shmtrace-collector)" "$("$BUILD/shmtrace-collector" --help | grep -E '^ +-')" \
	shmtrace-collector
for c in $("$BUILD/shmtrace" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF>1 {print $1}'); do
	# the option lines of --help, and its Usage lines
	check "$(lines_of "shmtrace $c")" "$("$BUILD/shmtrace" "$c" --help | grep -E '^ +-|^Usage|^       shmtrace')" \
		"shmtrace $c"
done
if command -v man >/dev/null; then
	for m in docs/man/*.1 docs/man/*.3; do
		w=$(MANWIDTH=80 man --warnings -l "$m" 2>&1 >/dev/null) || true
		[ -z "$w" ] || { echo "docs: $m: $w"; bad=1; }
	done
	# shmtrace(1)'s SYNOPSIS as rendered: each form (.SY) a paragraph of
	# its own starting with the command, none run into another
	syn=$(MANWIDTH=80 man -l docs/man/shmtrace.1 2>/dev/null | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p')
	forms=$(grep -c '^\.SY' docs/man/shmtrace.1)
	starts=$(grep -c -E '^ +shmtrace ' <<<"$syn" || true)
	[ "$forms" = "$starts" ] ||
		{ echo "docs: shmtrace(1) SYNOPSIS: $forms forms, $starts rendered"; bad=1; }
	for c in $("$BUILD/shmtrace" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF>1 {print $1}'); do
		grep -q -E "^ +shmtrace $c( |\$)" <<<"$syn" ||
			{ echo "docs: shmtrace(1) SYNOPSIS: no form of '$c' starts a line"; bad=1; }
	done
fi
# the rule for a time without a unit is said once in shmtrace(1)
n=$(grep -c 'a number without unit is seconds' docs/man/shmtrace.1 || true)
[ "$n" = 1 ] || { echo "docs: shmtrace(1) says '(a number without unit is seconds)' $n times"; bad=1; }
[ "$bad" = 0 ] || exit 1
echo "docs: ok"
