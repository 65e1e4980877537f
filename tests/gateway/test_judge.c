/* The judge (gateway/judge.h). Its features are held to an independent reference, an
 * encoder written again in numpy from the model's safetensors with Hugging Face's
 * tokenizer (tests/ref/judge_features.py -> tests/fixtures/judge/features.tsv): token
 * matches within 2e-4 (the C encoder runs in float, the reference in double; after six
 * layers they differ by about 1e-5 a dimension), counts and token ids exactly. Its forest
 * is held to scikit-learn's probabilities for the same features
 * (tests/bench/train_judge.py -> tests/fixtures/judge/scores.tsv) within 1e-12. And it
 * refuses near misses that the guard lets through, which it was not trained on, while it
 * lets paraphrases by. */
#include "embedder.h"
#include "judge.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/all-minilm-l6-v2"
#define FEATURES "tests/fixtures/judge/features.tsv"
#define SCORES "tests/fixtures/judge/scores.tsv"
#define MATCH_TOL 2e-4
#define THRESHOLD 0.5 /* cache.judge_threshold's default */

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

TestSuite(judge, .init = setup, .fini = teardown, .timeout = 120);

/* splits line at tabs into at most max fields; returns the count */
static int split(char *line, char **field, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *p = line; n < max;) {
        field[n++] = p;
        if (!(p = strchr(p, '\t')))
            break;
        *p++ = 0;
    }
    return n;
}

/* the two embedded in one pass, as the cache does its first candidate */
static double judge_pair(const char *a, const char *b, double sim, float *f)
{
    const char *texts[2] = {a, b};
    const size_t lens[2] = {strlen(a), strlen(b)};
    struct gw_judge_text t[2];
    cr_assert_eq(gw_judge_texts(model, texts, lens, 2, t), 0);
    gw_judge_features(&t[0], &t[1], sim, f);
    gw_judge_text_free(&t[0]);
    gw_judge_text_free(&t[1]);
    return gw_judge_score(f);
}

/* the cosine of the two texts' embeddings, as the cache gets it */
static double cosine(const char *a, const char *b)
{
    const int dim = emb_dim(model);
    float *v = malloc(sizeof(float) * 2 * dim);
    const char *texts[2] = {a, b};
    size_t lens[2] = {strlen(a), strlen(b)};
    cr_assert_eq(emb_encode(model, texts, lens, 2, v, NULL), 0);
    double s = 0;
    for (int j = 0; j < dim; j++)
        s += (double)v[j] * v[dim + j];
    free(v);
    return s;
}

Test(judge, features_match_the_reference)
{
    FILE *f = fopen(FEATURES, "r");
    cr_assert_not_null(f, "%s", FEATURES);
    char line[8192];
    int rows = 0;
    double worst = 0;
    while (fgets(line, sizeof line, f)) {
        char *field[4 + GW_JUDGE_FEATURES];
        cr_assert_eq(split(line, field, 4 + GW_JUDGE_FEATURES), 4 + GW_JUDGE_FEATURES);
        const char *a = field[1], *b = field[2];
        double sim = atof(field[3]);
        cr_assert_float_eq(cosine(a, b), sim, 1e-5, "%s / %s", a, b);
        float got[GW_JUDGE_FEATURES];
        judge_pair(a, b, sim, got);
        for (int k = 0; k < GW_JUDGE_FEATURES; k++) {
            double want = atof(field[4 + k]);
            /* in each layer's ten, the last four are counts; then the token features */
            int exact = (k > 30 && k < 36) || (k > 0 && k <= 30 && (k - 1) % 10 >= 6);
            double d = fabs(got[k] - want);
            cr_assert(exact ? d == 0 : d <= MATCH_TOL, "%s / %s: feature %d is %.6f, want %.6f",
                      a, b, k, got[k], want);
            if (!exact && d > worst)
                worst = d;
        }
        rows++;
    }
    fclose(f);
    cr_assert_geq(rows, 10);
    cr_log_info("judge features: %d pairs, largest difference %.2g", rows, worst);
}

Test(judge, forest_matches_the_trainer)
{
    FILE *f = fopen(SCORES, "r");
    cr_assert_not_null(f, "%s", SCORES);
    char line[8192];
    int rows = 0, low = 0;
    while (fgets(line, sizeof line, f)) {
        char *field[GW_JUDGE_FEATURES + 1];
        cr_assert_eq(split(line, field, GW_JUDGE_FEATURES + 1), GW_JUDGE_FEATURES + 1);
        float x[GW_JUDGE_FEATURES];
        for (int k = 0; k < GW_JUDGE_FEATURES; k++)
            x[k] = strtof(field[k], NULL);
        double want = atof(field[GW_JUDGE_FEATURES]);
        cr_assert_float_eq(gw_judge_score(x), want, 1e-12, "row %d: %.17g, want %.17g", rows + 1,
                           gw_judge_score(x), want);
        low += want < THRESHOLD;
        rows++;
    }
    fclose(f);
    /* the rows span both sides of the threshold */
    cr_assert_geq(rows, 50);
    cr_assert(low > 5 && low < rows - 5, "%d of %d rows under the threshold", low, rows);
}

Test(judge, refuses_unseen_near_misses_passes_paraphrases)
{
    static const char *const near_misses[][2] = {
        {"How is a HELOC different from a home equity loan?",
         "How is a HELOC different from a cash-out refinance?"},
        {"How do I delete a page in Word?", "How do I delete a blank page at the end in Word?"},
        {"What was the outcome of the Battle of Waterloo?",
         "Why was the Battle of Waterloo fought?"},
        {"What should I pack for a beach vacation?",
         "What should I leave at home for a beach vacation?"},
    };
    static const char *const paraphrases[][2] = {
        {"What is the capital of France?", "What's France's capital city?"},
        {"How do I reverse a list in Python?", "What is the way to reverse a Python list?"},
        {"How can I stop snoring?", "what helps with snoring at night"},
        {"How many slices are in a large pizza?", "How many slices does a large pizza have?"},
    };
    float f[GW_JUDGE_FEATURES];
    for (size_t i = 0; i < sizeof near_misses / sizeof near_misses[0]; i++) {
        const char *a = near_misses[i][0], *b = near_misses[i][1];
        double p = judge_pair(a, b, cosine(a, b), f);
        cr_assert_lt(p, THRESHOLD, "%s / %s: %.3f", a, b, p);
    }
    for (size_t i = 0; i < sizeof paraphrases / sizeof paraphrases[0]; i++) {
        const char *a = paraphrases[i][0], *b = paraphrases[i][1];
        double p = judge_pair(a, b, cosine(a, b), f);
        cr_assert_geq(p, THRESHOLD, "%s / %s: %.3f", a, b, p);
    }
}

Test(judge, a_text_of_no_words_keeps_its_cls)
{
    struct gw_judge_text t;
    const char *text = "?!";
    const size_t len = 2;
    cr_assert_eq(gw_judge_texts(model, &text, &len, 1, &t), 0);
    cr_assert_eq(t.n, 1);
    cr_assert_eq(t.dim, emb_dim(model));
    float f[GW_JUDGE_FEATURES];
    gw_judge_features(&t, &t, 1.0, f);
    cr_assert_float_eq(f[1], 1.0, 1e-5); /* its one token matches itself */
    cr_assert_eq(f[36], 1.0f);
    double p = gw_judge_score(f);
    cr_assert(p >= 0 && p <= 1);
    gw_judge_text_free(&t);
    cr_assert_null(t.states);
    gw_judge_text_free(&t); /* twice is harmless */
}
