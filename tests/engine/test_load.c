/* tests how engine/model.c loads a file's matrices: a small Llama file written here, whose
 * stacked matrices (query, key and value; gate and up) share a stored type in one layer
 * and are of several types in another, gives the logits of its twin holding the same
 * weights in F32. The regrouped matrices are loaded without an F32 copy, and a stack of
 * mixed types makes its parts' copies from the file. The token embeddings' rows are read
 * from the file's blocks (unless they are an output head that keeps its F32 copy). The
 * figure the load logs for the weights in memory is what the heap grew by, and the size of
 * the forms the matrices are kept in: where they are regrouped, no copy besides. make test
 * runs it under each CACHEGATE_CPU_ISA below the processor's too (the portable paths keep
 * the F32 copies of the matrices). */
#include "backend.h"
#include "engine.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "kvcache.h"
#include "model.h"
#include "quant.h"

#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { D = 64, HEADS = 2, KV_HEADS = 1, HD = 32, FF = 96, LAYERS = 2, VOCAB = 48 };

struct tensor {
    char name[48];
    int ne0, ne1;
    enum ggml_type type;
    uint8_t *data;
    size_t bytes;
};

static uint32_t seed = 12345;

static uint32_t next(void)
{
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
}

static void h16(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* random blocks: weights within about +-0.25 (Q4 scales in [2^-5, 2^-4), Q4_1 minima in
 * (-2^-1, -2^-2], Q8_0 scales in [2^-9, 2^-8)) */
static void fill(struct tensor *t)
{
    int be, bb;
    cr_assert(ggml_type_block(t->type, &be, &bb));
    const size_t nblk = (size_t)t->ne0 / (size_t)be * (size_t)t->ne1;
    t->bytes = nblk * bb;
    t->data = malloc(t->bytes);
    cr_assert_not_null(t->data);
    if (t->type == GGML_F32) { /* norms: around 1 */
        float *f = (float *)t->data;
        for (int i = 0; i < t->ne0 * t->ne1; i++)
            f[i] = 0.75f + (float)(next() % 512) / 1024.0f;
        return;
    }
    for (size_t k = 0; k < nblk; k++) {
        uint8_t *blk = t->data + k * bb;
        for (int i = 0; i < bb; i++)
            blk[i] = (uint8_t)next();
        h16(blk, (uint16_t)((t->type == GGML_Q8_0 ? 0x1800 : 0x2800) | (next() & 0x3FF)));
        if (t->type == GGML_Q4_1)
            h16(blk + 2, (uint16_t)(0xB400 | (next() & 0x3FF)));
    }
}

/* the same tensor in F32, by the engine's dequantization (tested in test_quant.c; an F32
 * tensor is copied) */
static struct tensor as_f32(const struct tensor *q)
{
    struct tensor t = *q;
    t.type = GGML_F32;
    t.bytes = sizeof(float) * (size_t)q->ne0 * q->ne1;
    t.data = malloc(t.bytes);
    cr_assert_not_null(t.data);
    int be, bb;
    ggml_type_block(q->type, &be, &bb);
    for (int r = 0; r < q->ne1; r++)
        cr_assert_eq(eng_dequant_row(q->type, q->data + (size_t)r * (q->ne0 / be) * bb,
                                     (float *)t.data + (size_t)r * q->ne0, q->ne0),
                     0);
    return t;
}

/* a GGUF v3 file of these tensors with a Llama's metadata; its path (unlink it) */
static char *write_file(const struct tensor *ts, int n)
{
    struct gw b = {0};
    gw_header(&b, 3, (uint64_t)n, 7);
    gw_kv_str(&b, "general.architecture", "llama");
    gw_kv_u32(&b, "llama.block_count", LAYERS);
    gw_kv_u32(&b, "llama.embedding_length", D);
    gw_kv_u32(&b, "llama.attention.head_count", HEADS);
    gw_kv_u32(&b, "llama.attention.head_count_kv", KV_HEADS);
    gw_kv_u32(&b, "llama.feed_forward_length", FF);
    gw_kv_u32(&b, "llama.context_length", 256);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        gw_tensor_info(&b, ts[i].name, (uint64_t)ts[i].ne0, (uint64_t)ts[i].ne1, ts[i].type, off);
        off += (ts[i].bytes + 31) / 32 * 32;
    }
    gw_pad(&b, 32);
    for (int i = 0; i < n; i++) {
        gw_put(&b, ts[i].data, ts[i].bytes);
        gw_pad(&b, 32);
    }
    char *path = strdup("/tmp/cachegate-test-load-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, b.buf, b.n), (ssize_t)b.n);
    close(fd);
    gw_free(&b);
    return path;
}

/* per layer: the types of q, k, v, attn_output, gate, up, down */
static const enum ggml_type layer_types[LAYERS][7] = {
    /* mixed q/k/v: an F32 stack; gate and up share Q4_0: regrouped */
    {GGML_Q4_0, GGML_Q4_1, GGML_Q8_0, GGML_Q4_1, GGML_Q4_0, GGML_Q4_0, GGML_Q8_0},
    /* q/k/v share Q4_1; gate and up are Q4_0 and Q4_1, one stored type: regrouped */
    {GGML_Q4_1, GGML_Q4_1, GGML_Q4_1, GGML_Q8_0, GGML_Q4_0, GGML_Q4_1, GGML_Q4_0},
};

static struct tensor ts[3 + 9 * LAYERS], twin[3 + 9 * LAYERS];
static int n_ts;
static char *qpath, *fpath;

static void add(const char *name, int ne0, int ne1, enum ggml_type type)
{
    struct tensor *t = &ts[n_ts++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne0 = ne0;
    t->ne1 = ne1;
    t->type = type;
    fill(t);
}

/* The output head: the token embeddings (Q8_0); or (SAME_BLOCKS) a head of its own holding
 * the same blocks, a model with the tied one's logits, whose embeddings are loaded as the
 * file's blocks and read from them row by row (the twin is the tied file, its F32
 * embeddings copied); or (OWN_HEAD) a Q4_1 head of other weights (the twin's F32
 * embeddings are read from its file too, 1-element blocks). */
enum head { TIED, SAME_BLOCKS, OWN_HEAD };

static void setup_file(enum head head)
{
    n_ts = 0;
    seed = 12345;
    add("token_embd.weight", D, VOCAB, GGML_Q8_0);
    add("output_norm.weight", D, 1, GGML_F32);
    if (head == OWN_HEAD)
        add("output.weight", D, VOCAB, GGML_Q4_1); /* ts[2] */
    for (int l = 0; l < LAYERS; l++) {
        const enum ggml_type *ty = layer_types[l];
        char n[48];
#define ADD(suffix, ne0, ne1, type)                                                            \
    (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix), add(n, ne0, ne1, type))
        ADD("attn_norm", D, 1, GGML_F32);
        ADD("ffn_norm", D, 1, GGML_F32);
        ADD("attn_q", D, HEADS * HD, ty[0]);
        ADD("attn_k", D, KV_HEADS * HD, ty[1]);
        ADD("attn_v", D, KV_HEADS * HD, ty[2]);
        ADD("attn_output", HEADS * HD, D, ty[3]);
        ADD("ffn_gate", D, FF, ty[4]);
        ADD("ffn_up", D, FF, ty[5]);
        ADD("ffn_down", FF, D, ty[6]);
#undef ADD
    }
    for (int i = 0; i < n_ts; i++)
        twin[i] = as_f32(&ts[i]);
    fpath = write_file(twin, n_ts);
    if (head == SAME_BLOCKS) {
        struct tensor *t = &ts[n_ts++];
        *t = ts[0];
        snprintf(t->name, sizeof t->name, "output.weight");
        t->data = malloc(t->bytes);
        cr_assert_not_null(t->data);
        memcpy(t->data, ts[0].data, t->bytes);
        twin[n_ts - 1] = (struct tensor){0};
    }
    qpath = write_file(ts, n_ts);
}

static void teardown(void)
{
    unlink(qpath);
    unlink(fpath);
    free(qpath);
    free(fpath);
    for (int i = 0; i < n_ts; i++) {
        free(ts[i].data);
        free(twin[i].data);
    }
}

static void setup_tied(void)
{
    setup_file(TIED);
}

static void setup_same_blocks(void)
{
    setup_file(SAME_BLOCKS);
}

static void setup_own_head(void)
{
    setup_file(OWN_HEAD);
}

TestSuite(load, .init = setup_tied, .fini = teardown, .timeout = 60);
TestSuite(load_same_blocks, .init = setup_same_blocks, .fini = teardown, .timeout = 60);
TestSuite(load_own_head, .init = setup_own_head, .fini = teardown, .timeout = 60);

#define N_PROMPT 12
#define N_DECODE 4

/* every position's logits: a prompt in one pass, then one token a pass */
static void run(const char *path, int int8, float *logits)
{
    eng_model *m;
    char err[512];
    struct eng_options o = {.int8 = int8};
    cr_assert_eq(eng_model_load(path, &o, &m, err, sizeof err), 0, "%s", err);
    kvc_pool *kv;
    struct kvc_shape ks = {LAYERS, KV_HEADS, HD, 16, 4, 0, KVC_F32};
    cr_assert_eq(kvc_create(&ks, &kv), 0);
    int32_t table[2], ids[N_PROMPT + N_DECODE];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(kvc_alloc(kv, &table[i]), 0);
    for (int i = 0; i < N_PROMPT + N_DECODE; i++)
        ids[i] = (int32_t)((7 * i + 3) % VOCAB);
    struct eng_seq s = {ids, N_PROMPT, 0, table, ENG_LOGITS_ALL};
    cr_assert_eq(eng_forward(m, kv, &s, 1, logits), 0);
    for (int i = N_PROMPT; i < N_PROMPT + N_DECODE; i++) {
        s = (struct eng_seq){ids + i, 1, i, table, ENG_LOGITS_ALL};
        cr_assert_eq(eng_forward(m, kv, &s, 1, logits + (size_t)i * VOCAB), 0);
    }
    kvc_destroy(kv);
    eng_model_destroy(m);
}

static void same_logits_as_the_twin(int int8, float tol)
{
    static float got[(N_PROMPT + N_DECODE) * VOCAB], want[(N_PROMPT + N_DECODE) * VOCAB];
    run(fpath, 0, want);
    run(qpath, int8, got);
    float worst = 0, spread = 0;
    for (int i = 0; i < (N_PROMPT + N_DECODE) * VOCAB; i++) {
        cr_assert(isfinite(got[i]), "logit %d is %g", i, got[i]);
        worst = fmaxf(worst, fabsf(got[i] - want[i]));
        spread = fmaxf(spread, fabsf(want[i]));
    }
    cr_log_info("int8 %d: largest logit difference %g (logits up to %g)", int8, worst, spread);
    cr_assert(spread > 0.5f, "the logits do not depend on the weights (%g)", spread);
    cr_assert_leq(worst, tol, "largest logit difference %g", worst);
}

/* F32 products over the same floats: only the summation order differs */
Test(load, mixed_and_shared_types_give_the_f32_twins_logits)
{
    same_logits_as_the_twin(0, 1e-4f);
}

/* engine.cpu_matmul = int8 where it exists: its stacks of one type round activations to
 * 8 bits, the F32 stacks do not. Measured: 0.16 on logits up to 5.7 (these random weights
 * are larger and less regular than a trained model's); a matrix loaded wrong moves them by
 * about their own size. */
Test(load, mixed_and_shared_types_with_the_8_bit_products)
{
    same_logits_as_the_twin(1, 0.5f);
}

/* an output head of its own with the embeddings' blocks: their rows come from the file
 * (measured as the tied file's) */
Test(load_same_blocks, embeddings_read_from_the_file_and_a_head_of_its_own)
{
    same_logits_as_the_twin(0, 1e-4f);
}

Test(load_same_blocks, embeddings_read_from_the_file_with_the_8_bit_products)
{
    same_logits_as_the_twin(1, 0.5f);
}

/* a head of other weights (measured: 6e-6; 0.17 with the 8-bit products) */
Test(load_own_head, a_head_of_its_own)
{
    same_logits_as_the_twin(0, 1e-4f);
}

Test(load_own_head, a_head_of_its_own_with_the_8_bit_products)
{
    same_logits_as_the_twin(1, 0.5f);
}

/* and that head, not the embeddings, gives the logits (the twin is read by the same loader):
 * two of its rows swapped in the file swap those two logits and leave the others */
Test(load_own_head, the_heads_rows_are_the_logits_rows)
{
    enum { R1 = 3, R2 = 40, N = (N_PROMPT + N_DECODE) * VOCAB };
    static float a[N], b[N];
    run(qpath, 0, a);
    struct tensor *h = &ts[2];
    cr_assert_str_eq(h->name, "output.weight");
    const size_t row = h->bytes / VOCAB;
    uint8_t tmp[64];
    cr_assert_leq(row, sizeof tmp);
    memcpy(tmp, h->data + R1 * row, row);
    memcpy(h->data + R1 * row, h->data + R2 * row, row);
    memcpy(h->data + R2 * row, tmp, row);
    char *path = write_file(ts, n_ts);
    run(path, 0, b);
    unlink(path);
    free(path);
    float apart = 0, worst = 0;
    for (int p = 0; p < N_PROMPT + N_DECODE; p++) {
        const float *x = a + (size_t)p * VOCAB, *y = b + (size_t)p * VOCAB;
        apart = fmaxf(apart, fabsf(x[R1] - x[R2]));
        for (int v = 0; v < VOCAB; v++)
            worst = fmaxf(worst, fabsf(y[v] - x[v == R1 ? R2 : v == R2 ? R1 : v]));
    }
    cr_assert_gt(apart, 0.1f, "rows %d and %d give the same logits", R1, R2);
    cr_assert_leq(worst, 1e-5f, "largest difference %g from the swapped logits", worst);
}

/* What an n x k matrix of a file's type takes in memory. Q4_0 is stored as Q4_1. Regrouped
 * (AVX-512, AVX2; also for the 8-bit products): for each group of 16 rows (the last one
 * padded) and block of 32 columns, the weights (Q4: 256 bytes, Q8_0: 512) and a 4-byte
 * scale a row, with a 4-byte minimum a row for Q4 and, for the 8-bit products, a 4-byte
 * offset a row for Q8_0. Otherwise (the portable paths) an F32 copy and the stored form: a
 * block's weights (Q4: 16 bytes, Q8_0: 32), its 4-byte scale and, for Q4, its 4-byte
 * minimum. Other types (F32 here) are an F32 copy. */
static size_t matrix(int n, int k, enum ggml_type type, int packs, int int8)
{
    const int q4 = type == GGML_Q4_0 || type == GGML_Q4_1;
    if (!q4 && type != GGML_Q8_0)
        return sizeof(float) * (size_t)n * k;
    if (packs) {
        const size_t gb = (size_t)(n + 15) / 16 * (k / 32);
        return gb * (q4 ? 256 : 512) + gb * 16 * 4 * (q4 || int8 ? 2 : 1);
    }
    const size_t blocks = (size_t)n * (k / 32);
    return sizeof(float) * (size_t)n * k + blocks * (q4 ? 16 : 32) + blocks * 4 * (q4 ? 2 : 1);
}

/* the stored type of a file's type: Q4_1 for Q4_0 and Q4_1, Q8_0, or none (F32) */
static enum ggml_type stored_type(enum ggml_type t)
{
    return t == GGML_Q4_0 || t == GGML_Q4_1 ? GGML_Q4_1 : t == GGML_Q8_0 ? GGML_Q8_0 : GGML_F32;
}

/* a stack of rows[i] x D matrices of types[i]: one matrix where they share a stored type,
 * else an F32 copy */
static size_t stack(const enum ggml_type *types, const int *rows, int n, int packs, int int8)
{
    int all = 0, same = stored_type(types[0]) != GGML_F32;
    for (int i = 0; i < n; i++) {
        all += rows[i];
        same &= stored_type(types[i]) == stored_type(types[0]);
    }
    return matrix(all, D, same ? types[0] : GGML_F32, packs, int8);
}

/* the weights of the file under test: the norms and RoPE's frequencies in F32, the matrices,
 * and the output head (the embeddings, when tied; untied embeddings are read from the
 * file) */
static size_t expected_bytes(int packs, int int8)
{
    size_t b = sizeof(float) * (size_t)((2 * LAYERS + 1) * D + HD / 2);
    const struct tensor *head = &ts[0];
    for (int i = 0; i < n_ts; i++)
        if (!strcmp(ts[i].name, "output.weight"))
            head = &ts[i];
    b += matrix(VOCAB, D, head->type, packs, int8);
    for (int l = 0; l < LAYERS; l++) {
        const enum ggml_type *ty = layer_types[l];
        const int qkv[3] = {HEADS * HD, KV_HEADS * HD, KV_HEADS * HD}, gu[2] = {FF, FF};
        b += stack(ty, qkv, 3, packs, int8) + matrix(D, HEADS * HD, ty[3], packs, int8) +
             stack(ty + 4, gu, 2, packs, int8) + matrix(D, FF, ty[6], packs, int8);
    }
    return b;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1 /* clang's */
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) /* GCC's */
#define UNDER_ASAN 1
#endif

/* The figure the load logs for the weights in memory is what they take: what the heap grew
 * by, give or take the file's metadata, and the size of the forms the matrices are kept in,
 * no more: where they are regrouped, no F32 copy stays (not the embeddings', nor the
 * matrices'). */
static void host_bytes_are_the_forms(int int8)
{
    const char *isa = eng_model_cpu_isa();
    /* the F32 products regroup the matrices with AVX-512 or AVX2 (and F16C); the 8-bit
     * ones wherever they run (AVX2 or AVX512-VNNI) */
    const int packs = int8 ? strcmp(isa, "portable") != 0
                           : !strncmp(isa, "avx512", 6) || !strcmp(isa, "avx2");
    eng_model *m;
    char err[512];
    struct eng_options o = {.int8 = int8};
    /* (once unmeasured: the threads' first start allocates too) */
    cr_assert_eq(eng_model_load(qpath, &o, &m, err, sizeof err), 0, "%s", err);
    eng_model_destroy(m);
    struct mallinfo2 before = mallinfo2();
    cr_assert_eq(eng_model_load(qpath, &o, &m, err, sizeof err), 0, "%s", err);
    struct mallinfo2 after = mallinfo2();
    const size_t got = eng_model_host_bytes(m);
    const int products8 = eng_model_int8(m);
    eng_model_destroy(m);
    cr_log_info("%s, int8 %d: weights %zu bytes in memory", isa, int8, got);
#ifndef UNDER_ASAN /* (whose allocator the C library's figures do not see) */
    const long long grown =
        (long long)(after.uordblks + after.hblkhd) - (long long)(before.uordblks + before.hblkhd);
    cr_log_info("the heap grew by %lld", grown);
    /* within 8 KiB either way: more for the file's metadata and tensor table, the model's
     * struct and the allocator's chunk headers; less where small chunks come back from the
     * allocator's per-thread cache, which its figures count as in use (measured: 3.6-4.4 KB
     * more where the matrices are regrouped, 2.6-3.0 KB less on the portable paths) */
    cr_assert(llabs(grown - (long long)got) < 8192,
              "the heap grew by %lld for %zu bytes of weights", grown, got);
#else
    (void)before, (void)after;
#endif
    cr_assert_eq(products8, int8 && packs);
    cr_assert_eq(got, expected_bytes(packs, int8), "weights: %zu bytes in memory, want %zu",
                 got, expected_bytes(packs, int8));
}

Test(load, the_weights_in_memory_are_the_forms_they_are_kept_in)
{
    host_bytes_are_the_forms(0);
    host_bytes_are_the_forms(1);
}

Test(load_same_blocks, the_weights_in_memory_are_the_forms_they_are_kept_in)
{
    host_bytes_are_the_forms(0);
}

Test(load_own_head, the_weights_in_memory_are_the_forms_they_are_kept_in)
{
    host_bytes_are_the_forms(0);
    host_bytes_are_the_forms(1);
}

/* a device backend is handed the embeddings in F32, made from the file for it, and the
 * head: a stand-in for the device (a test double for hardware this machine lacks) that
 * compares them with the twin's and declines, so that the load ends there */
static int embeddings_seen;

static int s_create(const struct eng_weights *w, void (*progress)(void *, double), void *ud,
                    const struct eng_backend_i **vt, void **ctx, char *err, size_t errlen)
{
    (void)progress, (void)ud, (void)vt, (void)ctx;
    cr_assert_not_null(w->tok_embd);
    cr_assert_eq(memcmp(w->tok_embd, twin[0].data, sizeof(float) * D * VOCAB), 0);
    cr_assert(w->output.f && w->output.n == VOCAB && w->output.k == D);
    cr_assert_eq(memcmp(w->output.f, twin[2].data, sizeof(float) * D * VOCAB), 0);
    embeddings_seen = 1;
    snprintf(err, errlen, "stand-in declines");
    return ENG_ENOTSUP;
}

Test(load_own_head, a_device_gets_the_embeddings_in_f32)
{
    eng_model *m = NULL;
    char err[512];
    struct eng_options o = {.backend = s_create};
    cr_assert_neq(eng_model_load(qpath, &o, &m, err, sizeof err), 0);
    cr_assert(embeddings_seen);
    cr_assert(strstr(err, "stand-in declines"), "%s", err);
}
