/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * place-sim.h - a synthetic placement view for the pure placement tests:
 * a domain view built from an hwloc synthetic string or XML fixture, an
 * array of worker snapshots and the global state, with no thread behind
 * them.  Defaults follow doc/scheduler.md 0.3: a busy worker has util 1024 and
 * load/runnable 1024 x nr_running, an idle one all zero.
 */
#ifndef PLACE_SIM_H
#define PLACE_SIM_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "place/place.h"

#ifndef FB_TEST_TOPOLOGIES
#define FB_TEST_TOPOLOGIES "tests/topologies"
#endif

#define MS 1000000ull
#define US 1000ull

struct sim {
	struct fb_topo *t;
	struct fb_sched_view *sv;
	int n;
	struct fb_pworker *pw;
	struct fb_pworker **pp;
	struct fb_place_global g;
	struct fb_place_view v;
};

static inline void sim_features(uint64_t on, uint64_t off)
{
	fb_store_relaxed(&fb_features_mask,
			 (fb_features_default() | on) & ~off);
}

static inline void sim_open(struct sim *s, const char *spec, bool xml,
			    unsigned flags)
{
	char err[1024] = "", path[4096];

	memset(s, 0, sizeof(*s));
	if (xml)
		snprintf(path, sizeof(path), "%s/%s", FB_TEST_TOPOLOGIES, spec);
	if (fb_topo_open(&s->t, xml ? path : spec, err, sizeof(err)))
		fail_msg("fb_topo_open(%s): %s", spec, err);
	assert_int_equal(fb_topo_view_build(s->t, 0, flags, &s->sv), 0);
	s->n = s->sv->nr_workers;
	s->pw = aligned_alloc(FB_CACHELINE, sizeof(*s->pw) * (size_t)s->n);
	s->pp = calloc((size_t)s->n, sizeof(*s->pp));
	assert_non_null(s->pw);
	assert_non_null(s->pp);
	memset(s->pw, 0, sizeof(*s->pw) * (size_t)s->n);
	for (int i = 0; i < s->n; i++) {
		s->pp[i] = &s->pw[i];
		s->pw[i].id = i;
		s->pw[i].avg_idle = FB_AVG_IDLE_INIT_NS;
		s->pw[i].max_idle_balance_cost =
			FB_MAX_IDLE_BALANCE_COST_INIT_NS;
		s->pw[i].push_target = -1;
		s->pw[i].state = FB_WS_POLLING;
	}
	s->v.nr_workers = s->n;
	s->v.w = s->pp;
	s->v.topo = s->sv;
	s->v.g = &s->g;
}

static inline void sim_close(struct sim *s)
{
	fb_topo_view_free(s->sv);
	fb_topo_close(s->t);
	free(s->pw);
	free(s->pp);
	sim_features(0, 0);
}

/* sim_set - worker @w runs @nr fibers (0: idle, polling). */
static inline void sim_set(struct sim *s, int w, int nr)
{
	struct fb_pworker *p = &s->pw[w];

	p->nr_running = nr;
	p->avg.load_avg = 1024ul * (unsigned long)nr;
	p->avg.runnable_avg = 1024ul * (unsigned long)nr;
	p->avg.util_avg = nr ? 1024 : 0;
	p->runnable_weight = 1024ul * (unsigned long)nr;
	p->state = nr ? FB_WS_RUNNING : FB_WS_POLLING;
}

/* sim_mask - a CPU set for fb_pfiber.allowed from a -1-terminated list. */
static inline cpu_set_t *sim_mask(int first, ...)
{
	cpu_set_t *m = CPU_ALLOC(FB_MAX_WORKERS);
	va_list ap;

	CPU_ZERO_S(CPU_ALLOC_SIZE(FB_MAX_WORKERS), m);
	va_start(ap, first);
	for (int w = first; w >= 0; w = va_arg(ap, int))
		CPU_SET_S((size_t)w, CPU_ALLOC_SIZE(FB_MAX_WORKERS), m);
	va_end(ap);
	return m;
}

static inline void sim_fiber(struct fb_pfiber *f, cpu_set_t *allowed)
{
	memset(f, 0, sizeof(*f));
	f->allowed = allowed;
	f->nr_allowed =
		allowed ? CPU_COUNT_S(CPU_ALLOC_SIZE(FB_MAX_WORKERS), allowed) :
			  0;
	f->custom_affinity = allowed != NULL;
	f->pin = -1;
	for (int w = 0; f->nr_allowed == 1 && w < FB_MAX_WORKERS; w++)
		if (CPU_ISSET_S((size_t)w, CPU_ALLOC_SIZE(FB_MAX_WORKERS),
				allowed))
			f->pin = w;
	f->prev = -1;
	f->recent_used = -1;
	f->weight = 1024;
}

/* sim_level - worker @w's domain named @name (the @nth one, 0 first). */
static inline struct fb_domain *sim_level(struct sim *s, int w,
					  const char *name, int nth)
{
	struct fb_domain *d;

	fb_for_each_domain (s->sv, w, d) {
		if (!strcmp(d->name, name) && nth-- == 0)
			return d;
	}
	fail_msg("worker %d has no %s level", w, name);
	return NULL;
}

/* sim_group_of - index of the group of @d that holds worker @w. */
static inline int sim_group_of(const struct fb_domain *d, int w)
{
	for (int k = 0; k < d->nr_groups; k++)
		if (fb_wmask_test(&d->groups[k].span, w))
			return k;
	return -1;
}

#endif /* PLACE_SIM_H */
