#!/usr/bin/env python3
"""Trains the semantic cache's judge (gateway/judge.h) and writes it as C.

    build/bench/guard_sweep SIMS.tsv --features FEATURES.tsv   # the pairs the guard serves
    build/judge-venv/bin/python tests/bench/train_judge.py FEATURES.tsv [--cv]

(`make judge-model` does both, SIMS.tsv being every labelled set of tests/bench and their
similarities, written by `cache.py build <sets> --similarities SIMS.tsv`.) FEATURES.tsv:
the judge's 37 features, the label (1: the same question), the set and the two texts, one
pair the guard lets through a line. The forest: scikit-learn's gradient-boosted trees,
200 trees of depth 3 at rate 0.1, near misses weighted 3 to 1 (a wrong hit is a wrong
answer, a refused paraphrase a miss). Writes gateway/judge_model.inc and
tests/fixtures/judge/scores.tsv (features and scikit-learn's probabilities for the C test).
--cv first prints, for each set left out of the training in turn, what the judge would
refuse in it at several thresholds.
"""
import argparse
import sys

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier

NFEAT = 37
PARAMS = dict(n_estimators=200, max_depth=3, learning_rate=0.1, random_state=0)
MISS_WEIGHT = 3.0


def load(path):
    x, y, sets = [], [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            c = line.rstrip("\n").split("\t")
            if len(c) < NFEAT + 2:
                sys.exit(f"{path}:{n}: want {NFEAT} features, label, set, texts")
            x.append([float(v) for v in c[:NFEAT]])
            y.append(int(c[NFEAT]))
            sets.append(c[NFEAT + 1])
    return np.array(x, dtype=np.float32), np.array(y), np.array(sets)


def fit(x, y):
    m = GradientBoostingClassifier(**PARAMS)
    m.fit(x, y, sample_weight=np.where(y == 0, MISS_WEIGHT, 1.0))
    return m


def cross_validate(x, y, sets):
    p = np.zeros(len(y))
    for s in sorted(set(sets)):
        held = sets == s
        p[held] = fit(x[~held], y[~held]).predict_proba(x[held])[:, 1]
    print(f"each set left out in turn ({len(y)} pairs the guard serves, "
          f"{(y == 0).sum()} of them near misses):")
    for tau in (0.2, 0.3, 0.4, 0.5, 0.6):
        refused = p < tau
        tp, fp = ((y == 1) & ~refused).sum(), ((y == 0) & ~refused).sum()
        print(f"  under {tau:.1f}: refuses {((y == 0) & refused).sum()} near misses and "
              f"{((y == 1) & refused).sum()} paraphrases; precision {tp / (tp + fp):.3f}")


def write_c(m, path, npairs):
    nodes, roots = [], []
    rate = m.learning_rate
    for est in m.estimators_[:, 0]:
        t = est.tree_
        base = len(nodes)
        roots.append(base)
        for i in range(t.node_count):
            if t.children_left[i] == -1:
                nodes.append((-1, 0, 0, rate * float(t.value[i][0][0])))
            else:
                nodes.append((int(t.feature[i]), base + int(t.children_left[i]),
                              base + int(t.children_right[i]), float(t.threshold[i])))
    # the log-odds before the first tree: what the forest adds taken off one prediction
    x0 = np.zeros((1, NFEAT), dtype=np.float32)
    init = float(m.decision_function(x0)[0]) - sum(
        rate * float(e.predict(x0)[0]) for e in m.estimators_[:, 0])
    with open(path, "w") as f:
        f.write("/* The judge's forest (judge.c), written by tests/bench/train_judge.py: do not "
                "edit. */\n")
        f.write(f'static const char judge_name[] = "{len(roots)} trees of depth '
                f'{PARAMS["max_depth"]}, trained on {npairs} pairs";\n')
        f.write(f"static const double judge_init = {init!r};\n")
        f.write("static const struct judge_node judge_nodes[] = {\n")
        for feat, left, right, value in nodes:
            f.write(f"    {{{feat}, {left}, {right}, {value!r}}},\n")
        f.write("};\n")
        f.write("static const int judge_roots[] = {\n")
        for i in range(0, len(roots), 12):
            f.write("    " + ", ".join(str(r) for r in roots[i:i + 12]) + ",\n")
        f.write("};\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--cv", action="store_true")
    ap.add_argument("--out", default="gateway/judge_model.inc")
    ap.add_argument("--fixture", default="tests/fixtures/judge/scores.tsv")
    a = ap.parse_args()
    x, y, sets = load(a.features)
    if a.cv:
        cross_validate(x, y, sets)
    m = fit(x, y)
    write_c(m, a.out, len(y))
    # the fixture: the near misses and as many paraphrases, every 40th pair
    pick = [i for i in range(len(y)) if y[i] == 0][::8] + list(range(0, len(y), 40))
    p = m.predict_proba(x[pick])[:, 1]
    with open(a.fixture, "w") as f:
        for i, prob in zip(pick, p):
            f.write("\t".join(repr(float(v)) for v in x[i]) + f"\t{float(prob)!r}\n")
    print(f"wrote {a.out} ({len(m.estimators_)} trees) and {a.fixture} ({len(pick)} pairs)")


if __name__ == "__main__":
    main()
