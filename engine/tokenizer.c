/*
 * tokenizer.c — see tokenizer.h.
 *
 * Metadata read from the GGUF file (tokenizer.ggml.*):
 *
 *     model               string   "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
 *     pre                 string   pre-tokenizer name ("gpt2" model; absent: "gpt2")
 *     tokens              [string] the vocabulary; the id is the index
 *     token_type          [i32]    enum tok_type per token (absent: all normal)
 *     scores              [f32]    merge priority per token ("llama" model)
 *     merges              [string] "left right", rank = index ("gpt2" model)
 *     bos_token_id, eos_token_id, eot_token_id, eom_token_id, unknown_token_id,
 *     padding_token_id    u32      optional
 *     add_bos_token, add_space_prefix  bool  optional
 *
 * Both models merge with the same machinery: a word is a doubly linked list of symbols
 * (byte ranges of the word, each with its token id) and a binary heap of candidate merges
 * of adjacent symbols, best first, ties to the leftmost. A candidate records the byte
 * lengths of its two symbols; since a symbol's start never moves, equal lengths mean equal
 * contents, so a candidate made stale by an earlier merge is recognised when popped and
 * dropped. Each merge pushes at most two candidates, so a word of n symbols costs
 * O(n log n) and never holds more than 3n candidates.
 */
#include "tokenizer.h"

#include "eng_impl.h"
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#define MAX_TEXT ((size_t)256 << 20) /* tok_encode's limit, keeps every count in an int */
#define MAX_VOCAB (1 << 24)
#define N_STAND_IN 324 /* GPT-2's byte stand-ins are code points below this */

enum { MODEL_BPE, MODEL_SPM };
enum { PRE_GPT2, PRE_SMOLLM, PRE_LLAMA3, PRE_QWEN2 };

/* the character classes the pre-tokenizers' regexes tell apart: \p{L}, \p{N}, \s, rest */
enum { K_LETTER, K_NUMBER, K_SPACE, K_OTHER };

enum { F_EOG = 1, F_SPECIAL = 2 };

struct entry {
    uint32_t text, text_len;   /* into tok_vocab.text */
    uint32_t piece, piece_len; /* into tok_vocab.pieces */
    float score;
    uint8_t type, flags;
};

/* pair = left id << 32 | right id; EMPTY_PAIR marks a free slot */
struct merge {
    uint64_t pair;
    int32_t rank, id;
};
#define EMPTY_PAIR UINT64_MAX

struct tok_vocab {
    int model, pre, n;
    int add_bos, add_space_prefix;
    int ignore_merges; /* a word found whole in the vocabulary skips merging (Llama 3) */
    int32_t bos, eos, eot, eom, unk, pad;
    struct entry *tok; /* [n] */
    char *text;        /* every token's string, back to back */
    char *pieces;      /* every token's decoded bytes, back to back */
    size_t max_piece;
    uint32_t *by_text; /* open addressing, id + 1 per slot, 0 free; [text_mask + 1] */
    size_t text_mask;
    struct merge *merges; /* open addressing; [merge_mask + 1]; NULL for SPM */
    size_t merge_mask;
    int32_t byte_tok[256];   /* BPE: the token of each byte's stand-in; SPM: <0xXX>; -1 */
    int32_t *special;        /* matchable ids, by first byte, longest first */
    int32_t special_at[257]; /* special[special_at[b] .. special_at[b + 1]) start with b */
};

static int failf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int failf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

/* ---- the vocabulary's string map ---------------------------------------------------- */

static int32_t find_text(const tok_vocab *v, const char *s, size_t len)
{
    size_t h = (size_t)XXH3_64bits(s, len) & v->text_mask;
    for (;; h = (h + 1) & v->text_mask) {
        uint32_t slot = v->by_text[h];
        if (!slot) return -1;
        const struct entry *e = &v->tok[slot - 1];
        if (e->text_len == len && !memcmp(v->text + e->text, s, len)) return (int32_t)(slot - 1);
    }
}

/* A later duplicate replaces an earlier one, as in llama.cpp and tokenizers. */
static void insert_text(tok_vocab *v, int32_t id)
{
    const struct entry *e = &v->tok[id];
    const char *s = v->text + e->text;
    size_t h = (size_t)XXH3_64bits(s, e->text_len) & v->text_mask;
    for (;; h = (h + 1) & v->text_mask) {
        uint32_t slot = v->by_text[h];
        if (slot) {
            const struct entry *o = &v->tok[slot - 1];
            if (o->text_len != e->text_len || memcmp(v->text + o->text, s, e->text_len)) continue;
        }
        v->by_text[h] = (uint32_t)id + 1;
        return;
    }
}

/* ---- the merge map ------------------------------------------------------------------ */

static uint64_t pair_of(int32_t l, int32_t r)
{
    return (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
}

/* splitmix64's finalizer: the merge lookup is the encoder's inner loop, too hot for a call
 * into a hashing library for 8 bytes */
static size_t pair_hash(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return (size_t)(x ^ (x >> 31));
}

static const struct merge *find_merge(const tok_vocab *v, int32_t l, int32_t r)
{
    uint64_t key = pair_of(l, r);
    size_t h = pair_hash(key) & v->merge_mask;
    for (;; h = (h + 1) & v->merge_mask) {
        const struct merge *m = &v->merges[h];
        if (m->pair == key) return m;
        if (m->pair == EMPTY_PAIR) return NULL;
    }
}

/* The first (lowest-ranked) of duplicate merges wins, as in llama.cpp. */
static void insert_merge(tok_vocab *v, int32_t l, int32_t r, int32_t rank, int32_t id)
{
    uint64_t key = pair_of(l, r);
    size_t h = pair_hash(key) & v->merge_mask;
    for (;; h = (h + 1) & v->merge_mask) {
        struct merge *m = &v->merges[h];
        if (m->pair == key) return;
        if (m->pair == EMPTY_PAIR) {
            *m = (struct merge){key, rank, id};
            return;
        }
    }
}

/* ---- reading the metadata ----------------------------------------------------------- */

static int read_model(tok_vocab *v, const gguf_file *f, char *err, size_t errlen)
{
    struct gguf_str s;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &s);
    if (rc)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.model: %s",
                     rc == ENG_EINVAL ? "missing" : "not a string");
    if (s.len == 4 && !memcmp(s.p, "gpt2", 4))
        v->model = MODEL_BPE;
    else if (s.len == 5 && !memcmp(s.p, "llama", 5))
        v->model = MODEL_SPM;
    else
        return failf(err, errlen, ENG_ENOTSUP,
                     "tokenizer.ggml.model: '%.*s' is not supported (gpt2, llama)",
                     (int)(s.len < 64 ? s.len : 64), s.p);
    return 0;
}

static int read_tokens(tok_vocab *v, const gguf_file *f, char *err, size_t errlen)
{
    const struct gguf_kv *kv;
    int rc = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &kv);
    if (rc)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.tokens: %s",
                     rc == ENG_EINVAL ? "missing" : "not an array of strings");
    if (kv->v.arr.n == 0 || kv->v.arr.n > MAX_VOCAB)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.tokens: %llu tokens",
                     (unsigned long long)kv->v.arr.n);
    v->n = (int)kv->v.arr.n;
    uint64_t total = 0;
    for (int i = 0; i < v->n; i++)
        total += kv->v.arr.strs[i].len;
    if (total > UINT32_MAX / 2)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.tokens: %llu bytes of text",
                     (unsigned long long)total);
    v->tok = calloc((size_t)v->n, sizeof *v->tok);
    v->text = malloc((size_t)total + 1);
    v->pieces = malloc((size_t)total + 1);
    v->text_mask = pow2_at_least((size_t)v->n * 2) - 1;
    v->by_text = calloc(v->text_mask + 1, sizeof *v->by_text);
    if (!v->tok || !v->text || !v->pieces || !v->by_text)
        return failf(err, errlen, ENG_ENOMEM, "out of memory");
    uint32_t at = 0;
    for (int i = 0; i < v->n; i++) {
        const struct gguf_str *s = &kv->v.arr.strs[i];
        memcpy(v->text + at, s->p, s->len);
        v->tok[i].text = at;
        v->tok[i].text_len = (uint32_t)s->len;
        v->tok[i].type = TOK_NORMAL;
        at += (uint32_t)s->len;
    }
    for (int i = 0; i < v->n; i++)
        insert_text(v, i);

    rc = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &kv);
    if (rc == ENG_EFORMAT || (!rc && kv->v.arr.n != (uint64_t)v->n))
        return failf(err, errlen, ENG_EFORMAT,
                     "tokenizer.ggml.token_type: not an i32 array of one value per token");
    for (int i = 0; !rc && i < v->n; i++) {
        int32_t t;
        memcpy(&t, (const char *)kv->v.arr.data + 4 * (size_t)i, 4);
        if (t < 0 || t > TOK_BYTE)
            return failf(err, errlen, ENG_EFORMAT,
                         "tokenizer.ggml.token_type: token %d has type %d", i, (int)t);
        v->tok[i].type = (uint8_t)(t ? t : TOK_NORMAL); /* 0: undefined */
    }

    rc = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_F32, &kv);
    if (rc == ENG_EFORMAT || (!rc && kv->v.arr.n != (uint64_t)v->n))
        return failf(err, errlen, ENG_EFORMAT,
                     "tokenizer.ggml.scores: not an f32 array of one value per token");
    if (rc && v->model == MODEL_SPM)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.scores: missing (llama model)");
    for (int i = 0; !rc && i < v->n; i++)
        memcpy(&v->tok[i].score, (const char *)kv->v.arr.data + 4 * (size_t)i, 4);
    return 0;
}

/* An optional token id: -1 when absent or negative. */
static int read_id(const tok_vocab *v, const gguf_file *f, const char *key, int32_t *out, char *err,
                   size_t errlen)
{
    *out = -1;
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    int64_t id;
    switch (kv->type) {
    case GGUF_U8:
    case GGUF_U16:
    case GGUF_U32:
    case GGUF_U64:
        id = kv->v.u > INT32_MAX ? INT32_MAX : (int64_t)kv->v.u;
        break;
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64:
        id = kv->v.i;
        break;
    default:
        return failf(err, errlen, ENG_EFORMAT, "%s: not an integer", key);
    }
    if (id < 0) return 0;
    if (id >= v->n)
        return failf(err, errlen, ENG_EFORMAT, "%s: %lld is not below the vocabulary size %d", key,
                     (long long)id, v->n);
    *out = (int32_t)id;
    return 0;
}

static int read_bool(const gguf_file *f, const char *key, int dflt, int *out, char *err,
                     size_t errlen)
{
    int rc = gguf_get_bool(f, key, out);
    if (rc == ENG_EINVAL)
        *out = dflt;
    else if (rc)
        return failf(err, errlen, ENG_EFORMAT, "%s: not a bool", key);
    return 0;
}

static int read_options(tok_vocab *v, const gguf_file *f, char *err, size_t errlen)
{
    int rc;
    if ((rc = read_id(v, f, "tokenizer.ggml.bos_token_id", &v->bos, err, errlen)) ||
        (rc = read_id(v, f, "tokenizer.ggml.eos_token_id", &v->eos, err, errlen)) ||
        (rc = read_id(v, f, "tokenizer.ggml.eot_token_id", &v->eot, err, errlen)) ||
        (rc = read_id(v, f, "tokenizer.ggml.eom_token_id", &v->eom, err, errlen)) ||
        (rc = read_id(v, f, "tokenizer.ggml.unknown_token_id", &v->unk, err, errlen)) ||
        (rc = read_id(v, f, "tokenizer.ggml.padding_token_id", &v->pad, err, errlen)))
        return rc;
    /* defaults as llama.cpp's: SentencePiece models want BOS and the space prefix */
    int spm = v->model == MODEL_SPM;
    if ((rc = read_bool(f, "tokenizer.ggml.add_bos_token", spm, &v->add_bos, err, errlen)) ||
        (rc = read_bool(f, "tokenizer.ggml.add_space_prefix", spm, &v->add_space_prefix, err,
                        errlen)))
        return rc;
    return 0;
}

/* ---- byte-level BPE setup ----------------------------------------------------------- */

static const struct {
    const char *name;
    int pre;
} pre_names[] = {
    {"gpt2", PRE_GPT2},
    {"mpt", PRE_GPT2},
    {"olmo", PRE_GPT2},
    {"jais", PRE_GPT2},
    {"smollm", PRE_SMOLLM},
    {"starcoder", PRE_SMOLLM},
    {"refact", PRE_SMOLLM},
    {"command-r", PRE_SMOLLM},
    {"codeshell", PRE_SMOLLM},
    {"exaone", PRE_SMOLLM},
    {"llama-bpe", PRE_LLAMA3},
    {"llama3", PRE_LLAMA3},
    {"llama-v3", PRE_LLAMA3},
    {"falcon3", PRE_LLAMA3},
    {"qwen2", PRE_QWEN2},
    {"stablelm2", PRE_QWEN2},
    {"deepseek-r1-qwen", PRE_QWEN2},
    {"megrez", PRE_QWEN2},
};

/* GPT-2 spells each byte as a printable code point: the printable Latin-1 bytes stand for
 * themselves, the other 68 take 256, 257, ... in byte order. */
static void stand_ins(uint32_t cp[256])
{
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        cp[b] = printable ? (uint32_t)b : next++;
    }
}

static int setup_bpe(tok_vocab *v, const gguf_file *f, char *err, size_t errlen)
{
    struct gguf_str s;
    int rc = gguf_get_str(f, "tokenizer.ggml.pre", &s);
    if (rc == ENG_EFORMAT)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.pre: not a string");
    v->pre = PRE_GPT2;
    if (rc) {
        eng_log(ENG_LOG_WARN, "tokenizer.ggml.pre is missing; using the GPT-2 pre-tokenizer");
    } else {
        size_t i, n = sizeof pre_names / sizeof pre_names[0];
        for (i = 0; i < n; i++)
            if (strlen(pre_names[i].name) == s.len && !memcmp(pre_names[i].name, s.p, s.len)) break;
        if (i == n)
            return failf(err, errlen, ENG_ENOTSUP,
                         "tokenizer.ggml.pre: pre-tokenizer '%.*s' is not supported",
                         (int)(s.len < 64 ? s.len : 64), s.p);
        v->pre = pre_names[i].pre;
    }
    v->ignore_merges = v->pre == PRE_LLAMA3;

    uint32_t cp[256];
    stand_ins(cp);
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)cp[b], u);
        v->byte_tok[b] = find_text(v, (const char *)u, (size_t)n);
    }

    const struct gguf_kv *kv;
    rc = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STRING, &kv);
    if (rc)
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.merges: %s",
                     rc == ENG_EINVAL ? "missing (gpt2 model)" : "not an array of strings");
    if (kv->v.arr.n > MAX_VOCAB) /* ranks stay exact as float heap keys */
        return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.merges: %llu merges",
                     (unsigned long long)kv->v.arr.n);
    int n = (int)kv->v.arr.n, skipped = 0;
    size_t longest = 0;
    for (int i = 0; i < n; i++)
        if (kv->v.arr.strs[i].len > longest) longest = kv->v.arr.strs[i].len;
    v->merge_mask = pow2_at_least((size_t)n * 2) - 1;
    v->merges = malloc((v->merge_mask + 1) * sizeof *v->merges);
    char *joined = malloc(longest + 1);
    if (!v->merges || !joined) {
        free(joined);
        return failf(err, errlen, ENG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i <= v->merge_mask; i++)
        v->merges[i].pair = EMPTY_PAIR;
    for (int i = 0; i < n; i++) {
        const struct gguf_str *m = &kv->v.arr.strs[i];
        /* the left part may itself be a space in some vocabularies: look from 1 */
        const char *sp = m->len > 1 ? memchr(m->p + 1, ' ', m->len - 1) : NULL;
        if (!sp) {
            free(joined);
            return failf(err, errlen, ENG_EFORMAT, "tokenizer.ggml.merges: merge %d has no space",
                         i);
        }
        size_t ll = (size_t)(sp - m->p), rl = m->len - ll - 1;
        memcpy(joined, m->p, ll);
        memcpy(joined + ll, sp + 1, rl);
        int32_t l = find_text(v, m->p, ll), r = find_text(v, sp + 1, rl);
        int32_t id = find_text(v, joined, ll + rl);
        if (l < 0 || r < 0 || id < 0) {
            skipped++;
            continue;
        }
        insert_merge(v, l, r, i, id);
    }
    free(joined);
    if (skipped)
        eng_log(ENG_LOG_WARN, "tokenizer: %d of %d merges name tokens not in the vocabulary",
                skipped, n);
    return 0;
}

/* ---- SentencePiece setup ------------------------------------------------------------ */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xXX>" token, or -1. */
static int byte_of(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi << 4 | lo;
}

static void setup_spm(tok_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        v->byte_tok[b] = find_text(v, s, 6);
    }
}

/* ---- pieces, special tokens, end of generation -------------------------------------- */

/* What each token decodes to. A piece is never longer than the token's string. */
static void build_pieces(tok_vocab *v)
{
    int16_t byte_of_cp[N_STAND_IN];
    if (v->model == MODEL_BPE) {
        uint32_t cp[256];
        stand_ins(cp);
        memset(byte_of_cp, 0xff, sizeof byte_of_cp);
        for (int b = 0; b < 256; b++)
            byte_of_cp[cp[b]] = (int16_t)b;
    }
    uint32_t at = 0;
    for (int i = 0; i < v->n; i++) {
        struct entry *e = &v->tok[i];
        const uint8_t *s = (const uint8_t *)v->text + e->text;
        uint8_t *o = (uint8_t *)v->pieces + at;
        size_t len = e->text_len, k = 0;
        int b;
        if (e->type == TOK_CONTROL || e->type == TOK_USER_DEFINED) {
            memcpy(o, s, len);
            k = len;
        } else if (v->model == MODEL_SPM && e->type == TOK_BYTE &&
                   (b = byte_of((const char *)s, len)) >= 0) {
            o[k++] = (uint8_t)b;
        } else if (v->model == MODEL_SPM) {
            for (size_t j = 0; j < len; j++) {
                if (j + 2 < len && s[j] == 0xe2 && s[j + 1] == 0x96 && s[j + 2] == 0x81) {
                    o[k++] = ' '; /* U+2581 */
                    j += 2;
                } else {
                    o[k++] = s[j];
                }
            }
        } else {
            for (size_t j = 0; j < len;) {
                utf8proc_int32_t c;
                utf8proc_ssize_t r = utf8proc_iterate(s + j, (utf8proc_ssize_t)(len - j), &c);
                if (r > 0 && c < N_STAND_IN && byte_of_cp[c] >= 0) {
                    o[k++] = (uint8_t)byte_of_cp[c];
                    j += (size_t)r;
                } else { /* not a stand-in: keep the bytes */
                    size_t m = r > 0 ? (size_t)r : 1;
                    memcpy(o + k, s + j, m);
                    k += m;
                    j += m;
                }
            }
        }
        e->piece = at;
        e->piece_len = (uint32_t)k;
        at += (uint32_t)k;
        if (k > v->max_piece) v->max_piece = k;
    }
}

static int by_first_byte_longest(const void *a, const void *b, void *ctx)
{
    const tok_vocab *v = ctx;
    int32_t ia = *(const int32_t *)a, ib = *(const int32_t *)b;
    const struct entry *x = &v->tok[ia], *y = &v->tok[ib];
    uint8_t fx = (uint8_t)v->text[x->text], fy = (uint8_t)v->text[y->text];
    if (fx != fy) return fx < fy ? -1 : 1;
    if (x->text_len != y->text_len) return x->text_len > y->text_len ? -1 : 1;
    return ia < ib ? -1 : 1;
}

static int is_eog_name(const char *s, size_t len)
{
    static const char *const names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",   "<|endoftext|>",
        "<|eom_id|>", "<EOT>",      "_<EOT>",  "<|end_of_text|>", "<end_of_utterance>",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len)) return 1;
    return 0;
}

static int build_specials(tok_vocab *v)
{
    int n = 0;
    for (int i = 0; i < v->n; i++) {
        struct entry *e = &v->tok[i];
        int t = e->type;
        if ((t == TOK_CONTROL || t == TOK_USER_DEFINED || t == TOK_UNKNOWN) && e->text_len) {
            e->flags |= F_SPECIAL;
            n++;
        }
        if ((t == TOK_CONTROL || t == TOK_USER_DEFINED) &&
            is_eog_name(v->text + e->text, e->text_len))
            e->flags |= F_EOG;
    }
    int32_t eog[] = {v->eos, v->eot, v->eom};
    for (size_t i = 0; i < sizeof eog / sizeof eog[0]; i++)
        if (eog[i] >= 0) v->tok[eog[i]].flags |= F_EOG;

    v->special = malloc(sizeof *v->special * (size_t)(n ? n : 1));
    if (!v->special) return ENG_ENOMEM;
    n = 0;
    for (int i = 0; i < v->n; i++)
        if (v->tok[i].flags & F_SPECIAL) v->special[n++] = i;
    qsort_r(v->special, (size_t)n, sizeof *v->special, by_first_byte_longest, v);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < n && (uint8_t)v->text[v->tok[v->special[k]].text] < b)
            k++;
        v->special_at[b] = k;
    }
    return 0;
}

int tok_create(const gguf_file *f, tok_vocab **out, char *err, size_t errlen)
{
    *out = NULL;
    if (errlen) err[0] = '\0';
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return failf(err, errlen, ENG_ENOMEM, "out of memory");
    int rc;
    if ((rc = read_model(v, f, err, errlen)) || (rc = read_tokens(v, f, err, errlen)) ||
        (rc = read_options(v, f, err, errlen)))
        goto fail;
    if (v->model == MODEL_BPE && (rc = setup_bpe(v, f, err, errlen))) goto fail;
    if (v->model == MODEL_SPM) setup_spm(v);
    build_pieces(v);
    if ((rc = build_specials(v))) {
        failf(err, errlen, rc, "out of memory");
        goto fail;
    }
    *out = v;
    return 0;
fail:
    tok_destroy(v);
    return rc;
}

void tok_destroy(tok_vocab *v)
{
    if (!v) return;
    free(v->special);
    free(v->merges);
    free(v->by_text);
    free(v->pieces);
    free(v->text);
    free(v->tok);
    free(v);
}

/* ---- accessors ---------------------------------------------------------------------- */

int tok_n_vocab(const tok_vocab *v)
{
    return v->n;
}

int32_t tok_bos(const tok_vocab *v)
{
    return v->bos;
}

int32_t tok_eos(const tok_vocab *v)
{
    return v->eos;
}

int32_t tok_eot(const tok_vocab *v)
{
    return v->eot;
}

int32_t tok_unk(const tok_vocab *v)
{
    return v->unk;
}

int32_t tok_pad(const tok_vocab *v)
{
    return v->pad;
}

int tok_add_bos(const tok_vocab *v)
{
    return v->add_bos;
}

int tok_is_eog(const tok_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n && (v->tok[id].flags & F_EOG);
}

int tok_type(const tok_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n ? v->tok[id].type : 0;
}

const char *tok_text(const tok_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n) return NULL;
    *len = v->tok[id].text_len;
    return v->text + v->tok[id].text;
}

int tok_piece(const tok_vocab *v, int32_t id, const char **bytes, size_t *len)
{
    if (id < 0 || id >= v->n) return ENG_EINVAL;
    *bytes = v->pieces + v->tok[id].piece;
    *len = v->tok[id].piece_len;
    return 0;
}

int32_t tok_find(const tok_vocab *v, const char *s, size_t len)
{
    return find_text(v, s, len);
}

/* ---- encoding: scratch, output, the merge heap -------------------------------------- */

struct sym {
    int32_t start, len; /* bytes of the word; len 0 once merged into its left neighbour */
    int32_t prev, next; /* -1 at the ends */
    int32_t id;         /* -1: not a token (SPM falls back to bytes) */
};

struct cand {
    float key; /* lower first: BPE rank, or minus the SPM score */
    int32_t left, llen, rlen, id;
};

/* One tok_encode() call's state; the arrays grow to the longest word seen. */
struct work {
    const tok_vocab *v;
    int32_t *ids;
    int cap, n;
    struct sym *sym;
    size_t sym_cap;
    struct cand *heap;
    size_t heap_cap, heap_n;
    struct ch *ch;
    size_t ch_cap;
    uint8_t *buf; /* SPM: the escaped fragment; BPE: a word spelled in stand-ins */
    size_t buf_cap;
};

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return ENG_ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

/* Room for a word of n symbols and its at most 3n candidates. */
static int reserve_word(struct work *w, size_t n)
{
    if (reserve((void **)&w->sym, &w->sym_cap, n, sizeof *w->sym) ||
        reserve((void **)&w->heap, &w->heap_cap, 3 * n, sizeof *w->heap))
        return ENG_ENOMEM;
    return 0;
}

static void emit(struct work *w, int32_t id)
{
    if (w->n < w->cap) w->ids[w->n] = id;
    w->n++;
}

static int cand_before(const struct cand *a, const struct cand *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(struct work *w, float key, int32_t left, int32_t llen, int32_t rlen,
                      int32_t id)
{
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        const struct cand *p = &w->heap[up];
        if (!(key < p->key || (key == p->key && left < p->left))) break;
        w->heap[i] = *p;
        i = up;
    }
    struct cand *c = &w->heap[i];
    c->key = key;
    c->left = left;
    c->llen = llen;
    c->rlen = rlen;
    c->id = id;
}

static struct cand heap_pop(struct work *w)
{
    struct cand top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!cand_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    w->heap[i] = last;
    return top;
}

/* Pushes the merge of symbol l with its right neighbour, if there is one. */
static void push_pair(struct work *w, const uint8_t *word, int32_t l)
{
    const tok_vocab *v = w->v;
    if (l < 0) return;
    const struct sym *a = &w->sym[l];
    if (a->next < 0) return;
    const struct sym *b = &w->sym[a->next];
    if (v->model == MODEL_BPE) {
        if (a->id < 0 || b->id < 0) return;
        const struct merge *m = find_merge(v, a->id, b->id);
        if (m) heap_push(w, (float)m->rank, l, a->len, b->len, m->id);
    } else {
        /* symbols are contiguous: the pair's text is the word from a's start */
        int32_t id = find_text(v, (const char *)word + a->start, (size_t)(a->len + b->len));
        if (id >= 0 && v->tok[id].type == TOK_NORMAL)
            heap_push(w, -v->tok[id].score, l, a->len, b->len, id);
    }
}

/* Merges until no candidate is left; symbols [0, n) are linked in order. */
static void merge_all(struct work *w, const uint8_t *word)
{
    for (int32_t i = 0; w->sym[i].next >= 0; i = w->sym[i].next)
        push_pair(w, word, i);
    while (w->heap_n) {
        struct cand c = heap_pop(w);
        struct sym *a = &w->sym[c.left];
        if (a->len != c.llen || a->next < 0) continue;
        struct sym *b = &w->sym[a->next];
        if (b->len != c.rlen) continue;
        a->len += b->len;
        a->id = c.id;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0) w->sym[b->next].prev = c.left;
        push_pair(w, word, a->prev);
        push_pair(w, word, c.left);
    }
}

/* ---- byte-level BPE ----------------------------------------------------------------- */

static int bpe_word(struct work *w, const uint8_t *p, int n)
{
    const tok_vocab *v = w->v;
    if (n == 1 && v->byte_tok[p[0]] >= 0) {
        emit(w, v->byte_tok[p[0]]);
        return 0;
    }
    if (v->ignore_merges) {
        if (reserve((void **)&w->buf, &w->buf_cap, 2 * (size_t)n, 1)) return ENG_ENOMEM;
        size_t k = 0;
        int i;
        for (i = 0; i < n && v->byte_tok[p[i]] >= 0; i++) { /* a stand-in: 1 or 2 bytes */
            const struct entry *e = &v->tok[v->byte_tok[p[i]]];
            memcpy(w->buf + k, v->text + e->text, e->text_len);
            k += e->text_len;
        }
        int32_t id = i == n ? find_text(v, (const char *)w->buf, k) : -1;
        if (id >= 0 && v->tok[id].type == TOK_NORMAL) {
            emit(w, id);
            return 0;
        }
    }
    if (reserve_word(w, (size_t)n)) return ENG_ENOMEM;
    for (int i = 0; i < n; i++)
        w->sym[i] = (struct sym){i, 1, i - 1, i + 1 < n ? i + 1 : -1, v->byte_tok[p[i]]};
    w->heap_n = 0;
    merge_all(w, p);
    /* a byte whose stand-in the vocabulary lacks is dropped, as tokenizers and llama.cpp
     * drop it (the unknown token may well be a control token such as <|endoftext|>) */
    for (int32_t i = 0; i >= 0; i = w->sym[i].next)
        if (w->sym[i].id >= 0) emit(w, w->sym[i].id);
    return 0;
}

/* One character of a fragment, for the pre-tokenizers. */
struct ch {
    int32_t cp;  /* -1 for a byte that is not valid UTF-8 */
    int32_t off; /* byte offset in the fragment */
    int32_t k;   /* K_ class */
};

static int32_t klass(int32_t cp)
{
    if (cp < 0) return K_OTHER;
    if (cp < 128) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return K_LETTER;
        if (cp >= '0' && cp <= '9') return K_NUMBER;
        return cp == ' ' || (cp >= 9 && cp <= 13) ? K_SPACE : K_OTHER;
    }
    if (cp == 0x85) return K_SPACE;
    /* CJK Unified Ideographs Extension I (Unicode 15.1): letters to llama.cpp, whose
     * tables are 15.1; Debian's utf8proc 2.8 (Unicode 15.0) has them unassigned */
    if (cp >= 0x2EBF0 && cp <= 0x2EE5D) return K_LETTER;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return K_LETTER;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return K_NUMBER;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        return K_SPACE;
    default:
        return K_OTHER;
    }
}

/* Whether c[i] begins 's 't 're 've 'm 'll 'd (any case when fold); its length or 0. */
static int contraction(const struct ch *c, int i, int end, int fold)
{
    if (c[i].cp != '\'' || i + 1 >= end) return 0;
    int32_t x = c[i + 1].cp, y = i + 2 < end ? c[i + 2].cp : 0;
    if (fold) {
        x = x >= 'A' && x <= 'Z' ? x + 32 : x;
        y = y >= 'A' && y <= 'Z' ? y + 32 : y;
    }
    if (x == 's' || x == 't' || x == 'm' || x == 'd') return 2;
    if ((x == 'r' && y == 'e') || (x == 'v' && y == 'e') || (x == 'l' && y == 'l')) return 3;
    return 0;
}

/* The end of a whitespace run at i that no earlier alternative took: \s+(?!\S) leaves
 * the run's last character to the word after it, \s+ takes a lone one. */
static int space_run(const struct ch *c, int i, int end)
{
    int j = i;
    while (j < end && c[j].k == K_SPACE)
        j++;
    return j == end || j - i == 1 ? j : j - 1;
}

/*
 * GPT-2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * Returns the end of the match at i (> i) within [i, end).
 */
static int match_gpt2(const struct ch *c, int i, int end)
{
    int j = contraction(c, i, end, 0);
    if (j) return i + j;
    j = i;
    if (c[i].cp == ' ' && i + 1 < end && c[i + 1].k != K_SPACE) j = i + 1;
    int k = c[j].k;
    if (k == K_SPACE) return space_run(c, i, end);
    for (j++; j < end && c[j].k == k; j++)
        ;
    return j;
}

/*
 * Llama 3 (max_digits 3) and Qwen2 (1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 */
static int match_llama3(const struct ch *c, int i, int end, int max_digits)
{
    int j = contraction(c, i, end, 1);
    if (j) return i + j;
    int32_t x = c[i].cp, k = c[i].k;
    if (k == K_LETTER ||
        (k != K_NUMBER && x != '\r' && x != '\n' && i + 1 < end && c[i + 1].k == K_LETTER)) {
        for (j = i + 1; j < end && c[j].k == K_LETTER; j++)
            ;
        return j;
    }
    if (k == K_NUMBER) {
        for (j = i + 1; j < end && j - i < max_digits && c[j].k == K_NUMBER; j++)
            ;
        return j;
    }
    j = i;
    if (x == ' ' && i + 1 < end && c[i + 1].k == K_OTHER) j = i + 1;
    if (c[j].k == K_OTHER) {
        for (j++; j < end && c[j].k == K_OTHER; j++)
            ;
        while (j < end && (c[j].cp == '\r' || c[j].cp == '\n'))
            j++;
        return j;
    }
    /* \s*[\r\n]+ ends just after the run's last line break */
    int last_nl = -1;
    for (j = i; j < end && c[j].k == K_SPACE; j++)
        if (c[j].cp == '\r' || c[j].cp == '\n') last_nl = j;
    return last_nl >= 0 ? last_nl + 1 : space_run(c, i, end);
}

/* Pre-tokenizes one fragment (text between special tokens) and encodes its words. */
static int bpe_fragment(struct work *w, const uint8_t *s, size_t len)
{
    if (reserve((void **)&w->ch, &w->ch_cap, len + 1, sizeof *w->ch)) return ENG_ENOMEM;
    int nc = 0;
    for (size_t at = 0; at < len; nc++) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t r = utf8proc_iterate(s + at, (utf8proc_ssize_t)(len - at), &cp);
        if (r <= 0) {
            cp = -1;
            r = 1;
        }
        w->ch[nc] = (struct ch){cp, (int32_t)at, klass(cp)};
        at += (size_t)r;
    }
    w->ch[nc].off = (int32_t)len;
    const struct ch *c = w->ch;
    int pre = w->v->pre, end = 0; /* smollm: the end of the digit-free stretch at i */
    for (int i = 0; i < nc;) {
        int j;
        if (pre == PRE_LLAMA3 || pre == PRE_QWEN2) {
            j = match_llama3(c, i, nc, pre == PRE_LLAMA3 ? 3 : 1);
        } else if (pre == PRE_GPT2) {
            j = match_gpt2(c, i, nc);
        } else if (c[i].k == K_NUMBER) { /* smollm: each digit alone, GPT-2 between */
            j = i + 1;
        } else {
            if (end <= i)
                for (end = i; end < nc && c[end].k != K_NUMBER; end++)
                    ;
            j = match_gpt2(c, i, end);
        }
        if (bpe_word(w, s + c[i].off, c[j].off - c[i].off)) return ENG_ENOMEM;
        i = j;
    }
    return 0;
}

/* ---- SentencePiece ------------------------------------------------------------------ */

static int spm_fragment(struct work *w, const uint8_t *s, size_t len, int prefix)
{
    const tok_vocab *v = w->v;
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++)
        spaces += s[i] == ' ';
    size_t n = len + 2 * spaces + (prefix ? 3 : 0);
    if (reserve((void **)&w->buf, &w->buf_cap, n, 1) || reserve_word(w, n)) return ENG_ENOMEM;
    uint8_t *t = w->buf;
    size_t k = 0;
    static const uint8_t lower_one_eighth_block[3] = {0xe2, 0x96, 0x81}; /* U+2581 */
    if (prefix) {
        memcpy(t, lower_one_eighth_block, 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(t + k, lower_one_eighth_block, 3);
            k += 3;
        } else {
            t[k++] = s[i];
        }
    }
    int32_t ns = 0;
    for (size_t at = 0; at < n; ns++) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t r = utf8proc_iterate(t + at, (utf8proc_ssize_t)(n - at), &cp);
        if (r <= 0) r = 1;
        int32_t id = find_text(v, (const char *)t + at, (size_t)r);
        if (id >= 0 && v->tok[id].type != TOK_NORMAL) id = -1;
        w->sym[ns] = (struct sym){(int32_t)at, (int32_t)r, ns - 1, ns + 1, id};
        at += (size_t)r;
    }
    w->sym[ns - 1].next = -1;
    w->heap_n = 0;
    merge_all(w, t);
    for (int32_t i = 0; i >= 0; i = w->sym[i].next) {
        const struct sym *y = &w->sym[i];
        if (y->id >= 0) {
            emit(w, y->id);
            continue;
        }
        for (int32_t b = 0; b < y->len; b++) { /* byte fallback */
            int32_t id = v->byte_tok[t[y->start + b]];
            if (id >= 0)
                emit(w, id);
            else if (v->unk >= 0)
                emit(w, v->unk);
        }
    }
    return 0;
}

static int fragment(struct work *w, const char *s, size_t len, int after_special)
{
    if (!len) return 0;
    if (w->v->model == MODEL_SPM) /* llama.cpp's rule: a prefix after every special */
        return spm_fragment(w, (const uint8_t *)s, len, w->v->add_space_prefix && after_special);
    return bpe_fragment(w, (const uint8_t *)s, len);
}

/* The longest special token at s, or -1. */
static int32_t special_at(const tok_vocab *v, const char *s, size_t left)
{
    uint8_t b = (uint8_t)s[0];
    for (int32_t k = v->special_at[b]; k < v->special_at[b + 1]; k++) {
        const struct entry *e = &v->tok[v->special[k]];
        if (e->text_len <= left && !memcmp(v->text + e->text, s, e->text_len)) return v->special[k];
    }
    return -1;
}

/* Encodes text, reading special tokens only inside the spans (all of it when spans is
 * NULL and nspans < 0; nowhere when nspans is 0). */
static int encode(const tok_vocab *v, const char *text, size_t len, const struct tok_span *spans,
                  int nspans, int32_t *ids, int cap, int *n)
{
    *n = 0;
    if (len > MAX_TEXT || cap < 0 || (len && !text) || (cap && !ids)) return ENG_EINVAL;
    struct work w = {.v = v, .ids = ids, .cap = cap};
    int rc = 0, after_special = 1, k = 0;
    size_t start = 0;
    for (size_t i = 0; nspans && i < len;) {
        size_t end = len; /* where the span holding i ends */
        if (nspans > 0) {
            while (k < nspans && spans[k].off + spans[k].len <= i)
                k++;
            if (k == nspans) break;
            if (i < spans[k].off) {
                i = spans[k].off;
                continue;
            }
            end = spans[k].off + spans[k].len;
        }
        int32_t id = special_at(v, text + i, end - i);
        if (id < 0) {
            i++;
            continue;
        }
        if ((rc = fragment(&w, text + start, i - start, after_special))) goto out;
        emit(&w, id);
        after_special = 1;
        i += v->tok[id].text_len;
        start = i;
    }
    if ((rc = fragment(&w, text + start, len - start, after_special))) goto out;
    *n = w.n;
    rc = w.n > cap ? ENG_EFULL : 0;
out:
    free(w.buf);
    free(w.ch);
    free(w.heap);
    free(w.sym);
    return rc;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, int allow_special, int32_t *ids,
               int cap, int *n)
{
    return encode(v, text, len, NULL, allow_special ? -1 : 0, ids, cap, n);
}

int tok_encode_spans(const tok_vocab *v, const char *text, size_t len,
                     const struct tok_span *spans, int nspans, int32_t *ids, int cap, int *n)
{
    if (nspans < 0 || (nspans && !spans)) return ENG_EINVAL;
    for (int k = 0; k < nspans; k++)
        if (spans[k].off + spans[k].len > len || (k && spans[k].off < spans[k - 1].off +
                                                               spans[k - 1].len))
            return ENG_EINVAL;
    return encode(v, text, len, spans, nspans, ids, cap, n);
}

/* ---- decoding ----------------------------------------------------------------------- */

void tok_decoder_init(tok_decoder *d, const tok_vocab *v, int flags)
{
    memset(d, 0, sizeof *d);
    d->v = v;
    d->flags = flags;
}

size_t tok_decode_max(const tok_vocab *v)
{
    return v->max_piece + 3;
}

/* What one token releases: the held bytes, then p[0..m), less the last `keep` bytes. */
struct release {
    const uint8_t *p;
    size_t m, keep;
    int is_text; /* not a skipped or control token */
};

static uint8_t joined_at(const tok_decoder *d, const struct release *r, size_t k)
{
    return k < (size_t)d->n_held ? d->held[k] : r->p[k - (size_t)d->n_held];
}

/* How many trailing bytes of held + p are the start of a UTF-8 character still missing
 * continuation bytes. */
static size_t incomplete_tail(const tok_decoder *d, const struct release *r)
{
    size_t total = (size_t)d->n_held + r->m;
    size_t s = total;
    while (s > 0 && total - s < 4) {
        uint8_t b = joined_at(d, r, --s);
        if ((b & 0xc0) == 0x80) continue; /* a continuation byte: the lead is further back */
        size_t need = b >= 0xc2 && b <= 0xdf   ? 2
                      : b >= 0xe0 && b <= 0xef ? 3
                      : b >= 0xf0 && b <= 0xf4 ? 4
                                               : 0;
        return need > total - s ? total - s : 0;
    }
    return 0;
}

static int plan(const tok_decoder *d, int32_t id, struct release *r)
{
    const tok_vocab *v = d->v;
    if (id < 0 || id >= v->n) return ENG_EINVAL;
    const struct entry *e = &v->tok[id];
    r->p = (const uint8_t *)v->pieces + e->piece;
    r->m = e->piece_len;
    r->is_text = e->type != TOK_CONTROL;
    if (!r->is_text && (d->flags & TOK_DECODE_SKIP_SPECIAL)) r->m = 0;
    if (r->is_text && !d->started && (d->flags & TOK_DECODE_STRIP_SPACE) && v->model == MODEL_SPM &&
        v->add_space_prefix && r->m && r->p[0] == ' ') {
        r->p++;
        r->m--;
    }
    r->keep = incomplete_tail(d, r);
    return 0;
}

/* Copies what fits of the released bytes to out[*pos..cap), advancing *pos by all of
 * them, and holds the kept tail. */
static void commit(tok_decoder *d, const struct release *r, char *out, size_t cap, size_t *pos)
{
    size_t total = (size_t)d->n_held + r->m, give = total - r->keep;
    for (size_t k = 0; k < give; k++, (*pos)++)
        if (*pos < cap) out[*pos] = (char)joined_at(d, r, k);
    uint8_t keep[4];
    for (size_t k = 0; k < r->keep; k++)
        keep[k] = joined_at(d, r, give + k);
    memcpy(d->held, keep, r->keep);
    d->n_held = (int)r->keep;
    if (r->is_text) d->started = 1;
}

int tok_decode(tok_decoder *d, int32_t id, char *out, size_t cap, size_t *n)
{
    struct release r;
    *n = 0;
    int rc = plan(d, id, &r);
    if (rc) return rc;
    size_t need = (size_t)d->n_held + r.m - r.keep;
    if (need > cap) {
        *n = need;
        return ENG_EFULL;
    }
    commit(d, &r, out, cap, n);
    return 0;
}

int tok_decoder_flush(tok_decoder *d, char *out, size_t cap, size_t *n)
{
    *n = (size_t)d->n_held;
    if (*n > cap) return ENG_EFULL;
    memcpy(out, d->held, *n);
    tok_decoder_init(d, d->v, d->flags);
    return 0;
}

int tok_detokenize(const tok_vocab *v, const int32_t *ids, int n_ids, int flags, char *out,
                   size_t cap, size_t *len)
{
    tok_decoder d;
    tok_decoder_init(&d, v, flags);
    *len = 0;
    for (int i = 0; i < n_ids; i++) {
        struct release r;
        int rc = plan(&d, ids[i], &r);
        if (rc) return rc;
        commit(&d, &r, out, cap, len);
    }
    for (int k = 0; k < d.n_held; k++, (*len)++)
        if (*len < cap) out[*len] = (char)d.held[k];
    return *len > cap ? ENG_EFULL : 0;
}
