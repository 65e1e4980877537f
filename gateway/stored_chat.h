/*
 * OpenAI's stored chat completions: a chat request with "store": true keeps its reply, the
 * chat.completion object as a JSON reply would be (a stream's chunks put together into one,
 * with its usage), with the request's metadata and messages, for server.responses_ttl_s,
 * beside the Responses API's stored responses (the same table, within the same
 * server.responses_max_bytes a tenant; the ids, chatcmpl- and resp_, tell them apart).
 *
 *   GET    /v1/chat/completions             the tenant's, in the order they were made
 *                                           (after, limit, order, model, metadata[k]=v)
 *   GET    /v1/chat/completions/{id}        one
 *   POST   /v1/chat/completions/{id}        its metadata changed ({"metadata": {...}})
 *   DELETE /v1/chat/completions/{id}        it goes
 *   GET    /v1/chat/completions/{id}/messages  the request's messages (after, limit, order)
 *
 * A tenant sees its own alone. Event loop only.
 */
#ifndef GW_STORED_CHAT_H
#define GW_STORED_CHAT_H

#include <jansson.h>
#include <stdint.h>

typedef struct gw_server gw_server;
struct gw_req;

/*
 * A stream's chunk (borrowed) put into acc, the chat.completion it builds (NULL: the first
 * chunk; made then): each choice's role, content, tool calls (by their index, arguments
 * joined), logprobs and finish reason, and a usage chunk's usage. Returns acc (NULL: no
 * memory).
 */
json_t *gw_stored_chunk(json_t *acc, json_t *chunk);

/* acc's texts and call arguments, kept in pieces while it is put together (a long answer's
 * thousands of chunks then cost no more than its length), joined: the completion as it is
 * stored (gw_stored_put() does it). 0, or -1: no memory. */
int gw_stored_finish(json_t *acc);

/*
 * What a stored completion repeats of its request b (borrowed), as OpenAI's do: its
 * request_id, metadata ({} when none), seed, temperature, top_p, presence and frequency
 * penalties (their defaults when not given), tools, tool_choice, response_format and user
 * (as input_user; null when not given). NULL: no memory.
 */
json_t *gw_stored_request(json_t *b, const char *request_id);

/*
 * Stores the chat completion (taken; its id names it) of tenant with what it repeats of its
 * request (borrowed: gw_stored_request()) and the request's messages (borrowed). 0, or -1
 * (logged: no memory, or the store is closing).
 */
int gw_stored_put(gw_server *srv, int64_t tenant, json_t *completion, json_t *request,
                  json_t *messages);

void gw_handle_stored_chat_list(struct gw_req *r); /* GET /v1/chat/completions */
void gw_handle_stored_chat(struct gw_req *r);      /* /v1/chat/completions/{id}[/messages] */

#endif
