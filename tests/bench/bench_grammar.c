/* Structured output's cost on the CPU engine: greedy decode tokens/s of one sequence through
 * the scheduler with a JSON Schema grammar (grammar.h) and, for as many tokens, without;
 * and the time of one mask (eng_gm_mask) at a few places of a document, and inside strings
 * held to a pattern and to a maxLength. Run by
 * tests/bench/structured.py beside llama.cpp's grammar sampler on the same prompt ids.
 *
 * usage: bench_grammar MODEL.gguf THREADS MAX_TOKENS SCHEMA_FILE PROMPT_IDS
 *        (PROMPT_IDS: comma-separated token ids; SCHEMA_FILE "-": any JSON object)
 * prints one JSON line. */
#include "engine.h"
#include "grammar.h"
#include "scheduler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct run {
    double t_first, t_end;
    int completion, done;
    enum eng_finish finish;
    char text[16384];
    size_t len;
};

static void on_text(void *ud, const char *t, size_t n)
{
    struct run *r = ud;
    if (!r->t_first)
        r->t_first = now();
    if (r->len + n < sizeof r->text) {
        memcpy(r->text + r->len, t, n);
        r->len += n;
        r->text[r->len] = 0;
    }
}

static void on_done(void *ud, int err, enum eng_finish f, int prompt, int completion,
                    int cached)
{
    (void)prompt;
    (void)cached;
    struct run *r = ud;
    r->t_end = now();
    r->done = err ? -1 : 1;
    r->finish = f;
    r->completion = completion;
}

/* One greedy sequence; its decode rate from its first text to its end. */
static int run_one(eng_model *m, const tok_vocab *v, const int32_t *ids, int n,
                   const eng_grammar *g, int max_tokens, struct run *r)
{
    struct sched_config cfg = {1, 512, (n + max_tokens) / 16 + 2, 16, 0, 0, KVC_F32};
    struct sched_events ev = {.on_text = on_text, .on_done = on_done};
    sched *s;
    if (sched_create(m, v, &cfg, &ev, &s))
        return -1;
    struct eng_gen_params p = {.max_tokens = max_tokens, .grammar = g};
    eng_sampling_default(&p.sampling);
    p.sampling.temperature = 0;
    memset(r, 0, sizeof *r);
    sched_seq *q;
    int rc = sched_submit(s, 0, ids, n, &p, r, &q);
    if (!rc)
        while ((rc = sched_step(s)) > 0)
            ;
    sched_destroy(s);
    return rc < 0 || r->done != 1 ? -1 : 0;
}

/* Milliseconds of one mask after the document's first bytes doc (best of 20; the first of
 * them into *first when not NULL: a pattern's states are made as the masks meet them). */
static double mask_ms_first(const eng_grammar *g, const eng_gm_vocab *gv, int n_vocab,
                            const char *doc, double *first)
{
    eng_gm *m;
    float *logits = calloc((size_t)n_vocab, sizeof *logits);
    if (!logits || eng_gm_create(g, &m))
        return -1;
    double best = INFINITY;
    if (eng_gm_feed(m, doc, strlen(doc)))
        for (int i = 0; i < 20; i++) {
            double t = now();
            eng_gm_mask(m, gv, logits);
            t = now() - t;
            best = t < best ? t : best;
            if (first && i == 0)
                *first = t * 1e3;
        }
    eng_gm_destroy(m);
    free(logits);
    return best * 1e3;
}

static double mask_ms(const eng_grammar *g, const eng_gm_vocab *gv, int n_vocab, const char *doc)
{
    return mask_ms_first(g, gv, n_vocab, doc, NULL);
}

/* mask_ms() 9 characters into a string of the given schema; -1 if it is refused */
static double string_mask_ms(const char *schema, const eng_gm_vocab *gv, int n_vocab,
                             double *first)
{
    eng_grammar *g;
    char err[256];
    if (eng_grammar_create(schema, strlen(schema), &g, err, sizeof err))
        return -1;
    double ms = mask_ms_first(g, gv, n_vocab, "\"hello wor", first);
    eng_grammar_destroy(g);
    return ms;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: bench_grammar MODEL.gguf THREADS MAX_TOKENS SCHEMA_FILE|- "
                        "PROMPT_IDS\n");
        return 2;
    }
    char err[512], *schema = NULL;
    size_t len = 0;
    if (strcmp(argv[4], "-")) {
        FILE *f = fopen(argv[4], "rb");
        if (!f || fseek(f, 0, SEEK_END) || (long)(len = (size_t)ftell(f)) < 0 ||
            fseek(f, 0, SEEK_SET) || !(schema = malloc(len + 1)) ||
            fread(schema, 1, len, f) != len) {
            fprintf(stderr, "bench_grammar: cannot read %s\n", argv[4]);
            return 1;
        }
        fclose(f);
    }
    eng_grammar *g;
    if (eng_grammar_create(schema, len, &g, err, sizeof err)) {
        fprintf(stderr, "bench_grammar: %s\n", err);
        return 1;
    }
    int32_t ids[4096];
    int n = 0;
    for (char *p = argv[5]; *p && n < 4096; p += *p == ',') {
        char *end;
        ids[n++] = (int32_t)strtol(p, &end, 10);
        if (end == p)
            return 2;
        p = end;
    }
    struct eng_options opt = {.threads = atoi(argv[2])};
    eng_model *m;
    tok_vocab *v;
    if (eng_model_load(argv[1], &opt, &m, err, sizeof err) ||
        tok_create(eng_model_gguf(m), &v, err, sizeof err)) {
        fprintf(stderr, "bench_grammar: %s\n", err);
        return 1;
    }
    static struct run with, without;
    if (run_one(m, v, ids, n, g, atoi(argv[3]), &with) ||
        run_one(m, v, ids, n, NULL, with.completion, &without)) {
        fprintf(stderr, "bench_grammar: generation failed\n");
        return 1;
    }
    eng_gm_vocab *gv;
    if (eng_gm_vocab_create(v, &gv))
        return 1;
    const int V = tok_n_vocab(v);
    /* the document's first bytes up to a string, a number and between values */
    const char *value = strstr(with.text, "\": \""), *comma = strchr(with.text, ',');
    size_t at_str = value ? (size_t)(value - with.text) + 4 : 0, at_num = 0;
    size_t at_gap = comma ? (size_t)(comma - with.text) + 1 : 0;
    for (size_t i = 1; i < with.len && !at_num; i++)
        if (with.text[i - 1] >= '0' && with.text[i - 1] <= '9')
            at_num = i;
    char doc[3][16384];
    size_t at[3] = {at_str, at_num, at_gap};
    for (int k = 0; k < 3; k++) {
        memcpy(doc[k], with.text, at[k]);
        doc[k][at[k]] = 0;
    }
    if (getenv("BENCH_GRAMMAR_TEXT"))
        fprintf(stderr, "%s\n", with.text);
    /* 9 characters into a string held to a pattern of 240 positions ("(\w+ ?){1,80}"), and
     * into one with a maxLength (pydantic's Field(max_length=)) */
    double pattern_first = -1;
    const double at_pattern = string_mask_ms(
        "{\"type\": \"string\", \"pattern\": \"^(\\\\w+ ?){1,80}$\"}", gv, V, &pattern_first);
    const double at_capped =
        string_mask_ms("{\"type\": \"string\", \"maxLength\": 200}", gv, V, NULL);
    double rate_with = (with.completion - 1) / (with.t_end - with.t_first);
    double rate_without = (without.completion - 1) / (without.t_end - without.t_first);
    printf("{\"tokens\":%d,\"finish\":\"%s\",\"decode_tok_s\":%.1f,\"plain_decode_tok_s\":%.1f,"
           "\"mask_ms_in_string\":%.3f,\"mask_ms_in_number\":%.3f,\"mask_ms_after_comma\":%.3f,"
           "\"mask_ms_in_pattern\":%.3f,\"mask_ms_in_pattern_first\":%.3f,"
           "\"mask_ms_in_max_length\":%.3f,\"text_bytes\":%zu}\n",
           with.completion, eng_finish_name(with.finish), rate_with, rate_without,
           at_str ? mask_ms(g, gv, V, doc[0]) : -1, at_num ? mask_ms(g, gv, V, doc[1]) : -1,
           at_gap ? mask_ms(g, gv, V, doc[2]) : -1, at_pattern, pattern_first, at_capped,
           with.len);
    eng_gm_vocab_destroy(gv);
    tok_destroy(v);
    eng_model_destroy(m);
    eng_grammar_destroy(g);
    free(schema);
    return 0;
}
