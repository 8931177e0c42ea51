#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-layers.sh - fails when a source file includes a header of a layer
# above or beside its own (docs/DESIGN.md, "Layers"):
#   util <- ring <- {lib, capture} <- {collector, tools}
# The folders checked are every folder holding a .c or .h file that git
# tracks (or, outside a git work tree, that find lists): a folder this
# script has no rule for fails, so a new folder cannot be forgotten.
# Every #include, "..." or <...>, must name a header by its file name (no
# directory) that lives in the file's own folder or in a folder its layer
# may use; an <...> include that is no project header must be a system
# header (the compiler finds it). The Makefile gives each folder only those
# include paths; this checks the text (so a "../" path, a header copied by
# name or one reached through another include path is caught as well).
#   tests/check-layers.sh [ROOT]      (default: the repository)
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2

# The ring's headers the tools may see: the view and the reader, never the
# writer (the lock, publishing, adoption).
RING_READ="libshm/ring:ring_view.h,ring_reader.h,ring_format.h,loss.h,ring_config.h"
TOOLS_BASE="include util $RING_READ"
# folder -> the folders whose headers it may include (besides its own);
# folder:h1,h2 allows those headers of it only; * allows any project header
declare -A may=(
	[util]=""
	[include]=""
	[libshm/ring]="include util"
	[libshm/lib]="include util libshm/ring"
	[capture]="include util libshm/ring"
	# the collector repairs and adopts blocks: it may use the ring's writer
	[collector]="include util libshm/ring capture"
	# tools/: the shmtrace command's shell (main, cli, ls, rm, stat, ...);
	# tools/trace: reading traces; the families (chrome, otlp, svg, perfetto) use
	# tools/trace and the shell's headers, never each other
	[tools]="$TOOLS_BASE capture tools/trace"
	[tools/trace]="$TOOLS_BASE capture"
	[tools/chrome]="$TOOLS_BASE tools/trace tools"
	[tools/otlp]="$TOOLS_BASE tools/trace tools"
	[tools/svg]="$TOOLS_BASE tools/trace tools"
	[tools/perfetto]="$TOOLS_BASE tools/trace tools"
	[tools/demo]="include"
	[python/shmtrace]="include"
	[tests]="*"
	[tests/bench]="*"
	[tests/bench/lttng]="*"
	[tests/fuzz]="*"
	[tests/otlp]="include"
	[tests/python]="include"
)

if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
   [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
	files=$(git ls-files -- '*.c' '*.h')
else
	files=$(find . -path ./.git -prune -o -path './build*' -prune -o \
		\( -name '*.c' -o -name '*.h' \) -type f -print | sed 's|^\./||' | sort)
fi
dirs=$(printf '%s\n' "$files" | sed -n 's|/[^/]*$||p' | sort -u)
# files at the top level have no folder: none are expected
top=$(printf '%s\n' "$files" | grep -v / || true)

bad=0
if [ -n "$top" ]; then
	echo "check-layers: source files at the top level, in no layer: $top" >&2
	bad=1
fi
for dir in $dirs; do
	if [ -z "${may[$dir]+x}" ]; then
		echo "check-layers: $dir holds sources but has no rule (add it to tests/check-layers.sh and docs/DESIGN.md)" >&2
		bad=1
	fi
done

# every project header by file name -> its folders
declare -A home=()
for h in $(printf '%s\n' "$files" | grep '\.h$'); do
	home[${h##*/}]+="${h%/*} "
done

# whether header name inc (no directory) of folder d is allowed by entry e
allows() {
	local e=$1 d=$2 inc=$3
	case $e in
	*:*) [ "${e%%:*}" = "$d" ] && [[ ",${e#*:}," == *",$inc,"* ]] ;;
	*) [ "$e" = "$d" ] ;;
	esac
}

# <name> that is no project header: a system header if the compiler finds it
declare -A sys=()
SYS_INC=()
py_inc=$(${PYTHON:-python3} -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
[ -n "$py_inc" ] && SYS_INC+=("-I$py_inc")
# CHECK_LAYERS_SYS_CACHE=FILE keeps these verdicts for the next run (the
# layers test runs this a dozen times; a compiler run per header is most
# of a run's time)
cache=${CHECK_LAYERS_SYS_CACHE:-}
if [ -n "$cache" ] && [ -f "$cache" ]; then
	while read -r name v; do sys[$name]=$v; done < "$cache"
fi
is_system() {
	if [ -z "${sys[$1]+x}" ]; then
		if printf '#include <%s>\n' "$1" | ${CC:-cc} -E -x c - "${SYS_INC[@]}" >/dev/null 2>&1
		then sys[$1]=1; else sys[$1]=0; fi
		[ -n "$cache" ] && echo "$1 ${sys[$1]}" >> "$cache"
	fi
	[ "${sys[$1]}" = 1 ]
}

# the files whose includes are checked, then their includes, all read by
# one awk ("FILE KIND NAME", KIND " or <)
checked=()
for f in $(printf '%s\n' "$files"); do
	dir=${f%/*}
	[ "$dir" = "$f" ] && continue
	[ -n "${may[$dir]+x}" ] || continue
	[ "${may[$dir]}" = "*" ] && continue
	checked+=("$f")
done
[ ${#checked[@]} -gt 0 ] &&
while read -r f kind inc; do
	dir=${f%/*}
	ok=0
	case $inc in
	*/*) # a path: a project header reached sideways, or a system one
		[ "$kind" = '<' ] && [ -z "${home[${inc##*/}]:-}" ] && is_system "$inc" && ok=1 ;;
	*)
		if [ -z "${home[$inc]:-}" ]; then
			# no project header of that name: <...> may be a system one
			[ "$kind" = '<' ] && is_system "$inc" && ok=1
		elif [ -f "$dir/$inc" ]; then
			ok=1
		else
			for d in ${home[$inc]}; do
				for e in ${may[$dir]}; do
					allows "$e" "$d" "$inc" && { ok=1; break 2; }
				done
			done
		fi ;;
	esac
	if [ $ok -eq 0 ]; then
		if [ "$kind" = '<' ]; then shown="<$inc>"; else shown="\"$inc\""; fi
		echo "check-layers: $f includes $shown: not in its layer or one below it" >&2
		bad=1
	fi
done < <(awk '
	/^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"/ {
		s = $0; sub(/^[[:space:]]*#[[:space:]]*include[[:space:]]*"/, "", s); sub(/".*$/, "", s)
		print FILENAME, "\"", s
	}
	/^[[:space:]]*#[[:space:]]*include[[:space:]]*<[^>]*>/ {
		s = $0; sub(/^[[:space:]]*#[[:space:]]*include[[:space:]]*</, "", s); sub(/>.*$/, "", s)
		print FILENAME, "<", s
	}' "${checked[@]}")

# a header name is defined once, so a name says which layer it is from
dups=$(printf '%s\n' "$files" | grep '\.h$' | grep -v '^tests/' | sed 's|.*/||' | sort | uniq -d)
if [ -n "$dups" ]; then
	echo "check-layers: header names used in two folders: $dups" >&2
	bad=1
fi
[ $bad -eq 0 ] && echo "check-layers: every #include is of the file's layer or one below it"
exit $bad
