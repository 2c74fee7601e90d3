// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * wgroup.c - the registry of wake groups (doc/scheduler.md 1.10); the
 * decisions are place/wgroup.c's.
 *
 * A pipe's or a channel's wakeup (FB_WF_GROUP) between two fibers asks
 * fb_place_wgroup_join() whether one joins the other's group or both
 * form one.  Steady state asks without a lock and hears "keep": both are
 * in a group already, or the wakee's group is full.  Only a change takes
 * the runtime's registry lock, asks again under it and acts; so does a
 * member's exit.  A new group's home is the worker with the fewest
 * members homed on it, so that groups spread over the workers as they
 * form; a home never moves (the balancer can still take members away,
 * see place/balance.c).
 *
 * Lifetimes.  A group is freed when its last member leaves, at the
 * member's exit; a member's pointer is therefore good for whoever owns
 * the member, which is all that reads it: the member's worker, its
 * waker, a balancer holding the run queue it sits in.  Groups of fibers
 * that a shutdown abandons are freed with the runtime; those fibers
 * never run again (the epoch), and a descriptor's next create clears
 * the pointer.  A fork's child starts a runtime of its own, with a
 * registry of its own; the parent's is never used there.
 */
#include <errno.h>

#include "sched/sched.h"

struct wgroup {
	struct fb_wgroup g;
	struct fb_list node; /* fb_rt->wgroups.all */
};

int fb_wgroups_init(struct fb_runtime *r)
{
	struct fb_wgroups *s = &r->wgroups;

	fb_list_init(&s->all);
	s->live = 0;
	s->homed = fb_calloc((size_t)r->nr_workers, sizeof(*s->homed));
	return s->homed ? 0 : ENOMEM;
}

void fb_wgroups_fini(struct fb_runtime *r)
{
	struct fb_wgroups *s = &r->wgroups;

	if (!s->homed) /* never initialised */
		return;
	while (!fb_list_empty(&s->all)) {
		struct wgroup *g =
			fb_list_entry(s->all.next, struct wgroup, node);

		fb_list_del(&g->node);
		fb_free(g);
	}
	fb_free(s->homed);
	s->homed = NULL;
	s->live = 0;
}

/* join - @f becomes a member of @g.  Registry lock held. */
static void join(struct fb_wgroups *s, struct fb_fiber *f, struct fb_wgroup *g)
{
	f->pf.group = g;
	fb_store_relaxed(&g->nr, fb_load_relaxed(&g->nr) + 1);
	s->homed[fb_load_relaxed(&g->home)]++;
}

/* move_home - @g takes @to's home, for good.  Registry lock held. */
static void move_home(struct fb_wgroups *s, struct fb_wgroup *g,
		      const struct fb_wgroup *to)
{
	int nr = fb_load_relaxed(&g->nr), home = fb_load_relaxed(&to->home);

	s->homed[fb_load_relaxed(&g->home)] -= (unsigned int)nr;
	s->homed[home] += (unsigned int)nr;
	fb_store_relaxed(&g->home, home);
	fb_store_relaxed(&g->moved, true);
}

void fb_wgroup_note(struct fb_worker *this, struct fb_fiber *waker,
		    struct fb_fiber *wakee)
{
	struct fb_wgroups *s = &fb_rt->wgroups;
	struct wgroup *n = NULL;

	if (fb_place_wgroup_join(&waker->pf, &wakee->pf) == FB_WGROUP_KEEP)
		return;
	fb_spin_lock(&s->lock);
	switch (fb_place_wgroup_join(&waker->pf, &wakee->pf)) {
	case FB_WGROUP_KEEP:
		break;
	case FB_WGROUP_NEW:
		n = fb_malloc(sizeof(*n));
		if (!n) /* groups are advice: none this time */
			break;
		fb_store_relaxed(&n->g.nr, 0);
		fb_store_relaxed(&n->g.moved, false);
		fb_store_relaxed(&n->g.home,
				 fb_place_wgroup_home(&fb_rt->view, s->homed));
		fb_list_add_tail(&n->node, &s->all);
		s->live++;
		join(s, waker, &n->g);
		join(s, wakee, &n->g);
		FB_COUNT(this, wgroups_formed);
		break;
	case FB_WGROUP_WAKER_JOINS:
		join(s, waker, wakee->pf.group);
		FB_COUNT(this, wgroup_joins);
		break;
	case FB_WGROUP_WAKEE_JOINS:
		join(s, wakee, waker->pf.group);
		FB_COUNT(this, wgroup_joins);
		break;
	case FB_WGROUP_WAKER_FOLLOWS:
		move_home(s, waker->pf.group, wakee->pf.group);
		FB_COUNT(this, wgroup_moves);
		break;
	case FB_WGROUP_WAKEE_FOLLOWS:
		move_home(s, wakee->pf.group, waker->pf.group);
		FB_COUNT(this, wgroup_moves);
		break;
	}
	fb_spin_unlock(&s->lock);
}

void fb_wgroup_leave(struct fb_fiber *f)
{
	struct fb_wgroups *s = &fb_rt->wgroups;
	struct fb_wgroup *g = f->pf.group;
	int nr;

	fb_spin_lock(&s->lock);
	f->pf.group = NULL;
	s->homed[fb_load_relaxed(&g->home)]--;
	nr = fb_load_relaxed(&g->nr) - 1;
	fb_store_relaxed(&g->nr, nr);
	if (!nr) {
		struct wgroup *w = fb_container_of(g, struct wgroup, g);

		fb_list_del(&w->node);
		s->live--;
		fb_free(w);
	}
	fb_spin_unlock(&s->lock);
}

long fb_wgroups_live(void)
{
	struct fb_wgroups *s = &fb_rt->wgroups;
	long n;

	fb_spin_lock(&s->lock);
	n = s->live;
	fb_spin_unlock(&s->lock);
	return n;
}
