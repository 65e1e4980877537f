/*
 * sched_out.h — for the scheduler tests (tests/engine/test_scheduler.c, test_backend.c,
 * tests/gpu/test_eng_cuda.c): collects one sequence's streamed text, its logprobs records
 * and its done event, and makes greedy generation parameters.
 */
#ifndef TESTS_SCHED_OUT_H
#define TESTS_SCHED_OUT_H

#include "generate.h"
#include "scheduler.h"

#include <criterion/criterion.h>
#include <string.h>

struct out {
    char text[4096];
    size_t len;
    int done, err, completion, cached;
    enum eng_finish finish;
    /* logprobs: the records, and how much text had come before each arrived */
    struct eng_token_lp lp[256];
    size_t lp_at[256];
    int n_lp;
    size_t chunk_end[512]; /* where each text event's text ended */
    int n_chunks;
};

static void on_text(void *ud, const char *t, size_t n)
{
    struct out *o = ud;
    cr_assert(o->len + n < sizeof o->text);
    memcpy(o->text + o->len, t, n);
    o->len += n;
    o->text[o->len] = 0;
    if (o->n_chunks < 512)
        o->chunk_end[o->n_chunks++] = o->len;
}

static void on_logprobs(void *ud, const struct eng_token_lp *lp, int n)
{
    struct out *o = ud;
    cr_assert(n > 0 && o->n_lp + n <= 256);
    for (int i = 0; i < n; i++) {
        o->lp_at[o->n_lp] = o->len;
        o->lp[o->n_lp++] = lp[i];
    }
}

static void on_done(void *ud, int err, enum eng_finish f, int prompt, int completion,
                    int cached)
{
    (void)prompt;
    struct out *o = ud;
    cr_assert_eq(o->done, 0, "done twice");
    o->done = 1;
    o->err = err;
    o->finish = f;
    o->completion = completion;
    o->cached = cached;
}

static const struct sched_events events = {
    .on_text = on_text, .on_logprobs = on_logprobs, .on_done = on_done};

static struct eng_gen_params greedy_params(int max_tokens)
{
    struct eng_gen_params p = {.max_tokens = max_tokens};
    eng_sampling_default(&p.sampling);
    p.sampling.temperature = 0;
    return p;
}

#endif
