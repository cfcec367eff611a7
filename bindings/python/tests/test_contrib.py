"""The framework adapters: the mlx-lm processor on real `mlx` arrays (driven the way mlx-lm's
`generate_step` calls it: all tokens so far, the last position's logits `[1, vocab]`), the
transformers processor where torch is importable, and the vLLM-style backend's method set."""

from __future__ import annotations

import json

import numpy as np
import pytest

import grammask as gm
from grammask.contrib.vllm import GrammaskBackend, GrammaskGrammar, StructuredOutputOptions

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 0}, "ok": {"type": "boolean"}},
    "required": ["id", "ok"],
    "additionalProperties": False,
}


def decode(vocab: gm.Vocabulary, tokens: list[int]) -> str:
    return b"".join(vocab.token_bytes(t) for t in tokens).decode()


def test_mlx_lm_processor_on_mlx_arrays(qwen3):
    mx = pytest.importorskip("mlx.core", reason="mlx not installed (pip install mlx-cpu)")
    import jsonschema

    from grammask.contrib.mlx_lm import logits_processor

    compiled = gm.CompiledConstraint.json_schema(qwen3, SCHEMA)
    process = logits_processor(compiled)
    tokens = mx.array(qwen3.encode("Answer in JSON:"))
    prompt_len = tokens.shape[0]
    key = mx.random.key(7)
    eos = set(qwen3.eos_token_ids)
    for _ in range(80):
        key, sub = mx.random.split(key)
        logits = mx.random.normal((1, qwen3.vocab_size), key=sub)
        out = process(tokens, logits)
        assert isinstance(out, mx.array) and out.shape == logits.shape
        token = int(mx.argmax(out, axis=-1).item())
        assert np.isfinite(np.array(out[0, token]))
        tokens = mx.concatenate([tokens, mx.array([token])])
        if token in eos:
            break
    generated = tokens.tolist()[prompt_len:]
    assert generated[-1] in eos, "the constraint brings the document to an end"
    doc = json.loads(decode(qwen3, generated[:-1]))
    jsonschema.validate(doc, SCHEMA)
    # The processor sees the EOS on its next call, and then leaves the logits alone.
    assert not process.matcher.is_terminated()
    logits = mx.zeros((1, qwen3.vocab_size))
    assert mx.array_equal(process(mx.concatenate([tokens, mx.array([0])]), logits), logits)
    assert process.matcher.is_terminated()


def test_transformers_processor_with_torch(qwen3):
    try:
        import torch
    except ImportError:
        print("SKIP reason: torch is not importable (the PyPI build is the multi-GB CUDA one)")
        pytest.skip("torch is not importable: the transformers processor is not exercised")
    from grammask.contrib.transformers import LogitsProcessor

    compiled = gm.CompiledConstraint.regex(qwen3, "(yes|no)")
    proc = LogitsProcessor(compiled)
    ids = torch.tensor([qwen3.encode("Q?"), qwen3.encode("R?")])
    g = torch.Generator().manual_seed(0)
    for _ in range(6):
        scores = torch.randn(2, qwen3.vocab_size, generator=g)
        scores = proc(ids, scores)
        nxt = scores.argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        if all(m.is_terminated() or int(n) in qwen3.eos_token_ids for m, n in zip(proc.matchers, nxt)):
            break
    for row in ids[:, 2:].tolist():
        # A row that has finished is left unmasked (transformers pads it): read up to its EOS.
        end = next((i for i, t in enumerate(row) if t in qwen3.eos_token_ids), len(row))
        assert decode(qwen3, row[:end]) in ("yes", "no")


def test_vllm_backend_method_set(qwen3):
    backend = GrammaskBackend(None, qwen3, qwen3.vocab_size)
    grammar = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(SCHEMA))
    bitmask = backend.allocate_token_bitmask(4)
    assert tuple(bitmask.shape) == (4, (qwen3.vocab_size + 31) // 32)
    doc = qwen3.encode('{"id": 7, "ok": true}')
    eos = qwen3.eos_token_ids[0]
    assert grammar.validate_tokens(doc[:-1] + [eos]) == doc[:-1], "EOS before the `}`"
    assert grammar.num_processed_tokens == 0, "validate does not advance"
    assert grammar.accept_tokens("req-1", doc[:3])
    grammar.rollback(1)
    assert grammar.num_processed_tokens == 2
    assert grammar.accept_tokens("req-1", doc[2:])
    grammar.fill_bitmask(bitmask, 2)
    row = np.asarray(bitmask[2]).view(np.uint32)
    assert (row[eos // 32] >> (eos % 32)) & 1 and int(row.astype(bool).sum()) >= 1
    assert grammar.find_jump_string() is None
    assert grammar.accept_tokens("req-1", [eos]) and grammar.is_terminated()
    assert not grammar.accept_tokens("req-1", doc[:1]), "nothing after EOS"
    grammar.reset()
    assert not grammar.is_terminated() and grammar.num_processed_tokens == 0
    assert grammar.accept_tokens("req-1", qwen3.encode("{")) and not grammar.accept_tokens("r", qwen3.encode("]"))

    choice = backend.compile_grammar(StructuredOutputOptions.CHOICE, json.dumps(["a.b", "c+"]))
    assert choice.accept_tokens("r", qwen3.encode("c+")) and choice.matcher.is_accepting()
    assert not backend.compile_grammar(StructuredOutputOptions.CHOICE, '["a.b"]').accept_tokens("r", qwen3.encode("axb"))
    # Jump-forward strings come from the engines that compute forced bytes (JSON Schema).
    compact = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
               "additionalProperties": False}
    forced = GrammaskGrammar(gm.Matcher(gm.CompiledConstraint.json_schema(qwen3, compact, whitespace="compact")))
    assert forced.find_jump_string() == '{"id":'
    for kind, spec in [(StructuredOutputOptions.JSON_OBJECT, ""), (StructuredOutputOptions.GRAMMAR, 'root ::= "x"')]:
        assert not backend.compile_grammar(kind, spec).is_terminated()
    with pytest.raises(gm.CompileError):
        backend.compile_grammar(StructuredOutputOptions.REGEX, "(")
    # XGrammar's later format objects are not read; vLLM's `structures` form is (below).
    with pytest.raises(NotImplementedError):
        backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG, '{"type": "structural_tag", "format": {}}')
    grammars = [backend.compile_grammar(StructuredOutputOptions.JSON_OBJECT, "") for _ in range(4)]
    backend.fill_bitmasks(grammars, bitmask, 2)
    assert len({np.asarray(bitmask[i]).tobytes() for i in range(4)}) == 1
    with pytest.raises(gm.VocabularyMismatchError):
        GrammaskBackend(None, qwen3, qwen3.vocab_size + 64)
    backend.destroy()


def test_vllm_backend_structural_tag(qwen3):
    """The spec vLLM v0.10.1.1 passes its XGrammar backend for tool calls: a call inside free
    text is accepted exactly when its body validates (judged by `jsonschema`), then free text."""
    import jsonschema

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    spec = json.dumps({"structures": [{"begin": "<tool=weather>", "schema": schema, "end": "</tool>"}],
                       "triggers": ["<tool="]})
    backend = GrammaskBackend(None, qwen3, qwen3.vocab_size)
    for body in [{"city": "Oslo"}, {"city": 3}, {"town": "Oslo"}, {"city": "Oslo", "x": 1}]:
        grammar = backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG, spec)
        text = f"Checking. <tool=weather>{json.dumps(body)}</tool> Done."
        valid = jsonschema.Draft202012Validator(schema).is_valid(body)
        ok = all(grammar.accept_tokens("r", [t]) for t in qwen3.encode(text))
        assert ok == valid, body
        if valid:
            assert grammar.matcher.is_accepting()
    grammar = backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG, spec)
    assert grammar.accept_tokens("r", qwen3.encode('<tool=weather>{"city": "Oslo"'))
    assert not grammar.matcher.is_accepting(), "an open call cannot end the output"
    with pytest.raises(gm.CompileError):
        backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG,
                                json.dumps({"structures": [{"begin": "<x>", "schema": {"type": 5}, "end": "</x>"}],
                                            "triggers": ["<x"]}))
    with pytest.raises(ValueError):
        backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG, json.dumps({"structures": []}))


def test_hf_tokenizer_loader_reads_a_tokenizers_object(qwen3, tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    from conftest import shared_dir

    s = shared_dir()
    if s is None:
        pytest.skip("shared/tokenizers not found (set GRAMMASK_SHARED)")
    tok = tokenizers.Tokenizer.from_file(str(s / "tokenizers" / "llama3.json"))
    config = (s / "tokenizers" / "llama3.config.json").read_text()
    a = gm.Vocabulary.from_hf_tokenizer(tok, config=config, vocab_size=128_320)
    b = gm.Vocabulary.from_tokenizer_json(s / "tokenizers" / "llama3.json", vocab_size=128_320)
    assert a.vocab_size == b.vocab_size == 128_320 and a.eos_token_ids == b.eos_token_ids
    assert a.token_bytes(9906) == b.token_bytes(9906)
    import pickle

    c = pickle.loads(pickle.dumps(gm.CompiledConstraint.regex(a, "[0-9]+")))
    assert c.vocab.vocab_size == 128_320


def test_gguf_vocabulary(qwen3):
    from conftest import shared_dir

    s = shared_dir()
    model = s / "models" / "smollm2-135m-instruct-q4_1.gguf" if s else None
    if model is None or not model.is_file():
        pytest.skip("shared/models/smollm2-135m-instruct-q4_1.gguf not found")
    v = gm.Vocabulary.from_gguf(model, vocab_size=49_216)
    assert v.n_tokens == 49_152 and v.vocab_size == 49_216
    m = gm.Matcher(gm.CompiledConstraint.json_object(v))
    bm = gm.allocate_token_bitmask(1, v.vocab_size)
    m.fill_next_token_bitmask(bm)
    assert m.accept_string('{"a": 1}') and m.is_accepting()


def test_generation_profile_is_the_serving_default(qwen3):
    """The serving paths compile under the generation profile: an object that says nothing of
    undeclared keys takes only its own, numbers are plain decimals; `profile="exact"` (the
    low-level default) keeps the schema's whole language."""
    open_schema = {"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1}}}

    def walks(compiled: gm.CompiledConstraint, text: str) -> bool:
        m = gm.Matcher(compiled)
        return all(m.accept_token(t) for t in qwen3.encode(text)) and m.is_accepting()

    exact = gm.CompiledConstraint.json_schema(qwen3, open_schema)
    gen = gm.CompiledConstraint.json_schema(qwen3, open_schema, profile="generation")
    assert walks(exact, '{"p": 0.5, "extra": 1}') and walks(exact, '{"p": 5e-1}')
    assert walks(gen, '{"p":0.5}') and walks(gen, '{\n  "p": 0.5\n}')
    assert not walks(gen, '{"p":      0.5}'), "whitespace in runs of at most 4"
    assert not walks(gen, '{"p":0.5,"extra":1}'), "closed where the schema says nothing"
    assert not walks(gen, '{"p":5e-1}'), "plain decimals only"
    opened = gm.CompiledConstraint.json_schema(qwen3, open_schema, profile="generation", closed_objects=False)
    assert walks(opened, '{"p":0.5,"extra":1}')
    compact = gm.CompiledConstraint.json_schema(qwen3, open_schema, profile="generation", whitespace="compact")
    assert not walks(compact, '{"p": 0.5}'), "the whitespace arguments override the profile's"
    with pytest.raises(ValueError, match="profile"):
        gm.CompiledConstraint.json_schema(qwen3, open_schema, profile="loose")

    backend = GrammaskBackend(None, qwen3, qwen3.vocab_size)
    grammar = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(open_schema))
    assert not grammar.accept_tokens("r", qwen3.encode('{"p":0.5,"extra"'))
    from grammask.contrib.transformers import LogitsProcessor

    proc = LogitsProcessor.from_json_schema(qwen3, open_schema)
    assert proc is not None
