/* tools — function calls held to their functions' schemas (see tools.h). */
#include "tools.h"

#include "cache.h"
#include "engine.h"
#include "grammar.h"
#include "oai.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refuse(const char **param, char *msg, size_t len, const char *key, const char *fmt,
                  const char *arg)
{
    *param = key;
    snprintf(msg, len, fmt, arg ? arg : "");
    return -1;
}

static int absent(json_t *v)
{
    return !v || json_is_null(v);
}

/* Asks for nothing: absent, null, false, 0, "", [] or {} (as oai_params_check reads it). */
static int empty(json_t *v)
{
    return absent(v) || json_is_false(v) || (json_is_integer(v) && !json_integer_value(v)) ||
           (json_is_string(v) && !json_string_length(v)) ||
           (json_is_array(v) && !json_array_size(v)) ||
           (json_is_object(v) && !json_object_size(v));
}

static int name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!n || n > GW_TOOL_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* The function of a checked tool entry. */
static json_t *function_of(json_t *tool)
{
    return json_object_get(tool, "function");
}

static const char *name_of(json_t *tool)
{
    return json_string_value(json_object_get(function_of(tool), "name"));
}

/* The named function tool_choice asks for, or NULL ("required", "none", "auto", absent). */
static const char *chosen(json_t *b)
{
    json_t *tc = json_object_get(b, "tool_choice");
    return json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
}

static enum gw_tool_mode mode_of(json_t *b)
{
    json_t *tc = json_object_get(b, "tool_choice");
    const char *s = json_string_value(tc);
    if (json_is_object(tc))
        return GW_TOOLS_NAMED;
    if (s && !strcmp(s, "required"))
        return GW_TOOLS_REQUIRED;
    if (s && !strcmp(s, "none"))
        return GW_TOOLS_OFF;
    /* "auto", the default with tools */
    return (empty(tc) || (s && !strcmp(s, "auto"))) && json_array_size(json_object_get(b, "tools"))
               ? GW_TOOLS_AUTO
               : GW_TOOLS_OFF;
}

/* ---- the grammar's schema and the model's instructions ---------------------------------- */

static int rewrite_refs(json_t *schema, const char *prefix);

/* Every "$ref" within a schema map (properties, $defs, ...) or list (anyOf, ...). */
static int rewrite_all(json_t *v, const char *prefix)
{
    const char *k;
    json_t *s;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, k, s)
            if (rewrite_refs(s, prefix))
                return -1;
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, s)
            if (rewrite_refs(s, prefix))
                return -1;
    }
    return 0;
}

/* A schema moved to prefix within a larger one: its references into itself ("#...") are
 * made to point where it now is. Values (enum, const, default, ...) are left as they are. */
static int rewrite_refs(json_t *schema, const char *prefix)
{
    static const char *const maps[] = {"properties", "$defs", "definitions",
                                       "patternProperties", "dependentSchemas"};
    static const char *const lists[] = {"anyOf", "oneOf", "allOf", "prefixItems"};
    static const char *const one[] = {"items", "additionalProperties", "not", "contains",
                                      "if", "then", "else", "propertyNames"};
    if (!json_is_object(schema))
        return 0;
    const char *k;
    json_t *v;
    json_object_foreach(schema, k, v)
    {
        int walk = 0;
        for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
            walk |= !strcmp(k, maps[i]) && json_is_object(v);
        for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
            walk |= !strcmp(k, lists[i]) && json_is_array(v);
        if (walk) {
            if (rewrite_all(v, prefix))
                return -1;
            continue;
        }
        for (size_t i = 0; i < sizeof one / sizeof *one; i++)
            if (!strcmp(k, one[i]) && rewrite_refs(v, prefix))
                return -1;
        const char *ref = json_string_value(v);
        if (!strcmp(k, "$ref") && ref && ref[0] == '#') {
            size_t n = strlen(prefix) + strlen(ref) + 1;
            char *to = malloc(n);
            if (!to)
                return -1;
            snprintf(to, n, "#%s%s", prefix, ref + 1);
            int rc = json_object_set_new(schema, "$ref", json_string(to));
            free(to);
            if (rc)
                return -1;
        }
    }
    return 0;
}

/* A function's parameters schema (none: no arguments, {}). New reference. */
static json_t *parameters(json_t *tool)
{
    json_t *p = json_object_get(function_of(tool), "parameters");
    if (!absent(p))
        return json_deep_copy(p);
    return json_pack("{s:s, s:{}, s:b}", "type", "object", "properties", "additionalProperties",
                     0);
}

/* The schema the answer is held to: the named function's parameters, or for "required" a
 * union of {"name": const, "arguments": parameters} objects, one a function. */
static char *call_schema(json_t *b)
{
    json_t *tools = json_object_get(b, "tools");
    const char *want = chosen(b);
    size_t i;
    json_t *tool;
    if (want) {
        json_array_foreach(tools, i, tool)
            if (!strcmp(name_of(tool), want)) {
                json_t *p = parameters(tool);
                char *s = p ? json_dumps(p, JSON_COMPACT) : NULL;
                json_decref(p);
                return s;
            }
        return NULL;
    }
    json_t *any = json_array();
    json_t *root = json_pack("{s:o}", "anyOf", any);
    if (!root)
        return NULL;
    json_array_foreach(tools, i, tool)
    {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "/anyOf/%zu/properties/arguments", i);
        json_t *p = parameters(tool);
        json_t *alt = p ? json_pack("{s:s, s:{s:{s:s}, s:O}, s:[s,s], s:b}", "type", "object",
                                    "properties", "name", "const", name_of(tool), "arguments", p,
                                    "required", "name", "arguments", "additionalProperties", 0)
                        : NULL;
        json_decref(p);
        /* (the copy in alt is the one rewritten) */
        if (!alt || rewrite_refs(json_object_get(json_object_get(alt, "properties"), "arguments"),
                                 prefix) ||
            json_array_append_new(any, alt)) {
            json_decref(root);
            return NULL;
        }
    }
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static void put_json(struct oai_buf *t, json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        t->oom = 1;
        return;
    }
    oai_buf_puts(t, s);
    free(s);
}

/* The text written, NUL-terminated and handed to the caller; NULL when out of memory. */
static char *text_of(struct oai_buf *t)
{
    oai_buf_put(t, "", 1);
    if (t->oom) {
        oai_buf_deinit(t);
        return NULL;
    }
    return t->p;
}

/* One function as the model reads it: name, description, parameters. */
static void describe(struct oai_buf *t, json_t *tool)
{
    json_t *f = function_of(tool), *p = parameters(tool);
    const char *d = json_string_value(json_object_get(f, "description"));
    oai_buf_puts(t, name_of(tool));
    if (d && *d) {
        oai_buf_puts(t, ": ");
        oai_buf_puts(t, d);
    }
    oai_buf_puts(t, "\nIts arguments are JSON of this schema: ");
    if (p)
        put_json(t, p);
    else
        t->oom = 1;
    json_decref(p);
}

static char *call_prompt(json_t *b, int max_calls)
{
    json_t *tools = json_object_get(b, "tools");
    const char *want = chosen(b);
    struct oai_buf t = {0};
    size_t i;
    json_t *tool;
    if (want) {
        oai_buf_puts(&t, "Answer by calling the function ");
        json_array_foreach(tools, i, tool)
            if (!strcmp(name_of(tool), want))
                describe(&t, tool);
        oai_buf_puts(&t, "\nWrite only the arguments.");
    } else {
        if (mode_of(b) == GW_TOOLS_AUTO)
            oai_buf_puts(&t, "You may call one of these functions when it helps to answer. To "
                             "call one, answer with only JSON: {\"name\": the function's name, "
                             "\"arguments\": its arguments}. Otherwise answer in words.");
        else
            oai_buf_puts(&t, "Answer by calling one of these functions, written as JSON: "
                             "{\"name\": the function's name, \"arguments\": its "
                             "arguments}.");
        if (max_calls > 1)
            oai_buf_puts(&t, " To make several calls, write each one's JSON on its own line.");
        json_array_foreach(tools, i, tool)
        {
            oai_buf_puts(&t, "\n\n");
            describe(&t, tool);
        }
    }
    return text_of(&t);
}

/* ---- checks ---------------------------------------------------------------------------- */

/* Compiles a schema text (taken; NULL: out of memory) and throws the grammar away: 0, or
 * the engine's status with err set. */
static int compiles(char *schema, char *err, size_t errlen)
{
    if (!schema) {
        snprintf(err, errlen, "out of memory");
        return ENG_ENOMEM;
    }
    eng_grammar *g = NULL;
    int rc = eng_grammar_create(schema, strlen(schema), &g, err, errlen);
    free(schema);
    eng_grammar_destroy(g);
    return rc;
}

/* Whether the grammar can hold a call's arguments to function i's parameters; -1 with the
 * reason, naming the function's place, when it cannot. */
static int held(json_t *tool, size_t i, const char **param, char *msg, size_t len)
{
    json_t *p = parameters(tool);
    char err[200];
    int rc = compiles(p ? json_dumps(p, JSON_COMPACT) : NULL, err, sizeof err);
    json_decref(p);
    if (!rc)
        return 0;
    *param = "tools";
    snprintf(msg, len, "tools[%zu].function.parameters: %s", i, err);
    return -1;
}

int gw_tools_check(json_t *b, const char **param, char *msg, size_t len)
{
    json_t *tools = json_object_get(b, "tools"), *tc = json_object_get(b, "tool_choice");
    const char *s = json_string_value(tc);
    if (!empty(json_object_get(b, "functions")))
        return refuse(param, msg, len, "functions",
                      "functions (the deprecated form of tools) is not supported; use tools.",
                      NULL);
    if (!empty(tc) && !(s && (!strcmp(s, "none") || !strcmp(s, "auto") ||
                               !strcmp(s, "required"))) &&
        !(json_is_object(tc) && json_is_string(json_object_get(tc, "type")) &&
          !strcmp(json_string_value(json_object_get(tc, "type")), "function") &&
          json_is_string(json_object_get(json_object_get(tc, "function"), "name"))))
        return refuse(param, msg, len, "tool_choice",
                      "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": "
                      "\"function\", \"function\": {\"name\": a function's name}}.",
                      NULL);
    if (!empty(tools) && !json_is_array(tools))
        return refuse(param, msg, len, "tools", "tools must be an array.", NULL);
    json_t *par = json_object_get(b, "parallel_tool_calls");
    if (!absent(par) && !json_is_boolean(par))
        return refuse(param, msg, len, "parallel_tool_calls",
                      "parallel_tool_calls must be a boolean.", NULL);
    size_t n = json_array_size(tools);
    enum gw_tool_mode mode = mode_of(b);
    if (s && !strcmp(s, "none"))
        return 0; /* none is called: the answer is text, whatever the tools say */
    if (mode == GW_TOOLS_OFF)
        return 0;
    if (!n)
        return refuse(param, msg, len, "tool_choice", "tool_choice asks for a call, and tools "
                                                      "lists no function.",
                      NULL);
    if (n > GW_TOOLS_MAX)
        return refuse(param, msg, len, "tools", "tools lists more than 64 functions.", NULL);
    size_t i, j;
    json_t *tool;
    int found = 0;
    json_array_foreach(tools, i, tool)
    {
        json_t *f = function_of(tool);
        const char *type = json_string_value(json_object_get(tool, "type"));
        const char *name = json_string_value(json_object_get(f, "name"));
        json_t *d = json_object_get(f, "description"), *p = json_object_get(f, "parameters");
        json_t *strict = json_object_get(f, "strict");
        char at[24];
        snprintf(at, sizeof at, "%zu", i);
        if (!type || strcmp(type, "function"))
            return refuse(param, msg, len, "tools", "tools[%s]: only function tools are "
                                                    "supported ({\"type\": \"function\", ...}).",
                          at);
        if (!json_is_object(f) || !name_ok(name))
            return refuse(param, msg, len, "tools",
                          "tools[%s].function.name must be 1 to 64 letters, digits, "
                          "underscores or dashes.",
                          at);
        if ((!absent(d) && !json_is_string(d)) || (!absent(p) && !json_is_object(p)) ||
            (!absent(strict) && !json_is_boolean(strict)))
            return refuse(param, msg, len, "tools",
                          "tools[%s].function: description must be a string, parameters a "
                          "JSON Schema object and strict a boolean.",
                          at);
        /* arguments are a JSON object, as every client reads them */
        json_t *pt = json_object_get(p, "type");
        if (!absent(pt) && !(json_is_string(pt) && !strcmp(json_string_value(pt), "object")))
            return refuse(param, msg, len, "tools",
                          "tools[%s].function.parameters must describe an object (type "
                          "\"object\"): a call's arguments are a JSON object.",
                          at);
        for (j = 0; j < i; j++)
            if (!strcmp(name_of(json_array_get(tools, j)), name))
                return refuse(param, msg, len, "tools", "tools names the function %s twice.",
                              name);
        if (held(tool, i, param, msg, len))
            return -1;
        found |= chosen(b) && !strcmp(chosen(b), name);
    }
    if (mode == GW_TOOLS_NAMED && !found)
        return refuse(param, msg, len, "tool_choice",
                      "tool_choice names the function %s, which is not in tools.", chosen(b));
    if (!absent(json_object_get(b, "response_format")) &&
        !oai_param_neutral("response_format", json_object_get(b, "response_format")))
        return refuse(param, msg, len, "response_format",
                      "response_format with a tool call is not supported (the call's "
                      "arguments are held to the function's parameters).",
                      NULL);
    if (json_is_true(json_object_get(b, "logprobs")))
        return refuse(param, msg, len, "logprobs",
                      "logprobs with a tool call are not supported.", NULL);
    return 0; /* (the union "required" holds the call to is compiled with the request) */
}

int gw_tools_parse(json_t *b, struct gw_tools *t)
{
    memset(t, 0, sizeof *t);
    t->mode = mode_of(b);
    if (t->mode == GW_TOOLS_OFF || !json_array_size(json_object_get(b, "tools"))) {
        t->mode = GW_TOOLS_OFF;
        return 0;
    }
    if (t->mode == GW_TOOLS_NAMED)
        snprintf(t->name, sizeof t->name, "%s", chosen(b));
    t->max_calls = t->mode != GW_TOOLS_NAMED &&
                           !json_is_false(json_object_get(b, "parallel_tool_calls"))
                       ? GW_TOOLS_MAX_CALLS
                       : 1;
    t->schema = call_schema(b);
    t->prompt = call_prompt(b, t->max_calls);
    if (!t->schema || !t->prompt) {
        gw_tools_deinit(t);
        return -1;
    }
    return 0;
}

void gw_tools_deinit(struct gw_tools *t)
{
    free(t->schema);
    free(t->prompt);
    t->schema = t->prompt = NULL;
}

int gw_tool_message(json_t *m)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    if (role && !strcmp(role, "tool"))
        return 1;
    return json_array_size(json_object_get(m, "tool_calls")) > 0;
}

int gw_uses_tools(json_t *b)
{
    if (mode_of(b) != GW_TOOLS_OFF && json_array_size(json_object_get(b, "tools")))
        return 1; /* ("none": the tools are not shown to the model, the answer is words) */
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(b, "messages"), i, m)
        if (gw_tool_message(m))
            return 1;
    return 0;
}

/* The function an earlier call of id called, or NULL. */
static const char *called(json_t *msgs, const char *id)
{
    size_t i, j;
    json_t *m, *call;
    json_array_foreach(msgs, i, m)
        json_array_foreach(json_object_get(m, "tool_calls"), j, call)
        {
            const char *cid = json_string_value(json_object_get(call, "id"));
            if (cid && id && !strcmp(cid, id))
                return json_string_value(json_object_get(json_object_get(call, "function"),
                                                         "name"));
        }
    return NULL;
}

char *gw_tool_message_text(json_t *msgs, json_t *m)
{
    struct oai_buf t = {0};
    size_t len, i;
    long bad;
    json_t *content = json_object_get(m, "content"), *call;
    char *c = absent(content) ? NULL : gw_message_text(content, &len, &bad);
    if (!absent(content) && !c)
        return NULL;
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!strcmp(role, "tool")) {
        const char *id = json_string_value(json_object_get(m, "tool_call_id"));
        const char *name = called(msgs, id);
        oai_buf_puts(&t, "Result of ");
        oai_buf_puts(&t, name ? name : id ? id : "a function");
        oai_buf_puts(&t, ": ");
        oai_buf_put(&t, c ? c : "", c ? len : 0);
    } else {
        if (c && len) {
            oai_buf_put(&t, c, len);
            oai_buf_puts(&t, "\n");
        }
        json_array_foreach(json_object_get(m, "tool_calls"), i, call)
        {
            json_t *f = json_object_get(call, "function");
            json_t *args = json_object_get(f, "arguments");
            /* a sentence: the call's JSON would be copied where the answer is text */
            if (i)
                oai_buf_puts(&t, "\n");
            oai_buf_puts(&t, "I called ");
            oai_buf_puts(&t, json_string_value(json_object_get(f, "name")));
            oai_buf_puts(&t, "(");
            oai_buf_put(&t, json_string_value(args), json_string_length(args));
            oai_buf_puts(&t, ").");
        }
    }
    free(c);
    return text_of(&t);
}

/* ---- reading the call out of the answer ----------------------------------------------- */

void gw_call_reader_init(struct gw_call_reader *r, const struct gw_tools *t)
{
    memset(r, 0, sizeof *r);
    r->mode = t->mode;
    if (t->mode == GW_TOOLS_NAMED) {
        memcpy(r->name, t->name, sizeof r->name);
        r->head = 1;
    }
}

/* {"name": "NAME", "arguments": ... as the grammar writes it (white space aside), from
 * text[r->at]: the name and where the arguments begin, once both are in the text. */
static int read_head(struct gw_call_reader *r, const char *text, size_t len)
{
    static const char key[] = "\"arguments\":";
    if (len <= r->at)
        return 0;
    const char *colon = memchr(text + r->at, ':', len - r->at);
    if (!colon)
        return 0;
    const char *q = memchr(colon, '"', len - (size_t)(colon - text));
    if (!q)
        return 0;
    q++;
    const char *end = memchr(q, '"', len - (size_t)(q - text));
    if (!end || end - q > GW_TOOL_NAME_MAX)
        return 0;
    const char *a = NULL;
    for (const char *p = end; p + sizeof key - 1 <= text + len; p++)
        if (!memcmp(p, key, sizeof key - 1)) {
            a = p + sizeof key - 1;
            break;
        }
    if (!a)
        return 0;
    /* the space after the colon, when one is written, comes with the value's first byte */
    if (a == text + len)
        return 0;
    if (*a == ' ')
        a++;
    if (a == text + len)
        return 0;
    memcpy(r->name, q, (size_t)(end - q));
    r->name[end - q] = 0;
    r->args_at = (size_t)(a - text);
    r->head = 1;
    return 1;
}

static int space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

int gw_auto_begins(const char *text, size_t len, size_t *at)
{
    size_t k = 0;
    while (k < len && space(text[k]))
        k++;
    *at = k;
    return k == len ? 0 : text[k] == '{' ? 1 : -1;
}

/* Reads the call's object on from where it was left: where it closes, once it has. */
static void scan(struct gw_call_reader *r, const char *text, size_t len)
{
    if (r->scanned < r->at)
        r->scanned = r->at;
    for (; !r->closed && r->scanned < len; r->scanned++) {
        char ch = text[r->scanned];
        if (r->in_str) {
            if (r->esc)
                r->esc = 0;
            else if (ch == '\\')
                r->esc = 1;
            else if (ch == '"')
                r->in_str = 0;
        } else if (ch == '"') {
            r->in_str = 1;
        } else if (ch == '{' || ch == '[') {
            r->depth++;
        } else if ((ch == '}' || ch == ']') && --r->depth == 0) {
            r->closed = r->scanned;
        }
    }
}

int gw_call_read(struct gw_call_reader *r, const char *text, size_t len, int final,
                 size_t *from, size_t *to)
{
    if (!r->head && (r->mode != GW_TOOLS_REQUIRED || !read_head(r, text, len)))
        return 0;
    size_t end = len;
    if (r->mode == GW_TOOLS_REQUIRED) {
        scan(r, text, len);
        /* whole: its arguments end before its last brace (the grammar closes it before the
         * answer may end); open: braces and white space at the end are held back while the
         * text may grow, as they may close it; cut short: all goes out */
        if (r->closed)
            end = r->closed;
        if (r->closed || final != 2)
            while (end > r->args_at && (space(text[end - 1]) ||
                                        (!r->closed && !final && text[end - 1] == '}')))
                end--;
    }
    if (end < r->args_at + r->sent)
        end = r->args_at + r->sent;
    *from = r->args_at + r->sent;
    *to = end;
    r->sent = end - r->args_at;
    return 1;
}

int gw_call_next(struct gw_call_reader *r, const char *text, size_t len)
{
    if (r->mode != GW_TOOLS_REQUIRED || !r->head || !r->closed ||
        r->index + 1 >= GW_TOOLS_MAX_CALLS)
        return 0;
    size_t k = r->closed + 1;
    while (k < len && space(text[k]))
        k++;
    if (k >= len || text[k] != '{')
        return 0;
    enum gw_tool_mode mode = r->mode;
    int index = r->index + 1;
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->index = index;
    r->at = r->scanned = k;
    return 1;
}
