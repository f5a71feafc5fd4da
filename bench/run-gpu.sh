#!/usr/bin/env bash
# Prepares and prints the GPU benchmark of the CUDA encoder (issue 11, item 1). Run here:
#   bash bench/run-gpu.sh
# It builds target-cuda/release/sdr (scripts/build-sdr.sh --cuda; no GPU needed) and copies
# all-mpnet-base-v2's config and tokenizer files (not its weights) into bench/gpu-model-files.
# Then, on a machine with a CUDA 13 GPU driver and PyTorch + sentence-transformers (.venv-bench from
# `SDR_TORCH_INDEX=pypi SDR_SKIP_WHEEL=1 bash scripts/setup-bench.sh`: PyPI's torch, the CUDA build), from the
# repository root (with bench/gpu-model-files and target-cuda/sdr-stripped.gz copied there,
# unpacked by `gunzip -k target-cuda/sdr-stripped.gz && mkdir -p target-cuda/release &&
# mv target-cuda/sdr-stripped target-cuda/release/sdr`):
#   export LD_LIBRARY_PATH=$(bash scripts/cuda-libs.sh)
#   .venv-bench/bin/python bench/embed_gpu.py --sdr target-cuda/release/sdr --random-model   # or --model DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-sdr.sh --cuda -q
MODEL=${SDR_MODEL:-${SDR_HOME:-$HOME/.cache/sdr}/models/all-mpnet-base-v2}
mkdir -p bench/gpu-model-files/1_Pooling
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt \
  sentence_bert_config.json modules.json config_sentence_transformers.json 1_Pooling/config.json; do
  cp "$MODEL/$f" "bench/gpu-model-files/$f"
done
# A stripped, compressed copy travels more easily (about 69 MB stripped).
strip -o target-cuda/sdr-stripped target-cuda/release/sdr
gzip -9 -c target-cuda/sdr-stripped > target-cuda/sdr-stripped.gz
ls -la target-cuda/release/sdr target-cuda/sdr-stripped target-cuda/sdr-stripped.gz bench/gpu-model-files
echo "next, on the GPU machine: export LD_LIBRARY_PATH=\$(bash scripts/cuda-libs.sh) &&" \
  ".venv-bench/bin/python bench/embed_gpu.py --sdr target-cuda/release/sdr --random-model"
