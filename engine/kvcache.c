#include "kvcache.h"

#include "engine.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct kvc_pool {
    struct kvc_shape s;
    /* bytes of one head block's keys (or values), of one head's in a layer, of a layer's */
    size_t head_bytes, head_stride, layer_bytes;
    void *k, *v;
    size_t bytes; /* of each of k and v, as mapped */
    int32_t *refs;
    int32_t *free_list; /* stack of free block ids */
    int n_free;
};

/* bytes of one stored key or value element (Q8_0: its 8 bits, without the scales) */
static size_t elem_bytes(enum kvc_dtype dtype)
{
    return dtype == KVC_F32 ? sizeof(float) : dtype == KVC_Q8_0 ? 1 : sizeof(uint16_t);
}

/* bytes of one KV head's keys (or values) of one block in one layer: a Q8_0 head block's
 * scales follow its 8-bit values */
static size_t head_bytes(const struct kvc_shape *s)
{
    size_t n = (size_t)s->head_dim * s->block_size * elem_bytes(s->dtype);
    if (s->dtype == KVC_Q8_0)
        n += (size_t)s->block_size * sizeof(float);
    return n;
}

/*
 * Storage for keys or values: a mapping of its own, on transparent huge pages where the
 * kernel gives them (a step's attention reads blocks scattered over the whole pool, and
 * 4 KiB pages cost a TLB miss every 4 KiB), touched page by page here, so that the first
 * requests do not pay the page faults (tests/bench/bench_engine, 16 sequences decoding over
 * a 1,200-token prompt: 1.6 ms of a 25 ms step went to faulting in fresh blocks, and the
 * attention took 5-10% less time on huge pages). A pool's memory is then resident from
 * the start, as llama.cpp's and vLLM's are.
 */
static void *pool_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: without it, 4 KiB pages */
#endif
    /* on the caller's OpenMP threads (the engine's, engine.threads), 2 MiB (a huge page's
     * size) at a time: the kernel's clearing of the pages is most of a server's start-up */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), chunk = (size_t)2 << 20;
    const long n = (long)((bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (n > 1)
    for (long c = 0; c < n; c++) {
        const size_t lo = (size_t)c * chunk, hi = lo + chunk < bytes ? lo + chunk : bytes;
        for (size_t o = lo; o < hi; o += page)
            ((volatile char *)p)[o] = 0;
    }
    return p;
}

int kvc_create(const struct kvc_shape *s, kvc_pool **out)
{
    *out = NULL;
    if (s->n_layer <= 0 || s->n_kv_head <= 0 || s->head_dim <= 0 || s->block_size <= 0 ||
        s->n_blocks <= 0 || s->dtype < KVC_F32 || s->dtype > KVC_Q8_0)
        return ENG_EINVAL;
    if (s->dtype == KVC_BF16 && (s->head_dim % 2 || s->block_size % 2))
        return ENG_EINVAL; /* (pairs: kvcache.h) */
    if (s->dtype == KVC_Q8_0 && s->head_dim % 4)
        return ENG_EINVAL; /* (quads) */
    kvc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return ENG_ENOMEM;
    p->s = *s;
    p->head_bytes = head_bytes(s);
    p->head_stride = p->head_bytes * s->n_blocks;
    p->layer_bytes = p->head_stride * s->n_kv_head;
    if (!s->device_storage) {
        p->bytes = p->layer_bytes * s->n_layer;
        p->k = pool_map(p->bytes);
        p->v = pool_map(p->bytes);
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
    if (p->k)
        munmap(p->k, p->bytes);
    if (p->v)
        munmap(p->v, p->bytes);
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
    return 2 * (size_t)s->n_layer * s->n_kv_head * head_bytes(s);
}

const char *kvc_dtype_name(enum kvc_dtype dtype)
{
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    return dtype >= KVC_F32 && dtype <= KVC_Q8_0 ? names[dtype] : "?";
}

size_t kvc_q8_scales_at(const struct kvc_shape *s)
{
    return (size_t)s->head_dim * s->block_size;
}

/* head's keys or values of block in layer of base (p->k or p->v); NULL on a device */
static void *head_at(const kvc_pool *p, void *base, int layer, int32_t block, int head)
{
    if (!base)
        return NULL;
    return (char *)base + layer * p->layer_bytes + head * p->head_stride +
           block * p->head_bytes;
}

void *kvc_k_head(kvc_pool *p, int layer, int32_t block, int head)
{
    return head_at(p, p->k, layer, block, head);
}

void *kvc_v_head(kvc_pool *p, int layer, int32_t block, int head)
{
    return head_at(p, p->v, layer, block, head);
}

struct kvc_blocks kvc_k_blocks(kvc_pool *p, int layer, int head)
{
    return (struct kvc_blocks){head_at(p, p->k, layer, 0, head), p->head_bytes};
}

struct kvc_blocks kvc_v_blocks(kvc_pool *p, int layer, int head)
{
    return (struct kvc_blocks){head_at(p, p->v, layer, 0, head), p->head_bytes};
}
