"""End-to-end tests of `grammask serve` with the official `openai` client (issue 16).

The server is the release binary built with `--features server` ($GRAMMASK_BIN), on the real
SmolLM2 model ($GRAMMASK_MODEL), on a free loopback port. Every structured output is judged by
Python's `jsonschema`, not by grammask. `.ci/server-step.sh` makes the venv and runs this file.
"""

import concurrent.futures as cf
import glob
import json
import os
import re
import socket
import threading
import time
import urllib.request

import jsonschema
import openai
import pytest

from serverproc import KEY, MASKBENCH, MODEL, ROOT, Server

# The served name: the model file's stem (no --model-name here).
NAME = os.path.splitext(os.path.basename(MODEL))[0]


@pytest.fixture(scope="module")
def server():
    s = Server("--max-concurrent", "8", "--max-queue", "256", "--max-body-bytes", "2000000",
               "--default-max-tokens", "48")
    yield s
    assert s.stop() == 0, "SIGTERM ends the server cleanly"


def ask(s, content, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 48)
    return s.client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": content}], **kw)


def test_health_and_models(server):
    models = server.client.models.list()
    assert [m.id for m in models.data] == [NAME]
    assert server.client.models.retrieve(NAME).id == NAME
    with pytest.raises(openai.NotFoundError) as e:
        server.client.models.retrieve("gpt-4o")
    assert e.value.body["code"] == "model_not_found" and e.value.body["param"] == "model"


def test_a_model_not_served_is_404_and_an_absent_one_is_the_served_one(server):
    with pytest.raises(openai.NotFoundError) as e:
        server.client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert e.value.body["code"] == "model_not_found", e.value.body
    assert e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        server.client.completions.create(model="gpt-4o", prompt="hi", max_tokens=2)
    status, _, out = server.raw("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert status == 200 and out["model"] == NAME, out


def test_plain_chat_answers(server):
    r = ask(server, "What is the capital of France? Answer in one sentence.")
    assert "Paris" in r.choices[0].message.content
    assert r.usage.prompt_tokens > 10
    assert r.usage.completion_tokens == r.usage.total_tokens - r.usage.prompt_tokens


def test_json_object(server):
    r = ask(server, "Give a JSON object with a key ok set to true.", max_tokens=32,
            response_format={"type": "json_object"})
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    assert isinstance(json.loads(c.message.content), dict)


def maskbench_schemas(n):
    """MaskBench schemas of flat forms (an object of at most three required scalar or enum
    properties, no others allowed), sorted by file name so the choice is stable."""
    out = []
    for path in sorted(glob.glob(os.path.join(MASKBENCH, "*.json"))):
        s = json.load(open(path))["schema"]
        if not isinstance(s, dict) or s.get("type", "object") != "object":
            continue
        props = s.get("properties") or {}
        if (s.get("additionalProperties") is not False or not props or len(props) > 3
                or set(s.get("required", [])) != set(props)):
            continue
        if all(isinstance(v, dict) and v.get("type") != "object"
               and (v.get("type") in ("string", "integer", "number", "boolean") or "enum" in v)
               for v in props.values()):
            out.append((os.path.basename(path), s))
        if len(out) == n:
            break
    assert len(out) == n, f"MaskBench has only {len(out)} such schemas"
    return out


def form(schema):
    return "Fill in this form as JSON: " + json.dumps(schema.get("properties"))


@pytest.mark.parametrize("name,schema", maskbench_schemas(4))
def test_json_schema_strict_on_maskbench(server, name, schema):
    r = ask(server, form(schema), max_tokens=96,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "form", "schema": schema, "strict": True}})
    c = r.choices[0]
    if c.finish_reason == "length":
        # The token limit cut the document: what there is must still be a prefix the schema
        # allows, which jsonschema cannot judge; require that it at least did not stop early.
        assert r.usage.completion_tokens == 96
        return
    jsonschema.validate(json.loads(c.message.content), schema)


def test_most_maskbench_answers_complete(server):
    done = 0
    schemas = maskbench_schemas(4)
    for _, schema in schemas:
        r = ask(server, form(schema), max_tokens=96,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "f", "schema": schema, "strict": True}})
        if r.choices[0].finish_reason == "stop":
            jsonschema.validate(json.loads(r.choices[0].message.content), schema)
            done += 1
    assert done >= len(schemas) // 2, f"only {done} of {len(schemas)} finished"


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"],
    "additionalProperties": False}}}


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "get_time"}}])
def test_tools_with_a_call_required(server, choice):
    r = ask(server, "What is the weather in Paris?", tools=[WEATHER, TIME], tool_choice=choice,
            max_tokens=48)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    calls = c.message.tool_calls
    assert len(calls) == 1
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}
    if isinstance(choice, dict):
        assert calls[0].function.name == "get_time"
    jsonschema.validate(json.loads(calls[0].function.arguments), tools[calls[0].function.name])


def test_tools_stream(server):
    chunks = list(server.client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": "Weather in Rome?"}], tools=[WEATHER],
        tool_choice="required", temperature=0, max_tokens=48, stream=True))
    calls = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])
             if ch.choices]
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    jsonschema.validate(json.loads(calls[0].function.arguments),
                        WEATHER["function"]["parameters"])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_call_cut_off_by_max_tokens_is_a_partial_call_not_content(server):
    # OpenAI reports the call as far as it goes, in tool_calls, with finish_reason "length".
    kw = dict(model=NAME, messages=[{"role": "user", "content": "Weather in Rome?"}],
              tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=14)
    c = server.client.chat.completions.create(**kw).choices[0]
    assert c.finish_reason == "length", c
    assert not c.message.content, c.message.content
    (call,) = c.message.tool_calls
    assert call.function.name == "get_weather", call
    args = call.function.arguments
    assert '"name"' not in args and args.startswith("{"), args
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)
    chunks = list(server.client.chat.completions.create(stream=True, **kw))
    deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
    assert not "".join(d.content or "" for d in deltas)
    calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert [(tc.function.name, tc.function.arguments) for tc in calls] == [("get_weather", args)]
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_with_tools_bound_a_text_answer_streams(server, choice):
    kw = dict(model=NAME, messages=[{"role": "user", "content": "Name three fruits."}],
              tools=[WEATHER], tool_choice=choice, temperature=0, max_tokens=32)
    whole = server.client.chat.completions.create(**kw).choices[0]
    assert not whole.message.tool_calls and whole.message.content, whole
    chunks = list(server.client.chat.completions.create(stream=True, **kw))
    texts = [ch.choices[0].delta.content for ch in chunks
             if ch.choices and ch.choices[0].delta.content]
    assert "".join(texts) == whole.message.content
    assert len(texts) > 3, texts
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason


def test_the_generation_profile_and_its_request_knobs(server):
    """By default a schema compiles under the generation profile: an object open only by
    silence closed; `disable_any_whitespace` keeps it compact, `profile: exact`
    brings back the schema's whole language, and an unknown profile is a 400."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "tags": {"type": "array", "maxItems": 2,
                                                        "items": {"type": "string", "maxLength": 12}}},
              "required": ["name", "tags"]}
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}

    def answer(**extra):
        r = ask(server, "Describe a cat as JSON with a name and tags.", max_tokens=80,
                response_format=rf, **extra)
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        text = r.choices[0].message.content
        doc = json.loads(text)
        jsonschema.validate(doc, schema)
        return text, doc

    text, doc = answer()
    assert set(doc) <= {"name", "tags"}, "closed: only the declared keys"
    text, doc = answer(extra_body={"structured_outputs": {"disable_any_whitespace": True}})
    assert text == json.dumps(doc, ensure_ascii=False, separators=(",", ":")), "compact"
    with pytest.raises(openai.BadRequestError):
        ask(server, "hi", response_format=rf, extra_body={"structured_outputs": {"profile": "loose"}})
    text, doc = answer(extra_body={"structured_outputs": {"profile": "exact"}})


def test_json_object_with_a_schema_honours_it(server):
    # instructor's JSON_SCHEMA mode sends exactly this shape.
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "green"]},
              "count": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["colour", "count"], "additionalProperties": False}
    r = ask(server, "Give a JSON object.", max_tokens=32,
            response_format={"type": "json_object", "schema": schema})
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    jsonschema.validate(json.loads(c.message.content), schema)


def test_processed_logprobs_show_only_what_the_constraint_allowed(server):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    prompt = "Say hello."
    processed = ask(server, prompt, max_tokens=12, response_format=rf, logprobs=True,
                    top_logprobs=5, extra_body={"logprobs_mode": "processed_logprobs"})
    lp = processed.choices[0].logprobs.content
    # The first token must start the object: `{` after optional whitespace, nothing else.
    first = [t.token for t in lp[0].top_logprobs]
    assert first and all(t.strip() == "" or t.lstrip().startswith("{") for t in first), first
    assert all(t.logprob <= 0 for t in lp[0].top_logprobs)
    # Raw (the default) is the model's own distribution: for this prompt its favourite first
    # tokens are words, not `{`.
    raw = ask(server, prompt, max_tokens=12, response_format=rf, logprobs=True, top_logprobs=5)
    raw_first = [t.token for t in raw.choices[0].logprobs.content[0].top_logprobs]
    assert any(not t.lstrip().startswith("{") and t.strip() for t in raw_first), raw_first
    assert raw.choices[0].message.content == processed.choices[0].message.content


def test_streaming_matches_the_whole_answer(server):
    kw = dict(temperature=0, max_tokens=32)
    whole = ask(server, "Name three fruits.", **kw).choices[0].message.content
    chunks = list(server.client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": "Name three fruits."}], stream=True,
        stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole
    assert len([ch for ch in chunks if ch.choices and ch.choices[0].delta.content]) > 3
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
    assert finishes[-1] in ("stop", "length") and all(f is None for f in finishes[:-1])
    assert chunks[-1].usage.completion_tokens > 0 and not chunks[-1].choices


def test_streaming_json_schema_validates(server):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
              "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    chunks = list(server.client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": "A person as JSON."}], stream=True,
        temperature=0, max_tokens=48, response_format={
            "type": "json_schema", "json_schema": {"name": "p", "schema": schema}}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(text), schema)


def test_extensions_regex_choice_grammar(server):
    r = ask(server, "Give a date.", extra_body={"structured_outputs": {"regex": r"\d{4}-\d{2}-\d{2}"}})
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r.choices[0].message.content)
    r = ask(server, "Is the sky blue?", extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].message.content in ("yes", "no")
    g = 'root ::= "(" [0-9]+ " + " [0-9]+ ")"'
    r = ask(server, "Write a sum.", extra_body={"structured_outputs": {"grammar": g}})
    assert re.fullmatch(r"\(\d+ \+ \d+\)", r.choices[0].message.content), r
    r = ask(server, "A person.", extra_body={"guided_json": {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}})
    assert isinstance(json.loads(r.choices[0].message.content)["n"], int)


def test_stop_sampling_seed_and_logprobs(server):
    r = ask(server, "Count from 1 to 10, separated by commas.", stop=["5"])
    assert "5" not in r.choices[0].message.content and r.choices[0].finish_reason == "stop"
    a = ask(server, "Tell a story.", temperature=0.9, top_p=0.9, seed=7, max_tokens=16)
    b = ask(server, "Tell a story.", temperature=0.9, top_p=0.9, seed=7, max_tokens=16)
    assert a.choices[0].message.content == b.choices[0].message.content
    r = ask(server, "Say hi.", logprobs=True, top_logprobs=3, max_tokens=5)
    lp = r.choices[0].logprobs.content
    assert len(lp) >= 1 and all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in lp)
    assert "".join(t.token for t in lp) in r.choices[0].message.content + "<|im_end|>"


def test_streamed_logprobs_come_with_their_text_and_equal_the_whole_answers(server):
    # Each chunk carries the logprobs of the tokens whose text it completes; over the stream
    # they are the whole answer's (same seed), for chat and for the completions endpoint.
    kw = dict(temperature=0.8, seed=11, max_tokens=24, logprobs=True, top_logprobs=2)
    msgs = [{"role": "user", "content": "Describe the sea in two sentences."}]
    whole = server.client.chat.completions.create(model=NAME, messages=msgs, **kw)
    chunks = list(server.client.chat.completions.create(
        model=NAME, messages=msgs, stream=True, **kw))
    text, tokens, carrying = "", "", 0
    streamed = []
    for ch in chunks:
        if not ch.choices:
            continue
        text += ch.choices[0].delta.content or ""
        lp = ch.choices[0].logprobs
        if lp and lp.content:
            carrying += 1
            streamed += lp.content
            tokens += "".join(t.token for t in lp.content)
            assert (text + "<|im_end|>").startswith(tokens), (text, tokens)
    assert text == whole.choices[0].message.content
    assert carrying > 3, "logprobs arrive with the text, not all at the end"
    want = whole.choices[0].logprobs.content
    assert [(t.token, [x.token for x in t.top_logprobs]) for t in streamed] == \
        [(t.token, [x.token for x in t.top_logprobs]) for t in want]
    assert all(abs(a.logprob - b.logprob) < 1e-3 for a, b in zip(streamed, want))
    ckw = dict(model=NAME, prompt="The sea is", max_tokens=12, temperature=0.8, seed=5, logprobs=2)
    w = server.client.completions.create(**ckw).choices[0]
    cs = [c.choices[0] for c in server.client.completions.create(stream=True, **ckw) if c.choices]
    assert "".join(c.text for c in cs) == w.text
    got = [(t, o) for c in cs if c.logprobs
           for t, o in zip(c.logprobs.tokens, c.logprobs.text_offset)]
    assert got == list(zip(w.logprobs.tokens, w.logprobs.text_offset))


def test_completions_endpoint(server):
    r = server.client.completions.create(model=NAME, prompt="The capital of France is",
                                         max_tokens=8, temperature=0, logprobs=2)
    assert "Paris" in r.choices[0].text
    assert len(r.choices[0].logprobs.tokens) == r.usage.completion_tokens
    chunks = list(server.client.completions.create(
        model=NAME, prompt="The capital of France is", max_tokens=8, temperature=0,
        stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text


def test_bad_requests_get_their_status_and_the_server_keeps_serving(server):
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    status, _, body = server.raw("/v1/chat/completions", b'{"messages": [')
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    msgs = [{"role": "user", "content": "hi"}]
    for extra, param in [({"temperature": "hot"}, "temperature"), ({"n": 2}, "n"),
                         ({"response_format": {"type": "yaml"}}, "response_format"),
                         ({"messages": "hi"}, "messages"), ({"max_tokens": -3}, "max_tokens")]:
        body = {"model": NAME, "messages": msgs, **extra}
        status, _, out = server.raw("/v1/chat/completions", body)
        assert status == 400 and out["error"]["param"] == param, (extra, out)
    # A schema keyword grammask refuses: the keyword and its pointer are named.
    schema = {"type": "object", "properties": {"x": {"type": "string", "format": "regex"}}}
    status, _, out = server.raw("/v1/chat/completions", {"messages": msgs, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert status == 400 and out["error"]["code"] == "unsupported_keyword"
    assert '"format"' in out["error"]["message"] and "/properties/x" in out["error"]["message"]
    # Hostile inputs: a 100,000-member enum of objects (an enum's numbers or strings would be
    # one alternative), and the fuzz corpus's exploding regex.
    huge = {"enum": [{"k": i} for i in range(100_000)]}
    status, _, out = server.raw("/v1/chat/completions", {"messages": msgs, "guided_json": huge})
    assert status == 400 and out["error"]["param"] == "guided_json", out
    assert "limit" in out["error"]["message"], out
    for path in sorted(glob.glob(os.path.join(ROOT, "fuzz/regressions/open/regex_compile/*"))):
        pattern = open(path, "rb").read().decode("utf-8", "replace")
        status, _, out = server.raw("/v1/chat/completions", {
            "messages": msgs, "max_tokens": 4, "guided_regex": pattern})
        assert status in (200, 400), (path, status, out)
        if status == 400:
            assert out["error"]["param"] == "guided_regex"
    # 10 MB: over the body limit.
    status, out = big_body(server, 10 << 20)
    assert status == 413 and out["error"]["code"] == "request_too_large", out
    status, _, out = server.raw("/v1/nowhere", {})
    assert status == 404
    # Still serving.
    assert "Paris" in ask(server, "What is the capital of France? Answer in one sentence.").choices[0].message.content


def big_body(server, size):
    """POST `size` bytes the way a well-behaved client does (`Expect: 100-continue`: the body
    is sent only if the server asks for it), so the server's early 413 is read, not lost to a
    broken pipe. Returns (status, JSON body)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {size}\r\nExpect: 100-continue\r\n\r\n")
        sock.sendall(head.encode())
        f = sock.makefile("rb")
        status = int(f.readline().split()[1])
        if status == 100:
            f.readline()
            try:
                sock.sendall(b" " * size)
            except OSError:
                pass
            status = int(f.readline().split()[1])
        length = 0
        while (line := f.readline().strip()):
            k, _, v = line.decode().partition(":")
            if k.lower() == "content-length":
                length = int(v)
        return status, json.loads(f.read(length))


def test_metrics(server):
    with urllib.request.urlopen(server.url + "/metrics") as r:
        text = r.read().decode()
    for name in ["grammask_requests_total", "grammask_completion_tokens_total",
                 "grammask_queue_depth", "grammask_mask_seconds_bucket",
                 "grammask_compile_seconds_count", "grammask_batch_sequences_bucket"]:
        assert name in text, name
    ok = re.search(r'grammask_requests_total\{endpoint="chat",status="200"\} (\d+)', text)
    assert ok and int(ok.group(1)) > 5


def test_load_16_clients_8_requests(server):
    """16 concurrent clients × 8 requests, mixed constraints and streaming: every answer
    arrives and is valid; the server's memory stays bounded."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "additionalProperties": False}
    rss0 = server.rss_kb()

    def one(i, j):
        kind = (i + j) % 5
        kw = dict(model=NAME, messages=[{"role": "user", "content": f"Item {i}.{j} as JSON."}],
                  max_tokens=12, temperature=0.7, seed=i * 8 + j)
        if kind == 0:
            kw["response_format"] = {"type": "json_object"}
        elif kind == 1:
            kw["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "a", "schema": schema}}
        elif kind == 2:
            kw["extra_body"] = {"guided_regex": "[a-z]{1,8}"}
        if kind in (1, 3):
            chunks = list(server.client.chat.completions.create(stream=True, **kw))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        else:
            r = server.client.chat.completions.create(**kw)
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        if finish == "stop":
            if kind == 0:
                assert isinstance(json.loads(text), dict)
            elif kind == 1:
                jsonschema.validate(json.loads(text), schema)
            elif kind == 2:
                assert re.fullmatch("[a-z]{1,8}", text), text
        else:
            assert finish == "length"
        return kind

    def client(i):
        return [one(i, j) for j in range(8)]

    with cf.ThreadPoolExecutor(16) as ex:
        done = [k for ks in ex.map(client, range(16)) for k in ks]
    assert len(done) == 128
    rss1 = server.rss_kb()
    # Sixteen sequences of a few hundred tokens need ~16 × 300 × 46 KB of KV cache; allow for
    # allocator slack, not for growth per request.
    assert rss1 < rss0 + 400_000, (rss0, rss1)
    with urllib.request.urlopen(server.url + "/health") as r:
        h = json.load(r)
    assert h["active"] == 0 and h["queued"] == 0


def test_queue_full_is_429_and_a_disconnect_frees_the_slot():
    s = Server("--max-concurrent", "1", "--max-queue", "1", "--default-max-tokens", "400",
               "--accept-any-model")
    try:
        # One request holds the slot with a long stream; we read a little and hang up.
        req = urllib.request.Request(
            s.url + "/v1/chat/completions",
            data=json.dumps({"messages": [{"role": "user", "content": "Write a long essay."}],
                             "stream": True, "max_tokens": 400, "temperature": 0}).encode(),
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
        stream = urllib.request.urlopen(req, timeout=60)
        stream.readline()
        # The slot is busy: one request may queue, the next gets 429 with Retry-After.
        results = {}

        def queued():
            results["q"] = s.raw("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})

        t = threading.Thread(target=queued)
        t.start()
        time.sleep(0.5)
        status, headers, out = s.raw("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert status == 429 and out["error"]["type"] == "rate_limit_error"
        assert {k.lower(): v for k, v in headers.items()}.get("retry-after") == "1"
        # Hang up: the slot goes to the queued request long before 400 tokens could be done.
        t0 = time.time()
        stream.close()
        t.join(timeout=30)
        assert results["q"][0] == 200
        assert time.time() - t0 < 5, time.time() - t0
        # --accept-any-model: a name that is not the served one is answered, under the
        # served name.
        status, _, out = s.raw("/v1/chat/completions", {
            "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert status == 200 and out["model"] == NAME, out
    finally:
        assert s.stop() == 0
