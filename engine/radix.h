/*
 * radix — the prefix cache of the engine (rdx_): a radix tree over the paged KV pool
 * (kvcache.h) that remembers which blocks hold the keys and values of which token
 * prefixes, so that a new request whose prompt starts like an earlier sequence reuses
 * those blocks instead of recomputing them.
 *
 * Keys. The first key is the tenant's namespace (a uint64_t): the root's children are one
 * node per namespace, and tenants share no KV unless they use the same namespace value.
 * Below a namespace, nodes hold runs of token ids at block granularity: a run is a whole
 * number of full blocks (block_size tokens each, from kvc_shape()), together with the block
 * id of each. A partly filled last block of a sequence is never cached. The KV of a block
 * depends on every token before it, so a block stands for the whole path from the
 * namespace down to it, not just its own tokens. The tree gives no value a meaning: that
 * 0 is the global namespace, shared by the tenants configured to share, is the gateway's
 * convention (engine_worker.h).
 *
 * Why a namespace node under one root rather than a tree per tenant: the tenants share one
 * KV pool, so eviction must take the least recently used unlocked leaf over all of them;
 * with one tree that is one heap, one child table and one set of counters, and a match or
 * insert pays a single extra lookup (the namespace node, keyed by (root, ns) in the child
 * table). A namespace node holds no blocks, is never in the heap, and goes away with its
 * last child, so an idle tenant costs nothing once its runs are evicted.
 *
 * Splitting. Namespace 7 holds one node N, "abcd efgh ijkl" in blocks 3, 8, 5 (block size
 * 4). Inserting "abcd efgh mnop" computed in the caller's blocks 20, 21, 11 diverges at the
 * third block, so N is cut at a block boundary: a new node P takes the common blocks and N keeps
 * its tail. N keeps its identity (a lock handle on N stays valid; P inherits N's lock
 * count and time), and the new tail becomes a leaf L beside N. The tree keeps its blocks 3
 * and 8 and takes a reference on 11 only; the caller releases its own 20 and 21 as usual.
 *
 *        before                               after
 *
 *        (root)                               (root)
 *          |                                    |
 *        [ns 7]                               [ns 7]
 *          |                                    |
 *   N  "abcd|efgh|ijkl"                  P  "abcd|efgh"
 *       [  3 |  8 |  5 ]                     [  3 |  8 ]
 *                                          /           \
 *                              N  "ijkl"                 L  "mnop"
 *                                  [ 5 ]                     [ 11 ]
 *
 * A match that ends inside a node splits it the same way, so that a lock covers exactly
 * the matched blocks.
 *
 * Locks and eviction. rdx_match() locks the matched path and returns a handle (the deepest
 * matched node); rdx_unlock() undoes it. Locks are counted: a node's lock is the number of
 * outstanding handles at it or below it. Only leaves with lock 0 are evicted, least
 * recently used first (a match or insert through a node refreshes its time); evicting a
 * leaf releases the tree's reference on each of its blocks and may make its parent an
 * evictable leaf. Evictable leaves sit in a binary min-heap keyed by last use.
 *
 * Invariants (rdx_check() verifies all of them):
 *  - a run node holds n >= 1 full blocks and n * block_size token ids; the children of a
 *    node start with pairwise different first blocks (runs share no leading block);
 *  - namespace nodes are the root's children, hold no blocks, and have at least one child
 *    (one goes away with its last child);
 *  - the tree holds exactly one reference (kvc_acquire) on each block it stores, and stores
 *    a block at most once;
 *  - lock(node) = handles at the node or below it, so lock(parent) >= sum of lock(children);
 *  - a node is in the LRU heap exactly when it is a run leaf with lock 0;
 *  - last_used(parent) >= last_used(child);
 *  - held = blocks stored; evictable = blocks stored in nodes with lock 0.
 *
 * Ownership. The tree owns its nodes and one reference per stored block; the pool must
 * outlive the tree. rdx_match() gives the caller one reference per returned block (one
 * kvc_release() each, like blocks it allocated) and one lock (one rdx_unlock()). The
 * caller of rdx_insert() keeps its own references. Protocol the counters assume: callers
 * hold references to blocks of the tree only through a locked match, or between an insert
 * and their own release; then evicting every unlocked node frees exactly
 * rdx_evictable_blocks() blocks.
 *
 * Threads: none of its own; single-threaded, the engine thread owns the tree (and its pool).
 *
 * Cost: match and insert compare each token once (O(n)), find each child in O(1) expected
 * (one hash table of (parent, first block) -> child for the whole tree), and walk the path
 * once to lock or touch it (O(depth)), plus O(log leaves) for the heap. Eviction is
 * O(log leaves) per evicted leaf plus its blocks. rdx_visit() and rdx_check() are
 * O(nodes + blocks) and meant for tests and debugging.
 */
#ifndef ENG_RADIX_H
#define ENG_RADIX_H

#include "kvcache.h"

#include <stdint.h>

typedef struct rdx_tree rdx_tree;
typedef struct rdx_node rdx_node; /* a lock handle; opaque */

/* An empty tree over pool (borrowed; it must outlive the tree); the block size is
 * kvc_shape(pool)->block_size. ENG_EINVAL, ENG_ENOMEM. */
int rdx_create(kvc_pool *pool, rdx_tree **out);
/* Releases the tree's reference on every block it holds. Accepts NULL. Handles still
 * locked become invalid (the blocks their callers acquired stay theirs). */
void rdx_destroy(rdx_tree *t);

/* The longest cached prefix of tokens[0..n) in namespace ns, a multiple of block_size
 * tokens and at most max_blocks blocks. Writes its block ids to blocks[0..k) and acquires
 * each for the caller (one kvc_release each), sets *n_matched_tokens to k * block_size,
 * and locks the path: *lock is the handle to pass to rdx_unlock() once, or NULL when
 * nothing matched (then nothing is acquired or locked). A caller that must compute at
 * least one token (for its logits) passes n - 1. 0, ENG_EINVAL, ENG_ENOMEM (when a node
 * had to be split; nothing acquired or locked). */
int rdx_match(rdx_tree *t, uint64_t ns, const int32_t *tokens, int n, int32_t *blocks /* out */,
              int max_blocks, int *n_matched_tokens /* out */, rdx_node **lock /* out */);
/* Undoes one rdx_match() lock. Accepts NULL. */
void rdx_unlock(rdx_tree *t, rdx_node *lock);

/* Adds a finished sequence: tokens[0..n) (prompt and generated tokens) and its block table
 * blocks[0..n / block_size), every one a live block. Only full blocks are cached. Where
 * the tree already holds a run it keeps its own blocks; for each new one it takes a
 * reference. The caller keeps (and later releases) its own references either way.
 * Returns how many blocks the tree newly holds (>= 0), or ENG_EINVAL (a block id outside
 * the pool or free, a block listed twice, or a new block the tree already holds for other
 * tokens; nothing changed), ENG_ENOMEM (nothing changed). */
int rdx_insert(rdx_tree *t, uint64_t ns, const int32_t *tokens, int n, const int32_t *blocks);

/* Evicts unlocked leaves, least recently used first, until the pool has at least
 * want_free_blocks free blocks or nothing is evictable. Returns how many blocks went back
 * to the pool's free list (a block a caller still holds is released by the tree but not
 * freed). */
int rdx_evict(rdx_tree *t, int want_free_blocks);

int rdx_held_blocks(const rdx_tree *t);      /* blocks the tree holds a reference on */
int rdx_evictable_blocks(const rdx_tree *t); /* of those, blocks in unlocked nodes */

/* Called once per node below a namespace, parents before children. tokens and blocks are
 * the whole path from the namespace to the end of the node (n_blocks blocks, n_blocks *
 * block_size tokens); its last node_blocks blocks are the node's own; lock is its lock
 * count. Borrowed, valid during the call. */
typedef void (*rdx_visit_fn)(void *ud, uint64_t ns, const int32_t *tokens, const int32_t *blocks,
                             int n_blocks, int node_blocks, int lock);
/* For tests and debugging: O(nodes + blocks). 0 or ENG_ENOMEM. */
int rdx_visit(const rdx_tree *t, rdx_visit_fn fn, void *ud);

/* For tests: verifies every invariant above (and the heap, child table and counters),
 * O(nodes + blocks + pool blocks). 0; ENG_EINVAL with *what naming the broken one (a
 * static string; what may be NULL); ENG_ENOMEM. */
int rdx_check(const rdx_tree *t, const char **what /* out */);

#endif
