/*
 * tenants — keys, policies, limits and usage (tenants.h).
 */
#include "tenants.h"

#include "http_impl.h"
#include "log.h"
#include "oai.h"

#include <event2/event.h>
#include <jansson.h>
#include <math.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct key_row {
    uint8_t sha[32];
    int64_t tenant;
};

struct gw_tenants {
    const struct gw_config *cfg;
    store *st;
    struct event *refresh;
    struct gw_tenant **t; /* never freed while running: requests borrow them */
    int nt, capt;
    struct key_row *keys; /* sorted by sha */
    int nkeys;
    gw_metrics *reg;
    gw_metric *m_requests, *m_tokens, *m_auth_fail;
    int unread; /* the last reread failed (said once, and once when it reads again) */
};

/* ------------------------------------------------------------------ policy */

static int get_num(json_t *o, const char *k, double lo, double hi, double *out, char *err,
                   size_t errlen)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        snprintf(err, errlen, "policy: %s must be a number in %g..%g", k, lo, hi);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

int gw_policy_parse(const char *text, struct gw_tenant_policy *p, char *err, size_t errlen)
{
    *p = (struct gw_tenant_policy){.threshold = -1, .ttl_s = -1, .share_prefix = -1,
                                   .rpm = -1, .tpm = -1, .concurrency = -1,
                                   .monthly_tokens = -1};
    json_error_t je;
    json_t *o = json_loads(text && *text ? text : "{}", 0, &je);
    if (!o) {
        snprintf(err, errlen, "policy: not valid JSON: %s (column %d)", je.text, je.column);
        return -1;
    }
    if (!json_is_object(o)) {
        snprintf(err, errlen, "policy: not a JSON object");
        json_decref(o);
        return -1;
    }
    static const char *const known[] = {
        "similarity_threshold", "ttl_s", "max_entries", "max_bytes", "share_prefix_cache",
        "requests_per_minute", "tokens_per_minute", "concurrent_requests", "monthly_tokens",
        "models", NULL};
    const char *k;
    json_t *v;
    int rc = -1;
    json_object_foreach(o, k, v)
    {
        int ok = 0;
        for (int i = 0; known[i]; i++)
            ok |= !strcmp(k, known[i]);
        if (!ok) {
            snprintf(err, errlen, "policy: unknown key '%s'", k);
            goto out;
        }
    }
    double d;
    struct {
        const char *key;
        int64_t *field;
    } ints[] = {{"ttl_s", &p->ttl_s},
                {"max_entries", &p->max_entries},
                {"max_bytes", &p->max_bytes},
                {"requests_per_minute", &p->rpm},
                {"tokens_per_minute", &p->tpm},
                {"concurrent_requests", &p->concurrency},
                {"monthly_tokens", &p->monthly_tokens}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        d = -1;
        if (get_num(o, ints[i].key, 0, 1e15, &d, err, errlen))
            goto out;
        if (d != floor(d)) { /* 0.5 a minute would be cut to 0, which means no limit */
            snprintf(err, errlen, "policy: %s must be a whole number", ints[i].key);
            goto out;
        }
        if (d >= 0)
            *ints[i].field = (int64_t)d;
    }
    if (get_num(o, "similarity_threshold", 0, 1, &p->threshold, err, errlen))
        goto out;
    json_t *sp = json_object_get(o, "share_prefix_cache");
    if (sp && !json_is_boolean(sp)) {
        snprintf(err, errlen, "policy: share_prefix_cache must be true or false");
        goto out;
    }
    if (sp)
        p->share_prefix = json_is_true(sp);
    json_t *models = json_object_get(o, "models");
    if (models) {
        size_t i;
        json_t *m;
        if (!json_is_array(models) || json_array_size(models) > 8) {
            snprintf(err, errlen, "policy: models must be an array of at most 8 names");
            goto out;
        }
        if (!json_array_size(models)) { /* taken for "every model" it would open them all */
            snprintf(err, errlen, "policy: models must name at least one model (leave the "
                     "key out to allow every model)");
            goto out;
        }
        json_array_foreach(models, i, m)
        {
            if (!json_is_string(m) || json_string_length(m) >= sizeof p->models[0]) {
                snprintf(err, errlen, "policy: models must be names");
                goto out;
            }
            snprintf(p->models[p->nmodels++], sizeof p->models[0], "%s", json_string_value(m));
        }
    }
    rc = 0;
out:
    json_decref(o);
    return rc;
}

char *gw_policy_normal(const char *json)
{
    json_t *o = json_loads(json, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return strdup(json);
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        double x = json_real_value(v); /* ("1e3" and "5.0" are whole numbers read as reals) */
        if (json_is_real(v) && strcmp(k, "similarity_threshold") && x == floor(x) &&
            fabs(x) < 9e18)
            json_object_set_new(o, k, json_integer((json_int_t)x));
    }
    /* 15 digits: 0.97 is said "0.97", not as the double nearest it */
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(o);
    return text;
}

int gw_policy_store(store *st, int64_t tenant, const char *json)
{
    char *text = gw_policy_normal(json);
    int rc = text ? store_tenant_set_policy(st, tenant, text) : STORE_ENOMEM;
    free(text);
    return rc;
}

int gw_policy_check(const char *text, const char *chat_model, const char *embed_model,
                    struct gw_tenant_policy *p, char *err, size_t errlen)
{
    size_t n = text ? strspn(text, " \t\r\n") : 0;
    if (!text || !text[n]) { /* an empty body or variable would have erased every limit */
        snprintf(err, errlen, "policy: empty; give {} to clear a tenant's policy");
        return -1;
    }
    /* a key given twice: which one holds would be the JSON reader's choice (stored
     * policies are read as they were accepted) */
    json_error_t je;
    json_t *dup = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!dup && strstr(je.text, "duplicate")) {
        snprintf(err, errlen, "policy: %s", je.text);
        return -1;
    }
    json_decref(dup);
    if (gw_policy_parse(text, p, err, errlen))
        return -1;
    for (int i = 0; i < p->nmodels; i++)
        if (strcmp(p->models[i], chat_model) && strcmp(p->models[i], embed_model)) {
            snprintf(err, errlen, "policy: models names '%s', which this server does not "
                     "serve (its models: %s, %s)", p->models[i], chat_model, embed_model);
            return -1;
        }
    return 0;
}

int gw_usage_day_ok(const char *day)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (strlen(day) != 10 || day[4] != '-' || day[7] != '-')
        return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (day[i] < '0' || day[i] > '9'))
            return 0;
    int y = atoi(day), m = atoi(day + 5), d = atoi(day + 8);
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= mdays[m - 1] && (m != 2 || d <= 28 + leap);
}

void gw_policy_cache_limits(const char *policy, int64_t configured_ttl_s, int64_t *ttl_s,
                            int64_t *max_entries, int64_t *max_bytes)
{
    struct gw_tenant_policy pol;
    char err[160];
    int ok = policy && gw_policy_parse(policy, &pol, err, sizeof err) == 0;
    *ttl_s = ok && pol.ttl_s >= 0 ? pol.ttl_s : configured_ttl_s;
    if (max_entries)
        *max_entries = ok ? pol.max_entries : 0;
    if (max_bytes)
        *max_bytes = ok ? pol.max_bytes : 0;
}

/* ------------------------------------------------------------------ keys */

int gw_key_make(store *st, int64_t tenant, char *key, size_t keylen, char *prefix,
                size_t prefixlen)
{
    uint8_t rnd[24], sha[32];
    if (keylen < 52 || prefixlen < 13 || RAND_bytes(rnd, sizeof rnd) != 1)
        return STORE_EINVAL;
    int k = snprintf(key, keylen, "cg-");
    for (size_t i = 0; i < sizeof rnd; i++)
        k += snprintf(key + k, keylen - (size_t)k, "%02x", rnd[i]);
    OPENSSL_cleanse(rnd, sizeof rnd);
    snprintf(prefix, prefixlen, "%.12s", key);
    SHA256((const unsigned char *)key, strlen(key), sha);
    return store_key_add(st, tenant, prefix, sha);
}

static int cmp_key(const void *a, const void *b)
{
    return memcmp(((const struct key_row *)a)->sha, ((const struct key_row *)b)->sha, 32);
}

/* ------------------------------------------------------------------ the tenant table */

static struct gw_tenant *find(gw_tenants *t, int64_t id)
{
    for (int i = 0; i < t->nt; i++)
        if (t->t[i]->id == id)
            return t->t[i];
    return NULL;
}

const char *gw_tenants_label(gw_tenants *t, int64_t id)
{
    struct gw_tenant *tn = find(t, id);
    return tn && !tn->deleted ? tn->label : NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int this_month(char since[11])
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    if (since)
        snprintf(since, 11, "%04d-%02d-01", tm.tm_year + 1900, tm.tm_mon + 1);
    return (tm.tm_year + 1900) * 12 + tm.tm_mon;
}

/* Tokens the tenant spent this month, from the usage table. */
static int64_t month_usage(store *st, int64_t tenant)
{
    char since[11];
    this_month(since);
    struct store_usage *u;
    int n;
    int64_t sum = 0;
    if (store_usage_list(st, tenant, since, &u, &n) == STORE_OK) {
        for (int i = 0; i < n; i++)
            sum += u[i].prompt_tokens + u[i].completion_tokens;
        free(u);
    }
    return sum;
}

/* The policy "{}" gives: everything from the configuration. */
static void policy_defaults(struct gw_tenant_policy *p)
{
    char none[8];
    gw_policy_parse("{}", p, none, sizeof none);
}

static int cmp_tenant_id(const void *a, const void *b)
{
    const struct gw_tenant *x = *(struct gw_tenant *const *)a, *y = *(struct gw_tenant *const *)b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The metrics_max_tenants oldest live tenants (ids grow with creation) have labels of their
 * own and the rest share "other": the same after a restart, and a deleted tenant's label
 * goes to the next in line. */
static void assign_labels(gw_tenants *t)
{
    struct gw_tenant **live = malloc(sizeof *live * (size_t)(t->nt ? t->nt : 1));
    if (!live)
        return; /* the labels stay as they were */
    int n = 0;
    for (int i = 0; i < t->nt; i++)
        if (!t->t[i]->deleted)
            live[n++] = t->t[i];
    qsort(live, (size_t)n, sizeof *live, cmp_tenant_id);
    for (int i = 0; i < n; i++)
        live[i]->label = i < t->cfg->tenants_metrics_max ? live[i]->name : "other";
    free(live);
}

/* A deleted tenant's series go from the metrics, so that tenants made and deleted do not
 * grow /metrics past metrics_max_tenants, and a tenant made again under the name starts
 * from 0: also when this reload is the first to see both the deletion and the new tenant
 * (the CLI's delete and create within a second), which has had no request yet. Those that
 * shared "other" stay counted there. */
static void forget_deleted(gw_tenants *t)
{
    for (int i = 0; i < t->nt; i++) {
        struct gw_tenant *tn = t->t[i];
        if (!tn->deleted || tn->forgotten || !t->reg)
            continue;
        tn->forgotten = 1;
        if (strcmp(tn->label, "other"))
            gw_metrics_forget(t->reg, "tenant", tn->name);
    }
}

static int64_t limit(int64_t pol, int64_t def);
static void refill(gw_tenants *t, struct gw_tenant *tn);

/* A per-minute limit changed on a tenant in use: what it used this minute stays used, so a
 * limit raised adds the difference to what is left (raised from 1 to 100 with the 1 used,
 * 99 are left, not the 1 a minute's refill at the new rate would give back), and one
 * lowered caps it. A limit set where there was none starts whole (the bucket was full). */
static void rebucket(gw_tenants *t, struct gw_tenant *tn, const struct gw_tenant_policy *pol)
{
    refill(t, tn); /* what the old limit gave back until now */
    int64_t rpm = limit(tn->pol.rpm, t->cfg->tenants_rpm);
    int64_t to = limit(pol->rpm, t->cfg->tenants_rpm);
    if (rpm && to > rpm)
        tn->req_bucket += (double)(to - rpm);
    int64_t tpm = limit(tn->pol.tpm, t->cfg->tenants_tpm);
    to = limit(pol->tpm, t->cfg->tenants_tpm);
    if (tpm && to > tpm)
        tn->tok_bucket += (double)(to - tpm);
    /* (refill() with the new policy caps them at a lowered limit) */
}

/* A reread that failed, said once while it goes on failing; and that it reads again. */
static void reread(gw_tenants *t, int rc)
{
    if (rc && !t->unread)
        gw_log_kv(GW_LOG_ERROR, "cannot read the tenants and keys; those read before stay in "
                  "force", "error", store_strerror(rc), NULL);
    else if (!rc && t->unread)
        gw_log_kv(GW_LOG_INFO, "the tenants and keys are read again", NULL);
    t->unread = rc != 0;
}

void gw_tenants_reload(gw_tenants *t)
{
    struct store_tenant *list;
    int n, rc = store_tenant_list(t->st, &list, &n);
    if (rc == STORE_OK) {
        for (int i = 0; i < t->nt; i++)
            t->t[i]->deleted = 1;
        for (int i = 0; i < n; i++) {
            struct gw_tenant *tn = find(t, list[i].id);
            if (!tn) {
                if (t->nt == t->capt) {
                    int cap = t->capt ? t->capt * 2 : 16;
                    struct gw_tenant **a = realloc(t->t, sizeof *a * (size_t)cap);
                    if (!a)
                        break;
                    t->t = a;
                    t->capt = cap;
                }
                if (!(tn = calloc(1, sizeof *tn)))
                    break;
                tn->id = list[i].id;
                tn->refill_s = now_s();
                tn->req_bucket = tn->tok_bucket = HUGE_VAL; /* full: refill() caps them */
                tn->month = this_month(NULL);
                tn->month_used = month_usage(t->st, tn->id);
                tn->label = "other"; /* until assign_labels() */
                tn->held_ttl_s = -1;
                policy_defaults(&tn->pol);
                t->t[t->nt++] = tn;
            }
            snprintf(tn->name, sizeof tn->name, "%s", list[i].name);
            tn->deleted = 0;
            char err[400];
            struct gw_tenant_policy pol;
            int bad = gw_policy_parse(list[i].policy, &pol, err, sizeof err) != 0;
            if (bad) { /* stored by an older version that took it: the defaults, said once */
                if (!tn->policy_refused)
                    gw_log_kv(GW_LOG_ERROR, "tenant policy refused; the defaults apply until "
                              "it is set again", "tenant", tn->name, "error", err, NULL);
                policy_defaults(&pol);
            }
            tn->policy_refused = bad;
            /* capacity overrides go to the store only when they change (it holds the
             * entries to them at once); so does the TTL, which the entries stored before are
             * held to as well (the operator's retention limit) */
            if (pol.max_entries != tn->pol.max_entries || pol.max_bytes != tn->pol.max_bytes)
                store_set_limits(t->st, tn->id, pol.max_entries, pol.max_bytes);
            int64_t ttl = pol.ttl_s >= 0 ? pol.ttl_s : t->cfg->cache_ttl_s;
            if (ttl != tn->held_ttl_s && ttl > 0)
                store_apply_limits(t->st, tn->id, ttl * 1000);
            tn->held_ttl_s = ttl;
            rebucket(t, tn, &pol);
            tn->pol = pol;
        }
        for (int i = 0; i < n; i++)
            store_tenant_deinit(&list[i]);
        free(list);
        assign_labels(t);
        forget_deleted(t);
    }
    uint8_t(*sha)[32];
    int64_t *tenants;
    int nk;
    int krc = store_key_all(t->st, &sha, &tenants, &nk);
    reread(t, rc ? rc : krc);
    if (krc == STORE_OK) {
        struct key_row *keys = malloc(sizeof *keys * (size_t)(nk ? nk : 1));
        if (keys) {
            for (int i = 0; i < nk; i++) {
                memcpy(keys[i].sha, sha[i], 32);
                keys[i].tenant = tenants[i];
            }
            qsort(keys, (size_t)nk, sizeof *keys, cmp_key);
            free(t->keys);
            t->keys = keys;
            t->nkeys = nk;
        }
        free(sha);
        free(tenants);
    }
}

static void on_refresh(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gw_tenants_reload(arg);
}

gw_tenants *gw_tenants_create(const struct gw_config *cfg, store *st, struct event_base *base,
                              gw_metrics *m, char *err, size_t errlen)
{
    gw_tenants *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->cfg = cfg;
    t->st = st;
    t->reg = m;
    gw_tenants_reload(t);
    if (!find(t, 1)) {
        snprintf(err, errlen, "the store has no default tenant");
        gw_tenants_destroy(t);
        return NULL;
    }
    t->refresh = event_new(base, -1, EV_PERSIST, on_refresh, t);
    struct timeval sec = {1, 0};
    if (!t->refresh || event_add(t->refresh, &sec)) {
        snprintf(err, errlen, "out of memory");
        gw_tenants_destroy(t);
        return NULL;
    }
    t->m_requests = gw_metrics_counter(m, "cachegate_tenant_requests_total",
                                       "Requests per tenant, by outcome (ok, error: an error "
                                       "reply after admission, cancelled: the client left "
                                       "before the whole answer, busy: refused for the "
                                       "engine's full queue, rate_limited, "
                                       "quota_exceeded).",
                                       "tenant,result");
    t->m_tokens = gw_metrics_counter(m, "cachegate_tenant_tokens_total",
                                     "Tokens per tenant: prompt and completion (spent), "
                                     "saved (served from the answer caches).",
                                     "tenant,kind");
    t->m_auth_fail = gw_metrics_counter(m, "cachegate_auth_failures_total",
                                        "Requests refused for a missing or unknown API key.",
                                        NULL);
    return t;
}

void gw_tenants_destroy(gw_tenants *t)
{
    if (!t)
        return;
    if (t->refresh)
        event_free(t->refresh);
    for (int i = 0; i < t->nt; i++)
        free(t->t[i]);
    free(t->t);
    free(t->keys);
    free(t);
}

/* ------------------------------------------------------------------ requests */

void gw_tenants_auth_failed(gw_tenants *t)
{
    gw_metric_add(t->m_auth_fail, 1);
}

/* Whether the request also gives a key other than key: on another Authorization line, or
 * in api-key or x-api-key (a proxy on the way added its own). */
static int another_key(struct gw_req *r, const char *key)
{
    static const char *const names[] = {"Authorization", "api-key", "x-api-key"};
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        const char *v;
        for (int i = 0; (v = gw_req_header_at(r, names[n], i)); i++) {
            if (n == 0 && strncasecmp(v, "Bearer ", 7))
                continue; /* another scheme (Basic) carries no key of this server */
            if (n == 0)
                for (v += 7; *v == ' ';)
                    v++;
            if (*v && strcmp(v, key))
                return 1;
        }
    }
    return 0;
}

struct gw_tenant *gw_tenants_auth(gw_tenants *t, struct gw_req *r)
{
    if (!t->cfg->tenants_auth) {
        struct gw_tenant *tn = find(t, 1);
        if (tn)
            gw_req_set_tenant(r, tn->name, NULL);
        return tn;
    }
    /* Authorization: Bearer KEY (on any of its lines: a proxy may have put its own Basic
     * line first), or the api-key (Azure's SDKs) or x-api-key header */
    const char *auth = gw_req_header(r, "Authorization"), *key = NULL, *v;
    for (int i = 0; !key && (v = gw_req_header_at(r, "Authorization", i)); i++)
        if (!strncasecmp(v, "Bearer ", 7))
            for (key = v + 7; *key == ' ';)
                key++;
    if (!key && (!(key = gw_req_header(r, "api-key")) || !*key))
        key = gw_req_header(r, "x-api-key");
    if (key && *key && another_key(r, key)) {
        gw_tenants_auth_failed(t);
        gw_reply_error(r, 400, "Two different API keys were sent (in Authorization, api-key or "
                       "x-api-key): send one.", NULL, "conflicting_api_keys");
        return NULL;
    }
    if (key && *key) {
        struct key_row probe;
        SHA256((const unsigned char *)key, strlen(key), probe.sha);
        struct key_row *k = bsearch(&probe, t->keys, (size_t)t->nkeys, sizeof *t->keys, cmp_key);
        /* the bsearch compared digests, which say nothing about the key; confirm anyway in
         * constant time */
        if (k && CRYPTO_memcmp(k->sha, probe.sha, 32) == 0) {
            struct gw_tenant *tn = find(t, k->tenant);
            if (tn && !tn->deleted) {
                gw_req_set_tenant(r, tn->name, key);
                return tn;
            }
        }
    }
    gw_tenants_auth_failed(t);
    gw_reply_error(r, 401,
                   (key && *key) || auth
                       ? "Incorrect API key provided."
                       : "You didn't provide an API key. Send it as Authorization: Bearer KEY.",
                   NULL, "invalid_api_key");
    return NULL;
}

int gw_tenant_allows(const struct gw_tenant *tn, const char *model)
{
    if (!tn->pol.nmodels)
        return 1;
    for (int i = 0; i < tn->pol.nmodels; i++)
        if (!strcmp(tn->pol.models[i], model))
            return 1;
    return 0;
}

int gw_tenants_model_ok(struct gw_tenant *tn, struct gw_req *r, const char *model)
{
    if (gw_tenant_allows(tn, model))
        return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "The model `%.64s` does not exist or you do not have access to it.",
             model);
    gw_reply_error(r, 404, msg, "model", "model_not_found");
    return -1;
}

static int64_t limit(int64_t pol, int64_t def)
{
    return pol >= 0 ? pol : def;
}

static void refill(gw_tenants *t, struct gw_tenant *tn)
{
    double now = now_s(), dt = now - tn->refill_s;
    tn->refill_s = now;
    int64_t rpm = limit(tn->pol.rpm, t->cfg->tenants_rpm);
    int64_t tpm = limit(tn->pol.tpm, t->cfg->tenants_tpm);
    /* no limit: kept full, so a limit set later starts with its whole allowance */
    tn->req_bucket = rpm ? fmin((double)rpm, tn->req_bucket + dt * (double)rpm / 60) : HUGE_VAL;
    tn->tok_bucket = tpm ? fmin((double)tpm, tn->tok_bucket + dt * (double)tpm / 60) : HUGE_VAL;
    int month = this_month(NULL);
    if (month != tn->month) {
        tn->month = month;
        tn->month_used = 0;
    }
}

/* A duration as OpenAI's x-ratelimit-reset-* headers write it: "0.5s", "12s", "6m0s". */
static void reset_text(double s, char *out, size_t len)
{
    if (s < 0.001)
        snprintf(out, len, "0s");
    else if (s < 59.95) /* (what "%.3g" writes as 60 is "1m0s") */
        snprintf(out, len, "%.3gs", s);
    else
        snprintf(out, len, "%ldm%lds", lround(s) / 60, lround(s) % 60);
}

/* One pair of limit and bucket as OpenAI's x-ratelimit-{limit,remaining,reset}-KIND headers:
 * what it allows a minute, what is left now, and when it is whole again. */
static void ratelimit_headers(struct gw_req *r, const char *kind, int64_t per_minute,
                              double bucket)
{
    char name[48], v[32];
    snprintf(name, sizeof name, "x-ratelimit-limit-%s", kind);
    snprintf(v, sizeof v, "%lld", (long long)per_minute);
    gw_reply_header_set(r, name, v); /* (set again once reserved) */
    snprintf(name, sizeof name, "x-ratelimit-remaining-%s", kind);
    snprintf(v, sizeof v, "%lld", (long long)fmax(0, floor(bucket)));
    gw_reply_header_set(r, name, v);
    snprintf(name, sizeof name, "x-ratelimit-reset-%s", kind);
    reset_text(((double)per_minute - bucket) * 60 / (double)per_minute, v, sizeof v);
    gw_reply_header_set(r, name, v);
}

/* The headers of the limits a tenant has, as they stand. */
static void limit_headers(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r)
{
    int64_t rpm = limit(tn->pol.rpm, t->cfg->tenants_rpm);
    int64_t tpm = limit(tn->pol.tpm, t->cfg->tenants_tpm);
    if (rpm)
        ratelimit_headers(r, "requests", rpm, tn->req_bucket);
    if (tpm)
        ratelimit_headers(r, "tokens", tpm, tn->tok_bucket);
}

/* A 429: code rate_limit_exceeded (type "requests", or "tokens" where tokens is set: the
 * limit met, as OpenAI says it) or insufficient_quota. */
static int refuse(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r, double wait_s,
                  const char *code, const char *msg, int tokens)
{
    limit_headers(t, tn, r);
    gw_metric_add(t->m_requests, 1, tn->label,
                  strcmp(code, "insufficient_quota") ? "rate_limited" : "quota_exceeded");
    gw_reply_retry_after(r, (int)ceil(fmax(1, wait_s)));
    gw_reply_error_type(r, 429, msg, NULL, code,
                        tokens ? "tokens" : oai_error_type(429, code));
    return -1;
}

int gw_tenants_counts_tokens(const gw_tenants *t, const struct gw_tenant *tn)
{
    return limit(tn->pol.tpm, t->cfg->tenants_tpm) ||
           limit(tn->pol.monthly_tokens, t->cfg->tenants_monthly_tokens);
}

/* Whether `tokens` fit under the tenant's token limits now; else the 429 is sent. */
static int tokens_fit(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r, int64_t tokens)
{
    int64_t tpm = limit(tn->pol.tpm, t->cfg->tenants_tpm);
    int64_t quota = limit(tn->pol.monthly_tokens, t->cfg->tenants_monthly_tokens);
    /* what the month has left, less what admitted requests may still use of it */
    int64_t month_left = quota - tn->month_used - tn->month_reserved;
    char msg[300];
    if (quota && (month_left <= 0 || tokens > month_left)) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        tm.tm_mday = 1;
        tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        tm.tm_mon++;
        double wait = difftime(timegm(&tm), now);
        if (month_left <= 0)
            return refuse(t, tn, r, wait, "insufficient_quota",
                          "You exceeded your monthly token quota.", 0);
        /* (a request that may use more than is left would overrun the quota by its size) */
        snprintf(msg, sizeof msg, "This request may use up to %lld tokens (its input, and "
                 "max_tokens for each answer), and the monthly token quota has %lld left: "
                 "lower them.", (long long)tokens, (long long)month_left);
        return refuse(t, tn, r, wait, "insufficient_quota", msg, 0);
    }
    /* one that may use more than a minute's allowance never fits (it is OpenAI's "Request
     * too large", and no retry helps: said before any wait that a retry would meet) */
    if (tpm && tokens > tpm) {
        snprintf(msg, sizeof msg, "Request too large for tokens per minute: limit %lld, "
                 "requested %lld (its input, and max_tokens for each answer): lower them.",
                 (long long)tpm, (long long)tokens);
        gw_reply_header(r, "x-should-retry", "false");
        return refuse(t, tn, r, 60, "rate_limit_exceeded", msg, 1);
    }
    if (tpm && tn->tok_bucket < (double)tokens)
        return refuse(t, tn, r, ((double)tokens - tn->tok_bucket) * 60 / (double)tpm,
                      "rate_limit_exceeded", "Rate limit reached for tokens per minute.", 1);
    return 0;
}

/* Takes tokens from the allowances, as reserved[]. */
static void take_tokens(gw_tenants *t, struct gw_tenant *tn, int64_t tokens, int64_t reserved[2])
{
    if (limit(tn->pol.tpm, t->cfg->tenants_tpm)) {
        reserved[0] = tokens;
        tn->tok_bucket -= (double)tokens;
    }
    if (limit(tn->pol.monthly_tokens, t->cfg->tenants_monthly_tokens)) {
        /* so that a burst admitted together stays within the month's quota */
        reserved[1] = tokens;
        tn->month_reserved += tokens;
    }
}

int gw_tenants_admit(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r, int64_t tokens,
                     int64_t reserved[2])
{
    reserved[0] = reserved[1] = 0;
    refill(t, tn);
    int64_t rpm = limit(tn->pol.rpm, t->cfg->tenants_rpm);
    int64_t conc = limit(tn->pol.concurrency, t->cfg->tenants_concurrency);
    if (tokens > 0 && tokens_fit(t, tn, r, tokens))
        return -1;
    if (rpm && tn->req_bucket < 1)
        return refuse(t, tn, r, (1 - tn->req_bucket) * 60 / (double)rpm, "rate_limit_exceeded",
                      "Rate limit reached for requests per minute.", 0);
    if (conc && tn->inflight >= conc)
        return refuse(t, tn, r, 1, "rate_limit_exceeded",
                      "Too many concurrent requests for this API key's tenant.", 0);
    if (rpm)
        tn->req_bucket -= 1;
    if (tokens > 0)
        take_tokens(t, tn, tokens, reserved);
    tn->inflight++;
    limit_headers(t, tn, r);
    return 0;
}

int gw_tenants_reserve(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r, int64_t tokens,
                       int64_t reserved[2])
{
    refill(t, tn);
    /* what was reserved before goes back first: the request is measured anew */
    int64_t tpm = limit(tn->pol.tpm, t->cfg->tenants_tpm);
    if (tpm)
        tn->tok_bucket = fmin((double)tpm, tn->tok_bucket + (double)reserved[0]);
    tn->month_reserved -= reserved[1];
    reserved[0] = reserved[1] = 0;
    if (tokens < 1)
        tokens = 1;
    if (tokens_fit(t, tn, r, tokens))
        return -1;
    take_tokens(t, tn, tokens, reserved);
    limit_headers(t, tn, r);
    return 0;
}

int gw_tenants_hold(gw_tenants *t, struct gw_tenant *tn, int n)
{
    int64_t conc = limit(tn->pol.concurrency, t->cfg->tenants_concurrency);
    int64_t room = conc ? conc - tn->inflight : n;
    int take = room < 0 ? 0 : room < n ? (int)room : n;
    tn->inflight += take;
    return take;
}

void gw_tenants_done(gw_tenants *t, struct gw_tenant *tn, const struct gw_usage_one *u)
{
    refill(t, tn);
    tn->inflight -= 1 + u->held;
    int spent = u->prompt + u->completion;
    if (limit(tn->pol.tpm, t->cfg->tenants_tpm)) /* what it used, less what it reserved */
        tn->tok_bucket -= spent - (double)u->reserved;
    tn->month_used += spent;
    tn->month_reserved -= u->reserved_month;
    if (!u->refused) /* (counted by refuse()) */
        gw_metric_add(t->m_requests, 1, tn->label,
                      u->busy ? "busy" : u->failed ? "error" : u->cancelled ? "cancelled" : "ok");
    gw_metric_add(t->m_tokens, u->prompt, tn->label, "prompt");
    gw_metric_add(t->m_tokens, u->completion, tn->label, "completion");
    gw_metric_add(t->m_tokens, u->saved, tn->label, "saved");
    if (u->busy || u->refused) { /* nothing ran: its request back, nothing for the usage
                                  * table */
        int64_t rpm = limit(tn->pol.rpm, t->cfg->tenants_rpm);
        if (rpm)
            tn->req_bucket = fmin((double)rpm, tn->req_bucket + 1);
        return;
    }
    struct store_usage su = {.tenant = tn->id,
                             .requests = 1,
                             .prompt_tokens = u->prompt,
                             .completion_tokens = u->completion,
                             .cached_tokens = u->cached,
                             .exact_hits = u->hit == 1,
                             .semantic_hits = u->hit == 2,
                             .tokens_saved = u->saved};
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(su.day, sizeof su.day, "%Y-%m-%d", &tm);
    store_usage_add(t->st, &su);
}

int64_t gw_tenant_ns(gw_tenants *t, const struct gw_tenant *tn)
{
    int share = tn->pol.share_prefix >= 0 ? tn->pol.share_prefix : t->cfg->tenants_share_prefix;
    return share ? 0 : tn->id;
}
