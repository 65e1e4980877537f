/*
 * judge_memo — the judge's tokens (judge.h) of stored questions, kept for their next hits:
 * a question asked again in other words is weighed against the same stored one, and its
 * tokens need no forward pass the second time. Keyed by the tenant and the question's text
 * (the tokens are the text's alone, whichever entry holds it; a tenant's are never another
 * tenant's, whose lookups' speed would otherwise say what it stored); the least recently
 * used go first past max_bytes.
 *
 * Threads: one at a time (the embed worker's).
 */
#ifndef GW_JUDGE_MEMO_H
#define GW_JUDGE_MEMO_H

#include "judge.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gw_judge_memo gw_judge_memo;

/* NULL when out of memory. */
gw_judge_memo *gw_judge_memo_create(size_t max_bytes);
void gw_judge_memo_destroy(gw_judge_memo *m); /* accepts NULL */

/* A copy of the tokens kept for tenant's question q[0..len) into out: 1; 0 when none are
 * kept (out empty), or when the copy cannot be made. */
int gw_judge_memo_get(gw_judge_memo *m, int64_t tenant, const char *q, size_t len,
                      struct gw_judge_text *out);

/* Keeps a copy of t for tenant's question q (replacing what the key had); what does not
 * fit in max_bytes alone is not kept. */
void gw_judge_memo_put(gw_judge_memo *m, int64_t tenant, const char *q, size_t len,
                       const struct gw_judge_text *t);

/* The bytes kept now (states, ids and questions). */
size_t gw_judge_memo_bytes(const gw_judge_memo *m);

#endif
