/*
 * tools — OpenAI function calling: tool_choice "required" (one call, to one of the tools),
 * {"type": "function", "function": {"name"}} (a call to that function) or "auto" (a call or
 * words). The model is told of the functions in a system message, and
 * its answer is held by a grammar (engine/grammar.h) to a call: for a named function its
 * arguments, a document of the function's parameters schema; for "required" the object
 * {"name": one of the names, "arguments": that function's arguments}. The reply carries
 * the call as message.tool_calls (streamed as tool_calls deltas, the arguments piece by
 * piece), content null, finish_reason "tool_calls" ("stop" for a named function, as
 * OpenAI answers).
 *
 * tool_choice "auto" (the default when tools are given) leaves the choice to the model: it
 * is told to answer with the call's JSON object or in text, and the first byte of its
 * answer that is not white space decides (eng_gm_optional): '{' begins a call, held to the
 * union as for "required"; anything else a reply, held to nothing, its stop strings
 * applied (a call's are not). Whether a small model calls when it should is the model's.
 *
 * The union of "required" and "auto" is of objects told apart by their first property, the
 * name, which the grammar reads as one reading until the name is written (however many
 * functions, up to GW_TOOLS_MAX). Stop strings are not applied
 * to a call. With parallel_tool_calls (true unless the request says false) "required" and
 * "auto" make up to GW_TOOLS_MAX_CALLS calls, one JSON object a line (eng_gm_repeat); a
 * named function one.
 *
 * A conversation may carry earlier calls (assistant messages with tool_calls) and their
 * results (role "tool"): the model reads each call as a sentence, "I called
 * NAME(ARGUMENTS).", and each result as a user turn, "Result of NAME: ...", naming the
 * function. Answers to requests with tools (but "none") or with calls in their
 * conversation are never cached (gw_uses_tools).
 */
#ifndef GW_TOOLS_H
#define GW_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#define GW_TOOL_NAME_MAX 64
#define GW_TOOLS_MAX 64
#define GW_TOOLS_MAX_CALLS 8 /* calls an answer, with parallel_tool_calls */

enum gw_tool_mode { GW_TOOLS_OFF, GW_TOOLS_NAMED, GW_TOOLS_REQUIRED, GW_TOOLS_AUTO };

/* A chat request's tools and tool_choice, checked (oai_params_check calls this): 0, or -1
 * with *param and msg naming what is wrong. */
int gw_tools_check(json_t *b, const char **param, char *msg, size_t len);

/* What a checked request asks of the generation. */
struct gw_tools {
    enum gw_tool_mode mode;
    char name[GW_TOOL_NAME_MAX + 1]; /* GW_TOOLS_NAMED: the function */
    char *schema;                    /* the grammar's JSON Schema (malloc'd) */
    char *prompt;                    /* the system text that describes the call */
    int max_calls;                   /* 1, or GW_TOOLS_MAX_CALLS (parallel calls) */
};
/* 0 (mode GW_TOOLS_OFF when no call is asked for), or -1 when out of memory. */
int gw_tools_parse(json_t *b, struct gw_tools *t);
void gw_tools_deinit(struct gw_tools *t);

/* Whether a chat request asks for a call or carries calls or their results. */
int gw_uses_tools(json_t *b);

/* Whether message m (checked) is an earlier call or a call's result, and its text as the
 * model reads it (malloc'd; NULL when out of memory): the calls, a line each, after any
 * content ("I called NAME(ARGUMENTS)."), or "Result of NAME: CONTENT" (NAME found by
 * tool_call_id among msgs' calls). */
int gw_tool_message(json_t *m);
char *gw_tool_message_text(json_t *msgs, json_t *m);

/*
 * The calls read out of the generated text as it grows. GW_TOOLS_NAMED: the text is the
 * arguments of one call. GW_TOOLS_REQUIRED: the text is {"name": "...", "arguments": ...}
 * as the grammar writes it, and with parallel calls more such objects, each after a line
 * break; a call's name is known once its string closes, its arguments begin after
 * "arguments": and end before its object's last brace.
 */
struct gw_call_reader {
    enum gw_tool_mode mode;
    int index; /* the call being read: 0, 1, ... */
    char name[GW_TOOL_NAME_MAX + 1];
    int head;       /* its name and where its arguments begin are known */
    size_t at;      /* where its object begins in the text */
    size_t args_at; /* in the text */
    size_t sent;    /* its arguments' bytes handed out so far */
    /* its object read so far (GW_TOOLS_REQUIRED): the nesting, within a string, after a
     * backslash; where it closed (its last brace; 0: open) */
    size_t scanned, closed;
    int depth, in_str, esc;
};
/* tool_choice "auto": what text[0..len), the answer so far, has begun: 1 a call (its first
 * byte that is not white space, at *at, is '{'), -1 words, 0 nothing yet (white space). */
int gw_auto_begins(const char *text, size_t len, size_t *at);

void gw_call_reader_init(struct gw_call_reader *r, const struct gw_tools *t);
/* After the text has grown to text[0..len): 1 when the head of the call being read is
 * known, with [*from, *to) its arguments' bytes that may go out now; 0: not yet. final 0:
 * the text may grow (braces and white space at its end are held back, as they may close
 * the wrapping object); 1: the text is complete (its last brace dropped); 2: it was cut
 * short (all goes out). */
int gw_call_read(struct gw_call_reader *r, const char *text, size_t len, int final,
                 size_t *from, size_t *to);
/* Once the call being read is whole and all its arguments handed out: 1 when the next
 * call's object has begun in text[0..len) (the reader moves on to it, index + 1); 0 when
 * none has (yet), or GW_TOOLS_MAX_CALLS have been read. */
int gw_call_next(struct gw_call_reader *r, const char *text, size_t len);

#endif
