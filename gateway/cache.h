/*
 * cache — the answer caches' policy over the store: cache keys, exact and semantic
 * lookups, storing finished answers, imports, and the cache's metrics.
 *
 * Keys (ARCHITECTURE.md, "Cache semantics"): the partition hash covers the tenant's
 * namespace, the model, every message but the final user message, and the sampling
 * parameters that change an answer; the exact hash adds the final user message,
 * normalized (Unicode NFC, runs of white space as one space, trimmed). Requests in
 * different partitions never share an answer.
 *
 * Threads: everything here runs on the event loop, except the semantic search, which
 * runs on the embedder's worker thread right after the query is embedded (so a vector
 * search never stalls the event loop), with a store reader of its own.
 */
#ifndef GW_CACHE_H
#define GW_CACHE_H

#include "config.h"
#include "embed_worker.h"
#include "judge.h"
#include "metrics.h"
#include "store.h"

#include <jansson.h>
#include <stdint.h>

typedef struct gw_cache gw_cache;

struct gw_cache_key {
    uint64_t partition, exact;
    char *query; /* the final user message as asked (owned) */
    size_t query_len;
    int searchable; /* a chat's question: stored with its embedding, for semantic lookups */
};

/*
 * Keys of a chat (chat = 1: body has messages) or completion (prompt) request body. The
 * exact key takes a chat's final user message normalized (NFC, white space collapsed) and a
 * completion's prompt as it is. Returns 0; 1 when the request has no final user message to
 * key on (not cacheable); -1 when out of memory. ns: the tenant's namespace.
 */
int gw_cache_key_make(json_t *body, int chat, int64_t ns, struct gw_cache_key *out);
void gw_cache_key_deinit(struct gw_cache_key *k);

/*
 * A message's content as text: a string, or the text parts of an array (and an assistant's
 * refusal parts, by their "refusal"), joined by line breaks (malloc'd, *len bytes). NULL
 * with *bad: -1 when content is neither, the index of the first part that is not text, or
 * -2 when out of memory.
 */
char *gw_message_text(json_t *content, size_t *len, long *bad);
/* A message's text as the model reads it and the caches key it: its content's, after
 * "NAME: " when it gives a name (OpenAI's participant name), as gw_message_text(). */
char *gw_turn_text(json_t *msg, size_t *len, long *bad);

/* Whether a chat request's messages are ones the engine takes: a non-empty array of system,
 * developer, user or assistant messages with text content. 0, or -1 with msg and param (as
 * OpenAI names it: "messages.[1].content"). Checked before the caches are asked, and on
 * imported lines. */
int gw_messages_check(json_t *msgs, char *msg, size_t len, char *param, size_t plen);

/*
 * The Responses API's stored responses, within a tenant (event loop only): get (body and
 * messages malloc'd, either may be NULL if not wanted; STORE_ENOTFOUND), put (queued to the
 * store's writer, expiring after ttl_s, 0: never), delete (synchronous; STORE_ENOTFOUND).
 */
int gw_cache_response_get(gw_cache *c, int64_t tenant, const char *id, char **body,
                          char **messages);
int gw_cache_response_put(gw_cache *c, int64_t tenant, const char *id, const char *body,
                          const char *messages, int64_t ttl_s);
int gw_cache_response_delete(gw_cache *c, int64_t tenant, const char *id);
/* The stored response's body is now body (a chat completion's metadata changed);
 * STORE_ENOTFOUND. */
int gw_cache_response_set_body(gw_cache *c, int64_t tenant, const char *id, const char *body);
/* The tenant's stored responses whose ids begin with prefix, in the order they were stored
 * (desc: the newest first), from the one after `after` (NULL: the first; one deleted lately
 * or expired still stands where it stood; STORE_ENOTFOUND when it is not known): fn(arg,
 * id, body) for each until it returns nonzero. Those not yet committed are listed too. */
int gw_cache_response_list(gw_cache *c, int64_t tenant, const char *prefix, const char *after,
                           int desc, store_response_fn fn, void *arg);

/* Request-level controls, from Cache-Control and the X-Cache-* request headers. */
struct gw_cache_ctl {
    int no_cache;       /* skip the lookup; still store */
    int no_store;       /* do not store the answer */
    int only_if_cached; /* answer from the cache or 504; never run the engine */
    double threshold;   /* < 0: the tenant's or the configured one */
    int64_t ttl_s;      /* < 0: the tenant's or the configured one */
};

/* store: borrowed, outlives the cache. embw: the embedder worker, borrowed. */
gw_cache *gw_cache_create(const struct gw_config *cfg, store *st, gw_embedw *embw, int dim,
                          gw_metrics *metrics, char *err, size_t errlen);
void gw_cache_destroy(gw_cache *c); /* accepts NULL */
store *gw_cache_store(gw_cache *c);

/*
 * Exact lookup. 1 and *out set on a hit whose answer fits max_tokens; 0 on a miss. Counts
 * the lookup in the metrics. *out is the cache's: valid until the next gw_cache_exact()
 * call; the caller neither changes nor frees it.
 *
 * Served entries are kept in memory (cache.hot_entries, cache.hot_bytes; 4 slots per
 * hash, the least recently served one makes room): a hit there costs no SQLite read. A
 * copy is used only while its tenant's store generation is the one it was read under (no
 * entry of the tenant deleted, replaced, evicted or swept since: otherwise it is read
 * again), and never past its expiry.
 */
/* A stored entry as GET /admin/cache and `cachegate cache list --json` show it: id, model,
 * question, answer, finish_reason, token counts, created_ms, last_hit_ms, hits, expires_ms
 * (null: never). */
json_t *gw_cache_entry_json(const store *st, const struct store_hit *h);

int gw_cache_exact(gw_cache *c, int64_t tenant, const struct gw_cache_key *k, int max_tokens,
                   const struct store_hit **out);
/* Records the prompt length of the entry gw_cache_exact() last lent (imported entries store
 * 0 until their first hit counts it), in memory at once and in the store. */
void gw_cache_exact_prompt_tokens(gw_cache *c, int prompt_tokens);

/* A semantic lookup in flight. The caller fills the inputs and done; the cache the rest. */
struct gw_cache_sem {
    struct gw_embed_job job; /* internal */
    /* inputs */
    int64_t tenant;
    const struct gw_cache_key *key; /* borrowed until done runs */
    double threshold;
    int max_tokens;
    int stores; /* a miss is answered and its answer stored (not no-store, only-if-cached) */
    void (*done)(struct gw_cache_sem *s); /* event loop */
    /* outputs */
    int rc;         /* 0, or the embedder's / store's error (then a miss) */
    int hit;        /* hit is filled */
    struct store_hit entry;
    float best;     /* similarity of the nearest candidate of the partition; -1: none */
    char why[96];   /* on a miss with a near candidate: why it was refused */
    float *vec;     /* [dim] the query's embedding (owned; gw_cache_sem_deinit frees) */
    /* internal */
    gw_cache *c;
    int ntok;
    const char *text;
    size_t len;
    struct gw_judge_text qj; /* the question's tokens for the judge, from its own pass */
};
/* Embeds the final user message and searches; s->done runs on the event loop. */
void gw_cache_semantic(gw_cache *c, struct gw_cache_sem *s);
void gw_cache_sem_deinit(struct gw_cache_sem *s);

/* Counts the tokens a hit saved (the completion tokens of entry id) once its answer is
 * served, and records the hit for LRU. */
void gw_cache_served(gw_cache *c, int64_t id, int completion_tokens, int semantic);
/* Counts a request answered by the same request's generation in flight, and the tokens
 * that saved. */
void gw_cache_coalesced(gw_cache *c, int completion_tokens);

/*
 * Stores a finished answer (finish_reason "stop"). vec: the query's embedding, copied, or
 * NULL to have it embedded first (a key that is not searchable is stored without one).
 * ttl_s < 0: the configured TTL.
 */
void gw_cache_put(gw_cache *c, int64_t tenant, const struct gw_cache_key *k, const float *vec,
                  const char *model, const char *answer, size_t len, int prompt_tokens,
                  int completion_tokens, int64_t ttl_s);

/* Counts a request with Cache-Control: only-if-cached that no answer met (a 504 the client
 * asked for, which the server-error alert leaves out). */
void gw_cache_note_unmet(gw_cache *c);

/* Updates the per-tenant gauges and eviction counters from the store (before /metrics),
 * labelled as tenants labels its own families. */
typedef struct gw_tenants gw_tenants;
void gw_cache_refresh_metrics(gw_cache *c, gw_tenants *tenants);

/* One line of an import: {"model": M, "messages": [...], "answer": A} ("prompt" instead of
 * "messages" keys a completion); optional sampling parameters key like a request's. */
struct gw_import_item {
    struct gw_cache_key key;
    char *model, *answer;
    size_t answer_len;
    int completion_tokens;
};
struct tok_vocab;
/* v: the chat model's vocabulary, to count the answer's tokens; model: the name requests
 * must give for the entry to be found (NULL: any). -1 with err on a bad line, among them one
 * that no request could ever be answered from: another model, a sampling parameter of the
 * wrong type or out of range, tools or a response format that requests are refused. */
int gw_cache_import_parse(const char *line, size_t len, int64_t ns, const struct tok_vocab *v,
                          const char *model, struct gw_import_item *out, char *err,
                          size_t errlen);
void gw_import_item_deinit(struct gw_import_item *it);

/* Normalizes a final user message for the exact key (NFC, white space collapsed but for
 * lines indented by two columns or more). malloc'd. */
char *gw_cache_normalize(const char *text, size_t len, size_t *outlen);

#endif
