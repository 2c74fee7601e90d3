/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/stats.c - the LIBFIBER_STATS output: one row per worker plus the foreign
 * threads' row and the total, as a table or as one JSON object
 * {"clock":...,"workers":[{"worker":0,...}],"foreign":{...},"total":{...}}
 * (clock: the scheduler clock, base/clock.h).  Counter names come from
 * lib/sched/counters.h and are stable.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "sched/sched.h"

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
			put(o, " %s %llu/%llu/%llu/%llu", d->name, nr, got,
			    asym, skip);
		first = false;
	}
	if (json)
		put(o, "]");
	fb_sched_view_exit();
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
		put(&o, "libfiber statistics (%d workers, %s clock)\n%-8s", n,
		    fb_clock_name(), "worker");
		for (size_t i = 0; i < NR_COUNTERS; i++)
			put(&o, " %*s", (int)FB_MAX(strlen(names[i]), 8),
			    names[i]);
		put(&o, "\n");
		for (int w = -1; w <= n; w++) {
			char label[16];

			if (w < n) {
				read_row(w, v);
				for (size_t i = 0; i < NR_COUNTERS; i++)
					tot[i] += v[i];
				snprintf(label, sizeof(label), "%d", w);
			} else {
				memcpy(v, tot, sizeof(v));
				snprintf(label, sizeof(label), "total");
			}
			put(&o, "%-8s", w < 0 ? "foreign" : label);
			for (size_t i = 0; i < NR_COUNTERS; i++)
				put(&o, " %*llu",
				    (int)FB_MAX(strlen(names[i]), 8),
				    (unsigned long long)v[i]);
			put(&o, "\n");
		}
		put(&o, "balances/pulls per domain level, bottom up:\n");
		for (int w = 0; w < n; w++) {
			put(&o, "%-8d", w);
			level_rows(&o, w, false);
			put(&o, "\n");
		}
	}
	if (o.failed) {
		rc = ENOMEM;
	} else {
		for (size_t off = 0; off < o.len;) {
			ssize_t k = write(fd, o.buf + off, o.len - off);

			if (k < 0) {
				if (errno == EINTR)
					continue;
				rc = errno;
				break;
			}
			off += (size_t)k;
		}
	}
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
