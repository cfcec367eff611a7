"""Threading and pickling: mask fills release the GIL (another Python thread runs *during* one
call), the batch fill equals per-matcher fills, one compiled constraint serves many threads,
and constraints pickle (source + vocabulary recipe, compiled again on load)."""

from __future__ import annotations

import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import grammask as gm
from conftest import REPO

HARD = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}}}


def hard_matchers(vocab: gm.Vocabulary, n: int) -> list[gm.Matcher]:
    """Matchers inside a JSON string with the mask cache off: every fill walks the trie."""
    compiled = gm.CompiledConstraint.json_schema(vocab, HARD, mask_cache=0)
    out = []
    for i in range(n):
        m = gm.Matcher(compiled)
        assert m.accept_string('{"s": "x' + "ab" * (i % 3))
        out.append(m)
    return out


def test_the_gil_is_released_during_a_batch_fill(qwen3):
    # Masks of the C-expression grammar mid-expression cost ~1 ms each (mask cache, position
    # masks and the build-time warm-up off), so one serial batch call lasts tens of
    # milliseconds.
    grammar = (REPO / "grammars" / "c_expr.gbnf").read_text()
    compiled = gm.CompiledConstraint.gbnf(
        qwen3, grammar, mask_cache=0, position_masks=0, warm_positions=0
    )
    n = 48
    for _attempt in range(4):
        matchers = [gm.Matcher(compiled) for _ in range(n)]
        assert all(m.accept_string("x = (a + ") for m in matchers)
        bm = gm.allocate_token_bitmask(n, qwen3.vocab_size)
        ticks: list[float] = []
        span: dict[str, float] = {}
        stop = threading.Event()

        def fill() -> None:
            span["start"] = time.perf_counter()
            gm.fill_next_token_bitmask_batch(matchers, bm, n_threads=1)
            span["end"] = time.perf_counter()
            stop.set()

        worker = threading.Thread(target=fill)
        worker.start()
        while not stop.is_set():
            ticks.append(time.perf_counter())
        worker.join()
        duration = span["end"] - span["start"]
        if duration >= 0.04:
            break
        n *= 2  # a fast machine: make the call long enough to judge
    assert duration >= 0.04, f"the batch call took only {duration * 1e3:.1f} ms"
    # Were the GIL held during the call, the main thread could run only in the one switch
    # interval (5 ms) before the call starts; the middle half of the call would see no tick.
    lo, hi = span["start"] + duration / 4, span["end"] - duration / 4
    middle = [t for t in ticks if lo < t < hi]
    assert len(middle) > 100, (
        f"the main thread ran {len(middle)} times in the middle {duration / 2 * 1e3:.0f} ms "
        "of the batch fill"
    )


def test_batch_fill_equals_single_fills_on_any_thread_count(qwen3):
    matchers = hard_matchers(qwen3, 16)
    single = gm.allocate_token_bitmask(16, qwen3.vocab_size)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(single, i)
    for n_threads in (1, 2, 4):
        batch = np.zeros_like(single)
        gm.fill_next_token_bitmask_batch(matchers, batch, n_threads)
        assert np.array_equal(batch, single), f"n_threads={n_threads}"
    rev = np.zeros((20, single.shape[1]), dtype=np.int32)
    gm.fill_next_token_bitmask_batch(matchers, rev, 2, list(range(19, 3, -1)))
    assert np.array_equal(rev[4:20][::-1], single) and (rev[:4] == 0).all()
    # Many short batches back to back, on more threads than rows at times (a helper may find
    # no row left): every row is written exactly as a single fill writes it.
    for k in range(300):
        n = 1 + k % 3
        rows = np.zeros((n, single.shape[1]), dtype=np.int32)
        gm.fill_next_token_bitmask_batch(matchers[k % 13:k % 13 + n], rows, (2, 3, 8)[k % 3])
        assert np.array_equal(rows, single[k % 13:k % 13 + n]), k


def test_one_compiled_constraint_serves_many_threads(qwen3):
    compiled = gm.CompiledConstraint.json_schema(qwen3, HARD)
    docs = ['{"s": "a", "n": 1}', '{"n": -2.5e3}', '{"s": "\\u00e9"}', "{}"] * 4

    def walk(doc: str) -> bytes:
        m = gm.Matcher(compiled)
        assert m.accept_string(doc) and m.is_accepting()
        bm = gm.allocate_token_bitmask(1, qwen3.vocab_size)
        m.fill_next_token_bitmask(bm)
        return bm.tobytes()

    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(walk, docs))
    assert parallel == [walk(d) for d in docs]


def test_constraints_and_vocabularies_pickle(qwen3):
    c = gm.CompiledConstraint.json_schema(qwen3, HARD, whitespace="compact", mask_cache=0)
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.kind == "json_schema" and c2.source == c.source
    c3 = pickle.loads(pickle.dumps(c))
    assert c3.vocab is c2.vocab, "one vocabulary per recipe and process"
    for compiled in (c, c2):
        m = gm.Matcher(compiled)
        assert m.accept_string('{"s":"a"') and not m.accept_string(" ")  # compact kept
    for make in (
        lambda: gm.CompiledConstraint.regex(qwen3, "[a-z]+@[a-z]+"),
        lambda: gm.CompiledConstraint.gbnf(qwen3, 'root ::= "yes" | "no"'),
        lambda: gm.CompiledConstraint.json_object(qwen3, any_value=True),
    ):
        a = make()
        b = pickle.loads(pickle.dumps(a))
        ma, mb = gm.Matcher(a), gm.Matcher(b)
        bma, bmb = (gm.allocate_token_bitmask(1, qwen3.vocab_size) for _ in range(2))
        ma.fill_next_token_bitmask(bma)
        mb.fill_next_token_bitmask(bmb)
        assert b.kind == a.kind and np.array_equal(bma, bmb)


def test_gbnf_position_options_keep_masks_and_pickle(qwen3):
    # Position masks off, no warm-up, and all positions warmed when compiled: the same masks
    # as the default at every step of a nested JSON document, and the options survive
    # pickling.
    grammar = (REPO / "grammars" / "json.gbnf").read_text()
    doc = '{"a": [1, {"b": "x"}], "c": {"d": [true, null]}}'
    made = [
        gm.CompiledConstraint.gbnf(qwen3, grammar),
        gm.CompiledConstraint.gbnf(qwen3, grammar, position_masks=0, warm_positions=0),
        gm.CompiledConstraint.gbnf(qwen3, grammar, warm_positions=10_000, warm_ms=10_000),
    ]
    made.append(pickle.loads(pickle.dumps(made[2])))
    assert made[2].__reduce__()[1][3] == {"warm_positions": 10_000, "warm_ms": 10_000}
    matchers = [gm.Matcher(c) for c in made]
    for t in qwen3.encode(doc):
        masks = []
        for m in matchers:
            bm = gm.allocate_token_bitmask(1, qwen3.vocab_size)
            m.fill_next_token_bitmask(bm)
            masks.append(bm)
        for bm in masks[1:]:
            assert np.array_equal(masks[0], bm)
        for m in matchers:
            assert m.accept_token(t)
    assert all(m.is_accepting() for m in matchers)


def test_accept_string_refusal_past_the_history_restores_the_state(qwen3):
    m = gm.Matcher(gm.CompiledConstraint.json_object(qwen3, rollback_history=2))
    assert m.accept_string('{"key": [1, 2, ')
    before = m.accepted_tokens
    bm0 = gm.allocate_token_bitmask(1, qwen3.vocab_size)
    m.fill_next_token_bitmask(bm0)
    assert not m.accept_string('3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "x": ')
    bm1 = gm.allocate_token_bitmask(1, qwen3.vocab_size)
    m.fill_next_token_bitmask(bm1)
    assert m.accepted_tokens == before and np.array_equal(bm0, bm1)
    assert m.find_jump_forward_string() == ""
    m.reset()
    assert m.accepted_tokens == [] and not m.is_terminated()


def test_file_recipes_pickle_to_the_same_vocabulary():
    from conftest import tokenizer_path

    path = tokenizer_path("llama3")
    v = gm.Vocabulary.from_tokenizer_json(path, vocab_size=128_320, eos_token_ids=[128_001])
    v2 = pickle.loads(pickle.dumps(v))
    assert (v2.vocab_size, v2.n_tokens, v2.eos_token_ids) == (v.vocab_size, v.n_tokens, v.eos_token_ids)
    assert all(v2.token_bytes(t) == v.token_bytes(t) for t in range(0, v.n_tokens, 997))
    assert pickle.loads(pickle.dumps(v)) is v2, "cached per recipe"


def test_vocabulary_cache_reads_back_the_same_vocabulary_and_pickles(tmp_path):
    cache = tmp_path / "cache"
    first = gm.Vocabulary.embedded(cache=cache)
    assert first.cache_outcome == "stored" and len(list(cache.iterdir())) == 1
    hit = gm.Vocabulary.embedded(cache=str(cache))
    assert hit.cache_outcome == "hit"
    plain = gm.Vocabulary.embedded()
    assert plain.cache_outcome is None, "no cache unless asked"
    assert (hit.vocab_size, hit.n_tokens, hit.eos_token_ids) == (
        plain.vocab_size,
        plain.n_tokens,
        plain.eos_token_ids,
    )
    assert all(hit.token_bytes(t) == plain.token_bytes(t) for t in range(0, plain.n_tokens, 101))
    assert hit.encode("{\"a\": [1, 2]} 東京") == plain.encode("{\"a\": [1, 2]} 東京")
    # Masks over the cached vocabulary equal masks over the built one.
    doc = '{"name": "Ada", "n": [1, -2.5]}'
    bitmasks = []
    for v in (hit, plain):
        m = gm.Matcher(gm.CompiledConstraint.json_object(v))
        rows = []
        for t in plain.encode(doc):
            bm = gm.allocate_token_bitmask(1, v.vocab_size)
            m.fill_next_token_bitmask(bm)
            rows.append(bm.copy())
            assert m.accept_token(t)
        bitmasks.append(np.concatenate(rows))
    assert np.array_equal(*bitmasks)
    # The recipe keeps the cache: unpickled in a fresh process it would read the same file.
    again = pickle.loads(pickle.dumps(hit))
    assert again.cache_outcome == "hit"
    with pytest.raises(TypeError):
        gm.Vocabulary.embedded(cache=3.5)


def test_plain_integers_option_decides_and_pickles(qwen3):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 2000}}}
    plain = gm.CompiledConstraint.json_schema(qwen3, schema, plain_integers=True)
    every = gm.CompiledConstraint.json_schema(qwen3, schema)
    for c, spelled in ((plain, False), (every, True), (pickle.loads(pickle.dumps(plain)), False)):
        assert gm.Matcher(c).accept_string('{"n": 12}')
        assert gm.Matcher(c).accept_string('{"n": 1.0}') is spelled
        assert gm.Matcher(c).accept_string('{"n": 1e3}') is spelled


def test_literal_keys_option_decides_and_pickles(qwen3):
    schema = {"type": "object", "properties": {"color": {"type": "string"}}}
    closed = dict(schema, additionalProperties=False)
    literal = gm.CompiledConstraint.json_schema(qwen3, closed, literal_keys=True)
    for c, escaped in (
        (literal, False),
        (pickle.loads(pickle.dumps(literal)), False),
        (gm.CompiledConstraint.json_schema(qwen3, closed), True),
        (gm.CompiledConstraint.json_schema(qwen3, schema, literal_keys=True), True),
    ):
        assert gm.Matcher(c).accept_string('{"color": "x"}')
        assert gm.Matcher(c).accept_string('{"colo\\u0072": "x"}') is escaped


def test_literal_values_option_decides_and_pickles(qwen3):
    schema = {"enum": ["purple", "red"]}
    literal = gm.CompiledConstraint.json_schema(qwen3, schema, literal_values=True)
    for c, escaped in (
        (literal, False),
        (pickle.loads(pickle.dumps(literal)), False),
        (gm.CompiledConstraint.json_schema(qwen3, schema), True),
        (gm.CompiledConstraint.json_schema(qwen3, {"type": "string"}, literal_values=True), True),
    ):
        assert gm.Matcher(c).accept_string('"purple"')
        assert gm.Matcher(c).accept_string('"p\\u0075rple"') is escaped
