/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fiber-topology - print the topology and the scheduling domains libfiber
 * builds for it, per worker and level, in the spirit of the kernel's
 * /proc/sys/kernel/sched_domain listing.  It reads LIBFIBER_TOPOLOGY and
 * LIBFIBER_SCHED_FEATURES as the runtime does and starts no worker, so it
 * also shows a 64-worker synthetic machine on a laptop:
 *
 *	LIBFIBER_TOPOLOGY="pack:2 numa:1 l3:4 core:2 pu:1" fiber-topology
 *	fiber-topology --topology tests/topologies/n4.xml --json
 *	LIBFIBER_SCHED_FEATURES=ASYM_PACKING fiber-topology --features
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/common.h"
#include "topo/view.h"

static const char usage[] =
	"usage: fiber-topology [--topology STR] [--workers N] [--json] "
	"[--features]\n"
	"  --workers N  the view of N workers, 1 to 4096 (default: one per "
	"PU)\n";
_Static_assert(FB_MAX_WORKERS == 4096, "the usage says 1 to 4096");

/* Print @m as a list: "0-3,8" (text) or "[0,1,2,3,8]" (JSON). */
static void print_mask(const struct fb_wmask *m, bool json)
{
	int w, start = -1, prev = -2;
	const char *sep = "";

	if (json) {
		putchar('[');
		fb_wmask_for_each (w, m) {
			printf("%s%d", sep, w);
			sep = ",";
		}
		putchar(']');
		return;
	}
	for (w = fb_wmask_first(m);; w = fb_wmask_next(m, w + 1)) {
		if (w >= 0 && w == prev + 1) {
			prev = w;
			continue;
		}
		if (start >= 0) {
			printf(prev > start ? "%s%d-%d" : "%s%d", sep, start,
			       prev);
			sep = ",";
		}
		if (w < 0)
			break;
		start = prev = w;
	}
}

static void print_flags(unsigned flags, bool json)
{
	const char *sep = "";

	printf(json ? "[" : "");
	for (int b = 0; b < FB_SD_NR_FLAGS; b++) {
		if (!(flags & (1u << b)))
			continue;
		printf(json ? "%s\"%s\"" : "%s%s", sep, fb_sd_flag_name(b));
		sep = json ? "," : " ";
	}
	printf(json ? "]" : "");
}

static void print_features(uint64_t mask, bool json)
{
	for (int i = 0; i < FB_FEAT_NR; i++) {
		bool on = (mask >> i) & 1;

		if (json)
			printf("%s\"%s\":%s", i ? "," : "", fb_feature_name(i),
			       on ? "true" : "false");
		else
			printf("%-24s %s\n", fb_feature_name(i),
			       on ? "on" : "off");
	}
}

static void print_level(const struct fb_domain *d, bool json)
{
	const struct fb_sched_group *g;
	int k;

	if (json)
		printf("{\"name\":\"%s\",\"span\":", d->name);
	else
		printf("  domain%d %s span ", d->level, d->name);
	print_mask(&d->span, json);
	printf(json ? ",\"groups\":[" : " groups");
	fb_domain_for_each_group (d, g, k) {
		printf(json ? (k ? "," : "") : " {");
		print_mask(&g->span, json);
		printf(json ? "" : "}");
	}
	printf(json ? "],\"flags\":" : "\n    flags ");
	print_flags(d->flags, json);
	printf(json ? ",\"imbalance_pct\":%d,\"cache_nice_tries\":%d,"
		      "\"min_interval\":%u,\"max_interval\":%u,"
		      "\"busy_factor\":%u,\"imb_numa_nr\":%d}" :
		      "\n    imbalance_pct %d cache_nice_tries %d interval "
		      "%u..%u ms busy_factor %u imb_numa_nr %d\n",
	       d->imbalance_pct, d->cache_nice_tries, d->min_interval,
	       d->max_interval, d->busy_factor, d->imb_numa_nr);
}

/* @s as a JSON string (the description quotes the synthetic string). */
static void print_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		if ((unsigned char)*s >= 0x20)
			putchar(*s);
	}
	putchar('"');
}

static void print_view(const struct fb_sched_view *v, const char *desc,
		       uint64_t feats, bool json)
{
	const struct fb_domain *d;

	if (json) {
		printf("{\"topology\":");
		print_json_string(desc);
		printf(",\"workers\":%d,\"nodes\":%d,"
		       "\"llcs\":%d,\"smt\":%s,\"features\":{",
		       v->nr_workers, v->nr_nodes, v->nr_llcs,
		       v->has_smt ? "true" : "false");
		print_features(feats, true);
		printf("},\"domains\":[");
	} else {
		printf("topology %s\nworkers %d, nodes %d, LLCs %d, SMT %s\n",
		       desc, v->nr_workers, v->nr_nodes, v->nr_llcs,
		       v->has_smt ? "yes" : "no");
	}
	for (int w = 0; w < v->nr_workers; w++) {
		printf(json ? "%s{\"worker\":%d,\"llc_id\":%d,\"llc_size\":%d,"
			      "\"share_id\":%d,\"node\":%d,\"prio\":%d,"
			      "\"levels\":[" :
			      "%sworker %d: llc %d (%d workers) share %d node %d "
			      "prio %d\n",
		       json && w ? "," : "", w, v->llc_id[w], v->llc_size[w],
		       v->share_id[w], v->node[w], v->prio[w]);
		fb_for_each_domain (v, w, d) {
			if (json && d->child)
				putchar(',');
			print_level(d, json);
		}
		printf(json ? "]}" : "");
	}
	printf(json ? "]}\n" : "");
}

int main(int argc, char **argv)
{
	const char *spec = getenv("LIBFIBER_TOPOLOGY");
	const char *spec_name = "LIBFIBER_TOPOLOGY"; /* for messages */
	const char *fspec = getenv("LIBFIBER_SCHED_FEATURES");
	bool json = false, feats_only = false;
	struct fb_sched_view *v;
	struct fb_topo *t;
	char err[1024], desc[256];
	uint64_t feats = fb_features_default();
	int workers = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--features")) {
			feats_only = true;
		} else if (!strcmp(argv[i], "--topology") && i + 1 < argc) {
			spec = argv[++i];
			spec_name = "--topology";
		} else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
			long n;

			/* the view's limit, not the runtime's 1024: the
			 * tool starts no worker */
			if (arg_number("fiber-topology", "--workers", argv[++i],
				       1, FB_MAX_WORKERS, &n))
				return 2;
			workers = (int)n;
		} else {
			fputs(usage,
			      strcmp(argv[i], "--help") ? stderr : stdout);
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (fspec && fb_features_parse("LIBFIBER_SCHED_FEATURES", fspec, feats,
				       &feats, err, sizeof(err))) {
		fprintf(stderr, "fiber-topology: %s\n", err);
		return 1;
	}
	if (feats_only && !json) {
		print_features(feats, false);
		return 0;
	}
	rc = fb_topo_open_named(&t, spec, spec_name, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "fiber-topology: %s\n",
			rc == EINVAL ? err : strerror(rc));
		/* a bad option is a usage error; a bad variable, as the
		 * runtime's start, a failure */
		return rc == EINVAL && *spec_name == '-' ? 2 : 1;
	}
	if (!workers && fb_topo_nr_pus(t) > FB_MAX_WORKERS) {
		fprintf(stderr,
			"fiber-topology: %d PUs, more than the %d workers a "
			"view can have; expected --workers from 1 to %d\n",
			fb_topo_nr_pus(t), FB_MAX_WORKERS, FB_MAX_WORKERS);
		fb_topo_close(t);
		return 2;
	}
	rc = fb_topo_view_build(
		t, workers,
		(feats & FB_FEAT_BIT(ASYM_PACKING)) ? FB_VIEW_ASYM_PACKING : 0,
		&v);
	if (rc) {
		fprintf(stderr, "fiber-topology: %s\n", strerror(rc));
		fb_topo_close(t);
		return 1;
	}
	fb_topo_describe(t, desc, sizeof(desc));
	if (json && feats_only) {
		printf("{\"features\":{");
		print_features(feats, true);
		printf("}}\n");
	} else {
		print_view(v, desc, feats, json);
	}
	fb_topo_view_free(v);
	fb_topo_close(t);
	return 0;
}
