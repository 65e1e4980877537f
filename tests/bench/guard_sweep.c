/*
 * The semantic guard's verdicts on labelled pairs whose embedding similarity is already
 * known, in a second: to weigh a change to gateway/guard.c on every bench pair before the
 * whole benchmark runs again (that takes half an hour; this, with the similarities written
 * once by `cache.py --similarities`, a second per build).
 *
 *   build/bench/guard_sweep SIMS.tsv [--threshold T] [--strict-below S] [--floor F]
 *                           [--list fp|fn|all] [--words FILE|none]...
 *
 * SIMS.tsv: label, stored, new, similarity, set (cache.py --similarities). A pair is a hit
 * as the cache decides one whose question is a single text: at or above T (0.70, the
 * default similarity_threshold) when gw_guard_compatible() passes and, under S (0.83,
 * guard_strict_below), gw_guard_close_call() too; under T, from F (0.65,
 * same_words_floor) when gw_guard_same_words() says the same words. Pairs that share
 * sentences around their difference (templates) are compared by the cache on the
 * sentences that differ, re-embedded: they are counted apart, not judged here. Prints
 * precision and recall per set and for all; --list prints the wrong verdicts with the
 * guard's reason. The guard reads misspellings with the lists of known words the server
 * gives it: by default /usr/share/dict/words and models/all-minilm-l6-v2/vocab.txt (run from
 * the repository's root); --words FILE, once or more, for others, "none" for no list.
 *
 * --judge P puts the judge (judge.h) after the guard, as the cache does (its default,
 * cache.judge_threshold, is 0.5; without --judge the verdicts are the guard's alone): a hit
 * whose judged probability of the same question is under P is refused. --features FILE writes,
 * for every pair the guard serves, its label, set, the judge's features and its two texts
 * (what tests/bench/train_judge.py trains on). Both embed with --model DIR
 * (models/all-minilm-l6-v2).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"
#include "judge.h"

#define MAX_SETS 64

struct tally {
    char name[128];
    int tp, fp, pos, templates;
};

static struct tally *tally_of(struct tally *t, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    if (*n == MAX_SETS) return NULL;
    struct tally *x = &t[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    return x;
}

static void add(struct tally *x, int label, int hit, int tmpl)
{
    if (tmpl) {
        x->templates++;
        return;
    }
    x->pos += label;
    x->tp += hit && label;
    x->fp += hit && !label;
}

static void report(const struct tally *x)
{
    int served = x->tp + x->fp;
    printf("%-32s precision %.3f recall %.3f  tp %4d fp %4d paraphrases %4d", x->name,
           served ? (double)x->tp / served : 1.0, x->pos ? (double)x->tp / x->pos : 0.0, x->tp,
           x->fp, x->pos);
    if (x->templates) printf("  (%d templates left to cache.py)", x->templates);
    printf("\n");
}

/* The cache's verdict on a single-text pair; why says what refused it. */
static int verdict(const char *a, const char *b, double sim, double threshold, double strict,
                   double words_floor, char *why, size_t whylen)
{
    size_t al = strlen(a), bl = strlen(b);
    why[0] = 0;
    if (sim >= threshold)
        return gw_guard_compatible(a, al, b, bl, why, whylen) &&
               (sim >= strict || gw_guard_close_call(a, al, b, bl, why, whylen));
    if (sim >= words_floor && gw_guard_same_words(a, al, b, bl)) return 1;
    snprintf(why, whylen, "similarity %.3f below %.2f", sim, threshold);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: guard_sweep SIMS.tsv [--threshold T] [--strict-below S] "
                    "[--floor F] [--list fp|fn|all] [--words FILE|none]... [--judge P] "
                    "[--features FILE] [--model DIR]\n");
    return 2;
}

/* The judge's features of a pair the guard serves, the two embedded in one pass as the
 * cache does its first candidate; 0, or -1 when they failed to embed. */
static int judge_features(emb_model *m, const char *a, const char *b, double sim, float *f)
{
    const char *texts[2] = {a, b};
    const size_t lens[2] = {strlen(a), strlen(b)};
    struct gw_judge_text t[2];
    if (gw_judge_texts(m, texts, lens, 2, t)) return -1;
    gw_judge_features(&t[0], &t[1], sim, f);
    gw_judge_text_free(&t[0]);
    gw_judge_text_free(&t[1]);
    return 0;
}

int main(int argc, char **argv)
{
    double threshold = 0.70, strict = 0.83, words_floor = 0.65;
    int list = 0; /* 1: near misses served, 2: paraphrases refused */
    const char *words[8] = {"/usr/share/dict/words", "models/all-minilm-l6-v2/vocab.txt"};
    int nwords = 2, given = 0;
    double judge = -1;
    const char *features = NULL, *model_dir = "models/all-minilm-l6-v2";
    if (argc < 2) return usage();
    for (int i = 2; i < argc; i++) {
        if (i + 1 == argc) return usage();
        const char *opt = argv[i], *val = argv[++i];
        if (!strcmp(opt, "--threshold"))
            threshold = atof(val);
        else if (!strcmp(opt, "--strict-below"))
            strict = atof(val);
        else if (!strcmp(opt, "--floor"))
            words_floor = atof(val);
        else if (!strcmp(opt, "--words") && given < 8)
            words[given++] = val, nwords = given;
        else if (!strcmp(opt, "--judge"))
            judge = atof(val);
        else if (!strcmp(opt, "--features"))
            features = val;
        else if (!strcmp(opt, "--model"))
            model_dir = val;
        else if (!strcmp(opt, "--list"))
            list = !strcmp(val, "fp") ? 1 : !strcmp(val, "fn") ? 2 : !strcmp(val, "all") ? 3 : 0;
        else
            return usage();
        if (!strcmp(opt, "--list") && !list) return usage();
    }
    char err[256];
    for (int i = 0; i < nwords; i++)
        if (strcmp(words[i], "none") && gw_guard_known_words(words[i], err, sizeof err)) {
            fprintf(stderr, "guard_sweep: %s (--words none to go on without)\n", err);
            return 1;
        }
    emb_model *model = NULL;
    FILE *feat = NULL;
    if ((judge >= 0 || features) && emb_model_load(model_dir, NULL, &model, err, sizeof err)) {
        fprintf(stderr, "guard_sweep: %s\n", err);
        return 1;
    }
    if (features && !(feat = fopen(features, "w"))) {
        perror(features);
        return 1;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    static struct tally sets[MAX_SETS];
    struct tally all = {.name = "all"};
    int nsets = 0, lineno = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        char *field[5] = {line};
        int n = 1;
        for (char *p = line; n < 5 && (p = strchr(p, '\t')); n++) {
            *p++ = 0;
            field[n] = p;
        }
        if (n < 4) {
            fprintf(stderr, "%s:%d: want label, stored, new, similarity[, set]\n", argv[1], lineno);
            return 1;
        }
        int label = atoi(field[0]);
        const char *a = field[1], *b = field[2];
        double sim = atof(field[3]);
        struct gw_core core;
        int tmpl = gw_guard_core(a, strlen(a), b, strlen(b), &core);
        if (tmpl) gw_guard_core_free(&core);
        char why[128];
        int hit = !tmpl && verdict(a, b, sim, threshold, strict, words_floor, why, sizeof why);
        const char *set = n == 5 ? field[4] : argv[1];
        if (hit && model) {
            float fv[GW_JUDGE_FEATURES];
            if (judge_features(model, a, b, sim, fv)) {
                fprintf(stderr, "%s:%d: a text could not be embedded\n", argv[1], lineno);
                return 1;
            }
            for (int k = 0; feat && k < GW_JUDGE_FEATURES; k++)
                fprintf(feat, "%s%.9g", k ? "\t" : "", fv[k]);
            if (feat) fprintf(feat, "\t%d\t%s\t%s\t%s\n", label, set, a, b);
            double p = gw_judge_score(fv);
            if (judge >= 0 && p < judge) {
                hit = 0;
                snprintf(why, sizeof why, "judge: the same question at %.3f, under %.3f",
                         floor(p * 1000) / 1000, judge);
            }
        }
        struct tally *x = tally_of(sets, &nsets, set);
        if (x) add(x, label, hit, tmpl);
        add(&all, label, hit, tmpl);
        if (!tmpl && (list & 1) && hit && !label) printf("served %.3f\t%s\t%s\n", sim, a, b);
        if (!tmpl && (list & 2) && !hit && label)
            printf("refused %.3f\t%s\t%s\t[%s]\n", sim, a, b, why);
    }
    free(line);
    fclose(f);
    if (feat && fclose(feat)) {
        perror(features);
        return 1;
    }
    emb_model_destroy(model);
    for (int i = 0; i < nsets; i++)
        report(&sets[i]);
    if (nsets > 1) report(&all);
    return 0;
}
