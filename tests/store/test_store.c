/* store: entries, exact and vector lookups, TTL, LRU capacity, index files and rebuilds,
 * HNSW conversion, tenants and keys. Each test works in a fresh temporary directory. */
#include "store.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DIM 16

static char dir[256];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/cachegate-store-XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[300];
    umount2(dir, MNT_DETACH); /* where a test mounted a filesystem of its own there */
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(store, .init = setup, .fini = teardown, .timeout = 60);

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A unit vector that mostly points along axis a (a distinct direction per a). */
static void vec_for(int a, float *v)
{
    float n = 0;
    for (int i = 0; i < DIM; i++) {
        v[i] = (i == a % DIM ? 4.0f : 0.0f) + (float)((a * 31 + i * 17) % 7) * 0.05f;
        n += v[i] * v[i];
    }
    for (int i = 0; i < DIM; i++)
        v[i] /= sqrtf(n);
}

static char rebuilt_why[320]; /* the last rebuild's reason */

static void progress(void *arg, int64_t t, int64_t d, int64_t n, const char *why)
{
    (void)t, (void)d, (void)n;
    *(int *)arg |= why ? 1 : 2; /* 1: rebuilt from the database, 2: loaded from its file */
    if (why)
        snprintf(rebuilt_why, sizeof rebuilt_why, "%s", why);
}

static store *open_store(int64_t max_entries, int64_t hnsw, int *rebuilt)
{
    struct store_options o = {.dir = dir, .dim = DIM, .max_entries = max_entries,
                              .hnsw_min_entries = hnsw};
    char err[512];
    store *s = NULL;
    int rc = store_open(&o, rebuilt ? progress : NULL, rebuilt, &s, err, sizeof err);
    cr_assert_eq(rc, STORE_OK, "store_open: %s", err);
    return s;
}

/* runs sql on the closed store's database */
static void db_exec(const char *sql)
{
    char path[300];
    snprintf(path, sizeof path, "%s/cachegate.db", dir);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_close(h);
}

static void put_cb(store *s, int64_t tenant, uint64_t exact, int a, const char *answer,
                   int64_t expires, store_done_fn done, void *arg)
{
    float v[DIM];
    vec_for(a, v);
    char q[32];
    snprintf(q, sizeof q, "question %d", a);
    struct store_entry e = {.tenant = tenant, .partition = 7, .exact = exact, .model = "m",
                            .query = q, .query_len = strlen(q), .embedding = v,
                            .answer = answer, .answer_len = strlen(answer),
                            .finish_reason = "stop", .prompt_tokens = 3,
                            .completion_tokens = 5, .created_ms = now_ms(),
                            .expires_ms = expires};
    cr_assert_eq(store_put(s, &e, done, arg), STORE_OK);
}

static void put(store *s, int64_t tenant, uint64_t exact, int a, const char *answer,
                int64_t expires)
{
    put_cb(s, tenant, exact, a, answer, expires, NULL, NULL);
}

/* a put's outcome as its callback gave it */
struct written {
    int rc;
    int64_t id;
};

static void on_written(void *arg, int rc, int64_t id)
{
    struct written *w = arg;
    w->rc = rc;
    w->id = id;
}

static int has_exact(store *s, int64_t tenant, uint64_t exact, char *answer, size_t len)
{
    store_reader *r;
    cr_assert_eq(store_reader_open(s, &r), STORE_OK);
    struct store_hit h;
    int rc = store_get_exact(r, tenant, exact, now_ms(), &h);
    if (rc == STORE_OK && answer)
        snprintf(answer, len, "%s", h.answer);
    if (rc == STORE_OK)
        store_hit_deinit(&h);
    store_reader_close(r);
    return rc == STORE_OK;
}

/* The ids the nearest search finds for direction a, best first. */
static int nearest(store *s, int64_t tenant, int a, char *answer, size_t len, float *sim)
{
    store_reader *r;
    cr_assert_eq(store_reader_open(s, &r), STORE_OK);
    float v[DIM];
    vec_for(a, v);
    struct store_hit h[4];
    int n = 0;
    cr_assert_eq(store_search(r, tenant, v, 4, now_ms(), h, &n), STORE_OK);
    if (n && answer)
        snprintf(answer, len, "%s", h[0].answer);
    if (n && sim)
        *sim = h[0].similarity;
    for (int i = 0; i < n; i++)
        store_hit_deinit(&h[i]);
    store_reader_close(r);
    return n;
}

Test(store, put_then_exact_and_vector_lookups)
{
    store *s = open_store(0, 0, NULL);
    put(s, 1, 100, 1, "one", 0);
    put(s, 1, 200, 2, "two", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    char a[64];
    cr_assert(has_exact(s, 1, 100, a, sizeof a));
    cr_assert_str_eq(a, "one");
    cr_assert(!has_exact(s, 2, 100, NULL, 0), "another tenant must not see the entry");
    float sim = 0;
    cr_assert_gt(nearest(s, 1, 2, a, sizeof a, &sim), 0);
    cr_assert_str_eq(a, "two");
    cr_assert_float_eq(sim, 1.0f, 1e-4);
    cr_assert_eq(nearest(s, 2, 2, NULL, 0, NULL), 0, "tenant 2 has no index entries");
    /* the same exact key replaces the entry */
    put(s, 1, 100, 1, "one, again", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(has_exact(s, 1, 100, a, sizeof a));
    cr_assert_str_eq(a, "one, again");
    struct store_tenant_stats st[4];
    cr_assert_eq(store_stats(s, st, 4), 1);
    cr_assert_eq(store_stats(s, NULL, 0), 1, "how many tenants, whatever fits");
    cr_assert_eq(st[0].entries, 2);
    store_close(s);
}

/* A completion's prompt is found by its exact key only: stored without an embedding, it
 * is in no index, counts no vector's bytes, and the index file still matches at open. */
Test(store, entries_without_an_embedding_are_found_by_exact_key_only)
{
    store *s = open_store(0, 0, NULL);
    put(s, 1, 100, 1, "one", 0);
    const char *q = "Once upon a time";
    struct store_entry e = {.tenant = 1, .partition = 8, .exact = 200, .model = "m", .query = q,
                            .query_len = strlen(q), .answer = "two", .answer_len = 3,
                            .finish_reason = "stop", .completion_tokens = 1,
                            .created_ms = now_ms()};
    struct written w = {-1, -1};
    cr_assert_eq(store_put(s, &e, on_written, &w), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_eq(w.rc, STORE_OK);
    cr_assert_gt(w.id, 0);
    char a[64];
    cr_assert(has_exact(s, 1, 200, a, sizeof a));
    cr_assert_str_eq(a, "two");
    cr_assert_eq(nearest(s, 1, 2, a, sizeof a, NULL), 1, "only the embedded entry is indexed");
    cr_assert_str_eq(a, "one");
    struct store_tenant_stats st[1];
    cr_assert_eq(store_stats(s, st, 1), 1);
    cr_assert_eq(st[0].entries, 2);
    cr_assert_eq(st[0].bytes, (int64_t)(strlen("question 1") + 3 + sizeof(float) * DIM) +
                                  (int64_t)(strlen(q) + 3));
    store_close(s);
    int how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(how, 2, "the index file matches the embedded entries: loaded, not rebuilt");
    cr_assert(has_exact(s, 1, 200, NULL, 0));
    cr_assert_eq(nearest(s, 1, 2, NULL, 0, NULL), 1);
    /* removed like any other entry */
    cr_assert_eq(store_delete(s, 1, w.id, NULL, NULL), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(!has_exact(s, 1, 200, NULL, 0));
    cr_assert_eq(nearest(s, 1, 2, NULL, 0, NULL), 1);
    store_close(s);
    char path[300];
    snprintf(path, sizeof path, "%s/index/1.faiss", dir);
    cr_assert_eq(unlink(path), 0);
    how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(how, 1);
    cr_assert_eq(nearest(s, 1, 2, NULL, 0, NULL), 1);
    store_close(s);
}

Test(store, expired_entries_are_never_served_and_are_swept)
{
    store *s = open_store(0, 0, NULL);
    put(s, 1, 1, 1, "stale", now_ms() - 1);
    put(s, 1, 2, 2, "fresh", now_ms() + 3600 * 1000);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(!has_exact(s, 1, 1, NULL, 0));
    char a[64];
    cr_assert_eq(nearest(s, 1, 1, a, sizeof a, NULL), 1, "only the live entry is returned");
    cr_assert_str_eq(a, "fresh");
    /* the writer sweeps expired rows about once a second */
    struct store_tenant_stats st[1];
    for (int i = 0; i < 40; i++) {
        store_flush(s, NULL, NULL);
        store_stats(s, st, 1);
        if (st[0].entries == 1)
            break;
        usleep(100 * 1000);
    }
    cr_assert_eq(st[0].entries, 1);
    cr_assert_eq(st[0].expired, 1);
    store_close(s);
}

Test(store, capacity_evicts_the_least_recently_hit)
{
    store *s = open_store(3, 0, NULL);
    for (int i = 0; i < 3; i++)
        put(s, 1, 10 + (uint64_t)i, i, "a", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    /* entry 10 was hit last: entry 11 is now the least recently hit */
    store_reader *r;
    cr_assert_eq(store_reader_open(s, &r), STORE_OK);
    struct store_hit h;
    cr_assert_eq(store_get_exact(r, 1, 10, now_ms(), &h), STORE_OK);
    store_touch(s, h.id, now_ms() + 1000);
    store_hit_deinit(&h);
    store_reader_close(r);
    put(s, 1, 13, 3, "d", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(has_exact(s, 1, 10, NULL, 0), "the recently hit entry stays");
    cr_assert(!has_exact(s, 1, 11, NULL, 0), "the least recently hit entry is evicted");
    cr_assert(has_exact(s, 1, 13, NULL, 0));
    struct store_tenant_stats st[1];
    store_stats(s, st, 1);
    cr_assert_eq(st[0].entries, 3);
    cr_assert_eq(st[0].evicted_lru, 1);
    cr_assert_eq(nearest(s, 1, 1, NULL, 0, NULL), 3, "the index follows the eviction");
    store_close(s);
}

/* Limits lowered hold the entries already stored at once: the capacity without waiting for
 * the tenant's next write, a TTL from each entry's creation (a later expiry, or none, is
 * brought to it), the other tenants' entries untouched. */
/* st[0]: tenant 1's figures, st[1]: tenant 2's */
static void stats_of(store *s, struct store_tenant_stats st[2])
{
    struct store_tenant_stats all[8];
    int n = store_stats(s, all, 8);
    cr_assert(n <= 8);
    memset(st, 0, sizeof *st * 2);
    for (int i = 0; i < n; i++)
        if (all[i].tenant == 1 || all[i].tenant == 2)
            st[all[i].tenant - 1] = all[i];
}

Test(store, lowered_limits_hold_the_entries_already_stored)
{
    store *s = open_store(0, 0, NULL);
    int64_t other;
    cr_assert_eq(store_tenant_create(s, "other-tenant", &other), STORE_OK);
    cr_assert_eq(other, 2);
    for (int i = 0; i < 6; i++)
        put(s, 1, 20 + (uint64_t)i, i, "a", i % 2 ? 0 : now_ms() + 3600 * 1000);
    put(s, 2, 20, 0, "b", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    struct store_tenant_stats st[2];
    stats_of(s, st);
    cr_assert_eq(st[0].entries, 6);
    store_set_limits(s, 1, 4, 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    stats_of(s, st);
    cr_assert_eq(st[0].entries, 4);
    cr_assert_eq(st[0].evicted_lru, 2);
    cr_assert(!has_exact(s, 1, 20, NULL, 0) && has_exact(s, 1, 25, NULL, 0));
    /* a TTL none has outlived yet: nothing goes */
    cr_assert_eq(store_apply_limits(s, 1, 3600 * 1000), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    stats_of(s, st);
    cr_assert_eq(st[0].entries, 4);
    usleep(30 * 1000);
    cr_assert_eq(store_apply_limits(s, 1, 10), STORE_OK); /* 10 ms: every one is past it */
    cr_assert_eq(store_sync(s), STORE_OK);
    stats_of(s, st);
    cr_assert_eq(st[0].entries, 0);
    cr_assert_eq(st[0].expired, 4);
    cr_assert(!has_exact(s, 1, 25, NULL, 0));
    cr_assert_eq(st[1].entries, 1, "another tenant's entries stay");
    cr_assert(has_exact(s, 2, 20, NULL, 0));
    store_close(s);
}

Test(store, index_is_loaded_from_its_file_or_rebuilt_from_the_database)
{
    store *s = open_store(0, 0, NULL);
    for (int i = 0; i < 20; i++)
        put(s, 1, (uint64_t)i, i, i == 5 ? "five" : "x", 0);
    store_close(s);
    int how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(how, 2, "an index file matching the database is loaded");
    store_close(s);

    /* a stale file (the database moved on without it) is not trusted */
    char db[300], sql[] = "DELETE FROM entries WHERE exact = 3";
    snprintf(db, sizeof db, "%s/cachegate.db", dir);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(how, 1, "a mismatching index file is rebuilt from the database");
    cr_assert(strstr(rebuilt_why, "holds 20 live ids, the database 19"), "%s", rebuilt_why);
    char a[64];
    cr_assert_gt(nearest(s, 1, 5, a, sizeof a, NULL), 0);
    cr_assert_str_eq(a, "five");
    cr_assert(!has_exact(s, 1, 3, NULL, 0));
    store_close(s);

    /* a missing or garbage file: rebuilt as well */
    char path[300];
    snprintf(path, sizeof path, "%s/index/1.faiss", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("garbage", f);
    fclose(f);
    how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(how, 1);
    cr_assert(strstr(rebuilt_why, "not an index file"), "%s", rebuilt_why);
    cr_assert_gt(nearest(s, 1, 5, a, sizeof a, NULL), 0);
    cr_assert_str_eq(a, "five");
    store_close(s);
    cr_assert_eq(unlink(path), 0);
    how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(how, 1);
    cr_assert(strstr(rebuilt_why, "no index file"), "%s", rebuilt_why);
    store_close(s);
    how = 0; /* hnsw_min_entries lowered past the tenant's 19 */
    s = open_store(0, 10, &how);
    cr_assert_eq(how, 1);
    cr_assert(strstr(rebuilt_why, "is flat, expected HNSW"), "%s", rebuilt_why);
    store_close(s);
}

Test(store, a_large_tenant_moves_to_hnsw_in_the_background)
{
    store *s = open_store(0, 100, NULL);
    for (int i = 0; i < 150; i++)
        put(s, 1, (uint64_t)i, i, i == 7 ? "seven" : "x", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    struct store_tenant_stats st[1];
    for (int i = 0; i < 100; i++) {
        store_sync(s);
        store_stats(s, st, 1);
        if (st[0].hnsw)
            break;
        usleep(50 * 1000);
    }
    cr_assert(st[0].hnsw, "150 entries over hnsw_min_entries 100: the index is HNSW");
    float sim = 0;
    char a[64];
    cr_assert_gt(nearest(s, 1, 7, a, sizeof a, &sim), 0);
    cr_assert_float_eq(sim, 1.0f, 1e-4);
    /* removals become tombstones that searches skip */
    store_delete(s, 1, -1, NULL, NULL);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_eq(nearest(s, 1, 7, NULL, 0, NULL), 0);
    store_close(s);
}

Test(store, the_directory_is_locked_by_one_process)
{
    char err[512];
    cr_assert_eq(store_in_use(dir, err, sizeof err), STORE_OK, "no owner yet");
    store *s = open_store(0, 0, NULL);
    struct store_options o = {.dir = dir, .dim = DIM};
    store *t = NULL;
    cr_assert_eq(store_open(&o, NULL, NULL, &t, err, sizeof err), STORE_EBUSY);
    cr_assert(strstr(err, "in use"), "%s", err);
    /* what a server asks before it loads its models */
    cr_assert_eq(store_in_use(dir, err, sizeof err), STORE_EBUSY);
    cr_assert(strstr(err, "in use by another cachegate process"), "%s", err);
    /* the directory itself is locked: a deleted lock file lets no second owner in */
    char lock[600];
    snprintf(lock, sizeof lock, "%s/cachegate.lock", dir);
    cr_assert_eq(unlink(lock), 0);
    cr_assert_eq(store_in_use(dir, err, sizeof err), STORE_EBUSY);
    cr_assert_eq(store_open(&o, NULL, NULL, &t, err, sizeof err), STORE_EBUSY);
    store_close(s);
    cr_assert_eq(store_in_use(dir, err, sizeof err), STORE_OK, "the lock goes with its owner");
}

/* A tenant's live entries, newest first, in pages, filtered by the question's words. */
Test(store, entries_are_listed_newest_first)
{
    store *s = open_store(0, 0, NULL);
    for (int a = 1; a <= 5; a++)
        put(s, 1, (uint64_t)a, a, "answer", a == 3 ? now_ms() - 1 : 0);
    put(s, 2, 9, 9, "another tenant's", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    struct store_list q = {.tenant = 1, .now_ms = now_ms(), .limit = 10};
    cr_assert_eq(store_entry_list(s, &q), STORE_OK);
    struct store_hit *h = q.out;
    int n = q.n;
    cr_assert_eq(n, 4, "the expired entry and the other tenant's are not listed");
    const char *want[] = {"question 5", "question 4", "question 2", "question 1"};
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(h[i].query, want[i]);
    int64_t second = h[1].id;
    for (int i = 0; i < n; i++)
        store_hit_deinit(&h[i]);
    free(h);
    q = (struct store_list){.tenant = 1, .before = second, .now_ms = now_ms(), .limit = 1};
    cr_assert_eq(store_entry_list(s, &q), STORE_OK);
    h = q.out;
    cr_assert_eq(q.n, 1);
    cr_assert_str_eq(h[0].query, "question 2", "the page after the entry named");
    store_hit_deinit(&h[0]);
    free(h);
    q = (struct store_list){.tenant = 1, .contains = "QUESTION 4", .now_ms = now_ms(),
                            .limit = 10};
    cr_assert_eq(store_entry_list(s, &q), STORE_OK);
    h = q.out;
    cr_assert_eq(q.n, 1);
    cr_assert_str_eq(h[0].query, "question 4");
    store_hit_deinit(&h[0]);
    free(h);
    store_close(s);
}

struct list_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int done, rc;
    int64_t n;
};

static void list_done(void *arg, int rc, int64_t n)
{
    struct list_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    w->rc = rc;
    w->n = n;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

/* The listing a server's loop asks for: read on the writer thread, what is committed. */
Test(store, entries_are_listed_on_the_writer_thread)
{
    store *s = open_store(0, 0, NULL);
    for (int a = 1; a <= 3; a++)
        put(s, 1, (uint64_t)a, a, "answer", 0);
    struct store_list q = {.tenant = 1, .contains = "tion 2", .now_ms = now_ms(), .limit = 10};
    struct list_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    cr_assert_eq(store_entry_list_queue(s, &q, list_done, &w), STORE_OK);
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cond, &w.mu);
    pthread_mutex_unlock(&w.mu);
    cr_assert_eq(w.rc, STORE_OK);
    cr_assert_eq(w.n, 1);
    cr_assert_eq(q.n, 1, "the puts queued before it are committed when it reads");
    cr_assert_str_eq(q.out[0].query, "question 2");
    store_hit_deinit(&q.out[0]);
    free(q.out);
    store_close(s);
}

Test(store, tenants_and_keys)
{
    store *s = open_store(0, 0, NULL);
    int64_t id;
    cr_assert_eq(store_tenant_create(s, "acme", &id), STORE_OK);
    cr_assert_eq(store_tenant_create(s, "acme", NULL), STORE_EEXIST);
    cr_assert_eq(store_tenant_create(s, "bad name", NULL), STORE_EINVAL);
    uint8_t h[32] = {1, 2, 3};
    cr_assert_eq(store_key_add(s, id, "cg-abc", h), STORE_OK);
    int64_t t = 0;
    cr_assert_eq(store_key_lookup(s, h, &t), STORE_OK);
    cr_assert_eq(t, id);
    cr_assert_eq(store_key_revoke(s, "cg-abc"), STORE_OK);
    cr_assert_eq(store_key_lookup(s, h, &t), STORE_ENOTFOUND);
    put(s, id, 1, 1, "a", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_eq(store_tenant_delete(s, "acme"), STORE_OK);
    cr_assert(!has_exact(s, id, 1, NULL, 0), "a deleted tenant's entries are gone");
    struct store_tenant *list;
    int n;
    cr_assert_eq(store_tenant_list(s, &list, &n), STORE_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(list[0].name, "default");
    store_tenant_deinit(&list[0]);
    free(list);
    store_close(s);
}

Test(store, hits_and_usage_queued_together_add_up)
{
    store *s = open_store(0, 0, NULL);
    put(s, 1, 20, 0, "a", 0);
    put(s, 1, 21, 1, "b", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    store_reader *r;
    cr_assert_eq(store_reader_open(s, &r), STORE_OK);
    struct store_hit a, b;
    cr_assert_eq(store_get_exact(r, 1, 20, now_ms(), &a), STORE_OK);
    cr_assert_eq(store_get_exact(r, 1, 21, now_ms(), &b), STORE_OK);
    int64_t t0 = now_ms();
    /* many hits on a while the writer sleeps: merged into one queued touch, none lost;
     * the latest time wins whatever the order */
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(store_touch(s, a.id, t0 + (i == 500 ? 9000 : i)), STORE_OK);
    cr_assert_eq(store_touch(s, b.id, t0 + 5), STORE_OK);
    struct store_usage u = {.tenant = 1, .day = "2026-01-02", .requests = 1,
                            .prompt_tokens = 10, .exact_hits = 1, .tokens_saved = 5};
    for (int i = 0; i < 300; i++)
        cr_assert_eq(store_usage_add(s, &u), STORE_OK);
    struct store_usage other = u;
    snprintf(other.day, sizeof other.day, "2026-01-03");
    cr_assert_eq(store_usage_add(s, &other), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    store_hit_deinit(&a);
    store_hit_deinit(&b);
    cr_assert_eq(store_get_exact(r, 1, 20, now_ms(), &a), STORE_OK);
    cr_assert_eq(store_get_exact(r, 1, 21, now_ms(), &b), STORE_OK);
    cr_assert_eq(a.hit_count, 1000);
    cr_assert_eq(a.last_hit_ms, t0 + 9000);
    cr_assert_eq(b.hit_count, 1);
    store_hit_deinit(&a);
    store_hit_deinit(&b);
    store_reader_close(r);
    struct store_usage *rows = NULL;
    int n = 0;
    cr_assert_eq(store_usage_list(s, 1, "2026-01-01", &rows, &n), STORE_OK);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(rows[0].day, "2026-01-02");
    cr_assert_eq(rows[0].requests, 300);
    cr_assert_eq(rows[0].prompt_tokens, 3000);
    cr_assert_eq(rows[0].exact_hits, 300);
    cr_assert_eq(rows[0].tokens_saved, 1500);
    cr_assert_eq(rows[1].requests, 1);
    free(rows);
    /* usage queued for a tenant that is gone by the time it is written (another process
     * deleted it) gets no row back */
    int64_t gone;
    cr_assert_eq(store_tenant_create(s, "brief", &gone), STORE_OK);
    cr_assert_eq(store_tenant_delete(s, "brief"), STORE_OK);
    u.tenant = gone;
    cr_assert_eq(store_usage_add(s, &u), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    rows = NULL;
    cr_assert_eq(store_usage_list(s, gone, NULL, &rows, &n), STORE_OK);
    cr_assert_eq(n, 0);
    free(rows);
    store_close(s);
}

/* A tenant's generation moves when one of its entries goes (deleted, replaced by a put
 * with the same exact hash, evicted, expired), before the deletion's callback runs, and
 * only then: not for new entries, hits, or another tenant's removals. */
static void note_generation(void *arg, int rc, int64_t id)
{
    (void)rc, (void)id;
    struct {
        store *s;
        uint64_t seen;
    } *a = arg;
    a->seen = store_generation(a->s, 2);
}

Test(store, generations_move_with_removals_per_tenant)
{
    store *s = open_store(3, 0, NULL);
    int64_t two;
    cr_assert_eq(store_tenant_create(s, "two", &two), STORE_OK);
    cr_assert_eq(two, 2, "after default");
    put(s, 1, 10, 0, "a", 0);
    put(s, 2, 20, 1, "b", 0);
    put(s, 2, 21, 2, "c", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    uint64_t g1 = store_generation(s, 1), g2 = store_generation(s, 2);
    put(s, 1, 11, 3, "new", 0); /* a new entry and a hit: nothing went */
    store_touch(s, 1, now_ms());
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_eq(store_generation(s, 1), g1);
    put(s, 1, 10, 0, "replaced", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_neq(store_generation(s, 1), g1, "a replacement removes the old entry");
    cr_assert_eq(store_generation(s, 2), g2, "another tenant's removal");
    g1 = store_generation(s, 1);
    struct {
        store *s;
        uint64_t seen;
    } arg = {s, g2};
    cr_assert_eq(store_delete(s, 2, -1, note_generation, &arg), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_neq(arg.seen, g2, "the generation moved before the delete's callback");
    cr_assert_eq(store_generation(s, 1), g1);
    g1 = store_generation(s, 1);
    put(s, 1, 12, 4, "d", 0);
    put(s, 1, 13, 5, "e", 0); /* over capacity (3): the least recently hit goes */
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert_neq(store_generation(s, 1), g1, "an eviction");
    cr_assert_eq(store_generation(s, 99), 0, "a tenant never seen");
    store_close(s);
}

/* an answer still on its way to the writer when its tenant is deleted is not written: no
 * row nor index entry outlives the tenant, and its index file goes at close */
Test(store, answers_for_a_deleted_tenant_are_not_written)
{
    store *s = open_store(0, 0, NULL);
    int64_t id;
    struct written kept = {-1, -1}, late = {-1, -1};
    cr_assert_eq(store_tenant_create(s, "brief", &id), STORE_OK);
    put_cb(s, id, 1, 1, "kept", 0, on_written, &kept);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(has_exact(s, id, 1, NULL, 0));
    cr_assert(kept.rc == STORE_OK && kept.id > 0, "written: id %lld", (long long)kept.id);
    cr_assert_eq(store_tenant_delete(s, "brief"), STORE_OK);
    put_cb(s, id, 2, 2, "late", 0, on_written, &late);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(!has_exact(s, id, 2, NULL, 0));
    /* the callback says so: no id (the cache counts it as dropped) */
    cr_assert(late.rc == STORE_OK && late.id == 0, "dropped: id %lld", (long long)late.id);
    cr_assert_eq(nearest(s, id, 2, NULL, 0, NULL), 0);
    struct store_tenant_stats st[4];
    int n = store_stats(s, st, 4);
    for (int i = 0; i < n; i++)
        if (st[i].tenant == id)
            cr_assert_eq(st[i].entries, 0);
    store_close(s);
    char path[600];
    snprintf(path, sizeof path, "%s/index/%lld.faiss", dir, (long long)id);
    cr_assert_eq(access(path, F_OK), -1, "%s is left", path);
}

/* a damaged database is a clear error at open, not a store that starts empty (its read of
 * the entries used to stop at the bad page as if the table ended there) */
Test(store, a_damaged_database_is_an_error_at_open)
{
    store *s = open_store(0, 0, NULL);
    char answer[400];
    memset(answer, 'x', sizeof answer - 1);
    answer[sizeof answer - 1] = 0;
    for (int i = 0; i < 600; i++)
        put(s, 1, (uint64_t)i + 1, i, answer, 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    store_close(s);
    char path[600];
    snprintf(path, sizeof path, "%s/cachegate.db", dir);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    cr_assert_gt(size, 200000, "%ld bytes", size);
    static char zeros[50000];
    fseek(f, size / 2, SEEK_SET);
    cr_assert_eq(fwrite(zeros, 1, sizeof zeros, f), sizeof zeros);
    fclose(f);
    struct store_options o = {.dir = dir, .dim = DIM};
    char err[512] = "";
    s = NULL;
    int rc = store_open(&o, NULL, NULL, &s, err, sizeof err);
    cr_assert_neq(rc, STORE_OK, "opened a damaged database");
    cr_assert(strstr(err, "damaged") || strstr(err, "malformed"), "%s", err);
    store_close(s);
}

/* A newer release's database, and another program's, are errors at open that say so: before,
 * the first opened without a word, and the second got cachegate's tables added to it. */
Test(store, a_newer_or_foreign_database_is_an_error_at_open)
{
    store *s = open_store(0, 0, NULL);
    store_close(s);
    char path[600], err[512] = "";
    snprintf(path, sizeof path, "%s/cachegate.db", dir);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "INSERT INTO schema_version VALUES (99, 0)", NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    struct store_options o = {.dir = dir, .dim = DIM};
    s = NULL;
    cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_EIO);
    cr_assert(strstr(err, "newer cachegate (schema 99"), "%s", err);
    cr_assert_null(s);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "CREATE TABLE notes (body TEXT)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_EIO);
    cr_assert(strstr(err, "not cachegate's"), "%s", err);
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(st, 0), 1, "nothing was added to it");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Overwrites the first page of a table (its root) with bytes that are no page. */
static void damage_table(const char *table)
{
    char path[600];
    snprintf(path, sizeof path, "%s/cachegate.db", dir);
    sqlite3 *db;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = ?1", -1,
                                    &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    long root = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    long page = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    static char junk[65536];
    memset(junk, 0xa5, sizeof junk);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, (root - 1) * page, SEEK_SET);
    cr_assert_eq(fwrite(junk, 1, (size_t)page, f), (size_t)page);
    fclose(f);
}

/* A damaged page in any table stops the open, naming the table: the server would otherwise
 * run without its keys (every client refused), its usage (quotas given back) or its stored
 * responses, and say nothing. */
Test(store, a_damaged_table_of_any_kind_is_an_error_at_open)
{
    static const char *const tables[] = {"tenants", "api_keys", "usage_daily", "responses"};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        store *s = open_store(0, 0, NULL);
        int64_t id;
        char name[16];
        snprintf(name, sizeof name, "team%zu", i);
        cr_assert_eq(store_tenant_create(s, name, &id), STORE_OK);
        uint8_t h[32] = {(uint8_t)i};
        cr_assert_eq(store_key_add(s, id, "cg-abc", h), STORE_OK);
        struct store_usage u = {.tenant = id, .day = "2026-11-30", .requests = 1};
        cr_assert_eq(store_usage_add(s, &u), STORE_OK);
        cr_assert_eq(store_response_put(s, id, name, "{}", "[]", 0, NULL, NULL), STORE_OK);
        cr_assert_eq(store_sync(s), STORE_OK);
        store_close(s);
        damage_table(tables[i]);
        for (int admin = 0; admin < 2; admin++) {
            struct store_options o = {.dir = dir, .dim = DIM, .admin_only = admin};
            char err[512] = "";
            s = NULL;
            int rc = store_open(&o, NULL, NULL, &s, err, sizeof err);
            cr_assert_neq(rc, STORE_OK, "opened a database whose %s is damaged", tables[i]);
            cr_assert(strstr(err, "damaged") && strstr(err, tables[i]), "%s", err);
            store_close(s);
        }
        char path[600];
        snprintf(path, sizeof path, "rm -rf '%s'/*", dir);
        cr_assert_eq(system(path), 0);
    }
}

static void note_error(void *arg, const char *what)
{
    snprintf(arg, 256, "%s", what);
}

/* a write that fails in the writer thread (a full disk, here a trigger that refuses) is
 * told to the owner, who logs it: the callers of store_put() see nothing */
/* A store whose failures are told into told[256]. */
static store *open_telling(char *told)
{
    struct store_options o = {.dir = dir, .dim = DIM, .on_error = note_error,
                              .on_error_arg = told};
    char err[512];
    store *s = NULL;
    cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_OK, "%s", err);
    return s;
}

/* A connection to the store's database on which a trigger refuses every insert into
 * table, as a full disk would (DROP TRIGGER refuse lifts it). */
static sqlite3 *refuse_inserts(const char *table)
{
    char path[600], sql[200];
    snprintf(path, sizeof path, "%s/cachegate.db", dir);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000); /* (the writer may be writing meanwhile) */
    snprintf(sql, sizeof sql, "CREATE TRIGGER refuse BEFORE INSERT ON %s BEGIN "
             "SELECT RAISE(ABORT, 'no space left (test)'); END", table);
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    return db;
}

Test(store, a_failed_batch_is_told)
{
    char told[256] = "";
    store *s = open_telling(told);
    sqlite3_close(refuse_inserts("entries"));
    put(s, 1, 1, 1, "lost", 0);
    store_sync(s); /* fails too when it ran in the put's batch */
    cr_assert(strstr(told, "rolled back") && strstr(told, "no space left (test)"), "%s", told);
    cr_assert(strstr(told, "(1 answers, 0 usage figures"), "what it held: %s", told);
    cr_assert(!has_exact(s, 1, 1, NULL, 0));
    store_close(s);
}

/* Usage figures in a batch that was rolled back (a full disk) are written again with a
 * later batch: quotas and reports count what was spent. */
Test(store, usage_in_a_failed_batch_is_written_again)
{
    char told[256] = "";
    store *s = open_telling(told);
    sqlite3 *db = refuse_inserts("usage_daily");
    struct store_usage u = {.tenant = 1, .day = "2026-01-02", .requests = 1,
                            .prompt_tokens = 10, .completion_tokens = 20};
    cr_assert_eq(store_usage_add(s, &u), STORE_OK);
    store_sync(s);
    cr_assert(strstr(told, "rolled back") && strstr(told, "written again"), "%s", told);
    u.requests = 2; /* one more request's figures, queued while the first wait */
    cr_assert_eq(store_usage_add(s, &u), STORE_OK);
    cr_assert_eq(sqlite3_exec(db, "DROP TRIGGER refuse", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    struct store_usage *rows = NULL;
    int n = 0;
    for (int tries = 0; tries < 50 && n == 0; tries++) { /* (the writer wakes each second) */
        free(rows);
        rows = NULL;
        cr_assert_eq(store_sync(s), STORE_OK);
        cr_assert_eq(store_usage_list(s, 1, NULL, &rows, &n), STORE_OK);
        if (n == 0)
            usleep(100000);
    }
    cr_assert_eq(n, 1);
    cr_assert_eq(rows[0].requests, 3);
    cr_assert_eq(rows[0].prompt_tokens, 20);
    cr_assert_eq(rows[0].completion_tokens, 40);
    free(rows);
    store_close(s);
}

/* A data directory on a read-only filesystem is said as such, to the server and the CLI,
 * not as SQLite's "unable to open database file". */
Test(store, a_read_only_data_directory_is_said_as_such)
{
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("tmpfs", dir, "tmpfs", 0, "size=4m"))
        cr_skip_test("no filesystem can be mounted here: %s", strerror(errno));
    store_close(open_store(0, 0, NULL));
    if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL))
        cr_skip_test("cannot remount read-only: %s", strerror(errno));
    for (int admin = 0; admin < 2; admin++) {
        struct store_options o = {.dir = dir, .dim = DIM, .admin_only = admin};
        char err[512] = "";
        store *s = NULL;
        cr_assert_neq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_OK);
        cr_assert(strstr(err, "cannot be written: Read-only file system"), "%s", err);
        store_close(s);
    }
}

/* A full disk is said as such, by the synchronous administration (tenants, policies, keys)
 * and by the writer: the data directory on a filesystem of 384 KiB, mounted in this test's
 * own mount namespace where the system allows it. */
Test(store, a_full_disk_is_said_as_such)
{
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("tmpfs", dir, "tmpfs", 0, "size=384k"))
        cr_skip_test("no small filesystem can be mounted here: %s", strerror(errno));
    store *s = open_store(0, 0, NULL);
    int64_t first;
    cr_assert_eq(store_tenant_create(s, "first", &first), STORE_OK);
    static char policy[8000];
    memset(policy, 'x', sizeof policy - 1);
    int rc = STORE_OK, made = 0;
    for (; made < 1000 && !rc; made++) {
        char name[32];
        int64_t id;
        snprintf(name, sizeof name, "t%d", made);
        if (!(rc = store_tenant_create(s, name, &id))) rc = store_tenant_set_policy(s, id, policy);
    }
    cr_assert_eq(rc, STORE_EFULL, "after %d tenants: %d (%s)", made, rc, store_strerror(rc));
    cr_assert_str_eq(store_strerror(rc), "the disk holding the data directory is full");
    static char answer[200000];
    memset(answer, 'a', sizeof answer - 1);
    struct written w = {-1, 0};
    put_cb(s, first, 1, 1, answer, 0, on_written, &w);
    store_sync(s);
    cr_assert_eq(w.rc, STORE_EFULL, "%d (%s)", w.rc, store_strerror(w.rc));
    cr_assert(!has_exact(s, first, 1, NULL, 0));
    store_close(s);
    cr_assert_eq(umount2(dir, MNT_DETACH), 0);
}

/* an index file whose tenant has no entries (deleted by the CLI beside a server) goes at
 * the next open; the others stay */
Test(store, stray_index_files_go_at_open)
{
    store *s = open_store(0, 0, NULL);
    put(s, 1, 1, 1, "kept", 0);
    cr_assert_eq(store_sync(s), STORE_OK);
    store_close(s);
    char kept[600], stray[600];
    snprintf(kept, sizeof kept, "%s/index/1.faiss", dir);
    snprintf(stray, sizeof stray, "%s/index/77.faiss", dir);
    cr_assert_eq(access(kept, F_OK), 0);
    FILE *f = fopen(stray, "w");
    cr_assert_not_null(f);
    fputs("left by a deleted tenant", f);
    fclose(f);
    int how = 0;
    s = open_store(0, 0, &how);
    cr_assert_eq(access(stray, F_OK), -1, "%s is left", stray);
    cr_assert_eq(access(kept, F_OK), 0);
    cr_assert(has_exact(s, 1, 1, NULL, 0));
    store_close(s);
}

/* A database deleted or emptied beside the indexes it saved is an error at open, naming
 * both: opening made an empty store in its place and dropped the indexes as strays, every
 * tenant, key and answer gone without a word. Moving the indexes away starts afresh. */
Test(store, a_database_gone_from_beside_its_indexes_is_an_error_at_open)
{
    for (int emptied = 0; emptied < 2; emptied++) {
        store *s = open_store(0, 0, NULL);
        put(s, 1, 1, 1, "kept", 0);
        cr_assert_eq(store_sync(s), STORE_OK);
        store_close(s);
        char db[600], wal[600], index[600];
        snprintf(db, sizeof db, "%s/cachegate.db", dir);
        snprintf(wal, sizeof wal, "%s/cachegate.db-wal", dir);
        snprintf(index, sizeof index, "%s/index/1.faiss", dir);
        if (emptied) {
            FILE *f = fopen(db, "w");
            cr_assert_not_null(f);
            fclose(f);
        } else {
            cr_assert_eq(unlink(db), 0);
        }
        unlink(wal);
        cr_assert(!store_exists(dir), "an empty file is no database");
        struct store_options o = {.dir = dir, .dim = DIM};
        char err[1024];
        s = NULL;
        cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_EIO);
        cr_assert_null(s);
        cr_assert(strstr(err, "missing or empty") && strstr(err, "1 saved index:"), "%s", err);
        cr_assert_eq(access(index, F_OK), 0, "the index is left as it was");
        o.admin_only = 1; /* nor does the CLI make one there */
        cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_EIO);
        cr_assert_eq(unlink(index), 0);
        s = open_store(0, 0, NULL);
        cr_assert(!has_exact(s, 1, 1, NULL, 0));
        store_close(s);
    }
}

/* A stored response as store_response_get() reads it: 1 with its body, 0 when not found. */
static int response(store *s, int64_t tenant, const char *id, char *body, size_t len)
{
    store_reader *r;
    cr_assert_eq(store_reader_open(s, &r), STORE_OK);
    char *b = NULL, *m = NULL;
    int rc = store_response_get(r, tenant, id, now_ms(), &b, &m);
    store_reader_close(r);
    cr_assert(rc == STORE_OK || rc == STORE_ENOTFOUND, "rc %d", rc);
    if (rc == STORE_OK) {
        cr_assert_str_eq(m, "[{\"role\":\"user\",\"content\":\"Hi\"}]");
        if (body)
            snprintf(body, len, "%s", b);
    }
    free(b);
    free(m);
    return rc == STORE_OK;
}

static int put_response(store *s, int64_t tenant, const char *id, const char *body,
                        int64_t ttl_ms)
{
    return store_response_put(s, tenant, id, body, "[{\"role\":\"user\",\"content\":\"Hi\"}]",
                              ttl_ms, NULL, NULL);
}

Test(store, responses_are_kept_within_the_tenants_bytes_oldest_first)
{
    /* each response here is 100 bytes of body and 33 of messages: 133 */
    struct store_options o = {.dir = dir, .dim = DIM, .responses_max_bytes = 400};
    char err[512];
    store *s = NULL;
    cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_OK, "%s", err);
    int64_t acme;
    cr_assert_eq(store_tenant_create(s, "acme", &acme), STORE_OK);
    char body[101];
    memset(body, 'x', 100);
    body[100] = 0;
    for (int i = 0; i < 5; i++) { /* one a batch: created one after the other */
        char id[16];
        snprintf(id, sizeof id, "resp_%d", i);
        cr_assert_eq(put_response(s, 1, id, body, 0), STORE_OK);
        cr_assert_eq(store_sync(s), STORE_OK);
        usleep(2000);
    }
    cr_assert_eq(put_response(s, acme, "resp_acme", body, 0), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    /* 3 x 133 = 399 fit in 400: the two oldest went */
    cr_assert(!response(s, 1, "resp_0", NULL, 0));
    cr_assert(!response(s, 1, "resp_1", NULL, 0));
    for (int i = 2; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "resp_%d", i);
        cr_assert(response(s, 1, id, NULL, 0), "%s kept", id);
    }
    cr_assert(response(s, acme, "resp_acme", NULL, 0), "another tenant's are its own");
    /* queued together (one transaction, one millisecond): the order they came in still,
     * not their ids' (here in the opposite order); past the budget the oldest go until
     * the rest are within nine tenths of it */
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "resp_q%d", 9 - i);
        cr_assert_eq(put_response(s, acme, id, body, 0), STORE_OK);
    }
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(!response(s, acme, "resp_acme", NULL, 0));
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "resp_q%d", 9 - i);
        cr_assert_eq(response(s, acme, id, NULL, 0), i >= 3, "%s", id); /* within 360 */
    }
    /* one larger than the whole allowance is kept alone, the newest */
    char big[1001];
    memset(big, 'y', 1000);
    big[1000] = 0;
    cr_assert_eq(put_response(s, 1, "resp_big", big, 0), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(response(s, 1, "resp_big", NULL, 0));
    cr_assert(!response(s, 1, "resp_4", NULL, 0));
    store_close(s);
}

/* The secret of the entries' public ids: made at random with the database, the same on
 * every open, made by the migration for a database from before it; a database that lost
 * it does not open (its ids would all change), and says why. */
Test(store, the_entry_id_key_is_made_once_and_kept)
{
    unsigned char k1[STORE_ENTRY_KEY_BYTES], k2[STORE_ENTRY_KEY_BYTES], zero[sizeof k1] = {0};
    store *s = open_store(0, 0, NULL);
    memcpy(k1, store_entry_id_key(s), sizeof k1);
    store_close(s);
    cr_assert(memcmp(k1, zero, sizeof k1));
    s = open_store(0, 0, NULL);
    cr_assert(!memcmp(store_entry_id_key(s), k1, sizeof k1), "the key changed on reopening");
    store_close(s);

    /* a database of schema 4: the migration makes one, another */
    db_exec("DROP TABLE settings; DELETE FROM schema_version WHERE version >= 5");
    s = open_store(0, 0, NULL);
    memcpy(k2, store_entry_id_key(s), sizeof k2);
    store_close(s);
    cr_assert(memcmp(k2, zero, sizeof k2) && memcmp(k2, k1, sizeof k2));

    db_exec("DELETE FROM settings");
    struct store_options o = {.dir = dir, .dim = DIM};
    char err[512];
    cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_EIO);
    cr_assert(strstr(err, "settings: no entry_id_key"), "%s", err);
}

Test(store, responses_stored_before_their_sizes_go_first)
{
    /* a database of schema 2: responses without their sizes */
    store *s = open_store(0, 0, NULL);
    store_close(s);
    db_exec("DROP INDEX responses_age; "
            "ALTER TABLE responses DROP COLUMN bytes; "
            "DROP INDEX entries_tenant_id; " /* (migration 4) */
            "DROP TABLE settings; "          /* (migration 5) */
            "DELETE FROM schema_version WHERE version >= 3; "
            "INSERT INTO responses (id, tenant, created_ms, expires_ms, "
            "body, messages) VALUES ('resp_old', 1, 1, 0, "
            "printf('%300s', 'x'), "
            "'[{\"role\":\"user\",\"content\":\"Hi\"}]')");
    /* migrated: it counts 0 (not sized at start-up), and is the first to go past the
     * budget: 4 x 133 = 532 > 400, down to 360 */
    struct store_options o = {.dir = dir, .dim = DIM, .responses_max_bytes = 400};
    char err[512];
    cr_assert_eq(store_open(&o, NULL, NULL, &s, err, sizeof err), STORE_OK, "%s", err);
    cr_assert(response(s, 1, "resp_old", NULL, 0));
    char body[101];
    memset(body, 'x', 100);
    body[100] = 0;
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "resp_new%d", i);
        cr_assert_eq(put_response(s, 1, id, body, 0), STORE_OK);
        cr_assert_eq(store_sync(s), STORE_OK);
        cr_assert(response(s, 1, "resp_old", NULL, 0) == (i < 3), "%d", i);
    }
    cr_assert(!response(s, 1, "resp_new0", NULL, 0));
    cr_assert(!response(s, 1, "resp_new1", NULL, 0));
    cr_assert(response(s, 1, "resp_new2", NULL, 0));
    cr_assert(response(s, 1, "resp_new3", NULL, 0));
    store_close(s);
}

Test(store, responses_by_tenant_expiry_deletion_and_tenant_deletion)
{
    store *s = open_store(0, 0, NULL);
    int64_t acme;
    cr_assert_eq(store_tenant_create(s, "acme", &acme), STORE_OK);
    cr_assert_eq(put_response(s, 1, "resp_a", "{\"id\":\"resp_a\"}", 0), STORE_OK);
    cr_assert_eq(put_response(s, acme, "resp_b", "{\"id\":\"resp_b\"}", 0), 0);
    cr_assert_eq(put_response(s, 1, "resp_c", "{}", 1), STORE_OK); /* 1 ms */
    cr_assert_eq(store_sync(s), STORE_OK);
    char body[64];
    cr_assert(response(s, 1, "resp_a", body, sizeof body));
    cr_assert_str_eq(body, "{\"id\":\"resp_a\"}");
    cr_assert(!response(s, acme, "resp_a", NULL, 0), "another tenant's response");
    cr_assert(response(s, acme, "resp_b", NULL, 0));
    usleep(5 * 1000);
    cr_assert(!response(s, 1, "resp_c", NULL, 0), "expired");
    /* a later put of one id replaces it */
    cr_assert_eq(put_response(s, 1, "resp_a", "{\"v\":2}", 0), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(response(s, 1, "resp_a", body, sizeof body));
    cr_assert_str_eq(body, "{\"v\":2}");
    cr_assert_eq(store_response_delete(s, acme, "resp_a", NULL), STORE_ENOTFOUND);
    int64_t at = -1;
    cr_assert_eq(store_response_delete(s, 1, "resp_a", &at), STORE_OK);
    cr_assert_gt(at, 0);
    cr_assert(!response(s, 1, "resp_a", NULL, 0));
    cr_assert_eq(store_response_delete(s, 1, "resp_a", NULL), STORE_ENOTFOUND);
    /* a deleted tenant's responses go with it, and one queued after is not written */
    cr_assert_eq(store_tenant_delete(s, "acme"), STORE_OK);
    cr_assert(!response(s, acme, "resp_b", NULL, 0));
    cr_assert_eq(put_response(s, acme, "resp_d", "{}", 0), STORE_OK);
    cr_assert_eq(store_sync(s), STORE_OK);
    cr_assert(!response(s, acme, "resp_d", NULL, 0));
    store_close(s);
}

/* The database, its WAL and the saved indexes hold every tenant's questions: they are the
 * owner's alone, also in a data directory that others may read. */
Test(store, the_files_are_the_owners_alone)
{
    cr_assert_eq(chmod(dir, 0755), 0);
    mode_t old = umask(022);
    store *s = open_store(0, 0, NULL);
    put(s, 1, 1, 1, "one", 0);
    /* the WAL and its index while the store is open, the saved index after it closes */
    const char *names[] = {"cachegate.db", "cachegate.db-wal", "cachegate.db-shm",
                           "index/1.faiss"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (i == 3)
            store_close(s);
        char path[300];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
        cr_assert_eq(st.st_mode & 0777, 0600, "%s is %o", names[i], st.st_mode & 0777);
    }
    umask(old);
}
