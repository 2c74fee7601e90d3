/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * guard.c - stack overflow reports.  A fiber that runs off the end of
 * its stack touches the PROT_NONE guard region below it (sched/stack.c) and gets
 * a SIGSEGV.  Without help that is an anonymous crash, or worse, a handler
 * that cannot run because the stack it would run on is the one that is
 * full.  So each worker thread gets an alternate signal stack, and one
 * process-wide SIGSEGV handler asks: is the faulting address inside the
 * guard region of the fiber this worker is running?  If so it names the
 * fiber and aborts (a stack without a guard, LIBFIBER_STACK_GUARD=0, is
 * checked by its canary at switch-out and reported the same way); a
 * fault anywhere else goes to the handler that was
 * installed before ours (or to the default action), untouched.
 *
 * The handler uses only async-signal-safe things: a TLS read
 * (fb_worker_self), plain loads of the current fiber's descriptor, which
 * the interrupted code owns and cannot be changing while it faults, and
 * write(2) on a message formatted by hand.  The name is the application's
 * bytes: it is escaped, so that the report stays one line that names the
 * fiber unambiguously.  The handler cannot tell an overflow whose first
 * touch skipped the whole guard region (a frame larger than
 * FB_STACK_GUARD, in code built without -fstack-clash-protection) from a
 * wild pointer; such a fault passes through like any other.
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sched/sched.h"
#include "sched/stack.h"

/* Alternate signal stack per worker: 64 KiB (picked: our handler needs a
 * few hundred bytes, a chained handler such as a sanitizer's a few KiB;
 * SIGSTKSZ is 8 KiB on x86-64 and too small for the latter). */
#define FB_SIGSTACK_SIZE (64 * 1024)

static struct sigaction old_segv; /* written once under the runtime mutex */
static bool installed;

/* Append @s to @buf at *@n, bounded by @len. */
static void put_str(char *buf, size_t len, size_t *n, const char *s)
{
	while (*s && *n < len)
		buf[(*n)++] = *s++;
}

/* Append @v in base @base (10 or 16). */
static void put_num(char *buf, size_t len, size_t *n, uint64_t v,
		    unsigned int base)
{
	char tmp[24];
	int i = 0;

	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (i > 0 && *n < len)
		buf[(*n)++] = tmp[--i];
}

/* The stack size in the LIBFIBER_STACK_SIZE syntax: 64K, 1M or bytes. */
static void put_size(char *buf, size_t len, size_t *n, size_t size)
{
	if (size % (1024 * 1024) == 0) {
		put_num(buf, len, n, size / (1024 * 1024), 10);
		put_str(buf, len, n, "M");
	} else if (size % 1024 == 0) {
		put_num(buf, len, n, size / 1024, 10);
		put_str(buf, len, n, "K");
	} else {
		put_num(buf, len, n, size, 10);
	}
}

/* The report line; at most 16 + 20 + 2 + 32 * 4 + 17 + 21 + 20 + 16 + 74 =
 * 314 bytes (prefix, id, quote, escaped name, "overflowed its", size,
 * "stack (canary at 0x", address, what to do), so @buf never truncates it.
 * @canary: found by the canary check, not the guard. */
static void report(const struct fb_fiber *f, const void *addr, bool canary)
{
	char buf[384];
	size_t n = 0, len = sizeof(buf);
	ssize_t rc;

	put_str(buf, len, &n, "libfiber: fiber ");
	put_num(buf, len, &n, f->id, 10);
	put_str(buf, len, &n, " \"");
	n += fb_escape(buf + n, len - n, f->name,
		       strnlen(f->name, sizeof(f->name)));
	put_str(buf, len, &n, "\" overflowed its ");
	put_size(buf, len, &n, f->stack.slot);
	put_str(buf, len, &n,
		canary ? " stack (canary at 0x" : " stack (fault at 0x");
	put_num(buf, len, &n, (uintptr_t)addr, 16);
	put_str(buf, len, &n,
		"); give it a larger stack "
		"(fiber_attr_setstacksize, LIBFIBER_STACK_SIZE)\n");
	rc = write(STDERR_FILENO, buf, n);
	(void)rc;
}

/* Hand a fault that is not ours to whoever had SIGSEGV before. */
static void pass_on(int sig, siginfo_t *si, void *uc)
{
	if (old_segv.sa_flags & SA_SIGINFO) {
		old_segv.sa_sigaction(sig, si, uc);
		return;
	}
	if (old_segv.sa_handler != SIG_DFL && old_segv.sa_handler != SIG_IGN) {
		old_segv.sa_handler(sig);
		return;
	}
	/* Default action: reset and return, so that the faulting instruction
	 * runs again and the kernel kills us with the real signal. */
	signal(sig, SIG_DFL);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	struct fb_worker *w = fb_worker_self();
	struct fb_fiber *f = w ? w->curr : NULL;

	if (f && si->si_code > 0 &&
	    fb_stack_guard_contains(&f->stack, si->si_addr)) {
		report(f, si->si_addr, false);
		abort();
	}
	pass_on(sig, si, uc);
}

void fb_guard_canary_report(const struct fb_fiber *f)
{
	report(f, f->stack.canary, true);
	abort();
}

/*
 * fb_guard_install - install the SIGSEGV handler, once per process.
 * Context: fiber_init, under the runtime mutex.
 */
void fb_guard_install(void)
{
	struct sigaction sa;

	if (installed)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv) == 0)
		installed = true;
}

/*
 * fb_guard_worker_start - give the calling worker thread its alternate
 * signal stack, unless it has one already (the sanitizers give every
 * thread one; theirs is kept).  Without one (no memory) an overflow still
 * kills the process, with a plain SIGSEGV instead of the report.
 * Context: worker @w's thread, at its start.
 */
void fb_guard_worker_start(struct fb_worker *w)
{
	stack_t ss;
	void *p;

	if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE))
		return;
	p = mmap(NULL, FB_SIGSTACK_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return;
	ss.ss_sp = p;
	ss.ss_size = FB_SIGSTACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL)) {
		munmap(p, FB_SIGSTACK_SIZE);
		return;
	}
	w->sigstack = p;
}

/* fb_guard_worker_stop - undo fb_guard_worker_start.  Context: worker @w's
 * thread, as it exits. */
void fb_guard_worker_stop(struct fb_worker *w)
{
	stack_t ss = { .ss_flags = SS_DISABLE };

	if (!w->sigstack)
		return;
	sigaltstack(&ss, NULL);
	munmap(w->sigstack, FB_SIGSTACK_SIZE);
	w->sigstack = NULL;
}
