/*
 * cachegate — command line: `serve` runs the gateway, `device` reports where models
 * would run, `embed` prints sentence embeddings, `generate` runs the chat model on one
 * prompt, `version` prints the version. Exit status: 0 success, 1 runtime failure,
 * 2 usage or configuration error.
 */
#include "cli.h"
#include "config.h"
#include "embedder.h"
#include "engine.h"
#include "generate.h"
#include "gguf.h"
#include "cuda_plugin.h"
#include "device.h"
#include "log.h"
#include "server.h"

#include <errno.h>
#include <event2/thread.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CONFIG "conf/cachegate.conf"

static void usage(FILE *f)
{
    fprintf(f, "usage: cachegate serve [--config FILE] [--listen HOST:PORT] [--data-dir DIR]\n"
               "                       [--device auto|cpu|cuda]\n"
               "       cachegate device [--config FILE] [--device auto|cpu|cuda]\n"
               "       cachegate embed [--config FILE] [--model DIR] [--device D] TEXT...|-\n"
               "       cachegate generate [--model FILE] [--chat] [--system TEXT] --prompt TEXT\n"
               "                [--max-tokens N] [--temperature T] [--top-p P] [--seed S]\n"
               "                [--threads N] [--device auto|cpu|cuda] [--config FILE]\n"
               "       cachegate cache import FILE|- [--tenant NAME] [--data-dir DIR]\n"
               "       cachegate cache list [--tenant NAME] [--limit N] [--grep TEXT] [--json]\n"
               "       cachegate cache delete ID... [--tenant NAME] | --all [--tenant NAME]\n"
               "       cachegate tenant create NAME [POLICY] | set NAME POLICY | list | delete NAME\n"
               "       cachegate key create TENANT | list TENANT | revoke PREFIX|KEY\n"
               "       cachegate usage [--tenant NAME] [--since YYYY-MM-DD]\n"
               "       (cache, tenant, key, usage: [--data-dir DIR] [--config FILE])\n"
               "       cachegate version\n"
               "\n"
               "Defaults: --config " DEFAULT_CONFIG ", --listen 127.0.0.1:8443,\n"
               "--data-dir ./var, --device auto (command-line values override the file).\n"
               "`cachegate help COMMAND` (or COMMAND --help) tells more of one command.\n");
}

/* What `cachegate COMMAND --help` and `cachegate help COMMAND` print. */
static const struct {
    const char *cmd, *text;
} command_help[] = {
    {"serve",
     "usage: cachegate serve [--config FILE] [--listen HOST:PORT] [--data-dir DIR]\n"
     "                       [--device auto|cpu|cuda]\n"
     "Serves the OpenAI API over TLS: exact cache, semantic cache, then the engine.\n"
     "  --config FILE      the configuration (default " DEFAULT_CONFIG ")\n"
     "  --listen HOST:PORT overrides [server] listen (default 127.0.0.1:8443)\n"
     "  --data-dir DIR     overrides [server] data_dir (default ./var): the database,\n"
     "                     the indexes and a generated certificate live there\n"
     "  --device D         auto (a GPU when there is one), cpu or cuda\n"
     "SIGTERM or SIGINT stops it gracefully: answers in flight finish, the cache is saved.\n"},
    {"device",
     "usage: cachegate device [--config FILE] [--device auto|cpu|cuda]\n"
     "Prints, as JSON, where the models would run; a log line on standard error says why.\n"},
    {"embed",
     "usage: cachegate embed [--config FILE] [--model DIR] [--device D] TEXT...|-\n"
     "Prints each TEXT's sentence embedding as a JSON array, one line per text; with -\n"
     "as the only TEXT, each line of standard input is a text.\n"
     "  --model DIR        a safetensors directory (default: [embedder] model)\n"},
    {"generate",
     "usage: cachegate generate [--model FILE] [--chat] [--system TEXT] --prompt TEXT\n"
     "                [--max-tokens N] [--temperature T] [--top-p P] [--seed S]\n"
     "                [--threads N] [--device auto|cpu|cuda] [--config FILE]\n"
     "Streams the model's continuation of TEXT to standard output; prompt and generation\n"
     "tokens/s and the finish reason go to standard error.\n"
     "  --model FILE       a GGUF file (default: [engine] model)\n"
     "  --chat             wrap the prompt in the model's chat template\n"
     "  --system TEXT      a system message (with --chat)\n"
     "  --max-tokens N     at most N tokens (default 256)\n"
     "  --temperature T    0 is greedy (default 1)\n"
     "  --top-p P          nucleus sampling (default 1)\n"
     "  --seed S           a seed that makes sampling reproducible\n"
     "  --threads N        CPU threads (default: [engine] threads)\n"},
    {"cache",
     "usage: cachegate cache import FILE|- [--tenant NAME] [--data-dir DIR] [--config FILE]\n"
     "       cachegate cache list [--tenant NAME] [--limit N] [--before ID] [--grep TEXT]\n"
     "                            [--json] [--data-dir DIR] [--config FILE]\n"
     "       cachegate cache delete ID... [--tenant NAME] | --all [--tenant NAME]\n"
     "                              [--data-dir DIR] [--config FILE]\n"
     "Stores answers in a tenant's cache (default tenant: default) before a server starts;\n"
     "a running server takes them at POST /admin/cache/import. FILE (- for standard\n"
     "input) holds JSON lines {\"model\", \"messages\" (or \"prompt\"), \"answer\"}, with\n"
     "optional sampling parameters as a request's. Bad lines are reported as FILE:LINE\n"
     "and make the exit status 1; the good ones are kept.\n"
     "list shows a tenant's entries, newest first (20 unless --limit says; --before ID goes\n"
     "on from an earlier page; --grep keeps the questions holding TEXT), beside a running\n"
     "server too: the id is what DELETE /admin/cache?id=N takes.\n"
     "delete deletes entries by id (a tenant's only, with --tenant), or --all of a tenant's\n"
     "(of every tenant, without --tenant), with the server stopped: a running one holds\n"
     "answers in memory that only its admin API (DELETE /admin/cache) drops.\n"},
    {"tenant",
     "usage: cachegate tenant create NAME [POLICY_JSON] | set NAME POLICY_JSON | list\n"
     "                      | delete NAME   [--data-dir DIR] [--config FILE]\n"
     "A policy may set similarity_threshold, ttl_s, max_entries, max_bytes,\n"
     "share_prefix_cache, models, requests_per_minute, tokens_per_minute,\n"
     "concurrent_requests, monthly_tokens, e.g. '{\"requests_per_minute\": 60}'; set\n"
     "replaces the whole policy. delete also deletes the tenant's keys, usage and cached\n"
     "answers. A running server rereads tenants within a second.\n"},
    {"key",
     "usage: cachegate key create TENANT | list TENANT | revoke PREFIX|KEY\n"
     "                   [--data-dir DIR] [--config FILE]\n"
     "create prints only the new key (shown once: only its hash is kept); list shows\n"
     "prefixes; revoke takes a key or its 12-character prefix. A running server rereads\n"
     "keys within a second.\n"},
    {"usage",
     "usage: cachegate usage [--tenant NAME] [--since YYYY-MM-DD] [--data-dir DIR]\n"
     "                       [--config FILE]\n"
     "Prints per tenant and day the requests, prompt and completion tokens, cached\n"
     "prompt tokens, exact and semantic cache hits, and the tokens the caches saved.\n"},
    {"version", "usage: cachegate version\nPrints the version.\n"},
};

static int help_known(const char *cmd)
{
    for (size_t i = 0; i < sizeof command_help / sizeof *command_help; i++)
        if (!strcmp(cmd, command_help[i].cmd))
            return 1;
    return 0;
}

/* Prints cmd's help to f ("serve", or getopt's "cachegate serve"); the whole usage when
 * cmd is not a command. */
static void help(FILE *f, const char *cmd)
{
    if (!strncmp(cmd, "cachegate ", 10))
        cmd += 10;
    for (size_t i = 0; i < sizeof command_help / sizeof *command_help; i++)
        if (!strcmp(cmd, command_help[i].cmd)) {
            fputs(command_help[i].text, f);
            return;
        }
    usage(f);
}

/* mkdir -p */
static int make_dirs(const char *path, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(tmp, 0750) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "cannot create directory %s: %s", tmp, strerror(errno));
                return -1;
            }
            *p = saved;
            if (!saved)
                return 0;
        }
    }
}

/* Parses the common options into cfg. Returns 0, or the exit status to use. `optional`: the
 * shipped file may be missing (a command that reads nothing else from it, run elsewhere). */
static int load_config(int argc, char **argv, int optional, struct gw_config *cfg)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},   {"listen", required_argument, NULL, 'l'},
        {"data-dir", required_argument, NULL, 'd'}, {"device", required_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    const char *config = DEFAULT_CONFIG, *listen = NULL, *data_dir = NULL, *device = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:l:d:D:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case 'l': listen = optarg; break;
        case 'd': data_dir = optarg; break;
        case 'D': device = optarg; break;
        case 'h': help(stdout, argv[0]); exit(0);
        default: help(stderr, argv[0]); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
        help(stderr, argv[0]);
        return 2;
    }
    char err[1024];
    gw_config_defaults(cfg);
    if (((!optional || strcmp(config, DEFAULT_CONFIG) || access(config, F_OK) == 0) &&
         gw_config_load(cfg, config, err, sizeof err)) ||
        (listen && gw_config_set(cfg, "server", "listen", listen, "--listen", err, sizeof err)) ||
        (data_dir &&
         gw_config_set(cfg, "server", "data_dir", data_dir, "--data-dir", err, sizeof err)) ||
        (device && gw_config_set(cfg, "server", "device", device, "--device", err, sizeof err))) {
        gw_log_kv(GW_LOG_ERROR, "configuration error", "error", err, NULL);
        fprintf(stderr, "cachegate: %s\n", err);
        gw_config_deinit(cfg);
        return 2;
    }
    gw_log_set_level(cfg->log_level);
    return 0;
}

static int select_device(const struct gw_config *cfg, struct gw_device *dev)
{
    char err[1024];
    if (gw_device_select(cfg->device, dev, err, sizeof err)) {
        gw_log_kv(GW_LOG_ERROR, "no usable device", "error", err, NULL);
        return -1;
    }
    if (dev->why_cpu[0])
        gw_log_kv(GW_LOG_INFO, "device auto: using the CPU", "reason", dev->why_cpu, NULL);
    return 0;
}

/* The libraries' log lines (embedder, engine: same levels) go to the gateway's sink. */
static void lib_log_sink(void *ud, int level, const char *msg)
{
    (void)ud;
    static const int map[] = {GW_LOG_DEBUG, GW_LOG_INFO, GW_LOG_WARN, GW_LOG_ERROR};
    gw_log(level >= 0 && level < 4 ? map[level] : GW_LOG_INFO, "%s", msg);
}


static int cmd_serve(int argc, char **argv)
{
    struct gw_config cfg;
    struct gw_device dev;
    char err[1024];
    int rc = load_config(argc, argv, 0, &cfg);
    if (rc)
        return rc;
    if (gw_config_check_serve(&cfg, err, sizeof err)) {
        gw_log_kv(GW_LOG_ERROR, "configuration error", "error", err, NULL);
        fprintf(stderr, "cachegate: %s\n", err);
        gw_config_deinit(&cfg);
        return 2;
    }
    /* the admin key opens every tenant's data, and nothing slows a guess: a short one can
     * be found (a password-like key of 8 characters in days at the rate a server answers) */
    if (*cfg.admin_key && strlen(cfg.admin_key) < 16)
        gw_log(GW_LOG_WARN, "tenants.admin_key has %zu bytes: use 16 or more, random "
               "(openssl rand -hex 24)", strlen(cfg.admin_key));
    rc = 1;
    gw_server_catch_early_signals(); /* a reload or a stop asked while the models load */
    if (make_dirs(cfg.data_dir, err, sizeof err)) {
        gw_log_kv(GW_LOG_ERROR, "cannot start", "error", err, NULL);
        goto out;
    }
    if (select_device(&cfg, &dev))
        goto out;
    emb_set_log(lib_log_sink, NULL);
    eng_set_log(lib_log_sink, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (evthread_use_pthreads() != 0) {
        gw_log(GW_LOG_ERROR, "libevent has no pthreads support");
        goto out;
    }
    gw_server *srv = gw_server_create(&cfg, &dev, err, sizeof err);
    if (!srv) {
        gw_log_kv(GW_LOG_ERROR, "cannot start", "error", err, NULL);
        goto out;
    }
    rc = gw_server_run(srv);
    gw_server_destroy(srv); /* the indexes saved, the store closed */
    if (rc == 0)
        gw_log(GW_LOG_INFO, "shutdown complete");
out:
    gw_config_deinit(&cfg);
    return rc;
}

static int cmd_device(int argc, char **argv)
{
    struct gw_config cfg;
    struct gw_device dev;
    int rc = load_config(argc, argv, 1, &cfg);
    if (rc)
        return rc;
    rc = select_device(&cfg, &dev) ? 1 : 0;
    if (rc == 0)
        printf("{\"device\":\"%s\",\"cuda\":%s}\n", dev.description,
               dev.use_cuda ? "true" : "false");
    gw_config_deinit(&cfg);
    return rc;
}

/*
 * The configuration of a one-shot tool (embed, generate): the shipped file is optional,
 * since --model alone is enough; only warnings and errors are logged. 0, or 1 after
 * printing why.
 */
static int load_tool_config(const char *config, struct gw_config *cfg)
{
    char err[1024];
    gw_config_defaults(cfg);
    if ((strcmp(config, DEFAULT_CONFIG) != 0 || access(config, F_OK) == 0) &&
        gw_config_load(cfg, config, err, sizeof err)) {
        fprintf(stderr, "cachegate: %s\n", err);
        gw_config_deinit(cfg);
        return 1;
    }
    gw_log_set_level(cfg->log_level > GW_LOG_WARN ? cfg->log_level : GW_LOG_WARN);
    return 0;
}

/* The device for a one-shot command: 0, or the exit status after saying why (2: a bad
 * --device value, 1: the device asked for is not there). */
static int tool_device(struct gw_config *cfg, const char *device, const char *prog,
                       struct gw_device *dev)
{
    char err[1024];
    if (device && gw_config_set(cfg, "server", "device", device, "--device", err, sizeof err)) {
        fprintf(stderr, "cachegate %s: %s\n", prog, err);
        return 2;
    }
    if (gw_device_select(cfg->device, dev, err, sizeof err)) {
        fprintf(stderr, "cachegate %s: %s\n", prog, err);
        return 1;
    }
    return 0;
}

/* Whatever stdout still holds, written: 0, or 1 after saying why it could not be. */
static int stdout_done(const char *prog, int failed)
{
    if (!failed && (fflush(stdout) || ferror(stdout)))
        failed = errno ? errno : EIO;
    if (!failed)
        return 0;
    fprintf(stderr, "cachegate %s: cannot write the output: %s\n", prog, strerror(failed));
    return 1;
}

/* Embeds n texts and prints a JSON array for each, one a line: 0, or 1 after saying why. */
static int embed_print(emb_model *m, const char *const *texts, int n)
{
    int dim = emb_dim(m), rc = EMB_ENOMEM;
    float *out = malloc(sizeof(float) * (size_t)n * (size_t)dim);
    size_t *lens = malloc(sizeof(size_t) * (size_t)n);
    if (out && lens) {
        for (int i = 0; i < n; i++)
            lens[i] = strlen(texts[i]);
        rc = emb_encode(m, texts, lens, n, out, NULL);
    }
    if (rc) {
        fprintf(stderr, "cachegate embed: %s\n", emb_strerror(rc));
    } else {
        for (int i = 0; i < n; i++) {
            putchar('[');
            for (int j = 0; j < dim; j++)
                printf("%s%.9g", j ? "," : "", out[(size_t)i * dim + j]);
            puts("]");
        }
    }
    free(out);
    free(lens);
    return rc ? 1 : 0;
}

/* `cachegate embed -`: each line of f a text (its line break, and a CR before it, not part
 * of it), embedded EMBED_LINES_BATCH at a time so that a long file streams. */
#define EMBED_LINES_BATCH 64
static int embed_lines(emb_model *m, FILE *f)
{
    char *texts[EMBED_LINES_BATCH] = {0};
    size_t caps[EMBED_LINES_BATCH] = {0};
    int n = 0, rc = 0;
    for (;;) {
        ssize_t len = getline(&texts[n], &caps[n], f);
        if (len >= 0) {
            while (len > 0 && (texts[n][len - 1] == '\n' || texts[n][len - 1] == '\r'))
                texts[n][--len] = 0;
            n++;
        }
        if (n && (len < 0 || n == EMBED_LINES_BATCH)) {
            rc = embed_print(m, (const char *const *)texts, n);
            n = 0;
            if (rc || fflush(stdout))
                break;
        }
        if (len < 0) {
            if (ferror(f)) {
                fprintf(stderr, "cachegate embed: cannot read standard input: %s\n",
                        strerror(errno));
                rc = 1;
            }
            break;
        }
    }
    for (int i = 0; i < EMBED_LINES_BATCH; i++)
        free(texts[i]);
    return rc;
}

static int cmd_embed(int argc, char **argv)
{
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"model", required_argument, NULL, 'm'},
                                              {"device", required_argument, NULL, 'D'},
                                              {NULL, 0, NULL, 0}};
    const char *config = DEFAULT_CONFIG, *model = NULL, *device = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:m:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case 'm': model = optarg; break;
        case 'D': device = optarg; break;
        default: help(stderr, argv[0]); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "cachegate embed: no TEXT given\n");
        return 2;
    }
    struct gw_config cfg;
    char err[1024];
    if (load_tool_config(config, &cfg))
        return 2;
    emb_set_log(lib_log_sink, NULL);
    struct gw_device dev;
    int drc = tool_device(&cfg, device, "embed", &dev);
    if (drc) {
        gw_config_deinit(&cfg);
        return drc;
    }
    struct emb_options eo = {.gpu = dev.cuda ? dev.cuda->emb_create : NULL};
    emb_model *m = NULL;
    int rc = emb_model_load(model ? model : cfg.embedder_model, &eo, &m, err, sizeof err);
    gw_config_deinit(&cfg);
    if (rc) {
        fprintf(stderr, "cachegate embed: %s\n", err);
        return 1;
    }
    if (argc - optind == 1 && !strcmp(argv[optind], "-"))
        rc = embed_lines(m, stdin);
    else
        rc = embed_print(m, (const char *const *)argv + optind, argc - optind);
    emb_model_destroy(m);
    if (!rc && stdout_done("embed", 0))
        rc = -1;
    return rc ? 1 : 0;
}

struct progress {
    struct timespec t0;
    int shown;
};

/* A progress bar on stderr, once loading has taken more than a second. */
static void on_progress(void *ud, double f)
{
    struct progress *p = ud;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double el = (double)(t.tv_sec - p->t0.tv_sec) + (double)(t.tv_nsec - p->t0.tv_nsec) / 1e9;
    if ((el < 1.0 && !p->shown) || !isatty(STDERR_FILENO)) /* (frames fill a log file) */
        return;
    int w = 30, k = (int)(f * w + 0.5);
    fprintf(stderr, "\rloading model [%.*s%.*s] %3d%%", k, "##############################",
            w - k, "..............................", (int)(f * 100 + 0.5));
    if (f >= 1.0)
        fputc('\n', stderr);
    p->shown = 1;
}

/* Streams generated text; a failed write (a full disk, a closed pipe) cancels the rest,
 * with errno kept in *ud. */
static int write_stdout(void *ud, const char *text, size_t len)
{
    if (fwrite(text, 1, len, stdout) != len || fflush(stdout)) {
        *(int *)ud = errno ? errno : EIO;
        return 1;
    }
    return 0;
}

/* A whole decimal number from lo to hi, or -1. */
static int int_arg(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* An unsigned 64-bit decimal number, or -1. */
static int u64_arg(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || strchr(s, '-'))
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int cmd_generate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},      {"model", required_argument, NULL, 'm'},
        {"chat", no_argument, NULL, 'C'},              {"system", required_argument, NULL, 's'},
        {"prompt", required_argument, NULL, 'p'},      {"max-tokens", required_argument, NULL, 'n'},
        {"temperature", required_argument, NULL, 't'}, {"top-p", required_argument, NULL, 'P'},
        {"seed", required_argument, NULL, 'S'},        {"threads", required_argument, NULL, 'T'},
        {"device", required_argument, NULL, 'D'},      {NULL, 0, NULL, 0}};
    const char *config = DEFAULT_CONFIG, *model = NULL, *system = NULL, *prompt = NULL;
    const char *device = NULL;
    const char *threads = NULL; /* engine.threads, checked as the configuration's */
    int chat = 0;
    struct eng_gen_params gp = {.max_tokens = 256};
    eng_sampling_default(&gp.sampling);
    int ch;
    char *end;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case 'm': model = optarg; break;
        case 'C': chat = 1; break;
        case 's':
        case 'p':
            if (ch == 'p' ? prompt : system) { /* (the first would be lost without a word) */
                fprintf(stderr, "cachegate generate: --%s is given twice\n",
                        ch == 'p' ? "prompt" : "system");
                return 2;
            }
            *(ch == 'p' ? &prompt : &system) = optarg;
            break;
        case 'n': if (int_arg(optarg, 0, 1 << 20, &gp.max_tokens)) goto bad; break;
        case 't':
            gp.sampling.temperature = strtof(optarg, &end);
            if (*end || end == optarg) goto bad;
            break;
        case 'P':
            gp.sampling.top_p = strtof(optarg, &end);
            if (*end || end == optarg) goto bad;
            break;
        case 'S': if (u64_arg(optarg, &gp.sampling.seed)) goto bad; gp.sampling.has_seed = 1; break;
        case 'T': threads = optarg; break;
        case 'D': device = optarg; break;
        default: help(stderr, argv[0]); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cachegate generate: unexpected argument '%s' (quote the prompt)\n",
                argv[optind]);
        return 2;
    }
    if (!prompt || !*prompt) {
        fprintf(stderr, "cachegate generate: --prompt TEXT is required%s\n",
                prompt ? " (and not empty)" : "");
        return 2;
    }
    if (system && !chat) {
        fprintf(stderr, "cachegate generate: --system goes with --chat\n");
        return 2;
    }
    eng_sampling_top_p_zero(&gp.sampling); /* as the API reads 0 */
    if (eng_sampling_check(&gp.sampling)) {
        fprintf(stderr, "cachegate generate: temperature must be in 0..2 and top-p in [0, 1]\n");
        return 2;
    }
    struct gw_config cfg;
    char err[1024];
    if (load_tool_config(config, &cfg))
        return 2;
    if (threads && gw_config_set(&cfg, "engine", "threads", threads, "--threads", err,
                                 sizeof err)) {
        fprintf(stderr, "cachegate generate: %s\n", err);
        gw_config_deinit(&cfg);
        return 2;
    }
    eng_set_log(lib_log_sink, NULL);
    struct gw_device dev;
    int drc = tool_device(&cfg, device, "generate", &dev);
    if (drc) {
        gw_config_deinit(&cfg);
        return drc;
    }
    struct progress pr = {.shown = 0};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    struct eng_options eo = {.threads = (int)cfg.engine_threads,
                             .int8 = cfg.engine_cpu_matmul == GW_MATMUL_INT8,
                             .backend = dev.cuda ? dev.cuda->eng_create : NULL,
                             .progress = on_progress, .progress_ud = &pr};
    eng_model *m = NULL;
    tok_vocab *v = NULL;
    int32_t *ids = NULL;
    int n = 0, rc = 1;
    int lrc = eng_model_load(model ? model : cfg.engine_model, &eo, &m, err, sizeof err);
    if (lrc) {
        if (pr.shown)
            fputc('\n', stderr);
        fprintf(stderr, "cachegate generate: %s\n", err);
        goto out;
    }
    if (gw_device_kv_dtype((int)cfg.engine_kv_cache_dtype, eng_model_kv_on_device(m),
                           eng_model_device(m), &gp.kv_dtype, err, sizeof err)) {
        fprintf(stderr, "cachegate generate: %s\n", err);
        goto out;
    }
    if (tok_create(eng_model_gguf(m), &v, err, sizeof err)) {
        fprintf(stderr, "cachegate generate: tokenizer: %s\n", err);
        goto out;
    }
    if (chat) {
        struct gguf_str t = {0};
        enum eng_chat_format fmt;
        int have_tmpl = gguf_get_str(eng_model_gguf(m), "tokenizer.chat_template", &t) == 0;
        if (cfg.engine_chat_format) {
            fmt = (enum eng_chat_format)(cfg.engine_chat_format - 1); /* named in the config */
        } else if (!have_tmpl || eng_chat_detect(t.p, t.len, &fmt)) {
            fprintf(stderr, "cachegate generate: the model's chat template is %s; name the "
                            "format with engine.chat_format (chatml, llama3, llama2)\n",
                    have_tmpl ? "of an unknown format" : "missing");
            goto out;
        }
        char *def = have_tmpl ? eng_chat_default_system(t.p, t.len) : NULL;
        struct eng_chat_msg msgs[2];
        int nm = 0;
        if (system)
            msgs[nm++] = (struct eng_chat_msg){"system", system, strlen(system)};
        msgs[nm++] = (struct eng_chat_msg){"user", prompt, strlen(prompt)};
        struct eng_chat_prompt cp;
        int crc = eng_chat_render(fmt, msgs, nm, 1, def, &cp);
        free(def);
        if (crc || eng_chat_tokenize(v, &cp, &ids, &n)) {
            eng_chat_prompt_deinit(&cp);
            fprintf(stderr, "cachegate generate: cannot build the chat prompt\n");
            goto out;
        }
        eng_chat_prompt_deinit(&cp);
    } else {
        struct eng_chat_prompt raw = {.text = (char *)prompt, .len = strlen(prompt)};
        struct eng_chat_segment seg = {0, raw.len, 0};
        raw.seg = &seg;
        raw.nseg = 1;
        if (eng_chat_tokenize(v, &raw, &ids, &n)) {
            fprintf(stderr, "cachegate generate: cannot tokenize the prompt\n");
            goto out;
        }
        if (tok_add_bos(v) && tok_bos(v) >= 0) {
            int32_t *b = realloc(ids, sizeof *b * (size_t)(n + 1));
            if (!b)
                goto out;
            ids = b;
            memmove(ids + 1, ids, sizeof *ids * (size_t)n);
            ids[0] = tok_bos(v);
            n++;
        }
    }
    if (n == 0) {
        fprintf(stderr, "cachegate generate: the prompt has no text the model's vocabulary "
                        "can encode\n");
        goto out;
    }
    /* the model's context, or engine.max_model_len when the configuration sets less */
    int ctx = eng_model_hparams(m)->n_ctx_train, capped = 0;
    if (cfg.engine_max_model_len > 0 && cfg.engine_max_model_len < ctx) {
        ctx = (int)cfg.engine_max_model_len;
        capped = 1;
    }
    if (n > ctx) {
        fprintf(stderr, "cachegate generate: the prompt takes %d tokens; %s is %d\n", n,
                capped ? "engine.max_model_len" : "the model's context", ctx);
        goto out;
    }
    if (gp.max_tokens > ctx - n)
        gp.max_tokens = ctx - n; /* then it ends with length */
    struct eng_gen_stats st;
    int werr = 0;
    int grc = eng_generate(m, v, ids, n, &gp, write_stdout, &werr, &st);
    if (werr) {
        rc = stdout_done("generate", werr);
        goto out;
    }
    if (grc) {
        fprintf(stderr, "\ncachegate generate: %s\n", eng_strerror(grc));
        goto out;
    }
    printf("\n");
    if (stdout_done("generate", 0))
        goto out;
    fprintf(stderr, "prompt: %d tokens, %.1f tokens/s; generated: %d tokens, %.1f tokens/s; "
                    "finish_reason: %s\n",
            st.prompt_tokens, st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0.0,
            st.completion_tokens, st.decode_s > 0 ? st.completion_tokens / st.decode_s : 0.0,
            eng_finish_name(st.finish));
    rc = 0;
out:
    free(ids);
    tok_destroy(v);
    eng_model_destroy(m);
    gw_config_deinit(&cfg);
    return rc;
bad:
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == ch) /* the option, and what it takes */
            fprintf(stderr, "cachegate generate: --%s takes %s (got '%s')\n", o->name,
                    ch == 'n'   ? "a whole number from 0 to 1048576"
                    : ch == 'S' ? "a whole number from 0 to 18446744073709551615"
                                : "a number",
                    optarg);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    /* "cachegate tenant list --help": the command's help, whatever else is there (options
     * end at "--", and a value such as --prompt's is not an option) */
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout, cmd);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] == '-' && !strchr(argv[i], '=') &&
            strcmp(argv[i], "--chat") && strcmp(argv[i], "--json"))
            i++; /* its value (--chat and --json take none) */
    }
    /* getopt names argv[0] in its messages: "cachegate serve: unrecognized option" */
    static char prog[64];
    snprintf(prog, sizeof prog, "cachegate %.40s", cmd);
    argv[1] = prog;
    if (!strcmp(cmd, "version") && argc > 2) {
        fprintf(stderr, "cachegate: version takes no arguments\n");
        return 2;
    }
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "device"))
        return cmd_device(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed"))
        return cmd_embed(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate"))
        return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "cache")) {
        int rc = gw_cli_cache(argc - 1, argv + 1);
        return rc ? rc : stdout_done("cache", 0);
    }
    /* (what they print is the operator's record: lost, it is an error) */
    if (!strcmp(cmd, "tenant")) {
        int rc = gw_cli_tenant(argc - 1, argv + 1);
        return rc ? rc : stdout_done("tenant", 0);
    }
    if (!strcmp(cmd, "key")) {
        int rc = gw_cli_key(argc - 1, argv + 1);
        return rc ? rc : stdout_done("key", 0);
    }
    if (!strcmp(cmd, "usage")) {
        int rc = gw_cli_usage(argc - 1, argv + 1);
        return rc ? rc : stdout_done("usage", 0);
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("cachegate %s\n", GW_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 3 || (argc == 3 && !help_known(argv[2]))) {
            fprintf(stderr, "cachegate help: no command '%s'\n", argv[argc - 1]);
            usage(stderr);
            return 2;
        }
        help(stdout, argc == 3 ? argv[2] : "");
        return 0;
    }
    fprintf(stderr, "cachegate: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
