/*
 * embed_worker — the embedder's micro-batching thread.
 *
 * Jobs (each one or more texts) queue up from the event loop. The worker takes every
 * text waiting, up to max_batch, after waiting at most max_wait_us for more when fewer
 * are queued, and embeds them in one forward pass; a job larger than max_batch spans
 * several passes. Each pass takes first the jobs that fit in it whole, oldest first, then
 * pieces of the others: a one-text question is in the next pass beside a large import,
 * not after it. A finished job is handed back through the completion queue as soon as its
 * texts are done (whatever was queued before it), so its callback runs on the event-loop
 * thread. The model is used by this thread only.
 */
#ifndef GW_EMBED_WORKER_H
#define GW_EMBED_WORKER_H

#include "completion.h"
#include "embedder.h"
#include "metrics.h"

#include <stddef.h>
#include <stdint.h>

struct gw_embed_job {
    struct gw_cq_item item; /* item.fn: runs on the event loop when the job is done */
    int n;
    const char *const *texts; /* [n], borrowed until item.fn runs */
    const size_t *lens;       /* [n] */
    int ends;                 /* texts too long keep their end too (emb_encode_ends()) */
    float *out;               /* [n][dim], written by the worker */
    int *ntokens;             /* [n], written by the worker */
    unsigned char *cut;       /* optional [n], written by the worker: 1 where a text (not
                               * ends) was too long and only its beginning is embedded */
    int rc;                   /* EMB_OK, or why the job failed */
    /* optional: runs on the worker thread once the job is embedded (rc set), before
     * item.fn; for work that belongs off the event loop, such as a vector search. The jobs
     * done after the same pass that share post are handed to it in one call (jobs[0..n), n
     * at most max_batch, in submission order), so that it can batch their own work too. */
    void (*post)(struct gw_embed_job **jobs, int n);
    /* optional: runs on the worker thread for each of the job's texts (i) right after the
     * pass that embedded it, when that pass kept its tokens' states
     * (gw_embedw_keep_states()): the text is the pass's text at, its tokens
     * keep->off[at]..keep->off[at + 1]; keep is the worker's until the call returns */
    void (*kept)(struct gw_embed_job *job, int i, const struct emb_keep *keep, int at);
    /* owned by the worker while queued */
    struct gw_embed_job *next;
    int taken, done;
};

typedef struct gw_embedw gw_embedw;

/* model and cq are borrowed; metrics may be NULL. Returns NULL on failure. */
gw_embedw *gw_embedw_create(emb_model *model, gw_cq *cq, int max_batch, int64_t max_wait_us,
                            gw_metrics *metrics);

/* The model the worker runs: only the worker's thread may use it (a job's post may). */
emb_model *gw_embedw_model(gw_embedw *w);

/* Has the passes that embed a job with kept set keep every token's hidden state after
 * layers[0..nlayers) (emb_encode_keep(); the last layer among them), when the pass has at
 * most cap tokens and the backend can (the CPU's); the buffers (about nlayers * cap *
 * emb_dim() floats) are made on the first such pass. Call before submitting such a job.
 * 0, or EMB_EINVAL (the last layer not among them, or more than 8). */
int gw_embedw_keep_states(gw_embedw *w, int nlayers, const int *layers, int cap);

/* Event-loop thread. The job must stay valid until its item.fn runs. */
void gw_embedw_submit(gw_embedw *w, struct gw_embed_job *job);

/* Stops the thread after the pass in progress; jobs still queued complete with
 * EMB_EINVAL. Accepts NULL. */
void gw_embedw_destroy(gw_embedw *w);

#endif
