#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-calls.sh - fails when files of libshm/ call each other, directly or
# round a longer circle (docs/DESIGN.md, "Layers"): from each object's
# undefined symbols (nm -u) and the symbols the others define, the file
# graph, sorted by tsort, which names any circle. Prints the order, each
# file calling only files after it.
#   tests/check-calls.sh [BUILD]      (default: build; `make` first)
set -u
cd "$(dirname "$0")/.."
build=${1:-${BUILD:-build}}
bad=0
for layer in libshm/ring libshm/lib libshm; do
	objs=$(ls "$build"/$layer/*.o "$build"/$layer/*/*.o 2>/dev/null | sort -u)
	if [ -z "$objs" ]; then
		echo "check-calls: no objects in $build/$layer (run make first)" >&2
		exit 2
	fi
	declare -A def=()
	for o in $objs; do
		for s in $(nm --defined-only -g "$o" | awk '{ print $3 }'); do
			def[$s]=${o#"$build"/}
		done
	done
	edges=$(for o in $objs; do
		f=${o#"$build"/}
		echo "$f $f"	# every file in the order, called or not
		for s in $(nm -u "$o" | awk '{ print $2 }'); do
			t=${def[$s]:-}
			[ -n "$t" ] && [ "$t" != "$f" ] && echo "$f $t"
		done
	done | sort -u)
	unset def
	if ! order=$(printf '%s\n' "$edges" | tsort 2>/tmp/check-calls.$$); then
		echo "check-calls: files of $layer call each other:" >&2
		sed 's/^tsort: /  /' /tmp/check-calls.$$ >&2
		bad=1
	elif [ "$layer" != libshm ]; then
		echo "$layer:" $(printf '%s\n' "$order" | sed 's|.*/||; s|\.o$|.c|')
	fi
	rm -f /tmp/check-calls.$$
done
[ $bad -eq 0 ] && echo "check-calls: no two files of libshm/ call each other"
exit $bad
