"""Engine benchmark: prefill and single-stream decode tokens/s of cachegate's CPU engine
(with its F32 products, and with engine.cpu_matmul = int8, llama.cpp's 8-bit activations)
and of llama.cpp (llama-cpp-python) on the same GGUF file, same thread count, same
prompt, in one run, as ratios.

usage: python engine.py BUILD_DIR MODEL.gguf [THREADS]   (in build/llama-venv)
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
from llama_cpp import Llama

PROMPT_TOKENS = 128
DECODE_TOKENS = 64
RUNS = 3


def prompt_ids():
    # arbitrary ids; speed does not depend on their values (same formula as bench_engine)
    return [1000 + (i * 7919) % 20000 for i in range(PROMPT_TOKENS)]


def llama_cpp_rates(model, threads):
    llm = Llama(model_path=model, n_ctx=512, n_threads=threads, n_threads_batch=threads,
                n_batch=512, verbose=False)
    best_p = best_d = 0
    for _ in range(RUNS):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt_ids())
        t1 = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
        t2 = time.perf_counter()
        best_p = max(best_p, PROMPT_TOKENS / (t1 - t0))
        best_d = max(best_d, DECODE_TOKENS / (t2 - t1))
    return best_p, best_d


def cachegate_rates(build, model, threads, matmul):
    best_p = best_d = 0
    for _ in range(RUNS):
        out = subprocess.run([f"{build}/bench/bench_engine", model, str(PROMPT_TOKENS),
                              str(DECODE_TOKENS), str(threads), "f32", "1", matmul], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out)
        best_p = max(best_p, r["prefill_tok_s"])
        best_d = max(best_d, r["decode_tok_s"])
    return best_p, best_d


def main():
    build, model = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
    rates = {mm: cachegate_rates(build, model, threads, mm) for mm in ("f32", "int8")}
    lp, ld = llama_cpp_rates(model, threads)
    print(f"engine: {os.path.basename(model)}, {threads} threads, prompt {PROMPT_TOKENS} "
          f"tokens, decode {DECODE_TOKENS} tokens, best of {RUNS}; cachegate with F32 keys "
          f"and values, its products F32 or int8 (engine.cpu_matmul)")
    print(f"{'':<26} {'cachegate tok/s':>16} {'llama.cpp tok/s':>16} {'ratio':>7}")
    for mm, (cp, cd) in rates.items():
        print(f"{'prefill, ' + mm:<26} {cp:>16.1f} {lp:>16.1f} {cp / lp:>6.2f}x")
        print(f"{'decode (1 stream), ' + mm:<26} {cd:>16.1f} {ld:>16.1f} {cd / ld:>6.2f}x")


if __name__ == "__main__":
    main()
