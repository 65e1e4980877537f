/*
 * wordpiece — BERT's tokenizer: basic tokenization, then greedy longest-match-first
 * WordPiece over a vocabulary.
 *
 * Basic tokenization, in the order BERT applies it (HF BertNormalizer +
 * BertPreTokenizer): drop NUL, U+FFFD and control/format/unassigned characters and map
 * whitespace to spaces; put spaces around CJK ideographs; when stripping accents,
 * decompose (NFD) and drop non-spacing marks; lower-case; split on whitespace and
 * isolate every punctuation character. A word longer than max_chars characters, or
 * one WordPiece cannot cover, becomes [UNK]; continuations carry the "##" prefix.
 *
 * Immutable after creation; any number of threads may tokenize at once.
 */
#ifndef EMB_WORDPIECE_H
#define EMB_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

typedef struct emb_wp emb_wp;

struct emb_wp_options {
    int lowercase;
    int strip_accents;
    int chinese_chars;
    int max_chars; /* per word; 100 in BERT */
};

/* vocab.txt: one token per line, the id is the line number. */
int emb_wp_create(const char *vocab_path, const struct emb_wp_options *opt, emb_wp **out,
                  char *err, size_t errlen);
void emb_wp_destroy(emb_wp *wp); /* accepts NULL */

/* -1 when absent */
int32_t emb_wp_id(const emb_wp *wp, const char *token);
int emb_wp_vocab_size(const emb_wp *wp);
/* 1 when token id has a letter, a digit, '_' or a byte past ASCII ("##s", "[UNK]"), 0 for
 * punctuation only ("?", "##."), -1 for an id out of range. */
int emb_wp_is_word(const emb_wp *wp, int32_t id);

/*
 * [CLS] pieces [SEP] for text, at most max_ids ids in all (pieces are cut to fit;
 * tokenization stops early once full). Returns the count, or a negative EMB_ error.
 */
int emb_wp_encode(const emb_wp *wp, const char *text, size_t len, int32_t *ids, int max_ids);
/*
 * The same, except that a text too long to fit keeps its end too: [CLS], its first pieces,
 * its last (max_ids - 2) / 2 pieces, [SEP]. (A question asked after a long retrieved
 * context is at its end.) A text that fits is encoded as emb_wp_encode() does it.
 */
int emb_wp_encode_ends(const emb_wp *wp, const char *text, size_t len, int32_t *ids,
                       int max_ids);

#endif
