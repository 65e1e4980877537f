"""Embedder benchmark: cachegate's CPU embedder against sentence-transformers on the same
model directory, in one run, on the same machine and thread count; then the latency of
one short question through POST /v1/embeddings.

usage: python embed.py BUILD_DIR MODEL_DIR [SECONDS]   (run by `make bench`, in the
reference venv: sentence-transformers and torch pinned in tests/ref/requirements.txt)
"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

SUBJECTS = ["my password", "the capital of France", "a refund", "my order", "the weather",
            "Python lists", "a sourdough starter", "the invoice", "two-factor login",
            "the train to Berlin", "a cheap laptop", "my subscription", "the API key",
            "a vegetarian lasagna", "the tax deadline", "my flight"]
VERBS = ["How do I reset", "What is", "Can you explain", "Where can I find", "Why is",
         "How much does", "When does", "Who handles", "Is there a way to cancel",
         "What's the best way to check"]
WORDS = ("the gateway caches answers so that repeated questions cost nothing while new "
         "questions go to the model which runs on the same machine and shares its prefix "
         "cache across requests of one tenant for lower latency and higher throughput").split()


def short_questions(n, rng):
    return [f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)}?" for _ in range(n)]


def passages(n, rng):
    # about 200 WordPiece tokens each (these words are single tokens)
    return [" ".join(rng.choice(WORDS) for _ in range(190)) + "." for _ in range(n)]


def st_rate(model, texts, batch, seconds):
    model.encode(texts[:batch], batch_size=batch)  # warm-up
    done, pos, t0 = 0, 0, time.perf_counter()
    while True:
        if pos + batch > len(texts):
            pos = 0
        model.encode(texts[pos:pos + batch], batch_size=batch, normalize_embeddings=True)
        pos += batch
        done += batch
        t = time.perf_counter()
        if t - t0 >= seconds:
            return done / (t - t0)


def cg_rate(build, model_dir, texts, batch, seconds):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(texts) + "\n")
    try:
        out = subprocess.run([f"{build}/bench/bench_embed", model_dir, f.name, str(batch),
                              str(seconds)], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return json.loads(out)["texts_per_s"]


def http_latency(build, n=300):
    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "c.conf")
        log = os.path.join(tmp, "log")
        open(conf, "w").write("")
        with open(log, "w") as logf:
            proc = subprocess.Popen([f"{build}/cachegate", "serve", "--config", conf, "--listen",
                                     "127.0.0.1:0", "--data-dir", tmp, "--device", "cpu"],
                                    stderr=logf)
        try:
            port = None
            for _ in range(200):
                for line in open(log):
                    msg = json.loads(line)
                    if msg.get("msg") == "listening":
                        port = int(msg["port"])
                if port:
                    break
                time.sleep(0.05)
            cert = os.path.join(tmp, "tls", "cert.pem")
            lat = []
            with httpx.Client(verify=cert, base_url=f"https://127.0.0.1:{port}") as c:
                body = {"model": "all-minilm-l6-v2", "input": "How do I reset my password?"}
                for _ in range(20):
                    c.post("/v1/embeddings", json=body)
                for _ in range(n):
                    t0 = time.perf_counter()
                    r = c.post("/v1/embeddings", json=body)
                    lat.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200
        finally:
            proc.terminate()
            proc.wait()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1]


def main():
    build, model_dir = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 5
    rng = random.Random(7)
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    st = SentenceTransformer(model_dir, device="cpu")
    sets = {"short questions": short_questions(512, rng), "200-token passages": passages(128, rng)}
    print(f"embedder: cachegate CPU vs sentence-transformers (torch {torch.__version__}), "
          f"{threads} threads, {seconds:.0f} s per cell")
    print(f"{'texts':<20} {'batch':>5} {'cachegate/s':>12} {'ST/s':>10} {'ratio':>7}")
    for name, texts in sets.items():
        for batch in (1, 32):
            a = cg_rate(build, model_dir, texts, batch, seconds)
            b = st_rate(st, texts, batch, seconds)
            print(f"{name:<20} {batch:>5} {a:>12.1f} {b:>10.1f} {a / b:>6.2f}x", flush=True)
    p50, p99 = http_latency(build)
    print(f"POST /v1/embeddings, one short question, keep-alive TLS: p50 {p50:.2f} ms, "
          f"p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
