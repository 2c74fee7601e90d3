/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-pipe-pages.c - a fiber pipe backs its ring with pages outside its
 * lock (lib/sync/pipe.c, "Pages"): a quarter of the ring at a time (at most
 * 256 KiB ahead), once,
 * never again after the ring is backed; a kernel without the advice
 * leaves the faults to the writes, as before; and a writer that is
 * backing pages, with the lock released, keeps the pipe from being
 * destroyed under it.
 *
 * madvise() is wrapped (-Wl,--wrap=madvise) so that the test counts the
 * calls, can answer EINVAL as a kernel before 5.14 does, and can hold a
 * writer inside the call while the test thread closes and destroys.
 */
#include <fiber.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int __real_madvise(void *addr, size_t len, int advice);
int __wrap_madvise(void *addr, size_t len, int advice);

static atomic_int populates;   /* MADV_POPULATE_WRITE calls */
static atomic_size_t longest;  /* bytes, the most one call backed */
static atomic_int misaligned;  /* of them, not on whole pages */
static atomic_bool old_kernel; /* answer EINVAL */
static atomic_bool hold;       /* keep the caller inside until cleared */
static atomic_bool inside;     /* a held caller is inside */

int __wrap_madvise(void *addr, size_t len, int advice)
{
	uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);

	if (advice != MADV_POPULATE_WRITE)
		return __real_madvise(addr, len, advice);
	atomic_fetch_add(&populates, 1);
	if (len > atomic_load(&longest))
		atomic_store(&longest, len);
	if (((uintptr_t)addr & (ps - 1)) || (len & (ps - 1)) || !len)
		atomic_fetch_add(&misaligned, 1);
	if (atomic_load(&hold)) {
		atomic_store(&inside, true);
		while (atomic_load(&hold))
			usleep(100);
	}
	if (atomic_load(&old_kernel)) {
		errno = EINVAL;
		return -1;
	}
	return __real_madvise(addr, len, advice);
}

static fiber_t spawn(void *(*fn)(void *), void *arg)
{
	fiber_attr_t attr;
	fiber_t f;

	assert_int_equal(fiber_attr_init(&attr), 0);
	assert_int_equal(fiber_attr_setstacksize(&attr, TEST_STACK), 0);
	assert_int_equal(fiber_create(&f, &attr, fn, arg), 0);
	fiber_attr_destroy(&attr);
	return f;
}

#define RING (1u << 20)
#define CHUNK 4000

struct fill {
	fiber_pipe_t *p;
	size_t bytes; /* to write, then to read back */
	uint8_t seed; /* byte i is (uint8_t)(seed + i * 7) */
	int write_err, read_err;
	size_t written, mismatches;
};

static uint8_t pattern(uint8_t seed, size_t i)
{
	return (uint8_t)(seed + i * 7);
}

/* Write f->bytes of the pattern in CHUNK-byte writes (no reader: the ring
 * takes them all), then read them back and compare. */
static void *fill_then_drain(void *arg)
{
	struct fill *f = arg;
	uint8_t buf[CHUNK];
	size_t off, n, done, i;

	for (off = 0; off < f->bytes; off += n) {
		n = f->bytes - off < CHUNK ? f->bytes - off : CHUNK;
		for (i = 0; i < n; i++)
			buf[i] = pattern(f->seed, off + i);
		f->write_err = fiber_pipe_write(f->p, buf, n, &done);
		f->written += done;
		if (f->write_err)
			return NULL;
	}
	for (off = 0; off < f->bytes; off += done) {
		f->read_err = fiber_pipe_read(f->p, buf, CHUNK, &done);
		if (f->read_err || !done)
			return NULL;
		for (i = 0; i < done; i++)
			f->mismatches += buf[i] != pattern(f->seed, off + i);
	}
	return NULL;
}

static void run_fill(struct fill *f)
{
	assert_int_equal(fiber_join(spawn(fill_then_drain, f), NULL), 0);
	assert_int_equal(f->write_err, 0);
	assert_int_equal(f->read_err, 0);
	assert_int_equal(f->written, f->bytes);
	assert_int_equal(f->mismatches, 0);
}

/* Filling a fresh 1 MiB ring backs it in at most five calls (four
 * quarters, the first perhaps split by the page the header shares), on
 * whole pages; filling it again, wrapped, backs nothing more; and the
 * counter says what happened. */
static void test_pipe_ring_backed_a_quarter_at_a_time(void **state)
{
	struct fill f = { .bytes = RING, .seed = 3 };
	long long counted;
	int calls;

	(void)state;
	runtime_start(1);
	counted = fiber_stats_counter("pipe_populates");
	atomic_store(&populates, 0);
	assert_int_equal(fiber_pipe_create(&f.p, RING), 0);
	run_fill(&f);
	calls = atomic_load(&populates);
	assert_in_range(calls, 1, 5);
	assert_int_equal(atomic_load(&misaligned), 0);
	assert_int_equal(fiber_stats_counter("pipe_populates") - counted,
			 calls);
	f.seed = 101;
	f.written = 0;
	run_fill(&f);
	assert_int_equal(atomic_load(&populates), calls);
	assert_int_equal(fiber_pipe_destroy(f.p), 0);

	/* A big ring is backed no further ahead than 256 KiB (and a page on
	 * either side): a megabyte through a 64 MiB ring. */
	atomic_store(&populates, 0);
	atomic_store(&longest, 0);
	f.written = 0;
	assert_int_equal(fiber_pipe_create(&f.p, 64u << 20), 0);
	run_fill(&f);
	assert_in_range(atomic_load(&populates), 4, 6);
	assert_in_range(atomic_load(&longest), 1,
			(256u << 10) + 2 * (size_t)sysconf(_SC_PAGESIZE));
	assert_int_equal(fiber_pipe_destroy(f.p), 0);
	runtime_stop();
}

/* Without the advice the first call fails, and the writes fault the pages
 * in as they always did: one call, nothing lost. */
static void test_pipe_ring_without_the_advice(void **state)
{
	struct fill f = { .bytes = RING, .seed = 9 };

	(void)state;
	runtime_start(1);
	atomic_store(&populates, 0);
	atomic_store(&old_kernel, true);
	assert_int_equal(fiber_pipe_create(&f.p, RING), 0);
	run_fill(&f);
	atomic_store(&old_kernel, false);
	assert_int_equal(atomic_load(&populates), 1);
	assert_int_equal(fiber_pipe_destroy(f.p), 0);
	runtime_stop();
}

/* A writer inside the call, lock released, is not waiting on any list:
 * destroy must still see it (EBUSY), or it would free the pipe that the
 * writer is about to lock again.  After the close it stops with EPIPE. */
static void test_pipe_destroy_waits_for_a_writer_backing_pages(void **state)
{
	struct fill f = { .bytes = RING, .seed = 5 };
	fiber_t w;
	int spins = 0, closed, busy;

	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_pipe_create(&f.p, RING), 0);
	atomic_store(&inside, false);
	atomic_store(&hold, true);
	w = spawn(fill_then_drain, &f);
	while (!atomic_load(&inside) && spins++ < 200000)
		usleep(50);
	closed = fiber_pipe_close_read(f.p);
	busy = fiber_pipe_destroy(f.p);
	atomic_store(&hold, false); /* before any assert can leave */
	assert_true(atomic_load(&inside));
	assert_int_equal(closed, 0);
	assert_int_equal(busy, EBUSY);
	assert_int_equal(fiber_join(w, NULL), 0);
	assert_int_equal(f.write_err, EPIPE);
	assert_true(f.written < f.bytes);
	assert_int_equal(fiber_pipe_destroy(f.p), 0);
	runtime_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_pipe_ring_backed_a_quarter_at_a_time),
		TEST(test_pipe_ring_without_the_advice),
		TEST(test_pipe_destroy_waits_for_a_writer_backing_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
