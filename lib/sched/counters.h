/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched/counters.h - the statistics counters, declared once.  Expand with
 * FB_COUNTER(name, description) defined.  Names are stable: they are the
 * keys of LIBFIBER_STATS=json and the argument of fiber_stats_counter().
 * Counted per worker by the worker that acts (the waker for wakeups), in
 * plain owner-written words; actions of foreign threads go to a shared,
 * atomically updated row.
 */
#ifndef FB_COUNTER
#error "define FB_COUNTER(name, description) before including sched/counters.h"
#endif
FB_COUNTER(switches, "context switches to a fiber")
FB_COUNTER(creates, "fibers created")
FB_COUNTER(exits, "fibers finished")
FB_COUNTER(yields, "fiber_yield calls")
FB_COUNTER(parks, "fibers parked (blocked)")
FB_COUNTER(wakeups, "fibers woken")
FB_COUNTER(wake_early, "wakeups that caught the fiber before it parked")
FB_COUNTER(park_spins,
	   "blocking fibers that polled for their own wake first (PARK_SPIN)")
FB_COUNTER(park_spin_wakes,
	   "of those, the ones the wake reached: never parked, no placement")
FB_COUNTER(wakelist_pushes, "wakeups handed off through a wakelist")
FB_COUNTER(direct_enqueues, "wakeups enqueued under a remote run-queue lock")
FB_COUNTER(local_enqueues, "wakeups enqueued on the waker's own worker")
FB_COUNTER(exit_handoffs,
	   "exits that handed their worker to their parked joiner (no wakeup)")
FB_COUNTER(on_worker_waits,
	   "wakers that waited for the wakee to leave its stack")
FB_COUNTER(wake_on_worker,
	   "wakeups handed to the worker still leaving the wakee (its wakelist)")
FB_COUNTER(wakelist_drains, "wakelist drains that found fibers")
FB_COUNTER(futex_wakes, "futex wakes of sleeping workers")
FB_COUNTER(poll_wakes, "wakeups noticed by a polling worker, no system call")
FB_COUNTER(idle_polls_found, "idle poll windows that found work")
FB_COUNTER(poll_skips,
	   "idle waits that did not poll: the worker's CPU is crowded")
FB_COUNTER(sleeps, "idle workers that went to sleep (futex wait)")
FB_COUNTER(steals, "fibers stolen by an idle worker")
FB_COUNTER(steal_searches,
	   "ungated victim searches of the idle loop (rate-limited fallback)")
FB_COUNTER(peer_rescues,
	   "fibers a busy worker took from one stuck in a fiber (PEER_RESCUE)")
FB_COUNTER(unpins,
	   "workers unpinned: their CPU was shared (LIBFIBER_BIND unset)")
FB_COUNTER(repins, "unpinned workers pinned again after a quiet second")
FB_COUNTER(kicks, "idle workers woken to take a backlog")
FB_COUNTER(wake_affine,
	   "wakeups whose target wake_affine moved to the waker's worker")
FB_COUNTER(wake_target, "wake placement: the target worker was idle")
FB_COUNTER(wake_prev, "wake placement: the previous worker was idle")
FB_COUNTER(wake_recent, "wake placement: the recently used worker was idle")
FB_COUNTER(wake_idle_sibling,
	   "wake placement: an idle SMT sibling of the previous worker")
FB_COUNTER(wake_idle_core, "wake placement: an idle core found by the LLC scan")
FB_COUNTER(wake_scan_hit,
	   "wake placement: an idle worker found by the LLC scan")
FB_COUNTER(wake_scan_miss, "wake placement: nothing idle found, target kept")
FB_COUNTER(wake_affinity, "wake placement: answer replaced to honour affinity")
FB_COUNTER(wake_pinned, "wake placement: the one worker a pinned fiber allows")
FB_COUNTER(wake_group,
	   "wake placements moved to the home of the fiber's wake group")
FB_COUNTER(wgroups_formed,
	   "wake groups formed by two fibers of a pipe or channel")
FB_COUNTER(wgroup_joins,
	   "fibers that joined the wake group of a pipe or channel peer")
FB_COUNTER(wgroup_moves,
	   "wake groups moved to the home of another whose members they met")
FB_COUNTER(wake_probes, "workers probed by LLC scans (sum)")
FB_COUNTER(
	wake_placements,
	"wake placements decided (divide wake_probes by it); a one-worker runtime decides none")
FB_COUNTER(scan_idle_cores,
	   "LLC scans for an idle core (has_idle_cores set), run or skipped")
FB_COUNTER(scan_cut_sis_util, "LLC scans skipped or cut short by SIS_UTIL")
FB_COUNTER(scan_cut_core_limit, "idle-core scans cut short by SIS_CORE_LIMIT")
FB_COUNTER(timers_fired,
	   "timers that expired (sleeps, timed waits, I/O timeouts)")
FB_COUNTER(io_waits, "fibers parked waiting for fd readiness")
FB_COUNTER(io_events, "fd waiters woken by the poller")
FB_COUNTER(pipe_populates,
	   "fiber pipes: ring pages backed ahead of a write, outside the lock")
FB_COUNTER(io_drained_reads,
	   "fiber reads that waited first: the last read emptied the stream")
FB_COUNTER(epoll_sleeps, "idle workers that slept in epoll_wait as the poller")
FB_COUNTER(epoll_ctls,
	   "epoll_ctl calls on fds: registrations, their checks, removals")
FB_COUNTER(epoll_ticks, "non-blocking epoll polls by busy workers")
FB_COUNTER(eventfd_wakes, "eventfd writes that woke the poller")
FB_COUNTER(lb_balances,
	   "load-balance attempts (periodic, newly idle, for sleepers)")
FB_COUNTER(lb_pulled, "fibers pulled by load balancing")
FB_COUNTER(lb_asym_pulls,
	   "ASYM_PACKING pulls and push requests towards better workers")
FB_COUNTER(lb_pushes,
	   "running fibers pushed to another worker (active balance)")
FB_COUNTER(create_numa_imb,
	   "creations kept local under an allowed NUMA imbalance")
FB_COUNTER(create_affine,
	   "creations kept on the worker of a creator alone there")
FB_COUNTER(create_placed,
	   "kept creations placed after all: their creator yielded first")
FB_COUNTER(pelt_migrations,
	   "fibers whose load moved here from another worker's sums")
FB_COUNTER(blocked_decays, "decays of the worker's own blocked load")
FB_COUNTER(sleeper_decays,
	   "decays of sleeping workers' blocked load (STATS passes)")
FB_COUNTER(newidle_balances, "newly-idle balances that passed the gate")
FB_COUNTER(newidle_gated, "newly-idle balances stopped by the gate")
FB_COUNTER(newidle_ni_skips, "newly-idle domain balances skipped by NI_RANDOM")
FB_COUNTER(nohz_kicks, "sleeping workers kicked to balance or decay for all")
FB_COUNTER(nohz_passes, "balance passes run for the sleeping workers")
FB_COUNTER(stalls,
	   "fibers past LIBFIBER_STALL_MS without a scheduling point (foreign)")
FB_COUNTER(stall_timers, "timers of a stalled worker fired by the monitor")
FB_COUNTER(stall_moves,
	   "fibers moved off a stalled worker's queue by the monitor")
FB_COUNTER(deadlocks, "reports that all fibers are blocked (LIBFIBER_DEADLOCK)")
FB_COUNTER(stats_intervals,
	   "interval statistics written (LIBFIBER_STATS_INTERVAL_MS)")
