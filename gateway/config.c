#include "config.h"

#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

enum opt_type { T_STR, T_INT, T_SIZE, T_BOOL, T_ENUM, T_REAL };

struct opt {
    const char *section;
    const char *key;
    enum opt_type type;
    size_t offset;
    const char *def;
    int64_t min, max;          /* T_INT, T_SIZE */
    const char *const *names;  /* T_ENUM: NULL-terminated; the value is the index */
    int (*check)(const char *value, char *err, size_t errlen); /* optional, T_STR */
};

static const char *const device_names[] = {"auto", "cpu", "cuda", NULL};
static const char *const level_names[] = {"debug", "info", "warn", "error", NULL};
static const char *const chat_names[] = {"auto", "chatml", "llama3", "llama2", NULL};
static const char *const kv_dtype_names[] = {"auto", "f32", "f16", "bf16", "q8_0", NULL};
static const char *const matmul_names[] = {"f32", "int8", NULL};

static int check_listen(const char *v, char *err, size_t errlen)
{
    char host[256];
    int port;
    if (gw_config_split_listen(v, host, sizeof host, &port) == 0)
        return 0;
    snprintf(err, errlen,
             "must be HOST:PORT with a port in 0..65535 (0: any free port), got '%s'", v);
    return -1;
}

static int check_nonempty(const char *v, char *err, size_t errlen)
{
    if (*v)
        return 0;
    snprintf(err, errlen, "must not be empty");
    return -1;
}

#define OFF(f) offsetof(struct gw_config, f)
#define KIB 1024LL
#define MIB (1024LL * 1024)
#define HOUR_MS (3600LL * 1000)

static const struct opt opts[] = {
    {"server", "listen", T_STR, OFF(listen), "127.0.0.1:8443", 0, 0, NULL, check_listen},
    {"server", "data_dir", T_STR, OFF(data_dir), "./var", 0, 0, NULL, check_nonempty},
    {"server", "device", T_ENUM, OFF(device), "auto", 0, 0, device_names, NULL},
    {"server", "max_body_bytes", T_SIZE, OFF(max_body_bytes), "4M", 1, 1024 * MIB, NULL, NULL},
    {"server", "max_header_bytes", T_SIZE, OFF(max_header_bytes), "16K", 1 * KIB, 1 * MIB, NULL,
     NULL},
    {"server", "header_timeout_ms", T_INT, OFF(header_timeout_ms), "10000", 1, HOUR_MS, NULL,
     NULL},
    {"server", "body_timeout_ms", T_INT, OFF(body_timeout_ms), "30000", 1, HOUR_MS, NULL, NULL},
    {"server", "idle_timeout_ms", T_INT, OFF(idle_timeout_ms), "60000", 1, HOUR_MS, NULL, NULL},
    {"server", "max_connections", T_INT, OFF(max_connections), "1024", 1, 1000000, NULL, NULL},
    {"server", "shutdown_grace_ms", T_INT, OFF(shutdown_grace_ms), "10000", 0, HOUR_MS, NULL,
     NULL},
    {"server", "cors_origins", T_STR, OFF(cors_origins), "", 0, 0, NULL, NULL},
    {"server", "responses_ttl_s", T_INT, OFF(responses_ttl_s), "2592000", 0,
     100LL * 365 * 86400, NULL, NULL},
    {"server", "responses_max_bytes", T_SIZE, OFF(responses_max_bytes), "1G", 0, 1LL << 50,
     NULL, NULL},
    {"tls", "cert_file", T_STR, OFF(cert_file), "", 0, 0, NULL, NULL},
    {"tls", "key_file", T_STR, OFF(key_file), "", 0, 0, NULL, NULL},
    {"log", "level", T_ENUM, OFF(log_level), "info", 0, 0, level_names, NULL},
    {"engine", "model", T_STR, OFF(engine_model),
     "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf", 0, 0, NULL, check_nonempty},
    {"engine", "model_name", T_STR, OFF(engine_model_name), "smollm2-135m-instruct", 0, 0, NULL,
     check_nonempty},
    {"engine", "chat_format", T_ENUM, OFF(engine_chat_format), "auto", 0, 0, chat_names, NULL},
    {"engine", "threads", T_INT, OFF(engine_threads), "0", 0, 1024, NULL, NULL},
    {"engine", "block_size", T_INT, OFF(engine_block_size), "16", 1, 1024, NULL, NULL},
    {"engine", "max_num_seqs", T_INT, OFF(engine_max_num_seqs), "16", 1, 4096, NULL, NULL},
    {"engine", "max_num_batched_tokens", T_INT, OFF(engine_max_num_batched_tokens), "512", 1,
     1 << 20, NULL, NULL},
    {"engine", "max_model_len", T_INT, OFF(engine_max_model_len), "0", 0, 1 << 20, NULL, NULL},
    {"engine", "num_gpu_blocks_override", T_INT, OFF(engine_num_blocks_override), "0", 0,
     1 << 24, NULL, NULL},
    {"engine", "gpu_memory_utilization", T_REAL, OFF(engine_gpu_memory_utilization), "0.9", 10,
     1000, NULL, NULL},
    {"engine", "kv_cache_dtype", T_ENUM, OFF(engine_kv_cache_dtype), "auto", 0, 0, kv_dtype_names,
     NULL},
    {"engine", "cpu_matmul", T_ENUM, OFF(engine_cpu_matmul), "f32", 0, 0, matmul_names, NULL},
    {"engine", "cpu_kv_cache_bytes", T_SIZE, OFF(engine_cpu_kv_cache_bytes), "256M", 1 * MIB,
     1024LL * 1024 * MIB, NULL, NULL},
    {"engine", "max_waiting", T_INT, OFF(engine_max_waiting), "256", 1, 1 << 20, NULL, NULL},
    {"engine", "request_timeout_ms", T_INT, OFF(engine_request_timeout_ms), "300000", 1, HOUR_MS,
     NULL, NULL},
    {"engine", "enable_prefix_caching", T_BOOL, OFF(engine_prefix_caching), "true", 0, 0, NULL,
     NULL},
    {"engine", "max_tokens_default", T_INT, OFF(engine_max_tokens_default), "512", 1, 1 << 20,
     NULL, NULL},
    {"embedder", "model", T_STR, OFF(embedder_model), "models/all-minilm-l6-v2", 0, 0, NULL,
     check_nonempty},
    {"embedder", "model_name", T_STR, OFF(embedder_model_name), "all-minilm-l6-v2", 0, 0, NULL,
     check_nonempty},
    {"embedder", "max_batch", T_INT, OFF(embedder_max_batch), "64", 1, 4096, NULL, NULL},
    {"embedder", "max_wait_us", T_INT, OFF(embedder_max_wait_us), "0", 0, 1000000, NULL, NULL},
    {"embedder", "threads", T_INT, OFF(embedder_threads), "0", 0, 1024, NULL, NULL},
    {"embedder", "truncate", T_BOOL, OFF(embedder_truncate), "false", 0, 0, NULL, NULL},
    {"embedder", "openai_tokenizer", T_STR, OFF(embedder_openai_tokenizer),
     "models/openai-tokenizers/cl100k_base.tiktoken", 0, 0, NULL, NULL},
    {"cache", "enabled", T_BOOL, OFF(cache_enabled), "true", 0, 0, NULL, NULL},
    {"cache", "similarity_threshold", T_REAL, OFF(cache_threshold), "0.70", 0, 1000, NULL, NULL},
    {"cache", "guard", T_BOOL, OFF(cache_guard), "true", 0, 0, NULL, NULL},
    {"cache", "guard_words", T_STR, OFF(cache_guard_words), "/usr/share/dict/words", 0, 0, NULL,
     NULL},
    {"cache", "guard_strict_below", T_REAL, OFF(cache_guard_strict_below), "0.83", 0, 1000, NULL,
     NULL},
    {"cache", "same_words_floor", T_REAL, OFF(cache_same_words_floor), "0.65", 0, 1000, NULL,
     NULL},
    {"cache", "judge_threshold", T_REAL, OFF(cache_judge_threshold), "0.5", 0, 1000, NULL, NULL},
    {"cache", "judge_bytes", T_SIZE, OFF(cache_judge_bytes), "32M", 0, 1LL << 40, NULL, NULL},
    {"cache", "miss_reasons", T_BOOL, OFF(cache_miss_reasons), "true", 0, 0, NULL, NULL},
    {"cache", "candidates", T_INT, OFF(cache_candidates), "8", 1, 64, NULL, NULL},
    {"cache", "hot_entries", T_INT, OFF(cache_hot_entries), "16384", 0, 1 << 24, NULL, NULL},
    {"cache", "hot_bytes", T_SIZE, OFF(cache_hot_bytes), "32M", 0, 1LL << 40, NULL, NULL},
    {"cache", "ttl_s", T_INT, OFF(cache_ttl_s), "604800", 0, 100LL * 365 * 86400, NULL, NULL},
    {"cache", "max_entries", T_INT, OFF(cache_max_entries), "1000000", 0, 1LL << 40, NULL, NULL},
    {"cache", "max_bytes", T_SIZE, OFF(cache_max_bytes), "1G", 0, 1LL << 50, NULL, NULL},
    {"cache", "hnsw_min_entries", T_INT, OFF(cache_hnsw_min_entries), "50000", 0, 1LL << 40,
     NULL, NULL},
    {"tenants", "admin_key", T_STR, OFF(admin_key), "", 0, 0, NULL, NULL},
    {"tenants", "auth", T_BOOL, OFF(tenants_auth), "false", 0, 0, NULL, NULL},
    {"tenants", "requests_per_minute", T_INT, OFF(tenants_rpm), "0", 0, 1LL << 40, NULL, NULL},
    {"tenants", "tokens_per_minute", T_INT, OFF(tenants_tpm), "0", 0, 1LL << 40, NULL, NULL},
    {"tenants", "concurrent_requests", T_INT, OFF(tenants_concurrency), "0", 0, 1 << 20, NULL,
     NULL},
    {"tenants", "monthly_tokens", T_INT, OFF(tenants_monthly_tokens), "0", 0, 1LL << 50, NULL,
     NULL},
    {"tenants", "share_prefix_cache", T_BOOL, OFF(tenants_share_prefix), "false", 0, 0, NULL,
     NULL},
    {"tenants", "metrics_max_tenants", T_INT, OFF(tenants_metrics_max), "20", 1, 10000, NULL,
     NULL},
    {"tenants", "metrics_auth", T_BOOL, OFF(metrics_auth), "false", 0, 0, NULL, NULL},
};

/* Sections that exist for the keys later features add; a key in them is still checked. */
static const char *const sections[] = {"server", "tls",    "log",     "cache",
                                       "embedder", "engine", "tenants", NULL};

/* 0, or -1 for what is no number, -2 for one too large for 64 bits (said as out of range) */
static int parse_int(const char *v, int64_t mult_allowed, int64_t *out)
{
    errno = 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (end == v)
        return -1;
    int too_big = errno == ERANGE;
    int64_t mult = 1;
    if (mult_allowed && *end) {
        switch (*end) {
        case 'k': case 'K': mult = KIB; break;
        case 'm': case 'M': mult = MIB; break;
        case 'g': case 'G': mult = 1024 * MIB; break;
        default: return -1;
        }
        end++;
    }
    if (*end)
        return -1;
    if (too_big || x > INT64_MAX / mult || x < INT64_MIN / mult)
        return -2;
    *out = x * mult;
    return 0;
}

static int apply(struct gw_config *cfg, const struct opt *o, const char *v, char *err,
                 size_t errlen)
{
    void *field = (char *)cfg + o->offset;
    switch (o->type) {
    case T_STR: {
        char why[320];
        if (o->check && o->check(v, why, sizeof why)) {
            snprintf(err, errlen, "%s.%s: %s", o->section, o->key, why);
            return -1;
        }
        char *s = strdup(v);
        if (!s) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        free(*(char **)field);
        *(char **)field = s;
        return 0;
    }
    case T_INT:
    case T_SIZE: {
        int64_t x;
        int prc = parse_int(v, o->type == T_SIZE, &x);
        if (prc == -2) {
            snprintf(err, errlen, "%s.%s: '%s' is out of range %" PRId64 "..%" PRId64,
                     o->section, o->key, v, o->min, o->max);
            return -1;
        }
        if (prc) {
            snprintf(err, errlen, "%s.%s: '%s' is not %s", o->section, o->key, v,
                     o->type == T_SIZE ? "a size (bytes, or with a K, M or G suffix)"
                                       : "an integer");
            return -1;
        }
        if (x < o->min || x > o->max) {
            snprintf(err, errlen, "%s.%s: %" PRId64 " is out of range %" PRId64 "..%" PRId64,
                     o->section, o->key, x, o->min, o->max);
            return -1;
        }
        *(int64_t *)field = x;
        return 0;
    }
    case T_REAL: {
        errno = 0;
        char *end;
        double x = strtod(v, &end);
        /* bounds of a real key are in thousandths, as integers */
        if (end == v || *end || errno || x != x) {
            snprintf(err, errlen, "%s.%s: '%s' is not a number", o->section, o->key, v);
            return -1;
        }
        if (x * 1000 < (double)o->min || x * 1000 > (double)o->max) {
            snprintf(err, errlen, "%s.%s: %g is out of range %g..%g", o->section, o->key, x,
                     (double)o->min / 1000, (double)o->max / 1000);
            return -1;
        }
        *(double *)field = x;
        return 0;
    }
    case T_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
            *(int *)field = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") ||
                 !strcmp(v, "0"))
            *(int *)field = 0;
        else {
            snprintf(err, errlen, "%s.%s: '%s' is not a boolean (true/false)", o->section,
                     o->key, v);
            return -1;
        }
        return 0;
    case T_ENUM:
        for (int i = 0; o->names[i]; i++)
            if (!strcmp(v, o->names[i])) {
                *(int *)field = i;
                return 0;
            }
        {
            char allowed[128] = "";
            for (int i = 0; o->names[i]; i++) {
                strncat(allowed, i ? ", " : "", sizeof allowed - strlen(allowed) - 1);
                strncat(allowed, o->names[i], sizeof allowed - strlen(allowed) - 1);
            }
            snprintf(err, errlen, "%s.%s: '%s' is not one of %s", o->section, o->key, v,
                     allowed);
        }
        return -1;
    }
    return -1;
}

static const struct opt *find(const char *section, const char *key)
{
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(opts[i].section, section) && !strcmp(opts[i].key, key))
            return &opts[i];
    return NULL;
}

void gw_config_defaults(struct gw_config *cfg)
{
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        int rc = apply(cfg, &opts[i], opts[i].def, err, sizeof err);
        (void)rc;
    }
}

int gw_config_set(struct gw_config *cfg, const char *section, const char *key,
                  const char *value, const char *where, char *err, size_t errlen)
{
    char msg[384];
    int known_section = 0;
    for (int i = 0; sections[i]; i++)
        known_section |= !strcmp(sections[i], section);
    const struct opt *o = find(section, key);
    if (!*section)
        snprintf(msg, sizeof msg, "key '%s' before any [section]", key);
    else if (!known_section)
        snprintf(msg, sizeof msg, "unknown section [%s]", section);
    else if (!o)
        snprintf(msg, sizeof msg, "unknown key '%s' in section [%s]", key, section);
    else if (apply(cfg, o, value, msg, sizeof msg) == 0)
        return 0;
    snprintf(err, errlen, "%s: %s", where, msg);
    return -1;
}

struct load_ctx {
    struct gw_config *cfg;
    char msg[384];
    int failed;
    unsigned char seen[sizeof opts / sizeof opts[0]];
};

static int on_ini(void *user, const char *section, const char *key, const char *value)
{
    struct load_ctx *lc = user;
    char err[384];
    if (lc->failed)
        return 1; /* keep the first error; inih reports the first failing line */
    const struct opt *o = find(section, key);
    if (o && lc->seen[o - opts]++) {
        lc->failed = 1;
        snprintf(lc->msg, sizeof lc->msg, "%s.%s is set a second time", section, key);
        return 0;
    }
    if (gw_config_set(lc->cfg, section, key, value, "", err, sizeof err)) {
        lc->failed = 1;
        snprintf(lc->msg, sizeof lc->msg, "%s", err + 2); /* drop the empty "where: " */
        return 0;
    }
    return 1;
}

/* The longest line the INI reader takes whole (it splits longer ones). */
#define MAX_LINE 190
#define MAX_FILE (1 << 20)

/*
 * Reads the file and refuses what the INI reader would take otherwise than it reads: a
 * line longer than it reads whole, an indented line (a continuation of the key before),
 * a ';' or '#' after white space in a value (';' would start a comment, '#' stay in the
 * value), a section header that does not close, a section that does not exist. Returns
 * the text (caller frees), or NULL with err set.
 */
static char *read_checked(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        st.st_mode = 0;
    if (!S_ISREG(st.st_mode) || st.st_size > MAX_FILE) {
        snprintf(err, errlen, "%s: %s", path,
                 S_ISDIR(st.st_mode)    ? "is a directory, not a configuration file"
                 : !S_ISREG(st.st_mode) ? "is not a regular file"
                                        : "is larger than 1 MiB");
        fclose(f);
        return NULL;
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
    int bad = !text || ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: cannot read", path);
        free(text);
        return NULL;
    }
    text[n] = 0;
    if (memchr(text, 0, n)) {
        snprintf(err, errlen, "%s: contains a NUL byte; not a text file", path);
        free(text);
        return NULL;
    }
    int line = 0;
    char *p = text;
    if (n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3))
        p += 3; /* a byte order mark (the INI reader skips it too) */
    while (*p) {
        char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        line++;
        if (len && p[len - 1] == '\r')
            len--;
        const char *why = NULL;
        size_t lead = strspn(p, " \t");
        char first = lead < len ? p[lead] : 0;
        if (memchr(p, '\r', len))
            why = "a carriage return inside a line (lines end with a line feed)";
        else if (len > MAX_LINE)
            why = "line longer than 190 characters";
        else if (first && first != ';' && first != '#' && lead > 0)
            why = "indented line (keys and sections start at the beginning of a line; an "
                  "indented line would continue the value before it)";
        else if (first == '[') {
            const char *close = memchr(p, ']', len);
            char name[64];
            size_t nl = close ? (size_t)(close - p - 1) : 0;
            int known = 0;
            if (close && nl < sizeof name) {
                memcpy(name, p + 1, nl);
                name[nl] = 0;
                for (int i = 0; sections[i]; i++)
                    known |= !strcmp(sections[i], name);
            }
            size_t after = close ? (size_t)(close - p) + 1 : len;
            while (after < len && (p[after] == ' ' || p[after] == '\t'))
                after++;
            if (!close)
                why = "section header without its closing ']'";
            else if (after < len)
                why = "text after a section header (keys go on lines of their own)";
            else if (!known) {
                snprintf(err, errlen, "%s:%d: unknown section [%.*s]", path, line,
                         (int)(nl < 40 ? nl : 40), p + 1);
                free(text);
                return NULL;
            }
        } else if (first && first != ';' && first != '#') {
            for (size_t i = 1; i < len && !why; i++)
                if ((p[i] == ';' || p[i] == '#') && (p[i - 1] == ' ' || p[i - 1] == '\t'))
                    why = "a ';' or '#' after white space (comments go on lines of their own)";
        }
        if (why) {
            snprintf(err, errlen, "%s:%d: %s", path, line, why);
            free(text);
            return NULL;
        }
        p = eol ? eol + 1 : p + strlen(p);
    }
    return text;
}

int gw_config_load(struct gw_config *cfg, const char *path, char *err, size_t errlen)
{
    struct load_ctx lc = {.cfg = cfg};
    char *text = read_checked(path, err, errlen);
    if (!text)
        return -1;
    int rc = ini_parse_string(text, on_ini, &lc);
    free(text);
    if (rc == 0 && cfg->engine_kv_cache_dtype == GW_KV_BF16 && cfg->engine_block_size % 2) {
        snprintf(err, errlen, "%s: engine.kv_cache_dtype = bf16 keeps positions in pairs: "
                 "engine.block_size must be even (it is %ld)", path,
                 (long)cfg->engine_block_size);
        return -1;
    }
    if (rc == 0 && !strcmp(cfg->engine_model_name, cfg->embedder_model_name)) {
        snprintf(err, errlen, "%s: engine.model_name and embedder.model_name are both '%s'; "
                 "each model needs a name of its own", path, cfg->engine_model_name);
        return -1;
    }
    if (rc == 0)
        return 0;
    if (lc.failed)
        snprintf(err, errlen, "%s:%d: %s", path, rc, lc.msg);
    else if (rc > 0)
        snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path,
                 rc);
    else
        snprintf(err, errlen, "%s: cannot read", path);
    return -1;
}

static int loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

int gw_config_check_address(const struct gw_config *cfg, const struct sockaddr *sa, char *err,
                            size_t errlen)
{
    if (cfg->tenants_auth || loopback(sa))
        return 0;
    snprintf(err, errlen, "tenants.auth = off is allowed only on a loopback listener "
             "(127.0.0.0/8 or ::1), and server.listen is %s: turn auth on (and create keys "
             "with `cachegate key create`) or listen on 127.0.0.1", cfg->listen);
    return -1;
}

int gw_config_check_serve(const struct gw_config *cfg, char *err, size_t errlen)
{
    if (!!*cfg->cert_file != !!*cfg->key_file) {
        snprintf(err, errlen, "tls.cert_file and tls.key_file must be set together (%s is "
                 "empty)", *cfg->cert_file ? "tls.key_file" : "tls.cert_file");
        return -1;
    }
    if (cfg->metrics_auth && !*cfg->admin_key) {
        snprintf(err, errlen, "tenants.metrics_auth = true asks /metrics for the admin key, "
                 "and tenants.admin_key is empty");
        return -1;
    }
    if (cfg->tenants_auth)
        return 0;
    char host[256];
    int port;
    if (gw_config_split_listen(cfg->listen, host, sizeof host, &port))
        return 0; /* the key's own check says so */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int gai = getaddrinfo(host, NULL, &hints, &ai);
    if (gai != 0 || !ai) { /* not known to be loopback: refused */
        snprintf(err, errlen, "tenants.auth = off needs a loopback listener, and server.listen "
                 "%s cannot be resolved (%s)", cfg->listen, gai ? gai_strerror(gai) : "none");
        return -1;
    }
    int rc = 0;
    for (struct addrinfo *a = ai; a && !rc; a = a->ai_next)
        rc = gw_config_check_address(cfg, a->ai_addr, err, errlen);
    freeaddrinfo(ai);
    return rc;
}

void gw_config_deinit(struct gw_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (opts[i].type == T_STR) {
            char **p = (char **)((char *)cfg + opts[i].offset);
            free(*p);
            *p = NULL;
        }
}

int gw_config_split_listen(const char *listen, char *host, size_t hostlen, int *port)
{
    const char *colon;
    const char *h = listen;
    size_t hl;
    if (*listen == '[') {
        const char *rb = strchr(listen, ']');
        if (!rb || rb[1] != ':')
            return -1;
        h = listen + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || strchr(listen, ':') != colon)
            return -1;
        hl = (size_t)(colon - listen);
    }
    if (hl == 0 || hl >= hostlen)
        return -1;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || errno || p < 0 || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    *port = (int)p;
    return 0;
}

const char *gw_device_name(int device)
{
    return device >= 0 && device < 3 ? device_names[device] : "auto";
}

const char *gw_kv_dtype_name(int want)
{
    return want >= 0 && want <= GW_KV_Q8_0 ? kv_dtype_names[want] : "auto";
}
