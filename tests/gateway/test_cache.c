/* cache keys: what splits partitions and what keys alike. */
#include "cache.h"

#include <criterion/criterion.h>
#include <string.h>

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
    cr_assert_eq(gw_cache_import_parse(ok, strlen(ok), 1, NULL, &it, err, sizeof err), 0, "%s",
                 err);
    struct gw_cache_key k = key_of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                   "\"content\":\"q\"}],\"temperature\":1}", 1, 1);
    cr_assert_eq(it.key.exact, k.exact, "an imported entry keys like the request it answers");
    gw_cache_key_deinit(&k);
    gw_import_item_deinit(&it);
    const char *bad[] = {"not json", "[]", "{\"model\":\"m\",\"answer\":\"a\"}",
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"answer\":\"a\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        cr_assert_eq(gw_cache_import_parse(bad[i], strlen(bad[i]), 1, NULL, &it, err, sizeof err),
                     -1, "%s", bad[i]);
        cr_assert(err[0]);
    }
}
