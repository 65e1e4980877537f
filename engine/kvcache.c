#include "kvcache.h"

#include "engine.h"

#include <assert.h>
#include <stdlib.h>

struct kvc_pool {
    struct kvc_shape s;
    size_t block_elems, layer_elems; /* values (F32, F16 or BF16) */
    void *k, *v;
    int32_t *refs;
    int32_t *free_list; /* stack of free block ids */
    int n_free;
};

int kvc_create(const struct kvc_shape *s, kvc_pool **out)
{
    *out = NULL;
    if (s->n_layer <= 0 || s->n_kv_head <= 0 || s->head_dim <= 0 || s->block_size <= 0 ||
        s->n_blocks <= 0 || (s->dtype != KVC_F32 && s->dtype != KVC_F16 && s->dtype != KVC_BF16))
        return ENG_EINVAL;
    if (s->dtype == KVC_BF16 && (s->head_dim % 2 || s->block_size % 2))
        return ENG_EINVAL; /* (pairs: kvcache.h) */
    kvc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return ENG_ENOMEM;
    p->s = *s;
    p->block_elems = (size_t)s->n_kv_head * s->head_dim * s->block_size;
    p->layer_elems = p->block_elems * s->n_blocks;
    size_t total = p->layer_elems * s->n_layer;
    if (!s->device_storage) {
        size_t elem = s->dtype == KVC_F32 ? sizeof(float) : sizeof(uint16_t);
        p->k = malloc(total * elem);
        p->v = malloc(total * elem);
    }
    p->refs = calloc((size_t)s->n_blocks, sizeof *p->refs);
    p->free_list = malloc((size_t)s->n_blocks * sizeof *p->free_list);
    if ((!s->device_storage && (!p->k || !p->v)) || !p->refs || !p->free_list) {
        kvc_destroy(p);
        return ENG_ENOMEM;
    }
    for (int i = 0; i < s->n_blocks; i++)
        p->free_list[i] = s->n_blocks - 1 - i; /* block 0 is handed out first */
    p->n_free = s->n_blocks;
    *out = p;
    return 0;
}

void kvc_destroy(kvc_pool *p)
{
    if (!p)
        return;
    free(p->k);
    free(p->v);
    free(p->refs);
    free(p->free_list);
    free(p);
}

const struct kvc_shape *kvc_shape(const kvc_pool *p)
{
    return &p->s;
}

int kvc_free_blocks(const kvc_pool *p)
{
    return p->n_free;
}

int kvc_alloc(kvc_pool *p, int32_t *block)
{
    if (p->n_free == 0)
        return ENG_EFULL;
    int32_t b = p->free_list[--p->n_free];
    p->refs[b] = 1;
    *block = b;
    return 0;
}

void kvc_acquire(kvc_pool *p, int32_t b)
{
    assert(b >= 0 && b < p->s.n_blocks && p->refs[b] > 0);
    p->refs[b]++;
}

void kvc_release(kvc_pool *p, int32_t b)
{
    assert(b >= 0 && b < p->s.n_blocks && p->refs[b] > 0);
    if (--p->refs[b] == 0)
        p->free_list[p->n_free++] = b;
}

int kvc_refcount(const kvc_pool *p, int32_t b)
{
    if (b < 0 || b >= p->s.n_blocks)
        return ENG_EINVAL;
    return p->refs[b];
}

size_t kvc_block_bytes(const struct kvc_shape *s)
{
    size_t elem = s->dtype == KVC_F32 ? sizeof(float) : sizeof(uint16_t);
    return 2 * (size_t)s->n_layer * s->block_size * s->n_kv_head * s->head_dim * elem;
}

/* block's keys or values in layer of base (p->k or p->v); NULL on a device */
static void *block_at(const kvc_pool *p, void *base, int layer, int32_t block)
{
    if (!base)
        return NULL;
    size_t i = layer * p->layer_elems + block * p->block_elems;
    return p->s.dtype == KVC_F32 ? (void *)((float *)base + i) : (void *)((uint16_t *)base + i);
}

void *kvc_k_block(kvc_pool *p, int layer, int32_t block)
{
    return block_at(p, p->k, layer, block);
}

void *kvc_v_block(kvc_pool *p, int layer, int32_t block)
{
    return block_at(p, p->v, layer, block);
}
