/*
 * log — the gateway's one log sink: JSON lines on stderr.
 *
 * Every line is one JSON object with at least "time" (RFC 3339, UTC, milliseconds),
 * "level" and "msg"; callers add fields as key/value pairs. The level is checked
 * before anything is formatted, so a disabled debug line costs one comparison.
 * Thread-safe: a line, or a batch of whole held lines, is written under one process-wide
 * lock, so lines from different threads never interleave.
 * Libraries get this sink through their log callbacks.
 */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stdarg.h>

enum gw_log_level { GW_LOG_DEBUG = 0, GW_LOG_INFO, GW_LOG_WARN, GW_LOG_ERROR };

/* Or'ed into a level for gw_log_kv(): the line is written whatever log.level says, with its
 * own level (what an operator needs at any level: the port chosen, a certificate made). */
#define GW_LOG_ALWAYS 0x100

/* Parses "debug", "info", "warn" or "error"; returns -1 for anything else. */
int gw_log_level_parse(const char *name);
const char *gw_log_level_name(int level);

void gw_log_set_level(int level);
int gw_log_enabled(int level);

/*
 * Writes one line: msg, then pairs of (const char *key, const char *value) strings
 * terminated by a NULL key. Values are JSON-escaped strings (a NULL value: null), except
 * under a key made with GW_LOG_BARE(): there a value that is a JSON number, true or false
 * is written as it is, so that a count stays a number in the line (anything else is still
 * a string). Use gw_log() for a plain message.
 */
void gw_log_kv(int level, const char *msg, ...);
#define GW_LOG_BARE(key) "#" key

/* printf-style message with no extra fields. */
void gw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The access log line of one HTTP request, at info (at warn for a 5xx status). Numbers stay
 * numbers in the JSON. path (the target's, given where no route matched), peer (the
 * client's address), tenant, key (a key's listed prefix) and cache (exact, semantic or miss,
 * for a request the caches looked at) are left out when NULL. failed: the status of an error
 * said after a 200's headers (a stream's error event), as "stream_error" (a 5xx one at
 * warn too); 0: none.
 */
void gw_log_access(const char *request_id, const char *method, const char *route,
                   const char *path, int status, int failed, double latency_ms,
                   const char *peer, const char *tenant, const char *key, const char *cache);

/*
 * From now on this thread's info and debug lines are held in memory and written together
 * by gw_log_flush(): a busy event loop then writes its access log in one write(2) per
 * batch of requests, not one a request. on_held(arg) runs when a line is held while none
 * was, for the caller to schedule a flush soon. A warn or error line writes the held
 * lines, then itself; past 64 KiB held, the lines are written at once.
 */
void gw_log_hold(void (*on_held)(void *arg), void *arg);
/* Writes what this thread holds. */
void gw_log_flush(void);
/* Writes what this thread holds and stops holding. */
void gw_log_release(void);

#endif
