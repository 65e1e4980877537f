/*
 * tenants — who is asking (API keys), what they may do (policy), how much (rate limits,
 * quotas) and what they used (usage in SQLite, per-tenant metrics).
 *
 * Keys are "cg-" + 48 hex digits of randomness; the store keeps only their SHA-256 and a
 * prefix. The event loop holds every live key's hash and every tenant's policy in memory
 * and rereads both from the store once a second, so a key revoked or a policy changed by
 * the CLI (even from another process) takes effect within a second; the admin API rereads
 * them at once after a change it made.
 *
 * Limits per tenant (policy, else the [tenants] defaults; 0: none): requests per minute and
 * tokens per minute as token buckets (tokens are counted after the fact; a cache hit's
 * tokens are saved, not spent), concurrent requests, and a monthly token quota (UTC
 * months). Event-loop thread only, except gw_key_make().
 */
#ifndef GW_TENANTS_H
#define GW_TENANTS_H

#include "config.h"
#include "metrics.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct gw_req;
typedef struct gw_tenants gw_tenants;

struct gw_tenant_policy {
    double threshold;     /* semantic similarity; < 0: the configured one */
    int64_t ttl_s;        /* < 0: the configured one */
    int64_t max_entries;  /* 0: the configured one */
    int64_t max_bytes;    /* 0: the configured one */
    int share_prefix;     /* -1: the configured default */
    int64_t rpm, tpm, concurrency, monthly_tokens; /* < 0: the configured ones; 0: none */
    char models[8][64];   /* allowed models; none listed: all */
    int nmodels;
};

struct gw_tenant {
    int64_t id;
    char name[64];
    const char *label; /* its metric label: the name, or "other" */
    struct gw_tenant_policy pol;
    int deleted;
    int forgotten; /* deleted, and its metric series dropped */
    int64_t held_ttl_s; /* the TTL its stored entries were last held to; -1: none yet */
    int policy_refused; /* its stored policy did not parse: the defaults apply (logged once) */
    /* limiter state */
    double req_bucket, tok_bucket, refill_s;
    int inflight;
    int64_t month_used;
    int64_t month_reserved; /* what admitted requests may still use of the quota */
    int month; /* year * 12 + month of month_used */
};

/* Parses a policy JSON object ("{}": all defaults). -1 with err on a bad key or value. */
int gw_policy_parse(const char *json, struct gw_tenant_policy *out, char *err, size_t errlen);
/* gw_policy_parse(), and the models it names are the ones served (a policy naming only
 * another would leave its tenant nothing). For a policy being set. */
int gw_policy_check(const char *json, const char *chat_model, const char *embed_model,
                    struct gw_tenant_policy *out, char *err, size_t errlen);
/* A checked policy as it is stored (malloc'd; NULL: out of memory): compact, whole numbers
 * as integers ("1e3" is 1000), the threshold to 15 digits (0.97, not 0.96999999999999997). */
char *gw_policy_normal(const char *json);
/* store_tenant_set_policy() of the policy so normalized. */
int gw_policy_store(store *st, int64_t tenant, const char *json);

/* What a tenant's policy (JSON) makes of the cache's limits: *ttl_s its ttl_s or the
 * configured one; *max_entries and *max_bytes (either may be NULL) its own or 0 (the
 * configured ones). A policy that does not parse leaves the configured ones. */
void gw_policy_cache_limits(const char *policy, int64_t configured_ttl_s, int64_t *ttl_s,
                            int64_t *max_entries, int64_t *max_bytes);

/* 1 when day is a calendar day written YYYY-MM-DD (usage's --since, ?since=). */
int gw_usage_day_ok(const char *day);

/* Creates a key for tenant: key (>= 52 bytes) gets the secret, prefix its shown part. */
int gw_key_make(store *st, int64_t tenant, char *key, size_t keylen, char *prefix,
                size_t prefixlen);

gw_tenants *gw_tenants_create(const struct gw_config *cfg, store *st, struct event_base *base,
                              gw_metrics *metrics, char *err, size_t errlen);
void gw_tenants_destroy(gw_tenants *t); /* accepts NULL */

/*
 * The tenant a request acts for: from its Bearer key, or the default tenant when
 * tenants.auth is off. NULL after replying 401. Borrowed: tenants are never freed while
 * the server runs.
 */
struct gw_tenant *gw_tenants_auth(gw_tenants *t, struct gw_req *r);
/* Counts a refused key (a tenant's or the admin's) in cachegate_auth_failures_total. */
void gw_tenants_auth_failed(gw_tenants *t);
/* Rereads tenants (policies) and keys from the store: once a second by itself, and at
 * once from the admin API after a change it made. */
void gw_tenants_reload(gw_tenants *t);
/* The metric label of a tenant (its name, or "other" past tenants.metrics_max_tenants);
 * NULL when no such tenant exists. Every family labelled by tenant uses it. */
const char *gw_tenants_label(gw_tenants *t, int64_t id);
/* Whether the tenant's policy lets it use model (a policy without "models": any). */
int gw_tenant_allows(const struct gw_tenant *tn, const char *model);
/* 0 when the tenant may use model; else replies 404 and returns -1. */
int gw_tenants_model_ok(struct gw_tenant *tn, struct gw_req *r, const char *model);
/* Admits a request under the tenant's limits; else replies 429 (with Retry-After) and
 * returns -1. Every admitted request ends with exactly one gw_tenants_done(). tokens: what
 * it may use, counted (its prompt's, and the max_tokens it asks for), or 0 where they are
 * reserved later by gw_tenants_reserve() (a chat request, once its prompt is tokenized: a
 * cache hit uses none). Under tokens_per_minute they are reserved at once (up to the whole
 * allowance), so that a burst of requests admitted together cannot overrun the limit, and
 * settled against what the request used when it ends; under monthly_tokens likewise, up
 * to what the month has left. reserved (for its gw_usage_one): what was taken of each. */
int gw_tenants_admit(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r, int64_t tokens,
                     int64_t reserved[2] /* out: a minute's, the month's */);
/* For an admitted request: its reservation made anew for tokens; else the 429 is sent,
 * nothing stays reserved, and -1 returned (its gw_usage_one then says refused). */
int gw_tenants_reserve(gw_tenants *t, struct gw_tenant *tn, struct gw_req *r, int64_t tokens,
                       int64_t reserved[2]);
/* Whether the tenant has a token limit (a minute's or a month's): its requests' tokens are
 * worth counting before they run. */
int gw_tenants_counts_tokens(const gw_tenants *t, const struct gw_tenant *tn);

struct gw_usage_one {
    int prompt, completion, cached; /* tokens the engine used (0 for a cache hit) */
    int hit;                        /* 0 engine, 1 exact hit, 2 semantic hit */
    int saved;                      /* completion tokens a hit saved */
    int failed;                     /* it ended in an error reply */
    int cancelled;                  /* its client left before the whole answer was sent */
    int busy; /* refused for the engine's full queue: no request of the usage table */
    int refused; /* refused by gw_tenants_reserve() (429 sent): no request of it either */
    int64_t reserved;               /* tokens gw_tenants_admit() reserved a minute */
    int64_t reserved_month;         /* and of the monthly quota */
    int held;                       /* concurrent places gw_tenants_hold() gave it */
};
void gw_tenants_done(gw_tenants *t, struct gw_tenant *tn, const struct gw_usage_one *u);
/* For an admitted request that runs several jobs at once (a completion of several
 * prompts): up to n more of the tenant's concurrent_requests places, as many as are free
 * (all n without a limit). They count until its gw_tenants_done() (gw_usage_one.held). */
int gw_tenants_hold(gw_tenants *t, struct gw_tenant *tn, int n);

/* The prefix-cache namespace of a tenant's requests (0: the shared global one). */
int64_t gw_tenant_ns(gw_tenants *t, const struct gw_tenant *tn);

#endif
