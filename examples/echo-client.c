/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * echo-client - many fiber clients against echo-server: each connects,
 * sends numbered messages and checks that every byte comes back.
 *
 *   echo-client [--port N] [--workers N] [--addr A.B.C.D]
 *		 [--conns N] [--rounds N]
 *
 * Prints the round trips done and exits 1 if any byte came back wrong.
 */
#include <fiber.h>

#include "args.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sockaddr_in server = { .sin_family = AF_INET };
static int rounds = 100;
static atomic_long done, failed;

/* read exactly @len bytes; false on EOF or error */
static bool read_all(int fd, char *buf, size_t len)
{
	ssize_t n;

	for (size_t got = 0; got < len; got += (size_t)n)
		if ((n = fiber_read(fd, buf + got, len - got)) <= 0)
			return false;
	return true;
}

static void *client(void *arg)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	char msg[64], back[64];
	int len;

	if (fd < 0 || fiber_connect(fd, (struct sockaddr *)&server,
				    sizeof(server), 5000)) {
		fprintf(stderr, "echo-client: connect: %s\n", strerror(errno));
		atomic_fetch_add(&failed, 1);
		goto out;
	}
	for (int i = 0; i < rounds; i++) {
		len = snprintf(msg, sizeof(msg), "client %ld round %d\n",
			       (long)arg, i);
		if (fiber_write(fd, msg, (size_t)len) != len ||
		    !read_all(fd, back, (size_t)len) ||
		    memcmp(msg, back, (size_t)len)) {
			atomic_fetch_add(&failed, 1);
			break;
		}
		atomic_fetch_add(&done, 1);
	}
out:
	if (fd >= 0)
		close(fd);
	return NULL;
}

static const char usage[] =
	"usage: echo-client [--port N] [--workers N] [--addr A.B.C.D] "
	"[--conns N] [--rounds N]\n";

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' },   { "workers", 1, NULL, 'w' },
		{ "addr", 1, NULL, 'a' },   { "conns", 1, NULL, 'c' },
		{ "rounds", 1, NULL, 'r' }, { 0 }
	};
	struct fiber_config cfg = { 0 };
	const char *addr = "127.0.0.1";
	int port = 8080, conns = 100, c;
	fiber_t *f;

	while ((c = getopt_long(argc, argv, "p:w:a:c:r:", opts, NULL)) != -1) {
		const char *name = c == 'p' ? "--port" :
				   c == 'w' ? "--workers" :
				   c == 'c' ? "--conns" :
					      "--rounds";
		long n = 0;

		if (c == 'a') {
			addr = optarg;
			continue;
		}
		if (c == '?' || c == ':' ||
		    arg_number("echo-client", name, optarg,
			       c == 'w' || c == 'p' ? 0 : 1,
			       c == 'p' ? 65535 :
			       c == 'w' ? 1024 :
					  1000000000,
			       &n)) {
			fputs(usage, stderr);
			return 2;
		}
		if (c == 'p')
			port = (int)n;
		else if (c == 'w')
			cfg.workers = (unsigned int)n;
		else if (c == 'c')
			conns = (int)n;
		else
			rounds = (int)n;
	}
	if (arg_none_left("echo-client", argc, argv)) {
		fputs(usage, stderr);
		return 2;
	}
	if (arg_ipv4("echo-client", addr, &server.sin_addr))
		return 2;
	server.sin_port = htons((uint16_t)port);
	f = calloc((size_t)conns, sizeof(*f));
	if (!f || fiber_init(&cfg)) {
		fprintf(stderr, "echo-client: cannot start\n");
		return 1;
	}
	for (long i = 0; i < conns; i++)
		if (fiber_create(&f[i], NULL, client, (void *)i))
			return 1;
	for (int i = 0; i < conns; i++)
		fiber_join(f[i], NULL);
	printf("echo-client: %ld round trips, %ld failed connections\n",
	       atomic_load(&done), atomic_load(&failed));
	fiber_shutdown();
	free(f);
	return atomic_load(&failed) ? 1 : 0;
}
