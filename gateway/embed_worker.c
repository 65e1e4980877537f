#include "embed_worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gw_embedw {
    emb_model *model;
    gw_cq *cq;
    int max_batch, dim;
    int64_t max_wait_us;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gw_embed_job *head, *tail; /* in submission order */
    int waiting;                      /* texts queued and not yet taken */
    int stop;
    gw_metric *m_batch, *m_texts, *m_seconds;
    /* the worker thread's scratch */
    const char **texts;
    size_t *lens;
    unsigned char *ends, *cut;
    float *out;
    int *ntok;
    struct gw_embed_job **group; /* [max_batch]: ready jobs handed to their post together */
    /* states kept for jobs with kept set (nlayers 0: none asked for); its buffers made on the
     * first pass that wants them */
    struct emb_keep keep;
    int keep_layers[8];
};

/* A slice of a job in the current pass. */
struct slice {
    struct gw_embed_job *job;
    int first, count;
};

/* Called and returns with w->mu held; drops it while post hooks run. */
static void finish_ready(gw_embedw *w)
{
    /* a job is done when all its texts are, whatever was queued before it: a question's
     * one text does not wait for a large import's last pass */
    struct gw_embed_job *ready = NULL, **tail = &ready, *prev = NULL;
    for (struct gw_embed_job *j = w->head, *next; j; j = next) {
        next = j->next;
        if (j->done != j->n) {
            prev = j;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            w->head = next;
        if (w->tail == j)
            w->tail = prev;
        j->next = NULL;
        *tail = j;
        tail = &j->next;
    }
    if (!ready)
        return;
    pthread_mutex_unlock(&w->mu);
    /* the ready jobs that share the first one's post, at most max_batch, go to it together;
     * then the others (a job may be freed once posted: unlinked before) */
    while (ready) {
        void (*post)(struct gw_embed_job **, int) = ready->post;
        int n = 0;
        for (struct gw_embed_job **at = &ready; *at && n < w->max_batch;) {
            struct gw_embed_job *j = *at;
            if (j->post != post) {
                at = &j->next;
                continue;
            }
            *at = j->next;
            w->group[n++] = j;
        }
        if (post)
            post(w->group, n);
        for (int i = 0; i < n; i++)
            gw_cq_post(w->cq, &w->group[i]->item);
    }
    pthread_mutex_lock(&w->mu);
}

/* The keep buffers, made on first use; 0 when they cannot be. */
static int keep_buffers(gw_embedw *w)
{
    struct emb_keep *k = &w->keep;
    if (!k->states) {
        k->states = malloc(sizeof(float) * (size_t)k->nlayers * (size_t)k->cap * w->dim);
        k->ids = malloc(sizeof *k->ids * (size_t)k->cap);
        k->off = malloc(sizeof *k->off * ((size_t)w->max_batch + 1));
        if (!k->states || !k->ids || !k->off) {
            free(k->states);
            free(k->ids);
            free(k->off);
            k->states = NULL;
            k->ids = NULL;
            k->off = NULL;
            return 0;
        }
    }
    return 1;
}

static void *run(void *arg)
{
    gw_embedw *w = arg;
    struct slice *sl = malloc(sizeof *sl * (size_t)w->max_batch);
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        if (w->waiting == 0) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        if (w->waiting < w->max_batch && w->max_wait_us > 0) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += w->max_wait_us / 1000000;
            dl.tv_nsec += (w->max_wait_us % 1000000) * 1000;
            if (dl.tv_nsec >= 1000000000) {
                dl.tv_sec++;
                dl.tv_nsec -= 1000000000;
            }
            while (!w->stop && w->waiting < w->max_batch &&
                   pthread_cond_timedwait(&w->cv, &w->mu, &dl) != ETIMEDOUT)
                ;
            if (w->stop)
                break;
        }
        /* take up to max_batch texts: first the jobs whose texts all fit, oldest first (a
         * question's one text goes into the next pass beside a large import or batch,
         * instead of after all of it), then pieces of the others, oldest first; a quarter
         * of the pass is kept for the oldest that does not fit, so that a stream of small
         * ones does not hold it back for ever */
        int n = 0, ns = 0, keep = 0;
        for (struct gw_embed_job *j = w->head; j; j = j->next)
            if (j->n - j->taken > w->max_batch) {
                keep = w->max_batch / 4 > 0 ? w->max_batch / 4 : 1;
                break;
            }
        for (int whole = 1; whole >= 0; whole--)
            for (struct gw_embed_job *j = w->head; j && n < w->max_batch; j = j->next) {
                int take = j->n - j->taken;
                if (take <= 0 || (whole && take > w->max_batch - keep - n))
                    continue;
                if (take > w->max_batch - n)
                    take = w->max_batch - n;
                sl[ns++] = (struct slice){j, j->taken, take};
                for (int i = 0; i < take; i++) {
                    w->texts[n + i] = j->texts[j->taken + i];
                    w->lens[n + i] = j->lens[j->taken + i];
                    w->ends[n + i] = (unsigned char)j->ends;
                }
                j->taken += take;
                n += take;
            }
        w->waiting -= n;
        pthread_mutex_unlock(&w->mu);

        struct emb_keep *states = NULL; /* for jobs with kept */
        for (int s = 0; w->keep.nlayers && s < ns && !states; s++)
            if (sl[s].job->kept && keep_buffers(w))
                states = &w->keep;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = sl ? emb_encode_keep(w->model, w->texts, w->lens, w->ends, n, w->out, w->ntok,
                                      w->cut, states)
                    : EMB_ENOMEM;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        for (int s = 0, k = 0; !rc && states && states->kept && s < ns; k += sl[s++].count)
            for (int i = 0; sl[s].job->kept && i < sl[s].count; i++)
                sl[s].job->kept(sl[s].job, sl[s].first + i, states, k + i);
        if (w->m_batch) {
            gw_metric_observe(w->m_batch, n);
            gw_metric_add(w->m_texts, n);
            gw_metric_observe(w->m_seconds,
                              (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
        }
        int k = 0;
        for (int s = 0; s < ns; s++) {
            struct gw_embed_job *j = sl[s].job;
            if (rc)
                j->rc = rc;
            else {
                memcpy(j->out + (size_t)sl[s].first * w->dim, w->out + (size_t)k * w->dim,
                       sizeof(float) * (size_t)sl[s].count * w->dim);
                memcpy(j->ntokens + sl[s].first, w->ntok + k, sizeof(int) * (size_t)sl[s].count);
                if (j->cut)
                    memcpy(j->cut + sl[s].first, w->cut + k, (size_t)sl[s].count);
            }
            k += sl[s].count;
        }
        pthread_mutex_lock(&w->mu);
        for (int s = 0; s < ns; s++)
            sl[s].job->done += sl[s].count;
        finish_ready(w);
    }
    /* stopping: fail what is left */
    for (struct gw_embed_job *j = w->head; j; j = j->next) {
        j->rc = j->rc ? j->rc : EMB_EINVAL;
        j->taken = j->done = j->n;
    }
    finish_ready(w);
    pthread_mutex_unlock(&w->mu);
    free(sl);
    return NULL;
}

gw_embedw *gw_embedw_create(emb_model *model, gw_cq *cq, int max_batch, int64_t max_wait_us,
                            gw_metrics *metrics)
{
    gw_embedw *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->model = model;
    w->cq = cq;
    w->max_batch = max_batch;
    w->max_wait_us = max_wait_us;
    w->dim = emb_dim(model);
    w->texts = malloc(sizeof *w->texts * (size_t)max_batch);
    w->lens = malloc(sizeof *w->lens * (size_t)max_batch);
    w->ends = malloc((size_t)max_batch);
    w->cut = malloc((size_t)max_batch);
    w->out = malloc(sizeof *w->out * (size_t)max_batch * (size_t)w->dim);
    w->ntok = malloc(sizeof *w->ntok * (size_t)max_batch);
    w->group = malloc(sizeof *w->group * (size_t)max_batch);
    if (metrics) {
        static const double sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
        static const double secs[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,   0.25,   0.5,   1,    2.5,   5};
        w->m_batch = gw_metrics_histogram(metrics, "cachegate_embed_batch_size",
                                          "Texts per embedder forward pass.", NULL, sizes, 10);
        w->m_texts = gw_metrics_counter(metrics, "cachegate_embed_texts_total",
                                        "Texts embedded.", NULL);
        w->m_seconds = gw_metrics_histogram(metrics, "cachegate_embed_pass_seconds",
                                            "Duration of one embedder forward pass.", NULL, secs,
                                            12);
        if (!w->m_batch || !w->m_texts || !w->m_seconds)
            w->m_batch = NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (!w->texts || !w->lens || !w->ends || !w->cut || !w->out || !w->ntok || !w->group ||
        pthread_create(&w->thread, NULL, run, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w->texts);
        free(w->lens);
        free(w->ends);
        free(w->cut);
        free(w->out);
        free(w->ntok);
        free(w->group);
        free(w);
        return NULL;
    }
    return w;
}

void gw_embedw_submit(gw_embedw *w, struct gw_embed_job *job)
{
    job->next = NULL;
    job->taken = job->done = 0;
    job->rc = 0;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    w->waiting += job->n;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void gw_embedw_destroy(gw_embedw *w)
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
    free(w->texts);
    free(w->lens);
    free(w->ends);
    free(w->cut);
    free(w->out);
    free(w->ntok);
    free(w->group);
    free(w->keep.states);
    free(w->keep.ids);
    free(w->keep.off);
    free(w);
}

int gw_embedw_keep_states(gw_embedw *w, int nlayers, const int *layers, int cap)
{
    const int most = (int)(sizeof w->keep_layers / sizeof *w->keep_layers);
    int last = 0;
    for (int i = 0; i < nlayers && i < most; i++)
        last |= layers[i] == emb_layers(w->model);
    if (nlayers <= 0 || nlayers > most || cap <= 0 || !last)
        return EMB_EINVAL; /* a pass that keeps states pools the last layer's */
    pthread_mutex_lock(&w->mu);
    memcpy(w->keep_layers, layers, sizeof *layers * (size_t)nlayers);
    w->keep.layers = w->keep_layers;
    w->keep.cap = cap;
    w->keep.nlayers = nlayers;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

emb_model *gw_embedw_model(gw_embedw *w)
{
    return w->model;
}
