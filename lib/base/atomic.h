/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/atomic.h - the one place that includes <stdatomic.h>.
 *
 * Short names for the orderings libfiber uses.  Every shared word says next
 * to its declaration which of these protect it.
 */
#ifndef FB_ATOMIC_H
#define FB_ATOMIC_H

#include <stdatomic.h>
#include <stdbool.h>

#define fb_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define fb_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define fb_load_seqcst(p) atomic_load_explicit((p), memory_order_seq_cst)
#define fb_store_relaxed(p, v)                                                 \
	atomic_store_explicit((p), (v), memory_order_relaxed)
#define fb_store_release(p, v)                                                 \
	atomic_store_explicit((p), (v), memory_order_release)
#define fb_store_seqcst(p, v)                                                  \
	atomic_store_explicit((p), (v), memory_order_seq_cst)
#define fb_xchg(p, v) atomic_exchange_explicit((p), (v), memory_order_acq_rel)
#define fb_xchg_seqcst(p, v)                                                   \
	atomic_exchange_explicit((p), (v), memory_order_seq_cst)
#define fb_add(p, v) atomic_fetch_add_explicit((p), (v), memory_order_acq_rel)
#define fb_add_relaxed(p, v)                                                   \
	atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define fb_sub(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define fb_or(p, v) atomic_fetch_or_explicit((p), (v), memory_order_seq_cst)
#define fb_and(p, v) atomic_fetch_and_explicit((p), (v), memory_order_seq_cst)
/* Strong compare-and-swap, acq_rel on success; *expected updated on failure. */
#define fb_cas(p, expected, desired)                                           \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),    \
						memory_order_acq_rel,          \
						memory_order_acquire)
#define fb_cas_seqcst(p, expected, desired)                                    \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),    \
						memory_order_seq_cst,          \
						memory_order_seq_cst)
#define fb_fence() atomic_thread_fence(memory_order_seq_cst)

/*
 * Relaxed accesses to plain (not _Atomic) words that other threads read or
 * write without a lock, as hints: the balancing snapshot (place/place.h, topo/topo.h).
 * The kernel's READ_ONCE/WRITE_ONCE: a plain move on x86-64 and AArch64,
 * but no data race in the C11 sense, so the compiler may not tear, fuse or
 * invent the access and ThreadSanitizer does not report it.  A
 * read-modify-write made of the two is not atomic: an update racing with
 * another may be lost, which the fields that use them tolerate.  Accesses
 * by the word's only writer, or under the lock every writer holds, may
 * stay plain.
 */
#define fb_read_once(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define fb_write_once(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline void fb_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif /* FB_ATOMIC_H */
