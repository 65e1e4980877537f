/*
 * grammar — structured output: generation held to JSON, or to JSON that a JSON Schema
 * accepts (eng_grammar_, eng_gm_). OpenAI's response_format json_object and json_schema.
 *
 * A schema is compiled once (eng_grammar_create) into a graph of nodes; a matcher
 * (eng_gm) is one sequence's place in that graph: a small set of parse stacks ("threads",
 * one per reading still possible, as anyOf or ["string", "null"] leave several), fed the
 * bytes of each token the sequence takes. Before a token is taken, the scheduler asks
 * whether the grammar allows it (eng_gm_allows); when it does not, eng_gm_mask() sets
 * every refused token's logit to -inf by walking a trie of the vocabulary's byte pieces
 * (eng_gm_vocab) with the matcher's state, a branch abandoned at its first refused byte
 * (inside a string without a pattern, a printable ASCII byte other than '"' and '\'
 * changes only the string's count of characters, and is taken without stepping the state;
 * inside one with a pattern, only the pattern's state, and is taken through a DFA of the
 * pattern's states that the matcher builds as its masks meet them).
 *
 * What is generated is always valid JSON and always valid for the schema, but not every
 * valid document can be generated (generation is free to choose, the schema to accept):
 *   - an object's declared properties come in the schema's order; optional ones may be
 *     left out; no other property is written, whatever additionalProperties says (an
 *     object with no declared properties takes any keys, with the values that
 *     additionalProperties allows: any when absent or true, none when false);
 *   - white space: one space after a colon; after an opening bracket or a comma and
 *     before a closing bracket, at most one line break, then at most 20 spaces or tabs
 *     (a small model could otherwise loop on blank lines); none before a colon or a
 *     comma, nor before or after the document, whose end ends the generation (but
 *     with eng_gm_repeat);
 *   - numbers: at most 16 digits before the point, 16 after it and 3 in an exponent; a
 *     number with bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum,
 *     multipleOf) without an exponent, and refused at the first byte after which no value
 *     within them can be written (its digits are kept and the bounds compared exactly, in
 *     units of 10^-16; a bound such as 0.1 is read as the shortest decimal of its double);
 *   - at most ENG_GM_MAX_DEPTH - 1 levels of nesting: no value, key, item or comma is
 *     begun where what it begins could not be finished within them (an optional
 *     recursion stops where it must and closes), and a schema none of whose documents is
 *     finite ({"$ref": "#"}, a required property that requires its object again) or that
 *     requires deeper nesting is refused;
 *   - ENG_GM_MAX_THREADS readings at once
 *     (the earliest kept: a schema that branches more is still generated validly, from
 *     fewer of its alternatives); a byte's reading stops after 4,096 steps and 16 unions
 *     entered, so that a hostile schema (unions of unions of itself) costs bounded time.
 *
 * Schema keywords read: type (a name or a list), properties, required,
 * additionalProperties, items, prefixItems (a tuple; items holds those after it), minItems,
 * maxItems, minLength, maxLength, minimum,
 * maximum, exclusiveMinimum and exclusiveMaximum (numbers, or draft 4's flags),
 * multipleOf, pattern (pattern.h: a string's characters go through its automaton; a
 * string held to one is written without \u escapes), format date, time, date-time, email,
 * uuid and ipv4 (held to as patterns; other formats are annotations, as the standard has
 * them), enum, const, anyOf, oneOf (generated as anyOf; a union of objects whose first
 * property is the same key, required, with a distinct const string in each, as function
 * calls and pydantic's tagged unions are, is read as one object whose first value picks the
 * alternative: one reading, for up to 64 alternatives), allOf of one schema, $ref to "#",
 * "#/$defs/..." or "#/definitions/...", true and {} (any value). Annotations are ignored:
 * title, description, default, examples, $schema, $id, $comment, deprecated, readOnly,
 * writeOnly, discriminator (OpenAPI's), and the definitions' containers. Any other keyword
 * (uniqueItems, not, if/then/else, ...) is refused by name, since the output could break it.
 *
 * Ownership and threads: a grammar is immutable after creation and may be read by many
 * matchers on any thread; it must outlive them. A matcher belongs to one sequence and is
 * used by one thread at a time. An eng_gm_vocab is immutable once built.
 */
#ifndef ENG_GRAMMAR_H
#define ENG_GRAMMAR_H

#include "tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#define ENG_GM_MAX_DEPTH 24
#define ENG_GM_MAX_THREADS 16
#define ENG_GM_MAX_PROPERTIES 64 /* declared properties of one object, values of one enum */

typedef struct eng_grammar eng_grammar;
typedef struct eng_gm eng_gm;
typedef struct eng_gm_vocab eng_gm_vocab;

/*
 * Compiles a JSON Schema (schema[0..len), JSON text; NULL: any JSON object, OpenAI's
 * json_object). ENG_EINVAL with a message in err naming what was refused and where
 * ("properties.code: pattern is not supported"); ENG_ENOMEM.
 */
int eng_grammar_create(const char *schema, size_t len, eng_grammar **out, char *err, size_t errlen);
void eng_grammar_destroy(eng_grammar *g); /* accepts NULL */

/* A matcher at the start of the document; g is borrowed for its life. ENG_ENOMEM. */
int eng_gm_create(const eng_grammar *g, eng_gm **out);
void eng_gm_destroy(eng_gm *m); /* accepts NULL */

/*
 * An answer that may be a document or text (a function call or a reply, as OpenAI's
 * tool_choice "auto" leaves it to the model): called on a fresh matcher, it makes the
 * first byte that is not white space decide. '{' begins the document, held to the grammar
 * from that byte on (the white space before it is not fed to it); any other byte begins
 * text, held to nothing (every token but control ones allowed, the answer complete at any
 * point). Until then (ENG_GM_UNDECIDED) the answer may end, and at most 24 bytes of white
 * space may come (a small model could otherwise spend its tokens on blank lines).
 */
enum eng_gm_state { ENG_GM_DOCUMENT, ENG_GM_UNDECIDED, ENG_GM_TEXT };
void eng_gm_optional(eng_gm *m);
enum eng_gm_state eng_gm_state(const eng_gm *m);

/*
 * Several documents, one after another (parallel function calls): called on a fresh
 * matcher, up to more documents may follow the first, each an object after exactly one
 * line break ("}\n{"). After a document, and after the line break that may begin the
 * next, the answer may end (the break is then trailing white space); it is done once the
 * last allowed one is complete. Combines with eng_gm_optional (the first document
 * decides; text stays text). Meant for a grammar whose documents are objects: after
 * another root value only the end may come.
 */
void eng_gm_repeat(eng_gm *m, int more);

/* Feeds bytes: 1 when the grammar takes all of them (the matcher has moved on), 0 when
 * it refuses one (the matcher is unchanged). */
int eng_gm_feed(eng_gm *m, const char *bytes, size_t n);
/* The document is complete: the generation may end here. */
int eng_gm_accepting(const eng_gm *m);
/* Complete, and no byte may follow: the generation ends here. */
int eng_gm_done(const eng_gm *m);

/* The vocabulary's byte pieces in a trie. Control and unused tokens, and tokens without
 * bytes, are never allowed; end-of-generation tokens only when the document is complete.
 * ENG_ENOMEM. */
int eng_gm_vocab_create(const tok_vocab *v, eng_gm_vocab **out);
void eng_gm_vocab_destroy(eng_gm_vocab *gv); /* accepts NULL */

/* Whether token may come next (m unchanged). */
int eng_gm_allows(eng_gm *m, const eng_gm_vocab *gv, int32_t token);
/* Takes an allowed token: its bytes are fed; an end-of-generation token changes nothing.
 * 0, or ENG_EINVAL when the grammar refuses it (m unchanged). */
int eng_gm_take(eng_gm *m, const eng_gm_vocab *gv, int32_t token);
/* Sets logits[token] to -inf for every token the grammar refuses now (logits: [n_vocab]).
 * Returns how many tokens remain allowed (0: the document can go no further, which the
 * limits above can cause), or ENG_ENOMEM. */
int eng_gm_mask(eng_gm *m, const eng_gm_vocab *gv, float *logits);

#endif
