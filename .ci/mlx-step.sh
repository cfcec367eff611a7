#!/usr/bin/env bash
# The `mlx` feature's step of .ci/run: builds grammask::gpu against MLX and runs its tests, so the
# GPU sampling path stays compiled and tested on every CI run (issue 8).
#
# On Linux the stock mlx-sys cannot build here (it downloads MLX and links macOS frameworks), so
# this uses the workspace kit ../shared/mlx-linux/setup.sh, which links the prebuilt CPU build of
# MLX from the `mlx-cpu` wheel; the tests then run on MLX's CPU device. A clone without ../shared
# skips the step with a message. See docs/gpu.md.
#
# usage: .ci/mlx-step.sh   (from anywhere; runs in the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

kit=../shared/mlx-linux/setup.sh
if [ "$(uname -s)" = Darwin ]; then
  echo "mlx step: macOS, testing the stock mlx-rs on the Metal GPU"
  cargo test --release --features mlx-metal --test it gpu_mlx::
  exit 0
fi
if [ ! -f "$kit" ]; then
  echo "mlx step: SKIPPED — $kit not found (it lives in the grammask workspace, not in the repo)."
  echo "  The mlx feature is not built or tested by this run. To test it: on macOS,"
  echo "  'cargo test --features mlx-metal --test it gpu_mlx::'; on Linux, see docs/gpu.md."
  exit 0
fi

# The kit's `patch.crates-io` rewrites the mlx-sys entry of Cargo.lock; put it back afterwards so
# the step leaves the working tree as it found it.
lock_backup=$(mktemp)
cp Cargo.lock "$lock_backup"
trap 'cp "$lock_backup" Cargo.lock; rm -f "$lock_backup"' EXIT

start=$SECONDS
# The kit writes a probe crate into its folder: outside the repository, since the root
# Cargo.toml is a workspace that would claim any crate below it.
kit_dir="${XDG_CACHE_HOME:-$HOME/.cache}/grammask/mlx-linux"
eval "$("$kit" "$kit_dir")"
# shellcheck disable=SC2086 # MLX_CARGO_FLAGS is a quoted --config argument meant for eval.
eval cargo test --release --features mlx $MLX_CARGO_FLAGS --test it gpu_mlx::
# shellcheck disable=SC2086
eval cargo test --release --features mlx $MLX_CARGO_FLAGS --doc gpu::
echo "mlx step: passed in $((SECONDS - start)) s"
