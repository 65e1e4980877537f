/*
 * oai — the OpenAI wire format pieces the gateway shares: the error body every
 * non-2xx answer carries, {"error":{"message","type","param","code"}}, and the type
 * an HTTP status maps to.
 */
#ifndef GW_OAI_H
#define GW_OAI_H

#include <jansson.h>

/* A new error body. param and code may be NULL (JSON null). */
json_t *oai_error(const char *message, const char *type, const char *param, const char *code);

/* The OpenAI error "type" for an HTTP status and code (NULL: none), as OpenAI's servers send
 * it: invalid_request_error for most 4xx (401 included), permission_error for 403,
 * "requests" for 429 (the limit met; "tokens" where it is the tokens per minute, which the
 * caller says; insufficient_quota for that code), server_error for 5xx. */
const char *oai_error_type(int status, const char *code);

/* Serialized error body for a status, malloc'd (caller frees). */
char *oai_error_dumps(int status, const char *message, const char *param, const char *code);

/* Whether a JSON real holds an integer (a seed given as 1.0). */
int oai_integral(double v);

/* The code point at s[0..n) and its length; 0 when the bytes are not UTF-8 as jansson
 * accepts it (no overlong forms, no surrogates, nothing past U+10FFFF). */
size_t oai_utf8_next(const unsigned char *s, size_t n, unsigned *cp);

/* Whether v, the value of request parameter key, asks for what its absence does: an empty
 * array or object (tools, stop, logit_bias), tool_choice "none" or "auto" (no tools run),
 * response_format {"type": "text"}. */
int oai_param_neutral(const char *key, json_t *v);

/*
 * The request parameters that no answer of this server can honour, in a chat (chat) or
 * completion request body b: a sampling number of the wrong type or out of its range
 * (temperature, top_p, the penalties; seed an integer; max_tokens and
 * max_completion_tokens from 1 to 2^20), or a parameter of the OpenAI schema
 * that the server does not implement (tools, a JSON response_format, echo, ...) set to
 * anything but absence, null, false, 0, "" or a neutral value (tools pass when tool_choice
 * is "none": none is called), or logprobs and top_logprobs of the wrong type or range (a
 * completion's logprobs is a number). 0 when there is none;
 * else -1 with *param and msg naming the first. Requests are refused for it, and answers
 * imported into the cache that no request could reach.
 */
int oai_params_check(json_t *b, int chat, const char **param, char *msg, size_t len);

/*
 * The first top-level key of request body b that the route does not know (nor is also,
 * when not NULL: an import line's "answer"): those of
 * OpenAI's schema for it (implemented, accepted for their neutral values, or refused by
 * name as not supported) and the extensions this server reads (top_k, min_p; on the
 * Responses route, chat's sampling parameters). NULL when every key is known. OpenAI
 * refuses an unknown argument; so does this server, so that a misspelt parameter
 * ("temprature") or another server's extension (repetition_penalty) is not silently
 * ignored and its answer cached as the default's.
 */
enum oai_route {
    OAI_CHAT,
    OAI_COMPLETION,
    OAI_RESPONSES,
    OAI_EMBEDDINGS,
    OAI_INPUT_TOKENS /* POST /v1/responses/input_tokens */
};
const char *oai_unknown_param(json_t *b, enum oai_route route, const char *also);

/* Whether v is OpenAI's metadata: absent or null, or an object of at most 16 string values
 * of at most 512 characters whose keys have at most 64. */
int oai_metadata_ok(json_t *v);

/*
 * A request's response_format rf (NULL, null or {"type": "text"}: none) compiled into the
 * grammar that holds the answer to it (engine/grammar.h): json_object, or json_schema with
 * its schema (none: any JSON value). 0 with *g set (NULL for none; the caller destroys
 * it); -1 with msg saying what is wrong (a malformed format, or what of the schema cannot
 * be held to, with its place); -2 when out of memory.
 */
struct eng_grammar;
int oai_response_format(json_t *rf, struct eng_grammar **g, char *msg, size_t len);

/* Whether a chat (chat) or completion request, checked, asks for log-probabilities: chat's
 * logprobs true, or a completion's logprobs a number (0 too: the chosen tokens' alone). */
int gw_wants_logprobs(json_t *b, int chat);

/*
 * JSON text written straight into a buffer, byte for byte as jansson's json_dumps writes the
 * same values (compact), so that the hot paths (cache hits, the access log) need not build
 * a json_t tree to serialize it. The buffer starts on the caller's storage and moves to the
 * heap when it outgrows it; oom is set (and nothing more written) when that fails.
 */
struct oai_buf {
    char *p;
    size_t len, cap;
    int heap; /* p is malloc'd: oai_buf_deinit frees it */
    int oom;
};
void oai_buf_init(struct oai_buf *b, char *stack, size_t cap);
void oai_buf_deinit(struct oai_buf *b);
void oai_buf_put(struct oai_buf *b, const char *s, size_t n);
void oai_buf_puts(struct oai_buf *b, const char *s);
/* A JSON string of n bytes of UTF-8 (NULs allowed). ascii: \uXXXX for everything past
 * ASCII (JSON_ENSURE_ASCII). -1, writing nothing, when s is not valid UTF-8 (json_stringn
 * refuses it too). */
int oai_buf_str(struct oai_buf *b, const char *s, size_t n, int ascii);
void oai_buf_int(struct oai_buf *b, long long v);
/* precision: significant digits, 0 for jansson's default of 17 (JSON_REAL_PRECISION). */
void oai_buf_real(struct oai_buf *b, double v, int precision);

#endif
