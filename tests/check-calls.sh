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
	# one nm for the symbols each object defines, one for those it
	# needs ("OBJ:ADDR T SYM", "OBJ: U SYM"), joined in one awk: a
	# process per object made this the slowest step of the layers test
	# shellcheck disable=SC2086
	edges=$({ nm -A --defined-only -g $objs | sed 's/^/D /'
		  nm -A -u $objs | sed 's/^/U /'; } |
		awk -v b="$build/" '
		function file(w) {
			sub(/:.*$/, "", w)
			if (substr(w, 1, length(b)) == b)
				w = substr(w, length(b) + 1)
			return w
		}
		$1 == "D" { def[$NF] = file($2); files[file($2)] = 1; next }
		$1 == "U" { f = file($2); files[f] = 1; need[++n] = f; sym[n] = $NF }
		END {
			for (f in files)
				print f, f	# every file in the order, called or not
			for (i = 1; i <= n; i++)
				if ((sym[i] in def) && def[sym[i]] != need[i])
					print need[i], def[sym[i]]
		}' | sort -u)
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
