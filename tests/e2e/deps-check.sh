#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# On a machine without the libraries, every build goal stops before the
# compiler with one line naming the Debian packages and how to install
# them. Missing packages are simulated with an empty pkg-config search path,
# no pkg-config at all, and a compiler that finds no headers.
set -uo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "deps-check: $*"; exit 1; }

expect() {	# expect "what" "packages" make-args...
	local what=$1 pkgs=$2 out rc
	shift 2
	out=$(make --no-print-directory -n "$@" 2>&1)
	rc=$?
	[ $rc -ne 0 ] || fail "$what: make $* succeeded"
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$what: not one line: $out"
	case $out in
	*"missing Debian packages $pkgs; run: "*) ;;
	*) fail "$what: expected the packages '$pkgs': $out" ;;
	esac
	case $out in
	*"run: make deps"*|*"run: sudo apt-get install -y $pkgs"*) ;;
	*) fail "$what: no command to run: $out" ;;
	esac
}

for goal in all install lint build/shmtrace; do
	PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= \
		expect "$goal without liburing, msgpack and zlib" "liburing-dev libmsgpack-dev zlib1g-dev" "$goal"
done
expect "no pkg-config" "pkg-config liburing-dev libmsgpack-dev zlib1g-dev" PKG_CONFIG=/nonexistent/pkg-config all
expect "tests without cmocka" "libcmocka-dev" CC="cc -nostdinc" tests-bin
# with everything there, nothing is said
out=$(make --no-print-directory -n all 2>&1) || fail "make -n all failed: $out"
case $out in *missing*) fail "a complete machine is told something is missing: $out" ;; esac
echo "deps-check: ok"
