#include "gguf.h"

#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u
#define DEFAULT_ALIGNMENT 32

struct gguf_file {
    void *map; /* NULL when parsed from a caller's buffer */
    size_t map_len;
    uint32_t version;
    int n_kv, n_tensors;
    struct gguf_kv *kv;
    struct gguf_tensor *t;
    struct gguf_str **str_arrays; /* allocations behind kv[].v.arr.strs */
    int n_str_arrays;
};

/* A bounds-checked cursor over the image. */
struct rd {
    const uint8_t *p;
    size_t len, pos;
    char *err;
    size_t errlen;
};

static int fail(struct rd *r, const char *fmt, const char *what)
{
    snprintf(r->err, r->errlen, fmt, what);
    return ENG_EFORMAT;
}

static int need(struct rd *r, uint64_t n, const char *what)
{
    if (n > r->len - r->pos) {
        snprintf(r->err, r->errlen, "truncated file: %s needs %llu bytes at offset %zu, %zu left",
                 what, (unsigned long long)n, r->pos, r->len - r->pos);
        return ENG_EFORMAT;
    }
    return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int rd_u(struct rd *r, int n, uint64_t *out, const char *what)
{
    int rc = need(r, (uint64_t)n, what);
    if (rc)
        return rc;
    *out = le(r->p + r->pos, n);
    r->pos += (size_t)n;
    return 0;
}

static int rd_str(struct rd *r, struct gguf_str *s, const char *what)
{
    uint64_t n;
    int rc = rd_u(r, 8, &n, what);
    if (rc || (rc = need(r, n, what)))
        return rc;
    s->p = (const char *)r->p + r->pos;
    s->len = n;
    r->pos += (size_t)n;
    return 0;
}

static int scalar_size(enum gguf_vtype t)
{
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

static void read_scalar(struct gguf_kv *kv, const uint8_t *p)
{
    uint64_t raw = le(p, scalar_size(kv->type));
    switch (kv->type) {
    case GGUF_I8: kv->v.i = (int8_t)raw; break;
    case GGUF_I16: kv->v.i = (int16_t)raw; break;
    case GGUF_I32: kv->v.i = (int32_t)raw; break;
    case GGUF_I64: kv->v.i = (int64_t)raw; break;
    case GGUF_F32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        kv->v.f = f;
        break;
    }
    case GGUF_F64: memcpy(&kv->v.f, &raw, 8); break;
    default: kv->v.u = raw; break;
    }
}

static int read_kv(gguf_file *f, struct rd *r, struct gguf_kv *kv)
{
    uint64_t type;
    int rc;
    if ((rc = rd_str(r, &kv->key, "a metadata key")) || (rc = rd_u(r, 4, &type, "a value type")))
        return rc;
    char key[96];
    snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 80 ? kv->key.len : 80), kv->key.p);
    kv->type = (enum gguf_vtype)type;
    if (type == GGUF_STRING)
        return rd_str(r, &kv->v.s, key);
    if (type == GGUF_ARRAY) {
        uint64_t et, n;
        if ((rc = rd_u(r, 4, &et, key)) || (rc = rd_u(r, 8, &n, key)))
            return rc;
        kv->v.arr.type = (enum gguf_vtype)et;
        kv->v.arr.n = n;
        if (et == GGUF_STRING) {
            /* every element is at least its 8-byte length */
            if (n > (r->len - r->pos) / 8)
                return fail(r, "metadata '%s': array count exceeds the file", key);
            struct gguf_str *s = malloc(sizeof *s * (n ? n : 1));
            struct gguf_str **keep =
                realloc(f->str_arrays, sizeof *keep * (size_t)(f->n_str_arrays + 1));
            if (!s || !keep) {
                free(s);
                if (keep)
                    f->str_arrays = keep;
                return ENG_ENOMEM;
            }
            f->str_arrays = keep;
            f->str_arrays[f->n_str_arrays++] = s;
            for (uint64_t i = 0; i < n; i++)
                if ((rc = rd_str(r, &s[i], key)))
                    return rc;
            kv->v.arr.strs = s;
            return 0;
        }
        int es = scalar_size((enum gguf_vtype)et);
        if (!es)
            return fail(r, "metadata '%s': array of an unknown or nested type", key);
        if (n > (r->len - r->pos) / (uint64_t)es)
            return fail(r, "metadata '%s': array count exceeds the file", key);
        kv->v.arr.data = r->p + r->pos;
        r->pos += (size_t)(n * (uint64_t)es);
        return 0;
    }
    int sz = scalar_size(kv->type);
    if (!sz)
        return fail(r, "metadata '%s': unknown value type", key);
    if ((rc = need(r, (uint64_t)sz, key)))
        return rc;
    read_scalar(kv, r->p + r->pos);
    r->pos += (size_t)sz;
    return 0;
}

static const struct {
    enum ggml_type t;
    const char *name;
    int elems, bytes;
} types[] = {
    {GGML_F32, "F32", 1, 4},       {GGML_F16, "F16", 1, 2},       {GGML_BF16, "BF16", 1, 2},
    {GGML_Q4_0, "Q4_0", 32, 18},   {GGML_Q4_1, "Q4_1", 32, 20},   {GGML_Q5_0, "Q5_0", 32, 22},
    {GGML_Q5_1, "Q5_1", 32, 24},   {GGML_Q8_0, "Q8_0", 32, 34},   {GGML_Q8_1, "Q8_1", 32, 36},
    {GGML_Q2_K, "Q2_K", 256, 84},  {GGML_Q3_K, "Q3_K", 256, 110}, {GGML_Q4_K, "Q4_K", 256, 144},
    {GGML_Q5_K, "Q5_K", 256, 176}, {GGML_Q6_K, "Q6_K", 256, 210}, {GGML_Q8_K, "Q8_K", 256, 292},
};

int ggml_type_block(enum ggml_type t, int *elems, int *bytes)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].t == t) {
            *elems = types[i].elems;
            *bytes = types[i].bytes;
            return 1;
        }
    return 0;
}

const char *ggml_type_name(enum ggml_type t)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].t == t)
            return types[i].name;
    return "unknown";
}

static int read_tensor_info(struct rd *r, struct gguf_tensor *t, uint64_t *offset)
{
    struct gguf_str name;
    uint64_t nd, type;
    int rc;
    if ((rc = rd_str(r, &name, "a tensor name")))
        return rc;
    t->name = strndup(name.p, name.len);
    if (!t->name)
        return ENG_ENOMEM;
    if (strlen(t->name) != name.len || name.len == 0)
        return fail(r, "tensor '%s': empty name or a NUL byte in it", t->name);
    if ((rc = rd_u(r, 4, &nd, t->name)))
        return rc;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return fail(r, "tensor '%s': dimension count not in 1..4", t->name);
    t->n_dims = (int)nd;
    uint64_t nelem = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && (rc = rd_u(r, 8, &ne, t->name)))
            return rc;
        if (ne == 0 || ne > INT64_MAX || nelem > (uint64_t)INT64_MAX / ne)
            return fail(r, "tensor '%s': a dimension is zero or the element count overflows",
                        t->name);
        nelem *= ne;
        t->ne[d] = (int64_t)ne;
    }
    t->nelem = (int64_t)nelem;
    if ((rc = rd_u(r, 4, &type, t->name)) || (rc = rd_u(r, 8, offset, t->name)))
        return rc;
    t->type = (enum ggml_type)type;
    int be, bb;
    if (!ggml_type_block(t->type, &be, &bb)) {
        snprintf(r->err, r->errlen, "tensor '%s': unsupported ggml type %llu", t->name,
                 (unsigned long long)type);
        return ENG_ENOTSUP;
    }
    if (t->ne[0] % be)
        return fail(r, "tensor '%s': row length is not a multiple of its type's block", t->name);
    uint64_t blocks = nelem / (uint64_t)be;
    if (blocks > SIZE_MAX / (uint64_t)bb)
        return fail(r, "tensor '%s': byte size overflows", t->name);
    t->nbytes = (size_t)(blocks * (uint64_t)bb);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(struct gguf_tensor *const *)a)->name, (*(struct gguf_tensor *const *)b)->name);
}

/* Tensor names must be unique: sorted, duplicates are neighbours (n log n for any file). */
static int check_unique(gguf_file *f, struct rd *r)
{
    if (f->n_tensors < 2)
        return 0;
    struct gguf_tensor **v = malloc(sizeof *v * (size_t)f->n_tensors);
    if (!v)
        return ENG_ENOMEM;
    for (int i = 0; i < f->n_tensors; i++)
        v[i] = &f->t[i];
    qsort(v, (size_t)f->n_tensors, sizeof *v, by_name);
    int rc = 0;
    for (int i = 1; i < f->n_tensors && !rc; i++)
        if (!strcmp(v[i - 1]->name, v[i]->name))
            rc = fail(r, "tensor '%s' appears twice", v[i]->name);
    free(v);
    return rc;
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_tensors; i++)
        free(f->t[i].name);
    for (int i = 0; i < f->n_str_arrays; i++)
        free(f->str_arrays[i]);
    free(f->str_arrays);
    free(f->t);
    free(f->kv);
    if (f->map)
        munmap(f->map, f->map_len);
    free(f);
}

int gguf_parse(const void *buf, size_t len, gguf_file **out, char *err, size_t errlen)
{
    *out = NULL;
    struct rd r = {buf, len, 0, err, errlen};
    uint64_t magic, version, n_tensors, n_kv;
    int rc;
    if ((rc = rd_u(&r, 4, &magic, "the magic")))
        return rc;
    if (magic != GGUF_MAGIC)
        return fail(&r, "%s", "not a GGUF file (bad magic)");
    if ((rc = rd_u(&r, 4, &version, "the version")))
        return rc;
    if (version != 2 && version != 3) {
        snprintf(err, errlen, "GGUF version %llu is not supported (2 and 3 are)",
                 (unsigned long long)version);
        return version == 1 ? ENG_ENOTSUP : ENG_EFORMAT;
    }
    if ((rc = rd_u(&r, 8, &n_tensors, "the tensor count")) ||
        (rc = rd_u(&r, 8, &n_kv, "the metadata count")))
        return rc;
    /* each key/value takes at least 12 bytes, each tensor info at least 24 */
    if (n_kv > (len - r.pos) / 12 || n_tensors > (len - r.pos) / 24)
        return fail(&r, "%s", "metadata or tensor count exceeds the file");

    gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return ENG_ENOMEM;
    f->version = (uint32_t)version;
    f->kv = calloc(n_kv ? n_kv : 1, sizeof *f->kv);
    f->t = calloc(n_tensors ? n_tensors : 1, sizeof *f->t);
    rc = ENG_ENOMEM;
    if (!f->kv || !f->t)
        goto bad;
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((rc = read_kv(f, &r, &f->kv[i])))
            goto bad;
        f->n_kv++;
    }
    uint64_t alignment = DEFAULT_ALIGNMENT;
    const struct gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_U32 || al->v.u == 0 || (al->v.u & (al->v.u - 1))) {
            rc = fail(&r, "%s", "general.alignment is not a power-of-two u32");
            goto bad;
        }
        alignment = al->v.u;
    }
    uint64_t *offsets = calloc(n_tensors ? n_tensors : 1, sizeof *offsets);
    if (!offsets) {
        rc = ENG_ENOMEM; /* (rc is 0 here: without this, a failure would return success) */
        goto bad;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        rc = read_tensor_info(&r, &f->t[i], &offsets[i]);
        f->n_tensors++; /* the name is owned now, whatever rc says */
        if (rc) {
            free(offsets);
            goto bad;
        }
    }
    if ((rc = check_unique(f, &r))) {
        free(offsets);
        goto bad;
    }
    size_t data_start = (size_t)((r.pos + alignment - 1) / alignment * alignment);
    if (n_tensors && data_start > len) {
        free(offsets);
        rc = fail(&r, "%s", "truncated file: no data section");
        goto bad;
    }
    uint64_t data_len = data_start <= len ? len - data_start : 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        struct gguf_tensor *t = &f->t[i];
        if (offsets[i] % alignment || offsets[i] > data_len ||
            t->nbytes > data_len - offsets[i]) {
            rc = fail(&r, "tensor '%s': data lies outside the file or is misaligned", t->name);
            free(offsets);
            goto bad;
        }
        t->data = (const uint8_t *)buf + data_start + offsets[i];
    }
    free(offsets);
    *out = f;
    return 0;
bad:
    gguf_close(f);
    return rc;
}

int gguf_open(const char *path, gguf_file **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return ENG_EIO;
    }
    struct stat st;
    const int got = fstat(fd, &st) == 0;
    if (got && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file%s", path,
                 S_ISDIR(st.st_mode) ? " (a directory)" : "");
        close(fd);
        return ENG_EIO;
    }
    if (!got || st.st_size <= 0) {
        snprintf(err, errlen, "%s: empty or unreadable", path);
        close(fd);
        return ENG_EIO;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        return ENG_EIO;
    }
    char msg[512];
    int rc = gguf_parse(map, (size_t)st.st_size, out, msg, sizeof msg);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, msg);
        munmap(map, (size_t)st.st_size);
        return rc;
    }
    (*out)->map = map;
    (*out)->map_len = (size_t)st.st_size;
    return 0;
}

uint32_t gguf_version(const gguf_file *f)
{
    return f->version;
}

size_t gguf_mapped_bytes(const gguf_file *f)
{
    return f->map_len;
}

int gguf_n_kv(const gguf_file *f)
{
    return f->n_kv;
}

const struct gguf_kv *gguf_kv_at(const gguf_file *f, int i)
{
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}

const struct gguf_kv *gguf_find_kv(const gguf_file *f, const char *key)
{
    size_t n = strlen(key);
    for (int i = 0; i < f->n_kv; i++)
        if (f->kv[i].key.len == n && !memcmp(f->kv[i].key.p, key, n))
            return &f->kv[i];
    return NULL;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return ENG_EINVAL;
    switch (kv->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
        if (kv->v.u > UINT32_MAX)
            return ENG_EFORMAT;
        *out = (uint32_t)kv->v.u;
        return 0;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64:
        if (kv->v.i < 0 || kv->v.i > (int64_t)UINT32_MAX)
            return ENG_EFORMAT;
        *out = (uint32_t)kv->v.i;
        return 0;
    default:
        return ENG_EFORMAT;
    }
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return ENG_EINVAL;
    if (kv->type != GGUF_F32 && kv->type != GGUF_F64)
        return ENG_EFORMAT;
    *out = (float)kv->v.f;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return ENG_EINVAL;
    if (kv->type != GGUF_BOOL)
        return ENG_EFORMAT;
    *out = kv->v.u != 0;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, struct gguf_str *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return ENG_EINVAL;
    if (kv->type != GGUF_STRING)
        return ENG_EFORMAT;
    *out = kv->v.s;
    return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, enum gguf_vtype want,
                 const struct gguf_kv **out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return ENG_EINVAL;
    if (kv->type != GGUF_ARRAY || kv->v.arr.type != want)
        return ENG_EFORMAT;
    *out = kv;
    return 0;
}

int gguf_n_tensors(const gguf_file *f)
{
    return f->n_tensors;
}

const struct gguf_tensor *gguf_tensor_at(const gguf_file *f, int i)
{
    return i >= 0 && i < f->n_tensors ? &f->t[i] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}
