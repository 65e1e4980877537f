#include "entry_id.h"

#include <string.h>

enum { HALF = 26, ROUNDS = 8 };
static const uint32_t HALF_MASK = (1u << HALF) - 1;

static uint64_t rotl(uint64_t x, int b)
{
    return x << b | x >> (64 - b);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define SIP_ROUND(v0, v1, v2, v3)                                                              \
    do {                                                                                       \
        v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                              \
        v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                                 \
        v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                                 \
        v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                              \
    } while (0)

/* SipHash-2-4 (Aumasson and Bernstein, 2012), from its paper's definition */
uint64_t gw_siphash24(const unsigned char *key, const void *msg, size_t n)
{
    const unsigned char *m = msg;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = le64(m + i);
        v3 ^= w;
        SIP_ROUND(v0, v1, v2, v3);
        SIP_ROUND(v0, v1, v2, v3);
        v0 ^= w;
    }
    uint64_t b = (uint64_t)(n & 0xff) << 56; /* the length's low byte, then what is left */
    for (size_t k = 0; i + k < n; k++)
        b |= (uint64_t)m[i + k] << (8 * k);
    v3 ^= b;
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (int r = 0; r < 4; r++)
        SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* round k's function of the half x: SipHash-2-4 of (k, x), 8 bytes little-endian, under the
 * key's first 16 bytes, cut to 26 bits */
static uint32_t round_fn(const unsigned char *key, int k, uint32_t x)
{
    unsigned char in[8];
    uint64_t w = (uint64_t)k << 32 | x;
    for (int i = 0; i < 8; i++)
        in[i] = (unsigned char)(w >> (8 * i));
    return (uint32_t)gw_siphash24(key, in, sizeof in) & HALF_MASK;
}

int64_t gw_entry_id_permute(const unsigned char *key, int64_t v, int inverse)
{
    if (v < 0 || v >> (2 * HALF)) /* (past 52 bits: as it is) */
        return v;
    uint32_t l = (uint32_t)(v >> HALF) & HALF_MASK, r = (uint32_t)v & HALF_MASK;
    for (int k = 0; k < ROUNDS; k++) {
        if (!inverse) { /* (l, r) -> (r, l ^ F(r)) */
            uint32_t t = l ^ round_fn(key, k, r);
            l = r;
            r = t;
        } else { /* undone from the last round back */
            uint32_t t = r ^ round_fn(key, ROUNDS - 1 - k, l);
            r = l;
            l = t;
        }
    }
    return (int64_t)l << HALF | r;
}

int64_t gw_entry_id_show(const store *st, int64_t row)
{
    return gw_entry_id_permute(store_entry_id_key(st), row, 0);
}

int64_t gw_entry_id_row(const store *st, int64_t id)
{
    return gw_entry_id_permute(store_entry_id_key(st), id, 1);
}
