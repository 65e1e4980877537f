/* tenants: policy parsing and key creation (hash stored, key shown once). */
#include "tenants.h"

#include <criterion/criterion.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(policy, defaults_overrides_and_errors)
{
    struct gw_tenant_policy p;
    char err[200];
    cr_assert_eq(gw_policy_parse("{}", &p, err, sizeof err), 0);
    cr_assert(p.threshold < 0 && p.ttl_s < 0 && p.rpm < 0 && p.share_prefix == -1);
    cr_assert_eq(p.nmodels, 0);
    cr_assert_eq(gw_policy_parse("{\"similarity_threshold\":0.9,\"ttl_s\":60,"
                                 "\"requests_per_minute\":0,\"share_prefix_cache\":true,"
                                 "\"models\":[\"m1\",\"m2\"],\"monthly_tokens\":1000}",
                                 &p, err, sizeof err),
                 0, "%s", err);
    cr_assert_float_eq(p.threshold, 0.9, 1e-9);
    cr_assert_eq(p.ttl_s, 60);
    cr_assert_eq(p.rpm, 0, "0 is an explicit 'no limit', not the default");
    cr_assert_eq(p.share_prefix, 1);
    cr_assert_eq(p.nmodels, 2);
    cr_assert_str_eq(p.models[1], "m2");
    cr_assert_eq(p.monthly_tokens, 1000);
    const char *bad[] = {"[]", "{\"unknown\":1}", "{\"similarity_threshold\":2}",
                         "{\"ttl_s\":-5}", "{\"share_prefix_cache\":1}", "{\"models\":\"m\"}",
                         "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        cr_assert_eq(gw_policy_parse(bad[i], &p, err, sizeof err), -1, "%s", bad[i]);
        cr_assert(strstr(err, "policy"), "%s: %s", bad[i], err);
    }
}

Test(keys, a_key_is_random_and_only_its_hash_is_stored)
{
    char dir[] = "/tmp/cachegate-keys-XXXXXX";
    cr_assert(mkdtemp(dir));
    struct store_options o = {.dir = dir, .dim = 4, .admin_only = 1};
    char err[256];
    store *st;
    cr_assert_eq(store_open(&o, NULL, NULL, &st, err, sizeof err), 0, "%s", err);
    char k1[80], k2[80], p1[16], p2[16];
    cr_assert_eq(gw_key_make(st, 1, k1, sizeof k1, p1, sizeof p1), 0);
    cr_assert_eq(gw_key_make(st, 1, k2, sizeof k2, p2, sizeof p2), 0);
    cr_assert_eq(strlen(k1), 51);
    cr_assert(!strncmp(k1, "cg-", 3) && !strncmp(k1, p1, strlen(p1)));
    cr_assert_str_neq(k1, k2);
    uint8_t sha[32];
    int64_t tenant = 0;
    SHA256((const unsigned char *)k1, strlen(k1), sha);
    cr_assert_eq(store_key_lookup(st, sha, &tenant), 0);
    cr_assert_eq(tenant, 1);
    store_close(st);
    /* the key's secret part is nowhere in the database files */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "cat %s/cachegate.db* | grep -c %s", dir, k1 + 12);
    FILE *f = popen(cmd, "r");
    int count = -1;
    cr_assert_eq(fscanf(f, "%d", &count), 1);
    pclose(f);
    cr_assert_eq(count, 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
