#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A short libFuzzer run of every harness (FUZZ_SECONDS each, 15 by default;
# CI runs 60), replaying the regression inputs first. Its summary line goes
# into the figures at the end of `make test`.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${SHMTRACE_SAN:-0}" = 1 ]; then
	echo "not with sanitizer builds (they have their own runs)"
	exit 77
fi
BUILD=${BUILD:-build}
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
	> "$BUILD/fuzz-probe.c"
if ! clang -fsanitize=fuzzer "$BUILD/fuzz-probe.c" -o "$BUILD/fuzz-probe" 2>/dev/null; then
	echo "clang with libFuzzer not available (apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
FUZZ_SECONDS=${FUZZ_SECONDS:-15} BUILD=$BUILD bash tests/fuzz/run.sh | tee "$BUILD/fuzz.log"
rc=${PIPESTATUS[0]}
grep '^fuzz: summary:' "$BUILD/fuzz.log" | sed 's/^fuzz: summary: //; s/; /\n/g' > "$BUILD/fuzz-summary.txt"
exit $rc
