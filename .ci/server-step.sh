#!/usr/bin/env bash
# The server's step of .ci/run (issue 16): builds `grammask` with the `server` feature (release,
# once; the binary is copied to target/server/ so later default-feature builds cannot replace
# it), makes a venv (target/servervenv) with the official `openai` client, `jsonschema` and
# pytest from PyPI, and runs tests/server/test_server.py against the real SmolLM2 model
# ($GRAMMASK_MODEL, set by .ci/run). Small max_tokens keep it within a few minutes on 2 cores.
#
# usage: .ci/server-step.sh   (from anywhere; runs in the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
echo "-- cargo clippy --features server (lib, bin, tests)"
cargo clippy --all-targets --features server -- -D warnings
echo "-- cargo test --features server --lib server (request parsing, errors, cache)"
cargo test --release --features server --lib server::
cargo build --release --features server --bin grammask
mkdir -p target/server
cp target/release/grammask target/server/grammask
venv=target/servervenv
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check openai jsonschema pytest
export GRAMMASK_BIN="$PWD/target/server/grammask"
: "${GRAMMASK_MODEL:?GRAMMASK_MODEL must name the model file (.ci/run sets it)}"
"$venv/bin/python" -m pytest -q -rs tests/server
echo "server step: passed in $((SECONDS - start)) s"
