"""End-to-end tests of structured output (response_format json_object and json_schema, and
the Responses API's text.format) through the official openai SDK, its pydantic helpers
included, on the default model: the answers are JSON of the schema, streamed and not, on
every route; schemas the server cannot hold to are refused naming response_format; and the
answer caches key JSON answers apart from free text."""

import json
import re
from datetime import date, datetime
from typing import Literal, Union
from uuid import UUID

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

MODEL = "smollm2-135m-instruct"


def sdk(server):
    http = httpx.Client(verify=server.ssl_context(), timeout=120)
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", http_client=http)


def client(server):
    return httpx.Client(base_url=server.base_url, verify=server.ssl_context(), timeout=120)


class City(BaseModel):
    """Bounded strings: sampled hot, a small model may otherwise write a name until
    max_tokens (the bound is the grammar's maxLength, checked here too)."""
    name: str = Field(max_length=40)
    country: str = Field(max_length=40)
    population: int
    coastal: bool


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int
    keywords: list[str]


def user(content):
    return [{"role": "user", "content": content}]


def test_sdk_parse_returns_the_pydantic_model(server):
    c = sdk(server)
    for seed in (0, 1, 2):
        r = c.chat.completions.parse(model=MODEL, messages=user("Describe a famous city."),
                                     response_format=City, temperature=0.8, seed=seed,
                                     max_tokens=120)
        ch = r.choices[0]
        assert ch.finish_reason == "stop", ch.message.content
        assert isinstance(ch.message.parsed, City)
        assert len(ch.message.parsed.name) <= 40 and len(ch.message.parsed.country) <= 40
        # exactly the schema's keys, in its order
        assert list(json.loads(ch.message.content)) == ["name", "country", "population",
                                                        "coastal"]
    r = c.chat.completions.parse(model=MODEL, response_format=Review, temperature=0,
                                 max_tokens=150,
                                 messages=user("Review: the food was cold and the waiter rude."))
    review = r.choices[0].message.parsed
    assert review.sentiment in ("positive", "negative", "neutral")
    assert all(isinstance(k, str) for k in review.keywords)


def test_the_same_question_without_a_format_is_free_text(server):
    """The format, not the question, makes the JSON (the test could not pass otherwise)."""
    c = sdk(server)
    free = c.chat.completions.create(model=MODEL, messages=user("Describe a famous city."),
                                     temperature=0, max_tokens=40)
    with pytest.raises(ValueError):
        json.loads(free.choices[0].message.content)


def test_json_object_streamed_equals_non_streamed(server):
    c = sdk(server)
    kw = dict(model=MODEL, messages=user("List three fruits and their colors in JSON."),
              response_format={"type": "json_object"}, temperature=0, max_tokens=200)
    full = c.chat.completions.create(**kw)
    assert full.choices[0].finish_reason == "stop"
    doc = json.loads(full.choices[0].message.content)
    assert isinstance(doc, dict) and doc
    chunks = list(c.chat.completions.create(stream=True, **kw))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_raw_schema_with_nesting_enums_and_bounds(server):
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 30},
            "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                     "minItems": 1, "maxItems": 2},
            "author": {"$ref": "#/$defs/Person"},
            "draft": {"type": ["boolean", "null"]},
        },
        "required": ["title", "tags", "author"],
        "additionalProperties": False,
        "$defs": {"Person": {"type": "object", "properties": {
            "first": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["first", "age"]}},
    }
    with client(server) as h:
        for temperature in (0, 1.2):
            r = h.post("/v1/chat/completions", json={
                "model": MODEL, "messages": user("Invent a blog post."), "seed": 5,
                "temperature": temperature, "max_tokens": 200,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "post", "schema": schema}}})
            assert r.status_code == 200, r.text
            ch = r.json()["choices"][0]
            assert ch["finish_reason"] == "stop", ch
            doc = json.loads(ch["message"]["content"])
            assert isinstance(doc["title"], str) and len(doc["title"]) <= 30
            assert 1 <= len(doc["tags"]) <= 2 and set(doc["tags"]) <= {"red", "green", "blue"}
            assert isinstance(doc["author"]["first"], str)
            assert isinstance(doc["author"]["age"], int)
            assert doc.get("draft", None) in (True, False, None)
            assert set(doc) <= {"title", "tags", "author", "draft"}


class Rating(BaseModel):
    stars: int = Field(ge=1, le=5)
    price: float = Field(gt=0, le=100, multiple_of=0.25)
    year: int = Field(ge=1900, lt=2030)


def test_numeric_bounds_of_pydantic_fields_hold(server):
    """Field(ge=, le=, gt=, lt=, multiple_of=): sampled hot, every answer is within them,
    and the SDK's own validation (which would raise otherwise) passes."""
    c = sdk(server)
    seen = set()
    for seed in range(4):
        r = c.chat.completions.parse(
            model=MODEL, response_format=Rating, temperature=1.3, seed=seed, max_tokens=80,
            messages=user("Rate the restaurant Chez Marie: stars, a price, the year it opened."))
        ch = r.choices[0]
        assert ch.finish_reason == "stop", ch.message.content
        rating = ch.message.parsed
        assert 1 <= rating.stars <= 5
        assert 0 < rating.price <= 100 and (rating.price * 4).is_integer()
        assert 1900 <= rating.year < 2030
        seen.add(ch.message.content)
    assert len(seen) > 1, "sampling made the same answer every time"


def parsed_hot(server, model, max_tokens, question):
    """The SDK's parse of question into model, sampled hot with seeds 0, 1 and 2: each
    answer's choice, complete."""
    c = sdk(server)
    for seed in range(3):
        r = c.chat.completions.parse(model=MODEL, response_format=model, temperature=1.0,
                                     seed=seed, max_tokens=max_tokens, messages=user(question))
        ch = r.choices[0]
        assert ch.finish_reason == "stop", ch.message.content
        yield ch


class Booking(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")
    day: date
    at: datetime
    ref: UUID
    contact: str = Field(max_length=40, json_schema_extra={"format": "email"})


def test_patterns_and_formats_hold(server):
    """Field(pattern=), date, datetime and UUID fields (formats date, date-time, uuid) and a
    format email: sampled hot, every answer parses with pydantic's own checks."""
    for ch in parsed_hot(server, Booking, 220, "Make up a hotel booking: a code, the day, the "
                         "arrival time, a reference and the guest's email."):
        b = ch.message.parsed
        assert re.fullmatch(r"[A-Z]{3}-\d{4}", b.code)
        assert isinstance(b.day, date) and isinstance(b.at, datetime) and b.at.tzinfo
        assert re.fullmatch(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}", b.contact), b.contact


class Route(BaseModel):
    start: tuple[float, float]
    stop: tuple[str, int]


def test_tuples_of_pydantic_fields_hold(server):
    """tuple[...] fields (prefixItems, each place its own type, as many items as places):
    sampled hot, every answer parses with pydantic's own checks."""
    assert "prefixItems" in json.dumps(Route.model_json_schema())
    for ch in parsed_hot(server, Route, 80, "A route: its start as latitude and longitude, and "
                         "where it stops as a station name and a platform number."):
        doc = json.loads(ch.message.content)
        assert len(doc["start"]) == 2 and len(doc["stop"]) == 2, doc
        assert all(isinstance(v, (int, float)) for v in doc["start"])
        assert isinstance(doc["stop"][0], str) and isinstance(doc["stop"][1], int)
        assert isinstance(ch.message.parsed, Route)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(ge=1, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Owner(BaseModel):
    name: str = Field(max_length=30)
    pet: Union[Cat, Dog] = Field(discriminator="kind")


def test_tagged_unions_of_pydantic_hold(server):
    """A discriminated union (oneOf of $refs told apart by a Literal, with OpenAPI's
    discriminator): every answer is one of its members, whole."""
    assert "discriminator" in json.dumps(Owner.model_json_schema())
    kinds = set()
    for ch in parsed_hot(server, Owner, 80, "A pet owner: their name and their pet."):
        pet = ch.message.parsed.pet
        assert isinstance(pet, (Cat, Dog)), pet
        kinds.add(pet.kind)
    assert kinds


def test_max_tokens_cuts_a_document_with_length(server):
    r = sdk(server).chat.completions.create(
        model=MODEL, messages=user("Describe a city in detail, in JSON."), temperature=0, max_tokens=5,
        response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(r.choices[0].message.content)


def test_recursion_nested_to_the_limit_still_closes(server):
    """A schema of optional recursion lets the model nest as deep as it likes: where no
    deeper level fits, the grammar leaves only what closes, so the answer still parses
    (streamed the same) and ends with stop, well within max_tokens."""
    tree = {"type": "object", "properties": {"a": {"$ref": "#"}}, "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "tree", "schema": tree}}
    kids = {"type": "array", "items": {"$ref": "#"}}
    c = sdk(server)
    for f in (fmt, {"type": "json_schema", "json_schema": {"name": "kids", "schema": kids}}):
        r = c.chat.completions.create(model=MODEL, messages=user("JSON please"), temperature=0,
                                      max_tokens=600, response_format=f)
        ch = r.choices[0]
        assert ch.finish_reason == "stop", ch.message.content
        json.loads(ch.message.content)
    stream = c.chat.completions.create(model=MODEL, messages=user("JSON please"), temperature=0,
                                       max_tokens=600, response_format=fmt, stream=True)
    text = "".join(k.choices[0].delta.content or "" for k in stream if k.choices)
    doc = json.loads(text)
    depth = 0
    while doc:
        doc, depth = doc["a"], depth + 1
    assert depth >= 2, text


@pytest.mark.parametrize("fmt,words", [
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^(?!A)"}}}}},
     "properties.code: pattern: lookaround is not supported"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {"$ref": "#/$defs/X"}}},
     "#/$defs/X is not found"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"a": {}}, "required": ["b"]}}},
     "required names \"b\""),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {"$ref": "#"}}},
     "no document of the schema is finite"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}}},
     "no document of the schema is finite"),
    ({"type": "json_schema", "json_schema": "{}"}, "json_schema must be an object"),
    ({"type": "yaml"}, "must be text, json_object or json_schema"),
    ("json", "must be an object"),
])
def test_schemas_it_cannot_hold_to_are_refused(server, fmt, words):
    with client(server) as h:
        r = h.post("/v1/chat/completions", json={"model": MODEL, "messages": user("hi"),
                                                 "response_format": fmt})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "response_format" and words in err["message"], err


def test_completions_route_takes_response_format(server):
    with client(server) as h:
        r = h.post("/v1/completions", json={
            "model": MODEL, "prompt": "A user profile:", "max_tokens": 120, "temperature": 0,
            "response_format": {"type": "json_object"}})
    assert r.status_code == 200, r.text
    ch = r.json()["choices"][0]
    assert ch["finish_reason"] == "stop"
    assert isinstance(json.loads(ch["text"]), dict)


def test_responses_api_text_format(server):
    c = sdk(server)
    r = c.responses.parse(model=MODEL, input="Describe a famous city.", text_format=City,
                          temperature=0, max_output_tokens=120)
    assert r.status == "completed"
    assert isinstance(r.output_parsed, City)
    assert r.text.format.type == "json_schema" and r.text.format.name == "City"
    events = list(c.responses.create(model=MODEL, input="Describe a dog.", temperature=0,
                                     max_output_tokens=120, stream=True,
                                     text={"format": {"type": "json_object"}}))
    done = [e for e in events if e.type == "response.completed"]
    assert done, [e.type for e in events]
    assert isinstance(json.loads(done[0].response.output_text), dict)


def test_json_answers_are_cached_apart_from_free_text(server):
    body = {"model": MODEL, "messages": user("Describe a famous city."), "temperature": 0,
            "max_tokens": 120, "response_format": {"type": "json_object"}}
    with client(server) as h:
        first = h.post("/v1/chat/completions", json=body)
        assert first.status_code == 200 and first.headers["x-cache"] == "MISS"
        answer = first.json()["choices"][0]["message"]["content"]
        json.loads(answer)
        for _ in range(100):  # stored after the reply
            again = h.post("/v1/chat/completions", json=body)
            if again.headers["x-cache"] == "HIT":
                break
        assert again.headers["x-cache"] == "HIT"
        assert again.json()["choices"][0]["message"]["content"] == answer
        # the question without the format, or with another schema, is not answered with it
        plain = {k: v for k, v in body.items() if k != "response_format"}
        r = h.post("/v1/chat/completions", json=plain, headers={"Cache-Control": "only-if-cached"})
        assert r.status_code == 504, r.text
        other = dict(body, response_format={"type": "json_schema", "json_schema": {
            "name": "c", "schema": City.model_json_schema()}})
        r = h.post("/v1/chat/completions", json=other, headers={"Cache-Control": "only-if-cached"})
        assert r.status_code == 504, r.text
