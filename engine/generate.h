/*
 * generate — one sequence from prompt to finish: prefill, then sample, decode and stream
 * token by token until an end-of-generation token, a stop string or max_tokens. Used by
 * `cachegate generate`; the server's scheduler runs many sequences through the same
 * model, sampler, tokenizer and stop pieces.
 *
 * Text is streamed through a callback as soon as it is safe: never half a UTF-8
 * character, never a piece of a stop string. The finish reason is "stop" (end token or
 * stop string) or "length" (max_tokens or the model's context).
 *
 * One call at a time per model (the engine thread).
 */
#ifndef ENG_GENERATE_H
#define ENG_GENERATE_H

#include "chat.h"
#include "grammar.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#include <stddef.h>
#include <stdint.h>

struct eng_gen_params {
    int max_tokens;
    struct eng_sampling sampling;
    const char *const *stop; /* up to 4 */
    int n_stop;
    enum kvc_dtype kv_dtype; /* of the KV pool on the CPU (0: KVC_F32) */
    /* 1: report each generated token's log-probability (struct eng_token_lp), with the
     * top_logprobs (0..ENG_MAX_TOP_LOGPROBS) most likely tokens of its step (scheduler) */
    int logprobs, top_logprobs;
    /* NULL, or the JSON the output must be (grammar.h); borrowed until the sequence's done
     * event (scheduler) */
    const eng_grammar *grammar;
    /* 1: the grammar holds the output only if it begins a document, and the stop strings
     * only if it does not (eng_gm_optional: a function call or a reply) */
    int grammar_optional;
    /* more documents that may follow the first, each after a line break (eng_gm_repeat:
     * parallel function calls) */
    int grammar_more;
};

#define ENG_MAX_TOP_LOGPROBS 20

/* A generated token's log-probability under the model: the log-softmax of its logits as
 * the model gave them (before logit_bias, penalties and temperature, as vLLM reports by
 * default), and the step's most likely tokens, most likely first (ties: lower id). */
struct eng_token_lp {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top[ENG_MAX_TOP_LOGPROBS];
    float top_logprob[ENG_MAX_TOP_LOGPROBS];
};

/* Fills lp for token from one step's logits[n_vocab] (read only), with n_top alternatives. */
void eng_token_logprob(const float *logits, int n_vocab, int32_t token, int n_top,
                       struct eng_token_lp *lp /* out */);

enum eng_finish { ENG_FINISH_STOP = 0, ENG_FINISH_LENGTH, ENG_FINISH_CANCELLED };

struct eng_gen_stats {
    int prompt_tokens, completion_tokens;
    enum eng_finish finish;
    double prefill_s, decode_s; /* wall time of the prefill and of the decode steps */
};

/* Return nonzero to cancel. text is borrowed for the call. */
typedef int (*eng_gen_emit_fn)(void *ud, const char *text, size_t len);

int eng_generate(eng_model *m, const tok_vocab *v, const int32_t *prompt, int n_prompt,
                 const struct eng_gen_params *p, eng_gen_emit_fn emit, void *ud,
                 struct eng_gen_stats *stats /* out */);

/* Tokenizes a rendered chat prompt: template segments with special tokens matched,
 * content without. *ids (out) is malloc'd. */
int eng_chat_tokenize(const tok_vocab *v, const struct eng_chat_prompt *p, int32_t **ids,
                      int *n);

const char *eng_finish_name(enum eng_finish f);

#endif
