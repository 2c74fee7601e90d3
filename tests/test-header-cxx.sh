#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-header-cxx.sh INCLUDE_DIR - include/fiber.h compiles as C++11 with
# every warning an error, -Wshadow included (the function fiber_once()
# must not hide its object type's constructor), both as it is and inside
# extern "C" (the C11 side is tests/test-header.c).  Exit 77 (skip)
# without a C++ compiler.
set -u
cxx=$(command -v c++ || command -v g++ || command -v clang++) ||
	{ echo "SKIP: no C++ compiler"; exit 77; }
for wrap in no yes; do
	if [ "$wrap" = yes ]; then
		open='extern "C" {' close='}'
	else
		open='' close=''
	fi
	printf '%s\n' "$open" '#include <fiber.h>' "$close" \
		'static fiber_once_t once = FIBER_ONCE_INITIALIZER;' \
		'static void init() {}' \
		'int main() { fiber_workerset_t s; fiber_workerset_zero(&s);' \
		'  fiber_workerset_add(&s, 3); fiber_mutex_t m = FIBER_MUTEX_INITIALIZER;' \
		'  (void)m; if (fiber_once(&once, init)) return 1;' \
		'  return fiber_workerset_has(&s, 3) ? 0 : 1; }' |
		"$cxx" -std=c++11 -Wall -Wextra -Wshadow -Werror -pedantic \
			-fsyntax-only -I"$1" -x c++ - || exit 1
done
echo "PASS"
