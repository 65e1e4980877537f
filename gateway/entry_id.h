/*
 * The ids the API shows for cache entries (X-Cache-Entry, GET /admin/cache and its
 * before=, DELETE /admin/cache?id=, `cachegate cache list/delete`). The store numbers
 * entries with row ids counted across tenants, so a tenant that saw two of its own ids
 * would know how many entries the others stored between them. The API shows instead a
 * keyed permutation of the row id: an eight-round Feistel network over 52 bits (ids stay
 * exact in a JSON number read as a double), each round's function SipHash-2-4 (a keyed
 * pseudorandom function made for short inputs: some 20 ns a round, so an exact hit's header
 * costs next to nothing) under the store's secret (store_entry_id_key()). Without the key
 * the ids say nothing of their order or of the count between them.
 */
#ifndef GW_ENTRY_ID_H
#define GW_ENTRY_ID_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* The id shown for row id `row`, and the row id of shown id `id`: values in [0, 2^52) map
 * onto that range; others (negative, or past 52 bits, which no store reaches) are their
 * own image. */
int64_t gw_entry_id_show(const store *st, int64_t row);
int64_t gw_entry_id_row(const store *st, int64_t id);

/* The same with the key given (its first 16 bytes are SipHash's key); inverse: row of id. */
int64_t gw_entry_id_permute(const unsigned char *key, int64_t v, int inverse);
/* SipHash-2-4 of msg[0..n) under the 16-byte key. */
uint64_t gw_siphash24(const unsigned char *key, const void *msg, size_t n);

#endif
