/*
 * sampler — picks the next token of a sequence from its logits (eng_sampler_), with the
 * OpenAI parameters. One step runs, in this order:
 *
 *   logit_bias, penalties -> (argmax when temperature is 0) -> temperature -> top_k -> softmax
 *             -> top_p -> min_p -> draw
 *
 * logit_bias follows OpenAI: each listed token's bias (in [-100, 100]) is added to its
 * logit, so -100 bans a token in practice and 100 all but forces it.
 * Penalties follow OpenAI: a token accepted c > 0 times since the last reset loses
 * presence_penalty + c * frequency_penalty from its logit. The filters rank candidates by
 * (probability descending, id ascending), so ties always go to the lower id: argmax and
 * top_k = 1 give the same token, top_p keeps the shortest such prefix whose probability
 * mass reaches top_p, and min_p keeps p >= min_p * p_max. Logits of -inf (masked) or NaN
 * are never drawn, nor are tokens below e^-87 of the most likely one (weight 0 in float).
 *
 * Randomness: xoshiro256** seeded through splitmix64 from the seed (from getrandom()
 * when there is none). A sampled step takes exactly one 64-bit number x and picks the
 * first remaining token at which the running sum of weights exceeds u * total, with
 * u = (x >> 11) * 2^-53; tokens are in id order when no filter is on, else in an order
 * the filters fix. The weights' exp is the module's own float code, not libm's, so one
 * seed and one sequence of logits give one sequence of tokens on every run and machine
 * (with IEEE floats and no FMA contraction: GCC's default under -std=c11). Greedy steps
 * take no number.
 *
 * Cost per step, n_vocab = 150k: a few passes over the vocabulary, no sort (top_k keeps a
 * heap of k; top_p finds its edge through a histogram of weights).
 *
 * Ownership: the sampler owns its scratch ([n_vocab] candidates and counts); logits are
 * borrowed for one call. Threads: a sampler belongs to one sequence and is used by one
 * thread at a time; distinct samplers share nothing.
 */
#ifndef ENG_SAMPLER_H
#define ENG_SAMPLER_H

#include <stdint.h>

struct eng_logit_bias {
    int32_t token; /* [0, n_vocab) */
    float bias;    /* [-100, 100] */
};

#define ENG_MAX_LOGIT_BIAS 1024

struct eng_sampling {
    float temperature;       /* [0, 2]; 0: greedy */
    float top_p;             /* (0, 1]; 1: off */
    int top_k;               /* >= 0; 0: off */
    float min_p;             /* [0, 1], relative to the most likely token; 0: off */
    float presence_penalty;  /* [-2, 2] */
    float frequency_penalty; /* [-2, 2] */
    uint64_t seed;
    int has_seed; /* 0: seed from getrandom() */
    /* [n_logit_bias] <= ENG_MAX_LOGIT_BIAS; borrowed: eng_sampler_create() copies it */
    const struct eng_logit_bias *logit_bias;
    int n_logit_bias;
};

typedef struct eng_sampler eng_sampler;

/* OpenAI's defaults: temperature 1, every filter and penalty off, no seed. */
void eng_sampling_default(struct eng_sampling *p /* out */);
/* 0, or ENG_EINVAL when a parameter is out of its range (NaN included). */
int eng_sampling_check(const struct eng_sampling *p);
/* Reads top_p 0 as OpenAI does, the most likely token alone: top_k 1, top_p off. */
void eng_sampling_top_p_zero(struct eng_sampling *p);

/* Copies p and its logit_bias. ENG_EINVAL (bad p, a biased token outside [0, n_vocab),
 * n_vocab < 1), ENG_ENOMEM, ENG_EIO (getrandom failed). */
int eng_sampler_create(const struct eng_sampling *p, int n_vocab, eng_sampler **out);
void eng_sampler_destroy(eng_sampler *s); /* accepts NULL */

/* Records a generated token for the penalties. ENG_EINVAL when out of [0, n_vocab). */
int eng_sampler_accept(eng_sampler *s, int32_t token);
/* Forgets the accepted tokens; with a seed, the random stream restarts from it. */
void eng_sampler_reset(eng_sampler *s);

/* The next token, or ENG_EINVAL for a NULL argument. logits: [n_vocab], borrowed for the
 * call; the penalties are applied to it in place. When a logit is +inf (after temperature),
 * or none is finite, the token is the argmax: the lowest id at +inf, or 0. */
int32_t eng_sampler_sample(eng_sampler *s, float *logits);

/* For a backend that samples on its device (backend.h):
 * eng_sampler_device_adj() is how many logit amounts (logit_bias, then the penalties of
 * the tokens accepted so far) its next step adds;
 * eng_sampler_device_row() then sets row's parameters, writes those amounts to adj as
 * eng_sampler_sample() would add them (row->n_adj of them), and, for a sampled step, draws
 * the step's random number as eng_sampler_sample() would. row->row and row->adj_first are
 * left to the caller. */
int eng_sampler_device_adj(const eng_sampler *s);
struct eng_sample_row;
struct eng_logit_adj;
void eng_sampler_device_row(eng_sampler *s, struct eng_sample_row *row /* out */,
                            struct eng_logit_adj *adj /* out: [eng_sampler_device_adj(s)] */);

#endif
