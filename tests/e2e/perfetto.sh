#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# perfetto.sh - `shmtrace export --format perfetto` of real captures,
# decoded with Debian's protoc against tests/perfetto/perfetto_trace.proto
# (written from Perfetto's published field numbers, not from the exporter)
# and compared by tests/perfetto/check-perfetto.py with the Chrome export of
# the same input, slice for slice, flow for flow: the demo with a worker
# SIGKILLed mid-request (nesting, flows across processes, a Python worker
# when the module is built, arguments, counters, instants, spans left open)
# through the collector and read post-mortem from its ring; and the
# arguments producer (hostile strings, int64 extremes, spans that overlap,
# three open spans). The Perfetto file must be at most a third of the JSON.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=${SHMTRACE_BIN:-$PWD/$BUILD}
PREFIX=${SHMTRACE_TEST_PREFIX:-t$$-}
RING="${PREFIX}pf-$$"
RPM="${PREFIX}pf-pm-$$"
RARGS="${PREFIX}pf-args-$$"
REQUESTS=400
PYTHON=${PYTHON:-/usr/bin/python3}
cpid=
tmp=

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for b in shmtrace-collector shmtrace shmtrace-demo tests/otlp-hop; do
	[ -x "$BIN/$b" ] || fail "$BIN/$b is missing (run make all tests-bin)"
done
command -v protoc >/dev/null || skip "protoc is not installed (Debian: protobuf-compiler; make deps)"
command -v python3 >/dev/null || skip "python3 is not installed"

cleanup() {
	local rc=$?
	if [ -n "$cpid" ]; then
		kill -KILL "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
	fi
	rm -f "/dev/shm/$RING" "/dev/shm/$RPM" "/dev/shm/$RARGS"
	[ -n "$tmp" ] && rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmtrace-e2e-perfetto.XXXXXX")

# start_collector RING OUT: a collector that made RING, once it is ready
start_collector() {
	rm -f "$tmp/ready"
	mkfifo "$tmp/ready"
	"$BIN/shmtrace-collector" --ring "$1" --create --output "$2" --ready-fd 3 3>"$tmp/ready" &
	cpid=$!
	local line=
	read -r line <"$tmp/ready" || true
	[ "$line" = ready ] || fail "collector for $1 did not report ready"
}
stop_collector() {
	kill -TERM "$cpid"
	wait "$cpid" || fail "collector exited with $?"
	cpid=
}

# check NAME SHMTRACE-INPUT-ARGS... -- CHECKER-ARGS...: both exports of the
# input, the Perfetto one decoded and compared with the Chrome one
check() {
	local name=$1 in=() opts=()
	shift
	while [ "$1" != -- ]; do in+=("$1"); shift; done
	shift
	opts=("$@")
	"$BIN/shmtrace" export "${in[@]}" -o "$tmp/$name.json" 2>"$tmp/$name.cerr" ||
		fail "chrome export ($name): $(cat "$tmp/$name.cerr")"
	"$BIN/shmtrace" export "${in[@]}" --format perfetto -o "$tmp/$name.pftrace" 2>"$tmp/$name.perr" ||
		fail "perfetto export ($name): $(cat "$tmp/$name.perr")"
	protoc --decode=perfetto.Trace -I tests/perfetto tests/perfetto/perfetto_trace.proto \
		<"$tmp/$name.pftrace" >"$tmp/$name.txt" || fail "protoc cannot decode $name.pftrace"
	python3 tests/perfetto/check-perfetto.py "$tmp/$name.txt" "$tmp/$name.json" "${opts[@]}" ||
		fail "$name: the Perfetto export is not the Chrome one"
}

py_args=()
if [ -x "$PYTHON" ] && ls python/shmtrace/_shmtrace*.so >/dev/null 2>&1; then
	export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
	py_args=(--py-worker tools/demo/worker.py --python "$PYTHON")
fi

echo "== the demo, $REQUESTS requests, worker-1 SIGKILLed inside a request, through the collector"
start_collector "$RING" "$tmp/demo.cap"
"$BIN/shmtrace-demo" --ring "$RING" --requests $REQUESTS --workers 3 --crash-worker 1 \
	"${py_args[@]}" >/dev/null 2>&1 || fail "shmtrace-demo failed"
stop_collector
check demo "$tmp/demo.cap" -- --expect-flows $REQUESTS --expect-unfinished 2
pf=$(stat -c %s "$tmp/demo.pftrace") js=$(stat -c %s "$tmp/demo.json")
echo "sizes: Perfetto $pf bytes, Chrome JSON $js bytes"
[ $((pf * 3)) -le "$js" ] || fail "the Perfetto trace ($pf bytes) is more than a third of the JSON ($js)"

echo "== the same, post-mortem from a ring without a collector"
"$BIN/shmtrace-demo" --ring "$RPM" --create --requests 200 --workers 2 --crash-worker 1 \
	>/dev/null 2>&1 || fail "shmtrace-demo --create failed"
check postmortem --ring "$RPM" -- --expect-flows 200 --expect-unfinished 2
rm -f "/dev/shm/$RPM"

echo "== arguments, and a producer killed inside nested scopes"
start_collector "$RARGS" "$tmp/args.cap"
rc=0
# (the braces keep the shell's "Killed" line off the output)
{ "$BIN/tests/otlp-hop" "$RARGS" args; } 2>/dev/null || rc=$?
[ $rc -eq 137 ] || fail "otlp-hop args: exit $rc, expected its SIGKILL (137)"
stop_collector
check args "$tmp/args.cap" -- --expect-flows 1 --expect-unfinished 3
grep -q 'begin inside another span of their thread' "$tmp/args.perr" ||
	fail "no warning about the spans that overlap: $(cat "$tmp/args.perr")"
echo "perfetto: ok"
