/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/config.h - the LIBFIBER_* variables, declared once.  (Not the build's
 * api/config.h: that one is generated in the build directory and included
 * with -include by path; this one is a table.)
 *
 * No include guard: expand it on purpose with
 *
 *   FB_CONFIG(NAME, KIND, MIN, MAX, WORDS, DEFAULT, FIELD, OVERRIDE,
 *             DOC, DEFAULT_DOC)
 *
 * defined.  api/env.c expands it into the loader, the fiber_config mapping
 * and fb_env_describe(); test-env.c checks README.md's Configuration table
 * against it.  The columns:
 *
 *   NAME         the variable is LIBFIBER_NAME.
 *   KIND         INT (decimal digits, MIN to MAX), SIZE (digits with an
 *                optional K, M or G suffix, MIN to MAX bytes), BOOL (0 or
 *                1; the field holds -1 while nothing sets it), TEXT (a
 *                string, copied; "" means none), FEATURES (the
 *                scheduler-feature syntax, applied to the features'
 *                defaults) or ENUM (one of WORDS).
 *   MIN, MAX     INT and SIZE: the accepted range; 0 otherwise.
 *   WORDS        ENUM: the accepted words, separated by spaces, in the
 *                order of the field's enum; NULL otherwise.
 *   DEFAULT      the value taken when nothing sets one, spelled as the
 *                variable would be; NULL: none (the field keeps 0, NULL or,
 *                for BOOL, -1, and the runtime decides at start).
 *   FIELD        the member of struct fb_env the value goes to.
 *   OVERRIDE     the struct fiber_config field that wins over the
 *                variable: FB_CFG(field) (0 or NULL leaves the variable in
 *                charge), FB_CFG_SET(field, flag) (read only when the flag
 *                is non-zero; -1 leaves the variable in charge) or
 *                FB_CFG_NONE.  A string field is parsed as the variable;
 *                a number is checked against the range.  An expander that
 *                uses this column defines the three macros.
 *   DOC          README.md's "meaning" cell, verbatim (Markdown).
 *   DEFAULT_DOC  README.md's "default" cell, verbatim; it begins with the
 *                DEFAULT in backquotes when DEFAULT is not empty.
 *
 * Adding a variable is one line here, its README row, and a parser in
 * api/env.c if it has a new KIND.  Tables read it in this order (README's).
 */
#ifndef FB_CONFIG
#error "define FB_CONFIG(name, kind, ...) before including api/config.h"
#endif

/* Unset: one worker per PU; fb_env_topo_open() refuses a topology of more
 * than FIBER_WORKERS_MAX PUs then.  The runtime's limit, the width of a
 * fiber_workerset_t; the layers below take up to FB_MAX_WORKERS (the
 * simulator's). */
FB_CONFIG(WORKERS, INT, 1, FIBER_WORKERS_MAX, NULL, NULL, workers,
	  FB_CFG(workers), "number of workers, 1 to 1024",
	  "one per PU the process may use (its affinity, which its cpuset "
	  "narrows), at most the cgroup v2 `cpu.max` quota / period rounded "
	  "up (at least 2); a topology of more than 1024 PUs needs this "
	  "variable or `fiber_config.workers`")
/* Unset or "": the machine.  api/env.c also records which name gave it
 * (fb_env.topology_name), for fb_topo_open_named()'s messages. */
FB_CONFIG(TOPOLOGY, TEXT, 0, 0, NULL, NULL, topology, FB_CFG(topology),
	  "hwloc synthetic description (`\"pack:2 numa:1 l3:2 core:4 pu:2\"`; "
	  "at most 16384 PUs and 4096 objects per level, which hwloc loads "
	  "in seconds) "
	  "or the path of an hwloc XML file",
	  "the machine")
/* Unset: -1, which the runtime turns into adaptive pinning. */
FB_CONFIG(BIND, BOOL, 0, 0, NULL, NULL, bind, FB_CFG_SET(bind, bind_set),
	  "`1` pin workers (round robin over the real PUs on a synthetic "
	  "topology), `0` do not",
	  "pinned, and a worker whose CPU another process shares (in the "
	  "last 100 ms, 10 or more preemptions, or 3 or more that kept it "
	  "waiting 10 ms or more on the kernel's run queue) is unpinned "
	  "until its CPU has been quiet for 1 s (twice as long after each "
	  "later unpin, at most 64 s)")
FB_CONFIG(SCHED_FEATURES, FEATURES, 0, 0, NULL, "", features,
	  FB_CFG(sched_features),
	  "scheduler features: `NAME` on, `NO_NAME` off, separated by spaces "
	  "or commas",
	  "each feature's default")
/* 256 KiB of address space, reserved lazily (MAP_NORESERVE); only touched
 * pages cost memory.  Picked so that glibc's stdio and a few KiB of locals
 * fit many times over.  FB_STACK_DEFAULT (api/env.h) is the same number. */
FB_CONFIG(STACK_SIZE, SIZE, FIBER_STACK_MIN, FB_STACK_MAX, NULL, "256K",
	  stack_size, FB_CFG(stack_size),
	  "default fiber stack, 16K to 1G: digits with an optional `K`, `M` or "
	  "`G` suffix (no `B`)",
	  "`256K` (address space; only touched pages cost memory)")
/* Unset: -1, guarded.  0 carves stacks from slabs with a canary
 * (sched/stack.c), for more fibers than vm.max_map_count / 2. */
FB_CONFIG(STACK_GUARD, BOOL, 0, 0, NULL, NULL, stack_guard, FB_CFG_NONE,
	  "`1` a PROT_NONE guard region below each fiber stack (two kernel "
	  "mappings per stack, so at most about vm.max_map_count / 2 live "
	  "fibers); `0` stacks carved many to a mapping, an overflow caught "
	  "by a canary checked at every switch-out (it misses a frame that "
	  "skips the canary word)",
	  "`1`")
/* 50 us.  Picked: a round trip through a polling worker costs < 1 us, a
 * futex wake of a sleeping one 30-100 us on this class of guest; 50 us
 * covers back-to-back request gaps of a busy server and costs at most
 * 50 us of CPU per idle entry. */
FB_CONFIG(IDLE_POLL_US, INT, 0, 1000000, NULL, "50", idle_poll_us,
	  FB_CFG_SET(idle_poll_us, idle_poll_set),
	  "how long an idle worker polls before it sleeps on a futex, 0 to "
	  "1000000; a fifth of it while the worker's CPU is shared, none "
	  "while it is crowded (`LIBFIBER_BIND` unset, see below); it also "
	  "bounds the park spin (`PARK_SPIN`, at most 5 us of it), and 0 "
	  "turns both off",
	  "`50`")
/* Words in the order of enum fb_stats_mode. */
FB_CONFIG(STATS, ENUM, 0, 0, "0 1 json", "0", stats, FB_CFG(stats),
	  "`1` print a statistics table at shutdown, or at exit without "
	  "`fiber_shutdown()`, `json` one JSON object, `0` nothing",
	  "`0`")
FB_CONFIG(BLOCKED_LOAD_INTERVAL_MS, INT, 1, 1000, NULL, "1",
	  blocked_load_interval_ms, FB_CFG_NONE,
	  "experiment knob: a sleeping worker's blocked load is refreshed at "
	  "most once per this many ms (Joel Fernandes' proposal was 50; "
	  "`doc/scheduler.md` 6.2.8), 1 to 1000",
	  "`1`")
/* Words in the order of enum fb_clock_kind.  tsc and anchored parse
 * everywhere, and api/env.c refuses tsc where the kernel does not keep time
 * with the TSC, anchored where the CPU's TSC is not invariant. */
FB_CONFIG(CLOCK, ENUM, 0, 0, "auto tsc monotonic anchored", "auto", clock,
	  FB_CFG_NONE,
	  "the scheduler's clock for load tracking and balancing, read at "
	  "every context switch: `tsc` (rdtsc scaled to ns, calibrated once "
	  "per process; refused where the kernel's clocksource is not the "
	  "TSC), `anchored` (the same from an anchor on `CLOCK_MONOTONIC` "
	  "that each thread renews every millisecond; refused where the CPU "
	  "does not say its TSC is invariant), `monotonic` (`clock_gettime` "
	  "through the vDSO), `auto` (`tsc` where the kernel trusts the TSC, "
	  "else `anchored` where the CPU does, else `monotonic`)",
	  "`auto`")
/* FB_OFFLOAD_THREADS_DEFAULT (api/offload.h) is the same number. */
FB_CONFIG(OFFLOAD_THREADS, INT, 1, 1024, NULL, "64", offload_threads,
	  FB_CFG_NONE,
	  "most helper threads `fiber_offload` and `fiber_getaddrinfo` run "
	  "blocking calls on, created on demand, gone after 10 s idle, 1 to "
	  "1024",
	  "`64`")
/* 100 ms.  Picked: a request handler that holds its worker that long
 * delays every other connection on it by as much, worth a line; far above
 * the scheduling latency of a loaded host.  The monitor wakes every
 * min(STALL_MS / 2, 10 ms) while a worker is awake (sched/monitor.c). */
FB_CONFIG(STALL_MS, INT, 0, 60000, NULL, "100", stall_ms, FB_CFG_NONE,
	  "report a fiber that runs this many ms without a scheduling point "
	  "(fiber, worker, backtrace; counter `stalls`), and meanwhile let "
	  "other workers take the stalled worker's queue and timers, 0 to "
	  "60000; `0` off",
	  "`100`")
/* Words in the order of FB_DEADLOCK_* (sched/sched.h). */
FB_CONFIG(DEADLOCK, ENUM, 0, 0, "off warn abort", "warn", deadlock, FB_CFG_NONE,
	  "when every fiber is blocked with no timer and no fd, and a thread "
	  "waits in libfiber: `warn` print `libfiber: all fibers are blocked` "
	  "and a fiber dump, `abort` then abort, `off` nothing",
	  "`warn`")
/* Words in the order of enum fb_dump_signal (api/env.h). */
FB_CONFIG(DUMP_SIGNAL, ENUM, 0, 0, "off QUIT USR1 USR2", "off", dump_signal,
	  FB_CFG_NONE,
	  "a signal that prints a fiber dump (`fiber_dump()`) to stderr: "
	  "`QUIT`, `USR1` or `USR2` (libfiber takes it over until "
	  "`fiber_shutdown()`, then puts the previous action back); `off` none",
	  "`off`")
FB_CONFIG(STATS_FILE, TEXT, 0, 0, NULL, NULL, stats_file, FB_CFG_NONE,
	  "write the `LIBFIBER_STATS` output and the interval lines to this "
	  "file (truncated when the runtime starts) instead of stderr",
	  "stderr")
FB_CONFIG(STATS_INTERVAL_MS, INT, 0, 3600000, NULL, "0", stats_interval_ms,
	  FB_CFG_NONE,
	  "also write one line of statistics every this many ms while the "
	  "runtime runs (one JSON object with `LIBFIBER_STATS=json`), 0 to "
	  "3600000; `0` none",
	  "`0`")
FB_CONFIG(TRACE, TEXT, 0, 0, NULL, NULL, trace, FB_CFG_NONE,
	  "write a Chrome/Perfetto trace (JSON) of fiber run intervals per "
	  "worker and wakeup arrows to this file (opened, and truncated, when "
	  "the runtime starts) at shutdown or exit; for short runs: 65536 "
	  "events (2.5 MiB) per worker, then dropped",
	  "none")
