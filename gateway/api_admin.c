/*
 * The administration API, for the holder of tenants.admin_key:
 *   POST   /admin/cache/import   body: JSON lines {"model", "messages" | "prompt", "answer"}
 *                                [?tenant=NAME]; answers once every line is committed
 *   DELETE /admin/cache?id=N | ?tenant=NAME | ?all=true
 */
#include "http_impl.h"

#include "log.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 1 when the request carries the admin key; otherwise replies and returns 0. */
static int admin_ok(struct gw_req *r)
{
    const char *key = gw_server_config(gw_req_server(r))->admin_key;
    if (!key || !*key) {
        gw_reply_error(r, 403, "The admin API is disabled; set tenants.admin_key to enable it.",
                       NULL, "admin_disabled");
        return 0;
    }
    const char *auth = gw_req_header(r, "Authorization");
    size_t kl = strlen(key);
    if (auth && !strncasecmp(auth, "Bearer ", 7) && strlen(auth + 7) == kl &&
        CRYPTO_memcmp(auth + 7, key, kl) == 0)
        return 1;
    gw_reply_error(r, 401, "Incorrect or missing admin key.", NULL, "invalid_api_key");
    return 0;
}

/* The tenant named by ?tenant= (default: "default"). 0, or replies 404 and returns -1. */
static int query_tenant(struct gw_req *r, struct evkeyvalq *q, int64_t *id)
{
    const char *name = evhttp_find_header(q, "tenant");
    struct store_tenant t;
    store *st = gw_cache_store(gw_server_cache(gw_req_server(r)));
    if (store_tenant_get(st, name ? name : "default", &t) != STORE_OK) {
        gw_reply_error(r, 404, "No such tenant.", "tenant", "not_found");
        return -1;
    }
    *id = t.id;
    store_tenant_deinit(&t);
    return 0;
}

/* A store operation whose completion (on the writer thread) comes back to the event loop. */
struct admin_op {
    struct gw_cq_item item;
    struct gw_req *req;
    gw_cq *cq;
    int rc;
    int64_t n; /* deleted, or lines imported */
    /* import */
    struct gw_embed_job job;
    struct gw_import_item *items;
    int nitems;
    const char **texts;
    size_t *lens;
    float *vecs;
    int *ntok;
    int64_t tenant;
    json_t *errors;
};

static void admin_op_free(struct admin_op *op)
{
    for (int i = 0; i < op->nitems; i++)
        gw_import_item_deinit(&op->items[i]);
    free(op->items);
    free(op->texts);
    free(op->lens);
    free(op->vecs);
    free(op->ntok);
    json_decref(op->errors);
    free(op);
}

/* writer thread */
static void op_committed(void *arg, int rc, int64_t n)
{
    struct admin_op *op = arg;
    op->rc = rc;
    if (!op->errors) /* a delete reports its count; an import counted its lines */
        op->n = n;
    gw_cq_post(op->cq, &op->item);
}

static void op_reply(struct gw_cq_item *item)
{
    struct admin_op *op = gw_cq_container(item, struct admin_op, item);
    if (!gw_req_gone(op->req)) {
        if (op->rc) {
            gw_reply_error(op->req, 500, store_strerror(op->rc), NULL, NULL);
        } else {
            json_t *o = json_object();
            json_object_set_new(o, op->errors ? "imported" : "deleted", json_integer(op->n));
            if (op->errors)
                json_object_set(o, "errors", op->errors);
            gw_reply_json(op->req, 200, o, 0);
        }
    }
    admin_op_free(op);
}

void gw_handle_admin_cache_delete(struct gw_req *r)
{
    if (!admin_ok(r))
        return;
    struct evkeyvalq q = {0};
    const char *qs = gw_req_query(r);
    if (qs && evhttp_parse_query_str(qs, &q)) {
        gw_reply_error(r, 400, "The query string does not parse.", NULL, NULL);
        return;
    }
    const char *id_s = evhttp_find_header(&q, "id"), *all = evhttp_find_header(&q, "all");
    int64_t tenant = -1, id = -1;
    char *end = NULL;
    if (id_s) {
        id = strtoll(id_s, &end, 10);
        if (end == id_s || *end || id < 0) {
            gw_reply_error(r, 400, "id must be an entry id (a non-negative integer).", "id",
                           NULL);
            goto out;
        }
    } else if (evhttp_find_header(&q, "tenant")) {
        if (query_tenant(r, &q, &tenant))
            goto out;
    } else if (!all || strcmp(all, "true")) {
        gw_reply_error(r, 400, "Say what to delete: ?id=N, ?tenant=NAME or ?all=true.", NULL,
                       NULL);
        goto out;
    }
    struct admin_op *op = calloc(1, sizeof *op);
    gw_server *srv = gw_req_server(r);
    if (!op) {
        gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
        goto out;
    }
    op->req = r;
    op->cq = gw_server_cq(srv);
    op->item.fn = op_reply;
    int rc = store_delete(gw_cache_store(gw_server_cache(srv)), tenant, id, op_committed, op);
    if (rc) {
        gw_reply_error(r, 503, store_strerror(rc), NULL, NULL);
        free(op);
        goto out;
    }
    gw_req_defer(r);
out:
    evhttp_clear_headers(&q);
}

/* Embedded: queue every item, then a flush whose completion replies. */
static void import_embedded(struct gw_cq_item *item)
{
    struct admin_op *op = gw_cq_container(item, struct admin_op, job.item);
    if (gw_req_gone(op->req)) {
        admin_op_free(op);
        return;
    }
    gw_server *srv = gw_req_server(op->req);
    store *st = gw_cache_store(gw_server_cache(srv));
    int dim = emb_dim(gw_server_embedder(srv));
    if (op->job.rc) {
        gw_reply_error(op->req, 500, emb_strerror(op->job.rc), NULL, NULL);
        admin_op_free(op);
        return;
    }
    int64_t now = (int64_t)time(NULL) * 1000;
    int64_t ttl = gw_server_config(srv)->cache_ttl_s;
    for (int i = 0; i < op->nitems; i++) {
        struct gw_import_item *it = &op->items[i];
        struct store_entry e = {
            .tenant = op->tenant, .partition = it->key.partition, .exact = it->key.exact,
            .model = it->model, .query = it->key.query, .query_len = it->key.query_len,
            .embedding = op->vecs + (size_t)i * dim, .answer = it->answer,
            .answer_len = it->answer_len, .finish_reason = "stop", .prompt_tokens = 0,
            .completion_tokens = it->completion_tokens, .created_ms = now,
            .expires_ms = ttl ? now + ttl * 1000 : 0};
        if (store_put(st, &e, NULL, NULL) == STORE_OK)
            op->n++;
    }
    op->item.fn = op_reply;
    op->cq = gw_server_cq(srv);
    if (store_flush(st, op_committed, op)) {
        gw_reply_error(op->req, 503, "The store is closing.", NULL, NULL);
        admin_op_free(op);
    }
}

void gw_handle_admin_cache_import(struct gw_req *r)
{
    if (!admin_ok(r))
        return;
    gw_server *srv = gw_req_server(r);
    struct evkeyvalq q = {0};
    const char *qs = gw_req_query(r);
    struct admin_op *op = calloc(1, sizeof *op);
    if (!op || (qs && evhttp_parse_query_str(qs, &q))) {
        gw_reply_error(r, op ? 400 : 503, op ? "The query string does not parse." : "Out of "
                                                                                    "memory.",
                       NULL, NULL);
        free(op);
        return;
    }
    op->req = r;
    op->errors = json_array();
    if (query_tenant(r, &q, &op->tenant))
        goto fail_replied;
    size_t len;
    const char *body = gw_req_body(r, &len);
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += body[i] == '\n';
    op->items = calloc(lines, sizeof *op->items);
    if (!op->items)
        goto oom;
    const struct tok_vocab *v = gw_server_llm(srv)->v;
    int lineno = 0;
    for (size_t off = 0; off < len;) {
        const char *nl = memchr(body + off, '\n', len - off);
        size_t n = nl ? (size_t)(nl - (body + off)) : len - off;
        lineno++;
        size_t k = n;
        while (k && (body[off + k - 1] == '\r' || body[off + k - 1] == ' '))
            k--;
        if (k) {
            char err[200];
            if (gw_cache_import_parse(body + off, k, op->tenant, v, &op->items[op->nitems], err,
                                      sizeof err) == 0)
                op->nitems++;
            else {
                json_t *e = json_object();
                json_object_set_new(e, "line", json_integer(lineno));
                json_object_set_new(e, "message", json_string(err));
                json_array_append_new(op->errors, e);
            }
        }
        off += n + (nl ? 1 : 0);
    }
    if (!op->nitems) {
        json_t *o = json_object();
        json_object_set_new(o, "imported", json_integer(0));
        json_object_set(o, "errors", op->errors);
        gw_reply_json(r, json_array_size(op->errors) ? 400 : 200, o, 0);
        goto fail_replied;
    }
    int dim = emb_dim(gw_server_embedder(srv));
    op->texts = calloc((size_t)op->nitems, sizeof *op->texts);
    op->lens = calloc((size_t)op->nitems, sizeof *op->lens);
    op->ntok = calloc((size_t)op->nitems, sizeof *op->ntok);
    op->vecs = malloc(sizeof(float) * (size_t)dim * (size_t)op->nitems);
    if (!op->texts || !op->lens || !op->ntok || !op->vecs)
        goto oom;
    for (int i = 0; i < op->nitems; i++) {
        op->texts[i] = op->items[i].key.query;
        op->lens[i] = op->items[i].key.query_len;
    }
    op->job.item.fn = import_embedded;
    op->job.n = op->nitems;
    op->job.texts = op->texts;
    op->job.lens = op->lens;
    op->job.out = op->vecs;
    op->job.ntokens = op->ntok;
    gw_req_defer(r);
    gw_embedw_submit(gw_server_embed_worker(srv), &op->job);
    evhttp_clear_headers(&q);
    return;
oom:
    gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
fail_replied:
    admin_op_free(op);
    evhttp_clear_headers(&q);
}
