/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * report.c - what a benchmark program writes about its run besides the
 * numbers: the JSON record around them and the context of the run, so that
 * two results can be told apart months later (which host, kernel, CPU,
 * load, build, clock, topology and features produced them).
 *
 * The load is given two ways.  The load averages of the kernel before and
 * after say whether the machine was busy around the run; they are smoothed
 * over a minute and include this process.  The CPU time other processes
 * took during the run says what was taken from it:
 *
 *	cpu_busy_others = (busy_cpu_s - own_cpu_s) / (elapsed_s * nr_cpus)
 *
 * with busy_cpu_s the user, nice, system, irq, softirq and steal time of
 * /proc/stat's "cpu" line over the run (steal: a hypervisor gave the CPU
 * to someone else), own_cpu_s this process's user and system time
 * (getrusage), over the wall-clock time from bench_context_start() to
 * bench_context_finish().  0 is an idle machine, 1 one that other
 * processes kept fully busy; null for runs too short to tell.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memfd_create */
#endif
#include <hwloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "fiber.h"
#include "bench.h"

extern char **environ;
/* revision.c, made by meson's vcs_tag(): `git describe`, or "". */
extern const char bench_git_revision[];

#ifndef BENCH_LIBFIBER_VERSION
#define BENCH_LIBFIBER_VERSION "unknown"
#endif

/*
 * utf8_len - the length of the well-formed UTF-8 sequence at @s (1 to 4),
 * or 0 when the byte at @s does not start one: a stray continuation
 * byte, an overlong form, a surrogate, a code point past U+10FFFF or a
 * sequence cut short.
 */
static int utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	int n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* the second byte's range excludes the overlong forms, the
	 * surrogates and what lies past U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/*
 * json_escape - write @s to @f as the inside of a JSON string.  JSON is
 * UTF-8, but the environment, the command line and file names need not
 * be: a byte that is not part of a well-formed UTF-8 sequence is written
 * as \u00XX, XX its value (the character that byte is in Latin-1), so
 * that the record stays valid and the byte can still be told.
 */
static void json_escape(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		int n = utf8_len(s);

		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if (*s < 0x20 || !n)
			fprintf(f, "\\u%04x", *s);
		else {
			fwrite(s, 1, (size_t)n, f);
			s += n;
			continue;
		}
		s++;
	}
}

void bench_json_string(const char *s)
{
	json_escape(stdout, s);
}

/* JSON records: printed as they come, a member at a time. */

static bool json_first; /* no member printed yet in the object */

static void json_key(const char *key)
{
	printf("%s\"", json_first ? "" : ",");
	bench_json_string(key);
	printf("\":");
	json_first = false;
}

void bench_json_open(const char *bench, const char *mode)
{
	bench_context_finish();
	printf("{\"schema\":%d,\"bench\":\"", BENCH_SCHEMA);
	bench_json_string(bench);
	printf("\",\"mode\":\"");
	bench_json_string(mode);
	printf("\",\"params\":{");
	json_first = true;
}

void bench_json_uint(const char *key, unsigned long long v)
{
	json_key(key);
	printf("%llu", v);
}

void bench_json_double(const char *key, double v)
{
	json_key(key);
	printf("%.10g", v);
}

void bench_json_str(const char *key, const char *v)
{
	json_key(key);
	putchar('"');
	bench_json_string(v);
	putchar('"');
}

void bench_json_metrics(void)
{
	printf("},\"metrics\":{");
	json_first = true;
}

/* Warnings, in the order they came. */
#define WARNINGS_MAX 16
static char *warnings[WARNINGS_MAX];
static int nr_warnings;

void bench_warn(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (!msg)
		return;
	fprintf(stderr, "%s: warning: %s\n", bench_name, msg);
	if (nr_warnings < WARNINGS_MAX)
		warnings[nr_warnings++] = msg;
	else
		free(msg);
}

void bench_check_duration(const char *mode, uint64_t elapsed_ns,
			  const char *raise)
{
	if (elapsed_ns >= BENCH_MIN_RUN_NS)
		return;
	bench_warn("%s: the measured run lasted %.4f s, less than %.1f s: "
		   "one tick, preemption or migration weighs on it; raise %s",
		   mode, elapsed_ns / 1e9, BENCH_MIN_RUN_NS / 1e9, raise);
}

void bench_check_tail(const char *what, uint64_t count, double p)
{
	/* Rounded: 10000 samples leave 10 above p99.9, not 9.999... */
	double above = floor(count * (100.0 - p) / 100.0 + 1e-6);

	if (above >= BENCH_MIN_TAIL)
		return;
	bench_warn("%s: %llu samples leave %.0f above p%g, fewer than %d: "
		   "that percentile is close to the maximum",
		   what, (unsigned long long)count, above, p, BENCH_MIN_TAIL);
}

void bench_json_close(void)
{
	printf("},\"warnings\":[");
	for (int i = 0; i < nr_warnings; i++) {
		printf("%s\"", i ? "," : "");
		bench_json_string(warnings[i]);
		putchar('"');
	}
	printf("],\"context\":");
	bench_context_print();
	printf("}\n");
	fflush(stdout);
}

/* The context. */

struct cpu_times {
	uint64_t wall_ns;
	double busy_s; /* all CPUs, /proc/stat */
	double own_s;  /* this process */
	bool busy_ok;  /* /proc/stat was read */
};

static struct {
	int argc;
	char **argv;
	char date[32];
	double load_before[3], load_after[3];
	bool load_ok[2];
	struct cpu_times t0, t1;
	bool finished;
	char clock[32];
	char *features;
	char topology[512];
	const char *topology_source;
	char cpu_model[128];
} ctx;

/* The busy time of every CPU from /proc/stat's first line, in seconds. */
static bool proc_stat_busy(double *busy_s)
{
	unsigned long long v[8] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return false;
	/* cpu user nice system idle iowait irq softirq steal */
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 4 || hz <= 0)
		return false;
	*busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
	return true;
}

static void cpu_times_now(struct cpu_times *t)
{
	struct rusage ru;

	t->busy_ok = proc_stat_busy(&t->busy_s);
	getrusage(RUSAGE_SELF, &ru);
	t->own_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		   ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	t->wall_ns = bench_now_ns();
}

/* The first "model name" (x86) or "Processor"/"cpu model" line. */
static void cpu_model(char *buf, size_t len)
{
	static const char *const keys[] = { "model name", "Processor",
					    "cpu model", "cpu", NULL };
	char line[256], *colon, *v;
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	for (int k = 0; keys[k]; k++) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			colon = strchr(line, ':');
			if (!colon || strncmp(line, keys[k], strlen(keys[k])))
				continue;
			if (line[strlen(keys[k])] != ' ' &&
			    line[strlen(keys[k])] != '\t')
				continue;
			for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
				;
			v[strcspn(v, "\n")] = '\0';
			if (*v) {
				snprintf(buf, len, "%s", v);
				fclose(f);
				return;
			}
		}
	}
	fclose(f);
}

/*
 * The topology the runtime places on: LIBFIBER_TOPOLOGY when set (a
 * synthetic string or an XML path), else the machine's as hwloc's
 * synthetic description, or "asymmetric" where it has none.
 */
static void topology(char *buf, size_t len)
{
	const char *env = getenv("LIBFIBER_TOPOLOGY");
	hwloc_topology_t t;
	int n = -1;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		ctx.topology_source = "LIBFIBER_TOPOLOGY";
		return;
	}
	ctx.topology_source = "machine";
	if (hwloc_topology_init(&t)) {
		snprintf(buf, len, "unknown");
		return;
	}
	if (!hwloc_topology_load(t))
		n = hwloc_topology_export_synthetic(
			t, buf, len,
			HWLOC_TOPOLOGY_EXPORT_SYNTHETIC_FLAG_NO_ATTRS);
	if (n < 0)
		snprintf(buf, len, "asymmetric");
	hwloc_topology_destroy(t);
}

void bench_context_start(int argc, char **argv)
{
	time_t now = time(NULL);
	struct tm tm;

	ctx.argc = argc;
	ctx.argv = argv;
	gmtime_r(&now, &tm);
	strftime(ctx.date, sizeof(ctx.date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	ctx.load_ok[0] = getloadavg(ctx.load_before, 3) == 3;
	snprintf(ctx.clock, sizeof(ctx.clock), "unknown");
	cpu_model(ctx.cpu_model, sizeof(ctx.cpu_model));
	topology(ctx.topology, sizeof(ctx.topology));
	cpu_times_now(&ctx.t0);
}

/* The scheduler clock: "clock" of fiber_stats_print()'s JSON object. */
static void sched_clock(char *buf, size_t len)
{
	char head[256] = "", *p, *q;
	int fd = memfd_create("bench-stats", MFD_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	if (!fiber_stats_print(fd, 1)) {
		n = pread(fd, head, sizeof(head) - 1, 0);
		head[n > 0 ? n : 0] = '\0';
		p = strstr(head, "\"clock\":\"");
		q = p ? strchr(p + 9, '"') : NULL;
		if (q)
			snprintf(buf, len, "%.*s", (int)(q - p - 9), p + 9);
	}
	close(fd);
}

void bench_context_runtime(const char *features)
{
	sched_clock(ctx.clock, sizeof(ctx.clock));
	free(ctx.features);
	ctx.features = strdup(features);
}

static double busy_others(void);

void bench_context_finish(void)
{
	double others;

	if (ctx.finished)
		return;
	ctx.finished = true;
	ctx.load_ok[1] = getloadavg(ctx.load_after, 3) == 3;
	cpu_times_now(&ctx.t1);
	others = busy_others();
	if (others > BENCH_MAX_BUSY_OTHERS)
		bench_warn("other processes kept %.0f%% of the CPUs busy "
			   "during the run (load average %.2f before, %.2f "
			   "after): its numbers are theirs too",
			   others * 100, ctx.load_before[0], ctx.load_after[0]);
}

/*
 * cpu_busy_others of the opening comment; -1 when unknown.  /proc/stat
 * counts in ticks of 10 ms (USER_HZ 100): over less than BUSY_MIN_S on
 * two CPUs one tick would be more than 2%.
 */
#define BUSY_MIN_S 0.25
static double busy_others(void)
{
	double wall = (ctx.t1.wall_ns - ctx.t0.wall_ns) / 1e9;
	long nr = sysconf(_SC_NPROCESSORS_ONLN);
	double v;

	if (!ctx.t0.busy_ok || !ctx.t1.busy_ok || wall < BUSY_MIN_S || nr <= 0)
		return -1;
	v = (ctx.t1.busy_s - ctx.t0.busy_s) - (ctx.t1.own_s - ctx.t0.own_s);
	v /= wall * nr;
	return v < 0 ? 0 : v > 1 ? 1 : v;
}

static void json_member_str(const char *key, const char *v)
{
	json_key(key);
	if (!v) {
		printf("null");
		return;
	}
	putchar('"');
	bench_json_string(v);
	putchar('"');
}

static void json_loadavg(const char *key, const double *v, bool ok)
{
	json_key(key);
	if (ok)
		printf("[%.2f,%.2f,%.2f]", v[0], v[1], v[2]);
	else
		printf("null");
}

/* "env":{...}: every LIBFIBER_* variable the runtime may have read. */
static void json_env(void)
{
	char key[128];
	const char *eq;

	json_key("env");
	putchar('{');
	json_first = true;
	for (char **e = environ; *e; e++) {
		eq = strchr(*e, '=');
		if (strncmp(*e, "LIBFIBER_", 9) || !eq)
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - *e), *e);
		json_member_str(key, eq + 1);
	}
	putchar('}');
	json_first = false;
}

static void json_command(void)
{
	json_key("command");
	putchar('[');
	for (int i = 0; i < ctx.argc; i++) {
		printf("%s\"", i ? "," : "");
		bench_json_string(ctx.argv[i]);
		putchar('"');
	}
	putchar(']');
}

void bench_context_print(void)
{
	struct utsname u;
	char host[256] = "unknown";
	double others;

	bench_context_finish();
	others = busy_others();
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	gethostname(host, sizeof(host) - 1);
	putchar('{');
	json_first = true;
	json_member_str("host", host);
	json_member_str("kernel", u.release);
	json_member_str("kernel_version", u.version);
	json_member_str("arch", u.machine);
	json_member_str("cpu_model", ctx.cpu_model);
	json_key("nr_cpus");
	printf("%ld", sysconf(_SC_NPROCESSORS_ONLN));
	json_key("nr_cpus_allowed");
	printf("%u", bench_nr_cpus());
	json_loadavg("loadavg_before", ctx.load_before, ctx.load_ok[0]);
	json_loadavg("loadavg_after", ctx.load_after, ctx.load_ok[1]);
	json_key("cpu_busy_others");
	if (others < 0)
		printf("null");
	else
		printf("%.3f", others);
	json_member_str("libfiber_version", BENCH_LIBFIBER_VERSION);
	json_member_str("git_revision",
			*bench_git_revision ? bench_git_revision : NULL);
	json_member_str("sched_clock", ctx.clock);
	json_member_str("topology", ctx.topology);
	json_member_str("topology_source", ctx.topology_source);
	json_member_str("features", ctx.features ? ctx.features : "");
	json_env();
	json_command();
	json_member_str("date", ctx.date);
	putchar('}');
}

void bench_context_line(void)
{
	struct utsname u;
	char host[256] = "unknown";
	double others;

	bench_context_finish();
	others = busy_others();
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	gethostname(host, sizeof(host) - 1);
	printf("host %s: %s %s %s, %s x %ld CPUs", host, u.sysname, u.release,
	       u.machine, ctx.cpu_model, sysconf(_SC_NPROCESSORS_ONLN));
	if (ctx.load_ok[0] && ctx.load_ok[1])
		printf(", load %.2f before, %.2f after", ctx.load_before[0],
		       ctx.load_after[0]);
	if (others >= 0)
		printf(", others %.0f%% busy", others * 100);
	printf("; libfiber %s%s%s, clock %s\n", BENCH_LIBFIBER_VERSION,
	       *bench_git_revision ? " " : "", bench_git_revision, ctx.clock);
}
