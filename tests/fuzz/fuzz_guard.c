/* libFuzzer target: the semantic cache's guard on two questions from a request and a stored
 * entry (the input up to its first NUL byte, and the rest): every rule, the close call, the
 * same-words check, and the split of a template into the sentences that differ, never a
 * crash, an out-of-bounds access or a leak, whatever the bytes (invalid UTF-8, thousands of
 * sentences, quotes never closed, a colon at the end). The guard reads misspellings with a
 * short list of known words, as the server does with its long ones. */
#include "guard.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char path[] = "/tmp/fuzz-guard-words-XXXXXX", err[256];
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) return 0;
    fputs("change\nwrite\nboil\nbroil\ndesert\ndessert\ntraveled\ntravelled\nhow\nwhat\n"
          "the\nlist\npython\nreverse\nbest\nway\n##ing\n[CLS]\n",
          f);
    fclose(f);
    if (gw_guard_known_words(path, err, sizeof err)) fprintf(stderr, "%s\n", err);
    unlink(path);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t alen = nul ? (size_t)(nul - data) : size / 2;
    size_t blen = size - alen - (nul ? 1 : 0);
    /* each text in a buffer of its own, of its exact size, as the cache gives them: a read
     * past either is caught, not lost in the other */
    char *a = malloc(alen + 1), *b = malloc(blen + 1);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memcpy(a, data, alen);
    memcpy(b, data + size - blen, blen);
    char why[80];
    (void)gw_guard_compatible(a, alen, b, blen, why, sizeof why);
    (void)gw_guard_close_call(a, alen, b, blen, why, sizeof why);
    (void)gw_guard_same_words(a, alen, b, blen);
    (void)gw_guard_code_compatible(a, alen, b, blen, why, sizeof why);
    struct gw_core core;
    if (gw_guard_core(a, alen, b, blen, &core)) {
        (void)gw_guard_compatible(core.a, core.an, core.b, core.bn, why, sizeof why);
        (void)gw_guard_close_call(core.a, core.an, core.b, core.bn, why, sizeof why);
        gw_guard_core_free(&core);
    }
    free(a);
    free(b);
    return 0;
}
