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

#ifndef FB_MAX_WORKERS
#define FB_MAX_WORKERS 1024
#endif
#define FB_WMASK_WORDS (FB_MAX_WORKERS / 64)

/* A set of workers, fixed size (128 bytes for 1024 workers). */
struct fb_wmask {
	uint64_t bits[FB_WMASK_WORDS];
};

static inline bool fb_wmask_test(const struct fb_wmask *m, int w)
{
	return (m->bits[(unsigned)w / 64] >> ((unsigned)w % 64)) & 1;
}

static inline void fb_wmask_set(struct fb_wmask *m, int w)
{
	m->bits[(unsigned)w / 64] |= UINT64_C(1) << ((unsigned)w % 64);
}

static inline void fb_wmask_clear(struct fb_wmask *m, int w)
{
	m->bits[(unsigned)w / 64] &= ~(UINT64_C(1) << ((unsigned)w % 64));
}

static inline int fb_wmask_weight(const struct fb_wmask *m)
{
	int n = 0;

	for (int i = 0; i < FB_WMASK_WORDS; i++)
		n += __builtin_popcountll(m->bits[i]);
	return n;
}

/* fb_wmask_next - the first worker >= @w in @m, or -1. */
static inline int fb_wmask_next(const struct fb_wmask *m, int w)
{
	for (int i = w / 64; w >= 0 && i < FB_WMASK_WORDS; i++) {
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
	for (int i = 0; i < FB_WMASK_WORDS; i++)
		if (a->bits[i] != b->bits[i])
			return false;
	return true;
}

/* Iterate over the workers of @m in increasing order. */
#define fb_wmask_for_each(w, m)                                                \
	for ((w) = fb_wmask_first(m); (w) >= 0;                                \
	     (w) = fb_wmask_next((m), (w) + 1))

#endif /* FB_TOPO_H */
