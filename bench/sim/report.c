// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * report.c - what fiber-sim prints: the histogram, the metrics as JSON or
 * text, and the trace (doc/simulator.md 5).  Nothing here reads a clock:
 * the output is a function of the run, so equal seeds give equal bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

const struct sim_counters *sim_foreign_counters(void);

/* ---- histogram: 64 linear sub-buckets per power of two -------------------------- */

static unsigned bucket_of(uint64_t v)
{
	unsigned e;

	if (v < SIM_HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* v >= 2^6 */
	return (e - 5) * SIM_HIST_SUB +
	       (unsigned)((v >> (e - 6)) & (SIM_HIST_SUB - 1));
}

static uint64_t bucket_low(unsigned b)
{
	unsigned e = b / SIM_HIST_SUB, m = b % SIM_HIST_SUB;

	if (e == 0)
		return m;
	return ((uint64_t)(SIM_HIST_SUB + m)) << (e - 1);
}

void sim_hist_add(struct sim_hist *h, uint64_t v)
{
	unsigned b = bucket_of(v);

	if (b >= SIM_HIST_BUCKETS)
		b = SIM_HIST_BUCKETS - 1;
	h->b[b]++;
	h->n++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
	if (v < h->min)
		h->min = v;
}

double sim_hist_pct(const struct sim_hist *h, double p)
{
	uint64_t want, seen = 0;

	if (!h->n || !h->b)
		return NAN;
	want = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (want < 1)
		want = 1;
	for (unsigned b = 0; b < SIM_HIST_BUCKETS; b++) {
		seen += h->b[b];
		if (seen >= want) {
			uint64_t v = bucket_low(b);

			if (v < h->min)
				v = h->min;
			if (v > h->max)
				v = h->max;
			return (double)v;
		}
	}
	return (double)h->max;
}

double sim_hist_mean(const struct sim_hist *h)
{
	return h->n ? (double)h->sum / (double)h->n : NAN;
}

double sim_hist_max(const struct sim_hist *h)
{
	return h->n ? (double)h->max : NAN;
}

void sim_hist_free(struct sim_hist *h)
{
	free(h->b);
	h->b = NULL;
}

/* ---- totals ---------------------------------------------------------------------- */

void sim_totals(struct sim *s, struct sim_counters *t)
{
	const uint64_t *f = (const uint64_t *)sim_foreign_counters();
	uint64_t *o = (uint64_t *)t;
	size_t n = sizeof(*t) / sizeof(uint64_t);

	memcpy(t, f, sizeof(*t));
	for (int i = 0; i < s->n; i++) {
		const uint64_t *c = (const uint64_t *)&s->w[i].cnt;

		for (size_t k = 0; k < n; k++)
			o[k] += c[k];
	}
}

static const char *const counter_names[] = {
#define FB_COUNTER(name, desc) #name,
#include "sched/counters.h"
#undef FB_COUNTER
};

/* ratio - a / b, or NAN (null, n/a) where there is no b to share out:
 * probes per wakeup of a run that placed no wakeup is not 0. */
static double ratio(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

/* num - a number as JSON: finite, fixed precision, no locale. */
static void num(FILE *out, double v)
{
	if (!isfinite(v))
		fputs("null", out);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(out, "%.0f", v);
	else
		fprintf(out, "%.6g", v);
}

static void features(FILE *out)
{
	bool first = true;

	for (int i = 0; i < FB_FEAT_NR; i++) {
		bool on = (fb_load_relaxed(&fb_features_mask) >> i) & 1;

		fprintf(out, "%s%s%s", first ? "" : " ", on ? "" : "NO_",
			fb_feature_name(i));
		first = false;
	}
}

static const char *const dist_names[SIM_D_NR] = { "same", "smt", "llc", "pkg",
						  "numa" };
static const char *const kind_names[3] = { "busy", "idle", "newly_idle" };

void sim_report_json(struct sim *s, FILE *out)
{
	struct sim_counters t;
	const uint64_t *tv = (const uint64_t *)&t;
	const struct sim_hist *h = &s->st.wake_lat;
	char desc[512];
	double dur = (double)s->end_ns;

	sim_totals(s, &t);
	fb_topo_describe(s->topo, desc, sizeof(desc));
	fprintf(out, "{\"schema\":1,\"tool\":\"fiber-sim\",");
	fprintf(out, "\"topology\":\"%s\",\"topology_desc\":\"", s->o.topology);
	for (const char *c = desc; *c; c++)
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else
			fputc(*c, out);
	fprintf(out, "\",\"workers\":%d,\"workload\":\"%s\",\"features\":\"",
		s->n, s->o.workload);
	features(out);
	fprintf(out, "\",\"seed\":%llu,\"asym_smt\":%s,\"legacy_idle\":%s,",
		(unsigned long long)s->o.seed, s->o.asym_smt ? "true" : "false",
		s->o.legacy_idle ? "true" : "false");
	fprintf(out, "\"virtual_ns\":%llu,\"events\":%llu,",
		(unsigned long long)s->end_ns,
		(unsigned long long)s->st.events);
	fprintf(out, "\"result\":{\"metric\":\"%s\",\"unit\":\"%s\",\"value\":",
		s->res.metric, s->res.unit);
	num(out, s->res.value);
	for (int i = 0; i < s->res.nr_extra; i++) {
		fprintf(out, ",\"%s\":", s->res.extra_name[i]);
		num(out, s->res.extra[i]);
	}
	fprintf(out, "},\"wakeup_latency_us\":{\"n\":%llu,\"mean\":",
		(unsigned long long)h->n);
	num(out, sim_hist_mean(h) / 1e3);
	fprintf(out, ",\"p50\":");
	num(out, sim_hist_pct(h, 50) / 1e3);
	fprintf(out, ",\"p90\":");
	num(out, sim_hist_pct(h, 90) / 1e3);
	fprintf(out, ",\"p99\":");
	num(out, sim_hist_pct(h, 99) / 1e3);
	fprintf(out, ",\"p99.9\":");
	num(out, sim_hist_pct(h, 99.9) / 1e3);
	fprintf(out, ",\"max\":");
	num(out, sim_hist_max(h) / 1e3);
	fprintf(out, "},\"probes_per_wakeup\":");
	num(out, ratio((double)t.wake_probes, (double)t.wake_placements));
	fprintf(out, ",\"idle_core_hit_rate\":");
	num(out,
	    ratio((double)s->st.wakes_idle_core, (double)t.wake_placements));
	fprintf(out, ",\"idle_worker_hit_rate\":");
	num(out,
	    ratio((double)s->st.wakes_idle_worker, (double)t.wake_placements));
	fprintf(out, ",\"llc_kept_share\":");
	num(out,
	    ratio((double)s->st.wakes_llc_kept, (double)t.wake_placements));
	fprintf(out, ",\"migrations\":{");
	for (int d = SIM_D_SMT; d < SIM_D_NR; d++)
		fprintf(out, "%s\"%s\":%llu", d == SIM_D_SMT ? "" : ",",
			dist_names[d], (unsigned long long)s->st.migrations[d]);
	fprintf(out, "},\"balance\":{");
	for (int k = 0; k < 3; k++) {
		fprintf(out,
			"%s\"%s\":{\"attempts\":%llu,\"pulls\":%llu,"
			"\"cost_us\":",
			k ? "," : "", kind_names[k],
			(unsigned long long)s->st.lb_by_kind[k],
			(unsigned long long)s->st.lb_pulled_by_kind[k]);
		num(out, s->st.lb_cost_ns[k] / 1e3);
		fputc('}', out);
	}
	fprintf(out,
		",\"workers_read\":%llu,\"push_requests\":%llu,"
		"\"push_refused\":%llu,\"idle_entries\":%llu,"
		"\"victim_searches\":%llu,\"victim_reads\":%llu,"
		"\"victim_cost_us\":",
		(unsigned long long)s->st.lb_workers_read,
		(unsigned long long)s->st.pushes_requested,
		(unsigned long long)s->st.pushes_refused,
		(unsigned long long)s->st.idle_entries,
		(unsigned long long)s->st.victim_searches,
		(unsigned long long)s->st.victim_reads);
	num(out, s->st.steal_cost_ns / 1e3);
	fprintf(out, ",\"levels\":[");
	for (int l = 0; l < SIM_BAL_LEVELS; l++) {
		uint64_t a = 0, p = 0, y = 0, k = 0;

		for (int i = 0; i < s->n; i++) {
			a += s->w[i].nr_lb[l];
			p += s->w[i].nr_pulled[l];
			y += s->w[i].nr_asym[l];
			k += s->w[i].nr_ni_skips[l];
		}
		fprintf(out,
			"%s{\"attempts\":%llu,\"pulls\":%llu,\"asym\":%llu,"
			"\"ni_skips\":%llu}",
			l ? "," : "", (unsigned long long)a,
			(unsigned long long)p, (unsigned long long)y,
			(unsigned long long)k);
	}
	fprintf(out, "]},\"counters\":{");
	for (size_t k = 0; k < sizeof(t) / sizeof(uint64_t); k++)
		fprintf(out, "%s\"%s\":%llu", k ? "," : "", counter_names[k],
			(unsigned long long)tv[k]);
	fprintf(out, "},\"utilisation\":[");
	for (int i = 0; i < s->n; i++) {
		fprintf(out, "%s", i ? "," : "");
		num(out,
		    dur > 0 ? floor(s->w[i].busy_ns / dur * 1e4) / 1e4 : NAN);
	}
	fprintf(out, "],\"cost\":{");
	for (int i = 0; i < sim_nr_params; i++) {
		fprintf(out, "%s\"%s\":", i ? "," : "", sim_params[i].name);
		num(out, *(const double *)((const char *)&s->c +
					   sim_params[i].offset));
	}
	fprintf(out, "}}\n");
}

/* text_num - a result in the text summary: "n/a" where the run gave none
 * (nothing measured, or the workload unfinished), as JSON's null. */
static void text_num(FILE *out, const char *name, double v, const char *unit)
{
	if (isfinite(v))
		fprintf(out, "  %-28s %.6g%s%s\n", name, v, *unit ? " " : "",
			unit);
	else
		fprintf(out, "  %-28s n/a\n", name);
}

/* text_fix - " %.3f", or " n/a" where there is no figure. */
static void text_fix(FILE *out, double v)
{
	if (isfinite(v))
		fprintf(out, " %.3f", v);
	else
		fputs(" n/a", out);
}

void sim_report_text(struct sim *s, FILE *out)
{
	struct sim_counters t;
	const struct sim_hist *h = &s->st.wake_lat;
	double busy = 0;

	sim_totals(s, &t);
	for (int i = 0; i < s->n; i++)
		busy += (double)s->w[i].busy_ns;
	fprintf(out,
		"fiber-sim: %s on \"%s\" (%d workers), seed %llu, "
		"%.3f ms simulated, %llu events\n",
		s->o.workload, s->o.topology, s->n,
		(unsigned long long)s->o.seed, s->end_ns / 1e6,
		(unsigned long long)s->st.events);
	text_num(out, s->res.metric, s->res.value, s->res.unit);
	for (int i = 0; i < s->res.nr_extra; i++)
		text_num(out, s->res.extra_name[i], s->res.extra[i], "");
	fprintf(out, "  wakeup latency us           p50");
	text_fix(out, sim_hist_pct(h, 50) / 1e3);
	fprintf(out, " p90");
	text_fix(out, sim_hist_pct(h, 90) / 1e3);
	fprintf(out, " p99");
	text_fix(out, sim_hist_pct(h, 99) / 1e3);
	fprintf(out, " max");
	text_fix(out, sim_hist_max(h) / 1e3);
	fprintf(out, " (%llu)\n", (unsigned long long)h->n);
	fprintf(out, "  probes per wakeup          ");
	text_fix(out, ratio((double)t.wake_probes, (double)t.wake_placements));
	fprintf(out, "\n  idle-core hits, LLC kept   ");
	text_fix(out, ratio((double)s->st.wakes_idle_core,
			    (double)t.wake_placements));
	text_fix(out, ratio((double)s->st.wakes_llc_kept,
			    (double)t.wake_placements));
	fputc('\n', out);
	fprintf(out,
		"  deliveries                  wakelist %llu direct %llu "
		"local %llu\n",
		(unsigned long long)t.wakelist_pushes,
		(unsigned long long)t.direct_enqueues,
		(unsigned long long)t.local_enqueues);
	fprintf(out, "  migrations smt/llc/pkg/numa %llu %llu %llu %llu\n",
		(unsigned long long)s->st.migrations[SIM_D_SMT],
		(unsigned long long)s->st.migrations[SIM_D_LLC],
		(unsigned long long)s->st.migrations[SIM_D_PKG],
		(unsigned long long)s->st.migrations[SIM_D_NUMA]);
	fprintf(out, "  balances, pulls, steals     %llu %llu %llu\n",
		(unsigned long long)t.lb_balances,
		(unsigned long long)t.lb_pulled, (unsigned long long)t.steals);
	fprintf(out, "  mean utilisation           ");
	text_fix(out, s->end_ns ? busy / (double)s->end_ns / s->n : NAN);
	fputc('\n', out);
}

/* ---- the trace --------------------------------------------------------------------- */

static const char *const pick_names[] = {
	[FB_PICK_TARGET] = "target",	   [FB_PICK_PREV] = "prev",
	[FB_PICK_RECENT] = "recent",	   [FB_PICK_SIBLING] = "sibling",
	[FB_PICK_IDLE_CORE] = "idle_core", [FB_PICK_SCAN_HIT] = "scan_hit",
	[FB_PICK_SCAN_MISS] = "scan_miss", [FB_PICK_AFFINITY] = "affinity",
	[FB_PICK_PINNED] = "pinned",
};
_Static_assert(FB_ARRAY_SIZE(pick_names) == FB_PICK_PINNED + 1,
	       "a name for every pick");

/* The trace stops growing past this many lines (a long run's Chrome trace
 * would not load anyway). */
#define TRACE_MAX 2000000

void sim_trace_open(struct sim *s)
{
	if (!s->o.trace)
		return;
	s->trace = fopen(s->o.trace, "w");
	if (!s->trace) {
		fprintf(stderr, "fiber-sim: cannot write %s\n", s->o.trace);
		exit(2);
	}
	s->trace_first = true;
	if (s->o.trace_chrome)
		fprintf(s->trace, "{\"displayTimeUnit\":\"ns\","
				  "\"traceEvents\":[\n");
	else
		fprintf(s->trace, "# t_ns decision waker prev target probes "
				  "reason path fiber\n");
}

void sim_trace_close(struct sim *s)
{
	if (!s->trace)
		return;
	if (s->o.trace_chrome)
		fprintf(s->trace, "\n]}\n");
	fclose(s->trace);
	s->trace = NULL;
}

static bool trace_room(struct sim *s)
{
	if (!s->trace || s->trace_lines >= TRACE_MAX)
		return false;
	s->trace_lines++;
	if (s->o.trace_chrome) {
		if (!s->trace_first)
			fputs(",\n", s->trace);
		s->trace_first = false;
	}
	return true;
}

void sim_trace_wake(struct sim *s, int waker, int prev, int target,
		    const struct fb_wake_result *r, const char *path, int fiber)
{
	const char *why = r ? pick_names[r->pick] : "on_worker";
	uint64_t t = sim_time(s);

	if (!trace_room(s))
		return;
	if (s->o.trace_chrome)
		fprintf(s->trace,
			"{\"name\":\"wake %s\",\"ph\":\"i\",\"s\":\"t\","
			"\"ts\":%.3f,\"pid\":0,\"tid\":%d,\"args\":{\"fiber\":%d,"
			"\"waker\":%d,\"prev\":%d,\"probes\":%d,\"path\":\"%s\"}}",
			why, t / 1e3, target, fiber, waker, prev,
			r ? r->probes : 0, path);
	else
		fprintf(s->trace, "%llu wake %d %d %d %d %s%s %s %d\n",
			(unsigned long long)t, waker, prev, target,
			r ? r->probes : 0, why, r && r->affine ? "+affine" : "",
			path, fiber);
}

void sim_trace_event(struct sim *s, const char *what, int worker, int fiber,
		     int other, long value)
{
	uint64_t t = sim_time(s);

	if (!trace_room(s))
		return;
	if (s->o.trace_chrome)
		fprintf(s->trace,
			"{\"name\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,"
			"\"pid\":0,\"tid\":%d,\"args\":{\"fiber\":%d,"
			"\"other\":%d,\"value\":%ld}}",
			what, t / 1e3, worker, fiber, other, value);
	else
		fprintf(s->trace, "%llu %s %d %d %d %ld - - %d\n",
			(unsigned long long)t, what, other, -1, worker, value,
			fiber);
}

void sim_trace_run(struct sim *s, int worker, int fiber, uint64_t from,
		   uint64_t to)
{
	if (!s->o.trace_chrome || !trace_room(s))
		return;
	fprintf(s->trace,
		"{\"name\":\"fiber %d\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
		"\"pid\":0,\"tid\":%d}",
		fiber, from / 1e3, (to - from) / 1e3, worker);
}
