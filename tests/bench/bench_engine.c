/* Times the engine's forward pass on a GGUF model: prefill of a prompt of P tokens in one
 * pass, then D single-token decode steps (greedy), one sequence.
 * usage: bench_engine MODEL.gguf PROMPT_TOKENS DECODE_TOKENS THREADS [f32|f16]
 * (the KV pool's storage, f32 unless named)
 * prints: {"prefill_tokens":P,"prefill_tok_s":X,"decode_tokens":D,"decode_tok_s":Y} */
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

int main(int argc, char **argv)
{
    if (argc != 5 && !(argc == 6 && (!strcmp(argv[5], "f32") || !strcmp(argv[5], "f16")))) {
        fprintf(stderr,
                "usage: bench_engine MODEL.gguf PROMPT_TOKENS DECODE_TOKENS THREADS [f32|f16]\n");
        return 2;
    }
    const enum kvc_dtype dtype = argc == 6 && !strcmp(argv[5], "f16") ? KVC_F16 : KVC_F32;
    int P = atoi(argv[2]), Dn = atoi(argv[3]);
    struct eng_options opt = {.threads = atoi(argv[4])};
    char err[512];
    eng_model *m;
    if (eng_model_load(argv[1], &opt, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const struct eng_hparams *hp = eng_model_hparams(m);
    int n = P + Dn + 1, bs = 16, nb = (n + bs - 1) / bs;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, bs, nb, 0, dtype};
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
