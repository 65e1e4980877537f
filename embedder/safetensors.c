#include "safetensors.h"

#include "embedder.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is refused before it is parsed. */
#define MAX_HEADER (100u << 20)

struct emb_st_file {
    void *map; /* NULL when parsed from a caller's buffer */
    size_t map_len;
    json_t *header;
    int n;
    struct emb_st_tensor *t;
};

static const struct {
    const char *name;
    enum emb_st_dtype dtype;
    size_t size;
} dtypes[] = {
    {"F32", EMB_ST_F32, 4},  {"F16", EMB_ST_F16, 2},  {"BF16", EMB_ST_BF16, 2},
    {"I64", EMB_ST_I64, 8},  {"I32", EMB_ST_I32, 4},  {"F64", EMB_ST_OTHER, 8},
    {"I16", EMB_ST_OTHER, 2}, {"I8", EMB_ST_OTHER, 1}, {"U8", EMB_ST_OTHER, 1},
    {"BOOL", EMB_ST_OTHER, 1}, {"U16", EMB_ST_OTHER, 2}, {"U32", EMB_ST_OTHER, 4},
    {"U64", EMB_ST_OTHER, 8}, {"F8_E4M3", EMB_ST_OTHER, 1}, {"F8_E5M2", EMB_ST_OTHER, 1},
};

void emb_st_close(emb_st_file *f)
{
    if (!f)
        return;
    if (f->map)
        munmap(f->map, f->map_len);
    json_decref(f->header);
    free(f->t);
    free(f);
}

static int bad(char *err, size_t errlen, const char *name, const char *what)
{
    if (name)
        snprintf(err, errlen, "tensor '%.200s': %s", name, what);
    else
        snprintf(err, errlen, "%s", what);
    return EMB_EFORMAT;
}

/* json integer >= 0 */
static int get_u64(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_tensor(const char *name, json_t *v, const uint8_t *data, uint64_t data_len,
                        struct emb_st_tensor *t, char *err, size_t errlen)
{
    if (!json_is_object(v))
        return bad(err, errlen, name, "entry is not an object");
    json_t *dt = json_object_get(v, "dtype");
    json_t *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt))
        return bad(err, errlen, name, "missing or non-string dtype");
    size_t esize = 0;
    t->dtype = EMB_ST_OTHER;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(json_string_value(dt), dtypes[i].name)) {
            esize = dtypes[i].size;
            t->dtype = dtypes[i].dtype;
        }
    if (!esize)
        return bad(err, errlen, name, "unknown dtype");
    if (!json_is_array(shape) || json_array_size(shape) > EMB_ST_MAX_DIMS)
        return bad(err, errlen, name, "shape is not an array of at most 8 dimensions");
    t->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (get_u64(json_array_get(shape, (size_t)i), &d))
            return bad(err, errlen, name, "shape has a negative or non-integer dimension");
        if (d && numel > UINT64_MAX / d)
            return bad(err, errlen, name, "shape overflows");
        numel *= d;
        t->shape[i] = (int64_t)d;
    }
    if (numel > UINT64_MAX / esize)
        return bad(err, errlen, name, "size overflows");
    uint64_t begin, end;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        get_u64(json_array_get(offs, 0), &begin) || get_u64(json_array_get(offs, 1), &end))
        return bad(err, errlen, name, "data_offsets is not a pair of non-negative integers");
    if (begin > end || end > data_len)
        return bad(err, errlen, name, "data_offsets lie outside the data");
    if (end - begin != numel * esize)
        return bad(err, errlen, name, "data_offsets disagree with dtype and shape");
    t->name = name;
    t->numel = (int64_t)numel;
    t->data = data + begin;
    t->nbytes = (size_t)(end - begin);
    return 0;
}

int emb_st_parse(const void *buf, size_t len, emb_st_file **out, char *err, size_t errlen)
{
    *out = NULL;
    const uint8_t *p = buf;
    if (len < 8)
        return bad(err, errlen, NULL, "file shorter than the 8-byte header length");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | p[i];
    if (hlen > len - 8 || hlen > MAX_HEADER)
        return bad(err, errlen, NULL, "header length exceeds the file size");
    emb_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return EMB_ENOMEM;
    json_error_t je;
    f->header = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    int rc = EMB_EFORMAT;
    if (!f->header) {
        snprintf(err, errlen, "header is not valid JSON: %s (byte %d)", je.text, je.position);
        goto fail;
    }
    if (!json_is_object(f->header)) {
        bad(err, errlen, NULL, "header is not a JSON object");
        goto fail;
    }
    size_t n = json_object_size(f->header);
    f->t = calloc(n ? n : 1, sizeof *f->t);
    if (!f->t) {
        rc = EMB_ENOMEM;
        goto fail;
    }
    const uint8_t *data = p + 8 + hlen;
    uint64_t data_len = len - 8 - hlen;
    const char *name;
    json_t *v;
    json_object_foreach(f->header, name, v)
    {
        if (!strcmp(name, "__metadata__")) {
            if (!json_is_object(v)) {
                bad(err, errlen, NULL, "__metadata__ is not an object");
                goto fail;
            }
            continue;
        }
        rc = parse_tensor(name, v, data, data_len, &f->t[f->n], err, errlen);
        if (rc)
            goto fail;
        f->n++;
    }
    *out = f;
    return 0;
fail:
    emb_st_close(f);
    return rc;
}

int emb_st_open(const char *path, emb_st_file **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return EMB_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        snprintf(err, errlen, "%s: empty or unreadable", path);
        close(fd);
        return EMB_EIO;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        return EMB_EIO;
    }
    char msg[512];
    int rc = emb_st_parse(map, (size_t)st.st_size, out, msg, sizeof msg);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, msg);
        munmap(map, (size_t)st.st_size);
        return rc;
    }
    (*out)->map = map;
    (*out)->map_len = (size_t)st.st_size;
    return 0;
}

int emb_st_count(const emb_st_file *f)
{
    return f->n;
}

const struct emb_st_tensor *emb_st_at(const emb_st_file *f, int i)
{
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const struct emb_st_tensor *emb_st_find(const emb_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}
