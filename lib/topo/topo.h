/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * topo/topo.h - the machine's shape: struct fb_topo, the loaded hwloc topology
 * (the real machine restricted to the PUs the process may use, an hwloc
 * synthetic description or an hwloc XML file), with workers in hwloc
 * logical PU order, thread binding and NUMA nodes (topo/topo.c); and the worker
 * masks every layer above uses.  The domain view built on it is view.h,
 * its publication to lock-free readers rcu.h.
 */
#ifndef FB_TOPO_H
#define FB_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/common.h"

struct fb_topo;

/*
 * fb_topo_open - load the topology.  @spec is NULL/"" for the real machine
 * (restricted to the PUs the process may use), an hwloc synthetic string, or
 * the path of an hwloc XML file.  On failure writes a message into @err
 * naming LIBFIBER_TOPOLOGY, the value and hwloc's complaint, which it gets
 * by loading @spec again in a child process (topo/topo.c); with @errlen 0 it
 * writes nothing and starts no child.
 * Context: any thread, before the runtime starts; starts no thread.
 * Return: 0 and *@tp; EINVAL for a bad @spec; ENOMEM.
 */
int fb_topo_open(struct fb_topo **tp, const char *spec, char *err,
		 size_t errlen);
/* fb_topo_open_named - fb_topo_open(), with @name in place of
 * LIBFIBER_TOPOLOGY in the message (e.g. "fiber_config.topology"). */
int fb_topo_open_named(struct fb_topo **tp, const char *spec, const char *name,
		       char *err, size_t errlen);
/* fb_topo_close - free @t (NULL is fine).  No view built from it may be
 * in use by then. */
void fb_topo_close(struct fb_topo *t);
/* Number of PUs, i.e. the default number of workers. */
int fb_topo_nr_pus(const struct fb_topo *t);
/* True when the topology is the machine the process runs on. */
bool fb_topo_is_real(const struct fb_topo *t);
/*
 * fb_topo_bind_self - pin the calling thread for worker @worker: to that PU
 * on a real topology, round-robin over the process's real PUs on a synthetic
 * one.  Worker w sits on PU (w mod nr_pus) when there are more workers than
 * PUs.  Return: 0 or an errno (binding is advice: callers log and go on).
 */
int fb_topo_bind_self(const struct fb_topo *t, int worker);
/* NUMA node (OS index) of worker @worker, or -1 when unknown.  On a real
 * machine this is also libnuma's numa_node_of_cpu() of the worker's PU. */
int fb_topo_worker_node(const struct fb_topo *t, int worker);

/*
 * What the domain builder reads about one PU (PU logical index).  Objects
 * are named by the logical index of their first PU; -1 when hwloc shows no
 * such object above the PU.
 */
struct fb_topo_pu {
	int core; /* Core */
	int cls;  /* cluster: a cache, Die or Group inside the LLC that
			   holds more than one core but not the whole LLC */
	int llc;  /* last-level cache: the outermost data cache */
	int pkg;  /* Package */
	int node; /* NUMA node, index 0..nr_nodes-1 (never -1) */
	int kind; /* CPU kind rank, higher is more efficient; 0 */
};

/* fb_topo_pu - the facts about PU @pu (0 <= @pu < nr_pus). */
const struct fb_topo_pu *fb_topo_pu(const struct fb_topo *t, int pu);
/* Number of NUMA nodes (at least 1). */
int fb_topo_nr_nodes(const struct fb_topo *t);
/* OS index of node @node (0..nr_nodes-1), as libnuma numbers it. */
int fb_topo_node_os(const struct fb_topo *t, int node);
/*
 * fb_topo_distance - relative distance from node @a to node @b (indices):
 * hwloc's latency matrix if the topology has one, else libnuma's
 * numa_distance() on a real machine, else 10 local and 20 remote.
 */
int fb_topo_distance(const struct fb_topo *t, int a, int b);
/* fb_topo_describe - one line such as "synthetic \"pack:2 ...\": 2 Package,
 * 2 NUMANode, ..., 16 PU" into @buf. */
void fb_topo_describe(const struct fb_topo *t, char *buf, size_t len);

/* ---- worker masks -------------------------------------------------------- */

/*
 * FB_MAX_WORKERS is the most workers a view, and so the simulator, can have;
 * the runtime's own limit is lower (FIBER_WORKERS_MAX, include/fiber.h).  A
 * mask has room for all of them, but no walk looks past the words in use:
 * fb_wmask_nr_words, the words that the largest view built so far (or the
 * highest worker any mask was given) needs.  It only grows, so a mask built
 * under a smaller bound is still read whole; with a few workers every walk
 * is a word or two, however large FB_MAX_WORKERS is.  fb_wmask_zero and
 * fb_wmask_copy write the words in use only: a mask they made takes a
 * worker past the bound only after fb_wmask_reserve (a mask zeroed whole,
 * by memset, calloc or an initialiser, takes any worker).
 */
#ifndef FB_MAX_WORKERS
#define FB_MAX_WORKERS 4096
#endif
#define FB_WMASK_WORDS (FB_MAX_WORKERS / 64)

/* A set of workers, fixed size (512 bytes for 4096 workers). */
struct fb_wmask {
	uint64_t bits[FB_WMASK_WORDS];
};

/* Words of any mask that may have bits set, 1..FB_WMASK_WORDS; relaxed
 * atomic, only grows (fb_wmask_reserve). */
extern int fb_wmask_nr_words;

/* fb_wmask_words - the words a walk must look at. */
static inline int fb_wmask_words(void)
{
	return __atomic_load_n(&fb_wmask_nr_words, __ATOMIC_RELAXED);
}

/*
 * fb_wmask_reserve - let masks hold workers 0..@nr_workers-1: raise
 * fb_wmask_nr_words to cover them (never lowers it).  Whoever sets bits
 * for other threads to read calls it before they read (the view builder
 * before publication, the runtime before its workers start).
 * Context: any; lock-free.  @nr_workers must be at most FB_MAX_WORKERS.
 */
void fb_wmask_reserve(int nr_workers);

static inline bool fb_wmask_test(const struct fb_wmask *m, int w)
{
	return (m->bits[(unsigned)w / 64] >> ((unsigned)w % 64)) & 1;
}

static inline void fb_wmask_set(struct fb_wmask *m, int w)
{
	if (__builtin_expect((unsigned)w / 64 >= (unsigned)fb_wmask_words(), 0))
		fb_wmask_reserve(w + 1);
	m->bits[(unsigned)w / 64] |= UINT64_C(1) << ((unsigned)w % 64);
}

static inline void fb_wmask_clear(struct fb_wmask *m, int w)
{
	m->bits[(unsigned)w / 64] &= ~(UINT64_C(1) << ((unsigned)w % 64));
}

/* fb_wmask_zero - empty @m (the words in use). */
static inline void fb_wmask_zero(struct fb_wmask *m)
{
	int n = fb_wmask_words();

	for (int i = 0; i < n; i++)
		m->bits[i] = 0;
}

/* fb_wmask_copy - *@dst = *@src, the words in use only. */
static inline void fb_wmask_copy(struct fb_wmask *dst,
				 const struct fb_wmask *src)
{
	int n = fb_wmask_words();

	for (int i = 0; i < n; i++)
		dst->bits[i] = src->bits[i];
}

/* fb_wmask_and - @dst &= @src. */
static inline void fb_wmask_and(struct fb_wmask *dst,
				const struct fb_wmask *src)
{
	int n = fb_wmask_words();

	for (int i = 0; i < n; i++)
		dst->bits[i] &= src->bits[i];
}

/* fb_wmask_or - @dst |= @src. */
static inline void fb_wmask_or(struct fb_wmask *dst, const struct fb_wmask *src)
{
	int n = fb_wmask_words();

	for (int i = 0; i < n; i++)
		dst->bits[i] |= src->bits[i];
}

/* fb_wmask_andnot - @dst &= ~@src. */
static inline void fb_wmask_andnot(struct fb_wmask *dst,
				   const struct fb_wmask *src)
{
	int n = fb_wmask_words();

	for (int i = 0; i < n; i++)
		dst->bits[i] &= ~src->bits[i];
}

static inline int fb_wmask_weight(const struct fb_wmask *m)
{
	int n = 0, words = fb_wmask_words();

	for (int i = 0; i < words; i++)
		n += __builtin_popcountll(m->bits[i]);
	return n;
}

/* fb_wmask_next - the first worker >= @w in @m, or -1. */
static inline int fb_wmask_next(const struct fb_wmask *m, int w)
{
	int words = fb_wmask_words();

	for (int i = w / 64; w >= 0 && i < words; i++) {
		uint64_t b = m->bits[i];

		if (i == w / 64)
			b &= ~UINT64_C(0) << (w % 64);
		if (b)
			return i * 64 + __builtin_ctzll(b);
	}
	return -1;
}

static inline int fb_wmask_first(const struct fb_wmask *m)
{
	return fb_wmask_next(m, 0);
}

static inline bool fb_wmask_equal(const struct fb_wmask *a,
				  const struct fb_wmask *b)
{
	int words = fb_wmask_words();

	for (int i = 0; i < words; i++)
		if (a->bits[i] != b->bits[i])
			return false;
	return true;
}

/* Iterate over the workers of @m in increasing order. */
#define fb_wmask_for_each(w, m)                                                \
	for ((w) = fb_wmask_first(m); (w) >= 0;                                \
	     (w) = fb_wmask_next((m), (w) + 1))

#endif /* FB_TOPO_H */
