/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/common.c - assertions, the allocation wrappers with their fault-injection
 * hook, the spinlock's slow path, the clock and the futex calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"

void fb_die(const char *file, int line, const char *what)
{
	fprintf(stderr, "libfiber: %s:%d: %s\n", file, line, what);
	fflush(stderr);
	abort();
}

/*
 * Fault injection.  fb_fail_countdown counts allocations down to the one that
 * fails; 0 disables.  Relaxed atomics: tests arm it from one thread and the
 * exact interleaving with other threads does not matter.
 */
_Atomic long fb_fail_countdown;

void fb_fault_fail_nth(long n)
{
	fb_store_seqcst(&fb_fail_countdown, n < 0 ? 0 : n);
}

bool fb_fault_should_fail(void)
{
	long c = fb_load_relaxed(&fb_fail_countdown);

	while (c > 0) {
		if (atomic_compare_exchange_weak(&fb_fail_countdown, &c, c - 1))
			return c == 1;
	}
	return false;
}

void *fb_malloc(size_t size)
{
	if (fb_unlikely(fb_load_relaxed(&fb_fail_countdown)) &&
	    fb_fault_should_fail())
		return NULL;
	return malloc(size);
}

void *fb_calloc(size_t n, size_t size)
{
	if (fb_unlikely(fb_load_relaxed(&fb_fail_countdown)) &&
	    fb_fault_should_fail())
		return NULL;
	return calloc(n, size);
}

void *fb_aligned_alloc(size_t align, size_t size)
{
	void *p;

	if (fb_unlikely(fb_load_relaxed(&fb_fail_countdown)) &&
	    fb_fault_should_fail())
		return NULL;
	if (posix_memalign(&p, align, size))
		return NULL;
	return p;
}

void fb_free(void *p)
{
	free(p);
}

/* Spin with pause; after a while give the CPU away, since the holder may
 * have been preempted by the kernel (2 vCPUs, 16 workers is a tested case). */
void fb_spin_lock_slow(struct fb_spinlock *l)
{
	unsigned int spins = 0;

	for (;;) {
		while (fb_load_relaxed(&l->locked)) {
			if (++spins < 256)
				fb_cpu_relax();
			else
				sched_yield();
		}
		if (atomic_exchange_explicit(&l->locked, 1,
					     memory_order_acquire) == 0)
			return;
	}
}

size_t fb_escape(char *dst, size_t len, const char *src, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!len)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		char e[4];
		size_t k = 0;

		if (c == '"' || c == '\\') {
			e[k++] = '\\';
			e[k++] = (char)c;
		} else if (c < 0x20 || c > 0x7e) {
			e[k++] = '\\';
			e[k++] = 'x';
			e[k++] = hex[c >> 4];
			e[k++] = hex[c & 15];
		} else {
			e[k++] = (char)c;
		}
		if (o + k >= len)
			break;
		for (size_t j = 0; j < k; j++)
			dst[o++] = e[j];
	}
	dst[o] = '\0';
	return o;
}

static void pipe_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGPIPE);
}

static bool pipe_pending(void)
{
	sigset_t pending;

	return !sigpending(&pending) && sigismember(&pending, SIGPIPE);
}

void fb_nopipe_begin(struct fb_nopipe *s)
{
	sigset_t set;

	pipe_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, &s->old);
	s->had = pipe_pending();
}

void fb_nopipe_end(const struct fb_nopipe *s)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t set;

	pipe_set(&set);
	if (!s->had && pipe_pending())
		sigtimedwait(&set, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &s->old, NULL);
}

uint64_t fb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t fb_now_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int fb_futex_wait(atomic_uint *word, unsigned int expected,
		  const struct timespec *rel)
{
	long rc = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, rel,
			  NULL, 0);

	return rc < 0 ? errno : 0;
}

int fb_futex_wake(atomic_uint *word, int nr)
{
	long rc =
		syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, nr, NULL, NULL, 0);

	return rc < 0 ? -errno : (int)rc;
}

int fb_open_output(const char *var, const char *path)
{
	int fd = open(path,
		      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK,
		      0666);
	int fl, err;

	if (fd >= 0) {
		fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) >= 0)
			return fd;
		err = errno;
		close(fd);
		errno = err;
	}
	err = errno;
	fprintf(stderr,
		"libfiber: %s=\"%s\": cannot open it: %s%s; expected a path "
		"that can be written\n",
		var, path, strerror(err),
		err == ENXIO ? " (a FIFO that nobody reads)" : "");
	return -1;
}
