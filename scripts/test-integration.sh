#!/usr/bin/env bash
# The integration tier: installs llama-cpp-python's OpenAI-compatible server
# and the SmolLM2-135M-Instruct GGUF (scripts/install-llama-server.sh), then
# runs the ignored tests, which start that server on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=$(bash scripts/install-llama-server.sh | tail -n 1)
[[ "$VENV" = /* ]] || VENV=$PWD/$VENV
export SDR_LLAMA_PYTHON=${SDR_LLAMA_PYTHON:-$VENV/bin/python}
export SDR_SMOLLM2_GGUF=${SDR_SMOLLM2_GGUF:-$(bash scripts/fetch-smollm2.sh)}

cargo test --release -p sdr-gen -- --ignored --nocapture
