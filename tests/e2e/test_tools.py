"""End-to-end tests of function calling (tools with tool_choice "required", a named
function, or "auto") through the official openai SDK on the default model: the answer is a
call whose arguments are JSON of the function's parameters, streamed piece by piece as the
SDK accumulates it, or with "auto" words when the model begins with words; a conversation
carries earlier calls and their results; what cannot be served (unknown names, schemas the
grammar cannot hold to) is refused naming the parameter; and calls are never answered from
the caches."""

import pathlib

import json

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

MODEL = "smollm2-135m-instruct"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TOOLS = [WEATHER, TIME]


def sdk(server):
    http = httpx.Client(verify=server.ssl_context(), timeout=120)
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)


def client(server):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120)


def user(content):
    return [{"role": "user", "content": content}]


def check_weather_args(arguments):
    args = json.loads(arguments)
    assert set(args) == {"city", "unit"}, args
    assert isinstance(args["city"], str) and len(args["city"]) <= 40
    assert args["unit"] in ("celsius", "fahrenheit")
    return args


@pytest.mark.parametrize("parallel", [False, None])
def test_required_answers_with_a_call_to_one_of_the_tools(server, parallel):
    """One call (parallel_tool_calls false), or with parallel calls (the default) as many
    as the model writes, each whole: a later call cut by max_tokens is left out."""
    c = sdk(server)
    extra = {} if parallel is None else {"parallel_tool_calls": parallel}
    for seed, temperature in ((0, 0), (1, 1.0), (2, 1.0)):
        r = c.chat.completions.create(model=MODEL, messages=user("What is the weather in Paris?"),
                                      tools=TOOLS, tool_choice="required", seed=seed,
                                      temperature=temperature, max_tokens=80, **extra)
        ch = r.choices[0]
        assert ch.message.content is None and ch.message.tool_calls, ch
        if parallel is False:
            assert ch.finish_reason == "tool_calls", ch
            assert len(ch.message.tool_calls) == 1
        else:
            assert ch.finish_reason in ("tool_calls", "length"), ch
        for call in ch.message.tool_calls:
            assert call.type == "function" and call.id.startswith("call_") and len(call.id) == 29
            assert call.function.name in ("get_weather", "get_time")
            args = json.loads(call.function.arguments)
            if call.function.name == "get_weather":
                check_weather_args(call.function.arguments)
            else:
                assert isinstance(args["city"], str) and set(args) == {"city"}


def test_a_named_function_is_called(server):
    r = sdk(server).chat.completions.create(
        model=MODEL, messages=user("Is it raining in Oslo?"), tools=TOOLS, temperature=0,
        max_tokens=80, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    ch = r.choices[0]
    assert ch.finish_reason == "stop"  # as OpenAI answers a named tool_choice
    assert ch.message.tool_calls[0].function.name == "get_weather"
    check_weather_args(ch.message.tool_calls[0].function.arguments)


class Order(BaseModel):
    item: str = Field(max_length=30)
    quantity: int = Field(ge=1, le=20)


class PlaceOrder(BaseModel):
    """Place an order in the shop."""
    order: Order
    express: bool


class GetTime(BaseModel):
    """Get the local time in a city."""
    city: str


def test_sdk_parse_with_a_pydantic_tool(server):
    """The SDK's strict pydantic tool (nested models as $defs references) parses back."""
    c = sdk(server)
    tools = [openai.pydantic_function_tool(PlaceOrder), openai.pydantic_function_tool(GetTime)]
    for choice in ("required", {"type": "function", "function": {"name": "PlaceOrder"}}):
        r = c.chat.completions.parse(model=MODEL, messages=user("Order three apples, fast."),
                                     tools=tools, tool_choice=choice, temperature=0,
                                     max_tokens=120)
        call = r.choices[0].message.tool_calls[0]
        if call.function.name == "PlaceOrder":
            placed = call.function.parsed_arguments
            assert isinstance(placed, PlaceOrder) and 1 <= placed.order.quantity <= 20
        else:
            assert choice == "required" and call.function.name == "GetTime"
            assert isinstance(call.function.parsed_arguments, GetTime)


def test_a_streamed_call_equals_the_whole_one(server):
    c = sdk(server)
    kw = dict(model=MODEL, messages=user("What time is it in Tokyo, and the weather?"),
              tools=TOOLS, tool_choice="required", temperature=0, max_tokens=80)
    whole = c.chat.completions.create(**kw).choices[0].message.tool_calls[0]
    chunks = [ch for ch in c.chat.completions.create(stream=True, **kw) if ch.choices]
    deltas = [d for ch in chunks for d in (ch.choices[0].delta.tool_calls or [])]
    assert len(deltas) > 2, "the arguments come piece by piece"
    assert deltas[0].id.startswith("call_") and deltas[0].function.name == whole.function.name
    assert all(d.id is None and d.function.name is None for d in deltas[1:])
    assert all(d.index == 0 for d in deltas)
    assert "".join(d.function.arguments for d in deltas) == whole.function.arguments
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # the SDK's own accumulation of a stream
    with c.chat.completions.stream(**kw) as s:
        final = s.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == (whole.function.name,
                                                            whole.function.arguments)


def open_brace_id():
    """The token " {" as llama.cpp tokenizes "(a) [b] {c}" (committed fixture)."""
    fx = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "engine" /
                     "llamacpp.json").read_text())
    ids = next(t["ids"] for t in fx["texts"] if t["text"].startswith("Punctuation: (a) [b] {c}"))
    return ids[10]  # "P", "unct", "uation", ":", " (", "a", ")", " [", "b", "]", " {"


# Arguments without free text, where a bias on " {" can only begin the call and its arguments
FORECAST = {"type": "function", "function": {
    "name": "get_forecast", "description": "Get the weather forecast of a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"], "additionalProperties": False}}}
ALARM = {"type": "function", "function": {
    "name": "set_alarm", "description": "Set an alarm.",
    "parameters": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0,
                                                             "maximum": 23}},
                   "required": ["hour"]}}}


def check_auto_call(call):
    args = json.loads(call.function.arguments)
    if call.function.name == "get_forecast":
        assert args["city"] in ("Paris", "Oslo", "Lima") and 1 <= args["days"] <= 7, args
    else:
        assert call.function.name == "set_alarm" and 0 <= args["hour"] <= 23, call


@pytest.mark.parametrize("choice", [None, "auto"])
def test_auto_answers_in_words_when_the_model_begins_with_words(server, choice):
    """tool_choice "auto" (also the default with tools): the model chooses; this small one
    answers a haiku in words, as text, whole and streamed alike."""
    c = sdk(server)
    extra = {} if choice is None else {"tool_choice": choice}
    kw = dict(model=MODEL, messages=user("Write a haiku about the sea."), tools=TOOLS,
              temperature=0, max_tokens=40, **extra)
    r = c.chat.completions.create(**kw)
    ch = r.choices[0]
    assert ch.message.tool_calls is None and ch.message.content.strip(), ch
    assert ch.finish_reason in ("stop", "length")
    chunks = [x for x in c.chat.completions.create(stream=True, **kw) if x.choices]
    assert "".join(x.choices[0].delta.content or "" for x in chunks) == ch.message.content
    assert not any(x.choices[0].delta.tool_calls for x in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == ch.finish_reason


def test_auto_answers_with_a_call_when_the_model_begins_one(server):
    """An answer that begins with "{" is a call, held to one of the functions: the model is
    made to begin so by logit_bias on " {" (from there the grammar holds it)."""
    c = sdk(server)
    kw = dict(model=MODEL, messages=user("What is the weather in Paris this week?"),
              tools=[FORECAST, ALARM], tool_choice="auto", temperature=0, max_tokens=80,
              logit_bias={str(open_brace_id()): 100})
    r = c.chat.completions.create(**kw)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    assert ch.message.content is None and len(ch.message.tool_calls) == 1
    call = ch.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    check_auto_call(call)
    chunks = [x for x in c.chat.completions.create(stream=True, **kw) if x.choices]
    deltas = [d for x in chunks for d in (x.choices[0].delta.tool_calls or [])]
    assert deltas[0].function.name == call.function.name
    assert "".join(d.function.arguments for d in deltas) == call.function.arguments
    assert not any(x.choices[0].delta.content for x in chunks)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_many_tools_any_of_them_called(server):
    """Agent frameworks send many tools: with 40 (the default auto, and required) the call
    is held to one of them, the one asked about being the last."""
    fillers = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Internal tool number {i}.",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}},
                       "required": ["n"]}}} for i in range(39)]
    c = sdk(server)
    for choice in ("required", "auto"):
        kw = dict(model=MODEL, messages=user("What is the weather forecast in Paris?"),
                  tools=fillers + [FORECAST], tool_choice=choice, temperature=0,
                  max_tokens=120, parallel_tool_calls=False)
        if choice == "auto":
            kw["logit_bias"] = {str(open_brace_id()): 100}
        ch = c.chat.completions.create(**kw).choices[0]
        assert ch.finish_reason == "tool_calls", ch
        call = ch.message.tool_calls[0]
        args = json.loads(call.function.arguments)
        if call.function.name == "get_forecast":
            check_auto_call(call)
        else:
            assert call.function.name in {t["function"]["name"] for t in fillers}, call
            assert set(args) == {"n"} and isinstance(args["n"], int), args


def end_ids():
    """The end-of-turn and end-of-text tokens (committed llama.cpp tokenizer fixture)."""
    fx = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "engine" /
                     "llamacpp.json").read_text())
    ids = next(t["ids"] for t in fx["texts"] if t["text"] == "<|im_start|>user\nHi<|im_end|>")
    return ids[-1], 0


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_parallel_calls_one_json_object_a_line(server, choice):
    """parallel_tool_calls (true unless said false): after a call the model may end or
    write another on the next line, up to 8. With the end tokens banned it writes all 8,
    each a call of its own (its own id, index and arguments), streamed as the SDK
    accumulates them; with parallel_tool_calls false one call ends the answer."""
    c = sdk(server)
    ban = {str(i): -100 for i in end_ids()}
    if choice == "auto":
        ban[str(open_brace_id())] = 100
    kw = dict(model=MODEL, messages=user("Weather in Paris, Oslo and Lima?"),
              tools=[FORECAST, ALARM], tool_choice=choice, temperature=0, max_tokens=400,
              logit_bias=ban)
    r = c.chat.completions.create(**kw)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    assert ch.message.content is None and len(ch.message.tool_calls) == 8, ch
    for call in ch.message.tool_calls:
        assert call.id.startswith("call_") and len(call.id) == 29
        check_auto_call(call)
    assert len({call.id for call in ch.message.tool_calls}) == 8
    chunks = [x for x in c.chat.completions.create(stream=True, **kw) if x.choices]
    calls = {}
    for x in chunks:
        for d in x.choices[0].delta.tool_calls or []:
            if d.id:
                assert d.index not in calls, "a call's head comes once"
                calls[d.index] = [d.id, d.function.name, ""]
            calls[d.index][2] += d.function.arguments
    assert sorted(calls) == list(range(8))
    assert [(n, a) for _, n, a in (calls[i] for i in range(8))] == \
        [(t.function.name, t.function.arguments) for t in ch.message.tool_calls]
    assert len({v[0] for v in calls.values()}) == 8
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    one = c.chat.completions.create(parallel_tool_calls=False, **kw).choices[0]
    assert one.finish_reason == "tool_calls" and len(one.message.tool_calls) == 1
    assert one.message.tool_calls[0].function == ch.message.tool_calls[0].function


def test_auto_holds_stop_strings_to_words_not_to_calls(server):
    c = sdk(server)
    r = c.chat.completions.create(model=MODEL, messages=user("Write a haiku about the sea."),
                                  tools=TOOLS, temperature=0, max_tokens=40, stop=[" "])
    assert r.choices[0].finish_reason == "stop" and " " not in r.choices[0].message.content
    assert r.choices[0].message.content
    r = c.chat.completions.create(model=MODEL, messages=user("Weather in Paris?"),
                                  tools=[FORECAST], temperature=0, max_tokens=80,
                                  stop=["\"", "}", " "], logit_bias={str(open_brace_id()): 100})
    assert r.choices[0].finish_reason == "tool_calls"
    check_auto_call(r.choices[0].message.tool_calls[0])


def test_a_conversation_carries_calls_and_their_results(server):
    """The agent loop: call, run the function, send its result, get an answer."""
    c = sdk(server)
    msgs = user("What is the weather in Paris?")
    r = c.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER], temperature=0,
                                  tool_choice="required", max_tokens=80)
    call = r.choices[0].message.tool_calls[0]
    msgs += [r.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id,
              "content": json.dumps({"temperature": 31, "sky": "sunny"})}]
    r = c.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER],
                                  tool_choice="none", temperature=0, max_tokens=40)
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls
    # the result is read: the prompt is longer than the conversation with an empty one
    empty = msgs[:2] + [{"role": "tool", "tool_call_id": call.id, "content": "{}"}]
    without = c.chat.completions.create(model=MODEL, messages=empty, temperature=0,
                                        max_tokens=1)
    assert r.usage.prompt_tokens > without.usage.prompt_tokens + 8
    # another call after the result
    r = c.chat.completions.create(model=MODEL, messages=msgs + user("And in Rome?"),
                                  tools=[WEATHER], tool_choice="required", temperature=0,
                                  max_tokens=80)
    check_weather_args(r.choices[0].message.tool_calls[0].function.arguments)


def test_calls_and_results_are_paired_as_openai_pairs_them(server):
    """A call left without its result, or a result of no call, is a 400 as on OpenAI: an
    agent loop that worked here would otherwise fail there, and a result sent under the
    wrong id reach the model as another call's."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    asked = user("Weather in Paris?") + [{"role": "assistant", "content": None,
                                           "tool_calls": [call]}]
    result = {"role": "tool", "tool_call_id": "call_1", "content": "31 C"}
    for msgs, says, param in ((asked, "call_1 has none", "messages.[1].tool_calls"),
                              (asked + user("and?"), "call_1 has none",
                               "messages.[1].tool_calls"),
                              (asked + [{**result, "tool_call_id": "call_2"}],
                               "call_2 is none of", "messages.[2].tool_call_id"),
                              (asked + [result, {**result, "tool_call_id": "call_2"}],
                               "call_2 is none of", "messages.[3].tool_call_id"),
                              (user("Hi") + [result], "call_1 is none of",
                               "messages.[1].tool_call_id")):
        with client(server) as c:
            r = c.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs,
                                                     "tools": [WEATHER], "max_tokens": 4})
        assert r.status_code == 400 and says in r.json()["error"]["message"], (msgs, r.text)
        assert r.json()["error"]["param"] == param, r.text
    two = {**call, "id": "call_2"}
    msgs = user("Weather in Paris and Rome?") + [
        {"role": "assistant", "content": None, "tool_calls": [call, two]},
        {**result, "tool_call_id": "call_2"}, result]  # in any order
    r = sdk(server).chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER],
                                            temperature=0, max_tokens=4)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # two calls of one id, each answered
    msgs = user("Weather in Paris, twice?") + [
        {"role": "assistant", "content": None, "tool_calls": [call, call]}, result, result]
    with client(server) as c:
        r = c.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs,
                                                 "tools": [WEATHER], "max_tokens": 4})
    assert r.status_code == 200, r.text


def test_max_tokens_cuts_a_call_with_length(server):
    r = sdk(server).chat.completions.create(
        model=MODEL, messages=user("Weather in Paris?"), tools=TOOLS, temperature=0,
        max_tokens=3, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    ch = r.choices[0]
    assert ch.finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(ch.message.tool_calls[0].function.arguments)
    # cut before the function's name is known: the text, streamed as replied whole
    kw = dict(model=MODEL, messages=user("Weather in Paris?"), tools=TOOLS, temperature=0,
              max_tokens=2, tool_choice="required")
    whole = sdk(server).chat.completions.create(**kw).choices[0]
    assert whole.finish_reason == "length" and not whole.message.tool_calls
    assert whole.message.content.startswith("{")
    chunks = [ch for ch in sdk(server).chat.completions.create(stream=True, **kw) if ch.choices]
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == whole.message.content
    assert chunks[-1].choices[0].finish_reason == "length"


def test_stop_strings_do_not_cut_a_call(server):
    """A stop string (agent frameworks send some) would cut the call's JSON: it is not
    applied to a call."""
    r = sdk(server).chat.completions.create(
        model=MODEL, messages=user("Weather in Paris?"), tools=[WEATHER], temperature=0,
        tool_choice="required", max_tokens=80, stop=["\"", "\n", "}"])
    assert r.choices[0].finish_reason == "tool_calls"
    check_weather_args(r.choices[0].message.tool_calls[0].function.arguments)


def test_neutral_values_ask_for_nothing(server):
    r = sdk(server).chat.completions.create(
        model=MODEL, messages=user("Say hi."), temperature=0, max_tokens=5,
        extra_body={"functions": [], "tools": [], "tool_choice": "none"})
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls


def test_calls_are_not_cached(server):
    with client(server) as h:
        body = {"model": MODEL, "messages": user("Weather in Lima?"), "tools": TOOLS,
                "tool_choice": "required", "temperature": 0, "max_tokens": 60}
        for _ in range(2):
            r = h.post("/v1/chat/completions", json=body)
            assert r.status_code == 200 and r.headers.get("X-Cache") != "HIT", r.headers
            assert r.json()["choices"][0]["message"]["tool_calls"]


@pytest.mark.parametrize("extra,param,words", [
    ({"tool_choice": "required"}, "tool_choice", "no function"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice", "nope"),
    ({"tools": TOOLS, "tool_choice": "always"}, "tool_choice", "must be"),
    ({"tools": [WEATHER, WEATHER], "tool_choice": "required"}, "tools", "twice"),
    ({"tools": [{"type": "custom", "custom": {"name": "x"}}], "tool_choice": "required"},
     "tools", "only function tools"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}],
      "tool_choice": "required"}, "tools", "letters, digits"),
    ({"tools": [WEATHER, {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^(?=A)"}}}}}],
      "tool_choice": "required"}, "tools",
     "tools[1].function.parameters: properties.code: pattern: lookaround is not supported"),
    ({"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(65)],
      "tool_choice": "required"}, "tools", "more than 64 functions"),
    ({"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(65)]},
     "tools", "more than 64 functions"),
    ({"tools": TOOLS, "logprobs": True}, "logprobs", "tool call"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
     "response_format", "tool call"),
    ({"tools": TOOLS, "tool_choice": "required", "logprobs": True}, "logprobs", "tool call"),
    ({"functions": [{"name": "f"}]}, "functions", "use tools"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "boolean"),
])
def test_what_cannot_be_served_is_refused(server, extra, param, words):
    with client(server) as h:
        r = h.post("/v1/chat/completions",
                   json={"model": MODEL, "messages": user("Weather?"), **extra})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err
