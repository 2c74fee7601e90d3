/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* api/offload.h - the offload pool's hooks for the runtime (api/offload.c). */
#ifndef FB_API_OFFLOAD_H
#define FB_API_OFFLOAD_H

#include <stdbool.h>

/* 64 threads.  Picked: enough for a server's name lookups and file calls
 * to overlap, few enough that a burst cannot make hundreds of threads. */
#define FB_OFFLOAD_THREADS_DEFAULT 64

/* fb_offload_configure - bound the pool at @max_threads helpers (threads
 * already above it exit when idle).  Context: fiber_init(). */
void fb_offload_configure(unsigned int max_threads);
/* fb_offload_atfork - the pool's part of the fork handlers (FB_ATFORK_*).
 * Context: api/runtime.c's pthread_atfork handlers. */
void fb_offload_atfork(int phase);
/* fb_offload_in_helper - is the calling thread an offload helper?  Then
 * it runs a job that fiber_shutdown() waits for.  Context: any thread. */
bool fb_offload_in_helper(void);

#endif
