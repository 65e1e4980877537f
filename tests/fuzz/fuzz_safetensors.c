/* libFuzzer target: arbitrary bytes as a safetensors image must be parsed or refused,
 * never read out of bounds. Every accepted tensor's bytes are read in full. */
#include "safetensors.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    emb_st_file *f = NULL;
    char err[256];
    if (emb_st_parse(data, size, &f, err, sizeof err) != 0)
        return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < emb_st_count(f); i++) {
        const struct emb_st_tensor *t = emb_st_at(f, i);
        const uint8_t *p = t->data;
        for (size_t k = 0; k < t->nbytes; k++)
            sink ^= p[k];
    }
    (void)sink;
    emb_st_close(f);
    return 0;
}
