/* tests engine/quant.c: dequantized values computed by hand from the block layouts in
 * quant.h, and every tensor type of the default model file is handled. */
#include "engine.h"
#include "gguf.h"
#include "quant.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

Test(quant, f16_and_bf16)
{
    cr_assert_eq(eng_f16_to_f32(0x3C00), 1.0f);
    cr_assert_eq(eng_f16_to_f32(0xC000), -2.0f);
    cr_assert_eq(eng_f16_to_f32(0x7BFF), 65504.0f);             /* largest normal */
    cr_assert_eq(eng_f16_to_f32(0x0001), ldexpf(1.0f, -24));    /* smallest subnormal */
    cr_assert_eq(eng_f16_to_f32(0x03FF), ldexpf(1023.0f, -24)); /* largest subnormal */
    cr_assert(signbit(eng_f16_to_f32(0x8000)) && eng_f16_to_f32(0x8000) == 0.0f);
    cr_assert(isinf(eng_f16_to_f32(0x7C00)));
    cr_assert(isnan(eng_f16_to_f32(0x7E00)));
    cr_assert_eq(eng_bf16_to_f32(0x3F80), 1.0f);
    cr_assert_eq(eng_bf16_to_f32(0xC0A0), -5.0f);
}

Test(quant, q4_0)
{
    uint8_t blk[18] = {0x00, 0x3C}; /* d = 1.0 */
    blk[2] = 0x9F;                  /* w[0] = 15 - 8 = 7, w[16] = 9 - 8 = 1 */
    blk[3] = 0x08;                  /* w[1] = 0, w[17] = -8 */
    for (int j = 2; j < 16; j++)
        blk[2 + j] = 0x88; /* zeros */
    float w[32];
    cr_assert_eq(eng_dequant_row(GGML_Q4_0, blk, w, 32), 0);
    cr_assert_eq(w[0], 7.0f);
    cr_assert_eq(w[16], 1.0f);
    cr_assert_eq(w[1], 0.0f);
    cr_assert_eq(w[17], -8.0f);
    for (int j = 2; j < 16; j++)
        cr_assert(w[j] == 0.0f && w[j + 16] == 0.0f);
}

Test(quant, q4_1)
{
    uint8_t blk[20] = {0x00, 0x38, 0x00, 0xBC}; /* d = 0.5, m = -1.0 */
    blk[4] = 0x3A;                              /* w[0] = 10 * 0.5 - 1 = 4, w[16] = 0.5 */
    blk[19] = 0xF0;                             /* w[15] = -1, w[31] = 15 * 0.5 - 1 = 6.5 */
    float w[32];
    cr_assert_eq(eng_dequant_row(GGML_Q4_1, blk, w, 32), 0);
    cr_assert_eq(w[0], 4.0f);
    cr_assert_eq(w[16], 0.5f);
    cr_assert_eq(w[15], -1.0f);
    cr_assert_eq(w[31], 6.5f);
    cr_assert_eq(w[5], -1.0f);
}

Test(quant, q8_0_two_blocks)
{
    uint8_t blk[68] = {0x00, 0x34}; /* d = 0.25 */
    blk[2] = 0x80;                  /* -128 -> -32 */
    blk[33] = 0x7F;                 /* 127 -> 31.75 */
    blk[34] = 0x00;                 /* second block: d = 2.0 */
    blk[35] = 0x40;
    blk[36] = 0xFD; /* -3 -> -6 */
    float w[64];
    cr_assert_eq(eng_dequant_row(GGML_Q8_0, blk, w, 64), 0);
    cr_assert_eq(w[0], -32.0f);
    cr_assert_eq(w[31], 31.75f);
    cr_assert_eq(w[32], -6.0f);
    cr_assert_eq(w[33], 0.0f);
}

Test(quant, refuses_what_it_cannot_do)
{
    uint8_t blk[210] = {0};
    float w[256];
    cr_assert_eq(eng_dequant_row(GGML_Q6_K, blk, w, 256), ENG_ENOTSUP);
    cr_assert_eq(eng_dequant_row(GGML_Q8_0, blk, w, 31), ENG_EINVAL);
}

Test(quant, every_tensor_of_the_default_model, .timeout = 120)
{
    gguf_file *f;
    char err[512];
    const char *path = "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
    cr_assert_eq(gguf_open(path, &f, err, sizeof err), 0, "%s", err);
    static float row[65536];
    for (int i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        cr_assert(eng_dequant_supported(t->type), "%s has type %s", t->name,
                  ggml_type_name(t->type));
        int be, bb;
        ggml_type_block(t->type, &be, &bb);
        /* first and last row decode to finite values */
        int64_t rows = t->nelem / t->ne[0];
        size_t row_bytes = (size_t)(t->ne[0] / be * bb);
        for (int64_t r = 0; r < rows; r += rows - 1 ? rows - 1 : 1) {
            cr_assert_eq(eng_dequant_row(t->type, (const uint8_t *)t->data + r * row_bytes, row,
                                         t->ne[0]),
                         0);
            for (int64_t j = 0; j < t->ne[0]; j++)
                cr_assert(isfinite(row[j]), "%s row %lld", t->name, (long long)r);
            if (rows == 1)
                break;
        }
    }
    gguf_close(f);
}
