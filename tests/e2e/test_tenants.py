"""End-to-end tests of tenants: API keys (401s, revocation within a second), isolation of
the answer caches and of the prefix cache, rate limits and quotas (429 with Retry-After),
usage accounting, per-tenant policy, and the admin API and CLI. Two tenants, a and b."""

import json
import re
import sqlite3
import subprocess
import threading
import time

import httpx
import pytest

from conftest import BIN, ROOT

MODEL = "smollm2-135m-instruct"
ADMIN = "tenant-test-admin"
AUTH_CONF = f"[tenants]\nauth = on\nadmin_key = {ADMIN}\n"
SYSTEM = ("You are the support assistant of the Zorblax Widget Company. Answer briefly and "
          "politely, mention the warranty when relevant, never invent part numbers, and "
          "always end by asking whether there is anything else to help with.")


def client(server, key=None):
    h = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120,
                        headers=h)


def admin(server):
    return client(server, ADMIN)


def make_tenant(server, name, policy=None):
    a = admin(server)
    r = a.post("/admin/tenants", json={"name": name, **({"policy": policy} if policy else {})})
    assert r.status_code == 201, r.text
    r = a.post("/admin/keys", json={"tenant": name})
    assert r.status_code == 201, r.text
    return r.json()["key"]


def chat(c, content, headers=None, system=None, **kw):
    msgs = ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": content}]
    return c.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs, **kw},
                  headers=headers or {})


def embed(c, text="hello"):
    return c.post("/v1/embeddings", json={"model": "all-minilm-l6-v2", "input": text})


@pytest.fixture
def server(make_server):
    return make_server(AUTH_CONF)


def test_401_for_no_key_a_wrong_key_and_a_revoked_key(server):
    key = make_tenant(server, "a")  # through the admin API: usable at once
    assert embed(client(server, key)).status_code == 200
    for c in [client(server), client(server, "cg-" + "0" * 48), client(server, ADMIN)]:
        r = embed(c)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
        assert r.json()["error"]["type"] == "invalid_request_error"  # as OpenAI's says it
        assert chat(c, "hi").status_code == 401
        assert c.get("/v1/models").status_code == 401
    prefix = key[:12]
    keys = admin(server).get("/admin/keys?tenant=a").json()["data"]
    assert [k["prefix"] for k in keys] == [prefix] and key not in json.dumps(keys)
    assert admin(server).delete(f"/admin/keys?prefix={prefix}").status_code == 200
    assert embed(client(server, key)).status_code == 401, "revoked through the admin API: at once"
    # what the administrator changed is in the log, the key by its prefix only
    for msg, fields in (("admin: tenant created", {"tenant": "a"}),
                        ("admin: key created", {"tenant": "a", "key": prefix}),
                        ("admin: key revoked", {"key": prefix})):
        assert server.wait_log(lambda l: l.get("msg") == msg and
                               all(l.get(k) == v for k, v in fields.items())), msg
    assert admin(server).delete("/admin/tenants?name=a").status_code == 200
    assert server.wait_log(lambda l: l.get("msg") == "admin: tenant deleted")
    assert key[12:] not in json.dumps(server.lines)


def test_the_answer_caches_are_per_tenant(server):
    ka, kb = make_tenant(server, "a"), make_tenant(server, "b")
    line = json.dumps({"model": MODEL, "messages": [
        {"role": "user", "content": "What is the capital of France?"}],
        "answer": "Paris, for tenant a."})
    r = admin(server).post("/admin/cache/import?tenant=a", content=line)
    assert r.json()["imported"] == 1
    time.sleep(1.2)
    a, b = client(server, ka), client(server, kb)
    occ = {"Cache-Control": "only-if-cached"}
    for q in ["What is the capital of France?", "What's the capital city of France?"]:
        ra = chat(a, q, occ)
        assert ra.status_code == 200 and "tenant a" in ra.text
        rb = chat(b, q, occ)
        assert rb.status_code == 504, "tenant b never gets tenant a's answer"
        assert "tenant a" not in rb.text and '"a"' not in rb.text


def test_prefix_cache_is_not_shared_across_tenants_unless_both_share(make_server):
    server = make_server(AUTH_CONF + "[cache]\nenabled = false\n")
    ka, kb = make_tenant(server, "a"), make_tenant(server, "b")
    kc = make_tenant(server, "c", {"share_prefix_cache": True})
    kd = make_tenant(server, "d", {"share_prefix_cache": True})
    time.sleep(1.2)

    def cached(key, q):
        r = chat(client(server, key), q, system=SYSTEM, max_tokens=2, temperature=0)
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]

    cached(ka, "Hello?")
    assert cached(ka, "Do you sell gears?") > 0, "a tenant reuses its own prefix"
    assert cached(kb, "Do you sell gears?") == 0, "b must not reuse a's system prompt"
    cached(kc, "Hello?")
    assert cached(kd, "Do you sell gears?") > 0, "two tenants that share, share"


def test_keys_in_the_headers_sdks_use_and_the_access_log_names_the_tenant(server):
    """Azure's SDKs send api-key, others x-api-key, and some clients two spaces after
    Bearer: all were 401. The access log said nothing of who asked."""
    key = make_tenant(server, "a")
    body = {"model": "all-minilm-l6-v2", "input": "hello"}
    with httpx.Client(base_url=server.base_url, verify=server.ssl_context()) as c:
        for h in ({"api-key": key}, {"x-api-key": key}, {"Authorization": "Bearer  " + key}):
            r = c.post("/v1/embeddings", json=body, headers={**h, "X-Request-Id": "who-1"})
            assert r.status_code == 200, (h, r.text)
        r = c.post("/v1/embeddings", json=body, headers={"x-api-key": "cg-" + "0" * 48})
        assert r.status_code == 401 and "Incorrect API key" in r.json()["error"]["message"]
        r = c.post("/v1/embeddings", json=body, headers={"api-key": "", "x-api-key": key})
        assert r.status_code == 200, r.text
        # two different keys (a proxy added its own): neither is chosen for the client
        other = make_tenant(server, "b")
        time.sleep(1.2)
        for h in ([("Authorization", "Bearer " + key), ("x-api-key", other)],
                  [("Authorization", "Bearer " + key), ("Authorization", "Bearer " + other)]):
            r = c.post("/v1/embeddings", json=body, headers=h)
            assert r.status_code == 400, (h, r.text)
            assert r.json()["error"]["code"] == "conflicting_api_keys"
        r = c.post("/v1/embeddings", json=body,
                   headers=[("Authorization", "Bearer " + key), ("x-api-key", key)])
        assert r.status_code == 200, "the same key twice is the key"
        # a proxy's own Basic line, before the client's key or beside Azure's header
        for h in ([("Authorization", "Basic dXNlcjpwdw=="), ("Authorization", "Bearer " + key)],
                  [("Authorization", "Basic dXNlcjpwdw=="), ("api-key", key)]):
            r = c.post("/v1/embeddings", json=body, headers=h)
            assert r.status_code == 200, (h, r.text)

    def mine():
        return [l for l in server.lines
                if l.get("msg") == "request" and l.get("request_id") == "who-1"]

    server.wait_log(lambda _: len(mine()) == 3)  # the access log is written in batches
    for line in mine():
        assert line["tenant"] == "a" and line["key"] == key[:12], line
    assert key[12:] not in json.dumps(server.lines)


def test_rate_limit_429_with_retry_after_then_success(server):
    key = make_tenant(server, "a", {"requests_per_minute": 10})
    time.sleep(1.2)
    c = client(server, key)
    first = embed(c)  # OpenAI's headers, by which clients pace themselves
    assert first.headers["x-ratelimit-limit-requests"] == "10"
    assert first.headers["x-ratelimit-remaining-requests"] == "9"
    assert first.headers["x-ratelimit-reset-requests"].endswith("s")
    assert "x-ratelimit-limit-tokens" not in first.headers  # no token limit set
    codes = [embed(c).status_code for _ in range(11)]
    assert codes[:9] == [200] * 9 and 429 in codes[9:], codes
    r = embed(c)
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limit_exceeded"
    assert r.json()["error"]["type"] == "requests"  # the limit met, as OpenAI names it
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    wait = int(r.headers["Retry-After"])
    assert 1 <= wait <= 6
    time.sleep(wait + 0.1)
    assert embed(c).status_code == 200, "the window refills"
    # another tenant is not limited by a's traffic
    kb = make_tenant(server, "b")
    time.sleep(1.2)
    assert embed(client(server, kb)).status_code == 200


def burst(server, key, n):
    """n short chats sent together with the tenant's key: those answered and those
    refused with 429; no other outcome."""
    results = []

    def one():
        with client(server, key) as c:
            results.append(chat(c, "Say hi.", max_tokens=16, temperature=0,
                                headers={"Cache-Control": "no-cache, no-store"}))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [r for r in results if r.status_code == 200]
    refused = [r for r in results if r.status_code == 429]
    assert len(ok) + len(refused) == n, [r.status_code for r in results]
    return ok, refused


def test_tokens_per_minute_holds_under_a_burst(server):
    """Tokens were charged only when requests ended, so 8 requests admitted together used
    8.8 times a limit of 50 and locked the tenant out for 8 minutes. What a request may use
    (its prompt and max_tokens) is reserved when it is admitted."""
    key = make_tenant(server, "a", {"tokens_per_minute": 80})  # (each may use about 47)
    time.sleep(1.2)
    ok, refused = burst(server, key, 8)
    assert 1 <= len(ok) <= 2, len(ok)
    used = sum(r.json()["usage"]["total_tokens"] for r in ok)
    assert used <= 160, used
    assert all(r.json()["error"]["code"] == "rate_limit_exceeded" and
               r.json()["error"]["type"] == "tokens" and
               "Rate limit reached for tokens per minute" in r.text for r in refused)
    assert all(r.headers["x-ratelimit-limit-tokens"] == "80" for r in ok + refused)
    assert all(1 <= int(r.headers["Retry-After"]) <= 60 for r in refused)


def test_a_token_limited_tenants_too_long_text_is_refused_before_any_embedding(server):
    """Its texts are counted at admission: one the model cannot read whole is refused then,
    not after the embedder has read the batch (the texts embedded do not grow), and costs
    nothing of the tenant's tokens."""
    key = make_tenant(server, "a", {"tokens_per_minute": 100000})
    c = client(server, key)

    def embedded():
        line = [l for l in admin(server).get("/metrics").text.splitlines()
                if l.startswith("cachegate_embed_texts_total")]
        return float(line[0].split()[-1])

    assert embed(c, ["short", "fine"]).status_code == 200
    before = embedded()
    assert before >= 2
    r = embed(c, ["short"] * 100 + [" ".join(["word"] * 255)])
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and err["message"].startswith("input[100] ")
    assert embedded() == before
    fits = embed(c, " ".join(["word"] * 254))
    assert fits.status_code == 200 and fits.json()["usage"]["prompt_tokens"] == 254


def test_a_monthly_quota_holds_under_a_burst(server):
    """Like tokens_per_minute, the month's quota was charged only when requests ended: a
    burst admitted together ran past it by the whole burst."""
    key = make_tenant(server, "m", {"monthly_tokens": 60})
    time.sleep(1.2)
    ok, refused = burst(server, key, 6)
    assert 1 <= len(ok) <= 2, len(ok)
    assert all(r.json()["error"]["code"] == "insufficient_quota" for r in refused)


def test_a_request_that_may_use_more_than_is_left_is_refused(server):
    """A request was admitted while any allowance was left, and then spent what it asked
    for: 24 prompts used 1,190 tokens of a monthly quota of 300, an embeddings batch 13,800,
    and a chat of max_tokens 600 three minutes' worth of 200 tokens a minute. What it may
    use (its prompt's tokens, and max_tokens for each answer) must fit."""
    km = make_tenant(server, "m", {"monthly_tokens": 300})
    kt = make_tenant(server, "t", {"tokens_per_minute": 200})
    time.sleep(1.2)
    cm, ct = client(server, km), client(server, kt)
    r = cm.post("/v1/completions", json={"model": MODEL, "prompt": ["Count: 1, 2,"] * 24,
                                         "max_tokens": 40})
    assert r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota", r.text
    assert "may use up to" in r.json()["error"]["message"] and "300 left" in r.text
    r = cm.post("/v1/embeddings", json={"model": "all-minilm-l6-v2",
                                        "input": ["a few words to embed here"] * 200})
    assert r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota", r.text
    assert r.headers["x-should-retry"] == "false"
    assert embed(cm).status_code == 200  # a request that fits is served
    r = chat(ct, "Say hi.", max_tokens=600)
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limit_exceeded", r.text
    assert "Request too large" in r.text and "limit 200" in r.text
    assert r.headers["x-should-retry"] == "false"  # waiting would not help
    r = chat(ct, "Say hi.", max_tokens=8, temperature=0)
    assert r.status_code == 200, r.text
    time.sleep(1.5)  # (usage is written within a second)
    rows = admin(server).get("/admin/usage?tenant=m").json()["data"]
    assert rows[0]["requests"] == 1 and rows[0]["prompt_tokens"] == 1, rows


def test_monthly_quota_and_usage(server):
    key = make_tenant(server, "a", {"monthly_tokens": 3})
    time.sleep(1.2)
    c = client(server, key)
    assert embed(c).status_code == 200  # 1 token ("hello"; not the [CLS] and [SEP])
    assert embed(c).status_code == 200  # 2 used, 1 left
    r = embed(c, "hello world")  # 2, counted: more than is left
    assert r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota"
    assert "up to 2 tokens" in r.json()["error"]["message"] and "1 left" in r.text, r.text
    assert embed(c).status_code == 200  # the last one
    r = embed(c)
    assert r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota"
    assert r.json()["error"]["type"] == "insufficient_quota"  # as OpenAI's body says it
    assert r.headers["x-should-retry"] == "false"  # the SDKs' retries would meet the same
    assert int(r.headers["Retry-After"]) > 0
    time.sleep(1.5)  # usage is written in batches, about once a second
    rows = admin(server).get("/admin/usage?tenant=a").json()["data"]
    assert len(rows) == 1 and rows[0]["requests"] == 3 and rows[0]["prompt_tokens"] == 3
    p = subprocess.run([str(BIN), "usage", "--tenant", "a", "--data-dir", str(server.data_dir),
                        "--config", str(server.conf)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and "a " in p.stdout and " 3 " in p.stdout, p.stdout + p.stderr
    text = client(server).get("/metrics").text
    assert 'cachegate_tenant_requests_total{tenant="a",result="quota_exceeded"} 2' in text
    assert 'cachegate_tenant_requests_total{tenant="a",result="ok"} 3' in text


def test_token_limits_count_the_prompt_not_its_bytes(server):
    """A prompt's tokens were guessed as 4 bytes each: 300 digits and spaces (600 bytes, some
    610 tokens with the template) passed a monthly quota of 250 as 150 and spent 634. The
    prompt is counted once tokenized; a cache hit, which spends nothing, is still served to a
    tenant whose month is spent."""
    key = make_tenant(server, "q", {"monthly_tokens": 250})
    time.sleep(1.2)
    c = client(server, key)
    r = chat(c, "Repeat: " + "7 " * 300, max_tokens=8, temperature=0)
    assert r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota", r.text
    asked = int(re.search(r"up to (\d+) tokens", r.json()["error"]["message"]).group(1))
    assert asked > 600, r.text  # its prompt's tokens, and max_tokens
    r = chat(c, "Say hi.", max_tokens=200, temperature=0)  # stored: ends before 200
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop", r.text
    spent = r.json()["usage"]["total_tokens"]
    r = chat(c, "Name a fruit.", max_tokens=250 - spent, temperature=0)  # no room: its prompt
    assert r.status_code == 429, r.text
    policy = '{"monthly_tokens": %d}' % spent  # the month spent
    assert admin(server).put("/admin/tenants?name=q", content=policy).status_code == 200
    time.sleep(1.5)  # (the answer is stored within a second)
    r = chat(c, "Say hi.", max_tokens=200, temperature=0)
    assert r.status_code == 200 and r.headers["X-Cache"] == "HIT", r.text
    r = chat(c, "Name a fruit.", max_tokens=8, temperature=0)
    assert r.status_code == 429 and "exceeded your monthly" in r.text, r.text
    # n answers of one prompt count it once: 4 answers of 8 tokens to a prompt of some 35
    # fit in 100, which 4 prompts would not
    key = make_tenant(server, "n4", {"monthly_tokens": 100})
    time.sleep(1.2)
    r = chat(client(server, key), "Name a colour.", max_tokens=8, n=4, temperature=1)
    assert r.status_code == 200 and len(r.json()["choices"]) == 4, r.text


def test_tokens_spent_survive_a_crash(make_server):
    """Usage that spent tokens is committed as the request ends (it was batched about once a
    second): killed at once after, a restarted server counts it, and the month's quota with
    it, so a crash cannot reset what a tenant may still spend."""
    server = make_server(AUTH_CONF)
    key = make_tenant(server, "k", {"monthly_tokens": 1000000})
    c = client(server, key)
    r = chat(c, "Name a colour.", headers={"Cache-Control": "no-store"}, max_tokens=8)
    assert r.status_code == 200
    spent = r.json()["usage"]
    assert embed(c).status_code == 200  # 1 token
    time.sleep(0.1)
    server.proc.kill()
    server.proc.wait()
    again = make_server(AUTH_CONF)  # the same data directory
    rows = admin(again).get("/admin/usage?tenant=k").json()["data"]
    assert len(rows) == 1 and rows[0]["requests"] == 2, rows
    assert rows[0]["prompt_tokens"] == spent["prompt_tokens"] + 1, rows
    assert rows[0]["completion_tokens"] == spent["completion_tokens"], rows


def test_a_client_that_leaves_mid_stream_is_charged_for_what_was_generated(server):
    key = make_tenant(server, "a")
    body = {"model": MODEL, "stream": True, "max_tokens": 200, "temperature": 0,
            "messages": [{"role": "user", "content": "Write a long story about a dragon."}]}
    with client(server, key) as c:
        with c.stream("POST", "/v1/chat/completions", json=body,
                      headers={"Cache-Control": "no-store"}) as r:
            assert r.status_code == 200
            chunks = 0
            for line in r.iter_lines():
                chunks += line.startswith("data: ")
                if chunks == 12:
                    break
    deadline = time.monotonic() + 15
    rows = []
    while time.monotonic() < deadline:
        time.sleep(0.5)
        rows = admin(server).get("/admin/usage?tenant=a").json()["data"]
        if rows:
            break
    assert rows and rows[0]["requests"] == 1, rows
    assert rows[0]["prompt_tokens"] > 0 and rows[0]["completion_tokens"] >= 10, rows
    text = admin(server).get("/metrics").text
    assert 'cachegate_tenant_tokens_total{tenant="a",kind="completion"} 0' not in text
    assert 'cachegate_tenant_requests_total{tenant="a",result="cancelled"} 1' in text
    assert 'cachegate_tenant_requests_total{tenant="a",result="ok"}' not in text


def test_a_completion_of_several_prompts_is_one_request_charged_for_all(server):
    key = make_tenant(server, "a")
    r = client(server, key).post("/v1/completions", json={
        "model": MODEL, "prompt": ["Once upon a time", "The sky is", "1, 2, 3,"],
        "max_tokens": 6, "temperature": 0}, headers={"Cache-Control": "no-store"})
    assert r.status_code == 200 and len(r.json()["choices"]) == 3, r.text
    u = r.json()["usage"]
    deadline = time.monotonic() + 15
    rows = []
    while not rows and time.monotonic() < deadline:
        time.sleep(0.5)  # usage is written in batches, about once a second
        rows = admin(server).get("/admin/usage?tenant=a").json()["data"]
    assert rows and rows[0]["requests"] == 1, rows
    assert rows[0]["prompt_tokens"] == u["prompt_tokens"], (rows, u)
    assert rows[0]["completion_tokens"] == u["completion_tokens"] == 18, (rows, u)
    text = admin(server).get("/metrics").text
    assert 'cachegate_tenant_requests_total{tenant="a",result="ok"} 1' in text


def engine_running(server):
    m = re.search(r"^cachegate_engine_running_requests (\S+)$",
                  admin(server).get("/metrics").text, re.M)
    return float(m.group(1)) if m else None


def test_a_completion_of_several_prompts_keeps_to_the_tenants_concurrency(server):
    """A tenant allowed 2 concurrent requests runs 2 of its prompts at a time: while they
    run, its places are taken (another request of its is refused), the engine runs no more
    of them, and every prompt is answered."""
    key = make_tenant(server, "a", {"concurrent_requests": 2})
    time.sleep(1.2)
    body = {"model": MODEL, "prompt": ["1, 2, 3,", "a, b, c,", "10, 20,", "x, y,"],
            "max_tokens": 40, "temperature": 0, "stream": True}
    with client(server, key) as c:
        with c.stream("POST", "/v1/completions", json=body,
                      headers={"Cache-Control": "no-store"}) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            next(lines)
            other = embed(client(server, key))
            assert other.status_code == 429, other.text
            assert "concurrent" in other.json()["error"]["message"]
            running = [engine_running(server) for _ in range(5)]
            events = [json.loads(line[6:]) for line in lines
                      if line.startswith("data: {")]
    assert max(running) <= 2, running
    finished = sorted(ch["index"] for e in events for ch in e["choices"]
                      if ch["finish_reason"])
    assert finished == [0, 1, 2, 3], events[-3:]
    time.sleep(0.2)
    assert embed(client(server, key)).status_code == 200  # its places are back


def test_the_engine_takes_turns_between_tenants(make_server):
    """The engine's queue was first come, first served: one tenant's request of many prompts
    held every other tenant's behind all of them (a 4-token chat waited 19.6 s). A waiting
    request of the tenant with the fewest running now goes first: b's chat, sent while a's
    six prompts run one at a time, is answered before a's stream ends."""
    server = make_server(AUTH_CONF + "[engine]\nmax_num_seqs = 1\n")
    ka, kb = make_tenant(server, "a"), make_tenant(server, "b")
    time.sleep(1.2)
    body = {"model": MODEL, "stream": True, "max_tokens": 64, "temperature": 0,
            "prompt": [f"{i}, {i + 1}, {i + 2}," for i in range(6)],
            "logit_bias": {str(t): -100 for t in (0, 1, 2)}}  # (no early end)
    ends = []  # a's prompts that ended, as they end

    def read(lines):
        for line in lines:
            if line.startswith("data: {"):
                ends.extend(ch["index"] for ch in json.loads(line[6:])["choices"]
                            if ch["finish_reason"])

    with client(server, ka) as c:
        with c.stream("POST", "/v1/completions", json=body,
                      headers={"Cache-Control": "no-store"}) as r:
            lines = r.iter_lines()
            next(lines)  # a's first prompt runs
            reader = threading.Thread(target=read, args=(lines,))
            reader.start()
            other = chat(client(server, kb), "Say hi.", max_tokens=4, temperature=0)
            ended_before = len(ends)
            reader.join()
    assert other.status_code == 200, other.text
    assert len(ends) == 6, ends
    # a's first, and at most the one admitted before b's chat reached the engine (each of
    # a's runs 64 tokens: b's has two of them to arrive in)
    assert ended_before <= 2, ends


def test_prompts_refused_for_a_full_queue_are_not_charged(make_server):
    """A completion of several prompts the engine's queue cannot take is refused whole
    (429); the prompts queued meanwhile are cancelled, and the tenant is charged nothing
    for them. (The engine counts its queue as of its last step, so a batch sent just as
    the blocker starts may still fit: it is answered, and charged, and sent again.)"""
    server = make_server(AUTH_CONF + "[engine]\nmax_num_seqs = 1\nmax_waiting = 1\n")
    ka, kb = make_tenant(server, "a", {"requests_per_minute": 7}), make_tenant(server, "b")
    time.sleep(1.2)
    body = {"model": MODEL, "stream": True, "max_tokens": 2000, "temperature": 0,
            "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"}
    answered = []
    for _ in range(5):
        with client(server, kb) as c:
            with c.stream("POST", "/v1/completions", json=body) as blocker:
                lines = blocker.iter_lines()  # kept: a dropped iterator closes the stream
                next(lines)
                deadline = time.monotonic() + 10
                while engine_running(server) != 1 and time.monotonic() < deadline:
                    time.sleep(0.05)  # b runs: one place is left, in the queue
                r = client(server, ka).post("/v1/completions", json={
                    "model": MODEL, "prompt": ["word " * 200, "b"], "max_tokens": 8})
        assert r.status_code in (200, 429), r.text
        if r.status_code == 429:
            break
        answered.append(r.json()["usage"])
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limit_exceeded"
    # nor does it spend one of the minute's requests: the next has as many left (7 a
    # minute come back at 0.12 a second: without the refund the next would have one fewer)
    left = int(r.headers["x-ratelimit-remaining-requests"])
    deadline = time.monotonic() + 10  # (the prompts it queued are cancelled first)
    while 'cachegate_tenant_requests_total{tenant="a",result="busy"} 1' not in \
            client(server).get("/metrics").text and time.monotonic() < deadline:
        time.sleep(0.05)
    again = embed(client(server, ka))
    assert again.status_code == 200
    assert int(again.headers["x-ratelimit-remaining-requests"]) >= left, again.headers
    answered.append({"prompt_tokens": again.json()["usage"]["prompt_tokens"],
                     "completion_tokens": 0})
    # the refused request is no request of the usage table (nothing ran), only the answered
    deadline = time.monotonic() + 15
    rows = []
    while time.monotonic() < deadline:
        time.sleep(0.5)
        rows = admin(server).get("/admin/usage?tenant=a").json()["data"]
        if len(rows) == 1 and rows[0]["requests"] == len(answered):
            break
    time.sleep(1.5)  # (usage is written within a second: nothing more comes)
    rows = admin(server).get("/admin/usage?tenant=a").json()["data"]
    assert len(rows) == 1, rows
    assert rows[0]["requests"] == len(answered), rows
    assert rows[0]["prompt_tokens"] == sum(u["prompt_tokens"] for u in answered), rows
    assert rows[0]["completion_tokens"] == sum(u["completion_tokens"] for u in answered), rows
    text = client(server).get("/metrics").text
    assert 'cachegate_tenant_requests_total{tenant="a",result="busy"} 1' in text


def test_a_limit_set_on_a_tenant_in_use_starts_with_its_whole_allowance(server):
    key = make_tenant(server, "a")
    c = client(server, key)
    assert [embed(c).status_code for _ in range(3)] == [200] * 3
    r = admin(server).put("/admin/tenants?name=a", content='{"requests_per_minute": 60}')
    assert r.status_code == 200
    assert [embed(c).status_code for _ in range(5)] == [200] * 5


def test_a_limit_raised_adds_to_what_is_left(server):
    """Raising the limit of a tenant that used it up (what an operator does in an incident)
    kept it throttled: the old bucket only refilled at the new rate, while the headers said
    the new limit. What it used this minute stays used; the rest of the new limit is left."""
    key = make_tenant(server, "a", {"requests_per_minute": 2, "tokens_per_minute": 100})
    time.sleep(1.2)
    c = client(server, key)
    assert [embed(c).status_code for _ in range(3)] == [200, 200, 429]
    r = admin(server).put("/admin/tenants?name=a",
                          content='{"requests_per_minute": 100, "tokens_per_minute": 100000}')
    assert r.status_code == 200
    r = embed(c)
    assert r.status_code == 200, r.text
    assert r.headers["x-ratelimit-limit-requests"] == "100"
    assert 96 <= int(r.headers["x-ratelimit-remaining-requests"]) <= 98
    assert int(r.headers["x-ratelimit-remaining-tokens"]) > 99000
    assert [embed(c).status_code for _ in range(5)] == [200] * 5
    # lowered, what is left is capped at the new limit
    r = admin(server).put("/admin/tenants?name=a", content='{"requests_per_minute": 3}')
    codes = [embed(c).status_code for _ in range(4)]
    assert codes[:3] == [200] * 3 and codes[3] == 429, codes


def test_a_short_admin_key_is_warned_of(make_server):
    """`admin_key = x` started without a word, and nothing slows guesses at it."""
    server = make_server("[tenants]\nauth = on\nadmin_key = x7\n")
    line = server.wait_log(lambda l: "admin_key" in l.get("msg", ""), timeout=5)
    assert line and line["level"] == "warn" and "2 bytes" in line["msg"], line
    server.stop()
    assert not make_server(AUTH_CONF).wait_log(lambda l: "admin_key" in l.get("msg", ""),
                                               timeout=1)


def test_policies_are_checked_whole(server):
    a = admin(server)
    for policy, says in (({"requests_per_minute": 0.5}, "whole number"),
                         ({"concurrent_requests": 1.5}, "whole number"),
                         ({"models": []}, "at least one model"),
                         ("{}", "JSON object")):
        r = a.post("/admin/tenants", json={"name": "p", "policy": policy})
        assert r.status_code == 400 and says in r.json()["error"]["message"], r.text
        assert r.json()["error"]["param"] == "policy"
    r = a.put("/admin/tenants?name=default", content='{"tokens_per_minute": 2.5}')
    assert r.status_code == 400 and "whole number" in r.text
    p = subprocess.run([str(BIN), "tenant", "create", "q", '{"requests_per_minute": 0.5}',
                        "--data-dir", str(server.data_dir), "--config", str(server.conf)],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and "whole number" in p.stderr
    assert a.post("/admin/tenants", json={"name": "p", "policy": None}).status_code == 201
    r = a.post("/admin/tenants", json={"name": "other"})
    assert r.status_code == 400, "other is the metrics' label of the tenants past the limit"
    assert "The name other is reserved" in r.json()["error"]["message"]
    for name in ("-rf", ".", ".."):  # (the CLI would read "-rf" as an option)
        r = a.post("/admin/tenants", json={"name": name})
        assert r.status_code == 400 and "starting with '-'" in r.text, (name, r.text)
    # a key given twice: which would hold is the JSON reader's choice
    r = a.put("/admin/tenants?name=p",
              content='{"requests_per_minute": 1, "requests_per_minute": 5}')
    assert r.status_code == 400 and "duplicate" in r.json()["error"]["message"], r.text
    # (as on every admin route: "tenant" twice named two tenants and made the key the last's)
    for path, body in (("/admin/tenants", '{"name": "p2", "policy": {"requests_per_minute": '
                        '1, "requests_per_minute": 5}}'),
                       ("/admin/keys", '{"tenant": "p", "tenant": "missing"}')):
        r = a.post(path, content=body)
        assert r.status_code == 400 and "duplicate" in r.json()["error"]["message"], r.text
    assert a.get("/admin/tenants?name=p2").status_code == 404
    # a misspelt query parameter read every tenant's usage; a repeated one took the first
    for path, param in (("/admin/usage?tennant=p", "tennant"), ("/admin/keys?tenant=p&x=1", "x"),
                        ("/admin/tenants?name=p&name=q", "name")):
        r = a.get(path)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = a.delete("/admin/tenants?name=p&name=q")
    assert r.status_code == 400 and a.get("/admin/tenants?name=p").status_code == 200
    # every admin listing is an OpenAI list, as /admin/cache's is
    for path in ("/admin/tenants", "/admin/keys?tenant=p", "/admin/usage"):
        assert a.get(path).json()["object"] == "list", path
    # a policy is stored as read: 1e3 was echoed 1000.0, 0.97 as 0.96999999999999997
    r = a.put("/admin/tenants?name=p",
              content='{"requests_per_minute": 1e3, "ttl_s": 5.0, "similarity_threshold": 0.97}')
    assert r.status_code == 200, r.text
    assert '"requests_per_minute":1000' in r.text.replace(" ", "") and "0.97" in r.text, r.text
    assert "1000.0" not in r.text and "0.9699" not in r.text and "5.0" not in r.text, r.text
    # a key has no settings: a field sent for one is refused, not lost
    r = a.post("/admin/keys", json={"tenant": "p", "expires": "2027-01-01"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "expires", r.text


def test_a_stored_policy_now_refused_gives_the_defaults_not_none(make_server):
    """A policy an older version stored and this one refuses ({"requests_per_minute": 0.5})
    leaves the tenant on the configured defaults, said in the log; it used to leave every
    field 0: no limits, threshold 0, every model."""
    conf = AUTH_CONF + "requests_per_minute = 3\n"
    server = make_server(conf)
    key = make_tenant(server, "old")
    server.stop()
    db = sqlite3.connect(server.data_dir / "cachegate.db")
    db.execute("UPDATE tenants SET policy = ? WHERE name = 'old'",
               ('{"requests_per_minute": 0.5, "models": []}',))
    db.commit()
    db.close()
    server = make_server(conf)
    assert server.wait_log(lambda l: l.get("msg", "").startswith("tenant policy refused") and
                           l.get("tenant") == "old", timeout=5)
    c = client(server, key)
    codes = [embed(c).status_code for _ in range(5)]
    assert codes[:3] == [200] * 3 and codes[3:] == [429] * 2, codes


def test_admin_key_failures_are_counted_and_whole_keys_stay_out_of_urls(server):
    def failures():
        for l in client(server).get("/metrics").text.splitlines():
            if l.startswith("cachegate_auth_failures_total"):
                return float(l.split()[-1])
        return None

    assert failures() == 0, "the series exists from the start"
    for h in ({}, {"Authorization": "Bearer guess"}):
        assert client(server).get("/admin/tenants", headers=h).status_code == 401
    assert failures() == 2
    key = make_tenant(server, "a")
    r = admin(server).delete(f"/admin/keys?prefix={key}")
    assert r.status_code == 400 and "prefix" in r.json()["error"]["message"]
    assert embed(client(server, key)).status_code == 200
    assert admin(server).delete(f"/admin/keys?prefix={key[:12]}").status_code == 200


def test_cache_hits_count_as_requests_with_tokens_saved(server):
    key = make_tenant(server, "a")
    line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}],
                       "answer": "Hi there, friend."})
    admin(server).post("/admin/cache/import?tenant=a", content=line)
    time.sleep(1.2)
    r = chat(client(server, key), "Say hi.", {"Cache-Control": "only-if-cached"})
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "exact"
    time.sleep(1.5)
    row = admin(server).get("/admin/usage?tenant=a").json()["data"][0]
    assert row["requests"] == 1 and row["exact_hits"] == 1 and row["tokens_saved"] > 0
    assert row["completion_tokens"] == 0


def test_an_error_after_admission_counts_as_an_error_not_ok(server):
    key = make_tenant(server, "a")
    time.sleep(1.2)
    c = client(server, key)
    # only-if-cached on an empty cache: admitted, then 504 without running the engine
    r = chat(c, "What is the tallest mountain?", {"Cache-Control": "only-if-cached"})
    assert r.status_code == 504 and r.json()["error"]["code"] == "cache_miss"
    text = client(server).get("/metrics").text
    assert 'cachegate_tenant_requests_total{tenant="a",result="error"} 1' in text
    assert "cachegate_cache_only_if_cached_misses_total 1" in text  # for the 5xx alert
    assert 'cachegate_tenant_requests_total{tenant="a",result="ok"}' not in text


def test_allowed_models_policy(server):
    """A tenant's "models" policy holds on every route that names a model: chat,
    embeddings, and the model list, which shows only those it may use."""
    r = admin(server).post("/admin/tenants", json={"name": "x",
                                                   "policy": {"models": ["some-other-model"]}})
    assert r.status_code == 400 and "does not serve" in r.json()["error"]["message"]
    key = make_tenant(server, "a", {"models": ["all-minilm-l6-v2"]})
    only_chat = make_tenant(server, "b", {"models": ["smollm2-135m-instruct"]})
    time.sleep(1.2)
    c = client(server, key)
    r = chat(c, "hi")
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    assert embed(c).status_code == 200
    assert [m["id"] for m in c.get("/v1/models").json()["data"]] == ["all-minilm-l6-v2"]
    assert c.get("/v1/models/smollm2-135m-instruct").status_code == 404
    b = client(server, only_chat)
    assert [m["id"] for m in b.get("/v1/models").json()["data"]] == ["smollm2-135m-instruct"]
    assert b.get("/v1/models/smollm2-135m-instruct").status_code == 200
    assert embed(b).status_code == 404
    # a model it may not use, or one that does not exist: the server's models go unnamed
    for r, asked in ((chat(c, "hi"), "smollm2"),
                     (b.post("/v1/chat/completions", json={
                         "model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}),
                      "gpt-4"),
                     (embed(b), "minilm"),
                     (c.post("/v1/embeddings", json={"model": "gpt-4", "input": "x"}), "gpt-4")):
        msg = r.json()["error"]["message"]
        assert r.status_code == 404, msg
        assert not [m for m in ("smollm2", "minilm") if m != asked and m in msg], msg


def test_keys_are_stored_hashed_and_never_logged(server):
    key = make_tenant(server, "a")
    time.sleep(1.2)
    assert embed(client(server, key)).status_code == 200
    assert embed(client(server, key + "x")).status_code == 401
    server.stop()
    blob = b"".join(p.read_bytes() for p in server.data_dir.rglob("*") if p.is_file())
    assert key.encode() not in blob and key[12:].encode() not in blob
    logs = json.dumps(server.lines)
    assert key not in logs and key[12:] not in logs


def test_cli_manages_tenants_and_keys_beside_a_running_server(server):
    def cli(*args):
        return subprocess.run([str(BIN), *args, "--data-dir", str(server.data_dir), "--config",
                               str(server.conf)], cwd=ROOT, capture_output=True, text=True)

    assert cli("tenant", "create", "cli-t", '{"requests_per_minute": 100}').returncode == 0
    assert cli("tenant", "create", "cli-t").returncode == 1, "names are unique"
    # a bad argument is a usage error (2); a name taken is a failure (1)
    assert cli("tenant", "create", "bad", '{"nonsense": 1}').returncode == 2
    assert cli("tenant", "create", "a b").returncode == 2
    p = cli("tenant", "create", "other")
    assert p.returncode == 2 and "the name other is reserved" in p.stderr, p.stderr
    assert cli("tenant", "set", "cli-t", "notjson").returncode == 2
    # an empty policy (an unset shell variable) would have erased every limit
    p = cli("tenant", "set", "cli-t", "")
    assert p.returncode == 2 and "give {}" in p.stderr, p.stderr
    p = cli("tenant", "set", "cli-t", '{"ttl_s": 5,}')
    assert p.returncode == 2 and "not valid JSON" in p.stderr, p.stderr
    p = cli("tenant", "set", "cli-t", '{"ttl_s": 5, "ttl_s": 9}')
    assert p.returncode == 2 and "duplicate" in p.stderr, p.stderr
    assert '"requests_per_minute":100' in cli("tenant", "list").stdout.replace(" ", "")
    assert cli("tenant", "set", "cli-t", '{"models": ["gpt-4"]}').returncode == 2
    p = cli("key", "create", "cli-t")
    key = p.stdout.strip()
    assert p.returncode == 0 and key.startswith("cg-") and len(key) == 51
    time.sleep(1.2)
    assert embed(client(server, key)).status_code == 200
    listed = cli("key", "list", "cli-t").stdout
    assert key[:12] in listed and key not in listed
    assert "cli-t" in cli("tenant", "list").stdout
    # a key that cannot be written out is nobody's: revoked, and a failure
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(BIN), "key", "create", "cli-t", "--data-dir",
                            str(server.data_dir), "--config", str(server.conf)], cwd=ROOT,
                           stdout=full, stderr=subprocess.PIPE, text=True)
        assert p.returncode == 1 and "was revoked" in p.stderr, p.stderr
        p = subprocess.run([str(BIN), "tenant", "list", "--data-dir", str(server.data_dir),
                            "--config", str(server.conf)], cwd=ROOT, stdout=full,
                           stderr=subprocess.PIPE, text=True)
        assert p.returncode == 1 and "cannot write the output" in p.stderr, p.stderr
    live = [l for l in cli("key", "list", "cli-t").stdout.splitlines()[1:] if l.endswith("-")]
    assert len(live) == 1 and live[0].startswith(key[:12]), live
    # a whole key must be the key: another of the same prefix revokes nothing
    p = cli("key", "revoke", key[:12] + "0" * 39)
    assert p.returncode == 1 and "no live key" in p.stderr, p.stderr
    p = cli("key", "revoke", key)  # the whole key, or its prefix
    assert p.returncode == 0 and key[:12] in p.stdout and key not in p.stdout
    time.sleep(1.2)
    assert embed(client(server, key)).status_code == 401
    line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi?"}],
                       "answer": "Hello."})
    assert admin(server).post("/admin/cache/import?tenant=cli-t", content=line).status_code == 200

    def entries():
        text = admin(server).get("/metrics").text
        return [l for l in text.splitlines()
                if l.startswith('cachegate_cache_entries{tenant="cli-t"}')]

    time.sleep(1.2)
    assert entries() == ['cachegate_cache_entries{tenant="cli-t"} 1']
    assert cli("tenant", "delete", "cli-t").returncode == 0
    assert "cli-t" not in cli("tenant", "list").stdout
    time.sleep(1.2)  # the server's metrics follow the deletion another process made
    assert entries() in ([], ['cachegate_cache_entries{tenant="cli-t"} 0'])


def test_admin_tenant_inputs_that_would_lose_a_policy_are_refused(server):
    a = admin(server)
    assert a.post("/admin/tenants", json={"name": "pol", "policy": {
        "requests_per_minute": 5}}).status_code == 201
    r = a.put("/admin/tenants?name=pol", content=b"")  # curl -X PUT without -d
    assert r.status_code == 400 and r.json()["error"]["param"] == "policy", r.text
    r = a.post("/admin/tenants", json={"name": "pol2", "ttl_s": 60})  # beside name, not in
    assert r.status_code == 400 and "ttl_s" in r.json()["error"]["message"], r.text
    r = a.get("/admin/tenants?name=pol")
    assert r.status_code == 200 and [t["name"] for t in r.json()["data"]] == ["pol"]
    assert r.json()["data"][0]["policy"] == {"requests_per_minute": 5}
    r = a.get("/admin/tenants?name=nobody")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    # a NUL decoded in a name would cut it there: "pol%00x" deleted "pol"
    r = a.delete("/admin/tenants?name=pol%00x")
    assert r.status_code == 400 and "NUL" in r.json()["error"]["message"], r.text
    assert a.get("/admin/cache?tenant=pol%00x").status_code == 400
    assert a.get("/admin/tenants?name=pol").status_code == 200


def test_cli_reads_refuse_a_directory_without_a_database(tmp_path, server):
    typo = tmp_path / "no-such-dir"
    for args in (("tenant", "list"), ("key", "list", "default"), ("usage",)):
        p = subprocess.run([str(BIN), *args, "--data-dir", str(typo)], cwd=ROOT,
                           capture_output=True, text=True)
        assert p.returncode == 1 and "holds no database" in p.stderr, p.stderr
    p = subprocess.run([str(BIN), "tenant", "frobnicate", "--data-dir", str(typo)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert not typo.exists()
    # a command missing its operands (or given too many) is a usage error before any file
    # is made: `tenant create` without a NAME made the database, then said its usage
    for args in (("tenant", "create"), ("tenant", "set", "x"), ("tenant", "list", "x"),
                 ("key", "list"), ("key", "create", "a", "b"), ("usage", "x")):
        p = subprocess.run([str(BIN), *args, "--data-dir", str(typo)], cwd=ROOT,
                           capture_output=True, text=True)
        assert p.returncode == 2 and "usage: cachegate " + args[0] in p.stderr, (args, p.stderr)
        assert not typo.exists(), args
    # with --data-dir, an administrator's command runs outside the installation directory
    p = subprocess.run([str(BIN), "tenant", "list", "--data-dir", str(server.data_dir)],
                       cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0 and "default" in p.stdout, p.stderr
    p = subprocess.run([str(BIN), "usage", "--since", "garbage", "--data-dir",
                        str(server.data_dir), "--config", str(server.conf)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "YYYY-MM-DD" in p.stderr
    # --since missing its day takes the next option: a usage error, before any file is read
    p = subprocess.run([str(BIN), "usage", "--since", "--data-dir", str(typo)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "YYYY-MM-DD" in p.stderr, p.stderr
    r = admin(server).get("/admin/usage?since=2026-13-01")
    assert r.status_code == 400 and r.json()["error"]["param"] == "since"
    assert admin(server).get("/admin/usage?since=2026-02-28").status_code == 200


def test_cli_option_errors_name_the_command(tmp_path):
    for args, name in ((["tenant", "list", "--bogus"], "cachegate tenant list"),
                       (["cache", "import", "--bogus"], "cachegate cache import"),
                       (["generate", "--bogus"], "cachegate generate"),
                       (["usage", "--bogus"], "cachegate usage")):
        p = subprocess.run([str(BIN), *args], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 2, args
        assert p.stderr.startswith(f"{name}: unrecognized option '--bogus'"), p.stderr


def test_tenants_past_the_label_limit_share_other_in_every_family(make_server):
    server = make_server(AUTH_CONF + "metrics_max_tenants = 1\n")  # "default" has the one
    keys = {name: make_tenant(server, name) for name in ("ta", "tb")}
    for name in keys:
        line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi?"}],
                           "answer": "Hello."})
        r = admin(server).post(f"/admin/cache/import?tenant={name}", content=line)
        assert r.status_code == 200
    time.sleep(1.2)
    assert embed(client(server, keys["ta"])).status_code == 200
    text = admin(server).get("/metrics").text
    assert 'cachegate_cache_entries{tenant="other"} 2' in text
    assert 'cachegate_tenant_requests_total{tenant="other",result="ok"} 1' in text
    assert 'tenant="ta"' not in text and 'tenant="tb"' not in text


def test_metric_labels_go_to_the_oldest_tenants_and_follow_deletions(make_server):
    server = make_server(AUTH_CONF + "metrics_max_tenants = 3\n")  # default, then two
    a = admin(server)
    keys = {}
    for name in ("zed", "amy", "bob"):  # created in that order; names sort otherwise
        keys[name] = make_tenant(server, name)

    def labels():
        for name in keys:
            assert embed(client(server, keys[name])).status_code == 200
        text = a.get("/metrics").text
        return {l.split('"')[1] for l in text.splitlines()
                if l.startswith("cachegate_tenant_requests_total{")}

    assert labels() == {"zed", "amy", "other"}
    server.stop()
    server = make_server(AUTH_CONF + "metrics_max_tenants = 3\n")  # the same data dir
    a = admin(server)
    assert labels() == {"zed", "amy", "other"}, "the same after a restart"
    assert a.delete("/admin/tenants?name=zed").status_code == 200
    del keys["zed"]
    assert labels() >= {"amy", "bob"}, "zed's label went to the next in line"


def test_a_deleted_tenants_series_leave_the_metrics(make_server):
    """Tenants made and deleted do not grow /metrics past metrics_max_tenants (each freed
    its label for the next, its series stayed); one made again under the name starts from
    0."""
    server = make_server(AUTH_CONF + "metrics_max_tenants = 2\n")  # default, then one
    a = admin(server)
    line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi?"}],
                       "answer": "Hello."})
    for name in ("eph1", "eph2", "eph1"):
        key = make_tenant(server, name)
        assert a.post(f"/admin/cache/import?tenant={name}", content=line).status_code == 200
        assert embed(client(server, key)).status_code == 200
        text = a.get("/metrics").text
        assert f'cachegate_tenant_requests_total{{tenant="{name}",result="ok"}} 1' in text
        assert a.delete(f"/admin/tenants?name={name}").status_code == 200
        time.sleep(1.2)  # (the tenants are read again once a second)
        text = a.get("/metrics").text
        assert f'tenant="{name}"' not in text, text
        assert 'tenant="other"' not in text
    # deleted and made again by the CLI within the second the server rereads tenants in:
    # the old series went on counting under the new tenant
    key = make_tenant(server, "eph3")
    assert embed(client(server, key)).status_code == 200

    def cli(*args):
        p = subprocess.run([str(BIN), *args, "--data-dir", str(server.data_dir), "--config",
                            str(server.conf)], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    cli("tenant", "delete", "eph3")
    cli("tenant", "create", "eph3")
    key = cli("key", "create", "eph3")
    time.sleep(1.2)
    assert embed(client(server, key)).status_code == 200
    text = a.get("/metrics").text
    assert 'cachegate_tenant_requests_total{tenant="eph3",result="ok"} 1' in text, text


def test_cache_metrics_follow_any_number_of_tenants_and_their_churn(make_server):
    server = make_server(AUTH_CONF + "metrics_max_tenants = 200\n")
    a = admin(server)
    line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi?"}],
                       "answer": "Hello."})
    names = [f"t{i:03d}" for i in range(80)]
    for name in names:
        assert a.post("/admin/tenants", json={"name": name}).status_code == 201
        assert a.post(f"/admin/cache/import?tenant={name}", content=line).status_code == 200
    time.sleep(1.5)
    text = a.get("/metrics").text
    for name in names:  # every tenant's gauge, not the first 64
        assert f'cachegate_cache_entries{{tenant="{name}"}} 1' in text, name

    def expired():
        for l in a.get("/metrics").text.splitlines():
            if l.startswith('cachegate_cache_evictions_total{reason="expired"}'):
                return float(l.split()[-1])
        return 0.0

    for name in names:
        assert a.delete(f"/admin/tenants?name={name}").status_code in (200, 204)
    time.sleep(1.5)
    text = a.get("/metrics").text
    assert 'cachegate_cache_entries{tenant="t079"} 1' not in text
    before = expired()
    # a tenant made after that churn still has its expiries counted
    assert a.post("/admin/tenants", json={"name": "late", "policy": {"ttl_s": 1}}).status_code \
        == 201
    assert a.post("/admin/cache/import?tenant=late", content=line).status_code == 200
    deadline = time.monotonic() + 15
    while expired() < before + 1 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert expired() == before + 1


def test_metrics_may_ask_for_the_admin_key(make_server, tmp_path):
    """/metrics names every tenant and its traffic; tenants.metrics_auth keeps it to the
    holder of the admin key."""
    server = make_server(AUTH_CONF + "metrics_auth = true\n")
    key = make_tenant(server, "a")
    r = client(server).get("/metrics")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert client(server, key).get("/metrics").status_code == 401  # a tenant's key is not it
    r = admin(server).get("/metrics")
    assert r.status_code == 200 and "cachegate_auth_failures_total 2" in r.text, r.text
    conf = tmp_path / "c.conf"
    conf.write_text("[tenants]\nmetrics_auth = true\n")
    p = subprocess.run([str(BIN), "serve", "--config", str(conf), "--listen", "127.0.0.1:0",
                        "--data-dir", str(tmp_path / "d")], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "admin_key is empty" in p.stderr, p.stderr


def test_auth_off_on_a_non_loopback_listener_refuses_to_start(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("[tenants]\nauth = off\n")
    p = subprocess.run([str(BIN), "serve", "--config", str(conf), "--listen", "0.0.0.0:0",
                        "--data-dir", str(tmp_path / "data"), "--device", "cpu"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2  # a configuration error, named before the models load
    assert "tenants.auth = off is allowed only on a loopback listener" in p.stderr
    assert "engine ready" not in p.stderr
    # an address this host does not have: refused as above with auth off (it crashed
    # there once), a plain failure to listen with auth on
    for auth, rc, says in (("off", 2, "loopback listener"), ("on", 1, "cannot listen on")):
        conf.write_text(f"[tenants]\nauth = {auth}\n")
        p = subprocess.run([str(BIN), "serve", "--config", str(conf), "--listen",
                            "192.0.2.1:0", "--data-dir", str(tmp_path / "data"),
                            "--device", "cpu"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == rc and says in p.stderr, p.stderr[-500:]
