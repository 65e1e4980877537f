/*
 * gguf — a read-only, validating reader of GGUF model files (versions 2 and 3).
 *
 * File format (little-endian throughout):
 *
 *     u32 magic            "GGUF" (0x46554747)
 *     u32 version          2 or 3 (version 1 used 32-bit counts and is refused)
 *     u64 n_tensors
 *     u64 n_kv
 *     n_kv x key/value:
 *         string key       a string is u64 length + that many bytes (no terminator)
 *         u32 type         0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
 *                          8 string, 9 array, 10 u64, 11 i64, 12 f64
 *         value            scalars as their size; an array is u32 element type +
 *                          u64 count + elements (no nested arrays)
 *     n_tensors x tensor info:
 *         string name
 *         u32 n_dims       1..4
 *         u64 ne[n_dims]   elements per dimension, ne[0] varies fastest
 *         u32 type         ggml type (F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 8, BF16 30, ...)
 *         u64 offset       from the start of the data section; a multiple of alignment
 *     padding to general.alignment (default 32)
 *     data section         tensor data
 *
 * Everything is checked before it is used: every count, length and offset against the
 * bytes that remain, every product of dimensions for overflow, every tensor's byte
 * range against the data section, its row length against its type's block size. A bad
 * file gives ENG_EFORMAT (ENG_ENOTSUP for an unknown tensor type) and a message that
 * names the key or tensor and what is wrong; never a crash or an out-of-bounds read.
 *
 * The file is mmap'd read-only; every pointer returned stays valid until gguf_close().
 * Opening and closing are single-threaded; lookups may run on any thread.
 */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stddef.h>
#include <stdint.h>

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL,
    GGUF_STRING, GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64,
};

/* ggml tensor types this project knows the layout of */
enum ggml_type {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12,
    GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_BF16 = 30,
};

struct gguf_str {
    const char *p; /* into the mapping; not NUL-terminated */
    uint64_t len;
};

struct gguf_kv {
    struct gguf_str key;
    enum gguf_vtype type;
    union {
        uint64_t u;   /* unsigned integers and bool */
        int64_t i;    /* signed integers */
        double f;     /* f32, f64 */
        struct gguf_str s;
        struct {
            enum gguf_vtype type;
            uint64_t n;
            const void *data;          /* the packed elements (not for strings) */
            const struct gguf_str *strs; /* [n], for arrays of strings */
        } arr;
    } v;
};

#define GGUF_MAX_DIMS 4

struct gguf_tensor {
    char *name; /* NUL-terminated copy */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* unused dimensions are 1 */
    enum ggml_type type;
    int64_t nelem;
    size_t nbytes;
    const void *data; /* into the mapping */
};

typedef struct gguf_file gguf_file;

/* Parses an in-memory image (borrowed for the file's life); used by the fuzz target. */
int gguf_parse(const void *buf, size_t len, gguf_file **out, char *err, size_t errlen);
int gguf_open(const char *path, gguf_file **out, char *err, size_t errlen);
void gguf_close(gguf_file *f); /* accepts NULL */

uint32_t gguf_version(const gguf_file *f);
/* the file's size as gguf_open() mapped it; 0 for an image gguf_parse() borrowed */
size_t gguf_mapped_bytes(const gguf_file *f);
int gguf_n_kv(const gguf_file *f);
const struct gguf_kv *gguf_kv_at(const gguf_file *f, int i);
const struct gguf_kv *gguf_find_kv(const gguf_file *f, const char *key); /* NULL if absent */

/*
 * Typed getters. Return 0, ENG_EINVAL when the key is absent (out untouched), or
 * ENG_EFORMAT when it has another type or its value does not fit.
 */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, int *out);
int gguf_get_str(const gguf_file *f, const char *key, struct gguf_str *out);
/* An array with elements of type want (GGUF_STRING: use ->v.arr.strs). */
int gguf_get_arr(const gguf_file *f, const char *key, enum gguf_vtype want,
                 const struct gguf_kv **out);

int gguf_n_tensors(const gguf_file *f);
const struct gguf_tensor *gguf_tensor_at(const gguf_file *f, int i);
const struct gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Block geometry of a ggml type: elements per block and bytes per block; 0 if unknown. */
int ggml_type_block(enum ggml_type t, int *elems, int *bytes);
const char *ggml_type_name(enum ggml_type t);

#endif
