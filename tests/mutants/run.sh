#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run.sh - the placement mutants: does a test fail when a behaviour breaks?
#
#   tests/mutants/run.sh [PATCH...]      (default: every NN-*.patch here)
#
# Each patch breaks one behaviour of the placement layer, of the wake
# path or of the idle path (its first line says which; its second names
# the tests expected to notice).  The script copies the committed tree (git archive HEAD)
# to a scratch directory ($MUTANT_DIR, default a new one under /tmp),
# builds it once and checks that the tests pass unmutated; then for each
# patch it applies it, rebuilds the test programs, runs the named tests
# and, if none failed, every other test of the set below, and reverts.
# One line per patch:
#
#   caught   NAME  by TEST...
#   SURVIVED NAME
#   stale    NAME  (the patch no longer applies: refresh it)
#   nobuild  NAME  (the mutant does not compile)
#
# Exit status 1 when a mutant survived or went stale.  Nothing here runs
# from meson; the whole set takes minutes per mutant on a loaded host.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SET="place-wake place-idle place-balance place-create place-blocked topo pelt
wakelist wake-runtime idle-runtime balance-runtime pelt-runtime bind pipe"

dir=${MUTANT_DIR:-$(mktemp -d /tmp/fiber-mutants.XXXXXX)}
src=$dir/src
if [ ! -f "$src/build/build.ninja" ]; then
	rm -rf "$src"
	mkdir -p "$src"
	git -C "$root" archive HEAD | tar -x -C "$src" || exit 2
	meson setup "$src/build" "$src" >"$dir/setup.log" 2>&1 || {
		cat "$dir/setup.log"
		exit 2
	}
fi
targets() {
	for t in "$@"; do printf 'tests/test-%s ' "$t"; done
}
build() {
	# shellcheck disable=SC2046
	ninja -C "$src/build" $(targets $SET) >"$dir/build.log" 2>&1
}
# run_tests TEST... - the names of those that fail, on stdout
run_tests() {
	meson test -C "$src/build" --no-rebuild "$@" >"$dir/test.log" 2>&1
	sed -nE 's#^ *[0-9]+/[0-9]+ .* / ([^ ]+) +(FAIL|TIMEOUT|ERROR).*#\1#p' \
		"$dir/test.log" | tr '\n' ' '
}

build || {
	cat "$dir/build.log"
	exit 2
}
# shellcheck disable=SC2086
bad=$(run_tests $SET)
if [ -n "$bad" ]; then
	echo "run.sh: the unmutated tree fails: $bad (see $dir/test.log)" >&2
	exit 2
fi

[ $# -gt 0 ] || set -- "$here"/[0-9]*.patch
status=0
for p in "$@"; do
	name=$(basename "$p" .patch)
	first=$(sed -n 's/^Tests: //p' "$p")
	if ! patch -d "$src" -p1 --dry-run -s <"$p" >/dev/null 2>&1; then
		echo "stale    $name"
		status=1
		continue
	fi
	patch -d "$src" -p1 -s <"$p"
	if ! build; then
		echo "nobuild  $name"
	else
		# shellcheck disable=SC2086
		bad=$(run_tests $first)
		if [ -z "$bad" ]; then
			rest=""
			for t in $SET; do
				case " $first " in *" $t "*) ;; *) rest="$rest $t" ;; esac
			done
			# shellcheck disable=SC2086
			bad=$(run_tests $rest)
		fi
		if [ -n "$bad" ]; then
			echo "caught   $name  by $bad"
		else
			echo "SURVIVED $name"
			status=1
		fi
	fi
	patch -d "$src" -p1 -R -s <"$p"
done
build >/dev/null 2>&1
exit $status
