/*
 * Offline commands over the data directory (the server must not be running on it: the
 * store locks the directory):
 *   cachegate cache import FILE [--tenant NAME] [--data-dir DIR] [--config FILE]
 */
#include "cli.h"

#include "cache.h"
#include "config.h"
#include "embedder.h"
#include "entry_id.h"
#include "gguf.h"
#include "store.h"
#include "tenants.h"
#include "tokenizer.h"

#include <errno.h>
#include <getopt.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CONFIG "conf/cachegate.conf"

/* --config and --data-dir, shared by the offline commands. 0, or prints and returns 2. */
int gw_cli_config(const char *config, const char *data_dir, struct gw_config *cfg)
{
    char err[1024];
    gw_config_defaults(cfg);
    /* with --data-dir, the shipped file may be missing (an administrator's command run
     * outside the installation directory) */
    int skip = !config && data_dir && access(DEFAULT_CONFIG, F_OK) != 0;
    if ((!skip && gw_config_load(cfg, config ? config : DEFAULT_CONFIG, err, sizeof err)) ||
        (data_dir &&
         gw_config_set(cfg, "server", "data_dir", data_dir, "--data-dir", err, sizeof err))) {
        fprintf(stderr, "cachegate: %s\n", err);
        gw_config_deinit(cfg);
        return 2;
    }
    return 0;
}

static void open_progress(void *arg, int64_t tenant, int64_t done, int64_t total,
                          const char *rebuilt)
{
    (void)arg;
    static int64_t said = -1; /* the tenant whose reason was said */
    if (rebuilt && said != tenant)
        fprintf(stderr, "the index of tenant %lld is rebuilt: %s\n", (long long)tenant, rebuilt);
    if (rebuilt)
        said = tenant;
    if (rebuilt)
        fprintf(stderr, "\rrebuilding the index of tenant %lld: %lld/%lld", (long long)tenant,
                (long long)done, (long long)total);
    if (rebuilt && done == total)
        fputc('\n', stderr);
}

int gw_cli_open_store(const struct gw_config *cfg, int dim, store **out)
{
    struct store_options so = {.dir = cfg->data_dir,
                               .dim = dim,
                               .max_entries = cfg->cache_max_entries,
                               .max_bytes = cfg->cache_max_bytes,
                               .hnsw_min_entries = cfg->cache_hnsw_min_entries};
    char err[1024];
    if (store_open(&so, open_progress, NULL, out, err, sizeof err)) {
        fprintf(stderr, "cachegate: %s\n", err);
        return 1;
    }
    return 0;
}

/* Imports JSON lines into a tenant: embedded in batches by the configured embedder, their
 * answers' tokens counted with the chat model's vocabulary. */
/* The lines an import's writer wrote, and those it dropped (their tenant deleted first). */
struct import_count {
    int64_t n, dropped;
};

/* writer thread */
static void import_written(void *arg, int rc, int64_t id)
{
    struct import_count *c = arg;
    if (rc == STORE_OK)
        __atomic_add_fetch(id > 0 ? &c->n : &c->dropped, 1, __ATOMIC_RELEASE);
}

static int import_file(const struct gw_config *cfg, const char *path, const char *tenant_name)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        perror(path);
        return 1;
    }
    struct stat fst;
    if (fstat(fileno(f), &fst) == 0 && S_ISDIR(fst.st_mode)) {
        fprintf(stderr, "cachegate: %s is a directory, not a file of JSON lines\n", path);
        fclose(f);
        return 1;
    }
    emb_model *emb = NULL;
    gguf_file *gf = NULL;
    tok_vocab *v = NULL;
    store *st = NULL;
    char err[1024];
    int rc = 1;
    if (emb_model_load(cfg->embedder_model, NULL, &emb, err, sizeof err)) {
        fprintf(stderr, "cachegate: loading the embedding model: %s\n", err);
        goto out;
    }
    /* the chat model's vocabulary counts each answer's tokens (for max_tokens) */
    if (gguf_open(cfg->engine_model, &gf, err, sizeof err) ||
        tok_create(gf, &v, err, sizeof err)) {
        fprintf(stderr, "cachegate: loading the chat model's vocabulary: %s\n", err);
        goto out;
    }
    if (gw_cli_open_store(cfg, emb_dim(emb), &st))
        goto out;
    struct store_tenant t;
    if (store_tenant_get(st, tenant_name, &t)) {
        fprintf(stderr, "cachegate: no tenant named '%s'\n", tenant_name);
        goto out;
    }
    /* the tenant's TTL and capacity, as its live answers get them */
    int64_t ttl_s, max_entries, max_bytes;
    gw_policy_cache_limits(t.policy, cfg->cache_ttl_s, &ttl_s, &max_entries, &max_bytes);
    if (max_entries || max_bytes)
        store_set_limits(st, t.id, max_entries, max_bytes);
    store_tenant_deinit(&t);
    enum { BATCH = 64 };
    struct gw_import_item items[BATCH];
    const char *texts[BATCH];
    size_t lens[BATCH];
    int dim = emb_dim(emb), n = 0, ns = 0; /* lines in the batch, and questions of them */
    float *vecs = malloc(sizeof(float) * (size_t)dim * BATCH);
    if (!vecs)
        goto out;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0, imported = 0, bad = 0; /* imported: queued; written.n: written */
    struct import_count written = {0, 0};
    int64_t now = store_now_ms(); /* as hits record theirs: to the millisecond */
    int failed = 0, tty = isatty(STDERR_FILENO), shown = 0;
    for (;;) {
        len = getline(&line, &cap, f);
        if (len >= 0) {
            lineno++;
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
                len--;
            char *text = line;
            if (lineno == 1 && len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))
                text += 3, len -= 3; /* a byte order mark */
            if (!len)
                continue;
            char msg[200];
            if (gw_cache_import_parse(text, (size_t)len, t.id, v, cfg->engine_model_name,
                                      &items[n], msg, sizeof msg)) {
                fprintf(stderr, "%s:%ld: %s\n", path, lineno, msg);
                bad++;
                continue;
            }
            if (items[n].key.searchable) { /* completions' prompts: by exact key only */
                texts[ns] = items[n].key.query;
                lens[ns++] = items[n].key.query_len;
            }
            if (++n < BATCH)
                continue;
        }
        if (n) {
            unsigned char ends[BATCH]; /* embedded as live questions are */
            memset(ends, 1, sizeof ends);
            int erc = ns ? emb_encode_ends(emb, texts, lens, ends, ns, vecs, NULL, NULL) : 0;
            for (int i = 0, j = 0; i < n; i++) {
                struct gw_import_item *it = &items[i];
                struct store_entry e = {
                    .tenant = t.id, .partition = it->key.partition, .exact = it->key.exact,
                    .model = it->model, .query = it->key.query, .query_len = it->key.query_len,
                    .embedding = it->key.searchable ? vecs + (size_t)j++ * dim : NULL,
                    .answer = it->answer,
                    .answer_len = it->answer_len, .finish_reason = "stop",
                    .completion_tokens = it->completion_tokens, .created_ms = now,
                    .expires_ms = ttl_s ? now + ttl_s * 1000 : 0};
                if (!erc && store_put(st, &e, import_written, &written) == STORE_OK)
                    imported++;
                else
                    failed = 1;
                gw_import_item_deinit(it);
            }
            n = ns = 0;
            /* progress: one line rewritten on a terminal, a line per 10,240 in a log */
            if (tty && imported % 1024 < BATCH)
                fprintf(stderr, "\rimported %ld entries", imported), shown = 1;
            else if (!tty && imported % 10240 < BATCH && imported >= 10240)
                fprintf(stderr, "imported %ld entries\n", imported);
        }
        if (len < 0)
            break;
    }
    free(line);
    free(vecs);
    if (shown)
        fprintf(stderr, "\n");
    if (ferror(f)) {
        fprintf(stderr, "cachegate: reading %s: %s\n", path, strerror(errno));
        failed = 1;
    }
    if (store_sync(st)) {
        fprintf(stderr, "cachegate: committing the entries failed\n");
        goto out;
    }
    if (__atomic_load_n(&written.dropped, __ATOMIC_ACQUIRE)) {
        /* deleting a tenant deletes its entries too, so none of the import is kept */
        fprintf(stderr, "cachegate: tenant '%s' was deleted during the import; nothing was "
                        "kept\n", tenant_name);
        goto out;
    }
    printf("imported %lld entries into tenant '%s'%s",
           (long long)__atomic_load_n(&written.n, __ATOMIC_ACQUIRE), tenant_name,
           bad ? "" : "\n");
    if (bad)
        printf("; %ld lines skipped (see above)\n", bad);
    rc = bad || failed ? 1 : 0;
out:
    store_close(st); /* commits, saves the index */
    tok_destroy(v);
    gguf_close(gf);
    emb_model_destroy(emb);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* The program's name for getopt's messages below argv[0] ("cachegate tenant"): that and
 * argv[1], the verb ("cachegate tenant list"), put in argv[1]. */
static void name_verb(char **argv)
{
    static char prog[96];
    snprintf(prog, sizeof prog, "%.48s %.40s", argv[0], argv[1]);
    argv[1] = prog;
}

static int cache_list(int argc, char **argv);
static int cache_delete(int argc, char **argv);

int gw_cli_cache(int argc, char **argv)
{
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"data-dir", required_argument, NULL, 'd'},
                                              {"tenant", required_argument, NULL, 't'},
                                              {NULL, 0, NULL, 0}};
    const char *config = NULL, *data_dir = NULL, *tenant = "default";
    if (argc >= 2 && !strcmp(argv[1], "list"))
        return cache_list(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "delete"))
        return cache_delete(argc, argv);
    if (argc < 2 || strcmp(argv[1], "import")) {
        if (argc >= 2 && argv[1][0] != '-')
            fprintf(stderr, "cachegate cache: no command '%s'\n", argv[1]);
        fprintf(stderr, "usage: cachegate cache import FILE|- [--tenant NAME] [--data-dir DIR] "
                        "[--config FILE]\n"
                        "       cachegate cache list [--tenant NAME] [--limit N] [--before ID] "
                        "[--grep TEXT] [--json]\n"
                        "       cachegate cache delete ID... [--tenant NAME] | --all "
                        "[--tenant NAME]\n");
        return 2;
    }
    name_verb(argv);
    argc--;
    argv++;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:d:t:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case 'd': data_dir = optarg; break;
        case 't': tenant = optarg; break;
        default: return 2;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "cachegate cache import: give one FILE (or - for standard input)\n");
        return 2;
    }
    struct gw_config cfg;
    int rc = gw_cli_config(config, data_dir, &cfg);
    if (rc)
        return rc;
    if (strcmp(tenant, "default") && !store_exists(cfg.data_dir)) { /* no tenants there */
        fprintf(stderr, "cachegate: %s holds no database, so no tenant '%s' (create it with "
                "`cachegate tenant create`; is --data-dir right?)\n", cfg.data_dir, tenant);
        gw_config_deinit(&cfg);
        return 1;
    }
    rc = import_file(&cfg, argv[optind], tenant);
    gw_config_deinit(&cfg);
    return rc;
}

/* ------------------------------------------------------------------ tenants, keys, usage */

/* Whether word is one of the space-separated words of list. */
static int one_of(const char *word, const char *list)
{
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && !strncmp(p, word, n))
            return 1;
        p += k + (p[k] == ' ');
    }
    return 0;
}

/* Opens the store for a command; writes: the command may create the data directory (a
 * command that only reads refuses a directory that holds no database, most often a typo
 * in --data-dir, rather than answer from an empty one it made). */
/* The models the configuration serves, which a tenant's policy may name (admin_open()). */
static char served[2][256];

/* How many operands a command takes after its options, and its usage line for others. */
struct operands {
    int min, max;
    const char *usage;
};

/* `cache list`'s options (the other commands take none of them) */
struct list_opts {
    long limit, before;
    const char *grep;
    int json;
};

/* Common options of the administration commands (`cache list`'s too, when lo is given);
 * argv[*first..] are the operands. */
static int admin_open(int argc, char **argv, int *first, const char **since, const char **tenant,
                      int writes, struct operands ops, struct list_opts *lo, store **st)
{
    static const struct option common[] = {{"config", required_argument, NULL, 'c'},
                                            {"data-dir", required_argument, NULL, 'd'},
                                            {"since", required_argument, NULL, 's'},
                                            {"tenant", required_argument, NULL, 't'},
                                            {NULL, 0, NULL, 0}};
    static const struct option listing[] = {{"config", required_argument, NULL, 'c'},
                                             {"data-dir", required_argument, NULL, 'd'},
                                             {"tenant", required_argument, NULL, 't'},
                                             {"limit", required_argument, NULL, 'n'},
                                             {"before", required_argument, NULL, 'b'},
                                             {"grep", required_argument, NULL, 'g'},
                                             {"json", no_argument, NULL, 'j'},
                                             {NULL, 0, NULL, 0}};
    const char *config = NULL, *data_dir = NULL;
    int ch;
    char *end;
    optind = 1;
    while ((ch = getopt_long(argc, argv, lo ? "c:d:t:" : "c:d:s:t:", lo ? listing : common,
                             NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case 'd': data_dir = optarg; break;
        case 's': if (since) *since = optarg; break;
        case 't': if (tenant) *tenant = optarg; break;
        case 'g': lo->grep = optarg; break;
        case 'j': lo->json = 1; break;
        case 'n':
        case 'b': {
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < (ch == 'n') || (ch == 'n' && v > 1000000)) {
                fprintf(stderr, "%s: --%s takes %s (got '%s')\n", argv[0],
                        ch == 'n' ? "limit" : "before",
                        ch == 'n' ? "a whole number from 1 to 1000000" : "an entry id", optarg);
                return 2;
            }
            *(ch == 'n' ? &lo->limit : &lo->before) = v;
            break;
        }
        default: return 2;
        }
    }
    *first = optind;
    if (argc - optind < ops.min || argc - optind > ops.max) { /* before any file is made */
        fputs(ops.usage, stderr);
        return 2;
    }
    if (since && *since && !gw_usage_day_ok(*since)) { /* before any file is opened */
        fprintf(stderr, "cachegate usage: --since must be a day, YYYY-MM-DD (got '%s')\n",
                *since);
        return 2;
    }
    struct gw_config cfg;
    int rc = gw_cli_config(config, data_dir, &cfg);
    if (rc)
        return rc;
    char err[1024];
    if (!writes && !store_exists(cfg.data_dir)) {
        fprintf(stderr, "cachegate: %s holds no database (the server or `cachegate tenant "
                "create` makes one there; is --data-dir right?)\n", cfg.data_dir);
        gw_config_deinit(&cfg);
        return 1;
    }
    snprintf(served[0], sizeof served[0], "%s", cfg.engine_model_name);
    snprintf(served[1], sizeof served[1], "%s", cfg.embedder_model_name);
    /* administration only: works beside a running server on the same directory */
    struct store_options so = {.dir = cfg.data_dir, .dim = 1, .admin_only = 1};
    rc = store_open(&so, NULL, NULL, st, err, sizeof err);
    gw_config_deinit(&cfg);
    if (rc) {
        fprintf(stderr, "cachegate: %s\n", err);
        return 1;
    }
    return 0;
}

static int tenant_id(store *st, const char *name, int64_t *id)
{
    struct store_tenant t;
    if (store_tenant_get(st, name, &t)) {
        fprintf(stderr, "cachegate: no tenant named '%s'\n", name);
        return -1;
    }
    *id = t.id;
    store_tenant_deinit(&t);
    return 0;
}

static void print_time(int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char buf[32];
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%s", buf);
}

/* Text cut to at most n bytes on one line (line breaks and other control characters as
 * spaces), "..." when cut, without splitting a UTF-8 character. */
static void print_cut(const char *t, size_t len, size_t n)
{
    size_t k = len <= n ? len : n - 3;
    while (k < len && k > 0 && ((unsigned char)t[k] & 0xC0) == 0x80)
        k--; /* (back to the start of the character cut) */
    for (size_t i = 0; i < k; i++) /* (no control character reaches the terminal) */
        putchar((unsigned char)t[i] < 0x20 || t[i] == 0x7f ? ' ' : t[i]);
    if (k < len)
        fputs("...", stdout);
}

/* `cachegate cache list`: a tenant's entries, newest first, as a table or JSON lines. */
static int cache_list(int argc, char **argv)
{
    static const char usage[] = "usage: cachegate cache list [--tenant NAME] [--limit N] "
                                "[--before ID] [--grep TEXT] [--json] [--data-dir DIR] "
                                "[--config FILE]\n";
    const char *tenant = "default";
    struct list_opts lo = {.limit = 20, .before = -1};
    store *st = NULL;
    name_verb(argv);
    int first, rc = admin_open(argc - 1, argv + 1, &first, NULL, &tenant, 0,
                               (struct operands){0, 0, usage}, &lo, &st);
    if (rc)
        return rc;
    int64_t before = 0; /* (the entries of lower row ids; none below row 0) */
    if (lo.before >= 0 && !(before = gw_entry_id_row(st, lo.before)))
        before = -1;
    struct store_list q = {.before = before, .contains = lo.grep && *lo.grep ? lo.grep : NULL,
                           .now_ms = store_now_ms(), .limit = (int)lo.limit + 1}; /* (+1: more?) */
    struct store_hit *h = NULL;
    int n = 0;
    rc = 1;
    if (tenant_id(st, tenant, &q.tenant))
        goto out;
    int src = store_entry_list(st, &q);
    h = q.out;
    n = q.n;
    if (src) {
        fprintf(stderr, "cachegate: %s\n", store_strerror(src));
        goto out;
    }
    if (!lo.json)
        printf("%-16s %-20s %6s  %s\n", "ID", "CREATED", "HITS", "QUESTION -> ANSWER");
    for (int i = 0; i < n && i < lo.limit; i++) {
        if (lo.json) {
            json_t *o = gw_cache_entry_json(st, &h[i]);
            char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
            if (line)
                puts(line);
            free(line);
            json_decref(o);
            continue;
        }
        printf("%-16lld ", (long long)gw_entry_id_show(st, h[i].id));
        print_time(h[i].created_ms);
        printf(" %6lld  ", (long long)h[i].hit_count);
        print_cut(h[i].query, h[i].query_len, 60);
        fputs(" -> ", stdout);
        print_cut(h[i].answer, h[i].answer_len, 60);
        putchar('\n');
    }
    if (!lo.json && n > lo.limit)
        printf("(more: --before %lld)\n", (long long)gw_entry_id_show(st, h[lo.limit - 1].id));
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        store_hit_deinit(&h[i]);
    free(h);
    store_close(st);
    return rc;
}

/* `cachegate cache delete`: entries by id (of --tenant's, when given), or --all of a tenant's
 * (of every tenant's without --tenant), with no server on the directory: a running one
 * holds answers in memory that only its admin API drops. */
static int cache_delete(int argc, char **argv)
{
    static const char usage[] = "usage: cachegate cache delete ID... [--tenant NAME] | --all "
                                "[--tenant NAME]   [--data-dir DIR] [--config FILE]\n";
    int all = 0;
    /* (--all is this command's alone: taken out before the common options are read; not
     * an option's value, nor past "--") */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *prev = argv[i - 1];
        if (strcmp(argv[i], "--all") || !strcmp(prev, "--tenant") ||
            !strcmp(prev, "--data-dir") || !strcmp(prev, "--config"))
            continue;
        all = 1;
        memmove(&argv[i], &argv[i + 1], sizeof *argv * (size_t)(argc - i)); /* NULL too */
        argc--;
        i--;
    }
    const char *tenant = NULL, *since = NULL;
    store *st = NULL;
    int first, held[2] = {-1, -1};
    name_verb(argv);
    int rc = admin_open(argc - 1, argv + 1, &first, &since, &tenant, 0,
                        (struct operands){all ? 0 : 1, all ? 0 : 4096, usage}, NULL, &st);
    if (rc)
        return rc;
    char **ids = argv + 1 + first;
    int nids = argc - 1 - first;
    int64_t t = -1, deleted = 0, total = 0;
    char err[1024];
    rc = 1;
    if (since) {
        fputs(usage, stderr);
        rc = 2;
        goto out;
    }
    /* the directory held while deleting: no server starts meanwhile to serve them */
    if (store_hold(store_dir(st), held, err, sizeof err)) {
        fprintf(stderr, "cachegate: %s: delete through its admin API (DELETE "
                "/admin/cache?id=N), which drops the answer from its memory too\n", err);
        goto out;
    }
    if (tenant && tenant_id(st, tenant, &t))
        goto out;
    for (int i = 0; i < nids; i++) { /* all read before any is deleted */
        char *end;
        long long v = strtoll(ids[i], &end, 10);
        if (end == ids[i] || *end || v < 0) {
            fprintf(stderr, "cachegate cache delete: '%s' is not an entry id\n", ids[i]);
            rc = 2;
            goto out;
        }
    }
    for (int i = 0; i < (all ? 1 : nids); i++) {
        int src = store_entries_delete_offline(
            st, t, all ? -1 : gw_entry_id_row(st, strtoll(ids[i], NULL, 10)), &deleted);
        if (src) {
            fprintf(stderr, "cachegate: %s\n", store_strerror(src));
            goto out;
        }
        if (!all && !deleted)
            fprintf(stderr, "cachegate cache delete: no entry %s%s%s\n", ids[i],
                    tenant ? " of tenant " : "", tenant ? tenant : "");
        total += deleted;
    }
    printf("deleted %lld entr%s\n", (long long)total, total == 1 ? "y" : "ies");
    rc = !all && total < nids;
out:
    store_unhold(held);
    store_close(st);
    return rc;
}

int gw_cli_tenant(int argc, char **argv)
{
    const char *usage = "usage: cachegate tenant create NAME [POLICY_JSON] | set NAME POLICY_JSON"
                        " | list | delete NAME   [--data-dir DIR] [--config FILE]\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *verb = argv[1];
    if (!one_of(verb, "create set list delete")) {
        fputs(usage, stderr);
        return 2;
    }
    store *st = NULL;
    name_verb(argv);
    /* create NAME [POLICY], set NAME POLICY, list, delete NAME */
    struct operands n = {1, 1, usage};
    if (!strcmp(verb, "list"))
        n.min = n.max = 0;
    else if (!strcmp(verb, "create"))
        n.max = 2;
    else if (!strcmp(verb, "set"))
        n.min = n.max = 2;
    int first, rc = admin_open(argc - 1, argv + 1, &first, NULL, NULL,
                               one_of(verb, "create set"), n, NULL, &st);
    if (rc)
        return rc;
    char **ops = argv + 1 + first;
    int nops = argc - 1 - first;
    char err[400];
    struct gw_tenant_policy pol;
    rc = 1;
    if (!strcmp(verb, "create") && (nops == 1 || nops == 2)) {
        int64_t id;
        if (nops == 2 && gw_policy_check(ops[1], served[0], served[1], &pol, err, sizeof err)) {
            fprintf(stderr, "cachegate: %s\n", err);
            rc = 2; /* a bad argument, as a bad option is */
            goto out;
        }
        int src = store_tenant_create(st, ops[0], &id);
        if (src == STORE_EEXIST || src == STORE_EINVAL) {
            fprintf(stderr, "cachegate: %s\n",
                    src == STORE_EEXIST          ? "a tenant of that name exists"
                    : !strcmp(ops[0], "other") ? "the name other is reserved: it is the "
                                                 "metrics label of the tenants past "
                                                 "metrics_max_tenants"
                                               : "a tenant name is 1-63 letters, digits, '-', "
                                                 "'_', '.', not starting with '-', nor . "
                                                 "or .. alone");
            rc = src == STORE_EINVAL ? 2 : 1;
            goto out;
        }
        if (src || (nops == 2 && gw_policy_store(st, id, ops[1])))
            goto fail;
        printf("created tenant '%s'\n", ops[0]);
    } else if (!strcmp(verb, "set") && nops == 2) {
        int64_t id;
        if (gw_policy_check(ops[1], served[0], served[1], &pol, err, sizeof err)) {
            fprintf(stderr, "cachegate: %s\n", err);
            rc = 2;
            goto out;
        }
        if (tenant_id(st, ops[0], &id))
            goto out;
        if (gw_policy_store(st, id, ops[1]))
            goto fail;
        printf("policy of '%s' set\n", ops[0]);
    } else if (!strcmp(verb, "list") && nops == 0) {
        struct store_tenant *t;
        int n;
        if (store_tenant_list(st, &t, &n))
            goto fail;
        printf("%-24s %-20s %s\n", "NAME", "CREATED", "POLICY");
        for (int i = 0; i < n; i++) {
            printf("%-24s ", t[i].name);
            print_time(t[i].created_ms);
            printf(" %s\n", t[i].policy);
            store_tenant_deinit(&t[i]);
        }
        free(t);
    } else if (!strcmp(verb, "delete") && nops == 1) {
        if (!strcmp(ops[0], "default")) {
            fprintf(stderr, "cachegate: the default tenant cannot be deleted\n");
            goto out;
        }
        int src = store_tenant_delete(st, ops[0]);
        if (src == STORE_ENOTFOUND) {
            fprintf(stderr, "cachegate: no tenant named '%s'\n", ops[0]);
            goto out;
        }
        if (src)
            goto fail;
        printf("deleted tenant '%s', its keys, usage and cached answers\n", ops[0]);
    } else {
        fputs(usage, stderr);
        rc = 2;
        goto out;
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "cachegate: the database operation failed\n");
out:
    store_close(st);
    return rc;
}

int gw_cli_key(int argc, char **argv)
{
    const char *usage = "usage: cachegate key create TENANT | list TENANT | revoke PREFIX|KEY"
                        "   [--data-dir DIR] [--config FILE]\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *verb = argv[1];
    if (!one_of(verb, "create list revoke")) {
        fputs(usage, stderr);
        return 2;
    }
    store *st = NULL;
    name_verb(argv);
    int first, rc = admin_open(argc - 1, argv + 1, &first, NULL, NULL, 0,
                               (struct operands){1, 1, usage}, NULL, &st);
    if (rc)
        return rc;
    char **ops = argv + 1 + first;
    int nops = argc - 1 - first;
    int64_t id;
    rc = 1;
    if (!strcmp(verb, "create") && nops == 1) {
        char key[80], prefix[16];
        if (tenant_id(st, ops[0], &id))
            goto out;
        if (gw_key_make(st, id, key, sizeof key, prefix, sizeof prefix))
            goto fail;
        puts(key); /* shown once: only its hash is kept */
        memset(key, 0, sizeof key);
        if (fflush(stdout) || ferror(stdout)) { /* nobody saw it: it must not stay live */
            int e = errno;
            int vrc = store_key_revoke(st, prefix);
            fprintf(stderr, "cachegate: cannot write the key to the output (%s); key %s... %s\n",
                    strerror(e ? e : EIO), prefix,
                    vrc ? "is live: revoke it" : "was revoked");
            goto out;
        }
        fprintf(stderr, "key %s... created for tenant '%s'; it is not shown again\n", prefix,
                ops[0]);
    } else if (!strcmp(verb, "list") && nops == 1) {
        struct store_key *k;
        int n;
        if (tenant_id(st, ops[0], &id) )
            goto out;
        if (store_key_list(st, id, &k, &n))
            goto fail;
        printf("%-16s %-22s %s\n", "PREFIX", "CREATED", "REVOKED");
        for (int i = 0; i < n; i++) {
            printf("%-16s ", k[i].prefix);
            print_time(k[i].created_ms);
            printf("   ");
            if (k[i].revoked_ms)
                print_time(k[i].revoked_ms);
            else
                printf("-");
            putchar('\n');
        }
        free(k);
    } else if (!strcmp(verb, "revoke") && nops == 1) {
        /* the prefix a list shows, or the whole key (its first 12 characters are the prefix) */
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%.12s", ops[0]);
        int64_t owner;
        uint8_t sha[32];
        SHA256((const unsigned char *)ops[0], strlen(ops[0]), sha);
        if (strlen(ops[0]) == 51 && store_key_lookup(st, sha, &owner) != STORE_OK) {
            /* a whole key is the key itself, not any key of its prefix */
            fprintf(stderr, "cachegate: no live key is '%.12s...' (a whole key given)\n",
                    ops[0]);
            goto out;
        }
        int src = store_key_revoke(st, strlen(ops[0]) == 51 ? prefix : ops[0]);
        if (src == STORE_ENOTFOUND) {
            fprintf(stderr, "cachegate: no live key with prefix '%s'\n", ops[0]);
            goto out;
        }
        if (src)
            goto fail;
        printf("revoked %.12s (a running server stops accepting it within a second)\n",
               ops[0]); /* the prefix: a whole key is not echoed */
    } else {
        fputs(usage, stderr);
        rc = 2;
        goto out;
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "cachegate: the database operation failed\n");
out:
    store_close(st);
    return rc;
}

int gw_cli_usage(int argc, char **argv)
{
    const char *since = NULL, *tenant = NULL;
    store *st = NULL;
    int first, rc = admin_open(argc, argv, &first, &since, &tenant, 0,
                               (struct operands){0, 0, "usage: cachegate usage [--tenant NAME] "
                                                       "[--since YYYY-MM-DD]\n"}, NULL, &st);
    if (rc)
        return rc;
    rc = 1;
    int64_t id = -1;
    struct store_usage *u = NULL;
    struct store_tenant *t = NULL;
    int n = 0, nt = 0;
    if (tenant && tenant_id(st, tenant, &id))
        goto out;
    if (store_usage_list(st, id, since, &u, &n) || store_tenant_list(st, &t, &nt)) {
        fprintf(stderr, "cachegate: the database operation failed\n");
        goto out;
    }
    printf("%-20s %-10s %9s %12s %12s %10s %8s %8s %10s\n", "TENANT", "DAY", "REQUESTS",
           "PROMPT", "COMPLETION", "CACHED", "EXACT", "SEMANTIC", "SAVED");
    for (int i = 0; i < n; i++) {
        const char *name = "(deleted)";
        for (int j = 0; j < nt; j++)
            if (t[j].id == u[i].tenant)
                name = t[j].name;
        printf("%-20s %-10s %9lld %12lld %12lld %10lld %8lld %8lld %10lld\n", name, u[i].day,
               (long long)u[i].requests, (long long)u[i].prompt_tokens,
               (long long)u[i].completion_tokens, (long long)u[i].cached_tokens,
               (long long)u[i].exact_hits, (long long)u[i].semantic_hits,
               (long long)u[i].tokens_saved);
    }
    rc = 0;
out:
    for (int j = 0; j < nt; j++)
        store_tenant_deinit(&t[j]);
    free(t);
    free(u);
    store_close(st);
    return rc;
}
