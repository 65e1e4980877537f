/*
 * backend — where a model's forward pass runs (eng_backend_i): a table of functions and
 * its context, like the embedder's.
 *
 * The CPU backend is model.c's own code and works on the weights it loaded. Another
 * backend (the CUDA one, in the plugin build/libcachegate_cuda.so) is created through an
 * eng_backend_create_fn passed in eng_options: it receives the weights as host F32
 * matrices (borrowed for the call only), keeps its own copies on its device, holds the
 * keys and values of the KV pool's blocks in device memory, and runs whole forward
 * passes. The pool's accounting (block ids, refcounts, the free list, the radix tree)
 * stays on the host, on the engine thread, whatever the backend.
 *
 *   engine thread:  sched_step ─► eng_forward(model, pool, seqs) ─► be->forward(ctx, ...)
 *                                   block tables (host ids) ──────►  KV storage (device)
 *
 * Threads: one caller at a time (the engine thread). Functions return 0 or an ENG_ error
 * and never exit; a device error is ENG_EDEVICE, and last_error() says what failed. The
 * plugin never logs (it cannot reach the program's logger); the model logs for it.
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include "kvcache.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

/* A weight matrix [n][k] (PyTorch's [out][in]) as host F32, row-major. f may be NULL:
 * the backend then fills it with random values of a trained model's scale (synthetic
 * models of a real shape, for benchmarks on a device). */
struct eng_weight {
    const float *f;
    int n, k;
};

struct eng_layer_weights {
    const float *attn_norm, *ffn_norm; /* [n_embd]; NULL: random, as above */
    /* query, key and value rows stacked: [n_head*hd + 2*n_kv*hd][n_embd] */
    struct eng_weight wqkv;
    struct eng_weight wo;        /* [n_embd][n_head*hd] */
    struct eng_weight w_gate_up; /* gate rows then up rows: [2*n_ff][n_embd] */
    struct eng_weight w_down;    /* [n_embd][n_ff] */
};

struct eng_weights {
    struct eng_hparams hp;
    const float *tok_embd;    /* [n_vocab][n_embd] */
    const float *out_norm;    /* [n_embd] */
    struct eng_weight output; /* [n_vocab][n_embd]; may point at tok_embd (tied) */
    const float *rope_inv;    /* [n_rot / 2] inverse frequencies, scaling applied */
    const struct eng_layer_weights *layers; /* [n_layer] */
    uint64_t seed;            /* for weights given as NULL */
};

/* One row to sample on the device from the logits of the last forward pass. u is a
 * uniform [0, 1) number drawn by the caller's seeded generator, so that one seed gives one
 * sequence of tokens on a given backend (the device may rank a filtered row's candidates
 * in another order than the CPU sampler, so the two can differ). Greedy rows pick what the
 * CPU picks: the lowest id among the maxima. temperature <= 0: greedy. */
struct eng_sample_row {
    int row;           /* logits row of the last forward */
    float temperature; /* <= 0: greedy */
    int top_k;         /* <= 0: off */
    float top_p;       /* >= 1: off */
    float u;
    int adj_first, n_adj; /* this row's amounts in sample()'s adj: [adj_first, +n_adj) */
    float min_p;          /* keeps weights >= min_p of the largest; 0: off */
};

/* An amount added to one token's logit before its row is sampled: logit_bias, and the
 * presence and frequency penalties as their negation. A row's amounts are added in their
 * order, one by one, as the CPU sampler adds them (sampler.h). */
struct eng_logit_adj {
    int32_t token;
    float add;
};

struct eng_backend_i {
    const char *name;
    /* How many KV blocks of this shape (n_blocks ignored) fit in `fraction` of the
     * device's memory as it is now (weights already loaded). */
    int (*kv_capacity)(void *ctx, const struct kvc_shape *shape, double fraction,
                       int *n_blocks /* out */);
    /* Allocates (or reallocates) KV storage for a pool of this shape; the model calls it
     * before the first forward pass over a pool it has not seen. */
    int (*kv_init)(void *ctx, const struct kvc_shape *shape);
    /* As eng_forward() (model.h), keys and values in the storage of kv_init(). logits may
     * be NULL: the rows then stay on the device for sample(). */
    int (*forward)(void *ctx, const struct eng_seq *seqs, int n_seqs, float *logits);
    /* Optional (NULL: the caller samples on the host from logits). adj: [n_adj], the
     * amounts the rows name; the logits of the last forward are left as they are. */
    int (*sample)(void *ctx, const struct eng_sample_row *rows, int n,
                  const struct eng_logit_adj *adj, int n_adj, int32_t *tokens);
    void (*destroy)(void *ctx);
    /* "cuda:0 NVIDIA H100 ..." */
    const char *(*describe)(void *ctx);
    /* What the last failing call hit ("cublasGemmEx: CUBLAS_STATUS_...", "out of device
     * memory for 4096 KV blocks"), or "". */
    const char *(*last_error)(void *ctx);
};

/* eng_backend_create_fn (model.h) creates one from weights. */

#endif
