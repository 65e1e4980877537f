#include "scheduler.h"

#include "backend.h"
#include "engine.h"
#include "stop.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct sched_seq {
    struct sched_seq *prev, *next; /* in waiting or running */
    void *ud;
    int32_t *tokens; /* prompt, then generated */
    int n_tokens, cap, n_prompt;
    int n_computed; /* positions whose keys and values are in the pool */
    int32_t *table;
    int n_table, cap_table;
    int generated, max_tokens;
    uint64_t ns;
    uint64_t party; /* whose it is (sched_set_party): admission takes turns between them */
    uint64_t counted; /* running: the party it is counted under (party, when admitted) */
    long held;      /* the step in which it last waited for a prefill it shares */
    rdx_node *lock;  /* the cached prefix it shares, locked */
    int n_cached;    /* prompt tokens that came from the prefix cache */
    int cache_counted;
    eng_sampler *smp;
    eng_stop *stop;
    tok_decoder dec;
    int cancelled, running, in_batch;
    int fresh;  /* admitted and nothing computed yet: sent back, it loses no work */
    /* logprobs: the step's logits copied before sampling changes them ([n_vocab]); the
     * records not yet reported, each with the end of its token's text; the text's bytes
     * so far and those emitted, both in the emitted (cleaned, stop.h) text's terms */
    int logprobs, top_logprobs;
    float *lp_row;
    struct eng_token_lp *lp_q;
    size_t *lp_end;
    int lp_n, lp_cap;
    int lp_ready; /* the first lp_ready records' tokens have their text decoded */
    size_t dec_bytes, out_bytes;
    size_t lp_base; /* where the first record's token's text starts */
    long order; /* admission order, for choosing whom to preempt */
    /* structured output: where the output stands in its grammar, and the step's logits
     * kept for masking when the token drawn first is refused ([n_vocab]) */
    eng_gm *gm;
    float *gm_row;
    int gm_optional; /* the grammar holds a document, the stop strings text (generate.h) */
};

#define SCHED_RECENT 64

struct list {
    sched_seq *head, *tail;
    int n;
};

struct sched {
    eng_model *m;
    const tok_vocab *v;
    struct sched_config cfg;
    struct sched_events ev;
    kvc_pool *kv;
    rdx_tree *rdx; /* NULL: prefix caching off */
    struct list waiting, running;
    long next_order;
    long steps; /* sched_step calls: a sequence held back (q->held) is so for one step */
    /* the parties admitted lately and when (order -1: an empty entry), for taking turns */
    struct {
        uint64_t party;
        long order;
    } recent[SCHED_RECENT];
    /* prompt + output at which a sequence ends (length): max_model_len, or one past the
     * positions of the whole pool, past which even alone it could not go on */
    int len_cap;
    /* The running sequences of each party, by party (open addressing; an entry left at 0
     * stays until the table is counted again from the running list, when half full): a
     * party's count in one look where a walk of the running list took one per sequence,
     * for every waiting sequence at each admission. [parties_cap], a power of two at least
     * four times max_num_seqs, of which parties_used entries. */
    struct party_count {
        uint64_t party;
        int n, used;
    } *parties;
    int parties_cap, parties_used;
    float *logits; /* [max_num_seqs][n_vocab] */
    /* [max_num_seqs]: rows sampled on the model's device, when its backend can (else NULL) */
    struct eng_sample_row *dev_rows;
    struct eng_logit_adj *dev_adj; /* [dev_adj_cap]: the rows' logit amounts (sampler.h) */
    size_t dev_adj_cap;
    int32_t *row_tokens;     /* [max_num_seqs]: the token sampled from each row of logits */
    eng_sampler **row_smp;   /* [max_num_seqs]: each row's sampler, sampling on the host */
    sched_seq **row_seq;     /* [max_num_seqs]: each row's sequence, sampling on the host */
    struct eng_token_lp *row_lp; /* [max_num_seqs]: each row's record, when it asked */
    struct eng_seq *batch;
    sched_seq **batch_seq;
    sched_seq **cand; /* the running sequences at the start of a step */
    char *piece;
    size_t piece_cap;
    eng_gm_vocab *gm_vocab; /* made for the first sequence with a grammar */
    long preemptions, tokens_generated, tokens_prompt, tokens_cached;
};

static void list_push_back(struct list *l, sched_seq *q)
{
    q->prev = l->tail;
    q->next = NULL;
    if (l->tail)
        l->tail->next = q;
    else
        l->head = q;
    l->tail = q;
    l->n++;
}

static void list_push_front(struct list *l, sched_seq *q)
{
    q->prev = NULL;
    q->next = l->head;
    if (l->head)
        l->head->prev = q;
    else
        l->tail = q;
    l->head = q;
    l->n++;
}

static void list_remove(struct list *l, sched_seq *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        l->head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        l->tail = q->prev;
    q->prev = q->next = NULL;
    l->n--;
}

static void release_blocks(sched *s, sched_seq *q)
{
    for (int i = 0; i < q->n_table; i++)
        kvc_release(s->kv, q->table[i]);
    q->n_table = 0;
    q->n_computed = 0;
    if (q->lock) {
        rdx_unlock(s->rdx, q->lock);
        q->lock = NULL;
    }
}

static void seq_free(sched_seq *q)
{
    eng_sampler_destroy(q->smp);
    eng_stop_destroy(q->stop);
    free(q->lp_row);
    eng_gm_destroy(q->gm);
    free(q->gm_row);
    free(q->lp_q);
    free(q->lp_end);
    free(q->tokens);
    free(q->table);
    free(q);
}

/* Reports q's records whose token's text is all out (final: any of it). A token with no
 * text of its own yet (part of a character the decoder holds, a control token) waits for
 * the text that comes next, and goes with it: records that end at the same byte share
 * that text. */
static void release_lp(sched *s, sched_seq *q, int final)
{
    int k = 0;
    /* at the end: the text is all there; the tokens after a stop string's start are cut,
     * those with no text at the end of a text not cut (control tokens) go out */
    const int cut = eng_stop_matched(q->stop) >= 0;
    if (final)
        q->lp_ready = q->lp_n;
    for (; k < q->lp_ready; k++) {
        const size_t start = k ? q->lp_end[k - 1] : q->lp_base, end = q->lp_end[k];
        if (final ? start >= q->out_bytes && !(k && end == start) && (cut || end > start)
                  : end > q->out_bytes)
            break;
    }
    if (!k)
        return;
    if (s->ev.on_logprobs)
        s->ev.on_logprobs(q->ud, q->lp_q, k);
    q->lp_base = q->lp_end[k - 1];
    q->lp_n -= k;
    q->lp_ready -= k;
    memmove(q->lp_q, q->lp_q + k, sizeof *q->lp_q * (size_t)q->lp_n);
    memmove(q->lp_end, q->lp_end + k, sizeof *q->lp_end * (size_t)q->lp_n);
}

/* Ends a sequence: a completed one goes into the prefix cache (the positions whose keys
 * and values were computed: prompt and generated tokens but the last); then its blocks
 * are released and it is reported. */
static void count_out(sched *s, sched_seq *q);

static void finish(sched *s, sched_seq *q, int err, enum eng_finish f)
{
    if (q->running)
        count_out(s, q);
    list_remove(q->running ? &s->running : &s->waiting, q);
    if (!err && f != ENG_FINISH_CANCELLED)
        release_lp(s, q, 1);
    if (s->rdx && !err && f != ENG_FINISH_CANCELLED && q->n_computed > 0)
        rdx_insert(s->rdx, q->ns, q->tokens, q->n_computed, q->table); /* best effort */
    release_blocks(s, q);
    s->ev.on_done(q->ud, err, f, q->n_prompt, q->generated, q->n_cached);
    seq_free(q);
}

int sched_max_model_len(const eng_model *m, int max_model_len)
{
    const int train = eng_model_hparams(m)->n_ctx_train;
    return max_model_len <= 0 || max_model_len > train ? train : max_model_len;
}

int sched_create(eng_model *m, const tok_vocab *v, const struct sched_config *cfg,
                 const struct sched_events *ev, sched **out)
{
    *out = NULL;
    const struct eng_hparams *hp = eng_model_hparams(m);
    if (cfg->max_num_seqs < 1 || cfg->max_num_batched_tokens < cfg->max_num_seqs ||
        cfg->n_blocks < 1 || cfg->block_size < 1)
        return ENG_EINVAL;
    sched *s = calloc(1, sizeof *s);
    if (!s)
        return ENG_ENOMEM;
    s->m = m;
    s->v = v;
    s->cfg = *cfg;
    for (int i = 0; i < SCHED_RECENT; i++)
        s->recent[i].order = -1;
    s->cfg.max_model_len = sched_max_model_len(m, cfg->max_model_len);
    const long pool = (long)cfg->n_blocks * cfg->block_size + 1;
    s->len_cap = pool < s->cfg.max_model_len ? (int)pool : s->cfg.max_model_len;
    s->ev = *ev;
    struct kvc_shape ks = {hp->n_layer, hp->n_head_kv, hp->head_dim, cfg->block_size,
                           cfg->n_blocks, eng_model_kv_on_device(m), cfg->kv_dtype};
    int rc = kvc_create(&ks, &s->kv);
    if (!rc && cfg->prefix_caching)
        rc = rdx_create(s->kv, &s->rdx);
    s->logits = malloc(sizeof(float) * (size_t)cfg->max_num_seqs * hp->n_vocab);
    s->batch = malloc(sizeof *s->batch * (size_t)cfg->max_num_seqs);
    s->batch_seq = malloc(sizeof *s->batch_seq * (size_t)cfg->max_num_seqs);
    s->cand = malloc(sizeof *s->cand * (size_t)cfg->max_num_seqs);
    for (s->parties_cap = 16; s->parties_cap < 4 * cfg->max_num_seqs;)
        s->parties_cap *= 2;
    s->parties = calloc((size_t)s->parties_cap, sizeof *s->parties);
    s->piece_cap = tok_decode_max(v) + 8;
    s->piece = malloc(s->piece_cap);
    s->row_tokens = malloc(sizeof *s->row_tokens * (size_t)cfg->max_num_seqs);
    s->row_smp = malloc(sizeof *s->row_smp * (size_t)cfg->max_num_seqs);
    s->row_seq = malloc(sizeof *s->row_seq * (size_t)cfg->max_num_seqs);
    s->row_lp = malloc(sizeof *s->row_lp * (size_t)cfg->max_num_seqs);
    if (eng_model_samples_on_device(m)) {
        s->dev_rows = malloc(sizeof *s->dev_rows * (size_t)cfg->max_num_seqs);
        if (!s->dev_rows)
            rc = rc ? rc : ENG_ENOMEM;
    }
    if (rc || !s->logits || !s->batch || !s->batch_seq || !s->cand || !s->parties ||
        !s->piece || !s->row_tokens || !s->row_smp || !s->row_seq || !s->row_lp) {
        sched_destroy(s);
        return rc ? rc : ENG_ENOMEM;
    }
    *out = s;
    return 0;
}

void sched_destroy(sched *s)
{
    if (!s)
        return;
    while (s->running.head)
        finish(s, s->running.head, 0, ENG_FINISH_CANCELLED);
    while (s->waiting.head)
        finish(s, s->waiting.head, 0, ENG_FINISH_CANCELLED);
    rdx_destroy(s->rdx);
    kvc_destroy(s->kv);
    free(s->logits);
    free(s->dev_rows);
    free(s->dev_adj);
    free(s->row_tokens);
    free(s->row_smp);
    free(s->row_seq);
    free(s->row_lp);
    free(s->batch);
    free(s->batch_seq);
    free(s->cand);
    free(s->parties);
    free(s->piece);
    eng_gm_vocab_destroy(s->gm_vocab);
    free(s);
}

int sched_submit(sched *s, uint64_t ns, const int32_t *prompt, int n_prompt,
                 const struct eng_gen_params *p, void *ud, sched_seq **out)
{
    *out = NULL;
    if (n_prompt <= 0 || n_prompt >= s->cfg.max_model_len || p->max_tokens < 0)
        return ENG_EINVAL;
    /* a sequence must be able to run alone in the pool */
    int need = (n_prompt + 1 + s->cfg.block_size - 1) / s->cfg.block_size;
    if (need > s->cfg.n_blocks)
        return ENG_EFULL;
    sched_seq *q = calloc(1, sizeof *q);
    if (!q)
        return ENG_ENOMEM;
    q->ud = ud;
    q->ns = q->party = ns;
    q->held = -1;
    q->cap = n_prompt + 16;
    q->tokens = malloc(sizeof *q->tokens * (size_t)q->cap);
    q->cap_table = 8;
    q->table = malloc(sizeof *q->table * (size_t)q->cap_table);
    int rc = ENG_ENOMEM;
    if (!q->tokens || !q->table)
        goto fail;
    memcpy(q->tokens, prompt, sizeof *prompt * (size_t)n_prompt);
    q->n_tokens = q->n_prompt = n_prompt;
    q->max_tokens = p->max_tokens;
    if (p->logprobs) {
        if (p->top_logprobs < 0 || p->top_logprobs > ENG_MAX_TOP_LOGPROBS) {
            rc = ENG_EINVAL;
            goto fail;
        }
        q->logprobs = 1;
        q->top_logprobs = p->top_logprobs;
        q->lp_row = malloc(sizeof *q->lp_row * (size_t)eng_model_hparams(s->m)->n_vocab);
        if (!q->lp_row)
            goto fail;
    }
    if (p->grammar) {
        if (!s->gm_vocab && (rc = eng_gm_vocab_create(s->v, &s->gm_vocab)))
            goto fail;
        rc = ENG_ENOMEM;
        q->gm_row = malloc(sizeof *q->gm_row * (size_t)eng_model_hparams(s->m)->n_vocab);
        if (!q->gm_row || (rc = eng_gm_create(p->grammar, &q->gm)))
            goto fail;
        if ((q->gm_optional = p->grammar_optional))
            eng_gm_optional(q->gm);
        if (p->grammar_more > 0)
            eng_gm_repeat(q->gm, p->grammar_more);
    }
    if ((rc = eng_sampler_create(&p->sampling, eng_model_hparams(s->m)->n_vocab, &q->smp)) ||
        (rc = eng_stop_create(p->stop, p->n_stop, &q->stop)))
        goto fail;
    tok_decoder_init(&q->dec, s->v, TOK_DECODE_SKIP_SPECIAL);
    list_push_back(&s->waiting, q);
    s->tokens_prompt += n_prompt;
    *out = q;
    return 0;
fail:
    seq_free(q);
    return rc;
}

/* (a running sequence stays counted under the party it was admitted with, counted, until it
 * leaves the running list) */
void sched_set_party(sched_seq *q, uint64_t party)
{
    q->party = party;
}

static int shares_prefill(const sched *s, const sched_seq *q);

/* party's entry in s->parties, or (none) the empty one where it would go */
static struct party_count *party_slot(const sched *s, uint64_t party)
{
    const unsigned mask = (unsigned)s->parties_cap - 1;
    unsigned i = (unsigned)((party * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
    while (s->parties[i].used && s->parties[i].party != party)
        i = (i + 1) & mask;
    return &s->parties[i];
}

/* q, being admitted (not yet on the running list), counted under its party; the table
 * counted again from the running list when half full (of parties that ran and left: at
 * most max_num_seqs have a count) */
static void count_in(sched *s, sched_seq *q)
{
    struct party_count *e = party_slot(s, q->party);
    if (!e->used && 2 * (s->parties_used + 1) > s->parties_cap) {
        memset(s->parties, 0, sizeof *s->parties * (size_t)s->parties_cap);
        s->parties_used = 0;
        for (const sched_seq *r = s->running.head; r; r = r->next) {
            struct party_count *o = party_slot(s, r->counted);
            s->parties_used += !o->used;
            *o = (struct party_count){r->counted, o->n + 1, 1};
        }
        e = party_slot(s, q->party);
    }
    s->parties_used += !e->used;
    *e = (struct party_count){q->party, e->n + 1, 1};
    q->counted = q->party;
}

/* q, leaving the running list, no longer counted */
static void count_out(sched *s, sched_seq *q)
{
    party_slot(s, q->counted)->n--;
}

/* How many running sequences are party's (turns at admission, and whom to preempt). */
static int party_running(const sched *s, uint64_t party)
{
    return party_slot(s, party)->n;
}

/* When party last had a sequence admitted (an admission order), -1 when not lately. */
static long party_admitted(const sched *s, uint64_t party)
{
    for (int i = 0; i < SCHED_RECENT; i++)
        if (s->recent[i].order >= 0 && s->recent[i].party == party)
            return s->recent[i].order;
    return -1;
}

static void note_admitted(sched *s, uint64_t party, long order)
{
    int at = 0; /* party's entry, or else the one admitted longest ago */
    for (int i = 0; i < SCHED_RECENT; i++) {
        if (s->recent[i].order >= 0 && s->recent[i].party == party) {
            at = i;
            break;
        }
        if (s->recent[i].order < s->recent[at].order)
            at = i;
    }
    s->recent[at].party = party;
    s->recent[at].order = order;
}

/* The waiting sequence to admit next: of the party with the fewest running, and among
 * equals the one whose turn came longest ago, the first in the queue (the oldest, or one
 * preempted, which went back to the front); one that waits for a prefill it shares is
 * passed over for the rest of the step. NULL: none. */
static sched_seq *next_to_admit(sched *s)
{
    for (;;) {
        sched_seq *best = NULL;
        int fewest = INT_MAX;
        long turn = 0;
        for (sched_seq *q = s->waiting.head; q; q = q->next) {
            if (q->held == s->steps || (best && q->party == best->party))
                continue;
            int n = party_running(s, q->party);
            long t = n <= fewest ? party_admitted(s, q->party) : 0;
            if (n < fewest || (n == fewest && t < turn))
                best = q, fewest = n, turn = t;
        }
        if (!best || !(s->rdx && best->n_table == 0 && shares_prefill(s, best)))
            return best;
        best->held = s->steps;
    }
}

void sched_cancel(sched *s, sched_seq *q)
{
    (void)s;
    q->cancelled = 1;
}

/* Blocks for positions [0, upto) of q; the pool may run dry (ENG_EFULL). */
static int cover(sched *s, sched_seq *q, int upto)
{
    int need = (upto + s->cfg.block_size - 1) / s->cfg.block_size;
    while (q->n_table < need) {
        if (q->n_table == q->cap_table) {
            int cap = q->cap_table * 2;
            int32_t *t = realloc(q->table, sizeof *t * (size_t)cap);
            if (!t)
                return ENG_ENOMEM;
            q->table = t;
            q->cap_table = cap;
        }
        int rc = kvc_alloc(s->kv, &q->table[q->n_table]);
        if (rc == ENG_EFULL && s->rdx && rdx_evict(s->rdx, need - q->n_table) > 0)
            rc = kvc_alloc(s->kv, &q->table[q->n_table]);
        if (rc)
            return rc;
        q->n_table++;
    }
    return 0;
}

/* The one to preempt when need finds no block: a sequence of the party with the most
 * running, the one admitted last (not the newest of all, which is often one just admitted
 * for a party that waited its turn, and would be sent back at every step while the party
 * that holds the pool goes on). One already in the batch being built is taken only for a
 * party with more running than need's, and after those not in it of that party: when the
 * heavier party's sequences are all decoding, the lighter one's fresh prefill would
 * otherwise be sent back at every step until one of theirs ended. */
static sched_seq *victim_of(sched *s, const sched_seq *need, int batch_too)
{
    int mine = party_running(s, need->counted); /* (running sequences: their counted party) */
    sched_seq *best = NULL;
    int most = -1;
    for (sched_seq *q = s->running.head; q; q = q->next) {
        int n = party_running(s, q->counted);
        if (q->in_batch && (!batch_too || n <= mine))
            continue;
        if (n > most ||
            (n == most && (q->in_batch < best->in_batch ||
                           (q->in_batch == best->in_batch && q->order > best->order))))
            best = q, most = n;
    }
    return best;
}

/* Whether the blocks free and those of the sequences in the batch that victim_of() may take
 * for need (of parties with more running) would cover `blocks` more: if not, none of them
 * is preempted for it, their work lost for nothing. */
static int batch_could_cover(sched *s, const sched_seq *need, int blocks)
{
    int mine = party_running(s, need->counted), have = kvc_free_blocks(s->kv);
    for (const sched_seq *q = s->running.head; q && have < blocks; q = q->next)
        if (q->in_batch && party_running(s, q->counted) > mine)
            have += q->n_table; /* (at most: a block shared through the prefix cache stays) */
    return have >= blocks;
}

/* Takes q, preempted, out of the batch being built; its tokens go back to the budget. */
static void unbatch(sched *s, sched_seq *q, int *nb, int *budget)
{
    for (int i = 0; i < *nb; i++)
        if (s->batch_seq[i] == q) {
            *budget += s->batch[i].n_new;
            memmove(&s->batch[i], &s->batch[i + 1], sizeof s->batch[0] * (size_t)(*nb - i - 1));
            memmove(&s->batch_seq[i], &s->batch_seq[i + 1],
                    sizeof s->batch_seq[0] * (size_t)(*nb - i - 1));
            (*nb)--;
            break;
        }
    q->in_batch = 0;
}

/*
 * Prompt tokens left to compute after a prefix-cache match, at least: one for the logits,
 * and more than ENG_ROWS_MAX_T, because the CPU's F32 products (but those over regrouped
 * weights, with AVX-512 or AVX2) run passes of that many tokens or fewer through other kernels than
 * longer passes (which compute every token the same way, whatever else the pass holds).
 * A prompt whose cached part ended 1 to 3 tokens before its end would come out a few bits
 * off the same prompt computed whole, and a seeded sample could then differ between the
 * first time a request is asked and the next.
 */
#define SCHED_MIN_RECOMPUTE (ENG_ROWS_MAX_T + 1)

/* Starts q from the longest cached prefix of its tokens (SCHED_MIN_RECOMPUTE or more are
 * left to compute). */
static void admit_cached(sched *s, sched_seq *q)
{
    int max_blocks = (q->n_tokens - SCHED_MIN_RECOMPUTE) / s->cfg.block_size, matched = 0;
    if (max_blocks <= 0)
        return;
    if (q->cap_table < max_blocks) {
        int32_t *t = realloc(q->table, sizeof *t * (size_t)max_blocks);
        if (!t)
            return;
        q->table = t;
        q->cap_table = max_blocks;
    }
    if (rdx_match(s->rdx, q->ns, q->tokens, q->n_tokens - SCHED_MIN_RECOMPUTE, q->table,
                  max_blocks, &matched, &q->lock) != 0)
        return;
    q->n_table = matched / s->cfg.block_size;
    q->n_computed = matched;
    if (!q->cache_counted) { /* counted once, not again after a preemption */
        q->cache_counted = 1;
        q->n_cached = matched;
        s->tokens_cached += matched;
    }
}

/* Whether a running sequence still prefilling shares at least one block of q's prompt. */
static int shares_prefill(const sched *s, const sched_seq *q)
{
    for (const sched_seq *r = s->running.head; r; r = r->next) {
        if (r->ns != q->ns || r->n_computed >= r->n_prompt)
            continue;
        int n = r->n_prompt < q->n_prompt ? r->n_prompt : q->n_prompt, k = 0;
        while (k < n && r->tokens[k] == q->tokens[k])
            k++;
        if (k >= s->cfg.block_size)
            return 1;
    }
    return 0;
}

static void preempt(sched *s, sched_seq *q)
{
    count_out(s, q);
    list_remove(&s->running, q);
    q->running = 0;
    release_blocks(s, q); /* recomputed from its tokens when admitted again */
    list_push_front(&s->waiting, q);
    if (!q->fresh) /* one admitted this step goes back before computing anything */
        s->preemptions++;
}

static void extend_lp(sched_seq *q, size_t seen);

static int emit(sched *s, sched_seq *q, const char *text, size_t n, int final)
{
    const char *out;
    size_t no;
    int rc = final ? eng_stop_flush(q->stop, &out, &no) : eng_stop_feed(q->stop, text, n, &out, &no);
    if (rc < 0)
        return rc;
    extend_lp(q, eng_stop_seen(q->stop));
    q->out_bytes += no;
    if (q->lp_n)
        release_lp(s, q, 0);
    if (no)
        s->ev.on_text(q->ud, out, no);
    return rc == ENG_STOP_MATCHED;
}

/* The text has grown to seen bytes: they end the records whose tokens had no text yet
 * (the last queued, and those before it still waiting). */
static void extend_lp(sched_seq *q, size_t seen)
{
    if (seen == q->dec_bytes)
        return;
    q->dec_bytes = seen;
    for (int k = q->lp_ready; k < q->lp_n; k++)
        q->lp_end[k] = q->dec_bytes;
    q->lp_ready = q->lp_n;
}

/* Ends q's text: the decoder's and the stop detector's held bytes. 1 if a stop matched. */
static int flush_text(sched *s, sched_seq *q)
{
    size_t n = 0;
    int rc = tok_decoder_flush(&q->dec, s->piece, s->piece_cap, &n);
    if (rc)
        return rc;
    if (n && (rc = emit(s, q, s->piece, n, 0)) != 0)
        return rc;
    return emit(s, q, NULL, 0, 1);
}

/* Queues a token's record, its text to end at q->dec_bytes once decoded. */
static int push_lp(sched_seq *q, const struct eng_token_lp *lp)
{
    if (q->lp_n == q->lp_cap) {
        int cap = q->lp_cap ? q->lp_cap * 2 : 8;
        struct eng_token_lp *l = realloc(q->lp_q, sizeof *l * (size_t)cap);
        if (!l)
            return ENG_ENOMEM;
        q->lp_q = l;
        size_t *e = realloc(q->lp_end, sizeof *e * (size_t)cap);
        if (!e)
            return ENG_ENOMEM;
        q->lp_end = e;
        q->lp_cap = cap;
    }
    q->lp_q[q->lp_n] = *lp;
    q->lp_end[q->lp_n++] = q->dec_bytes;
    return 0;
}

/* A sampled token (lp: its record, or NULL): returns 1 when the sequence is finished (with
 * *f set). */
static int take_token(sched *s, sched_seq *q, int32_t tok, const struct eng_token_lp *lp,
                      enum eng_finish *f)
{
    if (tok_is_eog(s->v, tok)) {
        *f = ENG_FINISH_STOP;
        int r = flush_text(s, q);
        return r < 0 ? r : 1;
    }
    if (q->n_tokens == q->cap) {
        int cap = q->cap * 2;
        int32_t *t = realloc(q->tokens, sizeof *t * (size_t)cap);
        if (!t)
            return ENG_ENOMEM;
        q->tokens = t;
        q->cap = cap;
    }
    if (q->gm && eng_gm_take(q->gm, s->gm_vocab, tok))
        return ENG_EINVAL; /* sampled from the grammar's mask: cannot happen */
    if (q->gm_optional && q->gm && eng_gm_state(q->gm) == ENG_GM_DOCUMENT) {
        eng_stop_disarm(q->stop); /* a stop string would cut the document */
    } else if (q->gm_optional && q->gm && eng_gm_state(q->gm) == ENG_GM_TEXT) {
        /* words: held to nothing from here on, sampled as without a grammar (on the device
         * where the batch can be) */
        eng_gm_destroy(q->gm);
        q->gm = NULL;
        free(q->gm_row);
        q->gm_row = NULL;
    }
    q->tokens[q->n_tokens++] = tok;
    q->generated++;
    s->tokens_generated++;
    eng_sampler_accept(q->smp, tok);
    size_t n = 0;
    int rc = tok_decode(&q->dec, tok, s->piece, s->piece_cap, &n);
    if (rc || (lp && (rc = push_lp(q, lp))))
        return rc;
    if ((rc = emit(s, q, s->piece, n, 0)) != 0) {
        *f = ENG_FINISH_STOP;
        return rc < 0 ? rc : 1;
    }
    if (q->gm && eng_gm_done(q->gm)) { /* the document is complete: nothing may follow */
        *f = ENG_FINISH_STOP;
        int r = flush_text(s, q);
        return r < 0 ? r : 1;
    }
    if (q->generated >= q->max_tokens || q->n_tokens >= s->len_cap) {
        *f = ENG_FINISH_LENGTH;
        int r = flush_text(s, q);
        if (r == 1)
            *f = ENG_FINISH_STOP;
        return r < 0 ? r : 1;
    }
    return 0;
}

/* row_tokens[r] of a sequence whose grammar allows no token (grammar.h's limits) */
#define GM_STUCK (-1000)

/* row_tokens[r]: a token sampled from row r of logits, for each of the batch's first nb
 * sequences that asked for logits, in their order. The rows are independent (each sequence
 * has its own sampler), so the engine's threads share them out: with 16 sequences a step
 * samples 16 vocabularies, which one thread would do while the others wait. */
static void sample_rows(sched *s, int nb)
{
    const int V = eng_model_hparams(s->m)->n_vocab;
    int n = 0;
    for (int i = 0; i < nb; i++)
        if (s->batch[i].logits == ENG_LOGITS_LAST) {
            s->row_seq[n] = s->batch_seq[i];
            s->row_smp[n++] = s->batch_seq[i]->smp;
        }
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int r = 0; r < n; r++) {
        float *row = s->logits + (size_t)r * V;
        sched_seq *q = s->row_seq[r];
        if (q->logprobs) /* the sampler changes the row in place */
            memcpy(q->lp_row, row, sizeof *row * (size_t)V);
        if (q->gm)
            memcpy(q->gm_row, row, sizeof *row * (size_t)V);
        s->row_tokens[r] = eng_sampler_sample(s->row_smp[r], row);
        if (q->gm && !eng_gm_allows(q->gm, s->gm_vocab, s->row_tokens[r])) {
            /* the grammar refuses the token drawn: draw again from the allowed ones (the
             * first draw stands when allowed, so the result is drawn from the masked
             * distribution either way, at the cost of a mask only when needed) */
            int n = eng_gm_mask(q->gm, s->gm_vocab, q->gm_row);
            s->row_tokens[r] = n > 0    ? eng_sampler_sample(s->row_smp[r], q->gm_row)
                               : n == 0 ? GM_STUCK
                                        : n;
        }
        if (q->logprobs)
            eng_token_logprob(q->lp_row, V, s->row_tokens[r], q->top_logprobs, &s->row_lp[r]);
    }
}

int sched_step(sched *s)
{
    /* drop what was cancelled */
    for (struct list *l = &s->running;; l = &s->waiting) {
        for (sched_seq *q = l->head, *nx; q; q = nx) {
            nx = q->next;
            if (q->cancelled)
                finish(s, q, 0, ENG_FINISH_CANCELLED);
        }
        if (l == &s->waiting)
            break;
    }
    /* sequences asking for nothing finish at once */
    for (sched_seq *q = s->waiting.head, *nx; q; q = nx) {
        nx = q->next;
        if (q->max_tokens == 0)
            finish(s, q, 0, ENG_FINISH_LENGTH);
    }
    /* admit, oldest first, taking turns between parties (tenants): one that queued many
     * sequences does not hold the others' behind them; with the prefix cache, a sequence
     * whose prompt begins like one still being prefilled waits for it and then starts from
     * its cached blocks, instead of computing the same prefix side by side */
    s->steps++;
    for (sched_seq *q; s->running.n < s->cfg.max_num_seqs && (q = next_to_admit(s));) {
        list_remove(&s->waiting, q);
        q->running = 1;
        q->fresh = 1;
        q->order = s->next_order++;
        note_admitted(s, q->party, q->order);
        count_in(s, q);
        list_push_back(&s->running, q);
        if (s->rdx && q->n_table == 0)
            admit_cached(s, q);
    }
    if (!s->running.n)
        return s->waiting.n;

    /* schedule: decodes first, then prompt chunks, within the token budget */
    int nr = 0, budget = s->cfg.max_num_batched_tokens, nb = 0;
    for (sched_seq *q = s->running.head; q; q = q->next) {
        s->cand[nr++] = q;
        q->in_batch = 0;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nr && budget > 0; i++) {
            sched_seq *q = s->cand[i];
            int need = q->n_tokens - q->n_computed;
            if (!q->running || (pass == 0) != (need == 1) || need <= 0)
                continue;
            int chunk = need < budget ? need : budget;
            int rc, bs = s->cfg.block_size;
            int blocks = (q->n_computed + chunk + bs - 1) / bs - q->n_table;
            int batch_too = batch_could_cover(s, q, blocks);
            while ((rc = cover(s, q, q->n_computed + chunk)) == ENG_EFULL) {
                sched_seq *victim = victim_of(s, q, batch_too);
                if (!victim)
                    break;
                if (victim->in_batch)
                    unbatch(s, victim, &nb, &budget);
                preempt(s, victim);
                if (victim == q)
                    break;
            }
            if (!q->running || rc == ENG_EFULL)
                continue;
            if (rc)
                return rc;
            s->batch[nb] = (struct eng_seq){q->tokens + q->n_computed, chunk, q->n_computed,
                                            q->table,
                                            q->n_computed + chunk == q->n_tokens
                                                ? ENG_LOGITS_LAST
                                                : ENG_LOGITS_NONE};
            s->batch_seq[nb++] = q;
            q->in_batch = 1;
            budget -= chunk;
        }
    if (nb == 0) {
        /* even alone it does not fit: the pool is smaller than its context */
        if (s->running.n == 1 && s->running.head->n_computed > 0) {
            sched_seq *q = s->running.head;
            int r = flush_text(s, q);
            finish(s, q, r < 0 ? r : 0, r == 1 ? ENG_FINISH_STOP : ENG_FINISH_LENGTH);
        }
        return s->running.n + s->waiting.n;
    }
    /* on a device that samples, the logits stay there, but for a step with a sequence
     * that asked for logprobs or has a grammar: those are computed on the host */
    int on_device = s->dev_rows != NULL, n_rows = 0, n_adj = 0;
    for (int i = 0; i < nb && on_device; i++)
        if (s->batch[i].logits == ENG_LOGITS_LAST &&
            (s->batch_seq[i]->logprobs || s->batch_seq[i]->gm))
            on_device = 0;
    size_t need = 0;
    for (int i = 0; i < nb && on_device; i++)
        if (s->batch[i].logits == ENG_LOGITS_LAST)
            need += (size_t)eng_sampler_device_adj(s->batch_seq[i]->smp);
    if (on_device && need > s->dev_adj_cap) {
        struct eng_logit_adj *grown = realloc(s->dev_adj, need * sizeof *grown);
        if (grown) {
            s->dev_adj = grown;
            s->dev_adj_cap = need;
        } else {
            on_device = 0; /* the host sampler needs no more memory */
        }
    }
    for (int i = 0; i < nb && on_device; i++)
        if (s->batch[i].logits == ENG_LOGITS_LAST) {
            struct eng_sample_row *r = &s->dev_rows[n_rows];
            /* no amounts yet: dev_adj may still be NULL, and is not written */
            eng_sampler_device_row(s->batch_seq[i]->smp, r, s->dev_adj ? s->dev_adj + n_adj : NULL);
            r->row = n_rows++;
            r->adj_first = n_adj;
            n_adj += r->n_adj;
        }
    int rc = eng_forward(s->m, s->kv, s->batch, nb, on_device ? NULL : s->logits);
    if (!rc && on_device && n_rows)
        rc = eng_model_sample(s->m, s->dev_rows, n_rows, s->dev_adj, n_adj, s->row_tokens);
    else if (!rc && !on_device)
        sample_rows(s, nb);
    if (rc) {
        for (int i = 0; i < nb; i++)
            finish(s, s->batch_seq[i], rc, ENG_FINISH_STOP);
        return rc;
    }
    int row = 0;
    for (int i = 0; i < nb; i++) {
        sched_seq *q = s->batch_seq[i];
        q->n_computed += s->batch[i].n_new;
        q->fresh = 0; /* (it computed something: sent back now, it is preempted) */
        if (s->batch[i].logits != ENG_LOGITS_LAST)
            continue;
        if (s->rdx && q->generated == 0 && q->n_computed == q->n_tokens)
            /* the prompt is in: share it now with the sequences that wait for it */
            rdx_insert(s->rdx, q->ns, q->tokens, q->n_computed, q->table);
        const struct eng_token_lp *lp = !on_device && q->logprobs ? &s->row_lp[row] : NULL;
        int32_t tok = s->row_tokens[row++];
        enum eng_finish f = ENG_FINISH_STOP;
        int done;
        if (tok == GM_STUCK) { /* the grammar allows nothing more: its limits were reached */
            int r = flush_text(s, q);
            f = ENG_FINISH_LENGTH;
            done = r < 0 ? r : 1;
        } else {
            done = tok < 0 ? tok : take_token(s, q, tok, lp, &f);
        }
        if (done < 0)
            finish(s, q, done, f);
        else if (done)
            finish(s, q, 0, f);
    }
    return s->running.n + s->waiting.n;
}

int sched_check(const sched *s, const char **what)
{
    int n = 0, used = 0;
    for (const sched_seq *r = s->running.head; r; r = r->next, n++) {
        int mine = 0;
        for (const sched_seq *o = s->running.head; o; o = o->next)
            mine += o->counted == r->counted;
        const struct party_count *e = party_slot(s, r->counted);
        if (!r->running || !e->used || e->n != mine) {
            *what = !r->running ? "a sequence on the running list is not running"
                                : "a party's count is not its running sequences'";
            return -1;
        }
    }
    for (int i = 0; i < s->parties_cap; i++) {
        used += s->parties[i].used;
        if (s->parties[i].used && s->parties[i].n < 0) {
            *what = "a party's count is below 0";
            return -1;
        }
    }
    if (n != s->running.n || used != s->parties_used || 2 * used > s->parties_cap) {
        *what = n != s->running.n ? "the running count is not the running list's"
                                  : "the party table's use is miscounted or over half";
        return -1;
    }
    return 0;
}

void sched_get_stats(const sched *s, struct sched_stats *out)
{
    out->running = s->running.n;
    out->waiting = s->waiting.n;
    out->blocks_free = kvc_free_blocks(s->kv);
    out->blocks_total = s->cfg.n_blocks;
    out->preemptions = s->preemptions;
    out->tokens_generated = s->tokens_generated;
    out->tokens_prompt = s->tokens_prompt;
    out->tokens_cached = s->tokens_cached;
    out->blocks_cached = s->rdx ? rdx_held_blocks(s->rdx) : 0;
    out->blocks_evictable = s->rdx ? rdx_evictable_blocks(s->rdx) : 0;
    out->waste_slots = 0;
    for (const sched_seq *q = s->running.head; q; q = q->next)
        if (q->n_table * s->cfg.block_size > q->n_computed)
            out->waste_slots += q->n_table * s->cfg.block_size - q->n_computed;
}
