/* gateway/openai_tok.c on vocabulary files written by the test: decoding, bytes that do not
 * form UTF-8, ids outside the vocabulary, and files that are not tiktoken's. */
#include "openai_tok.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void write_vocab(const char *text)
{
    snprintf(path, sizeof path, "/tmp/otok-%d.tiktoken", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

static void cleanup(void)
{
    unlink(path);
}

TestSuite(openai_tok, .fini = cleanup);

/* "SGk=" Hi, "IHRoZXJl" " there", "w6k=" é (C3 A9), "ww==" C3 alone, "qQ==" A9 alone */
#define VOCAB "SGk= 0\nIHRoZXJl 1\nw6k= 2\nww== 3\nqQ== 4\n"

static char *decode(const gw_otok *t, const char *ids_json, int *rc, size_t *bad)
{
    json_t *ids = json_loads(ids_json, 0, NULL);
    cr_assert(ids);
    char *text = NULL;
    size_t len = 0;
    *rc = gw_otok_decode(t, ids, &text, &len, bad);
    json_decref(ids);
    if (text)
        cr_assert_eq(strlen(text), len);
    return text;
}

Test(openai_tok, decodes_ids_to_their_bytes)
{
    write_vocab(VOCAB);
    gw_otok *t;
    char err[256];
    cr_assert_eq(gw_otok_load(path, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gw_otok_size(t), 5);
    int rc;
    size_t bad;
    char *s = decode(t, "[0, 1, 2]", &rc, &bad);
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(s, "Hi there\xc3\xa9");
    free(s);
    /* a character split over two ids is whole again; a half of one alone is left out */
    s = decode(t, "[3, 4, 0, 3]", &rc, &bad);
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(s, "\xc3\xa9Hi");
    free(s);
    s = decode(t, "[4, 1]", &rc, &bad);
    cr_assert_str_eq(s, " there");
    free(s);
    s = decode(t, "[0, 5]", &rc, &bad);
    cr_assert(rc == -1 && bad == 1 && !s);
    s = decode(t, "[-1]", &rc, &bad);
    cr_assert(rc == -1 && bad == 0 && !s);
    s = decode(t, "[0, \"1\"]", &rc, &bad);
    cr_assert(rc == -1 && bad == 1 && !s);
    gw_otok_destroy(t);
}

Test(openai_tok, a_file_that_is_not_a_vocabulary_is_an_error_naming_its_line)
{
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"SGk= 0\nIHRoZXJl 2\n", ":2:"},        /* a rank skipped */
        {"SGk= 0\nIHRoZXJl\n", ":2:"},          /* no rank */
        {"SGk= 0\nS*k= 1\n", ":2: the token is not base64"},
        {"SGk 0\n", ":1: the token is not base64"}, /* not padded */
        {"", "no tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_vocab(bad[i].text);
        gw_otok *t = (gw_otok *)1;
        char err[256];
        cr_assert_eq(gw_otok_load(path, &t, err, sizeof err), -1, "case %zu loaded", i);
        cr_assert_null(t);
        cr_assert(strstr(err, bad[i].says), "case %zu: %s", i, err);
    }
    char err[256];
    gw_otok *t;
    cr_assert_eq(gw_otok_load("/nonexistent/x.tiktoken", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "No such file"), "%s", err);
}
