/* The CPU forward pass against the independent reference (transformers on the same GGUF
 * file, tests/fixtures/engine/reference.json from tests/ref/make_engine_fixtures.py):
 * teacher-forced top-1 agreement and logit differences at the reference's top-10 ids;
 * then the paged KV cache: chunked and batched passes equal one full pass. */
#include "engine.h"
#include "kvcache.h"
#include "model.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
#define FIXTURE "tests/fixtures/engine/reference.json"
#define LOGIT_TOL 2e-3 /* absolute, on logits of magnitude ~10-30 */
#define MIN_TOP1 0.99

static eng_model *model;
static json_t *fixture;
static kvc_pool *kv;
static int V;

static void setup(void)
{
    char err[512];
    cr_assert_eq(eng_model_load(MODEL, NULL, &model, err, sizeof err), 0, "%s", err);
    json_error_t je;
    fixture = json_load_file(FIXTURE, 0, &je);
    cr_assert_not_null(fixture, "%s: %s", FIXTURE, je.text);
    const struct eng_hparams *hp = eng_model_hparams(model);
    V = hp->n_vocab;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, 16, 64, 0};
    cr_assert_eq(kvc_create(&ks, &kv), 0);
}

static void teardown(void)
{
    kvc_destroy(kv);
    eng_model_destroy(model);
    json_decref(fixture);
}

TestSuite(forward, .init = setup, .fini = teardown, .timeout = 300);

static int32_t *ids_of(json_t *prompt, int *n)
{
    json_t *a = json_object_get(prompt, "ids");
    *n = (int)json_array_size(a);
    int32_t *ids = malloc(sizeof *ids * (size_t)*n);
    for (int i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return ids;
}

/* Blocks for n positions, freshly allocated; release with free_table(). */
static int32_t *table_for(int n)
{
    int nb = (n + 15) / 16;
    int32_t *t = malloc(sizeof *t * (size_t)nb);
    for (int i = 0; i < nb; i++)
        cr_assert_eq(kvc_alloc(kv, &t[i]), 0);
    return t;
}

static void free_table(int32_t *t, int n)
{
    for (int i = 0; i < (n + 15) / 16; i++)
        kvc_release(kv, t[i]);
    free(t);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

Test(forward, matches_reference_teacher_forced)
{
    size_t pi;
    json_t *p;
    int agree = 0, total = 0;
    double worst = 0;
    json_array_foreach(json_object_get(fixture, "prompts"), pi, p)
    {
        int n;
        int32_t *ids = ids_of(p, &n);
        int32_t *table = table_for(n);
        float *logits = malloc(sizeof(float) * (size_t)n * V);
        struct eng_seq s = {ids, n, 0, table, ENG_LOGITS_ALL};
        cr_assert_eq(eng_forward(model, kv, &s, 1, logits), 0);
        json_t *tops = json_object_get(p, "top_ids"), *vals = json_object_get(p, "top_logits");
        for (int i = 0; i < n; i++) {
            const float *row = logits + (size_t)i * V;
            json_t *ti = json_array_get(tops, (size_t)i), *tv = json_array_get(vals, (size_t)i);
            agree += argmax(row, V) == json_integer_value(json_array_get(ti, 0));
            total++;
            for (size_t k = 0; k < json_array_size(ti); k++) {
                int id = (int)json_integer_value(json_array_get(ti, k));
                double d = fabs(row[id] - json_number_value(json_array_get(tv, k)));
                worst = d > worst ? d : worst;
            }
        }
        free(logits);
        free_table(table, n);
        free(ids);
    }
    fprintf(stderr, "engine vs transformers: top-1 agreement %d/%d, largest logit difference "
                    "%.4g (tolerance %.3g)\n", agree, total, worst, LOGIT_TOL);
    cr_assert((double)agree / total >= MIN_TOP1, "top-1 agreement %d/%d", agree, total);
    cr_assert(worst <= LOGIT_TOL, "largest logit difference %g", worst);
}

Test(forward, chunked_and_batched_equal_one_pass)
{
    json_t *prompts = json_object_get(fixture, "prompts");
    int n, m;
    int32_t *a = ids_of(json_array_get(prompts, 2), &n);
    int32_t *b = ids_of(json_array_get(prompts, 0), &m);
    float *full = malloc(sizeof(float) * V), *step = malloc(sizeof(float) * 2 * V);

    /* one pass over all of a */
    int32_t *ta = table_for(n);
    struct eng_seq s = {a, n, 0, ta, ENG_LOGITS_LAST};
    cr_assert_eq(eng_forward(model, kv, &s, 1, full), 0);
    free_table(ta, n);

    /* a in chunks of 7, then one token at a time, in fresh blocks; b alongside in the
     * same batches, so every batch mixes a prefill chunk and another sequence */
    ta = table_for(n);
    int32_t *tb = table_for(m);
    int done = 0;
    double worst = 0;
    while (done < n) {
        int chunk = done < 21 ? 7 : 1;
        if (done + chunk > n)
            chunk = n - done;
        struct eng_seq two[2] = {{a + done, chunk, done, ta, ENG_LOGITS_LAST},
                                 {b, m, 0, tb, ENG_LOGITS_LAST}};
        cr_assert_eq(eng_forward(model, kv, two, done == 0 ? 2 : 1, step), 0);
        done += chunk;
    }
    for (int i = 0; i < V; i++)
        worst = fmax(worst, fabs(full[i] - step[i]));
    fprintf(stderr, "engine: chunked + batched vs one pass: largest logit difference %.3g "
                    "(tolerance 1e-3)\n", worst);
    cr_assert(worst < 1e-3, "largest difference %g", worst);
    free_table(ta, n);
    free_table(tb, m);
    cr_assert_eq(kvc_free_blocks(kv), 64, "every block returned");
    free(full);
    free(step);
    free(a);
    free(b);
}
