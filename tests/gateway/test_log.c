/* The log sink: JSON lines on stderr, and lines held by a busy thread (gw_log_hold) written
 * together, in order, without losing or splitting any. stderr is a temporary file here. */
#include "log.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *file;
static int saved_fd;

static void setup(void)
{
    file = tmpfile();
    cr_assert_not_null(file);
    fflush(stderr);
    saved_fd = dup(STDERR_FILENO);
    dup2(fileno(file), STDERR_FILENO);
    gw_log_set_level(GW_LOG_INFO);
}

static void teardown(void)
{
    gw_log_release();
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    fclose(file);
}

/* What stderr has received so far, as a malloc'd string. */
static char *written(void)
{
    long n = lseek(fileno(file), 0, SEEK_END);
    char *s = calloc(1, (size_t)n + 1);
    cr_assert_eq(pread(fileno(file), s, (size_t)n, 0), n);
    return s;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

TestSuite(log, .init = setup, .fini = teardown);

Test(log, lines_are_json_with_time_level_and_fields)
{
    gw_log_kv(GW_LOG_WARN, "disk \"slow\"", "path", "/a\nb", "missing", NULL, NULL);
    gw_log_kv(GW_LOG_DEBUG, "not shown", NULL);
    char *s = written();
    cr_assert_eq(lines(s), 1, "%s", s);
    json_error_t e;
    json_t *o = json_loads(s, 0, &e);
    cr_assert_not_null(o, "%s: %s", s, e.text);
    cr_assert_str_eq(json_string_value(json_object_get(o, "level")), "warn");
    cr_assert_str_eq(json_string_value(json_object_get(o, "msg")), "disk \"slow\"");
    cr_assert_str_eq(json_string_value(json_object_get(o, "path")), "/a\nb");
    cr_assert(json_is_null(json_object_get(o, "missing")));
    cr_assert_eq(strlen(json_string_value(json_object_get(o, "time"))), 24); /* ms, Z */
    json_decref(o);
    free(s);
}

/* the last line written, parsed */
static json_t *last_line(void)
{
    char *s = written();
    size_t n = strlen(s);
    cr_assert(n > 1 && s[n - 1] == '\n');
    s[n - 1] = 0;
    char *at = strrchr(s, '\n');
    json_t *o = json_loads(at ? at + 1 : s, 0, NULL);
    cr_assert_not_null(o, "%s", at ? at + 1 : s);
    free(s);
    return o;
}

/* a count, a size or a flag under a GW_LOG_BARE() key stays a number or a boolean in the
 * line, for the tools that read it; what is not one is still a string */
Test(log, bare_values_are_json_numbers_and_booleans)
{
    static const char *const bare[] = {"0", "-12", "8443", "3.25", "1e-7", "-0.5E+3", "true",
                                       "false"};
    static const char *const not_bare[] = {"", "-", "01", "1.", ".5", "1e", "1e+", "0x10",
                                           "12 ", "True", "null", "NaN", "1,5"};
    for (size_t i = 0; i < sizeof bare / sizeof *bare; i++) {
        gw_log_kv(GW_LOG_WARN, "m", GW_LOG_BARE("v"), bare[i], "s", bare[i], NULL);
        json_t *o = last_line();
        json_t *v = json_object_get(o, "v");
        cr_assert(json_is_number(v) || json_is_boolean(v), "%s", bare[i]);
        cr_assert(json_is_string(json_object_get(o, "s")), "%s", bare[i]);
        json_t *want = json_loads(bare[i], JSON_DECODE_ANY, NULL);
        cr_assert(json_equal(v, want), "%s", bare[i]);
        json_decref(want);
        json_decref(o);
    }
    for (size_t i = 0; i < sizeof not_bare / sizeof *not_bare; i++) {
        gw_log_kv(GW_LOG_WARN, "m", GW_LOG_BARE("v"), not_bare[i], NULL);
        json_t *o = last_line();
        cr_assert_str_eq(json_string_value(json_object_get(o, "v")), not_bare[i]);
        json_decref(o);
    }
}

/* what an operator needs at any level (the port chosen) is written with its own level */
Test(log, always_lines_pass_the_filter_with_their_own_level)
{
    gw_log_set_level(GW_LOG_ERROR);
    gw_log_kv(GW_LOG_INFO, "filtered", NULL);
    gw_log_kv(GW_LOG_INFO | GW_LOG_ALWAYS, "listening", "port", "8443", NULL);
    char *s = written();
    cr_assert_eq(lines(s), 1, "%s", s);
    json_error_t e;
    json_t *o = json_loads(s, 0, &e);
    cr_assert_not_null(o, "%s", s);
    cr_assert_str_eq(json_string_value(json_object_get(o, "level")), "info");
    cr_assert_str_eq(json_string_value(json_object_get(o, "msg")), "listening");
    json_decref(o);
    free(s);
}

/* A stream's 200 that ended with an error says it, at warn, seen at log.level = warn */
Test(log, a_stream_ended_by_an_error_is_a_warning)
{
    gw_log_set_level(GW_LOG_WARN);
    gw_log_access("r1", "POST", "/v1/chat/completions", NULL, 200, 0, 3.5, NULL, NULL, NULL,
                  NULL);
    gw_log_access("r2", "POST", "/v1/chat/completions", NULL, 200, 503, 3.5, NULL, NULL, NULL,
                  NULL);
    char *s = written();
    cr_assert_eq(lines(s), 1, "%s", s);
    json_t *o = json_loads(s, 0, NULL);
    cr_assert_not_null(o, "%s", s);
    cr_assert_str_eq(json_string_value(json_object_get(o, "level")), "warn");
    cr_assert_eq(json_integer_value(json_object_get(o, "status")), 200);
    cr_assert_eq(json_integer_value(json_object_get(o, "stream_error")), 503);
    json_decref(o);
    free(s);
}

static int held_calls;
static void on_held(void *arg)
{
    (void)arg;
    held_calls++;
}

Test(log, held_lines_wait_for_a_flush_and_keep_their_order)
{
    gw_log_hold(on_held, NULL);
    gw_log_access("r1", "GET", "/health", NULL, 200, 0, 0.5, NULL, NULL, NULL, NULL);
    gw_log_access("r2", "GET", "/metrics", NULL, 200, 0, 0.7, NULL, NULL, NULL, NULL);
    char *s = written();
    cr_assert_eq(lines(s), 0, "held lines are not written yet: %s", s);
    free(s);
    cr_assert_eq(held_calls, 1, "the holder is told once, when the first line waits");
    /* a warning cannot wait: the held lines go first, then it */
    gw_log_kv(GW_LOG_WARN, "trouble", NULL);
    s = written();
    cr_assert_eq(lines(s), 3, "%s", s);
    const char *a = strstr(s, "\"r1\""), *b = strstr(s, "\"r2\""), *w = strstr(s, "trouble");
    cr_assert(a && b && w && a < b && b < w, "%s", s);
    free(s);
    gw_log_access("r3", "GET", "/health", NULL, 200, 0, 0.1, NULL, NULL, NULL, NULL);
    cr_assert_eq(held_calls, 2);
    gw_log_flush();
    s = written();
    cr_assert_eq(lines(s), 4, "%s", s);
    free(s);
    /* after release, lines are written one by one again */
    gw_log_release();
    gw_log_access("r4", "GET", "/health", NULL, 200, 0, 0.1, NULL, NULL, NULL, NULL);
    s = written();
    cr_assert_eq(lines(s), 5, "%s", s);
    free(s);
}

Test(log, a_full_hold_buffer_is_written_without_losing_lines)
{
    gw_log_hold(on_held, NULL);
    char id[32];
    for (int i = 0; i < 2000; i++) { /* ~300 KB of access lines */
        snprintf(id, sizeof id, "req-%d", i);
        gw_log_access(id, "POST", "/v1/chat/completions", NULL, 200, 0, 1.25, "127.0.0.1", NULL,
                      NULL, NULL);
    }
    char *s = written();
    int before = lines(s);
    cr_assert(before > 0 && before < 2000, "past 64 KiB the held lines are written: %d",
              before);
    free(s);
    gw_log_flush();
    s = written();
    cr_assert_eq(lines(s), 2000);
    /* every line whole and in order */
    char *save, *line = strtok_r(s, "\n", &save);
    for (int i = 0; i < 2000; i++, line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        cr_assert_not_null(o, "line %d: %s", i, line);
        snprintf(id, sizeof id, "req-%d", i);
        cr_assert_str_eq(json_string_value(json_object_get(o, "request_id")), id);
        json_decref(o);
    }
    free(s);
}

/* Lines from two threads into a pipe that a slow reader drains: one thread writes batches
 * of held lines far larger than PIPE_BUF, the other single warnings. Every line read back
 * must be whole JSON, and none may be missing. */
struct pipe_reader {
    int fd;
    char *buf;
    size_t len, cap;
};

static void *drain(void *arg)
{
    struct pipe_reader *r = arg;
    for (;;) {
        if (r->len + 4097 > r->cap) {
            r->cap = r->cap ? 2 * r->cap : 1 << 20;
            r->buf = realloc(r->buf, r->cap);
        }
        ssize_t n = read(r->fd, r->buf + r->len, 4096);
        if (n <= 0)
            break;
        r->len += (size_t)n;
        usleep(50); /* slow: the pipe fills and writes are taken in pieces */
    }
    return NULL;
}

static void *warn_lines(void *arg)
{
    (void)arg;
    char id[32];
    for (int i = 0; i < 500; i++) {
        snprintf(id, sizeof id, "warn-%d", i);
        gw_log_kv(GW_LOG_WARN, "side thread", "request_id", id, NULL);
    }
    return NULL;
}

Test(log, threads_never_split_each_others_lines_on_a_pipe)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    dup2(p[1], STDERR_FILENO);
    close(p[1]);
    struct pipe_reader r = {.fd = p[0]};
    pthread_t rd, side;
    pthread_create(&rd, NULL, drain, &r);
    pthread_create(&side, NULL, warn_lines, NULL);
    gw_log_hold(on_held, NULL);
    char id[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(id, sizeof id, "held-%d", i);
        gw_log_access(id, "POST", "/v1/chat/completions", NULL, 200, 0, 1.25, "127.0.0.1", NULL,
                      NULL, NULL);
        if (i % 700 == 699)
            gw_log_flush();
    }
    gw_log_release();
    pthread_join(side, NULL);
    dup2(fileno(file), STDERR_FILENO); /* closes the pipe's last write end */
    pthread_join(rd, NULL);
    close(p[0]);
    int held = 0, warns = 0;
    char *save, *line = strtok_r(r.buf ? (r.buf[r.len] = 0, r.buf) : "", "\n", &save);
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        cr_assert_not_null(o, "a broken line: %.200s", line);
        const char *rid = json_string_value(json_object_get(o, "request_id"));
        held += rid && !strncmp(rid, "held-", 5);
        warns += rid && !strncmp(rid, "warn-", 5);
        json_decref(o);
    }
    cr_assert_eq(held, 3000);
    cr_assert_eq(warns, 500);
    free(r.buf);
}
