/* tests gateway/tools.c: the schema a call is held to (references of a function's
 * parameters moved into a union still resolve), the model's text of earlier calls and
 * results, and the call read out of a growing answer, byte by byte, whatever its white
 * space: the arguments handed out add up to the document's, without the wrapping brace. */
#include "grammar.h"
#include "tools.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert_not_null(j, "%s: %s", text, e.text);
    return j;
}

/* Whether the grammar of the request's call takes doc whole. */
static int call_accepts(json_t *b, const char *doc)
{
    struct gw_tools t;
    cr_assert_eq(gw_tools_parse(b, &t), 0);
    cr_assert_neq(t.mode, GW_TOOLS_OFF);
    eng_grammar *g = NULL;
    char err[256];
    cr_assert_eq(eng_grammar_create(t.schema, strlen(t.schema), &g, err, sizeof err), 0, "%s: %s",
                 t.schema, err);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    int ok = eng_gm_feed(m, doc, strlen(doc)) && eng_gm_accepting(m);
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
    gw_tools_deinit(&t);
    return ok;
}

#define ORDER                                                                                  \
    "{\"type\": \"function\", \"function\": {\"name\": \"order\", \"parameters\": {"          \
    "\"$defs\": {\"Item\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": "        \
    "\"integer\", \"minimum\": 1}}, \"required\": [\"n\"]}}, \"type\": \"object\", "          \
    "\"properties\": {\"item\": {\"$ref\": \"#/$defs/Item\"}, \"enum\": {\"$ref\": "          \
    "\"#/$defs/Item\"}}, \"required\": [\"item\"]}}}"
#define PING "{\"type\": \"function\", \"function\": {\"name\": \"ping\"}}"

Test(tools, schemas_of_calls)
{
    const char *req = "{\"tools\": [" PING ", " ORDER "], \"tool_choice\": \"required\"}";
    json_t *b = load(req);
    /* the second function's references point into its own place in the union */
    cr_expect(call_accepts(b, "{\"name\": \"order\", \"arguments\": {\"item\": {\"n\": 2}, "
                              "\"enum\": {\"n\": 3}}}"));
    cr_expect_not(call_accepts(b, "{\"name\": \"order\", \"arguments\": {\"item\": {\"n\": 0}}}"));
    /* a function without parameters takes {} alone */
    cr_expect(call_accepts(b, "{\"name\": \"ping\", \"arguments\": {}}"));
    cr_expect_not(call_accepts(b, "{\"name\": \"ping\", \"arguments\": {\"a\": 1}}"));
    cr_expect_not(call_accepts(b, "{\"name\": \"pong\", \"arguments\": {}}"));
    json_decref(b);
    /* a named function: its arguments alone */
    b = load("{\"tools\": [" PING ", " ORDER "], \"tool_choice\": {\"type\": \"function\", "
             "\"function\": {\"name\": \"order\"}}}");
    cr_expect(call_accepts(b, "{\"item\": {\"n\": 7}}"));
    struct gw_tools t;
    cr_assert_eq(gw_tools_parse(b, &t), 0);
    cr_expect_str_eq(t.name, "order");
    cr_expect(strstr(t.prompt, "calling the function order") != NULL, "%s", t.prompt);
    gw_tools_deinit(&t);
    json_decref(b);
    /* auto, said or the default with tools: the union of required, and the model told that
     * it may answer in words */
    const char *autos[] = {"{\"tools\": [" PING ", " ORDER "]}",
                           "{\"tools\": [" PING ", " ORDER "], \"tool_choice\": \"auto\"}"};
    for (int i = 0; i < 2; i++) {
        b = load(autos[i]);
        cr_assert_eq(gw_tools_parse(b, &t), 0);
        cr_expect_eq(t.mode, GW_TOOLS_AUTO, "%s", autos[i]);
        cr_expect(strstr(t.prompt, "Otherwise answer in words") != NULL, "%s", t.prompt);
        cr_expect(call_accepts(b, "{\"name\": \"ping\", \"arguments\": {}}"));
        cr_expect_not(call_accepts(b, "{\"name\": \"pong\", \"arguments\": {}}"));
        cr_expect(gw_uses_tools(b), "never cached");
        gw_tools_deinit(&t);
        json_decref(b);
    }
    /* parallel calls: "required" and "auto" unless the request says false; a named
     * function makes one */
    static const struct {
        const char *req;
        int calls;
    } par[] = {
        {"{\"tools\": [" PING "]}", GW_TOOLS_MAX_CALLS},
        {"{\"tools\": [" PING "], \"tool_choice\": \"required\"}", GW_TOOLS_MAX_CALLS},
        {"{\"tools\": [" PING "], \"parallel_tool_calls\": true}", GW_TOOLS_MAX_CALLS},
        {"{\"tools\": [" PING "], \"parallel_tool_calls\": false}", 1},
        {"{\"tools\": [" PING "], \"tool_choice\": {\"type\": \"function\", \"function\": "
         "{\"name\": \"ping\"}}}",
         1},
    };
    for (size_t i = 0; i < sizeof par / sizeof *par; i++) {
        b = load(par[i].req);
        cr_assert_eq(gw_tools_parse(b, &t), 0);
        cr_expect_eq(t.max_calls, par[i].calls, "%s", par[i].req);
        cr_expect_eq(strstr(t.prompt, "on its own line") != NULL, par[i].calls > 1, "%s",
                     t.prompt);
        gw_tools_deinit(&t);
        json_decref(b);
    }
    /* what an auto answer has begun */
    size_t at;
    cr_expect_eq(gw_auto_begins(" \n\t", 3, &at), 0);
    cr_expect_eq(gw_auto_begins(NULL, 0, &at), 0);
    cr_expect(gw_auto_begins("\n {\"name\"", 9, &at) == 1 && at == 2);
    cr_expect(gw_auto_begins(" It is {", 8, &at) == -1 && at == 1);
    /* none asks for no call; neither does a choice without tools */
    b = load("{\"tools\": [" PING "], \"tool_choice\": \"none\"}");
    cr_assert_eq(gw_tools_parse(b, &t), 0);
    cr_expect_eq(t.mode, GW_TOOLS_OFF);
    cr_expect_not(gw_uses_tools(b));
    json_decref(b);
}

/* A request for a call to one of n functions f0, f1, ... without parameters. */
static json_t *many_tools(int n)
{
    json_t *tools = json_array();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        json_array_append_new(tools, json_pack("{s:s, s:{s:s}}", "type", "function", "function",
                                               "name", name));
    }
    return json_pack("{s:o, s:s}", "tools", tools, "tool_choice", "required");
}

Test(tools, checks_name_what_is_wrong)
{
    static const struct {
        const char *req, *param, *words;
    } bad[] = {
        {"{\"tools\": [" PING "], \"logprobs\": true}", "logprobs", "tool call"},
        {"{\"tools\": [" PING "], \"tool_choice\": \"required\", \"logprobs\": true}", "logprobs",
         "tool call"},
        {"{\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"ping\"}}}",
         "tool_choice", "no function"},
        {"{\"tools\": [" PING "], \"parallel_tool_calls\": 1}", "parallel_tool_calls",
         "boolean"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
         "[]}}], \"tool_choice\": \"required\"}",
         "tools", "tools[0].function"},
        {"{\"tools\": [" PING ", {\"type\": \"function\", \"function\": {\"name\": \"g\", "
         "\"parameters\": {\"type\": \"object\", \"properties\": {\"t\": {\"type\": \"array\", "
         "\"uniqueItems\": true}}}}}], \"tool_choice\": \"required\"}",
         "tools", "tools[1].function.parameters: properties.t: uniqueItems is not supported"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
         "{\"type\": \"string\"}}}], \"tool_choice\": \"required\"}",
         "tools", "tools[0].function.parameters must describe an object"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
         "{\"type\": [\"object\", \"null\"]}}}]}",
         "tools", "must describe an object"},
        /* neutral values ask for nothing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *b = load(bad[i].req);
        const char *param = NULL;
        char msg[400];
        cr_expect_eq(gw_tools_check(b, &param, msg, sizeof msg), -1, "%s", bad[i].req);
        cr_expect(param && !strcmp(param, bad[i].param), "%s: param %s", bad[i].req, param);
        cr_expect(strstr(msg, bad[i].words) != NULL, "%s: %s", bad[i].req, msg);
        json_decref(b);
    }
    static const char *const good[] = {
        "{\"tools\": [" PING ", " ORDER "], \"tool_choice\": \"required\"}",
        "{\"functions\": [], \"tools\": {}, \"tool_choice\": \"\"}",
        "{\"tools\": [], \"tool_choice\": \"auto\"}",
        "{\"tools\": [" PING "]}",
        "{\"tools\": [" PING "], \"tool_choice\": \"auto\"}",
        "{\"tools\": [" PING "], \"tool_choice\": \"none\"}",
        /* parameters without a type: their keywords describe an object */
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
        "{\"properties\": {\"a\": {\"type\": \"integer\"}}}}}]}",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        json_t *b = load(good[i]);
        const char *param = NULL;
        char msg[400];
        cr_expect_eq(gw_tools_check(b, &param, msg, sizeof msg), 0, "%s: %s", good[i], msg);
        json_decref(b);
    }
    /* required and auto: 64 functions at most */
    json_t *b = many_tools(65);
    const char *param = NULL;
    char msg[400];
    cr_expect_eq(gw_tools_check(b, &param, msg, sizeof msg), -1);
    cr_expect(strstr(msg, "more than 64 functions") != NULL, "%s", msg);
    json_object_del(b, "tool_choice"); /* auto too */
    cr_expect_eq(gw_tools_check(b, &param, msg, sizeof msg), -1);
    json_decref(b);
    /* 64: every one of them can be called (the union is read as one reading until the
     * name is written; a matcher follows at most 16) */
    b = many_tools(64);
    cr_expect_eq(gw_tools_check(b, &param, msg, sizeof msg), 0, "%s", msg);
    for (int i = 0; i < 64; i++) {
        char doc[64];
        snprintf(doc, sizeof doc, "{\"name\": \"f%d\", \"arguments\": {}}", i);
        cr_expect(call_accepts(b, doc), "%s", doc);
    }
    cr_expect_not(call_accepts(b, "{\"name\": \"f64\", \"arguments\": {}}"));
    json_decref(b);
}

Test(tools, earlier_calls_and_results_as_the_model_reads_them)
{
    json_t *msgs = load("[{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": "
                        "\"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", "
                        "\"type\": \"function\", \"function\": {\"name\": \"weather\", "
                        "\"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}}]}, {\"role\": "
                        "\"tool\", \"tool_call_id\": \"c1\", \"content\": [{\"type\": \"text\", "
                        "\"text\": \"rain\"}]}]");
    cr_expect_not(gw_tool_message(json_array_get(msgs, 0)));
    char *call = gw_tool_message_text(msgs, json_array_get(msgs, 1));
    cr_expect_str_eq(call, "I called weather({\"city\": \"Oslo\"}).");
    char *result = gw_tool_message_text(msgs, json_array_get(msgs, 2));
    cr_expect_str_eq(result, "Result of weather: rain");
    free(call);
    free(result);
    json_t *b = json_pack("{s:O}", "messages", msgs);
    cr_expect(gw_uses_tools(b));
    json_decref(b);
    json_decref(msgs);
}

/* Feeds doc to a reader byte by byte (final at the end): the arguments handed out. */
static char *read_out(enum gw_tool_mode mode, const char *doc, int final, char *name)
{
    struct gw_tools t = {.mode = mode};
    strcpy(t.name, "f");
    struct gw_call_reader r;
    gw_call_reader_init(&r, &t);
    size_t n = strlen(doc), got = 0;
    char *out = calloc(n + 1, 1);
    for (size_t len = 1; len <= n; len++) {
        size_t from, to;
        if (!gw_call_read(&r, doc, len, len == n ? final : 0, &from, &to))
            continue;
        cr_assert_eq(from, r.args_at + got, "handed out in order");
        memcpy(out + got, doc + from, to - from);
        got += to - from;
    }
    strcpy(name, r.head ? r.name : "");
    return out;
}

Test(tools, a_call_read_out_as_it_grows)
{
    char name[GW_TOOL_NAME_MAX + 1];
    static const char *const docs[] = {
        "{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\", \"o\": {\"a\": {}}}}",
        "{\n  \"name\": \"get_time\",\n  \"arguments\": {\"city\": \"Oslo\", \"o\": {\"a\": "
        "{}}}\n}",
        "{\"name\":\"get_time\",\"arguments\":{\"city\": \"Oslo\", \"o\": {\"a\": {}}} }",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        char *a = read_out(GW_TOOLS_REQUIRED, docs[i], 1, name);
        cr_expect_str_eq(name, "get_time");
        cr_expect_str_eq(a, "{\"city\": \"Oslo\", \"o\": {\"a\": {}}}", "%s", docs[i]);
        free(a);
    }
    /* cut short: everything after the head goes out */
    char *a = read_out(GW_TOOLS_REQUIRED, "{\"name\": \"g\", \"arguments\": {\"x\": {", 2, name);
    cr_expect_str_eq(a, "{\"x\": {");
    free(a);
    /* cut before the name closed: no call */
    a = read_out(GW_TOOLS_REQUIRED, "{\"name\": \"get_ti", 2, name);
    cr_expect_str_eq(a, "");
    cr_expect_str_eq(name, "");
    free(a);
    /* a named function's text is its arguments, from the first byte */
    a = read_out(GW_TOOLS_NAMED, "{\"a\": [1, {}]}", 1, name);
    cr_expect_str_eq(a, "{\"a\": [1, {}]}");
    cr_expect_str_eq(name, "f");
    free(a);
}

/* Feeds an answer of several calls to a reader byte by byte, moving on to each next call
 * as it begins: how many calls, their names and arguments (joined by '|'). */
static int read_calls(const char *doc, char *names, char *args)
{
    struct gw_tools t = {.mode = GW_TOOLS_REQUIRED};
    struct gw_call_reader r;
    gw_call_reader_init(&r, &t);
    size_t n = strlen(doc);
    int calls = 0;
    names[0] = args[0] = 0;
    for (size_t len = 1; len <= n; len++) {
        for (;;) {
            size_t from, to;
            if (!gw_call_read(&r, doc, len, len == n, &from, &to))
                break;
            if (r.index == calls) { /* a new call's head */
                if (calls++) {
                    strcat(names, "|");
                    strcat(args, "|");
                }
                strcat(names, r.name);
            }
            strncat(args, doc + from, to - from);
            if (!gw_call_next(&r, doc, len))
                break;
        }
    }
    return calls;
}

Test(tools, several_calls_read_out_as_they_grow)
{
    char names[256], args[512];
    const char *two = "{\"name\": \"a\", \"arguments\": {\"s\": \"}\\n{\\\"\", \"o\": {}}}\n"
                      "{\"name\": \"bb\", \"arguments\": {\"x\": [1, {\"y\": 2}]}\n}";
    cr_expect_eq(read_calls(two, names, args), 2);
    cr_expect_str_eq(names, "a|bb");
    cr_expect_str_eq(args, "{\"s\": \"}\\n{\\\"\", \"o\": {}}|{\"x\": [1, {\"y\": 2}]}", "%s", args);
    /* one call: as before */
    cr_expect_eq(read_calls("{\"name\": \"a\", \"arguments\": {}}", names, args), 1);
    cr_expect_str_eq(args, "{}");
    /* the next call cut before its name: the calls read whole */
    cr_expect_eq(read_calls("{\"name\": \"a\", \"arguments\": {}}\n{\"name\": \"b", names, args),
                 1);
    cr_expect_str_eq(names, "a");
    /* never more than GW_TOOLS_MAX_CALLS, whatever the text */
    char many[1024] = "";
    for (int i = 0; i < GW_TOOLS_MAX_CALLS + 2; i++)
        strcat(many, "{\"name\": \"f\", \"arguments\": {}}\n");
    cr_expect_eq(read_calls(many, names, args), GW_TOOLS_MAX_CALLS);
}
