/*
 * config — cachegate.conf, parsed once into an immutable struct.
 *
 * The file is INI (parsed by inih). Every key the program knows is a row of one table:
 * {section, key, type, offset into struct gw_config, default, bounds}. Defaults are
 * applied from the same table by the same code path as file values, so a default can
 * never be an invalid value. An unknown section or key, or a value that does not parse
 * or is out of range, fails the load with "FILE:LINE: message".
 *
 * Owned by the main thread while loading; read-only (and shared by every thread)
 * once gw_config_load() returns.
 */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum gw_device_want { GW_DEVICE_AUTO = 0, GW_DEVICE_CPU, GW_DEVICE_CUDA };
/* engine.kv_cache_dtype: auto is f16 */
enum gw_kv_dtype_want { GW_KV_AUTO = 0, GW_KV_F32, GW_KV_F16, GW_KV_BF16, GW_KV_Q8_0 };
/* engine.cpu_matmul: the CPU's matrix products in F32, or with activations rounded to 8 bits */
enum gw_cpu_matmul { GW_MATMUL_F32 = 0, GW_MATMUL_INT8 };

struct gw_config {
    /* [server] */
    char *listen;            /* "HOST:PORT"; IPv6 as "[::1]:8443" */
    char *data_dir;          /* created on start when missing */
    int device;              /* enum gw_device_want */
    int64_t max_body_bytes;  /* larger request bodies get 413 */
    int64_t max_header_bytes;/* larger request heads get 431 */
    int64_t header_timeout_ms;
    int64_t body_timeout_ms;
    int64_t idle_timeout_ms;
    int64_t max_connections;
    int64_t shutdown_grace_ms;
    char *cors_origins; /* browser origins allowed (comma-separated, or *); empty: none */
    int64_t responses_ttl_s; /* stored responses and chat completions expire; 0: never */
    int64_t responses_max_bytes; /* per tenant, the oldest go past it; 0: no limit */
    /* [tls] */
    char *cert_file; /* empty: a self-signed certificate is generated in data_dir */
    char *key_file;
    /* [log] */
    int log_level; /* enum gw_log_level */
    /* [engine] */
    char *engine_model;      /* GGUF file */
    char *engine_model_name; /* the "model" clients ask for */
    int engine_chat_format;  /* 0 auto (from the model's template), 1 chatml, 2 llama3, 3 llama2 */
    int engine_kv_cache_dtype;   /* enum gw_kv_dtype_want (f32, bf16, q8_0: the CPU only) */
    int engine_cpu_matmul;       /* enum gw_cpu_matmul */
    int64_t engine_threads;  /* 0: one per core */
    int64_t engine_block_size, engine_max_num_seqs, engine_max_num_batched_tokens;
    int64_t engine_max_model_len;       /* 0: the model's training context */
    int64_t engine_num_blocks_override; /* 0: from the memory budget */
    int64_t engine_cpu_kv_cache_bytes;  /* the KV pool's budget on the CPU */
    double engine_gpu_memory_utilization; /* on a GPU: share of its free memory after the
                                             weights that the KV pool takes */
    int64_t engine_max_waiting;         /* queued requests beyond which new ones get 429 */
    int64_t engine_max_tokens_default;  /* max_tokens when a request gives none */
    int engine_prefix_caching;          /* enable_prefix_caching */
    int64_t engine_request_timeout_ms;  /* a generation running longer is stopped */
    /* [embedder] */
    char *embedder_model;      /* safetensors directory */
    char *embedder_model_name;
    char *embedder_openai_tokenizer; /* tiktoken file for token-id inputs; empty: none */
    int64_t embedder_max_batch;   /* texts per forward pass */
    int64_t embedder_max_wait_us; /* how long a pass waits for more texts */
    int64_t embedder_threads;     /* 0: one per core */
    int embedder_truncate;        /* /v1/embeddings: a text past the model's limit is cut */
    /* [cache] */
    int cache_enabled;
    double cache_threshold;         /* cosine a semantic hit needs */
    int cache_guard;                /* reject semantic candidates that contradict the query */
    char *cache_guard_words;        /* a word list: what the guard may read as a misspelling */
    double cache_guard_strict_below; /* a candidate less similar is a close call, checked more */
    double cache_same_words_floor;   /* under the threshold, down to this: the same words hit */
    double cache_judge_threshold;    /* the judge's probability a candidate needs; 0: no judge */
    int64_t cache_judge_bytes;       /* stored questions' tokens it keeps for their next hits */
    int cache_miss_reasons;         /* a semantic miss says why (X-Cache-Miss-Reason) */
    int64_t cache_candidates;       /* nearest entries examined per semantic lookup */
    int64_t cache_hot_entries;      /* exact entries kept in memory on the event loop; 0: none */
    int64_t cache_hot_bytes;        /* their answers' and strings' bytes, at most */
    int64_t cache_ttl_s;            /* entries expire after this; 0: never */
    int64_t cache_max_entries;      /* per tenant; 0: no limit */
    int64_t cache_max_bytes;        /* per tenant; 0: no limit */
    int64_t cache_hnsw_min_entries; /* a tenant's index becomes HNSW32 at this size; 0: never */
    /* [tenants] */
    char *admin_key; /* bearer key of the /admin/ routes; empty: they are disabled */
    int tenants_auth;                /* API keys required (else: the default tenant) */
    int64_t tenants_rpm, tenants_tpm; /* per tenant, unless its policy says; 0: no limit */
    int64_t tenants_concurrency, tenants_monthly_tokens;
    int tenants_share_prefix;    /* tenants share the global prefix-cache namespace */
    int64_t tenants_metrics_max; /* tenants with their own metric labels; the rest: other */
    int metrics_auth;            /* /metrics asks for the admin key */
};

/* Fills cfg with every default. Never fails for the built-in table. */
void gw_config_defaults(struct gw_config *cfg);

/*
 * Loads path over the defaults. Returns 0, or -1 with a message naming the file and
 * the line in err. cfg must have been filled by gw_config_defaults().
 */
int gw_config_load(struct gw_config *cfg, const char *path, char *err, size_t errlen);

/*
 * Sets one key as if it came from the file (command-line overrides). where names
 * the origin in error messages, e.g. "--listen".
 */
int gw_config_set(struct gw_config *cfg, const char *section, const char *key,
                  const char *value, const char *where, char *err, size_t errlen);

/*
 * The rules across keys that serving needs, checked once the command line has overridden
 * the file: tls.cert_file and tls.key_file set together, and tenants.auth = off only on
 * a loopback listener (server.listen resolved). Returns 0, or -1 with a message.
 */
int gw_config_check_serve(const struct gw_config *cfg, char *err, size_t errlen);

/* The same rule for one address about to be bound (resolving may answer otherwise the
 * second time): 0 when auth is on or the address is loopback, else -1 with a message. */
struct sockaddr;
int gw_config_check_address(const struct gw_config *cfg, const struct sockaddr *sa, char *err,
                            size_t errlen);

/* Frees the strings; cfg itself is the caller's storage. */
void gw_config_deinit(struct gw_config *cfg);

/*
 * Splits "HOST:PORT" / "[V6]:PORT". host gets the address without brackets.
 * Returns 0, or -1 when the form or the port (0..65535) is wrong.
 */
int gw_config_split_listen(const char *listen, char *host, size_t hostlen, int *port /* out */);

const char *gw_device_name(int device);
/* engine.kv_cache_dtype's spelling of want (enum gw_kv_dtype_want) */
const char *gw_kv_dtype_name(int want);

#endif
