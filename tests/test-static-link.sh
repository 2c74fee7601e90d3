#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-static-link.sh BUILD_ROOT CC [FLAGS] - a program linked with libfiber.a
# through `pkg-config --static` (the uninstalled .pc meson writes) builds
# and runs, and needs no libfiber.so.  Exit 77 (skip) without pkg-config.
set -u
build=$1
cc=$2
extra=${3:-} # the build's -fsanitize=..., which the archive needs
command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: no pkg-config"; exit 77; }
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The uninstalled .pc of meson also puts lib/ on the include path, which
# is harmless only because lib/ holds no header at its top (the layers
# test checks that).
flags=$(pkg-config --static --cflags --libs libfiber-uninstalled) ||
	{ echo "FAIL: pkg-config --static --libs libfiber failed (missing -dev packages?)"; exit 1; }
# Link the archive, not the shared object next to it.
flags=$(echo "$flags" | sed "s|-lfiber |$build/lib/libfiber.a |")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/hello.c" <<'EOM'
#include <fiber.h>
static void *hi(void *arg) { return arg; }
int main(void)
{
	fiber_t f;
	void *r = 0;
	return fiber_create(&f, 0, hi, (void *)7) || fiber_join(f, &r) ||
	       r != (void *)7 || fiber_shutdown();
}
EOM
# shellcheck disable=SC2086
$cc $extra -o "$dir/hello" "$dir/hello.c" $flags || { echo "FAIL: link: $cc ... $flags"; exit 1; }
if ldd "$dir/hello" | grep -q libfiber; then
	echo "FAIL: linked against libfiber.so"
	exit 1
fi
"$dir/hello" || { echo "FAIL: the program failed"; exit 1; }
echo "PASS: $flags"
