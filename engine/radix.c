#include "radix.h"

#include "engine.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { NODE_ROOT, NODE_NS, NODE_RUN };

struct rdx_node {
    rdx_node *parent;
    rdx_node *first_child, *prev_sibling, *next_sibling; /* children in no order */
    rdx_node *hnext;                                     /* chain in the tree's child table */
    uint64_t id;        /* serial; names the node as a parent in the child table */
    uint64_t key;       /* namespace value (NODE_NS), or hash of the first block's tokens */
    uint64_t last_used; /* tree clock at the last match or insert through the node */
    int32_t *tokens;    /* [n_blocks * block_size], inside this allocation */
    int32_t *blocks;    /* [n_blocks], inside this allocation */
    int n_blocks;       /* 0 for the root and namespace nodes */
    int n_children;
    int lock;     /* outstanding handles at this node or below */
    int heap_idx; /* position in the LRU heap, -1 when not there */
    int kind;
};

struct rdx_tree {
    kvc_pool *pool;
    int bs;            /* tokens per block */
    int n_pool_blocks; /* blocks in the pool */
    rdx_node root;
    /* child table: (parent id, key) -> node, chained; every node but the root is in it */
    rdx_node **buckets;
    size_t n_buckets; /* a power of two */
    size_t n_nodes;
    rdx_node **heap; /* min-heap of evictable leaves by (last_used, id) */
    int heap_len, heap_cap;
    uint8_t *held; /* [n_pool_blocks]: 1 where the tree stores the block */
    uint64_t clock, next_id;
    int held_blocks, evictable_blocks;
};

/* ---- hashing ---- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_run(const int32_t *tokens, int bs)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < bs; i++)
        h = (h ^ (uint32_t)tokens[i]) * 0x100000001b3ULL;
    return mix64(h);
}

static size_t bucket_of(const rdx_tree *t, uint64_t parent_id, uint64_t key)
{
    return (size_t)mix64(key ^ mix64(parent_id)) & (t->n_buckets - 1);
}

static bool same_block(const int32_t *a, const int32_t *b, int bs)
{
    return memcmp(a, b, (size_t)bs * sizeof *a) == 0;
}

/* ---- child table ---- */

/* Growing is optional: when it cannot allocate, the chains just get longer. */
static void table_grow(rdx_tree *t)
{
    size_t n = t->n_buckets * 2;
    rdx_node **nb = calloc(n, sizeof *nb);
    if (!nb) return;
    rdx_node **old = t->buckets;
    size_t n_old = t->n_buckets;
    t->buckets = nb;
    t->n_buckets = n;
    for (size_t i = 0; i < n_old; i++) {
        rdx_node *c = old[i];
        while (c) {
            rdx_node *next = c->hnext;
            size_t b = bucket_of(t, c->parent->id, c->key);
            c->hnext = nb[b];
            nb[b] = c;
            c = next;
        }
    }
    free(old);
}

static void table_add(rdx_tree *t, rdx_node *n)
{
    size_t b = bucket_of(t, n->parent->id, n->key);
    n->hnext = t->buckets[b];
    t->buckets[b] = n;
    if (++t->n_nodes > t->n_buckets) table_grow(t);
}

static void table_del(rdx_tree *t, rdx_node *n)
{
    rdx_node **pp = &t->buckets[bucket_of(t, n->parent->id, n->key)];
    while (*pp != n) {
        assert(*pp);
        pp = &(*pp)->hnext;
    }
    *pp = n->hnext;
    n->hnext = NULL;
    t->n_nodes--;
}

static rdx_node *find_ns(const rdx_tree *t, uint64_t ns)
{
    for (rdx_node *c = t->buckets[bucket_of(t, t->root.id, ns)]; c; c = c->hnext)
        if (c->parent == &t->root && c->key == ns) return c;
    return NULL;
}

/* The child of parent (a namespace or run node) whose run starts with block tok. */
static rdx_node *find_child(const rdx_tree *t, const rdx_node *parent, const int32_t *tok)
{
    uint64_t key = hash_run(tok, t->bs);
    for (rdx_node *c = t->buckets[bucket_of(t, parent->id, key)]; c; c = c->hnext)
        if (c->parent == parent && c->key == key && same_block(c->tokens, tok, t->bs)) return c;
    return NULL;
}

/* ---- children lists ---- */

static void link_child(rdx_node *parent, rdx_node *c)
{
    c->parent = parent;
    c->prev_sibling = NULL;
    c->next_sibling = parent->first_child;
    if (parent->first_child) parent->first_child->prev_sibling = c;
    parent->first_child = c;
    parent->n_children++;
}

static void unlink_child(rdx_node *c)
{
    rdx_node *p = c->parent;
    if (c->prev_sibling)
        c->prev_sibling->next_sibling = c->next_sibling;
    else
        p->first_child = c->next_sibling;
    if (c->next_sibling) c->next_sibling->prev_sibling = c->prev_sibling;
    c->prev_sibling = c->next_sibling = NULL;
    p->n_children--;
}

/* c takes old's place among old's siblings (old must be unlinked or relinked after). */
static void replace_child(rdx_node *old, rdx_node *c)
{
    rdx_node *p = old->parent;
    c->parent = p;
    c->prev_sibling = old->prev_sibling;
    c->next_sibling = old->next_sibling;
    if (c->prev_sibling)
        c->prev_sibling->next_sibling = c;
    else
        p->first_child = c;
    if (c->next_sibling) c->next_sibling->prev_sibling = c;
    old->prev_sibling = old->next_sibling = NULL;
}

/* ---- LRU heap of evictable leaves ---- */

static bool heap_less(const rdx_node *a, const rdx_node *b)
{
    return a->last_used < b->last_used || (a->last_used == b->last_used && a->id < b->id);
}

static void heap_set(rdx_tree *t, int i, rdx_node *n)
{
    t->heap[i] = n;
    n->heap_idx = i;
}

static void heap_up(rdx_tree *t, int i)
{
    rdx_node *n = t->heap[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!heap_less(n, t->heap[p])) break;
        heap_set(t, i, t->heap[p]);
        i = p;
    }
    heap_set(t, i, n);
}

static void heap_down(rdx_tree *t, int i)
{
    rdx_node *n = t->heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= t->heap_len) break;
        if (c + 1 < t->heap_len && heap_less(t->heap[c + 1], t->heap[c])) c++;
        if (!heap_less(t->heap[c], n)) break;
        heap_set(t, i, t->heap[c]);
        i = c;
    }
    heap_set(t, i, n);
}

/* Room for every run node is reserved before a node is created, so this cannot fail. */
static void heap_push(rdx_tree *t, rdx_node *n)
{
    assert(n->heap_idx < 0 && t->heap_len < t->heap_cap);
    t->heap[t->heap_len] = n;
    n->heap_idx = t->heap_len++;
    heap_up(t, n->heap_idx);
}

static void heap_remove(rdx_tree *t, rdx_node *n)
{
    int i = n->heap_idx;
    assert(i >= 0 && i < t->heap_len && t->heap[i] == n);
    n->heap_idx = -1;
    rdx_node *last = t->heap[--t->heap_len];
    if (i == t->heap_len) return;
    heap_set(t, i, last);
    heap_up(t, i);
    heap_down(t, last->heap_idx);
}

static int heap_reserve(rdx_tree *t, size_t extra)
{
    size_t need = t->n_nodes + extra;
    if (need <= (size_t)t->heap_cap) return 0;
    if (need > (size_t)(INT32_MAX / 2)) return ENG_ENOMEM;
    int cap = t->heap_cap ? t->heap_cap : 16;
    while ((size_t)cap < need)
        cap *= 2;
    rdx_node **h = realloc(t->heap, (size_t)cap * sizeof *h);
    if (!h) return ENG_ENOMEM;
    t->heap = h;
    t->heap_cap = cap;
    return 0;
}

static bool is_evictable(const rdx_node *n)
{
    return n->kind == NODE_RUN && n->n_children == 0 && n->lock == 0;
}

/* Puts n in the heap or takes it out, after its children or lock changed. */
static void heap_update(rdx_tree *t, rdx_node *n)
{
    bool want = is_evictable(n);
    if (want && n->heap_idx < 0)
        heap_push(t, n);
    else if (!want && n->heap_idx >= 0)
        heap_remove(t, n);
}

/* ---- nodes ---- */

static rdx_node *node_new(rdx_tree *t, int kind, int n_blocks)
{
    size_t n_tok = (size_t)n_blocks * t->bs;
    rdx_node *n = malloc(sizeof *n + (n_tok + (size_t)n_blocks) * sizeof(int32_t));
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->tokens = (int32_t *)(n + 1);
    n->blocks = n->tokens + n_tok;
    n->n_blocks = n_blocks;
    n->heap_idx = -1;
    n->kind = kind;
    n->id = t->next_id++;
    return n;
}

/* Refreshes the time of n and of every node above it. Only n can be in the heap (the others
 * have children), and its key only grows. */
static void touch(rdx_tree *t, rdx_node *n)
{
    uint64_t now = ++t->clock;
    if (n->heap_idx >= 0) {
        n->last_used = now;
        heap_down(t, n->heap_idx);
        n = n->parent;
    }
    for (; n != &t->root; n = n->parent)
        n->last_used = now;
}

/* Cuts n after its first k blocks (0 < k < n->n_blocks): p, fresh from node_new(k), takes
 * those blocks and n's place; n keeps the tail and its identity and becomes p's child. */
static void split(rdx_tree *t, rdx_node *n, int k, rdx_node *p)
{
    assert(k > 0 && k < n->n_blocks && p->n_blocks == k && n->kind == NODE_RUN);
    size_t bs = (size_t)t->bs;
    memcpy(p->tokens, n->tokens, k * bs * sizeof *p->tokens);
    memcpy(p->blocks, n->blocks, (size_t)k * sizeof *p->blocks);
    p->key = n->key; /* same first block */
    p->lock = n->lock;
    p->last_used = n->last_used;

    table_del(t, n);
    replace_child(n, p);
    table_add(t, p);

    /* keep the tail where rdx_check() expects it: tokens first, blocks right after */
    int rest = n->n_blocks - k;
    memmove(n->tokens, n->tokens + k * bs, rest * bs * sizeof *n->tokens);
    memmove(n->tokens + rest * bs, n->blocks + k, (size_t)rest * sizeof *n->blocks);
    n->blocks = n->tokens + rest * bs;
    n->n_blocks = rest;
    n->key = hash_run(n->tokens, t->bs);
    link_child(p, n);
    table_add(t, n);
    /* n's heap membership is unchanged (same children, same lock); p has a child */
}

/* Follows tokens[0..nblk blocks) down from the namespace node ns. Returns how many blocks
 * matched; *end is the deepest node reached and *k how many of its blocks matched
 * (*k == (*end)->n_blocks unless the match ends inside it). */
static int descend(const rdx_tree *t, rdx_node *ns, const int32_t *tokens, int nblk, rdx_node **end,
                   int *k)
{
    int bs = t->bs, i = 0;
    rdx_node *cur = ns;
    *k = 0;
    while (i < nblk) {
        rdx_node *c = find_child(t, cur, tokens + (size_t)i * bs);
        if (!c) break;
        int j = 1; /* the lookup matched the first block */
        while (j < c->n_blocks && i + j < nblk &&
               same_block(c->tokens + (size_t)j * bs, tokens + (size_t)(i + j) * bs, bs))
            j++;
        i += j;
        if (j < c->n_blocks) {
            *end = c;
            *k = j;
            return i;
        }
        cur = c;
    }
    *end = cur;
    *k = cur->n_blocks;
    return i;
}

static void lock_path(rdx_tree *t, rdx_node *n)
{
    for (; n != &t->root; n = n->parent) {
        if (n->lock++ == 0) {
            t->evictable_blocks -= n->n_blocks;
            heap_update(t, n);
        }
    }
}

static void release_blocks(rdx_tree *t, rdx_node *n)
{
    for (int i = 0; i < n->n_blocks; i++) {
        t->held[n->blocks[i]] = 0;
        kvc_release(t->pool, n->blocks[i]);
    }
}

/* Removes an evictable leaf (and its namespace node when that was the last child). */
static void evict_leaf(rdx_tree *t, rdx_node *n)
{
    assert(is_evictable(n) && n->heap_idx >= 0);
    heap_remove(t, n);
    release_blocks(t, n);
    t->held_blocks -= n->n_blocks;
    t->evictable_blocks -= n->n_blocks;
    rdx_node *p = n->parent;
    table_del(t, n);
    unlink_child(n);
    free(n);
    if (p->kind == NODE_NS && p->n_children == 0) {
        assert(p->lock == 0);
        table_del(t, p);
        unlink_child(p);
        free(p);
    } else {
        heap_update(t, p);
    }
}

/* ---- public ---- */

int rdx_create(kvc_pool *pool, rdx_tree **out)
{
    if (!out) return ENG_EINVAL;
    *out = NULL;
    if (!pool) return ENG_EINVAL;
    const struct kvc_shape *s = kvc_shape(pool);
    rdx_tree *t = calloc(1, sizeof *t);
    if (!t) return ENG_ENOMEM;
    t->pool = pool;
    t->bs = s->block_size;
    t->n_pool_blocks = s->n_blocks;
    t->root.kind = NODE_ROOT;
    t->root.heap_idx = -1;
    t->root.id = t->next_id++;
    t->n_buckets = 64;
    t->buckets = calloc(t->n_buckets, sizeof *t->buckets);
    t->held = calloc((size_t)t->n_pool_blocks, sizeof *t->held);
    if (!t->buckets || !t->held) goto fail;
    *out = t;
    return 0;
fail:
    rdx_destroy(t);
    return ENG_ENOMEM;
}

void rdx_destroy(rdx_tree *t)
{
    if (!t) return;
    /* post-order walk over the children lists, freeing as it climbs */
    rdx_node *n = t->root.first_child;
    while (n) {
        if (n->first_child) {
            n = n->first_child;
            continue;
        }
        rdx_node *p = n->parent;
        release_blocks(t, n);
        unlink_child(n);
        free(n);
        n = p == &t->root ? t->root.first_child : p;
    }
    free(t->buckets);
    free(t->heap);
    free(t->held);
    free(t);
}

int rdx_match(rdx_tree *t, uint64_t ns, const int32_t *tokens, int n, int32_t *blocks,
              int max_blocks, int *n_matched_tokens, rdx_node **lock)
{
    if (n_matched_tokens) *n_matched_tokens = 0;
    if (lock) *lock = NULL;
    if (!t || !n_matched_tokens || !lock || n < 0 || (n > 0 && !tokens) || max_blocks < 0 ||
        (max_blocks > 0 && !blocks))
        return ENG_EINVAL;
    int nblk = n / t->bs;
    if (nblk > max_blocks) nblk = max_blocks;
    rdx_node *nsn = find_ns(t, ns);
    if (nblk == 0 || !nsn) return 0;
    rdx_node *end;
    int k;
    int total = descend(t, nsn, tokens, nblk, &end, &k);
    if (total == 0) return 0;
    if (k < end->n_blocks) {
        int rc = heap_reserve(t, 1);
        if (rc) return rc;
        rdx_node *p = node_new(t, NODE_RUN, k);
        if (!p) return ENG_ENOMEM;
        split(t, end, k, p);
        end = p;
    }
    int pos = total;
    for (rdx_node *m = end; m != nsn; m = m->parent) {
        pos -= m->n_blocks;
        assert(pos >= 0);
        memcpy(blocks + pos, m->blocks, (size_t)m->n_blocks * sizeof *blocks);
    }
    assert(pos == 0);
    for (int i = 0; i < total; i++)
        kvc_acquire(t->pool, blocks[i]);
    lock_path(t, end);
    touch(t, end);
    *n_matched_tokens = total * t->bs;
    *lock = end;
    return 0;
}

void rdx_unlock(rdx_tree *t, rdx_node *lock)
{
    if (!t || !lock) return;
    for (rdx_node *n = lock; n != &t->root; n = n->parent) {
        assert(n->lock > 0);
        if (--n->lock == 0) {
            t->evictable_blocks += n->n_blocks;
            heap_update(t, n);
        }
    }
}

int rdx_insert(rdx_tree *t, uint64_t ns, const int32_t *tokens, int n, const int32_t *blocks)
{
    if (!t || n < 0) return ENG_EINVAL;
    int nblk = n / t->bs;
    if (nblk == 0) return 0;
    if (!tokens || !blocks) return ENG_EINVAL;
    for (int i = 0; i < nblk; i++)
        if (kvc_refcount(t->pool, blocks[i]) <= 0) return ENG_EINVAL;

    rdx_node *nsn = find_ns(t, ns), *end = nsn;
    int k = 0, total = 0;
    if (nsn) total = descend(t, nsn, tokens, nblk, &end, &k);
    if (total == nblk) {
        touch(t, end);
        return 0;
    }

    /* The new blocks must be stored nowhere else in the tree, and listed once: mark them,
     * then unmark. */
    int bad = nblk;
    for (int i = total; i < nblk; i++) {
        if (t->held[blocks[i]]) {
            bad = i;
            break;
        }
        t->held[blocks[i]] = 2;
    }
    for (int i = total; i < bad; i++)
        t->held[blocks[i]] = 0;
    if (bad < nblk) return ENG_EINVAL;

    rdx_node *new_ns = NULL, *p = NULL, *leaf = NULL;
    int rc = heap_reserve(t, 3);
    if (rc) return rc;
    if (!nsn && !(new_ns = node_new(t, NODE_NS, 0))) goto fail;
    if (nsn && k < end->n_blocks && !(p = node_new(t, NODE_RUN, k))) goto fail;
    if (!(leaf = node_new(t, NODE_RUN, nblk - total))) goto fail;

    /* nothing can fail from here on */
    if (new_ns) {
        new_ns->key = ns;
        link_child(&t->root, new_ns);
        table_add(t, new_ns);
        end = new_ns;
    }
    if (p) {
        split(t, end, k, p);
        end = p;
    }
    size_t bs = (size_t)t->bs;
    memcpy(leaf->tokens, tokens + total * bs, leaf->n_blocks * bs * sizeof *tokens);
    memcpy(leaf->blocks, blocks + total, (size_t)leaf->n_blocks * sizeof *blocks);
    leaf->key = hash_run(leaf->tokens, t->bs);
    link_child(end, leaf);
    table_add(t, leaf);
    heap_update(t, end); /* no longer a leaf */
    for (int i = 0; i < leaf->n_blocks; i++) {
        kvc_acquire(t->pool, leaf->blocks[i]);
        t->held[leaf->blocks[i]] = 1;
    }
    t->held_blocks += leaf->n_blocks;
    t->evictable_blocks += leaf->n_blocks;
    heap_update(t, leaf);
    touch(t, leaf);
    return leaf->n_blocks;
fail:
    free(leaf);
    free(p);
    free(new_ns);
    return ENG_ENOMEM;
}

int rdx_evict(rdx_tree *t, int want_free_blocks)
{
    if (!t) return 0;
    int before = kvc_free_blocks(t->pool);
    while (kvc_free_blocks(t->pool) < want_free_blocks && t->heap_len > 0)
        evict_leaf(t, t->heap[0]);
    return kvc_free_blocks(t->pool) - before;
}

int rdx_held_blocks(const rdx_tree *t)
{
    return t->held_blocks;
}

int rdx_evictable_blocks(const rdx_tree *t)
{
    return t->evictable_blocks;
}

/* Pre-order walk below the root: the next node after n, or NULL. */
static const rdx_node *walk_next(const rdx_tree *t, const rdx_node *n)
{
    if (n->first_child) return n->first_child;
    while (n != &t->root && !n->next_sibling)
        n = n->parent;
    return n == &t->root ? NULL : n->next_sibling;
}

int rdx_visit(const rdx_tree *t, rdx_visit_fn fn, void *ud)
{
    int32_t *tok = NULL, *blk = NULL;
    int cap = 0, len = 0; /* path length in blocks */
    const rdx_node *n = t->root.first_child;
    uint64_t ns = 0;
    while (n) {
        /* len is the path length down to n's parent */
        if (n->kind == NODE_NS) {
            ns = n->key;
            len = 0;
        } else {
            if (len + n->n_blocks > cap) {
                int c = cap ? cap : 64;
                while (c < len + n->n_blocks)
                    c *= 2;
                int32_t *nt = realloc(tok, (size_t)c * t->bs * sizeof *nt);
                if (nt) tok = nt;
                int32_t *nb = nt ? realloc(blk, (size_t)c * sizeof *nb) : NULL;
                if (!nb) {
                    free(tok);
                    free(blk);
                    return ENG_ENOMEM;
                }
                blk = nb;
                cap = c;
            }
            memcpy(tok + (size_t)len * t->bs, n->tokens, (size_t)n->n_blocks * t->bs * sizeof *tok);
            memcpy(blk + len, n->blocks, (size_t)n->n_blocks * sizeof *blk);
            len += n->n_blocks;
            fn(ud, ns, tok, blk, len, n->n_blocks, n->lock);
        }
        /* climb: leaving a node takes its blocks off the path */
        if (n->first_child) {
            n = n->first_child;
            continue;
        }
        while (n != &t->root && !n->next_sibling) {
            len -= n->n_blocks;
            n = n->parent;
        }
        if (n == &t->root) break;
        len -= n->n_blocks;
        n = n->next_sibling;
    }
    free(tok);
    free(blk);
    return 0;
}

#define CHECK(cond, msg)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            why = msg;                                                                             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

int rdx_check(const rdx_tree *t, const char **what)
{
    const char *why = NULL;
    uint8_t *seen = calloc((size_t)t->n_pool_blocks, 1);
    if (!seen) {
        if (what) *what = "out of memory";
        return ENG_ENOMEM;
    }
    size_t n_nodes = 0;
    long held = 0, evictable = 0;
    int in_heap = 0;
    CHECK(t->root.parent == NULL && t->root.n_blocks == 0 && t->root.heap_idx < 0, "root shape");
    for (const rdx_node *n = &t->root; n; n = walk_next(t, n)) {
        int nc = 0;
        long child_locks = 0;
        for (const rdx_node *c = n->first_child; c; c = c->next_sibling) {
            CHECK(c->parent == n, "child's parent pointer");
            CHECK(c->next_sibling == NULL || c->next_sibling->prev_sibling == c, "sibling links");
            nc++;
            child_locks += c->lock;
            if (n != &t->root) CHECK(c->last_used <= n->last_used, "child used after its parent");
        }
        CHECK(n->first_child == NULL || n->first_child->prev_sibling == NULL, "first child");
        CHECK(nc == n->n_children, "child count");
        if (n == &t->root) {
            CHECK(n->lock == 0, "root locked");
            continue;
        }
        CHECK(n->lock >= child_locks, "lock below the sum of the children's locks");
        n_nodes++;
        if (n->parent == &t->root) {
            CHECK(n->kind == NODE_NS, "a run node at the root");
            CHECK(n->n_blocks == 0, "namespace node with blocks");
            CHECK(n->n_children > 0, "namespace node without children");
            CHECK(find_ns(t, n->key) == n, "namespace not found in the child table");
        } else {
            CHECK(n->kind == NODE_RUN, "a namespace node below the root");
            CHECK(n->n_blocks >= 1, "run node without blocks");
            CHECK(n->blocks == n->tokens + (size_t)n->n_blocks * t->bs, "node layout");
            CHECK(n->key == hash_run(n->tokens, t->bs), "stale key");
            CHECK(find_child(t, n->parent, n->tokens) == n,
                  "run not found in the child table (or two children share a first block)");
            for (int i = 0; i < n->n_blocks; i++) {
                int32_t b = n->blocks[i];
                CHECK(b >= 0 && b < t->n_pool_blocks, "block id outside the pool");
                CHECK(!seen[b], "block stored twice");
                seen[b] = 1;
                CHECK(t->held[b] == 1, "stored block not marked held");
                CHECK(kvc_refcount(t->pool, b) >= 1, "stored block is free in the pool");
            }
            held += n->n_blocks;
            if (n->lock == 0) evictable += n->n_blocks;
        }
        CHECK(n->lock >= 0, "negative lock");
        CHECK(is_evictable(n) == (n->heap_idx >= 0), "heap membership");
        if (n->heap_idx >= 0) {
            CHECK(n->heap_idx < t->heap_len && t->heap[n->heap_idx] == n, "heap index");
            in_heap++;
        }
    }
    CHECK(n_nodes == t->n_nodes, "child table size");
    size_t in_table = 0;
    for (size_t b = 0; b < t->n_buckets; b++)
        for (const rdx_node *c = t->buckets[b]; c; c = c->hnext)
            in_table++;
    CHECK(in_table == t->n_nodes, "child table holds nodes not in the tree");
    CHECK(in_heap == t->heap_len, "heap holds nodes not in the tree");
    for (int i = 1; i < t->heap_len; i++)
        CHECK(!heap_less(t->heap[i], t->heap[(i - 1) / 2]), "heap order");
    for (int b = 0; b < t->n_pool_blocks; b++)
        CHECK(t->held[b] == seen[b], "held mark on a block not stored");
    CHECK(held == t->held_blocks, "held counter");
    CHECK(evictable == t->evictable_blocks, "evictable counter");
    CHECK(t->heap_len <= t->heap_cap && (size_t)t->heap_cap >= t->n_nodes, "heap capacity");
out:
    free(seen);
    if (what) *what = why;
    return why ? ENG_EINVAL : 0;
}
