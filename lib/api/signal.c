/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * signal.c - fiber_signal_wait(): wait for a signal in a fiber without
 * stopping its worker, through a signalfd(2) watched by fiber_poll().
 *
 * A signal reaches a signalfd only while it is blocked: one that some
 * thread leaves unblocked is delivered to that thread instead.  Workers
 * take the signal mask of the thread that starts the runtime, and the
 * offload helpers block every signal, so a program blocks the signals it
 * waits for with pthread_sigmask() before fiber_init() (before it makes
 * any thread).  The call checks the calling thread's mask and refuses a
 * set with a signal it does not block.  One signalfd per call: signals are
 * rare, and a descriptor kept between calls would leak into fork children
 * and need a lock.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <fiber.h>

#include "sched/sched.h"

/* blocked - whether every signal of @set is blocked on this thread and
 * @set has one. */
static bool blocked(const sigset_t *set)
{
	sigset_t cur;
	bool any = false;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	for (int s = 1; s < NSIG; s++) {
		if (sigismember(set, s) != 1)
			continue;
		if (sigismember(&cur, s) != 1)
			return false;
		any = true;
	}
	return any;
}

/* timeout_ms - what is left until @deadline, rounded up, for poll(2). */
static int timeout_ms(uint64_t deadline)
{
	uint64_t now = fiber_now(), ms;

	if (deadline == FIBER_NO_DEADLINE)
		return -1;
	if (now >= deadline)
		return 0;
	ms = (deadline - now + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

int fiber_signal_wait(const sigset_t *set, int *sig, uint64_t deadline)
{
	struct signalfd_siginfo si;
	int fd, rc, err = 0;

	if (!set || !sig || !blocked(set))
		return EINVAL;
	fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return errno;
	fb_poll_new_file(fd);
	for (;;) {
		if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			*sig = (int)si.ssi_signo;
			break;
		}
		rc = fiber_poll(fd, POLLIN, timeout_ms(deadline));
		if (rc == 0 && timeout_ms(deadline) == 0) {
			err = ETIMEDOUT;
			break;
		}
		if (rc < 0) {
			err = fiber_errno();
			break;
		}
	}
	/* fiber_close(), not close(2): the next call's signalfd most likely
	 * gets this number, and the poller must not take it for this one,
	 * which it watches still (sched/netpoll.c). */
	fiber_close(fd);
	return err;
}
