/*
 * log — the gateway's one log sink: JSON lines on stderr.
 *
 * Every line is one JSON object with at least "time" (RFC 3339, UTC, milliseconds),
 * "level" and "msg"; callers add fields as key/value pairs. The level is checked
 * before anything is formatted, so a disabled debug line costs one comparison.
 * Thread-safe: a line is written with one write(2) call, so lines from different
 * threads never interleave. Libraries get this sink through their log callbacks.
 */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stdarg.h>

enum gw_log_level { GW_LOG_DEBUG = 0, GW_LOG_INFO, GW_LOG_WARN, GW_LOG_ERROR };

/* Parses "debug", "info", "warn" or "error"; returns -1 for anything else. */
int gw_log_level_parse(const char *name);
const char *gw_log_level_name(int level);

void gw_log_set_level(int level);
int gw_log_enabled(int level);

/*
 * Writes one line: msg, then pairs of (const char *key, const char *value) strings
 * terminated by a NULL key. Values are JSON-escaped. Use gw_log() for a plain message.
 */
void gw_log_kv(int level, const char *msg, ...);

/* printf-style message with no extra fields. */
void gw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The access log line of one HTTP request. Numbers stay numbers in the JSON.
 */
void gw_log_access(const char *request_id, const char *method, const char *route, int status,
                   double latency_ms, const char *peer);

#endif
