/* Times the engine's CUDA backend (build/libcachegate_cuda.so) on a synthetic model of
 * Llama-3.2-1B's shape (random F16 weights made on the device): decode tokens/s at several
 * batch sizes with ~512 positions of context, prefill tokens/s, the device's memory
 * bandwidth (a device-to-device copy), and decode at batch 1 against the bound that
 * bandwidth sets (every weight byte read once per step). With a GGUF path, also the model
 * itself through eng_model_load() on the CUDA backend.
 * usage: bench_gpu [MODEL.gguf]
 * prints: a table, one measurement a line */
#include "cuda_plugin.h"
#include "engine.h"
#include "kvcache.h"
#include "model.h"
#include "ops_cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PLUGIN "build/libcachegate_cuda.so"
#define CTX 512   /* context of the decode sequences before timing */
#define STEPS 64  /* timed decode steps */
#define WARMUP 4  /* untimed decode steps: graph capture, clocks */
#define BS 16

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_gpu: %s: %s\n", what, msg);
    return 1;
}

static const struct eng_backend_i *vt;
static void *ctx;

static int fwd(const struct eng_seq *s, int n)
{
    int rc = vt->forward(ctx, s, n, NULL);
    if (rc)
        fprintf(stderr, "bench_gpu: forward: %s\n", vt->last_error(ctx));
    return rc;
}

/* B sequences of CTX positions, then WARMUP + STEPS greedy decode steps sampled on the
 * device; returns the seconds per timed step, or < 0. */
static double decode(kvc_pool *kv, int B, int V)
{
    const int per = (CTX + WARMUP + STEPS + BS) / BS + 1;
    int32_t *tables = malloc(sizeof *tables * (size_t)B * per);
    int32_t *toks = malloc(sizeof *toks * (size_t)B * (CTX + WARMUP + STEPS + 1));
    struct eng_seq *seqs = malloc(sizeof *seqs * (size_t)B);
    struct eng_sample_row *rows = malloc(sizeof *rows * (size_t)B);
    int32_t *next = malloc(sizeof *next * (size_t)B);
    double t = -1;
    for (int i = 0; i < B * per; i++)
        tables[i] = -1; /* released at the end only when allocated */
    for (int i = 0; i < B * per; i++)
        if (kvc_alloc(kv, &tables[i]))
            goto out;
    const int stride = CTX + WARMUP + STEPS + 1;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < CTX; i++)
            toks[(size_t)b * stride + i] = (int32_t)((b * 131 + i * 7919) % V);
    /* the contexts, 8 sequences a pass */
    for (int b0 = 0; b0 < B; b0 += 8) {
        int n = B - b0 < 8 ? B - b0 : 8;
        for (int j = 0; j < n; j++)
            seqs[j] = (struct eng_seq){toks + (size_t)(b0 + j) * stride, CTX, 0,
                                       tables + (size_t)(b0 + j) * per, ENG_LOGITS_NONE};
        if (fwd(seqs, n))
            goto out;
    }
    for (int b = 0; b < B; b++) {
        toks[(size_t)b * stride + CTX] = 1;
        rows[b] = (struct eng_sample_row){b, 0.0f, 0, 1.0f, 0.0f, 0, 0, 0.0f};
    }
    double t0 = 0;
    for (int step = 0; step < WARMUP + STEPS; step++) {
        if (step == WARMUP)
            t0 = now();
        int pos = CTX + step;
        for (int b = 0; b < B; b++)
            seqs[b] = (struct eng_seq){toks + (size_t)b * stride + pos, 1, pos,
                                       tables + (size_t)b * per, ENG_LOGITS_LAST};
        if (fwd(seqs, B))
            goto out;
        if (vt->sample(ctx, rows, B, NULL, 0, next)) {
            fprintf(stderr, "bench_gpu: sample: %s\n", vt->last_error(ctx));
            goto out;
        }
        for (int b = 0; b < B; b++)
            toks[(size_t)b * stride + pos + 1] = next[b];
    }
    t = (now() - t0) / STEPS;
out:
    for (int i = 0; i < B * per; i++)
        if (kvc_refcount(kv, tables[i]) > 0)
            kvc_release(kv, tables[i]);
    free(tables), free(toks), free(seqs), free(rows), free(next);
    return t;
}

/* n sequences of len fresh tokens in one pass, LAST logits; returns seconds, or < 0 */
static double prefill(kvc_pool *kv, int n, int len, int V, int reps)
{
    const int per = (len + BS - 1) / BS;
    int32_t *tables = malloc(sizeof *tables * (size_t)n * per);
    int32_t *toks = malloc(sizeof *toks * (size_t)n * len);
    struct eng_seq *seqs = malloc(sizeof *seqs * (size_t)n);
    double t = -1;
    for (int i = 0; i < n * per; i++)
        tables[i] = -1;
    for (int i = 0; i < n * per; i++)
        if (kvc_alloc(kv, &tables[i]))
            goto out;
    for (int i = 0; i < n * len; i++)
        toks[i] = (int32_t)((i * 7919) % V);
    for (int s = 0; s < n; s++)
        seqs[s] = (struct eng_seq){toks + (size_t)s * len, len, 0, tables + (size_t)s * per,
                                   ENG_LOGITS_LAST};
    if (fwd(seqs, n)) /* warm-up */
        goto out;
    double t0 = now();
    for (int r = 0; r < reps; r++)
        if (fwd(seqs, n))
            goto out;
    t = (now() - t0) / reps;
out:
    for (int i = 0; i < n * per; i++)
        if (kvc_refcount(kv, tables[i]) > 0)
            kvc_release(kv, tables[i]);
    free(tables), free(toks), free(seqs);
    return t;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The shared-prefix workload's prefill on the default model: a question's Q tokens after
 * L cached tokens (what a request whose prefix is cached computes), against all L + Q;
 * the median of R passes over the same slots. */
static int bench_prefix_step(eng_model *m)
{
    const struct eng_hparams *hp = eng_model_hparams(m);
    enum { L = 1024, Q = 46, R = 21 };
    const int nb = (L + Q + BS - 1) / BS;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, BS, nb, 1, KVC_F32};
    kvc_pool *kv;
    if (kvc_create(&ks, &kv))
        return die("model", "kvc_create");
    int32_t *table = malloc(sizeof *table * nb), toks[L + Q];
    float *logits = malloc(sizeof(float) * hp->n_vocab);
    for (int i = 0; i < nb; i++)
        kvc_alloc(kv, &table[i]);
    for (int i = 0; i < L + Q; i++)
        toks[i] = (1000 + (i * 7919) % 20000) % hp->n_vocab;
    double part[R], whole[R];
    int rc = 0;
    for (int r = 0; r < R && !rc; r++) {
        struct eng_seq all = {toks, L + Q, 0, table, ENG_LOGITS_LAST};
        struct eng_seq tail = {toks + L, Q, L, table, ENG_LOGITS_LAST};
        double t0 = now();
        rc = eng_forward(m, kv, &all, 1, logits);
        double t1 = now();
        rc = rc ? rc : eng_forward(m, kv, &tail, 1, logits);
        whole[r] = t1 - t0;
        part[r] = now() - t1;
    }
    free(table), free(logits);
    kvc_destroy(kv);
    if (rc)
        return die("model", eng_strerror(rc));
    qsort(part, R, sizeof *part, by_value);
    qsort(whole, R, sizeof *whole, by_value);
    printf("%-44s %12.2f ms\n", "model prefill, 1,070 tokens", whole[R / 2] * 1e3);
    printf("%-44s %12.2f ms\n", "model prefill, 46 tokens after 1,024 cached", part[R / 2] * 1e3);
    return 0;
}

/* The model from its file on the CUDA backend: prefill of 512 tokens, 128 decode steps. */
static int bench_model(const struct gw_cuda_plugin *pl, const char *path)
{
    struct eng_options opt = {0};
    opt.backend = pl->eng_create;
    char err[512];
    eng_model *m;
    if (eng_model_load(path, &opt, &m, err, sizeof err))
        return die("model", err);
    const struct eng_hparams *hp = eng_model_hparams(m);
    const int P = 512, Dn = 128, n = P + Dn + 1, nb = (n + BS - 1) / BS;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, BS, nb, 1, KVC_F32};
    kvc_pool *kv;
    if (kvc_create(&ks, &kv))
        return die("model", "kvc_create");
    int32_t *table = malloc(sizeof *table * nb), *toks = malloc(sizeof *toks * n);
    float *logits = malloc(sizeof(float) * hp->n_vocab);
    for (int i = 0; i < nb; i++)
        kvc_alloc(kv, &table[i]);
    for (int i = 0; i < P; i++)
        toks[i] = (1000 + (i * 7919) % 20000) % hp->n_vocab;
    struct eng_seq s = {toks, P, 0, table, ENG_LOGITS_LAST};
    int rc = eng_forward(m, kv, &s, 1, logits); /* warm-up */
    double t0 = now();
    rc = rc ? rc : eng_forward(m, kv, &s, 1, logits);
    double t1 = now();
    for (int i = 0; i < Dn && !rc; i++) {
        int best = 0;
        for (int v = 1; v < hp->n_vocab; v++)
            best = logits[v] > logits[best] ? v : best;
        toks[P + i] = best;
        struct eng_seq d = {toks + P + i, 1, P + i, table, ENG_LOGITS_LAST};
        rc = eng_forward(m, kv, &d, 1, logits);
    }
    double t2 = now();
    if (rc)
        return die("model", eng_strerror(rc));
    printf("%-44s %12.1f tok/s\n", "model prefill (512 tokens, 1 sequence)", P / (t1 - t0));
    printf("%-44s %12.1f tok/s  (%s, logits to the host)\n", "model decode (batch 1)",
           Dn / (t2 - t1), eng_model_device(m));
    free(table), free(toks), free(logits);
    kvc_destroy(kv);
    rc = bench_prefix_step(m);
    eng_model_destroy(m);
    return rc;
}

int main(int argc, char **argv)
{
    void *h = dlopen(PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return die("dlopen", dlerror());
    gw_cuda_plugin_fn fn = (gw_cuda_plugin_fn)dlsym(h, GW_CUDA_PLUGIN_SYMBOL);
    if (!fn)
        return die("dlsym", GW_CUDA_PLUGIN_SYMBOL);
    const struct gw_cuda_plugin *pl = fn();
    struct gw_cuda_device_info info;
    if (!pl || pl->abi != GW_CUDA_PLUGIN_ABI)
        return die("plugin", "interface version differs");
    if (pl->probe(&info) <= 0)
        return die("probe", info.error);
    if (!pl->eng_create || !pl->eng_test_ops)
        return die("plugin", "built without the engine's CUDA backend");
    const struct eng_cuda_test_ops *ops = pl->eng_test_ops;

    /* Llama-3.2-1B: tied output head */
    struct eng_hparams hp = {.n_layer = 16, .n_embd = 2048, .n_head = 32, .n_head_kv = 8,
                             .head_dim = 64, .n_ff = 8192, .n_vocab = 128256,
                             .n_ctx_train = 131072, .n_rot = 64, .rope_base = 500000.0f,
                             .rope_scale = 1.0f, .rms_eps = 1e-5f, .tied_output = 1};
    const int D = hp.n_embd, HQ = hp.n_head * hp.head_dim, HK = hp.n_head_kv * hp.head_dim;
    struct eng_layer_weights *lw = calloc((size_t)hp.n_layer, sizeof *lw);
    for (int l = 0; l < hp.n_layer; l++)
        lw[l] = (struct eng_layer_weights){NULL,
                                           NULL,
                                           {NULL, HQ + 2 * HK, D},
                                           {NULL, D, HQ},
                                           {NULL, 2 * hp.n_ff, D},
                                           {NULL, D, hp.n_ff}};
    struct eng_weights w = {hp, NULL, NULL, {NULL, hp.n_vocab, D}, NULL, lw, 1};
    char err[512];
    double t0 = now();
    if (pl->eng_create(&w, NULL, NULL, &vt, &ctx, err, sizeof err))
        return die("eng_cuda_create", err);
    printf("%s, synthetic Llama-3.2-1B shape (F16 weights made in %.2f s)\n", vt->describe(ctx),
           now() - t0);

    double bw;
    if (ops->bandwidth((size_t)1 << 30, 20, &bw, err, sizeof err))
        return die("bandwidth", err);
    printf("%-44s %12.1f GB/s\n", "memory bandwidth (D2D copy, read + write)", bw / 1e9);

    /* pool: every decode run's sequences and a prefill batch at once */
    const int per = (CTX + WARMUP + STEPS + BS) / BS + 1;
    struct kvc_shape ks = {hp.n_layer, hp.n_head_kv, hp.head_dim, BS, 256 * per + 8 * 33, 1,
                           KVC_F32};
    int cap = 0;
    if (vt->kv_capacity(ctx, &ks, 0.9, &cap) || cap < ks.n_blocks) {
        fprintf(stderr, "bench_gpu: %d KV blocks fit, %d wanted: %s\n", cap, ks.n_blocks,
                vt->last_error(ctx));
        return 1;
    }
    kvc_pool *kv;
    if (kvc_create(&ks, &kv))
        return die("kvc_create", "failed");
    if (vt->kv_init(ctx, &ks))
        return die("kv_init", vt->last_error(ctx));

    const double wbytes =
        2.0 * ((double)hp.n_layer * ((double)(HQ + 2 * HK) * D + (double)D * HQ +
                                      2.0 * hp.n_ff * D + (double)D * hp.n_ff) +
               (double)hp.n_vocab * D);
    const int batches[] = {1, 2, 3, 4, 6, 8, 16, 64, 256};
    double step1 = 0;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        int B = batches[i];
        double s = decode(kv, B, hp.n_vocab);
        if (s < 0)
            return 1;
        if (B == 1)
            step1 = s;
        char label[64];
        snprintf(label, sizeof label, "decode, batch %d (context %d)", B, CTX);
        printf("%-44s %12.1f tok/s  (%.2f ms a step)\n", label, B / s, s * 1e3);
    }
    long caps, reps;
    ops->graph_stats(ctx, &caps, &reps);
    printf("%-44s %12ld / %ld\n", "decode graphs captured / steps replayed", caps, reps);
    /* DRAM moves a copy's bytes twice (read + write): that total is its throughput */
    double ideal = wbytes / bw;
    printf("%-44s %12.1f %%  (%.2f GB of weights a step: %.3f ms at %.0f GB/s)\n",
           "decode batch 1 vs the bandwidth bound", 100.0 * ideal / step1, wbytes / 1e9,
           ideal * 1e3, bw / 1e9);
    double p = prefill(kv, 8, 512, hp.n_vocab, 3);
    if (p < 0)
        return 1;
    printf("%-44s %12.1f tok/s  (%.1f ms a pass)\n", "prefill, 8 x 512 tokens", 8 * 512 / p,
           p * 1e3);
    kvc_destroy(kv);
    vt->destroy(ctx);
    free(lw);
    if (argc > 1)
        return bench_model(pl, argv[1]);
    return 0;
}
