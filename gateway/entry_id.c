#include "entry_id.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

enum { HALF = 26, ROUNDS = 4 };
static const uint32_t HALF_MASK = (1u << HALF) - 1;

/* round i's function of the half x: HMAC-SHA256(key, i || x), cut to 26 bits */
static uint32_t round_fn(const unsigned char *key, int i, uint32_t x)
{
    unsigned char in[5] = {(unsigned char)i, (unsigned char)(x >> 24), (unsigned char)(x >> 16),
                           (unsigned char)(x >> 8), (unsigned char)x};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key, STORE_ENTRY_KEY_BYTES, in, sizeof in, md, &len);
    return ((uint32_t)md[0] << 24 | (uint32_t)md[1] << 16 | (uint32_t)md[2] << 8 | md[3]) &
           HALF_MASK;
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
