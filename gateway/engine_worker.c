#include "engine_worker.h"

#include "engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gw_engw {
    sched *s;
    gw_cq *cq;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gw_gen_job *incoming, *incoming_tail; /* guarded by mu */
    int n_incoming, max_waiting, stop, cancels;  /* guarded by mu */
    atomic_int sched_waiting, sched_running;     /* as of the last step */
    int max_num_seqs;
    struct gw_gen_job *active;                   /* the engine thread's */
    gw_metric *m_running, *m_waiting, *m_blocks_used, *m_preempt, *m_gen, *m_prompt;
    gw_metric *m_cached, *m_blocks_cached, *m_waste;
    long seen_preempt, seen_gen, seen_prompt, seen_cached;
};

static void ev_fn(struct gw_cq_item *it)
{
    struct gw_gen_event *ev = gw_cq_container(it, struct gw_gen_event, item);
    ev->job->on_event(ev);
}

static struct gw_gen_event *event_new(struct gw_gen_job *job, size_t len)
{
    struct gw_gen_event *ev = calloc(1, sizeof *ev + len + 1);
    if (ev) {
        ev->item.fn = ev_fn;
        ev->job = job;
    }
    return ev;
}

/* scheduler callbacks, on the engine thread */
static void on_text(void *ud, const char *text, size_t len)
{
    struct gw_gen_job *job = ud;
    struct gw_gen_event *ev = event_new(job, len);
    if (!ev)
        return; /* this piece is lost; the done event still comes */
    ev->len = len;
    memcpy(ev->text, text, len);
    gw_cq_post(job->w->cq, &ev->item);
}

static void on_logprobs(void *ud, const struct eng_token_lp *lp, int n)
{
    struct gw_gen_job *job = ud;
    const size_t bytes = sizeof *lp * (size_t)n;
    struct gw_gen_event *ev = event_new(job, bytes + _Alignof(struct eng_token_lp));
    if (!ev)
        return; /* these records are lost; the text and the done event still come */
    uintptr_t at = ((uintptr_t)ev->text + _Alignof(struct eng_token_lp) - 1) &
                   ~(uintptr_t)(_Alignof(struct eng_token_lp) - 1);
    memcpy((void *)at, lp, bytes);
    ev->lp = (const struct eng_token_lp *)at;
    ev->n_lp = n;
    gw_cq_post(job->w->cq, &ev->item);
}

static void on_done(void *ud, int err, enum eng_finish finish, int prompt, int completion,
                    int cached)
{
    struct gw_gen_job *job = ud;
    gw_engw *w = job->w;
    /* unlink from the active list */
    for (struct gw_gen_job **pp = &w->active; *pp; pp = &(*pp)->next)
        if (*pp == job) {
            *pp = job->next;
            break;
        }
    job->seq = NULL;
    struct gw_gen_event *ev = job->done_ev;
    job->done_ev = NULL;
    ev->done = 1;
    ev->err = err;
    ev->finish = finish;
    ev->prompt_tokens = prompt;
    ev->completion_tokens = completion;
    ev->cached_tokens = cached;
    gw_cq_post(w->cq, &ev->item);
}

static void update_metrics(gw_engw *w)
{
    if (!w->m_running)
        return;
    struct sched_stats st;
    sched_get_stats(w->s, &st);
    gw_metric_set(w->m_running, st.running);
    gw_metric_set(w->m_waiting, st.waiting);
    /* blocks held by sequences; the prefix cache's are in cachegate_engine_kv_blocks */
    gw_metric_set(w->m_blocks_used, st.blocks_total - st.blocks_free - st.blocks_evictable);
    gw_metric_add(w->m_preempt, (double)(st.preemptions - w->seen_preempt));
    gw_metric_add(w->m_gen, (double)(st.tokens_generated - w->seen_gen));
    gw_metric_add(w->m_prompt, (double)(st.tokens_prompt - w->seen_prompt));
    gw_metric_add(w->m_cached, (double)(st.tokens_cached - w->seen_cached));
    gw_metric_set(w->m_waste, st.waste_slots);
    gw_metric_set(w->m_blocks_cached, st.blocks_cached, "cached");
    gw_metric_set(w->m_blocks_cached, st.blocks_evictable, "evictable");
    gw_metric_set(w->m_blocks_cached, st.blocks_free, "free");
    w->seen_cached = st.tokens_cached;
    w->seen_preempt = st.preemptions;
    w->seen_gen = st.tokens_generated;
    w->seen_prompt = st.tokens_prompt;
}

static void *run(void *arg)
{
    gw_engw *w = arg;
    int busy = 0;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->stop && !w->incoming && !w->cancels && !busy)
            pthread_cond_wait(&w->cv, &w->mu);
        int stop = w->stop;
        struct gw_gen_job *in = w->incoming;
        w->incoming = w->incoming_tail = NULL;
        /* the jobs taken wait in the scheduler from now on: counted there until the step
         * below says how many it runs, so that submit's limit holds during that step */
        atomic_fetch_add(&w->sched_waiting, w->n_incoming);
        w->n_incoming = 0;
        w->cancels = 0;
        pthread_mutex_unlock(&w->mu);
        if (stop)
            break;
        for (struct gw_gen_job *j = in, *nx; j; j = nx) {
            nx = j->next;
            int rc =
                sched_submit(w->s, (uint64_t)j->ns, j->prompt, j->n_prompt, &j->params, j, &j->seq);
            if (rc) {
                j->next = NULL;
                on_done(j, rc, ENG_FINISH_STOP, j->n_prompt, 0, 0);
                continue;
            }
            sched_set_party(j->seq, (uint64_t)j->party);
            j->next = w->active;
            w->active = j;
        }
        for (struct gw_gen_job *j = w->active; j; j = j->next)
            if (atomic_load(&j->cancel) && j->seq)
                sched_cancel(w->s, j->seq);
        int rc = sched_step(w->s);
        busy = rc > 0;
        struct sched_stats st;
        sched_get_stats(w->s, &st);
        atomic_store(&w->sched_waiting, st.waiting);
        atomic_store(&w->sched_running, st.running);
        update_metrics(w);
    }
    /* stopping: every job still queued or running ends as cancelled */
    pthread_mutex_lock(&w->mu);
    struct gw_gen_job *in = w->incoming;
    w->incoming = NULL;
    pthread_mutex_unlock(&w->mu);
    for (struct gw_gen_job *j = in, *nx; j; j = nx) {
        nx = j->next;
        on_done(j, 0, ENG_FINISH_CANCELLED, j->n_prompt, 0, 0);
    }
    sched_destroy(w->s); /* reports the rest through on_done */
    w->s = NULL;
    return NULL;
}

gw_engw *gw_engw_create(eng_model *m, const tok_vocab *v, const struct sched_config *cfg,
                        int max_waiting, gw_cq *cq, gw_metrics *metrics, char *err,
                        size_t errlen)
{
    gw_engw *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->cq = cq;
    w->max_waiting = max_waiting;
    w->max_num_seqs = cfg->max_num_seqs;
    static const struct sched_events events = {on_text, on_logprobs, on_done};
    int rc = sched_create(m, v, cfg, &events, &w->s);
    if (rc) {
        snprintf(err, errlen, "creating the scheduler: %s", eng_strerror(rc));
        free(w);
        return NULL;
    }
    if (metrics) {
        w->m_running = gw_metrics_gauge(metrics, "cachegate_engine_running_requests",
                                        "Sequences in the engine's running batch.", NULL);
        w->m_waiting = gw_metrics_gauge(metrics, "cachegate_engine_waiting_requests",
                                        "Sequences waiting for the engine.", NULL);
        w->m_blocks_used = gw_metrics_gauge(metrics, "cachegate_engine_kv_blocks_used",
                                            "KV blocks held by running sequences (shared cached blocks included).", NULL);
        w->m_preempt = gw_metrics_counter(metrics, "cachegate_engine_preemptions_total",
                                          "Sequences preempted for want of KV blocks.", NULL);
        w->m_gen = gw_metrics_counter(metrics, "cachegate_engine_generated_tokens_total",
                                      "Tokens generated by the engine.", NULL);
        w->m_prompt = gw_metrics_counter(metrics, "cachegate_engine_prompt_tokens_total",
                                         "Prompt tokens submitted to the engine.", NULL);
        w->m_cached = gw_metrics_counter(metrics, "cachegate_engine_prefix_cache_hit_tokens_total",
                                         "Prompt tokens served from the prefix cache.", NULL);
        w->m_blocks_cached = gw_metrics_gauge(metrics, "cachegate_engine_kv_blocks",
                                              "KV blocks: held by the prefix cache (cached), "
                                              "of those unused (evictable), and free.",
                                              "state");
        w->m_waste = gw_metrics_gauge(metrics, "cachegate_engine_kv_waste_slots",
                                      "Token slots allocated to running sequences but not yet "
                                      "holding a position (under one block per sequence).",
                                      NULL);
        if (!w->m_running || !w->m_waiting || !w->m_blocks_used || !w->m_preempt || !w->m_gen ||
            !w->m_prompt || !w->m_cached || !w->m_blocks_cached || !w->m_waste)
            w->m_running = NULL;
        else /* every series from the start, not from the first request: dashboards and
              * rate() see the pool's blocks and zeros rather than no data */
            update_metrics(w);
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        snprintf(err, errlen, "cannot start the engine thread");
        sched_destroy(w->s);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

void gw_engw_destroy(gw_engw *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int gw_engw_submit(gw_engw *w, struct gw_gen_job *job)
{
    job->w = w;
    job->next = NULL;
    job->seq = NULL;
    pthread_mutex_lock(&w->mu);
    /* the jobs not yet picked up count as waiting unless the running batch can take them */
    if (w->n_incoming + atomic_load(&w->sched_waiting) + atomic_load(&w->sched_running) >=
        w->max_num_seqs + w->max_waiting) {
        pthread_mutex_unlock(&w->mu);
        return ENG_EFULL;
    }
    if (!(job->done_ev = event_new(job, 0))) {
        pthread_mutex_unlock(&w->mu);
        return ENG_ENOMEM;
    }
    if (w->incoming_tail)
        w->incoming_tail->next = job;
    else
        w->incoming = job;
    w->incoming_tail = job;
    w->n_incoming++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void gw_engw_cancel(gw_engw *w, struct gw_gen_job *job)
{
    atomic_store(&job->cancel, 1);
    pthread_mutex_lock(&w->mu);
    w->cancels = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}
