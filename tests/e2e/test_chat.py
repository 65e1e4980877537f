"""End-to-end tests of POST /v1/chat/completions and /v1/completions, through the official
openai SDK and raw HTTP, on the default model."""

import json
import os
import pathlib
import re
import threading
import time

import httpx
import openai
import pytest

from conftest import DEVICE

# settings of the CPU backend alone (cpu_matmul, a KV pool sized by cpu_kv_cache_bytes in f32)
cpu_only = pytest.mark.skipif(DEVICE != "cpu", reason=f"a CPU backend setting ({DEVICE} run)")

MODEL = "smollm2-135m-instruct"


# These tests are about the engine: the answer caches (tested in test_cache.py) are off, so
# that a repeated question reaches the engine again.
@pytest.fixture
def make_server(make_server):
    return lambda conf_text="", args=(): make_server("[cache]\nenabled = false\n" + conf_text,
                                                     args)


@pytest.fixture
def server(make_server):
    return make_server()


def sdk(server):
    http = httpx.Client(verify=server.ssl_context(), timeout=120)
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)


def client(server):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120)


def ask(c, content, **kw):
    kw.setdefault("temperature", 0)
    return c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                     **kw)


def test_chat_completion_knows_paris(server):
    r = ask(sdk(server), "What is the capital of France?", max_tokens=40)
    assert r.object == "chat.completion" and r.model == MODEL and r.id.startswith("chatcmpl-")
    assert "Paris" in r.choices[0].message.content
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "stop"
    u = r.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.prompt_tokens_details.cached_tokens == 0


def test_stream_equals_non_stream(server):
    c = sdk(server)
    full = ask(c, "Name three colors.", max_tokens=24)
    chunks = list(ask(c, "Name three colors.", max_tokens=24, stream=True,
                      stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
    assert finishes[-1] == full.choices[0].finish_reason and all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert all(ch.id == chunks[0].id and ch.object == "chat.completion.chunk" for ch in chunks)


def test_sse_wire_format_ends_with_done(server):
    with client(server) as c:
        with c.stream("POST", "/v1/chat/completions",
                      json={"model": MODEL, "stream": True, "max_tokens": 4, "temperature": 0,
                            "messages": [{"role": "user", "content": "Hi"}]}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"] == "text/event-stream"
            events = [l for l in r.iter_lines() if l]
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events)
    assert len(events) >= 3
    # with include_usage, as OpenAI sends it: "usage": null in every chunk but the last
    for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
                       ("/v1/completions", {"prompt": "Hi"})):
        with client(server) as c:
            with c.stream("POST", path, json={"model": MODEL, "stream": True, "max_tokens": 4,
                                              "temperature": 0, **body,
                                              "stream_options": {"include_usage": True}}) as r:
                chunks = [json.loads(l[6:]) for l in r.iter_lines() if l and l != "data: [DONE]"]
        assert all("usage" in ch and ch["usage"] is None for ch in chunks[:-1]), chunks
        assert chunks[-1]["usage"]["completion_tokens"] >= 1 and chunks[-1]["choices"] == []


def test_completions_endpoint(server):
    c = sdk(server)
    r = c.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6,
                             temperature=0)
    assert r.object == "text_completion" and r.choices[0].text.strip()
    assert r.choices[0].finish_reason in ("length", "stop")
    s = list(c.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6,
                                  temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in s if ch.choices) == r.choices[0].text


def test_completions_default_to_16_tokens_and_refuse_unknown_arguments(server):
    """Without max_tokens a completion is 16 tokens at most, as OpenAI's and vLLM's are (a
    chat answer has engine.max_tokens_default); an argument of no completion's schema is
    refused, also through the SDK's extra_body."""
    c = sdk(server)
    r = c.completions.create(model=MODEL, prompt="Once upon a time, in a land far away,",
                             temperature=0)
    assert r.usage.completion_tokens == 16 and r.choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model=MODEL, prompt="Hi", max_tokens=2,
                             extra_body={"ignore_eos": True})
    assert e.value.body["param"] == "ignore_eos"
    assert "Unrecognized request argument supplied: ignore_eos" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                  max_tokens=2, extra_body={"temprature": 0})
    assert e.value.body["param"] == "temprature"


def test_an_assistant_refusal_in_the_history_is_its_text(server):
    c = sdk(server)
    ask = [{"role": "user", "content": "Say no."}]
    parts = c.chat.completions.create(model=MODEL, temperature=0, max_tokens=8, messages=ask + [
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"role": "user", "content": "Why?"}])
    text = c.chat.completions.create(model=MODEL, temperature=0, max_tokens=8, messages=ask + [
        {"role": "assistant", "content": "No."}, {"role": "user", "content": "Why?"}])
    assert parts.choices[0].message.content == text.choices[0].message.content
    assert parts.usage.prompt_tokens == text.usage.prompt_tokens


def test_completions_prompt_as_token_ids(server):
    """/v1/completions takes the prompt as token ids too (llama.cpp's ids for the text,
    committed fixture): the same greedy answer and prompt count as the text; ids out of the
    vocabulary are refused, naming prompt."""
    fx = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "engine" /
                     "llamacpp.json").read_text())
    row = next(t for t in fx["texts"] if t["text"].startswith("The quick brown fox"))
    c = sdk(server)
    text = c.completions.create(model=MODEL, prompt=row["text"], max_tokens=8, temperature=0)
    for prompt in (row["ids"], [row["ids"]]):
        ids = c.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0)
        assert ids.choices[0].text == text.choices[0].text
        assert ids.usage.prompt_tokens == text.usage.prompt_tokens == len(row["ids"])
    with client(server) as h:
        for prompt in ([1, -1], [10 ** 9]):
            r = h.post("/v1/completions", json={"model": MODEL, "prompt": prompt})
            assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text


def token_ids_row():
    fx = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "engine" /
                     "llamacpp.json").read_text())
    return next(t for t in fx["texts"] if t["text"].startswith("The quick brown fox"))


SEVERAL = ["The capital of France is", token_ids_row()["ids"], "1, 2, 3, 4,",
           "Once upon a time"]


def test_completions_of_several_prompts(server):
    """A completion of several prompts (strings or token ids, as LangChain's completions LLM
    sends its batches) has a choice a prompt, in their order, each the greedy answer of its
    prompt asked alone; its usage adds theirs up."""
    c = sdk(server)
    alone = [c.completions.create(model=MODEL, prompt=p, max_tokens=8, temperature=0)
             for p in SEVERAL]
    r = c.completions.create(model=MODEL, prompt=SEVERAL, max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert [ch.index for ch in r.choices] == [0, 1, 2, 3]
    assert [ch.text for ch in r.choices] == [a.choices[0].text for a in alone]
    assert all(ch.text for ch in r.choices)
    assert [ch.finish_reason for ch in r.choices] == [a.choices[0].finish_reason for a in alone]
    assert r.usage.prompt_tokens == sum(a.usage.prompt_tokens for a in alone)
    assert r.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_stream_of_several_prompts(server):
    """Streamed, the choices' chunks interleave under one id; each choice ends with its
    finish reason once, and the usage chunk adds them up."""
    c = sdk(server)
    whole = c.completions.create(model=MODEL, prompt=SEVERAL, max_tokens=8, temperature=0)
    chunks = list(c.completions.create(model=MODEL, prompt=SEVERAL, max_tokens=8,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True}))
    texts, finish = [""] * len(SEVERAL), [None] * len(SEVERAL)
    for ch in chunks[:-1]:
        assert len(ch.choices) == 1
        i = ch.choices[0].index
        assert finish[i] is None, "text after the choice's finish reason"
        texts[i] += ch.choices[0].text
        finish[i] = ch.choices[0].finish_reason
    assert texts == [ch.text for ch in whole.choices]
    assert finish == [ch.finish_reason for ch in whole.choices]
    assert len({ch.id for ch in chunks}) == 1
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_several_prompts_are_refused_together(server):
    """One bad prompt refuses the request, naming which; nothing is generated. More prompts
    than the engine runs and queues are refused too."""
    long = "word " * 9000
    with client(server) as h:
        for prompts, index, code in ((["Hello", ""], 1, None), (["Hello", [1, -1]], 1, None),
                                     (["Hello", 7], 1, None), ([long, "Hello"], 0,
                                                              "context_length_exceeded")):
            r = h.post("/v1/completions", json={"model": MODEL, "prompt": prompts})
            assert r.status_code == 400, r.text
            e = r.json()["error"]
            assert e["param"] == "prompt" and f"prompt[{index}]" in e["message"], e
            assert e["code"] == code
        r = h.post("/v1/completions", json={"model": MODEL, "prompt": ["ok", [1, 99999999]]})
        assert r.json()["error"]["message"].startswith("prompt[1][1] must be a token id"), r.text
        r = h.post("/v1/completions", json={"model": MODEL, "prompt": ["Hi"] * 273})
        assert r.status_code == 400 and "At most 272 prompts" in r.json()["error"]["message"]
    assert metric(server, "cachegate_engine_generated_tokens_total") in (None, 0)


def test_a_client_leaving_several_prompts_cancels_them_all(server):
    """A client that hangs up on a stream of several prompts cancels each of them: the
    engine runs nothing more and its KV blocks are free again."""
    leave_mid_stream(server, ["1, 2, 3, 4,", "a, b, c, d,", "10, 20, 30,"], 3)


def test_several_prompts_the_queue_cannot_take_are_refused_whole(make_server):
    """Prompts that would overrun the engine's queue are refused together (429), and those
    already queued are cancelled (their places come back): the engine ends with no request
    and no block held."""
    server = make_server("[engine]\nmax_num_seqs = 2\nmax_waiting = 2\n")
    with client(server) as c:
        with c.stream("POST", "/v1/completions",
                      json={"model": MODEL, "stream": True, "max_tokens": 2000,
                            "temperature": 0, "prompt": "1, 2, 3, 4,"}) as blocker:
            lines = blocker.iter_lines()
            next(lines)  # it runs: three places are left
            for stream in (False, True):  # refused before a stream starts: one JSON error
                r = c.post("/v1/completions", json={"model": MODEL, "max_tokens": 8,
                                                    "stream": stream,
                                                    "prompt": ["a", "b", "c", "d"]})
                assert r.status_code == 429 and r.headers["retry-after"] == "1", r.text
                assert r.json()["error"]["code"] == "rate_limit_exceeded"
                time.sleep(0.3)  # the engine drops the jobs it had queued and cancelled
            # the places come back once the engine has dropped the cancelled jobs
            deadline = time.time() + 10
            while True:
                r = c.post("/v1/completions", json={"model": MODEL, "max_tokens": 8,
                                                    "prompt": ["a", "b", "c"]})
                if r.status_code != 429 or time.time() > deadline:
                    break
                time.sleep(0.1)
            assert r.status_code == 200 and len(r.json()["choices"]) == 3, r.text
            # refused for the queue, nothing ran: told apart, and not a request of the usage
            metrics = c.get("/metrics").text
            assert 'cachegate_tenant_requests_total{tenant="default",result="busy"} 2\n' in \
                metrics, metrics
    assert engine_idle(server)


def test_several_prompts_time_out_together(make_server):
    server = make_server("[engine]\nrequest_timeout_ms = 400\n")
    body = {"model": MODEL, "max_tokens": 2000, "temperature": 0,
            "prompt": ["1, 2, 3, 4, 5, 6,", "Hello"]}
    with client(server) as c:
        r = c.post("/v1/completions", json=body)
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
    chunks = list(sdk(server).completions.create(stream=True, **body))
    finish = {ch.choices[0].index: ch.choices[0].finish_reason for ch in chunks
              if ch.choices[0].finish_reason}
    assert finish[0] == "length"


def test_stop_string_is_not_emitted(server):
    c = sdk(server)
    base = ask(c, "What is the capital of France?", max_tokens=40).choices[0].message.content
    assert "Paris" in base
    r = ask(c, "What is the capital of France?", max_tokens=40, stop=["Paris"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == base[:base.index("Paris")]


def test_content_parts_and_system_message(server):
    c = sdk(server)
    r = c.chat.completions.create(model=MODEL, temperature=0, max_tokens=20, messages=[
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": [{"type": "text", "text": "Capital of "},
                                     {"type": "text", "text": "France?"}]}])
    assert r.choices[0].message.content


def warm_prefix_cache(c, content):
    """Asks once so that the requests after it find the prompt in the prefix cache alike: a
    prompt computed whole and one computed after cached blocks may differ in their last bits
    where the engine is not token-invariant (its `engine ready` log line says: a processor
    without AVX2, or keys and values it attends to by query tiles), which F16 keys and
    values can round into a different draw."""
    ask(c, content, max_tokens=1)


def test_seeded_sampling_is_reproducible(server):
    c = sdk(server)
    kw = dict(temperature=1.0, max_tokens=16, seed=7)
    warm_prefix_cache(c, "Tell me a word.")
    a = ask(c, "Tell me a word.", **kw).choices[0].message.content
    b = ask(c, "Tell me a word.", **kw).choices[0].message.content
    assert a == b


def test_top_p_0_takes_the_most_likely_token_and_a_seed_may_be_written_as_a_real(server):
    """OpenAI's range for top_p is [0, 1]: 0 keeps the most likely token alone (it was a
    400). A seed of 7.0 is the seed 7 (it was a 400); 7.5 is no seed."""
    c = sdk(server)
    greedy = ask(c, "Tell me a word.", temperature=0, max_tokens=12).choices[0].message.content
    for seed in (1, 2):
        r = ask(c, "Tell me a word.", temperature=1.5, top_p=0, seed=seed, max_tokens=12,
                extra_headers={"Cache-Control": "no-cache, no-store"})
        assert r.choices[0].message.content == greedy
    kw = dict(temperature=1.0, max_tokens=16, extra_headers={"Cache-Control": "no-store"})
    a = ask(c, "Tell me a story.", seed=7, **kw).choices[0].message.content
    with client(server) as h:
        r = h.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "Tell me a story."}],
            "temperature": 1.0, "max_tokens": 16, "seed": 7.0},
            headers={"Cache-Control": "no-store"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == a
        r = h.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "seed": 7.5})
        assert r.status_code == 400 and r.json()["error"]["param"] == "seed", r.text


def test_top_k_and_min_p_are_applied(server):
    """top_k 1, or min_p 1, leaves the most likely token only: whatever the temperature and
    the seed, the answer is the greedy one (they were taken and ignored before)."""
    with client(server) as c:
        def text(**kw):
            r = c.post("/v1/completions", json={"model": MODEL, "prompt": "Once upon a time",
                                                "max_tokens": 12, **kw})
            assert r.status_code == 200, r.text
            return r.json()["choices"][0]["text"]

        greedy = text(temperature=0)
        for seed in (0, 1, 2):
            assert text(temperature=1.5, seed=seed, top_k=1) == greedy
            assert text(temperature=1.5, seed=seed, min_p=1) == greedy
        assert len({text(temperature=1.5, seed=s) for s in (0, 1, 2)}) > 1


@pytest.mark.parametrize("extra,param", [
    ({"max_tokens": 2 ** 31 - 1}, "max_tokens"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options"),
    ({"logprobs": "yes"}, "logprobs"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 1.5}, "top_logprobs"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "tool_choice": "auto", "logprobs": True}, "logprobs"),
    ({"tools": "f", "tool_choice": "none"}, "tools"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"response_format": {"type": "json_schema"}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {
        "type": "array", "uniqueItems": True}}}}, "response_format"),
    ({"modalities": ["text", "audio"]}, "modalities"),
    ({"top_k": -5}, "top_k"),
    ({"top_k": "a"}, "top_k"),
    ({"min_p": 2}, "min_p"),
    ({"min_p": -1}, "min_p"),
    # arguments of no route's schema (a typo, another server's extensions): named, as
    # OpenAI names them, not ignored (nor the answer cached as the default's)
    ({"temprature": 0}, "temprature"),
    ({"repetition_penalty": 1.5}, "repetition_penalty"),
    ({"min_tokens": 10}, "min_tokens"),
    ({"metadata": {"a": [1]}}, "metadata"),
    ({"web_search_options": {"search_context_size": "low"}}, "web_search_options"),
    # {} is OpenAI's own example of a search with the defaults: not a neutral value here
    ({"web_search_options": {}}, "web_search_options"),
    ({"audio": {}}, "audio"),
    ({"reasoning_effort": "low"}, "reasoning_effort"),
    ({"verbosity": "low"}, "verbosity"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "string"}}}], "tool_choice": "required"}, "tools"),
])
def test_unsupported_or_bad_chat_parameters(server, extra, param):
    """A parameter this server does not implement is refused naming it, not ignored (a
    client that asked for tools or JSON would take plain text for the model's choice)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **extra}
    with client(server) as c:
        r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["message"]


def test_neutral_values_of_unsupported_parameters_pass(server):
    """What SDKs and frameworks send by default asks for nothing and is answered."""
    c = sdk(server)
    r = c.chat.completions.create(model=MODEL, max_tokens=4, temperature=0, logprobs=False,
                                  tools=[], tool_choice="none",
                                  response_format={"type": "text"},
                                  messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content
    # tools that tool_choice "none" forbids calling: answered in text (agent frameworks send
    # their tools with every request)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    r = c.chat.completions.create(model=MODEL, max_tokens=4, temperature=0, tools=tools,
                                  tool_choice="none",
                                  messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls
    t = c.completions.create(model=MODEL, prompt="Hello", max_tokens=4, temperature=0,
                             echo=False, best_of=1, suffix=None, logprobs=None)
    assert t.choices[0].text and t.choices[0].logprobs is None
    with client(server) as h:  # false, 0 and "" ask for nothing, as before
        for extra in ({"logprobs": False}, {"logprobs": 0, "top_logprobs": 0},
                      {"logprobs": "", "top_logprobs": None}):
            r = h.post("/v1/chat/completions", json={
                "model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}],
                **extra})
            assert r.status_code == 200 and r.json()["choices"][0]["logprobs"] is None, r.text
        for neutral in (False, "", [], {}):
            r = h.post("/v1/completions", json={"model": MODEL, "prompt": "Hello",
                                                "max_tokens": 2, "logprobs": neutral})
            assert r.status_code == 200 and r.json()["choices"][0]["logprobs"] is None, r.text
    with client(server) as h:
        for extra, param in (({"echo": True}, "echo"), ({"best_of": 2}, "best_of"),
                             ({"logprobs": 21}, "logprobs"), ({"logprobs": -1}, "logprobs"),
                             ({"logprobs": True}, "logprobs"), ({"logprobs": "2"}, "logprobs"),
                             ({"suffix": "x"}, "suffix")):
            r = h.post("/v1/completions", json={"model": MODEL, "prompt": "Hello", **extra})
            assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text


def test_logprobs_of_chat_streamed_and_not(server):
    """Each token of the answer with its log-probability and the most likely alternatives,
    as the openai SDK reads them; greedy, the chosen token is the most likely one."""
    c = sdk(server)
    warm_prefix_cache(c, "Name three colors.")
    r = ask(c, "Name three colors.", max_tokens=12, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens  # the end token is not counted
    assert "".join(e.token for e in content) == r.choices[0].message.content
    for e in content:
        assert -30 < e.logprob <= 0 and e.bytes == list(e.token.encode())
        assert len(e.top_logprobs) == 3
        assert e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= \
            e.top_logprobs[2].logprob
    streamed = []
    for ch in ask(c, "Name three colors.", max_tokens=12, logprobs=True, top_logprobs=3,
                  stream=True):
        if ch.choices and ch.choices[0].logprobs:
            # each chunk's records are those of the text it carries
            assert bytes(b for e in ch.choices[0].logprobs.content for b in e.bytes) == \
                (ch.choices[0].delta.content or "").encode()
            streamed += ch.choices[0].logprobs.content
    assert [e.token for e in streamed] == [e.token for e in content]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in content],
                                                          abs=1e-4)
    # characters of several tokens: a record a token, its bytes in the chunk that completes
    # the character (a cut at max_tokens ends with U+FFFD, as the content does)
    r = ask(c, "How do you say hello in Chinese?", max_tokens=24, logprobs=True)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert any(len(e.bytes) != len(e.token.encode()) for e in content), "split characters"
    assert bytes(b for e in content for b in e.bytes).decode(errors="replace") == \
        r.choices[0].message.content
    got = b""
    for ch in ask(c, "How do you say hello in Chinese?", max_tokens=24, logprobs=True,
                  stream=True):
        if ch.choices and ch.choices[0].logprobs:
            part = bytes(b for e in ch.choices[0].logprobs.content for b in e.bytes)
            assert part.decode(errors="replace") == (ch.choices[0].delta.content or "")
            got += part
    assert got.decode(errors="replace") == r.choices[0].message.content
    # without top_logprobs, the chosen tokens alone; without logprobs, null
    r = ask(c, "Name three colors.", max_tokens=4, logprobs=True)
    assert r.choices[0].logprobs.content and \
        all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)
    assert ask(c, "Name three colors.", max_tokens=4).choices[0].logprobs is None


def test_logprobs_of_completions(server):
    """The completions form: tokens, token_logprobs, top_logprobs, text_offset; also for
    several prompts in one request."""
    c = sdk(server)
    r = c.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=8,
                             temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text
    assert len(lp.token_logprobs) == len(lp.tokens) == len(lp.top_logprobs) == \
        len(lp.text_offset)
    assert lp.text_offset[0] == 0
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    for t, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert l <= 0 and 1 <= len(top) <= 3 and top[t] == l  # the top 2 and the chosen one
    both = c.completions.create(model=MODEL, prompt=["The capital of France is", "One, two,"],
                                max_tokens=8, temperature=0, logprobs=0)
    assert both.choices[0].logprobs.tokens == lp.tokens
    # run beside another prompt, its products sum in another order: within 0.01
    assert both.choices[0].logprobs.token_logprobs == pytest.approx(lp.token_logprobs, abs=1e-2)
    assert "".join(both.choices[1].logprobs.tokens) == both.choices[1].text
    assert [list(top) for top in both.choices[1].logprobs.top_logprobs] == \
        [[t] for t in both.choices[1].logprobs.tokens]  # logprobs 0: the chosen token alone


def test_context_length_is_checked_before_the_engine(make_server):
    """A prompt longer than engine.max_model_len, or than the KV pool holds, or that leaves
    no room for the max_tokens the request sets, is a 400 context_length_exceeded naming
    the parameter and the numbers, streamed or not (before, a stream got a second HTTP
    response inside its body); a prompt that fits with the default max_tokens runs to
    the context's end."""
    server = make_server("[engine]\nmax_model_len = 96\nmax_tokens_default = 512\n")
    long = "word " * 120
    with client(server) as c:
        for stream in (False, True):
            r = c.post("/v1/chat/completions", json={
                "model": MODEL, "stream": stream,
                "messages": [{"role": "user", "content": long}]})
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["code"] == "context_length_exceeded" and err["param"] == "messages"
            assert "96" in err["message"]
        r = c.post("/v1/completions", json={"model": MODEL, "prompt": long})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
        r = c.post("/v1/chat/completions", json={
            "model": MODEL, "max_tokens": 90, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "max_tokens"
        assert r.json()["error"]["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        list(ask(sdk(server), long, stream=True))
    # megabytes are refused by their length, without being tokenized (which held every
    # other client for seconds)
    huge = "x" * 4_000_000
    with client(server) as c:
        r = c.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": huge}]})
        err = r.json()["error"]
        assert err["code"] == "context_length_exceeded" and "at least" in err["message"], err
        assert err["param"] == "messages"
        r = c.post("/v1/completions", json={"model": MODEL, "prompt": huge})
        err = r.json()["error"]
        assert err["code"] == "context_length_exceeded" and "at least" in err["message"], err
    end = special_ids()[2]
    r = ask(sdk(server), "Count from 1 to 100.", logit_bias={str(end): -100})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens + r.usage.completion_tokens <= 96
    server.stop()
    server = make_server("[engine]\nnum_gpu_blocks_override = 4\nblock_size = 16\n")
    with client(server) as c:
        r = c.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": long}]})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "context_length_exceeded"
    assert "KV cache holds 64 positions" in r.json()["error"]["message"]


def test_a_prompt_with_no_encodable_text_names_the_prompt(server):
    with client(server) as c:
        r = c.post("/v1/completions", json={"model": MODEL, "prompt": "\u0004\u0006"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text
    assert "vocabulary" in r.json()["error"]["message"]


def test_n_answers_of_one_question(server):
    """n choices, each its own draw (seeded: the seed plus the choice's place), none from
    the caches; greedy, they agree; streamed, each choice's chunks carry its index."""
    c = sdk(server)
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Name a fruit."}],
              max_tokens=12)
    r = c.chat.completions.create(n=3, temperature=1.0, seed=5, **kw)
    assert [ch.index for ch in r.choices] == [0, 1, 2]
    texts = [ch.message.content for ch in r.choices]
    assert all(texts) and len(set(texts)) > 1, texts
    # usage: the prompt once, as OpenAI counts it, and every choice's tokens
    one = c.chat.completions.create(temperature=0, **kw)
    assert r.usage.prompt_tokens == one.usage.prompt_tokens
    assert 3 <= r.usage.completion_tokens <= 36
    greedy = c.chat.completions.create(n=2, temperature=0, **kw)
    assert greedy.choices[0].message.content == greedy.choices[1].message.content
    with client(server) as h:  # never answered from the caches
        body = {"model": MODEL, "messages": kw["messages"], "max_tokens": 12, "n": 2,
                "temperature": 0}
        h.post("/v1/chat/completions", json=body)
        assert h.post("/v1/chat/completions", json=body).headers.get("X-Cache") != "HIT"
    got = {}
    stream = c.chat.completions.create(n=2, temperature=1.0, seed=5, stream=True,
                                       stream_options={"include_usage": True}, **kw)
    finishes = {}
    for ch in stream:
        for x in ch.choices:
            got[x.index] = got.get(x.index, "") + (x.delta.content or "")
            if x.finish_reason:
                finishes[x.index] = x.finish_reason
        if ch.usage:
            assert ch.usage.prompt_tokens == r.usage.prompt_tokens
    assert sorted(got) == [0, 1] and all(got.values()) and sorted(finishes) == [0, 1]


def test_n_answers_of_each_prompt_of_a_completion(server):
    r = sdk(server).completions.create(model=MODEL, prompt=["The sky is", "Water is"], n=2,
                                       temperature=1.0, max_tokens=6, seed=1)
    assert [ch.index for ch in r.choices] == [0, 1, 2, 3]
    assert all(ch.text for ch in r.choices)
    # each prompt counted once, as for n = 1
    one = sdk(server).completions.create(model=MODEL, prompt=["The sky is", "Water is"],
                                         temperature=0, max_tokens=1)
    assert r.usage.prompt_tokens == one.usage.prompt_tokens


@pytest.mark.parametrize("body,status,param,code", [
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model",
     "model_not_found"),
    # the embedding model /v1/models lists beside the chat model: not "does not exist"
    ({"model": "all-minilm-l6-v2", "messages": [{"role": "user", "content": "hi"}]}, 400,
     "model", "model_not_supported"),
    ({"model": MODEL, "messages": []}, 400, "messages", None),
    ({"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]}, 400,
     "messages.[0].role", None),  # where in the messages, as OpenAI names it
    # earlier calls and their results must be whole (test_tools.py reads them)
    ({"model": MODEL, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather"}}]},
        {"role": "user", "content": "And?"}]}, 400, "messages.[1].tool_calls.[0]", None),
    ({"model": MODEL, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "tool", "content": "sunny"}]}, 400, "messages.[1].tool_call_id", None),
    ({"model": MODEL, "messages": [
        {"role": "assistant", "content": None,
         "function_call": {"name": "weather", "arguments": "{}"}},
        {"role": "user", "content": "And?"}]}, 400, "messages.[0].function_call", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 17}, 400, "n", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 0}, 400, "n", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 2,
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required"},
     400, "n", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": 3}, 400,
     "temperature", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, 400,
     "max_tokens", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stop": ["a"] * 5}, 400,
     "stop", None),
    ({"model": MODEL, "prompt": "x"}, 400, "prompt", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": []}]}, 400,
     "messages.[0].content", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "logit_bias": [1]}, 400,
     "logit_bias", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
      "logit_bias": {"abc": 1}}, 400, "logit_bias", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
      "logit_bias": {"-1": 1}}, 400, "logit_bias", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
      "logit_bias": {"1000000": 1}}, 400, "logit_bias", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
      "logit_bias": {"5": 101}}, 400, "logit_bias", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
      "logit_bias": {"5": "up"}}, 400, "logit_bias", None),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
      "logit_bias": {str(i): 1 for i in range(1025)}}, 400, "logit_bias", None),
])
def test_invalid_requests(server, body, status, param, code):
    with client(server) as c:
        r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["code"] == code and err["message"]
    if "tool_calls" in str(body):
        assert "tool_calls[0] must be" in err["message"], err
    if "function_call" in str(body):
        assert "use tool_calls" in err["message"], err
    if "'tool'" in str(body):
        assert "tool_call_id" in err["message"], err


def special_ids():
    """(<|im_start|>, "user", <|im_end|>) as llama.cpp tokenizes them (committed fixture)."""
    fx = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "engine" /
                     "llamacpp.json").read_text())
    ids = next(t["ids"] for t in fx["texts"] if t["text"] == "<|im_start|>user\nHi<|im_end|>")
    return ids[0], ids[1], ids[-1]


def test_logit_bias_forces_and_bans_tokens(server):
    start, user, end = special_ids()
    c = sdk(server)
    # +100 makes greedy decoding pick the token every time, here the word "user"
    r = c.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=3,
                             temperature=0, logit_bias={str(user): 100})
    assert r.choices[0].text == "user" * 3 and r.choices[0].finish_reason == "length"
    # -100 on the end-of-turn tokens: the answer runs to max_tokens instead of ending
    plain = ask(c, "What is the capital of France?", max_tokens=48)
    assert plain.choices[0].finish_reason == "stop" and plain.usage.completion_tokens < 48
    long = ask(c, "What is the capital of France?", max_tokens=48,
               logit_bias={str(end): -100, str(start): -100, "0": -100})
    assert long.choices[0].finish_reason == "length" and long.usage.completion_tokens == 48
    assert long.choices[0].message.content.startswith(plain.choices[0].message.content)
    # the same through a stream
    chunks = list(ask(c, "What is the capital of France?", max_tokens=48, stream=True,
                      logit_bias={str(end): -100, str(start): -100, "0": -100}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == long.choices[0].message.content


def cpu_isa():
    """The kernels the engine should say it runs (`cpu_isa`): the processor's best, under
    the cap CACHEGATE_CPU_ISA of the environment the servers inherit."""
    with open("/proc/cpuinfo") as f:
        flags = set(next((line.split() for line in f if line.startswith("flags")), []))
    cap = os.environ.get("CACHEGATE_CPU_ISA") or "avx512"
    if cap == "avx512" and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512-vnni" if "avx512_vnni" in flags else "avx512"
    if cap != "portable" and {"avx2", "fma"} <= flags:
        return "avx2" if "f16c" in flags else "avx2 without f16c"
    return "portable"


@pytest.mark.parametrize("matmul", ["f32", pytest.param("int8", marks=cpu_only)])
def test_concurrent_requests_match_sequential(make_server, matmul):
    """Greedy answers are the same alone and in a busy batch, with F32 products and with
    engine.cpu_matmul = int8 (8-bit activations, where the processor has AVX2; the
    engine says which it runs), the prefix cache on: the questions share the chat
    template's system prompt, so they are prefilled from cached blocks of different
    lengths. int8 rounding magnifies last-bit differences between those paths unless
    every token attends by itself (the engine says so: token_invariant, with AVX-512 or
    AVX2);
    without that the prefix cache is off for int8, and the answers may part at near ties
    (same_or_near_tie()). Where the engine is token-invariant (int8 or F32 products, with
    AVX-512 or AVX2) they are the same token for token."""
    server = make_server(f"[engine]\ncpu_matmul = {matmul}\n")
    ready = server.wait_log(lambda l: l.get("msg") == "engine ready")
    assert ready["cpu_isa"] == cpu_isa()
    assert ready["cpu_matmul"] == ("int8" if matmul == "int8" and ready["cpu_isa"] != "portable"
                                   else "f32")
    if ready["cpu_matmul"] == "int8" and ready["token_invariant"] is not True:
        server.stop()
        server = make_server("[engine]\ncpu_matmul = int8\nenable_prefix_caching = false\n")
    alone, together = alone_and_together(server, ["What is 2+2?", "Name a fruit.",
                                                  "What color is the sky?", "Say hello.",
                                                  "What is the capital of Italy?",
                                                  "Count to three."], 16)
    same_or_near_tie(alone, together, exact=ready["token_invariant"] is True)


def alone_and_together(server, questions, max_tokens):
    """Greedy answers to the questions asked one at a time, then all at once: {question:
    [(token, its logprob, the runner-up's logprob), ...]}."""
    def answer(c, q):
        r = ask(c, q, max_tokens=max_tokens, logprobs=True, top_logprobs=2)
        return [(e.token, e.logprob, e.top_logprobs[1].logprob)
                for e in r.choices[0].logprobs.content]

    c = sdk(server)
    alone = {q: answer(c, q) for q in questions}
    together = {}

    def one(q):
        together[q] = answer(sdk(server), q)

    threads = [threading.Thread(target=one, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return alone, together


# Where the engine is not token-invariant (its `engine ready` log line says: without AVX2,
# say), a prompt computed in another batch or after cached blocks differs in its last bits,
# which F16 keys and values round into differences of about 1e-3 in the logits: a greedy
# answer may then part from the other at a near tie, and only there.
NEAR_TIE = 0.05


def same_or_near_tie(alone, together, exact=False):
    """Each question's greedy answers are the same token for token, or (exact False) part
    where both runs' two most likely tokens were within NEAR_TIE of each other."""
    for q in alone:
        a, b = alone[q], together[q]
        if [t for t, _, _ in a] == [t for t, _, _ in b]:
            continue
        assert not exact, (q, a, b)
        # (one may have ended at i, where the other went on: an end token has no record)
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x[0] != y[0]), min(len(a), len(b)))
        for run in (a, b):
            assert i == len(run) or run[i][1] - run[i][2] < NEAR_TIE, (q, i, a, b)


def metric(server, name):
    with client(server) as c:
        text = c.get("/metrics").text
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None  # None: not set yet


def wait_metric(server, name, value, timeout=5):
    """The metric once it has the value, or after timeout: the engine thread publishes its
    gauges after each step."""
    deadline = time.time() + timeout
    while metric(server, name) != value and time.time() < deadline:
        time.sleep(0.05)
    return metric(server, name)


def engine_idle(server, timeout=10):
    """Whether the engine comes to run nothing and hold no KV block within timeout."""
    deadline = time.time() + timeout
    while True:
        idle = (metric(server, "cachegate_engine_running_requests") == 0 and
                metric(server, "cachegate_engine_kv_blocks_used") == 0)
        if idle or time.time() > deadline:
            return idle
        time.sleep(0.1)


def leave_mid_stream(server, prompt, running):
    """Hangs up on a stream of 2000 tokens a prompt once the engine runs its running
    sequences: it comes to run nothing and hold no block, having generated far less."""
    with client(server) as c:
        with c.stream("POST", "/v1/completions",
                      json={"model": MODEL, "stream": True, "max_tokens": 2000,
                            "temperature": 0, "prompt": prompt}) as r:
            lines = r.iter_lines()
            for _ in range(3 * running):
                next(lines)
            assert wait_metric(server, "cachegate_engine_running_requests",
                               running) == running
    assert engine_idle(server)
    assert metric(server, "cachegate_engine_generated_tokens_total") < 1000 * max(running, 2)


def test_disconnect_cancels_and_frees_blocks(server):
    leave_mid_stream(server, "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,", 1)


def test_full_queue_answers_429(make_server):
    server = make_server("[engine]\nmax_num_seqs = 1\nmax_waiting = 1\n")
    results = []

    def one(i):  # (six different requests: the same ones would wait for the first)
        with client(server) as c:
            r = c.post("/v1/chat/completions",
                       json={"model": MODEL, "max_tokens": 64, "temperature": 0,
                             "messages": [{"role": "user",
                                           "content": f"Tell me story number {i}."}]})
            results.append((r.status_code, r.headers.get("retry-after"), r.text,
                            r.reason_phrase))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = [s for s, _, _, _ in results]
    assert 200 in codes and 429 in codes, codes
    for s, ra, body, reason in results:
        if s == 429:
            assert ra == "1" and reason == "Too Many Requests"
            assert json.loads(body)["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize("seqs,waiting,sent", [(4, 2, 12), (1, 1, 8)])
def test_queue_takes_the_running_batch_and_max_waiting(make_server, seqs, waiting, sent):
    """max_waiting counts requests beyond what the running batch takes: of requests arriving
    at once, exactly max_num_seqs + max_waiting are answered (requests the engine thread
    had not yet picked up counted as waiting before, and only about max_waiting got
    through; then those it had picked up counted nowhere during its step, and more got
    through); the rest get 429 with Retry-After."""
    server = make_server(f"[engine]\nmax_num_seqs = {seqs}\nmax_waiting = {waiting}\n")
    results = []
    start = threading.Barrier(sent)

    def one(i):
        with client(server) as c:
            c.get("/health")  # connected before the barrier
            start.wait()
            # long enough that none ends before all have arrived; each its own (the same
            # ones would wait for the first)
            try:
                r = c.post("/v1/chat/completions",
                           json={"model": MODEL, "max_tokens": 96, "temperature": 0,
                                 "messages": [{"role": "user",
                                               "content": f"Tell me story number {i}."}]})
            except httpx.HTTPError as e:  # (a thread's exception would be lost, not failed)
                results.append((type(e).__name__, str(e)))
                return
            results.append((r.status_code, r.headers.get("retry-after")))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(sent)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == sent, results
    ok = sum(1 for s, _ in results if s == 200)
    assert ok == seqs + waiting, results
    assert all(s == 429 and ra == "1" for s, ra in results if s != 200), results


def test_answer_that_would_outgrow_the_kv_pool_ends_with_length(make_server):
    """A prompt that fits the KV pool with an answer that would not: the answer runs until
    the pool is full and ends with length, at once (it used to preempt itself and
    recompute until the request timed out, holding back every other request), and a
    request beside it is answered too."""
    server = make_server("[engine]\nnum_gpu_blocks_override = 4\nblock_size = 16\n"
                         "enable_prefix_caching = false\n")
    end = special_ids()[2]
    c = sdk(server)
    beside = []
    t = threading.Thread(target=lambda: beside.append(ask(sdk(server), "Say hi.", max_tokens=8)))
    t0 = time.monotonic()
    t.start()
    r = ask(c, "Count from 1 to 100.", max_tokens=200, logit_bias={str(end): -100})
    t.join()
    assert time.monotonic() - t0 < 30
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens + r.usage.completion_tokens == 4 * 16 + 1
    assert beside[0].choices[0].message.content
    chunks = list(ask(c, "Count from 1 to 100.", max_tokens=200, logit_bias={str(end): -100},
                      stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == \
        r.choices[0].message.content


def test_repeated_system_prompt_reports_cached_tokens(server):
    c = sdk(server)
    system = ("You are the support assistant of a large online bookshop. Answer briefly, "
              "politely and only about orders, deliveries, returns and payments. ") * 3
    msgs = lambda q: [{"role": "system", "content": system}, {"role": "user", "content": q}]
    first = c.chat.completions.create(model=MODEL, messages=msgs("Where is my order?"),
                                      temperature=0, max_tokens=8)
    second = c.chat.completions.create(model=MODEL, messages=msgs("Can I return a book?"),
                                       temperature=0, max_tokens=8)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= 48 and cached % 16 == 0 and cached < second.usage.prompt_tokens
    chunks = list(c.chat.completions.create(model=MODEL, messages=msgs("Where is my order?"),
                                            temperature=0, max_tokens=8, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= cached
    assert metric(server, "cachegate_engine_prefix_cache_hit_tokens_total") >= 2 * cached


def test_prefix_cache_off(make_server):
    server = make_server("[engine]\nenable_prefix_caching = false\n")
    c = sdk(server)
    system = "You are a helpful assistant who answers in one short sentence. " * 4
    for _ in range(2):
        r = c.chat.completions.create(model=MODEL, temperature=0, max_tokens=4, messages=[
            {"role": "system", "content": system}, {"role": "user", "content": "Hi"}])
        assert r.usage.prompt_tokens_details.cached_tokens == 0


def test_non_streaming_client_that_hangs_up_is_cancelled(server):
    with client(server) as c:
        with pytest.raises(httpx.ReadTimeout):
            # a count the model keeps continuing: far longer than the client waits
            c.post("/v1/completions", timeout=1.0,
                   json={"model": MODEL, "max_tokens": 2000, "temperature": 0,
                         "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"})
    deadline = time.time() + 10
    # a gauge not published yet: the engine never stepped, so nothing runs
    while time.time() < deadline and \
            (metric(server, "cachegate_engine_running_requests") or 0) != 0:
        time.sleep(0.1)
    assert (metric(server, "cachegate_engine_running_requests") or 0) == 0
    assert (metric(server, "cachegate_engine_kv_blocks_used") or 0) == 0
    assert (metric(server, "cachegate_engine_generated_tokens_total") or 0) < 2000
    assert server.wait_log(lambda l: l.get("status") == 499, timeout=2)


def test_the_kv_pool_is_published_from_the_start(server):
    """Before any request the pool's blocks are on /metrics, all free (dashboards saw no
    data until the engine's first step)."""
    ready = server.wait_log(lambda l: l.get("msg") == "engine ready")
    with client(server) as c:
        text = c.get("/metrics").text
    blocks = {m[1]: float(m[2]) for m in
              re.finditer(r'^cachegate_engine_kv_blocks\{state="(\w+)"\} (\S+)$', text, re.M)}
    assert blocks == {"cached": 0, "evictable": 0, "free": int(ready["kv_blocks"])}, blocks
    assert metric(server, "cachegate_engine_kv_blocks_used") == 0


def test_engine_metrics_after_requests_pass_promtool(server):
    import subprocess
    from conftest import PROMTOOL
    ask(sdk(server), "Say hi.", max_tokens=8)
    with client(server) as c:
        text = c.get("/metrics").text
    for name in ("cachegate_engine_time_to_first_token_seconds_count",
                 "cachegate_engine_request_duration_seconds_count"):
        assert float(re.search(rf"^{name} (\S+)$", text, re.M).group(1)) >= 1
    assert metric(server, "cachegate_engine_generated_tokens_total") >= 1
    check = subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, text=True,
                           capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr


@cpu_only
def test_metrics_say_what_the_weights_take(server):
    """/metrics gives the chat model's weights in the process's own memory and the model
    file mapped. Where the matrices are regrouped (AVX2, AVX-512) memory holds their
    regrouped forms, about the file's size (112 MB against 98), and no F32 copy: the token
    embeddings' alone (49,152 x 576) would add 113 MB."""
    ready = server.wait_log(lambda l: l.get("msg") == "engine ready")
    path = pathlib.Path(ready["model"])
    if not path.is_absolute():  # (relative to the repository, where the server runs)
        path = pathlib.Path(__file__).resolve().parents[2] / path
    with client(server) as c:
        text = c.get("/metrics").text

    def weights(memory):
        m = re.search(rf'^cachegate_engine_weights_bytes{{memory="{memory}"}} (\S+)$', text,
                      re.M)
        assert m, text
        return float(m.group(1))

    assert weights("mapped") == path.stat().st_size
    if ready["cpu_isa"].startswith("avx512") or ready["cpu_isa"] == "avx2":
        assert 0.8 < weights("host") / weights("mapped") < 1.5
    else:  # the portable paths keep F32 copies
        assert weights("host") > weights("mapped")


def test_request_timeout(make_server):
    server = make_server("[engine]\nrequest_timeout_ms = 400\n")
    body = {"model": MODEL, "max_tokens": 2000, "temperature": 0,
            "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"}
    with client(server) as c:
        t0 = time.time()
        r = c.post("/v1/completions", json=body)
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
        assert time.time() - t0 < 5
    chunks = list(sdk(server).completions.create(stream=True, **body))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(ch.choices[0].text for ch in chunks)


def test_idle_timeout_does_not_cut_a_waiting_stream(make_server):
    # the first text takes longer than the idle timeout: the stream must survive it
    server = make_server("[server]\nidle_timeout_ms = 300\n[engine]\nmax_num_seqs = 1\n")
    body = {"model": MODEL, "max_tokens": 60, "temperature": 0,
            "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"}
    c = sdk(server)
    done = []
    blocker = threading.Thread(target=lambda: done.append(c.completions.create(**body)))
    blocker.start()  # occupies the only engine slot for a while
    time.sleep(0.05)
    chunks = list(c.completions.create(stream=True, **body))
    blocker.join()
    assert chunks[-1].choices[0].finish_reason == "length"
    assert done and done[0].choices[0].finish_reason == "length"


@cpu_only
def test_f16_kv_cache_holds_twice_the_blocks_and_answers(make_server):
    """engine.kv_cache_dtype = f16, the default, and bf16: the same memory budget holds
    twice the KV blocks of f32, q8_0 nearly twice those of f16 (a byte a value plus a
    float scale for each position's 64 of a head), and the engine still knows the answer
    (greedy), the prefix cache included."""
    sizes = {}
    answers = {}
    for dtype in ("f32", "f16", "bf16", "q8_0", "default"):
        line = "" if dtype == "default" else f"kv_cache_dtype = {dtype}\n"
        server = make_server(f"[engine]\n{line}cpu_kv_cache_bytes = 64M\n")
        ready = server.wait_log(lambda l: l.get("msg") == "engine ready")
        sizes[dtype] = int(ready["kv_blocks"])
        c = sdk(server)
        first = ask(c, "What is the capital of France?", max_tokens=40)
        again = ask(c, "What is the capital of France?", max_tokens=40)
        assert again.usage.prompt_tokens_details.cached_tokens > 0
        assert again.choices[0].message.content == first.choices[0].message.content
        answers[dtype] = first.choices[0].message.content
        server.stop()
    assert sizes["f16"] >= 2 * sizes["f32"] and sizes["default"] == sizes["f16"]
    assert sizes["bf16"] == sizes["f16"]
    assert 1.8 * sizes["f16"] <= sizes["q8_0"] < 2 * sizes["f16"]
    assert all("Paris" in a for a in answers.values())
    assert answers["default"] == answers["f16"]



def test_fewer_threads_than_cores(make_server):
    """engine.threads and embedder.threads below the core count: the forward passes run on
    the engine's and the embedder's own threads, with that many OpenMP threads (a count set
    only on the thread that loaded the models left those at one per core, past the end of
    the per-thread scratch: the first chat request crashed the server and embeddings hung).
    Chat answers, concurrent ones among them, and embeddings still come back right."""
    server = make_server("[engine]\nthreads = 1\n[embedder]\nthreads = 1\n")
    c = sdk(server)
    assert "Paris" in ask(c, "What is the capital of France?", max_tokens=40) \
        .choices[0].message.content
    alone, together = alone_and_together(server, ["What is 2+2?", "Name a fruit.",
                                                  "Say hello.", "Count to three."], 12)
    same_or_near_tie(alone, together)
    text = "What is the capital of France?"
    ref = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "embedder" /
                      "reference.json").read_text())
    want = next(row for row in ref["texts"] if row["text"] == text)
    got = c.embeddings.create(model="all-minilm-l6-v2", input=[text], encoding_format="float")
    v, w = got.data[0].embedding, want["embedding"]
    dot = sum(x * y for x, y in zip(v, w))
    assert dot / (sum(x * x for x in v) * sum(y * y for y in w)) ** 0.5 >= 0.9999


def test_fields_openai_always_sends(server):
    """system_fingerprint, service_tier and usage.completion_tokens_details were missing:
    code that reads usage.completion_tokens_details.reasoning_tokens, as OpenAI always sends
    it, raised AttributeError. The fingerprint stays while the configuration does; every
    shape of reply (one answer, several, streamed, legacy completions) carries them."""
    api = sdk(server)
    msgs = [{"role": "user", "content": "Say hi."}]
    one = api.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4,
                                      temperature=0)
    assert one.system_fingerprint.startswith("fp_") and len(one.system_fingerprint) == 13
    assert one.service_tier == "default"
    assert one.usage.completion_tokens_details.reasoning_tokens == 0
    assert one.usage.prompt_tokens_details.audio_tokens == 0
    two = api.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4, n=2,
                                      temperature=0)
    assert two.system_fingerprint == one.system_fingerprint
    assert two.usage.completion_tokens_details.rejected_prediction_tokens == 0
    chunks = list(api.chat.completions.create(
        model=MODEL, messages=msgs, max_tokens=4, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert all(ch.system_fingerprint == one.system_fingerprint for ch in chunks)
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 0
    legacy = api.completions.create(model=MODEL, prompt="Hello", max_tokens=3)
    assert legacy.system_fingerprint == one.system_fingerprint
    # the hand-written reply and the JSON one hold the same keys
    with client(server) as c:
        a = c.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs,
                                                 "max_tokens": 4}).json()
        b = c.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs,
                                                 "max_tokens": 4, "n": 2}).json()
    assert list(a) == list(b) and list(a["usage"]) == list(b["usage"])
    assert a["usage"]["completion_tokens_details"] == b["usage"]["completion_tokens_details"]
