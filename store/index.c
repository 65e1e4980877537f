/*
 * index — one tenant's vector index over the FAISS C API. See index.h.
 *
 * File format (host byte order; x86-64 little-endian):
 *   struct file_header (48 bytes): magic "CGSIDX1\0", version, kind, dim, 0,
 *       n_dead, payload_len, payload_hash (XXH64, seed 0, of the whole file with
 *       payload_hash read as 0)
 *   payload: int64 dead[n_dead]  HNSW positions of tombstones, ascending
 *            a FAISS index as faiss_write_index writes it (IDMap2 over Flat or HNSW32)
 * The checksum is checked before FAISS parses anything: FAISS trusts what it reads (an
 * HNSW neighbour id out of range would be followed out of bounds at search time), so a
 * damaged file must never reach it.
 *
 * Tombstones are HNSW positions, not ids: SQLite may hand out a deleted row id again,
 * and a re-added id must not be hidden by the tombstone of its previous vector. HNSW is
 * therefore searched through its sub-index, whose labels are positions; id_map turns
 * them into ids.
 */
#include "index.h"

#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>

/* header-only: the store needs no extra library on its link line */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* FAISS's default efSearch (16) finds the true best of 2000 random 384-d vectors about
 * half the time; 128 finds it 99% of the time (test_index.c checks >= 95%). */
#define HNSW_EF_SEARCH 128
/* An HNSW search asks for k + tombstones candidates so that k live ones survive, but
 * never more than this many extra: past it the owner should have rebuilt. */
#define HNSW_MAX_SKIP 1024

#define FILE_MAGIC "CGSIDX1"
#define FILE_VERSION 1

struct file_header {
    char magic[8];
    uint32_t version, kind, dim, zero;
    uint64_t n_dead;       /* tombstones in the payload (HNSW only) */
    uint64_t payload_len;  /* bytes after this header */
    uint64_t payload_hash; /* XXH64 of the file, this field read as 0 */
};
_Static_assert(sizeof(struct file_header) == 48, "file header has no padding");

/* ---- id -> position map: open addressing, linear probing, backward-shift deletion ---- */

struct slot {
    int64_t id;  /* < 0: empty */
    int64_t pos; /* HNSW: position in the graph; FLAT: -1 (removal compacts positions) */
};

struct idmap {
    struct slot *slots;
    size_t cap; /* 0 or a power of two; len <= cap / 2 */
    size_t len;
};

struct sidx {
    /* search: read; add, remove: write; save: read, so searches go on while it writes */
    pthread_rwlock_t lock;
    pthread_mutex_t save_mu;  /* one save at a time: saves to a path share path.tmp */
    FaissIndex *index;        /* owned: IDMap2 over Flat or HNSW32, inner product */
    FaissIndexIDMap2 *idmap2; /* the same object, typed for id_map */
    FaissIndex *sub;          /* borrowed from index: its labels are positions */
    int dim;
    enum sidx_kind kind;
    bool broken;       /* a FAISS write failed halfway: only a rebuild can help */
    struct idmap live; /* every live id */
    uint8_t *dead;     /* HNSW: one bit per position, set for tombstones */
    int64_t dead_cap;  /* positions the bitmap covers (a multiple of 8) */
    int64_t n_dead;
};

static _Thread_local char last_error[256];

/* ---- errors ---- */

static int fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return rc;
}

/* Called right after a FAISS call returned nonzero; its message is only valid until the
 * next FAISS call, hence the copy. */
static int faiss_fail(int rc, const char *what)
{
    const char *msg = faiss_get_last_error();
    return fail(rc, "%s: %s", what, msg ? msg : "unknown FAISS error");
}

const char *sidx_last_error(void)
{
    return last_error;
}

/* ---- id map ---- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static size_t home_of(const struct idmap *m, int64_t id)
{
    return (size_t)mix64((uint64_t)id) & (m->cap - 1);
}

static struct slot *map_find(const struct idmap *m, int64_t id)
{
    if (m->cap == 0) return NULL;
    for (size_t i = home_of(m, id);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].id == id) return &m->slots[i];
        if (m->slots[i].id < 0) return NULL;
    }
}

/* Inserts an absent id; map_reserve has made room, so it cannot fail. */
static void map_put(struct idmap *m, int64_t id, int64_t pos)
{
    size_t i = home_of(m, id);
    while (m->slots[i].id >= 0)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (struct slot){id, pos};
    m->len++;
}

/* Makes room for extra more ids, so that the map_put calls that follow cannot fail. */
static int map_reserve(struct idmap *m, int64_t extra)
{
    if (extra < 0 || (uint64_t)extra > ((uint64_t)1 << 40)) return -1;
    size_t need = (m->len + (size_t)extra) * 2;
    if (need <= m->cap) return 0;
    size_t cap = 16;
    while (cap < need)
        cap *= 2;
    struct slot *slots = malloc(cap * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < cap; i++)
        slots[i].id = -1;
    struct idmap grown = {slots, cap, 0};
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].id >= 0) map_put(&grown, m->slots[i].id, m->slots[i].pos);
    free(m->slots);
    *m = grown;
    return 0;
}

/* Deletes s by moving later members of its probe run back, so lookups never need
 * deletion markers. */
static void map_del(struct idmap *m, struct slot *s)
{
    size_t mask = m->cap - 1, hole = (size_t)(s - m->slots);
    for (size_t j = (hole + 1) & mask; m->slots[j].id >= 0; j = (j + 1) & mask) {
        size_t home = home_of(m, m->slots[j].id);
        /* j's entry may fill the hole only if the hole lies on its probe path home..j */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].id = -1;
    m->len--;
}

/* ---- tombstones (HNSW) ---- */

static bool is_dead(const sidx *ix, int64_t pos)
{
    return (ix->dead[pos >> 3] >> (pos & 7)) & 1;
}

static void set_dead(sidx *ix, int64_t pos)
{
    ix->dead[pos >> 3] |= (uint8_t)(1u << (pos & 7));
    ix->n_dead++;
}

/* Grows the bitmap to cover n positions. */
static int dead_reserve(sidx *ix, int64_t n)
{
    if (n <= ix->dead_cap) return 0;
    int64_t cap = ix->dead_cap ? ix->dead_cap : 1024;
    while (cap < n)
        cap *= 2;
    uint8_t *d = realloc(ix->dead, (size_t)cap / 8);
    if (!d) return -1;
    memset(d + ix->dead_cap / 8, 0, (size_t)(cap - ix->dead_cap) / 8);
    ix->dead = d;
    ix->dead_cap = cap;
    return 0;
}

/* ---- lifecycle ---- */

static int set_hnsw_params(FaissIndex *index)
{
    FaissParameterSpace *ps = NULL;
    if (faiss_ParameterSpace_new(&ps) != 0) return faiss_fail(SIDX_EFAISS, "ParameterSpace");
    int rc = 0;
    if (faiss_ParameterSpace_set_index_parameter(ps, index, "efSearch", HNSW_EF_SEARCH) != 0)
        rc = faiss_fail(SIDX_EFAISS, "set efSearch");
    faiss_ParameterSpace_free(ps);
    return rc;
}

/* Checks what a file could get wrong about its FAISS index, hence SIDX_EMISMATCH. */
static int check_faiss(FaissIndex *index, int dim, enum sidx_kind kind)
{
    FaissIndexIDMap2 *idmap2 = faiss_IndexIDMap2_cast(index);
    if (!idmap2 || faiss_Index_d(index) != dim ||
        faiss_Index_metric_type(index) != METRIC_INNER_PRODUCT)
        return fail(SIDX_EMISMATCH, "not an inner-product IDMap2 index of dimension %d", dim);
    FaissIndex *sub = faiss_IndexIDMap2_sub_index(idmap2);
    if ((faiss_IndexFlat_cast(sub) != NULL) != (kind == SIDX_FLAT))
        return fail(SIDX_EMISMATCH, "the FAISS index is not of the expected kind");
    if (kind == SIDX_HNSW && set_hnsw_params(sub) != 0) return SIDX_EMISMATCH;
    return 0;
}

static int init_lock(pthread_rwlock_t *lock)
{
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* glibc prefers readers by default: a steady stream of searches would starve adds */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int e = pthread_rwlock_init(lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return e ? fail(SIDX_ENOMEM, "pthread_rwlock_init: %s", strerror(e)) : 0;
}

/* Wraps a FAISS index; takes ownership of index only on success. */
static int wrap(FaissIndex *index, int dim, enum sidx_kind kind, sidx **out)
{
    int rc = check_faiss(index, dim, kind);
    if (rc != 0) return rc;
    sidx *ix = calloc(1, sizeof *ix);
    if (!ix) return fail(SIDX_ENOMEM, "out of memory");
    rc = init_lock(&ix->lock);
    if (rc != 0) {
        free(ix);
        return rc;
    }
    pthread_mutex_init(&ix->save_mu, NULL);
    ix->index = index;
    ix->idmap2 = faiss_IndexIDMap2_cast(index);
    ix->sub = faiss_IndexIDMap2_sub_index(ix->idmap2);
    ix->dim = dim;
    ix->kind = kind;
    *out = ix;
    return 0;
}

static bool valid_kind(enum sidx_kind kind)
{
    return kind == SIDX_FLAT || kind == SIDX_HNSW;
}

int sidx_create(int dim, enum sidx_kind kind, sidx **out)
{
    if (!out) return fail(SIDX_EINVAL, "sidx_create: out is NULL");
    *out = NULL;
    if (dim <= 0 || !valid_kind(kind)) return fail(SIDX_EINVAL, "sidx_create: bad dim or kind");
    FaissIndex *index = NULL;
    const char *desc = kind == SIDX_FLAT ? "IDMap2,Flat" : "IDMap2,HNSW32";
    if (faiss_index_factory(&index, dim, desc, METRIC_INNER_PRODUCT) != 0)
        return faiss_fail(SIDX_EFAISS, "index_factory");
    int rc = wrap(index, dim, kind, out);
    if (rc != 0) {
        faiss_Index_free(index);
        return rc == SIDX_EMISMATCH ? SIDX_EFAISS : rc; /* FAISS built something unexpected */
    }
    return 0;
}

void sidx_free(sidx *ix)
{
    if (!ix) return;
    faiss_Index_free(ix->index);
    free(ix->live.slots);
    free(ix->dead);
    pthread_mutex_destroy(&ix->save_mu);
    pthread_rwlock_destroy(&ix->lock);
    free(ix);
}

/* ---- add, remove ---- */

static int add_locked(sidx *ix, int64_t n, const float *vecs, const int64_t *ids)
{
    int64_t base = faiss_Index_ntotal(ix->index);
    bool hnsw = ix->kind == SIDX_HNSW;
    if (map_reserve(&ix->live, n) != 0 || (hnsw && dead_reserve(ix, base + n) != 0))
        return fail(SIDX_ENOMEM, "sidx_add: out of memory");
    int64_t i = 0;
    while (i < n && ids[i] >= 0 && !map_find(&ix->live, ids[i])) {
        map_put(&ix->live, ids[i], hnsw ? base + i : -1);
        i++;
    }
    if (i < n) {
        int64_t bad = ids[i];
        while (i-- > 0)
            map_del(&ix->live, map_find(&ix->live, ids[i]));
        return fail(SIDX_EINVAL, "sidx_add: id %lld is negative or already present",
                    (long long)bad);
    }
    /* FAISS adds to the sub-index before id_map: a failure may leave them apart */
    if (faiss_Index_add_with_ids(ix->index, n, vecs, ids) != 0) {
        ix->broken = true;
        return faiss_fail(SIDX_EFAISS, "add_with_ids");
    }
    return 0;
}

int sidx_add(sidx *ix, int64_t n, const float *vecs, const int64_t *ids)
{
    if (!ix || n < 0 || (n > 0 && (!vecs || !ids)))
        return fail(SIDX_EINVAL, "sidx_add: bad arguments");
    if (n == 0) return 0;
    pthread_rwlock_wrlock(&ix->lock);
    int rc = ix->broken ? fail(SIDX_EFAISS, "index broken by an earlier FAISS failure")
                        : add_locked(ix, n, vecs, ids);
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

static void hnsw_remove(sidx *ix, int64_t n, const int64_t *ids)
{
    for (int64_t i = 0; i < n; i++) {
        struct slot *s = map_find(&ix->live, ids[i]);
        if (!s) continue;
        set_dead(ix, s->pos);
        map_del(&ix->live, s);
    }
}

/* IDMap2 rebuilds its whole reverse map on every removal: pass FAISS only the ids that
 * are present, each once, in one call. */
static int flat_remove(sidx *ix, int64_t n, const int64_t *ids)
{
    int64_t *present = malloc((size_t)n * sizeof *present);
    if (!present) return fail(SIDX_ENOMEM, "sidx_remove: out of memory");
    size_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        struct slot *s = map_find(&ix->live, ids[i]);
        if (!s) continue;
        present[m++] = ids[i];
        map_del(&ix->live, s);
    }
    int rc = 0;
    FaissIDSelectorBatch *sel = NULL;
    if (m == 0) goto out;
    if (faiss_IDSelectorBatch_new(&sel, m, present) != 0) {
        for (size_t j = 0; j < m; j++) /* nothing changed in FAISS: put them back */
            map_put(&ix->live, present[j], -1);
        rc = faiss_fail(SIDX_EFAISS, "IDSelectorBatch");
        goto out;
    }
    size_t removed = 0;
    if (faiss_Index_remove_ids(ix->index, (FaissIDSelector *)sel, &removed) != 0) {
        ix->broken = true;
        rc = faiss_fail(SIDX_EFAISS, "remove_ids");
    } else if (removed != m) {
        ix->broken = true;
        rc = fail(SIDX_EFAISS, "remove_ids removed %zu of %zu ids", removed, m);
    }
    faiss_IDSelector_free((FaissIDSelector *)sel);
out:
    free(present);
    return rc;
}

int sidx_remove(sidx *ix, int64_t n, const int64_t *ids)
{
    if (!ix || n < 0 || (n > 0 && !ids)) return fail(SIDX_EINVAL, "sidx_remove: bad arguments");
    if (n == 0) return 0;
    pthread_rwlock_wrlock(&ix->lock);
    int rc = 0;
    if (ix->broken)
        rc = fail(SIDX_EFAISS, "index broken by an earlier FAISS failure");
    else if (ix->kind == SIDX_HNSW)
        hnsw_remove(ix, n, ids);
    else
        rc = flat_remove(ix, n, ids);
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

/* ---- search ---- */

static int flat_search(sidx *ix, const float *q, int k, float *scores, int64_t *ids, int *found)
{
    if (faiss_Index_search(ix->index, 1, q, k, scores, ids) != 0)
        return faiss_fail(SIDX_EFAISS, "search");
    int n = 0;
    while (n < k && ids[n] >= 0) /* FAISS pads with -1 past the last entry */
        n++;
    *found = n;
    return 0;
}

static int hnsw_search(sidx *ix, const float *q, int k, float *scores, int64_t *ids, int *found)
{
    int64_t total = faiss_Index_ntotal(ix->sub);
    int64_t want = k + (ix->n_dead < HNSW_MAX_SKIP ? ix->n_dead : HNSW_MAX_SKIP);
    if (want > total) want = total;
    if (want == 0) return 0;
    float *dist = malloc((size_t)want * sizeof *dist);
    int64_t *pos = malloc((size_t)want * sizeof *pos);
    int rc = 0;
    if (!dist || !pos) {
        rc = fail(SIDX_ENOMEM, "sidx_search: out of memory");
        goto out;
    }
    if (faiss_Index_search(ix->sub, 1, q, want, dist, pos) != 0) {
        rc = faiss_fail(SIDX_EFAISS, "search");
        goto out;
    }
    idx_t *id_map = NULL;
    size_t n_map = 0;
    faiss_IndexIDMap2_id_map(ix->idmap2, &id_map, &n_map);
    int n = 0;
    for (int64_t i = 0; i < want && n < k; i++) {
        if (pos[i] < 0 || (size_t)pos[i] >= n_map || is_dead(ix, pos[i])) continue;
        scores[n] = dist[i];
        ids[n++] = id_map[pos[i]];
    }
    *found = n;
out:
    free(pos);
    free(dist);
    return rc;
}

int sidx_search(sidx *ix, const float *q, int k, float *scores, int64_t *ids, int *found)
{
    if (found) *found = 0;
    if (!ix || !q || k < 0 || (k > 0 && (!scores || !ids)) || !found)
        return fail(SIDX_EINVAL, "sidx_search: bad arguments");
    if (k == 0) return 0;
    pthread_rwlock_rdlock(&ix->lock);
    int rc;
    if (ix->broken)
        rc = fail(SIDX_EFAISS, "index broken by an earlier FAISS failure");
    else if (ix->kind == SIDX_FLAT)
        rc = flat_search(ix, q, k, scores, ids, found);
    else
        rc = hnsw_search(ix, q, k, scores, ids, found);
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

/* ---- accessors ---- */

int64_t sidx_count(sidx *ix)
{
    pthread_rwlock_rdlock(&ix->lock);
    int64_t n = (int64_t)ix->live.len;
    pthread_rwlock_unlock(&ix->lock);
    return n;
}

int64_t sidx_tombstones(sidx *ix)
{
    pthread_rwlock_rdlock(&ix->lock);
    int64_t n = ix->n_dead;
    pthread_rwlock_unlock(&ix->lock);
    return n;
}

enum sidx_kind sidx_get_kind(sidx *ix)
{
    return ix->kind; /* immutable */
}

int sidx_dim(sidx *ix)
{
    return ix->dim; /* immutable */
}

/* ---- save ---- */

/* The file's checksum: XXH64 of the header with payload_hash zeroed, then of the payload
 * read from f. Covering the header too means no flipped field can slip through. */
static int file_hash(FILE *f, struct file_header h, uint64_t *out)
{
    enum { CHUNK = 1 << 16 };
    char *buf = malloc(CHUNK);
    if (!buf) return fail(SIDX_ENOMEM, "out of memory");
    XXH64_state_t st;
    XXH64_reset(&st, 0);
    h.payload_hash = 0;
    XXH64_update(&st, &h, sizeof h);
    int rc = 0;
    if (fseeko(f, sizeof h, SEEK_SET) != 0) rc = fail(SIDX_EIO, "seek: %s", strerror(errno));
    for (uint64_t left = h.payload_len; rc == 0 && left > 0;) {
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        if (fread(buf, 1, want, f) != want) {
            rc = fail(SIDX_EIO, "index file is shorter than its header says");
            break;
        }
        XXH64_update(&st, buf, want);
        left -= want;
    }
    *out = XXH64_digest(&st);
    free(buf);
    return rc;
}

static int write_dead(sidx *ix, FILE *f)
{
    for (int64_t p = 0; p < ix->dead_cap; p++)
        if (is_dead(ix, p) && fwrite(&p, sizeof p, 1, f) != 1)
            return fail(SIDX_EIO, "write: %s", strerror(errno));
    return 0;
}

/* Writes the header (with a zero checksum until the payload is on disk), the payload,
 * then the real header, and syncs. */
static int write_file(sidx *ix, FILE *f)
{
    struct file_header h = {.magic = FILE_MAGIC,
                            .version = FILE_VERSION,
                            .kind = (uint32_t)ix->kind,
                            .dim = (uint32_t)ix->dim,
                            .n_dead = (uint64_t)ix->n_dead};
    if (fwrite(&h, sizeof h, 1, f) != 1) return fail(SIDX_EIO, "write: %s", strerror(errno));
    int rc = write_dead(ix, f);
    if (rc != 0) return rc;
    if (faiss_write_index(ix->index, f) != 0) return faiss_fail(SIDX_EIO, "write_index");
    off_t end = fflush(f) == 0 ? ftello(f) : -1;
    if (end < 0) return fail(SIDX_EIO, "write: %s", strerror(errno));
    h.payload_len = (uint64_t)end - sizeof h;
    rc = file_hash(f, h, &h.payload_hash);
    if (rc != 0) return rc;
    if (fseeko(f, 0, SEEK_SET) != 0 || fwrite(&h, sizeof h, 1, f) != 1 || fflush(f) != 0 ||
        fsync(fileno(f)) != 0)
        return fail(SIDX_EIO, "write: %s", strerror(errno));
    return 0;
}

/* Makes the rename durable: it lives in the directory. */
static int sync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return fail(SIDX_ENOMEM, "out of memory");
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0 || fsync(fd) != 0)
        rc = fail(SIDX_EIO, "sync directory of %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    free(copy);
    return rc;
}

static int save_to(sidx *ix, const char *path, const char *tmp)
{
    /* the owner's alone, as the database: the vectors are of the tenants' questions */
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 && fchmod(fd, 0600) == 0 ? fdopen(fd, "w+b") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return fail(SIDX_EIO, "open %s: %s", tmp, strerror(e));
    }
    pthread_rwlock_rdlock(&ix->lock);
    int rc = ix->broken ? fail(SIDX_EFAISS, "index broken by an earlier FAISS failure")
                        : write_file(ix, f);
    pthread_rwlock_unlock(&ix->lock);
    if (fclose(f) != 0 && rc == 0) rc = fail(SIDX_EIO, "close %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = fail(SIDX_EIO, "rename %s: %s", tmp, strerror(errno));
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    return sync_dir_of(path);
}

int sidx_save(sidx *ix, const char *path)
{
    if (!ix || !path) return fail(SIDX_EINVAL, "sidx_save: bad arguments");
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", path) < 0) return fail(SIDX_ENOMEM, "out of memory");
    pthread_mutex_lock(&ix->save_mu);
    int rc = save_to(ix, path, tmp);
    pthread_mutex_unlock(&ix->save_mu);
    free(tmp);
    return rc;
}

/* ---- load ---- */

/* Reads and checks the header, then the checksum of the payload; leaves f just past
 * the header. Cheap checks first: a kind or dimension mismatch needs no hashing. */
static int read_header(FILE *f, int dim, enum sidx_kind kind, struct file_header *h)
{
    struct stat st;
    if (fread(h, sizeof *h, 1, f) != 1 || memcmp(h->magic, FILE_MAGIC, 8) != 0 || h->zero != 0)
        return fail(SIDX_EIO, "not an index file");
    if (h->version != FILE_VERSION)
        return fail(SIDX_EMISMATCH, "index file version %u, expected %u", h->version, FILE_VERSION);
    if (h->dim != (uint32_t)dim)
        return fail(SIDX_EMISMATCH, "index file of dimension %u, expected %d", h->dim, dim);
    if (h->kind != (uint32_t)kind) /* hnsw_min_entries moved past the tenant's size */
        return fail(SIDX_EMISMATCH, "index file is %s, expected %s",
                    h->kind == SIDX_HNSW ? "HNSW" : "flat", kind == SIDX_HNSW ? "HNSW" : "flat");
    if (fstat(fileno(f), &st) != 0) return fail(SIDX_EIO, "stat: %s", strerror(errno));
    if ((uint64_t)st.st_size != sizeof *h + h->payload_len || h->n_dead > h->payload_len / 8 ||
        (kind == SIDX_FLAT && h->n_dead != 0))
        return fail(SIDX_EIO, "index file is truncated or damaged");
    uint64_t hash = 0;
    int rc = file_hash(f, *h, &hash);
    if (rc != 0) return rc;
    if (hash != h->payload_hash) return fail(SIDX_EIO, "index file checksum mismatch");
    if (fseeko(f, sizeof *h, SEEK_SET) != 0) return fail(SIDX_EIO, "seek: %s", strerror(errno));
    return 0;
}

static int read_dead(FILE *f, uint64_t n, int64_t **out)
{
    *out = malloc(n ? (size_t)n * sizeof **out : 1);
    if (!*out) return fail(SIDX_ENOMEM, "out of memory");
    if (fread(*out, sizeof **out, (size_t)n, f) != n) return fail(SIDX_EIO, "read error");
    return 0;
}

/* Marks the saved tombstones and collects the live ids; all of it must be consistent
 * with the FAISS index read after the checksum matched, or the file lies. */
static int restore(sidx *ix, const int64_t *dead, int64_t n_dead)
{
    idx_t *id_map = NULL;
    size_t n_map = 0;
    faiss_IndexIDMap2_id_map(ix->idmap2, &id_map, &n_map);
    int64_t total = faiss_Index_ntotal(ix->sub);
    if ((int64_t)n_map != total || faiss_Index_ntotal(ix->index) != total)
        return fail(SIDX_EMISMATCH, "index file: id map and index sizes differ");
    if (map_reserve(&ix->live, total) != 0 ||
        (ix->kind == SIDX_HNSW && dead_reserve(ix, total) != 0))
        return fail(SIDX_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n_dead; i++) {
        if (dead[i] < 0 || dead[i] >= total || (i > 0 && dead[i] <= dead[i - 1]))
            return fail(SIDX_EMISMATCH, "index file: bad tombstone %lld", (long long)dead[i]);
        set_dead(ix, dead[i]);
    }
    bool hnsw = ix->kind == SIDX_HNSW;
    for (int64_t p = 0; p < total; p++) {
        if (hnsw && is_dead(ix, p)) continue;
        if (id_map[p] < 0 || map_find(&ix->live, id_map[p]))
            return fail(SIDX_EMISMATCH, "index file: id %lld negative or repeated",
                        (long long)id_map[p]);
        map_put(&ix->live, id_map[p], hnsw ? p : -1);
    }
    return 0;
}

/* The live ids are distinct, so equal counts and ids ⊆ live mean the sets are equal. */
static int match_ids(const sidx *ix, const int64_t *ids, int64_t n)
{
    if ((int64_t)ix->live.len != n)
        return fail(SIDX_EMISMATCH, "index file holds %zu live ids, the database %lld",
                    ix->live.len, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (!map_find(&ix->live, ids[i]))
            return fail(SIDX_EMISMATCH, "index file lacks id %lld", (long long)ids[i]);
    return 0;
}

static bool ascending(const int64_t *ids, int64_t n)
{
    for (int64_t i = 1; i < n; i++)
        if (ids[i] <= ids[i - 1]) return false;
    return true;
}

int sidx_load(const char *path, int dim, enum sidx_kind kind, const int64_t *ids, int64_t n,
              sidx **out)
{
    if (!out) return fail(SIDX_EINVAL, "sidx_load: out is NULL");
    *out = NULL;
    if (!path || dim <= 0 || !valid_kind(kind) || n < 0 || (n > 0 && !ids) || !ascending(ids, n))
        return fail(SIDX_EINVAL, "sidx_load: bad arguments");
    FILE *f = fopen(path, "rbe");
    if (!f) return fail(SIDX_EIO, "open %s: %s", path, strerror(errno));
    int64_t *dead = NULL;
    FaissIndex *index = NULL;
    sidx *ix = NULL;
    struct file_header h;
    int rc = read_header(f, dim, kind, &h);
    if (rc == 0) rc = read_dead(f, h.n_dead, &dead);
    if (rc != 0) goto fail;
    /* the checksum matched, so a FAISS failure means a format this FAISS cannot read */
    if (faiss_read_index(f, 0, &index) != 0) {
        rc = faiss_fail(SIDX_EMISMATCH, "read_index");
        goto fail;
    }
    rc = wrap(index, dim, kind, &ix);
    if (rc != 0) goto fail;
    index = NULL; /* ix owns it now */
    rc = restore(ix, dead, (int64_t)h.n_dead);
    if (rc == 0) rc = match_ids(ix, ids, n);
    if (rc != 0) goto fail;
    free(dead);
    fclose(f);
    *out = ix;
    return 0;
fail:
    sidx_free(ix);
    if (index) faiss_Index_free(index);
    free(dead);
    fclose(f);
    return rc;
}
