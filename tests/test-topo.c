/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-topo.c - the topology layer, white box: loading LIBFIBER_TOPOLOGY
 * values and the domain view built for every test topology of
 * doc/scheduler.md 0.3 (worker count, levels, spans, groups, flags, LLC ids,
 * imb_numa_nr), without starting a thread.
 *
 * The 0.3 topologies are regular, so each is described by its levels: a
 * level spans the aligned block of `span` workers around a worker, and its
 * groups are the blocks of `child` workers inside it, the worker's own
 * block first.  A few explicit spans guard the description itself.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/common.h"
#include "topo/view.h"

#ifndef FB_TEST_TOPOLOGIES
#define FB_TEST_TOPOLOGIES "tests/topologies"
#endif

#define BASE                                                                   \
	(FB_SD_BALANCE_NEWIDLE | FB_SD_BALANCE_CREATE | FB_SD_WAKE_AFFINE |    \
	 FB_SD_PREFER_SIBLING)
#define F_SMT (BASE | FB_SD_SHARE_CAPACITY | FB_SD_SHARE_LLC)
#define F_CLS (BASE | FB_SD_CLUSTER | FB_SD_SHARE_LLC)
#define F_LLC (BASE | FB_SD_SHARE_LLC)
#define F_PKG BASE
#define F_NUMA                                                                 \
	(FB_SD_BALANCE_NEWIDLE | FB_SD_BALANCE_CREATE | FB_SD_WAKE_AFFINE |    \
	 FB_SD_NUMA | FB_SD_SERIALIZE)
#define F_NUMA_FAR (FB_SD_BALANCE_NEWIDLE | FB_SD_NUMA | FB_SD_SERIALIZE)

struct exp_level {
	const char *name;
	int span, child; /* aligned block sizes */
	unsigned flags;
	int imb_numa_nr;
	int pct, tries;
};

struct exp_topo {
	const char *spec; /* synthetic string or fixture file name */
	bool xml;
	int nr_workers;
	int llc;  /* LLC size */
	int node; /* workers per node */
	int nr_levels;
	struct exp_level lv[5];
};

/* doc/scheduler.md 0.3, 1.1.5, 5.2.1 and 5.3. */
static const struct exp_topo S1 = { "pack:1 l3:1 core:4 pu:2",
				    false,
				    8,
				    8,
				    8,
				    2,
				    { { "SMT", 2, 1, F_SMT, 0, 110, 0 },
				      { "LLC", 8, 2, F_LLC, 0, 117, 1 } } };
static const struct exp_topo S2 = { "pack:1 l3:1 core:8 pu:1",
				    false,
				    8,
				    8,
				    8,
				    1,
				    { { "LLC", 8, 1, F_LLC, 0, 117, 1 } } };
static const struct exp_topo T2 = { "pack:1 l3:2 core:4 pu:1",
				    false,
				    8,
				    4,
				    8,
				    2,
				    { { "LLC", 4, 1, F_LLC, 0, 117, 1 },
				      { "PKG", 8, 4, F_PKG, 2, 117, 1 } } };
static const struct exp_topo A1 = { "pack:1 l3:1 core:4 pu:1",
				    false,
				    4,
				    4,
				    4,
				    1,
				    { { "LLC", 4, 1, F_LLC, 0, 117, 1 } } };
static const struct exp_topo A2 = { "pack:1 l3:1 core:2 pu:2",
				    false,
				    4,
				    4,
				    4,
				    2,
				    { { "SMT", 2, 1, F_SMT, 0, 110, 0 },
				      { "LLC", 4, 2, F_LLC, 0, 117, 1 } } };
static const struct exp_topo N1 = { "pack:2 numa:1 l3:4 core:2 pu:1",
				    false,
				    16,
				    2,
				    8,
				    3,
				    { { "LLC", 2, 1, F_LLC, 0, 117, 1 },
				      { "PKG", 8, 2, F_PKG, 4, 117, 1 },
				      { "NUMA", 16, 8, F_NUMA, 4, 117, 2 } } };
static const struct exp_topo N2 = { "pack:2 numa:1 l3:1 core:16 pu:2",
				    false,
				    64,
				    32,
				    32,
				    3,
				    { { "SMT", 2, 1, F_SMT, 0, 110, 0 },
				      { "LLC", 32, 2, F_LLC, 0, 117, 1 },
				      { "NUMA", 64, 32, F_NUMA, 4, 117, 2 } } };
static const struct exp_topo N3 = { "pack:2 numa:1 l3:1 core:4 pu:1",
				    false,
				    8,
				    4,
				    4,
				    2,
				    { { "LLC", 4, 1, F_LLC, 0, 117, 1 },
				      { "NUMA", 8, 4, F_NUMA, 1, 117, 2 } } };
static const struct exp_topo N4 = { "n4.xml",
				    true,
				    32,
				    4,
				    8,
				    4,
				    { { "LLC", 4, 1, F_LLC, 0, 117, 1 },
				      { "PKG", 8, 4, F_PKG, 2, 117, 1 },
				      { "NUMA", 16, 8, F_NUMA, 2, 117, 2 },
				      { "NUMA", 32, 16, F_NUMA, 4, 117, 2 } } };
/* H4-6: the pair distance raised to 40 (> FB_RECLAIM_DISTANCE). */
static const struct exp_topo N4_FAR = { "n4-far.xml",
					true,
					32,
					4,
					8,
					4,
					{ { "LLC", 4, 1, F_LLC, 0, 117, 1 },
					  { "PKG", 8, 4, F_PKG, 2, 117, 1 },
					  { "NUMA", 16, 8, F_NUMA, 2, 117, 2 },
					  { "NUMA", 32, 16, F_NUMA_FAR, 4, 117,
					    2 } } };

static char *fixture(const char *name)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/%s", FB_TEST_TOPOLOGIES, name);
	return path;
}

static struct fb_topo *open_topo(const char *spec, bool xml)
{
	struct fb_topo *t = NULL;
	char err[1024] = "";
	int rc = fb_topo_open(&t, xml ? fixture(spec) : spec, err, sizeof(err));

	if (rc)
		fail_msg("fb_topo_open(%s): %d %s", spec, rc, err);
	return t;
}

static struct fb_sched_view *build(struct fb_topo *t, int n, unsigned flags)
{
	struct fb_sched_view *v = NULL;

	assert_int_equal(fb_topo_view_build(t, n, flags, &v), 0);
	assert_non_null(v);
	return v;
}

static void assert_block(const struct fb_wmask *m, int first, int size)
{
	assert_int_equal(fb_wmask_weight(m), size);
	assert_int_equal(fb_wmask_first(m), first);
	assert_int_equal(fb_wmask_next(m, first + size), -1);
}

static void check_level(const struct fb_sched_view *v,
			const struct fb_domain *d, const struct exp_level *e,
			int w)
{
	int first = w / e->span * e->span, nr = e->span / e->child;
	int mine = (w - first) / e->child;
	const struct fb_sched_group *g;
	int k;

	assert_string_equal(d->name, e->name);
	assert_block(&d->span, first, e->span);
	assert_int_equal(d->span_weight, e->span);
	assert_int_equal(d->flags, e->flags);
	assert_int_equal(d->imb_numa_nr, e->imb_numa_nr);
	assert_int_equal(d->imbalance_pct, e->pct);
	assert_int_equal(d->cache_nice_tries, e->tries);
	assert_int_equal(d->nr_groups, nr);
	fb_domain_for_each_group (d, g, k) {
		int gfirst = first + (mine + k) % nr * e->child;

		assert_block(&g->span, gfirst, e->child);
		assert_int_equal(g->weight, e->child);
		assert_int_equal(g->capacity, 1024ul * (unsigned long)e->child);
		assert_int_equal(g->asym_prefer, gfirst);
	}
	(void)v;
}

static void check_topo(const struct exp_topo *e)
{
	struct fb_topo *t = open_topo(e->spec, e->xml);
	struct fb_sched_view *v = build(t, 0, 0);
	const struct fb_domain *d;

	assert_int_equal(fb_topo_nr_pus(t), e->nr_workers);
	assert_false(fb_topo_is_real(t));
	assert_int_equal(v->nr_workers, e->nr_workers);
	assert_int_equal(v->nr_llcs, e->nr_workers / e->llc);
	assert_int_equal(v->nr_nodes, e->nr_workers / e->node);
	for (int w = 0; w < v->nr_workers; w++) {
		int i = 0;

		fb_for_each_domain (v, w, d) {
			assert_true(i < e->nr_levels);
			assert_int_equal(d->level, i);
			assert_ptr_equal(d->child, i ? d - 1 : NULL);
			check_level(v, d, &e->lv[i++], w);
		}
		assert_int_equal(i, e->nr_levels);
		assert_int_equal(v->llc_id[w], w / e->llc * e->llc);
		assert_int_equal(v->llc_size[w], e->llc);
		assert_int_equal(v->share_id[w], v->llc_id[w]);
		assert_int_equal(v->node[w], w / e->node);
		assert_int_equal(fb_topo_worker_node(t, w), w / e->node);
		assert_int_equal(v->prio[w], -w);
		assert_block(v->llc_span[w], v->llc_id[w], e->llc);
		assert_non_null(v->sd_llc[w]);
		assert_int_equal(v->sd_llc[w]->span_weight, e->llc);
		assert_null(v->sd_asym[w]);
		if (e->nr_workers > e->node)
			assert_int_equal(v->sd_numa[w]->span_weight,
					 e->lv[e->nr_levels - 1].span /
						 (e->nr_levels == 4 ? 2 : 1));
		else
			assert_null(v->sd_numa[w]);
	}
	fb_topo_view_free(v);
	fb_topo_close(t);
}

static void test_topo_s1_domains(void **state)
{
	(void)state;
	check_topo(&S1);
}

static void test_topo_s2_domains(void **state)
{
	(void)state;
	check_topo(&S2);
}

static void test_topo_t2_domains(void **state)
{
	(void)state;
	check_topo(&T2);
}

static void test_topo_a1_domains(void **state)
{
	(void)state;
	check_topo(&A1);
}

static void test_topo_a2_domains(void **state)
{
	(void)state;
	check_topo(&A2);
}

static void test_topo_n1_domains(void **state)
{
	(void)state;
	check_topo(&N1);
}

static void test_topo_n2_domains(void **state)
{
	(void)state;
	check_topo(&N2);
}

static void test_topo_n3_domains(void **state)
{
	(void)state;
	check_topo(&N3);
}

static void test_topo_n4_domains(void **state)
{
	(void)state;
	check_topo(&N4);
}

static void test_topo_n4_far_domains(void **state)
{
	(void)state;
	check_topo(&N4_FAR);
}

/* Spelled out for one worker, independently of the block description. */
static void test_topo_n4_worker9_spelled_out(void **state)
{
	struct fb_topo *t = open_topo("n4.xml", true);
	struct fb_sched_view *v = build(t, 0, 0);
	const struct fb_domain *d = v->sd[9];
	const struct fb_sched_group *g = d->groups;

	(void)state;
	assert_string_equal(d->name, "LLC"); /* {8-11} */
	assert_block(&d->span, 8, 4);
	assert_int_equal(fb_wmask_first(&g[d->local_group].span), 9);
	d = d->parent; /* PKG {8-15} */
	assert_block(&d->span, 8, 8);
	assert_block(&d->groups[d->local_group].span, 8, 4);
	assert_block(&d->groups[(d->local_group + 1) % 2].span, 12, 4);
	d = d->parent; /* NUMA 20: nodes 0, 1 */
	assert_int_equal(d->distance, 20);
	assert_int_equal(d->numa_level, 1);
	assert_block(&d->span, 0, 16);
	assert_block(&d->groups[d->local_group].span, 8, 8);
	assert_ptr_equal(v->sd_numa[9], d);
	d = d->parent; /* NUMA 30: everything */
	assert_int_equal(d->distance, 30);
	assert_int_equal(d->numa_level, 2);
	assert_block(&d->span, 0, 32);
	assert_block(&d->groups[d->local_group].span, 0, 16);
	assert_null(d->parent);
	assert_int_equal(v->distance[0 * 4 + 1], 20);
	assert_int_equal(v->distance[1 * 4 + 2], 30);
	fb_topo_view_free(v);
	fb_topo_close(t);
}

static int imb_of(const struct fb_sched_view *v, int w, const char *name,
		  int weight)
{
	const struct fb_domain *d;

	fb_for_each_domain (v, w, d)
		if (!strcmp(d->name, name) && d->span_weight == weight)
			return d->imb_numa_nr;
	fail_msg("worker %d has no %s domain of %d", w, name, weight);
	return -1;
}

/* H4-1: the allowance per level, for every worker. */
static void test_topo_h4_1_imb_numa_nr(void **state)
{
	static const struct {
		const char *spec;
		bool xml;
		const char *name;
		int weight, imb;
	} c[] = {
		{ "pack:2 numa:1 l3:4 core:2 pu:1", false, "PKG", 8, 4 },
		{ "pack:2 numa:1 l3:4 core:2 pu:1", false, "NUMA", 16, 4 },
		{ "pack:2 numa:1 l3:1 core:16 pu:2", false, "NUMA", 64, 4 },
		{ "pack:2 numa:1 l3:1 core:4 pu:1", false, "NUMA", 8, 1 },
		{ "n4.xml", true, "PKG", 8, 2 },
		{ "n4.xml", true, "NUMA", 16, 2 },
		{ "n4.xml", true, "NUMA", 32, 4 },
	};

	(void)state;
	for (size_t i = 0; i < FB_ARRAY_SIZE(c); i++) {
		struct fb_topo *t = open_topo(c[i].spec, c[i].xml);
		struct fb_sched_view *v = build(t, 0, 0);

		for (int w = 0; w < v->nr_workers; w++)
			assert_int_equal(imb_of(v, w, c[i].name, c[i].weight),
					 c[i].imb);
		fb_topo_view_free(v);
		fb_topo_close(t);
	}
}

/* H4-6: creation and wake-affine stop at a level farther than 30. */
static void test_topo_h4_6_far_level_drops_create(void **state)
{
	struct fb_topo *t = open_topo("n4-far.xml", true);
	struct fb_sched_view *v = build(t, 0, 0);
	const struct fb_domain *top = v->sd_numa[0]->parent;

	(void)state;
	assert_int_equal(top->distance, 40);
	assert_false(top->flags & FB_SD_BALANCE_CREATE);
	assert_false(top->flags & FB_SD_WAKE_AFFINE);
	assert_true(top->flags & FB_SD_BALANCE_NEWIDLE);
	assert_true(v->sd_numa[0]->flags & FB_SD_BALANCE_CREATE);
	assert_false(v->sd_numa[0]->flags & FB_SD_PREFER_SIBLING);
	fb_topo_view_free(v);
	fb_topo_close(t);
}

/* A cache shared by part of an LLC makes a CLS level and the share id. */
static void test_topo_cls_level_from_shared_l2(void **state)
{
	struct fb_topo *t = open_topo("pack:1 l3:1 l2:2 core:2 pu:2", false);
	struct fb_sched_view *v = build(t, 0, 0);
	const struct fb_domain *d = v->sd[5]->parent;

	(void)state;
	assert_string_equal(d->name, "CLS");
	assert_int_equal(d->flags, F_CLS);
	assert_block(&d->span, 4, 4);
	assert_int_equal(d->groups[d->local_group].flags, F_SMT);
	assert_int_equal(d->groups[d->local_group].nr_cores, 1);
	assert_int_equal(v->share_id[5], 4);
	assert_int_equal(v->llc_id[5], 0);
	assert_true(fb_share_llc(v, 1, 5));
	assert_false(fb_share_resources(v, 1, 5));
	assert_true(fb_share_resources(v, 4, 7));
	assert_ptr_equal(v->sd_llc[5], d->parent);
	assert_int_equal(d->parent->groups[0].nr_cores, 2);
	fb_topo_view_free(v);
	fb_topo_close(t);
}

static void test_topo_share_llc_and_core(void **state)
{
	struct fb_topo *t = open_topo("pack:1 l3:2 core:2 pu:2", false);
	struct fb_sched_view *v = build(t, 0, 0);

	(void)state;
	assert_true(v->has_smt);
	assert_true(fb_share_llc(v, 0, 3));
	assert_false(fb_share_llc(v, 3, 4));
	assert_true(fb_share_resources(v, 4, 7));
	assert_int_equal(v->core_id[3], 2);
	assert_block(v->core_span[3], 2, 2);
	assert_ptr_equal(v->llc_shared[0], v->llc_shared[3]);
	assert_ptr_not_equal(v->llc_shared[3], v->llc_shared[4]);
	assert_int_equal((uintptr_t)v->llc_shared[4] % FB_CACHELINE, 0);
	assert_int_equal(fb_load_relaxed(&v->llc_shared[4]->nr_busy_workers),
			 4);
	assert_int_equal(fb_load_relaxed(&v->llc_shared[4]->has_idle_cores), 0);
	assert_int_equal(fb_load_relaxed(&v->llc_shared[4]->nr_idle_scan), 4);
	fb_topo_view_free(v);
	fb_topo_close(t);
}

/* doc/scheduler.md 1.1.3: balancing parameters and newidle statistics. */
static void test_topo_balance_parameters(void **state)
{
	struct fb_topo *t = open_topo(N1.spec, false);
	struct fb_sched_view *v = build(t, 0, 0);
	const struct fb_domain *d;

	(void)state;
	fb_for_each_domain (v, 3, d) {
		assert_int_equal(d->min_interval, d->span_weight);
		assert_int_equal(d->max_interval, 2 * d->span_weight);
		assert_int_equal(d->balance_interval, d->span_weight);
		assert_int_equal(d->busy_factor, 16);
		assert_int_equal(d->nr_balance_failed, 0);
		assert_int_equal(d->max_newidle_lb_cost, 0);
		assert_int_equal(d->newidle_call, 512);
		assert_int_equal(d->newidle_success, 256);
		assert_int_equal(d->newidle_ratio, 512);
		assert_int_equal(d->last_balance, 0);
	}
	fb_topo_view_free(v);
	fb_topo_close(t);
}

/* doc/scheduler.md 4.2.2: ASYM_PACKING on non-NUMA levels above SMT. */
static void test_topo_asym_packing_levels(void **state)
{
	struct fb_topo *t = open_topo(N1.spec, false);
	struct fb_sched_view *v = build(t, 0, FB_VIEW_ASYM_PACKING);
	struct fb_topo *t2 = open_topo(A2.spec, false);
	struct fb_sched_view *v2 = build(t2, 0, FB_VIEW_ASYM_PACKING);
	struct fb_sched_view *v3 =
		build(t2, 0, FB_VIEW_ASYM_PACKING | FB_VIEW_ASYM_SMT);

	(void)state;
	assert_true(v->sd[9]->flags & FB_SD_ASYM_PACKING);	   /* LLC */
	assert_true(v->sd[9]->parent->flags & FB_SD_ASYM_PACKING); /* PKG */
	assert_false(v->sd_numa[9]->flags & FB_SD_ASYM_PACKING);
	assert_ptr_equal(v->sd_asym[9], v->sd[9]->parent);
	assert_int_equal(
		v->sd_asym[9]->groups[v->sd_asym[9]->local_group].asym_prefer,
		8);
	assert_false(v2->sd[3]->flags & FB_SD_ASYM_PACKING); /* SMT */
	assert_ptr_equal(v2->sd_asym[3], v2->sd_llc[3]);
	assert_true(v3->sd[3]->flags & FB_SD_ASYM_PACKING);
	fb_topo_view_free(v3);
	fb_topo_view_free(v2);
	fb_topo_view_free(v);
	fb_topo_close(t2);
	fb_topo_close(t);
}

/*
 * H3 on SMT: CPU kinds that differ between the threads of a core
 * (p7-kinds.xml: threads 0-1 of each SMT4 core above threads 2-3) put
 * ASYM_PACKING on the SMT level without FB_VIEW_ASYM_SMT; equal kinds
 * (a1-kinds.xml has one PU per core, the synthetic string none) do not,
 * and without ASYM_PACKING no level has it.
 */
static void test_topo_asym_smt_from_cpu_kinds(void **state)
{
	struct fb_topo *t = open_topo("p7-kinds.xml", true);
	struct fb_sched_view *v = build(t, 0, FB_VIEW_ASYM_PACKING);
	struct fb_sched_view *off = build(t, 0, 0);
	struct fb_topo *t2 = open_topo("pack:1 l3:1 core:2 pu:4", false);
	struct fb_sched_view *v2 = build(t2, 0, FB_VIEW_ASYM_PACKING);

	(void)state;
	assert_int_equal(v->nr_workers, 8);
	for (int w = 0; w < 8; w++) {
		assert_int_equal(v->sd[w]->span_weight, 4); /* SMT */
		assert_true(v->sd[w]->flags & FB_SD_ASYM_PACKING);
		assert_false(off->sd[w]->flags & FB_SD_ASYM_PACKING);
		assert_false(v2->sd[w]->flags & FB_SD_ASYM_PACKING);
	}
	/* Threads 0-1 of any core before threads 2-3 of any, lower ids
	 * first inside a kind. */
	assert_true(fb_asym_prefer(v, 0, 1) && fb_asym_prefer(v, 1, 4) &&
		    fb_asym_prefer(v, 4, 5) && fb_asym_prefer(v, 5, 2) &&
		    fb_asym_prefer(v, 2, 3) && fb_asym_prefer(v, 3, 6) &&
		    fb_asym_prefer(v, 6, 7));
	/* The LLC level's group of core 1 prefers its thread 0. */
	assert_int_equal(v->sd[6]->parent->groups[v->sd[6]->parent->local_group]
				 .asym_prefer,
			 4);
	fb_topo_view_free(v2);
	fb_topo_view_free(off);
	fb_topo_view_free(v);
	fb_topo_close(t2);
	fb_topo_close(t);
}

/* H3-6: CPU kinds make workers 2 and 3 "big": order 2 > 3 > 0 > 1. */
static void test_topo_asym_priorities_from_cpu_kinds(void **state)
{
	struct fb_topo *t = open_topo("a1-kinds.xml", true);
	struct fb_sched_view *v = build(t, 0, FB_VIEW_ASYM_PACKING);
	const struct fb_domain *d = v->sd[0];

	(void)state;
	assert_true(fb_asym_prefer(v, 2, 3));
	assert_true(fb_asym_prefer(v, 3, 0));
	assert_true(fb_asym_prefer(v, 0, 1));
	assert_string_equal(d->name, "LLC");
	assert_int_equal(d->groups[0].asym_prefer, 0);
	assert_int_equal(d->groups[2].asym_prefer, 2);
	fb_topo_view_free(v);
	fb_topo_close(t);
}

/* Fewer workers than PUs: the first ones, in logical order. */
static void test_topo_fewer_workers_take_the_first_pus(void **state)
{
	struct fb_topo *t = open_topo(N1.spec, false);
	struct fb_sched_view *v = build(t, 10, 0);

	(void)state;
	assert_int_equal(v->nr_workers, 10);
	assert_block(&v->sd_numa[9]->span, 0, 10);
	assert_int_equal(v->sd_numa[9]->nr_groups, 2);
	assert_block(&v->sd_numa[9]->groups[v->sd_numa[9]->local_group].span, 8,
		     2);
	assert_int_equal(v->node[9], 1);
	fb_topo_view_free(v);
	fb_topo_close(t);
}

static void test_topo_view_build_rejects_too_many_workers(void **state)
{
	struct fb_topo *t = open_topo(S1.spec, false);
	struct fb_sched_view *v = NULL;

	(void)state;
	assert_int_equal(fb_topo_view_build(t, FB_MAX_WORKERS + 1, 0, &v),
			 EINVAL);
	assert_int_equal(fb_topo_view_build(t, -1, 0, &v), EINVAL);
	assert_null(v);
	fb_topo_close(t);
}

/* The simulator's size: 4096 PUs give a 4096-worker view whose masks reach
 * the last word (worker 4095), and the walks find it there. */
static void test_topo_view_builds_4096_workers(void **state)
{
	struct fb_topo *t = open_topo("pack:2 numa:2 l3:8 core:32 pu:4", false);
	struct fb_sched_view *v = build(t, 0, 0);
	const struct fb_domain *top;

	(void)state;
	assert_int_equal(v->nr_workers, 4096);
	assert_int_equal(v->nr_llcs, 32);
	assert_block(v->llc_span[4095], 3968, 128);
	assert_block(v->core_span[4095], 4092, 4);
	for (top = v->sd[4095]; top->parent; top = top->parent)
		;
	assert_block(&top->span, 0, 4096);
	assert_int_equal(fb_wmask_next(&top->span, 4095), 4095);
	assert_true(fb_wmask_test(&top->span, 4095));
	fb_topo_view_free(v);
	fb_topo_close(t);
}

/* One PU more than the limit: refused, no view. */
static void test_topo_view_refuses_4097_workers(void **state)
{
	struct fb_topo *t = open_topo("pack:17 core:241 pu:1", false);
	struct fb_sched_view *v = NULL;

	(void)state;
	assert_int_equal(fb_topo_nr_pus(t), 4097);
	assert_int_equal(fb_topo_view_build(t, 0, 0, &v), EINVAL);
	assert_null(v);
	fb_topo_close(t);
}

/* A mask holding only worker 4095: fb_wmask_set() raises the bound of the
 * walks, so next, first, weight and equal all see the last word. */
static void test_topo_wmask_last_word(void **state)
{
	struct fb_wmask m, c;

	(void)state;
	assert_true(fb_wmask_words() < 64);
	memset(&m, 0, sizeof(m));
	fb_wmask_set(&m, 4095);
	assert_int_equal(fb_wmask_words(), 64);
	assert_int_equal(fb_wmask_first(&m), 4095);
	assert_int_equal(fb_wmask_next(&m, 64), 4095);
	assert_int_equal(fb_wmask_next(&m, 4096 - 1), 4095);
	assert_int_equal(fb_wmask_weight(&m), 1);
	memset(&c, 0xff, sizeof(c));
	fb_wmask_copy(&c, &m);
	assert_true(fb_wmask_equal(&c, &m));
	fb_wmask_clear(&c, 4095);
	assert_false(fb_wmask_equal(&c, &m));
	assert_int_equal(fb_wmask_first(&c), -1);
}

/* Every allocation of the build may fail: ENOMEM, nothing leaked. */
static void test_topo_view_build_survives_allocation_failures(void **state)
{
	struct fb_topo *t = open_topo(N1.spec, false);
	struct fb_sched_view *v = NULL;
	int rc;

	(void)state;
	for (long n = 1;; n++) {
		fb_fault_fail_nth(n);
		rc = fb_topo_view_build(t, 0, FB_VIEW_ASYM_PACKING, &v);
		fb_fault_fail_nth(0);
		if (rc == 0)
			break;
		assert_int_equal(rc, ENOMEM);
		assert_null(v);
		assert_true(n < 1000);
	}
	fb_topo_view_free(v);
	fb_topo_close(t);
}

static void expect_refused(const char *spec, const char *quote)
{
	struct fb_topo *t = NULL;
	char err[1024] = "";

	assert_int_equal(fb_topo_open(&t, spec, err, sizeof(err)), EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "LIBFIBER_TOPOLOGY"));
	assert_non_null(strstr(err, spec));
	if (quote && !strstr(err, quote))
		fail_msg("\"%s\" not in: %s", quote, err);
}

static void test_topo_open_refuses_garbage(void **state)
{
	(void)state;
	expect_refused("garbage", "unknown object type");
	expect_refused("pack:2 core:0 pu:1", NULL);
}

/* A synthetic topology too large to load in seconds is refused before
 * hwloc spends minutes on it (a flat level of thousands); a large one
 * with narrow levels still loads. */
static void test_topo_open_refuses_a_huge_synthetic_topology(void **state)
{
	struct fb_topo *t = NULL;
	char err[1024] = "";

	(void)state;
	expect_refused("pu:4097", "at most 4096 objects per level");
	expect_refused("pack:1000 pu:1000", "at most 16384 PUs");
	expect_refused("pack:2(memory=1GB) [numa(memory=1GB)] core:2 pu:4097",
		       "too large");
	expect_refused("pack:8 core:1024 pu:4", "too large");
	assert_int_equal(fb_topo_open(&t, "pack:16 l3:4 core:32 pu:8", err,
				      sizeof(err)),
			 0);
	assert_int_equal(fb_topo_nr_pus(t), 16384);
	fb_topo_close(t);
}

static void test_topo_open_refuses_missing_file(void **state)
{
	(void)state;
	expect_refused("/nonexistent/libfiber-topology.xml",
		       "No such file or directory");
}

static void test_topo_open_refuses_empty_file(void **state)
{
	char path[] = "/tmp/libfiber-topo-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	expect_refused(path, NULL);
	unlink(path);
}

/*
 * A malformed XML file: the message quotes hwloc's reason (libxml2's, or
 * hwloc's own minimalistic parser's where hwloc was built without it), which
 * hwloc prints only when HWLOC_XML_VERBOSE was set the first time it looked
 * in this process.  Loading a good XML file first makes sure it has looked.
 */
static void test_topo_open_quotes_hwloc_on_malformed_xml(void **state)
{
	struct fb_topo *t = open_topo("n4.xml", true);
	char err[1024] = "";

	(void)state;
	fb_topo_close(t);
	t = NULL;
	assert_int_equal(fb_topo_open_named(&t, fixture("malformed.xml"),
					    "fiber_config.topology", err,
					    sizeof(err)),
			 EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "fiber_config.topology=\""));
	assert_non_null(strstr(err, "malformed.xml\": not a readable hwloc "
				    "XML file (hwloc: "));
	if (!strstr(err, "Opening and ending tag mismatch: object line 4 and "
			 "topology") &&
	    !strstr(err, "minimalistic parser"))
		fail_msg("no reason from hwloc in: %s", err);
	assert_null(getenv("HWLOC_XML_VERBOSE"));
}

static void test_topo_real_machine_opens(void **state)
{
	struct fb_topo *t = NULL;
	struct fb_sched_view *v;
	char err[1024];

	(void)state;
	assert_int_equal(fb_topo_open(&t, NULL, err, sizeof(err)), 0);
	assert_true(fb_topo_is_real(t));
	assert_true(fb_topo_nr_pus(t) >= 1);
	assert_true(fb_topo_worker_node(t, 0) >= 0);
	v = build(t, 0, 0);
	assert_int_equal(v->nr_workers, fb_topo_nr_pus(t));
	for (int w = 0; w < v->nr_workers; w++)
		assert_int_equal(v->node[w], fb_topo_worker_node(t, w));
	fb_topo_view_free(v);
	fb_topo_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topo_wmask_last_word), /* first: the bound
							  starts low */
		cmocka_unit_test(test_topo_s1_domains),
		cmocka_unit_test(test_topo_s2_domains),
		cmocka_unit_test(test_topo_t2_domains),
		cmocka_unit_test(test_topo_a1_domains),
		cmocka_unit_test(test_topo_a2_domains),
		cmocka_unit_test(test_topo_n1_domains),
		cmocka_unit_test(test_topo_n2_domains),
		cmocka_unit_test(test_topo_n3_domains),
		cmocka_unit_test(test_topo_n4_domains),
		cmocka_unit_test(test_topo_n4_far_domains),
		cmocka_unit_test(test_topo_n4_worker9_spelled_out),
		cmocka_unit_test(test_topo_h4_1_imb_numa_nr),
		cmocka_unit_test(test_topo_h4_6_far_level_drops_create),
		cmocka_unit_test(test_topo_cls_level_from_shared_l2),
		cmocka_unit_test(test_topo_share_llc_and_core),
		cmocka_unit_test(test_topo_balance_parameters),
		cmocka_unit_test(test_topo_asym_packing_levels),
		cmocka_unit_test(test_topo_asym_smt_from_cpu_kinds),
		cmocka_unit_test(test_topo_asym_priorities_from_cpu_kinds),
		cmocka_unit_test(test_topo_fewer_workers_take_the_first_pus),
		cmocka_unit_test(test_topo_view_build_rejects_too_many_workers),
		cmocka_unit_test(test_topo_view_builds_4096_workers),
		cmocka_unit_test(test_topo_view_refuses_4097_workers),
		cmocka_unit_test(
			test_topo_view_build_survives_allocation_failures),
		cmocka_unit_test(test_topo_open_refuses_garbage),
		cmocka_unit_test(
			test_topo_open_refuses_a_huge_synthetic_topology),
		cmocka_unit_test(test_topo_open_refuses_missing_file),
		cmocka_unit_test(test_topo_open_refuses_empty_file),
		cmocka_unit_test(test_topo_open_quotes_hwloc_on_malformed_xml),
		cmocka_unit_test(test_topo_real_machine_opens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
