#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh - builds the libFuzzer harnesses into build-fuzz/, makes
# seeds from a real collector run, replays tests/fuzz/regressions/<harness>/,
# then fuzzes each harness for FUZZ_SECONDS on a scratch copy of its corpus.
# Exits non-zero if a regression input or the fuzzer crashed a harness;
# crash inputs are saved under build-fuzz/crashes/. See docs/FUZZING.md.
#
#   FUZZ_SECONDS=60 [FUZZ_JOBS=N] bash tests/fuzz/run.sh [HARNESS...]
set -u
cd "$(dirname "$0")/../.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CC_FUZZ=${CC_FUZZ:-clang}
OUT=build-fuzz
BUILD=${BUILD:-build}
HARNESSES=("$@")
[ ${#HARNESSES[@]} -eq 0 ] && HARNESSES=(fuzz_capture fuzz_ring fuzz_json)

FLAGS=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -pthread
       "-DSHMTRACE_VERSION=\"fuzz\"" -Iinclude -Iutil -Ilibshm/ring -Ilibshm/lib -Icapture
       -Icollector -Itools -Itools/trace -Itools/chrome -Itools/otlp -Itools/svg -Itools/perfetto -Itests/fuzz)
LIBS=(-luring -lmsgpackc -lz -lm)
LIB_SRC=(util/*.c libshm/ring/*.c libshm/lib/*.c capture/*.c)
COL_SRC=($(ls collector/*.c | grep -v '^collector/main\.c$'))
TOOL_SRC=($(ls tools/*.c tools/trace/*.c tools/chrome/*.c tools/otlp/*.c tools/svg/*.c tools/perfetto/*.c | grep -v '^tools/main\.c$'))

declare -A SRCS MAXLEN
SRCS[fuzz_capture]="tests/fuzz/json_check.c ${LIB_SRC[*]} ${COL_SRC[*]} ${TOOL_SRC[*]}"
SRCS[fuzz_ring]="tests/fuzz/json_check.c ${LIB_SRC[*]} ${COL_SRC[*]} ${TOOL_SRC[*]}"
SRCS[fuzz_json]="tests/fuzz/json_check.c util/json_writer.c util/dec.c util/utf8.c"
MAXLEN[fuzz_capture]=65536
MAXLEN[fuzz_ring]=32768
MAXLEN[fuzz_json]=8192

# Short malloc/free stacks and a small quarantine: the exporter frees 65536
# string slots per capture, which dominates fuzz_capture's time otherwise.
# Regression inputs are replayed with full stacks (REG_ASAN_OPTIONS).
FUZZ_ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=2:quarantine_size_mb=16}
REG_ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

log() { echo "fuzz: $*"; }
die() { echo "fuzz: error: $*" >&2; exit 2; }

command -v "$CC_FUZZ" >/dev/null || die "$CC_FUZZ not found (apt-get install clang libclang-rt-14-dev)"
mkdir -p "$OUT/crashes" "$OUT/logs"

# Harnesses built, then fuzzed, JOBS at a time (one a core): libFuzzer's
# -max_total_time is wall time, so each gets FUZZ_SECONDS on a core of its
# own either way, and three on two cores take two harnesses' time.
JOBS=${FUZZ_JOBS:-$(nproc)}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "FUZZ_JOBS '$JOBS': need a whole number from 1"
# an interrupted run stops its fuzzers too
trap 'kill $(jobs -rp) 2>/dev/null' INT TERM

# Waits while JOBS jobs run.
pool_wait() {
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
		wait -n || true
	done
}

# ------------------------------------------------------------------ build
declare -A NAMED
for h in "${HARNESSES[@]}"; do
	[ -n "${SRCS[$h]:-}" ] || die "unknown harness '$h'"
	[ -z "${NAMED[$h]:-}" ] || die "harness '$h' named twice"
	NAMED[$h]=1
done
# One harness: the compiler's exit status into $OUT/logs/$h.build.rc.
build_one() {
	# shellcheck disable=SC2086
	"$CC_FUZZ" "${FLAGS[@]}" -o "$OUT/$1" "tests/fuzz/$1.c" ${SRCS[$1]} "${LIBS[@]}" \
		2> "$OUT/logs/$1.build.log"
	echo $? > "$OUT/logs/$1.build.rc"
}
for h in "${HARNESSES[@]}"; do
	rm -f "$OUT/logs/$h.build.rc"
	pool_wait
	log "building $OUT/$h"
	build_one "$h" &
done
wait
for h in "${HARNESSES[@]}"; do
	[ "$(cat "$OUT/logs/$h.build.rc" 2>/dev/null)" = 0 ] ||
		{ cat "$OUT/logs/$h.build.log" >&2; die "building $h failed"; }
	grep -E 'warning:' "$OUT/logs/$h.build.log" | sed 's/^/fuzz: build: /' || true
done

# ------------------------------------------------------------------ seeds
# Generated each run into $OUT/seeds/<harness>/ (not committed): a real
# capture from shmtrace-collector, cuts of it, and real ring images.
SEEDS=$OUT/seeds
rm -rf "$SEEDS"
mkdir -p "$SEEDS/fuzz_capture" "$SEEDS/fuzz_ring" "$SEEDS/fuzz_json"

make_seeds() {
	local ring="shmt-fuzz-seed-$$" cap="$OUT/seed.cap" fifo="$OUT/seed.fifo" cpid
	[ -x "$BUILD/shmtrace-collector" ] && [ -f "$BUILD/libshmtrace.a" ] || {
		log "no $BUILD/shmtrace-collector or $BUILD/libshmtrace.a (run make): using the committed corpus only"
		return 0
	}
	gcc -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -pthread -Iinclude -o "$OUT/seed_producer" \
		tests/fuzz/seed_producer.c "$BUILD/libshmtrace.a" -lpthread || return 0
	# a real ring image (small geometry), straight from producers
	rm -f "/dev/shm/$ring"
	if "$OUT/seed_producer" --create "$ring" 40; then
		{ printf '\0'; cat "/dev/shm/$ring"; } > "$SEEDS/fuzz_ring/real-ring-raw"
		{ printf '\1'; tail -c +257 "/dev/shm/$ring"; } > "$SEEDS/fuzz_ring/real-ring-overlay"
	fi
	rm -f "/dev/shm/$ring"
	FUZZ_RING_SEEDS="$SEEDS/fuzz_ring" "$OUT/fuzz_ring" >/dev/null 2>&1 || true
	# a real capture: collector on a fresh ring, a producer, SIGTERM
	rm -f "$fifo" "$cap"* && mkfifo "$fifo"
	"$BUILD/shmtrace-collector" --ring "$ring" --create --capacity 1024 --poll-interval 20 \
		--output "$cap" --ready-fd 3 --quiet 3> "$fifo" &
	cpid=$!
	if timeout 10 head -c 6 "$fifo" >/dev/null; then
		"$OUT/seed_producer" "$ring" 300 || true
		sleep 0.3
	fi
	kill -TERM "$cpid" 2>/dev/null
	wait "$cpid" 2>/dev/null
	rm -f "$fifo" "/dev/shm/$ring"
	if [ -s "$cap" ]; then
		local size
		size=$(stat -c %s "$cap")
		cp "$cap" "$SEEDS/fuzz_capture/real-capture"
		# cuts: inside the header, mid-file, just before the END frame
		for n in 9 40 $((size / 3)) $((size / 2)) $((size - 1)) $((size - 7)); do
			[ "$n" -gt 0 ] && [ "$n" -lt "$size" ] && head -c "$n" "$cap" > "$SEEDS/fuzz_capture/cut-$n"
		done
		# one flipped byte in the middle (bad CRC; the harness also re-CRCs it)
		python3 - "$cap" "$SEEDS/fuzz_capture/flipped" <<'PY' 2>/dev/null || true
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[len(b) // 2] ^= 0x20
open(sys.argv[2], 'wb').write(b)
PY
	else
		log "collector wrote no capture: using the committed corpus only"
	fi
	rm -f "$cap"*
}
make_seeds

# ------------------------------------------------------------ regressions
# Every input that ever crashed a harness must now run clean. Those listed
# in tests/fuzz/regressions/KNOWN-FAILURES (bugs reported, not fixed yet)
# are reported but only fail the run with FUZZ_STRICT=1.
status=0
KNOWN=tests/fuzz/regressions/KNOWN-FAILURES
is_known() { [ -f "$KNOWN" ] && grep -v '^#' "$KNOWN" | awk '{print $1}' | grep -qxF "$1"; }
declare -A REG_FAIL REG_KNOWN EXECS CRASHES
for h in "${HARNESSES[@]}"; do
	REG_FAIL[$h]=0
	REG_KNOWN[$h]=0
	dir=tests/fuzz/regressions/$h
	[ -d "$dir" ] || continue
	files=("$dir"/*)
	[ -e "${files[0]}" ] || continue
	for f in "${files[@]}"; do
		id=$h/$(basename "$f")
		if ASAN_OPTIONS=$REG_ASAN_OPTIONS "$OUT/$h" -rss_limit_mb=2048 -timeout=10 "$f" \
			> "$OUT/logs/$h.regress.log" 2>&1; then
			is_known "$id" && log "$h: $id now passes: remove its line from $KNOWN"
			continue
		fi
		cp "$f" "$OUT/crashes/$h-regression-$(basename "$f")"
		if is_known "$id" && [ "${FUZZ_STRICT:-0}" != 1 ]; then
			log "$h: KNOWN FAILURE (reported, not fixed yet): $f"
			REG_KNOWN[$h]=$((REG_KNOWN[$h] + 1))
		else
			log "$h: REGRESSION FAILED: $f"
			REG_FAIL[$h]=$((REG_FAIL[$h] + 1))
			status=1
		fi
		grep -m2 -E 'runtime error|^SUMMARY|ERROR: AddressSanitizer|^fuzz_[a-z]*:' \
			"$OUT/logs/$h.regress.log" | sed 's/^/fuzz:   /'
	done
	log "$h: ${#files[@]} regression input(s): ${REG_FAIL[$h]} failed, ${REG_KNOWN[$h]} known failures"
done

# ---------------------------------------------------------------- fuzzing
# One harness: its exit status into $OUT/logs/$h.rc.
fuzz_one() {
	local h=$1 work=$OUT/work/$1 dict=()

	[ -f "tests/fuzz/$h.dict" ] && dict=(-dict="tests/fuzz/$h.dict")
	env ASAN_OPTIONS=$FUZZ_ASAN_OPTIONS "$OUT/$h" "$work" "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -max_len="${MAXLEN[$h]}" \
		-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$OUT/crashes/$h-" > "$OUT/logs/$h.log" 2>&1
	echo $? > "$OUT/logs/$h.rc"
}
declare -A BEFORE
for h in "${HARNESSES[@]}"; do
	work=$OUT/work/$h
	rm -rf "$work" && mkdir -p "$work"
	cp tests/fuzz/corpus/"$h"/* "$work"/ 2>/dev/null || true
	cp "$SEEDS/$h"/* "$work"/ 2>/dev/null || true
	BEFORE[$h]=$(ls "$OUT/crashes" | grep -c "^$h-" || true)
	rm -f "$OUT/logs/$h.rc"
	pool_wait
	log "$h: fuzzing for ${FUZZ_SECONDS}s on $(ls "$work" | wc -l) seed(s)"
	fuzz_one "$h" &
done
wait
for h in "${HARNESSES[@]}"; do
	work=$OUT/work/$h
	rc=$(cat "$OUT/logs/$h.rc" 2>/dev/null || echo 1)
	EXECS[$h]=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/logs/$h.log" | tail -1)
	after=$(ls "$OUT/crashes" | grep -c "^$h-" || true)
	CRASHES[$h]=$((after - BEFORE[$h]))
	if [ "$rc" != 0 ] && [ "${CRASHES[$h]}" -eq 0 ]; then
		CRASHES[$h]=1	# died without an artifact (e.g. in init)
	fi
	if [ "${CRASHES[$h]}" -gt 0 ]; then
		status=1
		log "$h: CRASH (exit $rc); log: $OUT/logs/$h.log"
		grep -m5 -E '^==.*ERROR|^SUMMARY|runtime error|^fuzz_|Test unit written' "$OUT/logs/$h.log" | sed 's/^/fuzz:   /'
	fi
	log "$h: executions ${EXECS[$h]:-?}, crashes ${CRASHES[$h]}, corpus $(ls "$work" | wc -l)"
done
rm -f /dev/shm/shmt-fuzz-ring-* /dev/shm/shmt-fuzz-tpl-* 2>/dev/null

summary="fuzz: summary:"
for h in "${HARNESSES[@]}"; do
	summary+=" $h ${EXECS[$h]:-?} execs, ${CRASHES[$h]:-0} crashes, ${REG_FAIL[$h]:-0} regressions failed (${REG_KNOWN[$h]:-0} known);"
done
echo "$summary ${FUZZ_SECONDS}s each: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
