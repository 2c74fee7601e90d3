// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * test-place-balance.c - load balancing decisions (doc/scheduler.md 1.6;
 * ASYM_PACKING with the fixes of Srikar Dronamraju's mail, doc/scheduler.md
 * 4.5; the NUMA allowance in periodic balancing, doc/scheduler.md 5.2.4), white
 * box and pure: a synthetic view, a filled snapshot, one balance(dst, d, kind)
 * per assertion.
 */
#include "place-sim.h"

#define A1 "pack:1 l3:1 core:4 pu:1"
#define A2 "pack:1 l3:1 core:2 pu:2"
#define N1 "pack:2 numa:1 l3:4 core:2 pu:1"
#define P7 "pack:2 l3:1 core:8 pu:4" /* 64-CPU POWER7, SMT4 */
#define L2 "pack:1 l3:2 core:2 pu:1"

static void open_asym(struct sim *s, const char *spec, bool xml)
{
	sim_open(s, spec, xml, FB_VIEW_ASYM_PACKING);
	sim_features(FB_FEAT_BIT(ASYM_PACKING), 0);
}

/*
 * balance - one balance(dst, d, kind): find, then, when there is something
 * to pull, offer the busiest worker's lone running fiber @f and finish.
 */
static enum fb_lb_verdict balance(struct sim *s, struct fb_lb_env *e,
				  struct fb_domain *d, int dst,
				  enum fb_idle_kind kind,
				  const struct fb_pfiber *f)
{
	enum fb_lb_verdict r;

	fb_place_lb_init(e, &s->v, d, dst, kind, 100 * MS, 100);
	r = fb_place_lb_find(e);
	if (r == FB_LB_PULL) {
		struct fb_lb_candidate c = { f, true, false };

		fb_place_lb_detach(e, &c, 1);
	}
	fb_place_lb_finish(e, r, r == FB_LB_PULL ? f : NULL);
	return r;
}

/* ---- H3 ----------------------------------------------------------------- */

static void test_place_balance_h3_1_lone_fiber_moves_up(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;

	(void)state;
	open_asym(&s, A1, false);
	sim_fiber(&f, NULL);
	sim_set(&s, 3, 1);
	assert_int_equal(balance(&s, &e, s.sv->sd[0], 0, FB_LB_IDLE, &f),
			 FB_LB_PULL);
	assert_int_equal(e.busiest.type, FB_GROUP_ASYM_PACKING);
	assert_int_equal(e.type, FB_MIGRATE_TASK);
	assert_int_equal(e.src, 3);
	assert_int_equal(e.nr_moved, 0);
	assert_true(e.active);
	fb_place_request_push(&s.v, e.src, 0);
	assert_int_equal(s.pw[3].push_target, 0);
	assert_true(s.pw[3].state & FB_WS_NEED_RESCHED);
	/* F now on 0: no idle worker pulls it back. */
	sim_set(&s, 3, 0);
	sim_set(&s, 0, 1);
	for (int dst = 1; dst < 4; dst++) {
		balance(&s, &e, s.sv->sd[dst], dst, FB_LB_IDLE, &f);
		assert_false(e.active);
	}
	sim_close(&s);

	sim_open(&s, A1, false, 0);
	sim_features(0, FB_FEAT_BIT(ASYM_PACKING));
	sim_set(&s, 3, 1);
	assert_int_equal(balance(&s, &e, s.sv->sd[0], 0, FB_LB_IDLE, &f),
			 FB_LB_BALANCED);
	assert_false(e.active);
	sim_close(&s);
}

/* Affinity past the cpu_set_t: a mask for 4096 workers allows worker 4095
 * when it holds it; a worker id past any mask is not allowed (never read);
 * a running fiber pinned there is offered pinned, one past the limit as
 * unpinned. */
static void test_place_balance_affinity_past_1024(void **state)
{
	cpu_set_t *m = sim_mask(1, 4095, -1);
	struct fb_pfiber f;
	fb_cpuset_t buf;

	(void)state;
	sim_fiber(&f, m);
	assert_int_equal(f.nr_allowed, 2);
	assert_true(fb_pfiber_allows(&f, 4095));
	assert_true(fb_pfiber_allows(&f, 1));
	assert_false(fb_pfiber_allows(&f, 4094));
	assert_false(fb_pfiber_allows(&f, 1024));
	assert_false(fb_pfiber_allows(&f, 4096));
	assert_false(fb_pfiber_allows(&f, 1 << 20));
	fb_place_running_as(&f, &buf, 4095);
	assert_int_equal(f.pin, 4095);
	assert_true(fb_pfiber_allows(&f, 4095));
	assert_false(fb_pfiber_allows(&f, 0));
	fb_place_running_as(&f, &buf, 4096);
	assert_null(f.allowed);
	assert_true(fb_pfiber_allows(&f, 0));
	free(m);
}

/* doc/scheduler.md 1.6.7: the running fiber a balancer offers carries the
 * affinity its worker published (fb_place_running_as): pinned to the
 * source, it draws no push request; allowed on the destination, it does. */
static void test_place_balance_h3_1_pinned_running_fiber_stays(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;
	fb_cpuset_t m;
	const struct {
		int pin;
		bool active;
	} cases[] = { { 3, false }, { -1, true }, { 0, true }, { 1, false } };

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		open_asym(&s, A1, false);
		sim_set(&s, 3, 1);
		fb_place_running_as(&f, &m, cases[k].pin);
		assert_int_equal(fb_pfiber_allows(&f, 0),
				 cases[k].pin < 0 || cases[k].pin == 0);
		assert_int_equal(balance(&s, &e, s.sv->sd[0], 0, FB_LB_IDLE,
					 &f),
				 FB_LB_PULL);
		assert_int_equal(e.src, 3);
		assert_int_equal(e.active, cases[k].active);
		if (!cases[k].active)
			assert_true(e.flags & FB_LBF_ALL_PINNED);
		sim_close(&s);
	}
}

static void test_place_balance_h3_2_lowest_priority_first(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber g;

	(void)state;
	open_asym(&s, A1, false);
	sim_fiber(&g, NULL);
	sim_set(&s, 2, 1);
	sim_set(&s, 3, 1);
	assert_int_equal(balance(&s, &e, s.sv->sd[0], 0, FB_LB_IDLE, &g),
			 FB_LB_PULL);
	assert_true(
		fb_wmask_test(&s.sv->sd[0]->groups[e.busiest_group].span, 3));
	assert_int_equal(e.src, 3);
	assert_true(e.active);
	sim_close(&s);
}

static void test_place_balance_h3_3_busy_destination(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;

	(void)state;
	open_asym(&s, A1, false);
	sim_fiber(&f, NULL);
	sim_set(&s, 0, 1);
	sim_set(&s, 3, 1);
	assert_int_equal(balance(&s, &e, s.sv->sd[0], 0, FB_LB_BUSY, &f),
			 FB_LB_BALANCED);
	assert_true(e.busiest.type != FB_GROUP_ASYM_PACKING);
	assert_false(e.active);
	/* Second case: busiest is {2}, overloaded with the highest load. */
	sim_set(&s, 1, 1);
	sim_set(&s, 2, 3);
	sim_set(&s, 3, 2);
	fb_place_lb_init(&e, &s.v, s.sv->sd[1], 1, FB_LB_BUSY, 100 * MS, 100);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	assert_int_equal(e.busiest.type, FB_GROUP_OVERLOADED);
	assert_true(
		fb_wmask_test(&s.sv->sd[1]->groups[e.busiest_group].span, 2));
	assert_int_equal(e.src, 2);
	assert_int_equal(e.type, FB_MIGRATE_LOAD);
	assert_int_equal(e.imbalance, 768); /* min(1280, 768) x 1024 / 1024 */
	sim_close(&s);
}

static void test_place_balance_h3_4_smt_core_must_be_idle(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;
	struct fb_domain *llc;

	(void)state;
	open_asym(&s, A2, false);
	sim_fiber(&f, NULL);
	llc = sim_level(&s, 0, "LLC", 0);
	sim_set(&s, 2, 1);
	assert_int_equal(balance(&s, &e, llc, 0, FB_LB_IDLE, &f), FB_LB_PULL);
	assert_int_equal(e.src, 2);
	assert_true(e.active);
	sim_set(&s, 1, 1); /* (b) G runs on 1 */
	llc->nr_balance_failed = 0;
	assert_int_equal(balance(&s, &e, llc, 0, FB_LB_IDLE, &f),
			 FB_LB_BALANCED);
	assert_false(e.active);
	sim_close(&s);
}

/* doc/scheduler.md 4.2.4 item 4: an idle worker never pulls a lone fiber
 * off a better worker, even from a busier group: on two LLCs of two cores,
 * with one fiber on each of workers 0 and 1, worker 2 balancing the
 * package level finds no source; without ASYM_PACKING it takes one. */
static void test_place_balance_h3_4_no_lone_fiber_off_better(void **state)
{
	struct sim s;
	struct fb_lb_env e;

	(void)state;
	for (int asym = 1; asym >= 0; asym--) {
		if (asym) {
			open_asym(&s, L2, false);
		} else {
			sim_open(&s, L2, false, 0);
			sim_features(0, FB_FEAT_BIT(ASYM_PACKING));
		}
		sim_set(&s, 0, 1);
		sim_set(&s, 1, 1);
		assert_non_null(s.sv->sd[2]->parent);
		fb_place_lb_init(&e, &s.v, s.sv->sd[2]->parent, 2, FB_LB_IDLE,
				 100 * MS, 100);
		if (asym) {
			assert_int_equal(fb_place_lb_find(&e), FB_LB_BALANCED);
			assert_int_equal(e.src, -1);
		} else {
			assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
			assert_true(e.src == 0 || e.src == 1);
		}
		sim_close(&s);
	}
}

static void test_place_balance_h3_5_help_busy_better_core(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber a;

	(void)state;
	open_asym(&s, A2, false);
	sim_fiber(&a, NULL);
	sim_set(&s, 0, 1);
	sim_set(&s, 1, 1);
	assert_int_equal(balance(&s, &e, sim_level(&s, 2, "LLC", 0), 2,
				 FB_LB_IDLE, &a),
			 FB_LB_PULL);
	assert_int_equal(e.busiest.type, FB_GROUP_SMT_BALANCE);
	assert_int_equal(e.src, 0);
	assert_true(e.active);
	sim_close(&s);
	/* The mirror (group_asym, doc/scheduler.md 4.2.3): a worse core with
	 * both threads busy is no packing source, however low its priority:
	 * the idle better core {0,1} sees an SMT imbalance; with 3 alone
	 * there, asym packing. */
	open_asym(&s, A2, false);
	sim_set(&s, 3, 1);
	for (int lone = 0; lone < 2; lone++) {
		sim_set(&s, 2, !lone);
		assert_int_equal(balance(&s, &e, s.sv->sd[0]->parent, 0,
					 FB_LB_IDLE, &a),
				 FB_LB_PULL);
		assert_int_equal(e.busiest.type, lone ? FB_GROUP_ASYM_PACKING :
							FB_GROUP_SMT_BALANCE);
	}
	assert_int_equal(e.src, 3);
	sim_close(&s);
}

static void test_place_balance_h3_6_kinds_move_to_big(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;

	(void)state;
	open_asym(&s, "a1-kinds.xml", true);
	sim_fiber(&f, NULL);
	assert_true(fb_asym_prefer(s.sv, 2, 3) && fb_asym_prefer(s.sv, 3, 0) &&
		    fb_asym_prefer(s.sv, 0, 1));
	sim_set(&s, 0, 1);
	assert_int_equal(balance(&s, &e, s.sv->sd[2], 2, FB_LB_IDLE, &f),
			 FB_LB_PULL);
	assert_int_equal(e.src, 0);
	assert_true(e.active);
	sim_set(&s, 0, 0);
	sim_set(&s, 2, 1);
	for (int dst = 0; dst < 4; dst++) {
		if (dst == 2)
			continue;
		s.sv->sd[dst]->nr_balance_failed = 0;
		balance(&s, &e, s.sv->sd[dst], dst, FB_LB_IDLE, &f);
		assert_false(e.active);
	}
	sim_close(&s);
}

/*
 * Srikar Dronamraju's machine: a 64-CPU POWER7, 16 SMT4 cores in two
 * packages, packing on the SMT level too (a core runs faster in SMT2 or
 * single-thread mode, so its lower-numbered threads are preferred).
 * (a) A core with its fibers on threads 2 and 3: idle thread 0 takes the
 * lowest-priority one, thread 3's, by a push (it runs alone).  (b) With
 * them on threads 0 and 1, threads 2 and 3 take nothing.  (c) The
 * posting's 32-thread start, every fiber on workers 32-63: an idle worker
 * of package 0 finds package 1 the asym busiest group and has one of its
 * lone running fibers pushed at its first balance; with the feature off
 * the same balance asks for no push.  (d) A lone fiber on a better worker
 * with its core to itself is never the one taken.
 */
static void test_place_balance_h3_7_power7_smt4(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;
	struct fb_domain *smt, *top;

	(void)state;
	sim_open(&s, P7, false, FB_VIEW_ASYM_PACKING | FB_VIEW_ASYM_SMT);
	sim_features(FB_FEAT_BIT(ASYM_PACKING), 0);
	sim_fiber(&f, NULL);
	assert_int_equal(s.n, 64);
	smt = s.sv->sd[0];
	assert_int_equal(smt->span_weight, 4);
	assert_true(smt->flags & FB_SD_ASYM_PACKING);
	assert_true(fb_asym_prefer(s.sv, 0, 1) && fb_asym_prefer(s.sv, 1, 2) &&
		    fb_asym_prefer(s.sv, 2, 3));

	/* (a) */
	sim_set(&s, 2, 1);
	sim_set(&s, 3, 1);
	for (int dst = 0; dst < 2; dst++) {
		smt = s.sv->sd[dst];
		smt->nr_balance_failed = 0;
		assert_int_equal(balance(&s, &e, smt, dst, FB_LB_IDLE, &f),
				 FB_LB_PULL);
		assert_int_equal(e.busiest.type, FB_GROUP_ASYM_PACKING);
		assert_int_equal(e.src, 3);
		assert_true(e.active);
	}

	/* (b) */
	sim_set(&s, 2, 0);
	sim_set(&s, 3, 0);
	sim_set(&s, 0, 1);
	sim_set(&s, 1, 1);
	for (int dst = 2; dst < 4; dst++) {
		smt = s.sv->sd[dst];
		smt->nr_balance_failed = 0;
		balance(&s, &e, smt, dst, FB_LB_IDLE, &f);
		assert_false(e.active);
		assert_int_equal(e.nr_moved, 0);
	}
	sim_set(&s, 0, 0);
	sim_set(&s, 1, 0);

	/* (c) */
	for (int w = 32; w < 64; w++)
		sim_set(&s, w, 1);
	top = s.sv->sd[0];
	while (top->parent)
		top = top->parent;
	assert_int_equal(top->span_weight, 64);
	assert_int_equal(balance(&s, &e, top, 0, FB_LB_IDLE, &f), FB_LB_PULL);
	assert_int_equal(e.busiest.type, FB_GROUP_ASYM_PACKING);
	assert_true(fb_wmask_test(&top->groups[e.busiest_group].span, 63));
	assert_true(e.src >= 32 && e.src < 64);
	assert_true(e.active);
	top->nr_balance_failed = 0;
	sim_features(0, FB_FEAT_BIT(ASYM_PACKING));
	balance(&s, &e, top, 0, FB_LB_IDLE, &f);
	assert_false(e.active);
	sim_features(FB_FEAT_BIT(ASYM_PACKING), 0);

	/* (d) Package 0 busier than package 1: worker 0 alone on its core,
	 * workers 4 and 5 sharing one.  Idle worker 32 may take a fiber, but
	 * never worker 0's: a lone fiber is not pulled off a better worker
	 * whose core it has to itself. */
	for (int w = 32; w < 64; w++)
		sim_set(&s, w, 0);
	sim_set(&s, 0, 1);
	sim_set(&s, 4, 1);
	sim_set(&s, 5, 1);
	top = s.sv->sd[32];
	while (top->parent)
		top = top->parent;
	top->nr_balance_failed = 0;
	assert_int_equal(balance(&s, &e, top, 32, FB_LB_IDLE, &f), FB_LB_PULL);
	assert_true(e.src == 4 || e.src == 5);
	assert_true(e.active);
	sim_close(&s);
}

/*
 * The same packing inside a core, with the priorities from an XML file's
 * CPU kinds by SMT thread and no FB_VIEW_ASYM_SMT: idle thread 0 has the
 * fiber of thread 3 pushed to it; thread 2 takes nothing from thread 1.
 */
static void test_place_balance_h3_8_smt_kinds(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;

	(void)state;
	open_asym(&s, "p7-kinds.xml", true);
	sim_fiber(&f, NULL);
	sim_set(&s, 3, 1);
	assert_int_equal(balance(&s, &e, s.sv->sd[0], 0, FB_LB_IDLE, &f),
			 FB_LB_PULL);
	assert_int_equal(e.busiest.type, FB_GROUP_ASYM_PACKING);
	assert_int_equal(e.src, 3);
	assert_true(e.active);
	sim_set(&s, 3, 0);
	sim_set(&s, 1, 1);
	s.sv->sd[2]->nr_balance_failed = 0;
	balance(&s, &e, s.sv->sd[2], 2, FB_LB_IDLE, &f);
	assert_false(e.active);
	sim_close(&s);
}

/* ---- H4-5 --------------------------------------------------------------- */

static enum fb_lb_verdict numa_balance(int nr, uint64_t off, long *imb)
{
	struct sim s;
	struct fb_lb_env e;
	enum fb_lb_verdict r;

	sim_open(&s, N1, false, 0);
	sim_features(0, off);
	for (int i = 0; i < nr; i++)
		sim_set(&s, i, 1);
	fb_place_lb_init(&e, &s.v, sim_level(&s, 8, "NUMA", 0), 8, FB_LB_IDLE,
			 100 * MS, 100);
	r = fb_place_lb_find(&e);
	*imb = e.imbalance;
	sim_close(&s);
	return r;
}

static void test_place_balance_h4_5_numa_allowance(void **state)
{
	long imb;

	(void)state;
	assert_int_equal(numa_balance(2, 0, &imb), FB_LB_BALANCED);
	assert_int_equal(imb, 0);
	assert_int_equal(numa_balance(3, 0, &imb), FB_LB_PULL);
	assert_int_equal(imb, 1);
	assert_int_equal(numa_balance(2, FB_FEAT_BIT(NUMA_IMB), &imb),
			 FB_LB_PULL);
	assert_int_equal(imb, 1);
}

/* ---- doc/scheduler.md 1.6.1, 1.6.6 and 1.6.7 ----------------------------- */

static void test_place_balance_only_first_idle_worker_balances(void **state)
{
	struct sim s;
	struct fb_lb_env e;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0); /* T2 */
	sim_set(&s, 4, 3);
	sim_set(&s, 0, 1);
	fb_place_lb_init(&e, &s.v, sim_level(&s, 2, "PKG", 0), 2, FB_LB_IDLE, 0,
			 0);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_SKIP); /* 1 goes first */
	fb_place_lb_init(&e, &s.v, sim_level(&s, 1, "PKG", 0), 1, FB_LB_IDLE, 0,
			 0);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	assert_int_equal(e.src, 4);
	/* newly idle: any idle worker */
	fb_place_lb_init(&e, &s.v, sim_level(&s, 2, "PKG", 0), 2,
			 FB_LB_NEWLY_IDLE, 0, 0);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	sim_close(&s);
}

/*
 * H1-2 in the balancer: the periodic balance of the LLC level writes
 * SIS_UTIL's depth from the utilisation it summed, so that an LLC whose
 * workers never go idle still gets it; the SMT level and a newly-idle
 * balance leave it alone.
 */
static void test_place_balance_llc_balance_writes_idle_scan(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	const struct fb_llc_shared *sh;

	(void)state;
	sim_open(&s, A2, false, 0);
	sh = s.sv->llc_shared[0];
	for (int w = 0; w < 4; w++)
		sim_set(&s, w, 1);
	assert_int_equal(fb_load_relaxed(&sh->nr_idle_scan), 4);
	fb_place_lb_init(&e, &s.v, sim_level(&s, 0, "SMT", 0), 0, FB_LB_BUSY, 0,
			 0);
	fb_place_lb_find(&e);
	fb_place_lb_init(&e, &s.v, sim_level(&s, 0, "LLC", 0), 0,
			 FB_LB_NEWLY_IDLE, 0, 0);
	fb_place_lb_find(&e);
	assert_int_equal(fb_load_relaxed(&sh->nr_idle_scan), 4);
	fb_place_lb_init(&e, &s.v, sim_level(&s, 0, "LLC", 0), 0, FB_LB_BUSY, 0,
			 0);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_BALANCED);
	assert_int_equal(e.sum_util, 4096);
	assert_int_equal(fb_load_relaxed(&sh->nr_idle_scan), 0);
	/* Half busy, balanced by idle worker 1: x = 512, t = 512^2 x 117^2 / (10000 x 1024) = 350,
	 * n = (1024 - 350) x 4 / 1024 = 2. */
	sim_set(&s, 1, 0);
	sim_set(&s, 3, 0);
	fb_place_lb_init(&e, &s.v, sim_level(&s, 1, "LLC", 0), 1, FB_LB_IDLE, 0,
			 0);
	assert_int_not_equal(fb_place_lb_find(&e), FB_LB_SKIP);
	assert_int_equal(fb_load_relaxed(&sh->nr_idle_scan), 2);
	sim_close(&s);
}

static void test_place_balance_detach_rules(void **state)
{
	cpu_set_t *pin = sim_mask(2, 4, 5, -1);
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f[4];
	struct fb_lb_candidate c[4];
	struct fb_domain *d;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	d = sim_level(&s, 0, "PKG", 0);
	sim_set(&s, 4, 4);
	for (int k = 0; k < 4; k++) {
		sim_fiber(&f[k], NULL);
		f[k].last_ran_ns = 0;
		c[k] = (struct fb_lb_candidate){ &f[k], false, false };
	}
	c[0].running = true;
	sim_fiber(&f[1], pin);
	f[2].last_ran_ns = 100 * MS - 100 * US; /* cache hot */
	fb_place_lb_init(&e, &s.v, d, 0, FB_LB_IDLE, 100 * MS, 100);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	assert_int_equal(e.src, 4);
	e.imbalance = 3;
	e.type = FB_MIGRATE_TASK;
	assert_int_equal(fb_place_lb_detach(&e, c, 4), 1);
	assert_false(c[0].move); /* running */
	assert_false(c[1].move); /* pinned */
	assert_false(c[2].move); /* hot */
	assert_true(c[3].move);
	assert_true(e.flags & FB_LBF_SOME_PINNED);
	assert_false(e.flags & FB_LBF_ALL_PINNED);
	assert_true(e.flags & FB_LBF_DST_PINNED); /* 2 is in dst's group */
	assert_int_equal(e.new_dst, 2);
	/* After enough failures a hot fiber may move. */
	c[3].move = false;
	d->nr_balance_failed = (unsigned)d->cache_nice_tries + 1;
	e.imbalance = 3;
	e.flags = 0;
	assert_int_equal(fb_place_lb_detach(&e, c, 4), 2);
	assert_true(c[2].move);
	/* Newly idle: one fiber at most. */
	c[2].move = c[3].move = false;
	e.idle = FB_LB_NEWLY_IDLE;
	e.imbalance = 3;
	assert_int_equal(fb_place_lb_detach(&e, c, 4), 1);
	sim_close(&s);
	CPU_FREE(pin);
}

static void test_place_balance_finish_counts_and_intervals(void **state)
{
	cpu_set_t *pin = sim_mask(3, -1);
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f[2];
	struct fb_lb_candidate c[2];
	struct fb_domain *d;
	atomic_int *imb;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	d = sim_level(&s, 0, "LLC", 0);
	imb = &d->parent->groups[d->parent->local_group].state->imbalanced;
	/* balanced: the interval doubles up to max_interval */
	for (int k = 0; k < 4; k++) {
		fb_place_lb_init(&e, &s.v, d, 0, FB_LB_IDLE, 0, 0);
		fb_place_lb_finish(&e, fb_place_lb_find(&e), NULL);
	}
	assert_int_equal(d->balance_interval, d->max_interval);
	/* everything pinned away from 0: the parent's group is imbalanced */
	sim_set(&s, 3, 2);
	for (int k = 0; k < 2; k++) {
		sim_fiber(&f[k], pin);
		c[k] = (struct fb_lb_candidate){ &f[k], k == 0, false };
	}
	sim_fiber(&f[1], sim_mask(2, 3, -1));
	fb_place_lb_init(&e, &s.v, d, 0, FB_LB_IDLE, 100 * MS, 100);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	assert_int_equal(fb_place_lb_detach(&e, c, 2), 0);
	assert_true(e.flags & FB_LBF_SOME_PINNED);
	fb_place_lb_finish(&e, FB_LB_PULL, &f[0]);
	assert_int_equal(fb_load_relaxed(imb), 1);
	/* all pinned: no failure counted, the interval may pass max */
	assert_int_equal(d->nr_balance_failed, 0);
	assert_int_equal(d->balance_interval, 2 * d->max_interval);
	/* a balanced pass clears the bit */
	sim_set(&s, 3, 0);
	fb_place_lb_init(&e, &s.v, d, 0, FB_LB_IDLE, 0, 0);
	fb_place_lb_finish(&e, fb_place_lb_find(&e), NULL);
	assert_int_equal(fb_load_relaxed(imb), 0);
	assert_int_equal(d->nr_balance_failed, 0);
	CPU_FREE(f[1].allowed);
	sim_close(&s);
	CPU_FREE(pin);
}

static void test_place_balance_imbalanced_bit_forces_one_task(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_domain *d;
	int k;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	d = sim_level(&s, 0, "PKG", 0);
	for (int i = 4; i < 8; i++)
		sim_set(&s, i, 1);
	k = sim_group_of(d, 4);
	fb_store_relaxed(&d->groups[k].state->imbalanced, 1);
	fb_place_lb_init(&e, &s.v, d, 0, FB_LB_IDLE, 0, 0);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	assert_int_equal(e.busiest.type, FB_GROUP_IMBALANCED);
	assert_int_equal(e.type, FB_MIGRATE_TASK);
	assert_int_equal(e.imbalance, 1);
	fb_store_relaxed(&d->groups[k].state->imbalanced, 0);
	sim_close(&s);
}

static void test_place_balance_active_after_repeated_failures(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f;
	struct fb_domain *d;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	d = sim_level(&s, 0, "PKG", 0);
	sim_fiber(&f, NULL);
	for (int i = 4; i < 6; i++)
		sim_set(&s, i, 1);
	sim_set(&s, 6, 1);
	/* LLC1 has 3 single fibers, LLC0 idle: move tasks, but each fiber
	 * runs: the push comes once nr_balance_failed > tries + 2. */
	for (int k = 1; k <= 4; k++) {
		balance(&s, &e, d, 0, FB_LB_IDLE, &f);
		assert_int_equal(e.type, FB_MIGRATE_TASK);
		assert_int_equal(e.active, k == 4);
	}
	assert_int_equal(d->nr_balance_failed,
			 (unsigned)d->cache_nice_tries + 1);
	sim_close(&s);
}

static void test_place_pick_victim_with_and_without_view(void **state)
{
	struct sim s;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	sim_set(&s, 5, 3);
	sim_set(&s, 2, 2);
	assert_int_equal(fb_place_pick_victim(&s.v, 0), 2); /* own LLC first */
	sim_set(&s, 2, 1);
	assert_int_equal(fb_place_pick_victim(&s.v, 0), 5);
	sim_set(&s, 0, 1);
	assert_int_equal(fb_place_pick_victim(&s.v, 0), -1); /* not idle */
	s.v.topo = NULL;
	assert_int_equal(fb_place_pick_victim(&s.v, 0), 5);
	sim_set(&s, 5, 1);
	assert_int_equal(fb_place_pick_victim(&s.v, 0), -1);
	sim_close(&s);
}

/* The idle loop's steal decision (doc/scheduler.md 1.9): the balance's
 * choice without a search; with the gate closed (no choice) the ungated
 * search only when it is due, forced, and something is queued at all. */
static void test_place_idle_steal_gated_and_rate_limited(void **state)
{
	uint64_t next = 0;
	bool searched;
	struct sim s;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	/* nothing queued anywhere: no search even when forced; the hint's
	 * reads are rate-limited like the search */
	assert_false(fb_place_steal_hint(&s.v, 0));
	assert_int_equal(fb_place_idle_steal(&s.v, 0, -1, true, 0, &next,
					     &searched),
			 -1);
	assert_false(searched);
	assert_int_equal(next, FB_STEAL_PERIOD_NS);
	next = 0;
	sim_set(&s, 5, 3);
	sim_set(&s, 2, 2);
	assert_true(fb_place_steal_hint(&s.v, 0));
	/* the balance chose 5: taken, no search, the limit untouched */
	assert_int_equal(
		fb_place_idle_steal(&s.v, 0, 5, false, 0, &next, &searched), 5);
	assert_false(searched);
	assert_int_equal(next, 0);
	/* gate closed, due: one search, then none for FB_STEAL_PERIOD_NS */
	assert_int_equal(fb_place_idle_steal(&s.v, 0, -1, false, 10 * MS, &next,
					     &searched),
			 2);
	assert_true(searched);
	assert_int_equal(next, 10 * MS + FB_STEAL_PERIOD_NS);
	for (uint64_t t = 10 * MS; t < next; t += 100 * US) {
		assert_int_equal(fb_place_idle_steal(&s.v, 0, -1, false, t,
						     &next, &searched),
				 -1);
		assert_false(searched);
	}
	/* a chosen worker with nothing queued any more is not taken */
	sim_set(&s, 6, 1);
	assert_int_equal(fb_place_idle_steal(&s.v, 0, 6, false, 10 * MS, &next,
					     &searched),
			 -1);
	assert_false(searched);
	/* forced (about to sleep, or woken): searches within the period */
	assert_int_equal(fb_place_idle_steal(&s.v, 0, -1, true, 10 * MS + 1,
					     &next, &searched),
			 2);
	assert_true(searched);
	/* due again after the period */
	assert_int_equal(fb_place_idle_steal(&s.v, 0, -1, false, next, &next,
					     &searched),
			 2);
	assert_true(searched);
	/* the own queue is no victim */
	sim_set(&s, 5, 1);
	sim_set(&s, 2, 1);
	sim_set(&s, 0, 3);
	assert_false(fb_place_steal_hint(&s.v, 0));
	sim_close(&s);
}

/*
 * PEER_RESCUE (doc/scheduler.md 1.9) on two nodes of two LLCs of two
 * workers ("pack:2 numa:1 l3:2 core:2 pu:1": nodes {0-3} {4-7}, LLCs
 * {0,1} {2,3} {4,5} {6,7}): a peer of the node that has run one fiber
 * for FB_PEER_STUCK_NS is stuck, in this LLC or the other; one of the
 * other node, one that ran a nanosecond less, the worker itself, an
 * invalid id and any peer with the feature off are not.  Without a
 * view any other worker counts.  The take is half the queue besides the
 * running fiber, rounded up, at most FB_PEER_RESCUE_MAX.
 */
static void test_place_peer_rescue_stuck_and_take(void **state)
{
	static const int take[][2] = { { 0, 0 },   { 1, 0 },   { 2, 1 },
				       { 3, 1 },   { 4, 2 },   { 5, 2 },
				       { 33, 16 }, { 200, 16 } };
	struct sim s;

	(void)state;
	sim_open(&s, "pack:2 numa:1 l3:2 core:2 pu:1", false, 0);
	assert_int_equal(s.n, 8);
	assert_true(fb_place_peer_stuck(&s.v, 0, 1, FB_PEER_STUCK_NS));
	assert_true(fb_place_peer_stuck(&s.v, 0, 3, FB_PEER_STUCK_NS));
	assert_true(fb_place_peer_stuck(&s.v, 5, 4, 10 * FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, 0, 1, FB_PEER_STUCK_NS - 1));
	assert_false(fb_place_peer_stuck(&s.v, 0, 4, 1000 * FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, 7, 3, 1000 * FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, 2, 2, 1000 * FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, 0, -1, FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, 0, 8, FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, -1, 1, FB_PEER_STUCK_NS));
	sim_features(0, FB_FEAT_BIT(PEER_RESCUE));
	assert_false(fb_place_peer_stuck(&s.v, 0, 1, 1000 * FB_PEER_STUCK_NS));
	sim_features(0, 0);
	for (size_t i = 0; i < sizeof(take) / sizeof(take[0]); i++) {
		sim_set(&s, 3, take[i][0]);
		assert_int_equal(fb_place_rescue_take(&s.v, 3), take[i][1]);
	}
	s.v.topo = NULL;
	assert_true(fb_place_peer_stuck(&s.v, 0, 4, FB_PEER_STUCK_NS));
	assert_false(fb_place_peer_stuck(&s.v, 4, 4, FB_PEER_STUCK_NS));
	s.v.topo = s.sv;
	sim_close(&s);
}

/* ids - the answer of fb_place_steal_retry(@this, @vid), at most @max,
 * as a string of digits ("" for none), for compact expectations. */
static const char *retry_ids(const struct sim *s, int this, int vid, int max)
{
	static char buf[16];
	int ids[8], n;

	assert_true(max <= 8);
	n = fb_place_steal_retry(&s->v, this, vid, ids, max);
	assert_true(n >= 0 && n <= max);
	for (int i = 0; i < n; i++)
		buf[i] = (char)('0' + ids[i]);
	buf[n] = 0;
	return buf;
}

/*
 * The steal's retry (doc/scheduler.md 1.9) on two nodes of two LLCs of
 * two workers (LLCs {0,1} {2,3} | {4,5} {6,7}).  Worker 0's victim had
 * nothing it may run: it asks the other workers with a fiber queued,
 * nearest level first and from this + 1 within one, up to the level that
 * holds the victim: the victim's own LLC stops at the node, one of the
 * other node goes on to it.  Neither the victim, nor @this, nor a worker
 * with one fiber; at most @max; without a view every such worker from
 * this + 1; with no victim, every level.
 */
static void test_place_steal_retry_nearest_first_up_to_victim(void **state)
{
	struct sim s;

	(void)state;
	sim_open(&s, "pack:2 numa:1 l3:2 core:2 pu:1", false, 0);
	assert_int_equal(s.n, 8);
	sim_set(&s, 1, 2);
	sim_set(&s, 2, 3);
	sim_set(&s, 3, 1);
	sim_set(&s, 5, 2);
	sim_set(&s, 6, 4);
	sim_set(&s, 7, 2);
	assert_string_equal(retry_ids(&s, 0, 2, 8), "1");
	assert_string_equal(retry_ids(&s, 0, 1, 8), "");
	assert_string_equal(retry_ids(&s, 0, 6, 8), "1257");
	assert_string_equal(retry_ids(&s, 0, 6, 2), "12");
	assert_string_equal(retry_ids(&s, 4, 6, 8), "57");
	assert_string_equal(retry_ids(&s, 4, 2, 8), "5671");
	assert_string_equal(retry_ids(&s, 0, -1, 8), "12567");
	assert_string_equal(retry_ids(&s, 0, 6, 0), "");
	assert_int_equal(fb_place_steal_retry(&s.v, -1, 2, NULL, 8), 0);
	assert_int_equal(fb_place_steal_retry(&s.v, 8, 2, NULL, 8), 0);
	/* an idle worker's own count is no candidate */
	sim_set(&s, 0, 3);
	assert_string_equal(retry_ids(&s, 0, 6, 8), "1257");
	s.v.topo = NULL;
	assert_string_equal(retry_ids(&s, 0, 6, 8), "1257");
	assert_string_equal(retry_ids(&s, 6, 2, 8), "7015");
	s.v.topo = s.sv;
	sim_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_balance_h3_1_lone_fiber_moves_up),
		cmocka_unit_test(test_place_balance_affinity_past_1024),
		cmocka_unit_test(
			test_place_balance_h3_1_pinned_running_fiber_stays),
		cmocka_unit_test(test_place_balance_h3_2_lowest_priority_first),
		cmocka_unit_test(test_place_balance_h3_3_busy_destination),
		cmocka_unit_test(test_place_balance_h3_4_smt_core_must_be_idle),
		cmocka_unit_test(
			test_place_balance_h3_4_no_lone_fiber_off_better),
		cmocka_unit_test(test_place_balance_h3_5_help_busy_better_core),
		cmocka_unit_test(test_place_balance_h3_6_kinds_move_to_big),
		cmocka_unit_test(test_place_balance_h3_7_power7_smt4),
		cmocka_unit_test(test_place_balance_h3_8_smt_kinds),
		cmocka_unit_test(test_place_balance_h4_5_numa_allowance),
		cmocka_unit_test(
			test_place_balance_only_first_idle_worker_balances),
		cmocka_unit_test(
			test_place_balance_llc_balance_writes_idle_scan),
		cmocka_unit_test(test_place_balance_detach_rules),
		cmocka_unit_test(
			test_place_balance_finish_counts_and_intervals),
		cmocka_unit_test(
			test_place_balance_imbalanced_bit_forces_one_task),
		cmocka_unit_test(
			test_place_balance_active_after_repeated_failures),
		cmocka_unit_test(test_place_pick_victim_with_and_without_view),
		cmocka_unit_test(test_place_idle_steal_gated_and_rate_limited),
		cmocka_unit_test(test_place_peer_rescue_stuck_and_take),
		cmocka_unit_test(
			test_place_steal_retry_nearest_first_up_to_victim),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
