/*
 * oai — the OpenAI wire format pieces the gateway shares: the error body every
 * non-2xx answer carries, {"error":{"message","type","param","code"}}, and the type
 * an HTTP status maps to.
 */
#ifndef GW_OAI_H
#define GW_OAI_H

#include <jansson.h>

/* A new error body. param and code may be NULL (JSON null). */
json_t *oai_error(const char *message, const char *type, const char *param, const char *code);

/* The OpenAI error "type" for an HTTP status: invalid_request_error for most 4xx,
 * authentication_error for 401, rate_limit_error for 429, server_error for 5xx. */
const char *oai_error_type(int status);

/* Serialized error body for a status, malloc'd (caller frees). */
char *oai_error_dumps(int status, const char *message, const char *param, const char *code);

#endif
