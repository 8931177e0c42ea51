#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make bench`: runs every benchmark case of shmtrace and of LTTng-UST (the
# peer) and prints one table. Benchmarks are not tests: `make test` never
# runs this. Each case runs once as a warm-up and then BENCH_RUNS times; the
# table shows medians. BENCH_QUICK=1: small counts, one run each (seconds).
#
# The LTTng side is built here (tests/bench/lttng/, cc -llttng-ust -ldl),
# not by the Makefile. As root, missing Debian packages (liblttng-ust-dev
# lttng-tools babeltrace2) are installed with apt-get unless
# BENCH_NO_INSTALL=1; BENCH_NO_LTTNG=1 skips the peer altogether. A session
# daemon is started for the run (or a running one is reused and left
# alone); every session, daemon, temporary directory and /dev/shm file this
# script makes is removed on exit.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-bench}
QUICK=${BENCH_QUICK:-0}
BENCH_DIR=$PWD/$BUILD/bench
RESULTS=$PWD/$BUILD/bench-results.txt

if [ "$QUICK" = 1 ]; then
	RUNS=1 SPAN_RUNS=1 N_SPAN=100000 N_BURST=100000 N_MP=200000 N_LAT=50000 N_ALONE=40000 N_DIS=10000000
	N_EXPORT=200000 EXPORT_RUNS=1 N_BIG=2000000 N_STREAM=100000
else
	RUNS=${BENCH_RUNS:-5} SPAN_RUNS=${BENCH_RUNS:-11} N_SPAN=500000 N_BURST=250000 N_MP=2000000
	N_LAT=1000000 N_ALONE=40000 N_DIS=200000000 N_EXPORT=10000000 EXPORT_RUNS=3 N_BIG=${BENCH_N_BIG:-100000000}
	N_STREAM=1000000
fi
RING_CAP=1048576
# case 9, the producers' tail: runs of seconds each (a time, or freezes),
# so fewer of them and no warm-up run (BENCH_TAIL_RUNS to choose)
if [ "$QUICK" = 1 ]; then
	TAIL_RUNS=1 N_OVER_MS=500 N_FREEZES=5 N_TSPANS=100
else
	TAIL_RUNS=${BENCH_TAIL_RUNS:-3} N_OVER_MS=3000 N_FREEZES=25 N_TSPANS=1000
fi

TMPD=$(mktemp -d /dev/shm/shmtbench-tmp.XXXXXX) || exit 1
# LTTng's traces go to a disk-backed directory (page cache), as LTTng is
# run at its best: its consumer writing tmpfs pages competed with the
# producers on this 2-core machine. BENCH_LT_OUT overrides.
LT_OUT=$(mktemp -d "${BENCH_LT_OUT:-/var/tmp}/shmtbench-lt.XXXXXX") || exit 1
PREFIX="shmtbench-$$-"
export BENCH_PREFIX=$PREFIX BENCH_TMP=$TMPD
unset SHMTRACE_RING	# case 4 needs shmtrace_default == NULL

# ------------------------------------------------------------------ cleanup
SESSIONS=()
OUR_SESSIOND=""
OUR_RUNDIR=""
SHM_BEFORE=$(ls /dev/shm 2>/dev/null | grep '^lttng-ust-wait' || true)

cleanup() {
	local s
	# sessions made in subshells too: every session with our prefix
	for s in "${SESSIONS[@]}" $(lttng list 2>/dev/null | grep -o "${PREFIX}[a-z0-9]*" | sort -u); do
		[ -n "$s" ] && lttng destroy "$s" >/dev/null 2>&1
	done
	if [ -n "$OUR_SESSIOND" ]; then
		kill "$OUR_SESSIOND" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$OUR_SESSIOND" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$OUR_SESSIOND" 2>/dev/null
		[ -n "$OUR_RUNDIR" ] && rm -rf "$OUR_RUNDIR"
		# the wait files our daemon and our traced programs made
		for f in /dev/shm/lttng-ust-wait*; do
			[ -e "$f" ] || continue
			printf '%s\n' "$SHM_BEFORE" | grep -qx "$(basename "$f")" || rm -f "$f"
		done
	fi
	rm -f /dev/shm/"$PREFIX"* 2>/dev/null
	rm -rf "$TMPD" "$LT_OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

exec > >(tee "$RESULTS") 2>&1

say() { printf '%s\n' "$*"; }
# field LINE KEY: the value of KEY=value in a RESULT line
field() { printf '%s\n' "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }
qfield() { printf '%s\n' "$1" | sed -n "s/.* $2=\"\([^\"]*\)\".*/\1/p"; }
fmt() { awk -v v="$1" -v d="${2:-1}" 'BEGIN { if (v == "") print "-"; else printf "%.*f\n", d, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2fx\n", a / b }'; }
check() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { if (v == "") { print "n/a"; exit }
	ok = (op == "<=") ? v <= t : v >= t; print ok ? "met" : "MISSED" }'; }

# ------------------------------------------------------------------ machine
say "shmtrace benchmarks ($([ "$QUICK" = 1 ] && echo "QUICK mode: small counts, 1 run" || echo "medians of $RUNS runs after 1 warm-up run"))"
say "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r)"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: figures are noisy)"
say "build: $BUILD (-O2 -g -march=native); captures on tmpfs ($TMPD), LTTng traces on disk ($LT_OUT)"
say ""

# ------------------------------------------------------------------ shmtrace
SHM=$BENCH_DIR/bench_shmtrace
if [ ! -x "$SHM" ]; then
	say "error: $SHM not built (make bench builds it)"
	exit 1
fi
if [ -x "$BUILD/shmtrace-collector" ]; then
	export BENCH_COLLECTOR=$PWD/$BUILD/shmtrace-collector
	DRAINER_NOTE="the real collector ($BUILD/shmtrace-collector) writing a capture to tmpfs"
else
	export BENCH_COLLECTOR=""
	DRAINER_NOTE="no collector built: a reader process (libshm/ring/ring_reader.h) reads every record and advances the tail"
fi
[ -x "$BUILD/shmtrace" ] && export BENCH_TOOL=$PWD/$BUILD/shmtrace || export BENCH_TOOL=""

# ------------------------------------------------------------------ LTTng
LT_WHY=""
LT=$BENCH_DIR/bench_lttng
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
lt_install() {
	local missing=() p
	for p in "$@"; do have_pkg "$p" || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "${BENCH_NO_INSTALL:-0}" = 1 ] && return 1
	[ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
	say "installing ${missing[*]} (apt-get)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 && return 0
	apt-get update -qq >/dev/null 2>&1
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1
}
if [ "${BENCH_NO_LTTNG:-0}" = 1 ]; then
	LT_WHY="BENCH_NO_LTTNG=1 was given"
elif ! lt_install liblttng-ust-dev lttng-tools; then
	LT_WHY="LTTng-UST is not installed (needs liblttng-ust-dev lttng-tools; run as root, or: sudo apt-get install liblttng-ust-dev lttng-tools)"
elif ! cc -O2 -g -march=native -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -Itests/bench/lttng \
		-o "$LT" tests/bench/lttng/bench_lttng.c tests/bench/lttng/bench_lttng_tail.c tests/bench/lttng/bench_tp.c \
		-llttng-ust -ldl \
		>"$TMPD/lttng-build.log" 2>&1; then
	LT_WHY="the LTTng-UST benchmark did not build: $(head -n 3 "$TMPD/lttng-build.log" | tr '\n' ' ')"
fi
HAVE_BT=0
lt_install babeltrace2 && command -v babeltrace2 >/dev/null 2>&1 && HAVE_BT=1

lt_rundir() { if [ "$(id -u)" -eq 0 ]; then echo /var/run/lttng; else echo "$LTTNG_HOME/.lttng"; fi; }
if [ -z "$LT_WHY" ]; then
	export LTTNG_HOME=$TMPD/lttng-home
	mkdir -p "$LTTNG_HOME"
	export LTTNG_UST_REGISTER_TIMEOUT=5000
	rundir=$(lt_rundir)
	if [ -f "$rundir/lttng-sessiond.pid" ] && kill -0 "$(cat "$rundir/lttng-sessiond.pid")" 2>/dev/null; then
		say "note: reusing the running session daemon (pid $(cat "$rundir/lttng-sessiond.pid")); it is left running"
	else
		[ -d "$rundir" ] || OUR_RUNDIR=$rundir
		if lttng-sessiond --daemonize --no-kernel >"$TMPD/sessiond.log" 2>&1; then
			for _ in $(seq 50); do [ -f "$rundir/lttng-sessiond.pid" ] && break; sleep 0.1; done
			OUR_SESSIOND=$(cat "$rundir/lttng-sessiond.pid" 2>/dev/null)
		fi
		[ -n "$OUR_SESSIOND" ] || LT_WHY="lttng-sessiond did not start: $(tail -n 2 "$TMPD/sessiond.log" | tr '\n' ' ')"
	fi
fi

LT_DISCARDED=0
# lt_start NAME: a session with one channel of 8 x 4 MiB sub-buffers (per-uid)
lt_start() {
	local s="${PREFIX}$1"
	lttng create "$s" --output="$LT_OUT/lt-$1" >/dev/null &&
	SESSIONS+=("$s") &&
	lttng enable-channel -u -s "$s" ch --subbuf-size=4M --num-subbuf=8 >/dev/null &&
	lttng enable-event -u -s "$s" -c ch 'shmtbench:*' >/dev/null &&
	lttng start "$s" >/dev/null &&
	lt_nice
}
# the consumer daemon's threads (nice is per thread) at the nice value
# shmtrace-collector takes by default: both drains at the same priority
lt_nice() {
	local p t
	for p in $(pgrep -x lttng-consumerd); do
		for t in /proc/"$p"/task/*; do renice -n -10 -p "${t##*/}" >/dev/null 2>&1; done
	done
	return 0
}
# lt_stop NAME: stops (waits for the data), records discards and size
lt_stop() {
	local s="${PREFIX}$1"
	lttng stop "$s" >/dev/null 2>&1
	# bit 63 of a count is no count (lttng-tools 2.13.9 printed 2^63 +
	# the count after some stop/starts; bench_lttng.c, lt_checkpoint())
	LT_DISCARDED=0
	for n in $(lttng list "$s" 2>/dev/null | sed -n 's/.*Discarded events: *\([0-9]*\).*/\1/p'); do
		LT_DISCARDED=$((LT_DISCARDED + (n & 0x7fffffffffffffff)))
	done
	lttng destroy "$s" >/dev/null 2>&1
	SESSIONS=("${SESSIONS[@]/$s}")
	LT_SIZE=$(du -sb "$LT_OUT/lt-$1" 2>/dev/null | cut -f1)
	# traces live on tmpfs: gigabytes of them left there squeeze the page
	# allocator that the next cases' collector writes through (measured: a
	# warm drain 6x slower, records dropped); only babeltrace2 needs "gen"
	[ "$1" = gen ] || rm -rf "$LT_OUT/lt-$1"
}
# lt_case NAME CASE N RUNS: one LTTng case in its own session
lt_case() {
	local out
	[ -n "$LT_WHY" ] && return 1
	if ! lt_start "$1"; then
		say "note: LTTng session for $1 could not be created"
		return 1
	fi
	out=$(BENCH_LT_SESSION="${PREFIX}$1" BENCH_N=$3 BENCH_RUNS=$4 timeout 900 "$LT" "$2" \
		2>"$TMPD/lt-$1.err" | grep '^RESULT')
	lt_stop "$1"
	[ -n "$out" ] || { say "note: LTTng $2 failed: $(tail -n 2 "$TMPD/lt-$1.err" | tr '\n' ' ')"; return 1; }
	printf '%s lt_discarded=%s lt_bytes=%s\n' "$out" "$LT_DISCARDED" "$LT_SIZE"
}
shm_case() {
	BENCH_N=$2 BENCH_RUNS=$3 timeout 900 "$SHM" "$1" 2>"$TMPD/shm-$1.err" | grep '^RESULT' ||
		{ say "note: shmtrace $1 failed: $(tail -n 3 "$TMPD/shm-$1.err" | tr '\n' ' ')" >&2; echo ""; }
}

say "work:"
say "  1 span:     one process, $N_SPAN spans per run into a drained ring (fits it: nothing dropped); t0 = now; t1 = now;"
say "              span(t0, t1) (LTTng: clock_gettime x2 + tracepoint); warm-up: one ring lap (1M); $SPAN_RUNS runs;"
say "              CPU ns = the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) / spans: robust to preemption; wall ns too"
say "  1b begin+end: the same, shmtrace_begin() + shmtrace_end() (the span kept open on the thread's stack meanwhile)"
say "  1c args:   the same as 1, shmtrace_span_args() with 3 arguments (2 integers, 1 string): 4 records per span"
say "  2 two-proc: 2 producer processes on one ring, each warmed up with a ring lap first (paced, no drops):"
say "              burst: 2 x $N_BURST spans per run into a drained ring; sustained: 2 x $N_MP spans per run, flat out;"
say "              paced at R spans/s in total: 2 x R/2 spans per run (a second at the asked rate), a fresh collector per R"
say "  2 LTTng at its best: cases 1 and 2 sustained with the tracepoint alone (no clock_gettime of ours; its own is"
say "              the event's only clock read), as in the earlier measurement of 13.1 to 13.8 M events/s"
say "  3 latency:  $N_LAT timed span calls per run (rdtscp around the call only), a 2nd process producing; both shmtrace"
say "              producers pause (untimed) while the ring is over half full, so the ring never drops; LTTng's 2nd is flat out"
say "  3b alone:  $N_ALONE timed span calls per run into a fresh discard ring of the default size with no collector (a ring"
say "              left to itself, read post-mortem), one process; warm-up and runs fit the ring: nothing dropped; no ring"
say "              lap before (shmtrace_open() reads each page of the ring ahead: the first touches are its, not the calls')"
say "  4 disabled: SHMTRACE_SCOPE with shmtrace_default == NULL, $N_DIS iterations (LTTng: tracepoint, no session)"
say "  5 drain:    a full ring of $RING_CAP records (discard mode, no collector) drained by a fresh collector; then"
say "              4 warm laps: the running collector stopped, the ring filled again, the collector let go"
say "  6 export:   \`shmtrace export\` of a capture of $N_EXPORT spans, 10 % in flows (babeltrace2: same count to text);"
say "              and \`shmtrace export --format otlp\` of the same to a file, then to /dev/null; then as many MB of"
say "              new pages written to the same tmpfs alone (1 MB write()s): the ceiling the file sets;"
say "              and \`shmtrace export --format perfetto\` of the same to a file"
say "  6b large:   a capture of $N_BIG spans made the same way, exported once in each format to /dev/null:"
say "              the rate and peak RSS at 10x case 6's size (memory flat if the RSS matches case 6's)"
say "  9 tail:   every call timed alone (CLOCK_MONOTONIC before and after, both tracers), counted over 100 us, 1 ms,"
say "              5 ms, 10 ms; counts per run, medians of $TAIL_RUNS runs (no warm-up run); slowest: of all runs;"
say "              a ring and a collector per run; lost: ring counters over the timed part (LTTng: its channel's"
say "              discarded events, lttng stop/list/start around the timed part)"
say "  9a oversubscribed: 32 producer processes flat out for $N_OVER_MS ms on $(nproc) cores, the collector draining"
say "  9b frozen peer: a producer flat out SIGSTOPped $N_FREEZES times for 200 ms (random gaps of 0-100 ms between),"
say "              every other time stopping itself with the ring lock held (LTTng, which has none: SIGSTOP every time);"
say "              2 producers paced at 1 M spans/s each timed"
say "  9c many threads: 1000 threads of one process, $N_TSPANS spans each once all are alive (a barrier), the main thread asleep until all are done; a ring"
say "              of the default configuration (262144 records, 1024 blocks, 1024 name slots)"
say "  9d stopped lock holder: a process stopped (SIGSTOP) holding the ring lock of a fresh ring with no collector"
say "              (discard, and overwrite), 100000 timed span calls beside it: the span call's bound on a lock wait"
say "  9 no tracer: 9a's and 9c's loops timing a call that does nothing, no tracer, no collector (the scheduler's floor)"
say "  10 snapshot: \`shmtrace snapshot\`'s copy of a full overwrite ring of $RING_CAP records (no collector) into a"
say "              capture on tmpfs, ms per M records; then case 3's timed span calls (no 2nd producer) into that"
say "              ring, once alone, once with another process taking a snapshot every 100 ms, and once with"
say "              shmtrace-collector --flight-recorder holding the ring (the producer hands full blocks over to it)"
say "  11 stream:  \`shmtrace stream\` (what shmtrace-collector --otlp-endpoint runs) sending a capture of $N_STREAM"
say "              spans (10 % in flows) whole to a loopback OTLP/HTTP sink that answers 200 at once, protobuf, gzip"
say "              and none: spans/s and CPU per M spans; and the collector's drain of a ring holding 8000000 records"
say "              with --otlp-endpoint (its stream reading beside it, on the same 2 cores) and without, in pairs,"
say "              from the collector's --ready-fd"
say "  ring: $RING_CAP records x 40 bytes (40 MiB), discard mode; drainer: $DRAINER_NOTE"
say "  LTTng-UST: own provider, payload ts/dur/flow u64 + name/cat/kind u32, per-uid buffers, 1 channel 8 x 4 MiB sub-buffers, consumer writing to $LT_OUT (disk-backed), its threads at nice -10 as shmtrace-collector; each two-proc run starts once the warm-up is written out (lttng stop/start)"
[ -n "$LT_WHY" ] && say "  LTTng-UST CANNOT RUN: $LT_WHY; shmtrace's own figures follow"
say ""

# ------------------------------------------------------------------ cases
say "running 1 span..."
S1=$(shm_case span1 "$N_SPAN" "$SPAN_RUNS")
L1=$(lt_case span1 span1 "$N_SPAN" "$SPAN_RUNS")
say "running 1b begin+end, 1c args..."
S1B=$(shm_case beginend "$N_SPAN" "$SPAN_RUNS")
S1C=$(shm_case args "$N_SPAN" "$SPAN_RUNS")
say "running 2 two-proc burst..."
S2B=$(shm_case mp2 "$N_BURST" "$SPAN_RUNS")	# short runs: more of them
L2B=$(lt_case mp2b mp2 "$N_BURST" "$SPAN_RUNS")
say "running 2 two-proc sustained..."
S2=$(shm_case mp2 "$N_MP" "$RUNS")
# the highest total rate the collector keeps up with, nothing dropped in
# any run: producers paced at 16, 20, ... 40 M spans/s, up to the first
# rate that drops (a higher one drops too)
PACED=()
for r in 16000000 20000000 24000000 28000000 32000000 36000000 40000000; do
	say "running 2 two-proc paced at $((r / 1000000)) M spans/s..."
	# a second per run at the asked rate (2 x r/2 spans); QUICK: N_MP
	PACED+=("$(BENCH_RATE=$r shm_case mp2 "$([ "$QUICK" = 1 ] && echo "$N_MP" || echo $((r / 2)))" "$RUNS")")
	[ "$(field "${PACED[-1]}" dropped)" = 0 ] || break
done
L2=$(lt_case mp2 mp2 "$N_MP" "$RUNS")
# LTTng at its best: the tracepoint alone, its own clock read the only one
# (the configuration of the earlier 13 M events/s measurement)
say "running 2 LTTng, tracepoint alone..."
export BENCH_LT_BARE=1
L1X=$(lt_case span1x span1 "$N_SPAN" "$SPAN_RUNS")
L2X=$(lt_case mp2x mp2 "$N_MP" "$RUNS")
unset BENCH_LT_BARE
say "running 3 latency..."
S3=$(shm_case lat "$N_LAT" "$RUNS")
L3=$(lt_case lat lat "$N_LAT" "$RUNS")
say "running 3b alone..."
S3B=$(shm_case alone "$N_ALONE" "$RUNS")
say "running 4 disabled..."
S4=$(shm_case disabled "$N_DIS" "$RUNS")
L4=""
# no session: the tracepoint is compiled in and off
[ -z "$LT_WHY" ] && L4=$(BENCH_N=$N_DIS BENCH_RUNS=$RUNS timeout 600 "$LT" disabled 2>/dev/null | grep '^RESULT')
say "running 5 drain..."
S5=$(shm_case drain 1 "$RUNS")
# an idle collector: no producer writes for IDLE_S seconds; what CPU did it
# use? (a measurement, so it sleeps: there is nothing to wait for)
IDLE_S=${BENCH_IDLE_S:-5}
[ "$QUICK" = 1 ] && IDLE_S=1
IDLE_MS=""
if [ -n "$BENCH_COLLECTOR" ]; then
	say "running 5 idle collector (${IDLE_S} s)..."
	iring="shmtbench-$$-idle"
	mkfifo "$TMPD/idle-ready"
	"$BENCH_COLLECTOR" --ring "$iring" --create --output "$TMPD/idle.cap" -q --ready-fd 3 \
		3>"$TMPD/idle-ready" &
	ipid=$!
	read -r _ <"$TMPD/idle-ready"
	# schedstat's first field: CPU ns, exact (stat's ticks are 10 ms)
	t0=$(awk '{ print $1 }' "/proc/$ipid/schedstat")
	sleep "$IDLE_S"
	t1=$(awk '{ print $1 }' "/proc/$ipid/schedstat")
	kill -TERM "$ipid"; wait "$ipid" || true
	IDLE_MS=$(awk -v a="$t0" -v b="$t1" -v s="$IDLE_S" 'BEGIN { printf "%.3f", (b - a) / 1e6 / s }')
fi
say "running 6 export..."
S6=$(shm_case export "$N_EXPORT" "$EXPORT_RUNS")
say "running 6 export --format otlp..."
S6O=$(shm_case export-otlp "$N_EXPORT" "$EXPORT_RUNS")
say "running 6 export --format perfetto..."
S6P=$(shm_case export-perfetto "$N_EXPORT" "$EXPORT_RUNS")
say "running 6b export of a large capture..."
S6B=$(shm_case export-big "$N_BIG" 1)
L6=""
BT_SECS="" BT_RSS=""
if [ -z "$LT_WHY" ]; then
	L6=$(lt_case gen gen "$N_EXPORT" 1)
	if [ $HAVE_BT = 1 ] && [ -n "$L6" ]; then
		say "running 6 babeltrace2..."
		if [ -x /usr/bin/time ]; then
			/usr/bin/time -f '%e %M' -o "$TMPD/bt.time" babeltrace2 "$LT_OUT/lt-gen" >/dev/null 2>"$TMPD/bt.err"
			read -r BT_SECS BT_RSS <"$TMPD/bt.time"
		else
			a=$(date +%s.%N); babeltrace2 "$LT_OUT/lt-gen" >/dev/null 2>"$TMPD/bt.err"; b=$(date +%s.%N)
			BT_SECS=$(awk -v a="$a" -v b="$b" 'BEGIN { print b - a }')
		fi
	fi
	rm -rf "$TMPD"/lt-*
fi

say "running 10 snapshot..."
S10=$(shm_case snapshot "$N_LAT" "$RUNS")
# 11: the live stream to OpenTelemetry
S11=""
if [ -x "$BENCH_DIR/bench_stream" ]; then
	say "running 11 stream..."
	S11=$(BENCH_N=$N_STREAM BENCH_RUNS=$RUNS timeout 900 "$BENCH_DIR/bench_stream" stream \
		2>"$TMPD/shm-stream.err" | grep '^RESULT') ||
		say "note: shmtrace stream case failed: $(tail -n 3 "$TMPD/shm-stream.err" | tr '\n' ' ')"
fi

# 8: the Python binding (python/, `make python`): `with shmtrace.span()`
PYTHON=${PYTHON:-/usr/bin/python3}
S8=""
if [ -x "$PYTHON" ] && ls python/shmtrace/_shmtrace*.so >/dev/null 2>&1; then
	say "running 8 python..."
	S8=$(PYTHONPATH="$PWD/python" "$PYTHON" tests/bench/bench_python.py --runs "$SPAN_RUNS" \
		--n "$([ "$QUICK" = 1 ] && echo 100000 || echo 1000000)" --prefix "${PREFIX}py-" | grep '^RESULT')
fi

# 9: the producers' tail under stress (tests/bench/bench_tail.c)
say "running 9a oversubscribed..."
S9A=$(shm_case oversub "$N_OVER_MS" "$TAIL_RUNS")
L9A=$(lt_case oversub oversub "$N_OVER_MS" "$TAIL_RUNS")
B9A=$(shm_case oversub-bare "$N_OVER_MS" "$TAIL_RUNS")
say "running 9b frozen peer..."
S9B=$(shm_case frozen "$N_FREEZES" "$TAIL_RUNS")
L9B=$(lt_case frozen frozen "$N_FREEZES" "$TAIL_RUNS")
say "running 9c many threads..."
S9C=$(shm_case threads "$N_TSPANS" "$TAIL_RUNS")
L9C=$(lt_case threads threads "$N_TSPANS" "$TAIL_RUNS")
B9C=$(shm_case threads-bare "$N_TSPANS" "$TAIL_RUNS")
say "running 9d stopped lock holder..."
S9D=$(shm_case stopped 100000 "$TAIL_RUNS")
S9DO=$(shm_case stopped-ow 100000 "$TAIL_RUNS")

# ------------------------------------------------------------------ table
say ""
row() { printf '%-34s %14s %14s %9s  %s\n' "$@"; }
row "case" "shmtrace" "LTTng-UST" "ratio" "target"
row "----" "--------" "---------" "-----" "------"

v=$(field "$S1" cpu_ns); l=$(field "$L1" cpu_ns)
verdict=$(check "$(awk -v a="$v" -v b="$l" 'BEGIN { if (a != "" && b != "") print a / b }')" "<=" 0.3334)
d=$(field "$S1" dropped); [ -n "$d" ] && [ "$d" != 0 ] && verdict="not valid: $d dropped"
row "1 span, CPU ns per span" "$(fmt "$v" 1)" "$(fmt "$l" 1)" "$(ratio "$v" "$l")" "<= 0.33x LTTng: $verdict"
v=$(field "$S1" cpu_ns); c=$(field "$S1" clocks_cpu_ns)
row "1 span: of which 2 x shmtrace_now()" "$(fmt "$c" 1)" "-" "" "the same loop without the span call, same run"
row "1 machine: 2 x rdtsc, CPU ns" "$(fmt "$(field "$S1" rdtsc2_cpu_ns)" 1)" "-" "" "bare: what 2 x shmtrace_now() cannot go below"
row "1 machine: 2 x clock_gettime, ns" "$(fmt "$(field "$S1" mono2_cpu_ns)" 1)" "-" "" "CLOCK_MONOTONIC: LTTng's case 1 loop, around each event"
row "1 span: the call alone, CPU ns" "$(fmt "$(awk -v a="$v" -v b="$c" 'BEGIN { if (a != "" && b != "") print a - b }')" 1)" "-" "" \
	"mean CPU <= 30 ns (with the clocks): $(check "$v" "<=" 30)"
v=$(field "$S1" ns); l=$(field "$L1" ns)
row "1 span, wall ns per span" "$(fmt "$v" 1)" "$(fmt "$l" 1)" "$(ratio "$v" "$l")" "(includes preemption by other load)"
v=$(field "$S1B" cpu_ns)
row "1b begin+end, CPU ns per span" "$(fmt "$v" 1)" "-" "" "within a few ns of 1: +$(fmt "$(awk -v a="$v" -v b="$(field "$S1" cpu_ns)" 'BEGIN { if (a != "" && b != "") print a - b }')" 1) ns"
v=$(field "$S1C" cpu_ns)
row "1c span + 3 args, CPU ns per span" "$(fmt "$v" 1)" "-" "" "(4 records each; 1 is a span without args)"

mrate() { awk -v x="$1" 'BEGIN { if (x != "") print x / 1e6 }'; }
for k in burst sustained; do
	if [ $k = burst ]; then SS=$S2B LL=$L2B; else SS=$S2 LL=$L2; fi
	v=$(field "$SS" rate); l=$(field "$LL" rate); d=$(field "$SS" dropped)
	verdict=$(check "$(awk -v a="$v" -v b="$l" 'BEGIN { if (a != "" && b != "") print a / b }')" ">=" 1.5)
	[ -n "$d" ] && [ "$d" != 0 ] && verdict="not valid: $d dropped"
	row "2 two procs $k, M spans/s" "$(fmt "$(mrate "$v")" 2)" "$(fmt "$(mrate "$l")" 2)" "$(ratio "$v" "$l")" \
		">= 1.5x LTTng: $verdict"
	row "2 two procs $k, dropped" "${d:--}" "$(field "$LL" lt_discarded)" "" \
		"0 with the collector: $(check "$d" "<=" 0)"
	if [ -n "$d" ] && [ "$d" != 0 ]; then
		# what reached the capture: the rate times the fraction kept (all runs)
		kept=$(awk -v r="$v" -v p="$(field "$SS" published)" -v d="$d" 'BEGIN { print r * p / (p + d) }')
		row "2 two procs $k, M spans/s kept" "$(fmt "$(mrate "$kept")" 2)" "$(fmt "$(mrate "$l")" 2)" "$(ratio "$kept" "$l")" \
			"(rate x fraction not dropped)"
	fi
done
# LTTng at its best: its two-process rate against the ceiling its own
# per-event cost (case 1, same run) sets on two cores, and the share of
# those cores its consumer daemon took while the producers ran
lcpu=$(field "$L1" cpu_ns); l2=$(field "$L2" rate)
if [ -n "$lcpu" ] && [ -n "$l2" ]; then
	ceil=$(awk -v c="$lcpu" 'BEGIN { print 2e9 / c }')
	cons=$(awk -v c="$(field "$L2" consumerd_cpu_s)" -v s="$(field "$L2" measured_s)" \
		'BEGIN { if (c != "" && s > 0) printf "%.0f", 100 * c / (2 * s) }')
	row "2 LTTng ceiling: 2 cores / case-1 cost" "-" "$(fmt "$(mrate "$ceil")" 2)" "" \
		"sustained reaches $(awk -v a="$l2" -v b="$ceil" 'BEGIN { printf "%.0f", 100 * a / b }') % of it; lttng-consumerd took ${cons:-?} % of the 2 cores meanwhile"
fi
lcpu=$(field "$L1X" cpu_ns); l2=$(field "$L2X" rate)
if [ -n "$lcpu" ] && [ -n "$l2" ]; then
	ceil=$(awk -v c="$lcpu" 'BEGIN { print 2e9 / c }')
	row "2 LTTng tracepoint alone, CPU ns" "-" "$(fmt "$lcpu" 1)" "" "case 1 without our two clock reads"
	row "2 LTTng tracepoint alone, M ev/s" "-" "$(fmt "$(mrate "$l2")" 2)" "" \
		"2 procs, $(field "$L2X" lt_discarded) discarded; within 15 % of 13 M/s: $(check "$(mrate "$l2")" ">=" 11.05); $(awk -v a="$l2" -v b="$ceil" 'BEGIN { printf "%.0f", 100 * a / b }') % of its ceiling (2 cores / its cost: $(fmt "$(mrate "$ceil")" 2))"
fi
best=
for P in "${PACED[@]}"; do
	want=$(field "$P" paced); v=$(field "$P" rate); d=$(field "$P" dropped)
	[ -n "$want" ] || continue
	row "2 paced at $(mrate "$want") M/s: achieved" "$(fmt "$(mrate "$v")" 2)" "$(fmt "$(mrate "$(field "$L2" rate)")" 2)" \
		"$(ratio "$v" "$(field "$L2" rate)")" "dropped ${d:--}$( [ "$d" = 0 ] && awk -v a="$v" -v b="$(field "$L2" rate)" 'BEGIN { if (b != "" && a / b >= 1.5) print "; >= 1.5x LTTng with 0 dropped: met" }')"
	[ "$d" = 0 ] && { best=$(awk -v a="$v" -v b="${best:-0}" 'BEGIN { print (a > b) ? a : b }'); best_want=$want; }
done
[ -n "$best" ] && row "2 highest paced rate, 0 dropped" "$(fmt "$(mrate "$best")" 2)" "" "" \
	"achieved (asked $(mrate "$best_want") M/s), 0 dropped in every run; >= 24: $(check "$(mrate "$best")" ">=" 24), goal 30: $(check "$(mrate "$best")" ">=" 30)"
# the collector's holds of the ring lock in the sustained run: its
# summary line's "longest lock hold X us (N of M over 100 us)"
s=$(qfield "$S2" summary)
hl=$(printf '%s\n' "$s" | sed -n 's/.*longest lock hold \([0-9.]*\) us (\([0-9]*\) of \([0-9]*\) over.*/\1 \2 \3/p')
[ -n "$hl" ] && row "2 collector: lock holds over 100 us" "$(echo $hl | cut -d' ' -f2)" "" "" \
	"of $(echo $hl | cut -d' ' -f3) holds, the longest $(echo $hl | cut -d' ' -f1) us (sustained run): a hold sequences full blocks or publishes copies of partly filled ones, a few stores each; longer when preempted"

# v - l, for "<= LTTng's" (empty when either is)
minus() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "") print a - b }'; }
for p in p50 p99 p999 p9999 max max_med; do
	v=$(field "$S3" $p); l=$(field "$L3" $p)
	case $p in
	p99) t="<= 150 ns: $(check "$v" "<=" 150)" ;;
	p999) t="<= 1 us: $(check "$v" "<=" 1000); stretch, <= LTTng's: $(check "$(minus "$v" "$l")" "<=" 0)" ;;
	p9999) t="<= LTTng's: $(check "$(minus "$v" "$l")" "<=" 0) (1 call in 1024 hands its full block over)" ;;
	max) t="<= LTTng's: $(check "$(minus "$v" "$l")" "<=" 0) (the slowest call of all runs)" ;;
	max_med) t="<= LTTng's: $(check "$(minus "$v" "$l")" "<=" 0) (each run's slowest call, the median over runs)" ;;
	*) t="" ;;
	esac
	name=$p; [ "$p" = max_med ] && name="max/run"
	row "3 latency $name, ns (2nd proc running)" "$(fmt "$v" 1)" "$(fmt "$l" 1)" "$(ratio "$v" "$l")" "$t"
done
row "3 latency: timing overhead, ns" "$(fmt "$(field "$S3" timing_overhead)" 1)" "$(fmt "$(field "$L3" timing_overhead)" 1)" "" "(included above)"
for p in p50 p99 p999 p9999 max; do
	case $p in
	p999) t="(1 call in 1024 sequences its full block in place)" ;;
	*) t="" ;;
	esac
	row "3b alone $p, ns (no collector)" "$(fmt "$(field "$S3B" $p)" 1)" "-" "" "$t"
done

v=$(field "$S4" diff); l=$(field "$L4" diff)
row "4 disabled, ns over empty loop" "$(fmt "$v" 3)" "$(fmt "$l" 3)" "" "<= 2 ns: $(check "$v" "<=" 2)"
row "4 disabled, loop ns (empty $(fmt "$(field "$S4" empty)" 2))" "$(fmt "$(field "$S4" scope)" 3)" "$(fmt "$(field "$L4" tp)" 3)" "" ""
[ -n "$L4" ] && row "4 LTTng span, no session (2 clocks)" "-" "$(fmt "$(field "$L4" span_with_clocks)" 1)" "" "(what the clocks cost when off)"

if [ -n "$(field "$S5" rate)" ]; then
	row "5 drain, M records/s (to tail=head)" "$(fmt "$(awk -v x="$(field "$S5" rate)" 'BEGIN { print x / 1e6 }')" 2)" "-" "" ""
	row "5 drain, M records/s (to exit)" "$(fmt "$(awk -v x="$(field "$S5" rate_to_exit)" 'BEGIN { print x / 1e6 }')" 2)" "-" "" ""
	row "5 drain, warm, M records/s" "$(fmt "$(awk -v x="$(field "$S5" warm_rate)" 'BEGIN { print x / 1e6 }')" 2)" "-" "" \
		">= 60 M/s: $(check "$(field "$S5" warm_rate)" ">=" 60000000) (running collector, full ring, encoding included)"
	row "5 drain, warm, CPU ms per M records" "$(fmt "$(field "$S5" warm_cpu_ms_per_m)" 1)" "-" "" \
		"user $(fmt "$(field "$S5" warm_user_ms_per_m)" 1) + system $(fmt "$(field "$S5" warm_sys_ms_per_m)" 1) (split by $(field "$S5" warm_ticks) clock ticks)"
	row "5 drain, MB/s of capture written" "$(fmt "$(field "$S5" mbs)" 1)" "-" "" ""
	row "5 drain, CPU ms per M records" "$(fmt "$(field "$S5" cpu_ms_per_m)" 1)" "-" "" "cold collector, full ring; $(fmt "$(awk -v x="$(field "$S5" sys_share)" 'BEGIN { print x * 100 }')" 0) % system"
	[ "$(field "$S2" drainer)" = collector ] &&
		row "5 CPU ms per M records, warm" "$(fmt "$(field "$S2" drainer_cpu_ms_per_m)" 1)" "-" "" "collector of case 2 sustained; $(fmt "$(awk -v x="$(field "$S2" drainer_sys)" 'BEGIN { print x * 100 }')" 0) % system"
	[ -n "$IDLE_MS" ] && row "5 idle collector, CPU ms per s" "$IDLE_MS" "-" "" "no producer writing; ${IDLE_S} s; 100 ms poll backing off to 1 s"
	row "5 drain, collector peak RSS, MB" "$(fmt "$(field "$S5" hwm_mb)" 1)" "-" "" ""
else
	row "5 drain" "skipped" "-" "" "$(qfield "$S5" skipped)"
fi

bt_evs=""; [ -n "$BT_SECS" ] && bt_evs=$(awk -v n="$N_EXPORT" -v s="$BT_SECS" 'BEGIN { if (s > 0) print n / s }')
if [ -n "$(field "$S6" evs)" ]; then
	row "6 export, M events/s" "$(fmt "$(awk -v x="$(field "$S6" evs)" 'BEGIN { print x / 1e6 }')" 2)" \
		"$(fmt "$(awk -v x="$bt_evs" 'BEGIN { if (x != "") print x / 1e6 }')" 2)" "$(ratio "$(field "$S6" evs)" "$bt_evs")" "(LTTng: babeltrace2 to text)"
	row "6 export, MB/s of JSON" "$(fmt "$(field "$S6" mbs)" 1)" "-" "" "$(fmt "$(awk -v x="$(field "$S6" json_bytes)" 'BEGIN { print x / 1e6 }')" 0) MB of JSON"
	row "6 export, peak RSS, MB" "$(fmt "$(field "$S6" rss_mb)" 1)" "$(fmt "$(awk -v x="$BT_RSS" 'BEGIN { if (x != "") print x / 1024 }')" 1)" "" ""
else
	row "6 export" "skipped" "$(fmt "$(awk -v x="$bt_evs" 'BEGIN { if (x != "") print x / 1e6 }')" 2)" "" "$(qfield "$S6" skipped)"
fi
if [ -n "$(field "$S6O" evs)" ]; then
	row "6 export otlp, M spans/s" "$(fmt "$(awk -v x="$(field "$S6O" evs)" 'BEGIN { print x / 1e6 }')" 2)" "-" "" "to a file (OTLP/JSON lines)"
	row "6 export otlp, MB/s of JSON" "$(fmt "$(field "$S6O" mbs)" 1)" "-" "" "$(fmt "$(awk -v x="$(field "$S6O" json_bytes)" 'BEGIN { print x / 1e6 }')" 0) MB of OTLP/JSON"
	row "6 otlp to /dev/null, M spans/s" "$(fmt "$(awk -v x="$(field "$S6O" evs_null)" 'BEGIN { print x / 1e6 }')" 2)" "-" "" "the exporter alone, without the file"
	row "6 as many new tmpfs pages, MB/s" "$(fmt "$(field "$S6O" page_mbs)" 1)" "-" "" "writing that many MB to the same tmpfs, alone"
	row "6 export otlp, peak RSS, MB" "$(fmt "$(field "$S6O" rss_mb)" 1)" "-" "" "batches of 4 MB"
else
	row "6 export otlp" "skipped" "-" "" "$(qfield "$S6O" skipped)"
fi
if [ -n "$(field "$S6P" evs)" ]; then
	row "6 export perfetto, M events/s" "$(fmt "$(awk -v x="$(field "$S6P" evs)" 'BEGIN { print x / 1e6 }')" 2)" "-" "" "to a file (protobuf), the input read twice"
	row "6 export perfetto, bytes per span" "$(fmt "$(awk -v b="$(field "$S6P" json_bytes)" -v n="$(field "$S6P" records)" 'BEGIN { if (n > 0) print b / n }')" 1)" "-" "" "JSON: $(fmt "$(awk -v b="$(field "$S6" json_bytes)" -v n="$(field "$S6" records)" 'BEGIN { if (n > 0) print b / n }')" 1); $(fmt "$(awk -v x="$(field "$S6P" json_bytes)" 'BEGIN { print x / 1e6 }')" 0) MB"
	row "6 export perfetto, peak RSS, MB" "$(fmt "$(field "$S6P" rss_mb)" 1)" "-" "" ""
else
	row "6 export perfetto" "skipped" "-" "" "$(qfield "$S6P" skipped)"
fi
if [ -n "$(field "$S6B" records)" ]; then
	for f in chrome otlp perfetto; do
		v=$(field "$S6B" ${f}_evs)
		[ -n "$v" ] || { row "6b large $f" "failed" "-" "" "$(field "$S6B" ${f}_failed)"; continue; }
		row "6b large $f, M events/s" "$(fmt "$(awk -v x="$v" 'BEGIN { print x / 1e6 }')" 2)" "-" "" "$(field "$S6B" records) spans, $(field "$S6B" flows) flows, to /dev/null"
		row "6b large $f, peak RSS, MB" "$(fmt "$(field "$S6B" ${f}_rss_mb)" 1)" "-" "" "bounded: independent of the spans"
	done
else
	row "6b large export" "skipped" "-" "" "$(qfield "$S6B" skipped)"
fi

if [ -n "$S8" ]; then
	v=$(field "$S8" span)
	row "8 python: with shmtrace.span(), ns" "$(fmt "$v" 1)" "-" "" "<= 250 ns: $(check "$v" "<=" 250) (CPython $(field "$S8" python))"
	row "8 python: empty with block, ns" "$(fmt "$(field "$S8" empty_with)" 1)" "-" "" "(a class with __enter__/__exit__)"
	row "8 python: perf_counter_ns() pair, ns" "$(fmt "$(field "$S8" perf_pair)" 1)" "-" "" ""
	row "8 python: span, tracing off, ns" "$(fmt "$(field "$S8" off)" 1)" "-" "" "(loop overhead subtracted from all)"
else
	row "8 python" "skipped" "-" "" "make python first"
fi

# 9: measurements, no targets; "-" where a side did not run
n9() { local v; v=$(field "$1" "$2"); printf '%s\n' "${v:--}"; }
ms9() { awk -v x="$(field "$1" max_us)" 'BEGIN { if (x == "") print "-"; else printf "%.1f\n", x / 1000 }'; }
pct9() { awk -v a="$(field "$1" lost)" -v b="$(field "$1" calls)" \
	'BEGIN { if (a == "" || b <= 0) print "-"; else printf "%.1f %%\n", 100 * a / b }'; }
if [ -n "$S9A$L9A" ]; then
	v=$(field "$S9A" rate); l=$(field "$L9A" rate)
	row "9a 32 procs, M spans/s" "$(fmt "$(mrate "$v")" 2)" "$(fmt "$(mrate "$l")" 2)" "$(ratio "$v" "$l")" \
		"flat out, $N_OVER_MS ms a run, every call timed"
	for k in 100us 1ms 10ms; do
		row "9a calls over ${k%??} ${k#"${k%??}"}" "$(n9 "$S9A" over_$k)" "$(n9 "$L9A" over_$k)" "" \
			"per run, of $(n9 "$S9A" calls) calls (LTTng: $(n9 "$L9A" calls)); no tracer: $(n9 "$B9A" over_$k)"
	done
	row "9a slowest call, ms" "$(ms9 "$S9A")" "$(ms9 "$L9A")" "" "of all runs; no tracer: $(ms9 "$B9A")"
	row "9a records lost" "$(pct9 "$S9A")" "$(pct9 "$L9A")" "" \
		"of the calls; shmtrace: $(n9 "$S9A" dropped) ring full, $(n9 "$S9A" lock_dropped) to lock timeouts"
fi
if [ -n "$S9B$L9B" ]; then
	row "9b paced calls over 5 ms" "$(n9 "$S9B" over_5ms)" "$(n9 "$L9B" over_5ms)" "" \
		"per run, 2 producers at 1 M/s; the third frozen $(n9 "$S9B" freezes) times in all, 200 ms each"
	row "9b paced slowest call, ms" "$(ms9 "$S9B")" "$(ms9 "$L9B")" "" \
		"frozen inside the ring lock: $(n9 "$S9B" in_lock) of $(n9 "$S9B" freezes) freezes"
	row "9b records lost" "$(n9 "$S9B" lost)" "$(n9 "$L9B" lost)" "" \
		"per run, all 3 producers; paced calls that dropped theirs: $(n9 "$S9B" errors)"
fi
if [ -n "$S9C$L9C" ]; then
	row "9c 1000 threads, slowest call, ms" "$(ms9 "$S9C")" "$(ms9 "$L9C")" "" \
		"$N_TSPANS spans each, the default ring: $(n9 "$S9C" capacity) records, $(n9 "$S9C" blocks) blocks; no tracer: $(ms9 "$B9C")"
	row "9c calls over 5 ms" "$(n9 "$S9C" over_5ms)" "$(n9 "$L9C" over_5ms)" "" "per run; no tracer: $(n9 "$B9C" over_5ms)"
	row "9c records lost" "$(n9 "$S9C" lost)" "$(n9 "$L9C" lost)" "" \
		"per run; shmtrace: $(n9 "$S9C" dropped) ring full, $(n9 "$S9C" lock_dropped) to lock timeouts"
	row "9c thread names lost" "$(n9 "$S9C" names_dropped)" "-" "" "per run (names_dropped)"
fi
if [ -n "$S9D" ]; then
	row "9d stopped holder, slowest call, ms" "$(ms9 "$S9D")" "-" "" \
		"no collector, a discard ring, $(n9 "$S9D" n) calls a run; overwrite ring: $(ms9 "$S9DO") ms (the bound: 2 ms)"
	row "9d calls over 5 ms" "$(n9 "$S9D" over_5ms)" "-" "" "per run; overwrite ring: $(n9 "$S9DO" over_5ms)"
	row "9d records lost" "$(n9 "$S9D" lost)" "-" "" \
		"per run, $(n9 "$S9D" lock_dropped) to the lock; overwrite ring: $(n9 "$S9DO" lost), $(n9 "$S9DO" lock_dropped) to the lock"
fi
if [ -n "$(field "$S10" ms_per_m)" ]; then
	row "10 snapshot, ms per M records" "$(fmt "$(field "$S10" ms_per_m)" 1)" "-" "" \
		"CPU $(fmt "$(field "$S10" cpu_ms_per_m)" 1) ms; a full overwrite ring of $(field "$S10" records) records"
	row "10 span p99.9, a snapshot per 100 ms" "$(fmt "$(field "$S10" p999_on)" 1)" "-" "" \
		"without: $(fmt "$(field "$S10" p999_off)" 1) ns; p99.99 $(fmt "$(field "$S10" p9999_on)" 1) against $(fmt "$(field "$S10" p9999_off)" 1) ns"
	if [ "$(field "$S10" recorder)" = 1 ]; then
		row "10 span p99.9, a flight recorder on" "$(fmt "$(field "$S10" p999_rec)" 1)" "-" "" \
			"p99 $(fmt "$(field "$S10" p99_rec)" 1), p99.99 $(fmt "$(field "$S10" p9999_rec)" 1) ns, slowest $(fmt "$(field "$S10" max_rec)" 1) ns; no recorder: p99 $(fmt "$(field "$S10" p99_off)" 1)"
	fi
else
	row "10 snapshot" "skipped" "-" "" ""
fi
mfmt() { fmt "$(awk -v x="$1" 'BEGIN { if (x != "") print x / 1e6 }')" 2; }
if [ -n "$(field "$S11" rate_gzip)" ]; then
	row "11 stream gzip, M spans/s" "$(mfmt "$(field "$S11" rate_gzip)")" "-" "" "protobuf, to a loopback sink; case 5 drain: $(mfmt "$(field "$S5" rate)") M records/s"
	row "11 stream gzip, CPU ms per M spans" "$(fmt "$(field "$S11" cpu_ms_per_m_gzip)" 1)" "-" "" "the stream process (its reader and sender)"
	row "11 stream none, M spans/s" "$(mfmt "$(field "$S11" rate_none)")" "-" "" "without compression"
	row "11 stream none, CPU ms per M spans" "$(fmt "$(field "$S11" cpu_ms_per_m_none)" 1)" "-" "" ""
	row "11 drain, stream off, M records/s" "$(mfmt "$(field "$S11" drain_off)")" "-" "" "$(field "$S11" drain_n) records, from its --ready-fd; $(field "$S11" drain_runs) runs"
	row "11 drain, stream on, M records/s" "$(mfmt "$(field "$S11" drain_on)")" "-" "" "the same with --otlp-endpoint: $(ratio "$(field "$S11" drain_on)" "$(field "$S11" drain_off)") of off"
else
	row "11 stream" "skipped" "-" "" "$(qfield "$S11" skipped)"
fi

# 7: bytes per span on disk: case 6's capture (10 % of spans in flows)
# against LTTng's trace of the same spans; case 5's capture too
bpr=$(field "$S6" bytes_per_rec) bpr_from="case 6 capture, 10 % in flows"
[ -z "$bpr" ] && bpr=$(field "$S5" bytes_per_rec) bpr_from="case 5 capture"
lbpe=""
if [ -n "$L6" ]; then lbpe=$(awk -v b="$(field "$L6" lt_bytes)" -v n="$(field "$L6" events)" 'BEGIN { if (n > 0) print b / n }')
elif [ -n "$L1" ]; then lbpe=$(awk -v b="$(field "$L1" lt_bytes)" -v n="$(field "$L1" events)" 'BEGIN { if (n > 0) print b / n }'); fi
row "7 bytes per span on disk" "$(fmt "$bpr" 1)" "$(fmt "$lbpe" 1)" "$(ratio "$bpr" "$lbpe")" \
	"<= 12: $(check "$bpr" "<=" 12) ($bpr_from; records carry pid+tid; LTTng's do not)"
[ -n "$(field "$S6" bytes_per_rec)" ] && [ -n "$(field "$S5" bytes_per_rec)" ] &&
	row "7 bytes per span, case 5 capture" "$(fmt "$(field "$S5" bytes_per_rec)" 1)" "-" "" \
		"<= 16: $(check "$(field "$S5" bytes_per_rec)" "<=" 16) (drain workload, 10 % in flows)"

say ""
say "drainers: span1 $(field "$S1" drainer), two-proc $(field "$S2" drainer), latency $(field "$S3" drainer)"
say "dropped: span1 $(field "$S1" dropped), latency $(field "$S3" dropped) (from the ring header)"
s=$(qfield "$S2" summary); [ -n "$s" ] && say "collector summary (two-proc sustained): $s"
s=$(qfield "$S5" summary); [ -n "$s" ] && say "collector summary (drain):    $s"
s=$(qfield "$S6" summary); [ -n "$s" ] && say "collector summary (export):   $s"
[ -n "$S6" ] && [ -n "$(field "$S6" dropped)" ] && say "export capture: $(field "$S6" records) records, $(field "$S6" flows) flows, $(field "$S6" dropped) dropped, $(field "$S6" capture_bytes) bytes"
[ -n "$LT_WHY" ] && say "LTTng-UST did not run: $LT_WHY"
[ -n "$L2" ] && say "LTTng discarded events: span1 $(field "$L1" lt_discarded), two-proc $(field "$L2B" lt_discarded)/$(field "$L2" lt_discarded), latency $(field "$L3" lt_discarded)"
say ""
say "raw results:"
for r in "$S1" "$L1" "$S2B" "$L2B" "$S2" "$L2" "$L1X" "$L2X" "$S3" "$L3" "$S3B" "$S4" "$L4" "$S5" "$S6" "$S6B" "$L6" "$S8" \
	"$S9A" "$L9A" "$B9A" "$S9B" "$L9B" "$S9C" "$L9C" "$B9C" "$S9D" "$S9DO" "$S10" "$S11"; do [ -n "$r" ] && say "  $r"; done
[ -n "$BT_SECS" ] && say "  babeltrace2: $N_EXPORT events in $BT_SECS s, max RSS ${BT_RSS:-?} KiB"
say "(saved to $RESULTS)"
exit 0
