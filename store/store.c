/*
 * store — SQLite persistence and per-tenant FAISS indexes (see store.h).
 *
 * Layout of DIR: cachegate.db (+ -wal, -shm), cachegate.lock (flock: one process owns
 * the directory), index/T.faiss for tenant T.
 *
 * Index consistency: an index changes only after the transaction that changed the rows
 * committed, and only on the writer thread (or while the store is being opened). A
 * background rebuild reads the tenant's rows up to a snapshot id in a thread of its own;
 * meanwhile the writer logs that tenant's index changes, and replays them on the new
 * index before swapping it in, so the swap loses nothing.
 */
#include "store.h"

#include "index.h"
#include "store_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *store_strerror(int rc)
{
    switch (rc) {
    case STORE_OK: return "ok";
    case STORE_ENOMEM: return "out of memory";
    case STORE_EIO: return "database or file error";
    case STORE_ENOTFOUND: return "not found";
    case STORE_EINVAL: return "invalid argument";
    case STORE_EEXIST: return "already exists";
    case STORE_EBUSY: return "the data directory is in use by another process";
    case STORE_ECLOSED: return "the store is closing";
    case STORE_EINDEX: return "vector index error";
    case STORE_EFULL: return "the disk holding the data directory is full";
    }
    return "unknown error";
}

int64_t store_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ------------------------------------------------------------------ connections */

/* Why db failed, with the system's reason where there is one ("attempt to write a readonly
 * database: Read-only file system"). */
static void db_why(sqlite3 *db, char *why, size_t whylen)
{
    int e = db ? sqlite3_system_errno(db) : 0;
    snprintf(why, whylen, "%s%s%s", db ? sqlite3_errmsg(db) : "out of memory", e ? ": " : "",
             e ? strerror(e) : "");
}

int store_db_open_why(const char *path, int readonly, sqlite3 **out, char *why, size_t whylen)
{
    sqlite3 *db = NULL;
    int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                SQLITE_OPEN_NOMUTEX;
    /* a new database is the owner's alone (SQLite would make it 0644, and its -wal and
     * -shm like it), whatever the directory it is in: it holds every tenant's questions */
    int fd = readonly ? -1 : open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        db_why(db, why, whylen);
        sqlite3_close(db);
        return STORE_EIO;
    }
    sqlite3_busy_timeout(db, 10000);
    /* WAL with synchronous=NORMAL: a commit is durable once it returns against a crash
     * or kill of the process (the WAL is in the OS's hands); only a power loss can take
     * back the last commits. FULL would fsync every batch, ~100 ms on some disks. */
    const char *pragmas = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                          "PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;";
    if (sqlite3_exec(db, pragmas, NULL, NULL, NULL) != SQLITE_OK) {
        db_why(db, why, whylen);
        sqlite3_close(db);
        return STORE_EIO;
    }
    *out = db;
    return STORE_OK;
}

int store_db_open(const char *path, int readonly, sqlite3 **out)
{
    char why[8];
    return store_db_open_why(path, readonly, out, why, sizeof why);
}

/* Applies the migrations of schema.sql above the recorded version, one transaction each. */
static int migrate(sqlite3 *db, char *err, size_t errlen)
{
    int have = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT max(version) FROM schema_version", -1, &st, NULL) ==
        SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            have = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    const char *marker = "-- migration: ";
    int known = 0; /* the newest migration this build knows */
    for (const char *q = strstr(store_schema_sql, marker); q; q = strstr(q + 1, marker))
        if (atoi(q + strlen(marker)) > known)
            known = atoi(q + strlen(marker));
    /* a newer release's database: its tables may mean what this one cannot read */
    if (have > known)
        return seterr(err, errlen, STORE_EIO,
                      "the database was written by a newer cachegate (schema %d; this one "
                      "knows up to %d): run that release, or restore a backup", have, known);
    /* another program's database: cachegate's tables would be added to it */
    if (have == 0 && sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name NOT "
                                        "LIKE 'sqlite_%'", -1, &st, NULL) == SQLITE_OK) {
        int tables = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
        sqlite3_finalize(st);
        if (tables)
            return seterr(err, errlen, STORE_EIO,
                          "the database holds %d table%s or index%s but is not cachegate's "
                          "(no schema_version): is the data directory right?", tables,
                          tables == 1 ? "" : "s", tables == 1 ? "" : "es");
    }
    const char *p = strstr(store_schema_sql, marker);
    while (p) {
        int n = atoi(p + strlen(marker));
        const char *next = strstr(p + 1, marker);
        if (n > have) {
            size_t len = next ? (size_t)(next - p) : strlen(p);
            char *sql = malloc(len + 200);
            if (!sql)
                return seterr(err, errlen, STORE_ENOMEM, "out of memory");
            snprintf(sql, len + 200,
                     "BEGIN IMMEDIATE; %.*s\n; INSERT INTO schema_version VALUES (%d, %lld); "
                     "COMMIT;",
                     (int)len, p, n, (long long)store_now_ms());
            char *msg = NULL;
            int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
            free(sql);
            if (rc != SQLITE_OK) {
                seterr(err, errlen, STORE_EIO, "schema migration %d failed: %s", n,
                       msg ? msg : sqlite3_errmsg(db));
                sqlite3_free(msg);
                sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
                return STORE_EIO;
            }
        }
        p = next;
    }
    return STORE_OK;
}

/* ------------------------------------------------------------------ tenant slots */

struct slot *store_slot(store *s, int64_t tenant, int create)
{
    pthread_mutex_lock(&s->slots_mu);
    struct slot *found = NULL;
    for (int i = 0; i < s->nslots; i++)
        if (s->slots[i]->tenant == tenant) {
            found = s->slots[i];
            break;
        }
    if (!found && create) {
        if (s->nslots == s->capslots) {
            int cap = s->capslots ? s->capslots * 2 : 8;
            struct slot **a = realloc(s->slots, sizeof *a * (size_t)cap);
            if (!a)
                goto out;
            s->slots = a;
            s->capslots = cap;
        }
        struct slot *sl = calloc(1, sizeof *sl);
        if (!sl)
            goto out;
        sl->tenant = tenant;
        pthread_rwlock_init(&sl->lock, NULL);
        if (sidx_create(s->opt.dim, SIDX_FLAT, &sl->ix)) {
            pthread_rwlock_destroy(&sl->lock);
            free(sl);
            goto out;
        }
        s->slots[s->nslots++] = sl;
        found = sl;
    }
out:
    pthread_mutex_unlock(&s->slots_mu);
    return found;
}

static void slot_free(struct slot *sl)
{
    sidx_free(sl->ix);
    sidx_free(sl->rebuilt);
    free(sl->pend_ids);
    free(sl->pend_vecs);
    free(sl->pend_del);
    pthread_rwlock_destroy(&sl->lock);
    free(sl);
}

static void index_path(store *s, int64_t tenant, char *out, size_t len)
{
    snprintf(out, len, "%s/index/%lld.faiss", s->opt.dir, (long long)tenant);
}

enum sidx_kind store_wanted_kind(store *s, int64_t entries, enum sidx_kind now)
{
    int64_t h = s->opt.hnsw_min_entries;
    if (h <= 0)
        return SIDX_FLAT;
    /* hysteresis: back to flat only well below the threshold */
    if (now == SIDX_HNSW)
        return entries >= h / 2 ? SIDX_HNSW : SIDX_FLAT;
    return entries >= h ? SIDX_HNSW : SIDX_FLAT;
}

/* Builds tenant's index of kind from the rows with id <= upto (upto < 0: all). */
int store_build_index(sqlite3 *db, int dim, int64_t tenant, int64_t upto, enum sidx_kind kind,
                      store_progress_fn progress, void *parg, const char *why, int64_t total,
                      sidx **out)
{
    sidx *ix = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sidx_create(dim, kind, &ix);
    if (rc)
        return STORE_EINDEX;
    enum { CHUNK = 1024 };
    int64_t *ids = malloc(sizeof *ids * CHUNK);
    float *vecs = malloc(sizeof *vecs * (size_t)dim * CHUNK);
    if (!ids || !vecs) {
        rc = STORE_ENOMEM;
        goto fail;
    }
    if (sqlite3_prepare_v2(db,
                           "SELECT id, embedding FROM entries WHERE tenant = ?1 AND "
                           "(?2 < 0 OR id <= ?2) ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = STORE_EIO;
        goto fail;
    }
    sqlite3_bind_int64(st, 1, tenant);
    sqlite3_bind_int64(st, 2, upto);
    int n = 0, src;
    int64_t done = 0;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 1) != (int)(sizeof(float) * (size_t)dim))
            continue; /* written with another model's dimension: not searchable */
        ids[n] = sqlite3_column_int64(st, 0);
        memcpy(vecs + (size_t)n * dim, sqlite3_column_blob(st, 1), sizeof(float) * (size_t)dim);
        if (++n == CHUNK) {
            if (sidx_add(ix, n, vecs, ids)) {
                rc = STORE_EINDEX;
                goto fail;
            }
            done += n;
            n = 0;
            if (progress)
                progress(parg, tenant, done, total, why);
        }
    }
    if (src != SQLITE_DONE) {
        rc = STORE_EIO;
        goto fail;
    }
    if (n && sidx_add(ix, n, vecs, ids)) {
        rc = STORE_EINDEX;
        goto fail;
    }
    done += n;
    if (progress)
        progress(parg, tenant, done, total, why);
    sqlite3_finalize(st);
    free(ids);
    free(vecs);
    *out = ix;
    return STORE_OK;
fail:
    sqlite3_finalize(st);
    free(ids);
    free(vecs);
    sidx_free(ix);
    return rc;
}

/* On open: each tenant's index from its file when it matches the rows, else rebuilt. */
/* Removes the index files of tenants with no entries (deleted by `cachegate tenant delete`
 * beside a server, or before a crash): nothing would ever load or remove them. */
static void drop_stray_indexes(store *s)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/index", s->opt.dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long long tenant = strtoll(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".faiss") || store_slot(s, tenant, 0))
            continue;
        char path[4096];
        index_path(s, tenant, path, sizeof path);
        unlink(path);
    }
    closedir(d);
}

static int load_indexes(store *s, store_progress_fn progress, void *parg, char *err,
                        size_t errlen)
{
    sqlite3_stmt *st = NULL, *ids_st = NULL;
    int64_t *ids = NULL;
    int rc = STORE_EIO;
    if (sqlite3_prepare_v2(s->wdb,
                           "SELECT tenant, count(*), coalesce(sum(bytes), 0) FROM entries "
                           "GROUP BY tenant",
                           -1, &st, NULL) != SQLITE_OK ||
        /* the indexed ones: not entries stored without an embedding */
        sqlite3_prepare_v2(s->wdb,
                           "SELECT id FROM entries WHERE tenant = ?1 AND length(embedding) = ?2 "
                           "ORDER BY id",
                           -1, &ids_st, NULL) != SQLITE_OK)
        goto fail;
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t tenant = sqlite3_column_int64(st, 0), count = sqlite3_column_int64(st, 1);
        struct slot *sl = store_slot(s, tenant, 1);
        if (!sl) {
            rc = STORE_ENOMEM;
            goto fail;
        }
        sl->entries = count;
        sl->bytes = sqlite3_column_int64(st, 2);
        free(ids);
        if (!(ids = malloc(sizeof *ids * (size_t)(count ? count : 1)))) {
            rc = STORE_ENOMEM;
            goto fail;
        }
        int64_t n = 0;
        sqlite3_reset(ids_st);
        sqlite3_bind_int64(ids_st, 1, tenant);
        sqlite3_bind_int64(ids_st, 2, (int64_t)sizeof(float) * s->opt.dim);
        int irc;
        while ((irc = sqlite3_step(ids_st)) == SQLITE_ROW && n < count)
            ids[n++] = sqlite3_column_int64(ids_st, 0);
        if (irc != SQLITE_DONE && irc != SQLITE_ROW) /* a damaged page, say: not a short list */
            goto fail;
        enum sidx_kind kind = store_wanted_kind(s, count, SIDX_FLAT);
        char path[4096];
        index_path(s, tenant, path, sizeof path);
        sidx *ix = NULL;
        if (sidx_load(path, s->opt.dim, kind, ids, n, &ix) == 0) {
            if (progress)
                progress(parg, tenant, n, n, NULL);
        } else {
            /* said to the operator: a rebuild of a large tenant takes a while */
            char why[320];
            if (access(path, F_OK))
                snprintf(why, sizeof why, "no index file (the last stop was not clean, or "
                         "it was removed)");
            else
                snprintf(why, sizeof why, "the index file does not match the database: %s",
                         sidx_last_error());
            int brc = store_build_index(s->wdb, s->opt.dim, tenant, -1, kind, progress, parg,
                                        why, count, &ix);
            if (brc) {
                rc = seterr(err, errlen, brc, "rebuilding the index of tenant %lld: %s",
                            (long long)tenant, store_strerror(brc));
                goto fail;
            }
            sl->dirty = 1;
        }
        sidx_free(sl->ix);
        sl->ix = ix;
    }
    if (src == SQLITE_DONE) { /* not a read that stopped early on an error */
        rc = STORE_OK;
        drop_stray_indexes(s);
    }
fail:
    if (rc == STORE_EIO)
        seterr(err, errlen, rc, "reading the cache entries: %s%s", sqlite3_errmsg(s->wdb),
               sqlite3_errcode(s->wdb) == SQLITE_CORRUPT
                   ? " (the database is damaged: restore it from a backup, or recover what "
                     "it holds with sqlite3's .recover)"
                   : "");
    free(ids);
    sqlite3_finalize(st);
    sqlite3_finalize(ids_st);
    return rc;
}

/* The tables beside the entries (which load_indexes() reads through), each read through
 * once, so that a damaged page stops the start naming it, rather than the server running
 * without its keys, its usage figures or its stored responses: the small ones page by page
 * (quick_check), the responses, which may be large, their tree but not the bodies that
 * overflow it. */
static int check_tables(store *s, char *err, size_t errlen)
{
    static const char *const sql[] = {
        "PRAGMA quick_check(schema_version)", "PRAGMA quick_check(tenants)",
        "PRAGMA quick_check(api_keys)", "PRAGMA quick_check(usage_daily)",
        "SELECT count(*) FROM responses NOT INDEXED"};
    static const char *const table[] = {"schema_version", "tenants", "api_keys", "usage_daily",
                                        "responses"};
    for (size_t i = 0; i < sizeof sql / sizeof *sql; i++) {
        sqlite3_stmt *st;
        int src = sqlite3_prepare_v2(s->wdb, sql[i], -1, &st, NULL);
        const char *said = NULL;
        if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW && i < 4) {
            said = (const char *)sqlite3_column_text(st, 0);
            if (said && !strcmp(said, "ok"))
                said = NULL;
        }
        if (said || (src != SQLITE_ROW && src != SQLITE_DONE)) {
            seterr(err, errlen, STORE_EIO,
                   "the database is damaged (table %s: %s): restore it from a backup, or "
                   "recover what it holds with sqlite3's .recover",
                   table[i], said ? said : sqlite3_errmsg(s->wdb));
            sqlite3_finalize(st);
            return STORE_EIO;
        }
        sqlite3_finalize(st);
    }
    return STORE_OK;
}

/* The settings the store keeps (migration 5): the key of the entries' public ids. */
static int read_settings(store *s, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(s->wdb, "SELECT value FROM settings WHERE name = "
                                 "'entry_id_key'", -1, &st, NULL);
    int n = -1;
    if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW &&
        (n = sqlite3_column_bytes(st, 0)) == (int)sizeof s->entry_key)
        memcpy(s->entry_key, sqlite3_column_blob(st, 0), sizeof s->entry_key);
    sqlite3_finalize(st);
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        return seterr(err, errlen, STORE_EIO, "reading the database's settings: %s",
                      sqlite3_errmsg(s->wdb));
    if (n != (int)sizeof s->entry_key)
        return seterr(err, errlen, STORE_EIO,
                      "the database is damaged (table settings: %s): restore it from a "
                      "backup (or insert a new key, %d random bytes: every entry then "
                      "shows another id)",
                      n < 0 ? "no entry_id_key" : "entry_id_key of another size",
                      (int)sizeof s->entry_key);
    return STORE_OK;
}

/* ------------------------------------------------------------------ open / close */

static int mkdir_p(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0700) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
}

uint64_t store_generation(store *s, int64_t tenant)
{
    struct slot *sl = store_slot(s, tenant, 0);
    return sl ? __atomic_load_n(&sl->removals, __ATOMIC_ACQUIRE) : 0;
}

static void db_path(char *out, size_t len, const char *dir)
{
    snprintf(out, len, "%s/cachegate.db", dir);
}

int store_exists(const char *dir)
{
    char path[4096];
    struct stat st;
    db_path(path, sizeof path, dir);
    return stat(path, &st) == 0 && st.st_size > 0; /* (SQLite reads an empty file as new) */
}

/* How many saved indexes dir/index holds. */
static int saved_indexes(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/index", dir);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        n += l > 6 && !strcmp(e->d_name + l - 6, ".faiss");
    }
    if (d)
        closedir(d);
    return n;
}

static int in_use(const char *dir, char *err, size_t errlen)
{
    return seterr(err, errlen, STORE_EBUSY,
                  "%s is in use by another cachegate process (a running server? use its admin "
                  "API instead)",
                  dir);
}

/* Locks the directory itself (as well as its lock file, which someone may delete): an fd
 * holding the lock, -1 where the file system does not lock directories, -2 when another
 * process holds it. */
static int lock_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int held = errno == EWOULDBLOCK;
        close(fd);
        return held ? -2 : -1;
    }
    return fd;
}

int store_in_use(const char *dir, char *err, size_t errlen)
{
    int dfd = lock_dir(dir);
    if (dfd >= 0)
        close(dfd);
    if (dfd == -2)
        return in_use(dir, err, errlen);
    char path[4096];
    snprintf(path, sizeof path, "%s/cachegate.lock", dir);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0; /* (no lock file, no owner; any other failure is store_open()'s to say) */
    int rc = flock(fd, LOCK_EX | LOCK_NB) ? in_use(dir, err, errlen) : 0;
    close(fd); /* (and the lock with it) */
    return rc;
}

int store_hold(const char *dir, int fds[2], char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cachegate.lock", dir);
    fds[0] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    fds[1] = -1;
    if (fds[0] < 0)
        return seterr(err, errlen, STORE_EIO, "cannot open %s: %s", path, strerror(errno));
    if (flock(fds[0], LOCK_EX | LOCK_NB) || (fds[1] = lock_dir(dir)) == -2) {
        fds[1] = -1;
        store_unhold(fds);
        return in_use(dir, err, errlen);
    }
    return STORE_OK;
}

void store_unhold(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

int store_open(const struct store_options *o, store_progress_fn progress, void *parg,
               store **out, char *err, size_t errlen)
{
    if (!o->dir || !*o->dir || o->dim <= 0)
        return seterr(err, errlen, STORE_EINVAL, "store: a data directory and a dimension "
                                                 "are required");
    store *s = calloc(1, sizeof *s);
    if (!s)
        return seterr(err, errlen, STORE_ENOMEM, "out of memory");
    s->opt = *o;
    s->lock_fd = s->dir_fd = -1;
    int rc;
    if (!(s->dir = strdup(o->dir))) {
        rc = seterr(err, errlen, STORE_ENOMEM, "out of memory");
        goto fail;
    }
    s->opt.dir = s->dir;
    pthread_mutex_init(&s->slots_mu, NULL);
    pthread_mutex_init(&s->admin_mu, NULL);
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_cond_init(&s->q_cond, NULL);
    pthread_cond_init(&s->sync_cond, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/index", o->dir);
    if (mkdir_p(path)) {
        rc = seterr(err, errlen, STORE_EIO, "cannot create %s: %s", path, strerror(errno));
        goto fail;
    }
    /* (SQLite would say "unable to open database file": its WAL needs to write beside it) */
    if (access(o->dir, W_OK)) {
        rc = seterr(err, errlen, STORE_EIO, "the data directory %s cannot be written: %s",
                    o->dir, strerror(errno));
        goto fail;
    }
    if (o->admin_only)
        goto database;
    int held[2];
    if ((rc = store_hold(o->dir, held, err, errlen)))
        goto fail;
    s->lock_fd = held[0];
    s->dir_fd = held[1];
database:
    db_path(s->db_path, sizeof s->db_path, o->dir);
    /* no database where indexes were saved: it was deleted or emptied, and opening would
     * make an empty store in its place (and drop the indexes as strays) without a word */
    int saved = store_exists(o->dir) ? 0 : saved_indexes(o->dir);
    if (saved) {
        rc = seterr(err, errlen, STORE_EIO,
                    "the database %s is missing or empty, yet %s/index holds %d saved "
                    "index%s: the store that was there is gone. Restore the database (with "
                    "its -wal file) from a backup, or move %s/index away to start an empty "
                    "store", s->db_path, o->dir, saved, saved == 1 ? "" : "es", o->dir);
        goto fail;
    }
    char why[256];
    if (store_db_open_why(s->db_path, 0, &s->wdb, why, sizeof why) ||
        store_db_open_why(s->db_path, 0, &s->adb, why, sizeof why)) {
        rc = seterr(err, errlen, STORE_EIO, "cannot open the database %s: %s", s->db_path, why);
        goto fail;
    }
    if ((rc = migrate(s->wdb, err, errlen)) || (rc = check_tables(s, err, errlen)) ||
        (rc = read_settings(s, err, errlen)))
        goto fail;
    if ((rc = store_writer_prepare(s))) {
        rc = seterr(err, errlen, rc, "preparing statements: %s", sqlite3_errmsg(s->wdb));
        goto fail;
    }
    if (o->admin_only) {
        *out = s;
        return STORE_OK;
    }
    if ((rc = load_indexes(s, progress, parg, err, errlen)))
        goto fail;
    if (pthread_create(&s->writer, NULL, store_writer_main, s)) {
        rc = seterr(err, errlen, STORE_ENOMEM, "cannot start the store's writer thread");
        goto fail;
    }
    s->writer_running = 1;
    *out = s;
    return STORE_OK;
fail:
    store_close(s);
    return rc;
}

const char *store_dir(const store *s)
{
    return s->dir;
}

const unsigned char *store_entry_id_key(const store *s)
{
    return s->entry_key;
}

void store_close(store *s)
{
    if (!s)
        return;
    if (s->writer_running) {
        pthread_mutex_lock(&s->q_mu);
        s->closing = 1;
        pthread_cond_broadcast(&s->q_cond);
        pthread_mutex_unlock(&s->q_mu);
        pthread_join(s->writer, NULL);
    }
    for (int i = 0; i < s->nslots; i++) {
        struct slot *sl = s->slots[i];
        if (sl->rebuild_thread_live)
            pthread_join(sl->rebuild_thread, NULL);
        if (s->wdb && !sl->entries) { /* nothing to search (a tenant deleted, say) */
            char path[4096];
            index_path(s, sl->tenant, path, sizeof path);
            unlink(path);
        } else if (sl->dirty && !sl->stale && sl->ix && s->wdb) {
            char path[4096];
            index_path(s, sl->tenant, path, sizeof path);
            /* a failed save only costs a rebuild at the next open */
            if (sidx_save(sl->ix, path) && s->opt.on_error) {
                char what[600];
                snprintf(what, sizeof what, "the index of tenant %lld was not saved to %.400s "
                         "(%s); it is rebuilt from the database at the next start",
                         (long long)sl->tenant, path, sidx_last_error());
                s->opt.on_error(s->opt.on_error_arg, what);
            }
        }
        slot_free(sl);
    }
    free(s->slots);
    store_writer_finalize(s);
    sqlite3_close(s->wdb);
    sqlite3_close(s->adb);
    store_unhold((int[2]){s->lock_fd, s->dir_fd});
    pthread_mutex_destroy(&s->slots_mu);
    pthread_mutex_destroy(&s->admin_mu);
    pthread_mutex_destroy(&s->q_mu);
    pthread_cond_destroy(&s->q_cond);
    pthread_cond_destroy(&s->sync_cond);
    free(s->dir);
    free(s);
}

void store_set_limits(store *s, int64_t tenant, int64_t max_entries, int64_t max_bytes)
{
    struct slot *sl = store_slot(s, tenant, 1);
    if (!sl)
        return;
    pthread_mutex_lock(&s->q_mu);
    sl->max_entries = max_entries;
    sl->max_bytes = max_bytes;
    pthread_mutex_unlock(&s->q_mu);
    store_apply_limits(s, tenant, 0);
}

int store_stats(store *s, struct store_tenant_stats *out, int cap)
{
    pthread_mutex_lock(&s->slots_mu);
    int n = 0;
    for (int i = 0; i < s->nslots && n < cap; i++) {
        struct slot *sl = s->slots[i];
        pthread_rwlock_rdlock(&sl->lock);
        out[n] = (struct store_tenant_stats){
            .tenant = sl->tenant,
            .entries = __atomic_load_n(&sl->entries, __ATOMIC_RELAXED),
            .bytes = __atomic_load_n(&sl->bytes, __ATOMIC_RELAXED),
            .evicted_lru = __atomic_load_n(&sl->evicted, __ATOMIC_RELAXED),
            .expired = __atomic_load_n(&sl->expired, __ATOMIC_RELAXED),
            .hnsw = sidx_get_kind(sl->ix) == SIDX_HNSW,
            .tombstones = sidx_tombstones(sl->ix),
        };
        pthread_rwlock_unlock(&sl->lock);
        n++;
    }
    n = s->nslots;
    pthread_mutex_unlock(&s->slots_mu);
    return n;
}

void store_hit_deinit(struct store_hit *h)
{
    if (!h)
        return;
    free(h->model);
    free(h->query);
    free(h->answer);
    free(h->finish_reason);
    memset(h, 0, sizeof *h);
}
