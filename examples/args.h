/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * args.h - the examples' strict reading of their options: a decimal
 * number in a stated range, an IPv4 address, no stray argument, or a
 * message that names the option and the value, never atoi's silent 0
 * ("--port abc" once meant "any port").
 */
#ifndef EXAMPLES_ARGS_H
#define EXAMPLES_ARGS_H

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
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

/*
 * arg_none_left - after getopt_long: -1, having said so on stderr, if
 * @argv still holds an argument that is no option (from optind on).
 */
static inline int arg_none_left(const char *prog, int argc, char **argv)
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
	return -1;
}

/*
 * arg_ipv4 - parse @val, the value of --addr, as a dotted IPv4 address
 * into *@a.  Returns 0, or -1 after saying on stderr what is wrong.
 */
static inline int arg_ipv4(const char *prog, const char *val, struct in_addr *a)
{
	if (inet_pton(AF_INET, val, a) == 1)
		return 0;
	fprintf(stderr, "%s: --addr '%s' is not an IPv4 address (A.B.C.D)\n",
		prog, val);
	return -1;
}

#endif /* EXAMPLES_ARGS_H */
