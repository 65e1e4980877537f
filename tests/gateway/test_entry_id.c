/* gateway/entry_id.c: the ids the API shows for cache entries are a keyed permutation of
 * their row ids, the values of an independent implementation of the construction
 * (tests/ref/make_entry_id_vectors.py), undone exactly, and they say nothing of the order
 * or the count of the rows between two of them. */
#include "entry_id.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static unsigned char key[STORE_ENTRY_KEY_BYTES];

static void set_key(void)
{
    for (int i = 0; i < STORE_ENTRY_KEY_BYTES; i++)
        key[i] = (unsigned char)i;
}

TestSuite(entry_id, .init = set_key);

/* the example of SipHash's paper (appendix A): key 00..0f, message 00..0e */
Test(entry_id, siphash_gives_the_papers_example)
{
    unsigned char k[16], m[15];
    for (int i = 0; i < 16; i++)
        k[i] = (unsigned char)i;
    for (int i = 0; i < 15; i++)
        m[i] = (unsigned char)i;
    cr_assert_eq(gw_siphash24(k, m, sizeof m), UINT64_C(0xa129ca6149be45e5));
}

Test(entry_id, matches_the_reference)
{
    /* tests/ref/make_entry_id_vectors.py, key 0..31: row id, shown id */
    static const long long want[][2] = {
        {0LL, 1580443228541568LL},
        {1LL, 580018086143726LL},
        {2LL, 88732500361423LL},
        {3LL, 1901218314402323LL},
        {1000LL, 2067976808747140LL},
        {123456789LL, 2233855997496014LL},
        {4503599627370495LL, 1976792980004519LL},
        {4503599627370496LL, 4503599627370496LL}, /* past 52 bits: as it is */
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        cr_assert_eq(gw_entry_id_permute(key, want[i][0], 0), want[i][1], "row %lld",
                     want[i][0]);
        cr_assert_eq(gw_entry_id_permute(key, want[i][1], 1), want[i][0], "id %lld",
                     want[i][1]);
    }
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* rows 1..N: every id below 2^52 (exact in a JSON number read as a double), each undone to
 * its row, no two alike, in no order of the rows', spread over the whole range; another key
 * gives others */
Test(entry_id, a_permutation_that_hides_order_and_count)
{
    enum { N = 20000 };
    int64_t *ids = malloc(sizeof *ids * N);
    cr_assert(ids);
    int rising = 0, same_elsewhere = 0;
    unsigned char other[STORE_ENTRY_KEY_BYTES];
    memcpy(other, key, sizeof other);
    other[0] ^= 1;
    for (int64_t row = 1; row <= N; row++) {
        int64_t id = gw_entry_id_permute(key, row, 0);
        cr_assert(id >= 0 && id < (INT64_C(1) << 52), "%lld", (long long)id);
        cr_assert_eq(gw_entry_id_permute(key, id, 1), row);
        ids[row - 1] = id;
        rising += row > 1 && id > ids[row - 2];
        same_elsewhere += gw_entry_id_permute(other, row, 0) == id;
    }
    /* as often up as down from one row to the next (a coin: 10000 +- 71) */
    cr_assert(rising > N / 2 - 400 && rising < N / 2 + 400, "%d rises", rising);
    cr_assert_eq(same_elsewhere, 0);
    qsort(ids, N, sizeof *ids, by_value);
    for (int i = 1; i < N; i++)
        cr_assert_neq(ids[i], ids[i - 1]);
    /* the smallest and largest near the ends of the range, as N draws from it would be */
    const double range = (double)(INT64_C(1) << 52);
    cr_assert(ids[0] < range * 0.001 && ids[N - 1] > range * 0.999, "%lld .. %lld",
              (long long)ids[0], (long long)ids[N - 1]);
    free(ids);
}

Test(entry_id, undone_anywhere_in_the_range)
{
    srand(7);
    for (int i = 0; i < 100000; i++) {
        int64_t v = ((int64_t)rand() << 31 | rand()) & ((INT64_C(1) << 52) - 1);
        cr_assert_eq(gw_entry_id_permute(key, gw_entry_id_permute(key, v, 0), 1), v);
        cr_assert_eq(gw_entry_id_permute(key, gw_entry_id_permute(key, v, 1), 0), v);
    }
}
