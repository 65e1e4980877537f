/* Times the engine's forward pass on a GGUF model: prefill of a prompt of P tokens in one
 * pass, then D single-token decode steps (greedy), one sequence; or, with BATCH > 1, D
 * decode steps of BATCH sequences in one forward pass each, the sequences sharing the
 * prompt's cached positions (as the requests of a shared-prefix workload do).
 * usage: bench_engine MODEL.gguf PROMPT_TOKENS DECODE_TOKENS THREADS
 *            [f32|f16|bf16 [BATCH [f32|int8]]]
 * (the KV pool's storage, f32 unless named; then the matrix products, engine.cpu_matmul,
 * f32 unless named)
 * prints: {"prefill_tokens":P,"prefill_tok_s":X,"decode_tokens":D,"decode_tok_s":Y}, and
 * "batch":B when BATCH > 1 (decode_tok_s then counts every sequence's tokens) */
#include "engine.h"
#include "kvcache.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        best = v[i] > v[best] ? i : best;
    return best;
}

/* Dn decode steps of B sequences after sequence 0's prefill of P tokens (toks, table; its
 * logits first; it took prefill_s): the others take table's full blocks and prefill the rest
 * of the prompt themselves, untimed. Returns 0, or 1 after a message. */
static int decode_batch(eng_model *m, kvc_pool *kv, const int32_t *toks, const int32_t *table,
                        const float *first, int P, int Dn, int B, double prefill_s)
{
    const struct eng_hparams *hp = eng_model_hparams(m);
    const int bs = kvc_shape(kv)->block_size, n = P + Dn + 1, nb = (n + bs - 1) / bs;
    const int full = P / bs;
    int32_t *tabs = malloc(sizeof *tabs * (size_t)B * nb);
    int32_t *bt = malloc(sizeof *bt * (size_t)B * n);
    struct eng_seq *seqs = malloc(sizeof *seqs * (size_t)B);
    float *logits = malloc(sizeof(float) * (size_t)B * hp->n_vocab);
    int rc = 1;
    if (!tabs || !bt || !seqs || !logits)
        goto out;
    for (int b = 0; b < B; b++) {
        memcpy(bt + (size_t)b * n, toks, sizeof *bt * (size_t)P);
        for (int i = 0; i < nb; i++)
            if (b == 0 || i < full)
                tabs[(size_t)b * nb + i] = table[i];
            else if (kvc_alloc(kv, &tabs[(size_t)b * nb + i]))
                goto out;
        const float *last = first; /* the same prompt: the same next token */
        if (b > 0 && P > full * bs) {
            struct eng_seq s = {bt + (size_t)b * n + full * bs, P - full * bs, full * bs,
                                tabs + (size_t)b * nb, ENG_LOGITS_LAST};
            if (eng_forward(m, kv, &s, 1, logits))
                goto out;
            last = logits;
        }
        bt[(size_t)b * n + P] = (int32_t)argmax(last, hp->n_vocab);
    }
    double t0 = now();
    for (int i = 0; i < Dn; i++) {
        for (int b = 0; b < B; b++)
            seqs[b] = (struct eng_seq){bt + (size_t)b * n + P + i, 1, P + i,
                                       tabs + (size_t)b * nb, ENG_LOGITS_LAST};
        if (eng_forward(m, kv, seqs, B, logits))
            goto out;
        for (int b = 0; b < B; b++)
            bt[(size_t)b * n + P + i + 1] =
                (int32_t)argmax(logits + (size_t)b * hp->n_vocab, hp->n_vocab);
    }
    double t1 = now();
    printf("{\"prefill_tokens\":%d,\"prefill_tok_s\":%.1f,\"decode_tokens\":%d,"
           "\"decode_tok_s\":%.1f,\"batch\":%d}\n",
           P, P / prefill_s, Dn, (double)B * Dn / (t1 - t0), B);
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench_engine: batch of %d failed (memory or KV blocks)\n", B);
    free(tabs), free(bt), free(seqs), free(logits);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5 && !((argc >= 6 && argc <= 8) &&
                       (!strcmp(argv[5], "f32") || !strcmp(argv[5], "f16") ||
                        !strcmp(argv[5], "bf16") || !strcmp(argv[5], "q8_0")) &&
                       (argc < 8 || !strcmp(argv[7], "f32") || !strcmp(argv[7], "int8")))) {
        fprintf(stderr, "usage: bench_engine MODEL.gguf PROMPT_TOKENS DECODE_TOKENS THREADS "
                        "[f32|f16|bf16|q8_0 [BATCH [f32|int8]]]\n");
        return 2;
    }
    const char *dt = argc >= 6 ? argv[5] : "f32";
    const enum kvc_dtype dtype = !strcmp(dt, "f16")    ? KVC_F16
                                 : !strcmp(dt, "bf16") ? KVC_BF16
                                 : !strcmp(dt, "q8_0") ? KVC_Q8_0
                                                       : KVC_F32;
    int P = atoi(argv[2]), Dn = atoi(argv[3]), B = argc >= 7 ? atoi(argv[6]) : 1;
    if (P < 1 || Dn < 0 || B < 1) {
        fprintf(stderr, "bench_engine: PROMPT_TOKENS >= 1, DECODE_TOKENS >= 0, BATCH >= 1\n");
        return 2;
    }
    struct eng_options opt = {.threads = atoi(argv[4]),
                              .int8 = argc == 8 && !strcmp(argv[7], "int8")};
    char err[512];
    eng_model *m;
    if (eng_model_load(argv[1], &opt, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const struct eng_hparams *hp = eng_model_hparams(m);
    int n = P + Dn + 1, bs = 16, nb = (n + bs - 1) / bs, full = P / bs;
    /* with BATCH > 1, every other sequence shares the prompt's full blocks */
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, bs,
                           nb + (B - 1) * (nb - full), 0, dtype};
    kvc_pool *kv;
    if (kvc_create(&ks, &kv))
        return 1;
    int32_t *table = malloc(sizeof *table * (size_t)nb), *toks = malloc(sizeof *toks * (size_t)n);
    for (int i = 0; i < nb; i++)
        kvc_alloc(kv, &table[i]);
    for (int i = 0; i < P; i++)
        toks[i] = 1000 + (i * 7919) % 20000; /* arbitrary ids; speed does not depend on them */
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    struct eng_seq s = {toks, P, 0, table, ENG_LOGITS_LAST};
    double t0 = now();
    if (eng_forward(m, kv, &s, 1, logits))
        return 1;
    double t1 = now();
    if (B > 1)
        return decode_batch(m, kv, toks, table, logits, P, Dn, B, t1 - t0);
    for (int i = 0; i < Dn; i++) {
        int best = 0;
        for (int v = 1; v < hp->n_vocab; v++)
            best = logits[v] > logits[best] ? v : best;
        toks[P + i] = best;
        struct eng_seq d = {toks + P + i, 1, P + i, table, ENG_LOGITS_LAST};
        if (eng_forward(m, kv, &d, 1, logits))
            return 1;
    }
    double t2 = now();
    printf("{\"prefill_tokens\":%d,\"prefill_tok_s\":%.1f,\"decode_tokens\":%d,"
           "\"decode_tok_s\":%.1f}\n",
           P, P / (t1 - t0), Dn, Dn / (t2 - t1));
    free(logits);
    free(table);
    free(toks);
    kvc_destroy(kv);
    eng_model_destroy(m);
    return 0;
}
