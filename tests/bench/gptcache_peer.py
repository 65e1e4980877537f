"""The peer for the answer-cache benchmark (tests/bench/cache.py): GPTCache (PyPI) on the same
data, with the same embedding model directory (models/all-minilm-l6-v2, loaded by its SBERT
embedding through sentence-transformers), a FAISS vector store ("IDMap,Flat", L2) and a
SQLite scalar store, scored by SearchDistanceEvaluation.

GPTCache is a Python library used in-process: there is no HTTP, TLS or JSON here, while
cache.py measures cachegate through its HTTPS API.

Score semantics: the FAISS store returns the squared L2 distance d2 of the unit-length
embeddings, d2 = 2 - 2 cos; SearchDistanceEvaluation (max_distance 4, positive False) scores
4 - d2 = 2 + 2 cos, and a lookup hits when that score reaches 4 * similarity_threshold.
So GPTCache's similarity_threshold t means cosine >= 2t - 1 (0.80, Config's default, is
cosine 0.60; 0.95 is cosine 0.90; cachegate's default cosine 0.70 is t = 0.85).

1. quality: for each labelled pair, a fresh cache holds only the stored query (put() with a
   dummy answer), then the new query is asked (get()); similarity_threshold is swept.
2. latency: N entries (default 100k, the questions of cache.py's latency()), bulk-loaded
   with the data manager's import_data (embeddings computed in batches by the same model);
   then exact repeats and paraphrased queries are timed one by one through get().

usage: build/gptcache-venv/bin/python tests/bench/gptcache_peer.py PAIRS.tsv [PAIRS.tsv...]
           [--entries N] [--model models/all-minilm-l6-v2] [--threads 2]
(venv: tests/bench/requirements-gptcache.txt)
"""

import argparse
import atexit
import logging
import os
import pathlib
import shutil
import sys
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gptcache import Cache, Config  # noqa: E402
from gptcache.adapter.api import get, put  # noqa: E402
from gptcache.embedding import SBERT  # noqa: E402
from gptcache.manager import CacheBase, VectorBase, get_data_manager  # noqa: E402
from gptcache.processor.pre import get_prompt  # noqa: E402
from gptcache.similarity_evaluation import SearchDistanceEvaluation  # noqa: E402
from gptcache.utils.log import gptcache_log  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIM = 384
# GPTCache similarity_threshold values: cosine 0.60 .. 0.95 in steps of 0.05 (the rows of
# cache.py, t = (1 + cos) / 2; 0.80 is Config's default, 0.95 the published evaluation's),
# plus cachegate's former defaults, cosine 0.76 (t = 0.88) and 0.83 (t = 0.915).
THRESHOLDS = [0.70, 0.75, 0.80, 0.825, 0.85, 0.875, 0.88, 0.90, 0.915, 0.925, 0.95, 0.975]


def pairs(paths):
    out = []
    for p in paths:
        for line in open(p, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            label, stored, new = line.rstrip("\n").split("\t")
            out.append((int(label), stored, new, p))
    return out


def new_cache(encoder, directory, threshold=0.8, max_size=1000, embed=None):
    directory.mkdir(parents=True, exist_ok=True)
    dm = get_data_manager(
        CacheBase("sqlite", sql_url=f"sqlite:///{directory / 'sqlite.db'}"),
        VectorBase("faiss", dimension=DIM, index_path=str(directory / "faiss.index")),
        max_size=max_size)
    c = Cache()
    c.init(pre_embedding_func=get_prompt, embedding_func=embed or encoder.to_embeddings,
           data_manager=dm, similarity_evaluation=SearchDistanceEvaluation(),
           config=Config(similarity_threshold=threshold))
    return c


def cos_of(t):
    return 2 * t - 1


def table(rows, title):
    """rows: list of (threshold label, [(label, hit)])"""
    print(title)
    print(f"{'threshold':>10} {'(cosine)':>9} {'precision':>10} {'recall':>8} {'f1':>6} "
          f"{'tp':>4} {'fp':>4}")
    for t, hits in rows:
        tp = sum(1 for lab, h in hits if h and lab == 1)
        fp = sum(1 for lab, h in hits if h and lab == 0)
        pos = sum(1 for lab, _ in hits if lab == 1)
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / pos if pos else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        cos = f"{cos_of(t):.3f}" if isinstance(t, float) else ""
        print(f"{t!s:>10} {cos:>9} {prec:>10.3f} {rec:>8.3f} {f1:>6.3f} {tp:>4} {fp:>4}")


def prf(scored, t):
    tp = sum(1 for lab, s in scored if s >= t and lab == 1)
    fp = sum(1 for lab, s in scored if s >= t and lab == 0)
    pos = sum(1 for lab, _ in scored if lab == 1)
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / pos if pos else 0.0
    return prec, rec, (2 * prec * rec / (prec + rec) if prec + rec else 0.0)


def quality(encoder, data, tmp):
    """Every pair in its own fresh cache; returns the summary dict."""
    extra = {}
    scores = []
    hits = {t: [] for t in THRESHOLDS}
    caches = []
    memo = {}

    def embed(text, **kw):  # the sweep asks each new query many times: embed it once
        if text not in memo:
            memo[text] = encoder.to_embeddings(text, **kw)
        return memo[text]

    for k, (label, stored, new, _) in enumerate(data):
        c = new_cache(encoder, tmp / f"q{k}", embed=embed)
        caches.append(c)
        put(stored, "stored answer", cache_obj=c)
        # the score GPTCache gives the nearest entry: threshold 0 always hits and
        # hit_callback reports (question, score / (max - min)), i.e. (1 + cos) / 2
        got = []
        c.config.similarity_threshold = 0.0
        get(new, cache_obj=c, hit_callback=lambda r: got.extend(r))
        scores.append(got[0][1] if got else 0.0)
        for t in THRESHOLDS:
            c.config.similarity_threshold = t
            hits[t].append((label, get(new, cache_obj=c) is not None))
    # candidate thresholds: each score (a lookup hits at score >= threshold)
    scored = [(lab, s) for (lab, *_), s in zip(data, scores)]
    cands = sorted(set(scores))
    best_f1 = max(cands, key=lambda t: (prf(scored, t)[2], t))
    p97 = [t for t in cands if prf(scored, t)[0] >= 0.97 and prf(scored, t)[1] > 0]
    best_p97 = max(p97, key=lambda t: (prf(scored, t)[1], -t)) if p97 else None
    for name, t in (("best-f1", best_f1), ("p>=0.97", best_p97)):
        if t is None:
            continue
        t = float(np.floor(t * 1e5) / 1e5)  # a value one would write in Config, <= the score
        extra[name] = t
        h = []
        for (label, stored, new, _), c in zip(data, caches):
            c.config.similarity_threshold = t
            h.append((label, get(new, cache_obj=c) is not None))
        hits[t] = h
    for c in caches:
        c.data_manager.close()
    print(f"quality: {len(data)} pairs ({sum(d[0] for d in data)} paraphrases), "
          "GPTCache similarity_threshold (cosine = 2t - 1), each pair in a fresh cache")
    rows = [(t, hits[t]) for t in THRESHOLDS]
    for name, t in extra.items():
        rows.append((t, hits[t]))
    table(rows, "all pairs:")
    for name, t in extra.items():
        p, r, f = prf(scored, t)
        print(f"  {name}: similarity_threshold {t:.5f} (cosine {cos_of(t):.4f}): "
              f"precision {p:.3f} recall {r:.3f} f1 {f:.3f}")
    if "p>=0.97" not in extra:
        print("  no threshold reaches precision >= 0.97 with any recall")
    files = sorted(set(d[3] for d in data), key=[d[3] for d in data].index)
    if len(files) > 1:
        for f in files:
            idx = [i for i, d in enumerate(data) if d[3] == f]
            rows = [(t, [hits[t][i] for i in idx]) for t in THRESHOLDS + list(extra.values())]
            table(rows, f"{os.path.basename(f)} ({len(idx)} pairs):")
    # agreement of the recorded score with the hit/miss of the real lookups
    bad = sum(1 for t in THRESHOLDS for (lab, s), (_, h) in zip(scored, hits[t])
              if (s >= t) != h)
    if bad:
        print(f"  note: {bad} lookups disagree with score >= threshold (float rounding)")
    return {t: prf(scored, t) for t in THRESHOLDS}, extra, scored


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def latency(encoder, n, tmp, batch):
    c = new_cache(encoder, tmp / "latency", threshold=0.8, max_size=n + 1000)
    qs = [f"What is fact number {i} about the history of city {i % 977}?" for i in range(n)]
    ans = [f"Fact {i} is a short cached answer." for i in range(n)]
    model = encoder.model
    t0 = time.monotonic()
    embs = model.encode(qs, batch_size=batch, convert_to_numpy=True).astype("float32")
    t_emb = time.monotonic() - t0
    t1 = time.monotonic()
    c.data_manager.import_data(questions=qs, answers=ans, embedding_datas=list(embs),
                               session_ids=[None] * n)
    t_store = time.monotonic() - t1
    total = time.monotonic() - t0
    print(f"latency: imported {n} entries in {total:.1f} s (embedding in batches of {batch} "
          f"{t_emb:.1f} s, {n / t_emb:.0f} texts/s; data_manager.import_data into SQLite + "
          f"FAISS {t_store:.1f} s); in-process, no HTTP")
    # GPTCache's own per-entry insert path (put(): embed one question, save), on a sample
    m = min(200, n)
    t0 = time.perf_counter()
    pc = new_cache(encoder, tmp / "put-sample")
    for i in range(m):
        put(qs[i], ans[i], cache_obj=pc)
    put_rate = m / (time.perf_counter() - t0)
    pc.data_manager.close()
    print(f"  put() one by one into an empty cache: {put_rate:.0f} entries/s ({m} entries)")
    res = {"import_s": total, "put_rate": put_rate}

    def timed(queries, check):
        for q in queries[:5]:  # warm-up
            get(q, cache_obj=c)
        times, hit, right = [], 0, 0
        for i, q in enumerate(queries):
            t = time.perf_counter()
            a = get(q, cache_obj=c)
            times.append(time.perf_counter() - t)
            hit += a is not None
            right += a == check(i)
        return times, hit, right

    k = min(200, n)
    ids = [(j * 7919) % n for j in range(k)]  # spread over the whole cache
    exact = [qs[i] for i in ids]
    c.report = type(c.report)()
    times, hit, right = timed(exact, lambda j: ans[ids[j]])
    emb_ms = 1e3 * c.report.average_embedding_time()
    search_ms = 1e3 * c.report.average_search_time()
    data_ms = 1e3 * c.report.average_data_time()
    print(f"exact repeats, 1 caller (in-process get()): p50 {1e3 * pct(times, 0.5):.1f} ms, "
          f"p99 {1e3 * pct(times, 0.99):.1f} ms, {len(times) / sum(times):.0f} lookups/s, "
          f"hits {hit}/{k} (right answer {right}); mean per lookup: embedding {emb_ms:.1f} ms, "
          f"FAISS search {search_ms:.1f} ms, SQLite fetch {data_ms:.1f} ms")
    res["exact"] = (pct(times, 0.5), pct(times, 0.99), len(times) / sum(times), hit, right, k)
    para = [f"Tell me fact number {i} regarding the history of city {i % 977}." for i in range(k)]
    c.report = type(c.report)()
    times, hit, right = timed(para, lambda j: ans[j])
    emb_ms = 1e3 * c.report.average_embedding_time()
    search_ms = 1e3 * c.report.average_search_time()
    print(f"semantic lookups (paraphrases, similarity_threshold 0.8), 1 caller: "
          f"p50 {1e3 * pct(times, 0.5):.1f} ms, p99 {1e3 * pct(times, 0.99):.1f} ms, "
          f"{len(times) / sum(times):.0f} lookups/s, hits {hit}/{k} (right answer {right}, "
          f"wrong answer {hit - right}); mean per lookup: embedding {emb_ms:.1f} ms, "
          f"FAISS search {search_ms:.1f} ms")
    res["semantic"] = (pct(times, 0.5), pct(times, 0.99), len(times) / sum(times), hit, right, k)
    c.data_manager.close()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="+")
    ap.add_argument("--entries", type=int, default=100000)
    ap.add_argument("--model", default=str(ROOT / "models" / "all-minilm-l6-v2"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    gptcache_log.setLevel(logging.ERROR)
    import faiss
    import gptcache
    import sentence_transformers
    print(f"GPTCache {gptcache.__version__ if hasattr(gptcache, '__version__') else '?'}, "
          f"faiss-cpu {faiss.__version__}, sentence-transformers "
          f"{sentence_transformers.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), model {a.model}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gptcache-peer-"))
    # registered first so that it runs last, after GPTCache's own atexit flushes
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    encoder = SBERT(a.model)  # SentenceTransformer(path): a local directory works
    assert encoder.dimension == DIM
    data = pairs([p for p in a.pairs if os.path.exists(p)])
    q, extra, _ = quality(encoder, data, tmp)
    lat = latency(encoder, a.entries, tmp, a.batch)
    print("summary (GPTCache, in-process, no HTTP):")
    for t in (0.80, 0.915, 0.95):
        p, r, f = q[t]
        print(f"  quality at similarity_threshold {t} (cosine {cos_of(t):.2f}): "
              f"precision {p:.3f} recall {r:.3f} f1 {f:.3f}")
    for name, t in extra.items():
        print(f"  quality {name}: similarity_threshold {t:.5f} (cosine {cos_of(t):.4f})")
    print(f"  import of {a.entries} entries: {lat['import_s']:.1f} s "
          f"(put() one by one: {lat['put_rate']:.0f} entries/s)")
    for key, name in (("exact", "exact repeats"), ("semantic", "semantic lookups")):
        p50, p99, rate, hit, right, k = lat[key]
        print(f"  {name}, 1 caller: p50 {1e3 * p50:.1f} ms, p99 {1e3 * p99:.1f} ms, "
              f"{rate:.0f}/s, hits {hit}/{k}, right answers {right}/{k}")
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
