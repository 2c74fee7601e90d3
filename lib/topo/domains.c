/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * domains.c - building the scheduling-domain view (doc/scheduler.md
 * 1.1).
 *
 * fb_topo_view_build() is a pure function of the PU table of topo/topo.c: it
 * starts no thread and takes no lock, so tests build the view of any
 * synthetic topology and assert on it.  The steps follow the kernel's
 * build_sched_domains(), in our own terms:
 *
 *  1. Levels.  The candidate levels, bottom up, are SMT (Core), CLS (a
 *     cluster inside the LLC), LLC, PKG (Package), NODE (the workers of one
 *     NUMA node, the kernel's NODE level: no NUMA flag) and one NUMA level
 *     per distinct node distance above the local one.  A level exists when
 *     hwloc shows its object for some PU; NODE always exists.  PKG comes
 *     before NODE unless a package holds several nodes.
 *  2. Spans.  Worker w sits on PU (w mod nr_pus).  At a level, w's span is
 *     every worker whose PU shares w's object (NUMA k: every worker of a node
 *     within the level's distance of w's node), united with w's span one
 *     level down, so that spans nest even on odd hardware.
 *  3. imb_numa_nr (doc/scheduler.md 5.2.1), on the levels before any
 *     removal.
 *  4. Removal: a level whose span equals the span one level down (for the
 *     lowest level: the worker alone) is degenerate and dropped, for that
 *     worker only.  The domains left are linked parent/child.
 *  5. Groups: the spans one level down of the workers of the span.  A group
 *     list depends only on the level and the span, so workers with the same
 *     span share one list; each domain keeps the index of its own (local)
 *     group, and iteration starts there (fb_domain_for_each_group).
 *  6. Shortcuts per worker (LLC id and size, share id, core, node, priority,
 *     the LLC / lowest NUMA / highest ASYM_PACKING domains) and one
 *     struct fb_llc_shared per LLC.
 *
 * Memory: everything but the LLC block lives in an arena owned by the view
 * and freed in one go; the LLC block is reference counted because a rebuilt
 * view with the same LLCs takes it over (topo/rcu.c).
 */
#include <errno.h>
#include <string.h>

#include "base/common.h"
#include "topo/view.h"

#define MAX_LEVELS 24
#define ARENA_CHUNK (64 * 1024)
#define BASE_FLAGS                                                             \
	(FB_SD_BALANCE_NEWIDLE | FB_SD_BALANCE_CREATE | FB_SD_WAKE_AFFINE |    \
	 FB_SD_PREFER_SIBLING)

struct arena {
	struct arena *next;
	size_t used, cap;
	_Alignas(FB_CACHELINE) unsigned char data[];
};

/* The LLC block: one struct fb_llc_shared per LLC, shared between views. */
struct fb_llc_block {
	atomic_int refs; /* views that point at it */
	int nr;
	struct fb_llc_shared sh[];
};

struct level {
	enum fb_level kind;
	const char *name;
	unsigned flags;
	int imbalance_pct;
	int cache_nice_tries;
	int numa_level;
	int distance;
};

/* A shared group list, found again by level and first worker of the span. */
struct gset {
	struct gset *next;
	const struct fb_wmask *span;
	struct fb_sched_group *groups;
	int nr;
};

struct build {
	const struct fb_topo *t;
	struct fb_sched_view *v;
	int n; /* workers */
	int nr_levels;
	struct level lv[MAX_LEVELS];
	struct fb_wmask *span; /* [n * nr_levels]: w's span at each level */
	int *imb;	       /* [n * nr_levels] */
	struct gset **gsets;   /* [nr_levels * n] by first worker */
	struct fb_group_state *gstate; /* [nr_levels * n] by first worker */
};

static const char *const flag_names[FB_SD_NR_FLAGS] = {
#define FB_SD_NAME(name) [FB_SD_BIT_##name] = #name,
	FB_SD_FLAGS(FB_SD_NAME)
#undef FB_SD_NAME
};

/* What each level kind is, from view.h's list. */
static const struct {
	const char *name;
	unsigned flags;
	int pct, tries;
} level_info[] = {
#define FB_LEVEL_INFO(name, flags, pct, tries)                                 \
	[FB_LEVEL_##name] = { #name, flags, pct, tries },
	FB_LEVELS(FB_LEVEL_INFO)
#undef FB_LEVEL_INFO
};

const char *fb_sd_flag_name(int bit)
{
	return bit >= 0 && bit < FB_SD_NR_FLAGS ? flag_names[bit] : "?";
}

/* ---- arena ------------------------------------------------------------- */

/* Zeroed, cache-line aligned memory that lives as long as @v. */
static void *arena_alloc(struct fb_sched_view *v, size_t size)
{
	struct arena *a = v->arena;
	void *p;

	size = (size + FB_CACHELINE - 1) & ~(size_t)(FB_CACHELINE - 1);
	if (!a || a->cap - a->used < size) {
		size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;

		a = fb_aligned_alloc(FB_CACHELINE, sizeof(*a) + cap);
		if (!a)
			return NULL;
		a->next = v->arena;
		a->used = 0;
		a->cap = cap;
		v->arena = a;
	}
	p = a->data + a->used;
	a->used += size;
	memset(p, 0, size);
	return p;
}

/* ---- levels and spans -------------------------------------------------- */

static const struct fb_topo_pu *pu_of(const struct build *b, int w)
{
	return fb_topo_pu(b->t, w % fb_topo_nr_pus(b->t));
}

static struct fb_wmask *span_at(const struct build *b, int w, int l)
{
	return &b->span[(size_t)w * (size_t)b->nr_levels + (size_t)l];
}

/* add_level - a candidate level of @kind, with @flags besides its own
 * (level_info). */
static void add_level(struct build *b, enum fb_level kind, unsigned flags)
{
	struct level *l = &b->lv[b->nr_levels++];

	l->kind = kind;
	l->name = level_info[kind].name;
	l->flags = flags | level_info[kind].flags;
	l->imbalance_pct = level_info[kind].pct;
	l->cache_nice_tries = level_info[kind].tries;
}

/* The object of @p a non-NUMA level is about (-1: none). */
static int level_key(const struct fb_topo_pu *p, enum fb_level kind)
{
	switch (kind) {
	case FB_LEVEL_SMT:
		return p->core;
	case FB_LEVEL_CLS:
		return p->cls;
	case FB_LEVEL_LLC:
		return p->llc;
	case FB_LEVEL_PKG:
		return p->pkg;
	default:
		return p->node;
	}
}

static bool level_present(const struct build *b, enum fb_level kind)
{
	for (int w = 0; w < b->n; w++)
		if (level_key(pu_of(b, w), kind) >= 0)
			return true;
	return false;
}

/* Does every package lie inside one node?  A package is named by its first
 * PU: each worker's node against that PU's, linear in the workers. */
static bool pkg_in_node(const struct build *b)
{
	for (int v = 0; v < b->n; v++) {
		const struct fb_topo_pu *p = pu_of(b, v);

		if (p->pkg >= 0 && fb_topo_pu(b->t, p->pkg)->node != p->node)
			return false;
	}
	return true;
}

/* Distinct node distances above the local one, ascending, into @out. */
static int numa_distances(const struct fb_topo *t, int *out, int max)
{
	int nn = fb_topo_nr_nodes(t), nr = 0, local = fb_topo_distance(t, 0, 0);

	for (int i = 0; i < nn; i++)
		for (int j = 0; j < nn; j++) {
			int d = fb_topo_distance(t, i, j), k;

			if (i == j || d <= local)
				continue;
			for (k = 0; k < nr && out[k] != d; k++)
				;
			if (k < nr || nr == max)
				continue;
			for (k = nr++; k > 0 && out[k - 1] > d; k--)
				out[k] = out[k - 1];
			out[k] = d;
		}
	return nr;
}

/*
 * Do two SMT siblings have different CPU kinds?  Then the topology gives
 * the threads of a core priorities of their own (a POWER7-like core that
 * runs faster with its high threads idle, described by an XML file's CPU
 * kinds), and packing acts on the SMT level too (doc/scheduler.md 4.2.2).
 */
static bool smt_kinds_differ(const struct build *b)
{
	for (int v = 0; v < b->n; v++)
		for (int w = v + 1; w < b->n; w++)
			if (pu_of(b, v)->core >= 0 &&
			    pu_of(b, v)->core == pu_of(b, w)->core &&
			    pu_of(b, v)->kind != pu_of(b, w)->kind)
				return true;
	return false;
}

/* Step 1: the candidate levels, their flags and parameters. */
static void make_levels(struct build *b, unsigned flags)
{
	unsigned asym = flags & FB_VIEW_ASYM_PACKING ? FB_SD_ASYM_PACKING : 0;
	unsigned smt_asym = (flags & FB_VIEW_ASYM_SMT) ||
					    (asym && smt_kinds_differ(b)) ?
				    FB_SD_ASYM_PACKING :
				    0;
	bool pkg = level_present(b, FB_LEVEL_PKG);
	int dist[MAX_LEVELS], nd;

	if (level_present(b, FB_LEVEL_SMT))
		add_level(b, FB_LEVEL_SMT, BASE_FLAGS | (asym ? smt_asym : 0));
	if (level_present(b, FB_LEVEL_CLS))
		add_level(b, FB_LEVEL_CLS, BASE_FLAGS | asym);
	if (level_present(b, FB_LEVEL_LLC))
		add_level(b, FB_LEVEL_LLC, BASE_FLAGS | asym);
	if (pkg && pkg_in_node(b))
		add_level(b, FB_LEVEL_PKG, BASE_FLAGS | asym);
	add_level(b, FB_LEVEL_NODE, BASE_FLAGS | asym);
	if (pkg && !pkg_in_node(b))
		add_level(b, FB_LEVEL_PKG, BASE_FLAGS | asym);
	nd = numa_distances(b->t, dist, MAX_LEVELS - b->nr_levels);
	for (int k = 0; k < nd; k++) {
		unsigned f = BASE_FLAGS & ~FB_SD_PREFER_SIBLING;

		if (dist[k] > FB_RECLAIM_DISTANCE)
			f &= ~(FB_SD_BALANCE_CREATE | FB_SD_WAKE_AFFINE);
		add_level(b, FB_LEVEL_NUMA, f);
		b->lv[b->nr_levels - 1].numa_level = k + 1;
		b->lv[b->nr_levels - 1].distance = dist[k];
	}
}

/*
 * Step 2: every worker's span at level @l.  The workers a worker shares
 * the level with depend only on its key there (its NUMA node at a NUMA
 * level), so each key's set is made once, in @cls (room for max(nr_pus,
 * nr_nodes) masks, zeroed): linear in the workers, not quadratic.
 */
static void make_spans(struct build *b, int l, struct fb_wmask *cls)
{
	const struct level *lv = &b->lv[l];
	int nn = fb_topo_nr_nodes(b->t);

	for (int v = 0; v < b->n; v++) {
		const struct fb_topo_pu *q = pu_of(b, v);
		int key = level_key(q, lv->kind);

		if (lv->kind != FB_LEVEL_NUMA) {
			if (key >= 0)
				fb_wmask_set(&cls[key], v);
			continue;
		}
		for (int a = 0; a < nn; a++)
			if (fb_topo_distance(b->t, a, q->node) <= lv->distance)
				fb_wmask_set(&cls[a], v);
	}
	for (int w = 0; w < b->n; w++) {
		struct fb_wmask *m = span_at(b, w, l);
		int key = level_key(pu_of(b, w), lv->kind);

		if (key >= 0)
			*m = cls[key];
		if (l == 0)
			fb_wmask_set(m, w);
		else
			fb_wmask_or(m, span_at(b, w, l - 1));
	}
}

static int weight_at(const struct build *b, int w, int l)
{
	return l < 0 ? 1 : fb_wmask_weight(span_at(b, w, l));
}

/* Step 3: doc/scheduler.md 5.2.1, on all levels of @w before removal. */
static void make_imb(struct build *b, int w)
{
	int imb = 0, imb_span = 1;

	for (int l = 0; l < b->nr_levels; l++) {
		int wt = weight_at(b, w, l),
		    *out = &b->imb[w * b->nr_levels + l];

		if (l > 0 && !(b->lv[l].flags & FB_SD_SHARE_LLC) &&
		    (b->lv[l - 1].flags & FB_SD_SHARE_LLC)) {
			int nr_llcs = wt / weight_at(b, w, l - 1), top = l + 1;

			imb = nr_llcs == 1 ? FB_MAX(1, wt >> 3) : nr_llcs;
			*out = imb;
			while (top < b->nr_levels &&
			       !(b->lv[top].flags & FB_SD_NUMA))
				top++;
			imb_span = top < b->nr_levels ? weight_at(b, w, top) :
							wt;
		} else {
			*out = imb * FB_MAX(1, wt / imb_span);
		}
	}
}

static bool kept(const struct build *b, int w, int l)
{
	return weight_at(b, w, l) > weight_at(b, w, l - 1);
}

/* ---- groups -------------------------------------------------------------- */

/* The flags of the highest domain of @i below level @l that survived. */
static unsigned child_flags(const struct build *b, int i, int l)
{
	while (--l >= 0)
		if (kept(b, i, l))
			return b->lv[l].flags;
	return 0;
}

static void fill_group(struct build *b, struct fb_sched_group *g, int l, int i,
		       const struct fb_wmask *span)
{
	const struct fb_sched_view *v = b->v;
	int x, best = -1;

	if (l == 0) {
		fb_wmask_set(&g->span, i);
	} else {
		g->span = *span_at(b, i, l - 1);
		fb_wmask_and(&g->span, span);
	}
	g->weight = fb_wmask_weight(&g->span);
	g->capacity = 1024ul * (unsigned long)g->weight;
	g->flags = child_flags(b, i, l);
	fb_wmask_for_each (x, &g->span) {
		g->nr_cores += v->core_id[x] == x;
		if (best < 0 || v->prio[x] > v->prio[best])
			best = x;
	}
	g->nr_cores = FB_MAX(g->nr_cores, 1);
	g->asym_prefer = best;
	g->state = &b->gstate[l * b->n + fb_wmask_first(&g->span)];
}

/* Step 5: the group list of @span at level @l, shared when seen before. */
static struct gset *groups_of(struct build *b, int l,
			      const struct fb_wmask *span)
{
	struct gset **head = &b->gsets[l * b->n + fb_wmask_first(span)], *s;
	struct fb_wmask covered = { { 0 } };
	int i, nr = 0;

	for (s = *head; s; s = s->next)
		if (fb_wmask_equal(s->span, span))
			return s;
	s = arena_alloc(b->v, sizeof(*s));
	if (!s)
		return NULL;
	s->span = span;
	s->groups = arena_alloc(b->v, sizeof(*s->groups) *
					      (size_t)fb_wmask_weight(span));
	if (!s->groups)
		return NULL;
	fb_wmask_for_each (i, span) {
		struct fb_sched_group *g = &s->groups[nr];

		if (fb_wmask_test(&covered, i))
			continue;
		fill_group(b, g, l, i, span);
		fb_wmask_or(&covered, &g->span);
		nr++;
	}
	s->nr = nr;
	s->next = *head;
	*head = s;
	return s;
}

/* ---- domains ------------------------------------------------------------- */

static void init_domain(struct build *b, struct fb_domain *d, int w, int l)
{
	const struct level *lv = &b->lv[l];

	d->name = lv->name;
	d->kind = lv->kind;
	d->numa_level = lv->numa_level;
	d->distance = lv->distance;
	d->flags = lv->flags;
	d->span = *span_at(b, w, l);
	d->span_weight = fb_wmask_weight(&d->span);
	d->imbalance_pct = lv->imbalance_pct;
	d->cache_nice_tries = lv->cache_nice_tries;
	d->min_interval = (unsigned)d->span_weight;
	d->max_interval = 2u * (unsigned)d->span_weight;
	d->busy_factor = FB_SD_BUSY_FACTOR;
	d->imb_numa_nr = b->imb[w * b->nr_levels + l];
	d->balance_interval = d->min_interval;
	d->newidle_call = FB_NEWIDLE_CALLS_INIT;
	d->newidle_success = FB_NEWIDLE_SUCCESS_INIT;
	d->newidle_ratio = FB_NEWIDLE_RATIO_INIT;
}

/* Step 4 and 5 for worker @w: its surviving domains, linked, with groups. */
static int make_domains(struct build *b, int w, struct fb_domain **bottom)
{
	struct fb_domain *d, *prev = NULL;
	int nr = 0, k = 0;

	for (int l = 0; l < b->nr_levels; l++)
		nr += kept(b, w, l);
	*bottom = NULL;
	if (!nr)
		return 0;
	d = arena_alloc(b->v, sizeof(*d) * (size_t)nr);
	if (!d)
		return ENOMEM;
	for (int l = 0; l < b->nr_levels; l++) {
		struct gset *s;

		if (!kept(b, w, l))
			continue;
		init_domain(b, &d[k], w, l);
		s = groups_of(b, l, &d[k].span);
		if (!s)
			return ENOMEM;
		d[k].groups = s->groups;
		d[k].nr_groups = s->nr;
		while (!fb_wmask_test(&s->groups[d[k].local_group].span, w))
			d[k].local_group++;
		d[k].level = k;
		d[k].child = prev;
		if (prev)
			prev->parent = &d[k];
		prev = &d[k++];
	}
	*bottom = d;
	return 0;
}

/* ---- per-worker shortcuts ---------------------------------------------- */

/* The highest level (before removal) carrying @flag, or -1. */
static int top_level_with(const struct build *b, unsigned flag)
{
	int top = -1;

	for (int l = 0; l < b->nr_levels; l++)
		if (b->lv[l].flags & flag)
			top = l;
	return top;
}

/* A mask per leader (first worker), shared by the members: @out[w]. */
static int share_masks(struct build *b, int l, const int *leader,
		       const struct fb_wmask **out)
{
	for (int w = 0; w < b->n; w++) {
		struct fb_wmask *m;

		if (leader[w] != w)
			continue;
		m = arena_alloc(b->v, sizeof(*m));
		if (!m)
			return ENOMEM;
		if (l >= 0)
			*m = *span_at(b, w, l);
		else
			fb_wmask_set(m, w);
		out[w] = m;
	}
	for (int w = 0; w < b->n; w++)
		out[w] = out[leader[w]];
	return 0;
}

struct arrays {
	int *llc_id, *llc_size, *share_id, *core_id, *node, *prio;
	const struct fb_wmask **core_span, **llc_span;
	struct fb_domain **sd, **sd_llc, **sd_numa, **sd_asym;
	struct fb_llc_shared **llc_shared;
};

static int alloc_arrays(struct build *b, struct arrays *a)
{
	size_t n = (size_t)b->n, ip = n * sizeof(int), pp = n * sizeof(void *);

	a->llc_id = arena_alloc(b->v, ip);
	a->llc_size = arena_alloc(b->v, ip);
	a->share_id = arena_alloc(b->v, ip);
	a->core_id = arena_alloc(b->v, ip);
	a->node = arena_alloc(b->v, ip);
	a->prio = arena_alloc(b->v, ip);
	a->core_span = arena_alloc(b->v, pp);
	a->llc_span = arena_alloc(b->v, pp);
	a->sd = arena_alloc(b->v, pp);
	a->sd_llc = arena_alloc(b->v, pp);
	a->sd_numa = arena_alloc(b->v, pp);
	a->sd_asym = arena_alloc(b->v, pp);
	a->llc_shared = arena_alloc(b->v, pp);
	b->gsets = arena_alloc(b->v, (size_t)b->nr_levels * pp);
	b->gstate = arena_alloc(b->v,
				(size_t)b->nr_levels * n * sizeof(*b->gstate));
	if (!a->llc_id || !a->llc_size || !a->share_id || !a->core_id ||
	    !a->node || !a->prio || !a->core_span || !a->llc_span || !a->sd ||
	    !a->sd_llc || !a->sd_numa || !a->sd_asym || !a->llc_shared ||
	    !b->gsets || !b->gstate)
		return ENOMEM;
	return 0;
}

/* Core, LLC, node and priority of every worker (before the domains). */
static int make_ids(struct build *b, struct arrays *a)
{
	int smt = b->lv[0].kind == FB_LEVEL_SMT ? 0 : -1;
	int llc = top_level_with(b, FB_SD_SHARE_LLC);
	struct fb_sched_view *v = b->v;

	for (int w = 0; w < b->n; w++) {
		const struct fb_topo_pu *p = pu_of(b, w);

		a->core_id[w] = smt < 0 ? w :
					  fb_wmask_first(span_at(b, w, smt));
		a->llc_id[w] = llc < 0 ? w : fb_wmask_first(span_at(b, w, llc));
		a->llc_size[w] = llc < 0 ? 1 : weight_at(b, w, llc);
		a->node[w] = fb_topo_node_os(b->t, p->node);
		a->prio[w] = p->kind * 65536 - w;
		v->has_smt |= smt >= 0 && weight_at(b, w, smt) > 1;
		v->nr_llcs += a->llc_id[w] == w;
	}
	if (share_masks(b, smt, a->core_id, a->core_span) ||
	    share_masks(b, llc, a->llc_id, a->llc_span))
		return ENOMEM;
	return 0;
}

/* The shortcuts that point at domains, for worker @w. */
static void make_shortcuts(struct build *b, struct arrays *a, int w)
{
	struct fb_domain *d;

	a->share_id[w] = a->llc_id[w];
	for (d = a->sd[w]; d; d = d->parent) {
		if (d->flags & FB_SD_SHARE_LLC)
			a->sd_llc[w] = d;
		if ((d->flags & FB_SD_NUMA) && !a->sd_numa[w])
			a->sd_numa[w] = d;
		if (d->flags & FB_SD_ASYM_PACKING)
			a->sd_asym[w] = d;
		if (d->flags & FB_SD_CLUSTER)
			a->share_id[w] = fb_wmask_first(&d->span);
	}
}

static int make_llc_block(struct build *b, struct arrays *a)
{
	struct fb_llc_block *blk;
	int idx = 0;

	blk = fb_aligned_alloc(FB_CACHELINE,
			       sizeof(*blk) + (size_t)b->v->nr_llcs *
						      sizeof(blk->sh[0]));
	if (!blk)
		return ENOMEM;
	atomic_init(&blk->refs, 1);
	blk->nr = b->v->nr_llcs;
	b->v->llc_block = blk;
	for (int w = 0; w < b->n; w++) {
		struct fb_llc_shared *sh;

		if (a->llc_id[w] != w)
			continue;
		sh = &blk->sh[idx++];
		atomic_init(&sh->nr_busy_workers, a->llc_size[w]);
		atomic_init(&sh->has_idle_cores, 0);
		atomic_init(&sh->nr_idle_scan, a->llc_size[w]);
		a->llc_shared[w] = sh;
	}
	for (int w = 0; w < b->n; w++)
		a->llc_shared[w] = a->llc_shared[a->llc_id[w]];
	return 0;
}

static int make_nodes(struct build *b)
{
	int nn = fb_topo_nr_nodes(b->t);
	int *os = arena_alloc(b->v, (size_t)nn * sizeof(int));
	int *dist = arena_alloc(b->v, (size_t)(nn * nn) * sizeof(int));

	if (!os || !dist)
		return ENOMEM;
	for (int i = 0; i < nn; i++) {
		os[i] = fb_topo_node_os(b->t, i);
		for (int j = 0; j < nn; j++)
			dist[i * nn + j] = fb_topo_distance(b->t, i, j);
	}
	b->v->nr_nodes = nn;
	b->v->node_os = os;
	b->v->distance = dist;
	return 0;
}

static int build(struct build *b, unsigned flags)
{
	struct arrays a;
	int rc, nr_cls;

	make_levels(b, flags);
	b->span = fb_calloc((size_t)b->n * (size_t)b->nr_levels,
			    sizeof(*b->span));
	b->imb = fb_calloc((size_t)b->n * (size_t)b->nr_levels, sizeof(int));
	if (!b->span || !b->imb)
		return ENOMEM;
	nr_cls = FB_MAX(fb_topo_nr_pus(b->t), fb_topo_nr_nodes(b->t));
	for (int l = 0; l < b->nr_levels; l++) {
		struct fb_wmask *cls = fb_calloc((size_t)nr_cls, sizeof(*cls));

		if (!cls)
			return ENOMEM;
		make_spans(b, l, cls);
		fb_free(cls);
	}
	for (int w = 0; w < b->n; w++)
		make_imb(b, w);
	rc = alloc_arrays(b, &a);
	rc = rc ? rc : make_ids(b, &a);
	rc = rc ? rc : make_nodes(b);
	b->v->core_id = a.core_id; /* the groups read these two */
	b->v->prio = a.prio;
	for (int w = 0; !rc && w < b->n; w++)
		rc = make_domains(b, w, &a.sd[w]);
	rc = rc ? rc : make_llc_block(b, &a);
	if (rc)
		return rc;
	for (int w = 0; w < b->n; w++)
		make_shortcuts(b, &a, w);
	b->v->llc_id = a.llc_id;
	b->v->llc_size = a.llc_size;
	b->v->share_id = a.share_id;
	b->v->node = a.node;
	b->v->core_span = a.core_span;
	b->v->llc_span = a.llc_span;
	b->v->sd = a.sd;
	b->v->sd_llc = a.sd_llc;
	b->v->sd_numa = a.sd_numa;
	b->v->sd_asym = a.sd_asym;
	b->v->llc_shared = a.llc_shared;
	return 0;
}

int fb_wmask_nr_words = 1;

void fb_wmask_reserve(int nr_workers)
{
	int want = (FB_MIN(nr_workers, FB_MAX_WORKERS) + 63) / 64;
	int have = fb_wmask_words();

	while (have < want && !__atomic_compare_exchange_n(
				      &fb_wmask_nr_words, &have, want, false,
				      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

int fb_topo_view_build(const struct fb_topo *t, int nr_workers, unsigned flags,
		       struct fb_sched_view **out)
{
	struct build b = { .t = t };
	int rc;

	if (nr_workers < 0 || nr_workers > FB_MAX_WORKERS)
		return EINVAL;
	b.n = nr_workers ? nr_workers : fb_topo_nr_pus(t);
	if (b.n > FB_MAX_WORKERS)
		return EINVAL;
	/* before any mask is built: the walks below see every word set */
	fb_wmask_reserve(b.n);
	b.v = fb_calloc(1, sizeof(*b.v));
	if (!b.v)
		return ENOMEM;
	b.v->nr_workers = b.n;
	b.v->nr_pus = fb_topo_nr_pus(t);
	b.v->build_flags = flags;
	rc = build(&b, flags);
	fb_free(b.span);
	fb_free(b.imb);
	if (rc) {
		fb_topo_view_free(b.v);
		return rc;
	}
	*out = b.v;
	return 0;
}

static void llc_block_put(struct fb_llc_block *blk)
{
	if (blk && atomic_fetch_sub(&blk->refs, 1) == 1)
		fb_free(blk);
}

bool fb_topo_llc_block_adopt(struct fb_sched_view *v,
			     const struct fb_sched_view *old)
{
	struct fb_llc_shared **sh = (struct fb_llc_shared **)v->llc_shared;
	ptrdiff_t off;

	if (!old || old->nr_workers != v->nr_workers ||
	    old->llc_block == v->llc_block ||
	    memcmp(old->llc_id, v->llc_id,
		   (size_t)v->nr_workers * sizeof(int)) != 0)
		return false;
	for (int w = 0; w < v->nr_workers; w++) {
		off = sh[w] - v->llc_block->sh;
		sh[w] = &old->llc_block->sh[off];
	}
	atomic_fetch_add(&old->llc_block->refs, 1);
	llc_block_put(v->llc_block);
	v->llc_block = old->llc_block;
	return true;
}

void fb_topo_view_free(struct fb_sched_view *v)
{
	struct arena *a, *next;

	if (!v)
		return;
	llc_block_put(v->llc_block);
	for (a = v->arena; a; a = next) {
		next = a->next;
		fb_free(a);
	}
	fb_free(v);
}
