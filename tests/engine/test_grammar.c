/* tests engine/grammar.c: documents fed byte by byte are taken or refused as JSON and as
 * their schema say, with the limits of grammar.h; schemas refused by name; and the mask
 * (a walk of the vocabulary's trie) against feeding every token of the default model's
 * vocabulary one at a time, in states inside keys, strings, numbers and between values. */
#include "engine.h"
#include "gguf.h"
#include "grammar.h"
#include "tokenizer.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

TestSuite(grammar, .timeout = 60);

static eng_grammar *make(const char *schema)
{
    eng_grammar *g = NULL;
    char err[256];
    int rc = eng_grammar_create(schema, schema ? strlen(schema) : 0, &g, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", schema, err);
    return g;
}

/* Feeds doc byte by byte: how many bytes were taken before one was refused. */
static size_t taken(eng_gm *m, const char *doc)
{
    size_t i = 0;
    for (; doc[i]; i++)
        if (!eng_gm_feed(m, doc + i, 1)) break;
    return i;
}

/* Whether schema takes doc whole and ends complete there. */
static int accepts(const char *schema, const char *doc)
{
    eng_grammar *g = make(schema);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    int ok = taken(m, doc) == strlen(doc) && eng_gm_accepting(m);
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
    return ok;
}

static void refuses_at(const char *schema, const char *doc, size_t at)
{
    eng_grammar *g = make(schema);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    size_t n = taken(m, doc);
    cr_expect_eq(n, at, "%s: %s refused at byte %zu, expected %zu", schema ? schema : "object", doc,
                 n, at);
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

static void compile_error(const char *schema, const char *want)
{
    eng_grammar *g = NULL;
    char err[256];
    cr_expect_eq(eng_grammar_create(schema, strlen(schema), &g, err, sizeof err), ENG_EINVAL,
                 "%s compiled", schema);
    cr_expect_null(g);
    cr_expect(strstr(err, want) != NULL, "%s: error \"%s\", expected \"%s\"", schema, err, want);
}

Test(grammar, any_object)
{
    cr_expect(accepts(NULL, "{}"));
    cr_expect(accepts(NULL, "{\"a\": [1, -2.5e+3, 0, \"x\\u00e9\\n\", true, null, {\"b\": {}}]}"));
    cr_expect(accepts(NULL, "{\n  \"k\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\n}"));
    /* only an object, and nothing after it */
    refuses_at(NULL, "[1]", 0);
    refuses_at(NULL, "\"s\"", 0);
    refuses_at(NULL, "{} ", 2);
    refuses_at(NULL, "{}{}", 2);
    /* JSON's own rules */
    refuses_at(NULL, "{,}", 1);
    refuses_at(NULL, "{\"a\":1,}", 7);
    refuses_at(NULL, "{\"a\" 1}", 4);
    refuses_at(NULL, "{\"a\":01}", 6);
    refuses_at(NULL, "{\"a\":1.}", 7);
    refuses_at(NULL, "{\"a\":-}", 6);
    refuses_at(NULL, "{\"a\":tru}", 8);
    refuses_at(NULL, "{\"a\":\"x\ny\"}", 7); /* a raw line break in a string */
    refuses_at(NULL, "{\"a\":\"\\x\"}", 7);  /* an unknown escape */
    refuses_at(NULL, "{\"a\":\"\\u12g4\"}", 10);
    refuses_at(NULL, "{\"a\":\"\xc0\xaf\"}", 6);     /* an overlong form */
    refuses_at(NULL, "{\"a\":\"\xed\xa0\x80\"}", 7); /* a surrogate */
    refuses_at(NULL, "{\"a\":\"\xe2\x82\"}", 8);     /* a character cut short */
}

Test(grammar, completion_and_the_end)
{
    eng_grammar *g = make("{\"type\": \"integer\"}");
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    cr_expect_not(eng_gm_accepting(m));
    cr_assert(eng_gm_feed(m, "12", 2));
    /* a number may go on: complete, not done */
    cr_expect(eng_gm_accepting(m));
    cr_expect_not(eng_gm_done(m));
    cr_expect_not(eng_gm_feed(m, ".5", 2), "an integer has no fraction");
    cr_expect(eng_gm_feed(m, "3", 1));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);

    g = make("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"boolean\"}}}");
    cr_assert_eq(eng_gm_create(g, &m), 0);
    cr_assert(eng_gm_feed(m, "{\"a\": true", 10));
    cr_expect_not(eng_gm_accepting(m));
    cr_expect_not(eng_gm_feed(m, "x", 1));
    cr_assert(eng_gm_feed(m, "}", 1));
    cr_expect(eng_gm_accepting(m));
    cr_expect(eng_gm_done(m));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

static const char *person =
    "{\"title\": \"Person\", \"type\": \"object\", \"properties\": {"
    "\"name\": {\"type\": \"string\", \"description\": \"full name\"},"
    "\"age\": {\"type\": \"integer\"},"
    "\"email\": {\"type\": [\"string\", \"null\"]},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 2}},"
    "\"required\": [\"name\", \"age\"], \"additionalProperties\": false}";

Test(grammar, object_properties_in_order)
{
    cr_expect(accepts(person, "{\"name\": \"Bo\", \"age\": 42}"));
    cr_expect(
        accepts(person, "{\"name\":\"Bo\",\"age\":42,\"email\":null,\"tags\":[\"a\",\"b\"]}"));
    cr_expect(accepts(person, "{\"name\": \"Bo\", \"age\": 42, \"tags\": []}"));
    cr_expect(accepts(person, "{\"name\": \"Bo\", \"age\": -7, \"email\": \"b@x.org\"}"));
    /* a required property cannot be skipped, nor the object closed before it */
    refuses_at(person, "{\"age\": 1}", 2);
    refuses_at(person, "{\"name\": \"Bo\"}", 13);
    /* declared order; nothing undeclared; a property once */
    refuses_at(person, "{\"name\": \"Bo\", \"age\": 1, \"tags\": [], \"email\": null}", 35);
    refuses_at(person, "{\"name\": \"Bo\", \"age\": 1, \"nick\": \"b\"}", 26);
    refuses_at(person, "{\"name\": \"Bo\", \"name\": \"Al\"}", 16);
    /* types */
    refuses_at(person, "{\"name\": 5}", 9);
    refuses_at(person, "{\"name\": \"Bo\", \"age\": 4.5}", 23);
    refuses_at(person, "{\"name\": \"Bo\", \"age\": 4, \"email\": true}", 34);
    /* maxItems */
    refuses_at(person, "{\"name\": \"B\", \"age\": 4, \"tags\": [\"a\", \"b\", \"c\"]}", 41);
    /* white space after a value only where the object may close: no dead end before a
     * comma the rules refuse */
    refuses_at(person, "{\"name\": \"Bo\" , \"age\": 1}", 13);
    cr_expect(accepts(person, "{\"name\": \"Bo\", \"age\": 1 }"));
    refuses_at("{\"type\": \"array\", \"minItems\": 2}", "[1 , 2]", 2);
    /* trailing comma after the last property */
    refuses_at(person, "{\"name\":\"B\",\"age\":4,\"email\":null,\"tags\":[],}", 42);
}

Test(grammar, enum_const_and_unions)
{
    const char *color = "{\"enum\": [\"red\", \"green\", 1, 12, null]}";
    cr_expect(accepts(color, "\"green\""));
    cr_expect(accepts(color, "null"));
    cr_expect(accepts(color, "1"));
    cr_expect(accepts(color, "12"));
    refuses_at(color, "\"blue\"", 1);
    refuses_at(color, "123", 2);
    refuses_at(color, "\"red\" ", 5);
    cr_expect(accepts("{\"const\": {\"a\": [1, 2]}}", "{\"a\":[1,2]}"));
    refuses_at("{\"const\": {\"a\": [1, 2]}}", "{\"a\": [1,2]}", 5);
    /* type names an enum's values are filtered by */
    refuses_at("{\"type\": \"string\", \"enum\": [\"a\", 1]}", "1", 0);

    const char *either = "{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"array\", \"items\": "
                         "{\"type\": \"boolean\"}, \"minItems\": 1}]}";
    cr_expect(accepts(either, "7"));
    cr_expect(accepts(either, "[true, false]"));
    refuses_at(either, "[]", 1);
    refuses_at(either, "\"7\"", 0);
    cr_expect(accepts("{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"null\"}]}", "null"));
    cr_expect(accepts("{\"allOf\": [{\"type\": \"boolean\"}]}", "false"));
    /* {} and true: anything */
    cr_expect(accepts("{}", "[{\"x\": 1.5}, \"y\"]"));
    cr_expect(accepts("true", "-0.25E-2"));
}

/* A union of n objects told apart by a first property "kind", const "k0", "k1", ...,
 * each with its own second property "v<i>" of type integer. */
static char *keyed_schema(int n, const char *first_key)
{
    size_t cap = 256 + (size_t)n * 200;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    strcpy(s, "{\"anyOf\": [");
    for (int i = 0; i < n; i++) {
        char alt[200];
        snprintf(alt, sizeof alt,
                 "%s{\"type\": \"object\", \"properties\": {\"%s\": {\"const\": \"k%d\"}, "
                 "\"v%d\": {\"type\": \"integer\"}}, \"required\": [\"%s\", \"v%d\"]}",
                 i ? ", " : "", i == 1 && first_key ? first_key : "kind", i, i,
                 i == 1 && first_key ? first_key : "kind", i);
        strcat(s, alt);
    }
    strcat(s, "]}");
    return s;
}

/* A union of objects told apart by their first property (function calls): one reading
 * until its value, so more alternatives than ENG_GM_MAX_THREADS can each be written. */
Test(grammar, keyed_unions_of_many_objects)
{
    char *s = keyed_schema(64, NULL);
    for (int i = 0; i < 64; i += 9) {
        char doc[64];
        snprintf(doc, sizeof doc, "{\"kind\": \"k%d\", \"v%d\": %d}", i, i, i);
        cr_expect(accepts(s, doc), "%s", doc);
        /* another alternative's second property is refused where its name differs */
        char mine[8], other[8];
        snprintf(mine, sizeof mine, "%d", i);
        snprintf(other, sizeof other, "%d", i + 1);
        size_t same = 0;
        while (mine[same] == other[same])
            same++;
        snprintf(doc, sizeof doc, "{\"kind\": \"k%d\", \"v%d\": 1}", i, i + 1);
        refuses_at(s, doc, (size_t)(strstr(doc, ", \"v") - doc) + 4 + same);
    }
    cr_expect(accepts(s, "{\"kind\": \"k63\", \"v63\": 1}"));
    refuses_at(s, "{\"kind\": \"k64\"", 12);
    refuses_at(s, "{\"kind\": \"k6\"}", 13);
    refuses_at(s, "{\"v1\": 1}", 2);
    free(s);
    /* pydantic's tagged union: oneOf of references, with OpenAPI's discriminator */
    char *tagged = malloc(8192);
    cr_assert_not_null(tagged);
    strcpy(tagged, "{\"$defs\": {");
    for (int i = 0; i < 20; i++) {
        char def[200];
        snprintf(def, sizeof def,
                 "%s\"P%d\": {\"type\": \"object\", \"title\": \"P%d\", \"properties\": {"
                 "\"pet\": {\"const\": \"p%d\", \"type\": \"string\"}, \"age\": {\"type\": "
                 "\"integer\"}}, \"required\": [\"pet\", \"age\"]}",
                 i ? ", " : "", i, i, i);
        strcat(tagged, def);
    }
    strcat(tagged, "}, \"oneOf\": [");
    for (int i = 0; i < 20; i++) {
        char ref[40];
        snprintf(ref, sizeof ref, "%s{\"$ref\": \"#/$defs/P%d\"}", i ? ", " : "", i);
        strcat(tagged, ref);
    }
    strcat(tagged, "], \"discriminator\": {\"propertyName\": \"pet\"}}");
    cr_expect(accepts(tagged, "{\"pet\": \"p19\", \"age\": 3}"));
    cr_expect(accepts(tagged, "{\"pet\": \"p0\", \"age\": 3}"));
    refuses_at(tagged, "{\"pet\": \"p20\"", 11);
    refuses_at(tagged, "{\"pet\": \"p1\"}", 12);
    free(tagged);
        /* not keyed (the first keys differ): a plain union, which follows 16 readings */
    s = keyed_schema(20, "sort");
    cr_expect(accepts(s, "{\"sort\": \"k1\", \"v1\": 5}"));
    cr_expect(accepts(s, "{\"kind\": \"k15\", \"v15\": 5}"));
    refuses_at(s, "{\"kind\": \"k19\", \"v19\": 5}", 12);
    free(s);
}

Test(grammar, strings_count_characters)
{
    const char *s = "{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}";
    cr_expect(accepts(s, "\"ab\""));
    cr_expect(accepts(s, "\"\xc3\xa9t\xc3\xa9\"")); /* été: three characters, five bytes */
    cr_expect(accepts(s, "\"a\\n\""));
    refuses_at(s, "\"a\"", 2);
    refuses_at(s, "\"abcd\"", 4);
    /* minLength alone: counted up to it, any length past it */
    const char *at_least = "{\"type\": \"string\", \"minLength\": 3}";
    cr_expect(accepts(at_least, "\"ab\xc3\xa9\""));
    cr_expect(accepts(at_least, "\"abcdefghijklmnopqrstuvwxyz0123456789\""));
    refuses_at(at_least, "\"a\\n\"", 4);
}

Test(grammar, references_and_recursion)
{
    const char *tree =
        "{\"$defs\": {\"Node\": {\"type\": \"object\", \"properties\": {"
        "\"value\": {\"type\": \"integer\"},"
        "\"children\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/Node\"}}},"
        "\"required\": [\"value\"]}}, \"$ref\": \"#/$defs/Node\"}";
    cr_expect(accepts(tree, "{\"value\": 1, \"children\": [{\"value\": 2}, {\"value\": 3, "
                            "\"children\": [{\"value\": 4, \"children\": []}]}]}"));
    refuses_at(tree, "{\"value\": 1, \"children\": [{\"children\": []}]}", 28);
    const char *list = "{\"type\": \"object\", \"properties\": {\"next\": {\"anyOf\": "
                       "[{\"$ref\": \"#\"}, {\"type\": \"null\"}]}}, \"required\": [\"next\"]}";
    cr_expect(accepts(list, "{\"next\": {\"next\": {\"next\": null}}}"));
    /* pydantic's older form */
    cr_expect(accepts("{\"definitions\": {\"A\": {\"type\": \"boolean\"}}, \"type\": \"array\", "
                      "\"items\": {\"$ref\": \"#/definitions/A\"}}",
                      "[true]"));
    /* a recursive schema, nested as deep as it goes: refused where it cannot go on, and
     * the document can still close there (no dead end) */
    const char *kids = "{\"type\": \"object\", \"properties\": {\"kids\": {\"type\": "
                       "\"array\", \"items\": {\"$ref\": \"#\"}}}, \"required\": [\"kids\"]}";
    eng_grammar *g = make(kids);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    int levels = 0;
    while (eng_gm_feed(m, "{\"kids\": [", 10))
        levels++;
    cr_expect(levels >= 8 && levels < ENG_GM_MAX_DEPTH, "%d levels", levels);
    cr_expect_not(eng_gm_feed(m, "{", 1));
    for (int i = 0; i < levels; i++)
        cr_assert(eng_gm_feed(m, "]}", 2), "closing level %d of %d", i, levels);
    cr_expect(eng_gm_done(m));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

/* From any place of a document, the document can be finished: a matcher fed the first of
 * `open` that it takes (or any printable byte) for `steps` bytes, going as deep as it may,
 * then the first of `close`, always takes some byte until the document is done. */
static void never_stuck(const char *schema, const char *open, const char *close, int steps)
{
    eng_grammar *g = make(schema);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    char doc[4096];
    size_t len = 0;
    for (int i = 0; i < 2000 && !eng_gm_done(m); i++) {
        const char *prefer = i < steps ? open : close;
        int took = 0;
        for (const char *c = prefer; *c && !took; c++)
            took = eng_gm_feed(m, c, 1) && (doc[len++] = *c);
        for (int c = 0x20; c < 0x7F && !took; c++)
            took = eng_gm_feed(m, (char[]){(char)c}, 1) && (doc[len++] = (char)c);
        doc[len] = 0;
        cr_assert(took, "%s: stuck after %s", schema, doc);
    }
    cr_expect(eng_gm_done(m), "%s: %s", schema, doc);
    cr_expect(accepts(schema, doc));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

/* Nested as deep as the limit lets them, values still end: a property, an item or a comma
 * is refused where what it begins could not be finished within ENG_GM_MAX_DEPTH. */
Test(grammar, no_dead_end_at_the_nesting_limit)
{
    const char *opt = "{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#\"}}, "
                      "\"additionalProperties\": false}";
    eng_grammar *g = make(opt);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    int levels = 0;
    while (eng_gm_feed(m, "{\"a\": ", 6))
        levels++;
    cr_expect_eq(levels, ENG_GM_MAX_DEPTH - 2);
    cr_expect(eng_gm_feed(m, "{}", 2)); /* the deepest object is empty */
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
    never_stuck(opt, "{\"a: ", "}", 200);
    never_stuck("{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}", "[,", "]", 200);
    /* items required: each level needs one more below it, so fewer levels */
    never_stuck("{\"type\": \"array\", \"items\": {\"anyOf\": [{\"$ref\": \"#\"}, "
                "{\"type\": \"integer\"}]}, \"minItems\": 2}",
                "[,", "]0", 200);
    never_stuck("{\"type\": \"object\", \"properties\": {\"n\": {\"anyOf\": [{\"$ref\": "
                "\"#\"}, {\"type\": \"null\"}]}, \"k\": {\"type\": \"array\", \"items\": "
                "{\"$ref\": \"#\"}}}, \"required\": [\"n\", \"k\"]}",
                "{[\"nk: ,", "}]nul", 300);
    /* a tuple whose second place is deeper than the first (at both parities of depth: the
     * comma after the first refused where the second has no room) */
    const char *tuple = "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"integer\"}, "
                        "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/T\"}, "
                        "\"minItems\": 1}]}";
    char twice[512];
    snprintf(twice, sizeof twice, "{\"$defs\": {\"T\": %s}, \"$ref\": \"#/$defs/T\"}", tuple);
    never_stuck(twice, "[,0", "]", 200);
    snprintf(twice, sizeof twice,
             "{\"$defs\": {\"T\": %s}, \"type\": \"object\", \"properties\": {\"t\": "
             "{\"$ref\": \"#/$defs/T\"}}}",
             tuple);
    never_stuck(twice, "{\"t:[,0", "]}", 200);
    never_stuck(NULL, "[{\"a: ,", "\"]}", 200); /* any JSON */
}

Test(grammar, schemas_without_a_finite_document_refused)
{
    const char *none = "no document of the schema is finite";
    compile_error("{\"$ref\": \"#\"}", none);
    compile_error("{\"allOf\": [{\"$ref\": \"#\"}]}", none);
    compile_error("{\"$defs\": {\"L\": {\"$ref\": \"#/$defs/L\"}}, \"$ref\": \"#/$defs/L\"}", none);
    compile_error("{\"$defs\": {\"A\": {\"$ref\": \"#/$defs/B\"}, \"B\": {\"$ref\": "
                  "\"#/$defs/A\"}}, \"$ref\": \"#/$defs/A\"}",
                  none);
    compile_error("{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#\"}}, "
                  "\"required\": [\"a\"]}",
                  none);
    compile_error("{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}, \"minItems\": 1}", none);
    /* a finite document deeper than the limit */
    char chain[2048] = "";
    for (int i = 0; i < ENG_GM_MAX_DEPTH; i++)
        strcat(chain, "{\"type\": \"object\", \"required\": [\"a\"], \"properties\": {\"a\": ");
    strcat(chain, "{\"type\": \"integer\"}");
    for (int i = 0; i < ENG_GM_MAX_DEPTH; i++)
        strcat(chain, "}}");
    compile_error(chain, "the schema requires more than 23 levels of nesting");
    /* an alternative without one is left out; the others stand */
    cr_expect(accepts("{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"integer\"}]}", "7"));
    const char *opt = "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"array\", "
                      "\"items\": {\"$ref\": \"#/properties/x\"}, \"minItems\": 1}, "
                      "\"y\": {\"type\": \"integer\"}}}";
    refuses_at(opt, "{\"x", 2);
    cr_expect(accepts(opt, "{\"y\": 1}"));
}

Test(grammar, free_keys_follow_additional_properties)
{
    const char *counts =
        "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}";
    cr_expect(accepts(counts, "{\"apples\": 3, \"pears\": 0}"));
    refuses_at(counts, "{\"apples\": \"3\"}", 11);
    refuses_at("{\"type\": \"object\", \"additionalProperties\": false}", "{\"a\"", 1);
    cr_expect(accepts("{\"type\": \"object\", \"additionalProperties\": false}", "{}"));
}

Test(grammar, white_space_and_nesting_limits)
{
    cr_expect(accepts(NULL, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
    refuses_at(NULL, "{\n\n\"a\": 1}", 2); /* one line break between two tokens */
    refuses_at(NULL, "{ \n\"a\": 1}", 2);  /* and no space before it */
    refuses_at(NULL, " {}", 0);            /* none before the document */
    refuses_at(NULL, "{\"a\":  1}", 6);    /* one space after a colon */
    refuses_at(NULL, "{\"a\":\n1}", 5);
    refuses_at(NULL, "{\"a\" : 1}", 4);           /* nor before a colon */
    refuses_at(NULL, "{\"a\": 1 , \"b\": 2}", 8); /* nor before a comma */
    refuses_at(NULL, "{\"a\": [1 ,2]}", 9);
    cr_expect(accepts(NULL, "{ \"a\": [ 1, 2 ] }"));
    char doc[64] = "{\n";
    memset(doc + 2, ' ', 21);
    cr_expect_eq(strlen(doc), 23);
    refuses_at(NULL, doc, 22); /* twenty spaces */
    /* numbers: sixteen digits */
    refuses_at(NULL, "{\"a\": 12345678901234567}", 22);
    /* nesting: ENG_GM_MAX_DEPTH levels of stack, the root's and what holds it among them */
    char deep[128] = "{\"a\":";
    for (int i = 0; i < ENG_GM_MAX_DEPTH; i++)
        strcat(deep, "[");
    refuses_at(NULL, deep, 5 + ENG_GM_MAX_DEPTH - 2);
    /* the deepest container holds nothing, and closes */
    refuses_at(NULL, "{\"a\":[[[[[[[[[[[[[[[[[[[[[[0", 5 + ENG_GM_MAX_DEPTH - 2);
    deep[5 + ENG_GM_MAX_DEPTH - 2] = 0;
    for (int i = 0; i < ENG_GM_MAX_DEPTH - 2; i++)
        strcat(deep, "]");
    strcat(deep, "}");
    cr_expect(accepts(NULL, deep), "%s", deep);
}

/* unions within unions: 64 alternatives at each of 8 levels, 2^48 ways to read a byte if
 * each were tried; a byte's work is bounded, the document still generated validly */
Test(grammar, nested_unions_cost_bounded_work, .timeout = 10)
{
    char *schema = malloc(1 << 20);
    strcpy(schema, "{\"type\": \"integer\"}");
    for (int level = 0; level < 8; level++) {
        char *next = malloc(1 << 20);
        strcpy(next, "{\"anyOf\": [");
        for (int i = 0; i < 64; i++) {
            strcat(next, i ? ", " : "");
            /* each alternative its own copy (no sharing by $ref), kept small by nesting one */
            strcat(next, i ? "{\"type\": \"string\"}" : schema);
        }
        strcat(next, "]}");
        free(schema);
        schema = next;
    }
    cr_expect(accepts(schema, "42"));
    cr_expect(accepts(schema, "\"x\""));
    free(schema);
    /* a union of itself, 63 times over: 63^8 readings down to the expansion limit */
    char self[2048] = "{\"anyOf\": [";
    for (int i = 0; i < 63; i++)
        strcat(self, "{\"$ref\": \"#\"}, ");
    strcat(self, "{\"type\": \"null\"}]}");
    cr_expect(accepts(self, "null"));
    eng_grammar *g = make(self);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    cr_expect_not(eng_gm_feed(m, "1", 1));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

/* minimum, maximum, their exclusive forms (numbers, and draft 4's flags) and multipleOf:
 * a number is refused at the first byte after which no value within them can be
 * written, and may end only within them */
Test(grammar, numbers_within_bounds)
{
    const char *die = "{\"type\": \"integer\", \"minimum\": 1, \"maximum\": 6}";
    for (int v = -12; v <= 70; v++) {
        char text[16];
        snprintf(text, sizeof text, "%d", v);
        cr_expect_eq(accepts(die, text), v >= 1 && v <= 6, "%s", text);
    }
    refuses_at(die, "0", 0);
    refuses_at(die, "-1", 0);
    refuses_at(die, "12", 1);
    refuses_at(die, "6.0", 1); /* an integer is written without a point */
    /* a prefix that only longer numbers complete */
    const char *big = "{\"type\": \"integer\", \"minimum\": 100, \"maximum\": 250}";
    cr_expect(accepts(big, "250"));
    refuses_at(big, "251", 2);
    refuses_at(big, "3", 0);
    refuses_at(big, "2000", 3);
    eng_grammar *g = make(big);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    cr_expect(eng_gm_feed(m, "2", 1));
    cr_expect_not(eng_gm_accepting(m), "2 is below the minimum");
    eng_gm_destroy(m);
    eng_grammar_destroy(g);

    const char *unit = "{\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 1}";
    cr_expect(accepts(unit, "0.5"));
    cr_expect(accepts(unit, "1"));
    cr_expect(accepts(unit, "1.0"));
    cr_expect(accepts(unit, "0.0000000000000001"));
    cr_expect_not(accepts(unit, "0"));
    cr_expect_not(accepts(unit, "0.0"));
    refuses_at(unit, "1.01", 3);
    refuses_at(unit, "1e0", 1); /* bounded numbers are written without an exponent */
    refuses_at(unit, "-0.5", 0);
    refuses_at(unit, "2", 0);
    /* draft 4: exclusiveMaximum as a flag on maximum */
    const char *d4 = "{\"type\": \"number\", \"maximum\": 1, \"exclusiveMaximum\": true}";
    cr_expect_not(accepts(d4, "1"));
    cr_expect(accepts(d4, "0.9999"));
    cr_expect(accepts(d4, "-300"));

    const char *neg = "{\"type\": \"number\", \"minimum\": -2.5, \"maximum\": -1}";
    cr_expect(accepts(neg, "-2.5"));
    cr_expect(accepts(neg, "-1"));
    cr_expect(accepts(neg, "-1.75"));
    refuses_at(neg, "-2.51", 4);
    refuses_at(neg, "-0.9", 1);
    refuses_at(neg, "-3", 1);
    refuses_at(neg, "1", 0);
    /* 0.1 as written, not the double just above it */
    cr_expect(accepts("{\"type\": \"number\", \"maximum\": 0.1}", "0.1"));
    refuses_at("{\"type\": \"number\", \"maximum\": 0.1}", "0.1000000000000001", 17);

    /* multipleOf: a prefix stays while a multiple can still follow */
    const char *five = "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 100, "
                       "\"multipleOf\": 5}";
    cr_expect(accepts(five, "75"));
    cr_expect(accepts(five, "100"));
    cr_expect_not(accepts(five, "7"));
    refuses_at(five, "76", 1);
    /* an integer's fractional multipleOf: the whole numbers it divides */
    cr_expect(accepts("{\"type\": \"integer\", \"multipleOf\": 0.5}", "7"));
    cr_expect(accepts("{\"type\": \"integer\", \"multipleOf\": 0.3}", "-12"));
    cr_expect_not(accepts("{\"type\": \"integer\", \"multipleOf\": 0.3}", "7"));
    const char *cents = "{\"type\": \"number\", \"minimum\": 0, \"multipleOf\": 0.01}";
    cr_expect(accepts(cents, "19.99"));
    cr_expect(accepts(cents, "3.1"));
    cr_expect(accepts(cents, "3.100"));
    refuses_at(cents, "3.141", 4);

    /* no type: the bounds describe a number; within a type list they bind the number only */
    cr_expect(accepts("{\"minimum\": 2}", "2.5"));
    refuses_at("{\"minimum\": 2}", "\"a\"", 0);
    const char *opt = "{\"type\": [\"integer\", \"null\"], \"minimum\": 1}";
    cr_expect(accepts(opt, "null"));
    cr_expect(accepts(opt, "3"));
    refuses_at(opt, "0", 0);
    /* in an object and an array: the number ends where its bounds allow */
    const char *rating =
        "{\"type\": \"object\", \"properties\": {\"stars\": {\"type\": \"integer\", "
        "\"minimum\": 1, \"maximum\": 5}, \"tags\": {\"type\": \"array\", "
        "\"items\": {\"type\": \"integer\", \"minimum\": 10}}}, "
        "\"required\": [\"stars\", \"tags\"]}";
    cr_expect(accepts(rating, "{\"stars\": 4, \"tags\": [10, 99]}"));
    refuses_at(rating, "{\"stars\": 4, \"tags\": [1]}", 23);
    refuses_at(rating, "{\"stars\": 4, \"tags\": [1,", 23);
    refuses_at(rating, "{\"stars\": 7}", 10);
}

/* pattern (ECMA-262, not anchored unless it says so) and the formats held to: the string's
 * characters, escaped or not, go through the pattern; a lead byte or an escape only when a
 * character it begins is taken; the string closes only on a match of the right length */
Test(grammar, strings_held_to_patterns_and_formats)
{
    const char *code = "{\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d{3}$\"}";
    cr_expect(accepts(code, "\"AB-123\""));
    refuses_at(code, "\"Ab-123\"", 2);
    refuses_at(code, "\"AB-12\"", 6);
    refuses_at(code, "\"AB-1234\"", 7);
    refuses_at(code, "\"\\u0041B-123\"", 1); /* no escape is of a capital letter */
    const char *tail = "{\"type\": \"string\", \"pattern\": \"end$\"}";
    cr_expect(accepts(tail, "\"the end\""));
    refuses_at(tail, "\"the ending\"", 11);
    /* escapes are characters: a quote, a line break */
    const char *quoted = "{\"type\": \"string\", \"pattern\": \"^\\\"[a-z]+\\\"\\n?$\"}";
    cr_expect(accepts(quoted, "\"\\\"hi\\\"\\n\""));
    refuses_at(quoted, "\"\\t", 2);
    refuses_at(quoted, "\"\\u0022", 2); /* no \u escapes in such a string */
    /* UTF-8: a lead byte whose characters the class holds none of is refused at once */
    const char *accents = "{\"type\": \"string\", \"pattern\": \"^[\xc3\xa0-\xc3\xbf]+$\"}";
    cr_expect(accepts(accents, "\"\xc3\xa9t\xc3\xa9\"") == 0);
    cr_expect(accepts(accents, "\"\xc3\xa9\xc3\xa8\""));
    refuses_at(accents, "\"\xc4\x80\"", 1);
    refuses_at(accents, "\"\xc3\x80\"", 2);
    /* with lengths: a match of 3 or 6 characters, at most 4 */
    const char *zip = "{\"type\": \"string\", \"pattern\": \"^\\\\d{3}(-\\\\d{2})?$\", "
                      "\"maxLength\": 4}";
    cr_expect(accepts(zip, "\"123\""));
    refuses_at(zip, "\"123-\"", 4);
    /* a lead byte or an escape only where a character it begins can still end the string
     * within maxLength, or reach minLength */
    const char *dot = "{\"type\": \"string\", \"pattern\": \"^.+\\\\.$\", \"maxLength\": 5}";
    cr_expect(accepts(dot, "\"abcd.\""));
    refuses_at(dot, "\"abcd\xc3\xa9", 5);
    refuses_at(dot, "\"abcd\\\"", 5);
    const char *two = "{\"type\": \"string\", \"pattern\": \"^(?:\\u00e9|aa)$\", \"minLength\": 2}";
    cr_expect(accepts(two, "\"aa\""));
    refuses_at(two, "\"\xc3\xa9", 1);
    /* formats */
    const char *date = "{\"type\": \"string\", \"format\": \"date\"}";
    cr_expect(accepts(date, "\"2024-12-31\""));
    cr_expect(accepts(date, "\"2023-02-28\""));
    refuses_at(date, "\"2024-13-01\"", 7);
    refuses_at(date, "\"2024-02-30\"", 9);
    refuses_at(date, "\"2024-04-31\"", 10);
    /* 29 February of leap years only */
    cr_expect(accepts(date, "\"2024-02-29\""));
    cr_expect(accepts(date, "\"2000-02-29\""));
    cr_expect(accepts(date, "\"1996-02-29\""));
    refuses_at(date, "\"2023-02-29\"", 10);
    refuses_at(date, "\"1900-02-29\"", 10);
    refuses_at(date, "\"2024-02-30\"", 9);
    const char *dt = "{\"type\": \"string\", \"format\": \"date-time\"}";
    cr_expect(accepts(dt, "\"2024-05-06T07:08:09Z\""));
    cr_expect(accepts(dt, "\"2024-05-06T23:59:59.123+02:00\""));
    cr_expect(accepts(dt, "\"2024-02-29T12:00:00Z\""));
    refuses_at(dt, "\"2100-02-29T", 10);
    refuses_at(dt, "\"2024-05-06 07:08:09Z\"", 11);
    refuses_at(dt, "\"2024-05-06T24:00:00Z\"", 13);
    cr_expect(accepts("{\"type\": \"string\", \"format\": \"uuid\"}",
                      "\"123e4567-e89b-12d3-a456-426614174000\""));
    refuses_at("{\"type\": \"string\", \"format\": \"uuid\"}", "\"123g", 4);
    const char *mail = "{\"type\": \"string\", \"format\": \"email\"}";
    cr_expect(accepts(mail, "\"bo.li+x@mail.example.org\""));
    refuses_at(mail, "\"bo..li@x.org\"", 4);
    cr_expect_not(accepts(mail, "\"bo@localhost\""));
    const char *ip = "{\"type\": \"string\", \"format\": \"ipv4\"}";
    cr_expect(accepts(ip, "\"192.168.0.255\""));
    refuses_at(ip, "\"256", 3);
    refuses_at(ip, "\"01", 2);
    /* a format not held to stays an annotation */
    cr_expect(accepts("{\"type\": \"string\", \"format\": \"uri\"}", "\"not a uri\""));
    /* a pattern without a type describes a string; in a type list it binds the string */
    cr_expect(accepts("{\"pattern\": \"^a+$\"}", "\"aaa\""));
    cr_expect(accepts("{\"type\": [\"string\", \"integer\"], \"pattern\": \"^a+$\"}", "12"));
    /* after a pattern string, the next value starts afresh */
    cr_expect(accepts("{\"type\": \"array\", \"items\": {\"type\": \"string\", \"pattern\": "
                      "\"^x$\"}}",
                      "[\"x\", \"x\"]"));
}

/* Tuples (prefixItems, as pydantic writes a tuple's schema): each place its own schema,
 * "items" those after them. */
Test(grammar, tuples_of_prefix_items)
{
    /* tuple[int, str], as pydantic writes it */
    const char *pair = "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"integer\"}, "
                       "{\"type\": \"string\"}], \"minItems\": 2, \"maxItems\": 2}";
    cr_expect(accepts(pair, "[1, \"a\"]"));
    refuses_at(pair, "[\"a\"", 1);
    refuses_at(pair, "[1, 2", 4);
    refuses_at(pair, "[1]", 2);
    refuses_at(pair, "[1, \"a\", ", 7);
    /* no bounds: fewer items may come, and any after them */
    const char *open = "{\"prefixItems\": [{\"type\": \"boolean\"}]}";
    cr_expect(accepts(open, "[]"));
    cr_expect(accepts(open, "[true]"));
    cr_expect(accepts(open, "[false, 3, {\"x\": null}]"));
    refuses_at(open, "[3", 1);
    /* "items" holds those after the tuple; false: none */
    const char *rest = "{\"prefixItems\": [{\"const\": \"op\"}], \"items\": {\"type\": "
                       "\"integer\"}, \"minItems\": 1}";
    cr_expect(accepts(rest, "[\"op\", 1, 2, 3]"));
    refuses_at(rest, "[\"op\", \"x", 7);
    refuses_at(rest, "[]", 1);
    const char *closed = "{\"prefixItems\": [{\"type\": \"null\"}, {\"enum\": [1, 2]}], "
                         "\"items\": false}";
    cr_expect(accepts(closed, "[null, 2]"));
    cr_expect(accepts(closed, "[null]"));
    refuses_at(closed, "[null, 2, ", 8);
    /* nested within a property, and as a union's alternative */
    const char *nested = "{\"type\": \"object\", \"properties\": {\"at\": {\"anyOf\": [{"
                         "\"prefixItems\": [{\"type\": \"number\"}, {\"type\": \"number\"}], "
                         "\"items\": false, \"minItems\": 2}, {\"type\": \"null\"}]}}, "
                         "\"required\": [\"at\"]}";
    cr_expect(accepts(nested, "{\"at\": [1.5, -2]}"));
    cr_expect(accepts(nested, "{\"at\": null}"));
    refuses_at(nested, "{\"at\": [1.5]", 11);
}

Test(grammar, schemas_refused_by_name)
{
    compile_error("{\"type\": \"object\", \"properties\": {\"code\": {\"type\": \"string\", "
                  "\"pattern\": \"^(?=[A-Z])\"}}}",
                  "properties.code: pattern: lookaround is not supported");
    compile_error("{\"type\": \"array\", \"uniqueItems\": true}", "uniqueItems is not supported");
    compile_error("{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}",
                  "pattern: backreferences are not supported");
    compile_error("{\"type\": \"string\", \"pattern\": \"^\\\\d{3}$\", \"maxLength\": 2}",
                  "no string of the pattern has a length within");
    compile_error("{\"type\": \"string\", \"pattern\": 5}", "pattern must be a string");
    compile_error("{\"type\": \"integer\", \"minimum\": \"1\"}", "minimum must be a number");
    compile_error("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}",
                  "no integer of at most 16 digits is within its bounds");
    compile_error("{\"type\": \"integer\", \"exclusiveMinimum\": 1, \"exclusiveMaximum\": 2}",
                  "no integer of at most 16 digits");
    compile_error("{\"type\": \"integer\", \"minimum\": 1e17}", "no integer of at most 16 digits");
    compile_error("{\"type\": \"number\", \"minimum\": 1, \"maximum\": 1.5, \"multipleOf\": 2}",
                  "within its bounds and multipleOf");
    compile_error("{\"type\": \"integer\", \"multipleOf\": 1e-17}",
                  "multipleOf must be a multiple of 1e-16");
    compile_error("{\"type\": \"number\", \"multipleOf\": 0}", "multipleOf must be above 0");
    compile_error("{\"type\": \"number\", \"exclusiveMinimum\": true}",
                  "exclusiveMinimum is true without minimum");
    compile_error("{\"type\": \"array\", \"prefixItems\": []}",
                  "prefixItems must be a non-empty list of schemas");
    compile_error("{\"prefixItems\": [{}, {\"type\": \"strin\"}]}",
                  "prefixItems.1: unknown type \"strin\"");
    compile_error("{\"prefixItems\": [{}], \"items\": false, \"minItems\": 2}",
                  "minItems above prefixItems' length");
    compile_error("{\"$ref\": \"https://example.com/s.json\"}", "not found");
    compile_error("{\"$ref\": \"#/$defs/Missing\"}", "#/$defs/Missing is not found");
    compile_error("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}",
                  "required names \"b\", which is not in properties");
    compile_error("{\"type\": \"strin\"}", "unknown type \"strin\"");
    compile_error("{\"type\": \"string\", \"maxLength\": -1}",
                  "maxLength must be a non-negative integer");
    compile_error("{\"type\": \"string\", \"minLength\": 5, \"maxLength\": 2}",
                  "minLength is above maxLength");
    compile_error("{\"allOf\": [{}, {}]}", "allOf of several schemas");
    compile_error("{\"enum\": []}", "enum must be a non-empty array");
    compile_error("{\"type\": \"integer\", \"anyOf\": [{}]}", "type beside anyOf");
    compile_error("{\"type\": \"object\"", "the schema is not JSON");
    compile_error("false", "accepts nothing");
    compile_error("[1]", "a schema must be an object or a boolean");
}

/* ---- the mask over the default model's vocabulary ------------------------------------ */

static gguf_file *file;
static tok_vocab *vocab;
static eng_gm_vocab *gv;

static void vocab_setup(void)
{
    char err[256];
    cr_assert_eq(gguf_open(MODEL, &file, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tok_create(file, &vocab, err, sizeof err), 0, "%s", err);
    cr_assert_eq(eng_gm_vocab_create(vocab, &gv), 0);
}

static void vocab_teardown(void)
{
    eng_gm_vocab_destroy(gv);
    tok_destroy(vocab);
    gguf_close(file);
}

/* How many end-of-generation tokens the vocabulary has. */
static int eog_count(void)
{
    int eog = 0;
    for (int32_t id = 0; id < tok_n_vocab(vocab); id++)
        eog += tok_is_eog(vocab, id);
    return eog;
}

/* After prefix, the mask allows exactly the tokens eng_gm_allows() allows, one by one;
 * returns how many. optional: the matcher is eng_gm_optional's (1), or eng_gm_repeat's with
 * one more document (2). */
static int mask_equals_allows(eng_gm *m, const char *prefix)
{
    int n = tok_n_vocab(vocab);
    float *logits = calloc((size_t)n, sizeof *logits);
    cr_assert_not_null(logits);
    int allowed = eng_gm_mask(m, gv, logits);
    int count = 0, wrong = 0;
    for (int32_t id = 0; id < n; id++) {
        int a = eng_gm_allows(m, gv, id);
        count += a;
        if (a != (logits[id] == 0.0f)) {
            if (wrong++ < 5) {
                const char *p;
                size_t len;
                tok_piece(vocab, id, &p, &len);
                cr_expect_fail("after %s: token %d (%.*s): allows %d, mask %g", prefix, id,
                               (int)len, p, a, logits[id]);
            }
        }
    }
    cr_expect_eq(wrong, 0);
    cr_expect_eq(allowed, count);
    /* the state is unchanged by either */
    cr_expect_eq(eng_gm_accepting(m), taken(m, "") == 0 && eng_gm_accepting(m));
    free(logits);
    return count;
}

static int mask_matches_allows_in(const char *schema, const char *prefix, int optional)
{
    eng_grammar *g = make(schema);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    if (optional == 1)
        eng_gm_optional(m);
    if (optional == 2)
        eng_gm_repeat(m, 1);
    cr_assert(eng_gm_feed(m, prefix, strlen(prefix)), "%s", prefix);
    int count = mask_equals_allows(m, prefix);
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
    return count;
}

/* One matcher fed doc a byte at a time, masked after each (what a mask learns of a
 * pattern's states is kept for the next): each mask as eng_gm_allows() has it. */
static void masks_along(const char *schema, const char *doc)
{
    eng_grammar *g = make(schema);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    for (size_t k = 0; doc[k]; k++) {
        cr_assert(eng_gm_feed(m, doc + k, 1), "%s at %zu", doc, k);
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%.*s", (int)k + 1, doc);
        mask_equals_allows(m, prefix);
    }
    cr_expect(eng_gm_accepting(m), "%s", doc);
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

static int mask_matches_allows(const char *schema, const char *prefix)
{
    return mask_matches_allows_in(schema, prefix, 0);
}

/* A call or a reply (tool_choice "auto"): the first byte that is not white space decides. */
Test(grammar, optional_document_or_text)
{
    eng_grammar *g = make(person);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    eng_gm_optional(m);
    cr_expect_eq(eng_gm_state(m), ENG_GM_UNDECIDED);
    cr_expect(eng_gm_feed(m, " \n\t", 3));
    cr_expect_eq(eng_gm_state(m), ENG_GM_UNDECIDED, "white space decides nothing");
    cr_expect(eng_gm_accepting(m) && !eng_gm_done(m));
    cr_expect_not(eng_gm_feed(m, " {\"x\"", 5), "a document the schema refuses");
    cr_expect_eq(eng_gm_state(m), ENG_GM_UNDECIDED, "unchanged by a refusal");
    cr_expect(eng_gm_feed(m, " {\"name\": \"Bo\", ", 16));
    cr_expect_eq(eng_gm_state(m), ENG_GM_DOCUMENT);
    cr_expect_not(eng_gm_accepting(m), "held to the schema from its first byte");
    cr_expect_not(eng_gm_feed(m, "}", 1), "age is required");
    size_t k = taken(m, "\"age\": 3}");
    cr_expect_eq(k, 9, "%zu", k);
    cr_expect(eng_gm_done(m));
    eng_gm_destroy(m);
    /* text: held to nothing, complete anywhere, never done */
    cr_assert_eq(eng_gm_create(g, &m), 0);
    eng_gm_optional(m);
    cr_expect(eng_gm_feed(m, "\nIt is {sunny}", 15));
    cr_expect_eq(eng_gm_state(m), ENG_GM_TEXT);
    cr_expect(eng_gm_feed(m, "}}\"", 3));
    cr_expect(eng_gm_accepting(m) && !eng_gm_done(m));
    eng_gm_destroy(m);
    /* at most 24 bytes of white space before it says what it is */
    cr_assert_eq(eng_gm_create(g, &m), 0);
    eng_gm_optional(m);
    cr_expect(eng_gm_feed(m, "\n\n          ", 12));
    cr_expect_not(eng_gm_feed(m, "             ", 13), "25 bytes of white space");
    cr_expect(eng_gm_feed(m, "            ", 12));
    cr_expect_not(eng_gm_feed(m, " ", 1));
    cr_expect_not(eng_gm_feed(m, "\nHi", 3), "nor text after more of it");
    cr_expect(eng_gm_feed(m, "{\"name\"", 7), "a document may still begin");
    eng_gm_destroy(m);
    cr_assert_eq(eng_gm_create(g, &m), 0);
    eng_gm_optional(m);
    cr_expect(eng_gm_feed(m, "                        ", 24));
    cr_expect(eng_gm_feed(m, "Hi", 2), "text may still begin");
    cr_expect_eq(eng_gm_state(m), ENG_GM_TEXT);
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

/* Parallel calls: more documents, each after one line break, as many as allowed. */
Test(grammar, repeated_documents)
{
    eng_grammar *g = make(person);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    eng_gm_repeat(m, 2);
    const char *one = "{\"name\": \"Bo\", \"age\": 3}";
    cr_expect_eq(taken(m, one), strlen(one));
    cr_expect(eng_gm_accepting(m) && !eng_gm_done(m), "the answer may end or go on");
    cr_expect_not(eng_gm_feed(m, " ", 1), "only a line break");
    cr_expect_not(eng_gm_feed(m, "\n\n", 2), "one line break");
    cr_expect_not(eng_gm_feed(m, "\n[", 2), "then the next document");
    cr_expect(eng_gm_feed(m, "\n", 1));
    cr_expect(eng_gm_accepting(m) && !eng_gm_done(m), "the answer may end after the break");
    cr_expect_not(eng_gm_feed(m, "{\"x", 3), "held to the schema again");
    cr_expect_eq(taken(m, one), strlen(one));
    cr_expect(eng_gm_accepting(m) && !eng_gm_done(m));
    const char *third = "\n{\"name\": \"Al\", \"age\": 4";
    cr_expect(eng_gm_feed(m, third, strlen(third)));
    cr_expect_not(eng_gm_done(m));
    cr_expect(eng_gm_feed(m, "}", 1));
    cr_expect(eng_gm_done(m), "the third of three is the last");
    cr_expect_not(eng_gm_feed(m, "\n", 1));
    eng_gm_destroy(m);
    /* with an optional answer: the first document decides, and may be followed */
    cr_assert_eq(eng_gm_create(g, &m), 0);
    eng_gm_optional(m);
    eng_gm_repeat(m, 1);
    cr_expect(eng_gm_feed(m, "\n", 1));
    cr_expect_eq(taken(m, one), strlen(one));
    cr_expect_eq(eng_gm_state(m), ENG_GM_DOCUMENT);
    cr_expect(eng_gm_feed(m, "\n", 1) && eng_gm_feed(m, one, strlen(one)));
    cr_expect(eng_gm_done(m));
    eng_gm_destroy(m);
    /* without eng_gm_repeat nothing follows the document */
    cr_assert_eq(eng_gm_create(g, &m), 0);
    cr_expect_eq(taken(m, one), strlen(one));
    cr_expect(eng_gm_done(m));
    cr_expect_not(eng_gm_feed(m, "\n", 1));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}

Test(grammar, mask_equals_feeding_each_token, .init = vocab_setup, .fini = vocab_teardown,
     .timeout = 120)
{
    int n = tok_n_vocab(vocab);
    /* start: an object, after white space */
    int start = mask_matches_allows(person, "");
    cr_expect(start > 1 && start < 200, "%d tokens may open the object", start);
    /* inside a key: the two keys that may come ("email", "tags") after "age" */
    int key = mask_matches_allows(person, "{\"name\": \"Bo\", \"age\": 42, \"");
    cr_expect(key > 1 && key < 50, "%d", key);
    /* inside a string: nearly everything */
    int str = mask_matches_allows(person, "{\"name\": \"B");
    cr_expect(str > n / 2, "%d of %d", str, n);
    /* inside strings whose plain characters walk() takes without stepping the threads: after
     * a character of two bytes and within one; before minLength is reached (tokens that
     * close the string too soon refused) and after; a string key; a union whose other
     * reading counts to a maxLength; strings with a maxLength */
    cr_expect_eq(mask_matches_allows(person, "{\"name\": \"caf\xc3\xa9 "), str);
    cr_expect_lt(mask_matches_allows(person, "{\"name\": \"caf\xc3"), 200);
    const char *at_least = "{\"type\": \"string\", \"minLength\": 4}";
    int short_of = mask_matches_allows(at_least, "\"B");
    cr_expect(short_of > n / 2 && short_of < mask_matches_allows(at_least, "\"Bobby"), "%d",
              short_of);
    mask_matches_allows("{\"additionalProperties\": {\"type\": \"integer\"}}", "{\"k");
    mask_matches_allows("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"string\", "
                        "\"maxLength\": 2}]}",
                        "\"a");
    /* with maxLength: two characters left (longer tokens refused), none left (the quote
     * alone), and a union whose readings have room for different lengths */
    const char *five = "{\"type\": \"string\", \"maxLength\": 5}";
    int two_left = mask_matches_allows(five, "\"abc");
    cr_expect(two_left > 100 && two_left < str, "%d of %d", two_left, str);
    cr_expect_lt(mask_matches_allows(five, "\"abcde"), 100);
    mask_matches_allows("{\"anyOf\": [{\"type\": \"string\", \"maxLength\": 2}, {\"type\": "
                        "\"string\", \"minLength\": 3, \"maxLength\": 6}]}",
                        "\"a");
    /* at every byte of a document whose strings have bounds, escapes and characters of
     * several bytes */
    const char *bounded = "{\"type\": \"object\", \"properties\": {"
                          "\"name\": {\"type\": \"string\", \"maxLength\": 12}, "
                          "\"note\": {\"type\": \"string\", \"minLength\": 4}, "
                          "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", "
                          "\"maxLength\": 4}}}}";
    const char *doc = "{\"name\": \"Zo\xc3\xab \\\"Q\\\" 12\", "
                      "\"note\": \"a\\u00e9\xe2\x82\xac" "b\", \"tags\": [\"x\", \"abcd\"]}";
    char prefix[128];
    for (size_t k = 0; k < strlen(doc); k++) {
        memcpy(prefix, doc, k);
        prefix[k] = 0;
        mask_matches_allows(bounded, prefix);
    }
    cr_expect(accepts(bounded, doc));
    /* optional (a call or a reply): undecided, any token but those that begin a document
     * the schema refuses; after white space the same; after text, every token */
    int either = mask_matches_allows_in(person, "", 1);
    cr_expect(either > n / 2 && either < n, "%d of %d", either, n);
    /* after white space the same, but for the longest runs of spaces */
    int after = mask_matches_allows_in(person, "\n ", 1);
    cr_expect(after <= either && after > either - 10, "%d of %d", after, either);
    /* near and at the bound of white space, tokens of spaces are cut off */
    int near = mask_matches_allows_in(person, "\n                      ", 1);
    int at = mask_matches_allows_in(person, "\n                       ", 1);
    cr_expect(at < near && near < either, "%d %d %d", at, near, either);
    cr_expect_gt(mask_matches_allows_in(person, "Sure", 1), either);
    cr_expect_eq(mask_matches_allows_in(person, "{\"name\": \"B", 1), str);
    /* between repeated documents: the line break, then what opens the next, or the end */
    cr_expect_eq(mask_matches_allows_in(person, "{\"name\": \"B\", \"age\": 1}\n", 2),
                 start + eog_count());
    int between = mask_matches_allows_in(person, "{\"name\": \"B\", \"age\": 1}", 2);
    cr_expect(between > eog_count() && between < 10, "%d", between);
    /* a keyed union of 64 objects, in its key's value and after it */
    char *keyed = keyed_schema(64, NULL);
    int in_key = mask_matches_allows(keyed, "{\"kind\": \"k");
    cr_expect(in_key > 1 && in_key < 100, "%d", in_key);
    cr_expect_lt(mask_matches_allows(keyed, "{\"kind\": \"k42\", \"v"), 10);
    free(keyed);
        /* a number, which may go on or end */
    mask_matches_allows(person, "{\"name\": \"Bo\", \"age\": 4");
    mask_matches_allows("{\"enum\": [1, 12, \"x\"]}", "1");
    /* a bounded number: few tokens may begin it, and after "2" of 100..250 only digits */
    const char *big = "{\"type\": \"integer\", \"minimum\": 100, \"maximum\": 250}";
    int first = mask_matches_allows(big, "");
    cr_expect(first > 1 && first < 400, "%d", first);
    mask_matches_allows(big, "2");
    mask_matches_allows("{\"type\": \"number\", \"minimum\": -1, \"maximum\": 0.5}", "-0.");
    /* a string held to a pattern: only what can go on with a match */
    const char *dt = "{\"type\": \"string\", \"format\": \"date-time\"}";
    int in_date = mask_matches_allows(dt, "\"2024-0");
    cr_expect(in_date > 1 && in_date < 100, "%d", in_date);
    mask_matches_allows("{\"type\": \"string\", \"pattern\": \"^[\xc3\xa0-\xc3\xbf]+$\"}", "\"");
    /* patterns with one matcher masked at every byte: words repeated under a bound, two
     * patterns in one document (the second's states made afresh), a minLength reached only
     * after a few characters, a maxLength, and a union of two patterns (two threads) */
    masks_along("{\"type\": \"string\", \"pattern\": \"^(\\\\w+ ?){1,8}$\"}",
                "\"hello wo rld x1_\"");
    masks_along("{\"type\": \"object\", \"properties\": {"
                "\"day\": {\"type\": \"string\", \"format\": \"date\"}, "
                "\"id\": {\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-[0-9]+$\", "
                "\"minLength\": 6}, "
                "\"code\": {\"type\": \"string\", \"pattern\": \"x\", \"maxLength\": 4}}}",
                "{\"day\": \"2024-02-29\", \"id\": \"AB-1234\", \"code\": \"a\\\"x\"}");
    masks_along("{\"type\": \"string\", \"pattern\": \"^[a-z]+\\\\d$\", \"maxLength\": 7}",
                "\"abcdef1\"");
    masks_along("{\"type\": \"string\", \"pattern\": \"^[a-z ]*$\", \"maxLength\": 9}",
                "\"the cat s\"");
    masks_along("{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\", "
                "\"pattern\": \"^[a-z ]+$\"}, {\"type\": \"string\", \"pattern\": \"^[0-9 ]+$\"}]}",
                "[\"a\",\"1 2\"]");
    masks_along("{\"anyOf\": [{\"type\": \"string\", \"pattern\": \"^a+b$\"}, "
                "{\"type\": \"string\", \"pattern\": \"^a+c$\"}]}",
                "\"aaac\"");
    /* complete: only the end-of-generation tokens */
    int end = mask_matches_allows(person, "{\"name\": \"Bo\", \"age\": 4}");
    cr_expect_eq(end, eog_count());
    /* a control token's own text is never taken as bytes */
    eng_grammar *g = make(NULL);
    eng_gm *m;
    cr_assert_eq(eng_gm_create(g, &m), 0);
    cr_assert(eng_gm_feed(m, "{\"a\": \"", 7));
    int32_t im_start = tok_find(vocab, "<|im_start|>", 12);
    cr_assert_geq(im_start, 0);
    cr_expect_not(eng_gm_allows(m, gv, im_start));
    cr_expect_eq(eng_gm_take(m, gv, im_start), ENG_EINVAL);
    cr_expect_not(eng_gm_allows(m, gv, tok_eos(vocab)));
    eng_gm_destroy(m);
    eng_grammar_destroy(g);
}
