/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/list.h - intrusive circular doubly-linked lists, in the kernel's style.
 *
 * A list head is a node whose next/prev point to itself when empty.  Nothing
 * here locks: the structure that embeds the head says which lock protects it.
 */
#ifndef FB_LIST_H
#define FB_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct fb_list {
	struct fb_list *next, *prev;
};

#define FB_LIST_INIT(name)                                                     \
	{                                                                      \
		&(name), &(name)                                               \
	}

static inline void fb_list_init(struct fb_list *h)
{
	h->next = h;
	h->prev = h;
}

/* A zeroed head counts as empty, so that all-zero objects are valid. */
static inline bool fb_list_empty(const struct fb_list *h)
{
	return h->next == h || h->next == NULL;
}

/* fb_list_empty_init - fb_list_empty() of a head that fb_list_init()
 * made (never a zeroed one): one compare. */
static inline bool fb_list_empty_init(const struct fb_list *h)
{
	return h->next == h;
}

static inline void fb_list_lazy_init(struct fb_list *h)
{
	if (h->next == NULL)
		fb_list_init(h);
}

static inline void fb_list_insert(struct fb_list *n, struct fb_list *prev,
				  struct fb_list *next)
{
	n->next = next;
	n->prev = prev;
	prev->next = n;
	next->prev = n;
}

static inline void fb_list_add_tail(struct fb_list *n, struct fb_list *h)
{
	fb_list_lazy_init(h);
	fb_list_insert(n, h->prev, h);
}

/* fb_list_add_tail_init - fb_list_add_tail() to a head that
 * fb_list_init() made (never a zeroed one). */
static inline void fb_list_add_tail_init(struct fb_list *n, struct fb_list *h)
{
	fb_list_insert(n, h->prev, h);
}

static inline void fb_list_add_head(struct fb_list *n, struct fb_list *h)
{
	fb_list_lazy_init(h);
	fb_list_insert(n, h, h->next);
}

static inline void fb_list_del(struct fb_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n;
	n->prev = n;
}

/* fb_list_pop - unlink and return the first node, NULL if empty. */
static inline struct fb_list *fb_list_pop(struct fb_list *h)
{
	struct fb_list *n;

	if (fb_list_empty(h))
		return NULL;
	n = h->next;
	fb_list_del(n);
	return n;
}

#define fb_list_entry(ptr, type, member) fb_container_of(ptr, type, member)
#define fb_list_for_each(pos, head)                                            \
	for (pos = (head)->next; pos != (head) && pos; pos = pos->next)
#define fb_list_for_each_safe(pos, tmp, head)                                  \
	for (pos = (head)->next, tmp = pos ? pos->next : NULL;                 \
	     pos != (head) && pos; pos = tmp, tmp = pos->next)

#endif /* FB_LIST_H */
