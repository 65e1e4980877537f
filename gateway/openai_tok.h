/*
 * OpenAI's byte-level BPE vocabularies, for the token ids some clients send to
 * /v1/embeddings in place of text: LangChain's OpenAIEmbeddings tokenizes with tiktoken's
 * cl100k_base (the tokenizer of OpenAI's embedding models) and sends the ids by default.
 * Only decoding is needed: each id is a byte string, and the text is their concatenation.
 *
 * The file is tiktoken's: one "BASE64 RANK" line per token, ranks 0..n-1 in order (the
 * special tokens, such as <|endoftext|>, are not in it and are not decoded). Read-only
 * after loading: any thread may decode.
 */
#ifndef GW_OPENAI_TOK_H
#define GW_OPENAI_TOK_H

#include <jansson.h>
#include <stddef.h>

typedef struct gw_otok gw_otok;

/* 0, or -1 with err naming the file and line at fault. */
int gw_otok_load(const char *path, gw_otok **out, char *err, size_t errlen);
void gw_otok_destroy(gw_otok *t); /* accepts NULL */
int gw_otok_size(const gw_otok *t);

/*
 * The text of the token ids in ids (a JSON array of integers, borrowed), malloc'd and
 * NUL-terminated, with any bytes that do not form UTF-8 left out (ids cut from a longer
 * text may split a character). 0; -1 with *bad the position of an id that is not an
 * integer in the vocabulary; -2 when out of memory.
 */
int gw_otok_decode(const gw_otok *t, json_t *ids, char **text, size_t *len, size_t *bad);

#endif
