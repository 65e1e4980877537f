"""Answer-cache benchmark, through the real server over HTTPS:

1. quality: each labelled pair's stored query is imported (POST /admin/cache/import) into a
   fresh tenant-wide cache, then its new query is asked with Cache-Control: only-if-cached;
   a hit on a label-1 pair is a true positive, on a label-0 pair a false positive. The
   threshold is swept with the X-Cache-Threshold request header (the guard stays on).
2. latency: N entries (default 100k) imported with `cachegate cache import`, then wrk
   (64 keep-alive connections) replays exact hits, of one entry and of 2,000 entries in
   turn, and semantic hits (paraphrased queries) under the same load, then timed one by one
   and with 8 concurrent clients.
3. live: the stored questions of the first N label-1 pairs (--live, 40) asked of the
   engine, whose answers the cache stores, then each pair's new question once, by one
   client, with only-if-cached: the first paraphrase of an entry made by a miss, the way a
   cache fills in use (the judge has the stored question's tokens from the lookup that
   missed; imported entries, above, have none yet).

usage: python cache.py BUILD_DIR PAIRS.tsv [PAIRS.tsv...] [--entries N] [--live N]
(in .venv; --entries 0: quality only; --live 0: no live part)

python cache.py BUILD_DIR PAIRS.tsv... --similarities OUT.tsv writes each pair's embedding
similarity alone (the guard off: label, stored, new, similarity, set) and nothing else, for
build/bench/guard_sweep, which gives the guard's verdicts on them in a second.
"""

import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

MODEL = "smollm2-135m-instruct"
ADMIN = "bench-admin"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def pairs(paths):
    out = []
    for p in paths:
        for line in open(p, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            label, stored, new = line.rstrip("\n").split("\t")
            out.append((int(label), stored, new, os.path.basename(p)))
    return out


def start(binary, tmp, conf=""):
    conf_path = tmp / "bench.conf"
    conf_path.write_text(f"[tenants]\nadmin_key = {ADMIN}\n[server]\nmax_connections = 4096\n"
                         + conf)
    log_path = tmp / "log"
    proc = subprocess.Popen([binary, "serve", "--config", str(conf_path), "--listen",
                             "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--device", "cpu"],
                            cwd=ROOT, stderr=open(log_path, "w"))
    for _ in range(600):
        for raw in open(log_path):
            if '"listening"' in raw:
                return proc, int(json.loads(raw)["port"])
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start: " + log_path.read_text()[-2000:])


def ask(c, q, threshold=None):
    h = {"Cache-Control": "only-if-cached"}
    if threshold is not None:
        h["X-Cache-Threshold"] = f"{threshold:.2f}"
    r = c.post("/v1/chat/completions", headers=h,
               json={"model": MODEL, "messages": [{"role": "user", "content": q}]})
    return r.status_code == 200, float(r.headers.get("X-Cache-Similarity", "0"))


def store_alone(c, stored):
    """An empty cache but for stored's answer, so that pairs do not answer each other."""
    admin = {"Authorization": f"Bearer {ADMIN}"}
    c.delete("/admin/cache?all=true", headers=admin).raise_for_status()
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": stored}],
                       "answer": "stored answer"})
    c.post("/admin/cache/import", content=body, headers=admin).raise_for_status()


def quality(binary, data):
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        proc, port = start(binary, tmp)
        try:
            c = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=60)
            thresholds = sorted({round(0.60 + 0.05 * i, 2) for i in range(8)} | {0.83})
            hits = {t: [] for t in thresholds}
            for label, stored, new, _ in data:
                store_alone(c, stored)
                for t in thresholds:
                    hits[t].append((label, ask(c, new, t)[0]))
                default_hit = ask(c, new)[0]
                hits.setdefault("default", []).append((label, default_hit))
        finally:
            proc.terminate()
            proc.wait()
    sources = sorted({d[3] for d in data})
    for src in sources + (["all"] if len(sources) > 1 else []):
        mine = [i for i, d in enumerate(data) if src in ("all", d[3])]
        print(f"quality, {src}: {len(mine)} pairs ({sum(data[i][0] for i in mine)} paraphrases)")
        print(f"{'threshold':>10} {'precision':>10} {'recall':>8} {'tp':>4} {'fp':>4}")
        for t in thresholds + ["default"]:
            got = [hits[t][i] for i in mine]
            tp = sum(1 for l, h in got if h and l == 1)
            fp = sum(1 for l, h in got if h and l == 0)
            pos = sum(1 for l, _ in got if l == 1)
            prec = tp / (tp + fp) if tp + fp else 1.0
            print(f"{t!s:>10} {prec:>10.3f} {tp / pos:>8.3f} {tp:>4} {fp:>4}")


def similarities(binary, data, out):
    """Each pair's similarity with the guard off: the nearest entry's, hit or miss."""
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        proc, port = start(binary, tmp, "[cache]\nguard = false\nsame_words_floor = 0\n")
        try:
            c = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=60)
            with open(out, "w", encoding="utf-8") as f:
                for i, (label, stored, new, src) in enumerate(data):
                    store_alone(c, stored)
                    r = c.post("/v1/chat/completions",
                               headers={"Cache-Control": "only-if-cached",
                                        "X-Cache-Threshold": "0.01"},
                               json={"model": MODEL,
                                     "messages": [{"role": "user", "content": new}]})
                    sim = r.headers.get("X-Cache-Similarity") or r.headers.get("X-Cache-Nearest")
                    if sim is None:
                        raise RuntimeError(f"no similarity for pair {i + 1}: {r.status_code} "
                                           f"{r.text[:200]}")
                    f.write(f"{label}\t{stored}\t{new}\t{sim}\t{src}\n")
                    if (i + 1) % 500 == 0:
                        print(f"{i + 1}/{len(data)} pairs", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait()


def chat_body(q):
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": q}]})


def rotating_script(path, bodies, only_if_cached=False):
    """A wrk script that posts bodies in turn."""
    path.write_text(
        "bodies = {" + ",".join(json.dumps(b) for b in bodies) + "}\n"
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n' +
        ('wrk.headers["Cache-Control"] = "only-if-cached"\n' if only_if_cached else "") +
        "counter = 0\nrequest = function()\n  counter = counter + 1\n"
        "  return wrk.format(nil, nil, nil, bodies[counter % #bodies + 1])\nend\n")
    return path


def wrk(script, url, what, warm=0):
    """64 keep-alive connections for 10 s (after warm seconds of the same load)."""
    if warm:
        subprocess.run(["wrk", "-t2", "-c64", f"-d{warm}s", "-s", str(script), url],
                       capture_output=True)
    out = subprocess.run(["wrk", "-t2", "-c64", "-d10s", "--latency", "-s", str(script), url],
                         capture_output=True, text=True).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)
    p50 = re.search(r"\n\s+50%\s+(\S+)", out).group(1)
    p99 = re.search(r"\n\s+99%\s+(\S+)", out).group(1)
    print(f"{what}, wrk -t2 -c64 -d10s: {rps} req/s, p50 {p50}, p99 {p99}")


def judge_passes(c):
    """How many (stored, new) pairs the judge embedded per forward pass so far."""
    m = dict(line.split()[:2] for line in c.get("/metrics").text.splitlines()
             if line.startswith("cachegate_cache_judge_pairs_"))
    passes = float(m.get("cachegate_cache_judge_pairs_count", 0))
    pairs = float(m.get("cachegate_cache_judge_pairs_sum", 0))
    if passes:
        print(f"judge: {pairs:.0f} pairs in {passes:.0f} forward passes, "
              f"{pairs / passes:.1f} a pass")


def one_caller(c, qs, what):
    """Each of qs asked once by one client, in turn: p50 and p99."""
    times, hit = [], 0
    for q in qs:
        t = time.perf_counter()
        ok, _ = ask(c, q)
        times.append(time.perf_counter() - t)
        hit += ok
    times.sort()
    print(f"semantic lookups, 1 client, {what}: p50 {1e3 * times[len(times) // 2]:.1f} ms, "
          f"p99 {1e3 * times[int(len(times) * 0.99)]:.1f} ms, hits {hit}/{len(qs)}")


def latency(binary, n, conf=""):
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        lines = tmp / "entries.jsonl"
        stored = [f"What is fact number {i} about the history of city {i % 977}?"
                  for i in range(n)]
        with open(lines, "w") as f:
            for i, q in enumerate(stored):
                f.write(json.dumps({"model": MODEL, "messages": [{"role": "user", "content": q}],
                                    "answer": f"Fact {i} is a short cached answer."}) + "\n")
        import_conf = tmp / "import.conf"
        import_conf.write_text("")
        t0 = time.monotonic()
        subprocess.run([binary, "cache", "import", str(lines), "--data-dir", str(tmp / "data"),
                        "--config", str(import_conf)], cwd=ROOT, check=True,
                       stderr=subprocess.DEVNULL)
        print(f"latency: imported {n} entries in {time.monotonic() - t0:.1f} s")
        proc, port = start(binary, tmp, conf)
        try:
            url = f"https://127.0.0.1:{port}/v1/chat/completions"
            # exact hits: one entry asked over and over, then 2,000 entries (spread over
            # the whole cache) in turn, each after 3 s of the same load
            keys = [(i * 37) % n for i in range(min(2000, n))]
            wrk(rotating_script(tmp / "one.lua", [chat_body(stored[42 % n])]), url,
                "exact hits on 1 entry", warm=3)
            wrk(rotating_script(tmp / "many.lua", [chat_body(stored[i]) for i in keys]), url,
                f"exact hits on {len(keys)} entries", warm=3)
            # paraphrases under the same load: each is embedded and searched every time (a
            # semantic hit does not store the paraphrase as an exact entry); only-if-cached,
            # so that a rare miss is a 504, not an engine run
            qs = [f"Tell me fact number {i} regarding the history of city {i % 977}."
                  for i in range(200)]
            wrk(rotating_script(tmp / "sem.lua", [chat_body(q) for q in qs], True), url,
                f"semantic hits on {len(qs)} paraphrases")
            c = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=60)
            judge_passes(c)
            one_caller(c, qs, "entries hit before")
            # paraphrases of entries no lookup has hit yet: the judge embeds each stored
            # question (it keeps none of these yet)
            first = min(1000, max(200, n - 200))
            fresh = [f"Tell me fact number {i} regarding the history of city {i % 977}."
                     for i in range(first, min(first + 200, n))]
            if fresh:
                one_caller(c, fresh, "entries not hit before")

            def one(q):
                with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False,
                                  timeout=60) as cc:
                    out = []
                    for _ in range(5):
                        t = time.perf_counter()
                        ask(cc, q)
                        out.append(time.perf_counter() - t)
                    return out

            t0 = time.monotonic()
            with cf.ThreadPoolExecutor(8) as ex:
                times = sorted(x for r in ex.map(one, qs[:40]) for x in r)
            wall = time.monotonic() - t0
            print(f"semantic lookups, 8 clients: p50 {1e3 * times[len(times) // 2]:.1f} ms, "
                  f"p99 {1e3 * times[int(len(times) * 0.99)]:.1f} ms, "
                  f"{len(times) / wall:.0f} req/s")
        finally:
            proc.terminate()
            proc.wait()


def live(binary, data, n, conf=""):
    first = [(s, q) for label, s, q, _ in data if label == 1][:n]
    system = "Answer in one short sentence."

    def body(q, **kw):
        return {"model": MODEL, "temperature": 0, **kw,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": q}]}

    with tempfile.TemporaryDirectory() as d:
        proc, port = start(binary, pathlib.Path(d), conf)
        try:
            c = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=120)
            stored = 0  # (an answer cut by max_tokens is not stored)
            for s, _ in first:
                r = c.post("/v1/chat/completions", json=body(s, max_tokens=200))
                stored += r.json()["choices"][0]["finish_reason"] == "stop"
            time.sleep(2)  # (the answers are written after their responses)
            times, hits = [], 0
            for _, q in first:
                t = time.perf_counter()
                r = c.post("/v1/chat/completions", json=body(q),
                           headers={"Cache-Control": "only-if-cached"})
                times.append(time.perf_counter() - t)
                hits += r.status_code == 200
            times.sort()
            m = dict(line.split()[:2] for line in c.get("/metrics").text.splitlines()
                     if line.startswith("cachegate_cache_judge_texts_total"))
            print(f"live: {stored} of {len(first)} questions answered and stored; their "
                  f"paraphrases, 1 client: p50 {1e3 * times[len(times) // 2]:.1f} ms, p90 "
                  f"{1e3 * times[int(len(times) * 0.9)]:.1f} ms, hits {hits}/{len(first)}, "
                  f"texts the judge embedded "
                  f"{float(m.get('cachegate_cache_judge_texts_total', 0)):.0f}")
        finally:
            proc.terminate()
            proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("pairs", nargs="+")
    ap.add_argument("--entries", type=int, default=100000)
    ap.add_argument("--similarities", metavar="OUT")
    ap.add_argument("--live", type=int, default=40)
    ap.add_argument("--conf", metavar="FILE",
                    help="more server configuration for the latency part (e.g. [cache] "
                    "judge_threshold = 0)")
    a = ap.parse_args()
    binary = str(pathlib.Path(a.build) / "cachegate")
    data = pairs([p for p in a.pairs if os.path.exists(p)])
    if a.similarities:
        return similarities(binary, data, a.similarities)
    quality(binary, data)
    conf = open(a.conf).read() if a.conf else ""
    if a.entries > 0:
        latency(binary, a.entries, conf)
    if a.live > 0:
        live(binary, data, a.live, conf)


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    sys.exit(main())
