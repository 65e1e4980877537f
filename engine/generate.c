#include "generate.h"

#include "engine.h"
#include "kvcache.h"
#include "stop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 16
#define PREFILL_CHUNK 512

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A logit's log-probability, the largest mx and the log-sum lse given. */
static float logprob_of(float x, float mx, double lse)
{
    if (!(x > -INFINITY))
        return -INFINITY;
    if (mx == INFINITY)
        return x == INFINITY ? (float)-lse : -INFINITY;
    return (float)(x - lse);
}

void eng_token_logprob(const float *logits, int n_vocab, int32_t token, int n_top,
                       struct eng_token_lp *lp)
{
    if (n_top > ENG_MAX_TOP_LOGPROBS)
        n_top = ENG_MAX_TOP_LOGPROBS;
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] > mx) /* NaN never is */
            mx = logits[i];
    double sum = 0;
    lp->n_top = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float x = logits[i];
        if (!(x > -INFINITY)) /* -inf, NaN: probability 0 */
            continue;
        sum += exp((double)x - mx);
        /* the n_top largest so far, largest first; an equal logit keeps the lower id first */
        int k = lp->n_top;
        if (k == n_top && (n_top == 0 || !(x > logits[lp->top[k - 1]])))
            continue;
        if (k == n_top)
            k--;
        while (k > 0 && x > logits[lp->top[k - 1]]) {
            lp->top[k] = lp->top[k - 1];
            k--;
        }
        lp->top[k] = i;
        if (lp->n_top < n_top)
            lp->n_top++;
    }
    double lse = mx + log(sum > 0 ? sum : 1);
    if (mx == INFINITY) { /* the tokens at +inf share all of the probability */
        int at_inf = 0;
        for (int i = 0; i < n_vocab; i++)
            at_inf += logits[i] == INFINITY;
        lse = log(at_inf);
    }
    lp->token = token;
    lp->logprob = token >= 0 && token < n_vocab ? logprob_of(logits[token], mx, lse) : -INFINITY;
    for (int k = 0; k < lp->n_top; k++)
        lp->top_logprob[k] = logprob_of(logits[lp->top[k]], mx, lse);
}

const char *eng_finish_name(enum eng_finish f)
{
    static const char *const n[] = {"stop", "length", "cancelled"};
    return (unsigned)f < 3 ? n[f] : "stop";
}

int eng_chat_tokenize(const tok_vocab *v, const struct eng_chat_prompt *p, int32_t **ids,
                      int *n)
{
    /* the template's segments are where special tokens are read; the whole text is one
     * encoding, so that words run across a template's text and a message's */
    struct tok_span *spans = malloc(sizeof *spans * (size_t)(p->nseg ? p->nseg : 1));
    if (!spans)
        return ENG_ENOMEM;
    int ns = 0;
    size_t len = 0;
    for (int i = 0; i < p->nseg; i++) {
        if (p->seg[i].special)
            spans[ns++] = (struct tok_span){p->seg[i].off, p->seg[i].len};
        if (p->seg[i].off + p->seg[i].len > len)
            len = p->seg[i].off + p->seg[i].len;
    }
    int cap = 256, got = 0, rc;
    int32_t *out = malloc(sizeof *out * (size_t)cap);
    while (out && (rc = tok_encode_spans(v, p->text, len, spans, ns, out, cap, &got)) ==
                      ENG_EFULL) {
        cap = got + 1; /* got is the count needed */
        int32_t *o = realloc(out, sizeof *o * (size_t)cap);
        if (!o)
            free(out);
        out = o;
    }
    free(spans);
    if (!out)
        return ENG_ENOMEM;
    if (rc) {
        free(out);
        return rc;
    }
    *ids = out;
    *n = got;
    return 0;
}

struct emitter {
    eng_stop *stop;
    eng_gen_emit_fn fn;
    void *ud;
    int cancelled;
};

/* Passes decoded bytes through the stop detector to the caller. 1 when a stop matched. */
static int emit_text(struct emitter *e, const char *s, size_t n, int final)
{
    const char *out;
    size_t no;
    int rc = final ? eng_stop_flush(e->stop, &out, &no) : eng_stop_feed(e->stop, s, n, &out, &no);
    if (rc < 0)
        return rc;
    if (no && !e->cancelled && e->fn(e->ud, out, no))
        e->cancelled = 1;
    return rc == ENG_STOP_MATCHED;
}

int eng_generate(eng_model *m, const tok_vocab *v, const int32_t *prompt, int n_prompt,
                 const struct eng_gen_params *p, eng_gen_emit_fn emit, void *ud,
                 struct eng_gen_stats *st)
{
    memset(st, 0, sizeof *st);
    const struct eng_hparams *hp = eng_model_hparams(m);
    if (n_prompt <= 0 || p->max_tokens < 0 || n_prompt > hp->n_ctx_train)
        return ENG_EINVAL;
    int max_new = p->max_tokens;
    if (n_prompt + max_new > hp->n_ctx_train)
        max_new = hp->n_ctx_train - n_prompt;
    int total = n_prompt + max_new, nb = (total + BLOCK - 1) / BLOCK;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, BLOCK, nb > 0 ? nb : 1,
                           eng_model_kv_on_device(m), p->kv_dtype};
    kvc_pool *kv = NULL;
    eng_sampler *smp = NULL;
    struct emitter em = {NULL, emit, ud, 0};
    int32_t *table = malloc(sizeof *table * (size_t)ks.n_blocks);
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    size_t dmax = tok_decode_max(v) + 8;
    char *piece = malloc(dmax);
    int rc = ENG_ENOMEM;
    if (!table || !logits || !piece)
        goto out;
    if ((rc = kvc_create(&ks, &kv)) || (rc = eng_sampler_create(&p->sampling, hp->n_vocab, &smp)) ||
        (rc = eng_stop_create(p->stop, p->n_stop, &em.stop)))
        goto out;
    for (int i = 0; i < ks.n_blocks; i++)
        kvc_alloc(kv, &table[i]);

    double t0 = now();
    for (int done = 0; done < n_prompt;) {
        int chunk = n_prompt - done < PREFILL_CHUNK ? n_prompt - done : PREFILL_CHUNK;
        struct eng_seq s = {prompt + done, chunk, done, table,
                            done + chunk == n_prompt ? ENG_LOGITS_LAST : ENG_LOGITS_NONE};
        if ((rc = eng_forward(m, kv, &s, 1, logits)))
            goto out;
        done += chunk;
    }
    st->prompt_tokens = n_prompt;
    st->prefill_s = now() - t0;

    tok_decoder dec;
    tok_decoder_init(&dec, v, TOK_DECODE_SKIP_SPECIAL);
    double t1 = now();
    st->finish = ENG_FINISH_LENGTH;
    int pos = n_prompt, stopped = 0;
    for (int i = 0; i < max_new && !stopped; i++) {
        int32_t tok = eng_sampler_sample(smp, logits);
        if (tok < 0) {
            rc = tok;
            goto out;
        }
        if (tok_is_eog(v, tok)) {
            st->finish = ENG_FINISH_STOP;
            break;
        }
        eng_sampler_accept(smp, tok);
        st->completion_tokens++;
        size_t n = 0;
        if ((rc = tok_decode(&dec, tok, piece, dmax, &n)))
            goto out;
        if ((stopped = emit_text(&em, piece, n, 0)) < 0) {
            rc = stopped;
            goto out;
        }
        if (stopped) {
            st->finish = ENG_FINISH_STOP;
            break;
        }
        if (em.cancelled) {
            st->finish = ENG_FINISH_CANCELLED;
            break;
        }
        if (i + 1 == max_new)
            break; /* no forward pass for a token that will not be sampled */
        struct eng_seq s = {&tok, 1, pos++, table, ENG_LOGITS_LAST};
        if ((rc = eng_forward(m, kv, &s, 1, logits)))
            goto out;
    }
    if (!stopped && st->finish != ENG_FINISH_CANCELLED) {
        size_t n = 0;
        if ((rc = tok_decoder_flush(&dec, piece, dmax, &n)) ||
            (n && (rc = emit_text(&em, piece, n, 0)) < 0))
            goto out;
        if (rc == 1) {
            st->finish = ENG_FINISH_STOP;
        } else if ((rc = emit_text(&em, NULL, 0, 1)) < 0) {
            goto out;
        } else if (rc == 1) {
            st->finish = ENG_FINISH_STOP;
        }
    }
    st->decode_s = now() - t1;
    rc = 0;
out:
    eng_stop_destroy(em.stop);
    eng_sampler_destroy(smp);
    kvc_destroy(kv);
    free(table);
    free(logits);
    free(piece);
    return rc;
}
