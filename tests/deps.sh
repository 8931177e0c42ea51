#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing:
# as root with apt-get, otherwise prints the exact command to run.
set -eu
missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js runs the Chrome DevTools trace engine in the tests
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "shmtrace: missing Debian packages; run: sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "shmtrace: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
