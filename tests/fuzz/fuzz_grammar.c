/* libFuzzer target: a JSON Schema from a request (the input up to its first NUL byte) is
 * compiled or refused, and the rest of the input is fed to a matcher of it byte by byte,
 * one refused byte skipped at a time: never a crash, an out-of-bounds access or a leak,
 * whatever the schema ($ref cycles, deep nesting, huge enums) or the bytes. An input of odd
 * length is fed to an optional matcher (a document or text, eng_gm_optional), one whose
 * length is a multiple of 3 or 4 to a matcher of several documents (eng_gm_repeat). */
#include "grammar.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    eng_grammar *g;
    char err[256];
    /* an empty schema text: OpenAI's json_object */
    if (eng_grammar_create(n ? (const char *)data : NULL, n, &g, err, sizeof err)) return 0;
    eng_gm *m;
    if (eng_gm_create(g, &m) == 0) {
        if (size & 1) eng_gm_optional(m);
        if (size % 3 == 0 || size % 4 == 0) eng_gm_repeat(m, (int)(size % 5));
        for (size_t i = n + 1; i < size; i++) {
            eng_gm_feed(m, (const char *)data + i, 1);
            (void)eng_gm_accepting(m);
            (void)eng_gm_done(m);
        }
        eng_gm_destroy(m);
    }
    eng_grammar_destroy(g);
    return 0;
}
