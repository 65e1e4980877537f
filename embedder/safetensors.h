/*
 * safetensors — a read-only, validating reader of the safetensors format.
 *
 * File format (little-endian):
 *     u64 N                      length of the header
 *     N bytes                    JSON object: for each tensor name
 *                                  {"dtype": "F32"|"F16"|..., "shape": [d0, d1, ...],
 *                                   "data_offsets": [begin, end]}
 *                                and an optional "__metadata__": {string: string}
 *     data                       tensor bytes; offsets are relative to the data start
 *
 * Everything is checked before use: the header length against the file size, the JSON,
 * every dtype, every dimension (and their product, for overflow), every offset pair
 * against the data size and against the byte size its dtype and shape imply. A bad file
 * yields EMB_EFORMAT and a message naming the tensor and the problem.
 *
 * The file is mmap'd read-only; tensor data pointers stay valid until emb_st_close().
 * Not thread-safe to open/close; lookups on an open file may run on any thread.
 */
#ifndef EMB_SAFETENSORS_H
#define EMB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define EMB_ST_MAX_DIMS 8

enum emb_st_dtype { EMB_ST_F32, EMB_ST_F16, EMB_ST_BF16, EMB_ST_I64, EMB_ST_I32, EMB_ST_OTHER };

struct emb_st_tensor {
    const char *name;
    enum emb_st_dtype dtype;
    int ndim;
    int64_t shape[EMB_ST_MAX_DIMS];
    int64_t numel;
    const void *data; /* into the mapping; numel * element size bytes */
    size_t nbytes;
};

typedef struct emb_st_file emb_st_file;

/* Parses an in-memory image (borrowed for the file's life). Used by the fuzz target. */
int emb_st_parse(const void *buf, size_t len, emb_st_file **out, char *err, size_t errlen);

int emb_st_open(const char *path, emb_st_file **out, char *err, size_t errlen);
void emb_st_close(emb_st_file *f); /* accepts NULL */

int emb_st_count(const emb_st_file *f);
const struct emb_st_tensor *emb_st_at(const emb_st_file *f, int i);
/* NULL when absent. Borrowed, valid until emb_st_close(). */
const struct emb_st_tensor *emb_st_find(const emb_st_file *f, const char *name);

#endif
