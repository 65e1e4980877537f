/*
 * scheduler — continuous batching of many sequences through one model (sched_).
 *
 * Every iteration (sched_step) builds one forward batch: one decode token for every
 * running sequence that has finished its prompt, then prompt chunks of the others (and
 * of newly admitted ones) while the token budget (max_num_batched_tokens) and the number
 * of sequences (max_num_seqs) allow. KV blocks are taken from the pool as positions need
 * them; when the pool runs dry the newest running sequence (of the party, sched_set_party,
 * with the most running; one already in the batch being built only to make room for a
 * party with fewer) is preempted: its blocks go back and it waits, at the front of the
 * queue, to be recomputed (prompt and the tokens it already generated); one admitted in
 * the same iteration goes back the same way, but having computed nothing it is not
 * counted as preempted. A sequence ends (length) when it reaches max_model_len or would
 * outgrow the whole pool, where even alone it could not go on. Cancelled sequences are
 * dropped at the next iteration, their blocks back in the pool before the forward pass.
 *
 * Prefix caching (radix.h): an admitted sequence starts from the longest cached prefix of
 * its namespace, whose blocks it shares; a finished one is inserted, generated tokens
 * included, so the next turn of a conversation reuses the whole history. Unused cached
 * blocks are evicted, least recently used first, before anyone is preempted.
 *
 * Output goes through callbacks on the calling thread: text as soon as it is safe to
 * stream (never half a character, never part of a stop string), then one done event.
 *
 * Single-threaded: the engine thread owns the scheduler, its sequences and the pool.
 */
#ifndef ENG_SCHEDULER_H
#define ENG_SCHEDULER_H

#include "generate.h"
#include "kvcache.h"
#include "model.h"
#include "radix.h"
#include "tokenizer.h"

#include <stdint.h>

typedef struct sched sched;
typedef struct sched_seq sched_seq;

struct sched_config {
    int max_num_seqs;           /* sequences in one batch */
    int max_num_batched_tokens; /* tokens in one forward pass */
    int n_blocks, block_size;   /* the KV pool */
    int max_model_len;          /* prompt + output; 0: the model's training context */
    int prefix_caching;         /* 1: share and keep KV through the radix tree */
    enum kvc_dtype kv_dtype;    /* of a host pool (a device backend has its own) */
};

struct sched_events {
    void (*on_text)(void *ud, const char *text, size_t len);
    /* may be NULL. A sequence that asked for logprobs: the records of its tokens whose text
     * the next on_text carries (or carried, in part, before a stop string or the end),
     * called just before it; at the end, those of tokens whose text was partly emitted.
     * Tokens wholly inside a matched stop string, and end-of-generation tokens, have none. */
    void (*on_logprobs)(void *ud, const struct eng_token_lp *lp, int n);
    /* err: 0, or an ENG_ error (the sequence failed); finish is then meaningless */
    void (*on_done)(void *ud, int err, enum eng_finish finish, int prompt_tokens,
                    int completion_tokens, int cached_tokens);
};

int sched_create(eng_model *m, const tok_vocab *v, const struct sched_config *cfg,
                 const struct sched_events *ev, sched **out);
/* The longest prompt + output a scheduler made with this max_model_len runs (0 or more
 * than the model's training context: that context). */
int sched_max_model_len(const eng_model *m, int max_model_len);
/* Every sequence still held gets on_done with ENG_FINISH_CANCELLED first. */
void sched_destroy(sched *s);

/*
 * Queues a sequence. ns: its prefix-cache namespace: a sequence reuses cached KV only
 * from sequences of the same ns, and waits for one still prefilling a common prefix only
 * within it (the gateway passes the tenant's; 0 is the shared global one). prompt and the
 * p->stop strings are copied. ud is passed to the events. ENG_EINVAL when the prompt is
 * empty or does not fit max_model_len, ENG_EFULL when it cannot fit the pool alone.
 */
int sched_submit(sched *s, uint64_t ns, const int32_t *prompt, int n_prompt,
                 const struct eng_gen_params *p, void *ud, sched_seq **out);
/* Whose the sequence is (the gateway: its tenant; by default its ns). Admission takes
 * turns: a waiting sequence of the party with the fewest running goes first, among equals
 * that of the party whose last turn is the oldest, and within a party the oldest, so that
 * one party's many queued sequences do not hold up the others'. */
void sched_set_party(sched_seq *q, uint64_t party);
/* Marks a sequence cancelled; it is dropped at the next step (on_done: cancelled). */
void sched_cancel(sched *s, sched_seq *q);

/* One iteration. Returns the number of sequences still running or waiting, or an error
 * (the batch's sequences then fail with it). */
int sched_step(sched *s);

struct sched_stats {
    int running, waiting;
    int blocks_free, blocks_total;
    long preemptions; /* sequences that lost computed positions to make room */
    long tokens_generated, tokens_prompt, tokens_cached;
    int blocks_cached, blocks_evictable; /* held by the prefix cache */
    int waste_slots; /* allocated token slots holding no position: < one block a sequence */
};
void sched_get_stats(const sched *s, struct sched_stats *out);

/* Checks the scheduler's own bookkeeping (for tests): the running sequences' count, and
 * each party's count of running sequences against the running list. 0, or -1 with what
 * (a static string) naming the first that is wrong. */
int sched_check(const sched *s, const char **what);

#endif
