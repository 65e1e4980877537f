/* tests engine/pattern.c: strings matched or not as ECMA-262 (JSON Schema's reading: not
 * anchored where the pattern does not say so) matches them, the classes and escapes, counted
 * repetition, what a JSON string cannot carry, the refusals, and the lengths judged; and 300
 * random patterns against Python's re (tests/fixtures/engine/patterns.json, written by
 * tests/ref/make_pattern_fixtures.py). */
#include "engine.h"
#include "pattern.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

TestSuite(pattern, .timeout = 30);

static eng_pattern *make(const char *re)
{
    eng_pattern *p = NULL;
    char err[256];
    int rc = eng_pattern_compile(re, strlen(re), &p, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", re, err);
    return p;
}

/* The code points of UTF-8 text, stepped through; whether the whole matches. */
static int matches(const char *re, const char *text)
{
    eng_pattern *p = make(re);
    eng_pat_set s, n;
    eng_pat_start(p, &s);
    const unsigned char *t = (const unsigned char *)text;
    int ok = 1;
    while (*t && ok) {
        uint32_t cp = *t++;
        if (cp >= 0x80) {
            int more = cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : 1;
            cp &= 0x3F >> more;
            while (more--)
                cp = cp << 6 | (*t++ & 0x3F);
        }
        ok = eng_pat_step(p, &s, cp, &n);
        s = n;
    }
    ok = ok && eng_pat_accepting(p, &s);
    eng_pattern_destroy(p);
    return ok;
}

static void refused(const char *re, const char *want)
{
    eng_pattern *p = NULL;
    char err[256] = "";
    cr_expect_eq(eng_pattern_compile(re, strlen(re), &p, err, sizeof err), ENG_EINVAL, "%s", re);
    cr_expect_null(p);
    cr_expect(strstr(err, want) != NULL, "%s: \"%s\", expected \"%s\"", re, err, want);
}

static const struct {
    const char *re, *text;
    int match;
} cases[] = {
    {"^[A-Z]+$", "ABC", 1},
    {"^[A-Z]+$", "ABc", 0},
    {"^[A-Z]+$", "", 0},
    {"[A-Z]", "abCd", 1}, /* not anchored: contains */
    {"[A-Z]", "abcd", 0},
    {"^ab", "abzz", 1},
    {"^ab", "zab", 0},
    {"ab$", "zzab", 1},
    {"ab$", "abz", 0},
    {"^a|b$", "ax", 1},
    {"^a|b$", "xb", 1},
    {"^a|b$", "xa", 0},
    {"^(a|bc)*d?$", "abcad", 1},
    {"^(a|bc)*d?$", "abd", 0},
    {"^(?:ab){2,3}$", "abab", 1},
    {"^(?:ab){2,3}$", "ababab", 1},
    {"^(?:ab){2,3}$", "ab", 0},
    {"^(?:ab){2,3}$", "abababab", 0},
    {"^x{3}$", "xxx", 1},
    {"^x{3}$", "xx", 0},
    {"^x{2,}$", "xxxxxxx", 1},
    {"^x{2,}?$", "x", 0},
    {"^\\d{3}-\\d{4}$", "555-1234", 1},
    {"^\\d{3}-\\d{4}$", "555-12345", 0},
    {"^\\w+@\\w+\\.com$", "bo_1@mail.com", 1},
    {"^\\w+@\\w+\\.com$", "bo@mailxcom", 0},
    {"^\\S+$", "caf\xc3\xa9", 1},
    {"^\\S+$", "a b", 0},
    {"^\\S+$",
     "a\xc2\xa0"
     "b",
     0}, /* U+00A0 is white space */
    {"^\\D\\W$", "a!", 1},
    {"^\\D\\W$", "1!", 0},
    {"^[^\"]+$", "plain", 1},
    {"^[^\"]+$", "a\"b", 0},
    {"^.+$", "line", 1},
    {"^.+$", "two\nlines", 0},
    {"^[\\s\\S]+$", "two\nlines", 1},
    {"^[a-c\\d-]+$", "a-1c", 1},
    {"^[a-c\\d-]+$", "a-1d", 0},
    {"^[\\]\\\\]+$", "]\\", 1},
    {"^\\$\\d+\\.\\d{2}$", "$19.99", 1},
    {"^\\u00e9\\x41$",
     "\xc3\xa9"
     "A",
     1},
    {"^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\xa8", 1},
    {"^[\xc3\xa0-\xc3\xbf]+$", "e", 0},
    {"^\xf0\x9f\x98\x80?x$", "\xf0\x9f\x98\x80x", 1},
    {"^a{,2}$", "a{,2}", 1}, /* not a count: characters */
    {"^(?<year>\\d{4})$", "2024", 1},
    {"^[a-z]*?$", "", 1},
    {"", "anything", 1},
    {"^[^]+$", "a\nb", 1}, /* [^] is any character */
    {"^a+?b??$", "aab", 1},
    {"^(?:a{0}){3}b$", "b", 1},
};

Test(pattern, strings_matched_as_ecma_262_reads_them)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_expect_eq(matches(cases[i].re, cases[i].text), cases[i].match, "/%s/ on \"%s\"",
                     cases[i].re, cases[i].text);
}

/* Each fixture string is matched or not as Python's re decided. */
Test(pattern, random_patterns_as_python_re_reads_them)
{
    json_error_t je;
    json_t *fx = json_load_file("tests/fixtures/engine/patterns.json", 0, &je);
    cr_assert_not_null(fx, "%s", je.text);
    size_t i, j, checked = 0;
    json_t *c, *s;
    json_array_foreach(fx, i, c)
    {
        const char *re = json_string_value(json_object_get(c, "pattern"));
        json_array_foreach(json_object_get(c, "match"), j, s)
        {
            cr_expect(matches(re, json_string_value(s)), "%s should match \"%s\"", re,
                      json_string_value(s));
            checked++;
        }
        json_array_foreach(json_object_get(c, "no"), j, s)
        {
            cr_expect_not(matches(re, json_string_value(s)), "%s should not match \"%s\"", re,
                          json_string_value(s));
            checked++;
        }
    }
    cr_expect_geq(checked, 3000);
    json_decref(fx);
}

Test(pattern, what_a_json_string_cannot_carry_is_left_out)
{
    /* U+0001 only as \u0001: out of every class; \n and \t stay */
    cr_expect_not(matches("^[\\x00-\\x1f]$", "\x01"));
    cr_expect(matches("^[\\x00-\\x1f]$", "\n"));
    cr_expect(matches("^[\\x00-\\x1f]$", "\t"));
    refused("^\\x01$", "no character a JSON string can hold");
    refused("^[\\x00-\\x07]$", "no character a JSON string can hold");
}

Test(pattern, refusals)
{
    refused("(a)\\1", "backreferences");
    refused("^(?=a)", "lookaround");
    refused("^(?!a)", "lookaround");
    refused("\\bword", "word boundary");
    refused("a^b", "only at the start");
    refused("a$b", "only at the start");
    refused("^[a-", "not closed");
    refused("^(ab", "not closed");
    refused("ab)", "unbalanced");
    refused("^[z-a]$", "out of order");
    refused("^*a", "follows nothing");
    refused("^\\w{300}$", "more than 255 character positions");
    refused("^a{5,2}$", "m below n");
    refused("^a{2000}$", "count above");
    refused("\\q", "\\q is not supported");
    refused("^a**$", "follows a quantifier");
    refused("^a{2}{3}$", "follows a quantifier");
    refused("^[]a$", "no character a JSON string can hold"); /* [] matches nothing */
}

/* Counts of groups that hold no character cost nothing however nested (each copy of a group
 * is built afresh, and these would be built 10^8 times) */
Test(pattern, nested_counts_of_nothing_compile_at_once, .timeout = 5)
{
    cr_expect(matches("^(?:(?:(?:){1000}){1000}){1000}x$", "x"));
    cr_expect(matches("^(?:(?:a{0}){1000}){1000}x$", "x"));
}

Test(pattern, lengths_to_a_match)
{
    eng_pattern *p = make("^\\d{3}(-\\d{2})?$");
    eng_pat_set s, n;
    eng_pat_start(p, &s);
    /* 3 or 6 characters */
    cr_expect(eng_pat_length_ok(p, &s, 0, 0, 3));
    cr_expect_not(eng_pat_length_ok(p, &s, 0, 0, 2));
    cr_expect(eng_pat_length_ok(p, &s, 0, 6, -1));
    cr_expect_not(eng_pat_length_ok(p, &s, 0, 7, -1));
    cr_assert(eng_pat_step(p, &s, '1', &n));
    cr_expect(eng_pat_length_ok(p, &n, 1, 0, 3));
    cr_expect_not(eng_pat_length_ok(p, &n, 1, 0, 2));
    /* a code point range: some digit, no letter */
    cr_expect(eng_pat_any(p, &n, '0', '5', 2, 0, -1));
    cr_expect_not(eng_pat_any(p, &n, 'a', 'z', 2, 0, -1));
    /* a digit as the 2nd character, with at most 2 in all: no match can end so */
    cr_expect_not(eng_pat_any(p, &n, '0', '9', 2, 0, 2));
    /* the fewest characters still to write: 3 from the start, 2 after one digit, none
     * after three (a match), and no match after a letter */
    cr_expect_eq(eng_pat_need(p, &s), 3);
    cr_expect_eq(eng_pat_need(p, &n), 2);
    eng_pat_set m;
    cr_assert(eng_pat_step(p, &n, '2', &m) && eng_pat_step(p, &m, '3', &m));
    cr_expect_eq(eng_pat_need(p, &m), 0);
    cr_assert(eng_pat_step(p, &m, '-', &m));
    cr_expect_eq(eng_pat_need(p, &m), 2);
    eng_pattern_destroy(p);
    p = make("a[0-9]*$"); /* not anchored at the start: any character may come first */
    eng_pat_start(p, &s);
    cr_assert(eng_pat_step(p, &s, 'z', &n));
    cr_expect_eq(eng_pat_need(p, &n), 1);
    eng_pattern_destroy(p);
    p = make("^ab$");
    eng_pat_start(p, &s);
    cr_assert(eng_pat_step(p, &s, 'a', &n) && eng_pat_step(p, &n, 'b', &n));
    cr_expect_eq(eng_pat_need(p, &n), 0);
    cr_expect_not(eng_pat_step(p, &n, 'c', &m));
    eng_pattern_destroy(p);
    /* a star: no longest */
    p = make("^a(bc)*$");
    eng_pat_start(p, &s);
    cr_expect(eng_pat_length_ok(p, &s, 0, 1000, -1));
    eng_pattern_destroy(p);
    /* judged by the positions the next character takes: 1 or 4 characters, not 2 or 3 */
    p = make("^(a|bbbb)$");
    eng_pat_start(p, &s);
    cr_expect(eng_pat_length_ok(p, &s, 0, 1, 1));
    cr_expect(eng_pat_length_ok(p, &s, 0, 4, 4));
    cr_expect_not(eng_pat_length_ok(p, &s, 0, 2, 3));
    cr_expect_not(eng_pat_any(p, &s, 'b', 'b', 1, 2, 3));
    eng_pattern_destroy(p);
}
