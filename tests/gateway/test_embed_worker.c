/* tests gateway/embed_worker.c: jobs larger than max_batch span several passes, one-text
 * jobs queued after a large one complete before it (on the loop thread, in their order),
 * and every vector equals the one emb_encode gives for the text alone; the jobs done after
 * one pass go to their post hook together; the jobs that want them get their texts' states
 * from the pass. Needs models/all-minilm-l6-v2 (make deps). */
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

/* the model, and a loop with its completion queue */
static emb_model *start(gw_cq **cq)
{
    cr_assert_eq(evthread_use_pthreads(), 0);
    char err[512];
    emb_model *m;
    cr_assert_eq(emb_model_load("models/all-minilm-l6-v2", NULL, &m, err, sizeof err), 0, "%s",
                 err);
    base = event_base_new();
    *cq = gw_cq_create(base);
    return m;
}

/* runs the loop until the jobs are done (a timer keeps it running, since an active-only
 * event does not, and bounds the wait) */
static void run_loop(void)
{
    struct event *guard = evtimer_new(base, on_guard, NULL);
    struct timeval tv = {60, 0};
    evtimer_add(guard, &tv);
    event_base_dispatch(base);
    event_free(guard);
}

Test(embed_worker, batches_span_passes_and_match_direct_encoding, .timeout = 120)
{
    gw_cq *cq;
    emb_model *m = start(&cq);
    int dim = emb_dim(m);
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
    run_loop();
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

/* four one-text jobs, texts[first..first + 4), each set up by tune, submitted at once */
static struct job four[4];
static float four_out[4 * 384];
static int four_ntok[4];
static size_t four_lens[4];

static void submit_four(gw_embedw *w, int first, void (*tune)(struct job *j))
{
    nfinished = 0;
    for (int k = 0; k < 4; k++) {
        four_lens[k] = strlen(texts[first + k]);
        memset(&four[k], 0, sizeof four[k]);
        four[k].order = k;
        four[k].ej.item.fn = on_done;
        four[k].ej.n = 1;
        four[k].ej.texts = texts + first + k;
        four[k].ej.lens = four_lens + k;
        four[k].ej.out = four_out + (size_t)k * 384;
        four[k].ej.ntokens = four_ntok + k;
        tune(&four[k]);
        gw_embedw_submit(w, &four[k].ej);
    }
}

/* the post hook's calls: how many jobs each got, and whether each job was embedded then */
static int post_calls, post_sizes[8], post_order[8], post_embedded;

static void post_all(struct gw_embed_job **jobs, int n)
{
    post_sizes[post_calls++] = n;
    for (int i = 0; i < n; i++) {
        struct job *j = gw_cq_container(jobs[i], struct job, ej);
        post_order[i] = j->order;
        post_embedded += jobs[i]->rc == 0 && jobs[i]->ntokens[0] > 0;
    }
}

static void with_post(struct job *j)
{
    j->ej.post = j->order == 2 ? NULL : post_all; /* job 2 has none */
}

Test(embed_worker, the_jobs_done_after_one_pass_go_to_their_post_together, .timeout = 120)
{
    gw_cq *cq;
    emb_model *m = start(&cq);
    cr_assert_eq(emb_dim(m), 384);
    /* a pass waits up to 10 s for 4 texts: the four jobs share one */
    gw_embedw *w = gw_embedw_create(m, cq, 4, 10000000, NULL);
    cr_assert_not_null(w);
    submit_four(w, 0, with_post);
    run_loop();
    cr_assert_eq(nfinished, 4);
    cr_assert_eq(post_calls, 1, "post ran %d times", post_calls);
    cr_assert_eq(post_sizes[0], 3);
    cr_assert(post_order[0] == 0 && post_order[1] == 1 && post_order[2] == 3,
              "post got jobs %d %d %d", post_order[0], post_order[1], post_order[2]);
    cr_assert_eq(post_embedded, 3, "the jobs are embedded before their post runs");
    gw_embedw_destroy(w);
    gw_cq_destroy(cq);
    event_base_free(base);
    emb_model_destroy(m);
}

/* what kept got: per job, its text's token count and its last layer's first state */
static int kept_calls, kept_tokens[4];
static float kept_first[4][384];

static void kept(struct gw_embed_job *ej, int i, const struct emb_keep *keep, int at)
{
    struct job *j = gw_cq_container(ej, struct job, ej);
    kept_calls++;
    int o = keep->off[at], total = keep->off[keep->n];
    kept_tokens[j->order] = i == 0 ? keep->off[at + 1] - o : -1; /* one text a job */
    /* layer 2 of the kept ones is the last: its [CLS] state */
    memcpy(kept_first[j->order], keep->states + ((size_t)2 * total + o) * 384,
           sizeof kept_first[0]);
}

static void with_kept(struct job *j)
{
    j->ej.ends = 1;
    j->ej.kept = j->order == 1 ? NULL : kept; /* job 1 wants none */
}

Test(embed_worker, the_jobs_that_want_them_get_their_states_from_the_pass, .timeout = 120)
{
    gw_cq *cq;
    emb_model *m = start(&cq);
    const int dim = emb_dim(m);
    cr_assert_eq(dim, 384);
    gw_embedw *w = gw_embedw_create(m, cq, 4, 10000000, NULL);
    cr_assert_not_null(w);
    int layers[3] = {0, 3, emb_layers(m)};
    /* a pass that keeps states pools the last layer's: it must be among them */
    cr_assert_eq(gw_embedw_keep_states(w, 2, layers, 4096), EMB_EINVAL);
    cr_assert_eq(gw_embedw_keep_states(w, 3, layers, 4096), 0);
    submit_four(w, 3, with_kept);
    run_loop();
    cr_assert_eq(nfinished, 4);
    cr_assert_eq(kept_calls, 3);
    gw_embedw_destroy(w);
    /* each one's states are its own, as embedded alone (the GEMMs over more rows sum in
     * another order: about 2e-6) */
    float *one = malloc(sizeof(float) * 3 * (size_t)emb_max_tokens(m) * dim);
    for (int k = 0; k < 4; k++) {
        if (k == 1) {
            cr_assert_eq(kept_tokens[k], 0);
            continue;
        }
        int off[2];
        cr_assert_eq(emb_token_states(m, texts + k + 3, four_lens + k, 1, 3, layers, one, NULL, off),
                     0);
        cr_assert_eq(kept_tokens[k], four_ntok[k]);
        cr_assert_eq(off[1], four_ntok[k]);
        double worst = 0;
        for (int j = 0; j < dim; j++)
            worst = fmax(worst, fabs(kept_first[k][j] - one[(size_t)2 * off[1] * dim + j]));
        cr_assert_leq(worst, 1e-4, "text %d: %g", k, worst);
    }
    free(one);
    gw_cq_destroy(cq);
    event_base_free(base);
    emb_model_destroy(m);
}
