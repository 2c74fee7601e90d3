#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-header-cxx.sh INCLUDE_DIR - include/fiber.h compiles as C++11 with
# every warning an error (the C11 side is tests/test-header.c).  Exit 77
# (skip) without a C++ compiler.
set -u
cxx=$(command -v c++ || command -v g++ || command -v clang++) ||
	{ echo "SKIP: no C++ compiler"; exit 77; }
printf '%s\n' '#include <fiber.h>' \
	'int main() { fiber_workerset_t s; fiber_workerset_zero(&s);' \
	'  fiber_workerset_add(&s, 3); fiber_mutex_t m = FIBER_MUTEX_INITIALIZER;' \
	'  (void)m; return fiber_workerset_has(&s, 3) ? 0 : 1; }' |
	"$cxx" -std=c++11 -Wall -Wextra -Werror -pedantic -fsyntax-only \
		-I"$1" -x c++ - && echo "PASS"
