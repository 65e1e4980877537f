/*
 * Loading a Llama-family GGUF model and its CPU forward pass: the projections over every
 * new token of the batch (linear(): regrouped quantized weights where AVX-512 or AVX2 runs,
 * 8-bit products if asked, OpenBLAS SGEMMs elsewhere); RMSNorm, RoPE and SwiGLU spread over
 * OpenMP threads (OpenBLAS is its OpenMP build, so both share one pool, as in the embedder);
 * attention over the paged cache in place (attend_group()), or where that kernel does not
 * exist by SGEMMs per query tile and KV head over gathered keys and values, tiles spread
 * over the threads with OpenBLAS single-threaded inside.
 */
#include "model.h"

#include "backend.h"
#include "eng_impl.h"
#include "ops_cpu.h"
#include "engine.h"
#include "gguf.h"
#include "quant.h"

#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A weight matrix [n][k] (PyTorch's [out][in]) as stored in the file. Regrouped (vq, where
 * AVX-512, AVX2 with F16C or the 8-bit products run), it serves every pass in that form.
 * Otherwise the matrix-vector kernels read the stored form when a pass has few tokens
 * (decode: 0.6-1 byte per weight instead of 4), and SGEMMs its F32 copy for many.
 */
struct wmat {
    /* [n][k]; NULL where regrouped (vq), and for token embeddings that are not the output
     * head too (their rows are read from the file's blocks: embed_row()) */
    float *f;
    enum ggml_type type; /* of the stored form */
    /* the stored form, repacked for the kernels: Q4_1 nibbles [n][k/2] with scales and
     * minima [n][k/32]; Q8_0 values [n][k] with scales [n][k/32]; NULL for other types, and
     * once regrouped (pack_one()) */
    uint8_t *qs;
    float *qd, *qm;
    int n, k;
    /* the stored form regrouped (vnni_pack()) for the 8-bit products, and for the F32 ones
     * where AVX-512 or AVX2 runs (pack_wanted()); NULL otherwise */
    uint8_t *vq;
    float *vd, *vm;
    int32_t *vc; /* Q8_0's offsets for the 8-bit products; NULL for the F32 ones */
    int int8; /* 1: linear() runs the 8-bit products over vq (else F32 ones) */
    /* the file's blocks (in the model's mapping) and their type, for an F32 copy made
     * only when it is wanted (wmat_f32()) */
    const uint8_t *raw;
    enum ggml_type raw_type;
};

/*
 * The sizes of those forms, in one place for their allocations and wmat_bytes(). A stored
 * block is 32 weights of a row: 16 bytes of Q4_1 nibbles or 32 Q8_0 values, with a float
 * scale (and a float minimum for Q4_1) each. The regrouped form keeps the same blocks for
 * groups of 16 rows (the last padded with zero rows), each group's block of a column range
 * 16 stored blocks long, and a float (or Q8_0's int32 offset) per row and block.
 */
static size_t block_bytes(enum ggml_type stored)
{
    return stored == GGML_Q4_1 ? 16 : 32;
}

static size_t stored_blocks(const struct wmat *w)
{
    return (size_t)w->n * (size_t)(w->k / 32);
}

/* rows padded to a multiple of 16, times blocks per row: a regrouped form's per-row-and-
 * block entries (vd, vm, vc), and its blocks of block_bytes() each */
static size_t padded_blocks(const struct wmat *w)
{
    return (size_t)(w->n + 15) / 16 * 16 * (size_t)(w->k / 32);
}

struct layer {
    float *attn_norm, *ffn_norm; /* [n_embd] */
    /* query, key and value rows stacked ([n_head*hd + 2*n_kv*hd][n_embd]), and gate and
     * up rows stacked ([2*n_ff][n_embd]): one pass over the input each */
    struct wmat wqkv, w_gate_up;
    struct wmat wo;              /* [n_embd][n_head*hd] */
    struct wmat w_down;          /* [n_embd][n_ff] */
};

struct eng_model {
    struct eng_hparams hp;
    gguf_file *gguf;
    struct wmat tok_embd; /* [n_vocab][n_embd] */
    float *out_norm;      /* [n_embd] */
    struct wmat output;   /* [n_vocab][n_embd]; shares tok_embd's memory when tied */
    float *rope_inv;    /* [n_rot / 2] inverse frequencies, scaling applied */
    struct layer *layers;
    /* scratch, grown on demand */
    int cap;
    float *x, *xn, *qkv, *q, *att, *gate, *up, *sel; /* up: [T][2 * n_ff] */
    int *pos;
    /* [threads][scratch_floats]: attention's per-thread scratch (scores, gathered keys and
     * values) for contexts up to cap_ctx positions */
    float *scores;
    size_t scratch_floats;
    int cap_ctx, threads;
    float *xt; /* linear_scratch_bytes(cap, widest input, threads): linear()'s scratch */
    int int8; /* engine.cpu_matmul = int8: quantized matrices in their 8-bit form only */
    /* a device backend (NULL: this file's CPU code); be_shape: the pool shape its KV
     * storage was made for (be_pool: for which pool) */
    const struct eng_backend_i *be;
    void *be_ctx;
    const kvc_pool *be_pool;
    struct kvc_shape be_shape;
};

/* ------------------------------------------------------------------ loading */

static int weight_q(eng_model *m, const char *name, int64_t ne0, int64_t ne1, int f32,
                    struct wmat *w, char *err, size_t errlen);

/* frees w's stored form (qs, qd, qm), leaving the rest */
static void drop_stored(struct wmat *w)
{
    free(w->qs);
    free(w->qd);
    free(w->qm);
    w->qs = NULL;
    w->qd = w->qm = NULL;
}

static int weight(eng_model *m, const char *name, int64_t ne0, int64_t ne1, float **out,
                  char *err, size_t errlen)
{
    struct wmat w;
    int rc = weight_q(m, name, ne0, ne1, 1, &w, err, errlen);
    if (rc == 0) {
        *out = w.f;
        drop_stored(&w);
    }
    return rc;
}

/*
 * The stored form of wm (rows wm->n, row length wm->k) from the file's blocks raw of type
 * `type`: Q4_1 and Q8_0 as they are; Q4_0 (w = d (q - 8)) as Q4_1 with minimum m = -8 d,
 * which gives the same floats (q d and -8 d are exact, and so is their sum, d (q - 8)), so
 * the Q4_1 kernels serve both. Other types have none (qs NULL). wm->type becomes the
 * form's type.
 */
static int stored_form(enum ggml_type type, const uint8_t *raw, struct wmat *wm)
{
    if (type != GGML_Q4_0 && type != GGML_Q4_1 && type != GGML_Q8_0)
        return 0;
    const int q4 = type != GGML_Q8_0;
    int be, bb;
    ggml_type_block(type, &be, &bb);
    wm->type = q4 ? GGML_Q4_1 : GGML_Q8_0;
    const size_t nblk = stored_blocks(wm), per = block_bytes(wm->type);
    wm->qs = malloc(nblk * per);
    wm->qd = malloc(nblk * sizeof(float));
    wm->qm = q4 ? malloc(nblk * sizeof(float)) : NULL;
    if (!wm->qs || !wm->qd || (q4 && !wm->qm)) {
        drop_stored(wm);
        return ENG_ENOMEM;
    }
    for (size_t b = 0; b < nblk; b++, raw += bb) {
        wm->qd[b] = eng_f16_to_f32((uint16_t)(raw[0] | raw[1] << 8));
        if (type == GGML_Q4_1)
            wm->qm[b] = eng_f16_to_f32((uint16_t)(raw[2] | raw[3] << 8));
        else if (type == GGML_Q4_0)
            wm->qm[b] = -8.0f * wm->qd[b];
        /* the quants after the scale (and Q4_1's minimum) */
        memcpy(wm->qs + b * per, raw + (type == GGML_Q4_1 ? 4 : 2), per);
    }
    return 0;
}

/* row r of w in F32 from the file's blocks, into out[w->k] */
static void raw_row(const struct wmat *w, int r, float *out)
{
    int be, bb;
    ggml_type_block(w->raw_type, &be, &bb);
    eng_dequant_row(w->raw_type, w->raw + (size_t)r * (size_t)(w->k / be * bb), out, w->k);
}

/* w's F32 copy from the file's blocks, where weight_q() did not make it */
static int wmat_f32(struct wmat *w)
{
    if (w->f)
        return 0;
    if (!w->raw) /* (a stack's parts had theirs made before: wmat_stack()) */
        return ENG_EINVAL;
    if (!(w->f = malloc(sizeof(float) * (size_t)w->n * (size_t)w->k)))
        return ENG_ENOMEM;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < w->n; r++)
        raw_row(w, r, w->f + (size_t)r * w->k);
    return 0;
}

/* row id of w (the token embeddings) into out[w->k]: from the F32 copy where there is one,
 * else from the file's blocks, as the copy was made */
static void embed_row(const struct wmat *w, int id, float *out)
{
    if (w->f)
        memcpy(out, w->f + (size_t)id * w->k, sizeof(float) * (size_t)w->k);
    else
        raw_row(w, id, out);
}

/* Tensor `name` of shape [ne1][ne0] as a wmat of the file's blocks only (raw; what token
 * embeddings that are not the output head need: embed_row()) */
static int weight_raw(eng_model *m, const char *name, int64_t ne0, int64_t ne1,
                      struct wmat *wm, char *err, size_t errlen)
{
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) {
        snprintf(err, errlen, "tensor '%s' missing", name);
        return ENG_EFORMAT;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        snprintf(err, errlen, "tensor '%s' has shape [%lld, %lld], want [%lld, %lld]", name,
                 (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)ne1);
        return ENG_EFORMAT;
    }
    if (!eng_dequant_supported(t->type)) {
        snprintf(err, errlen, "tensor '%s': type %s is not supported", name,
                 ggml_type_name(t->type));
        return ENG_ENOTSUP;
    }
    *wm = (struct wmat){.type = t->type, .n = (int)ne1, .k = (int)ne0, .raw = t->data,
                        .raw_type = t->type};
    return 0;
}

/*
 * The same with its stored form (stored_form()), and its F32 copy when f32 is 1 or there
 * is no stored form the regrouping could take (vnni_pack()); a matrix that will be
 * regrouped needs none, and makes it later only if it must (wmat_f32()).
 */
static int weight_q(eng_model *m, const char *name, int64_t ne0, int64_t ne1, int f32,
                    struct wmat *wm, char *err, size_t errlen)
{
    int rc = weight_raw(m, name, ne0, ne1, wm, err, errlen);
    if (!rc)
        rc = stored_form(wm->raw_type, wm->raw, wm);
    if (!rc && (f32 || !wm->qs || wm->k % 32))
        rc = wmat_f32(wm);
    if (rc)
        drop_stored(wm);
    return rc;
}

static int meta_u32(eng_model *m, const char *arch, const char *key, int required, int *out,
                    char *err, size_t errlen)
{
    char full[128];
    uint32_t v;
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int rc = gguf_get_u32(m->gguf, full, &v);
    if (rc == ENG_EINVAL && !required)
        return 0;
    if (rc || v == 0 || v > (1u << 24)) {
        snprintf(err, errlen, "metadata '%s' %s", full,
                 rc == ENG_EINVAL ? "missing" : "is not a positive integer");
        return ENG_EFORMAT;
    }
    *out = (int)v;
    return 0;
}

static int read_hparams(eng_model *m, char *err, size_t errlen)
{
    struct gguf_str a;
    if (gguf_get_str(m->gguf, "general.architecture", &a)) {
        snprintf(err, errlen, "metadata 'general.architecture' missing");
        return ENG_EFORMAT;
    }
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(a.len < 63 ? a.len : 63), a.p);
    static const char *const supported[] = {"llama", "qwen2", "mistral", NULL};
    int ok = 0;
    for (int i = 0; supported[i]; i++)
        ok |= !strcmp(arch, supported[i]);
    if (!ok || !strcmp(arch, "qwen2")) { /* qwen2 needs q/k/v biases: not yet */
        snprintf(err, errlen, "architecture '%s' is not supported (llama is)", arch);
        return ENG_ENOTSUP;
    }
    struct eng_hparams *hp = &m->hp;
    int rc;
    if ((rc = meta_u32(m, arch, "block_count", 1, &hp->n_layer, err, errlen)) ||
        (rc = meta_u32(m, arch, "embedding_length", 1, &hp->n_embd, err, errlen)) ||
        (rc = meta_u32(m, arch, "attention.head_count", 1, &hp->n_head, err, errlen)) ||
        (rc = meta_u32(m, arch, "feed_forward_length", 1, &hp->n_ff, err, errlen)))
        return rc;
    hp->n_head_kv = hp->n_head;
    hp->head_dim = hp->n_embd / hp->n_head;
    hp->n_ctx_train = 4096;
    if ((rc = meta_u32(m, arch, "attention.head_count_kv", 0, &hp->n_head_kv, err, errlen)) ||
        (rc = meta_u32(m, arch, "attention.key_length", 0, &hp->head_dim, err, errlen)) ||
        (rc = meta_u32(m, arch, "context_length", 0, &hp->n_ctx_train, err, errlen)))
        return rc;
    hp->n_rot = hp->head_dim;
    if ((rc = meta_u32(m, arch, "rope.dimension_count", 0, &hp->n_rot, err, errlen)))
        return rc;
    if (hp->n_head % hp->n_head_kv || hp->n_rot > hp->head_dim || hp->n_rot % 2) {
        snprintf(err, errlen, "inconsistent heads or rope dimensions");
        return ENG_EFORMAT;
    }
    char key[128];
    hp->rope_base = 10000.0f;
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    gguf_get_f32(m->gguf, key, &hp->rope_base);
    hp->rms_eps = 1e-5f;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    gguf_get_f32(m->gguf, key, &hp->rms_eps);
    hp->rope_scale = 1.0f;
    struct gguf_str st;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (gguf_get_str(m->gguf, key, &st) == 0 && !(st.len == 4 && !memcmp(st.p, "none", 4))) {
        float factor = 1.0f;
        snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
        gguf_get_f32(m->gguf, key, &factor);
        if (st.len == 6 && !memcmp(st.p, "linear", 6) && factor > 0) {
            hp->rope_scale = factor;
        } else {
            snprintf(err, errlen, "rope scaling '%.*s' is not supported (linear is)", (int)st.len,
                     st.p);
            return ENG_ENOTSUP;
        }
    }
    const struct gguf_tensor *te = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te || te->n_dims != 2) {
        snprintf(err, errlen, "tensor 'token_embd.weight' missing");
        return ENG_EFORMAT;
    }
    hp->n_vocab = (int)te->ne[1];
    hp->tied_output = gguf_find_tensor(m->gguf, "output.weight") == NULL;
    return 0;
}

static void wmat_free(struct wmat *w)
{
    free(w->f);
    free(w->qs);
    free(w->qd);
    free(w->qm);
    free(w->vq);
    free(w->vd);
    free(w->vm);
    free(w->vc);
}

/*
 * Stacks the rows of n matrices with the same row length into one (and frees them,
 * whatever happens). The stored form is kept only when all share one type.
 */
static int wmat_stack(struct wmat *parts, int n, struct wmat *out)
{
    int rows = 0, k = parts[0].k, same = parts[0].qs != NULL, f32 = 0;
    for (int i = 0; i < n; i++) {
        rows += parts[i].n;
        same &= parts[i].type == parts[0].type && parts[i].qs != NULL;
        f32 |= parts[i].f != NULL;
    }
    /* without one stored form the stack is F32 only; with one, F32 too where a part had it */
    f32 |= !same;
    int rc = 0;
    struct wmat w = {.type = parts[0].type, .n = rows, .k = k};
    for (int i = 0; f32 && i < n; i++)
        if ((rc = wmat_f32(&parts[i])))
            goto out;
    rc = ENG_ENOMEM;
    const size_t nb = stored_blocks(&w), per = block_bytes(w.type);
    if (f32)
        w.f = malloc(sizeof(float) * (size_t)rows * k);
    if (same) {
        w.qs = malloc(nb * per);
        w.qd = malloc(nb * sizeof(float));
        if (parts[0].type == GGML_Q4_1)
            w.qm = malloc(nb * sizeof(float));
    }
    if ((f32 && !w.f) || (same && (!w.qs || !w.qd || (parts[0].type == GGML_Q4_1 && !w.qm))))
        goto out;
    size_t r0 = 0;
    for (int i = 0; i < n; i++) {
        if (f32)
            memcpy(w.f + r0 * k, parts[i].f, sizeof(float) * (size_t)parts[i].n * k);
        if (same) {
            size_t b0 = r0 * (k / 32), bn = stored_blocks(&parts[i]);
            memcpy(w.qs + b0 * per, parts[i].qs, bn * per);
            memcpy(w.qd + b0, parts[i].qd, bn * sizeof(float));
            if (w.qm)
                memcpy(w.qm + b0, parts[i].qm, bn * sizeof(float));
        }
        r0 += (size_t)parts[i].n;
    }
    if (!same)
        w.type = GGML_F32;
    *out = w;
    w = (struct wmat){0};
    rc = 0;
out:
    wmat_free(&w);
    for (int i = 0; i < n; i++) {
        wmat_free(&parts[i]);
        parts[i] = (struct wmat){0};
    }
    return rc;
}

/* the bytes w holds in the process's own memory: its F32 copy, its stored form and its
 * regrouped one (rows padded to a multiple of 16: vnni_pack()); the file's blocks it reads
 * are the mapping's */
static size_t wmat_bytes(const struct wmat *w)
{
    const size_t blocks = stored_blocks(w), padded = padded_blocks(w);
    const size_t quant = block_bytes(w->type);
    size_t b = w->f ? (size_t)w->n * (size_t)w->k * sizeof(float) : 0;
    b += (w->qs ? blocks * quant : 0) + (w->vq ? padded * quant : 0);
    b += ((w->qd != NULL) + (w->qm != NULL)) * blocks * sizeof(float);
    b += ((w->vd != NULL) + (w->vm != NULL) + (w->vc != NULL)) * padded * sizeof(float);
    return b;
}

size_t eng_model_host_bytes(const eng_model *m)
{
    const struct eng_hparams *hp = &m->hp;
    const size_t row = sizeof(float) * (size_t)hp->n_embd;
    size_t b = wmat_bytes(&m->tok_embd) + (hp->tied_output ? 0 : wmat_bytes(&m->output));
    b += (m->out_norm ? row : 0) + (m->rope_inv ? sizeof(float) * (size_t)(hp->n_rot / 2) : 0);
    for (int l = 0; m->layers && l < hp->n_layer; l++) {
        const struct layer *L = &m->layers[l];
        b += ((L->attn_norm != NULL) + (L->ffn_norm != NULL)) * row;
        b += wmat_bytes(&L->wqkv) + wmat_bytes(&L->wo) + wmat_bytes(&L->w_gate_up) +
             wmat_bytes(&L->w_down);
    }
    return b;
}

static void free_weights(eng_model *m)
{
    if (m->layers)
        for (int l = 0; l < m->hp.n_layer; l++) {
            struct layer *L = &m->layers[l];
            free(L->attn_norm);
            free(L->ffn_norm);
            wmat_free(&L->wqkv);
            wmat_free(&L->wo);
            wmat_free(&L->w_gate_up);
            wmat_free(&L->w_down);
        }
    free(m->layers);
    m->layers = NULL;
    if (!m->hp.tied_output)
        wmat_free(&m->output);
    wmat_free(&m->tok_embd);
    m->output = m->tok_embd = (struct wmat){0};
    free(m->out_norm);
    m->out_norm = NULL;
}

void eng_model_destroy(eng_model *m)
{
    if (!m)
        return;
    if (m->be)
        m->be->destroy(m->be_ctx);
    free_weights(m);
    free(m->rope_inv);
    free(m->x);
    free(m->xn);
    free(m->qkv);
    free(m->q);
    free(m->att);
    free(m->gate);
    free(m->up);
    free(m->sel);
    free(m->pos);
    free(m->scores);
    free(m->xt);
    gguf_close(m->gguf);
    free(m);
}

/* CACHEGATE_CPU_ISA in the environment caps the instruction sets of the CPU kernels below
 * what the processor has: avx512 (no cap), avx2 (the AVX2 kernels, also where AVX-512
 * exists) or portable (none of the intrinsics kernels: the portable C paths, as other
 * architectures run them), so that one machine can run, compare and test each path. Read
 * once. It caps have_avx2() and have_avx512(), not GCC's target clones (VECTOR_CLONES),
 * which pick their vector width from the processor, nor OpenBLAS's kernels: the same
 * arithmetic, compiled for other widths. */
enum cpu_isa { ISA_PORTABLE, ISA_AVX2, ISA_AVX512 };

static const char *isa_cap_name; /* the variable's value, when it names none of them */

/* the cap, or -1 when the variable names none of them (eng_model_load() refuses it) */
static int isa_cap(void)
{
    static int cached = -2;
    if (cached == -2) {
        const char *s = getenv("CACHEGATE_CPU_ISA");
        isa_cap_name = s;
        cached = !s || !*s || !strcmp(s, "avx512") ? ISA_AVX512
                 : !strcmp(s, "avx2")               ? ISA_AVX2
                 : !strcmp(s, "portable")           ? ISA_PORTABLE
                                                    : -1;
    }
    return cached;
}

#if defined(__x86_64__)
static int have_vnni(void);
static int have_avx2(void);
static int have_f16c(void);
static int have_avx512(void);
static int vnni_pack(struct wmat *w);

/* whether the F32 products have kernels over the regrouped weights: gemm_few() and
 * gemm_lanes() with AVX-512, gemm_few(), gemm_lanes8() and gemm_panel8() on AVX2 with F16C */
static int f32_regrouped(void)
{
    return have_avx512() || have_f16c();
}
#endif

#if defined(__x86_64__)
/* w regrouped (vnni_pack()). Its F32 copy and its stored form go: the 8-bit products read
 * only the regrouped form, and so do the F32 ones (AVX-512: gemm_few(), gemm_lanes(); AVX2:
 * gemm_few(), gemm_lanes8(), gemm_panel8()). */
static int pack_one(struct wmat *w, int int8)
{
    int rc = vnni_pack(w);
    if (rc || !w->vq)
        return rc;
    free(w->f);
    w->f = NULL;
    w->int8 = int8;
    drop_stored(w);
    if (!int8) {
        free(w->vc);
        w->vc = NULL;
    }
    return 0;
}
#endif

/* engine.cpu_matmul = int8: whether this processor has the 8-bit products (said once) */
static int int8_available(void)
{
#if defined(__x86_64__)
    if (have_vnni() || have_avx2())
        return 1;
#endif
    eng_log(ENG_LOG_WARN, "engine.cpu_matmul = int8 needs AVX2 (or AVX512-VNNI), which this "
                          "processor lacks: the matrix products stay F32");
    return 0;
}

/* whether the quantized matrices are regrouped: for the 8-bit products, or for the F32
 * ones where they have kernels for it */
static int pack_wanted(const eng_model *m, const struct eng_options *opt)
{
#if defined(__x86_64__)
    return m->int8 || (!(opt && opt->backend) && f32_regrouped());
#else
    (void)m;
    (void)opt;
    return 0;
#endif
}

/* a layer's quantized matrices regrouped, as it is loaded (so that the F32 copies go one
 * layer at a time) */
static int pack_layer(struct layer *L, int int8)
{
#if defined(__x86_64__)
    int rc;
    if ((rc = pack_one(&L->wqkv, int8)) || (rc = pack_one(&L->wo, int8)) ||
        (rc = pack_one(&L->w_gate_up, int8)))
        return rc;
    return pack_one(&L->w_down, int8);
#else
    (void)L;
    (void)int8;
    return ENG_ENOTSUP;
#endif
}

/* the same for the output head (the token embeddings, when it is theirs: their rows are
 * read from the file's blocks then) */
static int pack_head(eng_model *m, int int8)
{
#if defined(__x86_64__)
    if (m->hp.tied_output) {
        int rc = pack_one(&m->tok_embd, int8);
        m->output = m->tok_embd;
        return rc;
    }
    return pack_one(&m->output, int8);
#else
    (void)m;
    (void)int8;
    return ENG_ENOTSUP;
#endif
}

static struct eng_weight eweight(const struct wmat *w)
{
    return (struct eng_weight){w->f, w->n, w->k};
}

/* Hands the loaded weights to opt->backend; the host copies go once it has its own. */
static int to_device(eng_model *m, const struct eng_options *opt, char *msg, size_t msglen)
{
    const struct eng_hparams *hp = &m->hp;
    int rc = wmat_f32(&m->tok_embd); /* (the device reads its own copy) */
    if (rc)
        return rc;
    struct eng_layer_weights *lw = calloc((size_t)hp->n_layer, sizeof *lw);
    if (!lw)
        return ENG_ENOMEM;
    for (int l = 0; l < hp->n_layer; l++) {
        const struct layer *L = &m->layers[l];
        lw[l] = (struct eng_layer_weights){L->attn_norm, L->ffn_norm, eweight(&L->wqkv),
                                           eweight(&L->wo), eweight(&L->w_gate_up),
                                           eweight(&L->w_down)};
    }
    struct eng_weights w = {*hp,           m->tok_embd.f, m->out_norm, eweight(&m->output),
                            m->rope_inv,   lw,            0};
    char why[256] = "";
    rc = opt->backend(&w, opt->progress, opt->progress_ud, &m->be, &m->be_ctx, why, sizeof why);
    free(lw);
    if (rc) {
        m->be = NULL;
        snprintf(msg, msglen, "device backend: %s", why[0] ? why : eng_strerror(rc));
        return rc;
    }
    free_weights(m);
    return 0;
}

static int attend_direct_ok(int hd);
static int attend_direct_dtype_ok(enum kvc_dtype dtype);

/* whether every matrix product sums a token's terms in one order, whatever else its pass
 * holds: every matrix regrouped, and multiplied by the 8-bit products or the F32 ones
 * (lanes_tile()'s order, or on AVX2 lanes_tile8()'s, for any number of tokens) */
static int products_invariant(const eng_model *m)
{
#if defined(__x86_64__)
    if (m->be || !m->layers || !(m->int8 || f32_regrouped()))
        return 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct layer *L = &m->layers[l];
        if (!L->wqkv.vq || !L->wo.vq || !L->w_gate_up.vq || !L->w_down.vq)
            return 0;
    }
    return m->output.vq != NULL;
#else
    (void)m;
    return 0;
#endif
}

int eng_model_token_invariant(const eng_model *m, enum kvc_dtype kv_dtype)
{
    return products_invariant(m) && attend_direct_ok(m->hp.head_dim) &&
           attend_direct_dtype_ok(kv_dtype);
}

int eng_model_int8(const eng_model *m)
{
    /* (a file whose matrices are not Q4_0, Q4_1 or Q8_0 has nothing to regroup) */
    const struct layer *L = m->layers;
    return !m->be && m->int8 && L &&
           (L->wqkv.int8 || L->wo.int8 || L->w_gate_up.int8 || L->w_down.int8);
}

const char *eng_model_cpu_isa(void)
{
#if defined(__x86_64__)
    if (have_avx512())
        return have_vnni() ? "avx512-vnni" : "avx512";
    if (have_avx2())
        return have_f16c() ? "avx2" : "avx2 without f16c";
#endif
    return "portable";
}

const char *eng_model_device(const eng_model *m)
{
    return m->be ? m->be->describe(m->be_ctx) : "cpu";
}

int eng_model_kv_on_device(const eng_model *m)
{
    return m->be != NULL;
}

int eng_model_kv_capacity(eng_model *m, const struct kvc_shape *shape, double fraction,
                          int *n_blocks)
{
    if (!m->be)
        return ENG_ENOTSUP;
    int rc = m->be->kv_capacity(m->be_ctx, shape, fraction, n_blocks);
    if (rc == ENG_EDEVICE)
        eng_log(ENG_LOG_ERROR, "%s: %s", m->be->name, m->be->last_error(m->be_ctx));
    return rc;
}

int eng_model_samples_on_device(const eng_model *m)
{
    return m->be && m->be->sample;
}

int eng_model_sample(eng_model *m, const struct eng_sample_row *rows, int n,
                     const struct eng_logit_adj *adj, int n_adj, int32_t *tokens)
{
    if (!eng_model_samples_on_device(m))
        return ENG_ENOTSUP;
    int rc = m->be->sample(m->be_ctx, rows, n, adj, n_adj, tokens);
    if (rc == ENG_EDEVICE)
        eng_log(ENG_LOG_ERROR, "%s: %s", m->be->name, m->be->last_error(m->be_ctx));
    return rc;
}

/* The device backend's forward pass: its KV storage follows the pool it is handed. */
static int forward_device(eng_model *m, kvc_pool *kv, const struct eng_seq *seqs, int n_seqs,
                          float *logits)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    if (!ks->device_storage)
        return ENG_EINVAL;
    for (int s = 0; s < n_seqs; s++) {
        if (seqs[s].n_new <= 0 || seqs[s].pos0 < 0)
            return ENG_EINVAL;
        for (int i = 0; i < seqs[s].n_new; i++)
            if (seqs[s].tokens[i] < 0 || seqs[s].tokens[i] >= m->hp.n_vocab)
                return ENG_EINVAL;
    }
    int rc = 0;
    if (m->be_pool != kv || memcmp(&m->be_shape, ks, sizeof *ks) != 0) {
        m->be_pool = NULL;
        if ((rc = m->be->kv_init(m->be_ctx, ks)))
            goto fail;
        m->be_pool = kv;
        m->be_shape = *ks;
    }
    if ((rc = m->be->forward(m->be_ctx, seqs, n_seqs, logits)))
        goto fail;
    return 0;
fail:
    if (rc == ENG_EDEVICE)
        eng_log(ENG_LOG_ERROR, "%s: %s", m->be->name, m->be->last_error(m->be_ctx));
    return rc;
}

int eng_model_load(const char *path, const struct eng_options *opt, eng_model **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    eng_model *m = calloc(1, sizeof *m);
    if (!m)
        return ENG_ENOMEM;
    char msg[512] = "out of memory";
    int rc;
    if (isa_cap() < 0) {
        snprintf(err, errlen, "CACHEGATE_CPU_ISA is '%s': none of avx512, avx2, portable",
                 isa_cap_name ? isa_cap_name : "");
        rc = ENG_EINVAL;
        goto fail_quiet;
    }
    if ((rc = gguf_open(path, &m->gguf, err, errlen)))
        goto fail_quiet;
    if ((rc = read_hparams(m, msg, sizeof msg)))
        goto fail;
    const struct eng_hparams *hp = &m->hp;
    int D = hp->n_embd, HQ = hp->n_head * hp->head_dim, HK = hp->n_head_kv * hp->head_dim;
    if (opt && opt->int8 && opt->backend)
        eng_log(ENG_LOG_INFO, "engine.cpu_matmul = int8 applies to the CPU's products; the "
                              "device keeps its own");
    m->int8 = opt && opt->int8 && !opt->backend && int8_available();
    /* (a matrix to be regrouped is loaded without its F32 copy; the token embeddings, whose
     * rows are read from the file's blocks, are loaded as those blocks only, unless they
     * are the output head too) */
    const int pack = pack_wanted(m, opt), tied = hp->tied_output;
    if ((rc = tied ? weight_q(m, "token_embd.weight", D, hp->n_vocab, !pack, &m->tok_embd,
                              msg, sizeof msg)
                   : weight_raw(m, "token_embd.weight", D, hp->n_vocab, &m->tok_embd, msg,
                                sizeof msg)) ||
        (rc = weight(m, "output_norm.weight", D, 1, &m->out_norm, msg, sizeof msg)))
        goto fail;
    if (tied)
        m->output = m->tok_embd;
    else if ((rc = weight_q(m, "output.weight", D, hp->n_vocab, !pack, &m->output, msg,
                            sizeof msg)))
        goto fail;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        rc = ENG_ENOMEM;
        goto fail;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        struct layer *L = &m->layers[l];
        struct wmat parts[3] = {{0}};
        char n[64];
        if (opt && opt->progress)
            opt->progress(opt->progress_ud, (double)l / hp->n_layer);
#define W(suffix, ne0, ne1, dst)                                                               \
    (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix),                                     \
     weight_q(m, n, ne0, ne1, !pack, dst, msg, sizeof msg))
        if ((rc = (snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l),
                   weight(m, n, D, 1, &L->attn_norm, msg, sizeof msg))) ||
            (rc = (snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l),
                   weight(m, n, D, 1, &L->ffn_norm, msg, sizeof msg))) ||
            (rc = W("attn_q", D, HQ, &parts[0])) || (rc = W("attn_k", D, HK, &parts[1])) ||
            (rc = W("attn_v", D, HK, &parts[2])) ||
            (rc = wmat_stack(parts, 3, &L->wqkv)) || (rc = W("attn_output", HQ, D, &L->wo)) ||
            (rc = W("ffn_gate", D, hp->n_ff, &parts[0])) ||
            (rc = W("ffn_up", D, hp->n_ff, &parts[1])) ||
            (rc = wmat_stack(parts, 2, &L->w_gate_up)) ||
            (rc = W("ffn_down", hp->n_ff, D, &L->w_down)))
            goto fail;
#undef W
        if (pack && (rc = pack_layer(L, m->int8))) {
            snprintf(msg, sizeof msg, "out of memory for the regrouped weights");
            goto fail;
        }
    }
    /* inverse frequencies; Llama 3 files carry per-dimension divisors in rope_freqs */
    m->rope_inv = malloc(sizeof(float) * (size_t)(hp->n_rot / 2));
    if (!m->rope_inv) {
        rc = ENG_ENOMEM;
        goto fail;
    }
    const struct gguf_tensor *rf = gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (rf && (rf->type != GGML_F32 || rf->nelem != hp->n_rot / 2)) {
        snprintf(msg, sizeof msg, "tensor 'rope_freqs.weight' is not F32 [%d]", hp->n_rot / 2);
        rc = ENG_EFORMAT;
        goto fail;
    }
    for (int i = 0; i < hp->n_rot / 2; i++) {
        double inv = pow(hp->rope_base, -2.0 * i / hp->n_rot) / hp->rope_scale;
        if (rf)
            inv /= ((const float *)rf->data)[i];
        m->rope_inv[i] = (float)inv;
    }
    if (pack && (rc = pack_head(m, m->int8))) {
        snprintf(msg, sizeof msg, "out of memory for the regrouped weights");
        goto fail;
    }
    if (opt && opt->threads > 0) {
        omp_set_num_threads(opt->threads);
        openblas_set_num_threads(opt->threads);
    }
    m->threads = omp_get_max_threads();
    if (opt && opt->backend && (rc = to_device(m, opt, msg, sizeof msg)))
        goto fail;
    if (opt && opt->progress)
        opt->progress(opt->progress_ud, 1.0);
    eng_log(ENG_LOG_INFO,
            "model %s: %d layers, %d dims, %d/%d heads, vocab %d%s, on %s; weights %.1f MB in "
            "memory, the file's %.1f MB mapped",
            path, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_vocab,
            hp->tied_output ? ", tied output" : "", eng_model_device(m),
            eng_model_host_bytes(m) / 1e6, gguf_mapped_bytes(m->gguf) / 1e6);
    *out = m;
    return 0;
fail:
    snprintf(err, errlen, "%s: %s", path, msg);
fail_quiet:
    eng_model_destroy(m);
    return rc;
}

const struct eng_hparams *eng_model_hparams(const eng_model *m)
{
    return &m->hp;
}

struct gguf_file *eng_model_gguf(const eng_model *m)
{
    return m->gguf;
}

/* ------------------------------------------------------------------ forward */

/*
 * Every token attends over the cache in place, in groups of tokens sharing blocks (attend_group()),
 * where that kernel exists (AVX-512, heads of a multiple of 16 dimensions; AVX2, F32 or F16 pools
 * and heads of a multiple of 8); elsewhere attention goes by query tiles of up to ATT_TILE tokens x
 * the heads sharing a KV head: their scores against the whole context ([ATT_TILE * group][ctx]
 * floats) stay in L2. The in-place kernel is also the faster one for prompts: 2 threads prefilled
 * 1,056 tokens at 1,273-1,325 tokens/s through it against 1,152-1,190 through the tiles (F16 keys
 * and values; F32 1,268-1,272 / 1,136-1,161, BF16 1,294-1,355 / 1,103-1,121; 3,000 tokens 939-951 /
 * 777-779), and a request's last 46 prompt tokens after a cached 1,024-token prefix took 44-46 ms
 * against 55-56.
 */
#define ATT_TILE 32
/* query heads attending together over shared blocks: members of a group (at most
 * ATT_GROUP_MAX) x the heads sharing a KV head. 24 (8 members of SmolLM2's 3 heads a KV
 * head) rather than 12: sequences spread unevenly over a few shared prompts (6, 5, 3 and 2
 * of 16 over 4 prompts of 1,072 tokens) read each prompt's keys once for more of them, and
 * a step of 16 ran 2-6% shorter (alternating steps; 4 even groups of 4: the same) */
#define ATT_GROUP_QUERIES 24
#define ATT_GROUP_MAX 8

/* tokens a tile of gemm_lanes() */
#define LANES_TT 16

/* floats of gemm_lanes()'s transposed activations for t tokens of k columns */
static size_t lanes_floats(int t, int k)
{
    return (size_t)(t + LANES_TT - 1) / LANES_TT * LANES_TT * (size_t)k;
}

/* bytes of linear_int8()'s 8-bit activations for t tokens of k columns (then their scales
 * and sums, 2 floats a block of 32), rounded up to whole cache lines */
static size_t int8_act_bytes(int t, int k)
{
    return ((size_t)t * k + 63) / 64 * 64;
}

/* bytes of linear()'s scratch for t tokens of k columns, run by up to `threads` OpenMP
 * threads: gemm_lanes()'s transposed activations, linear_int8()'s quantized ones with their
 * scales and sums, or gemm_panel8()'s panels (16 k floats a thread) */
static size_t linear_scratch_bytes(int t, int k, int threads)
{
    const size_t lanes = sizeof(float) * lanes_floats(t, k);
    const size_t int8 = int8_act_bytes(t, k) + sizeof(float) * 2 * (size_t)t * (k / 32);
    const size_t panels = sizeof(float) * 16 * (size_t)k * (size_t)threads;
    const size_t most = lanes > int8 ? lanes : int8;
    return most > panels ? most : panels;
}

/* floats of per-thread scratch for attend_tile() and attend_group() up to ctx positions */
static size_t attn_scratch_floats(int ctx, int hd, int group)
{
    size_t rows = (size_t)ATT_TILE * group;
    size_t tile = 2 * (size_t)ctx * hd + rows * ((size_t)ctx + 2 * hd + 1);
    size_t nq = (size_t)(group > ATT_GROUP_QUERIES ? group : ATT_GROUP_QUERIES);
    /* queries, outputs, 1 / sums, scores; then (BF16 pools) queries and probabilities in
     * bfloat16 */
    size_t grp = nq * (2 * (size_t)hd + 1 + (size_t)ctx + 16) + nq * ((size_t)hd + ctx + 16) / 2;
    return tile > grp ? tile : grp;
}

static int grow(eng_model *m, int T, int ctx)
{
    const struct eng_hparams *hp = &m->hp;
    if (T > m->cap) {
        size_t t = (size_t)T;
        float **bufs[] = {&m->x, &m->xn, &m->q, &m->att, &m->gate, &m->up, &m->qkv};
        size_t widths[] = {(size_t)hp->n_embd,
                           (size_t)hp->n_embd,
                           (size_t)hp->n_head * hp->head_dim,
                           (size_t)hp->n_head * hp->head_dim,
                           (size_t)hp->n_ff,
                           (size_t)hp->n_ff * 2,
                           (size_t)(hp->n_head + 2 * hp->n_head_kv) * hp->head_dim};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            float *p = realloc(*bufs[i], t * widths[i] * sizeof(float));
            if (!p)
                return ENG_ENOMEM;
            *bufs[i] = p;
        }
        int widest = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
        widest = hp->n_head * hp->head_dim > widest ? hp->n_head * hp->head_dim : widest;
        int *pos = realloc(m->pos, t * sizeof *pos);
        float *sel = realloc(m->sel, t * (size_t)hp->n_embd * sizeof(float));
        float *xt = realloc(m->xt, linear_scratch_bytes(T, widest, m->threads));
        if (pos)
            m->pos = pos;
        if (sel)
            m->sel = sel;
        if (xt)
            m->xt = xt;
        if (!pos || !sel || !xt)
            return ENG_ENOMEM;
        m->cap = T;
    }
    if (ctx > m->cap_ctx) {
        size_t per = attn_scratch_floats(ctx, hp->head_dim, hp->n_head / hp->n_head_kv);
        float *s = realloc(m->scores, (size_t)m->threads * per * sizeof(float));
        if (!s)
            return ENG_ENOMEM;
        m->scores = s;
        m->scratch_floats = per;
        m->cap_ctx = ctx;
    }
    return 0;
}

/* At most this many tokens in a pass go through the decode kernels: gemm_few() over the
 * regrouped weights (with AVX-512 or AVX2), or the matrix-vector kernels over the stored
 * form (matrices not regrouped). More go through gemm_lanes() where AVX-512 exists (any
 * number: on 2 cores of an AMD EPYC it ran the model's shapes at 300-420 GFLOP/s from 16 to
 * 1,024 tokens, where OpenBLAS on the F32 copies gave 60-220), or for F32 weights, from one
 * token on, up to GEMM_SMALL_MAX_T through gemm_small(), and beyond through OpenBLAS.
 * Decode of 3 / 4 sequences at a 512-token context, 2 threads, alternating runs: 164-176 /
 * 157-182 tokens/s through the matrix-vector kernels run once a sequence, 140-166 / 189-233
 * through the F32 panels that preceded gemm_lanes(); for 3, dotn_rows() (all the sequences
 * at once, over the stored form; since removed) then gave 187-193. gemm_few() with
 * AVX-512, one thread, alternating runs on an Intel Xeon (Cascade Lake), against
 * dot2_rows() / dotn_rows(): one sequence 38-47 tokens/s against 37-47, 2: 64-85 against
 * 61-68, 3: 89-99 against 76-83. */
#define QMV_MAX_T ENG_ROWS_MAX_T
#ifndef GEMM_SMALL_MAX_T
#define GEMM_SMALL_MAX_T 64
#endif

/* x86-64: one clone per vector width, picked at load; elsewhere the compiler's own target */
#if defined(__x86_64__)
#define VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* The kernels of the matrix products (F32 and 8-bit, AVX2 and AVX-512) and of attention
 * are not instrumented by AddressSanitizer or UndefinedBehaviorSanitizer in the server,
 * which checked every broadcast, load and index of their inner loops and made a sanitized
 * build's prompts minutes long (82% of a sanitized server's time on a 1,900-token prompt
 * was lanes_rows()'s address checks, 14% attention's; without them, UBSan's still made it
 * 3 times the plain build's). Their bounds follow from vnni_pack()'s layout, the pool's
 * blocks and the block table, and the scratch the callers size; test_ops.c, which defines
 * KERNEL_NOSANITIZE empty, checks their values against references with the checks on. */
#ifndef KERNEL_NOSANITIZE
#define KERNEL_NOSANITIZE __attribute__((no_sanitize("address", "undefined")))
#endif

/* GCC vector types: the kernels below compile to SSE, AVX2 or AVX-512 (target_clones
 * picks at run time) without intrinsics. */
typedef float v16f __attribute__((vector_size(64)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));
typedef int8_t v16i8 __attribute__((vector_size(16)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* (built with -Wno-psabi: these are static and always inlined, no ABI crosses files) */
static inline __attribute__((always_inline)) v16f load16(const float *p)
{
    v16f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) float hsum(v16f v)
{
    float s = 0;
    for (int i = 0; i < 16; i++)
        s += v[i];
    return s;
}

/* one row of a Q4_1 matrix times x: sum over blocks of d * (q . x) + m * sum(x) */
VECTOR_CLONES static float dot_q4_1_generic(const uint8_t *qs, const float *d, const float *mn,
                                            const float *x, const float *xsum, int nb)
{
    v16f acc = {0};
    float macc = 0;
    for (int b = 0; b < nb; b++, qs += 16, x += 32) {
        v16u8 q;
        memcpy(&q, qs, sizeof q);
        const v16f lo = __builtin_convertvector(__builtin_convertvector(q & 15, v16i), v16f);
        const v16f hi = __builtin_convertvector(__builtin_convertvector(q >> 4, v16i), v16f);
        acc += d[b] * (lo * load16(x) + hi * load16(x + 16));
        macc += mn[b] * xsum[b];
    }
    return hsum(acc) + macc;
}

VECTOR_CLONES static float dot_q8_0_generic(const uint8_t *qs, const float *d, const float *x,
                                            int nb)
{
    v16f acc = {0};
    for (int b = 0; b < nb; b++, qs += 32, x += 32) {
        v16i8 q0, q1;
        memcpy(&q0, qs, sizeof q0);
        memcpy(&q1, qs + 16, sizeof q1);
        const v16f f0 = __builtin_convertvector(__builtin_convertvector(q0, v16i), v16f);
        const v16f f1 = __builtin_convertvector(__builtin_convertvector(q1, v16i), v16f);
        acc += d[b] * (f0 * load16(x) + f1 * load16(x + 16));
    }
    return hsum(acc);
}

#if defined(__x86_64__)
/* AVX2 + FMA: GCC 12 does not vectorize byte-to-float conversions on its own. */
__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static float dot_q4_1_avx2(const uint8_t *qs, const float *d,
                                                              const float *mn, const float *x,
                                                              const float *xsum, int nb)
{
    __m256 acc = _mm256_setzero_ps();
    const __m128i low4 = _mm_set1_epi8(15);
    float macc = 0;
    for (int b = 0; b < nb; b++, qs += 16, x += 32) {
        __m128i q = _mm_loadu_si128((const __m128i *)qs);
        __m128i lo = _mm_and_si128(q, low4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4);
        __m256 l0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
        __m256 l1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
        __m256 h0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
        __m256 h1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
        __m256 s = _mm256_mul_ps(l0, _mm256_loadu_ps(x));
        s = _mm256_fmadd_ps(l1, _mm256_loadu_ps(x + 8), s);
        s = _mm256_fmadd_ps(h0, _mm256_loadu_ps(x + 16), s);
        s = _mm256_fmadd_ps(h1, _mm256_loadu_ps(x + 24), s);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d[b]), s, acc);
        macc += mn[b] * xsum[b];
    }
    return hsum256(acc) + macc;
}

__attribute__((target("avx2,fma"))) static float dot_q8_0_avx2(const uint8_t *qs, const float *d,
                                                              const float *x, int nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++, qs += 32, x += 32) {
        __m256 s = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(qs + 8 * k));
            s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                                _mm256_loadu_ps(x + 8 * k), s);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d[b]), s, acc);
    }
    return hsum256(acc);
}

static int have_avx2(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = isa_cap() >= ISA_AVX2 && __builtin_cpu_supports("avx2") &&
                 __builtin_cpu_supports("fma");
    return cached;
}

/* F16C (half-precision conversions): with AVX2 on real processors, but a virtual machine
 * may hide it */
static int have_f16c(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = have_avx2() && __builtin_cpu_supports("f16c");
    return cached;
}

/* the AVX-512 kernels' target (with FMA) */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

/* the first min(left, 16) of 16 lanes (left > 0): a loop's last, partial vector */
static inline __mmask16 lanes_left(int left)
{
    return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
}

static int have_avx512(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = isa_cap() >= ISA_AVX512 && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512dq");
    return cached;
}
#endif

/* IEEE binary16 to and from float, for an F16 KV pool (kvcache.h): F16C where the processor
 * has it, for whole groups of 8, and the compiler's _Float16 conversions for the rest; both
 * round to nearest even (beyond +-65504 to infinity: keys and values of Llama-family models
 * stay far below). */
static inline uint16_t f32_to_f16(float x)
{
    _Float16 h = (_Float16)x;
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

static inline float f16_to_f32(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, sizeof h);
    return (float)h;
}

#if defined(__x86_64__)
/* the first n / 8 * 8 values; returns how many */
__attribute__((target("avx2,f16c"))) static int f16_store_f16c(uint16_t *d, const float *x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

__attribute__((target("avx2,f16c"))) static int f16_load_f16c(float *y, const uint16_t *s, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    return i;
}
#endif

static void f16_store(uint16_t *d, const float *x, int n)
{
    int i = 0;
#if defined(__x86_64__)
    if (have_f16c())
        i = f16_store_f16c(d, x, n);
#endif
    for (; i < n; i++)
        d[i] = f32_to_f16(x[i]);
}

static void f16_load(float *y, const uint16_t *s, int n)
{
    int i = 0;
#if defined(__x86_64__)
    if (have_f16c())
        i = f16_load_f16c(y, s, n);
#endif
    for (; i < n; i++)
        y[i] = f16_to_f32(s[i]);
}

/* bfloat16 (the top half of a float) to and from float, for a BF16 KV pool: rounded to
 * nearest even, as VCVTNEPS2BF16 does (NaN stays NaN) */
static inline uint16_t f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x40);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* where dimension e at a block's slot lives in a BF16 head block's keys or values (pairs,
 * kvcache.h) */
static inline size_t bf16_k_at(int bs, int e, int slot)
{
    return ((size_t)(e / 2) * bs + slot) * 2 + (e & 1);
}

static inline size_t bf16_v_at(int hd, int e, int slot)
{
    return ((size_t)(slot / 2) * hd + e) * 2 + (slot & 1);
}

/* n values as signed bytes q and the scale they share: x ~ q * scale, to nearest, with the
 * largest magnitude at +-127 (a Q8_0 KV pool, kvcache.h). Returns the scale. */
static float q8_row(int8_t *q, const float *x, int n)
{
    float amax = 0;
    for (int i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float inv = amax > 0 ? 127.0f / amax : 0;
    /* to the nearest integer, ties to even, as lrintf() does, without a call a value:
     * adding and taking away 1.5 * 2^23 rounds away a float's fraction below 2^22 */
    const float magic = 0x1.8p23f;
    for (int i = 0; i < n; i++)
        q[i] = (int8_t)(int)(x[i] * inv + magic - magic);
    return amax / 127.0f;
}

/* where dimension e at a block's slot lives in a Q8_0 head block's keys (quads,
 * kvcache.h) */
static inline size_t q8_k_at(int bs, int e, int slot)
{
    return ((size_t)(e / 4) * bs + slot) * 4 + (e & 3);
}

/* Position (b, slot)'s keys and values of every KV head (k, v: [n_kv_head][head_dim]) into
 * layer l of the pool, in its layout (keys transposed, kvcache.h) and dtype. */
static void kv_store(kvc_pool *kv, int l, int32_t b, int slot, const float *k, const float *v)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int hd = ks->head_dim, bs = ks->block_size;
    for (int g = 0; g < ks->n_kv_head; g++, k += hd, v += hd) {
        void *kh = kvc_k_head(kv, l, b, g), *vh = kvc_v_head(kv, l, b, g);
        if (ks->dtype == KVC_BF16) {
            uint16_t *kb = kh, *vb = vh;
            for (int e = 0; e < hd; e++) {
                kb[bf16_k_at(bs, e, slot)] = f32_to_bf16(k[e]);
                vb[bf16_v_at(hd, e, slot)] = f32_to_bf16(v[e]);
            }
        } else if (ks->dtype == KVC_Q8_0) {
            int8_t *kb = kh, *vb = vh, qk[hd];
            ((float *)(kb + kvc_q8_scales_at(ks)))[slot] = q8_row(qk, k, hd);
            ((float *)(vb + kvc_q8_scales_at(ks)))[slot] = q8_row(vb + (size_t)slot * hd, v, hd);
            for (int e = 0; e < hd; e++)
                kb[q8_k_at(bs, e, slot)] = (int8_t)(uint8_t)(qk[e] + 128);
        } else if (ks->dtype == KVC_F16) {
            uint16_t *kb = kh, *vb = vh, k16[hd];
            f16_store(k16, k, hd);
            for (int e = 0; e < hd; e++)
                kb[(size_t)e * bs + slot] = k16[e];
            f16_store(vb + (size_t)slot * hd, v, hd);
        } else {
            float *kb = kh, *vb = vh;
            for (int e = 0; e < hd; e++)
                kb[(size_t)e * bs + slot] = k[e];
            memcpy(vb + (size_t)slot * hd, v, sizeof(float) * hd);
        }
    }
}

static float dot_q4_1(const uint8_t *qs, const float *d, const float *mn, const float *x,
                      const float *xsum, int nb)
{
#if defined(__x86_64__)
    if (have_avx2())
        return dot_q4_1_avx2(qs, d, mn, x, xsum, nb);
#endif
    return dot_q4_1_generic(qs, d, mn, x, xsum, nb);
}

static float dot_q8_0(const uint8_t *qs, const float *d, const float *x, int nb)
{
#if defined(__x86_64__)
    if (have_avx2())
        return dot_q8_0_avx2(qs, d, x, nb);
#endif
    return dot_q8_0_generic(qs, d, x, nb);
}

/* rows ra and rb of a quantized matrix (Q4_1 or Q8_0) times x: out[0], out[1] */
static void dot2_rows(const struct wmat *w, int ra, int rb, const float *x, const float *xsum,
                      float *out)
{
    const int nb = w->k / 32;
    const size_t a = (size_t)ra * nb, b = (size_t)rb * nb;
    if (w->type == GGML_Q4_1) {
        out[0] = dot_q4_1(w->qs + a * 16, w->qd + a, w->qm + a, x, xsum, nb);
        out[1] = dot_q4_1(w->qs + b * 16, w->qd + b, w->qm + b, x, xsum, nb);
    } else {
        out[0] = dot_q8_0(w->qs + a * 32, w->qd + a, x, nb);
        out[1] = dot_q8_0(w->qs + b * 32, w->qd + b, x, nb);
    }
}

#if defined(__x86_64__)
/*
 * y (+)= x W^T for a few to some tens of tokens, on the F32 weights as they are ([n][k]):
 * OpenBLAS repacks W on every call, which at such sizes costs as much as the arithmetic
 * (W is as large as all the work it is used for). A tile of TI tokens by RJ rows keeps
 * TI x RJ accumulators over k in registers: each k-step loads TI + RJ vectors for TI x RJ
 * FMAs, and the rows' 6 x k floats stay in L1 while every token passes over them.
 */
#define GEMM_TI 4
#define GEMM_RJ 6

AVX512 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
gemm_tile(const float *x, const float *w, float *y, int k, int n, int ti, int rj, int accumulate)
{
    __m512 acc[GEMM_TI][GEMM_RJ];
#pragma GCC unroll 4
    for (int i = 0; i < ti; i++)
#pragma GCC unroll 6
        for (int j = 0; j < rj; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (int kk = 0; kk < k; kk += 16) {
        __mmask16 m = lanes_left(k - kk);
        __m512 xv[GEMM_TI];
#pragma GCC unroll 4
        for (int i = 0; i < ti; i++)
            xv[i] = _mm512_maskz_loadu_ps(m, x + (size_t)i * k + kk);
#pragma GCC unroll 6
        for (int j = 0; j < rj; j++) {
            __m512 wv = _mm512_maskz_loadu_ps(m, w + (size_t)j * k + kk);
#pragma GCC unroll 4
            for (int i = 0; i < ti; i++)
                acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < ti; i++)
#pragma GCC unroll 6
        for (int j = 0; j < rj; j++) {
            float v = _mm512_reduce_add_ps(acc[i][j]);
            float *o = y + (size_t)i * n + j;
            *o = accumulate ? *o + v : v;
        }
}

AVX512 KERNEL_NOSANITIZE static void gemm_rows(const float *x, int t, const float *w, int r0,
                                               int rj, int k, float *y, int n, int accumulate)
{
    const float *wr = w + (size_t)r0 * k;
    int i = 0;
    if (rj == GEMM_RJ) { /* constant bounds: the accumulators live in registers */
        for (; i + GEMM_TI <= t; i += GEMM_TI)
            gemm_tile(x + (size_t)i * k, wr, y + (size_t)i * n + r0, k, n, GEMM_TI, GEMM_RJ,
                      accumulate);
        for (; i < t; i++)
            gemm_tile(x + (size_t)i * k, wr, y + (size_t)i * n + r0, k, n, 1, GEMM_RJ,
                      accumulate);
    } else {
        for (; i < t; i++)
            for (int j = 0; j < rj; j++)
                gemm_tile(x + (size_t)i * k, wr + (size_t)j * k, y + (size_t)i * n + r0 + j, k,
                          n, 1, 1, accumulate);
    }
}

static void gemm_small(const float *x, int t, const float *w, int n, int k, float *y,
                       int accumulate)
{
#pragma omp parallel for schedule(static)
    for (int r0 = 0; r0 < n; r0 += GEMM_RJ)
        gemm_rows(x, t, w, r0, n - r0 < GEMM_RJ ? n - r0 : GEMM_RJ, k, y, n, accumulate);
}

/*
 * 8-bit products (engine.cpu_matmul = int8), llama.cpp's arithmetic on the CPU: each block
 * of 32 activations of a token is rounded to int8 with one scale (x ~ d_x q_x, d_x =
 * max|x| / 127, kept in F16), and a block of a weight row against it is one integer dot
 * product, exact, times both blocks' scales. VPDPBUSD sums 4 byte products into each
 * 32-bit lane; the weights are regrouped at load (vnni_pack()) so that one 64-byte load
 * holds 4 (Q8_0) or 8 (Q4_1, two nibbles a byte) consecutive weights of 16 rows: a lane is
 * a row, and 16 rows' block sums come out in one register, without horizontal sums. Every
 * (token, row) pair is summed in the same order whatever the number of tokens, so a
 * sequence's logits do not depend on its batch. (Q4_0 is stored as Q4_1: stored_form().)
 *
 *   Q4_1 (w = d_w q_w + m_w, q_w in 0..15): for each 16 rows and 8 consecutive weights of
 *        a block, 64 bytes; byte 4r + j holds weight j (low nibble) and weight 4 + j (high
 *        nibble) of row r. A block gives d_w d_x (q_w . q_x) + m_w s_x, where s_x = d_x
 *        sum(q_x) in F16 stands for sum(x) (llama.cpp's Q8_1 blocks).
 *   Q8_0 (w = d_w q_w, q_w signed): for each 16 rows and 4 consecutive weights, 64 bytes;
 *        byte 4r + j is weight j of row r. VPDPBUSD multiplies unsigned by signed bytes,
 *        so the activations go in as q_x + 128 and 128 sum(q_w) (vc) is taken off.
 *
 * vd, vm, vc: the rows' scales, minima and those sums, [groups of 16 rows][blocks][16].
 */
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))
#define VNNI_TT 4 /* tokens a tile */

static int have_vnni(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = have_avx512() && __builtin_cpu_supports("avx512vnni");
    return cached;
}

/* 1: the AVX2 kernels even where VNNI exists (for tests holding the two equal) */
static int int8_no_vnni;

static void vnni_free(struct wmat *w)
{
    free(w->vq);
    free(w->vd);
    free(w->vm);
    free(w->vc);
    w->vq = NULL;
    w->vd = w->vm = NULL;
    w->vc = NULL;
}

/* w's stored form (qs, qd, qm) regrouped as above; a matrix of another type is left as
 * it is (its products stay F32). Rows past n (up to a multiple of 16) are zero. */
static int vnni_pack(struct wmat *w)
{
    if (!w->qs || w->k % 32)
        return 0;
    const int nb = w->k / 32, q4 = w->type == GGML_Q4_1;
    const size_t entries = padded_blocks(w), per = block_bytes(w->type);
    w->vq = calloc(entries, per);
    w->vd = calloc(entries, sizeof(float));
    if (q4)
        w->vm = calloc(entries, sizeof(float));
    else
        w->vc = calloc(entries, sizeof(int32_t));
    if (!w->vq || !w->vd || (q4 ? !w->vm : !w->vc)) {
        vnni_free(w);
        return ENG_ENOMEM;
    }
    /* (each group of 16 rows by one thread) */
#pragma omp parallel for schedule(static)
    for (int g = 0; g < (w->n + 15) / 16; g++)
        for (int r = 16 * g; r < w->n && r < 16 * g + 16; r++)
            for (int b = 0; b < nb; b++) {
                const size_t src = (size_t)r * nb + b, at = ((size_t)g * nb + b) * 16;
                const int lane = r % 16;
                uint8_t *dst = w->vq + at * per + 4 * lane;
                w->vd[at + lane] = w->qd[src];
                if (q4) {
                    /* bytes 4c + i of the regrouped block hold weights 8c + i (low nibble)
                     * and 8c + 4 + i (high), worked on 4 bytes at once: x[j] is stored
                     * bytes 4j .. 4j + 3, which hold weights 4j + i (low nibbles) and
                     * 16 + 4j + i (high) */
                    const uint32_t lo = 0x0F0F0F0Fu, hi = 0xF0F0F0F0u;
                    uint32_t x[4], y[4];
                    memcpy(x, w->qs + src * per, 16);
                    w->vm[at + lane] = w->qm[src];
                    y[0] = (x[0] & lo) | (x[1] & lo) << 4;
                    y[1] = (x[2] & lo) | (x[3] & lo) << 4;
                    y[2] = (x[0] >> 4 & lo) | (x[1] & hi);
                    y[3] = (x[2] >> 4 & lo) | (x[3] & hi);
                    for (int c = 0; c < 4; c++)
                        memcpy(dst + 64 * c, &y[c], 4);
                } else {
                    const int8_t *s = (const int8_t *)w->qs + src * per;
                    int32_t sum = 0;
                    for (int c = 0; c < 8; c++) /* weights 4c .. 4c + 3 */
                        memcpy(dst + 64 * c, s + 4 * c, 4);
                    for (int e = 0; e < 32; e++)
                        sum += s[e];
                    w->vc[at + lane] = 128 * sum;
                }
            }
    return 0;
}

/*
 * x [t][k] as int8 blocks: q [t][k] (plus 128, as unsigned bytes, when `offset`: for Q8_0
 * weights), scales d [t][k/32] and, for Q4_1's minima, the blocks' sums s = d * sum(q)
 * [t][k/32]; d and s rounded to F16 and q to nearest even, as llama.cpp's Q8_1 blocks.
 * Called by every thread of a parallel region: the blocks are shared out among them.
 */
VNNI static void quantize_x(const float *x, int t, int k, int offset, int8_t *q, float *d,
                            float *s)
{
    const int nb = k / 32;
    const __m128i flip = _mm_set1_epi8(offset ? (char)0x80 : 0);
#pragma omp for schedule(static)
    for (int ib = 0; ib < t * nb; ib++) {
        const float *p = x + (size_t)(ib / nb) * k + 32 * (ib % nb);
        int8_t *o = q + (size_t)(ib / nb) * k + 32 * (ib % nb);
        const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
        const float amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
        const float sc = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
        const __m512 iv = _mm512_set1_ps(inv);
        const __m512i il = _mm512_cvtps_epi32(_mm512_mul_ps(lo, iv));
        const __m512i ih = _mm512_cvtps_epi32(_mm512_mul_ps(hi, iv));
        _mm_storeu_si128((__m128i *)o, _mm_xor_si128(_mm512_cvtsepi32_epi8(il), flip));
        _mm_storeu_si128((__m128i *)(o + 16), _mm_xor_si128(_mm512_cvtsepi32_epi8(ih), flip));
        d[ib] = (float)(_Float16)sc;
        s[ib] = (float)(_Float16)(sc * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(il, ih)));
    }
}

static inline __attribute__((always_inline)) int32_t load_i32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* y[i][16 g + lane] (+)= acc[i][lane] for tt tokens, rows past n left alone */
AVX512 static inline __attribute__((always_inline)) void
store_rows16(const __m512 *acc, int tt, int g, float *y, int n, int accumulate)
{
    const int rows = n - 16 * g < 16 ? n - 16 * g : 16;
    const __mmask16 mask = (__mmask16)((1u << rows) - 1);
#pragma GCC unroll 16
    for (int i = 0; i < tt; i++) {
        float *o = y + (size_t)i * n + 16 * g;
        __m512 v = acc[i];
        if (accumulate)
            v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, o), v);
        _mm512_mask_storeu_ps(o, mask, v);
    }
}

/* rows 16 g .. 16 g + 15 of w times tt tokens of quantized x (a constant where inlined):
 * y[i][row] (+)= the products */
VNNI KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
vnni_tile(const struct wmat *w, int g, const int8_t *xq, const float *xd, const float *xs,
          int tt, float *y, int accumulate)
{
    const int nb = w->k / 32, k = w->k, n = w->n, q4 = w->type == GGML_Q4_1;
    const __m512i low4 = _mm512_set1_epi8(15);
    __m512 acc[VNNI_TT];
#pragma GCC unroll 4
    for (int i = 0; i < tt; i++)
        acc[i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const size_t at = ((size_t)g * nb + b) * 16;
        const int8_t *xb = xq + 32 * b;
        __m512i s[VNNI_TT];
#pragma GCC unroll 4
        for (int i = 0; i < tt; i++)
            s[i] = _mm512_setzero_si512();
        if (q4) {
            const uint8_t *wq = w->vq + at * 16;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512i v = _mm512_loadu_si512(wq + 64 * c);
                const __m512i lo = _mm512_and_si512(v, low4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
#pragma GCC unroll 4
                for (int i = 0; i < tt; i++) {
                    const int8_t *xi = xb + (size_t)i * k + 8 * c;
                    s[i] = _mm512_dpbusd_epi32(s[i], lo, _mm512_set1_epi32(load_i32(xi)));
                    s[i] = _mm512_dpbusd_epi32(s[i], hi, _mm512_set1_epi32(load_i32(xi + 4)));
                }
            }
        } else {
            const uint8_t *wq = w->vq + at * 32;
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m512i v = _mm512_loadu_si512(wq + 64 * c);
#pragma GCC unroll 4
                for (int i = 0; i < tt; i++)
                    s[i] = _mm512_dpbusd_epi32(
                        s[i], _mm512_set1_epi32(load_i32(xb + (size_t)i * k + 4 * c)), v);
            }
            const __m512i corr = _mm512_loadu_si512(w->vc + at);
#pragma GCC unroll 4
            for (int i = 0; i < tt; i++)
                s[i] = _mm512_sub_epi32(s[i], corr);
        }
        const __m512 d = _mm512_loadu_ps(w->vd + at);
#pragma GCC unroll 4
        for (int i = 0; i < tt; i++)
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]),
                                     _mm512_mul_ps(d, _mm512_set1_ps(xd[(size_t)i * nb + b])),
                                     acc[i]);
        if (q4) {
            const __m512 m = _mm512_loadu_ps(w->vm + at);
#pragma GCC unroll 4
            for (int i = 0; i < tt; i++)
                acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(xs[(size_t)i * nb + b]), acc[i]);
        }
    }
    store_rows16(acc, tt, g, y, n, accumulate);
}

/* y [t][n] (+)= x [t][k] W^T through the 8-bit products, the quantized activations in
 * xq [t][k], xd and xs [t][k/32] */
VNNI KERNEL_NOSANITIZE static void int8_pass(const struct wmat *w, const float *x, int t, float *y,
                                             int accumulate, int8_t *xq, float *xd, float *xs)
{
    const int k = w->k, nb = k / 32, groups = (w->n + 15) / 16;
#pragma omp parallel
    {
        quantize_x(x, t, k, w->type == GGML_Q8_0, xq, xd, xs); /* (ends in a barrier) */
#pragma omp for schedule(static)
        for (int g = 0; g < groups; g++) {
            int i = 0;
            for (; i + VNNI_TT <= t; i += VNNI_TT)
                vnni_tile(w, g, xq + (size_t)i * k, xd + (size_t)i * nb, xs + (size_t)i * nb,
                          VNNI_TT, y + (size_t)i * w->n, accumulate);
            const int8_t *q = xq + (size_t)i * k;
            const float *d = xd + (size_t)i * nb, *s = xs + (size_t)i * nb;
            float *o = y + (size_t)i * w->n;
            switch (t - i) {
            case 3:
                vnni_tile(w, g, q, d, s, 3, o, accumulate);
                break;
            case 2:
                vnni_tile(w, g, q, d, s, 2, o, accumulate);
                break;
            case 1:
                vnni_tile(w, g, q, d, s, 1, o, accumulate);
                break;
            }
        }
    }
}

/*
 * The same products on AVX2 without VNNI (int8_avx2_pass()), from the same regrouped
 * weights: each 64-byte group as two halves of 8 rows. VPMADDUBSW sums two byte products
 * into 16 bits and VPMADDWD pairs of those into 32: at most 2 x 15 x 127 for Q4_1; for
 * Q8_0 the activations, signed here, take the weights' signs and multiply their magnitudes
 * (at most 2 x 128 x 127, as llama.cpp does). The integer sums are the VNNI kernel's, and
 * each lane then goes through the same float operations, so the results are bit-identical.
 */
#define INT8_AVX2 __attribute__((target("avx2,fma")))
#define AVX2_TT 2 /* tokens a tile */

INT8_AVX2 static inline __attribute__((always_inline)) __m256i dot4_avx2(__m256i acc, __m256i u,
                                                                         __m256i s)
{
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

INT8_AVX2 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
avx2_tile(const struct wmat *w, int g, const int8_t *xq, const float *xd, const float *xs,
          int tt, float *y, int accumulate)
{
    const int nb = w->k / 32, k = w->k, n = w->n, q4 = w->type == GGML_Q4_1;
    const __m256i low4 = _mm256_set1_epi8(15);
    __m256 acc[AVX2_TT][2];
    for (int i = 0; i < tt; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const size_t at = ((size_t)g * nb + b) * 16;
        const int8_t *xb = xq + 32 * b;
        __m256i s[AVX2_TT][2];
        for (int i = 0; i < tt; i++)
            s[i][0] = s[i][1] = _mm256_setzero_si256();
        if (q4) {
            const uint8_t *wq = w->vq + at * 16;
            for (int c = 0; c < 4; c++)
                for (int h = 0; h < 2; h++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(wq + 64 * c + 32 * h));
                    const __m256i lo = _mm256_and_si256(v, low4);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                    for (int i = 0; i < tt; i++) {
                        const int8_t *xi = xb + (size_t)i * k + 8 * c;
                        s[i][h] = dot4_avx2(s[i][h], lo, _mm256_set1_epi32(load_i32(xi)));
                        s[i][h] = dot4_avx2(s[i][h], hi, _mm256_set1_epi32(load_i32(xi + 4)));
                    }
                }
        } else {
            const uint8_t *wq = w->vq + at * 32;
            for (int c = 0; c < 8; c++)
                for (int h = 0; h < 2; h++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(wq + 64 * c + 32 * h));
                    const __m256i mag = _mm256_abs_epi8(v);
                    for (int i = 0; i < tt; i++) {
                        const __m256i xv =
                            _mm256_set1_epi32(load_i32(xb + (size_t)i * k + 4 * c));
                        s[i][h] = dot4_avx2(s[i][h], mag, _mm256_sign_epi8(xv, v));
                    }
                }
        }
        for (int h = 0; h < 2; h++) {
            const __m256 d = _mm256_loadu_ps(w->vd + at + 8 * h);
            for (int i = 0; i < tt; i++)
                acc[i][h] = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(s[i][h]),
                    _mm256_mul_ps(d, _mm256_set1_ps(xd[(size_t)i * nb + b])), acc[i][h]);
            if (q4) {
                const __m256 m = _mm256_loadu_ps(w->vm + at + 8 * h);
                for (int i = 0; i < tt; i++)
                    acc[i][h] =
                        _mm256_fmadd_ps(m, _mm256_set1_ps(xs[(size_t)i * nb + b]), acc[i][h]);
            }
        }
    }
    const int rows = n - 16 * g < 16 ? n - 16 * g : 16;
    for (int i = 0; i < tt; i++) {
        float v[16], *o = y + (size_t)i * n + 16 * g;
        _mm256_storeu_ps(v, acc[i][0]);
        _mm256_storeu_ps(v + 8, acc[i][1]);
        for (int r = 0; r < rows; r++)
            o[r] = accumulate ? o[r] + v[r] : v[r];
    }
}

/* quantize_x() on AVX2 (signed activations only: this path's Q8_0 needs no offset) */
INT8_AVX2 static void quantize_x_avx2(const float *x, int t, int k, int8_t *q, float *d,
                                      float *s)
{
    const int nb = k / 32;
    const __m256 sign = _mm256_set1_ps(-0.0f);
#pragma omp for schedule(static)
    for (int ib = 0; ib < t * nb; ib++) {
        const float *p = x + (size_t)(ib / nb) * k + 32 * (ib % nb);
        int8_t *o = q + (size_t)(ib / nb) * k + 32 * (ib % nb);
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(p + 8 * j);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
        }
        float lanes[8], amax = 0;
        _mm256_storeu_ps(lanes, mx);
        for (int j = 0; j < 8; j++)
            amax = lanes[j] > amax ? lanes[j] : amax;
        const float sc = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
        const __m256 iv = _mm256_set1_ps(inv);
        __m256i qi[4], sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            qi[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], iv));
            sum = _mm256_add_epi32(sum, qi[j]);
        }
        /* 32-bit to 8-bit with saturation; the packs interleave 128-bit lanes, so put the
         * 32-bit groups back in order */
        const __m256i w16 = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                               _mm256_packs_epi32(qi[2], qi[3]));
        _mm256_storeu_si256((__m256i *)o,
                            _mm256_permutevar8x32_epi32(w16, _mm256_setr_epi32(0, 4, 1, 5, 2,
                                                                               6, 3, 7)));
        int32_t si[8], total = 0;
        _mm256_storeu_si256((__m256i *)si, sum);
        for (int j = 0; j < 8; j++)
            total += si[j];
        d[ib] = (float)(_Float16)sc;
        s[ib] = (float)(_Float16)(sc * (float)total);
    }
}

INT8_AVX2 KERNEL_NOSANITIZE static void int8_avx2_pass(const struct wmat *w, const float *x, int t,
                                                       float *y, int accumulate, int8_t *xq,
                                                       float *xd, float *xs)
{
    const int k = w->k, nb = k / 32, groups = (w->n + 15) / 16;
#pragma omp parallel
    {
        quantize_x_avx2(x, t, k, xq, xd, xs); /* (ends in a barrier) */
#pragma omp for schedule(static)
        for (int g = 0; g < groups; g++) {
            int i = 0;
            for (; i + AVX2_TT <= t; i += AVX2_TT)
                avx2_tile(w, g, xq + (size_t)i * k, xd + (size_t)i * nb, xs + (size_t)i * nb,
                          AVX2_TT, y + (size_t)i * w->n, accumulate);
            if (i < t)
                avx2_tile(w, g, xq + (size_t)i * k, xd + (size_t)i * nb, xs + (size_t)i * nb, 1,
                          y + (size_t)i * w->n, accumulate);
        }
    }
}

/* y [t][n] (+)= x [t][k] W^T for a W with its 8-bit form (vq), which may be all it has;
 * scratch: linear_scratch_bytes(t, k, threads) bytes (the model's) for the quantized
 * activations */
static void linear_int8(const struct wmat *w, const float *x, int t, float *y, int accumulate,
                        void *scratch)
{
    const int nb = w->k / 32;
    int8_t *xq = scratch;
    float *xd = (float *)((char *)scratch + int8_act_bytes(t, w->k));
    void (*pass)(const struct wmat *, const float *, int, float *, int, int8_t *, float *,
                 float *) = have_vnni() && !int8_no_vnni ? int8_pass : int8_avx2_pass;
    pass(w, x, t, y, accumulate, xq, xd, xd + (size_t)t * nb);
}
#endif

static inline __attribute__((always_inline)) v16f splat16(float f)
{
    return (v16f){f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f};
}

/* where mask, b, else a */
static inline __attribute__((always_inline)) v16f blend16(v16f a, v16f b, v16i mask)
{
    return (v16f)(((v16i)a & ~mask) | ((v16i)b & mask));
}

/* e^x's constants, shared by exp16() and exp512() (which must agree bit for bit): -87,
 * where 2^n leaves the normal range; log2 e; ln 2 in two parts (Cody-Waite); Cephes'
 * expf polynomial for e^r - 1 - r, highest degree first */
#define EXP_LO (-87.0f)
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO (-2.12194440e-4f)
static const float exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

/*
 * e^x for x <= 0, lanes at once (the scalar expf is the softmax's bottleneck otherwise):
 * x = n ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf polynomial (relative error about
 * 1e-7), 2^n through the exponent bits; 0 below -87, where 2^n leaves the normal range.
 */
static inline __attribute__((always_inline)) v16f exp16(v16f x)
{
    const v16f lo = splat16(EXP_LO);
    v16i under = x < lo;
    x = blend16(x, lo, under);
    v16f t = x * splat16(EXP_LOG2E) + splat16(0.5f);
    v16i ni = __builtin_convertvector(t, v16i); /* toward zero; floor below */
    v16f nf = __builtin_convertvector(ni, v16f);
    v16i over = nf > t;
    ni += over;
    nf += __builtin_convertvector(over, v16f);
    v16f r = x - nf * splat16(EXP_LN2_HI) - nf * splat16(EXP_LN2_LO);
    v16f p = splat16(exp_poly[0]);
    for (int k = 1; k < 6; k++)
        p = p * r + splat16(exp_poly[k]);
    v16f y = p * r * r + r + splat16(1.0f);
    y *= (v16f)((ni + 127) << 23);
    return blend16(y, splat16(0.0f), under);
}

/*
 * One causal row of scores: x[j] <- e^(x[j] - max) for j < n, 0 for n <= j < len.
 * Returns the sum (the caller divides).
 */
VECTOR_CLONES static float softmax_row(float *x, int n, int len)
{
    v16f vmx = splat16(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        v16f v = load16(x + j);
        vmx = blend16(vmx, v, v > vmx);
    }
    float mx = -INFINITY;
    for (int i = 0; i < 16; i++)
        mx = vmx[i] > mx ? vmx[i] : mx;
    for (; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    v16f acc = {0}, vm = splat16(mx);
    for (j = 0; j + 16 <= n; j += 16) {
        v16f e = exp16(load16(x + j) - vm);
        memcpy(x + j, &e, sizeof e);
        acc += e;
    }
    if (j < n) { /* the tail through a padded lane set */
        float tail[16];
        for (int i = 0; i < 16; i++)
            tail[i] = j + i < n ? x[j + i] - mx : -INFINITY;
        v16f e = exp16(load16(tail));
        acc += e;
        memcpy(x + j, &e, sizeof(float) * (size_t)(n - j));
        j = n;
    }
    memset(x + n, 0, sizeof(float) * (size_t)(len - n));
    return hsum(acc);
}

/* h = silu(g) * u for one token, gu = [g | u] ([2][n]); e^-|g| in lanes, as in softmax_row */
VECTOR_CLONES static void swiglu(float *h, const float *gu, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f g = load16(gu + i), u = load16(gu + n + i);
        v16i neg = g < splat16(0.0f);
        v16f e = exp16(blend16(-g, g, neg)); /* e^-|g| */
        v16f sig = blend16(splat16(1.0f), e, neg) / (splat16(1.0f) + e);
        v16f r = g * sig * u;
        memcpy(h + i, &r, sizeof r);
    }
    for (; i < n; i++)
        h[i] = gu[i] / (1.0f + expf(-gu[i])) * gu[n + i];
}

/*
 * Causal attention of the new tokens t0..t1-1 of one sequence (token t at position
 * pos0 + t) for the `group` query heads sharing KV head g, by two SGEMMs over the
 * sequence's keys and values gathered from the pool into contiguous rows:
 *   S = scale Q K^T        [rows][L], rows = (t1 - t0) * group (token-major), L = pos0 + t1
 *   P = softmax(S), key j hidden from the query at position p when j > p
 *   O = P V / rowsum(P)    [rows][hd]
 * q, out: [n_new][n_head * hd], the sequence's first new token first. buf: scratch of
 * attn_scratch_floats(L, hd, group) floats. Callers run it inside a parallel region, where
 * OpenBLAS keeps to the calling thread.
 */
static float softmax_best(float *x, int n, int len);

static void attend_tile(const float *q, int pos0, int t0, int t1, kvc_pool *kv, int layer,
                        const int32_t *table, int g, int group, float scale, float *buf,
                        float *out)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int hd = ks->head_dim, bs = ks->block_size;
    const int HQ = ks->n_kv_head * group * hd, L = pos0 + t1, rows = (t1 - t0) * group;
    float *Kt = buf, *V = Kt + (size_t)L * hd, *Q = V + (size_t)L * hd, *O = Q + (size_t)rows * hd,
          *inv = O + (size_t)rows * hd, *S = inv + rows;
    const int f16 = ks->dtype == KVC_F16;
    /* keys gathered transposed ([hd][L], as the pool keeps them), values as rows */
    for (int b = 0; b * bs < L; b++) {
        int n = L - b * bs < bs ? L - b * bs : bs;
        if (ks->dtype == KVC_BF16) {
            const uint16_t *kb = kvc_k_head(kv, layer, table[b], g);
            const uint16_t *vb = kvc_v_head(kv, layer, table[b], g);
            for (int e = 0; e < hd; e++)
                for (int i = 0; i < n; i++)
                    Kt[(size_t)e * L + b * bs + i] = bf16_to_f32(kb[bf16_k_at(bs, e, i)]);
            for (int i = 0; i < n; i++)
                for (int e = 0; e < hd; e++)
                    V[((size_t)b * bs + i) * hd + e] = bf16_to_f32(vb[bf16_v_at(hd, e, i)]);
            continue;
        }
        if (ks->dtype == KVC_Q8_0) {
            const int8_t *kb = kvc_k_head(kv, layer, table[b], g);
            const int8_t *vb = kvc_v_head(kv, layer, table[b], g);
            const float *ksc = (const float *)(kb + kvc_q8_scales_at(ks)),
                        *vsc = (const float *)(vb + kvc_q8_scales_at(ks));
            const uint8_t *ku = (const uint8_t *)kb;
            for (int e = 0; e < hd; e++)
                for (int i = 0; i < n; i++)
                    Kt[(size_t)e * L + b * bs + i] = (float)(ku[q8_k_at(bs, e, i)] - 128) * ksc[i];
            for (int i = 0; i < n; i++)
                for (int e = 0; e < hd; e++)
                    V[((size_t)b * bs + i) * hd + e] = vb[(size_t)i * hd + e] * vsc[i];
            continue;
        }
        if (f16) {
            const uint16_t *kb = kvc_k_head(kv, layer, table[b], g);
            const uint16_t *vb = kvc_v_head(kv, layer, table[b], g);
            for (int e = 0; e < hd; e++)
                f16_load(Kt + (size_t)e * L + b * bs, kb + (size_t)e * bs, n);
            f16_load(V + (size_t)b * bs * hd, vb, n * hd);
            continue;
        }
        const float *kb = kvc_k_head(kv, layer, table[b], g);
        const float *vb = kvc_v_head(kv, layer, table[b], g);
        for (int e = 0; e < hd; e++) /* a loop, not a libc call each */
            for (int i = 0; i < n; i++)
                Kt[(size_t)e * L + b * bs + i] = kb[(size_t)e * bs + i];
        for (int i = 0; i < n * hd; i++)
            V[(size_t)b * bs * hd + i] = vb[i];
    }
    for (int t = t0; t < t1; t++)
        memcpy(Q + (size_t)(t - t0) * group * hd, q + (size_t)t * HQ + (size_t)g * group * hd,
               sizeof(float) * group * hd);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, L, hd, scale, Q, hd, Kt, L, 0.0f,
                S, L);
    for (int r = 0; r < rows; r++)
        inv[r] = 1.0f / softmax_best(S + (size_t)r * L, pos0 + t0 + r / group + 1, L);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, L, 1.0f, S, L, V, hd, 0.0f,
                O, hd);
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)(t0 + r / group) * HQ + (size_t)(g * group + r % group) * hd;
        for (int e = 0; e < hd; e++)
            o[e] = O[(size_t)r * hd + e] * inv[r];
    }
}

/* a token attending directly, as a member of a group (attend_group()) */
struct att_member {
    int t;                /* the token's row in the pass */
    int p;                /* its position: it sees 0..p */
    const int32_t *table; /* its sequence's block table */
};

#if defined(__x86_64__)
/*
 * Attention of a group of tokens ("members", of one sequence or of several) that share
 * their first nsh blocks, every member attending from its own position over the cache in
 * place, KV head by KV head. The shared blocks are read once for the whole group: their
 * keys and values are widened once and used by every member's query heads, which is what
 * makes 16 sequences decoding over one system prompt cheaper than 16 alone.
 *
 * Each query's arithmetic is the same whatever group it is in and wherever the shared
 * range ends, so that a token's attention does not depend on the rest of its batch:
 *   - a score is one chain of FMAs over the head's dimensions in order (the keys are
 *     stored transposed, kvcache.h, so 16 positions fill a vector's lanes);
 *   - the softmax runs over the query's whole row of scores (softmax_row512());
 *   - the output is one chain of FMAs over the positions in order, per 16 dimensions.
 * tests/engine/test_ops.c checks groups bit-identical to members alone.
 */
/* exp16() on AVX-512 instructions, bit for bit: the same operations in the same order
 * (separate multiplies and adds, as this file is built without contraction), with the
 * floor in one VRNDSCALEPS where exp16() converts, compares and corrects, and 2^n by
 * VSCALEFPS (exact, as exp16()'s multiply by a power of two built in the exponent bits) */
AVX512 static inline __attribute__((always_inline)) __m512 exp512(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(EXP_LO);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_mask_mov_ps(x, under, lo);
    const __m512 t =
        _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _mm512_set1_ps(0.5f));
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(EXP_LN2_HI))),
                                   _mm512_mul_ps(n, _mm512_set1_ps(EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(exp_poly[0]);
    for (int k = 1; k < 6; k++)
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(exp_poly[k]));
    const __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r),
                                   _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps((__mmask16)~under, y, n);
}

/* softmax_row() for the in-place attention on AVX-512, with the same results: x[j] <-
 * e^(x[j] - max) for j < n and 0 from n to the next multiple of 16, the maximum in four
 * chains of VMAXPS, the exponentials by exp512(), the sum in the same order. Returns it.
 * VMAXPS gives its second operand where either is NaN: with the score first, a NaN score
 * leaves the maximum as softmax_row()'s comparison does (its own e^x is NaN in both). */
AVX512 static float softmax_row512(float *x, int n)
{
    __m512 m4[4] = {_mm512_set1_ps(-INFINITY), _mm512_set1_ps(-INFINITY),
                    _mm512_set1_ps(-INFINITY), _mm512_set1_ps(-INFINITY)};
    int j = 0;
    for (; j + 64 <= n; j += 64)
        for (int c = 0; c < 4; c++)
            m4[c] = _mm512_max_ps(_mm512_loadu_ps(x + j + 16 * c), m4[c]);
    for (; j < n; j += 16) { /* (the score first: as in softmax_row8()) */
        const __mmask16 m = lanes_left(n - j);
        m4[0] = _mm512_mask_max_ps(m4[0], m, _mm512_maskz_loadu_ps(m, x + j), m4[0]);
    }
    const float mx = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_max_ps(m4[0], m4[1]), _mm512_max_ps(m4[2], m4[3])));
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (j = 0; j < n; j += 16) {
        const __mmask16 m = lanes_left(n - j);
        const __m512 e =
            _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vm)));
        _mm512_storeu_ps(x + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    return hsum((v16f)acc);
}

/* swiglu() on AVX-512 instructions, bit for bit: the same operations in the same order,
 * e^-|g| by exp512() (swiglu()'s clones spend most of their time moving lanes between
 * masks and vectors: 3% of a 16-sequence decode step) */
AVX512 static void swiglu512(float *h, const float *gu, int n)
{
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_loadu_ps(gu + i), u = _mm512_loadu_ps(gu + n + i);
        const __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
        const __m512 e = exp512(_mm512_mask_mov_ps(_mm512_xor_ps(g, sign), neg, g));
        const __m512 sig = _mm512_div_ps(_mm512_mask_mov_ps(one, neg, e), _mm512_add_ps(one, e));
        _mm512_storeu_ps(h + i, _mm512_mul_ps(_mm512_mul_ps(g, sig), u));
    }
    for (; i < n; i++)
        h[i] = gu[i] / (1.0f + expf(-gu[i])) * gu[n + i];
}

/*
 * The same on AVX2 (8 lanes; 16 as two halves), bit for bit: GCC lowers the portable
 * kernels' 16-lane comparisons and blends lane by lane for AVX2 (softmax_row()'s clone took
 * 11 ns a score, a seventh of a 1,024-token prefill), so these take them in intrinsics.
 * AVX2F: AVX2, FMA and F16C (the in-place attention's too); these use no FMA.
 */
#define AVX2F __attribute__((target("avx2,fma,f16c")))

AVX2F static inline __attribute__((always_inline)) __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(EXP_LO);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_blendv_ps(x, lo, under);
    const __m256 t =
        _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _mm256_set1_ps(0.5f));
    __m256i ni = _mm256_cvttps_epi32(t); /* toward zero; floor below */
    __m256 nf = _mm256_cvtepi32_ps(ni);
    const __m256i over = _mm256_castps_si256(_mm256_cmp_ps(nf, t, _CMP_GT_OQ));
    ni = _mm256_add_epi32(ni, over);
    nf = _mm256_add_ps(nf, _mm256_cvtepi32_ps(over));
    const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(nf, _mm256_set1_ps(EXP_LN2_HI))),
                                   _mm256_mul_ps(nf, _mm256_set1_ps(EXP_LN2_LO)));
    __m256 p = _mm256_set1_ps(exp_poly[0]);
    for (int k = 1; k < 6; k++)
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(exp_poly[k]));
    __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r),
                             _mm256_set1_ps(1.0f));
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(
                             _mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23)));
    return _mm256_andnot_ps(under, y);
}

/* softmax_row() on AVX2: x[j] <- e^(x[j] - max) for j < n, 0 for n <= j < len; the sum */
AVX2F static float softmax_row8(float *x, int n, int len)
{
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= n; j += 8) /* (the score first: as the portable blend, a NaN score
                                * leaves the maximum as it was) */
        vmx = _mm256_max_ps(_mm256_loadu_ps(x + j), vmx);
    float lanes[16], mx = -INFINITY;
    _mm256_storeu_ps(lanes, vmx);
    for (int i = 0; i < 8; i++)
        mx = lanes[i] > mx ? lanes[i] : mx;
    for (; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    const __m256 vm = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    /* the portable kernel's 16 lanes as two halves; the last 16 through masks (masked
     * loads and stores cost far more than plain ones on some processors) */
    for (j = 0; j + 16 <= n; j += 16)
        for (int h = 0; h < 2; h++) {
            const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8 * h), vm));
            _mm256_storeu_ps(x + j + 8 * h, e);
            acc[h] = _mm256_add_ps(acc[h], e);
        }
    for (int h = 0; h < 2 && j < n; h++) {
        const int at = j + 8 * h;
        const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - at), lane);
        const __m256 d = _mm256_blendv_ps(
            ninf, _mm256_sub_ps(_mm256_maskload_ps(x + at, in), vm), _mm256_castsi256_ps(in));
        const __m256 e = exp8(d);
        _mm256_maskstore_ps(x + at, in, e);
        acc[h] = _mm256_add_ps(acc[h], e);
    }
    memset(x + n, 0, sizeof(float) * (size_t)(len - n));
    _mm256_storeu_ps(lanes, acc[0]);
    _mm256_storeu_ps(lanes + 8, acc[1]);
    float s = 0;
    for (int i = 0; i < 16; i++)
        s += lanes[i];
    return s;
}

/* swiglu() on AVX2 (16 lanes at a time as two halves, the rest by expf() as there) */
AVX2F static void swiglu8(float *h, const float *gu, int n)
{
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int i = 0;
    for (; i < n / 16 * 16; i += 8) {
        const __m256 g = _mm256_loadu_ps(gu + i), u = _mm256_loadu_ps(gu + n + i);
        const __m256 neg = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
        const __m256 e = exp8(_mm256_blendv_ps(_mm256_xor_ps(g, sign), g, neg));
        const __m256 sig = _mm256_div_ps(_mm256_blendv_ps(one, e, neg), _mm256_add_ps(one, e));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_mul_ps(g, sig), u));
    }
    for (; i < n; i++)
        h[i] = gu[i] / (1.0f + expf(-gu[i])) * gu[n + i];
}

/* queries scored together (ATT_QK_MAX), their accumulators for up to ATT_QK_SPANS spans of
 * 16 positions at once, and the output's: ATT_PV_MAX queries, up to 4 slices of 16
 * dimensions at once. Independent accumulators, at most 24 of them in registers: one chain
 * per query would wait on the FMA latency. A larger group goes by 6 queries at a time, each
 * chunk over all 4 spans or slices: chunks of 12 over 2 made a decode step of 16 sequences
 * over 4 shared prefixes 7-14% slower (a chunk reading half of each value row leaves every
 * row's other half to a second pass, and a score pass half as many positions a key load).
 * A query's arithmetic is the same whatever its chunk. */
#define ATT_QK_MAX 6
/* how far ahead (positions) the kernels prefetch values (keys come a pass ahead:
 * prefetch_rows()): at a few hundred cycles a block, the next block would come too late
 * from memory */
#define ATT_PREFETCH 64
#define ATT_QK_SPANS 4
#define ATT_PV_MAX 6
/* the kernels' instances by number of queries, for QK_CASE (queries; ATT_QK_SPANS spans)
 * and PV_CASE (queries, slices at once) as each dispatcher defines them */
#define QK_CASES QK_CASE(1) QK_CASE(2) QK_CASE(3) QK_CASE(4) QK_CASE(5) QK_CASE(6)
#define PV_CASES_NARROW                                                                      \
    PV_CASE(1, 1) PV_CASE(2, 1) PV_CASE(3, 1) PV_CASE(4, 1) PV_CASE(5, 1) PV_CASE(6, 1)
#define PV_CASES_WIDE                                                                        \
    PV_CASE(1, 4) PV_CASE(2, 4) PV_CASE(3, 4) PV_CASE(4, 4) PV_CASE(5, 4) PV_CASE(6, 4)
/* a PV dispatcher's body: 1 slice (narrow) or 4 (wide) */
#define PV_DISPATCH                                                                          \
    if (!wide) {                                                                             \
        switch (nq) {                                                                        \
            PV_CASES_NARROW                                                                  \
        }                                                                                    \
        return;                                                                              \
    }                                                                                        \
    switch (nq) {                                                                            \
        PV_CASES_WIDE                                                                        \
    }

/* how the kernels read a pool's keys and values (BF16 has kernels of its own) */
enum kv_form { FORM_F32, FORM_F16, FORM_Q8 };

static inline enum kv_form kv_form_of(enum kvc_dtype dtype)
{
    return dtype == KVC_F16 ? FORM_F16 : dtype == KVC_Q8_0 ? FORM_Q8 : FORM_F32;
}

/* 16 keys or values (the lanes of mask; full: all 16, by plain loads, which cost less than
 * masked ones: a decode step 3-5% shorter) as floats; Q8_0 (values only): the bytes,
 * unscaled */
AVX512 static inline __attribute__((always_inline)) __m512
load_kv(const char *p, __mmask16 mask, const enum kv_form form, const int full)
{
    if (form == FORM_F16)
        return _mm512_cvtph_ps(full ? _mm256_loadu_si256((const __m256i *)p)
                                    : _mm256_maskz_loadu_epi16(mask, p));
    if (form == FORM_Q8)
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            full ? _mm_loadu_si128((const __m128i *)p) : _mm_maskz_loadu_epi8(mask, p)));
    return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask, p);
}

/* The kernels read the cache from memory (a step's keys and values are far more than the
 * caches hold) and prefetch what they read next: values ATT_PREFETCH positions ahead, a
 * block at a time; keys a pass ahead, a line at a time over the pass (prefetch_rows()).
 * always_inline: GCC counts a prefetch as no side effect, so a helper of its own that
 * only prefetches is found to do nothing and its calls are dropped (which left the values
 * unprefetched until these were inlined: weighing values from memory took 1.4x as long,
 * 9.5 against 6.8 ns a position and KV head for 12 queries). */
static inline __attribute__((always_inline)) void prefetch_lines(const char *p, size_t bytes)
{
    for (size_t b = 0; b < bytes; b += 64)
        _mm_prefetch(p + b, _MM_HINT_T0);
}

/* bytes from voff into each of the rows (rb bytes apart) of a KV head's value blocks
 * (vb, blocks of bs positions read through table) holding positions j .. j + n - 1, those
 * that start below j1 */
static inline __attribute__((always_inline)) void
prefetch_v(struct kvc_blocks vb, int bs, const int32_t *table, int j, int n, int j1, int rows,
           size_t rb, size_t voff, size_t bytes)
{
    for (int b = j / bs * bs; b < j + n && b < j1; b += bs) {
        const char *v = vb.base + (size_t)table[b / bs] * vb.stride + voff;
        for (int r = 0; r < rows; r++)
            prefetch_lines(v + r * rb, bytes);
    }
}

/* Key row r (r * kstep bytes on) of the next pass's spans (kn[c]: NULL past the range, or
 * kn NULL), from a score kernel's loop over the rows: the next pass's keys come in while
 * this one computes, a line or two a row. A burst of a whole pass's lines at once (128 for
 * 4 spans of 16 F16 keys of 64 dimensions) left 12 queries' scores from memory 1.8x as
 * long as from cache (11.9 against 6.5 ns a position and KV head); spread so, 1.1x (6.7
 * against 6.1). Rows shorter than a line are prefetched one in 64 / kstep. That asks for
 * every line a span reads when its part of a row stays within one line and kstep is 64
 * or more or divides 64: so for attend_group()'s ranges (they start at a block) with
 * blocks of a multiple of 16 positions; elsewhere some lines are left to the hardware. */
static inline __attribute__((always_inline)) void
prefetch_rows(const char *const *kn, const int np, int r, size_t kstep)
{
    if (!kn || ((size_t)r * kstep & 63) >= kstep)
        return;
#pragma GCC unroll 4
    for (int c = 0; c < np; c++)
        if (kn[c])
            _mm_prefetch(kn[c] + (size_t)r * kstep, _MM_HINT_T0);
}

/* scores of nq queries (qt: scaled, transposed: dimension d of query i at qt[d * qld + i],
 * so that the broadcasts of a dimension take one address register and constant offsets)
 * with np spans of up to 16 positions, span c in a block whose transposed keys start at
 * kt[c] (row d: kt[c] + d * kstep bytes; lanes mask[c]; a span with an empty mask is
 * skipped), into sc[c] + i * ld for query i; prefetching the spans at kn (or none: NULL) */
AVX512 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
qk_body(const char *const *kt, const char *const *kn, const __mmask16 *mask, size_t kstep,
        int hd, const float *qt, size_t qld, float *const *sc, size_t ld, const int nq,
        const int np, const enum kv_form form, const int full)
{
    __m512 s[ATT_QK_MAX][ATT_QK_SPANS], k[ATT_QK_SPANS];
#pragma GCC unroll 4
    for (int c = 0; c < np; c++)
        k[c] = load_kv(kt[c], mask[c], form, full);
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++) {
        __m512 qd = _mm512_set1_ps(qt[i]);
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            s[i][c] = _mm512_mul_ps(qd, k[c]);
    }
    prefetch_rows(kn, np, 0, kstep);
    for (int d = 1; d < hd; d++) {
        prefetch_rows(kn, np, d, kstep);
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            k[c] = load_kv(kt[c] + d * kstep, mask[c], form, full);
        const float *qrow = qt + (size_t)d * qld;
#pragma GCC unroll 12
        for (int i = 0; i < nq; i++) {
            __m512 qd = _mm512_set1_ps(qrow[i]);
#pragma GCC unroll 4
            for (int c = 0; c < np; c++)
                s[i][c] = _mm512_fmadd_ps(qd, k[c], s[i][c]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            _mm512_mask_storeu_ps(sc[c] + i * ld, mask[c], s[i][c]);
}

#define QK_CASE(n)                                                                           \
    case n:                                                                                  \
        if (form == FORM_F16 && full)                                                        \
            qk_body(kt, kn, mask, kstep, hd, qt, qld, sc, ld, n, ATT_QK_SPANS, FORM_F16, 1); \
        else if (form == FORM_F16)                                                           \
            qk_body(kt, kn, mask, kstep, hd, qt, qld, sc, ld, n, ATT_QK_SPANS, FORM_F16, 0); \
        else                                                                                 \
            qk_body(kt, kn, mask, kstep, hd, qt, qld, sc, ld, n, ATT_QK_SPANS, FORM_F32, 0); \
        break;

/* qk_body() over ATT_QK_SPANS spans for up to ATT_QK_MAX queries; full: every span whole
 * (F16 keys then take plain loads); kn: the next pass's spans to prefetch, or NULL */
AVX512 KERNEL_NOSANITIZE static void qk_chunk(const char *const *kt, const char *const *kn,
                                              const __mmask16 *mask, int full, size_t kstep, int hd,
                                              const float *qt, size_t qld, float *const *sc,
                                              size_t ld, int nq, enum kv_form form)
{
    switch (nq) {
        QK_CASES
    }
}
#undef QK_CASE

/*
 * Scores over a Q8_0 pool on 8-bit dot products (AVX512-VNNI). The keys are stored as
 * unsigned bytes, k + 128, four dimensions of a position in each 32-bit lane
 * ([hd / 4][bs][4], kvcache.h); the queries as signed bytes with a scale each, as llama.cpp
 * rounds them for its 8-bit caches. VPDPBUSD multiplies 16 lanes' 4 byte pairs and adds
 * the 4 products to each lane's 32-bit sum: 64 products an instruction where an F32 FMA
 * does 16. The sum less 128 times the query's byte sum is the integer dot product, exact
 * (under 2^24 for heads of up to 256 dimensions), then times the query's scale and the
 * key's: the same operations in the same order whatever the group.
 */
struct q8_queries {
    const int32_t *q; /* [hd / 4][ld]: query i's dimensions 4d..4d+3 at q[d * ld + i] */
    size_t ld;
    const int32_t *corr; /* [nq]: 128 x the sum of query i's bytes */
    const float *scale;  /* [nq] */
};

VNNI KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
qk_body_q8(const char *const *kt, const char *const *kn, const float *const *ksc,
           const __mmask16 *mask, size_t kstep, int hd, struct q8_queries qb, float *const *sc,
           size_t ld, const int nq, const int np, const int full)
{
    __m512i s[ATT_QK_MAX][ATT_QK_SPANS], k[ATT_QK_SPANS];
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            s[i][c] = _mm512_setzero_si512();
    for (int d = 0; d < hd / 4; d++) {
        prefetch_rows(kn, np, d, kstep);
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            k[c] = full ? _mm512_loadu_si512(kt[c] + d * kstep)
                        : _mm512_maskz_loadu_epi32(mask[c], kt[c] + d * kstep);
        const int32_t *qrow = qb.q + (size_t)d * qb.ld;
#pragma GCC unroll 12
        for (int i = 0; i < nq; i++) {
            const __m512i qd = _mm512_set1_epi32(qrow[i]);
#pragma GCC unroll 4
            for (int c = 0; c < np; c++)
                s[i][c] = _mm512_dpbusd_epi32(s[i][c], k[c], qd);
        }
    }
    __m512 kscale[ATT_QK_SPANS];
#pragma GCC unroll 4
    for (int c = 0; c < np; c++)
        kscale[c] = _mm512_maskz_loadu_ps(mask[c], ksc[c]);
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++) {
        const __m512i corr = _mm512_set1_epi32(qb.corr[i]);
        const __m512 qs = _mm512_set1_ps(qb.scale[i]);
#pragma GCC unroll 4
        for (int c = 0; c < np; c++) {
            const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[i][c], corr));
            _mm512_mask_storeu_ps(sc[c] + i * ld, mask[c],
                                  _mm512_mul_ps(_mm512_mul_ps(f, qs), kscale[c]));
        }
    }
}

#define QK_CASE(n)                                                                           \
    case n:                                                                                  \
        if (full)                                                                            \
            qk_body_q8(kt, kn, ksc, mask, kstep, hd, qb, sc, ld, n, ATT_QK_SPANS, 1);        \
        else                                                                                 \
            qk_body_q8(kt, kn, ksc, mask, kstep, hd, qb, sc, ld, n, ATT_QK_SPANS, 0);        \
        break;

/* qk_body_q8() as qk_chunk() dispatches qk_body() */
VNNI KERNEL_NOSANITIZE static void qk_chunk_q8(const char *const *kt, const char *const *kn,
                                               const float *const *ksc, const __mmask16 *mask,
                                               int full, size_t kstep, int hd, struct q8_queries qb,
                                               float *const *sc, size_t ld, int nq)
{
    switch (nq) {
        QK_CASES
    }
}
#undef QK_CASE

/* o_i += sum over positions j0 <= j < j1 of pr_i[j] v[j], for ns slices of 16 dimensions
 * (from voff bytes into a value row) of nq queries (pr: rows of ld probabilities by
 * absolute position; o: rows of ldo floats, at the first slice), the values of KV head g
 * read through table */
AVX512 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
pv_body(kvc_pool *kv, int layer, const int32_t *table, int g, int j0, int j1, size_t voff,
        const float *pr, size_t ld, float *o, size_t ldo, const int nq, const int ns,
        const enum kv_form form)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bs = ks->block_size;
    const size_t es = form == FORM_F16 ? 2 : form == FORM_Q8 ? 1 : 4;
    const size_t rb = (size_t)ks->head_dim * es;
    const struct kvc_blocks vbs = kvc_v_blocks(kv, layer, g);
    __m512 acc[ATT_PV_MAX][4], v[4];
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < ns; c++)
            acc[i][c] = _mm512_loadu_ps(o + i * ldo + 16 * c);
    prefetch_v(vbs, bs, table, j0, ATT_PREFETCH, j1, bs, rb, voff, ns * 16 * es);
    for (int j = j0; j < j1;) {
        const char *vb = vbs.base + (size_t)table[j / bs] * vbs.stride + voff;
        int end = (j / bs + 1) * bs < j1 ? (j / bs + 1) * bs : j1;
        /* the block ATT_PREFETCH positions ahead */
        prefetch_v(vbs, bs, table, j / bs * bs + ATT_PREFETCH, 1, j1, bs, rb, voff, ns * 16 * es);
        for (const char *vr = vb + (size_t)(j % bs) * rb; j < end; j++, vr += rb) {
#pragma GCC unroll 4
            for (int c = 0; c < ns; c++)
                v[c] = load_kv(vr + 16 * c * es, 0xffff, form, 1);
#pragma GCC unroll 12
            for (int i = 0; i < nq; i++) {
                __m512 p = _mm512_set1_ps(pr[i * ld + j]);
#pragma GCC unroll 4
                for (int c = 0; c < ns; c++)
                    acc[i][c] = _mm512_fmadd_ps(p, v[c], acc[i][c]);
            }
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < ns; c++)
            _mm512_storeu_ps(o + i * ldo + 16 * c, acc[i][c]);
}

#define PV_CASE(n, ns)                                                                       \
    case n:                                                                                  \
        if (form == FORM_F16)                                                                \
            pv_body(kv, layer, table, g, j0, j1, voff, pr, ld, o, ldo, n, ns, FORM_F16);     \
        else if (form == FORM_Q8)                                                            \
            pv_body(kv, layer, table, g, j0, j1, voff, pr, ld, o, ldo, n, ns, FORM_Q8);      \
        else                                                                                 \
            pv_body(kv, layer, table, g, j0, j1, voff, pr, ld, o, ldo, n, ns, FORM_F32);     \
        break;

/* pv_body() for 4 slices (wide) or 1 (the slices left), up to ATT_PV_MAX queries;
 * Q8_0: pr already holds the probabilities times the values' scales */
AVX512 KERNEL_NOSANITIZE static void pv_chunk(kvc_pool *kv, int layer, const int32_t *table, int g,
                                              int j0, int j1, size_t voff, const float *pr,
                                              size_t ld, float *o, size_t ldo, int nq, int wide,
                                              enum kv_form form)
{
    PV_DISPATCH
}
#undef PV_CASE

/*
 * The same kernels over a BF16 pool (kvcache.h: keys in dimension pairs, values in position
 * pairs) on BF16 dot products: VDPBF16PS multiplies 16 lanes of bfloat16 pairs and adds both
 * products to each lane's float, 32 products an instruction where an F32 FMA does 16. The
 * queries and probabilities are rounded to bfloat16 (qh, ph: pairs taken by 32-bit
 * broadcasts), the sums stay in F32. A score is one chain over the dimension pairs in order
 * and an output one chain over the position pairs in order, pairs counted from position 0
 * of the sequence: a query's arithmetic does not depend on its group, as above.
 */
#define BF16_DOT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

static int have_avx512bf16(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = have_avx512() && __builtin_cpu_supports("avx512bf16");
    return cached;
}

BF16_DOT static inline __attribute__((always_inline)) __m512i bcast_pair(const uint16_t *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return _mm512_set1_epi32((int)w);
}

_Static_assert(ATT_QK_SPANS == 4, "dp_pairs() takes the scores as the outputs, 4 a query");
/* the BF16 kernels' step: acc[i][c] += the pair at pair + i * stride . v[c] (16 lanes of
 * two products each), for nq queries and nv vectors of keys or values */
BF16_DOT static inline __attribute__((always_inline)) void
dp_pairs(__m512 (*acc)[4], const __m512i *v, const uint16_t *pair, size_t stride, const int nq,
         const int nv)
{
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++) {
        const __m512i p = bcast_pair(pair + i * stride);
#pragma GCC unroll 4
        for (int c = 0; c < nv; c++)
            acc[i][c] = _mm512_dpbf16_ps(acc[i][c], (__m512bh)p, (__m512bh)v[c]);
    }
}

/* qk_body() on BF16 keys: kt[c] + d * kstep is dimension pair d of span c's positions */
BF16_DOT KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
qk_body_bf16(const char *const *kt, const char *const *kn, const __mmask16 *mask, size_t kstep,
             int hd, const uint16_t *qh, float *const *sc, size_t ld, const int nq, const int np,
             const int full)
{
    __m512 s[ATT_QK_MAX][ATT_QK_SPANS];
    __m512i k[ATT_QK_SPANS];
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            s[i][c] = _mm512_setzero_ps();
    for (int d = 0; d < hd / 2; d++) {
        prefetch_rows(kn, np, d, kstep);
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            k[c] = full ? _mm512_loadu_si512(kt[c] + d * kstep)
                        : _mm512_maskz_loadu_epi32(mask[c], kt[c] + d * kstep);
        dp_pairs(s, k, qh + 2 * d, (size_t)hd, nq, np);
    }
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < np; c++)
            _mm512_mask_storeu_ps(sc[c] + i * ld, mask[c], s[i][c]);
}

#define QK_CASE(n)                                                                           \
    case n:                                                                                  \
        if (full)                                                                            \
            qk_body_bf16(kt, kn, mask, kstep, hd, qh, sc, ld, n, ATT_QK_SPANS, 1);           \
        else                                                                                 \
            qk_body_bf16(kt, kn, mask, kstep, hd, qh, sc, ld, n, ATT_QK_SPANS, 0);           \
        break;

BF16_DOT KERNEL_NOSANITIZE static void qk_chunk_bf16(const char *const *kt, const char *const *kn,
                                                     const __mmask16 *mask, int full, size_t kstep,
                                                     int hd, const uint16_t *qh, float *const *sc,
                                                     size_t ld, int nq)
{
    switch (nq) {
        QK_CASES
    }
}
#undef QK_CASE

/* pv_body() on BF16 values, j0 even: one 64-byte row holds 16 dimensions of positions j and
 * j + 1; a pair cut by j1 reads position j only (its other half may be anything) and the
 * probabilities past a query's last position are 0 (attend_group()) */
BF16_DOT KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
pv_body_bf16(kvc_pool *kv, int layer, const int32_t *table, int g, int j0, int j1, size_t voff,
             const uint16_t *ph, size_t ld, float *o, size_t ldo, const int nq, const int ns)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bs = ks->block_size;
    const size_t rp = (size_t)ks->head_dim * 4; /* bytes of a position pair's row */
    const struct kvc_blocks vbs = kvc_v_blocks(kv, layer, g);
    __m512 acc[ATT_PV_MAX][4];
    __m512i v[4];
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < ns; c++)
            acc[i][c] = _mm512_loadu_ps(o + i * ldo + 16 * c);
    prefetch_v(vbs, bs, table, j0, ATT_PREFETCH, j1, bs / 2, rp, voff, ns * 64);
    for (int j = j0; j < j1;) {
        const char *vb = vbs.base + (size_t)table[j / bs] * vbs.stride + voff;
        int end = (j / bs + 1) * bs < j1 ? (j / bs + 1) * bs : j1;
        prefetch_v(vbs, bs, table, j / bs * bs + ATT_PREFETCH, 1, j1, bs / 2, rp, voff, ns * 64);
        for (const char *vr = vb + (size_t)(j % bs) / 2 * rp; j < end; j += 2, vr += rp) {
            const __mmask32 m = j + 1 < end ? 0xffffffffu : 0x55555555u;
#pragma GCC unroll 4
            for (int c = 0; c < ns; c++)
                v[c] = _mm512_maskz_loadu_epi16(m, vr + 64 * c);
            dp_pairs(acc, v, ph + j, ld, nq, ns);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < ns; c++)
            _mm512_storeu_ps(o + i * ldo + 16 * c, acc[i][c]);
}

#define PV_CASE(n, ns)                                                                       \
    case n:                                                                                  \
        pv_body_bf16(kv, layer, table, g, j0, j1, voff, ph, ld, o, ldo, n, ns);              \
        break;

BF16_DOT KERNEL_NOSANITIZE static void pv_chunk_bf16(kvc_pool *kv, int layer, const int32_t *table,
                                                     int g, int j0, int j1, size_t voff,
                                                     const uint16_t *ph, size_t ld, float *o,
                                                     size_t ldo, int nq, int wide)
{
    PV_DISPATCH
}
#undef PV_CASE

/* n floats (n > 0) rounded to bfloat16, zeros after them up to the next 16 */
BF16_DOT static void to_bf16(uint16_t *d, const float *x, int n)
{
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_left(n - i);
        _mm256_storeu_si256((__m256i *)(d + i),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* a pass of the score kernels: ATT_QK_SPANS spans of up to 16 positions within a block (kt:
 * where each span's keys start, ksc its Q8_0 scales, mask its positions, at its first one;
 * a span past the range has an empty mask); full: every span whole */
struct qk_pass {
    const char *kt[ATT_QK_SPANS];
    const float *ksc[ATT_QK_SPANS];
    __mmask16 mask[ATT_QK_SPANS];
    int at[ATT_QK_SPANS], full;
};

/* the pass from position j on, of the range j0 <= j < j1 (keys kbs read through table; es
 * bytes a position; Q8_0 scales `scales` bytes into a block, when q8k); returns where the
 * next pass starts (j1 when this one reaches it) */
static inline int qk_spans(struct kvc_blocks kbs, const int32_t *table, int bs, size_t es,
                           int q8k, size_t scales, int j, int j0, int j1, struct qk_pass *p)
{
    p->full = 1;
    for (int c = 0; c < ATT_QK_SPANS; c++) {
        int in_block = bs - j % bs, w = in_block < 16 ? in_block : 16;
        w = j1 - j < w ? j1 - j : w;
        p->at[c] = j < j1 ? j : j0;
        const char *blk = kbs.base + (size_t)table[p->at[c] / bs] * kbs.stride;
        p->kt[c] = blk + (size_t)(p->at[c] % bs) * es;
        p->ksc[c] = q8k ? (const float *)(blk + scales) + p->at[c] % bs : NULL;
        p->mask[c] = j < j1 ? (__mmask16)((1u << w) - 1) : 0;
        p->full &= p->mask[c] == 0xffff;
        j += j < j1 ? w : 0;
    }
    return j;
}

/* scores of queries 0..nq (rows of ld in sc) at positions j0 <= j < j1, keys of KV head g
 * read through table: passes of ATT_QK_SPANS spans, ATT_QK_MAX queries at a time, the
 * first of which prefetches the next pass's keys. The queries: qt transposed (dimension d
 * of query i at qt[d * qld + i]), for a BF16 pool qh ([nq][hd] bfloat16), for a Q8_0 pool
 * q8. */
AVX512 static void qk_range(kvc_pool *kv, int layer, const int32_t *table, int g, int j0,
                            int j1, const float *qt, size_t qld, const uint16_t *qh,
                            const struct q8_queries *q8, int nq, float *sc, size_t ld)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bs = ks->block_size, hd = ks->head_dim;
    const int bf = ks->dtype == KVC_BF16, q8k = ks->dtype == KVC_Q8_0;
    const enum kv_form form = kv_form_of(ks->dtype);
    /* bytes a position and a key row (a dimension, or a pair or quad of them) */
    const size_t es = bf || q8k ? 4 : form == FORM_F16 ? 2 : 4;
    const size_t kstep = (size_t)bs * es, scales = kvc_q8_scales_at(ks);
    const int rows = bf ? hd / 2 : q8k ? hd / 4 : hd; /* key rows of a span */
    const struct kvc_blocks kbs = kvc_k_blocks(kv, layer, g);
    if (j0 >= j1)
        return;
    struct qk_pass pass, next;
    int j = qk_spans(kbs, table, bs, es, q8k, scales, j0, j0, j1, &pass);
    const char *kn[ATT_QK_SPANS];
    for (int c = 0; c < ATT_QK_SPANS; c++)
        kn[c] = pass.mask[c] ? pass.kt[c] : NULL;
    for (int r = 0; r < rows; r++) /* the first pass's keys */
        prefetch_rows(kn, ATT_QK_SPANS, r, kstep);
    for (int more = 1; more;) {
        more = j < j1;
        j = qk_spans(kbs, table, bs, es, q8k, scales, j, j0, j1, &next);
        for (int c = 0; c < ATT_QK_SPANS; c++)
            kn[c] = more && next.mask[c] ? next.kt[c] : NULL;
        for (int q0 = 0; q0 < nq; q0 += ATT_QK_MAX) {
            const char *const *pf = q0 == 0 && more ? kn : NULL;
            float *sc_at[ATT_QK_SPANS];
            for (int c = 0; c < ATT_QK_SPANS; c++)
                sc_at[c] = sc + q0 * ld + pass.at[c];
            int n = nq - q0 < ATT_QK_MAX ? nq - q0 : ATT_QK_MAX;
            if (bf) {
                qk_chunk_bf16(pass.kt, pf, pass.mask, pass.full, kstep, hd,
                              qh + (size_t)q0 * hd, sc_at, ld, n);
                continue;
            }
            if (q8k) {
                const struct q8_queries qb = {q8->q + q0, q8->ld, q8->corr + q0, q8->scale + q0};
                qk_chunk_q8(pass.kt, pf, pass.ksc, pass.mask, pass.full, kstep, hd, qb, sc_at,
                            ld, n);
                continue;
            }
            qk_chunk(pass.kt, pf, pass.mask, pass.full, kstep, hd, qt + q0, qld, sc_at, ld, n,
                     form);
        }
        pass = next;
    }
}

/* output accumulators of queries 0..nq (rows of ldo in o) over positions j0 <= j < j1
 * (a BF16 pool: the probabilities as ph) */
AVX512 static void pv_range(kvc_pool *kv, int layer, const int32_t *table, int g, int j0,
                            int j1, const float *pr, const uint16_t *ph, size_t ld, float *o,
                            size_t ldo, int nq)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bf = ks->dtype == KVC_BF16, nsl = ks->head_dim / 16;
    const enum kv_form form = kv_form_of(ks->dtype);
    /* bytes of a slice of 16 dimensions in a value row (BF16: of a pair of rows) */
    const size_t slice = bf ? 64 : form == FORM_F16 ? 32 : form == FORM_Q8 ? 16 : 64;
    for (int q0 = 0; q0 < nq; q0 += ATT_PV_MAX) {
        int n = nq - q0 < ATT_PV_MAX ? nq - q0 : ATT_PV_MAX;
        for (int c = 0; c < nsl;) { /* wide chunks of 4 slices, then single slices */
            const int wide = c + 4 <= nsl;
            if (bf)
                pv_chunk_bf16(kv, layer, table, g, j0, j1, (size_t)c * slice, ph + q0 * ld,
                              ld, o + q0 * ldo + 16 * c, ldo, n, wide);
            else
                pv_chunk(kv, layer, table, g, j0, j1, (size_t)c * slice, pr + q0 * ld, ld,
                         o + q0 * ldo + 16 * c, ldo, n, wide, form);
            c += wide ? 4 : 1;
        }
    }
}

/* a Q8_0 pool: probabilities p[0..n) times their positions' value scales (KV head g, read
 * through table), so that pv_range() sums the bytes as it sums floats; a position's
 * factor is the same whichever table it is read through. 16 at a time, the blocks by base
 * and stride: a prompt's tokens each scale a row as long as their context. */
AVX512 static void scale_by_v(kvc_pool *kv, int layer, const int32_t *table, int g, float *p,
                              int n)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bs = ks->block_size;
    const struct kvc_blocks vb = kvc_v_blocks(kv, layer, g);
    const char *at = vb.base + kvc_q8_scales_at(ks);
    for (int j0 = 0; j0 < n; j0 += bs) {
        const float *vs = (const float *)(at + (size_t)table[j0 / bs] * vb.stride);
        const int w = n - j0 < bs ? n - j0 : bs;
        for (int i = 0; i < w; i += 16) {
            const __mmask16 m = lanes_left(w - i);
            _mm512_mask_storeu_ps(p + j0 + i, m,
                                  _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j0 + i),
                                                _mm512_maskz_loadu_ps(m, vs + i)));
        }
    }
}

/*
 * The group mb[0..nm), sharing blocks 0..nsh-1 (all of them visible to every member), for
 * the `group` query heads of KV head g: q, out: [T][n_head * hd] (the pass's rows).
 * buf: attn_scratch_floats() floats.
 */
AVX512 static void attend_group512(const struct att_member *mb, int nm, int nsh, kvc_pool *kv,
                                int layer, int g, int group, float scale, const float *q,
                                float *out, float *buf)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int hd = ks->head_dim, bs = ks->block_size, nq = nm * group;
    const size_t HQ = (size_t)ks->n_kv_head * group * hd;
    int pmax = 0;
    for (int i = 0; i < nm; i++)
        pmax = mb[i].p > pmax ? mb[i].p : pmax;
    const size_t ld = (size_t)(pmax + 16) / 16 * 16;
    float *qs = buf, *o = qs + (size_t)nq * hd, *inv = o + (size_t)nq * hd, *sc = inv + nq;
    /* a BF16 pool: queries and probabilities rounded to bfloat16; a Q8_0 pool: queries
     * rounded to bytes (struct q8_queries, in the same room) */
    const int bf = ks->dtype == KVC_BF16, q8 = ks->dtype == KVC_Q8_0;
    uint16_t *qh = (uint16_t *)(sc + (size_t)nq * ld), *ph = qh + (size_t)nq * hd;
    int32_t *qq = (int32_t *)qh, *qcorr = qq + (size_t)nq * hd / 4;
    float *qscale = (float *)(qcorr + nq);
    /* the scaled queries, [nq][hd] to be rounded for a BF16 or Q8_0 pool, else transposed
     * for qk_range(): [hd][nq] */
    for (int i = 0; i < nm; i++)
        for (int h = 0; h < group; h++) {
            const size_t r = (size_t)i * group + h;
            const float *qr = q + (size_t)mb[i].t * HQ + ((size_t)g * group + h) * hd;
            if (bf || q8)
                for (int e = 0; e < hd; e++)
                    qs[r * hd + e] = qr[e] * scale;
            else
                for (int e = 0; e < hd; e++)
                    qs[(size_t)e * nq + r] = qr[e] * scale;
        }
    if (bf)
        to_bf16(qh, qs, nq * hd);
    for (int r = 0; r < nq && q8; r++) {
        int8_t b[hd], *qb = (int8_t *)qq;
        qscale[r] = q8_row(b, qs + (size_t)r * hd, hd);
        int32_t sum = 0;
        for (int e = 0; e < hd; e++) {
            qb[((size_t)(e / 4) * nq + r) * 4 + e % 4] = b[e];
            sum += b[e];
        }
        qcorr[r] = 128 * sum;
    }
    memset(o, 0, sizeof(float) * (size_t)nq * hd);
    const int shared = nsh * bs;
    const struct q8_queries q8q = {qq, (size_t)nq, qcorr, qscale};
    if (shared)
        qk_range(kv, layer, mb[0].table, g, 0, shared, qs, nq, qh, &q8q, nq, sc, ld);
    for (int i = 0; i < nm; i++) {
        const size_t r = (size_t)i * group;
        const struct q8_queries mq = {qq + r, (size_t)nq, qcorr + r, qscale + r};
        qk_range(kv, layer, mb[i].table, g, shared, mb[i].p + 1, qs + r, nq, qh + r * hd, &mq,
                 group, sc + r * ld, ld);
    }
    for (int r = 0; r < nq; r++) {
        int n = mb[r / group].p + 1;
        inv[r] = 1.0f / softmax_row512(sc + (size_t)r * ld, n);
        if (bf)
            to_bf16(ph + (size_t)r * ld, sc + (size_t)r * ld, n);
        else if (q8)
            scale_by_v(kv, layer, mb[r / group].table, g, sc + (size_t)r * ld, n);
    }
    if (shared)
        pv_range(kv, layer, mb[0].table, g, 0, shared, sc, ph, ld, o, hd, nq);
    for (int i = 0; i < nm; i++)
        pv_range(kv, layer, mb[i].table, g, shared, mb[i].p + 1, sc + (size_t)i * group * ld,
                 ph + (size_t)i * group * ld, ld, o + (size_t)i * group * hd, hd, group);
    for (int r = 0; r < nq; r++) {
        float *dst = out + (size_t)mb[r / group].t * HQ + ((size_t)g * group + r % group) * hd;
        for (int e = 0; e < hd; e++)
            dst[e] = o[(size_t)r * hd + e] * inv[r];
    }
}

/*
 * attend_group() where AVX-512 is missing: AVX2 (8 lanes, FMA, F16C), over F32 and F16
 * pools, with the same guarantee: a query's arithmetic is the same whatever its group and
 * wherever the shared range ends, so that the engine is token-invariant there too
 * (eng_model_token_invariant()):
 *   - a score is one chain over the head's dimensions in order (a product, then FMAs), 8
 *     positions in a vector's lanes (the keys are stored transposed);
 *   - the softmax runs over the query's whole row of scores (softmax_row());
 *   - the output is one chain of FMAs over the positions in order, per 8 dimensions.
 * The shared blocks' keys and values are read once for the whole group. Up to A2_QK_MAX
 * queries are scored together over 2 spans of 8 positions, and up to A2_PV_MAX weigh the
 * values together over 4 slices of 8 dimensions: 8 accumulators of the 16 registers.
 */
#define A2_QK_MAX 4
#define A2_PV_MAX 2

/* 8 keys or values as floats (F16 widened: exact) */
AVX2F static inline __attribute__((always_inline)) __m256 load8(const char *p, const int f16)
{
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p))
               : _mm256_loadu_ps((const float *)p);
}

/* scores of nq queries (qt transposed: dimension d of query i at qt[d * qld + i]) with np
 * spans of 8 positions, span c's keys at kt[c] (dimension d kstep bytes a row further),
 * into sc[c] + i * ld, the lanes of mask[c] (full: all of them, stored by plain stores,
 * which cost far less than masked ones on some processors) */
AVX2F KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
qk_body8(const char *const *kt, const __m256i *mask, int full, size_t kstep, int hd,
         const float *qt, size_t qld, float *const *sc, size_t ld, const int nq, const int np,
         const int f16)
{
    __m256 s[A2_QK_MAX][2], k[2];
#pragma GCC unroll 2
    for (int c = 0; c < np; c++)
        k[c] = load8(kt[c], f16);
#pragma GCC unroll 4
    for (int i = 0; i < nq; i++) {
        const __m256 qd = _mm256_set1_ps(qt[i]);
#pragma GCC unroll 2
        for (int c = 0; c < np; c++)
            s[i][c] = _mm256_mul_ps(qd, k[c]);
    }
    for (int d = 1; d < hd; d++) {
#pragma GCC unroll 2
        for (int c = 0; c < np; c++)
            k[c] = load8(kt[c] + d * kstep, f16);
        const float *qrow = qt + (size_t)d * qld;
#pragma GCC unroll 4
        for (int i = 0; i < nq; i++) {
            const __m256 qd = _mm256_set1_ps(qrow[i]);
#pragma GCC unroll 2
            for (int c = 0; c < np; c++)
                s[i][c] = _mm256_fmadd_ps(qd, k[c], s[i][c]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 2
        for (int c = 0; c < np; c++)
            if (full)
                _mm256_storeu_ps(sc[c] + i * ld, s[i][c]);
            else
                _mm256_maskstore_ps(sc[c] + i * ld, mask[c], s[i][c]);
}

#define QK8_CASE(n)                                                                          \
    case n:                                                                                  \
        if (np == 2 && f16)                                                                  \
            qk_body8(kt, mask, full, kstep, hd, qt, qld, sc, ld, n, 2, 1);                         \
        else if (np == 2)                                                                    \
            qk_body8(kt, mask, full, kstep, hd, qt, qld, sc, ld, n, 2, 0);                         \
        else if (f16)                                                                        \
            qk_body8(kt, mask, full, kstep, hd, qt, qld, sc, ld, n, 1, 1);                         \
        else                                                                                 \
            qk_body8(kt, mask, full, kstep, hd, qt, qld, sc, ld, n, 1, 0);                         \
        break;

AVX2F KERNEL_NOSANITIZE static void qk_chunk8(const char *const *kt, const __m256i *mask, int full,
                                              size_t kstep, int hd, const float *qt, size_t qld,
                                              float *const *sc, size_t ld, int nq, int np, int f16)
{
    switch (nq) {
        QK8_CASE(1) QK8_CASE(2) QK8_CASE(3) QK8_CASE(4)
    }
}
#undef QK8_CASE

/* scores of queries 0..nq (qt transposed as for qk_body8(); rows of ld in sc) at positions
 * j0 <= j < j1, keys of KV head g read through table, 16 positions a pass. A span of 8
 * positions that a block's end cuts (blocks of other than a multiple of 8 positions) is
 * gathered first, widened to floats, as the loads widen them. */
AVX2F static void qk_range8(kvc_pool *kv, int layer, const int32_t *table, int g, int j0,
                            int j1, const float *qt, size_t qld, int nq, float *sc, size_t ld)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bs = ks->block_size, hd = ks->head_dim, f16 = ks->dtype == KVC_F16;
    const size_t es = f16 ? 2 : 4;
    const struct kvc_blocks kbs = kvc_k_blocks(kv, layer, g);
    float tmp[16 * hd];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j = j0; j < j1; j += 16) {
        const int np = j + 8 < j1 ? 2 : 1;
        const char *kt[2];
        __m256i mask[2];
        int whole = 1;
        for (int c = 0; c < np; c++) {
            const int at = j + 8 * c;
            mask[c] = _mm256_cmpgt_epi32(_mm256_set1_epi32(j1 - at), lane);
            kt[c] = kbs.base + (size_t)table[at / bs] * kbs.stride + (size_t)(at % bs) * es;
            whole &= at % bs + 8 <= bs;
        }
        size_t kstep = (size_t)bs * es;
        int form = f16;
        if (!whole) {
            for (int c = 0; c < np; c++)
                for (int l = 0; l < 8; l++) {
                    const int at = j + 8 * c + l;
                    const char *blk = kbs.base + (size_t)table[(at < j1 ? at : j0) / bs] * kbs.stride;
                    for (int d = 0; d < hd; d++)
                        tmp[d * 16 + 8 * c + l] =
                            at >= j1 ? 0.0f
                            : f16    ? f16_to_f32(((const uint16_t *)blk)[(size_t)d * bs + at % bs])
                                     : ((const float *)blk)[(size_t)d * bs + at % bs];
                }
            for (int c = 0; c < np; c++)
                kt[c] = (const char *)(tmp + 8 * c);
            kstep = 16 * sizeof(float);
            form = 0;
        }
        for (int q0 = 0; q0 < nq; q0 += A2_QK_MAX) {
            float *at[2] = {sc + (size_t)q0 * ld + j, sc + (size_t)q0 * ld + j + 8};
            qk_chunk8(kt, mask, j + 8 * np <= j1, kstep, hd, qt + q0, qld, at, ld,
                      nq - q0 < A2_QK_MAX ? nq - q0 : A2_QK_MAX, np, form);
        }
    }
}

/* o_i += sum over positions j0 <= j < j1 of pr_i[j] v[j], for ns slices of 8 dimensions
 * (from voff bytes into a value row) of nq queries (pr: rows of ld probabilities by
 * absolute position; o: rows of ldo floats, at the first slice), the values of KV head g
 * read through table */
AVX2F KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
pv_body8(kvc_pool *kv, int layer, const int32_t *table, int g, int j0, int j1, size_t voff,
         const float *pr, size_t ld, float *o, size_t ldo, const int nq, const int ns,
         const int f16)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int bs = ks->block_size;
    const size_t es = f16 ? 2 : 4, rb = (size_t)ks->head_dim * es;
    const struct kvc_blocks vbs = kvc_v_blocks(kv, layer, g);
    __m256 acc[A2_PV_MAX][4], v[4];
#pragma GCC unroll 2
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < ns; c++)
            acc[i][c] = _mm256_loadu_ps(o + i * ldo + 8 * c);
    for (int j = j0; j < j1;) {
        const char *vb = vbs.base + (size_t)table[j / bs] * vbs.stride + voff;
        const int end = (j / bs + 1) * bs < j1 ? (j / bs + 1) * bs : j1;
        for (const char *vr = vb + (size_t)(j % bs) * rb; j < end; j++, vr += rb) {
#pragma GCC unroll 4
            for (int c = 0; c < ns; c++)
                v[c] = load8(vr + 8 * c * es, f16);
#pragma GCC unroll 2
            for (int i = 0; i < nq; i++) {
                const __m256 p = _mm256_set1_ps(pr[i * ld + j]);
#pragma GCC unroll 4
                for (int c = 0; c < ns; c++)
                    acc[i][c] = _mm256_fmadd_ps(p, v[c], acc[i][c]);
            }
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 4
        for (int c = 0; c < ns; c++)
            _mm256_storeu_ps(o + i * ldo + 8 * c, acc[i][c]);
}

#define PV8_CASE(n, ns)                                                                      \
    if (nq == n && wide == (ns == 4)) {                                                      \
        if (f16)                                                                             \
            pv_body8(kv, layer, table, g, j0, j1, voff, pr, ld, o, ldo, n, ns, 1);           \
        else                                                                                 \
            pv_body8(kv, layer, table, g, j0, j1, voff, pr, ld, o, ldo, n, ns, 0);           \
        return;                                                                              \
    }

/* pv_body8() over 4 slices (wide) or 1, for 1 or 2 queries */
AVX2F KERNEL_NOSANITIZE static void pv_chunk8(kvc_pool *kv, int layer, const int32_t *table, int g,
                                              int j0, int j1, size_t voff, const float *pr,
                                              size_t ld, float *o, size_t ldo, int nq, int wide,
                                              int f16)
{
    PV8_CASE(1, 1) PV8_CASE(2, 1) PV8_CASE(1, 4) PV8_CASE(2, 4)
}
#undef PV8_CASE

/* output accumulators of queries 0..nq (rows of ldo in o) over positions j0 <= j < j1 */
AVX2F static void pv_range8(kvc_pool *kv, int layer, const int32_t *table, int g, int j0,
                            int j1, const float *pr, size_t ld, float *o, size_t ldo, int nq)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int f16 = ks->dtype == KVC_F16, nsl = ks->head_dim / 8;
    const size_t slice = f16 ? 16 : 32; /* bytes of 8 dimensions of a value row */
    for (int q0 = 0; q0 < nq; q0 += A2_PV_MAX) {
        const int n = nq - q0 < A2_PV_MAX ? nq - q0 : A2_PV_MAX;
        for (int c = 0; c < nsl;) { /* wide chunks of 4 slices, then single slices */
            const int wide = c + 4 <= nsl;
            pv_chunk8(kv, layer, table, g, j0, j1, (size_t)c * slice, pr + q0 * ld, ld,
                      o + q0 * ldo + 8 * c, ldo, n, wide, f16);
            c += wide ? 4 : 1;
        }
    }
}

/* attend_group() on AVX2, over an F32 or F16 pool (attend_direct_dtype_ok()) */
AVX2F static void attend_group8(const struct att_member *mb, int nm, int nsh, kvc_pool *kv,
                                int layer, int g, int group, float scale, const float *q,
                                float *out, float *buf)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    const int hd = ks->head_dim, bs = ks->block_size, nq = nm * group;
    const size_t HQ = (size_t)ks->n_kv_head * group * hd;
    int pmax = 0;
    for (int i = 0; i < nm; i++)
        pmax = mb[i].p > pmax ? mb[i].p : pmax;
    const size_t ld = (size_t)(pmax + 16) / 16 * 16;
    float *qt = buf, *o = qt + (size_t)nq * hd, *inv = o + (size_t)nq * hd, *sc = inv + nq;
    /* the scaled queries, transposed: [hd][nq] */
    for (int i = 0; i < nm; i++)
        for (int h = 0; h < group; h++) {
            const size_t r = (size_t)i * group + h;
            const float *qr = q + (size_t)mb[i].t * HQ + ((size_t)g * group + h) * hd;
            for (int e = 0; e < hd; e++)
                qt[(size_t)e * nq + r] = qr[e] * scale;
        }
    memset(o, 0, sizeof(float) * (size_t)nq * hd);
    const int shared = nsh * bs;
    if (shared)
        qk_range8(kv, layer, mb[0].table, g, 0, shared, qt, nq, nq, sc, ld);
    for (int i = 0; i < nm; i++)
        qk_range8(kv, layer, mb[i].table, g, shared, mb[i].p + 1, qt + (size_t)i * group, nq,
                  group, sc + (size_t)i * group * ld, ld);
    for (int r = 0; r < nq; r++) {
        const int n = mb[r / group].p + 1;
        inv[r] = 1.0f / softmax_row8(sc + (size_t)r * ld, n, n);
    }
    if (shared)
        pv_range8(kv, layer, mb[0].table, g, 0, shared, sc, ld, o, hd, nq);
    for (int i = 0; i < nm; i++)
        pv_range8(kv, layer, mb[i].table, g, shared, mb[i].p + 1, sc + (size_t)i * group * ld,
                  ld, o + (size_t)i * group * hd, hd, group);
    for (int r = 0; r < nq; r++) {
        float *dst = out + (size_t)mb[r / group].t * HQ + ((size_t)g * group + r % group) * hd;
        for (int e = 0; e < hd; e++)
            dst[e] = o[(size_t)r * hd + e] * inv[r];
    }
}

/* the in-place kernel of this processor (attend_direct_ok()) */
static void attend_group(const struct att_member *mb, int nm, int nsh, kvc_pool *kv, int layer,
                         int g, int group, float scale, const float *q, float *out, float *buf)
{
    if (have_avx512())
        attend_group512(mb, nm, nsh, kv, layer, g, group, scale, q, out, buf);
    else
        attend_group8(mb, nm, nsh, kv, layer, g, group, scale, q, out, buf);
}
#endif

/* softmax_row() by the processor's kernel: softmax_row8() where AVX2 is the widest */
static float softmax_best(float *x, int n, int len)
{
#if defined(__x86_64__)
    if (have_f16c() && !have_avx512())
        return softmax_row8(x, n, len);
#endif
    return softmax_row(x, n, len);
}

static int attend_direct_ok(int hd)
{
#if defined(__x86_64__)
    return have_avx512() ? hd % 16 == 0 : have_f16c() && hd % 8 == 0;
#else
    (void)hd;
    return 0;
#endif
}

/* attend_group() over a pool of this dtype: BF16 needs the BF16 dot products, Q8_0 the
 * 8-bit ones, and AVX2 (attend_group8()) takes F32 and F16 only (elsewhere such a pool is
 * read by query tiles, widened to F32) */
static int attend_direct_dtype_ok(enum kvc_dtype dtype)
{
#if defined(__x86_64__)
    if (!have_avx512())
        return dtype == KVC_F32 || dtype == KVC_F16;
    if (dtype == KVC_Q8_0)
        return have_vnni();
    return dtype != KVC_BF16 || have_avx512bf16();
#else
    (void)dtype;
    return 0;
#endif
}

#if defined(__x86_64__)
/*
 * F32 products over the regrouped form of the 8-bit products (vnni_pack()), for a batch of
 * tokens: the 16 lanes of a register are 16 rows. A 64-byte load holds 8 (Q4_1) or 4
 * (Q8_0) consecutive weights of the 16 rows (lane r: row r's 4 bytes); each weight comes
 * out by a shift and a mask, is widened to the same float as the F32 copy (q d, exact, +
 * m: one rounding), and meets every token of the tile in one FMA with the token's value
 * broadcast from xt, the tile's activations transposed ([k][LANES_TT]: one cache line a
 * k). No panel to write and read back, no horizontal sums: each (token, row) sums its k
 * products in one lane, in one fixed order (a block's weights as they sit in a 64-byte
 * load: 0, 4, 1, 5, ... for Q4_1), whatever the number of tokens.
 */

AVX512 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
lanes_tile(const struct wmat *w, int g, const float *xt, int tt, float *y, int accumulate)
{
    const int nb = w->k / 32, n = w->n, q4 = w->type == GGML_Q4_1;
    const __m512i low4 = _mm512_set1_epi32(15);
    __m512 acc[LANES_TT];
#pragma GCC unroll 16
    for (int i = 0; i < tt; i++)
        acc[i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const size_t at = ((size_t)g * nb + b) * 16;
        const __m512 d = _mm512_loadu_ps(w->vd + at);
        const float *xb = xt + (size_t)32 * LANES_TT * b;
        if (q4) {
            const uint8_t *wq = w->vq + at * 16;
            const __m512 m = _mm512_loadu_ps(w->vm + at);
#pragma GCC unroll 1
            for (int c = 0; c < 4; c++) {
                __m512i v = _mm512_loadu_si512(wq + 64 * c);
                const float *xc = xb + 8 * LANES_TT * c;
#pragma GCC unroll 1
                for (int e = 0; e < 4; e++, v = _mm512_srli_epi32(v, 8), xc += LANES_TT) {
                    const __m512 lo =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, low4)), d, m);
                    const __m512 hi = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 4), low4)), d,
                        m);
#pragma GCC unroll 16
                    for (int i = 0; i < tt; i++)
                        acc[i] = _mm512_fmadd_ps(lo, _mm512_set1_ps(xc[i]), acc[i]);
#pragma GCC unroll 16
                    for (int i = 0; i < tt; i++)
                        acc[i] = _mm512_fmadd_ps(hi, _mm512_set1_ps(xc[4 * LANES_TT + i]), acc[i]);
                }
            }
        } else {
            const uint8_t *wq = w->vq + at * 32;
#pragma GCC unroll 1
            for (int c = 0; c < 8; c++) {
                __m512i v = _mm512_loadu_si512(wq + 64 * c);
                const float *xc = xb + 4 * LANES_TT * c;
#pragma GCC unroll 1
                for (int e = 0; e < 4; e++, v = _mm512_srli_epi32(v, 8), xc += LANES_TT) {
                    const __m512i q = _mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24);
                    const __m512 wv = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
#pragma GCC unroll 16
                    for (int i = 0; i < tt; i++)
                        acc[i] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xc[i]), acc[i]);
                }
            }
        }
    }
    store_rows16(acc, tt, g, y, n, accumulate);
}

/* rows 16 g .. 16 g + 15 for all t tokens, xt: the tiles' activations transposed, one
 * after another ([t / LANES_TT rounded up][k][LANES_TT]) */
AVX512 KERNEL_NOSANITIZE static void lanes_rows(const struct wmat *w, int g, const float *xt, int t,
                                                float *y, int accumulate)
{
    const size_t per = (size_t)w->k * LANES_TT, n = (size_t)w->n;
    int i = 0;
    for (; i + LANES_TT <= t; i += LANES_TT, xt += per)
        lanes_tile(w, g, xt, LANES_TT, y + i * n, accumulate);
    y += i * n;
    switch (t - i) { /* the rest in one tile of a constant size (accumulators in registers) */
#define LANES_CASE(r)                                                                          \
    case r:                                                                                    \
        lanes_tile(w, g, xt, r, y, accumulate);                                                \
        break;
        LANES_CASE(1) LANES_CASE(2) LANES_CASE(3) LANES_CASE(4) LANES_CASE(5) LANES_CASE(6)
        LANES_CASE(7) LANES_CASE(8) LANES_CASE(9) LANES_CASE(10) LANES_CASE(11)
        LANES_CASE(12) LANES_CASE(13) LANES_CASE(14) LANES_CASE(15)
#undef LANES_CASE
    default:
        break;
    }
}

_Static_assert(LANES_TT == 16, "transpose16() makes the tiles' columns of 16 tokens");
/* out[c * 16 + i] = x[i * ld + c] for 16 columns c of `rows` rows i (the rows past them
 * read as 0): four rounds of shuffles over 16 registers. After the first two, u[4 a + b]
 * holds rows 4 a .. 4 a + 3 of columns b, b + 4, b + 8 and b + 12, one in each 128-bit
 * lane; the last two gather each column's four lanes. */
AVX512 KERNEL_NOSANITIZE static void transpose16(const float *x, size_t ld, int rows, float *out)
{
    __m512 r[16], t[16], u[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_loadu_ps(x + (size_t)i * ld) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int a = 0; a < 16; a += 4)
        for (int h = 0; h < 2; h++) {
            const __m512d lo = _mm512_castps_pd(t[a + h]), hi = _mm512_castps_pd(t[a + h + 2]);
            u[a + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
            u[a + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
        }
    for (int b = 0; b < 4; b++) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[b], u[4 + b], 0x88);
        const __m512 v1 = _mm512_shuffle_f32x4(u[8 + b], u[12 + b], 0x88);
        const __m512 w0 = _mm512_shuffle_f32x4(u[b], u[4 + b], 0xdd);
        const __m512 w1 = _mm512_shuffle_f32x4(u[8 + b], u[12 + b], 0xdd);
        _mm512_storeu_ps(out + 16 * b, _mm512_shuffle_f32x4(v0, v1, 0x88));
        _mm512_storeu_ps(out + 16 * (b + 8), _mm512_shuffle_f32x4(v0, v1, 0xdd));
        _mm512_storeu_ps(out + 16 * (b + 4), _mm512_shuffle_f32x4(w0, w1, 0x88));
        _mm512_storeu_ps(out + 16 * (b + 12), _mm512_shuffle_f32x4(w0, w1, 0xdd));
    }
}

/* y [t][n] (+)= x [t][k] W^T through lanes_tile(); xt: lanes_floats(t, k) floats of
 * scratch for the transposed activations */
static void gemm_lanes(const struct wmat *w, const float *x, int t, float *y, int accumulate,
                       float *xt)
{
    const int k = w->k, groups = (w->n + 15) / 16, tiles = (t + LANES_TT - 1) / LANES_TT;
#pragma omp parallel
    {
        /* by pieces of 64 columns of a tile: rows read in order, and no two threads
         * writing one cache line */
        const int pieces = (k + 63) / 64;
#pragma omp for schedule(static)
        for (int p = 0; p < tiles * pieces; p++) {
            const int i0 = p / pieces * LANES_TT, k0 = p % pieces * 64;
            const int i1 = i0 + LANES_TT < t ? i0 + LANES_TT : t, k1 = k0 + 64 < k ? k0 + 64 : k;
            float *tile = xt + (size_t)(i0 / LANES_TT) * k * LANES_TT;
            int kk = k0;
            for (; kk + 16 <= k1; kk += 16)
                transpose16(x + (size_t)i0 * k + kk, k, i1 - i0, tile + (size_t)kk * LANES_TT);
            for (; kk < k1; kk++)
                for (int i = i0; i < i1; i++)
                    tile[(size_t)kk * LANES_TT + i - i0] = x[(size_t)i * k + kk];
        }
        /* guided: chunks of groups shrinking with what is left. One group at a time
         * (dynamic, 1) took an atomic increment on a line both cores write for every 16
         * rows, a few microseconds of work at decode: 5% of a served C=16 run's time sat
         * on that instruction, and 16-sequence decode steps ran 13-22% slower. */
#pragma omp for schedule(guided)
        for (int g = 0; g < groups; g++)
            lanes_rows(w, g, xt, t, y, accumulate);
    }
}

/*
 * 1 to 3 tokens (decode) with AVX-512: lanes_tile()'s arithmetic with the chains of P groups
 * of 16 rows interleaved, from group g0, for tt tokens (xs: their activations as [k][tt]).
 * A row's products for one token are one chain of dependent FMAs, and one group alone for
 * one token left the FMA units waiting on it. Each (token, row) sums in lanes_tile()'s
 * order, so decode steps give the floats a prompt pass gives. q4: w is Q4_1 (else Q8_0), a
 * constant where inlined, as P and tt are.
 */
#define FEW_P 4 /* groups a one-token item */
AVX512 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
few_tile(const struct wmat *w, int g0, const int P, const float *xs, const int tt, float *y,
         int accumulate, const int q4)
{
    const int nb = w->k / 32;
    const __m512i low4 = _mm512_set1_epi32(15);
    __m512 acc[FEW_P][QMV_MAX_T];
#pragma GCC unroll 4
    for (int o = 0; o < P; o++)
#pragma GCC unroll 3
        for (int i = 0; i < tt; i++)
            acc[o][i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const float *xb = xs + (size_t)32 * tt * b;
        __m512 d[FEW_P], m[FEW_P];
        const uint8_t *wq[FEW_P];
#pragma GCC unroll 4
        for (int o = 0; o < P; o++) {
            const size_t at = ((size_t)(g0 + o) * nb + b) * 16;
            d[o] = _mm512_loadu_ps(w->vd + at);
            m[o] = q4 ? _mm512_loadu_ps(w->vm + at) : _mm512_setzero_ps();
            wq[o] = w->vq + at * block_bytes(q4 ? GGML_Q4_1 : GGML_Q8_0);
        }
        /* a 64-byte load: 8 (Q4_1) or 4 (Q8_0) columns of the 16 rows, as in lanes_tile() */
        const int loads = q4 ? 4 : 8, cols = q4 ? 8 : 4;
#pragma GCC unroll 1
        for (int c = 0; c < loads; c++) {
            __m512i v[FEW_P];
#pragma GCC unroll 4
            for (int o = 0; o < P; o++)
                v[o] = _mm512_loadu_si512(wq[o] + 64 * c);
            const float *xc = xb + (size_t)cols * tt * c;
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++, xc += tt)
#pragma GCC unroll 4
                for (int o = 0; o < P; o++) {
                    if (q4) {
                        const __m512 lo = _mm512_fmadd_ps(
                            _mm512_cvtepi32_ps(_mm512_and_si512(v[o], low4)), d[o], m[o]);
                        const __m512 hi = _mm512_fmadd_ps(
                            _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v[o], 4), low4)),
                            d[o], m[o]);
#pragma GCC unroll 3
                        for (int i = 0; i < tt; i++)
                            acc[o][i] = _mm512_fmadd_ps(lo, _mm512_set1_ps(xc[i]), acc[o][i]);
#pragma GCC unroll 3
                        for (int i = 0; i < tt; i++)
                            acc[o][i] =
                                _mm512_fmadd_ps(hi, _mm512_set1_ps(xc[4 * tt + i]), acc[o][i]);
                    } else {
                        const __m512i q = _mm512_srai_epi32(_mm512_slli_epi32(v[o], 24), 24);
                        const __m512 wv = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d[o]);
#pragma GCC unroll 3
                        for (int i = 0; i < tt; i++)
                            acc[o][i] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xc[i]), acc[o][i]);
                    }
                    v[o] = _mm512_srli_epi32(v[o], 8);
                }
        }
    }
#pragma GCC unroll 4
    for (int o = 0; o < P; o++)
        store_rows16(acc[o], tt, g0 + o, y, w->n, accumulate);
}

/* few_tile() with q4 a constant */
AVX512 KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
few_case(const struct wmat *w, int g0, const int P, const float *xs, const int tt, float *y,
         int accumulate)
{
    if (w->type == GGML_Q4_1)
        few_tile(w, g0, P, xs, tt, y, accumulate, 1);
    else
        few_tile(w, g0, P, xs, tt, y, accumulate, 0);
}

/* item p of gemm_few(): FEW_P groups from FEW_P p for one token (fewer at the end), 2 from
 * 2 p for 2 or 3 tokens (or the last 1) */
AVX512 KERNEL_NOSANITIZE static void few_rows(const struct wmat *w, int p, const float *xs, int t,
                                              float *y, int accumulate)
{
    const int groups = (w->n + 15) / 16, per = t == 1 ? FEW_P : 2;
    const int g0 = per * p, P = groups - g0 < per ? groups - g0 : per;
    if (t == 1) {
        switch (P) { /* accumulators in registers */
        case 1:
            few_case(w, g0, 1, xs, 1, y, accumulate);
            break;
        case 2:
            few_case(w, g0, 2, xs, 1, y, accumulate);
            break;
        case 3:
            few_case(w, g0, 3, xs, 1, y, accumulate);
            break;
        default:
            few_case(w, g0, FEW_P, xs, 1, y, accumulate);
            break;
        }
    } else if (t == 2) {
        if (P == 2)
            few_case(w, g0, 2, xs, 2, y, accumulate);
        else
            few_case(w, g0, 1, xs, 2, y, accumulate);
    } else {
        if (P == 2)
            few_case(w, g0, 2, xs, 3, y, accumulate);
        else
            few_case(w, g0, 1, xs, 3, y, accumulate);
    }
}

/*
 * gemm_lanes() on AVX2 (8 lanes, FMA): each 64-byte load of the regrouped weights as two
 * halves of 8 rows, A2_TT tokens of a tile at a time (8 accumulators, the weights' two
 * vectors and their scales in the 16 registers). Each (token, row) sums its k products in
 * one lane in lanes_tile()'s order, so the same floats, whatever the number of tokens; no
 * panel of the weights is packed (OpenBLAS's packing of the F32 copy took as long as its
 * products in a 16-sequence decode step).
 */
#define A2_TT 8
/* Beyond this many tokens gemm_panel8() is the faster. 2 threads, the default model, F16
 * keys and values, alternating runs, tokens/s: decode of 8 sequences 154-172 through
 * gemm_lanes8(), 137-171 through the panels; 12: 150-189 against 184-230; 16: 178-187
 * against 185-211; 18: 181-206 against 210-290; 48: 180-192 against 213-290; a prompt of
 * 96 tokens 218-317 against 292-385. */
#define LANES8_MAX_T 8

/* rows 16 g + 8 h .. + 7 (those below n) of tokens 0..tt of the tile xt (its activations
 * transposed: [k][LANES_TT]) into y (rows of n floats), or added to it */
AVX2F KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
lanes_tile8(const struct wmat *w, int g, int h, const float *xt, const int tt, float *y,
            int accumulate)
{
    const int nb = w->k / 32, n = w->n, q4 = w->type == GGML_Q4_1;
    const __m256i low4 = _mm256_set1_epi32(15);
    __m256 acc[A2_TT];
#pragma GCC unroll 8
    for (int i = 0; i < tt; i++)
        acc[i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const size_t at = ((size_t)g * nb + b) * 16;
        const __m256 d = _mm256_loadu_ps(w->vd + at + 8 * h);
        const float *xb = xt + (size_t)32 * LANES_TT * b;
        if (q4) {
            const uint8_t *wq = w->vq + at * 16 + 32 * h;
            const __m256 m = _mm256_loadu_ps(w->vm + at + 8 * h);
#pragma GCC unroll 1
            for (int c = 0; c < 4; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(wq + 64 * c));
                const float *xc = xb + 8 * LANES_TT * c;
#pragma GCC unroll 1
                for (int e = 0; e < 4; e++, v = _mm256_srli_epi32(v, 8), xc += LANES_TT) {
                    const __m256 lo =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, low4)), d, m);
                    const __m256 hi = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 4), low4)), d,
                        m);
#pragma GCC unroll 8
                    for (int i = 0; i < tt; i++)
                        acc[i] = _mm256_fmadd_ps(lo, _mm256_set1_ps(xc[i]), acc[i]);
#pragma GCC unroll 8
                    for (int i = 0; i < tt; i++)
                        acc[i] = _mm256_fmadd_ps(hi, _mm256_set1_ps(xc[4 * LANES_TT + i]), acc[i]);
                }
            }
        } else {
            const uint8_t *wq = w->vq + at * 32 + 32 * h;
#pragma GCC unroll 1
            for (int c = 0; c < 8; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(wq + 64 * c));
                const float *xc = xb + 4 * LANES_TT * c;
#pragma GCC unroll 1
                for (int e = 0; e < 4; e++, v = _mm256_srli_epi32(v, 8), xc += LANES_TT) {
                    const __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24);
                    const __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
#pragma GCC unroll 8
                    for (int i = 0; i < tt; i++)
                        acc[i] = _mm256_fmadd_ps(wv, _mm256_set1_ps(xc[i]), acc[i]);
                }
            }
        }
    }
    const int r0 = 16 * g + 8 * h, rows = n - r0 < 8 ? n - r0 : 8;
#pragma GCC unroll 8
    for (int i = 0; i < tt; i++) {
        float *out = y + (size_t)i * n + r0, v[8];
        if (rows == 8) {
            _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[i]) : acc[i]);
            continue;
        }
        _mm256_storeu_ps(v, acc[i]);
        for (int r = 0; r < rows; r++)
            out[r] = accumulate ? out[r] + v[r] : v[r];
    }
}

/* rows 16 g .. 16 g + 15 for all t tokens (xt as for lanes_rows()) */
AVX2F KERNEL_NOSANITIZE static void lanes_rows8(const struct wmat *w, int g, const float *xt, int t,
                                                float *y, int accumulate)
{
    const size_t per = (size_t)w->k * LANES_TT, n = (size_t)w->n;
    for (int h = 0; h < 2 && 16 * g + 8 * h < w->n; h++)
        for (int i = 0; i < t; i += A2_TT) {
            const float *tile = xt + (size_t)(i / LANES_TT) * per + i % LANES_TT;
            float *yi = y + (size_t)i * n;
            switch (t - i < A2_TT ? t - i : A2_TT) { /* accumulators in registers */
#define LANES8_CASE(r)                                                                         \
    case r:                                                                                    \
        lanes_tile8(w, g, h, tile, r, yi, accumulate);                                         \
        break;
                LANES8_CASE(1) LANES8_CASE(2) LANES8_CASE(3) LANES8_CASE(4) LANES8_CASE(5)
                LANES8_CASE(6) LANES8_CASE(7) LANES8_CASE(8)
#undef LANES8_CASE
            default:
                break;
            }
        }
}

/* gemm_lanes() through lanes_rows8(): the same tiles of transposed activations */
static void gemm_lanes8(const struct wmat *w, const float *x, int t, float *y, int accumulate,
                        float *xt)
{
    const int k = w->k, groups = (w->n + 15) / 16;
#pragma omp parallel
    {
        /* by pieces of 64 columns of a tile, as gemm_lanes() */
        const int tiles = (t + LANES_TT - 1) / LANES_TT, pieces = (k + 63) / 64;
#pragma omp for schedule(static)
        for (int p = 0; p < tiles * pieces; p++) {
            const int i0 = p / pieces * LANES_TT, k0 = p % pieces * 64;
            const int i1 = i0 + LANES_TT < t ? i0 + LANES_TT : t, k1 = k0 + 64 < k ? k0 + 64 : k;
            float *tile = xt + (size_t)(i0 / LANES_TT) * k * LANES_TT;
            for (int kk = k0; kk < k1; kk++)
                for (int i = i0; i < i1; i++)
                    tile[(size_t)kk * LANES_TT + i - i0] = x[(size_t)i * k + kk];
        }
#pragma omp for schedule(guided)
        for (int g = 0; g < groups; g++)
            lanes_rows8(w, g, xt, t, y, accumulate);
    }
}

/* the 32 bytes at offset off of each of P octets' regrouped weights */
AVX2F KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
octet_loads(__m256i *v, const uint8_t *const *wq, const int P, size_t off)
{
#pragma GCC unroll 4
    for (int o = 0; o < P; o++)
        v[o] = _mm256_loadu_si256((const __m256i *)(wq[o] + off));
}

/*
 * Rows of P octets of rows (octet q: half q % 2 of group q / 2, rows 8 q .. 8 q + 7) from
 * octet q0, for tt tokens (xs: [k][tt]): lanes_tile8()'s arithmetic, with the
 * octets' chains interleaved. A row's products for one token are one chain of dependent
 * FMAs; one or two tokens of one octet would leave the FMA units waiting on it.
 */
AVX2F KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
few_tile8(const struct wmat *w, int q0, const int P, const float *xs, const int tt, float *y,
          int accumulate)
{
    const int nb = w->k / 32, n = w->n, q4 = w->type == GGML_Q4_1;
    const __m256i low4 = _mm256_set1_epi32(15);
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int o = 0; o < P; o++)
#pragma GCC unroll 3
        for (int i = 0; i < tt; i++)
            acc[o][i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const float *xb = xs + (size_t)32 * tt * b;
        __m256 d[4], m[4];
        const uint8_t *wq[4];
#pragma GCC unroll 4
        for (int o = 0; o < P; o++) {
            const int q = q0 + o, h = q % 2;
            const size_t at = ((size_t)(q / 2) * nb + b) * 16;
            d[o] = _mm256_loadu_ps(w->vd + at + 8 * h);
            m[o] = q4 ? _mm256_loadu_ps(w->vm + at + 8 * h) : _mm256_setzero_ps();
            wq[o] = w->vq + at * block_bytes(q4 ? GGML_Q4_1 : GGML_Q8_0) + 32 * h;
        }
        if (q4) {
#pragma GCC unroll 1
            for (int c = 0; c < 4; c++) {
                __m256i v[4];
                octet_loads(v, wq, P, 64 * c);
                const float *xc = xb + (size_t)8 * tt * c;
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++, xc += tt) {
#pragma GCC unroll 4
                    for (int o = 0; o < P; o++) {
                        const __m256 lo = _mm256_fmadd_ps(
                            _mm256_cvtepi32_ps(_mm256_and_si256(v[o], low4)), d[o], m[o]);
#pragma GCC unroll 3
                        for (int i = 0; i < tt; i++)
                            acc[o][i] = _mm256_fmadd_ps(lo, _mm256_set1_ps(xc[i]), acc[o][i]);
                    }
#pragma GCC unroll 4
                    for (int o = 0; o < P; o++) {
                        const __m256 hi = _mm256_fmadd_ps(
                            _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v[o], 4), low4)),
                            d[o], m[o]);
#pragma GCC unroll 3
                        for (int i = 0; i < tt; i++)
                            acc[o][i] =
                                _mm256_fmadd_ps(hi, _mm256_set1_ps(xc[4 * tt + i]), acc[o][i]);
                        v[o] = _mm256_srli_epi32(v[o], 8);
                    }
                }
            }
        } else {
#pragma GCC unroll 1
            for (int c = 0; c < 8; c++) {
                __m256i v[4];
                octet_loads(v, wq, P, 64 * c);
                const float *xc = xb + (size_t)4 * tt * c;
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++, xc += tt)
#pragma GCC unroll 4
                    for (int o = 0; o < P; o++) {
                        const __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(v[o], 24), 24);
                        const __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d[o]);
#pragma GCC unroll 3
                        for (int i = 0; i < tt; i++)
                            acc[o][i] = _mm256_fmadd_ps(wv, _mm256_set1_ps(xc[i]), acc[o][i]);
                        v[o] = _mm256_srli_epi32(v[o], 8);
                    }
            }
        }
    }
#pragma GCC unroll 4
    for (int o = 0; o < P; o++) {
        const int r0 = 8 * (q0 + o), rows = n - r0 < 8 ? n - r0 : 8;
#pragma GCC unroll 3
        for (int i = 0; i < tt && rows > 0; i++) {
            float *out = y + (size_t)i * n + r0, v[8];
            if (rows == 8) {
                _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[o][i])
                                                 : acc[o][i]);
                continue;
            }
            _mm256_storeu_ps(v, acc[o][i]);
            for (int r = 0; r < rows; r++)
                out[r] = accumulate ? out[r] + v[r] : v[r];
        }
    }
}

/* one token: the rows of groups 2 p and 2 p + 1 (those there are); 2 or 3 tokens: the rows
 * of group p (xs: [k][t]) */
AVX2F KERNEL_NOSANITIZE static void few_rows8(const struct wmat *w, int p, const float *xs, int t,
                                              float *y, int accumulate)
{
    if (t == 1 && 2 * p + 1 < (w->n + 15) / 16)
        few_tile8(w, 4 * p, 4, xs, 1, y, accumulate);
    else if (t == 1)
        few_tile8(w, 4 * p, 2, xs, 1, y, accumulate);
    else if (t == 2)
        few_tile8(w, 2 * p, 2, xs, 2, y, accumulate);
    else
        few_tile8(w, 2 * p, 2, xs, 3, y, accumulate);
}

/* 1 to 3 tokens (decode) through few_tile() (AVX-512) or few_tile8() (AVX2): their
 * activations transposed to [k][t] (one token is that already), by one thread, so that one
 * parallel loop runs the rows */
static void gemm_few(const struct wmat *w, const float *x, int t, float *y, int accumulate,
                     float *xt)
{
    const int k = w->k, groups = (w->n + 15) / 16, wide = have_avx512();
    const float *xs = x;
    if (t > 1) {
        for (int kk = 0; kk < k; kk++)
            for (int i = 0; i < t; i++)
                xt[(size_t)kk * t + i] = x[(size_t)i * k + kk];
        xs = xt;
    }
    const int per = wide ? (t == 1 ? FEW_P : 2) : (t == 1 ? 2 : 1);
    const int items = (groups + per - 1) / per;
#pragma omp parallel for schedule(guided)
    for (int p = 0; p < items; p++) {
        if (wide)
            few_rows(w, p, xs, t, y, accumulate);
        else
            few_rows8(w, p, xs, t, y, accumulate);
    }
}

/*
 * Passes of more than LANES8_MAX_T tokens on AVX2 (prompts; decode of 9 sequences or more):
 * a thread widens 16 rows of the regrouped weights into a panel of F32 ([k][16], in the
 * order lanes_tile8() sums a row's products), then runs PANEL_TI tokens at a time over it:
 * per column, two loads of the panel and PANEL_TI broadcasts for 2 PANEL_TI FMAs into 12
 * accumulators, the shape of an AVX2 SGEMM kernel, where lanes_tile8() widens the weights
 * again for every A2_TT tokens.
 * Each (token, row) is the one chain of FMAs of lanes_tile8(), so any number of tokens
 * comes out the same floats. The tokens go by chunks of panel_tc(k) (their activations,
 * 256 KB, stay in the level-2 cache beside the panel's 16 k floats), the
 * panel is widened anew for each chunk. A thread's panel
 * is in linear()'s scratch (linear_scratch_bytes()).
 */
#define PANEL_TI 6
static int panel_tc(int k)
{
    int tc = 65536 / k / PANEL_TI * PANEL_TI;
    return tc < 4 * PANEL_TI ? 4 * PANEL_TI : tc;
}

/* the regrouped rows 16 g .. 16 g + 15 as F32: panel[s][16], s the position of a column
 * in lanes_tile8()'s order (panel_col()) */
AVX2F KERNEL_NOSANITIZE static void panel_fill8(const struct wmat *w, int g, float *panel)
{
    const int nb = w->k / 32;
    const __m256i low4 = _mm256_set1_epi32(15);
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < 2; h++) {
            const size_t at = ((size_t)g * nb + b) * 16;
            const __m256 d = _mm256_loadu_ps(w->vd + at + 8 * h);
            float *p = panel + (size_t)32 * 16 * b + 8 * h;
            if (w->type == GGML_Q4_1) {
                const uint8_t *wq = w->vq + at * 16 + 32 * h;
                const __m256 m = _mm256_loadu_ps(w->vm + at + 8 * h);
                for (int c = 0; c < 4; c++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(wq + 64 * c));
                    for (int e = 0; e < 4; e++, v = _mm256_srli_epi32(v, 8), p += 32) {
                        const __m256i lo = _mm256_and_si256(v, low4);
                        const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(v, 4), low4);
                        _mm256_storeu_ps(p, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), d, m));
                        _mm256_storeu_ps(p + 16, _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), d, m));
                    }
                }
            } else {
                const uint8_t *wq = w->vq + at * 32 + 32 * h;
                for (int c = 0; c < 8; c++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(wq + 64 * c));
                    for (int e = 0; e < 4; e++, v = _mm256_srli_epi32(v, 8), p += 16) {
                        const __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24);
                        _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
                    }
                }
            }
        }
}

/* the column of a block that lanes_tile8() sums s-th (Q4_1: the low nibbles of 4 columns
 * and the high ones of the 4 after them are interleaved; Q8_0: in order) */
static inline int panel_col(int q4, int s)
{
    return q4 ? 8 * (s / 8) + s % 8 / 2 + 4 * (s % 2) : s;
}

/* tokens 0..ti of x (rows of k floats) times the panel's 16 rows into y's columns r0 ..
 * r0 + rows - 1 (rows of n floats), or added to them */
AVX2F KERNEL_NOSANITIZE static inline __attribute__((always_inline)) void
panel_tile8(const float *panel, const int q4, int k, const float *x, const int ti, float *y,
            int n, int r0, int rows, int accumulate)
{
    __m256 acc[PANEL_TI][2];
#pragma GCC unroll 6
    for (int i = 0; i < ti; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int kb = 0; kb < k; kb += 32, panel += 32 * 16) {
#pragma GCC unroll 32
        for (int s = 0; s < 32; s++) {
            const __m256 w0 = _mm256_loadu_ps(panel + 16 * s);
            const __m256 w1 = _mm256_loadu_ps(panel + 16 * s + 8);
            const int col = kb + panel_col(q4, s);
#pragma GCC unroll 6
            for (int i = 0; i < ti; i++) {
                const __m256 xv = _mm256_set1_ps(x[(size_t)i * k + col]);
                acc[i][0] = _mm256_fmadd_ps(w0, xv, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(w1, xv, acc[i][1]);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < ti; i++) {
        float *out = y + (size_t)i * n + r0, v[16];
        if (rows == 16 && !accumulate) {
            _mm256_storeu_ps(out, acc[i][0]);
            _mm256_storeu_ps(out + 8, acc[i][1]);
            continue;
        }
        _mm256_storeu_ps(v, acc[i][0]);
        _mm256_storeu_ps(v + 8, acc[i][1]);
        for (int r = 0; r < rows; r++)
            out[r] = accumulate ? out[r] + v[r] : v[r];
    }
}

/* tokens i0 .. i1 - 1 over the panel of group g */
AVX2F KERNEL_NOSANITIZE static void panel_rows8(const struct wmat *w, int g, const float *panel,
                                                const float *x, int i0, int i1, float *y,
                                                int accumulate)
{
    const int k = w->k, n = w->n, r0 = 16 * g, rows = n - r0 < 16 ? n - r0 : 16;
    const int q4 = w->type == GGML_Q4_1;
    for (int i = i0; i < i1; i += PANEL_TI) {
        const float *xi = x + (size_t)i * k;
        float *yi = y + (size_t)i * n;
        switch (i1 - i < PANEL_TI ? i1 - i : PANEL_TI) { /* accumulators in registers */
#define PANEL_CASE(r)                                                                          \
    case r:                                                                                    \
        if (q4)                                                                                \
            panel_tile8(panel, 1, k, xi, r, yi, n, r0, rows, accumulate);                      \
        else                                                                                   \
            panel_tile8(panel, 0, k, xi, r, yi, n, r0, rows, accumulate);                      \
        break;
            PANEL_CASE(1) PANEL_CASE(2) PANEL_CASE(3) PANEL_CASE(4) PANEL_CASE(5) PANEL_CASE(6)
#undef PANEL_CASE
        default:
            break;
        }
    }
}

static void gemm_panel8(const struct wmat *w, const float *x, int t, float *y, int accumulate,
                        float *scratch)
{
    const int k = w->k, groups = (w->n + 15) / 16, tc = panel_tc(k);
    const int chunks = (t + tc - 1) / tc;
#pragma omp parallel
    {
        float *panel = scratch + (size_t)omp_get_thread_num() * 16 * k;
#pragma omp for schedule(static)
        for (int p = 0; p < chunks * groups; p++) {
            const int c = p / groups, g = p % groups;
            const int i0 = c * tc, i1 = i0 + tc < t ? i0 + tc : t;
            panel_fill8(w, g, panel);
            panel_rows8(w, g, panel, x, i0, i1, y, accumulate);
        }
    }
}
#endif

/*
 * y (+)= x W^T, x: [t][k], W: [n][k]. Regrouped weights: the 8-bit products, or the F32
 * ones (gemm_few() to QMV_MAX_T tokens, then gemm_lanes() with AVX-512, or gemm_lanes8()
 * and gemm_panel8() on AVX2). Otherwise (weights not regrouped) many tokens:
 * one SGEMM on the F32 copy; few: each output row of W is read once from its stored form
 * for all t tokens. xt: scratch of linear_scratch_bytes(t, k, threads) bytes, for at most
 * that many OpenMP threads (the model's, sized by grow() for m->threads, which eng_forward()
 * sets).
 */
static void linear(const struct wmat *w, const float *x, int t, float *y, int accumulate,
                   float *xt)
{
    const int n = w->n, k = w->k;
#if defined(__x86_64__)
    if (w->int8) {
        linear_int8(w, x, t, y, accumulate, xt);
        return;
    }
    if (w->vq && f32_regrouped()) { /* lanes_tile()'s order (AVX2: lanes_tile8()'s) */
        if (t <= QMV_MAX_T)
            gemm_few(w, x, t, y, accumulate, xt);
        else if (have_avx512())
            gemm_lanes(w, x, t, y, accumulate, xt);
        else if (t <= LANES8_MAX_T)
            gemm_lanes8(w, x, t, y, accumulate, xt);
        else
            gemm_panel8(w, x, t, y, accumulate, xt);
        return;
    }
    /* (F32 weights, or quantized ones not regrouped: their F32 copy holds the same floats) */
    if ((t > QMV_MAX_T || !w->qs) && t <= GEMM_SMALL_MAX_T && have_avx512()) {
        gemm_small(x, t, w->f, n, k, y, accumulate);
        return;
    }
#else
    (void)xt;
#endif
    if (t > QMV_MAX_T || !w->qs) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n, k, 1.0f, x, k, w->f, k,
                    accumulate ? 1.0f : 0.0f, y, n);
        return;
    }
    float xsum[QMV_MAX_T][k / 32 + 1]; /* per-block sums of x, for Q4_1's offsets */
    for (int i = 0; i < t; i++)
        for (int b = 0; b < k / 32; b++) {
            float s = 0;
            for (int j = 0; j < 32; j++)
                s += x[(size_t)i * k + b * 32 + j];
            xsum[i][b] = s;
        }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r += 2) {
        int two = r + 1 < n; /* an odd last row is computed twice and stored once */
        for (int i = 0; i < t; i++) {
            float v[2], *out = y + (size_t)i * n + r;
            dot2_rows(w, r, two ? r + 1 : r, x + (size_t)i * k, xsum[i], v);
            for (int j = 0; j <= two; j++)
                out[j] = accumulate ? out[j] + v[j] : v[j];
        }
    }
}

static void rmsnorm(float *out, const float *x, const float *g, int t, int d, float eps)
{
#pragma omp parallel for schedule(static) if (t >= 8)
    for (int i = 0; i < t; i++) {
        const float *r = x + (size_t)i * d;
        double ss = 0;
        for (int j = 0; j < d; j++)
            ss += (double)r[j] * r[j];
        float inv = (float)(1.0 / sqrt(ss / d + eps));
        float *o = out + (size_t)i * d;
        for (int j = 0; j < d; j++)
            o[j] = r[j] * inv * g[j];
    }
}

/* RoPE on one token's n_heads heads (x: [n_heads][hd]) at position pos: rotates adjacent
 * pairs (x[2i], x[2i+1]) of the first n_rot dims of every head, as GGUF llama files store
 * Q and K permuted for this layout */
static void rope_token(float *x, int pos, int n_heads, int hd, int n_rot, const float *inv)
{
    for (int p = 0; p < n_rot / 2; p++) {
        float th = (float)pos * inv[p];
        float c = cosf(th), s = sinf(th);
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * hd + 2 * p;
            float a = v[0], b = v[1];
            v[0] = a * c - b * s;
            v[1] = a * s + b * c;
        }
    }
}

static void rope(float *x, const int *pos, int t, int n_heads, int hd, int n_rot,
                 const float *inv)
{
#pragma omp parallel for schedule(static) if (t >= 8)
    for (int i = 0; i < t; i++)
        rope_token(x + (size_t)i * n_heads * hd, pos[i], n_heads, hd, n_rot, inv);
}

/* the sequence holding the pass's token t: first[s] <= t < first[s + 1] */
static int seq_of(const int *first, int n_seqs, int t)
{
    int lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (first[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* the most tokens in a group of attend_group(), `group` query heads each */
static int group_members(int group)
{
    int n = ATT_GROUP_QUERIES / group;
    return n < 1 ? 1 : n > ATT_GROUP_MAX ? ATT_GROUP_MAX : n;
}

/* how many of the first n blocks of tables a and b are the same blocks */
static int common_blocks(const int32_t *a, const int32_t *b, int n)
{
    int k = 0;
    while (k < n && a[k] == b[k])
        k++;
    return k;
}

/*
 * The tokens of the sequences that attend directly (no query tiles: tiles[s + 1] ==
 * tiles[s]) in groups for attend_group(): members mb[gstart[i]..gstart[i + 1]) sharing
 * gshared[i] blocks, every one of them fully visible to each member. A prompt's tokens go
 * group_members(group) at a time (they share its blocks up to the first one's position);
 * decoding sequences are sorted by block table and taken in order while a sequence shares
 * at least half the group's blocks with its first. Returns the number of groups.
 */
static int group_direct(const struct eng_seq *seqs, int n_seqs, const int *first,
                        const int *tiles, int bs, int group, struct att_member *mb, int *gstart,
                        int *gshared)
{
    int maxm = group_members(group), ng = 0, nm = 0, nd = 0, idx[n_seqs];
    for (int s = 0; s < n_seqs; s++) {
        const struct eng_seq *q = &seqs[s];
        if (tiles[s + 1] != tiles[s])
            continue;
        if (q->n_new == 1) { /* decoding: grouped below, insertion-sorted by table here */
            int full = (q->pos0 + 1) / bs, k = nd++;
            for (; k > 0; k--) {
                const struct eng_seq *r = &seqs[idx[k - 1]];
                int rf = (r->pos0 + 1) / bs, n = full < rf ? full : rf;
                int c = common_blocks(q->block_table, r->block_table, n);
                if (c < n ? q->block_table[c] >= r->block_table[c] : full >= rf)
                    break;
                idx[k] = idx[k - 1];
            }
            idx[k] = s;
            continue;
        }
        for (int i = 0; i < q->n_new; i += maxm, ng++) {
            gstart[ng] = nm;
            gshared[ng] = (q->pos0 + i + 1) / bs;
            for (int k = i; k < q->n_new && k < i + maxm; k++)
                mb[nm++] = (struct att_member){first[s] + k, q->pos0 + k, q->block_table};
        }
    }
    for (int i = 0; i < nd;) {
        const struct eng_seq *lead = &seqs[idx[i]];
        int lf = (lead->pos0 + 1) / bs, shared = lf, k = i;
        gstart[ng] = nm;
        for (; k < nd && k < i + maxm; k++) {
            const struct eng_seq *q = &seqs[idx[k]];
            int qf = (q->pos0 + 1) / bs;
            int c = common_blocks(lead->block_table, q->block_table, lf < qf ? lf : qf);
            if (k > i && (c == 0 || 2 * c < shared))
                break;
            shared = c < shared ? c : shared;
            mb[nm++] = (struct att_member){first[idx[k]], q->pos0, q->block_table};
        }
        gshared[ng++] = shared;
        i = k;
    }
    gstart[ng] = nm;
    return ng;
}

/* order[0..ng): the groups by their attention's work (positions attended, all members
 * together), most first: the dynamic schedule then ends on small items, and one thread does
 * not finish a large group while the other waits */
static void order_groups(const struct att_member *mb, const int *gstart, int ng, int *order)
{
    long work[ng];
    for (int i = 0; i < ng; i++) {
        work[i] = 0;
        for (int k = gstart[i]; k < gstart[i + 1]; k++)
            work[i] += mb[k].p + 1;
        int j = i; /* insertion by work, descending (stable) */
        for (; j > 0 && work[order[j - 1]] < work[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
}

int eng_forward(eng_model *m, kvc_pool *kv, const struct eng_seq *seqs, int n_seqs,
                float *logits)
{
    const struct eng_hparams *hp = &m->hp;
    const struct kvc_shape *ks = kvc_shape(kv);
    if (ks->n_layer != hp->n_layer || ks->n_kv_head != hp->n_head_kv ||
        ks->head_dim != hp->head_dim || n_seqs <= 0)
        return ENG_EINVAL;
    if (m->be)
        return forward_device(m, kv, seqs, n_seqs, logits);
    if (ks->device_storage)
        return ENG_EINVAL;
    /* the thread count is the calling thread's (OpenMP keeps it per thread, and the model
     * may have been loaded on another): the per-thread scratch holds m->threads */
    omp_set_num_threads(m->threads);
    int T = 0, rows = 0, ctx = 0;
    for (int s = 0; s < n_seqs; s++) {
        if (seqs[s].n_new <= 0 || seqs[s].pos0 < 0)
            return ENG_EINVAL;
        T += seqs[s].n_new;
        rows += seqs[s].logits == ENG_LOGITS_ALL ? seqs[s].n_new : seqs[s].logits ? 1 : 0;
        int end = seqs[s].pos0 + seqs[s].n_new;
        ctx = end > ctx ? end : ctx;
    }
    int rc = grow(m, T, ctx);
    if (rc)
        return rc;
    const int D = hp->n_embd, hd = hp->head_dim, NH = hp->n_head, NK = hp->n_head_kv;
    const int HQ = NH * hd, HK = NK * hd, bs = ks->block_size, group = NH / NK;

    /* token embeddings and positions */
    for (int s = 0, t = 0; s < n_seqs; s++)
        for (int i = 0; i < seqs[s].n_new; i++, t++) {
            int32_t id = seqs[s].tokens[i];
            if (id < 0 || id >= hp->n_vocab)
                return ENG_EINVAL;
            embed_row(&m->tok_embd, id, m->x + (size_t)t * D);
            m->pos[t] = seqs[s].pos0 + i;
        }

    const float scale = 1.0f / sqrtf((float)hd);
    /* attention's work items: first[s], the sequence's first token in the batch; tiles[s],
     * its first query tile (per KV head); the groups of tokens that go direct (per KV
     * head): members mb[gstart[i]..gstart[i + 1]), sharing gshared[i] blocks */
    int first[n_seqs + 1], tiles[n_seqs + 1];
    const int direct_ok = attend_direct_ok(hd) && attend_direct_dtype_ok(ks->dtype);
    int n_direct = 0;
    first[0] = tiles[0] = 0;
    for (int s = 0; s < n_seqs; s++) {
        /* every token attends by itself, as in decode: its attention is summed in the
         * same order however its prompt was split into passes or found in the prefix
         * cache (with the int8 products, whose 8-bit rounding would magnify last-bit
         * differences, its products are too: eng_model_token_invariant()) */
        int n = seqs[s].n_new;
        first[s + 1] = first[s] + n;
        tiles[s + 1] = tiles[s] + (direct_ok ? 0 : NK * ((n + ATT_TILE - 1) / ATT_TILE));
        n_direct += direct_ok ? n : 0;
    }
    struct att_member *mb = NULL;
    int *gstart = NULL, *gshared = NULL, *gorder = NULL, n_groups = 0;
    if (n_direct) {
        mb = malloc(sizeof *mb * (size_t)n_direct);
        gstart = malloc(sizeof *gstart * (size_t)(n_direct + 1));
        gshared = malloc(sizeof *gshared * (size_t)n_direct);
        gorder = malloc(sizeof *gorder * (size_t)n_direct);
        if (!mb || !gstart || !gshared || !gorder) {
            free(mb), free(gstart), free(gshared), free(gorder);
            return ENG_ENOMEM;
        }
        n_groups = group_direct(seqs, n_seqs, first, tiles, bs, group, mb, gstart, gshared);
        order_groups(mb, gstart, n_groups, gorder);
    }
    /* SwiGLU: on AVX-512 or AVX2 instructions where they run (the same floats) */
    void (*act)(float *, const float *, int) = swiglu;
#if defined(__x86_64__)
    if (have_avx512())
        act = swiglu512;
    else if (have_f16c())
        act = swiglu8;
#endif
    for (int l = 0; l < hp->n_layer; l++) {
        const struct layer *L = &m->layers[l];
        rmsnorm(m->xn, m->x, L->attn_norm, T, D, hp->rms_eps);
        linear(&L->wqkv, m->xn, T, m->qkv, 0, m->xt);
        /* a token at a time, spread over the threads: RoPE over its query and key heads at
         * once (adjacent in its qkv row, so each pair's sine and cosine serve both), its
         * queries out for attention, its keys and values into the paged cache (tokens
         * write distinct slots there) */
#pragma omp parallel for schedule(static) if (T >= 8)
        for (int t = 0; t < T; t++) {
            float *r = m->qkv + (size_t)t * (HQ + 2 * HK);
            rope_token(r, m->pos[t], NH + NK, hd, hp->n_rot, m->rope_inv);
            memcpy(m->q + (size_t)t * HQ, r, sizeof(float) * HQ);
            const int s = seq_of(first, n_seqs, t), p = m->pos[t];
            kv_store(kv, l, seqs[s].block_table[p / bs], p % bs, r + HQ, r + HQ + HK);
        }
        /* causal attention of every new token over its sequence's cached positions: by
         * query tiles (biggest first, for the dynamic schedule), and tokens that go direct
         * by groups sharing blocks, a KV head at a time (attend_group()) */
        const int n_items = tiles[n_seqs] + n_groups * NK;
#pragma omp parallel for schedule(dynamic, 1)
        for (int it = 0; it < n_items; it++) {
            float *buf = m->scores + (size_t)omp_get_thread_num() * m->scratch_floats;
            if (it >= tiles[n_seqs]) {
#if defined(__x86_64__)
                int gi = gorder[(it - tiles[n_seqs]) / NK], g = (it - tiles[n_seqs]) % NK;
                attend_group(mb + gstart[gi], gstart[gi + 1] - gstart[gi], gshared[gi], kv, l, g,
                             group, scale, m->q, m->att, buf);
#endif
                continue;
            }
            int s = 0;
            while (it >= tiles[s + 1])
                s++;
            int j = it - tiles[s], n_tiles = (tiles[s + 1] - tiles[s]) / NK;
            int t0 = (n_tiles - 1 - j / NK) * ATT_TILE;
            int t1 = t0 + ATT_TILE < seqs[s].n_new ? t0 + ATT_TILE : seqs[s].n_new;
            attend_tile(m->q + (size_t)first[s] * HQ, seqs[s].pos0, t0, t1, kv, l,
                        seqs[s].block_table, j % NK, group, scale, buf,
                        m->att + (size_t)first[s] * HQ);
        }
        linear(&L->wo, m->att, T, m->x, 1, m->xt); /* x += att Wo^T */
        rmsnorm(m->xn, m->x, L->ffn_norm, T, D, hp->rms_eps);
        linear(&L->w_gate_up, m->xn, T, m->up, 0, m->xt); /* [T][2 * n_ff]: gate, then up */
        const int F = hp->n_ff;
#pragma omp parallel for schedule(static) if (T >= 8)
        for (int t = 0; t < T; t++)
            act(m->gate + (size_t)t * F, m->up + (size_t)t * 2 * F, F);
        linear(&L->w_down, m->gate, T, m->x, 1, m->xt); /* x += h Wd^T */
    }
    free(mb), free(gstart), free(gshared), free(gorder);
    if (rows == 0)
        return 0;
    /* final norm of the rows that want logits, then the output head */
    int r = 0;
    for (int s = 0, t = 0; s < n_seqs; s++) {
        int n = seqs[s].n_new;
        if (seqs[s].logits == ENG_LOGITS_ALL) {
            memcpy(m->sel + (size_t)r * D, m->x + (size_t)t * D, sizeof(float) * D * n);
            r += n;
        } else if (seqs[s].logits == ENG_LOGITS_LAST) {
            memcpy(m->sel + (size_t)r * D, m->x + (size_t)(t + n - 1) * D, sizeof(float) * D);
            r++;
        }
        t += n;
    }
    rmsnorm(m->sel, m->sel, m->out_norm, rows, D, hp->rms_eps);
    linear(&m->output, m->sel, rows, logits, 0, m->xt);
    return 0;
}

/* ------------------------------------------------------------------ single ops */

void eng_cpu_rmsnorm(float *out, const float *x, const float *g, int t, int d, float eps)
{
    rmsnorm(out, x, g, t, d, eps);
}

void eng_cpu_rope(float *x, const int *pos, int t, int n_heads, int hd, int n_rot,
                  const float *inv)
{
    rope(x, pos, t, n_heads, hd, n_rot, inv);
}

void eng_cpu_swiglu(float *out, const float *gate_up, int t, int n_ff)
{
    for (int i = 0; i < t; i++)
        swiglu(out + (size_t)i * n_ff, gate_up + (size_t)i * 2 * n_ff, n_ff);
}

void eng_cpu_attention(const float *q, int n_new, int pos0, kvc_pool *kv, int layer,
                       const int32_t *table, int n_head, int n_kv, int hd, float *out)
{
    const struct kvc_shape *ks = kvc_shape(kv);
    if (ks->device_storage || ks->n_kv_head != n_kv || ks->head_dim != hd)
        return;
    const int group = n_head / n_kv;
    float *buf = malloc(sizeof(float) * attn_scratch_floats(pos0 + n_new, hd, group));
    if (!buf)
        return;
    for (int t0 = 0; t0 < n_new; t0 += ATT_TILE) {
        int t1 = t0 + ATT_TILE < n_new ? t0 + ATT_TILE : n_new;
        for (int g = 0; g < n_kv; g++)
            attend_tile(q, pos0, t0, t1, kv, layer, table, g, group, 1.0f / sqrtf((float)hd),
                        buf, out);
    }
    free(buf);
}
