#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-httpd-wrk.sh HTTPD [ARG...] - a bounded load test: wrk with 64
# connections for 3 s against examples/httpd on 127.0.0.1, started with the
# ARGs (default --workers 2; --threads is the kernel-thread baseline).  Passes with zero socket errors
# (connect, read, write; slow answers are not errors), zero non-2xx
# responses and a positive request rate.  Exit 77 (skip) only
# when wrk is not installed (./dev setup installs it) or examples are off.
set -u
httpd=$1
shift
[ $# -gt 0 ] || set -- --workers 2
if ! command -v wrk >/dev/null 2>&1; then
	echo "SKIP: wrk is not installed (apt-get install wrk, or ./dev setup)"
	exit 77
fi
if [ ! -x "$httpd" ]; then
	echo "SKIP: $httpd not built (-Dexamples=false)"
	exit 77
fi
out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
# A port the kernel picks (--port 0): a fixed or computed one may be taken,
# by anything, since it can fall in the ephemeral range.  httpd prints the
# port once it listens.
"$httpd" --port 0 "$@" >"$log" &
pid=$!
i=0
while :; do
	port=$(sed -n 's/^.*listening on [0-9.]*:\([1-9][0-9]*\).*$/\1/p' "$log")
	[ -n "$port" ] && break
	i=$((i + 1))
	if [ $i -gt 600 ] || ! kill -0 $pid 2>/dev/null; then
		echo "FAIL: httpd did not say where it listens"
		cat "$log"
		kill $pid 2>/dev/null
		exit 1
	fi
	sleep 0.1
done
# wrk counts an answer slower than --timeout as a socket error ("timeout");
# an answer that never comes is not counted at all.  So that count only
# measures latency, which a busy host stretches past the default 2 s
# (./dev loaded): 10 s, longer than the run, leaves the connect, read and
# write errors to fail the test.
wrk -t 2 -c 64 -d 3s --timeout 10s "http://127.0.0.1:$port/" >"$out" 2>&1
rc=$?
kill -INT $pid
wait $pid
src=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: wrk exited with $rc"; exit 1; }
[ $src -eq 0 ] || { echo "FAIL: httpd exited with $src after SIGINT"; exit 1; }
if grep -q "Socket errors" "$out"; then
	echo "FAIL: socket errors"
	exit 1
fi
if grep -q "Non-2xx" "$out"; then
	echo "FAIL: non-2xx responses"
	exit 1
fi
rate=$(awk '/^Requests\/sec:/ { print int($2) }' "$out")
if [ -z "$rate" ] || [ "$rate" -le 0 ]; then
	echo "FAIL: no request rate"
	exit 1
fi
echo "PASS: $rate requests/s"
