/*
 * kvcache — the paged KV pool (kvc_): fixed blocks of block_size token positions, each
 * holding the keys and values of every layer for those positions. A sequence owns a
 * block table (block ids in position order); position p of a sequence lives in block
 * table[p / block_size] at slot p % block_size. Blocks are refcounted so that sequences
 * can share a cached prefix. Single-threaded: the engine thread owns the pool.
 *
 *   k, v: [n_layer][n_blocks][block_size][n_kv_head][head_dim], f32 or f16 (dtype)
 */
#ifndef ENG_KVCACHE_H
#define ENG_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct kvc_pool kvc_pool;

/* how host storage holds keys and values (IEEE binary16 for KVC_F16: half the memory
 * and the bandwidth, about 3 significant digits) */
enum kvc_dtype { KVC_F32 = 0, KVC_F16 = 1 };

struct kvc_shape {
    int n_layer, n_kv_head, head_dim, block_size, n_blocks;
    /* 1: the keys and values live in a device backend's memory (backend.h); the pool
     * keeps only the accounting and kvc_k/kvc_v return NULL */
    int device_storage;
    enum kvc_dtype dtype; /* host storage only */
};

/* Bytes of keys and values one block holds on the host. */
size_t kvc_block_bytes(const struct kvc_shape *shape);

int kvc_create(const struct kvc_shape *shape, kvc_pool **out);
void kvc_destroy(kvc_pool *p); /* accepts NULL */

const struct kvc_shape *kvc_shape(const kvc_pool *p);
int kvc_free_blocks(const kvc_pool *p);

/* A free block with refcount 1, or ENG_EFULL. */
int kvc_alloc(kvc_pool *p, int32_t *block /* out */);
void kvc_acquire(kvc_pool *p, int32_t block);
/* Drops one reference; at zero the block is free again. */
void kvc_release(kvc_pool *p, int32_t block);
/* Read-only: the block's reference count (0 when free), or ENG_EINVAL for an id outside
 * the pool. For callers that check ids they are handed, and for tests. */
int kvc_refcount(const kvc_pool *p, int32_t block);

/* Where one position's key (or value) vector lives: [n_kv_head][head_dim] floats; NULL
 * when the storage is on a device or in F16. */
float *kvc_k(kvc_pool *p, int layer, int32_t block, int slot);
float *kvc_v(kvc_pool *p, int layer, int32_t block, int slot);
/* The same for an F16 pool ([n_kv_head][head_dim] binary16 values); NULL otherwise. */
uint16_t *kvc_k16(kvc_pool *p, int layer, int32_t block, int slot);
uint16_t *kvc_v16(kvc_pool *p, int layer, int32_t block, int slot);

#endif
