/*
 * store — cachegate's persistence: SQLite (WAL) for tenants, API key hashes, usage and
 * cache entries; one FAISS vector index per tenant over the entries' embeddings.
 *
 * SQLite is the source of truth. On open, each tenant's index is loaded from
 * DIR/index/TENANT.faiss only if that file holds exactly the tenant's live entries;
 * otherwise it is rebuilt from the database. Indexes are saved on close.
 *
 * Threads: every write goes through one writer thread, which commits queued operations
 * in batched transactions and then updates the indexes; a write's callback runs on that
 * thread after its commit. Reads go through a store_reader, one per reading thread,
 * each with its own SQLite connection; any number of readers run at once. Tenant and key
 * administration (rare) runs synchronously on a connection of its own under a mutex.
 *
 * Capacity: after each batch the writer evicts a tenant's least-recently-hit entries
 * until the tenant is within its entry and byte limits. Expired entries are never
 * returned and are deleted by the writer within about a second of expiring.
 *
 * The library never prints and never exits; it reports through return codes.
 */
#ifndef STORE_H
#define STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_OK 0
#define STORE_ENOMEM (-1)
#define STORE_EIO (-2)       /* SQLite or a file failed; see the err text where given */
#define STORE_ENOTFOUND (-3)
#define STORE_EINVAL (-4)
#define STORE_EEXIST (-5)
#define STORE_EBUSY (-6)     /* the data directory is in use by another process */
#define STORE_ECLOSED (-7)   /* the store is closing */
#define STORE_EINDEX (-8)    /* the vector index failed */
#define STORE_EFULL (-9)     /* the disk holding the data directory is full */

const char *store_strerror(int rc);

typedef struct store store;
typedef struct store_reader store_reader;

struct store_options {
    const char *dir;           /* data directory; created when missing */
    int dim;                   /* embedding dimension */
    int64_t max_entries;       /* per tenant, unless set by store_set_limits; 0: no limit */
    int64_t max_bytes;         /* per tenant, unless set by store_set_limits; 0: no limit */
    int64_t hnsw_min_entries;  /* a tenant's index becomes HNSW32 at this size; 0: never */
    /* per tenant: stored responses past it go, the oldest first (the newest stays, whatever
     * its size); 0: no limit */
    int64_t responses_max_bytes;
    /* Administration only (tenants, keys, usage): no directory lock, no indexes, no writer
     * thread, so it may run beside a server on the same directory (SQLite arbitrates).
     * Cache entries cannot be written or searched; deleting a tenant deletes its entries
     * in SQL (a running server's index skips the missing rows). */
    int admin_only;
    /* Told, from the thread that met it, of a failure no caller sees otherwise: a batch of
     * writes rolled back (the disk full, say), an index not saved at close. May be NULL. */
    void (*on_error)(void *arg, const char *what);
    void *on_error_arg;
};

/* Progress of index loading/rebuilding on open, for a caller that shows it. May be NULL.
 * rebuilt: NULL for an index read from its file, else why it is rebuilt from the rows. */
typedef void (*store_progress_fn)(void *arg, int64_t tenant, int64_t done, int64_t total,
                                  const char *rebuilt);

/* 1 when dir holds a store's database (one that store_open() would open, not create). */
int store_exists(const char *dir);
/* STORE_EBUSY, saying so, when another process holds DIR (store_open() would fail so): a
 * server asks before it loads its models, to fail in a second rather than after them. */
int store_in_use(const char *dir, char *err, size_t errlen);
/* Takes DIR's locks, as a server holds them, for work done beside the store (fds[2] out);
 * STORE_EBUSY, saying so, when another process holds them. store_unhold() gives them back. */
int store_hold(const char *dir, int fds[2], char *err, size_t errlen);
void store_unhold(int fds[2]);

int store_open(const struct store_options *o, store_progress_fn progress, void *parg,
               store **out, char *err, size_t errlen);
/* Commits what is queued, saves the indexes, joins the threads. Accepts NULL. */
void store_close(store *s);
/* The data directory it was opened on. */
const char *store_dir(const store *s);
/* The secret (STORE_ENTRY_KEY_BYTES, made at random with the database and kept in it) that
 * the API's entry ids are made from (the gateway's entry_id.h): the store's own ids are row
 * ids, counted across tenants. */
enum { STORE_ENTRY_KEY_BYTES = 32 };
const unsigned char *store_entry_id_key(const store *s);

/* ------------------------------------------------------------------ cache entries */

struct store_entry {
    int64_t tenant;
    uint64_t partition, exact;
    const char *model;
    const char *query; /* the final user message, as asked */
    size_t query_len;
    const float *embedding; /* [dim], L2-normalized; NULL: found by its exact key only */
    const char *answer;
    size_t answer_len;
    const char *finish_reason;
    int prompt_tokens, completion_tokens;
    int64_t created_ms, expires_ms; /* expires_ms 0: never */
};

/* A stored entry as read back; the strings are owned (store_hit_deinit frees them). */
struct store_hit {
    int64_t id, tenant;
    uint64_t partition;
    float similarity; /* semantic searches: cosine with the query; exact: 1 */
    char *model, *query, *answer, *finish_reason;
    size_t query_len, answer_len;
    int prompt_tokens, completion_tokens;
    int64_t created_ms, last_hit_ms, expires_ms, hit_count;
};
void store_hit_deinit(struct store_hit *h);
/* A listing of a tenant's live entries, newest first: at most limit of those with an id
 * below before (0: from the newest; negative: none) whose question holds contains (NULL: any; ASCII
 * letters in either case). out (malloc'd, each element store_hit_deinit'ed by the caller)
 * and n are filled in. */
struct store_list {
    int64_t tenant, before, now_ms;
    const char *contains;
    int limit;
    struct store_hit *out;
    int n;
};
/* On the administration connection, at once (beside a running server too). */
int store_entry_list(store *s, struct store_list *q);

/* Called on the writer thread once the operation committed (rc STORE_OK) or failed.
 * id: the new entry's id (put; 0 when its tenant was gone and nothing was written), or the
 * number of entries deleted (delete). */
typedef void (*store_done_fn)(void *arg, int rc, int64_t id);

/* store_entry_list() on the writer thread, for a server's event loop: a filter reads every
 * question of the tenant, which may take seconds. done(arg, rc, n) runs on that thread
 * once q is filled; q (and contains) must live until then. Returns STORE_OK (queued), or
 * an error (nothing queued). */
int store_entry_list_queue(store *s, struct store_list *q, store_done_fn done, void *arg);

/* Queues an insert; an entry with the same tenant and exact hash is replaced. Everything
 * is copied. done may be NULL. Returns STORE_OK (queued), or an error (nothing queued). */
int store_put(store *s, const struct store_entry *e, store_done_fn done, void *arg);
/* Records a hit (last_hit_ms, hit_count) for LRU; batched, no callback. Hits on the same
 * entry are added up and written within STORE_TOUCH_DELAY_MS, or with the next put or
 * flush (so LRU eviction, which runs in a put's batch, sees them). */
#define STORE_TOUCH_DELAY_MS 10000
int store_touch(store *s, int64_t id, int64_t now_ms);

/* The wall clock in milliseconds, as entries' times (created, last hit, expiry) are kept. */
int64_t store_now_ms(void);
/* Records an entry's prompt length (imports store 0 until a hit counts it); batched. */
int store_set_prompt_tokens(store *s, int64_t id, int prompt_tokens);
/* Deletes one entry (tenant < 0: of any tenant), every entry of a tenant (id < 0), or
 * everything (tenant < 0 and id < 0). */
int store_delete(store *s, int64_t tenant, int64_t id, store_done_fn done, void *arg);
/* done runs once everything queued before it has committed. */
int store_flush(store *s, store_done_fn done, void *arg);
/* Blocks until everything queued before the call has committed. Not on the writer thread. */
int store_sync(store *s);

/*
 * The tenant's generation: it changes whenever a committed write removed or replaced some
 * of the tenant's entries (deletes, LRU eviction, expiry sweeps, a put over the same exact
 * hash), before the operations' callbacks run. A caller that keeps copies of entries read
 * after seeing generation g may use them while the generation is still g (their expiry
 * aside).
 */
uint64_t store_generation(store *s, int64_t tenant);

/* Per-tenant capacity; 0 in either: the store's default for that limit. */
void store_set_limits(store *s, int64_t tenant, int64_t max_entries, int64_t max_bytes);
/* Holds a tenant's entries to its capacity at once (store_set_limits() asks it; they were
 * otherwise held to it at the tenant's next write), and with ttl_ms > 0 to that TTL from
 * their creation: an expiry later than created + ttl_ms is brought to it, and what is past
 * it goes in the same batch. Queued for the writer. */
int store_apply_limits(store *s, int64_t tenant, int64_t ttl_ms);

struct store_tenant_stats {
    int64_t tenant, entries, bytes;
    int64_t evicted_lru, expired; /* since open */
    int hnsw;                     /* the index is HNSW (else flat) */
    int64_t tombstones;
};
/* Fills up to cap tenants' stats (those with an index); returns how many tenants there are,
 * which may be more than cap. */
int store_stats(store *s, struct store_tenant_stats *out, int cap);

/* ------------------------------------------------------------------ readers */

int store_reader_open(store *s, store_reader **out);
void store_reader_close(store_reader *r); /* accepts NULL */

/* The live entry of tenant with this exact hash. STORE_ENOTFOUND when none (or expired). */
int store_get_exact(store_reader *r, int64_t tenant, uint64_t exact, int64_t now_ms,
                    struct store_hit *out);
/* The tenant's k nearest live entries to vec, best first, in out[0..*n). */
int store_search(store_reader *r, int64_t tenant, const float *vec, int k, int64_t now_ms,
                 struct store_hit *out, int *n /* out */);

/* ------------------------------------------------------------------ responses */

/*
 * The Responses API's stored responses, and stored chat completions (their ids tell them
 * apart: resp_, chatcmpl-), by id within their tenant. A put is queued to the
 * writer (strings copied; a tenant deleted meanwhile gets no row), and done (may be NULL)
 * runs on the writer thread once it is committed; expired ones are never returned and are
 * deleted within about a second of expiring; a tenant's go with it; past the tenant's
 * responses_max_bytes (body and messages) the oldest go in the put's transaction. ttl_ms: 0
 * never expires.
 */
int store_response_put(store *s, int64_t tenant, const char *id, const char *body,
                       const char *messages, int64_t ttl_ms, store_done_fn done, void *arg);
/* body and messages (out, malloc'd, NUL-terminated; either may be NULL if not wanted), or
 * STORE_ENOTFOUND. */
int store_response_get(store_reader *r, int64_t tenant, const char *id, int64_t now_ms,
                       char **body, char **messages);
/* Synchronous (administration connection): STORE_ENOTFOUND when the tenant has no such
 * response. created_ms (may be NULL): where it stood in its tenant's order (a listing's
 * cursor may still name it: store_response_list()). */
int store_response_delete(store *s, int64_t tenant, const char *id, int64_t *created_ms);
/* Synchronous (administration connection): the response's body is body (its size counted
 * anew against responses_max_bytes); STORE_ENOTFOUND when the tenant has no such live
 * response. */
int store_response_set_body(store *s, int64_t tenant, const char *id, const char *body,
                            int64_t now_ms);
/*
 * The tenant's live responses whose ids begin with prefix, in the order they were stored
 * (desc: the newest first), those after the response `after` (NULL: from the first): where
 * the tenant's response of that id stands (expired too), or when it is gone, at after_ms
 * (its created_ms, as store_response_delete() gave it; negative: STORE_ENOTFOUND).
 * fn(arg, id, body) for each until it returns nonzero.
 */
typedef int (*store_response_fn)(void *arg, const char *id, const char *body);
int store_response_list(store_reader *r, int64_t tenant, const char *prefix, const char *after,
                        int64_t after_ms, int desc, int64_t now_ms, store_response_fn fn,
                        void *arg);

/* ------------------------------------------------------------------ tenants and keys */

struct store_tenant {
    int64_t id;
    char name[64];
    int64_t created_ms;
    char *policy; /* JSON text, owned; store_tenant_deinit frees it */
};
void store_tenant_deinit(struct store_tenant *t);

int store_tenant_create(store *s, const char *name, int64_t *id /* out */);
int store_tenant_get(store *s, const char *name, struct store_tenant *out);
int store_tenant_get_id(store *s, int64_t id, struct store_tenant *out);
/* All tenants by name; *out is malloc'd (each element deinit'ed by the caller). */
int store_tenant_list(store *s, struct store_tenant **out, int *n);
/* Deletes the tenant, its keys, its usage and its cache entries. */
int store_tenant_delete(store *s, const char *name);
/* On a store opened admin_only, with no server on its directory (store_in_use()): deletes
 * one entry (tenant < 0: of any tenant), a tenant's (id < 0), or all (both < 0), in SQL;
 * *deleted gets the count. The indexes are rebuilt at the next open (their rows changed). */
int store_entries_delete_offline(store *s, int64_t tenant, int64_t id, int64_t *deleted);
int store_tenant_set_policy(store *s, int64_t id, const char *json);

struct store_key {
    int64_t id, tenant;
    char prefix[32];
    int64_t created_ms, revoked_ms; /* revoked_ms 0: live */
};
/* sha256: of the whole key; prefix: its first characters, unique. */
int store_key_add(store *s, int64_t tenant, const char *prefix, const uint8_t sha256[32]);
/* The tenant of a live key with this hash, or STORE_ENOTFOUND. */
int store_key_lookup(store *s, const uint8_t sha256[32], int64_t *tenant /* out */);
int store_key_list(store *s, int64_t tenant, struct store_key **out, int *n);
int store_key_revoke(store *s, const char *prefix);
/* Every live key's hash and tenant, for a caller's in-memory cache. */
int store_key_all(store *s, uint8_t (**sha)[32], int64_t **tenants, int *n);

/* ------------------------------------------------------------------ usage */

struct store_usage {
    int64_t tenant;
    char day[11]; /* YYYY-MM-DD, UTC */
    int64_t requests, prompt_tokens, completion_tokens, cached_tokens;
    int64_t exact_hits, semantic_hits, tokens_saved;
};
/* Queues usage to add to (tenant, day); batched by the writer, which is woken for usage that
 * spent tokens (committed at once: quotas are counted from it after a restart, and a crash
 * must not lose it), while a cache hit's waits for the next batch. */
int store_usage_add(store *s, const struct store_usage *u);
/* Rows with day >= since (NULL: all) of tenant (< 0: all), by tenant then day. */
int store_usage_list(store *s, int64_t tenant, const char *since, struct store_usage **out,
                     int *n);

#endif
