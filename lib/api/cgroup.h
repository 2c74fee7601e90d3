/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/cgroup.h - the CPU limit of the process's cgroup (v2), for the
 * default worker count.
 */
#ifndef FB_CGROUP_H
#define FB_CGROUP_H

/*
 * Where the limit is read: the cgroup v2 hierarchy's mount and the file
 * that names the process's cgroup.  Tests point them at a fake tree
 * before the runtime starts (there is no variable for it: a program has
 * no business moving them); NULL means the real ones, /sys/fs/cgroup and
 * /proc/self/cgroup.
 */
extern const char *fb_cgroup_root;
extern const char *fb_cgroup_self;

/*
 * fb_cgroup_cpu_limit - the workers the process's CPU bandwidth limit
 * allows: the smallest quota / period of cpu.max over its cgroup and the
 * cgroups above it, rounded up, and at least 2 (a limit below two CPUs
 * still lets a blocked worker's partner run; Go's GOMAXPROCS rule is the
 * same).  Context: any thread; reads files only.
 * Return: that count; 0 when there is no limit (no cgroup v2 line, no
 * cpu.max, "max", or files that cannot be read or parsed).
 */
int fb_cgroup_cpu_limit(void);

#endif /* FB_CGROUP_H */
