#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-subproject.sh SOURCE_ROOT - libfiber used as a meson subproject, as
# a parent project sees it: only the library and its dependency are built
# (no tests, benchmarks or examples; fiber-topology is not installed), the parent's
# default_library is honoured, and a program linked with it runs.  Exit 77
# (skip) without meson or ninja.
set -u
src=$1
command -v meson >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1 ||
	{ echo "SKIP: no meson or ninja"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/parent/subprojects"
ln -s "$src" "$dir/parent/subprojects/libfiber"
cat >"$dir/parent/meson.build" <<'EOM'
project('parent', 'c', default_options: ['default_library=static'])
dep = dependency('libfiber', fallback: ['libfiber', 'libfiber_dep'])
executable('hello', 'hello.c', dependencies: dep, install: true)
EOM
cat >"$dir/parent/hello.c" <<'EOM'
#include <fiber.h>
#include <stdio.h>
static void *hi(void *arg) { return arg; }
int main(void)
{
	fiber_t f;
	void *r = NULL;
	if (fiber_create(&f, NULL, hi, (void *)42) || fiber_join(f, &r) ||
	    r != (void *)42 || fiber_shutdown())
		return 1;
	printf("hello from a fiber, libfiber %s\n", fiber_version());
	return 0;
}
EOM
fail() { echo "FAIL: $*"; exit 1; }
(cd "$dir/parent" && meson setup build --prefix="$dir/inst" >"$dir/setup.log" 2>&1) ||
	{ cat "$dir/setup.log"; fail "meson setup"; }
b="$dir/parent/build"
ninja -C "$b" >"$dir/build.log" 2>&1 || { cat "$dir/build.log"; fail "build"; }
tests=$(meson test -C "$b" --list 2>/dev/null | grep -c " / " || true)
[ "$tests" -eq 0 ] || fail "the parent's meson test lists $tests libfiber tests"
targets=$(meson introspect "$b" --targets | python3 -c \
	'import json,sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
echo "targets: $targets"
for t in $targets; do
	case $t in
	hello | fiber | fiber-internal | fiber-[a-z]* | version.h) ;;
	*) fail "unexpected target $t" ;;
	esac
done
ls "$b"/subprojects/libfiber/lib/libfiber.so* >/dev/null 2>&1 &&
	fail "built a shared libfiber although the parent asked for static"
installed=$(meson introspect "$b" --installed | python3 -c \
	'import json,sys; print(" ".join(sorted(json.load(sys.stdin).values())))')
echo "installed: $installed"
case $installed in
*fiber-topology*) fail "installs fiber-topology: $installed" ;;
esac
"$b/hello" || fail "the program did not run"
echo "PASS"
