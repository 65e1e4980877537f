/* The engine against llama.cpp on the default model (tests/fixtures/engine/llamacpp.json,
 * made by tests/ref/make_llamacpp_fixtures.py): token ids identical; teacher-forced
 * logits at the first 16 positions of 6 prompts (96) and 32-token greedy continuations.
 *
 * Tolerance: llama.cpp quantizes activations to 8 bits for its Q4_1/Q8_0 dot products;
 * this engine does not (it agrees with the F32 reference of test_forward.c to 1e-4). So
 * logits differ by up to a few tenths: LOGIT_TOL is asserted and the largest difference
 * printed. The yardstick for agreement is an independent exact implementation:
 * tests/fixtures/engine/llamacpp_baseline.json (tests/ref/make_llamacpp_baseline.py) holds
 * how closely Hugging Face transformers, in F32 on the same file, agrees with llama.cpp on
 * the same prompts: 91 of 96 top-1 (94.8%; the 5 others are near ties, llama.cpp's margins
 * under 0.3), greedy continuations equal for 2, 32, 12, 3, 32 and 16 tokens (they part
 * where llama.cpp's top-2 margin is 0.01-0.28, and its activation rounding tips it). An
 * exact implementation therefore cannot reach 97% top-1 or 8 equal greedy tokens on every
 * prompt against llama.cpp; the engine must be at least as close as transformers:
 *   - teacher forced: top-1 must agree wherever llama.cpp's margin exceeds LOGIT_TOL, and
 *     overall at least as often as transformers does (and MIN_TOP1 of the positions);
 *   - greedy: a continuation may part from llama.cpp's only where llama.cpp's top-2 margin
 *     is within LOGIT_TOL, and then onto llama.cpp's runner-up; the equal tokens of all
 *     prompts together are at least transformers'; with the F32 products (transformers'
 *     arithmetic to 1e-4) each prompt's are at least min(8, transformers').
 * With engine.cpu_matmul = int8, llama.cpp's own arithmetic (activations rounded to 8-bit
 * blocks with F16 scales, integer block sums), a last-bit difference anywhere (the order of
 * a float sum, which the processor's vector width sets) tips some activation into the next
 * 8-bit step, and the steps add up through the layers: llama.cpp's own batch and
 * token-at-a-time passes differ by up to 1.21 (tests/ref/llamacpp_agreement_limits.py; a
 * numpy emulation of its kernels reaches 0.78). So there the tolerance is LOGIT_TOL_INT8,
 * llama.cpp's difference from itself, and how long a greedy continuation stays on
 * llama.cpp's after a near tie is chance: the continuations must part only at near ties
 * and onto llama.cpp's runner-up, with no total asked of them. Measured with F32 products:
 * 91/96 top-1, 97 equal greedy tokens. int8 with F32, F16 (as llama.cpp stores them) and
 * BF16 keys and values: with AVX-512, 91/96, 92/96 and 94/96 top-1, 122, 142 and 136 equal
 * greedy tokens; with AVX2 alone, 91/96, 93/96 and 92/96 top-1, largest differences 1.00,
 * 0.78 and 0.77, 100, 96 and 36 equal greedy tokens. */
#include "engine.h"
#include "kvcache.h"
#include "model.h"
#include "tokenizer.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
#define FIXTURE "tests/fixtures/engine/llamacpp.json"
#define BASELINE "tests/fixtures/engine/llamacpp_baseline.json"
#define LOGIT_TOL 1.0
#define LOGIT_TOL_INT8 1.25
#define MIN_TOP1 0.90

static eng_model *model;
static tok_vocab *vocab;
static json_t *fx, *base;

static void setup(void)
{
    char err[512];
    cr_assert_eq(eng_model_load(MODEL, NULL, &model, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(eng_model_gguf(model), &vocab, err, sizeof err), 0, "%s", err);
    json_error_t je;
    fx = json_load_file(FIXTURE, 0, &je);
    cr_assert_not_null(fx, "%s: %s", FIXTURE, je.text);
    base = json_load_file(BASELINE, 0, &je);
    cr_assert_not_null(base, "%s: %s", BASELINE, je.text);
    cr_assert_eq(json_array_size(json_object_get(base, "prompts")),
                 json_array_size(json_object_get(fx, "prompts")), "%s is for other prompts",
                 BASELINE);
}

static void teardown(void)
{
    tok_destroy(vocab);
    eng_model_destroy(model);
    json_decref(fx);
    json_decref(base);
}

TestSuite(llamacpp, .init = setup, .fini = teardown, .timeout = 300);

static int same_ids(json_t *want, const int32_t *ids, int n)
{
    if ((size_t)n != json_array_size(want))
        return 0;
    for (int i = 0; i < n; i++)
        if (ids[i] != json_integer_value(json_array_get(want, (size_t)i)))
            return 0;
    return 1;
}

Test(llamacpp, token_ids_identical)
{
    size_t i;
    json_t *t;
    int32_t ids[512];
    json_array_foreach(json_object_get(fx, "texts"), i, t)
    {
        json_t *s = json_object_get(t, "text");
        int n = 0;
        cr_assert_eq(tok_encode(vocab, json_string_value(s), json_string_length(s),
                                json_is_true(json_object_get(t, "special")), ids, 512, &n),
                     0);
        cr_expect(same_ids(json_object_get(t, "ids"), ids, n), "text %zu: %s", i,
                  json_string_value(s));
    }
    fprintf(stderr, "llama.cpp: %zu tokenizations compared\n",
            json_array_size(json_object_get(fx, "texts")));
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* exact: the F32 products, transformers' arithmetic: each prompt's greedy continuation,
 * and all of them together, are held to transformers' (see the top); else int8, held to
 * LOGIT_TOL_INT8 */
static void agreement(eng_model *model, const char *mode, enum kvc_dtype dtype, int exact)
{
    const double tol = exact ? LOGIT_TOL : LOGIT_TOL_INT8;
    const struct eng_hparams *hp = eng_model_hparams(model);
    const int V = hp->n_vocab;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, 16, 8, 0, dtype};
    kvc_pool *kv;
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    int32_t table[8];
    for (int i = 0; i < 8; i++)
        kvc_alloc(kv, &table[i]);
    int agree = 0, total = 0, min_prefix = 32, clear = 0, clear_agree = 0;
    int equal = 0, base_equal = 0;
    double worst = 0;
    size_t pi;
    json_t *p;
    json_array_foreach(json_object_get(fx, "prompts"), pi, p)
    {
        json_t *s = json_object_get(p, "text");
        int32_t ids[128];
        int n = 0;
        cr_assert_eq(tok_encode(vocab, json_string_value(s), json_string_length(s), 1, ids, 64, &n),
                     0);
        cr_assert(same_ids(json_object_get(p, "ids"), ids, n), "prompt %zu ids differ", pi);
        float *logits = malloc(sizeof(float) * (size_t)n * V);
        struct eng_seq seq = {ids, n, 0, table, ENG_LOGITS_ALL};
        cr_assert_eq(eng_forward(model, kv, &seq, 1, logits), 0);
        json_t *tops = json_object_get(p, "top_ids"), *vals = json_object_get(p, "top_logits");
        for (size_t i = 0; i < json_array_size(tops); i++) {
            const float *row = logits + i * V;
            json_t *ti = json_array_get(tops, i), *tv = json_array_get(vals, i);
            int ok = argmax(row, V) == json_integer_value(json_array_get(ti, 0));
            agree += ok;
            total++;
            double margin = json_number_value(json_array_get(tv, 0)) -
                            json_number_value(json_array_get(tv, 1));
            if (margin > tol) {
                clear++;
                clear_agree += ok;
            }
            for (size_t k = 0; k < json_array_size(ti); k++) {
                int id = (int)json_integer_value(json_array_get(ti, k));
                worst = fmax(worst, fabs(row[id] - json_number_value(json_array_get(tv, k))));
            }
        }
        /* greedy continuation from the last prompt position */
        json_t *greedy = json_object_get(p, "greedy"), *top2 = json_object_get(p, "greedy_top2");
        int32_t tok = argmax(logits + (size_t)(n - 1) * V, V);
        int same = 0, pos = n, diverged = 0;
        float *row = malloc(sizeof(float) * V);
        for (size_t g = 0; g < json_array_size(greedy); g++) {
            if (!diverged && tok == json_integer_value(json_array_get(greedy, g))) {
                same++;
            } else if (!diverged) {
                diverged = 1;
                json_t *t2 = json_array_get(top2, g);
                double margin = json_number_value(json_array_get(t2, 1)) -
                                json_number_value(json_array_get(t2, 3));
                fprintf(stderr, "llama.cpp, %s: prompt %zu diverges at step %zu where llama.cpp's "
                                "top-2 margin is %.3f\n", mode, pi, g, margin);
                cr_expect(margin <= tol, "prompt %zu: diverged at step %zu, margin %.3f",
                          pi, g, margin);
                cr_expect(tok == json_integer_value(json_array_get(t2, 2)),
                          "prompt %zu: step %zu took neither of llama.cpp's top 2", pi, g);
            }
            struct eng_seq d = {&tok, 1, pos++, table, ENG_LOGITS_LAST};
            cr_assert_eq(eng_forward(model, kv, &d, 1, row), 0);
            tok = argmax(row, V);
        }
        min_prefix = same < min_prefix ? same : min_prefix;
        json_t *bp = json_array_get(json_object_get(base, "prompts"), pi);
        int want = (int)json_integer_value(json_object_get(bp, "greedy_equal"));
        fprintf(stderr, "llama.cpp, %s: prompt %zu: greedy equal for %d of %zu tokens "
                        "(transformers: %d)\n", mode, pi, same, json_array_size(greedy), want);
        equal += same;
        base_equal += want;
        if (exact)
            cr_expect(same >= (want < 8 ? want : 8), "prompt %zu: greedy equal for %d tokens, "
                      "transformers for %d", pi, same, want);
        free(row);
        free(logits);
    }
    fprintf(stderr, "llama.cpp, %s: teacher-forced top-1 agreement %d/%d overall, %d/%d "
                    "where llama.cpp's margin exceeds %.2f; largest logit difference %.3g "
                    "(tolerance %.2f); greedy equal for %d tokens in all (transformers: %d), "
                    "shortest %d\n",
            mode, agree, total, clear_agree, clear, tol, worst, tol, equal,
            base_equal, min_prefix);
    int base_agree = (int)json_integer_value(json_object_get(base, "top1_agree"));
    fprintf(stderr, "llama.cpp: transformers (F32) agrees on %d/%d positions\n", base_agree,
            (int)json_integer_value(json_object_get(base, "positions")));
    cr_assert_eq(clear_agree, clear);
    cr_assert(agree >= base_agree, "top-1 %d, transformers %d", agree, base_agree);
    cr_assert(agree >= MIN_TOP1 * total);
    cr_assert(worst <= tol);
    if (exact)
        cr_assert(equal >= base_equal, "greedy equal for %d tokens, transformers for %d",
                  equal, base_equal);
    kvc_destroy(kv);
}

Test(llamacpp, teacher_forced_and_greedy)
{
    agreement(model, "F32 products", KVC_F32, 1);
}

static void int8_case(const char *mode, enum kvc_dtype dtype)
{
    struct eng_options o = {.int8 = 1};
    eng_model *m8;
    char err[512];
    cr_assert_eq(eng_model_load(MODEL, &o, &m8, err, sizeof err), 0, "%s", err);
    if (!eng_model_int8(m8)) {
        eng_model_destroy(m8);
        cr_skip_test("no AVX2 on this processor: engine.cpu_matmul = int8 runs F32");
    }
    agreement(m8, mode, dtype, 0);
    eng_model_destroy(m8);
}

Test(llamacpp, teacher_forced_and_greedy_int8)
{
    int8_case("8-bit products", KVC_F32);
}

/* with the KV storage of the server's default (F16, as llama.cpp's) and with BF16 */
Test(llamacpp, teacher_forced_and_greedy_int8_f16_kv)
{
    int8_case("8-bit products, f16 KV", KVC_F16);
}

Test(llamacpp, teacher_forced_and_greedy_int8_bf16_kv)
{
    int8_case("8-bit products, bf16 KV", KVC_BF16);
}
