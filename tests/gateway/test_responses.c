/* The Responses API's requests read as chat requests, and its response objects. */
#include "responses.h"

#include <criterion/criterion.h>
#include <string.h>

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    cr_assert(v, "bad test JSON: %s", e.text);
    return v;
}

/* The chat body of a Responses body (history may be NULL), checked to be one, as text. */
static char *translate(const char *body, const char *history, json_t **echo, char **convo)
{
    json_t *b = parse(body), *h = history ? parse(history) : NULL, *e, *c;
    const char *param;
    char msg[256];
    json_t *out = gw_responses_request(b, h, &e, &c, &param, msg, sizeof msg);
    cr_assert(out, "refused: %s (%s)", msg, param ? param : "-");
    char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    if (convo)
        *convo = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    if (echo)
        *echo = e;
    else
        json_decref(e);
    json_decref(c);
    json_decref(out);
    json_decref(b);
    json_decref(h);
    return s;
}

static const char *refused(const char *body)
{
    json_t *b = parse(body), *e, *c;
    const char *param = "(none)";
    char msg[256];
    json_t *out = gw_responses_request(b, NULL, &e, &c, &param, msg, sizeof msg);
    cr_assert_null(out, "%s was taken", body);
    cr_assert_null(e);
    cr_assert_null(c);
    cr_assert(msg[0]);
    json_decref(b);
    return param;
}

Test(responses, instructions_history_and_input_in_order)
{
    char *convo;
    char *s = translate(
        "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"max_output_tokens\":9,"
        "\"temperature\":0,\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
        "\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]}]}",
        "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello\"}]",
        NULL, &convo);
    cr_assert_str_eq(s, "{\"max_tokens\":9,\"messages\":[{\"content\":\"Be brief.\",\"role\":"
                        "\"system\"},{\"content\":\"Hi\",\"role\":\"user\"},{\"content\":"
                        "\"Hello\",\"role\":\"assistant\"},{\"content\":[{\"text\":\"a\","
                        "\"type\":\"text\"},{\"text\":\"b\",\"type\":\"text\"}],\"role\":"
                        "\"user\"}],\"model\":\"m\",\"temperature\":0}");
    /* what is stored: without the instructions, which a continuation does not inherit */
    cr_assert_str_eq(convo, "[{\"content\":\"Hi\",\"role\":\"user\"},{\"content\":\"Hello\","
                            "\"role\":\"assistant\"},{\"content\":[{\"text\":\"a\",\"type\":"
                            "\"text\"},{\"text\":\"b\",\"type\":\"text\"}],\"role\":\"user\"}]");
    free(s);
    free(convo);
}

Test(responses, a_string_input_and_earlier_outputs_are_messages)
{
    char *s = translate("{\"model\":\"m\",\"input\":\"What?\",\"stream\":true}", NULL, NULL,
                        NULL);
    cr_assert_str_eq(s, "{\"messages\":[{\"content\":\"What?\",\"role\":\"user\"}],\"model\":"
                        "\"m\",\"stream\":true}");
    free(s);
    s = translate("{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"role\":\"assistant\","
                  "\"id\":\"msg_1\",\"status\":\"completed\",\"content\":[{\"type\":"
                  "\"output_text\",\"text\":\"Hi\",\"annotations\":[]}]},{\"role\":\"developer\","
                  "\"content\":\"x\"}],\"tool_choice\":\"none\",\"tools\":[{\"type\":\"function\","
                  "\"name\":\"f\"}]}",
                  NULL, NULL, NULL);
    /* tool_choice "none" is passed on: it keys the caches as chat's does */
    cr_assert_str_eq(s, "{\"messages\":[{\"content\":[{\"text\":\"Hi\",\"type\":\"text\"}],"
                        "\"role\":\"assistant\"},{\"content\":\"x\",\"role\":\"developer\"}],"
                        "\"model\":\"m\",\"tool_choice\":\"none\"}");
    free(s);
}

Test(responses, what_is_not_done_is_refused_naming_it)
{
    cr_assert_str_eq(refused("{\"model\":\"m\"}"), "input");
    cr_assert_str_eq(refused("{\"input\":\"\"}"), "input");
    cr_assert_str_eq(refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
                             "\"input_file\",\"file_id\":\"f\"}]}]}"),
                     "input");
    cr_assert_str_eq(refused("{\"input\":[{\"type\":\"reasoning\",\"summary\":[]}]}"), "input");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"previous_response_id\":7}"),
                     "previous_response_id");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"conversation\":{\"id\":\"c\"}}"),
                     "conversation");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}"), "tools");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"tool_choice\":\"required\"}"), "tool_choice");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"text\":{\"format\":{\"type\":"
                             "\"json_schema\"}}}"),
                     "text");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"reasoning\":{\"effort\":\"low\"}}"),
                     "reasoning");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"max_output_tokens\":0}"), "max_output_tokens");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"metadata\":{\"a\":1}}"), "metadata");
    cr_assert_str_eq(refused("{\"input\":\"x\",\"instructions\":[]}"), "instructions");
    /* neutral values pass */
    char *s = translate("{\"input\":\"x\",\"reasoning\":{\"effort\":null},\"include\":[],"
                        "\"truncation\":\"disabled\",\"background\":false,\"top_logprobs\":0,"
                        "\"text\":{\"format\":{\"type\":\"text\"},\"verbosity\":\"medium\"}}",
                        NULL, NULL, NULL);
    free(s);
}

Test(responses, objects_repeat_the_request_and_say_how_it_ended)
{
    json_t *echo;
    char *s = translate("{\"input\":\"x\",\"max_output_tokens\":5,\"store\":false,"
                        "\"metadata\":{\"k\":\"v\"}}",
                        NULL, &echo, NULL);
    free(s);
    struct gw_response r = {"resp_1", "msg_1", "m", echo, 100, 0};
    struct gw_response_usage u = {7, 5, 2};
    json_t *o = gw_response_object(
        &r, "incomplete", json_pack("[o]", gw_response_message(&r, "incomplete", "Hello", 5)),
        &u, NULL);
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    cr_assert_str_eq(
        s, "{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":100,\"status\":"
           "\"incomplete\",\"background\":false,\"error\":null,\"incomplete_details\":{"
           "\"reason\":\"max_output_tokens\"},\"instructions\":null,\"max_output_tokens\":5,"
           "\"model\":\"m\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":"
           "\"incomplete\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
           "\"annotations\":[],\"logprobs\":[],\"text\":\"Hello\"}]}],\"parallel_tool_calls\":"
           "true,\"previous_response_id\":null,\"reasoning\":{\"effort\":null,\"summary\":null},"
           "\"store\":false,\"temperature\":1.0,\"text\":{\"format\":{\"type\":\"text\"}},"
           "\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":1.0,\"truncation\":\"disabled\","
           "\"usage\":{\"input_tokens\":7,\"input_tokens_details\":{\"cached_tokens\":2},"
           "\"output_tokens\":5,\"output_tokens_details\":{\"reasoning_tokens\":0},"
           "\"total_tokens\":12},\"user\":null,\"metadata\":{\"k\":\"v\"}}");
    free(s);
    json_decref(o);
    /* a failure carries its error and no output; events number themselves */
    o = gw_response_object(&r, "failed", NULL, NULL, "boom");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "error"), "message")),
                     "boom");
    cr_assert_eq(json_array_size(json_object_get(o, "output")), 0);
    json_decref(o);
    json_t *e1 = gw_response_event(&r, "response.created", json_object());
    json_t *e2 = gw_response_event(&r, "response.in_progress", json_object());
    cr_assert_eq(json_integer_value(json_object_get(e1, "sequence_number")), 0);
    cr_assert_eq(json_integer_value(json_object_get(e2, "sequence_number")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(e2, "type")), "response.in_progress");
    json_decref(e1);
    json_decref(e2);
    json_decref(echo);
}

Test(responses, a_json_format_is_chats_response_format_and_is_repeated)
{
    json_t *echo;
    char *s = translate("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\","
                        "\"name\":\"P\",\"strict\":true,\"schema\":{\"type\":\"object\"}}}}",
                        NULL, &echo, NULL);
    cr_assert_str_eq(s, "{\"messages\":[{\"content\":\"x\",\"role\":\"user\"}],"
                        "\"response_format\":{\"json_schema\":{\"name\":\"P\",\"schema\":{"
                        "\"type\":\"object\"},\"strict\":true},\"type\":\"json_schema\"}}");
    free(s);
    struct gw_response r = {"resp_1", "msg_1", "m", echo, 100, 0};
    json_t *o = gw_response_object(&r, "completed", NULL, NULL, NULL);
    s = json_dumps(json_object_get(o, "text"), JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_str_eq(s, "{\"format\":{\"name\":\"P\",\"schema\":{\"type\":\"object\"},"
                        "\"strict\":true,\"type\":\"json_schema\"}}");
    free(s);
    json_decref(o);
    json_decref(echo);
    s = translate("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}", NULL,
                  NULL, NULL);
    cr_assert_str_eq(s, "{\"messages\":[{\"content\":\"x\",\"role\":\"user\"}],"
                        "\"response_format\":{\"type\":\"json_object\"}}");
    free(s);
}

/* Function tools in the Responses form are chat's; function_call items are an assistant's
 * calls (a turn's in one message), function_call_output items tool messages; an answer
 * that is a call is a function_call output item. */
Test(responses, function_tools_calls_and_outputs_are_chats)
{
    json_t *echo;
    char *s = translate("{\"input\":[{\"role\":\"user\",\"content\":\"w?\"},"
                        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\","
                        "\"arguments\":\"{}\"},{\"type\":\"function_call\",\"call_id\":\"c2\","
                        "\"name\":\"g\",\"arguments\":\"{\\\"a\\\":1}\"},"
                        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"4\"}],"
                        "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{}}],"
                        "\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"}}",
                        NULL, &echo, NULL);
    cr_assert_str_eq(
        s, "{\"messages\":[{\"content\":\"w?\",\"role\":\"user\"},{\"content\":null,\"role\":"
           "\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\",\"name\":\"f\"},"
           "\"id\":\"c1\",\"type\":\"function\"},{\"function\":{\"arguments\":\"{\\\"a\\\":1}\","
           "\"name\":\"g\"},\"id\":\"c2\",\"type\":\"function\"}]},{\"content\":\"4\",\"role\":"
           "\"tool\",\"tool_call_id\":\"c1\"}],\"tool_choice\":{\"function\":{\"name\":\"f\"},"
           "\"type\":\"function\"},\"tools\":[{\"function\":{\"name\":\"f\",\"parameters\":{}},"
           "\"type\":\"function\"}]}");
    free(s);
    json_t *o = gw_response_call("fc_1", "call_1", "f", "completed", "{\"x\":2}", 7);
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_str_eq(s, "{\"arguments\":\"{\\\"x\\\":2}\",\"call_id\":\"call_1\",\"id\":\"fc_1\","
                        "\"name\":\"f\",\"status\":\"completed\",\"type\":\"function_call\"}");
    free(s);
    json_decref(o);
    json_decref(echo);
    /* parallel_tool_calls goes with the tools to chat, which makes one call when false */
    s = translate("{\"input\":\"w?\",\"parallel_tool_calls\":false,\"tools\":[{\"type\":"
                  "\"function\",\"name\":\"f\",\"parameters\":{}}]}",
                  NULL, NULL, NULL);
    cr_assert(strstr(s, "\"parallel_tool_calls\":false"), "%s", s);
    free(s);
}
