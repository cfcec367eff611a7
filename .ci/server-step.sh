#!/usr/bin/env bash
# The server's step of .ci/run (issue 16): builds `grammask` with the `server` feature (release,
# once; the binary is copied to target/server/ so later default-feature builds cannot replace
# it), makes a venv (target/servervenv, kept between runs) with the official `openai` client,
# `jsonschema`, pytest, and the client libraries test_clients.py drives (`instructor`,
# `langchain-openai`, `pydantic`) from PyPI, and runs tests/server/ (test_server.py and
# test_clients.py) against the real SmolLM2 model ($GRAMMASK_MODEL, set by .ci/run). Small
# max_tokens keep it within a few minutes on 2 cores. The pins are loose (a major version each):
# pip does nothing once the venv has them.
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
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  "openai>=2.45,<4" "instructor>=1.17,<2" "langchain-openai>=1.8,<2" "pydantic>=2.11,<3" \
  "jsonschema>=4.23,<5" "pytest>=8,<10"
export GRAMMASK_BIN="$PWD/target/server/grammask"
: "${GRAMMASK_MODEL:?GRAMMASK_MODEL must name the model file (.ci/run sets it)}"
"$venv/bin/python" -m pytest -q -rs tests/server
echo "server step: passed in $((SECONDS - start)) s"
