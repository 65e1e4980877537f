/*
 * tokenizer — text to token ids and back (tok_), built from a GGUF file's tokenizer.ggml.*
 * metadata. Two models:
 *
 *   "gpt2"   byte-level BPE (SmolLM2, Llama 3, Qwen2). Bytes are first spelled as GPT-2's
 *            printable stand-ins (byte b -> one code point); the text is cut into words
 *            by the pre-tokenizer that tokenizer.ggml.pre names; in each word, adjacent
 *            pieces are merged by tokenizer.ggml.merges, lowest rank first. Any byte string
 *            encodes and decodes back to itself, but for bytes whose stand-in the
 *            vocabulary lacks (SmolLM2's has none for 04 06 13 14 16 1D C0 C1 F1 F2 F5-FF),
 *            which are dropped, as llama.cpp drops them.
 *   "llama"  SentencePiece BPE with byte fallback (Llama 2): spaces become U+2581, a space
 *            is prefixed when tokenizer.ggml.add_space_prefix says so, adjacent pieces are
 *            merged while their concatenation is a normal token, highest score first, and a
 *            character outside the vocabulary becomes its UTF-8 bytes as <0xXX> tokens.
 *
 * Pre-tokenizers ("gpt2" model): "gpt2" (and mpt, olmo, jais), "smollm" (each digit split
 * off first, then the GPT-2 rule; also starcoder, refact, command-r, codeshell, exaone,
 * minerva), "llama-bpe" (Llama 3's rule, digits in runs of up to three, whole words found
 * in the vocabulary taken as they are; also llama3, llama-v3, falcon3), "qwen2" (Llama 3's
 * rule with single digits; also stablelm2, deepseek-r1-qwen, megrez). Each is
 * hand-written (Unicode categories from utf8proc, no regex library) and checked against
 * tokenizers' regexes. An unknown name is ENG_ENOTSUP: a guessed pre-tokenizer would give
 * ids the model never saw.
 *
 * Special tokens (token types control, user-defined and unknown) are recognised in the
 * text only when the caller asks (allow_special): text a user typed, such as
 * "<|im_start|>", is otherwise ordinary text (tokenizers and llama.cpp match user-defined
 * tokens always; here no special token is read out of untrusted text). Encoding adds no
 * BOS; callers that want one consult tok_add_bos() and tok_bos().
 *
 * A tok_vocab copies what it needs from the file (the gguf_file may be closed after
 * creation) and is immutable: any number of threads may encode and decode with it at once.
 * A tok_decoder is one stream's state, owned by its caller and used by one thread.
 */
#ifndef ENG_TOKENIZER_H
#define ENG_TOKENIZER_H

#include "gguf.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tok_vocab tok_vocab;

/* tokenizer.ggml.token_type values */
enum tok_type {
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

/*
 * Builds the tokenizer of f. ENG_EFORMAT for missing or inconsistent metadata,
 * ENG_ENOTSUP for a tokenizer model or pre-tokenizer this module does not implement; err
 * names the key and the problem.
 */
int tok_create(const gguf_file *f, tok_vocab **out, char *err, size_t errlen);
void tok_destroy(tok_vocab *v); /* accepts NULL */

int tok_n_vocab(const tok_vocab *v);
/* Ids from the metadata, -1 when the file names none. */
int32_t tok_bos(const tok_vocab *v);
int32_t tok_eos(const tok_vocab *v);
int32_t tok_eot(const tok_vocab *v);
int32_t tok_unk(const tok_vocab *v);
int32_t tok_pad(const tok_vocab *v);
/* Whether prompts should start with tok_bos() (tokenizer.ggml.add_bos_token). */
int tok_add_bos(const tok_vocab *v);
/* End of generation: eos, eot, eom, and control tokens such as <|im_end|>, <|eot_id|>,
 * <|endoftext|>, <|end_of_text|>, <end_of_turn>. False for ids out of range. */
int tok_is_eog(const tok_vocab *v, int32_t id);
/* An enum tok_type, or 0 for an id out of range. */
int tok_type(const tok_vocab *v, int32_t id);

/* The token's vocabulary string (e.g. "Ġworld"); NULL for an id out of range. Borrowed,
 * valid for the vocab's life, not NUL-terminated. */
const char *tok_text(const tok_vocab *v, int32_t id, size_t *len /* out */);
/* The bytes the token stands for (" world"; a control token's own text). Borrowed as
 * above. A piece may end inside a UTF-8 character: use a tok_decoder to print. */
int tok_piece(const tok_vocab *v, int32_t id, const char **bytes /* out */, size_t *len /* out */);
/* The id whose vocabulary string is exactly s[0..len), or -1. */
int32_t tok_find(const tok_vocab *v, const char *s, size_t len);

/*
 * Encodes text[0..len) (any bytes; UTF-8 expected). Writes at most cap ids and sets *n to
 * the number the whole text needs; returns ENG_EFULL when that exceeds cap (the first cap
 * ids are written; ids may be NULL when cap is 0, to size a buffer), ENG_ENOMEM, ENG_EINVAL
 * for a text over 256 MiB. Byte-level BPE drops a byte whose stand-in the vocabulary lacks
 * (as tokenizers and llama.cpp do); SentencePiece uses <0xXX>, else the unknown token.
 */
int tok_encode(const tok_vocab *v, const char *text, size_t len, int allow_special, int32_t *ids,
               int cap, int *n /* out */);

/*
 * tok_encode() of a text whose special tokens are read only inside the spans (a chat
 * template's own text; sorted, not overlapping), the text between two special tokens
 * split into words as one run whichever spans it crosses: a template's "user\n" and a
 * message's leading white space tokenize together, as the model's own template renders
 * them. ENG_EINVAL for spans out of order or past len.
 */
struct tok_span {
    size_t off, len;
};
int tok_encode_spans(const tok_vocab *v, const char *text, size_t len,
                     const struct tok_span *spans, int nspans, int32_t *ids, int cap,
                     int *n /* out */);

/*
 * Streaming decoder. Feed ids one at a time; the output never ends inside a UTF-8
 * character: bytes of a character split across tokens are held back until the token that
 * completes it (a held sequence that can no longer complete is emitted as it is). At the
 * end, tok_decoder_flush() returns whatever is held.
 */
enum {
    TOK_DECODE_SKIP_SPECIAL = 1, /* control tokens produce nothing */
    TOK_DECODE_STRIP_SPACE = 2,  /* drop the space SentencePiece's add_space_prefix put
                                    before the first piece; no effect on other models */
};

typedef struct tok_decoder {
    /* private */
    const tok_vocab *v;
    int flags;
    int started; /* a piece has been emitted */
    int n_held;
    uint8_t held[4];
} tok_decoder;

void tok_decoder_init(tok_decoder *d, const tok_vocab *v, int flags);
/* The longest output of one tok_decode() call with this vocabulary. */
size_t tok_decode_max(const tok_vocab *v);
/*
 * Appends the bytes that token id completes to out[0..cap) and sets *n to their
 * count. ENG_EINVAL for an id out of range; ENG_EFULL when cap is too small (*n says how
 * much is needed; the decoder is unchanged, so the call can be repeated).
 */
int tok_decode(tok_decoder *d, int32_t id, char *out, size_t cap, size_t *n /* out */);
/* Emits the held bytes (at most 3) and resets the stream; cap >= 3 always suffices. */
int tok_decoder_flush(tok_decoder *d, char *out, size_t cap, size_t *n /* out */);

/* Decodes a whole sequence (a tok_decoder run to its flush): ENG_EFULL when cap is too
 * small, with *len the size needed; the output is not NUL-terminated. */
int tok_detokenize(const tok_vocab *v, const int32_t *ids, int n_ids, int flags, char *out,
                   size_t cap, size_t *len /* out */);

#endif
