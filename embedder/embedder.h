/*
 * embedder — sentence embeddings with a BERT-family model (default all-MiniLM-L6-v2):
 * WordPiece tokenization, the encoder forward pass, mean pooling over real tokens and
 * L2 normalisation, as sentence-transformers computes them.
 *
 * A model is loaded from a sentence-transformers directory: config.json, vocab.txt,
 * tokenizer_config.json, sentence_bert_config.json, 1_Pooling/config.json and
 * model.safetensors (F32 or F16 weights). The forward pass runs on a backend (a table
 * of functions, emb_impl.h); the CPU backend uses OpenBLAS GEMMs over every token of
 * the batch at once.
 *
 * Threads: emb_encode() and emb_tokenize() may be called from one thread at a time per
 * model (the gateway's embed worker); the model's scratch memory is reused across calls.
 * The library never prints; it reports through the callback set with emb_set_log().
 */
#ifndef EMB_EMBEDDER_H
#define EMB_EMBEDDER_H

#include <stddef.h>
#include <stdint.h>

enum {
    EMB_OK = 0,
    EMB_EINVAL = -1,  /* a bad argument */
    EMB_ENOMEM = -2,  /* out of memory */
    EMB_EIO = -3,     /* a file could not be read */
    EMB_EFORMAT = -4, /* a model file is malformed or not supported */
    EMB_EDEVICE = -5, /* the requested backend cannot run here */
};

const char *emb_strerror(int rc);

enum emb_log_level { EMB_LOG_DEBUG = 0, EMB_LOG_INFO, EMB_LOG_WARN, EMB_LOG_ERROR };
typedef void (*emb_log_fn)(void *ud, int level, const char *msg);
/* Process-wide; NULL silences. */
void emb_set_log(emb_log_fn fn, void *ud);

typedef struct emb_model emb_model;

struct emb_config;
struct emb_weights;
struct emb_backend_i;

struct emb_options {
    int threads; /* 0: as many as cores */
    /* optional: run the model on a GPU backend created by this (the CUDA plugin's
     * emb_backend_create_fn, emb_impl.h) instead of the CPU */
    int (*gpu)(const struct emb_config *cfg, const struct emb_weights *w,
               const struct emb_backend_i **vt, void **ctx, char *err, size_t errlen);
};

/* err receives a message naming the file and the problem. */
int emb_model_load(const char *dir, const struct emb_options *opt, emb_model **out, char *err,
                   size_t errlen);
void emb_model_destroy(emb_model *m); /* accepts NULL */

int emb_dim(const emb_model *m);
/* The most tokens of one text, [CLS] and [SEP] included; longer texts are truncated. */
int emb_max_tokens(const emb_model *m);

/*
 * Token ids of text (UTF-8, len bytes; invalid UTF-8 bytes are dropped) as the model
 * sees them: [CLS] wordpieces [SEP], truncated to emb_max_tokens(). ids must hold
 * emb_max_tokens() entries. *n (out) gets the count.
 */
int emb_tokenize(const emb_model *m, const char *text, size_t len, int32_t *ids, int *n);
/*
 * The same, and whether text fits emb_max_tokens() whole ([CLS] and [SEP] included): *cut
 * (out) 1 when it does not, as emb_encode_ends()'s cut says of it (then ids hold its
 * beginning, *n = emb_max_tokens() + 1). ids must hold emb_max_tokens() + 1 entries.
 */
int emb_tokenize_whole(const emb_model *m, const char *text, size_t len, int32_t *ids, int *n,
                       int *cut);

/*
 * Embeds n texts in one forward pass. out: [n][emb_dim()] floats, L2-normalised.
 * ntokens (optional, [n]) receives each text's token count.
 */
int emb_encode(emb_model *m, const char *const *texts, const size_t *lens, int n, float *out,
               int *ntokens);
/* The same, except that texts i with ends[i] set keep their end when they are too long:
 * their first and last tokens are embedded (emb_wp_encode_ends()). ends may be NULL.
 * cut (optional, [n]) receives 1 for a text without ends[i] that did not fit
 * emb_max_tokens() whole ([CLS] and [SEP] included) and was embedded by its beginning,
 * else 0 (tokenizing reads no further than one piece past the limit). */
int emb_encode_ends(emb_model *m, const char *const *texts, const size_t *lens,
                    const unsigned char *ends, int n, float *out, int *ntokens,
                    unsigned char *cut);

/* What emb_encode_keep() keeps of its forward pass besides the embeddings. */
struct emb_keep {
    /* in */
    int nlayers;
    const int *layers; /* as emb_token_states() takes them; the last (emb_layers()) among
                        * them */
    int cap;           /* the most tokens of a pass whose states are kept */
    float *states;     /* [nlayers][cap][emb_dim()]: written [nlayers][off[n]][emb_dim()] */
    int32_t *ids;      /* [cap]: the pass's tokens */
    int *off;          /* [n + 1]: text i's tokens are off[i]..off[i + 1] */
    /* out */
    int kept; /* 1: they were; 0: the pass had more than cap tokens, or the backend has no
               * such call (a GPU's) */
    int n;    /* the pass's texts, when kept */
};
/* emb_encode_ends() that also keeps, from the same forward pass, every token's hidden state
 * after keep->layers, as emb_token_states() writes them; the embeddings are the ones
 * emb_encode_ends() gives, bit for bit. keep may be NULL. */
int emb_encode_keep(emb_model *m, const char *const *texts, const size_t *lens,
                    const unsigned char *ends, int n, float *out, int *ntokens,
                    unsigned char *cut, struct emb_keep *keep);

/* The encoder's layer count (all-MiniLM-L6-v2: 6). */
int emb_layers(const emb_model *m);
/* 1 when token id has a letter, a digit, '_' or a byte past ASCII; 0 for punctuation
 * only and for ids out of range. */
int emb_token_is_word(const emb_model *m, int32_t id);
/*
 * Every token's hidden state, unpooled and not normalised, after each of the encoder's
 * layers[0..nlayers) (0: the embeddings after their LayerNorm; emb_layers(): the last),
 * for texts[0..n) tokenized as emb_encode_ends() does with their ends kept, in one forward
 * pass. Text i's tokens are off[i]..off[i + 1] ([n + 1]); out:
 * [nlayers][n * emb_max_tokens()][emb_dim()] floats, of which [nlayers][off[n]][emb_dim()]
 * are written, back to back; ids (optional, [n * emb_max_tokens()]) get the tokens. Runs
 * on the CPU where the model's backend has no such call (a GPU's); same threads as
 * emb_encode().
 */
int emb_token_states(emb_model *m, const char *const *texts, const size_t *lens, int n,
                     int nlayers, const int *layers, float *out, int32_t *ids, int *off);

#endif
