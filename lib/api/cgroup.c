/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/cgroup.c - the CPU bandwidth limit of cgroup v2 (cpu.max) as a
 * worker count.  A container given 1.5 CPUs on a 64-CPU host would
 * otherwise get 64 workers that the kernel throttles in turn, each
 * holding fibers while it waits for the next period.  The cpuset needs
 * nothing here: the kernel applies it to the process's affinity, which
 * the topology already honours (one worker per PU the process may use).
 *
 * The process's cgroup is the "0::PATH" line of /proc/self/cgroup; its
 * directory is PATH under the v2 mount.  Each level from there up to the
 * mount may have a cpu.max of "QUOTA PERIOD" (microseconds) or "max
 * PERIOD"; the tightest level wins.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cgroup.h"

const char *fb_cgroup_root;
const char *fb_cgroup_self;

/* Read the first line of @path into @buf; false if it cannot be read. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

/* The v2 path of the process's cgroup into @buf; false if there is none. */
static bool self_path(char *buf, size_t len)
{
	const char *self = fb_cgroup_self ? fb_cgroup_self :
					    "/proc/self/cgroup";
	char line[4096];
	bool found = false;
	FILE *f = fopen(self, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");

		line[n] = '\0';
		if (strncmp(line, "0::/", 4) || n - 3 >= len)
			continue;
		memcpy(buf, line + 3, n - 2);
		found = true;
	}
	fclose(f);
	return found;
}

/* The CPUs cpu.max in @dir allows; 0 for none or "max". */
static double level_limit(const char *dir)
{
	char path[4224], line[128], *end;
	double quota, period;

	snprintf(path, sizeof(path), "%s/cpu.max", dir);
	if (!read_line(path, line, sizeof(line)) || !strncmp(line, "max", 3))
		return 0;
	quota = strtod(line, &end);
	if (end == line || *end != ' ')
		return 0;
	period = strtod(end + 1, &end);
	if (!(quota > 0) || !(period > 0) || !isfinite(quota / period))
		return 0;
	return quota / period;
}

/* climbs - whether path @p has a ".." component, which would lead out of
 * the cgroup tree ("..svc" is a name like any other). */
static bool climbs(const char *p)
{
	for (const char *c = strstr(p, "/.."); c; c = strstr(c + 1, "/.."))
		if (c[3] == '/' || c[3] == '\0')
			return true;
	return false;
}

int fb_cgroup_cpu_limit(void)
{
	const char *root = fb_cgroup_root ? fb_cgroup_root : "/sys/fs/cgroup";
	char rel[4096], dir[4200];
	double limit = 0, l;
	size_t rlen = strlen(root);
	char *slash;

	if (!self_path(rel, sizeof(rel)) || climbs(rel) ||
	    rlen + strlen(rel) >= sizeof(dir))
		return 0;
	memcpy(dir, root, rlen);
	memcpy(dir + rlen, rel, strlen(rel) + 1);
	for (;;) {
		l = level_limit(dir);
		if (l > 0 && (limit == 0 || l < limit))
			limit = l;
		slash = strrchr(dir + rlen, '/');
		if (!slash)
			break;
		*slash = '\0'; /* the parent; the root itself last */
	}
	if (limit == 0)
		return 0;
	if (limit > 1 << 20)
		return 1 << 20;
	return limit < 2 ? 2 : (int)ceil(limit);
}
