/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dump.c - what the runtime says about its fibers: the one formatter of
 * "what is this fiber doing" (fb_fiber_describe), shared by the shutdown
 * report (sched/runtime.c), the deadlock report (sched/monitor.c) and
 * fiber_dump(); the dump itself; and backtraces.
 *
 * Backtraces follow the frame-pointer chain.  libfiber is built with frame
 * pointers by default (meson option frame-pointers) and its trampoline
 * ends every fiber's chain with a zero frame pointer (sched/arch/).  The
 * alternative, libunwind's DWARF unwinder started from a context built
 * out of the saved registers, follows code built without frame pointers
 * too, but it reads wherever the unwind tables point, and a parked fiber
 * can be woken and run while it is being dumped: its stack then changes
 * under the unwinder, and a stale value taken for an address makes it read
 * outside the stack.  The walk here reads only inside the fiber's own stack
 * mapping, which stays mapped while its worker's live_lock is held (the
 * reaper leaves the registry before it gives the stack away), so a moving
 * target gives a wrong frame at worst, never a fault; and the same walk is
 * async-signal-safe, which is what the stall report needs to capture a
 * running worker's stack from inside a signal handler (sched/monitor.c).
 * The cost: frames of code built without frame pointers (most of libc,
 * an application built with the compiler's default at -O2) end the chain
 * early or are skipped; README.md says so.
 *
 * Names come from the dynamic symbol table (dladdr), else from the object
 * file's own symbol table (.symtab, which static functions are in and
 * which only a stripped file lacks), else the frame is printed as
 * object+offset, which addr2line or gdb can resolve.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sched/sched.h"

/* A dump reads live fibers as they change, by design: a snapshot that
 * may be a moment stale, never a lock a stuck fiber could hold.  TSan
 * would report each such read. */
#define FB_DUMP_RACY __attribute__((no_sanitize_thread))
/* A backtrace walk reads the stack of a fiber it saw parked, which may
 * be running again by then: frames that ASan guards with redzones. */
#define FB_DUMP_STACK FB_DUMP_RACY __attribute__((no_sanitize_address))

/* ---- what a fiber is doing ---------------------------------------------- */

static const char *fd_direction(uint32_t events)
{
	bool in = events & EPOLLIN, out = events & EPOLLOUT;

	return in && out ? "reading and writing" :
	       in	 ? "reading" :
	       out	 ? "writing" :
			   "events";
}

FB_DUMP_RACY void fb_fiber_describe(const struct fb_fiber *f, uint64_t now,
				    char *buf, size_t len)
{
	const struct fb_waiter *w = fb_load_relaxed(&f->waiter);
	int s = fb_load_relaxed(&f->state), kind;
	const void *obj;
	uintptr_t data;
	uint64_t deadline;
	size_t n;

	if (s == FB_FIBER_NEW || s == FB_FIBER_RUNNABLE) {
		snprintf(buf, len, "runnable");
		return;
	}
	if (s == FB_FIBER_RUNNING) {
		snprintf(buf, len, "running");
		return;
	}
	if (s == FB_FIBER_DEAD || !w) {
		snprintf(buf, len, "exiting");
		return;
	}
	/* The waiter is in the fiber's stack frame: read each field once,
	 * it may be gone by the time the line is written. */
	kind = fb_read_once(&w->kind);
	obj = fb_read_once(&w->obj);
	data = fb_read_once(&w->data);
	deadline = fb_read_once(&w->deadline);
	switch (kind) {
	case FB_WAIT_FD:
		snprintf(buf, len, "waits on fd %d for %s", (int)(intptr_t)obj,
			 fd_direction((uint32_t)data));
		break;
	case FB_WAIT_SLEEP:
		snprintf(buf, len, "sleeps");
		break;
	case FB_WAIT_JOIN: /* data: the joinee's id (api/fiber.c) */
		snprintf(buf, len, "joins fiber %llu",
			 (unsigned long long)data);
		break;
	default:
		snprintf(buf, len, "waits on %s %p", fb_wait_kind_name(kind),
			 obj);
		break;
	}
	if (deadline != FB_NO_DEADLINE && deadline > now) {
		n = strlen(buf);
		snprintf(buf + n, len - n, " (%.3f s left)",
			 (double)(deadline - now) / 1e9);
	}
}

/* ---- backtraces ---------------------------------------------------------- */

FB_DUMP_STACK int fb_bt_walk(uintptr_t pc, uintptr_t fp, uintptr_t lo,
			     uintptr_t hi, uintptr_t *out, int max)
{
	int n = 0;

	if (pc && n < max)
		out[n++] = pc;
	/* A frame record is {caller's fp, return address} at fp, on both
	 * x86-64 and AArch64; the chain goes up the stack. */
	while (n < max && fp >= lo && fp <= hi - 2 * sizeof(uintptr_t) &&
	       !(fp & (sizeof(uintptr_t) - 1))) {
		const uintptr_t *rec = (const uintptr_t *)fp;
		uintptr_t next = rec[0], ret = rec[1];

		if (!ret)
			break;
		out[n++] = ret;
		if (next <= fp)
			break;
		fp = next;
	}
	return n;
}

FB_DUMP_STACK int fb_bt_saved(const void *sp, const void *top, uintptr_t *out,
			      int max)
{
	const uintptr_t *slot = sp;
	uintptr_t lo = (uintptr_t)sp, hi = (uintptr_t)top, ret, fp;

	if (!sp || lo >= hi)
		return 0;
#if defined(__x86_64__)
	/* sched/arch/switch-x86_64.S: MXCSR, r15 ... rbx, rbp, return */
	if (lo + 8 * sizeof(uintptr_t) > hi)
		return 0;
	fp = slot[6];
	ret = slot[7];
#elif defined(__aarch64__)
	/* sched/arch/switch-aarch64.S: x19 ... x28, x29, x30, d8 ... */
	if (lo + 12 * sizeof(uintptr_t) > hi)
		return 0;
	fp = slot[10];
	ret = slot[11];
#endif
	if (!ret)
		return 0;
	out[0] = ret;
	return 1 + fb_bt_walk(0, fp, lo, hi, out + 1, max - 1);
}

/* One mapped object file, kept while its frames are being named. */
struct symfile {
	char path[256];
	const unsigned char *map;
	size_t len;
};

static void symfile_close(struct symfile *sf)
{
	if (sf->map)
		munmap((void *)sf->map, sf->len);
	sf->map = NULL;
	sf->path[0] = '\0';
}

static bool symfile_open(struct symfile *sf, const char *path)
{
	struct stat st;
	int fd;
	void *m;

	if (!strcmp(sf->path, path))
		return sf->map != NULL;
	symfile_close(sf);
	snprintf(sf->path, sizeof(sf->path), "%s", path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return false;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	sf->map = m;
	sf->len = (size_t)st.st_size;
	return true;
}

/* symtab_find - the function of @sf's .symtab that holds @addr (a link
 * time address), as name and offset.  Every table read is bounds-checked:
 * the file is whatever is on disk now. */
static bool symtab_find(const struct symfile *sf, uintptr_t addr,
			const char **name, uintptr_t *off)
{
	const Elf64_Ehdr *eh = (const void *)sf->map;
	const Elf64_Shdr *sh;
	const Elf64_Sym *best = NULL;
	const char *strtab = NULL;

	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > sf->len)
		return false;
	sh = (const void *)(sf->map + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *st = &sh[i], *ss;
		const Elf64_Sym *sym;
		size_t nr;

		if (st->sh_type != SHT_SYMTAB || st->sh_link >= eh->e_shnum ||
		    st->sh_offset + st->sh_size > sf->len)
			continue;
		ss = &sh[st->sh_link];
		if (ss->sh_offset + ss->sh_size > sf->len)
			continue;
		sym = (const void *)(sf->map + st->sh_offset);
		nr = st->sh_size / sizeof(*sym);
		for (size_t k = 0; k < nr; k++) {
			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
			    addr < sym[k].st_value ||
			    addr >= sym[k].st_value +
					    FB_MAX(sym[k].st_size, 1) ||
			    sym[k].st_name >= ss->sh_size)
				continue;
			best = &sym[k];
			strtab = (const char *)sf->map + ss->sh_offset;
			break;
		}
		if (best)
			break;
	}
	if (!best)
		return false;
	*name = strtab + best->st_name;
	*off = addr - best->st_value;
	return true;
}

/* name_frame - "function+0xoff (object)" for code address @a. */
static void name_frame(struct symfile *sf, uintptr_t a, char *buf, size_t len)
{
	Dl_info di;
	const char *obj, *name;
	uintptr_t off, link;

	if (!dladdr((void *)a, &di) || !di.dli_fname) {
		snprintf(buf, len, "?");
		return;
	}
	obj = strrchr(di.dli_fname, '/');
	obj = obj ? obj + 1 : di.dli_fname;
	if (di.dli_sname && di.dli_saddr) {
		snprintf(buf, len, "%s+0x%lx (%s)", di.dli_sname,
			 (unsigned long)(a - (uintptr_t)di.dli_saddr), obj);
		return;
	}
	/* A position-independent object's symbols are relative to where it
	 * was loaded; a fixed executable's are absolute. */
	link = a - (uintptr_t)di.dli_fbase;
	if (symfile_open(sf, *di.dli_fname ? di.dli_fname : "/proc/self/exe")) {
		const Elf64_Ehdr *eh = (const void *)sf->map;

		if (eh->e_type == ET_EXEC)
			link = a;
		if (symtab_find(sf, link, &name, &off)) {
			snprintf(buf, len, "%s+0x%lx (%s)", name,
				 (unsigned long)off, obj);
			return;
		}
	}
	snprintf(buf, len, "%s+0x%lx", obj, (unsigned long)link);
}

int fb_fdprintf(int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len < 0)
		return EINVAL;
	len = FB_MIN(len, (int)sizeof(buf) - 1);
	for (int off = 0; off < len;) {
		ssize_t k = write(fd, buf + off, (size_t)(len - off));

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		off += (int)k;
	}
	return 0;
}

void fb_bt_print(int fd, const char *prefix, const uintptr_t *pc, int n,
		 bool first_is_return)
{
	struct symfile sf = { 0 };
	char name[320];

	for (int i = 0; i < n; i++) {
		/* A return address is the instruction after the call: look
		 * the call up, one byte earlier. */
		uintptr_t a = pc[i] - (i || first_is_return ? 1 : 0);

		name_frame(&sf, a, name, sizeof(name));
		fb_fdprintf(fd, "%s#%d 0x%lx %s\n", prefix, i,
			    (unsigned long)pc[i], name);
	}
	symfile_close(&sf);
}

/* ---- the dump ---------------------------------------------------------- */

#define FB_DUMP_FRAMES 24

/* One fiber as the dump prints it, copied under its worker's live_lock. */
struct rec {
	uint64_t id;
	char name[sizeof(((struct fb_fiber *)0)->name)];
	char what[160];
	int state, worker;
	bool running;
	uint64_t since; /* scheduler clock */
	int nr_pc;
	uintptr_t pc[FB_DUMP_FRAMES];
};

static const char *state_name(int s)
{
	static const char *const n[] = {
		[FB_FIBER_NEW] = "new",
		[FB_FIBER_RUNNABLE] = "runnable",
		[FB_FIBER_RUNNING] = "running",
		[FB_FIBER_PARKING] = "parking",
		[FB_FIBER_PARKED] = "parked",
		[FB_FIBER_DEAD] = "dead",
	};

	return s >= 0 && s <= FB_FIBER_DEAD ? n[s] : "?";
}

/* fill - copy @f into @r.  Context: @f's registry lock held. */
FB_DUMP_RACY static void fill(struct rec *r, const struct fb_fiber *f,
			      uint64_t now)
{
	struct fb_runtime *rt = fb_rt;

	r->id = f->id;
	memcpy(r->name, f->name, sizeof(r->name));
	r->name[sizeof(r->name) - 1] = '\0';
	r->state = fb_load_relaxed(&f->state);
	r->worker = fb_read_once(&f->pf.prev);
	r->running = false;
	for (int i = 0; i < rt->nr_workers; i++)
		if (__atomic_load_n(&rt->workers[i]->curr, __ATOMIC_RELAXED) ==
		    f) {
			r->running = true;
			r->worker = i;
			r->since = fb_load_relaxed(&rt->workers[i]->run_start);
		}
	if (!r->running)
		r->since = fb_read_once(&f->pf.last_ran_ns);
	fb_fiber_describe(f, now, r->what, sizeof(r->what));
	r->nr_pc = 0;
	if (!r->running && r->state == FB_FIBER_PARKED)
		r->nr_pc = fb_bt_saved(fb_read_once(&f->sp),
				       fb_stack_top(&f->stack), r->pc,
				       FB_DUMP_FRAMES);
}

/* collect - copy worker @w's live fibers into *@out (malloc'ed).
 * Returns how many; 0 with *@out NULL when there are none or no memory. */
static size_t collect(struct fb_worker *w, struct rec **out)
{
	uint64_t now = fb_now_ns();
	struct fb_list *n;
	size_t nr = 0, cap = 0;
	struct rec *r;

	*out = NULL;
	fb_spin_lock(&w->live_lock);
	fb_list_for_each (n, &w->live)
		cap++;
	fb_spin_unlock(&w->live_lock);
	if (!cap)
		return 0;
	cap += 16; /* created meanwhile */
	r = malloc(cap * sizeof(*r));
	if (!r)
		return 0;
	fb_spin_lock(&w->live_lock);
	fb_list_for_each (n, &w->live) {
		if (nr == cap)
			break;
		fill(&r[nr++], fb_list_entry(n, struct fb_fiber, live_node),
		     now);
	}
	fb_spin_unlock(&w->live_lock);
	*out = r;
	return nr;
}

static const char *worker_state(const struct fb_worker *w)
{
	unsigned int s = fb_load_relaxed(&w->pw.state) & FB_WS_MASK;

	if (__atomic_load_n(&w->curr, __ATOMIC_RELAXED))
		return "running";
	return s == FB_WS_SLEEPING ? "sleeping" :
	       s == FB_WS_EPOLL	   ? "polling fds (epoll)" :
	       s == FB_WS_POLLING  ? "idle, polling" :
				     "in its idle loop";
}

int fb_sched_dump(int fd, const char *title)
{
	struct fb_runtime *r = fb_rt;
	uint64_t clk = fb_sched_clock();
	char name[4 * sizeof(((struct fb_fiber *)0)->name) + 1];
	long live = fb_load_relaxed(&r->nr_live);

	int rc = fb_fdprintf(fd, "%s: %ld fibers, %d workers\n", title, live,
			     r->nr_workers);

	if (rc)
		return rc;
	for (int i = 0; i < r->nr_workers; i++) {
		struct fb_worker *w = r->workers[i];
		uint64_t next = fb_load_relaxed(&w->timers.next);

		fb_fdprintf(fd, "worker %d (fiber-w%d): %s, %d runnable%s\n", i,
			    i, worker_state(w),
			    fb_load_relaxed(&w->pw.nr_running),
			    next ? ", timers armed" : "");
	}
	for (int i = 0; i < r->nr_workers; i++) {
		struct rec *rec;
		size_t nr = collect(r->workers[i], &rec);

		for (size_t k = 0; k < nr; k++) {
			struct rec *x = &rec[k];
			char for_s[32] = "";

			/* No stamp: a run that a one-worker hand-off began,
			 * which reads no clock (sched/core.c). */
			if (x->since)
				snprintf(for_s, sizeof(for_s), " for %.3f s",
					 clk > x->since ?
						 (double)(clk - x->since) /
							 1e9 :
						 0.0);
			fb_escape(name, sizeof(name), x->name, strlen(x->name));
			fb_fdprintf(fd,
				    "fiber %llu \"%s\": %s on worker %d%s"
				    "%s%s\n",
				    (unsigned long long)x->id, name,
				    x->running ? "running" :
						 state_name(x->state),
				    x->worker, for_s,
				    x->running || x->state != FB_FIBER_PARKED ?
					    "" :
					    ", ",
				    x->running || x->state != FB_FIBER_PARKED ?
					    "" :
					    x->what);
			fb_bt_print(fd, "    ", x->pc, x->nr_pc, true);
		}
		free(rec);
	}
	fb_foreign_wait_dump(fd);
	return 0;
}

/*
 * fiber_dump - write every live fiber of the running runtime to @fd: the
 * workers, then per fiber its id, name, state, what it waits on, for how
 * long, its worker, and for a parked fiber a backtrace from the context
 * it saved; then the threads that wait in libfiber.  Context: any thread.
 * Return: 0; ESRCH if no runtime runs; write(2)'s errno.
 */
int fiber_dump(int fd)
{
	bool worker = fb_worker_self() != NULL;
	struct fb_nopipe np;
	int rc;

	if (!worker && !fb_rt_enter())
		return ESRCH;
	/* A pipe or socket whose reader left gives EPIPE, not SIGPIPE. */
	fb_nopipe_begin(&np);
	rc = fb_sched_dump(fd, "libfiber: fiber dump");
	fb_nopipe_end(&np);
	if (!worker)
		fb_rt_leave();
	return rc;
}

/* ---- the debugger's layout ----------------------------------------------- */

/*
 * What lib/libfiber-gdb.py reads when the library has no debug
 * information (a release build): the offsets of the fields it follows,
 * and the names of the fiber states and wait kinds.  Constants only, no
 * pointer, so it stays in .rodata: a debugger reading a core file takes
 * read-only data from the library file, where a pointer would still be
 * unrelocated.  It is no exported symbol (lib/libfiber.map): the helper
 * finds it by name in the symbol table (.symtab), which only stripping
 * removes; `used` keeps it at any optimisation level.  Integers are
 * little-endian u32.  Version 1; a new field goes at the end, with a new
 * version, and the helper refuses a version it does not know.
 */
#define FB_GDB_MAGIC 0x62646266u /* "fbdb" */
#define FB_GDB_VERSION 1
#define FB_GDB_NAME_LEN 16
#define FB_GDB_NR_STATES 8
#define FB_GDB_NR_KINDS 24

struct fb_gdb_layout {
	uint32_t magic, version, size, ptr_size;
	/* struct fb_runtime; fb_rt points to it */
	uint32_t rt_nr_workers, rt_workers;
	/* struct fb_worker; struct fb_list */
	uint32_t worker_curr, worker_live, list_next;
	/* struct fb_fiber */
	uint32_t fiber_sp, fiber_state, fiber_stack_map, fiber_stack_map_len;
	uint32_t fiber_stack_size, fiber_pf_prev, fiber_self, fiber_id;
	uint32_t fiber_name, fiber_name_len, fiber_live_node, fiber_waiter;
	/* struct fb_waiter */
	uint32_t waiter_kind, waiter_obj, waiter_data, waiter_deadline;
	/* enum fb_fiber_state and enum fb_wait_kind, by value */
	uint32_t nr_states, nr_kinds, name_len;
	char states[FB_GDB_NR_STATES][FB_GDB_NAME_LEN];
	char kinds[FB_GDB_NR_KINDS][FB_GDB_NAME_LEN];
};

#define FB_GDB_KIND(name, str) [FB_WAIT_##name] = str,
#define FB_GDB_KIND_FITS(name, str)                                            \
	_Static_assert(sizeof(str) <= FB_GDB_NAME_LEN, "wait kind name");      \
	_Static_assert(FB_WAIT_##name < FB_GDB_NR_KINDS, "wait kinds");
FB_WAIT_KINDS(FB_GDB_KIND_FITS)
_Static_assert(FB_FIBER_DEAD < FB_GDB_NR_STATES, "fiber states");

__attribute__((used)) static const struct fb_gdb_layout fb_gdb_layout = {
	.magic = FB_GDB_MAGIC,
	.version = FB_GDB_VERSION,
	.size = sizeof(struct fb_gdb_layout),
	.ptr_size = sizeof(void *),
	.rt_nr_workers = offsetof(struct fb_runtime, nr_workers),
	.rt_workers = offsetof(struct fb_runtime, workers),
	.worker_curr = offsetof(struct fb_worker, curr),
	.worker_live = offsetof(struct fb_worker, live),
	.list_next = offsetof(struct fb_list, next),
	.fiber_sp = offsetof(struct fb_fiber, sp),
	.fiber_state = offsetof(struct fb_fiber, state),
	.fiber_stack_map = offsetof(struct fb_fiber, stack.map),
	.fiber_stack_map_len = offsetof(struct fb_fiber, stack.map_len),
	.fiber_stack_size = offsetof(struct fb_fiber, stack.size),
	.fiber_pf_prev = offsetof(struct fb_fiber, pf.prev),
	.fiber_self = offsetof(struct fb_fiber, self),
	.fiber_id = offsetof(struct fb_fiber, id),
	.fiber_name = offsetof(struct fb_fiber, name),
	.fiber_name_len = sizeof(((struct fb_fiber *)0)->name),
	.fiber_live_node = offsetof(struct fb_fiber, live_node),
	.fiber_waiter = offsetof(struct fb_fiber, waiter),
	.waiter_kind = offsetof(struct fb_waiter, kind),
	.waiter_obj = offsetof(struct fb_waiter, obj),
	.waiter_data = offsetof(struct fb_waiter, data),
	.waiter_deadline = offsetof(struct fb_waiter, deadline),
	.nr_states = FB_FIBER_DEAD + 1,
	.nr_kinds = FB_ARRAY_SIZE((const char *[]){
		FB_WAIT_KINDS(FB_GDB_KIND) }),
	.name_len = FB_GDB_NAME_LEN,
	.states = {
		[FB_FIBER_NEW] = "new",
		[FB_FIBER_RUNNABLE] = "runnable",
		[FB_FIBER_RUNNING] = "running",
		[FB_FIBER_PARKING] = "parking",
		[FB_FIBER_PARKED] = "parked",
		[FB_FIBER_DEAD] = "dead",
	},
	.kinds = { FB_WAIT_KINDS(FB_GDB_KIND) },
};
