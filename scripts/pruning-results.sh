#!/usr/bin/env bash
# Distance-guided pruning on IU X-ray (paper §4.2, Alg. 1; SPEC §6): random vs
# standard best-of-K vs pruning, on generated candidates.
#
#   bash scripts/pruning-results.sh                       # Gemma 3 candidates -> docs/results/pruning.md
#   CANDIDATES=smollm2 bash scripts/pruning-results.sh    # SmolLM2 candidates -> pruning-smollm2.md
#   REGENERATE=1 bash scripts/pruning-results.sh
#
# 1. candidates: data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl, made by
#      sdr generate --gguf GEMMA --limit 100 -k 8 --prompt p2 --context indication \
#        --max-tokens 160 --seed 0 --prefill Findings: --repetition-penalty 1.2
#    (Gemma 3 270M Q4_K_M from scripts/fetch-gemma3.sh, local back-end; REGENERATE=1 remakes
#    it, ~12 min on 2 cores; tools/candidate_stats.py compares its format with SmolLM2's
#    generations under the same settings and without prefill and penalty). CANDIDATES=smollm2
#    uses data/candidates/iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl (SmolLM2-135M-Instruct
#    Q4_1, scripts/fetch-smollm2.sh, 50 studies) instead and skips the stand-ins;
# 2. the train-split corpus (shared with scripts/main-job.sh);
# 3. `sdr prune --replay` under several policies and warm-ups, each with
#    standard best-of-K under the same policy alongside;
# 4. live pruning with the local back-end for one policy, checked to pick the
#    same candidates with the same token counts as the replay;
# 5. one `sdr eval --per-study` over every policy (BLEU-4, ROUGE-L, BERTScore-F1,
#    CheXpert-rule F1 by the rules and by the judge; tokens), each candidate scored once.
#    BERTScore is judged by all-MiniLM-L6-v2 (scripts/fetch-minilm.sh), not by the
#    reward's own encoder.
#
# What it commits: docs/results/pruning/<set>/ (set = gemma3, standins, smollm2) holds
# per_study.jsonl.gz (every study's values under every run, `sdr eval --per-study`,
# gzip with mtime 0), table.csv (sdr eval's full-precision table, kept to check the
# renderer against: the random row's CheXpert-rule F1, a mean over 1,000 seeded picks, is
# read from it), run.json (candidates, commands, run order, comparisons) and live.json
# (the live check). The pages' tables, intervals and prose are rendered from these
# by `python3 scripts/results.py` (scripts/pages/pruning_tables.py), which this script
# runs last; `python3 scripts/results.py --check` (CI) fails when a page and its files
# disagree.
#
# STUDIES=N keeps the first N studies (a smoke run: the files then go to
# results/pruning/data/, not docs/); LIVE_STUDIES=N runs the live check on
# the first N studies only (default: all); SKIP_LIVE=1 reuses the previous live
# result; REUSE=1 reuses replays newer than the candidates; SDR_BIN=PATH uses that
# binary instead of building one (e.g. to re-score existing replays with a new judge).
set -euo pipefail
cd "$(dirname "$0")/.."

SET=${CANDIDATES:-gemma3}
OUT=results/pruning
CSV=data/iu-xray/indiana_reports.csv
SMOL_GEN=data/candidates/iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl  # SmolLM2-135M, same settings
OLD_GEN=data/candidates/iu-test-smollm2-k8-p2.jsonl  # SmolLM2, without prefill and penalty
STANDINS=data/candidates/iu-test-k5.jsonl             # format-keeping stand-ins, K = 5
case "$SET" in
  gemma3)
    GEN=data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl
    GEN_ARGS=(--limit 100 -k 8 --prompt p2 --context indication --max-tokens 160 --seed 0
      --prefill Findings: --repetition-penalty 1.2) ;;
  smollm2)
    GEN=$SMOL_GEN
    GEN_ARGS=(--limit 50 -k 8 --prompt p2 --context indication --max-tokens 160 --seed 0
      --prefill Findings: --repetition-penalty 1.2)
    OUT=results/pruning/smollm2 ;;
  *) echo "pruning-results: CANDIDATES must be gemma3 or smollm2, not $SET" >&2; exit 2 ;;
esac
DATA=docs/results/pruning
mkdir -p "$OUT"

bash scripts/fetch-model.sh >/dev/null
bash scripts/fetch-minilm.sh >/dev/null
# The BERTScore judge of every table: independent of the reward's all-mpnet-base-v2.
JUDGE=(--bertscore-model "${SDR_HOME:-$HOME/.cache/sdr}/models/all-MiniLM-L6-v2" --judge-f1)
if [ "$SET" = smollm2 ]; then GGUF=$(bash scripts/fetch-smollm2.sh); else GGUF=$(bash scripts/fetch-gemma3.sh); fi
MODEL_ARGS=(--gguf "$GGUF")
if [ -n "${SDR_BIN:-}" ]; then
  SDR=$SDR_BIN
else
  bash scripts/build-sdr.sh -q
  SDR="${CARGO_TARGET_DIR:-target}/release/sdr"
fi

if [ -n "${REGENERATE:-}" ] || [ ! -s "$GEN" ]; then
  echo "== generating candidates: sdr generate ${GEN_ARGS[*]}"
  "$SDR" generate "${MODEL_ARGS[@]}" "${GEN_ARGS[@]}" -o "$GEN"
fi

if [ -n "${STUDIES:-}" ]; then
  head -n "$STUDIES" "$GEN" > "$OUT/candidates.jsonl"
  GEN="$OUT/candidates.jsonl"
  DATA="$OUT/data"
fi

CORPUS=results/main-job/iu-train.safetensors
# Sentence embeddings shared by every step and run (scripts/main-job.sh sets the same folder).
CACHE_DIR=${SDR_CACHE_DIR:-results/sentence-cache}
mkdir -p results/main-job
if ! "$SDR" corpus info "$CORPUS" >/dev/null 2>&1; then
  echo "== building the train-split corpus"
  "$SDR" corpus build --input "$CSV" --format csv --split train --out "$CORPUS"
fi

# The candidates' parse, committed: the format table of every page that shows one is filled by
# scripts/results.py from it (scripts/pages/candidates.py).
if [ "$DATA" = docs/results/pruning ] && [ "$SET" = gemma3 ]; then
  python3 tools/candidate_stats.py --sdr "$SDR" --parse-json docs/results/candidates/parse.json \
    "$GEN" "$SMOL_GEN" "$OLD_GEN" > /dev/null
fi

# pack NAME: sdr eval's per-study lines and table of $OUT/NAME-* into $DATA/NAME/ (atomic,
# deterministic gzip), with run.json from the arguments after NAME (key=value JSON pairs).
pack() {
  python3 - "$OUT" "$DATA" "$@" <<'PY'
import gzip, json, os, sys
out, data, name, *kv = sys.argv[1:]
dest = os.path.join(data, name)
os.makedirs(dest, exist_ok=True)
def put(fname, blob):
    tmp = os.path.join(dest, f".{fname}.tmp")
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, os.path.join(dest, fname))
lines = open(os.path.join(out, f"{name}-per-study.jsonl"), "rb").read()
put("per_study.jsonl.gz", gzip.compress(lines, mtime=0))
put("table.csv", open(os.path.join(out, f"{name}-table.csv"), "rb").read())
meta = {k: json.loads(v) for k, v in (a.split("=", 1) for a in kv)}
put("run.json", (json.dumps(meta, indent=1, ensure_ascii=False) + "\n").encode())
PY
}
json_list() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@"; }

# Replays first; then one `sdr eval` over all runs, so each candidate's
# metrics (BERTScore above all) are computed once rather than once per policy.
RUNS=()
COMMANDS=()
COMPARE=()
run_policy() { # metric agg warmup [survivors]
  local metric=$1 agg=$2 wu=$3 s=${4:-1}
  local tag="${metric//[:=,]/_}-${agg//[:=,]/_}-wu$wu"
  local name="$metric@${agg//=/}"
  local label="pruning wu$wu"
  if [ "$s" != 1 ]; then tag="$tag-s$s"; label="$label s$s"; fi
  if [ -n "${REUSE:-}" ] && [ -s "$OUT/prune-$tag.jsonl" ] && [ "$OUT/prune-$tag.jsonl" -nt "$GEN" ]; then
    echo "== reusing $OUT/prune-$tag.jsonl (REUSE=1)"
  else
    echo "== [${SECONDS} s] sdr prune --replay: $metric@$agg, warm-up $wu, survivors $s"
    "$SDR" prune --replay "$GEN" --cache-dir "$CACHE_DIR" --corpus "$CORPUS" --metric "$metric" --agg "$agg" \
      --warmup "$wu" --survivors "$s" --quiet -o "$OUT/prune-$tag.jsonl"
  fi
  # Standard best-of-K does not depend on the warm-up: one row per policy.
  if [ "$wu" = 1 ] && [ "$s" = 1 ]; then
    RUNS+=(--run "$name standard=$OUT/prune-$tag.jsonl#standard_text")
  fi
  RUNS+=(--run "$name $label=$OUT/prune-$tag.jsonl")
  COMPARE+=(--compare "$name $label=$name standard")
  COMMANDS+=("$name $label" "sdr prune --replay $GEN --corpus $CORPUS --metric $metric --agg $agg --warmup $wu --survivors $s")
}

# The paper's three distances; `s2` = two survivors decoded to their end (beyond Alg. 1).
for metric in chamfer hausdorff hung-nn; do
  run_policy "$metric" min 1
  run_policy "$metric" min 1 2
done
run_policy chamfer min 2

echo "== [${SECONDS} s] sdr eval (all runs in one table)"
"$SDR" eval --candidates "$GEN" "${RUNS[@]}" "${COMPARE[@]}" "${JUDGE[@]}" \
  --per-study "$OUT/$SET-per-study.jsonl" -o "$OUT/$SET-table.md" > /dev/null
pack "$SET" "date=\"$(date -u +%Y-%m-%d)\"" "candidates=\"$GEN\"" \
  "generate=$(json_list sdr generate --gguf "$(basename "$GGUF")" "${GEN_ARGS[@]}")" \
  "corpus=\"$CORPUS\"" "commands=$(json_list "${COMMANDS[@]}")" "judge=$(json_list "${JUDGE[@]##*/}")"

# The same policies on the format-keeping stand-ins (reports of other studies, K = 5): the
# policy's quality apart from the generator's. No token boundaries are stored there, so
# tokens are pseudo-tokens (words and punctuation; `estimated` in the output).
RUNS=()
COMPARE=()
COMMANDS=()
[ "$SET" = gemma3 ] && for metric in chamfer hausdorff hung-nn; do
  echo "== [${SECONDS} s] sdr prune --replay (stand-ins): $metric@min, warm-up 1"
  "$SDR" prune --replay "$STANDINS" --cache-dir "$CACHE_DIR" --corpus "$CORPUS" --metric "$metric" --agg min \
    --warmup 1 --quiet -o "$OUT/standins-prune-$metric.jsonl"
  RUNS+=(--run "$metric@min standard=$OUT/standins-prune-$metric.jsonl#standard_text")
  RUNS+=(--run "$metric@min pruning wu1=$OUT/standins-prune-$metric.jsonl")
  COMPARE+=(--compare "$metric@min pruning wu1=$metric@min standard")
  COMMANDS+=("$metric@min pruning wu1" "sdr prune --replay $STANDINS --corpus $CORPUS --metric $metric --agg min --warmup 1")
done
if [ "$SET" = gemma3 ]; then
  "$SDR" eval --candidates "$STANDINS" "${RUNS[@]}" "${COMPARE[@]}" "${JUDGE[@]}" \
    --per-study "$OUT/standins-per-study.jsonl" -o "$OUT/standins-table.md" > /dev/null
  pack standins "date=\"$(date -u +%Y-%m-%d)\"" "candidates=\"$STANDINS\"" \
    "corpus=\"$CORPUS\"" "commands=$(json_list "${COMMANDS[@]}")" "judge=$(json_list "${JUDGE[@]##*/}")"
fi

# SKIP_LIVE=1 reuses the previous live result (the live run over all studies takes ~10 min).
if [ -z "${SKIP_LIVE:-}" ] || [ ! -s "$DATA/$SET/live.json" ]; then
  LIVE_ARGS=("${GEN_ARGS[@]}")
  LIVE_N=$(wc -l < "$GEN")
  if [ -n "${LIVE_STUDIES:-}" ] && [ "$LIVE_STUDIES" -lt "$LIVE_N" ]; then LIVE_N=$LIVE_STUDIES; fi
  LIVE_ARGS[1]=$LIVE_N  # --limit
  echo "== [${SECONDS} s] live pruning (local back-end), chamfer@min, warm-up 1, first $LIVE_N studies"
  start=$(date +%s)
  "$SDR" prune --cache-dir "$CACHE_DIR" --corpus "$CORPUS" --metric chamfer --agg min --warmup 1 "${MODEL_ARGS[@]}" "${LIVE_ARGS[@]}" \
    --full "$GEN" --quiet -o "$OUT/prune-live-chamfer-min-wu1.jsonl"
  secs=$(( $(date +%s) - start ))
  python3 - "$OUT/prune-chamfer-min-wu1.jsonl" "$OUT/prune-live-chamfer-min-wu1.jsonl" "$secs" "$DATA/$SET/live.json" <<'PY'
import json, os, sys
rep = [json.loads(l) for l in open(sys.argv[1])]
live = [json.loads(l) for l in open(sys.argv[2])]
same = sum(r["chosen"] == l["chosen"] and r["tokens_used"] == l["tokens_used"] and r["text"] == l["text"]
           for r, l in zip(rep, live))
out = {"policy": "chamfer@min", "warmup": 1, "studies": len(live),
       "tokens_used": sum(l["tokens_used"] for l in live),
       "tokens_full": sum(l["tokens_full"] for l in live),
       "seconds": int(sys.argv[3]), "same_as_replay": same}
os.makedirs(os.path.dirname(sys.argv[4]), exist_ok=True)
tmp = sys.argv[4] + ".tmp"
open(tmp, "w").write(json.dumps(out, indent=1) + "\n")
os.replace(tmp, sys.argv[4])
PY
fi
if [ "$DATA" = docs/results/pruning ]; then python3 scripts/results.py >/dev/null; fi
echo "== wrote $DATA/$SET/"
