/* The embedder's CPU backend: OpenBLAS SGEMMs over every token of the batch for the
 * projections; attention, GELU and LayerNorm spread over OpenMP threads. OpenBLAS is its
 * OpenMP build, so the two share one thread pool: an SGEMM called inside a parallel
 * region (attention, one sequence-head pair per thread) runs on that thread alone. */
#include "emb_impl.h"
#include "embedder.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct cpu {
    const struct emb_config *cfg;
    const struct emb_weights *w;
    int threads;
    int cap_tokens, cap_len;
    float *x, *qkv, *ctx, *tmp, *hid; /* scratch, grown on demand */
    float *scores;                     /* [threads][cap_len][cap_len] */
};

static void cpu_destroy(void *p)
{
    struct cpu *c = p;
    if (!c)
        return;
    free(c->x);
    free(c->qkv);
    free(c->ctx);
    free(c->tmp);
    free(c->hid);
    free(c->scores);
    free(c);
}

static int grow(struct cpu *c, int tokens, int maxlen)
{
    const struct emb_config *k = c->cfg;
    if (tokens > c->cap_tokens) {
        size_t t = (size_t)tokens;
        float *x = realloc(c->x, t * k->hidden * sizeof(float));
        if (x)
            c->x = x;
        float *q = realloc(c->qkv, t * 3 * k->hidden * sizeof(float));
        if (q)
            c->qkv = q;
        float *cx = realloc(c->ctx, t * k->hidden * sizeof(float));
        if (cx)
            c->ctx = cx;
        float *tm = realloc(c->tmp, t * k->hidden * sizeof(float));
        if (tm)
            c->tmp = tm;
        float *h = realloc(c->hid, t * k->inter * sizeof(float));
        if (h)
            c->hid = h;
        if (!x || !q || !cx || !tm || !h)
            return EMB_ENOMEM;
        c->cap_tokens = tokens;
    }
    if (maxlen > c->cap_len) {
        float *s = realloc(c->scores, (size_t)c->threads * maxlen * maxlen * sizeof(float));
        if (!s)
            return EMB_ENOMEM;
        c->scores = s;
        c->cap_len = maxlen;
    }
    return 0;
}

/* y[t][n] = x[t][k] . w[n][k] + b[n] */
static void linear(const float *x, int t, int k, const float *w, const float *b, int n, float *y)
{
    for (int i = 0; i < t; i++)
        memcpy(y + (size_t)i * n, b, sizeof(float) * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n, k, 1.0f, x, k, w, k, 1.0f, y, n);
}

/* x = LayerNorm(x + r) row by row; r may be NULL */
static void add_layernorm(float *x, const float *r, int t, int h, const float *g, const float *b,
                          float eps)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < t; i++) {
        float *row = x + (size_t)i * h;
        if (r) {
            const float *rr = r + (size_t)i * h;
            for (int j = 0; j < h; j++)
                row[j] += rr[j];
        }
        double mean = 0, var = 0;
        for (int j = 0; j < h; j++)
            mean += row[j];
        mean /= h;
        for (int j = 0; j < h; j++) {
            double d = row[j] - mean;
            var += d * d;
        }
        var /= h;
        float inv = (float)(1.0 / sqrt(var + eps));
        float m = (float)mean;
        for (int j = 0; j < h; j++)
            row[j] = (row[j] - m) * inv * g[j] + b[j];
    }
}

/*
 * exp and erf that the compiler can vectorize (libm's are calls): exp as 2^n * 2^f with a
 * degree-6 polynomial for 2^f on [-0.5, 0.5] (relative error < 2e-7); erf by Abramowitz
 * and Stegun 7.1.26 (absolute error < 1.5e-7). Both are far inside the 1e-4 cosine
 * tolerance against the reference.
 */
static inline __attribute__((always_inline)) float exp_approx(float x)
{
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float t = x * 1.44269504088896341f; /* log2(e) */
    float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
    float f = t - n;
    float p = 1.535336188319500e-4f;
    p = p * f + 1.339887440266574e-3f;
    p = p * f + 9.618437357674640e-3f;
    p = p * f + 5.550332471162809e-2f;
    p = p * f + 2.402264791363012e-1f;
    p = p * f + 6.931472028550421e-1f;
    p = p * f + 1.0f;
    union {
        float f;
        uint32_t u;
    } v = {p};
    v.u += (uint32_t)(int32_t)n << 23; /* scale by 2^n in the exponent field */
    return v.f;
}

static inline __attribute__((always_inline)) float erf_approx(float x)
{
    float a = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float y = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
               0.254829592f) *
              t;
    float r = 1.0f - y * exp_approx(-a * a);
    return x < 0 ? -r : r;
}

/* x86-64: one clone per vector width, picked at load; elsewhere the compiler's own target */
#if defined(__x86_64__)
#define VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

VECTOR_CLONES static void gelu_range(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * x[i] * (1.0f + erf_approx(x[i] * 0.70710678118654752f));
}

static void gelu(float *x, size_t n)
{
    const size_t chunk = 4096;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += chunk)
        gelu_range(x + i, n - i < chunk ? n - i : chunk);
}

VECTOR_CLONES static void softmax_rows(float *s, int rows, int cols)
{
    for (int i = 0; i < rows; i++) {
        float *r = s + (size_t)i * cols;
        float mx = r[0];
        for (int j = 1; j < cols; j++)
            mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < cols; j++) /* vectorized; the sum apart, as it would not be */
            r[j] = exp_approx(r[j] - mx);
        float sum = 0;
        for (int j = 0; j < cols; j++)
            sum += r[j];
        float inv = 1.0f / sum;
        for (int j = 0; j < cols; j++)
            r[j] *= inv;
    }
}

/* Copies x ([n] floats) to states' slot for layer when layers[] names it. */
static void keep_states(const float *x, size_t n, int layer, int nlayers, const int *layers,
                        float *states)
{
    for (int i = 0; i < nlayers; i++)
        if (layers[i] == layer)
            memcpy(states + (size_t)i * n, x, n * sizeof(float));
}

/* The encoder over batch b into c->x; the hidden states after layers[0..nlayers) (0: the
 * embeddings) are copied to states ([nlayers][tokens][hidden]) on the way. */
static int encode(struct cpu *c, const struct emb_batch *b, int nlayers, const int *layers,
                  float *states)
{
    const struct emb_config *k = c->cfg;
    const struct emb_weights *w = c->w;
    const int H = k->hidden, T = b->off[b->n], D = H / k->heads;
    /* the thread count is the calling thread's (OpenMP keeps it per thread, and the
     * backend may have been made on another): the per-thread scratch holds c->threads */
    omp_set_num_threads(c->threads);
    int maxlen = 0;
    for (int s = 0; s < b->n; s++) {
        int l = b->off[s + 1] - b->off[s];
        if (l <= 0 || l > k->max_pos)
            return EMB_EINVAL;
        maxlen = l > maxlen ? l : maxlen;
    }
    int rc = grow(c, T, maxlen);
    if (rc)
        return rc;

    /* embeddings: word + position (within its sequence) + token type 0 */
    for (int s = 0; s < b->n; s++)
        for (int t = b->off[s]; t < b->off[s + 1]; t++) {
            int32_t id = b->ids[t];
            if (id < 0 || id >= k->vocab)
                return EMB_EINVAL;
            const float *we = w->word + (size_t)id * H;
            const float *pe = w->pos + (size_t)(t - b->off[s]) * H;
            float *x = c->x + (size_t)t * H;
            for (int j = 0; j < H; j++)
                x[j] = we[j] + pe[j] + w->type[j];
        }
    add_layernorm(c->x, NULL, T, H, w->ln_g, w->ln_b, k->ln_eps);
    keep_states(c->x, (size_t)T * H, 0, nlayers, layers, states);

    const float scale = 1.0f / sqrtf((float)D);
    for (int L = 0; L < k->layers; L++) {
        const struct emb_layer *ly = &w->layer[L];
        linear(c->x, T, H, ly->wqkv, ly->bqkv, 3 * H, c->qkv);
        const int pairs = b->n * k->heads;
#pragma omp parallel for schedule(dynamic, 1)
        for (int ph = 0; ph < pairs; ph++) {
            int s = ph / k->heads, h = ph % k->heads;
            int o = b->off[s], l = b->off[s + 1] - o;
            float *sc = c->scores + (size_t)omp_get_thread_num() * c->cap_len * c->cap_len;
            const float *q = c->qkv + (size_t)o * 3 * H + h * D;
            const float *kk = q + H, *v = q + 2 * H;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, l, l, D, scale, q, 3 * H, kk,
                        3 * H, 0.0f, sc, l);
            softmax_rows(sc, l, l);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, l, D, l, 1.0f, sc, l, v, 3 * H,
                        0.0f, c->ctx + (size_t)o * H + h * D, H);
        }
        linear(c->ctx, T, H, ly->wo, ly->bo, H, c->tmp);
        add_layernorm(c->x, c->tmp, T, H, ly->ln1_g, ly->ln1_b, k->ln_eps);
        linear(c->x, T, H, ly->w1, ly->b1, k->inter, c->hid);
        gelu(c->hid, (size_t)T * k->inter);
        linear(c->hid, T, k->inter, ly->w2, ly->b2, H, c->tmp);
        add_layernorm(c->x, c->tmp, T, H, ly->ln2_g, ly->ln2_b, k->ln_eps);
        keep_states(c->x, (size_t)T * H, L + 1, nlayers, layers, states);
    }
    return 0;
}

static int cpu_forward(void *p, const struct emb_batch *b, float *out)
{
    struct cpu *c = p;
    int rc = encode(c, b, 0, NULL, NULL);
    if (!rc)
        emb_mean_pool(c->x, b, c->cfg->hidden, out);
    return rc;
}

static int cpu_states(void *p, const struct emb_batch *b, int nlayers, const int *layers,
                      float *out)
{
    struct cpu *c = p;
    for (int i = 0; i < nlayers; i++)
        if (layers[i] < 0 || layers[i] > c->cfg->layers)
            return EMB_EINVAL;
    return encode(c, b, nlayers, layers, out);
}

static const struct emb_backend_i cpu_vt = {"cpu", cpu_forward, cpu_destroy, NULL, cpu_states};

int emb_backend_cpu_create(const struct emb_config *cfg, const struct emb_weights *w,
                           int threads, const struct emb_backend_i **vt, void **ctx)
{
    struct cpu *c = calloc(1, sizeof *c);
    if (!c)
        return EMB_ENOMEM;
    c->cfg = cfg;
    c->w = w;
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    c->threads = omp_get_max_threads();
    *vt = &cpu_vt;
    *ctx = c;
    return 0;
}
