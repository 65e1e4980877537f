/*
 * A stream's chunks put together into the chat.completion a JSON reply would have been: the
 * record a stored chat completion keeps of a streamed answer.
 */
#include "stored_chat.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static json_t *put(json_t *acc, const char *chunk)
{
    json_error_t e;
    json_t *c = json_loads(chunk, 0, &e);
    cr_assert(c, "%s: %s", chunk, e.text);
    acc = gw_stored_chunk(acc, c);
    json_decref(c);
    cr_assert(acc);
    return acc;
}

#define HEAD "\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":7," \
             "\"model\":\"m\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_1\""

static void same(json_t *acc, const char *want)
{
    json_t *w = json_loads(want, 0, NULL);
    cr_assert(w, "%s", want);
    char *got = json_dumps(acc, JSON_COMPACT | JSON_SORT_KEYS);
    char *exp = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_str_eq(got, exp);
    free(got);
    free(exp);
    json_decref(w);
}

/* two choices' chunks interleaved, as n = 2 streams them; logprobs; the usage chunk */
Test(stored_chunk, choices_texts_logprobs_and_usage_come_together)
{
    json_t *acc = NULL;
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":1,\"delta\":{\"role\":\"assistant\","
                   "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                   "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},"
                   "\"logprobs\":{\"content\":[{\"token\":\"Hel\",\"logprob\":-0.5}],"
                   "\"refusal\":null},\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":1,\"delta\":{\"content\":\"Hi\"},"
                   "\"logprobs\":null,\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},"
                   "\"logprobs\":{\"content\":[{\"token\":\"lo\",\"logprob\":-0.25}],"
                   "\"refusal\":null},\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,"
                   "\"finish_reason\":\"stop\"}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":1,\"delta\":{},\"logprobs\":null,"
                   "\"finish_reason\":\"length\"}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                   "\"completion_tokens\":4,\"total_tokens\":7}}");
    /* its texts joined, as it is stored */
    cr_assert_eq(gw_stored_finish(acc), 0);
    same(acc, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":7,"
              "\"model\":\"m\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_1\","
              "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
              "\"Hello\",\"refusal\":null},\"logprobs\":{\"content\":[{\"token\":\"Hel\","
              "\"logprob\":-0.5},{\"token\":\"lo\",\"logprob\":-0.25}],\"refusal\":null},"
              "\"finish_reason\":\"stop\"},{\"index\":1,\"message\":{\"role\":\"assistant\","
              "\"content\":\"Hi\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":"
              "\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
              "\"total_tokens\":7}}");
    json_decref(acc);
}

/* two calls, the second's deltas after the first's, their arguments in pieces */
Test(stored_chunk, tool_calls_come_together_by_their_index)
{
    json_t *acc = NULL;
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                   "\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":"
                   "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":\"}}]},"
                   "\"logprobs\":null,\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
                   "\"function\":{\"arguments\":\"1}\"}}]},\"logprobs\":null,"
                   "\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
                   "\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"g\","
                   "\"arguments\":\"{}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}");
    acc = put(acc, "{" HEAD ",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,"
                   "\"finish_reason\":\"tool_calls\"}]}");
    cr_assert_eq(gw_stored_finish(acc), 0);
    same(acc, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":7,"
              "\"model\":\"m\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_1\","
              "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"
              "\"refusal\":null,\"tool_calls\":[{\"id\":\"call_a\",\"type\":\"function\","
              "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}},{\"id\":"
              "\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":"
              "\"{}\"}}]},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":null}");
    json_decref(acc);
}

/* a chunk that is no chunk of a choice this server sends is refused, not grown into */
Test(stored_chunk, a_choice_index_out_of_range_is_refused)
{
    json_t *c = json_loads("{" HEAD ",\"choices\":[{\"index\":100000,\"delta\":{}}]}", 0, NULL);
    cr_assert_null(gw_stored_chunk(NULL, c));
    json_decref(c);
}
