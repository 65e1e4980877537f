/* tests engine/backend_cuda.cu (make test-gpu): every single op against the CPU backend's
 * (engine/ops_cpu.h) on random inputs of several shapes, each with its tolerance and the
 * largest difference seen; the backend on its own (decode graphs against kernel-by-kernel
 * launches, sampling on the device); then whole passes of the default model on the CUDA
 * backend against the CPU one, and the scheduler's invariants on the CUDA backend. */
#include "gpu_plugin.h"

#include "engine.h"
#include "kvcache.h"
#include "model.h"
#include "ops_cpu.h"
#include "ops_cuda.h"
#include "sampler.h"
#include "scheduler.h"
#include "tokenizer.h"
#include "../engine/sched_out.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

static const struct eng_cuda_test_ops *ops(void)
{
    const struct gw_cuda_plugin *p = gpu_plugin();
    cr_assert(p->eng_test_ops, "the plugin was built without engine/backend_cuda.cu");
    return p->eng_test_ops;
}

/* a small deterministic generator, so that a failure repeats */
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}
static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)urand();
}
static float *rand_buf(size_t n, float lo, float hi)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    cr_assert(p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand(lo, hi);
    return p;
}

/* ------------------------------------------------------------------ single ops */

TestSuite(ops, .timeout = 120);

Test(ops, rmsnorm)
{
    /* tolerance: the output is rounded to F16 (relative 2^-11) on top of float sums:
     * |gpu - cpu| <= 1e-3 |cpu| + 1e-5 */
    /* rows held in registers (d a multiple of 4, at most 4096), and the plain loop (not a
     * multiple of 4; longer) */
    const int shapes[][2] = {{1, 64}, {7, 576}, {33, 2048}, {3, 4096}, {3, 70}, {2, 5000}};
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int t = shapes[s][0], d = shapes[s][1];
        float *x = rand_buf((size_t)t * d, -3, 3), *g = rand_buf(d, 0.5f, 1.5f);
        float *a = malloc(sizeof(float) * t * d), *b = malloc(sizeof(float) * t * d);
        char err[512];
        eng_cpu_rmsnorm(a, x, g, t, d, 1e-5f);
        cr_assert_eq(ops()->rmsnorm(b, x, g, t, d, 1e-5f, err, sizeof err), 0, "%s", err);
        for (int i = 0; i < t * d; i++) {
            double e = fabs(a[i] - b[i]);
            worst = e / (fabs(a[i]) + 1e-2) > worst ? e / (fabs(a[i]) + 1e-2) : worst;
            cr_assert(e <= 1e-3 * fabs(a[i]) + 1e-5, "[%d x %d] at %d: cpu %g gpu %g", t, d, i,
                      a[i], b[i]);
        }
        free(x), free(g), free(a), free(b);
    }
    fprintf(stderr, "rmsnorm: largest relative difference %.3g (tolerance 1e-3)\n", worst);
}

Test(ops, rope)
{
    /* tolerance: both F32 with the same float angle; CUDA's sinf/cosf are within 2 ulp:
     * |gpu - cpu| <= 1e-5 (|a| + |b|) + 1e-6 */
    struct {
        int t, heads, hd, n_rot;
        float base;
    } cases[] = {{5, 9, 64, 64, 10000.0f}, {3, 4, 128, 64, 500000.0f}, {17, 8, 128, 128, 1e6f}};
    double worst = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int t = cases[c].t, H = cases[c].heads, hd = cases[c].hd, nr = cases[c].n_rot;
        size_t n = (size_t)t * H * hd;
        float *x = rand_buf(n, -2, 2), *a = malloc(sizeof(float) * n),
              *b = malloc(sizeof(float) * n);
        float inv[64];
        int pos[32];
        for (int i = 0; i < nr / 2; i++)
            inv[i] = (float)pow(cases[c].base, -2.0 * i / nr);
        for (int i = 0; i < t; i++)
            pos[i] = i == 0 ? 0 : (int)(urand() * 8192);
        memcpy(a, x, sizeof(float) * n);
        memcpy(b, x, sizeof(float) * n);
        char err[512];
        eng_cpu_rope(a, pos, t, H, hd, nr, inv);
        cr_assert_eq(ops()->rope(b, pos, t, H, hd, nr, inv, err, sizeof err), 0, "%s", err);
        for (size_t i = 0; i < n; i += 2) {
            double e = fmax(fabs(a[i] - b[i]), fabs(a[i + 1] - b[i + 1]));
            double tol = 1e-5 * (fabs(x[i]) + fabs(x[i + 1])) + 1e-6;
            worst = e > worst ? e : worst;
            cr_assert(e <= tol, "case %zu at %zu: cpu (%g, %g) gpu (%g, %g)", c, i, a[i], a[i + 1],
                      b[i], b[i + 1]);
        }
        free(x), free(a), free(b);
    }
    fprintf(stderr, "rope: largest difference %.3g\n", worst);
}

Test(ops, swiglu)
{
    /* tolerance: F16 output: |gpu - cpu| <= 1e-3 |cpu| + 1e-5 */
    const int shapes[][2] = {{1, 64}, {3, 1536}, {9, 8192}};
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int t = shapes[s][0], F = shapes[s][1];
        float *gu = rand_buf((size_t)t * 2 * F, -8, 8);
        float *a = malloc(sizeof(float) * t * F), *b = malloc(sizeof(float) * t * F);
        char err[512];
        eng_cpu_swiglu(a, gu, t, F);
        cr_assert_eq(ops()->swiglu(b, gu, t, F, err, sizeof err), 0, "%s", err);
        for (int i = 0; i < t * F; i++) {
            double e = fabs(a[i] - b[i]);
            worst = e > worst ? e : worst;
            cr_assert(e <= 1e-3 * fabs(a[i]) + 1e-5, "at %d: cpu %g gpu %g", i, a[i], b[i]);
        }
        free(gu), free(a), free(b);
    }
    fprintf(stderr, "swiglu: largest difference %.3g\n", worst);
}

Test(ops, gemm_f16_weights_against_f32)
{
    /* y = x W^T with x and W rounded to F16 (relative 2^-11 each), F32 accumulation:
     * |gpu - ref| <= 1.5e-3 * sum_i |x_i w_i| + 1e-5, ref in double from the F32 inputs */
    /* up to 2 tokens: the GEMV kernel, one warp a row (k < 4096), two (k 4096..8191) or
     * four (k >= 8192); more tokens: cuBLAS */
    const int shapes[][3] = {{1, 576, 576},  {13, 1536, 576}, {64, 2048, 8192}, {3, 1000, 72},
                             {2, 301, 4096}, {1, 203, 8200},  {2, 203, 8200},   {2, 640, 1000},
                             {5, 77, 16384}};
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int t = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            float *x = rand_buf((size_t)t * k, -1, 1), *w = rand_buf((size_t)n * k, -0.05f, 0.05f);
            float *y = rand_buf((size_t)t * n, -1, 1), *y0 = malloc(sizeof(float) * t * n);
            memcpy(y0, y, sizeof(float) * t * n);
            char err[512];
            cr_assert_eq(ops()->gemm(y, x, w, t, n, k, accumulate, err, sizeof err), 0, "%s", err);
            for (int i = 0; i < t; i++)
                for (int j = 0; j < n; j++) {
                    double ref = accumulate ? y0[(size_t)i * n + j] : 0, mag = 0;
                    for (int e = 0; e < k; e++) {
                        double p = (double)x[(size_t)i * k + e] * w[(size_t)j * k + e];
                        ref += p;
                        mag += fabs(p);
                    }
                    double d = fabs(y[(size_t)i * n + j] - ref);
                    worst = d / (mag + 1e-9) > worst ? d / (mag + 1e-9) : worst;
                    cr_assert(d <= 1.5e-3 * mag + 1e-5, "[%d %d %d] (%d, %d): ref %g gpu %g", t, n,
                              k, i, j, ref, y[(size_t)i * n + j]);
                }
            free(x), free(w), free(y), free(y0);
        }
    }
    fprintf(stderr, "gemm: largest error relative to sum |x w|: %.3g (tolerance 1.5e-3)\n", worst);
}

/* One attention case: a batch of sequences (n_new, pos0) over a pool whose blocks are handed
 * out shuffled, so that tables are not contiguous. */
static double attention_case(int hd, int n_head, int n_kv, const int (*sp)[2], int n_seqs)
{
    const int bs = 16, layer = 1, HQ = n_head * hd, HK = n_kv * hd;
    int need = 0, T = 0;
    for (int s = 0; s < n_seqs; s++) {
        need += (sp[s][0] + sp[s][1] + bs - 1) / bs;
        T += sp[s][0];
    }
    struct kvc_shape ks = {2, n_kv, hd, bs, need + 3, 0, KVC_F32};
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    int32_t *ids = malloc(sizeof *ids * need);
    for (int i = 0; i < need; i++)
        cr_assert_eq(kvc_alloc(kv, &ids[i]), 0);
    for (int i = need - 1; i > 0; i--) { /* shuffle */
        int j = (int)(urand() * (i + 1));
        int32_t x = ids[i];
        ids[i] = ids[j];
        ids[j] = x;
    }
    struct eng_seq seqs[8];
    int32_t *tables[8];
    /* one layer's keys and values as the op takes them: [n_blocks][block_size][n_kv][hd] */
    float *kl = calloc((size_t)ks.n_blocks * bs * HK, sizeof(float));
    float *vl = calloc((size_t)ks.n_blocks * bs * HK, sizeof(float));
    for (int s = 0, used = 0; s < n_seqs; s++) {
        int n = sp[s][0], pos0 = sp[s][1], nb = (pos0 + n + bs - 1) / bs;
        tables[s] = ids + used;
        used += nb;
        seqs[s] = (struct eng_seq){NULL, n, pos0, tables[s], ENG_LOGITS_NONE};
        for (int p = 0; p < pos0 + n; p++) { /* every position's key and value, prefix and new */
            int32_t blk = tables[s][p / bs];
            for (int i = 0; i < HK; i++) { /* the pool's layout (kvcache.h), and the op's */
                float *k = kvc_k_head(kv, layer, blk, i / hd);
                float *v = kvc_v_head(kv, layer, blk, i / hd);
                size_t at = ((size_t)blk * bs + p % bs) * HK + i;
                kl[at] = k[(size_t)(i % hd) * bs + p % bs] = frand(-1, 1);
                vl[at] = v[(size_t)(p % bs) * hd + i % hd] = frand(-1, 1);
            }
        }
    }
    float *q = rand_buf((size_t)T * HQ, -2, 2);
    float *a = malloc(sizeof(float) * T * HQ), *b = malloc(sizeof(float) * T * HQ);
    for (int s = 0, t = 0; s < n_seqs; t += seqs[s].n_new, s++)
        eng_cpu_attention(q + (size_t)t * HQ, seqs[s].n_new, seqs[s].pos0, kv, layer, tables[s],
                          n_head, n_kv, hd, a + (size_t)t * HQ);
    char err[512];
    cr_assert_eq(ops()->attention(kl, vl, kvc_shape(kv),
                                  seqs, n_seqs, q, n_head, b, err, sizeof err),
                 0, "%s", err);
    double worst = 0;
    for (int s = 0, t = 0; s < n_seqs; t += seqs[s].n_new, s++)
        for (int i = 0; i < seqs[s].n_new * HQ; i++) {
            size_t at = (size_t)t * HQ + i;
            double e = fabs(a[at] - b[at]);
            worst = e > worst ? e : worst;
            /* keys, values and the output in F16: outputs are averages of values in [-1, 1] */
            cr_assert(e <= 5e-3,
                      "hd %d heads %d/%d, sequence %d (n_new %d, pos0 %d), token %d "
                      "head %d dim %d: cpu %g gpu %g",
                      hd, n_head, n_kv, s, seqs[s].n_new, seqs[s].pos0, i / HQ, i % HQ / hd, i % hd,
                      a[at], b[at]);
        }
    free(q), free(a), free(b), free(ids), free(kl), free(vl);
    kvc_destroy(kv);
    return worst;
}

Test(ops, paged_attention_decode_and_prefill)
{
    /* (n_new, pos0): decodes inside and across blocks, at position 0 and far; prefills
     * fresh, over a cached prefix, across the 64-row tiles and 32-key tiles */
    static const int batch[][2] = {{1, 37},  {45, 20}, {70, 0},  {1, 0},
                                   {1, 300}, {2, 15},  {130, 33}};
    static const int longdec[][2] = {{1, 3000}, {1, 4100}};
    static const int heads[][3] = {/* hd, n_head, n_kv: groups 1, 3, 8, 4 and 16 (above the
                                    * decode kernel's 8: one-token sequences then go through
                                    * the prefill kernel, 4 tokens a tile) */
                                   {64, 4, 4},  {128, 6, 2}, {64, 16, 2}, {128, 8, 1},
                                   {64, 32, 8}, {128, 3, 3}, {64, 16, 1}};
    double worst = 0;
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++) {
        double e = attention_case(heads[h][0], heads[h][1], heads[h][2], batch, 7);
        worst = e > worst ? e : worst;
        /* decode alone, the graphs' case */
        e = attention_case(heads[h][0], heads[h][1], heads[h][2], batch + 4, 1);
        worst = e > worst ? e : worst;
        /* long contexts: a range of the context holds several chunks of 32 keys a warp */
        e = attention_case(heads[h][0], heads[h][1], heads[h][2], longdec, 2);
        worst = e > worst ? e : worst;
    }
    fprintf(stderr, "attention: largest difference %.3g (tolerance 5e-3)\n", worst);
}

/* ------------------------------------------------------------------ sampling */

struct ranked {
    float v;
    int id;
};
static int by_rank(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id - y->id;
}

/* Checks token `got` against the documented semantics (kernels_cuda.cuh): the draw's r lies
 * within [before, after) of the token's interval in the draw order, up to 1e-6 of the
 * total (float weights, sums in another order). */
static void check_draw(const float *lg, int V, const struct eng_sample_row *r, int got)
{
    struct ranked *c = malloc(sizeof *c * V);
    float vmax = -INFINITY;
    int K = 0;
    for (int i = 0; i < V; i++) {
        float v = lg[i] / r->temperature;
        v = v == v ? v : -INFINITY;
        if (v > vmax) vmax = v;
        c[i] = (struct ranked){v == 0.0f ? 0.0f : v, i};
    }
    int filtered = (r->top_k > 0 && r->top_k < V) || r->top_p < 1.0f || r->min_p > 0.0f;
    if (filtered) {
        qsort(c, V, sizeof *c, by_rank);
        while (K < V && c[K].v > -INFINITY)
            K++;
        if (r->top_k > 0 && r->top_k < K) K = r->top_k;
    } else {
        K = V;
    }
    double *w = malloc(sizeof *w * V), total = 0;
    for (int i = 0; i < K; i++) {
        float x = c[i].v - vmax;
        w[i] = x >= -87.0f ? (double)expf(x) : 0.0;
        total += w[i];
    }
    int m = K;
    if (filtered && r->top_p < 1.0f) {
        double acc = 0, target = r->top_p * total;
        for (m = 0; m < K && acc < target;)
            acc += w[m++];
        /* near the edge, either side is right */
        total = acc;
    }
    if (r->min_p > 0.0f) {
        /* weights >= min_p of the largest (1): a prefix */
        int keep = 0;
        while (keep < m && w[keep] >= r->min_p)
            keep++;
        m = keep > 0 ? keep : 1;
        total = 0;
        for (int i = 0; i < m; i++)
            total += w[i];
    }
    double at = r->u * total, before = 0;
    int pos = -1;
    for (int i = 0; i < K; i++)
        if (c[i].id == got) {
            pos = i;
            break;
        }
    cr_assert(pos >= 0, "token %d is not a candidate", got);
    for (int i = 0; i < pos; i++)
        before += w[i];
    double eps = 1e-6 * total;
    cr_assert(pos < m + 1 && at >= before - eps && at < before + w[pos] + eps,
              "token %d (rank %d of %d kept): r %.9g outside [%.9g, %.9g)", got, pos, m, at, before,
              before + w[pos]);
    free(c), free(w);
}

Test(ops, sampling)
{
    const int V = 128256, R = 12;
    float *lg = rand_buf((size_t)R * V, -10, 10);
    /* row 1: a tie for the maximum, the lower id wins; row 2: NaN and -inf entries;
     * row 3: everything -inf (greedy: 0) */
    lg[(size_t)1 * V + 70000] = 50.0f;
    lg[(size_t)1 * V + 500] = 50.0f;
    for (int i = 0; i < V; i += 7)
        lg[(size_t)2 * V + i] = i % 2 ? NAN : -INFINITY;
    for (int i = 0; i < V; i++)
        lg[(size_t)3 * V + i] = -INFINITY;
    struct eng_sample_row rows[] = {
        {0, 0.0f, 0, 1.0f, 0.5f, 0, 0, 0.0f},      {1, 0.0f, 0, 1.0f, 0.5f, 0, 0, 0.0f},
        {2, 0.0f, 0, 1.0f, 0.5f, 0, 0, 0.0f},      {3, 0.0f, 0, 1.0f, 0.5f, 0, 0, 0.0f},
        {4, 1.0f, 0, 1.0f, 0.3f, 0, 0, 0.0f},      {5, 0.7f, 0, 1.0f, 0.999f, 0, 0, 0.0f},
        {6, 1.0f, 40, 1.0f, 0.5f, 0, 0, 0.0f},     {7, 1.3f, 0, 0.9f, 0.25f, 0, 0, 0.0f},
        {8, 0.8f, 100, 0.8f, 0.75f, 0, 0, 0.0f},   {9, 1.0f, 1, 1.0f, 0.9f, 0, 0, 0.0f},
        {10, 2.0f, 0, 0.95f, 0.0f, 0, 0, 0.0f},    {11, 0.5f, V - 1, 0.5f, 0.6f, 0, 0, 0.0f},
        {2, 1.0f, 0, 1.0f, 0.4f, 0, 0, 0.0f},      {1, 1.0f, 5, 0.9f, 0.1f, 0, 0, 0.0f},
        /* min_p alone, after top_p, after top_k, and 1 (the most likely token alone) */
        {4, 1.0f, 0, 1.0f, 0.7f, 0, 0, 0.5f},      {7, 1.3f, 0, 0.9f, 0.45f, 0, 0, 0.3f},
        {8, 0.8f, 100, 1.0f, 0.2f, 0, 0, 0.9f},    {5, 1.0f, 0, 1.0f, 0.99f, 0, 0, 1.0f},
    };
    const int n = sizeof rows / sizeof rows[0];
    int32_t got[sizeof rows / sizeof rows[0]];
    char err[512];
    cr_assert_eq(ops()->sample(lg, R, V, rows, n, NULL, 0, got, err, sizeof err), 0, "%s", err);
    struct eng_sampling sp;
    eng_sampling_default(&sp);
    sp.temperature = 0;
    eng_sampler *s;
    cr_assert_eq(eng_sampler_create(&sp, V, &s), 0);
    float *copy = malloc(sizeof(float) * V);
    for (int i = 0; i < n; i++) {
        const float *row = lg + (size_t)rows[i].row * V;
        memcpy(copy, row, sizeof(float) * V);
        int32_t greedy = eng_sampler_sample(s, copy); /* the CPU sampler's choice */
        if (rows[i].temperature <= 0 || rows[i].top_k == 1) {
            cr_assert_eq(got[i], greedy, "row %d: gpu %d, cpu sampler %d", i, got[i], greedy);
        } else {
            check_draw(row, V, &rows[i], got[i]);
        }
    }
    cr_assert_eq(got[1], 500, "ties go to the lower id");
    cr_assert_eq(got[3], 0);
    int best5 = 0;
    for (int i = 1; i < V; i++)
        best5 = lg[(size_t)5 * V + i] > lg[(size_t)5 * V + best5] ? i : best5;
    cr_assert_eq(got[n - 1], best5, "min_p 1 keeps the most likely token alone");

    /* With amounts (logit_bias, then penalties; sampler.h): each row is sampled from a copy
     * of its logits with its amounts added in order, so greedy rows pick what the CPU
     * sampler picks, drawn rows follow the changed row, and two rows reading one logits row
     * each get only their own amounts. */
    struct eng_logit_bias bias[] = {{500, -100.0f}, {70000, -100.0f}, {1234, 30.0f}};
    struct eng_sampling bp;
    eng_sampling_default(&bp);
    bp.temperature = 0;
    bp.logit_bias = bias;
    bp.n_logit_bias = 3;
    bp.presence_penalty = 0.7f;
    bp.frequency_penalty = 0.9f;
    eng_sampler *b;
    cr_assert_eq(eng_sampler_create(&bp, V, &b), 0);
    eng_sampler_accept(b, 1234);
    eng_sampler_accept(b, 1234);
    eng_sampler_accept(b, 99);
    const int na = eng_sampler_device_adj(b);
    cr_assert_eq(na, 5);
    struct eng_logit_adj adj[5];
    struct eng_sample_row tmpl;
    eng_sampler_device_row(b, &tmpl, adj);
    struct eng_sample_row ar[] = {
        {1, 0.0f, 0, 1.0f, 0.5f, 0, na, 0.0f},  {1, 1.0f, 0, 1.0f, 0.3f, 0, 0, 0.0f},
        {0, 0.0f, 0, 1.0f, 0.5f, 0, 0, 0.0f},   {5, 0.8f, 40, 0.9f, 0.6f, 0, na, 0.0f},
        {6, 1.0f, 0, 1.0f, 0.8f, 2, 3, 0.0f},   {1, 1.0f, 1, 1.0f, 0.5f, 0, na, 0.0f},
    };
    const int an = sizeof ar / sizeof ar[0];
    int32_t agot[sizeof ar / sizeof ar[0]];
    cr_assert_eq(ops()->sample(lg, R, V, ar, an, adj, na, agot, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < an; i++) {
        memcpy(copy, lg + (size_t)ar[i].row * V, sizeof(float) * V);
        for (int j = ar[i].adj_first; j < ar[i].adj_first + ar[i].n_adj; j++)
            copy[adj[j].token] += adj[j].add;
        if (ar[i].temperature <= 0 || ar[i].top_k == 1) {
            /* the CPU sampler adds the same amounts itself */
            memcpy(copy, lg + (size_t)ar[i].row * V, sizeof(float) * V);
            int32_t want = eng_sampler_sample(ar[i].n_adj ? b : s, copy);
            cr_assert_eq(agot[i], want, "row %d: gpu %d, cpu sampler %d", i, agot[i], want);
        } else {
            check_draw(copy, V, &ar[i], agot[i]);
        }
    }
    cr_assert_eq(agot[0], 1234, "the bias beats the tie at 50 less the penalties");
    cr_assert_eq(agot[5], 1234);
    cr_assert(agot[1] != 1234 && agot[2] == got[0], "rows without amounts are unchanged");
    /* amounts outside the list or tokens outside the vocabulary are refused */
    struct eng_sample_row bad = {0, 0.0f, 0, 1.0f, 0.5f, 3, 3, 0.0f};
    cr_assert_neq(ops()->sample(lg, R, V, &bad, 1, adj, na, agot, err, sizeof err), 0);
    struct eng_logit_adj out_of_vocab = {V, 1.0f};
    bad.adj_first = 0, bad.n_adj = 1;
    cr_assert_neq(ops()->sample(lg, R, V, &bad, 1, &out_of_vocab, 1, agot, err, sizeof err), 0);
    eng_sampler_destroy(b);
    eng_sampler_destroy(s);
    free(copy), free(lg);
}

/* ------------------------------------------------------------------ the backend alone */

struct synth {
    struct eng_weights w;
    struct eng_layer_weights layers[2];
    const struct eng_backend_i *vt;
    void *ctx;
};

/* A small model with random weights (NULL pointers) made on the device. */
static void synth_create(struct synth *m)
{
    memset(m, 0, sizeof *m);
    struct eng_hparams hp = {.n_layer = 2,
                             .n_embd = 256,
                             .n_head = 8,
                             .n_head_kv = 2,
                             .head_dim = 64,
                             .n_ff = 512,
                             .n_vocab = 1000,
                             .n_ctx_train = 4096,
                             .n_rot = 64,
                             .rope_base = 10000.0f,
                             .rope_scale = 1.0f,
                             .rms_eps = 1e-5f,
                             .tied_output = 1};
    m->w.hp = hp;
    int HQ = 8 * 64, HK = 2 * 64;
    for (int l = 0; l < 2; l++)
        m->layers[l] = (struct eng_layer_weights){NULL,
                                                  NULL,
                                                  {NULL, HQ + 2 * HK, 256},
                                                  {NULL, 256, HQ},
                                                  {NULL, 1024, 256},
                                                  {NULL, 256, 512}};
    m->w.output = (struct eng_weight){NULL, 1000, 256};
    m->w.layers = m->layers;
    m->w.seed = 42;
    char err[512];
    cr_assert_eq(gpu_plugin()->eng_create(&m->w, NULL, NULL, &m->vt, &m->ctx, err, sizeof err), 0,
                 "%s", err);
    struct kvc_shape ks = {2, 2, 64, 16, 64, 1, KVC_F32};
    cr_assert_eq(m->vt->kv_init(m->ctx, &ks), 0, "%s", m->vt->last_error(m->ctx));
}

TestSuite(backend, .timeout = 120);

Test(backend, decode_graphs_match_kernel_by_kernel)
{
    /* two contexts with the same random weights: graphs and (on sm_90 and later)
     * programmatic dependent launch on, and both off; a prefill of 3 sequences, then 12
     * decode steps. Tolerance on logits (of magnitude ~1): 1e-2, from GEMMs run at padded and
     * unpadded batch sizes; the greedy tokens must agree. */
    struct synth a, b;
    synth_create(&a);
    setenv("CACHEGATE_CUDA_PDL", "0", 1); /* read when a context is made */
    synth_create(&b);
    unsetenv("CACHEGATE_CUDA_PDL");
    cr_assert_eq(ops()->set_graphs(b.ctx, 0), 0);
    const int V = 1000, n = 3, P = 20, steps = 12;
    int32_t tables[3][4] = {{0, 1, 2, 3}, {10, 11, 12, 13}, {5, 6, 7, 8}};
    int32_t toks[3][64];
    float *la = malloc(sizeof(float) * n * V * P), *lb = malloc(sizeof(float) * n * V * P);
    struct eng_seq seqs[3];
    for (int s = 0; s < n; s++) {
        for (int i = 0; i < P; i++)
            toks[s][i] = (int32_t)(urand() * V);
        seqs[s] = (struct eng_seq){toks[s], P - 2 * s, 0, tables[s], ENG_LOGITS_LAST};
    }
    cr_assert_eq(a.vt->forward(a.ctx, seqs, n, la), 0, "%s", a.vt->last_error(a.ctx));
    cr_assert_eq(b.vt->forward(b.ctx, seqs, n, lb), 0, "%s", b.vt->last_error(b.ctx));
    double worst = 0;
    for (int step = 0; step < steps; step++) {
        for (int s = 0; s < n; s++) {
            int len = seqs[s].pos0 + seqs[s].n_new, best = 0;
            for (int v = 1; v < V; v++)
                best = la[(size_t)s * V + v] > la[(size_t)s * V + best] ? v : best;
            for (int v = 0; v < V; v++) {
                double e = fabs(la[(size_t)s * V + v] - lb[(size_t)s * V + v]);
                worst = e > worst ? e : worst;
            }
            toks[s][len] = best;
            seqs[s] = (struct eng_seq){&toks[s][len], 1, len, tables[s], ENG_LOGITS_LAST};
        }
        cr_assert(worst <= 1e-2, "step %d: logits differ by %g", step, worst);
        /* on the device: greedy sample of the last pass equals the host argmax */
        if (step > 0) {
            struct eng_sample_row r[3];
            int32_t t[3];
            for (int s = 0; s < n; s++)
                r[s] = (struct eng_sample_row){s, 0.0f, 0, 1.0f, 0.0f, 0, 0, 0.0f};
            cr_assert_eq(a.vt->sample(a.ctx, r, n, NULL, 0, t), 0, "%s",
                         a.vt->last_error(a.ctx));
            for (int s = 0; s < n; s++)
                cr_assert_eq(t[s], toks[s][seqs[s].pos0], "sequence %d", s);
        }
        cr_assert_eq(a.vt->forward(a.ctx, seqs, n, la), 0, "%s", a.vt->last_error(a.ctx));
        cr_assert_eq(b.vt->forward(b.ctx, seqs, n, lb), 0, "%s", b.vt->last_error(b.ctx));
    }
    long cap, rep;
    ops()->graph_stats(a.ctx, &cap, &rep);
    fprintf(stderr,
            "graphs: %ld captured, %ld replays; largest logit difference %.3g "
            "(tolerance 1e-2)\n",
            cap, rep, worst);
    cr_assert(cap >= 1 && rep >= steps - 1, "decode steps went through graphs");
    ops()->graph_stats(b.ctx, &cap, &rep);
    cr_assert_eq(cap + rep, 0);
    /* a block id outside the pool is refused, not written */
    int32_t bad[1] = {64};
    struct eng_seq q = {toks[0], 1, 0, bad, ENG_LOGITS_LAST};
    cr_assert_eq(a.vt->forward(a.ctx, &q, 1, la), ENG_EINVAL);
    cr_assert(strlen(a.vt->last_error(a.ctx)) > 0);
    a.vt->destroy(a.ctx);
    b.vt->destroy(b.ctx);
    free(la), free(lb);
}

/* ------------------------------------------------------------------ the default model */

static eng_model *cpu, *gpu;
static tok_vocab *vocab;

static void models_setup(void)
{
    char err[512];
    cr_assert_eq(eng_model_load(MODEL, NULL, &cpu, err, sizeof err), 0, "%s", err);
    struct eng_options opt = {0};
    opt.backend = gpu_plugin()->eng_create;
    cr_assert(opt.backend);
    cr_assert_eq(eng_model_load(MODEL, &opt, &gpu, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(eng_model_gguf(cpu), &vocab, err, sizeof err), 0, "%s", err);
}

static void models_teardown(void)
{
    tok_destroy(vocab);
    eng_model_destroy(gpu);
    eng_model_destroy(cpu);
}

static const char *prompts[] = {
    "The capital of France is",        "Once upon a time, there was a",
    "The three primary colors are",    "def fibonacci(n):",
    "Water boils at a temperature of", "The largest planet in the solar system is",
};
#define NP 6
#define NPOS 16

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static kvc_pool *pool_for(eng_model *m, int device)
{
    const struct eng_hparams *hp = eng_model_hparams(m);
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, 16, 64, device, KVC_F32};
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    return kv;
}

/* Greedy continuation of a prompt for n tokens, one eng_forward per token; keep (NULL: not
 * kept) receives each step's logits, [n][V]. */
static void greedy(eng_model *m, kvc_pool *kv, const int32_t *prompt, int np, int n, int32_t *out,
                   float *keep)
{
    const int V = eng_model_hparams(m)->n_vocab;
    int32_t toks[256], table[16];
    for (int i = 0; i < 16; i++)
        cr_assert_eq(kvc_alloc(kv, &table[i]), 0);
    memcpy(toks, prompt, sizeof *toks * np);
    float *lg = malloc(sizeof(float) * V);
    struct eng_seq s = {toks, np, 0, table, ENG_LOGITS_LAST};
    for (int i = 0; i < n; i++) {
        cr_assert_eq(eng_forward(m, kv, &s, 1, lg), 0);
        out[i] = toks[np + i] = argmax(lg, V);
        if (keep) memcpy(keep + (size_t)i * V, lg, sizeof(float) * V);
        s = (struct eng_seq){&toks[np + i], 1, np + i, table, ENG_LOGITS_LAST};
    }
    for (int i = 0; i < 16; i++)
        kvc_release(kv, table[i]);
    free(lg);
}

static int32_t *encode(const char *text, int *n)
{
    int32_t *ids = malloc(sizeof *ids * 256);
    cr_assert_eq(tok_encode(vocab, text, strlen(text), 0, ids, 256, n), 0);
    return ids;
}

/* models_setup() runs in each test's body: an assertion failing in .init makes criterion
 * report a crash instead of the reason (no GPU, no plugin) */
TestSuite(model, .fini = models_teardown, .timeout = 600);

Test(model, teacher_forced_top1_and_greedy_continuations)
{
    models_setup();
    kvc_pool *kc = pool_for(cpu, 0), *kg = pool_for(gpu, 1);
    const int V = eng_model_hparams(cpu)->n_vocab;
    int agree = 0, total = 0, near = 0, split = 0;
    double worst = 0;
    float *a = malloc(sizeof(float) * NPOS * V), *b = malloc(sizeof(float) * NPOS * V);
    float *steps = malloc(sizeof(float) * 16 * V); /* the CPU's logits at each greedy step */
    for (int p = 0; p < NP; p++) {
        int np;
        int32_t *ids = encode(prompts[p], &np), seq[NPOS], cont_c[16], cont_g[16], table[16];
        cr_assert(np < NPOS);
        /* 16 positions: the prompt, then the CPU's greedy continuation */
        greedy(cpu, kc, ids, np, 16, cont_c, steps);
        memcpy(seq, ids, sizeof *ids * np);
        memcpy(seq + np, cont_c, sizeof *seq * (NPOS - np));
        for (int i = 0; i < 16; i++) {
            cr_assert_eq(kvc_alloc(kc, &table[i]), 0);
        }
        struct eng_seq s = {seq, NPOS, 0, table, ENG_LOGITS_ALL};
        cr_assert_eq(eng_forward(cpu, kc, &s, 1, a), 0);
        for (int i = 0; i < 16; i++)
            kvc_release(kc, table[i]);
        for (int i = 0; i < 16; i++)
            cr_assert_eq(kvc_alloc(kg, &table[i]), 0);
        cr_assert_eq(eng_forward(gpu, kg, &s, 1, b), 0);
        for (int i = 0; i < 16; i++)
            kvc_release(kg, table[i]);
        for (int i = 0; i < NPOS; i++) {
            const float *ra = a + (size_t)i * V, *rb = b + (size_t)i * V;
            int ta = argmax(ra, V), tb = argmax(rb, V);
            agree += ta == tb;
            /* a disagreement where the CPU's two candidates are within 0.05 is a near tie */
            near += ta != tb && ra[ta] - ra[tb] < 0.05f;
            total++;
            for (int v = 0; v < V; v++) {
                double e = fabs(ra[v] - rb[v]);
                worst = e > worst ? e : worst;
            }
        }
        /* greedy continuations, eng_forward token by token on each backend: equal, up to
         * a first split at a near tie of the CPU's logits (within 0.05, as above; F16
         * weights and activations against F32), after which the texts differ anyway */
        greedy(gpu, kg, ids, np, 16, cont_g, NULL);
        for (int i = 0; i < 16; i++) {
            if (cont_g[i] == cont_c[i]) continue;
            const float *r = steps + (size_t)i * V;
            cr_assert(r[cont_c[i]] - r[cont_g[i]] < 0.05f,
                      "prompt %d, token %d: cuda %d, cpu %d (cpu logits %g vs %g)", p, i, cont_g[i],
                      cont_c[i], r[cont_c[i]], r[cont_g[i]]);
            split++;
            break;
        }
        free(ids);
    }
    fprintf(stderr,
            "cuda vs cpu: teacher-forced top-1 agreement %d/%d (%d near ties), largest "
            "logit difference %.4g; greedy continuations split at a near tie: %d/%d\n",
            agree, total, near, worst, split, NP);
    cr_assert((double)agree / total >= 0.99 || agree + near == total, "top-1 agreement %d/%d",
              agree, total);
    cr_assert(split <= NP / 2, "%d of %d greedy continuations split (at near ties)", split, NP);
    free(a), free(b), free(steps);
    kvc_destroy(kc);
    kvc_destroy(kg);
}

/* ------------------------------------------------------------------ the scheduler on CUDA
 * (tests/engine/test_scheduler.c's invariants, with the CUDA model) */

static void run(eng_model *m, struct sched_config cfg, struct out *outs, long *preemptions)
{
    sched *s;
    cr_assert_eq(sched_create(m, vocab, &cfg, &events, &s), 0);
    sched_seq *q[NP];
    struct eng_gen_params p = greedy_params(24);
    for (int i = 0; i < NP; i++) {
        int n;
        int32_t *ids = encode(prompts[i], &n);
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &outs[i], &q[i]), 0);
        free(ids);
    }
    int steps = 0, rc;
    while ((rc = sched_step(s)) > 0)
        cr_assert(++steps < 10000);
    cr_assert_eq(rc, 0);
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.blocks_free + st.blocks_cached, st.blocks_total);
    *preemptions = st.preemptions;
    sched_destroy(s);
}

Test(model, scheduler_same_output_alone_and_in_a_busy_batch)
{
    models_setup();
    struct out alone[NP] = {0}, busy[NP] = {0};
    long pre_alone = 0, pre_busy = 0;
    struct sched_config one = {1, 512, 64, 16, 0, 0, KVC_F32};
    run(gpu, one, alone, &pre_alone);
    struct sched_config many = {6, 12, 10, 4, 0, 1, KVC_F32};
    run(gpu, many, busy, &pre_busy);
    fprintf(stderr, "sched on cuda: %ld preemptions in the busy run\n", pre_busy);
    cr_assert(pre_busy > 0, "the busy run must preempt");
    for (int i = 0; i < NP; i++) {
        cr_assert(alone[i].done && busy[i].done && !alone[i].err && !busy[i].err);
        cr_assert_str_eq(busy[i].text, alone[i].text, "prompt %d", i);
        cr_assert_eq(busy[i].completion, alone[i].completion);
    }
}

/* The busy batch of run(), the even prompts asking for logprobs (lp) or none. */
static void run_lp(eng_model *m, struct out *outs, int lp)
{
    sched *s;
    struct sched_config cfg = {6, 64, 64, 16, 0, 1, KVC_F32};
    cr_assert_eq(sched_create(m, vocab, &cfg, &events, &s), 0);
    for (int i = 0; i < NP; i++) {
        struct eng_gen_params p = greedy_params(16);
        p.logprobs = lp && i % 2 == 0;
        p.top_logprobs = 3;
        int n;
        int32_t *ids = encode(prompts[i], &n);
        sched_seq *q;
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &outs[i], &q), 0);
        free(ids);
    }
    while (sched_step(s) > 0)
        ;
    sched_destroy(s);
}

/* A step with a sequence that asks for logprobs samples on the host: the same tokens as
 * the device's sampling, and records like the CPU model's (within 0.05: the backends sum
 * in other orders), as long as the two generate the same tokens. */
Test(model, scheduler_logprobs_on_the_device)
{
    models_setup();
    static struct out dev[NP], host[NP], ref[NP];
    run_lp(gpu, dev, 0);
    run_lp(gpu, host, 1);
    run_lp(cpu, ref, 1);
    for (int i = 0; i < NP; i++) {
        cr_assert(dev[i].done && host[i].done && !dev[i].err && !host[i].err);
        cr_assert_str_eq(host[i].text, dev[i].text, "prompt %d", i);
        if (i % 2) {
            cr_assert_eq(host[i].n_lp, 0);
            continue;
        }
        cr_assert_eq(host[i].n_lp, host[i].completion, "prompt %d", i);
        for (int k = 0; k < host[i].n_lp && k < ref[i].n_lp; k++) {
            const struct eng_token_lp *a = &host[i].lp[k], *b = &ref[i].lp[k];
            cr_assert_eq(a->top[0], a->token);
            if (a->token != b->token)
                break; /* a near tie split them */
            cr_assert(fabsf(a->logprob - b->logprob) < 0.05f, "prompt %d token %d: %f vs %f",
                      i, k, a->logprob, b->logprob);
        }
    }
}

Test(model, scheduler_prefix_cache_same_output)
{
    models_setup();
    const char *text = "The following is a long shared system prompt that many requests "
                       "repeat word for word before their own question. Question: what is "
                       "the capital of France?";
    int n;
    int32_t *ids = encode(text, &n);
    struct eng_gen_params p = greedy_params(16);
    char first_text[2][4096];
    for (int cache = 0; cache < 2; cache++) {
        struct sched_config cfg = {4, 64, 64, 16, 0, cache, KVC_F32};
        sched *s;
        cr_assert_eq(sched_create(gpu, vocab, &cfg, &events, &s), 0);
        struct out first = {0}, second = {0};
        sched_seq *q;
        cr_assert_eq(sched_submit(s, 7, ids, n, &p, &first, &q), 0);
        while (sched_step(s) > 0)
            ;
        cr_assert_eq(sched_submit(s, 7, ids, n, &p, &second, &q), 0);
        while (sched_step(s) > 0)
            ;
        cr_assert(first.done && second.done && !first.err && !second.err);
        cr_assert_str_eq(second.text, first.text);
        if (cache)
            cr_assert_eq(second.cached, (n - 1) / 16 * 16, "every full block of the prompt");
        else
            cr_assert_eq(second.cached, 0);
        snprintf(first_text[cache], sizeof first_text[cache], "%s", first.text);
        sched_destroy(s);
    }
    cr_assert_str_eq(first_text[0], first_text[1], "prefix cache on and off");
    free(ids);
}
