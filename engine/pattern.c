/* pattern — JSON Schema's regular expressions as position automata (see pattern.h). */
#include "pattern.h"

#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CP 0x10FFFF
#define MAX_COUNT 1000 /* {n,m} */
#define MAX_NEST 32
#define INF_LEN INT32_MAX

struct range {
    uint32_t lo, hi;
};

/* a class: ranges[first..first+count), sorted, apart */
struct cls {
    int32_t first, count;
};

struct eng_pattern {
    int n_pos;                    /* positions, 0 the start */
    int32_t cls[ENG_PAT_MAX_POS]; /* each position's class (0: the start's, none) */
    eng_pat_set follow[ENG_PAT_MAX_POS];
    eng_pat_set accept;
    eng_pat_set ascii[128]; /* the positions whose class holds each ASCII character */
    int32_t shortest[ENG_PAT_MAX_POS], longest[ENG_PAT_MAX_POS]; /* to a match; INF_LEN */
    struct cls *cl;
    int n_cl, cap_cl;
    struct range *r;
    int n_r, cap_r;
};

static void set_bit(eng_pat_set *s, int i)
{
    s->w[i >> 6] |= 1ULL << (i & 63);
}

static int has_bit(const eng_pat_set *s, int i)
{
    return (int)(s->w[i >> 6] >> (i & 63) & 1);
}

static void set_or(eng_pat_set *a, const eng_pat_set *b)
{
    for (int i = 0; i < ENG_PAT_MAX_POS / 64; i++)
        a->w[i] |= b->w[i];
}

static int set_empty(const eng_pat_set *s)
{
    for (int i = 0; i < ENG_PAT_MAX_POS / 64; i++)
        if (s->w[i]) return 0;
    return 1;
}

static int set_meets(const eng_pat_set *a, const eng_pat_set *b)
{
    for (int i = 0; i < ENG_PAT_MAX_POS / 64; i++)
        if (a->w[i] & b->w[i]) return 1;
    return 0;
}

/* the next set bit from i on, or -1 */
static int next_bit(const eng_pat_set *s, int i)
{
    for (; i < ENG_PAT_MAX_POS; i++) {
        uint64_t w = s->w[i >> 6] >> (i & 63);
        if (w) return i + __builtin_ctzll(w);
        i |= 63;
    }
    return -1;
}

/* ---- classes, built in a scratch list then stored ------------------------------------ */

struct rlist {
    struct range *r;
    int n, cap;
    int oom;
};

static void rl_add(struct rlist *l, uint32_t lo, uint32_t hi)
{
    if (lo > hi) return;
    if (eng_grow((void **)&l->r, &l->cap, l->n + 1, sizeof *l->r)) {
        l->oom = 1;
        return;
    }
    l->r[l->n++] = (struct range){lo, hi};
}

static int by_lo(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void rl_normalize(struct rlist *l)
{
    if (!l->n) return;
    qsort(l->r, (size_t)l->n, sizeof *l->r, by_lo);
    int w = 0;
    for (int i = 1; i < l->n; i++) {
        if (l->r[i].lo <= l->r[w].hi + 1) {
            if (l->r[i].hi > l->r[w].hi) l->r[w].hi = l->r[i].hi;
        } else {
            l->r[++w] = l->r[i];
        }
    }
    l->n = w + 1;
}

static void rl_negate(struct rlist *l)
{
    rl_normalize(l);
    struct rlist o = {0};
    uint32_t at = 0;
    for (int i = 0; i < l->n; i++) {
        if (l->r[i].lo > at) rl_add(&o, at, l->r[i].lo - 1);
        at = l->r[i].hi + 1;
    }
    if (at <= MAX_CP) rl_add(&o, at, MAX_CP);
    free(l->r);
    o.oom |= l->oom;
    *l = o;
}

/* Takes out what a JSON string cannot carry but as a \u escape, and the surrogates. */
static void rl_writable(struct rlist *l)
{
    static const struct range out[] = {{0, 7}, {0x0B, 0x0B}, {0x0E, 0x1F}, {0xD800, 0xDFFF}};
    struct rlist keep = {0};
    for (size_t k = 0; k < sizeof out / sizeof *out; k++)
        rl_add(&keep, out[k].lo, out[k].hi);
    rl_negate(&keep); /* what may stay */
    rl_normalize(l);
    struct rlist o = {0};
    for (int i = 0; i < l->n; i++)
        for (int j = 0; j < keep.n; j++) {
            uint32_t lo = l->r[i].lo > keep.r[j].lo ? l->r[i].lo : keep.r[j].lo;
            uint32_t hi = l->r[i].hi < keep.r[j].hi ? l->r[i].hi : keep.r[j].hi;
            rl_add(&o, lo, hi);
        }
    o.oom |= l->oom | keep.oom;
    free(keep.r);
    free(l->r);
    *l = o;
}

static void add_digit(struct rlist *l)
{
    rl_add(l, '0', '9');
}

static void add_word(struct rlist *l)
{
    rl_add(l, '0', '9');
    rl_add(l, 'A', 'Z');
    rl_add(l, 'a', 'z');
    rl_add(l, '_', '_');
}

static void add_space(struct rlist *l) /* ECMA-262's WhiteSpace and LineTerminator */
{
    static const struct range sp[] = {
        {9, 13},          {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        rl_add(l, sp[i].lo, sp[i].hi);
}

/* ---- parsing ----------------------------------------------------------------------- */

enum { X_CLASS, X_CAT, X_ALT, X_REP, X_EMPTY };

struct xnode {
    int kind;
    int a, b;     /* X_CAT, X_ALT: children; X_REP: a */
    int min, max; /* X_REP; max -1: no bound */
    int cls;      /* X_CLASS */
};

struct parser {
    const char *s;
    size_t n, i;
    eng_pattern *p;
    struct xnode *x;
    int n_x, cap_x;
    int depth;
    char *err;
    size_t errlen;
    int failed; /* ENG_EINVAL or ENG_ENOMEM */
};

static int fail(struct parser *ps, const char *fmt, ...)
{
    if (ps->failed) return -1;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errlen, "pattern: %s", what);
    ps->failed = ENG_EINVAL;
    return -1;
}

static int oom(struct parser *ps)
{
    if (!ps->failed) {
        snprintf(ps->err, ps->errlen, "out of memory");
        ps->failed = ENG_ENOMEM;
    }
    return -1;
}

static int node(struct parser *ps, struct xnode x)
{
    if (ps->n_x >= 4096) return fail(ps, "too long");
    if (eng_grow((void **)&ps->x, &ps->cap_x, ps->n_x + 1, sizeof *ps->x)) return oom(ps);
    ps->x[ps->n_x] = x;
    return ps->n_x++;
}

/* Stores a class (made writable) as an X_CLASS node. */
static int class_node(struct parser *ps, struct rlist *l)
{
    rl_writable(l);
    if (l->oom) {
        free(l->r);
        return oom(ps);
    }
    if (!l->n) {
        free(l->r);
        return fail(ps, "a class matches no character a JSON string can hold");
    }
    eng_pattern *p = ps->p;
    if (eng_grow((void **)&p->r, &p->cap_r, p->n_r + l->n, sizeof *p->r) ||
        eng_grow((void **)&p->cl, &p->cap_cl, p->n_cl + 1, sizeof *p->cl)) {
        free(l->r);
        return oom(ps);
    }
    memcpy(p->r + p->n_r, l->r, sizeof *l->r * (size_t)l->n);
    p->cl[p->n_cl] = (struct cls){p->n_r, l->n};
    p->n_r += l->n;
    free(l->r);
    return node(ps, (struct xnode){.kind = X_CLASS, .cls = p->n_cl++});
}

static int peek(struct parser *ps)
{
    return ps->i < ps->n ? (unsigned char)ps->s[ps->i] : -1;
}

/* A UTF-8 character of the pattern: its code point, or -1. */
static int32_t utf8(struct parser *ps)
{
    const unsigned char *s = (const unsigned char *)ps->s + ps->i;
    size_t left = ps->n - ps->i;
    uint32_t c = s[0];
    int more = c < 0x80                 ? 0
               : c >= 0xC2 && c <= 0xDF ? 1
               : c >= 0xE0 && c <= 0xEF ? 2
               : c >= 0xF0 && c <= 0xF4 ? 3
                                        : -1;
    if (more < 0 || (size_t)more >= left) return -1;
    if (more) c &= 0x3F >> more;
    for (int k = 1; k <= more; k++) {
        if ((s[k] & 0xC0) != 0x80) return -1;
        c = c << 6 | (s[k] & 0x3F);
    }
    ps->i += (size_t)more + 1;
    return (int32_t)c;
}

static int hex(struct parser *ps, int digits)
{
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        int c = peek(ps);
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + (uint32_t)d;
        ps->i++;
    }
    return (int)v;
}

/* After a backslash: a class escape added to l (returns 1), or one character (its code
 * point, returned in *cp, returns 0); -1 when refused. in_class: [\b] is a backspace. */
static int escape(struct parser *ps, struct rlist *l, uint32_t *cp, int in_class)
{
    int c = peek(ps);
    if (c < 0) return fail(ps, "a pattern cannot end with a backslash");
    ps->i++;
    struct rlist neg = {0};
    switch (c) {
    case 'd':
        add_digit(l);
        return 1;
    case 'w':
        add_word(l);
        return 1;
    case 's':
        add_space(l);
        return 1;
    case 'D':
    case 'W':
    case 'S':
        c == 'D' ? add_digit(&neg) : c == 'W' ? add_word(&neg) : add_space(&neg);
        rl_negate(&neg);
        for (int i = 0; i < neg.n; i++)
            rl_add(l, neg.r[i].lo, neg.r[i].hi);
        l->oom |= neg.oom;
        free(neg.r);
        return 1;
    case 'n':
        *cp = '\n';
        return 0;
    case 'r':
        *cp = '\r';
        return 0;
    case 't':
        *cp = '\t';
        return 0;
    case 'f':
        *cp = '\f';
        return 0;
    case 'v':
        *cp = '\v';
        return 0;
    case '0':
        *cp = 0;
        return 0;
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 0;
        }
        return fail(ps, "\\b (a word boundary) is not supported");
    case 'x':
    case 'u': {
        int v = hex(ps, c == 'x' ? 2 : 4);
        if (v < 0) return fail(ps, "\\%c needs %d hex digits", c, c == 'x' ? 2 : 4);
        *cp = (uint32_t)v;
        return 0;
    }
    }
    if (c >= '1' && c <= '9') return fail(ps, "backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return fail(ps, "\\%c is not supported", c);
    ps->i--;
    int32_t u = utf8(ps);
    if (u < 0) return fail(ps, "it is not UTF-8");
    *cp = (uint32_t)u; /* escaped punctuation: itself */
    return 0;
}

static int parse_class(struct parser *ps)
{
    struct rlist l = {0};
    int negate = peek(ps) == '^';
    if (negate) ps->i++;
    for (;;) {
        int c = peek(ps);
        if (c < 0) {
            free(l.r);
            return fail(ps, "a class is not closed with ]");
        }
        if (c == ']') { /* ECMA-262: "[]" matches nothing, "[^]" anything */
            ps->i++;
            break;
        }
        uint32_t lo;
        if (c == '\\') {
            ps->i++;
            int e = escape(ps, &l, &lo, 1);
            if (e < 0) {
                free(l.r);
                return -1;
            }
            if (e == 1) continue;
        } else {
            int32_t u = utf8(ps);
            if (u < 0) {
                free(l.r);
                return fail(ps, "it is not UTF-8");
            }
            lo = (uint32_t)u;
        }
        uint32_t hi = lo;
        if (peek(ps) == '-' && ps->i + 1 < ps->n && ps->s[ps->i + 1] != ']') {
            ps->i++;
            if (peek(ps) == '\\') {
                ps->i++;
                if (escape(ps, &l, &hi, 1) != 0) {
                    free(l.r);
                    return ps->failed ? -1 : fail(ps, "a class range ends with a class");
                }
            } else {
                int32_t u = utf8(ps);
                if (u < 0) {
                    free(l.r);
                    return fail(ps, "it is not UTF-8");
                }
                hi = (uint32_t)u;
            }
            if (hi < lo) {
                free(l.r);
                return fail(ps, "a class range is out of order");
            }
        }
        rl_add(&l, lo, hi);
    }
    if (negate) rl_negate(&l);
    return class_node(ps, &l);
}

static int parse_alt(struct parser *ps, int top);

static int parse_atom(struct parser *ps)
{
    int c = peek(ps);
    struct rlist l = {0};
    if (c == '(') {
        ps->i++;
        if (peek(ps) == '?') {
            ps->i++;
            int k = peek(ps);
            if (k == ':') {
                ps->i++;
            } else if (k == '<' && ps->i + 1 < ps->n && ps->s[ps->i + 1] != '=' &&
                       ps->s[ps->i + 1] != '!') {
                while (peek(ps) >= 0 && peek(ps) != '>')
                    ps->i++;
                if (peek(ps) != '>') return fail(ps, "a group's name is not closed with >");
                ps->i++;
            } else {
                return fail(ps, "lookaround is not supported");
            }
        }
        if (++ps->depth > MAX_NEST) return fail(ps, "groups nested more than %d deep", MAX_NEST);
        int x = parse_alt(ps, 0);
        ps->depth--;
        if (x < 0) return -1;
        if (peek(ps) != ')') return fail(ps, "a group is not closed with )");
        ps->i++;
        return x;
    }
    if (c == '[') {
        ps->i++;
        return parse_class(ps);
    }
    if (c == '.') {
        ps->i++;
        struct rlist lt = {0};
        rl_add(&lt, '\n', '\n');
        rl_add(&lt, '\r', '\r');
        rl_add(&lt, 0x2028, 0x2029);
        rl_negate(&lt);
        return class_node(ps, &lt);
    }
    if (c == '^' || c == '$')
        return fail(ps, "%c is supported only at the start (^) or the end ($)", c);
    if (c == '*' || c == '+' || c == '?') return fail(ps, "%c follows nothing", c);
    uint32_t cp;
    if (c == '\\') {
        ps->i++;
        int e = escape(ps, &l, &cp, 0);
        if (e < 0) {
            free(l.r);
            return -1;
        }
        if (e == 1) return class_node(ps, &l);
    } else {
        int32_t u = utf8(ps);
        if (u < 0) return fail(ps, "it is not UTF-8");
        cp = (uint32_t)u;
    }
    rl_add(&l, cp, cp);
    return class_node(ps, &l);
}

/* {n}, {n,}, {n,m} at ps->i (just after the brace): 1 read, 0 not a quantifier (the brace
 * is a character, as ECMA-262's web reading has it). */
static int counts(struct parser *ps, int *min, int *max)
{
    size_t at = ps->i;
    long a = -1, b = -1;
    char *end;
    const char *s = ps->s;
    if (at >= ps->n || s[at] < '0' || s[at] > '9') return 0;
    a = strtol(s + at, &end, 10);
    at = (size_t)(end - s);
    if (at < ps->n && s[at] == ',') {
        at++;
        if (at < ps->n && s[at] >= '0' && s[at] <= '9') {
            b = strtol(s + at, &end, 10);
            at = (size_t)(end - s);
        }
    } else {
        b = a;
    }
    if (at >= ps->n || s[at] != '}') return 0;
    ps->i = at + 1;
    *min = a > MAX_COUNT ? MAX_COUNT + 1 : (int)a;
    *max = b < 0 ? -1 : b > MAX_COUNT ? MAX_COUNT + 1 : (int)b;
    return 1;
}

static int parse_cat(struct parser *ps, int top)
{
    int acc = -1;
    for (;;) {
        int c = peek(ps);
        if (c < 0 || c == '|' || c == ')') break;
        if (top && c == '$' && (ps->i + 1 == ps->n || ps->s[ps->i + 1] == '|')) break;
        int x;
        if (c == '{') {
            int mn, mx;
            size_t at = ps->i++;
            if (counts(ps, &mn, &mx)) {
                ps->i = at;
                return fail(ps, "{ follows nothing");
            }
            struct rlist l = {0};
            rl_add(&l, '{', '{');
            x = class_node(ps, &l);
        } else {
            x = parse_atom(ps);
        }
        if (x < 0) return -1;
        for (int quantified = 0;; quantified = 1) { /* a quantifier, one */
            int q = peek(ps), mn, mx;
            if (quantified && (q == '*' || q == '+' || q == '?' ||
                               (q == '{' && ps->i + 1 < ps->n && ps->s[ps->i + 1] >= '0' &&
                                ps->s[ps->i + 1] <= '9')))
                return fail(ps, "%c follows a quantifier (nothing to repeat)", q);
            if (q == '*' || q == '+' || q == '?') {
                ps->i++;
                mn = q == '+';
                mx = q == '?' ? 1 : -1;
            } else if (q == '{') {
                ps->i++;
                if (!counts(ps, &mn, &mx)) {
                    ps->i--;
                    break;
                }
                if (mn > MAX_COUNT || mx > MAX_COUNT)
                    return fail(ps, "a count above %d", MAX_COUNT);
                if (mx >= 0 && mx < mn) return fail(ps, "a count {n,m} with m below n");
            } else {
                break;
            }
            if (peek(ps) == '?') ps->i++; /* lazy: the same strings */
            x = node(ps, (struct xnode){.kind = X_REP, .a = x, .min = mn, .max = mx});
            if (x < 0) return -1;
        }
        acc = acc < 0 ? x : node(ps, (struct xnode){.kind = X_CAT, .a = acc, .b = x});
        if (acc < 0) return -1;
    }
    return acc < 0 ? node(ps, (struct xnode){.kind = X_EMPTY}) : acc;
}

/* Any string: [^] repeated, around an alternative not anchored. */
static int any_string(struct parser *ps)
{
    struct rlist l = {0};
    rl_add(&l, 0, MAX_CP);
    int c = class_node(ps, &l);
    return c < 0 ? c : node(ps, (struct xnode){.kind = X_REP, .a = c, .min = 0, .max = -1});
}

static int parse_alt(struct parser *ps, int top)
{
    int acc = -1;
    for (;;) {
        int start = top && peek(ps) == '^';
        if (start) ps->i++;
        int x = parse_cat(ps, top);
        if (x < 0) return -1;
        if (top) {
            int end = peek(ps) == '$';
            if (end) ps->i++;
            if (!start) {
                int a = any_string(ps);
                x = a < 0 ? a : node(ps, (struct xnode){.kind = X_CAT, .a = a, .b = x});
            }
            if (x >= 0 && !end) {
                int a = any_string(ps);
                x = a < 0 ? a : node(ps, (struct xnode){.kind = X_CAT, .a = x, .b = a});
            }
            if (x < 0) return -1;
        }
        acc = acc < 0 ? x : node(ps, (struct xnode){.kind = X_ALT, .a = acc, .b = x});
        if (acc < 0) return -1;
        if (peek(ps) != '|') break;
        ps->i++;
    }
    return acc;
}

/* ---- the position automaton -------------------------------------------------------- */

struct frag {
    int nullable;
    eng_pat_set first, last;
};

static struct frag cat(eng_pattern *p, struct frag a, struct frag b)
{
    for (int q = next_bit(&a.last, 0); q >= 0; q = next_bit(&a.last, q + 1))
        set_or(&p->follow[q], &b.first);
    struct frag r = {a.nullable && b.nullable, a.first, b.last};
    if (a.nullable) set_or(&r.first, &b.first);
    if (b.nullable) set_or(&r.last, &a.last);
    return r;
}

static int build(struct parser *ps, int x, struct frag *out)
{
    eng_pattern *p = ps->p;
    const struct xnode *n = &ps->x[x];
    struct frag a, b;
    memset(out, 0, sizeof *out);
    switch (n->kind) {
    case X_EMPTY:
        out->nullable = 1;
        return 0;
    case X_CLASS: {
        if (p->n_pos >= ENG_PAT_MAX_POS)
            return fail(ps,
                        "more than %d character positions (counted repetition spelled "
                        "out)",
                        ENG_PAT_MAX_POS - 1);
        int q = p->n_pos++;
        p->cls[q] = n->cls;
        set_bit(&out->first, q);
        set_bit(&out->last, q);
        return 0;
    }
    case X_CAT:
        if (build(ps, n->a, &a) || build(ps, n->b, &b)) return -1;
        *out = cat(p, a, b);
        return 0;
    case X_ALT:
        if (build(ps, n->a, &a) || build(ps, n->b, &b)) return -1;
        out->nullable = a.nullable || b.nullable;
        out->first = a.first;
        set_or(&out->first, &b.first);
        out->last = a.last;
        set_or(&out->last, &b.last);
        return 0;
    case X_REP: {
        /* copies of the child, each built afresh: min of them, then a loop, or max - min
         * optional ones nested (x(x(x)?)?). A child without positions matches the empty
         * string alone, however repeated: built once, so that nested counts cost nothing */
        int child = n->a, before = p->n_pos, unused = 1;
        struct frag c;
        out->nullable = 1;
        if (n->max == 0) return 0; /* x{0}: the empty string */
        if (build(ps, child, &c)) return -1;
        if (p->n_pos == before) return 0;
#define COPY(f) (unused ? (unused = 0, (f) = c, 0) : build(ps, child, &(f)))
        for (int i = 0; i < n->min; i++) {
            if (COPY(a)) return -1;
            *out = cat(p, *out, a);
        }
        if (n->max < 0) {
            if (COPY(a)) return -1;
            for (int q = next_bit(&a.last, 0); q >= 0; q = next_bit(&a.last, q + 1))
                set_or(&p->follow[q], &a.first);
            a.nullable = 1;
            *out = cat(p, *out, a);
            return 0;
        }
        struct frag tail = {.nullable = 1};
        for (int i = n->min; i < n->max; i++) {
            if (COPY(a)) return -1;
            tail = cat(p, a, tail);
            tail.nullable = 1;
        }
#undef COPY
        *out = cat(p, *out, tail);
        return 0;
    }
    }
    return fail(ps, "internal error");
}

/* Tarjan's strongly connected components: cyc[q] when q lies on a cycle. */
struct scc {
    const eng_pattern *p;
    int index[ENG_PAT_MAX_POS], low[ENG_PAT_MAX_POS], stack[ENG_PAT_MAX_POS];
    uint8_t on[ENG_PAT_MAX_POS], cyc[ENG_PAT_MAX_POS];
    int next, top;
};

static void strong(struct scc *t, int q)
{
    const eng_pattern *p = t->p;
    t->index[q] = t->low[q] = ++t->next;
    t->stack[t->top++] = q;
    t->on[q] = 1;
    for (int r = next_bit(&p->follow[q], 0); r >= 0; r = next_bit(&p->follow[q], r + 1)) {
        if (!t->index[r]) {
            strong(t, r);
            if (t->low[r] < t->low[q]) t->low[q] = t->low[r];
        } else if (t->on[r] && t->index[r] < t->low[q]) {
            t->low[q] = t->index[r];
        }
    }
    if (t->low[q] != t->index[q]) return;
    int size = 0, r;
    int from = t->top;
    do {
        r = t->stack[--from];
        size++;
    } while (r != q);
    for (int k = from; k < t->top; k++) {
        t->on[t->stack[k]] = 0;
        t->cyc[t->stack[k]] = size > 1 || has_bit(&p->follow[q], q);
    }
    t->top = from;
}

/* The longest way from q to a match, INF_LEN when a cycle is on the way (-2: not yet). */
static int32_t longest(eng_pattern *p, const struct scc *t, int q)
{
    if (p->longest[q] != -2) return p->longest[q];
    int32_t best = has_bit(&p->accept, q) ? 0 : -1;
    if (t->cyc[q]) best = INF_LEN;
    for (int r = next_bit(&p->follow[q], 0); r >= 0 && best != INF_LEN;
         r = next_bit(&p->follow[q], r + 1)) {
        int32_t l = longest(p, t, r);
        if (l == INF_LEN)
            best = INF_LEN;
        else if (l >= 0 && l + 1 > best)
            best = l + 1;
    }
    return p->longest[q] = best;
}

/* Each position's shortest and longest way to a match (every position lies on one): the
 * shortest by levels from the matches backwards, the longest over the components. */
static void distances(eng_pattern *p)
{
    int n = p->n_pos;
    eng_pat_set level = p->accept, seen = p->accept;
    for (int q = 0; q < n; q++) {
        p->shortest[q] = has_bit(&p->accept, q) ? 0 : INF_LEN;
        p->longest[q] = -2;
    }
    for (int d = 1; !set_empty(&level); d++) {
        eng_pat_set next = {{0}};
        for (int q = 0; q < n; q++)
            if (!has_bit(&seen, q) && set_meets(&p->follow[q], &level)) {
                p->shortest[q] = d;
                set_bit(&next, q);
            }
        set_or(&seen, &next);
        level = next;
    }
    struct scc *t = calloc(1, sizeof *t);
    if (!t) { /* then no bound on any length is judged */
        for (int q = 0; q < n; q++)
            p->longest[q] = INF_LEN;
        return;
    }
    t->p = p;
    for (int q = 0; q < n; q++)
        if (!t->index[q]) strong(t, q);
    for (int q = 0; q < n; q++)
        longest(p, t, q);
    free(t);
}

void eng_pattern_destroy(eng_pattern *p)
{
    if (!p) return;
    free(p->cl);
    free(p->r);
    free(p);
}

static int in_class(const eng_pattern *p, int q, uint32_t lo, uint32_t hi);

int eng_pattern_compile(const char *re, size_t len, eng_pattern **out, char *err, size_t errlen)
{
    *out = NULL;
    eng_pattern *p = calloc(1, sizeof *p);
    if (!p) return ENG_ENOMEM;
    struct parser ps = {.s = re, .n = len, .p = p, .err = err, .errlen = errlen};
    p->n_pos = 1; /* the start */
    int x = parse_alt(&ps, 1);
    if (x >= 0 && ps.i < ps.n) x = fail(&ps, "unbalanced )");
    struct frag f;
    if (x >= 0 && !build(&ps, x, &f)) {
        p->follow[0] = f.first;
        p->accept = f.last;
        if (f.nullable) set_bit(&p->accept, 0);
        distances(p);
        for (int q = 1; q < p->n_pos; q++)
            for (uint32_t c = 0; c < 128; c++)
                if (in_class(p, q, c, c)) set_bit(&p->ascii[c], q);
    }
    free(ps.x);
    if (ps.failed) {
        eng_pattern_destroy(p);
        return ps.failed;
    }
    *out = p;
    return 0;
}

/* ---- running it -------------------------------------------------------------------- */

/* A state holds what the questions asked of it most (a token mask asks eng_pat_any of one
 * state for every branch of the vocabulary) read at once: the positions the next character
 * may take, the union of the follow sets of the positions reached, and bit 0 (the start's,
 * which no character takes) when the characters so far match. */
static void state_of(const eng_pattern *p, const eng_pat_set *at, eng_pat_set *s)
{
    memset(s, 0, sizeof *s);
    for (int q = next_bit(at, 0); q >= 0; q = next_bit(at, q + 1))
        set_or(s, &p->follow[q]);
    if (set_meets(at, &p->accept)) set_bit(s, 0);
}

void eng_pat_start(const eng_pattern *p, eng_pat_set *s)
{
    eng_pat_set at = {{0}};
    set_bit(&at, 0);
    state_of(p, &at, s);
}

static int in_class(const eng_pattern *p, int q, uint32_t lo, uint32_t hi)
{
    const struct cls *c = &p->cl[p->cls[q]];
    const struct range *r = p->r + c->first;
    int a = 0, b = c->count - 1;
    while (a <= b) { /* the first range that ends at lo or after */
        int m = (a + b) / 2;
        if (r[m].hi < lo)
            a = m + 1;
        else
            b = m - 1;
    }
    return a < c->count && r[a].lo <= hi;
}

int eng_pat_step(const eng_pattern *p, const eng_pat_set *s, uint32_t cp, eng_pat_set *next)
{
    eng_pat_set at = {{0}};
    if (cp < 128)
        for (int i = 0; i < ENG_PAT_MAX_POS / 64; i++)
            at.w[i] = s->w[i] & p->ascii[cp].w[i];
    else
        for (int q = next_bit(s, 1); q >= 0; q = next_bit(s, q + 1))
            if (in_class(p, q, cp, cp)) set_bit(&at, q);
    if (set_empty(&at)) return 0;
    state_of(p, &at, next);
    return 1;
}

/* From position q, with done characters written, a match of a length in [lo, hi]. */
static int length_ok(const eng_pattern *p, int q, uint32_t done, int32_t lo, int32_t hi)
{
    int64_t sh = p->shortest[q], lg = p->longest[q];
    if (sh == INF_LEN) return 0;
    if (hi >= 0 && (int64_t)done + sh > hi) return 0;
    return lg == INF_LEN || (int64_t)done + lg >= lo;
}

int eng_pat_any(const eng_pattern *p, const eng_pat_set *s, uint32_t lo, uint32_t hi, uint32_t done,
                int32_t len_lo, int32_t len_hi)
{
    for (int q = next_bit(s, 1); q >= 0; q = next_bit(s, q + 1))
        if (in_class(p, q, lo, hi) && length_ok(p, q, done, len_lo, len_hi)) return 1;
    return 0;
}

int eng_pat_accepting(const eng_pattern *p, const eng_pat_set *s)
{
    (void)p;
    return has_bit(s, 0);
}

int32_t eng_pat_need(const eng_pattern *p, const eng_pat_set *s)
{
    if (has_bit(s, 0)) return 0;
    int64_t best = INF_LEN;
    for (int q = next_bit(s, 1); q >= 0; q = next_bit(s, q + 1))
        if (p->shortest[q] != INF_LEN && 1 + (int64_t)p->shortest[q] < best)
            best = 1 + (int64_t)p->shortest[q];
    return best < INF_LEN ? (int32_t)best : -1;
}

/* A match ends here, or goes on through a position the next character takes. */
int eng_pat_length_ok(const eng_pattern *p, const eng_pat_set *s, uint32_t done, int32_t lo,
                      int32_t hi)
{
    if (has_bit(s, 0) && (int64_t)done >= lo && (hi < 0 || (int64_t)done <= hi)) return 1;
    for (int q = next_bit(s, 1); q >= 0; q = next_bit(s, q + 1))
        if (length_ok(p, q, done + 1, lo, hi)) return 1;
    return 0;
}
