"""Shared-prefix workload in the style of SGLang's benchmark: G groups x P prompts, each
group sharing a system prefix of about L tokens, then a question of about Q tokens and O
output tokens, sent through the OpenAI chat API (streaming) at concurrency C. Reports time
to first token (p50, p99) and throughput, for cachegate with the prefix cache on and off
and at concurrency 16 against 1, and for llama.cpp's OpenAI-compatible server
(llama-cpp-python[server]) on the same GGUF, side by side in one run.

usage: python prefix.py BUILD_DIR MODEL.gguf [G P L Q O]   (in build/llama-venv)
"""

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

WORDS = ("order delivery parcel refund invoice account password address payment card "
         "warehouse courier tracking return exchange discount voucher customer support "
         "shipping weekend holiday policy receipt subscription premium member service").split()


def workload(g, p, l_tokens, q_tokens, seed=11):
    rng = random.Random(seed)
    reqs = []
    for gi in range(g):
        system = f"Group {gi}. " + " ".join(rng.choice(WORDS) for _ in range(l_tokens))
        for pi in range(p):
            question = f"Question {pi}: " + " ".join(rng.choice(WORDS) for _ in range(q_tokens))
            reqs.append([{"role": "system", "content": system},
                         {"role": "user", "content": question}])
    rng.shuffle(reqs)
    return reqs


async def one(client, url, model, messages, out_tokens):
    body = {"model": model, "messages": messages, "max_tokens": out_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = None
    n_out = 0
    async with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    ttft = ttft or time.perf_counter() - t0
                    n_out += 1
            if ev.get("usage"):
                n_out = ev["usage"]["completion_tokens"]
    return ttft or time.perf_counter() - t0, n_out


async def run(base_url, verify, model, reqs, conc, out_tokens):
    sem = asyncio.Semaphore(conc)
    async with httpx.AsyncClient(base_url=base_url, verify=verify, timeout=600) as client:
        async def task(m):
            async with sem:
                try:
                    return await one(client, "/v1/chat/completions", model, m, out_tokens)
                except httpx.HTTPError:
                    return None
        t0 = time.perf_counter()
        res = await asyncio.gather(*(task(m) for m in reqs))
        wall = time.perf_counter() - t0
    ok = [r for r in res if r]
    ttfts = sorted(r[0] for r in ok) or [float("nan")]
    toks = sum(r[1] for r in ok)
    return {"ttft_p50": statistics.median(ttfts), "ttft_p99": ttfts[max(0, int(len(ttfts) * .99) - 1)],
            "req_s": len(ok) / wall, "tok_s": toks / wall, "failed": len(res) - len(ok)}


def start_cachegate(build, model, tmp, tag):
    cache = tag[0] == "1"
    conf = os.path.join(tmp, f"c{tag}.conf")
    with open(conf, "w") as f:
        f.write(f"[engine]\nmodel = {model}\n"
                f"enable_prefix_caching = {'true' if cache else 'false'}\n"
                "max_num_seqs = 16\nmax_model_len = 4096\ncpu_kv_cache_bytes = 1G\n")
    log = open(os.path.join(tmp, f"log{tag}"), "w+")
    data = os.path.join(tmp, f"d{tag}")
    proc = subprocess.Popen([f"{build}/cachegate", "serve", "--config", conf, "--listen",
                             "127.0.0.1:0", "--data-dir", data, "--device", "cpu"], stderr=log)
    port = None
    for _ in range(300):
        time.sleep(0.1)
        log.seek(0)
        for line in log:
            if '"listening"' in line:
                port = int(json.loads(line)["port"])
        if port:
            break
    return proc, f"https://127.0.0.1:{port}", os.path.join(data, "tls", "cert.pem")


def start_llama_server(model, threads):
    port = 18000 + os.getpid() % 1000
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", model,
                             "--n_ctx", "8192", "--n_threads", str(threads),
                             "--n_threads_batch", str(threads), "--port", str(port),
                             "--model_alias", "smollm2-135m-instruct"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        time.sleep(0.2)
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
    return proc, f"http://127.0.0.1:{port}"


def row(name, r):
    print(f"{name:<34} {r['ttft_p50']:>9.3f} {r['ttft_p99']:>9.3f} {r['req_s']:>8.2f} "
          f"{r['tok_s']:>9.1f}" + (f"  ({r['failed']} requests failed)" if r["failed"] else ""),
          flush=True)


def main():
    build, model = sys.argv[1], sys.argv[2]
    g, p, l, q, o = (int(x) for x in (sys.argv[3:8] if len(sys.argv) > 7 else (4, 4, 1024, 32, 16)))
    reqs = workload(g, p, l, q)
    name = "smollm2-135m-instruct"
    print(f"shared-prefix workload: {g} groups x {p} prompts, prefix ~{l} words, question ~{q} "
          f"words, {o} output tokens, {os.cpu_count()} cores")
    print(f"{'server, concurrency':<34} {'TTFT p50':>9} {'TTFT p99':>9} {'req/s':>8} {'out tok/s':>9}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        # a fresh server for every run: a warm prefix cache would flatter the later ones
        for cache, conc in ((1, 16), (1, 1), (0, 16)):
            proc, url, cert = start_cachegate(build, model, tmp, f"{cache}{conc}")
            try:
                r = asyncio.run(run(url, cert, name, reqs, conc, o))
                results[(cache, conc)] = r
                row(f"cachegate, cache {'on' if cache else 'off'}, C={conc}", r)
            finally:
                proc.terminate()
                proc.wait()
    if os.environ.get("PREFIX_BENCH_PEER", "1") == "0":
        return
    on, off, one_c = results[(1, 16)], results[(0, 16)], results[(1, 1)]
    print(f"prefix cache: TTFT p50 {off['ttft_p50'] / on['ttft_p50']:.2f}x better, throughput "
          f"{on['tok_s'] / off['tok_s']:.2f}x")
    print(f"concurrency 16 vs 1 (cache on): throughput {on['tok_s'] / one_c['tok_s']:.2f}x",
          flush=True)
    proc, url = start_llama_server(model, os.cpu_count())
    try:
        r = asyncio.run(run(url, False, name, reqs, 16, o))
        results["llama"] = r
        row("llama.cpp server, C=16", r)
    finally:
        proc.terminate()
        proc.wait()
    ll = results["llama"]
    print(f"against llama.cpp server at C=16: throughput {on['tok_s'] / ll['tok_s']:.2f}x, "
          f"TTFT p50 {ll['ttft_p50'] / on['ttft_p50']:.2f}x better")


if __name__ == "__main__":
    main()
