/*
 * POST /v1/chat/completions and POST /v1/completions, served by the engine, in the
 * OpenAI schema: JSON, or Server-Sent Events whose chunks have the shape the official
 * SDKs parse (role in the first delta, finish_reason in the last, an optional usage
 * chunk, then "data: [DONE]"). POST /v1/responses too: responses.c reads it as the chat
 * request that asks the same and writes its response objects and events. A chat request
 * with "store": true leaves its reply to stored_chat.c.
 */
#include "http_impl.h"

#include "chat.h"
#include "engine.h"
#include "entry_id.h"
#include "log.h"
#include "oai.h"
#include "responses.h"
#include "stored_chat.h"
#include "tools.h"

#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STOP 4

struct usage {
    int prompt, completion, cached;
};

struct chat_req {
    struct gw_gen_job job;
    int64_t reserved[2]; /* tokens reserved at admission: a minute's, the month's */
    struct gw_req *req;
    int chat;   /* chat.completion (also for a response) or text_completion */
    int resp;   /* the Responses API's request (chat too) */
    char msg_id[48];
    json_t *echo;         /* the settings a response repeats */
    json_t *convo;        /* the messages to store with its answer; NULL: not stored */
    struct gw_response rs; /* its ids and stream state */
    int stream, include_usage, started;
    const char *max_tokens_key; /* the parameter that set max_tokens, or NULL: the default */
    char id[48];
    long created;
    char *text; /* the answer so far, when not streaming */
    size_t len, cap;
    char *stops[MAX_STOP];
    struct eng_logit_bias *bias; /* job.params.sampling.logit_bias */
    eng_grammar *grammar;        /* job.params.grammar: response_format's or the call's */
    struct gw_tools tools;       /* a call asked for (tools.h) */
    struct gw_call_reader call;  /* ... read out of the answer */
    char call_id[GW_TOOLS_MAX_CALLS][48]; /* each call's id, made as it begins */
    char item_id[GW_TOOLS_MAX_CALLS][48]; /* a response's: each call's item id */
    int calls_out;               /* calls whose first delta (or item) is out */
    json_t *items;               /* a streamed response's function_call items done */
    int opened;                  /* a response stream's created and in_progress are out */
    double t0, t_first; /* monotonic seconds: submitted, first text */
    struct event *timeout;
    int timed_out;
    int cut; /* cut short by the server's shutdown (timed_out too) */
    /* cache */
    int64_t tenant;
    int cacheable, store;      /* keyed; the answer is to be stored when it ends with stop */
    int engine;                /* submitted to the engine */
    struct gw_cache_key key;
    struct gw_cache_ctl ctl;
    struct gw_cache_sem sem;
    /* the same request in flight (coalescing): a leader's answer serves its followers */
    struct chat_req *lnext, *lprev; /* the leaders' list, while it leads */
    int leading;
    int served; /* its answer is its followers': 1 it ended with stop, 2 with length */
    struct chat_req *followers;     /* a leader's, each linked by fnext */
    struct chat_req *fnext;
    /* tenant: limits were admitted, usage is reported when the request ends */
    gw_tenants *tenants;
    struct gw_tenant *tn;
    struct gw_usage_one use;
    /* a completion of several prompts (batch_run()): the request's own chat_req runs one
     * kid a prompt, each answered as the choice of its index, and replies when all are (its
     * req is NULL once the reply is out before that, or its client gone) */
    int n;                   /* answers a prompt (the request's n) */
    struct chat_req *parent; /* a kid's */
    int index;               /* a kid's choice */
    struct chat_req **kids;  /* the parent's */
    int nkids, left;         /* kids, and those not answered yet */
    const struct gw_llm *llm;
    int err_status;         /* the parent's first error, replied when the kids are done */
    const char *err_code;
    char err_msg[320];
    int refused;            /* the parent's engine jobs were refused (nothing charged) */
    int window, running;    /* the parent runs at most window kids at once */
    int next;               /* the next kid to submit */
    int held;               /* tenant places held beyond its own (gw_tenants_hold()) */
    int done;               /* a kid answered: finish, got */
    const char *finish;
    struct usage got; /* as the reply reports it */
    int64_t hit_id;   /* a kid answered from the cache: the entry, counted once served */
    /* logprobs (job.params.logprobs): the records received and not yet sent, in the reply's
     * form (lp_json()); the characters of text they cover (a completion's text_offset) */
    json_t *lp;
    long lp_chars;
    /* "store": true (a chat request's): its reply is kept for the stored completions'
     * routes (stored_chat.h), with what it repeats of the request (gw_stored_request())
     * and its messages; rec: a stream's chunks put together so far */
    int keep;
    json_t *kept_req, *kept_msgs, *rec;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void release_followers(struct chat_req *c);

static void chat_req_free(struct chat_req *c)
{
    if (c->leading || c->followers)
        release_followers(c);
    if (c->tn) {
        c->use.reserved = c->reserved[0];
        c->use.reserved_month = c->reserved[1];
        c->use.held = c->held;
        gw_tenants_done(c->tenants, c->tn, &c->use);
    }
    if (c->timeout)
        event_free(c->timeout);
    free(c->job.prompt);
    for (int i = 0; i < MAX_STOP; i++)
        free(c->stops[i]);
    free(c->bias);
    eng_grammar_destroy(c->grammar);
    gw_tools_deinit(&c->tools);
    free(c->text);
    for (int i = 0; i < c->nkids; i++)
        chat_req_free(c->kids[i]);
    free(c->kids);
    gw_cache_key_deinit(&c->key);
    gw_cache_sem_deinit(&c->sem);
    json_decref(c->echo);
    json_decref(c->convo);
    json_decref(c->items);
    json_decref(c->lp);
    json_decref(c->kept_req);
    json_decref(c->kept_msgs);
    json_decref(c->rec);
    free(c);
}

/* An error reply to an admitted request: its tenant's outcome is "error", not "ok". */
static void chat_error(struct chat_req *c, int status, const char *msg, const char *param,
                       const char *code)
{
    c->use.failed = 1;
    gw_reply_error(c->req, status, msg, param, code);
}

/* ------------------------------------------------------------------ validation */

struct parsed {
    const char *param; /* on error */
    const char *code;  /* on error, when it has one */
    char msg[256];
};

#define GW_MAX_N 16 /* answers a prompt */

static int bad(struct parsed *p, const char *param, const char *msg)
{
    p->param = param;
    snprintf(p->msg, sizeof p->msg, "%s", msg);
    return -1;
}

/* A number parameter already checked (oai_params_check()), or def when absent. */
static double number_or(json_t *o, const char *key, double def)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

/* logit_bias: {"token id": bias, ...}, the ids in the model's vocabulary (n_vocab), each
 * bias in [-100, 100], as OpenAI's; null or {} is none. */
static int parse_logit_bias(json_t *b, int n_vocab, struct chat_req *c, struct parsed *p)
{
    json_t *lb = json_object_get(b, "logit_bias");
    if (!lb || json_is_null(lb))
        return 0;
    if (!json_is_object(lb))
        return bad(p, "logit_bias", "logit_bias must be an object mapping token ids to biases.");
    size_t n = json_object_size(lb);
    if (n > ENG_MAX_LOGIT_BIAS) {
        snprintf(p->msg, sizeof p->msg, "logit_bias may list at most %d tokens.",
                 ENG_MAX_LOGIT_BIAS);
        p->param = "logit_bias";
        return -1;
    }
    if (n == 0)
        return 0;
    if (!(c->bias = calloc(n, sizeof *c->bias)))
        return bad(p, NULL, "out of memory");
    const char *key;
    json_t *v;
    int i = 0;
    json_object_foreach(lb, key, v)
    {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!isdigit((unsigned char)key[0]) || *end || errno || id >= n_vocab) {
            snprintf(p->msg, sizeof p->msg, "logit_bias: `%.40s` is not a token id of this "
                     "model (0 to %d).", key, n_vocab - 1);
            p->param = "logit_bias";
            return -1;
        }
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return bad(p, "logit_bias", "logit_bias values must be numbers between -100 and 100.");
        c->bias[i++] = (struct eng_logit_bias){(int32_t)id, (float)json_number_value(v)};
    }
    c->job.params.sampling.logit_bias = c->bias;
    c->job.params.sampling.n_logit_bias = i;
    return 0;
}

/* response_format: json_object, any JSON object, or json_schema ({"type":
 * "json_schema", "json_schema": {"name", "schema", "strict", "description"}}), JSON that
 * the schema accepts (engine/grammar.h says what is read of it); the output is held to it
 * token by token. text, or none: free text. */
static int parse_response_format(json_t *b, struct chat_req *c, struct parsed *p)
{
    int rc = oai_response_format(json_object_get(b, "response_format"), &c->grammar, p->msg,
                                 sizeof p->msg);
    if (rc == -2)
        return bad(p, NULL, "out of memory");
    if (rc) {
        p->param = "response_format";
        return -1;
    }
    c->job.params.grammar = c->grammar;
    return 0;
}

#define COMPLETION_MAX_TOKENS_DEFAULT 16

/* a reply still running when the server's shutdown grace ran out (on_cut()) */
#define SHUTDOWN_MSG                                                                           \
    "The server is shutting down and its grace period ran out before this answer was "      \
    "complete; send the request again."

/* Sampling parameters, max_tokens, stop, n, stream; shared by both routes. */
static int parse_common(json_t *b, const struct gw_config *cfg, struct chat_req *c,
                        struct parsed *p)
{
    struct eng_gen_params *gp = &c->job.params;
    eng_sampling_default(&gp->sampling);
    if (oai_params_check(b, c->chat, &p->param, p->msg, sizeof p->msg))
        return -1;
    gp->sampling.temperature = (float)number_or(b, "temperature", 1);
    gp->sampling.top_p = (float)number_or(b, "top_p", 1);
    gp->sampling.presence_penalty = (float)number_or(b, "presence_penalty", 0);
    gp->sampling.frequency_penalty = (float)number_or(b, "frequency_penalty", 0);
    gp->sampling.top_k = (int)number_or(b, "top_k", 0);
    gp->sampling.min_p = (float)number_or(b, "min_p", 0);
    if (parse_logit_bias(b, tok_n_vocab(gw_server_llm(gw_req_server(c->req))->v), c, p))
        return -1;
    eng_sampling_top_p_zero(&gp->sampling);
    json_t *seed = json_object_get(b, "seed");
    if (json_is_integer(seed) || json_is_real(seed)) { /* a real one is integral (checked) */
        gp->sampling.seed = json_is_integer(seed) ? (uint64_t)json_integer_value(seed)
                                                  : (uint64_t)(int64_t)json_real_value(seed);
        gp->sampling.has_seed = 1;
    }
    /* a completion without max_tokens gets 16, as OpenAI's and vLLM's do */
    gp->max_tokens = (int)cfg->engine_max_tokens_default;
    if (!c->chat && gp->max_tokens > COMPLETION_MAX_TOKENS_DEFAULT)
        gp->max_tokens = COMPLETION_MAX_TOKENS_DEFAULT;
    const char *mk[] = {"max_completion_tokens", "max_tokens"};
    for (int i = 0; i < 2; i++) { /* (their range checked by oai_params_check()) */
        json_t *v = json_object_get(b, mk[i]);
        if (!v || json_is_null(v))
            continue;
        gp->max_tokens = (int)json_integer_value(v);
        c->max_tokens_key = mk[i];
        break;
    }
    json_t *n = json_object_get(b, "n");
    if (n && !json_is_null(n) &&
        (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > GW_MAX_N))
        return bad(p, "n", "n must be an integer from 1 to 16.");
    c->n = json_is_integer(n) ? (int)json_integer_value(n) : 1;
    json_t *stop = json_object_get(b, "stop");
    if (json_is_string(stop)) {
        if (json_string_length(stop) == 0)
            return bad(p, "stop", "stop strings must not be empty.");
        c->stops[gp->n_stop++] = strdup(json_string_value(stop));
    } else if (json_is_array(stop)) {
        if (json_array_size(stop) > MAX_STOP)
            return bad(p, "stop", "At most 4 stop sequences are allowed.");
        size_t i;
        json_t *s;
        json_array_foreach(stop, i, s)
        {
            if (!json_is_string(s) || json_string_length(s) == 0)
                return bad(p, "stop", "stop must be a string or an array of non-empty strings.");
            c->stops[gp->n_stop++] = strdup(json_string_value(s));
        }
    } else if (stop && !json_is_null(stop)) {
        return bad(p, "stop", "stop must be a string or an array of strings.");
    }
    gp->stop = (const char *const *)c->stops;
    json_t *st = json_object_get(b, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st))
        return bad(p, "stream", "stream must be a boolean.");
    c->stream = json_is_true(st);
    json_t *so = json_object_get(b, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return bad(p, "stream_options", "stream_options must be an object.");
        if (!c->stream)
            return bad(p, "stream_options",
                       "stream_options is only allowed when stream is true.");
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            return bad(p, "stream_options",
                       "stream_options.include_usage must be a boolean.");
        c->include_usage = json_is_true(iu);
    }
    json_t *user = json_object_get(b, "user");
    if (user && !json_is_null(user) && !json_is_string(user))
        return bad(p, "user", "user must be a string.");
    if (parse_response_format(b, c, p))
        return -1;
    if (gw_wants_logprobs(b, c->chat)) { /* checked: chat's top_logprobs, a completion's logprobs */
        json_t *top = json_object_get(b, c->chat ? "top_logprobs" : "logprobs");
        gp->logprobs = 1;
        gp->top_logprobs = json_is_integer(top) ? (int)json_integer_value(top) : 0;
    }
    return 0;
}

/* The prompt's token ids for a chat request whose messages gw_messages_check() took (in
 * handle(), before the caches). */
/* Whether text of `bytes` bytes takes more tokens than the model's context holds, known
 * without tokenizing it (no token stands for more than tok_decode_max() bytes): a prompt
 * of megabytes is refused at once rather than tokenized on the event loop, which held
 * every other client meanwhile. Then p says so (param what). */
static int surely_too_long(const struct gw_llm *llm, size_t bytes, struct parsed *p,
                           const char *what)
{
    const size_t per = tok_decode_max(llm->v), least = per ? bytes / per : 0;
    if (least < (size_t)llm->max_model_len)
        return 0;
    snprintf(p->msg, sizeof p->msg, "This model's maximum context length is %d tokens; the "
             "%s take at least %zu (%zu bytes). Shorten the %s.", llm->max_model_len, what,
             least, bytes, what);
    p->param = what;
    p->code = "context_length_exceeded";
    return 1;
}

static int chat_prompt(gw_server *srv, json_t *b, struct chat_req *c, struct parsed *p)
{
    json_t *msgs = json_object_get(b, "messages");
    size_t n = json_array_size(msgs), k = 0;
    /* one more: the system message that describes a call asked for */
    struct eng_chat_msg *m = calloc(n + 1, sizeof *m);
    char **texts = calloc(n + 1, sizeof *texts);
    int rc = -1, tool_run = 0; /* m[k - 1] holds results of calls */
    if (!m || !texts) {
        bad(p, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(msg, "role"));
        size_t len;
        long why;
        int result = !strcmp(role, "tool");
        char *t = gw_tool_message(msg) ? gw_tool_message_text(msgs, msg)
                                       : gw_turn_text(msg, &len, &why);
        if (!t) {
            bad(p, NULL, "out of memory"); /* the check took its content */
            goto out;
        }
        if (result && tool_run) { /* the results of one turn's calls: one user turn */
            size_t a = strlen(texts[k - 1]), b2 = strlen(t);
            char *j = realloc(texts[k - 1], a + b2 + 3);
            if (!j) {
                free(t);
                bad(p, NULL, "out of memory");
                goto out;
            }
            memcpy(j + a, "\n\n", 2);
            memcpy(j + a + 2, t, b2 + 1);
            free(t);
            texts[k - 1] = j;
            m[k - 1].content = j;
            m[k - 1].len = a + b2 + 2;
            continue;
        }
        texts[k] = t;
        /* "developer" is the newer name of the system role; a call's result is read as
         * the user's turn, which every template has */
        m[k] = (struct eng_chat_msg){result                         ? "user"
                                     : strcmp(role, "developer") ? role
                                                                 : "system",
                                     t, strlen(t)};
        k++;
        tool_run = result;
    }
    if (c->tools.mode != GW_TOOLS_OFF) {
        const char *call = c->tools.prompt;
        size_t cl = strlen(call);
        if (k && !strcmp(m[0].role, "system")) { /* after the conversation's own */
            size_t a = m[0].len;
            char *j = realloc(texts[0], a + cl + 3);
            if (!j) {
                bad(p, NULL, "out of memory");
                goto out;
            }
            memcpy(j + a, "\n\n", 2);
            memcpy(j + a + 2, call, cl + 1);
            texts[0] = j;
            m[0].content = j;
            m[0].len = a + cl + 2;
        } else {
            memmove(m + 1, m, sizeof *m * k);
            m[0] = (struct eng_chat_msg){"system", call, cl};
            k++;
        }
    }
    const struct gw_llm *llm = gw_server_llm(srv);
    size_t bytes = 0;
    for (size_t i = 0; i < k; i++)
        bytes += m[i].len;
    if (surely_too_long(llm, bytes, p, c->resp ? "input" : "messages"))
        goto out;
    struct eng_chat_prompt cp;
    if (eng_chat_render(llm->fmt, m, (int)k, 1, llm->default_system, &cp)) {
        bad(p, "messages", "The conversation cannot be rendered for this model.");
        goto out;
    }
    int erc = eng_chat_tokenize(llm->v, &cp, &c->job.prompt, &c->job.n_prompt);
    eng_chat_prompt_deinit(&cp);
    if (erc) {
        bad(p, NULL, "out of memory");
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; texts && i <= n; i++)
        free(texts[i]);
    free(texts);
    free(m);
    return rc;
}

/* A call asked for (tools.h): the grammar of its schema holds the answer. 0, or the HTTP
 * status of the refusal (p says why): 400 when the grammar cannot hold the call (each
 * function's parameters alone were compiled by gw_tools_check, the union of "required"
 * is compiled here), 503 when out of memory. */
static int parse_tools(json_t *b, struct chat_req *c, struct parsed *p)
{
    if (gw_tools_parse(b, &c->tools)) {
        bad(p, NULL, "Out of memory; try again.");
        return 503;
    }
    if (c->tools.mode == GW_TOOLS_OFF)
        return 0;
    char err[200];
    int rc = eng_grammar_create(c->tools.schema, strlen(c->tools.schema), &c->grammar, err,
                                sizeof err);
    if (rc == ENG_ENOMEM) {
        bad(p, NULL, "Out of memory; try again.");
        return 503;
    }
    if (rc) {
        p->param = "tools";
        snprintf(p->msg, sizeof p->msg, "tools: the call cannot be held to: %s", err);
        return 400;
    }
    c->job.params.grammar = c->grammar;
    if (c->tools.mode == GW_TOOLS_AUTO) /* a call or words: the stop strings hold to words */
        c->job.params.grammar_optional = 1;
    else
        c->job.params.n_stop = 0; /* a stop string would cut the call's JSON */
    c->job.params.grammar_more = c->tools.max_calls - 1;
    gw_call_reader_init(&c->call, &c->tools);
    return 0;
}

/* A prompt given as token ids, taken as they are (no BOS added). */
static int prompt_ids(const struct gw_llm *llm, json_t *pr, struct chat_req *c,
                      struct parsed *p)
{
    const size_t n = json_array_size(pr);
    if (n > 1 << 20)
        return bad(p, "prompt", "The prompt has too many token ids.");
    int32_t *ids = malloc(sizeof *ids * n);
    if (!ids)
        return bad(p, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(pr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= tok_n_vocab(llm->v)) {
            free(ids);
            snprintf(p->msg, sizeof p->msg, "prompt[%zu] must be a token id from 0 to %d.", i,
                     tok_n_vocab(llm->v) - 1);
            p->param = "prompt";
            return -1;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    c->job.prompt = ids;
    c->job.n_prompt = (int)n;
    return 0;
}

/* prompt as several prompts (strings, or arrays of token ids), answered as a choice each;
 * NULL when it is one prompt (checked by completion_prompt()). */
static json_t *several_prompts(json_t *b)
{
    json_t *pr = json_object_get(b, "prompt");
    json_t *first = json_array_get(pr, 0);
    return json_array_size(pr) > 1 && !json_is_integer(first) ? pr : NULL;
}

static int completion_prompt(gw_server *srv, json_t *b, struct chat_req *c, struct parsed *p)
{
    json_t *pr = json_object_get(b, "prompt");
    const struct gw_llm *llm = gw_server_llm(srv);
    json_t *one = json_array_get(pr, 0);
    if (json_array_size(pr) == 1 && (json_is_string(one) || json_is_array(one)))
        pr = one; /* a batch of one prompt */
    if (json_is_array(pr) && json_array_size(pr) > 0 && json_is_integer(json_array_get(pr, 0)))
        return prompt_ids(llm, pr, c, p);
    if (!json_is_string(pr) || json_string_length(pr) == 0)
        return bad(p, "prompt", "prompt must be a non-empty string or an array of token ids.");
    if (surely_too_long(llm, json_string_length(pr), p, "prompt"))
        return -1;
    struct eng_chat_prompt raw = {.text = (char *)json_string_value(pr),
                                  .len = json_string_length(pr)};
    struct eng_chat_segment seg = {0, raw.len, 0};
    raw.seg = &seg;
    raw.nseg = 1;
    if (eng_chat_tokenize(llm->v, &raw, &c->job.prompt, &c->job.n_prompt))
        return bad(p, NULL, "out of memory");
    if (tok_add_bos(llm->v) && tok_bos(llm->v) >= 0) {
        int32_t *ids = realloc(c->job.prompt, sizeof *ids * (size_t)(c->job.n_prompt + 1));
        if (!ids)
            return bad(p, NULL, "out of memory");
        memmove(ids + 1, ids, sizeof *ids * (size_t)c->job.n_prompt);
        ids[0] = tok_bos(llm->v);
        c->job.prompt = ids;
        c->job.n_prompt++;
    }
    if (!c->job.n_prompt) /* control bytes the vocabulary has no token for */
        return bad(p, "prompt", "The prompt has no text the model's vocabulary can encode.");
    return 0;
}

/* ------------------------------------------------------------------ responses */

static json_t *usage_json(int prompt, int completion, int cached)
{
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(prompt));
    json_object_set_new(u, "completion_tokens", json_integer(completion));
    json_object_set_new(u, "total_tokens", json_integer(prompt + completion));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(cached));
    json_object_set_new(d, "audio_tokens", json_integer(0));
    json_object_set_new(u, "prompt_tokens_details", d);
    /* none of these kinds, but code reads them as OpenAI always sends them */
    d = json_object();
    json_object_set_new(d, "reasoning_tokens", json_integer(0));
    json_object_set_new(d, "audio_tokens", json_integer(0));
    json_object_set_new(d, "accepted_prediction_tokens", json_integer(0));
    json_object_set_new(d, "rejected_prediction_tokens", json_integer(0));
    json_object_set_new(u, "completion_tokens_details", d);
    return u;
}

static json_t *envelope(struct chat_req *c, const char *object)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(c->created));
    json_object_set_new(o, "model",
                        json_string(gw_server_config(gw_req_server(c->req))->engine_model_name));
    json_object_set_new(o, "service_tier", json_string("default"));
    json_object_set_new(o, "system_fingerprint",
                        json_string(gw_server_llm(gw_req_server(c->req))->fingerprint));
    if (c->stream && c->include_usage && !c->resp) /* a chunk: null but in the usage chunk */
        json_object_set_new(o, "usage", json_null());
    return o;
}

/* c's reply (taken; NULL: none), stored when the request said "store": true (a kid's, as
 * its request's) */
static void keep_reply(struct chat_req *c, json_t *o)
{
    struct chat_req *w = c->parent ? c->parent : c;
    if (!w->keep || !o || !w->req) {
        json_decref(o);
        return;
    }
    w->keep = 0;
    gw_stored_put(gw_req_server(w->req), w->tenant, o, w->kept_req, w->kept_msgs);
}

/* A chat stream's chunk o (taken) sent, and put into the record of a request to store */
static void chat_sse(struct chat_req *c, json_t *o)
{
    struct chat_req *w = c->parent ? c->parent : c;
    if (w->keep && !(w->rec = gw_stored_chunk(w->rec, o))) {
        w->keep = 0;
        gw_log(GW_LOG_WARN, "chat completion %s was not stored (out of memory)", w->id);
    }
    gw_reply_sse_json(c->req, o);
}

/* A stream that ended well: its record, with its usage u, stored */
static void keep_stream(struct chat_req *c, struct usage u)
{
    if (!c->keep || !c->rec)
        return;
    json_object_set_new(c->rec, "usage", usage_json(u.prompt, u.completion, u.cached));
    json_t *o = c->rec;
    c->rec = NULL;
    keep_reply(c, o);
}

/* A token's text for logprobs: its bytes as a string when they are UTF-8, else (a piece of a
 * character) "bytes:" and each byte as \\xNN, as vLLM writes them. */
static json_t *token_string(const char *b, size_t n)
{
    json_t *s = json_stringn(b, n);
    if (s)
        return s;
    char out[6 + 4 * 64 + 1];
    size_t k = (size_t)snprintf(out, sizeof out, "bytes:");
    for (size_t i = 0; i < n && k + 4 < sizeof out; i++)
        k += (size_t)snprintf(out + k, sizeof out - k, "\\x%02x", (unsigned char)b[i]);
    return json_string(out);
}

static json_t *token_bytes(const char *b, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((unsigned char)b[i]));
    return a;
}

/* A log-probability as JSON can carry it: -inf (a token the model rules out) is -9999, as
 * OpenAI writes it. */
static json_t *logprob_value(float lp)
{
    return json_real(lp > -9999.0f ? (double)lp : -9999.0);
}

/* Adds n records to c->lp: chat's {"content": [{token, logprob, bytes, top_logprobs}]},
 * a completion's {"tokens", "token_logprobs", "top_logprobs", "text_offset"} (the offsets in
 * characters from the start of the text, as vLLM counts them). */
static void lp_add(struct chat_req *c, const struct eng_token_lp *lp, int n)
{
    const tok_vocab *v = gw_server_llm(gw_req_server(c->req))->v;
    if (!c->lp) {
        c->lp = json_object();
        if (c->chat) {
            json_object_set_new(c->lp, "content", json_array());
            json_object_set_new(c->lp, "refusal", json_null());
        } else {
            const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
            for (int i = 0; i < 4; i++)
                json_object_set_new(c->lp, keys[i], json_array());
        }
    }
    for (int i = 0; i < n; i++) {
        const char *b = "";
        size_t len = 0;
        tok_piece(v, lp[i].token, &b, &len);
        if (c->chat) {
            json_t *e = json_object(), *tops = json_array();
            json_object_set_new(e, "token", token_string(b, len));
            json_object_set_new(e, "logprob", logprob_value(lp[i].logprob));
            json_object_set_new(e, "bytes", token_bytes(b, len));
            for (int k = 0; k < lp[i].n_top; k++) {
                const char *tb = "";
                size_t tl = 0;
                tok_piece(v, lp[i].top[k], &tb, &tl);
                json_t *t = json_object();
                json_object_set_new(t, "token", token_string(tb, tl));
                json_object_set_new(t, "logprob", logprob_value(lp[i].top_logprob[k]));
                json_object_set_new(t, "bytes", token_bytes(tb, tl));
                json_array_append_new(tops, t);
            }
            json_object_set_new(e, "top_logprobs", tops);
            json_array_append_new(json_object_get(c->lp, "content"), e);
            continue;
        }
        json_array_append_new(json_object_get(c->lp, "tokens"), token_string(b, len));
        json_array_append_new(json_object_get(c->lp, "token_logprobs"),
                              logprob_value(lp[i].logprob));
        /* the step's most likely tokens and the chosen one, as OpenAI and vLLM list them */
        json_t *tops = json_object();
        for (int k = 0; k <= lp[i].n_top; k++) {
            const int32_t t = k < lp[i].n_top ? lp[i].top[k] : lp[i].token;
            const char *tb = "";
            size_t tl = 0;
            tok_piece(v, t, &tb, &tl);
            json_t *key = token_string(tb, tl);
            if (!json_object_get(tops, json_string_value(key))) /* the likeliest spelling */
                json_object_set_new(tops, json_string_value(key),
                                    logprob_value(k < lp[i].n_top ? lp[i].top_logprob[k]
                                                                  : lp[i].logprob));
            json_decref(key);
        }
        json_array_append_new(json_object_get(c->lp, "top_logprobs"), tops);
        json_array_append_new(json_object_get(c->lp, "text_offset"), json_integer(c->lp_chars));
        if (tok_type(v, lp[i].token) == TOK_CONTROL)
            continue; /* its text is not in the answer's */
        for (size_t k = 0; k < len; k++) /* characters: bytes that do not continue one */
            c->lp_chars += ((unsigned char)b[k] & 0xC0) != 0x80;
    }
}

/* The logprobs member of a choice: what c->lp holds (taken: the next starts anew), or null
 * for a request that did not ask. */
static json_t *lp_take(struct chat_req *c)
{
    json_t *lp = c->lp;
    c->lp = NULL;
    if (!lp && c->job.params.logprobs) { /* none yet: an empty list */
        lp_add(c, NULL, 0);
        lp = c->lp;
        c->lp = NULL;
    }
    return lp ? lp : json_null();
}

/* One SSE chunk: text (may be NULL), finish reason (may be NULL), role on the first. */
static void send_chunk(struct chat_req *c, const char *text, size_t len, const char *finish)
{
    json_t *o = envelope(c, c->chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(c->index));
    if (c->chat) {
        json_t *delta = json_object();
        if (!c->started)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (text)
            json_object_set_new(delta, "content", json_stringn(text, len));
        else if (!c->started)
            json_object_set_new(delta, "content", json_string(""));
        json_object_set_new(ch, "delta", delta);
    } else {
        json_object_set_new(ch, "text", text ? json_stringn(text, len) : json_string(""));
    }
    json_object_set_new(ch, "logprobs", c->lp || (text && c->job.params.logprobs)
                                            ? lp_take(c) : json_null());
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, ch);
    json_object_set_new(o, "choices", choices);
    c->started = 1;
    chat_sse(c, o);
}

/* The entry of tool_calls of the call being read (c->call): with its id, type and name
 * when whole (or first in a stream), and the arguments args[0..len). */
static json_t *call_json(struct chat_req *c, int head, int stream, const char *args, size_t len)
{
    json_t *t = json_object(), *f = json_object();
    const int i = c->call.index;
    if (stream)
        json_object_set_new(t, "index", json_integer(i));
    if (head) {
        if (!c->call_id[i][0])
            gw_make_id(c->call_id[i], "call_");
        json_object_set_new(t, "id", json_string(c->call_id[i]));
        json_object_set_new(t, "type", json_string("function"));
        json_object_set_new(f, "name", json_string(c->call.name));
    }
    /* (the grammar wrote JSON, which is UTF-8) */
    json_t *a = json_stringn(args, len);
    json_object_set_new(f, "arguments", a ? a : json_string(""));
    json_object_set_new(t, "function", f);
    return t;
}

/* The calls' deltas that the answer so far allows (final: as gw_call_read()), a chunk a
 * call, each next call's once the one before is whole. */
static void send_call(struct chat_req *c, int final)
{
    const char *text = c->text ? c->text : "";
    do {
        size_t from, to;
        if (!gw_call_read(&c->call, text, c->len, final, &from, &to)) {
            if (final == 2 && c->len && !c->calls_out) /* cut short before the name: the
                                                        * text, as replied whole */
                send_chunk(c, c->text, c->len, NULL);
            return;
        }
        const int head = c->call.index >= c->calls_out;
        if (!head && from == to)
            continue;
        json_t *o = envelope(c, "chat.completion.chunk");
        json_t *ch = json_object(), *delta = json_object();
        json_object_set_new(ch, "index", json_integer(c->index));
        if (!c->started) {
            json_object_set_new(delta, "role", json_string("assistant"));
            json_object_set_new(delta, "content", json_null());
        }
        json_object_set_new(delta, "tool_calls",
                            json_pack("[o]", call_json(c, head, 1, text + from, to - from)));
        json_object_set_new(ch, "delta", delta);
        json_object_set_new(ch, "logprobs", json_null());
        json_object_set_new(ch, "finish_reason", json_null());
        json_t *choices = json_array();
        json_array_append_new(choices, ch);
        json_object_set_new(o, "choices", choices);
        c->started = 1;
        c->calls_out = c->call.index + 1;
        chat_sse(c, o);
    } while (gw_call_next(&c->call, text, c->len));
}

/* The calls of a whole answer (final: as gw_call_read()), each call's entry as one(c,
 * final) makes it of the call being read; a later call cut short is left out (the calls
 * before it are whole). None: cut short before the first function's name is known. */
static json_t *whole_calls(struct chat_req *c, int final,
                           json_t *(*one)(struct chat_req *c, int final))
{
    const char *text = c->text ? c->text : "";
    json_t *calls = json_array();
    do {
        size_t from, to;
        if (!gw_call_read(&c->call, text, c->len, final, &from, &to))
            break;
        if (final == 2 && c->call.index > 0 && !c->call.closed)
            break;
        json_array_append_new(calls, one(c, final));
    } while (gw_call_next(&c->call, text, c->len));
    return calls;
}

/* a tool_calls entry of a whole reply */
static json_t *chat_call(struct chat_req *c, int final)
{
    (void)final;
    return call_json(c, 1, 0, (c->text ? c->text : "") + c->call.args_at, c->call.sent);
}

/* The JSON reply of an answer that is calls: message.tool_calls, content null. An answer
 * cut short before the first function's name is known is replied as text; a later call
 * cut short is left out (streamed, its deltas have gone out). */
static void reply_call(struct chat_req *c, const char *finish, int final, struct usage u)
{
    json_t *m, *calls = whole_calls(c, final, chat_call);
    if (json_array_size(calls))
        m = json_pack("{s:s, s:n, s:n, s:o}", "role", "assistant", "content", "refusal",
                      "tool_calls", calls);
    else {
        json_decref(calls);
        m = json_pack("{s:s, s:s%, s:n}", "role", "assistant", "content",
                      c->text ? c->text : "", c->len, "refusal");
    }
    json_t *o = envelope(c, "chat.completion"), *ch = json_object();
    json_object_set_new(ch, "index", json_integer(0));
    json_object_set_new(ch, "message", m);
    json_object_set_new(ch, "logprobs", json_null());
    json_object_set_new(ch, "finish_reason", json_string(finish));
    json_object_set_new(o, "choices", json_pack("[o]", ch));
    json_object_set_new(o, "usage", usage_json(u.prompt, u.completion, u.cached));
    keep_reply(c, c->keep ? json_deep_copy(o) : NULL); /* (a copy: it gets the metadata) */
    gw_reply_json(c->req, 200, o, 0);
}

/* An error after a stream's headers: an event {"error": {...}}, then "data: [DONE]". */
static void resp_failed(struct chat_req *c, const char *msg);
static void reply_response(struct chat_req *c, const char *text, size_t len, const char *finish,
                           struct usage u);

static void stream_error(struct chat_req *c, int status, const char *msg)
{
    if (c->resp) {
        gw_req_failed(c->req, status);
        resp_failed(c, msg);
        return;
    }
    c->use.failed = 1;
    gw_req_failed(c->req, status);
    gw_reply_sse_json(c->req, oai_error(msg, oai_error_type(status, NULL), NULL, NULL));
    gw_reply_sse_end(c->req);
}

/* The JSON reply of a whole answer, written as json_dumps writes the same object (compact,
 * in this order). Text that is not UTF-8 leaves its key out, as a json_t would. */
static void reply_answer(struct chat_req *c, const char *text, size_t len, const char *finish,
                         struct usage u)
{
    char stack[2048];
    struct oai_buf b;
    oai_buf_init(&b, stack, sizeof stack);
    const char *model = gw_server_config(gw_req_server(c->req))->engine_model_name;
    oai_buf_puts(&b, "{\"id\":");
    oai_buf_str(&b, c->id, strlen(c->id), 0);
    oai_buf_puts(&b, c->chat ? ",\"object\":\"chat.completion\",\"created\":"
                             : ",\"object\":\"text_completion\",\"created\":");
    oai_buf_int(&b, c->created);
    size_t mark = b.len;
    oai_buf_puts(&b, ",\"model\":");
    if (oai_buf_str(&b, model, strlen(model), 0))
        b.len = mark;
    oai_buf_puts(&b, ",\"service_tier\":\"default\",\"system_fingerprint\":");
    const char *fp = gw_server_llm(gw_req_server(c->req))->fingerprint;
    oai_buf_str(&b, fp, strlen(fp), 0);
    oai_buf_puts(&b, ",\"choices\":[{\"index\":0,");
    if (c->chat)
        oai_buf_puts(&b, "\"message\":{\"role\":\"assistant\",");
    mark = b.len;
    oai_buf_puts(&b, c->chat ? "\"content\":" : "\"text\":");
    if (oai_buf_str(&b, text, len, 0))
        b.len = mark;
    else
        oai_buf_puts(&b, ",");
    if (c->chat)
        oai_buf_puts(&b, "\"refusal\":null},");
    oai_buf_puts(&b, "\"logprobs\":");
    json_t *lpj = c->job.params.logprobs ? lp_take(c) : NULL;
    char *lp = lpj ? json_dumps(lpj, JSON_COMPACT) : NULL;
    oai_buf_puts(&b, lp ? lp : "null");
    free(lp);
    json_decref(lpj);
    oai_buf_puts(&b, ",\"finish_reason\":");
    oai_buf_str(&b, finish, strlen(finish), 0);
    oai_buf_puts(&b, "}],\"usage\":{\"prompt_tokens\":");
    oai_buf_int(&b, u.prompt);
    oai_buf_puts(&b, ",\"completion_tokens\":");
    oai_buf_int(&b, u.completion);
    oai_buf_puts(&b, ",\"total_tokens\":");
    oai_buf_int(&b, (long long)u.prompt + u.completion);
    oai_buf_puts(&b, ",\"prompt_tokens_details\":{\"cached_tokens\":");
    oai_buf_int(&b, u.cached);
    oai_buf_puts(&b, ",\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,"
                     "\"audio_tokens\":0,\"accepted_prediction_tokens\":0,"
                     "\"rejected_prediction_tokens\":0}}}");
    if (b.oom) {
        chat_error(c, 500, "out of memory", NULL, NULL);
    } else {
        keep_reply(c, c->keep ? json_loadb(b.p, b.len, 0, NULL) : NULL);
        gw_reply_body(c->req, 200, "application/json", b.p, b.len);
    }
    oai_buf_deinit(&b);
}

/* The answer of a JSON reply grows piece by piece; a piece that finds no memory is lost
 * (the reply still comes, shorter). */
static void append_text(struct chat_req *c, const char *text, size_t len)
{
    if (c->len + len + 1 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        while (cap < c->len + len + 1)
            cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t)
            return;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, text, len);
    c->len += len;
}

/* tool_choice "auto" (tools.h): once the answer so far (c->text) says something, whether
 * it is a call ('{', which the grammar then holds to one) or words, c->tools.mode becoming
 * GW_TOOLS_REQUIRED (the white space before the call dropped) or GW_TOOLS_OFF. 0 while it
 * is white space and may go on (final 0). */
static int decide(struct chat_req *c, int final)
{
    size_t k;
    int begun = gw_auto_begins(c->text, c->len, &k);
    if (!begun && !final)
        return 0;
    if (begun <= 0) {
        c->tools.mode = GW_TOOLS_OFF;
        return 1;
    }
    memmove(c->text, c->text + k, c->len - k);
    c->len -= k;
    c->tools.mode = GW_TOOLS_REQUIRED;
    gw_call_reader_init(&c->call, &c->tools);
    return 1;
}

/* ------------------------------------------------------------------ the Responses API */

static void resp_send(struct chat_req *c, const char *type, json_t *fields)
{
    gw_reply_sse_event(c->req, type, gw_response_event(&c->rs, type, fields));
}

/* The fields that place an event in the one text part of the one message. */
static json_t *part_fields(struct chat_req *c)
{
    json_t *f = json_object();
    json_object_set_new(f, "item_id", json_string(c->msg_id));
    json_object_set_new(f, "output_index", json_integer(0));
    json_object_set_new(f, "content_index", json_integer(0));
    return f;
}

static json_t *one_field(const char *key, json_t *v)
{
    json_t *f = json_object();
    json_object_set_new(f, key, v);
    return f;
}

/* The stream's first events: the response created and in progress. */
static void resp_open(struct chat_req *c)
{
    json_t *o = gw_response_object(&c->rs, "in_progress", NULL, NULL, NULL);
    resp_send(c, "response.created", one_field("response", json_incref(o)));
    resp_send(c, "response.in_progress", one_field("response", o));
    c->opened = 1;
}

/* The events before the first text: (the response opened,) its message item and text part
 * added. */
static void resp_begin(struct chat_req *c)
{
    if (!c->opened)
        resp_open(c);
    json_t *f = one_field("output_index", json_integer(0));
    json_object_set_new(f, "item", gw_response_message(&c->rs, "in_progress", NULL, 0));
    resp_send(c, "response.output_item.added", f);
    f = part_fields(c);
    json_object_set_new(f, "part", gw_response_text_part(NULL, 0));
    resp_send(c, "response.content_part.added", f);
    c->started = 1;
}

static void resp_delta(struct chat_req *c, const char *text, size_t len)
{
    if (!c->started)
        resp_begin(c);
    json_t *f = part_fields(c);
    json_object_set_new(f, "delta", gw_response_string(text, len));
    json_object_set_new(f, "logprobs", json_array());
    resp_send(c, "response.output_text.delta", f);
}

/* A response's status after its answer ended for reason finish. */
static const char *resp_status(const char *finish)
{
    return strcmp(finish, "length") ? "completed" : "incomplete";
}

/* The finished response object (finish "length": incomplete) of output (taken: its output
 * items), stored with the conversation through its answer, as chat's assistant message
 * (its text, or its calls), unless the request said "store": false. */
static json_t *resp_final(struct chat_req *c, json_t *output, const char *finish,
                          struct usage u)
{
    struct gw_response_usage ru = {u.prompt, u.completion, u.cached};
    json_t *o = gw_response_object(&c->rs, resp_status(finish), output, &ru, NULL);
    if (c->convo && json_is_true(json_object_get(c->echo, "store"))) {
        json_t *m = json_pack("{s:s, s:n}", "role", "assistant", "content");
        json_t *calls = json_array(), *item;
        size_t i;
        json_array_foreach(json_object_get(o, "output"), i, item)
        {
            const char *st = json_string_value(json_object_get(item, "status"));
            if (i > 0 && st && !strcmp(st, "incomplete"))
                continue; /* a later call cut short (streamed): its JSON would not parse */
            if (json_object_get(item, "call_id"))
                json_array_append_new(
                    calls, json_pack("{s:O, s:s, s:{s:O, s:O}}", "id",
                                     json_object_get(item, "call_id"), "type", "function",
                                     "function", "name", json_object_get(item, "name"),
                                     "arguments", json_object_get(item, "arguments")));
            else
                json_object_set(m, "content",
                                json_object_get(json_array_get(json_object_get(item, "content"),
                                                               0),
                                                "text"));
        }
        if (json_array_size(calls))
            json_object_set_new(m, "tool_calls", calls);
        else
            json_decref(calls);
        json_array_append_new(c->convo, m);
        char *body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        char *msgs = json_dumps(c->convo, JSON_COMPACT);
        gw_server *srv = gw_req_server(c->req);
        if (!body || !msgs ||
            gw_cache_response_put(gw_server_cache(srv), c->tenant, c->id, body, msgs,
                                  gw_server_config(srv)->responses_ttl_s))
            gw_log(GW_LOG_WARN, "response %s was not stored (out of memory, or closing)",
                   c->id);
        free(body);
        free(msgs);
    }
    return o;
}

/* An output item's last event, output_item.done (item taken). */
static void resp_item_done(struct chat_req *c, int index, json_t *item)
{
    json_t *f = one_field("output_index", json_integer(index));
    json_object_set_new(f, "item", item);
    resp_send(c, "response.output_item.done", f);
}

/* The end of a stream: the response (done) completed, or incomplete. */
static void resp_close(struct chat_req *c, const char *status, json_t *done)
{
    resp_send(c, *status == 'c' ? "response.completed" : "response.incomplete",
              one_field("response", done));
    gw_reply_sse_finish(c->req);
}

/* The events after the last text, then the end of the stream: the text, part and item
 * done, and the response completed, or incomplete when max_output_tokens cut it. */
static void resp_end(struct chat_req *c, const char *text, size_t len, const char *finish,
                     struct usage u)
{
    if (!c->started)
        resp_begin(c);
    const char *status = resp_status(finish);
    json_t *done = resp_final(
        c, json_pack("[o]", gw_response_message(&c->rs, status, text, len)), finish, u);
    json_t *f = part_fields(c);
    json_object_set_new(f, "text", gw_response_string(text, len));
    json_object_set_new(f, "logprobs", json_array());
    resp_send(c, "response.output_text.done", f);
    f = part_fields(c);
    json_object_set_new(f, "part", gw_response_text_part(text, len));
    resp_send(c, "response.content_part.done", f);
    resp_item_done(c, 0, gw_response_message(&c->rs, status, text, len));
    resp_close(c, status, done);
}

/* The function_call item of call r (read out of the answer), with the first n bytes of its
 * arguments; its item id and call_id are made as it first appears. */
static json_t *call_item(struct chat_req *c, const struct gw_call_reader *r,
                         const char *status, size_t n)
{
    const int i = r->index;
    if (!c->item_id[i][0])
        gw_make_id(c->item_id[i], "fc_");
    if (!c->call_id[i][0])
        gw_make_id(c->call_id[i], "call_");
    return gw_response_call(c->item_id[i], c->call_id[i], r->name, status,
                            (c->text ? c->text : "") + r->args_at, n);
}

/* A response's answer that is calls (tools.h), as it may go out (final: as
 * gw_call_read()): a function_call item a call, added once the function's name is read, its
 * arguments' deltas, and its arguments and item done once the next call has begun or the
 * answer ended. The items done are kept in c->items. 0 while no call's name is known. */
static int resp_calls(struct chat_req *c, int final)
{
    const char *text = c->text ? c->text : "";
    for (;;) {
        size_t from, to;
        if (!gw_call_read(&c->call, text, c->len, final, &from, &to))
            return c->call.index > 0; /* (a later call cut before its name: left out) */
        const int i = c->call.index;
        if (i >= c->calls_out) {
            if (!c->opened)
                resp_open(c);
            json_t *f = one_field("output_index", json_integer(i));
            json_object_set_new(f, "item", call_item(c, &c->call, "in_progress", 0));
            resp_send(c, "response.output_item.added", f);
            c->calls_out = i + 1;
            c->started = 1;
        }
        if (to > from) {
            json_t *f = one_field("item_id", json_string(c->item_id[i]));
            json_object_set_new(f, "output_index", json_integer(i));
            json_object_set_new(f, "delta", gw_response_string(text + from, to - from));
            resp_send(c, "response.function_call_arguments.delta", f);
        }
        const struct gw_call_reader was = c->call;
        const int more = gw_call_next(&c->call, text, c->len);
        if (!more && !final)
            return 1;
        json_t *item = call_item(c, &was,
                                 more || final == 1 || was.closed ? "completed" : "incomplete",
                                 was.sent);
        json_t *f = one_field("item_id", json_string(c->item_id[i]));
        json_object_set_new(f, "output_index", json_integer(i));
        json_object_set(f, "arguments", json_object_get(item, "arguments"));
        resp_send(c, "response.function_call_arguments.done", f);
        if (!c->items)
            c->items = json_array();
        json_array_append(c->items, item);
        resp_item_done(c, i, item);
        if (!more)
            return 1;
    }
}

/* The last events of a response's calls, and the response completed (or incomplete); an
 * answer cut before a function's name is known ends as text, a message. */
static void resp_call_end(struct chat_req *c, int final, const char *finish, struct usage u)
{
    if (!resp_calls(c, final)) {
        if (c->len)
            resp_delta(c, c->text, c->len);
        resp_end(c, c->text ? c->text : "", c->len, finish, u);
        return;
    }
    resp_close(c, resp_status(finish), resp_final(c, json_incref(c->items), finish, u));
}

/* a function_call item of a whole response */
static json_t *response_call(struct chat_req *c, int final)
{
    return call_item(c, &c->call, final == 1 || c->call.closed ? "completed" : "incomplete",
                     c->call.sent);
}

/* A whole response whose answer is calls, as chat replies them (reply_call), or text, a
 * message, when cut before the first function's name is known. */

static void reply_response_call(struct chat_req *c, int final, const char *finish,
                                struct usage u)
{
    json_t *items = whole_calls(c, final, response_call);
    if (!json_array_size(items)) {
        json_decref(items);
        reply_response(c, c->text ? c->text : "", c->len, finish, u);
        return;
    }
    gw_reply_json(c->req, 200, resp_final(c, items, finish, u), 0);
}

/* An error after the stream's headers: response.failed, then the end. */
static void resp_failed(struct chat_req *c, const char *msg)
{
    c->use.failed = 1;
    if (!c->started)
        resp_begin(c);
    resp_send(c, "response.failed",
              one_field("response", gw_response_object(&c->rs, "failed", NULL, NULL, msg)));
    gw_reply_sse_finish(c->req);
}

/* A whole response whose answer is text, a message, as JSON. */
static void reply_response(struct chat_req *c, const char *text, size_t len, const char *finish,
                           struct usage u)
{
    json_t *m = gw_response_message(&c->rs, resp_status(finish), text, len);
    gw_reply_json(c->req, 200, resp_final(c, json_pack("[o]", m), finish, u), 0);
}

/* ------------------------------------------------------------------ the engine's events */

static void kid_event(struct chat_req *c, struct gw_gen_event *ev);

static void on_event(struct gw_gen_event *ev)
{
    struct chat_req *c = (struct chat_req *)ev->job;
    if (c->parent) {
        kid_event(c, ev);
        return;
    }
    if (!c->req || gw_req_gone(c->req)) {
        c->req = NULL; /* the client left; the request is freed, the engine cancelled */
        c->use.cancelled = 1;
        if (ev->done) { /* what the engine spent is charged, as for an answer read out */
            c->use.prompt = ev->prompt_tokens;
            c->use.completion = ev->completion_tokens;
            c->use.cached = ev->cached_tokens;
            chat_req_free(c);
        }
        free(ev);
        return;
    }
    if (ev->n_lp) { /* the records of the text event that follows */
        lp_add(c, ev->lp, ev->n_lp);
        free(ev);
        return;
    }
    const struct gw_llm *llm = gw_server_llm(gw_req_server(c->req));
    if (!ev->done && !c->t_first) {
        c->t_first = now_s();
        gw_metric_observe(llm->ttft, c->t_first - c->t0);
    }
    if (ev->done && !ev->err) {
        double t = now_s();
        gw_metric_observe(llm->e2e, t - c->t0);
        if (ev->completion_tokens > 1 && c->t_first)
            gw_metric_observe(llm->tpot, (t - c->t_first) / (ev->completion_tokens - 1));
    }
    int appended = 0;
    if (c->tools.mode == GW_TOOLS_AUTO) { /* a call or words: held until that is known */
        if (!ev->done) {
            append_text(c, ev->text, ev->len);
            appended = 1;
        }
        if (!decide(c, ev->done)) {
            free(ev);
            return;
        }
        if (c->tools.mode == GW_TOOLS_OFF) { /* words: what was held goes out */
            if (c->stream && c->len) {
                if (c->resp)
                    resp_delta(c, c->text, c->len);
                else
                    send_chunk(c, c->text, c->len, NULL);
                if (!c->store && !c->resp)
                    c->len = 0;
            }
            if (!ev->done) {
                free(ev);
                return;
            }
        }
    }
    if (!ev->done && c->tools.mode != GW_TOOLS_OFF) { /* a call: read out as it grows */
        if (!appended)
            append_text(c, ev->text, ev->len);
        if (c->stream && c->resp)
            resp_calls(c, 0);
        else if (c->stream)
            send_call(c, 0);
        free(ev);
        return;
    }
    if (!ev->done) {
        if (c->stream && c->resp)
            resp_delta(c, ev->text, ev->len);
        else if (c->stream)
            send_chunk(c, ev->text, ev->len, NULL);
        if (!c->stream || c->store || c->resp) /* a response's last events repeat it */
            append_text(c, ev->text, ev->len);
        free(ev);
        return;
    }
    c->use.prompt = ev->prompt_tokens;
    c->use.completion = ev->completion_tokens;
    c->use.cached = ev->cached_tokens;
    const char *finish = ev->finish == ENG_FINISH_LENGTH || c->timed_out ? "length" : "stop";
    /* a call's text: complete (its wrapping object's brace to drop), or cut short */
    const int call_final = !strcmp(finish, "stop") ? 1 : 2;
    if (c->tools.mode == GW_TOOLS_REQUIRED && !strcmp(finish, "stop"))
        finish = "tool_calls"; /* (a named function's call ends with stop, as OpenAI's) */
    const struct usage u = {ev->prompt_tokens, ev->completion_tokens, ev->cached_tokens};
    if (c->cut) {
        if (c->stream)
            stream_error(c, 503, SHUTDOWN_MSG);
        else
            chat_error(c, 503, SHUTDOWN_MSG, NULL, NULL);
    } else if (c->timed_out && c->stream && c->resp) {
        gw_req_failed(c->req, 504);
        resp_failed(c, "The generation exceeded engine.request_timeout_ms.");
    } else if (c->timed_out && !c->stream) {
        chat_error(c, 504, "The generation exceeded engine.request_timeout_ms.", NULL,
                       "timeout");
    } else if (ev->err) {
        const int status = ev->err == ENG_EINVAL || ev->err == ENG_EFULL ? 400 : 500;
        const char *msg = ev->err == ENG_EFULL
                              ? "The prompt does not fit in the engine's KV cache."
                              : eng_strerror(ev->err);
        if (c->stream) /* the headers are out: the error goes as an event, as OpenAI sends
                        * it (the SDKs raise it), then the stream ends */
            stream_error(c, status, msg);
        else
            chat_error(c, status, msg, NULL, NULL);
    } else if (c->stream && c->resp && c->tools.mode != GW_TOOLS_OFF) {
        resp_call_end(c, call_final, finish, u);
    } else if (c->stream && c->resp) {
        resp_end(c, c->text ? c->text : "", c->len, finish, u);
    } else if (c->stream) {
        if (c->tools.mode != GW_TOOLS_OFF)
            send_call(c, call_final);
        if (!c->started)
            send_chunk(c, NULL, 0, NULL);
        send_chunk(c, NULL, 0, finish);
        if (c->include_usage) {
            json_t *o = envelope(c, c->chat ? "chat.completion.chunk" : "text_completion");
            json_object_set_new(o, "choices", json_array());
            json_object_set_new(o, "usage", usage_json(u.prompt, u.completion, u.cached));
            chat_sse(c, o);
        }
        keep_stream(c, u);
        gw_reply_sse_end(c->req);
    } else if (c->resp && c->tools.mode != GW_TOOLS_OFF) {
        reply_response_call(c, call_final, finish, u);
    } else if (c->resp) {
        reply_response(c, c->text ? c->text : "", c->len, finish, u);
    } else if (c->tools.mode != GW_TOOLS_OFF) {
        reply_call(c, finish, call_final, u);
    } else {
        reply_answer(c, c->text ? c->text : "", c->len, finish, u);
    }
    /* only a complete answer is stored, once its response is out; it answers the same
     * requests that came meanwhile too */
    c->served = ev->err || c->timed_out || c->tools.mode != GW_TOOLS_OFF ? 0
                : ev->finish == ENG_FINISH_STOP                           ? 1
                : ev->finish == ENG_FINISH_LENGTH                         ? 2
                                                                          : 0;
    if (c->store && !ev->err && !c->timed_out && ev->finish == ENG_FINISH_STOP) {
        gw_server *srv = gw_req_server(c->req);
        gw_cache_put(gw_server_cache(srv), c->tenant, &c->key, c->sem.vec,
                     gw_server_config(srv)->engine_model_name, c->text ? c->text : "", c->len,
                     ev->prompt_tokens, ev->completion_tokens, c->ctl.ttl_s);
    }
    chat_req_free(c);
    free(ev);
}

static void unlead(struct chat_req *c);

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct chat_req *c = arg;
    c->timed_out = 1;
    unlead(c);
    if (c->req) /* (NULL: its client left, and the job is cancelled already) */
        gw_engw_cancel(gw_server_llm(gw_req_server(c->req))->w, &c->job);
}

static void on_gone(void *arg)
{
    struct chat_req *c = arg;
    unlead(c);
    if (c->engine)
        gw_engw_cancel(gw_server_llm(gw_req_server(c->req))->w, &c->job);
}

static void on_cut(void *arg)
{
    struct chat_req *c = arg;
    c->cut = c->timed_out = 1;
    unlead(c);
    gw_engw_cancel(gw_server_llm(gw_req_server(c->req))->w, &c->job);
}

/* ------------------------------------------------------------------ cache */

/* Cache-Control (no-cache, no-store, only-if-cached) and the X-Cache-Threshold and
 * X-Cache-TTL request headers. -1 with a message on a bad value. */
static int cache_controls(struct gw_req *r, struct gw_cache_ctl *ctl, struct parsed *p)
{
    *ctl = (struct gw_cache_ctl){.threshold = -1, .ttl_s = -1};
    const char *cc;
    for (int line = 0; (cc = gw_req_header_at(r, "Cache-Control", line)); line++) {
        for (const char *t = cc; *t;) {
            while (*t == ' ' || *t == '\t' || *t == ',')
                t++;
            size_t n = strcspn(t, ",");
            while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
                n--;
            if (n == 8 && !strncasecmp(t, "no-cache", n))
                ctl->no_cache = 1;
            else if (n == 8 && !strncasecmp(t, "no-store", n))
                ctl->no_store = 1;
            else if (n == 14 && !strncasecmp(t, "only-if-cached", n))
                ctl->only_if_cached = 1;
            t += strcspn(t, ",");
        }
    }
    /* (one value each: two that disagree leave the request's meaning open) */
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "X-Cache-TTL" : "X-Cache-Threshold", *v = NULL, *w;
        for (int line = 0; (w = gw_req_header_at(r, name, line)); line++) {
            if (v && strcmp(v, w)) {
                char msg[96];
                snprintf(msg, sizeof msg, "%s is given twice, with two values.", name);
                return bad(p, NULL, msg);
            }
            v = w;
        }
    }
    const char *th = gw_req_header(r, "X-Cache-Threshold");
    if (th) {
        char *end;
        double v = strtod(th, &end);
        if (end == th || *end || !(v >= 0 && v <= 1))
            return bad(p, NULL, "X-Cache-Threshold must be a number between 0 and 1.");
        ctl->threshold = v;
    }
    const char *ttl = gw_req_header(r, "X-Cache-TTL");
    if (ttl) {
        char *end;
        long long v = strtoll(ttl, &end, 10);
        if (end == ttl || *end || v < 0 || v > 100LL * 365 * 86400)
            return bad(p, NULL, "X-Cache-TTL must be a whole number of seconds (0: never "
                                "expires).");
        ctl->ttl_s = v;
    }
    return 0;
}

/* kind: "exact", "semantic", or NULL (a miss); id: the entry served (for
 * DELETE /admin/cache?id=). */
static void cache_headers(struct chat_req *c, const char *kind, double similarity, int64_t id)
{
    gw_reply_header(c->req, "X-Cache", kind ? "HIT" : "MISS");
    if (kind) {
        char v[32];
        gw_reply_header(c->req, "X-Cache-Kind", kind);
        snprintf(v, sizeof v, "%.4f", similarity);
        gw_reply_header(c->req, "X-Cache-Similarity", v);
        if (id > 0) { /* (a coalesced answer's entry is still being written) */
            store *st = gw_cache_store(gw_server_cache(gw_req_server(c->req)));
            snprintf(v, sizeof v, "%lld", (long long)gw_entry_id_show(st, id));
            gw_reply_header(c->req, "X-Cache-Entry", v);
        }
    }
}

/* The length of the next piece of a replayed answer: a word with the spaces after it, at
 * most 24 bytes, never ending inside a UTF-8 character. */
static size_t piece_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] == ' ')
        i++;
    while (i < n && s[i] != ' ' && s[i] != '\n')
        i++;
    while (i < n && (s[i] == ' ' || s[i] == '\n'))
        i++;
    if (i > 24) {
        i = 24;
        while (i > 1 && ((unsigned char)s[i] & 0xC0) == 0x80)
            i--;
    }
    return i ? i : n;
}

/* A cached answer as a stream's chunks, shaped like a live one's: the role (chat), the text
 * in pieces, then the finish reason. */
static void replay_chunks(struct chat_req *c, const char *text, size_t len, const char *finish)
{
    send_chunk(c, NULL, 0, NULL);
    for (size_t off = 0; off < len;) {
        size_t n = piece_len(text + off, len - off);
        send_chunk(c, text + off, n, NULL);
        off += n;
    }
    send_chunk(c, NULL, 0, finish);
}

/* Answers from a cache entry, as JSON or as a stream shaped like a live one. */
static void reply_hit(struct chat_req *c, const struct store_hit *h, const char *kind)
{
    cache_headers(c, kind, h->similarity, h->id);
    /* an answer as long as max_tokens allows ends with length, as the engine's would: it
     * stops there before it could end the text */
    const char *finish =
        h->completion_tokens >= c->job.params.max_tokens ? "length" : h->finish_reason;
    const struct usage u = {c->job.n_prompt, h->completion_tokens, 0};
    if (c->stream && c->resp) {
        gw_reply_sse_start(c->req);
        for (size_t off = 0; off < h->answer_len;) {
            size_t n = piece_len(h->answer + off, h->answer_len - off);
            resp_delta(c, h->answer + off, n);
            off += n;
        }
        resp_end(c, h->answer, h->answer_len, finish, u);
        return;
    }
    if (c->resp) {
        reply_response(c, h->answer, h->answer_len, finish, u);
        return;
    }
    if (c->stream) {
        gw_reply_sse_start(c->req);
        replay_chunks(c, h->answer, h->answer_len, finish);
        if (c->include_usage) {
            json_t *o = envelope(c, c->chat ? "chat.completion.chunk" : "text_completion");
            json_object_set_new(o, "choices", json_array());
            json_object_set_new(o, "usage", usage_json(c->job.n_prompt, h->completion_tokens, 0));
            chat_sse(c, o);
        }
        keep_stream(c, u);
        gw_reply_sse_end(c->req);
        return;
    }
    reply_answer(c, h->answer, h->answer_len, finish, u);
}

static void reply_not_cached(struct chat_req *c)
{
    gw_cache_note_unmet(gw_server_cache(gw_req_server(c->req)));
    gw_reply_header(c->req, "X-Cache", "MISS");
    chat_error(c, 504, "No cached answer matches this request (Cache-Control: "
                           "only-if-cached).", NULL, "cache_miss");
}

static void start_engine(struct chat_req *c);

static void batch_run(struct chat_req *c, json_t *b, json_t *prompts);

/* A prompt (with max_tokens, when the request sets it) longer than the engine runs. */
static int context_exceeded(const struct gw_llm *llm, struct chat_req *c, struct parsed *p)
{
    const int n = c->job.n_prompt, max = llm->max_model_len, want = c->job.params.max_tokens;
    const char *what = c->resp ? "input" : c->chat ? "messages" : "prompt";
    const char *mk = c->max_tokens_key, *take = c->chat && !c->resp ? "take" : "takes";
    p->param = what;
    if (n >= max) {
        snprintf(p->msg, sizeof p->msg, "This model's maximum context length is %d tokens; "
                 "the %s %s %d, leaving no room for an answer. Shorten the %s.", max, what,
                 take, n, what);
    } else if (n + 1 > llm->kv_positions) {
        snprintf(p->msg, sizeof p->msg, "The %s %s %d tokens; the engine's KV cache holds "
                 "%d positions in all. Shorten the %s.", what, take, n, llm->kv_positions, what);
    } else if (mk && n + want > max) {
        snprintf(p->msg, sizeof p->msg, "This model's maximum context length is %d tokens; "
                 "the %s %s %d and %s asks for %d more. Lower %s or shorten the %s.", max,
                 what, take, n, mk, want, mk, what);
        p->param = mk;
    } else {
        return 0;
    }
    return -1;
}

/* The request's cache key, when the cache is on and the request has one (c->cacheable).
 * -1: out of memory. */
static int cache_key(struct chat_req *c, json_t *b)
{
    gw_server *srv = gw_req_server(c->req);
    /* a cached answer has no log-probabilities, and one with them is not worth keeping */
    if (!gw_server_config(srv)->cache_enabled || !gw_server_cache(srv) ||
        c->job.params.logprobs || (c->chat && gw_uses_tools(b)))
        return 0;
    int krc = gw_cache_key_make(b, c->chat, c->tenant, &c->key);
    if (krc < 0)
        return -1;
    c->cacheable = krc == 0;
    c->store = c->cacheable && !c->ctl.no_store;
    return 0;
}

/* The exact cache's entry that answers c, with c->job.n_prompt set; or NULL. An exact hit
 * is found before the prompt is tokenized: the entry knows its prompt's length, unless it
 * was imported. *refused: the engine would refuse the request (too long for its context;
 * p says why), and so the cache does too. */
static const struct store_hit *exact_hit(struct chat_req *c, json_t *b, struct parsed *p,
                                         int *refused)
{
    gw_server *srv = gw_req_server(c->req);
    gw_cache *cache = gw_server_cache(srv);
    const struct store_hit *h;
    *refused = 0;
    if (!c->cacheable || c->ctl.no_cache ||
        !gw_cache_exact(cache, c->tenant, &c->key, c->job.params.max_tokens, &h))
        return NULL;
    /* the entry's prompt length is this request's when it asked in the same bytes */
    int same = h->query_len == c->key.query_len && !memcmp(h->query, c->key.query, h->query_len);
    c->job.n_prompt = same ? h->prompt_tokens : 0;
    if (!c->job.n_prompt) { /* imported (counted once, then the entry knows), or asked in
                             * other white space: this request's own count */
        if (c->chat ? chat_prompt(srv, b, c, p) : completion_prompt(srv, b, c, p))
            c->job.n_prompt = 0;
        else if (same)
            gw_cache_exact_prompt_tokens(cache, c->job.n_prompt);
    }
    if (c->job.n_prompt && context_exceeded(gw_server_llm(srv), c, p)) {
        *refused = 1;
        return NULL;
    }
    c->use = (struct gw_usage_one){.hit = 1, .saved = h->completion_tokens};
    return h;
}

/* A semantic miss says how near the nearest stored question of its partition came and
 * why it was not served (the guard's reason, say): what an operator tuning the threshold
 * needs. Bytes outside printable ASCII (the words of a question) are percent-encoded. */
static void miss_headers(struct chat_req *c, const struct gw_cache_sem *s)
{
    char v[3 * sizeof s->why + 1];
    if (s->best < 0)
        return;
    snprintf(v, sizeof v, "%.4f", s->best);
    gw_reply_header(c->req, "X-Cache-Nearest", v);
    /* the reason may quote the stored question's words */
    if (!s->why[0] || !gw_server_config(gw_req_server(c->req))->cache_miss_reasons)
        return;
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *w = (const unsigned char *)s->why; *w; w++) {
        if (*w >= 0x20 && *w < 0x7f && *w != '%') {
            v[n++] = (char)*w;
        } else {
            v[n++] = '%';
            v[n++] = hex[*w >> 4];
            v[n++] = hex[*w & 15];
        }
    }
    v[n] = 0;
    gw_reply_header(c->req, "X-Cache-Miss-Reason", v);
}

static void on_semantic(struct gw_cache_sem *s)
{
    struct chat_req *c = gw_cq_container(s, struct chat_req, sem);
    if (!c->req || gw_req_gone(c->req)) {
        c->use.cancelled = 1;
        chat_req_free(c);
        return;
    }
    gw_cache *cache = gw_server_cache(gw_req_server(c->req));
    if (s->hit) {
        c->use = (struct gw_usage_one){.hit = 2, .saved = s->entry.completion_tokens};
        gw_cache_served(cache, s->entry.id, s->entry.completion_tokens, 1);
        reply_hit(c, &s->entry, "semantic");
        chat_req_free(c);
        return;
    }
    miss_headers(c, s);
    if (c->ctl.only_if_cached) {
        reply_not_cached(c);
        chat_req_free(c);
        return;
    }
    if (s->rc) /* the lookup failed: embed again when storing */
        gw_cache_sem_deinit(s);
    start_engine(c);
}

/* The parameter named in an error: a response's conversation is its input. */
static const char *param_of(const struct chat_req *c, const char *param)
{
    return c->resp && param && !strcmp(param, "messages") ? "input" : param;
}

/* A Responses API body *b read as the chat request that asks the same, continuing the
 * stored response it names as previous_response_id (the tenant's own). -1 after replying. */
static int resp_request(struct chat_req *c, struct gw_tenant *tn, json_t **b)
{
    struct parsed p = {0};
    json_t *history = NULL;
    const char *prev = json_string_value(json_object_get(*b, "previous_response_id"));
    if (prev) {
        char *msgs = NULL;
        gw_cache *cache = gw_server_cache(gw_req_server(c->req));
        int rc = strncmp(prev, "resp_", 5) /* a stored chat completion is no response */
                     ? STORE_ENOTFOUND
                     : gw_cache_response_get(cache, tn->id, prev, NULL, &msgs);
        if (rc == STORE_ENOTFOUND) {
            char msg[300];
            snprintf(msg, sizeof msg, "Previous response with id '%.200s' not found (or "
                     "expired).", prev);
            gw_reply_error(c->req, 404, msg, "previous_response_id",
                           "previous_response_not_found");
            return -1;
        }
        history = msgs ? json_loads(msgs, 0, NULL) : NULL;
        free(msgs);
        if (!json_is_array(history)) {
            json_decref(history);
            gw_reply_error(c->req, 500, rc ? store_strerror(rc)
                                           : "The previous response's messages are damaged.",
                           NULL, NULL);
            return -1;
        }
    }
    json_t *cb = gw_responses_request(*b, history, &c->echo, &c->convo, &p.param, p.msg,
                                      sizeof p.msg);
    json_decref(history);
    if (!cb) {
        gw_reply_error(c->req, 400, p.msg, p.param, NULL);
        return -1;
    }
    json_decref(*b);
    *b = cb;
    return 0;
}

/* What c may use, its prompt and its max_tokens, reserved under its tenant's token limits
 * (the prompt's tokens counted, not guessed from its bytes, so that a burst cannot overrun
 * them); else -1, the 429 sent, c refused. */
static int tenant_reserve(struct chat_req *c, int64_t tokens)
{
    if (!gw_tenants_counts_tokens(c->tenants, c->tn) ||
        !gw_tenants_reserve(c->tenants, c->tn, c->req, tokens, c->reserved))
        return 0;
    c->use.refused = 1;
    return -1;
}

/* chat: a chat request (resp: in the Responses API's form) or a completion; count: POST
 * /v1/responses/input_tokens (resp too), the prompt's tokens replied, nothing run. */
static void handle(struct gw_req *r, int chat, int resp, int count)
{
    gw_server *srv = gw_req_server(r);
    const struct gw_config *cfg = gw_server_config(srv);
    gw_tenants *tenants = gw_server_tenants(srv);
    struct gw_tenant *tn = gw_tenants_auth(tenants, r);
    if (!tn)
        return;
    json_t *b = gw_req_json_body(r);
    if (!b)
        return;
    struct parsed p = {0};
    struct chat_req *c = calloc(1, sizeof *c);
    if (!c) {
        gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
        json_decref(b);
        return;
    }
    c->req = r;
    c->chat = chat;
    c->resp = resp;
    const char *unknown = oai_unknown_param(b, count  ? OAI_INPUT_TOKENS
                                               : resp ? OAI_RESPONSES
                                               : chat ? OAI_CHAT
                                                      : OAI_COMPLETION,
                                            NULL);
    if (unknown) {
        char msg[300];
        snprintf(msg, sizeof msg, "Unrecognized request argument supplied: %.200s", unknown);
        gw_reply_error(r, 400, msg, unknown, NULL);
        goto out;
    }
    if (count) { /* the model is optional here */
        json_t *pers = json_object_get(b, "personality");
        if (pers && !json_is_null(pers)) {
            gw_reply_error(r, 400, "personality is not supported by this model.", "personality",
                           NULL);
            goto out;
        }
        if (!json_object_get(b, "model") || json_is_null(json_object_get(b, "model")))
            json_object_set_new(b, "model", json_string(cfg->engine_model_name));
    }
    if (resp && resp_request(c, tn, &b))
        goto out;
    json_t *model = json_object_get(b, "model");
    if (!json_is_string(model)) {
        gw_reply_error(r, 400, "You must provide a model parameter (a string).", "model", NULL);
        goto out;
    }
    if (strcmp(json_string_value(model), cfg->engine_model_name) != 0) {
        char msg[320];
        int embeds = !strcmp(json_string_value(model), cfg->embedder_model_name);
        if (tn->pol.nmodels) /* a tenant kept to some models is not told of others */
            snprintf(msg, sizeof msg, "The model `%.200s` does not exist or you do not have "
                     "access to it.", json_string_value(model));
        else if (embeds) /* (which /v1/models lists beside the chat model) */
            snprintf(msg, sizeof msg, "The model `%.200s` is an embedding model and does not "
                     "%s; this server runs `%s` for that.", json_string_value(model),
                     c->chat ? "chat" : "complete text", cfg->engine_model_name);
        else
            snprintf(msg, sizeof msg, "The model `%.200s` does not exist; this server runs "
                     "`%s`.", json_string_value(model), cfg->engine_model_name);
        if (embeds && !tn->pol.nmodels)
            gw_reply_error(r, 400, msg, "model", "model_not_supported");
        else
            gw_reply_error(r, 404, msg, "model", "model_not_found");
        goto out;
    }
    if (gw_tenants_model_ok(tn, r, json_string_value(model)))
        goto out;
    if (parse_common(b, cfg, c, &p) || cache_controls(r, &c->ctl, &p)) {
        gw_reply_error(r, 400, p.msg, p.param, NULL);
        goto out;
    }
    if (resp && c->max_tokens_key)
        c->max_tokens_key = "max_output_tokens";
    /* before the caches: a request the engine refuses is refused whatever they hold */
    char where[64];
    if (chat && gw_messages_check(json_object_get(b, "messages"), p.msg, sizeof p.msg, where,
                                  sizeof where)) {
        gw_reply_error(r, 400, p.msg, resp ? "input" : where, NULL);
        goto out;
    }
    json_t *store = json_object_get(b, "store");
    if (chat && !resp && store && !json_is_null(store) && !json_is_boolean(store)) {
        gw_reply_error(r, 400, "store must be a boolean.", "store", NULL);
        goto out;
    }
    if (chat && !resp && json_is_true(store)) { /* kept for the stored completions' routes */
        c->keep = 1;
        c->kept_msgs = json_deep_copy(json_object_get(b, "messages"));
        c->kept_req = gw_stored_request(b, gw_req_id(r));
        if (!c->kept_msgs || !c->kept_req) {
            gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
            goto out;
        }
    }
    int status = chat ? parse_tools(b, c, &p) : 0;
    if (status) {
        gw_reply_error(r, status, p.msg, p.param, NULL);
        goto out;
    }
    if (c->n > 1 && c->tools.mode != GW_TOOLS_OFF) { /* (a response's request has no n) */
        gw_reply_error(r, 400, "n above 1 is not supported with a tool call.", "n", NULL);
        goto out;
    }
    if (count) { /* what the model would read: the conversation, the tools it is shown */
        if (chat_prompt(srv, b, c, &p))
            gw_reply_error(r, 400, p.msg, param_of(c, p.param), p.code);
        else
            gw_reply_json(r, 200, json_pack("{s:s, s:i}", "object", "response.input_tokens",
                                            "input_tokens", c->job.n_prompt), 0);
        goto out;
    }
    json_t *prompts = chat ? NULL : several_prompts(b);
    const int64_t answers = (prompts ? (int64_t)json_array_size(prompts) : 1) * c->n;
    if (answers > cfg->engine_max_num_seqs + cfg->engine_max_waiting) {
        snprintf(p.msg, sizeof p.msg, "At most %lld prompts a request (times n) are served "
                 "(the engine runs engine.max_num_seqs and queues engine.max_waiting).",
                 (long long)(cfg->engine_max_num_seqs + cfg->engine_max_waiting));
        gw_reply_error(r, 400, p.msg, prompts ? "prompt" : "n", NULL);
        goto out;
    }
    /* the tokens it may use are reserved once its prompts are counted (a cache hit uses
     * none): tenant_reserve() */
    if (gw_tenants_admit(tenants, tn, r, 0, c->reserved))
        goto out;
    c->tenants = tenants;
    c->tn = tn;
    c->job.ns = gw_tenant_ns(tenants, tn); /* the prefix cache's namespace */
    c->job.party = tn->id;
    /* the tenant's policy under the request's own headers */
    if (c->ctl.threshold < 0 && tn->pol.threshold >= 0)
        c->ctl.threshold = tn->pol.threshold;
    /* the tenant's TTL (its policy's, or cache.ttl_s) is a retention limit: X-Cache-TTL may
     * shorten it, not lengthen it (0, never expiring, is the longest) */
    int64_t keep = tn->pol.ttl_s >= 0 ? tn->pol.ttl_s : cfg->cache_ttl_s;
    if (c->ctl.ttl_s < 0 || (keep > 0 && (c->ctl.ttl_s == 0 || c->ctl.ttl_s > keep)))
        c->ctl.ttl_s = keep;
    gw_make_id(c->id, resp ? "resp_" : chat ? "chatcmpl-" : "cmpl-");
    c->created = (long)time(NULL);
    if (resp) {
        gw_make_id(c->msg_id, "msg_");
        c->rs = (struct gw_response){c->id, c->msg_id, cfg->engine_model_name, c->echo,
                                     c->created, 0};
    }
    c->t0 = now_s();
    c->tenant = tn->id;
    if (prompts || c->n > 1) {
        batch_run(c, b, prompts);
        return;
    }
    gw_cache *cache = gw_server_cache(srv);
    if (cache_key(c, b)) {
        chat_error(c, 503, "Out of memory; try again.", NULL, NULL);
        goto out;
    }
    int refused;
    const struct store_hit *h = exact_hit(c, b, &p, &refused);
    if (refused) {
        chat_error(c, 400, p.msg, param_of(c, p.param), "context_length_exceeded");
        goto out;
    }
    if (h) {
        gw_cache_served(cache, h->id, h->completion_tokens, 0);
        reply_hit(c, h, "exact");
        goto out;
    }
    if (chat ? chat_prompt(srv, b, c, &p) : completion_prompt(srv, b, c, &p)) {
        chat_error(c, 400, p.msg, param_of(c, p.param), p.code);
        goto out;
    }
    if (context_exceeded(gw_server_llm(srv), c, &p)) {
        chat_error(c, 400, p.msg, param_of(c, p.param), "context_length_exceeded");
        goto out;
    }
    json_decref(b);
    b = NULL;
    /* a completion's prompt is continued character for character: the exact cache only */
    if (c->cacheable && !c->ctl.no_cache && chat) {
        c->sem.tenant = c->tenant;
        c->sem.key = &c->key;
        c->sem.threshold = c->ctl.threshold >= 0 ? c->ctl.threshold : cfg->cache_threshold;
        c->sem.max_tokens = c->job.params.max_tokens;
        c->sem.stores = c->store && !c->ctl.only_if_cached;
        c->sem.done = on_semantic;
        gw_req_defer(r);
        gw_req_on_gone(r, on_gone, c);
        gw_cache_semantic(cache, &c->sem);
        return;
    }
    if (c->ctl.only_if_cached) {
        reply_not_cached(c);
        goto out;
    }
    start_engine(c);
    return;
out:
    chat_req_free(c);
    json_decref(b);
}

/* c's reply waits for its engine jobs: gone runs if its client leaves first, timeout once
 * engine.request_timeout_ms has passed, and cut if the server's shutdown grace runs out. */
static void defer_engine(struct chat_req *c, void (*gone)(void *), event_callback_fn timeout,
                         void (*cut)(void *))
{
    gw_server *srv = gw_req_server(c->req);
    const int64_t ms = gw_server_config(srv)->engine_request_timeout_ms;
    gw_req_defer(c->req);
    gw_req_on_gone(c->req, gone, c);
    gw_req_on_cut(c->req, cut, c);
    if ((c->timeout = evtimer_new(gw_server_base(srv), timeout, c))) {
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
        evtimer_add(c->timeout, &tv);
    }
}

/* ------------------------------------------------------------------ coalescing */

/* The requests on the engine whose answer may serve the same requests that come while it
 * runs (event loop only). */
static struct chat_req *leaders;

/* Whether c and l ask the same: the exact cache's key, of the same tenant and route, and
 * the same max_tokens (l's answer is then c's, whether it ends with stop or length). */
static int same_request(const struct chat_req *c, const struct chat_req *l)
{
    return l->tenant == c->tenant && l->chat == c->chat && l->key.partition == c->key.partition &&
           l->key.exact == c->key.exact && l->job.params.max_tokens == c->job.params.max_tokens;
}

/* c leads no more (cancelled, timed out): later requests do not wait for it; those that
 * do already are released when it ends. */
static void unlead(struct chat_req *c)
{
    if (!c->leading)
        return;
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        leaders = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    c->leading = 0;
}

static void follower_gone(void *arg)
{
    (void)arg; /* (its leader's end frees it: gw_req_gone()) */
}

static void follower_cut(void *arg)
{
    struct chat_req *c = arg;
    c->cut = 1; /* its leader is cut too: its end replies */
}

/* A request that the caches did not answer and that another in flight on the engine asks
 * too waits for that one's answer instead of running again: 1 when c now follows one. Not
 * a stream (it would wait for the whole answer before its first token), nor a request
 * that wants a fresh answer (no-cache). */
static int follow(struct chat_req *c)
{
    if (!c->cacheable || c->stream || c->ctl.no_cache)
        return 0;
    for (struct chat_req *l = leaders; l; l = l->lnext)
        if (same_request(c, l)) {
            c->fnext = l->followers;
            l->followers = c;
            gw_req_defer(c->req);
            gw_req_on_gone(c->req, follower_gone, c);
            gw_req_on_cut(c->req, follower_cut, c);
            return 1;
        }
    return 0;
}

/* (Not a request that asked its answer not to be kept, no-store: nor is it shared.) */
static void lead(struct chat_req *c)
{
    if (!c->cacheable || !c->store)
        return;
    c->leading = 1;
    c->lprev = NULL;
    c->lnext = leaders;
    if (leaders)
        leaders->lprev = c;
    leaders = c;
}

static void start_engine(struct chat_req *c);

/* The leader c has ended: each follower is answered with its answer (when it ended with
 * stop, or with length at their max_tokens), or runs on its own. */
static void release_followers(struct chat_req *c)
{
    unlead(c);
    struct chat_req *f = c->followers;
    c->followers = NULL;
    while (f) {
        struct chat_req *next = f->fnext;
        f->fnext = NULL;
        if (!f->req || gw_req_gone(f->req)) {
            f->req = NULL;
            f->use.cancelled = 1;
            chat_req_free(f);
        } else if (f->cut || c->cut) {
            chat_error(f, 503, SHUTDOWN_MSG, NULL, NULL);
            chat_req_free(f);
        } else if (c->timed_out) { /* what it asked took too long: so would it again */
            chat_error(f, 504, "The generation exceeded engine.request_timeout_ms.", NULL,
                       "timeout");
            chat_req_free(f);
        } else if (c->served) { /* (its max_tokens is f's: same_request()) */
            struct store_hit h = {.similarity = 1, .answer = c->text ? c->text : "",
                                  .answer_len = c->len,
                                  .finish_reason = c->served == 1 ? "stop" : "length",
                                  .prompt_tokens = c->use.prompt,
                                  .completion_tokens = c->use.completion};
            f->use = (struct gw_usage_one){.hit = 1, .saved = c->use.completion};
            gw_cache_coalesced(gw_server_cache(gw_req_server(f->req)), c->use.completion);
            reply_hit(f, &h, "coalesced");
            chat_req_free(f);
        } else {
            start_engine(f);
        }
        f = next;
    }
}

/* Runs the request on the engine, or waits for the same one running; replies (now on
 * failure, later otherwise). Takes c. */
static void start_engine(struct chat_req *c)
{
    struct gw_req *r = c->req;
    gw_server *srv = gw_req_server(r);
    const struct gw_config *cfg = gw_server_config(srv);
    if (follow(c))
        return;
    /* what it may use, now that the caches did not answer it (a hit spends nothing) */
    if (tenant_reserve(c, (int64_t)c->job.n_prompt + c->job.params.max_tokens)) {
        chat_req_free(c);
        return;
    }
    c->job.on_event = on_event;
    int rc = gw_engw_submit(gw_server_llm(srv)->w, &c->job);
    if (rc == ENG_EFULL) {
        gw_reply_retry_after(r, 1);
        chat_error(c, 429, "The engine's queue is full; retry shortly.", NULL,
                       "rate_limit_exceeded");
        c->use.busy = 1; /* (nothing ran: not a request the tenant is charged for) */
        chat_req_free(c);
        return;
    }
    if (rc) {
        chat_error(c, 503, "Out of memory; try again.", NULL, NULL);
        chat_req_free(c);
        return;
    }
    c->engine = 1;
    lead(c);
    defer_engine(c, on_gone, on_timeout, on_cut);
    if (gw_server_cache(srv) && cfg->cache_enabled)
        cache_headers(c, NULL, 0, 0);
    if (c->stream)
        gw_reply_sse_start(r);
    if (c->stream && c->resp) /* created and in progress at once, as OpenAI says them */
        resp_open(c);
}

/* ------------------------------------------------------------------ several prompts */

/* The parent's engine jobs not answered yet are cancelled (its client left, or one failed
 * or timed out); their last events still come. */
static void batch_cancel(struct chat_req *c, int timed_out)
{
    for (int i = 0; i < c->nkids; i++) {
        struct chat_req *k = c->kids[i];
        if (k->engine && !k->done) {
            k->timed_out |= timed_out;
            gw_engw_cancel(c->llm->w, &k->job);
        }
    }
}

static void batch_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct chat_req *c = arg;
    c->timed_out = 1;
    batch_cancel(c, 1);
}

static void batch_gone(void *arg)
{
    batch_cancel(arg, 0);
}

static void batch_cut(void *arg)
{
    struct chat_req *c = arg;
    c->cut = c->timed_out = 1;
    batch_cancel(c, 1);
}

/* The parent's first error; replied when its kids are done, or at once in a stream (whose
 * other answers are then cancelled). */
static void batch_error(struct chat_req *c, int status, const char *msg, const char *code)
{
    if (c->err_status)
        return;
    c->err_status = status;
    c->err_code = code;
    snprintf(c->err_msg, sizeof c->err_msg, "%s", msg);
    c->use.failed = 1;
    if (c->stream && c->req) {
        stream_error(c, status, msg);
        c->req = NULL; /* the reply is over */
    }
    batch_cancel(c, 0);
}

/* A kid answered from the cache is counted as served (tokens saved, the entry's LRU). */
static void kid_served(struct chat_req *k)
{
    gw_cache_served(gw_server_cache(gw_req_server(k->parent->req)), k->hit_id, k->use.saved, 0);
    k->parent->use.saved += k->use.saved;
}

/* The kids of c not submitted yet will not be: timed out, or their request is over (or
 * refused: say 0). In a stream that goes on, each ends with "length", as a timed-out
 * answer does. */
static void batch_drop_rest(struct chat_req *c, int say)
{
    for (; c->next < c->nkids; c->next++) {
        struct chat_req *k = c->kids[c->next];
        if (k->done)
            continue;
        k->done = 1;
        k->finish = "length";
        c->left--;
        if (say && c->started && c->req && !c->err_status) {
            send_chunk(k, NULL, 0, NULL);
            send_chunk(k, NULL, 0, k->finish);
        }
    }
}

/* Submits c's next kids while fewer than its window run (its tenant's concurrent requests
 * allow). 0, or the engine's refusal: the kids not submitted then are dropped. */
static int batch_submit(struct chat_req *c)
{
    if (c->timed_out || !c->req || c->err_status) {
        batch_drop_rest(c, 1);
        return 0;
    }
    while (c->running < c->window && c->next < c->nkids) {
        struct chat_req *k = c->kids[c->next];
        if (!k->done) {
            k->job.on_event = on_event;
            int rc = gw_engw_submit(c->llm->w, &k->job);
            if (rc) {
                batch_drop_rest(c, 0);
                return rc;
            }
            k->engine = 1;
            c->running++;
        }
        c->next++;
    }
    return 0;
}

/* All kids are done: the reply (unless it is out), the tenant's usage, and c is freed. */
static void batch_end(struct chat_req *c)
{
    struct usage sum = {0};
    int hits = 0;
    const int ok = c->req && !c->err_status;
    for (int i = 0; i < c->nkids; i++) {
        struct chat_req *k = c->kids[i];
        /* a prompt's n answers count it once, as OpenAI counts it (its blocks are computed
         * once, the other answers take them from the prefix cache) */
        const int first = c->n <= 1 || i % c->n == 0;
        sum.prompt += first ? k->got.prompt : 0;
        sum.completion += k->got.completion;
        sum.cached += first ? k->got.cached : 0;
        if (!c->refused) { /* what the engine spent, as for one request */
            c->use.prompt += first ? k->use.prompt : 0;
            c->use.completion += k->use.completion;
            c->use.cached += first ? k->use.cached : 0;
        }
        hits += k->use.hit == 1;
        if (ok && !c->stream && k->hit_id)
            kid_served(k);
    }
    c->use.hit = hits == c->nkids && ok; /* a request of exact hits alone is a hit */
    if (c->req && c->err_status) {
        if (c->err_status == 429)
            gw_reply_retry_after(c->req, 1);
        gw_reply_error(c->req, c->err_status, c->err_msg, NULL, c->err_code);
    } else if (c->req && c->stream) {
        if (c->include_usage) {
            json_t *o = envelope(c, c->chat ? "chat.completion.chunk" : "text_completion");
            json_object_set_new(o, "choices", json_array());
            json_object_set_new(o, "usage", usage_json(sum.prompt, sum.completion, sum.cached));
            chat_sse(c, o);
        }
        keep_stream(c, sum);
        gw_reply_sse_end(c->req);
    } else if (c->req) {
        json_t *o = envelope(c, c->chat ? "chat.completion" : "text_completion");
        json_t *choices = json_array();
        for (int i = 0; i < c->nkids; i++) {
            struct chat_req *k = c->kids[i];
            json_t *ch = json_object();
            json_object_set_new(ch, "index", json_integer(i));
            json_t *t = json_stringn(k->text ? k->text : "", k->len);
            if (c->chat) /* (the engine's text is UTF-8) */
                json_object_set_new(ch, "message",
                                    json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
                                              t ? t : json_string(""), "refusal"));
            else if (t) /* text that is not UTF-8 leaves its key out, as in one answer's
                         * reply */
                json_object_set_new(ch, "text", t);
            json_object_set_new(ch, "logprobs", lp_take(k));
            json_object_set_new(ch, "finish_reason", json_string(k->finish));
            json_array_append_new(choices, ch);
        }
        json_object_set_new(o, "choices", choices);
        json_object_set_new(o, "usage", usage_json(sum.prompt, sum.completion, sum.cached));
        keep_reply(c, c->keep ? json_deep_copy(o) : NULL);
        gw_reply_json(c->req, 200, o, 0);
    }
    chat_req_free(c);
}

/* An engine event of a kid: its text goes out as its choice's chunks (a stream) or is
 * kept; at its end the next kid is submitted, and the last kid's end ends the parent. */
static void kid_event(struct chat_req *k, struct gw_gen_event *ev)
{
    struct chat_req *c = k->parent;
    if (c->req && gw_req_gone(c->req)) {
        c->req = NULL; /* freed: the kids have gone with their client */
        c->use.cancelled = 1;
    }
    const int live = c->req != NULL;
    if (ev->n_lp) {
        if (live)
            lp_add(k, ev->lp, ev->n_lp);
        free(ev);
        return;
    }
    if (!ev->done && !k->t_first && live) {
        k->t_first = now_s();
        gw_metric_observe(c->llm->ttft, k->t_first - k->t0);
    }
    if (!ev->done) {
        if (live && c->stream)
            send_chunk(k, ev->text, ev->len, NULL);
        if (!c->stream || k->store)
            append_text(k, ev->text, ev->len);
        free(ev);
        return;
    }
    k->done = 1;
    c->running--;
    k->use.prompt = ev->prompt_tokens;
    k->use.completion = ev->completion_tokens;
    k->use.cached = ev->cached_tokens;
    k->got = (struct usage){ev->prompt_tokens, ev->completion_tokens, ev->cached_tokens};
    k->finish = ev->finish == ENG_FINISH_LENGTH || k->timed_out ? "length" : "stop";
    if (live && !ev->err && (ev->finish != ENG_FINISH_CANCELLED || k->timed_out)) {
        double t = now_s();
        gw_metric_observe(c->llm->e2e, t - k->t0);
        if (ev->completion_tokens > 1 && k->t_first)
            gw_metric_observe(c->llm->tpot, (t - k->t_first) / (ev->completion_tokens - 1));
    }
    if (c->cut) {
        batch_error(c, 503, SHUTDOWN_MSG, NULL);
    } else if (k->timed_out && !c->stream) {
        batch_error(c, 504, "The generation exceeded engine.request_timeout_ms.", "timeout");
    } else if (ev->err) {
        batch_error(c, ev->err == ENG_EINVAL || ev->err == ENG_EFULL ? 400 : 500,
                    ev->err == ENG_EFULL ? "The prompt does not fit in the engine's KV cache."
                                         : eng_strerror(ev->err), NULL);
    } else if (live && c->stream) {
        if (!k->started)
            send_chunk(k, NULL, 0, NULL);
        send_chunk(k, NULL, 0, k->finish);
    }
    /* only a complete answer is stored, as a request of its prompt alone stores it */
    if (c->req && k->store && !ev->err && !k->timed_out && ev->finish == ENG_FINISH_STOP) {
        gw_server *srv = gw_req_server(c->req);
        gw_cache_put(gw_server_cache(srv), k->tenant, &k->key, NULL,
                     gw_server_config(srv)->engine_model_name, k->text ? k->text : "", k->len,
                     ev->prompt_tokens, ev->completion_tokens, k->ctl.ttl_s);
    }
    free(ev);
    int rc = batch_submit(c);
    if (rc)
        batch_error(c, rc == ENG_EFULL ? 429 : 503,
                    rc == ENG_EFULL ? "The engine's queue is full; retry shortly."
                                    : "Out of memory; try again.",
                    rc == ENG_EFULL ? "rate_limit_exceeded" : NULL);
    if (--c->left == 0)
        batch_end(c);
}

/* A kid of c for its prompt i (kb: the request with that prompt alone), tokenized, or
 * answered from the exact cache. 0; else p says why the request is refused: KID_BAD, or
 * KID_LONG (too long for the engine's context), or KID_OOM. */
enum { KID_BAD = 1, KID_LONG, KID_OOM };
static int kid_make(struct chat_req *c, json_t *kb, int i, struct parsed *p)
{
    struct chat_req *k = calloc(1, sizeof *k);
    if (!k)
        return KID_OOM;
    c->kids[c->nkids++] = k;
    k->req = c->req;
    k->parent = c;
    k->chat = c->chat;
    k->index = i;
    memcpy(k->id, c->id, sizeof k->id);
    k->created = c->created;
    k->t0 = c->t0;
    k->tenant = c->tenant;
    k->ctl = c->ctl;
    k->job.ns = c->job.ns;
    k->job.party = c->job.party;
    if (parse_common(kb, gw_server_config(gw_req_server(c->req)), k, p))
        return KID_BAD; /* not met: the request's own parameters passed */
    gw_server *srv = gw_req_server(c->req);
    if (c->n > 1) { /* n answers of one prompt: each its own draw (a seed, plus its place),
                     * none from the caches, nor stored */
        k->job.params.sampling.seed += (uint64_t)(i % c->n);
        return (c->chat ? chat_prompt(srv, kb, k, p) : completion_prompt(srv, kb, k, p))
                   ? (p->code ? KID_LONG : p->param ? KID_BAD : KID_OOM)
                   : context_exceeded(c->llm, k, p) ? KID_LONG
                                                    : 0;
    }
    if (cache_key(k, kb))
        return KID_OOM;
    int refused;
    const struct store_hit *h = exact_hit(k, kb, p, &refused);
    if (refused)
        return KID_LONG;
    if (h) { /* the entry is the cache's until its next lookup: the answer is copied */
        k->done = 1;
        k->store = 0;
        k->finish = (h->finish_reason && !strcmp(h->finish_reason, "length")) ||
                            h->completion_tokens >= k->job.params.max_tokens
                        ? "length"
                        : "stop";
        k->got = (struct usage){k->job.n_prompt, h->completion_tokens, 0};
        k->hit_id = h->id;
        append_text(k, h->answer, h->answer_len);
        return h->answer_len && k->len != h->answer_len ? KID_OOM : 0;
    }
    if (completion_prompt(srv, kb, k, p))
        return p->code ? KID_LONG : p->param ? KID_BAD : KID_OOM;
    return context_exceeded(c->llm, k, p) ? KID_LONG : 0;
}

/* The kids of c for its prompts: 0, or -1 after refusing the request. */
static int batch_kids(struct chat_req *c, json_t *b, json_t *prompts)
{
    const size_t n = prompts ? json_array_size(prompts) : 1;
    struct parsed p = {0};
    char msg[sizeof p.msg + 32];
    if (!(c->kids = calloc(n * (size_t)c->n, sizeof *c->kids))) {
        chat_error(c, 503, "Out of memory; try again.", NULL, NULL);
        return -1;
    }
    for (size_t i = 0; i < n * (size_t)c->n; i++) {
        json_t *pr = json_array_get(prompts, i / (size_t)c->n);
        if (prompts && !json_is_string(pr) &&
            !(json_is_array(pr) && json_is_integer(json_array_get(pr, 0)))) {
            snprintf(msg, sizeof msg, "prompt[%zu] must be a non-empty string or an array of "
                     "token ids.", i / (size_t)c->n);
            chat_error(c, 400, msg, "prompt", NULL);
            return -1;
        }
        json_t *kb = json_copy(b);
        int rc = !kb || (prompts && json_object_set(kb, "prompt", pr))
                     ? KID_OOM
                     : kid_make(c, kb, (int)i, &p);
        json_decref(kb);
        if (rc == KID_OOM) {
            chat_error(c, 503, "Out of memory; try again.", NULL, NULL);
            return -1;
        }
        if (rc && !prompts) { /* the request's own prompt or messages */
            chat_error(c, 400, p.msg, param_of(c, p.param),
                       rc == KID_LONG ? "context_length_exceeded" : NULL);
            return -1;
        }
        if (rc) { /* "prompt[3] must be ..." of the prompt's ids is prompt[i][3] */
            if (!strncmp(p.msg, "prompt[", 7))
                snprintf(msg, sizeof msg, "prompt[%zu]%s", i / (size_t)c->n, p.msg + 6);
            else
                snprintf(msg, sizeof msg, "prompt[%zu]: %s", i / (size_t)c->n, p.msg);
            chat_error(c, 400, msg, p.param, rc == KID_LONG ? "context_length_exceeded" : NULL);
            return -1;
        }
    }
    return 0;
}

/* A completion of several prompts, or n answers of a chat or a completion, admitted as one
 * request (c; b is taken): one engine job (or exact cache hit, for n = 1) an answer, all
 * refused if one is. The reply has a choice an answer, in their order (a prompt's n
 * together); a stream interleaves the choices' chunks, the cache's answers first. With the
 * prefix cache on, the n answers of a prompt start from its blocks, computed once. */
static void batch_run(struct chat_req *c, json_t *b, json_t *prompts)
{
    struct gw_req *r = c->req;
    gw_server *srv = gw_req_server(r);
    const struct gw_config *cfg = gw_server_config(srv);
    c->llm = gw_server_llm(srv);
    int rc = batch_kids(c, b, prompts);
    json_decref(b);
    if (rc) {
        chat_req_free(c);
        return;
    }
    int misses = 0;
    int64_t tokens = 0;
    for (int i = 0; i < c->nkids; i++) {
        const struct chat_req *k = c->kids[i];
        misses += !k->done;
        /* a prompt's n answers count it once (batch_end()), as OpenAI's usage does */
        if (!k->done)
            tokens += (c->n <= 1 || i % c->n == 0 ? (int64_t)k->job.n_prompt : 0) +
                      k->job.params.max_tokens;
    }
    if (misses && c->ctl.only_if_cached) {
        reply_not_cached(c);
        chat_req_free(c);
        return;
    }
    if (misses && tenant_reserve(c, tokens)) {
        chat_req_free(c);
        return;
    }
    /* the tenant's concurrent requests: as many kids run at once as it has places free */
    c->left = misses;
    c->window = misses ? 1 + (c->held = gw_tenants_hold(c->tenants, c->tn, misses - 1)) : 0;
    if ((rc = batch_submit(c))) { /* refused whole: what was submitted is cancelled */
        if (rc == ENG_EFULL)
            gw_reply_retry_after(r, 1);
        chat_error(c, rc == ENG_EFULL ? 429 : 503,
                   rc == ENG_EFULL ? "The engine's queue is full; retry shortly."
                                   : "Out of memory; try again.",
                   NULL, rc == ENG_EFULL ? "rate_limit_exceeded" : NULL);
        c->req = NULL;
        c->refused = 1;
        c->use.busy = rc == ENG_EFULL;
        batch_cancel(c, 0);
        if (!c->left)
            batch_end(c);
        return;
    }
    if (c->left)
        defer_engine(c, batch_gone, batch_timeout, batch_cut);
    if (gw_server_cache(srv) && cfg->cache_enabled) {
        gw_reply_header(r, "X-Cache", misses ? "MISS" : "HIT");
        if (!misses)
            gw_reply_header(r, "X-Cache-Kind", "exact");
    }
    if (c->stream) {
        gw_reply_sse_start(r);
        c->started = 1; /* the parent's stream: its kids may send chunks */
        for (int i = 0; i < c->nkids; i++) {
            struct chat_req *k = c->kids[i];
            if (k->hit_id) {
                replay_chunks(k, k->text ? k->text : "", k->len, k->finish);
                kid_served(k);
            }
        }
    }
    if (!c->left)
        batch_end(c);
}

void gw_handle_chat_completions(struct gw_req *r)
{
    if (!strcmp(gw_req_method(r), "POST"))
        handle(r, 1, 0, 0);
    else /* GET: the stored ones */
        gw_handle_stored_chat_list(r);
}

void gw_handle_completions(struct gw_req *r)
{
    handle(r, 0, 0, 0);
}

void gw_handle_responses(struct gw_req *r)
{
    handle(r, 1, 1, 0);
}

void gw_handle_response_input_tokens(struct gw_req *r)
{
    handle(r, 1, 1, 1);
}

/* GET /v1/responses/{id}: the stored response; DELETE: it goes. Only the tenant's own. */
/* GET /v1/responses/{id}/input_items */
static void input_items(struct gw_req *r, struct gw_tenant *tn, const char *id)
{
    struct evkeyvalq q = {0};
    const char *qs = gw_req_query(r);
    if (qs && evhttp_parse_query_str(qs, &q)) {
        gw_reply_error(r, 400, "The query string does not parse.", NULL, NULL);
        return;
    }
    char *msgs = NULL, msg[300];
    int rc = gw_cache_response_get(gw_server_cache(gw_req_server(r)), tn->id, id, NULL, &msgs);
    json_t *convo = msgs ? json_loads(msgs, 0, NULL) : NULL;
    const char *param = NULL;
    if (rc == STORE_ENOTFOUND) {
        snprintf(msg, sizeof msg, "Response with id '%.200s' not found (or expired, or "
                 "created with \"store\": false).", id);
        gw_reply_error(r, 404, msg, NULL, "not_found");
    } else if (rc || !json_is_array(convo)) {
        gw_reply_error(r, 500, rc ? store_strerror(rc) : "The response's messages are damaged.",
                       NULL, NULL);
    } else {
        json_t *o = gw_response_input_items(id, convo, evhttp_find_header(&q, "order"),
                                            evhttp_find_header(&q, "limit"),
                                            evhttp_find_header(&q, "after"), &param, msg,
                                            sizeof msg);
        if (o)
            gw_reply_json(r, 200, o, 0);
        else
            gw_reply_error(r, 400, msg, param, NULL);
    }
    json_decref(convo);
    free(msgs);
    evhttp_clear_headers(&q);
}

void gw_handle_response_by_id(struct gw_req *r)
{
    gw_server *srv = gw_req_server(r);
    struct gw_tenant *tn = gw_tenants_auth(gw_server_tenants(srv), r);
    if (!tn)
        return;
    size_t idlen = 0;
    char *id = evhttp_uridecode(gw_req_path(r) + strlen("/v1/responses/"), 0, &idlen);
    if (!id) {
        gw_reply_error(r, 503, "Out of memory; try again.", NULL, NULL);
        return;
    }
    if (strlen(id) != idlen) { /* %00: no id holds a NUL, nor is one cut at it */
        gw_reply_error(r, 404, "No response has an id with a NUL byte (%00) in it.", NULL,
                       "not_found");
        free(id);
        return;
    }
    if (strncmp(id, "resp_", 5)) { /* a stored chat completion is no response */
        char msg[300];
        snprintf(msg, sizeof msg, "Response with id '%.200s' not found (a response's id begins "
                 "with resp_).", id);
        gw_reply_error(r, 404, msg, NULL, "not_found");
        free(id);
        return;
    }
    char *sub = strchr(id, '/');
    if (sub && !strcmp(sub, "/input_items") &&
        (!strcmp(gw_req_method(r), "GET") || !strcmp(gw_req_method(r), "HEAD"))) {
        *sub = 0;
        input_items(r, tn, id);
        free(id);
        return;
    }
    if (sub) { /* /cancel, ... */
        char msg[300];
        snprintf(msg, sizeof msg, "Unknown route: %s %.200s (of a response, only GET and "
                 "DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items are "
                 "served).", gw_req_method(r), gw_req_path(r));
        gw_reply_error(r, 404, msg, NULL, "not_found");
        free(id);
        return;
    }
    int del = !strcmp(gw_req_method(r), "DELETE");
    /* ?stream=true replays a background response's events, which this server does not run */
    struct evkeyvalq q = {0};
    const char *qs = gw_req_query(r), *stream = NULL;
    if (!del && qs && !evhttp_parse_query_str(qs, &q))
        stream = evhttp_find_header(&q, "stream");
    int streamed = stream && strcmp(stream, "false");
    evhttp_clear_headers(&q);
    if (streamed) {
        gw_reply_error(r, 400, "stream is not supported when retrieving a response (no "
                       "response runs in the background here); retrieve it without stream.",
                       "stream", NULL);
        free(id);
        return;
    }
    gw_cache *cache = gw_server_cache(srv);
    char *body = NULL;
    int rc = del ? gw_cache_response_delete(cache, tn->id, id)
                 : gw_cache_response_get(cache, tn->id, id, &body, NULL);
    if (rc == STORE_ENOTFOUND) {
        char msg[300];
        snprintf(msg, sizeof msg, "Response with id '%.200s' not found (or expired, or "
                 "created with \"store\": false).", id);
        gw_reply_error(r, 404, msg, NULL, "not_found");
    } else if (rc) {
        gw_reply_error(r, 500, store_strerror(rc), NULL, NULL);
    } else if (del) {
        json_t *o = json_object();
        json_object_set_new(o, "id", json_string(id));
        json_object_set_new(o, "object", json_string("response"));
        json_object_set_new(o, "deleted", json_true());
        gw_reply_json(r, 200, o, 0);
    } else {
        gw_reply_body(r, 200, "application/json", body, strlen(body));
    }
    free(body);
    free(id);
}
