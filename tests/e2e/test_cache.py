"""End-to-end tests of the exact and semantic answer caches with the real binary and models:
misses and hits, paraphrases and hard negatives, streamed replays through the openai SDK,
Cache-Control, imports (HTTP and CLI), deletion, metrics, and durability across kill -9."""

import array
import fcntl
import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import termios
import time

import httpx
import openai
import pytest

from conftest import BIN, PROMTOOL, ROOT

MODEL = "smollm2-135m-instruct"
ADMIN = "test-admin-key"
CONF = f"[tenants]\nadmin_key = {ADMIN}\n"


def client(server):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120)


def chat(c, content, headers=None, **kw):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], **kw}
    return c.post("/v1/chat/completions", json=body, headers=headers or {})


def only_if_cached(c, content, **kw):
    return chat(c, content, {"Cache-Control": "only-if-cached"}, **kw)


def import_lines(c, entries, tenant=None):
    body = "\n".join(json.dumps({"model": MODEL, "messages": [{"role": "user", "content": q}],
                                 "answer": a}) for q, a in entries)
    r = c.post("/admin/cache/import" + (f"?tenant={tenant}" if tenant else ""), content=body,
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200, r.text
    return r.json()


def wait_cached(c, content, timeout=15, **kw):
    """Answers are stored after their response: wait until the cache has it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = only_if_cached(c, content, **kw)
        if r.status_code == 200:
            return r
        time.sleep(0.1)
    raise AssertionError(f"never cached: {content!r}")


@pytest.fixture
def server(make_server):
    return make_server(CONF)


def test_miss_then_exact_hit(server):
    c = client(server)
    q = "What is the capital of France?"
    r = chat(c, q, max_tokens=100, temperature=0)
    assert r.status_code == 200 and r.headers["X-Cache"] == "MISS"
    live = r.json()
    assert live["choices"][0]["finish_reason"] == "stop"
    wait_cached(c, q, max_tokens=100, temperature=0)
    r = chat(c, q, max_tokens=100, temperature=0)
    assert r.headers["X-Cache"] == "HIT" and r.headers["X-Cache-Kind"] == "exact"
    assert float(r.headers["X-Cache-Similarity"]) == 1.0
    hit = r.json()
    assert hit["choices"][0]["message"]["content"] == live["choices"][0]["message"]["content"]
    assert hit["usage"]["completion_tokens"] == live["usage"]["completion_tokens"]
    assert hit["id"] != live["id"]
    # white space and Unicode form do not change the exact key
    r = chat(c, "  What is the capital   of France? ", max_tokens=100, temperature=0)
    assert r.headers["X-Cache-Kind"] == "exact"
    # a different sampling parameter is a different partition
    r = only_if_cached(c, q, max_tokens=100, temperature=0.7)
    assert r.status_code == 504
    r = only_if_cached(c, q, max_tokens=100)  # temperature 1, the default
    assert r.status_code == 504


def test_a_participants_name_is_read_by_the_model_and_keys_the_caches(server):
    """A message's name (OpenAI's participant name) was dropped: the model never saw it, and
    "What is my name?" asked as bob was answered from alice's entry."""
    c = client(server)

    def ask(name, headers=None):
        user = {"role": "user", "content": "What is my name?", **({"name": name} if name else {})}
        return c.post("/v1/chat/completions", headers=headers or {},
                      json={"model": MODEL, "messages": [user], "max_tokens": 16,
                            "temperature": 0})

    plain = ask(None, {"Cache-Control": "no-store"})
    r = ask("alice", {"Cache-Control": "no-store"})
    assert r.status_code == 200 and r.headers["X-Cache"] == "MISS"
    assert r.json()["usage"]["prompt_tokens"] > plain.json()["usage"]["prompt_tokens"]
    line = {"model": MODEL, "answer": "You are Alice.", "temperature": 0, "max_tokens": 16,
            "messages": [{"role": "user", "content": "What is my name?", "name": "alice"}]}
    r = c.post("/admin/cache/import", content=json.dumps(line),
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.json()["imported"] == 1, r.text
    r = ask("alice", {"Cache-Control": "only-if-cached"})
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "exact", r.headers
    r = ask("bob", {"Cache-Control": "only-if-cached"})
    assert r.status_code == 504, r.headers
    assert ask(None, {"Cache-Control": "only-if-cached"}).status_code == 504
    # nor does an answer to the question without a name serve it with one (semantically
    # the two were 0.89 alike): the name is part of the partition
    line["messages"] = [{"role": "user", "content": "Which fruit is yellow and curved?"}]
    line["answer"] = "The banana."
    r = c.post("/admin/cache/import", content=json.dumps(line),
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.json()["imported"] == 1, r.text
    for name in ("dave", None):
        user = {"role": "user", "content": "Which fruit is yellow and curved?",
                **({"name": name} if name else {})}
        r = c.post("/v1/chat/completions", headers={"Cache-Control": "only-if-cached"},
                   json={"model": MODEL, "messages": [user], "max_tokens": 16,
                         "temperature": 0})
        assert r.status_code == (504 if name else 200), (name, r.headers)
    r = c.post("/v1/chat/completions", json={"model": MODEL, "messages": [
        {"role": "user", "content": "Hi", "name": 7}]})
    assert r.status_code == 400 and "name must be a string" in r.text


def test_spaces_within_quotes_are_part_of_the_question(server):
    """The exact key collapsed white space everywhere: the answer to how many spaces 'a   b'
    holds was served for 'a b'. Within quotes the spaces are kept; elsewhere a doubled space
    is still the same question."""
    c = client(server)
    import_lines(c, [("How many spaces are in the string 'a   b'?", "3"),
                     ("What does \"x\ty\".split() return in Python?", "['x', 'y']")])
    assert only_if_cached(c, "How many spaces are in the string 'a b'?").status_code == 504
    assert only_if_cached(c, "What does \"x y\".split() return in Python?").status_code == 504
    r = only_if_cached(c, "How  many spaces are in the string 'a   b'? ")
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "exact", r.headers


def test_the_same_request_in_flight_is_answered_once(server):
    """Identical requests that came while the first ran each ran the engine again; they now
    wait for its answer (X-Cache-Kind: coalesced), as they would find it in the cache had
    they come a little later. A stream, or a request asking for a fresh answer, runs."""
    q = "Describe the water cycle."
    body = {"model": MODEL, "messages": [{"role": "user", "content": q}], "temperature": 0,
            "max_tokens": 400}
    results = {}

    def ask(i, headers=None, b=None):
        with client(server) as c:
            results[i] = c.post("/v1/chat/completions", json=b or body, headers=headers or {})

    with client(server) as c:
        with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
            assert r.headers["X-Cache"] == "MISS"
            lines = r.iter_lines()
            first = next(l for l in lines if l.startswith("data: "))  # it runs
            threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
            threads.append(threading.Thread(target=ask, args=(3, {"Cache-Control": "no-cache"})))
            for t in threads:
                t.start()
            chunks = [json.loads(first[6:])] + [json.loads(l[6:]) for l in lines
                                                 if l.startswith("data: {")]
    for t in threads:
        t.join()
    text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks
                   if ch["choices"])
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop", "the leader's answer is whole"
    for i in range(3):
        r = results[i]
        assert r.status_code == 200, r.text
        assert r.headers["X-Cache"] == "HIT" and r.headers["X-Cache-Kind"] == "coalesced", \
            r.headers
        assert "X-Cache-Entry" not in r.headers  # (being written)
        assert r.json()["choices"][0]["message"]["content"] == text
        assert r.json()["choices"][0]["finish_reason"] == "stop"
    assert results[3].headers["X-Cache"] == "MISS", "no-cache asks for a fresh answer"
    assert results[3].json()["choices"][0]["message"]["content"] == text  # (greedy)
    with client(server) as c:
        metrics = c.get("/metrics").text
    saved = results[0].json()["usage"]["completion_tokens"] * 3
    assert "cachegate_cache_coalesced_total 3\n" in metrics
    assert f'cachegate_cache_tokens_saved_total{{kind="coalesced"}} {saved}\n' in metrics
    # an answer cut at max_tokens is the answer of the same request with that max_tokens,
    # not of one allowed more (which runs on its own)
    cut = {**body, "max_tokens": 120,
           "messages": [{"role": "user", "content": "Explain photosynthesis in detail."}]}
    more = {**cut, "max_tokens": 400}
    with client(server) as c:
        with c.stream("POST", "/v1/chat/completions", json={**cut, "stream": True}) as r:
            lines = r.iter_lines()
            next(l for l in lines if l.startswith("data: "))
            threads = [threading.Thread(target=ask, args=(i, None, cut)) for i in range(2)]
            threads.append(threading.Thread(target=ask, args=(2, None, more)))
            for t in threads:
                t.start()
            last = [json.loads(l[6:]) for l in lines if l.startswith("data: {")][-1]
    for t in threads:
        t.join()
    assert last["choices"][0]["finish_reason"] == "length"
    for i in range(2):
        assert results[i].headers["X-Cache-Kind"] == "coalesced", results[i].headers
        assert results[i].json()["choices"][0]["finish_reason"] == "length"
        assert results[i].json()["usage"]["completion_tokens"] == 120
    assert results[2].headers["X-Cache"] == "MISS"
    assert results[2].json()["usage"]["completion_tokens"] > 120


def test_requests_waiting_for_one_that_is_cancelled_run_on_their_own(server):
    """The first request's client leaves: those waiting for its answer run themselves (one
    leads again, the other waits for it); one that leaves while waiting is let go."""
    body = {"model": MODEL, "temperature": 0, "max_tokens": 400,
            "messages": [{"role": "user", "content": "Describe the water cycle."}]}
    results = {}

    def ask(i, timeout=120):
        try:
            with httpx.Client(base_url=server.base_url, verify=server.ssl_context(),
                              timeout=timeout) as c:
                results[i] = c.post("/v1/chat/completions", json=body)
        except httpx.TimeoutException:
            results[i] = None

    c = client(server)
    with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
        next(l for l in r.iter_lines() if l.startswith("data: "))
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        threads.append(threading.Thread(target=ask, args=(2, 0.5)))  # leaves while waiting
        for t in threads:
            t.start()
        time.sleep(1.0)
    c.close()  # the first client leaves mid-answer
    for t in threads:
        t.join()
    assert results[2] is None
    texts = [results[i].json()["choices"][0]["message"]["content"] for i in range(2)]
    assert all(results[i].status_code == 200 for i in range(2))
    assert texts[0] == texts[1] and texts[0]
    assert {results[i].headers["X-Cache"] for i in range(2)} <= {"MISS", "HIT"}
    with client(server) as c2:  # and the server goes on
        assert c2.get("/health").status_code == 200


def test_requests_waiting_for_one_that_times_out_get_its_504(make_server):
    server = make_server(CONF + "[engine]\nrequest_timeout_ms = 1500\n")
    body = {"model": MODEL, "temperature": 0, "max_tokens": 2000,
            "logit_bias": {"2": -100},  # (no end: it runs past the timeout)
            "messages": [{"role": "user", "content": "Explain photosynthesis in detail."}]}
    results = {}

    def ask(i):
        with client(server) as c:
            t0 = time.monotonic()
            results[i] = (c.post("/v1/chat/completions", json=body), time.monotonic() - t0)

    with client(server) as c:
        with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
            lines = r.iter_lines()
            next(l for l in lines if l.startswith("data: "))
            t = threading.Thread(target=ask, args=(0,))
            t.start()
            list(lines)
    t.join()
    r, took = results[0]
    assert r.status_code == 504 and r.json()["error"]["code"] == "timeout", r.text
    assert took < 1.5, "it waited for the first, not a timeout of its own after it"


def test_paraphrase_hits_and_hard_negative_misses(server):
    c = client(server)
    assert import_lines(c, [("What is the capital of France?", "The capital of France is Paris."),
                            ("How do I reverse a list in Python?", "Use list.reverse().")]) == \
        {"imported": 2, "errors": []}
    r = only_if_cached(c, "What's the capital city of France?")
    assert r.status_code == 200, r.text
    assert r.headers["X-Cache"] == "HIT" and r.headers["X-Cache-Kind"] == "semantic"
    assert 0.8 <= float(r.headers["X-Cache-Similarity"]) < 1.0
    assert r.json()["choices"][0]["message"]["content"] == "The capital of France is Paris."
    for negative in ["What is the capital of Germany?", "How do I reverse a list in Java?"]:
        r = only_if_cached(c, negative)
        assert r.status_code == 504, (negative, r.headers.get("X-Cache-Kind"))
        # a miss says how near the nearest came and why it was not served
        near, why = float(r.headers["X-Cache-Nearest"]), r.headers["X-Cache-Miss-Reason"]
        m = re.fullmatch(r"similarity (0\.\d{3}) below 0\.700", why)
        # (3 decimals cut, not rounded: never "0.700 below 0.700")
        assert (m and float(m[1]) < 0.7 and abs(float(m[1]) - near) < 0.0011) if near < 0.7 \
            else why.startswith("guard: "), r.headers
    # a per-request threshold override: 1.0 accepts only the identical question
    r = chat(c, "What's the capital city of France?",
             {"Cache-Control": "only-if-cached", "X-Cache-Threshold": "1"})
    assert r.status_code == 504
    assert r.headers["X-Cache-Miss-Reason"].startswith("similarity 0.") and \
        r.headers["X-Cache-Miss-Reason"].endswith(" below 1.000"), r.headers
    # the reason is the nearest's, not that of another candidate examined after it
    import_lines(c, [("When was the Eiffel Tower completed?", "In 1889."),
                     ("Who designed the Eiffel Tower?", "Gustave Eiffel's company.")])
    r = only_if_cached(c, "When was the Eiffel Tower started?")
    assert r.status_code == 504 and "completed" in r.headers["X-Cache-Miss-Reason"], r.headers
    import_lines(c, [("Who is the president of France?", "Emmanuel Macron.")])
    r = only_if_cached(c, "Who was the president of France?")
    assert r.status_code == 504 and float(r.headers["X-Cache-Nearest"]) >= 0.83, r.headers
    assert r.headers["X-Cache-Miss-Reason"] == "guard: tense differs: is vs was", r.headers
    r = only_if_cached(c, "Who painted the Mona Lisa?")
    assert r.status_code == 504 and float(r.headers["X-Cache-Nearest"]) < 0.5, r.headers
    # a close call, under cache.guard_strict_below (0.83): a rewording is served; the same
    # words and one more are another question
    import_lines(c, [("How can I stop snoring?", "Sleep on your side."),
                     ("How do I bake bread?", "Knead, proof, bake.")])
    r = only_if_cached(c, "what helps with snoring at night")
    assert r.status_code == 200 and 0.76 <= float(r.headers["X-Cache-Similarity"]) < 0.83, \
        r.headers
    r = only_if_cached(c, "What is the way to bake sourdough bread?")
    assert r.status_code == 504 and 0.76 <= float(r.headers["X-Cache-Nearest"]) < 0.83, r.headers
    assert r.headers["X-Cache-Miss-Reason"] == 'guard: close call: query adds "sourdough"', \
        r.headers
    # the embedding reads no letter case (similarity 1): what both sides quote is read in it
    import_lines(c, [("In Python, what does 'ABC'.isupper() return?", "True.")])
    r = only_if_cached(c, "In Python, what does 'abc'.isupper() return?")
    assert r.status_code == 504 and float(r.headers["X-Cache-Nearest"]) > 0.99, r.headers
    assert r.headers["X-Cache-Miss-Reason"] == "guard: letter case differs: ABC", r.headers
    assert only_if_cached(c, "in python, what does 'ABC'.isupper() return?").status_code == 200


def test_logprobs_are_answered_by_the_engine(server):
    """A cached answer has no log-probabilities: a request asking for them is run, and its
    answer is not stored; an import line asking for them is refused."""
    c = client(server)
    q = {"model": MODEL, "messages": [{"role": "user", "content": "What is the capital of "
                                       "France?"}], "temperature": 0}
    r = c.post("/admin/cache/import", content=json.dumps({**q, "answer": "Paris."}),
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.json()["imported"] == 1, r.text
    assert c.post("/v1/chat/completions", json=q).headers["X-Cache"] == "HIT"
    body = {**q, "max_tokens": 40, "logprobs": True}
    r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.headers.get("X-Cache") != "HIT", r.headers
    assert r.json()["choices"][0]["logprobs"]["content"], r.text
    r = c.post("/v1/chat/completions", json=body, headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 504, r.text
    body["messages"] = [{"role": "user", "content": "What is the capital of Spain?"}]
    r = c.post("/v1/chat/completions", json=body)
    time.sleep(1)
    assert r.json()["choices"][0]["finish_reason"] == "stop", r.text
    assert only_if_cached(c, "What is the capital of Spain?", max_tokens=40,
                          temperature=0).status_code == 504
    line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
                       "answer": "Hello.", "logprobs": True})
    r = c.post("/admin/cache/import", content=line, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 400 and "logprobs" in r.text, r.text


def test_the_same_words_under_the_threshold(make_server):
    """A rewording with a slip or an abbreviation, which the embedding underrates, is served
    when it says the same content words down to cache.same_words_floor; not where a request
    asks for a stricter threshold, nor another question in the same words."""
    server = make_server(CONF)
    c = client(server)
    import_lines(c, [("How do I clean a cast iron skillet?", "Hot water, a brush, then oil."),
                     ("How do I block someone on WhatsApp?", "Open the chat, tap Block.")])
    r = only_if_cached(c, "How do I clean a cast iorn skilet?")
    assert r.status_code == 200, r.headers
    assert r.headers["X-Cache-Kind"] == "semantic"
    assert 0.65 <= float(r.headers["X-Cache-Similarity"]) < 0.7, r.headers
    r = chat(c, "How do I clean a cast iorn skilet?",
             {"Cache-Control": "only-if-cached", "X-Cache-Threshold": "0.9"})
    assert r.status_code == 504 and "below 0.900" in r.headers["X-Cache-Miss-Reason"]
    # other words, though near: a question about being blocked
    r = only_if_cached(c, "how do i know if someone blocked me on whatsapp")
    assert r.status_code == 504 and float(r.headers["X-Cache-Nearest"]) < 0.76, r.headers
    server.stop()
    server = make_server(CONF + "[cache]\nsame_words_floor = 0\n")
    r = only_if_cached(client(server), "How do I clean a cast iorn skilet?")
    assert r.status_code == 504 and "below 0.700" in r.headers["X-Cache-Miss-Reason"]


def test_the_judge_refuses_what_the_guard_lets_through(make_server):
    """Near misses that no rule of the guard names (another thing to do with the same
    things) are refused by the judge, with its probability in the miss reason; a
    paraphrase still hits; cache.judge_threshold = 0 turns the judge off."""
    entries = [("What should I pack for a beach vacation?", "Sunscreen, a hat, a towel."),
               ("How is a HELOC different from a home equity loan?", "A HELOC is a credit line."),
               ("What is the capital of France?", "Paris.")]
    near_misses = ["What should I leave at home for a beach vacation?",
                   "How is a HELOC different from a cash-out refinance?"]
    server = make_server(CONF)
    c = client(server)
    import_lines(c, entries)
    for q in near_misses:
        r = only_if_cached(c, q)
        assert r.status_code == 504 and float(r.headers["X-Cache-Nearest"]) >= 0.76, r.headers
        m = re.fullmatch(r"judge: the same question at (0\.\d{3}), under 0\.500",
                         r.headers["X-Cache-Miss-Reason"])
        assert m and float(m[1]) < 0.5, r.headers
    r = only_if_cached(c, "What's France's capital city?")
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Paris."
    server.stop()
    server = make_server(CONF + "[cache]\njudge_threshold = 0\n")
    c = client(server)
    import_lines(c, entries)
    for q in near_misses:
        assert only_if_cached(c, q).status_code == 200, q


def test_lookups_at_once_are_judged_together_each_as_alone(make_server):
    """Questions asked at once are weighed together: the judge embeds their stored
    questions in one forward pass (cachegate_cache_judge_pairs counts the pairs per pass)
    and reads the new ones from the pass that embedded them for the search; each gets the
    answer or the miss it gets when asked alone. The stored questions' tokens are kept for
    their next hits (cache.judge_bytes)."""
    entries = [("What should I pack for a beach vacation?", "Sunscreen, a hat, a towel."),
               ("How is a HELOC different from a home equity loan?", "A HELOC is a credit line."),
               ("What is the capital of France?", "Paris."),
               ("How do I reset my router to factory settings?", "Hold the reset button.")]
    asked = ["What should I leave at home for a beach vacation?",
             "How is a HELOC different from a cash-out refinance?",
             "What's France's capital city?",
             "How can I restore my router to its factory settings?"]
    # lookups that arrive within 300 ms of each other share an embedder pass; the judge
    # keeps no stored question's tokens from one lookup to the next
    server = make_server(CONF + "[embedder]\nmax_wait_us = 300000\n[cache]\njudge_bytes = 0\n")
    c = client(server)
    import_lines(c, entries)

    def verdict(r):
        return r.status_code, r.headers.get("X-Cache-Miss-Reason", "")[:6]

    alone = [verdict(only_if_cached(c, q)) for q in asked]
    assert alone == [(504, "judge:"), (504, "judge:"), (200, ""), (200, "")], alone
    passes = metric(c, "cachegate_cache_judge_pairs_count")
    pairs = metric(c, "cachegate_cache_judge_pairs_sum")
    texts = metric(c, "cachegate_cache_judge_texts_total")
    assert (passes, pairs, texts) == (4, 4, 4)

    clients = [client(server) for _ in asked]
    for cl in clients:
        cl.get("/metrics")  # connected before they ask
    start = threading.Barrier(len(asked))
    together = [None] * len(asked)

    def ask(i):
        start.wait()
        together[i] = verdict(only_if_cached(clients[i], asked[i]))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asked))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone
    assert metric(c, "cachegate_cache_judge_pairs_sum") - pairs == 4
    assert metric(c, "cachegate_cache_judge_pairs_count") - passes < 4
    assert metric(c, "cachegate_cache_judge_texts_total") - texts == 4
    server.stop()

    # by default it keeps them: asked again, the same verdicts without embedding anything
    server = make_server(CONF)
    c = client(server)
    import_lines(c, entries)
    assert [verdict(only_if_cached(c, q)) for q in asked] == alone
    assert metric(c, "cachegate_cache_judge_texts_total") == 4
    assert metric(c, "cachegate_cache_judge_kept_bytes") > 0
    assert [verdict(only_if_cached(c, q)) for q in asked] == alone
    assert metric(c, "cachegate_cache_judge_texts_total") == 4


def test_miss_reasons_and_close_calls_can_be_turned_off(make_server):
    """An operator may keep the stored question's words out of a miss's headers, and turn
    the close calls' stricter check off."""
    server = make_server(CONF + "[cache]\nmiss_reasons = false\nguard_strict_below = 0\n")
    with client(server) as c:
        import_lines(c, [("Who is the president of France?", "Emmanuel Macron."),
                         ("How do I bake bread?", "Knead, proof, bake.")])
        r = only_if_cached(c, "Who was the president of France?")
        assert r.status_code == 504 and float(r.headers["X-Cache-Nearest"]) >= 0.83, r.headers
        assert "X-Cache-Miss-Reason" not in r.headers, r.headers
        r = only_if_cached(c, "What is the way to bake sourdough bread?")
        assert r.status_code == 200 and float(r.headers["X-Cache-Similarity"]) < 0.83, r.headers


def test_streamed_hit_through_the_sdk(server):
    c = client(server)
    answer = "Paris is the capital of France, and its largest city by far."
    import_lines(c, [("What is the capital of France?", answer)])
    sdk = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused",
                        http_client=httpx.Client(verify=server.ssl_context(), timeout=120))
    stream = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is the capital of France?"}],
        stream=True, stream_options={"include_usage": True},
        extra_headers={"Cache-Control": "only-if-cached"})
    chunks = list(stream)
    pieces = [ch.choices[0].delta.content for ch in chunks if ch.choices and
              ch.choices[0].delta.content]
    assert len(pieces) > 3, "a replay streams several chunks, like a live answer"
    assert "".join(pieces) == answer
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
    assert finals[-1] == "stop" and all(f is None for f in finals[:-1])
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_only_if_cached_is_a_504_that_never_runs_the_engine(server):
    c = client(server)
    r = only_if_cached(c, "Tell me about the moons of Jupiter.")
    assert r.status_code == 504
    assert r.headers["X-Cache"] == "MISS"
    err = r.json()["error"]
    assert err["code"] == "cache_miss" and "only-if-cached" in err["message"]
    metrics = c.get("/metrics").text
    assert 'cachegate_cache_lookups_total{kind="semantic",result="miss"} 1' in metrics
    assert "cachegate_engine_time_to_first_token_seconds_count 1" not in metrics


def test_a_completion_prompt_is_cached_exactly_as_written(server):
    c = client(server)
    lines = "\n".join(json.dumps({"model": MODEL, "prompt": p, "answer": a}) for p, a in
                      (("The sky is", " blue."), ("Once upon a time", " there was a king."),
                       ("", "Anything."), ([""], "Anything.")))
    r = c.post("/admin/cache/import", content=lines,
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and r.json()["imported"] == 2, r.text
    assert [e["line"] for e in r.json()["errors"]] == [3, 4]  # an empty prompt is refused

    def cached(prompt):
        return c.post("/v1/completions", json={"model": MODEL, "prompt": prompt},
                      headers={"Cache-Control": "only-if-cached"})

    r = cached("The sky is")
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == " blue."
    # white space changes what the model continues, and a near prompt is another prompt
    for other in ("The sky is ", "The sky is\n", "  The   sky is", "Once upon a time,",
                  "once upon a time"):
        r = cached(other)
        assert r.status_code == 504 and r.json()["error"]["code"] == "cache_miss", other


def test_several_prompts_are_cached_each_as_if_alone(server):
    """Each prompt of a completion of several is looked up and stored as the same prompt
    asked alone: an imported answer serves its prompt inside the request, the others are
    generated and then serve requests of their own; a request all of whose prompts are
    cached is a hit, and only-if-cached refuses one that is not."""
    c = client(server)
    r = c.post("/admin/cache/import", content=json.dumps(
        {"model": MODEL, "prompt": "Roses are red,", "stop": ["."], "temperature": 0,
         "answer": " violets are blue"}), headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and r.json()["imported"] == 1, r.text
    prompts = ["The capital of France is", "Roses are red,", "The sky is"]
    body = {"model": MODEL, "prompt": prompts, "stop": ["."], "max_tokens": 16,
            "temperature": 0}
    r = c.post("/v1/completions", json=body)
    assert r.status_code == 200 and r.headers["X-Cache"] == "MISS", r.text
    texts = [ch["text"] for ch in r.json()["choices"]]
    assert texts[1] == " violets are blue"
    assert [ch["finish_reason"] for ch in r.json()["choices"]] == ["stop"] * 3, r.text
    # the engine's prompt and answer tokens are those of the two it ran, plus the hit's
    u = r.json()["usage"]
    assert u["completion_tokens"] > 0 and u["prompt_tokens"] > 0
    for p, text in zip(prompts, texts):
        alone = dict(body, prompt=p)
        deadline = time.monotonic() + 15
        while True:  # stored after the response
            hit = c.post("/v1/completions", json=alone,
                         headers={"Cache-Control": "only-if-cached"})
            if hit.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert hit.status_code == 200 and hit.headers["X-Cache-Kind"] == "exact", hit.text
        assert hit.json()["choices"][0]["text"] == text
    both = c.post("/v1/completions", json=body, headers={"Cache-Control": "only-if-cached"})
    assert both.status_code == 200 and both.headers["X-Cache"] == "HIT", both.text
    assert [ch["text"] for ch in both.json()["choices"]] == texts
    stream = c.post("/v1/completions", json=dict(body, stream=True))
    assert stream.status_code == 200 and stream.headers["X-Cache"] == "HIT"
    streamed = [""] * 3
    for line in stream.text.splitlines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:])["choices"]:
                streamed[ch["index"]] += ch["text"]
    assert streamed == texts and stream.text.rstrip().endswith("data: [DONE]")
    saved = tokens_saved(c)
    r = c.post("/v1/completions", json=dict(body, prompt=prompts + ["A new prompt"]),
               headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 504 and r.json()["error"]["code"] == "cache_miss", r.text
    # answers found but not served (the request refused) save nothing
    r = c.post("/v1/completions", json=dict(body, prompt=prompts + [""]))
    assert r.status_code == 400 and "prompt[3]" in r.json()["error"]["message"], r.text
    assert tokens_saved(c) == saved


def tokens_saved(c):
    return sum(float(line.split()[1]) for line in c.get("/metrics").text.splitlines()
               if line.startswith("cachegate_cache_tokens_saved_total{"))


def metric(c, name):
    """The value of a metric without labels."""
    for line in c.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def embedded_texts(c):
    return metric(c, "cachegate_embed_texts_total")


def test_completions_are_stored_without_embedding_their_prompts(server):
    """Nothing searches a completion's prompt by meaning, so storing one (live or imported)
    must not cost the embedder a pass (each took one, up to 512 tokens of prompt)."""
    c = client(server)
    before = embedded_texts(c)
    body = {"model": MODEL, "prompt": "The capital of France is", "stop": ["."],
            "max_tokens": 24, "temperature": 0}
    r = c.post("/v1/completions", json=body)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop", r.text
    deadline = time.monotonic() + 15
    while True:  # stored after its response
        hit = c.post("/v1/completions", json=body, headers={"Cache-Control": "only-if-cached"})
        if hit.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert hit.status_code == 200 and hit.headers["X-Cache-Kind"] == "exact", hit.text
    assert hit.json()["choices"][0]["text"] == r.json()["choices"][0]["text"]
    r = c.post("/admin/cache/import", content=json.dumps(
        {"model": MODEL, "prompt": "Roses are red,", "answer": " violets are blue."}),
        headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and r.json()["imported"] == 1, r.text
    r = c.post("/v1/completions", json={"model": MODEL, "prompt": "Roses are red,"},
               headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == " violets are blue."
    assert embedded_texts(c) == before
    # a chat's question still is, to be found by its meaning
    import_lines(c, [("What is the capital of Peru?", "Lima.")])
    assert embedded_texts(c) == before + 1
    r = only_if_cached(c, "what is the capital of peru")
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "semantic", r.text


def test_code_that_differs_only_in_layout_or_operators_is_not_served(server):
    """Collapsing white space made these one exact key, and the embedding sees the same
    words: a moved return, another operator."""
    c = client(server)
    q = "What does f(False) return?\n\ndef f(x):\n    if x:\n        print(1)\n    return 2"
    import_lines(c, [(q, "It returns 2."), ("What does print(2+3) output in Python?", "5")])
    r = only_if_cached(c, q.replace("\n    return 2", "\n        return 2"))
    assert r.status_code == 504, r.text
    r = only_if_cached(c, q.replace("    ", "  "))  # the same program, 2-space indents
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == \
        "It returns 2."
    r = only_if_cached(c, "What does print(2*3) output in Python?")
    assert r.status_code == 504, r.text
    r = only_if_cached(c, "What does print(2 + 3) output in Python?")
    assert r.status_code == 200, r.text


# the prompt LangChain's retrieval QA chain writes: the retrieved context and the question
# in one user message
def rag_prompt(context, question):
    return ("Use the following pieces of context to answer the question at the end. If you "
            "don't know the answer, just say that you don't know, don't try to make up an "
            f"answer.\n\n{context}\n\nQuestion: {question}\nHelpful Answer:")


def test_questions_over_one_retrieved_context_are_told_apart(server):
    """Another question over the same context is not a paraphrase (as wholes such prompts
    were 0.94 alike, and the answer to "when" served "who"); a paraphrase of the question
    still hits."""
    c = client(server)
    ctx = ("The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall. "
           "It was designed by Gustave Eiffel's company.")
    import_lines(c, [(rag_prompt(ctx, "When was the Eiffel Tower completed?"), "In 1889.")])
    for other in ["Who designed the Eiffel Tower?", "How tall is the Eiffel Tower?"]:
        r = only_if_cached(c, rag_prompt(ctx, other))
        assert r.status_code == 504, (other, r.headers.get("X-Cache-Similarity"))
    r = only_if_cached(c, rag_prompt(ctx, "In what year was the Eiffel Tower completed?"))
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "semantic", r.text
    assert r.json()["choices"][0]["message"]["content"] == "In 1889."
    # the same question over other context is not served either: its answer may differ
    other = ctx.replace("completed in 1889", "completed in 1890")
    r = only_if_cached(c, rag_prompt(other, "When was the Eiffel Tower completed?"))
    assert r.status_code == 504, r.headers.get("X-Cache-Similarity")
    other = ctx.replace("It was designed", "Its lift was rebuilt in 1983. It was designed")
    r = only_if_cached(c, rag_prompt(other, "When was the Eiffel Tower completed?"))
    assert r.status_code == 504, r.headers.get("X-Cache-Similarity")
    news = ("Revenue grew in every quarter of the year. The flight was delayed by the storm. "
            "Staff numbers were stable.")
    q = "Based on the context, what happened to the flight?"
    import_lines(c, [(rag_prompt(news, q), "The flight was delayed.")])
    r = only_if_cached(c, rag_prompt(news.replace("delayed by", "cancelled because of"), q))
    assert r.status_code == 504, r.headers.get("X-Cache-Similarity")
    # the question first, the facts after it: other facts are not served either
    import_lines(c, [("Where is the team meeting? It is on the rooftop terrace this week.",
                      "On the rooftop terrace.")])
    r = only_if_cached(c, "Where is the team meeting? It is in the main hall this week.")
    assert r.status_code == 504, r.headers.get("X-Cache-Similarity")
    assert r.headers["X-Cache-Miss-Reason"] == "the context differs after the same question"
    r = only_if_cached(c, "Where's the team meeting? It is on the rooftop terrace this week.")
    assert r.status_code == 200, r.headers.get("X-Cache-Miss-Reason")


LIBRARY = (
    "The Riverside Community Library opened in 1962 on the corner of Elm Street and Fourth "
    "Avenue. It began as a single reading room with about four thousand books donated by local "
    "families, and it was run by volunteers for its first eleven years. In 1973 the city council "
    "voted to fund a full-time librarian, and the first person hired was Margaret Alvarez, who "
    "stayed in the post until 1998. Under her direction the library added a children's wing in "
    "1981, paid for by a bake sale campaign that raised twelve thousand dollars over three "
    "summers. The building was renovated in 2005 after a flood damaged the basement archive, "
    "where the town's newspapers since 1890 had been kept; about a third of them were lost. The "
    "renovation added a second floor, a computer lab with twenty machines, and a meeting room "
    "that local clubs can book for free. Today the library holds roughly eighty-five thousand "
    "items, including audiobooks and films, and lends about two hundred thousand items a year. "
    "It is open from nine in the morning to eight in the evening on weekdays and from ten to four "
    "on Saturdays; it is closed on Sundays and public holidays. Membership is free for residents "
    "of the county, while visitors from elsewhere pay fifteen dollars a year. The library runs a "
    "weekly story hour for toddlers on Tuesday mornings, an English conversation club on "
    "Thursday evenings, and a summer reading challenge that drew nine hundred children last "
    "year. Its current director, Samuel Okafor, was appointed in 2019 and has led a project to "
    "digitize the surviving newspaper collection, which should be finished by the end of next "
    "year. The library's friends group holds a used book sale every April, and the money pays "
    "for new large-print books and the delivery service for readers who cannot leave home.")
LIBRARY_QUESTIONS = [
    ("When did the library open?", "In what year did the library open its doors?", "1962."),
    ("Who was the first librarian hired?",
     "Who was the first full-time librarian the library hired?", "Margaret Alvarez."),
    ("What damaged the basement archive?", "What caused the damage to the basement archive?",
     "A flood."),
    ("How many computers are in the lab?", "How many machines does the computer lab have?",
     "Twenty."),
    ("How many items does the library hold?",
     "About how many items are in the library's collection?", "About 85,000."),
    ("When is the library open on Saturdays?", "What are the library's Saturday opening hours?",
     "Ten to four."),
    ("How much do visitors from elsewhere pay?",
     "What is the yearly fee for visitors from outside the county?", "$15 a year."),
    ("Who is the current director?", "Who directs the library now?", "Samuel Okafor."),
    ("When is the used book sale held?",
     "In which month does the friends group hold its used book sale?", "April."),
    ("When is the story hour for toddlers?", "On which day is the toddlers' story hour held?",
     "Tuesday mornings."),
    ("How many children joined the summer reading challenge?",
     "How many kids took part in the summer reading challenge last year?", "Nine hundred."),
]


def test_questions_after_a_long_context_are_found_by_their_own_words(server):
    """A retrieved context longer than the embedder reads (256 tokens) put every question
    after it at one vector, and the nearest candidates examined were the first stored: only
    questions among them were ever found. The question at the end is embedded too now: a
    paraphrase finds its own question among eleven stored, as it does without the context,
    and another question is never served."""
    c = client(server)
    import_lines(c, [(rag_prompt(LIBRARY, q), a) for q, _, a in LIBRARY_QUESTIONS])
    served = {}
    for q, paraphrase, answer in LIBRARY_QUESTIONS:
        r = only_if_cached(c, rag_prompt(LIBRARY, paraphrase))
        assert r.status_code in (200, 504), r.text
        if r.status_code == 200:
            assert r.json()["choices"][0]["message"]["content"] == answer, paraphrase
            served[q] = True
    # the last two stored are past the eight nearest a shared vector would give
    assert served.get("When is the story hour for toddlers?"), served
    assert served.get("How many children joined the summer reading challenge?"), served
    assert len(served) >= 7, served
    for other in ("When was the building renovated?", "What does the used book sale pay for?",
                  "Who was the first director after Margaret Alvarez?"):
        r = only_if_cached(c, rag_prompt(LIBRARY, other))
        assert r.status_code == 504, (other, r.text)
    # the same question over a context that differs at its end: not served
    changed = LIBRARY.replace("every April", "every October")
    r = only_if_cached(c, rag_prompt(changed, "When is the used book sale held?"))
    assert r.status_code == 504, r.text


def test_a_fact_changed_inside_a_long_context_and_its_question_are_compared_alone(server):
    """A fact changed in the middle of a long context and the question after it: the
    paragraphs both share between the two were compared with them, and at 2,000 bytes they
    made the two alike (0.86: "what happened to the launch" was served "The vote passed.").
    The shared paragraphs are left out; the same question over the same context still hits."""
    c = client(server)
    head = " ".join(f"Paragraph {i} of the handbook describes routine office procedures for "
                    f"the staff of the regional branch." for i in range(12))
    tail = " ".join(f"Section {i}: staff must badge in at the front desk before nine and sign "
                    f"the visitor log." for i in range(12))

    def prompt(fact, question):
        return f"Context: {head} {fact} {tail}\nQuestion: {question}"

    import_lines(c, [(prompt("The vote passed.", "What was the result of the vote?"),
                      "The vote passed.")])
    r = only_if_cached(c, prompt("The launch was postponed by the board.",
                                 "What happened to the launch?"))
    assert r.status_code == 504, r.headers.get("X-Cache-Similarity")
    assert "differing sentences" in r.headers["X-Cache-Miss-Reason"], r.headers
    r = only_if_cached(c, prompt("The vote passed.", "What was the vote's result?"))
    assert r.status_code == 200, r.headers.get("X-Cache-Miss-Reason")
    assert r.json()["choices"][0]["message"]["content"] == "The vote passed."


def test_a_paraphrase_is_found_past_the_same_question_under_other_system_prompts(server):
    """The nearest candidates are taken from the tenant's whole index before partitions
    are compared: twelve other system prompts holding the question itself crowded out the
    paraphrase stored under this one."""
    c = client(server)
    lines = [json.dumps({"model": MODEL, "messages": [
        {"role": "system", "content": f"You are assistant number {i}."},
        {"role": "user", "content": "What is the capital city of France?"}],
        "answer": f"Other {i}."}) for i in range(12)]
    lines.append(json.dumps({"model": MODEL, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What's the capital of France?"}], "answer": "Paris."}))
    r = c.post("/admin/cache/import", content="\n".join(lines),
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and r.json()["imported"] == 13, r.text
    body = {"model": MODEL, "messages": [{"role": "system", "content": "You are terse."},
                                         {"role": "user",
                                          "content": "What is the capital city of France?"}]}
    r = c.post("/v1/chat/completions", json=body, headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "semantic", r.text
    assert r.json()["choices"][0]["message"]["content"] == "Paris."


def test_an_exact_hit_is_refused_like_its_request(server):
    c = client(server)
    import_lines(c, [("What is the capital of France?", "Paris.")])
    assert only_if_cached(c, "What is the capital of France?").status_code == 200
    for headers in ({"Cache-Control": "only-if-cached"}, {}):
        r = chat(c, "What is the capital of France?", headers, max_tokens=8190)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "context_length_exceeded"
        assert r.json()["error"]["param"] == "max_tokens"


def test_no_store_no_cache_and_max_tokens(server):
    c = client(server)
    q = "What is the capital of France?"
    r = chat(c, q, {"Cache-Control": "no-store"}, max_tokens=100, temperature=0)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop"
    time.sleep(1)
    assert only_if_cached(c, q, max_tokens=100, temperature=0).status_code == 504, \
        "no-store was not stored"
    # an answer cut by max_tokens (finish_reason length) is never stored
    q2 = "Write a long story about a dragon."
    r = chat(c, q2, max_tokens=3)
    assert r.json()["choices"][0]["finish_reason"] == "length"
    time.sleep(1)
    assert only_if_cached(c, q2, max_tokens=3).status_code == 504
    # a stored answer longer than the request's max_tokens does not serve it
    import_lines(c, [("Describe the sea.", "The sea is vast, deep, blue and full of life " * 5)])
    assert only_if_cached(c, "Describe the sea.", max_tokens=5).status_code == 504
    assert only_if_cached(c, "Describe the sea.", max_tokens=500).status_code == 200
    # no-cache skips the lookup (the engine answers) but stores
    r = chat(c, "Describe the sea.", {"Cache-Control": "no-cache"}, max_tokens=40)
    assert r.headers["X-Cache"] == "MISS"


def test_a_hit_as_long_as_max_tokens_ends_with_length(server):
    """A stored answer of exactly max_tokens tokens said stop where the engine, which stops
    there before it could end the text, says length: the SDK's parse() and stream helpers
    raised LengthFinishReasonError only on a miss."""
    c = client(server)
    q = "What is the capital of Spain?"
    r = chat(c, q, max_tokens=100, temperature=0)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop", r.text
    n, text = r.json()["usage"]["completion_tokens"], r.json()["choices"][0]["message"]["content"]
    time.sleep(1)
    hit = chat(c, q, max_tokens=n, temperature=0)
    miss = chat(c, q, {"Cache-Control": "no-cache"}, max_tokens=n, temperature=0)
    assert hit.headers["X-Cache"] == "HIT" and miss.headers["X-Cache"] == "MISS"
    for r in (hit, miss):
        assert r.json()["choices"][0]["finish_reason"] == "length", r.text
        assert r.json()["choices"][0]["message"]["content"] == text
    with c.stream("POST", "/v1/chat/completions",
                  json={"model": MODEL, "messages": [{"role": "user", "content": q}],
                        "max_tokens": n, "temperature": 0, "stream": True}) as s:
        assert s.headers["X-Cache"] == "HIT"
        chunks = [json.loads(line[6:]) for line in s.iter_lines()
                  if line.startswith("data: {")]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert only_if_cached(c, q, max_tokens=n + 1, temperature=0).json()["choices"][0][
        "finish_reason"] == "stop"


def test_cache_control_on_several_lines_and_no_sdk_retries(server):
    """A Cache-Control sent on two lines (a proxy or a library adds its own) counted only its
    first line, so a no-store on the second was stored; and the SDKs retried a 504 that
    only-if-cached asked for twice, as they retry any 5xx they are not told to leave."""
    c = client(server)
    q = "What is the capital of Italy?"
    r = c.post("/v1/chat/completions", headers=[("Cache-Control", "max-age=0"),
                                                ("Cache-Control", "no-store")],
               json={"model": MODEL, "messages": [{"role": "user", "content": q}],
                     "max_tokens": 40, "temperature": 0})
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop", r.text
    time.sleep(1)
    r = only_if_cached(c, q, max_tokens=40, temperature=0)
    assert r.status_code == 504 and r.headers["x-should-retry"] == "false"
    r = c.post("/v1/chat/completions", headers=[("Cache-Control", "no-cache"),
                                                ("Cache-Control", "only-if-cached")],
               json={"model": MODEL, "messages": [{"role": "user", "content": q}]})
    assert r.status_code == 504, "the engine never runs for only-if-cached"
    # two values of a one-value header
    r = c.post("/v1/chat/completions", headers=[("X-Cache-Threshold", "0.9"),
                                                ("X-Cache-Threshold", "0.5")],
               json={"model": MODEL, "messages": [{"role": "user", "content": q}]})
    assert r.status_code == 400 and "X-Cache-Threshold is given twice" in r.text
    sdk = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused",
                        http_client=httpx.Client(verify=server.ssl_context(), timeout=120))
    before = metric(c, "cachegate_cache_only_if_cached_misses_total")
    with pytest.raises(openai.InternalServerError):
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": q}],
                                    extra_headers={"Cache-Control": "only-if-cached"})
    assert metric(c, "cachegate_cache_only_if_cached_misses_total") == before + 1


def test_ttl_header_expires_entries(server):
    c = client(server)
    q = "What is the capital of France?"
    r = chat(c, q, {"X-Cache-TTL": "3"}, max_tokens=100, temperature=0)
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    wait_cached(c, q, max_tokens=100, temperature=0)
    time.sleep(3.5)
    assert only_if_cached(c, q, max_tokens=100, temperature=0).status_code == 504, \
        "expired entries are never served"
    assert chat(c, q, {"X-Cache-TTL": "soon"}).status_code == 400


def test_the_ttl_header_cannot_outlast_the_tenants_ttl(server):
    """A tenant's ttl_s is the operator's retention limit: a client's X-Cache-TTL shortens
    it and never lengthens it (a header of 1000000, or 0 for never, kept the answer)."""
    c = client(server)
    r = c.put("/admin/tenants?name=default", json={"ttl_s": 2},
              headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200, r.text
    for i, ttl in enumerate(("1000000", "0")):
        q = ("What is the capital of France?", "What is the capital of Italy?")[i]
        r = chat(c, q, {"X-Cache-TTL": ttl}, max_tokens=100, temperature=0)
        assert r.json()["choices"][0]["finish_reason"] == "stop"
        wait_cached(c, q, max_tokens=100, temperature=0)
        time.sleep(2.5)
        assert only_if_cached(c, q, max_tokens=100, temperature=0).status_code == 504, ttl


def test_admin_routes_need_the_admin_key_and_delete(server, make_server):
    c = client(server)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "q"}],
                       "answer": "a"})
    assert c.post("/admin/cache/import", content=body).status_code == 401
    assert c.post("/admin/cache/import", content=body,
                  headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = c.post("/admin/cache/import", content=body + "\nnot json\n",
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.json()["imported"] == 1 and r.json()["errors"][0]["line"] == 2
    assert only_if_cached(c, "q").status_code == 200
    auth = {"Authorization": f"Bearer {ADMIN}"}
    assert c.delete("/admin/cache", headers=auth).status_code == 400, "nothing said: nothing done"
    r = c.delete("/admin/cache?all=true", headers=auth)
    assert r.status_code == 200 and r.json() == {"deleted": 1}
    assert only_if_cached(c, "q").status_code == 504
    assert c.delete("/admin/cache?tenant=nobody", headers=auth).status_code == 404
    # without an admin key in the configuration, the admin API is off
    server.stop()  # (one server per data directory)
    other = make_server("")
    r = client(other).delete("/admin/cache?all=true", headers=auth)
    assert r.status_code == 403


def hot_entries(c):
    return metric(c, "cachegate_cache_hot_entries")


def hit(c, q, answer):
    r = only_if_cached(c, q)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == answer
    return r.json()["usage"]


def test_entries_held_in_memory_follow_replacements_deletes_and_expiry(server):
    c = client(server)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    q = "Where is the Eiffel Tower?"
    import_lines(c, [(q, "In Paris.")])
    assert hot_entries(c) == 0
    first = hit(c, q, "In Paris.")
    assert hot_entries(c) == 1, "an entry is held in memory from its first hit"
    assert first["prompt_tokens"] > 0, "an imported entry's prompt is counted at its first hit"
    assert hit(c, q, "In Paris.") == first
    # a new answer for the same question replaces the old one, also the copy in memory
    import_lines(c, [(q, "On the Champ de Mars, in Paris.")])
    hit(c, q, "On the Champ de Mars, in Paris.")
    hit(c, q, "On the Champ de Mars, in Paris.")
    assert hot_entries(c) == 1
    # a deleted entry is never served again
    assert c.delete("/admin/cache?all=true", headers=auth).json() == {"deleted": 1}
    assert only_if_cached(c, q).status_code == 504
    assert hot_entries(c) == 0
    # an entry held in memory still expires on time
    q2 = "How tall is the Eiffel Tower?"
    r = chat(c, q2, {"X-Cache-TTL": "4"}, max_tokens=100, temperature=0)
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    before = hot_entries(c)
    answer = wait_cached(c, q2, max_tokens=100, temperature=0).json()
    assert hot_entries(c) == before + 1, "an answer the engine wrote is held from its first hit"
    assert only_if_cached(c, q2, max_tokens=100, temperature=0).json()["choices"] == \
        answer["choices"]
    time.sleep(4.5)
    assert only_if_cached(c, q2, max_tokens=100, temperature=0).status_code == 504


def test_cli_import_then_serve(tmp_path, make_server):
    data = tmp_path / "data"
    f = tmp_path / "warm.jsonl"
    f.write_text(json.dumps({"model": MODEL, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the boiling point of water at sea level?"}],
        "answer": "100 degrees Celsius."}) + "\n{broken\n")
    conf = tmp_path / "empty.conf"
    conf.write_text("")
    p = subprocess.run([str(BIN), "cache", "import", str(f), "--data-dir", str(data),
                        "--config", str(conf)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 1, "a bad line makes the exit status 1"
    assert "imported 1 entries" in p.stdout and ":2:" in p.stderr
    server = make_server(CONF)
    c = client(server)
    body = {"model": MODEL, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "At sea level, at what temperature does water boil?"}]}
    r = c.post("/v1/chat/completions", json=body, headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "semantic"
    # the system message is part of the partition
    body["messages"][0]["content"] = "You are verbose."
    r = c.post("/v1/chat/completions", json=body, headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 504
    # the server holds the data directory: the CLI refuses to write under it
    p = subprocess.run([str(BIN), "cache", "import", str(f), "--data-dir", str(data),
                        "--config", str(conf)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 1 and "in use" in p.stderr


def test_cli_deletes_entries_with_the_server_stopped(tmp_path, make_server):
    """There was no way to delete one bad answer without the admin API (off unless an
    admin_key is set): `cachegate cache delete` takes ids (a tenant's, with --tenant) or
    --all, refuses beside a running server (whose memory still holds the answers), and the
    server started after it no longer serves them."""
    data = tmp_path / "data"
    conf = tmp_path / "empty.conf"
    conf.write_text("")
    f = tmp_path / "warm.jsonl"
    f.write_text("\n".join(json.dumps({"model": MODEL, "messages": [
        {"role": "user", "content": q}], "answer": a}) for q, a in [
        ("Who painted the Mona Lisa?", "Leonardo da Vinci."),
        ("What is the capital of Peru?", "Lima."),
        ("What is the largest ocean?", "The Pacific.")]) + "\n")

    def cli(*args):
        return subprocess.run([str(BIN), "cache", *args, "--data-dir", str(data), "--config",
                               str(conf)], cwd=ROOT, capture_output=True, text=True)

    assert cli("import", str(f)).returncode == 0
    rows = [json.loads(l) for l in cli("list", "--json").stdout.splitlines()]
    mona = next(r["id"] for r in rows if "Mona Lisa" in r["question"])
    p = cli("delete", str(mona), "999999")
    assert p.returncode == 1 and "deleted 1 entry" in p.stdout and "no entry 999999" in p.stderr
    p = cli("delete", "x1")
    assert p.returncode == 2 and "not an entry id" in p.stderr
    assert cli("delete", "--all", "--tenant", "nobody").returncode == 1
    server = make_server(CONF)  # (on tmp_path / "data")
    c = client(server)
    assert only_if_cached(c, "Who painted the Mona Lisa?").status_code == 504
    assert only_if_cached(c, "What is the capital of Peru?").status_code == 200
    p = cli("delete", "--all")
    assert p.returncode == 1 and "in use" in p.stderr and "admin API" in p.stderr
    server.stop()
    p = cli("delete", "--all", "--tenant", "default")
    assert p.returncode == 0 and "deleted 2 entries" in p.stdout, p.stdout + p.stderr
    assert cli("list", "--json").stdout == ""
    p = cli("remove", "1")
    assert p.returncode == 2 and "no command 'remove'" in p.stderr


def test_an_exact_hit_counts_its_own_prompt(server):
    """Requests in other white space share an exact entry: each is counted (and held to the
    context) by its own prompt, and a padded one does not leave its count in the entry."""
    c = client(server)
    q = "What is the capital of France?"
    import_lines(c, [(q, "Paris.")])
    padded = q + " \n" * 2000
    r = only_if_cached(c, padded)
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "exact"
    long_n = r.json()["usage"]["prompt_tokens"]
    r = only_if_cached(c, q)
    assert r.status_code == 200
    n = r.json()["usage"]["prompt_tokens"]
    assert n < 60 and long_n > n + 500, (n, long_n)
    # room for the clean question's answer, not for the padded one's
    r = only_if_cached(c, q, max_tokens=8192 - n - 8)
    assert r.status_code == 200, r.text
    r = only_if_cached(c, padded, max_tokens=8192 - n - 8)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_an_import_no_request_could_reach_is_refused(server):
    c = client(server)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "tool", "content": "t"},
            {"role": "user", "content": "Tool role context?"}]
    lines = [{"model": MODEL, "messages": msgs, "answer": "No."},
             {"model": MODEL, "messages": [{"role": "function", "content": "f"},
                                           {"role": "user", "content": "Hi?"}], "answer": "Hi."},
             {"model": MODEL, "messages": [{"role": "user", "content": [
                 {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}],
              "answer": "A cat."}]
    r = c.post("/admin/cache/import", content="\n".join(json.dumps(l) for l in lines),
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 400 and r.json()["imported"] == 0, r.text  # nothing imported
    assert [e["line"] for e in r.json()["errors"]] == [1, 2, 3]
    assert r.json()["error"]["message"].startswith("No line could be imported (3 errors); "
                                                   "line 1: "), r.text  # OpenAI's error body
    assert "tool_call_id" in r.json()["errors"][0]["message"]
    # the request itself: refused before the caches are asked
    r = c.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs},
               headers={"Cache-Control": "only-if-cached"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages.[1].tool_call_id"
    # an empty body (a file that was not there, curl -d @missing) imports nothing: a 400
    r = c.post("/admin/cache/import", content="\n\n", headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 400 and "no lines to import" in r.json()["error"]["message"], r.text
    # an id past 64 bits is no id (it was read as the largest)
    r = c.delete("/admin/cache?id=99999999999999999999",
                 headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "id", r.text


def test_an_import_is_newer_than_a_hit_before_it(server):
    """Capacity evicts the least recently hit: an entry imported after another's hit stays
    (imports were timed to the second, hits to the millisecond, so an import in the same
    second as a hit counted as older and was evicted at once)."""
    c = client(server)
    r = c.put("/admin/tenants?name=default", content='{"max_entries": 1}',
              headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200
    import_lines(c, [("What is the capital of Peru?", "Lima.")])
    wait_cached(c, "What is the capital of Peru?")
    time.sleep(1.5 - time.time() % 1)  # half way through a second
    assert only_if_cached(c, "What is the capital of Peru?").status_code == 200
    time.sleep(0.05)
    import_lines(c, [("What is the capital of Chile?", "Santiago.")])
    time.sleep(1.5)  # the writer's capacity check and sweep
    assert only_if_cached(c, "What is the capital of Chile?").status_code == 200
    assert only_if_cached(c, "What is the capital of Peru?").status_code == 504


def test_imports_take_the_tenants_ttl_and_capacity(tmp_path, make_server):
    # live answers get a tenant's own ttl_s and max_entries; imported ones did not (a week,
    # and no limit)
    data, conf = tmp_path / "data", tmp_path / "empty.conf"
    conf.write_text("")

    def cli(*args):
        return subprocess.run([str(BIN), *args, "--data-dir", str(data), "--config", str(conf)],
                              cwd=ROOT, capture_output=True, text=True)

    assert cli("tenant", "set", "default", '{"max_entries": 2}').returncode == 0
    f = tmp_path / "three.jsonl"
    f.write_text("".join(json.dumps({"model": MODEL, "messages": [{"role": "user", "content": q}],
                                     "answer": "A."}) + "\n"
                         for q in ("Who painted the Mona Lisa?", "How tall is Mount Fuji?",
                                   "What is the capital of Peru?")))
    assert cli("cache", "import", str(f)).returncode == 0
    server = make_server(CONF)  # on the same data directory
    c = client(server)
    hits = [only_if_cached(c, q).status_code for q in ("Who painted the Mona Lisa?",
                                                      "How tall is Mount Fuji?",
                                                      "What is the capital of Peru?")]
    assert sorted(hits) == [200, 200, 504], hits  # two kept, the oldest evicted
    r = c.put("/admin/tenants?name=default", json={"ttl_s": 1},
              headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200, r.text
    import_lines(c, [("How many legs does a spider have?", "Eight.")])
    assert only_if_cached(c, "How many legs does a spider have?").status_code == 200
    time.sleep(1.5)
    assert only_if_cached(c, "How many legs does a spider have?").status_code == 504


def cache_entries(c, tenant="default"):
    for line in c.get("/metrics").text.splitlines():
        if line.startswith(f'cachegate_cache_entries{{tenant="{tenant}"}} '):
            return float(line.split()[1])
    return None


def test_lowered_ttl_and_capacity_hold_the_entries_already_stored(server):
    """A tenant's ttl_s is the operator's retention limit and max_entries its capacity:
    lowered, they hold the entries stored before at once (capacity was held only at the
    tenant's next write, and the TTL never: entries kept their week)."""
    c = client(server)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    questions = [f"What is {i} plus {i}?" for i in range(12)]
    import_lines(c, [(q, "Some number.") for q in questions])
    time.sleep(1.2)
    assert cache_entries(c) == 12
    r = c.put("/admin/tenants?name=default", json={"max_entries": 5}, headers=auth)
    assert r.status_code == 200, r.text
    time.sleep(1.5)  # (the tenants are read again once a second)
    assert cache_entries(c) == 5
    assert only_if_cached(c, questions[0]).status_code == 504  # the least recently used
    assert only_if_cached(c, questions[-1]).status_code == 200
    r = c.put("/admin/tenants?name=default", json={"max_entries": 5, "ttl_s": 1},
              headers=auth)
    assert r.status_code == 200, r.text
    time.sleep(2.5)
    assert only_if_cached(c, questions[-1]).status_code == 504
    assert cache_entries(c) == 0


def test_a_wrong_answer_is_deleted_by_the_id_its_hit_names(server):
    c = client(server)
    import_lines(c, [("Who wrote Hamlet?", "Marlowe."), ("Who wrote Macbeth?", "Shakespeare.")])
    r = only_if_cached(c, "Who wrote Hamlet?")
    assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "exact"
    entry = r.headers["X-Cache-Entry"]
    auth = {"Authorization": f"Bearer {ADMIN}"}
    # with a tenant named, only that tenant's entry; selectors that disagree are refused
    assert c.post("/admin/tenants", json={"name": "second"}, headers=auth).status_code == 201
    r = c.delete(f"/admin/cache?id={entry}&tenant=second", headers=auth)
    assert r.status_code == 200 and r.json() == {"deleted": 0}
    for q in (f"id={entry}&all=true", "tenant=second&all=true", f"id={entry}&id=1"):
        r = c.delete(f"/admin/cache?{q}", headers=auth)
        assert r.status_code == 400, q
    assert only_if_cached(c, "Who wrote Hamlet?").status_code == 200
    r = c.delete(f"/admin/cache?id={entry}&tenant=default", headers=auth)
    assert r.status_code == 200 and r.json() == {"deleted": 1}
    assert only_if_cached(c, "Who wrote Hamlet?").status_code == 504
    assert only_if_cached(c, "Who wrote Macbeth?").status_code == 200


def test_entry_ids_say_nothing_of_other_tenants_entries(tmp_path, make_server):
    """Entry ids were row ids counted across tenants: a tenant that saw the ids of two of its
    own hits knew how many entries the others stored between them. They are a keyed
    permutation of the row ids now, the same in the header, the listing and the CLI, and
    across a restart (the key is in the database)."""
    server = make_server(CONF)
    c = client(server)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    assert c.post("/admin/tenants", json={"name": "second"}, headers=auth).status_code == 201
    import_lines(c, [("Who wrote Hamlet?", "Shakespeare.")])
    import_lines(c, [(f"Other question {i}?", f"Answer {i}.") for i in range(20)],
                 tenant="second")
    import_lines(c, [("Who wrote Faust?", "Goethe.")])
    import_lines(c, [("Who wrote Emma?", "Jane Austen.")])

    def entry(q):
        r = only_if_cached(c, q)
        assert r.status_code == 200, r.text
        return int(r.headers["X-Cache-Entry"])

    ids = [entry(q) for q in ("Who wrote Hamlet?", "Who wrote Faust?", "Who wrote Emma?")]
    # rows n, n + 21, n + 22 before: neither the gap nor the order tells
    assert all(0 <= i < 2 ** 52 for i in ids), ids
    assert abs(ids[1] - ids[0]) > 10 ** 6 and abs(ids[2] - ids[1]) > 10 ** 6, ids
    listed = c.get("/admin/cache?limit=3", headers=auth).json()["data"]
    assert [e["id"] for e in listed] == ids[::-1]
    # paging from an id goes on from its entry, as it did with row ids
    r = c.get(f"/admin/cache?before={ids[2]}", headers=auth)
    assert [e["answer"] for e in r.json()["data"]] == ["Goethe.", "Shakespeare."]
    r = c.get(f"/admin/cache?before={ids[0]}", headers=auth)
    assert r.json()["data"] == [] and r.json()["has_more"] is False
    server.stop()
    conf = tmp_path / "cli.conf"
    conf.write_text("")
    p = subprocess.run([str(BIN), "cache", "list", "--json", "--data-dir",
                        str(tmp_path / "data"), "--config", str(conf)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert [json.loads(l)["id"] for l in p.stdout.splitlines()] == ids[::-1]
    server = make_server(CONF)
    c = client(server)
    assert entry("Who wrote Faust?") == ids[1]
    r = c.delete(f"/admin/cache?id={ids[1]}", headers=auth)
    assert r.json() == {"deleted": 1}
    assert only_if_cached(c, "Who wrote Faust?").status_code == 504


def test_the_entries_are_listed_to_find_a_wrong_one(server):
    """A wrong answer reported without its X-Cache-Entry (a user's screenshot) had no way to
    its id: GET /admin/cache and `cachegate cache list` show a tenant's entries, newest
    first, in pages, filtered by words of the question."""
    c = client(server)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    import_lines(c, [(f"What is the capital of country {i}?", f"City {i}.") for i in range(5)]
                 + [("Who painted the Mona Lisa?", "Michelangelo.")])
    r = c.get("/admin/cache?limit=2", headers=auth)
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["object"] == "list" and page["has_more"] is True
    assert [e["question"] for e in page["data"]] == ["Who painted the Mona Lisa?",
                                                    "What is the capital of country 4?"]
    first = page["data"][0]
    assert first["answer"] == "Michelangelo." and first["hits"] == 0 and first["model"] == MODEL
    r = c.get(f"/admin/cache?limit=10&before={page['data'][1]['id']}", headers=auth)
    assert [e["answer"] for e in r.json()["data"]] == [f"City {i}." for i in (3, 2, 1, 0)]
    assert r.json()["has_more"] is False
    r = c.get("/admin/cache?q=MONA%20lisa", headers=auth)
    assert [e["id"] for e in r.json()["data"]] == [first["id"]]
    # the access log says what the caches did for a request
    r = chat(c, "Who painted the Mona Lisa?", {"Cache-Control": "only-if-cached",
                                               "X-Request-Id": "mona-1"})
    assert r.status_code == 200
    line = server.wait_log(lambda l: l.get("request_id") == "mona-1")
    assert line["cache"] == "exact" and line["peer"] == "127.0.0.1", line
    r = chat(c, "Who painted the Night Watch?", {"Cache-Control": "only-if-cached",
                                                 "X-Request-Id": "watch-1"})
    assert r.status_code == 504
    assert server.wait_log(lambda l: l.get("request_id") == "watch-1")["cache"] == "miss"
    # the id found deletes the entry
    assert c.delete(f"/admin/cache?id={first['id']}", headers=auth).json() == {"deleted": 1}
    assert only_if_cached(c, "Who painted the Mona Lisa?").status_code == 504
    assert c.get("/admin/cache?tenant=nobody", headers=auth).status_code == 404
    assert c.get("/admin/cache?limit=0", headers=auth).status_code == 400
    assert c.get("/admin/cache?id=1", headers=auth).status_code == 400  # DELETE's selector
    assert c.get("/admin/cache").status_code == 401
    # the same from the command line, beside the running server
    p = subprocess.run([str(BIN), "cache", "list", "--limit", "2", "--data-dir",
                        str(server.data_dir), "--config", str(server.conf)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "CREATED", "HITS"]
    assert "What is the capital of country 4? -> City 4." in lines[1]
    assert lines[-1].startswith("(more: --before ")
    p = subprocess.run([str(BIN), "cache", "list", "--json", "--grep", "country 2",
                        "--data-dir", str(server.data_dir), "--config", str(server.conf)],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and [json.loads(l)["answer"] for l in p.stdout.splitlines()] == \
        ["City 2."]


def test_import_takes_a_byte_order_mark(tmp_path, server):
    line = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi?"}],
                       "answer": "Hello."})
    c = client(server)
    r = c.post("/admin/cache/import", content=("\ufeff" + line).encode(),
               headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and r.json() == {"imported": 1, "errors": []}, r.text
    f = tmp_path / "bom.jsonl"
    f.write_bytes(("\ufeff" + line + "\n").encode())
    server.stop()
    p = subprocess.run([str(BIN), "cache", "import", str(f), "--data-dir", str(server.data_dir),
                        "--config", str(server.conf)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and "imported 1 entries" in p.stdout, p.stderr
    assert "\r" not in p.stderr  # no terminal: no progress line rewritten


def test_cli_import_of_a_directory_fails(tmp_path):
    p = subprocess.run([str(BIN), "cache", "import", str(tmp_path), "--data-dir",
                        str(tmp_path / "data")], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 1 and "is a directory" in p.stderr


def test_cli_import_for_a_tenant_of_a_directory_without_a_database_fails(tmp_path):
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi?"}],
                             "answer": "Hello."}) + "\n")
    typo = tmp_path / "no-such-dir"
    p = subprocess.run([str(BIN), "cache", "import", str(f), "--tenant", "team-b",
                        "--data-dir", str(typo)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 1 and "holds no database" in p.stderr
    assert not typo.exists(), "a --data-dir typo made a database there"


def test_cli_import_into_a_tenant_deleted_meanwhile_keeps_nothing_and_says_so(tmp_path):
    """The import reads its lines from a pipe; the tenant is deleted (beside it, as the CLI
    allows) after the import has checked it and before its lines are written. It said it had
    imported them."""
    data, conf = tmp_path / "data", tmp_path / "empty.conf"
    conf.write_text("")

    def cli(*args, **kw):
        return subprocess.run([str(BIN), *args, "--data-dir", str(data), "--config", str(conf)],
                              cwd=ROOT, capture_output=True, text=True, **kw)

    assert cli("tenant", "create", "team-a").returncode == 0
    fifo = tmp_path / "lines"
    os.mkfifo(fifo)
    p = subprocess.Popen([str(BIN), "cache", "import", str(fifo), "--tenant", "team-a",
                          "--data-dir", str(data), "--config", str(conf)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w = os.open(fifo, os.O_WRONLY)
    lines = "".join(json.dumps({"model": MODEL, "messages": [{"role": "user", "content": q}],
                                "answer": "A."}) + "\n"
                    for q in ("Who painted the Mona Lisa?", "How tall is Mount Fuji?"))
    os.write(w, lines.encode())
    deadline = time.time() + 120
    while True:  # the lines read: the import is past its check of the tenant
        unread = array.array("i", [0])
        fcntl.ioctl(w, termios.FIONREAD, unread)
        if not unread[0]:
            break
        assert time.time() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.05)
    d = cli("tenant", "delete", "team-a")
    assert d.returncode == 0, d.stderr
    os.close(w)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (out, err)
    assert "imported" not in out and "was deleted during the import" in err, (out, err)


def test_an_import_racing_its_tenants_deletion_does_not_say_it_was_kept(tmp_path, make_server):
    """A large import is being embedded when the tenant is deleted: the reply must not
    count lines that were dropped (it said all 1,500 were imported)."""
    server = make_server(CONF)
    c = client(server)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    assert c.post("/admin/tenants", json={"name": "team-a"}, headers=admin).status_code == 201
    body = "\n".join(json.dumps({"model": MODEL, "messages": [
        {"role": "user", "content": f"What is item number {i} of the long list of things?"}],
        "answer": "A."}) for i in range(1500))
    got = {}

    def send():
        got["r"] = c.post("/admin/cache/import?tenant=team-a", content=body, headers=admin)
        got["at"] = time.monotonic()

    t = threading.Thread(target=send)
    t.start()
    time.sleep(0.3)  # the request read; embedding 1,500 questions takes seconds on a CPU
    asked = time.monotonic()
    with client(server) as c2:
        r = c2.delete("/admin/tenants?name=team-a", headers=admin)
    assert r.status_code == 200, r.text
    t.join(timeout=300)
    r = got["r"]
    if got["at"] < asked:  # done before the deletion was asked (a fast GPU): no race
        assert r.status_code == 200 and r.json()["imported"] == 1500, r.text
        return
    assert r.status_code == 404 and r.json()["error"]["param"] == "tenant", r.text


def test_kill_9_during_writes_loses_no_completed_entry(make_server):
    server = make_server(CONF)
    c = client(server)
    done, stop = [], threading.Event()

    def writer():
        i = 0
        with client(server) as w:
            while not stop.is_set():
                q = f"Question number {i} about topic {i * 7919 % 1000}?"
                try:
                    r = w.post("/admin/cache/import", headers={"Authorization": f"Bearer {ADMIN}"},
                               content=json.dumps({"model": MODEL, "messages": [
                                   {"role": "user", "content": q}], "answer": f"Answer {i}."}))
                except httpx.HTTPError:
                    return
                if r.status_code == 200:
                    done.append((q, f"Answer {i}."))
                i += 1

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.monotonic() + 60
    while len(done) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.proc.send_signal(signal.SIGKILL)  # while the writer keeps importing
    server.proc.wait()
    stop.set()
    t.join()
    assert len(done) >= 20
    db = sqlite3.connect(server.data_dir / "cachegate.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    again = make_server(CONF)
    c = client(again)
    for q, a in done:
        r = only_if_cached(c, q)
        assert r.status_code == 200 and r.headers["X-Cache-Kind"] == "exact", q
        assert r.json()["choices"][0]["message"]["content"] == a


def test_cache_metrics_pass_promtool(server):
    c = client(server)
    import_lines(c, [("What is the capital of France?", "Paris.")])
    only_if_cached(c, "What is the capital of France?")
    only_if_cached(c, "What's the capital city of France?")
    text = c.get("/metrics").text
    assert 'cachegate_cache_lookups_total{kind="exact",result="hit"} 1' in text
    assert 'cachegate_cache_lookups_total{kind="semantic",result="hit"} 1' in text
    assert 'cachegate_cache_entries{tenant="default"} 1' in text
    assert "cachegate_cache_similarity_count 1" in text
    assert 'cachegate_cache_tokens_saved_total{kind="exact"}' in text
    p = subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
