/*
 * cache — keys, lookups and writes of the exact and semantic answer caches (cache.h).
 */
#include "cache.h"
#include "tenants.h"

#include "entry_id.h"
#include "grammar.h"
#include "guard.h"
#include "judge.h"
#include "judge_memo.h"
#include "log.h"
#include "oai.h"
#include "tools.h"
#include "tokenizer.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>
#include <xxhash.h>

/* A slot of the in-memory exact cache (event loop only); a hash has HOT_WAYS slots. */
#define HOT_WAYS 4
struct hot {
    int64_t tenant;
    uint64_t exact;
    size_t bytes; /* counted against cache.hot_bytes; 0: the slot is empty */
    uint64_t used; /* when last served, in lookups */
    uint64_t gen;  /* the tenant's store generation before the entry was read */
    struct store_hit hit;
};

#define RESP_GONE 1024

struct gw_cache {
    const struct gw_config *cfg;
    store *st;
    /* stored responses queued to the writer and not yet committed, by "tenant/id":
     * {"body", "messages", "seq", "deleted", "updated"}, which a read, a listing, a change
     * or a deletion meanwhile must see (the writer's callback takes them out once committed,
     * and then deletes the row, or writes the body it was changed to); seq: the order they
     * were put in */
    pthread_mutex_t resp_mu;
    json_t *resp_pending;
    json_int_t resp_seq;
    /* those deleted lately, "tenant/id" -> created_ms (the last RESP_GONE, their keys in
     * gone_ring from gone_next on): a listing's cursor, the last item of the page before,
     * may name one deleted since */
    json_t *resp_gone;
    char gone_ring[RESP_GONE][160];
    size_t gone_next;
    gw_embedw *embw;
    int dim;
    store_reader *loop_reader;   /* event loop: exact lookups */
    /* event loop: recently served exact entries, HOT_WAYS slots per hash (nhot: a power of two;
     * hot NULL: none); spare: the last entry read from the store that no slot kept */
    struct hot *hot;
    size_t nhot, hot_bytes, hot_used;
    uint64_t lookups;
    struct store_hit spare;
    struct store_hit *lent; /* what gw_cache_exact() last lent: spare or a slot's */
    store_reader *worker_reader; /* embedder worker thread: semantic searches */
    gw_metric *m_lookups, *m_similarity, *m_entries, *m_bytes, *m_saved, *m_evictions, *m_hot,
        *m_writes, *m_unmet, *m_coalesced, *m_judge_pairs, *m_judge_texts, *m_judge_kept;
    int keep_states; /* the embed worker keeps the judge's states of a lookup's question */
    gw_judge_memo *memo; /* embed worker: stored questions' tokens for their next hits */
    /* tenant id -> name, for metric labels; and eviction counts already reported (a tenant
     * that is gone loses its place); stats: the store's figures, read into this buffer */
    struct tenant_name {
        int64_t id, lru, expired;
        char name[64];
    } *names;
    int nnames, capnames;
    struct store_tenant_stats *stats;
    int capstats;
    int had_others; /* the last refresh reported tenants under "other" */
};

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ keys */

char *gw_cache_normalize(const char *text, size_t len, size_t *outlen)
{
    /* ASCII is its own NFC: only the white space changes */
    size_t i = 0;
    while (i < len && !((unsigned char)text[i] & 0x80))
        i++;
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n = -1;
    if (i < len)
        n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &nfc,
                         UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    char *src;
    if (n < 0) { /* ASCII, or not valid UTF-8 (keyed on the bytes as they are) */
        if (!(src = malloc(len + 1)))
            return NULL;
        memcpy(src, text, len);
        src[len] = 0;
        n = (utf8proc_ssize_t)len;
    } else {
        src = (char *)nfc;
    }
    /* collapse runs of ASCII white space to one space, trim both ends, in place; a run that
     * breaks a line and indents the next by two columns or more keeps the break and that
     * indentation (code, YAML, nested lists: how far a line is indented changes what it
     * says), and a run within a line that is not one space is kept as it is where it is
     * quoted ("how many spaces in 'a   b'", "x\ty".split('\t'): there the spaces are what
     * is asked about) */
    size_t w = 0;
    utf8proc_ssize_t run = -1; /* where the current run of white space began */
    /* the quotations open on this line: " and ` toggle; a ' opens after a character that
     * is not a letter or digit and closes before one ("the users' input 'a  b'": the
     * first is an apostrophe) */
    int dq = 0, bq = 0, sq = 0;
    unsigned char prev = ' ';
    for (utf8proc_ssize_t i = 0; i < n; i++) {
        char ch = src[i];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v') {
            if (run < 0)
                run = i;
            prev = (unsigned char)ch;
            continue;
        }
        if (run >= 0) {
            utf8proc_ssize_t k = i; /* the indentation: what follows the run's last break */
            while (k > run && src[k - 1] != '\n' && src[k - 1] != '\r')
                k--;
            if (k > run) /* a new line */
                dq = bq = sq = 0;
            if (w == 0) {
                /* leading white space goes */
            } else if (k > run && (i - k >= 2 || (i - k == 1 && src[k] == '\t'))) {
                src[w++] = '\n';
                memmove(src + w, src + k, (size_t)(i - k)); /* w <= k: moves left */
                w += (size_t)(i - k);
            } else if (k == run && (i - run > 1 || src[run] != ' ') && (dq || bq || sq)) {
                memmove(src + w, src + run, (size_t)(i - run)); /* w <= run */
                w += (size_t)(i - run);
            } else {
                src[w++] = ' ';
            }
        }
        if (ch == '"')
            dq ^= 1;
        else if (ch == '`')
            bq ^= 1;
        else if (ch == '\'' && (sq ? i + 1 == n || !gw_wordy((unsigned char)src[i + 1])
                                   : !gw_wordy(prev)))
            sq ^= 1;
        run = -1;
        prev = (unsigned char)ch;
        src[w++] = ch;
    }
    src[w] = 0;
    *outlen = w;
    return src;
}

/* A content part's text: a text part's, or a refusal part's (an assistant's answer that
 * declined, written back in its history); NULL for any other part. */
static json_t *part_text(json_t *part)
{
    const char *type = json_string_value(json_object_get(part, "type"));
    json_t *t = !type                       ? NULL
                : !strcmp(type, "text")     ? json_object_get(part, "text")
                : !strcmp(type, "refusal")  ? json_object_get(part, "refusal")
                                            : NULL;
    return json_is_string(t) ? t : NULL;
}

/* The calls of the assistant message a run of tool messages answers, as OpenAI pairs them:
 * each answered by a tool message right after it, each tool message answering one. */
#define MAX_CALLS_A_MESSAGE 128
struct open_calls {
    size_t at; /* the assistant message */
    size_t n;
    const char *id[MAX_CALLS_A_MESSAGE];
    unsigned char answered[MAX_CALLS_A_MESSAGE];
};

/* The first call of o that no tool message answered, or NULL. */
static const char *unanswered(const struct open_calls *o)
{
    for (size_t k = 0; k < o->n; k++)
        if (!o->answered[k])
            return o->id[k];
    return NULL;
}

/* Marks the call of o that tool_call_id to answers (the first not answered yet, calls
 * may share an id); 0 when none has that id. */
static int answer(struct open_calls *o, const char *to)
{
    int found = 0;
    for (size_t k = 0; k < o->n; k++)
        if (to && !strcmp(o->id[k], to)) {
            found = 1;
            if (!o->answered[k]) {
                o->answered[k] = 1;
                return 1;
            }
        }
    return found; /* (a result sent twice is taken) */
}

/* The error of a call o left unanswered: -1. */
static int left_unanswered(const struct open_calls *o, char *msg, size_t len, char *param,
                           size_t plen)
{
    snprintf(param, plen, "messages.[%zu].tool_calls", o->at);
    snprintf(msg, len, "messages[%zu]: an assistant message with tool_calls must be followed "
             "by tool messages answering each tool_call_id; %.64s has none.", o->at,
             unanswered(o));
    return -1;
}

int gw_messages_check(json_t *msgs, char *msg, size_t len, char *param, size_t plen)
{
    snprintf(param, plen, "messages");
    if (!json_is_array(msgs) || !json_array_size(msgs)) {
        snprintf(msg, len, "messages must be a non-empty array.");
        return -1;
    }
    size_t i, j;
    json_t *m, *part;
    struct open_calls open = {0}; /* the calls the tool messages that follow answer */
    int calls_open = 0;
    json_array_foreach(msgs, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (strcmp(role, "system") && strcmp(role, "user") &&
                      strcmp(role, "assistant") && strcmp(role, "developer") &&
                      strcmp(role, "tool"))) {
            snprintf(param, plen, "messages.[%zu].role", i);
            snprintf(msg, len, "messages[%zu].role must be system, developer, user, "
                     "assistant or tool.", i);
            return -1;
        }
        json_t *fc = json_object_get(m, "function_call");
        if (fc && !json_is_null(fc)) {
            snprintf(param, plen, "messages.[%zu].function_call", i);
            snprintf(msg, len, "messages[%zu].function_call (the deprecated form of "
                     "tool_calls) is not supported; use tool_calls.", i);
            return -1;
        }
        json_t *name = json_object_get(m, "name");
        if (name && !json_is_null(name) && !json_is_string(name)) {
            snprintf(param, plen, "messages.[%zu].name", i);
            snprintf(msg, len, "messages[%zu].name must be a string.", i);
            return -1;
        }
        if (!strcmp(role, "tool") &&
            !json_is_string(json_object_get(m, "tool_call_id"))) {
            snprintf(param, plen, "messages.[%zu].tool_call_id", i);
            snprintf(msg, len, "messages[%zu]: a tool message needs tool_call_id (a string).",
                     i);
            return -1;
        }
        json_t *tc = json_object_get(m, "tool_calls"), *call;
        if (tc && !json_is_null(tc) && (!json_is_array(tc) || strcmp(role, "assistant")) &&
            !(json_is_array(tc) && !json_array_size(tc))) {
            snprintf(param, plen, "messages.[%zu].tool_calls", i);
            snprintf(msg, len, "messages[%zu].tool_calls: only an assistant message has tool "
                     "calls, as an array.", i);
            return -1;
        }
        json_array_foreach(tc, j, call)
        {
            json_t *f = json_object_get(call, "function");
            const char *type = json_string_value(json_object_get(call, "type"));
            if (!json_is_string(json_object_get(call, "id")) || !type ||
                strcmp(type, "function") || !json_is_string(json_object_get(f, "name")) ||
                !json_is_string(json_object_get(f, "arguments"))) {
                snprintf(param, plen, "messages.[%zu].tool_calls.[%zu]", i, j);
                snprintf(msg, len, "messages[%zu].tool_calls[%zu] must be {\"id\": a string, "
                         "\"type\": \"function\", \"function\": {\"name\", \"arguments\": "
                         "strings}}.", i, j);
                return -1;
            }
        }
        /* as OpenAI holds them: each call answered by a tool message right after its
         * assistant message, and each tool message the answer to one of those calls */
        const int tool = !strcmp(role, "tool");
        if (!tool && calls_open && unanswered(&open))
            return left_unanswered(&open, msg, len, param, plen);
        if (tool && !(calls_open &&
                      answer(&open, json_string_value(json_object_get(m, "tool_call_id"))))) {
            snprintf(param, plen, "messages.[%zu].tool_call_id", i);
            snprintf(msg, len, "messages[%zu]: a tool message must answer a call of the "
                     "assistant message before it; tool_call_id %.64s is none of its "
                     "tool_calls' ids.", i,
                     json_string_value(json_object_get(m, "tool_call_id")));
            return -1;
        }
        if (!tool) {
            calls_open = json_array_size(tc) > 0;
            if (json_array_size(tc) > MAX_CALLS_A_MESSAGE) {
                snprintf(param, plen, "messages.[%zu].tool_calls", i);
                snprintf(msg, len, "messages[%zu]: at most %d tool_calls a message.", i,
                         MAX_CALLS_A_MESSAGE);
                return -1;
            }
            open.at = i;
            open.n = 0;
            json_array_foreach(tc, j, call)
            {
                open.id[open.n] = json_string_value(json_object_get(call, "id"));
                open.answered[open.n++] = 0;
            }
        }
        json_t *content = json_object_get(m, "content");
        if (json_is_string(content))
            continue;
        if (json_array_size(tc) && (!content || json_is_null(content)))
            continue; /* a call, with no text */
        if (!json_is_array(content) || !json_array_size(content)) {
            snprintf(param, plen, "messages.[%zu].content", i);
            snprintf(msg, len, "messages[%zu].content must be a string or a non-empty array "
                     "of text parts.", i);
            return -1;
        }
        json_array_foreach(content, j, part)
        {
            const char *type = json_string_value(json_object_get(part, "type"));
            if (type && !strcmp(type, "refusal") && strcmp(role, "assistant")) {
                snprintf(param, plen, "messages.[%zu].content.[%zu]", i, j);
                snprintf(msg, len, "messages[%zu].content[%zu]: only an assistant message has "
                         "refusal parts.", i, j);
                return -1;
            }
            if (!part_text(part)) {
                snprintf(param, plen, "messages.[%zu].content.[%zu]", i, j);
                snprintf(msg, len, "messages[%zu].content[%zu] must be a text part ({\"type\": "
                         "\"text\", \"text\": a string}, or an assistant's {\"type\": "
                         "\"refusal\", \"refusal\": a string}); images, audio and files are "
                         "not supported.", i, j);
                return -1;
            }
        }
    }
    if (calls_open && unanswered(&open))
        return left_unanswered(&open, msg, len, param, plen);
    return 0;
}

char *gw_message_text(json_t *content, size_t *len, long *bad)
{
    *bad = -1;
    if (json_is_string(content)) {
        /* copied whole: a JSON string may hold \u0000 */
        size_t n = json_string_length(content);
        char *t = malloc(n + 1);
        if (!t) {
            *bad = -2;
            return NULL;
        }
        memcpy(t, json_string_value(content), n);
        t[n] = 0;
        *len = n;
        return t;
    }
    if (!json_is_array(content))
        return NULL;
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(content, i, part)
    {
        json_t *t = part_text(part);
        if (!t) {
            *bad = (long)i;
            return NULL;
        }
        total += json_string_length(t) + (i > 0); /* a line break between parts */
    }
    char *out = malloc(total + 1), *w = out;
    if (!out) {
        *bad = -2;
        return NULL;
    }
    json_array_foreach(content, i, part)
    {
        json_t *t = part_text(part);
        if (i > 0) /* as vLLM joins them: "Summarize:" and "Part one." do not run together */
            *w++ = '\n';
        memcpy(w, json_string_value(t), json_string_length(t));
        w += json_string_length(t);
    }
    *w = 0;
    *len = total;
    return out;
}

char *gw_turn_text(json_t *msg, size_t *len, long *bad)
{
    char *t = gw_message_text(json_object_get(msg, "content"), len, bad);
    json_t *name = json_object_get(msg, "name");
    size_t nl = json_string_length(name);
    if (!t || !json_is_string(name) || !nl)
        return t;
    char *w = malloc(nl + 2 + *len + 1);
    if (!w) {
        free(t);
        *bad = -2;
        return NULL;
    }
    memcpy(w, json_string_value(name), nl);
    memcpy(w + nl, ": ", 2);
    memcpy(w + nl + 2, t, *len + 1);
    *len += nl + 2;
    free(t);
    return w;
}

/*
 * The partition hash is XXH3 of a canonical JSON text of the request: an object with its
 * keys sorted, compact, ASCII only, as json_dumps(JSON_COMPACT | JSON_SORT_KEYS |
 * JSON_ENSURE_ASCII) writes it, so that keys stored by earlier versions still match:
 *   context: [[role, text], ...] every message but the last (chat only; developer is
 *            written system), model, name (the last message's, where it has one: "bob:
 *            what is my name?" is no paraphrase of the question without it), ns (the
 *            tenant's namespace), route ("chat" or
 *            "completion-raw"), and the sampling parameters below that are present and not
 *            null. Top-level numbers are written as reals, so that 1 and 1.0 key alike; a
 *            number equal to its default, and a neutral value (oai_param_neutral()), key like
 *            absence; a stop string is written as a one-element array.
 * It is written straight into a buffer: building it as a json_t tree cost more than the
 * rest of a cache hit.
 */
enum canon_kind { C_CONTEXT, C_MODEL, C_NAME, C_NS, C_ROUTE, C_PARAM };

static const struct canon_key {
    const char *key; /* in strcmp order */
    enum canon_kind kind;
    double def; /* C_PARAM: the default a number keys like absence at; < 0: none */
} canon_keys[] = {
    {"context", C_CONTEXT, 0},         {"frequency_penalty", C_PARAM, 0},
    {"logit_bias", C_PARAM, -1},       {"min_p", C_PARAM, 0},
    {"model", C_MODEL, 0},             {"name", C_NAME, 0},
    {"ns", C_NS, 0},                   {"presence_penalty", C_PARAM, 0},
    {"response_format", C_PARAM, -1},  {"route", C_ROUTE, 0},
    {"seed", C_PARAM, -1},             {"stop", C_PARAM, -1},
    {"temperature", C_PARAM, 1},       {"tool_choice", C_PARAM, -1},
    {"tools", C_PARAM, -1},            {"top_k", C_PARAM, 0},
    {"top_p", C_PARAM, 1},
};

/* One parameter's value (not null). -1 when out of memory. */
static int canon_param(struct oai_buf *b, const char *key, json_t *v)
{
    if (json_is_number(v)) {
        /* 1 keys like 1.0; an integer a double cannot hold (a seed past 2^53) as it is */
        json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
        if (i > (1LL << 53) || i < -(1LL << 53))
            oai_buf_int(b, (long long)i);
        else
            oai_buf_real(b, json_number_value(v), 0);
        return 0;
    }
    int stop = json_is_string(v) && !strcmp(key, "stop");
    if (json_is_string(v)) {
        if (stop)
            oai_buf_put(b, "[", 1);
        oai_buf_str(b, json_string_value(v), json_string_length(v), 1);
        if (stop)
            oai_buf_put(b, "]", 1);
        return 0;
    }
    char *d = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII |
                                JSON_ENCODE_ANY);
    if (!d)
        return -1;
    oai_buf_puts(b, d);
    free(d);
    return 0;
}

/* The context: [[role, text], ...]. 1 when a message has no role or no text content. */
static int canon_context(struct oai_buf *b, json_t *msgs, size_t n)
{
    oai_buf_put(b, "[", 1);
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *r = json_string_value(json_object_get(m, "role"));
        size_t len;
        long bad;
        char *t = gw_turn_text(m, &len, &bad);
        if (!r || !t) {
            free(t);
            return !t && bad == -2 ? -1 : 1;
        }
        const char *role = strcmp(r, "developer") ? r : "system";
        oai_buf_put(b, i ? ",[" : "[", i ? 2 : 1);
        oai_buf_str(b, role, strlen(role), 1);
        oai_buf_put(b, ",", 1);
        oai_buf_str(b, t, len, 1);
        oai_buf_put(b, "]", 1);
        free(t);
    }
    oai_buf_put(b, "]", 1);
    return 0;
}

int gw_cache_key_make(json_t *b, int chat, int64_t ns, struct gw_cache_key *out)
{
    memset(out, 0, sizeof *out);
    char stack[1024];
    struct oai_buf canon;
    oai_buf_init(&canon, stack, sizeof stack);
    char *query = NULL;
    size_t qlen = 0;
    int rc = 1;
    json_t *msgs = NULL, *qname = NULL;
    size_t n = 0;
    if (chat) {
        msgs = json_object_get(b, "messages");
        n = json_array_size(msgs);
        json_t *last = n ? json_array_get(msgs, n - 1) : NULL;
        const char *role = json_string_value(json_object_get(last, "role"));
        long bad;
        if (!role || strcmp(role, "user"))
            goto out;
        qname = json_object_get(last, "name");
        if (!json_is_string(qname) || !json_string_length(qname))
            qname = NULL;
        if (!(query = gw_turn_text(last, &qlen, &bad))) {
            if (bad == -2)
                goto oom;
            goto out;
        }
    } else {
        json_t *p = json_object_get(b, "prompt");
        if (json_is_array(p) && json_array_size(p) == 1)
            p = json_array_get(p, 0);
        if (!json_is_string(p) || !json_string_length(p)) /* "" is refused, not answered */
            goto out;
        qlen = json_string_length(p);
        if (!(query = malloc(qlen + 1)))
            goto oom;
        memcpy(query, json_string_value(p), qlen);
        query[qlen] = 0;
    }
    int first = 1;
    oai_buf_put(&canon, "{", 1);
    for (size_t i = 0; i < sizeof canon_keys / sizeof *canon_keys; i++) {
        const struct canon_key *ck = &canon_keys[i];
        json_t *v = NULL;
        if ((ck->kind == C_CONTEXT && !chat) || (ck->kind == C_NAME && !qname))
            continue;
        if (ck->kind == C_PARAM) {
            v = json_object_get(b, ck->key);
            if (!v || json_is_null(v))
                continue;
            if (json_is_number(v) && ck->def >= 0 && json_number_value(v) == ck->def)
                continue;
            if (oai_param_neutral(ck->key, v))
                continue;
        }
        oai_buf_put(&canon, first ? "\"" : ",\"", first ? 1 : 2);
        oai_buf_puts(&canon, ck->key);
        oai_buf_put(&canon, "\":", 2);
        first = 0;
        int prc = 0;
        switch (ck->kind) {
        case C_CONTEXT: prc = canon_context(&canon, msgs, n); break;
        case C_MODEL: {
            json_t *model = json_object_get(b, "model");
            const char *m = json_is_string(model) ? json_string_value(model) : "";
            oai_buf_str(&canon, m, strlen(m), 1);
            break;
        }
        case C_NAME:
            oai_buf_str(&canon, json_string_value(qname), json_string_length(qname), 1);
            break;
        case C_NS: oai_buf_int(&canon, ns); break;
        /* "completion-raw": completions keyed their prompt normalized once, and those
         * entries must not answer the prompts they were normalized to */
        case C_ROUTE: oai_buf_puts(&canon, chat ? "\"chat\"" : "\"completion-raw\""); break;
        case C_PARAM: prc = canon_param(&canon, ck->key, v); break;
        }
        if (prc < 0)
            goto oom;
        if (prc > 0)
            goto out;
    }
    oai_buf_put(&canon, "}", 1);
    if (canon.oom)
        goto oom;
    out->partition = XXH3_64bits(canon.p, canon.len);
    if (chat) { /* a question: its wording's white space and composition do not matter */
        size_t nlen;
        char *norm = gw_cache_normalize(query, qlen, &nlen);
        if (!norm)
            goto oom;
        out->exact = XXH3_64bits_withSeed(norm, nlen, out->partition);
        free(norm);
    } else { /* a prompt to continue: every byte does */
        out->exact = XXH3_64bits_withSeed(query, qlen, out->partition);
    }
    out->query = query;
    out->query_len = qlen;
    out->searchable = chat;
    oai_buf_deinit(&canon);
    return 0;
oom:
    rc = -1;
out:
    free(query);
    oai_buf_deinit(&canon);
    return rc;
}

void gw_cache_key_deinit(struct gw_cache_key *k)
{
    if (k) {
        free(k->query);
        k->query = NULL;
    }
}

/* ------------------------------------------------------------------ lifecycle */

gw_cache *gw_cache_create(const struct gw_config *cfg, store *st, gw_embedw *embw, int dim,
                          gw_metrics *m, char *err, size_t errlen)
{
    gw_cache *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->cfg = cfg;
    c->st = st;
    c->embw = embw;
    pthread_mutex_init(&c->resp_mu, NULL);
    c->resp_pending = json_object();
    c->resp_gone = json_object();
    c->dim = dim;
    int rc = store_reader_open(st, &c->loop_reader);
    if (!rc)
        rc = store_reader_open(st, &c->worker_reader);
    if (!rc && cfg->cache_hot_entries > 0) {
        size_t n = HOT_WAYS;
        while (n < (size_t)cfg->cache_hot_entries)
            n *= 2;
        c->hot = calloc(n, sizeof *c->hot);
        c->nhot = n;
        rc = c->hot ? 0 : STORE_ENOMEM;
    }
    if (rc) {
        snprintf(err, errlen, "opening the cache's readers: %s", store_strerror(rc));
        gw_cache_destroy(c);
        return NULL;
    }
    static const double sim_bounds[] = {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0};
    c->m_lookups = gw_metrics_counter(m, "cachegate_cache_lookups_total",
                                      "Cache lookups by kind (exact, semantic) and result.",
                                      "kind,result");
    c->m_similarity = gw_metrics_histogram(
        m, "cachegate_cache_similarity",
        "Cosine similarity of the nearest same-partition candidate of semantic lookups.", NULL,
        sim_bounds, (int)(sizeof sim_bounds / sizeof *sim_bounds));
    static const double pair_bounds[] = {1, 2, 4, 8, 16};
    c->m_judge_pairs = gw_metrics_histogram(
        m, "cachegate_cache_judge_pairs",
        "Candidate pairs the judge embedded per forward pass (the lookups done after one "
        "embedder pass are weighed together).",
        NULL, pair_bounds, (int)(sizeof pair_bounds / sizeof *pair_bounds));
    c->m_judge_texts = gw_metrics_counter(
        m, "cachegate_cache_judge_texts_total",
        "Texts the judge embedded: the stored questions it weighed, and the new ones whose "
        "own embedder pass did not keep their states.",
        NULL);
    /* the judge reads a new question's states from the pass that embeds it for the search,
     * when that pass is small enough (a pass of short questions is; a large import's is
     * not, and the judge then embeds the question again) */
    enum { KEEP_TOKENS = 4096 };
    int layers[GW_JUDGE_LAYERS];
    if (embw && cfg->cache_guard && cfg->cache_judge_threshold > 0) {
        gw_judge_layers(gw_embedw_model(embw), layers);
        c->keep_states = !gw_embedw_keep_states(embw, GW_JUDGE_LAYERS, layers, KEEP_TOKENS);
        if (cfg->cache_judge_bytes > 0 &&
            !(c->memo = gw_judge_memo_create((size_t)cfg->cache_judge_bytes))) {
            snprintf(err, errlen, "out of memory");
            gw_cache_destroy(c);
            return NULL;
        }
    }
    c->m_judge_kept = gw_metrics_gauge(
        m, "cachegate_cache_judge_kept_bytes",
        "Bytes of stored questions' tokens the judge keeps for their next hits "
        "(cache.judge_bytes at most).",
        NULL);
    c->m_entries = gw_metrics_gauge(m, "cachegate_cache_entries", "Cached answers per tenant.",
                                    "tenant");
    c->m_bytes = gw_metrics_gauge(m, "cachegate_cache_bytes",
                                  "Bytes of cached answers, queries and embeddings per tenant.",
                                  "tenant");
    c->m_hot = gw_metrics_gauge(m, "cachegate_cache_hot_entries",
                                "Exact entries held in memory by the event loop (all tenants).",
                                NULL);
    c->m_saved = gw_metrics_counter(m, "cachegate_cache_tokens_saved_total",
                                    "Completion tokens served from the cache instead of the "
                                    "engine (kind: exact, semantic, or coalesced: from the "
                                    "same request's generation in flight).",
                                    "kind");
    c->m_coalesced = gw_metrics_counter(m, "cachegate_cache_coalesced_total",
                                        "Requests answered by the same request's generation "
                                        "in flight instead of running again.",
                                        NULL);
    c->m_evictions = gw_metrics_counter(m, "cachegate_cache_evictions_total",
                                        "Entries removed: lru (over capacity) or expired.",
                                        "reason");
    c->m_writes = gw_metrics_counter(m, "cachegate_cache_writes_total",
                                     "Answers written to the cache, by result (ok, error, "
                                     "dropped: its tenant was deleted first).",
                                     "result");
    c->m_unmet = gw_metrics_counter(m, "cachegate_cache_only_if_cached_misses_total",
                                    "Requests with Cache-Control: only-if-cached that no cached "
                                    "answer met (answered 504).",
                                    NULL);
    /* every result's series from the start: a rate or an alert on errors sees the first */
    static const char *const results[] = {"ok", "error", "dropped"};
    for (size_t i = 0; c->m_writes && i < sizeof results / sizeof *results; i++)
        gw_metric_add(c->m_writes, 0, results[i]);
    return c;
}

void gw_cache_destroy(gw_cache *c)
{
    if (!c)
        return;
    store_reader_close(c->loop_reader);
    store_reader_close(c->worker_reader);
    gw_judge_memo_destroy(c->memo);
    for (size_t i = 0; c->hot && i < c->nhot; i++)
        store_hit_deinit(&c->hot[i].hit);
    free(c->hot);
    store_hit_deinit(&c->spare);
    json_decref(c->resp_pending);
    json_decref(c->resp_gone);
    pthread_mutex_destroy(&c->resp_mu);
    free(c->names);
    free(c->stats);
    free(c);
}

store *gw_cache_store(gw_cache *c)
{
    return c->st;
}

/* ------------------------------------------------------------------ lookups */

static void hot_drop(gw_cache *c, struct hot *h)
{
    store_hit_deinit(&h->hit);
    c->hot_bytes -= h->bytes;
    c->hot_used--;
    memset(h, 0, sizeof *h);
}

static size_t hit_bytes(const struct store_hit *h)
{
    return sizeof *h + strlen(h->model) + strlen(h->finish_reason) + h->query_len +
           h->answer_len + 4;
}

/* The slot holding (tenant, exact) (*found set), else the one of its HOT_WAYS to fill
 * (empty, or the least recently served); NULL without an in-memory cache. */
static struct hot *hot_slot(gw_cache *c, int64_t tenant, uint64_t exact, int *found)
{
    *found = 0;
    if (!c->hot)
        return NULL;
    uint64_t h = exact ^ ((uint64_t)tenant * 0x9E3779B97F4A7C15ull);
    struct hot *set = &c->hot[(h ^ h >> 29) & (c->nhot - HOT_WAYS)], *fill = set;
    for (int i = 0; i < HOT_WAYS; i++) {
        if (set[i].bytes && set[i].tenant == tenant && set[i].exact == exact) {
            *found = 1;
            return &set[i];
        }
        if (fill->bytes && (!set[i].bytes || set[i].used < fill->used))
            fill = &set[i];
    }
    return fill;
}

json_t *gw_cache_entry_json(const store *st, const struct store_hit *h)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(gw_entry_id_show(st, h->id)));
    json_object_set_new(o, "model", json_string(h->model));
    json_object_set_new(o, "question", json_stringn(h->query, h->query_len));
    json_object_set_new(o, "answer", json_stringn(h->answer, h->answer_len));
    json_object_set_new(o, "finish_reason", json_string(h->finish_reason));
    json_object_set_new(o, "prompt_tokens", json_integer(h->prompt_tokens));
    json_object_set_new(o, "completion_tokens", json_integer(h->completion_tokens));
    json_object_set_new(o, "created_ms", json_integer(h->created_ms));
    json_object_set_new(o, "last_hit_ms", json_integer(h->last_hit_ms));
    json_object_set_new(o, "hits", json_integer(h->hit_count));
    json_object_set_new(o, "expires_ms", h->expires_ms ? json_integer(h->expires_ms) : json_null());
    return o;
}

int gw_cache_exact(gw_cache *c, int64_t tenant, const struct gw_cache_key *k, int max_tokens,
                   const struct store_hit **out)
{
    int64_t now = now_ms();
    store_hit_deinit(&c->spare);
    c->lent = NULL;
    /* the generation is read before the store is: a removal committed after this read
     * changes it, and a later lookup drops what this one keeps */
    int found;
    struct hot *slot = hot_slot(c, tenant, k->exact, &found);
    uint64_t gen = slot ? store_generation(c->st, tenant) : 0;
    struct store_hit *h = NULL;
    c->lookups++;
    if (found) {
        if (slot->gen != gen || (slot->hit.expires_ms && slot->hit.expires_ms <= now)) {
            hot_drop(c, slot);
        } else {
            h = &slot->hit;
            slot->used = c->lookups;
        }
    }
    if (!h) {
        struct store_hit e;
        int rc = store_get_exact(c->loop_reader, tenant, k->exact, now, &e);
        if (rc == STORE_OK) {
            size_t bytes = hit_bytes(&e);
            if (slot && c->hot_bytes - slot->bytes + bytes <= (size_t)c->cfg->cache_hot_bytes) {
                if (slot->bytes)
                    hot_drop(c, slot);
                *slot = (struct hot){tenant, k->exact, bytes, c->lookups, gen, e};
                c->hot_bytes += bytes;
                c->hot_used++;
                h = &slot->hit;
            } else {
                c->spare = e;
                h = &c->spare;
            }
        } else if (rc != STORE_ENOTFOUND) {
            gw_log_kv(GW_LOG_WARN, "exact cache lookup failed", "error", store_strerror(rc),
                      NULL);
        }
    }
    int hit = h && h->completion_tokens <= max_tokens;
    gw_metric_add(c->m_lookups, 1, "exact", hit ? "hit" : "miss");
    *out = hit ? h : NULL;
    c->lent = hit ? h : NULL;
    return hit;
}

void gw_cache_exact_prompt_tokens(gw_cache *c, int prompt_tokens)
{
    if (!c->lent)
        return;
    c->lent->prompt_tokens = prompt_tokens;
    store_set_prompt_tokens(c->st, c->lent->id, prompt_tokens);
}

/* The embedding of the query's differing sentences, kept across the candidates of one
 * search (they usually differ from it in the same place). */
struct span_vec {
    char *text; /* the sentences it is of (malloc'd) */
    size_t len;
    float *v; /* [dim]; NULL: none yet */
};

/* Whether a and b ask the same question first and then say other things, statements
 * only ("Where is the meeting? It is on the roof this week." vs "... in the main hall
 * ..."): facts given after the question change its answer as those before it do. Not
 * when one only adds to the other ("Thanks."), which the guard reads. */
static int facts_after(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t p = 0;
    while (p < alen && p < blen && a[p] == b[p])
        p++;
    size_t q = p;
    while (q > 0 && a[q - 1] != '?')
        q--;
    if (!q || memchr(a + q, '?', alen - q) || memchr(b + q, '?', blen - q))
        return 0;
    for (int side = 0; side < 2; side++) { /* both go on with words of their own */
        const char *t = side ? b : a;
        size_t n = side ? blen : alen, i = q;
        while (i < n && !isalnum((unsigned char)t[i]))
            i++;
        if (i == n)
            return 0;
    }
    /* which differ by more than white space (code indented otherwise: the code rule's) */
    size_t i = q, j = q;
    for (;;) {
        while (i < alen && isspace((unsigned char)a[i]))
            i++;
        while (j < blen && isspace((unsigned char)b[j]))
            j++;
        if (i == alen || j == blen)
            return i != alen || j != blen;
        if (a[i++] != b[j++])
            return 1;
    }
}

/* A similarity under the threshold as a miss reason writes it, 3 decimals cut rather than
 * rounded: 0.8296 below 0.83 reads 0.829, not 0.830 below 0.830. */
static double below(double sim)
{
    return floor(sim * 1000) / 1000;
}

/* Worker thread: same_question() for texts that share sentences around core: its
 * sentences that differ are compared alone. */
static int core_question(gw_cache *c, struct gw_cache_sem *s, struct store_hit *h,
                         struct span_vec *qv, const struct gw_core *core, const char *a,
                         size_t alen, const char *b, size_t blen, char *why, size_t whylen)
{
    const int guard = c->cfg->cache_guard;
    const double strict = c->cfg->cache_guard_strict_below;
    char g[80];
    /* the same question after other context: its answer may be another */
    const char *tail = b + core->boff + core->blen;
    if (memchr(tail, '?', blen - core->boff - core->blen) || core->asked_after) {
        snprintf(why, whylen, "the context differs before the same question");
        return 0;
    }

    /* the cheap checks first: the code rule on the wholes, the guard on the sentences */
    if (guard && (!gw_guard_code_compatible(a, alen, b, blen, g, sizeof g) ||
                  !gw_guard_compatible(core->a, core->an, core->b, core->bn, g, sizeof g))) {
        snprintf(why, whylen, "guard: %s", g);
        return 0;
    }
    const size_t dim = (size_t)c->dim;
    int fresh = !qv->v || qv->len != core->bn || memcmp(qv->text, core->b, core->bn);
    if (!qv->v && !(qv->v = malloc(sizeof(float) * dim)))
        return 0;
    float *v = malloc(sizeof(float) * 2 * dim);
    char *copy = fresh ? malloc(core->bn + 1) : NULL;
    const char *texts[2] = {core->a, core->b};
    size_t lens[2] = {core->an, core->bn};
    static const unsigned char ends[2] = {1, 1}; /* as questions are stored and searched */
    int rc = v && (copy || !fresh) ? emb_encode_ends(gw_embedw_model(c->embw), texts, lens, ends,
                                                     fresh ? 2 : 1, v, NULL, NULL)
                                   : -1;
    if (!rc && fresh) {
        memcpy(qv->v, v + dim, sizeof(float) * dim);
        memcpy(copy, core->b, core->bn);
        free(qv->text);
        qv->text = copy;
        qv->len = core->bn;
        copy = NULL;
    }
    free(copy);
    double sim = 0;
    for (size_t i = 0; !rc && i < dim; i++)
        sim += (double)v[i] * qv->v[i];
    free(v);
    if (rc || sim < s->threshold) {
        snprintf(why, whylen, rc ? "the differing sentences could not be embedded"
                                 : "the differing sentences: similarity %.3f below %.3f",
                 below(sim), s->threshold);
        return 0;
    }
    if (guard && sim < strict &&
        !gw_guard_close_call(core->a, core->an, core->b, core->bn, g, sizeof g)) {
        snprintf(why, whylen, "guard: %s", g);
        return 0;
    }
    h->similarity = (float)sim; /* what the threshold was held to, as a hit reports it */
    return 1;
}

/* Worker thread: one semantic lookup's candidates, from the search to the verdict. Lookups
 * done after the same embedder pass are weighed together, so that the judge embeds every
 * lookup's first (stored, new) pair in one forward pass (sem_search()). */
enum { MAX_CANDIDATES = 64 };
struct sem_run {
    struct gw_cache_sem *s;
    struct store_hit hits[MAX_CANDIDATES]; /* nearest first */
    int n, i;                              /* candidates; the next to weigh */
    struct span_vec qv;
    struct gw_judge_text qj;  /* the new question's tokens, once made */
    struct gw_judge_text pre; /* candidate i's, made beforehand with qj (or empty) */
    int defer;                /* stop at a candidate the judge must weigh, unless pre is made */
    int waiting;              /* stopped at candidate i for the judge */
};

/* Worker thread: keeps the tokens t of tenant's stored question q[0..len) for its next
 * hits (or of a question that missed, for the first hits of the entry its answer makes). */
static void memo_put(gw_cache *c, int64_t tenant, const char *q, size_t len,
                     const struct gw_judge_text *t)
{
    if (!c->memo)
        return;
    gw_judge_memo_put(c->memo, tenant, q, len, t);
    gw_metric_set(c->m_judge_kept, (double)gw_judge_memo_bytes(c->memo));
}

/* Worker thread: the judge's opinion (judge.h) on candidate h, which the guard passed; 0
 * with why when it refuses. The two texts' tokens are r->pre and r->qj when made; else the
 * lookup waits (r->defer) or makes them here, the new question's (when its own pass did not
 * keep them) in the same forward pass as the first candidate's. */
static int judged(gw_cache *c, struct sem_run *r, const struct store_hit *h, char *why,
                  size_t whylen)
{
    const struct gw_cache_sem *s = r->s;
    const double min = c->cfg->cache_judge_threshold;
    if (!c->cfg->cache_guard || min <= 0)
        return 1;
    if (!r->pre.n && c->memo)
        gw_judge_memo_get(c->memo, s->tenant, h->query, h->query_len, &r->pre);
    if (!r->pre.n && r->defer) {
        r->waiting = 1;
        return 0;
    }
    if (!r->pre.n || !r->qj.n) {
        emb_model *m = gw_embedw_model(c->embw);
        const char *texts[2];
        size_t lens[2];
        int nt = 0;
        if (!r->pre.n) {
            texts[nt] = h->query;
            lens[nt++] = h->query_len;
        }
        if (!r->qj.n) {
            texts[nt] = s->key->query;
            lens[nt++] = s->key->query_len;
        }
        struct gw_judge_text two[2];
        if (gw_judge_texts(m, texts, lens, nt, two)) {
            snprintf(why, whylen, "the judge could not embed the two questions");
            return 0;
        }
        gw_metric_observe(c->m_judge_pairs, 1);
        gw_metric_add(c->m_judge_texts, nt);
        int t = 0;
        if (!r->pre.n) {
            r->pre = two[t++];
            memo_put(c, s->tenant, h->query, h->query_len, &r->pre);
        }
        if (!r->qj.n)
            r->qj = two[t];
    }
    float f[GW_JUDGE_FEATURES];
    gw_judge_features(&r->pre, &r->qj, h->similarity, f);
    gw_judge_text_free(&r->pre);
    double p = gw_judge_score(f);
    if (p < min) {
        snprintf(why, whylen, "judge: the same question at %.3f, under %.3f", below(p), min);
        return 0;
    }
    return 1;
}

/*
 * Worker thread: whether candidate h asks what s asks, beyond their similarity as wholes
 * (which reached the threshold). When the two share whole sentences around their
 * difference (a template: the same retrieved context around another question), the
 * sentences that differ are embedded and compared alone, and the guard reads them alone:
 * the shared context would otherwise make any two questions over it look alike. 0 with
 * why when not. checked: the guard and the close call have passed the two (same_words()).
 */
static int same_question(gw_cache *c, struct sem_run *r, struct store_hit *h, int checked,
                         char *why, size_t whylen)
{
    struct gw_cache_sem *s = r->s;
    const char *a = h->query, *b = s->key->query;
    size_t alen = h->query_len, blen = s->key->query_len;
    const int guard = c->cfg->cache_guard;
    const double strict = c->cfg->cache_guard_strict_below;
    char g[80];
    struct gw_core core;
    if (facts_after(a, alen, b, blen)) {
        snprintf(why, whylen, "the context differs after the same question");
        return 0;
    }
    if (!gw_guard_core(a, alen, b, blen, &core)) {
        if (guard && !checked && (!gw_guard_compatible(a, alen, b, blen, g, sizeof g) ||
                      (h->similarity < strict &&
                       !gw_guard_close_call(a, alen, b, blen, g, sizeof g)))) {
            snprintf(why, whylen, "guard: %s", g);
            return 0;
        }
        return judged(c, r, h, why, whylen);
    }
    int ok = core_question(c, s, h, &r->qv, &core, a, alen, b, blen, why, whylen);
    gw_guard_core_free(&core);
    return ok;
}

/* Worker thread: whether candidate h, under the threshold, is still the same question in
 * other words: above cache.same_words_floor, a question that says the same content words
 * (a slip, an abbreviation, a synonym the embedding underrates: "kill a process" vs
 * "terminate a proccess", 0.72). Not where the threshold asked for is stricter than a close
 * call (X-Cache-Threshold: 0.95 wants near copies), nor for a template (its question is
 * compared alone, by its own similarity), nor with the guard off. */
static int same_words(gw_cache *c, const struct gw_cache_sem *s, const struct store_hit *h)
{
    const struct gw_config *cfg = c->cfg;
    struct gw_core core;
    if (!cfg->cache_guard || !cfg->cache_same_words_floor ||
        h->similarity < cfg->cache_same_words_floor || s->threshold > cfg->cache_guard_strict_below)
        return 0;
    const char *a = h->query, *b = s->key->query;
    size_t alen = h->query_len, blen = s->key->query_len;
    if (gw_guard_core(a, alen, b, blen, &core)) {
        gw_guard_core_free(&core);
        return 0;
    }
    return gw_guard_same_words(a, alen, b, blen);
}

/* Worker thread: search the tenant's index for r's lookup, its candidates into r. */
static void sem_find(gw_cache *c, struct sem_run *r)
{
    struct gw_cache_sem *s = r->s;
    struct store_hit *hits = r->hits;
    int k = (int)c->cfg->cache_candidates, n = 0;
    s->rc = store_search(c->worker_reader, s->tenant, s->vec, k, now_ms(), hits, &n);
    /* the nearest k all reach the threshold and none is of this partition: the same
     * question stored under other system prompts can crowd out this one's; look further */
    while (!s->rc && n == k && k < MAX_CANDIDATES && hits[n - 1].similarity >= s->threshold) {
        int mine = 0;
        for (int i = 0; i < n && !mine; i++)
            mine = hits[i].partition == s->key->partition;
        if (mine)
            break;
        for (int i = 0; i < n; i++)
            store_hit_deinit(&hits[i]);
        k = k * 4 < MAX_CANDIDATES ? k * 4 : MAX_CANDIDATES;
        n = 0;
        s->rc = store_search(c->worker_reader, s->tenant, s->vec, k, now_ms(), hits, &n);
    }
    r->n = n;
}

/* Worker thread: weighs r's candidates from r->i on and serves the first acceptable one;
 * returns early, at candidate r->i, when it waits for the judge (r->defer). */
static void sem_weigh(gw_cache *c, struct sem_run *r)
{
    struct gw_cache_sem *s = r->s;
    for (; r->i < r->n && !s->hit; r->i++) {
        struct store_hit *h = &r->hits[r->i];
        if (h->partition != s->key->partition)
            continue;
        if (s->best < 0)
            s->best = h->similarity;
        /* a miss says why the nearest was not served (the candidates come nearest first) */
        char why[sizeof s->why] = "";
        int lexical = 0; /* under the threshold, in the same words: the guard has passed it */
        if (h->similarity < s->threshold && !(lexical = same_words(c, s, h)))
            snprintf(why, sizeof why, "similarity %.3f below %.3f", below(h->similarity),
                     s->threshold);
        else if (h->completion_tokens > s->max_tokens)
            snprintf(why, sizeof why, "the stored answer exceeds max_tokens");
        else if (!same_question(c, r, h, lexical, why, sizeof why) && !why[0]) {
            if (r->waiting)
                return; /* this candidate is weighed again once the judge has its tokens */
            snprintf(why, sizeof why, "out of memory");
        }
        if (why[0]) {
            if (!s->why[0])
                memcpy(s->why, why, sizeof why);
            continue;
        }
        s->entry = *h;
        memset(h, 0, sizeof *h);
        s->hit = 1;
    }
}

/* Worker thread: text's place among texts[0..nt), adding it there when it is not yet one */
static int text_slot(const char **texts, size_t *lens, int *nt, const char *text, size_t len)
{
    for (int t = 0; t < *nt; t++)
        if (lens[t] == len && !memcmp(texts[t], text, len))
            return t;
    texts[*nt] = text;
    lens[*nt] = len;
    return (*nt)++;
}

/* Worker thread: out takes made[t], which every text of a pass has at least one taker for
 * (taken[t]: the first moves it, the others copy; when a copy fails, its lookup makes its
 * own later). */
static void take_text(struct gw_judge_text *made, int *taken, int t, struct gw_judge_text *out)
{
    if (!taken[t]) {
        *out = made[t];
        taken[t] = 1;
    } else if (gw_judge_text_copy(&made[t], out))
        memset(out, 0, sizeof *out);
}

/* Worker thread: the tokens of the waiting lookups' candidates (and of their new questions
 * where the lookup's own pass did not keep them), up to JUDGE_BATCH lookups' in one forward
 * pass: a pass of a few short texts costs about what a pass of one does. A text several
 * lookups wait on (a popular question asked in other words by several callers at once) is
 * embedded once. When a pass fails, its lookups make their own. */
static void sem_judge_waiting(gw_cache *c, struct sem_run *runs, int n)
{
    enum { JUDGE_BATCH = 16 };
    emb_model *m = gw_embedw_model(c->embw);
    for (int k = 0; k < n;) {
        struct sem_run *of[JUDGE_BATCH];
        int pre_at[JUDGE_BATCH], q_at[JUDGE_BATCH]; /* each lookup's texts' places (-1) */
        const char *texts[2 * JUDGE_BATCH];
        size_t lens[2 * JUDGE_BATCH];
        int np = 0, nt = 0;
        for (; k < n && np < JUDGE_BATCH; k++) {
            struct sem_run *r = &runs[k];
            if (!r->waiting)
                continue;
            const struct store_hit *h = &r->hits[r->i];
            pre_at[np] = text_slot(texts, lens, &nt, h->query, h->query_len);
            q_at[np] = r->qj.n ? -1
                               : text_slot(texts, lens, &nt, r->s->key->query,
                                           r->s->key->query_len);
            of[np++] = r;
        }
        struct gw_judge_text made[2 * JUDGE_BATCH];
        int taken[2 * JUDGE_BATCH] = {0};
        if (!np || gw_judge_texts(m, texts, lens, nt, made))
            continue;
        gw_metric_observe(c->m_judge_pairs, np);
        gw_metric_add(c->m_judge_texts, nt);
        for (int i = 0; i < np; i++) {
            const struct store_hit *h = &of[i]->hits[of[i]->i];
            const int64_t tenant = of[i]->s->tenant;
            int again = 0; /* the same key, kept for an earlier lookup of the pass */
            for (int j = 0; j < i && !again; j++)
                again = pre_at[j] == pre_at[i] && of[j]->s->tenant == tenant;
            if (!again)
                memo_put(c, tenant, h->query, h->query_len, &made[pre_at[i]]);
            take_text(made, taken, pre_at[i], &of[i]->pre);
            if (q_at[i] >= 0)
                take_text(made, taken, q_at[i], &of[i]->qj);
        }
    }
}

static void sem_run_deinit(struct sem_run *r)
{
    free(r->qv.v);
    free(r->qv.text);
    gw_judge_text_free(&r->qj);
    gw_judge_text_free(&r->pre);
    for (int i = 0; i < r->n; i++)
        store_hit_deinit(&r->hits[i]);
}

/* Worker thread, for the lookups done after one embedder pass: search each tenant's index
 * and pick each one's first acceptable candidate. The lookups whose candidate needs the
 * judge wait, the judge embeds all their pairs together, and they go on. */
static void sem_search(struct gw_embed_job **jobs, int n)
{
    gw_cache *c = gw_cq_container(jobs[0], struct gw_cache_sem, job)->c;
    struct sem_run *runs = calloc((size_t)n, sizeof *runs);
    int waiting = 0;
    for (int k = 0; k < n; k++) {
        struct gw_cache_sem *s = gw_cq_container(jobs[k], struct gw_cache_sem, job);
        struct gw_judge_text qj = s->qj; /* the run's from here */
        memset(&s->qj, 0, sizeof s->qj);
        s->best = -1;
        if (jobs[k]->rc) {
            s->rc = jobs[k]->rc;
            gw_judge_text_free(&qj);
            continue;
        }
        if (!runs) { /* out of memory for the lot: one at a time */
            struct sem_run *r = malloc(sizeof *r);
            if (!r) {
                s->rc = -1;
                gw_judge_text_free(&qj);
                continue;
            }
            memset(r, 0, sizeof *r);
            r->s = s;
            r->qj = qj;
            sem_find(c, r);
            sem_weigh(c, r);
            sem_run_deinit(r);
            free(r);
            continue;
        }
        struct sem_run *r = &runs[k];
        r->s = s;
        r->qj = qj;
        r->defer = 1;
        sem_find(c, r);
        sem_weigh(c, r);
        waiting += r->waiting;
    }
    if (!runs)
        return;
    if (waiting)
        sem_judge_waiting(c, runs, n);
    for (int k = 0; k < n; k++) {
        struct sem_run *r = &runs[k];
        if (r->waiting) {
            r->waiting = r->defer = 0;
            sem_weigh(c, r);
        }
        /* a question that missed, where its answer is to be stored, is likely asked again
         * in other words soon after: its tokens, made by its own pass, are kept as that
         * entry's, so that its first hit costs the judge no pass either (none of a
         * no-store or only-if-cached request's) */
        if (r->s && r->s->stores && !r->s->hit && !r->s->rc && r->qj.n)
            memo_put(c, r->s->tenant, r->s->key->query, r->s->key->query_len, &r->qj);
        sem_run_deinit(r);
    }
    free(runs);
}

/* Worker thread: the question's tokens for the judge, from the pass that embedded it. */
static void sem_kept(struct gw_embed_job *j, int i, const struct emb_keep *keep, int at)
{
    (void)i;
    struct gw_cache_sem *s = gw_cq_container(j, struct gw_cache_sem, job);
    gw_judge_text_free(&s->qj);
    gw_judge_kept(gw_embedw_model(s->c->embw), keep, at, &s->qj); /* else made later */
}

static void sem_done(struct gw_cq_item *item)
{
    struct gw_cache_sem *s = gw_cq_container(item, struct gw_cache_sem, job.item);
    gw_cache *c = s->c;
    if (s->best >= 0)
        gw_metric_observe(c->m_similarity, s->best);
    gw_metric_add(c->m_lookups, 1, "semantic", s->hit ? "hit" : "miss");
    s->done(s);
}

void gw_cache_semantic(gw_cache *c, struct gw_cache_sem *s)
{
    s->c = c;
    s->hit = 0;
    s->rc = 0;
    s->why[0] = 0;
    s->text = s->key->query;
    s->len = s->key->query_len;
    memset(&s->job, 0, sizeof s->job);
    memset(&s->qj, 0, sizeof s->qj);
    s->vec = malloc(sizeof(float) * (size_t)c->dim);
    if (!s->vec) {
        s->rc = -1;
        s->best = -1;
        s->done(s);
        return;
    }
    s->job.item.fn = sem_done;
    s->job.n = 1;
    s->job.texts = &s->text;
    s->job.lens = &s->len;
    s->job.ends = 1; /* a question after a long context is at its end */
    s->job.out = s->vec;
    s->job.ntokens = &s->ntok;
    s->job.post = sem_search;
    s->job.kept = c->keep_states ? sem_kept : NULL;
    gw_embedw_submit(c->embw, &s->job);
}

void gw_cache_sem_deinit(struct gw_cache_sem *s)
{
    gw_judge_text_free(&s->qj);
    store_hit_deinit(&s->entry);
    free(s->vec);
    s->vec = NULL;
}

void gw_cache_served(gw_cache *c, int64_t id, int completion_tokens, int semantic)
{
    gw_metric_add(c->m_saved, completion_tokens, semantic ? "semantic" : "exact");
    store_touch(c->st, id, now_ms());
}

void gw_cache_coalesced(gw_cache *c, int completion_tokens)
{
    gw_metric_add(c->m_coalesced, 1);
    gw_metric_add(c->m_saved, completion_tokens, "coalesced");
}

/* ------------------------------------------------------------------ writes */

struct put_job {
    struct gw_embed_job job;
    gw_cache *c;
    struct store_entry e;
    int ntok;
    char *query, *answer, *model;
    const char *text;
    size_t len;
    float vec[]; /* [dim] */
};

static void put_written(void *arg, int rc, int64_t id)
{
    gw_cache *c = arg;
    /* writer thread; the metrics registry is thread-safe. id 0: the tenant was deleted
     * while its answer waited to be written */
    gw_metric_add(c->m_writes, 1, rc ? "error" : id ? "ok" : "dropped");
}

static void put_job_free(struct put_job *p)
{
    free(p->query);
    free(p->answer);
    free(p->model);
    free(p);
}

static void put_commit(struct put_job *p)
{
    int rc = store_put(p->c->st, &p->e, put_written, p->c);
    if (rc) {
        gw_metric_add(p->c->m_writes, 1, "error");
        gw_log_kv(GW_LOG_WARN, "cache write failed", "error", store_strerror(rc), NULL);
    }
    put_job_free(p);
}

static void put_embedded(struct gw_cq_item *item)
{
    struct put_job *p = gw_cq_container(item, struct put_job, job.item);
    if (p->job.rc) {
        gw_metric_add(p->c->m_writes, 1, "error");
        put_job_free(p);
        return;
    }
    put_commit(p);
}

void gw_cache_put(gw_cache *c, int64_t tenant, const struct gw_cache_key *k, const float *vec,
                  const char *model, const char *answer, size_t len, int prompt_tokens,
                  int completion_tokens, int64_t ttl_s)
{
    struct put_job *p = calloc(1, sizeof *p + sizeof(float) * (size_t)c->dim);
    if (!p)
        return;
    p->c = c;
    p->query = strndup(k->query, k->query_len);
    p->answer = strndup(answer, len);
    p->model = strdup(model);
    if (!p->query || !p->answer || !p->model) {
        put_job_free(p);
        return;
    }
    if (ttl_s < 0)
        ttl_s = c->cfg->cache_ttl_s;
    int64_t now = now_ms();
    p->e = (struct store_entry){
        .tenant = tenant, .partition = k->partition, .exact = k->exact, .model = p->model,
        .query = p->query, .query_len = k->query_len, .embedding = p->vec, .answer = p->answer,
        .answer_len = len, .finish_reason = "stop", .prompt_tokens = prompt_tokens,
        .completion_tokens = completion_tokens, .created_ms = now,
        .expires_ms = ttl_s ? now + ttl_s * 1000 : 0,
    };
    if (vec || !k->searchable) { /* a prompt to continue is found by its exact key only */
        if (vec)
            memcpy(p->vec, vec, sizeof(float) * (size_t)c->dim);
        else
            p->e.embedding = NULL;
        put_commit(p);
        return;
    }
    p->text = p->query;
    p->len = k->query_len;
    p->job.item.fn = put_embedded;
    p->job.n = 1;
    p->job.texts = &p->text;
    p->job.lens = &p->len;
    p->job.ends = 1;
    p->job.out = p->vec;
    p->job.ntokens = &p->ntok;
    gw_embedw_submit(c->embw, &p->job);
}

/* ------------------------------------------------------------------ metrics */

void gw_cache_note_unmet(gw_cache *c)
{
    gw_metric_add(c->m_unmet, 1);
}

/* The metric slot of a tenant (its eviction counts so far, its last label), or -1 when
 * there is none. label NULL: the tenant is gone (deleted, perhaps by another process) and
 * gives its slot up (its series leave /metrics with the tenant's: gw_tenants_reload()). */
static int name_slot(gw_cache *c, int64_t tenant, const char *label)
{
    int i = 0;
    while (i < c->nnames && c->names[i].id != tenant)
        i++;
    if (!label) {
        if (i == c->nnames)
            return -1;
        c->names[i] = c->names[--c->nnames];
        return -1;
    }
    if (i == c->nnames) {
        if (c->nnames == c->capnames) {
            int cap = c->capnames ? c->capnames * 2 : 16;
            struct tenant_name *a = realloc(c->names, sizeof *a * (size_t)cap);
            if (!a)
                return -1;
            c->names = a;
            c->capnames = cap;
        }
        c->nnames++;
        c->names[i] = (struct tenant_name){.id = tenant};
    }
    snprintf(c->names[i].name, sizeof c->names[i].name, "%s", label);
    return i;
}

/* The store's figures for every tenant with an index, in c->stats; how many (0 when out of
 * memory). */
static int read_stats(gw_cache *c)
{
    for (;;) {
        int n = store_stats(c->st, c->stats, c->capstats);
        if (n <= c->capstats)
            return n;
        struct store_tenant_stats *a = realloc(c->stats, sizeof *a * (size_t)n);
        if (!a)
            return 0;
        c->stats = a;
        c->capstats = n;
    }
}

void gw_cache_refresh_metrics(gw_cache *c, gw_tenants *tenants)
{
    gw_metric_set(c->m_hot, (double)c->hot_used);
    int n = read_stats(c);
    const struct store_tenant_stats *st = c->stats;
    double other_entries = 0, other_bytes = 0;
    int others = 0;
    for (int i = 0; i < n; i++) {
        /* the tenants' own labels: tenants past metrics_max_tenants share "other" here as
         * in their request and token counters */
        const char *label = gw_tenants_label(tenants, st[i].tenant);
        int k = name_slot(c, st[i].tenant, label);
        if (!label)
            continue;
        if (!strcmp(label, "other")) {
            other_entries += (double)st[i].entries;
            other_bytes += (double)st[i].bytes;
            others = 1;
        } else {
            gw_metric_set(c->m_entries, (double)st[i].entries, label);
            gw_metric_set(c->m_bytes, (double)st[i].bytes, label);
        }
        if (k >= 0) {
            gw_metric_add(c->m_evictions, (double)(st[i].evicted_lru - c->names[k].lru), "lru");
            gw_metric_add(c->m_evictions, (double)(st[i].expired - c->names[k].expired),
                          "expired");
            c->names[k].lru = st[i].evicted_lru;
            c->names[k].expired = st[i].expired;
        }
    }
    if (others || c->had_others) { /* to 0 when the last of them goes */
        gw_metric_set(c->m_entries, other_entries, "other");
        gw_metric_set(c->m_bytes, other_bytes, "other");
    }
    c->had_others = others;
}

/* An imported answer with a response_format (json_object or json_schema) is served to
 * requests that ask for that format: it must be a complete document of it, as the engine's
 * answers are (engine/grammar.h). 0, or -1 with err set. */
static int import_format_check(json_t *rf, json_t *answer, char *err, size_t errlen)
{
    eng_grammar *g = NULL;
    eng_gm *m = NULL;
    char why[300];
    int rc = oai_response_format(rf, &g, why, sizeof why);
    if (!rc && !g) return 0; /* text */
    if (rc) {
        snprintf(err, errlen, "%s", rc == -2 ? "out of memory" : why);
        return rc;
    }
    rc = -1;
    if (eng_gm_create(g, &m)) {
        snprintf(err, errlen, "out of memory");
    } else if (!eng_gm_feed(m, json_string_value(answer), json_string_length(answer)) ||
               !eng_gm_accepting(m)) {
        snprintf(err, errlen, "\"answer\" is not a complete document of its response_format, "
                              "as generated (engine/grammar.h)");
    } else {
        rc = 0;
    }
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
    return rc;
}

/* ------------------------------------------------------------------ imports */

int gw_cache_import_parse(const char *line, size_t len, int64_t ns, const struct tok_vocab *v,
                          const char *model_name, struct gw_import_item *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    int rc = -1;
    if (!json_is_object(j)) {
        snprintf(err, errlen, j ? "not a JSON object" : "invalid JSON: %s", je.text);
        goto out;
    }
    json_t *model = json_object_get(j, "model"), *answer = json_object_get(j, "answer");
    int chat = json_object_get(j, "messages") != NULL;
    if (!json_is_string(model) || !json_string_length(model)) {
        snprintf(err, errlen, "\"model\" must be a non-empty string");
        goto out;
    }
    if (!json_is_string(answer) || !json_string_length(answer)) {
        snprintf(err, errlen, "\"answer\" must be a non-empty string");
        goto out;
    }
    if (model_name && strcmp(json_string_value(model), model_name)) {
        snprintf(err, errlen, "\"model\" must be %.64s, the model requests name", model_name);
        goto out;
    }
    const char *param, *unknown = oai_unknown_param(j, chat ? OAI_CHAT : OAI_COMPLETION,
                                                     "answer");
    if (unknown) { /* (a misspelt parameter would key the answer as its default's) */
        snprintf(err, errlen, "\"%.64s\" is not a parameter of a %s request", unknown,
                 chat ? "chat" : "completion");
        goto out;
    }
    if (oai_params_check(j, chat, &param, err, errlen)) /* refused in a request */
        goto out;
    if (gw_wants_logprobs(j, chat)) { /* such a request is never answered from the caches */
        snprintf(err, errlen, "\"logprobs\": answers with log-probabilities are not cached");
        goto out;
    }
    if (import_format_check(json_object_get(j, "response_format"), answer, err, errlen))
        goto out;
    char where[64];
    if (chat && gw_messages_check(json_object_get(j, "messages"), err, errlen, where,
                                  sizeof where))
        goto out;
    if (chat && gw_uses_tools(j)) { /* such a request is never answered from the caches */
        snprintf(err, errlen, "\"tools\": calls and conversations with calls are not cached");
        goto out;
    }
    int krc = gw_cache_key_make(j, chat, ns, &out->key);
    if (krc) {
        snprintf(err, errlen, krc < 0 ? "out of memory"
                              : chat ? "\"messages\" must end with a user message with text "
                                       "content"
                                     : "needs \"messages\" or a non-empty string \"prompt\"");
        goto out;
    }
    out->model = strdup(json_string_value(model));
    out->answer_len = json_string_length(answer);
    out->answer = strndup(json_string_value(answer), out->answer_len);
    if (!out->model || !out->answer) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    int n = 0;
    if (v)
        tok_encode(v, out->answer, out->answer_len, 0, NULL, 0, &n);
    out->completion_tokens = n;
    rc = 0;
out:
    if (rc)
        gw_import_item_deinit(out);
    json_decref(j);
    return rc;
}

void gw_import_item_deinit(struct gw_import_item *it)
{
    gw_cache_key_deinit(&it->key);
    free(it->model);
    free(it->answer);
    it->model = it->answer = NULL;
}

/* ------------------------------------------------------------------ stored responses */

struct resp_put {
    gw_cache *c;
    int64_t tenant;
    char key[160], id[];
};

static void resp_key(char *key, size_t len, int64_t tenant, const char *id)
{
    snprintf(key, len, "%lld/%s", (long long)tenant, id);
}

/* writer thread: the response is committed (or failed); deleted meanwhile, it goes now;
 * changed meanwhile, its row gets the body it was changed to (under resp_mu, so that what
 * is done once it is out of resp_pending comes after, and no read finds it between) */
/* resp_mu held: key was deleted; where it stood (created_ms) is kept a while */
static void resp_gone(gw_cache *c, const char *key, int64_t created_ms)
{
    char *slot = c->gone_ring[c->gone_next];
    if (slot[0])
        json_object_del(c->resp_gone, slot);
    snprintf(slot, sizeof c->gone_ring[0], "%s", key);
    json_object_set_new(c->resp_gone, key, json_integer(created_ms));
    c->gone_next = (c->gone_next + 1) % RESP_GONE;
}

static void resp_written(void *arg, int rc, int64_t id)
{
    (void)id;
    struct resp_put *p = arg;
    gw_cache *c = p->c;
    pthread_mutex_lock(&c->resp_mu);
    json_t *e = json_object_get(c->resp_pending, p->key);
    int deleted = json_is_true(json_object_get(e, "deleted"));
    int64_t at;
    if (!rc && !deleted && json_is_true(json_object_get(e, "updated")))
        store_response_set_body(c->st, p->tenant, p->id,
                                json_string_value(json_object_get(e, "body")), store_now_ms());
    else if (!rc && deleted && !store_response_delete(c->st, p->tenant, p->id, &at))
        resp_gone(c, p->key, at);
    json_object_del(c->resp_pending, p->key);
    pthread_mutex_unlock(&c->resp_mu);
    free(p);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int gw_cache_response_get(gw_cache *c, int64_t tenant, const char *id, char **body,
                          char **messages)
{
    char key[160];
    resp_key(key, sizeof key, tenant, id);
    pthread_mutex_lock(&c->resp_mu);
    json_t *e = json_object_get(c->resp_pending, key);
    int rc = STORE_OK;
    if (e && json_is_true(json_object_get(e, "deleted"))) {
        rc = STORE_ENOTFOUND;
    } else if (e) {
        char **out[2] = {body, messages};
        static const char *const keys[2] = {"body", "messages"};
        for (int i = 0; i < 2; i++)
            if (out[i] && !(*out[i] = dup_or_null(json_string_value(json_object_get(e, keys[i])))))
                rc = STORE_ENOMEM;
        if (rc) {
            for (int i = 0; i < 2; i++)
                if (out[i]) {
                    free(*out[i]);
                    *out[i] = NULL;
                }
        }
    }
    pthread_mutex_unlock(&c->resp_mu);
    if (e)
        return rc;
    return store_response_get(c->loop_reader, tenant, id, store_now_ms(), body, messages);
}

int gw_cache_response_put(gw_cache *c, int64_t tenant, const char *id, const char *body,
                          const char *messages, int64_t ttl_s)
{
    size_t il = strlen(id);
    struct resp_put *p = malloc(sizeof *p + il + 1);
    json_t *e = json_object();
    if (!p || !e || json_object_set_new(e, "body", json_string(body)) ||
        json_object_set_new(e, "messages", json_string(messages)) ||
        json_object_set_new(e, "seq", json_integer(0))) {
        free(p);
        json_decref(e);
        return STORE_ENOMEM;
    }
    p->c = c;
    p->tenant = tenant;
    memcpy(p->id, id, il + 1);
    resp_key(p->key, sizeof p->key, tenant, id);
    pthread_mutex_lock(&c->resp_mu);
    json_integer_set(json_object_get(e, "seq"), ++c->resp_seq);
    int rc = json_object_set_new(c->resp_pending, p->key, e) ? STORE_ENOMEM : STORE_OK;
    pthread_mutex_unlock(&c->resp_mu);
    if (!rc)
        rc = store_response_put(c->st, tenant, id, body, messages, ttl_s * 1000, resp_written,
                                p);
    if (rc) {
        pthread_mutex_lock(&c->resp_mu);
        json_object_del(c->resp_pending, p->key);
        pthread_mutex_unlock(&c->resp_mu);
        free(p);
    }
    return rc;
}

int gw_cache_response_delete(gw_cache *c, int64_t tenant, const char *id)
{
    char key[160];
    resp_key(key, sizeof key, tenant, id);
    pthread_mutex_lock(&c->resp_mu);
    json_t *e = json_object_get(c->resp_pending, key);
    int rc = STORE_OK;
    if (e && json_is_true(json_object_get(e, "deleted")))
        rc = STORE_ENOTFOUND;
    else if (e) /* deleted once committed (resp_written) */
        json_object_set_new(e, "deleted", json_true());
    pthread_mutex_unlock(&c->resp_mu);
    if (e)
        return rc;
    int64_t at;
    rc = store_response_delete(c->st, tenant, id, &at);
    if (!rc) {
        pthread_mutex_lock(&c->resp_mu);
        resp_gone(c, key, at);
        pthread_mutex_unlock(&c->resp_mu);
    }
    return rc;
}

int gw_cache_response_set_body(gw_cache *c, int64_t tenant, const char *id, const char *body)
{
    char key[160];
    resp_key(key, sizeof key, tenant, id);
    pthread_mutex_lock(&c->resp_mu);
    json_t *e = json_object_get(c->resp_pending, key);
    int rc;
    if (e && json_is_true(json_object_get(e, "deleted")))
        rc = STORE_ENOTFOUND;
    else if (e) /* written once committed (resp_written) */
        rc = json_object_set_new(e, "body", json_string(body)) ||
                     json_object_set_new(e, "updated", json_true())
                 ? STORE_ENOMEM
                 : STORE_OK;
    else
        rc = store_response_set_body(c->st, tenant, id, body, store_now_ms());
    pthread_mutex_unlock(&c->resp_mu);
    return rc;
}

/* A listing's responses not yet committed (resp_pending), in the order they were put */
struct resp_listing {
    json_t *pending; /* [{"id", "body", "seq", "deleted"}], by seq */
    store_response_fn fn;
    void *arg;
    int stop;
};

static int by_seq(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "seq"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "seq"));
    return (x > y) - (x < y);
}

/* The tenant's pending responses whose ids begin with prefix, by seq; NULL: no memory */
static json_t *pending_of(gw_cache *c, int64_t tenant, const char *prefix)
{
    char head[160];
    resp_key(head, sizeof head, tenant, prefix);
    const size_t hl = strlen(head), tl = strlen(head) - strlen(prefix);
    json_t **v = NULL, *out = json_array();
    size_t n = 0;
    int oom = !out;
    pthread_mutex_lock(&c->resp_mu);
    size_t cap = json_object_size(c->resp_pending);
    if (cap && !oom && !(v = malloc(cap * sizeof *v)))
        oom = 1;
    const char *key;
    json_t *e;
    json_object_foreach(c->resp_pending, key, e)
    {
        if (oom || strncmp(key, head, hl))
            continue;
        /* (copies: the writer thread takes e out once committed) */
        json_t *o = json_pack("{s:s, s:s, s:I, s:b}", "id", key + tl, "body",
                              json_string_value(json_object_get(e, "body")), "seq",
                              json_integer_value(json_object_get(e, "seq")), "deleted",
                              json_is_true(json_object_get(e, "deleted")));
        if (!o)
            oom = 1;
        else
            v[n++] = o;
    }
    pthread_mutex_unlock(&c->resp_mu);
    if (n)
        qsort(v, n, sizeof *v, by_seq);
    for (size_t i = 0; i < n; i++)
        if (oom)
            json_decref(v[i]);
        else if (json_array_append_new(out, v[i]))
            oom = 1;
    free(v);
    if (oom) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *pending_find(json_t *pending, const char *id, size_t *at)
{
    size_t i;
    json_t *e;
    json_array_foreach(pending, i, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "id")), id)) {
            if (at)
                *at = i;
            return e;
        }
    }
    return NULL;
}

/* a committed row: left to the pending record of it, while there is one */
static int listed_row(void *arg, const char *id, const char *body)
{
    struct resp_listing *l = arg;
    if (pending_find(l->pending, id, NULL))
        return 0;
    return l->stop = l->fn(l->arg, id, body);
}

/* pending[from..to) (to < from: downwards), those not deleted */
static void listed_pending(struct resp_listing *l, long from, long to)
{
    for (long i = from; i != to && !l->stop; i += to < from ? -1 : 1) {
        json_t *e = json_array_get(l->pending, (size_t)i);
        if (!json_is_true(json_object_get(e, "deleted")))
            l->stop = l->fn(l->arg, json_string_value(json_object_get(e, "id")),
                            json_string_value(json_object_get(e, "body")));
    }
}

int gw_cache_response_list(gw_cache *c, int64_t tenant, const char *prefix, const char *after,
                           int desc, store_response_fn fn, void *arg)
{
    struct resp_listing l = {pending_of(c, tenant, prefix), fn, arg, 0};
    if (!l.pending)
        return STORE_ENOMEM;
    /* the pending ones were put after every committed one; the cursor may be one of them
     * (deleted too), or a committed one, or one deleted lately */
    const long np = (long)json_array_size(l.pending);
    size_t at = 0;
    json_t *a = after ? pending_find(l.pending, after, &at) : NULL;
    int64_t gone = -1;
    if (after && !a) {
        char key[160];
        resp_key(key, sizeof key, tenant, after);
        pthread_mutex_lock(&c->resp_mu);
        json_t *g = json_object_get(c->resp_gone, key);
        gone = g ? json_integer_value(g) : -1;
        pthread_mutex_unlock(&c->resp_mu);
    }
    int rc = STORE_OK;
    if (after && strncmp(after, prefix, strlen(prefix))) {
        rc = STORE_ENOTFOUND; /* another kind's id */
    } else if (!desc) {
        if (!a)
            rc = store_response_list(c->loop_reader, tenant, prefix, after, gone, 0,
                                     store_now_ms(), listed_row, &l);
        if (!rc)
            listed_pending(&l, a ? (long)at + 1 : 0, np);
    } else {
        if (!after || a)
            listed_pending(&l, a ? (long)at - 1 : np - 1, -1);
        if (!l.stop)
            rc = store_response_list(c->loop_reader, tenant, prefix, a ? NULL : after, gone, 1,
                                     store_now_ms(), listed_row, &l);
    }
    json_decref(l.pending);
    return rc;
}
