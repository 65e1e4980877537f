/*
 * ops_cuda — the CUDA backend's single operations on host buffers, for the GPU tests and
 * the benchmark (make test-gpu, tests/bench/bench_gpu.c). The plugin exports one table of
 * them, eng_cuda_test_ops_table (gw_cuda_plugin()->eng_test_ops).
 *
 * Every op copies its inputs to the device, runs the kernel the forward pass runs, copies
 * the result back and frees what it allocated; it runs on device 0 and synchronizes before
 * returning. Values go through the dtypes the forward pass uses: the GEMM's weights and
 * inputs are rounded to F16, RMSNorm's output is F16 (as it feeds a GEMM), keys and values
 * are stored as F16, attention's output is F16. Each returns 0 or an ENG_ error with a
 * message in err.
 *
 * Threads: any, one op at a time per thread; ops share nothing with a backend context
 * except those that take one (set_graphs, graph_stats).
 */
#ifndef ENG_OPS_CUDA_H
#define ENG_OPS_CUDA_H

#include "backend.h"
#include "kvcache.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

struct eng_cuda_test_ops {
    /* out [t][d] = x / rms(x) * g, rounded to F16 */
    int (*rmsnorm)(float *out, const float *x, const float *g, int t, int d, float eps,
                   char *err, size_t errlen);
    /* In place on x [t][n_heads * hd]: rotates adjacent pairs of the first n_rot dims of
     * every head by pos[i] * inv[p] (inv: [n_rot / 2]). */
    int (*rope)(float *x, const int *pos, int t, int n_heads, int hd, int n_rot,
                const float *inv, char *err, size_t errlen);
    /* out [t][n_ff] = silu(gate) * up, gate_up [t][2 * n_ff]; rounded to F16 */
    int (*swiglu)(float *out, const float *gate_up, int t, int n_ff, char *err, size_t errlen);
    /* y [t][n] (+)= x W^T with W [n][k] and x [t][k] rounded to F16, F32 accumulation */
    int (*gemm)(float *y, const float *x, const float *w, int t, int n, int k, int accumulate,
                char *err, size_t errlen);
    /*
     * Paged KV write + attention for a batch of sequences, as one forward layer does it.
     * k_layer, v_layer: one layer's keys and values, [n_blocks][block_size][n_kv][hd]
     * floats (the shape's n_blocks; not the host pool's layout, kvcache.h): positions [0, pos0) of each sequence are uploaded as its cached
     * prefix; positions [pos0, pos0 + n_new) are written by the KV-write kernel from the
     * same host values (the device slots are poisoned with NaN first). Sequences with
     * n_new == 1 go through the decode kernel, the others through the prefill kernel.
     * q: [T][n_head * hd] (T = the sum of n_new, in sequence order); out: the same shape.
     * seqs[].tokens and .logits are ignored.
     */
    int (*attention)(const float *k_layer, const float *v_layer, const struct kvc_shape *shape,
                     const struct eng_seq *seqs, int n_seqs, const float *q, int n_head,
                     float *out, char *err, size_t errlen);
    /* The sampler of eng_backend_i.sample on host logits [n_rows][n_vocab]. */
    int (*sample)(const float *logits, int n_rows, int n_vocab, const struct eng_sample_row *rows,
                  int n, const struct eng_logit_adj *adj, int n_adj, int32_t *tokens /* out */,
                  char *err, size_t errlen);
    /* Device-to-device cudaMemcpy of `bytes`, reps times: bytes read + written per second. */
    int (*bandwidth)(size_t bytes, int reps, double *bytes_per_s /* out */, char *err,
                     size_t errlen);
    /* On a context from eng_cuda_create(): decode steps through CUDA graphs (1, default)
     * or launched kernel by kernel (0). */
    int (*set_graphs)(void *ctx, int on);
    /* On such a context: graphs captured and decode steps replayed through one so far. */
    void (*graph_stats)(void *ctx, long *captures /* out */, long *replays /* out */);
};

#ifdef __cplusplus
extern "C" {
#endif
extern const struct eng_cuda_test_ops eng_cuda_test_ops_table;
int eng_cuda_create(const struct eng_weights *w, void (*progress)(void *, double), void *ud,
                    const struct eng_backend_i **vt, void **ctx, char *err, size_t errlen);
#ifdef __cplusplus
}
#endif

#endif
