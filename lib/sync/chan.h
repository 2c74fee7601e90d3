/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sync/chan.h - the channel as the files of sync/ that need its inside
 * see it: sync/chan.c, which owns it (its opening comment argues the
 * protocol), and sync/select.c, which waits on several channels at once.
 */
#ifndef FB_SYNC_CHAN_H
#define FB_SYNC_CHAN_H

#include "sync/sync.h"

struct fb_chan {
	struct fb_spinlock lock;  /* guards everything but the constants */
	bool closed;		  /* @lock */
	size_t elem_size;	  /* bytes per element; constant */
	size_t capacity;	  /* ring slots, 0 = synchronous; constant */
	size_t head;		  /* slot of the oldest element; @lock */
	size_t count;		  /* elements in the ring; @lock */
	struct fb_list senders;	  /* w.data = const element; @lock */
	struct fb_list receivers; /* w.data = buffer; @lock */
	unsigned char ring[];	  /* capacity * elem_size bytes */
};

/*
 * fb_chan_send_locked - send the element at @elem without waiting: hand
 * it to the first receiver that waits, or put it in the ring.
 * Context: @ch->lock held; never switches.
 * Return: 0; EPIPE if @ch is closed; EAGAIN if the caller would have to
 * wait (nothing sent).
 */
int fb_chan_send_locked(struct fb_chan *ch, const void *elem);
/*
 * fb_chan_recv_locked - receive into @elem without waiting: the oldest
 * element of the ring (refilled from the first waiting sender), or that
 * sender's element when there is no ring.
 * Context: @ch->lock held; never switches.
 * Return: 0; EPIPE if @ch is closed and drained; EAGAIN if the caller
 * would have to wait (@elem untouched).
 */
int fb_chan_recv_locked(struct fb_chan *ch, void *elem);

#endif /* FB_SYNC_CHAN_H */
