/* tests engine/scheduler.c on the default model: a sequence's greedy output is the same alone
 * and inside a busy batch that preempts; cancelled sequences give their blocks back at the
 * next step; no block is leaked; the prefix cache is reused only within a namespace (0
 * shared by those that carry it), a sequence waits for another's prefill only within its
 * own, and eviction makes room across namespaces; a grammar (structured output) holds each
 * sequence to its schema, greedy alone and in a busy batch, and sampled. */
#include "engine.h"
#include "generate.h"
#include "scheduler.h"
#include "sched_out.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

static eng_model *model;
static tok_vocab *vocab;

static void setup(void)
{
    char err[512];
    cr_assert_eq(eng_model_load(MODEL, NULL, &model, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(eng_model_gguf(model), &vocab, err, sizeof err), 0, "%s", err);
}

static void teardown(void)
{
    tok_destroy(vocab);
    eng_model_destroy(model);
}

TestSuite(sched, .init = setup, .fini = teardown, .timeout = 300);

static const char *prompts[] = {
    "The capital of France is",
    "Once upon a time, there was a",
    "The three primary colors are",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "The largest planet in the solar system is",
};
#define NP 6

static int32_t *encode(const char *text, int *n)
{
    int32_t *ids = malloc(sizeof *ids * 256);
    cr_assert_eq(tok_encode(vocab, text, strlen(text), 0, ids, 256, n), 0);
    return ids;
}

static int run_logprobs; /* run()'s sequences ask for logprobs (top 2) */

static void run(struct sched_config cfg, struct out *outs, long *preemptions)
{
    sched *s;
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    sched_seq *q[NP];
    struct eng_gen_params p = greedy_params(24);
    p.logprobs = run_logprobs;
    p.top_logprobs = 2;
    for (int i = 0; i < NP; i++) {
        int n;
        int32_t *ids = encode(prompts[i], &n);
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &outs[i], &q[i]), 0);
        free(ids);
    }
    int steps = 0, rc;
    while ((rc = sched_step(s)) > 0) {
        cr_assert(++steps < 10000);
        struct sched_stats w;
        sched_get_stats(s, &w);
        cr_assert(w.waste_slots < (w.running > 0 ? w.running : 1) * cfg.block_size,
                  "waste %d slots for %d running sequences", w.waste_slots, w.running);
    }
    cr_assert_eq(rc, 0);
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.blocks_free + st.blocks_cached, st.blocks_total,
                 "every block back in the pool or in the prefix cache");
    cr_assert_eq(st.blocks_cached, st.blocks_evictable, "nothing cached stays locked");
    *preemptions = st.preemptions;
    sched_destroy(s);
}

static void alone_and_busy(enum kvc_dtype dtype)
{
    struct out alone[NP] = {0}, busy[NP] = {0};
    long pre_alone = 0, pre_busy = 0;
    /* alone: one sequence at a time, plenty of blocks */
    struct sched_config one = {1, 512, 64, 16, 0, 0, dtype};
    run(one, alone, &pre_alone);
    /* busy: all at once, small prefill chunks, a pool too small for all: preemption */
    struct sched_config many = {6, 12, 10, 4, 0, 1, dtype};
    run(many, busy, &pre_busy);
    fprintf(stderr, "sched: %ld preemptions in the busy run\n", pre_busy);
    cr_assert(pre_busy > 0, "the busy run must preempt");
    for (int i = 0; i < NP; i++) {
        cr_assert(alone[i].done && busy[i].done && !alone[i].err && !busy[i].err);
        cr_assert_str_eq(busy[i].text, alone[i].text, "prompt %d", i);
        cr_assert_eq(busy[i].completion, alone[i].completion);
    }
}

Test(sched, same_output_alone_and_in_a_busy_batch)
{
    alone_and_busy(KVC_F32);
}

/* the same with keys and values stored in F16, the server's default */
Test(sched, same_output_alone_and_in_a_busy_batch_f16)
{
    alone_and_busy(KVC_F16);
}

static int collect(void *ud, const char *t, size_t n)
{
    on_text(ud, t, n);
    return 0;
}

Test(sched, matches_generate)
{
    struct out o[NP] = {0};
    long pre;
    struct sched_config cfg = {4, 64, 64, 16, 0, 1, KVC_F32};
    run(cfg, o, &pre);
    /* eng_generate: the same model, sampler and stop pieces on one sequence at a time */
    for (int i = 0; i < NP; i++) {
        int n;
        int32_t *ids = encode(prompts[i], &n);
        struct eng_gen_params p = greedy_params(24);
        struct out g = {0};
        struct eng_gen_stats st;
        cr_assert_eq(eng_generate(model, vocab, ids, n, &p, collect, &g, &st), 0);
        cr_assert_str_eq(o[i].text, g.text, "prompt %d", i);
        cr_assert_eq(o[i].completion, st.completion_tokens);
        free(ids);
    }
}

Test(sched, cancel_returns_blocks_next_step)
{
    sched *s;
    struct sched_config cfg = {4, 64, 32, 16, 0, 1, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    struct out a = {0}, b = {0};
    int n;
    int32_t *ids = encode(prompts[0], &n);
    struct eng_gen_params p = greedy_params(200);
    sched_seq *qa, *qb;
    cr_assert_eq(sched_submit(s, 0, ids, n, &p, &a, &qa), 0);
    cr_assert_eq(sched_submit(s, 0, ids, n, &p, &b, &qb), 0);
    for (int i = 0; i < 5; i++)
        cr_assert(sched_step(s) > 0);
    struct sched_stats st;
    sched_get_stats(s, &st);
    int used = st.blocks_total - st.blocks_free;
    cr_assert(used > 0);
    sched_cancel(s, qa);
    sched_step(s);
    cr_assert(a.done && a.finish == ENG_FINISH_CANCELLED);
    cr_assert(!b.done);
    sched_get_stats(s, &st);
    cr_assert(st.blocks_total - st.blocks_free < used, "the cancelled blocks are back");
    sched_destroy(s); /* b is cancelled too, and reported */
    cr_assert(b.done && b.finish == ENG_FINISH_CANCELLED);
    free(ids);
}

/* One party's many queued sequences do not hold up another's: admission takes turns, so
 * with one or two places a sequence queued after six of another party's is admitted at the
 * next free place, and is done before most of them (oldest first, it was admitted last).
 * The same party's sequences still go oldest first. */
static void takes_turns(int places)
{
    sched *s;
    struct sched_config cfg = {places, 256, 64, 16, 0, 0, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    struct out a[6] = {0}, b = {0};
    sched_seq *q;
    int n;
    int32_t *ids = encode(prompts[1], &n);
    struct eng_gen_params p = greedy_params(16);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &a[i], &q), 0);
        sched_set_party(q, 1);
    }
    cr_assert_eq(sched_submit(s, 0, ids, n, &p, &b, &q), 0);
    sched_set_party(q, 2);
    int a_done_before_b = -1, order_ok = 1, rc;
    while ((rc = sched_step(s)) > 0) {
        if (b.done && a_done_before_b < 0) {
            a_done_before_b = 0;
            for (int i = 0; i < 6; i++)
                a_done_before_b += a[i].done;
        }
        for (int i = 1; i < 6; i++)
            order_ok &= !a[i].done || a[i - 1].done;
    }
    cr_assert_eq(rc, 0);
    cr_assert(b.done && !b.err);
    cr_assert(a_done_before_b >= 0 && a_done_before_b <= 1,
              "%d of the other party's 6 were done first", a_done_before_b);
    cr_assert(order_ok, "one party's sequences are admitted oldest first");
    sched_destroy(s);
    free(ids);
}

Test(sched, admission_takes_turns_between_parties)
{
    takes_turns(1);
    takes_turns(2);
}

/* Admission counts each party's running sequences in a table kept as sequences are
 * admitted, preempted, finished and cancelled (not by walking the running list for every
 * waiting one): many parties coming and going (more than the table holds at once, so it is
 * counted again), a pool small enough to preempt, and cancels, with the bookkeeping checked
 * after every step; every sequence ends, and every block is back. */
Test(sched, party_counts_follow_admissions_preemptions_and_cancels)
{
    enum { SEQS = 160, PARTIES = 23 };
    sched *s;
    struct sched_config cfg = {4, 24, 10, 4, 0, 1, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    static struct out outs[SEQS];
    memset(outs, 0, sizeof outs);
    sched_seq *q[SEQS];
    int ids_n[NP];
    int32_t *ids[NP];
    for (int i = 0; i < NP; i++)
        ids[i] = encode(prompts[i], &ids_n[i]);
    srand(11);
    int submitted = 0, steps = 0, rc = 1, cancels = 0;
    const char *what = "";
    while (submitted < SEQS || rc > 0) {
        for (int k = rand() % 3; k > 0 && submitted < SEQS; k--, submitted++) {
            struct eng_gen_params p = greedy_params(2 + rand() % 8);
            int i = submitted;
            cr_assert_eq(sched_submit(s, 0, ids[i % NP], ids_n[i % NP], &p, &outs[i], &q[i]),
                         0);
            sched_set_party(q[i], (uint64_t)(i * 7 % PARTIES));
        }
        if (submitted && rand() % 4 == 0) {
            int i = rand() % submitted;
            if (!outs[i].done) {
                sched_cancel(s, q[i]);
                cancels++;
            }
        }
        rc = sched_step(s);
        cr_assert(rc >= 0);
        cr_assert_eq(sched_check(s, &what), 0, "step %d: %s", steps, what);
        cr_assert(++steps < 20000);
    }
    struct sched_stats st;
    sched_get_stats(s, &st);
    fprintf(stderr, "sched: %d steps, %ld preemptions, %d cancels\n", steps, st.preemptions,
            cancels);
    cr_assert(st.preemptions > 0 && cancels > 0);
    for (int i = 0; i < SEQS; i++)
        cr_assert(outs[i].done && !outs[i].err, "sequence %d", i);
    cr_assert_eq(st.blocks_free + st.blocks_cached, st.blocks_total);
    sched_destroy(s);
    for (int i = 0; i < NP; i++)
        free(ids[i]);
}

static struct sched_stats drain(sched *s, int max_steps);

/* Under KV pressure, a party whose sequences all decode does not keep the pool from
 * another's: four of party 1 fill a pool of 8 blocks (2 each, none needing a third), and a
 * sequence of party 2 then takes a block of party 1's newest, which was in the batch,
 * instead of going back at every step until one of party 1's ends. Each answer is still
 * the one it gets alone. */
Test(sched, kv_pressure_preempts_the_heavier_party)
{
    sched *s;
    int n, m;
    int32_t *ids = encode(prompts[1], &n), *other = encode(prompts[2], &m);
    struct eng_gen_params pa = greedy_params(32 - n), pb = greedy_params(4);
    struct out alone = {0}, alone_b = {0}, a[4] = {0}, b = {0};
    sched_seq *q;
    struct sched_config roomy = {1, 256, 64, 16, 0, 0, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &roomy, &events, &s), 0);
    cr_assert_eq(sched_submit(s, 0, ids, n, &pa, &alone, &q), 0);
    cr_assert_eq(sched_submit(s, 0, other, m, &pb, &alone_b, &q), 0);
    drain(s, 1000);
    sched_destroy(s);
    cr_assert_eq(alone.completion, 32 - n, "no end of text before the second block fills");

    struct sched_config tight = {5, 256, 8, 16, 0, 0, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &tight, &events, &s), 0);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(sched_submit(s, 0, ids, n, &pa, &a[i], &q), 0);
        sched_set_party(q, 1);
    }
    struct sched_stats st;
    int steps = 0;
    do {
        cr_assert(sched_step(s) > 0 && ++steps < 100);
        sched_get_stats(s, &st);
    } while (st.blocks_free > 0);
    for (int i = 0; i < 4; i++)
        cr_assert(!a[i].done, "party 1 still decoding when the pool is full");
    cr_assert_eq(sched_submit(s, 0, other, m, &pb, &b, &q), 0);
    sched_set_party(q, 2);
    int a_done_before_b = -1, rc;
    while ((rc = sched_step(s)) > 0) {
        cr_assert(++steps < 1000);
        if (b.done && a_done_before_b < 0) {
            a_done_before_b = 0;
            for (int i = 0; i < 4; i++)
                a_done_before_b += a[i].done;
        }
    }
    cr_assert_eq(rc, 0);
    sched_get_stats(s, &st);
    cr_assert_eq(a_done_before_b, 0, "%d of party 1's were done first", a_done_before_b);
    cr_assert_geq(st.preemptions, 1);
    cr_assert_eq(st.blocks_free, st.blocks_total);
    cr_assert_str_eq(b.text, alone_b.text);
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(a[i].text, alone.text, "sequence %d", i);
    sched_destroy(s);
    free(ids);
    free(other);
}

/* Turns with the prefix cache: a party's sequences that wait for one of theirs to prefill a
 * shared prefix are passed over, and another party's goes in beside it at once; more
 * parties than the scheduler remembers turns of are all served. */
Test(sched, turns_pass_over_those_waiting_for_a_shared_prefill)
{
    sched *s;
    struct sched_config cfg = {2, 64, 64, 16, 0, 1, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    const char *shared = "The following is a long shared system prompt that several requests "
                         "of one tenant begin with, word for word, so that the prefix cache "
                         "has whole blocks of it to share between them. Question:";
    int n, m;
    int32_t *ids = encode(shared, &n), *other = encode(prompts[2], &m);
    cr_assert_gt(n, 2 * 16);
    struct eng_gen_params p = greedy_params(4);
    struct out a[3] = {0}, b = {0};
    sched_seq *q;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &a[i], &q), 0);
        sched_set_party(q, 1);
    }
    cr_assert_eq(sched_submit(s, 0, other, m, &p, &b, &q), 0);
    sched_set_party(q, 2);
    sched_step(s);
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.running, 2, "the other party's runs beside the first prefill");
    drain(s, 1000);
    for (int i = 0; i < 3; i++)
        cr_assert(a[i].done && !a[i].err && !strcmp(a[i].text, a[0].text));
    cr_assert(b.done && !b.err);
    sched_destroy(s);

    struct sched_config many = {4, 256, 64, 16, 0, 0, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &many, &events, &s), 0);
    enum { PARTIES = 70 };
    static struct out outs[PARTIES];
    memset(outs, 0, sizeof outs);
    p = greedy_params(2);
    for (int i = 0; i < PARTIES; i++) {
        cr_assert_eq(sched_submit(s, 0, other, m, &p, &outs[i], &q), 0);
        sched_set_party(q, (uint64_t)i + 1);
    }
    drain(s, 10000);
    for (int i = 0; i < PARTIES; i++)
        cr_assert(outs[i].done && !outs[i].err && !strcmp(outs[i].text, outs[0].text));
    sched_destroy(s);
    free(ids);
    free(other);
}

/* Runs the scheduler until nothing is left, at most max_steps steps; returns its stats. */
static struct sched_stats drain(sched *s, int max_steps)
{
    int steps = 0, rc;
    while ((rc = sched_step(s)) > 0)
        cr_assert(++steps < max_steps, "still running after %d steps", steps);
    cr_assert_eq(rc, 0);
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.blocks_free + st.blocks_cached, st.blocks_total);
    return st;
}

/* A sequence whose prompt fits the pool but whose answer would outgrow it ends with
 * length once it fills the pool, instead of preempting itself and recomputing forever
 * (which also held back every other request); with a pool of 2 blocks of 16 it has
 * prompt + completion = 33 tokens, the last one's position never computed. */
Test(sched, an_answer_that_would_outgrow_the_pool_ends_with_length)
{
    for (int prefix = 0; prefix < 2; prefix++) {
        sched *s;
        struct sched_config cfg = {4, 64, 2, 16, 0, prefix, KVC_F32};
        cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
        int n;
        int32_t *ids = encode(prompts[1], &n);
        struct eng_gen_params p = greedy_params(200);
        struct out o = {0};
        sched_seq *q;
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &o, &q), 0);
        struct sched_stats st = drain(s, 100);
        cr_assert(o.done && !o.err && o.finish == ENG_FINISH_LENGTH);
        cr_assert_eq(n + o.completion, 2 * 16 + 1, "prompt %d + completion %d", n,
                     o.completion);
        cr_assert_eq(st.preemptions, 0);
        sched_destroy(s);
        free(ids);
    }
}

/* More sequences admitted than the pool holds: those that find no block before computing
 * anything go back to the queue without being counted as preempted (they lose nothing),
 * and every answer is the one it gets alone. */
Test(sched, sequences_sent_back_before_computing_are_not_preemptions)
{
    struct out alone[4] = {0}, tight[4] = {0};
    sched *s;
    struct sched_config roomy = {1, 512, 64, 16, 0, 0, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &roomy, &events, &s), 0);
    struct eng_gen_params p = greedy_params(8);
    sched_seq *q;
    for (int i = 0; i < 4; i++) {
        int n;
        int32_t *ids = encode(prompts[i], &n);
        cr_assert(n + 8 <= 16, "each fits one block");
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &alone[i], &q), 0);
        free(ids);
    }
    drain(s, 1000);
    sched_destroy(s);
    /* room for two at a time: four are admitted, two go back each step until there is */
    struct sched_config two = {4, 64, 2, 16, 0, 0, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &two, &events, &s), 0);
    for (int i = 0; i < 4; i++) {
        int n;
        int32_t *ids = encode(prompts[i], &n);
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &tight[i], &q), 0);
        free(ids);
    }
    struct sched_stats st = drain(s, 1000);
    cr_assert_eq(st.preemptions, 0);
    for (int i = 0; i < 4; i++) {
        cr_assert(tight[i].done && !tight[i].err);
        cr_assert_str_eq(tight[i].text, alone[i].text, "prompt %d", i);
    }
    sched_destroy(s);
}

static void prefix_cache_reuse(enum kvc_dtype dtype)
{
    /* the same long prompt twice, one after the other: the second starts from the cache
     * and answers exactly as without it */
    const char *text = "The following is a long shared system prompt that many requests "
                       "repeat word for word before their own question. Question: what is "
                       "the capital of France?";
    int n;
    int32_t *ids = encode(text, &n);
    struct eng_gen_params p = greedy_params(16);
    for (int cache = 0; cache < 2; cache++) {
        struct sched_config cfg = {4, 64, 64, 16, 0, cache, dtype};
        sched *s;
        cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
        struct out first = {0}, second = {0};
        sched_seq *q;
        cr_assert_eq(sched_submit(s, 7, ids, n, &p, &first, &q), 0);
        while (sched_step(s) > 0)
            ;
        cr_assert_eq(sched_submit(s, 7, ids, n, &p, &second, &q), 0);
        while (sched_step(s) > 0)
            ;
        cr_assert_str_eq(second.text, first.text);
        if (cache) {
            fprintf(stderr, "sched: prompt of %d tokens, %d from the prefix cache\n", n,
                    second.cached);
            cr_assert_eq(second.cached, (n - 1) / 16 * 16, "every full block of the prompt");
            /* another namespace shares nothing */
            struct out other = {0};
            cr_assert_eq(sched_submit(s, 8, ids, n, &p, &other, &q), 0);
            while (sched_step(s) > 0)
                ;
            cr_assert_eq(other.cached, 0);
            cr_assert_str_eq(other.text, first.text);
        } else {
            cr_assert_eq(second.cached, 0);
        }
        sched_destroy(s);
    }
    free(ids);
}

Test(sched, prefix_cache_reuses_a_shared_prefix_with_the_same_output)
{
    prefix_cache_reuse(KVC_F32);
}

Test(sched, prefix_cache_reuses_a_shared_prefix_with_the_same_output_f16)
{
    prefix_cache_reuse(KVC_F16);
}

static const char *shared_text = "The following is a long shared system prompt that many requests "
                                 "repeat word for word before their own question. Question: "
                                 "what is the capital of France?";

/* Submits one sequence in ns and steps until everything is done. */
static void run_alone(sched *s, uint64_t ns, const int32_t *ids, int n, struct out *o)
{
    struct eng_gen_params p = greedy_params(16);
    sched_seq *q;
    cr_assert_eq(sched_submit(s, ns, ids, n, &p, o, &q), 0);
    int steps = 0;
    while (sched_step(s) > 0)
        cr_assert(++steps < 10000);
    cr_assert(o->done && !o->err);
}

static void expect_all_cached_blocks_unlocked(sched *s)
{
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.blocks_free + st.blocks_cached, st.blocks_total);
    cr_assert_eq(st.blocks_cached, st.blocks_evictable);
}

Test(sched, prefix_cache_namespaces_one_after_another)
{
    /* one prompt in turn through namespaces: cached only where it ran before under the
     * same ns; 0 (the global namespace) is shared by whoever carries it */
    static const struct {
        uint64_t ns;
        int cached; /* 1: every full block of the prompt but the last token's */
    } runs[] = {{1, 0}, {2, 0}, {1, 1}, {2, 1}, {0, 0}, {0, 1}, {3, 0}, {UINT64_MAX, 0}};
    int n;
    int32_t *ids = encode(shared_text, &n);
    struct sched_config cfg = {4, 64, 64, 16, 0, 1, KVC_F32};
    sched *s;
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    struct out first = {0};
    long want_total = 0;
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        struct out o = {0};
        run_alone(s, runs[i].ns, ids, n, &o);
        int want = runs[i].cached ? (n - 1) / 16 * 16 : 0;
        cr_assert_eq(o.cached, want, "run %zu (ns %llu): %d cached tokens, want %d", i,
                     (unsigned long long)runs[i].ns, o.cached, want);
        want_total += want;
        if (i == 0) first = o;
        cr_assert_str_eq(o.text, first.text, "run %zu", i);
        expect_all_cached_blocks_unlocked(s);
    }
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.tokens_cached, want_total, "the hit counter counts every namespace");
    sched_destroy(s);
    free(ids);
}

Test(sched, prefix_cache_waits_for_a_prefill_only_within_its_namespace)
{
    /* two sequences with the same prompt at once, prefilled in chunks of 8 tokens: in one
     * namespace the second waits for the first's prompt and starts from its blocks; in two
     * namespaces they run side by side and share nothing */
    int n;
    int32_t *ids = encode(shared_text, &n);
    cr_assert_gt(n, 24, "a prompt of several prefill chunks");
    static const uint64_t pairs[][2] = {{1, 1}, {1, 2}, {0, 0}, {0, 5}};
    struct out ref = {0};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        struct sched_config cfg = {4, 8, 64, 16, 0, 1, KVC_F32};
        sched *s;
        cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
        struct out a = {0}, b = {0};
        struct eng_gen_params p = greedy_params(16);
        sched_seq *qa, *qb;
        cr_assert_eq(sched_submit(s, pairs[i][0], ids, n, &p, &a, &qa), 0);
        cr_assert_eq(sched_submit(s, pairs[i][1], ids, n, &p, &b, &qb), 0);
        cr_assert(sched_step(s) > 0);
        struct sched_stats st;
        sched_get_stats(s, &st);
        int same = pairs[i][0] == pairs[i][1];
        cr_assert_eq(st.running, same ? 1 : 2, "pair %zu: %d running", i, st.running);
        cr_assert_eq(st.waiting, same ? 1 : 0, "pair %zu: %d waiting", i, st.waiting);
        int steps = 0;
        while (sched_step(s) > 0)
            cr_assert(++steps < 10000);
        cr_assert(a.done && b.done && !a.err && !b.err);
        cr_assert_eq(a.cached, 0);
        cr_assert_eq(b.cached, same ? (n - 1) / 16 * 16 : 0, "pair %zu: %d cached", i, b.cached);
        if (i == 0) ref = a;
        cr_assert_str_eq(a.text, ref.text);
        cr_assert_str_eq(b.text, ref.text);
        expect_all_cached_blocks_unlocked(s);
        sched_destroy(s);
    }
    free(ids);
}

Test(sched, prefix_cache_evicts_across_namespaces)
{
    /* a pool with room for one sequence only: each tenant's run must evict the previous
     * tenant's cached blocks (its prompt's, then its answer's) to complete */
    int n;
    int32_t *ids = encode(shared_text, &n);
    int need = (n + 16 + 15) / 16; /* prompt and up to 16 generated tokens */
    struct sched_config cfg = {4, 64, need, 16, 0, 1, KVC_F32};
    sched *s;
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    static const uint64_t order[] = {1, 2, 1, 3, 0};
    struct out first = {0};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        struct out o = {0};
        run_alone(s, order[i], ids, n, &o);
        cr_assert_eq(o.cached, 0, "run %zu: the earlier run of ns %llu was evicted", i,
                     (unsigned long long)order[i]);
        if (i == 0) {
            first = o;
            /* its positions reach into the pool's last block: no room left beside it */
            cr_assert_gt(n + o.completion - 1, (need - 1) * 16, "%d + %d tokens in %d blocks", n,
                         o.completion, need);
        }
        cr_assert_str_eq(o.text, first.text);
        cr_assert_eq(o.completion, first.completion);
        expect_all_cached_blocks_unlocked(s);
        struct sched_stats st;
        sched_get_stats(s, &st);
        cr_assert_gt(st.blocks_cached, 0);
    }
    /* and the last tenant's entry, still cached, serves it again */
    struct out o = {0};
    run_alone(s, 0, ids, n, &o);
    cr_assert_eq(o.cached, (n - 1) / 16 * 16);
    cr_assert_str_eq(o.text, first.text);
    sched_destroy(s);
    free(ids);
}

/* eng_token_logprob on logits worked by hand: log-softmax, the most likely first, ties to
 * the lower id, -inf and NaN never counted */
Test(sched, token_logprob_by_hand)
{
    const float l[] = {1.0f, 3.0f, 2.0f, -INFINITY, NAN, 3.0f};
    struct eng_token_lp lp;
    eng_token_logprob(l, 6, 2, 3, &lp);
    const double lse = log(exp(1.0) + exp(3.0) + exp(2.0) + exp(3.0));
    cr_assert_eq(lp.token, 2);
    cr_assert_float_eq(lp.logprob, 2.0 - lse, 1e-6);
    cr_assert_eq(lp.n_top, 3);
    cr_assert(lp.top[0] == 1 && lp.top[1] == 5 && lp.top[2] == 2, "%d %d %d", lp.top[0],
              lp.top[1], lp.top[2]);
    cr_assert_float_eq(lp.top_logprob[0], 3.0 - lse, 1e-6);
    cr_assert_float_eq(lp.top_logprob[2], 2.0 - lse, 1e-6);
    eng_token_logprob(l, 6, 3, 0, &lp);
    cr_assert(lp.logprob == -INFINITY && lp.n_top == 0);
    /* logits at +inf share all of the probability */
    const float inf[] = {0.0f, INFINITY, 5.0f, INFINITY};
    eng_token_logprob(inf, 4, 3, 2, &lp);
    cr_assert_float_eq(lp.logprob, -log(2.0), 1e-6);
    cr_assert(lp.top[0] == 1 && lp.top[1] == 3);
    eng_token_logprob(inf, 4, 2, 0, &lp);
    cr_assert(lp.logprob == -INFINITY);
}

/* A text generated alone with parameters p and an optional stop string. */
static void run_text(const char *text, struct eng_gen_params p, const char *stop, struct out *o)
{
    sched *s;
    struct sched_config cfg = {4, 64, 64, 16, 0, 1, KVC_F32};
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    const char *stops[1] = {stop};
    p.stop = stops;
    p.n_stop = stop != NULL;
    int n;
    int32_t *ids = encode(text, &n);
    sched_seq *q;
    cr_assert_eq(sched_submit(s, 0, ids, n, &p, o, &q), 0);
    free(ids);
    while (sched_step(s) > 0)
        ;
    sched_destroy(s);
    cr_assert(o->done && !o->err);
}

/* A text, greedy, with logprobs (top 5) or without, and an optional stop string. */
static void run_lp_text(const char *text, int logprobs, const char *stop, struct out *o)
{
    struct eng_gen_params p = greedy_params(20);
    p.logprobs = logprobs;
    p.top_logprobs = 5;
    run_text(text, p, stop, o);
}

static void run_lp(int prompt, int logprobs, const char *stop, struct out *o)
{
    run_lp_text(prompts[prompt], logprobs, stop, o);
}

/* A token's text as the vocabulary spells it. */
static size_t piece_of(int32_t tok, char *out)
{
    const char *b;
    size_t n;
    cr_assert_eq(tok_piece(vocab, tok, &b, &n), 0);
    memcpy(out, b, n);
    return n;
}

Test(sched, logprobs_follow_the_tokens_and_their_text)
{
    for (int i = 0; i < 3; i++) {
        static struct out plain, lp;
        memset(&plain, 0, sizeof plain);
        memset(&lp, 0, sizeof lp);
        run_lp(i, 0, NULL, &plain);
        run_lp(i, 1, NULL, &lp);
        cr_assert_str_eq(lp.text, plain.text, "asking for logprobs changes no token");
        cr_assert_eq(plain.n_lp, 0);
        cr_assert_eq(lp.n_lp, lp.completion, "a record a generated token");
        char joined[4096];
        size_t at = 0;
        for (int k = 0; k < lp.n_lp; k++) {
            const struct eng_token_lp *r = &lp.lp[k];
            cr_assert_eq(r->n_top, 5);
            cr_assert_eq(r->top[0], r->token, "greedy: the most likely token");
            cr_assert_float_eq(r->logprob, r->top_logprob[0], 1e-6);
            cr_assert(r->logprob <= 0 && r->logprob > -30, "%f", r->logprob);
            for (int t = 1; t < 5; t++)
                cr_assert(r->top_logprob[t] <= r->top_logprob[t - 1]);
            cr_assert_eq(lp.lp_at[k], at, "a record comes just before its token's text");
            at += piece_of(r->token, joined + at);
        }
        joined[at] = 0;
        cr_assert_str_eq(joined, lp.text, "the records spell the text");
    }
}

Test(sched, logprobs_of_a_stop_string_are_left_out)
{
    static struct out whole, cut;
    memset(&whole, 0, sizeof whole);
    memset(&cut, 0, sizeof cut);
    run_lp(1, 1, NULL, &whole);
    cr_assert(whole.len > 12, "%s", whole.text);
    char stop[5];
    memcpy(stop, whole.text + whole.len / 2, 4); /* a stop string inside the text */
    stop[4] = 0;
    run_lp(1, 1, stop, &cut);
    cr_assert(cut.len < whole.len && !memcmp(cut.text, whole.text, cut.len));
    cr_assert(cut.n_lp > 0 && cut.n_lp < whole.n_lp);
    /* the tokens reported are those whose text was sent, at least in part */
    char buf[64];
    size_t start = 0;
    for (int k = 0; k < cut.n_lp; k++) {
        cr_assert_eq(cut.lp[k].token, whole.lp[k].token);
        cr_assert(start < cut.len || (k == 0 && cut.len == 0), "token %d starts at %zu of %zu",
                  k, start, cut.len);
        start += piece_of(cut.lp[k].token, buf);
    }
    cr_assert(start >= cut.len, "every sent byte has its token");
}

/* Preempted and recomputed, a sequence keeps its records: the same as alone (within 1e-3,
 * the batch summing in another order). */
Test(sched, logprobs_survive_preemption)
{
    static struct out alone[NP], busy[NP];
    long pre_alone = 0, pre_busy = 0;
    run_logprobs = 1;
    struct sched_config one = {1, 512, 64, 16, 0, 0, KVC_F32};
    run(one, alone, &pre_alone);
    struct sched_config many = {6, 12, 10, 4, 0, 1, KVC_F32};
    run(many, busy, &pre_busy);
    run_logprobs = 0;
    cr_assert(pre_busy > 0, "the busy run must preempt");
    for (int i = 0; i < NP; i++) {
        cr_assert_str_eq(busy[i].text, alone[i].text, "prompt %d", i);
        cr_assert_eq(busy[i].n_lp, alone[i].n_lp, "prompt %d", i);
        cr_assert_eq(busy[i].n_lp, busy[i].completion, "prompt %d", i);
        for (int k = 0; k < busy[i].n_lp; k++) {
            cr_assert_eq(busy[i].lp[k].token, alone[i].lp[k].token);
            cr_assert_float_eq(busy[i].lp[k].logprob, alone[i].lp[k].logprob, 1e-3);
        }
    }
}

/* Characters of several tokens (CJK, emoji): a record a token still, each token's record
 * with the text that completes its character. */
Test(sched, logprobs_of_characters_split_across_tokens)
{
    static const char *texts[] = {"你好，我的名字是", "Emojis: 🐱🐶🎉🔥"};
    for (int i = 0; i < 2; i++) {
        static struct out o;
        memset(&o, 0, sizeof o);
        run_lp_text(texts[i], 1, NULL, &o);
        cr_assert_eq(o.n_lp, o.completion, "%s: a record a token", o.text);
        char joined[4096];
        size_t at = 0;
        for (int k = 0; k < o.n_lp; k++) {
            cr_assert(o.lp_at[k] <= at, "no record comes after its text");
            at += piece_of(o.lp[k].token, joined + at);
        }
        joined[at] = 0;
        /* a max_tokens cut inside a character ends the text with U+FFFD (stop.h) */
        size_t whole = o.len;
        if (whole >= 3 && !memcmp(o.text + whole - 3, "\xEF\xBF\xBD", 3))
            whole -= 3;
        cr_assert(at >= whole && !memcmp(joined, o.text, whole),
                  "the records spell the text: [%s] vs [%s]", joined, o.text);
        cr_assert(whole == o.len || at > whole, "the cut character's tokens have records");
    }
}

/* One token forced at every step (logit_bias +100, greedy), with logprobs. */
static void run_forced(int32_t tok, int max_tokens, const char *stop, struct out *o)
{
    struct eng_gen_params p = greedy_params(max_tokens);
    struct eng_logit_bias bias = {tok, 100};
    p.sampling.logit_bias = &bias;
    p.sampling.n_logit_bias = 1;
    p.logprobs = 1;
    p.top_logprobs = 1;
    run_text("Say something.", p, stop, o);
}

/* Control tokens (not ends) make no text: their records still come, at the end. */
Test(sched, logprobs_of_trailing_control_tokens)
{
    static struct out o;
    memset(&o, 0, sizeof o);
    int32_t start = tok_find(vocab, "<|im_start|>", 12);
    cr_assert(start >= 0 && !tok_is_eog(vocab, start));
    run_forced(start, 3, NULL, &o);
    cr_assert_eq(o.completion, 3);
    cr_assert_eq(o.len, 0, "%s", o.text);
    cr_assert_eq(o.n_lp, 3, "a record a token");
    for (int k = 0; k < o.n_lp; k++)
        cr_assert_eq(o.lp[k].token, start);
}

/* A byte that is no UTF-8 is sent as U+FFFD (3 bytes): a record still comes with the
 * text event that holds its token's text, while a stop string's prefix holds text back
 * (the records were measured in the decoder's bytes, and went out a chunk early). */
Test(sched, logprobs_keep_to_their_text_through_replacement_characters)
{
    static struct out o;
    memset(&o, 0, sizeof o);
    int32_t ff = tok_find(vocab, "\xc2\xa1", 2); /* byte 0xA1 alone, "¡" in the byte map */
    cr_assert(ff >= 0);
    run_forced(ff, 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz", &o);
    cr_assert_eq(o.completion, 4);
    cr_assert_eq(o.len, 12, "four U+FFFD");
    cr_assert_eq(o.n_lp, 4);
    for (int k = 0; k < o.n_lp; k++) {
        size_t start = 3 * (size_t)k;
        cr_assert_leq(o.lp_at[k], start, "record %d after its text", k);
        int c = 0; /* the text event right after the record */
        while (c < o.n_chunks && o.chunk_end[c] <= o.lp_at[k])
            c++;
        cr_assert(c < o.n_chunks && o.chunk_end[c] > start,
                  "record %d (text at %zu) came at %zu, before a text event that ends at %zu",
                  k, start, o.lp_at[k], c < o.n_chunks ? o.chunk_end[c] : 0);
    }
}

/* ---- structured output (grammar.h) ---------------------------------------------------- */

static const char *verdict_schema =
    "{\"type\": \"object\", \"properties\": {"
    "\"answer\": {\"enum\": [\"yes\", \"no\"]},"
    "\"confidence\": {\"type\": \"integer\"},"
    "\"reason\": {\"type\": \"string\", \"maxLength\": 40}},"
    "\"required\": [\"answer\", \"confidence\", \"reason\"], \"additionalProperties\": false}";

/* The schema's document: parsed by jansson, each property of its type. */
static void expect_verdict(const struct out *o, const char *what)
{
    cr_assert(o->done && !o->err, "%s", what);
    json_error_t je;
    json_t *v = json_loadb(o->text, o->len, 0, &je);
    cr_assert_not_null(v, "%s: not JSON (%s): %s", what, je.text, o->text);
    const char *a = json_string_value(json_object_get(v, "answer"));
    cr_expect(a && (!strcmp(a, "yes") || !strcmp(a, "no")), "%s: %s", what, o->text);
    cr_expect(json_is_integer(json_object_get(v, "confidence")), "%s: %s", what, o->text);
    json_t *r = json_object_get(v, "reason");
    cr_expect(json_is_string(r), "%s: %s", what, o->text);
    size_t chars = 0;
    for (const char *c = json_string_value(r); c && *c; c++)
        chars += ((unsigned char)*c & 0xC0) != 0x80;
    cr_expect_leq(chars, 40, "%s: %s", what, o->text);
    cr_expect_eq(json_object_size(v), 3, "%s: %s", what, o->text);
    json_decref(v);
}

static void run_grammar(struct sched_config cfg, const eng_grammar *g, float temperature,
                        int max_tokens, struct out *outs)
{
    sched *s;
    cr_assert_eq(sched_create(model, vocab, &cfg, &events, &s), 0);
    for (int i = 0; i < NP; i++) {
        struct eng_gen_params p = greedy_params(max_tokens);
        p.grammar = g;
        p.sampling.temperature = temperature;
        p.sampling.seed = (uint64_t)i;
        p.sampling.has_seed = 1;
        int n;
        int32_t *ids = encode(prompts[i], &n);
        sched_seq *q;
        cr_assert_eq(sched_submit(s, 0, ids, n, &p, &outs[i], &q), 0);
        free(ids);
    }
    int steps = 0;
    while (sched_step(s) > 0)
        cr_assert(++steps < 10000);
    struct sched_stats st;
    sched_get_stats(s, &st);
    cr_assert_eq(st.blocks_free + st.blocks_cached, st.blocks_total);
    sched_destroy(s);
}

Test(sched, a_grammar_holds_the_output_to_its_schema_alone_and_in_a_busy_batch)
{
    eng_grammar *g;
    char err[256];
    cr_assert_eq(eng_grammar_create(verdict_schema, strlen(verdict_schema), &g, err, sizeof err),
                 0, "%s", err);
    struct out alone[NP] = {0}, busy[NP] = {0}, free_text[NP] = {0};
    run_grammar((struct sched_config){1, 512, 64, 16, 0, 0, KVC_F32}, g, 0, 120, alone);
    run_grammar((struct sched_config){6, 12, 40, 4, 0, 1, KVC_F32}, g, 0, 120, busy);
    run_grammar((struct sched_config){6, 64, 64, 16, 0, 1, KVC_F32}, NULL, 0, 12, free_text);
    int json_free = 0;
    for (int i = 0; i < NP; i++) {
        expect_verdict(&alone[i], prompts[i]);
        cr_expect_eq(alone[i].finish, ENG_FINISH_STOP, "the document's end ends it");
        cr_expect_str_eq(busy[i].text, alone[i].text, "prompt %d", i);
        json_free += free_text[i].text[0] == '{';
    }
    cr_expect_eq(json_free, 0, "without the grammar these prompts are continued as text");
    eng_grammar_destroy(g);
}

/* An optional grammar (a call or words): an answer made to begin with "{" is held to the
 * schema, a stop string inside it not applied; words are left free, their stop strings
 * applied. */
Test(sched, an_optional_grammar_holds_a_document_or_leaves_words)
{
    eng_grammar *g;
    char err[256];
    cr_assert_eq(eng_grammar_create(verdict_schema, strlen(verdict_schema), &g, err, sizeof err),
                 0, "%s", err);
    int32_t brace = tok_find(vocab, "{", 1);
    cr_assert(brace >= 0);
    struct eng_logit_bias bias = {brace, 100};
    static struct out doc, words, plain;
    memset(&doc, 0, sizeof doc);
    memset(&words, 0, sizeof words);
    memset(&plain, 0, sizeof plain);
    struct eng_gen_params p = greedy_params(120);
    p.grammar = g;
    p.grammar_optional = 1;
    p.sampling.logit_bias = &bias;
    p.sampling.n_logit_bias = 1;
    run_text(prompts[0], p, "\"", &doc);
    expect_verdict(&doc, "begun with a brace");
    cr_expect_eq(doc.finish, ENG_FINISH_STOP);
    p.sampling.n_logit_bias = 0;
    run_text(prompts[0], p, ".", &words);
    run_text(prompts[0], greedy_params(120), ".", &plain);
    cr_expect(words.text[0] != '{' && words.len > 0, "%s", words.text);
    cr_expect_str_eq(words.text, plain.text, "words as without a grammar, cut by the stop");
    cr_expect(!strchr(words.text, '.') && plain.completion < 120, "%s", plain.text);
    eng_grammar_destroy(g);
}

Test(sched, sampled_output_keeps_to_the_grammar)
{
    eng_grammar *g;
    char err[256];
    cr_assert_eq(eng_grammar_create(verdict_schema, strlen(verdict_schema), &g, err, sizeof err),
                 0, "%s", err);
    struct out outs[NP] = {0}, again[NP] = {0};
    struct sched_config cfg = {6, 64, 96, 16, 0, 1, KVC_F32};
    run_grammar(cfg, g, 1.5f, 160, outs);
    run_grammar(cfg, g, 1.5f, 160, again);
    int stopped = 0;
    for (int i = 0; i < NP; i++) {
        cr_expect_str_eq(again[i].text, outs[i].text, "seeded: reproducible");
        if (outs[i].finish == ENG_FINISH_STOP) {
            expect_verdict(&outs[i], prompts[i]);
            stopped++;
        } else { /* cut by max_tokens: what there is, is a beginning the schema allows */
            eng_gm *m;
            cr_assert_eq(eng_gm_create(g, &m), 0);
            cr_expect(eng_gm_feed(m, outs[i].text, outs[i].len), "%s", outs[i].text);
            eng_gm_destroy(m);
        }
    }
    cr_expect_geq(stopped, NP / 2, "%d of %d complete", stopped, NP);
    /* any JSON object (json_object) */
    eng_grammar_destroy(g);
    cr_assert_eq(eng_grammar_create(NULL, 0, &g, err, sizeof err), 0);
    struct out obj[NP] = {0};
    run_grammar(cfg, g, 0.8f, 160, obj);
    for (int i = 0; i < NP; i++) {
        eng_gm *m;
        cr_assert_eq(eng_gm_create(g, &m), 0);
        cr_expect(eng_gm_feed(m, obj[i].text, obj[i].len), "%s", obj[i].text);
        if (obj[i].finish == ENG_FINISH_STOP) {
            json_t *v = json_loadb(obj[i].text, obj[i].len, 0, NULL);
            cr_expect(json_is_object(v), "%s", obj[i].text);
            json_decref(v);
        }
        eng_gm_destroy(m);
    }
    eng_grammar_destroy(g);
}
