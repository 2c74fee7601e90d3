/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/stats.c - the LIBFIBER_STATS output: one row per worker plus the foreign
 * threads' row and the total, as a table or as one JSON object
 * {"clock":...,"workers":[{"worker":0,...}],"foreign":{...},"total":{...}}
 * (clock: the scheduler clock, base/clock.h).  Counter names come from
 * lib/sched/counters.h and are stable.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "api/env.h"
#include "sched/sched.h"

/* Where the output goes: stderr, or LIBFIBER_STATS_FILE's descriptor
 * (fb_stats_open); and LIBFIBER_STATS's mode for the interval lines.
 * Written at start and shutdown under the runtime lock, read by the
 * monitor and the exit handler while the runtime runs. */
static int out_fd = 2;
static bool out_json;

static const char *const names[] = {
#define FB_COUNTER(name, desc) #name,
#include "sched/counters.h"
#undef FB_COUNTER
};
#define NR_COUNTERS FB_ARRAY_SIZE(names)

static void read_row(int worker, uint64_t *v)
{
	const struct fb_counters *c = fb_sched_counters(worker);
	int i = 0;

#define FB_COUNTER(name, desc) v[i++] = fb_load_relaxed(&c->name);
#include "sched/counters.h"
#undef FB_COUNTER
}

/* A small buffered writer to an fd; the output is built in memory. */
struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf ? o->buf + o->len : NULL,
			      o->buf ? o->cap - o->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->failed = true;
			return;
		}
		if (o->buf && o->len + (size_t)n < o->cap) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = (o->cap + (size_t)n + 1) * 2;
		char *b = realloc(o->buf, cap);

		if (!b) {
			o->failed = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
}

/* The table fits in FB_STATS_COLUMNS columns. */
#define FB_STATS_COLUMNS 100

/* put_wrapped - put() that starts a new, indented line rather than go
 * past FB_STATS_COLUMNS. */
static void put_wrapped(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put_wrapped(struct out *o, const char *fmt, ...)
{
	char item[128];
	size_t col = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(item, sizeof(item), fmt, ap);
	va_end(ap);
	while (col < o->len && o->buf[o->len - 1 - col] != '\n')
		col++;
	if (col + strlen(item) > FB_STATS_COLUMNS)
		put(o, "\n%8s", "");
	put(o, "%s", item);
}

static void json_row(struct out *o, const uint64_t *v)
{
	for (size_t i = 0; i < NR_COUNTERS; i++)
		put(o, "%s\"%s\":%llu", i ? "," : "", names[i],
		    (unsigned long long)v[i]);
}

/*
 * level_rows - worker @w's balance attempts, pulls, ASYM_PACKING pulls and
 * NI_RANDOM skips per domain level of the current view, bottom up: JSON
 * "levels":[{"name":...},...] or a table line "SMT 12/0/0/3 LLC 5/1/0/0
 * ...".  The counters are owner-written words; relaxed reads are enough
 * for statistics.
 */
static void level_rows(struct out *o, int w, bool json)
{
	const struct fb_worker *wk = fb_runtime_worker(w);
	const struct fb_domain *d;
	struct fb_place_view v;
	bool first = true;

	fb_sched_view_enter(&v);
	if (json)
		put(o, ",\"levels\":[");
	for (d = v.topo ? v.topo->sd[w] : NULL; d; d = d->parent) {
		int l = FB_MIN(d->level, FB_BAL_LEVELS - 1);
		unsigned long long nr =
			__atomic_load_n(&wk->bal.nr_lb[l], __ATOMIC_RELAXED);
		unsigned long long got = __atomic_load_n(&wk->bal.nr_pulled[l],
							 __ATOMIC_RELAXED);
		unsigned long long asym =
			__atomic_load_n(&wk->bal.nr_asym[l], __ATOMIC_RELAXED);
		unsigned long long skip = __atomic_load_n(
			&wk->bal.nr_ni_skips[l], __ATOMIC_RELAXED);

		if (json)
			put(o,
			    "%s{\"name\":\"%s\",\"lb_balances\":%llu,"
			    "\"lb_pulled\":%llu,\"lb_asym_pulls\":%llu,"
			    "\"newidle_ni_skips\":%llu}",
			    first ? "" : ",", d->name, nr, got, asym, skip);
		else
			put_wrapped(o, " %s %llu/%llu/%llu/%llu", d->name, nr,
				    got, asym, skip);
		first = false;
	}
	if (json)
		put(o, "]");
	fb_sched_view_exit();
}

/* flush - write @o's text to @fd; a pipe or socket whose reader left
 * gives EPIPE, not SIGPIPE, also on a thread that is not a worker.
 * Return: 0; ENOMEM if it could not be built; write(2)'s errno. */
static int flush(const struct out *o, int fd)
{
	struct fb_nopipe np;
	int rc = 0;

	if (o->failed)
		return ENOMEM;
	fb_nopipe_begin(&np);
	for (size_t off = 0; off < o->len;) {
		ssize_t k = write(fd, o->buf + off, o->len - off);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			rc = errno;
			break;
		}
		off += (size_t)k;
	}
	fb_nopipe_end(&np);
	return rc;
}

/* The width of a counter's name, and of a value column. */
#define NAME_W 20
#define VALUE_W 11

/*
 * table - the counters transposed: one row per counter, one column per
 * worker, then the foreign row's and the total, in blocks of as many
 * columns as fit in FB_STATS_COLUMNS (6), so that any number of workers
 * stays readable on a terminal.
 */
static void table(struct out *o, int n)
{
	int per = (FB_STATS_COLUMNS - NAME_W) / (VALUE_W + 1), cols = n + 2;
	uint64_t(*v)[NR_COUNTERS] = calloc((size_t)cols, sizeof(*v));

	if (!v) {
		o->failed = true;
		return;
	}
	for (int c = 0; c < cols - 1; c++) {
		read_row(c < n ? c : -1, v[c]);
		for (size_t i = 0; i < NR_COUNTERS; i++)
			v[cols - 1][i] += v[c][i];
	}
	put(o, "libfiber statistics (%d workers, %s clock)\n", n,
	    fb_clock_name());
	for (int c0 = 0; c0 < cols; c0 += per) {
		int c1 = FB_MIN(cols, c0 + per);

		put(o, "%s%-*s", c0 ? "\n" : "", NAME_W, "counter");
		for (int c = c0; c < c1; c++) {
			char label[24];

			if (c < n)
				snprintf(label, sizeof(label), "worker %d", c);
			else
				snprintf(label, sizeof(label), "%s",
					 c == n ? "foreign" : "total");
			put(o, " %*s", VALUE_W, label);
		}
		put(o, "\n");
		for (size_t i = 0; i < NR_COUNTERS; i++) {
			put(o, "%-*s", NAME_W, names[i]);
			for (int c = c0; c < c1; c++)
				put(o, " %*llu", VALUE_W,
				    (unsigned long long)v[c][i]);
			put(o, "\n");
		}
	}
	free(v);
}

int fb_stats_print_now(int fd, int json)
{
	int n = fb_runtime_nr_workers();
	uint64_t v[NR_COUNTERS], tot[NR_COUNTERS] = { 0 };
	struct out o = { 0 };
	int rc = 0;

	if (!n)
		return ESRCH;
	if (json) {
		put(&o, "{\"clock\":\"%s\",\"workers\":[", fb_clock_name());
		for (int w = 0; w < n; w++) {
			read_row(w, v);
			put(&o, "%s{\"worker\":%d,", w ? "," : "", w);
			json_row(&o, v);
			level_rows(&o, w, true);
			put(&o, "}");
			for (size_t i = 0; i < NR_COUNTERS; i++)
				tot[i] += v[i];
		}
		read_row(-1, v);
		put(&o, "],\"foreign\":{");
		json_row(&o, v);
		for (size_t i = 0; i < NR_COUNTERS; i++)
			tot[i] += v[i];
		put(&o, "},\"total\":{");
		json_row(&o, tot);
		put(&o, "}}\n");
	} else {
		table(&o, n);
		put(&o, "balances/pulls per domain level, bottom up:\n");
		for (int w = 0; w < n; w++) {
			put(&o, "%-8d", w);
			level_rows(&o, w, false);
			put(&o, "\n");
		}
	}
	rc = flush(&o, fd);
	free(o.buf);
	return rc;
}

/*
 * The public calls may come from any thread, also while fiber_shutdown()
 * frees the runtime: a thread that is not a worker reads through the gate
 * (sched/sched.h), and finds no runtime once it is closed.
 */
static bool stats_enter(void)
{
	return fb_worker_self() || fb_rt_enter();
}

static void stats_leave(void)
{
	if (!fb_worker_self())
		fb_rt_leave();
}

/*
 * fiber_stats_print - write the statistics table (@json: one JSON object)
 * to @fd.  Context: any thread.
 * Return: 0; ESRCH if no runtime is running; ENOMEM; write(2)'s errno.
 */
int fiber_stats_print(int fd, int json)
{
	int rc;

	if (!stats_enter())
		return ESRCH;
	rc = fb_stats_print_now(fd, json);
	stats_leave();
	return rc;
}

static long long counter(const char *name, bool live);

/*
 * fiber_stats_counter - the runtime-wide sum of counter @name.
 * Context: any thread.  Return: the sum (0 with no runtime running); -1
 * for an unknown name.
 */
long long fiber_stats_counter(const char *name)
{
	long long v;

	if (!stats_enter())
		return counter(name, false);
	v = counter(name, true);
	stats_leave();
	return v;
}

/* counter - the sum of @name, read inside the gate if @live, else 0 (or
 * -1 for an unknown name). */
static long long counter(const char *name, bool live)
{
	int n = live ? fb_runtime_nr_workers() : 0;
	uint64_t v[NR_COUNTERS];
	long long sum = 0;
	size_t i;

	if (!name)
		return -1;
	for (i = 0; i < NR_COUNTERS; i++)
		if (!strcmp(names[i], name))
			break;
	if (i == NR_COUNTERS)
		return -1;
	if (!n)
		return 0;
	for (int w = -1; w < n; w++) {
		read_row(w, v);
		sum += (long long)v[i];
	}
	return sum;
}

/* fiber_stats_reset - zero every counter.  Context: any thread. */
void fiber_stats_reset(void)
{
	int n;

	if (!stats_enter())
		return;
	n = fb_runtime_nr_workers();
	for (int w = -1; w < n && n; w++) {
		struct fb_counters *c =
			(struct fb_counters *)fb_sched_counters(w);
#define FB_COUNTER(name, desc) fb_store_relaxed(&c->name, 0);
#include "sched/counters.h"
#undef FB_COUNTER
	}
	stats_leave();
}

/* ---- output options: the file, the interval lines, the exit ------------ */

int fb_stats_open(const struct fb_env *env)
{
	int fd;

	out_json = env->stats == FB_STATS_JSON;
	out_fd = 2;
	if (!env->stats_file)
		return 0;
	fd = fb_open_output("LIBFIBER_STATS_FILE", env->stats_file);
	if (fd < 0)
		return EINVAL;
	out_fd = fd;
	return 0;
}

void fb_stats_close(void)
{
	if (out_fd > 2)
		close(out_fd);
	out_fd = 2;
}

int fb_stats_print_out(void)
{
	return fb_stats_print_now(out_fd, out_json);
}

/* The counters an interval line shows the change of, and its state. */
static const char *const interval_names[] = {
	"switches", "wakeups", "parks", "steals", "timers_fired", "io_events",
};
static uint64_t interval_prev[FB_ARRAY_SIZE(interval_names)];
static uint64_t interval_t0, interval_nr;

/*
 * fb_stats_interval - one line of LIBFIBER_STATS_INTERVAL_MS, like the Go
 * runtime's GODEBUG=schedtrace: time since start, workers, idle workers,
 * live fibers, each worker's runnable fibers, the change of a few counters
 * since the last line and the stalls so far.  Context: the monitor
 * (sched/monitor.c), the runtime running.
 */
static void interval(void)
{
	int n = fb_runtime_nr_workers(), idle = 0;
	uint64_t now = fb_now_ns(), d[FB_ARRAY_SIZE(interval_names)];
	struct out o = { 0 };

	if (!interval_nr++)
		interval_t0 = now;
	for (size_t i = 0; i < FB_ARRAY_SIZE(interval_names); i++) {
		uint64_t v = (uint64_t)counter(interval_names[i], true);

		/* A counter below its last value was reset since
		 * (fiber_stats_reset): all of it is the change. */
		d[i] = v >= interval_prev[i] ? v - interval_prev[i] : v;
		interval_prev[i] = v;
	}
	for (int w = 0; w < n; w++)
		idle += fb_read_once(&fb_runtime_worker(w)->curr) == NULL;
	put(&o,
	    out_json ? "{\"t_ms\":%llu,\"workers\":%d,\"idle\":%d,"
		       "\"live\":%ld,\"runqueue\":[" :
		       "libfiber %llums: workers=%d idle=%d live=%ld "
		       "runqueue=[",
	    (unsigned long long)((now - interval_t0) / 1000000), n, idle,
	    fb_load_relaxed(&fb_rt->nr_live));
	for (int w = 0; w < n; w++)
		put(&o, "%s%d", w ? (out_json ? "," : " ") : "",
		    fb_load_relaxed(&fb_runtime_worker(w)->pw.nr_running));
	put(&o, "]");
	for (size_t i = 0; i < FB_ARRAY_SIZE(interval_names); i++)
		put(&o, out_json ? ",\"%s\":%llu" : " %s=+%llu",
		    interval_names[i], (unsigned long long)d[i]);
	put(&o, out_json ? ",\"stalls\":%lld}\n" : " stalls=%lld\n",
	    counter("stalls", true));
	flush(&o, out_fd);
	free(o.buf);
}

void (*fb_stats_interval_fn(void))(void)
{
	interval_nr = 0;
	memset(interval_prev, 0, sizeof(interval_prev));
	return interval;
}
