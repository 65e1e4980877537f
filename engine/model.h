/*
 * model — a Llama-family model from a GGUF file, and its forward pass on a backend.
 *
 * Hyperparameters come from the metadata of the file's architecture (ARCH.block_count,
 * ARCH.embedding_length, ARCH.attention.head_count[_kv], ARCH.feed_forward_length,
 * ARCH.rope.freq_base, ARCH.rope.dimension_count, ARCH.rope.scaling.type/.factor,
 * ARCH.attention.layer_norm_rms_epsilon); the output head is output.weight, or the
 * token embedding when the file ties them. Weights are dequantized to F32 at load.
 *
 * A forward call takes a batch of sequences, each with new tokens that continue its
 * cached positions; their keys and values go into the paged KV pool through each
 * sequence's block table (which must already cover the new positions). Attention is
 * causal over every cached position of the sequence. Logits come back for the last new
 * token of each sequence, or for every new token (teacher forcing).
 *
 * Threads: one caller at a time per model (the engine thread); the backend spreads the
 * work over its own threads.
 */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include "kvcache.h"

#include <stddef.h>
#include <stdint.h>

struct eng_hparams {
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    int n_rot;           /* rotated dimensions per head */
    float rope_base;     /* theta */
    float rope_scale;    /* linear position scaling (1: none) */
    float rms_eps;
    int tied_output;
};

typedef struct eng_model eng_model;

/* backend.h: a device backend's creator (the CUDA plugin's) */
struct eng_weights;
struct eng_backend_i;
typedef int (*eng_backend_create_fn)(const struct eng_weights *w,
                                     void (*progress)(void *ud, double fraction),
                                     void *progress_ud, const struct eng_backend_i **vt,
                                     void **ctx, char *err, size_t errlen);

struct eng_options {
    int threads; /* 0: one per core */
    /* 1: the CPU's matrix products round activations to 8 bits, as llama.cpp does
     * (engine.cpu_matmul = int8; Q4_1 and Q8_0 weights, AVX2 or AVX512-VNNI); 0: F32 */
    int int8;
    /* optional: run the forward pass on this backend instead of the CPU; the weights
     * then live on its device and the host copies are freed after the upload */
    eng_backend_create_fn backend;
    /* optional: called on the loading thread with the fraction of weights loaded */
    void (*progress)(void *ud, double fraction);
    void *progress_ud;
};

int eng_model_load(const char *path, const struct eng_options *opt, eng_model **out,
                   char *err, size_t errlen);
void eng_model_destroy(eng_model *m); /* accepts NULL */
const struct eng_hparams *eng_model_hparams(const eng_model *m);
/* The GGUF file, for the tokenizer and the chat template. Borrowed. */
struct gguf_file *eng_model_gguf(const eng_model *m);
/* The bytes the weights take in the process's own memory: F32 copies, stored and regrouped
 * forms, norms, RoPE's frequencies (what the engine reads from the mapped file in place is
 * not counted, nor a device's memory). */
size_t eng_model_host_bytes(const eng_model *m);

enum eng_logits { ENG_LOGITS_NONE = 0, ENG_LOGITS_LAST, ENG_LOGITS_ALL };

struct eng_seq {
    const int32_t *tokens; /* [n_new] */
    int n_new;
    int pos0;                   /* positions already cached */
    const int32_t *block_table; /* covers positions [0, pos0 + n_new) */
    enum eng_logits logits;
};

/* On the CPU without int8 products, passes of up to this many tokens run matrix-vector
 * kernels; longer ones compute each token's products the same way whatever else the pass
 * holds (the scheduler leaves a cached prompt more than this many tokens to compute). With
 * AVX-512, or AVX2 with F16C, the regrouped matrices (Q4_0, Q4_1, Q8_0) compute them that
 * way in every pass. */
#define ENG_ROWS_MAX_T 3

/*
 * Runs the batch. logits (out): rows in sequence order, one per requested token,
 * [rows][n_vocab]. Returns 0 or an ENG_ error.
 */
int eng_forward(eng_model *m, kvc_pool *kv, const struct eng_seq *seqs, int n_seqs,
                float *logits);

/* 1 when the CPU's matrix products round activations to 8 bits (eng_options.int8 on a
 * processor with AVX2), 0 when they are F32 */
int eng_model_int8(const eng_model *m);
/* 1 when every matrix product sums a token's terms in the same order whatever its pass
 * holds (the 8-bit products; or the F32 ones on AVX2 without AVX-512, where every pass
 * runs over the regrouped weights) and every token attends by itself over a KV pool of
 * this dtype (AVX-512, a head shape the direct attention kernel takes, and for KVC_BF16
 * the BF16 dot products, for KVC_Q8_0 the 8-bit ones; or AVX2 with KVC_F32 or KVC_F16 and
 * heads of a multiple of 8 dimensions): a token's logits then depend on nothing else in
 * its pass, so a prompt gives bit-identical logits however it is batched, chunked or found
 * in the prefix cache */
int eng_model_token_invariant(const eng_model *m, enum kvc_dtype kv_dtype);
/* The x86 kernels the CPU's passes use: "avx512-vnni", "avx512", "avx2", "avx2 without
 * f16c" or "portable" (what the processor has, capped by CACHEGATE_CPU_ISA = avx512, avx2
 * or portable in the environment; a model does not load where it names none of those). */
const char *eng_model_cpu_isa(void);
/* "cpu", or the device backend's description ("cuda:0 NVIDIA H100 ..."). */
const char *eng_model_device(const eng_model *m);
/* 1 when the KV storage must be on the backend's device (kvc_shape.device_storage). */
int eng_model_kv_on_device(const eng_model *m);
/* KV blocks of this shape that fit in `fraction` of the device's free memory;
 * ENG_ENOTSUP on the CPU backend. */
int eng_model_kv_capacity(eng_model *m, const struct kvc_shape *shape, double fraction,
                          int *n_blocks /* out */);
/* 1 when the backend samples on its device (eng_model_sample() is then available). */
int eng_model_samples_on_device(const eng_model *m);
/* Samples rows of the last forward pass (called with logits NULL) on the device;
 * ENG_ENOTSUP when the backend cannot (the caller then asks for logits). */
struct eng_sample_row;
struct eng_logit_adj;
int eng_model_sample(eng_model *m, const struct eng_sample_row *rows, int n,
                     const struct eng_logit_adj *adj, int n_adj, int32_t *tokens /* out */);

#endif
