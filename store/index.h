/*
 * index — one tenant's vector index over the FAISS C API (internal to the store).
 *
 * Vectors are L2-normalized embeddings; scores are inner products (= cosine). Ids are
 * the cache entries' SQLite row ids. Two kinds:
 *   SIDX_FLAT  "IDMap2,Flat": exact search; removal is real (remove_ids).
 *   SIDX_HNSW  "IDMap2,HNSW32": approximate; FAISS 1.7.3's HNSW cannot remove ids, so a
 *              removed id becomes a tombstone that searches skip; the owner rebuilds the
 *              index (sidx_create + sidx_add from SQLite) when tombstones pile up.
 * Thread safety: any number of sidx_search() calls may run at once, concurrently with
 * one writer (add/remove/save); an internal rwlock orders them.
 */
#ifndef STORE_INDEX_H
#define STORE_INDEX_H

#include <stdint.h>

enum sidx_kind { SIDX_FLAT = 0, SIDX_HNSW = 1 };

typedef struct sidx sidx;

/* Return codes: 0, or one of these (negative). */
#define SIDX_ENOMEM (-1)
#define SIDX_EFAISS (-2)    /* FAISS reported an error (message in sidx_last_error) */
#define SIDX_EIO (-3)       /* a file could not be read or written */
#define SIDX_EMISMATCH (-4) /* a saved file's kind, dimension or ids do not match */
#define SIDX_EINVAL (-5)

int sidx_create(int dim, enum sidx_kind kind, sidx **out);
void sidx_free(sidx *ix); /* accepts NULL */

int sidx_add(sidx *ix, int64_t n, const float *vecs /* [n][dim] */, const int64_t *ids);
/* Removes ids (missing ones are ignored). HNSW: tombstones them. */
int sidx_remove(sidx *ix, int64_t n, const int64_t *ids);

/* The best k live entries for q, best first; *found <= k of them are filled. */
int sidx_search(sidx *ix, const float *q, int k, float *scores, int64_t *ids, int *found);

int64_t sidx_count(sidx *ix);      /* live entries */
int64_t sidx_tombstones(sidx *ix); /* HNSW: removed but still in the graph; FLAT: 0 */
enum sidx_kind sidx_get_kind(sidx *ix);
int sidx_dim(sidx *ix);

/* Writes the index (with its tombstones) to path atomically (path.tmp, fsync, rename). */
int sidx_save(sidx *ix, const char *path);
/*
 * Loads path. ids[n] (ascending) are the live ids the database holds for this tenant:
 * the file is used only if its kind and dimension match and its live ids are exactly
 * these; otherwise SIDX_EMISMATCH (and the caller rebuilds from the database).
 */
int sidx_load(const char *path, int dim, enum sidx_kind kind, const int64_t *ids, int64_t n,
              sidx **out);

/* The last FAISS error message of this thread ("" when none). */
const char *sidx_last_error(void);

#endif
