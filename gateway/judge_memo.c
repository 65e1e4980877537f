#include "judge_memo.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct memo {
    struct memo *chain;       /* the next in its bucket */
    struct memo *newer, *older; /* the LRU list */
    uint64_t hash;
    int64_t tenant;
    size_t len, bytes;
    char *q;
    struct gw_judge_text t;
};

struct gw_judge_memo {
    size_t max_bytes, bytes, count, nbuckets; /* nbuckets: a power of two */
    struct memo **buckets;
    struct memo *newest, *oldest;
};

static uint64_t key_hash(int64_t tenant, const char *q, size_t len)
{
    return XXH3_64bits_withSeed(q, len, (uint64_t)tenant);
}

static size_t text_bytes(const struct gw_judge_text *t)
{
    return sizeof(float) * GW_JUDGE_LAYERS * (size_t)t->n * (size_t)t->dim +
           sizeof *t->ids * (size_t)t->n;
}

gw_judge_memo *gw_judge_memo_create(size_t max_bytes)
{
    gw_judge_memo *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->max_bytes = max_bytes;
    m->nbuckets = 256;
    m->buckets = calloc(m->nbuckets, sizeof *m->buckets);
    if (!m->buckets) {
        free(m);
        return NULL;
    }
    return m;
}

static struct memo **find(gw_judge_memo *m, uint64_t hash, int64_t tenant, const char *q,
                          size_t len)
{
    struct memo **at = &m->buckets[hash & (m->nbuckets - 1)];
    while (*at && ((*at)->hash != hash || (*at)->tenant != tenant || (*at)->len != len ||
                   memcmp((*at)->q, q, len)))
        at = &(*at)->chain;
    return at;
}

static void lru_unlink(gw_judge_memo *m, struct memo *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        m->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        m->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_front(gw_judge_memo *m, struct memo *e)
{
    e->older = m->newest;
    e->newer = NULL;
    if (m->newest)
        m->newest->newer = e;
    m->newest = e;
    if (!m->oldest)
        m->oldest = e;
}

/* unlinks and frees the entry *at points to */
static void drop(gw_judge_memo *m, struct memo **at)
{
    struct memo *e = *at;
    *at = e->chain;
    lru_unlink(m, e);
    m->bytes -= e->bytes;
    m->count--;
    gw_judge_text_free(&e->t);
    free(e->q);
    free(e);
}

/* doubles the buckets once there are more entries than buckets (kept as they are when the
 * bigger table cannot be had) */
static void grow(gw_judge_memo *m)
{
    if (m->count <= m->nbuckets)
        return;
    size_t n = m->nbuckets * 2;
    struct memo **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < m->nbuckets; i++)
        for (struct memo *e = m->buckets[i], *next; e; e = next) {
            next = e->chain;
            e->chain = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

int gw_judge_memo_get(gw_judge_memo *m, int64_t tenant, const char *q, size_t len,
                      struct gw_judge_text *out)
{
    memset(out, 0, sizeof *out);
    struct memo *e = *find(m, key_hash(tenant, q, len), tenant, q, len);
    if (!e || gw_judge_text_copy(&e->t, out))
        return 0;
    lru_unlink(m, e);
    lru_front(m, e);
    return 1;
}

void gw_judge_memo_put(gw_judge_memo *m, int64_t tenant, const char *q, size_t len,
                       const struct gw_judge_text *t)
{
    uint64_t hash = key_hash(tenant, q, len);
    struct memo **at = find(m, hash, tenant, q, len);
    if (*at)
        drop(m, at);
    size_t bytes = sizeof(struct memo) + len + text_bytes(t);
    if (bytes > m->max_bytes)
        return;
    struct memo *e = calloc(1, sizeof *e);
    if (!e)
        return;
    e->q = malloc(len ? len : 1);
    if (!e->q || gw_judge_text_copy(t, &e->t)) {
        free(e->q);
        free(e);
        return;
    }
    memcpy(e->q, q, len);
    e->hash = hash;
    e->tenant = tenant;
    e->len = len;
    e->bytes = bytes;
    while (m->oldest && m->bytes + bytes > m->max_bytes)
        drop(m, find(m, m->oldest->hash, m->oldest->tenant, m->oldest->q, m->oldest->len));
    at = &m->buckets[hash & (m->nbuckets - 1)];
    e->chain = *at;
    *at = e;
    lru_front(m, e);
    m->bytes += bytes;
    m->count++;
    grow(m);
}

size_t gw_judge_memo_bytes(const gw_judge_memo *m)
{
    return m->bytes;
}

void gw_judge_memo_destroy(gw_judge_memo *m)
{
    if (!m)
        return;
    while (m->oldest)
        drop(m, find(m, m->oldest->hash, m->oldest->tenant, m->oldest->q, m->oldest->len));
    free(m->buckets);
    free(m);
}
