/*
 * emb_impl.h — what the embedder's model code and its backends share: the
 * hyperparameters, the weights (host F32, row-major, PyTorch's [out][in] layout for
 * linear layers), a packed batch, and the backend table.
 */
#ifndef EMB_IMPL_H
#define EMB_IMPL_H

#include <stddef.h>
#include <stdint.h>

struct emb_config {
    int vocab, hidden, layers, heads, inter, max_pos, types;
    float ln_eps;
};

struct emb_layer {
    const float *wqkv, *bqkv;   /* [3*hidden][hidden], [3*hidden]: query, key, value rows */
    const float *wo, *bo;       /* [hidden][hidden], [hidden] */
    const float *ln1_g, *ln1_b; /* [hidden] after attention */
    const float *w1, *b1;       /* [inter][hidden], [inter] */
    const float *w2, *b2;       /* [hidden][inter], [hidden] */
    const float *ln2_g, *ln2_b; /* [hidden] after the feed-forward */
};

struct emb_weights {
    const float *word, *pos, *type; /* [vocab][hidden], [max_pos][hidden], [types][hidden] */
    const float *ln_g, *ln_b;       /* [hidden] */
    struct emb_layer *layer;        /* [layers] */
};

/* n sequences packed back to back: sequence i is ids[off[i] .. off[i+1]). No padding:
 * only attention mixes tokens, and it runs per sequence. */
struct emb_batch {
    int n;
    const int32_t *ids;
    const int *off; /* [n + 1] */
};

struct emb_backend_i {
    const char *name;
    /* out: [n][hidden], mean-pooled over each sequence's tokens and L2-normalised. */
    int (*forward)(void *ctx, const struct emb_batch *b, float *out);
    void (*destroy)(void *ctx);
    /* Optional (NULL: none): what the last failing call hit, for EMB_EDEVICE. */
    const char *(*last_error)(void *ctx);
    /* Optional (NULL: the model runs a CPU backend for it): every token's hidden state
     * after each of layers[0..nlayers) (0: the embeddings, after their LayerNorm; L:
     * after encoder layer L), unpooled. out: [nlayers][tokens of b][hidden]. */
    int (*states)(void *ctx, const struct emb_batch *b, int nlayers, const int *layers,
                  float *out);
};

/* Mean pooling of each sequence of b over its tokens' states x ([tokens][hidden]), then L2
 * normalisation, into out ([n][hidden]). */
void emb_mean_pool(const float *x, const struct emb_batch *b, int hidden, float *out);

/* A backend on another device (the CUDA plugin's): cfg and w are borrowed for the call
 * only (the backend copies the weights to its device). err gets the reason on failure. */
typedef int (*emb_backend_create_fn)(const struct emb_config *cfg, const struct emb_weights *w,
                                     const struct emb_backend_i **vt, void **ctx, char *err,
                                     size_t errlen);

/* The loaded model's configuration and host weights, borrowed for the model's life (for
 * tests that hold a backend against the CPU one). */
typedef struct emb_model emb_model;
void emb_model_internals(const emb_model *m, const struct emb_config **cfg,
                         const struct emb_weights **w);

/* cfg and w are borrowed for the backend's life. */
int emb_backend_cpu_create(const struct emb_config *cfg, const struct emb_weights *w,
                           int threads, const struct emb_backend_i **vt, void **ctx);

#endif
