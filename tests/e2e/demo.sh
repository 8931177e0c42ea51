#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh - end to end: shmtrace-demo traced by the collector, exported, and
# checked in the Chrome DevTools trace engine (processes, threads, one flow
# per request across client, broker and worker, one worker a Python process
# when the extension is built: make python); then a post-mortem export
# of a ring whose worker was SIGKILLed mid-request.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=${SHMTRACE_BIN:-$PWD/$BUILD}
PREFIX=${SHMTRACE_TEST_PREFIX:-t$$-}
RING="${PREFIX}demo-$$"
RING2="${PREFIX}demo-pm-$$"
REQUESTS=300
WORKERS=3
PYTHON=${PYTHON:-/usr/bin/python3}
collector_pid=
tmp=
py_args=() py_check=()
if [ -x "$PYTHON" ] && ls python/shmtrace/_shmtrace*.so >/dev/null 2>&1; then
	# the last worker is tools/demo/worker.py, on the same ring
	export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
	py_args=(--py-worker tools/demo/worker.py --python "$PYTHON")
	py_check=(--python-worker $WORKERS)
else
	echo "note: no Python worker (make python builds the extension)"
fi

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for b in shmtrace-collector shmtrace shmtrace-demo; do
	[ -x "$BIN/$b" ] || fail "$BIN/$b is missing (run make)"
done
command -v node >/dev/null || skip "node is not installed"
if [ ! -d tests/devtools/node_modules/@paulirish/trace_engine ]; then
	npm ci --prefix tests/devtools --no-audit --no-fund >/dev/null 2>&1 ||
		skip "npm ci --prefix tests/devtools failed (offline?)"
fi

cleanup() {
	local rc=$?
	if [ -n "$collector_pid" ] && kill -0 "$collector_pid" 2>/dev/null; then
		kill -KILL "$collector_pid" 2>/dev/null || true
		wait "$collector_pid" 2>/dev/null || true
	fi
	rm -f "/dev/shm/$RING" "/dev/shm/$RING2"
	[ -n "$tmp" ] && rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmtrace-e2e-demo.XXXXXX")

echo "== collector + demo, $REQUESTS requests"
mkfifo "$tmp/ready"
"$BIN/shmtrace-collector" --ring "$RING" --create --capacity 262144 \
	--output "$tmp/demo.capture" --ready-fd 3 3>"$tmp/ready" &
collector_pid=$!
line=
read -r line <"$tmp/ready" || true
[ "$line" = ready ] || fail "collector did not report ready"
"$BIN/shmtrace-demo" --ring "$RING" --requests $REQUESTS --workers $WORKERS "${py_args[@]}" ||
	fail "shmtrace-demo exited with $?"
kill -TERM "$collector_pid"
rc=0
wait "$collector_pid" || rc=$?
collector_pid=
[ $rc -eq 0 ] || fail "collector exited with $rc after SIGTERM"
[ ! -e "/dev/shm/$RING" ] || fail "collector left /dev/shm/$RING behind"

echo "== export and check in the DevTools trace engine"
"$BIN/shmtrace" export "$tmp/demo.capture" -o "$tmp/demo.json" || fail "export failed"
# check-trace.mjs reports what the DevTools engine sees; one flow per request
node tests/devtools/check-trace.mjs "$tmp/demo.json" --expect-flows $REQUESTS >"$tmp/seen.json" ||
	fail "DevTools does not see $REQUESTS flows"
node tests/e2e/demo-check.mjs "$tmp/seen.json" --requests $REQUESTS --workers $WORKERS "${py_check[@]}" ||
	fail "the trace does not show the demo as expected"
# the C workers' "work" spans carry the request's id, bytes and status
node --input-type=module - "$tmp/demo.json" $REQUESTS <<'JS' || fail "the work spans lack their arguments"
import fs from 'node:fs';
const ev = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).traceEvents;
const work = ev.filter(e => e.ph === 'X' && e.name === 'work' && e.args?.request !== undefined);
const ids = new Set(work.map(e => e.args.request));
const ok = work.every(e => Number.isInteger(e.args.bytes) && ['ok', 'busy'].includes(e.args.status));
console.log(`${work.length} work spans with arguments, ${ids.size} requests; all with bytes and status: ${ok}`);
process.exit(ok && ids.size > 0 && work.length >= ids.size ? 0 : 1);
JS

echo "== post-mortem: no collector, worker-2 SIGKILLs itself"
"$BIN/shmtrace-demo" --ring "$RING2" --create --requests 200 --workers $WORKERS --crash-worker 2 \
	2>"$tmp/crash.err" || { cat "$tmp/crash.err" >&2; fail "crash run exited with $?"; }
cat "$tmp/crash.err"
grep -q 'worker-2 (pid [0-9]*) killed by signal 9' "$tmp/crash.err" ||
	fail "the broker did not report worker-2's death"
"$BIN/shmtrace" export --ring "$RING2" -o "$tmp/pm.json" || fail "post-mortem export failed"
# worker-2's last "primes" span was recorded just before raise(SIGKILL): one
# more "primes" than finished "compute" there, the "compute" and "work" it
# was killed in shown unfinished, and the broker's "error" instant
node --input-type=module - "$tmp/pm.json" <<'JS' || fail "post-mortem trace is missing the crash"
import fs from 'node:fs';
const t = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const ev = t.traceEvents ?? t;
const pid = ev.find(e => e.ph === 'M' && e.name === 'process_name' && e.args?.name === 'worker-2')?.pid;
if (pid === undefined) { console.error('no worker-2 process'); process.exit(1); }
const n = (name, open) => ev.filter(e => e.pid === pid && e.ph === 'X' && e.name === name &&
	(e.args?.unfinished === true) === open).length;
const errors = ev.filter(e => e.ph === 'i' && e.name === 'error').length;
console.log(`worker-2 (pid ${pid}): ${n('primes', false)} primes, ${n('compute', false)} compute, ` +
	`unfinished: ${n('compute', true)} compute, ${n('work', true)} work; error instants: ${errors}`);
process.exit(n('primes', false) === 10 && n('compute', false) === 9 && n('compute', true) === 1 &&
	n('work', true) === 1 && n('primes', true) === 0 && errors >= 1 ? 0 : 1);
JS
# re-routed requests are still one flow each, crossing two workers
node tests/devtools/check-trace.mjs "$tmp/pm.json" --expect-flows 200 --quiet ||
	fail "DevTools does not see 200 flows in the post-mortem trace"
"$BIN/shmtrace-demo" --ring "$RING2" --create >/dev/null 2>&1 && fail "--create on an existing ring succeeded"
rm -f "/dev/shm/$RING2"
echo "pass"
