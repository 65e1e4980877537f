/* oai: the JSON writer, byte for byte what json_dumps writes for the same values; error
 * bodies that keep a message that is not UTF-8. */
#include "oai.h"

#include <criterion/criterion.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* jansson's text of one value (taken), or NULL when it cannot dump it. */
static char *dumps(json_t *v, size_t flags)
{
    if (!v)
        return NULL;
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | flags);
    json_decref(v);
    return s;
}

static void expect(struct oai_buf *b, int rc, const char *want, const char *what)
{
    if (!want) {
        cr_assert_eq(rc, -1, "%s: jansson refuses it, the writer wrote %.*s", what,
                     (int)b->len, b->p);
        cr_assert_eq(b->len, 0);
        return;
    }
    cr_assert_eq(rc, 0, "%s: refused, jansson writes %s", what, want);
    cr_assert_eq(b->len, strlen(want), "%s: %.*s, jansson: %s", what, (int)b->len, b->p, want);
    cr_assert(!memcmp(b->p, want, b->len), "%s: %.*s, jansson: %s", what, (int)b->len, b->p,
              want);
}

static void check_str(const char *s, size_t n)
{
    for (int ascii = 0; ascii < 2; ascii++) {
        char stack[16]; /* small: the buffer moves to the heap on the way */
        struct oai_buf b;
        oai_buf_init(&b, stack, sizeof stack);
        int rc = oai_buf_str(&b, s, n, ascii);
        char *want = dumps(json_stringn(s, n), ascii ? JSON_ENSURE_ASCII : 0);
        expect(&b, rc, want, ascii ? "string (ascii)" : "string");
        free(want);
        oai_buf_deinit(&b);
    }
}

Test(oai_buf, strings_escape_like_jansson)
{
    const char *cases[] = {
        "",
        "plain text",
        "quote \" backslash \\ slash / tab \t newline \n cr \r bs \b ff \f",
        "\x01\x02\x1f\x7f",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf",
        "\xc3",             /* truncated */
        "\xc0\xaf",         /* overlong */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "\xff",
        "\x80",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_str(cases[i], strlen(cases[i]));
    check_str("nul \0 inside", 13);
    /* random bytes, mostly near the interesting ranges */
    srand(7);
    static const unsigned char pick[] = {0x00, 0x01, 0x1f, 0x20, '"', '\\', 'a', 0x7f,
                                         0x80, 0xbf, 0xc2, 0xc3, 0xdf, 0xe0, 0xe2, 0xed,
                                         0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x9f, 0xa0, 0x8f};
    for (int t = 0; t < 20000; t++) {
        char s[12];
        size_t n = (size_t)(rand() % 12);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)pick[rand() % sizeof pick];
        check_str(s, n);
    }
}

static void check_real(double v, int precision)
{
    char stack[64];
    struct oai_buf b;
    oai_buf_init(&b, stack, sizeof stack);
    oai_buf_real(&b, v, precision);
    char *want = dumps(json_real(v), JSON_REAL_PRECISION(precision));
    char what[64];
    snprintf(what, sizeof what, "%.17g at %d", v, precision);
    expect(&b, 0, want, what);
    free(want);
}

Test(oai_buf, reals_and_integers_write_like_jansson)
{
    const double cases[] = {0,      -0.0,   1,      -1,      0.5,    0.7,     1e5,  1e-5,
                            1e21,   1e22,   123456789012345678.0,   -2.5e-300,  DBL_MAX,
                            DBL_MIN, -DBL_MIN, 5e-324, 3.141592653589793, 12.0, 0.1 + 0.2,
                            -2.2250738585072014e-308};
    const int precisions[] = {0, 6, 17, 3};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t p = 0; p < 4; p++)
            check_real(cases[i], precisions[p]);
    srand(11);
    for (int t = 0; t < 20000; t++) {
        uint64_t bits = (uint64_t)rand() << 40 ^ (uint64_t)rand() << 20 ^ (uint64_t)rand();
        double v;
        memcpy(&v, &bits, sizeof v);
        if (isnan(v) || isinf(v))
            continue;
        check_real(v, t % 2 ? 6 : 0);
        check_real((double)(rand() % 100000) / 1000.0, 6);
    }
    const long long ints[] = {0, 1, -1, 9, 10, 1234567, -9223372036854775807LL - 1,
                              9223372036854775807LL};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        char stack[8];
        struct oai_buf b;
        oai_buf_init(&b, stack, sizeof stack);
        oai_buf_int(&b, ints[i]);
        char *want = dumps(json_integer(ints[i]), 0);
        expect(&b, 0, want, "integer");
        free(want);
        oai_buf_deinit(&b);
    }
}

/* An error's message that is not UTF-8 (a request's text cut inside a character, a path's
 * bytes of no text) is kept, each piece that is no character as one U+FFFD: a lead byte
 * with the bytes it was due so far that may follow it, or a lone byte. */
Test(oai_error, message_and_param_kept_where_not_utf8)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain", "plain"},
        {"`\xe6\x97\xa5\xe6\x97`", "`\xe6\x97\xa5\xef\xbf\xbd`"}, /* U+65E5, then 2 of its 3 */
        {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd"},                 /* two lone bytes */
        {"a\xf0\x9f\x98", "a\xef\xbf\xbd"},                       /* 3 of an emoji's 4 */
        {"\xc3(", "\xef\xbf\xbd("},                               /* a lead, no continuation */
        {"\x80\x80x", "\xef\xbf\xbd\xef\xbf\xbdx"},               /* stray continuations */
        /* a second byte out of its lead's range is a piece of its own: an overlong form,
         * a surrogate, past U+10FFFF, each 3 or 4 pieces as Unicode counts them */
        {"\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf0\x9f\x98z", "\xef\xbf\xbdz"}, /* 3 of 4, then a letter */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *o = oai_error(cases[i].in, "invalid_request_error", cases[i].in, "x");
        json_t *e = json_object_get(o, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *param = json_string_value(json_object_get(e, "param"));
        cr_assert(msg && !strcmp(msg, cases[i].want), "case %zu: message %s", i,
                  msg ? msg : "(dropped)");
        cr_assert(param && !strcmp(param, cases[i].want), "case %zu: param", i);
        json_decref(o);
    }
}

/* A route's unknown argument is named (a misspelt one, another server's extension); every
 * argument of OpenAI's schema for the route, and this server's extensions, are known. */
Test(oai_params, unknown_arguments_named_by_route)
{
    static const struct {
        enum oai_route route;
        const char *body, *unknown;
    } cases[] = {
        {OAI_CHAT, "{\"model\": \"m\", \"messages\": [], \"temprature\": 0}", "temprature"},
        {OAI_CHAT, "{\"model\": \"m\", \"repetition_penalty\": 1.5}", "repetition_penalty"},
        {OAI_CHAT, "{\"model\": \"m\", \"prompt\": \"x\"}", "prompt"},
        {OAI_COMPLETION, "{\"model\": \"m\", \"prompt\": \"x\", \"messages\": []}", "messages"},
        {OAI_COMPLETION, "{\"prompt\": \"x\", \"ignore_eos\": true}", "ignore_eos"},
        {OAI_RESPONSES, "{\"model\": \"m\", \"input\": \"x\", \"max_tokens\": 4}", "max_tokens"},
        {OAI_RESPONSES, "{\"input\": \"x\", \"messages\": []}", "messages"},
        {OAI_CHAT,
         "{\"model\": \"m\", \"messages\": [], \"max_tokens\": 1, \"max_completion_tokens\": 1,"
         " \"temperature\": 0, \"top_p\": 1, \"top_k\": 0, \"min_p\": 0, \"n\": 1, \"stop\": [],"
         " \"seed\": 1, \"stream\": false, \"stream_options\": null, \"presence_penalty\": 0,"
         " \"frequency_penalty\": 0, \"logit_bias\": {}, \"logprobs\": false,"
         " \"top_logprobs\": 0, \"user\": \"u\", \"metadata\": {}, \"store\": false,"
         " \"tools\": [], \"tool_choice\": \"auto\", \"parallel_tool_calls\": true,"
         " \"response_format\": null, \"service_tier\": \"auto\", \"audio\": null,"
         " \"modalities\": [\"text\"], \"prediction\": null, \"reasoning_effort\": null,"
         " \"verbosity\": null, \"web_search_options\": null, \"functions\": [],"
         " \"function_call\": null, \"safety_identifier\": \"s\", \"prompt_cache_key\": \"k\","
         " \"prompt_cache_retention\": null}",
         NULL},
        {OAI_COMPLETION,
         "{\"model\": \"m\", \"prompt\": \"x\", \"best_of\": 1, \"echo\": false, \"suffix\": null,"
         " \"logprobs\": null, \"max_tokens\": 5, \"n\": 1, \"stop\": null, \"stream\": false,"
         " \"stream_options\": null, \"seed\": 0, \"temperature\": 1, \"top_p\": 1,"
         " \"top_k\": 0, \"min_p\": 0, \"presence_penalty\": 0, \"frequency_penalty\": 0,"
         " \"logit_bias\": null, \"user\": \"u\", \"response_format\": null}",
         NULL},
        {OAI_RESPONSES,
         "{\"model\": \"m\", \"input\": \"x\", \"instructions\": null, \"max_output_tokens\": 4,"
         " \"temperature\": 1, \"top_p\": 1, \"stream\": false, \"store\": true,"
         " \"previous_response_id\": null, \"metadata\": {}, \"text\": null, \"tools\": [],"
         " \"tool_choice\": \"auto\", \"parallel_tool_calls\": true, \"truncation\": null,"
         " \"include\": null, \"reasoning\": null, \"background\": false, \"user\": null,"
         " \"service_tier\": null, \"top_logprobs\": 0, \"max_tool_calls\": null,"
         " \"conversation\": null, \"prompt\": null, \"prompt_cache_key\": null,"
         " \"safety_identifier\": null, \"stream_options\": null, \"seed\": 1, \"stop\": null,"
         " \"top_k\": 0, \"min_p\": 0, \"presence_penalty\": 0, \"frequency_penalty\": 0,"
         " \"logit_bias\": null, \"prompt_cache_retention\": null}",
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *b = json_loads(cases[i].body, 0, NULL);
        cr_assert(b, "case %zu", i);
        const char *u = oai_unknown_param(b, cases[i].route, NULL);
        if (cases[i].unknown)
            cr_expect(u && !strcmp(u, cases[i].unknown), "case %zu: %s", i, u ? u : "(none)");
        else
            cr_expect_null(u, "case %zu: %s", i, u);
        json_decref(b);
    }
    /* an import line: its answer beside the request's arguments */
    json_t *b = json_loads("{\"model\": \"m\", \"prompt\": \"q\", \"answer\": \"a\"}", 0, NULL);
    cr_expect_null(oai_unknown_param(b, OAI_COMPLETION, "answer"));
    cr_expect_str_eq(oai_unknown_param(b, OAI_COMPLETION, NULL), "answer");
    json_decref(b);
}

Test(oai_params, metadata_of_strings)
{
    static const char *const good[] = {"null", "{}", "{\"a\": \"b\", \"c\": \"\"}"};
    static const char *const bad[] = {
        "[]", "\"x\"", "{\"a\": 1}", "{\"a\": [[[]]]}", "{\"a\": {\"b\": \"c\"}}",
        "{\"a1\":\"\",\"a2\":\"\",\"a3\":\"\",\"a4\":\"\",\"a5\":\"\",\"a6\":\"\",\"a7\":\"\","
        "\"a8\":\"\",\"a9\":\"\",\"b1\":\"\",\"b2\":\"\",\"b3\":\"\",\"b4\":\"\",\"b5\":\"\","
        "\"b6\":\"\",\"b7\":\"\",\"b8\":\"\"}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        json_t *v = json_loads(good[i], JSON_DECODE_ANY, NULL);
        cr_expect(oai_metadata_ok(v), "%s", good[i]);
        json_decref(v);
    }
    cr_expect(oai_metadata_ok(NULL));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *v = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        cr_assert(v, "%s", bad[i]);
        cr_expect_not(oai_metadata_ok(v), "%s", bad[i]);
        json_decref(v);
    }
    /* a value of 513 characters, a key of 65 */
    char big[600];
    memset(big, 'x', 513);
    big[513] = 0;
    json_t *v = json_pack("{s:s}", "k", big);
    cr_expect_not(oai_metadata_ok(v));
    json_decref(v);
    big[65] = 0;
    v = json_pack("{s:s}", big, "v");
    cr_expect_not(oai_metadata_ok(v));
    json_decref(v);
}
