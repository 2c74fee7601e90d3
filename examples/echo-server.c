/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * echo-server - one fiber per connection, each echoing what it reads.
 *
 *   echo-server [--port N] [--workers N] [--addr A.B.C.D]
 *
 * Listens on 127.0.0.1:8080 unless told otherwise; SIGINT or SIGTERM stops
 * it cleanly.  The skeleton (acceptor, EMFILE back-off, stop) is server.h.
 */
#include "server.h"

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[4096];
	ssize_t n;

	/* fiber_write returns only when all n bytes are out (or on error). */
	while ((n = fiber_read(fd, buf, sizeof(buf))) > 0)
		if (fiber_write(fd, buf, (size_t)n) != n)
			break;
	conn_close(fd); /* EOF, ECONNRESET, or a failed write */
	return NULL;
}

int main(int argc, char **argv)
{
	return server_main(argc, argv, "echo-server", serve);
}
