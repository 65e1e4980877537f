#include "judge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A node of the forest: a split sends x to left when x[feature] <= value (the feature
 * read as a float, as the trainer reads it), else to right; a leaf (feature -1) adds
 * value, its tree's output already times the learning rate, to the log-odds. */
struct judge_node {
    int feature;
    int left, right;
    double value;
};

#include "judge_model.inc"

const char *gw_judge_model_name(void)
{
    return judge_name;
}

/* the layers read: the embeddings, the middle one, the last */
void gw_judge_layers(const emb_model *m, int *layers)
{
    int n = emb_layers(m);
    layers[0] = 0;
    layers[1] = n / 2;
    layers[2] = n;
}

/* text k's word tokens of the batch's states (all: [GW_JUDGE_LAYERS][total][dim]; its
 * tokens ids[o..o + n)), unit-normalised, into t */
static int keep_words(const emb_model *m, const float *all, const int32_t *ids, int total,
                      int o, int n, int dim, struct gw_judge_text *t)
{
    int *keep = malloc(sizeof *keep * (size_t)n);
    int nw = 0;
    if (!keep)
        return EMB_ENOMEM;
    for (int i = 1; i + 1 < n; i++) /* [CLS] first and [SEP] last are no words */
        if (emb_token_is_word(m, ids[o + i]))
            keep[nw++] = i;
    if (!nw)
        keep[nw++] = 0;
    t->states = malloc(sizeof(float) * GW_JUDGE_LAYERS * (size_t)nw * dim);
    t->ids = malloc(sizeof *t->ids * (size_t)nw);
    if (!t->states || !t->ids) {
        free(keep);
        return EMB_ENOMEM;
    }
    for (int l = 0; l < GW_JUDGE_LAYERS; l++)
        for (int i = 0; i < nw; i++) {
            const float *src = all + ((size_t)l * total + o + keep[i]) * dim;
            float *dst = t->states + ((size_t)l * nw + i) * dim;
            double norm = 0;
            for (int j = 0; j < dim; j++)
                norm += (double)src[j] * src[j];
            float inv = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
            for (int j = 0; j < dim; j++)
                dst[j] = src[j] * inv;
            t->ids[i] = ids[o + keep[i]];
        }
    free(keep);
    t->n = nw;
    t->dim = dim;
    return 0;
}

int gw_judge_texts(emb_model *m, const char *const *texts, const size_t *lens, int n,
                   struct gw_judge_text *out)
{
    for (int k = 0; k < n; k++)
        memset(&out[k], 0, sizeof out[k]);
    if (n <= 0)
        return EMB_EINVAL;
    const int dim = emb_dim(m);
    const size_t cap = (size_t)n * (size_t)emb_max_tokens(m);
    int layers[GW_JUDGE_LAYERS];
    gw_judge_layers(m, layers);
    float *all = malloc(sizeof(float) * GW_JUDGE_LAYERS * cap * dim);
    int32_t *ids = malloc(sizeof *ids * cap);
    int *off = malloc(sizeof *off * ((size_t)n + 1));
    int rc = all && ids && off ? 0 : EMB_ENOMEM;
    if (!rc)
        rc = emb_token_states(m, texts, lens, n, GW_JUDGE_LAYERS, layers, all, ids, off);
    for (int k = 0; !rc && k < n; k++)
        rc = keep_words(m, all, ids, off[n], off[k], off[k + 1] - off[k], dim, &out[k]);
    free(all);
    free(ids);
    free(off);
    for (int k = 0; rc && k < n; k++)
        gw_judge_text_free(&out[k]);
    return rc;
}

int gw_judge_kept(const emb_model *m, const struct emb_keep *keep, int i,
                  struct gw_judge_text *out)
{
    memset(out, 0, sizeof *out);
    int total = keep->off[keep->n];
    int rc = keep_words(m, keep->states, keep->ids, total, keep->off[i],
                        keep->off[i + 1] - keep->off[i], emb_dim(m), out);
    if (rc)
        gw_judge_text_free(out);
    return rc;
}

int gw_judge_text_copy(const struct gw_judge_text *t, struct gw_judge_text *out)
{
    size_t ns = (size_t)GW_JUDGE_LAYERS * (size_t)t->n * (size_t)t->dim;
    out->states = malloc(sizeof(float) * ns);
    out->ids = malloc(sizeof *out->ids * (size_t)t->n);
    if (!out->states || !out->ids) {
        gw_judge_text_free(out);
        return -1;
    }
    memcpy(out->states, t->states, sizeof(float) * ns);
    memcpy(out->ids, t->ids, sizeof *out->ids * (size_t)t->n);
    out->n = t->n;
    out->dim = t->dim;
    return 0;
}

void gw_judge_text_free(struct gw_judge_text *t)
{
    free(t->states);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* the smallest and second smallest of v[0..n) (the smallest twice when n is 1), the mean,
 * the counts under 0.5 and 0.7 */
struct matches {
    float min, min2, mean;
    int under5, under7;
};

static struct matches summarize(const float *v, int n)
{
    struct matches s = {INFINITY, INFINITY, 0, 0, 0};
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (v[i] < s.min) {
            s.min2 = s.min;
            s.min = v[i];
        } else if (v[i] < s.min2) {
            s.min2 = v[i];
        }
        sum += v[i];
        s.under5 += v[i] < 0.5f;
        s.under7 += v[i] < 0.7f;
    }
    if (n == 1)
        s.min2 = s.min;
    s.mean = (float)(sum / n);
    return s;
}

/* how many distinct ids of a[0..na) are not in b[0..nb) */
static int distinct_not_in(const int32_t *a, int na, const int32_t *b, int nb)
{
    int count = 0;
    for (int i = 0; i < na; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = a[j] == a[i];
        for (int j = 0; j < nb && !seen; j++)
            seen = b[j] == a[i];
        count += !seen;
    }
    return count;
}

void gw_judge_features(const struct gw_judge_text *a, const struct gw_judge_text *b, double sim,
                       float *f)
{
    const int dim = a->dim;
    float *row = malloc(sizeof(float) * ((size_t)a->n + b->n));
    float *col = row ? row + a->n : NULL;
    int k = 0;
    f[k++] = (float)sim;
    for (int l = 0; l < GW_JUDGE_LAYERS; l++) {
        if (!row) { /* out of memory: features that make no veto likelier */
            for (int i = 0; i < 10; i++)
                f[k++] = i < 6 ? 1.0f : 0.0f;
            continue;
        }
        for (int j = 0; j < b->n; j++)
            col[j] = -INFINITY;
        for (int i = 0; i < a->n; i++) {
            const float *x = a->states + ((size_t)l * a->n + i) * dim;
            row[i] = -INFINITY;
            for (int j = 0; j < b->n; j++) {
                const float *y = b->states + ((size_t)l * b->n + j) * dim;
                double dot = 0;
                for (int d = 0; d < dim; d++)
                    dot += (double)x[d] * y[d];
                float s = (float)dot;
                row[i] = s > row[i] ? s : row[i];
                col[j] = s > col[j] ? s : col[j];
            }
        }
        struct matches r = summarize(row, a->n), c = summarize(col, b->n);
        f[k++] = r.min;
        f[k++] = c.min;
        f[k++] = r.min2;
        f[k++] = c.min2;
        f[k++] = r.mean;
        f[k++] = c.mean;
        f[k++] = (float)r.under5;
        f[k++] = (float)c.under5;
        f[k++] = (float)r.under7;
        f[k++] = (float)c.under7;
    }
    free(row);
    int only_a = distinct_not_in(a->ids, a->n, b->ids, b->n);
    int only_b = distinct_not_in(b->ids, b->n, a->ids, a->n);
    int da = distinct_not_in(a->ids, a->n, NULL, 0);
    int both = da - only_a, either = da + only_b;
    f[k++] = (float)a->n;
    f[k++] = (float)b->n;
    f[k++] = (float)abs(a->n - b->n);
    f[k++] = (float)only_a;
    f[k++] = (float)only_b;
    f[k++] = either ? (float)both / (float)either : 0.0f;
}

double gw_judge_score(const float *f)
{
    double raw = judge_init;
    for (int t = 0; t < (int)(sizeof judge_roots / sizeof judge_roots[0]); t++) {
        const struct judge_node *n = &judge_nodes[judge_roots[t]];
        while (n->feature >= 0)
            n = &judge_nodes[(double)f[n->feature] <= n->value ? n->left : n->right];
        raw += n->value;
    }
    return 1.0 / (1.0 + exp(-raw));
}
