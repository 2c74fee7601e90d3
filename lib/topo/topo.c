/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * topo/topo.c - loading the topology with hwloc, binding workers, NUMA nodes.
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
 * topo/domains.c builds the domain view from that table alone, so it never
 * walks hwloc objects.
 *
 * Distances come from hwloc's latency matrix (Linux's SLIT, or the
 * distances2 block of an XML file); a real machine without one asks libnuma
 * (numa_distance) when the build has it (FB_HAVE_NUMA); otherwise every
 * remote node is at 20 and the local one at 10, the kernel's defaults.  Node
 * numbers handed out are OS indexes, the numbers libnuma uses.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#if FB_HAVE_NUMA
#include <numa.h>
#endif

#include "base/common.h"
#include <fiber.h>
#include "base/sanitizer.h"
#include "topo/topo.h"

#if defined(FB_ASAN) || defined(FB_TSAN)
#define FB_SANITIZED 1
#else
#define FB_SANITIZED 0
#endif

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

/*
 * Why hwloc refused a spec.  hwloc explains itself only on stderr, only
 * when HWLOC_XML_VERBOSE or HWLOC_SYNTHETIC_VERBOSE is set, and it reads
 * the XML one once per process and keeps the answer.  So the refused spec
 * is loaded again in a fresh process that cannot disturb this one: this
 * program again (/proc/self/exe), with LIBFIBER_INTERNAL_HWLOC_CHECK, the
 * two verbose variables and (when this code is in a shared object) an
 * LD_PRELOAD of that object in the child's environment only, stdin and
 * stdout on /dev/null and stderr on a pipe read here (bounded in size and
 * time).  check_child(), a constructor, sees the variable, says hello (so
 * that what follows is known to be hwloc's), loads the spec and _exit()s
 * before the program's main.  This process keeps its environment, its file
 * descriptors and its other threads' stderr.  Where no child can be
 * started safely, or it does not say hello, the message says only that
 * hwloc refused the spec.
 */
#define CHECK_VAR "LIBFIBER_INTERNAL_HWLOC_CHECK"
#define CHECK_HELLO CHECK_VAR "\n"
/* Picked: far above the milliseconds a refused spec takes to load again,
 * even under a sanitizer on a loaded machine. */
#define CHECK_TIMEOUT_NS (5 * 1000000000ull)

static int set_source(hwloc_topology_t t, const char *spec, bool xml)
{
	if (xml)
		return hwloc_topology_set_xml(t, spec);
	return hwloc_topology_set_synthetic(t, spec);
}

/* In the child only: CHECK_VAR is "x:<xml path>" or "s:<description>". */
__attribute__((constructor)) static void check_child(void)
{
	const char *v = getenv(CHECK_VAR);
	hwloc_topology_t t;

	if (!v || (v[0] != 'x' && v[0] != 's') || v[1] != ':')
		return;
	if (write(2, CHECK_HELLO, strlen(CHECK_HELLO)) < 0)
		_exit(1);
	if (hwloc_topology_init(&t) == 0 &&
	    set_source(t, v + 2, v[0] == 'x') == 0)
		hwloc_topology_load(t);
	_exit(0);
}

/*
 * The LD_PRELOAD value the child needs for check_child() to run in it:
 * "" when this code is part of the main program, else the path of the
 * shared object holding it.  False when no child can be trusted to stop
 * before main, or should not be started: a secure-execution (setuid)
 * program; a path LD_PRELOAD cannot carry; a sanitizer runtime, which
 * refuses to be preceded by a preloaded object, so that there only a
 * library loaded with the program qualifies.
 */
static bool child_preload(const char **path)
{
	struct link_map *lm = NULL;
	Dl_info info;

	if (getauxval(AT_SECURE) ||
	    !dladdr1((void *)check_child, &info, (void **)&lm,
		     RTLD_DL_LINKMAP) ||
	    !lm)
		return false;
	*path = "";
	if (!lm->l_prev) /* the head of the link map: the program itself */
		return true;
	if (!lm->l_name || !*lm->l_name || strpbrk(lm->l_name, " :"))
		return false;
#if FB_SANITIZED
	{
		/* Is the libfiber the program loaded this object?  Asked by
		 * name, so that topo/ needs no symbol of the layers above. */
		void *api = dlsym(RTLD_DEFAULT, "fiber_version");
		Dl_info api_info;

		return api && dladdr(api, &api_info) &&
		       api_info.dli_fbase == info.dli_fbase;
	}
#else
	*path = lm->l_name;
	return true;
#endif
}

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The child's environment: ours, with the check variables set (a fresh
 * array of pointers into @own, ours and literals); NULL on ENOMEM. */
static char **child_env(char *own[2])
{
	static char xml_verbose[] = "HWLOC_XML_VERBOSE=1";
	static char synthetic_verbose[] = "HWLOC_SYNTHETIC_VERBOSE=1";
	size_t n = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	env = fb_calloc(n + 5, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!has_prefix(environ[i], "HWLOC_XML_VERBOSE=") &&
		    !has_prefix(environ[i], "HWLOC_SYNTHETIC_VERBOSE=") &&
		    !has_prefix(environ[i], CHECK_VAR "=") &&
		    !(own[1] && has_prefix(environ[i], "LD_PRELOAD=")))
			env[k++] = environ[i];
	env[k++] = xml_verbose;
	env[k++] = synthetic_verbose;
	env[k++] = own[0];
	if (own[1])
		env[k++] = own[1];
	return env;
}

/* "@name=@a", then ":@b" if @b is set; NULL on ENOMEM. */
static char *env_entry(const char *name, const char *a, const char *b)
{
	size_t n = strlen(name) + strlen(a) + (b ? strlen(b) + 1 : 0) + 2;
	char *s = fb_malloc(n);

	if (s)
		snprintf(s, n, "%s=%s%s%s", name, a, b ? ":" : "", b ? b : "");
	return s;
}

/* A descriptor of the pipe above 2, so that the child's 0, 1 and 2 can be
 * set up without closing it. */
static int above_stdio(int fd)
{
	int hi;

	if (fd > 2)
		return fd;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return hi;
}

/*
 * The program to start: the file /proc/self/exe names, when it still is
 * the file that opening /proc/self/exe gives (valgrind runs a program as
 * its own: it opens the program for /proc/self/exe and reports its path,
 * but the link itself, and so an exec of it, is its tool's), else
 * /proc/self/exe itself.
 */
static const char *self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	struct stat a, b;
	int fd, rc;

	if (n <= 0 || (size_t)n >= len - 1)
		return "/proc/self/exe";
	buf[n] = '\0';
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "/proc/self/exe";
	rc = fstat(fd, &b);
	close(fd);
	if (rc || stat(buf, &a) || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return "/proc/self/exe";
	return buf;
}

/* Start the child with @env; its stderr is *@out.  Return: 0 or an errno. */
static int spawn_check(char **env, pid_t *pid, int *out)
{
	static char name[] = "libfiber-hwloc-check";
	char *argv[] = { name, NULL }, exe[4096];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	int p[2], rc;

	if (pipe2(p, O_CLOEXEC))
		return errno;
	p[0] = above_stdio(p[0]);
	p[1] = above_stdio(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		rc = EMFILE;
		goto out;
	}
	sigemptyset(&none);
	sigfillset(&dfl);
	sigdelset(&dfl, SIGKILL);
	sigdelset(&dfl, SIGSTOP);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
#if FB_HAVE_SPAWN_CLOSEFROM
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
					      POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(pid, self_exe(exe, sizeof(exe)), &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
out:
	if (p[1] >= 0)
		close(p[1]);
	if (rc && p[0] >= 0)
		close(p[0]);
	else
		*out = p[0];
	return rc;
}

/* Read the child's stderr into @buf (at most @len - 1 bytes kept, the rest
 * drained, "..." marking the cut) until it closes it or CHECK_TIMEOUT_NS
 * passes, then reap it.  Return: the bytes in @buf. */
static size_t read_check(pid_t pid, int fd, char *buf, size_t len)
{
	uint64_t end = fb_now_ns() + CHECK_TIMEOUT_NS, now;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t have = 0;
	bool cut = false;
	char sink[256];
	ssize_t n = 0;

	while ((now = fb_now_ns()) < end) {
		n = poll(&pfd, 1, (int)((end - now) / 1000000 + 1));
		if (n == 0)
			break;
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0 && have + 1 < len)
			n = read(fd, buf + have, len - 1 - have);
		else if (n > 0)
			n = read(fd, sink, sizeof(sink));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (have + 1 < len)
			have += (size_t)n;
		else
			cut = true;
	}
	/* Gone (unreaped, so @pid is still ours) or hung: either way it has
	 * nothing more to say. */
	kill(pid, SIGKILL);
	close(fd);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	buf[have] = '\0';
	if (cut && have >= 3)
		memcpy(buf + have - 3, "...", 3);
	return have;
}

/* hwloc's lines as one: each line trimmed of blanks, blank and caret-only
 * lines (libxml2 points at the column) dropped, the rest joined with a
 * space. */
static void one_line(char *buf)
{
	char *in = buf, *out = buf, *eol;
	size_t n;

	for (; *in; in = *eol ? eol + 1 : eol) {
		eol = in + strcspn(in, "\n");
		in += strspn(in, " \t");
		for (n = (size_t)(eol - in); n && strchr(" \t^", in[n - 1]);)
			n--;
		if (!n)
			continue;
		if (out != buf)
			*out++ = ' ';
		memmove(out, in, n);
		out += n;
	}
	*out = '\0';
}

/*
 * Fill @buf with hwloc's reason for refusing @spec ("" when none could be
 * had).  Context: any thread; the error path of fb_topo_open, so the cost
 * of a process start does not matter.
 */
static void hwloc_complaint(const char *spec, bool xml, char *buf, size_t len)
{
	char *own[2] = { NULL, NULL }, **env = NULL;
	const char *preload, *old;
	size_t hello = strlen(CHECK_HELLO);
	int fd = -1;
	pid_t pid;

	buf[0] = '\0';
	if (!child_preload(&preload))
		return;
	own[0] = env_entry(CHECK_VAR, xml ? "x" : "s", spec);
	old = getenv("LD_PRELOAD");
	if (*preload)
		own[1] = env_entry("LD_PRELOAD", preload,
				   old && *old ? old : NULL);
	if (!own[0] || (*preload && !own[1]))
		goto out;
	env = child_env(own);
	if (!env || spawn_check(env, &pid, &fd))
		goto out;
	/* Only a child that said hello speaks for hwloc. */
	if (read_check(pid, fd, buf, len) < hello ||
	    strncmp(buf, CHECK_HELLO, hello)) {
		buf[0] = '\0';
		goto out;
	}
	memmove(buf, buf + hello, strlen(buf + hello) + 1);
	one_line(buf);
out:
	fb_free(env);
	fb_free(own[0]);
	fb_free(own[1]);
}

/*
 * Bounds on a synthetic description, checked before hwloc loads it:
 * hwloc's time grows with the square of a level's width (a flat "pu:16000"
 * takes a minute), and no more than FB_MAX_WORKERS workers ever run.
 * Picked: "pu:4096" loads in about 3 s, "pack:4 core:1024 pu:4" (16384
 * PUs) in about 4 s, on a 2-vCPU guest.
 */
#define FB_TOPO_MAX_ARITY FB_MAX_WORKERS
#define FB_TOPO_MAX_PUS (4 * FB_MAX_WORKERS)

/*
 * synthetic_size - the PUs the synthetic description @spec asks for (the
 * product of its levels' arities: "pack:2 core:4 pu:2", or bare numbers),
 * saturated above FB_TOPO_MAX_PUS, and its widest level in *@arity.
 * Attributes in parentheses and attached memory levels in brackets add
 * none.  An estimate for the bounds only: hwloc judges the syntax.
 */
static unsigned long synthetic_size(const char *spec, unsigned long *arity)
{
	unsigned long pus = 1;
	const char *p = spec;

	*arity = 0;
	while (*p) {
		const char *tok = p, *num;
		int depth = 0;

		/* One token: up to a blank outside () and []. */
		for (; *p && (depth || !isspace((unsigned char)*p)); p++) {
			if (*p == '(' || *p == '[')
				depth++;
			else if ((*p == ')' || *p == ']') && depth)
				depth--;
		}
		if (*tok != '[' && *tok != '(') {
			num = memchr(tok, ':', (size_t)(p - tok));
			num = num ? num + 1 : tok;
			if (isdigit((unsigned char)*num)) {
				unsigned long n = strtoul(num, NULL, 10);

				n = FB_MIN(n, FB_TOPO_MAX_PUS + 1ul);
				*arity = FB_MAX(*arity, n);
				pus = FB_MIN(pus * n, FB_TOPO_MAX_PUS + 1ul);
			}
		}
		while (isspace((unsigned char)*p))
			p++;
	}
	return pus;
}

static int load_spec(struct fb_topo *t, const char *spec, const char *name,
		     char *err, size_t errlen)
{
	bool xml = spec_is_xml(spec);
	unsigned long arity;
	char why[512];
	struct stat st;

	if (!xml && (synthetic_size(spec, &arity) > FB_TOPO_MAX_PUS ||
		     arity > FB_TOPO_MAX_ARITY)) {
		snprintf(err, errlen,
			 "%s=\"%s\": too large; expected a synthetic "
			 "description of at most %d PUs, at most %d objects "
			 "per level, such as \"pack:2 numa:1 l3:2 core:4 "
			 "pu:2\"",
			 name, spec, FB_TOPO_MAX_PUS, FB_TOPO_MAX_ARITY);
		return EINVAL;
	}
	if (hwloc_topology_init(&t->topo) < 0)
		return ENOMEM;
	if (xml && stat(spec, &st) < 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
	} else {
		if (set_source(t->topo, spec, xml) == 0 &&
		    hwloc_topology_load(t->topo) == 0)
			return 0;
		why[0] = '\0';
		if (err && errlen) /* nobody to tell: no replay */
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

/*
 * Logical index of the first PU inside @obj.  Logical indexes run left to
 * right along the tree, so that PU is down @obj's first children: a walk
 * of the tree's depth, where a search of the PUs by cpuset would make the
 * digest quadratic in them.
 */
static int first_pu(hwloc_topology_t topo, hwloc_obj_t obj)
{
	hwloc_obj_t pu = obj;

	while (pu->type != HWLOC_OBJ_PU && pu->first_child)
		pu = pu->first_child;
	if (pu->type != HWLOC_OBJ_PU)
		pu = hwloc_get_obj_inside_cpuset_by_type(topo, obj->cpuset,
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
