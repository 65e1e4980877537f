/*
 * ops_cpu — the CPU backend's single operations (model.c), for tests that hold another
 * backend's ops against them. Shapes as in model.c; every buffer is host F32, row-major.
 */
#ifndef ENG_OPS_CPU_H
#define ENG_OPS_CPU_H

#include "kvcache.h"

#include <stdint.h>

/* out[t][d] = x / rms(x) * g; out may be x */
void eng_cpu_rmsnorm(float *out, const float *x, const float *g, int t, int d, float eps);
/* In place on x [t][n_heads][hd]: adjacent pairs of the first n_rot dims of each head
 * rotated by pos[i] * inv[pair] */
void eng_cpu_rope(float *x, const int *pos, int t, int n_heads, int hd, int n_rot,
                  const float *inv);
/* out[t][n_ff] = silu(gate) * up, gate_up [t][2 * n_ff] (gate first) */
void eng_cpu_swiglu(float *out, const float *gate_up, int t, int n_ff);
/* Causal attention of one sequence's n_new queries (positions pos0 ..) over positions
 * [0, pos0 + n_new) whose keys and values are already in the host pool kv (layer, block
 * table): q, out [n_new][n_head * hd]; scale 1/sqrt(hd). Does nothing for a pool on a
 * device or a shape that does not match. */
void eng_cpu_attention(const float *q, int n_new, int pos0, kvc_pool *kv, int layer,
                       const int32_t *table, int n_head, int n_kv, int hd, float *out);

#endif
