/*
 * quant — dequantization of ggml tensor rows to F32.
 *
 * Block layouts (ggml), 32 weights a block, little-endian, d and m are IEEE half floats:
 *     Q4_0  { f16 d; u8 qs[16]; }          w[j] = ((qs[j] & 15) - 8) * d,
 *                                          w[j + 16] = ((qs[j] >> 4) - 8) * d
 *     Q4_1  { f16 d; f16 m; u8 qs[16]; }   w[j] = (qs[j] & 15) * d + m,
 *                                          w[j + 16] = (qs[j] >> 4) * d + m
 *     Q8_0  { f16 d; i8 qs[32]; }          w[j] = qs[j] * d
 * and F32, F16, BF16 element by element. Pure functions; any thread.
 */
#ifndef ENG_QUANT_H
#define ENG_QUANT_H

#include "gguf.h"

#include <stdint.h>

float eng_f16_to_f32(uint16_t h);
float eng_bf16_to_f32(uint16_t h);

/* Whether eng_dequant_row() handles type t. */
int eng_dequant_supported(enum ggml_type t);

/* n weights (a multiple of the type's block) from src into dst. ENG_ENOTSUP for a type
 * it does not handle, ENG_EINVAL for a bad n. */
int eng_dequant_row(enum ggml_type t, const void *src, float *dst, int64_t n);

#endif
