#!/usr/bin/env bash
# The Python package's step of .ci/run (issue 18): builds bindings/python into a venv the step
# creates (target/pyvenv) and runs its pytest suite, which compares the package's masks with
# the Rust CLI's (`target/release/grammask walk --dump-masks`, built by the test step before).
#
# One release build of the extension (maturin through pip, into the workspace's target/).
# PyPI must be reachable for the venv's packages: maturin, pytest, numpy, jsonschema,
# tokenizers and mlx with its CPU backend (the `mlx-cpu` wheel, so the mlx-lm processor runs on
# real MLX arrays on Linux). torch is not installed here (the PyPI build is the multi-GB CUDA
# one): the torch and transformers tests print why they are skipped in this venv and run in
# .ci/torch-step.sh's (CPU), and with CUDA where a GPU is lent (docs/python.md, the H200 runs).
#
# usage: .ci/python-step.sh   (from anywhere; runs in the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
venv=target/pyvenv
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  "maturin>=1.5,<2" pytest numpy jsonschema tokenizers "mlx[cpu]"
# --no-build-isolation: the venv's maturin builds the wheel (its backend runs `maturin` from
# PATH), into the workspace's target/, so the release build is shared with later runs.
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps ./bindings/python
export GRAMMASK_BIN="$PWD/target/release/grammask"
if [ ! -x "$GRAMMASK_BIN" ]; then
  cargo build --release --bin grammask
fi
"$venv/bin/python" -m pytest -q -rs bindings/python/tests
echo "python step: passed in $((SECONDS - start)) s"
