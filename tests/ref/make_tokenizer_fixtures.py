"""Writes tests/fixtures/engine/tokenizer.json: token ids of the default chat model's
byte-level BPE tokenizer computed by Hugging Face tokenizers (the independent reference),
for engine/tokenizer.c. Checked by tests/engine/test_tokenizer.c.

Which reference is right for SmolLM2. The GGUF says tokenizer.ggml.pre = "smollm". The
model's own tokenizer.json pre-tokenizes with Sequence[Digits(individual_digits=true),
ByteLevel(use_regex=true)]: every digit is split off first, then the GPT-2 regex runs on
what lies between. llama.cpp's "smollm" pre-type does the same (regexes "\\p{N}", then
the GPT-2 one). transformers' GGUF loader (AutoTokenizer with gguf_file=) builds only
ByteLevel with the GPT-2 regex, dropping the Digits step, so on some inputs (whitespace
runs before a digit: "is   3.14", "\n\n1") it gives other ids than the model was trained
with. The reference for "smollm" is therefore the GGUF-loaded tokenizer with the model's
original pre-tokenizer put back; every text where the plain GGUF conversion disagrees is
flagged "gguf_conversion_differs" (its ids kept under "gguf_conversion_ids" for the
record) and the C test does not hold the tokenizer to those ids.

The same vocabulary and merges are also run through the other pre-tokenizers the engine
implements, each built from its model's original tokenizer.json recipe, so that each
hand-written pre-tokenizer is checked against the regex engine of tokenizers:
  gpt2       ByteLevel(use_regex=true)                 (= transformers' GGUF conversion)
  llama-bpe  Split(Llama 3 regex, isolated) + ByteLevel(use_regex=false), BPE ignore_merges
  qwen2      Split(Qwen2 regex, isolated) + ByteLevel(use_regex=false)

Texts are encoded without special-token matching (tokenizers' encode_special_tokens, the
switch behind split_special_tokens=True), so "<|im_start|>" written in a text is ordinary
text; entries with "special": true are encoded with matching on.

usage: python make_tokenizer_fixtures.py MODEL_DIR GGUF_NAME OUT_JSON
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import tokenizers  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

LONG = " ".join([
    "Caching gateways answer repeated questions from memory, so that the model only runs",
    "when something new is asked. In 2024, 73.5% of requests (about 1,250,000 a day) hit",
    "the cache; the rest took 120ms-450ms each.\n\n    def lookup(key):\n        return",
    "store.get(key)  # O(1)\n\tTabs, naïve café owners, 東京の天気, and émoji 🚀 all",
    "appear. Don't panic: it's fine, they'll cope, we've seen WORSE!!! ...",
] * 11)

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "don't I'll we're they've she'd it's I'm",
    "DON'T I'LL WE'RE THEY'VE SHE'D IT'S I'M 'S",
    "12345 and 3.14 and 1,000,000 and 2024-01-15",
    "Pi is   3.14159, e is 2.71828",
    "a  b   c    d     e",
    "line one\nline two\n\nline four\r\nwindows\n",
    "\ttabbed\t\tcontent\t",
    "\n\n\n   \n  indented after blank lines\n\n1. first\n  2. second",
    "Café, naïve, résumé, Ærøskøbing, straße, façade",
    "中文分词测试：你好，世界！",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트 처리",
    "Привет мир! Γειά σου Κόσμε! مرحبا بالعالم",
    "Emoji: 👋🏽 🎉 🚀 👨‍👩‍👧‍👦 ❤️",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
    "fibonacci(n - 2)\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": 1e-9}}',
    "<|im_start|>user\nThis is literal text<|im_end|>",
    "before<|endoftext|>after <|im_start <|im_end|",
    "https://example.com/path?query=1&b=2#frag",
    "   leading and trailing spaces   ",
    "user@example.com $100.50 #hashtag @mention 50% off",
    "x² + y² = z²; ∑ i = n(n+1)/2, ½ ⅓, ٣٤٥, Ⅻ",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!????",
    "non\u00a0breaking\u2003em space\u3000ideographic\u2028line sep",
    "zero\u200bwidth\u200djoin\u00adsoft hyphen",
    # 0x04, 0x06, 0x13 and 0x1d have no token in this vocabulary: dropped, not round-tripped
    "ctrl\x04\x06\x13\x1d chars\x7f bell\x07 nul\x00 esc\x1b[0m",
    "'s 's' ''quoted'' it''s",
    " ",
    "\n",
    "",
    LONG,
]

SPECIAL_TEXTS = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is "
    "2+2?<|im_end|>\n<|im_start|>assistant\n",
    "Text<|endoftext|>more <|im_end|>x<|im_start|",
]


def with_pre(base_json, pre, ignore_merges=False):
    j = json.loads(base_json)
    j["pre_tokenizer"] = pre
    j["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(j))


def split_then_bytelevel(regex):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False},
    ]}


def main():
    model_dir, gguf_name, out = sys.argv[1], sys.argv[2], sys.argv[3]
    auto = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf_name)
    base = auto.backend_tokenizer.to_str()
    j = json.loads(base)
    assert j["pre_tokenizer"] == {"type": "ByteLevel", "add_prefix_space": False,
                                  "trim_offsets": True, "use_regex": True}, j["pre_tokenizer"]
    assert j["normalizer"] is None
    bytelevel = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": True}
    refs = {
        "smollm": with_pre(base, {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, bytelevel]}),
        "gpt2": with_pre(base, bytelevel),
        "llama-bpe": with_pre(base, split_then_bytelevel(LLAMA3_REGEX), ignore_merges=True),
        "qwen2": with_pre(base, split_then_bytelevel(QWEN2_REGEX)),
    }

    def encode(t, text, special):
        t.encode_special_tokens = not special
        return t.encode(text, add_special_tokens=False).ids

    rows, n_differ = [], 0
    for special, texts in ((False, TEXTS), (True, SPECIAL_TEXTS)):
        for text in texts:
            ids = {name: encode(t, text, special) for name, t in refs.items()}
            # transformers' own path (AutoTokenizer from the GGUF): must equal "gpt2"
            conv = auto(text, add_special_tokens=False,
                        split_special_tokens=not special).input_ids
            assert conv == ids["gpt2"], (text, conv, ids["gpt2"])
            decoded = refs["smollm"].decode(ids["smollm"], skip_special_tokens=False)
            lost = set(text) - set(decoded)  # characters whose bytes have no token
            assert decoded == text or lost <= {"\x04", "\x06", "\x13", "\x1d"}, (text, decoded)
            row = {"text": text, "special": special, "ids": ids, "decoded": decoded}
            if conv != ids["smollm"]:
                # transformers' GGUF conversion lacks the model's Digits pre-tokenizer:
                # a wrong reference for this text, kept only to document the difference
                row["gguf_conversion_differs"] = True
                row["gguf_conversion_ids"] = conv
                n_differ += 1
            rows.append(row)

    head = {
        "generator": f"transformers {transformers.__version__}, "
                     f"tokenizers {tokenizers.__version__}",
        "model": gguf_name,
        "note": "ids[pre] for each pre-tokenizer over the model's vocabulary and merges; "
                "ids['smollm'] is the model's own tokenizer (Digits + ByteLevel). "
                "gguf_conversion_differs marks texts where transformers' GGUF loader, "
                "which omits the Digits step, gives other ids (gguf_conversion_ids).",
    }
    with open(out, "w", encoding="utf-8") as f:  # one text per line
        f.write(json.dumps(head, ensure_ascii=False)[:-1] + ',\n"texts": [\n')
        f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
        f.write("\n]}\n")
    print(f"wrote {len(rows)} texts to {out}; transformers' GGUF conversion differs from "
          f"the model's tokenizer on {n_differ}")


if __name__ == "__main__":
    main()
