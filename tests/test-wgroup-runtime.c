/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-wgroup-runtime.c - wake groups in a running runtime
 * (doc/scheduler.md 1.10), white box: fibers that talk through pipes or
 * channels end up in one group per conversation, with homes spread over
 * the workers; a fiber that talks to many gathers at most FB_WGROUP_MAX;
 * pinned fibers and NO_WAKE_GROUPS group nothing; groups go away with
 * their last member, and with a runtime that abandoned theirs.
 * Assertions read the fibers' records and counters, never the clock.
 */
#include <errno.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "sched/sched.h"

#define ROUNDS 2000
#define PAIRS 2

/* What a fiber saw of its group at the end, before it left it. */
struct seen {
	struct fb_wgroup *group;
	int home, nr;
};

static void look(struct seen *s)
{
	struct fb_fiber *f = fb_current();

	s->group = f->pf.group;
	s->home = s->group ? fb_load_relaxed(&s->group->home) : -1;
	s->nr = s->group ? fb_load_relaxed(&s->group->nr) : 0;
}

/* look_at_end - look once every fiber of @end is done and none has left
 * its group yet (they leave as they exit). */
static void look_at_end(fiber_barrier_t *end, struct seen *s)
{
	fiber_barrier_wait(end);
	look(s);
	fiber_barrier_wait(end);
}

/* ---- pairs ---- */

struct pair {
	fiber_pipe_t *to_pong, *to_ping;
	fiber_barrier_t *end; /* every member looks while all are alive */
	struct seen ping, pong;
	int err;
};

static void *ping(void *arg)
{
	struct pair *p = arg;
	size_t done;
	int err = 0;

	for (unsigned int i = 0; i < ROUNDS && !err; i++) {
		unsigned int v = i, r = 0;

		err = fiber_pipe_write(p->to_pong, &v, sizeof(v), &done);
		if (!err)
			err = fiber_pipe_read(p->to_ping, &r, sizeof(r), &done);
		if (!err && (done != sizeof(r) || r != i + 1))
			err = EPROTO;
	}
	p->err = err;
	look_at_end(p->end, &p->ping);
	return NULL;
}

static void *pong(void *arg)
{
	struct pair *p = arg;
	size_t done;
	int err = 0;

	for (unsigned int i = 0; i < ROUNDS && !err; i++) {
		unsigned int v = 0;

		err = fiber_pipe_read(p->to_pong, &v, sizeof(v), &done);
		v++;
		if (!err)
			err = fiber_pipe_write(p->to_ping, &v, sizeof(v),
					       &done);
	}
	if (err && !p->err)
		p->err = err;
	look_at_end(p->end, &p->pong);
	return NULL;
}

static void start(const char *features)
{
	struct fiber_config c = { 0 };

	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.sched_features = features;
	c.stats = "0";
	assert_int_equal(fiber_init(&c), 0);
}

/* run_pairs - PAIRS ping-pongs at once, each pair pinned to @pin (-1:
 * free), every fiber looking at its group at the end. */
static void run_pairs(struct pair *p, int pin)
{
	fiber_barrier_t end;
	fiber_t f[2 * PAIRS];
	fiber_attr_t a;
	cpu_set_t s;

	assert_int_equal(fiber_barrier_init(&end, 2 * PAIRS), 0);
	fiber_attr_init(&a);
	if (pin >= 0) {
		CPU_ZERO(&s);
		CPU_SET(pin, &s);
		fiber_attr_setaffinity(&a, sizeof(s), &s);
	}
	for (int i = 0; i < PAIRS; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].end = &end;
		assert_int_equal(fiber_pipe_create(&p[i].to_pong, 64), 0);
		assert_int_equal(fiber_pipe_create(&p[i].to_ping, 64), 0);
		assert_int_equal(fiber_create(&f[2 * i], &a, pong, &p[i]), 0);
		assert_int_equal(fiber_create(&f[2 * i + 1], &a, ping, &p[i]),
				 0);
	}
	for (int i = 0; i < 2 * PAIRS; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	for (int i = 0; i < PAIRS; i++) {
		assert_int_equal(p[i].err, 0);
		assert_int_equal(fiber_pipe_destroy(p[i].to_pong), 0);
		assert_int_equal(fiber_pipe_destroy(p[i].to_ping), 0);
	}
	fiber_attr_destroy(&a);
	fiber_barrier_destroy(&end);
}

/* Two free pairs: each pair is one group of two, the two groups differ
 * and live on different workers (the second formed while the first
 * held a worker); after the joins no group is left. */
static void test_wgroup_pairs_share_a_home(void **state)
{
	struct pair p[PAIRS];

	(void)state;
	start(NULL);
	fiber_stats_reset();
	run_pairs(p, -1);
	for (int i = 0; i < PAIRS; i++) {
		assert_non_null(p[i].ping.group);
		assert_ptr_equal(p[i].ping.group, p[i].pong.group);
		assert_int_equal(p[i].ping.nr, 2);
	}
	assert_ptr_not_equal(p[0].ping.group, p[1].ping.group);
	assert_int_not_equal(p[0].ping.home, p[1].ping.home);
	assert_int_equal(fiber_stats_counter("wgroups_formed"), PAIRS);
	assert_int_equal(fiber_stats_counter("wgroup_joins"), 0);
	assert_int_equal(fb_wgroups_live(), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

/* Fibers with an affinity mask (here one worker) and a runtime with
 * NO_WAKE_GROUPS group nothing. */
static void test_wgroup_pinned_and_off_group_nothing(void **state)
{
	struct pair p[PAIRS];

	(void)state;
	start(NULL);
	run_pairs(p, 1);
	for (int i = 0; i < PAIRS; i++)
		assert_null(p[i].ping.group);
	assert_int_equal(fiber_stats_counter("wgroups_formed"), 0);
	assert_int_equal(fiber_shutdown(), 0);

	start("NO_WAKE_GROUPS");
	run_pairs(p, -1);
	for (int i = 0; i < PAIRS; i++) {
		assert_null(p[i].ping.group);
		assert_null(p[i].pong.group);
	}
	assert_int_equal(fiber_stats_counter("wgroups_formed"), 0);
	assert_int_equal(fiber_stats_counter("wake_group"), 0);
	assert_int_equal(fb_wgroups_live(), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

/* ---- a channel ---- */

struct cpair {
	fiber_chan_t *to_pong, *to_ping;
	fiber_barrier_t end;
	struct seen ping, pong;
	int err;
};

static void *chan_ping(void *arg)
{
	struct cpair *p = arg;

	for (unsigned int i = 0; i < ROUNDS && !p->err; i++) {
		unsigned int v = i, r = 0;

		if (fiber_chan_send(p->to_pong, &v) ||
		    fiber_chan_recv(p->to_ping, &r) || r != i + 1)
			p->err = EPROTO;
	}
	look_at_end(&p->end, &p->ping);
	return NULL;
}

static void *chan_pong(void *arg)
{
	struct cpair *p = arg;

	for (unsigned int i = 0; i < ROUNDS && !p->err; i++) {
		unsigned int v = 0;

		if (fiber_chan_recv(p->to_pong, &v))
			p->err = EPROTO;
		v++;
		if (fiber_chan_send(p->to_ping, &v))
			p->err = EPROTO;
	}
	look_at_end(&p->end, &p->pong);
	return NULL;
}

/* A ping-pong over two unbuffered channels groups the two as a pipe's
 * does. */
static void test_wgroup_channel_pair(void **state)
{
	static struct cpair p;
	fiber_t f[2];

	(void)state;
	start(NULL);
	memset(&p, 0, sizeof(p));
	assert_int_equal(fiber_chan_create(&p.to_pong, sizeof(unsigned), 0), 0);
	assert_int_equal(fiber_chan_create(&p.to_ping, sizeof(unsigned), 0), 0);
	assert_int_equal(fiber_barrier_init(&p.end, 2), 0);
	assert_int_equal(fiber_create(&f[0], NULL, chan_pong, &p), 0);
	assert_int_equal(fiber_create(&f[1], NULL, chan_ping, &p), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	assert_int_equal(p.err, 0);
	assert_non_null(p.ping.group);
	assert_ptr_equal(p.ping.group, p.pong.group);
	assert_int_equal(p.ping.nr, 2);
	assert_int_equal(fb_wgroups_live(), 0);
	fiber_chan_destroy(p.to_pong);
	fiber_chan_destroy(p.to_ping);
	fiber_barrier_destroy(&p.end);
	assert_int_equal(fiber_shutdown(), 0);
}

/* ---- a dispatcher: one fiber talks to many ---- */

#define PEERS 200
#define TRIPS 10

struct hub {
	fiber_pipe_t *to[PEERS], *back[PEERS];
	fiber_barrier_t end;
	struct seen hub, peer[PEERS];
	int err;
};

struct peer {
	struct hub *h;
	int i;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	struct hub *h = p->h;
	size_t done;
	char c;

	for (int k = 0; k < TRIPS; k++)
		if (fiber_pipe_read(h->to[p->i], &c, 1, &done) ||
		    fiber_pipe_write(h->back[p->i], &c, 1, &done))
			h->err = EIO;
	look_at_end(&h->end, &h->peer[p->i]);
	return NULL;
}

static void *hub_main(void *arg)
{
	struct hub *h = arg;
	size_t done;
	char c = 'h';

	for (int i = 0; i < PEERS; i++)
		for (int k = 0; k < TRIPS; k++)
			if (fiber_pipe_write(h->to[i], &c, 1, &done) ||
			    fiber_pipe_read(h->back[i], &c, 1, &done))
				h->err = EIO;
	look_at_end(&h->end, &h->hub);
	return NULL;
}

/* One fiber holds TRIPS round trips with each of 200 others in turn,
 * each a chance to group: its group fills up to FB_WGROUP_MAX and no
 * further, and the peers past the cap stay out of every group (they
 * talk to nobody else). */
static void test_wgroup_dispatcher_is_capped(void **state)
{
	static struct hub h;
	static struct peer p[PEERS];
	static fiber_t f[PEERS + 1];
	int grouped = 0;

	(void)state;
	start(NULL);
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < PEERS; i++) {
		assert_int_equal(fiber_pipe_create(&h.to[i], 64), 0);
		assert_int_equal(fiber_pipe_create(&h.back[i], 64), 0);
	}
	assert_int_equal(fiber_barrier_init(&h.end, PEERS + 1), 0);
	for (int i = 0; i < PEERS; i++) {
		p[i] = (struct peer){ &h, i };
		assert_int_equal(fiber_create(&f[i], NULL, peer_main, &p[i]),
				 0);
	}
	assert_int_equal(fiber_create(&f[PEERS], NULL, hub_main, &h), 0);
	for (int i = 0; i <= PEERS; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	assert_int_equal(h.err, 0);
	assert_non_null(h.hub.group);
	assert_int_equal(h.hub.nr, FB_WGROUP_MAX);
	for (int i = 0; i < PEERS; i++) {
		if (!h.peer[i].group)
			continue;
		assert_ptr_equal(h.peer[i].group, h.hub.group);
		grouped++;
	}
	assert_int_equal(grouped, FB_WGROUP_MAX - 1);
	assert_int_equal(fb_wgroups_live(), 0);
	for (int i = 0; i < PEERS; i++) {
		assert_int_equal(fiber_pipe_destroy(h.to[i]), 0);
		assert_int_equal(fiber_pipe_destroy(h.back[i]), 0);
	}
	fiber_barrier_destroy(&h.end);
	assert_int_equal(fiber_shutdown(), 0);
}

/* ---- a shutdown that abandons a group ---- */

struct stuck {
	fiber_pipe_t *a, *b;
	fiber_barrier_t *formed;
};

/* until_grouped - round trips through @s with an echo() peer until the
 * caller is in a group (a bounded number of them), then stop the peer. */
static void until_grouped(struct stuck *s)
{
	char c = 'x';
	size_t done;

	for (int k = 0; k < 100000 && !fb_current()->pf.group; k++) {
		fiber_pipe_write(s->a, &c, 1, &done);
		fiber_pipe_read(s->b, &c, 1, &done);
	}
}

static void stop_echo(struct stuck *s)
{
	char c = 's';
	size_t done;

	fiber_pipe_write(s->a, &c, 1, &done);
}

/* echo - send back each byte of @s->a on @s->b until a stop_echo(). */
static void echo(struct stuck *s)
{
	char c;
	size_t done;

	while (!fiber_pipe_read(s->a, &c, 1, &done) && c != 's')
		fiber_pipe_write(s->b, &c, 1, &done);
}

/* stuck_ping - group with stuck_pong, then wait for ever on @b. */
static void *stuck_ping(void *arg)
{
	struct stuck *s = arg;
	char c;
	size_t done;

	until_grouped(s);
	stop_echo(s);
	fiber_barrier_wait(s->formed);
	fiber_pipe_read(s->b, &c, 1, &done); /* nobody writes: abandoned */
	return NULL;
}

static void *stuck_pong(void *arg)
{
	struct stuck *s = arg;
	char c;
	size_t done;

	echo(s);
	fiber_barrier_wait(s->formed);
	fiber_pipe_read(s->a, &c, 1, &done); /* nobody writes: abandoned */
	return NULL;
}

/*
 * Two fibers that grouped are abandoned by a shutdown, blocked: their
 * group goes with the runtime.  A write to their pipes from the next
 * runtime wakes nobody and touches no freed group, and the descriptors
 * the next runtime creates start without one (ASan and valgrind would
 * see a freed group read).
 */
static void test_wgroup_abandoned_group_goes_with_the_runtime(void **state)
{
	static struct stuck s;
	fiber_barrier_t formed;
	struct pair p[PAIRS];
	fiber_t f[2];
	char c = 'y';
	size_t done;

	(void)state;
	start(NULL);
	assert_int_equal(fiber_pipe_create(&s.a, 0), 0);
	assert_int_equal(fiber_pipe_create(&s.b, 0), 0);
	assert_int_equal(fiber_barrier_init(&formed, 3), 0);
	s.formed = &formed;
	assert_int_equal(fiber_create(&f[0], NULL, stuck_pong, &s), 0);
	assert_int_equal(fiber_create(&f[1], NULL, stuck_ping, &s), 0);
	fiber_barrier_wait(&formed);
	assert_int_equal(fb_wgroups_live(), 1);
	assert_int_equal(fiber_shutdown(), EBUSY);
	start(NULL);
	assert_int_equal(fiber_pipe_write(s.b, &c, 1, &done), 0);
	assert_int_equal(fiber_pipe_write(s.a, &c, 1, &done), 0);
	run_pairs(p, -1);
	for (int i = 0; i < PAIRS; i++)
		assert_ptr_equal(p[i].ping.group, p[i].pong.group);
	assert_int_equal(fb_wgroups_live(), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

/* ---- fork from a grouped fiber ---- */

/* In the child of a fork taken by a grouped fiber: the parent's runtime
 * and groups are gone, and a runtime of its own groups afresh.  Exit
 * codes, not cmocka, report. */
static int child_groups_afresh(void)
{
	struct fiber_config c = { 0 };
	fiber_barrier_t end;
	struct pair p;
	fiber_t f[2];

	alarm(20); /* a hang fails the child */
	if (fiber_shutdown() != ESRCH)
		return 10;
	if (!CHILD_MAY_START_THREADS)
		return 0;
	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.stats = "0";
	if (fiber_init(&c))
		return 11;
	memset(&p, 0, sizeof(p));
	p.end = &end;
	if (fiber_barrier_init(&end, 2) || fiber_pipe_create(&p.to_pong, 64) ||
	    fiber_pipe_create(&p.to_ping, 64) ||
	    fiber_create(&f[0], NULL, pong, &p) ||
	    fiber_create(&f[1], NULL, ping, &p))
		return 12;
	if (fiber_join(f[0], NULL) || fiber_join(f[1], NULL) || p.err)
		return 13;
	if (!p.ping.group || p.ping.group != p.pong.group || p.ping.nr != 2)
		return 14;
	if (fb_wgroups_live() != 0)
		return 15;
	return fiber_shutdown() ? 16 : 0;
}

static atomic_int fork_status = -1, fork_grouped;

/* fork_ping - group with fork_pong, then fork; the child checks
 * child_groups_afresh(), the parent waits for it and stops the echo. */
static void *fork_ping(void *arg)
{
	struct stuck *s = arg;
	pid_t pid;
	int st = -1;

	until_grouped(s);
	atomic_store(&fork_grouped, fb_current()->pf.group != NULL);
	pid = fork();
	if (pid == 0)
		_exit(child_groups_afresh());
	if (pid > 0 && waitpid(pid, &st, 0) == pid)
		atomic_store(&fork_status,
			     WIFEXITED(st) ? WEXITSTATUS(st) : 1000);
	stop_echo(s);
	return NULL;
}

static void *fork_pong(void *arg)
{
	echo(arg);
	return NULL;
}

/* A grouped fiber forks: the child's runtime starts with no group and
 * forms its own; the parent's group is whole, and goes when its two
 * members exit. */
static void test_wgroup_fork_from_a_grouped_fiber(void **state)
{
	static struct stuck s;
	fiber_t f[2];

	(void)state;
	start(NULL);
	assert_int_equal(fiber_pipe_create(&s.a, 0), 0);
	assert_int_equal(fiber_pipe_create(&s.b, 0), 0);
	assert_int_equal(fiber_create(&f[0], NULL, fork_pong, &s), 0);
	assert_int_equal(fiber_create(&f[1], NULL, fork_ping, &s), 0);
	assert_int_equal(fiber_join(f[1], NULL), 0);
	assert_int_equal(fiber_join(f[0], NULL), 0);
	assert_int_equal(atomic_load(&fork_grouped), 1);
	assert_int_equal(atomic_load(&fork_status), 0);
	assert_int_equal(fb_wgroups_live(), 0);
	assert_int_equal(fiber_pipe_destroy(s.a), 0);
	assert_int_equal(fiber_pipe_destroy(s.b), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wgroup_pairs_share_a_home),
		cmocka_unit_test(test_wgroup_pinned_and_off_group_nothing),
		cmocka_unit_test(test_wgroup_channel_pair),
		cmocka_unit_test(test_wgroup_dispatcher_is_capped),
		cmocka_unit_test(
			test_wgroup_abandoned_group_goes_with_the_runtime),
		cmocka_unit_test(test_wgroup_fork_from_a_grouped_fiber),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
