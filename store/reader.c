/*
 * Readers: one SQLite connection each (WAL lets them read while the writer commits) and
 * the tenants' indexes, shared.
 */
#include "store_impl.h"

#include <stdlib.h>
#include <string.h>

struct store_reader {
    store *s;
    sqlite3 *db;
    sqlite3_stmt *exact, *byid, *resp;
};


int store_reader_open(store *s, store_reader **out)
{
    store_reader *r = calloc(1, sizeof *r);
    if (!r)
        return STORE_ENOMEM;
    r->s = s;
    int rc = store_db_open(s->db_path, 1, &r->db);
    if (rc)
        goto fail;
    rc = STORE_EIO;
    if (sqlite3_prepare_v3(r->db,
                           "SELECT " STORE_HIT_COLUMNS " FROM entries WHERE tenant = ?1 AND exact = ?2 "
                           "AND (expires_ms = 0 OR expires_ms > ?3)",
                           -1, SQLITE_PREPARE_PERSISTENT, &r->exact, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(r->db,
                           "SELECT " STORE_HIT_COLUMNS " FROM entries WHERE id = ?1 AND tenant = ?2 "
                           "AND (expires_ms = 0 OR expires_ms > ?3)",
                           -1, SQLITE_PREPARE_PERSISTENT, &r->byid, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(r->db,
                           "SELECT body, messages FROM responses WHERE id = ?1 AND tenant = ?2 "
                           "AND (expires_ms = 0 OR expires_ms > ?3)",
                           -1, SQLITE_PREPARE_PERSISTENT, &r->resp, NULL) != SQLITE_OK)
        goto fail;
    *out = r;
    return STORE_OK;
fail:
    store_reader_close(r);
    return rc;
}

void store_reader_close(store_reader *r)
{
    if (!r)
        return;
    sqlite3_finalize(r->exact);
    sqlite3_finalize(r->byid);
    sqlite3_finalize(r->resp);
    sqlite3_close(r->db);
    free(r);
}

static char *col_dup(sqlite3_stmt *st, int i, size_t *len)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    if (n)
        memcpy(d, t, n);
    d[n] = 0;
    if (len)
        *len = n;
    return d;
}

/* Fills h from the current row of a STORE_HIT_COLUMNS select. */
int store_read_hit(sqlite3_stmt *st, struct store_hit *h)
{
    memset(h, 0, sizeof *h);
    h->id = sqlite3_column_int64(st, 0);
    h->tenant = sqlite3_column_int64(st, 1);
    h->partition = (uint64_t)sqlite3_column_int64(st, 2);
    h->model = col_dup(st, 3, NULL);
    h->query = col_dup(st, 4, &h->query_len);
    h->answer = col_dup(st, 5, &h->answer_len);
    h->finish_reason = col_dup(st, 6, NULL);
    h->prompt_tokens = sqlite3_column_int(st, 7);
    h->completion_tokens = sqlite3_column_int(st, 8);
    h->created_ms = sqlite3_column_int64(st, 9);
    h->last_hit_ms = sqlite3_column_int64(st, 10);
    h->expires_ms = sqlite3_column_int64(st, 11);
    h->hit_count = sqlite3_column_int64(st, 12);
    if (!h->model || !h->query || !h->answer || !h->finish_reason) {
        store_hit_deinit(h);
        return STORE_ENOMEM;
    }
    return STORE_OK;
}

int store_get_exact(store_reader *r, int64_t tenant, uint64_t exact, int64_t now_ms,
                    struct store_hit *out)
{
    sqlite3_stmt *st = r->exact;
    sqlite3_bind_int64(st, 1, tenant);
    sqlite3_bind_int64(st, 2, (int64_t)exact);
    sqlite3_bind_int64(st, 3, now_ms);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        rc = store_read_hit(st, out);
        out->similarity = 1;
    } else {
        rc = rc == SQLITE_DONE ? STORE_ENOTFOUND : STORE_EIO;
    }
    sqlite3_reset(st);
    return rc;
}

int store_search(store_reader *r, int64_t tenant, const float *vec, int k, int64_t now_ms,
                 struct store_hit *out, int *n)
{
    *n = 0;
    if (k <= 0)
        return STORE_OK;
    struct slot *sl = store_slot(r->s, tenant, 0);
    if (!sl)
        return STORE_OK;
    float scores[64];
    int64_t ids[64];
    int found = 0;
    if (k > 64)
        k = 64;
    pthread_rwlock_rdlock(&sl->lock);
    int rc = sidx_search(sl->ix, vec, k, scores, ids, &found);
    pthread_rwlock_unlock(&sl->lock);
    if (rc)
        return STORE_EINDEX;
    for (int i = 0; i < found; i++) {
        sqlite3_stmt *st = r->byid;
        sqlite3_bind_int64(st, 1, ids[i]);
        sqlite3_bind_int64(st, 2, tenant);
        sqlite3_bind_int64(st, 3, now_ms);
        int src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            /* the index may be a moment behind the table: a row gone is skipped */
            if ((rc = store_read_hit(st, &out[*n])) == STORE_OK)
                out[(*n)++].similarity = scores[i];
        } else if (src != SQLITE_DONE) {
            rc = STORE_EIO;
        }
        sqlite3_reset(st);
        if (rc) {
            for (int j = 0; j < *n; j++)
                store_hit_deinit(&out[j]);
            *n = 0;
            return rc;
        }
    }
    return STORE_OK;
}

int store_response_get(store_reader *r, int64_t tenant, const char *id, int64_t now_ms,
                       char **body, char **messages)
{
    char **out[2] = {body, messages};
    for (int i = 0; i < 2; i++)
        if (out[i])
            *out[i] = NULL;
    sqlite3_bind_text(r->resp, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(r->resp, 2, tenant);
    sqlite3_bind_int64(r->resp, 3, now_ms);
    int step = sqlite3_step(r->resp), rc = STORE_OK;
    if (step == SQLITE_ROW) {
        for (int i = 0; i < 2 && !rc; i++) {
            size_t n;
            if (out[i] && !(*out[i] = col_dup(r->resp, i, &n)))
                rc = STORE_ENOMEM;
        }
    } else {
        rc = step == SQLITE_DONE ? STORE_ENOTFOUND : STORE_EIO;
    }
    sqlite3_reset(r->resp);
    sqlite3_clear_bindings(r->resp);
    for (int i = 0; i < 2 && rc; i++)
        if (out[i]) {
            free(*out[i]);
            *out[i] = NULL;
        }
    return rc;
}

int store_response_list(store_reader *r, int64_t tenant, const char *prefix, const char *after,
                        int64_t after_ms, int desc, int64_t now_ms, store_response_fn fn,
                        void *arg)
{
    /* (created_ms, id) orders them: a put's created_ms is above all its tenant's before */
    static const char *const sql[2] = {
        "SELECT id, body FROM responses WHERE tenant = ?1 AND substr(id, 1, length(?2)) = ?2 "
        "AND (expires_ms = 0 OR expires_ms > ?3) AND (?4 < 0 OR (created_ms, id) > (?4, ?5)) "
        "ORDER BY created_ms, id",
        "SELECT id, body FROM responses WHERE tenant = ?1 AND substr(id, 1, length(?2)) = ?2 "
        "AND (expires_ms = 0 OR expires_ms > ?3) AND (?4 < 0 OR (created_ms, id) < (?4, ?5)) "
        "ORDER BY created_ms DESC, id DESC"};
    sqlite3_stmt *st;
    int64_t at = -1;
    if (after) { /* where the cursor stands */
        if (sqlite3_prepare_v2(r->db, "SELECT created_ms FROM responses WHERE id = ?1 AND "
                                      "tenant = ?2", -1, &st, NULL) != SQLITE_OK)
            return STORE_EIO;
        sqlite3_bind_text(st, 1, after, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, tenant);
        int step = sqlite3_step(st);
        at = step == SQLITE_ROW ? sqlite3_column_int64(st, 0) : after_ms;
        sqlite3_finalize(st);
        if (step != SQLITE_ROW && step != SQLITE_DONE)
            return STORE_EIO;
        if (at < 0)
            return STORE_ENOTFOUND;
    }
    if (sqlite3_prepare_v2(r->db, sql[desc != 0], -1, &st, NULL) != SQLITE_OK)
        return STORE_EIO;
    sqlite3_bind_int64(st, 1, tenant);
    sqlite3_bind_text(st, 2, prefix, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now_ms);
    sqlite3_bind_int64(st, 4, at);
    sqlite3_bind_text(st, 5, after ? after : "", -1, SQLITE_STATIC);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        const char *body = (const char *)sqlite3_column_text(st, 1);
        if (id && body && fn(arg, id, body))
            break;
    }
    int rc = step == SQLITE_ROW || step == SQLITE_DONE ? STORE_OK : STORE_EIO;
    sqlite3_finalize(st);
    return rc;
}
