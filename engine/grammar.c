/* grammar — JSON and JSON Schema held during generation (see grammar.h). */
#include "grammar.h"

#include "engine.h"
#include "pattern.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- the compiled schema ------------------------------------------------------------- */

enum nkind { N_ANY, N_OBJECT, N_ARRAY, N_STRING, N_NUMBER, N_INTEGER, N_ENUM, N_UNION };

struct node {
    uint8_t kind;
    /* N_OBJECT: its declared properties, g->props[first..first+count);
     * N_ENUM: its values as JSON texts, g->lits[first..); N_UNION: g->alts[first..) */
    int32_t first, count;
    /* N_ARRAY: the items' node (-1: none, only [] or the tuple's), the tuple's nodes
     * (prefixItems) g->alts[first..first+count); N_OBJECT without declared properties:
     * the values' node (-1: no key at all) */
    int32_t sub;
    int32_t lo, hi; /* N_ARRAY: items, N_STRING: characters; hi -1: no bound */
};

/* Numbers are compared exactly, as integers in units: 1 for an integer node, 10^-16 (the
 * finest fraction a number is written with) for a number node. */
__extension__ typedef __int128 i128;

/* N_NUMBER, N_INTEGER with bounds (their node's sub; -1: none): the values allowed are the
 * multiples of step (0: any) in [lo, hi], in the node's units. */
struct nbound {
    i128 lo, hi, step;
};

struct lit {
    int32_t off, len; /* in g->bytes */
};

struct prop {
    struct lit key; /* the name as a JSON string, quotes included */
    int32_t node;
    int required;
};

/* nodes every grammar has, for values of any type */
enum { B_ANY, B_STRING, B_TRUE, B_FALSE, B_NULL, B_NUMBER, B_OBJECT, B_ARRAY, B_COUNT };

#define MAX_NODES 20000
#define MAX_GAP_SPACES 20
/* White space an optional answer may begin with before it says what it is. */
#define MAX_LEAD 24
#define MAX_UNION_EXPANSION 16

struct eng_grammar {
    struct node *nodes;
    int n_nodes, cap_nodes;
    struct prop *props;
    int n_props, cap_props;
    struct lit *lits;
    int n_lits, cap_lits;
    int32_t *alts;
    int n_alts, cap_alts;
    char *bytes;
    size_t n_bytes, cap_bytes;
    struct nbound *nb;
    int n_nb, cap_nb;
    eng_pattern **pats; /* N_STRING's sub, when it has a pattern */
    int n_pats, cap_pats;
    /* per node, the levels of nesting below a value of it that its shortest document needs
     * (grammar_depths()): DEEP_INF where no document is finite */
    uint8_t *deep;
    int root;
};

static int new_node(eng_grammar *g, enum nkind kind)
{
    if (g->n_nodes >= MAX_NODES) return ENG_EINVAL;
    if (eng_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
        return ENG_ENOMEM;
    g->nodes[g->n_nodes] = (struct node){.kind = kind, .sub = -1, .hi = -1};
    return g->n_nodes++;
}

/* Appends bytes; the literal they make, or len -1 when out of memory. */
static struct lit add_bytes(eng_grammar *g, const char *s, size_t n)
{
    if (g->n_bytes + n > g->cap_bytes) {
        size_t c = g->cap_bytes ? g->cap_bytes : 256;
        while (c < g->n_bytes + n)
            c *= 2;
        char *b = realloc(g->bytes, c);
        if (!b) return (struct lit){0, -1};
        g->bytes = b;
        g->cap_bytes = c;
    }
    memcpy(g->bytes + g->n_bytes, s, n);
    struct lit l = {(int32_t)g->n_bytes, (int32_t)n};
    g->n_bytes += n;
    return l;
}

/* An enum node of the given JSON texts. */
static int enum_node(eng_grammar *g, const char *const *texts, int n)
{
    int id = new_node(g, N_ENUM);
    if (id < 0 || eng_grow((void **)&g->lits, &g->cap_lits, g->n_lits + n, sizeof *g->lits))
        return id < 0 ? id : ENG_ENOMEM;
    g->nodes[id].first = g->n_lits;
    g->nodes[id].count = n;
    for (int i = 0; i < n; i++) {
        struct lit l = add_bytes(g, texts[i], strlen(texts[i]));
        if (l.len < 0) return ENG_ENOMEM;
        g->lits[g->n_lits++] = l;
    }
    return id;
}

static int builtins(eng_grammar *g)
{
    static const char *const t[] = {"true"}, *const f[] = {"false"}, *const n[] = {"null"};
    if (new_node(g, N_ANY) != B_ANY || new_node(g, N_STRING) != B_STRING ||
        enum_node(g, t, 1) != B_TRUE || enum_node(g, f, 1) != B_FALSE ||
        enum_node(g, n, 1) != B_NULL || new_node(g, N_NUMBER) != B_NUMBER ||
        new_node(g, N_OBJECT) != B_OBJECT || new_node(g, N_ARRAY) != B_ARRAY)
        return ENG_ENOMEM;
    g->nodes[B_OBJECT].sub = B_ANY;
    g->nodes[B_ARRAY].sub = B_ANY;
    return 0;
}

/* ---- compiling a schema -------------------------------------------------------------- */

struct memo {
    const json_t *schema;
    int node;
};

struct build {
    eng_grammar *g;
    json_t *root;
    struct memo *memo;
    int n_memo, cap_memo;
    int depth; /* of compile()'s recursion */
    char *err;
    size_t errlen;
};

static int fail(struct build *b, const char *path, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (*path)
        snprintf(b->err, b->errlen, "%s: %s", path, what);
    else
        snprintf(b->err, b->errlen, "%s", what);
    return ENG_EINVAL;
}

static int compile(struct build *b, json_t *s, const char *path);

/* (discriminator: OpenAPI's, in pydantic's tagged unions; oneOf holds all the same) */
static const char *const annotations[] = {
    "title",       "description",      "default",         "examples",      "format",    "$schema",
    "$id",         "$comment",         "deprecated",      "readOnly",      "writeOnly", "$defs",
    "definitions", "contentMediaType", "contentEncoding", "discriminator",
};
static const char *const structural[] = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "pattern",
};

static int listed(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i])) return 1;
    return 0;
}
#define LISTED(key, list) listed(key, list, sizeof list / sizeof *list)

/* The structural keywords of s other than those named: the first, or NULL. */
static const char *other_keyword(json_t *s, const char *const *keep, size_t n)
{
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (LISTED(k, annotations) || listed(k, keep, n)) continue;
        return k;
    }
    return NULL;
}

static void sub_path(char *out, size_t cap, const char *path, const char *a, const char *b)
{
    snprintf(out, cap, "%s%s%s%s%s", path, *path ? "." : "", a, b ? "." : "", b ? b : "");
}

/* A non-negative integer keyword: its value, def when absent, -2 when invalid. */
static long long count_kw(json_t *s, const char *key, long long def)
{
    json_t *v = json_object_get(s, key);
    if (!v) return def;
    if (json_is_integer(v) && json_integer_value(v) >= 0) return json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 1e9 &&
        json_real_value(v) == floor(json_real_value(v)))
        return (long long)json_real_value(v);
    return -2;
}

static int bounds(struct build *b, json_t *s, const char *path, const char *lo_key,
                  const char *hi_key, int32_t *lo, int32_t *hi)
{
    long long l = count_kw(s, lo_key, 0), h = count_kw(s, hi_key, -1);
    if (l == -2 || h == -2)
        return fail(b, path, "%s must be a non-negative integer", l == -2 ? lo_key : hi_key);
    if (l > 1 << 20 || h > 1 << 20)
        return fail(b, path, "%s is over 1048576", l > 1 << 20 ? lo_key : hi_key);
    if (h >= 0 && l > h) return fail(b, path, "%s is above %s", lo_key, hi_key);
    *lo = (int32_t)l;
    *hi = (int32_t)h;
    return 0;
}

/* A JSON pointer into the root ("#", "#/$defs/Name", "#/properties/a~1b/items", ...). */
static json_t *resolve(json_t *root, const char *ref)
{
    if (ref[0] != '#' || (ref[1] && ref[1] != '/')) return NULL;
    json_t *at = root;
    const char *p = ref + 1;
    while (*p == '/' && at) {
        p++;
        char tok[256];
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1')) c = *++p == '0' ? '~' : '/';
            if (n + 1 >= sizeof tok) return NULL;
            tok[n++] = c;
        }
        tok[n] = 0;
        if (json_is_object(at)) {
            at = json_object_get(at, tok);
        } else if (json_is_array(at)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            at = *end || !n ? NULL : json_array_get(at, i);
        } else {
            at = NULL;
        }
    }
    return at;
}

/* Whether a JSON value is of a schema type name. */
static int of_type(json_t *v, const char *t)
{
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return 0;
}

static int type_allows(json_t *type, json_t *v)
{
    if (!type) return 1;
    if (json_is_string(type)) return of_type(v, json_string_value(type));
    size_t i;
    json_t *t;
    json_array_foreach(type, i,
                       t) if (json_is_string(t) && of_type(v, json_string_value(t))) return 1;
    return 0;
}

/* enum or const: the values as literals (of the type, when one is given). */
static int compile_enum(struct build *b, json_t *s, const char *path, int id)
{
    eng_grammar *g = b->g;
    json_t *e = json_object_get(s, "enum"), *c = json_object_get(s, "const");
    json_t *type = json_object_get(s, "type");
    if (e && c) return fail(b, path, "enum and const together are not supported");
    if (e && (!json_is_array(e) || !json_array_size(e)))
        return fail(b, path, "enum must be a non-empty array");
    size_t n = e ? json_array_size(e) : 1;
    if (n > ENG_GM_MAX_PROPERTIES)
        return fail(b, path, "enum has %zu values, more than %d", n, ENG_GM_MAX_PROPERTIES);
    const char *extra = other_keyword(s, (const char *const[]){"enum", "const", "type"}, 3);
    if (extra) return fail(b, path, "%s beside %s is not supported", extra, e ? "enum" : "const");
    if (eng_grow((void **)&g->lits, &g->cap_lits, g->n_lits + (int)n, sizeof *g->lits))
        return ENG_ENOMEM;
    g->nodes[id].kind = N_ENUM;
    g->nodes[id].first = g->n_lits;
    for (size_t i = 0; i < n; i++) {
        json_t *v = e ? json_array_get(e, i) : c;
        if (!type_allows(type, v)) continue;
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        if (!text) return ENG_ENOMEM;
        struct lit l = add_bytes(g, text, strlen(text));
        free(text);
        if (l.len < 0) return ENG_ENOMEM;
        g->lits[g->n_lits++] = l;
    }
    g->nodes[id].count = g->n_lits - g->nodes[id].first;
    if (!g->nodes[id].count)
        return fail(b, path, "no value of %s is of its type", e ? "enum" : "const");
    return 0;
}

/* A union of the nodes made by alternatives [0, n), filled into id. */
static int set_union(eng_grammar *g, int id, const int32_t *alt, int n)
{
    if (eng_grow((void **)&g->alts, &g->cap_alts, g->n_alts + n, sizeof *g->alts))
        return ENG_ENOMEM;
    g->nodes[id].kind = N_UNION;
    g->nodes[id].first = g->n_alts;
    g->nodes[id].count = n;
    memcpy(g->alts + g->n_alts, alt, sizeof *alt * (size_t)n);
    g->n_alts += n;
    return 0;
}

/* Whether literals a and b have the same bytes. */
static int same_lit(const eng_grammar *g, struct lit a, struct lit b)
{
    return a.len == b.len && !memcmp(g->bytes + a.off, g->bytes + b.off, (size_t)a.len);
}

/* A union of objects told apart by their first property, a required const string, the
 * same key in each (function calls: {"name": const, "arguments": ...}), is read as one
 * object whose first value picks the alternative (node: N_OBJECT of that one property, its
 * value an enum of the consts, the alternatives g->alts[lo..lo+hi)): one reading until
 * then, however many alternatives, where a union is a reading each. Filled into union id
 * when it is such a union; 0, ENG_ENOMEM, or ENG_EINVAL when the grammar has too many nodes. */
static int keyed_union(eng_grammar *g, int id)
{
    const struct node u = g->nodes[id];
    if (u.kind != N_UNION || u.count < 2 || u.count > ENG_GM_MAX_PROPERTIES) return 0;
    struct lit key = {0, 0}, value[ENG_GM_MAX_PROPERTIES];
    int32_t alt[ENG_GM_MAX_PROPERTIES];
    for (int i = 0; i < u.count; i++) {
        /* (through references: unions of one) */
        alt[i] = g->alts[u.first + i];
        for (int hops = 0; g->nodes[alt[i]].kind == N_UNION && g->nodes[alt[i]].count == 1;)
            if (++hops > 64 || (alt[i] = g->alts[g->nodes[alt[i]].first]) == id) return 0;
        const struct node *a = &g->nodes[alt[i]];
        if (a->kind != N_OBJECT || a->count < 1 || a->hi > 0) return 0;
        const struct prop *first = &g->props[a->first];
        const struct node *v = &g->nodes[first->node];
        if (!first->required || v->kind != N_ENUM || v->count != 1) return 0;
        value[i] = g->lits[v->first];
        if (g->bytes[value[i].off] != '"') return 0; /* (no string is another's prefix) */
        if (i && !same_lit(g, key, first->key)) return 0;
        key = first->key;
        for (int j = 0; j < i; j++)
            if (same_lit(g, value[j], value[i])) return 0;
    }
    int e = new_node(g, N_ENUM);
    if (e < 0) return e; /* (ENG_EINVAL: too many nodes) */
    if (eng_grow((void **)&g->lits, &g->cap_lits, g->n_lits + u.count, sizeof *g->lits) ||
        eng_grow((void **)&g->props, &g->cap_props, g->n_props + 1, sizeof *g->props) ||
        eng_grow((void **)&g->alts, &g->cap_alts, g->n_alts + u.count, sizeof *g->alts))
        return ENG_ENOMEM;
    memcpy(g->alts + g->n_alts, alt, sizeof *alt * (size_t)u.count);
    g->nodes[e].first = g->n_lits;
    g->nodes[e].count = u.count;
    memcpy(g->lits + g->n_lits, value, sizeof *value * (size_t)u.count);
    g->n_lits += u.count;
    g->props[g->n_props] = (struct prop){.key = key, .node = e, .required = 1};
    g->nodes[id] = (struct node){.kind = N_OBJECT,
                                 .first = g->n_props++,
                                 .count = 1,
                                 .sub = -1,
                                 .lo = g->n_alts,
                                 .hi = u.count};
    g->n_alts += u.count;
    return 0;
}

static int compile_object(struct build *b, json_t *s, const char *path, int id)
{
    eng_grammar *g = b->g;
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return fail(b, path, "properties must be an object");
    if (req && !json_is_array(req)) return fail(b, path, "required must be an array");
    size_t n = props ? json_object_size(props) : 0;
    if (n > ENG_GM_MAX_PROPERTIES)
        return fail(b, path, "%zu properties, more than %d", n, ENG_GM_MAX_PROPERTIES);
    struct prop local[ENG_GM_MAX_PROPERTIES];
    size_t k = 0;
    const char *name;
    json_t *sub;
    json_object_foreach(props, name, sub)
    {
        char p[512];
        sub_path(p, sizeof p, path, "properties", name);
        json_t *js = json_string(name);
        char *text = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        if (!text) return ENG_ENOMEM;
        local[k].key = add_bytes(g, text, strlen(text));
        free(text);
        if (local[k].key.len < 0) return ENG_ENOMEM;
        local[k].required = 0;
        int rc = compile(b, sub, p);
        if (rc < 0) return rc;
        local[k++].node = rc;
    }
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r)
    {
        if (!json_is_string(r)) return fail(b, path, "required must list property names");
        size_t j = 0;
        json_object_foreach(props, name, sub)
        {
            if (!strcmp(name, json_string_value(r))) break;
            j++;
        }
        if (j == n)
            return fail(b, path, "required names \"%s\", which is not in properties",
                        json_string_value(r));
        local[j].required = 1;
    }
    if (eng_grow((void **)&g->props, &g->cap_props, g->n_props + (int)n, sizeof *g->props))
        return ENG_ENOMEM;
    if (n) /* (g->props may still be NULL) */
        memcpy(g->props + g->n_props, local, sizeof *local * n);
    struct node *nd = &g->nodes[id];
    nd->kind = N_OBJECT;
    nd->first = g->n_props;
    nd->count = (int32_t)n;
    g->n_props += (int)n;
    if (n) return 0; /* no other key is ever written */
    if (!add || json_is_true(add)) {
        g->nodes[id].sub = B_ANY;
    } else if (json_is_false(add)) {
        g->nodes[id].sub = -1;
    } else {
        char p[512];
        sub_path(p, sizeof p, path, "additionalProperties", NULL);
        int rc = compile(b, add, p);
        if (rc < 0) return rc;
        g->nodes[id].sub = rc;
    }
    return 0;
}

#define MAX_PREFIX_ITEMS 64

static int compile_array(struct build *b, json_t *s, const char *path, int id)
{
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    int32_t lo = 0, hi = -1;
    int rc = bounds(b, s, path, "minItems", "maxItems", &lo, &hi);
    if (rc) return rc;
    /* a tuple: the first items each of its own schema, "items" holding those after them */
    int32_t tuple[MAX_PREFIX_ITEMS];
    int n_tuple = 0;
    if (prefix) {
        if (!json_is_array(prefix) || !json_array_size(prefix))
            return fail(b, path, "prefixItems must be a non-empty list of schemas");
        if (json_array_size(prefix) > MAX_PREFIX_ITEMS)
            return fail(b, path, "prefixItems lists more than %d schemas", MAX_PREFIX_ITEMS);
        for (size_t i = 0; i < json_array_size(prefix); i++) {
            char at[24], p[512];
            snprintf(at, sizeof at, "%zu", i);
            sub_path(p, sizeof p, path, "prefixItems", at);
            int t = compile(b, json_array_get(prefix, i), p);
            if (t < 0) return t;
            tuple[n_tuple++] = t;
        }
    }
    int sub = B_ANY;
    if (json_is_false(items)) {
        if (hi < 0 || hi > n_tuple) hi = n_tuple;
        sub = -1;
        if (lo > hi)
            return fail(b, path,
                        n_tuple ? "items is false and minItems above prefixItems' length"
                                : "items is false and minItems above 0");
    } else if (items && !json_is_true(items)) {
        if (!json_is_object(items))
            return fail(b, path, "items must be a schema (a list of them is not supported)");
        char p[512];
        sub_path(p, sizeof p, path, "items", NULL);
        if ((sub = compile(b, items, p)) < 0) return sub;
    }
    if (n_tuple) {
        eng_grammar *g = b->g;
        if (eng_grow((void **)&g->alts, &g->cap_alts, g->n_alts + n_tuple, sizeof *g->alts))
            return ENG_ENOMEM;
        g->nodes[id].first = g->n_alts;
        g->nodes[id].count = n_tuple;
        memcpy(g->alts + g->n_alts, tuple, sizeof *tuple * (size_t)n_tuple);
        g->n_alts += n_tuple;
    }
    struct node *nd = &b->g->nodes[id];
    nd->kind = N_ARRAY;
    nd->sub = sub;
    nd->lo = lo;
    nd->hi = hi;
    return 0;
}

/* ---- numbers' bounds ---- */

#define MAX_INT_DIGITS 16
#define MAX_FRAC_DIGITS 16
#define MAX_EXP_DIGITS 3

/* 10^e for e in [0, 38] (10^19 fits 64 bits; above, a product of two) */
static i128 pow10_(int e)
{
    static const uint64_t p[20] = {1ULL,
                                   10ULL,
                                   100ULL,
                                   1000ULL,
                                   10000ULL,
                                   100000ULL,
                                   1000000ULL,
                                   10000000ULL,
                                   100000000ULL,
                                   1000000000ULL,
                                   10000000000ULL,
                                   100000000000ULL,
                                   1000000000000ULL,
                                   10000000000000ULL,
                                   100000000000000ULL,
                                   1000000000000000ULL,
                                   10000000000000000ULL,
                                   100000000000000000ULL,
                                   1000000000000000000ULL,
                                   10000000000000000000ULL};
    return e <= 19 ? (i128)p[e] : (i128)p[19] * p[e - 19];
}

/* Beyond every number that is written (16 digits, 16 after the point, in 10^-16 units). */
#define UNITS_BEYOND (pow10_(MAX_INT_DIGITS + MAX_FRAC_DIGITS))

static i128 floor_div(i128 a, i128 b) /* b > 0 */
{
    i128 q = a / b;
    return q * b > a ? q - 1 : q;
}

/* A JSON number in units of 10^-frac, rounded up (dir 1) or down (dir -1) when it falls
 * between two, and held within +-UNITS_BEYOND; *exact tells whether it fell on one. A
 * real is read as the shortest decimal that is the same double ("0.1", as written). */
static i128 to_units(json_t *v, int frac, int dir, int *exact)
{
    i128 beyond = UNITS_BEYOND;
    *exact = 1;
    if (json_is_integer(v)) {
        i128 x = (i128)json_integer_value(v) * pow10_(frac);
        return x > beyond ? beyond : x < -beyond ? -beyond : x;
    }
    double d = json_real_value(v);
    if (fabs(d) * pow(10, frac) >= 1e32) {
        *exact = 0;
        return d > 0 ? beyond : -beyond;
    }
    char text[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(text, sizeof text, "%.*e", prec - 1, d);
        if (strtod(text, NULL) == d) break;
    }
    /* text: [-]D[.DDD]e[+-]X */
    const char *p = text;
    int neg = *p == '-';
    p += neg;
    i128 m = 0;
    int digits_after = 0, point = 0;
    for (; *p && *p != 'e'; p++) {
        if (*p == '.') {
            point = 1;
            continue;
        }
        m = m * 10 + (*p - '0');
        digits_after += point;
    }
    int e = atoi(p + 1) - digits_after + frac; /* value = m 10^e units */
    i128 x;
    if (e >= 0) {
        x = e > 34 ? beyond : m * pow10_(e);
        if (x > beyond) x = beyond;
    } else if (e < -36) {
        x = 0;
        *exact = m == 0;
        if (!*exact && (dir > 0) != neg) x = 1;
    } else {
        i128 p10 = pow10_(-e);
        x = m / p10;
        if (x * p10 != m) {
            *exact = 0;
            if ((dir > 0) != neg) x++; /* away from zero on the magnitude */
        }
    }
    return neg ? -x : x;
}

/* Whether a multiple of step (0: any value) lies in [lo, hi]. */
static int range_holds(i128 lo, i128 hi, i128 step)
{
    if (lo > hi) return 0;
    return !step || floor_div(hi, step) * step >= lo;
}

/* The bounds of a number or integer node; a node without any keeps sub -1. */
static int compile_number(struct build *b, json_t *s, const char *t, const char *path, int id)
{
    eng_grammar *g = b->g;
    int real = t[0] == 'n', frac = real ? MAX_FRAC_DIGITS : 0;
    g->nodes[id].kind = real ? N_NUMBER : N_INTEGER;
    static const char *const keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                       "multipleOf"};
    json_t *kw[5];
    int any = 0;
    for (int i = 0; i < 5; i++) {
        kw[i] = json_object_get(s, keys[i]);
        if (!kw[i]) continue;
        /* draft 4's exclusiveMinimum: true, a flag on minimum */
        int flag = i >= 2 && i <= 3 && json_is_boolean(kw[i]);
        if (!json_is_number(kw[i]) && !flag) return fail(b, path, "%s must be a number", keys[i]);
        if (flag && json_is_true(kw[i]) && !kw[i - 2])
            return fail(b, path, "%s is true without %s", keys[i], keys[i - 2]);
        any = 1;
    }
    if (!any) return 0;
    i128 beyond = UNITS_BEYOND, lo = -beyond, hi = beyond, step = 0;
    int exact;
    for (int i = 0; i < 4; i++) {
        json_t *v = kw[i];
        int low = i % 2 == 0, excl = i >= 2;
        if (!v || json_is_false(v)) continue;
        if (json_is_true(v)) continue; /* applied with its minimum or maximum below */
        if (!excl && json_is_true(kw[i + 2])) excl = 1;
        i128 x = to_units(v, frac, low ? 1 : -1, &exact);
        if (excl && exact) x += low ? 1 : -1;
        if (low && x > lo) lo = x;
        if (!low && x < hi) hi = x;
    }
    if (kw[4]) {
        if (json_number_value(kw[4]) <= 0) return fail(b, path, "multipleOf must be above 0");
        /* read in 10^-16 units; for an integer, the whole numbers it divides are the
         * multiples of step / gcd(step, 10^16) (0.5: any; 0.3: those of 3) */
        step = to_units(kw[4], MAX_FRAC_DIGITS, 1, &exact);
        if (!exact || step >= beyond)
            return fail(b, path, "multipleOf must be a multiple of 1e-16 below 1e16");
        if (!real) {
            i128 a = step, c = pow10_(MAX_FRAC_DIGITS);
            while (c) {
                i128 r = a % c;
                a = c;
                c = r;
            }
            step /= a;
        }
    }
    /* the numbers written: 16 digits, and for a number node 16 after the point */
    i128 top = real ? beyond - 1 : pow10_(MAX_INT_DIGITS) - 1;
    if (!range_holds(lo > -top ? lo : -top, hi < top ? hi : top, step))
        return fail(b, path, "no %s of at most 16 digits is within %s", real ? "number" : "integer",
                    kw[4] ? "its bounds and multipleOf" : "its bounds");
    if (eng_grow((void **)&g->nb, &g->cap_nb, g->n_nb + 1, sizeof *g->nb)) return ENG_ENOMEM;
    g->nb[g->n_nb] = (struct nbound){lo, hi, step};
    g->nodes[id].sub = g->n_nb++;
    return 0;
}

/* The formats held to, as patterns (any other format is an annotation, as the standard
 * has it). Dates are real days (29 February of leap years only: a multiple of 4 that ends
 * in 00 only when a multiple of 400); times carry their offset (RFC 3339). */
#define DATE_RE                                                                                    \
    "(?:\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])"                                     \
    "|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))"                              \
    "|(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:0[048]|[2468][048]|[13579][26])00)-02-29)"
#define TIME_RE                                                                                    \
    "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,6})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)"
#define OCTET_RE "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"
static const struct {
    const char *format, *re;
} formats[] = {
    {"date", "^" DATE_RE "$"},
    {"time", "^" TIME_RE "$"},
    {"date-time", "^" DATE_RE "T" TIME_RE "$"},
    {"email", "^[A-Za-z0-9_%+-]+(?:\\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
              "(?:\\.[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)*\\.[A-Za-z]{2,}$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
    {"ipv4", "^(?:" OCTET_RE "\\.){3}" OCTET_RE "$"},
};

/* A string node: its length bounds, and its pattern (or its format's) when it has one. */
static int compile_string(struct build *b, json_t *s, const char *path, int id)
{
    eng_grammar *g = b->g;
    int32_t lo = 0, hi = -1;
    int rc = bounds(b, s, path, "minLength", "maxLength", &lo, &hi);
    if (rc) return rc;
    g->nodes[id] = (struct node){.kind = N_STRING, .sub = -1, .lo = lo, .hi = hi};
    json_t *pat = json_object_get(s, "pattern");
    const char *format = json_string_value(json_object_get(s, "format")), *re = NULL;
    size_t len = 0;
    if (pat) {
        if (!json_is_string(pat)) return fail(b, path, "pattern must be a string");
        re = json_string_value(pat);
        len = json_string_length(pat);
    } else if (format) {
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (!strcmp(format, formats[i].format)) re = formats[i].re;
        if (re) len = strlen(re);
    }
    if (!re) return 0;
    if (g->n_pats >= ENG_GM_MAX_PROPERTIES)
        return fail(b, path, "more than %d patterns in one schema", ENG_GM_MAX_PROPERTIES);
    eng_pattern *p;
    char why[200];
    rc = eng_pattern_compile(re, len, &p, why, sizeof why);
    if (rc == ENG_ENOMEM) return rc;
    if (rc) return fail(b, path, "%s", why);
    eng_pat_set start;
    eng_pat_start(p, &start);
    if (!eng_pat_length_ok(p, &start, 0, lo, hi)) {
        eng_pattern_destroy(p);
        return fail(b, path,
                    "no string of the pattern has a length within minLength and "
                    "maxLength");
    }
    if (eng_grow((void **)&g->pats, &g->cap_pats, g->n_pats + 1, sizeof *g->pats)) {
        eng_pattern_destroy(p);
        return ENG_ENOMEM;
    }
    g->pats[g->n_pats] = p;
    g->nodes[id].sub = g->n_pats++;
    return 0;
}

/* Fills id with the schema s read as the one type t. */
static int compile_typed(struct build *b, json_t *s, const char *t, const char *path, int id)
{
    eng_grammar *g = b->g;
    if (!strcmp(t, "object")) return compile_object(b, s, path, id);
    if (!strcmp(t, "array")) return compile_array(b, s, path, id);
    if (!strcmp(t, "string")) return compile_string(b, s, path, id);
    if (!strcmp(t, "number") || !strcmp(t, "integer")) return compile_number(b, s, t, path, id);
    if (!strcmp(t, "boolean")) return set_union(g, id, (const int32_t[]){B_TRUE, B_FALSE}, 2);
    if (!strcmp(t, "null")) return set_union(g, id, (const int32_t[]){B_NULL}, 1);
    return fail(b, path, "unknown type \"%s\"", t);
}

/* Fills node id with schema s (an object). */
static int fill(struct build *b, json_t *s, const char *path, int id)
{
    eng_grammar *g = b->g;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (!LISTED(k, annotations) && !LISTED(k, structural))
            return fail(b, path, "%s is not supported", k);
    }
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        const char *extra = other_keyword(s, (const char *const[]){"$ref"}, 1);
        if (extra) return fail(b, path, "%s beside $ref is not supported", extra);
        json_t *target = json_is_string(ref) ? resolve(b->root, json_string_value(ref)) : NULL;
        if (!target)
            return fail(b, path,
                        "$ref %s is not found in this schema (only references within "
                        "it are read)",
                        json_is_string(ref) ? json_string_value(ref) : "(not a string)");
        int t = compile(b, target, json_string_value(ref));
        return t < 0 ? t : set_union(g, id, &t, 1);
    }
    if (json_object_get(s, "enum") || json_object_get(s, "const"))
        return compile_enum(b, s, path, id);
    const char *comb = json_object_get(s, "anyOf")   ? "anyOf"
                       : json_object_get(s, "oneOf") ? "oneOf"
                       : json_object_get(s, "allOf") ? "allOf"
                                                     : NULL;
    if (comb) {
        json_t *list = json_object_get(s, comb);
        const char *extra = other_keyword(s, (const char *const[]){comb}, 1);
        if (extra) return fail(b, path, "%s beside %s is not supported", extra, comb);
        if (!json_is_array(list) || !json_array_size(list))
            return fail(b, path, "%s must be a non-empty array", comb);
        if (comb[1] == 'l' && json_array_size(list) != 1)
            return fail(b, path, "allOf of several schemas is not supported");
        size_t n = json_array_size(list);
        if (n > ENG_GM_MAX_PROPERTIES)
            return fail(b, path, "%s has more than %d schemas", comb, ENG_GM_MAX_PROPERTIES);
        int32_t alt[ENG_GM_MAX_PROPERTIES];
        for (size_t i = 0; i < n; i++) {
            char p[512], num[24];
            snprintf(num, sizeof num, "%zu", i);
            sub_path(p, sizeof p, path, comb, num);
            int rc = compile(b, json_array_get(list, i), p);
            if (rc < 0) return rc;
            alt[i] = rc;
        }
        int rc = set_union(g, id, alt, (int)n);
        if (!rc) rc = keyed_union(g, id);
        return rc == ENG_EINVAL ? fail(b, path, "the schema is too large") : rc;
    }
    json_t *type = json_object_get(s, "type");
    if (json_is_string(type)) return compile_typed(b, s, json_string_value(type), path, id);
    if (json_is_array(type)) {
        size_t n = json_array_size(type);
        if (!n || n > 7) return fail(b, path, "type must list one to seven type names");
        int32_t alt[7];
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(type, i);
            if (!json_is_string(t)) return fail(b, path, "type must list type names");
            int a = new_node(g, N_ANY);
            if (a < 0) return a == ENG_EINVAL ? fail(b, path, "the schema is too large") : a;
            int rc = compile_typed(b, s, json_string_value(t), path, a);
            if (rc) return rc;
            alt[i] = a;
        }
        return set_union(g, id, alt, (int)n);
    }
    if (type) return fail(b, path, "type must be a name or a list of names");
    /* no type: what the keywords describe */
    if (json_object_get(s, "properties") || json_object_get(s, "required") ||
        json_object_get(s, "additionalProperties"))
        return compile_typed(b, s, "object", path, id);
    if (json_object_get(s, "items") || json_object_get(s, "prefixItems") ||
        json_object_get(s, "minItems") || json_object_get(s, "maxItems"))
        return compile_typed(b, s, "array", path, id);
    if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
        json_object_get(s, "pattern"))
        return compile_typed(b, s, "string", path, id);
    if (json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
        json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum") ||
        json_object_get(s, "multipleOf"))
        return compile_typed(b, s, "number", path, id);
    g->nodes[id].kind = N_ANY;
    return 0;
}

/* The node of schema s: compiled once (a $ref cycle meets its own node). */
static int compile(struct build *b, json_t *s, const char *path)
{
    if (json_is_true(s)) return B_ANY;
    if (json_is_false(s)) return fail(b, path, "the schema false accepts nothing");
    if (!json_is_object(s)) return fail(b, path, "a schema must be an object or a boolean");
    for (int i = 0; i < b->n_memo; i++)
        if (b->memo[i].schema == s) return b->memo[i].node;
    if (b->depth >= 64) return fail(b, path, "schemas nested more than 64 deep are not supported");
    int id = new_node(b->g, N_ANY);
    if (id < 0) return id == ENG_EINVAL ? fail(b, path, "the schema is too large") : id;
    if (eng_grow((void **)&b->memo, &b->cap_memo, b->n_memo + 1, sizeof *b->memo))
        return ENG_ENOMEM;
    b->memo[b->n_memo++] = (struct memo){s, id};
    b->depth++;
    int rc = fill(b, s, path, id);
    b->depth--;
    return rc < 0 ? rc : id;
}

/*
 * Nesting: a value written at parse depth d (its frame the d-th) can be completed only when
 * d + deep[its node] <= ENG_GM_MAX_DEPTH, and the matcher starts no value, key or item that
 * cannot, so that the document never stops short at the limit. deep is the least fixed
 * point of: 0 for a scalar or any value (a string will do); a union's least alternative;
 * an object's most required property, a level below it (1 + its value's); an array's most
 * of its first minItems items; a keyed union's (keyed_union()) most alternative, as the
 * alternative is picked only after its object has begun. What is deeper than the limit is
 * held at DEEP_CAP; DEEP_INF is left where every document would go on forever (a required
 * property that requires its own object again).
 */
#define DEEP_INF 255
#define DEEP_CAP (ENG_GM_MAX_DEPTH + 1)

static int deeper(int below)
{
    return below >= DEEP_INF ? DEEP_INF : below + 1 < DEEP_CAP ? below + 1 : DEEP_CAP;
}

/* The node's deep[] from its parts' as they stand. */
static int node_deep(const eng_grammar *g, const struct node *n)
{
    int d = 0;
    switch (n->kind) {
    case N_UNION:
        d = DEEP_INF;
        for (int32_t i = 0; i < n->count; i++)
            if (g->deep[g->alts[n->first + i]] < d) d = g->deep[g->alts[n->first + i]];
        return d;
    case N_OBJECT:
        if (n->hi > 0) { /* a keyed union */
            for (int32_t i = 0; i < n->hi; i++)
                if (g->deep[g->alts[n->lo + i]] > d) d = g->deep[g->alts[n->lo + i]];
            return d;
        }
        for (int32_t j = 0; j < n->count; j++)
            if (g->props[n->first + j].required && deeper(g->deep[g->props[n->first + j].node]) > d)
                d = deeper(g->deep[g->props[n->first + j].node]);
        return d;
    case N_ARRAY:
        for (int32_t i = 0; i < n->lo; i++) {
            int32_t item = i < n->count ? g->alts[n->first + i] : n->sub;
            int below = item < 0 ? DEEP_INF : deeper(g->deep[item]);
            if (below > d) d = below;
        }
        return d;
    default:
        return 0;
    }
}

static int grammar_depths(eng_grammar *g)
{
    if (!(g->deep = malloc((size_t)g->n_nodes))) return ENG_ENOMEM;
    memset(g->deep, DEEP_INF, (size_t)g->n_nodes);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = g->n_nodes - 1; i >= 0; i--) { /* (parts are mostly made after) */
            int d = node_deep(g, &g->nodes[i]);
            if (d < g->deep[i]) {
                g->deep[i] = (uint8_t)d;
                changed = 1;
            }
        }
    }
    return 0;
}

/* Whether a value of node `node` may begin as the depth-th frame. */
static int fits(const eng_grammar *g, int32_t node, int depth)
{
    return depth + g->deep[node] <= ENG_GM_MAX_DEPTH;
}

void eng_grammar_destroy(eng_grammar *g)
{
    if (!g) return;
    free(g->deep);
    free(g->nodes);
    free(g->props);
    free(g->lits);
    free(g->alts);
    free(g->bytes);
    free(g->nb);
    for (int i = 0; i < g->n_pats; i++)
        eng_pattern_destroy(g->pats[i]);
    free(g->pats);
    free(g);
}

int eng_grammar_create(const char *schema, size_t len, eng_grammar **out, char *err, size_t errlen)
{
    *out = NULL;
    if (errlen) err[0] = 0;
    eng_grammar *g = calloc(1, sizeof *g);
    if (!g || builtins(g)) {
        eng_grammar_destroy(g);
        return ENG_ENOMEM;
    }
    if (!schema) {
        g->root = B_OBJECT;
        if (grammar_depths(g)) {
            eng_grammar_destroy(g);
            return ENG_ENOMEM;
        }
        *out = g;
        return 0;
    }
    json_error_t je;
    json_t *root = json_loadb(schema, len, JSON_DECODE_ANY, &je);
    if (!root) {
        snprintf(err, errlen, "the schema is not JSON: %s", je.text);
        eng_grammar_destroy(g);
        return ENG_EINVAL;
    }
    struct build b = {.g = g, .root = root, .err = err, .errlen = errlen};
    int rc = compile(&b, root, "");
    free(b.memo);
    json_decref(root);
    if (rc < 0) {
        if (rc == ENG_ENOMEM) snprintf(err, errlen, "out of memory");
        eng_grammar_destroy(g);
        return rc;
    }
    g->root = rc;
    if (grammar_depths(g)) {
        snprintf(err, errlen, "out of memory");
        eng_grammar_destroy(g);
        return ENG_ENOMEM;
    }
    /* the document is the second frame (the first: what holds it) */
    if (!fits(g, g->root, 2)) {
        if (g->deep[g->root] == DEEP_INF)
            snprintf(err, errlen,
                     "no document of the schema is finite: each way through it requires a "
                     "property or item that requires it again");
        else
            snprintf(err, errlen, "the schema requires more than %d levels of nesting",
                     ENG_GM_MAX_DEPTH - 1);
        eng_grammar_destroy(g);
        return ENG_EINVAL;
    }
    *out = g;
    return 0;
}

/* ---- matching ------------------------------------------------------------------------ */

enum fkind { F_ROOT, F_VALUE, F_OBJ, F_KEY, F_ARR, F_STR, F_NUM, F_ENUM };
enum { O_OPEN, O_KEY_DONE, O_VALUE_DONE, O_COMMA };
enum { A_OPEN, A_VALUE_DONE, A_COMMA };
enum { S_PLAIN, S_ESCAPE, S_HEX, S_UTF8 };
enum { P_START, P_MINUS, P_ZERO, P_INT, P_DOT, P_FRAC, P_E, P_ESIGN, P_EXP };

/* One level of a parse stack. The meaning of a, b and pos by kind:
 * F_OBJ: a = the next declared property that may come (after a key: one past its own);
 * F_KEY, F_ENUM: pos = bytes matched, a | b << 32 = the candidates still matching;
 * F_ARR: a = items so far; F_STR: a = characters so far (without maxLength or a pattern,
 * at most minLength), b = hex digits or UTF-8 continuation bytes still due, pos = a UTF-8
 * lead byte whose next byte has a narrower range; F_NUM: a = digits in the current part,
 * b = 1 after a minus sign (bounded). */
struct frame {
    int32_t node;
    uint8_t kind, phase;
    uint16_t pos;
    uint32_t a, b;
};

struct thread {
    uint8_t depth, spaces, newlines, pad;
    uint32_t pad2;
    /* the leaf being written (its frame on top): a bounded number's digits before and after
     * the point as integers (aux[0], aux[1]), a pattern's state (an eng_pat_set); 0
     * otherwise, so that threads compare alike */
    uint64_t aux[4];
    struct frame f[ENG_GM_MAX_DEPTH];
};

struct tset {
    int n;
    int work; /* step() calls that made it: bounded, whatever the schema's unions */
    struct thread t[ENG_GM_MAX_THREADS];
};

/* A byte's steps over all threads: a schema of unions within unions (64 alternatives of 64
 * of 64 ...) would otherwise cost exponential time on the engine's thread */
#define MAX_STEP_WORK 4096

_Static_assert(sizeof(eng_pat_set) == sizeof(((struct thread *)0)->aux),
               "a pattern's state fits a thread's aux words");

/* A pattern's state in a thread's aux words. */
static void pat_get(const struct thread *t, eng_pat_set *s)
{
    memcpy(s, t->aux, sizeof *s);
}

static void pat_put(struct thread *t, const eng_pat_set *s)
{
    memcpy(t->aux, s, sizeof *s);
}

#define THREAD_BYTES(t) (offsetof(struct thread, f) + sizeof(struct frame) * (t)->depth)

static void add(struct tset *out, const struct thread *t)
{
    size_t n = THREAD_BYTES(t);
    for (int i = 0; i < out->n; i++)
        if (!memcmp(&out->t[i], t, n)) return;
    if (out->n < ENG_GM_MAX_THREADS) memcpy(&out->t[out->n++], t, n);
}

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* White space between two tokens of the JSON text, within its limits. */
static void gap(struct thread *t, uint8_t c, struct tset *out)
{
    if (c == '\n') {
        if (t->newlines || t->spaces) return;
        t->newlines = 1;
    } else {
        if (t->spaces >= MAX_GAP_SPACES) return;
        t->spaces++;
    }
    add(out, t);
}

static void taken(struct thread *t, struct tset *out)
{
    t->spaces = t->newlines = 0;
    add(out, t);
}

static int push(struct thread *t, enum fkind kind, int32_t node)
{
    if (t->depth >= ENG_GM_MAX_DEPTH) return 0;
    t->f[t->depth++] = (struct frame){.node = node, .kind = (uint8_t)kind};
    return 1;
}

static uint64_t mask_of(const struct frame *f)
{
    return (uint64_t)f->a | (uint64_t)f->b << 32;
}

static void set_mask(struct frame *f, uint64_t m)
{
    f->a = (uint32_t)m;
    f->b = (uint32_t)(m >> 32);
}

/* An object may close: no required property from its next one on. */
static int closable(const eng_grammar *g, const struct node *n, uint32_t next)
{
    for (int32_t j = (int32_t)next; j < n->count; j++)
        if (g->props[n->first + j].required) return 0;
    return 1;
}

static int number_complete(uint8_t phase)
{
    return phase == P_ZERO || phase == P_INT || phase == P_FRAC || phase == P_EXP;
}

/* A bounded number's value so far, in its node's units. */
static i128 number_value(const struct thread *t, const struct frame *f, int real)
{
    i128 v = (i128)t->aux[0] * (real ? pow10_(MAX_FRAC_DIGITS) : 1);
    if (f->phase == P_FRAC) v += (i128)t->aux[1] * pow10_(MAX_FRAC_DIGITS - (int)f->a);
    return f->b ? -v : v;
}

/* The number may end here: complete, and within its bounds. */
static int number_done(const eng_grammar *g, const struct thread *t, const struct frame *f)
{
    if (!number_complete(f->phase)) return 0;
    const struct node *n = &g->nodes[f->node];
    if (n->sub < 0) return 1;
    const struct nbound *nb = &g->nb[n->sub];
    i128 v = number_value(t, f, n->kind == N_NUMBER);
    return range_holds(v > nb->lo ? v : nb->lo, v < nb->hi ? v : nb->hi, nb->step);
}

/* A bounded number can still end within its bounds. The values it may reach: with I the
 * digits before the point and j more of them, [I 10^j, (I + 1) 10^j) (an integer: the
 * whole numbers in it); after the point, the k digits F so far narrow that to
 * [I.F, I.F + 10^-k). Negated after a minus sign. */
static int number_viable(const eng_grammar *g, const struct thread *t, const struct frame *f)
{
    const struct node *n = &g->nodes[f->node];
    if (n->sub < 0) return 1;
    const struct nbound *nb = &g->nb[n->sub];
    int real = n->kind == N_NUMBER;
    i128 unit = real ? pow10_(MAX_FRAC_DIGITS) : 1, lo, hi;
    int more = 0; /* integer digits that may still come */
    if (f->phase == P_MINUS) more = MAX_INT_DIGITS;
    if (f->phase == P_INT) more = MAX_INT_DIGITS - (int)f->a;
    for (int j = 0; j <= more; j++) {
        if (f->phase == P_FRAC) {
            lo = number_value(t, f, real);
            if (f->b) lo = -lo;
            hi = lo + pow10_(MAX_FRAC_DIGITS - (int)f->a) - 1;
        } else {
            i128 p = pow10_(j);
            lo = (i128)t->aux[0] * p * unit;
            hi = ((i128)t->aux[0] + 1) * p * unit - 1;
        }
        if (f->b) {
            i128 x = lo;
            lo = -hi;
            hi = -x;
        }
        if (range_holds(lo > nb->lo ? lo : nb->lo, hi < nb->hi ? hi : nb->hi, nb->step)) return 1;
    }
    return 0;
}

static void step(const eng_grammar *g, const struct thread *src, uint8_t c, struct tset *out,
                 int expansions);

/* The top frame is F_VALUE: the value of its node starts with c. */
static void value_start(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out,
                        int expansions)
{
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    if (is_space(c)) {
        /* a property's value (the only value pushed before its first byte, at its colon):
         * one space at most; the document itself starts at once */
        if (t->depth > 2 && c == ' ' && !t->spaces) gap(t, c, out);
        return;
    }
    if (!fits(g, f->node, t->depth)) return;
    switch (n->kind) {
    case N_UNION:
        if (expansions >= MAX_UNION_EXPANSION) return;
        for (int32_t i = 0; i < n->count; i++) {
            t->f[t->depth - 1].node = g->alts[n->first + i];
            step(g, t, c, out, expansions + 1);
        }
        return;
    case N_ANY: {
        int32_t to = c == '{'                             ? B_OBJECT
                     : c == '['                           ? B_ARRAY
                     : c == '"'                           ? B_STRING
                     : c == 't'                           ? B_TRUE
                     : c == 'f'                           ? B_FALSE
                     : c == 'n'                           ? B_NULL
                     : c == '-' || (c >= '0' && c <= '9') ? B_NUMBER
                                                          : -1;
        if (to < 0) return;
        f->node = to;
        step(g, t, c, out, expansions);
        return;
    }
    case N_OBJECT:
        if (c != '{') return;
        *f = (struct frame){.node = f->node, .kind = F_OBJ, .phase = O_OPEN};
        taken(t, out);
        return;
    case N_ARRAY:
        if (c != '[') return;
        *f = (struct frame){.node = f->node, .kind = F_ARR, .phase = A_OPEN};
        taken(t, out);
        return;
    case N_STRING:
        if (c != '"') return;
        *f = (struct frame){.node = f->node, .kind = F_STR, .phase = S_PLAIN};
        if (n->sub >= 0) {
            eng_pat_set st;
            eng_pat_start(g->pats[n->sub], &st);
            pat_put(t, &st);
        }
        taken(t, out);
        return;
    case N_NUMBER:
    case N_INTEGER:
        *f = (struct frame){.node = f->node, .kind = F_NUM, .phase = P_START};
        step(g, t, c, out, expansions);
        return;
    case N_ENUM:
        *f = (struct frame){.node = f->node, .kind = F_ENUM};
        set_mask(f, n->count >= 64 ? ~0ULL : (1ULL << n->count) - 1);
        step(g, t, c, out, expansions);
        return;
    }
}

/* The keys that may come next in an object of node n at frame depth, from its declared
 * property next on (a bit each): up to the first required one, each whose value fits a
 * level below (fits()). Without declared properties, 1 when a key may come. */
static uint64_t next_keys(const eng_grammar *g, const struct node *n, uint32_t next, int depth)
{
    if (!n->count) return n->sub >= 0 && fits(g, n->sub, depth + 1);
    uint64_t m = 0;
    for (int32_t j = (int32_t)next; j < n->count; j++) {
        if (fits(g, g->props[n->first + j].node, depth + 1)) m |= 1ULL << j;
        if (g->props[n->first + j].required) break;
    }
    return m;
}

static void object_byte(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out)
{
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    if (is_space(c)) {
        /* none before a colon or a comma: after a value, only where a '}' may follow */
        if (f->phase == O_OPEN || f->phase == O_COMMA ||
            (f->phase == O_VALUE_DONE && closable(g, n, f->a)))
            gap(t, c, out);
        return;
    }
    int spaced = t->spaces || t->newlines;
    switch (f->phase) {
    case O_OPEN:
    case O_COMMA:
        if (c == '"') {
            uint64_t m = next_keys(g, n, f->a, t->depth);
            if (!m) return;
            if (!n->count) { /* any key: a string */
                f->phase = O_KEY_DONE;
                if (push(t, F_STR, B_STRING)) taken(t, out);
                return;
            }
            int32_t node = f->node;
            f->phase = O_KEY_DONE;
            if (!push(t, F_KEY, node)) return;
            t->f[t->depth - 1].pos = 1;
            set_mask(&t->f[t->depth - 1], m);
            taken(t, out);
            return;
        }
        if (c == '}' && f->phase == O_OPEN && closable(g, n, f->a)) {
            t->depth--;
            taken(t, out);
        }
        return;
    case O_KEY_DONE:
        if (c != ':') return;
        f->phase = O_VALUE_DONE;
        if (push(t, F_VALUE, n->count ? g->props[n->first + f->a - 1].node : n->sub)) taken(t, out);
        return;
    case O_VALUE_DONE:
        if (c == ',' && !spaced && next_keys(g, n, f->a, t->depth)) {
            f->phase = O_COMMA;
            taken(t, out);
        } else if (c == '}' && closable(g, n, f->a)) {
            t->depth--;
            taken(t, out);
        }
        return;
    }
}

static void key_byte(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out)
{
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    uint64_t m = mask_of(f), keep = 0;
    int done = -1;
    for (int j = 0; j < n->count; j++) {
        if (!(m >> j & 1)) continue;
        struct lit k = g->props[n->first + j].key;
        if (f->pos < k.len && (uint8_t)g->bytes[k.off + f->pos] == c) {
            if (f->pos + 1 == k.len)
                done = j; /* keys are distinct and end with '"': no other still matches */
            else
                keep |= 1ULL << j;
        }
    }
    if (done >= 0) {
        t->depth--;
        t->f[t->depth - 1].a = (uint32_t)done + 1;
        taken(t, out);
    } else if (keep) {
        f->pos++;
        set_mask(f, keep);
        taken(t, out);
    }
}

static void enum_byte(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out)
{
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    uint64_t m = mask_of(f), keep = 0;
    int done = -1;
    for (int j = 0; j < n->count; j++) {
        if (!(m >> j & 1)) continue;
        struct lit l = g->lits[n->first + j];
        if (f->pos < l.len && (uint8_t)g->bytes[l.off + f->pos] == c) {
            if (f->pos + 1 == l.len)
                done = j;
            else
                keep |= 1ULL << j;
        }
    }
    if (done >= 0) { /* one value is complete; a longer one (12 after 1) may go on */
        struct thread end = *t;
        end.depth--;
        /* the first value of a keyed union's object (keyed_union): the object is from now
         * on the alternative it picks, after that property */
        struct frame *o = &end.f[end.depth - 1];
        const struct node *on = &g->nodes[o->node];
        if (o->kind == F_OBJ && on->hi > 0 && on->kind == N_OBJECT)
            o->node = g->alts[on->lo + done];
        taken(&end, out);
    }
    if (keep) {
        f->pos++;
        set_mask(f, keep);
        taken(t, out);
    }
}

static void array_byte(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out,
                       int expansions)
{
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    if (is_space(c)) {
        /* none before a comma: after a value, only where a ']' may follow */
        if (f->phase != A_VALUE_DONE || f->a >= (uint32_t)n->lo) gap(t, c, out);
        return;
    }
    if (f->phase == A_VALUE_DONE) {
        int spaced = t->spaces || t->newlines; /* none before a comma */
        /* (a comma only where the next item has room) */
        int32_t next = f->a < (uint32_t)n->count ? g->alts[n->first + f->a] : n->sub;
        if (c == ',' && !spaced && (n->hi < 0 || f->a < (uint32_t)n->hi) && next >= 0 &&
            fits(g, next, t->depth + 1)) {
            f->phase = A_COMMA;
            taken(t, out);
        } else if (c == ']' && f->a >= (uint32_t)n->lo) {
            t->depth--;
            taken(t, out);
        }
        return;
    }
    if (c == ']') {
        if (f->phase == A_OPEN && n->lo == 0) {
            t->depth--;
            taken(t, out);
        }
        return;
    }
    /* the item's node: its own within a tuple (prefixItems), else the items' */
    int32_t item = f->a < (uint32_t)n->count ? g->alts[n->first + f->a] : n->sub;
    if (item < 0 || (n->hi >= 0 && f->a >= (uint32_t)n->hi)) return;
    f->phase = A_VALUE_DONE;
    f->a++;
    if (push(t, F_VALUE, item)) step(g, t, c, out, expansions);
}

/* A whole character cp of a string with a pattern: taken when the pattern goes on with it
 * and a length within the node's bounds stays possible. */
static int pattern_char(const eng_grammar *g, struct thread *t, const struct node *n,
                        struct frame *f, uint32_t cp)
{
    const eng_pattern *p = g->pats[n->sub];
    eng_pat_set s, next;
    pat_get(t, &s);
    if (!eng_pat_step(p, &s, cp, &next) || !eng_pat_length_ok(p, &next, f->a + 1, n->lo, n->hi))
        return 0;
    pat_put(t, &next);
    f->a++;
    return 1;
}

/* The code points a UTF-8 character may still be, with r continuation bytes to come after
 * the bits so far (prefix) of one of len bytes: whether the pattern takes one of them. */
static int pattern_may(const eng_grammar *g, const struct thread *t, const struct node *n,
                       uint32_t prefix, int r, int len)
{
    static const uint32_t lo_of[] = {0, 0, 0x80, 0x800, 0x10000};
    static const uint32_t hi_of[] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    uint32_t lo = prefix << (6 * r), hi = ((prefix + 1) << (6 * r)) - 1;
    if (lo < lo_of[len]) lo = lo_of[len];
    if (hi > hi_of[len]) hi = hi_of[len];
    if (lo > hi) return 0;
    eng_pat_set s;
    pat_get(t, &s);
    /* (classes hold no surrogates) */
    return eng_pat_any(g->pats[n->sub], &s, lo, hi, t->f[t->depth - 1].a + 1, n->lo, n->hi);
}

/* string_byte() for a string with a pattern: each character goes through the pattern's
 * automaton as it completes; a lead byte or an escape is taken only when some character it
 * may begin is taken. F_STR's b: UTF-8 bytes due | the bits so far << 8; pos: the
 * character's length. \u escapes are not written in such a string. */
static void pattern_byte(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out)
{
    static const char escapes[] = "\"\\/bfnrt", as[] = "\"\\/\b\f\n\r\t";
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    eng_pat_set s;
    switch (f->phase) {
    case S_PLAIN:
        if (c == '"') {
            pat_get(t, &s);
            if (f->a < (uint32_t)n->lo || !eng_pat_accepting(g->pats[n->sub], &s)) return;
            memset(t->aux, 0, sizeof t->aux);
            t->depth--;
            taken(t, out);
            return;
        }
        if (c < 0x20 || (n->hi >= 0 && f->a >= (uint32_t)n->hi)) return;
        if (c == '\\') {
            int any = 0;
            for (int i = 0; as[i] && !any; i++)
                any = pattern_may(g, t, n, (uint8_t)as[i], 0, 1);
            if (!any) return;
            f->phase = S_ESCAPE;
        } else if (c < 0x80) {
            if (!pattern_char(g, t, n, f, c)) return;
        } else {
            int more = c >= 0xC2 && c <= 0xDF   ? 1
                       : c >= 0xE0 && c <= 0xEF ? 2
                       : c >= 0xF0 && c <= 0xF4 ? 3
                                                : 0;
            uint32_t bits = c & (0x3Fu >> more);
            if (!more || !pattern_may(g, t, n, bits, more, more + 1)) return;
            f->phase = S_UTF8;
            f->b = (uint32_t)more | bits << 8;
            f->pos = (uint16_t)(more + 1);
        }
        taken(t, out);
        return;
    case S_UTF8: {
        if ((c & 0xC0) != 0x80) return;
        int r = (int)(f->b & 0xFF) - 1;
        uint32_t bits = (f->b >> 8) << 6 | (c & 0x3F);
        if (!pattern_may(g, t, n, bits, r, f->pos)) return;
        if (r == 0) {
            if (!pattern_char(g, t, n, f, bits)) return;
            f->phase = S_PLAIN;
            f->b = 0;
            f->pos = 0;
        } else {
            f->b = (uint32_t)r | bits << 8;
        }
        taken(t, out);
        return;
    }
    case S_ESCAPE: {
        const char *e = c ? strchr(escapes, c) : NULL;
        if (!e || !pattern_char(g, t, n, f, (uint8_t)as[e - escapes])) return;
        f->phase = S_PLAIN;
        taken(t, out);
        return;
    }
    }
}

static void string_byte(const eng_grammar *g, struct thread *t, uint8_t c, struct tset *out)
{
    if (g->nodes[t->f[t->depth - 1].node].sub >= 0) {
        pattern_byte(g, t, c, out);
        return;
    }
    struct frame *f = &t->f[t->depth - 1];
    const struct node *n = &g->nodes[f->node];
    switch (f->phase) {
    case S_PLAIN:
        if (c == '"') {
            if (f->a >= (uint32_t)n->lo) {
                t->depth--;
                taken(t, out);
            }
            return;
        }
        if (c < 0x20 || (n->hi >= 0 && f->a >= (uint32_t)n->hi)) return;
        if (c == '\\') {
            f->phase = S_ESCAPE;
        } else if (c >= 0x80) {
            int more = c >= 0xC2 && c <= 0xDF   ? 1
                       : c >= 0xE0 && c <= 0xEF ? 2
                       : c >= 0xF0 && c <= 0xF4 ? 3
                                                : 0;
            if (!more) return;
            f->phase = S_UTF8;
            f->b = (uint32_t)more;
            f->pos = c == 0xE0 || c == 0xED || c == 0xF0 || c == 0xF4 ? c : 0;
        }
        /* without maxLength, the count matters only until minLength: held there, so that
         * the thread inside a string is the same after every character (plain_room()) */
        if (n->hi >= 0 || f->a < (uint32_t)n->lo) f->a++;
        taken(t, out);
        return;
    case S_UTF8: {
        uint8_t lo = 0x80, hi = 0xBF; /* no overlong forms, no surrogates, nothing past U+10FFFF */
        if (f->pos == 0xE0)
            lo = 0xA0;
        else if (f->pos == 0xED)
            hi = 0x9F;
        else if (f->pos == 0xF0)
            lo = 0x90;
        else if (f->pos == 0xF4)
            hi = 0x8F;
        if (c < lo || c > hi) return;
        f->pos = 0;
        if (--f->b == 0) f->phase = S_PLAIN;
        taken(t, out);
        return;
    }
    case S_ESCAPE:
        if (c == 'u') {
            f->phase = S_HEX;
            f->b = 0;
        } else if (c && strchr("\"\\/bfnrt", c)) {
            f->phase = S_PLAIN;
        } else {
            return;
        }
        taken(t, out);
        return;
    case S_HEX:
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return;
        if (++f->b == 4) f->phase = S_PLAIN;
        taken(t, out);
        return;
    }
}

static int number_syntax(const struct node *n, struct frame *f, uint8_t c);

/* 1: taken; 0: refused; -1: the number ended before c (c goes to the frame below). */
static int number_byte(const eng_grammar *g, struct thread *t, struct frame *f, uint8_t c)
{
    const struct node *n = &g->nodes[f->node];
    if (n->sub < 0) return number_syntax(n, f, c);
    /* bounded: the digits are kept, no exponent is written (any value within 16 digits
     * is written without one) */
    if (c == 'e' || c == 'E') return number_complete(f->phase) ? -1 : 0;
    uint8_t phase = f->phase;
    int r = number_syntax(n, f, c);
    if (r <= 0) return r;
    uint64_t d = (uint64_t)(c - '0');
    if (c == '-') {
        f->b = 1;
    } else if (f->phase == P_ZERO || f->phase == P_INT) {
        t->aux[0] = phase == P_START || phase == P_MINUS ? d : t->aux[0] * 10 + d;
    } else if (f->phase == P_FRAC) {
        t->aux[1] = phase == P_DOT ? d : t->aux[1] * 10 + d;
    }
    return number_viable(g, t, f);
}

/* number_byte() by JSON's syntax alone. */
static int number_syntax(const struct node *n, struct frame *f, uint8_t c)
{
    int digit = c >= '0' && c <= '9', real = n->kind == N_NUMBER;
    switch (f->phase) {
    case P_START:
        if (c == '-') {
            f->phase = P_MINUS;
            return 1;
        }
        /* fall through */
    case P_MINUS:
        if (!digit) return 0;
        f->phase = c == '0' ? P_ZERO : P_INT;
        f->a = 1;
        return 1;
    case P_ZERO:
    case P_INT:
        if (digit && f->phase == P_INT && f->a < MAX_INT_DIGITS) {
            f->a++;
            return 1;
        }
        if (real && c == '.') {
            f->phase = P_DOT;
            return 1;
        }
        if (real && (c == 'e' || c == 'E')) {
            f->phase = P_E;
            return 1;
        }
        return -1;
    case P_DOT:
        if (!digit) return 0;
        f->phase = P_FRAC;
        f->a = 1;
        return 1;
    case P_FRAC:
        if (digit && f->a < MAX_FRAC_DIGITS) {
            f->a++;
            return 1;
        }
        if (c == 'e' || c == 'E') {
            f->phase = P_E;
            return 1;
        }
        return -1;
    case P_E:
        if (c == '+' || c == '-') {
            f->phase = P_ESIGN;
            return 1;
        }
        /* fall through */
    case P_ESIGN:
        if (!digit) return 0;
        f->phase = P_EXP;
        f->a = 1;
        return 1;
    case P_EXP:
        if (digit && f->a < MAX_EXP_DIGITS) {
            f->a++;
            return 1;
        }
        return -1;
    }
    return 0;
}

/* Every way thread src can take byte c, added to out. */
static void step(const eng_grammar *g, const struct thread *src, uint8_t c, struct tset *out,
                 int expansions)
{
    if (++out->work > MAX_STEP_WORK) return;
    struct thread t;
    memcpy(&t, src, THREAD_BYTES(src));
    for (;;) {
        struct frame *f = &t.f[t.depth - 1];
        switch (f->kind) {
        case F_ROOT:
            /* nothing follows the document, or (eng_gm_repeat) a line break and another,
             * the documents still allowed counted in the root frame's node */
            if (!f->node) return;
            if (!t.newlines) {
                if (c != '\n') return;
                t.newlines = 1;
                add(out, &t);
                return;
            }
            if (c != '{') return;
            t.newlines = 0;
            f->node--;
            push(&t, F_VALUE, g->root);
            continue;
        case F_VALUE:
            value_start(g, &t, c, out, expansions);
            return;
        case F_OBJ:
            object_byte(g, &t, c, out);
            return;
        case F_KEY:
            key_byte(g, &t, c, out);
            return;
        case F_ARR:
            array_byte(g, &t, c, out, expansions);
            return;
        case F_STR:
            string_byte(g, &t, c, out);
            return;
        case F_ENUM:
            enum_byte(g, &t, c, out);
            return;
        case F_NUM: {
            int r = number_byte(g, &t, f, c);
            if (r > 0) taken(&t, out);
            if (r >= 0 || !number_done(g, &t, f)) return;
            t.depth--; /* the number is complete: c belongs to what holds it */
            memset(t.aux, 0, sizeof t.aux);
            continue;
        }
        }
        return;
    }
}

static void step_all(const eng_grammar *g, const struct tset *in, uint8_t c, struct tset *out)
{
    out->n = out->work = 0;
    for (int i = 0; i < in->n; i++)
        step(g, &in->t[i], c, out, 0);
}

/*
 * A pattern's states as eng_gm_mask() meets them, kept as a DFA over the plain bytes
 * (plain_byte()): inside a string with a pattern and its minLength reached, such a byte
 * changes only the pattern's state and the count, so walk() follows these edges without
 * stepping threads, as it takes plain bytes inside strings without a pattern
 * (plain_room()), and holds the count to maxLength by each state's need
 * (eng_pat_need()). States are made as they are met and kept from one mask to the next,
 * for one pattern at a time; past DFA_MAX_STATES walk() steps threads until a mask starts
 * afresh.
 */
#define DFA_MAX_STATES 1024
#define DFA_SLOTS (2 * DFA_MAX_STATES)
#define DFA_UNSEEN (-1) /* an edge not followed yet */
#define DFA_DEAD (-2)   /* the pattern refuses the byte */
#define DFA_FULL (-3)   /* no room for the state the byte leads to */
#define N_PLAIN 96      /* bytes 0x20..0x7F, at b - 0x20 */

struct dfa {
    const eng_pattern *p; /* whose states these are; NULL before the first */
    int n, cap;
    eng_pat_set *set;
    int32_t *need;            /* eng_pat_need() of each */
    int32_t (*edge)[N_PLAIN]; /* a state, or DFA_UNSEEN, DFA_DEAD */
    int32_t *slot;            /* [DFA_SLOTS]: states by their set's hash, -1 free */
};

struct eng_gm {
    const eng_grammar *g;
    enum eng_gm_state state;
    int lead; /* white space bytes taken while undecided */
    struct tset cur, tmp[2];
    struct tset moved; /* walk()'s: a state after plain bytes (plain_advance()) */
    struct dfa dfa;
    /* eng_gm_mask()'s: a state a trie level ([n_lvl]), and which tokens it allowed */
    struct tset *lvl;
    int n_lvl;
    uint8_t *allowed;
    int n_allowed;
};

int eng_gm_create(const eng_grammar *g, eng_gm **out)
{
    eng_gm *m = calloc(1, sizeof *m);
    if (!m) return ENG_ENOMEM;
    m->g = g;
    m->state = ENG_GM_DOCUMENT;
    m->cur.n = 1;
    struct thread *t = &m->cur.t[0];
    t->depth = 2;
    t->f[0] = (struct frame){.kind = F_ROOT};
    t->f[1] = (struct frame){.node = g->root, .kind = F_VALUE};
    *out = m;
    return 0;
}

void eng_gm_optional(eng_gm *m)
{
    m->state = ENG_GM_UNDECIDED;
}

void eng_gm_repeat(eng_gm *m, int more)
{
    for (int i = 0; i < m->cur.n; i++)
        m->cur.t[i].f[0].node = more > 0 ? more : 0;
}

enum eng_gm_state eng_gm_state(const eng_gm *m)
{
    return m->state;
}

/* Where bytes[0..n) begin to say something: the first byte not white space, n if none. */
static size_t lead(const char *bytes, size_t n)
{
    size_t k = 0;
    while (k < n && is_space((uint8_t)bytes[k]))
        k++;
    return k;
}

void eng_gm_destroy(eng_gm *m)
{
    if (!m) return;
    free(m->dfa.set);
    free(m->dfa.need);
    free(m->dfa.edge);
    free(m->dfa.slot);
    free(m->lvl);
    free(m->allowed);
    free(m);
}

/* Feeds bytes into a copy of the state: the resulting state, or NULL when refused. */
static const struct tset *feed(eng_gm *m, const char *bytes, size_t n)
{
    const struct tset *in = &m->cur;
    for (size_t i = 0; i < n; i++) {
        struct tset *o = &m->tmp[i & 1];
        step_all(m->g, in, (uint8_t)bytes[i], o);
        if (!o->n) return NULL;
        in = o;
    }
    return in;
}

int eng_gm_feed(eng_gm *m, const char *bytes, size_t n)
{
    if (m->state == ENG_GM_TEXT) return 1;
    if (m->state == ENG_GM_UNDECIDED) {
        size_t k = lead(bytes, n);
        if ((size_t)m->lead + k > MAX_LEAD) return 0;
        if (k == n) {
            m->lead += (int)k;
            return 1;
        }
        if (bytes[k] != '{') {
            m->state = ENG_GM_TEXT;
            return 1;
        }
        bytes += k;
        n -= k;
    }
    const struct tset *s = feed(m, bytes, n);
    if (!s) return 0;
    m->state = ENG_GM_DOCUMENT;
    if (s != &m->cur) {
        m->cur.n = s->n;
        for (int i = 0; i < s->n; i++)
            memcpy(&m->cur.t[i], &s->t[i], THREAD_BYTES(&s->t[i]));
    }
    return 1;
}

static int set_accepting(const eng_grammar *g, const struct tset *s)
{
    for (int i = 0; i < s->n; i++) {
        const struct thread *t = &s->t[i];
        if (t->depth == 1 ||
            (t->depth == 2 && t->f[1].kind == F_NUM && number_done(g, t, &t->f[1])))
            return 1;
    }
    return 0;
}

int eng_gm_accepting(const eng_gm *m)
{
    return m->state != ENG_GM_DOCUMENT || set_accepting(m->g, &m->cur);
}

int eng_gm_done(const eng_gm *m)
{
    if (m->state != ENG_GM_DOCUMENT) return 0;
    for (int i = 0; i < m->cur.n; i++)
        if (m->cur.t[i].depth != 1 || m->cur.t[i].f[0].node) return 0;
    return m->cur.n > 0;
}

/* ---- the vocabulary's trie ----------------------------------------------------------- */

enum { T_NEVER, T_BYTES, T_END };

struct tnode {
    int32_t child, sibling; /* -1: none */
    int32_t token;          /* the last token (highest id) whose bytes end here, -1: none */
    uint8_t byte;
};

struct eng_gm_vocab {
    const tok_vocab *v;
    int n_vocab;
    uint8_t *kind;      /* [n_vocab] T_ */
    int32_t *same;      /* [n_vocab] the next token with the same bytes, -1 */
    struct tnode *node; /* [n_node], 0 the root */
    int n_node, cap_node;
    int depth; /* the longest piece */
};

void eng_gm_vocab_destroy(eng_gm_vocab *gv)
{
    if (!gv) return;
    free(gv->kind);
    free(gv->same);
    free(gv->node);
    free(gv);
}

/* a token's bytes, for sorting */
struct piece {
    const char *p;
    int32_t len, id;
};

/* by bytes (a piece before those it begins), then by id */
static int by_bytes(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    int c = memcmp(x->p, y->p, (size_t)(x->len < y->len ? x->len : y->len));
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The trie of the pieces sorted by by_bytes(): each piece's nodes past the bytes it shares
 * with the one before hang under that one's path, as the last children there (a parent's
 * children come in byte order). So no sibling list is searched, and the nodes lie in the
 * order walk() visits them. */
static int build_trie(eng_gm_vocab *gv, const struct piece *pc, int n)
{
    int32_t *path = malloc(sizeof *path * 2 * (size_t)(gv->depth + 1));
    if (!path) return ENG_ENOMEM;
    int32_t *last = path + gv->depth + 1; /* last[i]: path[i]'s last child, or -1 */
    path[0] = 0;
    last[0] = -1;
    for (int i = 0; i < n; i++) {
        int32_t l = 0;
        if (i > 0)
            while (l < pc[i].len && l < pc[i - 1].len && pc[i].p[l] == pc[i - 1].p[l])
                l++;
        for (; l < pc[i].len; l++) {
            if (eng_grow((void **)&gv->node, &gv->cap_node, gv->n_node + 1, sizeof *gv->node)) {
                free(path);
                return ENG_ENOMEM;
            }
            const int32_t at = gv->n_node++;
            gv->node[at] = (struct tnode){
                .child = -1, .sibling = -1, .token = -1, .byte = (uint8_t)pc[i].p[l]};
            if (last[l] >= 0)
                gv->node[last[l]].sibling = at;
            else
                gv->node[path[l]].child = at;
            last[l] = at;
            path[l + 1] = at;
            last[l + 1] = -1;
        }
        const int32_t at = path[pc[i].len];
        gv->same[pc[i].id] = gv->node[at].token;
        gv->node[at].token = pc[i].id;
    }
    free(path);
    return 0;
}

int eng_gm_vocab_create(const tok_vocab *v, eng_gm_vocab **out)
{
    eng_gm_vocab *gv = calloc(1, sizeof *gv);
    int n = tok_n_vocab(v), np = 0;
    if (!gv) return ENG_ENOMEM;
    gv->v = v;
    gv->n_vocab = n;
    gv->kind = calloc((size_t)n, 1);
    gv->same = malloc(sizeof *gv->same * (size_t)n);
    struct piece *pc = malloc(sizeof *pc * (size_t)n);
    if (!gv->kind || !gv->same || !pc ||
        eng_grow((void **)&gv->node, &gv->cap_node, 1 << 16, sizeof *gv->node))
        goto fail;
    gv->node[0] = (struct tnode){.child = -1, .sibling = -1, .token = -1};
    gv->n_node = 1;
    for (int32_t id = 0; id < n; id++) {
        gv->same[id] = -1;
        if (tok_is_eog(v, id)) {
            gv->kind[id] = T_END;
            continue;
        }
        int type = tok_type(v, id);
        const char *p;
        size_t len;
        if (type == TOK_CONTROL || type == TOK_UNUSED || tok_piece(v, id, &p, &len) || !len ||
            len >= INT32_MAX)
            continue;
        pc[np++] = (struct piece){p, (int32_t)len, id};
        gv->kind[id] = T_BYTES;
        if ((int)len > gv->depth) gv->depth = (int)len;
    }
    qsort(pc, (size_t)np, sizeof *pc, by_bytes);
    if (build_trie(gv, pc, np)) goto fail;
    free(pc);
    *out = gv;
    return 0;
fail:
    free(pc);
    eng_gm_vocab_destroy(gv);
    return ENG_ENOMEM;
}

int eng_gm_allows(eng_gm *m, const eng_gm_vocab *gv, int32_t token)
{
    if (token < 0 || token >= gv->n_vocab || gv->kind[token] == T_NEVER) return 0;
    if (gv->kind[token] == T_END) return eng_gm_accepting(m);
    const char *p;
    size_t len;
    tok_piece(gv->v, token, &p, &len);
    if (m->state == ENG_GM_TEXT) return 1;
    if (m->state == ENG_GM_UNDECIDED) {
        size_t k = lead(p, len);
        if ((size_t)m->lead + k > MAX_LEAD) return 0;
        if (k == len || p[k] != '{') return 1;
        p += k;
        len -= k;
    }
    return feed(m, p, len) != NULL;
}

int eng_gm_take(eng_gm *m, const eng_gm_vocab *gv, int32_t token)
{
    if (token < 0 || token >= gv->n_vocab || gv->kind[token] == T_NEVER) return ENG_EINVAL;
    if (gv->kind[token] == T_END) return eng_gm_accepting(m) ? 0 : ENG_EINVAL;
    const char *p;
    size_t len;
    tok_piece(gv->v, token, &p, &len);
    return eng_gm_feed(m, p, len) ? 0 : ENG_EINVAL;
}

/*
 * How many more characters every thread of s can take inside a string, where each thread
 * is inside a string without a pattern, at a character's start: a printable ASCII byte
 * other than '"' and '\' is then a character to each, which changes only its count
 * (F_STR's a; string_byte()). INT_MAX without maxLength; -1 where s is not so. Most of the
 * vocabulary's bytes are such, and walk() takes them without stepping the threads, keeping
 * how many it took (plain_advance() makes the state they lead to, when it is wanted).
 */
static int plain_room(const eng_grammar *g, const struct tset *s)
{
    int room = INT_MAX;
    for (int i = 0; i < s->n; i++) {
        const struct thread *t = &s->t[i];
        const struct frame *f = &t->f[t->depth - 1];
        const struct node *n = &g->nodes[f->node];
        if (f->kind != F_STR || f->phase != S_PLAIN || n->sub >= 0) return -1;
        if (n->hi >= 0 && n->hi - (int64_t)f->a < room) room = (int)(n->hi - (int64_t)f->a);
    }
    return s->n > 0 ? room : -1;
}

static int plain_byte(uint8_t c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The pattern of s's one thread, where it is inside a string with a pattern at a
 * character's start with its minLength reached: a plain byte then changes only the
 * pattern's state and the count (pattern_byte()), and whether it is taken depends on the
 * state it leads to and, under a maxLength, on how many characters are left (*room,
 * INT_MAX without one). NULL otherwise. */
static const eng_pattern *pattern_run(const eng_grammar *g, const struct tset *s, int *room)
{
    if (s->n != 1) return NULL;
    const struct frame *f = &s->t[0].f[s->t[0].depth - 1];
    const struct node *n = &g->nodes[f->node];
    if (f->kind != F_STR || f->phase != S_PLAIN || n->sub < 0 || f->a < (uint32_t)n->lo)
        return NULL;
    *room = n->hi < 0 ? INT_MAX : n->hi - (int64_t)f->a < 0 ? 0 : (int)(n->hi - (int64_t)f->a);
    return g->pats[n->sub];
}

static void dfa_clear(struct dfa *d)
{
    d->p = NULL;
    d->n = 0;
    if (d->slot) memset(d->slot, 0xFF, sizeof *d->slot * DFA_SLOTS);
}

/* The DFA's state for pattern p's state s, made if new: -1 when the DFA holds another
 * pattern's states, is full or cannot grow. */
static int32_t dfa_state(struct dfa *d, const eng_pattern *p, const eng_pat_set *s)
{
    if (d->p != p && d->n) return -1;
    d->p = p;
    if (!d->slot) {
        if (!(d->slot = malloc(sizeof *d->slot * DFA_SLOTS))) return -1;
        memset(d->slot, 0xFF, sizeof *d->slot * DFA_SLOTS);
    }
    size_t h = XXH3_64bits(s, sizeof *s) & (DFA_SLOTS - 1);
    for (; d->slot[h] >= 0; h = (h + 1) & (DFA_SLOTS - 1))
        if (!memcmp(&d->set[d->slot[h]], s, sizeof *s)) return d->slot[h];
    if (d->n == DFA_MAX_STATES) return -1;
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        eng_pat_set *set = realloc(d->set, sizeof *set * (size_t)cap);
        if (set) d->set = set;
        int32_t *need = realloc(d->need, sizeof *need * (size_t)cap);
        if (need) d->need = need;
        int32_t(*edge)[N_PLAIN] = realloc(d->edge, sizeof *edge * (size_t)cap);
        if (edge) d->edge = edge;
        if (!set || !need || !edge) return -1;
        d->cap = cap;
    }
    d->set[d->n] = *s;
    d->need[d->n] = eng_pat_need(p, s);
    memset(d->edge[d->n], 0xFF, sizeof d->edge[d->n]);
    d->slot[h] = d->n;
    return d->n++;
}

/* The state after plain byte b from state `from`, with a match still ahead: a state,
 * DFA_DEAD or DFA_FULL. */
static int32_t dfa_edge(struct dfa *d, int32_t from, uint8_t b)
{
    int32_t to = d->edge[from][b - 0x20];
    if (to != DFA_UNSEEN) return to;
    eng_pat_set next;
    if (!eng_pat_step(d->p, &d->set[from], b, &next) || eng_pat_need(d->p, &next) < 0)
        to = DFA_DEAD;
    else if ((to = dfa_state(d, d->p, &next)) < 0)
        return DFA_FULL;
    d->edge[from][b - 0x20] = to;
    return to;
}

/* How walk() takes plain bytes below a state: room (plain_room(); pattern_run()'s in a
 * pattern's run), and in a pattern's run the DFA's state after them (pat). */
struct run {
    int room;
    int32_t pat; /* -1: none */
};

/* s after `extra` characters of plain bytes taken in run r into out: each count moved on
 * as string_byte() moves it (without maxLength, not past minLength), a pattern's state
 * replaced by the DFA's */
static void plain_advance(const eng_gm *m, const struct tset *s, struct run r, int extra,
                          struct tset *out)
{
    out->n = s->n;
    out->work = 0;
    for (int i = 0; i < s->n; i++) {
        memcpy(&out->t[i], &s->t[i], THREAD_BYTES(&s->t[i]));
        struct frame *f = &out->t[i].f[out->t[i].depth - 1];
        const struct node *n = &m->g->nodes[f->node];
        uint32_t a = f->a + (uint32_t)extra;
        if (r.pat >= 0) {
            pat_put(&out->t[i], &m->dfa.set[r.pat]);
        } else if (n->hi < 0) {
            const uint32_t held = f->a > (uint32_t)n->lo ? f->a : (uint32_t)n->lo;
            a = a < held ? a : held;
        }
        f->a = a;
    }
}

static void walk_from(eng_gm *m, const eng_gm_vocab *gv, int32_t at, const struct tset *in,
                      int level);

/* Marks the tokens below trie node at whose bytes the state in (lvl[level]) takes after
 * `extra` plain bytes already taken below it in run r. */
static void walk(eng_gm *m, const eng_gm_vocab *gv, int32_t at, const struct tset *in, int level,
                 struct run r, int extra)
{
    struct tset *next = &m->lvl[level + 1];
    for (int32_t c = gv->node[at].child; c >= 0; c = gv->node[c].sibling) {
        const uint8_t b = gv->node[c].byte;
        int32_t pat = -1; /* the child's DFA state, in a pattern's run */
        int same;
        if (r.pat >= 0 && plain_byte(b)) {
            pat = dfa_edge(&m->dfa, r.pat, b);
            if (pat == DFA_DEAD || (pat >= 0 && m->dfa.need[pat] > r.room - extra - 1))
                continue;
            same = pat >= 0;
        } else {
            same = r.room > extra && plain_byte(b);
        }
        if (!same) {
            const struct tset *from = in;
            if (extra) { /* (m->moved is free again once stepped: each child makes its own) */
                plain_advance(m, in, r, extra, &m->moved);
                from = &m->moved;
            }
            step_all(m->g, from, b, next);
            if (!next->n) continue;
        }
        for (int32_t id = gv->node[c].token; id >= 0; id = gv->same[id])
            m->allowed[id] = 1;
        if (gv->node[c].child < 0) continue;
        if (same) /* (next is free again: the child's scratch) */
            walk(m, gv, c, in, level, (struct run){r.room, pat}, extra + 1);
        else
            walk_from(m, gv, c, next, level + 1);
    }
}

/* walk() below trie node at from state in (lvl[level]), no byte taken yet */
static void walk_from(eng_gm *m, const eng_gm_vocab *gv, int32_t at, const struct tset *in,
                      int level)
{
    struct run r = {plain_room(m->g, in), -1};
    int room;
    const eng_pattern *p = pattern_run(m->g, in, &room);
    if (p) {
        eng_pat_set s;
        pat_get(&in->t[0], &s);
        if ((r.pat = dfa_state(&m->dfa, p, &s)) >= 0) r.room = room;
    }
    walk(m, gv, at, in, level, r, 0);
}

/* Marks the tokens at trie node at and below it. */
static void mark_all(eng_gm *m, const eng_gm_vocab *gv, int32_t at)
{
    for (int32_t id = gv->node[at].token; id >= 0; id = gv->same[id])
        m->allowed[id] = 1;
    for (int32_t c = gv->node[at].child; c >= 0; c = gv->node[c].sibling)
        mark_all(m, gv, c);
}

/* walk() for an answer still undecided (eng_gm_optional) below trie node at, whose bytes
 * are white space (lead bytes of it in all): more leaves it so, while within MAX_LEAD;
 * '{' begins the document (lvl[0] its start), any other byte text. */
static void walk_lead(eng_gm *m, const eng_gm_vocab *gv, int32_t at, int lead)
{
    for (int32_t c = gv->node[at].child; c >= 0; c = gv->node[c].sibling) {
        uint8_t b = gv->node[c].byte;
        if (is_space(b)) {
            if (lead >= MAX_LEAD) continue;
            for (int32_t id = gv->node[c].token; id >= 0; id = gv->same[id])
                m->allowed[id] = 1;
            walk_lead(m, gv, c, lead + 1);
        } else if (b == '{') {
            step_all(m->g, &m->lvl[0], b, &m->lvl[1]);
            if (!m->lvl[1].n) continue;
            for (int32_t id = gv->node[c].token; id >= 0; id = gv->same[id])
                m->allowed[id] = 1;
            if (gv->node[c].child >= 0) walk_from(m, gv, c, &m->lvl[1], 1);
        } else {
            mark_all(m, gv, c);
        }
    }
}

int eng_gm_mask(eng_gm *m, const eng_gm_vocab *gv, float *logits)
{
    if (m->n_lvl < gv->depth + 1) {
        struct tset *l = realloc(m->lvl, sizeof *l * (size_t)(gv->depth + 1));
        if (!l) return ENG_ENOMEM;
        m->lvl = l;
        m->n_lvl = gv->depth + 1;
    }
    if (m->n_allowed < gv->n_vocab) {
        uint8_t *a = malloc((size_t)gv->n_vocab);
        if (!a) return ENG_ENOMEM;
        free(m->allowed);
        m->allowed = a;
        m->n_allowed = gv->n_vocab;
    }
    memset(m->allowed, 0, (size_t)gv->n_vocab);
    m->lvl[0].n = m->cur.n;
    for (int i = 0; i < m->cur.n; i++)
        memcpy(&m->lvl[0].t[i], &m->cur.t[i], THREAD_BYTES(&m->cur.t[i]));
    /* the DFA afresh when full, or when this mask begins in another pattern's string */
    int room;
    const eng_pattern *p = pattern_run(m->g, &m->lvl[0], &room);
    if (m->dfa.n == DFA_MAX_STATES || (p && p != m->dfa.p)) dfa_clear(&m->dfa);
    if (m->state == ENG_GM_TEXT)
        mark_all(m, gv, 0);
    else if (m->state == ENG_GM_UNDECIDED)
        walk_lead(m, gv, 0, m->lead);
    else
        walk_from(m, gv, 0, &m->lvl[0], 0);
    int end = eng_gm_accepting(m), n = 0;
    for (int32_t id = 0; id < gv->n_vocab; id++) {
        int ok = gv->kind[id] == T_END ? end : m->allowed[id];
        if (ok)
            n++;
        else
            logits[id] = -INFINITY;
    }
    return n;
}
