/*
 * POST /v1/embeddings in the OpenAI schema:
 *   {"model": NAME, "input": STRING | [STRING, ...], "encoding_format": "float"|"base64",
 *    "dimensions": INT, "user": STRING}
 * -> {"object":"list","data":[{"object":"embedding","index":i,"embedding":...}],
 *     "model":NAME,"usage":{"prompt_tokens":N,"total_tokens":N}}
 * base64 is the little-endian float32 vector, as the official SDKs decode it.
 * Token counts include [CLS] and [SEP]; a text longer than the model's limit is a 400
 * context_length_exceeded, or truncated (as sentence-transformers does) where
 * embedder.truncate says so.
 */
#include "http_impl.h"

#include "oai.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 2048

struct embed_req {
    struct gw_embed_job job;
    struct gw_req *req;
    json_t *body; /* owns the input strings */
    struct gw_tenant *tn;
    gw_tenants *tenants;
    int base64;
    const char **texts;
    size_t *lens;
    float *out;
    int *ntokens;
    unsigned char *cut; /* [n], from the worker; NULL where embedder.truncate allows it */
    int one;            /* input was one string, not an array */
    int64_t reserved[2]; /* tokens reserved at admission: a minute's, the month's */
};

/* An input of token ids (one array of them, or an array of such arrays, as OpenAI takes)
 * replaced in body by the texts they decode to, with OpenAI's tokenizer; *input
 * follows. -1 with msg (empty: out of memory) when an id is not one of its tokens. Without
 * a tokenizer nothing changes (the strings' check refuses the arrays). */
static int decode_token_ids(gw_server *srv, json_t *body, json_t **input, char *msg,
                            size_t len)
{
    const gw_otok *t = gw_server_openai_tokenizer(srv);
    json_t *in = *input;
    msg[0] = 0;
    if (!t || !json_array_size(in))
        return 0;
    int flat = json_is_integer(json_array_get(in, 0)); /* one text as ids */
    for (size_t i = 0; i < (flat ? 1 : json_array_size(in)); i++) {
        json_t *ids = flat ? in : json_array_get(in, i);
        if (!json_is_array(ids) || !json_array_size(ids))
            continue; /* a string, or refused by the strings' check */
        char *text;
        size_t tl, bad;
        int rc = gw_otok_decode(t, ids, &text, &tl, &bad);
        if (rc == -1) {
            char where[48];
            if (flat)
                snprintf(where, sizeof where, "input[%zu]", bad);
            else
                snprintf(where, sizeof where, "input[%zu][%zu]", i, bad);
            snprintf(msg, len, "%s is not a token id of OpenAI's cl100k_base (0 to %d).", where,
                     gw_otok_size(t) - 1);
            return -1;
        }
        json_t *s = rc ? NULL : json_stringn(text, tl);
        free(text);
        if (!s)
            return -1;
        if (flat) {
            json_object_set_new(body, "input", s);
            *input = json_object_get(body, "input");
            return 0;
        }
        json_array_set_new(in, i, s);
    }
    return 0;
}

/* failed: the tenant's outcome is "error" */
static void embed_req_free(struct embed_req *e, long tokens, int failed)
{
    if (e->tn) {
        struct gw_usage_one u = {.prompt = (int)tokens, .failed = failed,
                                 .reserved = e->reserved[0],
                                 .reserved_month = e->reserved[1]};
        gw_tenants_done(e->tenants, e->tn, &u);
    }
    json_decref(e->body);
    free(e->texts);
    free(e->lens);
    free(e->out);
    free(e->ntokens);
    free(e->cut);
    free(e);
}

static json_t *vector_json(const float *v, int dim, int base64)
{
    if (base64) {
        /* the SDKs decode numpy.frombuffer(..., dtype="float32"): little-endian */
        unsigned char *raw = malloc((size_t)dim * 4);
        char *b64 = malloc(((size_t)dim * 4 + 2) / 3 * 4 + 1);
        json_t *s = NULL;
        if (raw && b64) {
            for (int j = 0; j < dim; j++) {
                uint32_t u;
                memcpy(&u, &v[j], 4);
                for (int k = 0; k < 4; k++)
                    raw[4 * j + k] = (unsigned char)(u >> (8 * k));
            }
            EVP_EncodeBlock((unsigned char *)b64, raw, dim * 4);
            s = json_string(b64);
        }
        free(raw);
        free(b64);
        return s;
    }
    json_t *a = json_array();
    for (int j = 0; j < dim; j++)
        json_array_append_new(a, json_real(v[j]));
    return a;
}

/* The inputs' own tokens, as OpenAI counts them: not the [CLS] and [SEP] the model adds
 * to each. */
static long input_tokens(const struct embed_req *e)
{
    long tokens = 0;
    for (int i = 0; !e->job.rc && i < e->job.n; i++)
        tokens += e->ntokens[i] > 2 ? e->ntokens[i] - 2 : 0;
    return tokens;
}

/* The 400 of text i (one: the input was one string), longer than the model reads */
static void too_long(struct gw_req *r, int one, int i)
{
    int max = emb_max_tokens(gw_server_embedder(gw_req_server(r)));
    char which[32] = "input", msg[256];
    if (!one)
        snprintf(which, sizeof which, "input[%d]", i);
    snprintf(msg, sizeof msg, "%s is longer than this model's maximum of %d tokens (%d, less "
             "its [CLS] and [SEP]): split it, or set embedder.truncate = true to embed its "
             "first %d.", which, max - 2, max, max - 2);
    gw_reply_error(r, 400, msg, "input", "context_length_exceeded");
}

static void on_embedded(struct gw_cq_item *item)
{
    struct embed_req *e = gw_cq_container(item, struct embed_req, job.item);
    if (gw_req_gone(e->req)) { /* the work done is charged all the same */
        embed_req_free(e, input_tokens(e), 0);
        return;
    }
    gw_server *srv = gw_req_server(e->req);
    if (e->job.rc) {
        gw_reply_error(e->req, 500, emb_strerror(e->job.rc), NULL, "embedding_failed");
        embed_req_free(e, 0, 1);
        return;
    }
    for (int i = 0; e->cut && i < e->job.n; i++) {
        if (!e->cut[i])
            continue;
        too_long(e->req, e->one, i);
        embed_req_free(e, 0, 1);
        return;
    }
    int dim = emb_dim(gw_server_embedder(srv));
    json_t *data = json_array();
    const long tokens = input_tokens(e);
    for (int i = 0; i < e->job.n; i++) {
        json_t *d = json_object();
        json_object_set_new(d, "object", json_string("embedding"));
        json_object_set_new(d, "index", json_integer(i));
        json_object_set_new(d, "embedding", vector_json(e->out + (size_t)i * dim, dim, e->base64));
        json_array_append_new(data, d);
    }
    json_t *usage = json_object();
    json_object_set_new(usage, "prompt_tokens", json_integer(tokens));
    json_object_set_new(usage, "total_tokens", json_integer(tokens));
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    json_object_set_new(o, "model", json_string(gw_server_config(srv)->embedder_model_name));
    json_object_set_new(o, "usage", usage);
    /* 9 significant digits round-trip a float32 */
    gw_reply_json(e->req, 200, o, JSON_REAL_PRECISION(9));
    embed_req_free(e, tokens, 0);
}

void gw_handle_embeddings(struct gw_req *r)
{
    gw_server *srv = gw_req_server(r);
    const struct gw_config *cfg = gw_server_config(srv);
    struct gw_tenant *tn = gw_tenants_auth(gw_server_tenants(srv), r);
    if (!tn)
        return;
    json_t *body = gw_req_json_body(r);
    if (!body)
        return;
    char msg[512];
    const char *unknown = oai_unknown_param(body, OAI_EMBEDDINGS, NULL);
    if (unknown) {
        snprintf(msg, sizeof msg, "Unrecognized request argument supplied: %.200s", unknown);
        gw_reply_error(r, 400, msg, unknown, NULL);
        goto out;
    }
    json_t *model = json_object_get(body, "model");
    if (!json_is_string(model)) {
        gw_reply_error(r, 400, "You must provide a model parameter (a string).", "model", NULL);
        goto out;
    }
    if (strcmp(json_string_value(model), cfg->embedder_model_name) != 0) {
        if (tn->pol.nmodels) { /* a tenant kept to some models is not told of others */
            snprintf(msg, sizeof msg, "The model `%.200s` does not exist or you do not have "
                     "access to it.", json_string_value(model));
            gw_reply_error(r, 404, msg, "model", "model_not_found");
        } else if (!strcmp(json_string_value(model), cfg->engine_model_name)) {
            snprintf(msg, sizeof msg, "The model `%.200s` is a chat model and does not make "
                     "embeddings; this server embeds with `%s`.", json_string_value(model),
                     cfg->embedder_model_name);
            gw_reply_error(r, 400, msg, "model", "model_not_supported");
        } else {
            snprintf(msg, sizeof msg, "The model `%.200s` does not exist; this server embeds "
                     "with `%s`.", json_string_value(model), cfg->embedder_model_name);
            gw_reply_error(r, 404, msg, "model", "model_not_found");
        }
        goto out;
    }
    if (gw_tenants_model_ok(tn, r, json_string_value(model)))
        goto out;
    json_t *fmt = json_object_get(body, "encoding_format");
    int base64 = 0;
    if (fmt && !json_is_null(fmt)) {
        const char *f = json_string_value(fmt);
        if (f && !strcmp(f, "base64"))
            base64 = 1;
        else if (!f || strcmp(f, "float") != 0) {
            gw_reply_error(r, 400, "encoding_format must be 'float' or 'base64'.",
                           "encoding_format", NULL);
            goto out;
        }
    }
    json_t *dims = json_object_get(body, "dimensions");
    int dim = emb_dim(gw_server_embedder(srv));
    if (dims && !json_is_null(dims) &&
        (!json_is_integer(dims) || json_integer_value(dims) != dim)) {
        snprintf(msg, sizeof msg, "This model produces %d dimensions; dimensions must be %d or absent.",
                 dim, dim);
        gw_reply_error(r, 400, msg, "dimensions", NULL);
        goto out;
    }
    json_t *user = json_object_get(body, "user");
    if (user && !json_is_null(user) && !json_is_string(user)) {
        gw_reply_error(r, 400, "user must be a string.", "user", NULL);
        goto out;
    }

    json_t *input = json_object_get(body, "input");
    /* token ids (of OpenAI's cl100k_base): decoded to the text they stand for */
    if (decode_token_ids(srv, body, &input, msg, sizeof msg)) {
        gw_reply_error(r, msg[0] ? 400 : 503, msg[0] ? msg : "Out of memory; try again.",
                       msg[0] ? "input" : NULL, NULL);
        goto out;
    }
    int n;
    if (json_is_string(input))
        n = 1;
    else if (json_is_array(input))
        n = (int)json_array_size(input);
    else {
        gw_reply_error(r, 400, "input must be a string or an array of strings.", "input", NULL);
        goto out;
    }
    if (n == 0 || n > MAX_INPUTS) {
        snprintf(msg, sizeof msg, "input must hold 1 to %d strings; it holds %d.", MAX_INPUTS, n);
        gw_reply_error(r, 400, msg, "input", NULL);
        goto out;
    }
    struct embed_req *e = calloc(1, sizeof *e);
    if (!e)
        goto oom;
    e->texts = malloc(sizeof *e->texts * (size_t)n);
    e->lens = malloc(sizeof *e->lens * (size_t)n);
    e->out = malloc(sizeof *e->out * (size_t)n * (size_t)dim);
    e->ntokens = malloc(sizeof *e->ntokens * (size_t)n);
    /* longer than the model reads: an error, as OpenAI's past its context, not an
     * embedding of the text's beginning that says nothing of the rest */
    e->cut = cfg->embedder_truncate ? NULL : malloc((size_t)n);
    e->one = json_is_string(input);
    if (!e->texts || !e->lens || !e->out || !e->ntokens || (!cfg->embedder_truncate && !e->cut)) {
        embed_req_free(e, 0, 0);
        goto oom;
    }
    for (int i = 0; i < n; i++) {
        json_t *s = json_is_string(input) ? input : json_array_get(input, (size_t)i);
        if (!json_is_string(s) || json_string_length(s) == 0) {
            if (s == input)
                snprintf(msg, sizeof msg, "input is an empty string.");
            else
                snprintf(msg, sizeof msg,
                         json_is_string(s) ? "input[%d] is an empty string."
                                           : json_is_array(s) && !json_array_size(s)
                                             ? "input[%d] is an empty array."
                                           : json_is_array(s) ? "input[%d]: token ids are not "
                                             "accepted (embedder.openai_tokenizer is not "
                                             "loaded): send text (LangChain: "
                                             "OpenAIEmbeddings(check_embedding_ctx_length="
                                             "False))."
                                           : "input[%d] is not a string.",
                         i);
            gw_reply_error(r, 400, msg, "input", NULL);
            embed_req_free(e, 0, 0);
            goto out;
        }
        e->texts[i] = json_string_value(s);
        e->lens[i] = json_string_length(s);
    }
    /* what it may use, counted where the tenant's token limits ask for it (so that a
     * burst cannot overrun them): each text's tokens, at most the model's limit, less its
     * [CLS] and [SEP] (as usage counts them, input_tokens()); a text too long for the
     * model is then refused at once, not after the worker has embedded the others */
    int64_t tokens = 0;
    if (gw_tenants_counts_tokens(gw_server_tenants(srv), tn)) {
        emb_model *m = gw_server_embedder(srv);
        const int max = emb_max_tokens(m);
        int32_t *ids = malloc(sizeof *ids * (size_t)(max + 1));
        int too = -1;
        for (int i = 0, k, cut; ids && i < n && too < 0; i++) {
            if (emb_tokenize_whole(m, e->texts[i], e->lens[i], ids, &k, &cut))
                continue;
            if (cut && !cfg->embedder_truncate)
                too = i;
            tokens += (k > max ? max : k) - 2;
        }
        free(ids);
        if (!ids) {
            embed_req_free(e, 0, 0);
            goto oom;
        }
        if (too >= 0) {
            too_long(r, e->one, too);
            embed_req_free(e, 0, 0);
            goto out;
        }
        if (tokens < 1) /* (white space alone: still a request a spent month refuses) */
            tokens = 1;
    }
    if (gw_tenants_admit(gw_server_tenants(srv), tn, r, tokens, e->reserved)) {
        embed_req_free(e, 0, 0);
        goto out;
    }
    e->tn = tn;
    e->tenants = gw_server_tenants(srv);
    e->req = r;
    e->body = body;
    e->base64 = base64;
    e->job.item.fn = on_embedded;
    e->job.n = n;
    e->job.texts = e->texts;
    e->job.lens = e->lens;
    e->job.out = e->out;
    e->job.ntokens = e->ntokens;
    e->job.cut = e->cut;
    gw_req_defer(r);
    gw_embedw_submit(gw_server_embed_worker(srv), &e->job);
    return;
oom:
    gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
out:
    json_decref(body);
}
