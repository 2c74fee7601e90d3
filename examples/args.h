/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * args.h - the examples' strict reading of a numeric option: a decimal
 * number in a stated range or a message that names the option and the
 * value, never atoi's silent 0 ("--port abc" once meant "any port").
 */
#ifndef EXAMPLES_ARGS_H
#define EXAMPLES_ARGS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * arg_number - parse @val, the value of option @opt of program @prog, as a
 * decimal integer in [@min, @max] into *@n.  Returns 0, or -1 after saying
 * on stderr what is wrong with it.
 */
static inline int arg_number(const char *prog, const char *opt, const char *val,
			     long min, long max, long *n)
{
	char *end;

	errno = 0;
	*n = strtol(val, &end, 10);
	if (errno || end == val || *end || *n < min || *n > max) {
		fprintf(stderr,
			"%s: %s '%s' is not a whole number from %ld to %ld\n",
			prog, opt, val, min, max);
		return -1;
	}
	return 0;
}

#endif /* EXAMPLES_ARGS_H */
