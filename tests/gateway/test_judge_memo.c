/* gateway/judge_memo.c: the judge's tokens of stored questions are kept by tenant and
 * question, handed out as copies, and the least recently used go first past the budget. */
#include "judge_memo.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIM = 4 };

/* a text of n tokens whose values all say v */
static struct gw_judge_text text_of(int n, float v)
{
    struct gw_judge_text t = {n, DIM, malloc(sizeof(float) * GW_JUDGE_LAYERS * n * DIM),
                              malloc(sizeof(int32_t) * n)};
    cr_assert(t.states && t.ids);
    for (int i = 0; i < GW_JUDGE_LAYERS * n * DIM; i++)
        t.states[i] = v;
    for (int i = 0; i < n; i++)
        t.ids[i] = (int32_t)v + i;
    return t;
}

/* whether the memo holds text_of(n, v) for tenant and q */
static int holds(gw_judge_memo *m, int64_t tenant, const char *q, int n, float v)
{
    struct gw_judge_text got;
    if (!gw_judge_memo_get(m, tenant, q, strlen(q), &got))
        return 0;
    struct gw_judge_text want = text_of(n, v);
    int same = got.n == n && got.dim == DIM &&
               !memcmp(got.states, want.states, sizeof(float) * GW_JUDGE_LAYERS * n * DIM) &&
               !memcmp(got.ids, want.ids, sizeof(int32_t) * n);
    gw_judge_text_free(&got);
    gw_judge_text_free(&want);
    return same;
}

static void put(gw_judge_memo *m, int64_t tenant, const char *q, int n, float v)
{
    struct gw_judge_text t = text_of(n, v);
    gw_judge_memo_put(m, tenant, q, strlen(q), &t);
    gw_judge_text_free(&t); /* the memo keeps its own copy */
}

Test(judge_memo, keyed_by_entry_and_question)
{
    gw_judge_memo *m = gw_judge_memo_create(1 << 20);
    cr_assert(m);
    put(m, 7, "What is the capital of France?", 5, 1);
    cr_assert(holds(m, 7, "What is the capital of France?", 5, 1));
    /* another question of the same tenant, the same one of another tenant */
    cr_assert(!holds(m, 7, "What is the capital of Spain?", 5, 1));
    cr_assert(!holds(m, 8, "What is the capital of France?", 5, 1));
    struct gw_judge_text none;
    cr_assert_eq(gw_judge_memo_get(m, 8, "x", 1, &none), 0);
    cr_assert(!none.n && !none.states && !none.ids);
    /* a copy: what the caller frees or changes is not the memo's */
    struct gw_judge_text got;
    cr_assert(gw_judge_memo_get(m, 7, "What is the capital of France?", 30, &got));
    got.states[0] = -1;
    gw_judge_text_free(&got);
    cr_assert(holds(m, 7, "What is the capital of France?", 5, 1));
    /* put again under the same key: replaced, counted once */
    size_t once = gw_judge_memo_bytes(m);
    put(m, 7, "What is the capital of France?", 5, 2);
    cr_assert(holds(m, 7, "What is the capital of France?", 5, 2));
    cr_assert_eq(gw_judge_memo_bytes(m), once);
    gw_judge_memo_destroy(m);
}

Test(judge_memo, the_least_recently_used_go_first_past_the_budget)
{
    /* measure one entry's bytes, then allow a little over two of them */
    gw_judge_memo *probe = gw_judge_memo_create(1 << 20);
    put(probe, 1, "a", 10, 1);
    size_t one = gw_judge_memo_bytes(probe);
    gw_judge_memo_destroy(probe);
    cr_assert(one > sizeof(float) * GW_JUDGE_LAYERS * 10 * DIM);

    gw_judge_memo *m = gw_judge_memo_create(2 * one + one / 2);
    put(m, 1, "a", 10, 1);
    put(m, 2, "b", 10, 2);
    cr_assert(holds(m, 1, "a", 10, 1)); /* a is now the most recently used */
    put(m, 3, "c", 10, 3);              /* b goes */
    cr_assert(!holds(m, 2, "b", 10, 2));
    cr_assert(holds(m, 1, "a", 10, 1));
    cr_assert(holds(m, 3, "c", 10, 3));
    cr_assert_leq(gw_judge_memo_bytes(m), 2 * one + one / 2);
    /* one larger than the whole budget is not kept, and takes nothing out */
    put(m, 4, "d", 100, 4);
    cr_assert(!holds(m, 4, "d", 100, 4));
    cr_assert(holds(m, 1, "a", 10, 1) && holds(m, 3, "c", 10, 3));
    gw_judge_memo_destroy(m);
}

Test(judge_memo, thousands_of_entries_stay_found)
{
    gw_judge_memo *m = gw_judge_memo_create((size_t)64 << 20);
    char q[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(q, sizeof q, "question %d", i);
        put(m, i, q, 3, (float)i);
    }
    for (int i = 0; i < 5000; i += 7) {
        snprintf(q, sizeof q, "question %d", i);
        cr_assert(holds(m, i, q, 3, (float)i), "%d", i);
    }
    gw_judge_memo_destroy(m);
}
