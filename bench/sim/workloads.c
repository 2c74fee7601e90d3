// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * workloads.c - fiber-sim's workloads, as fiber state machines over the
 * objects of objects.c (doc/simulator.md 4).  Each mirrors the benchmark
 * program of bench/ that has its name where there is one, so that a
 * simulated run and a run of the program differ only in who schedules:
 *
 *   hackbench  bench/hackbench.c: G groups of F receivers and F senders;
 *              every sender writes L messages of D bytes to each receiver
 *              of its group over fiber pipes of P bytes; all members
 *              pass a start barrier first.  Result: seconds.
 *   schbench   bench/schbench.c: M message fibers, T workers each; a
 *              message stamps and wakes its workers (semaphores), then
 *              waits until all reported back; a worker sleeps S us,
 *              thinks C us of busy work, reports.  Result: p99 wakeup
 *              latency.
 *   ebizzy     bench/balance-evidence.c asym: N fibers each searching a
 *              record (R us of work) and yielding, forever.  Result:
 *              records per second.
 *   exec       stress-ng --exec's pattern: N parents each create a child
 *              (which works X us and exits) and join it, in a loop, with
 *              or without an affinity mask (taskset -c 0-(n-2), as in the
 *              H4 mail).  Result: create-to-first-run latency.
 *   pingpong   bench/pipe-pingpong.c: P pairs bounce a 4-byte token
 *              through two pipes, pinned as its split or same placement
 *              or unpinned (its free one).  Result: ns per round trip.
 *   tbench     tbench-like request/response: C clients, C servers; a
 *              client writes a Q-byte request and reads an A-byte answer,
 *              the server reads, works W us, answers.  Result: MB/s.
 *
 * Creation is by a foreign thread at time 0 (the benchmarks' main), so
 * foreign creations are placed from the round-robin worker.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ---- parameters -------------------------------------------------------------- */

static const char *find_key(const char *params, const char *key, size_t *vlen)
{
	size_t kl = strlen(key);
	const char *p = params;

	while (p && *p) {
		const char *end = strchr(p, ','), *eq = strchr(p, '=');

		if (!end)
			end = p + strlen(p);
		if (eq && eq < end && (size_t)(eq - p) == kl &&
		    !strncmp(p, key, kl)) {
			*vlen = (size_t)(end - eq - 1);
			return eq + 1;
		}
		p = *end ? end + 1 : end;
	}
	return NULL;
}

double sim_param(const char *params, const char *key, double def)
{
	size_t n;
	const char *v = find_key(params, key, &n);

	return v ? strtod(v, NULL) : def;
}

int sim_params_check(const char *params, const char *const *known, char *err,
		     size_t errlen)
{
	const char *p = params;

	while (p && *p) {
		const char *end = strchr(p, ','), *eq = strchr(p, '=');
		bool ok = false;
		char *stop;
		double v;

		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end) {
			snprintf(err, errlen,
				 "workload parameter \"%.*s\" is "
				 "not key=value",
				 (int)(end - p), p);
			return -1;
		}
		for (int i = 0; known[i]; i++)
			if (strlen(known[i]) == (size_t)(eq - p) &&
			    !strncmp(known[i], p, (size_t)(eq - p)))
				ok = true;
		v = strtod(eq + 1, &stop);
		if (!ok || stop != end || eq + 1 == end) {
			snprintf(err, errlen,
				 "bad workload parameter \"%.*s\" (see --help)",
				 (int)(end - p), p);
			return -1;
		}
		if (!(v >= 0 && v <= SIM_PARAM_MAX)) {
			snprintf(err, errlen,
				 "workload parameter \"%.*s\": a number from 0 "
				 "to %.0g",
				 (int)(end - p), p, SIM_PARAM_MAX);
			return -1;
		}
		/* find_key() reads the first: a second would be ignored */
		if (*end) {
			char key[64];
			size_t n;

			snprintf(key, sizeof(key), "%.*s", (int)(eq - p), p);
			if (find_key(end + 1, key, &n)) {
				snprintf(err, errlen,
					 "workload parameter \"%s\" given "
					 "twice in \"%s\"; expected each key "
					 "once",
					 key, params);
				return -1;
			}
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* fibers_ok - 0 when @n fibers fit one run (SIM_MAX_FIBERS), else -1 and
 * the reason in @err. */
static int fibers_ok(double n, const char *wl, char *err, size_t errlen)
{
	if (n <= SIM_MAX_FIBERS)
		return 0;
	snprintf(err, errlen, "%s: %.0f fibers, more than the %d one run holds",
		 wl, n, SIM_MAX_FIBERS);
	return -1;
}

/*
 * warmup_of - the warm-up fraction of @params (@def when not given) in
 * *@w: 0, or -1 and the reason in @err when it is not below @max (1, or
 * less where the workload's load stops before the run's end): the
 * measured part of the run would be empty, and the result 0 or null.
 */
static int warmup_of(const char *params, double def, double max, const char *wl,
		     char *err, size_t errlen, double *w)
{
	*w = sim_param(params, "warmup", def);
	if (*w < max)
		return 0;
	snprintf(err, errlen,
		 "%s: warmup=%g: expected a fraction of the run from 0 to "
		 "below %g%s",
		 wl, *w, max, max < 1 ? ", where its messages stop" : "");
	return -1;
}

/* params_of - what follows "name:" in --workload. */
static const char *params_of(const char *spec)
{
	const char *c = strchr(spec, ':');

	return c ? c + 1 : "";
}

#define US(x) ((x)*1000.0)

/* ---- hackbench ----------------------------------------------------------------- */

struct hackbench {
	unsigned groups, fds;
	uint64_t loops, datasize;
	struct sim_pipe *pipe; /* [group * fds + receiver] */
	struct sim_barrier gate;
	uint64_t start, end;
	unsigned nr_done, nr_receivers;
	double msg_ns;
};

enum { HB_RECEIVER, HB_SENDER };

static enum sim_act hb_step(struct sim *s, struct sim_fiber *f)
{
	struct hackbench *h = s->wl_state;
	uint64_t got, t;

	switch (f->pc) {
	case 0: /* the start gate */
		if (!sim_barrier_wait(s, f, &h->gate))
			return SIM_BLOCK;
		t = sim_time(s);
		if (!h->start || t < h->start)
			h->start = t;
		f->pc = 1;
		f->a = 0; /* messages sent, or bytes received */
		if (f->kind == HB_SENDER)
			f->b = 0; /* the receiver it writes to next */
		f->d = (long)h->datasize;
		__attribute__((fallthrough));
	case 1:
		/* One pipe operation per step, each followed by its own
		 * event (SIM_COMPUTE), so that what it does is seen when it
		 * happens. */
		if (f->kind == HB_SENDER) {
			uint64_t left = (uint64_t)f->d;

			if ((uint64_t)f->a == h->loops * h->fds)
				return SIM_EXIT;
			if (!sim_pipe_write(s, f,
					    &h->pipe[f->c * h->fds +
						     (unsigned long)f->b],
					    &left)) {
				f->d = (long)left;
				return SIM_BLOCK;
			}
			f->a++;
			f->b = (f->b + 1) % h->fds;
			f->d = (long)h->datasize;
			f->work = h->msg_ns;
			return SIM_COMPUTE;
		}
		if ((uint64_t)f->a < h->loops * h->fds * h->datasize) {
			struct sim_pipe *p =
				&h->pipe[f->c * h->fds + (unsigned long)f->b];

			if (!sim_pipe_read(s, f, p, h->datasize, &got))
				return SIM_BLOCK;
			f->a += (long)got;
			f->work = 0;
			return SIM_COMPUTE;
		}
		t = sim_time(s);
		if (t > h->end)
			h->end = t;
		if (++h->nr_done == h->nr_receivers)
			sim_finish(s);
		return SIM_EXIT;
	}
	return SIM_EXIT;
}

static const char *const hb_keys[] = { "groups", "fds", "loops",  "datasize",
				       "pipe",	 "ws",	"msg_ns", NULL };

static int hb_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	const char *p = params_of(spec);
	struct hackbench *h;
	unsigned nr;

	if (sim_params_check(p, hb_keys, err, errlen) ||
	    fibers_ok(2 * sim_param(p, "groups", 10) * sim_param(p, "fds", 20),
		      "hackbench", err, errlen))
		return -1;
	h = calloc(1, sizeof(*h));
	s->wl_state = h;
	h->groups = (unsigned)sim_param(p, "groups", 10);
	h->fds = (unsigned)sim_param(p, "fds", 20);
	h->loops = (uint64_t)sim_param(p, "loops", 100);
	h->datasize = (uint64_t)sim_param(p, "datasize", 100);
	h->msg_ns = sim_param(p, "msg_ns", 0);
	if (!h->groups || !h->fds || !h->loops || !h->datasize) {
		snprintf(err, errlen,
			 "hackbench: groups, fds, loops and "
			 "datasize must be positive");
		return -1;
	}
	/* A pipe of no bytes takes no message: every fiber would block. */
	if (sim_param(p, "pipe", 65536) < 1) {
		snprintf(err, errlen,
			 "hackbench: pipe=%g: the pipe holds at least 1 byte",
			 sim_param(p, "pipe", 65536));
		return -1;
	}
	nr = 2 * h->groups * h->fds;
	h->nr_receivers = h->groups * h->fds;
	h->pipe = calloc(h->nr_receivers, sizeof(*h->pipe));
	for (unsigned i = 0; i < h->nr_receivers; i++)
		sim_pipe_init(&h->pipe[i],
			      (uint64_t)sim_param(p, "pipe", 65536));
	sim_barrier_init(&h->gate, nr);
	for (unsigned i = 0; i < nr; i++) {
		int kind = i < nr / 2 ? HB_RECEIVER : HB_SENDER;
		struct sim_fiber *f = sim_create(s, NULL, hb_step, kind, NULL);

		f->detached = true;
		f->c = (long)((i % (nr / 2)) / h->fds); /* group */
		if (kind == HB_RECEIVER)
			f->b = (long)(i % h->fds);
		f->ws_kb = sim_param(p, "ws", 16);
	}
	return 0;
}

/* per_sec - @n over @secs, or NAN (null, n/a) for a window of no time: a
 * rate measured over nothing is not 0. */
static double per_sec(double n, double secs)
{
	return secs > 0 ? n / secs : NAN;
}

/* since - the seconds from @from to @to, 0 where @to is not later. */
static double since(uint64_t from, uint64_t to)
{
	return to > from ? (double)(to - from) / 1e9 : 0;
}

static void hb_result(struct sim *s, struct sim_result *r)
{
	struct hackbench *h = s->wl_state;
	double secs = h->end > h->start ? (h->end - h->start) / 1e9 : 0;
	double msgs = (double)h->groups * h->fds * h->fds * h->loops;

	r->metric = "seconds";
	r->unit = "s";
	r->value = h->nr_done == h->nr_receivers ? secs : NAN;
	r->lower_is_better = true;
	r->nr_extra = 2;
	r->extra_name[0] = "messages";
	r->extra[0] = msgs;
	r->extra_name[1] = "messages_per_sec";
	r->extra[1] = per_sec(msgs, secs);
}

static void hb_cleanup(struct sim *s)
{
	struct hackbench *h = s->wl_state;

	if (h)
		free(h->pipe);
	free(h);
	s->wl_state = NULL;
}

/* ---- schbench ------------------------------------------------------------------- */

struct schbench {
	unsigned messages, per;
	double think_ns, sleep_ns;
	uint64_t measure_ns, deadline;
	struct sim_sem *wake; /* per worker */
	struct sim_sem *done; /* per message */
	uint64_t *stamp;      /* per worker */
	struct sim_hist lat, req;
	uint64_t requests;
	unsigned nr_stopped;
};

enum { SB_MESSAGE, SB_WORKER };

static enum sim_act sb_message(struct sim *s, struct sim_fiber *f)
{
	struct schbench *b = s->wl_state;
	unsigned m = (unsigned)f->c;

	for (;;) {
		switch (f->pc) {
		case 0: /* wake every worker */
			if (sim_time(s) >= b->deadline) {
				for (unsigned i = 0; i < b->per; i++) {
					b->stamp[m * b->per + i] = UINT64_MAX;
					sim_sem_post(s, f,
						     &b->wake[m * b->per + i]);
				}
				if (++b->nr_stopped == b->messages)
					sim_finish(s);
				return SIM_EXIT;
			}
			f->pc = 2;
			f->a = 0;
			__attribute__((fallthrough));
		case 2: /* one post per step */
			if ((unsigned long)f->a < b->per) {
				unsigned k = m * b->per + (unsigned)f->a;

				b->stamp[k] = sim_time(s);
				sim_sem_post(s, f, &b->wake[k]);
				f->a++;
				f->work = 0;
				return SIM_COMPUTE;
			}
			f->pc = 1;
			f->a = 0;
			__attribute__((fallthrough));
		case 1: /* wait for all of them */
			while ((unsigned long)f->a < b->per) {
				if (!sim_sem_wait(s, f, &b->done[m]))
					return SIM_BLOCK;
				f->a++;
			}
			f->pc = 0;
			break;
		}
	}
}

static enum sim_act sb_worker(struct sim *s, struct sim_fiber *f)
{
	struct schbench *b = s->wl_state;
	unsigned m = (unsigned)f->c, i = (unsigned)f->b;
	uint64_t st;

	switch (f->pc) {
	case 0:
		if (!sim_sem_wait(s, f, &b->wake[m * b->per + i]))
			return SIM_BLOCK;
		st = b->stamp[m * b->per + i];
		if (st == UINT64_MAX)
			return SIM_EXIT;
		f->t0 = sim_time(s);
		if (st >= b->measure_ns)
			sim_hist_add(&b->lat, f->t0 - st);
		f->d = st >= b->measure_ns;
		if (b->sleep_ns > 0) {
			f->pc = 1;
			f->work = b->sleep_ns;
			return SIM_SLEEP;
		}
		__attribute__((fallthrough));
	case 1:
		f->pc = 2;
		f->work = b->think_ns;
		return SIM_COMPUTE;
	case 2:
		if (f->d) {
			sim_hist_add(&b->req, sim_time(s) - f->t0);
			b->requests++;
		}
		sim_sem_post(s, f, &b->done[m]);
		f->pc = 0;
		return sb_worker(s, f);
	}
	return SIM_EXIT;
}

static const char *const sb_keys[] = { "m",	 "t",  "think", "sleep",
				       "warmup", "ws", NULL };

static int sb_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	const char *p = params_of(spec);
	struct schbench *b;
	uint64_t run = s->o.duration_ns ? s->o.duration_ns : SIM_S;
	double warmup;
	unsigned nr;

	if (sim_params_check(p, sb_keys, err, errlen) ||
	    fibers_ok(sim_param(p, "m", 2) * (sim_param(p, "t", 8) + 1),
		      "schbench", err, errlen))
		return -1;
	b = calloc(1, sizeof(*b));
	s->wl_state = b;
	b->messages = (unsigned)sim_param(p, "m", 2);
	b->per = (unsigned)sim_param(p, "t", 8);
	b->think_ns = US(sim_param(p, "think", 10));
	b->sleep_ns = US(sim_param(p, "sleep", 0));
	if (!b->messages || !b->per) {
		snprintf(err, errlen, "schbench: m and t must be positive");
		return -1;
	}
	/* the messages stop a little before --duration-ms, so that the
	 * run ends by itself and every worker reports: the warm-up ends
	 * before that */
	if (warmup_of(p, 0.1, 0.95, "schbench", err, errlen, &warmup))
		return -1;
	b->measure_ns = (uint64_t)(warmup * (double)run);
	b->deadline = run - run / 20;
	nr = b->messages * b->per;
	b->wake = calloc(nr, sizeof(*b->wake));
	b->done = calloc(b->messages, sizeof(*b->done));
	b->stamp = calloc(nr, sizeof(*b->stamp));
	b->lat.b = calloc(SIM_HIST_BUCKETS, sizeof(uint32_t));
	b->req.b = calloc(SIM_HIST_BUCKETS, sizeof(uint32_t));
	b->lat.min = b->req.min = UINT64_MAX;
	for (unsigned i = 0; i < nr; i++)
		sim_sem_init(&b->wake[i], 0);
	for (unsigned m = 0; m < b->messages; m++) {
		struct sim_fiber *f;

		sim_sem_init(&b->done[m], 0);
		f = sim_create(s, NULL, sb_message, SB_MESSAGE, NULL);
		f->detached = true;
		f->c = m;
		f->ws_kb = sim_param(p, "ws", 16);
		for (unsigned i = 0; i < b->per; i++) {
			f = sim_create(s, NULL, sb_worker, SB_WORKER, NULL);
			f->detached = true;
			f->c = m;
			f->b = i;
			f->ws_kb = sim_param(p, "ws", 16);
		}
	}
	return 0;
}

static void sb_result(struct sim *s, struct sim_result *r)
{
	struct schbench *b = s->wl_state;
	uint64_t run = s->o.duration_ns ? s->o.duration_ns : SIM_S;
	double window = since(b->measure_ns, b->deadline);

	(void)run;
	r->metric = "p99_wakeup_us";
	r->unit = "us";
	r->value = sim_hist_pct(&b->lat, 99) / 1e3;
	r->lower_is_better = true;
	r->nr_extra = 7;
	r->extra_name[0] = "p50_wakeup_us";
	r->extra[0] = sim_hist_pct(&b->lat, 50) / 1e3;
	r->extra_name[1] = "p90_wakeup_us";
	r->extra[1] = sim_hist_pct(&b->lat, 90) / 1e3;
	r->extra_name[2] = "p99.9_wakeup_us";
	r->extra[2] = sim_hist_pct(&b->lat, 99.9) / 1e3;
	r->extra_name[3] = "p99_request_us";
	r->extra[3] = sim_hist_pct(&b->req, 99) / 1e3;
	r->extra_name[4] = "requests_per_sec";
	r->extra[4] = per_sec((double)b->requests, window);
	/* the samples behind the percentiles: 0 says why they are null */
	r->extra_name[5] = "wakeup_samples";
	r->extra[5] = (double)b->lat.n;
	r->extra_name[6] = "request_samples";
	r->extra[6] = (double)b->req.n;
}

static void sb_cleanup(struct sim *s)
{
	struct schbench *b = s->wl_state;

	if (b) {
		free(b->wake);
		free(b->done);
		free(b->stamp);
		sim_hist_free(&b->lat);
		sim_hist_free(&b->req);
	}
	free(b);
	s->wl_state = NULL;
}

/* ---- ebizzy --------------------------------------------------------------------- */

struct ebizzy {
	unsigned threads;
	double record_ns;
	uint64_t records, measure_ns;
};

static enum sim_act eb_step(struct sim *s, struct sim_fiber *f)
{
	struct ebizzy *e = s->wl_state;

	if (f->a) { /* started where first= put it: now free to move */
		CPU_FREE(f->pf.allowed);
		f->pf.allowed = NULL;
		f->pf.nr_allowed = 0;
		f->pf.custom_affinity = false;
		f->pf.pin = -1;
		f->a = 0;
	}
	if (f->pc == 1) {
		if (sim_time(s) >= e->measure_ns)
			e->records++;
		f->pc = 0;
		return SIM_YIELD;
	}
	f->pc = 1;
	f->work = e->record_ns;
	return SIM_COMPUTE;
}

static const char *const eb_keys[] = { "threads", "record", "warmup",
				       "ws",	  "first",  NULL };

static int eb_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	const char *p = params_of(spec);
	uint64_t run = s->o.duration_ns ? s->o.duration_ns : SIM_S;
	struct ebizzy *e;
	double warmup;
	int first;

	if (sim_params_check(p, eb_keys, err, errlen))
		return -1;
	if (!s->o.duration_ns) {
		snprintf(err, errlen, "ebizzy runs until --duration-ms");
		return -1;
	}
	if (fibers_ok(sim_param(p, "threads", (double)s->n), "ebizzy", err,
		      errlen))
		return -1;
	if (sim_param(p, "first", -1) >= s->n) {
		snprintf(err, errlen, "ebizzy: first=K wants K < %d", s->n);
		return -1;
	}
	e = calloc(1, sizeof(*e));
	s->wl_state = e;
	e->threads = (unsigned)sim_param(p, "threads", (double)s->n);
	if (!e->threads) {
		snprintf(err, errlen,
			 "ebizzy: threads=%g: expected at least 1 fiber",
			 sim_param(p, "threads", (double)s->n));
		return -1;
	}
	e->record_ns = US(sim_param(p, "record", 20));
	/* A record of no work: its fibers would yield at one instant for
	 * ever, and the duration never come. */
	if (!(e->record_ns > 0)) {
		snprintf(err, errlen,
			 "ebizzy: record=%g: a record is more than 0 us",
			 sim_param(p, "record", 20));
		return -1;
	}
	if (warmup_of(p, 0.2, 1, "ebizzy", err, errlen, &warmup))
		return -1;
	e->measure_ns = (uint64_t)(warmup * (double)run);
	/* first=K: start the fibers on workers K.. (the balance-evidence
	 * arrangement: "started on the highest workers"); -1: placement */
	first = (int)sim_param(p, "first", -1);
	for (unsigned i = 0; i < e->threads; i++) {
		cpu_set_t *m = NULL;
		struct sim_fiber *f;

		if (first >= 0)
			m = sim_mask_range((first + (int)i) % s->n,
					   (first + (int)i) % s->n);
		f = sim_create(s, NULL, eb_step, 0, m);
		f->detached = true;
		f->ws_kb = sim_param(p, "ws", 64);
		f->a = first >= 0; /* released at its first run */
	}
	return 0;
}

static void eb_result(struct sim *s, struct sim_result *r)
{
	struct ebizzy *e = s->wl_state;
	double secs = since(e->measure_ns, s->end_ns);

	r->metric = "records_per_sec";
	r->unit = "1/s";
	r->value = per_sec((double)e->records, secs);
	r->lower_is_better = false;
}

static void eb_cleanup(struct sim *s)
{
	free(s->wl_state);
	s->wl_state = NULL;
}

/* ---- exec storm ------------------------------------------------------------------- */

struct execst {
	unsigned workers;
	double work_ns;
	bool affine;
	int hi;	    /* mask 0..hi when affine */
	int stride; /* mask 0, stride, 2*stride... when > 0 */
	struct sim_hist create_lat;
	uint64_t execs, measure_ns;
};

enum { EX_PARENT, EX_CHILD };

static enum sim_act ex_child(struct sim *s, struct sim_fiber *f)
{
	struct execst *x = s->wl_state;

	if (f->pc == 0) {
		if (sim_time(s) >= x->measure_ns)
			sim_hist_add(&x->create_lat, sim_time(s) - f->t0);
		f->pc = 1;
		f->work = x->work_ns;
		return SIM_COMPUTE;
	}
	return SIM_EXIT;
}

/* ex_mask - the mask of a parent or child: NULL (unaffined), 0..hi
 * (taskset -c 0-(n-2)), or every stride-th worker (numactl -C 0,K,2K...). */
static cpu_set_t *ex_mask(struct sim *s, const struct execst *x)
{
	cpu_set_t *m;

	if (!x->affine)
		return NULL;
	if (x->stride <= 0)
		return sim_mask_range(0, x->hi);
	m = sim_mask_range(0, 0);
	for (int i = 0; i < s->n; i += x->stride)
		CPU_SET_S((size_t)i, CPU_ALLOC_SIZE(SIM_MAX_WORKERS), m);
	return m;
}

static enum sim_act ex_parent(struct sim *s, struct sim_fiber *f)
{
	struct execst *x = s->wl_state;
	struct sim_fiber *c;

	for (;;) {
		switch (f->pc) {
		case 0:
			c = sim_create(s, f, ex_child, EX_CHILD, ex_mask(s, x));
			c->t0 = c->wake_ns;
			c->ws_kb = 0;
			f->a = c->id;
			f->pc = 1;
			__attribute__((fallthrough));
		case 1:
			c = sim_fiber(s, (int)f->a);
			if (!sim_join(s, f, c))
				return SIM_BLOCK;
			c->detached = true;
			if (sim_time(s) >= x->measure_ns)
				x->execs++;
			sim_fiber_release(s, c);
			f->pc = 0;
			/* the parent's own work between two execs */
			f->work = 1000;
			return SIM_COMPUTE;
		}
	}
}

static const char *const ex_keys[] = { "workers", "work",   "affine",
				       "stride",  "warmup", NULL };

static int ex_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	const char *p = params_of(spec);
	uint64_t run = s->o.duration_ns ? s->o.duration_ns : SIM_S;
	struct execst *x;
	double stride, warmup;

	if (sim_params_check(p, ex_keys, err, errlen))
		return -1;
	if (!s->o.duration_ns) {
		snprintf(err, errlen, "exec runs until --duration-ms");
		return -1;
	}
	if (fibers_ok(2 * sim_param(p, "workers", 8), "exec", err, errlen))
		return -1;
	x = calloc(1, sizeof(*x));
	s->wl_state = x;
	x->workers = (unsigned)sim_param(p, "workers", 8);
	if (!x->workers) {
		snprintf(err, errlen,
			 "exec: workers=%g: expected at least 1 parent",
			 sim_param(p, "workers", 8));
		return -1;
	}
	x->work_ns = US(sim_param(p, "work", 50));
	x->affine = sim_param(p, "affine", 0) != 0;
	x->hi = s->n - 2 > 0 ? s->n - 2 : 0;
	stride = sim_param(p, "stride", 0);
	if (!(stride >= 0 && stride < s->n) || (stride >= 1 && !x->affine)) {
		snprintf(err, errlen,
			 "exec: stride=K wants affine=1 and 0 < K < %d", s->n);
		return -1;
	}
	x->stride = (int)stride;
	if (warmup_of(p, 0.1, 1, "exec", err, errlen, &warmup))
		return -1;
	x->measure_ns = (uint64_t)(warmup * (double)run);
	x->create_lat.b = calloc(SIM_HIST_BUCKETS, sizeof(uint32_t));
	x->create_lat.min = UINT64_MAX;
	for (unsigned i = 0; i < x->workers; i++) {
		struct sim_fiber *f = sim_create(s, NULL, ex_parent, EX_PARENT,
						 ex_mask(s, x));

		f->detached = true;
		f->ws_kb = 4;
	}
	return 0;
}

static void ex_result(struct sim *s, struct sim_result *r)
{
	struct execst *x = s->wl_state;
	double secs = since(x->measure_ns, s->end_ns);

	r->metric = "mean_create_to_run_ns";
	r->unit = "ns";
	r->value = sim_hist_mean(&x->create_lat);
	r->lower_is_better = true;
	r->nr_extra = 4;
	r->extra_name[0] = "p99_create_to_run_ns";
	r->extra[0] = sim_hist_pct(&x->create_lat, 99);
	r->extra_name[1] = "execs_per_sec";
	r->extra[1] = per_sec((double)x->execs, secs);
	r->extra_name[2] = "p50_create_to_run_ns";
	r->extra[2] = sim_hist_pct(&x->create_lat, 50);
	r->extra_name[3] = "create_samples";
	r->extra[3] = (double)x->create_lat.n;
}

static void ex_cleanup(struct sim *s)
{
	struct execst *x = s->wl_state;

	if (x)
		sim_hist_free(&x->create_lat);
	free(x);
	s->wl_state = NULL;
}

/* ---- pipe ping-pong ---------------------------------------------------------------- */

struct pingpong {
	unsigned pairs;
	uint64_t loops, warmup;
	struct sim_pipe *to_pong, *to_ping;
	uint64_t start, end;
	unsigned nr_done;
	struct sim_hist rtt;
};

enum { PP_PING, PP_PONG };

static enum sim_act pp_step(struct sim *s, struct sim_fiber *f)
{
	struct pingpong *pp = s->wl_state;
	unsigned i = (unsigned)f->c;
	uint64_t left, got;

	for (;;) {
		switch (f->pc) {
		case 0: /* ping: send */
			if (f->kind == PP_PONG) {
				f->pc = 10;
				break;
			}
			if ((uint64_t)f->a == pp->warmup) {
				uint64_t t = sim_time(s);

				if (!pp->start || t < pp->start)
					pp->start = t;
			}
			if ((uint64_t)f->a == pp->warmup + pp->loops) {
				uint64_t t = sim_time(s);

				if (t > pp->end)
					pp->end = t;
				if (++pp->nr_done == pp->pairs)
					sim_finish(s);
				return SIM_EXIT;
			}
			f->t0 = sim_time(s);
			left = 4;
			if (!sim_pipe_write(s, f, &pp->to_pong[i], &left))
				return SIM_BLOCK; /* 4 bytes always fit */
			f->pc = 1;
			f->work = 0;
			return SIM_COMPUTE;
		case 1: /* ping: wait for the echo */
			if (!sim_pipe_read(s, f, &pp->to_ping[i], 4, &got))
				return SIM_BLOCK;
			if ((uint64_t)f->a >= pp->warmup)
				sim_hist_add(&pp->rtt, sim_time(s) - f->t0);
			f->a++;
			f->pc = 0;
			break;
		case 10: /* pong: echo */
			if (!sim_pipe_read(s, f, &pp->to_pong[i], 4, &got))
				return SIM_BLOCK;
			f->pc = 11;
			f->work = 0;
			return SIM_COMPUTE;
		case 11:
			left = 4;
			sim_pipe_write(s, f, &pp->to_ping[i], &left);
			f->pc = 10;
			f->work = 0;
			return SIM_COMPUTE;
		}
	}
}

static const char *const pp_keys[] = { "pairs", "loops", "pin", "same", NULL };

static int pp_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	const char *p = params_of(spec);
	struct pingpong *pp;
	bool pin, same;

	if (sim_params_check(p, pp_keys, err, errlen) ||
	    fibers_ok(2 * sim_param(p, "pairs", 1), "pingpong", err, errlen))
		return -1;
	pp = calloc(1, sizeof(*pp));
	s->wl_state = pp;
	pp->pairs = (unsigned)sim_param(p, "pairs", 1);
	pp->loops = (uint64_t)sim_param(p, "loops", 10000);
	pp->warmup = pp->loops / 100 ? pp->loops / 100 : 1;
	pin = sim_param(p, "pin", 1) != 0;
	same = sim_param(p, "same", 0) != 0;
	if (!pp->pairs || !pp->loops) {
		snprintf(err, errlen,
			 "pingpong: pairs and loops must be "
			 "positive");
		return -1;
	}
	pp->to_pong = calloc(pp->pairs, sizeof(*pp->to_pong));
	pp->to_ping = calloc(pp->pairs, sizeof(*pp->to_ping));
	pp->rtt.b = calloc(SIM_HIST_BUCKETS, sizeof(uint32_t));
	pp->rtt.min = UINT64_MAX;
	for (unsigned i = 0; i < pp->pairs; i++) {
		/* bench/pipe-pingpong.c's split placement: ping on i % N,
		 * pong on (i + 1) % N (same with one worker, or with
		 * same=1: its same placement) */
		int a = (int)(i % (unsigned)s->n);
		int b = s->n > 1 && !same ? (int)((i + 1) % (unsigned)s->n) : a;
		struct sim_fiber *f;

		sim_pipe_init(&pp->to_pong[i], 65536);
		sim_pipe_init(&pp->to_ping[i], 65536);
		f = sim_create(s, NULL, pp_step, PP_PONG,
			       pin ? sim_mask_range(b, b) : NULL);
		f->detached = true;
		f->c = i;
		f->ws_kb = 4;
		f = sim_create(s, NULL, pp_step, PP_PING,
			       pin ? sim_mask_range(a, a) : NULL);
		f->detached = true;
		f->c = i;
		f->ws_kb = 4;
	}
	return 0;
}

static void pp_result(struct sim *s, struct sim_result *r)
{
	struct pingpong *pp = s->wl_state;
	double ns = pp->end > pp->start ? (double)(pp->end - pp->start) : 0;

	(void)s;
	r->metric = "ns_per_roundtrip";
	r->unit = "ns";
	r->value = pp->nr_done == pp->pairs ? ns / (double)pp->loops : NAN;
	r->lower_is_better = true;
	r->nr_extra = 4;
	r->extra_name[0] = "roundtrips_per_sec";
	r->extra[0] = per_sec((double)pp->loops * pp->pairs, ns / 1e9);
	r->extra_name[1] = "p50_ns";
	r->extra[1] = sim_hist_pct(&pp->rtt, 50);
	r->extra_name[2] = "p99_ns";
	r->extra[2] = sim_hist_pct(&pp->rtt, 99);
	r->extra_name[3] = "roundtrip_samples";
	r->extra[3] = (double)pp->rtt.n;
}

static void pp_cleanup(struct sim *s)
{
	struct pingpong *pp = s->wl_state;

	if (pp) {
		free(pp->to_pong);
		free(pp->to_ping);
		sim_hist_free(&pp->rtt);
	}
	free(pp);
	s->wl_state = NULL;
}

/* ---- tbench ------------------------------------------------------------------------ */

struct tbench {
	unsigned clients;
	uint64_t req, resp;
	double server_ns, client_ns;
	struct sim_pipe *up, *down;
	uint64_t bytes, measure_ns;
};

enum { TB_CLIENT, TB_SERVER };

static enum sim_act tb_step(struct sim *s, struct sim_fiber *f)
{
	struct tbench *t = s->wl_state;
	unsigned i = (unsigned)f->c;
	uint64_t left, got;

	for (;;) {
		switch (f->pc) {
		case 0: /* client: request */
			if (f->kind == TB_SERVER) {
				f->pc = 10;
				break;
			}
			f->d = (long)t->req;
			f->pc = 1;
			__attribute__((fallthrough));
		case 1:
			left = (uint64_t)f->d;
			if (!sim_pipe_write(s, f, &t->up[i], &left)) {
				f->d = (long)left;
				return SIM_BLOCK;
			}
			f->a = 0;
			f->pc = 2;
			__attribute__((fallthrough));
		case 2: /* the whole answer */
			while ((uint64_t)f->a < t->resp) {
				if (!sim_pipe_read(s, f, &t->down[i],
						   t->resp - (uint64_t)f->a,
						   &got))
					return SIM_BLOCK;
				f->a += (long)got;
			}
			if (sim_time(s) >= t->measure_ns)
				t->bytes += t->req + t->resp;
			f->pc = 0;
			f->work = t->client_ns;
			return SIM_COMPUTE;
		case 10: /* server: the whole request */
			f->a = 0;
			f->pc = 11;
			__attribute__((fallthrough));
		case 11:
			while ((uint64_t)f->a < t->req) {
				if (!sim_pipe_read(s, f, &t->up[i],
						   t->req - (uint64_t)f->a,
						   &got))
					return SIM_BLOCK;
				f->a += (long)got;
			}
			f->pc = 12;
			f->work = t->server_ns;
			return SIM_COMPUTE;
		case 12:
			f->d = (long)t->resp;
			f->pc = 13;
			__attribute__((fallthrough));
		case 13:
			left = (uint64_t)f->d;
			if (!sim_pipe_write(s, f, &t->down[i], &left)) {
				f->d = (long)left;
				return SIM_BLOCK;
			}
			f->pc = 10;
			break;
		}
	}
}

static const char *const tb_keys[] = { "clients", "req",    "resp", "server",
				       "client",  "warmup", "ws",   NULL };

static int tb_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	const char *p = params_of(spec);
	uint64_t run = s->o.duration_ns ? s->o.duration_ns : SIM_S;
	struct tbench *t;
	double warmup;

	if (sim_params_check(p, tb_keys, err, errlen))
		return -1;
	if (!s->o.duration_ns) {
		snprintf(err, errlen, "tbench runs until --duration-ms");
		return -1;
	}
	if (fibers_ok(2 * sim_param(p, "clients", 8), "tbench", err, errlen))
		return -1;
	t = calloc(1, sizeof(*t));
	s->wl_state = t;
	t->clients = (unsigned)sim_param(p, "clients", 8);
	t->req = (uint64_t)sim_param(p, "req", 256);
	t->resp = (uint64_t)sim_param(p, "resp", 4096);
	t->server_ns = US(sim_param(p, "server", 5));
	t->client_ns = US(sim_param(p, "client", 2));
	if (warmup_of(p, 0.1, 1, "tbench", err, errlen, &warmup))
		return -1;
	t->measure_ns = (uint64_t)(warmup * (double)run);
	if (!t->clients || !t->req || !t->resp) {
		snprintf(err, errlen,
			 "tbench: clients, req and resp must be "
			 "positive");
		return -1;
	}
	t->up = calloc(t->clients, sizeof(*t->up));
	t->down = calloc(t->clients, sizeof(*t->down));
	for (unsigned i = 0; i < t->clients; i++) {
		struct sim_fiber *f;

		sim_pipe_init(&t->up[i], 65536);
		sim_pipe_init(&t->down[i], 65536);
		f = sim_create(s, NULL, tb_step, TB_SERVER, NULL);
		f->detached = true;
		f->c = i;
		f->ws_kb = sim_param(p, "ws", 32);
		f = sim_create(s, NULL, tb_step, TB_CLIENT, NULL);
		f->detached = true;
		f->c = i;
		f->ws_kb = sim_param(p, "ws", 32);
	}
	return 0;
}

static void tb_result(struct sim *s, struct sim_result *r)
{
	struct tbench *t = s->wl_state;
	double secs = since(t->measure_ns, s->end_ns);

	r->metric = "MB_per_sec";
	r->unit = "MB/s";
	r->value = per_sec((double)t->bytes, secs) / 1e6;
	r->lower_is_better = false;
}

static void tb_cleanup(struct sim *s)
{
	struct tbench *t = s->wl_state;

	if (t) {
		free(t->up);
		free(t->down);
	}
	free(t);
	s->wl_state = NULL;
}

/* ---- the table ------------------------------------------------------------------------ */

static const struct sim_workload hackbench = {
	"hackbench",
	"groups=G (10) fds=F (20) loops=L (100) datasize=D (100) pipe=BYTES "
	"(65536, at least 1) ws=KB (16) msg_ns=NS (0: work per message besides the pipe)",
	hb_setup,
	hb_result,
	hb_cleanup,
};
static const struct sim_workload schbench = {
	"schbench",
	"m=M (2) t=T (8) think=US (10) sleep=US (0) warmup=FRACTION (0.1, "
	"below 0.95) "
	"ws=KB (16)",
	sb_setup,
	sb_result,
	sb_cleanup,
};
static const struct sim_workload ebizzy = {
	"ebizzy",
	"threads=N (one per worker, at least 1) record=US (20, above 0) warmup=FRACTION (0.2, below 1) "
	"ws=KB (64) first=K (-1: placement decides; else start on K..)",
	eb_setup,
	eb_result,
	eb_cleanup,
};
static const struct sim_workload execst = {
	"exec",
	"workers=N (8, at least 1) work=US (50) affine=0|1 (0; 1: mask 0..n-2) "
	"stride=K (0; with affine=1: mask 0,K,2K,...) warmup=FRACTION (0.1, "
	"below 1)",
	ex_setup,
	ex_result,
	ex_cleanup,
};
static const struct sim_workload pingpong = {
	"pingpong",
	"pairs=P (1) loops=L (10000) pin=0|1 (1: bench/pipe-pingpong's split "
	"placement; 0: its free one) same=0|1 (1: with pin=1, its same "
	"placement)",
	pp_setup,
	pp_result,
	pp_cleanup,
};
static const struct sim_workload tbench = {
	"tbench",
	"clients=C (8) req=BYTES (256) resp=BYTES (4096) server=US (5) "
	"client=US (2) warmup=FRACTION (0.1, below 1) ws=KB (32)",
	tb_setup,
	tb_result,
	tb_cleanup,
};

const struct sim_workload *const sim_workloads[] = {
	&hackbench, &schbench, &ebizzy, &execst, &pingpong, &tbench, NULL,
};

const struct sim_workload *sim_workload_find(const char *name, size_t len)
{
	for (int i = 0; sim_workloads[i]; i++)
		if (strlen(sim_workloads[i]->name) == len &&
		    !strncmp(sim_workloads[i]->name, name, len))
			return sim_workloads[i];
	return NULL;
}
