#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-layers.sh - fails when a source file includes a header of a layer
# above or beside its own (docs/DESIGN.md, "Layers"):
#   util <- ring <- {lib, capture} <- {collector, cli}
# A quoted #include must name a header by its file name (no directory) that
# lives in the file's own folder or in a folder its layer may use; the
# Makefile gives each folder only those include paths, this checks the text
# (so a "../" path or a header copied by name is caught as well).
#   tests/check-layers.sh [ROOT]      (default: the repository)
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2

# folder -> the folders whose headers it may include (besides its own)
declare -A may=(
	[util]=""
	[include]=""
	[libshm/ring]="include util"
	[libshm/lib]="include util libshm/ring"
	[capture]="include util libshm/ring"
	[collector]="include util libshm/ring capture"
	[tools]="include util libshm/ring capture tools/trace"
	[tools/trace]="include util libshm/ring capture"
	[tools/chrome]="include util libshm/ring tools/trace tools"
	[tools/otlp]="include util libshm/ring tools/trace tools"
	[tools/svg]="include util libshm/ring tools/trace tools"
	[tools/demo]="include"
	[python/shmtrace]="include"
)
bad=0
for dir in "${!may[@]}"; do
	for f in "$dir"/*.[ch]; do
		[ -f "$f" ] || continue
		while IFS= read -r inc; do
			ok=0
			case $inc in */*) ;; *)
				for d in "$dir" ${may[$dir]}; do
					[ -f "$d/$inc" ] && { ok=1; break; }
				done ;;
			esac
			if [ $ok -eq 0 ]; then
				echo "check-layers: $f includes \"$inc\": not in its layer or one below it" >&2
				bad=1
			fi
		done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
	done
done
# a header name is defined once, so a name says which layer it is from
dups=$(for dir in "${!may[@]}"; do ls "$dir"/*.h 2>/dev/null; done | xargs -n1 basename | sort | uniq -d)
if [ -n "$dups" ]; then
	echo "check-layers: header names used in two folders: $dups" >&2
	bad=1
fi
[ $bad -eq 0 ] && echo "check-layers: every #include is of the file's layer or one below it"
exit $bad
