#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pip-install.sh - `pip install ./python` works offline on Debian 12: in a
# virtual environment that sees Debian's setuptools and wheel, with no
# package index, the module builds, installs, imports and records a span.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-/usr/bin/python3}
skip() { echo "skip: $*"; exit 77; }
[ -x "$PYTHON" ] || skip "$PYTHON is not installed"
[ -z "${SHMTRACE_SAN:-}" ] || skip "packaging is tested on the plain build"
tmp=$(mktemp -d)
ring="${SHMTRACE_TEST_PREFIX:-t$$-}pip-$$"
trap 'rm -rf "$tmp" python/build; rm -f "/dev/shm/$ring"' EXIT
"$PYTHON" -m venv --system-site-packages "$tmp/venv" || skip "python3 -m venv failed (python3-venv missing?)"
# --no-index: nothing may come from the network
"$tmp/venv/bin/pip" install --no-index --quiet ./python
cd "$tmp"	# not the source tree: import the installed copy
"$tmp/venv/bin/python" - "$ring" <<'PY'
import sys, shmtrace
assert shmtrace.__file__.startswith(sys.prefix), shmtrace.__file__
shmtrace.create_ring(sys.argv[1])
t = shmtrace.open(sys.argv[1])
with t.span("installed"):
    pass
t.flush()
assert t.stats().head >= 1, t.stats()
print("pip install ./python: ok")
PY
