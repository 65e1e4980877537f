"""End-to-end tests of POST /v1/embeddings and `cachegate embed`."""

import base64
import json
import math
import re
import struct
import subprocess
import threading

import httpx
import openai
import pytest

from conftest import BIN, ROOT

MODEL = "all-minilm-l6-v2"
FIXTURE = json.loads((ROOT / "tests/fixtures/embedder/reference.json").read_text())
REF = {row["text"]: row for row in FIXTURE["texts"]}


def client(server):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=30)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def sdk(server):
    http = httpx.Client(verify=server.ssl_context(), timeout=30)
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)


def test_openai_sdk_embeddings_match_reference(server):
    texts = ["What is the capital of France?", "How do I reset my password?", "Hello, world!"]
    r = sdk(server).embeddings.create(model=MODEL, input=texts)  # the SDK asks for base64
    assert r.model == MODEL
    assert [d.index for d in r.data] == [0, 1, 2]
    for text, d in zip(texts, r.data):
        assert len(d.embedding) == 384
        assert cosine(d.embedding, REF[text]["embedding"]) >= 0.9999
    # the inputs' own tokens, as OpenAI counts them: not the [CLS] and [SEP] around each
    assert r.usage.prompt_tokens == sum(len(REF[t]["ids"]) - 2 for t in texts)
    assert r.usage.total_tokens == r.usage.prompt_tokens


def test_float_and_base64_agree(server):
    with client(server) as c:
        f = c.post("/v1/embeddings", json={"model": MODEL, "input": "Hello, world!"}).json()
        b = c.post("/v1/embeddings", json={"model": MODEL, "input": "Hello, world!",
                                           "encoding_format": "base64"}).json()
    vf = f["data"][0]["embedding"]
    raw = base64.b64decode(b["data"][0]["embedding"])
    vb = struct.unpack("<384f", raw)
    assert max(abs(x - y) for x, y in zip(vf, vb)) < 1e-7
    assert abs(sum(x * x for x in vf) - 1) < 1e-5  # L2-normalised
    assert f["object"] == "list" and f["data"][0]["object"] == "embedding"
    assert f["usage"] == {"prompt_tokens": 4, "total_tokens": 4}  # hello , world !


def test_long_input_is_refused_or_truncated_where_configured(make_server):
    """A text past the model's 256 tokens was embedded by its beginning alone, without a
    word: a retrieval system indexed chunks by their first quarter. It is a 400 naming the
    input, as OpenAI's past its context; embedder.truncate = true embeds the beginning."""
    text = FIXTURE["texts"][-1]["text"]  # longer than 256 tokens
    server = make_server()
    with client(server) as c:
        for body, which in (({"model": MODEL, "input": text}, "input "),
                            ({"model": MODEL, "input": ["short", text]}, "input[1] ")):
            r = c.post("/v1/embeddings", json=body)
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["code"] == "context_length_exceeded" and err["param"] == "input"
            assert err["message"].startswith(which) and "254 tokens" in err["message"]
        fits = " ".join(["word"] * 254)  # 256 with [CLS] and [SEP]: the whole of it
        r = c.post("/v1/embeddings", json={"model": MODEL, "input": fits})
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == 254
        assert c.post("/v1/embeddings",
                      json={"model": MODEL, "input": fits + " word"}).status_code == 400
    server.stop()
    server = make_server("[embedder]\ntruncate = true\n")
    with client(server) as c:
        r = c.post("/v1/embeddings", json={"model": MODEL, "input": text}).json()
    assert r["usage"]["prompt_tokens"] == 254  # read: 256 with [CLS] and [SEP]
    assert cosine(r["data"][0]["embedding"], REF[text]["embedding"]) >= 0.9999


@pytest.mark.parametrize("body,status,param,code", [
    ({"model": "text-embedding-3-small", "input": "a"}, 404, "model", "model_not_found"),
    ({"model": "smollm2-135m-instruct", "input": "a"}, 400, "model", "model_not_supported"),
    ({"model": MODEL, "input": ""}, 400, "input", None),
    ({"input": "a"}, 400, "model", None),
    ({"model": MODEL}, 400, "input", None),
    ({"model": MODEL, "input": []}, 400, "input", None),
    ({"model": MODEL, "input": [""]}, 400, "input", None),
    ({"model": MODEL, "input": [[1, 2, 100300]]}, 400, "input", None),  # past cl100k_base
    ({"model": MODEL, "input": [1, -2]}, 400, "input", None),
    ({"model": MODEL, "input": [[1, "a"]]}, 400, "input", None),
    ({"model": MODEL, "input": [[]]}, 400, "input", None),
    ({"model": MODEL, "input": "a", "dimensions": 256}, 400, "dimensions", None),
    ({"model": MODEL, "input": "a", "encoding_format": "int8"}, 400, "encoding_format", None),
    ({"model": MODEL, "input": "a", "user": 7}, 400, "user", None),
    ({"model": MODEL, "input": "a", "bogus": 1}, 400, "bogus", None),  # as OpenAI refuses it
    ({"model": MODEL, "inputs": "a"}, 400, "inputs", None),
])
def test_invalid_requests(server, body, status, param, code):
    with client(server) as c:
        r = c.post("/v1/embeddings", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["code"] == code and err["message"]
    if body.get("input") == "":
        assert err["message"] == "input is an empty string."
    if code == "model_not_supported":
        assert "chat model" in err["message"] and MODEL in err["message"]


def test_openai_token_ids_are_embedded_as_their_text(server, monkeypatch):
    """LangChain's OpenAIEmbeddings sends token ids of OpenAI's cl100k_base by default
    (tiktoken, an independent implementation, makes them here from the vocabulary file
    the server reads): each array is embedded as the text it stands for."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(ROOT / "models/openai-tokenizers"))
    import tiktoken
    enc = tiktoken.get_encoding("cl100k_base")
    texts = ["What is the capital of France?", "Crème brûlée, naïve café", "東京の天気は？ 🌧️",
             "  spaces\tand\nlines  "]
    ids = enc.encode_batch(texts)
    assert all(len(i) > 1 for i in ids)
    s = sdk(server)
    by_ids = s.embeddings.create(model=MODEL, input=ids)
    by_text = s.embeddings.create(model=MODEL, input=texts)
    for a, b in zip(by_ids.data, by_text.data):
        assert max(abs(x - y) for x, y in zip(a.embedding, b.embedding)) < 1e-5
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens  # the model's own count
    # one text as one flat array of ids
    one = s.embeddings.create(model=MODEL, input=ids[1])
    assert len(one.data) == 1
    assert max(abs(x - y) for x, y in zip(one.data[0].embedding, by_text.data[1].embedding)) < 1e-5
    # ids cut inside a character (a chunk of a longer text): the broken bytes are left out
    cut = enc.encode("é")  # one character, whose bytes may take two tokens
    r = s.embeddings.create(model=MODEL, input=[enc.encode("café au lait") + cut[:1]])
    assert len(r.data[0].embedding) == 384


@pytest.mark.parametrize("setting", ["", "/nonexistent/cl100k_base.tiktoken"])
def test_token_ids_are_refused_without_the_tokenizer(make_server, setting):
    """Empty, or missing (a configuration from before the setting, beside models without
    the file): the server starts, says so, and refuses token ids naming the way out."""
    server = make_server(f"[embedder]\nopenai_tokenizer = {setting}\n")
    with client(server) as c:
        r = c.post("/v1/embeddings", json={"model": MODEL, "input": [[1, 2, 3]]})
        assert r.status_code == 400
        assert "check_embedding_ctx_length=False" in r.json()["error"]["message"]
        assert c.post("/v1/embeddings", json={"model": MODEL, "input": "a"}).status_code == 200
    warned = [l for l in server.lines if "openai_tokenizer" in str(l.get("msg", ""))]
    assert bool(warned) == bool(setting), server.lines


def test_invalid_json(server):
    with client(server) as c:
        r = c.post("/v1/embeddings", content=b'{"model": ')
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "invalid_json"
        r = c.post("/v1/embeddings", content=b'[1, 2]')
        assert r.status_code == 400
        r = c.post("/v1/embeddings", content=b'{"model": "x", "input": "a\\u0000b"}')
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "invalid_json"
        assert "NUL" in err["message"] and "JSON_ALLOW_NUL" not in err["message"]
        assert c.get("/v1/embeddings").status_code == 405
        # a file a Windows editor saved, sent as it is (curl --data-binary @file)
        r = c.post("/v1/embeddings", content="\ufeff".encode() + json.dumps(
            {"model": "all-minilm-l6-v2", "input": "hi"}).encode())
        assert r.status_code == 200, r.text


def test_concurrent_requests_share_forward_passes(make_server):
    server = make_server("[embedder]\nmax_batch = 64\nmax_wait_us = 200000\n")
    texts = [row["text"] for row in FIXTURE["texts"][:12] if row["text"]]
    results = {}

    def one(t):
        with client(server) as c:
            results[t] = c.post("/v1/embeddings", json={"model": MODEL, "input": t}).json()

    threads = [threading.Thread(target=one, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t in texts:
        assert cosine(results[t]["data"][0]["embedding"], REF[t]["embedding"]) >= 0.9999
    with client(server) as c:
        metrics = c.get("/metrics").text
    passes = int(re.search(r"^cachegate_embed_batch_size_count (\d+)$", metrics, re.M).group(1))
    embedded = int(re.search(r"^cachegate_embed_texts_total (\d+)$", metrics, re.M).group(1))
    assert embedded == len(texts)
    assert passes < len(texts)  # requests were batched together


def test_cli_embed_prints_one_array_per_text():
    r = subprocess.run([str(BIN), "embed", "--model", str(ROOT / "models" / MODEL),
                        "What is the capital of France?", "Hello, world!"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert len(lines) == 2
    for line, text in zip(lines, ["What is the capital of France?", "Hello, world!"]):
        v = json.loads(line)
        assert len(v) == 384
        assert cosine(v, REF[text]["embedding"]) >= 0.9999


def test_cli_embed_reads_lines_from_standard_input():
    """`embed -` embeds each line of its input (a script's file of texts, past the batch of
    64 it embeds at a time), as the same texts given as arguments are."""
    texts = ["What is the capital of France?", "Hello, world!"] * 40
    r = subprocess.run([str(BIN), "embed", "-"], input="\r\n".join(texts) + "\n",
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert len(lines) == len(texts)
    for line, text in zip(lines, texts):
        assert cosine(json.loads(line), REF[text]["embedding"]) >= 0.9999
    r = subprocess.run([str(BIN), "embed", "-"], input="", capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout == ""


def test_cli_embed_bad_model_dir(tmp_path):
    r = subprocess.run([str(BIN), "embed", "--model", str(tmp_path), "x"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 1
    assert f"{tmp_path}/config.json" in r.stderr and "line -1" not in r.stderr, r.stderr
    # a bad --device value is a usage error, as it is for serve and device
    r = subprocess.run([str(BIN), "embed", "--device", "gpu", "x"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "'gpu' is not one of" in r.stderr
