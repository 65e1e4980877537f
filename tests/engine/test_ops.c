/* tests the CPU forward pass's operations (engine/model.c, included for its statics) on
 * small cases computed by hand: RMSNorm, RoPE, attention over the paged cache with
 * grouped heads (and its tiles against a direct evaluation on random data), the softmax's
 * e^x, SwiGLU, and the quantized matrix-vector kernels against the F32 SGEMM. The kernels
 * keep the sanitizers' checks here (a sanitized build's server goes without them: see
 * KERNEL_NOSANITIZE), so that make test SAN=1 checks their bounds and arithmetic too. */
#define KERNEL_NOSANITIZE
#include "../../engine/model.c"

#include <criterion/criterion.h>

#define TOL 1e-6

Test(ops, rmsnorm)
{
    float x[4] = {1, 2, 3, 4}, g[4] = {1, 1, 2, 0.5f}, out[4];
    rmsnorm(out, x, g, 1, 4, 0.0f);
    /* rms = sqrt((1 + 4 + 9 + 16) / 4) = sqrt(7.5) */
    float r = sqrtf(7.5f);
    float want[4] = {1 / r, 2 / r, 2 * 3 / r, 0.5f * 4 / r};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(out[i], want[i], TOL, "out[%d] = %g, want %g", i, out[i], want[i]);
}

Test(ops, rope_rotates_adjacent_pairs)
{
    /* one head of 4 dims, all rotated, base 10000: pair 0 turns by pos * 1 rad, pair 1 by
     * pos * 10000^(-2/4) = pos * 0.01 rad */
    float inv[2] = {1.0f, 0.01f};
    float x[4] = {1, 0, 0, 2};
    int pos = 2;
    rope(x, &pos, 1, 1, 4, 4, inv);
    float want[4] = {cosf(2), sinf(2), -2 * sinf(0.02f), 2 * cosf(0.02f)};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(x[i], want[i], TOL, "x[%d] = %g, want %g", i, x[i], want[i]);
    /* position 0 is the identity; n_rot < head_dim leaves the tail alone */
    float y[4] = {1, 2, 3, 4};
    pos = 0;
    rope(y, &pos, 1, 1, 4, 2, inv);
    cr_assert(y[0] == 1 && y[1] == 2 && y[2] == 3 && y[3] == 4);
    pos = 5;
    rope(y, &pos, 1, 1, 4, 2, inv);
    cr_assert(y[2] == 3 && y[3] == 4);
}

Test(ops, attention_over_paged_cache)
{
    /* 2 KV heads of dim 2, one query head each, block size 2; positions 0..2 span two
     * blocks given out of order, so the block table is really followed */
    struct kvc_shape ks = {1, 2, 2, 2, 4, 0, KVC_F32};
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    int32_t b0, b1, b2;
    kvc_alloc(kv, &b0);
    kvc_alloc(kv, &b1);
    kvc_alloc(kv, &b2);
    int32_t table[2] = {b2, b0};
    float keys[3][2] = {{1, 0}, {0, 1}, {1, 1}}, vals[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    for (int p = 0; p < 3; p++) {
        /* KV head 1 holds these; head 0 holds zeros */
        float k[4] = {0, 0, keys[p][0], keys[p][1]}, v[4] = {0, 0, vals[p][0], vals[p][1]};
        kv_store(kv, 0, table[p / 2], p % 2, k, v);
    }
    float *buf = malloc(sizeof(float) * attn_scratch_floats(3, 2, 1));
    /* three new tokens at positions 0..2, each with query {2, 0} on head 1 */
    float q[3][4] = {{0, 0, 2, 0}, {0, 0, 2, 0}, {0, 0, 2, 0}}, out[3][4];
    attend_tile(&q[0][0], 0, 0, 3, kv, 0, table, 1, 1, 0.5f, buf, &out[0][0]);
    /* at position 2: scores q.k * 0.5 = {1, 0, 1}; weights e/(2e+1), 1/(2e+1), e/(2e+1) */
    float e = expf(1), z = 2 * e + 1;
    float want0 = (e * 1 + 1 * 3 + e * 5) / z, want1 = (e * 2 + 1 * 4 + e * 6) / z;
    cr_assert_float_eq(out[2][2], want0, TOL, "%g vs %g", out[2][2], want0);
    cr_assert_float_eq(out[2][3], want1, TOL, "%g vs %g", out[2][3], want1);
    /* causal: at position 0 only the first value counts */
    cr_assert(out[0][2] == 1 && out[0][3] == 2, "%g %g", out[0][2], out[0][3]);
    /* one new token at position 2 over the cached two (decode) */
    attend_tile(&q[0][0], 2, 0, 1, kv, 0, table, 1, 1, 0.5f, buf, &out[0][0]);
    cr_assert_float_eq(out[0][2], want0, TOL, "%g vs %g", out[0][2], want0);
    cr_assert_float_eq(out[0][3], want1, TOL, "%g vs %g", out[0][3], want1);
    free(buf);
    kvc_destroy(kv);
    (void)b1;
}

/* the vectorized e^x of the softmax against libm's, over the range the softmax feeds it */
Test(ops, softmax_exp)
{
    float x[2000], y[2000];
    for (int i = 0; i < 2000; i++)
        x[i] = -100.0f * i / 1999;
    memcpy(y, x, sizeof x);
    float sum = softmax_row(y, 1990, 2000); /* max x[0] = 0: y = e^x */
    double worst = 0, total = 0;
    for (int i = 0; i < 1990; i++) {
        total += exp((double)x[i]);
        if (x[i] > -87.0f)
            worst = fmax(worst, fabs(y[i] - exp((double)x[i])) / exp((double)x[i]));
        else
            cr_assert(y[i] >= 0 && y[i] < 1e-37f, "e^%g = %g", x[i], y[i]);
    }
    for (int i = 1990; i < 2000; i++)
        cr_assert(y[i] == 0, "masked y[%d] = %g", i, y[i]);
    fprintf(stderr, "ops: softmax e^x: largest relative error %.3g (tolerance 1e-6)\n", worst);
    cr_assert(worst < 1e-6);
    cr_assert(fabs(sum - total) / total < 1e-6, "sum %g, want %g", sum, total);
}

#if defined(__x86_64__)
/* equal bits, or both NaN (whose payloads may differ) */
static int same_float(float x, float y)
{
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

/* The in-place attention's AVX-512 softmax, and the AVX2 one (also the tiles' there), give
 * softmax_row()'s floats bit for bit (the int8 mode's agreement with llama.cpp hangs on
 * near ties): rows of scores from -120 to 30 in random order, lengths around the 8- and
 * 16-lane vectors and the 64-score steps of the AVX-512 maximum, one row of equal scores,
 * and rows with a NaN score in the 64-score steps or in the tail, in the lane of the
 * maximum (which it must not hide: the others' values as softmax_row() gives them, not
 * NaN); the AVX2 one zeros the row past n up to len, as softmax_row() does. */
Test(ops, softmax_avx512_and_avx2_match_portable)
{
    static const int ns[] = {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 100, 1264};
    enum { RANDOM = sizeof ns / sizeof *ns, EQUAL = RANDOM, NAN_BODY, NAN_TAIL };
    float a[1280], b[1280], c8[1280];
    unsigned seed = 3;
    for (int c = 0; c <= NAN_TAIL; c++) {
        const int n = c < RANDOM ? ns[c] : c == EQUAL ? 40 : 200, len = n + 9;
        for (int i = 0; i < n; i++)
            a[i] = c != EQUAL ? (float)rand_r(&seed) / RAND_MAX * 150 - 120 : 2.5f;
        if (c == NAN_BODY || c == NAN_TAIL) { /* the maximum, then a NaN, in one lane */
            a[5] = 40.0f;
            a[c == NAN_BODY ? 64 + 5 : 192 + 5] = NAN;
        }
        memcpy(b, a, sizeof(float) * (size_t)n);
        for (int i = 0; i < len; i++)
            c8[i] = i < n ? a[i] : 7.0f;
        const float sa = softmax_row(a, n, n);
        cr_assert(!isnan(a[0]), "row %d: the portable softmax's values NaN", c);
        if (have_avx512()) {
            const float sb = softmax_row512(b, n);
            cr_assert(same_float(sa, sb), "n %d: sum %.9g against %.9g", n, sa, sb);
            for (int i = 0; i < n; i++)
                cr_assert(same_float(a[i], b[i]), "row %d, n %d, [%d]: %.9g against %.9g", c,
                          n, i, a[i], b[i]);
            for (int i = n; i < (n + 15) / 16 * 16; i++)
                cr_assert(b[i] == 0, "n %d: [%d] past the row = %g", n, i, b[i]);
        }
        if (have_f16c()) {
            const float s8 = softmax_row8(c8, n, len);
            cr_assert(same_float(sa, s8), "n %d: sum %.9g against %.9g (AVX2)", n, sa, s8);
            for (int i = 0; i < len; i++)
                cr_assert(i < n ? same_float(a[i], c8[i]) : c8[i] == 0,
                          "n %d, [%d]: %.9g against %.9g (AVX2)", n, i, i < n ? a[i] : 0.0f,
                          c8[i]);
        }
    }
}
#endif

/* SwiGLU in lanes against libm, gates of both signs up to overflow of e^-g, a tail */
Test(ops, swiglu_matches_libm)
{
    enum { N = 203 };
    float gu[2 * N], h[N];
    for (int i = 0; i < N; i++) {
        gu[i] = -120.0f + 240.0f * i / (N - 1);
        gu[N + i] = 1.0f + 0.01f * i;
    }
    gu[0] = -0.0f;
    swiglu(h, gu, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double g = gu[i], want = g / (1.0 + exp(-g)) * gu[N + i];
        worst = fmax(worst, fabs(h[i] - want) / fmax(fabs(want), 1e-30));
    }
    fprintf(stderr, "ops: swiglu: largest relative error %.3g (tolerance 1e-6)\n", worst);
    cr_assert(worst < 1e-6);
}

#if defined(__x86_64__)
/* The forward pass's AVX-512 and AVX2 SwiGLU give swiglu()'s floats bit for bit: gates of
 * both signs (zeros of both signs among them) out to where e^-|g| underflows, tails past
 * the last 16 lanes (of 5, and of 8 and more: the AVX2 kernel's halves) */
Test(ops, swiglu_avx512_and_avx2_match_portable)
{
    enum { N = 1541 };
    float gu[2 * N], a[N], b[N];
    unsigned seed = 5;
    for (int i = 0; i < 2 * N; i++)
        gu[i] = (float)rand_r(&seed) / RAND_MAX * 240 - 120;
    gu[3] = 0.0f, gu[4] = -0.0f, gu[5] = 1e-30f, gu[6] = -88.5f;
    for (int n = N; n >= N - 8; n -= 8) { /* the gates' half of gu: its first n, ups after */
        float g2[2 * N];
        memcpy(g2, gu, sizeof(float) * n);
        memcpy(g2 + n, gu + N, sizeof(float) * n);
        swiglu(a, g2, n);
        for (int k = 0; k < 2; k++) {
            if (k == 0 ? !have_avx512() : !have_f16c())
                continue;
            memset(b, 0, sizeof b);
            (k == 0 ? swiglu512 : swiglu8)(b, g2, n);
            for (int i = 0; i < n; i++)
                cr_assert(memcmp(&a[i], &b[i], sizeof a[i]) == 0,
                          "%s, n %d, [%d] g %.9g: %.9g against %.9g", k ? "AVX2" : "AVX-512", n,
                          i, g2[i], a[i], b[i]);
        }
    }
}
#endif

/* where dimension d of a slot's keys (v = 0) or values (v = 1) lives in its KV head's
 * block, as an index of values (kvcache.h's layout: keys transposed within a block; BF16 in
 * pairs of dimensions or positions, Q8_0's keys in quads of dimensions) */
static size_t kv_index(kvc_pool *kv, int v, int slot, int d)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int hd = ks->head_dim, bs = ks->block_size;
    if (ks->dtype == KVC_BF16 && v)
        return ((size_t)(slot / 2) * hd + d) * 2 + slot % 2;
    if (ks->dtype == KVC_Q8_0 && !v)
        return ((size_t)(d / 4) * bs + slot) * 4 + d % 4;
    if (ks->dtype == KVC_BF16)
        return ((size_t)(d / 2) * bs + slot) * 2 + d % 2;
    if (v)
        return (size_t)slot * hd + d;
    return (size_t)d * bs + slot;
}

/* the head block of element e (KV head e / hd) of a block's keys or values in layer 1 */
static void *kv_head(kvc_pool *kv, int v, int32_t block, int e)
{
    const int g = e / kvc_shape(kv)->head_dim;
    return v ? kvc_v_head(kv, 1, block, g) : kvc_k_head(kv, 1, block, g);
}

/* that element, F32, F16, BF16 or Q8_0 storage (a byte, less 128 for keys, times its
 * position's scale); kv_put
 * stores x, rounded to F16 or BF16 (to nearest even) where the pool is (not Q8_0, whose
 * scale a position's values share: kv_store() there) */
static float kv_get(kvc_pool *kv, int v, int32_t block, int slot, int e)
{
    void *base = kv_head(kv, v, block, e);
    const struct kvc_shape *ks = kvc_shape(kv);
    const size_t at = kv_index(kv, v, slot, e % ks->head_dim);
    if (ks->dtype == KVC_Q8_0) {
        const float *sc = (const float *)((char *)base + kvc_q8_scales_at(ks));
        const int byte = v ? ((int8_t *)base)[at] : ((uint8_t *)base)[at] - 128;
        return byte * sc[slot];
    }
    if (kvc_shape(kv)->dtype == KVC_F32)
        return ((float *)base)[at];
    if (kvc_shape(kv)->dtype == KVC_BF16)
        return bf16_to_f32(((uint16_t *)base)[at]);
    _Float16 h;
    memcpy(&h, (uint16_t *)base + at, sizeof h);
    return (float)h;
}

static void kv_put(kvc_pool *kv, int v, int32_t block, int slot, int e, float x)
{
    void *base = kv_head(kv, v, block, e);
    const size_t at = kv_index(kv, v, slot, e % kvc_shape(kv)->head_dim);
    cr_assert_neq(kvc_shape(kv)->dtype, KVC_Q8_0);
    if (kvc_shape(kv)->dtype == KVC_F32) {
        ((float *)base)[at] = x;
        return;
    }
    if (kvc_shape(kv)->dtype == KVC_BF16) {
        ((uint16_t *)base)[at] = f32_to_bf16(x);
        return;
    }
    _Float16 h = (_Float16)x;
    memcpy((uint16_t *)base + at, &h, sizeof h);
}

/* Attention of n tokens at positions pos0.. (queries q: [n][NK * group * hd], unscaled)
 * over the pool's stored keys and values (kv_get()), in double; round_q: each scaled query
 * rounded to bytes first, as the in-place attention over a Q8_0 pool rounds it
 * (q8_row()). Returns the largest difference from out (what a kernel gave). */
static double attention_reference(kvc_pool *kv, const int32_t *table, const float *q, int pos0,
                                  int n, int NK, int group, int round_q, const float *out)
{
    const int hd = kvc_shape(kv)->head_dim, bs = kvc_shape(kv)->block_size;
    const int HQ = NK * group * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    double worst = 0, *sc = malloc(sizeof(double) * (pos0 + n)), qv[hd];
    for (int t = 0; t < n; t++)
        for (int h = 0; h < NK * group; h++) {
            const int p = pos0 + t, g = h / group;
            float x[hd];
            int8_t b[hd];
            for (int e = 0; e < hd; e++)
                x[e] = q[t * HQ + h * hd + e] * scale;
            const double qs = round_q ? q8_row(b, x, hd) : 0;
            for (int e = 0; e < hd; e++)
                qv[e] = round_q ? b[e] * qs : (double)q[t * HQ + h * hd + e] * scale;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= p; j++) {
                double d = 0;
                for (int e = 0; e < hd; e++)
                    d += qv[e] * kv_get(kv, 0, table[j / bs], j % bs, g * hd + e);
                sc[j] = d;
                mx = fmax(mx, sc[j]);
            }
            for (int j = 0; j <= p; j++)
                sum += (sc[j] = exp(sc[j] - mx));
            for (int e = 0; e < hd; e++) {
                double o = 0;
                for (int j = 0; j <= p; j++)
                    o += sc[j] / sum * kv_get(kv, 1, table[j / bs], j % bs, g * hd + e);
                worst = fmax(worst, fabs(o - out[t * HQ + h * hd + e]));
            }
        }
    free(sc);
    return worst;
}

/*
 * Tiled attention (SGEMMs over gathered keys and values) against a direct evaluation in
 * double, per token and head, for several chunk lengths and cached contexts; 3 KV heads of
 * `group` query heads each, head dim hd (3 and 64: SmolLM2), blocks of bs positions in a
 * scrambled order. Keys and values stored as dtype; the reference reads the stored values.
 * Every token also goes through the direct kernel (attend_group(), where the CPU has it),
 * alone and in groups of consecutive tokens sharing the blocks before the first one's
 * position: a group must give each token bit for bit what it gets alone.
 *
 * Over BF16 keys and values the direct kernel rounds the queries and the probabilities to
 * bfloat16 too (8 significant bits, a relative error of up to 2^-9 each), which the tiles
 * do not: with these scores of a few units that moves an output by up to about 1e-2
 * (measured: under 4e-3), so that comparison is held to 1e-2 there.
 */
static void attention_cases(enum kvc_dtype dtype, int hd, int group, int bs)
{
    const int NK = 3, NH = NK * group, HQ = NH * hd, HK = NK * hd, nblk = 1024 / bs;
    const int cases[][2] = {{0, 1},  {0, 5},  {0, 32},  {0, 33},   {0, 100},  {17, 1},
                            {40, 7}, {31, 64}, {100, 65}, {250, 70}, {999, 1}};
    struct kvc_shape ks = {2, NK, hd, bs, nblk, 0, dtype};
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    int32_t table[nblk];
    for (int i = 0; i < nblk; i++)
        kvc_alloc(kv, &table[i]);
    unsigned seed = 7;
    for (int i = nblk - 1; i > 0; i--) { /* scramble the table */
        int j = (int)((seed = seed * 1103515245 + 12345) >> 16) % (i + 1);
        int32_t tmp = table[i];
        table[i] = table[j];
        table[j] = tmp;
    }
#define RND() ((float)((seed = seed * 1103515245 + 12345) >> 16 & 0x7fff) / 16384.0f - 1.0f)
    for (int p = 0; p < nblk * bs; p++) {
        float k[HK], v[HK];
        for (int e = 0; e < HK; e++) {
            if (dtype != KVC_Q8_0) {
                kv_put(kv, 0, table[p / bs], p % bs, e, RND());
                kv_put(kv, 1, table[p / bs], p % bs, e, RND());
                continue;
            }
            k[e] = RND();
            v[e] = RND();
        }
        if (dtype == KVC_Q8_0)
            kv_store(kv, 1, table[p / bs], p % bs, k, v);
    }
    const float scale = 1.0f / sqrtf((float)hd);
    float *buf = malloc(sizeof(float) * attn_scratch_floats(nblk * bs, hd, group));
    double worst = 0, worst_direct = 0, worst_q8 = 0;
    int direct_cases = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int pos0 = cases[c][0], n = cases[c][1];
        float *q = malloc(sizeof(float) * n * HQ), *out = malloc(sizeof(float) * n * HQ);
        for (int i = 0; i < n * HQ; i++)
            q[i] = 4 * RND(); /* scores of a few units: softmax far from uniform */
        for (int g = 0; g < NK; g++)
            for (int t0 = 0; t0 < n; t0 += ATT_TILE)
                attend_tile(q, pos0, t0, t0 + ATT_TILE < n ? t0 + ATT_TILE : n, kv, 1, table, g,
                            group, scale, buf, out);
#if defined(__x86_64__)
        const int gm = group_members(group);
        if (attend_direct_ok(hd) && attend_direct_dtype_ok(dtype)) {
            float *od = malloc(sizeof(float) * n * HQ), *og = malloc(sizeof(float) * n * HQ);
            struct att_member mb[ATT_GROUP_MAX];
            for (int t = 0; t < n; t++) {
                mb[0] = (struct att_member){t, pos0 + t, table};
                for (int g = 0; g < NK; g++)
                    attend_group(mb, 1, (pos0 + t + 1) / bs, kv, 1, g, group, scale, q, od, buf);
            }
            for (int t0 = 0; t0 < n; t0 += gm) {
                int nm = n - t0 < gm ? n - t0 : gm;
                for (int k = 0; k < nm; k++)
                    mb[k] = (struct att_member){t0 + k, pos0 + t0 + k, table};
                for (int g = 0; g < NK; g++)
                    attend_group(mb, nm, (pos0 + t0 + 1) / bs, kv, 1, g, group, scale, q, og,
                                 buf);
            }
            for (int i = 0; i < n * HQ; i++)
                worst_direct = fmax(worst_direct, fabs(od[i] - out[i]));
            cr_assert(memcmp(od, og, sizeof(float) * n * HQ) == 0,
                      "pos0 %d, %d tokens: a group differs from its tokens alone", pos0, n);
            if (dtype == KVC_Q8_0)
                worst_q8 =
                    fmax(worst_q8, attention_reference(kv, table, q, pos0, n, NK, group, 1, od));
            direct_cases++;
            free(od);
            free(og);
        }
#endif
        worst = fmax(worst, attention_reference(kv, table, q, pos0, n, NK, group, 0, out));
        free(q);
        free(out);
    }
#undef RND
    if (dtype == KVC_Q8_0 && direct_cases) {
        fprintf(stderr, "ops: in-place attention (q8_0 KV, hd %d, group %d, blocks of %d) vs "
                        "double with the queries rounded alike: largest difference %.3g "
                        "(tolerance 1e-5)\n", hd, group, bs, worst_q8);
        cr_assert(worst_q8 < 1e-5);
    }
    const char *what = dtype == KVC_BF16  ? "bf16"
                       : dtype == KVC_F16 ? "f16"
                       : dtype == KVC_Q8_0 ? "q8_0"
                                           : "f32";
    const double tol_direct = dtype == KVC_BF16 ? 1e-2 : dtype == KVC_Q8_0 ? 2e-2 : 1e-5;
    fprintf(stderr, "ops: tiled attention vs double (%s KV, hd %d, group %d, blocks of %d): "
                    "largest difference %.3g (tolerance 1e-5)\n", what, hd, group, bs, worst);
    fprintf(stderr, "ops: in-place attention vs tiles (%s KV, hd %d, group %d, blocks of %d): "
                    "%d cases, largest difference %.3g (tolerance %g)\n", what, hd, group, bs,
            direct_cases, worst_direct, tol_direct);
    cr_assert(worst < 1e-5);
    cr_assert(worst_direct < tol_direct);
    cr_assert(direct_cases > 0 || !attend_direct_ok(hd) || !attend_direct_dtype_ok(dtype));
    free(buf);
    kvc_destroy(kv);
}

Test(ops, attention_tiles_match_direct)
{
    attention_cases(KVC_F32, 64, 3, 16);
    attention_cases(KVC_F32, 128, 4, 16);
    attention_cases(KVC_F32, 64, 3, 8);  /* blocks narrower than a vector's 16 lanes */
    attention_cases(KVC_F32, 32, 1, 24); /* and a block of 16 + 8 positions */
    attention_cases(KVC_F32, 64, 3, 12); /* blocks that cut 8 positions (AVX2's vector) */
}

Test(ops, attention_over_f16_keys_and_values_matches_direct)
{
    attention_cases(KVC_F16, 64, 3, 16);
    attention_cases(KVC_F16, 128, 4, 16);
    attention_cases(KVC_F16, 64, 3, 8);
    attention_cases(KVC_F16, 32, 1, 24);
    attention_cases(KVC_F16, 64, 3, 12);
    attention_cases(KVC_F16, 40, 2, 5); /* heads of 8 x 5 dimensions (AVX2: not AVX-512) */
}

Test(ops, attention_over_bf16_keys_and_values_matches_direct)
{
    attention_cases(KVC_BF16, 64, 3, 16);
    attention_cases(KVC_BF16, 128, 4, 16);
    attention_cases(KVC_BF16, 64, 3, 8);
    attention_cases(KVC_BF16, 32, 1, 24);
    attention_cases(KVC_BF16, 64, 3, 2); /* a block of one position pair */
}

/* Q8_0: the reference reads each byte times its scale, as the tiles gather them. The
 * in-place kernels (AVX512-VNNI) round each query to bytes too and sum the bytes'
 * products exactly, then scale the sum; they take the values' scales into the
 * probabilities. Against the tiles that moves an output by up to about 1e-2 (measured:
 * under 8e-3), held to 2e-2; against a double evaluation that rounds the queries alike,
 * 1e-5. */
Test(ops, attention_over_q8_0_keys_and_values_matches_direct)
{
    attention_cases(KVC_Q8_0, 64, 3, 16);
    attention_cases(KVC_Q8_0, 128, 4, 16);
    attention_cases(KVC_Q8_0, 64, 3, 8);
    attention_cases(KVC_Q8_0, 32, 1, 24);
}

#if defined(__x86_64__)
/*
 * Decoding sequences that share a cached prefix attend in one group over its blocks
 * (group_direct() puts them together, attend_group() reads the blocks once): each gets
 * bit for bit what it gets alone. Eight sequences: six share 6 blocks (one group: up to 8
 * members of 3 heads), then go on in blocks of their own; one shares 2 of them; one shares
 * none.
 */
static void sharing_case(enum kvc_dtype dtype)
{
    if (!attend_direct_ok(64) || !attend_direct_dtype_ok(dtype))
        return;
    const int NK = 3, group = 3, hd = 64, bs = 16, HQ = NK * group * hd, HK = NK * hd;
    struct kvc_shape ks = {2, NK, hd, bs, 64, 0, dtype};
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    enum { N = 8 };
    int32_t tables[N][10];
    for (int s = 0; s < N; s++)
        for (int b = 0; b < 10; b++) {
            int shared = s == 0 ? 0 : s < 6 ? 6 : s == 6 ? 2 : 0;
            if (b < shared)
                tables[s][b] = tables[0][b];
            else
                kvc_alloc(kv, &tables[s][b]);
        }
    unsigned seed = 3;
    float k[HK], v[HK];
    for (int b = 0; b < 64; b++)
        for (int slot = 0; slot < bs; slot++) {
            for (int e = 0; e < HK; e++) {
                k[e] = (float)((seed = seed * 1103515245 + 12345) >> 16 & 0x7fff) / 8192.0f - 2;
                v[e] = (float)((seed = seed * 1103515245 + 12345) >> 16 & 0x7fff) / 8192.0f - 2;
            }
            kv_store(kv, 1, b, slot, k, v);
        }
    const int pos[N] = {150, 97, 130, 101, 145, 120, 60, 40};
    struct eng_seq seqs[N];
    int first[N + 1], tiles[N + 1] = {0}, gstart[N + 1], gshared[N];
    float q[N * HQ], alone[N * HQ], together[N * HQ];
    for (int i = 0; i < N * HQ; i++)
        q[i] = (float)((seed = seed * 1103515245 + 12345) >> 16 & 0x7fff) / 4096.0f - 4;
    for (int s = 0; s < N; s++) {
        seqs[s] = (struct eng_seq){NULL, 1, pos[s], tables[s], ENG_LOGITS_LAST};
        first[s] = s;
    }
    first[N] = N;
    struct att_member mb[N];
    float *buf = malloc(sizeof(float) * attn_scratch_floats(160, hd, group));
    int ng = group_direct(seqs, N, first, tiles, bs, group, mb, gstart, gshared);
    cr_assert_eq(ng, 3, "the six sharing 6 blocks in one group, then one group each");
    int grouped = 0;
    for (int i = 0; i < ng; i++) {
        grouped = gstart[i + 1] - gstart[i] > grouped ? gstart[i + 1] - gstart[i] : grouped;
        if (gstart[i + 1] - gstart[i] == 6)
            cr_assert_eq(gshared[i], 6);
        for (int g = 0; g < NK; g++)
            attend_group(mb + gstart[i], gstart[i + 1] - gstart[i], gshared[i], kv, 1, g, group,
                         0.125f, q, together, buf);
    }
    cr_assert_eq(grouped, 6);
    for (int s = 0; s < N; s++) {
        struct att_member one = {s, pos[s], tables[s]};
        for (int g = 0; g < NK; g++)
            attend_group(&one, 1, 0, kv, 1, g, group, 0.125f, q, alone, buf);
    }
    cr_assert(memcmp(alone, together, sizeof alone) == 0);
    free(buf);
    kvc_destroy(kv);
}

Test(ops, sequences_sharing_a_prefix_attend_together_as_alone)
{
    sharing_case(KVC_F32);
    sharing_case(KVC_F16);
    sharing_case(KVC_BF16); /* pairs of positions across the shared range's end */
    sharing_case(KVC_Q8_0); /* scales read through each sequence's own table */
}
#endif

/* An F16 pool holds a block in half the bytes; the engine's conversions round to nearest
 * even and back exactly. */
Test(ops, kv_pool_f16_storage)
{
    struct kvc_shape f32 = {2, 3, 64, 16, 4, 0, KVC_F32}, f16 = f32;
    f16.dtype = KVC_F16;
    cr_assert_eq(kvc_block_bytes(&f32), 2u * 2 * 16 * 3 * 64 * 4);
    cr_assert_eq(kvc_block_bytes(&f16), kvc_block_bytes(&f32) / 2);
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&f16, &kv), 0);
    int32_t b;
    cr_assert_eq(kvc_alloc(kv, &b), 0);
    uint16_t *blk = kvc_k_head(kv, 1, b, 0);
    cr_assert_not_null(blk);
    /* 20 values: 16 through the vector conversion where there is one, 4 through the tail;
     * ties (1 + 2/4096, 1 + 6/4096: half a unit of 1/1024) go to the even neighbour */
    const float in[] = {1.0f,  1.0f + 1.0f / 4096, 1.0f + 2.0f / 4096, 1.0f + 3.0f / 4096,
                        1.0f + 6.0f / 4096, 65504.0f, -0.5f, 1e-8f};
    const float want[] = {1.0f, 1.0f, 1.0f, 1.0f + 4.0f / 4096, 1.0f + 8.0f / 4096, 65504.0f,
                          -0.5f, 0.0f};
    float x[20], y[20];
    for (int i = 0; i < 20; i++)
        x[i] = in[i % 8];
    f16_store(blk, x, 20);
    f16_load(y, blk, 20);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(y[i], want[i % 8], "%.9g stored as %.9g", x[i], y[i]);
    kvc_destroy(kv);
    struct kvc_shape bad = f32;
    bad.dtype = (enum kvc_dtype)7;
    cr_assert_eq(kvc_create(&bad, &kv), ENG_EINVAL);
}

static int cmp_ptr(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    return x < y ? -1 : x > y;
}

/* kvc_k_blocks(), kvc_v_blocks(): base + b * stride is the head block kvc_k_head() and
 * kvc_v_head() give, every layer, block, head and dtype (the attention kernels address
 * blocks so); a head's blocks follow one another in memory, so that the blocks of a prompt,
 * handed out in order, are one run of it a head (kvcache.h); and the head blocks of the
 * keys (or values) tile their storage, none overlapping another. */
Test(ops, kv_pool_blocks_by_stride)
{
    const enum kvc_dtype dts[] = {KVC_F32, KVC_F16, KVC_BF16, KVC_Q8_0};
    const size_t elem[] = {4, 2, 2, 1};
    enum { NL = 3, NK = 2, NB = 5 };
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        struct kvc_shape s = {NL, NK, 8, 4, NB, 0, dts[d]};
        const size_t head_block = 8 * 4 * elem[d] + (dts[d] == KVC_Q8_0 ? 4 * sizeof(float) : 0);
        kvc_pool *kv;
        cr_assert_eq(kvc_create(&s, &kv), 0);
        for (int v = 0; v < 2; v++) {
            const char *all[NL * NK * NB];
            int n = 0;
            for (int l = 0; l < NL; l++)
                for (int h = 0; h < NK; h++) {
                    struct kvc_blocks kb = v ? kvc_v_blocks(kv, l, h) : kvc_k_blocks(kv, l, h);
                    cr_assert_eq(kb.stride, head_block, "dtype %d", dts[d]);
                    for (int b = 0; b < NB; b++) {
                        const char *at = v ? kvc_v_head(kv, l, b, h) : kvc_k_head(kv, l, b, h);
                        cr_assert_eq((const void *)(kb.base + b * kb.stride), (const void *)at,
                                     "dtype %d, layer %d, block %d, head %d", dts[d], l, b, h);
                        all[n++] = at;
                    }
                }
            qsort(all, n, sizeof *all, cmp_ptr);
            for (int i = 1; i < n; i++)
                cr_assert_eq((size_t)(all[i] - all[i - 1]), head_block, "dtype %d", dts[d]);
        }
        kvc_destroy(kv);
    }
}

/* A BF16 pool: half the bytes; in pairs (kvcache.h), so an odd block size or head dim is
 * refused. kv_store() rounds to nearest even, keeps F32's range, and puts each key and
 * value where kvcache.h's layout (kv_index() here) says. */
Test(ops, kv_pool_bf16_storage)
{
    struct kvc_shape f32 = {2, 2, 4, 4, 4, 0, KVC_F32}, bf = f32, odd;
    bf.dtype = KVC_BF16;
    cr_assert_eq(kvc_block_bytes(&bf), kvc_block_bytes(&f32) / 2);
    kvc_pool *kv;
    odd = bf;
    odd.block_size = 3;
    cr_assert_eq(kvc_create(&odd, &kv), ENG_EINVAL);
    odd = bf;
    odd.head_dim = 5;
    cr_assert_eq(kvc_create(&odd, &kv), ENG_EINVAL);
    cr_assert_eq(kvc_create(&bf, &kv), 0);
    int32_t b;
    cr_assert_eq(kvc_alloc(kv, &b), 0);
    /* 1 + 1/256 is a tie between 1 and 1 + 1/128 (BF16 keeps 7 bits after the point):
     * to the even 1; 1 + 3/256 to 1 + 2/128; 0.1 (0x3dcccccd) up to 0x3dcd */
    const float in[8] = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, ldexpf(1, 100), -2.5f,
                         ldexpf(1, -100), -1.0f, 3.0f, 0.1f};
    const float want[8] = {1.0f, 1.0f + 2.0f / 128, ldexpf(1, 100), -2.5f,
                           ldexpf(1, -100), -1.0f, 3.0f, 0.10009765625f};
    for (int s = 0; s < 4; s++) { /* position s: keys in[s + e], values in[7 - s - e] */
        float k[8], v[8];
        for (int e = 0; e < 8; e++)
            k[e] = in[(s + e) % 8], v[e] = in[(15 - s - e) % 8];
        kv_store(kv, 1, b, s, k, v);
    }
    for (int s = 0; s < 4; s++)
        for (int e = 0; e < 8; e++) {
            cr_assert_eq(kv_get(kv, 0, b, s, e), want[(s + e) % 8], "key %d of position %d", e, s);
            cr_assert_eq(kv_get(kv, 1, b, s, e), want[(15 - s - e) % 8], "value %d of position %d",
                         e, s);
        }
    kvc_destroy(kv);
}

/* A Q8_0 pool: a byte a key or value plus a float scale a position and KV head (kvcache.h;
 * keys in quads of dimensions, so a head dim that is no multiple of 4 is refused).
 * kv_store() rounds each to the nearest multiple of its scale (a head's largest magnitude
 * / 127), so none is more than half a scale off, the largest is exact, and a head of zeros
 * stays zeros. */
Test(ops, kv_pool_q8_0_storage)
{
    struct kvc_shape f32 = {2, 2, 4, 4, 4, 0, KVC_F32}, q8 = f32;
    q8.dtype = KVC_Q8_0;
    /* per layer and block, keys and values each: 2 heads x 4 positions x (4 bytes + a
     * float); a head block's scales after its 4 x 4 bytes */
    cr_assert_eq(kvc_block_bytes(&q8), 2u * 2 * 2 * 4 * (4 + 4));
    cr_assert_eq(kvc_q8_scales_at(&q8), 4u * 4);
    cr_assert_str_eq(kvc_dtype_name(KVC_Q8_0), "q8_0");
    cr_assert_str_eq(kvc_dtype_name(KVC_F16), "f16");
    kvc_pool *kv;
    struct kvc_shape odd = q8;
    odd.head_dim = 6; /* keys in quads of dimensions */
    cr_assert_eq(kvc_create(&odd, &kv), ENG_EINVAL);
    cr_assert_eq(kvc_create(&q8, &kv), 0);
    int32_t b;
    cr_assert_eq(kvc_alloc(kv, &b), 0);
    cr_assert_eq(kvc_alloc(kv, &b), 0); /* a block other than the first */
    /* by hand: keys of head 0 have scale 127 / 127 = 1, so 0.5 is a tie, to the even 0,
     * and 2.5 to 2; values of head 0 have scale 0.03, -1.27 / 0.03 = -42.33 -> -42 */
    const float k0[8] = {1, -2, 0.5f, 127, 0, 0, 0, 0}, v0[8] = {-3.81f, 0.03f, -1.27f, 2.5f,
                                                                 0, 0, 0, 0};
    const float k0_want[4] = {1, -2, 0, 127};
    kv_store(kv, 1, b, 2, k0, v0);
    for (int e = 0; e < 4; e++) {
        cr_assert_eq(kv_get(kv, 0, b, 2, e), k0_want[e], "key %d", e);
        cr_assert_eq(kv_get(kv, 0, b, 2, 4 + e), 0.0f, "a head of zeros, key %d", e);
        cr_assert_eq(kv_get(kv, 1, b, 2, 4 + e), 0.0f, "a head of zeros, value %d", e);
    }
    const int8_t *vq = (const int8_t *)kvc_v_head(kv, 1, b, 0) + 2 * 4;
    const int8_t v_want[4] = {-127, 1, -42, 83}; /* 2.5 / 0.03 = 83.33 */
    for (int e = 0; e < 4; e++)
        cr_assert_eq(vq[e], v_want[e], "value %d: byte %d", e, vq[e]);
    cr_assert_float_eq(kv_get(kv, 1, b, 2, 1), 0.03f, 1e-7f);
    /* random heads: every value within half a scale, the largest exact */
    unsigned seed = 11;
    double worst = 0;
    for (int slot = 0; slot < 4; slot++) {
        float k[8], v[8];
        for (int e = 0; e < 8; e++) {
            k[e] = (float)((seed = seed * 1103515245 + 12345) >> 16 & 0x7fff) / 1024.0f - 16;
            v[e] = k[e] / 1000;
        }
        kv_store(kv, 1, b, slot, k, v);
        for (int g = 0; g < 2; g++) {
            float amax = 0;
            for (int e = 0; e < 4; e++)
                amax = fmaxf(amax, fabsf(k[g * 4 + e]));
            for (int e = 0; e < 4; e++) {
                const float x = k[g * 4 + e], y = kv_get(kv, 0, b, slot, g * 4 + e);
                const float half = amax / 127 / 2;
                worst = fmax(worst, fabs(x - y) / half);
                cr_assert(fabsf(x - y) <= half * 1.0001f, "key %d: %.9g stored as %.9g", e, x,
                          y);
                cr_assert(fabsf(v[g * 4 + e] - kv_get(kv, 1, b, slot, g * 4 + e)) <=
                          half / 1000 * 1.0001f);
                if (fabsf(x) == amax)
                    cr_assert_float_eq(fabsf(y), amax, amax * 1e-6f);
            }
        }
    }
    fprintf(stderr, "ops: q8_0 keys, largest error %.3g of half a scale (bound 1)\n", worst);
    kvc_destroy(kv);
}

static uint16_t f16_bits(float f)
{
    /* exact for the small values used below (powers of two times small integers) */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, man = u & 0x7fffff;
    if (!exp)
        return (uint16_t)sign;
    return (uint16_t)(sign | (exp - 127 + 15) << 10 | man >> 13);
}

/*
 * A Q4_0, Q4_1 or Q8_0 matrix [n][k] from blocks written here (scale d(row, block), Q4_1
 * minimum mn, the quantized values from the generator), with its F32 copy and its stored
 * form as weight_q() makes them (Q4_0 as Q4_1 with minimum -8 d).
 */
static struct wmat make_qmat(enum ggml_type type, int n, int k,
                             float (*d)(int, int, unsigned *), float mn, unsigned *seed)
{
    const int nb = k / 32, head = type == GGML_Q4_1 ? 4 : 2;
    int be, bb;
    ggml_type_block(type, &be, &bb);
    uint8_t *raw = malloc((size_t)n * nb * bb);
    for (int r = 0; r < n; r++)
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = raw + ((size_t)r * nb + b) * bb;
            uint16_t dh = f16_bits(d(r, b, seed)), mh = f16_bits(mn);
            memcpy(blk, &dh, 2);
            if (type == GGML_Q4_1)
                memcpy(blk + 2, &mh, 2);
            for (int j = head; j < bb; j++)
                blk[j] = (uint8_t)((*seed = *seed * 1103515245 + 12345) >> 16);
        }
    struct wmat w = {.f = malloc(sizeof(float) * (size_t)n * k), .type = type, .n = n, .k = k};
    for (int r = 0; r < n; r++)
        eng_dequant_row(type, raw + (size_t)r * nb * bb, w.f + (size_t)r * k, k);
    cr_assert_eq(stored_form(type, raw, &w), 0);
    free(raw);
    return w;
}

static float d_cycle(int r, int b, unsigned *seed)
{
    (void)seed;
    return 0.125f * (float)(1 + (r + b) % 3);
}

/* the matrix-vector kernels (stored Q4_0 / Q4_1 / Q8_0) agree with the SGEMM on the F32
 * copy */
/* linear() with scratch of its own for gemm_lanes() (the forward pass lends the model's) */
static void linear_scratch(const struct wmat *w, const float *x, int t, float *y, int accumulate)
{
    float *xt = malloc(linear_scratch_bytes(t, w->k, omp_get_max_threads()));
    cr_assert_not_null(xt);
    linear(w, x, t, y, accumulate, xt);
    free(xt);
}

static void check_kernel(enum ggml_type type)
{
    const int n = 7, k = 64;
    unsigned seed = 1;
    struct wmat w = make_qmat(type, n, k, d_cycle, -0.5f, &seed);
    float x[3 * 64], y_q[3 * 7], y_f[3 * 7];
    for (int i = 0; i < 3 * k; i++)
        x[i] = (float)((i * 37) % 19) / 7.0f - 1.0f;
    double worst = 0;
    /* up to QMV_MAX_T tokens: the matrix-vector kernels, once a token */
    for (int t = 1; t <= 3; t += 2) {
        linear_scratch(&w, x, t, y_q, 0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n, k, 1.0f, x, k, w.f, k, 0.0f,
                    y_f, n);
        for (int i = 0; i < t * n; i++)
            worst = fmax(worst, fabs(y_q[i] - y_f[i]));
    }
    fprintf(stderr, "ops: %s kernel vs SGEMM: largest difference %.3g (tolerance 1e-4)\n",
            ggml_type_name(type), worst);
    cr_assert(worst < 1e-4);
    wmat_free(&w);
}

Test(ops, q4_1_kernel)
{
    check_kernel(GGML_Q4_1);
}

Test(ops, q8_0_kernel)
{
    check_kernel(GGML_Q8_0);
}

Test(ops, q4_0_kernel)
{
    check_kernel(GGML_Q4_0);
}

/* y (+)= x W^T through linear() on an F32 matrix, for token counts on both sides of each
 * path (the small-batch kernel up to GEMM_SMALL_MAX_T tokens, OpenBLAS beyond) and shapes
 * that leave partial tiles (rows not a multiple of 6, tokens not of 4, k not of 16),
 * against a double-precision sum. Tolerance: 1e-5 relative to the sum of |x w| terms. */
Test(ops, linear_f32_small_batches_and_partial_tiles)
{
    static const int ts[] = {1, 3, 4, 5, 7, 16, 33, GEMM_SMALL_MAX_T, GEMM_SMALL_MAX_T + 1};
    static const int ns[] = {1, 5, 6, 13, 96};
    static const int ks[] = {16, 20, 33, 576};
    unsigned seed = 7;
    double worst = 0;
    for (size_t a = 0; a < sizeof ts / sizeof *ts; a++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
                int t = ts[a], n = ns[b], k = ks[c];
                float *x = malloc(sizeof(float) * (size_t)t * k);
                float *w = malloc(sizeof(float) * (size_t)n * k);
                float *y = malloc(sizeof(float) * (size_t)t * n);
                for (int i = 0; i < t * k; i++)
                    x[i] = (float)rand_r(&seed) / RAND_MAX * 2 - 1;
                for (int i = 0; i < n * k; i++)
                    w[i] = (float)rand_r(&seed) / RAND_MAX * 2 - 1;
                struct wmat m = {.f = w, .type = GGML_F32, .n = n, .k = k};
                for (int accumulate = 0; accumulate < 2; accumulate++) {
                    for (int i = 0; i < t * n; i++)
                        y[i] = accumulate ? 0.5f : NAN;
                    linear_scratch(&m, x, t, y, accumulate);
                    for (int i = 0; i < t; i++)
                        for (int j = 0; j < n; j++) {
                            double s = accumulate ? 0.5 : 0, mag = 1e-30;
                            for (int l = 0; l < k; l++) {
                                s += (double)x[i * k + l] * w[j * k + l];
                                mag += fabs((double)x[i * k + l] * w[j * k + l]);
                            }
                            double e = fabs(y[i * n + j] - s) / mag;
                            worst = e > worst ? e : worst;
                            cr_assert(e < 1e-5, "t %d n %d k %d acc %d: y[%d][%d] = %g, want %g",
                                      t, n, k, accumulate, i, j, y[i * n + j], s);
                        }
                }
                free(x);
                free(w);
                free(y);
            }
    fprintf(stderr, "ops: linear F32 vs double: largest relative difference %.3g\n", worst);
}

#if defined(__x86_64__) /* the regrouped weights and the 8-bit products: x86-64 only */
/* linear() into y [t][w->n] filled first with 0.25 (accumulate) or NaN (not) */
static void linear_over(struct wmat *w, const float *x, int t, float *y, int accumulate)
{
    for (int i = 0; i < t * w->n; i++)
        y[i] = accumulate ? 0.25f : NAN;
    linear_scratch(w, x, t, y, accumulate);
}

static float d_random(int r, int b, unsigned *seed)
{
    (void)r, (void)b;
    return (float)(1 + rand_r(seed) % 16) / 64.0f;
}

/*
 * F32 products over the regrouped weights against a double-precision sum over the F32
 * copy: where AVX-512 exists gemm_few() for 1 to 3 tokens and gemm_lanes() beyond; on AVX2
 * gemm_few() for 1 to 3 tokens, gemm_lanes8() to LANES8_MAX_T and gemm_panel8() beyond
 * (400 tokens: more than one chunk of panel_tc()); elsewhere linear() takes its other
 * paths. Token counts around the 16-token tiles and the 6-token panel tiles, rows not a
 * multiple of 16 (37; 24: one token's pair of groups on AVX2, the second half-empty; 85:
 * one token's 4 groups and then 2 with AVX-512, the last one partly empty), accumulation.
 * Tolerance 1e-5 relative to the sum of |x w| terms (F32 sums of up to 192 terms here,
 * 1536 in the model). And since all these passes sum in one order, every token's row is
 * bit for bit the same in every pass.
 */
static void check_lanes(enum ggml_type type, int n)
{
    const int k = 192, most = 400;
    unsigned seed = 5;
    struct wmat w = make_qmat(type, n, k, d_random, -0.75f, &seed);
    cr_assert_eq(vnni_pack(&w), 0);
    static const int ts[] = {400, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 49, 100};
    float *x = malloc(sizeof(float) * most * k);
    float *y = malloc(sizeof(float) * most * n);
    float *all = malloc(sizeof(float) * most * n);
    for (int i = 0; i < most * k; i++)
        x[i] = (float)rand_r(&seed) / RAND_MAX * 2 - 1;
    const int same_from = f32_regrouped() ? 1 : most + 1;
    double worst = 0;
    int compared = 0;
    for (size_t a = 0; a < sizeof ts / sizeof *ts; a++)
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            const int t = ts[a];
            linear_over(&w, x, t, y, accumulate);
            if (t == most && !accumulate)
                memcpy(all, y, sizeof(float) * most * n);
            for (int i = 0; i < t; i++)
                for (int r = 0; r < n; r++) {
                    double s = accumulate ? 0.25 : 0, mag = 1e-30;
                    for (int j = 0; j < k; j++) {
                        const double p = (double)x[(size_t)i * k + j] * w.f[(size_t)r * k + j];
                        s += p;
                        mag += fabs(p);
                    }
                    const double e = fabs(y[i * n + r] - s) / mag;
                    worst = fmax(worst, e);
                    cr_assert(e < 1e-5, "%s t %d acc %d: y[%d][%d] = %.9g, want %.9g",
                              ggml_type_name(type), t, accumulate, i, r, y[i * n + r], s);
                    if (t >= same_from) {
                        const float want = accumulate ? 0.25f + all[i * n + r] : all[i * n + r];
                        cr_assert(memcmp(&y[i * n + r], &want, sizeof(float)) == 0,
                                  "%s acc %d: y[%d][%d] = %.9g in a pass of %d tokens, %.9g in "
                                  "one of %d", ggml_type_name(type), accumulate, i, r,
                                  y[i * n + r], t, want, most);
                        compared++;
                    }
                }
        }
    fprintf(stderr, "ops: %s F32 products over the regrouped weights vs double: largest "
                    "relative difference %.3g (tolerance 1e-5); %d outputs bit for bit the "
                    "same as in a pass of %d tokens\n", ggml_type_name(type), worst, compared,
            most);
    free(x);
    free(y);
    free(all);
    wmat_free(&w);
}

Test(ops, lanes_q4_1)
{
    check_lanes(GGML_Q4_1, 37);
}

Test(ops, lanes_q8_0)
{
    check_lanes(GGML_Q8_0, 37);
}

Test(ops, lanes_q4_0)
{
    check_lanes(GGML_Q4_0, 37);
}

/* 24 rows: one token's pair of groups (few_rows8()) with the second half-empty */
Test(ops, lanes_two_groups_the_second_half_empty)
{
    check_lanes(GGML_Q4_1, 24);
    check_lanes(GGML_Q8_0, 24);
}

/* with AVX-512, one token's items of 4 groups and then (few_rows()): 85 rows, 6 groups, 2
 * (the last of them 5 rows); 65 rows, 5 groups, 1 of one row */
Test(ops, lanes_items_of_four_groups_and_of_fewer)
{
    check_lanes(GGML_Q4_1, 85);
    check_lanes(GGML_Q8_0, 85);
    check_lanes(GGML_Q4_1, 65);
    check_lanes(GGML_Q8_0, 65);
}

/*
 * engine.cpu_matmul = int8 against its definition (llama.cpp's Q8_1 blocks), computed here
 * in the plainest way: each block of 32 activations rounded to q = nearest-even(x * 127 /
 * max|x|), its scale d = max|x| / 127 kept in F16, and for Q4_1 the block's sum s = d *
 * sum(q) in F16; a block's integer dot product with the weights' quantized values, times
 * both scales, plus the Q4_1 minimum times s, in double. Tolerance 1e-5 relative to the
 * sum of the terms' magnitudes (the kernel sums the blocks in F32). Token counts around
 * the 4-token tiles, rows not a multiple of 16, an all-zero block, accumulation; and every
 * token's row comes out bit-identical whatever the batch it is in.
 */
static void check_int8_kernels(enum ggml_type type, int no_vnni, float *out)
{
    const int n = 37, k = 96, nb = k / 32, T = 13;
    int8_no_vnni = no_vnni;
    unsigned seed = 11;
    struct wmat w = make_qmat(type, n, k, d_random, -0.75f, &seed); /* scales 1/64 to 1/4 */
    cr_assert_eq(vnni_pack(&w), 0);
    w.int8 = 1;
    float x[13 * 96], y[13 * 37], one[37], yf[13 * 37];
    for (int i = 0; i < T * k; i++)
        x[i] = ((float)rand_r(&seed) / RAND_MAX * 2 - 1) * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int i = 0; i < 32; i++)
        x[32 + i] = 0; /* an all-zero block: scale 0 */
    double worst = 0, worst_f32 = 0;
    static const int ts[] = {1, 2, 3, 4, 5, 7, 13};
    for (size_t a = 0; a < sizeof ts / sizeof *ts; a++)
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            const int t = ts[a];
            linear_over(&w, x, t, y, accumulate);
            for (int i = 0; i < t; i++)
                for (int r = 0; r < n; r++) {
                    double s = accumulate ? 0.25 : 0, mag = 1e-30, exact = s;
                    for (int b = 0; b < nb; b++) {
                        const float *xb = x + (size_t)i * k + 32 * b;
                        float amax = 0;
                        for (int j = 0; j < 32; j++)
                            amax = fmaxf(amax, fabsf(xb[j]));
                        const float inv = amax > 0 ? 127.0f / amax : 0.0f;
                        long isum = 0, qsum = 0;
                        for (int j = 0; j < 32; j++) {
                            const long qx = lrintf(xb[j] * inv);
                            qsum += qx;
                            const size_t at = (size_t)r * nb + b;
                            long qw = w.type == GGML_Q4_1
                                          ? (j < 16 ? w.qs[at * 16 + j] & 15
                                                    : w.qs[at * 16 + j - 16] >> 4)
                                          : (int8_t)w.qs[at * 32 + j];
                            isum += qx * qw;
                            exact += (double)xb[j] * w.f[(size_t)r * k + 32 * b + j];
                        }
                        const float d = (float)(_Float16)(amax / 127.0f);
                        const float sum = (float)(_Float16)(amax / 127.0f * (float)qsum);
                        const double blk = (double)w.qd[(size_t)r * nb + b] * d * isum +
                                           (w.qm ? w.qm[(size_t)r * nb + b] : 0) * sum;
                        s += blk;
                        mag += fabs(blk);
                    }
                    const double e = fabs(y[i * n + r] - s) / mag;
                    worst = fmax(worst, e);
                    worst_f32 = fmax(worst_f32, fabs(y[i * n + r] - exact) / mag);
                    cr_assert(e < 1e-5, "%s t %d acc %d: y[%d][%d] = %.9g, want %.9g",
                              ggml_type_name(type), t, accumulate, i, r, y[i * n + r], s);
                }
        }
    /* each token alone gives exactly its row of the 13-token batch */
    linear_scratch(&w, x, T, yf, 0);
    for (int i = 0; i < T; i++) {
        linear_scratch(&w, x + (size_t)i * k, 1, one, 0);
        cr_assert(memcmp(one, yf + (size_t)i * n, sizeof one) == 0,
                  "%s: token %d alone differs from the batch", ggml_type_name(type), i);
    }
    memcpy(out, yf, sizeof yf);
    fprintf(stderr,
            "ops: %s 8-bit products (%s) vs their definition: largest relative difference "
            "%.3g (tolerance 1e-5); vs the F32 product: %.3g\n",
            ggml_type_name(type), no_vnni ? "AVX2" : "AVX512-VNNI", worst, worst_f32);
    wmat_free(&w);
    int8_no_vnni = 0;
}

/* both kernels where they exist (AVX2 on any processor with it), and the two give the
 * same bits */
static void check_int8(enum ggml_type type)
{
    float vnni[13 * 37], avx2[13 * 37];
    if (!have_avx2())
        cr_skip_test("no AVX2 on this processor: the 8-bit products are not built");
    check_int8_kernels(type, 1, avx2);
    if (!have_vnni())
        return;
    check_int8_kernels(type, 0, vnni);
    cr_assert(memcmp(vnni, avx2, sizeof vnni) == 0, "%s: the AVX2 and VNNI kernels differ",
              ggml_type_name(type));
}

Test(ops, int8_q4_1)
{
    check_int8(GGML_Q4_1);
}

Test(ops, int8_q8_0)
{
    check_int8(GGML_Q8_0);
}

Test(ops, int8_q4_0)
{
    check_int8(GGML_Q4_0);
}
#endif
