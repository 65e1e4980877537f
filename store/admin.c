/*
 * Tenants, API key hashes and usage reports: rare operations, run synchronously on the
 * store's administration connection under its mutex. Deleting a tenant's cache entries
 * goes through the writer, so its index follows.
 */
#include "store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int prep(store *s, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v2(s->adb, sql, -1, st, NULL) == SQLITE_OK ? 0 : STORE_EIO;
}

/* What a write that did not finish says: a full disk as such (an operator can act on it),
 * another error as a database error (admin_mu held). */
static int write_failed(store *s)
{
    return sqlite3_errcode(s->adb) == SQLITE_FULL ? STORE_EFULL : STORE_EIO;
}

void store_tenant_deinit(struct store_tenant *t)
{
    if (t) {
        free(t->policy);
        t->policy = NULL;
    }
}

static int valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= 64 || !strcmp(name, "other")) /* other: the metric label of the tenants
                                                       * past tenants.metrics_max_tenants */
        return 0;
    if (name[0] == '-' || !strcmp(name, ".") || !strcmp(name, ".."))
        return 0; /* read as an option by the CLI; a path's parts */
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

int store_tenant_create(store *s, const char *name, int64_t *id)
{
    if (!valid_name(name))
        return STORE_EINVAL;
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "INSERT INTO tenants (name, created_ms) VALUES (?1, ?2)", &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, store_now_ms());
        int src = sqlite3_step(st);
        rc = src == SQLITE_DONE         ? STORE_OK
             : src == SQLITE_CONSTRAINT ? STORE_EEXIST
                                        : write_failed(s);
        if (!rc && id)
            *id = sqlite3_last_insert_rowid(s->adb);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

static int tenant_row(sqlite3_stmt *st, struct store_tenant *t)
{
    memset(t, 0, sizeof *t);
    t->id = sqlite3_column_int64(st, 0);
    snprintf(t->name, sizeof t->name, "%s", (const char *)sqlite3_column_text(st, 1));
    t->created_ms = sqlite3_column_int64(st, 2);
    const char *p = (const char *)sqlite3_column_text(st, 3);
    return (t->policy = strdup(p ? p : "{}")) ? STORE_OK : STORE_ENOMEM;
}

static int tenant_get(store *s, const char *name, int64_t id, struct store_tenant *out)
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s,
                  name ? "SELECT id, name, created_ms, policy FROM tenants WHERE name = ?1"
                       : "SELECT id, name, created_ms, policy FROM tenants WHERE id = ?2",
                  &st);
    if (!rc) {
        if (name)
            sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        else
            sqlite3_bind_int64(st, 2, id);
        int src = sqlite3_step(st);
        rc = src == SQLITE_ROW ? tenant_row(st, out)
             : src == SQLITE_DONE ? STORE_ENOTFOUND
                                  : STORE_EIO;
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_tenant_get(store *s, const char *name, struct store_tenant *out)
{
    return tenant_get(s, name, 0, out);
}

int store_tenant_get_id(store *s, int64_t id, struct store_tenant *out)
{
    return tenant_get(s, NULL, id, out);
}

int store_tenant_list(store *s, struct store_tenant **out, int *n)
{
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "SELECT id, name, created_ms, policy FROM tenants ORDER BY name", &st);
    int cap = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct store_tenant *t = realloc(*out, sizeof *t * (size_t)cap);
            if (!t) {
                rc = STORE_ENOMEM;
                break;
            }
            *out = t;
        }
        if ((rc = tenant_row(st, &(*out)[*n])))
            break;
        (*n)++;
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->admin_mu);
    if (rc) {
        for (int i = 0; i < *n; i++)
            store_tenant_deinit(&(*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

static int exec_bound(store *s, const char *sql, int64_t a)
{
    sqlite3_stmt *st;
    int rc = prep(s, sql, &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, a);
    rc = sqlite3_step(st) == SQLITE_DONE ? STORE_OK : write_failed(s);
    sqlite3_finalize(st);
    return rc;
}

int store_tenant_delete(store *s, const char *name)
{
    struct store_tenant t;
    int rc = store_tenant_get(s, name, &t);
    if (rc)
        return rc;
    store_tenant_deinit(&t);
    if (!s->opt.admin_only && ((rc = store_delete(s, t.id, -1, NULL, NULL)) ||
                               (rc = store_sync(s))))
        return rc;
    pthread_mutex_lock(&s->admin_mu);
    rc = exec_bound(s, "DELETE FROM usage_daily WHERE tenant = ?1", t.id);
    if (!rc && s->opt.admin_only)
        rc = exec_bound(s, "DELETE FROM entries WHERE tenant = ?1", t.id);
    if (!rc)
        rc = exec_bound(s, "DELETE FROM tenants WHERE id = ?1", t.id); /* keys cascade */
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

/* Runs a bound statement that changes one row, and finalizes it: STORE_ENOTFOUND when it
 * changed none (admin_mu held). */
static int step_one_row(store *s, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st) == SQLITE_DONE ? STORE_OK : write_failed(s);
    if (!rc && sqlite3_changes(s->adb) == 0)
        rc = STORE_ENOTFOUND;
    sqlite3_finalize(st);
    return rc;
}

int store_entries_delete_offline(store *s, int64_t tenant, int64_t id, int64_t *deleted)
{
    if (!s->opt.admin_only)
        return STORE_EINVAL;
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "DELETE FROM entries WHERE (?1 < 0 OR tenant = ?1) AND (?2 < 0 OR id = ?2)",
                  &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, tenant);
        sqlite3_bind_int64(st, 2, id);
        rc = sqlite3_step(st) == SQLITE_DONE ? STORE_OK : write_failed(s);
        *deleted = rc ? 0 : sqlite3_changes(s->adb);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_tenant_set_policy(store *s, int64_t id, const char *json)
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "UPDATE tenants SET policy = ?2 WHERE id = ?1", &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, json, -1, SQLITE_STATIC);
        rc = step_one_row(s, st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

/* ------------------------------------------------------------------ keys */

int store_key_add(store *s, int64_t tenant, const char *prefix, const uint8_t sha256[32])
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s,
                  "INSERT INTO api_keys (tenant, prefix, sha256, created_ms) "
                  "VALUES (?1, ?2, ?3, ?4)",
                  &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, tenant);
        sqlite3_bind_text(st, 2, prefix, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 3, sha256, 32, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, store_now_ms());
        int src = sqlite3_step(st);
        rc = src == SQLITE_DONE         ? STORE_OK
             : src == SQLITE_CONSTRAINT ? STORE_EEXIST
                                        : write_failed(s);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_key_lookup(store *s, const uint8_t sha256[32], int64_t *tenant)
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "SELECT tenant FROM api_keys WHERE sha256 = ?1 AND revoked_ms IS NULL",
                  &st);
    if (!rc) {
        sqlite3_bind_blob(st, 1, sha256, 32, SQLITE_STATIC);
        int src = sqlite3_step(st);
        if (src == SQLITE_ROW)
            *tenant = sqlite3_column_int64(st, 0);
        rc = src == SQLITE_ROW ? STORE_OK : src == SQLITE_DONE ? STORE_ENOTFOUND : STORE_EIO;
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_key_list(store *s, int64_t tenant, struct store_key **out, int *n)
{
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s,
                  "SELECT id, tenant, prefix, created_ms, coalesce(revoked_ms, 0) FROM api_keys "
                  "WHERE tenant = ?1 ORDER BY id",
                  &st);
    int cap = 0;
    if (!rc)
        sqlite3_bind_int64(st, 1, tenant);
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct store_key *k = realloc(*out, sizeof *k * (size_t)cap);
            if (!k) {
                rc = STORE_ENOMEM;
                break;
            }
            *out = k;
        }
        struct store_key *k = &(*out)[(*n)++];
        memset(k, 0, sizeof *k);
        k->id = sqlite3_column_int64(st, 0);
        k->tenant = sqlite3_column_int64(st, 1);
        snprintf(k->prefix, sizeof k->prefix, "%s", (const char *)sqlite3_column_text(st, 2));
        k->created_ms = sqlite3_column_int64(st, 3);
        k->revoked_ms = sqlite3_column_int64(st, 4);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->admin_mu);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int store_key_revoke(store *s, const char *prefix)
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s,
                  "UPDATE api_keys SET revoked_ms = ?2 WHERE prefix = ?1 AND revoked_ms IS NULL",
                  &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, store_now_ms());
        rc = step_one_row(s, st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_key_all(store *s, uint8_t (**sha)[32], int64_t **tenants, int *n)
{
    sqlite3_stmt *st;
    *sha = NULL;
    *tenants = NULL;
    *n = 0;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "SELECT sha256, tenant FROM api_keys WHERE revoked_ms IS NULL", &st);
    int cap = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 0) != 32)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint8_t(*h)[32] = realloc(*sha, sizeof *h * (size_t)cap);
            if (h)
                *sha = h;
            int64_t *t = realloc(*tenants, sizeof *t * (size_t)cap);
            if (t)
                *tenants = t;
            if (!h || !t) {
                rc = STORE_ENOMEM;
                break;
            }
        }
        memcpy((*sha)[*n], sqlite3_column_blob(st, 0), 32);
        (*tenants)[(*n)++] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->admin_mu);
    if (rc) {
        free(*sha);
        free(*tenants);
        *sha = NULL;
        *tenants = NULL;
        *n = 0;
    }
    return rc;
}

/* ------------------------------------------------------------------ usage */

int store_list_run(sqlite3 *db, struct store_list *q)
{
    sqlite3_stmt *st;
    q->out = NULL;
    q->n = 0;
    if (q->limit < 1)
        return STORE_OK;
    if (!(q->out = calloc((size_t)q->limit, sizeof *q->out)))
        return STORE_ENOMEM;
    /* newest first, by the primary key; the filter reads a question's text as it was asked
     * (SQLite's lower() folds ASCII only) */
    int rc = sqlite3_prepare_v2(db,
                                "SELECT " STORE_HIT_COLUMNS " FROM entries WHERE tenant = ?1 "
                                "AND id < ?2 AND (expires_ms = 0 OR expires_ms > ?3) "
                                "AND (?4 IS NULL OR instr(lower(query), lower(?4)) > 0) "
                                "ORDER BY id DESC LIMIT ?5",
                                -1, &st, NULL) == SQLITE_OK
                 ? STORE_OK
                 : STORE_EIO;
    if (!rc) {
        sqlite3_bind_int64(st, 1, q->tenant);
        sqlite3_bind_int64(st, 2, q->before ? q->before : INT64_MAX);
        sqlite3_bind_int64(st, 3, q->now_ms);
        if (q->contains)
            sqlite3_bind_text(st, 4, q->contains, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 5, q->limit);
    }
    int step;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW)
        if ((rc = store_read_hit(st, &q->out[q->n])) == STORE_OK)
            q->n++;
    if (!rc && step != SQLITE_DONE)
        rc = STORE_EIO;
    sqlite3_finalize(st);
    if (rc) {
        for (int i = 0; i < q->n; i++)
            store_hit_deinit(&q->out[i]);
        free(q->out);
        q->out = NULL;
        q->n = 0;
    }
    return rc;
}

int store_entry_list(store *s, struct store_list *q)
{
    pthread_mutex_lock(&s->admin_mu);
    int rc = store_list_run(s->adb, q);
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_usage_list(store *s, int64_t tenant, const char *since, struct store_usage **out,
                     int *n)
{
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s,
                  "SELECT tenant, day, requests, prompt_tokens, completion_tokens, "
                  "cached_tokens, exact_hits, semantic_hits, tokens_saved FROM usage_daily "
                  "WHERE (?1 < 0 OR tenant = ?1) AND (?2 IS NULL OR day >= ?2) "
                  "ORDER BY tenant, day",
                  &st);
    int cap = 0;
    if (!rc) {
        sqlite3_bind_int64(st, 1, tenant);
        if (since)
            sqlite3_bind_text(st, 2, since, -1, SQLITE_STATIC);
    }
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            struct store_usage *u = realloc(*out, sizeof *u * (size_t)cap);
            if (!u) {
                rc = STORE_ENOMEM;
                break;
            }
            *out = u;
        }
        struct store_usage *u = &(*out)[(*n)++];
        memset(u, 0, sizeof *u);
        u->tenant = sqlite3_column_int64(st, 0);
        snprintf(u->day, sizeof u->day, "%s", (const char *)sqlite3_column_text(st, 1));
        int64_t *v[] = {&u->requests,      &u->prompt_tokens, &u->completion_tokens,
                        &u->cached_tokens, &u->exact_hits,    &u->semantic_hits,
                        &u->tokens_saved};
        for (int i = 0; i < 7; i++)
            *v[i] = sqlite3_column_int64(st, 2 + i);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->admin_mu);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* ------------------------------------------------------------------ responses */

int store_response_delete(store *s, int64_t tenant, const char *id, int64_t *created_ms)
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "DELETE FROM responses WHERE id = ?1 AND tenant = ?2 RETURNING created_ms",
                  &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, tenant);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW && created_ms)
            *created_ms = sqlite3_column_int64(st, 0);
        if (step == SQLITE_ROW)
            step = sqlite3_step(st);
        rc = step != SQLITE_DONE                 ? write_failed(s)
             : sqlite3_changes(s->adb) == 0 ? STORE_ENOTFOUND
                                              : STORE_OK;
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}

int store_response_set_body(store *s, int64_t tenant, const char *id, const char *body,
                            int64_t now_ms)
{
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->admin_mu);
    int rc = prep(s, "UPDATE responses SET body = ?3, bytes = length(CAST(?3 AS BLOB)) + "
                     "length(CAST(messages AS BLOB)) WHERE id = ?1 AND tenant = ?2 AND "
                     "(expires_ms = 0 OR expires_ms > ?4)", &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, tenant);
        sqlite3_bind_text(st, 3, body, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, now_ms);
        rc = step_one_row(s, st);
    }
    pthread_mutex_unlock(&s->admin_mu);
    return rc;
}
