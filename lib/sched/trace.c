/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trace.c - LIBFIBER_TRACE=PATH: a Chrome trace (the JSON that
 * chrome://tracing and ui.perfetto.dev open) of which fiber ran on which
 * worker when, with an arrow from each wakeup to the run it caused.
 *
 * Each worker appends fixed-size events (a fiber starts running, the
 * worker goes idle, it wakes a fiber, it creates one) to a buffer of its
 * own, owner-written without atomics; foreign threads share one buffer
 * and take their slots with an atomic add.  A full buffer drops what
 * comes after (counted, and said in the file): the trace is for short
 * runs, and keeps their beginning.  The file is opened when the runtime
 * starts (api/runtime.c: a path that cannot be written is refused then,
 * not after the run) and written once per runtime, at fiber_shutdown()
 * or at exit, whichever comes first; the run intervals and the wakeup
 * arrows are matched up then, not while tracing.
 *
 * Cost: off, one predictable branch per switch and per wakeup
 * (fb_trace_on, sched/core.c); on, a clock read and a 40-byte store per
 * event, FB_TRACE_EVENTS * 40 bytes (2.5 MiB) per worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sched/sched.h"

/* Events per buffer.  Picked: 65536 events, a second or so of a busy
 * worker switching every 15 us, in 2.5 MiB. */
#define FB_TRACE_EVENTS 65536

enum { EV_RUN, EV_WAKE, EV_CREATE };

struct ev {
	uint64_t ts; /* scheduler clock */
	uint64_t id; /* the fiber (EV_RUN: 0 = the worker went idle) */
	int32_t type;
	int32_t arg; /* unused */
	char name[16];
};

struct fb_trace_buf {
	_Atomic uint32_t nr;   /* events stored; release by their writer */
	_Atomic uint32_t next; /* foreign buffer: slots taken */
	_Atomic uint64_t dropped;
	struct ev ev[FB_TRACE_EVENTS];
};

bool fb_trace_on;
static struct fb_trace_buf *foreign_buf;
static const char *trace_path;
static int trace_fd = -1;
static atomic_bool written;

static void put_owner(struct fb_trace_buf *b, const struct ev *e)
{
	uint32_t n = fb_load_relaxed(&b->nr);

	if (n == FB_TRACE_EVENTS) {
		fb_store_relaxed(&b->dropped, fb_load_relaxed(&b->dropped) + 1);
		return;
	}
	b->ev[n] = *e;
	fb_store_release(&b->nr, n + 1);
}

/* A foreign slot is published by nr only when every earlier one is:
 * the writer reads nr, and a slot taken but not yet filled is dropped
 * from the file rather than read half-written. */
static void put_foreign(const struct ev *e)
{
	struct fb_trace_buf *b = foreign_buf;
	uint32_t n = atomic_fetch_add(&b->next, 1), want = n;

	if (n >= FB_TRACE_EVENTS) {
		atomic_fetch_add(&b->dropped, 1);
		return;
	}
	b->ev[n] = *e;
	while (!atomic_compare_exchange_weak(&b->nr, &want, n + 1)) {
		want = n;
		fb_cpu_relax();
	}
}

void fb_trace_run_slow(struct fb_worker *w, const struct fb_fiber *f,
		       uint64_t now)
{
	struct ev e = { .ts = now, .id = f ? f->id : 0, .type = EV_RUN };

	if (w->trace)
		put_owner(w->trace, &e);
}

void fb_trace_wake_slow(struct fb_worker *this, const struct fb_fiber *f)
{
	struct ev e = { .ts = fb_sched_clock(),
			.id = f->id,
			.type = EV_WAKE,
			.arg = this ? this->id : -1 };

	if (this && this->trace)
		put_owner(this->trace, &e);
	else if (!this && foreign_buf)
		put_foreign(&e);
}

void fb_trace_create_slow(struct fb_worker *this, const struct fb_fiber *f)
{
	struct ev e = { .ts = fb_sched_clock(),
			.id = f->id,
			.type = EV_CREATE };

	memcpy(e.name, f->name, sizeof(e.name) - 1);
	if (this && this->trace)
		put_owner(this->trace, &e);
	else if (!this && foreign_buf)
		put_foreign(&e);
}

int fb_trace_start(struct fb_runtime *r)
{
	if (!r->params.trace_path)
		return 0;
	foreign_buf = fb_calloc(1, sizeof(*foreign_buf));
	if (!foreign_buf)
		return ENOMEM;
	for (int i = 0; i < r->nr_workers; i++) {
		r->workers[i]->trace =
			fb_calloc(1, sizeof(struct fb_trace_buf));
		if (!r->workers[i]->trace) {
			fb_trace_stop(r);
			return ENOMEM;
		}
	}
	trace_path = r->params.trace_path;
	trace_fd = r->params.trace_fd;
	fb_store_relaxed(&written, false);
	fb_trace_on = true;
	return 0;
}

void fb_trace_stop(struct fb_runtime *r)
{
	fb_trace_on = false;
	for (int i = 0; i < r->nr_workers; i++) {
		fb_free(r->workers[i]->trace);
		r->workers[i]->trace = NULL;
	}
	fb_free(foreign_buf);
	foreign_buf = NULL;
	trace_path = NULL;
	trace_fd = -1;
}

/* open_out - a stream of its own on the trace file, from the file's
 * start: a regular file may have been written since it was opened (by
 * the child of a fork() that traced to the same path), and the trace
 * written last is the one that stays, whole.  Anything else (a
 * terminal, a pipe, /dev/null) is written where it is.  Return: the
 * stream; NULL with errno. */
static FILE *open_out(void)
{
	int fd = fcntl(trace_fd, F_DUPFD_CLOEXEC, 0);
	struct stat st;
	FILE *out;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) ||
	    (S_ISREG(st.st_mode) &&
	     (lseek(fd, 0, SEEK_SET) < 0 || ftruncate(fd, 0)))) {
		int err = errno;

		close(fd);
		errno = err;
		return NULL;
	}
	out = fdopen(fd, "w");
	if (!out) {
		int err = errno;

		close(fd);
		errno = err;
	}
	return out;
}

/* ---- the file ------------------------------------------------------------ */

/* A run of fiber @id from @ts on @worker, for the wakeup arrows. */
struct run {
	uint64_t id, ts;
	int worker;
};

static int run_cmp(const void *a, const void *b)
{
	const struct run *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* first_run - the first run of @id at or after @ts, NULL if none. */
static const struct run *first_run(const struct run *r, size_t n, uint64_t id,
				   uint64_t ts)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].id < id || (r[mid].id == id && r[mid].ts < ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && r[lo].id == id ? &r[lo] : NULL;
}

/* A fiber created while tracing, and its name, for the run events. */
struct named {
	uint64_t id;
	const char *name;
};

static int named_cmp(const void *a, const void *b)
{
	const struct named *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* name_of - the name fiber @id was created with, "" if it was not
 * created while tracing; @names sorted by id. */
static const char *name_of(const struct named *names, size_t n, uint64_t id)
{
	struct named key = { id, NULL };
	const struct named *f =
		bsearch(&key, names, n, sizeof(*names), named_cmp);

	return f ? f->name : "";
}

static double us(uint64_t t, uint64_t t0)
{
	return t > t0 ? (double)(t - t0) / 1e3 : 0;
}

static void write_run(FILE *out, const struct named *names, size_t nr_names,
		      int worker, const struct ev *e, uint64_t stop,
		      uint64_t t0, bool *first)
{
	const char *name = name_of(names, nr_names, e->id);
	char esc[64];

	fb_escape(esc, sizeof(esc), name, strlen(name));
	fprintf(out,
		"%s{\"ph\":\"X\",\"name\":\"fiber %llu %s\",\"pid\":1,"
		"\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
		"\"args\":{\"fiber\":%llu}}",
		*first ? "" : ",\n", (unsigned long long)e->id, esc, worker,
		us(e->ts, t0), us(stop, e->ts), (unsigned long long)e->id);
	*first = false;
}

/* write_runs - the run intervals of @worker: each run of a fiber lasts
 * until the worker's next run event (another fiber, or idle), the last
 * one until @end.  One pass. */
static void write_runs(FILE *out, struct fb_trace_buf *b,
		       const struct named *names, size_t nr_names, int worker,
		       uint64_t t0, uint64_t end, bool *first)
{
	uint32_t n = fb_load_acquire(&b->nr);
	const struct ev *open = NULL;

	for (uint32_t i = 0; i < n; i++) {
		const struct ev *e = &b->ev[i];

		if (e->type != EV_RUN)
			continue;
		if (open)
			write_run(out, names, nr_names, worker, open, e->ts, t0,
				  first);
		open = e->id ? e : NULL;
	}
	if (open)
		write_run(out, names, nr_names, worker, open, end, t0, first);
}

void fb_trace_write(void)
{
	struct fb_runtime *r = fb_rt;
	struct fb_trace_buf *bufs[FIBER_WORKERS_MAX + 1];
	struct run *runs = NULL;
	struct named *names = NULL;
	size_t nr_runs = 0, nr_names = 0, cap = 0;
	uint64_t t0 = UINT64_MAX, end = fb_sched_clock(), dropped = 0, flow = 0;
	bool first = true;
	FILE *out;
	int nb;

	if (!r || !trace_path || fb_xchg_seqcst(&written, true))
		return;
	nb = r->nr_workers;
	for (int i = 0; i < nb; i++)
		bufs[i] = r->workers[i]->trace;
	bufs[nb] = foreign_buf;
	for (int b = 0; b <= nb; b++) {
		uint32_t n = fb_load_acquire(&bufs[b]->nr);

		dropped += fb_load_relaxed(&bufs[b]->dropped);
		cap += n;
		for (uint32_t i = 0; i < n; i++)
			t0 = FB_MIN(t0, bufs[b]->ev[i].ts);
	}
	runs = malloc((cap + 1) * sizeof(*runs));
	names = malloc((cap + 1) * sizeof(*names));
	out = open_out();
	if (!out || !runs || !names) {
		fprintf(stderr, "libfiber: LIBFIBER_TRACE=\"%s\": %s\n",
			trace_path, strerror(out ? ENOMEM : errno));
		goto out;
	}
	for (int b = 0; b < nb; b++) {
		uint32_t n = fb_load_acquire(&bufs[b]->nr);

		for (uint32_t i = 0; i < n && nr_runs < cap; i++)
			if (bufs[b]->ev[i].type == EV_RUN && bufs[b]->ev[i].id)
				runs[nr_runs++] =
					(struct run){ bufs[b]->ev[i].id,
						      bufs[b]->ev[i].ts, b };
	}
	qsort(runs, nr_runs, sizeof(*runs), run_cmp);
	for (int b = 0; b <= nb; b++) {
		uint32_t n = fb_load_acquire(&bufs[b]->nr);

		for (uint32_t i = 0; i < n && nr_names < cap; i++)
			if (bufs[b]->ev[i].type == EV_CREATE)
				names[nr_names++] =
					(struct named){ bufs[b]->ev[i].id,
							bufs[b]->ev[i].name };
	}
	qsort(names, nr_names, sizeof(*names), named_cmp);
	fprintf(out, "{\"traceEvents\":[\n");
	for (int w = 0; w < nb; w++) {
		fprintf(out,
			"%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,"
			"\"tid\":%d,\"args\":{\"name\":\"fiber-w%d\"}}",
			first ? "" : ",\n", w, w);
		first = false;
		write_runs(out, bufs[w], names, nr_names, w, t0, end, &first);
	}
	fprintf(out,
		",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,"
		"\"tid\":%d,\"args\":{\"name\":\"foreign threads\"}}",
		nb);
	for (int b = 0; b <= nb; b++) {
		uint32_t n = fb_load_acquire(&bufs[b]->nr);

		for (uint32_t i = 0; i < n; i++) {
			const struct ev *e = &bufs[b]->ev[i];
			const struct run *to;

			if (e->type != EV_WAKE)
				continue;
			to = first_run(runs, nr_runs, e->id, e->ts);
			if (!to)
				continue;
			flow++;
			fprintf(out,
				",\n{\"ph\":\"s\",\"id\":%llu,\"name\":\"wake\","
				"\"cat\":\"wake\",\"pid\":1,\"tid\":%d,"
				"\"ts\":%.3f}",
				(unsigned long long)flow, b, us(e->ts, t0));
			fprintf(out,
				",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,"
				"\"name\":\"wake\",\"cat\":\"wake\",\"pid\":1,"
				"\"tid\":%d,\"ts\":%.3f}",
				(unsigned long long)flow, to->worker,
				us(to->ts, t0));
		}
	}
	fprintf(out,
		"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"%s\","
		"\"dropped_events\":%llu}}\n",
		fb_clock_name(), (unsigned long long)dropped);
out:
	if (out)
		fclose(out);
	free(runs);
	free(names);
}
