#include "quant.h"

#include "engine.h"

#include <string.h>

float eng_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, f;
    if (exp == 0) {
        if (man == 0) {
            f = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            f = sign | exp << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        f = sign | 0x7f800000u | man << 13; /* inf, nan */
    } else {
        f = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float r;
    memcpy(&r, &f, sizeof r);
    return r;
}

float eng_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static uint16_t u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

int eng_dequant_supported(enum ggml_type t)
{
    switch (t) {
    case GGML_F32: case GGML_F16: case GGML_BF16: case GGML_Q4_0: case GGML_Q4_1: case GGML_Q8_0:
        return 1;
    default:
        return 0;
    }
}

int eng_dequant_row(enum ggml_type t, const void *src, float *dst, int64_t n)
{
    const uint8_t *p = src;
    if (n < 0)
        return ENG_EINVAL;
    switch (t) {
    case GGML_F32:
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return 0;
    case GGML_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = eng_f16_to_f32(u16(p + 2 * i));
        return 0;
    case GGML_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = eng_bf16_to_f32(u16(p + 2 * i));
        return 0;
    case GGML_Q4_0:
    case GGML_Q4_1:
    case GGML_Q8_0:
        break;
    default:
        return ENG_ENOTSUP;
    }
    if (n % 32)
        return ENG_EINVAL;
    for (int64_t b = 0; b < n / 32; b++, dst += 32) {
        if (t == GGML_Q4_0) {
            const uint8_t *blk = p + b * 18;
            float d = eng_f16_to_f32(u16(blk));
            for (int j = 0; j < 16; j++) {
                dst[j] = (float)((blk[2 + j] & 15) - 8) * d;
                dst[j + 16] = (float)((blk[2 + j] >> 4) - 8) * d;
            }
        } else if (t == GGML_Q4_1) {
            const uint8_t *blk = p + b * 20;
            float d = eng_f16_to_f32(u16(blk)), m = eng_f16_to_f32(u16(blk + 2));
            for (int j = 0; j < 16; j++) {
                dst[j] = (float)(blk[4 + j] & 15) * d + m;
                dst[j + 16] = (float)(blk[4 + j] >> 4) * d + m;
            }
        } else {
            const uint8_t *blk = p + b * 34;
            float d = eng_f16_to_f32(u16(blk));
            for (int j = 0; j < 32; j++)
                dst[j] = (float)(int8_t)blk[2 + j] * d;
        }
    }
    return 0;
}
