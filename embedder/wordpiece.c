#include "wordpiece.h"

#include "embedder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#define MAX_WORD_BYTES 1024 /* longer words exceed max_chars anyway and become [UNK] */

struct slot {
    uint32_t off; /* into strings; UINT32_MAX: empty */
    uint32_t len;
    int32_t id;
};

struct emb_wp {
    struct emb_wp_options opt;
    char *strings;
    struct slot *slots; /* open addressing, power-of-two size */
    uint32_t mask;
    int n;
    int32_t cls, sep, unk;
    unsigned char *word; /* [n]: emb_wp_is_word() */
};

static uint32_t slot_of(const emb_wp *wp, const char *s, size_t len)
{
    uint32_t i = (uint32_t)XXH3_64bits(s, len) & wp->mask;
    while (wp->slots[i].off != UINT32_MAX &&
           (wp->slots[i].len != len || memcmp(wp->strings + wp->slots[i].off, s, len)))
        i = (i + 1) & wp->mask;
    return i;
}

static int32_t lookup(const emb_wp *wp, const char *s, size_t len)
{
    const struct slot *sl = &wp->slots[slot_of(wp, s, len)];
    return sl->off == UINT32_MAX ? -1 : sl->id;
}

int32_t emb_wp_id(const emb_wp *wp, const char *token)
{
    return lookup(wp, token, strlen(token));
}

int emb_wp_vocab_size(const emb_wp *wp)
{
    return wp->n;
}

int emb_wp_is_word(const emb_wp *wp, int32_t id)
{
    return id < 0 || id >= wp->n ? -1 : wp->word[id];
}

void emb_wp_destroy(emb_wp *wp)
{
    if (!wp)
        return;
    free(wp->strings);
    free(wp->slots);
    free(wp->word);
    free(wp);
}

int emb_wp_create(const char *path, const struct emb_wp_options *opt, emb_wp **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return EMB_EIO;
    }
    int rc = EMB_ENOMEM;
    emb_wp *wp = calloc(1, sizeof *wp);
    char *text = NULL;
    if (!wp)
        goto fail;
    wp->opt = *opt;
    if (fseek(f, 0, SEEK_END) || ftell(f) <= 0 || ftell(f) > (1L << 30)) {
        snprintf(err, errlen, "%s: empty or too large", path);
        rc = EMB_EFORMAT;
        goto fail;
    }
    size_t size = (size_t)ftell(f);
    rewind(f);
    text = malloc(size + 1);
    if (!text)
        goto fail;
    if (fread(text, 1, size, f) != size) {
        snprintf(err, errlen, "%s: read error", path);
        rc = EMB_EIO;
        goto fail;
    }
    text[size] = 0;
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    uint32_t cap = 1;
    while (cap < lines * 2)
        cap <<= 1;
    wp->slots = malloc(sizeof *wp->slots * cap);
    wp->word = malloc(lines);
    if (!wp->slots || !wp->word)
        goto fail;
    for (uint32_t i = 0; i < cap; i++)
        wp->slots[i].off = UINT32_MAX;
    wp->mask = cap - 1;
    wp->strings = text;
    text = NULL;
    for (size_t pos = 0; pos < size;) {
        char *line = wp->strings + pos;
        char *nl = memchr(line, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - line) : size - pos;
        pos += len + 1;
        size_t tl = len;
        if (tl && line[tl - 1] == '\r')
            tl--;
        unsigned char w = 0;
        for (size_t i = 0; i < tl && !w; i++) {
            unsigned char ch = (unsigned char)line[i];
            w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') ||
                ((ch | 32) >= 'a' && (ch | 32) <= 'z');
        }
        wp->word[wp->n] = w;
        uint32_t s = slot_of(wp, line, tl);
        if (wp->slots[s].off == UINT32_MAX) /* the first of duplicate lines wins */
            wp->slots[s] = (struct slot){(uint32_t)(line - wp->strings), (uint32_t)tl, wp->n};
        wp->n++;
    }
    wp->cls = emb_wp_id(wp, "[CLS]");
    wp->sep = emb_wp_id(wp, "[SEP]");
    wp->unk = emb_wp_id(wp, "[UNK]");
    if (wp->cls < 0 || wp->sep < 0 || wp->unk < 0) {
        snprintf(err, errlen, "%s: the vocabulary lacks [CLS], [SEP] or [UNK]", path);
        rc = EMB_EFORMAT;
        goto fail;
    }
    fclose(f);
    *out = wp;
    return 0;
fail:
    if (rc == EMB_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", path);
    fclose(f);
    free(text);
    emb_wp_destroy(wp);
    return rc;
}

/* ------------------------------------------------------------------ normalization */

static int is_control(int32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return 0;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
        return 1;
    default:
        return 0;
    }
}

/* Unicode White_Space */
static int is_space(int32_t c)
{
    if ((c >= 0x09 && c <= 0x0d) || c == 0x85)
        return 1;
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

static int is_punct(int32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return 1;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return 1;
    default:
        return 0;
    }
}

static int is_cjk(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ------------------------------------------------------------------ encoding */

struct enc {
    const emb_wp *wp;
    int32_t *ids;
    int n, max; /* max: room for pieces, [SEP] excluded */
    int ring;   /* > 0: ids is a ring of that many, keeping the last pieces; n counts all */
    char word[MAX_WORD_BYTES];
    size_t wlen;
    int wchars;
};

static void emit(struct enc *e, int32_t id)
{
    if (e->ring)
        e->ids[e->n++ % e->ring] = id;
    else if (e->n < e->max)
        e->ids[e->n++] = id;
}

/* WordPiece over the collected word, then reset it. */
static void flush_word(struct enc *e)
{
    if (e->wchars == 0)
        return;
    const emb_wp *wp = e->wp;
    char *w = e->word;
    size_t len = e->wlen;
    int32_t pieces[MAX_WORD_BYTES];
    int np = 0;
    if (e->wchars > wp->opt.max_chars || len > MAX_WORD_BYTES) {
        emit(e, wp->unk);
        goto done;
    }
    char tmp[MAX_WORD_BYTES + 2] = "##";
    for (size_t start = 0; start < len;) {
        size_t end = len;
        int32_t id = -1;
        while (end > start) {
            if (start == 0) {
                id = lookup(wp, w, end);
            } else { /* a continuation: "##" + w[start:end] */
                memcpy(tmp + 2, w + start, end - start);
                id = lookup(wp, tmp, end - start + 2);
            }
            if (id >= 0)
                break;
            /* back off one UTF-8 character */
            do
                end--;
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80);
        }
        if (id < 0) {
            emit(e, wp->unk);
            goto done;
        }
        pieces[np++] = id;
        start = end;
    }
    for (int i = 0; i < np; i++)
        emit(e, pieces[i]);
done:
    e->wlen = 0;
    e->wchars = 0;
}

static void add_char(struct enc *e, int32_t c)
{
    uint8_t buf[4];
    utf8proc_ssize_t k = utf8proc_encode_char(c, buf);
    if (e->wlen + (size_t)k <= MAX_WORD_BYTES)
        memcpy(e->word + e->wlen, buf, (size_t)k);
    e->wlen += (size_t)k; /* past MAX_WORD_BYTES the word is [UNK]; keep counting */
    e->wchars++;
}

/* One normalized character into the pre-tokenizer. */
static void feed(struct enc *e, int32_t c)
{
    if (is_space(c)) {
        flush_word(e);
    } else if (is_punct(c)) {
        flush_word(e);
        add_char(e, c);
        flush_word(e);
    } else {
        add_char(e, c);
    }
}

/* Lower-case and feed, after accent stripping. */
static void feed_cased(struct enc *e, int32_t c)
{
    if (e->wp->opt.lowercase)
        c = utf8proc_tolower(c);
    feed(e, c);
}

/* Feeds text[from, to) to e (a full e stops it early, unless e is a ring); the end of the
 * last word is flushed. Returns where it stopped. */
static size_t encode_range(struct enc *e, const uint8_t *p, size_t i, size_t len)
{
    while (i < len && (e->ring || e->n < e->max)) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) { /* invalid UTF-8: drop the byte */
            i++;
            continue;
        }
        i += (size_t)k;
        if (c == 0 || c == 0xFFFD || is_control(c))
            continue;
        if (is_space(c))
            c = ' ';
        if (e->wp->opt.chinese_chars && is_cjk(c)) {
            feed(e, ' ');
            feed_cased(e, c);
            feed(e, ' ');
            continue;
        }
        if (e->wp->opt.strip_accents && c >= 0x80) {
            utf8proc_int32_t d[16];
            int last = 0;
            utf8proc_ssize_t nd =
                utf8proc_decompose_char(c, d, 16, UTF8PROC_DECOMPOSE, &last);
            if (nd > 0 && nd <= 16) {
                for (utf8proc_ssize_t j = 0; j < nd; j++)
                    if (utf8proc_category(d[j]) != UTF8PROC_CATEGORY_MN)
                        feed_cased(e, d[j]);
                continue;
            }
        }
        feed_cased(e, c);
    }
    flush_word(e);
    return i;
}

int emb_wp_encode(const emb_wp *wp, const char *text, size_t len, int32_t *ids, int max_ids)
{
    if (max_ids < 2)
        return EMB_EINVAL;
    struct enc e = {.wp = wp, .ids = ids, .max = max_ids - 1};
    emit(&e, wp->cls);
    encode_range(&e, (const uint8_t *)text, 0, len);
    e.ids[e.n++] = wp->sep; /* room was kept for it */
    return e.n;
}

int emb_wp_encode_ends(const emb_wp *wp, const char *text, size_t len, int32_t *ids,
                       int max_ids)
{
    const int tail = (max_ids - 2) / 2;
    if (max_ids < 4)
        return emb_wp_encode(wp, text, len, ids, max_ids);
    const uint8_t *p = (const uint8_t *)text;
    /* room for one piece more than fit: a text that fills it does not fit */
    struct enc e = {.wp = wp, .ids = ids, .max = max_ids};
    emit(&e, wp->cls);
    encode_range(&e, p, 0, len);
    if (e.n < max_ids) { /* it fits: as emb_wp_encode() encodes it */
        e.ids[e.n++] = wp->sep;
        return e.n;
    }
    /* the head: [CLS] and the first pieces, leaving room for the tail's */
    e = (struct enc){.wp = wp, .ids = ids, .max = max_ids - 1 - tail};
    emit(&e, wp->cls);
    const size_t stop = encode_range(&e, p, 0, len);
    /* the tail: the last pieces of the text's end (16 bytes a piece is ample), from the
     * first space past the head's end, or from a character boundary where no space comes
     * soon (scripts written without them) */
    const size_t start = len - stop > (size_t)tail * 16 ? len - (size_t)tail * 16 : stop;
    size_t from = start;
    while (from < len && from - start < 64 && p[from] != ' ' && p[from] != '\n' &&
           p[from] != '\t')
        from++;
    if (from == len || from - start == 64)
        for (from = start; from < len && (p[from] & 0xC0) == 0x80; from++)
            ;
    int32_t ring[tail];
    struct enc t = {.wp = wp, .ids = ring, .ring = tail};
    encode_range(&t, p, from, len);
    const int keep = t.n < tail ? t.n : tail;
    for (int k = 0; k < keep; k++)
        e.ids[e.n++] = ring[(t.n - keep + k) % tail];
    e.ids[e.n++] = wp->sep;
    return e.n;
}

