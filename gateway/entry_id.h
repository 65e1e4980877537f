/*
 * The ids the API shows for cache entries (X-Cache-Entry, GET /admin/cache and its
 * before=, DELETE /admin/cache?id=, `cachegate cache list/delete`). The store numbers
 * entries with row ids counted across tenants, so a tenant that saw two of its own ids
 * would know how many entries the others stored between them. The API shows instead a
 * keyed permutation of the row id: a four-round Feistel network over 52 bits (ids stay
 * exact in a JSON number read as a double), each round HMAC-SHA256 under the store's
 * secret (store_entry_id_key()). Row ids past 52 bits, which no store reaches, are shown as
 * they are. Without the key the ids say nothing of their order or of the count between them.
 */
#ifndef GW_ENTRY_ID_H
#define GW_ENTRY_ID_H

#include <stdint.h>

#include "store.h"

/* The id shown for row id `row` (>= 0). */
int64_t gw_entry_id_show(const store *st, int64_t row);
/* The row id of shown id `id` (>= 0). */
int64_t gw_entry_id_row(const store *st, int64_t id);

/* The same with the key given (STORE_ENTRY_KEY_BYTES). */
int64_t gw_entry_id_permute(const unsigned char *key, int64_t v, int inverse);

#endif
