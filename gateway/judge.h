/*
 * judge — a learned second opinion on a semantic-cache candidate that the guard (guard.h)
 * let through: whether the stored question and the new one ask the same thing, from how
 * their tokens line up in the embedding model's own hidden states.
 *
 * The guard's rules catch the well-known ways two close questions differ; what passes
 * them and is still another question is mostly one content word without a counterpart on
 * the other side ("strength training" / "hypertrophy training", "Oscars won" / "Oscars
 * nominated for"). The judge reads each side's word tokens (punctuation, [CLS] and [SEP]
 * left out) after three layers of the embedder (the embeddings, the middle layer, the
 * last), unit-normalised, and for each layer how well every token of one side finds its
 * best match on the other: the worst and second worst match, the mean, and how many fall
 * under 0.5 and 0.7, each way; with the cosine of the wholes, the sides' token counts and
 * their token ids in common. A forest of gradient-boosted regression trees, trained on the
 * labelled pairs of tests/bench (tests/bench/train_judge.py, which writes judge_model.inc),
 * turns these features into the probability that the two are the same question; the cache
 * refuses the candidate under cache.judge_threshold.
 *
 * Threads: gw_judge_texts() uses the embedding model, so it runs where the model's other
 * calls run (the embed worker); the rest are pure functions.
 */
#ifndef GW_JUDGE_H
#define GW_JUDGE_H

#include <stddef.h>
#include <stdint.h>

#include "embedder.h"

enum { GW_JUDGE_LAYERS = 3, GW_JUDGE_FEATURES = 37 };

/* One side: its word tokens' unit-normalised hidden states after each judged layer. */
struct gw_judge_text {
    int n, dim;      /* word tokens (at least 1: a text of none keeps its [CLS]), dims */
    float *states;   /* [GW_JUDGE_LAYERS][n][dim]: the embeddings, middle, last layer */
    int32_t *ids;    /* [n] */
};

/* Embeds texts[0..n) in one forward pass (as the cache embeds a question: a long one keeps
 * its end) and keeps each one's word tokens' states in out[i]. 0, or an EMB_ error (and
 * out all empty). */
int gw_judge_texts(emb_model *m, const char *const *texts, const size_t *lens, int n,
                   struct gw_judge_text *out);
void gw_judge_text_free(struct gw_judge_text *t); /* zeroes it; accepts an empty one */
/* t's copy into out; 0, or -1 when out of memory (out empty) */
int gw_judge_text_copy(const struct gw_judge_text *t, struct gw_judge_text *out);
/* The layers the judge reads ([GW_JUDGE_LAYERS]), as emb_token_states() takes them. */
void gw_judge_layers(const emb_model *m, int *layers);
/* Text i's tokens of a pass that kept the states of gw_judge_layers() (emb_encode_keep()),
 * as gw_judge_texts() makes them. 0, or EMB_ENOMEM (and out empty). */
int gw_judge_kept(const emb_model *m, const struct emb_keep *keep, int i,
                  struct gw_judge_text *out);

/* The features of a stored question and a new one (f: [GW_JUDGE_FEATURES]), sim the
 * cosine of their embeddings: [0] sim; for each layer (embeddings, middle, last) 10: the
 * worst stored->new and new->stored match, the second worst each way, the means each way,
 * the counts under 0.5 each way, the counts under 0.7 each way; then the stored side's and
 * the new side's token count, their difference, the distinct ids of the stored side not on
 * the new, of the new not on the stored, and the Jaccard overlap of the two id sets. */
void gw_judge_features(const struct gw_judge_text *stored, const struct gw_judge_text *query,
                       double sim, float *f);

/* The probability that the two ask the same question, from their features. */
double gw_judge_score(const float *f);

/* What the forest was trained on, for the log line: "N trees, trained on M pairs". */
const char *gw_judge_model_name(void);

#endif
