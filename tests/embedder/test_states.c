/* emb_token_states(): the hidden states it gives are the encoder's own. Mean-pooled and
 * normalised, the last layer's are emb_encode()'s embedding (1e-6); the embeddings' layer
 * (0) is word + position + type embedding through their LayerNorm, computed here from the
 * weights (1e-5); a long text keeps its end as emb_encode_ends() keeps it. The states
 * themselves are held to an independent numpy encoder through the judge's features
 * (tests/gateway/test_judge.c). emb_encode_keep() gives emb_encode_ends()'s embeddings bit
 * for bit and emb_token_states()'s states of the same pass, bit for bit. */
#include "emb_impl.h"
#include "embedder.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/all-minilm-l6-v2"

static emb_model *model;

static void setup(void)
{
    char err[512];
    cr_assert_eq(emb_model_load(MODEL, NULL, &model, err, sizeof err), 0, "%s: %s", MODEL, err);
}

static void teardown(void)
{
    emb_model_destroy(model);
}

TestSuite(states, .init = setup, .fini = teardown, .timeout = 120);

/* emb_token_states() of one text; *n its tokens */
static int states_one(emb_model *m, const char *text, size_t len, int nlayers,
                      const int *layers, float *out, int32_t *ids, int *n)
{
    int off[2] = {0, 0};
    int rc = emb_token_states(m, &text, &len, 1, nlayers, layers, out, ids, off);
    *n = off[1];
    return rc;
}

/* states of layers 0 and the last for text; *n tokens */
static float *states_of(const char *text, int *n, int32_t *ids)
{
    const int dim = emb_dim(model), cap = emb_max_tokens(model);
    int layers[2] = {0, emb_layers(model)};
    float *s = malloc(sizeof(float) * 2 * (size_t)cap * dim);
    cr_assert_not_null(s);
    cr_assert_eq(states_one(model, text, strlen(text), 2, layers, s, ids, n), 0);
    return s;
}

static void pooled_equals_encode(const char *text)
{
    const int dim = emb_dim(model);
    int n = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)emb_max_tokens(model));
    float *s = states_of(text, &n, ids);
    float *want = malloc(sizeof(float) * dim);
    const char *texts[1] = {text};
    size_t lens[1] = {strlen(text)};
    unsigned char ends[1] = {1};
    int ntok = 0;
    cr_assert_eq(emb_encode_ends(model, texts, lens, ends, 1, want, &ntok, NULL), 0);
    cr_assert_eq(n, ntok, "%d tokens, emb_encode_ends() %d", n, ntok);
    const float *last = s + (size_t)n * dim;
    double norm = 0;
    double *pool = calloc((size_t)dim, sizeof *pool);
    for (int j = 0; j < dim; j++) {
        for (int t = 0; t < n; t++)
            pool[j] += last[(size_t)t * dim + j];
        norm += pool[j] * pool[j];
    }
    for (int j = 0; j < dim; j++)
        cr_assert_float_eq(pool[j] / sqrt(norm), want[j], 1e-6, "dim %d", j);
    free(pool);
    free(want);
    free(s);
    free(ids);
}

Test(states, last_layer_pools_to_the_embedding)
{
    pooled_equals_encode("How do I reverse a list in Python?");
    pooled_equals_encode("?!");
}

Test(states, long_text_keeps_its_end)
{
    char text[8192] = "";
    for (int i = 0; i < 300; i++)
        strcat(text, "word ");
    strcat(text, "and at last the question: what is the capital of France?");
    pooled_equals_encode(text);
}

Test(states, layer_zero_is_the_embeddings)
{
    const struct emb_config *cfg;
    const struct emb_weights *w;
    emb_model_internals(model, &cfg, &w);
    const int H = cfg->hidden;
    int n = 0;
    int32_t ids[512];
    float *s = states_of("The café is closed.", &n, ids);
    for (int t = 0; t < n; t++) {
        double x[1024], mean = 0, var = 0;
        for (int j = 0; j < H; j++) {
            x[j] = (double)w->word[(size_t)ids[t] * H + j] + w->pos[(size_t)t * H + j] + w->type[j];
            mean += x[j];
        }
        mean /= H;
        for (int j = 0; j < H; j++)
            var += (x[j] - mean) * (x[j] - mean);
        var /= H;
        for (int j = 0; j < H; j++) {
            double want = (x[j] - mean) / sqrt(var + cfg->ln_eps) * w->ln_g[j] + w->ln_b[j];
            cr_assert_float_eq(s[(size_t)t * H + j], want, 1e-5, "token %d dim %d", t, j);
        }
    }
    free(s);
}

Test(states, bad_layers_are_refused)
{
    float out[4];
    int n, bad[1] = {emb_layers(model) + 1};
    cr_assert_eq(states_one(model, "x", 1, 1, bad, out, NULL, &n), EMB_EINVAL);
    cr_assert_eq(states_one(model, "x", 1, 0, bad, out, NULL, &n), EMB_EINVAL);
    const char *text = "x";
    size_t len = 1;
    int off[1];
    cr_assert_eq(emb_token_states(model, &text, &len, 0, 1, bad, out, NULL, off), EMB_EINVAL);
}

/* Texts of other lengths in one pass: each one's tokens and states are its own. */
Test(states, texts_in_one_pass_are_each_their_own)
{
    static const char *const texts[] = {"How do I reverse a list in Python?", "?!",
                                        "What is the capital of France, and how big is it?"};
    enum { N = 3 };
    const int dim = emb_dim(model), cap = emb_max_tokens(model);
    int layers[3] = {0, 3, emb_layers(model)}, off[N + 1];
    size_t lens[N];
    for (int i = 0; i < N; i++)
        lens[i] = strlen(texts[i]);
    float *all = malloc(sizeof(float) * 3 * N * (size_t)cap * dim);
    float *one = malloc(sizeof(float) * 3 * (size_t)cap * dim);
    int32_t *ids = malloc(sizeof *ids * N * (size_t)cap), own[512];
    cr_assert(all && one && ids);
    cr_assert_eq(emb_token_states(model, (const char **)texts, lens, N, 3, layers, all, ids,
                                  off), 0);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        int n = 0;
        cr_assert_eq(states_one(model, texts[i], lens[i], 3, layers, one, own, &n), 0);
        cr_assert_eq(off[i + 1] - off[i], n, "%s", texts[i]);
        cr_assert_eq(memcmp(ids + off[i], own, sizeof *own * (size_t)n), 0);
        for (int l = 0; l < 3; l++)
            for (size_t j = 0; j < (size_t)n * dim; j++) {
                double d = fabs(all[((size_t)l * off[N] + off[i]) * dim + j] -
                                one[(size_t)l * n * dim + j]);
                worst = d > worst ? d : worst;
            }
    }
    cr_assert_leq(worst, 1e-4, "%g", worst); /* the GEMMs over more rows: about 2e-6 */
    free(all);
    free(one);
    free(ids);
}

Test(states, word_tokens)
{
    int32_t ids[512];
    int n = 0;
    cr_assert_eq(emb_tokenize(model, "cats?! ##", 9, ids, &n), 0);
    /* [CLS] cats ? ! # # [SEP] */
    cr_assert_eq(emb_token_is_word(model, ids[1]), 1);
    cr_assert_eq(emb_token_is_word(model, ids[2]), 0);
    cr_assert_eq(emb_token_is_word(model, ids[3]), 0);
    cr_assert_eq(emb_token_is_word(model, -1), 0);
    cr_assert_eq(emb_token_is_word(model, 1 << 30), 0);
}

/* A backend without a states call (a GPU's): a stand-in for the GPU that runs the CPU
 * backend's forward pass but offers no states, so that emb_token_states() must make its
 * own CPU backend from the host weights. */
static struct emb_backend_i no_states_vt;

static int no_states_backend(const struct emb_config *cfg, const struct emb_weights *w,
                             const struct emb_backend_i **vt, void **ctx, char *err,
                             size_t errlen)
{
    (void)err;
    (void)errlen;
    const struct emb_backend_i *cpu;
    int rc = emb_backend_cpu_create(cfg, w, 0, &cpu, ctx);
    if (rc)
        return rc;
    no_states_vt = *cpu;
    no_states_vt.name = "no-states";
    no_states_vt.states = NULL;
    *vt = &no_states_vt;
    return 0;
}

Test(states, a_backend_without_states_gets_them_on_the_cpu)
{
    char err[512];
    emb_model *other = NULL;
    struct emb_options opt = {.threads = 0, .gpu = no_states_backend};
    cr_assert_eq(emb_model_load(MODEL, &opt, &other, err, sizeof err), 0, "%s", err);
    const int dim = emb_dim(model), cap = emb_max_tokens(model);
    int layers[3] = {0, 3, emb_layers(model)};
    float *want = malloc(sizeof(float) * 3 * (size_t)cap * dim);
    float *got = malloc(sizeof(float) * 3 * (size_t)cap * dim);
    static const char *const texts[] = {"How do I reverse a list in Python?", "", "?!",
                                        "caf\xc3\xa9 \xf0\x9f\x8d\x95 \xff bytes"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int n = 0, m = 0;
        size_t len = strlen(texts[i]);
        cr_assert_eq(states_one(model, texts[i], len, 3, layers, want, NULL, &n), 0);
        for (int twice = 0; twice < 2; twice++) { /* the second call reuses its backend */
            cr_assert_eq(states_one(other, texts[i], len, 3, layers, got, NULL, &m), 0);
            cr_assert_eq(m, n);
            cr_assert_eq(memcmp(got, want, sizeof(float) * 3 * (size_t)n * dim), 0, "%s",
                         texts[i]);
        }
    }
    free(want);
    free(got);
    emb_model_destroy(other);
}

/* emb_encode_keep() of texts, with a keep of cap tokens: the embeddings are
 * emb_encode_ends()'s, bit for bit; the states are emb_token_states()' of the same texts
 * in one pass, bit for bit; or none kept (and the same embeddings) past cap, or on a
 * backend without states. */
static void keep_matches(emb_model *m, int cap, int want_kept)
{
    static const char *const texts[] = {"How do I reverse a list in Python?", "?!",
                                        "What is the capital of France, and how big is it?"};
    static const unsigned char ends[] = {1, 0, 1};
    enum { N = 3 };
    const int dim = emb_dim(m), max = emb_max_tokens(m);
    int layers[3] = {0, 3, emb_layers(m)}, off[N + 1], koff[N + 1];
    size_t lens[N];
    for (int i = 0; i < N; i++)
        lens[i] = strlen(texts[i]);
    float want[N * 384], got[N * 384];
    cr_assert_leq(dim, 384);
    int ntok[N], kntok[N];
    cr_assert_eq(emb_encode_ends(m, (const char **)texts, lens, ends, N, want, ntok, NULL), 0);
    float *states = malloc(sizeof(float) * 3 * (size_t)cap * dim);
    float *all = malloc(sizeof(float) * 3 * N * (size_t)max * dim);
    int32_t *kids = malloc(sizeof *kids * (size_t)cap);
    int32_t *ids = malloc(sizeof *ids * N * (size_t)max);
    cr_assert(states && all && kids && ids);
    struct emb_keep keep = {3, layers, cap, states, kids, koff, -1, 0};
    cr_assert_eq(emb_encode_keep(m, (const char **)texts, lens, ends, N, got, kntok, NULL, &keep),
                 0);
    cr_assert_eq(memcmp(got, want, sizeof(float) * N * (size_t)dim), 0);
    cr_assert_eq(memcmp(kntok, ntok, sizeof ntok), 0);
    cr_assert_eq(keep.kept, want_kept);
    if (want_kept) {
        /* emb_token_states() keeps every text's end: the same tokens for these short ones */
        cr_assert_eq(emb_token_states(m, (const char **)texts, lens, N, 3, layers, all, ids, off),
                     0);
        cr_assert_eq(keep.n, N);
        cr_assert_eq(memcmp(koff, off, sizeof off), 0);
        cr_assert_eq(memcmp(kids, ids, sizeof *ids * (size_t)off[N]), 0);
        cr_assert_eq(memcmp(states, all, sizeof(float) * 3 * (size_t)off[N] * dim), 0);
    }
    free(states);
    free(all);
    free(kids);
    free(ids);
}

Test(states, a_pass_keeps_its_states_beside_the_same_embeddings)
{
    keep_matches(model, 4096, 1);
    keep_matches(model, 8, 0); /* more tokens than kept */
    int layers[2] = {0, 3};    /* the last layer is not among them */
    float v[384], s[2 * 64 * 384];
    int32_t ids[64];
    int off[2];
    const char *t = "cats";
    size_t len = 4;
    struct emb_keep keep = {2, layers, 64, s, ids, off, -1, 0};
    cr_assert_eq(emb_encode_keep(model, &t, &len, NULL, 1, v, NULL, NULL, &keep), EMB_EINVAL);
}

Test(states, a_backend_without_states_keeps_none)
{
    char err[512];
    emb_model *other = NULL;
    struct emb_options opt = {.threads = 0, .gpu = no_states_backend};
    cr_assert_eq(emb_model_load(MODEL, &opt, &other, err, sizeof err), 0, "%s", err);
    keep_matches(other, 4096, 0);
    emb_model_destroy(other);
}
