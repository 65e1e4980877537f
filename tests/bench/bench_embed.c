/* Times emb_encode: texts per second at a batch size, over texts read one per line.
 * usage: bench_embed MODEL_DIR TEXTS_FILE BATCH SECONDS
 * prints: {"batch":B,"texts":N,"seconds":S,"texts_per_s":R} */
#include "embedder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_embed MODEL_DIR TEXTS_FILE BATCH SECONDS\n");
        return 2;
    }
    int batch = atoi(argv[3]);
    double secs = atof(argv[4]);
    char err[512];
    emb_model *m;
    if (emb_model_load(argv[1], NULL, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f || batch <= 0) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    char **texts = NULL;
    size_t *lens = NULL;
    int n = 0;
    char line[65536];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        texts = realloc(texts, sizeof *texts * (size_t)(n + 1));
        lens = realloc(lens, sizeof *lens * (size_t)(n + 1));
        texts[n] = strdup(line);
        lens[n] = strlen(line);
        n++;
    }
    fclose(f);
    float *out = malloc(sizeof(float) * (size_t)batch * (size_t)emb_dim(m));
    /* warm-up pass, then timed passes over the texts in order until SECONDS elapse */
    emb_encode(m, (const char *const *)texts, lens, batch < n ? batch : n, out, NULL);
    long done = 0;
    int pos = 0;
    double t0 = now(), t;
    do {
        int k = batch;
        if (pos + k > n)
            pos = 0;
        if (k > n)
            k = n;
        if (emb_encode(m, (const char *const *)texts + pos, lens + pos, k, out, NULL)) {
            fprintf(stderr, "encode failed\n");
            return 1;
        }
        pos += k;
        done += k;
        t = now();
    } while (t - t0 < secs);
    printf("{\"batch\":%d,\"texts\":%ld,\"seconds\":%.3f,\"texts_per_s\":%.2f}\n", batch, done,
           t - t0, (double)done / (t - t0));
    for (int i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
    free(lens);
    free(out);
    emb_model_destroy(m);
    return 0;
}
