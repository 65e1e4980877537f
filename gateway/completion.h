/*
 * completion — how worker threads hand results to the event-loop thread.
 *
 * Only the event-loop thread may touch libevent objects (requests, connections,
 * buffers). A worker that finishes something embeds a struct gw_cq_item in its result,
 * posts it here from any thread, and the item's function later runs on the event-loop
 * thread, in posting order. Posting never allocates and never fails, so no result is
 * lost. The queue is a mutex-protected list plus one event made active with
 * event_active(); libevent must run with evthread_use_pthreads() so that activating
 * from another thread wakes the loop.
 *
 * Ownership: the queue borrows each item from its post until its function is called;
 * the function then owns it (usually it frees the enclosing result).
 */
#ifndef GW_COMPLETION_H
#define GW_COMPLETION_H

#include <stddef.h>

struct event_base;

typedef struct gw_cq gw_cq;
struct gw_cq_item;
typedef void (*gw_cq_fn)(struct gw_cq_item *item);

struct gw_cq_item {
    struct gw_cq_item *next; /* owned by the queue while posted */
    gw_cq_fn fn;
};

/* The enclosing struct of an embedded item. */
#define gw_cq_container(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Event-loop thread. Returns NULL when out of memory. */
gw_cq *gw_cq_create(struct event_base *base);

/* Event-loop thread, after every worker that may post has stopped. Items still queued
 * are delivered (their functions run) before the queue is freed. Accepts NULL. */
void gw_cq_destroy(gw_cq *cq);

/* Any thread. item->fn must be set; item must stay valid until fn runs. */
void gw_cq_post(gw_cq *cq, struct gw_cq_item *item);

#endif
