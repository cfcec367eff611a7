"""The transformers processor inside a real `model.generate(...)`: SmolLM2-135M-Instruct (the
GGUF file in `shared/models/`, loaded by transformers through its `gguf` reader), greedy and
sampled, a batch of two prompts with left padding, on the CPU and on a CUDA device when there is
one. Every generated document must end within the token budget, parse and validate against its
schema with `jsonschema`.

Needs torch, transformers, `gguf` and `accelerate` besides the model file; CI has none of the
first two (torch's PyPI build is the multi-GB CUDA one), so there the test says why it is
skipped. It runs where they are installed (docs/python.md)."""

from __future__ import annotations

import json
import re

import pytest

import grammask as gm

MODEL = "smollm2-135m-instruct-q4_1.gguf"

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "color": {"enum": ["red", "green", "yellow", "orange", "purple"]},
        "weight_grams": {"type": "integer", "minimum": 1, "maximum": 2000},
    },
    "required": ["name", "color", "weight_grams"],
    "additionalProperties": False,
}


def requirements():
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"SKIP reason: {e.name} is not importable")
        pytest.skip(f"{e.name} is not importable: no real transformers model is run")
    pytest.importorskip("gguf", reason="the gguf package (transformers' GGUF reader) is missing")
    # transformers refuses to load a GGUF file without accelerate (a ValueError at load time,
    # which would read as a failure of this test rather than a missing package).
    pytest.importorskip("accelerate", reason="accelerate is missing (transformers needs it for GGUF)")
    from conftest import shared_dir

    s = shared_dir()
    path = s / "models" / MODEL if s else None
    if path is None or not path.is_file():
        print(f"SKIP reason: shared/models/{MODEL} not found")
        pytest.skip(f"shared/models/{MODEL} not found (set GRAMMASK_SHARED)")
    return torch, transformers, path


@pytest.fixture(scope="module")
def loaded():
    torch, transformers, path = requirements()
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    model.eval()
    return torch, transformers, path, tok, model


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("sample", [False, True])
def test_generate_with_a_real_model_gives_valid_documents(loaded, device, sample):
    import jsonschema

    from grammask.contrib.transformers import LogitsProcessor

    torch, transformers, path, tok, model = loaded
    if device == "cuda" and not torch.cuda.is_available():
        print("SKIP reason: torch sees no CUDA device")
        pytest.skip("no CUDA device")
    model = model.to(device)
    vocab = gm.Vocabulary.from_gguf(path, vocab_size=model.config.vocab_size)
    eos = vocab.eos_token_ids  # the GGUF's own; generation stops on them
    # Plain integers, as XGrammar and llguidance generate them: with every spelling allowed
    # the greedy run of this model wrote `"weight_grams": 1.111000…` until the token budget
    # ran out (zeros are live while an exponent could make the value an integer again).
    # Declared names as written, too (`literal_keys`): masked away from `colour`, the greedy
    # run escaped its way into `"colo\u0072"` (exact: that is `color`). And enum members as
    # written (`literal_values`): on the CPU (2026-12-04) the second greedy row wrote the color
    # `"p\u0075r\u0070\u006c\u0065"` (`purple`, exact too).
    compiled = gm.CompiledConstraint.json_schema(
        vocab, SCHEMA, plain_integers=True, literal_keys=True, literal_values=True
    )
    prompts = [
        "Describe a banana as a JSON object with name, color and weight_grams.",
        "Give me one fruit you like, in JSON.",
    ]
    texts = [
        tok.apply_chat_template(
            [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
        )
        for p in prompts
    ]
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    inputs = tok(texts, return_tensors="pt", padding=True).to(device)
    proc = LogitsProcessor(compiled)
    torch.manual_seed(0)
    out = model.generate(
        **inputs,
        logits_processor=transformers.LogitsProcessorList([proc]),
        max_new_tokens=120,
        do_sample=sample,
        temperature=1.0 if sample else None,
        top_p=None,
        top_k=None,
        pad_token_id=tok.pad_token_id,
        eos_token_id=eos,
    )
    new = out[:, inputs["input_ids"].shape[1] :].tolist()
    for row in new:
        end = next((i for i, t in enumerate(row) if t in eos), None)
        assert end is not None, f"no EOS within 120 tokens: {tok.decode(row)!r}"
        text = b"".join(vocab.token_bytes(t) for t in row[:end]).decode()
        doc = json.loads(text)
        jsonschema.validate(doc, SCHEMA)
        # `literal_keys` and `literal_values`: the keys and the enum member as written.
        for key in SCHEMA["properties"]:
            assert f'"{key}"' in text, f"{key} not spelled as written: {text!r}"
        color = re.search(r'"color"\s*:\s*"([^"]*)"', text)
        assert color and color.group(1) == doc["color"], f"color escaped: {text!r}"
        print(f"{device} sample={sample}: {text}")
