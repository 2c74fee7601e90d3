/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-env.c - every LIBFIBER_* variable: good values start the runtime,
 * each bad value makes fiber_init() return EINVAL with a message naming the
 * variable and the value, and nothing starts.  The same for the fields of
 * struct fiber_config, whose messages name the field; a bad environment
 * under an implicit start is reported once; a refused topology's replay
 * (topo/topo.c) leaves the process's stderr to its other threads.  README.md's
 * Configuration table says what lib/api/config.h declares, and
 * fb_env_describe() spells each value as its variable accepts it.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/env.h"
#include "fiber.h"
#include "sched/sched.h"

#ifndef FB_TEST_TOPOLOGIES
#define FB_TEST_TOPOLOGIES "tests/topologies"
#endif
#define MALFORMED_XML FB_TEST_TOPOLOGIES "/malformed.xml"

/* api/config.h, expanded for the checks of README.md and of the table. */
struct var {
	const char *name, *kind;
	long min, max;
	const char *words, *def, *doc, *default_doc;
};

static const struct var table[] = {
#define FB_CONFIG(n, k, lo, hi, w, d, field, cfg, doc, ddoc)                   \
	{ "LIBFIBER_" #n, #k, lo, hi, w, d, doc, ddoc },
#include "api/config.h"
#undef FB_CONFIG
};
#define NR_VARS (sizeof(table) / sizeof(table[0]))

static void clear_env(void)
{
	for (size_t i = 0; i < NR_VARS; i++)
		unsetenv(table[i].name);
}

/* Capture what goes to stderr between capture_begin and capture_end. */
struct capture {
	char path[64];
	int fd, saved;
};

static void capture_begin(struct capture *c)
{
	snprintf(c->path, sizeof(c->path), "/tmp/libfiber-test-env-XXXXXX");
	c->fd = mkstemp(c->path);
	c->saved = dup(2);
	assert_true(c->fd >= 0 && c->saved >= 0);
	fflush(stderr);
	dup2(c->fd, 2);
}

static void capture_end(struct capture *c, char *msg, size_t len)
{
	ssize_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	lseek(c->fd, 0, SEEK_SET);
	n = read(c->fd, msg, len - 1);
	msg[n > 0 ? n : 0] = 0;
	close(c->fd);
	unlink(c->path);
}

/* Run fiber_init(@config) with stderr captured into @msg. */
static int init_config_capture(const struct fiber_config *config, char *msg,
			       size_t len)
{
	struct capture c;
	int rc;

	capture_begin(&c);
	rc = fiber_init(config);
	capture_end(&c, msg, len);
	return rc;
}

static int init_capture(char *msg, size_t len)
{
	return init_config_capture(NULL, msg, len);
}

/* How many times @needle occurs in @hay. */
static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void expect_refused(const char *var, const char *value)
{
	char msg[2048];

	clear_env();
	setenv(var, value, 1);
	assert_int_equal(init_capture(msg, sizeof(msg)), EINVAL);
	if (!strstr(msg, var) || (*value && !strstr(msg, value)))
		fail_msg("%s=\"%s\": message does not name both: %s", var,
			 value, msg);
	assert_int_equal(fiber_nr_workers(), 0); /* nothing started */
	clear_env();
}

static void test_env_bad_values_give_einval(void **state)
{
	static const struct {
		const char *var, *value;
	} bad[] = {
		{ "LIBFIBER_WORKERS", "0" },
		{ "LIBFIBER_WORKERS", "-1" },
		{ "LIBFIBER_WORKERS", "two" },
		{ "LIBFIBER_WORKERS", "4x" },
		{ "LIBFIBER_WORKERS", "" },
		{ "LIBFIBER_WORKERS", "100000" },
		{ "LIBFIBER_WORKERS", "99999999999999999999" },
		{ "LIBFIBER_WORKERS", "+2" },
		{ "LIBFIBER_WORKERS", " 2" },
		{ "LIBFIBER_TOPOLOGY", "garbage:xyz" },
		{ "LIBFIBER_TOPOLOGY", "/nonexistent/topology.xml" },
		{ "LIBFIBER_BIND", "yes" },
		{ "LIBFIBER_BIND", "2" },
		{ "LIBFIBER_BIND", "" },
		{ "LIBFIBER_SCHED_FEATURES", "NOT_A_FEATURE" },
		{ "LIBFIBER_SCHED_FEATURES", "SIS_UTIL,NO_BOGUS" },
		{ "LIBFIBER_STACK_SIZE", "1K" },
		{ "LIBFIBER_STACK_SIZE", "64Q" },
		{ "LIBFIBER_STACK_SIZE", "-64K" },
		{ "LIBFIBER_STACK_SIZE", "2G" },
		{ "LIBFIBER_STACK_SIZE", "" },
		{ "LIBFIBER_STACK_SIZE", "K" },
		{ "LIBFIBER_STACK_SIZE", "64KB" },
		{ "LIBFIBER_STACK_SIZE", "1MB" },
		{ "LIBFIBER_STACK_SIZE", "+64K" },
		{ "LIBFIBER_IDLE_POLL_US", "-5" },
		{ "LIBFIBER_IDLE_POLL_US", "fast" },
		{ "LIBFIBER_IDLE_POLL_US", "2000000" },
		{ "LIBFIBER_IDLE_POLL_US", "+5" },
		{ "LIBFIBER_STATS", "2" },
		{ "LIBFIBER_STATS", "JSON" },
		{ "LIBFIBER_STATS", "" },
		{ "LIBFIBER_BLOCKED_LOAD_INTERVAL_MS", "0" },
		{ "LIBFIBER_BLOCKED_LOAD_INTERVAL_MS", "50ms" },
		{ "LIBFIBER_CLOCK", "rdtsc" },
		{ "LIBFIBER_CLOCK", "TSC" },
		{ "LIBFIBER_CLOCK", "" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(bad[i].var, bad[i].value);
}

/* A bad scheduler feature is named where it came from: the call and its
 * argument for fiber_sched_features_set(), the variable for the
 * environment; never the other. */
static void test_env_features_errors_name_their_source(void **state)
{
	struct capture c;
	char msg[2048];

	(void)state;
	clear_env();
	capture_begin(&c);
	assert_int_equal(fiber_sched_features_set("NO_WA_IDLE BOGUS"), EINVAL);
	capture_end(&c, msg, sizeof(msg));
	if (!strstr(msg,
		    "libfiber: fiber_sched_features_set: spec=\"NO_WA_IDLE "
		    "BOGUS\": unknown scheduler feature \"BOGUS\"; "
		    "accepted: ") ||
	    strstr(msg, "LIBFIBER_"))
		fail_msg("message: %s", msg);
	assert_int_equal(fiber_sched_feature_get("WA_IDLE"), 1);

	setenv("LIBFIBER_SCHED_FEATURES", "NO_WA_IDLE BOGUS", 1);
	assert_int_equal(init_capture(msg, sizeof(msg)), EINVAL);
	if (!strstr(msg, "libfiber: LIBFIBER_SCHED_FEATURES=\"NO_WA_IDLE "
			 "BOGUS\": unknown scheduler feature \"BOGUS\"; "
			 "accepted: ") ||
	    strstr(msg, "fiber_sched_features_set"))
		fail_msg("message: %s", msg);
	clear_env();
}

static void *noop(void *arg)
{
	return arg;
}

static void expect_accepted(const char *var, const char *value)
{
	char msg[2048];
	fiber_t f;
	void *r = NULL;

	clear_env();
	setenv("LIBFIBER_WORKERS", "2", 1);
	setenv(var, value, 1);
	if (init_capture(msg, sizeof(msg)) != 0)
		fail_msg("%s=\"%s\" refused: %s", var, value, msg);
	assert_int_equal(fiber_create(&f, NULL, noop, (void *)7), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_ptr_equal(r, (void *)7);
	assert_int_equal(fiber_shutdown(), 0);
	clear_env();
}

static void test_env_good_values_start(void **state)
{
	(void)state;
	expect_accepted("LIBFIBER_WORKERS", "3");
	expect_accepted("LIBFIBER_BIND", "0");
	expect_accepted("LIBFIBER_BIND", "1");
	expect_accepted("LIBFIBER_SCHED_FEATURES",
			"NO_TTWU_QUEUE ASYM_PACKING");
	expect_accepted("LIBFIBER_SCHED_FEATURES", "");
	expect_accepted("LIBFIBER_STACK_SIZE", "64K");
	expect_accepted("LIBFIBER_STACK_SIZE", "1M");
	expect_accepted("LIBFIBER_STACK_SIZE", "65536");
	expect_accepted("LIBFIBER_IDLE_POLL_US", "0");
	expect_accepted("LIBFIBER_STATS", "0");
	expect_accepted("LIBFIBER_TOPOLOGY", "pack:1 l3:1 core:2 pu:2");
	expect_accepted("LIBFIBER_BLOCKED_LOAD_INTERVAL_MS", "50");
	expect_accepted("LIBFIBER_CLOCK", "auto");
	expect_accepted("LIBFIBER_CLOCK", "monotonic");
	/* tsc where the kernel keeps time with it, a clear refusal where
	 * it does not (the message says why and what is accepted). */
	if (fb_tsc_usable())
		expect_accepted("LIBFIBER_CLOCK", "tsc");
	else
		expect_refused("LIBFIBER_CLOCK", "tsc");
	/* anchored where the CPU says its TSC is invariant, likewise. */
	if (fb_tsc_invariant())
		expect_accepted("LIBFIBER_CLOCK", "anchored");
	else
		expect_refused("LIBFIBER_CLOCK", "anchored");
}

static void test_env_clock_parser(void **state)
{
	enum fb_clock_kind k = FB_CLOCK_AUTO;
	char err[256];

	(void)state;
	assert_int_equal(fb_parse_clock("C", "monotonic", &k, err, sizeof(err)),
			 0);
	assert_int_equal(k, FB_CLOCK_MONOTONIC);
	assert_int_equal(fb_parse_clock("C", "auto", &k, err, sizeof(err)), 0);
	assert_int_equal(k, FB_CLOCK_AUTO);
	assert_int_equal(fb_parse_clock("C", "tsc", &k, err, sizeof(err)),
			 fb_tsc_usable() ? 0 : EINVAL);
	if (!fb_tsc_usable())
		assert_non_null(strstr(err, "clocksource is not the TSC"));
	assert_int_equal(fb_parse_clock("C", "anchored", &k, err, sizeof(err)),
			 fb_tsc_invariant() ? 0 : EINVAL);
	if (fb_tsc_invariant())
		assert_int_equal(k, FB_CLOCK_ANCHORED);
	else
		assert_non_null(strstr(err, "TSC is invariant"));
	assert_int_equal(fb_parse_clock("C", "hpet", &k, err, sizeof(err)),
			 EINVAL);
	assert_non_null(strstr(err, "C=\"hpet\""));
	assert_non_null(strstr(err, "auto, tsc, monotonic or anchored"));
	assert_int_equal(fb_parse_clock("C", NULL, &k, err, sizeof(err)),
			 EINVAL);
}

static void test_env_size_parser(void **state)
{
	char err[256];
	size_t v = 0;

	(void)state;
	assert_int_equal(fb_parse_size("S", "64K", 1, 1UL << 30, &v, err,
				       sizeof(err)),
			 0);
	assert_int_equal(v, 65536);
	assert_int_equal(fb_parse_size("S", "2m", 1, 1UL << 30, &v, err,
				       sizeof(err)),
			 0);
	assert_int_equal(v, 2 << 20);
	assert_int_equal(fb_parse_size("S", "1G", 1, 1UL << 30, &v, err,
				       sizeof(err)),
			 0);
	assert_int_equal(v, 1UL << 30);
	v = 9;
	assert_int_equal(fb_parse_size("S", "64KB", 1, 1UL << 30, &v, err,
				       sizeof(err)),
			 EINVAL);
	assert_int_equal(v, 9);
	assert_non_null(strstr(err, "S=\"64KB\": not a size; expected digits "
				    "with an optional K, M or G suffix"));
	assert_int_equal(fb_parse_size("S", "18446744073709551615K", 1,
				       1UL << 30, &v, err, sizeof(err)),
			 EINVAL);
	assert_int_equal(v, 9);
	assert_non_null(strstr(err, "S=\"18446744073709551615K\""));
}

static void test_env_config_struct_overrides_environment(void **state)
{
	struct fiber_config c = { 0 };

	(void)state;
	clear_env();
	setenv("LIBFIBER_WORKERS", "bogus", 1);
	c.workers = 3;
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(fiber_nr_workers(), 3);
	assert_int_equal(fiber_init(&c), EBUSY);
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(fiber_shutdown(), ESRCH);
	c.stack_size = 100; /* below FIBER_STACK_MIN */
	assert_int_equal(fiber_init(&c), EINVAL);
	clear_env();
}

static void test_env_long_parser_takes_digits_only(void **state)
{
	char err[256];
	long v = 9;

	(void)state;
	assert_int_equal(fb_parse_long("W", "+2", 1, 8, &v, err, sizeof(err)),
			 EINVAL);
	assert_int_equal(v, 9);
	assert_non_null(strstr(err, "W=\"+2\": a sign is not accepted; "
				    "expected an integer from 1 to 8"));
	assert_int_equal(fb_parse_long("W", "2 ", 1, 8, &v, err, sizeof(err)),
			 EINVAL);
	assert_int_equal(fb_parse_long("W", "9", 1, 8, &v, err, sizeof(err)),
			 EINVAL);
	assert_non_null(strstr(err, "W=\"9\": out of range"));
	/* A '-' is a digit's sign only where negative values are accepted. */
	assert_int_equal(fb_parse_long("N", "-3", -5, 5, &v, err, sizeof(err)),
			 0);
	assert_int_equal(v, -3);
	assert_int_equal(fb_parse_long("N", "-", -5, 5, &v, err, sizeof(err)),
			 EINVAL);
	assert_int_equal(fb_parse_long("P", "-3", 0, 5, &v, err, sizeof(err)),
			 EINVAL);
}

/* More PUs than FIBER_WORKERS_MAX need a worker count, and the message says
 * which topology, how many PUs, the limit and what to set. */
static void test_env_too_many_pus_needs_a_worker_count(void **state)
{
	static const char big[] = "pack:2 core:1024 pu:1";
	struct fiber_config c = { 0 };
	char msg[2048];

	(void)state;
	clear_env();
	setenv("LIBFIBER_TOPOLOGY", big, 1);
	assert_int_equal(init_capture(msg, sizeof(msg)), EINVAL);
	assert_int_equal(fiber_nr_workers(), 0);
	if (!strstr(msg, "LIBFIBER_TOPOLOGY=\"pack:2 core:1024 pu:1\": 2048 "
			 "PUs, more than the 1024 workers") ||
	    !strstr(msg, "expected LIBFIBER_WORKERS or fiber_config.workers "
			 "from 1 to 1024"))
		fail_msg("unexpected message: %s", msg);
	c.topology = big;
	assert_int_equal(init_config_capture(&c, msg, sizeof(msg)), EINVAL);
	assert_non_null(strstr(msg, "fiber_config.topology=\"pack:2 core:1024 "
				    "pu:1\": 2048 PUs"));
	/* With a count, the same topology runs. */
	setenv("LIBFIBER_WORKERS", "2", 1);
	assert_int_equal(init_capture(msg, sizeof(msg)), 0);
	assert_int_equal(fiber_nr_workers(), 2);
	assert_int_equal(fiber_shutdown(), 0);
	clear_env();
}

/* bind = -1 and idle_poll_us = -1 mean "the environment", also with the
 * _set flags on: the variable is read (a bad one is refused, naming it). */
static void test_env_config_minus_one_means_environment(void **state)
{
	struct fiber_config c = { 0 };
	char msg[2048];

	(void)state;
	clear_env();
	c.workers = 2;
	c.bind_set = 1;
	c.bind = -1;
	c.idle_poll_set = 1;
	c.idle_poll_us = -1;
	setenv("LIBFIBER_BIND", "yes", 1);
	assert_int_equal(init_config_capture(&c, msg, sizeof(msg)), EINVAL);
	assert_non_null(strstr(msg, "LIBFIBER_BIND=\"yes\""));
	unsetenv("LIBFIBER_BIND");
	setenv("LIBFIBER_IDLE_POLL_US", "fast", 1);
	assert_int_equal(init_config_capture(&c, msg, sizeof(msg)), EINVAL);
	assert_non_null(strstr(msg, "LIBFIBER_IDLE_POLL_US=\"fast\""));
	setenv("LIBFIBER_BIND", "0", 1);
	setenv("LIBFIBER_IDLE_POLL_US", "7", 1);
	assert_int_equal(init_config_capture(&c, msg, sizeof(msg)), 0);
	assert_int_equal(fb_rt->params.bind, 0);
	assert_int_equal(fb_rt->params.poll_ns, 7000);
	assert_int_equal(fiber_shutdown(), 0);
	/* Set values win over the variables. */
	c.bind = 1;
	c.idle_poll_us = 0;
	assert_int_equal(init_config_capture(&c, msg, sizeof(msg)), 0);
	assert_int_equal(fb_rt->params.bind, 1);
	assert_int_equal(fb_rt->params.poll_ns, 0);
	assert_int_equal(fiber_shutdown(), 0);
	clear_env();
}

static void expect_config_refused(const struct fiber_config *c,
				  const char *quote)
{
	char msg[2048];

	assert_int_equal(init_config_capture(c, msg, sizeof(msg)), EINVAL);
	assert_int_equal(fiber_nr_workers(), 0);
	if (!strstr(msg, quote) || strstr(msg, "libfiber: LIBFIBER_"))
		fail_msg("expected \"%s\", not the variable, in: %s", quote,
			 msg);
}

/* A bad field is named as the field, with its value and what is accepted;
 * the variable it overrides is not mentioned. */
static void test_env_config_errors_name_the_field(void **state)
{
	struct fiber_config c;

	(void)state;
	clear_env();
	c = (struct fiber_config){ .bind_set = 1, .bind = 2 };
	expect_config_refused(&c, "fiber_config.bind=2: not 0 or 1; expected 0 "
				  "or 1, or -1 for LIBFIBER_BIND");
	c = (struct fiber_config){ .topology = "garbage:xyz" };
	expect_config_refused(&c, "fiber_config.topology=\"garbage:xyz\": not "
				  "a valid hwloc synthetic description");
	c = (struct fiber_config){ .sched_features = "NOT_A_FEATURE" };
	expect_config_refused(&c, "fiber_config.sched_features=\""
				  "NOT_A_FEATURE\": unknown scheduler feature");
	c = (struct fiber_config){ .stats = "JSON" };
	expect_config_refused(&c, "fiber_config.stats=\"JSON\"");
	c = (struct fiber_config){ .workers = 5000 };
	expect_config_refused(&c, "fiber_config.workers=5000: out of range; "
				  "expected 1 to 1024, or 0 for "
				  "LIBFIBER_WORKERS");
	c = (struct fiber_config){ .stack_size = 100 };
	expect_config_refused(&c, "fiber_config.stack_size=100: out of range");
	c = (struct fiber_config){ .idle_poll_set = 1, .idle_poll_us = -2 };
	expect_config_refused(&c, "fiber_config.idle_poll_us=-2: out of range");
	/* The reserved words are for later fields: any that is not 0. */
	c = (struct fiber_config){ .workers = 2 };
	c.reserved[0] = 0xdeadbeef;
	expect_config_refused(&c, "fiber_config.reserved[0]=3735928559: not 0; "
				  "expected 0");
	c.reserved[0] = 0;
	c.reserved[7] = 1;
	expect_config_refused(&c, "fiber_config.reserved[7]=1: not 0; "
				  "expected 0");
}

static void *noop_fiber(void *arg)
{
	return arg;
}

/* fiber_create starting the runtime itself with a bad environment: one
 * message, then the same errno quietly, until fiber_init is called. */
static void test_env_implicit_start_reports_once(void **state)
{
	struct capture cap;
	char msg[8192];
	fiber_t f;

	(void)state;
	clear_env();
	setenv("LIBFIBER_WORKERS", "bogus", 1);
	capture_begin(&cap);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fiber_create(&f, NULL, noop_fiber, NULL),
				 EINVAL);
	capture_end(&cap, msg, sizeof(msg));
	assert_int_equal(count(msg, "LIBFIBER_WORKERS=\"bogus\""), 1);

	/* fiber_init reads the environment again, and so does the next
	 * implicit start; both report. */
	capture_begin(&cap);
	assert_int_equal(fiber_init(NULL), EINVAL);
	assert_int_equal(fiber_create(&f, NULL, noop_fiber, NULL), EINVAL);
	assert_int_equal(fiber_create(&f, NULL, noop_fiber, NULL), EINVAL);
	capture_end(&cap, msg, sizeof(msg));
	assert_int_equal(count(msg, "LIBFIBER_WORKERS=\"bogus\""), 2);

	/* A fixed environment is not read before fiber_init is called. */
	setenv("LIBFIBER_WORKERS", "2", 1);
	capture_begin(&cap);
	assert_int_equal(fiber_create(&f, NULL, noop_fiber, NULL), EINVAL);
	capture_end(&cap, msg, sizeof(msg));
	assert_string_equal(msg, "");
	assert_int_equal(fiber_nr_workers(), 0);
	assert_int_equal(fiber_init(NULL), 0);
	assert_int_equal(fiber_create(&f, NULL, noop_fiber, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_shutdown(), 0);
	/* ...and after a clean start and stop, implicit starts work. */
	assert_int_equal(fiber_create(&f, NULL, noop_fiber, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_shutdown(), 0);
	clear_env();
}

static void test_env_enum_parser(void **state)
{
	enum fb_stats_mode m = FB_STATS_TABLE;
	char err[256];
	int i = 7;

	(void)state;
	assert_int_equal(fb_parse_enum("E", "tsc", "auto tsc monotonic", &i,
				       err, sizeof(err)),
			 0);
	assert_int_equal(i, 1);
	i = 7;
	assert_int_equal(fb_parse_enum("E", "ts", "auto tsc monotonic", &i, err,
				       sizeof(err)),
			 EINVAL);
	assert_int_equal(i, 7);
	assert_string_equal(err, "E=\"ts\": unknown value; expected auto, tsc "
				 "or monotonic");
	assert_int_equal(fb_parse_enum("E", "", "on off", &i, err, sizeof(err)),
			 EINVAL);
	assert_string_equal(err, "E=\"\": empty; expected on or off");
	assert_int_equal(fb_parse_enum("E", NULL, "on", &i, err, sizeof(err)),
			 EINVAL);
	assert_string_equal(err, "E=\"\": empty; expected on");
	assert_int_equal(fb_parse_enum("E", "on off", "on off", &i, err,
				       sizeof(err)),
			 EINVAL);
	assert_int_equal(i, 7);
	/* The words of LIBFIBER_STATS are in the order of its enum. */
	assert_int_equal(fb_parse_stats("S", "0", &m, err, sizeof(err)), 0);
	assert_int_equal(m, FB_STATS_OFF);
	assert_int_equal(fb_parse_stats("S", "1", &m, err, sizeof(err)), 0);
	assert_int_equal(m, FB_STATS_TABLE);
	assert_int_equal(fb_parse_stats("S", "json", &m, err, sizeof(err)), 0);
	assert_int_equal(m, FB_STATS_JSON);
}

/* What nothing sets comes from api/config.h's defaults, parsed as the
 * variables are: the same values as the constants the rest of the library
 * uses, and no value where the runtime decides. */
static void test_env_defaults_come_from_the_table(void **state)
{
	struct fiber_config c = { .topology = "pack:1 core:2 pu:1" };
	struct fb_env e;

	(void)state;
	clear_env();
	assert_int_equal(fb_env_load(&e, NULL), 0);
	assert_int_equal(e.workers, 0);
	assert_null(e.topology);
	assert_string_equal(e.topology_name, "LIBFIBER_TOPOLOGY");
	assert_int_equal(e.bind, -1);
	assert_int_equal(e.stack_size, FB_STACK_DEFAULT);
	assert_int_equal(e.features, fb_features_default());
	assert_int_equal(e.idle_poll_us, 50);
	assert_int_equal(e.stats, FB_STATS_OFF);
	assert_int_equal(e.blocked_load_interval_ms, 1);
	assert_int_equal(e.clock, FB_CLOCK_AUTO);
	fb_env_free(&e);
	/* "" is the machine too; a field names itself. */
	setenv("LIBFIBER_TOPOLOGY", "", 1);
	assert_int_equal(fb_env_load(&e, NULL), 0);
	assert_null(e.topology);
	fb_env_free(&e);
	assert_int_equal(fb_env_load(&e, &c), 0);
	assert_string_equal(e.topology, c.topology);
	assert_string_equal(e.topology_name, "fiber_config.topology");
	fb_env_free(&e);
	clear_env();
}

/* README.md's Configuration table is api/config.h's: its rows are
 * "| `NAME` | DOC | DEFAULT_DOC |", one per variable of the table and no
 * other, and each cell (less the one blank either side) equals the
 * table's text byte for byte.  Order is free. */
struct row {
	char name[64];
	const char *meaning, *def;
};

/* Split the README line @line, "| `NAME` | MEANING | DEFAULT |", into @r. */
static void parse_row(char *line, struct row *r)
{
	char *def, *end = line + strlen(line) - 2;
	int n = 0;

	if (sscanf(line, "| `%63[A-Z_]` | %n", r->name, &n) != 1 || !n)
		fail_msg("README.md: not a variable's row: %s", line);
	def = strstr(line + n, " | ");
	if (!def || end < def + 3 || strcmp(end, " |"))
		fail_msg("README.md: not three cells: %s", line);
	*def = *end = '\0';
	r->meaning = line + n;
	r->def = def + 3;
}

/* The rows of README.md's Configuration table, at most @max. */
static int readme_rows(struct row *rows, int max)
{
	static char text[1 << 20];
	FILE *f = fopen(FB_SOURCE_ROOT "/README.md", "r");
	char *line, *next;
	size_t n;
	int nr = 0;

	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	line = strstr(text, "\n## Configuration\n");
	assert_non_null(line);
	line = strstr(line, "\n| variable | meaning | default |\n"
			    "| --- | --- | --- |\n");
	assert_non_null(line);
	line = strchr(strchr(line + 1, '\n') + 1, '\n') + 1; /* the first row */
	for (; *line == '|'; line = next) {
		next = strchr(line, '\n');
		assert_non_null(next);
		*next++ = '\0';
		assert_true(nr < max);
		parse_row(line, &rows[nr++]);
	}
	return nr;
}

static void expect_cell(const char *var, const char *what, const char *readme,
			const char *config_h)
{
	if (strcmp(readme, config_h))
		fail_msg("%s, %s: README.md has \"%s\", api/config.h \"%s\"",
			 var, what, readme, config_h);
}

static void test_env_readme_table_is_config_h(void **state)
{
	struct row rows[64];
	int nr = readme_rows(rows, 64), seen;

	(void)state;
	for (size_t i = 0; i < NR_VARS; i++) {
		seen = 0;
		for (int j = 0; j < nr; j++) {
			if (strcmp(rows[j].name, table[i].name))
				continue;
			expect_cell(table[i].name, "meaning", rows[j].meaning,
				    table[i].doc);
			expect_cell(table[i].name, "default", rows[j].def,
				    table[i].default_doc);
			seen++;
		}
		if (seen != 1)
			fail_msg("README.md has %d rows for %s", seen,
				 table[i].name);
	}
	for (int j = 0; j < nr; j++) {
		seen = 0;
		for (size_t i = 0; i < NR_VARS; i++)
			seen += !strcmp(rows[j].name, table[i].name);
		if (!seen)
			fail_msg(
				"README.md documents %s, api/config.h does not",
				rows[j].name);
	}
}

/* @n bytes with the largest exact K, M or G suffix, as the docs write it. */
static void size_text(char *buf, size_t len, long n)
{
	int shift = 30;

	while (shift && n % (1L << shift))
		shift -= 10;
	snprintf(buf, len, "%ld%s", n >> shift,
		 (const char *[]){ "", "K", "M", "G" }[shift / 10]);
}

/* Each doc states what its line of api/config.h accepts: the range (the
 * sizes with their suffixes) or every word in backquotes; and the default
 * doc begins with the default, in backquotes. */
static void test_env_config_h_docs_state_range_and_default(void **state)
{
	char want[128], lo[32], hi[32];

	(void)state;
	for (size_t i = 0; i < NR_VARS; i++) {
		const struct var *v = &table[i];
		const char *w = !strcmp(v->kind, "BOOL") ? "0 1" : v->words;

		want[0] = '\0';
		if (!strcmp(v->kind, "INT"))
			snprintf(want, sizeof(want), "%ld to %ld", v->min,
				 v->max);
		if (!strcmp(v->kind, "SIZE")) {
			size_text(lo, sizeof(lo), v->min);
			size_text(hi, sizeof(hi), v->max);
			snprintf(want, sizeof(want), "%s to %s", lo, hi);
		}
		if (!strstr(v->doc, want))
			fail_msg("%s: the doc does not say \"%s\"", v->name,
				 want);
		for (; w && *w; w += strspn(w, " ")) {
			int n = (int)strcspn(w, " ");

			snprintf(want, sizeof(want), "`%.*s`", n, w);
			if (!strstr(v->doc, want))
				fail_msg("%s: the doc does not say %s", v->name,
					 want);
			w += n;
		}
		snprintf(want, sizeof(want), "`%s`", v->def ? v->def : "");
		if (v->def && *v->def &&
		    strncmp(v->default_doc, want, strlen(want)))
			fail_msg("%s: the default doc does not begin with %s",
				 v->name, want);
	}
}

/* LIBFIBER_SCHED_FEATURES as fb_env_describe() spells @mask. */
static void features_text(char *buf, size_t len, uint64_t mask)
{
	size_t used = 0;

	for (int i = 0; i < FB_FEAT_NR && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s",
					 i ? " " : "",
					 (mask >> i) & 1 ? "" : "NO_",
					 fb_feature_name(i));
}

static void expect_description(const struct fb_env *e, const char *want)
{
	char buf[2048];
	size_t n = fb_env_describe(e, buf, sizeof(buf));

	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
}

/* Nothing set: the defaults, and no worker count, topology or binding,
 * which the runtime decides. */
static void test_env_describe_defaults(void **state)
{
	char feat[1024], want[2048];
	struct fb_env e;

	(void)state;
	clear_env();
	assert_int_equal(fb_env_load(&e, NULL), 0);
	features_text(feat, sizeof(feat), fb_features_default());
	snprintf(want, sizeof(want),
		 "LIBFIBER_SCHED_FEATURES=\"%s\" LIBFIBER_STACK_SIZE=256K "
		 "LIBFIBER_IDLE_POLL_US=50 LIBFIBER_STATS=0 "
		 "LIBFIBER_BLOCKED_LOAD_INTERVAL_MS=1 LIBFIBER_CLOCK=auto "
		 "LIBFIBER_OFFLOAD_THREADS=64 "
		 "LIBFIBER_STALL_MS=100 LIBFIBER_DEADLOCK=warn "
		 "LIBFIBER_DUMP_SIGNAL=off LIBFIBER_STATS_INTERVAL_MS=0",
		 feat);
	expect_description(&e, want);
	fb_env_free(&e);
}

/* Put each NAME=value pair of @desc into the environment. */
static void setenv_pairs(const char *desc)
{
	char name[64], value[512];

	clear_env();
	for (const char *p = desc; *p;) {
		int n = 0;

		if (sscanf(p, "%63[A-Z_]=\"%511[^\"]\"%n", name, value, &n) !=
			    2 &&
		    sscanf(p, "%63[A-Z_]=%511[^ ]%n", name, value, &n) != 2)
			fail_msg("not a pair: %s", p);
		setenv(name, value, 1);
		p += n;
		p += *p == ' ';
	}
}

/* Every variable set: each value as the variable accepts it, and the
 * description read back as the environment gives the same configuration. */
static void test_env_describe_round_trips(void **state)
{
	struct fiber_config c = { .workers = 5 };
	char feat[1024], want[2048], again[2048];
	uint64_t mask;
	struct fb_env e, e2;

	(void)state;
	clear_env();
	setenv("LIBFIBER_WORKERS", "3", 1);
	setenv("LIBFIBER_TOPOLOGY", "pack:1 core:2 pu:2", 1);
	setenv("LIBFIBER_BIND", "0", 1);
	setenv("LIBFIBER_SCHED_FEATURES", "NO_TTWU_QUEUE,ASYM_PACKING", 1);
	setenv("LIBFIBER_STACK_SIZE", "3145728", 1);
	setenv("LIBFIBER_IDLE_POLL_US", "0", 1);
	setenv("LIBFIBER_STATS", "json", 1);
	setenv("LIBFIBER_BLOCKED_LOAD_INTERVAL_MS", "50", 1);
	setenv("LIBFIBER_CLOCK", "monotonic", 1);
	setenv("LIBFIBER_OFFLOAD_THREADS", "8", 1);
	setenv("LIBFIBER_STALL_MS", "0", 1);
	setenv("LIBFIBER_DEADLOCK", "abort", 1);
	setenv("LIBFIBER_DUMP_SIGNAL", "QUIT", 1);
	setenv("LIBFIBER_STATS_FILE", "/tmp/stats file", 1);
	setenv("LIBFIBER_STATS_INTERVAL_MS", "250", 1);
	setenv("LIBFIBER_TRACE", "trace.json", 1);
	assert_int_equal(fb_env_load(&e, NULL), 0);
	mask = (fb_features_default() & ~(UINT64_C(1) << FB_FEAT_TTWU_QUEUE)) |
	       UINT64_C(1) << FB_FEAT_ASYM_PACKING;
	features_text(feat, sizeof(feat), mask);
	snprintf(want, sizeof(want),
		 "LIBFIBER_WORKERS=3 LIBFIBER_TOPOLOGY=\"pack:1 core:2 pu:2\" "
		 "LIBFIBER_BIND=0 LIBFIBER_SCHED_FEATURES=\"%s\" "
		 "LIBFIBER_STACK_SIZE=3M LIBFIBER_IDLE_POLL_US=0 "
		 "LIBFIBER_STATS=json LIBFIBER_BLOCKED_LOAD_INTERVAL_MS=50 "
		 "LIBFIBER_CLOCK=monotonic LIBFIBER_OFFLOAD_THREADS=8 "
		 "LIBFIBER_STALL_MS=0 "
		 "LIBFIBER_DEADLOCK=abort LIBFIBER_DUMP_SIGNAL=QUIT "
		 "LIBFIBER_STATS_FILE=\"/tmp/stats file\" "
		 "LIBFIBER_STATS_INTERVAL_MS=250 LIBFIBER_TRACE=trace.json",
		 feat);
	expect_description(&e, want);

	setenv_pairs(want);
	assert_int_equal(fb_env_load(&e2, NULL), 0);
	fb_env_describe(&e2, again, sizeof(again));
	assert_string_equal(again, want);
	assert_int_equal(e2.features, mask);
	assert_int_equal(e2.stack_size, 3 << 20);
	fb_env_free(&e2);
	fb_env_free(&e);

	/* A field that wins is described; a topology without blanks is not
	 * quoted. */
	setenv("LIBFIBER_TOPOLOGY", "/no/such.xml", 1);
	assert_int_equal(fb_env_load(&e, &c), 0);
	fb_env_describe(&e, again, sizeof(again));
	assert_non_null(strstr(again, "LIBFIBER_WORKERS=5 "
				      "LIBFIBER_TOPOLOGY=/no/such.xml "));
	fb_env_free(&e);
	clear_env();
}

/* A short buffer gets the beginning and a NUL; the length is the whole. */
static void test_env_describe_truncates_like_snprintf(void **state)
{
	char full[2048], part[16];
	struct fb_env e;
	size_t n;

	(void)state;
	clear_env();
	assert_int_equal(fb_env_load(&e, NULL), 0);
	n = fb_env_describe(&e, full, sizeof(full));
	assert_int_equal(fb_env_describe(&e, NULL, 0), n);
	assert_int_equal(fb_env_describe(&e, part, sizeof(part)), n);
	assert_int_equal(strlen(part), sizeof(part) - 1);
	assert_memory_equal(part, full, sizeof(part) - 1);
	fb_env_free(&e);
}

/* ---- a refused topology's replay and the other threads' stderr ---------- */

#define TOKEN "@@w" /* a writer line: TOKEN, 6 digits, newline */

struct stderr_pipe {
	int rd;
	atomic_int stop;
	long written;
	char *data; /* everything read from the pipe */
	size_t len, cap;
};

static void *stderr_writer(void *arg)
{
	struct stderr_pipe *sp = arg;
	char line[16];

	while (!atomic_load(&sp->stop)) {
		int n = snprintf(line, sizeof(line), TOKEN "%06ld\n",
				 sp->written % 1000000);

		assert_true(write(2, line, (size_t)n) == n);
		sp->written++;
	}
	return NULL;
}

static void *stderr_reader(void *arg)
{
	struct stderr_pipe *sp = arg;
	ssize_t n;

	for (;;) {
		if (sp->cap - sp->len < 65536) {
			sp->cap = sp->cap ? sp->cap * 2 : 1 << 20;
			sp->data = realloc(sp->data, sp->cap);
			assert_non_null(sp->data);
		}
		n = read(sp->rd, sp->data + sp->len, sp->cap - sp->len - 1);
		if (n <= 0)
			break;
		sp->len += (size_t)n;
	}
	sp->data[sp->len] = '\0';
	return NULL;
}

/* Each writer line arrives whole, once, in order.  A linear scan: the
 * data run to megabytes, and a sanitizer's strstr reads all of them at
 * every call. */
static long lines_intact(const char *data, size_t len)
{
	const size_t tl = strlen(TOKEN);
	long next = 0, seq;
	size_t i = 0, d;

	while (i + tl + 7 <= len) {
		if (memcmp(data + i, TOKEN, tl)) {
			i++;
			continue;
		}
		i += tl;
		for (d = 0, seq = 0;
		     d < 6 && isdigit((unsigned char)data[i + d]); d++)
			seq = seq * 10 + (data[i + d] - '0');
		if (d < 6 || data[i + d] != '\n')
			continue; /* swallowed into another line: lost */
		if (seq != next % 1000000)
			return -1;
		next++;
		i += 7;
	}
	return next;
}

/* 50 inits refused for a malformed XML file, each replayed to quote hwloc,
 * while another thread writes lines to stderr: none of them is lost, and
 * the process's environment is left alone. */
static void test_env_refused_topology_keeps_other_threads_stderr(void **state)
{
	struct stderr_pipe sp = { 0 };
	pthread_t wr, rd;
	int p[2], saved;
	long got;

	(void)state;
	clear_env();
	setenv("LIBFIBER_TOPOLOGY", MALFORMED_XML, 1);
	assert_int_equal(pipe(p), 0);
	sp.rd = p[0];
	fflush(stderr);
	saved = dup(2);
	dup2(p[1], 2);
	close(p[1]);
	assert_int_equal(pthread_create(&rd, NULL, stderr_reader, &sp), 0);
	assert_int_equal(pthread_create(&wr, NULL, stderr_writer, &sp), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(fiber_init(NULL), EINVAL);
	atomic_store(&sp.stop, 1);
	pthread_join(wr, NULL);
	dup2(saved, 2); /* the last write end: the reader sees EOF */
	close(saved);
	pthread_join(rd, NULL);
	close(p[0]);
	got = lines_intact(sp.data, sp.len);
	print_message("# %ld lines written, %ld arrived intact\n", sp.written,
		      got);
	assert_true(sp.written > 0);
	assert_int_equal(got, sp.written);
	/* The messages quoted hwloc and got through too. */
	assert_int_equal(count(sp.data, "libfiber: LIBFIBER_TOPOLOGY=\""), 50);
	assert_null(getenv("HWLOC_XML_VERBOSE"));
	assert_null(getenv("LIBFIBER_INTERNAL_HWLOC_CHECK"));
	free(sp.data);
	clear_env();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_bad_values_give_einval),
		cmocka_unit_test(test_env_features_errors_name_their_source),
		cmocka_unit_test(test_env_good_values_start),
		cmocka_unit_test(test_env_size_parser),
		cmocka_unit_test(test_env_clock_parser),
		cmocka_unit_test(test_env_enum_parser),
		cmocka_unit_test(test_env_config_struct_overrides_environment),
		cmocka_unit_test(test_env_long_parser_takes_digits_only),
		cmocka_unit_test(test_env_too_many_pus_needs_a_worker_count),
		cmocka_unit_test(test_env_config_minus_one_means_environment),
		cmocka_unit_test(test_env_config_errors_name_the_field),
		cmocka_unit_test(test_env_implicit_start_reports_once),
		cmocka_unit_test(test_env_defaults_come_from_the_table),
		cmocka_unit_test(test_env_readme_table_is_config_h),
		cmocka_unit_test(
			test_env_config_h_docs_state_range_and_default),
		cmocka_unit_test(test_env_describe_defaults),
		cmocka_unit_test(test_env_describe_round_trips),
		cmocka_unit_test(test_env_describe_truncates_like_snprintf),
		cmocka_unit_test(
			test_env_refused_topology_keeps_other_threads_stderr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
