#include "oai.h"

#include "engine.h"
#include "grammar.h"
#include "stop.h"
#include "tools.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * s as a JSON string, also where it is not UTF-8 (a message that quotes a request's text
 * cut to a length inside a character, or a path that decodes to bytes of no text), which
 * json_string() refuses: cleaned as the engine's streamed text is (stop.h: each maximal
 * ill-formed subpart as U+FFFD), so that the text is kept.
 */
static json_t *text_string(const char *s)
{
    json_t *v = s ? json_string(s) : NULL;
    if (v || !s)
        return v;
    const size_t n = strlen(s);
    char *t = malloc(3 * n + 1); /* (a byte becomes at most the 3 of U+FFFD) */
    eng_stop *clean = NULL;
    const char *p;
    size_t len, at = 0;
    if (t && !eng_stop_create(NULL, 0, &clean) && !eng_stop_feed(clean, s, n, &p, &len)) {
        memcpy(t, p, len);
        at = len;
        if (!eng_stop_flush(clean, &p, &len)) {
            memcpy(t + at, p, len);
            v = json_stringn(t, at + len);
        }
    }
    eng_stop_destroy(clean);
    free(t);
    return v;
}

static json_t *str_or_null(const char *s)
{
    return s ? text_string(s) : json_null();
}

json_t *oai_error(const char *message, const char *type, const char *param, const char *code)
{
    json_t *e = json_object();
    json_object_set_new(e, "message", text_string(message));
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "param", str_or_null(param));
    json_object_set_new(e, "code", str_or_null(code));
    json_t *o = json_object();
    json_object_set_new(o, "error", e);
    return o;
}

const char *oai_error_type(int status, const char *code)
{
    if (code && !strcmp(code, "insufficient_quota")) /* OpenAI's type for a spent quota */
        return "insufficient_quota";
    if (status == 403)
        return "permission_error";
    if (status == 429) /* the limit met: "tokens" where it is the tokens per minute */
        return "requests";
    if (status >= 500)
        return "server_error";
    return "invalid_request_error";
}

char *oai_error_dumps(int status, const char *message, const char *param, const char *code)
{
    json_t *o = oai_error(message, oai_error_type(status, code), param, code);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* ------------------------------------------------------------------ JSON text */

void oai_buf_init(struct oai_buf *b, char *stack, size_t cap)
{
    *b = (struct oai_buf){.p = stack, .cap = cap};
}

void oai_buf_deinit(struct oai_buf *b)
{
    if (b->heap)
        free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->heap = 0;
}

static int reserve(struct oai_buf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + n)
        cap *= 2;
    char *p = b->heap ? realloc(b->p, cap) : malloc(cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    if (!b->heap && b->len)
        memcpy(p, b->p, b->len);
    b->p = p;
    b->cap = cap;
    b->heap = 1;
    return 0;
}

void oai_buf_put(struct oai_buf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void oai_buf_puts(struct oai_buf *b, const char *s)
{
    oai_buf_put(b, s, strlen(s));
}

size_t oai_utf8_next(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
        c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
        c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

/* room for any "%.*g" jansson writes (precision <= 31) */
#define REAL_MAX 64

static const char hexdig[] = "0123456789ABCDEF";

static void put_u16(char *w, unsigned v)
{
    w[0] = '\\';
    w[1] = 'u';
    w[2] = hexdig[v >> 12 & 15];
    w[3] = hexdig[v >> 8 & 15];
    w[4] = hexdig[v >> 4 & 15];
    w[5] = hexdig[v & 15];
}

int oai_buf_str(struct oai_buf *b, const char *str, size_t n, int ascii)
{
    const unsigned char *s = (const unsigned char *)str;
    /* checked whole first: an invalid string writes nothing */
    size_t extra = 2;
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t k = oai_utf8_next(s + i, n - i, &cp);
        if (!k)
            return -1;
        if (cp < 0x20 || cp == '"' || cp == '\\')
            extra += 5;
        else if (ascii && cp >= 0x80)
            extra += 12;
        i += k;
    }
    if (reserve(b, n + extra))
        return 0;
    char *w = b->p + b->len;
    *w++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t k = oai_utf8_next(s + i, n - i, &cp);
        if (cp >= 0x20 && cp != '"' && cp != '\\' && (cp < 0x80 || !ascii)) {
            memcpy(w, s + i, k);
            w += k;
        } else if (cp == '"' || cp == '\\') {
            *w++ = '\\';
            *w++ = (char)cp;
        } else if (cp == '\b' || cp == '\f' || cp == '\n' || cp == '\r' || cp == '\t') {
            *w++ = '\\';
            *w++ = cp == '\b' ? 'b' : cp == '\f' ? 'f' : cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
        } else if (cp < 0x10000) {
            put_u16(w, cp);
            w += 6;
        } else { /* a UTF-16 surrogate pair */
            unsigned v = cp - 0x10000;
            put_u16(w, 0xD800 | (v >> 10 & 0x3FF));
            put_u16(w + 6, 0xDC00 | (v & 0x3FF));
            w += 12;
        }
        i += k;
    }
    *w++ = '"';
    b->len = (size_t)(w - b->p);
    return 0;
}

void oai_buf_int(struct oai_buf *b, long long v)
{
    char t[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do
        t[sizeof t - 1 - n++] = (char)('0' + u % 10);
    while ((u /= 10));
    if (v < 0)
        t[sizeof t - 1 - n++] = '-';
    oai_buf_put(b, t + sizeof t - n, (size_t)n);
}

void oai_buf_real(struct oai_buf *b, double v, int precision)
{
    char t[REAL_MAX];
    int n = snprintf(t, sizeof t - 3, "%.*g", precision ? precision : 17, v);
    if (n < 0 || n >= REAL_MAX - 3)
        return;
    /* a real keeps a '.' or an exponent (else it would read back as an integer) */
    if (!memchr(t, '.', (size_t)n) && !memchr(t, 'e', (size_t)n)) {
        memcpy(t + n, ".0", 3);
        n += 2;
    }
    /* no '+' and no leading zeros in an exponent: 1e+05 is written 1e5 */
    char *e = memchr(t, 'e', (size_t)n);
    if (e) {
        char *start = e + 1, *end = e + 2;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, (size_t)(t + n - end) + 1);
            n -= (int)(end - start);
        }
    }
    oai_buf_put(b, t, (size_t)n);
}

int oai_param_neutral(const char *key, json_t *v)
{
    if ((json_is_array(v) && !json_array_size(v)) || (json_is_object(v) && !json_object_size(v)))
        return 1;
    const char *s = json_string_value(v);
    if (!strcmp(key, "tool_choice"))
        return s && (!strcmp(s, "none") || !strcmp(s, "auto"));
    if (!strcmp(key, "response_format")) {
        const char *type = json_string_value(json_object_get(v, "type"));
        return json_object_size(v) == 1 && type && !strcmp(type, "text");
    }
    return 0;
}

/* A value that asks for nothing: absent, null, false, 0, "", or neutral. */
static int nothing(const char *key, json_t *v)
{
    return !v || json_is_null(v) || json_is_false(v) ||
           (json_is_integer(v) && !json_integer_value(v)) ||
           (json_is_string(v) && !json_string_length(v)) || oai_param_neutral(key, v);
}

int gw_wants_logprobs(json_t *b, int chat)
{
    json_t *lp = json_object_get(b, "logprobs");
    return chat ? json_is_true(lp) : json_is_integer(lp);
}

int oai_integral(double v)
{
    return v == floor(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
}

static int refuse(const char **param, char *msg, size_t len, const char *key, const char *why)
{
    *param = key;
    snprintf(msg, len, "%s", why);
    return -1;
}

int oai_params_check(json_t *b, int chat, const char **param, char *msg, size_t len)
{
    static const struct {
        const char *key;
        double lo, hi;
    } num[] = {{"temperature", 0, 2},
               {"top_p", 0, 1},
               {"presence_penalty", -2, 2},
               {"frequency_penalty", -2, 2},
               {"min_p", 0, 1}};
    for (size_t i = 0; i < sizeof num / sizeof *num; i++) {
        json_t *v = json_object_get(b, num[i].key);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_number(v) || json_number_value(v) < num[i].lo ||
            json_number_value(v) > num[i].hi) {
            snprintf(msg, len, "%s must be a number between %g and %g.", num[i].key, num[i].lo,
                     num[i].hi);
            *param = num[i].key;
            return -1;
        }
    }
    static const char *const mk[] = {"max_completion_tokens", "max_tokens"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(b, mk[i]);
        if (v && !json_is_null(v) &&
            (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1 << 20)) {
            snprintf(msg, len, "%s must be an integer from 1 to %d.", mk[i], 1 << 20);
            *param = mk[i];
            return -1;
        }
    }
    json_t *seed = json_object_get(b, "seed");
    if (seed && !json_is_null(seed) && !json_is_integer(seed) &&
        !(json_is_real(seed) && oai_integral(json_real_value(seed))))
        return refuse(param, msg, len, "seed", "seed must be an integer.");
    json_t *tk = json_object_get(b, "top_k"); /* vLLM's and llama.cpp's extension */
    if (tk && !json_is_null(tk) &&
        (!json_is_integer(tk) || json_integer_value(tk) < 0 || json_integer_value(tk) > 1 << 20))
        return refuse(param, msg, len, "top_k", "top_k must be an integer from 0 (off) to "
                                                "1048576.");
    /* the OpenAI schema's parameters this server does not implement */
    static const char *const chat_keys[] = {"audio", "prediction", "web_search_options"};
    static const char *const completion_keys[] = {"echo", "suffix"};
    const char *const *keys = chat ? chat_keys : completion_keys;
    const size_t n = chat ? sizeof chat_keys / sizeof *chat_keys
                          : sizeof completion_keys / sizeof *completion_keys;
    for (size_t i = 0; i < n; i++) /* (web_search_options {} is a search with defaults) */
        if (json_is_object(json_object_get(b, keys[i])) ||
            !nothing(keys[i], json_object_get(b, keys[i]))) {
            snprintf(msg, len, "%s is not supported by this server.", keys[i]);
            *param = keys[i];
            return -1;
        }
    if (chat) { /* as the Responses route refuses its reasoning and text.verbosity */
        json_t *re = json_object_get(b, "reasoning_effort"), *vb = json_object_get(b, "verbosity");
        if (re && !json_is_null(re))
            return refuse(param, msg, len, "reasoning_effort",
                          "reasoning_effort is not supported: this model does not reason.");
        if (vb && !json_is_null(vb) &&
            !(json_is_string(vb) && !strcmp(json_string_value(vb), "medium")))
            return refuse(param, msg, len, "verbosity",
                          "Only verbosity \"medium\" (the default) is supported.");
    }
    if (chat && gw_tools_check(b, param, msg, len))
        return -1;
    if (chat && !oai_metadata_ok(json_object_get(b, "metadata")))
        return refuse(param, msg, len, "metadata",
                      "metadata must be an object of at most 16 string values of at most 512 "
                      "characters, their keys of at most 64.");
    /* logprobs: chat's a boolean with top_logprobs beside it, a completion's the number of
     * alternatives */
    json_t *lp = json_object_get(b, "logprobs"), *top = json_object_get(b, "top_logprobs");
    if (chat && !nothing("logprobs", lp) && !json_is_boolean(lp))
        return refuse(param, msg, len, "logprobs", "logprobs must be a boolean.");
    if (!chat && !nothing("logprobs", lp) &&
        (!json_is_integer(lp) || json_integer_value(lp) < 0 || json_integer_value(lp) > 20))
        return refuse(param, msg, len, "logprobs", "logprobs must be an integer from 0 to 20.");
    if (chat && !nothing("top_logprobs", top)) {
        if (!json_is_integer(top) || json_integer_value(top) < 0 ||
            json_integer_value(top) > 20)
            return refuse(param, msg, len, "top_logprobs",
                          "top_logprobs must be an integer from 0 to 20.");
        if (!json_is_true(lp))
            return refuse(param, msg, len, "top_logprobs",
                          "top_logprobs is only allowed when logprobs is true.");
    }
    if (chat) {
        json_t *mod = json_object_get(b, "modalities");
        for (size_t i = 0; i < json_array_size(mod); i++) {
            const char *m = json_string_value(json_array_get(mod, i));
            if (!m || strcmp(m, "text"))
                return refuse(param, msg, len, "modalities",
                              "modalities: only \"text\" is supported.");
        }
    } else {
        json_t *bo = json_object_get(b, "best_of");
        if (bo && !json_is_null(bo) && (!json_is_integer(bo) || json_integer_value(bo) != 1))
            return refuse(param, msg, len, "best_of", "Only best_of = 1 is supported.");
    }
    return 0;
}

static const char *const chat_params[] = {
    "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "messages", "metadata", "min_p", "modalities",
    "model", "n", "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
    "prompt_cache_retention", "reasoning_effort", "response_format", "safety_identifier",
    "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature",
    "tool_choice", "tools", "top_k", "top_logprobs", "top_p", "user", "verbosity",
    "web_search_options"};
static const char *const completion_params[] = {
    "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "min_p",
    "model", "n", "presence_penalty", "prompt", "response_format", "seed", "stop", "stream",
    "stream_options", "suffix", "temperature", "top_k", "top_p", "user"};
static const char *const responses_params[] = {
    "background", "conversation", "frequency_penalty", "include", "input", "instructions",
    "logit_bias", "max_output_tokens", "max_tool_calls", "metadata", "min_p", "model",
    "parallel_tool_calls", "presence_penalty", "previous_response_id", "prompt",
    "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "text",
    "tool_choice", "tools", "top_k", "top_logprobs", "top_p", "truncation", "user"};

static const char *const embeddings_params[] = {"dimensions", "encoding_format", "input",
                                                 "model", "user"};
/* a Responses request's, counted and not run */
static const char *const input_tokens_params[] = {
    "conversation", "input", "instructions", "model", "parallel_tool_calls", "personality",
    "previous_response_id", "reasoning", "text", "tool_choice", "tools", "truncation"};

const char *oai_unknown_param(json_t *b, enum oai_route route, const char *also)
{
#define ROUTE(list) {list, sizeof list / sizeof *list}
    static const struct {
        const char *const *known;
        size_t n;
    } routes[] = {[OAI_CHAT] = ROUTE(chat_params),
                  [OAI_COMPLETION] = ROUTE(completion_params),
                  [OAI_RESPONSES] = ROUTE(responses_params),
                  [OAI_EMBEDDINGS] = ROUTE(embeddings_params),
                  [OAI_INPUT_TOKENS] = ROUTE(input_tokens_params)};
#undef ROUTE
    const char *const *known = routes[route].known;
    const size_t n = routes[route].n;
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v)
    {
        size_t i = 0;
        while (i < n && strcmp(known[i], key))
            i++;
        if (i == n && !(also && !strcmp(key, also)))
            return key;
    }
    return NULL;
}

int oai_metadata_ok(json_t *v)
{
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_object(v) || json_object_size(v) > 16)
        return 0;
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m)
    {
        if (!json_is_string(m) || strlen(k) > 64 || json_string_length(m) > 512)
            return 0;
    }
    return 1;
}

int oai_response_format(json_t *rf, eng_grammar **g, char *msg, size_t len)
{
    *g = NULL;
    if (!rf || json_is_null(rf))
        return 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type) {
        snprintf(msg, len, "response_format must be an object with a type: text, json_object "
                           "or json_schema.");
        return -1;
    }
    if (!strcmp(type, "text"))
        return 0;
    char *schema = NULL, err[200];
    if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js)) {
            snprintf(msg, len, "response_format.json_schema must be an object holding the schema.");
            return -1;
        }
        json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
        if ((name && !json_is_null(name) && !json_is_string(name)) ||
            (strict && !json_is_null(strict) && !json_is_boolean(strict))) {
            snprintf(msg, len, "response_format.json_schema: name must be a string and strict "
                               "a boolean.");
            return -1;
        }
        json_t *sc = json_object_get(js, "schema");
        /* no schema: any JSON value */
        schema = json_dumps(sc && !json_is_null(sc) ? sc : json_true(),
                            JSON_COMPACT | JSON_ENCODE_ANY);
        if (!schema)
            return -2;
    } else if (strcmp(type, "json_object")) {
        snprintf(msg, len, "response_format.type must be text, json_object or json_schema.");
        return -1;
    }
    int rc = eng_grammar_create(schema, schema ? strlen(schema) : 0, g, err, sizeof err);
    free(schema);
    if (rc == ENG_ENOMEM)
        return -2;
    if (rc) {
        snprintf(msg, len, "response_format.json_schema.schema: %s", err);
        return -1;
    }
    return 0;
}
