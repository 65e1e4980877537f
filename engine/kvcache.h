/*
 * kvcache — the paged KV pool (kvc_): fixed blocks of block_size token positions, each
 * holding the keys and values of every layer for those positions. A sequence owns a
 * block table (block ids in position order); position p of a sequence lives in block
 * table[p / block_size] at slot p % block_size. Blocks are refcounted so that sequences
 * can share a cached prefix. Single-threaded: the engine thread owns the pool.
 *
 *   k: [n_layer][n_blocks][n_kv_head][head_dim][block_size]  (transposed within a block)
 *   v: [n_layer][n_blocks][n_kv_head][block_size][head_dim]
 *
 * f32 or f16 (dtype). Within a block one KV head's keys and values are each contiguous,
 * and a key dimension runs along the block's positions: attention scores 16 positions in
 * the lanes of one vector, with no horizontal sums (engine/model.c, attend_group()).
 *
 * bf16 keeps pairs together, as the processors' BF16 dot products (two products summed
 * into each 32-bit lane) take them; head_dim and block_size must be even:
 *
 *   k: [n_layer][n_blocks][n_kv_head][head_dim / 2][block_size][2]  (dimension pairs)
 *   v: [n_layer][n_blocks][n_kv_head][block_size / 2][head_dim][2]  (position pairs)
 *
 * q8_0 stores bytes, each position's head_dim keys (and values) of a KV head sharing one
 * float scale (their largest magnitude / 127), the block's scales after its bytes (at
 * kvc_q8_scales_at()). Keys are unsigned, k + 128, in quads of dimensions, as 8-bit dot
 * products (VPDPBUSD: unsigned by signed bytes, 4 into each 32-bit lane) take them;
 * head_dim must be a multiple of 4. Values are signed, in f32's layout:
 *
 *   k block: uint8 [n_kv_head][head_dim / 4][block_size][4], then float [n_kv_head][block_size]
 *   v block: int8 [n_kv_head][block_size][head_dim], then float [n_kv_head][block_size]
 *
 * A score is then the key's scale times a sum of byte products, and a value's scale can be
 * taken into its probability.
 */
#ifndef ENG_KVCACHE_H
#define ENG_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct kvc_pool kvc_pool;

/* how host storage holds keys and values: IEEE binary16 for KVC_F16 (half the memory and
 * the bandwidth, about 3 significant digits), bfloat16 for KVC_BF16 (the same size, F32's
 * range with about 2 significant digits; attention then runs on BF16 dot products, twice
 * the F32 rate where AVX512_BF16 exists), 8-bit integers with a scale per position and
 * head for KVC_Q8_0 (about a quarter of F32's bytes, 1/254 of a head's largest magnitude
 * at most off) */
enum kvc_dtype { KVC_F32 = 0, KVC_F16 = 1, KVC_BF16 = 2, KVC_Q8_0 = 3 };

struct kvc_shape {
    int n_layer, n_kv_head, head_dim, block_size, n_blocks;
    /* 1: the keys and values live in a device backend's memory (backend.h); the pool
     * keeps only the accounting and kvc_k_block/kvc_v_block return NULL */
    int device_storage;
    enum kvc_dtype dtype; /* host storage only */
};

/* Bytes of keys and values one block holds on the host. */
size_t kvc_block_bytes(const struct kvc_shape *shape);

/* "f32", "f16", "bf16" or "q8_0" */
const char *kvc_dtype_name(enum kvc_dtype dtype);

/* In a q8_0 pool, the byte offset of the scales in a block's keys or values (above). */
size_t kvc_q8_scales_at(const struct kvc_shape *shape);

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

/* A block's keys ([n_kv_head][head_dim][block_size]) and values
 * ([n_kv_head][block_size][head_dim]) in one layer (bf16: in pairs; q8_0: bytes, then
 * scales; above): floats, 16-bit values or bytes as the pool's dtype says; NULL when the
 * storage is on a device. */
void *kvc_k_block(kvc_pool *p, int layer, int32_t block);
void *kvc_v_block(kvc_pool *p, int layer, int32_t block);

/* One layer's values as a base and a stride: block b's are at base + b * stride bytes (as
 * kvc_v_block() says; base NULL when the storage is on a device). For kernels that step
 * from block to block in their inner loops, where a call a block would make them save and
 * restore every register they accumulate in. */
struct kvc_blocks {
    const char *base;
    size_t stride;
};
struct kvc_blocks kvc_v_blocks(kvc_pool *p, int layer);

#endif
