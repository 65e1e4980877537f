/*
 * http_impl.h — what route handlers outside server.c use: the request being answered,
 * replies, and the services the server owns. Event-loop thread only.
 *
 * A handler replies at once, or calls gw_req_defer() and replies later from a
 * completion callback. A deferred request whose client disconnects stays allocated
 * until that callback calls gw_req_gone(), which frees it and says so.
 */
#ifndef GW_HTTP_IMPL_H
#define GW_HTTP_IMPL_H

#include "cache.h"
#include "tenants.h"
#include "chat.h"
#include "config.h"
#include "embed_worker.h"
#include "embedder.h"
#include "engine_worker.h"
#include "model.h"
#include "openai_tok.h"
#include "tokenizer.h"

#include <jansson.h>

typedef struct gw_server gw_server;
struct gw_req;

gw_server *gw_req_server(struct gw_req *r);
const struct gw_config *gw_server_config(gw_server *srv);
emb_model *gw_server_embedder(gw_server *srv);
/* embedder.openai_tokenizer, loaded; NULL when none is configured or it failed to load. */
const gw_otok *gw_server_openai_tokenizer(gw_server *srv);
gw_embedw *gw_server_embed_worker(gw_server *srv);

/* The chat model and its engine thread. */
struct gw_llm {
    eng_model *m;
    tok_vocab *v;
    enum eng_chat_format fmt;
    char *default_system; /* from the model's template, or NULL */
    gw_engw *w;
    int max_model_len; /* the longest prompt + answer */
    int kv_positions;  /* positions the KV pool holds: a prompt must fit them alone */
    gw_metric *ttft, *tpot, *e2e; /* seconds: to the first token, per later token, whole */
    /* system_fingerprint: "fp_" and a hash of what shapes the answers (the model's file and
     * name, the arithmetic, the KV storage, the device, the version) */
    char fingerprint[24];
};
const struct gw_llm *gw_server_llm(gw_server *srv);
struct event_base *gw_server_base(gw_server *srv);

gw_cache *gw_server_cache(gw_server *srv);
gw_tenants *gw_server_tenants(gw_server *srv);

/* A request header, or NULL. Borrowed for the request's life. */
const char *gw_req_header(struct gw_req *r, const char *name);
/* The i-th (from 0) line of a request header that may be sent on several lines, as a list
 * header may (RFC 9110 5.3: "Cache-Control: no-cache" and "Cache-Control: no-store" mean
 * "no-cache, no-store"); NULL past the last. */
const char *gw_req_header_at(struct gw_req *r, const char *name, int i);
/* "GET", "POST", ... */
const char *gw_req_method(struct gw_req *r);
/* The URI's path, as sent (percent-encoded). */
const char *gw_req_path(struct gw_req *r);
/* The URI's query string (after '?'), or NULL. */
const char *gw_req_query(struct gw_req *r);
/* Its X-Request-Id (the client's when plain, else one made for it). */
const char *gw_req_id(struct gw_req *r);
/* Adds a header to the reply about to be sent (before it starts). */
void gw_reply_header(struct gw_req *r, const char *name, const char *value);
/* The same, replacing one of that name set before. */
void gw_reply_header_set(struct gw_req *r, const char *name, const char *value);

/* An id for a response or item: prefix and 24 random hex digits (event loop only). */
void gw_make_id(char out[48], const char *prefix);

/* The raw body (borrowed for the request's life). */
const char *gw_req_body(struct gw_req *r, size_t *len /* out */);
/* The completion queue: how worker threads hand results to the event loop. */
gw_cq *gw_server_cq(gw_server *srv);

/* The body as a JSON object, or NULL after replying 400. Caller owns the result. */
json_t *gw_req_json_body(struct gw_req *r);
/* The same, read with jansson's flags (JSON_REJECT_DUPLICATES: a key given twice is a 400,
 * not the last one's value). */
json_t *gw_req_json_body_flags(struct gw_req *r, size_t flags);

/* body: taken. flags: extra json_dumps flags (e.g. JSON_REAL_PRECISION). */
void gw_reply_json(struct gw_req *r, int status, json_t *body, size_t flags);
void gw_reply_error(struct gw_req *r, int status, const char *message, const char *param,
                    const char *code);
/* The same with the error's type given (oai_error_type() chooses it for gw_reply_error). */
void gw_reply_error_type(struct gw_req *r, int status, const char *message, const char *param,
                         const char *code, const char *type);
/* A body already serialized (copied): Content-Type ctype. */
void gw_reply_body(struct gw_req *r, int status, const char *ctype, const char *body,
                   size_t len);

void gw_req_defer(struct gw_req *r);
/* After gw_req_defer(): fn(arg) runs when the client goes away before the reply ends. */
void gw_req_on_gone(struct gw_req *r, void (*fn)(void *arg), void *arg);
/* After gw_req_defer(): fn(arg) runs when the server's shutdown grace period runs out with
 * the reply unfinished; it should end the reply with an error at once (the server waits a
 * moment more for it to go out, then closes the connection). */
void gw_req_on_cut(struct gw_req *r, void (*fn)(void *arg), void *arg);

/* Server-Sent Events: start (200, text/event-stream), "data: JSON" events (body taken),
 * and the end ("data: [DONE]"). */
void gw_reply_sse_start(struct gw_req *r);
void gw_reply_sse_json(struct gw_req *r, json_t *body);
/* an event with its name (NULL: none); takes body */
void gw_reply_sse_event(struct gw_req *r, const char *event, json_t *body);
void gw_reply_sse_end(struct gw_req *r); /* "data: [DONE]", then the end */
/* An error said after a 200's headers (a stream's error event): the access log says its
 * status beside the 200 sent, at warn. */
void gw_req_failed(struct gw_req *r, int status);
void gw_reply_sse_finish(struct gw_req *r); /* the end alone (the Responses API's streams) */
/* Adds Retry-After to the reply about to be sent. */
void gw_reply_retry_after(struct gw_req *r, int seconds);
/* 1 when the request carries the admin key (tenants.admin_key); otherwise replies (401, or
 * 403 with the admin API off) and returns 0. */
int gw_admin_ok(struct gw_req *r);
/* Names the tenant a request is served for, and the prefix of its key (NULL: none), in
 * its access log line. */
void gw_req_set_tenant(struct gw_req *r, const char *tenant, const char *key);
/* After gw_req_defer(): 1 (and r is freed) when the client has gone away. */
int gw_req_gone(struct gw_req *r);

/* POST /v1/embeddings (api_embeddings.c) */
void gw_handle_embeddings(struct gw_req *r);
/* POST /v1/chat/completions, POST /v1/completions (api_chat.c) */
void gw_handle_chat_completions(struct gw_req *r);
void gw_handle_completions(struct gw_req *r);
/* POST /v1/responses (api_chat.c, with responses.c) */
void gw_handle_responses(struct gw_req *r);
void gw_handle_response_input_tokens(struct gw_req *r); /* POST /v1/responses/input_tokens */
void gw_handle_response_by_id(struct gw_req *r); /* GET, DELETE /v1/responses/{id} */
/* /admin/cache, POST /admin/cache/import (api_admin.c) */
/* GET: a tenant's entries, newest first; DELETE: ?id=, ?tenant=, ?all=true */
void gw_handle_admin_cache(struct gw_req *r);
void gw_handle_admin_cache_import(struct gw_req *r);
/* /admin/tenants, /admin/keys, /admin/usage (api_admin.c) */
void gw_handle_admin_tenants(struct gw_req *r);
void gw_handle_admin_keys(struct gw_req *r);
void gw_handle_admin_usage(struct gw_req *r);

#endif
