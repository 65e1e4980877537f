/*
 * store_impl.h — what the store's files share: the store itself, a tenant's index slot,
 * the writer's queue. Not for users of the library.
 */
#ifndef STORE_IMPL_H
#define STORE_IMPL_H

#include "index.h"
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>

/* The store/schema.sql text, compiled in by the Makefile. */
extern const char store_schema_sql[];

/* One tenant's index and counters. The slot lives until the store closes. lock guards the
 * ix pointer (swapped by a rebuild); ix has its own lock for its contents. */
struct slot {
    int64_t tenant;
    pthread_rwlock_t lock;
    sidx *ix;
    int dirty; /* changed since loaded or saved */
    /* an add or a removal failed: the index no longer matches the database, so it is
     * rebuilt from it (writer thread) and never saved as it is */
    int stale;
    /* writer thread only, read racily by store_stats */
    int64_t entries, bytes, evicted, expired;
    /* bumped (atomically, release) after every committed batch that removed or replaced
     * one of the tenant's entries, before its operations' callbacks: store_generation() */
    uint64_t removals;
    int64_t max_entries, max_bytes; /* 0: the store's defaults (q_mu) */
    /* background rebuild: the writer logs index changes past the snapshot meanwhile */
    int rebuilding, rebuild_thread_live;
    pthread_t rebuild_thread;
    int64_t snapshot;      /* rows with id <= snapshot are read by the rebuild */
    enum sidx_kind rebuild_kind;
    sidx *rebuilt;         /* set by the rebuild thread when done (q_mu) */
    int rebuild_rc;        /* (q_mu) */
    int rebuild_done;      /* (q_mu) */
    int64_t *pend_ids;     /* added while rebuilding */
    float *pend_vecs;
    int64_t npend, cappend;
    int64_t *pend_del;     /* removed while rebuilding */
    int64_t ndel, capdel;
};

#define STORE_TOUCH_SLOTS 16384 /* a power of two; at most half are used */
#define STORE_USAGE_SLOTS 32

enum op_kind {
    OP_PUT,
    OP_TOUCH,
    OP_DELETE,
    OP_FLUSH,
    OP_USAGE,
    OP_PROMPT_TOKENS,
    OP_RESPONSE,
    OP_LIMITS,
    OP_LIST /* read after its batch, outside the transaction */
};

struct op {
    struct op *next;
    enum op_kind kind;
    store_done_fn done;
    void *arg;
    int64_t tenant, id;
    /* OP_TOUCH: the latest hit's time (ms); OP_PROMPT_TOKENS: the count; OP_LIMITS: a TTL
     * (ms) the tenant's entries are held to from their creation, 0: none */
    int64_t value;
    int64_t hits;  /* OP_TOUCH: hits merged into this touch */
    /* OP_PUT: the entry, with its strings and embedding in one allocation after it */
    struct store_entry e;
    struct store_usage u;
    /* OP_RESPONSE: id, body and messages in the allocation after it; value: expires_ms */
    const char *rid, *rbody, *rmsgs;
    struct store_list *list; /* OP_LIST */
    int tries; /* OP_USAGE: batches it was rolled back with */
};

struct store {
    struct store_options opt;
    char *dir;
    char db_path[4096];
    int lock_fd;
    int dir_fd; /* the data directory, locked too: the lock file may be deleted */
    sqlite3 *wdb; /* writer thread (and open/close) */
    sqlite3 *adb; /* tenant and key administration, under admin_mu */
    unsigned char entry_key[STORE_ENTRY_KEY_BYTES]; /* settings' entry_id_key */
    pthread_mutex_t admin_mu;
    /* tenant slots */
    pthread_mutex_t slots_mu;
    struct slot **slots;
    int nslots, capslots;
    /* writer queue */
    pthread_mutex_t q_mu;
    pthread_cond_t q_cond, sync_cond;
    struct op *q_head, *q_tail;
    int q_urgent; /* queued operations other than touches: they wake the writer */
    /* Queued touches by entry id (open addressing, NULL: free) and queued usage rows:
     * another hit on the same entry, or usage of the same tenant and day, is added to
     * the queued operation instead of queueing one more (a hot entry then costs one
     * UPDATE a batch, not one a hit). Emptied when the writer takes the queue. */
    struct op *q_touch[STORE_TOUCH_SLOTS];
    int q_ntouch;
    struct op *q_usage[STORE_USAGE_SLOTS];
    int q_nusage;
    int64_t last_sweep_ms; /* writer thread: the last expiry sweep */
    int64_t retry_told_ms; /* writer thread: when a batch of usage rows written again alone
                            * was last told to fail (once a minute while the cause lasts) */
    /* writer thread: tenants' stored response bytes as last counted (a cache, refreshed
     * every few seconds and dropped when rows go other ways: the sweep, a rollback) */
    struct resp_total {
        int64_t tenant, bytes, at_ms;
    } *rtot;
    size_t nrtot, caprtot;
    /* writer thread: touches taken from the queue and not yet written, by entry id (open
     * addressing, id 0: free; wt_cap a power of two), and when they were last written */
    struct wtouch {
        int64_t id, last_ms, hits;
    } *wt;
    size_t wt_n, wt_cap;
    int64_t wt_written_ms;
    int closing;
    uint64_t sync_done; /* batches committed (q_mu) */
    pthread_t writer;
    int writer_running;
    /* writer's prepared statements */
    sqlite3_stmt *st_find_exact, *st_insert, *st_delete_id, *st_touch, *st_usage,
        *st_lru, *st_expired, *st_tenant_ids, *st_prompt_tokens, *st_resp_put, *st_resp_expired,
        *st_resp_bytes, *st_resp_oldest, *st_resp_delete, *st_shorten;
};

int store_db_open(const char *path, int readonly, sqlite3 **out);
/* The same, saying why it failed in why. */
int store_db_open_why(const char *path, int readonly, sqlite3 **out, char *why, size_t whylen);

/* What a select of cache entries reads, and store_read_hit() fills a struct store_hit
 * from (owned strings; STORE_ENOMEM). */
#define STORE_HIT_COLUMNS                                                                      \
    "id, tenant, partition, model, query, answer, finish_reason, prompt_tokens, "             \
    "completion_tokens, created_ms, last_hit_ms, expires_ms, hit_count"
int store_read_hit(sqlite3_stmt *st, struct store_hit *h);
/* store_entry_list()'s select, on db. */
int store_list_run(sqlite3 *db, struct store_list *q);
struct slot *store_slot(store *s, int64_t tenant, int create);
enum sidx_kind store_wanted_kind(store *s, int64_t entries, enum sidx_kind now);
/* progress (may be NULL) is told why (see store_progress_fn). */
int store_build_index(sqlite3 *db, int dim, int64_t tenant, int64_t upto, enum sidx_kind kind,
                      store_progress_fn progress, void *parg, const char *why, int64_t total,
                      sidx **out);

/* writer.c */
int store_writer_prepare(store *s);
void store_writer_finalize(store *s);
void *store_writer_main(void *arg);

#endif
