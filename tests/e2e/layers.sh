#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# layers.sh - the layering check (tests/check-layers.sh) passes on the tree
# and fails on a copy of it with one wrong include planted at a time: an
# upward one (util including a ring header), sideways ones (the collector
# including a CLI header; a new tools/otlp/ including the collector's
# drain.h; tools/svg/ including a header of tools/chrome/), a tool including
# the ring's writer, a folder with no rule, and in python/ an <internal.h>
# and a <ring_view.h> (the extension sees include/ only). The copy is a git
# work tree, as check-layers reads `git ls-files`; one case runs on a copy
# that is not, where it lists the files with find. Then, when the objects
# are built, no two files of libshm/ call each other (tests/check-calls.sh).
set -eu
cd "$(dirname "$0")/../.."
if [ "${SHMTRACE_SAN:-0}" = 1 ]; then
	echo "the layering of the tree is checked with the plain build"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# which <...> names are system headers, found once for every run below
export CHECK_LAYERS_SYS_CACHE="$tmp/system-headers"
bash tests/check-layers.sh >/dev/null
mkdir "$tmp/plain" "$tmp/git"
for d in plain git; do
	git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$tmp/$d"
done
git -C "$tmp/git" init -q
git -C "$tmp/git" add -A
git -C "$tmp/git" -c user.name=layers -c user.email=layers@localhost commit -qm tree
bash tests/check-layers.sh "$tmp/git" >/dev/null || { echo "layers: the copy fails as it is" >&2; exit 1; }

# plant CASE DIR: one wrong include (or folder) into the copy at DIR
plant() {
	local t=$2
	case $1 in
	up)	echo '#include "ring_view.h"' >> "$t/util/hist.h" ;;
	side)	echo '#include "source.h"' >> "$t/collector/drain.h" ;;
	newdir)	mkdir -p "$t/tools/otlp"
		printf '#include "drain.h"\nint otlp_x;\n' > "$t/tools/otlp/x.c" ;;
	family)	mkdir -p "$t/tools/chrome" "$t/tools/svg"
		printf 'int chrome_y;\n' > "$t/tools/chrome/chrome_y.h"
		printf '#include "chrome_y.h"\nint svg_x;\n' > "$t/tools/svg/svg_x.c" ;;
	writer)	echo '#include "ring_writer.h"' >> "$t/tools/ls.c" ;;
	norule)	mkdir -p "$t/tools/newfamily"
		printf '#include "cli.h"\nint newfamily_x;\n' > "$t/tools/newfamily/x.c" ;;
	pyint)	echo '#include <internal.h>' >> "$t/python/shmtrace/_shmtrace.h" ;;
	pyview)	echo '#include <ring_view.h>' >> "$t/python/shmtrace/args.c" ;;
	esac
}
for case in up side newdir family writer norule pyint pyview; do
	git -C "$tmp/git" reset -q --hard
	git -C "$tmp/git" clean -qfd
	plant $case "$tmp/git"
	git -C "$tmp/git" add -A
	if bash tests/check-layers.sh "$tmp/git" 2>"$tmp/err.txt" >/dev/null; then
		echo "layers: the $case include was not caught" >&2
		exit 1
	fi
	grep -Eq 'not in its layer|has no rule' "$tmp/err.txt" || { cat "$tmp/err.txt" >&2; exit 1; }
done
# outside a git work tree the files are found with find
bash tests/check-layers.sh "$tmp/plain" >/dev/null || { echo "layers: the plain copy fails" >&2; exit 1; }
plant newdir "$tmp/plain"
if bash tests/check-layers.sh "$tmp/plain" 2>/dev/null >/dev/null; then
	echo "layers: the newdir include was not caught without git" >&2
	exit 1
fi

# the files of libshm/: no circles (needs the objects: make)
if ls "${BUILD:-build}"/libshm/lib/*.o >/dev/null 2>&1; then
	bash tests/check-calls.sh "${BUILD:-build}"
fi
echo "layers: ok"
