/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fiber.h - the public interface of libfiber.
 *
 * libfiber runs many fibers (user-level threads with their own stacks) on a
 * few workers (kernel threads, one per hardware thread, pinned).  Calls follow
 * the pthreads conventions: they return 0 or a positive errno constant and
 * never set errno; results go through out-parameters, which are left untouched
 * on error.  Every call that may block parks the calling fiber, never its
 * worker; called from a thread that is not a worker (main, a pthread), the same
 * calls block that thread.
 *
 * This is the only public header.  Everything not declared here is private.
 */
#ifndef FIBER_H
#define FIBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FIBER_API __attribute__((visibility("default")))
#else
#define FIBER_API
#endif

/*
 * The version of this header; fiber_version() gives the library's.  ABI
 * rules for 0.x (doc/abi.md): a minor release may change the ABI, and the
 * soname says so (libfiber.so.0.MINOR); a patch release only adds.  The
 * opaque types (fiber_attr_t, the sync objects) and the reserved space of
 * struct fiber_config leave room for fields to come.
 */
#define FIBER_VERSION_MAJOR 0
#define FIBER_VERSION_MINOR 2
#define FIBER_VERSION_PATCH 0

/* fiber_version - the library's version, "MAJOR.MINOR.PATCH", with
 * "+git.REVISION" appended when it was built from a git checkout (e.g.
 * "0.2.0+git.0582ce8").  Context: any thread; never fails. */
FIBER_API const char *fiber_version(void);

/*
 * A fiber_t names one fiber and is never NULL for one; it is a handle, not
 * an address.  It becomes stale when the fiber has been joined, or has
 * exited detached; a stale handle stays stale, also after fiber_shutdown
 * and fiber_init, and never names a fiber created later (within 2^40
 * fibers reusing its place, on 64-bit machines).  Calls given a stale
 * handle fail with ESRCH or return NULL/0; none of them reads freed memory.
 */
typedef struct fiber_handle *fiber_t;
/* Opaque objects. */
typedef struct fb_chan fiber_chan_t;
typedef struct fb_pipe fiber_pipe_t;

/*
 * Runtime configuration for fiber_init().  Zero-initialise it: a field left
 * at 0 (or NULL) means "take the environment variable named below, else its
 * default" (README.md has the table of LIBFIBER_* variables).  A field that
 * is set overrides its variable; a bad value makes fiber_init() fail with
 * EINVAL and a message naming the field (fiber_config.NAME).  Inside the
 * library, lib/config.h pairs each field with its variable.
 */
struct fiber_config {
	/* Number of workers, 1 to 1024; 0: LIBFIBER_WORKERS (default: one
	 * per PU the process may use, at most its cgroup's cpu.max limit,
	 * and the PUs must then be at most 1024). */
	unsigned int workers;
	/* hwloc synthetic description or path of an hwloc XML file; NULL:
	 * LIBFIBER_TOPOLOGY (default: the machine). */
	const char *topology;
	/* Read only when bind_set is non-zero: 1 pin each worker to a PU, 0 do
	 * not pin, -1 LIBFIBER_BIND.  Any other value is refused (EINVAL). */
	int bind;
	/* 0: bind is ignored and LIBFIBER_BIND applies. */
	int bind_set;
	/* Default fiber stack in bytes, FIBER_STACK_MIN to 1 GiB; 0:
	 * LIBFIBER_STACK_SIZE. */
	size_t stack_size;
	/* Scheduler features in LIBFIBER_SCHED_FEATURES syntax, applied to
	 * the defaults; NULL: LIBFIBER_SCHED_FEATURES. */
	const char *sched_features;
	/* Read only when idle_poll_set is non-zero: how long an idle worker
	 * polls before it sleeps, 0 to 1000000 us; -1: LIBFIBER_IDLE_POLL_US.
	 * Any other value is refused (EINVAL). */
	long idle_poll_us;
	/* 0: idle_poll_us is ignored and LIBFIBER_IDLE_POLL_US applies. */
	int idle_poll_set;
	/* "0", "1" or "json"; NULL: LIBFIBER_STATS. */
	const char *stats;
	/* For later fields: must be 0, else fiber_init() fails (EINVAL). */
	unsigned int reserved[8];
};

/*
 * fiber_init - start the runtime with @config (NULL: the environment only).
 * Optional: the first call that needs the runtime (fiber_create) starts it
 * with the environment's configuration; if that configuration is bad, its
 * message is printed once and every later such call returns EINVAL without
 * printing, until fiber_init() is called (which reads the environment
 * again).
 * Return: 0; EINVAL for a bad configuration (a message naming the variable
 * or field, the value and what is accepted goes to stderr and nothing
 * starts); EBUSY if the runtime is already running; ENOMEM/EAGAIN when
 * memory or threads are short.
 */
FIBER_API int fiber_init(const struct fiber_config *config);

/*
 * fiber_shutdown - stop every worker and free the runtime.  Waits for the
 * fibers still runnable to finish; fibers that are blocked, sleeping or in
 * a timed wait count as blocked, so it returns within about 50 ms after
 * the last runnable fiber finished.  Then creates fail with ESHUTDOWN,
 * and fibers still blocked are abandoned: each is named on stderr (id,
 * name, what it waits on), never runs again (a later post, unlock or close
 * of what it waits on is harmless), keeps its stack, and a join of it
 * gives ESHUTDOWN (also to a thread already waiting in fiber_join).
 * Context: a thread that is not a worker.
 * Return: 0; EBUSY when fibers were abandoned (the runtime is stopped all
 * the same); EPERM from a fiber; EDEADLK from a function that
 * fiber_offload() runs (the stop would wait for that call); ESRCH if the
 * runtime is not running.
 */
FIBER_API int fiber_shutdown(void);

/*
 * Sets of worker ids, for affinity: bit w is worker w.  The layout is that
 * of glibc's cpu_set_t, so a cpu_set_t over worker ids may be passed too,
 * but these helpers need no feature macro (_GNU_SOURCE).
 */
#define FIBER_WORKERS_MAX 1024
typedef struct fiber_workerset {
	unsigned long bits[FIBER_WORKERS_MAX / (8 * sizeof(unsigned long))];
} fiber_workerset_t;

static inline void fiber_workerset_zero(fiber_workerset_t *set)
{
	for (size_t i = 0; i < sizeof(set->bits) / sizeof(set->bits[0]); i++)
		set->bits[i] = 0;
}

static inline void fiber_workerset_add(fiber_workerset_t *set,
				       unsigned int worker)
{
	if (worker < FIBER_WORKERS_MAX)
		set->bits[worker / (8 * sizeof(unsigned long))] |=
			1UL << (worker % (8 * sizeof(unsigned long)));
}

static inline void fiber_workerset_del(fiber_workerset_t *set,
				       unsigned int worker)
{
	if (worker < FIBER_WORKERS_MAX)
		set->bits[worker / (8 * sizeof(unsigned long))] &=
			~(1UL << (worker % (8 * sizeof(unsigned long))));
}

static inline int fiber_workerset_has(const fiber_workerset_t *set,
				      unsigned int worker)
{
	return worker < FIBER_WORKERS_MAX &&
	       (set->bits[worker / (8 * sizeof(unsigned long))] >>
		(worker % (8 * sizeof(unsigned long)))) &
		       1;
}

/*
 * Attributes, in the pthread_attr_t style.  Opaque, with room for future
 * attributes; zero-initialised is not valid: call fiber_attr_init(), and
 * every call below gives EINVAL for an attribute object it did not
 * initialise.
 */
typedef struct fiber_attr {
	uint64_t opaque[40];
} fiber_attr_t;

/* Return: 0; EINVAL for a NULL argument. */
FIBER_API int fiber_attr_init(fiber_attr_t *attr);
FIBER_API int fiber_attr_destroy(fiber_attr_t *attr);
/* Return: 0; EINVAL below FIBER_STACK_MIN or above 1 GiB. */
FIBER_API int fiber_attr_setstacksize(fiber_attr_t *attr, size_t size);
FIBER_API int fiber_attr_getstacksize(const fiber_attr_t *attr, size_t *size);
/* Return: 0; EINVAL for NULL; the name is truncated to 31 bytes. */
FIBER_API int fiber_attr_setname(fiber_attr_t *attr, const char *name);
/* Return: 0; EINVAL for a state other than FIBER_CREATE_JOINABLE/DETACHED. */
FIBER_API int fiber_attr_setdetachstate(fiber_attr_t *attr, int state);
/*
 * fiber_attr_setaffinity - the workers the fiber may run on: @set is a
 * fiber_workerset_t (or a cpu_set_t) of @setsize bytes over worker ids.
 * fiber_create fails with EINVAL if no allowed worker exists.
 * Return: 0; EINVAL for NULL, a @setsize of 0 or an empty set.
 */
FIBER_API int fiber_attr_setaffinity(fiber_attr_t *attr, size_t setsize,
				     const void *set);

#define FIBER_CREATE_JOINABLE 0
#define FIBER_CREATE_DETACHED 1
#define FIBER_STACK_MIN (16 * 1024)

/*
 * fiber_create - start a fiber running @fn(@arg).  @attr may be NULL.
 * Starts the runtime first if fiber_init() was not called (see there).
 * Context: any thread.
 * Return: 0; EINVAL for a NULL fn/out pointer, bad attributes, or a bad
 * environment for that implicit start; EAGAIN or ENOMEM when memory is
 * short (nothing is leaked); EAGAIN when 2^24 fibers (running, or exited
 * and not yet joined) exist; EAGAIN when the kernel refuses the stack's
 * mapping because the process is at vm.max_map_count (a guarded stack is
 * two mappings; a message naming the limit and LIBFIBER_STACK_GUARD=0 is
 * printed to stderr once per process); ESHUTDOWN once fiber_shutdown() has
 * begun to stop the runtime (the fiber is not created).
 */
FIBER_API int fiber_create(fiber_t *fiber, const fiber_attr_t *attr,
			   void *(*fn)(void *), void *arg);
/*
 * fiber_join - wait for @fiber to finish and collect its return value; its
 * handle is stale afterwards.
 * Return: 0; EINVAL if it is detached or already being joined; EDEADLK when
 * joining yourself; ESRCH for NULL or a stale handle (already joined, or a
 * detached fiber that has exited); ESHUTDOWN if fiber_shutdown() abandoned
 * it (it will never finish).
 */
FIBER_API int fiber_join(fiber_t fiber, void **retval);
/* fiber_join_until - fiber_join() that gives up when fiber_now() reaches
 * @deadline (see "Time and deadlines").  Return: as fiber_join(), or
 * ETIMEDOUT: @fiber is still running and still joinable. */
FIBER_API int fiber_join_until(fiber_t fiber, void **retval, uint64_t deadline);
/*
 * Cancellation.  fiber_cancel(f) makes f's current or next cancellation
 * point return ECANCELED (the fd calls: -1 with errno ECANCELED); the call
 * that reports it consumes it, and several cancellations before it count
 * as one.  Nothing is unwound: the call returns as one that timed out
 * does, with nothing sent, received or taken (a pipe write and a partial
 * fd write say in their count what got in; an fd write that wrote some
 * bytes returns that count and the next call reports the cancellation).
 * A fiber may cancel itself.  Threads that are not workers are never
 * cancelled.
 *
 * Cancellation points: fiber_sleep_until; fiber_join, fiber_join_until;
 * fiber_cond_wait, _timedwait, _wait_until (which take the mutex again
 * before they return ECANCELED); fiber_sem_wait, _timedwait, _wait_until;
 * fiber_barrier_wait; fiber_wg_wait, _wait_until; fiber_chan_send, _recv and their timed and _until
 * forms; fiber_pipe_read, _write and their timed and _until forms;
 * every fd call (fiber_read, _write, _readv, _writev, _recv, _send,
 * _accept, _connect, _poll).
 * Not cancellation points: the locks (fiber_mutex_lock, fiber_rwlock_*
 * lock), fiber_once, fiber_sleep and fiber_usleep (they return nothing),
 * fiber_yield, fiber_close, the try calls and everything that never
 * waits.  A cancellation that reaches a fiber waiting in one of those
 * waits for its next cancellation point.
 *
 * fiber_cancel - Context: any thread; never waits.
 * Return: 0; ESRCH for NULL, a stale handle, or a fiber that has exited;
 * ESHUTDOWN if fiber_shutdown() abandoned it.
 */
FIBER_API int fiber_cancel(fiber_t fiber);
/* Let @fiber's resources go when it exits; its handle is stale from then.
 * Return: 0; EINVAL if it is detached or being joined; ESRCH for NULL or a
 * stale handle. */
FIBER_API int fiber_detach(fiber_t fiber);
/* Give the worker to other runnable fibers.  Return: 0; EPERM outside a fiber. */
FIBER_API int fiber_yield(void);
/* The calling fiber's handle, or NULL outside fibers. */
FIBER_API fiber_t fiber_self(void);
/* End the calling fiber with @retval.  Outside a fiber it does nothing and
 * returns; inside it does not return. */
FIBER_API void fiber_exit(void *retval);
/* The id of the worker running the caller, like sched_getcpu(); -1 outside. */
FIBER_API int fiber_current_worker(void);
/* Number of workers of the running runtime, 0 if it is not running. */
FIBER_API int fiber_nr_workers(void);
/* A fiber's id (stable, unique in the process) and name; 0 and NULL for
 * NULL or a stale handle.  The name lives as long as the handle. */
FIBER_API uint64_t fiber_id(fiber_t fiber);
FIBER_API const char *fiber_name(fiber_t fiber);
/* Change the calling fiber's affinity (@set as in fiber_attr_setaffinity);
 * it migrates at once if needed.
 * Return: 0; EINVAL for an empty set or no worker in it; EPERM outside a fiber. */
FIBER_API int fiber_setaffinity(size_t setsize, const void *set);

/*
 * Fiber-local storage, like pthread keys: at most FIBER_KEYS_MAX keys exist
 * at once.  A new key reads NULL in every fiber.  A key's value is never 0
 * and stays invalid once the key is deleted, also after another key took
 * its place: fiber_setspecific and fiber_key_delete give EINVAL for it,
 * fiber_getspecific NULL, and a value set under it goes to no destructor.
 * (The check compares a generation that wraps after about 67 million keys
 * made in one place.)  At a fiber's end, each non-NULL value of a live key
 * with a destructor is passed to it, for up to 4 rounds while destructors
 * set new values, as in pthreads.
 */
typedef unsigned int fiber_key_t;
#define FIBER_KEYS_MAX 64
/* Return: 0; EAGAIN when all FIBER_KEYS_MAX keys are taken; EINVAL for a
 * NULL @key. */
FIBER_API int fiber_key_create(fiber_key_t *key, void (*destructor)(void *));
/* Values set under @key are left to their owner; no destructor runs.
 * Return: 0; EINVAL if @key is not a live key. */
FIBER_API int fiber_key_delete(fiber_key_t key);
/* The calling fiber's value for @key; NULL if none was set, outside a
 * fiber, or if @key is not a live key. */
FIBER_API void *fiber_getspecific(fiber_key_t key);
/* Return: 0; EINVAL if @key is not a live key; EPERM outside a fiber;
 * ENOMEM for the first value a fiber sets. */
FIBER_API int fiber_setspecific(fiber_key_t key, const void *value);

/*
 * Scheduler features (LIBFIBER_SCHED_FEATURES syntax: names separated by
 * spaces or commas, NAME turns on, NO_NAME turns off).
 * fiber_sched_features_set - Return: 0; EINVAL naming an unknown feature (the
 * mask is unchanged).
 * fiber_sched_feature_get - 1 on, 0 off, -1 unknown name.
 * fiber_sched_features_string - writes "NAME NO_NAME ..." into @buf; returns
 * the length it needed (snprintf semantics).
 */
FIBER_API int fiber_sched_features_set(const char *spec);
FIBER_API int fiber_sched_feature_get(const char *name);
FIBER_API int fiber_sched_features_string(char *buf, size_t len);

/*
 * Statistics.  fiber_stats_print writes the LIBFIBER_STATS table (json != 0:
 * one JSON object) to @fd and returns 0, ESRCH, ENOMEM or write(2)'s errno
 * (EPIPE if nobody reads @fd: no SIGPIPE is raised, from any thread).
 * fiber_stats_counter returns the runtime-wide sum of one counter by its
 * documented name, or -1 for an unknown name.
 */
FIBER_API int fiber_stats_print(int fd, int json);
FIBER_API long long fiber_stats_counter(const char *name);
FIBER_API void fiber_stats_reset(void);

/*
 * fiber_dump - write every live fiber of the running runtime to @fd, as
 * Go's runtime prints its goroutines: the workers, then per fiber its id,
 * name, state, what it waits on (a mutex, cond, sem, chan or pipe by
 * address, an fd and the direction, a sleep with the time left, the fiber
 * it joins), for how long, its worker, and for a parked fiber a backtrace
 * taken from the context it saved; then the threads that wait in
 * libfiber.  LIBFIBER_DUMP_SIGNAL prints the same on a signal.
 * Context: any thread; the fibers keep running meanwhile.
 * Return: 0; ESRCH if no runtime is running; EBADF if @fd is not open for
 * writing; EPIPE if nobody reads it (no SIGPIPE is raised); another of
 * write(2)'s errnos.
 */
FIBER_API int fiber_dump(int fd);

/*
 * Time and deadlines.  Every clock of this API is CLOCK_MONOTONIC, never
 * CLOCK_REALTIME; the calls differ only in how they take it:
 *  - the _until calls: an absolute deadline, a uint64_t of nanoseconds on
 *    CLOCK_MONOTONIC,
 *    as fiber_now() reads it (fiber_now() + 5000000 is 5 ms from now);
 *    FIBER_NO_DEADLINE waits without limit;
 *  - the timedwait-style calls (fiber_cond_timedwait...): an absolute
 *    struct timespec, also on CLOCK_MONOTONIC.  pthreads' calls take
 *    CLOCK_REALTIME: a CLOCK_REALTIME abstime given here lies decades
 *    ahead and the call waits that long;
 *  - fiber_sleep (ns), fiber_usleep (us), fiber_poll and fiber_connect
 *    (ms, -1: no limit): a duration from the call;
 *  - SO_RCVTIMEO / SO_SNDTIMEO (see the fd calls): a duration from the
 *    first wait of a call.
 * A deadline bounds waiting only: a call that can complete at once does,
 * also when its deadline has passed; one that would have to wait past
 * its deadline returns ETIMEDOUT at once and leaves the object as it was.
 */
#define FIBER_NO_DEADLINE UINT64_MAX
/* fiber_now - CLOCK_MONOTONIC in nanoseconds, the clock of every
 * deadline.  Context: any thread; cannot fail. */
FIBER_API uint64_t fiber_now(void);

/*
 * Synchronisation objects.  All-zero memory (the _INITIALIZER macros) is an
 * unlocked, empty object; the _init functions exist for symmetry with pthreads
 * and cannot fail.  Destroying an object something waits on gives EBUSY.
 * Every call below that waits, but the locks and fiber_once, is a
 * cancellation point and may also return ECANCELED (see fiber_cancel).
 */
typedef struct fiber_mutex {
	uint64_t opaque[4];
} fiber_mutex_t;
typedef struct fiber_cond {
	uint64_t opaque[4];
} fiber_cond_t;
typedef struct fiber_sem {
	uint64_t opaque[4];
} fiber_sem_t;
typedef struct fiber_wg {
	uint64_t opaque[4];
} fiber_wg_t;
typedef struct fiber_rwlock {
	uint64_t opaque[6];
} fiber_rwlock_t;
typedef struct fiber_barrier {
	uint64_t opaque[6];
} fiber_barrier_t;
/* Name it fiber_once_t.  Its tag in C++ is not the function's name, which
 * would hide the struct's constructor there (g++ -Wshadow); C keeps the
 * tag "struct fiber_once" that code may spell.  No symbol carries it in C. */
#ifdef __cplusplus
typedef struct fiber_once_s {
#else
typedef struct fiber_once {
#endif
	uint64_t opaque[4];
} fiber_once_t;

#define FIBER_MUTEX_INITIALIZER                                                \
	{                                                                      \
		{                                                              \
			0                                                      \
		}                                                              \
	}
#define FIBER_COND_INITIALIZER FIBER_MUTEX_INITIALIZER
#define FIBER_RWLOCK_INITIALIZER                                               \
	{                                                                      \
		{                                                              \
			0                                                      \
		}                                                              \
	}
#define FIBER_ONCE_INITIALIZER FIBER_MUTEX_INITIALIZER

FIBER_API int fiber_mutex_init(fiber_mutex_t *m);
FIBER_API int fiber_mutex_destroy(fiber_mutex_t *m);
FIBER_API int fiber_mutex_lock(fiber_mutex_t *m);
/* Return: 0; EBUSY if held. */
FIBER_API int fiber_mutex_trylock(fiber_mutex_t *m);
/* Return: 0; EPERM if the caller does not hold it. */
FIBER_API int fiber_mutex_unlock(fiber_mutex_t *m);

FIBER_API int fiber_cond_init(fiber_cond_t *c);
FIBER_API int fiber_cond_destroy(fiber_cond_t *c);
FIBER_API int fiber_cond_wait(fiber_cond_t *c, fiber_mutex_t *m);
FIBER_API int fiber_cond_signal(fiber_cond_t *c);
FIBER_API int fiber_cond_broadcast(fiber_cond_t *c);
/* Timed variant: @abstime is absolute, on CLOCK_MONOTONIC, not
 * CLOCK_REALTIME as pthread_cond_timedwait's (see "Time and deadlines").  Return: 0; ETIMEDOUT, with @m held again; EINVAL for a bad
 * @abstime; EPERM if the caller does not hold @m. */
FIBER_API int fiber_cond_timedwait(fiber_cond_t *c, fiber_mutex_t *m,
				   const struct timespec *abstime);
/* fiber_cond_wait_until - the same with a deadline in fiber_now() ns.
 * Return: 0; ETIMEDOUT, with @m held again; EINVAL for NULL; EPERM if the
 * caller does not hold @m. */
FIBER_API int fiber_cond_wait_until(fiber_cond_t *c, fiber_mutex_t *m,
				    uint64_t deadline);

/* Return: 0; EINVAL if @value exceeds FIBER_SEM_VALUE_MAX. */
#define FIBER_SEM_VALUE_MAX 0x7fffffff
FIBER_API int fiber_sem_init(fiber_sem_t *s, unsigned int value);
FIBER_API int fiber_sem_destroy(fiber_sem_t *s);
FIBER_API int fiber_sem_wait(fiber_sem_t *s);
/* Return: 0; EAGAIN if the count is 0. */
FIBER_API int fiber_sem_trywait(fiber_sem_t *s);
/* Return: 0; EOVERFLOW at FIBER_SEM_VALUE_MAX. */
FIBER_API int fiber_sem_post(fiber_sem_t *s);
FIBER_API int fiber_sem_getvalue(fiber_sem_t *s, int *value);
/* Return: 0; ETIMEDOUT at @abstime (CLOCK_MONOTONIC), no unit taken;
 * EINVAL for a bad @abstime. */
FIBER_API int fiber_sem_timedwait(fiber_sem_t *s,
				  const struct timespec *abstime);
/* Return: 0; ETIMEDOUT when fiber_now() reaches @deadline, no unit
 * taken; EINVAL for NULL. */
FIBER_API int fiber_sem_wait_until(fiber_sem_t *s, uint64_t deadline);

/*
 * Wait groups, as Go's sync.WaitGroup: fiber_wg_add() counts work that
 * is outstanding, fiber_wg_done() one piece finished, fiber_wg_wait()
 * waits for the count to reach 0.  A waiter may destroy and free the
 * group as soon as its wait returns.  The waits are cancellation points.
 */
/* Return: 0; EINVAL for NULL. */
FIBER_API int fiber_wg_init(fiber_wg_t *wg);
/* Return: 0; EBUSY while something waits on @wg. */
FIBER_API int fiber_wg_destroy(fiber_wg_t *wg);
/* Return: 0; EINVAL if the count would go below 0, EOVERFLOW above
 * INT_MAX (the count unchanged). */
FIBER_API int fiber_wg_add(fiber_wg_t *wg, int delta);
/* fiber_wg_add(@wg, -1).  Return: 0; EINVAL if the count is 0. */
FIBER_API int fiber_wg_done(fiber_wg_t *wg);
/* Return: 0; ECANCELED; EINVAL for NULL. */
FIBER_API int fiber_wg_wait(fiber_wg_t *wg);
/* Return: 0; ETIMEDOUT when fiber_now() reaches @deadline; ECANCELED. */
FIBER_API int fiber_wg_wait_until(fiber_wg_t *wg, uint64_t deadline);

FIBER_API int fiber_rwlock_init(fiber_rwlock_t *rw);
FIBER_API int fiber_rwlock_destroy(fiber_rwlock_t *rw);
FIBER_API int fiber_rwlock_rdlock(fiber_rwlock_t *rw);
FIBER_API int fiber_rwlock_wrlock(fiber_rwlock_t *rw);
/* Return: 0; EBUSY. */
FIBER_API int fiber_rwlock_tryrdlock(fiber_rwlock_t *rw);
FIBER_API int fiber_rwlock_trywrlock(fiber_rwlock_t *rw);
/* Return: 0; EPERM if not held. */
FIBER_API int fiber_rwlock_unlock(fiber_rwlock_t *rw);

#define FIBER_BARRIER_SERIAL_FIBER (-1)
/* Return: 0; EINVAL for a count of 0. */
FIBER_API int fiber_barrier_init(fiber_barrier_t *b, unsigned int count);
FIBER_API int fiber_barrier_destroy(fiber_barrier_t *b);
/* Return: FIBER_BARRIER_SERIAL_FIBER in exactly one caller, 0 in the others. */
FIBER_API int fiber_barrier_wait(fiber_barrier_t *b);

FIBER_API int fiber_once(fiber_once_t *once, void (*fn)(void));

/*
 * fiber_chan: a bounded multi-producer multi-consumer channel of fixed-size
 * elements.  A capacity of 0 makes it synchronous (a send completes when a
 * receiver takes the element).
 * send/recv Return: 0; EPIPE sending on a closed channel; recv on a closed
 * and drained channel returns EPIPE as well.  try variants: EAGAIN instead of
 * blocking.  Timed variants: ETIMEDOUT at @abstime (CLOCK_MONOTONIC) with
 * nothing sent or received; EINVAL for a bad @abstime.
 */
FIBER_API int fiber_chan_create(fiber_chan_t **chan, size_t elem_size,
				size_t capacity);
FIBER_API int fiber_chan_destroy(fiber_chan_t *chan);
FIBER_API int fiber_chan_send(fiber_chan_t *chan, const void *elem);
FIBER_API int fiber_chan_recv(fiber_chan_t *chan, void *elem);
FIBER_API int fiber_chan_trysend(fiber_chan_t *chan, const void *elem);
FIBER_API int fiber_chan_tryrecv(fiber_chan_t *chan, void *elem);
FIBER_API int fiber_chan_close(fiber_chan_t *chan);
FIBER_API int fiber_chan_timedsend(fiber_chan_t *chan, const void *elem,
				   const struct timespec *abstime);
FIBER_API int fiber_chan_timedrecv(fiber_chan_t *chan, void *elem,
				   const struct timespec *abstime);
/* _until variants: ETIMEDOUT when fiber_now() reaches @deadline, with
 * nothing sent or received. */
FIBER_API int fiber_chan_send_until(fiber_chan_t *chan, const void *elem,
				    uint64_t deadline);
FIBER_API int fiber_chan_recv_until(fiber_chan_t *chan, void *elem,
				    uint64_t deadline);

/*
 * fiber_chan_select: complete one of several channel operations, like Go's
 * select.  Each case names a channel, FIBER_SELECT_SEND (send *elem) or
 * FIBER_SELECT_RECV (receive into *elem), and the element.  The call waits
 * until one case can complete or fiber_now() reaches @deadline
 * (FIBER_NO_DEADLINE: never; 0 or any past deadline polls once, like Go's
 * default case), completes exactly that one and stores its index in
 * *chosen.  Among cases ready at once each is chosen with equal
 * probability.  A case on a closed channel is ready and completes with
 * EPIPE, as fiber_chan_send and fiber_chan_recv do.  A cancellation point.
 * Return: 0 (case *chosen moved its element); EPIPE (case *chosen met a
 * closed channel; nothing moved); ETIMEDOUT, ECANCELED (no case chosen,
 * nothing moved); EINVAL for NULL @cases or @chosen, @n of 0 or above
 * FIBER_SELECT_MAX, a NULL channel or element, or an unknown op; ENOMEM.
 */
#define FIBER_SELECT_SEND 1
#define FIBER_SELECT_RECV 2
#define FIBER_SELECT_MAX 65536
struct fiber_select_case {
	fiber_chan_t *chan;
	int op;	    /* FIBER_SELECT_SEND or FIBER_SELECT_RECV */
	void *elem; /* send: the element (read only); recv: the buffer */
};
FIBER_API int fiber_chan_select(struct fiber_select_case *cases, size_t n,
				uint64_t deadline, size_t *chosen);

/*
 * fiber_pipe: an in-process byte stream with POSIX pipe semantics.  A bounded
 * buffer; read blocks until at least one byte is there and may return fewer
 * bytes than asked; read after the write end closed and the buffer drained
 * gives 0 bytes (EOF); write blocks until every byte is in and gives EPIPE
 * once the read end is closed (with *@done telling what got in first).
 * Return: 0; EPIPE; EBADF on a closed end.
 */
FIBER_API int fiber_pipe_create(fiber_pipe_t **pipe, size_t capacity);
FIBER_API int fiber_pipe_destroy(fiber_pipe_t *pipe);
FIBER_API int fiber_pipe_read(fiber_pipe_t *pipe, void *buf, size_t len,
			      size_t *done);
FIBER_API int fiber_pipe_write(fiber_pipe_t *pipe, const void *buf, size_t len,
			       size_t *done);
FIBER_API int fiber_pipe_close_read(fiber_pipe_t *pipe);
FIBER_API int fiber_pipe_close_write(fiber_pipe_t *pipe);
/* Timed variants: ETIMEDOUT at @abstime (CLOCK_MONOTONIC); a timed read
 * then got no byte (*@done 0), a timed write tells in *@done what got in. */
FIBER_API int fiber_pipe_timedread(fiber_pipe_t *pipe, void *buf, size_t len,
				   size_t *done,
				   const struct timespec *abstime);
FIBER_API int fiber_pipe_timedwrite(fiber_pipe_t *pipe, const void *buf,
				    size_t len, size_t *done,
				    const struct timespec *abstime);
/* _until variants: the same with a deadline in fiber_now() ns. */
FIBER_API int fiber_pipe_read_until(fiber_pipe_t *pipe, void *buf, size_t len,
				    size_t *done, uint64_t deadline);
FIBER_API int fiber_pipe_write_until(fiber_pipe_t *pipe, const void *buf,
				     size_t len, size_t *done,
				     uint64_t deadline);

/*
 * Sleeping.  fiber_sleep parks the calling fiber for at least @ns
 * nanoseconds (0 yields); fiber_usleep takes microseconds.  On a thread that
 * is not a worker they sleep that thread.  They cannot fail.
 * fiber_sleep_until sleeps until fiber_now() reaches @deadline (at once
 * if it has passed; FIBER_NO_DEADLINE: for ever).  Return: 0.
 */
FIBER_API void fiber_sleep(uint64_t ns);
FIBER_API void fiber_usleep(unsigned int us);
FIBER_API int fiber_sleep_until(uint64_t deadline);

/*
 * Fiber-aware fd I/O.  Unlike the rest of this API, these calls follow
 * POSIX: they return a count (or an fd, or 0) on success and -1 with errno
 * set on failure, because they stand in for read(2), accept(2)... in code
 * written for them.  This is the one place where libfiber sets errno.
 *
 * A call that would block parks the calling fiber, not its worker, until
 * the fd is ready (through the runtime's epoll poller), then retries; on a
 * thread that is not a worker it blocks in poll(2).  The fd must be in
 * non-blocking mode (O_NONBLOCK, SOCK_NONBLOCK): a blocking fd would block
 * the worker.  fiber_accept always returns non-blocking sockets.  EINTR is
 * retried, never returned.  Reads return what is there (0 at end of file);
 * writes and sends return once every byte is written, or with the count
 * written before an error (ECONNRESET, EPIPE...), which the next call
 * reports.  Transfers honour SO_RCVTIMEO / SO_SNDTIMEO and then fail with
 * ETIMEDOUT; the option is read once per fd, at the first call on it that
 * has to wait, and kept until fiber_close(): set it before.  The read and
 * write deadlines of fiber_fd_set_deadline() bound the waits of every
 * transfer, fiber_accept (read) and fiber_connect (write).  Every call but
 * fiber_close, fiber_fd_set_deadline and fiber_errno is a cancellation
 * point (ECANCELED, see fiber_cancel).  Any errno of the underlying call
 * can come back, plus
 * ETIMEDOUT, EBADF (the fd was closed, see below), and ENOMEM or EPERM (an
 * fd epoll cannot watch) from the poller.
 *
 * errno after a call that waits: a fiber may resume on another worker
 * thread, and errno is per thread.  The calls set errno, as POSIX says, on
 * the thread the fiber returns on; but compiled code may compute the
 * address of errno before the call (glibc declares __errno_location()
 * const) and read the old thread's errno after it, at -O2 and above.  The
 * same holds for errno read after any call that may switch (a fiber_* call
 * that parks or yields).  fiber_errno() is immune: it returns the errno of
 * the calling fiber's last failed fd call, kept in the fiber.  errno itself
 * is safe where no migration can happen: in a fiber whose affinity is one
 * worker (it never migrates), after a call that never switches (fiber_poll
 * with timeout 0, MSG_DONTWAIT), and on a thread that is not a worker.
 *
 * SIGPIPE: writing to a socket whose peer went away fails with EPIPE and
 * never raises SIGPIPE (sends pass MSG_NOSIGNAL; worker threads block
 * SIGPIPE).  A pipe whose reader went away gives EPIPE from a fiber; from
 * a thread that is not a worker, fiber_write/fiber_writev to such a pipe
 * raise SIGPIPE as write(2) does.
 *
 * Waiting: the poller registers an fd once (edge-triggered), at the first
 * call that has to wait on it; a call that finds readiness the poller saw
 * since costs no system call but its own.  Fibers waiting on one fd in
 * the same direction all wake at its next event; those that then find
 * nothing wait again.
 *
 * Closing: close an fd that other fibers may be waiting on or using with
 * fiber_close(), which wakes them with EBADF, forgets the fd's poller state
 * (registration, deadlines, cached timeouts) and waits for the calls in
 * progress before it closes.  A plain close(2) under a parked fiber is a
 * misuse: the fiber stays parked until another fiber's call waits on the
 * file that reuses the number, or sets its deadline, or libfiber makes it
 * (fiber_accept(), the TCP helpers), and then fails with EBADF, never
 * getting that file's data.  The one exception: the old file lives on (a
 * dup, a child) and becomes ready first, when the fiber retries its call
 * on the number.  If the fiber that waited on the old file is the one that
 * waits on a new file made with socket(2) or open(2), that wait may last
 * until its deadline.  Use fiber_close().  fiber_close() does not
 * interrupt a thread that is not a worker and blocks in poll(2) on the fd:
 * it gets EBADF when it wakes (at its timeout or the old file's next
 * event), and the close does not wait for it.  A fiber that fiber_shutdown()
 * abandons in one of these calls gives its fd back: later calls and a
 * fiber_close() of the fd work as usual.
 */
FIBER_API ssize_t fiber_read(int fd, void *buf, size_t len);
FIBER_API ssize_t fiber_write(int fd, const void *buf, size_t len);
FIBER_API ssize_t fiber_readv(int fd, const struct iovec *iov, int iovcnt);
FIBER_API ssize_t fiber_writev(int fd, const struct iovec *iov, int iovcnt);
/* MSG_DONTWAIT in @flags: one try, no waiting. */
FIBER_API ssize_t fiber_recv(int fd, void *buf, size_t len, int flags);
FIBER_API ssize_t fiber_send(int fd, const void *buf, size_t len, int flags);
/* recvfrom(2), recvmsg(2): as fiber_recv (MSG_DONTWAIT: one try). */
FIBER_API ssize_t fiber_recvfrom(int fd, void *buf, size_t len, int flags,
				 struct sockaddr *addr, socklen_t *addrlen);
FIBER_API ssize_t fiber_recvmsg(int fd, struct msghdr *msg, int flags);
/* sendto(2) of every byte, as fiber_send; sendmsg(2) returns the count of
 * the first sendmsg that sends anything (short on a stream socket: the
 * ancillary data must not go twice).  Both pass MSG_NOSIGNAL. */
FIBER_API ssize_t fiber_sendto(int fd, const void *buf, size_t len, int flags,
			       const struct sockaddr *addr, socklen_t addrlen);
FIBER_API ssize_t fiber_sendmsg(int fd, const struct msghdr *msg, int flags);
/* accept4(2); SOCK_NONBLOCK is always added.  EMFILE/ENFILE are returned at
 * once (the listening socket stays readable): back off before retrying. */
FIBER_API int fiber_accept(int fd, struct sockaddr *addr, socklen_t *addrlen,
			   int flags);
/* connect(2) on a non-blocking socket, waiting up to @timeout_ms (-1: no
 * limit).  Return: 0; -1 with the connection's error (ECONNREFUSED...) or
 * ETIMEDOUT. */
FIBER_API int fiber_connect(int fd, const struct sockaddr *addr,
			    socklen_t addrlen, int timeout_ms);
/* Wait until @fd reports one of @events (POLLIN, POLLOUT, POLLPRI,
 * POLLRDHUP) or @timeout_ms passes (-1: no limit, 0: just look).
 * Return: the reported events (> 0, with POLLERR/POLLHUP), 0 on timeout as
 * poll(2) does, or -1 with errno. */
FIBER_API int fiber_poll(int fd, short events, int timeout_ms);
/* close(2) for an fd the fiber calls use: every call waiting on @fd
 * returns -1/EBADF, calls in progress finish (those that start meanwhile
 * fail with EBADF), then @fd is closed.  Call it outside any call on @fd.
 * Return: 0; -1 with close(2)'s errno, or EBADF when another fiber_close
 * of @fd is running. */
FIBER_API int fiber_close(int fd);
/* Deadlines of @fd, as Go's SetDeadline: absolute fiber_now() nanoseconds
 * (FIBER_NO_DEADLINE: none) that bound every later wait of a read call
 * (read, readv, recv, recvfrom, recvmsg, accept) and of a write call
 * (write, writev, send, sendto, sendmsg, connect) on @fd, until changed or
 * fiber_close(); the earlier of it and SO_RCVTIMEO/SO_SNDTIMEO wins.  A
 * call that can complete at once does; one that would wait past a deadline
 * already gone fails with ETIMEDOUT at once.  Fibers waiting on @fd now
 * wake and wait again under the new deadlines (a thread blocked in poll(2)
 * keeps its old one).  Not a cancellation point; never waits.
 * Return: 0, or -1 with errno EBADF (@fd not open, negative, or in a
 * fiber_close()) or ENOMEM (no memory for the poller's fd table, or @fd
 * beyond it). */
FIBER_API int fiber_fd_set_deadline(int fd, uint64_t read_deadline,
				    uint64_t write_deadline);
/* The errno of the calling fiber's last failed fd call (above), whichever
 * worker it ran on; on a thread that is not a worker, errno.  0 if none
 * failed yet.  Cannot fail. */
FIBER_API int fiber_errno(void);

/*
 * Blocking calls off the workers.  fiber_offload(fn, arg, ret) runs
 * fn(arg) on a helper kernel thread and parks the calling fiber until it
 * returns; its worker runs other fibers meanwhile.  The helpers are a pool
 * of at most LIBFIBER_OFFLOAD_THREADS threads (default 64), made on demand
 * and gone after 10 s idle; jobs beyond that wait in FIFO order.  fn runs
 * on a thread that is not a worker, with every signal blocked: the fiber_*
 * calls it makes behave as on any such thread (they block it).
 *
 * Cancellation point: a fiber cancelled while its fn has not started gets
 * ECANCELED and fn never runs; once fn runs it cannot be stopped, so the
 * call waits for it, returns 0 with its result, and the cancellation stays
 * pending for the caller's next cancellation point.
 * From a thread that is not a worker (also before fiber_init or after
 * fiber_shutdown) fn runs at once on the calling thread.  fiber_shutdown()
 * waits for the fn that run or are queued and counts their callers as
 * runnable; a fiber that calls after the shutdown closed its gate gets
 * ESHUTDOWN.  After fork() the child has no helpers; its first offload
 * makes them again.
 *
 * fiber_offload - Context: any thread; a fiber parks.
 * Return: 0 (*@ret, if @ret is not NULL, holds fn's result); EINVAL if @fn
 * is NULL; ECANCELED (fn did not run); ESHUTDOWN; ENOMEM; EAGAIN when no
 * helper thread exists and none could be created.  @ret is untouched on
 * error.
 */
FIBER_API int fiber_offload(void *(*fn)(void *), void *arg, void **ret);
struct addrinfo;
/* fiber_getaddrinfo - getaddrinfo(3) through fiber_offload(), same
 * arguments and results (free *@res with freeaddrinfo(3)).  When the
 * offload itself fails (ECANCELED, ESHUTDOWN, ENOMEM, EAGAIN; EINVAL for
 * a NULL @res) it returns EAI_SYSTEM with errno set to that code, on the
 * thread the fiber returns on.  Context: any thread; a fiber parks. */
FIBER_API int fiber_getaddrinfo(const char *node, const char *service,
				const struct addrinfo *hints,
				struct addrinfo **res);
/*
 * TCP sockets in one call, for servers and clients.  Both take @host as a
 * name or a numeric IPv4/IPv6 address, looked up with fiber_getaddrinfo()
 * (the fiber parks, not its worker), and @port from 0 to 65535; they
 * return a non-blocking, close-on-exec socket, or -1 with errno as the fd
 * calls do.  A name without addresses gives EADDRNOTAVAIL; a failed lookup
 * otherwise EAGAIN, ENOMEM, or the errno fiber_getaddrinfo() sets.
 *
 * fiber_tcp_listen - a socket listening on @host (NULL: every local
 * address) and @port (0: one the kernel picks; read it back with
 * getsockname(2)), with SO_REUSEADDR and a queue of @backlog.  The first
 * address that binds wins.  Context: any thread.
 * Return: the socket; -1 with EINVAL (bad @port), socket(2)'s, bind(2)'s
 * (EADDRINUSE...) or listen(2)'s errno, or a lookup error (above).
 */
FIBER_API int fiber_tcp_listen(const char *host, int port, int backlog);
/*
 * fiber_tcp_dial - a socket connected to @host:@port, trying each address
 * in the order of getaddrinfo(3) until one connects or @deadline
 * (fiber_now() nanoseconds; FIBER_NO_DEADLINE: none) passes.  A
 * cancellation point.  Context: any thread; a fiber parks.
 * Return: the socket; -1 with EINVAL (NULL @host, bad @port), ETIMEDOUT,
 * ECANCELED, the last address's connect(2) error (ECONNREFUSED...), or a
 * lookup error (above).
 */
FIBER_API int fiber_tcp_dial(const char *host, int port, uint64_t deadline);
/*
 * fiber_signal_wait - wait until a signal of @set is pending, take it and
 * store its number in *@sig; the fiber parks on a signalfd(2), its worker
 * runs on.  @deadline: fiber_now() nanoseconds, FIBER_NO_DEADLINE for
 * none; a pending signal is taken at once.  A cancellation point.  A
 * signal reaches it only while every thread blocks it: block the set with
 * pthread_sigmask() in main() before fiber_init() and before making any
 * thread (workers inherit that mask; fiber_offload's helpers block every
 * signal).  For process-directed signals (kill(2), SIGINT).  Declared
 * when <signal.h> has sigset_t (not in strict ISO C without a POSIX
 * feature macro).  Context: any thread; a fiber parks.
 * Return: 0; EINVAL for NULL, an empty @set, or a signal of @set the
 * calling thread does not block; ETIMEDOUT; ECANCELED; EMFILE, ENFILE or
 * ENOMEM from signalfd(2) or the poller.
 */
#if defined(_POSIX_C_SOURCE) || defined(_XOPEN_SOURCE) ||                      \
	defined(_GNU_SOURCE) || defined(_DEFAULT_SOURCE) ||                    \
	!defined(__STRICT_ANSI__)
#include <signal.h>
FIBER_API int fiber_signal_wait(const sigset_t *set, int *sig,
				uint64_t deadline);
#endif

#ifdef __cplusplus
}
#endif
#endif /* FIBER_H */
