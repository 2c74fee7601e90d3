// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * main.c - fiber-sim's command line (doc/simulator.md 1).
 *
 *   fiber-sim --topology STR|FILE --workload NAME[:k=v,...]
 *             [--features STR] [--seed N] [--duration-ms T] [--json]
 *             [--trace FILE [--trace-format text|chrome]] [--cost k=v,...]
 *   fiber-sim --experiment NAME|list [--seed N] [--quick]
 *
 * --speed prints the wall-clock time and the events per second on
 * stderr; it is the only output that depends on the host.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: fiber-sim --topology STR|FILE --workload NAME[:k=v,...] "
		"[OPTION]...\n"
		"       fiber-sim --experiment NAME|list [--seed N] [--quick]\n"
		"Simulate libfiber's scheduler: the library's own topology and\n"
		"placement code on simulated workers in virtual time.\n\n"
		"  --topology STR|FILE  hwloc synthetic string or XML file; one\n"
		"                       worker per PU (at most %d)\n"
		"  --workers N          fewer (or more) workers than PUs\n"
		"  --workload NAME[:k=v,...]  see below\n"
		"  --features STR       LIBFIBER_SCHED_FEATURES syntax, applied "
		"to the\n"
		"                       defaults\n"
		"  --asym-smt           ASYM_PACKING on the SMT level too (the\n"
		"                       POWER choice, doc/scheduler.md 4.2.2)\n"
		"  --blocked-load-interval MS  LIBFIBER_BLOCKED_LOAD_INTERVAL_MS\n"
		"  --seed N             the simulator's and the workers' "
		"generators (1)\n"
		"  --duration-ms T      virtual time to run (0: until the "
		"workload ends)\n"
		"  --cost k=v,...       cost-model parameters, see below\n"
		"  --json               one JSON object instead of the text "
		"summary\n"
		"  --trace FILE         every decision, one per line\n"
		"  --trace-format text|chrome  chrome: Chrome/Perfetto JSON\n"
		"  --legacy-idle        the idle path before the gated steal\n"
		"                       (sched/idle.c's earlier steal and "
		"poll-loop search)\n"
		"  --experiment NAME    run one of the experiments below (list:\n"
		"                       name them); sets its own topology,\n"
		"                       workload, features and costs\n"
		"  --quick              with --experiment: the reduced sizes\n"
		"  --speed              wall-clock time and events/s on stderr\n"
		"  -h, --help           this text\n\n"
		"Workloads:\n",
		SIM_MAX_WORKERS);
	for (int i = 0; sim_workloads[i]; i++)
		fprintf(out, "  %-10s %s\n", sim_workloads[i]->name,
			sim_workloads[i]->help);
	fprintf(out, "\nCost model (name, default, unit, source):\n");
	sim_cost_help(out);
	fprintf(out, "\nExperiments:\n");
	sim_experiments_help(out);
}

static double wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long num(const char *opt, const char *v, unsigned long max)
{
	char *end;
	unsigned long x = strtoul(v, &end, 10);

	if (!*v || *end || x > max) {
		fprintf(stderr,
			"fiber-sim: %s wants a whole number up to %lu, "
			"not \"%s\"\n",
			opt, max, v);
		exit(2);
	}
	return x;
}

int main(int argc, char **argv)
{
	enum {
		O_TOPO = 256,
		O_WORKLOAD,
		O_FEATURES,
		O_SEED,
		O_DURATION,
		O_JSON,
		O_TRACE,
		O_TRACE_FMT,
		O_COST,
		O_WORKERS,
		O_ASYM_SMT,
		O_BLI,
		O_EXPERIMENT,
		O_SPEED,
		O_LEGACY,
		O_QUICK,
	};
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, O_TOPO },
		{ "workload", required_argument, NULL, O_WORKLOAD },
		{ "features", required_argument, NULL, O_FEATURES },
		{ "seed", required_argument, NULL, O_SEED },
		{ "duration-ms", required_argument, NULL, O_DURATION },
		{ "json", no_argument, NULL, O_JSON },
		{ "trace", required_argument, NULL, O_TRACE },
		{ "trace-format", required_argument, NULL, O_TRACE_FMT },
		{ "cost", required_argument, NULL, O_COST },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "asym-smt", no_argument, NULL, O_ASYM_SMT },
		{ "blocked-load-interval", required_argument, NULL, O_BLI },
		{ "experiment", required_argument, NULL, O_EXPERIMENT },
		{ "speed", no_argument, NULL, O_SPEED },
		{ "legacy-idle", no_argument, NULL, O_LEGACY },
		{ "quick", no_argument, NULL, O_QUICK },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sim_opts o = { .seed = 1, .blocked_interval = 1 };
	const char *experiment = NULL, *colon;
	bool speed = false, quick = false, run_opts = false;
	struct sim s;
	char err[1024];
	double t0;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_TOPO:
			o.topology = optarg;
			break;
		case O_WORKLOAD:
			o.workload = optarg;
			break;
		case O_FEATURES:
			o.features = optarg;
			break;
		case O_SEED:
			o.seed = num("--seed", optarg, UINT64_MAX >> 1);
			break;
		case O_DURATION:
			o.duration_ns =
				num("--duration-ms", optarg, 3600000) * SIM_MS;
			break;
		case O_JSON:
			o.json = true;
			break;
		case O_TRACE:
			o.trace = optarg;
			break;
		case O_TRACE_FMT:
			if (!strcmp(optarg, "chrome"))
				o.trace_chrome = true;
			else if (strcmp(optarg, "text")) {
				fprintf(stderr, "fiber-sim: --trace-format is "
						"text or chrome\n");
				return 2;
			}
			break;
		case O_COST:
			o.cost = optarg;
			break;
		case O_WORKERS:
			o.workers =
				(int)num("--workers", optarg, SIM_MAX_WORKERS);
			break;
		case O_ASYM_SMT:
			o.asym_smt = true;
			break;
		case O_BLI:
			o.blocked_interval = (unsigned)num(
				"--blocked-load-interval", optarg, 1000);
			break;
		case O_EXPERIMENT:
			experiment = optarg;
			break;
		case O_SPEED:
			speed = true;
			break;
		case O_LEGACY:
			o.legacy_idle = true;
			break;
		case O_QUICK:
			quick = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "fiber-sim: unexpected argument \"%s\"\n",
			argv[optind]);
		return 2;
	}
	run_opts = o.topology || o.workload || o.features || o.cost ||
		   o.duration_ns || o.json || o.trace || o.trace_chrome ||
		   o.workers || o.asym_smt || o.legacy_idle ||
		   o.blocked_interval != 1 || speed;
	if (experiment && run_opts) {
		fprintf(stderr, "fiber-sim: --experiment takes only --seed and "
				"--quick (it sets the rest itself)\n");
		return 2;
	}
	if (quick && !experiment) {
		fprintf(stderr, "fiber-sim: --quick goes with --experiment\n");
		return 2;
	}
	if (experiment)
		return sim_experiment(experiment, &o, quick, stdout) ? 2 : 0;
	if (!o.topology || !o.workload) {
		fprintf(stderr, "fiber-sim: --topology and --workload are "
				"required (see --help)\n");
		return 2;
	}
	if (o.cost) {
		struct sim_cost probe;

		if (sim_cost_set(&probe, o.cost))
			return 2;
	}
	colon = strchr(o.workload, ':');
	t0 = wall();
	if (sim_open(&s, &o, err, sizeof(err))) {
		fprintf(stderr, "fiber-sim: %s\n", err);
		return 2;
	}
	s.wl = sim_workload_find(o.workload,
				 colon ? (size_t)(colon - o.workload) :
					 strlen(o.workload));
	if (!s.wl) {
		fprintf(stderr, "fiber-sim: no workload \"%s\" (see --help)\n",
			o.workload);
		sim_close(&s);
		return 2;
	}
	sim_run(&s);
	if (s.nr_deadlocked) {
		fprintf(stderr,
			"fiber-sim: deadlock: %s left %d fibers blocked at "
			"%.3f virtual ms with none able to run and no timer "
			"armed; no result\n",
			o.workload, s.nr_deadlocked, s.now / 1e6);
		sim_close(&s);
		return 1;
	}
	if (getenv("FIBER_SIM_DUMP")) {
		void sim_dump(struct sim *, FILE *);

		sim_dump(&s, stderr);
	}
	if (o.json)
		sim_report_json(&s, stdout);
	else
		sim_report_text(&s, stdout);
	if (speed) {
		double dt = wall() - t0;

		fprintf(stderr,
			"fiber-sim: %.3f s wall, %llu events, %.0f "
			"events/s, %.1f virtual ms\n",
			dt, (unsigned long long)s.st.events,
			dt > 0 ? s.st.events / dt : 0, s.end_ns / 1e6);
	}
	sim_close(&s);
	return 0;
}
