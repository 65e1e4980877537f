/* tests embedder/wordpiece.c's emb_wp_encode_ends() on the default model's vocabulary: a
 * text that fits is encoded as emb_wp_encode() encodes it; a longer one keeps its first
 * and its last pieces, which are those of the whole text's encoding (emb_wp_encode() with
 * room for all of it), whatever its script. */
#include "embedder.h"
#include "wordpiece.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB "models/all-minilm-l6-v2/vocab.txt"
#define MAX 256 /* the model's max_seq_length */

static emb_wp *wp;

static void setup(void)
{
    static const struct emb_wp_options bert = {1, 1, 1, 100};
    char err[256];
    cr_assert_eq(emb_wp_create(VOCAB, &bert, &wp, err, sizeof err), 0, "%s", err);
}

static void teardown(void)
{
    emb_wp_destroy(wp);
}

TestSuite(wordpiece, .init = setup, .fini = teardown);

/* text's whole encoding, [CLS] pieces [SEP], in ids[cap]; the count */
static int whole(const char *text, int32_t *ids, int cap)
{
    int n = emb_wp_encode(wp, text, strlen(text), ids, cap);
    cr_assert(n > 0 && n < cap, "room for the whole text");
    return n;
}

/* encode_ends(text) is [CLS], the whole's first pieces, its last (MAX - 2) / 2, [SEP] */
static void check_ends(const char *text)
{
    static int32_t all[1 << 16];
    int32_t got[MAX];
    const int n = whole(text, all, 1 << 16), tail = (MAX - 2) / 2, head = MAX - 2 - tail;
    cr_assert_gt(n, MAX, "the text must be too long for the model (%d pieces)", n);
    cr_assert_eq(emb_wp_encode_ends(wp, text, strlen(text), got, MAX), MAX);
    cr_assert_eq(got[0], all[0]);
    for (int i = 1; i <= head; i++)
        cr_assert_eq(got[i], all[i], "head piece %d", i);
    for (int i = 0; i < tail; i++)
        cr_assert_eq(got[1 + head + i], all[n - 1 - tail + i], "tail piece %d", i);
    cr_assert_eq(got[MAX - 1], all[n - 1], "[SEP]");
}

Test(wordpiece, a_text_that_fits_is_encoded_as_it_always_was)
{
    const char *texts[] = {"", "What is the capital of France?",
                           "Résumé: naïve café, 東京 and 🙂 emoji."};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        int32_t a[MAX], b[MAX];
        int n = emb_wp_encode(wp, texts[t], strlen(texts[t]), a, MAX);
        cr_assert_eq(emb_wp_encode_ends(wp, texts[t], strlen(texts[t]), b, MAX), n);
        cr_assert_arr_eq(a, b, sizeof(int32_t) * (size_t)n);
    }
    /* exactly full, with or without white space and characters that make no piece after:
     * still the plain encoding */
    const char *after[] = {"", " ", "\n\n  ", "\xe2\x80\x8b\xe2\x80\x8b", "\xff\xfe"};
    for (size_t t = 0; t < sizeof after / sizeof *after; t++) {
        char text[4096] = "";
        for (int i = 0; i < MAX - 2; i++)
            strcat(text, "cat ");
        strcat(text, after[t]);
        int32_t a[MAX], b[MAX];
        int n = emb_wp_encode(wp, text, strlen(text), a, MAX);
        cr_assert_eq(n, MAX);
        cr_assert_eq(emb_wp_encode_ends(wp, text, strlen(text), b, MAX), MAX, "after %zu", t);
        cr_assert_arr_eq(a, b, sizeof a, "after %zu", t);
    }
}

Test(wordpiece, a_long_text_keeps_its_question_at_the_end)
{
    static char text[1 << 15];
    text[0] = 0;
    strcat(text, "Context information is below.\n---------------------\n");
    for (int i = 0; i < 60; i++) {
        char s[128];
        snprintf(s, sizeof s, "Sentence number %d of the retrieved document says little. ", i);
        strcat(text, s);
    }
    strcat(text, "\n---------------------\nQuery: Who wrote the unusually specific report?\n"
                 "Answer: ");
    check_ends(text);
    /* the question survives the cut */
    int32_t got[MAX];
    emb_wp_encode_ends(wp, text, strlen(text), got, MAX);
    int32_t id = emb_wp_id(wp, "unusually");
    int found = 0;
    for (int i = MAX / 2; i < MAX; i++)
        found |= got[i] == id;
    cr_assert(found, "the question's words are among the last pieces");
}

Test(wordpiece, just_too_long_and_without_spaces_at_the_end)
{
    static char text[1 << 15];
    /* a few pieces past the limit: the head and the tail meet, nothing repeated */
    text[0] = 0;
    for (int i = 0; i < MAX + 6; i++)
        strcat(text, i % 2 ? "dog " : "house ");
    check_ends(text);
    /* a long run of CJK ideographs: no space to start the tail at, a character boundary */
    text[0] = 0;
    for (int i = 0; i < 600; i++)
        strcat(text, i % 3 ? "東" : "京");
    check_ends(text);
    /* ... and ending with a line break, its only white space */
    strcat(text, "\n");
    check_ends(text);
    /* invalid UTF-8 bytes in the tail's window are dropped, as everywhere */
    size_t len = strlen(text);
    text[len - 40] = (char)0xff;
    text[len - 41] = (char)0x80;
    int32_t got[MAX];
    cr_assert_eq(emb_wp_encode_ends(wp, text, strlen(text), got, MAX), MAX);
}
