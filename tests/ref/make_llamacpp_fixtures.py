"""Writes tests/fixtures/engine/llamacpp.json with llama.cpp (through llama-cpp-python,
which compiles it) on the default model: token ids of 12 texts, the top-5 logits at each
of the first 16 positions of 6 prompts (teacher forced), and 32-token greedy
continuations. Checked by tests/engine/test_llamacpp.c. Not part of `make test`:
`make llamacpp-fixtures` builds the venv (build/llama-venv) and runs this.

usage: python make_llamacpp_fixtures.py MODEL.gguf OUT_JSON
"""

import json
import sys

import llama_cpp
import numpy as np
from llama_cpp import Llama

TEXTS = [
    ("Hello, world!", False),
    ("The quick brown fox jumps over the lazy dog.", False),
    ("Punctuation: (a) [b] {c} <d> ... !? ;-)", False),
    ("Digits 0123456789 and 3.14159, 1,000,000", False),
    ("Whitespace   runs\t\ttabs\n\nnewlines    end", False),
    ("Accents: café naïve crème brûlée Zürich", False),
    ("CJK: 東京は日本の首都です。北京", False),
    ("Emoji: 😀👍🏽🍕 ❤️", False),
    ("def f(x):\n    return x ** 2  # square", False),
    ("<|im_start|>user\nHi<|im_end|>", True),
    ("<|im_start|> typed by a user <|im_end|>", False),
    ("   leading and trailing spaces   ", False),
]

# each at least 16 tokens long, so that the first 16 positions of every prompt are compared
PROMPTS = [
    "Question: Which city is the capital of France, and what river runs through it?\n"
    "Answer: The capital of France is",
    "Once upon a time, in a small village at the foot of a mountain, there lived an old "
    "baker who",
    "def add(a, b):\n    \"\"\"Return the sum of the two numbers a and b.\"\"\"\n    return",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "Red, yellow and blue are the primary colors of paint. Mixing red and yellow gives "
    "orange, and mixing blue and yellow gives",
    "To make a cup of tea, first boil fresh water in a kettle, then warm the teapot, and",
]


def main():
    model_path, out = sys.argv[1], sys.argv[2]
    llm = Llama(model_path=model_path, n_ctx=256, n_threads=2, logits_all=True, verbose=False,
                seed=0)
    texts = [{"text": t, "special": s,
              "ids": llm.tokenize(t.encode(), add_bos=False, special=s)} for t, s in TEXTS]
    prompts = []
    for p in PROMPTS:
        ids = llm.tokenize(p.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        n = min(16, len(ids))
        top_ids, top_logits = [], []
        for i in range(n):
            row = np.array(llm.scores[i])
            order = np.argsort(-row, kind="stable")[:5]
            top_ids.append([int(x) for x in order])
            top_logits.append([float(f"{row[x]:.6g}") for x in order])
        cont, top2 = [], []
        for _ in range(32):
            row = np.array(llm.scores[llm.n_tokens - 1])
            order = np.argsort(-row, kind="stable")[:2]
            nxt = int(order[0])
            cont.append(nxt)
            # the runner-up too: where llama.cpp itself nearly tied, a faithful engine may
            # take the other branch
            top2.append([int(order[0]), float(f"{row[order[0]]:.6g}"), int(order[1]),
                         float(f"{row[order[1]]:.6g}")])
            llm.eval([nxt])
        prompts.append({"text": p, "ids": ids, "top_ids": top_ids, "top_logits": top_logits,
                        "greedy": cont, "greedy_top2": top2})
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": f"llama-cpp-python {llama_cpp.__version__}",
                   "model": model_path.rsplit("/", 1)[-1], "texts": texts, "prompts": prompts},
                  f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(texts)} texts and {len(prompts)} prompts to {out}")


if __name__ == "__main__":
    main()
