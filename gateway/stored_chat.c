/*
 * OpenAI's stored chat completions (stored_chat.h): put together, stored, read, listed,
 * changed and deleted.
 */
#include "stored_chat.h"

#include "http_impl.h"
#include "log.h"
#include "oai.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "chatcmpl-"
#define MAX_CHOICES 4096

/* ------------------------------------------------------------------ put together */

/* A string being put together is the array of its pieces (joined once, by flatten(), so
 * that a long answer's thousands of chunks cost no more than its length) */
static int extend(json_t *o, const char *key, json_t *more)
{
    json_t *a = json_object_get(o, key);
    if (!json_is_array(a)) {
        a = json_is_string(a) ? json_pack("[O]", a) : json_array();
        if (!a || json_object_set_new(o, key, a))
            return -1;
    }
    return json_array_append(a, more);
}

/* o's key, the array of pieces extend() made, as one string */
static int flatten(json_t *o, const char *key)
{
    json_t *a = json_object_get(o, key), *p;
    if (!json_is_array(a))
        return 0;
    size_t len = 0, i;
    json_array_foreach(a, i, p)
    {
        len += json_string_length(p);
    }
    char *t = malloc(len + 1);
    if (!t)
        return -1;
    size_t at = 0;
    json_array_foreach(a, i, p)
    {
        memcpy(t + at, json_string_value(p), json_string_length(p));
        at += json_string_length(p);
    }
    json_t *str = json_stringn_nocheck(t, at);
    free(t);
    return str ? json_object_set_new(o, key, str) : -1;
}

int gw_stored_finish(json_t *acc)
{
    size_t i, j;
    json_t *ch, *call;
    json_array_foreach(json_object_get(acc, "choices"), i, ch)
    {
        json_t *m = json_object_get(ch, "message");
        if (flatten(m, "content"))
            return -1;
        json_array_foreach(json_object_get(m, "tool_calls"), j, call)
        {
            if (flatten(json_object_get(call, "function"), "arguments"))
                return -1;
        }
    }
    return 0;
}

/* tool_calls[j] of message m, made empty up to it */
static json_t *call_at(json_t *m, size_t j)
{
    json_t *calls = json_object_get(m, "tool_calls");
    if (!json_is_array(calls)) {
        calls = json_array();
        if (json_object_set_new(m, "tool_calls", calls))
            return NULL;
    }
    while (json_array_size(calls) <= j)
        if (json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", "", "type",
                                                   "function", "function", "name", "",
                                                   "arguments", "")))
            return NULL;
    return json_array_get(calls, j);
}

/* one chunk's tool call deltas into message m */
static int put_calls(json_t *m, json_t *calls)
{
    size_t i;
    json_t *t;
    json_array_foreach(calls, i, t)
    {
        json_int_t j = json_integer_value(json_object_get(t, "index"));
        json_t *to = j >= 0 && j < MAX_CHOICES ? call_at(m, (size_t)j) : NULL;
        if (!to)
            return -1;
        json_t *f = json_object_get(t, "function"), *tf = json_object_get(to, "function");
        if (json_is_string(json_object_get(t, "id")))
            json_object_set(to, "id", json_object_get(t, "id"));
        if (json_is_string(json_object_get(f, "name")))
            json_object_set(tf, "name", json_object_get(f, "name"));
        json_t *args = json_object_get(f, "arguments");
        if (json_is_string(args) && extend(tf, "arguments", args))
            return -1;
    }
    return 0;
}

/* one chunk's choice into acc's choices */
static int put_choice(json_t *choices, json_t *ch)
{
    json_int_t i = json_integer_value(json_object_get(ch, "index"));
    if (i < 0 || i >= MAX_CHOICES)
        return -1;
    while (json_array_size(choices) <= (size_t)i)
        if (json_array_append_new(
                choices, json_pack("{s:I, s:{s:s, s:n, s:n}, s:n, s:n}", "index",
                                   (json_int_t)json_array_size(choices), "message", "role",
                                   "assistant", "content", "refusal", "logprobs",
                                   "finish_reason")))
            return -1;
    json_t *to = json_array_get(choices, (size_t)i), *m = json_object_get(to, "message");
    json_t *d = json_object_get(ch, "delta"), *text = json_object_get(d, "content");
    if (json_is_string(text) && extend(m, "content", text))
        return -1;
    if (json_is_array(json_object_get(d, "tool_calls")) &&
        put_calls(m, json_object_get(d, "tool_calls")))
        return -1;
    json_t *lp = json_object_get(json_object_get(ch, "logprobs"), "content");
    if (json_is_array(lp)) {
        if (!json_is_object(json_object_get(to, "logprobs")) &&
            json_object_set_new(to, "logprobs",
                                json_pack("{s:[], s:n}", "content", "refusal")))
            return -1;
        if (json_array_extend(json_object_get(json_object_get(to, "logprobs"), "content"), lp))
            return -1;
    }
    json_t *fr = json_object_get(ch, "finish_reason");
    if (json_is_string(fr))
        json_object_set(to, "finish_reason", fr);
    return 0;
}

json_t *gw_stored_chunk(json_t *acc, json_t *chunk)
{
    if (!acc) { /* in a JSON reply's order */
        acc = json_object();
        static const char *const keys[] = {"id", "object", "created", "model", "service_tier",
                                           "system_fingerprint"};
        int oom = !acc;
        for (size_t i = 0; !oom && i < sizeof keys / sizeof *keys; i++) {
            json_t *v = i == 1 ? json_string("chat.completion")
                               : json_incref(json_object_get(chunk, keys[i]));
            oom = json_object_set_new(acc, keys[i], v ? v : json_null());
        }
        if (oom || json_object_set_new(acc, "choices", json_array()) ||
            json_object_set_new(acc, "usage", json_null())) {
            json_decref(acc);
            return NULL;
        }
    }
    json_t *u = json_object_get(chunk, "usage");
    if (json_is_object(u))
        json_object_set(acc, "usage", u);
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(chunk, "choices"), i, ch)
    {
        if (put_choice(json_object_get(acc, "choices"), ch)) {
            json_decref(acc);
            return NULL;
        }
    }
    return acc;
}

json_t *gw_stored_request(json_t *b, const char *request_id)
{
    static const struct {
        const char *key, *as;
        double def; /* a number's default; NAN: null */
    } keys[] = {{"metadata", NULL, NAN},         {"seed", NULL, NAN},
                {"temperature", NULL, 1},        {"top_p", NULL, 1},
                {"presence_penalty", NULL, 0},   {"frequency_penalty", NULL, 0},
                {"tools", NULL, NAN},            {"tool_choice", NULL, NAN},
                {"response_format", NULL, NAN},  {"user", "input_user", NAN}};
    json_t *o = json_pack("{s:s}", "request_id", request_id);
    for (size_t i = 0; o && i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(b, keys[i].key);
        if (!v || json_is_null(v))
            v = !strcmp(keys[i].key, "metadata") ? json_object()
                : isnan(keys[i].def)             ? json_null()
                                                 : json_real(keys[i].def);
        else
            v = json_deep_copy(v);
        if (json_object_set_new(o, keys[i].as ? keys[i].as : keys[i].key, v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int gw_stored_put(gw_server *srv, int64_t tenant, json_t *completion, json_t *request,
                  json_t *messages)
{
    const char *id = json_string_value(json_object_get(completion, "id"));
    char *body = NULL, *msgs = NULL;
    int rc = -1;
    if (id && !gw_stored_finish(completion) && !json_object_update(completion, request)) {
        body = json_dumps(completion, JSON_COMPACT | JSON_PRESERVE_ORDER);
        msgs = json_dumps(messages, JSON_COMPACT);
    }
    if (body && msgs)
        rc = gw_cache_response_put(gw_server_cache(srv), tenant, id, body, msgs,
                                   gw_server_config(srv)->responses_ttl_s)
                 ? -1
                 : 0;
    if (rc)
        gw_log(GW_LOG_WARN, "chat completion %s was not stored (out of memory, or closing)",
               id ? id : "?");
    free(body);
    free(msgs);
    json_decref(completion);
    return rc;
}

/* ------------------------------------------------------------------ the routes */

static void not_found(struct gw_req *r, const char *id)
{
    char msg[320];
    snprintf(msg, sizeof msg, "Chat completion with id '%.200s' not found (or expired, or "
             "created without \"store\": true).", id);
    gw_reply_error(r, 404, msg, NULL, "not_found");
}

/* limit (1 to 100, def when absent) and order (asc, the default, or desc) of a listing's
 * query; -1 with the 400 sent */
static int paging(struct gw_req *r, struct evkeyvalq *q, int def, int *limit, int *desc)
{
    const char *l = evhttp_find_header(q, "limit"), *o = evhttp_find_header(q, "order");
    char *end = NULL;
    long n = l ? strtol(l, &end, 10) : def;
    if (l && (!*l || *end || n < 1 || n > 100)) {
        gw_reply_error(r, 400, "limit must be an integer from 1 to 100.", "limit", NULL);
        return -1;
    }
    if (o && strcmp(o, "asc") && strcmp(o, "desc")) {
        gw_reply_error(r, 400, "order must be asc or desc.", "order", NULL);
        return -1;
    }
    *limit = (int)n;
    *desc = o && !strcmp(o, "desc");
    return 0;
}

/* a page of a list: data (taken) and whether more follow */
static json_t *page(json_t *data, int more)
{
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    size_t n = json_array_size(data);
    json_object_set(o, "first_id",
                    n ? json_object_get(json_array_get(data, 0), "id") : json_null());
    json_object_set(o, "last_id",
                    n ? json_object_get(json_array_get(data, n - 1), "id") : json_null());
    json_object_set_new(o, "has_more", json_boolean(more));
    return o;
}

/* The query's parsed; -1 with the 400 sent */
static int query(struct gw_req *r, struct evkeyvalq *q)
{
    const char *qs = gw_req_query(r);
    if (qs && evhttp_parse_query_str(qs, q)) {
        gw_reply_error(r, 400, "The query string does not parse.", NULL, NULL);
        return -1;
    }
    return 0;
}

struct listing {
    struct evkeyvalq *q; /* model and metadata[k]=v filter */
    json_t *data;
    int limit, more, damaged;
};

/* whether completion o passes the listing's filters */
static int wanted(struct listing *l, json_t *o)
{
    const char *model = evhttp_find_header(l->q, "model");
    if (model && strcmp(model, json_string_value(json_object_get(o, "model"))
                            ? json_string_value(json_object_get(o, "model"))
                            : ""))
        return 0;
    json_t *meta = json_object_get(o, "metadata");
    struct evkeyval *kv;
    for (kv = l->q->tqh_first; kv; kv = kv->next.tqe_next) {
        /* (evhttp decodes a query's values, not its keys: metadata%5Bk%5D) */
        char *k = evhttp_uridecode(kv->key, 1, NULL);
        size_t n = k ? strlen(k) : 0;
        if (!k || strncmp(k, "metadata[", 9) || n < 11 || k[n - 1] != ']') {
            free(k);
            continue;
        }
        k[n - 1] = 0;
        const char *v = json_string_value(json_object_get(meta, k + 9));
        free(k);
        if (!v || strcmp(v, kv->value))
            return 0;
    }
    return 1;
}

static int listed(void *arg, const char *id, const char *body)
{
    (void)id;
    struct listing *l = arg;
    json_t *o = json_loads(body, 0, NULL);
    if (!o) {
        l->damaged = 1;
        return 1;
    }
    if (!wanted(l, o)) {
        json_decref(o);
        return 0;
    }
    if ((int)json_array_size(l->data) == l->limit) {
        json_decref(o);
        l->more = 1;
        return 1;
    }
    json_array_append_new(l->data, o);
    return 0;
}

void gw_handle_stored_chat_list(struct gw_req *r)
{
    struct gw_tenant *tn = gw_tenants_auth(gw_server_tenants(gw_req_server(r)), r);
    if (!tn)
        return;
    struct evkeyvalq q = {0};
    struct listing l = {&q, json_array(), 20, 0, 0};
    int desc = 0;
    if (!query(r, &q) && !paging(r, &q, 20, &l.limit, &desc)) {
        const char *after = evhttp_find_header(&q, "after");
        int rc = gw_cache_response_list(gw_server_cache(gw_req_server(r)), tn->id, PREFIX,
                                        after, desc, listed, &l);
        if (rc == STORE_ENOTFOUND) {
            char msg[320];
            snprintf(msg, sizeof msg, "after: no stored chat completion has the id '%.200s'.",
                     after);
            gw_reply_error(r, 400, msg, "after", NULL);
        } else if (rc || l.damaged) {
            gw_reply_error(r, 500, rc ? store_strerror(rc) : "A stored completion is damaged.",
                           NULL, NULL);
        } else {
            gw_reply_json(r, 200, page(l.data, l.more), 0);
            l.data = NULL;
        }
    }
    json_decref(l.data);
    evhttp_clear_headers(&q);
}

/* A stored message as the messages route shows it: its id, and its content as a string
 * with content_parts the parts it was given as (null: given as a string). */
static json_t *shown_message(const char *id, size_t i, json_t *m)
{
    json_t *o = json_deep_copy(m);
    if (!json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    char mid[80];
    snprintf(mid, sizeof mid, "%s-%zu", id, i);
    json_object_set_new(o, "id", json_string(mid));
    json_t *c = json_object_get(o, "content");
    if (!json_is_array(c)) {
        json_object_set_new(o, "content_parts", json_null());
        return o;
    }
    json_object_set(o, "content_parts", c);
    /* the parts' texts joined by line breaks, as the model read them */
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(c, k, part)
    {
        len += json_string_length(json_object_get(part, "text")) + 1;
    }
    char *text = malloc(len + 1);
    size_t at = 0;
    json_array_foreach(c, k, part)
    {
        json_t *t = json_object_get(part, "text");
        if (!text || !json_is_string(t))
            continue;
        if (at)
            text[at++] = '\n';
        memcpy(text + at, json_string_value(t), json_string_length(t));
        at += json_string_length(t);
    }
    json_object_set_new(o, "content", text ? json_stringn_nocheck(text, at) : json_null());
    free(text);
    return o;
}

/* GET /v1/chat/completions/{id}/messages */
static void messages(struct gw_req *r, int64_t tenant, const char *id)
{
    struct evkeyvalq q = {0};
    int limit, desc;
    if (query(r, &q) || paging(r, &q, 20, &limit, &desc)) {
        evhttp_clear_headers(&q);
        return;
    }
    char *msgs = NULL;
    int rc = gw_cache_response_get(gw_server_cache(gw_req_server(r)), tenant, id, NULL, &msgs);
    json_t *convo = msgs ? json_loads(msgs, 0, NULL) : NULL;
    free(msgs);
    if (rc == STORE_ENOTFOUND) {
        not_found(r, id);
    } else if (rc || !json_is_array(convo)) {
        gw_reply_error(r, 500, rc ? store_strerror(rc) : "The completion's messages are damaged.",
                       NULL, NULL);
    } else {
        const long n = (long)json_array_size(convo);
        const char *after = evhttp_find_header(&q, "after");
        long at = desc ? n - 1 : 0;
        if (after) {
            char mid[80];
            long i = 0;
            for (; i < n; i++) {
                snprintf(mid, sizeof mid, "%s-%ld", id, i);
                if (!strcmp(mid, after))
                    break;
            }
            at = i + (desc ? -1 : 1);
            if (i == n) {
                char msg[320];
                snprintf(msg, sizeof msg, "after: the completion has no message '%.200s'.",
                         after);
                gw_reply_error(r, 400, msg, "after", NULL);
                json_decref(convo);
                evhttp_clear_headers(&q);
                return;
            }
        }
        json_t *data = json_array();
        for (; at >= 0 && at < n && (long)json_array_size(data) < limit; at += desc ? -1 : 1)
            json_array_append_new(data, shown_message(id, (size_t)at,
                                                      json_array_get(convo, (size_t)at)));
        gw_reply_json(r, 200, page(data, at >= 0 && at < n), 0);
    }
    json_decref(convo);
    evhttp_clear_headers(&q);
}

/* POST /v1/chat/completions/{id}: {"metadata": {...} or null} */
static void update(struct gw_req *r, int64_t tenant, const char *id)
{
    json_t *b = gw_req_json_body(r);
    if (!b)
        return;
    const char *key;
    json_t *v, *meta = json_object_get(b, "metadata");
    char msg[320];
    json_object_foreach(b, key, v)
    {
        if (strcmp(key, "metadata")) {
            snprintf(msg, sizeof msg, "Unrecognized request argument supplied: %.200s (only "
                     "metadata can be changed).", key);
            gw_reply_error(r, 400, msg, key, NULL);
            json_decref(b);
            return;
        }
    }
    if (!meta || !oai_metadata_ok(meta)) {
        gw_reply_error(r, 400, meta ? "metadata must be an object of at most 16 string values "
                                      "of at most 512 characters, their keys of at most 64."
                                    : "Missing required parameter: 'metadata'.",
                       "metadata", NULL);
        json_decref(b);
        return;
    }
    gw_cache *cache = gw_server_cache(gw_req_server(r));
    char *body = NULL;
    int rc = gw_cache_response_get(cache, tenant, id, &body, NULL);
    json_t *o = body ? json_loads(body, 0, NULL) : NULL;
    free(body);
    body = NULL;
    if (!rc && o) {
        json_object_set_new(o, "metadata", json_is_object(meta) ? json_incref(meta)
                                                                : json_object());
        body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        rc = body ? gw_cache_response_set_body(cache, tenant, id, body) : STORE_ENOMEM;
    }
    if (rc == STORE_ENOTFOUND)
        not_found(r, id);
    else if (rc || !o)
        gw_reply_error(r, 500, rc ? store_strerror(rc) : "The stored completion is damaged.",
                       NULL, NULL);
    else
        gw_reply_body(r, 200, "application/json", body, strlen(body));
    free(body);
    json_decref(o);
    json_decref(b);
}

void gw_handle_stored_chat(struct gw_req *r)
{
    struct gw_tenant *tn = gw_tenants_auth(gw_server_tenants(gw_req_server(r)), r);
    if (!tn)
        return;
    size_t idlen = 0;
    char *id = evhttp_uridecode(gw_req_path(r) + strlen("/v1/chat/completions/"), 0, &idlen);
    if (!id) {
        gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
        return;
    }
    const char *method = gw_req_method(r);
    const int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    char *sub = strchr(id, '/');
    int msgs = 0;
    if (sub && !strcmp(sub, "/messages") && get) {
        *sub = 0;
        msgs = 1;
    } else if (sub) {
        char msg[320];
        snprintf(msg, sizeof msg, "Unknown route: %s %.200s (of a stored chat completion, GET, "
                 "POST and DELETE /v1/chat/completions/{id} and GET "
                 "/v1/chat/completions/{id}/messages are served).", method, gw_req_path(r));
        gw_reply_error(r, 404, msg, NULL, "not_found");
        free(id);
        return;
    }
    gw_cache *cache = gw_server_cache(gw_req_server(r));
    /* %00 in it, or a Responses API's id: none of the tenant's stored completions */
    if ((msgs ? strlen(id) + strlen("/messages") : strlen(id)) != idlen ||
        strncmp(id, PREFIX, strlen(PREFIX))) {
        not_found(r, id);
    } else if (msgs) {
        messages(r, tn->id, id);
    } else if (!strcmp(method, "POST")) {
        update(r, tn->id, id);
    } else if (!strcmp(method, "DELETE")) {
        int rc = gw_cache_response_delete(cache, tn->id, id);
        if (rc == STORE_ENOTFOUND)
            not_found(r, id);
        else if (rc)
            gw_reply_error(r, 500, store_strerror(rc), NULL, NULL);
        else
            gw_reply_json(r, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object",
                                            "chat.completion.deleted", "deleted", 1), 0);
    } else {
        char *body = NULL;
        int rc = gw_cache_response_get(cache, tn->id, id, &body, NULL);
        if (rc == STORE_ENOTFOUND)
            not_found(r, id);
        else if (rc)
            gw_reply_error(r, 500, store_strerror(rc), NULL, NULL);
        else
            gw_reply_body(r, 200, "application/json", body, strlen(body));
        free(body);
    }
    free(id);
}
