#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# validate16.sh - fiber-sim against the runtime on this machine: its own
# topology, WORKERS workers (default 16), bound to their CPUs.
#
#   bench/sim/validate16.sh BUILD_DIR [WORKERS]
#
# BUILD_DIR holds bench/pipe-pingpong, bench/hackbench, bench/schbench
# and bench/fiber-sim; libfiber.so (and libhwloc, liburcu, libnuma where
# the machine lacks them) must be found: set LD_LIBRARY_PATH.  Needs
# python3 (its standard library only), not meson.  Prints one table:
# each case's placements by decision, probes per placement, wakelist
# pushes and pulls per wakeup, runtime beside fiber-sim, and which cases
# the arrangement decides (they must agree within 0.02) and which the
# timing does (shown only); tests/test-sim-validate.py says how each is
# computed.  Exit status 1 when a structural ratio differs.  About 30 s
# on an idle 16-core machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: validate16.sh BUILD_DIR [WORKERS]}
for p in pipe-pingpong hackbench schbench fiber-sim; do
	if [ ! -x "$build/bench/$p" ]; then
		echo "validate16.sh: $build/bench/$p is missing" >&2
		exit 2
	fi
done
LIBFIBER_BIND=1 exec python3 "$here/../../tests/test-sim-validate.py" \
	--table "$build" "${2:-16}"
