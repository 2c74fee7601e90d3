/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench.c - the helpers of bench.h: what every benchmark program needs and
 * should say the same way (error messages, exit statuses, the command line,
 * starting the runtime, latency histograms).  The records and the context
 * of a run are in report.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* CPU_COUNT */
#endif
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "fiber.h"

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* BENCH_OPTS_RUNTIME's help states the bound. */
_Static_assert(BENCH_WORKERS_MAX == 1024, "--workers' help says 1 to 1024");

/* The command as typed (fiber-hackbench when installed), for "Usage:" and
 * "Try"; bench_name until bench_parse() has seen argv[0]. */
static const char *command = bench_name;

void bench_bad_arg(const char *opt, const char *val, const char *expected)
{
	fprintf(stderr, "%s: %s: invalid value '%s' (expected %s)\n",
		bench_name, opt, val, expected);
	fprintf(stderr, "Try '%s --help'.\n", command);
	exit(2);
}

unsigned long bench_parse_ulong(const char *opt, const char *val,
				unsigned long min, unsigned long max)
{
	char expected[80];
	unsigned long v;
	char *end;

	snprintf(expected, sizeof(expected), "a whole number from %lu to %lu",
		 min, max);
	if (*val < '0' || *val > '9')
		bench_bad_arg(opt, val, expected);
	errno = 0;
	v = strtoul(val, &end, 10);
	if (errno || *end || v < min || v > max)
		bench_bad_arg(opt, val, expected);
	return v;
}

/*
 * The command line.  Long options get getopt_long values from OPT_BASE up
 * (OPT_BASE + index in the table); short options are looked up in the
 * table.  -h/--help is added to every program's table here.
 */
#define OPT_BASE 256
#define OPT_HELP (OPT_BASE - 1)
#define HELP_COLUMN 24

const char *const bench_format_names[] = { "table", "compat", "json", NULL };

/* The option's name for messages, as it was given: "--groups" or "-g". */
static const char *opt_name(const struct bench_opt *o, bool as_long, char *buf,
			    size_t len)
{
	if (as_long)
		snprintf(buf, len, "--%s", o->long_name);
	else
		snprintf(buf, len, "-%c", o->short_name);
	return buf;
}

static bool takes_value(const struct bench_opt *o)
{
	return o->metavar != NULL;
}

static void choices_text(const struct bench_opt *o, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; o->choices[i] && n < len; i++)
		n += snprintf(buf + n, len - n, "%s'%s'", i ? ", " : "",
			      o->choices[i]);
}

static void set_choice(const struct bench_opt *o, const char *name,
		       const char *val)
{
	char expected[128];

	for (int i = 0; o->choices[i]; i++) {
		if (!strcmp(o->choices[i], val)) {
			*(int *)o->target = i;
			return;
		}
	}
	choices_text(o, expected, sizeof(expected));
	bench_bad_arg(name, val, expected);
}

/* set_option - give the variable of @o the value @val; @as_long: the
 * option was given by its long name. */
static void set_option(const struct bench_opt *o, bool as_long, const char *val)
{
	char buf[64];
	const char *name = opt_name(o, as_long, buf, sizeof(buf));

	if (o->given)
		*o->given = true;
	switch (o->kind) {
	case BENCH_ARG_FLAG:
		*(bool *)o->target = true;
		break;
	case BENCH_ARG_UINT:
		*(unsigned int *)o->target =
			bench_parse_ulong(name, val, o->min, o->max);
		break;
	case BENCH_ARG_ULONG:
		*(unsigned long *)o->target =
			bench_parse_ulong(name, val, o->min, o->max);
		break;
	case BENCH_ARG_STR:
		*(const char **)o->target = val;
		break;
	case BENCH_ARG_CHOICE:
		set_choice(o, name, val);
		break;
	case BENCH_ARG_IGNORED:
		fprintf(stderr, "%s: note: %s ignored: %s\n", bench_name, name,
			o->help);
		break;
	case BENCH_ARG_REFUSED:
		fprintf(stderr, "%s: %s is not supported: %s\n", bench_name,
			name, o->help);
		exit(2);
	}
}

/* The default shown in --help: the variable's value before parsing. */
static void default_text(const struct bench_opt *o, char *buf, size_t len)
{
	unsigned long v = 0;

	buf[0] = '\0';
	if (strstr(o->help, "(default"))
		return;
	switch (o->kind) {
	case BENCH_ARG_UINT:
		v = *(unsigned int *)o->target;
		break;
	case BENCH_ARG_ULONG:
		v = *(unsigned long *)o->target;
		break;
	case BENCH_ARG_CHOICE:
		snprintf(buf, len, "(default %s)",
			 o->choices[*(int *)o->target]);
		return;
	case BENCH_ARG_STR:
		if (*(const char **)o->target)
			snprintf(buf, len, "(default %s)",
				 *(const char **)o->target);
		return;
	default:
		return;
	}
	snprintf(buf, len, "(default %lu)", v);
}

/* One option in --help: "  -g, --groups G" then its help, wrapped. */
static void help_option(const struct bench_opt *o)
{
	char head[96], def[96];
	const char *line, *nl;
	int n = 0, col;

	n += snprintf(head + n, sizeof(head) - n, "  ");
	if (o->short_name)
		n += snprintf(head + n, sizeof(head) - n, "-%c%s",
			      o->short_name, o->long_name ? ", " : "");
	else
		n += snprintf(head + n, sizeof(head) - n, "    ");
	if (o->long_name)
		n += snprintf(head + n, sizeof(head) - n, "--%s", o->long_name);
	if (takes_value(o))
		snprintf(head + n, sizeof(head) - n, " %s", o->metavar);
	fputs(head, stdout);
	col = (int)strlen(head);
	if (col > HELP_COLUMN - 2) {
		putchar('\n');
		col = 0;
	}
	default_text(o, def, sizeof(def));
	for (line = o->help; line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		printf("%*s%.*s", HELP_COLUMN - col, "",
		       nl ? (int)(nl - line) : (int)strlen(line), line);
		col = HELP_COLUMN + (nl ? (int)(nl - line) : (int)strlen(line));
		if (nl) {
			putchar('\n');
			col = 0;
		}
	}
	if (*def) {
		if (col + 1 + (int)strlen(def) > 79)
			printf("\n%*s%s", HELP_COLUMN, "", def);
		else
			printf(" %s", def);
	}
	putchar('\n');
}

static void print_help(const struct bench_opt *opts, size_t nr,
		       const char *intro, const char *outro)
{
	static const struct bench_opt help = { .short_name = 'h',
					       .long_name = "help",
					       .help = "this text" };
	bool other = false;
	size_t i;

	printf("Usage: %s [OPTION]...\n%s\n", command, intro);
	for (i = 0; i < nr; i++)
		if (opts[i].kind != BENCH_ARG_REFUSED)
			help_option(&opts[i]);
	help_option(&help);
	for (i = 0; i < nr; i++) {
		if (opts[i].kind != BENCH_ARG_REFUSED)
			continue;
		if (!other)
			printf("\nOptions of the original tool that this one "
			       "does not have (exit 2):\n");
		other = true;
		help_option(&opts[i]);
	}
	if (outro && *outro)
		printf("\n%s", outro);
	exit(0);
}

/* The getopt_long tables of @opts: ":h" then each short name. */
static void build_getopt(const struct bench_opt *opts, size_t nr, char *shorts,
			 struct option *longs)
{
	size_t i, s = 0, l = 0;

	shorts[s++] = ':';
	shorts[s++] = 'h';
	for (i = 0; i < nr; i++) {
		if (opts[i].short_name) {
			shorts[s++] = (char)opts[i].short_name;
			if (takes_value(&opts[i]))
				shorts[s++] = ':';
		}
		if (opts[i].long_name)
			longs[l++] =
				(struct option){ opts[i].long_name,
						 takes_value(&opts[i]) ?
							 required_argument :
							 no_argument,
						 NULL, OPT_BASE + (int)i };
	}
	shorts[s] = '\0';
	longs[l++] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	longs[l] = (struct option){ NULL, 0, NULL, 0 };
}

static const struct bench_opt *find_short(const struct bench_opt *opts,
					  size_t nr, int c)
{
	for (size_t i = 0; i < nr; i++)
		if (opts[i].short_name == c)
			return &opts[i];
	return NULL;
}

static void bad_option(int c, char **argv)
{
	char shortopt[3] = "-?";
	const char *what;

	/* An unknown short option ("-x4") leaves optind on its word until
	 * the word is used up: name it by optopt. */
	what = argv[optind - 1];
	if (optopt > 0 && optopt < 128 && strncmp(what, "--", 2)) {
		shortopt[1] = (char)optopt;
		what = shortopt;
	}
	fprintf(stderr, "%s: %s '%s'\nTry '%s --help'.\n", bench_name,
		c == ':' ? "missing value for" : "unknown option", what,
		command);
	exit(2);
}

/* getopt_long's tables while bench_parse() runs: file-scope, so that the
 * exits on the way (--help, a bad option) leave nothing unreachable. */
static struct option *opt_longs;
static char *opt_shorts;

void bench_parse(int argc, char **argv, const struct bench_opt *opts, size_t nr,
		 const char *intro, const char *outro)
{
	const struct bench_opt *o;
	int c;

	opt_longs = calloc(nr + 2, sizeof(*opt_longs));
	opt_shorts = malloc(2 * nr + 3);
	if (!opt_longs || !opt_shorts)
		bench_die("out of memory for the option tables");
	bench_context_start(argc, argv);
	if (argc > 0 && argv[0][0])
		command = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 :
						  argv[0];
	build_getopt(opts, nr, opt_shorts, opt_longs);
	opterr = 0;
	while ((c = getopt_long(argc, argv, opt_shorts, opt_longs, NULL)) !=
	       -1) {
		if (c == 'h' || c == OPT_HELP)
			print_help(opts, nr, intro, outro);
		if (c == ':' || c == '?')
			bad_option(c, argv);
		o = c >= OPT_BASE ? &opts[c - OPT_BASE] :
				    find_short(opts, nr, c);
		set_option(o, c >= OPT_BASE, optarg);
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", bench_name,
			argv[optind]);
		exit(2);
	}
	free(opt_longs);
	free(opt_shorts);
	opt_longs = NULL;
	opt_shorts = NULL;
}

static void check_features(const char *spec);

void bench_common_finish(struct bench_common *c, bool other_mode)
{
	if (c->features)
		check_features(c->features);
	if (c->json)
		c->format = BENCH_FORMAT_JSON;
	if (!c->fibers && !c->threads && !other_mode) {
		c->fibers = true;
		c->threads = c->format != BENCH_FORMAT_COMPAT;
	}
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char *features_string(void)
{
	char small[256] = "";
	char *buf;
	int len;

	len = fiber_sched_features_string(small, sizeof(small));
	if (len < 0)
		len = 0;
	buf = malloc(len + 1);
	if (!buf)
		bench_die("out of memory");
	if ((size_t)len < sizeof(small))
		memcpy(buf, small, len + 1);
	else
		fiber_sched_features_string(buf, len + 1);
	return buf;
}

/* A word of --features: NAME or NO_NAME, NAME a feature of the library. */
static bool feature_word_known(const char *w)
{
	return fiber_sched_feature_get(w) >= 0 ||
	       (!strncmp(w, "NO_", 3) && fiber_sched_feature_get(w + 3) >= 0);
}

/* feature_names - fiber_sched_features_string()'s "NAME NO_NAME ..." as
 * the bare names, to free(). */
static char *feature_names(void)
{
	char *names = features_string(), *out = names, *save, *t;

	for (t = strtok_r(names, " ", &save); t;
	     t = strtok_r(NULL, " ", &save)) {
		size_t len;

		if (!strncmp(t, "NO_", 3))
			t += 3;
		if (out != names)
			*out++ = ' ';
		len = strlen(t);
		memmove(out, t, len);
		out += len;
	}
	*out = '\0';
	return names;
}

/*
 * check_features - refuse a --features string with a word the library does
 * not know, before the runtime starts: fiber_sched_features_set() would
 * refuse it too, but with a message that names the call, not --features.
 */
static void check_features(const char *spec)
{
	static const char sep[] = " \t\n,";
	const char *w = spec;
	char word[64], *names;
	size_t len;

	for (;; w += len) {
		w += strspn(w, sep);
		len = strcspn(w, sep);
		if (!len)
			return;
		snprintf(word, sizeof(word), "%.*s", (int)len, w);
		if (len < sizeof(word) && feature_word_known(word))
			continue;
		names = feature_names();
		fprintf(stderr,
			"%s: --features: invalid value '%s': unknown scheduler "
			"feature '%.*s' (expected names separated by spaces or "
			"commas, NAME turns on, NO_NAME turns off; names: %s)\n",
			bench_name, spec, (int)(len < 64 ? len : 64), w, names);
		fprintf(stderr, "Try '%s --help'.\n", command);
		free(names);
		exit(2);
	}
}

char *bench_start_runtime(unsigned int workers, const char *features)
{
	struct fiber_config cfg = { .workers = workers };
	char *feats;
	int err;

	err = fiber_init(&cfg);
	if (err)
		bench_die("fiber_init with %u workers: %s", workers,
			  strerror(err));
	if (fiber_nr_workers() != (int)workers)
		bench_die("asked for %u workers, the runtime has %d", workers,
			  fiber_nr_workers());
	if (features) {
		err = fiber_sched_features_set(features);
		if (err) {
			fprintf(stderr,
				"%s: --features: '%s' rejected: %s (names "
				"separated by spaces or commas, NAME turns "
				"on, NO_NAME turns off)\n",
				bench_name, features, strerror(err));
			fiber_shutdown();
			exit(2);
		}
	}
	feats = features_string();
	bench_context_runtime(feats);
	return feats;
}

unsigned int bench_nr_cpus(void)
{
	cpu_set_t allowed;
	int nr;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		bench_die("sched_getaffinity: %s", strerror(errno));
	nr = CPU_COUNT(&allowed);
	return nr > 0 ? nr : 1;
}

int bench_worker_cpu(unsigned int w)
{
	cpu_set_t allowed;
	int cpu, nth = 0;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		bench_die("sched_getaffinity: %s", strerror(errno));
	w %= bench_nr_cpus();
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &allowed) && nth++ == (int)w)
			return cpu;
	}
	return 0;
}

/* Latency histograms. */

#define SUB (1u << BENCH_HIST_SUB_BITS)

struct bench_hist *bench_hist_alloc(void)
{
	struct bench_hist *h = calloc(1, sizeof(*h));

	if (!h)
		bench_die("out of memory for a histogram");
	h->min = UINT64_MAX;
	return h;
}

/*
 * For v >= SUB with top bit m: shift = m - SUB_BITS, the top SUB_BITS + 1
 * bits are v >> shift, in [SUB, 2 * SUB), and
 *	index = (shift + 1) * SUB + (v >> shift) - SUB.
 */
static unsigned int hist_index(uint64_t v)
{
	unsigned int shift;

	if (v < SUB)
		return v;
	shift = 63 - __builtin_clzll(v) - BENCH_HIST_SUB_BITS;
	return (shift + 1) * SUB + (unsigned int)(v >> shift) - SUB;
}

/* The middle of bucket @i: the inverse of hist_index() plus half a width. */
static uint64_t hist_value(unsigned int i)
{
	unsigned int shift;

	if (i < SUB)
		return i;
	shift = i / SUB - 1;
	return ((uint64_t)(SUB + i % SUB) << shift) +
	       ((uint64_t)1 << shift) / 2;
}

void bench_hist_add(struct bench_hist *h, uint64_t v)
{
	h->bucket[hist_index(v)]++;
	h->count++;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from)
{
	unsigned int i;

	for (i = 0; i < BENCH_HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
	into->count += from->count;
	if (from->min < into->min)
		into->min = from->min;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t bench_hist_percentile(const struct bench_hist *h, double p)
{
	uint64_t rank, pm, seen = 0, v;
	unsigned int i;

	if (!h->count)
		return 0;
	/*
	 * ceil(p/100 * count) in integers: p/100 * count in doubles is
	 * 999.0000000000001 for p99.9 of 1000 samples, whose ceiling would
	 * be the maximum.  p is taken in millionths of a percent, which
	 * every percentile the programs report is exactly.
	 */
	pm = (uint64_t)llround(p * 1e6);
	rank = (uint64_t)(((unsigned __int128)pm * h->count + 100000000 - 1) /
			  100000000);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank)
			break;
	}
	v = hist_value(i < BENCH_HIST_BUCKETS ? i : BENCH_HIST_BUCKETS - 1);
	if (v < h->min)
		v = h->min;
	if (v > h->max)
		v = h->max;
	return v;
}

uint64_t bench_hist_count_upto(const struct bench_hist *h, uint64_t v)
{
	unsigned int i, last = hist_index(v);
	uint64_t n = 0;

	for (i = 0; i <= last && i < BENCH_HIST_BUCKETS; i++)
		n += h->bucket[i];
	return n;
}
