#!/bin/sh
# SPDX-License-Identifier: MIT
# Checks, before anything is compiled, that the libraries the build needs
# are there: liburing, msgpack-c and zlib through pkg-config, and with --tests the
# cmocka header. Prints nothing when all are; otherwise one line naming the
# missing Debian packages and the command that installs them (the Makefile
# stops on it). PKG_CONFIG and CC are honoured.
pc=${PKG_CONFIG:-pkg-config}
cc=${CC:-cc}
missing=""
if ! command -v "$pc" >/dev/null 2>&1; then
	missing="pkg-config liburing-dev libmsgpack-dev zlib1g-dev"
else
	"$pc" --exists liburing 2>/dev/null || missing="liburing-dev"
	# Debian ships msgpack.pc; msgpack-c 6 upstream names it msgpack-c.pc
	"$pc" --exists msgpack 2>/dev/null || "$pc" --exists msgpack-c 2>/dev/null ||
		missing="$missing libmsgpack-dev"
	"$pc" --exists zlib 2>/dev/null || missing="$missing zlib1g-dev"
fi
if [ "${1:-}" = --tests ] &&
   ! printf '#include <stdarg.h>\n#include <stddef.h>\n#include <setjmp.h>\n#include <stdint.h>\n#include <cmocka.h>\n' |
	"$cc" -E -x c - >/dev/null 2>&1; then
	missing="$missing libcmocka-dev"
fi
missing=$(echo $missing)
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
	how="make deps"
else
	how="sudo apt-get install -y $missing (or make deps as root)"
fi
echo "shmtrace: missing Debian packages $missing; run: $how"
