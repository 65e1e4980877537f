#include "responses.h"

#include "oai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static json_t *refuse(json_t *out, const char **param, char *msg, size_t len, const char *key,
                      const char *why)
{
    json_decref(out);
    *param = key;
    snprintf(msg, len, "%s", why);
    return NULL;
}

static int absent(json_t *v)
{
    return !v || json_is_null(v);
}

/* An object all of whose members are null (as {} is): it asks for nothing. */
static int all_null(json_t *v)
{
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m)
    {
        if (!json_is_null(m))
            return 0;
    }
    return 1;
}

/* A function_call input item: a call of the assistant's, in chat's form; the calls of one
 * turn (items in a row) one assistant message. */
static int call_item(json_t *item, size_t i, json_t *msgs, char *msg, size_t len)
{
    json_t *id = json_object_get(item, "call_id"), *name = json_object_get(item, "name");
    json_t *args = json_object_get(item, "arguments");
    if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args)) {
        snprintf(msg, len, "input[%zu]: a function_call needs call_id, name and arguments "
                 "(strings).", i);
        return -1;
    }
    json_t *call = json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", id, "type", "function",
                             "function", "name", name, "arguments", args);
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    json_t *calls = json_object_get(last, "tool_calls");
    if (json_is_array(calls) && json_array_size(msgs))
        return json_array_append_new(calls, call);
    json_array_append_new(msgs, json_pack("{s:s, s:n, s:[o]}", "role", "assistant", "content",
                                          "tool_calls", call));
    return 0;
}

/* Input item i as a chat message, appended to msgs; -1 with msg when it is not one. */
static int input_item(json_t *item, size_t i, json_t *msgs, char *msg, size_t len)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    if (!json_is_object(item) || (json_object_get(item, "type") && !type)) {
        snprintf(msg, len, "input[%zu] must be a message object ({\"role\", \"content\"}).", i);
        return -1;
    }
    if (type && !strcmp(type, "function_call"))
        return call_item(item, i, msgs, msg, len);
    if (type && !strcmp(type, "function_call_output")) {
        json_t *id = json_object_get(item, "call_id"), *out = json_object_get(item, "output");
        if (!json_is_string(id) || !json_is_string(out)) {
            snprintf(msg, len, "input[%zu]: a function_call_output needs call_id and output "
                     "(strings).", i);
            return -1;
        }
        json_array_append_new(msgs, json_pack("{s:s, s:O, s:O}", "role", "tool", "tool_call_id",
                                              id, "content", out));
        return 0;
    }
    if (type && strcmp(type, "message")) {
        snprintf(msg, len, "input[%zu]: items of type \"%.40s\" are not supported; only "
                 "messages, function calls and their outputs are (this server keeps no "
                 "reasoning).", i, type);
        return -1;
    }
    const char *role = json_string_value(json_object_get(item, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                  strcmp(role, "developer"))) {
        snprintf(msg, len, "input[%zu].role must be user, assistant, system or developer.", i);
        return -1;
    }
    json_t *content = json_object_get(item, "content");
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string(role));
    if (json_is_string(content)) {
        json_object_set(m, "content", content);
        json_array_append_new(msgs, m);
        return 0;
    }
    if (!json_is_array(content)) {
        json_decref(m);
        snprintf(msg, len, "input[%zu].content must be a string or an array of text parts.", i);
        return -1;
    }
    /* parts as chat's text parts, which are joined the same way and key the caches alike */
    json_t *parts = json_array();
    size_t j;
    json_t *part;
    json_array_foreach(content, j, part)
    {
        const char *pt = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!pt || (strcmp(pt, "input_text") && strcmp(pt, "output_text")) ||
            !json_is_string(text)) {
            json_decref(parts);
            json_decref(m);
            snprintf(msg, len, "input[%zu].content[%zu] must be a text part ({\"type\": "
                     "\"input_text\" or \"output_text\", \"text\": a string}); images, audio "
                     "and files are not supported.", i, j);
            return -1;
        }
        json_t *p = json_object();
        json_object_set_new(p, "type", json_string("text"));
        json_object_set(p, "text", text);
        json_array_append_new(parts, p);
    }
    json_object_set_new(m, "content", parts);
    json_array_append_new(msgs, m);
    return 0;
}

/* The parameters a response repeats, with OpenAI's values for those not given. */
static json_t *echo_of(json_t *b)
{
    json_t *e = json_object();
    static const char *const keys[] = {"instructions",    "max_output_tokens", "metadata",
                                       "parallel_tool_calls", "previous_response_id",
                                       "store",           "temperature",       "text",
                                       "tool_choice",     "tools",             "top_p",
                                       "user"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(b, keys[i]);
        if (absent(v)) {
            if (!strcmp(keys[i], "metadata"))
                v = json_object();
            else if (!strcmp(keys[i], "parallel_tool_calls") || !strcmp(keys[i], "store"))
                v = json_true(); /* OpenAI stores a response unless asked not to */
            else if (!strcmp(keys[i], "temperature") || !strcmp(keys[i], "top_p"))
                v = json_real(1.0);
            else if (!strcmp(keys[i], "tool_choice"))
                v = json_string("auto");
            else if (!strcmp(keys[i], "tools"))
                v = json_array();
            else
                v = json_null();
            json_object_set_new(e, keys[i], v);
        } else {
            json_object_set(e, keys[i], v);
        }
    }
    return e;
}

json_t *gw_responses_request(json_t *b, json_t *history, json_t **echo, json_t **convo,
                             const char **param, char *msg, size_t len)
{
    *echo = *convo = NULL;
    *param = NULL;
    json_t *out = json_object();
    /* what needs state or features this server does not keep */
    json_t *v = json_object_get(b, "previous_response_id");
    if (!absent(v) && !json_is_string(v))
        return refuse(out, param, msg, len, "previous_response_id",
                      "previous_response_id must be a string.");
    if (!absent(json_object_get(b, "conversation")))
        return refuse(out, param, msg, len, "conversation",
                      "conversation objects are not supported; continue a response with "
                      "previous_response_id, or send the whole conversation in input.");
    if (!absent(json_object_get(b, "prompt")))
        return refuse(out, param, msg, len, "prompt",
                      "prompt (a stored prompt template) is not supported; send input.");
    v = json_object_get(b, "background");
    if (!absent(v) && !json_is_false(v))
        return refuse(out, param, msg, len, "background", "background is not supported.");
    v = json_object_get(b, "reasoning");
    if (!absent(v) && !(json_is_object(v) && all_null(v)))
        return refuse(out, param, msg, len, "reasoning",
                      "reasoning is not supported: this model does not reason.");
    v = json_object_get(b, "truncation");
    if (!absent(v) && !(json_is_string(v) && !strcmp(json_string_value(v), "disabled")))
        return refuse(out, param, msg, len, "truncation",
                      "Only truncation \"disabled\" is supported: a conversation longer than "
                      "the model's context is refused, not cut.");
    v = json_object_get(b, "include");
    if (!absent(v) && !(json_is_array(v) && !json_array_size(v)))
        return refuse(out, param, msg, len, "include", "include is not supported.");
    v = json_object_get(b, "top_logprobs");
    if (!absent(v) && !(json_is_integer(v) && !json_integer_value(v)))
        return refuse(out, param, msg, len, "top_logprobs", "top_logprobs is not supported.");
    v = json_object_get(b, "text");
    if (!absent(v)) {
        json_t *f = json_object_get(v, "format"), *verb = json_object_get(v, "verbosity");
        const char *ft = json_string_value(json_object_get(f, "type"));
        const char *vs = json_string_value(verb);
        if (!json_is_object(v) ||
            !(absent(f) || (ft && (!strcmp(ft, "text") || !strcmp(ft, "json_object") ||
                                   !strcmp(ft, "json_schema")))) ||
            !(absent(verb) || (vs && !strcmp(vs, "medium"))))
            return refuse(out, param, msg, len, "text",
                          "text: the format's type must be text, json_object or json_schema "
                          "(and verbosity \"medium\").");
        if (ft && !strcmp(ft, "json_schema") && !json_is_object(json_object_get(f, "schema")))
            return refuse(out, param, msg, len, "text",
                          "text.format: a json_schema format needs its schema (an object).");
    }
    const char *choice = json_string_value(json_object_get(b, "tool_choice"));
    v = json_object_get(b, "tool_choice");
    json_t *named = json_object_get(v, "name");
    const char *ct = json_string_value(json_object_get(v, "type"));
    if (!absent(v) && !(choice && (!strcmp(choice, "auto") || !strcmp(choice, "none") ||
                                   !strcmp(choice, "required"))) &&
        !(json_is_object(v) && json_is_string(named) && ct && !strcmp(ct, "function")))
        return refuse(out, param, msg, len, "tool_choice",
                      "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": "
                      "\"function\", \"name\": a function's name}.");
    v = json_object_get(b, "tools");
    if (!absent(v) && !json_is_array(v))
        return refuse(out, param, msg, len, "tools", "tools must be an array.");
    if (((choice && !strcmp(choice, "required")) || named) && !json_array_size(v))
        return refuse(out, param, msg, len, "tool_choice",
                      "tool_choice asks for a call, and tools lists no function.");
    size_t ti;
    json_t *tool;
    json_array_foreach(v, ti, tool)
    {
        const char *tt = json_string_value(json_object_get(tool, "type"));
        if (!tt || strcmp(tt, "function"))
            return refuse(out, param, msg, len, "tools",
                          "tools: only function tools are supported ({\"type\": \"function\", "
                          "\"name\", \"parameters\"}); built-in tools are not.");
    }
    if (!oai_metadata_ok(json_object_get(b, "metadata")))
        return refuse(out, param, msg, len, "metadata",
                      "metadata must be an object of at most 16 string values of at most 512 "
                      "characters, their keys of at most 64.");
    v = json_object_get(b, "max_tool_calls");
    if (!absent(v))
        return refuse(out, param, msg, len, "max_tool_calls", "max_tool_calls is not supported.");
    static const struct {
        const char *key;
        int boolean; /* else a string */
    } typed[] = {{"instructions", 0},     {"user", 0},         {"safety_identifier", 0},
                 {"prompt_cache_key", 0}, {"service_tier", 0}, {"parallel_tool_calls", 1},
                 {"store", 1}};
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++) {
        v = json_object_get(b, typed[i].key);
        if (!absent(v) && !(typed[i].boolean ? json_is_boolean(v) : json_is_string(v))) {
            char why[64];
            snprintf(why, sizeof why, "%s must be a %s.", typed[i].key,
                     typed[i].boolean ? "boolean" : "string");
            return refuse(out, param, msg, len, typed[i].key, why);
        }
    }
    v = json_object_get(b, "max_output_tokens");
    if (!absent(v) && (!json_is_integer(v) || json_integer_value(v) < 1 ||
                       json_integer_value(v) > 1 << 20))
        return refuse(out, param, msg, len, "max_output_tokens",
                      "max_output_tokens must be an integer from 1 to 1048576.");
    v = json_object_get(b, "stream_options");
    if (!absent(v) && !json_is_object(v))
        return refuse(out, param, msg, len, "stream_options",
                      "stream_options must be an object.");
    /* the conversation: what it continues and its input (to be stored), after the
     * instructions */
    json_t *msgs = json_array();
    json_object_set_new(out, "messages", msgs);
    json_t *conv = json_array();
    json_array_extend(conv, history);
    json_t *input = json_object_get(b, "input");
    if (json_is_string(input) && json_string_length(input)) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("user"));
        json_object_set(m, "content", input);
        json_array_append_new(conv, m);
    } else if (json_is_array(input) && json_array_size(input)) {
        size_t i;
        json_t *item;
        json_array_foreach(input, i, item)
        {
            if (input_item(item, i, conv, msg, len)) {
                json_decref(conv);
                json_decref(out);
                *param = "input";
                return NULL;
            }
        }
    } else {
        json_decref(conv);
        return refuse(out, param, msg, len, "input",
                      "input must be a non-empty string or a non-empty array of messages.");
    }
    const char *instr = json_string_value(json_object_get(b, "instructions"));
    if (instr && *instr) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("system"));
        json_object_set(m, "content", json_object_get(b, "instructions"));
        json_array_append_new(msgs, m);
    }
    json_array_extend(msgs, conv);
    *convo = conv;
    /* the parameters chat completions has under the same names (checked there) */
    static const char *const same[] = {"model",    "temperature",      "top_p",
                                       "top_k",    "min_p",            "seed",
                                       "stop",     "presence_penalty", "frequency_penalty",
                                       "logit_bias", "user",           "stream"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if ((v = json_object_get(b, same[i])))
            json_object_set(out, same[i], v);
    if (!absent(v = json_object_get(b, "max_output_tokens")))
        json_object_set(out, "max_tokens", v);
    /* text.format as chat's response_format: {"type": "json_schema", "name", "schema",
     * "strict"} is {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} */
    json_t *f = json_object_get(json_object_get(b, "text"), "format");
    const char *ft = json_string_value(json_object_get(f, "type"));
    if (ft && !strcmp(ft, "json_object")) {
        json_object_set(out, "response_format", f);
    } else if (ft && !strcmp(ft, "json_schema")) {
        json_t *rf = json_object(), *js = json_object();
        const char *keys[] = {"name", "schema", "strict", "description"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
            if ((v = json_object_get(f, keys[i])))
                json_object_set(js, keys[i], v);
        json_object_set_new(rf, "type", json_string("json_schema"));
        json_object_set_new(rf, "json_schema", js);
        json_object_set_new(out, "response_format", rf);
    }
    if (choice && !strcmp(choice, "none")) { /* keys the caches as chat's tools would */
        json_object_set(out, "tool_choice", json_object_get(b, "tool_choice"));
    } else if (json_array_size(json_object_get(b, "tools"))) {
        /* chat's form: the function's members under "function", a named choice too (chat
         * checks them) */
        json_t *tools = json_array();
        json_array_foreach(json_object_get(b, "tools"), ti, tool)
        {
            json_t *f = json_deep_copy(tool);
            json_object_del(f, "type");
            json_array_append_new(tools, json_pack("{s:s, s:o}", "type", "function",
                                                   "function", f));
        }
        json_object_set_new(out, "tools", tools);
        if ((v = json_object_get(b, "parallel_tool_calls")))
            json_object_set(out, "parallel_tool_calls", v);
        if (named)
            json_object_set_new(out, "tool_choice",
                                json_pack("{s:s, s:{s:O}}", "type", "function", "function",
                                          "name", named));
        else if (choice)
            json_object_set(out, "tool_choice", json_object_get(b, "tool_choice"));
    }
    *echo = echo_of(b);
    return out;
}

/* ------------------------------------------------------------------ objects */

json_t *gw_response_string(const char *s, size_t n)
{
    json_t *t = s ? json_stringn(s, n) : NULL;
    return t ? t : json_string(""); /* text that is not UTF-8 (never the engine's) */
}

json_t *gw_response_text_part(const char *text, size_t len)
{
    json_t *p = json_object();
    json_object_set_new(p, "type", json_string("output_text"));
    json_object_set_new(p, "annotations", json_array());
    json_object_set_new(p, "logprobs", json_array());
    json_object_set_new(p, "text", gw_response_string(text, len));
    return p;
}

/* The id of the k-th input item of response id: its kind's prefix and 48 bits of a hash of
 * both, the same at every listing. */
static void input_item_id(char *out, size_t len, const char *prefix, const char *id, size_t k)
{
    char key[256];
    int n = snprintf(key, sizeof key, "%s#%zu", id, k);
    unsigned long long h = XXH3_64bits(key, n > 0 && (size_t)n < sizeof key ? (size_t)n : 0);
    snprintf(out, len, "%s_%012llx%020zu", prefix, h & 0xffffffffffffULL, k);
}

static json_t *or_null(json_t *v)
{
    return v ? v : json_null();
}

/* The input items a stored chat message stands for, appended to items (k: the next item's
 * place). */
static void message_items(const char *id, json_t *m, json_t *items, size_t *k)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    json_t *content = json_object_get(m, "content"), *calls = json_object_get(m, "tool_calls");
    char iid[64];
    if (role && !strcmp(role, "tool")) {
        input_item_id(iid, sizeof iid, "fco", id, (*k)++);
        json_array_append_new(items, json_pack("{s:s, s:s, s:O, s:O, s:s}", "id", iid, "type",
                                               "function_call_output", "call_id",
                                               or_null(json_object_get(m, "tool_call_id")),
                                               "output", or_null(content), "status",
                                               "completed"));
        return;
    }
    if (json_is_string(content) || !json_array_size(calls)) {
        int out = role && !strcmp(role, "assistant");
        const char *text = json_is_string(content) ? json_string_value(content) : "";
        json_t *part = out ? gw_response_text_part(text, strlen(text))
                           : json_pack("{s:s, s:s}", "type", "input_text", "text", text);
        input_item_id(iid, sizeof iid, "msg", id, (*k)++);
        json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:s, s:[o]}", "id", iid, "type",
                                               "message", "status", "completed", "role",
                                               role ? role : "user", "content", part));
    }
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call)
    {
        json_t *f = json_object_get(call, "function");
        input_item_id(iid, sizeof iid, "fc", id, (*k)++);
        json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:O, s:O, s:O}", "id", iid,
                                               "type", "function_call", "status", "completed",
                                               "call_id", or_null(json_object_get(call, "id")),
                                               "name", or_null(json_object_get(f, "name")),
                                               "arguments",
                                               or_null(json_object_get(f, "arguments"))));
    }
}

json_t *gw_response_input_items(const char *id, json_t *convo, const char *order,
                                const char *limit, const char *after, const char **param,
                                char *msg, size_t len)
{
    int desc = 1;
    long lim = 20;
    char *end;
    if (order && strcmp(order, "asc") && strcmp(order, "desc")) {
        *param = "order";
        snprintf(msg, len, "order must be asc or desc.");
        return NULL;
    }
    if (order)
        desc = !strcmp(order, "desc");
    if (limit && ((lim = strtol(limit, &end, 10)) < 1 || lim > 100 || *end || end == limit)) {
        *param = "limit";
        snprintf(msg, len, "limit must be a whole number from 1 to 100.");
        return NULL;
    }
    json_t *items = json_array(), *m;
    size_t i, k = 0, n = json_array_size(convo);
    json_array_foreach(convo, i, m)
    {
        if (i + 1 < n) /* (the last is its answer) */
            message_items(id, m, items, &k);
    }
    size_t total = json_array_size(items), from = 0;
    if (after) {
        for (from = 0; from < total; from++) {
            size_t at = desc ? total - 1 - from : from;
            const char *iid = json_string_value(json_object_get(json_array_get(items, at), "id"));
            if (iid && !strcmp(iid, after))
                break;
        }
        if (from == total) {
            json_decref(items);
            *param = "after";
            snprintf(msg, len, "after names no input item of this response.");
            return NULL;
        }
        from++;
    }
    json_t *data = json_array();
    for (size_t j = from; j < total && json_array_size(data) < (size_t)lim; j++)
        json_array_append(data, json_array_get(items, desc ? total - 1 - j : j));
    size_t got = json_array_size(data);
    json_t *o = json_pack("{s:s, s:o, s:b}", "object", "list", "data", data, "has_more",
                          from + got < total);
    json_object_set(o, "first_id", got ? json_object_get(json_array_get(data, 0), "id")
                                       : json_null());
    json_object_set(o, "last_id", got ? json_object_get(json_array_get(data, got - 1), "id")
                                      : json_null());
    json_decref(items);
    return o;
}

/* An output item's id, type and status. */
static json_t *item_head(const char *id, const char *type, const char *status)
{
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(id));
    json_object_set_new(m, "type", json_string(type));
    json_object_set_new(m, "status", json_string(status));
    return m;
}

json_t *gw_response_call(const char *id, const char *call_id, const char *name,
                         const char *status, const char *args, size_t len)
{
    json_t *m = item_head(id, "function_call", status);
    json_object_set_new(m, "arguments", gw_response_string(args, len));
    json_object_set_new(m, "call_id", json_string(call_id));
    json_object_set_new(m, "name", json_string(name));
    return m;
}

json_t *gw_response_message(const struct gw_response *r, const char *status, const char *text,
                            size_t len)
{
    json_t *m = item_head(r->msg_id, "message", status);
    json_object_set_new(m, "role", json_string("assistant"));
    json_t *content = json_array();
    if (strcmp(status, "in_progress"))
        json_array_append_new(content, gw_response_text_part(text, len));
    json_object_set_new(m, "content", content);
    return m;
}

json_t *gw_response_object(const struct gw_response *r, const char *status, json_t *output,
                           const struct gw_response_usage *u, const char *error)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(r->id));
    json_object_set_new(o, "object", json_string("response"));
    json_object_set_new(o, "created_at", json_integer(r->created_at));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "background", json_false());
    json_t *err = json_null();
    if (error) {
        err = json_object();
        json_object_set_new(err, "code", json_string("server_error"));
        json_object_set_new(err, "message", json_string(error));
    }
    json_object_set_new(o, "error", err);
    json_t *inc = json_null();
    if (!strcmp(status, "incomplete")) {
        inc = json_object();
        json_object_set_new(inc, "reason", json_string("max_output_tokens"));
    }
    json_object_set_new(o, "incomplete_details", inc);
    json_object_set(o, "instructions", json_object_get(r->echo, "instructions"));
    json_object_set(o, "max_output_tokens", json_object_get(r->echo, "max_output_tokens"));
    json_object_set_new(o, "model", json_string(r->model));
    json_object_set_new(o, "output", output ? output : json_array());
    json_object_set(o, "parallel_tool_calls", json_object_get(r->echo, "parallel_tool_calls"));
    json_object_set(o, "previous_response_id", json_object_get(r->echo, "previous_response_id"));
    json_t *reasoning = json_object();
    json_object_set_new(reasoning, "effort", json_null());
    json_object_set_new(reasoning, "summary", json_null());
    json_object_set_new(o, "reasoning", reasoning);
    json_object_set(o, "store", json_object_get(r->echo, "store"));
    json_object_set(o, "temperature", json_object_get(r->echo, "temperature"));
    json_t *textcfg = json_object(), *asked = json_object_get(r->echo, "text");
    json_t *fmt = json_object_get(asked, "format");
    if (json_is_object(fmt) && json_string_value(json_object_get(fmt, "type"))) {
        json_object_set(textcfg, "format", fmt);
    } else {
        fmt = json_object();
        json_object_set_new(fmt, "type", json_string("text"));
        json_object_set_new(textcfg, "format", fmt);
    }
    json_object_set_new(o, "text", textcfg);
    json_object_set(o, "tool_choice", json_object_get(r->echo, "tool_choice"));
    json_object_set(o, "tools", json_object_get(r->echo, "tools"));
    json_object_set(o, "top_p", json_object_get(r->echo, "top_p"));
    json_object_set_new(o, "truncation", json_string("disabled"));
    json_t *usage = json_null();
    if (u) {
        usage = json_object();
        json_object_set_new(usage, "input_tokens", json_integer(u->input));
        json_t *d = json_object();
        json_object_set_new(d, "cached_tokens", json_integer(u->cached));
        json_object_set_new(usage, "input_tokens_details", d);
        json_object_set_new(usage, "output_tokens", json_integer(u->output));
        d = json_object();
        json_object_set_new(d, "reasoning_tokens", json_integer(0));
        json_object_set_new(usage, "output_tokens_details", d);
        json_object_set_new(usage, "total_tokens", json_integer((json_int_t)u->input + u->output));
    }
    json_object_set_new(o, "usage", usage);
    json_object_set(o, "user", json_object_get(r->echo, "user"));
    json_object_set(o, "metadata", json_object_get(r->echo, "metadata"));
    return o;
}

json_t *gw_response_event(struct gw_response *r, const char *type, json_t *fields)
{
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "sequence_number", json_integer(r->seq++));
    json_object_update(e, fields);
    json_decref(fields);
    return e;
}
