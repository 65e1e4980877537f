/*
 * The model: reads a sentence-transformers directory, checks every tensor's shape
 * against config.json, converts F16 weights to F32, and runs batches through a
 * backend.
 */
#include "embedder.h"

#include "emb_impl.h"
#include "safetensors.h"
#include "wordpiece.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct emb_model {
    struct emb_config cfg;
    struct emb_weights w;
    emb_st_file *st;
    emb_wp *wp;
    int max_tokens;
    float **owned; /* converted weights */
    int nowned;
    const struct emb_backend_i *be;
    void *be_ctx;
    int threads;                        /* as the options asked, for cpu_be */
    const struct emb_backend_i *cpu_be; /* emb_token_states() on a backend without them */
    void *cpu_ctx;
    int32_t *ids; /* scratch for emb_encode */
    int *off;
    int cap_ids, cap_seqs;
};

static emb_log_fn log_fn;
static void *log_ud;

void emb_set_log(emb_log_fn fn, void *ud)
{
    log_fn = fn;
    log_ud = ud;
}

static void logf_(int level, const char *fmt, ...)
{
    if (!log_fn)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(log_ud, level, buf);
}

const char *emb_strerror(int rc)
{
    switch (rc) {
    case EMB_OK: return "success";
    case EMB_EINVAL: return "invalid argument";
    case EMB_ENOMEM: return "out of memory";
    case EMB_EIO: return "cannot read a model file";
    case EMB_EFORMAT: return "malformed or unsupported model file";
    case EMB_EDEVICE: return "device unavailable";
    }
    return "unknown error";
}

static json_t *load_json(const char *dir, const char *name, int required, char *err,
                         size_t errlen, int *rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!required && access(path, F_OK) != 0)
        return NULL;
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        if (je.line > 0)
            snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
        else /* (not read at all: a missing or unreadable file) */
            snprintf(err, errlen, "%s: %s", path, je.text);
        *rc = access(path, R_OK) == 0 ? EMB_EFORMAT : EMB_EIO;
    } else if (!json_is_object(j)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        json_decref(j);
        j = NULL;
        *rc = EMB_EFORMAT;
    }
    return j;
}

/* A positive integer field of config.json. */
static int cfg_int(json_t *cfg, const char *key, int *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(cfg, key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > (1 << 24)) {
        snprintf(err, errlen, "config.json: '%s' missing or not a positive integer", key);
        return EMB_EFORMAT;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, f;
    if (exp == 0) {
        if (man == 0) {
            f = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            f = sign | exp << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        f = sign | 0x7f800000u | man << 13;
    } else {
        f = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float r;
    memcpy(&r, &f, sizeof r);
    return r;
}

/* Finds a tensor with the expected shape and returns its data as F32. */
static int tensor(emb_model *m, const char *prefix, const char *name, int64_t d0, int64_t d1,
                  const float **out, char *err, size_t errlen)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const struct emb_st_tensor *t = emb_st_find(m->st, full);
    if (!t) {
        snprintf(err, errlen, "model.safetensors: tensor '%s' missing", full);
        return EMB_EFORMAT;
    }
    int ok = d1 ? (t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1)
                : (t->ndim == 1 && t->shape[0] == d0);
    if (!ok) {
        snprintf(err, errlen, "model.safetensors: tensor '%s' has shape [%lld%s%lld], want [%lld%s%lld]",
                 full, (long long)t->shape[0], t->ndim > 1 ? "," : "",
                 t->ndim > 1 ? (long long)t->shape[1] : 0LL, (long long)d0, d1 ? "," : "",
                 (long long)d1);
        return EMB_EFORMAT;
    }
    if (t->dtype == EMB_ST_F32 && ((uintptr_t)t->data & 3) == 0) {
        *out = t->data;
        return 0;
    }
    if (t->dtype != EMB_ST_F32 && t->dtype != EMB_ST_F16 && t->dtype != EMB_ST_BF16) {
        snprintf(err, errlen, "model.safetensors: tensor '%s' is not F32, F16 or BF16", full);
        return EMB_EFORMAT;
    }
    float *f = malloc(sizeof(float) * (size_t)t->numel);
    float **owned = realloc(m->owned, sizeof(float *) * (size_t)(m->nowned + 1));
    if (!f || !owned) {
        free(f);
        if (owned)
            m->owned = owned;
        return EMB_ENOMEM;
    }
    m->owned = owned;
    m->owned[m->nowned++] = f;
    const uint8_t *src = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->dtype == EMB_ST_F32) {
            memcpy(&f[i], src + 4 * i, 4);
        } else {
            uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
            if (t->dtype == EMB_ST_F16) {
                f[i] = half_to_float(h);
            } else {
                uint32_t u = (uint32_t)h << 16;
                memcpy(&f[i], &u, 4);
            }
        }
    }
    *out = f;
    return 0;
}

/* Query, key and value weights side by side, so one GEMM projects all three. */
static int fuse_qkv(emb_model *m, const float *const parts[3], const float *const biases[3],
                    struct emb_layer *ly)
{
    size_t H = (size_t)m->cfg.hidden;
    float *w = malloc(sizeof(float) * 3 * H * H), *b = malloc(sizeof(float) * 3 * H);
    float **owned = realloc(m->owned, sizeof(float *) * (size_t)(m->nowned + 2));
    if (!w || !b || !owned) {
        free(w);
        free(b);
        if (owned)
            m->owned = owned;
        return EMB_ENOMEM;
    }
    m->owned = owned;
    m->owned[m->nowned++] = w;
    m->owned[m->nowned++] = b;
    for (int i = 0; i < 3; i++) {
        memcpy(w + i * H * H, parts[i], sizeof(float) * H * H);
        memcpy(b + i * H, biases[i], sizeof(float) * H);
    }
    ly->wqkv = w;
    ly->bqkv = b;
    return 0;
}

static int load_weights(emb_model *m, char *err, size_t errlen)
{
    const struct emb_config *c = &m->cfg;
    const char *pre = emb_st_find(m->st, "bert.embeddings.word_embeddings.weight") ? "bert." : "";
    int rc;
#define T(name, d0, d1, dst)                                                                   \
    do {                                                                                       \
        if ((rc = tensor(m, pre, name, d0, d1, dst, err, errlen)))                             \
            return rc;                                                                         \
    } while (0)
    T("embeddings.word_embeddings.weight", c->vocab, c->hidden, &m->w.word);
    T("embeddings.position_embeddings.weight", c->max_pos, c->hidden, &m->w.pos);
    T("embeddings.token_type_embeddings.weight", c->types, c->hidden, &m->w.type);
    T("embeddings.LayerNorm.weight", c->hidden, 0, &m->w.ln_g);
    T("embeddings.LayerNorm.bias", c->hidden, 0, &m->w.ln_b);
    m->w.layer = calloc((size_t)c->layers, sizeof *m->w.layer);
    if (!m->w.layer)
        return EMB_ENOMEM;
    for (int L = 0; L < c->layers; L++) {
        struct emb_layer *ly = &m->w.layer[L];
        char n[128];
        const float *wq, *wk, *wv, *bq, *bk, *bv;
#define LT(suffix, d0, d1, dst)                                                                \
    do {                                                                                       \
        snprintf(n, sizeof n, "encoder.layer.%d.%s", L, suffix);                               \
        T(n, d0, d1, dst);                                                                     \
    } while (0)
        LT("attention.self.query.weight", c->hidden, c->hidden, &wq);
        LT("attention.self.query.bias", c->hidden, 0, &bq);
        LT("attention.self.key.weight", c->hidden, c->hidden, &wk);
        LT("attention.self.key.bias", c->hidden, 0, &bk);
        LT("attention.self.value.weight", c->hidden, c->hidden, &wv);
        LT("attention.self.value.bias", c->hidden, 0, &bv);
        LT("attention.output.dense.weight", c->hidden, c->hidden, &ly->wo);
        LT("attention.output.dense.bias", c->hidden, 0, &ly->bo);
        LT("attention.output.LayerNorm.weight", c->hidden, 0, &ly->ln1_g);
        LT("attention.output.LayerNorm.bias", c->hidden, 0, &ly->ln1_b);
        LT("intermediate.dense.weight", c->inter, c->hidden, &ly->w1);
        LT("intermediate.dense.bias", c->inter, 0, &ly->b1);
        LT("output.dense.weight", c->hidden, c->inter, &ly->w2);
        LT("output.dense.bias", c->hidden, 0, &ly->b2);
        LT("output.LayerNorm.weight", c->hidden, 0, &ly->ln2_g);
        LT("output.LayerNorm.bias", c->hidden, 0, &ly->ln2_b);
#undef LT
        const float *const parts[3] = {wq, wk, wv}, *const biases[3] = {bq, bk, bv};
        if ((rc = fuse_qkv(m, parts, biases, ly)))
            return rc;
    }
#undef T
    return 0;
}

static int read_config(emb_model *m, const char *dir, struct emb_wp_options *wpo, char *err,
                       size_t errlen)
{
    int rc = EMB_EFORMAT;
    json_t *cfg = load_json(dir, "config.json", 1, err, errlen, &rc);
    json_t *tok = NULL, *st = NULL, *pool = NULL;
    if (!cfg)
        goto out;
    struct emb_config *c = &m->cfg;
    if ((rc = cfg_int(cfg, "vocab_size", &c->vocab, err, errlen)) ||
        (rc = cfg_int(cfg, "hidden_size", &c->hidden, err, errlen)) ||
        (rc = cfg_int(cfg, "num_hidden_layers", &c->layers, err, errlen)) ||
        (rc = cfg_int(cfg, "num_attention_heads", &c->heads, err, errlen)) ||
        (rc = cfg_int(cfg, "intermediate_size", &c->inter, err, errlen)) ||
        (rc = cfg_int(cfg, "max_position_embeddings", &c->max_pos, err, errlen)) ||
        (rc = cfg_int(cfg, "type_vocab_size", &c->types, err, errlen)))
        goto out;
    rc = EMB_EFORMAT;
    if (c->hidden % c->heads) {
        snprintf(err, errlen, "config.json: hidden_size is not a multiple of the heads");
        goto out;
    }
    json_t *eps = json_object_get(cfg, "layer_norm_eps");
    c->ln_eps = json_is_number(eps) ? (float)json_number_value(eps) : 1e-12f;
    const char *act = json_string_value(json_object_get(cfg, "hidden_act"));
    if (act && strcmp(act, "gelu") != 0) {
        snprintf(err, errlen, "config.json: hidden_act '%s' is not supported (gelu is)", act);
        goto out;
    }
    const char *pet = json_string_value(json_object_get(cfg, "position_embedding_type"));
    if (pet && strcmp(pet, "absolute") != 0) {
        snprintf(err, errlen, "config.json: position_embedding_type '%s' is not supported", pet);
        goto out;
    }

    /* tokenizer: BERT's defaults unless tokenizer_config.json says otherwise */
    wpo->lowercase = 1;
    wpo->chinese_chars = 1;
    wpo->max_chars = 100;
    int jrc = 0; /* optional files: absent is fine, malformed is not */
    if (!(tok = load_json(dir, "tokenizer_config.json", 0, err, errlen, &jrc)) && jrc) {
        rc = jrc;
        goto out;
    }
    json_t *v;
    if (tok) {
        if (json_is_boolean(v = json_object_get(tok, "do_lower_case")))
            wpo->lowercase = json_is_true(v);
        if (json_is_boolean(v = json_object_get(tok, "tokenize_chinese_chars")))
            wpo->chinese_chars = json_is_true(v);
    }
    /* strip_accents: null or absent follows lower-casing, as BERT does */
    v = tok ? json_object_get(tok, "strip_accents") : NULL;
    wpo->strip_accents = json_is_boolean(v) ? json_is_true(v) : wpo->lowercase;

    m->max_tokens = c->max_pos;
    st = load_json(dir, "sentence_bert_config.json", 0, err, errlen, &jrc);
    pool = jrc ? NULL : load_json(dir, "1_Pooling/config.json", 0, err, errlen, &jrc);
    if (jrc) {
        rc = jrc;
        goto out;
    }
    if (st) {
        v = json_object_get(st, "max_seq_length");
        if (json_is_integer(v) && json_integer_value(v) >= 2 &&
            json_integer_value(v) < m->max_tokens)
            m->max_tokens = (int)json_integer_value(v);
        if (json_is_true(json_object_get(st, "do_lower_case")))
            wpo->lowercase = 1;
    }
    if (pool) {
        if (!json_is_true(json_object_get(pool, "pooling_mode_mean_tokens"))) {
            snprintf(err, errlen, "1_Pooling/config.json: only mean pooling is supported");
            rc = EMB_EFORMAT;
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(cfg);
    json_decref(tok);
    json_decref(st);
    json_decref(pool);
    return rc;
}

void emb_model_destroy(emb_model *m)
{
    if (!m)
        return;
    if (m->be)
        m->be->destroy(m->be_ctx);
    if (m->cpu_be)
        m->cpu_be->destroy(m->cpu_ctx);
    for (int i = 0; i < m->nowned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->w.layer);
    emb_st_close(m->st);
    emb_wp_destroy(m->wp);
    free(m->ids);
    free(m->off);
    free(m);
}

int emb_model_load(const char *dir, const struct emb_options *opt, emb_model **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    emb_model *m = calloc(1, sizeof *m);
    if (!m)
        return EMB_ENOMEM;
    struct emb_wp_options wpo;
    char path[4096], msg[512];
    int rc = read_config(m, dir, &wpo, err, errlen);
    if (rc)
        goto fail;
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    if ((rc = emb_wp_create(path, &wpo, &m->wp, err, errlen)))
        goto fail;
    if (emb_wp_vocab_size(m->wp) != m->cfg.vocab) {
        snprintf(err, errlen, "%s: %d tokens, config.json says %d", path,
                 emb_wp_vocab_size(m->wp), m->cfg.vocab);
        rc = EMB_EFORMAT;
        goto fail;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if ((rc = emb_st_open(path, &m->st, err, errlen)))
        goto fail;
    if ((rc = load_weights(m, msg, sizeof msg))) {
        snprintf(err, errlen, "%s/%s", dir, msg);
        goto fail;
    }
    m->threads = opt ? opt->threads : 0;
    if (opt && opt->gpu) {
        char why[256] = "";
        if ((rc = opt->gpu(&m->cfg, &m->w, &m->be, &m->be_ctx, why, sizeof why))) {
            m->be = NULL;
            snprintf(err, errlen, "creating the GPU backend: %s", why[0] ? why : emb_strerror(rc));
            goto fail;
        }
    } else if ((rc = emb_backend_cpu_create(&m->cfg, &m->w, opt ? opt->threads : 0, &m->be,
                                            &m->be_ctx))) {
        snprintf(err, errlen, "creating the CPU backend: %s", emb_strerror(rc));
        goto fail;
    }
    logf_(EMB_LOG_INFO, "embedder: %s, %d layers, %d dims, max %d tokens, backend %s", dir,
          m->cfg.layers, m->cfg.hidden, m->max_tokens, m->be->name);
    *out = m;
    return 0;
fail:
    emb_model_destroy(m);
    return rc;
}

int emb_dim(const emb_model *m)
{
    return m->cfg.hidden;
}

int emb_max_tokens(const emb_model *m)
{
    return m->max_tokens;
}

int emb_tokenize(const emb_model *m, const char *text, size_t len, int32_t *ids, int *n)
{
    int r = emb_wp_encode(m->wp, text, len, ids, m->max_tokens);
    if (r < 0)
        return r;
    *n = r;
    return 0;
}

int emb_tokenize_whole(const emb_model *m, const char *text, size_t len, int32_t *ids, int *n,
                       int *cut)
{
    /* room for one more: a text that fills it does not fit */
    int r = emb_wp_encode(m->wp, text, len, ids, m->max_tokens + 1);
    if (r < 0)
        return r;
    *n = r;
    *cut = r > m->max_tokens;
    return 0;
}

int emb_encode(emb_model *m, const char *const *texts, const size_t *lens, int n, float *out,
               int *ntokens)
{
    return emb_encode_ends(m, texts, lens, NULL, n, out, ntokens, NULL);
}

void emb_mean_pool(const float *x, const struct emb_batch *b, int hidden, float *out)
{
    const int H = hidden;
    for (int s = 0; s < b->n; s++) {
        int o = b->off[s], l = b->off[s + 1] - o;
        float *e = out + (size_t)s * H;
        for (int j = 0; j < H; j++) {
            double acc = 0;
            for (int t = 0; t < l; t++)
                acc += x[(size_t)(o + t) * H + j];
            e[j] = (float)(acc / l);
        }
        double norm = 0;
        for (int j = 0; j < H; j++)
            norm += (double)e[j] * e[j];
        float inv = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (int j = 0; j < H; j++)
            e[j] *= inv;
    }
}

int emb_encode_ends(emb_model *m, const char *const *texts, const size_t *lens,
                    const unsigned char *ends, int n, float *out, int *ntokens,
                    unsigned char *cut)
{
    return emb_encode_keep(m, texts, lens, ends, n, out, ntokens, cut, NULL);
}

/* The pass of batch b with keep's states (the CPU backend's states call; the last layer,
 * among them, pooled as the forward pooling does), when keep wants them and they fit. */
static int keep_pass(emb_model *m, const struct emb_batch *b, float *out, struct emb_keep *keep)
{
    const int T = b->off[b->n], H = m->cfg.hidden;
    int last = -1;
    for (int i = 0; i < keep->nlayers; i++)
        if (keep->layers[i] == m->cfg.layers)
            last = i;
    if (last < 0)
        return EMB_EINVAL;
    if (!m->be->states || T > keep->cap)
        return m->be->forward(m->be_ctx, b, out);
    int rc = m->be->states(m->be_ctx, b, keep->nlayers, keep->layers, keep->states);
    if (rc)
        return rc;
    emb_mean_pool(keep->states + (size_t)last * T * H, b, H, out);
    memcpy(keep->ids, b->ids, sizeof *keep->ids * (size_t)T);
    memcpy(keep->off, b->off, sizeof *keep->off * (size_t)(b->n + 1));
    keep->n = b->n;
    keep->kept = 1;
    return 0;
}

int emb_encode_keep(emb_model *m, const char *const *texts, const size_t *lens,
                    const unsigned char *ends, int n, float *out, int *ntokens,
                    unsigned char *cut, struct emb_keep *keep)
{
    if (keep)
        keep->kept = 0;
    if (n <= 0)
        return EMB_EINVAL;
    /* one id more than the texts keep: the last text's piece past the limit, read to
     * tell a text that fits from one that does not */
    size_t need = (size_t)n * (size_t)m->max_tokens + 1;
    if (need > (size_t)m->cap_ids) {
        int32_t *ids = realloc(m->ids, need * sizeof *ids);
        if (!ids)
            return EMB_ENOMEM;
        m->ids = ids;
        m->cap_ids = (int)need;
    }
    if (n + 1 > m->cap_seqs) {
        int *off = realloc(m->off, (size_t)(n + 1) * sizeof *off);
        if (!off)
            return EMB_ENOMEM;
        m->off = off;
        m->cap_seqs = n + 1;
    }
    m->off[0] = 0;
    for (int i = 0; i < n; i++) {
        int32_t *ids = m->ids + m->off[i];
        int r, over = 0;
        if (ends && ends[i])
            r = emb_wp_encode_ends(m->wp, texts[i], lens[i], ids, m->max_tokens);
        else {
            /* a piece more than fits, then cut back to what emb_wp_encode() gives at the
             * limit: [CLS], the first pieces, [SEP] */
            r = emb_wp_encode(m->wp, texts[i], lens[i], ids, m->max_tokens + 1);
            if (r > m->max_tokens) {
                ids[m->max_tokens - 1] = ids[r - 1];
                r = m->max_tokens;
                over = 1;
            }
        }
        if (r < 0)
            return r;
        if (cut)
            cut[i] = (unsigned char)over;
        m->off[i + 1] = m->off[i] + r;
        if (ntokens)
            ntokens[i] = r;
    }
    struct emb_batch b = {n, m->ids, m->off};
    int rc = keep ? keep_pass(m, &b, out, keep) : m->be->forward(m->be_ctx, &b, out);
    if (rc == EMB_EDEVICE && m->be->last_error)
        logf_(EMB_LOG_ERROR, "embedder %s backend: %s", m->be->name, m->be->last_error(m->be_ctx));
    return rc;
}

int emb_layers(const emb_model *m)
{
    return m->cfg.layers;
}

int emb_token_is_word(const emb_model *m, int32_t id)
{
    return emb_wp_is_word(m->wp, id) == 1;
}

int emb_token_states(emb_model *m, const char *const *texts, const size_t *lens, int n,
                     int nlayers, const int *layers, float *out, int32_t *ids, int *off)
{
    if (n <= 0 || nlayers <= 0 || !layers || !out || !off)
        return EMB_EINVAL;
    int32_t *own = ids ? NULL : malloc(sizeof *own * (size_t)n * (size_t)m->max_tokens);
    int32_t *t = ids ? ids : own;
    if (!t)
        return EMB_ENOMEM;
    int rc = 0;
    off[0] = 0;
    for (int i = 0; !rc && i < n; i++) {
        int r = emb_wp_encode_ends(m->wp, texts[i], lens[i], t + off[i], m->max_tokens);
        rc = r < 0 ? r : 0;
        off[i + 1] = off[i] + (r < 0 ? 0 : r);
    }
    const struct emb_backend_i *be = m->be;
    void *ctx = m->be_ctx;
    if (!rc && !be->states) { /* a GPU backend: the host weights are still here */
        if (!m->cpu_be)
            rc = emb_backend_cpu_create(&m->cfg, &m->w, m->threads, &m->cpu_be, &m->cpu_ctx);
        be = m->cpu_be;
        ctx = m->cpu_ctx;
    }
    if (!rc) {
        struct emb_batch b = {n, t, off};
        rc = be->states(ctx, &b, nlayers, layers, out);
    }
    free(own);
    return rc;
}

void emb_model_internals(const emb_model *m, const struct emb_config **cfg,
                         const struct emb_weights **w)
{
    *cfg = &m->cfg;
    *w = &m->w;
}
