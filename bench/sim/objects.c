// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * objects.c - the sync objects of fiber-sim's workloads, with lib/sync's
 * wake rules and flags (doc/simulator.md 2.3):
 *   pipe     sync/pipe.c: readers queue only while the ring is empty; a
 *            writer copies straight into queued readers and wakes them
 *            with FB_WF_SYNC; a reader that made room wakes the first
 *            queued writer (no flag), which goes on where it stopped; a
 *            writer that finishes with room left wakes the next one;
 *   sem      sync/sem.c: a post hands its unit to the first waiter;
 *   barrier  sync/barrier.c: the last arrival wakes all the others;
 *   join     the reaper of the exited fiber wakes its joiner.
 * A woken waiter whose outcome was handed over finds it in io_fed/io_got
 * when its step calls the operation again.  Each operation costs its
 * local cost plus two cache lines (the lock's and the data's) when
 * another worker touched the object last.
 */
#include "sim.h"

static void q_init(struct sim_waitq *q)
{
	q->head = q->tail = -1;
}

static void q_add(struct sim *s, struct sim_waitq *q, struct sim_fiber *f)
{
	f->link = -1;
	if (q->tail >= 0)
		sim_fiber(s, q->tail)->link = f->id;
	else
		q->head = f->id;
	q->tail = f->id;
}

static struct sim_fiber *q_pop(struct sim *s, struct sim_waitq *q)
{
	struct sim_fiber *f;

	if (q->head < 0)
		return NULL;
	f = sim_fiber(s, q->head);
	q->head = f->link;
	if (q->head < 0)
		q->tail = -1;
	f->link = -1;
	return f;
}

/* touch - the cost of taking an object's lock on @f's worker. */
static void touch(struct sim *s, struct sim_fiber *f, int *last, double op)
{
	int w = f->worker;

	if (*last >= 0 && *last != w)
		sim_charge(s, 2 * s->c.line[sim_dist(s, *last, w)]);
	*last = w;
	sim_charge(s, op);
}

void sim_pipe_init(struct sim_pipe *p, uint64_t capacity)
{
	p->capacity = capacity;
	p->count = 0;
	p->last = -1;
	q_init(&p->readers);
	q_init(&p->writers);
}

void sim_sem_init(struct sim_sem *m, uint64_t count)
{
	m->count = count;
	m->last = -1;
	q_init(&m->waiters);
}

void sim_barrier_init(struct sim_barrier *b, unsigned count)
{
	b->count = count;
	b->arrived = 0;
	b->last = -1;
	q_init(&b->waiters);
}

static void wake_writer(struct sim *s, struct sim_fiber *f, struct sim_pipe *p)
{
	struct sim_fiber *wr = q_pop(s, &p->writers);

	if (wr)
		sim_wake(s, f, wr, 0);
}

bool sim_pipe_write(struct sim *s, struct sim_fiber *f, struct sim_pipe *p,
		    uint64_t *left)
{
	struct sim_fiber *r;
	uint64_t k;

	touch(s, f, &p->last, s->c.pipe_op_ns);
	while (*left && (r = q_pop(s, &p->readers))) {
		k = r->io_got < *left ? r->io_got : *left;
		r->io_got = k;
		r->io_fed = true;
		*left -= k;
		sim_wake(s, f, r, SIM_WF_SYNC);
	}
	k = p->capacity - p->count;
	k = k < *left ? k : *left;
	p->count += k;
	*left -= k;
	if (!*left) {
		if (p->count < p->capacity)
			wake_writer(s, f, p);
		return true;
	}
	q_add(s, &p->writers, f);
	return false;
}

bool sim_pipe_read(struct sim *s, struct sim_fiber *f, struct sim_pipe *p,
		   uint64_t want, uint64_t *got)
{
	if (f->io_fed) {
		f->io_fed = false;
		*got = f->io_got;
		return true;
	}
	touch(s, f, &p->last, s->c.pipe_op_ns);
	if (p->count) {
		*got = p->count < want ? p->count : want;
		p->count -= *got;
		wake_writer(s, f, p);
		return true;
	}
	f->io_got = want; /* the request, filled in by the writer */
	q_add(s, &p->readers, f);
	return false;
}

void sim_sem_post(struct sim *s, struct sim_fiber *f, struct sim_sem *m)
{
	struct sim_fiber *w;

	touch(s, f, &m->last, s->c.sem_op_ns);
	w = q_pop(s, &m->waiters);
	if (w) {
		w->io_fed = true;
		sim_wake(s, f, w, 0);
	} else {
		m->count++;
	}
}

bool sim_sem_wait(struct sim *s, struct sim_fiber *f, struct sim_sem *m)
{
	if (f->io_fed) {
		f->io_fed = false;
		return true;
	}
	touch(s, f, &m->last, s->c.sem_op_ns);
	if (m->count) {
		m->count--;
		return true;
	}
	q_add(s, &m->waiters, f);
	return false;
}

bool sim_barrier_wait(struct sim *s, struct sim_fiber *f, struct sim_barrier *b)
{
	struct sim_fiber *w;

	if (f->io_fed) {
		f->io_fed = false;
		return true;
	}
	touch(s, f, &b->last, s->c.sem_op_ns);
	if (++b->arrived < b->count) {
		q_add(s, &b->waiters, f);
		return false;
	}
	b->arrived = 0;
	while ((w = q_pop(s, &b->waiters))) {
		w->io_fed = true;
		sim_wake(s, f, w, 0);
	}
	return true;
}

bool sim_join(struct sim *s, struct sim_fiber *f, struct sim_fiber *child)
{
	(void)s;
	if (child->exited)
		return true;
	child->joiner = f->id;
	return false;
}
