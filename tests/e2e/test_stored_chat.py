"""End-to-end tests of OpenAI's stored chat completions through the official openai SDK:
a chat request with "store": true is read back as it was answered (JSON, a stream put
together, a cache hit, tool calls, n answers), with its messages; listed in order, by pages,
by model and metadata; its metadata changed; deleted; kept across a restart; a tenant's
own alone; and kept apart from the Responses API's stored responses."""

import time

import httpx
import openai
import pytest

MODEL = "smollm2-135m-instruct"
NO_CACHE = "[cache]\nenabled = false\n"
ADMIN = "stored-test-admin"


def sdk(server, key="unused"):
    http = httpx.Client(verify=server.ssl_context(), timeout=120)
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, http_client=http)


def client(server, key=None):
    h = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120,
                        headers=h)


def ask(s, content, **kw):
    return s.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=kw.pop("max_tokens", 12),
        messages=[{"role": "user", "content": content}], **kw)


def test_a_stored_completion_reads_back_as_it_was_answered(make_server):
    server = make_server()
    s = sdk(server)
    msgs = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is the capital"},
                                         {"type": "text", "text": "of France?"}]}]
    c = s.chat.completions.create(model=MODEL, temperature=0, max_tokens=16, messages=msgs,
                                  store=True, metadata={"topic": "geo"})
    got = s.chat.completions.retrieve(c.id)
    # as it was replied, and what it repeats of its request, as OpenAI's do
    said = {"metadata", "request_id", "seed", "temperature", "top_p", "presence_penalty",
            "frequency_penalty", "tools", "tool_choice", "response_format", "input_user"}
    assert got.model_dump(exclude=said) == c.model_dump(exclude=said)
    assert got.metadata == {"topic": "geo"} and c.metadata is None
    assert got.model_extra == {"request_id": c._request_id, "seed": None, "temperature": 0,
                               "top_p": 1.0, "presence_penalty": 0.0,
                               "frequency_penalty": 0.0, "tools": None, "tool_choice": None,
                               "response_format": None, "input_user": None}
    # its messages, each with an id of its own, the parts as given and as one text
    m = s.chat.completions.messages.list(c.id)
    assert [x.id for x in m.data] == [f"{c.id}-0", f"{c.id}-1"]
    assert m.data[0].role == "system" and m.data[0].content == "Be brief."
    assert m.data[0].content_parts is None
    assert m.data[1].content == "What is the capital\nof France?"
    assert [p.text for p in m.data[1].content_parts] == ["What is the capital", "of France?"]
    assert not m.has_more
    page = s.chat.completions.messages.list(c.id, limit=1, order="desc")
    assert [x.id for x in page.data] == [f"{c.id}-1"] and page.has_more
    assert [x.id for x in s.chat.completions.messages.list(
        c.id, after=f"{c.id}-0").data] == [f"{c.id}-1"]

    # a stream, usage not asked for: its chunks put together, with the usage
    chunks = list(s.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=60, stream=True, store=True,
        messages=[{"role": "user", "content": "What is the capital of Italy?"}]))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    sid = chunks[0].id
    got = s.chat.completions.retrieve(sid)
    assert got.object == "chat.completion" and got.id == sid
    assert got.choices[0].message.content == text and got.choices[0].message.role == "assistant"
    assert got.choices[0].finish_reason == chunks[-1].choices[0].finish_reason == "stop"
    plain = ask(s, "What is the capital of Italy?", max_tokens=60)
    assert got.usage.completion_tokens == plain.usage.completion_tokens
    assert got.usage.prompt_tokens == plain.usage.prompt_tokens
    assert got.metadata == {}

    # an answer from the cache is stored as it was replied
    deadline = time.monotonic() + 15  # (the cache stores an answer after its reply)
    while True:
        r = client(server).post("/v1/chat/completions", json={
            "model": MODEL, "temperature": 0, "max_tokens": 60, "store": True,
            "messages": [{"role": "user", "content": "What is the capital of Italy?"}]},
            headers={"Cache-Control": "only-if-cached"})
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.status_code == 200 and r.headers["X-Cache"] == "HIT"
    got = s.chat.completions.retrieve(r.json()["id"])
    assert got.choices[0].message.content == text

    # not asked to store (OpenAI's default), or store false: nothing kept
    for kw in ({}, {"store": False}):
        c2 = ask(s, "What is 2 + 2?", **kw)
        with pytest.raises(openai.NotFoundError) as e:
            s.chat.completions.retrieve(c2.id)
        assert "store" in e.value.message
    r = client(server).post("/v1/chat/completions", json={
        "model": MODEL, "store": "yes", "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "store"


def test_tool_calls_and_several_answers_are_stored_whole(make_server):
    s = sdk(make_server(NO_CACHE))
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    chunks = list(s.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=40, stream=True, store=True, tools=tools,
        tool_choice="required",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}]))
    args = "".join(ch.choices[0].delta.tool_calls[0].function.arguments or ""
                   for ch in chunks if ch.choices and ch.choices[0].delta.tool_calls)
    got = s.chat.completions.retrieve(chunks[0].id)
    call = got.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and call.function.arguments == args
    assert call.id.startswith("call_") and call.type == "function"
    assert got.choices[0].message.content is None
    assert got.choices[0].finish_reason == "tool_calls"
    m = s.chat.completions.messages.list(chunks[0].id)
    assert [x.content for x in m.data] == ["What is the weather in Paris?"]

    c = s.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=40, store=True, tools=tools,
        tool_choice="required", metadata={"k": "v"},
        messages=[{"role": "user", "content": "What is the weather in Rome?"}])
    got = s.chat.completions.retrieve(c.id)
    assert got.choices == c.choices and got.metadata == {"k": "v"}
    assert c.metadata is None  # the reply is OpenAI's, the metadata the record's

    # n answers, JSON and streamed (their chunks interleaved): each choice whole
    c = s.chat.completions.create(model=MODEL, temperature=0.8, seed=3, max_tokens=10, n=2,
                                  store=True, messages=[{"role": "user", "content": "Hi!"}])
    assert s.chat.completions.retrieve(c.id).choices == c.choices and c.metadata is None
    chunks = list(s.chat.completions.create(
        model=MODEL, temperature=0.8, seed=3, max_tokens=10, n=2, stream=True, store=True,
        messages=[{"role": "user", "content": "Hi!"}]))
    texts = ["", ""]
    for ch in chunks:
        for x in ch.choices:
            texts[x.index] += x.delta.content or ""
    got = s.chat.completions.retrieve(chunks[0].id)
    assert [x.index for x in got.choices] == [0, 1]
    assert [x.message.content for x in got.choices] == texts
    assert got.usage.completion_tokens == c.usage.completion_tokens


def test_listed_in_order_by_pages_filtered_changed_deleted_and_kept(make_server):
    server = make_server(NO_CACHE)
    s = sdk(server)
    made = [ask(s, q, store=True, max_tokens=4, metadata={"n": str(i), "kind": k})
            for i, (q, k) in enumerate([("Say one.", "a"), ("Say two.", "b"),
                                        ("Say three.", "a")])]
    ids = [c.id for c in made]
    ask(s, "Not stored.", max_tokens=4)
    # listed at once (a completion is there as soon as it is answered), oldest first
    assert [c.id for c in s.chat.completions.list()] == ids
    assert [c.id for c in s.chat.completions.list(order="desc")] == ids[::-1]
    first = s.chat.completions.list(limit=2)
    assert [c.id for c in first.data] == ids[:2] and first.has_more
    assert [c.id for c in s.chat.completions.list(limit=2)] == ids  # the SDK pages on
    assert [c.id for c in s.chat.completions.list(after=ids[0], order="asc")] == ids[1:]
    assert [c.id for c in s.chat.completions.list(after=ids[2], order="desc")] == ids[1::-1]
    assert [c.id for c in s.chat.completions.list(metadata={"kind": "a"})] == [ids[0], ids[2]]
    assert [c.id for c in s.chat.completions.list(metadata={"kind": "a", "n": "2"})] == [ids[2]]
    assert s.chat.completions.list(model="another-model").data == []
    assert [c.id for c in s.chat.completions.list(model=MODEL)] == ids
    bad = client(server).get("/v1/chat/completions", params={"limit": 0})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "limit"
    for after in ("chatcmpl-nothere", "resp_" + ids[0][len("chatcmpl-"):]):
        bad = client(server).get("/v1/chat/completions", params={"after": after})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "after"

    # metadata changed: the only change there is
    u = s.chat.completions.update(ids[1], metadata={"kind": "a", "seen": "yes"})
    assert u.id == ids[1] and u.metadata == {"kind": "a", "seen": "yes"}
    assert u.choices == made[1].choices
    assert s.chat.completions.retrieve(ids[1]).metadata == {"kind": "a", "seen": "yes"}
    assert [c.id for c in s.chat.completions.list(metadata={"kind": "a"})] == ids
    r = client(server).post(f"/v1/chat/completions/{ids[1]}", json={"model": MODEL})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"

    # deleted: gone from every route
    d = s.chat.completions.delete(ids[0])
    assert d.deleted and d.id == ids[0] and d.object == "chat.completion.deleted"
    for call in (lambda: s.chat.completions.retrieve(ids[0]),
                 lambda: s.chat.completions.delete(ids[0]),
                 lambda: s.chat.completions.messages.list(ids[0]),
                 lambda: s.chat.completions.update(ids[0], metadata={})):
        with pytest.raises(openai.NotFoundError):
            call()
    assert [c.id for c in s.chat.completions.list()] == ids[1:]

    # kept across a restart (in the data directory), metadata change included
    server.stop()
    s = sdk(make_server(NO_CACHE))
    assert [c.id for c in s.chat.completions.list()] == ids[1:]
    assert s.chat.completions.retrieve(ids[1]).metadata == {"kind": "a", "seen": "yes"}
    assert s.chat.completions.retrieve(ids[2]).choices == made[2].choices
    # deleted while they are paged through: each page goes on from the one deleted
    more = [ask(s, f"Say {w}.", store=True, max_tokens=2).id for w in ("four", "five")]
    gone = []
    for c in s.chat.completions.list(limit=1):
        s.chat.completions.delete(c.id)
        gone.append(c.id)
    assert gone == ids[1:] + more
    assert s.chat.completions.list().data == []


def test_a_tenant_sees_its_own_and_responses_stay_apart(make_server):
    server = make_server(NO_CACHE + f"[tenants]\nauth = on\nadmin_key = {ADMIN}\n")
    keys = {}
    for name in ("a", "b"):
        a = client(server, ADMIN)
        assert a.post("/admin/tenants", json={"name": name}).status_code == 201
        keys[name] = a.post("/admin/keys", json={"tenant": name}).json()["key"]
    sa, sb = sdk(server, keys["a"]), sdk(server, keys["b"])
    c = ask(sa, "Say hello.", store=True, max_tokens=4)
    assert sa.chat.completions.retrieve(c.id).id == c.id
    for call in (lambda: sb.chat.completions.retrieve(c.id),
                 lambda: sb.chat.completions.messages.list(c.id),
                 lambda: sb.chat.completions.update(c.id, metadata={"x": "y"}),
                 lambda: sb.chat.completions.delete(c.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert sb.chat.completions.list().data == []
    assert [x.id for x in sa.chat.completions.list()] == [c.id]
    # the Responses API's stored responses are another kind, on their own routes
    r = sa.responses.create(model=MODEL, input="Say hello.", max_output_tokens=4)
    assert [x.id for x in sa.chat.completions.list()] == [c.id]
    with pytest.raises(openai.NotFoundError):
        sa.chat.completions.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        sa.responses.retrieve(c.id)
    with pytest.raises(openai.NotFoundError):
        sa.responses.create(model=MODEL, input="Hi", previous_response_id=c.id)
    assert sa.responses.retrieve(r.id).id == r.id
