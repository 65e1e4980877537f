#include "sampler.h"

#include "backend.h"
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* One candidate token. v is the scaled logit up to the softmax, then its weight
 * exp(v - vmax), which is exactly 1 for the most likely token. */
struct cand {
    float v;
    int32_t id;
};

/* The draw sums weights in blocks of this many, so that it can find the drawn token
 * without a second pass over every weight. */
#define DRAW_BLOCK 256

/* top_p sorts weights in (0, 1] into buckets by their top bits (exponent and 5 bits of
 * mantissa: 32 buckets per octave, each 2.2% wide), so that only the one bucket where the
 * nucleus ends needs an exact selection. */
#define BUCKET_SHIFT 18
#define N_BUCKET ((0x3F800000u >> BUCKET_SHIFT) + 1) /* 1.0f is the last */
/* Below this, clearing and walking the buckets costs more than top_p_keep() on them all. */
#define NUCLEUS_MIN_VOCAB (2 * N_BUCKET)

struct eng_sampler {
    struct eng_sampling p; /* p.logit_bias points at bias */
    int n_vocab;
    struct eng_logit_bias *bias; /* [p.n_logit_bias] owned */
    int32_t *count; /* [n_vocab] times each token was accepted since the last reset */
    int32_t *seen;  /* [n_seen] the distinct accepted tokens, so that a step and a reset
                       cost the history, not the vocabulary */
    int n_seen;
    float *w;              /* [n_vocab] scratch: scaled logits, then weights */
    struct cand *cand;     /* [n_vocab] scratch: the candidates the filters see */
    double *bsum;          /* [n_vocab / DRAW_BLOCK + 1] scratch: weight per block of w */
    double hist[N_BUCKET]; /* scratch: weight per bucket, for top_p */
    uint64_t rng[4];       /* xoshiro256** */
};

void eng_sampling_default(struct eng_sampling *p)
{
    *p = (struct eng_sampling){.temperature = 1.0f, .top_p = 1.0f};
}

void eng_sampling_top_p_zero(struct eng_sampling *p)
{
    if (p->top_p == 0.0f) {
        p->top_p = 1.0f;
        p->top_k = 1;
    }
}

int eng_sampling_check(const struct eng_sampling *p)
{
    if (!p) return ENG_EINVAL;
    /* each test is written so that NaN fails it */
    if (!(p->temperature >= 0.0f && p->temperature <= 2.0f)) return ENG_EINVAL;
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) return ENG_EINVAL;
    if (p->top_k < 0) return ENG_EINVAL;
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return ENG_EINVAL;
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f)) return ENG_EINVAL;
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f)) return ENG_EINVAL;
    if (p->n_logit_bias < 0 || p->n_logit_bias > ENG_MAX_LOGIT_BIAS) return ENG_EINVAL;
    if (p->n_logit_bias > 0 && !p->logit_bias) return ENG_EINVAL;
    for (int i = 0; i < p->n_logit_bias; i++) {
        float b = p->logit_bias[i].bias;
        if (!(b >= -100.0f && b <= 100.0f) || p->logit_bias[i].token < 0) return ENG_EINVAL;
    }
    return 0;
}

/* ---- random numbers: splitmix64 expands the seed, xoshiro256** (Blackman, Vigna) ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static void rng_seed(uint64_t s[4], uint64_t seed)
{
    /* splitmix64 never yields four zeros in a row, the one state xoshiro cannot leave */
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&seed);
}

/* Uniform in [0, 1), on the 2^-53 grid. */
static double rng_uniform(uint64_t s[4])
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static int seed_from_os(uint64_t *seed)
{
    unsigned char *b = (unsigned char *)seed;
    size_t got = 0;
    while (got < sizeof *seed) {
        ssize_t r = getrandom(b + got, sizeof *seed - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return ENG_EIO;
        got += (size_t)r;
    }
    return 0;
}

/* ---- lifecycle ---- */

int eng_sampler_create(const struct eng_sampling *p, int n_vocab, eng_sampler **out)
{
    if (!out) return ENG_EINVAL;
    *out = NULL;
    if (eng_sampling_check(p) != 0 || n_vocab < 1) return ENG_EINVAL;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token >= n_vocab) return ENG_EINVAL;
    int rc = ENG_ENOMEM;
    eng_sampler *s = calloc(1, sizeof *s);
    if (!s) goto fail;
    s->p = *p;
    s->n_vocab = n_vocab;
    if (p->n_logit_bias > 0) {
        s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
        if (!s->bias) goto fail;
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->seen = malloc((size_t)n_vocab * sizeof *s->seen);
    s->w = malloc((size_t)n_vocab * sizeof *s->w);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->bsum = malloc(((size_t)n_vocab / DRAW_BLOCK + 1) * sizeof *s->bsum);
    if (!s->count || !s->seen || !s->w || !s->cand || !s->bsum) goto fail;
    uint64_t seed = p->seed;
    if (!p->has_seed && (rc = seed_from_os(&seed)) != 0) goto fail;
    rng_seed(s->rng, seed);
    *out = s;
    return 0;
fail:
    eng_sampler_destroy(s);
    return rc;
}

void eng_sampler_destroy(eng_sampler *s)
{
    if (!s) return;
    free(s->bsum);
    free(s->cand);
    free(s->w);
    free(s->seen);
    free(s->count);
    free(s->bias);
    free(s);
}

int eng_sampler_accept(eng_sampler *s, int32_t token)
{
    if (!s || token < 0 || token >= s->n_vocab) return ENG_EINVAL;
    if (s->count[token]++ == 0) s->seen[s->n_seen++] = token;
    return 0;
}

void eng_sampler_reset(eng_sampler *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_seen; i++)
        s->count[s->seen[i]] = 0;
    s->n_seen = 0;
    if (s->p.has_seed) rng_seed(s->rng, s->p.seed);
}

/* ---- selection ---- */

/* The candidates' total order: larger v first, then lower id. */
static int better(const struct cand *a, const struct cand *b)
{
    return a->v > b->v || (a->v == b->v && a->id < b->id);
}

static void swap(struct cand *a, struct cand *b)
{
    struct cand t = *a;
    *a = *b;
    *b = t;
}

/* For top_k: heap[0, n) is a heap with the worst candidate on top; restores that below i. */
static void sift_down(struct cand *heap, size_t n, size_t i)
{
    for (;;) {
        size_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < n && better(&heap[worst], &heap[l])) worst = l;
        if (r < n && better(&heap[worst], &heap[r])) worst = r;
        if (worst == i) return;
        swap(&heap[i], &heap[worst]);
        i = worst;
    }
}

/* The k best of w[0, n) (scaled logits, -inf masked) into c; returns how many (fewer than k
 * when fewer are finite). One compare per token once the heap is full: a token must beat
 * the k-th best so far to get in. */
static size_t top_k(const float *w, size_t n, size_t k, struct cand *c)
{
    size_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (w[i] > -INFINITY) c[m++] = (struct cand){w[i], (int32_t)i};
    for (size_t j = m / 2; j-- > 0;)
        sift_down(c, m, j);
    for (; i < n; i++) {
        /* ids rise, so an equal logit loses to the one already in */
        if (w[i] > c[0].v) {
            c[0] = (struct cand){w[i], (int32_t)i};
            sift_down(c, m, 0);
        }
    }
    return m;
}

/* Partitions c[lo, hi), hi - lo >= 2, around a median-of-three pivot and returns where the
 * pivot lands: c[lo, at) beat c[at], which beats c[at + 1, hi). The order is total, so
 * equal weights cannot make it degenerate. */
static size_t partition(struct cand *c, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2;
    if (better(&c[mid], &c[lo])) swap(&c[mid], &c[lo]);
    if (better(&c[hi - 1], &c[lo])) swap(&c[hi - 1], &c[lo]);
    if (better(&c[hi - 1], &c[mid])) swap(&c[hi - 1], &c[mid]);
    swap(&c[mid], &c[hi - 1]); /* the median is the pivot, parked at the end */
    struct cand pivot = c[hi - 1];
    size_t at = lo;
    for (size_t i = lo; i < hi - 1; i++)
        if (better(&c[i], &pivot)) swap(&c[i], &c[at++]);
    swap(&c[at], &c[hi - 1]);
    return at;
}

/* For top_p: rearranges c[0, n) (v: weights) and returns k so that c[0, k) are the fewest
 * best candidates whose weight reaches target. A quickselect that weighs the better side
 * of each pivot: a few linear passes however many tokens the nucleus holds, no sort. */
static size_t top_p_keep(struct cand *c, size_t n, double target)
{
    size_t lo = 0, hi = n; /* k is in (lo, hi]; c[0, lo) beat the rest and weigh `taken` */
    double taken = 0.0;
    while (hi - lo > 1) {
        size_t at = partition(c, lo, hi);
        double m = taken;
        for (size_t i = lo; i < at; i++)
            m += c[i].v;
        if (m >= target) {
            hi = at; /* m > taken, so at > lo */
        } else if (m + c[at].v >= target) {
            return at + 1;
        } else {
            taken = m + c[at].v;
            lo = at + 1;
        }
    }
    return hi; /* hi = n too when rounding leaves the total a hair under target */
}

/* ---- weights and the draw ----
 * The loops that run over the whole vocabulary select on the floats' bits rather than on
 * float compares (which GCC will not turn into selects, as they may trap), so that they
 * vectorize. */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A float's bits as an integer that orders as the float does (NaN aside). */
static int32_t order_key(float f)
{
    uint32_t u = f2u(f);
    return (int32_t)(u ^ ((0u - (u >> 31)) & 0x7FFFFFFFu));
}

static float from_order_key(int32_t k)
{
    uint32_t u = (uint32_t)k;
    return u2f(u ^ ((0u - (u >> 31)) & 0x7FFFFFFFu));
}

/* exp(x) for x <= 0 (-inf included); 0 below -87, where floats stop being normal. Plain
 * float arithmetic instead of libm's expf: the bits are the same with every C library,
 * the loop that calls it vectorizes, and exp(0) is exactly 1. x = n ln2 + r with
 * |r| <= ln2 / 2 (ln2 in two parts, so that n ln2 is exact), exp(r) by Cephes' expf
 * polynomial, 2^n put in the exponent. Largest relative error over every float in
 * [-87, 0]: 8.1e-8. */
static float exp_neg(float x)
{
    uint32_t under = 0u - (uint32_t)(f2u(x) > f2u(-87.0f)); /* x <= 0: bits order by size */
    float xc = u2f((f2u(x) & ~under) | (f2u(-87.0f) & under));
    float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(x / ln2): 1.5 * 2^23 */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    float scale = u2f((uint32_t)((int32_t)n + 127) << 23); /* n in [-126, 0] */
    return u2f(f2u(p * scale) & ~under);
}

/* The sum of w[0, n) in double, in a fixed order: eight running sums (which vectorize),
 * then the rest, then the eight. */
static double sum(const float *w, size_t n)
{
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lane[j] += w[i + j];
    double s = 0.0;
    for (; i < n; i++)
        s += w[i];
    for (int j = 0; j < 8; j++)
        s += lane[j];
    return s;
}

/* The last i in [lo, hi) with w[i] > 0, or lo. */
static size_t last_positive(const float *w, size_t lo, size_t hi)
{
    size_t i = hi - 1;
    while (i > lo && !(w[i] > 0.0f))
        i--;
    return i;
}

/* Fills bsum ([n / DRAW_BLOCK + 1]) with the sums of w[0, n) by block; returns their sum. */
static double block_sums(const float *w, size_t n, double *bsum)
{
    double total = 0.0;
    for (size_t b = 0, lo = 0; lo < n; b++, lo += DRAW_BLOCK) {
        bsum[b] = sum(w + lo, n - lo < DRAW_BLOCK ? n - lo : DRAW_BLOCK);
        total += bsum[b];
    }
    return total;
}

/* w[i] = exp_neg(w[i] - vmax) and then block_sums(), a block at a time while it is in
 * cache. */
static double exp_block_sums(float *w, size_t n, float vmax, double *bsum)
{
    double total = 0.0;
    for (size_t b = 0, lo = 0; lo < n; b++, lo += DRAW_BLOCK) {
        size_t len = n - lo < DRAW_BLOCK ? n - lo : DRAW_BLOCK;
        for (size_t i = lo; i < lo + len; i++)
            w[i] = exp_neg(w[i] - vmax);
        bsum[b] = sum(w + lo, len);
        total += bsum[b];
    }
    return total;
}

/* Draws index i of w[0, n) (weights >= 0, one positive) with probability w[i] / total:
 * the first i where u * total < w[0] + ... + w[i]. bsum and total come from block_sums();
 * they find the block, a walk finds the token. Zero weights are never drawn. */
static size_t draw(const float *w, size_t n, double u, const double *bsum, double total)
{
    size_t nb = (n + DRAW_BLOCK - 1) / DRAW_BLOCK, b = 0;
    double r = u * total, mass = 0.0;
    while (b < nb && !(r < mass + bsum[b])) /* the same sums, in the same order, as total */
        mass += bsum[b++];
    if (b == nb) /* u * total rounded up to total: a 2^-53 event, no need to be quick */
        return last_positive(w, 0, n);
    size_t lo = b * DRAW_BLOCK, hi = n - lo < DRAW_BLOCK ? n : lo + DRAW_BLOCK;
    double in = 0.0;
    r -= mass;
    for (size_t i = lo; i < hi; i++) {
        in += w[i];
        if (r < in) return i;
    }
    return last_positive(w, lo, hi); /* the walk's sum fell a rounding short of the block's */
}

/* top_p over the dense weights w[0, n): the kept tokens into c ([n]), returns how many. A
 * histogram of weight by bucket finds the bucket where the nucleus ends; the tokens above
 * it are kept whole, and top_p_keep() picks among the tokens in it. Both passes are free
 * of branches on the weights, whose order is as good as random. */
static size_t nucleus(const float *w, size_t n, double target, double *hist, struct cand *c)
{
    memset(hist, 0, N_BUCKET * sizeof *hist);
    for (size_t i = 0; i < n; i++)
        hist[f2u(w[i]) >> BUCKET_SHIFT] += w[i];
    uint32_t edge = 0; /* the bucket where the mass reaches target */
    double above = 0.0;
    for (uint32_t b = N_BUCKET; b-- > 0;) {
        if (above + hist[b] >= target) {
            edge = b;
            break;
        }
        above += hist[b];
    }
    /* the tokens above the edge to the front, the edge's to the back; a slot is written
     * every time, and kept by moving on */
    size_t na = 0, ne = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = f2u(w[i]) >> BUCKET_SHIFT;
        struct cand t = {w[i], (int32_t)i};
        c[na] = t;
        na += b > edge;
        c[n - 1 - ne] = t; /* n - 1 - ne >= na: they meet only at the last token */
        ne += b == edge;
    }
    memmove(c + na, c + n - ne, ne * sizeof *c);
    return na + (ne ? top_p_keep(c + na, ne, target - above) : 0);
}

/* The first index of the largest logit (NaN never wins; 0 when none is above -inf): the
 * largest value as 16 independent running maxima (no branch a logit, and no one chain of
 * dependent comparisons), then its first index. A greedy step of 16 sequences reads 16
 * vocabularies. */
static int32_t argmax(const float *logits, int n)
{
    float lane[16], bv = -INFINITY;
    for (int j = 0; j < 16; j++)
        lane[j] = -INFINITY;
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++)
            lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    for (; i < n; i++)
        bv = logits[i] > bv ? logits[i] : bv;
    for (int j = 0; j < 16; j++)
        bv = lane[j] > bv ? lane[j] : bv;
    if (!(bv > -INFINITY))
        return 0;
    for (i = 0; i < n; i++)
        if (logits[i] == bv)
            break;
    return i;
}

static int has_penalties(const eng_sampler *s)
{
    return s->p.presence_penalty != 0.0f || s->p.frequency_penalty != 0.0f;
}

/* what the penalties take from token t's logit; one function, so that a device sampler
 * is given the same float (eng_sampler_device_row()) */
static float penalty(const eng_sampler *s, int32_t t)
{
    return s->p.presence_penalty + s->p.frequency_penalty * (float)s->count[t];
}

/* logit_bias, then the penalties: both add to the logits of a few tokens */
static void apply_penalties(const eng_sampler *s, float *logits)
{
    for (int i = 0; i < s->p.n_logit_bias; i++)
        logits[s->bias[i].token] += s->bias[i].bias;
    if (!has_penalties(s)) return;
    for (int i = 0; i < s->n_seen; i++) {
        int32_t t = s->seen[i];
        logits[t] -= penalty(s, t);
    }
}

int32_t eng_sampler_sample(eng_sampler *s, float *logits)
{
    if (!s || !logits) return ENG_EINVAL;
    apply_penalties(s, logits);
    if (s->p.temperature == 0.0f) return argmax(logits, s->n_vocab);
    /* taken before anything can return, so that every sampled step takes one number */
    double u = rng_uniform(s->rng);

    size_t n = (size_t)s->n_vocab;
    float *w = s->w, temp = s->p.temperature;
    int32_t kmax = INT32_MIN;
    for (size_t i = 0; i < n; i++) {
        float v = logits[i] / temp;
        v = v == v ? v : -INFINITY; /* NaN is masked */
        w[i] = v;
        int32_t k = order_key(v);
        kmax = k > kmax ? k : kmax;
    }
    float vmax = from_order_key(kmax);
    if (!(vmax > -INFINITY && vmax < INFINITY)) return argmax(logits, s->n_vocab);

    /* softmax, unnormalized: weights exp(v - vmax), exactly 1 for the most likely token */
    struct cand *c = s->cand;
    size_t nc = 0;
    if (s->p.top_k > 0 && (size_t)s->p.top_k < n) {
        nc = top_k(w, n, (size_t)s->p.top_k, c);
        double total = 0.0;
        for (size_t i = 0; i < nc; i++) {
            c[i].v = exp_neg(c[i].v - vmax);
            total += c[i].v;
        }
        if (s->p.top_p < 1.0f) nc = top_p_keep(c, nc, (double)s->p.top_p * total);
    } else {
        double total = exp_block_sums(w, n, vmax, s->bsum);
        if (s->p.top_p == 1.0f && s->p.min_p == 0.0f) return (int32_t)draw(w, n, u, s->bsum, total);
        if (s->p.top_p < 1.0f && n >= NUCLEUS_MIN_VOCAB) {
            nc = nucleus(w, n, (double)s->p.top_p * total, s->hist, c);
        } else {
            /* min_p's cut before top_p's keeps the same tokens: if the nucleus reaches
             * below min_p, it keeps all that min_p leaves, and without them never reaches
             * its target */
            for (size_t i = 0; i < n; i++) { /* without a branch */
                c[nc] = (struct cand){w[i], (int32_t)i};
                nc += w[i] > 0.0f && w[i] >= s->p.min_p;
            }
            if (s->p.top_p < 1.0f) nc = top_p_keep(c, nc, (double)s->p.top_p * total);
        }
    }
    if (s->p.min_p > 0.0f) {
        /* p_i >= min_p * p_max, where p_max's weight is 1; the best always stays */
        size_t kept = 0;
        for (size_t i = 0; i < nc; i++)
            if (c[i].v >= s->p.min_p) c[kept++] = c[i];
        nc = kept;
    }
    assert(nc > 0); /* the most likely token passes every filter */
    for (size_t i = 0; i < nc; i++)
        w[i] = c[i].v;
    return c[draw(w, nc, u, s->bsum, block_sums(w, nc, s->bsum))].id;
}

int eng_sampler_device_adj(const eng_sampler *s)
{
    return s->p.n_logit_bias + (has_penalties(s) ? s->n_seen : 0);
}

void eng_sampler_device_row(eng_sampler *s, struct eng_sample_row *row,
                            struct eng_logit_adj *adj)
{
    /* apply_penalties()'s order; x -= y is x += -y exactly */
    int n = 0;
    for (int i = 0; i < s->p.n_logit_bias; i++)
        adj[n++] = (struct eng_logit_adj){s->bias[i].token, s->bias[i].bias};
    if (has_penalties(s))
        for (int i = 0; i < s->n_seen; i++)
            adj[n++] = (struct eng_logit_adj){s->seen[i], -penalty(s, s->seen[i])};
    row->n_adj = n;
    row->temperature = s->p.temperature;
    row->top_k = s->p.top_k;
    row->top_p = s->p.top_p;
    row->min_p = s->p.min_p;
    row->u = 0.0f;
    if (s->p.temperature > 0.0f) {
        float u = (float)rng_uniform(s->rng);
        row->u = u < 1.0f ? u : nextafterf(1.0f, 0.0f); /* rounding may reach 1 */
    }
}
