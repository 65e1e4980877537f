/*
 * guard — the semantic cache's last check. The embedding says two questions are close;
 * the guard looks for the cheap, well-known ways two close questions still ask different
 * things, and vetoes the hit when it finds one:
 *
 *   numbers      15 vs 25, "second" vs "2nd" agree, "World War II" vs "World War I" not;
 *                a number marked otherwise ("200°C" vs "200°F", "$50" vs "€50", "A4" vs "S4")
 *   negation     one side says not / n't / never / no / without / X-free / X-less, or keeps
 *                something from doing it ("keep my screen from turning off"), the other not
 *   opposites    a general lexicon of contrast pairs and closed classes (enable/disable,
 *                larger/smaller, Monday/Friday, Celsius/Kelvin, Python/Rust) and the
 *                negating prefixes un-/dis-/in-/non-/de- (install/uninstall)
 *   names        a proper noun, acronym, quoted text or code identifier of one side that
 *                the other side does not mention
 *   swap         the two questions are the same words except for one or two aligned
 *                content words (symptoms of the flu / of a cold), or a question word
 *                (when/where, what is / where is, can cats eat / how much can cats eat)
 *   order        "x to y" on one side, "y to x" on the other; two words trading places;
 *                roles turned ("can I sue my employer" / "can my employer sue me", "did
 *                Brutus kill Caesar" / "was Brutus killed by Caesar")
 *   added        a qualifier one side adds ("vegan lasagna", "symptoms in children"), or
 *                any word it inserts into the same sentence ("a mechanical keyboard")
 *   modal        "should I" vs "do I have to" vs "can I"
 *   tense, time  "who is" vs "who was", "who sang" vs "who sings", "who will win" vs "who
 *                won", "used to be" vs "is", "this year" vs "last year"
 *   measure      "how wide is it" vs "how tall is it"
 *   scope        one of a thing vs all of them
 *   operation    another operation on a number ("the square root of 16" vs "the square")
 *
 * Precision comes before recall: a vetoed hit is a miss, a wrong hit is a wrong answer.
 * Text is compared after light normalization (ASCII lowercase, contractions with or without
 * their apostrophe, possessive 's, plurals, irregular verbs' forms, a hyphened prefix glued:
 * step-mother is stepmother, British and American spellings, a slip of one letter in a long
 * word, "$50" as "50 dollar"), so case and rewording alone never veto. Bytes >= 0x80 are
 * word bytes; nothing is case-folded outside ASCII.
 *
 * Pure functions: no allocation, no global state after a one-time lexicon build (done
 * under pthread_once on first use) and the list of known words, if one is given, read once
 * before the first check (gw_guard_known_words()). Any thread may call them. Inputs need not be
 * NUL-terminated and are never read past their lengths. An input longer than the guard's
 * fixed buffers (about 250 words) is vetoed rather than half-checked.
 */
#ifndef GW_GUARD_H
#define GW_GUARD_H

#include <ctype.h>
#include <stddef.h>

/* A letter or digit, or a byte of a character beyond ASCII (a letter, most likely): a byte
 * of a word, for the guard and the cache's normalization alike. */
static inline int gw_wordy(unsigned char ch)
{
    return (ch & 0x80) || isalnum(ch);
}

/*
 * The words of a language the guard may take as spelt right: a vocabulary file, one entry
 * a line (an embedding model's vocab.txt; entries that are not a lower-case word of two
 * ASCII letters or more, "##ing", "[CLS]", "3d", are skipped). With it, a word of one side
 * that is not on the list and is one slip from a word of the other (a letter left out,
 * added, changed or two swapped: "chnage", "reciept") is read as that word; without it, or
 * where both are on the list ("desert" and "dessert", "car" and "cat"), only the guard's
 * own few spelling forms are. Call it before any other call of this header, from one
 * thread; each call adds a file's words to those of the calls before. 0, or -1 with err set
 * (the words of the calls before stay in use; with none, the guard reads no misspelling).
 */
int gw_guard_known_words(const char *path, char *err, size_t errlen);

/*
 * 1 when an answer stored for `stored` may serve `query` as far as the guard can tell; 0
 * when they differ in a way that changes the meaning. why (may be NULL): a short reason,
 * e.g. "numbers differ: 15 vs 25", always NUL-terminated when whylen > 0 ("" on 1).
 */
int gw_guard_compatible(const char *stored, size_t slen, const char *query, size_t qlen, char *why,
                        size_t whylen);

/*
 * The stricter check for a close call: a candidate whose embedding similarity reached the
 * threshold but not the level where the embedding alone is to be trusted (the cache's
 * guard_strict_below). There, two questions that share most of their words yet differ a
 * little are usually two questions: the close call also vetoes when one side says all that
 * the other says and adds a word of its own (request phrasing aside: "Good movies to watch
 * tonight" vs "Good horror movies ..."), and when the two open with different question
 * words of where, when, who ("Where do pandas live?" vs "What do pandas eat?"). Rewordings
 * ("How do I defrost chicken quickly?" vs "What's the fastest way to thaw chicken?") pass.
 * Call it after gw_guard_compatible() has passed; same contract.
 */
int gw_guard_close_call(const char *stored, size_t slen, const char *query, size_t qlen,
                        char *why, size_t whylen);

/*
 * Whether two questions say the same content words, each side's all found on the other as
 * they are or in another form (a one-letter slip, British spelling, an abbreviation and the
 * words it stands for, a synonym), open with the same question word, and pass the guard
 * and the close call: a rewording the embedding underrates ("How do I kill a process in
 * Linux?" vs "how do i terminate a proccess on linux", 0.72). 1 or 0.
 */
int gw_guard_same_words(const char *stored, size_t slen, const char *query, size_t qlen);

/*
 * Where two texts that share whole sentences or lines differ: a template, the same
 * context around another question (retrieval-augmented prompts put the retrieved passages
 * and the question in one message). Their similarity as wholes is mostly the shared
 * context's, so the question is to be compared alone: the sentences (or lines) from the
 * first difference to the last, in each text, less those both have between them (a fact
 * changed in the context and the question after it: the shared paragraphs between the two
 * are left out). 1 with out set when the shared sentences are at least as long as the rest
 * (and 40 bytes); 0 when the texts are to be compared whole (one sentence each, or one
 * adds to the other). Release out with gw_guard_core_free().
 */
struct gw_core {
    size_t aoff, alen, boff, blen; /* from the first differing sentence to the last */
    char *a, *b;                   /* their sentences the other lacks, in order */
    size_t an, bn;
    int asked_after; /* a sentence both share, a question, comes after one that differs */
};
int gw_guard_core(const char *a, size_t alen, const char *b, size_t blen, struct gw_core *out);
void gw_guard_core_free(struct gw_core *c);

/*
 * The rule on code and arithmetic alone (operators, lines' indentation), on whole texts:
 * for texts compared by their differing sentences, whose layout only the lines around
 * them show (a return moved into an if). Same contract as gw_guard_compatible().
 */
int gw_guard_code_compatible(const char *stored, size_t slen, const char *query, size_t qlen,
                             char *why, size_t whylen);

#endif
