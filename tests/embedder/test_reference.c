/* The embedder against the independent reference: token ids must equal
 * sentence-transformers' exactly, and every embedding must have cosine >= 0.9999 with
 * its reference (tests/fixtures/embedder/reference.json, made by
 * tests/ref/make_embedder_fixtures.py on models/all-minilm-l6-v2). */
#include "embedder.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/all-minilm-l6-v2"
#define FIXTURE "tests/fixtures/embedder/reference.json"
#define MIN_COSINE 0.9999

static emb_model *model;
static json_t *fixture;

static void setup(void)
{
    char err[512];
    int rc = emb_model_load(MODEL, NULL, &model, err, sizeof err);
    cr_assert_eq(rc, 0, "loading %s: %s", MODEL, err);
    json_error_t je;
    fixture = json_load_file(FIXTURE, JSON_ALLOW_NUL, &je);
    cr_assert_not_null(fixture, "%s: %s", FIXTURE, je.text);
}

static void teardown(void)
{
    emb_model_destroy(model);
    json_decref(fixture);
}

TestSuite(reference, .init = setup, .fini = teardown, .timeout = 120);

static json_t *texts(void)
{
    return json_object_get(fixture, "texts");
}

Test(reference, max_seq_length)
{
    cr_assert_eq(emb_max_tokens(model), json_integer_value(json_object_get(fixture, "max_seq_length")));
    cr_assert_eq(emb_dim(model), 384);
}

Test(reference, token_ids_identical)
{
    size_t i;
    json_t *row;
    int32_t ids[1024];
    json_array_foreach(texts(), i, row)
    {
        const char *text = json_string_value(json_object_get(row, "text"));
        size_t len = json_string_length(json_object_get(row, "text"));
        json_t *want = json_object_get(row, "ids");
        int n = 0;
        cr_assert_eq(emb_tokenize(model, text, len, ids, &n), 0);
        size_t nwant = json_array_size(want);
        cr_expect(n >= 0 && (size_t)n == nwant, "text %zu (%.40s): %d ids, want %zu", i, text, n,
                  nwant);
        for (int k = 0; k < n && (size_t)k < json_array_size(want); k++) {
            int w = (int)json_integer_value(json_array_get(want, (size_t)k));
            if (ids[k] != w) {
                cr_expect(0, "text %zu (%.40s): id %d is %d, want %d", i, text, k, ids[k], w);
                break;
            }
        }
    }
}

/* One text through emb_encode_ends(): whether it was cut, and its embedding. */
static int cut_of(const char *t, float *v)
{
    unsigned char cut = 9;
    size_t len = strlen(t);
    cr_assert_eq(emb_encode_ends(model, &t, &len, NULL, 1, v, NULL, &cut), 0);
    /* emb_tokenize_whole() (the gateway counts a tenant's tokens with it) says the same */
    int32_t ids[1024];
    int n = 0, whole = 9, n1 = 0;
    cr_assert_eq(emb_tokenize_whole(model, t, len, ids, &n, &whole), 0);
    cr_assert_eq(whole, cut, "%.40s", t);
    cr_assert_eq(emb_tokenize(model, t, len, ids, &n1), 0);
    cr_assert_eq(n, cut ? emb_max_tokens(model) + 1 : n1, "%.40s", t);
    return cut;
}

/* A text fits when its pieces and [CLS] and [SEP] are at most the model's limit; one that
 * does not is said to be cut, and is embedded as its first pieces are; the reference texts
 * that were truncated are cut (emb_tokenize_whole() says so too). */
Test(reference, cut_past_the_limit_exactly)
{
    int max = emb_max_tokens(model), dim = emb_dim(model);
    char *text = malloc((size_t)max * 5 + 1);
    float *v = malloc(sizeof *v * (size_t)dim * 2);
    cr_assert(text && v);
    for (int words = max - 3; words <= max; words++) {
        text[0] = 0;
        for (int k = 0; k < words; k++)
            strcat(text, "word ");
        cr_assert_eq(cut_of(text, v + (words == max - 2 ? dim : 0)), words + 2 > max,
                     "%d words", words);
        if (words > max - 2) /* the same ids as the longest that fits: the same vector */
            cr_assert_arr_eq(v, v + dim, sizeof *v * (size_t)dim, "%d words", words);
    }
    free(text);
    size_t i;
    json_t *row;
    json_array_foreach(texts(), i, row)
    {
        const char *t = json_string_value(json_object_get(row, "text"));
        size_t nwant = json_array_size(json_object_get(row, "ids"));
        if ((int)nwant < max) {
            cr_expect_eq(cut_of(t, v), 0, "text %zu", i);
        }
    }
    const char *last = json_string_value(
        json_object_get(json_array_get(texts(), json_array_size(texts()) - 1), "text"));
    cr_expect_eq(cut_of(last, v), 1, "the longest reference text");
    free(v);
}

static double cosine(const float *a, json_t *b, int dim)
{
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < dim; j++) {
        double y = json_number_value(json_array_get(b, (size_t)j));
        ab += a[j] * y;
        aa += (double)a[j] * a[j];
        bb += y * y;
    }
    return ab / sqrt(aa * bb);
}

Test(reference, embeddings_match_in_one_batch)
{
    json_t *rows = texts();
    int n = (int)json_array_size(rows), dim = emb_dim(model);
    const char **t = malloc(sizeof *t * (size_t)n);
    size_t *lens = malloc(sizeof *lens * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)n * (size_t)dim);
    for (int i = 0; i < n; i++) {
        json_t *s = json_object_get(json_array_get(rows, (size_t)i), "text");
        t[i] = json_string_value(s);
        lens[i] = json_string_length(s);
    }
    cr_assert_eq(emb_encode(model, t, lens, n, out, NULL), 0);
    double worst = 2;
    int worst_i = -1;
    for (int i = 0; i < n; i++) {
        json_t *want = json_object_get(json_array_get(rows, (size_t)i), "embedding");
        double c = cosine(out + (size_t)i * dim, want, dim);
        if (c < worst) {
            worst = c;
            worst_i = i;
        }
    }
    fprintf(stderr, "embedder vs sentence-transformers: worst cosine %.7f (text %d of %d), "
                    "tolerance %.4f\n", worst, worst_i, n, MIN_COSINE);
    cr_assert(worst >= MIN_COSINE, "text %d: cosine %.7f < %.4f", worst_i, worst, MIN_COSINE);
    free(t);
    free(lens);
    free(out);
}

Test(reference, batch_equals_one_by_one)
{
    json_t *rows = texts();
    int n = (int)json_array_size(rows), dim = emb_dim(model);
    const char **t = malloc(sizeof *t * (size_t)n);
    size_t *lens = malloc(sizeof *lens * (size_t)n);
    float *all = malloc(sizeof(float) * (size_t)n * (size_t)dim), one[1024];
    for (int i = 0; i < n; i++) {
        json_t *s = json_object_get(json_array_get(rows, (size_t)i), "text");
        t[i] = json_string_value(s);
        lens[i] = json_string_length(s);
    }
    cr_assert_eq(emb_encode(model, t, lens, n, all, NULL), 0);
    double maxdiff = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(emb_encode(model, &t[i], &lens[i], 1, one, NULL), 0);
        for (int j = 0; j < dim; j++) {
            double d = fabs(one[j] - all[(size_t)i * dim + j]);
            maxdiff = d > maxdiff ? d : maxdiff;
        }
    }
    fprintf(stderr, "embedder batch vs one by one: max abs difference %.3g (tolerance 1e-5)\n",
            maxdiff);
    cr_assert(maxdiff < 1e-5);
    free(t);
    free(lens);
    free(all);
}
