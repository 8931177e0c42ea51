#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# valgrind memcheck on the collector and the exporter: a short demo run
# drained by a collector under memcheck, then export, summary, stat and svg
# under memcheck, from the capture and post-mortem from the ring. Any
# memcheck error or definite leak fails the test.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${SHMTRACE_SAN:-0}" = 1 ]; then
	echo "not with sanitizer builds (they have their own runs)"
	exit 77
fi
BUILD=${BUILD:-build}
command -v valgrind >/dev/null || { echo "valgrind not installed"; exit 77; }
tmp=$(mktemp -d)
ring="${SHMTRACE_TEST_PREFIX:-}vg-$$"
col=
trap '[ -n "$col" ] && kill "$col" 2>/dev/null; rm -rf "$tmp"; rm -f "/dev/shm/$ring"' EXIT
VG=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite)
vg() { "${VG[@]}" "$@"; }

mkfifo "$tmp/ready"
# not through the function: $! must be valgrind itself, not a subshell
"${VG[@]}" "$BUILD/shmtrace-collector" --ring "$ring" --create --keep-ring --capacity 65536 \
	--output "$tmp/cap" --ready-fd 3 --poll-interval 20 3>"$tmp/ready" &
col=$!
read -r line <"$tmp/ready"
[ "$line" = ready ]
"$BUILD/shmtrace-demo" --ring "$ring" --requests 200 --workers 2 >/dev/null
kill -TERM "$col"
rc=0; wait "$col" || rc=$?
col=
[ $rc -eq 0 ] || { echo "collector under memcheck: exit $rc"; exit 1; }

vg "$BUILD/shmtrace" export "$tmp/cap" -o "$tmp/a.json"
vg "$BUILD/shmtrace" summary "$tmp/cap" >/dev/null
vg "$BUILD/shmtrace" stat "$tmp/cap" >/dev/null
vg "$BUILD/shmtrace" svg "$tmp/cap" -o "$tmp/a.svg"
vg "$BUILD/shmtrace" export --ring "$ring" -o "$tmp/b.json"
vg "$BUILD/shmtrace" stat "$ring" >/dev/null
vg "$BUILD/shmtrace" ls >/dev/null
vg "$BUILD/shmtrace" ls --json >/dev/null
vg "$BUILD/shmtrace" rm "$ring"
[ ! -e "/dev/shm/$ring" ] || { echo "shmtrace rm left the ring"; exit 1; }
grep -q '"ph":"s"' "$tmp/a.json" || { echo "no flow in the export"; exit 1; }
echo "valgrind: collector, export, summary, stat, svg, ls, rm clean"
