/* cache keys: what splits partitions and what keys alike; what the writes count; semantic
 * lookups done together are judged together, each as if alone (needs
 * models/all-minilm-l6-v2: make deps). */
#include "cache.h"
#include "completion.h"
#include "config.h"
#include "embed_worker.h"
#include "metrics.h"
#include "store.h"

#include <criterion/criterion.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static struct gw_cache_key key_of(const char *json, int chat, int64_t ns)
{
    json_error_t e;
    json_t *b = json_loads(json, 0, &e);
    cr_assert(b, "%s", e.text);
    struct gw_cache_key k;
    cr_assert_eq(gw_cache_key_make(b, chat, ns, &k), 0, "%s", json);
    json_decref(b);
    return k;
}

#define BASE "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"}," \
             "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}]"

Test(cache_key, the_same_request_keys_alike_and_defaults_key_like_absence)
{
    struct gw_cache_key a = key_of(BASE "}", 1, 1);
    struct gw_cache_key b = key_of(BASE ",\"temperature\":1,\"top_p\":1.0,\"stream\":true,"
                                        "\"max_tokens\":50}", 1, 1);
    cr_assert_eq(a.partition, b.partition);
    cr_assert_eq(a.exact, b.exact);
    /* values that ask for nothing, as SDKs and frameworks send them */
    const char *neutral[] = {
        BASE ",\"tools\":[],\"tool_choice\":\"none\"}",
        BASE ",\"tool_choice\":\"auto\",\"logit_bias\":{},\"stop\":[]}",
        BASE ",\"response_format\":{\"type\":\"text\"}}",
    };
    for (size_t i = 0; i < sizeof neutral / sizeof *neutral; i++) {
        struct gw_cache_key n = key_of(neutral[i], 1, 1);
        cr_assert_eq(a.partition, n.partition, "%s", neutral[i]);
        gw_cache_key_deinit(&n);
    }
    cr_assert_str_eq(a.query, "What is the capital of France?");
    gw_cache_key_deinit(&a);
    gw_cache_key_deinit(&b);
}

Test(cache_key, parameters_that_change_the_answer_split_partitions)
{
    struct gw_cache_key a = key_of(BASE "}", 1, 1);
    const char *variants[] = {
        BASE ",\"temperature\":0}",
        BASE ",\"top_p\":0.5}",
        BASE ",\"seed\":7}",
        BASE ",\"stop\":[\"\\n\"]}",
        BASE ",\"response_format\":{\"type\":\"json_object\"}}",
        BASE ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
        "{\"model\":\"other\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}]}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be verbose.\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}]}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"What is the capital "
        "of France?\"}]}",
        /* the participant's name: "bob: what is my name?" is no paraphrase of the question */
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\",\"name\":\"bob\"}]}",
    };
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        struct gw_cache_key b = key_of(variants[i], 1, 1);
        cr_assert_neq(a.partition, b.partition, "%s", variants[i]);
        cr_assert_neq(a.exact, b.exact);
        gw_cache_key_deinit(&b);
    }
    /* another tenant's namespace */
    struct gw_cache_key t = key_of(BASE "}", 1, 2);
    cr_assert_neq(a.partition, t.partition);
    gw_cache_key_deinit(&t);
    /* the route: a completion prompt never meets a chat message */
    struct gw_cache_key c = key_of("{\"model\":\"m\",\"prompt\":\"What is the capital of "
                                   "France?\"}", 0, 1);
    cr_assert_neq(a.partition, c.partition);
    gw_cache_key_deinit(&c);
    gw_cache_key_deinit(&a);
}

Test(cache_key, the_final_message_is_normalized_for_the_exact_key)
{
    struct gw_cache_key a = key_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                   "\"content\":\"caf\\u00e9  au\\n lait \"}]}", 1, 1);
    /* e + combining acute (NFD), other white space */
    struct gw_cache_key b = key_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                   "\"content\":[{\"type\":\"text\",\"text\":\" cafe\\u0301 "
                                   "au lait\"}]}]}", 1, 1);
    cr_assert_eq(a.partition, b.partition);
    cr_assert_eq(a.exact, b.exact);
    struct gw_cache_key c = key_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                   "\"content\":\"cafe au lait\"}]}", 1, 1);
    cr_assert_neq(a.exact, c.exact, "a different character is a different question");
    gw_cache_key_deinit(&a);
    gw_cache_key_deinit(&b);
    gw_cache_key_deinit(&c);
}

/* seeds past 2^53 sample differently and must not share an answer */
Test(cache_key, large_seeds_key_apart)
{
    struct gw_cache_key a = key_of(BASE ",\"seed\":9007199254740992}", 1, 1);
    struct gw_cache_key b = key_of(BASE ",\"seed\":9007199254740993}", 1, 1);
    struct gw_cache_key c = key_of(BASE ",\"seed\":-9223372036854775807}", 1, 1);
    struct gw_cache_key d = key_of(BASE ",\"seed\":-9223372036854775806}", 1, 1);
    cr_assert_neq(a.partition, b.partition);
    cr_assert_neq(c.partition, d.partition);
    struct gw_cache_key e = key_of(BASE ",\"seed\":7}", 1, 1);
    struct gw_cache_key f = key_of(BASE ",\"seed\":7.0}", 1, 1);
    cr_assert_eq(e.partition, f.partition, "a small integer keys like its real");
    struct gw_cache_key *all[] = {&a, &b, &c, &d, &e, &f};
    for (int i = 0; i < 6; i++)
        gw_cache_key_deinit(all[i]);
}

/* a completion continues its prompt as written: white space is part of the key */
Test(cache_key, a_completion_prompt_keys_byte_for_byte)
{
    const char *prompts[] = {"The sky is", "The sky is ", "The sky is\\n", "  The   sky is",
                             "def f(x):\\n    return", "def f(x): return"};
    struct gw_cache_key k[6];
    for (int i = 0; i < 6; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"prompt\":\"%s\"}", prompts[i]);
        k[i] = key_of(body, 0, 1);
    }
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < i; j++) {
            cr_assert_eq(k[i].partition, k[j].partition);
            cr_assert_neq(k[i].exact, k[j].exact, "'%s' and '%s'", prompts[i], prompts[j]);
        }
    struct gw_cache_key again = key_of("{\"prompt\":\"The sky is\",\"model\":\"m\"}", 0, 1);
    cr_assert_eq(again.exact, k[0].exact);
    gw_cache_key_deinit(&again);
    for (int i = 0; i < 6; i++)
        gw_cache_key_deinit(&k[i]);
}

Test(cache_key, a_conversation_not_ending_with_the_user_is_not_cacheable)
{
    json_t *b = json_loads("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                           "{\"role\":\"assistant\",\"content\":\"Hel\"}]}", 0, NULL);
    struct gw_cache_key k;
    cr_assert_eq(gw_cache_key_make(b, 1, 1, &k), 1);
    json_decref(b);
}

Test(cache_key, import_lines_are_validated)
{
    struct gw_import_item it;
    char err[200];
    const char *ok = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                     "\"answer\":\"a\"}";
    cr_assert_eq(gw_cache_import_parse(ok, strlen(ok), 1, NULL, "m", &it, err, sizeof err), 0,
                 "%s", err);
    struct gw_cache_key k = key_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                   "\"content\":\"q\"}],\"temperature\":1}", 1, 1);
    cr_assert_eq(it.key.exact, k.exact, "an imported entry keys like the request it answers");
    gw_cache_key_deinit(&k);
    gw_import_item_deinit(&it);
    const char *neutral = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                          "\"q\"}],\"answer\":\"a\",\"tools\":[],\"tool_choice\":\"none\","
                          "\"temperature\":0,\"seed\":-4}";
    cr_assert_eq(gw_cache_import_parse(neutral, strlen(neutral), 1, NULL, "m", &it, err,
                                       sizeof err),
                 0, "%s", err);
    gw_import_item_deinit(&it);
    /* an answer with a response format is a complete document of it */
    const char *json = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                       "\"answer\":\"{\\\"n\\\": 4}\",\"response_format\":{\"type\":"
                       "\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":{\"type\":"
                       "\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}}}}";
    cr_assert_eq(gw_cache_import_parse(json, strlen(json), 1, NULL, "m", &it, err, sizeof err),
                 0, "%s", err);
    gw_import_item_deinit(&it);
    const char *bad[] = {"not json", "[]", "{\"model\":\"m\",\"answer\":\"a\"}",
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"answer\":\"a\"}",
                         /* lines no request could be answered from */
                         "{\"model\":\"other\",\"prompt\":\"q\",\"answer\":\"a\"}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\","
                         "\"temperature\":\"hot\"}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"top_p\":1.5}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"max_tokens\":-1}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"max_tokens\":0}",
                         /* arguments no request has: a misspelt one would key the answer
                          * as the default's */
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"temprature\":0}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"ttl_s\":5}",
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                         "\"q\"}],\"answer\":\"a\",\"prompt\":\"q\"}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"seed\":0.5}",
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                         "\"answer\":\"a\",\"tools\":[{}]}",
                         /* an answer that is not a document of its format */
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                         "\"answer\":\"a\",\"response_format\":{\"type\":\"json_object\"}}",
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                         "\"answer\":\"{\\\"n\\\": \\\"x\\\"}\",\"response_format\":{\"type\":"
                         "\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":{\"type\":"
                         "\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}}}}",
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                         "\"answer\":\"{}\",\"response_format\":{\"type\":\"json_schema\","
                         "\"json_schema\":{\"name\":\"s\",\"schema\":{\"pattern\":\"x\"}}}}",
                         "{\"model\":\"m\",\"prompt\":\"q\",\"answer\":\"a\",\"echo\":true}",
                         /* a conversation with a call and its result: never cached */
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":"
                         "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                         "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c\","
                         "\"content\":\"4\"},{\"role\":\"user\",\"content\":\"q\"}],"
                         "\"answer\":\"a\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        cr_assert_eq(gw_cache_import_parse(bad[i], strlen(bad[i]), 1, NULL, "m", &it, err,
                                           sizeof err),
                     -1, "%s", bad[i]);
        cr_assert(err[0]);
    }
}

/* Whether v, of parameter key, equals one of the values that ask for what absence does. */
static int reference_neutral(const char *key, json_t *v)
{
    static const struct {
        const char *key; /* NULL: any */
        const char *json;
    } neutral[] = {
        {NULL, "[]"}, {NULL, "{}"}, {"tool_choice", "\"none\""}, {"tool_choice", "\"auto\""},
        {"response_format", "{\"type\": \"text\"}"},
    };
    for (size_t i = 0; i < sizeof neutral / sizeof *neutral; i++) {
        if (neutral[i].key && strcmp(neutral[i].key, key))
            continue;
        json_t *n = json_loads(neutral[i].json, JSON_DECODE_ANY, NULL);
        int eq = json_equal(n, v);
        json_decref(n);
        if (eq)
            return 1;
    }
    return 0;
}

/* The partition key as the json_t tree it was first defined by: json_dumps of the canonical
 * object. gw_cache_key_make writes the same text without the tree; stored entries' keys
 * depend on the two agreeing byte for byte. */
static char *reference_canon(json_t *b, int chat, int64_t ns)
{
    static const struct {
        const char *key;
        double def;
    } params[] = {
        {"temperature", 1}, {"top_p", 1}, {"presence_penalty", 0}, {"frequency_penalty", 0},
        {"top_k", 0},       {"seed", -1}, {"stop", -1},            {"tools", -1},
        {"min_p", 0},
        {"tool_choice", -1}, {"response_format", -1}, {"logit_bias", -1},
    };
    json_t *canon = json_object();
    json_object_set_new(canon, "ns", json_integer(ns));
    json_object_set_new(canon, "route", json_string(chat ? "chat" : "completion-raw"));
    json_t *model = json_object_get(b, "model");
    json_object_set_new(canon, "model",
                        json_string(json_is_string(model) ? json_string_value(model) : ""));
    for (size_t i = 0; i < sizeof params / sizeof *params; i++) {
        json_t *v = json_object_get(b, params[i].key);
        if (!v || json_is_null(v))
            continue;
        if (json_is_number(v) && params[i].def >= 0 && json_number_value(v) == params[i].def)
            continue;
        if (reference_neutral(params[i].key, v))
            continue;
        json_t *c = json_deep_copy(v);
        if (json_is_number(c)) {
            json_t *r = json_real(json_number_value(c));
            json_decref(c);
            c = r;
        } else if (!strcmp(params[i].key, "stop") && json_is_string(c)) {
            json_t *a = json_array();
            json_array_append_new(a, c);
            c = a;
        }
        json_object_set_new(canon, params[i].key, c);
    }
    if (chat) {
        json_t *msgs = json_object_get(b, "messages");
        json_t *ctx = json_array();
        for (size_t i = 0; i + 1 < json_array_size(msgs); i++) {
            json_t *m = json_array_get(msgs, i);
            const char *r = json_string_value(json_object_get(m, "role"));
            size_t len;
            long bad;
            char *t = gw_message_text(json_object_get(m, "content"), &len, &bad);
            cr_assert(r && t);
            json_t *e = json_array();
            json_array_append_new(e, json_string(strcmp(r, "developer") ? r : "system"));
            json_array_append_new(e, json_stringn(t, len));
            json_array_append_new(ctx, e);
            free(t);
        }
        json_object_set_new(canon, "context", ctx);
        json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
        json_t *name = json_object_get(last, "name");
        if (json_is_string(name) && json_string_length(name))
            json_object_set(canon, "name", name);
    }
    char *d = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(canon);
    return d;
}

Test(cache_key, partition_keys_match_the_canonical_json_of_the_request)
{
    const char *bodies[] = {
        BASE "}",
        BASE ",\"temperature\":0}",
        BASE ",\"temperature\":0.7,\"top_p\":0.9,\"presence_penalty\":-1.5,"
             "\"frequency_penalty\":2,\"top_k\":40,\"seed\":123456789}",
        BASE ",\"temperature\":1.0,\"top_p\":1,\"presence_penalty\":0,\"frequency_penalty\":0.0}",
        BASE ",\"seed\":-3,\"top_k\":1e300,\"temperature\":1e-7,\"min_p\":0.05}",
        BASE ",\"stop\":\"\\n\\n\"}",
        BASE ",\"stop\":[\"END\",\"\\u00e9\\u0000x\",\"\\ud83d\\ude00\"]}",
        BASE ",\"stop\":null,\"seed\":null,\"tools\":null}",
        BASE ",\"stop\":[],\"tools\":[],\"tool_choice\":\"none\",\"logit_bias\":{},"
             "\"response_format\":{\"type\":\"text\"}}",
        BASE ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"text\",\"x\":1}}",
        BASE ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
             "{\"z\":1,\"a\":[1.5,2,\"\\u2028\"],\"m\":{\"y\":true,\"b\":null}}}}],"
             "\"tool_choice\":\"auto\"}",
        BASE ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}},"
             "\"logit_bias\":{\"50256\":-100,\"11\":5.5}}",
        BASE ",\"temperature\":true,\"top_p\":\"high\"}",
        "{\"model\":\"m\\u00fc/\\\"q\\\"\",\"messages\":[{\"role\":\"developer\",\"content\":"
        "\"Tab\\there, caf\\u00e9, \\ud83d\\ude00, \\u0001 and a nul \\u0000 inside\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"part one \"},"
        "{\"type\":\"text\",\"text\":\"part two\"}]},{\"role\":\"user\",\"content\":\"q\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"no model\"}]}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\","
        "\"name\":\"b\\u00f6b\"}]}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\","
        "\"name\":\"\"}]}",
        "{\"model\":7,\"messages\":[{\"role\":\"user\",\"content\":\"model not a string\"}]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        for (int64_t ns = -1; ns < 3; ns += 2) {
            json_error_t e;
            json_t *b = json_loads(bodies[i], JSON_ALLOW_NUL, &e);
            cr_assert(b, "%s: %s", bodies[i], e.text);
            struct gw_cache_key k;
            cr_assert_eq(gw_cache_key_make(b, 1, ns, &k), 0, "%s", bodies[i]);
            char *want = reference_canon(b, 1, ns);
            cr_assert(want);
            cr_assert_eq(k.partition, XXH3_64bits(want, strlen(want)), "%s\nwants %s",
                         bodies[i], want);
            gw_cache_key_deinit(&k);
            free(want);
            /* the same parameters on a completion */
            json_object_set_new(b, "prompt", json_string("a prompt"));
            cr_assert_eq(gw_cache_key_make(b, 0, ns, &k), 0);
            want = reference_canon(b, 0, ns);
            cr_assert_eq(k.partition, XXH3_64bits(want, strlen(want)), "%s", want);
            gw_cache_key_deinit(&k);
            free(want);
            json_decref(b);
        }
    }
}

/* Text parts are joined by line breaks, as vLLM joins them: words at the seams do not
 * run together ("Summarize:" "Part one." was "Summarize:Part one.") */
Test(cache_key, text_parts_are_joined_by_line_breaks)
{
    json_t *c = json_loads("[{\"type\":\"text\",\"text\":\"Summarize:\"},"
                           "{\"type\":\"text\",\"text\":\"Part one.\"},"
                           "{\"type\":\"text\",\"text\":\"\"}]", 0, NULL);
    cr_assert(c);
    size_t len;
    long bad = 0;
    char *t = gw_message_text(c, &len, &bad);
    cr_assert_str_eq(t, "Summarize:\nPart one.\n");
    cr_assert_eq(len, strlen(t));
    free(t);
    json_decref(c);
    c = json_loads("[{\"type\":\"text\",\"text\":\"One part\"}]", 0, NULL);
    t = gw_message_text(c, &len, &bad);
    cr_assert_str_eq(t, "One part");
    free(t);
    json_decref(c);
    /* an assistant's refusal, written back in its history, is its text */
    c = json_loads("[{\"type\":\"refusal\",\"refusal\":\"I can't.\"}]", 0, NULL);
    t = gw_message_text(c, &len, &bad);
    cr_assert_str_eq(t, "I can't.");
    free(t);
    json_decref(c);
}

/* Messages as OpenAI takes them: content a string or a non-empty array of text parts,
 * refusal parts in an assistant's. */
Test(cache_key, messages_checked_as_openai_takes_them)
{
    static const struct {
        const char *msgs, *words, *param; /* words NULL: taken */
    } cases[] = {
        {"[{\"role\":\"user\",\"content\":\"q\"}]", NULL, NULL},
        {"[{\"role\":\"user\",\"content\":[]}]", "messages[0].content must be a string or a "
                                                 "non-empty array", "messages.[0].content"},
        {"[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
         "[{\"type\":\"refusal\",\"refusal\":\"No.\"}]},{\"role\":\"user\",\"content\":\"q\"}]",
         NULL, NULL},
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"No.\"}]}]",
         "messages[0].content[0]: only an assistant message has refusal parts",
         "messages.[0].content.[0]"},
        {"[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
         "[{\"type\":\"refusal\",\"text\":\"No.\"}]}]",
         "messages[1].content[0] must be a text part", "messages.[1].content.[0]"},
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]",
         "images, audio and files are not supported", "messages.[0].content.[0]"},
        {"[{\"role\":\"robot\",\"content\":\"q\"}]", "role must be", "messages.[0].role"},
        {"[]", "non-empty array", "messages"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *m = json_loads(cases[i].msgs, 0, NULL);
        cr_assert(m, "case %zu", i);
        char msg[300] = "", param[64] = "";
        int rc = gw_messages_check(m, msg, sizeof msg, param, sizeof param);
        if (cases[i].words) {
            cr_expect(rc == -1 && strstr(msg, cases[i].words), "case %zu: %d %s", i, rc, msg);
            cr_expect_str_eq(param, cases[i].param, "case %zu", i);
        } else {
            cr_expect_eq(rc, 0, "case %zu: %s", i, msg);
        }
        json_decref(m);
    }
}

Test(cache_key, ascii_and_unicode_queries_normalize_alike)
{
    size_t n;
    const char *q = "  What\tis\n\n it?  ";
    char *a = gw_cache_normalize(q, strlen(q), &n);
    cr_assert_str_eq(a, "What is it?");
    cr_assert_eq(n, 11);
    free(a);
    /* e + combining acute composes to U+00E9 */
    q = " caf\x65\xcc\x81  now ";
    char *d = gw_cache_normalize(q, strlen(q), &n);
    cr_assert_str_eq(d, "caf\xc3\xa9 now");
    free(d);
    /* indentation of two columns or more is kept with its line break: in Python the two
     * bodies below return different things */
    q = "What does f(False) return?\n\ndef f(x):\n    if x:\n        print(1)\n    return 2 ";
    char *e = gw_cache_normalize(q, strlen(q), &n);
    cr_assert_str_eq(e, "What does f(False) return? def f(x):\n    if x:\n        print(1)\n"
                        "    return 2");
    q = "What does f(False) return?\n\ndef f(x):\n    if x:\n        print(1)\n        return 2";
    char *f = gw_cache_normalize(q, strlen(q), &n);
    cr_assert_str_neq(e, f);
    free(f);
    free(e);
    q = "a\n\t b\r\n\tc \n d";
    char *g = gw_cache_normalize(q, strlen(q), &n);
    cr_assert_str_eq(g, "a\n\t b\n\tc d");
    cr_assert_eq(n, strlen(g));
    free(g);
    /* within quotes, spaces are what is asked about: kept as they are (one space is one) */
    const char *kept[][2] = {
        {"How many spaces are in  'a   b'? ", "How many spaces are in 'a   b'?"},
        {"print(\"x    y\".split(' '))", "print(\"x    y\".split(' '))"},
        {"What does `a\tb` print?", "What does `a\tb` print?"},
        {"Is 'a b' one  word?", "Is 'a b' one word?"},
        {"Don't  panic, it's  'fine'", "Don't panic, it's 'fine'"},
        {"the users' input 'a  b'", "the users' input 'a  b'"},
        {"Zo\xc3\xab's  \"a  b\"", "Zo\xc3\xab's \"a  b\""},
        {"'open\nand  closed'", "'open and closed'"},
    };
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
        char *h = gw_cache_normalize(kept[i][0], strlen(kept[i][0]), &n);
        cr_assert_str_eq(h, kept[i][1]);
        free(h);
    }
}

/* A cache without an embedder over a store in a new directory */
struct cache_fx {
    char dir[40];
    store *st;
    struct gw_config cfg;
    gw_metrics *m;
    gw_cache *c;
};

static void fx_open(struct cache_fx *f, int dim)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/cachegate-cache-XXXXXX");
    cr_assert(mkdtemp(f->dir));
    struct store_options so = {.dir = f->dir, .dim = dim};
    char err[256];
    cr_assert_eq(store_open(&so, NULL, NULL, &f->st, err, sizeof err), STORE_OK, "%s", err);
    gw_config_defaults(&f->cfg);
    f->m = gw_metrics_create();
    f->c = gw_cache_create(&f->cfg, f->st, NULL, dim, f->m, err, sizeof err);
    cr_assert(f->c, "%s", err);
}

static void fx_close(struct cache_fx *f)
{
    gw_cache_destroy(f->c);
    store_close(f->st);
    gw_metrics_destroy(f->m);
    gw_config_deinit(&f->cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    cr_assert_eq(system(cmd), 0);
}

/* An answer whose tenant is deleted before it is written is dropped by the store; the
 * writes counter says "dropped", not "ok". */
Test(cache_writes, an_answer_for_a_deleted_tenant_counts_as_dropped)
{
    enum { DIM = 8 };
    struct cache_fx f;
    fx_open(&f, DIM);
    store *st = f.st;
    gw_cache *c = f.c;
    gw_metrics *m = f.m;
    int64_t kept, gone;
    cr_assert_eq(store_tenant_create(st, "kept", &kept), STORE_OK);
    cr_assert_eq(store_tenant_create(st, "gone", &gone), STORE_OK);
    struct gw_cache_key k = key_of(BASE "}", 1, 0);
    const float vec[DIM] = {1, 0, 0, 0, 0, 0, 0, 0};
    gw_cache_put(c, kept, &k, vec, "m", "Paris.", 6, 10, 2, 0);
    cr_assert_eq(store_tenant_delete(st, "gone"), STORE_OK);
    gw_cache_put(c, gone, &k, vec, "m", "Paris.", 6, 10, 2, 0);
    cr_assert_eq(store_sync(st), STORE_OK);
    char *text = gw_metrics_render(m, NULL);
    cr_assert(strstr(text, "cachegate_cache_writes_total{result=\"ok\"} 1\n"), "%s", text);
    cr_assert(strstr(text, "cachegate_cache_writes_total{result=\"dropped\"} 1\n"), "%s", text);
    free(text);
    gw_cache_key_deinit(&k);
    fx_close(&f);
}

/* ---------------------------------------------- stored responses and chat completions */

/* a listing's ids and bodies, "id=body;" each */
static int list_into(void *arg, const char *id, const char *body)
{
    char *out = arg;
    size_t n = strlen(out);
    snprintf(out + n, 512 - n, "%s=%s;", id, body);
    return strlen(out) > 400; /* (never here: a stop is asked of the second by list_two) */
}

static int list_two(void *arg, const char *id, const char *body)
{
    list_into(arg, id, body);
    return strchr(strchr(arg, ';') + 1, ';') != NULL;
}

static char *listing(gw_cache *c, int64_t t, const char *after, int desc, int *rc)
{
    static char out[512];
    out[0] = 0;
    *rc = gw_cache_response_list(c, t, "chatcmpl-", after, desc, list_into, out);
    return out;
}

/* Stored completions the writer has not committed yet (a lock held on the database keeps it
 * waiting) are read, listed in order beside the committed ones, changed and deleted; once
 * committed, the change and the deletion are what the database holds. */
Test(cache_responses, those_not_yet_committed_are_listed_changed_and_deleted_in_order)
{
    struct cache_fx f;
    fx_open(&f, 8);
    store *st = f.st;
    gw_cache *c = f.c;
    int64_t t, u;
    cr_assert_eq(store_tenant_create(st, "t", &t), STORE_OK);
    cr_assert_eq(store_tenant_create(st, "u", &u), STORE_OK);
    cr_assert_eq(gw_cache_response_put(c, t, "chatcmpl-1", "a", "[]", 0), STORE_OK);
    cr_assert_eq(gw_cache_response_put(c, t, "resp_1", "r", "[]", 0), STORE_OK);
    cr_assert_eq(store_sync(st), STORE_OK);
    cr_assert_eq(gw_cache_response_set_body(c, t, "chatcmpl-1", "A"), STORE_OK);
    cr_assert_eq(gw_cache_response_set_body(c, u, "chatcmpl-1", "x"), STORE_ENOTFOUND);

    char path[300];
    snprintf(path, sizeof path, "%s/cachegate.db", f.dir);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    const char *ids[] = {"chatcmpl-2", "chatcmpl-3", "chatcmpl-4"}, *bodies[] = {"b", "c", "d"};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(gw_cache_response_put(c, t, ids[i], bodies[i], "[]", 0), STORE_OK);
    int rc;
    cr_assert_str_eq(listing(c, t, NULL, 0, &rc),
                     "chatcmpl-1=A;chatcmpl-2=b;chatcmpl-3=c;chatcmpl-4=d;");
    cr_assert_str_eq(listing(c, t, NULL, 1, &rc),
                     "chatcmpl-4=d;chatcmpl-3=c;chatcmpl-2=b;chatcmpl-1=A;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-2", 0, &rc), "chatcmpl-3=c;chatcmpl-4=d;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-3", 1, &rc), "chatcmpl-2=b;chatcmpl-1=A;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-1", 0, &rc), "chatcmpl-2=b;chatcmpl-3=c;"
                                                          "chatcmpl-4=d;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-1", 1, &rc), "");
    cr_assert_eq(rc, STORE_OK);
    char two[512] = "";
    cr_assert_eq(gw_cache_response_list(c, t, "chatcmpl-", NULL, 1, list_two, two), STORE_OK);
    cr_assert_str_eq(two, "chatcmpl-4=d;chatcmpl-3=c;");
    cr_assert_str_eq(listing(c, u, NULL, 0, &rc), "");
    sqlite3_stmt *q; /* (none of them is in the database yet) */
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM responses", -1, &q, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(q, 0), 2);
    sqlite3_finalize(q);

    cr_assert_eq(gw_cache_response_set_body(c, t, "chatcmpl-3", "C"), STORE_OK);
    cr_assert_eq(gw_cache_response_delete(c, t, "chatcmpl-4"), STORE_OK);
    cr_assert_eq(gw_cache_response_set_body(c, t, "chatcmpl-4", "D"), STORE_ENOTFOUND);
    cr_assert_str_eq(listing(c, t, NULL, 0, &rc), "chatcmpl-1=A;chatcmpl-2=b;chatcmpl-3=C;");
    /* a cursor deleted since stands where it stood; one never there, or another kind's, is
     * not found */
    cr_assert_str_eq(listing(c, t, "chatcmpl-4", 1, &rc), "chatcmpl-3=C;chatcmpl-2=b;"
                                                          "chatcmpl-1=A;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-4", 0, &rc), "");
    cr_assert_eq(rc, STORE_OK);
    listing(c, t, "chatcmpl-9", 1, &rc);
    cr_assert_eq(rc, STORE_ENOTFOUND);
    listing(c, t, "resp_1", 0, &rc);
    cr_assert_eq(rc, STORE_ENOTFOUND);

    cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    cr_assert_eq(store_sync(st), STORE_OK);
    cr_assert_str_eq(listing(c, t, NULL, 1, &rc), "chatcmpl-3=C;chatcmpl-2=b;chatcmpl-1=A;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-4", 1, &rc), "chatcmpl-3=C;chatcmpl-2=b;"
                                                          "chatcmpl-1=A;");
    cr_assert_eq(gw_cache_response_delete(c, t, "chatcmpl-2"), STORE_OK);
    cr_assert_str_eq(listing(c, t, "chatcmpl-2", 0, &rc), "chatcmpl-3=C;");
    cr_assert_str_eq(listing(c, t, "chatcmpl-2", 1, &rc), "chatcmpl-1=A;");
    cr_assert_eq(gw_cache_response_delete(c, t, "chatcmpl-2"), STORE_ENOTFOUND);
    listing(c, u, "chatcmpl-2", 0, &rc); /* (another tenant's cursor) */
    cr_assert_eq(rc, STORE_ENOTFOUND);
    /* what the database holds */
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT group_concat(id || '=' || body, ';') FROM "
                                        "(SELECT id, body FROM responses ORDER BY id)",
                                    -1, &q, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(q, 0),
                     "chatcmpl-1=A;chatcmpl-3=C;resp_1=r");
    sqlite3_finalize(q);
    sqlite3_close(db);
    fx_close(&f);
}

/* ---------------------------------------------- semantic lookups judged together */

static struct event_base *loop;
static int looked_up, to_look_up;

static void looked(struct gw_cache_sem *s)
{
    (void)s;
    if (++looked_up == to_look_up)
        event_base_loopbreak(loop);
}

static void too_long(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    event_base_loopbreak(loop);
}

/* Submits lookups of qs[0..n) (each with key k[i]) at once and runs the loop until they
 * are done. */
static int lookups_store = 1; /* look_up()'s requests store their answers (not no-store) */

static void look_up(gw_cache *c, int64_t tenant, struct gw_cache_key *k, int n,
                    struct gw_cache_sem *s)
{
    looked_up = 0;
    to_look_up = n;
    for (int i = 0; i < n; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].tenant = tenant;
        s[i].key = &k[i];
        s[i].threshold = 0.70;
        s[i].max_tokens = 1000;
        s[i].stores = lookups_store;
        s[i].done = looked;
        gw_cache_semantic(c, &s[i]);
    }
    struct event *guard = evtimer_new(loop, too_long, NULL);
    struct timeval tv = {60, 0};
    evtimer_add(guard, &tv);
    event_base_dispatch(loop);
    event_free(guard);
    cr_assert_eq(looked_up, n, "lookups done: %d of %d", looked_up, n);
}

/* a metric's value without labels; 0 before it has one */
static double metric_value(gw_metrics *m, const char *name)
{
    char *text = gw_metrics_render(m, NULL), key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *at = strstr(text, key);
    double v = at ? atof(at + strlen(key)) : 0;
    free(text);
    return v;
}

/* the judge's forward passes, the pairs and the texts it embedded in them */
struct judge_work {
    double passes, pairs, texts;
};

static struct judge_work judge_work(gw_metrics *m)
{
    return (struct judge_work){metric_value(m, "cachegate_cache_judge_pairs_count"),
                               metric_value(m, "cachegate_cache_judge_pairs_sum"),
                               metric_value(m, "cachegate_cache_judge_texts_total")};
}

/* four stored questions and a paraphrase or a near miss of each */
static const char *const stored[][2] = {
    {"What should I pack for a beach vacation?", "Sunscreen, a hat, a towel."},
    {"How is a HELOC different from a home equity loan?", "A HELOC is a credit line."},
    {"What is the capital of France?", "Paris."},
    {"How do I reset my router to factory settings?", "Hold the reset button."},
};
static const char *const asked[] = {
    "What should I leave at home for a beach vacation?",    /* the judge refuses */
    "How is a HELOC different from a cash-out refinance?",  /* the judge refuses */
    "What's France's capital city?",                        /* a hit */
    "How can I restore my router to its factory settings?", /* a hit */
};
enum { N = 4 };

/* a cache on a real embedder and store, with the four stored; lookups submitted within
 * 300 ms of each other share an embedder pass */
struct world {
    emb_model *em;
    char dir[64];
    store *st;
    int64_t tenant;
    struct gw_config cfg;
    gw_cq *cq;
    gw_metrics *m;
    gw_embedw *w;
    gw_cache *c;
    struct gw_cache_key k[N]; /* asked[i]'s */
};

static void chat_body(char *body, size_t size, const char *content)
{
    snprintf(body, size,
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
             content);
}

/* runs the loop for a tenth of a second */
static void spin(void)
{
    struct event *guard = evtimer_new(loop, too_long, NULL);
    struct timeval tv = {0, 100000};
    evtimer_add(guard, &tv);
    event_base_dispatch(loop);
    event_free(guard);
}

static void world_open(struct world *x, int64_t judge_bytes)
{
    cr_assert_eq(evthread_use_pthreads(), 0);
    char err[512];
    cr_assert_eq(emb_model_load("models/all-minilm-l6-v2", NULL, &x->em, err, sizeof err), 0,
                 "%s", err);
    const int dim = emb_dim(x->em);
    strcpy(x->dir, "/tmp/cachegate-judged-XXXXXX");
    cr_assert(mkdtemp(x->dir));
    struct store_options so = {.dir = x->dir, .dim = dim};
    cr_assert_eq(store_open(&so, NULL, NULL, &x->st, err, sizeof err), STORE_OK, "%s", err);
    cr_assert_eq(store_tenant_create(x->st, "t", &x->tenant), STORE_OK);
    gw_config_defaults(&x->cfg);
    cr_assert(x->cfg.cache_guard && x->cfg.cache_judge_threshold > 0);
    x->cfg.cache_judge_bytes = judge_bytes;
    loop = event_base_new();
    x->cq = gw_cq_create(loop);
    x->m = gw_metrics_create();
    x->w = gw_embedw_create(x->em, x->cq, 64, 300000, NULL);
    cr_assert(x->w);
    x->c = gw_cache_create(&x->cfg, x->st, x->w, dim, x->m, err, sizeof err);
    cr_assert(x->c, "%s", err);
    char body[512];
    for (int i = 0; i < N; i++) {
        chat_body(body, sizeof body, stored[i][0]);
        struct gw_cache_key sk = key_of(body, 1, 0);
        gw_cache_put(x->c, x->tenant, &sk, NULL, "m", stored[i][1], strlen(stored[i][1]), 10,
                     5, 0);
        gw_cache_key_deinit(&sk);
        chat_body(body, sizeof body, asked[i]);
        x->k[i] = key_of(body, 1, 0);
    }
    /* the puts embed on the worker, then write: wait until all four are searchable */
    for (int tries = 0;; tries++) {
        spin();
        cr_assert_eq(store_sync(x->st), STORE_OK);
        struct store_tenant_stats ts;
        if (store_stats(x->st, &ts, 1) == 1 && ts.entries == N)
            break;
        cr_assert(tries < 300, "the entries were not written");
    }
}

static void world_close(struct world *x)
{
    for (int i = 0; i < N; i++)
        gw_cache_key_deinit(&x->k[i]);
    gw_embedw_destroy(x->w);
    gw_cache_destroy(x->c);
    store_close(x->st);
    gw_cq_destroy(x->cq);
    gw_metrics_destroy(x->m);
    event_base_free(loop);
    emb_model_destroy(x->em);
    gw_config_deinit(&x->cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", x->dir);
    cr_assert_eq(system(cmd), 0);
}

/* lookup i's verdict is alone's: the same hit, or the judge's miss at a probability within
 * 0.02 of alone's (pa; texts in one pass sum their GEMMs in another order, about 2e-6 on
 * the states, which can move a feature across a tree's split) */
static void same_verdict(const struct gw_cache_sem *t, const struct gw_cache_sem *alone, int i)
{
    cr_assert_eq(t->rc, 0);
    cr_assert_eq(t->hit, alone->hit, "%s: %s", asked[i], t->why);
    if (t->hit) {
        cr_assert_str_eq(t->entry.answer, stored[i][1]);
        return;
    }
    double pa, pt;
    cr_assert_eq(sscanf(alone->why, "judge: the same question at %lf", &pa), 1, "%s",
                 alone->why);
    cr_assert_eq(sscanf(t->why, "judge: the same question at %lf", &pt), 1, "%s", t->why);
    cr_assert(pa < 0.5 && fabs(pa - pt) <= 0.02, "%s: %g alone, %g", asked[i], pa, pt);
}

/* each lookup alone: the verdicts the test expects */
static void look_up_alone(struct world *x, struct gw_cache_sem *alone)
{
    for (int i = 0; i < N; i++) {
        look_up(x->c, x->tenant, &x->k[i], 1, &alone[i]);
        cr_assert_eq(alone[i].rc, 0);
        cr_assert_eq(alone[i].hit, i >= 2, "%s: %s", asked[i], alone[i].why);
        if (alone[i].hit)
            cr_assert_str_eq(alone[i].entry.answer, stored[i][1]);
        else
            cr_assert(!strncmp(alone[i].why, "judge: ", 7), "%s", alone[i].why);
    }
}

/* 20 long answers stored (20 x 256 tokens): their embedder pass, which the lookups after
 * share, is too large to keep the lookups' states (4096 tokens) */
static void crowd(struct world *x)
{
    char long_text[4096] = "", body[4200];
    for (int i = 0; i < 20; i++) {
        size_t at = 0;
        for (int j = 0; j < 60; j++)
            at += (size_t)snprintf(long_text + at, sizeof long_text - at,
                                   "a long text %d about item %d; ", i, j);
        chat_body(body, sizeof body, long_text);
        struct gw_cache_key lk = key_of(body, 1, 0);
        gw_cache_put(x->c, x->tenant, &lk, NULL, "m", "x", 1, 10, 1, 0);
        gw_cache_key_deinit(&lk);
    }
}

/* The lookups done after one embedder pass are weighed together: the judge embeds all
 * their stored questions in one forward pass instead of one pass each (here with nothing
 * kept from one lookup to the next: cache.judge_bytes = 0), and takes the new questions'
 * tokens from the pass that embedded them for the search (or embeds them too, when that
 * pass was too large to keep them). Each one's verdict is the one it gets alone. */
Test(cache_judge, lookups_done_together_are_judged_together_as_if_alone, .timeout = 240)
{
    struct world x;
    world_open(&x, 0);
    /* alone, together, and together in a pass too large to keep their states (crowd()) */
    struct gw_cache_sem alone[N], together[N], crowded[N];
    struct judge_work w0 = judge_work(x.m);
    look_up_alone(&x, alone);
    struct judge_work w1 = judge_work(x.m);
    look_up(x.c, x.tenant, x.k, N, together);
    struct judge_work w2 = judge_work(x.m);
    crowd(&x);
    look_up(x.c, x.tenant, x.k, N, crowded);
    struct judge_work w3 = judge_work(x.m);

    /* alone: each lookup's pair in a pass of its own, the new question's tokens from the
     * pass that embedded it for the search: one text each */
    cr_assert_eq(w1.passes - w0.passes, N);
    cr_assert_eq(w1.pairs - w0.pairs, N);
    cr_assert_eq(w1.texts - w0.texts, N, "texts: %g", w1.texts - w0.texts);
    /* together: all four pairs in one pass */
    cr_assert_eq(w2.passes - w1.passes, 1, "passes: %g", w2.passes - w1.passes);
    cr_assert_eq(w2.pairs - w1.pairs, N, "pairs: %g", w2.pairs - w1.pairs);
    cr_assert_eq(w2.texts - w1.texts, N, "texts: %g", w2.texts - w1.texts);
    /* crowded: the judge embeds the new questions too */
    cr_assert_eq(w3.passes - w2.passes, 1, "passes: %g", w3.passes - w2.passes);
    cr_assert_eq(w3.texts - w2.texts, 2 * N, "texts: %g", w3.texts - w2.texts);
    for (int i = 0; i < N; i++) {
        same_verdict(&together[i], &alone[i], i);
        same_verdict(&crowded[i], &alone[i], i);
        gw_cache_sem_deinit(&alone[i]);
        gw_cache_sem_deinit(&together[i]);
        gw_cache_sem_deinit(&crowded[i]);
    }
    world_close(&x);
}

/* Callers asking one stored question at once, in other words or in the same: the judge
 * embeds it once for all of them (and the new question asked twice, once, when their pass
 * kept no states), and each gets the hit it gets alone. */
Test(cache_judge, a_question_several_wait_on_is_embedded_once, .timeout = 240)
{
    struct world x;
    world_open(&x, 0);
    char body[512];
    const char *const texts[] = {asked[2], "Could you tell me the capital of France?", asked[2],
                                 asked[3]};
    enum { M = 4 };
    struct gw_cache_key k[M];
    for (int i = 0; i < M; i++) {
        chat_body(body, sizeof body, texts[i]);
        k[i] = key_of(body, 1, 0);
    }
    struct gw_cache_sem together[M], crowded[M];
    struct judge_work w0 = judge_work(x.m);
    look_up(x.c, x.tenant, k, M, together);
    struct judge_work w1 = judge_work(x.m);
    crowd(&x);
    look_up(x.c, x.tenant, k, M, crowded);
    struct judge_work w2 = judge_work(x.m);
    /* together: four pairs, two stored questions */
    cr_assert_eq(w1.passes - w0.passes, 1, "passes: %g", w1.passes - w0.passes);
    cr_assert_eq(w1.pairs - w0.pairs, M, "pairs: %g", w1.pairs - w0.pairs);
    cr_assert_eq(w1.texts - w0.texts, 2, "texts: %g", w1.texts - w0.texts);
    /* crowded: and three new questions */
    cr_assert_eq(w2.passes - w1.passes, 1, "passes: %g", w2.passes - w1.passes);
    cr_assert_eq(w2.texts - w1.texts, 2 + 3, "texts: %g", w2.texts - w1.texts);
    for (int i = 0; i < M; i++) {
        const int want = i < 3 ? 2 : 3;
        cr_assert(together[i].hit, "%s: %s", texts[i], together[i].why);
        cr_assert_str_eq(together[i].entry.answer, stored[want][1]);
        cr_assert(crowded[i].hit, "%s: %s", texts[i], crowded[i].why);
        cr_assert_str_eq(crowded[i].entry.answer, stored[want][1]);
        gw_cache_sem_deinit(&together[i]);
        gw_cache_sem_deinit(&crowded[i]);
        gw_cache_key_deinit(&k[i]);
    }
    world_close(&x);
}

/* A question that missed, stored with its answer (as the engine's answer to it is), then
 * asked in other words: with cache.judge_bytes the judge has the stored question's tokens
 * from the lookup that missed, and needs no pass; without, or where the request that missed
 * said no-store (its question kept nowhere), one pass of it. The hit either way. */
static void missed_then_paraphrased(int64_t judge_bytes, int stores, int passes, int texts)
{
    static const char *const q = "What is the best way to learn Python programming?",
                             *const p = "What's the best way to learn programming in Python?";
    struct world x;
    world_open(&x, judge_bytes);
    char body[512];
    struct gw_cache_key kq, kp;
    chat_body(body, sizeof body, q);
    kq = key_of(body, 1, 0);
    chat_body(body, sizeof body, p);
    kp = key_of(body, 1, 0);
    struct gw_cache_sem miss, hit;
    lookups_store = stores;
    look_up(x.c, x.tenant, &kq, 1, &miss);
    lookups_store = 1;
    cr_assert(!miss.rc && !miss.hit && miss.vec);
    gw_cache_put(x.c, x.tenant, &kq, miss.vec, "m", "Write small programs every day.", 31, 12,
                 7, 0);
    for (int tries = 0;; tries++) {
        spin();
        cr_assert_eq(store_sync(x.st), STORE_OK);
        struct store_tenant_stats ts;
        if (store_stats(x.st, &ts, 1) == 1 && ts.entries == N + 1)
            break;
        cr_assert(tries < 300, "the entry was not written");
    }
    struct judge_work w0 = judge_work(x.m);
    look_up(x.c, x.tenant, &kp, 1, &hit);
    struct judge_work w1 = judge_work(x.m);
    cr_assert(hit.hit, "%s", hit.why);
    cr_assert_str_eq(hit.entry.answer, "Write small programs every day.");
    cr_assert_eq(w1.passes - w0.passes, passes, "passes: %g", w1.passes - w0.passes);
    cr_assert_eq(w1.texts - w0.texts, texts, "texts: %g", w1.texts - w0.texts);
    gw_cache_sem_deinit(&miss);
    gw_cache_sem_deinit(&hit);
    gw_cache_key_deinit(&kq);
    gw_cache_key_deinit(&kp);
    world_close(&x);
}

Test(cache_judge, a_question_that_missed_needs_no_judge_pass_at_its_first_hit, .timeout = 240)
{
    missed_then_paraphrased(1 << 20, 1, 0, 0);
    missed_then_paraphrased(0, 1, 1, 1);
    missed_then_paraphrased(1 << 20, 0, 1, 1);
}

/* With cache.judge_bytes, the stored questions' tokens the judge made are kept for their
 * next hits: the same four asked again in one pass need no judge's pass, and get the same
 * verdicts, at the same probabilities. */
Test(cache_judge, a_stored_question_is_embedded_for_the_judge_once, .timeout = 240)
{
    struct world x;
    world_open(&x, 1 << 20);
    struct gw_cache_sem alone[N], again[N];
    struct judge_work w0 = judge_work(x.m);
    look_up_alone(&x, alone);
    struct judge_work w1 = judge_work(x.m);
    look_up(x.c, x.tenant, x.k, N, again);
    struct judge_work w2 = judge_work(x.m);
    cr_assert_eq(w1.texts - w0.texts, N);
    cr_assert_eq(w2.passes - w1.passes, 0);
    cr_assert_eq(w2.texts - w1.texts, 0);
    double kept = metric_value(x.m, "cachegate_cache_judge_kept_bytes");
    cr_assert(kept > 4 * 3 * 384 * 4 && kept <= 1 << 20, "%g bytes kept", kept);
    for (int i = 0; i < N; i++) {
        same_verdict(&again[i], &alone[i], i);
        if (!alone[i].hit)
            cr_assert_str_eq(again[i].why, alone[i].why);
        gw_cache_sem_deinit(&alone[i]);
        gw_cache_sem_deinit(&again[i]);
    }
    world_close(&x);
}
