#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the test suite: every cmocka program in $BUILD/tests, then every
# end-to-end script in tests/e2e (exit 0 pass, 77 skip, else fail), each
# under a timeout. Ends with one line "N passed, N failed, N skipped".
#   --unit      only the cmocka programs (the sanitizer runs)
#   --threaded  only the programs that exercise threads and processes (TSan)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
export SHMTRACE_BIN="$PWD/$BUILD"
mode=${1:-all}
pass=0 fail=0 skip=0 failed=()
rm -f "$BUILD/fuzz-summary.txt"
export SHMTRACE_TEST_PREFIX="t$$-"

run_one() {
	local name=$1; shift
	local log="$BUILD/test-logs/$name.log"
	local t0=$EPOCHREALTIME
	mkdir -p "$BUILD/test-logs"
	timeout --kill-after=10 600 "$@" >"$log" 2>&1
	local rc=$?
	# the wall time each program took, so a slow one shows in CI's log
	local took
	took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }')
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf '  PASS  %s (%s)\n' "$name" "$took"
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1)); printf '  SKIP  %s (%s; %s)\n' "$name" "$(tail -n 1 "$log")" "$took"
	else
		fail=$((fail + 1)); failed+=("$name"); printf '  FAIL  %s (exit %d, %s)\n' "$name" $rc "$took"
		sed 's/^/        /' "$log" | tail -n 40
	fi
	# cmocka's own summary lines, for the record
	grep -E '^\[  (PASSED|FAILED)  \]' "$log" | sed "s|^|        $name: |"
}

# the programs whose threads and processes share a ring (TSan), by name;
# a name that is no test program fails the run
THREADED=(test_ring test_ring_records test_ring_strings test_ring_mp test_ring_mp_share test_ring_attach test_ring_retire test_ring_create test_inflight_crash test_unfinished
	test_collector test_collector_output test_collector_lifecycle test_collector_signals test_hostile_ring)
for n in "${THREADED[@]}"; do
	[ -f "tests/$n.c" ] || { echo "run.sh: THREADED names $n, which is no test" >&2; exit 2; }
done
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	case $mode in
	--threaded) [[ " ${THREADED[*]} " == *" ${t##*/} "* ]] || continue ;;
	esac
	run_one "$(basename "$t")" "$t"
done
if [ "$mode" = all ]; then
	for s in tests/e2e/*.sh; do
		[ -f "$s" ] || continue
		run_one "e2e-$(basename "$s" .sh)" bash "$s"
	done
fi
# the fault-injection figures (tests/test_faults.c) as one table
figs=$(cat "$BUILD"/test-logs/*.log 2>/dev/null | grep '^FIGURE|' | cut -d'|' -f2-)
if [ -n "$figs" ]; then
	echo
	echo "Faults injected and what was counted (torn accepted and lost silently must be 0):"
	{ echo "fault|injected|records written|exported|dropped+overwritten+lost to lock timeouts (counted)|torn accepted|lost silently|exported+counted=written (accounting rows)|note"
	  echo "$figs"; } | awk -F'|' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i;
		if (length($i) > w[i]) w[i] = length($i) } n = NR; if (NF > nf) nf = NF }
		END { for (r = 1; r <= n; r++) { line = ""; for (i = 1; i <= nf; i++)
			line = line sprintf(i < nf ? "%-" w[i] "s  " : "%s", c[r, i]); print line } }'
fi
if [ "$mode" = all ] && [ -s "$BUILD/fuzz-summary.txt" ]; then
	echo
	echo "Fuzzing (libFuzzer + ASan + UBSan, tests/fuzz):"
	sed 's/^/  /' "$BUILD/fuzz-summary.txt"
fi
# nothing a test made may stay behind in /dev/shm
rm -f /dev/shm/"$SHMTRACE_TEST_PREFIX"* 2>/dev/null
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
