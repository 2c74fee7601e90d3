/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sem.c - fiber_sem_t, counting semaphores.
 *
 * A count and a FIFO wait list under one spinlock.  A post that finds a
 * waiter hands its unit straight to it instead of raising the count, so a
 * woken waiter returns at once without retaking the lock, and a caller
 * that arrives in between cannot take the unit from under it (waiters are
 * served in arrival order).  Waiters exist only while the count is 0.
 */
#include "sync/sync.h"

struct fb_sem {
	struct fb_spinlock lock; /* guards value and waiters */
	/* Units; written under @lock, read relaxed by the peeks. */
	atomic_uint value;
	struct fb_list waiters; /* struct fb_waiter.node; @lock */
};

FB_SYNC_CHECK(fb_sem, fiber_sem_t);

/*
 * fiber_sem_init - make @sem a semaphore holding @value units.
 * Context: any thread; nothing may use @sem concurrently.
 * Return: 0; EINVAL for NULL or @value above FIBER_SEM_VALUE_MAX.
 */
int fiber_sem_init(fiber_sem_t *sem, unsigned int value)
{
	struct fb_sem *s = FB_SYNC_OBJ(fb_sem, sem);

	if (!sem || value > FIBER_SEM_VALUE_MAX)
		return EINVAL;
	*sem = (fiber_sem_t){ { 0 } };
	fb_store_relaxed(&s->value, value);
	return 0;
}

/*
 * fiber_sem_destroy - end the life of @sem; it needs no cleanup.
 * Context: any thread.
 * Return: 0; EINVAL for NULL; EBUSY if something waits on it.
 */
int fiber_sem_destroy(fiber_sem_t *sem)
{
	struct fb_sem *s = FB_SYNC_OBJ(fb_sem, sem);
	int err = 0;

	if (!sem)
		return EINVAL;
	fb_spin_lock(&s->lock);
	if (fb_waitq_busy(&s->waiters))
		err = EBUSY;
	fb_spin_unlock(&s->lock);
	return err;
}

static int sem_wait_until(fiber_sem_t *sem, uint64_t deadline)
{
	struct fb_sem *s = FB_SYNC_OBJ(fb_sem, sem);
	struct fb_waiter w;
	unsigned int v;
	int err;

	if (!sem)
		return EINVAL;
	err = fb_cancel_point();
	if (err)
		return err;
	fb_spin_lock(&s->lock);
	v = fb_load_relaxed(&s->value);
	if (v > 0) {
		fb_store_relaxed(&s->value, v - 1);
		fb_spin_unlock(&s->lock);
		return 0;
	}
	fb_waiter_prepare(&w, FB_WAIT_SEM | FB_WAIT_CANCELLABLE, s);
	fb_list_add_tail(&w.node, &s->waiters);
	/* 0: the poster handed its unit over. */
	return fb_waiter_wait_timed(&w, &s->lock, deadline);
}

/*
 * fiber_sem_wait - take one unit of @sem, waiting for a post while there
 * is none.  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL.
 */
int fiber_sem_wait(fiber_sem_t *sem)
{
	return sem_wait_until(sem, FB_NO_DEADLINE);
}

/*
 * fiber_sem_timedwait - fiber_sem_wait() that gives up at @abstime
 * (CLOCK_MONOTONIC).  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (no unit taken); EINVAL for NULL or a bad @abstime.
 */
int fiber_sem_timedwait(fiber_sem_t *sem, const struct timespec *abstime)
{
	if (!fb_timespec_valid(abstime))
		return EINVAL;
	return sem_wait_until(sem, fb_deadline_from_timespec(abstime));
}

/*
 * fiber_sem_wait_until - fiber_sem_wait() that gives up when fiber_now()
 * reaches @deadline (CLOCK_MONOTONIC ns; FIBER_NO_DEADLINE: never).  A
 * unit that is there is taken whatever the deadline.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (no unit taken); EINVAL for NULL.
 */
int fiber_sem_wait_until(fiber_sem_t *sem, uint64_t deadline)
{
	return sem_wait_until(sem, deadline);
}

/*
 * fiber_sem_trywait - take one unit of @sem if there is one.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EAGAIN if the count is 0.
 */
int fiber_sem_trywait(fiber_sem_t *sem)
{
	struct fb_sem *s = FB_SYNC_OBJ(fb_sem, sem);
	unsigned int v;
	int err = 0;

	if (!sem)
		return EINVAL;
	if (fb_load_relaxed(&s->value) == 0)
		return EAGAIN;
	fb_spin_lock(&s->lock);
	v = fb_load_relaxed(&s->value);
	if (v > 0)
		fb_store_relaxed(&s->value, v - 1);
	else
		err = EAGAIN;
	fb_spin_unlock(&s->lock);
	return err;
}

/*
 * fiber_sem_post - give one unit to the longest waiter of @sem, or add it
 * to the count if nobody waits.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EOVERFLOW if the count is at
 * FIBER_SEM_VALUE_MAX (the count is unchanged).
 */
int fiber_sem_post(fiber_sem_t *sem)
{
	struct fb_sem *s = FB_SYNC_OBJ(fb_sem, sem);
	unsigned int v;
	int err = 0;

	if (!sem)
		return EINVAL;
	fb_spin_lock(&s->lock);
	if (!fb_waitq_wake_one(&s->waiters, 0, 0)) {
		v = fb_load_relaxed(&s->value);
		if (v < FIBER_SEM_VALUE_MAX)
			fb_store_relaxed(&s->value, v + 1);
		else
			err = EOVERFLOW;
	}
	fb_spin_unlock(&s->lock);
	return err;
}

/*
 * fiber_sem_getvalue - store the count of @sem in *@value (0 while callers
 * wait, as Linux reports it).  The count may change as soon as it is read.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL.
 */
int fiber_sem_getvalue(fiber_sem_t *sem, int *value)
{
	struct fb_sem *s = FB_SYNC_OBJ(fb_sem, sem);

	if (!sem || !value)
		return EINVAL;
	*value = (int)fb_load_relaxed(&s->value);
	return 0;
}
