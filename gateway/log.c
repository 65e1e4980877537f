#include "log.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_level = GW_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int gw_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

const char *gw_log_level_name(int level)
{
    return level >= 0 && level < 4 ? level_names[level] : "info";
}

void gw_log_set_level(int level)
{
    atomic_store(&g_level, level);
}

int gw_log_enabled(int level)
{
    return level >= atomic_load(&g_level);
}

/* A JSON string of s; bytes that are not valid UTF-8 (client-supplied paths) become '?'. */
static json_t *jstr(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j)
        return j;
    char buf[512];
    size_t i = 0;
    for (; s[i] && i < sizeof buf - 1; i++)
        buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    buf[i] = 0;
    return json_string(buf);
}

static json_t *line_begin(int level, const char *msg)
{
    struct timeval tv;
    struct tm tm;
    char ts[40];
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
    json_t *o = json_object();
    json_object_set_new(o, "time", json_string(ts));
    json_object_set_new(o, "level", json_string(gw_log_level_name(level)));
    json_object_set_new(o, "msg", jstr(msg));
    return o;
}

static void line_end(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
                             JSON_REAL_PRECISION(6));
    json_decref(o);
    if (!s)
        return;
    size_t n = strlen(s);
    s[n] = '\n'; /* jansson allocates n + 1; the terminator is not needed for write(2) */
    ssize_t w = write(STDERR_FILENO, s, n + 1);
    (void)w;
    free(s);
}

void gw_log_kv(int level, const char *msg, ...)
{
    if (!gw_log_enabled(level))
        return;
    json_t *o = line_begin(level, msg);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k)
            break;
        const char *v = va_arg(ap, const char *);
        json_object_set_new(o, k, v ? jstr(v) : json_null());
    }
    va_end(ap);
    line_end(o);
}

void gw_log(int level, const char *fmt, ...)
{
    if (!gw_log_enabled(level))
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    line_end(line_begin(level, buf));
}

void gw_log_access(const char *request_id, const char *method, const char *route, int status,
                   double latency_ms, const char *peer)
{
    if (!gw_log_enabled(GW_LOG_INFO))
        return;
    json_t *o = line_begin(GW_LOG_INFO, "request");
    json_object_set_new(o, "request_id", jstr(request_id));
    json_object_set_new(o, "method", jstr(method));
    json_object_set_new(o, "route", jstr(route));
    json_object_set_new(o, "status", json_integer(status));
    json_object_set_new(o, "latency_ms", json_real(latency_ms));
    if (peer)
        json_object_set_new(o, "peer", jstr(peer));
    line_end(o);
}
