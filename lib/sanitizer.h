/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sanitizer.h - telling AddressSanitizer about stack switches.  ASan keeps
 * a notion of "the current stack"; without these calls it takes a switch
 * for a huge stack overflow and reports nonsense.  Compiled to nothing
 * unless the library is built with -Db_sanitize=address.
 */
#ifndef FB_SANITIZER_H
#define FB_SANITIZER_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define FB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FB_ASAN 1
#endif
#endif

#ifdef FB_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>

/* A reused stack still carries the poisoned redzones of its last user's
 * frames: clear them before a new fiber runs on it. */
static inline void fb_san_unpoison(void *addr, size_t size)
{
	ASAN_UNPOISON_MEMORY_REGION(addr, size);
}

/* Before a switch to the stack [bottom, bottom + size).  @fake is where
 * the leaving context keeps its fake-stack handle; NULL when it is leaving
 * for good (a dead fiber), so that ASan frees it. */
static inline void fb_san_start_switch(void **fake, const void *bottom,
				       size_t size)
{
	__sanitizer_start_switch_fiber(fake, bottom, size);
}

/* First thing after a switch, in the context that resumed. */
static inline void fb_san_finish_switch(void *fake)
{
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
}
#else
static inline void fb_san_unpoison(void *addr, size_t size)
{
	(void)addr;
	(void)size;
}

static inline void fb_san_start_switch(void **fake, const void *bottom,
				       size_t size)
{
	(void)fake;
	(void)bottom;
	(void)size;
}

static inline void fb_san_finish_switch(void *fake)
{
	(void)fake;
}
#endif

#endif /* FB_SANITIZER_H */
