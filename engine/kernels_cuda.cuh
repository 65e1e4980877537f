// kernels_cuda — the CUDA backend's kernels (engine/backend_cuda.cu is their one includer).
//
// Dtypes: the residual stream and every GEMM output are F32; what feeds a GEMM (RMSNorm's
// output, attention's output, SwiGLU's output) is F16, as are the weights and the KV cache.
// F16 values are saturated at +-65504 rather than overflowing to inf.
//
// Layouts (row-major, t: a token of the batch):
//   qkv  [T][HQ + 2 HK] f32: the query heads, then the key heads, then the value heads
//   kc, vc one layer: [n_blocks + 1][block_size][n_kv][hd] f16; block n_blocks is scratch,
//          written by the padding rows of decode graphs
//   tables [S][pitch] int32: block ids of sequence s, position p in tables[s][p / bs]
//
// Every kernel indexes with size_t where a product can pass 2^31 (logits of 256 x 128256
// rows, KV offsets) and takes its sizes as arguments; grids put the long dimension in x.
#ifndef ENG_KERNELS_CUDA_CUH
#define ENG_KERNELS_CUDA_CUH

#include <cub/cub.cuh>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

namespace engk
{

constexpr float F16_MAX = 65504.0f;

__device__ __forceinline__ __half to_f16(float x)
{
    // comparisons are false for NaN, which stays NaN
    x = x > F16_MAX ? F16_MAX : x < -F16_MAX ? -F16_MAX : x;
    return __float2half_rn(x);
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The sum over the block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread. Called at most once per kernel.
__device__ __forceinline__ float block_sum(float v)
{
    __shared__ float part[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        float s = lane < nw ? part[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    return total;
}

// Programmatic dependent launch (sm_90 and later; nothing elsewhere). The forward's kernels
// are launched so that one may start while the kernel before it finishes (backend_cuda.cu,
// launch_k): each calls pdl_wait() (or pdl_wait_early()) before it reads or writes anything
// another kernel produces or uses, which returns once the previous kernel has completed and
// its writes are visible; then it lets the next kernel start too. A kernel may do work that
// depends on nobody (a GEMV's loads of its weights) before the call.
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// pdl_wait() for the small kernels between two GEMVs, which do nothing before it: the next
// kernel may start at once, so that a GEMV after this one loads its weights while the GEMV
// before it still runs. Still ordered: the next kernel's own wait returns only once this one
// has completed, which is after the kernel before this one has.
#ifndef CACHEGATE_PDL_EARLY
#define CACHEGATE_PDL_EARLY 1
#endif
__device__ __forceinline__ void pdl_wait_early()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && CACHEGATE_PDL_EARLY
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#else
    pdl_wait();
#endif
}

// ---------------------------------------------------------------- conversions, fills

__global__ void f32_to_f16_k(const float *__restrict__ in, __half *__restrict__ out, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = to_f16(in[i]);
}

__global__ void f16_to_f32_k(const __half *__restrict__ in, float *__restrict__ out, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __half2float(in[i]);
}

__global__ void fill_f16_k(__half *out, size_t n, float v)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2half_rn(v);
}

__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// uniform in [-1, 1) from (seed, i): a counter-based hash, the same on every run
__device__ __forceinline__ float hash_uniform(uint64_t seed, size_t i)
{
    uint64_t z = mix64(seed + 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1));
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// out[i] = base + amp * U(-1, 1)
__global__ void rand_f16_k(__half *out, size_t n, uint64_t seed, float base, float amp)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2half_rn(base + amp * hash_uniform(seed, i));
}

__global__ void rand_f32_k(float *out, size_t n, uint64_t seed, float base, float amp)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = base + amp * hash_uniform(seed, i);
}

// ---------------------------------------------------------------- per-token kernels

// x [T][d] f32 = embedding rows of the tokens (ids checked by the host). grid: T
__global__ void embed_k(const int *__restrict__ ids, const __half *__restrict__ emb,
                        float *__restrict__ x, int d)
{
    pdl_wait_early();
    const __half *e = emb + (size_t)ids[blockIdx.x] * d;
    float *o = x + (size_t)blockIdx.x * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        o[i] = __half2float(e[i]);
}

// out row r = x row src[r] (src NULL: r) / rms * g, as model.c's rmsnorm(): sum of squares,
// inv = 1 / sqrt(ss / d + eps), x * inv * g. grid: rows; block: 256..1024. When d is a
// multiple of 4 and at most 4 * RMS_VEC * blockDim, every thread loads its float4s of x and g
// at once and keeps them in registers (one memory latency, not one per element).
constexpr int RMS_VEC = 4;
template <typename OutT>
__global__ void rmsnorm_k(const float *__restrict__ x, const int *__restrict__ src,
                          const float *__restrict__ g, OutT *__restrict__ out, int d, float eps)
{
    pdl_wait_early();
    const int r = blockIdx.x;
    const float *xr = x + (size_t)(src ? src[r] : r) * d;
    OutT *o = out + (size_t)r * d;
    if ((d & 3) == 0 && d <= 4 * RMS_VEC * (int)blockDim.x) {
        const int n4 = d / 4;
        float4 xv[RMS_VEC], gv[RMS_VEC];
        float ss = 0.0f;
#pragma unroll
        for (int u = 0; u < RMS_VEC; u++) {
            const int i = threadIdx.x + u * blockDim.x;
            if (i < n4) {
                xv[u] = reinterpret_cast<const float4 *>(xr)[i];
                gv[u] = reinterpret_cast<const float4 *>(g)[i];
                ss += xv[u].x * xv[u].x + xv[u].y * xv[u].y + xv[u].z * xv[u].z + xv[u].w * xv[u].w;
            }
        }
        ss = block_sum(ss);
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
#pragma unroll
        for (int u = 0; u < RMS_VEC; u++) {
            const int i = threadIdx.x + u * blockDim.x;
            if (i < n4) {
                const float v[4] = {xv[u].x * inv * gv[u].x, xv[u].y * inv * gv[u].y,
                                    xv[u].z * inv * gv[u].z, xv[u].w * inv * gv[u].w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if constexpr (sizeof(OutT) == 2)
                        o[4 * i + e] = to_f16(v[e]);
                    else
                        o[4 * i + e] = v[e];
                }
            }
        }
        return;
    }
    float ss = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = block_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float v = xr[i] * inv * g[i];
        if constexpr (sizeof(OutT) == 2)
            o[i] = to_f16(v);
        else
            o[i] = v;
    }
}

// One token per block (grid: T). Rotates the adjacent pairs (2i, 2i+1), i < n_rot / 2, of
// the nq query heads and nk key heads at the start of each row of qkv (row stride `stride`
// floats) by pos[t] * inv[i], in place; then, when kc is not NULL, stores the token's keys
// (rotated) and values (the nk heads after the keys) as F16 at slot[t] (block * bs + slot
// in the block) of the layer's cache kc / vc, rows of nk * hd.
__global__ void rope_kv_k(float *__restrict__ qkv, int stride, const int *__restrict__ pos, int nq,
                          int nk, int hd, int n_rot, const float *__restrict__ inv,
                          const int *__restrict__ slot, __half *__restrict__ kc,
                          __half *__restrict__ vc)
{
    pdl_wait_early();
    const int t = blockIdx.x, half = hd / 2, nr = n_rot / 2;
    float *row = qkv + (size_t)t * stride;
    const float p = (float)pos[t];
    const size_t hk = (size_t)nk * hd;
    __half *kdst = kc ? kc + (size_t)slot[t] * hk : nullptr;
    for (int idx = threadIdx.x; idx < (nq + nk) * half; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        float *v = row + (size_t)h * hd + 2 * i;
        float a = v[0], b = v[1];
        if (i < nr) {
            const float th = p * inv[i];
            const float c = cosf(th), s = sinf(th);
            const float a2 = a * c - b * s, b2 = a * s + b * c;
            a = a2;
            b = b2;
            v[0] = a;
            v[1] = b;
        }
        if (kdst && h >= nq) {
            __half *k = kdst + (size_t)(h - nq) * hd + 2 * i;
            k[0] = to_f16(a);
            k[1] = to_f16(b);
        }
    }
    if (kdst) {
        const float *vsrc = row + (size_t)(nq + nk) * hd;
        __half *vdst = vc + (size_t)slot[t] * hk;
        for (int i = threadIdx.x; i < (int)hk; i += blockDim.x)
            vdst[i] = to_f16(vsrc[i]);
    }
}

// h [T][F] = silu(g) * u, gu = [T][g(F) | u(F)], as model.c: g / (1 + e^-g) * u
__global__ void swiglu_k(const float *__restrict__ gu, __half *__restrict__ h, int F, size_t n)
{
    pdl_wait_early();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / (size_t)F, j = i % (size_t)F;
        const float g = gu[t * 2 * F + j], u = gu[t * 2 * F + F + j];
        h[i] = to_f16(g / (1.0f + expf(-g)) * u);
    }
}

// ---------------------------------------------------------------- small-batch GEMM
//
// y [T][n] (+)= x [T][k] W^T for a few tokens (T <= GEMV_MAX_T), where the work is reading
// W once: a warp (or WPR warps) per output row, each lane reading 16 bytes of W at a time (a
// warp reads 512 consecutive bytes), GEMV_UNROLL loads in flight before the first use; x
// (F16, a few KB) comes through the cache. F32 accumulation, lanes summed by shuffles.
// k % 8 == 0. Beyond two tokens the cache's bandwidth for x, not W, sets the pace: measured on
// an H100 (1B shape, a decode step at batch 1 / 2 / 3 / 4 / 8), 1.35 / 1.43 / 1.58 / 1.59 /
// 2.11 ms with this kernel, 1.47 / 1.48 / 1.50 / 1.50 / 1.53 ms with cuBLAS's.
constexpr int GEMV_MAX_T = 2, GEMV_WARPS = 4, GEMV_UNROLL = 8;

__device__ __forceinline__ void unpack8(const uint4 &raw, float *f)
{
    const __half2 *h2 = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float2 v = __half22float2(h2[e]);
        f[2 * e] = v.x;
        f[2 * e + 1] = v.y;
    }
}

// WPR warps share a row (a long row: each takes a contiguous 1/WPR of it, so that a lane
// has about GEMV_UNROLL loads of it, all in flight at once); their sums meet in shared
// memory. grid: ceil(n / (GEMV_WARPS / WPR)); block: GEMV_WARPS * 32.
template <int T, int WPR>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_k(const __half *__restrict__ W, int n, int k, const __half *__restrict__ x,
           float *__restrict__ y, int accumulate)
{
    static_assert(GEMV_WARPS % WPR == 0, "whole rows in a block");
    constexpr int RPB = GEMV_WARPS / WPR;
    __shared__ float red[GEMV_WARPS][T];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * RPB + warp / WPR, part = warp % WPR;
    const int k8 = k / 8, per = (k8 + WPR - 1) / WPR;
    const int i_begin = part * per, i_end = min(k8, i_begin + per);
    const bool live = row < n;
    const uint4 *w = reinterpret_cast<const uint4 *>(W + (size_t)(live ? row : 0) * k);
    const uint4 *xv = reinterpret_cast<const uint4 *>(x);
    float acc[T];
#pragma unroll
    for (int t = 0; t < T; t++)
        acc[t] = 0.0f;
    // every lane goes round at least once, to wait with the others
    for (int i0 = i_begin + lane; i0 < i_end || i0 == i_begin + lane; i0 += 32 * GEMV_UNROLL) {
        uint4 wr[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++)
            if (live && i0 + 32 * u < i_end) wr[u] = w[i0 + 32 * u];
        if (i0 == i_begin + lane)
            pdl_wait(); // the weights are in flight; x is the previous kernel's output
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            const int i = i0 + 32 * u;
            if (live && i < i_end) {
                float wf[8];
                unpack8(wr[u], wf);
#pragma unroll
                for (int t = 0; t < T; t++) {
                    float xf[8];
                    const uint4 xr = xv[(size_t)t * k8 + i]; // one 16-byte load
                    unpack8(xr, xf);
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[t] += wf[e] * xf[e];
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < T; t++) {
        const float v = warp_sum(acc[t]);
        if constexpr (WPR == 1) {
            if (lane == 0 && live) {
                float *yo = y + (size_t)t * n + row;
                *yo = accumulate ? *yo + v : v;
            }
        } else if (lane == 0) {
            red[warp][t] = v;
        }
    }
    if constexpr (WPR == 1) return;
    __syncthreads();
    if (part == 0 && lane < T && live) {
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < WPR; q++)
            v += red[warp + q][lane];
        float *yo = y + (size_t)lane * n + row;
        *yo = accumulate ? *yo + v : v;
    }
}

// ---------------------------------------------------------------- attention
//
// Both kernels: query heads h = g * group + r share KV head g (r < group); the query of
// token t is qkv[t][h * HD ..], pre-scaled by 1 / sqrt(HD) on load; causal over the
// sequence's positions 0 .. pos of the token, keys and values read from the paged cache
// through the sequence's block table; output as F16 into out[t][h * HD ..] (stride HQ).
// Softmax online (running max m, sum l, unnormalized output), as flash attention.

constexpr int DEC_WARPS = 4, DEC_MAX_SPLITS = 16;

// Decode: one block per (item i, KV head g, split z), the `G` query heads of g together, so
// each key and value is read once for all of them. The item's positions 0 .. ctx-1 are cut
// into `nsplit` ranges of whole 32-key chunks; block z takes range z (flash-decoding: a
// short batch still fills the GPU). Warp w takes the range's keys w*32 .. w*32+31, then
// w*32 + 128 ..: a lane a key for the scores, reading the key's row 16 bytes at a time; for
// P.V, HD/8 lanes a value row (each 8 dims), 32*8/HD rows a pass. The chunk's key loads and
// its first VB passes of value loads are issued together before the scores (the slots come
// from the key lanes by shuffles), the remaining passes (HD 128) together after them, so a
// chunk costs two or three memory latencies, not one per key. The warps' partial states are merged
// at the end: with nsplit 1 into the output, else into part[i][head][z] = (unnormalized output
// [HD], running max, sum), which attn_combine_k merges. grid: (n_items, n_kv, nsplit);
// block: 128.
template <int HD, int G>
__global__ void __launch_bounds__(DEC_WARPS * 32)
    attn_decode_k(const float *__restrict__ qkv, int qkv_stride, const int *__restrict__ items,
                  const int *__restrict__ tok_seq, const int *__restrict__ tok_pos,
                  const int *__restrict__ tables, int pitch, const __half *__restrict__ kc,
                  const __half *__restrict__ vc, int bs, int nk, float scale,
                  __half *__restrict__ out, int out_stride, int nsplit, float *__restrict__ part)
{
    pdl_wait_early();
    static_assert(HD == 64 || HD == 128, "a value row is 8 or 16 lanes");
    constexpr int NV = HD / 8;      // 16-byte pieces of a row
    constexpr int LPR = HD / 8;     // lanes per value row
    constexpr int RPP = 32 / LPR;   // value rows per pass
    constexpr int NPASS = 32 / RPP; // passes per 32 keys
    constexpr int VB = 8;           // passes whose loads are in flight together
    __shared__ float qs[G][HD];
    __shared__ float sm[DEC_WARPS][G], sl[DEC_WARPS][G];
    __shared__ float so[DEC_WARPS][G][HD];

    const int t = items[blockIdx.x], g = blockIdx.y, z = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int sub = lane % LPR, rowi = lane / LPR;
    const int s = tok_seq[t], ctx = tok_pos[t] + 1;
    const int span = ((ctx + nsplit - 1) / nsplit + 31) / 32 * 32;
    const int k0 = z * span, k1 = min(ctx, k0 + span);
    const int *table = tables + (size_t)s * pitch;
    const size_t HK = (size_t)nk * HD, goff = (size_t)g * HD;
    const float *q = qkv + (size_t)t * qkv_stride + (size_t)g * G * HD;
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x)
        qs[i / HD][i % HD] = q[i] * scale;
    __syncthreads();

    float m[G], l[G], acc[G][8];
#pragma unroll
    for (int r = 0; r < G; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[r][e] = 0.0f;
    }
    uint4 zero;
    zero.x = zero.y = zero.z = zero.w = 0;

    for (int c0 = k0 + warp * 32; c0 < k1; c0 += DEC_WARPS * 32) {
        const int j = c0 + lane, nvalid = min(32, k1 - c0);
        const bool valid = lane < nvalid;
        const int slot = valid ? table[j / bs] * bs + j % bs : 0;
        // this lane's 16 bytes of the value row of pass u's key (the slot from the key's lane)
        auto load_v = [&](int u) {
            const int key = u * RPP + rowi;
            const int ks = __shfl_sync(0xffffffffu, slot, key);
            return key < nvalid ? reinterpret_cast<const uint4 *>(vc + (size_t)ks * HK + goff)[sub]
                                : zero;
        };
        uint4 kr[NV], vr[NPASS];
        const uint4 *krow = reinterpret_cast<const uint4 *>(kc + (size_t)slot * HK + goff);
#pragma unroll
        for (int c = 0; c < NV; c++)
            kr[c] = valid ? krow[c] : zero;
#pragma unroll
        for (int i = 0; i < NPASS && i < VB; i++)
            vr[i] = load_v(i);
        float sc[G];
#pragma unroll
        for (int r = 0; r < G; r++)
            sc[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < NV; c++) {
            float kf[8];
            unpack8(kr[c], kf);
#pragma unroll
            for (int r = 0; r < G; r++)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    sc[r] += qs[r][c * 8 + e] * kf[e];
        }
        float p[G];
#pragma unroll
        for (int r = 0; r < G; r++) {
            const float v = valid ? sc[r] : -INFINITY;
            // lane 0's key (c0 < k1) is valid: the max is finite
            const float mnew = fmaxf(m[r], warp_max(v));
            p[r] = valid ? expf(v - mnew) : 0.0f;
            const float alpha = expf(m[r] - mnew); // 0 while m is -inf
            l[r] = l[r] * alpha + warp_sum(p[r]);
#pragma unroll
            for (int e = 0; e < 8; e++)
                acc[r][e] *= alpha;
            m[r] = mnew;
        }
#pragma unroll
        for (int i = 0; i < NPASS; i++) {
            const int key = i * RPP + rowi;
            if (i >= VB && i % VB == 0) {
                // the next passes' loads, together
#pragma unroll
                for (int u = i; u < i + VB && u < NPASS; u++)
                    vr[u] = load_v(u);
            }
            float vf[8];
            unpack8(vr[i], vf);
#pragma unroll
            for (int r = 0; r < G; r++) {
                const float pj = __shfl_sync(0xffffffffu, p[r], key);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[r][e] += pj * vf[e];
            }
        }
    }
    // the rows of a pass were spread over lanes of equal `sub`: sum them
#pragma unroll
    for (int r = 0; r < G; r++)
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int o = LPR; o < 32; o <<= 1)
                acc[r][e] += __shfl_xor_sync(0xffffffffu, acc[r][e], o);

    // merge the warps: a warp that saw no key has m = -inf, l = 0 and is skipped
#pragma unroll
    for (int r = 0; r < G; r++) {
        if (lane == 0) {
            sm[warp][r] = m[r];
            sl[warp][r] = l[r];
        }
        if (rowi == 0)
#pragma unroll
            for (int e = 0; e < 8; e++)
                so[warp][r][sub * 8 + e] = acc[r][e];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++)
            M = fmaxf(M, sm[w][r]);
        float num = 0.0f, den = 0.0f;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++)
            if (sm[w][r] > -INFINITY) {
                const float f = expf(sm[w][r] - M);
                num += so[w][r][d] * f;
                den += sl[w][r] * f;
            }
        if (nsplit == 1) {
            out[(size_t)t * out_stride + (size_t)(g * G + r) * HD + d] = to_f16(num / den);
        } else {
            // an empty range (z past the context) leaves M = -inf, den = 0: skipped later
            float *pp = part + (((size_t)blockIdx.x * nk + g) * G + r) * nsplit * (HD + 2) +
                        (size_t)z * (HD + 2);
            pp[d] = num;
            if (d == 0) {
                pp[HD] = M;
                pp[HD + 1] = den;
            }
        }
    }
}

// Merges attn_decode_k's nsplit partial states of item i, query head h into the output.
// grid: (n_items, n_head); block: hd.
__global__ void attn_combine_k(const float *__restrict__ part, int nsplit, int hd,
                               const int *__restrict__ items, __half *__restrict__ out,
                               int out_stride)
{
    pdl_wait_early();
    const int i = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    const float *pp = part + ((size_t)i * gridDim.y + h) * nsplit * (hd + 2);
    float M = -INFINITY;
    for (int z = 0; z < nsplit; z++)
        M = fmaxf(M, pp[(size_t)z * (hd + 2) + hd]);
    float num = 0.0f, den = 0.0f;
    for (int z = 0; z < nsplit; z++) {
        const float mz = pp[(size_t)z * (hd + 2) + hd];
        if (mz > -INFINITY) {
            const float f = expf(mz - M);
            num += pp[(size_t)z * (hd + 2) + d] * f;
            den += pp[(size_t)z * (hd + 2) + hd + 1] * f;
        }
    }
    out[(size_t)items[i] * out_stride + (size_t)h * hd + d] = to_f16(num / den);
}

constexpr int PRE_WARPS = 8, PRE_KT = 32, PRE_ROWS = 64, PRE_RPW = PRE_ROWS / PRE_WARPS;

// dynamic shared memory of attn_prefill_k<HD>
constexpr size_t prefill_smem(int hd)
{
    return sizeof(float) *
           ((size_t)PRE_ROWS * hd + (size_t)PRE_KT * (hd + 1) + (size_t)PRE_KT * hd);
}

// Prefill (or any tokens): one block per (query tile, KV head g). A tile is qt consecutive
// new tokens t0 .. of one sequence (qt * group <= 64 rows: row r is token t0 + r / group,
// head g * group + r % group). Keys and values go through shared memory 32 positions at a
// time, up to the tile's last position; warp w owns rows w, w + 8, .. (a lane a key for the
// scores, lane dims lane + 32 e for P.V). tiles: [n][2] (sequence, t0).
// grid: (n_tiles, n_kv); block: 256; dynamic shared memory: prefill_smem(HD).
template <int HD>
__global__ void __launch_bounds__(PRE_WARPS * 32)
    attn_prefill_k(const float *__restrict__ qkv, int qkv_stride, const int *__restrict__ tiles,
                   const int *__restrict__ seq_first, const int *__restrict__ seq_n,
                   const int *__restrict__ seq_pos0, const int *__restrict__ tables, int pitch,
                   const __half *__restrict__ kc, const __half *__restrict__ vc, int bs, int nk,
                   int group, int qt, float scale, __half *__restrict__ out, int out_stride)
{
    pdl_wait();
    constexpr int DPL = HD / 32;
    extern __shared__ float smem[];
    float *qs = smem;                   // [PRE_ROWS][HD]
    float *ks = qs + PRE_ROWS * HD;     // [PRE_KT][HD + 1]
    float *vs = ks + PRE_KT * (HD + 1); // [PRE_KT][HD]

    const int s = tiles[2 * blockIdx.x], t0 = tiles[2 * blockIdx.x + 1], g = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int first = seq_first[s], n = seq_n[s], pos0 = seq_pos0[s];
    const int nt = min(qt, n - t0), R = nt * group;
    const int *table = tables + (size_t)s * pitch;
    const size_t HK = (size_t)nk * HD;

    for (int i = threadIdx.x; i < R * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        const int h = g * group + r % group;
        qs[i] = qkv[(size_t)(first + t0 + r / group) * qkv_stride + (size_t)h * HD + d] * scale;
    }

    float m[PRE_RPW], l[PRE_RPW], acc[PRE_RPW][DPL];
#pragma unroll
    for (int i = 0; i < PRE_RPW; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < DPL; e++)
            acc[i][e] = 0.0f;
    }

    const int kend = pos0 + t0 + nt; // keys [0, kend): up to the tile's last position
    for (int k0 = 0; k0 < kend; k0 += PRE_KT) {
        __syncthreads(); // the previous tile's keys are consumed (and qs is written)
        for (int i = threadIdx.x; i < PRE_KT * HD / 2; i += blockDim.x) {
            const int j = i / (HD / 2), d2 = i % (HD / 2), kp = k0 + j;
            float2 kf = make_float2(0.0f, 0.0f), vf = kf;
            if (kp < kend) {
                const size_t at = ((size_t)table[kp / bs] * bs + kp % bs) * HK + (size_t)g * HD;
                kf = __half22float2(reinterpret_cast<const __half2 *>(kc + at)[d2]);
                vf = __half22float2(reinterpret_cast<const __half2 *>(vc + at)[d2]);
            }
            ks[j * (HD + 1) + 2 * d2] = kf.x;
            ks[j * (HD + 1) + 2 * d2 + 1] = kf.y;
            vs[j * HD + 2 * d2] = vf.x;
            vs[j * HD + 2 * d2 + 1] = vf.y;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < PRE_RPW; i++) {
            const int r = warp + PRE_WARPS * i;
            if (r >= R) // uniform over the warp
                continue;
            const int qpos = pos0 + t0 + r / group;
            if (k0 > qpos) // every key of the tile is in this row's future
                continue;
            const int kp = k0 + lane;
            float sc = -INFINITY;
            if (kp <= qpos) {
                const float *qr = qs + r * HD, *kr = ks + lane * (HD + 1);
                float a = 0.0f;
#pragma unroll 16
                for (int d = 0; d < HD; d++)
                    a += qr[d] * kr[d];
                sc = a;
            }
            // key k0 <= qpos: mx is finite
            const float mnew = fmaxf(m[i], warp_max(sc));
            const float p = kp <= qpos ? expf(sc - mnew) : 0.0f;
            const float alpha = expf(m[i] - mnew);
            l[i] = l[i] * alpha + warp_sum(p);
            m[i] = mnew;
#pragma unroll
            for (int e = 0; e < DPL; e++)
                acc[i][e] *= alpha;
            const int nj = min(PRE_KT, qpos - k0 + 1); // p is 0 past it
            for (int j = 0; j < nj; j++) {
                const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
                for (int e = 0; e < DPL; e++)
                    acc[i][e] += pj * vs[j * HD + lane + 32 * e];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < PRE_RPW; i++) {
        const int r = warp + PRE_WARPS * i;
        if (r >= R) continue;
        const float inv = 1.0f / l[i];
        __half *o = out + (size_t)(first + t0 + r / group) * out_stride +
                    (size_t)(g * group + r % group) * HD;
#pragma unroll
        for (int e = 0; e < DPL; e++)
            o[lane + 32 * e] = to_f16(acc[i][e] * inv);
    }
}

// ---------------------------------------------------------------- sampling
//
// Semantics (engine/sampler.c's, for the parameters of eng_sample_row):
//  greedy (temperature <= 0): the lowest id of the largest logit, NaN never; 0 when none
//    is above -inf.
//  otherwise v = logit / temperature (NaN: -inf); when max v is not finite, the greedy
//    answer. Weights w = e^(v - vmax), 0 below e^-87. top_k keeps the k best by (v
//    descending, id ascending); top_p then keeps the fewest best whose weight reaches
//    top_p * their total. The draw picks the first token at which the running sum of
//    weights exceeds u * total: in id order with no filter, in rank order with one.
// Weights are floats, sums doubles over fixed chunks (one per thread) and a block scan:
// the same answer on every run.

constexpr int SAMPLE_THREADS = 1024;

struct MaxOp {
    template <typename T> __device__ __forceinline__ T operator()(const T &a, const T &b) const
    {
        return a > b ? a : b;
    }
};
constexpr float SAMPLE_MIN_EXP = -87.0f;

__device__ __forceinline__ float sample_weight(float v, float vmax)
{
    const float x = v - vmax; // v = -inf: x = -inf
    return x >= SAMPLE_MIN_EXP ? expf(x) : 0.0f;
}

// Draws over the weights w(i), i in [0, n), with one chunk of indices per thread: returns
// the index picked for u (the same in every thread). W: a functor i -> weight.
template <typename W>
__device__ int draw_chunked(W w, int n, float u, double *pre /* shared [SAMPLE_THREADS + 1] */)
{
    typedef cub::BlockScan<double, SAMPLE_THREADS> Scan;
    typedef cub::BlockReduce<int, SAMPLE_THREADS> Red;
    __shared__ union {
        typename Scan::TempStorage scan;
        typename Red::TempStorage red;
    } tmp;
    __shared__ int picked;
    const int chunk = (n + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int lo = min(n, (int)threadIdx.x * chunk), hi = min(n, lo + chunk);
    double part = 0.0;
    int last_pos = -1; // the last index in the chunk with a positive weight
    for (int i = lo; i < hi; i++) {
        const float x = w(i);
        part += x;
        if (x > 0.0f) last_pos = i;
    }
    double before, total;
    Scan(tmp.scan).ExclusiveSum(part, before, total);
    pre[threadIdx.x] = before;
    if (threadIdx.x == 0) {
        pre[SAMPLE_THREADS] = total;
        picked = -1;
    }
    __syncthreads();
    const double r = (double)u * pre[SAMPLE_THREADS];
    // the chunks' ranges [pre[i], pre[i + 1]) tile [0, total): one thread holds r < total
    if (pre[threadIdx.x] <= r && r < pre[threadIdx.x + 1]) {
        double acc = pre[threadIdx.x];
        int got = last_pos; // the walk's sum fell a rounding short of the scan's
        for (int i = lo; i < hi; i++) {
            acc += w(i);
            if (r < acc) {
                got = i;
                break;
            }
        }
        picked = got;
    }
    __syncthreads(); // pre and tmp are read no more; picked is final
    if (picked < 0) {
        // r rounded up to the total: the last token with a positive weight
        const int best = Red(tmp.red).Reduce(last_pos, MaxOp());
        if (threadIdx.x == 0) picked = best < 0 ? 0 : best;
        __syncthreads();
    }
    return picked;
}

struct eng_sample_row_d { // engine/backend.h's eng_sample_row, the same layout
    int row;
    float temperature;
    int top_k;
    float top_p;
    float u;
    int adj_first, n_adj;
    float min_p;
};

struct eng_logit_adj_d { // engine/backend.h's eng_logit_adj, the same layout
    int32_t token;
    float add;
};

// Row j of out ([n][V]) from row src[j] of logits, for adjust_k to change without
// touching the forward's logits (two sampled rows may read one). grid-stride over n * V.
__global__ void gather_rows_k(const float *__restrict__ logits, int V,
                              const int *__restrict__ src, int n, float *__restrict__ out)
{
    const size_t total = (size_t)n * V;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = logits[(size_t)src[i / V] * V + i % V];
}

// Adds each row's amounts to its logits one after another, in their order: the CPU
// sampler's float additions (a token named twice gets both, NaN and inf included). One
// thread a row; a row holds a request's logit_bias and the penalties of its tokens so far.
__global__ void adjust_k(float *__restrict__ logits, int V,
                         const eng_sample_row_d *__restrict__ rows, int n,
                         const eng_logit_adj_d *__restrict__ adj)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const eng_sample_row_d rw = rows[i];
        float *lg = logits + (size_t)rw.row * V;
        for (int j = rw.adj_first; j < rw.adj_first + rw.n_adj; j++)
            lg[adj[j].token] += adj[j].add;
    }
}

// Whether a drawn row is filtered (top_k, top_p or min_p on): sample_k leaves it to the
// sort and sample_sorted_k, which the host runs for such rows.
__host__ __device__ __forceinline__ bool sample_filtered(int top_k, float top_p, float min_p,
                                                         int V)
{
    return (top_k > 0 && top_k < V) || top_p < 1.0f || min_p > 0.0f;
}

// Every row: the greedy answer, or the plain temperature draw; filtered rows with a finite
// vmax are left to sample_sorted_k (out[i] untouched). grid: n; block: 1024.
__global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_k(const float *__restrict__ logits, int V, const eng_sample_row_d *__restrict__ rows,
             int32_t *__restrict__ out)
{
    typedef cub::BlockReduce<float, SAMPLE_THREADS> RedF;
    __shared__ typename RedF::TempStorage tmpf;
    __shared__ float s_best, s_vmax;
    __shared__ int s_arg;
    __shared__ double pre[SAMPLE_THREADS + 1];
    const eng_sample_row_d rw = rows[blockIdx.x];
    const float *lg = logits + (size_t)rw.row * V;
    const int chunk = (V + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int lo = min(V, (int)threadIdx.x * chunk), hi = min(V, lo + chunk);

    // greedy: the chunk's best then the block's; NaN never wins (x > bv is false)
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = lo; i < hi; i++) {
        const float x = lg[i];
        if (x > bv) {
            bv = x;
            bi = i;
        }
    }
    const float best = RedF(tmpf).Reduce(bv, MaxOp());
    if (threadIdx.x == 0) {
        s_best = best;
        s_arg = INT_MAX;
    }
    __syncthreads();
    if (bi != INT_MAX && bv == s_best) atomicMin(&s_arg, bi);
    __syncthreads();
    const int greedy = s_arg == INT_MAX ? 0 : s_arg;
    if (!(rw.temperature > 0.0f)) {
        if (threadIdx.x == 0) out[blockIdx.x] = greedy;
        return;
    }
    const float temp = rw.temperature;
    float vm = -INFINITY;
    for (int i = lo; i < hi; i++) {
        const float v = lg[i] / temp;
        vm = v > vm ? v : vm; // NaN skipped
    }
    const float vmax = RedF(tmpf).Reduce(vm, MaxOp());
    if (threadIdx.x == 0) s_vmax = vmax;
    __syncthreads();
    const float vx = s_vmax;
    if (!(vx > -INFINITY && vx < INFINITY)) {
        if (threadIdx.x == 0) out[blockIdx.x] = greedy;
        return;
    }
    if (sample_filtered(rw.top_k, rw.top_p, rw.min_p, V)) return;
    const int tok = draw_chunked(
        [=](int i) {
            const float v = lg[i] / temp;
            return v == v ? sample_weight(v, vx) : 0.0f;
        },
        V, rw.u, pre);
    if (threadIdx.x == 0) out[blockIdx.x] = tok;
}

// Keys for the sort of one filtered row: v = logit / temperature with NaN as -inf and -0
// as +0 (so that equal values tie and the stable sort keeps ids ascending), ids as values.
// grid-stride over n_rows * V; which[j]: the row index in `rows` of sorted row j.
__global__ void sample_keys_k(const float *__restrict__ logits, int V,
                              const eng_sample_row_d *__restrict__ rows,
                              const int *__restrict__ which, int n_rows, float *__restrict__ keys,
                              int *__restrict__ ids, int *__restrict__ offsets)
{
    const size_t n = (size_t)n_rows * V;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(i / V), c = (int)(i % V);
        const eng_sample_row_d rw = rows[which[j]];
        float v = logits[(size_t)rw.row * V + c] / rw.temperature;
        v = v == v ? v : -INFINITY;
        v = v == 0.0f ? 0.0f : v;
        keys[i] = v;
        ids[i] = c;
        if (c == 0) offsets[j] = (int)(j * (size_t)V);
        if (i == n - 1) offsets[n_rows] = (int)n;
    }
}

// The filters and the draw on rows sorted by (v descending, id ascending): keys, ids
// [n_rows][V]. grid: n_rows; block: 1024.
__global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_sorted_k(const float *__restrict__ keys, const int *__restrict__ ids, int V,
                    const eng_sample_row_d *__restrict__ rows, const int *__restrict__ which,
                    int32_t *__restrict__ out)
{
    typedef cub::BlockReduce<int, SAMPLE_THREADS> RedI;
    typedef cub::BlockScan<double, SAMPLE_THREADS> Scan;
    __shared__ union {
        typename RedI::TempStorage red;
        typename Scan::TempStorage scan;
    } tmp;
    __shared__ double pre[SAMPLE_THREADS + 1];
    __shared__ int s_k, s_m;
    const int ri = which[blockIdx.x];
    const eng_sample_row_d rw = rows[ri];
    const float *kr = keys + (size_t)blockIdx.x * V;
    const int *ir = ids + (size_t)blockIdx.x * V;
    const float vmax = kr[0];
    if (!(vmax > -INFINITY && vmax < INFINITY)) return; // sample_k wrote the greedy answer
    const int chunk = (V + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    int lo = min(V, (int)threadIdx.x * chunk), hi = min(V, lo + chunk);
    // candidates: the keys above -inf (a prefix of the sorted row), at most top_k
    int fin = 0;
    for (int i = lo; i < hi; i++)
        fin += kr[i] > -INFINITY;
    const int n_fin = RedI(tmp.red).Sum(fin);
    if (threadIdx.x == 0) s_k = rw.top_k > 0 && rw.top_k < n_fin ? rw.top_k : n_fin;
    __syncthreads();
    const int K = s_k;
    auto w = [=](int i) { return sample_weight(kr[i], vmax); };
    int m = K;
    if (rw.top_p < 1.0f) {
        const int ck = (K + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
        lo = min(K, (int)threadIdx.x * ck);
        hi = min(K, lo + ck);
        double part = 0.0;
        for (int i = lo; i < hi; i++)
            part += w(i);
        double before, total;
        Scan(tmp.scan).ExclusiveSum(part, before, total);
        pre[threadIdx.x] = before;
        if (threadIdx.x == 0) {
            pre[SAMPLE_THREADS] = total;
            s_m = K;
        }
        __syncthreads();
        const double target = (double)rw.top_p * pre[SAMPLE_THREADS];
        // the first m with w(0) + .. + w(m - 1) >= target lies in the chunk where the
        // running sum crosses target (pre[0] = 0 < target)
        if (pre[threadIdx.x] < target && target <= pre[threadIdx.x + 1]) {
            double acc = pre[threadIdx.x];
            int got = hi;
            for (int i = lo; i < hi; i++) {
                acc += w(i);
                if (acc >= target) {
                    got = i + 1;
                    break;
                }
            }
            s_m = got;
        }
        __syncthreads();
        m = s_m;
        __syncthreads(); // pre is reused by the draw
    }
    if (rw.min_p > 0.0f) {
        // weights >= min_p (the largest is 1): a prefix of the sorted row, the first at least
        const int ck = (m + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
        lo = min(m, (int)threadIdx.x * ck);
        hi = min(m, lo + ck);
        int kept = 0;
        for (int i = lo; i < hi; i++)
            kept += w(i) >= rw.min_p;
        const int n_kept = RedI(tmp.red).Sum(kept);
        if (threadIdx.x == 0) s_m = n_kept > 0 ? n_kept : 1;
        __syncthreads();
        m = s_m;
        __syncthreads(); // tmp is reused by the draw
    }
    const int pick = draw_chunked(w, m, rw.u, pre);
    if (threadIdx.x == 0) out[ri] = ir[pick];
}

} // namespace engk

#endif
