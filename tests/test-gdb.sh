#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-gdb.sh GDB TARGET SCRIPT - run TARGET under gdb in batch mode, load
# lib/libfiber-gdb.py, and check that `info fibers` lists the parked fibers
# with their handles, and that `fiber bt` shows where one of them is
# parked.  TAP output.
gdb=$1 target=$2 script=$3
out=$("$gdb" -nx -batch -ex 'set debuginfod enabled off' \
	-ex 'set pagination off' -ex "source $script" \
	-ex 'break gdb_stop_here' -ex run -ex 'info fibers' \
	-ex 'python import gdb; f = [x for x, r in fibers() if x["name"].string() == "gdb-sleeper-1"][0]; gdb.execute("fiber bt %d" % int(f["id"]))' \
	-ex 'bt 1' -ex kill "$target" 2>&1)
echo "1..4"
n=0
check() { # check DESCRIPTION PATTERN
	n=$((n + 1))
	if printf '%s\n' "$out" | grep -q -- "$2"; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi
}
check "info fibers lists the parked fibers" 'gdb-sleeper-2 *parked'
check "fiber bt shows where a fiber parked" 'parked_in_here'
check "registers are restored after fiber bt" '#0 .*gdb_stop_here'
handle=$(printf '%s\n' "$out" | sed -n 's/^first-handle \(0x[0-9a-f]*\)$/\1/p')
check "info fibers prints the handle main holds" \
	"gdb-sleeper-0 .* ${handle:-no-handle-printed}\$"
