/*
 * The administration API, for the holder of tenants.admin_key:
 *   POST   /admin/cache/import   body: JSON lines {"model", "messages" | "prompt", "answer"}
 *                                [?tenant=NAME]; answers once every line is committed (404
 *                                if the tenant was deleted meanwhile: nothing is kept)
 *   DELETE /admin/cache?id=N[&tenant=NAME] | ?tenant=NAME | ?all=true
 *   GET    /admin/cache?tenant=NAME&limit=N&before=ID&q=TEXT   read on the writer thread
 */
#include "http_impl.h"

#include "entry_id.h"
#include "log.h"
#include "oai.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int gw_admin_ok(struct gw_req *r)
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
    gw_tenants_auth_failed(gw_server_tenants(gw_req_server(r)));
    gw_reply_error(r, 401, "Incorrect or missing admin key.", NULL, "invalid_api_key");
    return 0;
}

/* The first key that a query string gives more than once, or NULL. */
static const char *repeated(struct evkeyvalq *q)
{
    for (struct evkeyval *a = q->tqh_first; a; a = a->next.tqe_next)
        for (struct evkeyval *b = a->next.tqe_next; b; b = b->next.tqe_next)
            if (!strcmp(a->key, b->key))
                return a->key;
    return NULL;
}

/* Parses r's query string into q: 0, or replies 400 and returns -1. A value decoded to a
 * NUL byte would be cut there ("?name=a%00b" naming "a"), so it is refused. */
static int parse_query(struct gw_req *r, struct evkeyvalq *q)
{
    const char *qs = gw_req_query(r);
    if (!qs)
        return 0;
    int nul = strstr(qs, "%00") != NULL;
    if (nul || evhttp_parse_query_str(qs, q)) {
        gw_reply_error(r, 400,
                       nul ? "The query string holds a NUL byte (%00)."
                           : "The query string does not parse.",
                       NULL, NULL);
        return -1;
    }
    return 0;
}

/* 0 when q holds only the parameters of `known` (space-separated), each once; else replies
 * 400 naming the first that is not (a misspelt "tennant" would otherwise widen what is
 * read, or deleted, to every tenant) and returns -1. */
static int query_known(struct gw_req *r, struct evkeyvalq *q, const char *known)
{
    const char *twice = repeated(q);
    char msg[200];
    if (twice) {
        snprintf(msg, sizeof msg, "%.64s is given more than once.", twice);
        gw_reply_error(r, 400, msg, twice, NULL);
        return -1;
    }
    for (struct evkeyval *a = q->tqh_first; a; a = a->next.tqe_next) {
        size_t n = strlen(a->key);
        const char *k = n ? known : NULL;
        while (k && (k = strstr(k, a->key)) && !((k == known || k[-1] == ' ') &&
                                                 (k[n] == ' ' || !k[n])))
            k++;
        if (!k) {
            snprintf(msg, sizeof msg, "Unknown query parameter '%.64s' (this route takes: "
                     "%s).", a->key, known);
            gw_reply_error(r, 400, msg, a->key, NULL);
            return -1;
        }
    }
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

static store *admin_store(struct gw_req *r)
{
    return gw_cache_store(gw_server_cache(gw_req_server(r)));
}

static void reply_store_error(struct gw_req *r, int rc, const char *what)
{
    if (rc == STORE_ENOTFOUND)
        gw_reply_error(r, 404, what, NULL, "not_found");
    else if (rc == STORE_EEXIST)
        gw_reply_error(r, 409, what, NULL, "conflict");
    else if (rc == STORE_EINVAL)
        gw_reply_error(r, 400, "A tenant name is 1-63 letters, digits, '-', '_' or '.', not "
                       "starting with '-', nor . or .. alone.", "name", NULL);
    else
        gw_reply_error(r, rc == STORE_EFULL ? 507 : 500, store_strerror(rc), NULL, NULL);
}

/* A store operation whose completion (on the writer thread) comes back to the event loop. */
struct admin_op {
    struct gw_cq_item item;
    struct gw_req *req;
    gw_cq *cq;
    int rc;
    int64_t n; /* deleted, or lines imported (counted as the writer writes them) */
    int64_t dropped; /* import: lines not written, their tenant deleted first */
    int refs;        /* the event loop's, and one per put whose callback has not run */
    /* import */
    struct gw_embed_job job;
    struct gw_import_item *items;
    int nitems;
    const char **texts;
    size_t *lens;
    float *vecs;
    int *ntok;
    int64_t tenant; /* import: its tenant; delete: its tenant, or -1 (all) */
    char tenant_name[64]; /* its name, for the log */
    int64_t id;     /* delete: the entry, or -1 (all of the tenant's) */
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

/* Drops a reference; the last one frees the op. The writer thread holds one per queued put
 * until that put's callback has run, so an op the loop is done with outlives them. */
static void op_unref(struct admin_op *op)
{
    if (__atomic_sub_fetch(&op->refs, 1, __ATOMIC_ACQ_REL) == 0)
        admin_op_free(op);
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
    if (!op->rc && !op->dropped) { /* what an administrator changed, for the record */
        char n[24], id[24];
        snprintf(n, sizeof n, "%lld", (long long)op->n);
        snprintf(id, sizeof id, "%lld", (long long)op->id);
        if (op->errors)
            gw_log_kv(GW_LOG_INFO, "admin: answers imported", "tenant", op->tenant_name,
                      GW_LOG_BARE("imported"), n, NULL);
        else
            gw_log_kv(GW_LOG_INFO, "admin: cache entries deleted", "tenant",
                      op->tenant >= 0 ? op->tenant_name : "all", "id",
                      op->id >= 0 ? id : "all", GW_LOG_BARE("deleted"), n, NULL);
    }
    if (!gw_req_gone(op->req)) {
        if (op->rc) {
            gw_reply_error(op->req, op->rc == STORE_EFULL ? 507 : 500, store_strerror(op->rc),
                           NULL, NULL);
        } else if (op->dropped) {
            /* deleting a tenant deletes its entries too, so none of the import is kept */
            gw_reply_error(op->req, 404, "The tenant was deleted during the import; nothing "
                           "was kept.", "tenant", "not_found");
        } else {
            json_t *o = json_object();
            json_object_set_new(o, op->errors ? "imported" : "deleted", json_integer(op->n));
            if (op->errors)
                json_object_set(o, "errors", op->errors);
            gw_reply_json(op->req, 200, o, 0);
        }
    }
    op_unref(op);
}

/* A listing, read on the writer thread (a filter reads every question of the tenant). */
struct list_op {
    struct gw_cq_item item;
    struct gw_req *req;
    gw_cq *cq;
    struct store_list q;
    int rc;
    char contains[]; /* q.contains, when given */
};

/* writer thread */
static void list_read(void *arg, int rc, int64_t n)
{
    (void)n;
    struct list_op *op = arg;
    op->rc = rc;
    gw_cq_post(op->cq, &op->item);
}

static void list_reply(struct gw_cq_item *item)
{
    struct list_op *op = gw_cq_container(item, struct list_op, item);
    const int limit = op->q.limit - 1; /* one more was read: whether there are more */
    const int gone = gw_req_gone(op->req); /* (which frees it) */
    if (!gone && op->rc) {
        reply_store_error(op->req, op->rc, "");
    } else if (!gone) {
        json_t *a = json_array();
        const store *st = gw_cache_store(gw_server_cache(gw_req_server(op->req)));
        for (int i = 0; i < op->q.n && i < limit; i++)
            json_array_append_new(a, gw_cache_entry_json(st, &op->q.out[i]));
        json_t *o = json_object();
        json_object_set_new(o, "object", json_string("list"));
        json_object_set_new(o, "data", a);
        json_object_set_new(o, "has_more", json_boolean(op->q.n > limit));
        gw_reply_json(op->req, 200, o, 0);
    }
    for (int i = 0; i < op->q.n; i++)
        store_hit_deinit(&op->q.out[i]);
    free(op->q.out);
    free(op);
}

/* GET /admin/cache?tenant=NAME&limit=N&before=ID&q=TEXT: a tenant's entries, newest first,
 * to find one to delete (a wrong answer) or to see what is stored. */
static void cache_list(struct gw_req *r, struct evkeyvalq *q)
{
    const char *lim = evhttp_find_header(q, "limit"), *bef = evhttp_find_header(q, "before");
    const char *contains = evhttp_find_header(q, "q");
    int64_t tenant, limit = 20, before = 0;
    char *end;
    if (lim && ((limit = strtoll(lim, &end, 10)) < 1 || limit > 1000 || end == lim || *end)) {
        gw_reply_error(r, 400, "limit must be a whole number from 1 to 1000.", "limit", NULL);
        return;
    }
    errno = 0;
    if (bef && ((before = strtoll(bef, &end, 10)) < 0 || end == bef || *end || errno)) {
        gw_reply_error(r, 400, "before must be an entry id (a non-negative integer).", "before",
                       NULL);
        return;
    }
    if (bef) { /* the entries of lower row ids (none below row 0) */
        before = gw_entry_id_row(admin_store(r), before);
        before = before ? before : -1;
    }
    if (query_tenant(r, q, &tenant))
        return;
    if (contains && !*contains)
        contains = NULL;
    size_t cl = contains ? strlen(contains) + 1 : 0;
    struct list_op *op = calloc(1, sizeof *op + cl);
    if (!op) {
        gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
        return;
    }
    if (contains)
        memcpy(op->contains, contains, cl);
    op->req = r;
    op->cq = gw_server_cq(gw_req_server(r));
    op->item.fn = list_reply;
    op->q = (struct store_list){.tenant = tenant, .before = before,
                                .contains = contains ? op->contains : NULL,
                                .now_ms = store_now_ms(), .limit = (int)limit + 1};
    int rc = store_entry_list_queue(admin_store(r), &op->q, list_read, op);
    if (rc) {
        gw_reply_error(r, 503, store_strerror(rc), NULL, NULL);
        free(op);
        return;
    }
    gw_req_defer(r);
}

void gw_handle_admin_cache(struct gw_req *r)
{
    if (!gw_admin_ok(r))
        return;
    struct evkeyvalq q = {0};
    if (parse_query(r, &q))
        return;
    const char *id_s = evhttp_find_header(&q, "id"), *all = evhttp_find_header(&q, "all");
    int64_t tenant = -1, id = -1;
    char *end = NULL;
    if (query_known(r, &q, "tenant limit before q id all"))
        goto out;
    if (strcmp(gw_req_method(r), "DELETE")) {
        if (id_s || all) /* (a listing that said nothing of them would look like an answer) */
            gw_reply_error(r, 400, "GET lists entries (?tenant, limit, before, q); id and all "
                           "select what DELETE deletes.", id_s ? "id" : "all", NULL);
        else
            cache_list(r, &q);
        goto out;
    }
    if (all && (id_s || evhttp_find_header(&q, "tenant"))) {
        gw_reply_error(r, 400, "all=true deletes every entry: give it alone, or ?id=N, "
                       "?tenant=NAME, ?id=N&tenant=NAME without it.", "all", NULL);
        goto out;
    }
    if (id_s) {
        errno = 0;
        id = strtoll(id_s, &end, 10);
        if (end == id_s || *end || id < 0 || errno) { /* (not past 64 bits, read as their max) */
            gw_reply_error(r, 400, "id must be an entry id (a non-negative integer).", "id",
                           NULL);
            goto out;
        }
    }
    if (evhttp_find_header(&q, "tenant")) { /* with an id: that entry, if the tenant's */
        if (query_tenant(r, &q, &tenant))
            goto out;
    } else if (!id_s && (!all || strcmp(all, "true"))) {
        gw_reply_error(r, 400, "Say what to delete: ?id=N, ?tenant=NAME or ?all=true.", NULL,
                       NULL);
        goto out;
    }
    struct admin_op *op = calloc(1, sizeof *op);
    if (op)
        op->refs = 1;
    gw_server *srv = gw_req_server(r);
    if (!op) {
        gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
        goto out;
    }
    op->req = r;
    op->cq = gw_server_cq(srv);
    op->item.fn = op_reply;
    op->tenant = tenant;
    snprintf(op->tenant_name, sizeof op->tenant_name, "%s",
             tenant >= 0 ? evhttp_find_header(&q, "tenant") : "");
    op->id = id;
    store *st = gw_cache_store(gw_server_cache(srv));
    int rc = store_delete(st, tenant, id >= 0 ? gw_entry_id_row(st, id) : -1, op_committed, op);
    if (rc) {
        gw_reply_error(r, 503, store_strerror(rc), NULL, NULL);
        free(op);
        goto out;
    }
    gw_req_defer(r);
out:
    evhttp_clear_headers(&q);
}

/* writer thread: one imported line written (id > 0), or dropped (0: its tenant was gone) */
static void import_written(void *arg, int rc, int64_t id)
{
    struct admin_op *op = arg;
    if (rc == STORE_OK && id > 0)
        op->n++;
    else if (rc == STORE_OK)
        op->dropped++;
    op_unref(op);
}

/* Embedded: queue every item, then a flush whose completion replies. */
static void import_embedded(struct gw_cq_item *item)
{
    struct admin_op *op = gw_cq_container(item, struct admin_op, job.item);
    if (gw_req_gone(op->req)) {
        op_unref(op);
        return;
    }
    gw_server *srv = gw_req_server(op->req);
    store *st = gw_cache_store(gw_server_cache(srv));
    int dim = emb_dim(gw_server_embedder(srv));
    if (op->job.rc) {
        gw_reply_error(op->req, 500, emb_strerror(op->job.rc), NULL, NULL);
        op_unref(op);
        return;
    }
    int64_t now = store_now_ms(); /* as hits record theirs: to the millisecond */
    /* the tenant's own TTL, as its live answers get (its capacity the store holds) */
    int64_t ttl = gw_server_config(srv)->cache_ttl_s;
    struct store_tenant t;
    if (store_tenant_get_id(st, op->tenant, &t) == STORE_OK) {
        gw_policy_cache_limits(t.policy, ttl, &ttl, NULL, NULL);
        store_tenant_deinit(&t);
    }
    for (int i = 0, j = 0; i < op->nitems; i++) {
        struct gw_import_item *it = &op->items[i];
        struct store_entry e = {
            .tenant = op->tenant, .partition = it->key.partition, .exact = it->key.exact,
            .model = it->model, .query = it->key.query, .query_len = it->key.query_len,
            .embedding = it->key.searchable ? op->vecs + (size_t)j++ * dim : NULL,
            .answer = it->answer,
            .answer_len = it->answer_len, .finish_reason = "stop", .prompt_tokens = 0,
            .completion_tokens = it->completion_tokens, .created_ms = now,
            .expires_ms = ttl ? now + ttl * 1000 : 0};
        __atomic_add_fetch(&op->refs, 1, __ATOMIC_ACQ_REL); /* before its callback can run */
        if (store_put(st, &e, import_written, op) != STORE_OK)
            op_unref(op); /* not queued: not counted, and no callback */
    }
    op->item.fn = op_reply;
    op->cq = gw_server_cq(srv);
    if (store_flush(st, op_committed, op)) {
        gw_reply_error(op->req, 503, "The store is closing.", NULL, NULL);
        op_unref(op);
    }
}

void gw_handle_admin_cache_import(struct gw_req *r)
{
    if (!gw_admin_ok(r))
        return;
    gw_server *srv = gw_req_server(r);
    struct evkeyvalq q = {0};
    if (parse_query(r, &q))
        return;
    if (query_known(r, &q, "tenant")) {
        evhttp_clear_headers(&q);
        return;
    }
    struct admin_op *op = calloc(1, sizeof *op);
    if (!op) {
        evhttp_clear_headers(&q);
        gw_reply_error(r, 503, "Out of memory.", NULL, NULL);
        return;
    }
    op->refs = 1;
    op->req = r;
    op->errors = json_array();
    if (query_tenant(r, &q, &op->tenant))
        goto fail_replied;
    const char *tname = evhttp_find_header(&q, "tenant");
    snprintf(op->tenant_name, sizeof op->tenant_name, "%s", tname ? tname : "default");
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
        if (off == 0 && n >= 3 && !memcmp(body, "\xEF\xBB\xBF", 3))
            off += 3, n -= 3; /* a byte order mark */
        size_t k = n;
        while (k && (body[off + k - 1] == '\r' || body[off + k - 1] == ' '))
            k--;
        if (k) {
            char err[200];
            if (gw_cache_import_parse(body + off, k, op->tenant, v,
                                      gw_server_config(srv)->engine_model_name,
                                      &op->items[op->nitems], err, sizeof err) == 0)
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
        json_t *first = json_array_get(op->errors, 0);
        if (first) { /* the OpenAI error body too, which the SDKs and clients read */
            char msg[400];
            snprintf(msg, sizeof msg, "No line could be imported (%zu errors); line %lld: %s",
                     json_array_size(op->errors),
                     (long long)json_integer_value(json_object_get(first, "line")),
                     json_string_value(json_object_get(first, "message")));
            json_decref(o);
            o = oai_error(msg, "invalid_request_error", NULL, NULL);
        } else { /* an empty body, or blank lines: nothing to import is a mistake too */
            json_decref(o);
            o = oai_error("The body holds no lines to import: send JSON lines {\"model\", "
                          "\"messages\", \"answer\"}.", "invalid_request_error", NULL, NULL);
        }
        json_object_set_new(o, "imported", json_integer(0));
        json_object_set(o, "errors", op->errors);
        gw_reply_json(r, 400, o, 0);
        goto fail_replied;
    }
    int dim = emb_dim(gw_server_embedder(srv));
    op->texts = calloc((size_t)op->nitems, sizeof *op->texts);
    op->lens = calloc((size_t)op->nitems, sizeof *op->lens);
    op->ntok = calloc((size_t)op->nitems, sizeof *op->ntok);
    op->vecs = malloc(sizeof(float) * (size_t)dim * (size_t)op->nitems);
    if (!op->texts || !op->lens || !op->ntok || !op->vecs)
        goto oom;
    int n = 0; /* the questions to embed: completions' prompts are found by exact key only */
    for (int i = 0; i < op->nitems; i++) {
        if (!op->items[i].key.searchable)
            continue;
        op->texts[n] = op->items[i].key.query;
        op->lens[n++] = op->items[i].key.query_len;
    }
    op->job.item.fn = import_embedded;
    op->job.n = n;
    op->job.texts = op->texts;
    op->job.lens = op->lens;
    op->job.ends = 1; /* embedded as live questions are */
    op->job.out = op->vecs;
    op->job.ntokens = op->ntok;
    gw_req_defer(r);
    if (n)
        gw_embedw_submit(gw_server_embed_worker(srv), &op->job);
    else
        gw_cq_post(gw_server_cq(srv), &op->job.item);
    evhttp_clear_headers(&q);
    return;
oom:
    gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
fail_replied:
    op_unref(op);
    evhttp_clear_headers(&q);
}

/* ------------------------------------------------------------------ tenants, keys, usage */

/* The admin key's check and the query string's parameters, of `known` only (cleared by the
 * caller). */
static int admin_query(struct gw_req *r, struct evkeyvalq *q, const char *known)
{
    if (!gw_admin_ok(r) || parse_query(r, q))
        return 0;
    if (query_known(r, q, known)) {
        evhttp_clear_headers(q);
        return 0;
    }
    return 1;
}

/* A policy's threshold as it was given (0.97, not 0.96999999999999997) */
#define POLICY_JSON JSON_REAL_PRECISION(15)

static json_t *tenant_json(const struct store_tenant *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "created_ms", json_integer(t->created_ms));
    json_t *p = json_loads(t->policy, 0, NULL);
    json_object_set_new(o, "policy", p ? p : json_object());
    return o;
}

/* GET: list (?name=: one); POST {"name", "policy"?}: create; PUT ?name= body policy;
 * DELETE ?name= */
void gw_handle_admin_tenants(struct gw_req *r)
{
    struct evkeyvalq q = {0};
    if (!admin_query(r, &q, "name"))
        return;
    store *st = admin_store(r);
    const struct gw_config *cfg = gw_server_config(gw_req_server(r));
    const char *name = evhttp_find_header(&q, "name");
    const char *method = gw_req_method(r);
    char err[400];
    struct gw_tenant_policy pol;
    int rc;
    if (!strcmp(method, "GET")) {
        struct store_tenant *t;
        int n;
        if ((rc = store_tenant_list(st, &t, &n))) {
            reply_store_error(r, rc, "");
            goto out;
        }
        json_t *a = json_array();
        for (int i = 0; i < n; i++) {
            if (!name || !strcmp(name, t[i].name)) /* ?name=: that tenant only */
                json_array_append_new(a, tenant_json(&t[i]));
            store_tenant_deinit(&t[i]);
        }
        free(t);
        if (name && !json_array_size(a)) {
            json_decref(a);
            gw_reply_error(r, 404, "No such tenant.", "name", "not_found");
            goto out;
        }
        json_t *o = json_object();
        json_object_set_new(o, "object", json_string("list"));
        json_object_set_new(o, "data", a);
        gw_reply_json(r, 200, o, POLICY_JSON);
    } else if (!strcmp(method, "POST")) {
        json_t *b = gw_req_json_body_flags(r, JSON_REJECT_DUPLICATES);
        if (!b)
            goto out;
        json_t *nm = json_object_get(b, "name"), *p = json_object_get(b, "policy");
        if (json_is_null(p)) /* null: left out */
            p = NULL;
        char *ptext = json_is_object(p) ? json_dumps(p, JSON_COMPACT) : strdup("{}");
        const char *key, *unknown = NULL;
        json_t *v;
        json_object_foreach(b, key, v)
        {
            if (strcmp(key, "name") && strcmp(key, "policy"))
                unknown = key;
        }
        int64_t id;
        if (unknown) { /* a policy key one level too high ("ttl_s" beside "name") */
            snprintf(err, sizeof err, "Unknown field '%.100s': the body is {\"name\", "
                     "\"policy\"}.", unknown);
            gw_reply_error(r, 400, err, unknown, NULL);
        } else if (!json_is_string(nm)) {
            gw_reply_error(r, 400, "name must be a string.", "name", NULL);
        } else if (!strcmp(json_string_value(nm), "other")) {
            gw_reply_error(r, 400, "The name other is reserved: it is the metrics label of "
                           "the tenants past metrics_max_tenants.", "name", NULL);
        } else if (p && !json_is_object(p)) {
            gw_reply_error(r, 400, "policy must be a JSON object.", "policy", NULL);
        } else if (!ptext || gw_policy_check(ptext, cfg->engine_model_name,
                                             cfg->embedder_model_name, &pol, err, sizeof err)) {
            gw_reply_error(r, 400, ptext ? err : "Out of memory.", "policy", NULL);
        } else if ((rc = store_tenant_create(st, json_string_value(nm), &id)) ||
                   (rc = gw_policy_store(st, id, ptext))) {
            reply_store_error(r, rc, "A tenant of that name exists.");
        } else {
            struct store_tenant t;
            gw_log_kv(GW_LOG_INFO, "admin: tenant created", "tenant", json_string_value(nm),
                      "policy", ptext, NULL);
            if (store_tenant_get_id(st, id, &t) == STORE_OK) {
                gw_reply_json(r, 201, tenant_json(&t), POLICY_JSON);
                store_tenant_deinit(&t);
            } else {
                gw_reply_error(r, 500, "The tenant vanished.", NULL, NULL);
            }
        }
        free(ptext);
        json_decref(b);
    } else if (!name) {
        gw_reply_error(r, 400, "Say which tenant: ?name=NAME.", "name", NULL);
    } else if (!strcmp(method, "PUT")) {
        size_t len;
        const char *body = gw_req_body(r, &len);
        char *text = strndup(body, len);
        struct store_tenant t;
        if (!text || gw_policy_check(text, cfg->engine_model_name, cfg->embedder_model_name,
                                     &pol, err, sizeof err))
            gw_reply_error(r, 400, text ? err : "Out of memory.", "policy", NULL);
        else if ((rc = store_tenant_get(st, name, &t)))
            reply_store_error(r, rc, "No such tenant.");
        else {
            rc = gw_policy_store(st, t.id, text);
            store_tenant_deinit(&t);
            if (rc || (rc = store_tenant_get(st, name, &t)))
                reply_store_error(r, rc, "No such tenant.");
            else {
                gw_log_kv(GW_LOG_INFO, "admin: tenant policy set", "tenant", name, "policy", text,
                          NULL);
                gw_reply_json(r, 200, tenant_json(&t), POLICY_JSON);
                store_tenant_deinit(&t);
            }
        }
        free(text);
    } else { /* DELETE */
        if (!strcmp(name, "default"))
            gw_reply_error(r, 400, "The default tenant cannot be deleted.", "name", NULL);
        else if ((rc = store_tenant_delete(st, name)))
            reply_store_error(r, rc, "No such tenant.");
        else {
            gw_log_kv(GW_LOG_INFO, "admin: tenant deleted", "tenant", name, NULL);
            json_t *o = json_object();
            json_object_set_new(o, "deleted", json_string(name));
            gw_reply_json(r, 200, o, 0);
        }
    }
out:
    if (strcmp(method, "GET")) /* what this server changed applies at once */
        gw_tenants_reload(gw_server_tenants(gw_req_server(r)));
    evhttp_clear_headers(&q);
}

/* POST {"tenant"}: a new key (shown once); GET ?tenant=: prefixes; DELETE ?prefix=: revoke */
void gw_handle_admin_keys(struct gw_req *r)
{
    struct evkeyvalq q = {0};
    if (!admin_query(r, &q, "tenant prefix"))
        return;
    store *st = admin_store(r);
    const char *method = gw_req_method(r);
    struct store_tenant t;
    int rc;
    if (!strcmp(method, "POST")) {
        json_t *b = gw_req_json_body_flags(r, JSON_REJECT_DUPLICATES);
        if (!b)
            goto out;
        const char *tn = json_string_value(json_object_get(b, "tenant"));
        char key[80], prefix[16];
        const char *field;
        json_t *v;
        const char *unknown = NULL;
        json_object_foreach(b, field, v)
        {
            if (strcmp(field, "tenant") && !unknown)
                unknown = field;
        }
        if (unknown) { /* (a key has no settings: a field sent for one would be lost) */
            char msg[200];
            snprintf(msg, sizeof msg, "Unknown field '%.100s': the body is {\"tenant\"}.",
                     unknown);
            gw_reply_error(r, 400, msg, unknown, NULL);
        } else if (!tn)
            gw_reply_error(r, 400, "tenant must be a tenant's name.", "tenant", NULL);
        else if ((rc = store_tenant_get(st, tn, &t)))
            reply_store_error(r, rc, "No such tenant.");
        else {
            rc = gw_key_make(st, t.id, key, sizeof key, prefix, sizeof prefix);
            store_tenant_deinit(&t);
            if (rc)
                reply_store_error(r, rc, "");
            else {
                gw_log_kv(GW_LOG_INFO, "admin: key created", "tenant", tn, "key", prefix, NULL);
                json_t *o = json_object();
                json_object_set_new(o, "key", json_string(key));
                json_object_set_new(o, "prefix", json_string(prefix));
                json_object_set_new(o, "tenant", json_string(tn));
                gw_reply_json(r, 201, o, 0);
                OPENSSL_cleanse(key, sizeof key);
            }
        }
        json_decref(b);
    } else if (!strcmp(method, "GET")) {
        const char *tn = evhttp_find_header(&q, "tenant");
        struct store_key *k;
        int n;
        if (!tn)
            gw_reply_error(r, 400, "Say whose keys: ?tenant=NAME.", "tenant", NULL);
        else if ((rc = store_tenant_get(st, tn, &t)))
            reply_store_error(r, rc, "No such tenant.");
        else {
            rc = store_key_list(st, t.id, &k, &n);
            store_tenant_deinit(&t);
            if (rc)
                reply_store_error(r, rc, "");
            else {
                json_t *a = json_array();
                for (int i = 0; i < n; i++) {
                    json_t *o = json_object();
                    json_object_set_new(o, "prefix", json_string(k[i].prefix));
                    json_object_set_new(o, "created_ms", json_integer(k[i].created_ms));
                    json_object_set_new(o, "revoked_ms", k[i].revoked_ms
                                                             ? json_integer(k[i].revoked_ms)
                                                             : json_null());
                    json_array_append_new(a, o);
                }
                free(k);
                json_t *o = json_object();
                json_object_set_new(o, "object", json_string("list"));
                json_object_set_new(o, "data", a);
                gw_reply_json(r, 200, o, 0);
            }
        }
    } else { /* DELETE */
        const char *prefix = evhttp_find_header(&q, "prefix");
        if (!prefix)
            gw_reply_error(r, 400, "Say which key: ?prefix=PREFIX.", "prefix", NULL);
        else if (strlen(prefix) > 12 && !strncmp(prefix, "cg-", 3)) /* not in a URL */
            gw_reply_error(r, 400, "Send the key's prefix (its first 12 characters), not the "
                           "whole key: URLs end up in logs.", "prefix", NULL);
        else if ((rc = store_key_revoke(st, prefix)))
            reply_store_error(r, rc, "No live key has that prefix.");
        else {
            gw_log_kv(GW_LOG_INFO, "admin: key revoked", "key", prefix, NULL);
            json_t *o = json_object();
            json_object_set_new(o, "revoked", json_string(prefix));
            gw_reply_json(r, 200, o, 0);
        }
    }
out:
    if (strcmp(method, "GET")) /* what this server changed applies at once */
        gw_tenants_reload(gw_server_tenants(gw_req_server(r)));
    evhttp_clear_headers(&q);
}

/* GET /admin/usage[?tenant=NAME][&since=YYYY-MM-DD] */
void gw_handle_admin_usage(struct gw_req *r)
{
    struct evkeyvalq q = {0};
    if (!admin_query(r, &q, "tenant since"))
        return;
    store *st = admin_store(r);
    const char *tn = evhttp_find_header(&q, "tenant"), *since = evhttp_find_header(&q, "since");
    int64_t id = -1;
    struct store_tenant t, *all = NULL;
    struct store_usage *u = NULL;
    int n = 0, nt = 0, rc;
    if (since && !gw_usage_day_ok(since)) {
        gw_reply_error(r, 400, "since must be a day, YYYY-MM-DD.", "since", "invalid_value");
        goto out;
    }
    if (tn) {
        if ((rc = store_tenant_get(st, tn, &t))) {
            reply_store_error(r, rc, "No such tenant.");
            goto out;
        }
        id = t.id;
        store_tenant_deinit(&t);
    }
    if ((rc = store_usage_list(st, id, since, &u, &n)) || (rc = store_tenant_list(st, &all, &nt))) {
        reply_store_error(r, rc, "");
        goto out;
    }
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object();
        const char *name = NULL;
        for (int j = 0; j < nt; j++)
            if (all[j].id == u[i].tenant)
                name = all[j].name;
        json_object_set_new(o, "tenant", name ? json_string(name) : json_null());
        json_object_set_new(o, "day", json_string(u[i].day));
        json_object_set_new(o, "requests", json_integer(u[i].requests));
        json_object_set_new(o, "prompt_tokens", json_integer(u[i].prompt_tokens));
        json_object_set_new(o, "completion_tokens", json_integer(u[i].completion_tokens));
        json_object_set_new(o, "cached_tokens", json_integer(u[i].cached_tokens));
        json_object_set_new(o, "exact_hits", json_integer(u[i].exact_hits));
        json_object_set_new(o, "semantic_hits", json_integer(u[i].semantic_hits));
        json_object_set_new(o, "tokens_saved", json_integer(u[i].tokens_saved));
        json_array_append_new(a, o);
    }
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", a);
    gw_reply_json(r, 200, o, 0);
out:
    for (int j = 0; j < nt; j++)
        store_tenant_deinit(&all[j]);
    free(all);
    free(u);
    evhttp_clear_headers(&q);
}
