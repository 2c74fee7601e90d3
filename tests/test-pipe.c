/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-pipe.c - fiber_pipe_t through the public API: a 64 MiB
 * pseudo-random stream in random chunk sizes arrives intact, EOF after the
 * write end closes and the buffer drains, EPIPE once the read end closes
 * (with the count of what got in), EBADF on a closed end, partial reads,
 * the default capacity, a one-byte ping-pong on one worker, and short
 * reads served while the reader waits, and every short copy through the
 * ring, landing exactly where asked.
 *
 * Fibers never call cmocka assertions (a failure would longjmp off their
 * stack); they record results and the test thread asserts them.
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
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

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

static void join(fiber_t f)
{
	assert_int_equal(fiber_join(f, NULL), 0);
}

static fiber_pipe_t *pipe_;

/* ---- the stream ---- */

/* xorshift64 (Marsaglia), fixed seeds: the run is reproducible. */
static uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* A byte stream drawn 8 bytes at a time from xorshift64. */
struct byte_gen {
	uint64_t state;
	uint64_t word;
	unsigned int left;
};

static uint8_t next_byte(struct byte_gen *g)
{
	uint8_t b;

	if (g->left == 0) {
		g->word = xorshift64(&g->state);
		g->left = 8;
	}
	b = (uint8_t)g->word;
	g->word >>= 8;
	g->left--;
	return b;
}

/* FNV-1a, 64 bits: order sensitive. */
#define FNV_INIT 0xcbf29ce484222325ull
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define CHUNK_MAX 65536

struct stream {
	uint64_t total;	  /* bytes to send */
	size_t chunk_max; /* chunks of 1 to chunk_max <= CHUNK_MAX bytes */
	uint64_t sent, received;
	uint64_t sum_sent, sum_received;
	int write_err, read_err, close_err;
};

static void *stream_writer(void *arg)
{
	struct stream *st = arg;
	struct byte_gen g = { .state = 0x2545f4914f6cdd1dull };
	uint64_t sizes = 0x9e3779b97f4a7c15ull;
	uint8_t *buf = malloc(CHUNK_MAX);
	size_t n, done;

	st->sum_sent = FNV_INIT;
	while (buf && st->sent < st->total) {
		n = (size_t)(xorshift64(&sizes) % st->chunk_max) + 1;
		if (n > st->total - st->sent)
			n = (size_t)(st->total - st->sent);
		for (size_t i = 0; i < n; i++)
			buf[i] = next_byte(&g);
		st->write_err = fiber_pipe_write(pipe_, buf, n, &done);
		if (st->write_err || done != n)
			break;
		st->sum_sent = fnv1a(st->sum_sent, buf, n);
		st->sent += n;
	}
	st->close_err = fiber_pipe_close_write(pipe_);
	free(buf);
	return NULL;
}

static void *stream_reader(void *arg)
{
	struct stream *st = arg;
	uint64_t sizes = 0xd1b54a32d192ed03ull;
	uint8_t *buf = malloc(CHUNK_MAX);
	size_t n, done;

	st->sum_received = FNV_INIT;
	while (buf) {
		n = (size_t)(xorshift64(&sizes) % st->chunk_max) + 1;
		st->read_err = fiber_pipe_read(pipe_, buf, n, &done);
		if (st->read_err || done == 0 || done > n)
			break;
		st->sum_received = fnv1a(st->sum_received, buf, done);
		st->received += done;
	}
	free(buf);
	return NULL;
}

static void run_stream_chunks(unsigned int workers, size_t capacity,
			      uint64_t total, size_t chunk_max)
{
	struct stream st = { .total = total, .chunk_max = chunk_max };
	fiber_t r, w;

	runtime_start(workers);
	assert_int_equal(fiber_pipe_create(&pipe_, capacity), 0);
	r = spawn(stream_reader, &st);
	w = spawn(stream_writer, &st);
	join(w);
	join(r);
	assert_int_equal(st.write_err, 0);
	assert_int_equal(st.close_err, 0);
	assert_int_equal(st.read_err, 0);
	assert_int_equal(st.sent, total);
	assert_int_equal(st.received, total);
	assert_int_equal(st.sum_received, st.sum_sent);
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	runtime_stop();
}

static void run_stream(unsigned int workers, size_t capacity, uint64_t total)
{
	run_stream_chunks(workers, capacity, total, CHUNK_MAX);
}

static void test_pipe_64mib_random_chunks_arrive_intact(void **state)
{
	(void)state;
	run_stream(2, 0, 64ull << 20);
}

static void test_pipe_odd_capacity_wraps_correctly(void **state)
{
	(void)state;
	/* A prime capacity makes every wrap-around split land elsewhere. */
	run_stream(1, 4093, 8ull << 20);
	run_stream(3, 1, 256 << 10);
}

/* Writes and reads of 1 to 20 bytes, each size across the short copies'
 * bounds (4, 8, 16), straight into a queued reader and through a ring
 * whose prime capacity splits them at every offset; then of 1 to 140
 * bytes, across the bounds of the copies by 16-byte blocks (32, 64,
 * 128), through a prime ring of 257. */
static void test_pipe_short_chunks_arrive_intact(void **state)
{
	(void)state;
	run_stream_chunks(1, 0, 1 << 20, 20);
	run_stream_chunks(1, 31, 1 << 20, 20);
	run_stream_chunks(2, 31, 256 << 10, 20);
	run_stream_chunks(1, 0, 4 << 20, 140);
	run_stream_chunks(1, 257, 4 << 20, 140);
	run_stream_chunks(2, 257, 1 << 20, 140);
}

/* ---- EOF, partial reads, errors ---- */

static void test_pipe_partial_reads_then_eof(void **state)
{
	char buf[100];
	size_t done = 99;

	(void)state;
	assert_int_equal(fiber_pipe_create(&pipe_, 16), 0);
	assert_int_equal(fiber_pipe_write(pipe_, "0123456789", 10, &done), 0);
	assert_int_equal(done, 10);
	assert_int_equal(fiber_pipe_read(pipe_, buf, 4, &done), 0);
	assert_int_equal(done, 4);
	assert_memory_equal(buf, "0123", 4);
	assert_int_equal(fiber_pipe_read(pipe_, buf, 0, &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(fiber_pipe_read(pipe_, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 6);
	assert_memory_equal(buf, "456789", 6);

	assert_int_equal(fiber_pipe_write(pipe_, "hello", 5, &done), 0);
	assert_int_equal(fiber_pipe_close_write(pipe_), 0);
	assert_int_equal(fiber_pipe_read(pipe_, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 5);
	assert_memory_equal(buf, "hello", 5);
	for (int i = 0; i < 2; i++) {
		done = 99;
		assert_int_equal(
			fiber_pipe_read(pipe_, buf, sizeof(buf), &done), 0);
		assert_int_equal(done, 0);
	}
	assert_int_equal(fiber_pipe_write(pipe_, "x", 1, &done), EBADF);
	assert_int_equal(fiber_pipe_close_write(pipe_), EBADF);
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	assert_int_equal(fiber_pipe_read(pipe_, buf, 1, &done), EBADF);
	assert_int_equal(fiber_pipe_close_read(pipe_), EBADF);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
}

static void test_pipe_write_after_close_read_is_epipe(void **state)
{
	size_t done = 99;

	(void)state;
	assert_int_equal(fiber_pipe_create(&pipe_, 0), 0);
	assert_int_equal(fiber_pipe_write(pipe_, "abc", 3, &done), 0);
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	assert_int_equal(fiber_pipe_write(pipe_, "abc", 3, &done), EPIPE);
	assert_int_equal(done, 0);
	assert_int_equal(fiber_pipe_close_write(pipe_), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
}

static void test_pipe_rejects_bad_arguments(void **state)
{
	fiber_pipe_t *p = NULL;
	size_t done;
	char c;

	(void)state;
	assert_int_equal(fiber_pipe_create(NULL, 0), EINVAL);
	assert_int_equal(fiber_pipe_create(&p, SIZE_MAX), EINVAL);
	assert_null(p);
	assert_int_equal(fiber_pipe_create(&p, 0), 0);
	assert_int_equal(fiber_pipe_read(p, NULL, 1, &done), EINVAL);
	assert_int_equal(fiber_pipe_read(p, &c, 1, NULL), EINVAL);
	assert_int_equal(fiber_pipe_write(NULL, &c, 1, &done), EINVAL);
	assert_int_equal(fiber_pipe_destroy(NULL), EINVAL);
	assert_int_equal(fiber_pipe_close_read(NULL), EINVAL);
	assert_int_equal(fiber_pipe_destroy(p), 0);
}

static void test_pipe_default_capacity_is_64k(void **state)
{
	uint8_t *buf = calloc(1, 64 * 1024);
	size_t done = 0;

	(void)state;
	assert_non_null(buf);
	assert_int_equal(fiber_pipe_create(&pipe_, 0), 0);
	/* Fits without a reader: this would block with a smaller ring. */
	assert_int_equal(fiber_pipe_write(pipe_, buf, 64 * 1024, &done), 0);
	assert_int_equal(done, 64 * 1024);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	free(buf);
}

/* ---- blocked ends ---- */

struct result {
	int err;
	size_t done;
	atomic_int started;
};

static void *write_100(void *arg)
{
	struct result *r = arg;
	uint8_t buf[100];

	for (int i = 0; i < 100; i++)
		buf[i] = (uint8_t)i;
	atomic_store(&r->started, 1);
	r->err = fiber_pipe_write(pipe_, buf, sizeof(buf), &r->done);
	return NULL;
}

static void test_pipe_blocked_writer_gets_epipe_with_count(void **state)
{
	struct result r = { .err = -1 };
	uint8_t buf[10];
	size_t done = 0;
	fiber_t f;

	(void)state;
	runtime_start(2);
	assert_int_equal(fiber_pipe_create(&pipe_, 16), 0);
	f = spawn(write_100, &r);
	assert_int_equal(fiber_pipe_read(pipe_, buf, sizeof(buf), &done), 0);
	assert_true(done >= 1 && done <= 10);
	for (size_t i = 0; i < done; i++)
		assert_int_equal(buf[i], i);
	/* The writer cannot finish: 100 bytes never fit in 16 + 10. */
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	join(f);
	assert_int_equal(r.err, EPIPE);
	/* At least what the reader got (the writer may have served it and
	 * then let the lock go, to back the ring's page, before filling
	 * it), at most that and a full ring. */
	assert_true(r.done >= done && r.done <= 16 + done);
	assert_int_equal(fiber_pipe_close_write(pipe_), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	runtime_stop();
}

static void *read_some(void *arg)
{
	struct result *r = arg;
	char buf[8];

	atomic_store(&r->started, 1);
	r->done = 99;
	r->err = fiber_pipe_read(pipe_, buf, sizeof(buf), &r->done);
	return NULL;
}

static void test_pipe_blocked_reader_gets_eof(void **state)
{
	struct result r = { .err = -1 };
	fiber_t f;

	(void)state;
	runtime_start(2);
	assert_int_equal(fiber_pipe_create(&pipe_, 0), 0);
	f = spawn(read_some, &r);
	while (!atomic_load(&r.started))
		usleep(1000);
	usleep(10000); /* likely parked by now; the outcome holds either way */
	assert_int_equal(fiber_pipe_close_write(pipe_), 0);
	join(f);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.done, 0);
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	runtime_stop();
}

/* ---- ping-pong ---- */

#define PINGPONG_ROUNDS 20000

static fiber_pipe_t *pp[2];
static atomic_int pp_errors;
static uint8_t pp_last;

/* Move one byte through @p, counting any error. */
static void put_byte(fiber_pipe_t *p, uint8_t b)
{
	size_t done = 0;

	if (fiber_pipe_write(p, &b, 1, &done) != 0 || done != 1)
		atomic_fetch_add(&pp_errors, 1);
}

static uint8_t get_byte(fiber_pipe_t *p)
{
	size_t done = 0;
	uint8_t b = 0;

	if (fiber_pipe_read(p, &b, 1, &done) != 0 || done != 1)
		atomic_fetch_add(&pp_errors, 1);
	return b;
}

/* Side 0 serves a byte on pp[1]; side 1 returns it plus one on pp[0];
 * side 0 adds one more and serves again. */
static void *pingpong(void *arg)
{
	int side = (int)(uintptr_t)arg;
	uint8_t b = 0, sent;

	for (int i = 0; i < PINGPONG_ROUNDS; i++) {
		if (side == 0) {
			sent = b;
			put_byte(pp[1], b);
			b = get_byte(pp[0]);
			if (b != (uint8_t)(sent + 1))
				atomic_fetch_add(&pp_errors, 1);
			b++;
		} else {
			put_byte(pp[0], get_byte(pp[1]) + 1);
		}
	}
	if (side == 0)
		pp_last = b;
	return NULL;
}

static void test_pipe_pingpong_one_byte_on_one_worker(void **state)
{
	fiber_t a, b;

	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_pipe_create(&pp[0], 0), 0);
	assert_int_equal(fiber_pipe_create(&pp[1], 0), 0);
	a = spawn(pingpong, (void *)(uintptr_t)0);
	b = spawn(pingpong, (void *)(uintptr_t)1);
	join(a);
	join(b);
	assert_int_equal(atomic_load(&pp_errors), 0);
	/* Two increments per round, starting from 0. */
	assert_int_equal(pp_last, (uint8_t)(2 * PINGPONG_ROUNDS));
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_destroy(pp[i]), 0);
	runtime_stop();
}

/* ---- short reads served while the reader waits ---- */

/* One read of @len bytes into the middle of a guarded buffer, made while
 * the ring is empty, so that it queues and the writer serves it; then
 * @wlen bytes (@wlen <= @len) written at once. */
struct waited_read {
	size_t len, wlen;
	atomic_int queued;
	int err;
	size_t done;
	uint8_t buf[64];
};

#define GUARD 0xee
#define AT 16 /* where the read lands in buf */

static void *waited_reader(void *arg)
{
	struct waited_read *t = arg;

	atomic_store(&t->queued, 1);
	t->err = fiber_pipe_read(pipe_, t->buf + AT, t->len, &t->done);
	return NULL;
}

static void *waited_writer(void *arg)
{
	struct waited_read *t = arg;
	uint8_t msg[64];
	size_t done = 0;

	/* One worker: the reader set the flag, then parked in its read. */
	while (!atomic_load(&t->queued))
		fiber_yield();
	for (size_t i = 0; i < t->wlen; i++)
		msg[i] = (uint8_t)(0x40 + i);
	if (fiber_pipe_write(pipe_, msg, t->wlen, &done) || done != t->wlen)
		t->err = -2;
	return NULL;
}

/* Every length around the size a waiting reader gets inline (16): the
 * bytes land where the caller asked, only there, and only as many as were
 * written, whether the writer filled the request or not. */
static void test_pipe_waiting_short_reads_land_exactly(void **state)
{
	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_pipe_create(&pipe_, 0), 0);
	for (size_t len = 1; len <= 20; len++) {
		for (size_t wlen = len; wlen + 2 >= len && wlen; wlen--) {
			struct waited_read t = { .len = len, .wlen = wlen };
			long long parks = fiber_stats_counter("parks");
			fiber_t r, w;

			memset(t.buf, GUARD, sizeof(t.buf));
			r = spawn(waited_reader, &t);
			w = spawn(waited_writer, &t);
			join(r);
			join(w);
			assert_int_equal(t.err, 0);
			assert_int_equal(t.done, wlen);
			assert_true(fiber_stats_counter("parks") > parks);
			for (size_t i = 0; i < sizeof(t.buf); i++) {
				uint8_t want = GUARD;

				if (i >= AT && i < AT + wlen)
					want = (uint8_t)(0x40 + i - AT);
				assert_int_equal(t.buf[i], want);
			}
		}
	}
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	runtime_stop();
}

/* through_ring - write a message of @len (at most 160) bytes into
 * pipe_, whose ring has room for it, and read it back asking for @ask
 * (@len to 200) into a guarded buffer: it comes back whole, and nothing
 * outside it is written.  The message's bytes go on from *@seq. */
static void through_ring(size_t len, size_t ask, unsigned int *seq)
{
	uint8_t msg[160], buf[16 + 200 + 16];
	size_t done;

	for (size_t i = 0; i < len; i++)
		msg[i] = (uint8_t)(++*seq * 7 + 1);
	assert_int_equal(fiber_pipe_write(pipe_, msg, len, &done), 0);
	assert_int_equal(done, len);
	memset(buf, GUARD, sizeof(buf));
	assert_int_equal(fiber_pipe_read(pipe_, buf + 16, ask, &done), 0);
	assert_int_equal(done, len);
	assert_memory_equal(buf + 16, msg, len);
	for (size_t i = 0; i < sizeof(buf); i++)
		if (i < 16 || i >= 16 + len)
			assert_int_equal(buf[i], GUARD);
}

/* Every length from 1 to 160 through the ring, at every offset of a
 * prime ring of 257 (so writes and reads wrap at each split), read back
 * into a guarded buffer: the bytes come back in order, land where the
 * caller asked and nowhere else, on both sides of the copies' bounds
 * (4, 8, 16, 32, 64, 128).  Nothing waits, so the main thread calls the
 * pipe directly; a read asks for more than is there, so a copy that
 * overruns its count would show in the guard. */
static void test_pipe_ring_copies_land_exactly(void **state)
{
	unsigned int seq = 0;

	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_pipe_create(&pipe_, 257), 0);
	for (size_t len = 1; len <= 160; len++)
		through_ring(len, 200, &seq);
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	runtime_stop();
}

/* Copies that end exactly at the ring's end, from the writer's side and
 * from the reader's, copies that start at its start again, and copies
 * that wrap by one byte: messages of 1 to 128 bytes through a ring of
 * 256, each written and read back in turn, whose running sums land on
 * 256 six times, then on 300 (a wrap of 44) and twice on a wrap of one
 * byte.  Each message comes back whole and in order, and nothing past
 * what a read took is written. */
static void test_pipe_copies_meet_the_ring_end(void **state)
{
	static const size_t lens[] = {
		128, 100, 28,  100, 100, 56,  1,  127, 128,
		16,  112, 128, 17,  111, 128, 64, 64,  128,
		100, 100, 100, 111, 100, 2,   1,  127, 128,
	};
	unsigned int seq = 0;

	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_pipe_create(&pipe_, 256), 0);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		through_ring(lens[k], lens[k], &seq);
	assert_int_equal(fiber_pipe_close_read(pipe_), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	runtime_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_pipe_rejects_bad_arguments),
		TEST(test_pipe_partial_reads_then_eof),
		TEST(test_pipe_write_after_close_read_is_epipe),
		TEST(test_pipe_default_capacity_is_64k),
		TEST(test_pipe_blocked_writer_gets_epipe_with_count),
		TEST(test_pipe_blocked_reader_gets_eof),
		TEST(test_pipe_pingpong_one_byte_on_one_worker),
		TEST(test_pipe_waiting_short_reads_land_exactly),
		TEST(test_pipe_odd_capacity_wraps_correctly),
		TEST(test_pipe_short_chunks_arrive_intact),
		TEST(test_pipe_ring_copies_land_exactly),
		TEST(test_pipe_copies_meet_the_ring_end),
		TEST(test_pipe_64mib_random_chunks_arrive_intact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
