#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# calibrate.sh BUILD_DIR - measure this machine for fiber-sim's cost model
# (doc/simulator.md 3) and print the parameters the measurements give, as
# --cost would take them.  Runs the runtime's own benchmarks (a few
# seconds each) and fiber-sim-calibrate; every figure is the best of
# several runs, since noise on a shared machine only adds time.
set -eu
b=${1:-build}/bench
runs=5

# best VALUE-OF-KEY over $runs runs of a command printing JSON metrics
best() {
	key=$1
	shift
	i=0 m=
	while [ $i -lt $runs ]; do
		v=$("$@" --json 2>/dev/null | python3 -c "
import json, sys
for l in sys.stdin:
    if l.startswith('{'):
        print(json.loads(l)['metrics']['$key'])")
		m=$(python3 -c "print(min(float('$v'), float('${m:-$v}')))")
		i=$((i + 1))
	done
	echo "$m"
}

local_rt=$(best p50_ns "$b/pipe-pingpong" --fibers --workers 1 -l 200000 --latency)
poll_rt=$(best p50_ns "$b/pipe-pingpong" --fibers --workers 2 --placement split -l 100000 --latency)
sleep_rt=$(LIBFIBER_IDLE_POLL_US=0 best p50_ns "$b/pipe-pingpong" --fibers --workers 2 --placement split -l 20000 --latency)
cj=$(best ns_per_fiber "$b/create-join" --fibers 200000)
i=0 line= fw= wr=
while [ $i -lt $runs ]; do
	out=$("$b/fiber-sim-calibrate" 0 1)
	l=$(echo "$out" | awk '/line_ns/ {print $2}')
	f=$(echo "$out" | awk '/futex_wake_ns/ {print $2}')
	w=$(echo "$out" | awk '/wake_run_ns/ {print $2}')
	line=$(python3 -c "print(min($l, ${line:-$l}))")
	fw=$(python3 -c "print(min($f, ${fw:-$f}))")
	wr=$(python3 -c "print(min($w, ${wr:-$w}))")
	i=$((i + 1))
done
python3 - "$local_rt" "$poll_rt" "$sleep_rt" "$cj" "$line" "$fw" "$wr" <<'PY'
import sys
local_rt, poll_rt, sleep_rt, cj, line, fw, wr = map(float, sys.argv[1:])
pipe_op = 20.0                      # assumed share, see cost.c
switch = local_rt / 2 - 2 * pipe_op
sleep_exit = (sleep_rt - poll_rt) / 2
create = exit_ = max(0.0, (cj - 2 * switch) / 2)
print("# measured: local round trip %.0f ns, split round trip %.0f ns "
      "polling, %.0f ns sleeping; create+join %.0f ns" %
      (local_rt, poll_rt, sleep_rt, cj))
print("# fiber-sim-calibrate: line %.0f ns, futex wake %.0f ns, "
      "wake to run %.0f ns" % (line, fw, wr))
print("line_llc=%.0f,switch=%.0f,pipe_op=%.0f,futex_wake=%.0f,"
      "sleep_exit=%.0f,create=%.0f,exit=%.0f" %
      (line, switch, pipe_op, fw, sleep_exit, create, exit_))
PY
