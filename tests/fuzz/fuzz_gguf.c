/* libFuzzer target: arbitrary bytes as a GGUF image must be parsed or refused, never
 * read out of bounds. Every accepted string and tensor byte is read in full. */
#include "gguf.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *f = NULL;
    char err[256];
    if (gguf_parse(data, size, &f, err, sizeof err) != 0)
        return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < gguf_n_kv(f); i++) {
        const struct gguf_kv *kv = gguf_kv_at(f, i);
        for (uint64_t k = 0; k < kv->key.len; k++)
            sink ^= (uint8_t)kv->key.p[k];
        if (kv->type == GGUF_ARRAY && kv->v.arr.type == GGUF_STRING)
            for (uint64_t j = 0; j < kv->v.arr.n; j++)
                for (uint64_t k = 0; k < kv->v.arr.strs[j].len; k++)
                    sink ^= (uint8_t)kv->v.arr.strs[j].p[k];
    }
    for (int i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        const uint8_t *p = t->data;
        for (size_t k = 0; k < t->nbytes; k++)
            sink ^= p[k];
    }
    (void)sink;
    gguf_close(f);
    return 0;
}
