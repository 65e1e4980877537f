/*
 * gguf_writer.h — the engine tests' GGUF writer: a growing buffer of little-endian fields
 * in the order engine/gguf.h describes (header, metadata keys and values, tensor infos,
 * padding, tensor data). Each test writes the file it needs field by field, so that it can
 * also write what a valid file would not (a hostile count, an unknown type).
 */
#ifndef TESTS_GGUF_WRITER_H
#define TESTS_GGUF_WRITER_H

#include "gguf.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" */

struct gw {
    uint8_t *buf;
    size_t n, cap;
};

static inline void gw_put(struct gw *w, const void *p, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = 2 * (w->n + n);
        w->buf = realloc(w->buf, w->cap);
        cr_assert_not_null(w->buf);
    }
    if (n) memcpy(w->buf + w->n, p, n);
    w->n += n;
}

static inline void gw_u32(struct gw *w, uint32_t v)
{
    gw_put(w, &v, 4);
}

static inline void gw_u64(struct gw *w, uint64_t v)
{
    gw_put(w, &v, 8);
}

static inline void gw_f32(struct gw *w, float v)
{
    gw_put(w, &v, 4);
}

/* a GGUF string: its length (u64), then its bytes */
static inline void gw_strn(struct gw *w, const char *s, size_t n)
{
    gw_u64(w, n);
    gw_put(w, s, n);
}

static inline void gw_str(struct gw *w, const char *s)
{
    gw_strn(w, s, strlen(s));
}

/* zero bytes up to the next multiple of align */
static inline void gw_pad(struct gw *w, size_t align)
{
    static const uint8_t zero[64];
    while (w->n % align)
        gw_put(w, zero, align - w->n % align < sizeof zero ? align - w->n % align : sizeof zero);
}

/* starts the buffer over with a header: magic, version, tensor and key counts */
static inline void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    w->n = 0;
    gw_u32(w, GGUF_MAGIC);
    gw_u32(w, version);
    gw_u64(w, n_tensors);
    gw_u64(w, n_kv);
}

static inline void gw_kv_str(struct gw *w, const char *key, const char *val)
{
    gw_str(w, key);
    gw_u32(w, GGUF_STRING);
    gw_str(w, val);
}

static inline void gw_kv_u32(struct gw *w, const char *key, uint32_t val)
{
    gw_str(w, key);
    gw_u32(w, GGUF_U32);
    gw_u32(w, val);
}

static inline void gw_kv_f32(struct gw *w, const char *key, float val)
{
    gw_str(w, key);
    gw_u32(w, GGUF_F32);
    gw_f32(w, val);
}

static inline void gw_kv_bool(struct gw *w, const char *key, int val)
{
    const uint8_t b = (uint8_t)val;
    gw_str(w, key);
    gw_u32(w, GGUF_BOOL);
    gw_put(w, &b, 1);
}

/* an array's key, element type and count; the elements follow (gw_str(), gw_put()) */
static inline void gw_kv_array(struct gw *w, const char *key, uint32_t type, uint64_t n)
{
    gw_str(w, key);
    gw_u32(w, GGUF_ARRAY);
    gw_u32(w, type);
    gw_u64(w, n);
}

/* a 2-D tensor's info: name, dimensions [ne0, ne1], type, offset in the data section */
static inline void gw_tensor_info(struct gw *w, const char *name, uint64_t ne0, uint64_t ne1,
                                  uint32_t type, uint64_t offset)
{
    gw_str(w, name);
    gw_u32(w, 2);
    gw_u64(w, ne0);
    gw_u64(w, ne1);
    gw_u32(w, type);
    gw_u64(w, offset);
}

static inline void gw_free(struct gw *w)
{
    free(w->buf);
    *w = (struct gw){0};
}

#endif
