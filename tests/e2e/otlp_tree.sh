#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# otlp_tree.sh - the OTLP export keeps the nesting: a prefork server (a
# master, forked workers with threads) and its client write into one ring
# (tests/otlp/prefork.c), the collector captures it, and
# tests/otlp/check-tree.py reads the export with Python's json module:
# every span inside another on its thread is its child, each request is
# one trace whose hops follow each other (as parent, or by a link when
# the hop has a parent on its thread), the request passed on with a W3C
# traceparent is in the caller's trace (its enclosing "GET /x" span too);
# with --flows-only, each hop is a child of the one before; and a second
# export gives the same bytes (the ids are the capture's).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=${SHMTRACE_BIN:-$PWD/$BUILD}
PREFIX=${SHMTRACE_TEST_PREFIX:-t$$-}
PYTHON=${PYTHON:-/usr/bin/python3}
RING="${PREFIX}otlp-tree-$$"
REQUESTS=24
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
cpid=
tmp=

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for b in shmtrace-collector shmtrace tests/otlp-prefork; do
	[ -x "$BIN/$b" ] || fail "$BIN/$b is missing (run make all tests-bin)"
done
[ -x "$PYTHON" ] || skip "$PYTHON is not installed"

cleanup() {
	local rc=$?
	[ -n "$cpid" ] && { kill -KILL "$cpid" 2>/dev/null || true; wait "$cpid" 2>/dev/null || true; }
	rm -f "/dev/shm/$RING"
	[ -n "$tmp" ] && rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmtrace-e2e-otlp-tree.XXXXXX")

echo "== a prefork server: 2 workers of 2 threads, $REQUESTS requests and one passed on"
mkfifo "$tmp/ready"
"$BIN/shmtrace-collector" --ring "$RING" --create --output "$tmp/tree.cap" --ready-fd 3 \
	3>"$tmp/ready" &
cpid=$!
read -r line <"$tmp/ready" || true
[ "$line" = ready ] || fail "the collector did not report ready"
"$BIN/tests/otlp-prefork" "$RING" 2 2 $REQUESTS "$TP" || fail "otlp-prefork failed"
kill -TERM "$cpid"
wait "$cpid" || fail "the collector exited with $?"
cpid=

echo "== the export: trees, one trace a request"
"$BIN/shmtrace" export "$tmp/tree.cap" --format otlp -o "$tmp/tree.jsonl" 2>"$tmp/err" ||
	{ cat "$tmp/err"; fail "otlp export failed"; }
"$PYTHON" tests/otlp/check-tree.py "$tmp/tree.jsonl" $REQUESTS "$TP" || fail "check-tree"

echo "== the same bytes again"
"$BIN/shmtrace" export "$tmp/tree.cap" --format otlp -o "$tmp/again.jsonl" 2>/dev/null ||
	fail "second otlp export failed"
cmp -s "$tmp/tree.jsonl" "$tmp/again.jsonl" || fail "two exports of one capture differ"

echo "== --flows-only: the hops, each a child of the one before"
"$BIN/shmtrace" export "$tmp/tree.cap" --format otlp --flows-only -o "$tmp/flows.jsonl" \
	2>/dev/null || fail "--flows-only export failed"
"$PYTHON" tests/otlp/check-tree.py "$tmp/flows.jsonl" $REQUESTS "$TP" --flows-only ||
	fail "check-tree --flows-only"
echo "ok"
