// The engine's CUDA backend (eng_backend_i, engine/backend.h): whole Llama forward passes on
// device 0, and sampling from the logits left on the device.
//
// Weights live on the device as F16 (converted from the host's F32 rows in chunks, or
// filled with random values of a trained model's scale when a pointer is NULL); norms and
// RoPE frequencies as F32. Every projection is one cuBLAS GEMM over all tokens of the batch
// (F16 inputs, F32 accumulation and output, tensor cores). The KV cache is F16 in the
// pool's own layout plus one scratch block (kernels_cuda.cuh).
//
// A forward pass uploads one array of int32 metadata (per token: id, position, KV slot,
// sequence; per sequence: first token, count, pos0, block table row; the decode items, the
// prefill tiles, the logits rows) and runs, per layer: RMSNorm -> QKV GEMM -> RoPE + KV
// write -> attention (decode kernel for one-token sequences, tiled prefill kernel for the
// others) -> output GEMM into the residual -> RMSNorm -> gate/up GEMM -> SwiGLU -> down GEMM
// into the residual; then the final RMSNorm of the rows that want logits and the head.
//
// Decode steps (every sequence one new token, LAST logits, at most 256 sequences) are
// padded to a bucket (1, 2, 4, .., 256) with rows that write into the scratch block, and
// replayed from a CUDA graph per bucket: the first step of a bucket runs eagerly and then
// captures the graph; a graph is dropped when a buffer it refers to moves (growth, kv_init)
// or the block-table pitch grows. CACHEGATE_CUDA_GRAPHS=0 in the environment, or
// set_graphs(ctx, 0) from ops_cuda.h, turns them off.
//
// Every CUDA and cuBLAS status is checked; failures become ENG_ENOMEM (allocation) or
// ENG_EDEVICE with the message kept for last_error(). One caller at a time.
#include "backend.h"
#include "engine.h"
#include "kernels_cuda.cuh"
#include "ops_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

using namespace engk;

static_assert(sizeof(struct eng_sample_row) == sizeof(eng_sample_row_d), "sample row layout");
static_assert(sizeof(struct eng_logit_adj) == sizeof(eng_logit_adj_d), "logit amount layout");

#define N_BUCKETS 9 // decode graphs for 1, 2, 4, .., 256 sequences
#define GRAPH_MAX_SEQS 256
#define DECODE_MAX_GROUP 8       // query heads per KV head that attn_decode_k takes
#define STAGE_FLOATS (16u << 20) // weight upload chunk: 64 MiB of F32
#define LOGITS_CHUNK_BYTES ((size_t)256 << 20)
#define SORT_ROWS 16 // rows sorted at a time by the top_k / top_p sampler
#define BLAS_WORKSPACE ((size_t)32 << 20)

// ------------------------------------------------------------------ errors

struct errbuf {
    char msg[512];
};

static int set_err(errbuf *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_err(errbuf *e, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return rc;
}

static int cuda_err(errbuf *e, const char *what, cudaError_t st)
{
    return set_err(e, st == cudaErrorMemoryAllocation ? ENG_ENOMEM : ENG_EDEVICE, "%s: %s (%s)",
                   what, cudaGetErrorString(st), cudaGetErrorName(st));
}

static int blas_err(errbuf *e, const char *what, cublasStatus_t st)
{
    return set_err(e, st == CUBLAS_STATUS_ALLOC_FAILED ? ENG_ENOMEM : ENG_EDEVICE, "%s: %s", what,
                   cublasGetStatusString(st));
}

// CK: a cudaError_t call; BK: a cublasStatus_t call; LK: after a kernel launch. Each sets rc
// and jumps to `fail` (the function's one cleanup path) on failure. E: the errbuf.
#define CHECKED(what, call, ok, report)                                                            \
    do {                                                                                           \
        const auto st_ = (call);                                                                   \
        if (st_ != (ok)) {                                                                         \
            rc = report(E, what, st_);                                                             \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define CK(what, call) CHECKED(what, call, cudaSuccess, cuda_err)
#define BK(what, call) CHECKED(what, call, CUBLAS_STATUS_SUCCESS, blas_err)
#define LK(what) CK(what, cudaGetLastError())

static unsigned grid_for(size_t n, unsigned block)
{
    size_t g = (n + block - 1) / block;
    return (unsigned)(g < 1 ? 1 : g > (1u << 20) ? (1u << 20) : g);
}

// ------------------------------------------------------------------ the context

struct dlayer {
    float *attn_norm, *ffn_norm; // [n_embd]
    __half *wqkv;                // [HQ + 2 HK][n_embd]
    __half *wo;                  // [n_embd][HQ]
    __half *wgu;                 // [2 n_ff][n_embd]: gate rows, then up rows
    __half *wdown;               // [n_embd][n_ff]
};

// sampler scratch, grown on demand
struct sampler {
    eng_sample_row_d *rows; // [cap_rows]
    int32_t *out;           // [cap_rows]
    int *which;             // [cap_rows]
    int cap_rows;
    float *keys_in, *keys_out; // [SORT_ROWS][V]
    int *ids_in, *ids_out;     // [SORT_ROWS][V]
    int *offsets;              // [SORT_ROWS + 1]
    void *tmp;
    size_t tmp_bytes;
    // rows with logit amounts: their logits copied, then changed
    float *gathered;      // gathered_bytes of them
    int *src;             // [cap_rows]: the logits row each gathered row copies
    eng_logit_adj_d *adj; // adj_bytes of them
    size_t gathered_bytes, adj_bytes;
};

struct cuda_ctx {
    struct eng_hparams hp;
    int HQ, HK, NQKV, group, qt; // qt: query tokens per prefill tile, at most
    int tile_qt;                 // this forward's (prefill_qt())
    int n_sm;                    // multiprocessors
    int pdl;                     // programmatic dependent launch (sm_90 and later)
    cudaStream_t st;
    cublasHandle_t blas;
    void *blas_ws;
    char desc[300];
    errbuf E;

    __half *tok_embd; // [n_vocab][n_embd]
    __half *output;   // [n_vocab][n_embd]; tok_embd when tied
    float *out_norm;  // [n_embd]
    float *rope_inv;  // [n_rot / 2]
    struct dlayer *layers;

    // KV: per layer [n_blocks + 1][bs][n_kv][hd] f16, the last block scratch
    struct kvc_shape ks;
    __half *kc, *vc;
    size_t layer_elems; // elements of one layer of kc

    // activations, for cap_t tokens / cap_sel rows / cap_lrows logits rows
    size_t cap_t, cap_sel, cap_lrows;
    float *x;      // [T][n_embd] the residual stream
    __half *xn;    // [T][n_embd] normed, GEMM input
    float *qkv;    // [T][NQKV]
    __half *att;   // [T][HQ]
    float *gu;     // [T][2 n_ff]
    __half *h;     // [T][n_ff]
    __half *sel;   // [rows][n_embd] normed rows for the head
    float *logits; // [lrows][n_vocab]
    float *part;   // decode attention's partial states (decode_part_floats)
    size_t cap_part;
    int lo, hi; // logits rows [lo, hi) of the last forward are on the device (row - lo)

    int *meta_d, *meta_h; // the plan's int32 metadata, device and pinned host
    size_t cap_meta;

    // decode graphs
    int graphs_on, stale, g_pitch;
    cudaGraphExec_t graph[N_BUCKETS];
    long captures, replays;

    struct sampler smp;
};

// ------------------------------------------------------------------ plan: the batch's metadata

struct plan_counts {
    int T, S, nd, ntiles, rows, pitch;
};

struct plan_ptrs {
    int *tok_id, *tok_pos, *tok_slot, *tok_seq; // [T]
    int *seq_first, *seq_n, *seq_pos0;          // [S]
    int *dec;                                   // [nd] tokens for attn_decode_k
    int *tiles;                                 // [ntiles][2] (sequence, t0) for attn_prefill_k
    int *rows_src;                              // [rows] token of each logits row
    int *tables;                                // [S][pitch]
};

static size_t plan_ints(const plan_counts &c)
{
    return 4 * (size_t)c.T + 3 * (size_t)c.S + (size_t)c.nd + 2 * (size_t)c.ntiles +
           (size_t)c.rows + (size_t)c.S * c.pitch;
}

static plan_ptrs plan_at(int *base, const plan_counts &c)
{
    plan_ptrs p;
    p.tok_id = base;
    p.tok_pos = p.tok_id + c.T;
    p.tok_slot = p.tok_pos + c.T;
    p.tok_seq = p.tok_slot + c.T;
    p.seq_first = p.tok_seq + c.T;
    p.seq_n = p.seq_first + c.S;
    p.seq_pos0 = p.seq_n + c.S;
    p.dec = p.seq_pos0 + c.S;
    p.tiles = p.dec + c.nd;
    p.rows_src = p.tiles + 2 * c.ntiles;
    p.tables = p.rows_src + c.rows;
    return p;
}

static int blocks_for(int positions, int bs)
{
    return (positions + bs - 1) / bs;
}

// Checks the batch against the pool (ids, block ids) and counts it. decode_ok: one-token
// sequences may go through attn_decode_k. Returns 0 or ENG_EINVAL with a message.
static int plan_count(const struct eng_seq *seqs, int n_seqs, int n_vocab, int bs, int n_blocks,
                      int qt, int decode_ok, int check_tokens, errbuf *E, plan_counts *c)
{
    if (!seqs || n_seqs <= 0) return set_err(E, ENG_EINVAL, "forward: no sequences");
    *c = plan_counts{0, n_seqs, 0, 0, 0, 1};
    for (int s = 0; s < n_seqs; s++) {
        const struct eng_seq *q = &seqs[s];
        if (q->n_new <= 0 || q->pos0 < 0 || q->pos0 > INT_MAX - q->n_new || !q->block_table ||
            (check_tokens && !q->tokens))
            return set_err(E, ENG_EINVAL, "forward: sequence %d: bad n_new, pos0 or table", s);
        if ((int64_t)c->T + q->n_new > INT_MAX / 8)
            return set_err(E, ENG_EINVAL, "forward: too many tokens");
        int nb = blocks_for(q->pos0 + q->n_new, bs);
        for (int b = 0; b < nb; b++)
            if (q->block_table[b] < 0 || q->block_table[b] >= n_blocks)
                return set_err(E, ENG_EINVAL, "forward: sequence %d: block id %d outside the pool",
                               s, (int)q->block_table[b]);
        if (check_tokens)
            for (int i = 0; i < q->n_new; i++)
                if (q->tokens[i] < 0 || q->tokens[i] >= n_vocab)
                    return set_err(E, ENG_EINVAL, "forward: token id %d outside the vocabulary",
                                   (int)q->tokens[i]);
        c->T += q->n_new;
        c->rows += q->logits == ENG_LOGITS_ALL ? q->n_new : q->logits == ENG_LOGITS_LAST ? 1 : 0;
        if (q->n_new == 1 && decode_ok)
            c->nd++;
        else
            c->ntiles += (q->n_new + qt - 1) / qt;
        c->pitch = nb > c->pitch ? nb : c->pitch;
    }
    return 0;
}

// Fills the host metadata for counts c (c->S >= n_seqs; sequences n_seqs .. c->S - 1 are
// padding: one token 0 at position 0 in the scratch block). Table rows are padded with the
// scratch block up to c->pitch.
static void plan_fill(const struct eng_seq *seqs, int n_seqs, int bs, int scratch, int qt,
                      int decode_ok, const plan_counts &c, int *base)
{
    plan_ptrs p = plan_at(base, c);
    int t = 0, nd = 0, nt = 0, r = 0;
    for (int s = 0; s < c.S; s++) {
        const int pad = s >= n_seqs;
        const struct eng_seq *q = pad ? nullptr : &seqs[s];
        const int n = pad ? 1 : q->n_new, pos0 = pad ? 0 : q->pos0;
        const int nb = pad ? 0 : blocks_for(pos0 + n, bs);
        int *row = p.tables + (size_t)s * c.pitch;
        for (int b = 0; b < c.pitch; b++)
            row[b] = b < nb ? q->block_table[b] : scratch;
        p.seq_first[s] = t;
        p.seq_n[s] = n;
        p.seq_pos0[s] = pos0;
        for (int i = 0; i < n; i++) {
            const int pos = pos0 + i;
            p.tok_id[t + i] = pad ? 0 : q->tokens ? q->tokens[i] : 0;
            p.tok_pos[t + i] = pos;
            p.tok_slot[t + i] = pad ? scratch * bs : row[pos / bs] * bs + pos % bs;
            p.tok_seq[t + i] = s;
        }
        if (n == 1 && decode_ok) {
            p.dec[nd++] = t;
        } else {
            // the tiles with the most keys first
            for (int t0 = (n - 1) / qt * qt; t0 >= 0; t0 -= qt) {
                p.tiles[2 * nt] = s;
                p.tiles[2 * nt + 1] = t0;
                nt++;
            }
        }
        const enum eng_logits lg = pad ? ENG_LOGITS_LAST : q->logits;
        if (lg == ENG_LOGITS_ALL)
            for (int i = 0; i < n; i++)
                p.rows_src[r++] = t + i;
        else if (lg == ENG_LOGITS_LAST)
            p.rows_src[r++] = t + n - 1;
        t += n;
    }
}

// ------------------------------------------------------------------ launches shared with the ops

// Launches kernel k; with pdl (sm_90 and later) it may start while the kernel before it on
// st finishes (programmatic dependent launch, kept by graph capture): every kernel so
// launched calls pdl_wait() first (kernels_cuda.cuh). Errors are also cudaGetLastError()'s.
template <class... P, class... A>
static cudaError_t launch_k(int pdl, void (*k)(P...), dim3 grid, dim3 block, size_t smem,
                            cudaStream_t st, A... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, static_cast<P>(args)...);
}

static void prefill_attrs(void)
{
    // above 48 KiB of dynamic shared memory needs the opt-in; errors surface at launch
    cudaFuncSetAttribute(attn_prefill_k<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)prefill_smem(64));
    cudaFuncSetAttribute(attn_prefill_k<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)prefill_smem(128));
    cudaGetLastError();
}

#define DECODE_ARGS                                                                                \
    qkv, qkv_stride, p.dec, p.tok_seq, p.tok_pos, p.tables, c.pitch, kc, vc, bs, nk, scale, out,   \
        out_stride, nsplit, part
#define DECODE_CASE(HD, G)                                                                         \
    case G:                                                                                        \
        launch_k(pdl, attn_decode_k<HD, G>, grid, DEC_WARPS * 32, 0, st, DECODE_ARGS);             \
        break;

// Ranges each decode item's context is cut into: enough blocks for two waves over the
// multiprocessors, at most DEC_MAX_SPLITS. It depends on the batch alone, not on the
// contexts, so that a decode graph captured for a batch size stays right.
static int decode_splits(int nd, int nk, int n_sm)
{
    const long blocks = (long)nd * nk, want = 2L * n_sm;
    if (blocks <= 0) return 1;
    const long z = (want + blocks - 1) / blocks;
    return z < 1 ? 1 : z > DEC_MAX_SPLITS ? DEC_MAX_SPLITS : (int)z;
}

// Query tokens a prefill tile takes: max_qt (PRE_ROWS rows of query heads), or fewer when
// the pass's tiles would not fill the multiprocessors twice over. A tile reads every key up to
// its last token, so a few new tokens over a long cached prefix (a question after a shared
// system prompt) ran on a few blocks, each over the whole context: 46 tokens after 1,024
// cached took nearly as long as all 1,070. Smaller tiles read the keys more often (from L2)
// but side by side; a row's arithmetic does not depend on its tile.
static int prefill_qt(const struct eng_seq *seqs, int n_seqs, int max_qt, int nk, int n_sm,
                      int decode_ok)
{
    int qt = max_qt;
    while (seqs && qt > 1) {
        long tiles = 0;
        for (int s = 0; s < n_seqs; s++)
            if (seqs[s].n_new > 1 || (seqs[s].n_new == 1 && !decode_ok))
                tiles += ((long)seqs[s].n_new + qt - 1) / qt;
        if (tiles == 0 || tiles * nk >= 2L * n_sm) break; // two waves, as decode_splits()
        qt = (qt + 1) / 2;
    }
    return qt;
}

// floats of attn_decode_k's partial states for nd items
static size_t decode_part_floats(int nd, int n_head, int hd, int nsplit)
{
    return nsplit > 1 ? (size_t)nd * n_head * nsplit * (hd + 2) : 0;
}

// Attention of the plan's tokens over layer cache kc / vc. hd in {64, 128}. Decode items
// cut into nsplit ranges need part: decode_part_floats() floats.
static void launch_attention(cudaStream_t st, const plan_counts &c, const plan_ptrs &p,
                             const float *qkv, int qkv_stride, const __half *kc, const __half *vc,
                             int bs, int nk, int hd, int group, int qt, __half *out, int out_stride,
                             int nsplit, float *part, int pdl)
{
    const float scale = 1.0f / sqrtf((float)hd);
    if (c.nd > 0) {
        dim3 grid(c.nd, nk, nsplit);
        if (hd == 64) {
            switch (group) {
                DECODE_CASE(64, 1)
                DECODE_CASE(64, 2)
                DECODE_CASE(64, 3)
                DECODE_CASE(64, 4)
                DECODE_CASE(64, 5)
                DECODE_CASE(64, 6)
                DECODE_CASE(64, 7)
                DECODE_CASE(64, 8)
            }
        } else {
            switch (group) {
                DECODE_CASE(128, 1)
                DECODE_CASE(128, 2)
                DECODE_CASE(128, 3)
                DECODE_CASE(128, 4)
                DECODE_CASE(128, 5)
                DECODE_CASE(128, 6)
                DECODE_CASE(128, 7)
                DECODE_CASE(128, 8)
            }
        }
        if (nsplit > 1)
            launch_k(pdl, attn_combine_k, dim3(c.nd, nk * group), hd, 0, st, part, nsplit, hd,
                     p.dec, out, out_stride);
    }
    if (c.ntiles > 0) {
        dim3 grid(c.ntiles, nk);
        if (hd == 64)
            launch_k(pdl, attn_prefill_k<64>, grid, PRE_WARPS * 32, prefill_smem(64), st, qkv,
                     qkv_stride, p.tiles, p.seq_first, p.seq_n, p.seq_pos0, p.tables, c.pitch, kc,
                     vc, bs, nk, group, qt, scale, out, out_stride);
        else
            launch_k(pdl, attn_prefill_k<128>, grid, PRE_WARPS * 32, prefill_smem(128), st, qkv,
                     qkv_stride, p.tiles, p.seq_first, p.seq_n, p.seq_pos0, p.tables, c.pitch, kc,
                     vc, bs, nk, group, qt, scale, out, out_stride);
    }
}

// runs M(1) .. M(GEMV_MAX_T) as the cases of a switch on T
#define SWITCH_T(T, M)                                                                             \
    switch (T) {                                                                                   \
        M(1) M(2)                                                                                  \
    }
static_assert(GEMV_MAX_T == 2, "SWITCH_T lists every T up to GEMV_MAX_T");
#define GEMV_LAUNCH(TT, WPR)                                                                       \
    le = launch_k(pdl, gemv_k<TT, WPR>, grid_for((size_t)n, GEMV_WARPS / WPR), GEMV_WARPS * 32, 0, \
                  st, W, n, k, x, y, accumulate)
#define GEMV_CASE(TT)                                                                              \
    case TT:                                                                                       \
        if (k >= 32 * 8 * GEMV_UNROLL * 4)                                                         \
            GEMV_LAUNCH(TT, 4);                                                                    \
        else if (k >= 32 * 8 * GEMV_UNROLL * 2)                                                    \
            GEMV_LAUNCH(TT, 2);                                                                    \
        else                                                                                       \
            GEMV_LAUNCH(TT, 1);                                                                    \
        break;

// y [T][n] (+)= x [T][k] W^T, W [n][k]. Up to GEMV_MAX_T tokens (decode of a small batch):
// gemv_k, which starts loading W before the kernel before it has finished (pdl); otherwise
// cuBLAS (column-major: y^T = W x^T with W read transposed).
static cublasStatus_t gemm(cublasHandle_t h, cudaStream_t st, int pdl, const __half *W, int n,
                           int k, const __half *x, int T, float *y, int accumulate)
{
    // (grid_for's 2^20 blocks are one row each at the least)
    if (T <= GEMV_MAX_T && k % 8 == 0 && n <= (1 << 20)) {
        cudaError_t le = cudaSuccess;
        SWITCH_T(T, GEMV_CASE)
        if (le == cudaSuccess) return CUBLAS_STATUS_SUCCESS;
        cudaGetLastError(); // this launch's error, reported here, not by the next check
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, T, k, &alpha, W, CUDA_R_16F, k, x,
                        CUDA_R_16F, k, &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
}

// ------------------------------------------------------------------ buffers

// Grows a device buffer to at least `bytes` (contents lost); marks the graphs stale when it
// moves.
// *p holds at least bytes (*cap of them), reallocated without copying.
static int grow_buf(errbuf *E, void **p, size_t *cap, size_t bytes, const char *what)
{
    int rc = 0;
    if (bytes <= *cap && *p) return 0;
    cudaFree(*p);
    *p = nullptr;
    *cap = 0;
    CK(what, cudaMalloc(p, bytes));
    *cap = bytes;
    return 0;
fail:
    *p = nullptr;
    return rc;
}

// grow_buf() for a buffer the decode graphs may refer to: they are dropped when it moves.
static int grow(cuda_ctx *ctx, void **p, size_t *cap, size_t bytes, const char *what)
{
    if (bytes <= *cap && *p) return 0;
    ctx->stale = 1;
    return grow_buf(&ctx->E, p, cap, bytes, what);
}

static int ensure_acts(cuda_ctx *c, int T, int sel_rows, int lrows)
{
    const struct eng_hparams *hp = &c->hp;
    const size_t D = hp->n_embd, F = hp->n_ff;
    int rc;
    if ((size_t)T > c->cap_t) {
        size_t t = ((size_t)T + 255) / 256 * 256, cap;
        struct {
            void **p;
            size_t bytes;
        } bufs[] = {{(void **)&c->x, t * D * 4},         {(void **)&c->xn, t * D * 2},
                    {(void **)&c->qkv, t * c->NQKV * 4}, {(void **)&c->att, t * c->HQ * 2},
                    {(void **)&c->gu, t * 2 * F * 4},    {(void **)&c->h, t * F * 2}};
        for (auto &b : bufs) {
            cap = 0;
            if ((rc = grow(c, b.p, &cap, b.bytes, "cudaMalloc (activations)"))) {
                c->cap_t = 0;
                return rc;
            }
        }
        c->cap_t = t;
    }
    if ((size_t)sel_rows > c->cap_sel) {
        size_t r = ((size_t)sel_rows + 255) / 256 * 256, cap = 0;
        if ((rc = grow(c, (void **)&c->sel, &cap, r * D * 2, "cudaMalloc (head rows)"))) {
            c->cap_sel = 0;
            return rc;
        }
        c->cap_sel = r;
    }
    if ((size_t)lrows > c->cap_lrows) {
        size_t cap = 0;
        c->lo = c->hi = 0;
        if ((rc = grow(c, (void **)&c->logits, &cap, (size_t)lrows * hp->n_vocab * 4,
                       "cudaMalloc (logits)"))) {
            c->cap_lrows = 0;
            return rc;
        }
        c->cap_lrows = (size_t)lrows;
    }
    return 0;
}

static int ensure_meta(cuda_ctx *c, size_t ints)
{
    errbuf *E = &c->E;
    int rc = 0;
    if (ints <= c->cap_meta) return 0;
    size_t n = (ints + 65535) / 65536 * 65536;
    cudaFree(c->meta_d);
    cudaFreeHost(c->meta_h);
    c->meta_d = nullptr;
    c->meta_h = nullptr;
    c->cap_meta = 0;
    c->stale = 1;
    CK("cudaMalloc (batch metadata)", cudaMalloc((void **)&c->meta_d, n * sizeof(int)));
    CK("cudaMallocHost (batch metadata)", cudaMallocHost((void **)&c->meta_h, n * sizeof(int)));
    c->cap_meta = n;
    return 0;
fail:
    return rc;
}

static void drop_graphs(cuda_ctx *c)
{
    for (int i = 0; i < N_BUCKETS; i++)
        if (c->graph[i]) {
            cudaGraphExecDestroy(c->graph[i]);
            c->graph[i] = nullptr;
        }
    c->stale = 0;
}

// ------------------------------------------------------------------ the forward pass

// Programmatic launches for decode steps only: measured on an H100, they make a decode step
// of the default model 1.2x faster and a 512-token prefill 2x slower.
static int plan_pdl(const cuda_ctx *c, const plan_counts &pc)
{
    return c->pdl && pc.ntiles == 0;
}

// Every layer, then the final norm of the logits rows into sel; nothing that synchronizes or
// allocates (it is captured into graphs).
static int enqueue_layers(cuda_ctx *c, const plan_counts &pc, const plan_ptrs &p)
{
    const struct eng_hparams *hp = &c->hp;
    const int D = hp->n_embd, F = hp->n_ff, T = pc.T, bs = c->ks.block_size;
    errbuf *E = &c->E;
    cudaStream_t st = c->st;
    int rc = 0;
    // a thread per rotated pair, so that one token's rotation is one pass
    const int pairs = (hp->n_head + hp->n_head_kv) * hp->head_dim / 2;
    const unsigned rope_threads = pairs >= 1024 ? 1024 : (unsigned)(pairs + 31) / 32 * 32;
    const int pdl = plan_pdl(c, pc), nsplit = decode_splits(pc.nd, hp->n_head_kv, c->n_sm);
    launch_k(pdl, embed_k, T, 256, 0, st, p.tok_id, c->tok_embd, c->x, D);
    LK("embed_k");
    for (int l = 0; l < hp->n_layer; l++) {
        const struct dlayer *L = &c->layers[l];
        __half *kc = c->kc + (size_t)l * c->layer_elems, *vc = c->vc + (size_t)l * c->layer_elems;
        launch_k(pdl, rmsnorm_k<__half>, T, 256, 0, st, c->x, nullptr, L->attn_norm, c->xn, D,
                 hp->rms_eps);
        LK("rmsnorm_k");
        BK("GEMM (qkv)", gemm(c->blas, st, pdl, L->wqkv, c->NQKV, D, c->xn, T, c->qkv, 0));
        launch_k(pdl, rope_kv_k, T, rope_threads, 0, st, c->qkv, c->NQKV, p.tok_pos, hp->n_head,
                 hp->n_head_kv, hp->head_dim, hp->n_rot, c->rope_inv, p.tok_slot, kc, vc);
        LK("rope_kv_k");
        launch_attention(st, pc, p, c->qkv, c->NQKV, kc, vc, bs, hp->n_head_kv, hp->head_dim,
                         c->group, c->tile_qt, c->att, c->HQ, nsplit, c->part, pdl);
        LK("attention");
        BK("GEMM (wo)", gemm(c->blas, st, pdl, L->wo, D, c->HQ, c->att, T, c->x, 1));
        launch_k(pdl, rmsnorm_k<__half>, T, 256, 0, st, c->x, nullptr, L->ffn_norm, c->xn, D,
                 hp->rms_eps);
        LK("rmsnorm_k");
        BK("GEMM (gate/up)", gemm(c->blas, st, pdl, L->wgu, 2 * F, D, c->xn, T, c->gu, 0));
        size_t n = (size_t)T * F;
        launch_k(pdl, swiglu_k, grid_for(n, 256), 256, 0, st, c->gu, c->h, F, n);
        LK("swiglu_k");
        BK("GEMM (down)", gemm(c->blas, st, pdl, L->wdown, D, F, c->h, T, c->x, 1));
    }
    if (pc.rows > 0) {
        launch_k(pdl, rmsnorm_k<__half>, pc.rows, 256, 0, st, c->x, p.rows_src, c->out_norm, c->sel,
                 D, hp->rms_eps);
        LK("rmsnorm_k (output)");
    }
    return 0;
fail:
    return rc;
}

// logits rows [r0, r0 + n) of the head into c->logits
static int enqueue_head(cuda_ctx *c, int r0, int n, int pdl)
{
    errbuf *E = &c->E;
    int rc = 0;
    BK("GEMM (output)", gemm(c->blas, c->st, pdl, c->output, c->hp.n_vocab, c->hp.n_embd,
                             c->sel + (size_t)r0 * c->hp.n_embd, n, c->logits, 0));
    return 0;
fail:
    return rc;
}

static int bucket_of(int n, int *index)
{
    int b = 1, i = 0;
    while (b < n)
        b <<= 1, i++;
    *index = i;
    return b;
}

static int be_forward(void *vctx, const struct eng_seq *seqs, int n_seqs, float *logits)
{
    cuda_ctx *c = (cuda_ctx *)vctx;
    errbuf *E = &c->E;
    const struct eng_hparams *hp = &c->hp;
    const int V = hp->n_vocab, bs = c->ks.block_size;
    int rc = 0;
    E->msg[0] = 0;
    if (!c->kc) return set_err(E, ENG_EINVAL, "forward before kv_init");
    const int decode_ok = c->group <= DECODE_MAX_GROUP;
    // graphs are of one-token decodes, which take no tiles: tile_qt is in none of them
    c->tile_qt = prefill_qt(seqs, n_seqs, c->qt, hp->n_head_kv, c->n_sm, decode_ok);
    plan_counts pc;
    if ((rc = plan_count(seqs, n_seqs, V, bs, c->ks.n_blocks, c->tile_qt, decode_ok, 1, E, &pc)))
        return rc;
    int graph = c->graphs_on && decode_ok && n_seqs <= GRAPH_MAX_SEQS && pc.T == n_seqs;
    for (int s = 0; graph && s < n_seqs; s++)
        graph = seqs[s].logits == ENG_LOGITS_LAST;
    int bi = 0;
    if (graph) {
        const int B = bucket_of(n_seqs, &bi);
        if (pc.pitch > c->g_pitch) {
            int p = 16;
            while (p < pc.pitch)
                p <<= 1;
            c->g_pitch = p;
            c->stale = 1;
        }
        pc = plan_counts{B, B, B, 0, B, c->g_pitch};
    }
    const size_t chunk = LOGITS_CHUNK_BYTES / ((size_t)V * 4);
    const int lrows_max = (int)(chunk < GRAPH_MAX_SEQS ? GRAPH_MAX_SEQS : chunk);
    const int lrows = pc.rows == 0 ? 0 : logits && pc.rows > lrows_max ? lrows_max : pc.rows;
    const size_t part = decode_part_floats(pc.nd, hp->n_head, hp->head_dim,
                                           decode_splits(pc.nd, hp->n_head_kv, c->n_sm)) *
                        sizeof(float);
    if ((rc = ensure_acts(c, pc.T, pc.rows, lrows)) || (rc = ensure_meta(c, plan_ints(pc))) ||
        (part &&
         (rc = grow(c, (void **)&c->part, &c->cap_part, part, "cudaMalloc (attention partials)"))))
        return rc;
    if (c->stale) drop_graphs(c);
    plan_fill(seqs, n_seqs, bs, c->ks.n_blocks, c->tile_qt, decode_ok, pc, c->meta_h);
    const plan_ptrs p = plan_at(c->meta_d, pc);
    const int pdl = plan_pdl(c, pc);
    c->lo = c->hi = 0;
    CK("cudaMemcpyAsync (batch metadata)",
       cudaMemcpyAsync(c->meta_d, c->meta_h, plan_ints(pc) * sizeof(int), cudaMemcpyHostToDevice,
                       c->st));
    if (graph && c->graph[bi]) {
        CK("cudaGraphLaunch", cudaGraphLaunch(c->graph[bi], c->st));
        c->replays++;
    } else {
        if ((rc = enqueue_layers(c, pc, p))) goto fail;
        if (graph) {
            // the eager pass has loaded every kernel and settled cuBLAS's choices: capture the
            // same work for the next steps of this bucket (capturing executes nothing)
            if ((rc = enqueue_head(c, 0, pc.rows, pdl))) goto fail;
            cudaGraph_t g = nullptr;
            cudaGraphExec_t ge = nullptr;
            int ok = cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
            if (ok) {
                ok = enqueue_layers(c, pc, p) == 0 &&
                     enqueue_head(c, 0, pc.rows, pdl) == 0;
                ok = cudaStreamEndCapture(c->st, &g) == cudaSuccess && ok && g;
            }
            if (ok) ok = cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
            if (g) cudaGraphDestroy(g);
            if (ok) {
                c->graph[bi] = ge;
                c->captures++;
            } else {
                // capture is an optimization: run kernel by kernel from now on
                cudaGetLastError();
                c->graphs_on = 0;
                E->msg[0] = 0;
            }
        }
    }
    if (graph) {
        if (logits)
            CK("cudaMemcpyAsync (logits)",
               cudaMemcpyAsync(logits, c->logits, (size_t)n_seqs * V * sizeof(float),
                               cudaMemcpyDeviceToHost, c->st));
        c->lo = 0;
        c->hi = n_seqs;
    } else if (pc.rows > 0) {
        for (int r0 = 0; r0 < pc.rows; r0 += lrows) {
            const int n = pc.rows - r0 < lrows ? pc.rows - r0 : lrows;
            if ((rc = enqueue_head(c, r0, n, pdl))) goto fail;
            if (logits)
                CK("cudaMemcpyAsync (logits)",
                   cudaMemcpyAsync(logits + (size_t)r0 * V, c->logits,
                                   (size_t)n * V * sizeof(float), cudaMemcpyDeviceToHost, c->st));
            c->lo = r0;
            c->hi = r0 + n;
        }
    }
    CK("forward", cudaStreamSynchronize(c->st));
    return 0;
fail:
    c->lo = c->hi = 0;
    cudaStreamSynchronize(c->st);
    return rc;
}

// ------------------------------------------------------------------ sampling

static int sampler_grow(sampler *s, int n, int V, errbuf *E)
{
    int rc = 0;
    if (n > s->cap_rows) {
        cudaFree(s->rows);
        cudaFree(s->out);
        cudaFree(s->which);
        cudaFree(s->src);
        s->rows = nullptr;
        s->out = nullptr;
        s->which = nullptr;
        s->src = nullptr;
        s->cap_rows = 0;
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->rows, (size_t)n * sizeof *s->rows));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->out, (size_t)n * sizeof *s->out));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->which, (size_t)n * sizeof *s->which));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->src, (size_t)n * sizeof *s->src));
        s->cap_rows = n;
    }
    if (!s->keys_in || !s->keys_out || !s->ids_in || !s->ids_out || !s->offsets) {
        // all or none: a failure part way must not leave keys_in set and the others NULL
        const size_t nv = (size_t)SORT_ROWS * V;
        cudaFree(s->keys_in);
        cudaFree(s->keys_out);
        cudaFree(s->ids_in);
        cudaFree(s->ids_out);
        cudaFree(s->offsets);
        s->keys_in = s->keys_out = nullptr;
        s->ids_in = s->ids_out = s->offsets = nullptr;
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->keys_in, nv * sizeof(float)));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->keys_out, nv * sizeof(float)));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->ids_in, nv * sizeof(int)));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->ids_out, nv * sizeof(int)));
        CK("cudaMalloc (sampler)", cudaMalloc((void **)&s->offsets, (SORT_ROWS + 1) * sizeof(int)));
    }
    return 0;
fail:
    return rc;
}

static void sampler_free(sampler *s)
{
    cudaFree(s->rows);
    cudaFree(s->out);
    cudaFree(s->which);
    cudaFree(s->keys_in);
    cudaFree(s->keys_out);
    cudaFree(s->ids_in);
    cudaFree(s->ids_out);
    cudaFree(s->offsets);
    cudaFree(s->tmp);
    cudaFree(s->gathered);
    cudaFree(s->src);
    cudaFree(s->adj);
    memset(s, 0, sizeof *s);
}

// Room for n gathered rows and n_adj amounts.
static int sampler_grow_adj(sampler *s, int n, int V, int n_adj, errbuf *E)
{
    int rc = grow_buf(E, (void **)&s->gathered, &s->gathered_bytes,
                      (size_t)n * V * sizeof *s->gathered, "cudaMalloc (sampler)");
    return rc ? rc
              : grow_buf(E, (void **)&s->adj, &s->adj_bytes, (size_t)n_adj * sizeof *s->adj,
                         "cudaMalloc (sampler)");
}

// rows[i].row indexes logits ([..][V] on the device) directly; rows[i]'s amounts are
// adj[adj_first, +n_adj) (checked here). With any amount, every row is sampled from a
// changed copy of its logits (gathered), the forward's logits left as they were.
static int run_sample(cudaStream_t st, sampler *s, const float *logits, int V,
                      const struct eng_sample_row *rows, int n, const struct eng_logit_adj *adj,
                      int n_adj, int32_t *tokens, errbuf *E)
{
    int rc = 0, n_sorted = 0, adjusted = 0;
    int *which_h = nullptr, *src_h;
    struct eng_sample_row *local;
    if (n <= 0) return 0;
    if ((size_t)SORT_ROWS * V > INT_MAX)
        return set_err(E, ENG_ENOTSUP, "sample: vocabulary too large");
    if (n_adj < 0 || (n_adj > 0 && !adj)) return set_err(E, ENG_EINVAL, "sample: bad amounts");
    for (int i = 0; i < n; i++) {
        const struct eng_sample_row *r = &rows[i];
        if (r->n_adj < 0 || r->adj_first < 0 || (r->n_adj && r->adj_first > n_adj - r->n_adj))
            return set_err(E, ENG_EINVAL, "sample: row %d names amounts [%d, +%d) of %d", i,
                           r->adj_first, r->n_adj, n_adj);
        for (int j = r->adj_first; j < r->adj_first + r->n_adj; j++)
            if (adj[j].token < 0 || adj[j].token >= V)
                return set_err(E, ENG_EINVAL, "sample: token %d out of the vocabulary",
                               (int)adj[j].token);
        adjusted |= r->n_adj > 0;
    }
    if ((rc = sampler_grow(s, n, V, E))) return rc;
    if (adjusted && (rc = sampler_grow_adj(s, n, V, n_adj, E))) return rc;
    // which, then src and local: one allocation
    which_h = (int *)malloc((size_t)n * (2 * sizeof(int) + sizeof *local));
    if (!which_h) return set_err(E, ENG_ENOMEM, "sample: out of host memory");
    src_h = which_h + n;
    local = (struct eng_sample_row *)(src_h + n);
    for (int i = 0; i < n; i++)
        if (rows[i].temperature > 0.0f &&
            sample_filtered(rows[i].top_k, rows[i].top_p, rows[i].min_p, V))
            which_h[n_sorted++] = i;
    if (adjusted) {
        for (int i = 0; i < n; i++) {
            src_h[i] = rows[i].row;
            local[i] = rows[i];
            local[i].row = i;
        }
        rows = local;
        CK("cudaMemcpyAsync (sample rows)",
           cudaMemcpyAsync(s->src, src_h, (size_t)n * sizeof *src_h, cudaMemcpyHostToDevice, st));
        CK("cudaMemcpyAsync (logit amounts)",
           cudaMemcpyAsync(s->adj, adj, (size_t)n_adj * sizeof *adj, cudaMemcpyHostToDevice, st));
    }
    CK("cudaMemcpyAsync (sample rows)",
       cudaMemcpyAsync(s->rows, rows, (size_t)n * sizeof *rows, cudaMemcpyHostToDevice, st));
    // copies from pageable memory wait for the stream: all of them before the kernels
    if (n_sorted)
        CK("cudaMemcpyAsync (sample rows)",
           cudaMemcpyAsync(s->which, which_h, (size_t)n_sorted * sizeof(int),
                           cudaMemcpyHostToDevice, st));
    if (adjusted) {
        gather_rows_k<<<grid_for((size_t)n * V, 256), 256, 0, st>>>(logits, V, s->src, n,
                                                                    s->gathered);
        LK("gather_rows_k");
        adjust_k<<<grid_for((size_t)n, 64), 64, 0, st>>>(s->gathered, V, s->rows, n, s->adj);
        LK("adjust_k");
        logits = s->gathered;
    }
    sample_k<<<n, SAMPLE_THREADS, 0, st>>>(logits, V, s->rows, s->out);
    LK("sample_k");
    for (int j0 = 0; j0 < n_sorted; j0 += SORT_ROWS) {
        const int m = n_sorted - j0 < SORT_ROWS ? n_sorted - j0 : SORT_ROWS;
        const size_t items = (size_t)m * V;
        sample_keys_k<<<grid_for(items, 256), 256, 0, st>>>(logits, V, s->rows, s->which + j0, m,
                                                            s->keys_in, s->ids_in, s->offsets);
        LK("sample_keys_k");
        size_t need = 0;
        CK("cub sort (size)", cub::DeviceSegmentedRadixSort::SortPairsDescending(
                                  nullptr, need, s->keys_in, s->keys_out, s->ids_in, s->ids_out,
                                  (int)items, m, s->offsets, s->offsets + 1, 0, 32, st));
        if (need > s->tmp_bytes) {
            cudaFree(s->tmp);
            s->tmp = nullptr;
            s->tmp_bytes = 0;
            CK("cudaMalloc (sort)", cudaMalloc(&s->tmp, need));
            s->tmp_bytes = need;
        }
        size_t have = s->tmp_bytes;
        CK("cub sort", cub::DeviceSegmentedRadixSort::SortPairsDescending(
                           s->tmp, have, s->keys_in, s->keys_out, s->ids_in, s->ids_out, (int)items,
                           m, s->offsets, s->offsets + 1, 0, 32, st));
        sample_sorted_k<<<m, SAMPLE_THREADS, 0, st>>>(s->keys_out, s->ids_out, V, s->rows,
                                                      s->which + j0, s->out);
        LK("sample_sorted_k");
    }
    CK("cudaMemcpyAsync (tokens)",
       cudaMemcpyAsync(tokens, s->out, (size_t)n * sizeof *tokens, cudaMemcpyDeviceToHost, st));
    CK("sample", cudaStreamSynchronize(st));
    free(which_h);
    return 0;
fail:
    cudaStreamSynchronize(st);
    free(which_h);
    return rc;
}

static int be_sample(void *vctx, const struct eng_sample_row *rows, int n,
                     const struct eng_logit_adj *adj, int n_adj, int32_t *tokens)
{
    cuda_ctx *c = (cuda_ctx *)vctx;
    errbuf *E = &c->E;
    E->msg[0] = 0;
    if (n < 0 || (n > 0 && (!rows || !tokens)))
        return set_err(E, ENG_EINVAL, "sample: bad arguments");
    struct eng_sample_row *local =
        (struct eng_sample_row *)malloc((size_t)(n > 0 ? n : 1) * sizeof *local);
    if (!local) return set_err(E, ENG_ENOMEM, "sample: out of host memory");
    for (int i = 0; i < n; i++) {
        if (rows[i].row < c->lo || rows[i].row >= c->hi) {
            free(local);
            return set_err(E, ENG_EINVAL,
                           "sample: row %d is not on the device (rows %d..%d of the last pass)",
                           rows[i].row, c->lo, c->hi - 1);
        }
        local[i] = rows[i];
        local[i].row -= c->lo;
    }
    int rc = run_sample(c->st, &c->smp, c->logits, c->hp.n_vocab, local, n, adj, n_adj, tokens, E);
    free(local);
    return rc;
}

// ------------------------------------------------------------------ KV storage

static size_t kv_block_bytes(const struct kvc_shape *s)
{
    return 2 * (size_t)s->n_layer * s->block_size * s->n_kv_head * s->head_dim * sizeof(__half);
}

static int be_kv_capacity(void *vctx, const struct kvc_shape *shape, double fraction, int *n_blocks)
{
    cuda_ctx *c = (cuda_ctx *)vctx;
    errbuf *E = &c->E;
    int rc = 0;
    E->msg[0] = 0;
    *n_blocks = 0;
    if (!shape || shape->block_size <= 0 || shape->n_layer <= 0 || shape->n_kv_head <= 0 ||
        shape->head_dim <= 0 || !(fraction > 0.0 && fraction <= 1.0))
        return set_err(E, ENG_EINVAL, "kv_capacity: bad shape or fraction");
    size_t free_b = 0, total_b = 0;
    CK("cudaMemGetInfo", cudaMemGetInfo(&free_b, &total_b));
    {
        // what kv_init would free first counts as free
        double avail = (double)free_b;
        if (c->kc) avail += 2.0 * (double)c->layer_elems * c->ks.n_layer * sizeof(__half);
        double n = floor(avail * fraction / (double)kv_block_bytes(shape)) - 1; // scratch block
        *n_blocks = n < 0 ? 0 : n > INT_MAX / 2 ? INT_MAX / 2 : (int)n;
    }
    return 0;
fail:
    return rc;
}

static int be_kv_init(void *vctx, const struct kvc_shape *shape)
{
    cuda_ctx *c = (cuda_ctx *)vctx;
    errbuf *E = &c->E;
    const struct eng_hparams *hp = &c->hp;
    int rc = 0;
    E->msg[0] = 0;
    if (!shape || shape->n_layer != hp->n_layer || shape->n_kv_head != hp->n_head_kv ||
        shape->head_dim != hp->head_dim || shape->block_size <= 0 || shape->n_blocks <= 0 ||
        (int64_t)(shape->n_blocks + 1) * shape->block_size > INT_MAX)
        return set_err(E, ENG_EINVAL, "kv_init: shape does not match the model");
    cudaFree(c->kc);
    cudaFree(c->vc);
    c->kc = c->vc = nullptr;
    c->stale = 1;
    c->g_pitch = 0;
    c->ks = *shape;
    c->layer_elems = (size_t)(shape->n_blocks + 1) * shape->block_size * c->HK;
    {
        const size_t bytes = c->layer_elems * hp->n_layer * sizeof(__half);
        CK("cudaMalloc (KV cache)", cudaMalloc((void **)&c->kc, bytes));
        CK("cudaMalloc (KV cache)", cudaMalloc((void **)&c->vc, bytes));
        // finite values everywhere, the scratch block included
        CK("cudaMemsetAsync (KV cache)", cudaMemsetAsync(c->kc, 0, bytes, c->st));
        CK("cudaMemsetAsync (KV cache)", cudaMemsetAsync(c->vc, 0, bytes, c->st));
        CK("kv_init", cudaStreamSynchronize(c->st));
    }
    return 0;
fail:
    if (rc == ENG_ENOMEM)
        set_err(E, rc, "out of device memory for %d KV blocks (%.1f MiB)", shape->n_blocks,
                2.0 * c->layer_elems * hp->n_layer * sizeof(__half) / 1048576.0);
    cudaFree(c->kc);
    cudaFree(c->vc);
    c->kc = c->vc = nullptr;
    return rc;
}

// ------------------------------------------------------------------ lifecycle

static void be_destroy(void *vctx)
{
    cuda_ctx *c = (cuda_ctx *)vctx;
    if (!c) return;
    if (c->st) cudaStreamSynchronize(c->st);
    drop_graphs(c);
    sampler_free(&c->smp);
    if (c->layers) {
        for (int l = 0; l < c->hp.n_layer; l++) {
            struct dlayer *L = &c->layers[l];
            cudaFree(L->attn_norm);
            cudaFree(L->ffn_norm);
            cudaFree(L->wqkv);
            cudaFree(L->wo);
            cudaFree(L->wgu);
            cudaFree(L->wdown);
        }
        free(c->layers);
    }
    if (c->output != c->tok_embd) cudaFree(c->output);
    cudaFree(c->tok_embd);
    cudaFree(c->out_norm);
    cudaFree(c->rope_inv);
    cudaFree(c->kc);
    cudaFree(c->vc);
    cudaFree(c->x);
    cudaFree(c->xn);
    cudaFree(c->qkv);
    cudaFree(c->att);
    cudaFree(c->gu);
    cudaFree(c->h);
    cudaFree(c->sel);
    cudaFree(c->logits);
    cudaFree(c->part);
    cudaFree(c->meta_d);
    cudaFreeHost(c->meta_h);
    if (c->blas) cublasDestroy(c->blas);
    cudaFree(c->blas_ws);
    if (c->st) cudaStreamDestroy(c->st);
    free(c);
}

static const char *be_describe(void *vctx)
{
    return ((cuda_ctx *)vctx)->desc;
}

static const char *be_last_error(void *vctx)
{
    return ((cuda_ctx *)vctx)->E.msg;
}

static const struct eng_backend_i cuda_vt = {
    "cuda",    be_kv_capacity, be_kv_init,  be_forward,
    be_sample, be_destroy,     be_describe, be_last_error,
};

// scale of random weights: a trained Llama's, standard deviation ~0.02 (uniform: amp / sqrt 3)
#define RAND_AMP 0.0346f

// dst (allocated here) = src as F16, through a device staging buffer; or random when src
// is NULL
static int upload_f16(cuda_ctx *c, __half **dst, const float *src, size_t n, float *stage,
                      uint64_t seed)
{
    errbuf *E = &c->E;
    int rc = 0;
    CK("cudaMalloc (weights)", cudaMalloc((void **)dst, n * sizeof(__half)));
    if (!src) {
        rand_f16_k<<<grid_for(n, 256), 256, 0, c->st>>>(*dst, n, seed, 0.0f, RAND_AMP);
        LK("rand_f16_k");
        return 0;
    }
    for (size_t off = 0; off < n; off += STAGE_FLOATS) {
        const size_t len = n - off < STAGE_FLOATS ? n - off : STAGE_FLOATS;
        CK("cudaMemcpyAsync (weights)",
           cudaMemcpyAsync(stage, src + off, len * sizeof(float), cudaMemcpyHostToDevice, c->st));
        f32_to_f16_k<<<grid_for(len, 256), 256, 0, c->st>>>(stage, *dst + off, len);
        LK("f32_to_f16_k");
    }
    return 0;
fail:
    return rc;
}

// norms: random around 1
static int upload_f32(cuda_ctx *c, float **dst, const float *src, size_t n, uint64_t seed)
{
    errbuf *E = &c->E;
    int rc = 0;
    CK("cudaMalloc (weights)", cudaMalloc((void **)dst, n * sizeof(float)));
    if (src) {
        CK("cudaMemcpyAsync (weights)",
           cudaMemcpyAsync(*dst, src, n * sizeof(float), cudaMemcpyHostToDevice, c->st));
    } else {
        rand_f32_k<<<grid_for(n, 256), 256, 0, c->st>>>(*dst, n, seed, 1.0f, 0.05f);
        LK("rand_f32_k");
    }
    return 0;
fail:
    return rc;
}

static int check_weight(errbuf *E, const struct eng_weight *w, int n, int k, const char *what)
{
    if (w->n != n || w->k != k)
        return set_err(E, ENG_EINVAL, "weights: %s is [%d][%d], want [%d][%d]", what, w->n, w->k, n,
                       k);
    return 0;
}

static int device_name(errbuf *E, char *desc, size_t len, int *n_sm, int *major)
{
    int n = 0, rc = 0;
    cudaDeviceProp prop;
    CK("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    if (n <= 0) return set_err(E, ENG_EDEVICE, "no CUDA device");
    CK("cudaSetDevice", cudaSetDevice(0));
    CK("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, 0));
    snprintf(desc, len, "cuda:0 %s", prop.name);
    *n_sm = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    *major = prop.major;
    return 0;
fail:
    return rc;
}

extern "C" __attribute__((visibility("default"))) int
eng_cuda_create(const struct eng_weights *w, void (*progress)(void *, double), void *ud,
                const struct eng_backend_i **vt, void **out, char *err, size_t errlen)
{
    *vt = nullptr;
    *out = nullptr;
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return ENG_ENOMEM;
    }
    errbuf *E = &c->E;
    float *stage = nullptr;
    int rc = 0, major = 0;
    const struct eng_hparams *hp = &w->hp;
    c->hp = *hp;
    if ((rc = device_name(E, c->desc, sizeof c->desc, &c->n_sm, &major))) goto fail;
    if (hp->n_layer <= 0 || hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_ff <= 0 || hp->n_vocab <= 0 || hp->n_head % hp->n_head_kv) {
        rc = set_err(E, ENG_EINVAL, "hyperparameters out of range");
        goto fail;
    }
    if (hp->head_dim != 64 && hp->head_dim != 128) {
        rc =
            set_err(E, ENG_ENOTSUP, "head_dim %d (the CUDA kernels take 64 and 128)", hp->head_dim);
        goto fail;
    }
    c->group = hp->n_head / hp->n_head_kv;
    if (c->group > PRE_ROWS || hp->n_rot < 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2) {
        rc = set_err(E, ENG_ENOTSUP, "%d query heads per KV head or %d rotated dims", c->group,
                     hp->n_rot);
        goto fail;
    }
    c->HQ = hp->n_head * hp->head_dim;
    c->HK = hp->n_head_kv * hp->head_dim;
    c->NQKV = c->HQ + 2 * c->HK;
    c->qt = PRE_ROWS / c->group;
    {
        const char *g = getenv("CACHEGATE_CUDA_GRAPHS");
        c->graphs_on = !(g && g[0] == '0');
        const char *pd = getenv("CACHEGATE_CUDA_PDL");
        c->pdl = major >= 9 && !(pd && pd[0] == '0');
    }
    if ((rc = check_weight(E, &w->output, hp->n_vocab, hp->n_embd, "output"))) goto fail;
    for (int l = 0; l < hp->n_layer; l++) {
        const struct eng_layer_weights *L = &w->layers[l];
        if ((rc = check_weight(E, &L->wqkv, c->NQKV, hp->n_embd, "wqkv")) ||
            (rc = check_weight(E, &L->wo, hp->n_embd, c->HQ, "wo")) ||
            (rc = check_weight(E, &L->w_gate_up, 2 * hp->n_ff, hp->n_embd, "w_gate_up")) ||
            (rc = check_weight(E, &L->w_down, hp->n_embd, hp->n_ff, "w_down")))
            goto fail;
    }
    CK("cudaStreamCreate", cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    BK("cublasCreate", cublasCreate(&c->blas));
    BK("cublasSetStream", cublasSetStream(c->blas, c->st));
    // an explicit workspace: cuBLAS then allocates nothing while a graph is captured
    CK("cudaMalloc (cuBLAS workspace)", cudaMalloc(&c->blas_ws, BLAS_WORKSPACE));
    BK("cublasSetWorkspace", cublasSetWorkspace(c->blas, c->blas_ws, BLAS_WORKSPACE));
    prefill_attrs();
    CK("cudaMalloc (staging)", cudaMalloc((void **)&stage, STAGE_FLOATS * sizeof(float)));

    {
        const size_t D = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
        const uint64_t seed = w->seed;
        if ((rc = upload_f16(c, &c->tok_embd, w->tok_embd, V * D, stage, seed ^ 0x100))) goto fail;
        const int tied = w->output.f ? w->output.f == w->tok_embd : hp->tied_output;
        if (tied)
            c->output = c->tok_embd;
        else if ((rc = upload_f16(c, &c->output, w->output.f, V * D, stage, seed ^ 0x200)))
            goto fail;
        if ((rc = upload_f32(c, &c->out_norm, w->out_norm, D, seed ^ 0x300))) goto fail;
        const int nr = hp->n_rot / 2;
        float *inv = (float *)malloc(sizeof(float) * (size_t)(nr > 0 ? nr : 1));
        if (!inv) {
            rc = set_err(E, ENG_ENOMEM, "out of host memory");
            goto fail;
        }
        for (int i = 0; i < nr; i++)
            inv[i] = w->rope_inv ? w->rope_inv[i]
                                 : (float)(pow(hp->rope_base, -2.0 * i / hp->n_rot) /
                                           (hp->rope_scale > 0 ? hp->rope_scale : 1.0f));
        // on c->st (the legacy stream's cudaMemcpy would not order the kernels of the
        // non-blocking c->st after it), then waited for: inv is freed right after
        cudaError_t cst =
            cudaMalloc((void **)&c->rope_inv, sizeof(float) * (size_t)(nr > 0 ? nr : 1));
        if (cst == cudaSuccess && nr > 0)
            cst = cudaMemcpyAsync(c->rope_inv, inv, sizeof(float) * (size_t)nr,
                                  cudaMemcpyHostToDevice, c->st);
        if (cst == cudaSuccess) cst = cudaStreamSynchronize(c->st);
        free(inv);
        CK("rope frequencies", cst);
        c->layers = (struct dlayer *)calloc((size_t)hp->n_layer, sizeof *c->layers);
        if (!c->layers) {
            rc = set_err(E, ENG_ENOMEM, "out of host memory");
            goto fail;
        }
        for (int l = 0; l < hp->n_layer; l++) {
            const struct eng_layer_weights *L = &w->layers[l];
            struct dlayer *dl = &c->layers[l];
            const uint64_t ls = seed ^ ((uint64_t)(l + 1) << 20);
            if ((rc = upload_f32(c, &dl->attn_norm, L->attn_norm, D, ls + 1)) ||
                (rc = upload_f32(c, &dl->ffn_norm, L->ffn_norm, D, ls + 2)) ||
                (rc = upload_f16(c, &dl->wqkv, L->wqkv.f, (size_t)c->NQKV * D, stage, ls + 3)) ||
                (rc = upload_f16(c, &dl->wo, L->wo.f, D * c->HQ, stage, ls + 4)) ||
                (rc = upload_f16(c, &dl->wgu, L->w_gate_up.f, 2 * F * D, stage, ls + 5)) ||
                (rc = upload_f16(c, &dl->wdown, L->w_down.f, D * F, stage, ls + 6)))
                goto fail;
            // the host rows must stay valid until their copies are done
            CK("weights", cudaStreamSynchronize(c->st));
            if (progress) progress(ud, (double)(l + 1) / hp->n_layer);
        }
    }
    CK("weights", cudaStreamSynchronize(c->st));
    cudaFree(stage);
    *vt = &cuda_vt;
    *out = c;
    return 0;
fail:
    snprintf(err, errlen, "%s", E->msg);
    if (c->st) cudaStreamSynchronize(c->st);
    cudaFree(stage);
    be_destroy(c);
    return rc;
}

// ------------------------------------------------------------------ single ops for the tests

// A scratch device context for one op: its own stream and buffers, freed at the end.
struct op_env {
    cudaStream_t st;
    void *bufs[16];
    int n;
    errbuf E;
};

static int op_begin(op_env *o)
{
    memset(o, 0, sizeof *o);
    errbuf *E = &o->E;
    int rc = 0;
    CK("cudaSetDevice", cudaSetDevice(0));
    CK("cudaStreamCreate", cudaStreamCreateWithFlags(&o->st, cudaStreamNonBlocking));
    return 0;
fail:
    return rc;
}

static void *op_alloc(op_env *o, size_t bytes)
{
    void *p = nullptr;
    if (o->n >= (int)(sizeof o->bufs / sizeof o->bufs[0])) return nullptr;
    cudaError_t st = cudaMalloc(&p, bytes ? bytes : 1);
    if (st != cudaSuccess) {
        cuda_err(&o->E, "cudaMalloc", st);
        return nullptr;
    }
    o->bufs[o->n++] = p;
    return p;
}

// On the op's stream: a plain cudaMemcpy runs on the legacy default stream, which the op's
// non-blocking stream does not wait for (a pageable copy may return before its DMA is done).
// A pageable cudaMemcpyAsync has staged the host bytes when it returns.
static void *op_upload(op_env *o, const void *src, size_t bytes)
{
    void *p = op_alloc(o, bytes);
    if (p && bytes) {
        cudaError_t st = cudaMemcpyAsync(p, src, bytes, cudaMemcpyHostToDevice, o->st);
        if (st != cudaSuccess) {
            cuda_err(&o->E, "cudaMemcpyAsync", st);
            return nullptr;
        }
    }
    return p;
}

// F32 host -> F16 device
static __half *op_upload_f16(op_env *o, const float *src, size_t n)
{
    float *f = (float *)op_upload(o, src, n * sizeof(float));
    __half *h = (__half *)op_alloc(o, n * sizeof(__half));
    if (!f || !h) return nullptr;
    f32_to_f16_k<<<grid_for(n, 256), 256, 0, o->st>>>(f, h, n);
    return h;
}

// F16 device -> F32 host
static int op_download_f16(op_env *o, float *dst, const __half *src, size_t n)
{
    float *f = (float *)op_alloc(o, n * sizeof(float));
    if (!f) return ENG_ENOMEM;
    f16_to_f32_k<<<grid_for(n, 256), 256, 0, o->st>>>(src, f, n);
    cudaError_t st = cudaMemcpyAsync(dst, f, n * sizeof(float), cudaMemcpyDeviceToHost, o->st);
    if (st == cudaSuccess) st = cudaStreamSynchronize(o->st);
    return st == cudaSuccess ? 0 : cuda_err(&o->E, "download", st);
}

// Synchronizes, frees, and copies the message out; returns rc, or the error a kernel left.
static int op_end(op_env *o, int rc, char *err, size_t errlen)
{
    if (o->st) {
        cudaError_t st = cudaStreamSynchronize(o->st);
        if (rc == 0 && st != cudaSuccess) rc = cuda_err(&o->E, "op", st);
        st = cudaGetLastError();
        if (rc == 0 && st != cudaSuccess) rc = cuda_err(&o->E, "op", st);
    }
    if (rc && !o->E.msg[0])
        set_err(&o->E, rc, "%s", rc == ENG_ENOMEM ? "out of memory" : "bad arguments");
    for (int i = 0; i < o->n; i++)
        cudaFree(o->bufs[i]);
    if (o->st) cudaStreamDestroy(o->st);
    if (err && errlen) snprintf(err, errlen, "%s", rc ? o->E.msg : "");
    return rc;
}

#define OP_TRY(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            rc = o.E.msg[0] ? ENG_EDEVICE : ENG_ENOMEM;                                            \
            if (o.E.msg[0] && strstr(o.E.msg, "out of memory")) rc = ENG_ENOMEM;                   \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

static int op_rmsnorm(float *out, const float *x, const float *g, int t, int d, float eps,
                      char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    float *dx, *dg;
    __half *dout;
    if (rc) goto done;
    if (t <= 0 || d <= 0) {
        rc = set_err(&o.E, ENG_EINVAL, "rmsnorm: bad sizes");
        goto done;
    }
    OP_TRY(dx = (float *)op_upload(&o, x, (size_t)t * d * sizeof(float)));
    OP_TRY(dg = (float *)op_upload(&o, g, (size_t)d * sizeof(float)));
    OP_TRY(dout = (__half *)op_alloc(&o, (size_t)t * d * sizeof(__half)));
    rmsnorm_k<__half><<<t, 256, 0, o.st>>>(dx, nullptr, dg, dout, d, eps);
    rc = op_download_f16(&o, out, dout, (size_t)t * d);
done:
    return op_end(&o, rc, err, errlen);
}

static int op_rope(float *x, const int *pos, int t, int n_heads, int hd, int n_rot,
                   const float *inv, char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    float *dx, *dinv;
    int *dpos;
    const size_t n = (size_t)t * n_heads * hd;
    if (rc) goto done;
    if (t <= 0 || n_heads <= 0 || hd <= 0 || hd % 2 || n_rot < 0 || n_rot > hd || n_rot % 2) {
        rc = set_err(&o.E, ENG_EINVAL, "rope: bad sizes");
        goto done;
    }
    OP_TRY(dx = (float *)op_upload(&o, x, n * sizeof(float)));
    OP_TRY(dpos = (int *)op_upload(&o, pos, (size_t)t * sizeof(int)));
    OP_TRY(dinv = (float *)op_upload(&o, inv, (size_t)(n_rot / 2) * sizeof(float)));
    rope_kv_k<<<t, 256, 0, o.st>>>(dx, n_heads * hd, dpos, n_heads, 0, hd, n_rot, dinv, nullptr,
                                   nullptr, nullptr);
    {
        cudaError_t st = cudaMemcpyAsync(x, dx, n * sizeof(float), cudaMemcpyDeviceToHost, o.st);
        if (st != cudaSuccess) rc = cuda_err(&o.E, "cudaMemcpyAsync", st);
    }
done:
    return op_end(&o, rc, err, errlen);
}

static int op_swiglu(float *out, const float *gate_up, int t, int n_ff, char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    float *dgu;
    __half *dh;
    const size_t n = (size_t)t * n_ff;
    if (rc) goto done;
    if (t <= 0 || n_ff <= 0) {
        rc = set_err(&o.E, ENG_EINVAL, "swiglu: bad sizes");
        goto done;
    }
    OP_TRY(dgu = (float *)op_upload(&o, gate_up, 2 * n * sizeof(float)));
    OP_TRY(dh = (__half *)op_alloc(&o, n * sizeof(__half)));
    swiglu_k<<<grid_for(n, 256), 256, 0, o.st>>>(dgu, dh, n_ff, n);
    rc = op_download_f16(&o, out, dh, n);
done:
    return op_end(&o, rc, err, errlen);
}

static int op_gemm(float *y, const float *x, const float *w, int t, int n, int k, int accumulate,
                   char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    cublasHandle_t h = nullptr;
    __half *dx, *dw;
    float *dy;
    errbuf *E = &o.E;
    if (rc) goto done;
    if (t <= 0 || n <= 0 || k <= 0) {
        rc = set_err(E, ENG_EINVAL, "gemm: bad sizes");
        goto done;
    }
    OP_TRY(dx = op_upload_f16(&o, x, (size_t)t * k));
    OP_TRY(dw = op_upload_f16(&o, w, (size_t)n * k));
    if (accumulate)
        OP_TRY(dy = (float *)op_upload(&o, y, (size_t)t * n * sizeof(float)));
    else
        OP_TRY(dy = (float *)op_alloc(&o, (size_t)t * n * sizeof(float)));
    BK("cublasCreate", cublasCreate(&h));
    BK("cublasSetStream", cublasSetStream(h, o.st));
    BK("GEMM", gemm(h, o.st, 0, dw, n, k, dx, t, dy, accumulate));
    CK("cudaMemcpyAsync",
       cudaMemcpyAsync(y, dy, (size_t)t * n * sizeof(float), cudaMemcpyDeviceToHost, o.st));
    CK("gemm", cudaStreamSynchronize(o.st));
fail:
done:
    if (h) cublasDestroy(h);
    return op_end(&o, rc, err, errlen);
}

static int op_attention(const float *k_layer, const float *v_layer, const struct kvc_shape *ks,
                        const struct eng_seq *seqs, int n_seqs, const float *q, int n_head,
                        float *out, char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    errbuf *E = &o.E;
    const int hd = ks->head_dim, nk = ks->n_kv_head, bs = ks->block_size;
    const int HQ = n_head * hd, HK = nk * hd, NQKV = HQ + 2 * HK;
    const int group = nk > 0 ? n_head / nk : 0;
    const size_t cache = (size_t)(ks->n_blocks + 1) * bs * HK; // + the scratch block
    float *kh = nullptr, *vh = nullptr, *qkvh = nullptr, *dqkv, *dkf, *dvf;
    __half *dk, *dv, *dout;
    int *meta_h = nullptr, *meta_d;
    plan_counts pc;
    if (rc) goto done;
    if ((hd != 64 && hd != 128) || nk <= 0 || n_head % nk || group > PRE_ROWS || bs <= 0) {
        rc = set_err(E, ENG_EINVAL, "attention: unsupported shape");
        goto done;
    }
    {
        cudaDeviceProp prop;
        CK("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, 0));
        const int decode_ok = group <= DECODE_MAX_GROUP, max_qt = PRE_ROWS / group;
        const int qt = prefill_qt(seqs, n_seqs, max_qt, nk, prop.multiProcessorCount, decode_ok);
        if ((rc = plan_count(seqs, n_seqs, 0, bs, ks->n_blocks, qt, decode_ok, 0, E, &pc)))
            goto done;
        kh = (float *)malloc(cache * sizeof(float));
        vh = (float *)malloc(cache * sizeof(float));
        qkvh = (float *)malloc((size_t)pc.T * NQKV * sizeof(float));
        meta_h = (int *)malloc(plan_ints(pc) * sizeof(int));
        if (!kh || !vh || !qkvh || !meta_h) {
            rc = set_err(E, ENG_ENOMEM, "attention: out of host memory");
            goto done;
        }
        memcpy(kh, k_layer, (size_t)ks->n_blocks * bs * HK * sizeof(float));
        memcpy(vh, v_layer, (size_t)ks->n_blocks * bs * HK * sizeof(float));
        for (size_t i = (size_t)ks->n_blocks * bs * HK; i < cache; i++)
            kh[i] = vh[i] = 0.0f;
        plan_fill(seqs, n_seqs, bs, ks->n_blocks, qt, decode_ok, pc, meta_h);
        const plan_ptrs ph = plan_at(meta_h, pc);
        // the new tokens' rows: q, then k and v from the host pool; their device slots
        // poisoned so that only the write kernel can make them right
        for (int t = 0; t < pc.T; t++) {
            float *row = qkvh + (size_t)t * NQKV;
            const size_t slot = (size_t)ph.tok_slot[t] * HK;
            memcpy(row, q + (size_t)t * HQ, HQ * sizeof(float));
            memcpy(row + HQ, k_layer + slot, HK * sizeof(float));
            memcpy(row + HQ + HK, v_layer + slot, HK * sizeof(float));
            for (int i = 0; i < HK; i++)
                kh[slot + i] = vh[slot + i] = NAN;
        }
        OP_TRY(dkf = (float *)op_upload(&o, kh, cache * sizeof(float)));
        OP_TRY(dvf = (float *)op_upload(&o, vh, cache * sizeof(float)));
        OP_TRY(dk = (__half *)op_alloc(&o, cache * sizeof(__half)));
        OP_TRY(dv = (__half *)op_alloc(&o, cache * sizeof(__half)));
        f32_to_f16_k<<<grid_for(cache, 256), 256, 0, o.st>>>(dkf, dk, cache);
        f32_to_f16_k<<<grid_for(cache, 256), 256, 0, o.st>>>(dvf, dv, cache);
        OP_TRY(dqkv = (float *)op_upload(&o, qkvh, (size_t)pc.T * NQKV * sizeof(float)));
        OP_TRY(meta_d = (int *)op_upload(&o, meta_h, plan_ints(pc) * sizeof(int)));
        OP_TRY(dout = (__half *)op_alloc(&o, (size_t)pc.T * HQ * sizeof(__half)));
        const plan_ptrs pd = plan_at(meta_d, pc);
        prefill_attrs();
        // keys are written as given: no rotation (n_rot 0)
        rope_kv_k<<<pc.T, 256, 0, o.st>>>(dqkv, NQKV, pd.tok_pos, n_head, nk, hd, 0, nullptr,
                                          pd.tok_slot, dk, dv);
        LK("rope_kv_k");
        // decode items as the forward cuts them for this batch, and whole (one range): both
        // must give the same output up to the F16 rounding of the result
        const int nsplit = decode_splits(pc.nd, nk, prop.multiProcessorCount);
        float *dpart = nullptr;
        const size_t np = decode_part_floats(pc.nd, n_head, hd, nsplit);
        if (np) OP_TRY(dpart = (float *)op_alloc(&o, np * sizeof(float)));
        launch_attention(o.st, pc, pd, dqkv, NQKV, dk, dv, bs, nk, hd, group, qt, dout, HQ, nsplit,
                         dpart, 0);
        LK("attention");
        if ((rc = op_download_f16(&o, out, dout, (size_t)pc.T * HQ))) goto done;
        if (nsplit > 1 && pc.nd > 0) {
            float *whole = (float *)malloc((size_t)pc.T * HQ * sizeof(float));
            if (!whole) {
                rc = set_err(E, ENG_ENOMEM, "attention: out of host memory");
                goto done;
            }
            launch_attention(o.st, pc, pd, dqkv, NQKV, dk, dv, bs, nk, hd, group, qt, dout, HQ, 1,
                             nullptr, 0);
            if (cudaGetLastError() != cudaSuccess ||
                (rc = op_download_f16(&o, whole, dout, (size_t)pc.T * HQ))) {
                free(whole);
                rc = rc ? rc : set_err(E, ENG_EDEVICE, "attention: unsplit decode failed");
                goto done;
            }
            float worst = 0.0f;
            for (size_t i = 0; i < (size_t)pc.T * HQ; i++) {
                const float d = fabsf(out[i] - whole[i]);
                worst = d > worst || d != d ? d : worst;
            }
            free(whole);
            if (!(worst <= 2e-3f))
                rc = set_err(E, ENG_EDEVICE,
                             "attention: decode in %d ranges differs from whole by %g", nsplit,
                             worst);
        }
        // prompt tokens in the tiles the forward takes for this batch, and in the largest:
        // a row's arithmetic is the same in both, so the outputs must be equal bit for bit
        if (!rc && qt < max_qt && pc.ntiles > 0) {
            plan_counts pw;
            int *wide_h = nullptr, *wide_d;
            float *whole = nullptr;
            if ((rc = plan_count(seqs, n_seqs, 0, bs, ks->n_blocks, max_qt, decode_ok, 0, E,
                                 &pw)))
                goto done;
            wide_h = (int *)malloc(plan_ints(pw) * sizeof(int));
            whole = (float *)malloc((size_t)pc.T * HQ * sizeof(float));
            if (!wide_h || !whole) {
                free(wide_h), free(whole);
                rc = set_err(E, ENG_ENOMEM, "attention: out of host memory");
                goto done;
            }
            plan_fill(seqs, n_seqs, bs, ks->n_blocks, max_qt, decode_ok, pw, wide_h);
            wide_d = (int *)op_upload(&o, wide_h, plan_ints(pw) * sizeof(int));
            if (wide_d)
                launch_attention(o.st, pw, plan_at(wide_d, pw), dqkv, NQKV, dk, dv, bs, nk, hd,
                                 group, max_qt, dout, HQ, nsplit, dpart, 0);
            if (!wide_d || cudaGetLastError() != cudaSuccess ||
                (rc = op_download_f16(&o, whole, dout, (size_t)pc.T * HQ))) {
                free(wide_h), free(whole);
                rc = rc ? rc : set_err(E, ENG_EDEVICE, "attention: tiles of %d failed", max_qt);
                goto done;
            }
            free(wide_h);
            size_t differ = 0;
            for (size_t i = 0; i < (size_t)pc.T * HQ; i++)
                differ += memcmp(&out[i], &whole[i], sizeof(float)) != 0;
            free(whole);
            if (differ)
                rc = set_err(E, ENG_EDEVICE,
                             "attention: %zu outputs differ between tiles of %d and of %d tokens",
                             differ, qt, max_qt);
        }
    }
fail:
done:
    free(kh);
    free(vh);
    free(qkvh);
    free(meta_h);
    return op_end(&o, rc, err, errlen);
}

static int op_sample(const float *logits, int n_rows, int n_vocab,
                     const struct eng_sample_row *rows, int n, const struct eng_logit_adj *adj,
                     int n_adj, int32_t *tokens, char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    sampler s;
    float *dl;
    memset(&s, 0, sizeof s);
    if (rc) goto done;
    if (n_rows <= 0 || n_vocab <= 0 || n < 0) {
        rc = set_err(&o.E, ENG_EINVAL, "sample: bad sizes");
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (rows[i].row < 0 || rows[i].row >= n_rows) {
            rc = set_err(&o.E, ENG_EINVAL, "sample: row %d out of range", rows[i].row);
            goto done;
        }
    OP_TRY(dl = (float *)op_upload(&o, logits, (size_t)n_rows * n_vocab * sizeof(float)));
    rc = run_sample(o.st, &s, dl, n_vocab, rows, n, adj, n_adj, tokens, &o.E);
done:
    sampler_free(&s);
    return op_end(&o, rc, err, errlen);
}

static int op_bandwidth(size_t bytes, int reps, double *bytes_per_s, char *err, size_t errlen)
{
    op_env o;
    int rc = op_begin(&o);
    errbuf *E = &o.E;
    void *a, *b;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float ms = 0;
    *bytes_per_s = 0;
    if (rc) goto done;
    if (bytes == 0 || reps <= 0) {
        rc = set_err(E, ENG_EINVAL, "bandwidth: bad sizes");
        goto done;
    }
    OP_TRY(a = op_alloc(&o, bytes));
    OP_TRY(b = op_alloc(&o, bytes));
    CK("cudaMemsetAsync", cudaMemsetAsync(a, 1, bytes, o.st));
    CK("cudaMemcpyAsync", cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, o.st)); // warm-up
    CK("cudaEventCreate", cudaEventCreate(&e0));
    CK("cudaEventCreate", cudaEventCreate(&e1));
    CK("cudaEventRecord", cudaEventRecord(e0, o.st));
    for (int i = 0; i < reps; i++)
        CK("cudaMemcpyAsync",
           cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice, o.st));
    CK("cudaEventRecord", cudaEventRecord(e1, o.st));
    CK("cudaEventSynchronize", cudaEventSynchronize(e1));
    CK("cudaEventElapsedTime", cudaEventElapsedTime(&ms, e0, e1));
    *bytes_per_s = ms > 0 ? 2.0 * (double)bytes * reps / (ms / 1e3) : 0.0;
fail:
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return op_end(&o, rc, err, errlen);
}

static int op_set_graphs(void *vctx, int on)
{
    cuda_ctx *c = (cuda_ctx *)vctx;
    if (!c) return ENG_EINVAL;
    c->graphs_on = on != 0;
    if (!on) drop_graphs(c);
    return 0;
}

static void op_graph_stats(void *vctx, long *captures, long *replays)
{
    const cuda_ctx *c = (const cuda_ctx *)vctx;
    *captures = c ? c->captures : 0;
    *replays = c ? c->replays : 0;
}

extern "C" __attribute__((visibility("default")))
const struct eng_cuda_test_ops eng_cuda_test_ops_table = {
    op_rmsnorm, op_rope,      op_swiglu,     op_gemm,        op_attention,
    op_sample,  op_bandwidth, op_set_graphs, op_graph_stats,
};
