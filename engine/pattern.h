/*
 * pattern — the regular expressions of JSON Schema's "pattern" (ECMA-262 syntax, no flags),
 * compiled into a position automaton (Glushkov's) over Unicode code points, for the
 * grammar (grammar.h) to hold a string's characters to as they are generated.
 *
 * Read: literal characters (UTF-8), ".", classes ([a-z], [^...], with \d \w \s and escapes
 * inside), \d \D \w \W \s \S, escapes of punctuation and of \n \r \t \f \v \0, \xHH,
 * \uHHHH; groups ( ), (?: ), (?<name> ); alternation |; quantifiers * + ? {n} {n,} {n,m}
 * (one a term, as ECMA-262 has it; lazy ones as greedy: the language is the same); ^ at
 * the start and $ at the end of the pattern or of a top-level alternative ("[]" matches
 * nothing and "[^]" any character, as ECMA-262 reads them). A pattern is not anchored
 * where it says not: "ab" takes any string that contains "ab", as JSON Schema reads it.
 * Refused with a message: backreferences, lookaround, \b \B, anchors elsewhere, a
 * quantifier after a quantifier, and a pattern of more than ENG_PAT_MAX_POS - 1 character
 * positions once counted repetition is spelled out ("\w{3,30}" is 30).
 *
 * Characters that a JSON string can carry only as \u escapes (the controls other than
 * \b \f \n \r \t) are taken out of every class, as are the surrogates: what is left is
 * always writable. A position whose class is left empty refuses the pattern.
 *
 * A state (ENG_PAT_MAX_POS bits) is the set of positions the next character may take, with
 * bit 0 set when the characters so far match: a token mask asks many questions of one state
 * and each reads it as it is. Immutable after compiling; any number of threads may read it.
 */
#ifndef ENG_PATTERN_H
#define ENG_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#define ENG_PAT_MAX_POS 256

typedef struct eng_pattern eng_pattern;

typedef struct {
    uint64_t w[ENG_PAT_MAX_POS / 64];
} eng_pat_set;

/* ENG_EINVAL with err naming what is refused, ENG_ENOMEM. */
int eng_pattern_compile(const char *re, size_t len, eng_pattern **out, char *err, size_t errlen);
void eng_pattern_destroy(eng_pattern *p); /* accepts NULL */

/* The state before any character. */
void eng_pat_start(const eng_pattern *p, eng_pat_set *s);
/* The state after code point cp: 1, or 0 when cp is refused (next empty). */
int eng_pat_step(const eng_pattern *p, const eng_pat_set *s, uint32_t cp, eng_pat_set *next);
/* Whether some code point in [lo, hi] is taken next, as the done-th character, with a
 * match of a total length in [len_lo, len_hi] (-1: no bound) still ahead (as
 * eng_pat_length_ok judges it). */
int eng_pat_any(const eng_pattern *p, const eng_pat_set *s, uint32_t lo, uint32_t hi, uint32_t done,
                int32_t len_lo, int32_t len_hi);
/* Whether the characters so far match. */
int eng_pat_accepting(const eng_pattern *p, const eng_pat_set *s);
/* The fewest characters still to write before a match can end: 0 when the characters so
 * far match, -1 when no match is ahead. With done characters written and no minLength
 * ahead, eng_pat_length_ok() holds for hi exactly when done + this <= hi. */
int32_t eng_pat_need(const eng_pattern *p, const eng_pat_set *s);
/* Whether, with done characters written, the string can still match and end with a total
 * length in [lo, hi] (hi -1: no bound). Judged by the shortest and longest way to a match
 * from each position the next character may take, so a length between the two that no
 * match has ("(aa)*", "x(a|bbbb)" before the x) passes: bounds that fall in such a gap can
 * leave a string no way to end. */
int eng_pat_length_ok(const eng_pattern *p, const eng_pat_set *s, uint32_t done, int32_t lo,
                      int32_t hi);

#endif
