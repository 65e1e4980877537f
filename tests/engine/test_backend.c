/* tests the device-backend plumbing of engine/model.c and engine/scheduler.c without a
 * device: a stand-in for the GPU (a test double for hardware this machine lacks) that
 * keeps its "device memory" in host memory and runs the CPU backend there. It checks that
 * the weights it receives have the model's shapes, that the KV storage follows the pool
 * (kv_init on a new pool), that the scheduler leaves the logits on the device and samples
 * there, logit_bias and penalties given as amounts to add and min_p with the row, and
 * that greedy output is the CPU backend's. */
#include "backend.h"
#include "engine.h"
#include "generate.h"
#include "scheduler.h"
#include "sched_out.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

/* The stand-in: a CPU model and a host pool of the shape kv_init gave. */
struct standin {
    eng_model *cpu;
    kvc_pool *kv;
    float *logits; /* the last forward's rows, [max][n_vocab] */
    int rows, n_vocab;
    int kv_inits, forwards, forwards_without_logits, samples, amounts;
    float min_p_seen;
    float *row; /* [n_vocab]: a row with its amounts added */
    struct eng_hparams hp;
};

static struct standin *the; /* the one live stand-in, for the assertions */

static int s_capacity(void *ctx, const struct kvc_shape *s, double fraction, int *n)
{
    (void)ctx;
    size_t per = 2ull * s->n_layer * s->block_size * s->n_kv_head * s->head_dim * 2;
    *n = (int)(fraction * 64.0 * 1024 * 1024 / (double)per); /* a 64 MiB "device" */
    return 0;
}

static int s_kv_init(void *ctx, const struct kvc_shape *shape)
{
    struct standin *d = ctx;
    kvc_destroy(d->kv);
    struct kvc_shape host = *shape;
    host.device_storage = 0;
    d->kv_inits++;
    return kvc_create(&host, &d->kv);
}

static int s_forward(void *ctx, const struct eng_seq *seqs, int n, float *logits)
{
    struct standin *d = ctx;
    int rows = 0;
    for (int i = 0; i < n; i++)
        rows += seqs[i].logits == ENG_LOGITS_ALL ? seqs[i].n_new : seqs[i].logits ? 1 : 0;
    float *grown = realloc(d->logits, sizeof(float) * (size_t)(rows ? rows : 1) * d->n_vocab);
    if (!grown)
        return ENG_ENOMEM;
    d->logits = grown;
    d->rows = rows;
    d->forwards++;
    d->forwards_without_logits += logits == NULL;
    int rc = eng_forward(d->cpu, d->kv, seqs, n, d->logits);
    if (!rc && logits)
        memcpy(logits, d->logits, sizeof(float) * (size_t)rows * d->n_vocab);
    return rc;
}

static int s_sample(void *ctx, const struct eng_sample_row *rows, int n,
                    const struct eng_logit_adj *adj, int n_adj, int32_t *tokens)
{
    struct standin *d = ctx;
    for (int i = 0; i < n; i++) {
        cr_assert(rows[i].row >= 0 && rows[i].row < d->rows);
        cr_assert_eq(rows[i].temperature, 0.0f, "the tests ask only for greedy rows");
        cr_assert(rows[i].adj_first >= 0 && rows[i].adj_first + rows[i].n_adj <= n_adj);
        float *l = d->row;
        memcpy(l, d->logits + (size_t)rows[i].row * d->n_vocab, sizeof(float) * d->n_vocab);
        for (int j = rows[i].adj_first; j < rows[i].adj_first + rows[i].n_adj; j++)
            l[adj[j].token] += adj[j].add;
        d->amounts += rows[i].n_adj;
        d->min_p_seen = rows[i].min_p;
        int best = 0;
        for (int v = 1; v < d->n_vocab; v++)
            best = l[v] > l[best] ? v : best;
        tokens[i] = best;
    }
    d->samples += n;
    return 0;
}

static void s_destroy(void *ctx)
{
    struct standin *d = ctx;
    kvc_destroy(d->kv);
    eng_model_destroy(d->cpu);
    free(d->logits);
    free(d->row);
    free(d);
    the = NULL;
}

static const char *s_describe(void *ctx)
{
    (void)ctx;
    return "stand-in:0";
}

static const char *s_last_error(void *ctx)
{
    (void)ctx;
    return "";
}

static const struct eng_backend_i standin_vt = {"stand-in", s_capacity, s_kv_init, s_forward,
                                                s_sample,   s_destroy,  s_describe, s_last_error};

static void check_weight(const struct eng_weight *w, int n, int k, const char *what)
{
    cr_assert(w->f, "%s given", what);
    cr_assert_eq(w->n, n, "%s rows", what);
    cr_assert_eq(w->k, k, "%s columns", what);
    cr_assert(isfinite(w->f[0]) && isfinite(w->f[(size_t)n * k - 1]), "%s readable", what);
}

static int s_create(const struct eng_weights *w, void (*progress)(void *, double), void *ud,
                    const struct eng_backend_i **vt, void **ctx, char *err, size_t errlen)
{
    (void)progress, (void)ud;
    const struct eng_hparams *hp = &w->hp;
    int D = hp->n_embd, HQ = hp->n_head * hp->head_dim, HK = hp->n_head_kv * hp->head_dim;
    check_weight(&w->output, hp->n_vocab, D, "output");
    cr_assert(w->tok_embd && w->out_norm && w->rope_inv && w->layers);
    for (int l = 0; l < hp->n_layer; l++) {
        const struct eng_layer_weights *L = &w->layers[l];
        cr_assert(L->attn_norm && L->ffn_norm);
        check_weight(&L->wqkv, HQ + 2 * HK, D, "wqkv");
        check_weight(&L->wo, D, HQ, "wo");
        check_weight(&L->w_gate_up, 2 * hp->n_ff, D, "w_gate_up");
        check_weight(&L->w_down, D, hp->n_ff, "w_down");
    }
    struct standin *d = calloc(1, sizeof *d);
    cr_assert(d);
    d->hp = *hp;
    d->n_vocab = hp->n_vocab;
    d->row = malloc(sizeof(float) * (size_t)hp->n_vocab);
    cr_assert(d->row);
    int rc = eng_model_load(MODEL, NULL, &d->cpu, err, errlen);
    if (rc) {
        free(d->row);
        free(d);
        return rc;
    }
    the = d;
    *vt = &standin_vt;
    *ctx = d;
    return 0;
}

static eng_model *cpu, *dev;
static tok_vocab *vocab;

static void setup(void)
{
    char err[512];
    struct eng_options on_dev = {.backend = s_create};
    cr_assert_eq(eng_model_load(MODEL, NULL, &cpu, err, sizeof err), 0, "%s", err);
    cr_assert_eq(eng_model_load(MODEL, &on_dev, &dev, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(eng_model_gguf(cpu), &vocab, err, sizeof err), 0, "%s", err);
}

static void teardown(void)
{
    tok_destroy(vocab);
    eng_model_destroy(dev);
    eng_model_destroy(cpu);
}

TestSuite(backend, .init = setup, .fini = teardown, .timeout = 300);

Test(backend, model_reports_the_device_and_sizes_the_pool_there)
{
    cr_assert_str_eq(eng_model_device(cpu), "cpu");
    cr_assert_str_eq(eng_model_device(dev), "stand-in:0");
    cr_assert_eq(eng_model_kv_on_device(cpu), 0);
    cr_assert_eq(eng_model_kv_on_device(dev), 1);
    const struct eng_hparams *hp = eng_model_hparams(dev);
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, 16, 0, 1, KVC_F32};
    int n = 0;
    cr_assert_eq(eng_model_kv_capacity(cpu, &ks, 0.5, &n), ENG_ENOTSUP);
    cr_assert_eq(eng_model_kv_capacity(dev, &ks, 0.5, &n), 0);
    cr_assert_gt(n, 0);
}

Test(backend, a_host_pool_is_refused_on_a_device_and_the_reverse)
{
    const struct eng_hparams *hp = eng_model_hparams(dev);
    struct kvc_shape host = {hp->n_layer, hp->n_head_kv, hp->head_dim, 16, 4, 0, KVC_F32};
    struct kvc_shape ondev = host;
    ondev.device_storage = 1;
    kvc_pool *hk, *dk;
    cr_assert_eq(kvc_create(&host, &hk), 0);
    cr_assert_eq(kvc_create(&ondev, &dk), 0);
    cr_assert_null(kvc_k_head(dk, 0, 0, 0), "a device pool has no host storage");
    int32_t tok = 1, table[1] = {0};
    struct eng_seq s = {&tok, 1, 0, table, ENG_LOGITS_LAST};
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    cr_assert_eq(eng_forward(dev, hk, &s, 1, logits), ENG_EINVAL);
    cr_assert_eq(eng_forward(cpu, dk, &s, 1, logits), ENG_EINVAL);
    int32_t bad = hp->n_vocab;
    s.tokens = &bad;
    cr_assert_eq(eng_forward(dev, dk, &s, 1, logits), ENG_EINVAL, "token ids are checked");
    free(logits);
    kvc_destroy(hk);
    kvc_destroy(dk);
}

Test(backend, forward_matches_the_cpu_and_kv_follows_the_pool)
{
    const struct eng_hparams *hp = eng_model_hparams(dev);
    int32_t ids[64];
    int n = 0;
    const char *text = "The largest planet in the solar system is";
    cr_assert_eq(tok_encode(vocab, text, strlen(text), 0, ids, 64, &n), 0);
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, 16, 8, 0, KVC_F32};
    kvc_pool *hk, *dk1, *dk2;
    cr_assert_eq(kvc_create(&ks, &hk), 0);
    ks.device_storage = 1;
    cr_assert_eq(kvc_create(&ks, &dk1), 0);
    cr_assert_eq(kvc_create(&ks, &dk2), 0);
    int32_t table[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    float *a = malloc(sizeof(float) * (size_t)hp->n_vocab * n);
    float *b = malloc(sizeof(float) * (size_t)hp->n_vocab * n);
    struct eng_seq s = {ids, n, 0, table, ENG_LOGITS_ALL};
    cr_assert_eq(eng_forward(cpu, hk, &s, 1, a), 0);
    int inits = the->kv_inits;
    cr_assert_eq(eng_forward(dev, dk1, &s, 1, b), 0);
    cr_assert_eq(the->kv_inits, inits + 1, "a new pool gets storage");
    cr_assert_eq(memcmp(a, b, sizeof(float) * (size_t)hp->n_vocab * n), 0);
    /* one more token on the same pool reuses the storage: the cached positions count */
    int32_t next = ids[0];
    struct eng_seq d = {&next, 1, n, table, ENG_LOGITS_LAST};
    cr_assert_eq(eng_forward(cpu, hk, &d, 1, a), 0);
    cr_assert_eq(eng_forward(dev, dk1, &d, 1, b), 0);
    cr_assert_eq(the->kv_inits, inits + 1);
    cr_assert_eq(memcmp(a, b, sizeof(float) * (size_t)hp->n_vocab), 0);
    /* another pool: new storage */
    cr_assert_eq(eng_forward(dev, dk2, &s, 1, b), 0);
    cr_assert_eq(the->kv_inits, inits + 2);
    free(a);
    free(b);
    kvc_destroy(hk);
    kvc_destroy(dk1);
    kvc_destroy(dk2);
}

/* greedy answers to three prompts; sampling: NULL, or its penalties, logit_bias, min_p */
static void run(eng_model *m, const struct eng_sampling *sampling, struct out *outs)
{
    static const char *prompts[] = {"The capital of France is", "def fibonacci(n):",
                                    "Water boils at a temperature of"};
    struct sched_config cfg = {3, 64, 32, 16, 0, 1, KVC_F32};
    sched *s;
    cr_assert_eq(sched_create(m, vocab, &cfg, &events, &s), 0);
    struct eng_gen_params p = greedy_params(16);
    if (sampling)
        p.sampling = *sampling;
    for (int i = 0; i < 3; i++) {
        int32_t ids[64];
        int n;
        cr_assert_eq(tok_encode(vocab, prompts[i], strlen(prompts[i]), 0, ids, 64, &n), 0);
        sched_seq *q;
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &outs[i], &q), 0);
    }
    int rc, steps = 0;
    while ((rc = sched_step(s)) > 0)
        cr_assert(++steps < 1000);
    cr_assert_eq(rc, 0);
    sched_destroy(s);
    for (int i = 0; i < 3; i++)
        cr_assert(outs[i].done && !outs[i].err && outs[i].len > 0);
}

Test(backend, scheduler_samples_on_the_device_when_it_can)
{
    struct out host[3] = {0}, on_dev[3] = {0};
    run(cpu, NULL, host);
    int samples = the->samples, without = the->forwards_without_logits;
    run(dev, NULL, on_dev);
    cr_assert_gt(the->samples, samples + 3, "greedy rows sampled on the device");
    cr_assert_gt(the->forwards_without_logits, without, "logits left on the device");
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(on_dev[i].text, host[i].text, "prompt %d", i);
}

static struct eng_sampling greedy_with(float presence, float frequency, float min_p,
                                       const struct eng_logit_bias *bias, int n_bias)
{
    struct eng_sampling p;
    eng_sampling_default(&p);
    p.temperature = 0;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    p.min_p = min_p;
    p.logit_bias = bias;
    p.n_logit_bias = n_bias;
    return p;
}

Test(backend, penalties_and_logit_bias_are_applied_on_the_device)
{
    /* the end tokens barred, a common word pushed, repeats penalised: answers that differ
     * from the plain ones, the same on the device as on the host */
    static const struct eng_logit_bias bias[] = {{0, -100.0f}, {2, -100.0f}, {260, 4.0f}};
    struct eng_sampling sp = greedy_with(0.3f, 0.5f, 0.0f, bias, 3);
    struct out plain[3] = {0}, host[3] = {0}, on_dev[3] = {0};
    run(cpu, NULL, plain);
    run(cpu, &sp, host);
    int samples = the->samples, without = the->forwards_without_logits, amounts = the->amounts;
    run(dev, &sp, on_dev);
    cr_assert_gt(the->samples, samples + 3, "rows with amounts sampled on the device");
    cr_assert_gt(the->forwards_without_logits, without, "logits left on the device");
    /* 3 biases a row, and a penalty for each distinct token so far */
    cr_assert_gt(the->amounts - amounts, 3 * (the->samples - samples));
    int changed = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(on_dev[i].text, host[i].text, "prompt %d", i);
        changed += strcmp(host[i].text, plain[i].text) != 0;
    }
    cr_assert_gt(changed, 0, "the amounts change what is chosen");
}

Test(backend, min_p_is_applied_on_the_device)
{
    struct eng_sampling sp = greedy_with(0, 0, 0.05f, NULL, 0);
    struct out host[3] = {0}, on_dev[3] = {0};
    run(cpu, &sp, host);
    int samples = the->samples, without = the->forwards_without_logits;
    run(dev, &sp, on_dev);
    cr_assert_gt(the->samples, samples + 3, "min_p rows sampled on the device");
    cr_assert_gt(the->forwards_without_logits, without);
    cr_assert_eq(the->min_p_seen, 0.05f, "the rows carry min_p");
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(on_dev[i].text, host[i].text, "prompt %d", i);
}
