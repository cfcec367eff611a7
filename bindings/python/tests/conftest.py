"""Shared fixtures of the Python package's tests: where the repository, the Rust CLI (the
reference masks come from `grammask walk --dump-masks`) and the workspace's `shared/` folder
(real tokenizers, the GGUF model) are, and vocabularies loaded once per session.

`shared/` is `$GRAMMASK_SHARED`, else `../shared` beside the repository (CI's layout). Tests
that need it skip with the reason printed when it is absent; the embedded Qwen3 tokenizer
covers every test without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import grammask as gm

REPO = Path(__file__).resolve().parents[3]


def shared_dir() -> Path | None:
    env = os.environ.get("GRAMMASK_SHARED")
    for candidate in ([Path(env)] if env else []) + [REPO.parent / "shared"]:
        if (candidate / "tokenizers").is_dir():
            return candidate
    return None


def tokenizer_path(name: str) -> Path | None:
    """`shared/tokenizers/NAME.json`, or None for `"qwen3-embedded"` (the CLI's default)."""
    if name == "qwen3-embedded":
        return None
    s = shared_dir()
    if s is None or not (s / "tokenizers" / f"{name}.json").is_file():
        pytest.skip(f"{name}: shared/tokenizers not found (set GRAMMASK_SHARED)")
    return s / "tokenizers" / f"{name}.json"


@lru_cache(maxsize=None)
def vocabulary(name: str) -> gm.Vocabulary:
    path = tokenizer_path(name)
    return gm.Vocabulary.embedded() if path is None else gm.Vocabulary.from_tokenizer_json(path)


def grammask_bin() -> Path:
    """The Rust CLI: `$GRAMMASK_BIN`, else `target/release/grammask`, built when missing."""
    env = os.environ.get("GRAMMASK_BIN")
    if env:
        return Path(env)
    exe = REPO / "target" / "release" / "grammask"
    if not exe.is_file():
        subprocess.run(
            ["cargo", "build", "--release", "--bin", "grammask"], cwd=REPO, check=True
        )
    return exe


def rust_walk(tokenizer: str, constraint_args: list[str], document: str):
    """Walk `document` with the Rust CLI; returns (token ids, masks as uint32 [steps, words],
    the CLI's JSON report)."""
    with tempfile.TemporaryDirectory() as d:
        doc = Path(d) / "doc.txt"
        doc.write_text(document)
        dump = Path(d) / "masks.bin"
        cmd = [str(grammask_bin()), "walk", *constraint_args, "--input", str(doc)]
        cmd += ["--format", "json", "--dump-masks", str(dump)]
        path = tokenizer_path(tokenizer)
        if path is not None:
            cmd += ["--tokenizer", str(path)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        report = json.loads(out)
        words = (report["n_vocab"] + 31) // 32
        masks = np.fromfile(dump, dtype="<u4").reshape(-1, words)
    return report["tokens"], masks, report


@pytest.fixture(scope="session")
def qwen3() -> gm.Vocabulary:
    return vocabulary("qwen3-embedded")
