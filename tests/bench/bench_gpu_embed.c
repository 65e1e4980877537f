/* Times the embedder's backends on pre-tokenized texts: texts per second of forward passes
 * (upload, encoder, pooling, download) at batch 1 and 256, after warm-up; the CUDA backend
 * from the plugin, the CPU backend beside it for scale. Tokenization is not timed.
 * usage: bench_gpu_embed MODEL_DIR [TEXTS_FILE|-] [SECONDS]
 *   TEXTS_FILE: one text per line; - or absent: built-in short questions
 *   CACHEGATE_CUDA_PLUGIN: the plugin's path (default build/libcachegate_cuda.so)
 * prints one line per backend and batch:
 *   {"backend":"cuda","batch":B,"texts":N,"avg_tokens":A,"seconds":S,"texts_per_s":R} */
#include "cuda_plugin.h"
#include "emb_impl.h"
#include "embedder.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const builtin[] = {
    "What is the capital of France?",
    "how do I reset my password",
    "Why is the sky blue?",
    "Who wrote Pride and Prejudice?",
    "What's the difference between TCP and UDP?",
    "Can dogs eat grapes?",
    "best way to learn C programming",
    "How many ounces are in a cup?",
    "What time zone is Tokyo in?",
    "Is it safe to run a marathon with a cold?",
    "Explain quantum entanglement simply.",
    "convert 100 fahrenheit to celsius",
    "What does HTTP 503 mean?",
    "Recommend a book about the history of mathematics.",
    "How do vaccines train the immune system?",
    "What is a monad?",
    "weather tomorrow in Berlin",
    "Python list comprehension vs generator expression",
    "How long should I boil an egg?",
    "What is the boiling point of water at altitude?",
    "translate good morning into Japanese",
    "How do I center a div in CSS?",
    "symptoms of vitamin D deficiency",
    "When did the Berlin Wall fall?",
    "What is the speed of light in a vacuum?",
    "cheap flights from London to Rome",
    "How does a refrigerator work?",
    "Write a haiku about autumn.",
    "What is the largest ocean on Earth?",
    "git undo last commit but keep changes",
    "How many calories are in a banana?",
    "Who painted the Mona Lisa?",
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct corpus {
    int n, max_tokens;
    int32_t *ids; /* [n][max_tokens] */
    int *len;     /* [n] */
};

/* Times vt's forward on batches of the corpus's texts taken in order, cycling. */
static int bench(const char *name, const struct emb_backend_i *vt, void *ctx,
                 const struct corpus *c, int batch, int dim, double secs)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)batch * (size_t)c->max_tokens);
    int *off = malloc(sizeof(int) * (size_t)(batch + 1));
    float *out = malloc(sizeof(float) * (size_t)batch * (size_t)dim);
    if (!ids || !off || !out) {
        fprintf(stderr, "out of memory\n");
        free(ids);
        free(off);
        free(out);
        return 1;
    }
    int pos = 0, rc = 0;
    long done = 0, tokens = 0;
    double t0 = 0, t = 0;
    for (int pass = -3; rc == 0; pass++) { /* three warm-up passes, then SECONDS of them */
        off[0] = 0;
        for (int i = 0; i < batch; i++, pos = (pos + 1) % c->n) {
            memcpy(ids + off[i], c->ids + (size_t)pos * c->max_tokens,
                   sizeof(int32_t) * (size_t)c->len[pos]);
            off[i + 1] = off[i] + c->len[pos];
        }
        if (pass == 0)
            t0 = now();
        struct emb_batch b = {batch, ids, off};
        if ((rc = vt->forward(ctx, &b, out))) {
            fprintf(stderr, "%s forward: %s\n", name, emb_strerror(rc));
            break;
        }
        if (pass >= 0) {
            done += batch;
            tokens += off[batch];
            t = now();
            if (t - t0 >= secs)
                break;
        }
    }
    if (rc == 0)
        printf("{\"backend\":\"%s\",\"batch\":%d,\"texts\":%ld,\"avg_tokens\":%.1f,"
               "\"seconds\":%.3f,\"texts_per_s\":%.1f}\n",
               name, batch, done, (double)tokens / (double)done, t - t0, (double)done / (t - t0));
    fflush(stdout);
    free(ids);
    free(off);
    free(out);
    return rc != 0;
}

static int read_texts(const char *path, char ***texts, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[65536];
    *texts = NULL;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char **t = realloc(*texts, sizeof **texts * (size_t)(*n + 1));
        if (!t)
            break;
        *texts = t;
        if (!(t[*n] = strdup(line)))
            break;
        (*n)++;
    }
    fclose(f);
    return *n > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: bench_gpu_embed MODEL_DIR [TEXTS_FILE|-] [SECONDS]\n");
        return 2;
    }
    double secs = argc > 3 ? atof(argv[3]) : 5.0;
    char err[512];
    emb_model *m;
    if (emb_model_load(argv[1], NULL, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    char **owned = NULL;
    const char *const *texts = builtin;
    int n = (int)(sizeof builtin / sizeof *builtin);
    if (argc > 2 && strcmp(argv[2], "-") != 0) {
        if (read_texts(argv[2], &owned, &n)) {
            fprintf(stderr, "cannot read texts from %s\n", argv[2]);
            return 1;
        }
        texts = (const char *const *)owned;
    }
    struct corpus c = {n, emb_max_tokens(m), NULL, NULL};
    c.ids = malloc(sizeof(int32_t) * (size_t)n * (size_t)c.max_tokens);
    c.len = malloc(sizeof(int) * (size_t)n);
    if (!c.ids || !c.len) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (emb_tokenize(m, texts[i], strlen(texts[i]), c.ids + (size_t)i * c.max_tokens,
                         &c.len[i])) {
            fprintf(stderr, "cannot tokenize text %d\n", i);
            return 1;
        }

    const char *path = getenv("CACHEGATE_CUDA_PLUGIN");
    if (!path)
        path = "build/libcachegate_cuda.so";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    gw_cuda_plugin_fn fn = h ? (gw_cuda_plugin_fn)dlsym(h, GW_CUDA_PLUGIN_SYMBOL) : NULL;
    const struct gw_cuda_plugin *p = fn ? fn() : NULL;
    if (!p || p->abi != GW_CUDA_PLUGIN_ABI || !p->emb_create) {
        fprintf(stderr, "%s: no usable CUDA plugin with the embedder's backend (%s)\n", path,
                h ? "interface differs" : dlerror());
        return 1;
    }
    struct gw_cuda_device_info info;
    if (p->probe(&info) <= 0) {
        fprintf(stderr, "no usable GPU: %s\n", info.error);
        return 1;
    }
    fprintf(stderr, "GPU: %s (sm_%d%d)\n", info.name, info.major, info.minor);

    const struct emb_config *cfg;
    const struct emb_weights *w;
    emb_model_internals(m, &cfg, &w);
    const struct emb_backend_i *gvt, *cvt;
    void *gctx, *cctx;
    int rc = p->emb_create(cfg, w, &gvt, &gctx, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (emb_backend_cpu_create(cfg, w, 0, &cvt, &cctx)) {
        fprintf(stderr, "cannot create the CPU backend\n");
        return 1;
    }
    static const int batches[] = {1, 256};
    int fail = 0;
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++)
        fail |= bench("cuda", gvt, gctx, &c, batches[i], cfg->hidden, secs);
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++)
        fail |= bench("cpu", cvt, cctx, &c, batches[i], cfg->hidden, secs);
    gvt->destroy(gctx);
    cvt->destroy(cctx);
    emb_model_destroy(m);
    for (int i = 0; owned && i < n; i++)
        free(owned[i]);
    free(owned);
    free(c.ids);
    free(c.len);
    return fail;
}
