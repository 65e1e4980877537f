/* tests engine/tokenizer.c: ids equal to the independent reference (tokenizers, through
 * tests/ref/make_tokenizer_fixtures.py, tests/fixtures/engine/tokenizer.json) for every
 * fixture text and every pre-tokenizer, decode(encode(x)) == x, special tokens matched
 * only when allowed, the streaming decoder never emitting part of a character, a
 * SentencePiece vocabulary built here, refused metadata; the time to encode a long text. */
#include "engine.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "tokenizer.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
#define FIXTURE "tests/fixtures/engine/tokenizer.json"

/* ---- the model's tokenizer metadata copied into a GGUF file ------------------------ */

static size_t scalar_size(enum gguf_vtype t)
{
    switch (t) {
    case GGUF_U8:
    case GGUF_I8:
    case GGUF_BOOL:
        return 1;
    case GGUF_U16:
    case GGUF_I16:
        return 2;
    case GGUF_U32:
    case GGUF_I32:
    case GGUF_F32:
        return 4;
    default:
        return 8;
    }
}

/* Writes kv back as it was read. */
static void kv_copy(struct gw *w, const struct gguf_kv *kv)
{
    gw_strn(w, kv->key.p, kv->key.len);
    gw_u32(w, kv->type);
    if (kv->type == GGUF_STRING) {
        gw_strn(w, kv->v.s.p, kv->v.s.len);
    } else if (kv->type == GGUF_ARRAY) {
        gw_u32(w, kv->v.arr.type);
        gw_u64(w, kv->v.arr.n);
        if (kv->v.arr.type == GGUF_STRING)
            for (uint64_t i = 0; i < kv->v.arr.n; i++)
                gw_strn(w, kv->v.arr.strs[i].p, kv->v.arr.strs[i].len);
        else
            gw_put(w, kv->v.arr.data, kv->v.arr.n * scalar_size(kv->v.arr.type));
    } else if (kv->type == GGUF_F32) {
        float f = (float)kv->v.f;
        gw_put(w, &f, 4);
    } else if (kv->type == GGUF_F64) {
        gw_put(w, &kv->v.f, 8);
    } else {
        gw_put(w, &kv->v.u, scalar_size(kv->type)); /* little-endian: the low bytes */
    }
}

/* The model's tokenizer metadata with tokenizer.ggml.pre set to pre (NULL: removed). */
static void copy_with_pre(const gguf_file *src, const char *pre, struct gw *w)
{
    uint64_t n = 0;
    for (int i = 0; i < gguf_n_kv(src); i++) {
        const struct gguf_kv *kv = gguf_kv_at(src, i);
        n += kv->key.len > 10 && !memcmp(kv->key.p, "tokenizer.", 10) &&
             !(kv->key.len == 18 && !memcmp(kv->key.p, "tokenizer.ggml.pre", 18));
    }
    gw_header(w, 3, 0, n + (pre != NULL));
    for (int i = 0; i < gguf_n_kv(src); i++) {
        const struct gguf_kv *kv = gguf_kv_at(src, i);
        if (kv->key.len > 10 && !memcmp(kv->key.p, "tokenizer.", 10) &&
            !(kv->key.len == 18 && !memcmp(kv->key.p, "tokenizer.ggml.pre", 18)))
            kv_copy(w, kv);
    }
    if (pre) gw_kv_str(w, "tokenizer.ggml.pre", pre);
}

/* ---- the model's tokenizer against the reference ------------------------------------ */

static gguf_file *file;
static tok_vocab *vocab;
static json_t *fixture;

static void setup(void)
{
    char err[512];
    cr_assert_eq(gguf_open(MODEL, &file, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(file, &vocab, err, sizeof err), 0, "%s", err);
    json_error_t je;
    fixture = json_load_file(FIXTURE, JSON_ALLOW_NUL, &je);
    cr_assert_not_null(fixture, "%s: %s", FIXTURE, je.text);
}

static void teardown(void)
{
    json_decref(fixture);
    tok_destroy(vocab);
    gguf_close(file);
}

TestSuite(smollm, .init = setup, .fini = teardown, .timeout = 120);

static int same_ids(const int32_t *got, int n, json_t *want)
{
    if ((size_t)n != json_array_size(want)) return 0;
    for (int i = 0; i < n; i++)
        if (got[i] != json_integer_value(json_array_get(want, (size_t)i))) return 0;
    return 1;
}

static void show_ids(const char *what, const int32_t *got, int n, json_t *want)
{
    fprintf(stderr, "%s\n  got ", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "\n  want");
    for (size_t i = 0; i < json_array_size(want); i++)
        fprintf(stderr, " %lld", json_integer_value(json_array_get(want, i)));
    fprintf(stderr, "\n");
}

/* Checks every fixture text with v against ids[pre]; returns the number checked. */
static int check_reference(const tok_vocab *v, const char *pre)
{
    json_t *texts = json_object_get(fixture, "texts");
    cr_assert(json_array_size(texts) >= 30);
    int checked = 0, bad = 0;
    int32_t ids[8192];
    for (size_t t = 0; t < json_array_size(texts); t++) {
        json_t *row = json_array_get(texts, t);
        const char *text = json_string_value(json_object_get(row, "text"));
        size_t len = json_string_length(json_object_get(row, "text"));
        int special = json_is_true(json_object_get(row, "special"));
        json_t *want = json_object_get(json_object_get(row, "ids"), pre);
        cr_assert_not_null(want, "no ids for %s", pre);
        int n;
        cr_assert_eq(tok_encode(v, text, len, special, ids, 8192, &n), 0);
        if (!same_ids(ids, n, want)) {
            char what[160];
            snprintf(what, sizeof what, "%s, text %zu '%.60s'", pre, t, text);
            show_ids(what, ids, n, want);
            bad++;
        }
        /* the model's own tokenizer, not transformers' GGUF conversion */
        json_t *conv = json_object_get(row, "gguf_conversion_ids");
        if (conv && !strcmp(pre, "smollm")) cr_assert(!same_ids(ids, n, conv));
        checked++;
    }
    cr_assert_eq(bad, 0, "%s: %d of %d texts differ from the reference", pre, bad, checked);
    return checked;
}

Test(smollm, ids_equal_the_reference)
{
    int n = check_reference(vocab, "smollm");
    int flagged = 0;
    json_t *texts = json_object_get(fixture, "texts");
    for (size_t t = 0; t < json_array_size(texts); t++)
        flagged +=
            json_is_true(json_object_get(json_array_get(texts, t), "gguf_conversion_differs"));
    printf("tokenizer: smollm: %d texts identical to the reference (%d where transformers' "
           "GGUF conversion, lacking the Digits step, differs)\n",
           n, flagged);
}

Test(smollm, other_pre_tokenizers_equal_the_reference)
{
    static const char *const pres[] = {"gpt2", "llama-bpe", "qwen2"};
    for (size_t p = 0; p < sizeof pres / sizeof pres[0]; p++) {
        struct gw w = {0};
        copy_with_pre(file, pres[p], &w);
        gguf_file *f;
        tok_vocab *v;
        char err[256];
        cr_assert_eq(gguf_parse(w.buf, w.n, &f, err, sizeof err), 0, "%s", err);
        cr_assert_eq(tok_create(f, &v, err, sizeof err), 0, "%s", err);
        gguf_close(f);
        gw_free(&w); /* the vocab keeps copies */
        int n = check_reference(v, pres[p]);
        printf("tokenizer: %s: %d texts identical to the reference\n", pres[p], n);
        tok_destroy(v);
    }
}

/* Ideographs new in Unicode 15.1 (CJK Extension I, U+2EBF0..U+2EE5D) are letters, as
 * llama.cpp classes them: the contraction after one splits off as after any ideograph
 * (llama.cpp: "\U0002EBF0's" -> [187, 123, 124, 125, 506], 506 being "'s"; as "other",
 * the apostrophe joined the ideograph and "'s" came apart) */
Test(smollm, ideographs_of_unicode_15_1_are_letters)
{
    static const char *const texts[] = {"\xE6\x9D\xB1's", "\xF0\xAE\xAF\xB0's",
                                        "\xF0\xAE\xB9\x9D's"};
    int32_t ids[3][16];
    int n[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tok_encode(vocab, texts[i], strlen(texts[i]), 0, ids[i], 16, &n[i]), 0);
    const char *piece;
    size_t len;
    cr_assert_eq(tok_piece(vocab, ids[0][n[0] - 1], &piece, &len), 0);
    cr_assert(len == 2 && !memcmp(piece, "'s", 2), "a CJK ideograph, then \"'s\"");
    for (int i = 1; i < 3; i++)
        cr_assert_eq(ids[i][n[i] - 1], ids[0][n[0] - 1], "text %d ends in \"'s\"", i);
    cr_assert_eq(n[1], 5);
    cr_assert_eq(ids[1][0], 187);
    cr_assert_eq(ids[1][4], 506);
}

Test(smollm, decode_inverts_encode)
{
    json_t *texts = json_object_get(fixture, "texts");
    int32_t ids[8192];
    char out[16384];
    int exact = 0, lossy = 0;
    for (size_t t = 0; t < json_array_size(texts); t++) {
        json_t *row = json_array_get(texts, t);
        const char *text = json_string_value(json_object_get(row, "text"));
        size_t len = json_string_length(json_object_get(row, "text"));
        const char *ref = json_string_value(json_object_get(row, "decoded"));
        size_t ref_len = json_string_length(json_object_get(row, "decoded"));
        for (int special = 0; special < 2; special++) {
            int n;
            size_t got;
            cr_assert_eq(tok_encode(vocab, text, len, special, ids, 8192, &n), 0);
            cr_assert_eq(tok_detokenize(vocab, ids, n, 0, out, sizeof out, &got), 0);
            cr_assert(got == ref_len && !memcmp(out, ref, got), "text %zu: '%.*s'", t, (int)got,
                      out);
        }
        /* the reference loses only characters whose byte has no token (one text) */
        if (ref_len == len && !memcmp(ref, text, len))
            exact++;
        else
            lossy++;
    }
    cr_assert_eq(lossy, 1);
    printf("tokenizer: decode(encode(x)) == x for %d texts; == the reference's decoding for "
           "the %d with bytes the vocabulary lacks\n",
           exact, lossy);

    /* Any bytes, not only UTF-8. Byte-level BPE has no unknown token: a byte whose
     * stand-in the vocabulary lacks (here 21: 0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, 0xc0,
     * 0xc1, 0xf1, 0xf2, 0xf5..0xff, never seen in training) is dropped, as tokenizers and
     * llama.cpp drop it; the others round-trip. */
    char bytes[256], kept[256];
    int n_kept = 0, n;
    size_t got;
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)(255 - i);
        cr_assert_eq(tok_encode(vocab, bytes + i, 1, 0, ids, 8192, &n), 0);
        if (n) kept[n_kept++] = bytes[i];
    }
    cr_assert_eq(n_kept, 256 - 21);
    cr_assert_eq(tok_encode(vocab, bytes, sizeof bytes, 0, ids, 8192, &n), 0);
    cr_assert_eq(tok_detokenize(vocab, ids, n, 0, out, sizeof out, &got), 0);
    cr_assert(got == (size_t)n_kept && !memcmp(out, kept, got));
    for (int i = 0; i < n; i++)
        cr_assert_eq(tok_type(vocab, ids[i]), TOK_NORMAL);
}

Test(smollm, special_tokens_only_when_allowed)
{
    const char *text = "<|im_start|>user\nHi<|im_end|>";
    int32_t ids[64];
    int n;
    int32_t start = tok_find(vocab, "<|im_start|>", 12), end = tok_find(vocab, "<|im_end|>", 10);
    cr_assert(start == 1 && end == 2);
    cr_assert_eq(tok_encode(vocab, text, strlen(text), 1, ids, 64, &n), 0);
    cr_assert(n >= 3 && ids[0] == start && ids[n - 1] == end);
    cr_assert_eq(tok_encode(vocab, text, strlen(text), 0, ids, 64, &n), 0);
    for (int i = 0; i < n; i++)
        cr_assert(tok_type(vocab, ids[i]) == TOK_NORMAL, "id %d at %d", ids[i], i);
    cr_assert_gt(n, 6);

    /* too small a buffer: the count needed, the first ids written */
    int32_t few[2];
    cr_assert_eq(tok_encode(vocab, text, strlen(text), 1, few, 2, &n), ENG_EFULL);
    cr_assert(n >= 3 && few[0] == start);

    cr_assert(tok_is_eog(vocab, end) && tok_is_eog(vocab, tok_eos(vocab)));
    cr_assert(tok_is_eog(vocab, tok_find(vocab, "<|endoftext|>", 13)));
    cr_assert(!tok_is_eog(vocab, start) && !tok_is_eog(vocab, 1000) && !tok_is_eog(vocab, -1) &&
              !tok_is_eog(vocab, 1 << 30));
    cr_assert_eq(tok_n_vocab(vocab), 49152);
    cr_assert_eq(tok_bos(vocab), 1);
    cr_assert_eq(tok_add_bos(vocab), 0);

    /* a control token decodes to its text, or to nothing when skipped */
    char out[64];
    size_t got;
    int32_t seq[] = {start, ids[0]};
    cr_assert_eq(tok_detokenize(vocab, seq, 2, 0, out, sizeof out, &got), 0);
    cr_assert(got == 13 && !memcmp(out, "<|im_start|><", 13));
    cr_assert_eq(tok_detokenize(vocab, seq, 2, TOK_DECODE_SKIP_SPECIAL, out, sizeof out, &got), 0);
    cr_assert(got == 1 && out[0] == '<');
}

static int complete_utf8(const char *s, size_t n)
{
    for (size_t at = 0; at < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t r =
            utf8proc_iterate((const uint8_t *)s + at, (utf8proc_ssize_t)(n - at), &c);
        if (r <= 0) return 0;
        at += (size_t)r;
    }
    return 1;
}

Test(smollm, streaming_decoder_never_splits_a_character)
{
    const char *text = "日本語 🚀👨‍👩‍👧 naïve ∑ 𝟙𝟚 — fin";
    size_t len = strlen(text);
    int32_t ids[256];
    int n;
    cr_assert_eq(tok_encode(vocab, text, len, 0, ids, 256, &n), 0);
    int split = 0;
    for (int i = 0; i < n; i++) {
        const char *p;
        size_t m;
        cr_assert_eq(tok_piece(vocab, ids[i], &p, &m), 0);
        split += !complete_utf8(p, m);
    }
    cr_assert_gt(split, 0, "no token ends inside a character: the test proves nothing");

    tok_decoder d;
    tok_decoder_init(&d, vocab, 0);
    char all[512], chunk[64];
    size_t at = 0, got, held_after = 0;
    for (int i = 0; i < n; i++) {
        /* no room: ENG_EFULL leaves the decoder as it was (a token that only adds to the
         * held tail needs no room and is taken) */
        int rc = tok_decode(&d, ids[i], chunk, 0, &got);
        if (rc == ENG_EFULL) {
            size_t need = got;
            cr_assert_gt(need, 0);
            cr_assert_eq(tok_decode(&d, ids[i], chunk, sizeof chunk, &got), 0);
            cr_assert_eq(got, need);
        } else {
            cr_assert(rc == 0 && got == 0);
        }
        cr_assert(complete_utf8(chunk, got), "token %d emitted part of a character", i);
        held_after += d.n_held > 0;
        memcpy(all + at, chunk, got);
        at += got;
    }
    cr_assert_eq(tok_decoder_flush(&d, chunk, sizeof chunk, &got), 0);
    cr_assert_eq(got, 0);
    cr_assert(at == len && !memcmp(all, text, len));
    cr_assert_gt(held_after, 0);
    printf("tokenizer: streaming: %d tokens, %d end inside a character, %zu left bytes "
           "held; no partial character emitted\n",
           n, split, held_after);

    /* a tail that never completes comes out at flush; one that cannot complete at once */
    int32_t e6 = tok_find(vocab, "æ", 2); /* the stand-in of byte 0xE6 */
    cr_assert_geq(e6, 0);
    cr_assert_eq(tok_decode(&d, e6, chunk, sizeof chunk, &got), 0);
    cr_assert_eq(got, 0);
    cr_assert_eq(tok_decoder_flush(&d, chunk, sizeof chunk, &got), 0);
    cr_assert(got == 1 && (uint8_t)chunk[0] == 0xe6);
    int32_t a = tok_find(vocab, "a", 1);
    cr_assert_eq(tok_decode(&d, e6, chunk, sizeof chunk, &got), 0);
    cr_assert_eq(tok_decode(&d, a, chunk, sizeof chunk, &got), 0);
    cr_assert(got == 2 && (uint8_t)chunk[0] == 0xe6 && chunk[1] == 'a');
    cr_assert_eq(tok_decode(&d, -1, chunk, sizeof chunk, &got), ENG_EINVAL);
    cr_assert_eq(tok_decode(&d, 49152, chunk, sizeof chunk, &got), ENG_EINVAL);
}

Test(smollm, encoding_speed)
{
    json_t *texts = json_object_get(fixture, "texts");
    const char *text = NULL;
    size_t len = 0;
    for (size_t t = 0; t < json_array_size(texts); t++) {
        json_t *s = json_object_get(json_array_get(texts, t), "text");
        if (json_string_length(s) > len) {
            len = json_string_length(s);
            text = json_string_value(s);
        }
    }
    cr_assert_gt(len, 4000);
    int32_t ids[8192];
    int n = 0, reps = 200;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (int r = 0; r < reps; r++)
        cr_assert_eq(tok_encode(vocab, text, len, 0, ids, 8192, &n), 0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    double us =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / reps;
    printf("tokenizer: encoding %zu bytes -> %d ids: %.1f us CPU (%.0f MB/s)\n", len, n, us,
           (double)len / us);

    /* one long word: the merge heap keeps it O(n log n) */
    size_t big = 1 << 16;
    char *word = malloc(big);
    for (size_t i = 0; i < big; i++)
        word[i] = "abcdefghij"[i % 10];
    int32_t *many = malloc(sizeof *many * big);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    cr_assert_eq(tok_encode(vocab, word, big, 0, many, (int)big, &n), 0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
    printf("tokenizer: one %zu-byte word -> %d ids: %.0f us CPU\n", big, n, us);
    cr_assert_lt(us, 2e6);
    free(many);
    free(word);
}

/* ---- SentencePiece, on a vocabulary built here -------------------------------------- */

/* ids: 0 <unk>, 1 <s>, 2 </s>, 3 + b: <0xBB>, then these (score: higher merges first) */
static const struct {
    const char *text;
    float score;
} spm_pieces[] = {
    {"\xe2\x96\x81", -1},       /* 259 ▁ */
    {"h", -2},                  /* 260 */
    {"e", -3},                  /* 261 */
    {"l", -4},                  /* 262 */
    {"o", -5},                  /* 263 */
    {"w", -6},                  /* 264 */
    {"r", -7},                  /* 265 */
    {"d", -8},                  /* 266 */
    {"ll", -9},                 /* 267 */
    {"llo", -10},               /* 268 */
    {"he", -11},                /* 269 */
    {"\xe2\x96\x81h", -12},     /* 270 ▁h: made stale by "he" before its turn */
    {"lo", -13},                /* 271 */
    {"\xe2\x96\x81he", -14},    /* 272 */
    {"hello", -15},             /* 273 */
    {"\xe2\x96\x81hello", -16}, /* 274 */
    {"\xe2\x96\x81w", -17},     /* 275 */
    {"or", -18},                /* 276 */
    {"ld", -19},                /* 277 */
    {"\xe2\x96\x81wor", -20},   /* 278 */
    {"\xe2\x96\x81world", -21}, /* 279 */
    {"\xe2\x96\x81wo", -22},    /* 280 */
};
#define SPM_N (259 + (int)(sizeof spm_pieces / sizeof spm_pieces[0]))

static void build_spm(struct gw *w, int add_space_prefix)
{
    gw_header(w, 3, 0, 8);
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_array(w, "tokenizer.ggml.tokens", GGUF_STRING, SPM_N);
    gw_str(w, "<unk>");
    gw_str(w, "<s>");
    gw_str(w, "</s>");
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        gw_str(w, s);
    }
    for (int i = 0; i < SPM_N - 259; i++)
        gw_str(w, spm_pieces[i].text);
    gw_kv_array(w, "tokenizer.ggml.scores", GGUF_F32, SPM_N);
    for (int i = 0; i < SPM_N; i++) {
        float s = i < 259 ? 0.0f : spm_pieces[i - 259].score;
        gw_put(w, &s, 4);
    }
    gw_kv_array(w, "tokenizer.ggml.token_type", GGUF_I32, SPM_N);
    for (int i = 0; i < SPM_N; i++) {
        int32_t t = i == 0 ? TOK_UNKNOWN : i < 3 ? TOK_CONTROL : i < 259 ? TOK_BYTE : TOK_NORMAL;
        gw_put(w, &t, 4);
    }
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_kv_bool(w, "tokenizer.ggml.add_space_prefix", add_space_prefix);
}

static tok_vocab *spm_vocab(struct gw *w, int add_space_prefix)
{
    build_spm(w, add_space_prefix);
    gguf_file *f;
    tok_vocab *v;
    char err[256];
    cr_assert_eq(gguf_parse(w->buf, w->n, &f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(f, &v, err, sizeof err), 0, "%s", err);
    gguf_close(f);
    return v;
}

static void expect(const tok_vocab *v, const char *text, int allow_special, const int32_t *want,
                   int n_want)
{
    int32_t ids[64];
    int n;
    cr_assert_eq(tok_encode(v, text, strlen(text), allow_special, ids, 64, &n), 0);
    int ok = n == n_want && !memcmp(ids, want, sizeof *ids * (size_t)n);
    if (!ok) {
        fprintf(stderr, "'%s':", text);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    cr_assert(ok, "'%s' (special %d)", text, allow_special);
}

#define EXPECT(v, text, special, ...)                                                              \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        expect(v, text, special, want_, (int)(sizeof want_ / sizeof want_[0]));                    \
    } while (0)

Test(spm, merges_by_score_with_byte_fallback)
{
    struct gw w = {0};
    tok_vocab *v = spm_vocab(&w, 1);
    cr_assert_eq(tok_n_vocab(v), SPM_N);
    cr_assert(tok_add_bos(v) && tok_bos(v) == 1 && tok_unk(v) == 0);
    /* ll, llo, he, ▁he, ▁hello; ▁w, or, ▁wor, ld, ▁world */
    EXPECT(v, "hello world", 0, 274, 279);
    /* equal scores: the leftmost pair first (▁ l l l -> ▁ ll l) */
    EXPECT(v, "lll", 0, 259, 267, 262);
    /* é and a space-free '<s>' are not in the vocabulary: their UTF-8 bytes */
    EXPECT(v, "hé", 0, 270, 3 + 0xc3, 3 + 0xa9);
    EXPECT(v, "<s>", 0, 259, 3 + '<', 3 + 's', 3 + '>');
    /* matched only when allowed; the space prefix again after a special token */
    EXPECT(v, "<s>", 1, 1);
    EXPECT(v, "hello<s>hello", 1, 274, 1, 274);
    EXPECT(v, "  ", 0, 259, 259, 259);

    /* decoding: ▁ -> space, bytes joined back into é; the prefix stripped on request */
    const char *text = "hello wé world";
    int32_t ids[64];
    int n;
    char out[64];
    size_t len;
    cr_assert_eq(tok_encode(v, text, strlen(text), 0, ids, 64, &n), 0);
    cr_assert_eq(tok_detokenize(v, ids, n, TOK_DECODE_STRIP_SPACE, out, sizeof out, &len), 0);
    cr_assert(len == strlen(text) && !memcmp(out, text, len), "'%.*s'", (int)len, out);
    cr_assert_eq(tok_detokenize(v, ids, n, 0, out, sizeof out, &len), 0);
    cr_assert(len == strlen(text) + 1 && out[0] == ' ');
    /* BOS first: skipped, and the strip still applies to the first piece */
    int32_t with_bos[65] = {1};
    memcpy(with_bos + 1, ids, sizeof *ids * (size_t)n);
    cr_assert_eq(tok_detokenize(v, with_bos, n + 1,
                                TOK_DECODE_STRIP_SPACE | TOK_DECODE_SKIP_SPECIAL, out, sizeof out,
                                &len),
                 0);
    cr_assert(len == strlen(text) && !memcmp(out, text, len));
    /* too small a buffer: the size needed */
    cr_assert_eq(tok_detokenize(v, ids, n, 0, out, 4, &len), ENG_EFULL);
    cr_assert_eq(len, strlen(text) + 1);
    tok_destroy(v);

    /* without the space prefix */
    v = spm_vocab(&w, 0);
    cr_assert_eq(tok_add_bos(v), 1, "SentencePiece's default");
    EXPECT(v, "hello", 0, 273);
    EXPECT(v, "hello world", 0, 273, 279);
    tok_destroy(v);
    gw_free(&w);
}

/* Random bytes mixed with pieces of special tokens and characters: ids in range, no
 * overrun (run under ASan), and decoding gives back the input, or for byte-level BPE a
 * part of it. */
static void random_texts(const tok_vocab *v, int spm)
{
    static const char *const bits[] = {
        "<|im_start|>", "<|im_end|>",       "<s>",   " ",  "  ", "\n", "\xe6\x97",
        "\xa5",         "\xf0\x9f\x9a\x80", "hello", "12", "'s", "\t", "\xe2\x96\x81"};
    uint64_t x = 88172645463325252u;
    char text[512], out[8192];
    int32_t ids[2048];
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = 0;
        while (len < 400) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            if (x % 3 == 0) {
                const char *b = bits[(x >> 8) % (sizeof bits / sizeof bits[0])];
                memcpy(text + len, b, strlen(b));
                len += strlen(b);
            } else {
                text[len++] = (char)(x >> 16);
            }
            if ((x >> 40) % 50 == 0) break;
        }
        int n;
        size_t got;
        cr_assert_eq(tok_encode(v, text, len, iter & 1, ids, 2048, &n), 0);
        for (int i = 0; i < n; i++)
            cr_assert(ids[i] >= 0 && ids[i] < tok_n_vocab(v));
        int flags = spm ? TOK_DECODE_STRIP_SPACE : 0;
        cr_assert_eq(tok_detokenize(v, ids, n, flags, out, sizeof out, &got), 0);
        if (!spm) /* byte-level BPE only ever drops bytes */
            cr_assert_leq(got, len);
        /* SentencePiece loses nothing, except that U+2581 reads back as a space and a
         * matched special token gets a space prefix after it */
        if (spm && !(iter & 1) && !memmem(text, len, "\xe2\x96\x81", 3))
            cr_assert(got == len && !memcmp(out, text, len), "iteration %d", iter);
    }
}

Test(smollm, random_bytes)
{
    random_texts(vocab, 0);
}

Test(spm, random_bytes)
{
    struct gw w = {0};
    tok_vocab *v = spm_vocab(&w, 1);
    random_texts(v, 1);
    tok_destroy(v);
    gw_free(&w);
}

/* ---- refused metadata --------------------------------------------------------------- */

static int create_from(struct gw *w, char *err, size_t errlen)
{
    gguf_file *f;
    tok_vocab *v = NULL;
    cr_assert_eq(gguf_parse(w->buf, w->n, &f, err, errlen), 0, "%s", err);
    int rc = tok_create(f, &v, err, errlen);
    cr_assert(rc ? v == NULL : v != NULL);
    tok_destroy(v);
    gguf_close(f);
    return rc;
}

Test(refused, bad_metadata)
{
    struct gw w = {0};
    char err[256];

    gw_header(&w, 3, 0, 1);
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    cr_assert_eq(create_from(&w, err, sizeof err), ENG_EFORMAT);
    cr_assert(strstr(err, "tokenizer.ggml.tokens: missing"), "%s", err);

    gw_header(&w, 3, 0, 2);
    gw_kv_str(&w, "tokenizer.ggml.model", "bert");
    gw_kv_array(&w, "tokenizer.ggml.tokens", GGUF_STRING, 1);
    gw_str(&w, "a");
    cr_assert_eq(create_from(&w, err, sizeof err), ENG_ENOTSUP);
    cr_assert(strstr(err, "'bert' is not supported"), "%s", err);

    gw_header(&w, 3, 0, 3);
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(&w, "tokenizer.ggml.pre", "made-up");
    gw_kv_array(&w, "tokenizer.ggml.tokens", GGUF_STRING, 1);
    gw_str(&w, "a");
    cr_assert_eq(create_from(&w, err, sizeof err), ENG_ENOTSUP);
    cr_assert(strstr(err, "pre-tokenizer 'made-up' is not supported"), "%s", err);

    gw_header(&w, 3, 0, 3);
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(&w, "tokenizer.ggml.pre", "gpt2");
    gw_kv_array(&w, "tokenizer.ggml.tokens", GGUF_STRING, 1);
    gw_str(&w, "a");
    cr_assert_eq(create_from(&w, err, sizeof err), ENG_EFORMAT);
    cr_assert(strstr(err, "tokenizer.ggml.merges: missing"), "%s", err);

    build_spm(&w, 1);
    gw_kv_u32(&w, "tokenizer.ggml.padding_token_id", 5000); /* a ninth key */
    memcpy(w.buf + 16, &(uint64_t){9}, 8);
    cr_assert_eq(create_from(&w, err, sizeof err), ENG_EFORMAT);
    cr_assert(strstr(err, "padding_token_id: 5000 is not below the vocabulary size"), "%s", err);
    gw_free(&w);
}
