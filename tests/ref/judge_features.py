#!/usr/bin/env python3
"""An independent reference for the judge's features (gateway/judge.h): the encoder of
all-MiniLM-L6-v2 written again in numpy from its model.safetensors, its tokenizer from
the model's tokenizer.json (Hugging Face tokenizers), and the features computed from their
definition. Writes tests/fixtures/judge/features.tsv (label, stored, new, similarity, the
37 features), which tests/gateway/test_judge.c holds the C code to.

    make judge-fixtures     (build/judge-venv, tests/ref/requirements-judge.txt)
"""
import re
import sys

import numpy as np
from safetensors.numpy import load_file
from scipy.special import erf
from tokenizers import Tokenizer

MODEL = "models/all-minilm-l6-v2/"
OUT = "tests/fixtures/judge/features.tsv"

# stored question, new question, label (1: the same question)
PAIRS = [
    ("What should I pack for a beach vacation?",
     "What should I leave at home for a beach vacation?", 0),
    ("How do I sue someone in small claims court?",
     "How do I respond to being sued in small claims court?", 0),
    ("Why did my cake sink in the middle?", "Why did my cake stick to the pan?", 0),
    ("How do I coach a youth soccer team?", "How do I get picked for a youth soccer team?", 0),
    ("What is the capital of France?", "What's France's capital city?", 1),
    ("How do I reverse a list in Python?", "What is the way to reverse a Python list?", 1),
    ("How do I kill a process in Linux?", "how do i terminate a proccess on linux", 1),
    ("Why is my phone battery draining so fast?", "Why does my phone battery die so quickly?", 1),
    ("How can I stop snoring?", "what helps with snoring at night", 1),
    ("Is it safe to eat raw cookie dough?", "Can I eat cookie dough without baking it?", 1),
    ("?!", "...", 0),
    ("Tell me a joke", "Tell me a joke!!", 1),
    ("café au lait vs latte — what's the difference?",
     "What is the difference between a café au lait and a latte?", 1),
    ("How many 🍕 slices in a large pizza?", "How many slices does a large pizza have?", 1),
]

W = load_file(MODEL + "model.safetensors")
TOK = Tokenizer.from_file(MODEL + "tokenizer.json")
TOK.no_padding()
TOK.no_truncation()
HEADS, LAYERS, EPS = 12, 6, 1e-12


def layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + EPS) * g + b


def states(ids):
    """hidden states after the embeddings and after each layer, float64"""
    w = {k: v.astype(np.float64) for k, v in W.items() if v.dtype != np.int64}
    n, h = len(ids), w["embeddings.word_embeddings.weight"].shape[1]
    d = h // HEADS
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = layernorm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    out = [x]
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."

        def lin(name, t):
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (lin("attention.self." + s, x).reshape(n, HEADS, d).transpose(1, 0, 2)
                   for s in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = s / s.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(n, h)
        x = layernorm(x + lin("attention.output.dense", o),
                      w[p + "attention.output.LayerNorm.weight"],
                      w[p + "attention.output.LayerNorm.bias"])
        f = lin("intermediate.dense", x)
        f = 0.5 * f * (1 + erf(f / np.sqrt(2)))
        x = layernorm(x + lin("output.dense", f), w[p + "output.LayerNorm.weight"],
                      w[p + "output.LayerNorm.bias"])
        out.append(x)
    return out


WORD = re.compile(r"[A-Za-z0-9_\x80-\U0010ffff]")


def side(text):
    enc = TOK.encode(text)
    ids, toks = enc.ids, enc.tokens
    layers = states(np.array(ids))
    keep = [i for i in range(1, len(ids) - 1) if WORD.search(toks[i])] or [0]
    unit = []
    for i in (0, LAYERS // 2, LAYERS):
        s = layers[i][keep]
        unit.append(s / np.linalg.norm(s, axis=1, keepdims=True))
    pooled = layers[LAYERS].mean(0)
    return unit, [ids[i] for i in keep], pooled / np.linalg.norm(pooled)


def summary(v):
    s = np.sort(v)
    return [s[0], s[1] if len(s) > 1 else s[0], v.mean(), (v < 0.5).sum(), (v < 0.7).sum()]


def features(a, b):
    ua, ia, pa = a
    ub, ib, pb = b
    sim = float(pa @ pb)
    f = [sim]
    for la, lb in zip(ua, ub):
        m = la @ lb.T
        r, c = summary(m.max(1)), summary(m.max(0))
        f += [r[0], c[0], r[1], c[1], r[2], c[2], r[3], c[3], r[4], c[4]]
    sa, sb = set(ia), set(ib)
    f += [len(ia), len(ib), abs(len(ia) - len(ib)), len(sa - sb), len(sb - sa),
          len(sa & sb) / len(sa | sb)]
    return sim, f


def main():
    with open(OUT, "w", encoding="utf-8") as out:
        for stored, new, label in PAIRS:
            sim, f = features(side(stored), side(new))
            out.write("\t".join([str(label), stored, new, repr(sim)] + [repr(float(x)) for x in f])
                      + "\n")
    print(f"wrote {OUT} ({len(PAIRS)} pairs)", file=sys.stderr)


if __name__ == "__main__":
    main()
