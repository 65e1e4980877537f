/* tests gateway/embed_worker.c: jobs larger than max_batch span several passes, one-text
 * jobs queued after a large one complete before it (on the loop thread, in their order),
 * and every vector equals the one emb_encode gives for the text alone. Needs
 * models/all-minilm-l6-v2 (make deps). */
#include "completion.h"
#include "embed_worker.h"

#include <criterion/criterion.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *texts[] = {
    "one", "two words", "three little words", "What is the capital of France?", "café crème",
    "東京", "emoji 😀", "x", "a longer sentence about caches and gateways", "ten", "eleven",
    "twelve",
};
#define NT (int)(sizeof texts / sizeof texts[0])

struct job {
    struct gw_embed_job ej;
    int order;
};

static int finished[8], nfinished;
static struct event_base *base;

static void on_done(struct gw_cq_item *it)
{
    struct gw_embed_job *ej = gw_cq_container(it, struct gw_embed_job, item);
    struct job *j = gw_cq_container(ej, struct job, ej);
    finished[nfinished++] = j->order;
    if (nfinished == 4)
        event_base_loopbreak(base);
}

static void on_guard(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    event_base_loopbreak(base);
}

Test(embed_worker, batches_span_passes_and_match_direct_encoding, .timeout = 120)
{
    cr_assert_eq(evthread_use_pthreads(), 0);
    char err[512];
    emb_model *m;
    cr_assert_eq(emb_model_load("models/all-minilm-l6-v2", NULL, &m, err, sizeof err), 0, "%s",
                 err);
    int dim = emb_dim(m);
    base = event_base_new();
    gw_cq *cq = gw_cq_create(base);
    gw_metrics *reg = gw_metrics_create();
    gw_embedw *w = gw_embedw_create(m, cq, 4, 0, reg);
    cr_assert_not_null(w);

    size_t lens[NT];
    for (int i = 0; i < NT; i++)
        lens[i] = strlen(texts[i]);
    /* job 0: 9 texts (three passes of at most 4); jobs 1-3: one text each */
    int sizes[4] = {9, 1, 1, 1}, first[4] = {0, 9, 10, 11};
    struct job jobs[4];
    float *out = calloc((size_t)NT * dim, sizeof(float));
    int ntok[NT];
    for (int k = 0; k < 4; k++) {
        memset(&jobs[k], 0, sizeof jobs[k]);
        jobs[k].order = k;
        jobs[k].ej.item.fn = on_done;
        jobs[k].ej.n = sizes[k];
        jobs[k].ej.texts = texts + first[k];
        jobs[k].ej.lens = lens + first[k];
        jobs[k].ej.out = out + (size_t)first[k] * dim;
        jobs[k].ej.ntokens = ntok + first[k];
        gw_embedw_submit(w, &jobs[k].ej);
    }
    /* a timer keeps the loop running (an active-only event does not) and bounds the wait */
    struct event *guard = evtimer_new(base, on_guard, NULL);
    struct timeval tv = {60, 0};
    evtimer_add(guard, &tv);
    event_base_dispatch(base);
    event_free(guard);
    cr_assert_eq(nfinished, 4);
    /* the one-text jobs go into the first pass that has room for them whole, beside the
     * large job's pieces: the first is back before the large one, which needs three passes
     * (the others may come back with its last); they in their order */
    int at[4];
    for (int k = 0; k < 4; k++) {
        at[finished[k]] = k;
        cr_assert_eq(jobs[k].ej.rc, 0);
    }
    cr_assert(at[1] < at[0] && at[1] < at[2] && at[2] < at[3], "finished %d %d %d %d",
              finished[0], finished[1], finished[2], finished[3]);
    gw_embedw_destroy(w); /* the model is ours again */

    double maxdiff = 0;
    for (int i = 0; i < NT; i++) {
        float one[1024];
        int nt;
        cr_assert_eq(emb_encode(m, &texts[i], &lens[i], 1, one, &nt), 0);
        cr_assert_eq(nt, ntok[i], "text %d token count", i);
        for (int j = 0; j < dim; j++)
            maxdiff = fmax(maxdiff, fabs(one[j] - out[(size_t)i * dim + j]));
    }
    cr_assert(maxdiff < 1e-5, "max abs difference %g", maxdiff);

    char *text = gw_metrics_render(reg, NULL);
    cr_assert(strstr(text, "cachegate_embed_texts_total 12\n"), "%s", text);
    /* at most 4 texts a pass: 12 texts need at least 3 passes */
    cr_assert(strstr(text, "cachegate_embed_batch_size_bucket{le=\"4\"} ") != NULL);
    cr_assert(strstr(text, "cachegate_embed_batch_size_bucket{le=\"8\"} ") != NULL);
    const char *c = strstr(text, "cachegate_embed_batch_size_count ");
    cr_assert(c && atoi(c + strlen("cachegate_embed_batch_size_count ")) >= 3);
    const char *b4 = strstr(text, "cachegate_embed_batch_size_bucket{le=\"4\"} ");
    const char *b8 = strstr(text, "cachegate_embed_batch_size_bucket{le=\"8\"} ");
    cr_assert_eq(atoi(b4 + strlen("cachegate_embed_batch_size_bucket{le=\"4\"} ")),
                 atoi(b8 + strlen("cachegate_embed_batch_size_bucket{le=\"8\"} ")),
                 "no pass exceeded max_batch");
    free(text);
    free(out);
    gw_cq_destroy(cq);
    gw_metrics_destroy(reg);
    event_base_free(base);
    emb_model_destroy(m);
}
