/*
 * stop — stop strings over streamed text (eng_stop_), and text that is safe to stream.
 * Text arrives in pieces (the bytes of each decoded token); after each piece the detector
 * says which bytes may be sent now.
 *
 * Semantics: generation stops the moment a stop string is present in the text, exactly as
 * if the text had arrived one byte at a time: the match that ends first wins, and of
 * matches ending on the same byte, the one that starts first. Nothing from the start of
 * that match on is ever emitted; everything before it is. So the output never depends on
 * how the text was cut into pieces.
 *
 * Held back, and only these: a tail that is a proper prefix of some stop string (it may
 * yet become a match), and an incomplete UTF-8 sequence at the end. Everything else is
 * emitted at once. eng_stop_flush() ends the text and emits what is held.
 *
 * UTF-8: the emitted text is always well-formed UTF-8. A sequence that cannot complete
 * (a stray or invalid byte, a truncated sequence followed by something else, one still
 * open at the end of the text) becomes U+FFFD, one per maximal ill-formed subpart as the
 * Unicode standard recommends (ch. 3, "U+FFFD Substitution of Maximal Subparts"); stop
 * strings are matched against that cleaned text. Stop strings must be well-formed UTF-8.
 *
 * Ownership: the detector copies the stop strings. The text it returns is borrowed from it,
 * valid until its next call. Threads: one detector per request, one thread at a time.
 */
#ifndef ENG_STOP_H
#define ENG_STOP_H

#include <stddef.h>

#define ENG_STOP_MAX 4     /* stop strings per request, as OpenAI allows */
#define ENG_STOP_MATCHED 1 /* what feed and flush return once a stop string has matched */

typedef struct eng_stop eng_stop;

/* stops: n_stops (0..ENG_STOP_MAX) non-empty, well-formed UTF-8 strings, copied; stops may
 * be NULL when n_stops is 0. ENG_EINVAL, ENG_ENOMEM. */
int eng_stop_create(const char *const *stops, int n_stops, eng_stop **out);
void eng_stop_destroy(eng_stop *s); /* accepts NULL */
/* Ready for a new text, with the same stop strings. */
void eng_stop_reset(eng_stop *s);
/* Forgets the stop strings (for this text and after a reset): nothing matches from here
 * on, and a tail held as the beginning of one goes out with the next feed or flush. */
void eng_stop_disarm(eng_stop *s);

/* Adds piece[0, len) (any bytes; piece may be NULL when len is 0). *text, *n_text: what may
 * be emitted now, borrowed. Returns 0, ENG_STOP_MATCHED when a stop string has matched
 * (then and on every later call: nothing more is emitted), ENG_EINVAL (after a flush),
 * or ENG_ENOMEM (the detector is unchanged). */
int eng_stop_feed(eng_stop *s, const char *piece, size_t len, const char **text /* out */,
                  size_t *n_text /* out */);
/* The text has ended: emits what was held. Returns 0 or ENG_STOP_MATCHED (a stop string
 * that ends in the U+FFFD of an unfinished sequence), or ENG_ENOMEM. Later feeds are
 * ENG_EINVAL, later flushes emit nothing. */
int eng_stop_flush(eng_stop *s, const char **text /* out */, size_t *n_text /* out */);

/* The bytes of the cleaned text so far (what is emitted, is held, or was cut by a match):
 * where the text of the pieces fed so far ends, in the emitted text's terms (an ill-formed
 * byte counts as the three of its U+FFFD; an unfinished sequence counts once it ends). */
size_t eng_stop_seen(const eng_stop *s);

/* Which stop string matched (its index at create), or -1. */
int eng_stop_matched(const eng_stop *s);

#endif
