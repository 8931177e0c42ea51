#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh - what `make demo` runs: traces the client/broker/worker demo with
# the collector, exports it for Perfetto and Chrome DevTools, then shows a
# post-mortem export of a ring whose worker was SIGKILLed, with no collector.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=demo-out
RING="shmtrace-demo-$$"
RING2="shmtrace-demo-pm-$$"
COLLECTOR="$BUILD/shmtrace-collector"
TOOL="$BUILD/shmtrace"
DEMO="$BUILD/shmtrace-demo"
PYTHON=${PYTHON:-/usr/bin/python3}
collector_pid=
tmp=

for b in "$COLLECTOR" "$TOOL" "$DEMO"; do
	if [ ! -x "$b" ]; then
		echo "demo.sh: $b is missing; run make first" >&2
		exit 1
	fi
done

cleanup() {
	local rc=$?
	if [ -n "$collector_pid" ] && kill -0 "$collector_pid" 2>/dev/null; then
		kill -TERM "$collector_pid" 2>/dev/null || true
		wait "$collector_pid" 2>/dev/null || true
	fi
	rm -f "/dev/shm/$RING" "/dev/shm/$RING2"
	[ -n "$tmp" ] && rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n==> %s\n' "$*"; }

mkdir -p "$OUT"
rm -f "$OUT/demo.capture" "$OUT/postmortem.json" demo-trace.json
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmtrace-demo-sh.XXXXXX")

step "1. start the collector on ring $RING"
mkfifo "$tmp/ready"
"$COLLECTOR" --ring "$RING" --create --capacity 1048576 \
	--output "$OUT/demo.capture" --ready-fd 3 3>"$tmp/ready" &
collector_pid=$!
# blocks until the collector writes its line, or gets EOF if it dies first
line=
read -r line <"$tmp/ready" || true
if [ "$line" != ready ]; then
	echo "demo.sh: the collector did not start" >&2
	exit 1
fi
echo "collector pid $collector_pid is draining $RING into $OUT/demo.capture"

py_args=()
if [ -x "$PYTHON" ] && ls python/shmtrace/_shmtrace*.so >/dev/null 2>&1; then
	# worker-3 is tools/demo/worker.py: a Python process in the same flows
	export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
	py_args=(--py-worker tools/demo/worker.py --python "$PYTHON")
	step "2. run the demo: client -> broker -> 3 workers (worker-3 in Python), 3000 requests"
else
	step "2. run the demo: client -> broker -> 3 workers, 3000 requests (make python adds a Python worker)"
fi
"$DEMO" --ring "$RING" --requests 3000 "${py_args[@]}"
echo "stopping the collector"
kill -TERM "$collector_pid"
rc=0
wait "$collector_pid" || rc=$?
collector_pid=
if [ $rc -ne 0 ]; then
	echo "demo.sh: the collector exited with status $rc" >&2
	exit 1
fi

step "3. export for the viewers"
"$TOOL" export "$OUT/demo.capture" -o demo-trace.json
echo "trace: $PWD/demo-trace.json"
"$TOOL" summary "$OUT/demo.capture"
echo
echo "Open it in the Perfetto UI: https://ui.perfetto.dev -> \"Open trace file\" -> $PWD/demo-trace.json"
echo "or in Chrome DevTools: Performance panel -> \"Load profile\" (the up-arrow button) -> $PWD/demo-trace.json"

step "4. post-mortem: no collector, worker-1 is SIGKILLed mid-request"
# the demo makes the ring itself; whatever is in it when the run ends is
# all there is: records are durable once written, even in a killed process
"$DEMO" --ring "$RING2" --create --requests 200 --crash-worker 1
"$TOOL" export --ring "$RING2" -o "$OUT/postmortem.json"
echo "post-mortem trace: $PWD/$OUT/postmortem.json"
"$TOOL" summary --ring "$RING2" >"$tmp/pm-summary"
grep -E '^(PROCESS|worker-1) ' "$tmp/pm-summary" || true
primes=$(awk '$1 == "worker-1" && $2 == "primes" { print $3 }' "$tmp/pm-summary")
compute=$(awk '$1 == "worker-1" && $2 == "compute" { print $3 }' "$tmp/pm-summary")
errors=$(grep -o '"ph":"i"[^}]*"name":"error"' "$OUT/postmortem.json" | wc -l)
unfinished=$(grep -o '"name":"compute","args":{[^}]*"unfinished":true' "$OUT/postmortem.json" | wc -l)
echo "worker-1 recorded ${primes:-0} \"primes\" spans but finished ${compute:-0} \"compute\": the last"
echo "\"primes\" is the request it was killed in, recorded right before the SIGKILL, and"
echo "the ${unfinished} \"compute\" (and \"work\") it died inside are in the trace, marked"
echo "\"unfinished\": true in their args; the broker marked its ${errors} lost request(s)"
echo "with \"error\" instants and re-routed them. The \"work\" spans carry the request's"
echo "id, bytes and status as args (click one in Perfetto or DevTools)."
echo "the ring's producers, all gone now (shmtrace stat):"
"$TOOL" stat "$RING2" | sed -n '/^producers:/,$p' | tail -n +2
rm -f "/dev/shm/$RING2"

step "done"
for r in "$RING" "$RING2"; do
	if [ -e "/dev/shm/$r" ]; then
		echo "demo.sh: /dev/shm/$r is still there" >&2
		exit 1
	fi
done
echo "traces: $PWD/demo-trace.json, $PWD/$OUT/postmortem.json; no ring left in /dev/shm"
