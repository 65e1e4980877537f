"""Writes tests/fixtures/engine/patterns.json: random patterns of the subset engine/pattern.c
reads, each with strings that Python's re (an independent implementation) finds a match in
and strings it does not, for tests/engine/test_pattern.c to check the automaton against.

re.search with re.ASCII reads these patterns as ECMA-262 does (as JSON Schema's "pattern":
not anchored unless ^ or $ says so; \\d \\w \\s ASCII classes): the alphabet of the strings
holds no line terminator, where the two differ on "." and "$".

usage: python3 tests/ref/make_pattern_fixtures.py [OUT] (the standard library only)
"""
import json
import random
import re
import sys

ATOMS = ["a", "b", "c", "[a-c]", "[^a]", ".", "\\d", "\\w", "\\s", "\\D", "\\W", "x",
         "[bx1]", "é", "[à-ÿ]", "\\.", "[^\\d ]"]
ALPHABET = "abcx1 é.ü"


def pattern(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        a = rng.choice(ATOMS)
    elif r < 0.5:
        a = "(" + pattern(rng, depth + 1) + "|" + pattern(rng, depth + 1) + ")"
    elif r < 0.7:
        a = "(?:" + pattern(rng, depth + 1) + pattern(rng, depth + 1) + ")"
    else:
        a = pattern(rng, depth + 1) + pattern(rng, depth + 1)
    q = rng.random()
    if q < 0.15:
        a = "(?:" + a + ")*"
    elif q < 0.25:
        a = "(?:" + a + ")+"
    elif q < 0.35:
        a = "(?:" + a + ")?"
    elif q < 0.42:
        m = rng.randint(0, 2)
        a = "(?:" + a + "){%d,%d}" % (m, m + rng.randint(0, 2))
    return a


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/engine/patterns.json"
    rng = random.Random(20261129)
    cases = []
    while len(cases) < 300:
        p = pattern(rng)
        if rng.random() < 0.5:
            p = "^" + p
        if rng.random() < 0.5:
            p = p + "$"
        yes, no = set(), set()
        for _ in range(200):
            s = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7)))
            (yes if re.search(p, s, re.ASCII) else no).add(s)
        if not yes or not no:
            continue  # a pattern that tells nothing apart here
        pick = lambda found: sorted(rng.sample(sorted(found), min(10, len(found))))
        cases.append({"pattern": p, "match": pick(yes), "no": pick(no)})
    with open(out, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n")


if __name__ == "__main__":
    main()
