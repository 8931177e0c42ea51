#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# python.sh - the Python binding's tests (tests/python, unittest): every API
# call and bad argument, tracing off, a ring removed under it, fork;
# multiprocessing pools whose flows cross a C process, checked in the Chrome
# DevTools trace engine; Python processes SIGKILLed inside nested spans,
# exported with them unfinished, also after coroutines and generators left
# theirs out of order; span and instant arguments in the Chrome JSON and
# the OTLP export; the current flow across await, tasks and threads, and
# @traced's per-call flow, checked in the DevTools engine.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export SHMTRACE_BIN=${SHMTRACE_BIN:-$PWD/$BUILD}
PYTHON=${PYTHON:-/usr/bin/python3}

skip() { echo "skip: $*"; exit 77; }
[ -x "$PYTHON" ] || skip "$PYTHON is not installed"
ls python/shmtrace/_shmtrace*.so >/dev/null 2>&1 || skip "the extension is not built (make python)"
[ -x "$SHMTRACE_BIN/tests/py-c-hop" ] || skip "$SHMTRACE_BIN/tests/py-c-hop is not built (make python)"
unset SHMTRACE_RING
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m unittest discover -s tests/python -t tests/python -v
