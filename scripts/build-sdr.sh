#!/usr/bin/env bash
# Release build of the `sdr` CLI as every script of the project uses it: linked against
# Intel MKL (from PyPI, scripts/install-mkl.sh) for the encoder's f32 GEMMs and the bf16
# path that `--precision bf16` picks on CPUs with AMX. If MKL cannot be installed
# (no network to PyPI, another architecture) the plain candle build is made instead and
# everything still works, a little slower. Extra arguments go to cargo.
#
# --cuda builds the GPU binary instead, target-cuda/release/sdr (`--device cuda`): candle's
# CUDA back-end, with the toolkit from PyPI (scripts/install-cuda.sh, no GPU needed to build).
# CUDA_COMPUTE_CAP (default 90, H100) picks the kernels' architecture. It runs where a CUDA 13
# driver and CUDA 13's libcublas/libcurand/libnvrtc/libcudart are found (scripts/cuda-libs.sh).
#
# Usage: bash scripts/build-sdr.sh [--cuda] [-q] [cargo args...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == --cuda ]]; then
  shift
  bash scripts/install-cuda.sh
  export CUDA_ROOT="$PWD/.cuda" PATH="$PWD/.cuda/bin:$PATH"
  export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDARC_CUDA_VERSION=13040
  exec cargo build --release -p sdr-cli --bin sdr --features sdr-cli/cuda \
    --target-dir "${CARGO_TARGET_DIR:-target-cuda}" "$@"
fi
if [[ "$(uname -m)" == x86_64 && "${SDR_NO_MKL:-0}" != 1 ]] && bash scripts/install-mkl.sh; then
  cargo build --release -p sdr-cli --bin sdr --features sdr-cli/mkl "$@"
else
  echo "build-sdr: building without MKL (plain candle GEMMs)" >&2
  cargo build --release -p sdr-cli --bin sdr "$@"
fi
