#!/usr/bin/env bash
# Release build of the `sdr` CLI as every script of the project uses it: linked against
# Intel MKL (from PyPI, scripts/install-mkl.sh) for the encoder's f32 GEMMs and the bf16
# path that `--precision bf16` picks on CPUs with AMX. If MKL cannot be installed
# (no network to PyPI, another architecture) the plain candle build is made instead and
# everything still works, a little slower. Extra arguments go to cargo.
#
# Usage: bash scripts/build-sdr.sh [-q] [cargo args...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "$(uname -m)" == x86_64 && "${SDR_NO_MKL:-0}" != 1 ]] && bash scripts/install-mkl.sh; then
  cargo build --release -p sdr-cli --bin sdr --features sdr-cli/mkl "$@"
else
  echo "build-sdr: building without MKL (plain candle GEMMs)" >&2
  cargo build --release -p sdr-cli --bin sdr "$@"
fi
