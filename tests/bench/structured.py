"""Structured output benchmark: greedy decode tokens/s of one sequence held to a JSON Schema,
cachegate's CPU engine (build/bench/bench_grammar: the scheduler with engine/grammar.c)
against llama.cpp's grammar sampler (llama-cpp-python, LlamaGrammar.from_json_schema) on
the same GGUF file, the same prompt token ids and thread count, in one run; each also
without a grammar for as many tokens, to show what the grammar costs it. Also one mask's
time inside a string, a number and after a comma (cachegate).

usage: python structured.py BUILD_DIR MODEL.gguf [THREADS]   (in build/llama-venv)
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from llama_cpp import Llama, LlamaGrammar

MAX_TOKENS = 160
RUNS = 3
QUESTION = ("Describe a famous city as JSON: its name, country, population, whether it is "
            "coastal, and three landmarks.")
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "country": {"type": "string"},
        "population": {"type": "integer"},
        "coastal": {"type": "boolean"},
        "landmarks": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "country", "population", "coastal", "landmarks"],
    "additionalProperties": False,
}


def prompt_ids(llm):
    text = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    return llm.tokenize(text.encode(), add_bos=False, special=True)


def llama_cpp_rate(llm, ids, grammar, max_tokens):
    """Tokens/s from the first token to the last, and the tokens and text."""
    llm.reset()
    first = None
    n = 0
    text = ""
    for chunk in llm.create_completion(prompt=ids, max_tokens=max_tokens, temperature=0,
                                       grammar=grammar, stream=True):
        if first is None:
            first = time.perf_counter()
        n += 1
        text += chunk["choices"][0]["text"]
    return (n - 1) / (time.perf_counter() - first), n, text


def main():
    build, model = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
    llm = Llama(model_path=model, n_ctx=1024, n_threads=threads, n_threads_batch=threads,
                n_batch=512, verbose=False)
    ids = prompt_ids(llm)
    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMA), verbose=False)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(SCHEMA, f)
    ours = None
    theirs = theirs_plain = 0
    for _ in range(RUNS):
        out = subprocess.run([f"{build}/bench/bench_grammar", model, str(threads),
                              str(MAX_TOKENS), f.name, ",".join(map(str, ids))],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        if ours is None or r["decode_tok_s"] > ours["decode_tok_s"]:
            ours = dict(r, plain_decode_tok_s=max(r["plain_decode_tok_s"],
                                                  ours["plain_decode_tok_s"] if ours else 0))
        rate, n, text = llama_cpp_rate(llm, ids, grammar, MAX_TOKENS)
        theirs = max(theirs, rate)
        theirs_plain = max(theirs_plain, llama_cpp_rate(llm, ids, None, n)[0])
    os.unlink(f.name)
    try:
        json.loads(text)
        theirs_end = "a complete document"
    except ValueError:
        theirs_end = "cut by max_tokens"
    print(f"Structured output, {os.path.basename(model)}, {threads} threads, greedy, the "
          f"schema of tests/bench/structured.py, best of {RUNS}: cachegate {ours['tokens']} "
          f"tokens ({ours['finish']}), llama.cpp {n} ({theirs_end})")
    print("| | cachegate tokens/s | llama.cpp tokens/s | ratio |")
    print("|---|---|---|---|")
    print(f"| decode held to the schema | {ours['decode_tok_s']:.1f} | {theirs:.1f} | "
          f"{ours['decode_tok_s'] / theirs:.2f}x |")
    print(f"| decode, same tokens, no grammar | {ours['plain_decode_tok_s']:.1f} | "
          f"{theirs_plain:.1f} | {ours['plain_decode_tok_s'] / theirs_plain:.2f}x |")
    print(f"| the grammar's cost | {1 - ours['decode_tok_s'] / ours['plain_decode_tok_s']:.1%} | "
          f"{1 - theirs / theirs_plain:.1%} | |")
    print(f"cachegate, one mask: {ours['mask_ms_in_string']:.2f} ms inside a string, "
          f"{ours['mask_ms_in_number']:.2f} ms in a number, {ours['mask_ms_after_comma']:.2f} "
          f"ms after a comma, {ours['mask_ms_in_pattern']:.2f} ms inside a string held to a "
          f"240-position pattern ({ours['mask_ms_in_pattern_first']:.2f} ms the first there), "
          f"{ours['mask_ms_in_max_length']:.2f} ms inside one with a "
          f"maxLength (a mask is made only when the token drawn is refused)")


if __name__ == "__main__":
    main()
