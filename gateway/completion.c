#include "completion.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>

struct gw_cq {
    pthread_mutex_t mu;
    struct gw_cq_item *head, *tail; /* FIFO */
    struct event *ev;
};

static void drain(gw_cq *cq)
{
    pthread_mutex_lock(&cq->mu);
    struct gw_cq_item *it = cq->head;
    cq->head = cq->tail = NULL;
    pthread_mutex_unlock(&cq->mu);
    while (it) {
        struct gw_cq_item *next = it->next;
        it->next = NULL;
        it->fn(it); /* may free it */
        it = next;
    }
}

static void on_active(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    drain(arg);
}

gw_cq *gw_cq_create(struct event_base *base)
{
    gw_cq *cq = calloc(1, sizeof *cq);
    if (!cq)
        return NULL;
    pthread_mutex_init(&cq->mu, NULL);
    cq->ev = event_new(base, -1, 0, on_active, cq);
    if (!cq->ev) {
        pthread_mutex_destroy(&cq->mu);
        free(cq);
        return NULL;
    }
    return cq;
}

void gw_cq_destroy(gw_cq *cq)
{
    if (!cq)
        return;
    drain(cq);
    event_free(cq->ev);
    pthread_mutex_destroy(&cq->mu);
    free(cq);
}

void gw_cq_post(gw_cq *cq, struct gw_cq_item *item)
{
    item->next = NULL;
    pthread_mutex_lock(&cq->mu);
    int was_empty = cq->head == NULL;
    if (cq->tail)
        cq->tail->next = item;
    else
        cq->head = item;
    cq->tail = item;
    pthread_mutex_unlock(&cq->mu);
    /* One activation per non-empty transition is enough: the callback drains all. An
     * activation racing with a drain at worst runs an empty drain. */
    if (was_empty)
        event_active(cq->ev, EV_READ, 1);
}
