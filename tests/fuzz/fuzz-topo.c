/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-topo.c - LIBFIBER_TOPOLOGY as an hwloc synthetic string
 * (fb_topo_open).  hwloc builds every object a description asks for, so
 * inputs are bounded: at most 64 bytes and at most 4096 objects (the
 * product of the numbers in the string), which keeps one run in the
 * milliseconds.  Strings that could name a file ('/', '.') are skipped:
 * the XML path is not what this target is about.  Inputs whose length is
 * a multiple of ten ask for the message, whose hwloc reason costs a child
 * process (topo/topo.c); the others pass no buffer and get no message.
 */
#include <errno.h>
#include <stdio.h>

#include "fuzz.h"
#include "topo/topo.h"

/* plausible_size - false if the numbers in @s multiply past 4096. */
static bool plausible_size(const char *s)
{
	unsigned long prod = 1, n = 0;
	bool in = false;

	for (;; s++) {
		if (*s >= '0' && *s <= '9') {
			n = n * 10 + (unsigned long)(*s - '0');
			if (n > 4096)
				return false;
			in = true;
		} else {
			if (in && n > 1)
				prod *= n;
			if (prod > 4096)
				return false;
			n = 0;
			in = false;
		}
		if (!*s)
			return true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fb_topo *t = NULL;
	char *spec, err[1024] = "";
	int rc;

	if (size > 64 || memchr(data, '/', size) || memchr(data, '.', size))
		return 0;
	spec = fuzz_str(data, size, 64);
	if (!plausible_size(spec) || !*spec) {
		free(spec);
		return 0;
	}
	rc = fb_topo_open(&t, spec, err, size % 10 ? 0 : sizeof(err));
	if (rc == 0) {
		if (fb_topo_nr_pus(t) <= 0)
			abort();
		fb_topo_close(t);
	} else if (rc == EINVAL) {
		if (size % 10 == 0 && !memchr(err, '\0', sizeof(err)))
			abort();
	} else if (rc != ENOMEM) {
		abort();
	}
	free(spec);
	return 0;
}
