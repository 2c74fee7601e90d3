/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-header.c - include/fiber.h as a user's file sees it: built without
 * _GNU_SOURCE (meson.build undefines the project's), in strict C11 with
 * every warning an error.  fiber.h must not define a feature macro, and
 * the affinity calls must work with fiber_workerset_t alone.
 */
#include <fiber.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#ifdef _GNU_SOURCE
#error "fiber.h defined _GNU_SOURCE"
#endif

static void *where(void *arg)
{
	(void)arg;
	return (void *)(ptrdiff_t)fiber_current_worker();
}

static void test_header_workerset_pins_without_feature_macros(void **state)
{
	fiber_workerset_t set;
	fiber_attr_t attr;
	fiber_t f;
	void *ret;

	(void)state;
	runtime_start(2);
	fiber_workerset_zero(&set);
	assert_false(fiber_workerset_has(&set, 1));
	fiber_workerset_add(&set, 1);
	fiber_workerset_add(&set, 5000); /* out of range: ignored */
	assert_true(fiber_workerset_has(&set, 1));
	assert_false(fiber_workerset_has(&set, 0));
	assert_int_equal(fiber_attr_init(&attr), 0);
	assert_int_equal(fiber_attr_setaffinity(&attr, sizeof(set), &set), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(fiber_create(&f, &attr, where, NULL), 0);
		assert_int_equal(fiber_join(f, &ret), 0);
		assert_int_equal((ptrdiff_t)ret, 1);
	}
	fiber_workerset_del(&set, 1);
	assert_int_equal(fiber_attr_setaffinity(&attr, sizeof(set), &set),
			 EINVAL);
	assert_int_equal(fiber_attr_destroy(&attr), 0);
	runtime_stop();
}

static void test_header_uninitialised_attr_is_einval(void **state)
{
	fiber_attr_t attr;
	fiber_t f;

	(void)state;
	memset(&attr, 0, sizeof(attr));
	assert_int_equal(fiber_attr_setstacksize(&attr, 65536), EINVAL);
	assert_int_equal(fiber_attr_setname(&attr, "x"), EINVAL);
	assert_int_equal(fiber_create(&f, &attr, where, NULL), EINVAL);
	assert_int_equal(fiber_attr_init(&attr), 0);
	assert_int_equal(fiber_attr_destroy(&attr), 0);
	assert_int_equal(fiber_attr_destroy(&attr), EINVAL); /* destroyed */
	fiber_shutdown();
}

static void test_header_version_matches_the_header(void **state)
{
	char want[32];
	const char *v = fiber_version();

	(void)state;
	snprintf(want, sizeof(want), "%d.%d.%d", FIBER_VERSION_MAJOR,
		 FIBER_VERSION_MINOR, FIBER_VERSION_PATCH);
	assert_non_null(v);
	assert_int_equal(strncmp(v, want, strlen(want)), 0);
	assert_true(v[strlen(want)] == '\0' || v[strlen(want)] == '+');
}

static fiber_once_t once = FIBER_ONCE_INITIALIZER;
static int once_calls;

static void once_fn(void)
{
	once_calls++;
}

/* C code may spell the once type by its tag, struct fiber_once: it is
 * still fiber_once_t (only C++ sees another tag, fiber.h). */
static void test_header_once_keeps_its_c_tag(void **state)
{
	struct fiber_once *o = &once;

	(void)state;
	assert_int_equal(fiber_once(o, once_fn), 0);
	assert_int_equal(fiber_once(&once, once_fn), 0);
	assert_int_equal(once_calls, 1);
	fiber_shutdown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_header_workerset_pins_without_feature_macros),
		TEST(test_header_uninitialised_attr_is_einval),
		TEST(test_header_version_matches_the_header),
		TEST(test_header_once_keeps_its_c_tag),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
