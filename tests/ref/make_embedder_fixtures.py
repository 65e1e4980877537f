"""Writes tests/fixtures/embedder/reference.json: token ids and embeddings of a set of
texts computed by sentence-transformers (the independent reference) on the same model
directory cachegate loads. Run by `make embedder-fixtures`; the output is committed and
checked by tests/embedder/test_reference.c.

usage: python make_embedder_fixtures.py MODEL_DIR OUT_JSON
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from sentence_transformers import SentenceTransformer  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402

LONG = " ".join(
    f"Sentence number {i} talks about caching, gateways, embeddings and latency." for i in range(60)
)

TEXTS = [
    "Hello, world!",
    "What is the capital of France?",
    "what's the CAPITAL of france??",
    "How do I reset my password?",
    "The café in Zürich serves crème brûlée; naïve façades everywhere.",
    "Ångström, Œuvre, Straße, São Paulo, İstanbul",
    "东京是日本的首都。",
    "北京欢迎你 and hello",
    "日本語のテキストとEnglish mixed",
    "I love pizza 🍕🍕 and emoji 😀👍🏽",
    "Tabs\tand\nnewlines\r\nand  multiple   spaces",
    "Punctuation: (parens) [brackets] {braces} <angles> «guillemets» — dashes – ok…",
    "C++ vs. C#: which is faster? 3.14159 ≈ π; $100 = €92.",
    "unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious",
    "https://example.com/path?query=1&x=y#frag user@example.org",
    "Zero\u200bwidth\u00a0no-break\u2003em-space",
    "\u0000control\u0007chars\u001fhere\ufffd",
    "x" * 150,
    "",
    LONG,
]


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    model = SentenceTransformer(model_dir, device="cpu")
    tok = model.tokenizer
    rows = []
    emb = model.encode(TEXTS, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    for text, e in zip(TEXTS, emb):
        ids = tok(text, truncation=True, max_length=model.max_seq_length)["input_ids"]
        rows.append({"text": text, "ids": ids, "embedding": [float(f"{x:.8g}") for x in e]})
    with open(out, "w", encoding="utf-8") as f:
        json.dump({
            "generator": "sentence-transformers " + sentence_transformers.__version__
                         + ", torch " + torch.__version__,
            "model_dir": os.path.basename(os.path.normpath(model_dir)),
            "max_seq_length": model.max_seq_length,
            "texts": rows,
        }, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"wrote {len(rows)} texts to {out}")


if __name__ == "__main__":
    main()
