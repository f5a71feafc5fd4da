#!/usr/bin/env bash
# The Findings -> Impression study (docs/results/grpo-impression.md): SFT, then GRPO with
# three rewards on the Impression (the cosine cost; the cosine cost plus the report-level
# CheXpert-14 F1 term; the clinical cost of SPEC §10), same seed, prompts and steps, then
# evaluation on held-out test studies. Every stage resumes from its last checkpoint, so the
# script can be stopped and started again. Needs `bash recipes/setup.sh` first (or
# SDR_TRAIN_PY pointing at a Python with TRL, transformers, torch and the sdr wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${SDR_TRAIN_PY:-.venv-train/bin/python}
OUT=recipes/out
STEPS=${GRPO_STEPS:-50}
STUDIES=${STUDIES:-200}
mkdir -p "$OUT"

if [ ! -f "$OUT/f2i-sft/final/config.json" ]; then
  echo "== SFT (Findings -> Impression)"
  "$PY" recipes/sft.py --task impression --samples 800 --epochs 1 --batch-size 8 --grad-accum 2 \
    --max-length 256 --save-steps 10 --no-bf16 2>&1 | tee -a "$OUT/f2i-sft.log"
fi

# The three runs at once, one torch thread each (2-core CPU).
pids=()
for r in cos cos-f1 clin; do
  if [ -f "$OUT/f2i-grpo-$r/final/config.json" ]; then continue; fi
  echo "== GRPO $r ($STEPS steps)"
  SDR_TORCH_THREADS=1 "$PY" recipes/grpo.py --task impression --reward "$r" --steps "$STEPS" \
    --generations 4 --prompts-per-step 2 --max-completion-length 64 >> "$OUT/f2i-grpo-$r.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

echo "== evaluation ($STUDIES test studies)"
"$PY" recipes/evaluate_impression.py --studies "$STUDIES" \
  --policy "SFT=$OUT/f2i-sft/final" \
  --policy "GRPO(cosine)=$OUT/f2i-grpo-cos/final" \
  --policy "GRPO(cosine + F1 term)=$OUT/f2i-grpo-cos-f1/final" \
  --policy "GRPO(clinical cost)=$OUT/f2i-grpo-clin/final" \
  --logs "cosine=$OUT/f2i-grpo-cos/log_history.jsonl" \
  --logs "cosine + F1 term=$OUT/f2i-grpo-cos-f1/log_history.jsonl" \
  --logs "clinical cost=$OUT/f2i-grpo-clin/log_history.jsonl"
