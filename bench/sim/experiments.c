// SPDX-License-Identifier: LGPL-2.1-or-later
/* experiments.c - placeholder */
#include "sim.h"

int sim_experiment(const char *name, const struct sim_opts *base, FILE *out)
{
	(void)base;
	fprintf(out, "no experiment %s\n", name);
	return -1;
}

void sim_experiments_help(FILE *out)
{
	(void)out;
}
