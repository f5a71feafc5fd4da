#!/usr/bin/env bash
# The CUDA code compiles, with no GPU: installs the toolkit from PyPI (scripts/install-cuda.sh)
# and runs `cargo check` and clippy on what the `cuda` feature switches on (sdr-embed's CUDA
# arm, the `sdr` binary of `scripts/build-sdr.sh --cuda`, the Python package's `cuda`
# feature). Part of the integration tier (scripts/test-integration.sh), since the toolkit is
# a large download and candle's kernels take minutes to compile; CI's `scripts/test.sh`
# builds without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-cuda.sh
export CUDA_ROOT="$PWD/.cuda" PATH="$PWD/.cuda/bin:$PATH"
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDARC_CUDA_VERSION=13040
TARGET=${CARGO_TARGET_DIR:-target-cuda}
cargo clippy --release -q -p sdr-embed -p sdr-cli --features sdr-cli/cuda --target-dir "$TARGET" \
  -- -D warnings
cargo check --release -q -p sdr-python --features sdr-python/cuda --target-dir "$TARGET"
echo "check-cuda: sdr-embed, sdr and the Python package compile with --features cuda"
