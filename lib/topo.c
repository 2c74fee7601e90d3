/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * topo.c - loading the topology with hwloc, binding workers, NUMA nodes.
 *
 * fb_topo_open() loads one of three sources: the real machine, restricted
 * (hwloc_topology_restrict) to the PUs the process is bound to, so that
 * logical PU i is worker i; an hwloc synthetic description; or an hwloc XML
 * file.  The machine itself is always loaded too (t->host), because workers
 * of a synthetic topology are bound round-robin to its PUs.
 *
 * Then it digests the tree into a flat table, one struct fb_topo_pu per PU
 * (its core, cluster, LLC, package, node and CPU kind, each named by its
 * first PU), plus the list of nodes that hold PUs and their distance matrix.
 * topo-domains.c builds the domain view from that table alone, so it never
 * walks hwloc objects.
 *
 * Distances come from hwloc's latency matrix (Linux's SLIT, or the
 * distances2 block of an XML file); a real machine without one asks libnuma
 * (numa_distance) when the build has it (FB_HAVE_NUMA); otherwise every
 * remote node is at 20 and the local one at 10, the kernel's defaults.  Node
 * numbers handed out are OS indexes, the numbers libnuma uses.
 */
#include <errno.h>
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if FB_HAVE_NUMA
#include <numa.h>
#endif

#include "common.h"
#include "topo.h"

#define LOCAL_DISTANCE 10 /* kernel LOCAL_DISTANCE / REMOTE_DISTANCE */
#define REMOTE_DISTANCE 20

struct fb_topo {
	hwloc_topology_t topo; /* the topology workers follow */
	hwloc_topology_t host; /* the machine (== topo when real) */
	int nr_pus;
	int nr_host_pus;
	bool real;
	struct fb_topo_pu *pus; /* [nr_pus] */
	int nr_nodes;
	int *node_os;  /* [nr_nodes] */
	int *distance; /* [nr_nodes * nr_nodes] */
	char desc[256];
};

/* Load the machine, restricted to the PUs this process may run on. */
static int load_host(hwloc_topology_t *out)
{
	hwloc_topology_t t;
	hwloc_bitmap_t set;
	int rc = ENOMEM;

	if (hwloc_topology_init(&t) < 0)
		return ENOMEM;
	if (hwloc_topology_load(t) < 0)
		goto fail;
	set = hwloc_bitmap_alloc();
	if (!set)
		goto fail;
	if (hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) == 0 &&
	    hwloc_bitmap_intersects(set,
				    hwloc_topology_get_topology_cpuset(t)) &&
	    !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(t),
				     set) &&
	    hwloc_topology_restrict(t, set, 0) < 0) {
		hwloc_bitmap_free(set);
		goto fail;
	}
	hwloc_bitmap_free(set);
	*out = t;
	return 0;
fail:
	hwloc_topology_destroy(t);
	return rc;
}

static bool spec_is_xml(const char *spec)
{
	struct stat st;
	size_t n = strlen(spec);

	return strchr(spec, '/') || (n > 4 && !strcmp(spec + n - 4, ".xml")) ||
	       stat(spec, &st) == 0;
}

static int set_source(hwloc_topology_t t, const char *spec, bool xml)
{
	if (xml)
		return hwloc_topology_set_xml(t, spec);
	return hwloc_topology_set_synthetic(t, spec);
}

/*
 * Replay a refused @spec with hwloc's verbose variable set and stderr sent
 * to a memory file, to quote hwloc's own reason in the message.  This runs
 * only on the error path of fb_topo_open, before any worker exists; it
 * briefly changes the environment and file descriptor 2 of the process.
 */
static void hwloc_complaint(const char *spec, bool xml, char *buf, size_t len)
{
	const char *var = xml ? "HWLOC_XML_VERBOSE" : "HWLOC_SYNTHETIC_VERBOSE";
	bool had = getenv(var) != NULL;
	hwloc_topology_t t;
	int fd, saved;
	ssize_t n;

	buf[0] = '\0';
	fd = memfd_create("libfiber-hwloc", MFD_CLOEXEC);
	if (fd < 0)
		return;
	fflush(stderr);
	saved = dup(2);
	if (saved < 0 || dup2(fd, 2) < 0)
		goto out;
	if (!had)
		setenv(var, "1", 0);
	if (hwloc_topology_init(&t) == 0) {
		if (set_source(t, spec, xml) == 0)
			hwloc_topology_load(t);
		hwloc_topology_destroy(t);
	}
	if (!had)
		unsetenv(var);
	fflush(stderr);
	dup2(saved, 2);
	n = pread(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	for (char *p = buf; *p; p++) /* one line; drop libxml2's caret */
		if (*p == '\n' || *p == '^')
			*p = ' ';
	for (n = (ssize_t)strlen(buf); n > 0 && buf[n - 1] == ' '; n--)
		buf[n - 1] = '\0';
out:
	if (saved >= 0)
		close(saved);
	close(fd);
}

static int load_spec(struct fb_topo *t, const char *spec, const char *name,
		     char *err, size_t errlen)
{
	bool xml = spec_is_xml(spec);
	char why[512];
	struct stat st;

	if (hwloc_topology_init(&t->topo) < 0)
		return ENOMEM;
	if (xml && stat(spec, &st) < 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
	} else {
		if (set_source(t->topo, spec, xml) == 0 &&
		    hwloc_topology_load(t->topo) == 0)
			return 0;
		hwloc_complaint(spec, xml, why, sizeof(why));
		if (!why[0])
			snprintf(why, sizeof(why), "hwloc refused it");
	}
	hwloc_topology_destroy(t->topo);
	t->topo = NULL;
	snprintf(err, errlen,
		 "%s=\"%s\": %s (hwloc: %s); expected an hwloc "
		 "synthetic description such as \"pack:2 numa:1 l3:2 core:4 "
		 "pu:2\" or the path of an hwloc XML file",
		 name, spec,
		 xml ? "not a readable hwloc XML file" :
		       "not a valid hwloc synthetic description",
		 why);
	return EINVAL;
}

/* Logical index of the first PU inside @obj. */
static int first_pu(hwloc_topology_t topo, hwloc_obj_t obj)
{
	hwloc_obj_t pu = hwloc_get_obj_inside_cpuset_by_type(topo, obj->cpuset,
							     HWLOC_OBJ_PU, 0);

	return pu ? (int)pu->logical_index : -1;
}

static int nr_cores_in(hwloc_topology_t topo, hwloc_obj_t obj)
{
	return hwloc_get_nbobjs_inside_cpuset_by_type(topo, obj->cpuset,
						      HWLOC_OBJ_CORE);
}

static bool may_be_cluster(hwloc_obj_t o)
{
	return hwloc_obj_type_is_dcache(o->type) || o->type == HWLOC_OBJ_DIE ||
	       o->type == HWLOC_OBJ_GROUP;
}

/* Fill core, cls, llc and pkg of @p from the ancestors of @pu. */
static void digest_ancestors(hwloc_topology_t topo, hwloc_obj_t pu,
			     struct fb_topo_pu *p)
{
	hwloc_obj_t o, llc = NULL, cls = NULL;

	p->core = p->cls = p->llc = p->pkg = -1;
	for (o = pu->parent; o; o = o->parent) {
		if (o->type == HWLOC_OBJ_CORE)
			p->core = first_pu(topo, o);
		else if (o->type == HWLOC_OBJ_PACKAGE)
			p->pkg = first_pu(topo, o);
		else if (hwloc_obj_type_is_dcache(o->type))
			llc = o;
	}
	for (o = pu->parent; llc && o != llc; o = o->parent)
		if (may_be_cluster(o) && nr_cores_in(topo, o) > 1 &&
		    !hwloc_bitmap_isequal(o->cpuset, llc->cpuset))
			cls = o;
	if (llc)
		p->llc = first_pu(topo, llc);
	if (cls)
		p->cls = first_pu(topo, cls);
}

/* The node holding @pu: the first node whose cpuset covers it. */
static hwloc_obj_t pu_node(hwloc_topology_t topo, hwloc_obj_t pu)
{
	hwloc_obj_t n = NULL;

	while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)))
		if (hwloc_bitmap_isset(n->cpuset, pu->os_index))
			return n;
	return NULL;
}

/* Rank CPU kinds by efficiency (unknown efficiency: by kind index). */
static void digest_kinds(hwloc_topology_t topo, struct fb_topo *t)
{
	int nr = hwloc_cpukinds_get_nr(topo, 0), eff[64];

	if (nr <= 1 || nr > 64)
		return;
	for (int k = 0; k < nr; k++)
		if (hwloc_cpukinds_get_info(topo, (unsigned)k, NULL, &eff[k],
					    NULL, NULL, 0) < 0 ||
		    eff[k] < 0)
			eff[k] = k;
	for (int i = 0; i < t->nr_pus; i++) {
		hwloc_obj_t pu =
			hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);
		int k = hwloc_cpukinds_get_by_cpuset(topo, pu->cpuset, 0);

		if (k < 0 || k >= nr)
			continue;
		for (int j = 0; j < nr; j++)
			t->pus[i].kind += eff[j] < eff[k];
	}
}

static int node_index(const struct fb_topo *t, int os)
{
	for (int i = 0; i < t->nr_nodes; i++)
		if (t->node_os[i] == os)
			return i;
	return -1;
}

/* Fill the distance matrix (see the opening comment for the sources). */
static void digest_distances(hwloc_topology_t topo, struct fb_topo *t)
{
	struct hwloc_distances_s *d = NULL;
	unsigned nr = 1;
	int n = t->nr_nodes;

	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			t->distance[i * n + j] = i == j ? LOCAL_DISTANCE :
							  REMOTE_DISTANCE;
	if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &d,
					HWLOC_DISTANCES_KIND_MEANS_LATENCY,
					0) == 0 &&
	    nr >= 1) {
		for (unsigned a = 0; a < d->nbobjs; a++) {
			int ia = node_index(t, (int)d->objs[a]->os_index);

			for (unsigned b = 0; b < d->nbobjs && ia >= 0; b++) {
				int ib = node_index(t,
						    (int)d->objs[b]->os_index);

				if (ib >= 0)
					t->distance[ia * n + ib] =
						(int)d->values[a * d->nbobjs +
							       b];
			}
		}
		hwloc_distances_release(topo, d);
		return;
	}
#if FB_HAVE_NUMA
	if (t->real && n > 1 && numa_available() >= 0)
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++) {
				int v = numa_distance(t->node_os[i],
						      t->node_os[j]);

				if (v > 0)
					t->distance[i * n + j] = v;
			}
#endif
}

/* Build the PU table, the node list and the distances of t->topo. */
static int digest(struct fb_topo *t)
{
	hwloc_topology_t topo = t->topo;
	int nr_all = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);

	t->pus = fb_calloc((size_t)t->nr_pus, sizeof(*t->pus));
	t->node_os = fb_calloc((size_t)(nr_all > 0 ? nr_all : 1), sizeof(int));
	if (!t->pus || !t->node_os)
		return ENOMEM;
	for (int i = 0; i < t->nr_pus; i++) {
		hwloc_obj_t pu =
			hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);
		hwloc_obj_t node = pu_node(topo, pu);
		int os = node ? (int)node->os_index : 0;

#if FB_HAVE_NUMA
		/* libnuma must agree with hwloc about a real machine. */
		FB_ASSERT(!t->real || !node || numa_available() < 0 ||
			  numa_node_of_cpu((int)pu->os_index) == os);
#endif
		digest_ancestors(topo, pu, &t->pus[i]);
		t->pus[i].node = node_index(t, os);
		if (t->pus[i].node < 0) {
			t->node_os[t->nr_nodes] = os;
			t->pus[i].node = t->nr_nodes++;
		}
	}
	t->distance =
		fb_calloc((size_t)(t->nr_nodes * t->nr_nodes), sizeof(int));
	if (!t->distance)
		return ENOMEM;
	digest_distances(topo, t);
	digest_kinds(topo, t);
	return 0;
}

static void describe(struct fb_topo *t, const char *spec)
{
	static const hwloc_obj_type_t types[] = {
		HWLOC_OBJ_PACKAGE, HWLOC_OBJ_NUMANODE, HWLOC_OBJ_DIE,
		HWLOC_OBJ_GROUP,   HWLOC_OBJ_L3CACHE,  HWLOC_OBJ_L2CACHE,
		HWLOC_OBJ_CORE,	   HWLOC_OBJ_PU,
	};
	size_t len = sizeof(t->desc), off;

	if (t->real)
		off = (size_t)snprintf(t->desc, len, "machine:");
	else
		off = (size_t)snprintf(t->desc, len, "\"%s\":", spec);
	for (size_t i = 0; i < FB_ARRAY_SIZE(types) && off < len; i++) {
		int n = hwloc_get_nbobjs_by_type(t->topo, types[i]);

		if (n > 0)
			off += (size_t)snprintf(
				t->desc + off, len - off, " %d %s", n,
				hwloc_obj_type_string(types[i]));
	}
}

int fb_topo_open(struct fb_topo **tp, const char *spec, char *err,
		 size_t errlen)
{
	return fb_topo_open_named(tp, spec, "LIBFIBER_TOPOLOGY", err, errlen);
}

int fb_topo_open_named(struct fb_topo **tp, const char *spec, const char *name,
		       char *err, size_t errlen)
{
	struct fb_topo *t;
	int rc;

	t = fb_calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	rc = load_host(&t->host);
	if (rc)
		goto fail;
	if (!spec || !*spec) {
		t->topo = t->host;
		t->real = true;
	} else {
		rc = load_spec(t, spec, name, err, errlen);
		if (rc)
			goto fail;
	}
	t->nr_pus = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_PU);
	t->nr_host_pus = hwloc_get_nbobjs_by_type(t->host, HWLOC_OBJ_PU);
	rc = EINVAL;
	if (t->nr_pus <= 0 || t->nr_host_pus <= 0) {
		snprintf(err, errlen,
			 "%s=\"%s\": no PU; expected a topology with at "
			 "least one PU",
			 name, spec ? spec : "");
		goto fail;
	}
	rc = digest(t);
	if (rc)
		goto fail;
	describe(t, spec);
	*tp = t;
	return 0;
fail:
	fb_topo_close(t);
	return rc;
}

void fb_topo_close(struct fb_topo *t)
{
	if (!t)
		return;
	if (t->topo && t->topo != t->host)
		hwloc_topology_destroy(t->topo);
	if (t->host)
		hwloc_topology_destroy(t->host);
	fb_free(t->pus);
	fb_free(t->node_os);
	fb_free(t->distance);
	fb_free(t);
}

int fb_topo_nr_pus(const struct fb_topo *t)
{
	return t->nr_pus;
}

bool fb_topo_is_real(const struct fb_topo *t)
{
	return t->real;
}

int fb_topo_bind_self(const struct fb_topo *t, int worker)
{
	int n = t->real ? t->nr_pus : t->nr_host_pus;
	hwloc_obj_t pu;

	if (worker < 0)
		return EINVAL;
	pu = hwloc_get_obj_by_type(t->host, HWLOC_OBJ_PU,
				   (unsigned)(worker % n));
	if (!pu)
		return EINVAL;
	if (hwloc_set_cpubind(t->host, pu->cpuset, HWLOC_CPUBIND_THREAD) < 0)
		return errno ? errno : EINVAL;
	return 0;
}

int fb_topo_worker_node(const struct fb_topo *t, int worker)
{
	if (worker < 0)
		return -1;
	return t->node_os[t->pus[worker % t->nr_pus].node];
}

const struct fb_topo_pu *fb_topo_pu(const struct fb_topo *t, int pu)
{
	return &t->pus[pu];
}

int fb_topo_nr_nodes(const struct fb_topo *t)
{
	return t->nr_nodes;
}

int fb_topo_node_os(const struct fb_topo *t, int node)
{
	return t->node_os[node];
}

int fb_topo_distance(const struct fb_topo *t, int a, int b)
{
	return t->distance[a * t->nr_nodes + b];
}

void fb_topo_describe(const struct fb_topo *t, char *buf, size_t len)
{
	snprintf(buf, len, "%s", t->desc);
}
