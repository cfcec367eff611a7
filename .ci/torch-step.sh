#!/usr/bin/env bash
# The torch step of .ci/run (issue 18): the tests that need torch — the transformers processor
# inside a real `model.generate` (SmolLM2-135M-Instruct from ../shared/models, greedy and
# sampled, tests/test_transformers_model.py), `apply_token_bitmask_inplace` on CPU tensors
# (tests/test_torch.py) and the transformers processor of tests/test_contrib.py — in a venv of
# their own (target/torchvenv), so the main Python step stays small.
#
# torch comes from PyPI, where the Linux build is the CUDA one: it does not import without its
# nvidia-* wheels (`libcublasLt.so.* not found`), so they are installed too (~5.7 GB on disk,
# about a minute here) although CI has no GPU; the CUDA cases print why they are skipped.
# transformers also needs `gguf` (its GGUF reader) and `accelerate` to load the model file.
# Where PyPI cannot deliver them the step says so and stops without failing CI: the same tests
# then skip with their printed reasons in the main Python step.
#
# usage: .ci/torch-step.sh   (from anywhere; runs in the repository root, after python-step)
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
venv=target/torchvenv
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  "maturin>=1.5,<2" pytest numpy jsonschema tokenizers torch transformers gguf accelerate; then
  echo "SKIP torch step: torch, transformers, gguf or accelerate could not be installed from PyPI"
  exit 0
fi
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps ./bindings/python
"$venv/bin/python" -c 'import torch; torch.zeros(1); print("torch", torch.__version__)'
export GRAMMASK_BIN="$PWD/target/release/grammask"
set +e
"$venv/bin/python" -m pytest -q -rs -s bindings/python/tests/test_transformers_model.py \
  bindings/python/tests/test_torch.py bindings/python/tests/test_contrib.py 2>&1 \
  | grep -v -E "Converting and de-quantizing|Loading weights"
status=${PIPESTATUS[0]}
set -e
echo "torch step: pytest exit $status in $((SECONDS - start)) s"
exit "$status"
