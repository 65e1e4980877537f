/*
 * POST /v1/responses, OpenAI's Responses API, as a form of the chat completions that
 * api_chat.c serves. A request is read once into the chat completions body that asks the
 * same (instructions as the first system message, input items as messages,
 * max_output_tokens as max_tokens), so the two routes share the engine, the answer caches
 * and their keys: a question asked through one is a cache hit through the other. This module
 * reads the request and writes the response objects and stream events; api_chat.c runs it.
 *
 * A response is stored (unless the request says "store": false) with the conversation
 * through its answer, as chat messages, which a request naming it as previous_response_id
 * continues (api_chat.c looks it up; instructions are not inherited, as at OpenAI).
 *
 * Function tools ({"type": "function", "name", "description", "parameters", "strict"}) are
 * chat's tools: an answer that is calls (tools.h) is a function_call output item a call
 * (several with parallel_tool_calls, each its own item id and call_id), and input items of
 * type function_call and function_call_output are the conversation's earlier calls and
 * their results.
 *
 * Not implemented, and refused with a 400 naming the parameter rather than ignored:
 * conversation objects, tools other than functions, other output formats, reasoning,
 * images and files, truncation "auto", background. Event loop only.
 */
#ifndef GW_RESPONSES_H
#define GW_RESPONSES_H

#include <jansson.h>
#include <stddef.h>

/*
 * The chat completions body for the Responses body b (borrowed), or NULL with *param (the
 * parameter at fault, may be NULL) and msg when b asks for what this server does not do.
 * history (borrowed, may be NULL): the messages of the response b continues, put between
 * the instructions and the input. On success the caller owns the returned body, *echo (the
 * request's settings that a response object repeats) and *convo (the messages to store
 * with the answer: history and input, without the instructions).
 */
json_t *gw_responses_request(json_t *b, json_t *history, json_t **echo, json_t **convo,
                             const char **param, char *msg, size_t len);

struct gw_response_usage {
    int input, output, cached;
};

/* What one response is: its ids, the settings it repeats (borrowed echo), when. */
struct gw_response {
    const char *id, *msg_id, *model;
    json_t *echo;
    long created_at;
    int seq; /* the next stream event's sequence_number */
};

/*
 * The response object. status: "in_progress", "completed", "incomplete" (max_output_tokens
 * was reached) or "failed" (error, a message). output (taken; NULL: none yet): its output
 * items; u: NULL until it ended. The caller owns the result.
 */
json_t *gw_response_object(const struct gw_response *r, const char *status, json_t *output,
                           const struct gw_response_usage *u, const char *error);

/*
 * A stream event of type `type` with the response's next sequence number; fields (taken)
 * are its other members. The caller owns the result.
 */
json_t *gw_response_event(struct gw_response *r, const char *type, json_t *fields);

/* The function_call item id of a call to name whose arguments are args[0..len). */
json_t *gw_response_call(const char *id, const char *call_id, const char *name,
                         const char *status, const char *args, size_t len);

/* The message item: status "in_progress" (no content yet), "completed" or "incomplete". */
json_t *gw_response_message(const struct gw_response *r, const char *status, const char *text,
                            size_t len);

/* text as a JSON string; "" for NULL or for bytes that are not UTF-8 (never the engine's). */
json_t *gw_response_string(const char *s, size_t n);

/* The output_text part of text (NULL: empty). */
json_t *gw_response_text_part(const char *text, size_t len);

/*
 * GET /v1/responses/{id}/input_items: the list object of the input items of the stored
 * response id, whose conversation is convo (chat messages, as stored: history and input,
 * then its answer, which is left out) — messages, function calls and their outputs, each
 * with an id made from the response's and its place. query: order (asc or desc, the
 * default), limit (1 to 100, 20), after (an item id). NULL with *param and msg for a bad
 * query.
 */
json_t *gw_response_input_items(const char *id, json_t *convo, const char *order,
                                const char *limit, const char *after, const char **param,
                                char *msg, size_t len);

#endif
