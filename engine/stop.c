#include "stop.h"

#include "engine.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct eng_stop {
    char *stop[ENG_STOP_MAX];
    size_t stop_len[ENG_STOP_MAX];
    int n_stop;

    /* buf[0, sent) went out with the last call and is dropped at the next; buf[sent, len)
     * is held: whole characters that contain no match. */
    char *buf;
    size_t len, cap, sent;
    size_t seen; /* the cleaned text's bytes so far, sent or held */

    /* an unfinished UTF-8 sequence: its bytes so far, how many more it needs, and the range
     * its next byte must fall in */
    unsigned char pend[4];
    int n_pend, need;
    unsigned char lo, hi;

    int matched; /* index of the stop string that matched, or -1 */
    int flushed;
};

static const char replacement[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */

/* For a byte that starts a character: how many continuation bytes follow, and the range of
 * the first of them (Unicode table 3-7, "Well-Formed UTF-8 Byte Sequences"); -1 for a byte
 * that cannot start one. */
static int utf8_lead(unsigned char b, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 0;
    if (b >= 0xC2 && b <= 0xDF) return 1;
    if (b == 0xE0) *lo = 0xA0;
    if (b == 0xED) *hi = 0x9F; /* no surrogates */
    if (b >= 0xE0 && b <= 0xEF) return 2;
    if (b == 0xF0) *lo = 0x90;
    if (b == 0xF4) *hi = 0x8F; /* nothing past U+10FFFF */
    if (b >= 0xF0 && b <= 0xF4) return 3;
    return -1;
}

static int utf8_valid(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char lo, hi;
        int need = utf8_lead(p[i++], &lo, &hi);
        if (need < 0) return 0;
        for (; need > 0; need--, i++) {
            if (i == n || p[i] < lo || p[i] > hi) return 0;
            lo = 0x80;
            hi = 0xBF;
        }
    }
    return 1;
}

int eng_stop_create(const char *const *stops, int n_stops, eng_stop **out)
{
    if (!out) return ENG_EINVAL;
    *out = NULL;
    if (n_stops < 0 || n_stops > ENG_STOP_MAX || (n_stops > 0 && !stops)) return ENG_EINVAL;
    for (int i = 0; i < n_stops; i++)
        if (!stops[i] || !stops[i][0] ||
            !utf8_valid((const unsigned char *)stops[i], strlen(stops[i])))
            return ENG_EINVAL;
    eng_stop *s = calloc(1, sizeof *s);
    if (!s) goto fail;
    s->cap = 64;
    s->buf = malloc(s->cap);
    if (!s->buf) goto fail;
    for (int i = 0; i < n_stops; i++) {
        s->stop_len[i] = strlen(stops[i]);
        s->stop[i] = malloc(s->stop_len[i] + 1);
        if (!s->stop[i]) goto fail;
        memcpy(s->stop[i], stops[i], s->stop_len[i] + 1);
        s->n_stop = i + 1;
    }
    eng_stop_reset(s);
    *out = s;
    return 0;
fail:
    eng_stop_destroy(s);
    return ENG_ENOMEM;
}

void eng_stop_destroy(eng_stop *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_stop; i++)
        free(s->stop[i]);
    free(s->buf);
    free(s);
}

void eng_stop_reset(eng_stop *s)
{
    if (!s) return;
    s->len = s->sent = s->seen = 0;
    s->n_pend = s->need = 0;
    s->matched = -1;
    s->flushed = 0;
}

int eng_stop_matched(const eng_stop *s)
{
    return s ? s->matched : -1;
}

/* Drops what the last call emitted, then makes room for `more` bytes. */
static int make_room(eng_stop *s, size_t more)
{
    memmove(s->buf, s->buf + s->sent, s->len - s->sent);
    s->len -= s->sent;
    s->sent = 0;
    if (more <= s->cap - s->len) return 0;
    if (more > SIZE_MAX / 2 - s->len) return ENG_ENOMEM;
    size_t cap = s->cap;
    while (cap - s->len < more)
        cap *= 2;
    char *buf = realloc(s->buf, cap);
    if (!buf) return ENG_ENOMEM;
    s->buf = buf;
    s->cap = cap;
    return 0;
}

static void put(eng_stop *s, const void *p, size_t n)
{
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->seen += n;
}

/* Appends the characters that p[0, n) completes, cleaned as stop.h says; at most
 * 3 * (n + n_pend) bytes. */
static void decode(eng_stop *s, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char b = p[i];
        if (s->n_pend) {
            if (b >= s->lo && b <= s->hi) {
                s->pend[s->n_pend++] = b;
                s->lo = 0x80;
                s->hi = 0xBF;
                if (--s->need == 0) {
                    put(s, s->pend, (size_t)s->n_pend);
                    s->n_pend = 0;
                }
                continue;
            }
            put(s, replacement, sizeof replacement); /* the subpart ends before b */
            s->n_pend = 0;
        }
        int need = utf8_lead(b, &s->lo, &s->hi);
        if (need == 0) {
            s->buf[s->len++] = (char)b;
            s->seen++;
        } else if (need < 0) {
            put(s, replacement, sizeof replacement);
        } else {
            s->pend[0] = b;
            s->n_pend = 1;
            s->need = need;
        }
    }
}

/* The held text has grown: a match ends the text; otherwise everything but the longest
 * tail that could still grow into a match goes out (all of it when final). The held text
 * had no match before, so a match found now is the first. */
static int scan(eng_stop *s, int final, const char **text, size_t *n_text)
{
    size_t best_end = SIZE_MAX, best_start = 0;
    for (int i = 0; i < s->n_stop; i++) {
        /* the first occurrence of a string is also the one that ends first */
        const char *m = memmem(s->buf, s->len, s->stop[i], s->stop_len[i]);
        if (!m) continue;
        size_t start = (size_t)(m - s->buf), end = start + s->stop_len[i];
        if (end < best_end || (end == best_end && start < best_start)) {
            best_end = end;
            best_start = start;
            s->matched = i;
        }
    }
    *text = s->buf;
    if (s->matched >= 0) {
        *n_text = best_start;
        return ENG_STOP_MATCHED;
    }
    size_t hold = 0;
    for (int i = 0; i < s->n_stop && !final; i++) {
        size_t k = s->stop_len[i] - 1 < s->len ? s->stop_len[i] - 1 : s->len;
        for (; k > hold; k--)
            if (memcmp(s->buf + s->len - k, s->stop[i], k) == 0) break;
        hold = k > hold ? k : hold;
    }
    /* a held tail starts with a stop string's first byte, so on a character boundary */
    *n_text = s->sent = s->len - hold;
    return 0;
}

int eng_stop_feed(eng_stop *s, const char *piece, size_t len, const char **text, size_t *n_text)
{
    if (!s || !text || !n_text || (!piece && len)) return ENG_EINVAL;
    *text = s->buf;
    *n_text = 0;
    if (s->matched >= 0) return ENG_STOP_MATCHED;
    if (s->flushed) return ENG_EINVAL;
    if (len > SIZE_MAX / 4 - 8) return ENG_ENOMEM;
    if (make_room(s, 3 * (len + 4))) return ENG_ENOMEM;
    decode(s, (const unsigned char *)piece, len);
    return scan(s, 0, text, n_text);
}

int eng_stop_flush(eng_stop *s, const char **text, size_t *n_text)
{
    if (!s || !text || !n_text) return ENG_EINVAL;
    *text = s->buf;
    *n_text = 0;
    if (s->matched >= 0) return ENG_STOP_MATCHED;
    if (s->flushed) return 0;
    if (make_room(s, sizeof replacement)) return ENG_ENOMEM;
    if (s->n_pend) put(s, replacement, sizeof replacement);
    s->n_pend = 0;
    s->flushed = 1;
    return scan(s, 1, text, n_text);
}

void eng_stop_disarm(eng_stop *s)
{
    for (int i = 0; i < s->n_stop; i++) {
        free(s->stop[i]);
        s->stop[i] = NULL;
    }
    s->n_stop = 0;
}

size_t eng_stop_seen(const eng_stop *s)
{
    return s ? s->seen : 0;
}
