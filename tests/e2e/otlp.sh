#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# otlp.sh - `shmtrace export --format otlp` and --otlp-endpoint, all on
# loopback: a Node receiver stands for the OpenTelemetry Collector, the
# official OpenTelemetry JS SDK sends the reference requests, and
# tests/otlp/check-otlp.mjs compares shapes and checks content against the
# Chrome export of the same capture; arguments and the open spans of a
# producer killed inside nested scopes; retries, refusals and errors; then two
# rings on two "hosts" (UTS namespaces) with flows carried across them,
# merged into one Chrome trace checked by the DevTools engine and into OTLP.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=${SHMTRACE_BIN:-$PWD/$BUILD}
PREFIX=${SHMTRACE_TEST_PREFIX:-t$$-}
RING="${PREFIX}otlp-$$"
RA="${PREFIX}otlp-a-$$"
RB="${PREFIX}otlp-b-$$"
RARGS="${PREFIX}otlp-args-$$"
REQUESTS=100
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
pids=()
tmp=

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for b in shmtrace-collector shmtrace shmtrace-demo tests/otlp-hop; do
	[ -x "$BIN/$b" ] || fail "$BIN/$b is missing (run make all tests-bin)"
done
command -v node >/dev/null || skip "node is not installed"
if [ ! -d tests/otlp/node_modules/@opentelemetry/exporter-trace-otlp-http ]; then
	npm ci --prefix tests/otlp --no-audit --no-fund >/dev/null 2>&1 ||
		skip "npm ci --prefix tests/otlp failed (offline?)"
fi
if [ ! -d tests/devtools/node_modules/@paulirish/trace_engine ]; then
	npm ci --prefix tests/devtools --no-audit --no-fund >/dev/null 2>&1 ||
		skip "npm ci --prefix tests/devtools failed (offline?)"
fi

cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -f "/dev/shm/$RING" "/dev/shm/$RA" "/dev/shm/$RB" "/dev/shm/$RARGS"
	[ -n "$tmp" ] && rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmtrace-e2e-otlp.XXXXXX")

# start_receiver DIR [args]: a receiver storing into DIR; sets $port, $rpid
start_receiver() {
	local dir=$1; shift
	rm -f "$tmp/port.fifo"
	mkfifo "$tmp/port.fifo"
	node tests/otlp/receiver.mjs "$dir" "$@" >"$tmp/port.fifo" &
	rpid=$!
	pids+=("$rpid")
	read -r port <"$tmp/port.fifo" || fail "the receiver did not start"
}
stop_receiver() {
	kill -TERM "$rpid" 2>/dev/null || true
	wait "$rpid" 2>/dev/null || true
}
# the stored bodies, one per line, as the file output writes them
bodies() { for f in "$1"/req-*.json; do [ -f "$f" ] && { cat "$f"; echo; }; done; }
# start_collector RING OUT [HOST]: a collector (in a UTS namespace named HOST)
start_collector() {
	rm -f "$tmp/ready"
	mkfifo "$tmp/ready"
	if [ -n "${3:-}" ]; then
		unshare -u sh -c "hostname $3 && exec \"$BIN/shmtrace-collector\" --ring $1 --create \
			--output $2 --ready-fd 3 3>$tmp/ready" &
	else
		"$BIN/shmtrace-collector" --ring "$1" --create --output "$2" --ready-fd 3 3>"$tmp/ready" &
	fi
	cpid=$!
	pids+=("$cpid")
	local line=
	read -r line <"$tmp/ready" || true
	[ "$line" = ready ] || fail "collector for $1 did not report ready"
}
stop_collector() {
	kill -TERM "$1"
	wait "$1" || fail "collector exited with $?"
}

echo "== the reference: the OpenTelemetry JS SDK's requests"
start_receiver "$tmp/ref"
node tests/otlp/reference.mjs "http://127.0.0.1:$port/v1/traces" || fail "reference sender failed"
stop_receiver
ls "$tmp"/ref/req-*.json >/dev/null 2>&1 || fail "the reference sent nothing"

echo "== a capture of the demo, $REQUESTS requests"
start_collector "$RING" "$tmp/demo.cap"
"$BIN/shmtrace-demo" --ring "$RING" --requests $REQUESTS --workers 2 >/dev/null ||
	fail "shmtrace-demo failed"
stop_collector "$cpid"
"$BIN/shmtrace" export "$tmp/demo.cap" -o "$tmp/demo.json" 2>/dev/null || fail "chrome export failed"

echo "== to a file and to an endpoint at once, in batches of 64 KiB"
start_receiver "$tmp/r1"
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp -o "$tmp/demo.jsonl" --batch-size 64k \
	--otlp-endpoint "http://127.0.0.1:$port" 2>"$tmp/err" || { cat "$tmp/err"; fail "otlp export failed"; }
stop_receiver
grep -q "spans (.* flows) in .* requests sent to 127.0.0.1:$port/v1/traces" "$tmp/err" ||
	fail "no summary of what was sent: $(cat "$tmp/err")"
n=$(ls "$tmp"/r1/req-*.json | wc -l)
[ "$n" -ge 3 ] || fail "expected several requests of 64 KiB, got $n"
cmp -s <(bodies "$tmp/r1") "$tmp/demo.jsonl" || fail "the POSTed bodies differ from the file's lines"
! grep -qv '^200 POST /v1/traces [0-9]* application/json$' "$tmp/r1/log" || fail "bad requests: $(cat "$tmp/r1/log")"
node tests/otlp/check-otlp.mjs --reference "$tmp/ref" --requests "$tmp/demo.jsonl" \
	--chrome "$tmp/demo.json" --expect-flows $REQUESTS || fail "check-otlp (demo)"

echo "== --flows-only"
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp --flows-only -o "$tmp/fo.jsonl" 2>/dev/null ||
	fail "--flows-only failed"
node -e '
const fs = require("fs"); let bad = 0, n = 0;
for (const l of fs.readFileSync(process.argv[1], "utf8").trim().split("\n"))
	for (const r of JSON.parse(l).resourceSpans) for (const s of r.scopeSpans[0].spans) {
		n++; if (!s.attributes.some((a) => a.key === "shmtrace.flow.id")) bad++; }
if (bad || !n) { console.error(`${bad} of ${n} spans outside flows`); process.exit(1); }' "$tmp/fo.jsonl" ||
	fail "--flows-only exported spans outside flows"

echo "== arguments, and a producer killed inside nested scopes"
start_collector "$RARGS" "$tmp/args.cap"
rc=0
# (the braces keep the shell's "Killed" line off the output)
{ "$BIN/tests/otlp-hop" "$RARGS" args; } 2>/dev/null || rc=$?
[ $rc -eq 137 ] || fail "otlp-hop args: exit $rc, expected its SIGKILL (137)"
# its last pass adopts the dead thread's block: the open spans are recorded
stop_collector "$cpid"
"$BIN/shmtrace" export "$tmp/args.cap" -o "$tmp/args.json" 2>/dev/null || fail "chrome export (args)"
# 23 on events, and inner's, added while it was open
grep -q '"args":24,"args_lost":0,"unfinished":3,' "$tmp/args.json" ||
	fail "the capture does not hold the 24 arguments and 3 open spans: $(grep -o '"args":.*' "$tmp/args.json")"
"$BIN/shmtrace" export "$tmp/args.cap" --format otlp -o "$tmp/args.jsonl" 2>/dev/null ||
	fail "otlp export (args)"
# the same arguments, exactly, and the same unfinished spans ending at the same ns
node tests/otlp/check-otlp.mjs --reference "$tmp/ref" --requests "$tmp/args.jsonl" \
	--chrome "$tmp/args.json" --expect-flows 1 --expect-unfinished 3 >/dev/null ||
	fail "check-otlp (arguments, unfinished spans)"
grep -qF '{"key":"shmtrace.arg.min","value":{"intValue":"-9223372036854775808"}}' "$tmp/args.jsonl" ||
	fail "INT64_MIN is not an exact intValue"

echo "== 503 for the first 2 requests: retried, then all sent"
start_receiver "$tmp/r2" --fail-first 2
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp --batch-size 64k --retries 4 \
	--otlp-endpoint "http://127.0.0.1:$port/" 2>"$tmp/err" || { cat "$tmp/err"; fail "retries did not succeed"; }
stop_receiver
[ "$(head -n 2 "$tmp/r2/log" | cut -d' ' -f1 | tr '\n' ' ')" = "503 503 " ] || fail "no 503s: $(cat "$tmp/r2/log")"
cmp -s <(bodies "$tmp/r2") "$tmp/demo.jsonl" || fail "after retries, the stored bodies differ from the file's"
grep -q "(after retries)" "$tmp/err" || fail "retries not reported: $(cat "$tmp/err")"

echo "== a 503 storm beyond the retry budget"
start_receiver "$tmp/r3" --always 503
rc=0
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp --retries 3 \
	--otlp-endpoint "http://127.0.0.1:$port" 2>"$tmp/err" || rc=$?
stop_receiver
[ $rc -eq 1 ] || fail "a 503 storm: exit $rc, expected 1"
grep -q "OTLP endpoint http://127.0.0.1:$port/v1/traces: HTTP 503 Service Unavailable: try again later (gave up after 3 attempts); " "$tmp/err" ||
	fail "no clear error: $(cat "$tmp/err")"
# every span of the capture, none sent (a span has one kind, a link none)
total=$(grep -o '"kind":1,' "$tmp/demo.jsonl" | wc -l)
grep -q "; 0 of $total spans sent, $total not sent$" "$tmp/err" ||
	fail "what was sent is misreported (of $total): $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/r3/log")" -eq 3 ] || fail "expected 3 attempts: $(cat "$tmp/r3/log")"

echo "== a 400: no retry, exit 1"
start_receiver "$tmp/r4" --always 400
rc=0
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp --otlp-endpoint "http://127.0.0.1:$port" \
	2>"$tmp/err" || rc=$?
stop_receiver
[ $rc -eq 1 ] || fail "a 400: exit $rc, expected 1"
grep -q "HTTP 400 Bad Request: receiver says 400: .*; 0 of $total spans sent, $total not sent$" "$tmp/err" ||
	fail "no clear error: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/r4/log")" -eq 1 ] || fail "a 400 was retried: $(cat "$tmp/r4/log")"

echo "== an endpoint that refuses the connection"
rc=0
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp --retries 2 --otlp-endpoint "http://127.0.0.1:1" \
	2>"$tmp/err" || rc=$?
[ $rc -eq 1 ] || fail "refused: exit $rc, expected 1"
grep -q "Connection refused (gave up after 2 attempts); 0 of $total spans sent, $total not sent$" "$tmp/err" ||
	fail "no clear error, or what was sent is misreported: $(cat "$tmp/err")"
rc=0
"$BIN/shmtrace" export "$tmp/demo.cap" --format otlp --otlp-endpoint "https://127.0.0.1:1" \
	2>/dev/null || rc=$?
[ $rc -eq 2 ] || fail "an https endpoint: exit $rc, expected 2"

echo "== a capture cut short"
size=$(stat -c %s "$tmp/demo.cap")
# inside the record frame: nothing of it can be read
head -c $((size / 2)) "$tmp/demo.cap" >"$tmp/cut.cap"
rc=0
"$BIN/shmtrace" export "$tmp/cut.cap" --format otlp -o "$tmp/cut.jsonl" 2>"$tmp/err" || rc=$?
[ $rc -eq 0 ] || fail "capture cut in its records: exit $rc"
grep -q "cut short" "$tmp/err" || fail "the cut is not reported: $(cat "$tmp/err")"
# after the records, in the last frames: the records are there, the end is not
head -c $((size - 8)) "$tmp/demo.cap" >"$tmp/cut.cap"
"$BIN/shmtrace" export "$tmp/cut.cap" -o "$tmp/cut.json" 2>/dev/null || fail "chrome export of the cut capture"
rc=0
"$BIN/shmtrace" export "$tmp/cut.cap" --format otlp -o "$tmp/cut.jsonl" 2>"$tmp/err" || rc=$?
[ $rc -eq 0 ] || fail "cut capture: exit $rc"
grep -q "cut short" "$tmp/err" || fail "the cut is not reported: $(cat "$tmp/err")"
grep -q '"shmtrace.capture_complete","value":{"boolValue":false}' "$tmp/cut.jsonl" ||
	fail "the requests do not say the capture is incomplete"
node tests/otlp/check-otlp.mjs --reference "$tmp/ref" --requests "$tmp/cut.jsonl" \
	--chrome "$tmp/cut.json" >/dev/null || fail "check-otlp (cut capture)"

echo "== two hosts: flows carried from alpha to beta"
unshare -u true 2>/dev/null || skip "cannot make UTS namespaces (unshare -u) for two host names"
start_collector "$RA" "$tmp/a.cap" alpha
ca=$cpid
start_collector "$RB" "$tmp/b.cap" beta
cb=$cpid
"$BIN/tests/otlp-hop" "$RA" origin 5 "$TP" 2>/dev/null | "$BIN/tests/otlp-hop" "$RB" serve 2>/dev/null ||
	fail "otlp-hop failed"
stop_collector "$ca"
stop_collector "$cb"
"$BIN/shmtrace" export "$tmp/a.cap" "$tmp/b.cap" -o "$tmp/two.json" 2>"$tmp/err" || fail "merged export failed"
grep -q "the inputs come from 2 hosts" "$tmp/err" || fail "hosts not reported: $(cat "$tmp/err")"
node tests/devtools/check-trace.mjs "$tmp/two.json" --expect-flows 6 >"$tmp/seen.json" ||
	fail "the DevTools engine does not see 6 flows in the merged trace"
node -e '
const seen = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const names = seen.processes;
const host = (pid) => (names[pid] || "").split(":")[0];
const bad = seen.flows.filter((f) => new Set(f.map((e) => host(e[0]))).size !== 2);
const pn = Object.values(names).sort().join(",");
if (pn !== "alpha: client,beta: server") { console.error(`processes: ${pn}`); process.exit(1); }
if (bad.length) { console.error(`${bad.length} flows do not cross the two hosts`); process.exit(1); }
' "$tmp/seen.json" || fail "flows do not cross hosts in the DevTools engine"
"$BIN/shmtrace" export "$tmp/a.cap" "$tmp/b.cap" --format otlp -o "$tmp/two.jsonl" 2>/dev/null ||
	fail "merged otlp export failed"
node tests/otlp/check-otlp.mjs --reference "$tmp/ref" --requests "$tmp/two.jsonl" --chrome "$tmp/two.json" \
	--expect-flows 6 --expect-cross-host 6 --expect-trace 4bf92f3577b34da6a3ce929d0e0e4736=00f067aa0ba902b7 \
	>/dev/null || fail "check-otlp (two hosts)"

echo "== each host exported alone: the same trace ids"
"$BIN/shmtrace" export "$tmp/a.cap" --format otlp -o "$tmp/a.jsonl" 2>/dev/null || fail "export a"
"$BIN/shmtrace" export "$tmp/b.cap" --format otlp -o "$tmp/b.jsonl" 2>/dev/null || fail "export b"
node -e '
const fs = require("fs");
const traces = (f) => new Set(fs.readFileSync(f, "utf8").trim().split("\n").flatMap((l) =>
	JSON.parse(l).resourceSpans.flatMap((r) => r.scopeSpans[0].spans)
		.filter((s) => s.attributes.some((a) => a.key === "shmtrace.flow.id")).map((s) => s.traceId)));
const a = traces(process.argv[1]), b = traces(process.argv[2]);
const both = [...a].filter((t) => b.has(t));
if (both.length !== 6) { console.error(`${both.length} trace ids shared, expected 6`); process.exit(1); }
' "$tmp/a.jsonl" "$tmp/b.jsonl" || fail "separate exports disagree on the trace ids"

echo "== --clock-offset moves one host's times"
"$BIN/shmtrace" export "$tmp/a.cap" "$tmp/b.cap" --clock-offset beta=-1000000 -o "$tmp/off.json" \
	2>/dev/null || fail "--clock-offset export failed"
node -e '
const fs = require("fs");
// in the order of each thread: the flows (written last) may reorder
const ev = (f) => JSON.parse(fs.readFileSync(f, "utf8")).traceEvents.filter((e) => e.ph === "X")
	.sort((x, y) => x.pid - y.pid || x.tid - y.tid || x.ts - y.ts);
const a = ev(process.argv[1]), b = ev(process.argv[2]);
const ns = (us) => { const [i, f = ""] = String(us).split("."); return BigInt(i) * 1000n + BigInt((f + "000").slice(0, 3)); };
let bad = 0;
for (let i = 0; i < a.length; i++) {
	const d = ns(a[i].ts) - ns(b[i].ts), want = a[i].name === "send" ? 0n : 1000000n;
	if (a[i].name !== b[i].name || d !== want) bad++;
}
if (bad || a.length !== b.length) { console.error(`${bad} events not moved as asked`); process.exit(1); }
' "$tmp/two.json" "$tmp/off.json" || fail "--clock-offset did not move beta by 1 ms"
rc=0
"$BIN/shmtrace" export "$tmp/a.cap" "$tmp/b.cap" --clock-offset gamma=5 -o "$tmp/x.json" 2>/dev/null || rc=$?
# a usage error, as every other bad --clock-offset is
[ $rc -eq 2 ] || fail "--clock-offset for an unknown host: exit $rc, expected 2"
echo "ok"
