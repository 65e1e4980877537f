/* tests gateway/completion.c: items posted from several threads under load all run on
 * the event-loop thread, exactly once each, in each thread's posting order. */
#include "completion.h"

#include <criterion/criterion.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdlib.h>

#define THREADS 8
#define PER_THREAD 20000

struct result {
    struct gw_cq_item item;
    int thread, seq;
};

static int seen[THREADS][PER_THREAD];
static int last_seq[THREADS];
static int order_errors;
static long delivered;
static pthread_t loop_thread;
static int wrong_thread;
static struct event_base *base;

static void on_result(struct gw_cq_item *it)
{
    struct result *r = gw_cq_container(it, struct result, item);
    if (!pthread_equal(pthread_self(), loop_thread))
        wrong_thread++;
    seen[r->thread][r->seq]++;
    if (r->seq != last_seq[r->thread] + 1)
        order_errors++;
    last_seq[r->thread] = r->seq;
    if (++delivered == (long)THREADS * PER_THREAD)
        event_base_loopbreak(base);
    free(r);
}

struct producer {
    gw_cq *cq;
    int id;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        struct result *r = malloc(sizeof *r);
        r->item.fn = on_result;
        r->thread = p->id;
        r->seq = i;
        gw_cq_post(p->cq, &r->item);
        if (i % 1000 == 0)
            sched_yield();
    }
    return NULL;
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    event_base_loopbreak(base);
}

Test(completion, nothing_lost_or_duplicated, .timeout = 60)
{
    cr_assert_eq(evthread_use_pthreads(), 0);
    base = event_base_new();
    gw_cq *cq = gw_cq_create(base);
    cr_assert_not_null(cq);
    loop_thread = pthread_self();
    for (int t = 0; t < THREADS; t++)
        last_seq[t] = -1;

    struct event *timeout = evtimer_new(base, on_timeout, NULL);
    struct timeval tv = {30, 0};
    evtimer_add(timeout, &tv);

    pthread_t th[THREADS];
    struct producer ps[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ps[t] = (struct producer){cq, t};
        pthread_create(&th[t], NULL, produce, &ps[t]);
    }
    event_base_dispatch(base);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    cr_assert_eq(delivered, (long)THREADS * PER_THREAD, "delivered %ld of %ld", delivered,
                 (long)THREADS * PER_THREAD);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < PER_THREAD; i++)
            cr_assert_eq(seen[t][i], 1, "thread %d item %d seen %d times", t, i, seen[t][i]);
    cr_assert_eq(order_errors, 0);
    cr_assert_eq(wrong_thread, 0, "callbacks must run on the loop thread");
    event_free(timeout);
    gw_cq_destroy(cq);
    event_base_free(base);
}

static int destroyed_runs;
static void count_run(struct gw_cq_item *it)
{
    destroyed_runs++;
    free(it);
}

Test(completion, destroy_delivers_pending_items)
{
    cr_assert_eq(evthread_use_pthreads(), 0);
    struct event_base *b = event_base_new();
    gw_cq *cq = gw_cq_create(b);
    for (int i = 0; i < 5; i++) {
        struct gw_cq_item *it = malloc(sizeof *it);
        it->fn = count_run;
        gw_cq_post(cq, it);
    }
    gw_cq_destroy(cq); /* the loop never ran: destroy must still hand every item over */
    cr_assert_eq(destroyed_runs, 5);
    event_base_free(b);
}
