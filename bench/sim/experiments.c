// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * experiments.c - fiber-sim --experiment NAME (doc/simulator.md,
 * "Experiments"): the five heuristics' original postings in their own form.
 *
 * Each experiment is a list of cases: a machine (a synthetic topology), a
 * workload and the figures the posting reported for it.  Every case runs
 * twice with the same seed, once with the feature off and once with it on,
 * and one table prints the reported before/after next to the simulated
 * one, whether the two changes point the same way, and the counters the
 * feature controls (so that a reader sees the mechanism engage or not).
 *
 * The runs are in-process and sequential; sim_open() resets everything a
 * run leaves behind, so a case gives the bytes it gives alone.  Nothing here
 * reads a clock.  --quick runs reduced sizes (the sim test's).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define NR (-1.0) /* not reported */

/* One case: a row of the table. */
struct xcase {
	const char *label;
	const char *topology;
	const char *workload;
	unsigned duration_ms;  /* 0: until the workload ends */
	bool quick;	       /* in --quick too */
	const char *qworkload; /* --quick's workload (NULL: the same) */
	unsigned qduration_ms;
	double before, after; /* reported; NR when the posting has none */
	bool compare;	      /* the reported pair is the feature's off/on */
};

/* A counter column: its heading and how to read it off a finished run. */
struct xcounter {
	const char *name;
	double (*get)(struct sim *s, const struct sim_counters *t);
};

struct experiment {
	const char *name;
	const char *title;
	const char *off, *on; /* --features of the two runs */
	const char *cost;     /* --cost of both runs, or NULL */
	bool asym_smt;
	const char *reported;		 /* what the reported columns are */
	const struct xcounter *counters; /* two */
	const struct xcase *cases;
	int nr_cases;
};

/* ---- counters ---------------------------------------------------------------- */

/* ratio - a / b, or NAN ("-") where there is no b to share out. */
static double ratio(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

static double c_probes(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return ratio((double)t->wake_probes, (double)t->wake_placements);
}

static double c_core_cuts(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return (double)t->scan_cut_core_limit;
}

static double c_wakelist_share(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return ratio((double)t->wakelist_pushes, (double)t->wakeups);
}

static double c_direct(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return (double)t->direct_enqueues;
}

static double c_asym_pulls(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return (double)t->lb_asym_pulls;
}

/* The share of the busy time spent on SMT threads 0 and 1 of their core
 * (the ones a POWER7 core keeps in its fast modes). */
static double c_low_threads(struct sim *s, const struct sim_counters *t)
{
	double low = 0, all = 0;

	(void)t;
	for (int i = 0; i < s->n; i++) {
		all += (double)s->w[i].busy_ns;
		if (s->w[i].thread < 2)
			low += (double)s->w[i].busy_ns;
	}
	return ratio(low, all);
}

static double c_numa_imb(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return (double)t->create_numa_imb;
}

static double c_numa_migr(struct sim *s, const struct sim_counters *t)
{
	(void)t;
	return (double)s->st.migrations[SIM_D_NUMA];
}

static double c_own_decays(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return (double)t->blocked_decays;
}

static double c_sleeper_decays(struct sim *s, const struct sim_counters *t)
{
	(void)s;
	return (double)t->sleeper_decays;
}

/* ---- the experiments ---------------------------------------------------------- */

#define SNC_OFF "pack:2 numa:1 l3:1 core:24 pu:2"
#define SNC_ON "pack:2 numa:2 l3:1 core:12 pu:2"

static const struct xcounter sis_counters[] = {
	{ "probes/wakeup", c_probes },
	{ "core-limit cuts", c_core_cuts },
};

static const struct xcase sis_cases[] = {
	{ "SNC off, hackbench 1 group", SNC_OFF, "hackbench:groups=1", 0, true,
	  "hackbench:groups=1,loops=20", 0, 0.2717, 0.3143, true },
	{ "SNC off, hackbench 4 groups", SNC_OFF, "hackbench:groups=4", 0,
	  false, NULL, 0, 0.6257, 0.6070, true },
	{ "SNC off, hackbench 7 groups", SNC_OFF, "hackbench:groups=7", 0,
	  false, NULL, 0, 0.7740, 0.7960, true },
	{ "SNC off, hackbench 48 groups", SNC_OFF, "hackbench:groups=48", 0,
	  false, NULL, 0, 6.7757, 5.5227, true },
	{ "SNC off, tbench 128 clients", SNC_OFF, "tbench:clients=128", 100,
	  true, "tbench:clients=16", 5, 19978.59, 20257.76, true },
	{ "SNC on, hackbench 1 group", SNC_ON, "hackbench:groups=1", 0, true,
	  "hackbench:groups=1,loops=20", 0, 0.4470, 0.4557, true },
	{ "SNC on, hackbench 4 groups", SNC_ON, "hackbench:groups=4", 0, false,
	  NULL, 0, 0.5947, 0.6033, true },
	{ "SNC on, hackbench 7 groups", SNC_ON, "hackbench:groups=7", 0, false,
	  NULL, 0, 0.7450, 0.7627, true },
	{ "SNC on, hackbench 48 groups", SNC_ON, "hackbench:groups=48", 0,
	  false, NULL, 0, 4.7027, 4.6863, true },
	{ "SNC on, tbench 128 clients", SNC_ON, "tbench:clients=128", 100, true,
	  "tbench:clients=16", 5, 17870.37, 20620.98, true },
	/* Not in the posting: an LLC that SIS_UTIL finds overloaded while a
	 * core goes idle now and then, the one state the feature acts in. */
	{ "control: 4C/8T, schbench -m 4 -t 8", "pack:1 l3:1 core:4 pu:2",
	  "schbench:m=4,t=8,think=20", 200, true, NULL, 200, NR, NR, false },
};

#define X86 "pack:2 l3:1 core:26 pu:2"
#define ARM "pack:1 l3:1 core:80 pu:1"

static const struct xcounter wl_counters[] = {
	{ "wakelist share", c_wakelist_share },
	{ "direct enqueues", c_direct },
};

static const struct xcase wl_cases[] = {
	{ "x86 2x26C/52T, schbench -m 2 -t 8", X86, "schbench:m=2,t=8", 1000,
	  true, NULL, 50, 15, 10, true },
	{ "x86 2x26C/52T, hackbench -g 1", X86, "hackbench:groups=1,loops=1000",
	  0, true, "hackbench:groups=1,loops=50", 0, 3.246, 2.251, true },
	{ "arm64 80C, schbench -m 2 -t 8", ARM, "schbench:m=2,t=8", 1000, true,
	  NULL, 50, 24, 17, true },
	{ "arm64 80C, hackbench -g 1", ARM, "hackbench:groups=1,loops=1000", 0,
	  true, "hackbench:groups=1,loops=50", 0, 4.217, 2.916, true },
};

#define P7 "pack:2 l3:1 core:8 pu:4"

static const struct xcounter asym_counters[] = {
	{ "asym pulls", c_asym_pulls },
	{ "busy on thr 0-1", c_low_threads },
};

static const struct xcase asym_cases[] = {
	{ "ebizzy 32 threads", P7, "ebizzy:threads=32,first=32", 3000, true,
	  NULL, 100, 7946971, 11383980, true },
	{ "ebizzy 64 threads", P7, "ebizzy:threads=64,first=32", 3000, true,
	  NULL, 100, 10818093.2, 11674063.6, true },
	{ "ebizzy 128 threads", P7, "ebizzy:threads=128,first=32", 3000, false,
	  NULL, 0, 38776241.8, 39827404.4, true },
};

#define ZEN3 "pack:2 numa:1 l3:8 core:8 pu:2"

static const struct xcounter numa_counters[] = {
	{ "NUMA-imb stays", c_numa_imb },
	{ "NUMA migrations", c_numa_migr },
};

static const struct xcase numa_cases[] = {
	{ "unaffined, 8 workers", ZEN3, "exec:workers=8", 200, true, NULL, 20,
	  20890.20, 19714.60, false },
	{ "unaffined, 64 workers", ZEN3, "exec:workers=64", 200, false, NULL, 0,
	  22772.40, 22505.00, false },
	{ "affined 0..n-2, 8 workers", ZEN3, "exec:workers=8,affine=1", 200,
	  true, NULL, 20, 20840.20, 19684.60, false },
	{ "affined 0..n-2, 64 workers", ZEN3, "exec:workers=64,affine=1", 200,
	  false, NULL, 0, 22768.20, 22816.80, false },
	/* Not in the posting's table: the mask the rule is for, one allowed
	 * worker in every other LLC (numactl -C 0,16,...,112 on the kernel's
	 * numbering). */
	{ "affined 1 per 2 LLCs, 8 workers", ZEN3,
	  "exec:workers=8,affine=1,stride=32", 200, true, NULL, 20, NR, NR,
	  false },
};

static const struct xcounter bl_counters[] = {
	{ "own decays", c_own_decays },
	{ "sleeper decays", c_sleeper_decays },
};

static const struct xcase bl_cases[] = {
	{ "8C arm64, schbench -t 2 -m 2", "pack:1 l3:1 core:8 pu:1",
	  "schbench:m=2,t=2", 1000, true, NULL, 100, 12656, 717, true },
};

#define CASES(a) a, (int)(sizeof(a) / sizeof(a[0]))

static const struct experiment experiments[] = {
	{ "sis_util",
	  "bounded idle-core scan when the LLC is overloaded (SIS_CORE_LIMIT)",
	  "SIS_CORE_FULL,NO_SIS_CORE_LIMIT", "SIS_CORE_LIMIT", NULL, false,
	  "2 x 24C/48T Xeon 8260, hackbench-process-pipes s, tbench4 MB/s",
	  sis_counters, CASES(sis_cases) },
	{ "wakelist", "wakelist handoff to an idle worker of the same LLC",
	  "NO_TTWU_QUEUE_IDLE", "TTWU_QUEUE_IDLE", NULL, false,
	  "Xeon 8269CY and Ampere Altra, schbench p99 us, hackbench s",
	  wl_counters, CASES(wl_cases) },
	{ "asym",
	  "packing onto the lower-numbered SMT threads (ASYM_PACKING, "
	  "POWER7 SMT modes)",
	  "NO_ASYM_PACKING", "ASYM_PACKING", "smt_by_index=1", true,
	  "64-CPU POWER7, ebizzy records/s, 5-run average", asym_counters,
	  CASES(asym_cases) },
	{ "numa_imb",
	  "NUMA imbalance on create capped by the allowed workers "
	  "(NUMA_IMB_AFFINITY)",
	  "NO_NUMA_IMB_AFFINITY", "NUMA_IMB_AFFINITY", NULL, false,
	  "2 x 64C Zen 3 NPS1, stress-ng --exec fork-to-wakeup Amean ns; "
	  "the posting compares the rule alone (before) with the rule and a "
	  "guard branch (after), not the rule off and on",
	  numa_counters, CASES(numa_cases) },
	{ "blocked_load",
	  "rate-limited blocked-load updates (BLOCKED_LOAD_RATELIMIT)",
	  "NO_BLOCKED_LOAD_RATELIMIT", "BLOCKED_LOAD_RATELIMIT",
	  "blocked_update=50000", false,
	  "octa-core arm64, ChromeOS 5.4, schbench p99 us; blocked_update "
	  "is the posting's traced 33-67 us per update",
	  bl_counters, CASES(bl_cases) },
};

#define NR_EXPERIMENTS (int)(sizeof(experiments) / sizeof(experiments[0]))

/* ---- running and printing ------------------------------------------------------ */

struct xrun {
	double value;
	bool lower_is_better;
	const char *unit;
	double counter[2];
};

static int run_one(const struct experiment *x, const struct xcase *c,
		   const struct sim_opts *base, bool quick, bool on,
		   struct xrun *r)
{
	const char *wl = quick && c->qworkload ? c->qworkload : c->workload;
	const char *colon = strchr(wl, ':');
	struct sim_opts o = {
		.topology = c->topology,
		.workload = wl,
		.features = on ? x->on : x->off,
		.cost = x->cost,
		.seed = base->seed,
		.duration_ns =
			(uint64_t)(quick ? c->qduration_ms : c->duration_ms) *
			SIM_MS,
		.asym_smt = x->asym_smt,
		.blocked_interval = base->blocked_interval,
		.quiet = true,
	};
	struct sim_counters t;
	struct sim s;
	char err[512];

	if (sim_open(&s, &o, err, sizeof(err))) {
		fprintf(stderr, "fiber-sim: %s %s: %s\n", x->name, c->label,
			err);
		sim_close(&s);
		return -1;
	}
	s.wl = sim_workload_find(wl, colon ? (size_t)(colon - wl) : strlen(wl));
	if (!s.wl) {
		fprintf(stderr, "fiber-sim: %s: no workload %s\n", x->name, wl);
		sim_close(&s);
		return -1;
	}
	sim_run(&s);
	if (s.nr_deadlocked) {
		fprintf(stderr,
			"fiber-sim: %s %s: deadlock: %d fibers blocked "
			"for good\n",
			x->name, c->label, s.nr_deadlocked);
		sim_close(&s);
		return -1;
	}
	sim_totals(&s, &t);
	r->value = s.res.value;
	r->lower_is_better = s.res.lower_is_better;
	r->unit = s.res.unit;
	for (int k = 0; k < 2; k++)
		r->counter[k] = x->counters[k].get(&s, &t);
	sim_close(&s);
	return 0;
}

/* gain - the change from @a to @b in percent, positive when better. */
static double gain(double a, double b, bool lower_is_better)
{
	if (!(a > 0) || !isfinite(a) || !isfinite(b))
		return NAN;
	return (lower_is_better ? a - b : b - a) / a * 100.0;
}

/* Changes within 1% are flat: below the seeds' own run-to-run noise. */
#define FLAT_PCT 1.0

static int direction(double pct)
{
	return pct > FLAT_PCT ? 1 : pct < -FLAT_PCT ? -1 : 0;
}

static void value(FILE *out, double v)
{
	if (!isfinite(v) || v < 0)
		fprintf(out, " %11s", "-");
	else
		fprintf(out, " %11.6g", v);
}

static void pct(FILE *out, double p)
{
	if (!isfinite(p))
		fprintf(out, " %8s", "-");
	else
		fprintf(out, " %+7.2f%%", p);
}

static void counter(FILE *out, double v)
{
	if (!isfinite(v))
		fprintf(out, " %9s", "-");
	else if (v == floor(v) && fabs(v) < 1e9)
		fprintf(out, " %9.0f", v);
	else
		fprintf(out, " %9.4g", v);
}

static int run_experiment(const struct experiment *x,
			  const struct sim_opts *base, bool quick, FILE *out)
{
	fprintf(out, "experiment %s: %s\n", x->name, x->title);
	fprintf(out, "  off: %s   on: %s   seed %llu%s%s%s\n", x->off, x->on,
		(unsigned long long)base->seed, x->cost ? "   --cost " : "",
		x->cost ? x->cost : "", x->asym_smt ? "   --asym-smt" : "");
	fprintf(out, "  reported: %s\n", x->reported);
	fprintf(out, "  simulated: fiber-sim, virtual time%s\n",
		quick ? " (--quick sizes)" : "");
	fprintf(out, "  change: positive is better; within %.0f%% is flat\n",
		FLAT_PCT);
	fprintf(out, "  counters: the feature off, then on\n");
	fprintf(out, "%-36s %-5s %11s %11s %8s %11s %11s %8s %-6s", "case",
		"unit", "rep.before", "rep.after", "change", "sim.off",
		"sim.on", "change", "agree");
	for (int k = 0; k < 2; k++)
		fprintf(out, "  %19s", x->counters[k].name);
	fprintf(out, "\n");
	for (int i = 0; i < x->nr_cases; i++) {
		const struct xcase *c = &x->cases[i];
		struct xrun off, on;
		double rp, sp;
		const char *agree;

		if (quick && !c->quick)
			continue;
		if (run_one(x, c, base, quick, false, &off) ||
		    run_one(x, c, base, quick, true, &on))
			return -1;
		rp = c->before >= 0 ?
			     gain(c->before, c->after, off.lower_is_better) :
			     NAN;
		sp = gain(off.value, on.value, off.lower_is_better);
		if (!isfinite(rp) || !c->compare)
			agree = "n/a";
		else if (!isfinite(sp))
			agree = "-";
		else
			agree = direction(rp) == direction(sp) ? "yes" : "no";
		fprintf(out, "%-36s %-5s", c->label, off.unit);
		value(out, c->before);
		value(out, c->after);
		pct(out, rp);
		value(out, off.value);
		value(out, on.value);
		pct(out, sp);
		fprintf(out, " %-6s", agree);
		for (int k = 0; k < 2; k++) {
			fprintf(out, "  ");
			counter(out, off.counter[k]);
			counter(out, on.counter[k]);
		}
		fprintf(out, "\n");
	}
	return 0;
}

int sim_experiment(const char *name, const struct sim_opts *base, bool quick,
		   FILE *out)
{
	if (!strcmp(name, "list")) {
		sim_experiments_help(out);
		return 0;
	}
	for (int i = 0; i < NR_EXPERIMENTS; i++)
		if (!strcmp(name, experiments[i].name))
			return run_experiment(&experiments[i], base, quick,
					      out);
	fprintf(stderr, "fiber-sim: no experiment \"%s\"; there are:", name);
	for (int i = 0; i < NR_EXPERIMENTS; i++)
		fprintf(stderr, " %s", experiments[i].name);
	fprintf(stderr, " (and list)\n");
	return -1;
}

void sim_experiments_help(FILE *out)
{
	for (int i = 0; i < NR_EXPERIMENTS; i++)
		fprintf(out, "  %-12s %s\n", experiments[i].name,
			experiments[i].title);
}
