/*
 * The store's writer thread: takes everything queued, applies it in one transaction,
 * evicts over-capacity tenants and expired entries in the same transaction, commits,
 * then updates the indexes and runs the callbacks. Also starts and finishes background
 * index rebuilds (flat <-> HNSW, or HNSW with too many tombstones).
 */
#include "store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ queueing */

/* Where entry id's probe starts in a power-of-two table of touches (mask: size - 1). */
static size_t id_home(int64_t id, size_t mask)
{
    return (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & mask;
}

/* The q_touch slot of id: its queued touch, or the free slot where it would go (q_mu). */
static size_t touch_slot(const store *s, int64_t id)
{
    size_t i = id_home(id, STORE_TOUCH_SLOTS - 1);
    while (s->q_touch[i] && s->q_touch[i]->id != id)
        i = (i + 1) & (STORE_TOUCH_SLOTS - 1);
    return i;
}

static int spends(const struct store_usage *u)
{
    return u->prompt_tokens > 0 || u->completion_tokens > 0;
}

/* q_mu held */
static void append(store *s, struct op *o)
{
    if (s->q_tail)
        s->q_tail->next = o;
    else
        s->q_head = o;
    s->q_tail = o;
}

/* The usage row queued for u's tenant and day, or NULL (q_mu held). */
static struct op *queued_usage(store *s, const struct store_usage *u)
{
    for (int i = 0; i < s->q_nusage; i++)
        if (s->q_usage[i]->u.tenant == u->tenant && !strcmp(s->q_usage[i]->u.day, u->day))
            return s->q_usage[i];
    return NULL;
}

static void usage_merge(struct store_usage *into, const struct store_usage *u)
{
    into->requests += u->requests;
    into->prompt_tokens += u->prompt_tokens;
    into->completion_tokens += u->completion_tokens;
    into->cached_tokens += u->cached_tokens;
    into->exact_hits += u->exact_hits;
    into->semantic_hits += u->semantic_hits;
    into->tokens_saved += u->tokens_saved;
}

static int enqueue(store *s, struct op *o)
{
    pthread_mutex_lock(&s->q_mu);
    if (s->closing || !s->writer_running) {
        pthread_mutex_unlock(&s->q_mu);
        free(o);
        return STORE_ECLOSED;
    }
    append(s, o);
    if (o->kind == OP_TOUCH && s->q_ntouch < STORE_TOUCH_SLOTS / 2) {
        size_t i = touch_slot(s, o->id);
        if (!s->q_touch[i]) {
            s->q_touch[i] = o;
            s->q_ntouch++;
        }
    } else if (o->kind == OP_USAGE && s->q_nusage < STORE_USAGE_SLOTS) {
        s->q_usage[s->q_nusage++] = o;
    }
    /* a touch (LRU bookkeeping) waits for the next batch or the writer's once-a-second
     * wake: waking the writer per cache hit would cost more than the hit; so does usage
     * without tokens spent (a cache hit's), while tokens spent, which quotas count from the
     * table after a restart, are committed at once (a crash loses none) */
    if ((o->kind != OP_TOUCH && o->kind != OP_PROMPT_TOKENS && o->kind != OP_USAGE) ||
        (o->kind == OP_USAGE && spends(&o->u))) {
        s->q_urgent++;
        pthread_cond_signal(&s->q_cond);
    }
    pthread_mutex_unlock(&s->q_mu);
    return STORE_OK;
}

static char *put_str(char **w, const char *src, size_t len)
{
    char *d = *w;
    memcpy(d, src, len);
    d[len] = 0;
    *w += len + 1;
    return d;
}

int store_put(store *s, const struct store_entry *e, store_done_fn done, void *arg)
{
    if (!e->model || !e->query || !e->answer || !e->finish_reason)
        return STORE_EINVAL;
    size_t ml = strlen(e->model), fl = strlen(e->finish_reason);
    size_t vec = e->embedding ? sizeof(float) * (size_t)s->opt.dim : 0;
    /* one allocation: op, embedding, then the strings */
    struct op *o = calloc(1, sizeof *o + vec + ml + fl + e->query_len + e->answer_len + 4);
    if (!o)
        return STORE_ENOMEM;
    o->kind = OP_PUT;
    o->done = done;
    o->arg = arg;
    o->e = *e;
    float *v = (float *)(o + 1);
    if (vec)
        memcpy(v, e->embedding, vec);
    o->e.embedding = vec ? v : NULL;
    char *w = (char *)v + vec;
    o->e.model = put_str(&w, e->model, ml);
    o->e.finish_reason = put_str(&w, e->finish_reason, fl);
    o->e.query = put_str(&w, e->query, e->query_len);
    o->e.answer = put_str(&w, e->answer, e->answer_len);
    return enqueue(s, o);
}

static int simple_op(store *s, enum op_kind kind, int64_t tenant, int64_t id, int64_t value,
                     store_done_fn done, void *arg)
{
    struct op *o = calloc(1, sizeof *o);
    if (!o)
        return STORE_ENOMEM;
    *o = (struct op){.kind = kind, .tenant = tenant, .id = id, .value = value, .done = done,
                     .arg = arg};
    return enqueue(s, o);
}

int store_apply_limits(store *s, int64_t tenant, int64_t ttl_ms)
{
    return simple_op(s, OP_LIMITS, tenant, 0, ttl_ms > 0 ? ttl_ms : 0, NULL, NULL);
}

int store_touch(store *s, int64_t id, int64_t now_ms)
{
    pthread_mutex_lock(&s->q_mu);
    struct op *q = s->closing ? NULL : s->q_touch[touch_slot(s, id)];
    if (q) {
        q->value = now_ms > q->value ? now_ms : q->value;
        q->hits++;
    }
    pthread_mutex_unlock(&s->q_mu);
    if (q)
        return STORE_OK;
    struct op *o = calloc(1, sizeof *o);
    if (!o)
        return STORE_ENOMEM;
    *o = (struct op){.kind = OP_TOUCH, .id = id, .value = now_ms, .hits = 1};
    return enqueue(s, o);
}

int store_set_prompt_tokens(store *s, int64_t id, int prompt_tokens)
{
    return simple_op(s, OP_PROMPT_TOKENS, 0, id, prompt_tokens, NULL, NULL);
}

int store_delete(store *s, int64_t tenant, int64_t id, store_done_fn done, void *arg)
{
    return simple_op(s, OP_DELETE, tenant, id, 0, done, arg);
}

int store_entry_list_queue(store *s, struct store_list *q, store_done_fn done, void *arg)
{
    struct op *o = calloc(1, sizeof *o);
    if (!o)
        return STORE_ENOMEM;
    *o = (struct op){.kind = OP_LIST, .list = q, .done = done, .arg = arg};
    return enqueue(s, o);
}

int store_response_put(store *s, int64_t tenant, const char *id, const char *body,
                       const char *messages, int64_t ttl_ms, store_done_fn done, void *arg)
{
    size_t il = strlen(id), bl = strlen(body), ml = strlen(messages);
    struct op *o = calloc(1, sizeof *o + il + bl + ml + 3);
    if (!o)
        return STORE_ENOMEM;
    o->kind = OP_RESPONSE;
    o->done = done;
    o->arg = arg;
    o->tenant = tenant;
    o->value = ttl_ms > 0 ? store_now_ms() + ttl_ms : 0;
    char *w = (char *)(o + 1);
    o->rid = put_str(&w, id, il);
    o->rbody = put_str(&w, body, bl);
    o->rmsgs = put_str(&w, messages, ml);
    return enqueue(s, o);
}

int store_flush(store *s, store_done_fn done, void *arg)
{
    return simple_op(s, OP_FLUSH, 0, 0, 0, done, arg);
}

int store_usage_add(store *s, const struct store_usage *u)
{
    pthread_mutex_lock(&s->q_mu);
    struct op *q = s->closing ? NULL : queued_usage(s, u);
    if (q) {
        usage_merge(&q->u, u);
        if (spends(u)) { /* (as enqueue() does) */
            s->q_urgent++;
            pthread_cond_signal(&s->q_cond);
        }
    }
    pthread_mutex_unlock(&s->q_mu);
    if (q)
        return STORE_OK;
    struct op *o = calloc(1, sizeof *o);
    if (!o)
        return STORE_ENOMEM;
    o->kind = OP_USAGE;
    o->u = *u;
    return enqueue(s, o);
}

/* A usage row whose batch was rolled back (a full disk): queued again, to be written with
 * the next batch, at the latest the writer's wake a second later (not at once: the disk
 * may stay full). 0 when the store is closing, or when it joined a row already queued
 * (the caller frees it then). */
static int usage_again(store *s, struct op *o)
{
    pthread_mutex_lock(&s->q_mu);
    struct op *q = queued_usage(s, &o->u);
    int kept = !s->closing && !q;
    o->tries++;
    if (q) {
        usage_merge(&q->u, &o->u);
        if (q->tries < o->tries)
            q->tries = o->tries;
    } else if (kept) {
        o->next = NULL;
        append(s, o);
        if (s->q_nusage < STORE_USAGE_SLOTS)
            s->q_usage[s->q_nusage++] = o;
    }
    pthread_mutex_unlock(&s->q_mu);
    return kept;
}

struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int done, rc;
};

static void sync_done(void *arg, int rc, int64_t id)
{
    (void)id;
    struct sync_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    w->rc = rc;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

int store_sync(store *s)
{
    struct sync_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    int rc = store_flush(s, sync_done, &w);
    if (rc)
        return rc;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cond, &w.mu);
    pthread_mutex_unlock(&w.mu);
    return w.rc;
}

/* ------------------------------------------------------------------ statements */

static const char *const SQL[] = {
    "SELECT id, bytes FROM entries WHERE tenant = ?1 AND exact = ?2",
    /* nor an answer that was still being written when its tenant was deleted */
    "INSERT INTO entries (tenant, partition, exact, model, query, embedding, answer, "
    "prompt_tokens, completion_tokens, finish_reason, created_ms, last_hit_ms, expires_ms, "
    "bytes) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13 "
    "WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?1)",
    "DELETE FROM entries WHERE id = ?1",
    "UPDATE entries SET last_hit_ms = max(last_hit_ms, ?2), hit_count = hit_count + ?3 "
    "WHERE id = ?1",
    /* a tenant deleted (by another process) while its usage was queued gets no row back */
    "INSERT INTO usage_daily (tenant, day, requests, prompt_tokens, completion_tokens, "
    "cached_tokens, exact_hits, semantic_hits, tokens_saved) SELECT ?1, ?2, ?3, ?4, ?5, ?6, "
    "?7, ?8, ?9 WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?1) "
    "ON CONFLICT (tenant, day) DO UPDATE SET requests = requests + ?3, "
    "prompt_tokens = prompt_tokens + ?4, completion_tokens = completion_tokens + ?5, "
    "cached_tokens = cached_tokens + ?6, exact_hits = exact_hits + ?7, "
    "semantic_hits = semantic_hits + ?8, tokens_saved = tokens_saved + ?9",
    "SELECT id, bytes FROM entries WHERE tenant = ?1 ORDER BY last_hit_ms, id LIMIT ?2",
    "SELECT id, tenant, bytes FROM entries WHERE expires_ms > 0 AND expires_ms <= ?1 LIMIT 4096",
    "SELECT id, tenant, bytes FROM entries WHERE (?1 < 0 OR tenant = ?1) AND (?2 < 0 OR id = ?2)",
    "UPDATE entries SET prompt_tokens = ?2 WHERE id = ?1",
    /* a tenant deleted while its response was queued gets no row */
    /* created_ms increases within a tenant (the oldest go first past its budget), even
     * when the clock steps back */
    "INSERT OR REPLACE INTO responses (id, tenant, created_ms, expires_ms, body, messages, "
    "bytes) SELECT ?1, ?2, max(?3, coalesce((SELECT max(created_ms) + 1 FROM responses "
    "WHERE tenant = ?2), 0)), ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?2)",
    "DELETE FROM responses WHERE expires_ms > 0 AND expires_ms <= ?1",
    "SELECT coalesce(sum(bytes), 0) FROM responses WHERE tenant = ?1",
    /* the oldest, the newest never among them */
    "SELECT id, bytes FROM responses WHERE tenant = ?1 AND created_ms < (SELECT "
    "max(created_ms) FROM responses WHERE tenant = ?1) ORDER BY created_ms, id LIMIT 256",
    "DELETE FROM responses WHERE id = ?1",
    "UPDATE entries SET expires_ms = created_ms + ?2 WHERE tenant = ?1 AND "
    "(expires_ms = 0 OR expires_ms > created_ms + ?2)",
};

int store_writer_prepare(store *s)
{
    sqlite3_stmt **st[] = {&s->st_find_exact, &s->st_insert,  &s->st_delete_id,
                           &s->st_touch,      &s->st_usage,   &s->st_lru,
                           &s->st_expired,    &s->st_tenant_ids, &s->st_prompt_tokens,
                           &s->st_resp_put,   &s->st_resp_expired, &s->st_resp_bytes,
                           &s->st_resp_oldest, &s->st_resp_delete, &s->st_shorten};
    for (size_t i = 0; i < sizeof st / sizeof *st; i++)
        if (sqlite3_prepare_v3(s->wdb, SQL[i], -1, SQLITE_PREPARE_PERSISTENT, st[i], NULL) !=
            SQLITE_OK)
            return STORE_EIO;
    return STORE_OK;
}

void store_writer_finalize(store *s)
{
    sqlite3_stmt *st[] = {s->st_find_exact, s->st_insert,  s->st_delete_id, s->st_touch,
                          s->st_usage,      s->st_lru,     s->st_expired,   s->st_tenant_ids,
                          s->st_prompt_tokens, s->st_resp_put, s->st_resp_expired,
                          s->st_resp_bytes, s->st_resp_oldest, s->st_resp_delete,
                          s->st_shorten};
    for (size_t i = 0; i < sizeof st / sizeof *st; i++)
        sqlite3_finalize(st[i]);
    free(s->wt);
    s->wt = NULL;
    s->wt_n = s->wt_cap = 0;
    free(s->rtot);
    s->rtot = NULL;
    s->nrtot = s->caprtot = 0;
}

/* ------------------------------------------------------------------ one batch */

/* An index change to apply once the transaction committed. */
struct change {
    int64_t tenant, id;
    const float *vec; /* add; NULL: remove */
};

struct batch {
    struct change *ch;
    size_t n, cap;
    int64_t *tenants; /* tenants that grew, for the capacity check */
    size_t nt, capt;
    struct resp_total *rgrew; /* tenants whose stored responses grew, and by how much */
    size_t nrg, caprg;
    int failed;
};

static void note(struct batch *b, int64_t tenant, int64_t id, const float *vec)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        struct change *c = realloc(b->ch, sizeof *c * cap);
        if (!c) {
            b->failed = 1;
            return;
        }
        b->ch = c;
        b->cap = cap;
    }
    b->ch[b->n++] = (struct change){tenant, id, vec};
}

static void note_tenant(struct batch *b, int64_t tenant)
{
    for (size_t i = 0; i < b->nt; i++)
        if (b->tenants[i] == tenant)
            return;
    if (b->nt == b->capt) {
        size_t cap = b->capt ? b->capt * 2 : 8;
        int64_t *t = realloc(b->tenants, sizeof *t * cap);
        if (!t) {
            b->failed = 1;
            return;
        }
        b->tenants = t;
        b->capt = cap;
    }
    b->tenants[b->nt++] = tenant;
}

static int step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* The tenant's entry in set[*n] (capacity *cap), added (bytes 0) when missing; NULL when
 * out of memory. */
static struct resp_total *resp_total_of(struct resp_total **set, size_t *n, size_t *cap,
                                        int64_t tenant)
{
    for (size_t i = 0; i < *n; i++)
        if ((*set)[i].tenant == tenant)
            return &(*set)[i];
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        struct resp_total *t = realloc(*set, sizeof *t * c);
        if (!t)
            return NULL;
        *set = t;
        *cap = c;
    }
    (*set)[*n] = (struct resp_total){tenant, 0, 0};
    return &(*set)[(*n)++];
}

/* A tenant's stored responses past max bytes: the oldest go (the newest never) until they
 * are within nine tenths of it, so that the next pass is some way off. The total is counted
 * in SQL every few seconds, and kept in between (grown: the batch's new bytes). */
static int trim_responses(store *s, const struct resp_total *grew, int64_t max, int64_t now)
{
    struct resp_total *t = resp_total_of(&s->rtot, &s->nrtot, &s->caprtot, grew->tenant);
    if (!t)
        return -1;
    if (now - t->at_ms >= 5000) { /* counted again (new: at 0), the batch's included */
        sqlite3_bind_int64(s->st_resp_bytes, 1, grew->tenant);
        int rc = sqlite3_step(s->st_resp_bytes);
        t->bytes = rc == SQLITE_ROW ? sqlite3_column_int64(s->st_resp_bytes, 0) : -1;
        sqlite3_reset(s->st_resp_bytes);
        if (t->bytes < 0)
            return -1;
        t->at_ms = now;
    } else {
        t->bytes += grew->bytes;
    }
    if (t->bytes <= max)
        return 0;
    const int64_t target = max - max / 10;
    for (;;) {
        char *ids[256];
        int64_t sizes[256];
        int n = 0;
        sqlite3_bind_int64(s->st_resp_oldest, 1, grew->tenant);
        while (n < 256 && sqlite3_step(s->st_resp_oldest) == SQLITE_ROW) {
            const char *id = (const char *)sqlite3_column_text(s->st_resp_oldest, 0);
            if (!id || !(ids[n] = strdup(id)))
                break;
            sizes[n++] = sqlite3_column_int64(s->st_resp_oldest, 1);
        }
        sqlite3_reset(s->st_resp_oldest);
        int rc = 0;
        for (int k = 0; k < n && !rc && t->bytes > target; k++) {
            sqlite3_bind_text(s->st_resp_delete, 1, ids[k], -1, SQLITE_STATIC);
            rc = step_done(s->st_resp_delete);
            t->bytes -= sizes[k];
        }
        for (int k = 0; k < n; k++)
            free(ids[k]);
        if (rc)
            return -1;
        if (n < 256 || t->bytes <= target) /* the newest alone is left, or within */
            return 0;
    }
}

/* Deletes one row and notes it; counters of its tenant follow. */
static int remove_row(store *s, struct batch *b, int64_t tenant, int64_t id, int64_t bytes)
{
    sqlite3_bind_int64(s->st_delete_id, 1, id);
    if (step_done(s->st_delete_id))
        return -1;
    struct slot *sl = store_slot(s, tenant, 1);
    if (sl) {
        sl->entries--;
        sl->bytes -= bytes;
    }
    note(b, tenant, id, NULL);
    return 0;
}

static int apply_put(store *s, struct batch *b, struct op *o)
{
    const struct store_entry *e = &o->e;
    sqlite3_stmt *f = s->st_find_exact;
    sqlite3_bind_int64(f, 1, e->tenant);
    sqlite3_bind_int64(f, 2, (int64_t)e->exact);
    int64_t old = -1, old_bytes = 0;
    if (sqlite3_step(f) == SQLITE_ROW) {
        old = sqlite3_column_int64(f, 0);
        old_bytes = sqlite3_column_int64(f, 1);
    }
    sqlite3_reset(f);
    if (old >= 0 && remove_row(s, b, e->tenant, old, old_bytes))
        return -1;
    size_t vec = e->embedding ? sizeof(float) * (size_t)s->opt.dim : 0;
    int64_t bytes = (int64_t)(e->query_len + e->answer_len + vec);
    sqlite3_stmt *st = s->st_insert;
    sqlite3_bind_int64(st, 1, e->tenant);
    sqlite3_bind_int64(st, 2, (int64_t)e->partition);
    sqlite3_bind_int64(st, 3, (int64_t)e->exact);
    sqlite3_bind_text(st, 4, e->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, e->query, (int)e->query_len, SQLITE_STATIC);
    if (vec)
        sqlite3_bind_blob(st, 6, e->embedding, (int)vec, SQLITE_STATIC);
    else /* an empty blob (the column is NOT NULL): found by its exact key only */
        sqlite3_bind_zeroblob(st, 6, 0);
    sqlite3_bind_text(st, 7, e->answer, (int)e->answer_len, SQLITE_STATIC);
    sqlite3_bind_int(st, 8, e->prompt_tokens);
    sqlite3_bind_int(st, 9, e->completion_tokens);
    sqlite3_bind_text(st, 10, e->finish_reason, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 11, e->created_ms);
    sqlite3_bind_int64(st, 12, e->expires_ms);
    sqlite3_bind_int64(st, 13, bytes);
    if (step_done(st))
        return -1;
    if (!sqlite3_changes(s->wdb)) { /* the tenant is gone: nothing written */
        o->id = 0;
        return 0;
    }
    o->id = sqlite3_last_insert_rowid(s->wdb);
    struct slot *sl = store_slot(s, e->tenant, 1);
    if (!sl)
        return -1;
    sl->entries++;
    sl->bytes += bytes;
    if (vec)
        note(b, e->tenant, o->id, e->embedding);
    note_tenant(b, e->tenant);
    return 0;
}

/* Rows matched by a select of (id, tenant, bytes) are deleted; returns how many, or -1. */
static int64_t remove_selected(store *s, struct batch *b, sqlite3_stmt *sel, int64_t *per_slot)
{
    int64_t n = 0;
    /* collect first: deleting while stepping the same table's cursor is unsafe */
    int64_t(*rows)[3] = NULL;
    size_t nr = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        if (nr == cap) {
            cap = cap ? cap * 2 : 256;
            int64_t(*r)[3] = realloc(rows, sizeof *r * cap);
            if (!r) {
                free(rows);
                sqlite3_reset(sel);
                return -1;
            }
            rows = r;
        }
        for (int k = 0; k < 3; k++)
            rows[nr][k] = sqlite3_column_int64(sel, k);
        nr++;
    }
    sqlite3_reset(sel);
    if (rc != SQLITE_DONE) {
        free(rows);
        return -1;
    }
    for (size_t i = 0; i < nr; i++) {
        if (remove_row(s, b, rows[i][1], rows[i][0], rows[i][2])) {
            free(rows);
            return -1;
        }
        if (per_slot) {
            struct slot *sl = store_slot(s, rows[i][1], 0);
            if (sl)
                sl->expired++;
        }
        n++;
    }
    free(rows);
    return n;
}

static int apply_usage(store *s, const struct store_usage *u)
{
    sqlite3_stmt *st = s->st_usage;
    sqlite3_bind_int64(st, 1, u->tenant);
    sqlite3_bind_text(st, 2, u->day, -1, SQLITE_STATIC);
    const int64_t v[] = {u->requests,      u->prompt_tokens, u->completion_tokens,
                         u->cached_tokens, u->exact_hits,    u->semantic_hits,
                         u->tokens_saved};
    for (int i = 0; i < 7; i++)
        sqlite3_bind_int64(st, 3 + i, v[i]);
    return step_done(st);
}

/* Evicts least-recently-hit entries of a tenant over its limits. */
static int evict(store *s, struct batch *b, int64_t tenant)
{
    struct slot *sl = store_slot(s, tenant, 0);
    if (!sl)
        return 0;
    pthread_mutex_lock(&s->q_mu);
    int64_t me = sl->max_entries ? sl->max_entries : s->opt.max_entries;
    int64_t mb = sl->max_bytes ? sl->max_bytes : s->opt.max_bytes;
    pthread_mutex_unlock(&s->q_mu);
    while ((me > 0 && sl->entries > me) || (mb > 0 && sl->bytes > mb)) {
        int64_t want = me > 0 && sl->entries > me ? sl->entries - me : 1;
        sqlite3_stmt *st = s->st_lru;
        sqlite3_bind_int64(st, 1, tenant);
        sqlite3_bind_int64(st, 2, want < 256 ? want : 256);
        int64_t rows[256][2];
        int nr = 0, rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && nr < 256) {
            rows[nr][0] = sqlite3_column_int64(st, 0);
            rows[nr][1] = sqlite3_column_int64(st, 1);
            nr++;
        }
        sqlite3_reset(st);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            return -1;
        if (nr == 0)
            break; /* counters drifted from the table; nothing left to evict */
        for (int i = 0; i < nr; i++) {
            if (remove_row(s, b, tenant, rows[i][0], rows[i][1]))
                return -1;
            sl->evicted++;
            if (!((me > 0 && sl->entries > me) || (mb > 0 && sl->bytes > mb)))
                break;
        }
    }
    return 0;
}

/* After a rollback the in-memory counters may be off: reread them. */
static void recount(store *s)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->wdb,
                           "SELECT tenant, count(*), coalesce(sum(bytes), 0) FROM entries "
                           "GROUP BY tenant",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    pthread_mutex_lock(&s->slots_mu);
    for (int i = 0; i < s->nslots; i++)
        s->slots[i]->entries = s->slots[i]->bytes = 0;
    pthread_mutex_unlock(&s->slots_mu);
    while (sqlite3_step(st) == SQLITE_ROW) {
        struct slot *sl = store_slot(s, sqlite3_column_int64(st, 0), 1);
        if (sl) {
            sl->entries = sqlite3_column_int64(st, 1);
            sl->bytes = sqlite3_column_int64(st, 2);
        }
    }
    sqlite3_finalize(st);
}

static void grow_pending(struct slot *sl, int dim, int64_t id, const float *vec)
{
    if (vec) {
        if (sl->npend == sl->cappend) {
            int64_t cap = sl->cappend ? sl->cappend * 2 : 64;
            int64_t *ids = realloc(sl->pend_ids, sizeof *ids * (size_t)cap);
            if (ids)
                sl->pend_ids = ids;
            float *v = realloc(sl->pend_vecs, sizeof *v * (size_t)dim * (size_t)cap);
            if (v)
                sl->pend_vecs = v;
            if (!ids || !v) {
                sl->rebuild_rc = STORE_ENOMEM; /* the rebuild is thrown away */
                return;
            }
            sl->cappend = cap;
        }
        sl->pend_ids[sl->npend] = id;
        memcpy(sl->pend_vecs + (size_t)sl->npend * dim, vec, sizeof(float) * (size_t)dim);
        sl->npend++;
    } else {
        if (sl->ndel == sl->capdel) {
            int64_t cap = sl->capdel ? sl->capdel * 2 : 64;
            int64_t *d = realloc(sl->pend_del, sizeof *d * (size_t)cap);
            if (!d) {
                sl->rebuild_rc = STORE_ENOMEM;
                return;
            }
            sl->pend_del = d;
            sl->capdel = cap;
        }
        sl->pend_del[sl->ndel++] = id;
    }
}

static void apply_changes(store *s, struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct change *c = &b->ch[i];
        struct slot *sl = store_slot(s, c->tenant, 1);
        if (!sl)
            continue;
        if (c->vec ? sidx_add(sl->ix, 1, c->vec, &c->id) : sidx_remove(sl->ix, 1, &c->id))
            sl->stale = 1;
        sl->dirty = 1;
        if (sl->rebuilding)
            grow_pending(sl, s->opt.dim, c->id, c->vec);
    }
}

/* Keeps a queued touch in the writer's table, merged with earlier ones of its entry. -1
 * when the table cannot grow (the touch is then written with this batch). */
static int touch_keep(store *s, const struct op *o)
{
    if (o->id <= 0)
        return -1;
    if (2 * (s->wt_n + 1) > s->wt_cap) {
        size_t cap = s->wt_cap ? 2 * s->wt_cap : 1024;
        struct wtouch *t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < s->wt_cap; i++) {
            if (!s->wt[i].id)
                continue;
            size_t j = id_home(s->wt[i].id, cap - 1);
            while (t[j].id)
                j = (j + 1) & (cap - 1);
            t[j] = s->wt[i];
        }
        free(s->wt);
        s->wt = t;
        s->wt_cap = cap;
    }
    size_t j = id_home(o->id, s->wt_cap - 1);
    while (s->wt[j].id && s->wt[j].id != o->id)
        j = (j + 1) & (s->wt_cap - 1);
    struct wtouch *w = &s->wt[j];
    if (!w->id) {
        *w = (struct wtouch){o->id, o->value, 0};
        s->wt_n++;
    }
    w->last_ms = o->value > w->last_ms ? o->value : w->last_ms;
    w->hits += o->hits;
    return 0;
}

static int write_touches(store *s)
{
    for (size_t i = 0; s->wt_n && i < s->wt_cap; i++) {
        struct wtouch *w = &s->wt[i];
        if (!w->id)
            continue;
        sqlite3_bind_int64(s->st_touch, 1, w->id);
        sqlite3_bind_int64(s->st_touch, 2, w->last_ms);
        sqlite3_bind_int64(s->st_touch, 3, w->hits);
        if (step_done(s->st_touch))
            return -1;
    }
    return 0;
}

/* touches: also write the touches kept in the writer's table */
static void run_batch(store *s, struct op *ops, int touches)
{
    struct batch b = {0};
    struct resp_total *g;
    int64_t now = store_now_ms(), bytes;
    int rc = sqlite3_exec(s->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
    if (!rc && touches)
        rc = write_touches(s);
    for (struct op *o = ops; o && !rc; o = o->next) {
        switch (o->kind) {
        case OP_PUT: rc = apply_put(s, &b, o); break;
        case OP_TOUCH:
            sqlite3_bind_int64(s->st_touch, 1, o->id);
            sqlite3_bind_int64(s->st_touch, 2, o->value);
            sqlite3_bind_int64(s->st_touch, 3, o->hits);
            rc = step_done(s->st_touch);
            break;
        case OP_DELETE:
            sqlite3_bind_int64(s->st_tenant_ids, 1, o->tenant);
            sqlite3_bind_int64(s->st_tenant_ids, 2, o->id);
            o->id = remove_selected(s, &b, s->st_tenant_ids, NULL);
            rc = o->id < 0 ? -1 : 0;
            break;
        case OP_USAGE: rc = apply_usage(s, &o->u); break;
        case OP_PROMPT_TOKENS:
            sqlite3_bind_int64(s->st_prompt_tokens, 1, o->id);
            sqlite3_bind_int64(s->st_prompt_tokens, 2, o->value);
            rc = step_done(s->st_prompt_tokens);
            break;
        case OP_RESPONSE:
            if (!(g = resp_total_of(&b.rgrew, &b.nrg, &b.caprg, o->tenant))) {
                rc = -1;
                break;
            }
            bytes = (int64_t)(strlen(o->rbody) + strlen(o->rmsgs));
            g->bytes += bytes;
            sqlite3_bind_text(s->st_resp_put, 1, o->rid, -1, SQLITE_STATIC);
            sqlite3_bind_int64(s->st_resp_put, 2, o->tenant);
            sqlite3_bind_int64(s->st_resp_put, 3, now);
            sqlite3_bind_int64(s->st_resp_put, 4, o->value);
            sqlite3_bind_text(s->st_resp_put, 5, o->rbody, -1, SQLITE_STATIC);
            sqlite3_bind_text(s->st_resp_put, 6, o->rmsgs, -1, SQLITE_STATIC);
            sqlite3_bind_int64(s->st_resp_put, 7, bytes);
            rc = step_done(s->st_resp_put);
            break;
        case OP_LIMITS: /* a tenant's capacity or TTL lowered: held to them at once */
            if (o->value > 0) {
                sqlite3_bind_int64(s->st_shorten, 1, o->tenant);
                sqlite3_bind_int64(s->st_shorten, 2, o->value);
                rc = step_done(s->st_shorten);
                s->last_sweep_ms = 0; /* (what is past it now goes in this batch) */
            }
            note_tenant(&b, o->tenant);
            break;
        case OP_FLUSH:
        case OP_LIST: break;
        }
    }
    for (size_t i = 0; i < b.nt && !rc; i++)
        rc = evict(s, &b, b.tenants[i]);
    for (size_t i = 0; i < b.nrg && !rc && s->opt.responses_max_bytes > 0; i++)
        rc = trim_responses(s, &b.rgrew[i], s->opt.responses_max_bytes, now);
    if (!rc && now - s->last_sweep_ms >= 1000) {
        s->last_sweep_ms = now;
        sqlite3_bind_int64(s->st_expired, 1, now);
        int64_t dummy = 0;
        rc = remove_selected(s, &b, s->st_expired, &dummy) < 0 ? -1 : 0;
        if (!rc) {
            sqlite3_bind_int64(s->st_resp_expired, 1, now);
            rc = step_done(s->st_resp_expired);
            if (!rc && sqlite3_changes(s->wdb) > 0)
                s->nrtot = 0; /* responses went: their totals are counted again */
        }
    }
    if (!rc && !b.failed)
        rc = sqlite3_exec(s->wdb, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
    else
        rc = -1;
    int err = STORE_OK; /* what the callbacks are told */
    if (rc) {
        /* (a full disk said as such: an operator can act on it) */
        err = !b.failed && sqlite3_errcode(s->wdb) == SQLITE_FULL ? STORE_EFULL : STORE_EIO;
        size_t n = 0, usage = 0, again = 0, answers = 0, responses = 0, deletes = 0;
        for (struct op *o = ops; o; o = o->next) {
            n += o->kind != OP_FLUSH && o->kind != OP_LIST;
            usage += o->kind == OP_USAGE;
            again += o->kind == OP_USAGE && o->tries > 0;
            answers += o->kind == OP_PUT;
            responses += o->kind == OP_RESPONSE;
            deletes += o->kind == OP_DELETE;
        }
        pthread_mutex_lock(&s->q_mu);
        const int closing = s->closing;
        pthread_mutex_unlock(&s->q_mu);
        /* the upkeep alone, or usage rows tried again alone, each second while the disk
         * stays full: told once a minute */
        const int retry = again == n;
        if (s->opt.on_error && (!retry || now - s->retry_told_ms >= 60000)) {
            if (retry)
                s->retry_told_ms = now;
            char what[400];
            const char *why = b.failed ? "out of memory" : sqlite3_errmsg(s->wdb);
            if (n == 0)
                snprintf(what, sizeof what, "the store's upkeep (hit counts, expiry) was "
                         "rolled back: %s", why);
            else
                snprintf(what, sizeof what, "a batch of %zu writes (%zu answers, %zu usage "
                         "figures, %zu stored responses, %zu deletions, %zu of upkeep) was "
                         "rolled back: %s%s", n, answers, usage, responses, deletes,
                         n - answers - usage - responses - deletes, why,
                         !usage ? ""
                         : closing ? " (its usage figures are lost: the store is closing)"
                                   : " (its usage figures are written again with the next "
                                     "batch)");
            s->opt.on_error(s->opt.on_error_arg, what);
        }
        sqlite3_exec(s->wdb, "ROLLBACK", NULL, NULL, NULL);
        recount(s);
        s->nrtot = 0;
    } else {
        if (touches && s->wt_cap > 16384) { /* after a burst: do not scan it every batch */
            free(s->wt);
            s->wt = NULL;
            s->wt_n = s->wt_cap = 0;
        } else if (touches && s->wt_n) {
            memset(s->wt, 0, sizeof *s->wt * s->wt_cap);
            s->wt_n = 0;
        }
        if (touches)
            s->wt_written_ms = now;
        apply_changes(s, &b);
        /* rows went: copies of the tenant's entries held elsewhere are stale */
        int64_t last = -1;
        for (size_t i = 0; i < b.n; i++) {
            if (b.ch[i].vec || b.ch[i].tenant == last)
                continue;
            last = b.ch[i].tenant;
            struct slot *sl = store_slot(s, last, 0);
            if (sl)
                __atomic_add_fetch(&sl->removals, 1, __ATOMIC_RELEASE);
        }
    }
    for (struct op *o = ops, *next; o; o = next) {
        next = o->next;
        if (o->kind == OP_LIST) {
            /* read after the batch, outside it: what is committed (the writes queued before
             * it too); a failed one undoes nothing; and in the queue's order, so that a
             * flush queued after it (store_sync()) returns once it is done */
            int lrc = store_list_run(s->wdb, o->list);
            o->done(o->arg, lrc, o->list->n);
        } else if (o->done) {
            o->done(o->arg, err, rc ? -1 : o->id);
        }
        if (!(rc && o->kind == OP_USAGE && usage_again(s, o)))
            free(o);
    }
    free(b.ch);
    free(b.tenants);
    free(b.rgrew);
}

/* ------------------------------------------------------------------ rebuilds */

struct rebuild_arg {
    store *s;
    struct slot *sl;
};

static void *rebuild_main(void *arg)
{
    struct rebuild_arg *a = arg;
    store *s = a->s;
    struct slot *sl = a->sl;
    free(a);
    sqlite3 *db = NULL;
    sidx *ix = NULL;
    int rc = store_db_open(s->db_path, 1, &db);
    if (!rc)
        rc = store_build_index(db, s->opt.dim, sl->tenant, sl->snapshot, sl->rebuild_kind, NULL,
                               NULL, NULL, 0, &ix);
    sqlite3_close(db);
    pthread_mutex_lock(&s->q_mu);
    sl->rebuilt = ix;
    if (rc)
        sl->rebuild_rc = rc;
    sl->rebuild_done = 1;
    pthread_cond_signal(&s->q_cond);
    pthread_mutex_unlock(&s->q_mu);
    return NULL;
}

static int64_t max_id(store *s)
{
    sqlite3_stmt *st;
    int64_t id = 0;
    if (sqlite3_prepare_v2(s->wdb, "SELECT seq FROM sqlite_sequence WHERE name = 'entries'", -1,
                           &st, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return id;
}

static void finish_rebuild(struct slot *sl)
{
    pthread_join(sl->rebuild_thread, NULL);
    sl->rebuild_thread_live = 0;
    sidx *ix = sl->rebuilt;
    sl->rebuilt = NULL;
    if (!sl->rebuild_rc && ix) {
        /* replay what changed since the snapshot: adds first (their ids are all newer) */
        if ((sl->npend && sidx_add(ix, sl->npend, sl->pend_vecs, sl->pend_ids)) ||
            (sl->ndel && sidx_remove(ix, sl->ndel, sl->pend_del)))
            sl->stale = 1;
        pthread_rwlock_wrlock(&sl->lock);
        sidx *old = sl->ix;
        sl->ix = ix;
        pthread_rwlock_unlock(&sl->lock);
        sidx_free(old);
        sl->dirty = 1;
    } else {
        sidx_free(ix);
        sl->stale = 1; /* tried again at the next check */
    }
    sl->npend = sl->ndel = 0;
    sl->rebuilding = sl->rebuild_done = 0;
    sl->rebuild_rc = 0;
}

static void check_rebuilds(store *s)
{
    pthread_mutex_lock(&s->slots_mu);
    int n = s->nslots;
    pthread_mutex_unlock(&s->slots_mu);
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&s->slots_mu);
        struct slot *sl = s->slots[i];
        pthread_mutex_unlock(&s->slots_mu);
        pthread_mutex_lock(&s->q_mu);
        int done = sl->rebuild_done;
        pthread_mutex_unlock(&s->q_mu);
        if (done) {
            finish_rebuild(sl);
            continue;
        }
        if (sl->rebuilding || s->closing)
            continue;
        enum sidx_kind now = sidx_get_kind(sl->ix);
        enum sidx_kind want = store_wanted_kind(s, sl->entries, now);
        int64_t tomb = sidx_tombstones(sl->ix);
        int worn = now == SIDX_HNSW && tomb > 1024 && tomb > sl->entries / 5;
        if (want == now && !sl->stale && !worn)
            continue;
        struct rebuild_arg *a = malloc(sizeof *a);
        if (!a)
            continue;
        *a = (struct rebuild_arg){s, sl};
        sl->snapshot = max_id(s);
        sl->rebuild_kind = want;
        sl->rebuilding = 1;
        int stale = sl->stale;
        sl->stale = 0; /* what changes from now on is logged and replayed */
        if (pthread_create(&sl->rebuild_thread, NULL, rebuild_main, a)) {
            free(a);
            sl->rebuilding = 0;
            sl->stale = stale;
            continue;
        }
        sl->rebuild_thread_live = 1;
    }
}

static int rebuild_pending(store *s)
{
    int any = 0;
    pthread_mutex_lock(&s->slots_mu);
    for (int i = 0; i < s->nslots; i++)
        any |= s->slots[i]->rebuild_done;
    pthread_mutex_unlock(&s->slots_mu);
    return any;
}

void *store_writer_main(void *arg)
{
    store *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->q_mu);
        if (!s->q_urgent && !s->closing && !rebuild_pending(s)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1; /* wake at least each second for the expiry sweep */
            pthread_cond_timedwait(&s->q_cond, &s->q_mu, &until);
        }
        struct op *ops = s->q_head;
        s->q_head = s->q_tail = NULL;
        if (s->q_ntouch)
            memset(s->q_touch, 0, sizeof s->q_touch);
        s->q_ntouch = s->q_nusage = 0;
        s->q_urgent = 0;
        int closing = s->closing;
        pthread_mutex_unlock(&s->q_mu);
        /* hits only move an entry in the LRU order: they are added up here and written
         * now and then, not a row update each in every batch */
        int touches = closing || store_now_ms() - s->wt_written_ms >= STORE_TOUCH_DELAY_MS;
        for (struct op **pp = &ops; *pp;) {
            struct op *o = *pp;
            if (o->kind == OP_PUT || o->kind == OP_FLUSH)
                touches = 1;
            if (o->kind == OP_TOUCH && !o->done && touch_keep(s, o) == 0) {
                *pp = o->next;
                free(o);
            } else {
                pp = &o->next;
            }
        }
        run_batch(s, ops, touches);
        check_rebuilds(s);
        if (closing) {
            pthread_mutex_lock(&s->q_mu);
            int empty = !s->q_head;
            pthread_mutex_unlock(&s->q_mu);
            if (empty)
                break;
        }
    }
    /* a rebuild still running is joined (and dropped) by store_close */
    return NULL;
}
