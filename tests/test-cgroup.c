/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-cgroup.c - the default worker count honours cgroup v2's cpu.max.
 * The tests build a fake hierarchy in a temporary directory and point
 * fb_cgroup_root and fb_cgroup_self (api/cgroup.h) at it: the tightest
 * level wins, a limit is rounded up and is at least 2, "max", a missing or
 * malformed file and a cgroup v1-only process mean no limit; and a runtime
 * started on 4 PUs without a worker count gets the limit's workers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/cgroup.h"
#include "fiber.h"

static char root[64], self[96];

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* root/a/b with the process in /a/b, no cpu.max anywhere. */
static int setup(void **state)
{
	char path[160];

	(void)state;
	strcpy(root, "/tmp/test-cgroup-XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/a", root);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/a/b", root);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(self, sizeof(self), "%s/self", root);
	put("self", "12:cpu,cpuacct:/a/b\n0::/a/b\n");
	fb_cgroup_root = root;
	fb_cgroup_self = self;
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	fb_cgroup_root = NULL;
	fb_cgroup_self = NULL;
	return 0;
}

static void test_cgroup_no_cpu_max_is_no_limit(void **state)
{
	(void)state;
	assert_int_equal(fb_cgroup_cpu_limit(), 0);
	put("a/b/cpu.max", "max 100000\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 0);
}

static void test_cgroup_limit_rounds_up(void **state)
{
	(void)state;
	put("a/b/cpu.max", "250000 100000\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 3);
	put("a/b/cpu.max", "300000 100000\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 3);
}

static void test_cgroup_limit_is_at_least_two(void **state)
{
	(void)state;
	put("a/b/cpu.max", "50000 100000\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 2);
}

/* A parent's tighter limit binds the child; a looser one does not. */
static void test_cgroup_tightest_level_wins(void **state)
{
	(void)state;
	put("a/b/cpu.max", "max 100000\n");
	put("a/cpu.max", "400000 100000\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 4);
	put("a/b/cpu.max", "300000 100000\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 3);
	put("cpu.max", "200000 100000\n"); /* the root's own */
	assert_int_equal(fb_cgroup_cpu_limit(), 2);
}

static void test_cgroup_malformed_is_no_limit(void **state)
{
	static const char *const bad[] = { "",		 "abc 100000\n",
					   "100000\n",	 "-5 100000\n",
					   "100000 0\n", "1e400 1\n" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put("a/b/cpu.max", bad[i]);
		assert_int_equal(fb_cgroup_cpu_limit(), 0);
	}
}

/* Only v1 lines (no "0::"), an unreadable self file, a path that climbs
 * out of the root: no limit. */
static void test_cgroup_without_v2_is_no_limit(void **state)
{
	(void)state;
	put("a/b/cpu.max", "100000 100000\n");
	put("self", "4:cpu:/a/b\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 0);
	put("self", "0::/a/b/../../..\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 0);
	fb_cgroup_self = "/nonexistent/cgroup";
	assert_int_equal(fb_cgroup_cpu_limit(), 0);
	fb_cgroup_self = self;
	put("self", "0::/a/b\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 2);
	put("self", "0::/a/..\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 0);
}

/* A name that starts with ".." is a name, not a climb. */
static void test_cgroup_dotdot_name_is_a_name(void **state)
{
	char path[160];

	(void)state;
	snprintf(path, sizeof(path), "%s/..svc", root);
	assert_int_equal(mkdir(path, 0700), 0);
	put("..svc/cpu.max", "300000 100000\n");
	put("self", "0::/..svc\n");
	assert_int_equal(fb_cgroup_cpu_limit(), 3);
	put("self", "0::/a/b\n");
}

/* 4 PUs, 2.5 CPUs of bandwidth: 3 workers; a worker count set wins. */
static void test_cgroup_sets_default_worker_count(void **state)
{
	struct fiber_config c = { 0 };

	(void)state;
	put("a/b/cpu.max", "250000 100000\n");
	c.topology = "pack:1 core:4 pu:1";
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(fiber_nr_workers(), 3);
	assert_int_equal(fiber_shutdown(), 0);
	c.workers = 4;
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(fiber_nr_workers(), 4);
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_cgroup_no_cpu_max_is_no_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_limit_rounds_up,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cgroup_limit_is_at_least_two, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_tightest_level_wins,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cgroup_malformed_is_no_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cgroup_without_v2_is_no_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cgroup_dotdot_name_is_a_name, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cgroup_sets_default_worker_count, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
