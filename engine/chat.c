#include "chat.h"

#include "engine.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *find(const char *h, size_t hl, const char *n)
{
    size_t nl = strlen(n);
    for (size_t i = 0; i + nl <= hl; i++)
        if (!memcmp(h + i, n, nl))
            return h + i;
    return NULL;
}

int eng_chat_detect(const char *t, size_t len, enum eng_chat_format *out)
{
    if (find(t, len, "<|im_start|>"))
        *out = ENG_CHAT_CHATML;
    else if (find(t, len, "<|start_header_id|>"))
        *out = ENG_CHAT_LLAMA3;
    else if (find(t, len, "[INST]"))
        *out = ENG_CHAT_LLAMA2;
    else
        return ENG_ENOTSUP;
    return 0;
}

static const char *const names[] = {"chatml", "llama3", "llama2"};

int eng_chat_format_parse(const char *name, enum eng_chat_format *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i])) {
            *out = (enum eng_chat_format)i;
            return 0;
        }
    return ENG_EINVAL;
}

const char *eng_chat_format_name(enum eng_chat_format f)
{
    return (unsigned)f < 3 ? names[f] : "unknown";
}

char *eng_chat_default_system(const char *t, size_t len)
{
    /* SmolLM2: {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
     * TEXT<|im_end|>\n' }}{% endif %} -- the literal between the markers is the prompt */
    static const char open[] = "<|im_start|>system\n";
    const char *a = find(t, len, open);
    if (!a || !find(t, len, "!= 'system'"))
        return NULL;
    a += sizeof open - 1;
    const char *b = find(a, len - (size_t)(a - t), "<|im_end|>");
    if (!b)
        return NULL;
    return strndup(a, (size_t)(b - a));
}

struct out {
    char *text;
    size_t len, cap;
    struct eng_chat_segment *seg;
    int nseg, cap_seg;
    int oom;
};

static void add(struct out *o, const char *s, size_t n, int special)
{
    if (o->oom || n == 0)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *t = realloc(o->text, cap);
        if (!t) {
            o->oom = 1;
            return;
        }
        o->text = t;
        o->cap = cap;
    }
    /* adjacent pieces of the same kind join one segment */
    if (o->nseg && o->seg[o->nseg - 1].special == special) {
        o->seg[o->nseg - 1].len += n;
    } else {
        if (o->nseg == o->cap_seg) {
            int cap = o->cap_seg ? o->cap_seg * 2 : 16;
            struct eng_chat_segment *sg = realloc(o->seg, sizeof *sg * (size_t)cap);
            if (!sg) {
                o->oom = 1;
                return;
            }
            o->seg = sg;
            o->cap_seg = cap;
        }
        o->seg[o->nseg++] = (struct eng_chat_segment){o->len, n, special};
    }
    memcpy(o->text + o->len, s, n);
    o->len += n;
    o->text[o->len] = 0;
}

static void tmpl(struct out *o, const char *s)
{
    add(o, s, strlen(s), 1);
}

/* Llama templates trim message content. */
static void trimmed(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

static int role_ok(const char *r)
{
    return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant"));
}

int eng_chat_render(enum eng_chat_format f, const struct eng_chat_msg *msgs, int n,
                    int gen_prompt, const char *default_system, struct eng_chat_prompt *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++)
        if (!role_ok(msgs[i].role))
            return ENG_EINVAL;
    struct out o = {0};
    int has_system = n > 0 && !strcmp(msgs[0].role, "system");
    switch (f) {
    case ENG_CHAT_CHATML:
        if (!has_system && default_system) {
            tmpl(&o, "<|im_start|>system\n");
            tmpl(&o, default_system);
            tmpl(&o, "<|im_end|>\n");
        }
        for (int i = 0; i < n; i++) {
            tmpl(&o, "<|im_start|>");
            tmpl(&o, msgs[i].role);
            tmpl(&o, "\n");
            add(&o, msgs[i].content, msgs[i].len, 0);
            tmpl(&o, "<|im_end|>\n");
        }
        if (gen_prompt)
            tmpl(&o, "<|im_start|>assistant\n");
        break;
    case ENG_CHAT_LLAMA3:
        tmpl(&o, "<|begin_of_text|>");
        for (int i = 0; i < n; i++) {
            const char *c = msgs[i].content;
            size_t cl = msgs[i].len;
            trimmed(&c, &cl);
            tmpl(&o, "<|start_header_id|>");
            tmpl(&o, msgs[i].role);
            tmpl(&o, "<|end_header_id|>\n\n");
            add(&o, c, cl, 0);
            tmpl(&o, "<|eot_id|>");
        }
        if (gen_prompt)
            tmpl(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case ENG_CHAT_LLAMA2: {
        /* <s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER </s><s>[INST] ... */
        int i = 0;
        const char *sys = NULL;
        size_t sysl = 0;
        if (has_system) {
            sys = msgs[0].content;
            sysl = msgs[0].len;
            trimmed(&sys, &sysl);
            i = 1;
        }
        int first = 1;
        for (; i < n; i++) {
            const char *c = msgs[i].content;
            size_t cl = msgs[i].len;
            trimmed(&c, &cl);
            if (!strcmp(msgs[i].role, "user")) {
                tmpl(&o, "<s>[INST] ");
                if (first && sys) {
                    tmpl(&o, "<<SYS>>\n");
                    add(&o, sys, sysl, 0);
                    tmpl(&o, "\n<</SYS>>\n\n");
                }
                add(&o, c, cl, 0);
                tmpl(&o, " [/INST]");
                first = 0;
            } else if (!strcmp(msgs[i].role, "assistant")) {
                tmpl(&o, " ");
                add(&o, c, cl, 0);
                tmpl(&o, " </s>");
            } else { /* a later system message: as a user turn's preamble */
                tmpl(&o, "<s>[INST] <<SYS>>\n");
                add(&o, c, cl, 0);
                tmpl(&o, "\n<</SYS>>\n\n [/INST]");
            }
        }
        (void)gen_prompt; /* the prompt already ends where the answer begins */
        break;
    }
    default:
        free(o.text);
        free(o.seg);
        return ENG_EINVAL;
    }
    if (o.oom) {
        free(o.text);
        free(o.seg);
        return ENG_ENOMEM;
    }
    if (!o.text) { /* nothing at all: an empty prompt */
        o.text = calloc(1, 1);
        if (!o.text)
            return ENG_ENOMEM;
    }
    out->text = o.text;
    out->len = o.len;
    out->seg = o.seg;
    out->nseg = o.nseg;
    return 0;
}

void eng_chat_prompt_deinit(struct eng_chat_prompt *p)
{
    if (!p)
        return;
    free(p->text);
    free(p->seg);
    memset(p, 0, sizeof *p);
}
