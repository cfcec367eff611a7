"""The client libraries people point at an OpenAI server, against `grammask serve` (issue 51).

Each test makes the requests a new user's code would make — the official `openai` SDK's
`chat.completions.parse(response_format=PydanticModel)` and plain `json_schema` with pydantic's
own schema, `instructor` (JSON_SCHEMA and TOOLS modes), LangChain's `ChatOpenAI`
(`with_structured_output` by `json_schema` and `function_calling`, `bind_tools`) — on the real
SmolLM2 model, greedy, `max_tokens=300`. Every answer must

1. finish: `finish_reason` "stop" or "tool_calls", never "length" (a constraint that lets a small
   model add keys or digits forever does not finish), and
2. validate twice: by the client's own pydantic parse, and by `jsonschema` against the schema the
   client actually sent (read off the wire, so what `.parse`, instructor and LangChain make of a
   pydantic model is what is judged, not what the test thinks they send).

Every HTTP exchange goes through an `httpx` hook (`Wire`) that keeps the request and the response
bodies; a failure message shows the finish reason, the token counts and the text.
"""

import enum
import json
from typing import Annotated, Literal, Optional, Union

import httpx
import instructor
import jsonschema
import openai
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field, conint, constr

from serverproc import KEY, Server

MAX_TOKENS = 300


# ---- the pydantic models (one per shape a client library commonly sends) ----


class Person(BaseModel):
    """Flat: a string, an integer, a boolean and a float."""

    name: str
    age: int
    is_student: bool
    height_m: float


class Patient(BaseModel):
    """Constrained scalars: bounded integer and float, a pattern, a maximum length."""

    name: str = Field(max_length=40)
    age: conint(ge=0, le=120)
    confidence: float = Field(ge=0, le=1)
    zip_code: constr(pattern=r"^[0-9]{5}$")


class Category(str, enum.Enum):
    billing = "billing"
    technical = "technical"
    account = "account"


class Ticket(BaseModel):
    """A `Literal` and an `Enum` (pydantic writes the enum as a `$ref` to `$defs`)."""

    priority: Literal["low", "medium", "high"]
    category: Category


class Customer(BaseModel):
    name: str
    email: str


class Item(BaseModel):
    product: str
    quantity: int


class Order(BaseModel):
    """Nested models and a bounded `list[Model]`."""

    customer: Customer
    items: list[Item] = Field(max_length=3)


class Contact(BaseModel):
    """`Optional` fields with defaults (pydantic: `anyOf` with null, not required)."""

    name: str
    phone: Optional[str] = None
    email: Optional[str] = None


class Cat(BaseModel):
    kind: Literal["cat"]
    name: str
    indoor: bool


class Dog(BaseModel):
    kind: Literal["dog"]
    name: str
    breed: str


class Owner(BaseModel):
    """A discriminated union (pydantic: `oneOf` with a `discriminator` mapping)."""

    owner: str
    pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]


class Article(BaseModel):
    """A set of strings (pydantic: an array with `uniqueItems: true`) and a bounded float."""

    title: str
    tags: set[str] = Field(max_length=3)
    rating: float = Field(ge=0, le=5)


class Node(BaseModel):
    """A recursive model: a tree (pydantic: `$ref` to itself under `$defs`)."""

    name: str
    children: list["Node"]


PROMPTS = {
    Person: "Extract the person: Ada Lovelace, 36, mathematician, not a student, 1.65 m tall.",
    Patient: "Extract the patient: Bob Smith, 45 years old, ZIP code 90210. "
    "Your confidence is 0.9.",
    Ticket: "Classify this support ticket: 'I was charged twice on my credit card, "
    "please fix it now!'",
    Order: "Extract the order: Alice (alice@example.com) bought 2 apples and 1 bread.",
    Contact: "Extract the contact: John Doe, phone 555-1234.",
    Owner: "Extract: Mary owns a dog named Rex, a beagle.",
    Article: "Give this article a title, at most three tags and a rating from 0 to 5: "
    "'Python 3.13 makes the interpreter faster.'",
    Node: "Make a tree: the root 'animals' has two children, 'cats' and 'dogs', "
    "which have no children.",
}
MODELS = list(PROMPTS)


# ---- the wire: every request and response body, as the client sent and received them ----


class Wire:
    """httpx event hooks keeping each chat request's body and its response's body."""

    def __init__(self):
        self.exchanges = []

    def on_response(self, response):
        response.read()
        if response.request.url.path.endswith("/chat/completions"):
            self.exchanges.append((json.loads(response.request.content),
                                   response.status_code, json.loads(response.content)))

    def client(self):
        return httpx.Client(event_hooks={"response": [self.on_response]}, timeout=120)

    def last(self):
        assert self.exchanges, "the client sent no chat request"
        return self.exchanges[-1]


@pytest.fixture(scope="module")
def server():
    s = Server("--max-concurrent", "4", "--max-queue", "16")
    yield s
    assert s.stop() == 0, "SIGTERM ends the server cleanly"


@pytest.fixture(scope="module")
def served(server):
    """The model id `/v1/models` lists: what a client is told to send as `model`."""
    (m,) = server.client.models.list().data
    return m.id


@pytest.fixture()
def wire():
    return Wire()


@pytest.fixture()
def oai(server, wire):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0,
                         http_client=wire.client())


def summary(body):
    """The answer in one line: finish reason, token counts, text or tool calls."""
    c = body["choices"][0]
    m = c["message"]
    u = body.get("usage") or {}
    text = m.get("content") or ""
    calls = [(t["function"]["name"], t["function"]["arguments"]) for t in m.get("tool_calls") or []]
    return (f"finish_reason={c['finish_reason']!r} prompt_tokens={u.get('prompt_tokens')} "
            f"completion_tokens={u.get('completion_tokens')} "
            f"content={text[:400]!r}{'…' if len(text) > 400 else ''} tool_calls={calls}")


def valid(text, schema, body):
    """`text` is JSON valid against `schema` by `jsonschema`; else the error and the answer."""
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError) as e:
        raise AssertionError(f"{e}\n{summary(body)}") from None


def judge(wire, want=("stop",)):
    """Checks the last exchange on the wire: a 200, a finished answer, and the answer valid by
    `jsonschema` against the schema (or the called tool's parameters) the client sent. Returns the
    request and the response bodies."""
    req, status, body = wire.last()
    assert status == 200, body
    c = body["choices"][0]
    assert c["finish_reason"] in want, summary(body)
    m = c["message"]
    rf = req.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
    if schema is not None:
        valid(m["content"], schema, body)
    tools = {t["function"]["name"]: t["function"].get("parameters") or {}
             for t in req.get("tools") or []}
    for call in m.get("tool_calls") or []:
        f = call["function"]
        assert f["name"] in tools, summary(body)
        valid(f["arguments"], tools[f["name"]], body)
    if want == ("tool_calls",):
        assert m.get("tool_calls"), summary(body)
    return req, body


def chat(content):
    return [{"role": "user", "content": content}]


# ---- the official openai SDK ----


def test_models_retrieve_names_the_served_model(oai, served):
    """`client.models.retrieve(id)` is `GET /v1/models/{id}`."""
    m = oai.models.retrieve(served)
    assert m.id == served


def test_an_unknown_model_name_is_model_not_found(oai, served):
    """A name the server does not serve is OpenAI's 404 `model_not_found` (the SDK's
    `NotFoundError`), for `models.retrieve` and for a completion alike."""
    with pytest.raises(openai.NotFoundError) as e:
        oai.chat.completions.create(model="gpt-4o-mini", messages=chat("Say hi."),
                                    temperature=0, max_tokens=8)
    assert e.value.body["code"] == "model_not_found", e.value.body
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("gpt-4o-mini")


# Where SmolLM2-135M itself loops greedily inside what the schema allows, with the output seen:
# Article repeats one `set[str]` item's text (`"tags": ["Python 3.13", "Python 3.13, 2019",
# "Python 3.13, 2019, 2019, …`, an unbounded string), Node nests the tree's names again and
# again (`animals → cats → dogs → animals → …`, a recursive model). The constraint cannot end
# an unbounded string or a recursion for the model; these must finish valid or run into the
# token limit with a 200 — never a finished invalid answer, an error or a crash.
MODEL_LOOPS = {"Article", "Node"}


def judge_or_model_loop(wire, model):
    """`judge` for models that finish; for `MODEL_LOOPS` a length stop at the limit passes."""
    req, status, body = wire.last()
    assert status == 200, body
    if model.__name__ in MODEL_LOOPS and body["choices"][0]["finish_reason"] == "length":
        assert body["usage"]["completion_tokens"] == MAX_TOKENS, summary(body)
        return req, body, False
    req, body = judge(wire)
    return req, body, True


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_openai_parse(oai, served, wire, model):
    """`chat.completions.parse(response_format=Model)`: the SDK sends a strict schema of its
    own making (every property required, `additionalProperties: false`)."""
    parse = getattr(oai.chat.completions, "parse", None) or oai.beta.chat.completions.parse
    try:
        r = parse(model=served, messages=chat(PROMPTS[model]), response_format=model,
                  temperature=0, max_tokens=MAX_TOKENS)
    except openai.LengthFinishReasonError:
        r = None
    req, body, finished = judge_or_model_loop(wire, model)
    assert req["response_format"]["type"] == "json_schema"
    if finished:
        assert isinstance(r.choices[0].message.parsed, model)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_openai_json_schema_of_pydantic(oai, served, wire, model):
    """`response_format` with pydantic's own `model_json_schema()`, no `additionalProperties`
    and optional fields optional: what most hand-written clients send."""
    r = oai.chat.completions.create(
        model=served, messages=chat(PROMPTS[model]), temperature=0, max_tokens=MAX_TOKENS,
        response_format={"type": "json_schema", "json_schema": {
            "name": model.__name__, "schema": model.model_json_schema()}})
    if judge_or_model_loop(wire, model)[2]:
        model.model_validate_json(r.choices[0].message.content)


def test_json_object_with_a_schema(oai, served, wire):
    """`{"type": "json_object", "schema": …}` (Together's, Fireworks' and vLLM's spelling,
    instructor's JSON mode on such servers): the schema is enforced, not just "an object"."""
    r = oai.chat.completions.create(
        model=served, messages=chat(PROMPTS[Person]), temperature=0, max_tokens=MAX_TOKENS,
        response_format={"type": "json_object", "schema": Person.model_json_schema()})
    judge(wire)
    Person.model_validate_json(r.choices[0].message.content)


# ---- instructor ----


@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS"])
@pytest.mark.parametrize("model", [Person, Ticket, Order], ids=lambda m: m.__name__)
def test_instructor(oai, served, wire, mode, model):
    client = instructor.from_openai(oai, mode=getattr(instructor.Mode, mode))
    try:
        out = client.chat.completions.create(
            model=served, messages=chat(PROMPTS[model]), response_model=model, max_retries=0,
            temperature=0, max_tokens=MAX_TOKENS)
    except Exception as e:  # instructor wraps a parse or validation failure
        out = e
    want = ("tool_calls",) if mode == "TOOLS" else ("stop",)
    req, _ = judge(wire, want)
    if mode == "TOOLS":
        assert [t["function"]["name"] for t in req["tools"]] == [model.__name__]
    assert isinstance(out, model), out


# ---- LangChain ----


def langchain(server, served, wire):
    return ChatOpenAI(base_url=server.url + "/v1", api_key=KEY, model=served, temperature=0,
                      max_tokens=MAX_TOKENS, max_retries=0, http_client=wire.client())


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
@pytest.mark.parametrize("model", [Person, Ticket, Owner], ids=lambda m: m.__name__)
def test_langchain_with_structured_output(server, served, wire, method, model):
    llm = langchain(server, served, wire).with_structured_output(
        model, method=method, include_raw=True)
    out = llm.invoke(PROMPTS[model])
    want = ("stop",) if method == "json_schema" else ("tool_calls",)
    judge(wire, want)
    assert out["parsing_error"] is None, out["parsing_error"]
    assert isinstance(out["parsed"], model), out


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
    """The current weather in a city."""
    return f"sunny in {city}"


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@pytest.mark.parametrize("choice", ["any", "get_weather"])
def test_langchain_bind_tools(server, served, wire, choice):
    llm = langchain(server, served, wire).bind_tools([get_weather, add], tool_choice=choice)
    msg = llm.invoke("What is the weather in Paris, in celsius?")
    judge(wire, ("tool_calls",))
    assert msg.tool_calls, msg
    call = msg.tool_calls[0]
    assert call["name"] in ("get_weather", "add")
    if choice == "get_weather":
        assert call["name"] == "get_weather"
        get_weather.args_schema.model_validate(call["args"])
