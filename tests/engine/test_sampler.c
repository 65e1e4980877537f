/* tests engine/sampler.c: greedy and penalties against values worked out by hand, which
 * tokens each filter lets through (top_k, top_p, min_p; over many draws), the empirical
 * distribution against softmax (chi-square and largest difference, printed), temperature,
 * seeds, a token sequence computed outside C (golden_sequence), and the time per step on a
 * vocabulary of 150k. */
#include "backend.h"
#include "engine.h"
#include "sampler.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 200k draws: one standard error of a frequency is at most sqrt(0.25 / 2e5) = 0.0011 */
#define DRAWS 200000
#define FREQ_TOL 0.005    /* largest |empirical - expected| allowed, ~4.5 standard errors */
#define CHI2_CRIT_7 24.32 /* chi-square, 7 degrees of freedom, p = 0.001 */

/* A distribution with no ties; sorted: 3 (2.0), 6 (1.7), 0 (1.0), 7 (0.9), 1 (0.5), ... */
static const float L8[8] = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.2f, 1.7f, 0.9f};

static struct eng_sampling params(float temperature, uint64_t seed)
{
    struct eng_sampling p;
    eng_sampling_default(&p);
    p.temperature = temperature;
    p.seed = seed;
    p.has_seed = 1;
    return p;
}

static eng_sampler *make(const struct eng_sampling *p, int n_vocab)
{
    eng_sampler *s = NULL;
    cr_assert_eq(eng_sampler_create(p, n_vocab, &s), 0);
    cr_assert_not_null(s);
    return s;
}

/* Sample `draws` times from copies of logits; counts: [n]. */
static void draw(eng_sampler *s, const float *logits, int n, int draws, long *counts)
{
    float *tmp = malloc((size_t)n * sizeof *tmp);
    cr_assert_not_null(tmp);
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < draws; i++) {
        memcpy(tmp, logits, (size_t)n * sizeof *tmp);
        int32_t t = eng_sampler_sample(s, tmp);
        cr_assert(t >= 0 && t < n, "token %d", t);
        counts[t]++;
    }
    free(tmp);
}

/* A vocabulary this large takes top_p's histogram path (from 8130 tokens); a small one, the
 * direct one. */
#define PADDED 8200

/* Draws with a fresh sampler over l[0, n) followed by -inf up to PADDED tokens; counts: [n],
 * and no draw may land in the padding. */
static void draw_padded(const struct eng_sampling *p, const float *l, int n, int draws,
                        long *counts)
{
    static float big[PADDED];
    static long bigc[PADDED];
    for (int i = 0; i < PADDED; i++)
        big[i] = i < n ? l[i] : -INFINITY;
    eng_sampler *s = make(p, PADDED);
    draw(s, big, PADDED, draws, bigc);
    memcpy(counts, bigc, (size_t)n * sizeof *counts);
    eng_sampler_destroy(s);
}

/* softmax(logits / temperature) over the ids with keep[i] (all when keep is NULL). */
static void softmax_ref(const float *logits, int n, double temperature, const int *keep, double *p)
{
    double mx = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++)
        if (!keep || keep[i]) mx = fmax(mx, logits[i] / temperature);
    for (int i = 0; i < n; i++) {
        p[i] = (!keep || keep[i]) ? exp(logits[i] / temperature - mx) : 0.0;
        sum += p[i];
    }
    for (int i = 0; i < n; i++)
        p[i] /= sum;
}

/* Compares counts with p: never a draw where p is 0, frequencies within FREQ_TOL, and the
 * chi-square over the ids where p > 0 below crit (0: not checked). Prints both. */
static void check_freq(const char *what, const long *counts, const double *p, int n, long draws,
                       double crit)
{
    double maxdiff = 0.0, chi2 = 0.0;
    char buf[32];
    snprintf(buf, sizeof buf, "%.2f", crit);
    for (int i = 0; i < n; i++) {
        if (p[i] == 0.0) {
            cr_assert_eq(counts[i], 0, "%s: token %d drawn %ld times", what, i, counts[i]);
            continue;
        }
        double f = (double)counts[i] / (double)draws, e = p[i] * (double)draws;
        maxdiff = fmax(maxdiff, fabs(f - p[i]));
        chi2 += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
    }
    printf("sampler %-22s max |freq - p| = %.5f (tol %.3f), chi2 = %7.2f (crit %s)\n", what,
           maxdiff, FREQ_TOL, chi2, crit > 0.0 ? buf : "not checked");
    cr_assert_lt(maxdiff, FREQ_TOL, "%s: max diff %g", what, maxdiff);
    if (crit > 0.0) cr_assert_lt(chi2, crit, "%s: chi2 %g", what, chi2);
}

Test(sampler, invalid_parameters)
{
    struct eng_sampling ok = params(1.0f, 1), p;
    eng_sampler *s = (eng_sampler *)&ok; /* must come back NULL */
#define BAD(field, value)                                                                          \
    do {                                                                                           \
        p = ok;                                                                                    \
        p.field = value;                                                                           \
        cr_assert_eq(eng_sampling_check(&p), ENG_EINVAL, #field " = " #value);                     \
        cr_assert_eq(eng_sampler_create(&p, 10, &s), ENG_EINVAL, #field " = " #value);             \
        cr_assert_null(s);                                                                         \
    } while (0)
    BAD(temperature, -0.01f);
    BAD(temperature, 2.01f);
    BAD(temperature, NAN);
    BAD(top_p, 0.0f);
    BAD(top_p, 1.0001f);
    BAD(top_p, NAN);
    BAD(top_k, -1);
    BAD(min_p, -0.1f);
    BAD(min_p, 1.1f);
    BAD(presence_penalty, 2.1f);
    BAD(presence_penalty, -2.1f);
    BAD(frequency_penalty, 2.1f);
    BAD(frequency_penalty, -2.1f);
    BAD(frequency_penalty, NAN);
    BAD(n_logit_bias, -1);
    BAD(n_logit_bias, 1); /* with no array */
    BAD(n_logit_bias, ENG_MAX_LOGIT_BIAS + 1);
#undef BAD
    const struct eng_logit_bias too_big[1] = {{2, 100.5f}}, not_a_number[1] = {{2, NAN}},
                                negative_id[1] = {{-1, 1.0f}}, beyond_vocab[1] = {{10, 1.0f}};
    const struct eng_logit_bias *bad_bias[4] = {too_big, not_a_number, negative_id,
                                                beyond_vocab};
    for (int i = 0; i < 4; i++) {
        p = ok;
        p.logit_bias = bad_bias[i];
        p.n_logit_bias = 1;
        cr_assert_eq(eng_sampler_create(&p, 10, &s), ENG_EINVAL, "bias %d", i);
        cr_assert_null(s);
        cr_assert_eq(eng_sampling_check(&p), i < 3 ? ENG_EINVAL : 0, "bias %d", i);
    }
    cr_assert_eq(eng_sampler_create(&ok, 0, &s), ENG_EINVAL);
    cr_assert_eq(eng_sampler_create(NULL, 10, &s), ENG_EINVAL);
    cr_assert_eq(eng_sampler_create(&ok, 10, NULL), ENG_EINVAL);
    cr_assert_eq(eng_sampling_check(NULL), ENG_EINVAL);

    /* the ends of every range are valid */
    p = ok;
    p.temperature = 2.0f;
    p.top_p = 1.0f;
    p.top_k = 0;
    p.min_p = 1.0f;
    p.presence_penalty = -2.0f;
    p.frequency_penalty = 2.0f;
    cr_assert_eq(eng_sampling_check(&p), 0);
    p.temperature = 0.0f;
    p.top_p = 1e-6f;
    p.min_p = 0.0f;
    p.presence_penalty = 2.0f;
    p.frequency_penalty = -2.0f;
    cr_assert_eq(eng_sampler_create(&p, 1, &s), 0);
    cr_assert_eq(eng_sampler_accept(s, 1), ENG_EINVAL);
    cr_assert_eq(eng_sampler_accept(s, -1), ENG_EINVAL);
    cr_assert_eq(eng_sampler_sample(s, NULL), ENG_EINVAL);
    cr_assert_eq(eng_sampler_sample(NULL, (float[1]){0}), ENG_EINVAL);
    eng_sampler_destroy(s);
    eng_sampler_destroy(NULL);
}

Test(sampler, greedy_argmax_lowest_id_on_ties)
{
    struct eng_sampling p = params(0.0f, 0);
    p.has_seed = 0; /* greedy needs no randomness */
    eng_sampler *s = make(&p, 6);
    float l[6] = {0.5f, 3.0f, -1.0f, 3.0f, NAN, 2.0f};
    cr_assert_eq(eng_sampler_sample(s, l), 1);
    float m[6] = {-INFINITY, -INFINITY, 7.0f, -INFINITY, 7.0f, NAN};
    cr_assert_eq(eng_sampler_sample(s, m), 2);
    float all_masked[6] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    cr_assert_eq(eng_sampler_sample(s, all_masked), 0);
    eng_sampler_destroy(s);
}

Test(sampler, penalties_by_hand)
{
    struct eng_sampling p = params(0.0f, 0);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.4f;
    eng_sampler *s = make(&p, 4);
    const float base[4] = {1.0f, 2.0f, 1.5f, 0.2f};
    float l[4];

    memcpy(l, base, sizeof l);
    cr_assert_eq(eng_sampler_sample(s, l), 1); /* nothing accepted yet */
    cr_assert_eq(memcmp(l, base, sizeof l), 0);

    cr_assert_eq(eng_sampler_accept(s, 1), 0);
    cr_assert_eq(eng_sampler_accept(s, 1), 0);
    cr_assert_eq(eng_sampler_accept(s, 3), 0);
    memcpy(l, base, sizeof l);
    /* 1: 2.0 - 0.5 - 2 * 0.4 = 0.7;  3: 0.2 - 0.5 - 0.4 = -0.7;  so 2 (1.5) wins */
    cr_assert_eq(eng_sampler_sample(s, l), 2);
    cr_assert_float_eq(l[1], 0.7f, 1e-6f);
    cr_assert_float_eq(l[3], -0.7f, 1e-6f);
    cr_assert(l[0] == 1.0f && l[2] == 1.5f);

    eng_sampler_reset(s);
    memcpy(l, base, sizeof l);
    cr_assert_eq(eng_sampler_sample(s, l), 1);
    cr_assert_eq(memcmp(l, base, sizeof l), 0);
    eng_sampler_destroy(s);

    /* frequency alone: the count matters. 1: 2.0 - 0.3 = 1.7 > 1.5, then 2.0 - 0.6 = 1.4 */
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.3f;
    s = make(&p, 4);
    eng_sampler_accept(s, 1);
    memcpy(l, base, sizeof l);
    cr_assert_eq(eng_sampler_sample(s, l), 1);
    eng_sampler_accept(s, 1);
    memcpy(l, base, sizeof l);
    cr_assert_eq(eng_sampler_sample(s, l), 2);
    eng_sampler_destroy(s);

    /* a negative presence penalty raises 0 to 1.0 + 1.0 = 2.0, tying 1: the lower id wins */
    p.presence_penalty = -1.0f;
    p.frequency_penalty = 0.0f;
    s = make(&p, 4);
    eng_sampler_accept(s, 0);
    eng_sampler_accept(s, 0);
    memcpy(l, base, sizeof l);
    cr_assert_eq(eng_sampler_sample(s, l), 0);
    cr_assert_eq(l[0], 2.0f);
    eng_sampler_destroy(s);
}

Test(sampler, logit_bias_by_hand)
{
    /* L8 sorted: 3 (2.0), 6 (1.7), 0 (1.0), ... */
    struct eng_logit_bias bias[3] = {{3, -100.0f}, {6, -0.5f}, {5, 3.0f}};
    struct eng_sampling p = params(0.0f, 0);
    p.logit_bias = bias;
    p.n_logit_bias = 3;
    eng_sampler *s = make(&p, 8);
    bias[2].bias = -100.0f; /* the sampler took a copy */
    float l[8];
    memcpy(l, L8, sizeof l);
    /* 3: -98, 6: 1.2, 5: -1.2 + 3 = 1.8: 5 wins */
    cr_assert_eq(eng_sampler_sample(s, l), 5);
    cr_assert_float_eq(l[3], -98.0f, 1e-5f);
    cr_assert_float_eq(l[6], 1.2f, 1e-6f);
    cr_assert_float_eq(l[5], 1.8f, 1e-6f);
    cr_assert(l[0] == 1.0f && l[7] == 0.9f);
    /* a device sampler is given the biases as amounts to add, in their order */
    struct eng_sample_row row;
    struct eng_logit_adj adj[8];
    cr_assert_eq(eng_sampler_device_adj(s), 3);
    eng_sampler_device_row(s, &row, adj);
    cr_assert_eq(row.n_adj, 3);
    cr_assert(adj[0].token == 3 && adj[0].add == -100.0f && adj[1].token == 6 &&
              adj[1].add == -0.5f && adj[2].token == 5 && adj[2].add == 3.0f);
    /* biases and penalties add up: after accepting 5 twice, 5 is 1.8 - 0.5 - 2 * 0.4 = 0.5 */
    eng_sampler_destroy(s);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.4f;
    bias[2].bias = 3.0f;
    s = make(&p, 8);
    eng_sampler_accept(s, 5);
    eng_sampler_accept(s, 5);
    eng_sampler_accept(s, 0);
    memcpy(l, L8, sizeof l);
    cr_assert_eq(eng_sampler_sample(s, l), 6);
    cr_assert_float_eq(l[5], 0.5f, 1e-6f);
    /* the device's amounts: the biases, then minus each accepted token's penalty; added one
     * by one they give the CPU sampler's logits bit for bit */
    cr_assert_eq(eng_sampler_device_adj(s), 5);
    eng_sampler_device_row(s, &row, adj);
    cr_assert_eq(row.n_adj, 5);
    cr_assert(adj[3].token == 5 && adj[3].add == -(0.5f + 0.4f * 2.0f));
    cr_assert(adj[4].token == 0 && adj[4].add == -(0.5f + 0.4f * 1.0f));
    float by_amounts[8];
    memcpy(by_amounts, L8, sizeof by_amounts);
    for (int i = 0; i < row.n_adj; i++)
        by_amounts[adj[i].token] += adj[i].add;
    cr_assert_eq(memcmp(by_amounts, l, sizeof l), 0);
    /* and the row carries the filters */
    eng_sampler_destroy(s);
    p.min_p = 0.1f;
    p.top_k = 5;
    p.top_p = 0.9f;
    s = make(&p, 8);
    eng_sampler_device_row(s, &row, adj);
    cr_assert(row.min_p == 0.1f && row.top_k == 5 && row.top_p == 0.9f);
    eng_sampler_destroy(s);

    /* sampled: a banned token is never drawn, the rest keep softmax's proportions */
    struct eng_logit_bias ban[1] = {{3, -100.0f}};
    p = params(1.0f, 7);
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    s = make(&p, 8);
    long counts[8];
    double want[8];
    float biased[8];
    memcpy(biased, L8, sizeof biased);
    biased[3] -= 100.0f;
    draw(s, L8, 8, DRAWS, counts);
    softmax_ref(biased, 8, 1.0, NULL, want);
    cr_assert_eq(counts[3], 0);
    check_freq("token 3 banned", counts, want, 8, DRAWS, CHI2_CRIT_7);
    eng_sampler_destroy(s);
}

Test(sampler, top_k_1_is_greedy)
{
    enum { N = 5000, ROUNDS = 200 };
    struct eng_sampling pk = params(0.7f, 7), pg = params(0.0f, 0);
    pk.top_k = 1;
    eng_sampler *sk = make(&pk, N), *sg = make(&pg, N);
    static float a[N], b[N];
    srand(1);
    for (int r = 0; r < ROUNDS; r++) {
        int32_t want = 0;
        for (int i = 0; i < N; i++) {
            a[i] = (float)(rand() % 60) / 10.0f; /* coarse: the maximum is shared */
            if (a[i] > a[want]) want = i;
        }
        memcpy(b, a, sizeof a);
        cr_assert_eq(eng_sampler_sample(sg, b), want);
        memcpy(b, a, sizeof a);
        cr_assert_eq(eng_sampler_sample(sk, b), want, "round %d", r);
    }
    eng_sampler_destroy(sk);
    eng_sampler_destroy(sg);
}

Test(sampler, distribution_matches_softmax)
{
    struct eng_sampling p = params(1.0f, 42);
    eng_sampler *s = make(&p, 8);
    long counts[8];
    double want[8];
    draw(s, L8, 8, DRAWS, counts);
    softmax_ref(L8, 8, 1.0, NULL, want);
    check_freq("T=1", counts, want, 8, DRAWS, CHI2_CRIT_7);
    eng_sampler_destroy(s);
}

Test(sampler, temperature_scales_logits)
{
    double p1[8], pt[8];
    long counts[8];
    softmax_ref(L8, 8, 1.0, NULL, p1);
    const float temps[2] = {0.5f, 1.8f};
    for (int k = 0; k < 2; k++) {
        struct eng_sampling p = params(temps[k], 100 + (uint64_t)k);
        eng_sampler *s = make(&p, 8);
        draw(s, L8, 8, DRAWS, counts);
        softmax_ref(L8, 8, temps[k], NULL, pt);
        /* the check means something: token 3 moves by more than 0.1 from T = 1 */
        cr_assert_gt(fabs(pt[3] - p1[3]), 0.1);
        cr_assert_gt(fabs((double)counts[3] / DRAWS - p1[3]), 0.1);
        check_freq(temps[k] < 1.0f ? "T=0.5" : "T=1.8", counts, pt, 8, DRAWS, CHI2_CRIT_7);
        eng_sampler_destroy(s);
    }
}

Test(sampler, top_k)
{
    long counts[8];
    double want[8];
    struct eng_sampling p = params(1.0f, 5);
    p.top_k = 3;
    eng_sampler *s = make(&p, 8);
    draw(s, L8, 8, DRAWS, counts);
    softmax_ref(L8, 8, 1.0, (const int[8]){[3] = 1, [6] = 1, [0] = 1}, want);
    check_freq("top_k=3", counts, want, 8, DRAWS, 13.82 /* 2 dof, p = 0.001 */);
    eng_sampler_destroy(s);

    p.top_k = 8; /* no smaller than the vocabulary: no filter */
    s = make(&p, 8);
    draw(s, L8, 8, DRAWS, counts);
    softmax_ref(L8, 8, 1.0, NULL, want);
    check_freq("top_k=8", counts, want, 8, DRAWS, CHI2_CRIT_7);
    eng_sampler_destroy(s);
}

/* Probabilities 0.4, 0.3, 0.2, 0.1 at ids 2, 0, 3, 1; id 4 masked. */
static void probs_4321(float *l)
{
    l[0] = logf(0.3f);
    l[1] = logf(0.1f);
    l[2] = logf(0.4f);
    l[3] = logf(0.2f);
    l[4] = -INFINITY;
}

Test(sampler, top_p_keeps_smallest_prefix)
{
    float l[5];
    long counts[5];
    double want[5];
    probs_4321(l);
    static const struct {
        float top_p;
        int keep[5];
        const char *name;
    } cases[] = {
        {0.35f, {0, 0, 1, 0, 0}, "top_p=0.35 {2}"},       /* 0.4 >= 0.35 */
        {0.65f, {1, 0, 1, 0, 0}, "top_p=0.65 {2,0}"},     /* 0.4 < 0.65 <= 0.7 */
        {0.75f, {1, 0, 1, 1, 0}, "top_p=0.75 {2,0,3}"},   /* 0.7 < 0.75 <= 0.9 */
        {0.95f, {1, 1, 1, 1, 0}, "top_p=0.95 {2,0,3,1}"}, /* 0.9 < 0.95 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct eng_sampling p = params(1.0f, 11 + c);
        p.top_p = cases[c].top_p;
        eng_sampler *s = make(&p, 5);
        draw(s, l, 5, DRAWS / 4, counts);
        double q[5] = {0.3, 0.1, 0.4, 0.2, 0.0}, sum = 0.0;
        for (int i = 0; i < 5; i++)
            sum += cases[c].keep[i] ? q[i] : 0.0;
        for (int i = 0; i < 5; i++) {
            want[i] = cases[c].keep[i] ? q[i] / sum : 0.0;
            cr_assert_eq(counts[i] > 0, cases[c].keep[i] != 0, "%s: token %d", cases[c].name, i);
        }
        check_freq(cases[c].name, counts, want, 5, DRAWS / 4, 0.0);
        eng_sampler_destroy(s);
        draw_padded(&p, l, 5, 600, counts); /* the same set through the histogram */
        for (int i = 0; i < 5; i++)
            cr_assert_eq(counts[i] > 0, cases[c].keep[i] != 0, "%s, padded: token %d",
                         cases[c].name, i);
    }
}

Test(sampler, top_p_exact_boundary_and_ties)
{
    /* four equal weights of exactly 1: after two the mass is exactly 0.5, which reaches
     * top_p = 0.5; ties go to the lower ids. A hair more than 0.5 takes a third token. */
    const float l[4] = {3.0f, 3.0f, 3.0f, 3.0f};
    const float top_ps[2] = {0.5f, nextafterf(0.5f, 1.0f)};
    long counts[4];
    for (int t = 0; t < 2; t++) {
        struct eng_sampling p = params(1.0f, 3);
        p.top_p = top_ps[t];
        eng_sampler *s = make(&p, 4);
        draw(s, l, 4, 4000, counts);
        cr_assert(counts[0] > 0 && counts[1] > 0 && (counts[2] > 0) == (t == 1) && counts[3] == 0,
                  "top_p %.9g: %ld %ld %ld %ld", top_ps[t], counts[0], counts[1], counts[2],
                  counts[3]);
        eng_sampler_destroy(s);
        draw_padded(&p, l, 4, 600, counts);
        cr_assert(counts[0] > 0 && counts[1] > 0 && (counts[2] > 0) == (t == 1) && counts[3] == 0,
                  "top_p %.9g, padded: %ld %ld %ld %ld", top_ps[t], counts[0], counts[1], counts[2],
                  counts[3]);
    }
}

/* Weights are exp computed in float: with logits {0, -d}, token 0 has mass 1 / (1 + e^-d);
 * top_p a hair (2e-7, relative) under it keeps token 0 alone, a hair over it keeps both.
 * float top_p rounds by 3e-8 and the weights' error (8e-8) moves the mass by 4e-8 at most,
 * so this checks the weights to about 3e-7. */
Test(sampler, top_p_boundary_precision)
{
    static const double ds[] = {0.05, 0.3, 1.0, 2.5, 5.0};
    static const char *const paths[3] = {"dense", "top_k", "histogram"};
    long counts[3];
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) {
        const float l[3] = {0.0f, (float)-ds[i], -INFINITY};
        double p0 = 1.0 / (1.0 + exp((double)l[1]));
        int draws = (int)(30.0 / (1.0 - p0)); /* when kept, token 1 comes up ~30 times */
        for (int path = 0; path < 3; path++) {
            for (int over = 0; over < 2; over++) {
                struct eng_sampling p = params(1.0f, 40 + i);
                p.top_k = path == 1 ? 2 : 0; /* 2 of 3: the candidates' path */
                p.top_p = (float)(p0 * (over ? 1.0 + 2e-7 : 1.0 - 2e-7));
                if (path == 2) {
                    if (ds[i] > 3.0) continue; /* slow over 8200 tokens, and no news */
                    draw_padded(&p, l, 3, draws, counts);
                } else {
                    eng_sampler *s = make(&p, 3);
                    draw(s, l, 3, draws, counts);
                    eng_sampler_destroy(s);
                }
                cr_assert_eq(counts[1] > 0, over, "%s, d = %g, top_p just %s p0: token 1 %s",
                             paths[path], ds[i], over ? "over" : "under",
                             over ? "never drawn" : "drawn");
            }
        }
    }
}

struct ranked {
    double v;
    int id;
};

static int cmp_ranked(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id - y->id;
}

/* 300 live tokens with nearly equal logits among n_vocab - 300 at about -35: top_p is set
 * halfway between the masses of the best KEEP - 1 and KEEP (computed here in double, with
 * a full sort), so the sampler must keep exactly those KEEP tokens; that takes it past its
 * first chunk of 64. Over DRAWS_BIG draws every kept token comes up (each has p ~ 1/KEEP;
 * the chance that one is missed is below 1e-6) and nothing else. */
#define KEEP 150
#define DRAWS_BIG 3500
Test(sampler, top_p_large_vocab_exact_set)
{
    enum { N = 20000 };
    static float l[N];
    static struct ranked r[N];
    static long counts[N];
    static int keep[N];
    uint64_t x = 99;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        l[i] = -35.0f + (float)(x >> 40) / (float)(1u << 24);
    }
    for (int j = 0; j < 300; j++)
        l[(j * 7919) % N] = 1.9f + 0.1f * (float)j / 300.0f;
    double mx = -INFINITY, sum = 0.0;
    for (int i = 0; i < N; i++)
        mx = fmax(mx, l[i]);
    for (int i = 0; i < N; i++) {
        r[i] = (struct ranked){exp(l[i] - mx), i};
        sum += r[i].v;
    }
    qsort(r, N, sizeof *r, cmp_ranked);
    double cum = 0.0, top_p = 0.0;
    for (int i = 0; i < KEEP; i++) { /* between the mass of KEEP - 1 tokens and KEEP */
        double before = cum;
        cum += r[i].v / sum;
        keep[r[i].id] = 1;
        if (i == KEEP - 1) top_p = 0.5 * (before + cum);
    }
    struct eng_sampling p = params(1.0f, 2024);
    p.top_p = (float)top_p;
    eng_sampler *s = make(&p, N);
    draw(s, l, N, DRAWS_BIG, counts);
    int kept = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(counts[i] > 0, keep[i], "token %d: drawn %ld, kept %d", i, counts[i], keep[i]);
        kept += counts[i] > 0;
    }
    printf("sampler top_p=%.6f on %d tokens: %d distinct drawn of %d kept\n", top_p, N, kept, KEEP);
    eng_sampler_destroy(s);
}

/* chi-square critical value for df degrees of freedom at p = 0.001 (Wilson-Hilferty). */
static double chi2_crit(int df)
{
    double a = 2.0 / (9.0 * df), t = 1.0 - a + 3.0902 * sqrt(a);
    return df * t * t * t;
}

/* 400 tokens: the draw walks two blocks of 256 weights, and top_p = 0.9 keeps hundreds of
 * tokens (the prefix found here by a full sort in double; top_p is placed halfway between
 * two prefix masses). Chi-square over the kept tokens, and nothing else drawn. */
Test(sampler, distribution_large_vocab)
{
    enum { N = 400, DRAWS_LV = 100000 };
    static float l[N];
    static struct ranked r[N];
    static long counts[N];
    static double want[N];
    static int keep[N];
    for (int i = 0; i < N; i++)
        l[i] = 1.5f * sinf(0.7f * (float)i);
    for (int pass = 0; pass < 2; pass++) {
        float top_p = 1.0f;
        if (pass == 1) {
            double mx = -INFINITY, sum = 0.0, cum = 0.0;
            for (int i = 0; i < N; i++)
                mx = fmax(mx, l[i]);
            for (int i = 0; i < N; i++) {
                r[i] = (struct ranked){exp(l[i] - mx), i};
                sum += r[i].v;
            }
            qsort(r, N, sizeof *r, cmp_ranked);
            int k = 0;
            while (cum + r[k].v / sum < 0.9) /* the prefix that reaches 0.9 ... */
                cum += r[k++].v / sum;
            top_p = (float)(cum + 0.5 * r[k].v / sum); /* ... ends at r[k], split halfway */
            memset(keep, 0, sizeof keep);
            for (int j = 0; j <= k; j++)
                keep[r[j].id] = 1;
        }
        struct eng_sampling p = params(1.0f, 500 + (uint64_t)pass);
        p.top_p = top_p;
        eng_sampler *s = make(&p, N);
        draw(s, l, N, DRAWS_LV, counts);
        softmax_ref(l, N, 1.0, pass ? keep : NULL, want);
        int kept = 0;
        for (int i = 0; i < N; i++)
            kept += want[i] > 0.0;
        char name[32];
        snprintf(name, sizeof name, "N=400 top_p=%.4f", top_p);
        check_freq(name, counts, want, N, DRAWS_LV, chi2_crit(kept - 1));
        eng_sampler_destroy(s);
    }
}

Test(sampler, min_p)
{
    /* p = 0.5, 0.25, 0.15, 0.1 (ids 0..3): min_p * 0.5 is the floor */
    const float l[4] = {logf(0.5f), logf(0.25f), logf(0.15f), logf(0.1f)};
    long counts[4];
    double want[4];
    static const struct {
        float min_p;
        int keep[4];
        const char *name;
    } cases[] = {
        {0.25f, {1, 1, 1, 0}, "min_p=0.25 {0,1,2}"}, /* floor 0.125: 0.1 goes */
        {0.4f, {1, 1, 0, 0}, "min_p=0.4 {0,1}"},     /* floor 0.2: 0.15 goes */
        {1.0f, {1, 0, 0, 0}, "min_p=1 {0}"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct eng_sampling p = params(1.0f, 21 + c);
        p.min_p = cases[c].min_p;
        eng_sampler *s = make(&p, 4);
        draw(s, l, 4, DRAWS / 4, counts);
        softmax_ref(l, 4, 1.0, cases[c].keep, want);
        check_freq(cases[c].name, counts, want, 4, DRAWS / 4, 0.0);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(counts[i] > 0, cases[c].keep[i] != 0, "%s: %d", cases[c].name, i);
        eng_sampler_destroy(s);
    }
    /* exactly at the floor stays: two tokens tie for the top, both with weight 1 */
    const float tie[3] = {2.0f, 2.0f, 1.9f};
    struct eng_sampling p = params(1.0f, 29);
    p.min_p = 1.0f;
    eng_sampler *s = make(&p, 3);
    long tc[3];
    draw(s, tie, 3, 4000, tc);
    cr_assert(tc[0] > 0 && tc[1] > 0 && tc[2] == 0, "%ld %ld %ld", tc[0], tc[1], tc[2]);
    eng_sampler_destroy(s);
}

Test(sampler, filters_in_order)
{
    /* top_k = 5 leaves 3, 6, 0, 7, 1 with weights exp(v - 2) = 1, 0.741, 0.368, 0.333,
     * 0.223 (sum 2.665): p = 0.375, 0.278, 0.138, 0.125, 0.084; mass 0.791 after three,
     * 0.916 after four, so top_p = 0.8 keeps four; min_p = 0.35 then drops 7 (0.333) */
    long counts[8];
    double want[8];
    struct eng_sampling p = params(1.0f, 77);
    p.top_k = 5;
    p.top_p = 0.8f;
    p.min_p = 0.35f;
    eng_sampler *s = make(&p, 8);
    draw(s, L8, 8, DRAWS, counts);
    softmax_ref(L8, 8, 1.0, (const int[8]){[3] = 1, [6] = 1, [0] = 1}, want);
    check_freq("k=5 p=0.8 min_p=0.35", counts, want, 8, DRAWS, 13.82);
    eng_sampler_destroy(s);
}

Test(sampler, masked_tokens_never_drawn)
{
    const float l[6] = {-INFINITY, 0.0f, NAN, 0.0f, -INFINITY, -50.0f};
    long counts[6];
    struct eng_sampling p = params(1.0f, 8);
    eng_sampler *s = make(&p, 6);
    draw(s, l, 6, 10000, counts);
    cr_assert(counts[0] == 0 && counts[2] == 0 && counts[4] == 0);
    cr_assert(counts[1] > 4000 && counts[3] > 4000);
    const float inf[6] = {0.0f, INFINITY, 0.0f, INFINITY, 0.0f, 0.0f};
    draw(s, inf, 6, 100, counts);
    cr_assert_eq(counts[1], 100);
    eng_sampler_destroy(s);
}

/* With eight equal logits the weights are all exactly 1, so the token is floor(8 u) =
 * x >> 61 for each xoshiro256** output x. The expected tokens come from a separate
 * Python model of splitmix64 seeding and xoshiro256** (seed 12345), whose splitmix64 gives
 * the published first output 0xe220a8397b1dcdaf for seed 0. */
Test(sampler, golden_sequence)
{
    static const int32_t want[24] = {5, 1, 7, 0, 4, 0, 1, 2, 3, 7, 6, 4,
                                     6, 7, 1, 6, 3, 6, 4, 3, 0, 2, 1, 2};
    const float l[8] = {0};
    struct eng_sampling p = params(1.0f, 12345);
    eng_sampler *s = make(&p, 8);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 24; i++) {
            float tmp[8];
            memcpy(tmp, l, sizeof tmp);
            cr_assert_eq(eng_sampler_sample(s, tmp), want[i], "pass %d step %d", pass, i);
        }
        eng_sampler_reset(s); /* with a seed, the stream starts over */
    }
    eng_sampler_destroy(s);
}

static void sequence(eng_sampler *s, int32_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        float tmp[8];
        memcpy(tmp, L8, sizeof tmp);
        out[i] = eng_sampler_sample(s, tmp);
        eng_sampler_accept(s, out[i]);
    }
}

Test(sampler, seeds)
{
    enum { N = 1000 };
    static int32_t a[N], b[N], c[N];
    struct eng_sampling p = params(1.3f, 31337);
    p.top_p = 0.9f;
    p.frequency_penalty = 0.2f;
    eng_sampler *s1 = make(&p, 8), *s2 = make(&p, 8);
    sequence(s1, a, N);
    sequence(s2, b, N);
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "same seed, same tokens");
    eng_sampler_reset(s1);
    sequence(s1, c, N);
    cr_assert_eq(memcmp(a, c, sizeof a), 0, "reset replays the seed");
    eng_sampler_destroy(s1);
    eng_sampler_destroy(s2);

    p.seed = 31338;
    s1 = make(&p, 8);
    sequence(s1, b, N);
    cr_assert_neq(memcmp(a, b, sizeof a), 0, "another seed, other tokens");
    eng_sampler_destroy(s1);

    p.has_seed = 0; /* getrandom(): two samplers agreeing on 1000 draws would be a bug */
    s1 = make(&p, 8);
    s2 = make(&p, 8);
    sequence(s1, a, N);
    sequence(s2, b, N);
    cr_assert_neq(memcmp(a, b, sizeof a), 0);
    eng_sampler_destroy(s1);
    eng_sampler_destroy(s2);
}

/* A vocabulary of 150k: the filtered draws stay inside the top 40 found by a full sort,
 * and the time per step is printed. */
Test(sampler, large_vocab_steps)
{
    enum { N = 150000, STEPS = 40 };
    static float l[N], tmp[N];
    static struct ranked r[N];
    static int in_top[N];
    uint64_t x = 5;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        l[i] = 8.0f * (float)(x >> 40) / (float)(1u << 24); /* logits in [0, 8) */
        r[i] = (struct ranked){l[i], i};
    }
    qsort(r, N, sizeof *r, cmp_ranked);
    for (int i = 0; i < 40; i++)
        in_top[r[i].id] = 1;
    static const struct {
        int top_k;
        float top_p, min_p;
        const char *name;
    } modes[] = {
        {0, 1.0f, 0.0f, "no filter"},
        {40, 1.0f, 0.0f, "top_k=40"},
        {0, 0.95f, 0.0f, "top_p=0.95"},
        {40, 0.9f, 0.05f, "top_k=40 top_p=0.9 min_p"},
    };
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        struct eng_sampling p = params(0.8f, 1 + m);
        p.top_k = modes[m].top_k;
        p.top_p = modes[m].top_p;
        p.min_p = modes[m].min_p;
        eng_sampler *s = make(&p, N);
        struct timespec t0, t1;
        double secs = 0.0;
        for (int i = 0; i < STEPS; i++) {
            memcpy(tmp, l, sizeof l);
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int32_t t = eng_sampler_sample(s, tmp);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            secs += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            cr_assert(t >= 0 && t < N);
            if (p.top_k) cr_assert(in_top[t], "%s: token %d outside the top 40", modes[m].name, t);
        }
        printf("sampler %d tokens, %-26s %8.1f us/step\n", N, modes[m].name, 1e6 * secs / STEPS);
        eng_sampler_destroy(s);
    }
}
