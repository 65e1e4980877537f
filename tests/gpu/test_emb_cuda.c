/* The embedder's CUDA backend (embedder/backend_cuda.cu) against its CPU backend on the same
 * token ids of models/all-minilm-l6-v2: every embedding must have cosine >= 0.9999 with the
 * CPU's, one text per batch, 64 texts per batch and batches of uneven sizes; 256 copies of one
 * text must give 256 identical rows. Tolerance: the CUDA backend multiplies F16 weights by
 * F16 activations (F32 accumulation); the CPU is F32 throughout. Each test prints the
 * smallest cosine it saw. */
#include "emb_impl.h"
#include "embedder.h"
#include "gpu_plugin.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/all-minilm-l6-v2"
#define MIN_COSINE 0.9999
#define NTEXTS 64

static emb_model *model;
static const struct emb_backend_i *vt;
static void *ctx;
static int dim, max_tokens;

static char *texts[NTEXTS];
static size_t lens[NTEXTS];
static int32_t *ids[NTEXTS]; /* [NTEXTS][max_tokens] */
static int nids[NTEXTS];
static float *cpu; /* [NTEXTS][dim]: the CPU backend's embeddings */

static const char *const questions[] = {
    "What is the capital of France?",
    "how do I reset my password",
    "Why is the sky blue?",
    "Who wrote Pride and Prejudice?",
    "What's the difference between TCP and UDP?",
    "Can dogs eat grapes?",
    "best way to learn C programming",
    "How many ounces are in a cup?",
    "What time zone is Tokyo in?",
    "Is it safe to run a marathon with a cold?",
    "Explain quantum entanglement simply.",
    "Où se trouve la tour Eiffel ?",
    "¿Cuál es la montaña más alta del mundo?",
    "東京の人口は何人ですか",
    "convert 100 fahrenheit to celsius",
    "What does HTTP 503 mean?",
    "Recommend a book about the history of mathematics.",
    "How do vaccines train the immune system?",
    "What is a monad?",
    "weather tomorrow",
    "Python list comprehension vs generator expression",
    "How long should I boil an egg?",
    "",
    "a",
};

static const char *const sentences[] = {
    "The committee met on Tuesday to review the proposed budget for the coming fiscal year.",
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "In 1969, astronauts first set foot on the Moon during the Apollo 11 mission.",
    "A hash table offers constant expected time lookups when the load factor stays bounded.",
    "The river flooded its banks after three days of uninterrupted heavy rain.",
    "Many species of migratory birds navigate using the Earth's magnetic field.",
    "The recipe calls for two cups of flour, a pinch of salt and cold unsalted butter.",
    "Interest rates rose sharply, and mortgage applications fell to a ten-year low.",
    "She tuned the violin carefully before the evening's performance began.",
    "Garbage collectors trade throughput for shorter, more predictable pause times.",
    "The novel follows three generations of a family living on the Scottish coast.",
    "Glaciers carve U-shaped valleys as they advance and retreat over millennia.",
};

/* Deterministic texts: the questions, then passages of 1 to 40 sentences (the longest are
 * truncated to max_tokens), so the lengths run from 2 tokens to the maximum. */
static void make_texts(void)
{
    const int nq = (int)(sizeof questions / sizeof *questions);
    const int ns = (int)(sizeof sentences / sizeof *sentences);
    unsigned seed = 12345;
    for (int i = 0; i < NTEXTS; i++) {
        if (i < nq) {
            texts[i] = strdup(questions[i]);
        } else {
            int k = i % 5 == 0 ? 40 : 1 + (i * 7) % 15;
            size_t longest = 0, len = 0;
            for (int j = 0; j < ns; j++)
                longest = strlen(sentences[j]) > longest ? strlen(sentences[j]) : longest;
            texts[i] = malloc((size_t)k * (longest + 1) + 1);
            cr_assert_not_null(texts[i]);
            for (int j = 0; j < k; j++) {
                seed = seed * 1103515245u + 12345u;
                const char *s = sentences[(seed >> 16) % (unsigned)ns];
                size_t n = strlen(s);
                memcpy(texts[i] + len, s, n);
                len += n;
                texts[i][len++] = ' ';
            }
            texts[i][len] = 0;
        }
        cr_assert_not_null(texts[i]);
        lens[i] = strlen(texts[i]);
    }
}

static void setup(void)
{
    char err[512];
    const struct gw_cuda_plugin *p = gpu_plugin();
    cr_assert_not_null(p->emb_create, "the plugin was built without the embedder's backend");
    int rc = emb_model_load(MODEL, NULL, &model, err, sizeof err);
    cr_assert_eq(rc, 0, "loading %s: %s", MODEL, err);
    dim = emb_dim(model);
    max_tokens = emb_max_tokens(model);
    const struct emb_config *cfg;
    const struct emb_weights *w;
    emb_model_internals(model, &cfg, &w);
    rc = p->emb_create(cfg, w, &vt, &ctx, err, sizeof err);
    cr_assert_eq(rc, 0, "creating the CUDA backend: %s (%s)", err, emb_strerror(rc));
    cr_assert_str_eq(vt->name, "cuda");

    make_texts();
    cpu = malloc(sizeof(float) * NTEXTS * (size_t)dim);
    cr_assert_not_null(cpu);
    rc = emb_encode(model, (const char *const *)texts, lens, NTEXTS, cpu, nids);
    cr_assert_eq(rc, 0, "CPU encode: %s", emb_strerror(rc));
    for (int i = 0; i < NTEXTS; i++) {
        ids[i] = malloc(sizeof(int32_t) * (size_t)max_tokens);
        cr_assert_not_null(ids[i]);
        int n = 0;
        cr_assert_eq(emb_tokenize(model, texts[i], lens[i], ids[i], &n), 0);
        cr_assert_eq(n, nids[i]);
    }
}

static void teardown(void)
{
    if (vt)
        vt->destroy(ctx);
    vt = NULL;
    emb_model_destroy(model);
    for (int i = 0; i < NTEXTS; i++) {
        free(texts[i]);
        free(ids[i]);
    }
    free(cpu);
}

/* setup() runs in each test's body: an assertion failing in .init makes criterion
 * report a crash instead of the reason (no GPU, no plugin) */
TestSuite(emb_cuda, .fini = teardown, .timeout = 300);

/* texts[idx[0..n)] in one forward pass of the CUDA backend; out: [n][dim] */
static int cuda_embed(const int *idx, int n, float *out)
{
    int *off = malloc(sizeof(int) * (size_t)(n + 1));
    int32_t *all = malloc(sizeof(int32_t) * (size_t)n * (size_t)max_tokens);
    cr_assert(off && all);
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + off[i], ids[idx[i]], sizeof(int32_t) * (size_t)nids[idx[i]]);
        off[i + 1] = off[i] + nids[idx[i]];
    }
    struct emb_batch b = {n, all, off};
    int rc = vt->forward(ctx, &b, out);
    free(off);
    free(all);
    return rc;
}

static double cosine(const float *a, const float *b)
{
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < dim; j++) {
        ab += (double)a[j] * b[j];
        aa += (double)a[j] * a[j];
        bb += (double)b[j] * b[j];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

/* Checks out (the CUDA embeddings of texts idx[0..n)) against the CPU's; updates *worst. */
static void compare(const int *idx, int n, const float *out, double *worst, int *worst_text)
{
    for (int i = 0; i < n; i++) {
        int t = idx[i];
        double c = cosine(out + (size_t)i * dim, cpu + (size_t)t * dim);
        cr_expect(c >= MIN_COSINE, "text %d (%d tokens, \"%.40s\"): cosine %.7f < %.4f", t,
                  nids[t], texts[t], c, MIN_COSINE);
        if (c < *worst) {
            *worst = c;
            *worst_text = t;
        }
    }
}

static void report(const char *what, double worst, int t)
{
    fprintf(stderr, "%s: smallest cosine %.8f (text %d, %d tokens; tolerance %.4f)\n", what,
            worst, t, nids[t], MIN_COSINE);
}

Test(emb_cuda, lengths_cover_short_and_truncated)
{
    setup();
    int lo = max_tokens, hi = 0;
    for (int i = 0; i < NTEXTS; i++) {
        lo = nids[i] < lo ? nids[i] : lo;
        hi = nids[i] > hi ? nids[i] : hi;
    }
    fprintf(stderr, "texts: %d, from %d to %d tokens (max %d)\n", NTEXTS, lo, hi, max_tokens);
    cr_expect_eq(lo, 2, "the empty text is [CLS] [SEP]");
    cr_expect_eq(hi, max_tokens, "some passage reaches the maximum length");
}

Test(emb_cuda, batch_1)
{
    setup();
    float *out = malloc(sizeof(float) * (size_t)dim);
    double worst = 2;
    int wt = 0;
    for (int i = 0; i < NTEXTS; i++) {
        int rc = cuda_embed(&i, 1, out);
        cr_assert_eq(rc, 0, "text %d: %s", i, emb_strerror(rc));
        compare(&i, 1, out, &worst, &wt);
    }
    report("batch 1", worst, wt);
    free(out);
}

Test(emb_cuda, batch_64)
{
    setup();
    int idx[NTEXTS];
    for (int i = 0; i < NTEXTS; i++)
        idx[i] = NTEXTS - 1 - i; /* reversed, so that a row's place in the batch differs */
    float *out = malloc(sizeof(float) * NTEXTS * (size_t)dim);
    int rc = cuda_embed(idx, NTEXTS, out);
    cr_assert_eq(rc, 0, "%s", emb_strerror(rc));
    double worst = 2;
    int wt = 0;
    compare(idx, NTEXTS, out, &worst, &wt);
    report("batch 64", worst, wt);
    free(out);
}

/* batches that grow, shrink and grow again, so the scratch is reallocated and reused */
Test(emb_cuda, uneven_batches)
{
    setup();
    static const int sizes[] = {3, 17, 1, 29, 14};
    float *out = malloc(sizeof(float) * NTEXTS * (size_t)dim);
    int idx[NTEXTS];
    for (int i = 0; i < NTEXTS; i++)
        idx[i] = (i * 37) % NTEXTS; /* 37 is prime to 64: a permutation */
    double worst = 2;
    int wt = 0, at = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int rc = cuda_embed(idx + at, sizes[k], out);
        cr_assert_eq(rc, 0, "batch of %d: %s", sizes[k], emb_strerror(rc));
        compare(idx + at, sizes[k], out, &worst, &wt);
        at += sizes[k];
    }
    cr_assert_eq(at, NTEXTS);
    report("uneven batches", worst, wt);
    free(out);
}

/* Every row is computed alike, wherever it sits in the batch. Bit-identical rows are expected
 * and counted; the bound allows for a GEMM algorithm that splits the reduction differently
 * for some output tiles (stream-K), which reorders a sum but mixes no rows. */
#define SAME_ROW_TOLERANCE 1e-6f

Test(emb_cuda, identical_texts_identical_rows)
{
    setup();
    enum { N = 256 };
    const int t = NTEXTS - 3; /* a passage */
    int idx[N];
    for (int i = 0; i < N; i++)
        idx[i] = t;
    float *out = malloc(sizeof(float) * N * (size_t)dim);
    int rc = cuda_embed(idx, N, out);
    cr_assert_eq(rc, 0, "%s", emb_strerror(rc));
    float maxdiff = 0;
    int differ = 0;
    for (int i = 1; i < N; i++) {
        if (memcmp(out, out + (size_t)i * dim, sizeof(float) * (size_t)dim) != 0)
            differ++;
        for (int j = 0; j < dim; j++) {
            float d = fabsf(out[j] - out[(size_t)i * dim + j]);
            maxdiff = d > maxdiff ? d : maxdiff;
        }
    }
    fprintf(stderr,
            "256 copies of text %d (%d tokens): %d rows not bit-identical to row 0, largest "
            "difference %g (tolerance %g)\n",
            t, nids[t], differ, (double)maxdiff, (double)SAME_ROW_TOLERANCE);
    cr_expect(maxdiff <= SAME_ROW_TOLERANCE, "rows differ from row 0 by up to %g",
              (double)maxdiff);
    double worst = 2;
    int wt = 0;
    compare(idx, 1, out, &worst, &wt);
    free(out);
}

/* the CPU backend's argument checks, before the device is touched; a valid pass still works
 * afterwards */
Test(emb_cuda, bad_batches_refused)
{
    setup();
    float *out = malloc(sizeof(float) * 2 * (size_t)dim);
    const struct emb_config *cfg;
    const struct emb_weights *w;
    emb_model_internals(model, &cfg, &w);

    int32_t bad_id[3] = {101, cfg->vocab, 102};
    int off3[2] = {0, 3};
    struct emb_batch b = {1, bad_id, off3};
    cr_expect_eq(vt->forward(ctx, &b, out), EMB_EINVAL, "token id past the vocabulary");
    bad_id[1] = -1;
    cr_expect_eq(vt->forward(ctx, &b, out), EMB_EINVAL, "negative token id");

    int32_t *many = calloc((size_t)cfg->max_pos + 1, sizeof(int32_t));
    int offlong[2] = {0, cfg->max_pos + 1};
    b = (struct emb_batch){1, many, offlong};
    cr_expect_eq(vt->forward(ctx, &b, out), EMB_EINVAL, "sequence longer than max_pos");
    int offempty[3] = {0, 0, 2};
    b = (struct emb_batch){2, many, offempty};
    cr_expect_eq(vt->forward(ctx, &b, out), EMB_EINVAL, "empty sequence");
    free(many);

    int i = 0;
    cr_assert_eq(cuda_embed(&i, 1, out), 0);
    double worst = 2;
    int wt = 0;
    compare(&i, 1, out, &worst, &wt);
    free(out);
}
