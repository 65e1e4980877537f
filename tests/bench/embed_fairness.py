"""How long a question's semantic lookup waits while a large import is being embedded.

Usage: .venv/bin/python tests/bench/embed_fairness.py BUILD_DIR [BASELINE_BINARY]

Starts BUILD_DIR/cachegate on an empty data directory, stores one answer, then posts a
3,000-line import through the admin API and, while it is being embedded, asks a paraphrase
of the stored question with Cache-Control: only-if-cached five times: the median wait is
printed. With BASELINE_BINARY (another build), the same is measured with it in the same
run, and the ratio printed.
"""
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cache as cb  # noqa: E402

LINES = 3000


def measure(binary):
    with tempfile.TemporaryDirectory() as d:
        proc, port = cb.start(binary, pathlib.Path(d))
        try:
            url = f"https://127.0.0.1:{port}"
            admin = {"Authorization": f"Bearer {cb.ADMIN}"}
            c = httpx.Client(base_url=url, verify=False, timeout=300)
            c.post("/admin/cache/import", headers=admin, content=json.dumps(
                {"model": cb.MODEL, "messages": [
                    {"role": "user", "content": "What is the capital of France?"}],
                 "answer": "Paris."})).raise_for_status()
            waits = []
            for round_ in range(5):
                body = "\n".join(json.dumps({"model": cb.MODEL, "messages": [
                    {"role": "user", "content": f"Round {round_}, question {i} about "
                                                f"topic {i * 7} and things {i % 13}?"}],
                    "answer": "x"}) for i in range(LINES))
                t = threading.Thread(target=lambda: httpx.Client(
                    base_url=url, verify=False, timeout=600).post(
                    "/admin/cache/import", headers=admin, content=body))
                t.start()
                time.sleep(0.5)  # the import is being embedded
                t0 = time.monotonic()
                r = c.post("/v1/chat/completions", headers={"Cache-Control": "only-if-cached"},
                           json={"model": cb.MODEL, "messages": [
                               {"role": "user", "content": "What's the capital city of France?"}]})
                waits.append(time.monotonic() - t0)
                assert r.status_code == 200, r.text
                t.join()
            return statistics.median(waits)
        finally:
            proc.terminate()
            proc.wait()


def main():
    now = measure(str(pathlib.Path(sys.argv[1]) / "cachegate"))
    print(f"semantic lookup beside a {LINES}-line import: median {now:.2f} s")
    if len(sys.argv) > 2:
        base = measure(sys.argv[2])
        print(f"baseline {sys.argv[2]}: median {base:.2f} s ({base / now:.1f}x longer)")


if __name__ == "__main__":
    main()
