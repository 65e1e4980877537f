"""End-to-end tests of POST /v1/responses (OpenAI's Responses API) through the official
openai SDK and raw HTTP on the default model: the same answers as chat completions, the
stream's events in OpenAI's order, max_output_tokens, the answer caches shared with chat
completions, stored responses (previous_response_id, retrieve, delete, across a restart),
and clear refusals of what the server does not do."""

import json
import time

import httpx
import openai
import pytest

MODEL = "smollm2-135m-instruct"
NO_CACHE = "[cache]\nenabled = false\n"


def sdk(server):
    http = httpx.Client(verify=server.ssl_context(), timeout=120)
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)


def client(server):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120)


def chat_when_cached(c, content, timeout=15, **kw):
    """Answers are stored after their response: the chat request once the cache has it."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], **kw}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.post("/v1/chat/completions", json=body,
                   headers={"Cache-Control": "only-if-cached"})
        if r.status_code == 200:
            return r
        time.sleep(0.1)
    raise AssertionError(f"never cached: {content!r}")


def test_response_answers_as_chat_completions_do(make_server):
    s = sdk(make_server(NO_CACHE))
    r = s.responses.create(model=MODEL, input="What is the capital of France?",
                           temperature=0, max_output_tokens=40)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == MODEL
    assert r.status == "completed" and r.error is None and r.incomplete_details is None
    assert len(r.output) == 1 and r.output[0].type == "message"
    assert r.output[0].role == "assistant" and r.output[0].id.startswith("msg_")
    assert "Paris" in r.output_text
    c = s.chat.completions.create(model=MODEL, temperature=0, max_tokens=40, messages=[
        {"role": "user", "content": "What is the capital of France?"}])
    assert r.output_text == c.choices[0].message.content
    u = r.usage
    assert u.input_tokens == c.usage.prompt_tokens
    assert u.output_tokens == c.usage.completion_tokens
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert u.output_tokens_details.reasoning_tokens == 0
    # the settings asked for are repeated, the others have OpenAI's values
    assert r.max_output_tokens == 40 and r.temperature == 0 and r.top_p == 1
    assert r.tools == [] and r.tool_choice == "auto" and r.store is True


def test_instructions_and_input_items_are_a_conversation(make_server):
    s = sdk(make_server(NO_CACHE))
    history = [{"role": "user", "content": "My name is Ada."},
               {"role": "assistant", "content": "Hello Ada!"},
               {"role": "user", "content": "What is my name?"}]
    r = s.responses.create(
        model=MODEL, temperature=0, max_output_tokens=24,
        instructions="You are a terse assistant.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "My name is Ada."}]},
               {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                "content": [{"type": "output_text", "text": "Hello Ada!", "annotations": []}]},
               {"role": "user", "content": "What is my name?"}])
    c = s.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=24,
        messages=[{"role": "system", "content": "You are a terse assistant."}] + history)
    assert r.output_text == c.choices[0].message.content
    assert r.instructions == "You are a terse assistant."
    assert r.usage.input_tokens == c.usage.prompt_tokens


def test_stream_events_in_order(make_server):
    server = make_server(NO_CACHE)
    events = list(sdk(server).responses.create(
        model=MODEL, input="What is the capital of France?", temperature=0,
        max_output_tokens=40, stream=True))
    types = [e.type for e in events]
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    assert types[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and types[4:-4] == ["response.output_text.delta"] * len(deltas)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in deltas)
    assert "Paris" in text
    final = events[-1].response
    assert final.status == "completed" and final.output_text == text
    assert events[-4].text == text and events[-2].item.content[0].text == text
    assert final.usage.output_tokens > 0 and events[0].response.status == "in_progress"
    # the stream helper of the SDK accumulates the same answer
    with sdk(server).responses.stream(model=MODEL, input="What is the capital of France?",
                                      temperature=0, max_output_tokens=40) as st:
        assert st.get_final_response().output_text == text
    # on the wire: named events, no "data: [DONE]" (OpenAI ends these streams without it)
    with client(server).stream("POST", "/v1/responses", json={
            "model": MODEL, "input": "Hi", "max_output_tokens": 4, "stream": True}) as w:
        assert w.headers["content-type"].startswith("text/event-stream")
        raw = w.read().decode()
    blocks = [b for b in raw.split("\n\n") if b]
    assert "[DONE]" not in raw
    for b in blocks:
        name, data = b.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data[6:])["type"] == name[7:]


def test_max_output_tokens_makes_it_incomplete(make_server):
    s = sdk(make_server(NO_CACHE))
    r = s.responses.create(model=MODEL, input="Tell me a long story about a dragon.",
                           max_output_tokens=5, temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 5 and r.output[0].status == "incomplete"
    events = list(s.responses.create(model=MODEL, input="Tell me a long story about a dragon.",
                                     max_output_tokens=5, temperature=0, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.output_text == r.output_text


def test_cache_is_shared_with_chat_completions(make_server):
    server = make_server()
    c = client(server)
    q = "What is the capital of France?"
    first = c.post("/v1/chat/completions", json={
        "model": MODEL, "messages": [{"role": "user", "content": q}], "max_tokens": 40,
        "temperature": 0})
    assert first.status_code == 200 and first.headers["x-cache"] == "MISS"
    answer = first.json()["choices"][0]["message"]["content"]
    s = sdk(server)
    chat_when_cached(c, q, max_tokens=40, temperature=0)
    raw = s.responses.with_raw_response.create(model=MODEL, input=q, max_output_tokens=40,
                                               temperature=0)
    assert raw.headers["x-cache"] == "HIT" and raw.headers["x-cache-kind"] == "exact"
    assert raw.parse().output_text == answer and raw.parse().status == "completed"
    # a paraphrase through the Responses API finds it by meaning, streamed too
    events = list(s.responses.create(model=MODEL, input="What's the capital city of France?",
                                     max_output_tokens=40, temperature=0, stream=True))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == answer
    # and a response's answer is a hit for chat completions
    r = s.responses.create(model=MODEL, input="Name a primary color.", max_output_tokens=60,
                           temperature=0)
    assert r.status == "completed"  # an answer cut by max_output_tokens is not stored
    again = chat_when_cached(c, "Name a primary color.", max_tokens=60, temperature=0)
    assert again.json()["choices"][0]["message"]["content"] == r.output_text


@pytest.mark.parametrize("extra, param", [
    ({"previous_response_id": 123}, "previous_response_id"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://example.com/a.png"}]}]}, "input"),
    ({"input": [{"type": "function_call_output", "output": "4"}]}, "input"),
    ({"input": [{"type": "function_call", "call_id": "c1", "name": "f"}]}, "input"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input"),
    ({"tools": [{"type": "web_search"}], "tool_choice": "required"}, "tools"),
    ({"tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function",
                                                                   "name": "g"}},
     "tool_choice"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"input": []}, "input"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input"),
    ({"tools": [{"type": "function", "name": "f", "parameters": []}]}, "tools"),
    ({"text": {"format": {"type": "xml"}}}, "text"),
    ({"text": {"format": {"type": "json_schema", "name": "a"}}}, "text"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"truncation": "auto"}, "truncation"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"include": ["message.output_text.logprobs"]}, "include"),
    ({"background": True}, "background"),
    ({"metadata": {"k": 1}}, "metadata"),
    ({"extra_body": {"max_tokens": 4}}, "max_tokens"),  # chat's name: unknown here
    ({"extra_body": {"repetition_penalty": 1.2}}, "repetition_penalty"),
    ({"max_tool_calls": 2}, "max_tool_calls"),
])
def test_refusals_name_the_parameter(server, extra, param):
    body = {"model": MODEL, "input": "Hi", **extra}
    with pytest.raises(openai.BadRequestError) as e:
        sdk(server).responses.create(**body)
    assert e.value.status_code == 400 and e.value.body["param"] == param, e.value.body
    assert e.value.body["message"]


def test_accepted_neutral_settings_and_errors(server):
    s = sdk(server)
    # what agent frameworks send along: neutral values, tools that tool_choice "none" forbids
    r = s.responses.create(model=MODEL, input="Hi", max_output_tokens=4, store=True,
                           parallel_tool_calls=True, metadata={"trace": "t1"},
                           text={"format": {"type": "text"}}, truncation="disabled",
                           tool_choice="none", user="u1",
                           tools=[{"type": "function", "name": "f", "parameters": {}}])
    assert r.metadata == {"trace": "t1"} and r.user == "u1" and r.store is True
    with pytest.raises(openai.NotFoundError):
        s.responses.create(model="no-such-model", input="Hi")
    with pytest.raises(openai.BadRequestError) as e:
        s.responses.create(model=MODEL, input="word " * 9000, max_output_tokens=4)
    assert e.value.body["param"] == "input" and e.value.code == "context_length_exceeded"


def test_stored_responses_continue_read_back_and_delete(make_server, tmp_path):
    server = make_server(NO_CACHE)
    s = sdk(server)
    first = s.responses.create(model=MODEL, input="My name is Ada.", temperature=0,
                               max_output_tokens=24, instructions="Be brief.")
    # the next turn names the first: its conversation, answer included, is continued
    # (instructions are not inherited, as at OpenAI)
    second = s.responses.create(model=MODEL, input="What is my name?", temperature=0,
                                max_output_tokens=24, previous_response_id=first.id)
    assert second.previous_response_id == first.id
    c = s.chat.completions.create(model=MODEL, temperature=0, max_tokens=24, messages=[
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "What is my name?"}])
    assert second.output_text == c.choices[0].message.content
    assert second.usage.input_tokens == c.usage.prompt_tokens
    # a stream's response is stored too, and a chain goes on
    events = list(s.responses.create(model=MODEL, input="And what did I ask?", temperature=0,
                                     max_output_tokens=8, previous_response_id=second.id,
                                     stream=True))
    third = events[-1].response
    assert third.usage.input_tokens > second.usage.input_tokens + second.usage.output_tokens
    # the engine's prefix cache holds the turn before, answer included (whole blocks of 16)
    cached = third.usage.input_tokens_details.cached_tokens
    assert cached >= second.usage.input_tokens + second.usage.output_tokens - 16, cached
    # read back as it was answered
    got = s.responses.retrieve(first.id)
    assert got.model_dump() == first.model_dump()
    assert s.responses.retrieve(third.id).output_text == third.output_text
    # kept across a restart (in the data directory)
    server.stop()
    again = make_server(NO_CACHE)  # the same data directory
    s = sdk(again)
    assert s.responses.retrieve(second.id).output_text == second.output_text
    # deleted: gone, and no longer continued
    d = client(again).delete(f"/v1/responses/{first.id}")
    assert d.json() == {"id": first.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        s.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError) as e:
        s.responses.create(model=MODEL, input="Hi", previous_response_id=first.id)
    assert e.value.code == "previous_response_not_found"
    assert e.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        s.responses.delete(first.id)
    assert s.responses.input_items.list(second.id).data  # (a route of its own)
    d = client(again).delete(f"/v1/responses/{second.id}/input_items")
    assert d.status_code == 404 and "Unknown route: DELETE" in d.text
    # the SDK's cancel (POST .../cancel): no such route either, not a method of {id}'s
    with pytest.raises(openai.NotFoundError) as e:
        s.responses.cancel(second.id)
    assert "Unknown route: POST" in e.value.message and e.value.code == "not_found"
    # an id with a NUL in it is no id (not the one before the NUL), and retrieving with
    # stream is refused (nothing runs in the background to replay), not answered in JSON
    h = client(again)
    for method in ("GET", "DELETE"):
        r = h.request(method, f"/v1/responses/{second.id}%00x")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
    assert s.responses.retrieve(second.id).id == second.id
    with pytest.raises(openai.BadRequestError) as e:
        s.responses.retrieve(second.id, stream=True)
    assert e.value.body["param"] == "stream"
    assert h.get(f"/v1/responses/{second.id}?stream=false").json()["id"] == second.id
    # "store": false keeps nothing
    r = s.responses.create(model=MODEL, input="Hi", max_output_tokens=4, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        s.responses.retrieve(r.id)


def test_a_response_is_there_as_soon_as_it_is_answered(make_server):
    """Responses are written by the store's writer thread after the reply: a client that
    reads one back, continues it or deletes it at once must find it all the same (one in
    seven reads found nothing)."""
    s = sdk(make_server(NO_CACHE))
    for i in range(20):
        r = s.responses.create(model=MODEL, input=f"Say {i}.", max_output_tokens=2)
        assert s.responses.retrieve(r.id).id == r.id
        s.responses.create(model=MODEL, input="Go on.", max_output_tokens=1,
                           previous_response_id=r.id)
    doomed = [s.responses.create(model=MODEL, input="Bye.", max_output_tokens=1)
              for _ in range(5)]
    for r in doomed:
        s.responses.delete(r.id)
    time.sleep(1.5)  # the writer has committed, then deleted, every one of them
    for r in doomed:
        with pytest.raises(openai.NotFoundError):
            s.responses.retrieve(r.id)


WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"], "additionalProperties": False},
           "strict": True}


def test_function_calls_and_their_outputs(make_server):
    """The agent loop of the Responses API: a function_call item, its output sent back
    (by previous_response_id, or as input items), and an answer that uses it."""
    s = sdk(make_server(NO_CACHE))
    r = s.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[WEATHER],
                           tool_choice="required", temperature=0, max_output_tokens=60)
    assert r.status == "completed" and len(r.output) == 1
    call = r.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert isinstance(json.loads(call.arguments)["city"], str)
    assert r.output_text == ""
    # the result, continuing the stored response
    r2 = s.responses.create(model=MODEL, previous_response_id=r.id, temperature=0,
                            max_output_tokens=80, input=[
                                {"type": "function_call_output", "call_id": call.call_id,
                                 "output": json.dumps({"temp": 21})}])
    assert r2.output[0].type == "message"
    assert "21" in r2.output_text, r2.output_text
    # the same conversation sent whole as input items
    r3 = s.responses.create(model=MODEL, temperature=0, max_output_tokens=80, input=[
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name,
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id,
         "output": json.dumps({"temp": 21})}])
    assert r3.output_text == r2.output_text


def test_auto_lets_the_model_answer_in_words(make_server):
    """tool_choice "auto", the default with tools: this small model answers a haiku in words,
    a message item, whole and streamed alike."""
    s = sdk(make_server(NO_CACHE))
    kw = dict(model=MODEL, input="Write a haiku about the sea.", tools=[WEATHER], temperature=0,
              max_output_tokens=40)
    r = s.responses.create(**kw)
    assert r.tool_choice == "auto" and len(r.output) == 1
    assert r.output[0].type == "message" and r.output[0].id.startswith("msg_")
    assert r.output_text.strip()
    events = list(s.responses.create(stream=True, **kw))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == \
        r.output_text
    assert events[-1].type in ("response.completed", "response.incomplete")


def test_a_call_cut_before_its_name_is_a_message(make_server):
    """max_output_tokens that end a call before its function's name is written: the text
    comes as a message item (msg_ id), its deltas spelling it, as chat sends it as text."""
    s = sdk(make_server(NO_CACHE))
    kw = dict(model=MODEL, input="What is the weather in Paris?", tools=[WEATHER],
              tool_choice="required", temperature=0, max_output_tokens=2)
    r = s.responses.create(**kw)
    assert r.status == "incomplete" and r.output[0].type == "message"
    assert r.output[0].id.startswith("msg_") and r.output_text
    events = list(s.responses.create(stream=True, **kw))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == \
        r.output_text
    assert events[-1].response.output[0].id.startswith("msg_")


def test_a_named_function_call_streamed(make_server):
    s = sdk(make_server(NO_CACHE))
    kw = dict(model=MODEL, input="Is it raining in Oslo?", tools=[WEATHER], temperature=0,
              tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=60)
    whole = s.responses.create(**kw).output[0]
    events = list(s.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert types[:3] == ["response.created", "response.in_progress",
                         "response.output_item.added"]
    assert types[-3:] == ["response.function_call_arguments.done",
                          "response.output_item.done", "response.completed"]
    assert types[3:-3] == ["response.function_call_arguments.delta"] * len(deltas)
    assert len(deltas) > 2 and "".join(deltas) == whole.arguments
    added, done = events[2].item, events[-2].item
    assert added.type == "function_call" and added.status == "in_progress"
    assert (done.name, done.arguments, done.status) == ("get_weather", whole.arguments,
                                                        "completed")
    assert events[-1].response.output[0].arguments == whole.arguments
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_parallel_calls_are_items_of_their_own(make_server):
    """parallel_tool_calls (true unless said false): each call of the answer is a
    function_call item of its own (its own id and call_id), streamed one item after the
    other at output_index 0, 1, ... (added, argument deltas, arguments done, item done);
    stored, the response continues as all its calls. With the end tokens banned the model
    writes all 8; with parallel_tool_calls false one call ends the answer. Cut short, a
    whole reply leaves out a later call it cut, as chat's does."""
    from test_tools import ALARM, FORECAST, end_ids
    s = sdk(make_server(NO_CACHE))
    tools = [{"type": "function", **t["function"]} for t in (FORECAST, ALARM)]
    kw = dict(model=MODEL, input="Weather in Paris, Oslo and Lima?", tools=tools,
              tool_choice="required", temperature=0, max_output_tokens=400,
              extra_body={"logit_bias": {str(i): -100 for i in end_ids()}})
    r = s.responses.create(**kw)
    assert r.status == "completed" and len(r.output) == 8, r.output
    for item in r.output:
        assert item.type == "function_call" and item.status == "completed"
        assert item.id.startswith("fc_") and item.call_id.startswith("call_")
        args = json.loads(item.arguments)
        assert args["city"] in ("Paris", "Oslo", "Lima") if item.name == "get_forecast" \
            else 0 <= args["hour"] <= 23, item
    assert len({o.id for o in r.output}) == len({o.call_id for o in r.output}) == 8
    events = list(s.responses.create(stream=True, **kw))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    k = 2
    for i in range(8):
        added = events[k]
        assert added.type == "response.output_item.added" and added.output_index == i
        assert added.item.status == "in_progress" and added.item.arguments == ""
        k += 1
        args = ""
        while events[k].type == "response.function_call_arguments.delta":
            assert (events[k].output_index, events[k].item_id) == (i, added.item.id)
            args += events[k].delta
            k += 1
        assert events[k].type == "response.function_call_arguments.done"
        assert (events[k].output_index, events[k].arguments) == (i, args)
        done = events[k + 1]
        assert done.type == "response.output_item.done" and done.output_index == i
        assert (done.item.id, done.item.call_id, done.item.arguments, done.item.status) == \
            (added.item.id, added.item.call_id, args, "completed")
        k += 2
    assert k == len(events) - 1 and events[k].type == "response.completed"
    out = events[k].response.output
    assert [(o.name, o.arguments) for o in out] == [(o.name, o.arguments) for o in r.output]
    assert [o.id for o in out] == [e.item.id for e in events if
                                   e.type == "response.output_item.done"]
    # the stored response continues as its eight calls, as when they are sent as items
    results = [{"type": "function_call_output", "call_id": o.call_id, "output": "done"}
               for o in r.output]
    more = dict(model=MODEL, temperature=0, max_output_tokens=8)
    r2 = s.responses.create(previous_response_id=r.id, input=results, **more)
    r3 = s.responses.create(input=[{"role": "user", "content": kw["input"]}] +
                            [{"type": "function_call", "call_id": o.call_id, "name": o.name,
                              "arguments": o.arguments} for o in r.output] + results, **more)
    assert r2.output[0].type == "message" and r2.output_text == r3.output_text
    assert r2.usage.input_tokens == r3.usage.input_tokens
    one = s.responses.create(parallel_tool_calls=False, **kw)
    assert len(one.output) == 1 and one.parallel_tool_calls is False
    assert (one.output[0].name, one.output[0].arguments) == (r.output[0].name,
                                                             r.output[0].arguments)
    # cut by max_output_tokens inside a later call: replied whole, the calls before it (all
    # whole); streamed, the cut call's events have gone out, its item incomplete
    kw["max_output_tokens"] = 45
    whole = s.responses.create(**kw)
    assert whole.status == "incomplete" and whole.output
    assert all(o.status == "completed" and json.loads(o.arguments) for o in whole.output)
    out = list(s.responses.create(stream=True, **kw))[-1].response.output
    assert [(o.name, o.arguments) for o in out[:len(whole.output)]] == \
        [(o.name, o.arguments) for o in whole.output]
    assert len(out) - len(whole.output) in (0, 1)
    assert all(o.status == "incomplete" for o in out[len(whole.output):])


def test_input_items_of_a_stored_response(make_server):
    """GET /v1/responses/{id}/input_items was a 404, so the SDK's
    responses.input_items.list() failed: it lists what the response was asked, newest first
    by default (order, limit, after), its answer left out and a continued conversation's
    earlier turns in."""
    server = make_server()
    c = sdk(server)
    first = c.responses.create(model=MODEL, input="What is 2+2?", instructions="Be brief.",
                               max_output_tokens=16, temperature=0)
    items = c.responses.input_items.list(first.id)
    assert [(i.type, i.role, i.content[0].type, i.content[0].text) for i in items.data] == \
        [("message", "user", "input_text", "What is 2+2?")]
    assert items.data[0].id.startswith("msg_") and items.has_more is False
    second = c.responses.create(model=MODEL, input="And 3+3?", previous_response_id=first.id,
                                max_output_tokens=16, temperature=0)
    newest = c.responses.input_items.list(second.id)
    assert [(i.role, i.content[0].type) for i in newest.data] == \
        [("user", "input_text"), ("assistant", "output_text"), ("user", "input_text")]
    assert newest.data[0].content[0].text == "And 3+3?"
    assert newest.data[1].content[0].text == first.output_text
    oldest = c.responses.input_items.list(second.id, order="asc")
    assert [i.id for i in oldest.data] == [i.id for i in reversed(newest.data)]
    # pages: the ids stay the same from one listing to the next
    with client(server) as h:
        page = h.get(f"/v1/responses/{second.id}/input_items?limit=2").json()
        assert page["has_more"] is True and len(page["data"]) == 2
        rest = h.get(f"/v1/responses/{second.id}/input_items?limit=2&after="
                     f"{page['last_id']}").json()
        assert rest["has_more"] is False and [i["id"] for i in rest["data"]] == \
            [newest.data[2].id]
        assert h.get(f"/v1/responses/{second.id}/input_items?limit=0").status_code == 400
        assert h.get("/v1/responses/resp_nope/input_items").status_code == 404
    with pytest.raises(openai.NotFoundError):
        c.responses.input_items.list("resp_" + "0" * 48)


def test_input_tokens_counts_what_the_model_would_read(make_server):
    server = make_server(NO_CACHE)
    s = sdk(server)
    kw = dict(input="What is the capital of France?", instructions="Be brief.")
    n = s.responses.input_tokens.count(model=MODEL, **kw)
    assert n.object == "response.input_tokens"
    r = s.responses.create(model=MODEL, max_output_tokens=16, temperature=0, **kw)
    assert n.input_tokens == r.usage.input_tokens
    # the model may be left out: the server's
    assert s.responses.input_tokens.count(**kw).input_tokens == n.input_tokens
    # the tools the model is shown count, as does the conversation a response continues
    t = s.responses.input_tokens.count(tools=[WEATHER], tool_choice="required", **kw)
    withtools = s.responses.create(model=MODEL, tools=[WEATHER], tool_choice="required",
                                   max_output_tokens=30, temperature=0, **kw)
    assert t.input_tokens == withtools.usage.input_tokens > n.input_tokens
    more = s.responses.input_tokens.count(input="And of Italy?", previous_response_id=r.id)
    again = s.responses.create(model=MODEL, input="And of Italy?", previous_response_id=r.id,
                               max_output_tokens=4)
    assert more.input_tokens == again.usage.input_tokens > n.input_tokens
    # a parameter of a response that is not one of a count's is refused, as OpenAI refuses it
    c = client(server)
    bad = c.post("/v1/responses/input_tokens", json={"input": "Hi", "max_output_tokens": 5})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_output_tokens"
    with pytest.raises(openai.NotFoundError):
        s.responses.input_tokens.count(model="other-model", input="Hi")
    with pytest.raises(openai.NotFoundError):
        s.responses.input_tokens.count(input="Hi", previous_response_id="resp_nothere")
    assert c.get("/v1/responses/input_tokens").status_code == 405
