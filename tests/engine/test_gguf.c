/* tests engine/gguf.c: a file written here is read back exactly; every truncation and
 * a set of hostile edits are refused with a message; the default model's metadata. */
#include "engine.h"
#include "gguf.h"
#include "gguf_writer.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* A small valid file: 4 metadata keys, two tensors (F32 [4] "norm.weight", Q8_0 [32 x 2]
 * named qname). */
static size_t build_named(struct gw *w, uint32_t version, const char *qname)
{
    gw_header(w, version, 2, 4);
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_u32(w, "llama.block_count", 30);
    gw_kv_f32(w, "llama.rope.freq_base", 100000.0f);
    gw_kv_array(w, "tokenizer.ggml.tokens", GGUF_STRING, 3);
    gw_str(w, "<s>");
    gw_str(w, "a");
    gw_str(w, "bc");
    gw_str(w, "norm.weight");
    gw_u32(w, 1);
    gw_u64(w, 4);
    gw_u32(w, GGML_F32);
    gw_u64(w, 0);
    gw_tensor_info(w, qname, 32, 2, GGML_Q8_0, 32); /* aligned */
    gw_pad(w, 32);
    const float v[4] = {1, 2, 3, 4};
    gw_put(w, v, 16);
    gw_pad(w, 32); /* up to offset 32 */
    for (int i = 0; i < 68; i++) {
        const uint8_t b = (uint8_t)i;
        gw_put(w, &b, 1);
    }
    return w->n;
}

static size_t build(struct gw *w, uint32_t version)
{
    return build_named(w, version, "q.weight");
}

Test(gguf, reads_back_what_was_written)
{
    struct gw w = {0};
    size_t n = build(&w, 3);
    gguf_file *f;
    char err[256];
    cr_assert_eq(gguf_parse(w.buf, n, &f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gguf_version(f), 3);
    cr_assert_eq(gguf_n_kv(f), 4);
    struct gguf_str s;
    cr_assert_eq(gguf_get_str(f, "general.architecture", &s), 0);
    cr_assert(s.len == 5 && !memcmp(s.p, "llama", 5));
    uint32_t u;
    cr_assert_eq(gguf_get_u32(f, "llama.block_count", &u), 0);
    cr_assert_eq(u, 30);
    float fb;
    cr_assert_eq(gguf_get_f32(f, "llama.rope.freq_base", &fb), 0);
    cr_assert_eq(fb, 100000.0f);
    cr_assert_eq(gguf_get_u32(f, "llama.rope.freq_base", &u), ENG_EFORMAT, "wrong type");
    cr_assert_eq(gguf_get_u32(f, "missing", &u), ENG_EINVAL);
    const struct gguf_kv *toks;
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks), 0);
    cr_assert_eq(toks->v.arr.n, 3);
    cr_assert(toks->v.arr.strs[2].len == 2 && !memcmp(toks->v.arr.strs[2].p, "bc", 2));
    cr_assert_eq(gguf_n_tensors(f), 2);
    const struct gguf_tensor *t = gguf_find_tensor(f, "norm.weight");
    cr_assert(t && t->type == GGML_F32 && t->n_dims == 1 && t->ne[0] == 4 && t->nbytes == 16);
    cr_assert_eq(((const float *)t->data)[3], 4.0f);
    t = gguf_find_tensor(f, "q.weight");
    cr_assert(t && t->ne[0] == 32 && t->ne[1] == 2 && t->nelem == 64 && t->nbytes == 68);
    cr_assert_eq(((const uint8_t *)t->data)[67], 67);
    gguf_close(f);

    build(&w, 2);
    cr_assert_eq(gguf_parse(w.buf, n, &f, err, sizeof err), 0, "version 2: %s", err);
    gguf_close(f);
    gw_free(&w);
}

Test(gguf, every_truncation_is_refused)
{
    struct gw w = {0};
    size_t n = build(&w, 3);
    for (size_t len = 0; len < n; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exact size: the sanitizer sees overreads */
        memcpy(copy, w.buf, len);
        gguf_file *f = NULL;
        char err[256] = "";
        int rc = gguf_parse(copy, len, &f, err, sizeof err);
        cr_assert(rc == ENG_EFORMAT && !f, "length %zu of %zu: rc %d", len, n, rc);
        cr_assert(err[0], "length %zu: no message", len);
        free(copy);
    }
    gw_free(&w);
}

static void refused_after(void (*edit)(struct gw *), int want_rc, const char *msg)
{
    struct gw w = {0};
    build(&w, 3);
    edit(&w);
    gguf_file *f = NULL;
    char err[256] = "";
    int rc = gguf_parse(w.buf, w.n, &f, err, sizeof err);
    cr_assert_eq(rc, want_rc, "%s: rc %d (%s)", msg, rc, err);
    cr_assert(strstr(err, msg), "got '%s', want '%s'", err, msg);
    gw_free(&w);
}

/* offsets in the image of build() */
#define OFF_KV_COUNT 16
#define OFF_FIRST_KEY_LEN 24

static void bad_magic(struct gw *w)
{
    w->buf[0] = 'X';
}
static void version1(struct gw *w)
{
    w->buf[4] = 1;
}
static void huge_kv_count(struct gw *w)
{
    memset(w->buf + OFF_KV_COUNT, 0xff, 8);
}
static void huge_key_length(struct gw *w)
{
    memset(w->buf + OFF_FIRST_KEY_LEN, 0xff, 8);
}
static size_t find(struct gw *w, const char *s)
{
    for (size_t i = 0; i + strlen(s) <= w->n; i++)
        if (!memcmp(w->buf + i, s, strlen(s)))
            return i;
    cr_assert_fail("'%s' not in the image", s);
    return 0;
}
/* tensor "q.weight": name, n_dims u32, ne[0] u64, ne[1] u64, type u32, offset u64 */
static size_t q_info(struct gw *w)
{
    return find(w, "q.weight") + 8;
}
static void offset_beyond(struct gw *w)
{
    uint64_t off = 1 << 20;
    memcpy(w->buf + q_info(w) + 4 + 16 + 4, &off, 8);
}
static void misaligned(struct gw *w)
{
    uint64_t off = 33;
    memcpy(w->buf + q_info(w) + 4 + 16 + 4, &off, 8);
}
static void unknown_type(struct gw *w)
{
    uint32_t t = 99;
    memcpy(w->buf + q_info(w) + 4 + 16, &t, 4);
}
static void dims_overflow(struct gw *w)
{
    uint64_t big = (uint64_t)1 << 40;
    memcpy(w->buf + q_info(w) + 4, &big, 8);
    memcpy(w->buf + q_info(w) + 12, &big, 8);
}
static void zero_dim(struct gw *w)
{
    uint64_t z = 0;
    memcpy(w->buf + q_info(w) + 12, &z, 8);
}
static void five_dims(struct gw *w)
{
    uint32_t d = 5;
    memcpy(w->buf + q_info(w), &d, 4);
}
static void row_not_blocks(struct gw *w)
{
    uint64_t ne0 = 33;
    memcpy(w->buf + q_info(w) + 4, &ne0, 8);
}
static void nested_array(struct gw *w)
{
    size_t p = find(w, "tokenizer.ggml.tokens") + strlen("tokenizer.ggml.tokens") + 4;
    uint32_t t = GGUF_ARRAY;
    memcpy(w->buf + p, &t, 4);
}
static void bad_value_type(struct gw *w)
{
    size_t p = find(w, "llama.block_count") + strlen("llama.block_count");
    uint32_t t = 77;
    memcpy(w->buf + p, &t, 4);
}

Test(gguf, hostile_edits)
{
    refused_after(bad_magic, ENG_EFORMAT, "not a GGUF file");
    refused_after(version1, ENG_ENOTSUP, "GGUF version 1 is not supported");
    refused_after(huge_kv_count, ENG_EFORMAT, "count exceeds the file");
    refused_after(huge_key_length, ENG_EFORMAT, "truncated file");
    refused_after(offset_beyond, ENG_EFORMAT, "tensor 'q.weight': data lies outside the file");
    refused_after(misaligned, ENG_EFORMAT, "misaligned");
    refused_after(unknown_type, ENG_ENOTSUP, "tensor 'q.weight': unsupported ggml type 99");
    refused_after(dims_overflow, ENG_EFORMAT, "overflows");
    refused_after(zero_dim, ENG_EFORMAT, "a dimension is zero");
    refused_after(five_dims, ENG_EFORMAT, "dimension count not in 1..4");
    refused_after(row_not_blocks, ENG_EFORMAT, "not a multiple of its type's block");
    refused_after(nested_array, ENG_EFORMAT, "unknown or nested type");
    refused_after(bad_value_type, ENG_EFORMAT, "metadata 'llama.block_count': unknown value type");
}

Test(gguf, duplicate_tensor_names)
{
    struct gw w = {0};
    size_t n = build_named(&w, 3, "norm.weight");
    gguf_file *f = NULL;
    char err[256] = "";
    cr_assert_eq(gguf_parse(w.buf, n, &f, err, sizeof err), ENG_EFORMAT);
    cr_assert(strstr(err, "tensor 'norm.weight' appears twice"), "%s", err);
    gw_free(&w);
}

Test(gguf, default_model_metadata, .timeout = 60)
{
    gguf_file *f;
    char err[512];
    const char *path = "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
    cr_assert_eq(gguf_open(path, &f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gguf_version(f), 3);
    uint32_t v;
    cr_assert_eq(gguf_get_u32(f, "llama.block_count", &v), 0);
    cr_assert_eq(v, 30);
    cr_assert_eq(gguf_get_u32(f, "llama.embedding_length", &v), 0);
    cr_assert_eq(v, 576);
    cr_assert_eq(gguf_get_u32(f, "llama.attention.head_count_kv", &v), 0);
    cr_assert_eq(v, 3);
    const struct gguf_kv *toks;
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks), 0);
    cr_assert_eq(toks->v.arr.n, 49152);
    cr_assert_eq(gguf_n_tensors(f), 272);
    const struct gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    cr_assert(t && t->type == GGML_Q8_0 && t->ne[0] == 576 && t->ne[1] == 49152);
    cr_assert_null(gguf_find_tensor(f, "output.weight"), "tied output head");
    gguf_close(f);
}

Test(gguf, missing_file)
{
    gguf_file *f;
    char err[256];
    cr_assert_eq(gguf_open("/nonexistent.gguf", &f, err, sizeof err), ENG_EIO);
    cr_assert(strstr(err, "/nonexistent.gguf: No such file"), "%s", err);
}
