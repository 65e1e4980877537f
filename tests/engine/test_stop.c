/* tests engine/stop.c: what goes out after each piece and in all (stop strings across
 * pieces, several in one piece, overlapping prefixes, none at all, the flush), UTF-8 held
 * whole and cleaned, and a randomized comparison with a byte-at-a-time reference written
 * here, for every way of cutting the text. */
#include "engine.h"
#include "stop.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FFFD "\xEF\xBF\xBD"

static eng_stop *make(const char *const *stops, int n)
{
    eng_stop *s = NULL;
    cr_assert_eq(eng_stop_create(stops, n, &s), 0);
    cr_assert_not_null(s);
    return s;
}

struct run {
    char out[512]; /* everything emitted, NUL-terminated */
    size_t n_out;
    int rc;      /* of the last call: 0 or ENG_STOP_MATCHED */
    int matched; /* eng_stop_matched() */
};

static void emit(struct run *r, const char *text, size_t n)
{
    cr_assert_lt(r->n_out + n, sizeof r->out);
    memcpy(r->out + r->n_out, text, n);
    r->n_out += n;
    r->out[r->n_out] = '\0';
}

/* Feeds one piece; returns the rc and appends what came out. */
static int feed(eng_stop *s, struct run *r, const char *piece, size_t len)
{
    const char *text;
    size_t n;
    r->rc = eng_stop_feed(s, piece, len, &text, &n);
    cr_assert(r->rc == 0 || r->rc == ENG_STOP_MATCHED, "rc %d", r->rc);
    emit(r, text, n);
    return r->rc;
}

static int flush(eng_stop *s, struct run *r)
{
    const char *text;
    size_t n;
    r->rc = eng_stop_flush(s, &text, &n);
    cr_assert(r->rc == 0 || r->rc == ENG_STOP_MATCHED, "rc %d", r->rc);
    emit(r, text, n);
    return r->rc;
}

/* Feeds the NULL-terminated pieces (stopping at a match), then flushes. */
static struct run run(const char *const *stops, int n_stops, const char *const *pieces)
{
    struct run r = {0};
    eng_stop *s = make(stops, n_stops);
    int rc = 0;
    for (int i = 0; pieces[i] && rc == 0; i++)
        rc = feed(s, &r, pieces[i], strlen(pieces[i]));
    if (rc == 0) flush(s, &r);
    r.matched = eng_stop_matched(s);
    eng_stop_destroy(s);
    return r;
}

#define STOPS(...) ((const char *const[]){__VA_ARGS__})
#define PIECES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Feeds one piece and checks exactly what came out of it. */
#define STEP(s, r, piece, want, want_rc)                                                           \
    do {                                                                                           \
        size_t before = (r)->n_out;                                                                \
        cr_assert_eq(feed(s, r, piece, strlen(piece)), want_rc, "piece \"%s\"", piece);            \
        cr_assert_eq((r)->n_out - before, strlen(want), "piece \"%s\": got \"%s\"", piece,         \
                     (r)->out + before);                                                           \
        cr_assert_eq(memcmp((r)->out + before, want, strlen(want)), 0, "piece \"%s\"", piece);     \
    } while (0)

Test(stop, invalid_arguments)
{
    eng_stop *s = (eng_stop *)STOPS("x"); /* must come back NULL */
    cr_assert_eq(eng_stop_create(STOPS("a", "b", "c", "d", "e"), 5, &s), ENG_EINVAL);
    cr_assert_null(s);
    cr_assert_eq(eng_stop_create(STOPS("a"), -1, &s), ENG_EINVAL);
    cr_assert_eq(eng_stop_create(NULL, 1, &s), ENG_EINVAL);
    cr_assert_eq(eng_stop_create(STOPS("a", ""), 2, &s), ENG_EINVAL);
    cr_assert_eq(eng_stop_create(STOPS("a", NULL), 2, &s), ENG_EINVAL);
    cr_assert_eq(eng_stop_create(STOPS("ab\xC3"), 1, &s), ENG_EINVAL);       /* truncated */
    cr_assert_eq(eng_stop_create(STOPS("\xED\xA0\x80"), 1, &s), ENG_EINVAL); /* surrogate */
    cr_assert_eq(eng_stop_create(STOPS("\xC0\xAF"), 1, &s), ENG_EINVAL);     /* overlong */
    cr_assert_eq(eng_stop_create(STOPS("a"), 1, NULL), ENG_EINVAL);
    cr_assert_null(s);

    s = make(STOPS("a", "b", "c", "\xF0\x9F\x98\x80"), 4);
    const char *text;
    size_t n;
    cr_assert_eq(eng_stop_feed(s, NULL, 1, &text, &n), ENG_EINVAL);
    cr_assert_eq(eng_stop_feed(s, NULL, 0, &text, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(eng_stop_feed(NULL, "x", 1, &text, &n), ENG_EINVAL);
    cr_assert_eq(eng_stop_flush(s, &text, &n), 0);
    cr_assert_eq(eng_stop_feed(s, "x", 1, &text, &n), ENG_EINVAL, "fed after the flush");
    cr_assert_eq(eng_stop_flush(s, &text, &n), 0);
    cr_assert_eq(n, 0);
    eng_stop_destroy(s);
    eng_stop_destroy(NULL);
}

Test(stop, no_stop_strings_pass_through)
{
    struct run r = {0};
    eng_stop *s = make(NULL, 0);
    STEP(s, &r, "Hello", "Hello", 0);
    STEP(s, &r, ", world", ", world", 0);
    STEP(s, &r, "", "", 0);
    cr_assert_eq(flush(s, &r), 0);
    cr_assert_str_eq(r.out, "Hello, world");
    cr_assert_eq(eng_stop_matched(s), -1);
    eng_stop_destroy(s);
}

Test(stop, held_only_while_it_could_match)
{
    struct run r = {0};
    eng_stop *s = make(STOPS("xyz"), 1);
    STEP(s, &r, "hello", "hello", 0); /* nothing here can start "xyz" */
    STEP(s, &r, "ex", "e", 0);        /* "x" might */
    STEP(s, &r, "y", "", 0);          /* "xy" might */
    STEP(s, &r, "a", "xya", 0);       /* "xya" cannot */
    STEP(s, &r, "xx", "x", 0);        /* the second "x" might */
    cr_assert_eq(flush(s, &r), 0);    /* the end: it cannot any more */
    cr_assert_str_eq(r.out, "helloexyaxx");
    eng_stop_destroy(s);
}

/* Disarmed (a function call began): what was held goes out, nothing matches any more. */
Test(stop, disarmed)
{
    struct run r = {0};
    eng_stop *s = make(STOPS("xyz", "}"), 2);
    STEP(s, &r, " x", " ", 0); /* "x" might begin "xyz" */
    eng_stop_disarm(s);
    STEP(s, &r, "{", "x{", 0);
    STEP(s, &r, "}xyz", "}xyz", 0);
    cr_assert_eq(flush(s, &r), 0);
    cr_assert_str_eq(r.out, " x{}xyz");
    cr_assert_eq(eng_stop_matched(s), -1);
    eng_stop_reset(s);
    STEP(s, &r, "xyz}", "xyz}", 0); /* and after a reset */
    eng_stop_destroy(s);
}

Test(stop, match_across_pieces)
{
    struct run r = {0};
    eng_stop *s = make(STOPS("###"), 1);
    STEP(s, &r, "ab#", "ab", 0);
    STEP(s, &r, "#", "", 0);
    STEP(s, &r, "#cd", "", ENG_STOP_MATCHED);
    cr_assert_eq(eng_stop_matched(s), 0);
    STEP(s, &r, "more", "", ENG_STOP_MATCHED); /* after the match: nothing, ever */
    cr_assert_eq(flush(s, &r), ENG_STOP_MATCHED);
    cr_assert_str_eq(r.out, "ab");
    eng_stop_destroy(s);

    struct run q =
        run(STOPS("</answer>"), 1, PIECES("The answer is 4", "2.</", "ans", "wer>", "x"));
    cr_assert_str_eq(q.out, "The answer is 42.");
    cr_assert_eq(q.rc, ENG_STOP_MATCHED);
}

Test(stop, several_candidates_in_one_piece)
{
    struct run r = run(STOPS("ab", "cd"), 2, PIECES("xaycdab"));
    cr_assert_str_eq(r.out, "xay");
    cr_assert_eq(r.matched, 1);

    /* the match that ends first wins, not the one that starts first or is listed first */
    r = run(STOPS("abcd", "bc"), 2, PIECES("xabcd"));
    cr_assert_str_eq(r.out, "xa");
    cr_assert_eq(r.matched, 1);
    r = run(STOPS("abcd", "bc"), 2, PIECES("x", "a", "b", "c", "d"));
    cr_assert_str_eq(r.out, "xa");
    cr_assert_eq(r.matched, 1);

    /* ending on the same byte: the one that starts first */
    r = run(STOPS("b", "ab"), 2, PIECES("xab"));
    cr_assert_str_eq(r.out, "x");
    cr_assert_eq(r.matched, 1);
}

Test(stop, overlapping_prefixes)
{
    struct run r = {0};
    eng_stop *s = make(STOPS("aab"), 1);
    STEP(s, &r, "a", "", 0);
    STEP(s, &r, "a", "", 0);
    STEP(s, &r, "a", "a", 0); /* "aaa": only the last "aa" can still start "aab" */
    STEP(s, &r, "b", "", ENG_STOP_MATCHED);
    cr_assert_str_eq(r.out, "a");
    eng_stop_destroy(s);

    r = run(STOPS("aab"), 1, PIECES("aaab"));
    cr_assert_str_eq(r.out, "a");
    r = run(STOPS("abab"), 1, PIECES("aba", "bab"));
    cr_assert_str_eq(r.out, "");
    r = run(STOPS("abac"), 1, PIECES("ab", "ab", "ac!"));
    cr_assert_str_eq(r.out, "ab");
    r = run(STOPS("aab"), 1, PIECES("aa", "a", "a"));
    cr_assert_str_eq(r.out, "aaaa"); /* never matched: the flush gives back the held tail */
    cr_assert_eq(r.rc, 0);
    cr_assert_eq(r.matched, -1);
}

Test(stop, flush_emits_held_tail)
{
    struct run r = {0};
    eng_stop *s = make(STOPS("end", "stop"), 2);
    STEP(s, &r, "the en", "the ", 0);
    STEP(s, &r, "d", "", ENG_STOP_MATCHED);
    cr_assert_str_eq(r.out, "the ");
    eng_stop_reset(s); /* a new text, the same stop strings */
    memset(&r, 0, sizeof r);
    STEP(s, &r, "we st", "we ", 0);
    STEP(s, &r, "o", "", 0);
    cr_assert_eq(flush(s, &r), 0);
    cr_assert_str_eq(r.out, "we sto");
    cr_assert_eq(eng_stop_matched(s), -1);
    eng_stop_destroy(s);
}

Test(stop, utf8_held_until_whole)
{
    struct run r = {0};
    eng_stop *s = make(NULL, 0);
    STEP(s, &r, "caf\xC3", "caf", 0); /* é = C3 A9 */
    STEP(s, &r, "\xA9!", "\xC3\xA9!", 0);
    STEP(s, &r, "\xF0", "", 0); /* 😀 = F0 9F 98 80, a byte at a time */
    STEP(s, &r, "\x9F", "", 0);
    STEP(s, &r, "\x98", "", 0);
    STEP(s, &r, "\x80", "\xF0\x9F\x98\x80", 0);
    STEP(s, &r, "\xE2\x82", "", 0); /* € = E2 82 AC */
    STEP(s, &r, "\xAC", "\xE2\x82\xAC", 0);
    cr_assert_eq(flush(s, &r), 0);
    cr_assert_str_eq(r.out, "caf\xC3\xA9!\xF0\x9F\x98\x80\xE2\x82\xAC");
    eng_stop_destroy(s);

    /* a stop string that shares a lead byte with the text */
    struct run q = run(STOPS("\xC3\xA8"), 1, PIECES("\xC3", "\xA9", "\xC3", "\xA8", "x"));
    cr_assert_str_eq(q.out, "\xC3\xA9");
    cr_assert_eq(q.rc, ENG_STOP_MATCHED);
}

Test(stop, utf8_cleaned)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"a\xFF"
         "b",
         "a" FFFD "b"}, /* a byte that starts nothing */
        {"\x80", FFFD}, /* a stray continuation byte */
        {"\xE2\x82"
         "A",
         FFFD "A"},                                /* truncated: one U+FFFD for both */
        {"\xC0\xAF", FFFD FFFD},                   /* overlong: C0 can start nothing */
        {"\xE0\x80\xAF", FFFD FFFD FFFD},          /* overlong: E0 needs A0..BF next */
        {"\xED\xA0\x80", FFFD FFFD FFFD},          /* a surrogate */
        {"\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD}, /* past U+10FFFF */
        {"\xF0\x9F\x98", FFFD},                    /* still open at the end */
        {"\xF0\x9F\x98\xF0\x9F\x98\x80", FFFD "\xF0\x9F\x98\x80"}, /* cut by a new start */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct run whole = run(NULL, 0, PIECES(cases[i].in));
        cr_assert_str_eq(whole.out, cases[i].want, "case %zu", i);
        struct run bytes = {0}; /* the same a byte at a time */
        eng_stop *s = make(NULL, 0);
        for (size_t j = 0; cases[i].in[j]; j++)
            feed(s, &bytes, cases[i].in + j, 1);
        flush(s, &bytes);
        cr_assert_str_eq(bytes.out, cases[i].want, "case %zu, byte by byte", i);
        eng_stop_destroy(s);
    }
    /* a stop string is matched against the cleaned text */
    struct run r = run(STOPS("x" FFFD), 1,
                       PIECES("ax\xFF"
                              "b"));
    cr_assert_str_eq(r.out, "a");
    r = run(STOPS("x" FFFD), 1, PIECES("ax\xE2\x82"));
    cr_assert_str_eq(r.out, "a"); /* the U+FFFD of the flush completes the match */
    cr_assert_eq(r.rc, ENG_STOP_MATCHED);
}

/* eng_stop_seen: where the text fed so far ends in the emitted text's terms, held or not:
 * an ill-formed byte as its U+FFFD, an open sequence once it ends */
Test(stop, seen_counts_the_cleaned_text)
{
    eng_stop *s = make(STOPS("zz"), 1);
    struct run r = {0};
    feed(s, &r, "a\xFF", 2);
    cr_expect_eq(eng_stop_seen(s), 4);
    feed(s, &r, "z", 1); /* held: it may begin the stop string */
    cr_expect_eq(eng_stop_seen(s), 5);
    cr_expect_eq(r.n_out, 4);
    feed(s, &r, "\xE2\x82", 2); /* open */
    cr_expect_eq(eng_stop_seen(s), 5);
    feed(s, &r, "\xAC", 1); /* the euro sign */
    cr_expect_eq(eng_stop_seen(s), 8);
    feed(s, &r, "\xF0", 1);
    flush(s, &r); /* still open at the end: U+FFFD */
    cr_expect_eq(eng_stop_seen(s), 11);
    cr_expect_eq(r.n_out, 11);
    eng_stop_reset(s);
    cr_expect_eq(eng_stop_seen(s), 0);
    eng_stop_destroy(s);
}

Test(stop, long_pieces)
{
    static char big[300];
    memset(big, 'z', sizeof big - 1);
    struct run r = run(STOPS("zzzy"), 1, PIECES(big, "zzzy"));
    cr_assert_eq(r.n_out, sizeof big - 1);
    cr_assert_eq(r.rc, ENG_STOP_MATCHED);
}

/* ---- randomized, against a reference ---- */

/* The characters the random texts are made of: short ASCII ones that stop strings share,
 * and multi-byte ones, so that pieces cut characters. */
static const char *const alphabet[] = {"a", "b", "c", "\xC3\xA9", "\xE2\x82\xAC"};

static size_t random_text(char *buf, int chars, unsigned *seed)
{
    size_t n = 0;
    for (int i = 0; i < chars; i++) {
        const char *ch = alphabet[rand_r(seed) % 5];
        memcpy(buf + n, ch, strlen(ch));
        n += strlen(ch);
    }
    buf[n] = '\0';
    return n;
}

/* Byte-at-a-time semantics, spelled out: the first byte at which some stop string ends;
 * of those ending there, the longest. Returns how much of text goes out. */
static size_t ref_output(const char *text, size_t n, const char *const *stops, int n_stops)
{
    for (size_t end = 1; end <= n; end++) {
        size_t best = SIZE_MAX;
        for (int i = 0; i < n_stops; i++) {
            size_t k = strlen(stops[i]);
            if (k <= end && memcmp(text + end - k, stops[i], k) == 0 && end - k < best)
                best = end - k;
        }
        if (best != SIZE_MAX) return best;
    }
    return n;
}

/* What must be out once text[0, n) has arrived without a match: all of it but an
 * incomplete character at the end and the longest tail that begins some stop string. */
static size_t ref_emitted(const char *text, size_t n, const char *const *stops, int n_stops)
{
    size_t whole = n; /* back over continuation bytes to a lead byte; drop it if unfinished */
    size_t lead = n;
    while (lead > 0 && ((unsigned char)text[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead > 0 && (unsigned char)text[lead - 1] >= 0xC0) {
        unsigned char b = (unsigned char)text[lead - 1];
        size_t want = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        if (n - (lead - 1) < want) whole = lead - 1;
    }
    size_t hold = 0;
    for (int i = 0; i < n_stops; i++)
        for (size_t k = strlen(stops[i]) - 1; k > hold; k--)
            if (k <= whole && memcmp(text + whole - k, stops[i], k) == 0) {
                hold = k;
                break;
            }
    return whole - hold;
}

Test(stop, random_against_reference)
{
    static const char *const stop_sets[][ENG_STOP_MAX] = {
        {"ab"},
        {"aab", "ba"},
        {"abcab", "bca", "cc"},
        {"\xC3\xA9"
         "a",
         "a\xE2\x82\xAC", "bb", "cab"},
        {"abab", "baba", "\xE2\x82\xAC\xE2\x82\xAC", "ca\xC3\xA9"},
    };
    static const int n_stop_sets[] = {1, 2, 3, 4, 4};
    unsigned seed = 12345;
    long checks = 0, stopped = 0;
    for (int round = 0; round < 3000; round++) {
        int set = round % 5;
        const char *const *stops = stop_sets[set];
        int n_stops = n_stop_sets[set];
        char text[256];
        size_t n = random_text(text, 1 + rand_r(&seed) % 40, &seed);
        size_t want = ref_output(text, n, stops, n_stops);

        struct run r = {0};
        eng_stop *s = make(stops, n_stops);
        size_t at = 0;
        int rc = 0;
        while (at < n && rc == 0) { /* random cuts, inside characters too */
            size_t len = 1 + (size_t)(rand_r(&seed) % 6);
            len = len < n - at ? len : n - at;
            rc = feed(s, &r, text + at, len);
            at += len;
            if (rc == 0) { /* everything that can go out has */
                cr_assert_eq(r.n_out, ref_emitted(text, at, stops, n_stops), "round %d, \"%.*s\"",
                             round, (int)at, text);
                checks++;
            }
        }
        if (rc == 0) rc = flush(s, &r);
        cr_assert_eq(r.n_out, want, "round %d, text \"%s\": out \"%s\"", round, text, r.out);
        cr_assert_eq(memcmp(r.out, text, want), 0, "round %d", round);
        cr_assert_eq(rc == ENG_STOP_MATCHED, want < n, "round %d", round);
        stopped += rc == ENG_STOP_MATCHED;
        eng_stop_destroy(s);
    }
    printf("stop: 3000 random texts (%ld stopped), %ld intermediate outputs checked\n", stopped,
           checks);
}
