/*
 * The embedder's CUDA backend: backend_cpu.c's BERT encoder on one GPU, one stream, one
 * pass per batch over every token of the batch at once.
 *
 * Precision. The four projection matrices of each layer live on the device as F16 and are
 * multiplied by cuBLAS on tensor cores with F32 accumulation; their inputs (the LayerNorm
 * outputs, the attention context, the GELU output) are rounded to F16 for them. All else is
 * F32: the embedding tables, biases and LayerNorm parameters, the residual stream, the GEMM
 * outputs, the softmax, LayerNorm statistics and the pooling.
 *
 * Layout. Activations are row-major over the T tokens of the batch, [T][width], sequences
 * back to back as in emb_batch. A weight [out][in] row-major is column-major [in][out], so
 * y[T][out] = x[T][in] . w^T is, to column-major cuBLAS, y^T = op_T(w) . x^T. Every GEMM is
 * that plain product with beta 0: the kernel that consumes its output adds the bias
 * (attention adds the query/key/value biases as it loads them, the LayerNorm kernels the
 * projections', the GELU kernel the first feed-forward one).
 *
 *   x ─LN─► xh ─Wqkv─► qkv ─attention─► ctx ─Wo─► tmp ─(+x, LN1)─► x, xh ─W1─► hid ─GELU─►
 *   hidh ─W2─► tmp ─(+x, LN2)─► x, xh   ... after the last layer: x ─mean, L2─► out
 *
 * Scratch grows on demand and is reused; qkv and hid share one F32 buffer, ctx and hidh one
 * F16 buffer (each is dead before the other is written, in stream order).
 *
 * Threads: forward and destroy from one thread at a time; any thread, it sets the device.
 */
#include "emb_impl.h"
#include "embedder.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int WARP = 32;
constexpr unsigned FULL_MASK = 0xffffffffu;

/* attention: a block is 4 warps over 16 query rows (4 each) of one sequence and head; keys
 * and values pass through shared memory 32 at a time, one key per lane for the scores */
constexpr int ATT_WARPS = 4;
constexpr int ATT_RPW = 4;
constexpr int ATT_QT = ATT_WARPS * ATT_RPW;
constexpr int ATT_KC = WARP;
constexpr int ATT_MAX_HEAD = 128;

constexpr int ROW_THREADS = 256; /* LayerNorm kernels: one warp per token */
constexpr int POOL_THREADS = 128;
constexpr int EW_THREADS = 256;

struct dev_layer {
    __half *wqkv, *wo, *w1, *w2; /* [3H][H], [H][H], [I][H], [H][I], F16 */
    float *bqkv, *bo;            /* [3H], [H] */
    float *ln1_g, *ln1_b;        /* [H] */
    float *b1, *b2;              /* [I], [H] */
    float *ln2_g, *ln2_b;        /* [H] */
};

/* a buffer grown on demand: device (cudaMalloc) or pinned host (cudaMallocHost) */
struct buf {
    void *p;
    size_t cap; /* bytes */
};

struct cuda_emb {
    struct emb_config cfg;
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    float *word, *pos, *type0; /* [vocab][H], [max_pos][H], [H]: token type 0 only */
    float *ln_g, *ln_b;        /* [H] */
    struct dev_layer *layer;   /* [layers], host array of device pointers */

    /* scratch for one batch of T tokens and n sequences */
    struct buf idx;  /* int [2T + n + 1]: ids, position in sequence, offsets */
    struct buf hidx; /* pinned host copy of idx, staged for one upload */
    struct buf x;    /* float [T][H]: the residual stream */
    struct buf xh;   /* half [T][H]: x rounded, the GEMMs' input */
    struct buf tmp;  /* float [T][H]: output projections before residual + LayerNorm */
    struct buf f32;  /* float [T][max(3H, I)]: qkv, then hid */
    struct buf f16;  /* half [T][max(H, I)]: attention context, then GELU output */
    struct buf out;  /* float [n][H] */
    struct buf hout; /* pinned host copy of out */

    char err[256]; /* what failed last */
};

int cu_fail(struct cuda_emb *c, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(c->err, sizeof c->err, "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return EMB_EDEVICE;
}

int blas_fail(struct cuda_emb *c, cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    snprintf(c->err, sizeof c->err, "%s: %s", what, cublasGetStatusString(s));
    return EMB_EDEVICE;
}

/* ---------------------------------------------------------------- kernels */

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/* LayerNorm of one row already in row[0..H), sum its total, by one warp; writes the result
 * over row and, rounded, to rowh. Two passes over the row (the second from cache), as the
 * CPU computes it: mean, then the mean of squared deviations. Each lane reads back only the
 * elements it wrote itself. */
__device__ void warp_layernorm(float *row, __half *rowh, int H, float sum, const float *g,
                               const float *b, float eps, int lane)
{
    const float mean = warp_sum(sum) / (float)H;
    float var = 0.0f;
    for (int j = lane; j < H; j += WARP) {
        float d = row[j] - mean;
        var += d * d;
    }
    var = warp_sum(var) / (float)H;
    const float inv = 1.0f / sqrtf(var + eps);
    for (int j = lane; j < H; j += WARP) {
        float y = (row[j] - mean) * inv * g[j] + b[j];
        row[j] = y;
        rowh[j] = __float2half_rn(y);
    }
}

/* x[t] = LayerNorm(word[ids[t]] + pos[posn[t]] + type0), one warp per token */
__global__ void __launch_bounds__(ROW_THREADS)
    embed_ln_kernel(const int *ids, const int *posn, const float *word, const float *pos,
                    const float *type0, const float *g, const float *b, float eps, int T, int H,
                    float *x, __half *xh)
{
    const int t = blockIdx.x * (ROW_THREADS / WARP) + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (t >= T) /* the whole warp: no block-wide barrier below */
        return;
    const float *we = word + (size_t)ids[t] * H, *pe = pos + (size_t)posn[t] * H;
    float *row = x + (size_t)t * H;
    float sum = 0.0f;
    for (int j = lane; j < H; j += WARP) {
        float v = we[j] + pe[j] + type0[j];
        row[j] = v;
        sum += v;
    }
    warp_layernorm(row, xh + (size_t)t * H, H, sum, g, b, eps, lane);
}

/* x[t] = LayerNorm(x[t] + (r[t] + rb)), one warp per token */
__global__ void __launch_bounds__(ROW_THREADS)
    add_ln_kernel(float *x, __half *xh, const float *r, const float *rb, const float *g,
                  const float *b, float eps, int T, int H)
{
    const int t = blockIdx.x * (ROW_THREADS / WARP) + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (t >= T)
        return;
    float *row = x + (size_t)t * H;
    const float *rr = r + (size_t)t * H;
    float sum = 0.0f;
    for (int j = lane; j < H; j += WARP) {
        float v = row[j] + (rr[j] + rb[j]);
        row[j] = v;
        sum += v;
    }
    warp_layernorm(row, xh + (size_t)t * H, H, sum, g, b, eps, lane);
}

/* out[i] = GELU(h[i] + b[i % I]), the erf form BERT uses; h is [rows][I] */
__global__ void __launch_bounds__(EW_THREADS)
    bias_gelu_kernel(const float *h, const float *b, size_t total, int I, __half *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = h[i] + b[i % (size_t)I];
        out[i] = __float2half_rn(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
    }
}

/*
 * Softmax attention within each sequence. Block (s, h, z): sequence s, head h, query rows
 * [16z, 16z + 16) of the sequence; warp w owns rows 16z + 4w .. +3. qkv is [T][3H] without
 * its bias (added here); ctx is [T][H]. Keys and values stream through shared memory 32 at a
 * time with an online softmax (running max m, per-lane partial sums of exp rescaled when m
 * grows), so any length fits. Scores are (scale * q) . k, the CPU's scale * (q . k).
 * D (the head size) is a multiple of 32: lane owns output dims lane + 32i.
 */
template <int D>
__global__ void __launch_bounds__(ATT_WARPS * WARP)
    attention_kernel(const float *qkv, const float *bqkv, const int *off, int H, float scale,
                     __half *ctx)
{
    constexpr int DPL = D / WARP;
    __shared__ float qs[ATT_QT][D];
    __shared__ float ks[ATT_KC][D + 1]; /* odd stride: lane j reading key j, dim d, is
                                           conflict-free */
    __shared__ float vs[ATT_KC][D];

    const int s = blockIdx.x, h = blockIdx.y, q0 = blockIdx.z * ATT_QT;
    const int o = off[s], l = off[s + 1] - o;
    if (q0 >= l) /* the whole block, before any barrier */
        return;
    const int tid = threadIdx.x, warp = tid / WARP, lane = tid % WARP;
    const size_t ld = 3 * (size_t)H;
    const float *base = qkv + (size_t)o * ld + (size_t)h * D; /* token o's query, head h */
    const float *bq = bqkv + h * D, *bk = bq + H, *bv = bq + 2 * H;

    for (int i = tid; i < ATT_QT * D; i += ATT_WARPS * WARP) {
        const int r = i / D, d = i % D;
        qs[r][d] = q0 + r < l ? (base[(size_t)(q0 + r) * ld + d] + bq[d]) * scale : 0.0f;
    }

    float m[ATT_RPW], lsum[ATT_RPW], acc[ATT_RPW][DPL];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        m[r] = -INFINITY;
        lsum[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++)
            acc[r][i] = 0.0f;
    }

    for (int c0 = 0; c0 < l; c0 += ATT_KC) {
        __syncthreads(); /* qs written (first chunk); the previous chunk consumed */
        for (int i = tid; i < ATT_KC * D; i += ATT_WARPS * WARP) {
            const int j = i / D, d = i % D;
            float kv = 0.0f, vv = 0.0f;
            if (c0 + j < l) {
                const float *row = base + (size_t)(c0 + j) * ld;
                kv = row[H + d] + bk[d];
                vv = row[2 * H + d] + bv[d];
            }
            ks[j][d] = kv;
            vs[j][d] = vv;
        }
        __syncthreads();
        const int kn = min(ATT_KC, l - c0); /* >= 1 */

        float sc[ATT_RPW];
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++)
            sc[r] = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; d++) {
            const float kd = ks[lane][d];
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++)
                sc[r] += qs[warp * ATT_RPW + r][d] * kd;
        }
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            const float sr = lane < kn ? sc[r] : -INFINITY;
            const float mnew = fmaxf(m[r], warp_max(sr)); /* finite: lane 0 holds a key */
            const float corr = expf(m[r] - mnew);        /* 0 on the first chunk */
            const float p = expf(sr - mnew);              /* 0 past the sequence */
            lsum[r] = lsum[r] * corr + p;
#pragma unroll
            for (int i = 0; i < DPL; i++)
                acc[r][i] *= corr;
            m[r] = mnew;
            sc[r] = p;
        }
        for (int j = 0; j < kn; j++) { /* kn is the same for every lane */
            float v[DPL];
#pragma unroll
            for (int i = 0; i < DPL; i++)
                v[i] = vs[j][lane + i * WARP];
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) {
                const float pj = __shfl_sync(FULL_MASK, sc[r], j);
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    acc[r][i] += pj * v[i];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const float total = warp_sum(lsum[r]);
        const int q = q0 + warp * ATT_RPW + r;
        if (q < l) {
            const float inv = 1.0f / total;
            __half *dst = ctx + (size_t)(o + q) * H + (size_t)h * D;
#pragma unroll
            for (int i = 0; i < DPL; i++)
                dst[lane + i * WARP] = __float2half_rn(acc[r][i] * inv);
        }
    }
}

/* out[s] = the mean of x over sequence s's tokens, L2-normalised; one block per sequence */
__global__ void __launch_bounds__(POOL_THREADS)
    pool_kernel(const float *x, const int *off, int H, float *out)
{
    __shared__ float part[POOL_THREADS / WARP];
    const int s = blockIdx.x, o = off[s], l = off[s + 1] - o;
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    float *e = out + (size_t)s * H;
    float ss = 0.0f;
    for (int j = tid; j < H; j += POOL_THREADS) {
        float acc = 0.0f;
        for (int t = 0; t < l; t++)
            acc += x[(size_t)(o + t) * H + j];
        const float v = acc / (float)l;
        e[j] = v;
        ss += v * v;
    }
    ss = warp_sum(ss);
    if (lane == 0)
        part[warp] = ss;
    __syncthreads();
    float norm = 0.0f;
    for (int w = 0; w < POOL_THREADS / WARP; w++)
        norm += part[w];
    const float inv = norm > 0.0f ? 1.0f / sqrtf(norm) : 0.0f;
    for (int j = tid; j < H; j += POOL_THREADS) /* the elements this thread wrote */
        e[j] *= inv;
}

/* ---------------------------------------------------------------- host side */

int head_size_supported(int d)
{
    return d == 32 || d == 64 || d == 96 || d == 128;
}

static_assert(ATT_MAX_HEAD == 128, "head_size_supported() and launch_attention() list sizes");

cudaError_t launch_attention(int D, dim3 grid, cudaStream_t st, const float *qkv,
                             const float *bqkv, const int *off, int H, float scale, __half *ctx)
{
    const dim3 block(ATT_WARPS * WARP);
    switch (D) {
    case 32: attention_kernel<32><<<grid, block, 0, st>>>(qkv, bqkv, off, H, scale, ctx); break;
    case 64: attention_kernel<64><<<grid, block, 0, st>>>(qkv, bqkv, off, H, scale, ctx); break;
    case 96: attention_kernel<96><<<grid, block, 0, st>>>(qkv, bqkv, off, H, scale, ctx); break;
    case 128:
        attention_kernel<128><<<grid, block, 0, st>>>(qkv, bqkv, off, H, scale, ctx);
        break;
    default: return cudaErrorInvalidValue; /* refused at creation */
    }
    return cudaGetLastError();
}

/* y[T][N] (F32) = x[T][K] (F16) . w[N][K]^T (F16), F32 accumulation */
int gemm(struct cuda_emb *c, const __half *x, int T, int K, const __half *w, int N, float *y)
{
    const float one = 1.0f, zero = 0.0f;
    return blas_fail(c,
                     cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, w, CUDA_R_16F,
                                  K, x, CUDA_R_16F, K, &zero, y, CUDA_R_32F, N,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
}

/* Makes b hold at least need bytes; the contents are not kept. Grows by half again at least,
 * so that batches of slowly rising size do not reallocate every time. */
int reserve(struct cuda_emb *c, struct buf *b, size_t need, bool pinned, const char *what)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap + b->cap / 2;
    if (cap < need)
        cap = need;
    cudaError_t e = pinned ? cudaFreeHost(b->p) : cudaFree(b->p);
    b->p = NULL;
    b->cap = 0;
    if (e != cudaSuccess)
        return cu_fail(c, e, what);
    e = pinned ? cudaMallocHost(&b->p, cap) : cudaMalloc(&b->p, cap);
    if (e != cudaSuccess) {
        b->p = NULL;
        return cu_fail(c, e, what);
    }
    b->cap = cap;
    return 0;
}

void release(struct buf *b, bool pinned)
{
    if (b->p) {
        if (pinned)
            cudaFreeHost(b->p);
        else
            cudaFree(b->p);
    }
    b->p = NULL;
    b->cap = 0;
}

void cuda_destroy(void *p)
{
    struct cuda_emb *c = (struct cuda_emb *)p;
    if (!c)
        return;
    cudaSetDevice(c->device);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    /* errors here have no one to go to: the memory goes with the context either way */
    release(&c->idx, false);
    release(&c->hidx, true);
    release(&c->x, false);
    release(&c->xh, false);
    release(&c->tmp, false);
    release(&c->f32, false);
    release(&c->f16, false);
    release(&c->out, false);
    release(&c->hout, true);
    if (c->layer) {
        for (int L = 0; L < c->cfg.layers; L++) {
            struct dev_layer *ly = &c->layer[L];
            cudaFree(ly->wqkv);
            cudaFree(ly->wo);
            cudaFree(ly->w1);
            cudaFree(ly->w2);
            cudaFree(ly->bqkv);
            cudaFree(ly->bo);
            cudaFree(ly->ln1_g);
            cudaFree(ly->ln1_b);
            cudaFree(ly->b1);
            cudaFree(ly->b2);
            cudaFree(ly->ln2_g);
            cudaFree(ly->ln2_b);
        }
        free(c->layer);
    }
    cudaFree(c->word);
    cudaFree(c->pos);
    cudaFree(c->type0);
    cudaFree(c->ln_g);
    cudaFree(c->ln_b);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

/* The device work of one pass over a checked batch; T tokens, the longest maxlen. */
int run_pass(struct cuda_emb *c, const struct emb_batch *b, int T, int maxlen, float *out)
{
    const struct emb_config *k = &c->cfg;
    const int H = k->hidden, I = k->inter, D = H / k->heads, n = b->n;
    const size_t t_ = (size_t)T, h_ = (size_t)H, i_ = (size_t)I;
    const size_t nidx = 2 * t_ + (size_t)n + 1;
    const size_t wide32 = 3 * h_ > i_ ? 3 * h_ : i_, wide16 = h_ > i_ ? h_ : i_;
    const size_t out_bytes = (size_t)n * h_ * sizeof(float);
    cudaStream_t st = c->stream;
    int rc;
#define TRY(call)                                                                              \
    do {                                                                                       \
        if ((rc = (call)))                                                                     \
            return rc;                                                                         \
    } while (0)
    TRY(reserve(c, &c->idx, nidx * sizeof(int), false, "cudaMalloc (token ids)"));
    TRY(reserve(c, &c->hidx, nidx * sizeof(int), true, "cudaMallocHost (token ids)"));
    TRY(reserve(c, &c->x, t_ * h_ * sizeof(float), false, "cudaMalloc (activations)"));
    TRY(reserve(c, &c->xh, t_ * h_ * sizeof(__half), false, "cudaMalloc (activations)"));
    TRY(reserve(c, &c->tmp, t_ * h_ * sizeof(float), false, "cudaMalloc (activations)"));
    TRY(reserve(c, &c->f32, t_ * wide32 * sizeof(float), false, "cudaMalloc (activations)"));
    TRY(reserve(c, &c->f16, t_ * wide16 * sizeof(__half), false, "cudaMalloc (activations)"));
    TRY(reserve(c, &c->out, out_bytes, false, "cudaMalloc (output)"));
    TRY(reserve(c, &c->hout, out_bytes, true, "cudaMallocHost (output)"));

    /* ids, each token's position within its sequence, offsets: one upload. Tokens before
     * off[0], if any, belong to no sequence: id 0 at position 0 keeps them harmless. */
    int *hi = (int *)c->hidx.p, *hpos = hi + T, *hoff = hpos + T;
    for (int t = 0; t < b->off[0]; t++)
        hi[t] = hpos[t] = 0;
    for (int s = 0; s < n; s++)
        for (int t = b->off[s]; t < b->off[s + 1]; t++) {
            hi[t] = b->ids[t];
            hpos[t] = t - b->off[s];
        }
    memcpy(hoff, b->off, sizeof(int) * (size_t)(n + 1));
    const int *dids = (const int *)c->idx.p, *dpos = dids + T, *doff = dpos + T;
    TRY(cu_fail(c, cudaMemcpyAsync(c->idx.p, hi, nidx * sizeof(int), cudaMemcpyHostToDevice, st),
                "cudaMemcpyAsync (token ids)"));

    float *x = (float *)c->x.p, *tmp = (float *)c->tmp.p, *f32 = (float *)c->f32.p;
    __half *xh = (__half *)c->xh.p, *f16 = (__half *)c->f16.p;
    const unsigned row_blocks = (unsigned)((T + ROW_THREADS / WARP - 1) / (ROW_THREADS / WARP));
    embed_ln_kernel<<<row_blocks, ROW_THREADS, 0, st>>>(dids, dpos, c->word, c->pos, c->type0,
                                                        c->ln_g, c->ln_b, k->ln_eps, T, H, x, xh);
    TRY(cu_fail(c, cudaGetLastError(), "embedding kernel"));

    const dim3 att_grid((unsigned)n, (unsigned)k->heads,
                        (unsigned)((maxlen + ATT_QT - 1) / ATT_QT));
    const float scale = 1.0f / sqrtf((float)D);
    const size_t ew_total = t_ * i_;
    size_t ew_blocks = (ew_total + EW_THREADS - 1) / EW_THREADS;
    if (ew_blocks > 65536)
        ew_blocks = 65536; /* the kernel strides over the rest */
    for (int L = 0; L < k->layers; L++) {
        const struct dev_layer *ly = &c->layer[L];
        TRY(gemm(c, xh, T, H, ly->wqkv, 3 * H, f32));
        TRY(cu_fail(c, launch_attention(D, att_grid, st, f32, ly->bqkv, doff, H, scale, f16),
                    "attention kernel"));
        TRY(gemm(c, f16, T, H, ly->wo, H, tmp));
        add_ln_kernel<<<row_blocks, ROW_THREADS, 0, st>>>(x, xh, tmp, ly->bo, ly->ln1_g,
                                                          ly->ln1_b, k->ln_eps, T, H);
        TRY(cu_fail(c, cudaGetLastError(), "LayerNorm kernel"));
        TRY(gemm(c, xh, T, H, ly->w1, I, f32));
        bias_gelu_kernel<<<(unsigned)ew_blocks, EW_THREADS, 0, st>>>(f32, ly->b1, ew_total, I,
                                                                      f16);
        TRY(cu_fail(c, cudaGetLastError(), "GELU kernel"));
        TRY(gemm(c, f16, T, I, ly->w2, H, tmp));
        add_ln_kernel<<<row_blocks, ROW_THREADS, 0, st>>>(x, xh, tmp, ly->b2, ly->ln2_g,
                                                          ly->ln2_b, k->ln_eps, T, H);
        TRY(cu_fail(c, cudaGetLastError(), "LayerNorm kernel"));
    }

    pool_kernel<<<(unsigned)n, POOL_THREADS, 0, st>>>(x, doff, H, (float *)c->out.p);
    TRY(cu_fail(c, cudaGetLastError(), "pooling kernel"));
    TRY(cu_fail(c, cudaMemcpyAsync(c->hout.p, c->out.p, out_bytes, cudaMemcpyDeviceToHost, st),
                "cudaMemcpyAsync (embeddings)"));
    /* a kernel's fault surfaces here */
    TRY(cu_fail(c, cudaStreamSynchronize(st), "forward pass"));
#undef TRY
    memcpy(out, c->hout.p, out_bytes);
    return 0;
}

int cuda_forward(void *p, const struct emb_batch *b, float *out)
{
    struct cuda_emb *c = (struct cuda_emb *)p;
    const struct emb_config *k = &c->cfg;
    const int n = b->n;
    if (n < 0)
        return EMB_EINVAL;
    if (n == 0)
        return 0;
    /* backend_cpu.c's checks, before anything reaches the device */
    if (b->off[0] < 0)
        return EMB_EINVAL;
    int maxlen = 0;
    for (int s = 0; s < n; s++) {
        int l = b->off[s + 1] - b->off[s];
        if (l <= 0 || l > k->max_pos)
            return EMB_EINVAL;
        maxlen = l > maxlen ? l : maxlen;
    }
    const int T = b->off[n];
    for (int t = b->off[0]; t < T; t++)
        if (b->ids[t] < 0 || b->ids[t] >= k->vocab)
            return EMB_EINVAL;

    int rc = cu_fail(c, cudaSetDevice(c->device), "cudaSetDevice");
    if (rc)
        return rc;
    rc = run_pass(c, b, T, maxlen, out);
    if (rc) /* nothing of this pass may still run when the next one rewrites the staging */
        cudaStreamSynchronize(c->stream);
    return rc;
}

/* cudaMalloc + copy of n floats */
int upload_f32(struct cuda_emb *c, const float *src, size_t n, float **dst)
{
    int rc = cu_fail(c, cudaMalloc((void **)dst, n * sizeof(float)), "cudaMalloc (weights)");
    if (rc) {
        *dst = NULL;
        return rc;
    }
    return cu_fail(c, cudaMemcpy(*dst, src, n * sizeof(float), cudaMemcpyHostToDevice),
                   "cudaMemcpy (weights)");
}

/* cudaMalloc + copy of n floats rounded to F16 through stage (n halves) */
int upload_f16(struct cuda_emb *c, const float *src, size_t n, __half *stage, __half **dst)
{
    int rc = cu_fail(c, cudaMalloc((void **)dst, n * sizeof(__half)), "cudaMalloc (weights)");
    if (rc) {
        *dst = NULL;
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        stage[i] = __float2half_rn(src[i]);
    /* pageable source: returns once stage has been read, so it can be reused */
    return cu_fail(c, cudaMemcpy(*dst, stage, n * sizeof(__half), cudaMemcpyHostToDevice),
                   "cudaMemcpy (weights)");
}

int upload_weights(struct cuda_emb *c, const struct emb_weights *w)
{
    const struct emb_config *k = &c->cfg;
    const size_t H = (size_t)k->hidden, I = (size_t)k->inter;
    int rc;
    if ((rc = upload_f32(c, w->word, (size_t)k->vocab * H, &c->word)) ||
        (rc = upload_f32(c, w->pos, (size_t)k->max_pos * H, &c->pos)) ||
        (rc = upload_f32(c, w->type, H, &c->type0)) ||
        (rc = upload_f32(c, w->ln_g, H, &c->ln_g)) || (rc = upload_f32(c, w->ln_b, H, &c->ln_b)))
        return rc;
    const size_t biggest = 3 * H * H > I * H ? 3 * H * H : I * H;
    __half *stage = (__half *)malloc(biggest * sizeof(__half));
    if (!stage) {
        snprintf(c->err, sizeof c->err, "out of host memory converting the weights");
        return EMB_ENOMEM;
    }
    for (int L = 0; L < k->layers; L++) {
        const struct emb_layer *s = &w->layer[L];
        struct dev_layer *d = &c->layer[L];
        if ((rc = upload_f16(c, s->wqkv, 3 * H * H, stage, &d->wqkv)) ||
               (rc = upload_f16(c, s->wo, H * H, stage, &d->wo)) ||
               (rc = upload_f16(c, s->w1, I * H, stage, &d->w1)) ||
               (rc = upload_f16(c, s->w2, H * I, stage, &d->w2)) ||
               (rc = upload_f32(c, s->bqkv, 3 * H, &d->bqkv)) ||
               (rc = upload_f32(c, s->bo, H, &d->bo)) ||
               (rc = upload_f32(c, s->ln1_g, H, &d->ln1_g)) ||
               (rc = upload_f32(c, s->ln1_b, H, &d->ln1_b)) ||
               (rc = upload_f32(c, s->b1, I, &d->b1)) || (rc = upload_f32(c, s->b2, H, &d->b2)) ||
               (rc = upload_f32(c, s->ln2_g, H, &d->ln2_g)) ||
               (rc = upload_f32(c, s->ln2_b, H, &d->ln2_b)))
            break;
    }
    free(stage);
    return rc;
}

const char *cuda_last_error(void *ctx)
{
    return static_cast<struct cuda_emb *>(ctx)->err;
}

const struct emb_backend_i cuda_vt = {"cuda", cuda_forward, cuda_destroy, cuda_last_error};

} // namespace

/* cfg and w are borrowed for the call: the weights are copied to device 0. */
extern "C" int emb_cuda_create(const struct emb_config *cfg, const struct emb_weights *w,
                               const struct emb_backend_i **vt, void **ctx, char *err,
                               size_t errlen)
{
    *vt = NULL;
    *ctx = NULL;
    const int D = cfg->heads > 0 ? cfg->hidden / cfg->heads : 0;
    if (cfg->heads <= 0 || cfg->hidden % cfg->heads || !head_size_supported(D) ||
        cfg->heads > 65535 || cfg->layers <= 0 || cfg->inter <= 0 || cfg->vocab <= 0 ||
        cfg->max_pos <= 0 || cfg->types <= 0) {
        snprintf(err, errlen,
                 "CUDA embedder: %d heads of %d dims not supported (head size 32, 64, 96 or 128)",
                 cfg->heads, D);
        return EMB_EDEVICE;
    }
    struct cuda_emb *c = (struct cuda_emb *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "CUDA embedder: out of host memory");
        return EMB_ENOMEM;
    }
    c->cfg = *cfg;
    c->device = 0;
    int rc;
    c->layer = (struct dev_layer *)calloc((size_t)cfg->layers, sizeof *c->layer);
    if (!c->layer) {
        snprintf(c->err, sizeof c->err, "out of host memory");
        rc = EMB_ENOMEM;
        goto fail;
    }
    cudaStream_t st;
    cublasHandle_t blas;
    if ((rc = cu_fail(c, cudaSetDevice(c->device), "cudaSetDevice")) ||
        (rc = cu_fail(c, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking),
                      "cudaStreamCreate")))
        goto fail;
    c->stream = st;
    if ((rc = blas_fail(c, cublasCreate(&blas), "cublasCreate")))
        goto fail;
    c->blas = blas;
    if ((rc = blas_fail(c, cublasSetStream(c->blas, c->stream), "cublasSetStream")) ||
        (rc = upload_weights(c, w)))
        goto fail;
    *vt = &cuda_vt;
    *ctx = c;
    return 0;
fail:
    snprintf(err, errlen, "CUDA embedder: %s", c->err);
    cuda_destroy(c);
    return rc;
}
