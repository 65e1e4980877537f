/* tests engine/radix.c: hand-written cases (empty tree, full and block-granular partial
 * matches, a split with both branches matchable, namespaces kept apart (the global one,
 * 0, shared only by the requests that carry it; one LRU order over all), locks against
 * eviction, LRU order, a parent evictable after its last child, re-inserting a present
 * prefix, bad arguments, destroy), then a randomized run of a scheduler's life over a tiny
 * pool (admit with match, prefill/decode steps, finish with insert, preempt, cancel,
 * evict) that checks after every operation that each block's refcount is exactly (1 if the
 * tree holds it) + (live sequences holding it), that matches are the longest cached
 * prefix, that every cached and matched block carries the fingerprint of the tokens it
 * stands for, and that lock counts follow the sequences holding them. */
#include "engine.h"
#include "kvcache.h"
#include "radix.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS 4

static kvc_pool *make_pool(int n_blocks)
{
    /* a position's values are 4 floats = 16 bytes: room for one 8-byte fingerprint */
    struct kvc_shape s = {
        .n_layer = 1, .n_kv_head = 1, .head_dim = 4, .block_size = BS, .n_blocks = n_blocks};
    kvc_pool *p = NULL;
    cr_assert_eq(kvc_create(&s, &p), 0);
    return p;
}

static rdx_tree *make_tree(kvc_pool *p)
{
    rdx_tree *t = NULL;
    cr_assert_eq(rdx_create(p, &t), 0);
    cr_assert_not_null(t);
    return t;
}

static void check_tree(const rdx_tree *t)
{
    const char *what = NULL;
    int rc = rdx_check(t, &what);
    cr_assert_eq(rc, 0, "rdx_check: %s", what ? what : "?");
}

/* Allocates n blocks into out. */
static void alloc_blocks(kvc_pool *p, int n, int32_t *out)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(kvc_alloc(p, &out[i]), 0);
}

static void release_blocks(kvc_pool *p, int n, const int32_t *b)
{
    for (int i = 0; i < n; i++)
        kvc_release(p, b[i]);
}

/* Tokens from a string, one per character: "abcd efgh" -> a b c d e f g h (spaces
 * skipped, they only mark blocks for the reader). */
static int toks(const char *s, int32_t *out)
{
    int n = 0;
    for (; *s; s++)
        if (*s != ' ') out[n++] = (unsigned char)*s;
    return n;
}

/* Matches the string s in ns; returns matched tokens and fills blocks/lock. */
static int match_str(rdx_tree *t, uint64_t ns, const char *s, int32_t *blocks, int max_blocks,
                     rdx_node **lock)
{
    int32_t tk[256];
    int n = toks(s, tk), m = -1;
    cr_assert_eq(rdx_match(t, ns, tk, n, blocks, max_blocks, &m, lock), 0);
    cr_assert(m >= 0 && m % BS == 0 && m <= n);
    cr_assert_eq(*lock == NULL, m == 0);
    return m;
}

static int insert_str(rdx_tree *t, uint64_t ns, const char *s, const int32_t *blocks)
{
    int32_t tk[256];
    int n = toks(s, tk);
    return rdx_insert(t, ns, tk, n, blocks);
}

/* Matches s, expects exactly want (n blocks), then unlocks and releases. */
static void expect_match(rdx_tree *t, kvc_pool *p, uint64_t ns, const char *s, const int32_t *want,
                         int n)
{
    int32_t got[64];
    rdx_node *lk;
    int m = match_str(t, ns, s, got, 64, &lk);
    cr_assert_eq(m, n * BS, "\"%s\" in ns %llu: matched %d tokens, want %d", s,
                 (unsigned long long)ns, m, n * BS);
    for (int i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "\"%s\": block %d is %d, want %d", s, i, got[i], want[i]);
    rdx_unlock(t, lk);
    release_blocks(p, m / BS, got);
    check_tree(t);
}

Test(radix, match_on_empty_tree)
{
    kvc_pool *p = make_pool(8);
    rdx_tree *t = make_tree(p);
    int32_t b[8] = {-1, -1};
    rdx_node *lk = (rdx_node *)&lk;
    cr_assert_eq(match_str(t, 1, "abcd efgh", b, 8, &lk), 0);
    cr_assert_null(lk);
    cr_assert_eq(b[0], -1); /* nothing written */
    cr_assert_eq(kvc_free_blocks(p), 8);
    cr_assert_eq(rdx_held_blocks(t), 0);
    cr_assert_eq(rdx_evictable_blocks(t), 0);
    cr_assert_eq(rdx_evict(t, 8), 0);
    check_tree(t);
    rdx_unlock(t, NULL); /* accepted */
    rdx_destroy(t);
    rdx_destroy(NULL);
    cr_assert_eq(kvc_free_blocks(p), 8);
    kvc_destroy(p);
}

Test(radix, insert_then_match_full_and_partial)
{
    kvc_pool *p = make_pool(8);
    rdx_tree *t = make_tree(p);
    int32_t b[4];
    alloc_blocks(p, 4, b);
    /* 3 full blocks and a partial one: only the full ones are cached */
    cr_assert_eq(insert_str(t, 5, "abcd efgh ijkl mn", b), 3);
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 3);
    cr_assert_eq(rdx_evictable_blocks(t), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kvc_refcount(p, b[i]), 2);
    cr_assert_eq(kvc_refcount(p, b[3]), 1);
    release_blocks(p, 4, b);
    cr_assert_eq(kvc_free_blocks(p), 5);

    /* the full prefix, and longer queries */
    expect_match(t, p, 5, "abcd efgh ijkl", b, 3);
    expect_match(t, p, 5, "abcd efgh ijkl mn", b, 3);
    expect_match(t, p, 5, "abcd efgh ijkl mnop qrst", b, 3);
    /* block-granular partial prefixes: a partial block or a divergence inside one */
    expect_match(t, p, 5, "abcd efgh i", b, 2);
    expect_match(t, p, 5, "abcd efgh ijkX", b, 2);
    expect_match(t, p, 5, "abcd eXgh ijkl", b, 1);
    expect_match(t, p, 5, "abc", b, 0);
    expect_match(t, p, 5, "Xbcd efgh ijkl", b, 0);

    /* max_blocks caps the match; the lock covers only what was returned */
    int32_t got2[4], got3[4];
    rdx_node *lk2, *lk3, *lk0 = (rdx_node *)&lk0;
    cr_assert_eq(match_str(t, 5, "abcd efgh ijkl", got2, 2, &lk2), 8);
    cr_assert_eq(got2[0], b[0]);
    cr_assert_eq(got2[1], b[1]);
    cr_assert_eq(kvc_refcount(p, b[0]), 2);
    cr_assert_eq(kvc_refcount(p, b[1]), 2);
    cr_assert_eq(kvc_refcount(p, b[2]), 1);
    cr_assert_eq(rdx_evictable_blocks(t), 1); /* the third block, beyond the lock */
    check_tree(t);
    cr_assert_eq(match_str(t, 5, "abcd efgh ijkl", got3, 0, &lk0), 0);
    cr_assert_null(lk0);
    /* two locks on a shared path are counted */
    cr_assert_eq(match_str(t, 5, "abcd efgh ijkl", got3, 3, &lk3), 12);
    cr_assert_eq(rdx_evictable_blocks(t), 0);
    cr_assert_eq(rdx_evict(t, 8), 0);
    rdx_unlock(t, lk3);
    release_blocks(p, 3, got3);
    cr_assert_eq(rdx_evictable_blocks(t), 1);
    check_tree(t);
    cr_assert_eq(rdx_evict(t, 8), 1); /* the unlocked tail goes, the locked head stays */
    expect_match(t, p, 5, "abcd efgh ijkl", b, 2);
    cr_assert_eq(rdx_evictable_blocks(t), 0);
    rdx_unlock(t, lk2);
    release_blocks(p, 2, got2);
    cr_assert_eq(rdx_evictable_blocks(t), 2);
    cr_assert_eq(rdx_held_blocks(t), 2);
    check_tree(t);

    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 8);
    kvc_destroy(p);
}

Test(radix, split_mid_node_both_matchable)
{
    kvc_pool *p = make_pool(16);
    rdx_tree *t = make_tree(p);
    int32_t a[3], b[3], c[2];
    alloc_blocks(p, 3, a);
    cr_assert_eq(insert_str(t, 7, "abcd efgh ijkl", a), 3);
    alloc_blocks(p, 3, b);
    /* diverges at the third block: the tree keeps a[0], a[1] and takes b[2] */
    cr_assert_eq(insert_str(t, 7, "abcd efgh mnop", b), 1);
    check_tree(t);
    cr_assert_eq(kvc_refcount(p, b[0]), 1);
    cr_assert_eq(kvc_refcount(p, b[1]), 1);
    cr_assert_eq(kvc_refcount(p, b[2]), 2);
    cr_assert_eq(rdx_held_blocks(t), 4);
    release_blocks(p, 3, a);
    release_blocks(p, 3, b);
    cr_assert_eq(kvc_free_blocks(p), 12);

    int32_t want_b[3] = {a[0], a[1], b[2]};
    expect_match(t, p, 7, "abcd efgh ijkl", a, 3);
    expect_match(t, p, 7, "abcd efgh mnop", want_b, 3);
    expect_match(t, p, 7, "abcd efgh qrst", a, 2);

    /* diverging at the second block, from the first node now (a split of the split) */
    alloc_blocks(p, 2, c);
    cr_assert_eq(insert_str(t, 7, "abcd wxyz", c), 1);
    check_tree(t);
    release_blocks(p, 2, c);
    int32_t want_c[2] = {a[0], c[1]};
    expect_match(t, p, 7, "abcd wxyz", want_c, 2);
    expect_match(t, p, 7, "abcd efgh ijkl", a, 3);
    expect_match(t, p, 7, "abcd efgh mnop", want_b, 3);

    /* diverging at the very first block: a sibling under the namespace */
    int32_t d[1];
    alloc_blocks(p, 1, d);
    cr_assert_eq(insert_str(t, 7, "zzzz", d), 1);
    release_blocks(p, 1, d);
    expect_match(t, p, 7, "zzzz", d, 1);
    expect_match(t, p, 7, "abcd efgh ijkl", a, 3);
    cr_assert_eq(rdx_held_blocks(t), 6);
    cr_assert_eq(kvc_free_blocks(p), 10);

    /* a lock taken before a split stays valid across it, and the new head inherits it */
    int32_t l[3], got[3], sb[3];
    alloc_blocks(p, 3, l);
    cr_assert_eq(insert_str(t, 7, "pppp qqqq rrrr", l), 3);
    release_blocks(p, 3, l);
    rdx_node *lk;
    cr_assert_eq(match_str(t, 7, "pppp qqqq rrrr", got, 3, &lk), 12);
    sb[0] = got[0];
    sb[1] = got[1];
    alloc_blocks(p, 1, &sb[2]);
    cr_assert_eq(insert_str(t, 7, "pppp qqqq ssss", sb), 1); /* splits the locked node */
    kvc_release(p, sb[2]);
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 10);
    cr_assert_eq(rdx_evictable_blocks(t), 7);
    cr_assert_eq(rdx_evict(t, 16), 7); /* everything but the locked path */
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 3);
    expect_match(t, p, 7, "pppp qqqq rrrr", l, 3);
    expect_match(t, p, 7, "pppp qqqq ssss", l, 2);
    expect_match(t, p, 7, "abcd efgh ijkl", NULL, 0);
    rdx_unlock(t, lk);
    release_blocks(p, 3, got);
    cr_assert_eq(rdx_evictable_blocks(t), 3);
    check_tree(t);
    cr_assert_eq(rdx_evict(t, 16), 3);
    cr_assert_eq(rdx_held_blocks(t), 0);

    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 16);
    kvc_destroy(p);
}

Test(radix, namespaces_never_share)
{
    kvc_pool *p = make_pool(8);
    rdx_tree *t = make_tree(p);
    int32_t a[2], b[2];
    alloc_blocks(p, 2, a);
    cr_assert_eq(insert_str(t, 1, "abcd efgh", a), 2);
    expect_match(t, p, 2, "abcd efgh", NULL, 0);
    expect_match(t, p, 0, "abcd efgh", NULL, 0);
    expect_match(t, p, UINT64_MAX, "abcd efgh", NULL, 0);
    alloc_blocks(p, 2, b);
    /* same tokens, other tenant: stored apart, no block in common */
    cr_assert_eq(insert_str(t, 2, "abcd efgh", b), 2);
    cr_assert_eq(rdx_held_blocks(t), 4);
    release_blocks(p, 2, a);
    release_blocks(p, 2, b);
    expect_match(t, p, 1, "abcd efgh", a, 2);
    expect_match(t, p, 2, "abcd efgh", b, 2);
    /* a namespace node disappears with its last child */
    int32_t got[2];
    rdx_node *lk;
    cr_assert_eq(match_str(t, 1, "abcd efgh", got, 2, &lk), 8);
    cr_assert_eq(rdx_evict(t, 8), 2); /* only ns 2's blocks were evictable */
    check_tree(t);
    expect_match(t, p, 2, "abcd efgh", NULL, 0);
    rdx_unlock(t, lk);
    release_blocks(p, 2, got);
    cr_assert_eq(rdx_evict(t, 8), 2);
    check_tree(t);
    expect_match(t, p, 1, "abcd efgh", NULL, 0);
    cr_assert_eq(rdx_held_blocks(t), 0);
    cr_assert_eq(kvc_free_blocks(p), 8);
    rdx_destroy(t);
    kvc_destroy(p);
}

/* Inserts s with fresh blocks into out and releases the caller's references. */
static void cache(rdx_tree *t, kvc_pool *p, uint64_t ns, const char *s, int32_t *out)
{
    int32_t tk[256];
    int nb = toks(s, tk) / BS;
    alloc_blocks(p, nb, out);
    cr_assert_eq(rdx_insert(t, ns, tk, nb * BS, out), nb);
    release_blocks(p, nb, out);
    check_tree(t);
}

/* Namespaces seen by rdx_visit, in a bit set of the small values used here. */
static void ns_visit(void *ud, uint64_t ns, const int32_t *tok, const int32_t *blocks, int n_blocks,
                     int node_blocks, int lock)
{
    (void)tok, (void)blocks, (void)n_blocks, (void)node_blocks, (void)lock;
    cr_assert_lt(ns, 64);
    *(uint64_t *)ud |= 1ULL << ns;
}

static uint64_t namespaces(const rdx_tree *t)
{
    uint64_t set = 0;
    cr_assert_eq(rdx_visit(t, ns_visit, &set), 0);
    return set;
}

/* ns 0 is an ordinary key: two requests that both carry it share, nobody else does */
Test(radix, global_namespace_shared_by_its_members_only)
{
    kvc_pool *p = make_pool(8);
    rdx_tree *t = make_tree(p);
    int32_t a[3];
    cache(t, p, 0, "abcd efgh ijkl", a);
    expect_match(t, p, 0, "abcd efgh ijkl", a, 3);
    expect_match(t, p, 0, "abcd efgh wxyz", a, 2);
    expect_match(t, p, 1, "abcd efgh ijkl", NULL, 0);
    /* a tenant's own entry does not leak into the global namespace either */
    int32_t b[1];
    cache(t, p, 1, "qqqq", b);
    expect_match(t, p, 0, "qqqq", NULL, 0);
    expect_match(t, p, 1, "qqqq", b, 1);
    cr_assert_eq(namespaces(t), 0x3);
    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 8);
    kvc_destroy(p);
}

/* one LRU order over every namespace; a lock protects only its own namespace's path; a
 * namespace emptied by eviction goes away and can be filled again */
Test(radix, eviction_lru_across_namespaces)
{
    kvc_pool *p = make_pool(16);
    rdx_tree *t = make_tree(p);
    int32_t x[2], y[2], z[2], w[2], y1[2];
    cache(t, p, 1, "xxxx XXXX", x); /* oldest */
    cache(t, p, 2, "yyyy YYYY", y);
    cache(t, p, 0, "zzzz ZZZZ", z);
    cache(t, p, 1, "wwww WWWW", w);
    cache(t, p, 2, "xxxx XXXX", y1); /* ns 1's tokens, another tenant's blocks */
    cr_assert_eq(namespaces(t), 0x7);
    cr_assert_eq(kvc_free_blocks(p), 6);
    expect_match(t, p, 1, "xxxx XXXX", x, 2); /* x is now the newest */

    /* one block wanted: the least recently used leaf over all namespaces is ns 2's y */
    cr_assert_eq(rdx_evict(t, 7), 2);
    check_tree(t);
    expect_match(t, p, 2, "yyyy YYYY", NULL, 0);
    expect_match(t, p, 2, "xxxx XXXX", y1, 2); /* y1 now newer than z and w */
    expect_match(t, p, 1, "xxxx XXXX", x, 2);  /* untouched by ns 2's eviction */
    /* next in line: z (ns 0), then w (ns 1) */
    cr_assert_eq(rdx_evict(t, 9), 2);
    check_tree(t);
    cr_assert_eq(namespaces(t), 0x6, "ns 0 left with its last run");
    cr_assert_eq(rdx_evict(t, 11), 2);
    check_tree(t);
    expect_match(t, p, 1, "wwww WWWW", NULL, 0);
    expect_match(t, p, 1, "xxxx XXXX", x, 2);

    /* ns 1's x locked: everything else goes, ns 2's copy of the same tokens included */
    int32_t got[2];
    rdx_node *lk;
    cr_assert_eq(match_str(t, 1, "xxxx XXXX", got, 2, &lk), 8);
    release_blocks(p, 2, got);
    cr_assert_eq(rdx_evictable_blocks(t), 2);
    cr_assert_eq(rdx_evict(t, 16), 2);
    check_tree(t);
    cr_assert_eq(namespaces(t), 0x2);
    cr_assert_eq(rdx_held_blocks(t), 2);
    expect_match(t, p, 2, "xxxx XXXX", NULL, 0);
    rdx_unlock(t, lk);
    cr_assert_eq(rdx_evict(t, 16), 2);
    check_tree(t);
    cr_assert_eq(namespaces(t), 0);
    cr_assert_eq(kvc_free_blocks(p), 16);

    /* emptied namespaces fill again, still apart */
    cache(t, p, 2, "yyyy YYYY", y);
    cache(t, p, 0, "yyyy YYYY", z);
    expect_match(t, p, 2, "yyyy YYYY", y, 2);
    expect_match(t, p, 0, "yyyy YYYY", z, 2);
    expect_match(t, p, 1, "yyyy YYYY", NULL, 0);
    cr_assert_eq(namespaces(t), 0x5);
    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 16);
    kvc_destroy(p);
}

Test(radix, eviction_lru_locks_and_parents)
{
    kvc_pool *p = make_pool(12);
    rdx_tree *t = make_tree(p);
    int32_t x[2], y[2], z[2];
    cache(t, p, 1, "xxxx XXXX", x);
    cache(t, p, 1, "yyyy YYYY", y);
    cache(t, p, 1, "zzzz ZZZZ", z);
    cr_assert_eq(kvc_free_blocks(p), 6);
    cr_assert_eq(rdx_evictable_blocks(t), 6);

    int32_t got[2];
    rdx_node *lx;
    cr_assert_eq(match_str(t, 1, "xxxx XXXX", got, 2, &lx), 8); /* x locked, touched last */
    release_blocks(p, 2, got);                /* the lock, not a reference, is what protects x */
    expect_match(t, p, 1, "yyyy YYYY", y, 2); /* y now used after z */
    cr_assert_eq(rdx_evictable_blocks(t), 4);

    /* want 7 free (one more block): evicts the least recently used leaf, z, whole */
    cr_assert_eq(rdx_evict(t, 7), 2);
    check_tree(t);
    expect_match(t, p, 1, "zzzz ZZZZ", NULL, 0);
    expect_match(t, p, 1, "yyyy YYYY", y, 2);
    /* nothing more wanted: nothing evicted */
    cr_assert_eq(rdx_evict(t, 8), 0);
    cr_assert_eq(rdx_evict(t, 0), 0);
    /* everything evictable goes; the locked x stays */
    cr_assert_eq(rdx_evict(t, 12), 2);
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 2);
    cr_assert_eq(rdx_evictable_blocks(t), 0);
    cr_assert_eq(rdx_evict(t, 12), 0);
    cr_assert_eq(kvc_refcount(p, x[0]), 1);
    rdx_unlock(t, lx);
    cr_assert_eq(rdx_evictable_blocks(t), 2);
    cr_assert_eq(rdx_evict(t, 12), 2);
    cr_assert_eq(kvc_free_blocks(p), 12);
    check_tree(t);

    /* a parent with two children: leaves go first (LRU first), the parent after its last */
    int32_t a[3], b[3];
    cache(t, p, 3, "abcd efgh ijkl", a);
    alloc_blocks(p, 3, b);
    cr_assert_eq(insert_str(t, 3, "abcd efgh mnop", b), 1);
    release_blocks(p, 3, b);
    cr_assert_eq(rdx_held_blocks(t), 4);
    cr_assert_eq(kvc_free_blocks(p), 8);
    /* lock the parent "abcd efgh": both leaves stay evictable, the parent does not */
    rdx_node *lp;
    cr_assert_eq(match_str(t, 3, "abcd efgh", got, 2, &lp), 8);
    release_blocks(p, 2, got);
    cr_assert_eq(rdx_evictable_blocks(t), 2);
    cr_assert_eq(rdx_evict(t, 9), 1); /* "ijkl": inserted before "mnop" */
    check_tree(t);
    expect_match(t, p, 3, "abcd efgh ijkl", a, 2);
    int32_t want_b[3] = {a[0], a[1], b[2]};
    expect_match(t, p, 3, "abcd efgh mnop", want_b, 3);
    cr_assert_eq(rdx_evict(t, 12), 1); /* "mnop"; the locked parent is now a leaf, kept */
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 2);
    cr_assert_eq(rdx_evictable_blocks(t), 0);
    rdx_unlock(t, lp);
    cr_assert_eq(rdx_evictable_blocks(t), 2); /* the parent became an evictable leaf */
    cr_assert_eq(rdx_evict(t, 12), 2);
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 0);
    cr_assert_eq(kvc_free_blocks(p), 12);

    /* a block a caller still holds is released by the tree but not freed */
    int32_t c[1];
    alloc_blocks(p, 1, c);
    cr_assert_eq(insert_str(t, 4, "cccc", c), 1);
    cr_assert_eq(rdx_evict(t, 12), 0);
    cr_assert_eq(rdx_held_blocks(t), 0);
    cr_assert_eq(kvc_refcount(p, c[0]), 1);
    kvc_release(p, c[0]);
    check_tree(t);

    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 12);
    kvc_destroy(p);
}

Test(radix, present_prefix_not_duplicated)
{
    kvc_pool *p = make_pool(16);
    rdx_tree *t = make_tree(p);
    int32_t a[3], b[3];
    alloc_blocks(p, 3, a);
    cr_assert_eq(insert_str(t, 9, "abcd efgh ijkl", a), 3);
    /* the same blocks again: nothing new, no extra reference */
    cr_assert_eq(insert_str(t, 9, "abcd efgh ijkl", a), 0);
    cr_assert_eq(insert_str(t, 9, "abcd efgh", a), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kvc_refcount(p, a[i]), 2);
    /* the same tokens computed in other blocks: the tree keeps its own */
    alloc_blocks(p, 3, b);
    cr_assert_eq(insert_str(t, 9, "abcd efgh ijkl", b), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kvc_refcount(p, b[i]), 1);
    cr_assert_eq(rdx_held_blocks(t), 3);
    check_tree(t);
    release_blocks(p, 3, b);
    /* an extension adds only its new block */
    int32_t e[4] = {a[0], a[1], a[2], -1};
    alloc_blocks(p, 1, &e[3]);
    cr_assert_eq(insert_str(t, 9, "abcd efgh ijkl mnop", e), 1);
    cr_assert_eq(rdx_held_blocks(t), 4);
    check_tree(t);
    release_blocks(p, 3, a);
    kvc_release(p, e[3]);
    expect_match(t, p, 9, "abcd efgh ijkl mnop", e, 4);
    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 16);
    kvc_destroy(p);
}

Test(radix, bad_arguments_change_nothing)
{
    kvc_pool *p = make_pool(8);
    rdx_tree *t = NULL;
    cr_assert_eq(rdx_create(NULL, &t), ENG_EINVAL);
    cr_assert_null(t);
    cr_assert_eq(rdx_create(p, NULL), ENG_EINVAL);
    t = make_tree(p);
    int32_t a[2], tk[16];
    int n = toks("abcd efgh", tk), m;
    alloc_blocks(p, 2, a);
    cr_assert_eq(rdx_insert(t, 1, tk, n, a), 2);
    rdx_node *lk;
    int32_t got[2];
    cr_assert_eq(rdx_match(t, 1, tk, n, got, 2, &m, NULL), ENG_EINVAL);
    cr_assert_eq(rdx_match(t, 1, tk, n, NULL, 2, &m, &lk), ENG_EINVAL);
    cr_assert_eq(rdx_match(t, 1, NULL, n, got, 2, &m, &lk), ENG_EINVAL);
    cr_assert_eq(rdx_match(t, 1, tk, -1, got, 2, &m, &lk), ENG_EINVAL);
    cr_assert_eq(rdx_match(t, 1, tk, n, got, -1, &m, &lk), ENG_EINVAL);
    cr_assert_eq(rdx_match(t, 1, tk, n, got, 2, NULL, &lk), ENG_EINVAL);
    cr_assert_eq(rdx_insert(t, 1, tk, -1, a), ENG_EINVAL);
    cr_assert_eq(rdx_insert(t, 1, NULL, n, a), ENG_EINVAL);
    cr_assert_eq(rdx_insert(t, 1, tk, n, NULL), ENG_EINVAL);
    cr_assert_eq(rdx_insert(t, 1, tk, 3, NULL), 0); /* no full block: nothing to do */

    int32_t tk2[16];
    int n2 = toks("wxyz 1234", tk2);
    int32_t bad[2] = {a[0], 8}; /* outside the pool */
    cr_assert_eq(rdx_insert(t, 1, tk2, n2, bad), ENG_EINVAL);
    int32_t f[2];
    alloc_blocks(p, 2, f);
    kvc_release(p, f[1]);
    cr_assert_eq(rdx_insert(t, 1, tk2, n2, f), ENG_EINVAL); /* f[1] is free */
    cr_assert_eq(kvc_alloc(p, &f[1]), 0);
    int32_t twice[2] = {f[0], f[0]};
    cr_assert_eq(rdx_insert(t, 1, tk2, n2, twice), ENG_EINVAL);
    int32_t other[2] = {f[0], a[1]}; /* a[1] is the tree's block for other tokens */
    cr_assert_eq(rdx_insert(t, 1, tk2, n2, other), ENG_EINVAL);
    cr_assert_eq(rdx_insert(t, 2, tk, n, a), ENG_EINVAL); /* same, in another namespace */
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), 2);
    cr_assert_eq(kvc_refcount(p, f[0]), 1);
    cr_assert_eq(kvc_refcount(p, f[1]), 1);
    cr_assert_eq(kvc_refcount(p, a[0]), 2);
    cr_assert_eq(kvc_refcount(p, a[1]), 2);
    expect_match(t, p, 1, "wxyz", NULL, 0);
    expect_match(t, p, 2, "abcd", NULL, 0);
    cr_assert_eq(rdx_insert(t, 1, tk2, n2, f), 2); /* and now a good one */
    release_blocks(p, 2, f);
    release_blocks(p, 2, a);
    cr_assert_eq(kvc_refcount(p, 8), ENG_EINVAL);
    cr_assert_eq(kvc_refcount(p, -1), ENG_EINVAL);
    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 8);
    kvc_destroy(p);
}

Test(radix, destroy_releases_everything)
{
    kvc_pool *p = make_pool(8);
    rdx_tree *t = make_tree(p);
    int32_t a[3], got[3];
    cache(t, p, 1, "abcd efgh ijkl", a);
    rdx_node *lk;
    /* destroyed with a lock outstanding: the caller's matched references stay its own */
    cr_assert_eq(match_str(t, 1, "abcd efgh", got, 3, &lk), 8);
    cr_assert_eq(kvc_free_blocks(p), 5);
    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), 6);
    cr_assert_eq(kvc_refcount(p, a[0]), 1);
    release_blocks(p, 2, got);
    cr_assert_eq(kvc_free_blocks(p), 8);
    kvc_destroy(p);
}

/* ---- randomized: a scheduler's life over a tiny pool ---- */

#define POOL 48
#define MAXT 64          /* tokens per sequence */
#define MAXB (MAXT / BS) /* blocks per sequence */
#define NSEQ 4           /* sequence slots */
#define NHIST 16         /* finished sequences remembered as prompt material */
#define POISON 0xdeadbeefdeadbeefULL

enum { FREE, WAITING, RUNNING };

struct seq {
    int state;
    uint64_t ns;
    int32_t tok[MAXT];
    int target;  /* tokens the sequence will have when finished */
    int n_known; /* tokens known before (re)admission: the prompt, or more after preemption */
    int n_done;  /* positions whose KV is written */
    int32_t table[MAXB];
    int n_table;
    rdx_node *lock;
    int n_locked; /* blocks covered by lock */
    uint64_t order;
};

struct hist {
    uint64_t ns;
    int32_t tok[MAXT];
    int n;
};

struct counts {
    long ops, match_splits, insert_splits, admits, match_tokens, match_hits, steps, allocs,
        finishes, inserts, inserted_blocks, preempts, cancels, evict_calls, evicted_blocks, probes,
        checks;
};

struct sim {
    kvc_pool *p;
    rdx_tree *t;
    struct seq s[NSEQ];
    struct hist h[NHIST];
    int n_hist;
    uint64_t rng, order;
    struct counts c;
};

static uint64_t rnd(struct sim *m)
{
    /* xorshift64* */
    m->rng ^= m->rng >> 12;
    m->rng ^= m->rng << 25;
    m->rng ^= m->rng >> 27;
    return m->rng * 0x2545f4914f6cdd1dULL;
}

static int rndn(struct sim *m, int n)
{
    return (int)(rnd(m) % (uint64_t)n);
}

static uint64_t fmix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The fingerprint of position i: a hash of the namespace and tokens[0..i], like the KV
 * there, which depends on everything before it. fp[i] for i in [0, n). */
static void fingerprints(uint64_t ns, const int32_t *tok, int n, uint64_t *fp)
{
    uint64_t h = fmix(ns ^ 0x5bd1e9955bd1e995ULL);
    for (int i = 0; i < n; i++) {
        h = fmix(h ^ ((uint64_t)(uint32_t)tok[i] + 0x9e3779b97f4a7c15ULL));
        fp[i] = h;
    }
}

static void write_fp(kvc_pool *p, int32_t block, int slot, uint64_t fp)
{
    memcpy((float *)kvc_v_head(p, 0, block, 0) + slot * 4, &fp, sizeof fp);
}

static uint64_t read_fp(kvc_pool *p, int32_t block, int slot)
{
    uint64_t fp;
    memcpy(&fp, (float *)kvc_v_head(p, 0, block, 0) + slot * 4, sizeof fp);
    return fp;
}

/* blocks[0..nb) must carry the fingerprints of (ns, tok). */
static void verify_blocks(kvc_pool *p, uint64_t ns, const int32_t *tok, const int32_t *blocks,
                          int nb, int from, const char *what)
{
    uint64_t fp[MAXT * 4];
    cr_assert_leq(nb * BS, (int)(sizeof fp / sizeof fp[0]));
    fingerprints(ns, tok, nb * BS, fp);
    for (int i = from; i < nb; i++)
        for (int s = 0; s < BS; s++)
            cr_assert_eq(read_fp(p, blocks[i], s), fp[i * BS + s],
                         "%s: block %d (id %d) slot %d carries the KV of other tokens", what, i,
                         blocks[i], s);
}

/* Free blocks get overwritten, so that a freed block the tree still used would show. */
static void poison_free(struct sim *m)
{
    for (int b = 0; b < POOL; b++)
        if (kvc_refcount(m->p, b) == 0)
            for (int s = 0; s < BS; s++)
                write_fp(m->p, b, s, POISON);
}

/* The longest cached prefix, by brute force over every node's path. */
struct longest {
    uint64_t ns;
    const int32_t *tok;
    int nblk, best;
};

static void longest_visit(void *ud, uint64_t ns, const int32_t *tok, const int32_t *blocks,
                          int n_blocks, int node_blocks, int lock)
{
    (void)blocks, (void)node_blocks, (void)lock;
    struct longest *l = ud;
    if (ns != l->ns) return;
    int i = 0;
    while (i < n_blocks && i < l->nblk &&
           memcmp(tok + i * BS, l->tok + i * BS, BS * sizeof *tok) == 0)
        i++;
    if (i > l->best) l->best = i;
}

static void count_visit(void *ud, uint64_t ns, const int32_t *tok, const int32_t *blocks,
                        int n_blocks, int node_blocks, int lock)
{
    (void)ns, (void)tok, (void)blocks, (void)n_blocks, (void)node_blocks, (void)lock;
    ++*(int *)ud;
}

static int count_nodes(struct sim *m)
{
    int n = 0;
    cr_assert_eq(rdx_visit(m->t, count_visit, &n), 0);
    return n;
}

static int ref_longest(struct sim *m, uint64_t ns, const int32_t *tok, int nblk)
{
    struct longest l = {ns, tok, nblk, 0};
    cr_assert_eq(rdx_visit(m->t, longest_visit, &l), 0);
    return l.best;
}

/* Matches (ns, tok[0..n)) with max_blocks, checking it against the brute-force longest
 * prefix and the fingerprints. Returns matched blocks. */
static int checked_match(struct sim *m, uint64_t ns, const int32_t *tok, int n, int max_blocks,
                         int32_t *blocks, rdx_node **lock)
{
    int nblk = n / BS < max_blocks ? n / BS : max_blocks;
    int want = ref_longest(m, ns, tok, nblk);
    int got = -1, nodes = count_nodes(m);
    cr_assert_eq(rdx_match(m->t, ns, tok, n, blocks, max_blocks, &got, lock), 0);
    int split = count_nodes(m) - nodes; /* a match that ends inside a node splits it */
    cr_assert(split == 0 || split == 1);
    m->c.match_splits += split;
    cr_assert_eq(got, want * BS, "match: %d tokens, the longest cached prefix is %d", got,
                 want * BS);
    cr_assert_eq(*lock == NULL, got == 0);
    verify_blocks(m->p, ns, tok, blocks, want, 0, "match");
    return want;
}

/* Whole-state check: tree invariants, every cached block's fingerprint, lock counts, and
 * refcount == tree + sequences for every block. */
struct census {
    struct sim *m;
    int tree[POOL];
    long held, evictable;
};

static void census_visit(void *ud, uint64_t ns, const int32_t *tok, const int32_t *blocks,
                         int n_blocks, int node_blocks, int lock)
{
    struct census *c = ud;
    struct sim *m = c->m;
    verify_blocks(m->p, ns, tok, blocks, n_blocks, n_blocks - node_blocks, "tree");
    for (int i = n_blocks - node_blocks; i < n_blocks; i++) {
        int32_t b = blocks[i];
        cr_assert(b >= 0 && b < POOL);
        cr_assert_eq(c->tree[b], 0, "block %d stored twice", b);
        c->tree[b] = 1;
        /* the protocol: outside locked paths only the tree holds cached blocks */
        if (lock == 0)
            cr_assert_eq(kvc_refcount(m->p, b), 1, "unlocked block %d held by others", b);
    }
    c->held += node_blocks;
    if (lock == 0) c->evictable += node_blocks;
    /* lock = live sequences whose locked prefix runs through this node */
    int want = 0;
    for (int i = 0; i < NSEQ; i++) {
        const struct seq *s = &m->s[i];
        if (s->lock && s->ns == ns && s->n_locked >= n_blocks &&
            s->table[n_blocks - 1] == blocks[n_blocks - 1])
            want++;
    }
    cr_assert_eq(lock, want, "node lock %d, %d sequences locked through it", lock, want);
}

static void check_all(struct sim *m)
{
    m->c.checks++;
    check_tree(m->t);
    struct census c = {.m = m};
    cr_assert_eq(rdx_visit(m->t, census_visit, &c), 0);
    cr_assert_eq(c.held, rdx_held_blocks(m->t));
    cr_assert_eq(c.evictable, rdx_evictable_blocks(m->t));
    int seqs[POOL] = {0};
    for (int i = 0; i < NSEQ; i++)
        for (int j = 0; j < m->s[i].n_table; j++)
            seqs[m->s[i].table[j]]++;
    int n_free = 0, n_ref = 0;
    for (int b = 0; b < POOL; b++) {
        int r = kvc_refcount(m->p, b);
        cr_assert_eq(r, c.tree[b] + seqs[b], "block %d: refcount %d, tree %d + sequences %d", b, r,
                     c.tree[b], seqs[b]);
        if (r == 0)
            n_free++;
        else
            n_ref++;
    }
    cr_assert_eq(n_free, kvc_free_blocks(m->p));
    cr_assert_eq(n_free + n_ref, POOL);
}

/* Drops a sequence's blocks and lock (preempt, cancel, finish). */
static void drop(struct sim *m, struct seq *s)
{
    release_blocks(m->p, s->n_table, s->table);
    rdx_unlock(m->t, s->lock);
    s->n_table = 0;
    s->lock = NULL;
    s->n_locked = 0;
    poison_free(m);
}

static void preempt(struct sim *m, struct seq *s)
{
    if (s->n_done > s->n_known)
        s->n_known = s->n_done; /* recomputed later, generated tokens included */
    drop(m, s);
    s->n_done = 0;
    s->state = WAITING;
    m->c.preempts++;
}

static int evict(struct sim *m, int want)
{
    int before = kvc_free_blocks(m->p), held = rdx_held_blocks(m->t);
    int r = rdx_evict(m->t, want);
    m->c.evict_calls++;
    m->c.evicted_blocks += r;
    cr_assert_eq(r, kvc_free_blocks(m->p) - before);
    cr_assert_eq(r, held - rdx_held_blocks(m->t)); /* under the protocol, all freed */
    cr_assert(kvc_free_blocks(m->p) >= want || rdx_evictable_blocks(m->t) == 0);
    poison_free(m);
    return r;
}

static void new_seq(struct sim *m, struct seq *s)
{
    memset(s, 0, sizeof *s);
    s->state = WAITING;
    static const uint64_t nss[] = {1, 2, 0xffffffff00000001ULL};
    s->ns = nss[rndn(m, 3)];
    int n = 0, r = rndn(m, 10);
    struct seq *o = &m->s[rndn(m, NSEQ)];
    if (r < 3 && o != s && o->state != FREE) {
        /* the same prompt as a request in flight: both compute it, the second to finish
         * finds part of its run cached (an insert that splits a node) */
        n = 1 + rndn(m, o->target < MAXT ? o->target : MAXT - 1);
        memcpy(s->tok, o->tok, (size_t)n * sizeof *s->tok);
        s->ns = o->ns;
    } else if (m->n_hist && r < 8) {
        /* a later turn, or another request with the same system prompt: a prefix of an
         * earlier sequence, usually in its namespace (sometimes in another: must miss) */
        const struct hist *h = &m->h[rndn(m, m->n_hist)];
        n = 1 + rndn(m, h->n < MAXT ? h->n : MAXT - 1);
        memcpy(s->tok, h->tok, (size_t)n * sizeof *s->tok);
        if (rndn(m, 5)) s->ns = h->ns;
    }
    s->target = n + 1 + rndn(m, MAXT - n);
    for (int i = n; i < s->target; i++)
        s->tok[i] = rndn(m, 8) ? rndn(m, 2) : 2 + rndn(m, 3); /* small alphabet: collisions */
    s->n_known = n + rndn(m, s->target - n + 1);
    if (s->n_known == 0) s->n_known = 1;
}

static void admit(struct sim *m, struct seq *s)
{
    int32_t blocks[MAXB];
    rdx_node *lk;
    /* sometimes a capped lookup: the sequence recomputes blocks the tree has, and its
     * insert later meets them (kept once, and split where it diverges inside a node) */
    int cap = rndn(m, 4) ? MAXB : rndn(m, 3);
    int nb = checked_match(m, s->ns, s->tok, s->n_known, cap, blocks, &lk);
    memcpy(s->table, blocks, (size_t)nb * sizeof *blocks);
    s->n_table = s->n_locked = nb;
    s->lock = lk;
    s->n_done = nb * BS;
    s->state = RUNNING;
    s->order = ++m->order;
    m->c.admits++;
    m->c.match_tokens += nb * BS;
    m->c.match_hits += nb > 0;
}

/* A free block for s: evict, then preempt the newest other running sequence, as the
 * scheduler does. False when s itself had to be preempted. */
static bool get_block(struct sim *m, struct seq *s, int32_t *b)
{
    for (;;) {
        if (kvc_alloc(m->p, b) == 0) {
            m->c.allocs++;
            return true;
        }
        if (evict(m, 1) > 0) continue;
        struct seq *victim = s;
        for (int i = 0; i < NSEQ; i++) {
            struct seq *o = &m->s[i];
            if (o != s && o->state == RUNNING && o->n_table > 0 &&
                (victim == s || o->order > victim->order))
                victim = o;
        }
        preempt(m, victim);
        if (victim == s) return false;
    }
}

static void step(struct sim *m, struct seq *s)
{
    uint64_t fp[MAXT];
    fingerprints(s->ns, s->tok, s->target, fp);
    int k = 1 + rndn(m, 8);
    m->c.steps++;
    for (; k > 0 && s->n_done < s->target; k--) {
        int pos = s->n_done;
        if (pos % BS == 0) {
            cr_assert_eq(s->n_table, pos / BS);
            if (!get_block(m, s, &s->table[s->n_table])) return;
            s->n_table++;
        }
        write_fp(m->p, s->table[pos / BS], pos % BS, fp[pos]);
        s->n_done++;
    }
}

static void finish(struct sim *m, struct seq *s)
{
    int nb = s->n_done / BS;
    int32_t before[MAXB], after[MAXB];
    rdx_node *lk;
    /* what is cached already: half the time by a lookup first (which may split a node at
     * the end of the match), else from the tree's contents (the insert does the split) */
    bool looked = rndn(m, 2);
    int c0;
    if (looked) {
        c0 = checked_match(m, s->ns, s->tok, s->n_done, MAXB, before, &lk);
        rdx_unlock(m->t, lk);
        release_blocks(m->p, c0, before);
    } else {
        c0 = ref_longest(m, s->ns, s->tok, nb);
    }
    int nodes = count_nodes(m);
    int r = rdx_insert(m->t, s->ns, s->tok, s->n_done, s->table);
    cr_assert_eq(r, nb - c0, "insert took %d blocks, %d of %d were cached", r, c0, nb);
    int added = count_nodes(m) - nodes; /* a leaf, and its parent when split off */
    cr_assert(r > 0 ? added == 1 || added == 2 : added == 0);
    m->c.insert_splits += added == 2;
    m->c.inserts++;
    m->c.inserted_blocks += r;
    /* all of it cached now: the tree's blocks where it had them (fingerprints checked by
     * checked_match), the sequence's after */
    cr_assert_eq(checked_match(m, s->ns, s->tok, s->n_done, MAXB, after, &lk), nb);
    for (int i = looked ? 0 : c0; i < nb; i++)
        cr_assert_eq(after[i], i < c0 ? before[i] : s->table[i]);
    rdx_unlock(m->t, lk);
    release_blocks(m->p, nb, after);
    if (s->n_done > 0) {
        struct hist *h = m->n_hist < NHIST ? &m->h[m->n_hist++] : &m->h[rndn(m, NHIST)];
        h->ns = s->ns;
        h->n = s->n_done;
        memcpy(h->tok, s->tok, (size_t)s->n_done * sizeof *s->tok);
    }
    drop(m, s);
    s->state = FREE;
    m->c.finishes++;
}

/* A lookup with arbitrary length and cap, let go at once. */
static void probe(struct sim *m)
{
    int32_t tok[MAXT], blocks[MAXB];
    uint64_t ns = 1 + rndn(m, 2);
    int n = rndn(m, MAXT + 1);
    if (m->n_hist) {
        const struct hist *h = &m->h[rndn(m, m->n_hist)];
        ns = rndn(m, 4) ? h->ns : ns;
        n = rndn(m, h->n + 1);
        memcpy(tok, h->tok, (size_t)n * sizeof *tok);
    } else {
        for (int i = 0; i < n; i++)
            tok[i] = rndn(m, 2);
    }
    rdx_node *lk;
    int nb = checked_match(m, ns, tok, n, rndn(m, MAXB + 1), blocks, &lk);
    rdx_unlock(m->t, lk);
    release_blocks(m->p, nb, blocks);
    m->c.probes++;
}

static struct seq *pick(struct sim *m, int state)
{
    int start = rndn(m, NSEQ);
    for (int i = 0; i < NSEQ; i++) {
        struct seq *s = &m->s[(start + i) % NSEQ];
        if (s->state == state) return s;
    }
    return NULL;
}

static void run_random(uint64_t seed, int n_ops)
{
    struct sim *m = calloc(1, sizeof *m);
    cr_assert_not_null(m);
    m->rng = seed ? seed : 1;
    m->p = make_pool(POOL);
    m->t = make_tree(m->p);
    poison_free(m);
    for (int op = 0; op < n_ops; op++) {
        int r = rndn(m, 100);
        struct seq *s;
        /* weights: new 12, admit 15, step or finish 45, preempt 3, cancel 3, evict 5,
         * probe 17 */
        if (r < 12) {
            if ((s = pick(m, FREE))) new_seq(m, s);
        } else if (r < 27) {
            if ((s = pick(m, WAITING))) admit(m, s);
        } else if (r < 72) {
            if ((s = pick(m, RUNNING))) {
                if (s->n_done == s->target)
                    finish(m, s);
                else
                    step(m, s);
            }
        } else if (r < 75) {
            if ((s = pick(m, RUNNING))) preempt(m, s);
        } else if (r < 78) {
            if ((s = pick(m, rndn(m, 2) ? RUNNING : WAITING))) {
                drop(m, s);
                s->state = FREE;
                m->c.cancels++;
            }
        } else if (r < 83) {
            evict(m, rndn(m, 4) ? rndn(m, POOL / 4) : rndn(m, POOL + 1));
        } else {
            probe(m);
        }
        m->c.ops++;
        check_all(m);
    }
    /* the end: every sequence goes, the tree is emptied, then destroyed */
    for (int i = 0; i < NSEQ; i++)
        drop(m, &m->s[i]);
    check_all(m);
    cr_assert_eq(rdx_evictable_blocks(m->t), rdx_held_blocks(m->t));
    int held = rdx_held_blocks(m->t);
    cr_assert_eq(evict(m, POOL), held);
    cr_assert_eq(rdx_held_blocks(m->t), 0);
    cr_assert_eq(kvc_free_blocks(m->p), POOL);
    check_all(m);
    rdx_destroy(m->t);
    cr_assert_eq(kvc_free_blocks(m->p), POOL);
    struct counts *c = &m->c;
    fprintf(stderr,
            "radix seed %llu: %ld ops (%ld full checks): %ld admits (%ld hits, %ld tokens "
            "matched), %ld steps, %ld blocks allocated, %ld finished (%ld blocks newly "
            "cached), %ld preempted, %ld cancelled, %ld rdx_evict calls (%ld blocks freed), "
            "%ld probes; node splits: %ld by insert, %ld by match\n",
            (unsigned long long)seed, c->ops, c->checks, c->admits, c->match_hits, c->match_tokens,
            c->steps, c->allocs, c->finishes, c->inserted_blocks, c->preempts, c->cancels,
            c->evict_calls, c->evicted_blocks, c->probes, c->insert_splits, c->match_splits);
    cr_assert_gt(c->match_hits, c->admits / 10, "too few prefix hits to test anything");
    cr_assert_gt(c->evicted_blocks, 0);
    cr_assert_gt(c->preempts, 0);
    cr_assert_gt(c->insert_splits, 0);
    cr_assert_gt(c->match_splits, 0);
    kvc_destroy(m->p);
    free(m);
}

Test(radix, random_operations, .timeout = 60)
{
    const char *env = getenv("RDX_SEED");
    if (env) {
        run_random(strtoull(env, NULL, 0), 20000);
        return;
    }
    for (uint64_t seed = 1; seed <= 3; seed++)
        run_random(seed * 0x9e3779b97f4a7c15ULL, 20000);
}

/* Enough nodes to grow the child table and the heap several times over. */
Test(radix, many_nodes)
{
    enum { NB = 4096, NS = 1500 };
    kvc_pool *p = make_pool(NB);
    rdx_tree *t = make_tree(p);
    struct sim *m = calloc(1, sizeof *m); /* only for its random numbers */
    int32_t(*tok)[4 * BS] = calloc(NS, sizeof *tok);
    uint64_t *ns = calloc(NS, sizeof *ns);
    int *len = calloc(NS, sizeof *len);
    cr_assert(m && tok && ns && len);
    m->rng = 12345;
    int held = 0;
    for (int i = 0; i < NS; i++) {
        int32_t blocks[4];
        uint64_t fp[4 * BS];
        ns[i] = (uint64_t)rndn(m, 2) << 40;
        for (int j = 0; j < 4 * BS; j++)
            tok[i][j] = rndn(m, 5);
        fingerprints(ns[i], tok[i], 4 * BS, fp);
        int nb = len[i] = 1 + rndn(m, 4);
        alloc_blocks(p, nb, blocks);
        for (int j = 0; j < nb * BS; j++)
            write_fp(p, blocks[j / BS], j % BS, fp[j]);
        int r = rdx_insert(t, ns[i], tok[i], nb * BS, blocks);
        cr_assert(r >= 0 && r <= nb);
        held += r;
        release_blocks(p, nb, blocks);
    }
    check_tree(t);
    cr_assert_eq(rdx_held_blocks(t), held);
    cr_assert_eq(kvc_free_blocks(p), NB - held);
    int n_nodes = count_nodes(&(struct sim){.t = t});
    for (int i = 0; i < NS; i++) {
        int32_t blocks[4];
        rdx_node *lk;
        int got = -1;
        cr_assert_eq(rdx_match(t, ns[i], tok[i], 4 * BS, blocks, 4, &got, &lk), 0);
        cr_assert_geq(got, len[i] * BS); /* what it inserted, or more from another */
        verify_blocks(p, ns[i], tok[i], blocks, got / BS, 0, "many");
        rdx_unlock(t, lk);
        release_blocks(p, got / BS, blocks);
    }
    check_tree(t);
    cr_assert_geq(count_nodes(&(struct sim){.t = t}), n_nodes);
    fprintf(stderr, "radix: %d sequences, %d blocks cached in %d nodes\n", NS, held, n_nodes);
    cr_assert_gt(n_nodes, 1000);
    int freed = rdx_evict(t, NB - held / 2);
    /* whole leaves go: it may free more than asked, never less */
    cr_assert(freed >= held - held / 2 && freed <= held, "freed %d of %d", freed, held);
    cr_assert_geq(kvc_free_blocks(p), NB - held / 2);
    check_tree(t);
    rdx_destroy(t);
    cr_assert_eq(kvc_free_blocks(p), NB);
    free(tok);
    free(ns);
    free(len);
    free(m);
    kvc_destroy(p);
}
