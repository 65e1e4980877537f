#include "log.h"

#include "oai.h"

#include <errno.h>
#include <pthread.h>
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

/* Lines are written with oai's JSON writer, in the order and the form json_dumps gave them
 * (compact, ASCII only, reals to 6 digits): no tree is built per line. */

/* A JSON string of s; bytes that are not valid UTF-8 (client-supplied paths) become '?'. */
static void put_str(struct oai_buf *b, const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    if (oai_buf_str(b, s, n, 1) == 0)
        return;
    char buf[512];
    size_t i = 0;
    for (; s[i] && i < sizeof buf - 1; i++)
        buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    oai_buf_str(b, buf, i, 1);
}

static void put_key(struct oai_buf *b, const char *k)
{
    oai_buf_put(b, ",", 1);
    put_str(b, k);
    oai_buf_put(b, ":", 1);
}

static void line_begin(struct oai_buf *b, int level, const char *msg)
{
    /* the date and time to the second, formatted once a second per thread */
    static _Thread_local time_t sec = -1;
    static _Thread_local char ts[32];
    static _Thread_local size_t tslen;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (tv.tv_sec != sec) {
        struct tm tm;
        gmtime_r(&tv.tv_sec, &tm);
        tslen = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        sec = tv.tv_sec;
    }
    char t[48];
    memcpy(t, ts, tslen);
    int ms = (int)(tv.tv_usec / 1000);
    t[tslen] = '.';
    t[tslen + 1] = (char)('0' + ms / 100);
    t[tslen + 2] = (char)('0' + ms / 10 % 10);
    t[tslen + 3] = (char)('0' + ms % 10);
    t[tslen + 4] = 'Z';
    t[tslen + 5] = 0;
    oai_buf_puts(b, "{\"time\":");
    put_str(b, t);
    oai_buf_puts(b, ",\"level\":");
    put_str(b, gw_log_level_name(level));
    oai_buf_puts(b, ",\"msg\":");
    put_str(b, msg);
}

/* This thread's held lines (gw_log_hold). */
#define HOLD_MAX 65536
static _Thread_local struct {
    void (*on_held)(void *arg);
    void *arg;
    size_t len;
    char buf[HOLD_MAX];
} *held;

/* One writer at a time: a held batch can exceed PIPE_BUF, and a pipe then takes it in
 * pieces, between which another thread's line must not land. */
static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;

static void write_all(const char *p, size_t n)
{
    pthread_mutex_lock(&write_mu);
    while (n) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* a log that cannot be written is not worth stalling for */
        p += w;
        n -= (size_t)w;
    }
    pthread_mutex_unlock(&write_mu);
}

void gw_log_flush(void)
{
    if (held && held->len) {
        write_all(held->buf, held->len);
        held->len = 0;
    }
}

void gw_log_hold(void (*on_held)(void *arg), void *arg)
{
    if (!held && !(held = malloc(sizeof *held)))
        return; /* lines are written one by one, as without holding */
    held->on_held = on_held;
    held->arg = arg;
    held->len = 0;
}

void gw_log_release(void)
{
    gw_log_flush();
    free(held);
    held = NULL;
}

static void line_end(struct oai_buf *b, int level)
{
    oai_buf_put(b, "}\n", 2);
    if (!b->oom) {
        if (held && level <= GW_LOG_INFO && b->len <= HOLD_MAX) {
            if (held->len + b->len > HOLD_MAX)
                gw_log_flush();
            int first = held->len == 0;
            memcpy(held->buf + held->len, b->p, b->len);
            held->len += b->len;
            if (first && held->on_held)
                held->on_held(held->arg);
        } else {
            gw_log_flush();
            write_all(b->p, b->len);
        }
    }
    oai_buf_deinit(b);
}

/* whether s is a JSON number, true or false */
static int bare_literal(const char *s)
{
    if (!strcmp(s, "true") || !strcmp(s, "false"))
        return 1;
    const char *p = s + (*s == '-');
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    if (*p == '.') {
        if (!(*++p >= '0' && *p <= '9'))
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p += (p[1] == '+' || p[1] == '-') + 1;
        if (!(*p >= '0' && *p <= '9'))
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return !*p;
}

void gw_log_kv(int level, const char *msg, ...)
{
    int always = level & GW_LOG_ALWAYS;
    level &= ~GW_LOG_ALWAYS;
    if (!always && !gw_log_enabled(level))
        return;
    char stack[1024];
    struct oai_buf b;
    oai_buf_init(&b, stack, sizeof stack);
    line_begin(&b, level, msg);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k)
            break;
        const char *v = va_arg(ap, const char *);
        int bare = *k == '#';
        put_key(&b, k + bare);
        if (!v)
            oai_buf_puts(&b, "null");
        else if (bare && bare_literal(v))
            oai_buf_puts(&b, v);
        else
            put_str(&b, v);
    }
    va_end(ap);
    line_end(&b, level);
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
    char stack[1024];
    struct oai_buf b;
    oai_buf_init(&b, stack, sizeof stack);
    line_begin(&b, level, buf);
    line_end(&b, level);
}

void gw_log_access(const char *request_id, const char *method, const char *route,
                   const char *path, int status, int failed, double latency_ms,
                   const char *peer, const char *tenant, const char *key, const char *cache)
{
    /* a failure of the server's (5xx) is a warning, seen at log.level = warn; so is one
     * said after a 200's headers, in a stream */
    const enum gw_log_level level = status >= 500 || failed >= 500 ? GW_LOG_WARN : GW_LOG_INFO;
    if (!gw_log_enabled(level))
        return;
    char stack[512];
    struct oai_buf b;
    oai_buf_init(&b, stack, sizeof stack);
    line_begin(&b, level, "request");
    put_key(&b, "request_id");
    put_str(&b, request_id);
    put_key(&b, "method");
    put_str(&b, method);
    put_key(&b, "route");
    put_str(&b, route);
    if (path) {
        put_key(&b, "path");
        put_str(&b, path);
    }
    put_key(&b, "status");
    oai_buf_int(&b, status);
    if (failed) {
        put_key(&b, "stream_error");
        oai_buf_int(&b, failed);
    }
    put_key(&b, "latency_ms");
    oai_buf_real(&b, latency_ms, 6);
    if (peer) {
        put_key(&b, "peer");
        put_str(&b, peer);
    }
    if (tenant) {
        put_key(&b, "tenant");
        put_str(&b, tenant);
    }
    if (key) {
        put_key(&b, "key");
        put_str(&b, key);
    }
    if (cache) {
        put_key(&b, "cache");
        put_str(&b, cache);
    }
    line_end(&b, level);
}
