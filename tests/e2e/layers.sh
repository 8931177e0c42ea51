#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# layers.sh - the layering check passes on the tree and fails on a copy of
# it with one upward include (util including a ring header) and one
# sideways include (the collector including a CLI header).
set -eu
cd "$(dirname "$0")/../.."
bash tests/check-layers.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for case in up side; do
	rm -rf "${tmp:?}"/*
	cp -r include util libshm capture collector tools "$tmp"/
	if [ $case = up ]; then
		echo '#include "internal.h"' >> "$tmp/util/hist.h"
	else
		echo '#include "source.h"' >> "$tmp/collector/drain.h"
	fi
	if bash tests/check-layers.sh "$tmp" 2>"$tmp/err.txt"; then
		echo "layers: the $case include was not caught" >&2
		exit 1
	fi
	grep -q 'not in its layer' "$tmp/err.txt"
done
echo "layers: ok"
