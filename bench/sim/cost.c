// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * cost.c - fiber-sim's cost model: every parameter, its value and where
 * the value comes from (doc/simulator.md 3 repeats the table).
 *
 * Three kinds of source, named in each row:
 *   measured  on the development machine (a 2-vCPU AMD EPYC KVM guest,
 *             one L3) with the real runtime, by bench/sim/calibrate.sh,
 *             which runs the repository's benchmarks and prints these
 *             values; the doc records the run;
 *   mail      a figure from one of the kernel mails of doc/scheduler.md,
 *             quoted there;
 *   assumed   no measurement here can give it (another machine's cache
 *             hierarchy, an SMT mode); the row says what it stands for,
 *             and the doc says which results depend on it.
 * No value was chosen to reproduce a mail's result: each was fixed before
 * the experiments ran, and none was changed after.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define P(name, field, def, unit, src)                                         \
	{                                                                      \
		name, offsetof(struct sim_cost, field), def, unit, src         \
	}

const struct sim_param sim_params[] = {
	P("line_smt", line[SIM_D_SMT], 4, "ns",
	  "assumed: an SMT sibling's line is in the shared L1/L2"),
	P("line_llc", line[SIM_D_LLC], 53, "ns",
	  "measured: core-to-core line transfer in one L3 (calibrate.sh, "
	  "cache-line ping-pong of two pinned threads)"),
	P("line_pkg", line[SIM_D_PKG], 120, "ns",
	  "assumed: a line from another LLC of the package (about twice "
	  "line_llc, the ratio published for Zen 3 CCX-to-CCX and Xeon "
	  "SNC-to-SNC transfers)"),
	P("line_numa", line[SIM_D_NUMA], 200, "ns",
	  "assumed: a line from the other socket (2-socket Xeon and EPYC "
	  "cross-socket transfers are 1.5-2x an in-package one)"),
	P("switch", switch_ns, 30, "ns",
	  "measured: half a same-worker pipe-pingpong round trip (p50) "
	  "minus two pipe_op (bench/pipe-pingpong --workers 1 --latency)"),
	P("select", select_ns, 30, "ns",
	  "assumed: fb_place_select_wake() on lines the waker has (its own "
	  "and the fiber's records); probes are charged apart"),
	P("pipe_op", pipe_op_ns, 20, "ns",
	  "assumed: the share of one pipe operation in the same-worker "
	  "round trip (4 operations and 2 switches) that switch is derived "
	  "from"),
	P("sem_op", sem_op_ns, 20, "ns",
	  "assumed: like pipe_op (one spinlock, no copy)"),
	P("futex_wake", futex_wake_ns, 9800, "ns",
	  "measured: the waker's FUTEX_WAKE of a sleeping thread "
	  "(fiber-sim-calibrate; a KVM guest, where the wake is an IPI "
	  "through the hypervisor); an eventfd write is taken as the same"),
	P("sleep_exit", sleep_exit_ns, 25400, "ns",
	  "measured: a sleeping worker from futex wake to running, half the "
	  "difference of pipe-pingpong split round trips with "
	  "LIBFIBER_IDLE_POLL_US=0 and the default (a KVM guest: bare metal "
	  "is faster)"),
	P("poll_pause", poll_pause_ns, 30, "ns",
	  "assumed: one iteration of the poll loop (a pause instruction)"),
	P("drain", drain_ns, 30, "ns",
	  "assumed: a wakelist drain's exchange and local rq lock"),
	P("drain_fiber", drain_fiber_ns, 10, "ns",
	  "assumed: one fiber appended by a drain"),
	P("create", create_ns, 84, "ns",
	  "measured: half of bench/create-join's ns per fiber less two "
	  "switches (the other half is exit)"),
	P("exit", exit_ns, 84, "ns",
	  "measured: the other half (exit and reap)"),
	P("lb_base", lb_base_ns, 200, "ns",
	  "assumed: one balance() besides reading the workers' records "
	  "(which cost a line each, by distance)"),
	P("blocked_update", blocked_update_ns, 150, "ns",
	  "assumed: fb_place_decay_blocked() with the sleeper's line (a "
	  "PELT update and a fold); the original posting's traced 33-67 us per "
	  "update is a kernel with many cgroups (set with --cost)"),
	P("refill_mlp", refill_mlp, 8, "misses",
	  "assumed: cache misses in flight while a migrated fiber refills "
	  "its working set (ws_kb of the workload) from the old worker"),
	P("smt1", smt_speed[1], 1.0, "x",
	  "definition: one busy thread on its core runs at full speed"),
	P("smt2", smt_speed[2], 0.62, "x",
	  "assumed: per-thread speed with 2 busy threads of a core (1.24x "
	  "the core's throughput, the usual SMT2 gain on server x86)"),
	P("smt3", smt_speed[3], 0.50, "x",
	  "assumed: per-thread speed with 3 busy threads"),
	P("smt4", smt_speed[4], 0.45, "x",
	  "assumed: per-thread speed with 4 busy threads"),
	P("smt_by_index", smt_by_index, 0, "bool",
	  "model: 1 = a core's mode is set by its highest busy thread (a "
	  "POWER7 core leaves SMT4 mode only when threads 2 and 3 idle)"),
	P("little", little_speed, 0.6, "x",
	  "assumed: speed of a worker of a lower CPU kind"),
	P("poll_us", poll_us, 50, "us",
	  "the runtime's default LIBFIBER_IDLE_POLL_US"),
	P("victim_check", victim_check_ns, 1920, "ns",
	  "the poll loop's look every 64 poll iterations of poll_pause "
	  "(the legacy idle path's victim_exists())"),
	P("timer_slack", timer_slack_ns, 50000, "ns",
	  "Linux's default timer slack of a SCHED_OTHER thread: a sleeper's "
	  "timed futex wait ends up to this late"),
};

const int sim_nr_params = (int)(sizeof(sim_params) / sizeof(sim_params[0]));

static double *field(struct sim_cost *c, const struct sim_param *p)
{
	return (double *)((char *)c + p->offset);
}

void sim_cost_default(struct sim_cost *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < sim_nr_params; i++)
		*field(c, &sim_params[i]) = sim_params[i].def;
	c->line[SIM_D_SAME] = 0;
}

/* The largest cost parameter: about a quarter hour in ns. */
#define SIM_COST_MAX 1e12
/* The speeds (unit "x"): relative to a lone thread on a big core. */
#define SIM_SPEED_MIN 1e-3
#define SIM_SPEED_MAX 1e3

int sim_cost_set(struct sim_cost *c, const char *spec)
{
	const char *p = spec;

	while (*p) {
		const char *eq = strchr(p, '='), *end;
		char *stop;
		double v;
		int i;

		if (!eq) {
			fprintf(stderr,
				"fiber-sim: --cost: \"%s\" is not "
				"name=value\n",
				p);
			return -1;
		}
		for (i = 0; i < sim_nr_params; i++)
			if (strlen(sim_params[i].name) == (size_t)(eq - p) &&
			    !strncmp(sim_params[i].name, p, (size_t)(eq - p)))
				break;
		if (i == sim_nr_params) {
			fprintf(stderr,
				"fiber-sim: --cost: no parameter \"%.*s\" (see "
				"--help)\n",
				(int)(eq - p), p);
			return -1;
		}
		v = strtod(eq + 1, &stop);
		end = strchr(eq + 1, ',');
		if (stop == eq + 1 || (end ? stop != end : *stop) ||
		    !(v >= 0 && v <= SIM_COST_MAX)) {
			fprintf(stderr,
				"fiber-sim: --cost: %s wants a number from 0 "
				"to %.0g\n",
				sim_params[i].name, SIM_COST_MAX);
			return -1;
		}
		/* A speed of 0 would never finish a segment, and one close
		 * to it would put the segment's end past the clock's range;
		 * a flag is 0 or 1. */
		if (!strcmp(sim_params[i].unit, "x") &&
		    !(v >= SIM_SPEED_MIN && v <= SIM_SPEED_MAX)) {
			fprintf(stderr,
				"fiber-sim: --cost: %s=%.*s: a speed is a number "
				"from %g to %g\n",
				sim_params[i].name, (int)(stop - eq - 1),
				eq + 1, SIM_SPEED_MIN, SIM_SPEED_MAX);
			return -1;
		}
		if (!strcmp(sim_params[i].unit, "bool") && v != 0 && v != 1) {
			fprintf(stderr, "fiber-sim: --cost: %s wants 0 or 1\n",
				sim_params[i].name);
			return -1;
		}
		*field(c, &sim_params[i]) = v;
		p = end ? end + 1 : stop;
	}
	return 0;
}

void sim_cost_help(FILE *out)
{
	for (int i = 0; i < sim_nr_params; i++)
		fprintf(out, "  %-15s %8g %-6s %s\n", sim_params[i].name,
			sim_params[i].def, sim_params[i].unit,
			sim_params[i].source);
}
