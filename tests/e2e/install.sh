#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make install into a scratch DESTDIR, then build a producer against the
# installed header (as C and as C++) with pkg-config, link it both against
# the shared library and statically, and run it on a real ring.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${SHMTRACE_SAN:-0}" = 1 ]; then
	echo "packaging is tested on the plain build"
	exit 77
fi
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
ring="${SHMTRACE_TEST_PREFIX:-}install-$$"
trap 'rm -rf "$tmp"; rm -f "/dev/shm/$ring"' EXIT

make --no-print-directory -s BUILD="$BUILD" install PREFIX=/opt/shmt DESTDIR="$tmp/root" >/dev/null
# the loader's cache is refreshed when installing into the system, not into a DESTDIR
# (the whole output first: grep -q closing the pipe early would kill make
# with SIGPIPE, which pipefail reports as a failure)
plan=$(make --no-print-directory -n BUILD="$BUILD" install PREFIX=/opt/shmt DESTDIR="$tmp/root")
if grep -q ldconfig <<<"$plan"; then echo "install: ldconfig run for a DESTDIR install"; exit 1; fi
plan=$(make --no-print-directory -n BUILD="$BUILD" install PREFIX=/opt/shmt)
grep -q 'then ldconfig' <<<"$plan" || { echo "install: no ldconfig for a system install"; exit 1; }
for f in opt/shmt/include/shmtrace.h opt/shmt/lib/libshmtrace.a opt/shmt/lib/libshmtrace.so.0 \
	 opt/shmt/lib/pkgconfig/shmtrace.pc opt/shmt/bin/shmtrace opt/shmt/bin/shmtrace-collector \
	 opt/shmt/share/man/man3/shmtrace.3; do
	[ -e "$tmp/root/$f" ] || { echo "install: $f missing"; exit 1; }
done
# man 3 FUNCTION: a link page to shmtrace.3 for every name of its NAME section
man3="$tmp/root/opt/shmt/share/man/man3"
names=$(sed -n '/^\.SH NAME/,/\\-/p' docs/man/shmtrace.3 | sed -e '1d' -e 's/\\-.*//' | tr ',' ' ')
for n in shmtrace_open shmtrace_span shmtrace_end $names; do
	[ "$(cat "$man3/$n.3" 2>/dev/null)" = ".so man3/shmtrace.3" ] ||
		{ echo "install: man page $n.3 missing or not a link to shmtrace.3"; exit 1; }
done
if command -v man >/dev/null; then
	page=$(MANPATH="$tmp/root/opt/shmt/share/man" man -w shmtrace_open 2>&1) || true
	[ "$page" = "$man3/shmtrace.3" ] ||
		{ echo "install: man shmtrace_open finds '$page', not shmtrace.3"; exit 1; }
fi
# only the API is exported from the shared library
if nm -D --defined-only "$tmp/root/opt/shmt/lib/libshmtrace.so.0" | awk '{print $3}' |
	grep -v -E '^(shmtrace_|SHMTRACE_|_init$|_fini$)' | grep -q .; then
	echo "install: the shared library exports internal symbols"; exit 1
fi
readelf -d "$tmp/root/opt/shmt/lib/libshmtrace.so.0" | grep -q 'SONAME.*libshmtrace.so.0'

cat > "$tmp/p.c" <<'C'
#include <shmtrace.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	shmtrace_t *t;
	int ret = shmtrace_open(argv[1], &t);

	if (ret < 0) {
		fprintf(stderr, "open: %s\n", shmtrace_strerror(ret));
		return 1;
	}
	uint32_t c = shmtrace_intern(t, "cat"), n = shmtrace_intern(t, "installed");
	for (int i = 0; i < 100; i++) {
		uint64_t t0 = shmtrace_now();
		shmtrace_span(t, c, n, t0, shmtrace_now(), 0);
	}
	{
		SHMTRACE_SCOPE("cat", "scope");	/* no default ring: nothing */
	}
	shmtrace_close(t);
	return argc > 2;
}
C
cp "$tmp/p.c" "$tmp/p.cc"
export PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$tmp/root/opt/shmt/lib/pkgconfig"
cflags=$(pkg-config --cflags shmtrace)
libs=$(pkg-config --libs shmtrace)
cc -std=c11 -Wall -Wextra -Werror $cflags "$tmp/p.c" -o "$tmp/p_shared" $libs -lpthread
c++ -Wall -Wextra -Werror $cflags "$tmp/p.cc" -o "$tmp/p_cxx" $libs -lpthread
cc -std=c11 -Wall -Wextra -Werror $cflags "$tmp/p.c" -o "$tmp/p_static" \
	"$tmp/root/opt/shmt/lib/libshmtrace.a" -lpthread

"$tmp/root/opt/shmt/bin/shmtrace-collector" --version >/dev/null
"$BUILD/shmtrace-collector" --ring "$ring" --create --keep-ring --output /dev/null --help >/dev/null
# a ring to write to: made by the library through the static program's twin
cat > "$tmp/mk.c" <<'C'
#include <shmtrace.h>
int main(int argc, char **argv) { (void)argc; return shmtrace_ring_create(argv[1], NULL) < 0; }
C
cc $cflags "$tmp/mk.c" -o "$tmp/mk" "$tmp/root/opt/shmt/lib/libshmtrace.a" -lpthread
"$tmp/mk" "$ring"
LD_LIBRARY_PATH="$tmp/root/opt/shmt/lib" "$tmp/p_shared" "$ring"
LD_LIBRARY_PATH="$tmp/root/opt/shmt/lib" "$tmp/p_cxx" "$ring"
"$tmp/p_static" "$ring"
out=$("$BUILD/shmtrace" stat "$ring" 2>&1)
echo "$out" | grep -q 300 || { echo "install: expected 300 records in the ring"; echo "$out"; exit 1; }
echo "install: ok"
