/*
 * kvcache — the paged KV pool (kvc_): fixed blocks of block_size token positions, each
 * holding the keys and values of every layer for those positions. A sequence owns a
 * block table (block ids in position order); position p of a sequence lives in block
 * table[p / block_size] at slot p % block_size. Blocks are refcounted so that sequences
 * can share a cached prefix. Single-threaded: the engine thread owns the pool.
 *
 * A layer's storage goes KV head by KV head, and within a head block by block (a "head
 * block": one KV head's keys, or values, of one block):
 *
 *   k: [n_layer][n_kv_head][n_blocks][head_dim][block_size]  (transposed within a block)
 *   v: [n_layer][n_kv_head][n_blocks][block_size][head_dim]
 *
 * so the blocks of a prompt, handed out in order, are one run of memory for each head that
 * attention streams through. With the heads inside each block, one head's blocks were runs
 * of 2 KB a whole block apart, which the hardware prefetchers do not follow: a pass of 6
 * queries over 1,150 cached F16 positions in memory took 10.0-10.7 ns a position and head
 * to weigh the values that way, 6.9-7.1 ns this way (scores 7.6-7.8 -> 7.1-7.4 ns); a
 * decode step of 16 sequences over 4 such prompts 20.5-21.2 -> 19.2-19.3 ms, of one
 * sequence 4.6-4.8 -> 4.3-4.4 ms. A key dimension runs along the block's positions:
 * attention scores 16 positions in the lanes of one vector, with no horizontal sums
 * (engine/model.c, attend_group()). f32 or f16 (dtype) as above.
 *
 * bf16 keeps pairs together, as the processors' BF16 dot products (two products summed
 * into each 32-bit lane) take them; head_dim and block_size must be even:
 *
 *   k: [n_layer][n_kv_head][n_blocks][head_dim / 2][block_size][2]  (dimension pairs)
 *   v: [n_layer][n_kv_head][n_blocks][block_size / 2][head_dim][2]  (position pairs)
 *
 * q8_0 stores bytes, each position's head_dim keys (and values) of a KV head sharing one
 * float scale (their largest magnitude / 127), a head block's scales after its bytes (at
 * kvc_q8_scales_at()). Keys are unsigned, k + 128, in quads of dimensions, as 8-bit dot
 * products (VPDPBUSD: unsigned by signed bytes, 4 into each 32-bit lane) take them;
 * head_dim must be a multiple of 4. Values are signed, in f32's layout:
 *
 *   k head block: uint8 [head_dim / 4][block_size][4], then float [block_size]
 *   v head block: int8 [block_size][head_dim], then float [block_size]
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
     * keeps only the accounting and kvc_k_head/kvc_v_head return NULL */
    int device_storage;
    enum kvc_dtype dtype; /* host storage only */
};

/* Bytes of keys and values one block holds on the host. */
size_t kvc_block_bytes(const struct kvc_shape *shape);

/* "f32", "f16", "bf16" or "q8_0" */
const char *kvc_dtype_name(enum kvc_dtype dtype);

/* In a q8_0 pool, the byte offset of the scales in a head block's keys or values (above). */
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

/* One KV head's keys ([head_dim][block_size]) and values ([block_size][head_dim]) of a
 * block in one layer (bf16: in pairs; q8_0: bytes, then scales; above): floats, 16-bit
 * values or bytes as the pool's dtype says; NULL when the storage is on a device. */
void *kvc_k_head(kvc_pool *p, int layer, int32_t block, int head);
void *kvc_v_head(kvc_pool *p, int layer, int32_t block, int head);

/* One KV head's keys or values in one layer as a base and a stride: block b's are at base
 * + b * stride bytes (as kvc_k_head() and kvc_v_head() say; base NULL when the storage is
 * on a device). For kernels that step from block to block in their inner loops, where a
 * call a block would make them save and restore every register they accumulate in. */
struct kvc_blocks {
    const char *base;
    size_t stride;
};
struct kvc_blocks kvc_k_blocks(kvc_pool *p, int layer, int head);
struct kvc_blocks kvc_v_blocks(kvc_pool *p, int layer, int head);

#endif
