#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 8

enum kind { K_COUNTER, K_GAUGE, K_HISTOGRAM };

struct series {
    struct series *next;
    char **values;    /* [nlabels] */
    double value;     /* counter, gauge */
    double sum;       /* histogram */
    unsigned long long *buckets; /* [nbounds + 1], not cumulative; last is +Inf */
};

struct gw_metric {
    struct gw_metric *next;
    gw_metrics *reg;
    enum kind kind;
    char *name, *help;
    int nlabels;
    char *labels[MAX_LABELS];
    int nbounds;
    double *bounds;
    struct series *series, **tail; /* kept in creation order for a stable output */
};

struct gw_metrics {
    pthread_mutex_t mu;
    gw_metric *first, **tail;
};

gw_metrics *gw_metrics_create(void)
{
    gw_metrics *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->tail = &r->first;
    return r;
}

static void series_free(struct series *s, int nlabels)
{
    for (int i = 0; i < nlabels; i++)
        free(s->values[i]);
    free(s->values);
    free(s->buckets);
    free(s);
}

static void metric_free(gw_metric *m)
{
    struct series *s = m->series;
    while (s) {
        struct series *n = s->next;
        series_free(s, m->nlabels);
        s = n;
    }
    for (int i = 0; i < m->nlabels; i++)
        free(m->labels[i]);
    free(m->bounds);
    free(m->name);
    free(m->help);
    free(m);
}

void gw_metrics_destroy(gw_metrics *r)
{
    if (!r)
        return;
    gw_metric *m = r->first;
    while (m) {
        gw_metric *n = m->next;
        metric_free(m);
        m = n;
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for names; labels may not contain ':' */
static int valid_name(const char *s, size_t n, int is_label)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (!is_label && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

static gw_metric *reg_add(gw_metrics *r, enum kind kind, const char *name, const char *help,
                          const char *labels, const double *bounds, int nbounds)
{
    if (!valid_name(name, strlen(name), 0))
        return NULL;
    gw_metric *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->reg = r;
    m->kind = kind;
    m->name = strdup(name);
    m->help = strdup(help ? help : "");
    m->tail = &m->series;
    if (!m->name || !m->help)
        goto fail;
    for (const char *p = labels; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (m->nlabels == MAX_LABELS || !valid_name(p, n, 1))
            goto fail;
        if (!(m->labels[m->nlabels++] = strndup(p, n)))
            goto fail;
        p = comma ? comma + 1 : p + n;
    }
    if (kind == K_HISTOGRAM) {
        if (nbounds < 1)
            goto fail;
        m->bounds = malloc(sizeof(double) * (size_t)nbounds);
        if (!m->bounds)
            goto fail;
        for (int i = 0; i < nbounds; i++) {
            if (i > 0 && !(bounds[i] > bounds[i - 1]))
                goto fail;
            m->bounds[i] = bounds[i];
        }
        m->nbounds = nbounds;
    }
    pthread_mutex_lock(&r->mu);
    for (gw_metric *o = r->first; o; o = o->next)
        if (!strcmp(o->name, name)) {
            pthread_mutex_unlock(&r->mu);
            goto fail;
        }
    *r->tail = m;
    r->tail = &m->next;
    pthread_mutex_unlock(&r->mu);
    /* a series without labels exists from the start, at 0: rate() sees its first rise and a
     * dashboard shows 0, not "no data" */
    if (!m->nlabels && kind != K_HISTOGRAM)
        gw_metric_add(m, 0);
    return m;
fail:
    metric_free(m);
    return NULL;
}

gw_metric *gw_metrics_counter(gw_metrics *r, const char *name, const char *help,
                              const char *labels)
{
    return reg_add(r, K_COUNTER, name, help, labels, NULL, 0);
}

gw_metric *gw_metrics_gauge(gw_metrics *r, const char *name, const char *help,
                            const char *labels)
{
    return reg_add(r, K_GAUGE, name, help, labels, NULL, 0);
}

gw_metric *gw_metrics_histogram(gw_metrics *r, const char *name, const char *help,
                                const char *labels, const double *bounds, int nbounds)
{
    return reg_add(r, K_HISTOGRAM, name, help, labels, bounds, nbounds);
}

/* Called with the registry locked. */
static struct series *find_series(gw_metric *m, va_list ap)
{
    const char *vals[MAX_LABELS];
    for (int i = 0; i < m->nlabels; i++) {
        vals[i] = va_arg(ap, const char *);
        if (!vals[i])
            vals[i] = "";
    }
    for (struct series *s = m->series; s; s = s->next) {
        int i = 0;
        while (i < m->nlabels && !strcmp(s->values[i], vals[i]))
            i++;
        if (i == m->nlabels)
            return s;
    }
    struct series *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->values = calloc((size_t)m->nlabels + 1, sizeof(char *));
    if (!s->values)
        goto fail;
    for (int i = 0; i < m->nlabels; i++)
        if (!(s->values[i] = strdup(vals[i])))
            goto fail;
    if (m->kind == K_HISTOGRAM &&
        !(s->buckets = calloc((size_t)m->nbounds + 1, sizeof(unsigned long long))))
        goto fail;
    *m->tail = s;
    m->tail = &s->next;
    return s;
fail:
    series_free(s, m->nlabels);
    return NULL;
}

enum op { OP_ADD, OP_SET, OP_OBSERVE };

static int update(gw_metric *m, enum op op, double v, va_list ap)
{
    pthread_mutex_lock(&m->reg->mu);
    struct series *s = find_series(m, ap);
    if (s) {
        if (op == OP_ADD)
            s->value += v;
        else if (op == OP_SET)
            s->value = v;
        else {
            int b = 0;
            while (b < m->nbounds && v > m->bounds[b])
                b++;
            s->buckets[b]++;
            s->sum += v;
        }
    }
    pthread_mutex_unlock(&m->reg->mu);
    return s ? 0 : -1;
}

int gw_metric_add(gw_metric *m, double v, ...)
{
    va_list ap;
    va_start(ap, v);
    int rc = update(m, OP_ADD, v, ap);
    va_end(ap);
    return rc;
}

int gw_metric_set(gw_metric *m, double v, ...)
{
    va_list ap;
    va_start(ap, v);
    int rc = update(m, OP_SET, v, ap);
    va_end(ap);
    return rc;
}

int gw_metric_observe(gw_metric *m, double v, ...)
{
    va_list ap;
    va_start(ap, v);
    int rc = update(m, OP_OBSERVE, v, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------ rendering */

struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* label values escape \ " and newline; HELP text escapes \ and newline */
static void put_escaped(struct buf *b, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            puts_(b, "\\\\");
        else if (*s == '\n')
            puts_(b, "\\n");
        else if (quote && *s == '"')
            puts_(b, "\\\"");
        else
            put(b, s, 1);
    }
}

static void put_num(struct buf *b, double v)
{
    char tmp[64];
    if (isnan(v))
        snprintf(tmp, sizeof tmp, "NaN");
    else if (isinf(v))
        snprintf(tmp, sizeof tmp, v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(long long)v && fabs(v) < 1e15)
        snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    else
        snprintf(tmp, sizeof tmp, "%.17g", v);
    puts_(b, tmp);
}

/* name{labels[,extra]} */
static void put_series_name(struct buf *b, const gw_metric *m, const char *suffix,
                            const struct series *s, const char *extra_key, const char *extra)
{
    puts_(b, m->name);
    puts_(b, suffix);
    if (m->nlabels == 0 && !extra_key)
        return;
    puts_(b, "{");
    for (int i = 0; i < m->nlabels; i++) {
        if (i)
            puts_(b, ",");
        puts_(b, m->labels[i]);
        puts_(b, "=\"");
        put_escaped(b, s->values[i], 1);
        puts_(b, "\"");
    }
    if (extra_key) {
        if (m->nlabels)
            puts_(b, ",");
        puts_(b, extra_key);
        puts_(b, "=\"");
        puts_(b, extra);
        puts_(b, "\"");
    }
    puts_(b, "}");
}

static void render_metric(struct buf *b, const gw_metric *m)
{
    static const char *const type[] = {"counter", "gauge", "histogram"};
    puts_(b, "# HELP ");
    puts_(b, m->name);
    puts_(b, " ");
    put_escaped(b, m->help, 0);
    puts_(b, "\n# TYPE ");
    puts_(b, m->name);
    puts_(b, " ");
    puts_(b, type[m->kind]);
    puts_(b, "\n");
    for (const struct series *s = m->series; s; s = s->next) {
        if (m->kind != K_HISTOGRAM) {
            put_series_name(b, m, "", s, NULL, NULL);
            puts_(b, " ");
            put_num(b, s->value);
            puts_(b, "\n");
            continue;
        }
        unsigned long long cum = 0;
        for (int i = 0; i <= m->nbounds; i++) {
            char le[64];
            cum += s->buckets[i];
            if (i < m->nbounds)
                snprintf(le, sizeof le, "%.15g", m->bounds[i]);
            else
                snprintf(le, sizeof le, "+Inf");
            put_series_name(b, m, "_bucket", s, "le", le);
            puts_(b, " ");
            put_num(b, (double)cum);
            puts_(b, "\n");
        }
        put_series_name(b, m, "_sum", s, NULL, NULL);
        puts_(b, " ");
        put_num(b, s->sum);
        puts_(b, "\n");
        put_series_name(b, m, "_count", s, NULL, NULL);
        puts_(b, " ");
        put_num(b, (double)cum);
        puts_(b, "\n");
    }
}

int gw_metrics_forget(gw_metrics *r, const char *label, const char *value)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (gw_metric *m = r->first; m; m = m->next) {
        int k = 0;
        while (k < m->nlabels && strcmp(m->labels[k], label))
            k++;
        if (k == m->nlabels)
            continue;
        struct series **at = &m->series;
        m->tail = &m->series;
        while (*at) {
            struct series *s = *at;
            if (!strcmp(s->values[k], value)) {
                *at = s->next;
                series_free(s, m->nlabels);
                n++;
            } else {
                at = &s->next;
                m->tail = at;
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

char *gw_metrics_render(gw_metrics *r, size_t *len)
{
    struct buf b = {0};
    puts_(&b, "");
    pthread_mutex_lock(&r->mu);
    for (const gw_metric *m = r->first; m; m = m->next)
        render_metric(&b, m);
    pthread_mutex_unlock(&r->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}
