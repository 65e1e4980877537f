"""Shared-prefix workload in the style of SGLang's benchmark (bench_serving
--dataset-name generated-shared-prefix): G groups x P prompts, each group sharing a system
prefix of exactly L tokens, then a question of exactly Q tokens, asking for exactly O
output tokens, sent through the OpenAI chat API (streaming) at concurrency C (a closed
loop: C requests in flight). Like SGLang's benchmark, which ignores end-of-sequence by
default, every request runs to O tokens: its logit_bias gives the model's end tokens -100
(OpenAI's parameter, which both servers apply); --stop-at-eos lets answers end where the
model ends them instead (their lengths then vary, and a closed loop's last requests run
with fewer beside them). Reports time to first token (p50, p99), requests/s and output
tokens/s for

  cachegate, prefix cache on,  C=16 and C=1
  cachegate, prefix cache off, C=16 and C=1
  cachegate, prefix cache on, engine.cpu_matmul = int8 (llama.cpp's 8-bit activations),
             C=16 and C=1
  the same with engine.kv_cache_dtype = bf16 (attention on BF16 dot products), C=16 and C=1
  cachegate, prefix cache on, engine.kv_cache_dtype = q8_0 (8-bit keys and values), C=16
             and C=1
  llama.cpp's OpenAI-compatible server (llama-cpp-python[server]), C=16 and C=1

on the same GGUF, and the ratios the project's goals are stated in, in one run. Every row
starts a fresh server (a warm prefix cache would flatter later rows); each server gets one
short unrelated request before its row starts (page faults, thread pools), which shares
no prefix with the workload beyond the chat template's first tokens.

cachegate's answer caches are off ([cache] enabled = false): this measures the engine and
its prefix cache, and no request may be answered from a stored answer.

llama.cpp's server is configured fairly: llama-cpp-python 0.3.36's server has one model
instance behind a lock, so it serves one request at a time. Its default
interrupt_requests=true ends a streaming reply after its first chunk whenever another
request is waiting (the client sees "[DONE]" and then "incomplete chunked read"; this is
why it failed 15 of 16 concurrent requests before), so it runs with
--interrupt_requests false. It also runs with --logits_all false (the server's default
computes the vocabulary projection for every prompt token), --n_threads and
--n_threads_batch equal to cachegate's threads, a context large enough for any request,
the GGUF's own chat template, and by default with its prompt cache (--cache true,
llama-cpp-python's LlamaRAMCache: saved states looked up by longest token prefix), its
counterpart of a prefix cache; --llama-cache off leaves only its built-in reuse of the
previous request's prefix.

usage (in build/llama-venv):
  python tests/bench/prefix.py BUILD_DIR MODEL.gguf [--groups 4 --prompts 16
      --prefix-tokens 1024 --question-tokens 32 --output-tokens 256 --threads 2
      --rows on16,on1,off16,off1,i8on16,i8on1,i8bfon16,i8bfon1,q8on16,q8on1,llama16,llama1
      --llama-cache on --json FILE --stop-at-eos]
      [--workload FILE]

--workload FILE keeps the generated requests: written when FILE does not exist, read
(together with the G, P, L, Q it was made with) when it does. A machine without
llama-cpp-python (a GPU machine, say) runs a workload made elsewhere with any Python that
has httpx, rows without llama.cpp.
"""

import argparse
import asyncio
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

MODEL_NAME = "smollm2-135m-instruct"
WORDS = ("order delivery parcel refund invoice account password address payment card "
         "warehouse courier tracking return exchange discount voucher customer support "
         "shipping weekend holiday policy receipt subscription premium member service").split()
ALL_ROWS = ("on16", "on1", "off16", "off1", "i8on16", "i8on1", "i8bfon16", "i8bfon1", "q8on16",
            "q8on1", "llama16", "llama1")


# ---------------------------------------------------------------------------- workload

def tokenizer(model):
    """Token count of a text as the model's tokenizer sees it (llama.cpp's; cachegate's
    tokenizer gives the same ids, tests/engine/test_llamacpp.c)."""
    import llama_cpp
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    return lambda text: len(llm.tokenize(text.encode(), add_bos=False, special=False))


def end_ids(model):
    """The ids of the model's end-of-sequence and end-of-turn tokens."""
    import llama_cpp
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    ids = {llm.token_eos()}
    for text in ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|end|>",
                 "</s>"):
        t = llm.tokenize(text.encode(), add_bos=False, special=True)
        if len(t) == 1:
            ids.add(t[0])
    return sorted(i for i in ids if i >= 0)


def exact_text(count, head, n_tokens, rng):
    """head followed by random words, exactly n_tokens tokens in all (the byte-level BPE
    pre-tokenizer splits at spaces, so " word" pieces add up)."""
    words = []
    n = count(head)
    one_token = [w for w in WORDS if count(" " + w) == 1]
    while n < n_tokens:
        w = rng.choice(WORDS if n_tokens - n > 3 else one_token)
        k = count(" " + w)
        if n + k > n_tokens:
            continue
        words.append(w)
        n += k
    text = head + "".join(" " + w for w in words)
    assert count(text) == n_tokens, (count(text), n_tokens)
    return text


def workload(model, g, p, l_tokens, q_tokens, seed=11):
    count = tokenizer(model)
    rng = random.Random(seed)
    reqs = []
    for gi in range(g):
        system = exact_text(count, f"Group {gi}.", l_tokens, rng)
        for pi in range(p):
            question = exact_text(count, f"Question {gi}.{pi}:", q_tokens, rng)
            reqs.append([{"role": "system", "content": system},
                         {"role": "user", "content": question}])
    rng.shuffle(reqs)
    return reqs


# ---------------------------------------------------------------------------- client

async def one(client, model, messages, out_tokens, bias=None):
    body = {"model": model, "messages": messages, "max_tokens": out_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    if bias:
        body["logit_bias"] = bias
    t0 = time.perf_counter()
    ttft = None
    n_out = 0
    n_prompt = None
    done = False
    async with client.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            await r.aread()
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    ttft = ttft or time.perf_counter() - t0
                    n_out += 1
            if ev.get("usage"):
                n_out = ev["usage"]["completion_tokens"]
                n_prompt = ev["usage"].get("prompt_tokens")
    if not done or ttft is None:
        raise RuntimeError("stream ended without [DONE]" if not done else "no content")
    return ttft, n_out, n_prompt


async def run(base_url, verify, reqs, conc, out_tokens, timeout, bias):
    sem = asyncio.Semaphore(conc)
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(base_url=base_url, verify=verify, timeout=timeout,
                                 limits=limits) as client:
        async def task(m):
            async with sem:
                try:
                    return await one(client, MODEL_NAME, m, out_tokens, bias)
                except (httpx.HTTPError, RuntimeError, ValueError) as e:
                    return repr(e)
        t0 = time.perf_counter()
        res = await asyncio.gather(*(task(m) for m in reqs))
        wall = time.perf_counter() - t0
    ok = [r for r in res if isinstance(r, tuple)]
    errors = [r for r in res if not isinstance(r, tuple)]
    ttfts = sorted(r[0] for r in ok) or [float("nan")]
    toks = sum(r[1] for r in ok)
    prompts = [r[2] for r in ok if r[2] is not None]
    return {"ttft_p50": statistics.median(ttfts),
            "ttft_p99": ttfts[max(0, math.ceil(len(ttfts) * .99) - 1)],
            "req_s": len(ok) / wall, "tok_s": toks / wall, "wall_s": wall,
            "out_per_req": toks / max(1, len(ok)),
            "prompt_tokens": statistics.mean(prompts) if prompts else None,
            "failed": len(errors), "first_error": errors[0] if errors else None}


async def warm(base_url, verify):
    async with httpx.AsyncClient(base_url=base_url, verify=verify, timeout=120) as client:
        await one(client, MODEL_NAME, [{"role": "user", "content": "Hi"}], 2)


# ---------------------------------------------------------------------------- servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cachegate(build, model, tmp, tag, cache, threads, device="cpu", kv_dtype="auto",
                    matmul="f32"):
    conf = os.path.join(tmp, f"cachegate-{tag}.conf")
    with open(conf, "w") as f:
        f.write("[cache]\nenabled = false\n"
                f"[engine]\nmodel = {model}\nmodel_name = {MODEL_NAME}\nthreads = {threads}\n"
                f"enable_prefix_caching = {'true' if cache else 'false'}\n"
                "max_num_seqs = 16\nmax_model_len = 4096\ncpu_kv_cache_bytes = 1G\n"
                f"kv_cache_dtype = {kv_dtype}\ncpu_matmul = {matmul}\n")
    log_path = os.path.join(tmp, f"cachegate-{tag}.log")
    log = open(log_path, "w+")
    data = os.path.join(tmp, f"data-{tag}")
    proc = subprocess.Popen([f"{build}/cachegate", "serve", "--config", conf, "--listen",
                             "127.0.0.1:0", "--data-dir", data, "--device", device],
                            stdout=subprocess.DEVNULL, stderr=log)
    port = None
    for _ in range(600):
        time.sleep(0.1)
        if proc.poll() is not None:
            break
        log.seek(0)
        for line in log:
            if '"listening"' in line:
                port = int(json.loads(line)["port"])
        if port:
            break
    if not port:
        proc.kill()
        log.seek(0)
        sys.exit(f"cachegate did not start:\n{log.read()[-3000:]}")
    return proc, f"https://127.0.0.1:{port}", os.path.join(data, "tls", "cert.pem"), log_path


def llama_args(model, threads, n_ctx, cache, port):
    args = [sys.executable, "-m", "llama_cpp.server", "--model", model,
            "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_batch", "512", "--n_ubatch", "512",
            "--n_threads", str(threads), "--n_threads_batch", str(threads),
            "--logits_all", "false", "--interrupt_requests", "false",
            "--cache", "true" if cache else "false"]
    return args


def start_llama_server(model, threads, n_ctx, cache, tmp, tag):
    port = free_port()
    log_path = os.path.join(tmp, f"llama-{tag}.log")
    log = open(log_path, "w")
    proc = subprocess.Popen(llama_args(model, threads, n_ctx, cache, port),
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        time.sleep(0.2)
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                return proc, url, log_path
        except httpx.HTTPError:
            pass
    proc.kill()
    sys.exit(f"llama.cpp server did not start:\n{open(log_path).read()[-3000:]}")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------- report

LABELS = {"on16": "cachegate, prefix cache on, C=16", "on1": "cachegate, prefix cache on, C=1",
          "off16": "cachegate, prefix cache off, C=16", "off1": "cachegate, prefix cache off, C=1",
          "i8on16": "cachegate, int8, cache on, C=16", "i8on1": "cachegate, int8, cache on, C=1",
          "i8bfon16": "cachegate, int8, bf16 KV, C=16", "i8bfon1": "cachegate, int8, bf16 KV, C=1",
          "q8on16": "cachegate, q8_0 KV, cache on, C=16",
          "q8on1": "cachegate, q8_0 KV, cache on, C=1",
          "llama16": "llama.cpp server, C=16", "llama1": "llama.cpp server, C=1"}


def row(key, r):
    pt = f"{r['prompt_tokens']:.0f}" if r["prompt_tokens"] is not None else "-"
    print(f"| {LABELS[key]:<34} | {r['ttft_p50']:10.3f} | {r['ttft_p99']:10.3f} | "
          f"{r['req_s']:6.2f} | {r['tok_s']:9.1f} | {r['out_per_req']:7.1f} | {pt:>6} | "
          f"{r['wall_s']:6.1f} |" + (f"  {r['failed']} FAILED, e.g. {r['first_error']}"
                                     if r["failed"] else ""), flush=True)


def ratio(name, num, den, goal=None):
    if num is None or den is None:
        return
    x = num / den if den else float("inf")
    verdict = "" if goal is None else (f"  (goal >= {goal}x: {'met' if x >= goal else 'NOT met'})")
    print(f"  {name:<62} {x:7.2f}x{verdict}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("model")
    ap.add_argument("--groups", "-G", type=int, default=4)
    ap.add_argument("--prompts", "-P", type=int, default=16, help="prompts per group")
    ap.add_argument("--prefix-tokens", "-L", type=int, default=1024)
    ap.add_argument("--question-tokens", "-Q", type=int, default=32)
    ap.add_argument("--output-tokens", "-O", type=int, default=256,
                    help="output tokens a request (SGLang's default for this workload)")
    ap.add_argument("--stop-at-eos", action="store_true",
                    help="let answers end at the model's end tokens (max_tokens O)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="engine threads of both servers")
    ap.add_argument("--rows", default=",".join(ALL_ROWS),
                    help="comma-separated subset of " + ",".join(ALL_ROWS))
    ap.add_argument("--llama-cache", choices=("on", "off"), default="on",
                    help="llama-cpp-python's prompt cache (LlamaRAMCache)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where cachegate runs its models (llama.cpp rows: the CPU)")
    ap.add_argument("--timeout", type=float, default=1800, help="client timeout per request, s")
    ap.add_argument("--kv-cache-dtype", choices=("auto", "f32", "f16", "bf16", "q8_0"),
                    default="auto",
                    help="cachegate's engine.kv_cache_dtype (the i8bf rows: bf16; q8: q8_0)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--workload", help="read the requests from this file, or write them to it "
                    "when it does not exist")
    a = ap.parse_args()
    rows = [r for r in a.rows.split(",") if r]
    for r in rows:
        if r not in ALL_ROWS:
            ap.error(f"unknown row {r}")
    model = os.path.abspath(a.model)
    build = os.path.abspath(a.build)
    n_ctx = 1 << math.ceil(math.log2(a.prefix_tokens + a.question_tokens + a.output_tokens + 64))
    n_ctx = max(n_ctx, 2048)

    shape = {"model": os.path.basename(model), "groups": a.groups, "prompts": a.prompts,
             "prefix_tokens": a.prefix_tokens, "question_tokens": a.question_tokens}
    if a.workload and os.path.exists(a.workload):
        with open(a.workload) as f:
            saved = json.load(f)
        if saved["shape"] != shape:
            ap.error(f"{a.workload} holds a workload of {saved['shape']}, not {shape}")
        reqs = saved["requests"]
        ends = saved.get("end_ids") or end_ids(model)
    else:
        reqs = workload(model, a.groups, a.prompts, a.prefix_tokens, a.question_tokens)
        ends = end_ids(model)
        if a.workload:
            with open(a.workload, "w") as f:
                json.dump({"shape": shape, "end_ids": ends, "requests": reqs}, f)
    bias = None if a.stop_at_eos else {str(i): -100 for i in ends}
    print(f"shared-prefix workload: {a.groups} groups x {a.prompts} prompts = {len(reqs)} "
          f"requests, system prefix {a.prefix_tokens} tokens, question {a.question_tokens} "
          f"tokens, " + (f"max_tokens {a.output_tokens}" if a.stop_at_eos else
                         f"{a.output_tokens} output tokens (end tokens {ends} biased -100)") +
          f" (greedy, streaming), {os.cpu_count()} cores, {a.threads} engine threads per server")
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}")
    cmd = " ".join(llama_args(model, a.threads, n_ctx, a.llama_cache == "on", 0)[1:])
    print("llama.cpp server: python " + cmd.replace("--port 0", "--port PORT"))
    print()
    print(f"| {'server, concurrency':<34} | TTFT p50 s | TTFT p99 s | req/s  | out tok/s | "
          f"out/req | prompt | wall s |")
    print(f"|{'-' * 36}|{'-' * 12}|{'-' * 12}|{'-' * 8}|{'-' * 11}|{'-' * 9}|{'-' * 8}|"
          f"{'-' * 8}|", flush=True)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in rows:
            conc = 16 if key.endswith("16") else 1
            if key.startswith("llama"):
                proc, url, log = start_llama_server(model, a.threads, n_ctx,
                                                    a.llama_cache == "on", tmp, key)
                verify = False
            else:
                proc, url, verify, log = start_cachegate(build, model, tmp, key,
                                                         "on" in key, a.threads, a.device,
                                                         "bf16" if key.startswith("i8bf")
                                                         else "q8_0" if key.startswith("q8")
                                                         else a.kv_cache_dtype,
                                                         "int8" if key.startswith("i8") else "f32")
            try:
                asyncio.run(warm(url, verify))
                r = asyncio.run(run(url, verify, reqs, conc, a.output_tokens, a.timeout, bias))
            finally:
                stop(proc)
            res[key] = r
            row(key, r)
            if r["failed"]:
                print(f"--- last lines of {key}'s server log:\n" +
                      "".join(open(log, errors="replace").readlines()[-15:]), flush=True)
    print(f"\nload after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}")

    g = lambda k, f: res[k][f] if k in res and not res[k]["failed"] else None  # noqa: E731
    print("\nratios (throughput: output tokens/s; TTFT: p50, larger is better for cachegate):")
    ratio("prefix cache, TTFT p50 off/on, C=16", g("off16", "ttft_p50"), g("on16", "ttft_p50"), 5)
    ratio("prefix cache, TTFT p50 off/on, C=1", g("off1", "ttft_p50"), g("on1", "ttft_p50"), 5)
    ratio("prefix cache, throughput on/off, C=16", g("on16", "tok_s"), g("off16", "tok_s"))
    ratio("prefix cache, throughput on/off, C=1", g("on1", "tok_s"), g("off1", "tok_s"))
    ratio("concurrency, throughput C=16/C=1, cache on", g("on16", "tok_s"), g("on1", "tok_s"), 3)
    ratio("concurrency, requests/s C=16/C=1, cache on", g("on16", "req_s"), g("on1", "req_s"))
    ratio("concurrency, throughput C=16/C=1, cache off", g("off16", "tok_s"), g("off1", "tok_s"))
    ratio("concurrency, throughput C=16/C=1, cache on, int8", g("i8on16", "tok_s"),
          g("i8on1", "tok_s"), 3)
    ratio("concurrency, throughput C=16/C=1, cache on, int8, bf16 KV", g("i8bfon16", "tok_s"),
          g("i8bfon1", "tok_s"), 3)
    ratio("concurrency, throughput C=16/C=1, cache on, q8_0 KV", g("q8on16", "tok_s"),
          g("q8on1", "tok_s"), 3)
    ratio("q8_0 / f16 KV, throughput, cache on, C=16", g("q8on16", "tok_s"), g("on16", "tok_s"))
    ratio("q8_0 / f16 KV, throughput, cache on, C=1", g("q8on1", "tok_s"), g("on1", "tok_s"))
    ratio("int8 / f32 products, throughput, cache on, C=16", g("i8on16", "tok_s"),
          g("on16", "tok_s"))
    ratio("int8 / f32 products, throughput, cache on, C=1", g("i8on1", "tok_s"),
          g("on1", "tok_s"))
    ratio("concurrency, throughput C=16/C=1, llama.cpp", g("llama16", "tok_s"), g("llama1", "tok_s"))
    ratio("vs llama.cpp, throughput cachegate/llama.cpp, C=16", g("on16", "tok_s"),
          g("llama16", "tok_s"), 1.5)
    ratio("vs llama.cpp, requests/s cachegate/llama.cpp, C=16", g("on16", "req_s"),
          g("llama16", "req_s"))
    ratio("vs llama.cpp, TTFT p50 llama.cpp/cachegate, C=16", g("llama16", "ttft_p50"),
          g("on16", "ttft_p50"), 3)
    ratio("vs llama.cpp, throughput cachegate/llama.cpp, C=1", g("on1", "tok_s"),
          g("llama1", "tok_s"))
    ratio("vs llama.cpp, TTFT p50 llama.cpp/cachegate, C=1", g("llama1", "ttft_p50"),
          g("on1", "ttft_p50"))
    ratio("vs llama.cpp, throughput cachegate int8/llama.cpp, C=16", g("i8on16", "tok_s"),
          g("llama16", "tok_s"))
    best = [x for x in (g("llama16", "tok_s"), g("llama1", "tok_s")) if x]
    ratio("vs llama.cpp, throughput cachegate C=16 / llama.cpp's best C", g("on16", "tok_s"),
          max(best) if best else None)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": res}, f, indent=1)
    if any(r["failed"] for r in res.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
